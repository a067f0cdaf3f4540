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

use crate::engine::{BatchOp, Durability, Engine, KeyValue, Snapshot, WriteBatch};
use crate::error::StorageError;

type Map = OrdMap<Vec<u8>, Vec<u8>>;

/// An [`Engine`] that keeps everything in memory (`--storageEngine inMemory`).
#[derive(Default)]
pub struct MemoryEngine {
    map: RwLock<Map>,
}

impl MemoryEngine {
    /// An empty engine.
    pub fn new() -> Self {
        MemoryEngine::default()
    }

    /// An empty engine behind the `Arc<dyn Engine>` that `Storage::open` takes.
    pub fn shared() -> Arc<dyn Engine> {
        Arc::new(MemoryEngine::new())
    }
}

impl Engine for MemoryEngine {
    fn name(&self) -> &'static str {
        "inMemory"
    }

    fn snapshot(&self) -> Arc<dyn Snapshot> {
        Arc::new(MemorySnapshot {
            map: self.map.read().clone(),
        })
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<(), StorageError> {
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

    fn sync(&self) -> Result<(), StorageError> {
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
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, StorageError> {
        Ok(self.map.get(key).cloned())
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, StorageError> {
        if limit == 0 || range_is_empty(start, end) {
            return Ok(Vec::new());
        }
        // imbl ranges take owned bounds of the key type.
        let owned = |b: Bound<&[u8]>| match b {
            Bound::Included(k) => Bound::Included(k.to_vec()),
            Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let range = self.map.range((owned(start), owned(end)));
        let pick = |(k, v): (&Vec<u8>, &Vec<u8>)| (k.clone(), v.clone());
        Ok(if reverse {
            range.rev().take(limit).map(pick).collect()
        } else {
            range.take(limit).map(pick).collect()
        })
    }
}

/// True when no key can satisfy both bounds; ordered-map range APIs panic on an
/// inverted range, and callers may legitimately ask for one (e.g. `$gt: 5, $lt: 3`).
pub(crate) fn range_is_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
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
        assert_eq!(e.size_on_disk(), 0);
        assert!(e.sync().is_ok());
    }

    #[test]
    fn inverted_ranges_are_empty() {
        type Case<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>, bool);
        let cases: &[Case<'_>] = &[
            (Bound::Included(b"b"), Bound::Excluded(b"a"), true),
            (Bound::Included(b"a"), Bound::Excluded(b"a"), true),
            (Bound::Included(b"a"), Bound::Included(b"a"), false),
            (Bound::Excluded(b"a"), Bound::Included(b"a"), true),
            (Bound::Unbounded, Bound::Excluded(b"a"), false),
        ];
        for (s, e, want) in cases {
            assert_eq!(range_is_empty(*s, *e), *want, "{s:?} {e:?}");
        }
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn matches_btreemap_model(ops in conformance::proptest_ops()) {
            conformance::check_against_model(&factory(), &ops);
        }
    }
}
