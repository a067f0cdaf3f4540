//! Reads at a point in time: `readConcern: {level: "snapshot"}` with or
//! without `atClusterTime`, on find, aggregate and distinct outside a
//! transaction and on `startTransaction`.
//!
//! The history is a list of engine snapshots, each taken inside the
//! oplog's lock right after a commit, with the `ts` of that commit's last
//! entry ([`SnapshotHistory::after_commit`]): the snapshot kept for `ts`
//! sees exactly the writes at or before it, so a read at `T` reads the
//! newest kept snapshot at or before `T`. Engines keep what a held
//! snapshot sees however long it is held (the contract's promise that
//! cursors rely on), so this works on every engine that has snapshots.
//!
//! Holding snapshots keeps old versions alive (memory for `inMemory`,
//! versions compaction must keep for lsm), so history is kept only while
//! snapshot reads happen: the first one starts it (writing a no-op entry
//! so the history begins with a snapshot of the present), and it stops,
//! dropping everything, once no snapshot read came for the history window
//! (`minSnapshotHistoryWindowInSeconds`, 300 by default). Snapshots older
//! than the window are dropped, and at most [`MAX_KEPT`] are kept. A time
//! before the history begins, or dropped from it, is 239 SnapshotTooOld,
//! as mongod answers a time older than its window; so is any
//! `atClusterTime` that is not the answer of an earlier snapshot read in
//! the window or later than one (mongod keeps history whether or not
//! snapshot reads happen).
//!
//! On an engine whose snapshots each hold a store connection (postgres),
//! no history is kept: a snapshot read of the present answers the cluster
//! time it covers and keeps its snapshot a while, so a snapshot session's
//! later reads at that time read it too ([`held_snapshot`]); other times
//! are 239, and a transaction at `atClusterTime` is 238 NotImplemented.
//!
//! Gap: the catalog is the present one: an index built after the read's
//! time has no keys for the documents the snapshot holds (mongod answers
//! 246 SnapshotUnavailable for a collection changed after it).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Engine, Snapshot};
use bson::raw::cstr;
use bson::{RawBsonRef, RawDocumentBuf, Timestamp};
use parking_lot::Mutex;

use super::ReplState;
use crate::commands::Context;
use crate::request::CommandRequest;

/// mongod's default `minSnapshotHistoryWindowInSeconds`.
pub const DEFAULT_WINDOW_SECONDS: u64 = 300;

/// The most snapshots kept: past it the oldest go (their times become
/// SnapshotTooOld), so a heavy write load cannot make the history hold
/// unbounded versions.
pub const MAX_KEPT: usize = 20_000;

fn key(ts: Timestamp) -> (u32, u32) {
    (ts.time, ts.increment)
}

struct Kept {
    ts: Timestamp,
    at: Instant,
    snap: Arc<dyn Snapshot>,
}

#[derive(Default)]
struct History {
    kept: VecDeque<Kept>,
    /// The last snapshot read; history stops a window after it.
    last_use: Option<Instant>,
}

/// The snapshots kept for reads at a point in time; see the module doc.
pub struct SnapshotHistory {
    window: Duration,
    /// Whether commits are recorded (read without the lock on every commit).
    active: AtomicBool,
    inner: Mutex<History>,
    /// On an engine without a history: the snapshots snapshot reads took,
    /// by the time they answered (see [`held_snapshot`]).
    held: Mutex<VecDeque<Kept>>,
}

/// How many snapshots [`held_snapshot`] keeps at most: each holds a store
/// connection.
pub const MAX_HELD: usize = 8;

/// How long [`held_snapshot`] keeps one.
pub const HELD_WINDOW: Duration = Duration::from_secs(60);

impl SnapshotHistory {
    pub fn new(window: Duration) -> SnapshotHistory {
        SnapshotHistory {
            window,
            active: AtomicBool::new(false),
            inner: Mutex::new(History::default()),
            held: Mutex::new(VecDeque::new()),
        }
    }

    /// Keeps `snap` as the snapshot of time `ts` (replacing an older one
    /// of the same time), dropping those past [`HELD_WINDOW`] or
    /// [`MAX_HELD`].
    fn hold(&self, ts: Timestamp, snap: Arc<dyn Snapshot>) {
        let now = Instant::now();
        let mut held = self.held.lock();
        held.retain(|k| k.ts != ts && now.saturating_duration_since(k.at) <= HELD_WINDOW);
        held.push_back(Kept { ts, at: now, snap });
        while held.len() > MAX_HELD {
            held.pop_front();
        }
    }

    /// The snapshot kept for time `ts`, if it still is.
    fn held(&self, ts: Timestamp) -> Option<Arc<dyn Snapshot>> {
        let now = Instant::now();
        let mut held = self.held.lock();
        held.retain(|k| now.saturating_duration_since(k.at) <= HELD_WINDOW);
        held.iter().find(|k| k.ts == ts).map(|k| k.snap.clone())
    }

    /// Records the state right after a commit whose last oplog entry is
    /// `ts`. The oplog calls it inside its lock, so no later entry has
    /// committed yet: the snapshot holds exactly the writes up to `ts`.
    pub fn after_commit(&self, engine: &Arc<dyn Engine>, ts: Timestamp) {
        if !self.active.load(Ordering::Acquire) {
            return;
        }
        let snap = engine.snapshot();
        let now = Instant::now();
        let mut h = self.inner.lock();
        let idle = h
            .last_use
            .is_none_or(|u| now.saturating_duration_since(u) > self.window);
        match snap {
            Ok(snap) if !idle => {
                h.kept.push_back(Kept { ts, at: now, snap });
                // The oldest is needed while the next one is in the window
                // (times between the two read it).
                while h.kept.len() > MAX_KEPT
                    || (h.kept.len() > 1
                        && h.kept
                            .get(1)
                            .is_some_and(|k| now.saturating_duration_since(k.at) > self.window))
                {
                    h.kept.pop_front();
                }
            }
            // Unused for a window, or a commit not recorded (the history
            // would have a hole): stop, and start afresh at the next read.
            _ => {
                h.kept.clear();
                self.active.store(false, Ordering::Release);
            }
        }
    }

    /// Starts recording if it is not, and notes a use.
    fn touch(&self) -> bool {
        let mut h = self.inner.lock();
        h.last_use = Some(Instant::now());
        if !self.active.load(Ordering::Acquire) {
            h.kept.clear();
            self.active.store(true, Ordering::Release);
        }
        h.kept.is_empty()
    }

    /// The newest kept snapshot at or before `at` (the newest of all when
    /// `None`), with its time.
    fn find(&self, at: Option<Timestamp>) -> Option<(Timestamp, Arc<dyn Snapshot>)> {
        let h = self.inner.lock();
        let found = match at {
            None => h.kept.back(),
            Some(t) => h.kept.iter().rev().find(|k| key(k.ts) <= key(t)),
        };
        found.map(|k| (k.ts, k.snap.clone()))
    }

    fn newest(&self) -> Option<Timestamp> {
        self.inner.lock().kept.back().map(|k| k.ts)
    }

    /// How many snapshots are kept (for tests and diagnostics).
    pub fn kept(&self) -> usize {
        self.inner.lock().kept.len()
    }
}

fn too_old(t: Timestamp) -> MongoError {
    MongoError::new(
        ErrorCode::SnapshotTooOld,
        format!(
            "Read timestamp Timestamp({}, {}) is older than the oldest available timestamp.",
            t.time, t.increment
        ),
    )
}

/// An engine whose every snapshot holds a store connection (`postgres`:
/// `Capabilities::blocking_io`) cannot keep a history of them: reads at a
/// point in time are 238 NotImplemented there.
fn refuse_remote_engine(storage: &bisondb_storage::Storage) -> MongoResult<()> {
    if storage.engine().capabilities().blocking_io {
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!(
                "readConcern atClusterTime (reading at a past cluster time) is not supported on the {} storage engine",
                storage.engine_name()
            ),
        ));
    }
    Ok(())
}

/// The snapshot a read at `at` (the present when `None`) reads, and the
/// cluster time it stands for.
pub fn snapshot_for(
    repl: &ReplState,
    storage: &bisondb_storage::Storage,
    at: Option<Timestamp>,
) -> MongoResult<(Timestamp, Arc<dyn Snapshot>)> {
    refuse_remote_engine(storage)?;
    let history = repl.snapshots();
    let starting = history.touch();
    // Makes the history cover the present: a no-op entry commits (and is
    // recorded) after every write that was in flight. Needed when the
    // history starts, and for a time later than the newest kept one (a
    // write may hold a time at or before it and not have committed yet).
    let behind = match (at, history.newest()) {
        (_, None) => true,
        (Some(t), Some(newest)) => key(t) > key(newest),
        (None, Some(_)) => false,
    };
    if starting || behind {
        repl.oplog().noop(storage, "snapshot read")?;
    }
    match history.find(at) {
        Some(found) => Ok(found),
        None => Err(too_old(at.unwrap_or(Timestamp {
            time: 0,
            increment: 0,
        }))),
    }
}

/// On an engine without a history (postgres, where each snapshot holds a
/// store connection): a read of the present takes a snapshot, answers the
/// time it covers (the clock read before it starts: a write's time is
/// handed out after its commit, so every write this server answered with
/// a time at or before it is in the snapshot, as a mongos picks its latest
/// known time) and keeps it, so the session's later reads at that time
/// (a driver's snapshot session sends the first answer as `atClusterTime`)
/// read the same snapshot. Only those times can be read, on this server,
/// for [`HELD_WINDOW`] and while one of the last [`MAX_HELD`]: others are
/// 239 SnapshotTooOld.
fn held_snapshot(
    repl: &ReplState,
    storage: &bisondb_storage::Storage,
    at: Option<Timestamp>,
) -> MongoResult<(Timestamp, Arc<dyn Snapshot>)> {
    let history = repl.snapshots();
    match at {
        Some(t) => history.held(t).map(|snap| (t, snap)).ok_or_else(|| {
            MongoError::new(
                ErrorCode::SnapshotTooOld,
                format!(
                    "Read timestamp Timestamp({}, {}) is not available: the {} storage engine \
                     keeps no history, only the times this server's own snapshot reads answered \
                     in the last {} seconds",
                    t.time,
                    t.increment,
                    storage.engine_name(),
                    HELD_WINDOW.as_secs()
                ),
            )
        }),
        None => {
            let ts = repl.clock().now();
            let snap = storage.engine().snapshot().map_err(MongoError::from)?;
            history.hold(ts, snap.clone());
            Ok((ts, snap))
        }
    }
}

/// `Some(atClusterTime)` when the command asks for `readConcern: {level:
/// "snapshot"}` (the time `None` when it gives none); `None` otherwise.
/// `before_command` has checked the read concern's fields.
pub fn requested(req: &CommandRequest<'_>) -> Option<Option<Timestamp>> {
    let rc = req.generic().read_concern?;
    if !matches!(rc.get("level"), Ok(Some(RawBsonRef::String("snapshot")))) {
        return None;
    }
    Some(match rc.get("atClusterTime") {
        Ok(Some(RawBsonRef::Timestamp(ts))) => Some(ts),
        _ => None,
    })
}

/// Runs a find, aggregate or distinct outside a transaction at `at` (the
/// present when `None`), as `readConcern: {level: "snapshot"}` asks: the
/// command (and its cursor's later batches) reads one snapshot, and the
/// reply gives the time it read at as `atClusterTime` (in `cursor`, or at
/// the top for distinct), as mongod's does.
pub fn read_at(
    at: Option<Timestamp>,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    run: impl FnOnce(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>,
) -> MongoResult<RawDocumentBuf> {
    if req.name == "aggregate" && crate::fail_points::ends_in_out_or_merge(req.body) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "$out and $merge cannot be used with a 'snapshot' read concern level",
        ));
    }
    let state = ctx.state;
    let repl = state.repl();
    if !repl.is_mongos() {
        repl.require_initiated()?;
    }
    let (ts, snap) = if state.storage.engine().capabilities().blocking_io {
        held_snapshot(repl, &state.storage, at)?
    } else {
        snapshot_for(repl, &state.storage, at)?
    };
    let reader = bisondb_storage::StoreTxn::read_only(snap);
    let reply = reader.run(|| run(req, ctx))?;
    with_at_cluster_time(reply, ts)
}

/// `reply` with `atClusterTime: ts` in its `cursor`, or at the top when it
/// has none.
fn with_at_cluster_time(reply: RawDocumentBuf, ts: Timestamp) -> MongoResult<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    let mut placed = false;
    for el in reply.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match v {
            RawBsonRef::Document(c) if k.as_str() == "cursor" => {
                let mut c = c.to_owned();
                c.append(cstr!("atClusterTime"), ts);
                out.append(k, c);
                placed = true;
            }
            v => out.append(k, v),
        }
    }
    if !placed {
        out.append(cstr!("atClusterTime"), ts);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bisondb_storage::{Durability, MemoryEngine, WriteBatch};

    /// The `i`th time of second 100.
    fn ts(i: u32) -> Timestamp {
        let time = 100;
        Timestamp { time, increment: i }
    }

    fn write(engine: &Arc<dyn Engine>, k: &[u8], v: &[u8]) {
        let mut b = WriteBatch::new();
        b.put(k.to_vec(), v.to_vec());
        engine
            .write(b, Durability::Buffered)
            .unwrap_or_else(|e| panic!("{e}"));
    }

    fn value(h: &SnapshotHistory, at: Timestamp) -> Option<Vec<u8>> {
        let (_, snap) = h.find(Some(at))?;
        snap.get(b"k").unwrap_or_else(|e| panic!("{e}"))
    }

    #[test]
    fn a_time_reads_the_newest_commit_at_or_before_it() {
        let engine = MemoryEngine::shared();
        let h = SnapshotHistory::new(Duration::from_secs(300));
        // Nothing is recorded before the first use.
        write(&engine, b"k", b"0");
        h.after_commit(&engine, ts(1));
        assert_eq!(h.kept(), 0);
        assert!(h.touch(), "the history starts empty");
        for i in 2..=4u32 {
            write(&engine, b"k", format!("{i}").as_bytes());
            h.after_commit(&engine, ts(i * 10));
        }
        assert_eq!(h.kept(), 3);
        assert!(!h.touch());
        assert_eq!(value(&h, ts(20)), Some(b"2".to_vec()));
        assert_eq!(value(&h, ts(29)), Some(b"2".to_vec()));
        assert_eq!(value(&h, ts(30)), Some(b"3".to_vec()));
        assert_eq!(value(&h, ts(1000)), Some(b"4".to_vec()));
        // Before the history began: nothing to read.
        assert!(h.find(Some(ts(19))).is_none());
        assert_eq!(h.find(None).map(|f| f.0), Some(ts(40)));
    }

    #[test]
    fn history_stops_after_a_window_without_use() {
        let engine = MemoryEngine::shared();
        let h = SnapshotHistory::new(Duration::from_millis(200));
        h.touch();
        std::thread::sleep(Duration::from_millis(300));
        write(&engine, b"k", b"1");
        h.after_commit(&engine, ts(1));
        assert_eq!(h.kept(), 0, "idle longer than the window: dropped");
        assert!(!h.active.load(Ordering::Acquire));
        // Recording resumes with the next use.
        assert!(h.touch());
        write(&engine, b"k", b"2");
        h.after_commit(&engine, ts(2));
        assert_eq!(h.kept(), 1);
    }
}
