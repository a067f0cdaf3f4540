//! `replSetGetConfig` (mongosh `rs.conf()`): the set's configuration as
//! `replSetInitiate`/`replSetReconfig` stored it.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct ReplSetGetConfig {
    commitment_status: bool,
}

impl Command for ReplSetGetConfig {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut commitment_status = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "commitmentStatus" => {
                    commitment_status = fields::as_bool(req.name, "commitmentStatus", v)?
                }
                "includeNewlyAdded" => {
                    fields::as_bool(req.name, "includeNewlyAdded", v)?;
                }
                _ => {}
            }
        }
        Ok(ReplSetGetConfig { commitment_status })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let set = ctx.state.repl().require_initiated()?;
        let mut reply = doc! {"config": set.config};
        if self.commitment_status {
            // One member: every configuration is committed once stored.
            reply.insert("commitmentStatus", true);
        }
        reply::ok(reply)
    }
}
