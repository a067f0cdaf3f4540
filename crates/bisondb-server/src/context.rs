//! What a command runs with: the server state and what it knows about the
//! connection it arrived on.

use std::sync::Arc;

use bisondb_wire::Compressor;

use crate::state::ServerState;

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
    /// The retryable write the current command is (`crate::txn`), if any.
    pub txn: Option<crate::txn::OpTxn>,
    /// A test-only fail point asked to close the connection after the
    /// current command, without its reply (`onPrimaryTransactionalWrite`).
    pub hang_up: bool,
    /// This connection's entry in the operations registry (`op_ctx.rs`).
    pub client: Option<Arc<crate::op_ctx::Client>>,
    /// What the TLS handshake established (`None`: plaintext).
    pub tls: Option<crate::tls::PeerTls>,
    /// Who the connection is authenticated as (`auth/`).
    pub auth: crate::auth::ConnAuth,
}

pub struct Context<'a> {
    pub state: &'a Arc<ServerState>,
    pub conn: &'a mut ConnectionInfo,
}
