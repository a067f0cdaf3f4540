//! Tailable cursors on capped collections, and `awaitData`.
//!
//! A tailable cursor reads the collection in insertion order and, at the end of
//! the data, stays open: each `getMore` reads what was inserted after the last
//! record it examined (a record id, see `bisondb_storage`'s capped module). If
//! that record was evicted meanwhile, the cursor has lost its place and the
//! `getMore` fails with 136 CappedPositionLost, as mongod's collection scan does.
//!
//! With `awaitData`, a `getMore` that finds nothing waits for an insert into the
//! collection, up to its `maxTimeMS` (1 s by default). The wait happens in the
//! connection's task before the command runs ([`wait_for_data`]): it awaits the
//! collection's `watch` channel, so it neither polls nor blocks a runtime
//! worker thread, and only this connection (whose requests are sequential
//! anyway) waits.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, NaturalIter};
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use tokio::sync::watch;

use crate::state::ServerState;

/// How long an `awaitData` getMore waits when it sets no `maxTimeMS`.
pub const DEFAULT_AWAIT: Duration = Duration::from_secs(1);

/// What a tailable cursor keeps beside its document source.
#[derive(Debug, Clone)]
pub struct Tail {
    pub await_data: bool,
    /// The collection's highest committed record id; changes on every insert.
    pub inserts: watch::Receiver<u64>,
}

/// The documents of a capped collection in insertion order, matching a filter,
/// continuing after the last record examined each time it is asked again.
pub struct TailSource {
    coll: Collection,
    matcher: Matcher,
    /// The last record examined (0: none yet).
    last: Arc<AtomicU64>,
    scan: Option<NaturalIter>,
}

impl TailSource {
    pub fn new(coll: Collection, matcher: Matcher) -> TailSource {
        TailSource {
            coll,
            matcher,
            last: Arc::new(AtomicU64::new(0)),
            scan: None,
        }
    }

    /// Starts a scan after the last record examined, checking that record is
    /// still there.
    fn resume(&mut self) -> MongoResult<NaturalIter> {
        let last = self.last.load(Ordering::Acquire);
        if last == 0 {
            return Ok(self.coll.scan_natural(false));
        }
        if !self.coll.has_record(last)? {
            return Err(MongoError::new(
                ErrorCode::CappedPositionLost,
                format!("CollectionScan died due to position in capped collection being deleted. Last seen record id: RecordId({last})"),
            ));
        }
        Ok(self.coll.scan_natural_after(last))
    }
}

impl Iterator for TailSource {
    type Item = MongoResult<RawDocumentBuf>;

    /// `None` means "nothing more for now": the next call looks again.
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let scan = match self.scan.as_mut() {
                Some(s) => s,
                None => match self.resume() {
                    Ok(s) => self.scan.insert(s),
                    Err(e) => return Some(Err(e)),
                },
            };
            match scan.next() {
                None => {
                    // The snapshot is used up; a later call starts a new one.
                    self.scan = None;
                    return None;
                }
                Some(Err(e)) => return Some(Err(e.into())),
                Some(Ok((rid, doc))) => {
                    self.last.store(rid, Ordering::Release);
                    match self.matcher.try_matches(&doc) {
                        Ok(true) => return Some(Ok(doc)),
                        Ok(false) => continue,
                        Err(e) => return Some(Err(e)),
                    }
                }
            }
        }
    }
}

/// The getMore this request is, when it names an open `awaitData` cursor:
/// `(cursor id, namespace, how long to wait)`.
pub fn await_request(body: &RawDocument, state: &ServerState) -> Option<(i64, String, Duration)> {
    let mut iter = body.iter();
    let (name, id) = iter.next()?.ok()?;
    let RawBsonRef::Int64(id) = id else {
        return None;
    };
    if name.as_str() != "getMore" {
        return None;
    }
    let mut coll = None;
    let mut db = None;
    let mut wait = DEFAULT_AWAIT;
    for el in iter {
        let (k, v) = el.ok()?;
        match (k.as_str(), v) {
            ("collection", RawBsonRef::String(c)) => coll = Some(c),
            ("$db", RawBsonRef::String(d)) => db = Some(d),
            ("maxTimeMS", v) => {
                let ms = match v {
                    RawBsonRef::Int32(i) => i64::from(i),
                    RawBsonRef::Int64(i) => i,
                    RawBsonRef::Double(d) if d.is_finite() => d as i64,
                    _ => return None,
                };
                // Bad values are the command's to report; 0 means no wait.
                wait = Duration::from_millis(u64::try_from(ms).ok()?);
            }
            _ => {}
        }
    }
    let ns = format!("{}.{}", db?, coll?);
    state.cursors.is_awaiting(id, &ns).then_some((id, ns, wait))
}

/// Waits, at most `wait`, until the `awaitData` cursor `id` has a document to
/// return (or is gone). Returns at once when it already has one.
pub async fn wait_for_data(state: &ServerState, id: i64, ns: &str, wait: Duration) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        // Marks the current insert counter seen, then looks for a matching
        // document: an insert after the look wakes the wait below.
        let Some((mut inserts, ready)) = state.cursors.tail_ready(id, ns) else {
            return;
        };
        if ready {
            return;
        }
        tokio::select! {
            changed = inserts.changed() => {
                if changed.is_err() {
                    // The collection is gone; the getMore reports it.
                    return;
                }
            }
            _ = tokio::time::sleep_until(deadline) => return,
        }
    }
}
