//! `fsync`: flushes buffered writes into the storage engine's data files and syncs
//! them to disk. `lock: true` (blocking writes
//! for backups) is not supported.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct Fsync;

impl Command for Fsync {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "fsync" | "async" => {}
                "lock" => {
                    if fields::as_bool(req.name, "lock", v)? {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            "fsync with lock: true is not supported by BisonDB yet",
                        ));
                    }
                }
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(Fsync)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.storage.checkpoint()?;
        reply::ok(doc! {"numFiles": 1})
    }
}
