//! `whatsmyuri`: the client's address as the server sees it.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct WhatsMyUri;

impl Command for WhatsMyUri {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(WhatsMyUri)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {"you": ctx.conn.peer.clone()})
    }
}
