//! One module per command. Each defines a struct that is parsed from the request
//! (`Command::parse`), then executed against the server state (`Command::execute`),
//! so a command can be tested without a socket.

use std::sync::Arc;

use bisondb_error::MongoResult;
use bisondb_wire::Compressor;
use bson::RawDocumentBuf;

use crate::request::CommandRequest;
use crate::state::ServerState;

pub mod aggregate;
pub mod build_info;
pub mod bulk_write;
pub mod capped;
pub mod clustered;
pub mod coll_mod;
pub mod coll_stats;
pub mod configure_fail_point;
pub mod connection_status;
pub mod convert_to_capped;
pub mod count;
pub mod create;
pub mod create_indexes;
pub mod db_stats;
pub mod delete;
pub mod distinct;
pub mod drop;
pub mod drop_database;
pub mod drop_indexes;
pub mod end_sessions;
pub mod explain;
pub mod find;
pub mod find_and_modify;
pub mod fsync;
pub mod get_cmd_line_opts;
pub mod get_log;
pub mod get_more;
pub mod get_parameter;
pub mod hello;
pub mod host_info;
pub mod index_stats;
pub mod insert;
pub mod kill_cursors;
pub mod let_vars;
pub mod list_collections;
pub mod list_commands;
pub mod list_databases;
pub mod list_indexes;
pub mod ping;
pub mod profile;
pub mod rename_collection;
pub mod server_status;
pub mod shutdown;
pub mod timeseries;
pub mod update;
pub mod users_info;
pub mod validate;
pub mod views;
pub mod whatsmyuri;

pub mod util;

/// What a command knows about the connection it arrived on.
#[derive(Debug, Default, Clone)]
pub struct ConnectionInfo {
    pub id: i64,
    /// `host:port` of the peer, or a description for Unix sockets.
    pub peer: String,
    /// Compressors agreed in the handshake, in the client's order of preference.
    pub compressors: Vec<Compressor>,
    pub client_metadata: Option<bson::Document>,
    /// What the current command reports for its profile entry (filled only
    /// while its database profiles).
    pub op: crate::profiler::OpDebug,
}

pub struct Context<'a> {
    pub state: &'a Arc<ServerState>,
    pub conn: &'a mut ConnectionInfo,
}

/// A command: parse the request into a struct, then execute it.
pub trait Command: Sized {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self>;
    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf>;
}

/// Adapts a [`Command`] to the registry's handler signature.
pub fn run<C: Command>(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> MongoResult<RawDocumentBuf> {
    let _running = ctx.state.active.enter(req.name);
    C::parse(req)?.execute(ctx)
}
