//! Expiry of change-stream pre-images (`config.system.preimages`, written by
//! the oplog's observer, `oplog.rs`): a pre-image goes once the oplog no
//! longer holds its entry (its `_id.ts` is older than the oldest entry), as
//! mongod's `ChangeStreamExpiredPreImagesRemover` removes them; a stream
//! cannot reach an entry older than that anyway (286). The job runs every
//! 10 seconds (mongod's `expiredChangeStreamPreImageRemovalJobSleepSecs`),
//! and scans the pre-images only when the oldest entry moved since its last
//! pass (the oplog is truncated a stretch at a time).
//!
//! mongod's `changeStreamOptions.preAndPostImages.expireAfterSeconds`
//! cluster parameter is not modelled (BisonDB has no `setClusterParameter`):
//! pre-images live as long as their oplog entry.

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bisondb_error::MongoResult;
use bson::{RawBsonRef, Timestamp};

use super::oplog::{OPLOG_COLL, OPLOG_DB, PRE_IMAGES_COLL, PRE_IMAGES_DB};
use crate::state::ServerState;

/// How often the job runs.
const EVERY: Duration = Duration::from_secs(10);

/// At most this many pre-images go in one pass (the rest in the next).
const PER_PASS: usize = 10_000;

fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// Starts the job (it does nothing outside replica-set mode).
pub fn spawn(state: Arc<ServerState>) -> tokio::task::JoinHandle<()> {
    crate::background::spawn_periodic_writes(
        state,
        EVERY,
        remove_expired,
        |outcome| match outcome {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => {
                tracing::warn!(target: "QUERY", "removing expired change-stream pre-images: {e}")
            }
            Err(e) => tracing::warn!(target: "QUERY", "the pre-image remover stopped: {e}"),
        },
    )
}

/// Removes the pre-images whose oplog entry is gone; returns how many went.
pub fn remove_expired(state: &ServerState) -> MongoResult<usize> {
    if !state.repl().enabled() || !state.repl().oplog().is_active() {
        return Ok(0);
    }
    let (Some(oplog), Some(pre)) = (
        state.storage.collection(OPLOG_DB, OPLOG_COLL),
        state.storage.collection(PRE_IMAGES_DB, PRE_IMAGES_COLL),
    ) else {
        return Ok(0);
    };
    let oldest = match oplog.scan_natural(false).next() {
        Some(first) => {
            let (_, raw) = first?;
            match raw.get("ts").map_err(crate::request::invalid_bson)? {
                Some(RawBsonRef::Timestamp(t)) => pack(t),
                _ => return Ok(0),
            }
        }
        None => return Ok(0),
    };
    let done = &state.repl().oplog().pre_images_expired_before;
    if done.load(Ordering::Acquire) == oldest {
        return Ok(0);
    }
    let mut expired = Vec::new();
    for doc in pre.scan(false) {
        let doc = doc?;
        let Ok(Some(RawBsonRef::Document(id))) = doc.get("_id") else {
            continue;
        };
        let Ok(Some(RawBsonRef::Timestamp(ts))) = id.get("ts") else {
            continue;
        };
        if pack(ts) < oldest {
            expired.push(id.to_owned());
            if expired.len() >= PER_PASS {
                break;
            }
        }
    }
    let complete = expired.len() < PER_PASS;
    // Without an observer: each member's own pre-images, never in the oplog.
    let pre = pre.without_observer();
    for id in &expired {
        pre.delete(
            RawBsonRef::Document(id),
            bisondb_storage::Durability::Buffered,
        )?;
    }
    if complete {
        done.store(oldest, Ordering::Release);
    }
    Ok(expired.len())
}
