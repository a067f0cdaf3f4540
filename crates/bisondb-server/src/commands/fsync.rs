//! `fsync`: flushes buffered writes into the storage engine's data files and syncs
//! them to disk. With `lock: true` it also takes the fsync lock
//! (`fsync_lock.rs`): later writes wait until as many `fsyncUnlock` commands
//! have released it, so the flushed files can be copied or snapshotted.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

/// Where mongod's lock reply sends the reader.
const SEE_ALSO: &str = "http://dochub.mongodb.org/core/fsynccommand";

pub struct Fsync {
    lock: bool,
}

impl Command for Fsync {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut lock = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "fsync" | "async" => {}
                "lock" => lock = fields::as_bool(req.name, "lock", v)?,
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(Fsync { lock })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if !self.lock {
            ctx.state.storage.checkpoint()?;
            return reply::ok(doc! {"numFiles": 1});
        }
        // New writes wait from here on; the writes already running finish
        // before the flush, so the files hold every acknowledged write.
        let count = ctx.state.fsync_lock.lock();
        if let Err(e) = ctx.state.storage.checkpoint_and_settle() {
            ctx.state.fsync_lock.unlock();
            return Err(e.into());
        }
        tracing::warn!(
            lock_count = count,
            "the server is locked and no writes are allowed; run fsyncUnlock to unlock"
        );
        reply::ok(doc! {
            "info": "now locked against writes, use db.fsyncUnlock() to unlock",
            "lockCount": i64::from(count),
            "seeAlso": SEE_ALSO,
        })
    }
}
