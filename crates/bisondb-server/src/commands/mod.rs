//! One module per command, named after it (the registry lists the other
//! names a module serves). Each defines a struct that is parsed from the
//! request (`Command::parse`), then executed against the server state
//! (`Command::execute`), so a command can be tested without a socket. What
//! several commands share lives below them: `fields` (argument parsing),
//! `namespaces` (collection kinds), `stages`, `plan`, `write`, `cursor`.

use bisondb_error::MongoResult;
use bson::RawDocumentBuf;

pub use crate::context::{ConnectionInfo, Context};
use crate::request::CommandRequest;

pub mod abort_transaction;
pub mod aggregate;
pub mod authenticate;
pub mod build_info;
pub mod bulk_write;
pub mod check_metadata_consistency;
pub mod coll_mod;
pub mod coll_stats;
pub mod commit_transaction;
pub mod configure_fail_point;
pub mod connection_status;
pub mod convert_to_capped;
pub mod count;
pub mod create;
pub mod create_indexes;
pub mod create_role;
pub mod create_user;
pub mod current_op;
pub mod db_stats;
pub mod delete;
pub mod distinct;
pub mod drop;
pub mod drop_all_roles_from_database;
pub mod drop_all_users_from_database;
pub mod drop_database;
pub mod drop_indexes;
pub mod drop_role;
pub mod drop_user;
pub mod end_sessions;
pub mod explain;
pub mod find;
pub mod find_and_modify;
pub mod fsync;
pub mod fsync_unlock;
pub mod get_cmd_line_opts;
pub mod get_log;
pub mod get_more;
pub mod get_parameter;
pub mod grant_privileges_to_role;
pub mod grant_roles_to_role;
pub mod grant_roles_to_user;
pub mod hello;
pub mod host_info;
pub mod insert;
pub mod kill_all_sessions;
pub mod kill_all_sessions_by_pattern;
pub mod kill_cursors;
pub mod kill_op;
pub mod kill_sessions;
pub mod list_collections;
pub mod list_commands;
pub mod list_databases;
pub mod list_indexes;
pub mod log_rotate;
pub mod logout;
pub mod map_reduce;
pub mod ping;
pub mod profile;
pub mod refresh_logical_session_cache_now;
pub mod refresh_sessions;
pub mod rename_collection;
pub mod repl_set_freeze;
pub mod repl_set_get_config;
pub mod repl_set_get_status;
pub mod repl_set_initiate;
pub mod repl_set_reconfig;
pub mod repl_set_step_down;
pub mod revoke_privileges_from_role;
pub mod revoke_roles_from_role;
pub mod revoke_roles_from_user;
pub mod roles_info;
pub mod sasl_continue;
pub mod sasl_start;
pub mod server_status;
pub mod set_parameter;
pub mod shutdown;
pub mod start_session;
pub mod top;
pub mod update;
pub mod update_role;
pub mod update_user;
pub mod users_info;
pub mod validate;
pub mod whatsmyuri;

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
    C::parse(req)?.execute(ctx)
}
