//! The in-memory engine: no files, the reference model the persistent engines are
//! tested against.
//!
//! The whole key space is one persistent ordered map (`imbl::OrdMap`), whose clone
//! is O(1) and shares structure, so a snapshot is just a clone taken under the
//! lock. A batch is applied while the write lock is held, so a reader sees all of
//! it or none of it.

use std::ops::Bound;
use std::sync::Arc;

use imbl::OrdMap;
use parking_lot::RwLock;

use crate::engine::{
    owned_bound, range_is_empty, BatchOp, Capabilities, Durability, Engine, KeyValue, Snapshot,
    WriteBatch,
};
use crate::error::EngineError;

type Map = OrdMap<Vec<u8>, Vec<u8>>;

/// An [`Engine`] that keeps everything in memory (`--storageEngine inMemory`).
#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<Map>,
    /// Whatever must live as long as the engine (the server's lock on a dbpath
    /// it keeps other engines off); never read.
    _guard: Option<Box<dyn std::any::Any + Send + Sync>>,
}

impl MemoryEngine {
    /// The engine's name, as `--storageEngine` and `storage.bson` spell it.
    pub const NAME: &'static str = "inMemory";

    /// What the engine offers: nothing survives a restart.
    pub const CAPABILITIES: Capabilities = Capabilities { persistent: false };

    /// An empty engine.
    pub fn new() -> Self {
        MemoryEngine::default()
    }

    /// An empty engine that keeps `guard` alive until it is dropped.
    pub fn holding(guard: Box<dyn std::any::Any + Send + Sync>) -> Self {
        MemoryEngine {
            map: RwLock::default(),
            _guard: Some(guard),
        }
    }

    /// An empty engine behind the `Arc<dyn Engine>` that `Storage::open` takes.
    pub fn shared() -> Arc<dyn Engine> {
        Arc::new(MemoryEngine::new())
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
        Ok(Arc::new(MemorySnapshot {
            map: self.map.read().clone(),
        }))
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<(), EngineError> {
        if batch.is_empty() {
            return Ok(());
        }
        let mut map = self.map.write();
        for op in batch.into_ops() {
            match op {
                BatchOp::Put(k, v) => {
                    map.insert(k, v);
                }
                BatchOp::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
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
    map: Map,
}

impl Snapshot for MemorySnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        Ok(self.map.get(key).cloned())
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
        let range = self.map.range((owned_bound(start), owned_bound(end)));
        let pick = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        Ok(if reverse {
            range.rev().take(limit).map(pick).collect()
        } else {
            range.take(limit).map(pick).collect()
        })
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

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreemap_model(ops in conformance::proptest_ops()) {
            conformance::check_against_model(&factory(), &ops);
        }
    }
}
