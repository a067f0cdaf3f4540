//! `refreshLogicalSessionCacheNow` (test commands only): runs the session
//! cache's periodic refresh at once, writing `config.system.sessions`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::request::CommandRequest;
use crate::{reply, sessions};

pub struct RefreshLogicalSessionCacheNow;

impl Command for RefreshLogicalSessionCacheNow {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        sessions::only_generic_args(req)?;
        Ok(RefreshLogicalSessionCacheNow)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        sessions::refresh_now(ctx.state)?;
        reply::ok(doc! {})
    }
}
