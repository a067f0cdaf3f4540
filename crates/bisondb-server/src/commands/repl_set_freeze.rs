//! `replSetFreeze` (mongosh `rs.freeze()`): keeps a secondary from standing
//! for election. The only member of an initiated set is primary, which
//! mongod refuses to freeze (95 NotSecondary).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocumentBuf;

use super::{Command, Context};
use crate::fields;
use crate::request::CommandRequest;

pub struct ReplSetFreeze;

impl Command for ReplSetFreeze {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        if let Some(v) = req
            .body
            .get(req.name)
            .map_err(crate::request::invalid_bson)?
        {
            fields::as_i64(req.name, "replSetFreeze", v)?;
        }
        Ok(ReplSetFreeze)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.repl().require_initiated()?;
        Err(MongoError::new(
            ErrorCode::NotSecondary,
            "cannot freeze node when primary or running for election. state: Primary",
        ))
    }
}
