//! `cloneCollectionAsCapped` and `convertToCapped` in the catalog: a new capped
//! collection filled with another collection's documents in its natural order
//! (insertion order of a capped source, `_id` order otherwise), evicting as any
//! insert would. Secondary indexes are not copied (mongod keeps only `_id`).
//!
//! `convert_to_capped` holds the source's write lock from the copy until the
//! copy has replaced it in one catalog batch: a write to the source either
//! comes before the copy (and is in it) or finds the collection gone and
//! fails; none is silently lost.

use std::sync::atomic::Ordering;

use bson::{Document, RawDocument, RawDocumentBuf};

use super::{check_names, encode_entry, mark_dropped, purge_collection_keys, Storage};
use crate::error::StorageError;
use crate::layout;
use crate::store::Collection;
use bisondb_engine::{Durability, WriteBatch};

impl Storage {
    /// Makes the capped collection `db.name` store its entries by key (the
    /// oplog: each entry one key, its `ts`, which is also its record id and
    /// its place in natural order; see `store/capped.rs`). A collection
    /// written with natural-order keys (by a BisonDB before this layout)
    /// is converted: its documents stay where they are (already keyed by
    /// `ts`), the catalog entry is marked, then the natural-order keys are
    /// removed. Refused when a document is not keyed by a timestamp.
    /// Returns how many leftover keys were removed (0 when already done).
    pub fn order_capped_by_key(&self, db: &str, name: &str) -> Result<u64, StorageError> {
        let coll = {
            let _ddl = self.inner.ddl.lock();
            let coll = self
                .collection(db, name)
                .ok_or_else(|| StorageError::NamespaceNotFound(format!("{db}.{name}")))?;
            let state = coll.state().clone();
            let capped = state.capped.as_ref().ok_or_else(|| {
                StorageError::invalid_argument(format!("{db}.{name} is not capped"))
            })?;
            if !capped.by_key() {
                let _w = state.write_lock.lock();
                coll.check_keyed_by_ts_locked()?;
                capped.set_by_key(true);
                let written = encode_entry(db, name, &state).and_then(|entry| {
                    let mut batch = WriteBatch::new();
                    batch.put(layout::entry_key(db, name), entry);
                    Ok(self.inner.engine.write(batch, Durability::Buffered)?)
                });
                if let Err(e) = written {
                    capped.set_by_key(false);
                    return Err(e);
                }
            }
            coll
        };
        coll.purge_natural_keys()
    }
}

/// Documents per insert batch while copying.
const COPY_CHUNK: usize = 1024;

impl Storage {
    /// Creates the capped collection `db.to` (with `options`) holding the
    /// documents of `db.from`. `NamespaceNotFound` without a source,
    /// `NamespaceExists` when `to` exists; nothing is left behind on failure.
    pub fn clone_collection_as_capped(
        &self,
        db: &str,
        from: &str,
        to: &str,
        options: Document,
    ) -> Result<(), StorageError> {
        check_names(db, to)?;
        let mut next_id = self.inner.ddl.lock();
        let source = self
            .collection(db, from)
            .ok_or_else(|| StorageError::NamespaceNotFound(format!("{db}.{from}")))?;
        if self.collection(db, to).is_some() {
            return Err(StorageError::NamespaceExists(format!("{db}.{to}")));
        }
        let target = self.create_locked(&mut next_id, db, to, options)?;
        if let Err(e) = copy(&source, &target) {
            self.discard_locked(db, to)?;
            return Err(e);
        }
        Ok(())
    }

    /// Replaces `db.name` by a capped collection (with `options`) holding its
    /// documents, under the same name.
    pub fn convert_to_capped(
        &self,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<(), StorageError> {
        let replaced = {
            let mut next_id = self.inner.ddl.lock();
            let source = self
                .collection(db, name)
                .ok_or_else(|| StorageError::NamespaceNotFound(format!("{db}.{name}")))?;
            let old = source.state().clone();
            let _w = old.write_lock.lock();
            if old.dropped.load(Ordering::SeqCst) {
                return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")));
            }
            let temp = format!("tmp.convertToCapped.{name}");
            if self.collection(db, &temp).is_some() {
                return Err(StorageError::NamespaceExists(format!("{db}.{temp}")));
            }
            let target = self.create_locked(&mut next_id, db, &temp, options)?;
            let new = target.state().clone();
            let replaced = copy(&source, &target).and_then(|()| {
                let mut batch = WriteBatch::new();
                mark_dropped(&mut batch, old.id);
                batch.delete(layout::entry_key(db, &temp));
                batch.put(layout::entry_key(db, name), encode_entry(db, name, &new)?);
                self.inner
                    .engine
                    .write(batch, Durability::Buffered)
                    .map_err(StorageError::from)
            });
            if let Err(e) = replaced {
                self.discard_locked(db, &temp)?;
                return Err(e);
            }
            old.dropped.store(true, Ordering::SeqCst);
            let mut map = self.inner.collections.write();
            map.remove(&(db.to_string(), temp));
            map.insert((db.to_string(), name.to_string()), new);
            old.id
        };
        purge_collection_keys(self.inner.engine.as_ref(), replaced)
    }

    /// Drops a collection this module created and could not finish.
    fn discard_locked(&self, db: &str, name: &str) -> Result<(), StorageError> {
        if let Some(id) = self.unlink_locked(db, name)? {
            purge_collection_keys(self.inner.engine.as_ref(), id)?;
        }
        Ok(())
    }
}

/// Inserts every document of `source` into `target`, in `source`'s natural order.
fn copy(source: &Collection, target: &Collection) -> Result<(), StorageError> {
    let docs: Box<dyn Iterator<Item = Result<RawDocumentBuf, StorageError>>> = if source.is_capped()
    {
        Box::new(source.scan_natural(false).map(|r| r.map(|(_, d)| d)))
    } else {
        Box::new(source.scan(false))
    };
    let mut chunk: Vec<RawDocumentBuf> = Vec::with_capacity(COPY_CHUNK);
    let flush = |chunk: &mut Vec<RawDocumentBuf>| -> Result<(), StorageError> {
        let refs: Vec<&RawDocument> = chunk.iter().map(|d| d.as_ref()).collect();
        let out = target.insert_many(&refs, true, Durability::Buffered);
        chunk.clear();
        match out.errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(()),
        }
    };
    for doc in docs {
        chunk.push(doc?);
        if chunk.len() >= COPY_CHUNK {
            flush(&mut chunk)?;
        }
    }
    if !chunk.is_empty() {
        flush(&mut chunk)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use bisondb_engine::memory::MemoryEngine;
    use bson::{doc, rawdoc};

    fn ids(c: &Collection) -> Vec<i32> {
        c.scan_natural(false)
            .map(|r| r.map(|(_, d)| d.get_i32("_id").unwrap_or(-1)).unwrap_or(-2))
            .collect()
    }

    fn fill(s: &Storage, name: &str, n: i32) -> Collection {
        let c = s
            .get_or_create_collection("db", name)
            .unwrap_or_else(|e| panic!("{e}"));
        let docs: Vec<RawDocumentBuf> = (0..n).rev().map(|i| rawdoc! {"_id": i}).collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        assert_eq!(
            c.insert_many(&refs, true, Durability::Buffered).inserted,
            n as usize
        );
        c
    }

    #[test]
    fn clone_copies_in_natural_order_and_evicts() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        fill(&s, "src", 5);
        let options = doc! {"capped": true, "size": 1 << 20, "max": 3};
        s.clone_collection_as_capped("db", "src", "dst", options.clone())
            .unwrap_or_else(|e| panic!("{e}"));
        let dst = s.collection("db", "dst").unwrap_or_else(|| panic!("dst"));
        // mongod copies in the source's natural order (inserted 4 down to
        // 0) and keeps the newest three.
        assert_eq!(ids(&dst), vec![2, 1, 0]);
        assert_eq!(s.collection("db", "src").map(|c| c.count()), Some(5));
        let again = s.clone_collection_as_capped("db", "src", "dst", options.clone());
        assert!(matches!(again, Err(StorageError::NamespaceExists(_))));
        let missing = s.clone_collection_as_capped("db", "nope", "x", options);
        assert!(matches!(missing, Err(StorageError::NamespaceNotFound(_))));
        assert!(s.collection("db", "x").is_none());
    }

    #[test]
    fn convert_replaces_the_collection_under_its_name() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let stale = fill(&s, "c", 4);
        s.convert_to_capped("db", "c", doc! {"capped": true, "size": 1 << 20, "max": 2})
            .unwrap_or_else(|e| panic!("{e}"));
        let c = s.collection("db", "c").unwrap_or_else(|| panic!("c"));
        assert!(c.is_capped());
        assert_eq!(ids(&c), vec![1, 0]);
        let names: Vec<String> = s
            .list_collections("db")
            .into_iter()
            .map(|i| i.name)
            .collect();
        assert_eq!(names, vec!["c".to_string()]);
        // A handle on the old collection fails instead of writing nowhere.
        let late = rawdoc! {"_id": 99};
        let out = stale.insert_many(&[late.as_ref()], true, Durability::Buffered);
        assert!(matches!(
            out.errors.first(),
            Some((0, StorageError::NamespaceNotFound(_)))
        ));
    }
}
