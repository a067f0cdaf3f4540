//! `endSessions`: the client is done with these logical sessions; their cursors die.

use bisondb_error::MongoResult;
use bson::{doc, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct EndSessions {
    lsids: Vec<bson::Document>,
}

impl Command for EndSessions {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let v = req
            .body
            .get("endSessions")
            .map_err(crate::request::invalid_bson)?;
        let arr = match v {
            Some(v) => fields::as_array(req.name, "endSessions", v)?,
            None => return Err(fields::missing_field(req.name, "endSessions")),
        };
        let mut lsids = Vec::new();
        for item in arr {
            match item.map_err(crate::request::invalid_bson)? {
                RawBsonRef::Document(d) => lsids.push(fields::to_document(d)?),
                other => return Err(fields::wrong_type(req.name, "endSessions", other, "object")),
            }
        }
        Ok(EndSessions { lsids })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.cursors.kill_sessions(&self.lsids);
        ctx.state.sessions.end(&self.lsids);
        let ended: Vec<[u8; 16]> = self
            .lsids
            .iter()
            .filter_map(|l| match l.get("id") {
                Some(bson::Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice()).ok(),
                _ => None,
            })
            .collect();
        crate::txn::transaction::abort_sessions(ctx.state, |id| ended.contains(id));
        reply::ok(doc! {})
    }
}
