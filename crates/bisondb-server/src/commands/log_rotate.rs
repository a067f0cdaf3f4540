//! `logRotate`: renames the log file with a time suffix and opens a new one
//! (or reopens it, `systemLog.logRotate: reopen`), as SIGUSR1 does. Takes
//! `1` or `"server"` (the audit log BisonDB does not have is refused).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct LogRotate;

impl Command for LogRotate {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        match req.body.get("logRotate") {
            Ok(Some(RawBsonRef::String("server")))
            | Ok(Some(RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_))) => {
                Ok(LogRotate)
            }
            Ok(Some(RawBsonRef::String(other))) => Err(MongoError::new(
                ErrorCode::NoSuchKey,
                format!("Unknown log type for rotate: {other}"),
            )),
            _ => Ok(LogRotate),
        }
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        crate::log::rotate().map_err(|e| {
            MongoError::new(ErrorCode::Other(1), format!("Log rotation failed: {e}"))
        })?;
        reply::ok(doc! {})
    }
}
