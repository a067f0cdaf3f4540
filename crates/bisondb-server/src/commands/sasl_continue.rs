//! `saslContinue`: the next message of the conversation `saslStart` (or a
//! speculative one in `hello`) began on this connection.

use bisondb_error::MongoResult;
use bson::RawDocumentBuf;

use super::sasl_start::{payload_of, sasl_reply};
use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct SaslContinue {
    conversation_id: i32,
    payload: Vec<u8>,
}

impl Command for SaslContinue {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut id = None;
        let mut payload = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "saslContinue" => {}
                "conversationId" => {
                    id = Some(i32::try_from(fields::as_i64(n, "conversationId", v)?).unwrap_or(0))
                }
                "payload" => payload = Some(payload_of(n, v)?),
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(SaslContinue {
            conversation_id: id.ok_or_else(|| fields::missing_field(n, "conversationId"))?,
            payload: payload.ok_or_else(|| fields::missing_field(n, "payload"))?,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let r = crate::auth::sasl_continue(ctx, self.conversation_id, &self.payload)?;
        reply::ok(sasl_reply(&r))
    }
}
