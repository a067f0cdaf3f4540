//! The in-memory engine: no files, the reference model the persistent engines are
//! tested against.
//!
//! The whole key space is one persistent ordered map (`imbl::OrdMap`), whose clone
//! is O(1) and shares structure, so a snapshot is just a clone taken under the
//! lock. A batch is applied while the write lock is held, so a reader sees all of
//! it or none of it.

use std::collections::VecDeque;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

use imbl::OrdMap;
use parking_lot::{Mutex, RwLock};

use crate::engine::{
    owned_bound, range_is_empty, BatchOp, Capabilities, CommitPoint, Durability, Engine, KeyValue,
    Snapshot, WriteBatch,
};
use crate::error::EngineError;
use crate::txn::{LocalTransactions, Transaction, TxnStore};

type Map = OrdMap<Vec<u8>, Vec<u8>>;

/// How many of the newest commit points snapshots were taken at stay
/// readable by [`Engine::snapshot_at`] (while a snapshot at them is alive).
const KEPT_VERSIONS: usize = 64;

/// An [`Engine`] that keeps everything in memory (`--storageEngine inMemory`).
#[derive(Default)]
pub struct MemoryEngine {
    inner: Arc<Inner>,
    txns: Arc<LocalTransactions>,
    /// Whatever must live as long as the engine (the server's lock on a dbpath
    /// it keeps other engines off); never read.
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
}

/// The data, shared with the engine's transactions.
#[derive(Default)]
struct Inner {
    current: RwLock<Version>,
    /// The snapshots taken at each of the newest commit points, oldest first,
    /// for `snapshot_at`. Held weakly: a version stays readable while some
    /// snapshot of it is alive, so keeping it costs writes nothing (a map a
    /// snapshot shares is copied on write anyway, a map nobody holds is not).
    kept: Mutex<VecDeque<(u64, Weak<MemorySnapshot>)>>,
    /// The newest point in `kept` (0: none), so that most snapshots skip the lock.
    last_kept: AtomicU64,
}

/// The map after a commit point.
#[derive(Default, Clone)]
struct Version {
    point: u64,
    map: Map,
}

impl MemoryEngine {
    /// The engine's name, as `--storageEngine` and `storage.bson` spell it.
    pub const NAME: &'static str = "inMemory";

    /// What the engine offers: nothing survives a restart; snapshots at a
    /// commit point one of its snapshots reported, within the last
    /// versions snapshots were taken of.
    pub const CAPABILITIES: Capabilities = Capabilities {
        persistent: false,
        blocking_io: false,
        snapshot_at: true,
        shared: false,
    };

    /// An empty engine.
    pub fn new() -> Self {
        MemoryEngine::default()
    }

    /// An empty engine that keeps `guard` alive until it is dropped.
    pub fn holding(guard: Box<dyn std::any::Any + Send + Sync>) -> Self {
        MemoryEngine {
            _guard: Some(guard),
            ..MemoryEngine::default()
        }
    }

    /// An empty engine behind the `Arc<dyn Engine>` that `Storage::open` takes.
    pub fn shared() -> Arc<dyn Engine> {
        Arc::new(MemoryEngine::new())
    }
}

impl Inner {
    /// Remembers `snap` as the snapshot of its commit point, unless one is.
    fn keep(&self, snap: &Arc<MemorySnapshot>) {
        let point = snap.version.point;
        if self.last_kept.load(Ordering::Acquire) == point {
            return;
        }
        let mut kept = self.kept.lock();
        if kept.back().is_some_and(|(p, _)| *p >= point) {
            return;
        }
        kept.push_back((point, Arc::downgrade(snap)));
        if kept.len() > KEPT_VERSIONS {
            kept.pop_front();
        }
        self.last_kept.store(point, Ordering::Release);
    }
}

impl TxnStore for Inner {
    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        let version = self.current.read().clone();
        let snap = Arc::new(MemorySnapshot { version });
        if snap.version.point > 0 {
            self.keep(&snap);
        }
        Ok(snap)
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<(), EngineError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut current = self.current.write();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put(k, v) | BatchOp::Insert(k, v) => {
                    current.map.insert(k, v);
                }
                BatchOp::Delete(k) => {
                    current.map.remove(&k);
                }
            }
        }
        current.point = current.point.saturating_add(1);
        Ok(())
    }
}

impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        self.inner.snapshot()
    }

    fn snapshot_at(&self, point: CommitPoint) -> Result<Arc<dyn Snapshot>, EngineError> {
        let current = self.inner.current.read().clone();
        if point.0 == current.point {
            return Ok(Arc::new(MemorySnapshot { version: current }));
        }
        if point.0 > current.point {
            return Err(EngineError::InvalidArgument(format!(
                "commit point {} is ahead of the last commit ({})",
                point.0, current.point
            )));
        }
        let kept = self.inner.kept.lock();
        let alive = kept
            .iter()
            .find(|(p, _)| *p == point.0)
            .and_then(|(_, snap)| snap.upgrade());
        match alive {
            Some(snap) => Ok(snap),
            None => Err(EngineError::SnapshotTooOld(format!(
                "commit point {} is no longer kept",
                point.0
            ))),
        }
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError> {
        self.inner.write(batch, durability)
    }

    fn begin(&self) -> Result<Box<dyn Transaction>, EngineError> {
        self.txns.begin(self.inner.clone())
    }

    fn begin_on(&self, snapshot: Arc<dyn Snapshot>) -> Result<Box<dyn Transaction>, EngineError> {
        self.txns.begin_on(self.inner.clone(), snapshot)
    }

    fn sync(&self) -> Result<(), EngineError> {
        Ok(())
    }

    fn size_on_disk(&self) -> u64 {
        0
    }
}

/// A frozen version of the map.
struct MemorySnapshot {
    version: Version,
}

impl Snapshot for MemorySnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.version.map.get(key).cloned())
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        if limit == 0 || range_is_empty(start, end) {
            return Ok(Vec::new());
        }
        let range = self
            .version
            .map
            .range((owned_bound(start), owned_bound(end)));
        let pick = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        Ok(if reverse {
            range.rev().take(limit).map(pick).collect()
        } else {
            range.take(limit).map(pick).collect()
        })
    }

    fn commit_point(&self) -> Option<CommitPoint> {
        Some(CommitPoint(self.version.point))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::conformance;
    use proptest::prelude::*;

    fn factory() -> Arc<dyn Engine> {
        MemoryEngine::shared()
    }

    #[test]
    fn passes_engine_conformance() {
        conformance::run_all(&factory);
    }

    #[test]
    fn reports_name_and_zero_size() {
        let e = MemoryEngine::new();
        assert_eq!(e.name(), "inMemory");
        assert!(!e.capabilities().persistent);
        assert_eq!(e.size_on_disk(), 0);
        assert!(e.sync().is_ok());
    }

    /// Points older than the kept versions, or whose snapshots are all
    /// gone, are refused as too old; points not reached yet as invalid.
    #[test]
    fn snapshot_at_keeps_a_bounded_window() {
        let e = MemoryEngine::new();
        let mut points = Vec::new();
        let mut held = Vec::new();
        for i in 0..(KEPT_VERSIONS as u8 + 10) {
            let mut b = WriteBatch::new();
            b.put(vec![0], vec![i]);
            assert!(e.write(b, Durability::Buffered).is_ok());
            let s = e.snapshot().unwrap_or_else(|e| panic!("{e}"));
            points.push((s.commit_point(), i));
            held.push(s);
        }
        for (n, (point, value)) in points.iter().enumerate() {
            let point = point.unwrap_or_else(|| panic!("memory snapshots report their point"));
            let got = e.snapshot_at(point);
            if n < 10 {
                assert!(matches!(got, Err(EngineError::SnapshotTooOld(_))), "{n}");
            } else {
                let s = got.unwrap_or_else(|e| panic!("{n}: {e}"));
                assert_eq!(s.get(&[0]).ok().flatten(), Some(vec![*value]));
                assert_eq!(s.commit_point(), Some(point));
            }
        }
        let ahead = CommitPoint(KEPT_VERSIONS as u64 + 11);
        assert!(matches!(
            e.snapshot_at(ahead),
            Err(EngineError::InvalidArgument(_))
        ));
        let newest_but_one = points[points.len() - 2].0;
        drop(held);
        assert!(matches!(
            newest_but_one.map(|p| e.snapshot_at(p)),
            Some(Err(EngineError::SnapshotTooOld(_)))
        ));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreemap_model(ops in conformance::proptest_ops()) {
            conformance::check_against_model(&factory(), &ops);
        }
    }
}
