//! `fsyncUnlock`: releases one hold of the fsync lock that `fsync` with
//! `lock: true` took (`fsync_lock.rs`); writes resume when none is left.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct FsyncUnlock;

impl Command for FsyncUnlock {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        // mongod reads no field of it.
        Ok(FsyncUnlock)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let Some(count) = ctx.state.fsync_lock.unlock() else {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "fsyncUnlock called when not locked",
            ));
        };
        tracing::info!(lock_count = count, "fsyncUnlock complete");
        reply::ok(doc! {
            "info": "fsyncUnlock completed",
            "lockCount": i64::from(count),
        })
    }
}
