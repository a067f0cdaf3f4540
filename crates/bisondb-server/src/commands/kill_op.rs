//! `killOp`: interrupts the operation `op` (an opid from `currentOp`) at its
//! next check; its client gets 11601 Interrupted and its cursor is gone. As
//! mongod, the reply is the same whether or not the operation still runs.
//! Under `--auth` any user may kill its own operations; another user's
//! need `killop` on the cluster.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct KillOp {
    op: i64,
}

impl Command for KillOp {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut op = None;
        for el in req.body.iter().skip(1) {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "op" => {
                    let b = fields::to_bson(v)?;
                    op = Some(crate::op_ctx::opid_of(&b).ok_or_else(|| {
                        MongoError::new(
                            ErrorCode::TypeMismatch,
                            "Did not provide \"op\" field of type integer, as is required",
                        )
                    })?);
                }
                k if fields::is_generic_arg(k) => {}
                k => return Err(fields::unknown_field("killOp", k)),
            }
        }
        let op =
            op.ok_or_else(|| MongoError::new(ErrorCode::BadValue, "Did not provide \"op\" field"))?;
        Ok(KillOp { op })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // Without `killop` a user reaches only its own operations; another's
        // is left running with the same reply, as mongod.
        let whose = if crate::auth::has_cluster_action(ctx, crate::auth::Action::Killop)? {
            crate::op_ctx::Whose::All
        } else {
            crate::auth::own_ops(ctx)
        };
        let found = ctx.state.ops.kill(self.op, &whose);
        tracing::info!(target: "COMMAND", opid = self.op, found, "Going to kill op");
        reply::ok(doc! {"info": "attempting to kill op"})
    }
}
