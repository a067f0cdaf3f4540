//! `$currentOp`, the first stage of `{aggregate: 1}` on `admin`: one document
//! per operation in flight (`op_ctx.rs`), and with its options the idle
//! connections and idle cursors, as mongod reports them. The `currentOp`
//! command is this stage followed by a `$match` of its filter.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

use crate::state::ServerState;

const STAGE: &str = "$currentOp";

/// The stage's options.
#[derive(Debug, Default, Clone, Copy)]
pub struct Options {
    /// Idle connections are listed too (`idleConnections`, the command's `$all`).
    pub idle_connections: bool,
    /// Cursors no operation is using are listed too (`idleCursors`).
    pub idle_cursors: bool,
    /// Every user's operations (`allUsers`, which needs `inprog` under
    /// `--auth`); by default only the caller's.
    pub all_users: bool,
}

impl Options {
    /// Reads `{allUsers, idleConnections, idleCursors, idleSessions, localOps,
    /// truncateOps, backtrace}`. Without authentication every operation is
    /// everyone's, so `allUsers` lists the same; no session is ever idle
    /// inside a transaction here, so `idleSessions` adds nothing.
    pub fn parse(spec: &Bson) -> MongoResult<Options> {
        let Bson::Document(d) = spec else {
            return Err(MongoError::new(
                ErrorCode::FailedToParse,
                "$currentOp options must be specified in an object, but found: ".to_string()
                    + crate::fields::type_name(spec.element_type()),
            ));
        };
        let mut out = Options::default();
        for (k, v) in d {
            let flag = match v {
                Bson::Boolean(b) => *b,
                _ => {
                    return Err(MongoError::new(
                        ErrorCode::FailedToParse,
                        format!(
                            "The '{k}' parameter of the $currentOp stage must be a boolean value, but found: {}",
                            crate::fields::type_name(v.element_type())
                        ),
                    ))
                }
            };
            match k.as_str() {
                "idleConnections" => out.idle_connections = flag,
                "idleCursors" => out.idle_cursors = flag,
                "allUsers" => out.all_users = flag,
                "idleSessions" | "localOps" | "truncateOps" | "backtrace" => {}
                other => {
                    return Err(MongoError::new(
                        ErrorCode::FailedToParse,
                        format!("Unrecognized option '{other}' in {STAGE} stage."),
                    ))
                }
            }
        }
        Ok(out)
    }

    /// The stage's documents now: the operations (and idle cursors) of
    /// `whose`.
    pub fn report(self, state: &ServerState, whose: &crate::op_ctx::Whose) -> Vec<Document> {
        let host = crate::op_ctx::host(state);
        let mut docs = state.ops.report(&host, self.idle_connections, whose);
        if self.idle_cursors {
            docs.extend(state.cursors.idle_report(&host, whose));
        }
        docs
    }
}
