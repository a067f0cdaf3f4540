//! `ping`: answers `{ok: 1}` so clients can check liveness.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct Ping;

impl Command for Ping {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(Ping)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {})
    }
}
