//! `startSession`: a new logical session, `{id: {id: UUID}, timeoutMinutes}`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::request::CommandRequest;
use crate::{reply, sessions};

pub struct StartSession;

impl Command for StartSession {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        sessions::only_generic_args(req)?;
        Ok(StartSession)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let id = ctx.state.sessions.start();
        let minutes = i32::try_from(ctx.state.sessions.timeout_minutes()).unwrap_or(i32::MAX);
        reply::ok(doc! {"id": sessions::lsid_doc(&id), "timeoutMinutes": minutes})
    }
}
