//! The document store: documents in insertion order with `_id` as a unique
//! index (`store/records.rs`), or clustered by `_id` (clustered and capped
//! collections, and those of older dbpaths), with the collection's count and sizes (of its documents, of their keys, of
//! each index's entries) kept exact on every write.
//!
//! Each write to a collection runs under that collection's write lock, checks
//! what it must against a snapshot taken under the lock (duplicate `_id`s, the
//! current document), and commits the documents together with the updated stats
//! record in one atomic engine batch. Readers never take the lock: they read
//! snapshots, and iterators own theirs, so they are `'static` and `Send`.

use std::collections::{HashMap, HashSet};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError};
use bson::{Bson, RawBsonRef, RawDocument, RawDocumentBuf, Uuid};

use crate::catalog::{CollState, CollectionInfo};
use crate::error::StorageError;
use crate::index::{self, Entry, IndexInfo, IndexScan, IndexState};
use crate::keycode::encode_id;
use crate::layout::{self, StatsRecord};
use crate::observer::{Op, OpObserver, Target};
use bisondb_engine::{
    BatchOp, CommitGuard, Durability, Engine, EngineError, KeyValue, Snapshot, WriteBatch,
};
use bisondb_query::matcher::bounds::FieldBounds;
use key_bounds::BatchHighs;
pub(crate) use key_bounds::DocKeyBounds;

/// Documents fetched per engine scan by [`DocIter`].
const SCAN_CHUNK: usize = 256;

/// The `_id` of a document: its first field when the document is laid out as
/// stored documents are, otherwise found by name.
pub fn id_of(doc: &RawDocument) -> Option<RawBsonRef<'_>> {
    // An ObjectId `_id` in first place, read straight from the bytes: the
    // iterator checks the field name as UTF-8 and the element's bounds, 370
    // instructions of every insert of a time-series load for 12 bytes that
    // need no checking (any 12 bytes are an ObjectId).
    if let Some(bytes) = doc.as_bytes().get(4..OID_FIRST_END) {
        if let Some((&[0x07, b'_', b'i', b'd', 0], oid)) = bytes.split_first_chunk::<5>() {
            if let Ok(oid) = <[u8; 12]>::try_from(oid) {
                return Some(RawBsonRef::ObjectId(bson::oid::ObjectId::from_bytes(oid)));
            }
        }
    }
    if let Some(Ok((key, value))) = doc.iter().next() {
        if key.as_str() == "_id" {
            return Some(value);
        }
    }
    doc.get("_id").ok().flatten()
}

/// Where an ObjectId `_id` written first ends: the length prefix, the
/// element's type, `_id\0` and 12 bytes.
const OID_FIRST_END: usize = 4 + 1 + 4 + 12;

/// Result of [`Collection::insert_many`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct InsertOutcome {
    /// How many documents were inserted.
    pub inserted: usize,
    /// `(index in the input, error)`, ascending by index.
    pub errors: Vec<(usize, StorageError)>,
    /// Set when the documents were inserted but the requested sync failed
    /// (mongod reports this as a write concern error).
    pub durability_error: Option<StorageError>,
}

impl InsertOutcome {
    /// Records that the engine refused the batch of `accepted` documents:
    /// nothing of it was applied, so every one of them failed (an ordered
    /// insert reports only the first, as it stops there).
    pub(crate) fn batch_failed(&mut self, accepted: Vec<usize>, ordered: bool, e: StorageError) {
        if ordered {
            self.errors = accepted.first().map(|&i| vec![(i, e)]).unwrap_or_default();
        } else {
            self.errors
                .extend(accepted.into_iter().map(|i| (i, e.clone())));
            self.errors.sort_by_key(|(i, _)| *i);
        }
    }
}

/// What a [`Collection::modify`] callback decides to do with the document.
#[derive(Debug, Clone, PartialEq)]
pub enum Modify {
    /// Leave it as it is.
    Keep,
    /// Replace the existing document (its `_id` must not change).
    Replace(RawDocumentBuf),
    /// Remove the existing document.
    Delete,
    /// Insert this document; only valid when none exists (upsert). Its `_id` must
    /// be the one passed to `modify`.
    Insert(RawDocumentBuf),
}

/// What [`Collection::modify`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ModifyResult {
    /// No document had that `_id` and nothing was inserted.
    NotFound,
    /// The document exists and was kept.
    Unchanged,
    Replaced,
    Deleted,
    Inserted,
}

/// A cheap handle on one collection.
#[derive(Clone)]
pub struct Collection {
    engine: Arc<dyn Engine>,
    state: Arc<CollState>,
    /// Records each write in its batch (the oplog), when installed
    /// (`crate::observer`).
    observer: Option<Arc<dyn OpObserver>>,
    /// The catalog's version as this server read it last (shared stores).
    catalog_version: Arc<AtomicU64>,
    /// `db.name`, as it was named when this handle was obtained.
    ns: Arc<str>,
    db_len: usize,
}

impl std::fmt::Debug for Collection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Collection")
            .field("ns", &self.ns)
            .field("id", &self.state.id)
            .finish()
    }
}

impl Collection {
    pub(crate) fn new(
        engine: Arc<dyn Engine>,
        observer: Option<Arc<dyn OpObserver>>,
        catalog_version: Arc<AtomicU64>,
        state: Arc<CollState>,
        db: &str,
        name: &str,
    ) -> Collection {
        Collection {
            engine,
            observer,
            catalog_version,
            state,
            ns: Arc::from(format!("{db}.{name}")),
            db_len: db.len(),
        }
    }

    pub(crate) fn state(&self) -> &Arc<CollState> {
        &self.state
    }

    /// The secondary indexes (the `_id` index is implicit: documents are
    /// clustered by `_id`).
    pub fn indexes(&self) -> Vec<IndexInfo> {
        self.state.indexes.read().iter().map(|i| i.info()).collect()
    }

    /// Notes that a user operation used index `name` (`$indexStats`); `None`
    /// is the `_id` index. An unknown name (dropped meanwhile) is ignored.
    pub fn note_index_use(&self, name: Option<&str>) {
        match name {
            None => self.state.id_usage.note(),
            Some(n) => {
                if let Some(ix) = self.state.indexes.read().iter().find(|i| i.spec.name == n) {
                    ix.usage.note();
                }
            }
        }
    }

    /// The usage counters: the `_id` index's, then each secondary index's by name.
    pub fn index_usage(&self) -> ((u64, bson::DateTime), Vec<crate::IndexUsageInfo>) {
        let list = self.state.indexes.read().clone();
        let secondary = list.iter().map(|i| {
            let (ops, since) = i.usage.get();
            (i.spec.name.clone(), ops, since)
        });
        (self.state.id_usage.get(), secondary.collect())
    }

    /// The engine the collection is stored in.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.engine
    }

    /// `db.collection`.
    pub fn namespace(&self) -> &str {
        &self.ns
    }

    /// The database name.
    pub fn db(&self) -> &str {
        self.ns.get(..self.db_len).unwrap_or_default()
    }

    /// The collection name (without the database).
    pub fn name(&self) -> &str {
        self.ns.get(self.db_len + 1..).unwrap_or_default()
    }

    /// The internal collection id (tests check ids are never reused).
    #[cfg(test)]
    pub(crate) fn debug_id(&self) -> u64 {
        self.state.id
    }

    /// The collection's UUID (stable across renames).
    pub fn uuid(&self) -> Uuid {
        self.state.uuid
    }

    /// The collection's options (a view's `viewOn` and `pipeline`, a validator
    /// among them) as they are now, without copying them: `collMod` replaces
    /// the whole document, so a caller keeps a consistent version.
    pub fn options(&self) -> Arc<bson::Document> {
        self.state.options.read().clone()
    }

    /// Whether the collection keeps change-stream pre-images
    /// (`changeStreamPreAndPostImages: {enabled: true}` in its options).
    pub fn pre_images_enabled(&self) -> bool {
        matches!(
            self.state.options.read().get("changeStreamPreAndPostImages"),
            Some(bson::Bson::Document(d)) if d.get_bool("enabled").unwrap_or(false)
        )
    }

    /// What `listCollections` shows.
    pub fn info(&self) -> CollectionInfo {
        CollectionInfo {
            name: self.name().to_string(),
            options: self.state.options.read().as_ref().clone(),
            uuid: self.state.uuid,
            kind: "collection",
        }
    }

    /// Number of documents, O(1) (on a shared store, one read of the
    /// servers' stats records).
    pub fn count(&self) -> u64 {
        self.refresh_shared_stats();
        self.state.count.load(Ordering::Acquire)
    }

    /// Sum of the BSON sizes of the documents, O(1) (see [`Collection::count`]).
    pub fn data_size(&self) -> u64 {
        self.refresh_shared_stats();
        self.state.data_size.load(Ordering::Acquire)
    }

    /// On a shared store other servers change the count and sizes: reads
    /// them again (outside a transaction, whose own view decides). A failed
    /// read keeps the figures last read, and says so in the log.
    fn refresh_shared_stats(&self) {
        if self.state.server == 0 || txn::in_transaction() || shared::current().is_some() {
            return;
        }
        let loaded = self
            .engine
            .snapshot()
            .map_err(StorageError::from)
            .and_then(|snap| load_stats(snap.as_ref(), &self.state));
        if let Err(e) = loaded {
            tracing::warn!(ns = %self.ns, error = %e, "reading the collection's stats records");
        }
    }

    /// A point-in-time view of the whole engine, for reads that must agree.
    pub fn snapshot(&self) -> Result<Arc<dyn Snapshot>, StorageError> {
        // Inside a transaction: its view (`store/txn.rs`).
        if let Some(t) = txn::current() {
            return Ok(t.view());
        }
        Ok(self.engine.snapshot()?)
    }

    fn check_live(&self) -> Result<(), StorageError> {
        if self.state.dropped.load(Ordering::SeqCst) {
            return Err(StorageError::NamespaceNotFound(self.ns.to_string()));
        }
        Ok(())
    }

    /// Under the write lock: checks the collection still exists, takes the
    /// snapshot the write reads from (held until the write is done), and makes
    /// the cached count and size current.
    ///
    /// After the engine reopened its files following a fault, a batch reported
    /// as failed may have been applied after all; the stats record travels in the
    /// same batch as the documents, so it is the truth to reload. The generation
    /// is read after the snapshot is taken: an engine reopens only once nothing
    /// holds a snapshot of the old files, so the snapshot pins the generation
    /// until this write has been committed or refused.
    fn writable_snapshot_locked(&self) -> Result<Arc<dyn Snapshot>, StorageError> {
        self.check_live()?;
        if let Some(t) = txn::current() {
            if self.state.capped.is_some() {
                return Err(StorageError::Mongo(MongoError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    format!(
                        "Collection '{}' is a capped collection. Writes in transactions are not supported on capped collections.",
                        self.ns
                    ),
                )));
            }
            let view = t.view();
            if self.state.server != 0 {
                // Other servers change the stats: the transaction's change
                // is computed against them as its snapshot has them.
                load_stats(view.as_ref(), &self.state)?;
            }
            return Ok(view);
        }
        if let Some(w) = (self.state.server != 0).then(shared::current).flatten() {
            // Other servers change the stats: read them in the write's own
            // snapshot, so the change it makes is computed against them.
            let view = w.view();
            load_stats(view.as_ref(), &self.state)?;
            return Ok(view);
        }
        let snap = self.engine.snapshot()?;
        let generation = self.engine.generation();
        if self.state.stats_generation.load(Ordering::Acquire) == generation {
            return Ok(snap);
        }
        load_stats(snap.as_ref(), &self.state)?;
        self.state
            .stats_generation
            .store(generation, Ordering::Release);
        Ok(snap)
    }

    fn duplicate(&self, id: RawBsonRef<'_>) -> StorageError {
        StorageError::duplicate_id(&self.ns, Bson::try_from(id).unwrap_or(Bson::Null))
    }

    /// Inserts documents that were already validated and each carry an `_id`
    /// (normally as their first field). With `ordered`, stops at the first error
    /// and later documents are not attempted. All accepted documents of one call,
    /// plus the updated count/size record, go to the engine as one atomic batch.
    ///
    /// With `Durability::Sync` the engine is synced after the collection lock is
    /// released, so concurrent writers to one collection can share a sync.
    pub fn insert_many(
        &self,
        docs: &[&RawDocument],
        ordered: bool,
        durability: Durability,
    ) -> InsertOutcome {
        let mut out = self.insert_locked(docs, ordered);
        if durability == Durability::Sync && out.inserted > 0 {
            out.durability_error = self.engine.sync().err().map(StorageError::from);
        }
        out
    }

    fn insert_locked(&self, docs: &[&RawDocument], ordered: bool) -> InsertOutcome {
        let _w = self.state.write_lock.lock();
        if self.state.server == 0 {
            return self.insert_held(docs, ordered);
        }
        shared::retrying(
            self.engine.capabilities(),
            |again| {
                self.shared_guard(again)
                    .and_then(|guard| {
                        shared::run(&self.engine, Some(guard), || {
                            self.insert_held(docs, ordered)
                        })
                    })
                    .unwrap_or_else(|e| {
                        let mut out = InsertOutcome::default();
                        out.batch_failed((0..docs.len()).collect(), ordered, e);
                        out
                    })
            },
            |out| out.errors.iter().any(|(_, e)| shared::lost_race(e)),
        )
    }

    /// Under the write lock on a shared store: what the write's commit
    /// checks ([`shared::run`]), the collection's entry read again first
    /// when the write runs `again` after a lost race (perhaps to a catalog
    /// change of another server: the write then plans with the indexes it
    /// has now). The version is read before the write reads the indexes:
    /// the catalog's refresh publishes its version after the indexes.
    fn shared_guard(&self, again: bool) -> Result<CommitGuard, StorageError> {
        if again {
            let snap = self.engine.snapshot()?;
            crate::catalog::reload_entry_locked(
                snap.as_ref(),
                &self.state,
                self.db(),
                self.name(),
            )?;
        }
        let version = self
            .catalog_version
            .load(Ordering::Acquire)
            .max(self.state.catalog_version.load(Ordering::Acquire));
        Ok(CommitGuard {
            lock: layout::entry_key(self.db(), self.name()),
            key: layout::version_key(),
            expected: (version != 0).then(|| version.to_be_bytes().to_vec()),
        })
    }

    /// [`Collection::insert_locked`] under the write lock (and, on a shared
    /// store, in its write transaction).
    fn insert_held(&self, docs: &[&RawDocument], ordered: bool) -> InsertOutcome {
        let mut out = InsertOutcome::default();
        let in_txn = txn::current().is_some();
        if let Some(capped) = self.state.capped.as_ref().filter(|_| !in_txn) {
            return self.insert_capped_locked(capped, docs, ordered);
        }
        let ready = self
            .writable_snapshot_locked()
            .and_then(|snap| Ok((snap, self.next_record_id_locked(docs.len())?)));
        let (snap, mut next_rid) = match ready {
            Ok(ready) => ready,
            Err(e) => {
                let failing = if ordered {
                    docs.len().min(1)
                } else {
                    docs.len()
                };
                out.errors = (0..failing).map(|i| (i, e.clone())).collect();
                return out;
            }
        };
        let generation = self.engine.generation();
        // Inside a transaction its own writes are not below the bounds:
        // every insert looks its key up in the transaction's view. On a
        // shared store other servers insert below them.
        let bounds = if in_txn || self.state.server != 0 {
            None
        } else {
            self.doc_key_bounds_locked(snap.as_ref(), generation)
        };
        // Without bounds every insert looks its `_id` up: one request for the
        // whole batch (a round trip, on a store across a network) instead of
        // one per document. When it fails, each insert asks on its own and
        // reports its own error.
        let stored = (bounds.is_none() && docs.len() > 1)
            .then(|| self.stored_doc_keys(snap.as_ref(), docs).ok())
            .flatten();
        let mut highs = BatchHighs::default();
        let indexes = self.state.indexes.read().clone();
        // The same for the unique indexes' keys, which the index checks
        // would otherwise read one document at a time.
        let prefetched = match stored {
            Some(_) => self.stored_unique_keys(snap.as_ref(), docs, &indexes),
            None => HashMap::new(),
        };
        let snap: Arc<dyn Snapshot> = if prefetched.is_empty() {
            snap
        } else {
            Arc::new(Prefetched {
                inner: snap,
                known: prefetched,
            })
        };
        // A document, its `_id` entry (record-id collections), its index entries.
        let mut batch = WriteBatch::with_capacity(docs.len() * (2 + indexes.len()) + 1);
        let mut queued = QueuedKeys::default();
        let mut queued_unique: HashSet<Vec<u8>> = HashSet::new();
        let mut accepted: Vec<usize> = Vec::with_capacity(docs.len());
        let mut tally = self.tally_locked(&indexes);
        let mut became_multikey: Vec<Arc<IndexState>> = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let prepared = self
                .prepare_insert(
                    snap.as_ref(),
                    doc,
                    (&mut queued, &batch),
                    bounds.as_ref(),
                    stored.as_ref(),
                )
                .and_then(|key| {
                    if indexes.is_empty() {
                        return Ok((key, IndexWrites::default()));
                    }
                    let encoded = key.get(self.id_prefix_len()..).unwrap_or_default().to_vec();
                    let w = self.index_writes(
                        &indexes,
                        snap.as_ref(),
                        None,
                        Some(doc),
                        &encoded,
                        &mut queued_unique,
                    )?;
                    Ok((key, w))
                });
            match prepared {
                Ok((key, writes)) => {
                    queued.add(&key);
                    tally.add_doc(self.id_entry_len(key.len()), doc.as_bytes().len());
                    highs.note(&key);
                    self.queue_new(&mut batch, key, doc.as_bytes().to_vec(), &mut next_rid);
                    writes.apply(self.state.id, &mut batch, &mut became_multikey, &mut tally);
                    accepted.push(i);
                }
                Err(e) => {
                    out.errors.push((i, e));
                    if ordered {
                        break;
                    }
                }
            }
        }
        self.record_ids_used_locked(next_rid);
        if accepted.is_empty() {
            return out;
        }
        let observed = self.observed_inserts(docs, &accepted);
        match self.commit_inserts_locked(batch, &tally, &indexes, became_multikey, &observed) {
            Ok(()) => {
                self.raise_doc_key_bounds_locked(bounds, highs);
                out.inserted = accepted.len();
            }
            Err(e) => out.batch_failed(accepted, ordered, e),
        }
        out
    }

    /// Commits an insert's batch with its stats record (as
    /// [`Collection::commit_locked`] does) and marks the indexes it made multikey.
    /// A failed batch may still surface after the engine recovers, so the
    /// key bounds are read again next time.
    fn commit_inserts_locked(
        &self,
        batch: WriteBatch,
        tally: &StatsRecord,
        indexes: &[Arc<IndexState>],
        became_multikey: Vec<Arc<IndexState>>,
        observed: &[Op<'_>],
    ) -> Result<(), StorageError> {
        if let Err(e) = self.commit_locked(batch, tally, indexes, observed) {
            *self.state.max_doc_key.lock() = None;
            return Err(e);
        }
        for ix in became_multikey {
            ix.multikey.store(true, Ordering::Release);
        }
        Ok(())
    }

    /// `doc`'s document key, unless its `_id` is stored (in `stored`, the
    /// batch's keys looked up at once, when given; else in `snap`, unless
    /// the bounds prove it new) or queued earlier in this batch.
    fn prepare_insert(
        &self,
        snap: &dyn Snapshot,
        doc: &RawDocument,
        (queued, batch): (&mut QueuedKeys, &WriteBatch),
        bounds: Option<&DocKeyBounds>,
        stored: Option<&HashSet<Vec<u8>>>,
    ) -> Result<Vec<u8>, StorageError> {
        let id = id_of(doc)
            .ok_or_else(|| StorageError::invalid_argument("document has no _id field"))?;
        let key = self.id_key_for(id);
        let present = match stored {
            Some(stored) => stored.contains(&key),
            // Proven new by the bounds: skip the engine lookup.
            None if bounds.is_some_and(|b| b.proves_absent(&key)) => false,
            None => snap.get(&key)?.is_some(),
        };
        if present || queued.contains(&key, batch) {
            return Err(self.duplicate(id));
        }
        Ok(key)
    }

    /// Which of `docs`' document keys `snap` holds, in one
    /// [`Snapshot::get_many`] (documents without an `_id` are left out: their
    /// insert fails on its own).
    fn stored_doc_keys(
        &self,
        snap: &dyn Snapshot,
        docs: &[&RawDocument],
    ) -> Result<HashSet<Vec<u8>>, StorageError> {
        let keys: Vec<Vec<u8>> = docs
            .iter()
            .filter_map(|d| id_of(d))
            .map(|id| self.id_key_for(id))
            .collect();
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        let values = snap.get_many(&refs)?;
        Ok(keys
            .into_iter()
            .zip(values)
            .filter_map(|(k, v)| v.map(|_| k))
            .collect())
    }

    /// What `snap` holds under the unique-index keys of `docs`, read in one
    /// [`Snapshot::get_many`] (empty when there are none, or when the read
    /// failed: each check then asks on its own).
    fn stored_unique_keys(
        &self,
        snap: &dyn Snapshot,
        docs: &[&RawDocument],
        indexes: &[Arc<IndexState>],
    ) -> HashMap<Vec<u8>, Option<Vec<u8>>> {
        let unique: Vec<&Arc<IndexState>> = indexes.iter().filter(|ix| ix.spec.unique).collect();
        if unique.is_empty() {
            return HashMap::new();
        }
        let mut keys: Vec<Vec<u8>> = Vec::new();
        for doc in docs {
            let Some(id) = id_of(doc) else { continue };
            let encoded = encode_id(id);
            for ix in &unique {
                // A document whose keys cannot be made fails its own
                // insert later, with its own error.
                if let Ok((entries, _)) = index::entries(ix, self.state.id, doc, &encoded) {
                    keys.extend(entries.into_iter().map(|(e, _)| e.key));
                }
            }
        }
        let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
        match snap.get_many(&refs) {
            Ok(values) => keys.into_iter().zip(values).collect(),
            Err(_) => HashMap::new(),
        }
    }

    /// The bounds of stored document keys (see [`DocKeyBounds`]), read once per
    /// engine generation; `None` when they could not be read (every insert then
    /// looks its key up). The caller holds the write lock.
    fn doc_key_bounds_locked(&self, snap: &dyn Snapshot, generation: u64) -> Option<DocKeyBounds> {
        let mut cached = self.state.max_doc_key.lock();
        if let Some(b) = cached.as_ref() {
            if b.generation() == generation {
                return Some(b.clone());
            }
        }
        let (start, end) = self.id_key_range();
        let last = snap
            .scan(Bound::Included(&start), Bound::Excluded(&end), true, 1)
            .ok()?;
        let key = last.into_iter().next().map(|(k, _)| k).unwrap_or_default();
        let b = DocKeyBounds::new(generation, key);
        *cached = Some(b.clone());
        Some(b)
    }

    /// Records the keys a committed batch stored.
    fn raise_doc_key_bounds_locked(&self, bounds: Option<DocKeyBounds>, highs: BatchHighs) {
        let mut cached = self.state.max_doc_key.lock();
        *cached = bounds.map(|mut b| {
            highs.apply(&mut b);
            b
        });
        // Unknown before: stay unknown (they are read again next time).
    }

    /// The index entries to delete (those of `old`) and to add (those of
    /// `new`) for one document, checking unique indexes against `snap` and
    /// against keys this batch already queued (`queued_unique`).
    fn index_writes(
        &self,
        indexes: &[Arc<IndexState>],
        snap: &dyn Snapshot,
        old: Option<&RawDocument>,
        new: Option<&RawDocument>,
        encoded_id: &[u8],
        queued_unique: &mut HashSet<Vec<u8>>,
    ) -> Result<IndexWrites, StorageError> {
        let mut w = IndexWrites::default();
        // Unique keys this document adds; queued only once all its indexes pass.
        let mut unique_added: Vec<Vec<u8>> = Vec::new();
        for ix in indexes {
            let old_entries = match old {
                Some(d) => index::entries(ix, self.state.id, d, encoded_id)?.0,
                None => Vec::new(),
            };
            let (new_entries, multikey) = match new {
                Some(d) => index::entries(ix, self.state.id, d, encoded_id)?,
                None => (Vec::new(), false),
            };
            // Keys present before and after need no write (the common update).
            let unchanged = |key: &[u8], other: &[index::KeyedEntry]| {
                other.iter().any(|(e, _)| e.key.as_slice() == key)
            };
            for (e, _) in &old_entries {
                if !unchanged(&e.key, &new_entries) {
                    w.deletes.push((ix.id, e.key.clone(), e.value.len()));
                }
            }
            for (e, values) in new_entries {
                if !old_entries.is_empty() && unchanged(&e.key, &old_entries) {
                    continue;
                }
                if ix.spec.unique {
                    let taken = match snap.get(&e.key)? {
                        Some(owner) => owner != encoded_id,
                        None => false,
                    };
                    if taken || queued_unique.contains(&e.key) {
                        return Err(index::duplicate(&self.ns, ix, &values));
                    }
                    unique_added.push(e.key.clone());
                } else if ix.prepare_unique.load(Ordering::Acquire) {
                    // Keys of a non-unique index end with the `_id`: another
                    // document with these values shares the part before it.
                    let cut = e.key.len().saturating_sub(encoded_id.len());
                    let values_key = e.key.get(..cut).unwrap_or(&e.key);
                    if queued_unique.contains(values_key)
                        || index::other_owner(snap, values_key, encoded_id)?
                    {
                        return Err(index::duplicate(&self.ns, ix, &values));
                    }
                    unique_added.push(values_key.to_vec());
                }
                w.puts.push((ix.id, e));
            }
            if multikey && !ix.multikey.load(Ordering::Acquire) {
                w.multikey.push(ix.clone());
            }
        }
        queued_unique.extend(unique_added);
        Ok(w)
    }

    /// The `_id`s of documents that share a key of the non-unique index `ix`,
    /// one list per shared key in index order (what converting it to unique
    /// would violate). The caller holds the write lock.
    pub(crate) fn shared_keys_locked(
        &self,
        ix: &IndexState,
    ) -> Result<Vec<Vec<Bson>>, StorageError> {
        let snap = self.writable_snapshot_locked()?;
        let mut owners: std::collections::BTreeMap<Vec<u8>, Vec<Bson>> = Default::default();
        for doc in self.scan_in(snap, false) {
            let doc = doc?;
            let id =
                id_of(&doc).ok_or_else(|| StorageError::corrupt("stored document without _id"))?;
            let encoded = encode_id(id);
            let id = Bson::try_from(id).unwrap_or(Bson::Null);
            for (e, _) in index::entries(ix, self.state.id, &doc, &encoded)?.0 {
                let cut = if ix.spec.unique {
                    e.key.len()
                } else {
                    e.key.len().saturating_sub(encoded.len())
                };
                let ids = owners
                    .entry(e.key.get(..cut).unwrap_or(&e.key).to_vec())
                    .or_default();
                // One document may reach the same key through several array elements.
                if ids.last() != Some(&id) {
                    ids.push(id.clone());
                }
            }
        }
        Ok(owners.into_values().filter(|ids| ids.len() > 1).collect())
    }

    /// Builds `ix` over every document, writing its entries in chunks (the
    /// index is not in the catalog yet, so nobody reads them). The caller holds
    /// the write lock and purges the index's range if this fails. Returns
    /// whether the index is multikey, and the collection's stats record with
    /// the new index's entries in it, for the caller to commit with the index.
    pub(crate) fn build_index_locked(
        &self,
        ix: &IndexState,
    ) -> Result<(bool, StatsRecord), StorageError> {
        const CHUNK: usize = 8192;
        let snap = self.writable_snapshot_locked()?;
        let mut tally = self.tally_locked(&self.state.indexes.read());
        tally.indexes.push(ix.tally());
        let mut multikey = false;
        let mut batch = WriteBatch::with_capacity(CHUNK);
        // Unique keys of the current chunk; earlier chunks are in the engine.
        let mut pending: HashSet<Vec<u8>> = HashSet::new();
        let mut written = self.engine.snapshot()?;
        for doc in self.scan_in(snap, false) {
            let doc = doc?;
            let id =
                id_of(&doc).ok_or_else(|| StorageError::corrupt("stored document without _id"))?;
            let encoded = encode_id(id);
            let (entries, m) = index::entries(ix, self.state.id, &doc, &encoded)?;
            multikey |= m;
            for (e, values) in entries {
                if ix.spec.unique {
                    let taken = match written.get(&e.key)? {
                        Some(owner) => owner != encoded,
                        None => false,
                    };
                    if taken || !pending.insert(e.key.clone()) {
                        return Err(index::duplicate(&self.ns, ix, &values));
                    }
                }
                tally.index_entry(ix.id, e.key.len().saturating_add(e.value.len()), true);
                batch.put(e.key, e.value);
            }
            if batch.len() >= CHUNK {
                let full = std::mem::replace(&mut batch, WriteBatch::with_capacity(CHUNK));
                self.engine.write(full, Durability::Buffered)?;
                pending.clear();
                written = self.engine.snapshot()?;
            }
        }
        if !batch.is_empty() {
            self.engine.write(batch, Durability::Buffered)?;
        }
        Ok((multikey, tally))
    }

    /// Index entries of index `name` within `bounds` (one per key field), in
    /// index order or reversed, read from `snapshot`. `None` when there is no
    /// such index.
    pub fn index_scan(
        &self,
        snapshot: Arc<dyn Snapshot>,
        name: &str,
        bounds: &[FieldBounds],
        reverse: bool,
    ) -> Option<IndexScan> {
        let list = self.state.indexes.read().clone();
        let ix = list.iter().find(|i| i.spec.name == name)?;
        let ranges = index::scan_ranges(self.state.id, ix, bounds);
        let prefix_len = index::index_prefix(self.state.id, ix.id).len();
        Some(IndexScan::new(snapshot, ranges, reverse, prefix_len))
    }

    /// Whether some document holds an array at `path` or above it, for
    /// wildcard index `name` (`false` when there is no such index).
    pub fn wildcard_multikey(&self, name: &str, path: &str) -> Result<bool, StorageError> {
        let list = self.state.indexes.read().clone();
        let Some(ix) = list.iter().find(|i| i.spec.name == name) else {
            return Ok(false);
        };
        let snap = self.snapshot()?;
        index::wildcard_multikey(snap.as_ref(), self.state.id, ix, path)
    }

    /// Index entries of index `name` from the whole key `start` (inclusive)
    /// to the whole key `end` (exclusive), each one value per key field in
    /// key-pattern order: `find`'s `min`/`max`. Unlike [`Collection::index_scan`]
    /// this is one range over the compound key (`{a: 1, b: 5}` to `{a: 3,
    /// b: 2}` holds every `b` of `a: 2`), which is the order the entries'
    /// bytes already sort in. Empty when `start` is not below `end`. `None`
    /// when there is no such index.
    pub fn index_scan_keys(
        &self,
        snapshot: Arc<dyn Snapshot>,
        name: &str,
        start: &[bson::RawBson],
        end: &[bson::RawBson],
        reverse: bool,
    ) -> Option<IndexScan> {
        let list = self.state.indexes.read().clone();
        let ix = list.iter().find(|i| i.spec.name == name)?;
        let prefix = index::index_prefix(self.state.id, ix.id);
        let key = |values: &[bson::RawBson]| {
            let mut k = prefix.clone();
            for (v, f) in values.iter().zip(&ix.fields) {
                let at = k.len();
                crate::keycode::encode_value(v.as_raw_bson_ref(), &mut k);
                // Entries of a descending field hold their bytes inverted.
                if f.descending {
                    if let Some(tail) = k.get_mut(at..) {
                        tail.iter_mut().for_each(|b| *b = !*b);
                    }
                }
            }
            k
        };
        let (lo, hi) = (key(start), key(end));
        let ranges = if lo < hi { vec![(lo, hi)] } else { Vec::new() };
        Some(IndexScan::new(snapshot, ranges, reverse, prefix.len()))
    }

    /// The document whose encoded `_id` (as index entries hold it) is `encoded_id`.
    pub fn fetch(
        &self,
        snapshot: &dyn Snapshot,
        encoded_id: &[u8],
    ) -> Result<Option<RawDocumentBuf>, StorageError> {
        self.locate(snapshot, encoded_id)?
            .map(|l| decode_doc(l.value))
            .transpose()
    }

    /// The document with this `_id`, if any.
    pub fn get(&self, id: RawBsonRef<'_>) -> Result<Option<RawDocumentBuf>, StorageError> {
        let snapshot = self.snapshot()?;
        self.fetch(snapshot.as_ref(), &encode_id(id))
    }

    /// Atomic read-modify-write of one document by `_id` under the collection's
    /// write lock: `f` sees the current document (`None` if absent) and decides.
    /// Errors from `f` are returned unchanged and nothing is written.
    pub fn modify(
        &self,
        id: RawBsonRef<'_>,
        durability: Durability,
        f: &mut dyn FnMut(Option<&RawDocument>) -> Result<Modify, MongoError>,
    ) -> Result<ModifyResult, MongoError> {
        let result = self.modify_locked(id, f)?;
        let wrote = matches!(
            result,
            ModifyResult::Replaced | ModifyResult::Deleted | ModifyResult::Inserted
        );
        if wrote && durability == Durability::Sync {
            self.engine.sync()?;
        }
        Ok(result)
    }

    fn modify_locked(
        &self,
        id: RawBsonRef<'_>,
        f: &mut dyn FnMut(Option<&RawDocument>) -> Result<Modify, MongoError>,
    ) -> Result<ModifyResult, MongoError> {
        let _w = self.state.write_lock.lock();
        if self.state.server == 0 {
            return self.modify_held(id, f);
        }
        shared::retrying(
            self.engine.capabilities(),
            |again| {
                let guard = self.shared_guard(again)?;
                shared::run(&self.engine, Some(guard), || self.modify_held(id, &mut *f))?
            },
            |r| matches!(r, Err(e) if e.code == ErrorCode::WriteConflict),
        )
    }

    /// [`Collection::modify_locked`] under the write lock (and, on a shared
    /// store, in its write transaction).
    fn modify_held(
        &self,
        id: RawBsonRef<'_>,
        f: &mut dyn FnMut(Option<&RawDocument>) -> Result<Modify, MongoError>,
    ) -> Result<ModifyResult, MongoError> {
        let snap = self.writable_snapshot_locked()?;
        let encoded = encode_id(id);
        let key = self.id_key_for(id);
        let located = self.locate(snap.as_ref(), &encoded)?;
        let doc_key = located.as_ref().map(|l| l.doc_key.clone());
        let current = located.map(|l| decode_doc(l.value)).transpose()?;
        let decision = f(current.as_deref())?;
        let mut batch = WriteBatch::with_capacity(2);
        let indexes = self.state.indexes.read().clone();
        let mut tally = self.tally_locked(&indexes);
        let mut became_multikey = Vec::new();
        if !indexes.is_empty() {
            let new = match &decision {
                Modify::Replace(d) | Modify::Insert(d) => Some(d.as_ref()),
                Modify::Keep | Modify::Delete => None,
            };
            let old = match &decision {
                Modify::Keep => None,
                _ => current.as_deref(),
            };
            let applies = !matches!(
                (&decision, &current),
                (Modify::Keep, _)
                    | (Modify::Delete | Modify::Replace(_), None)
                    | (Modify::Insert(_), Some(_))
            );
            if applies {
                let writes = self.index_writes(
                    &indexes,
                    snap.as_ref(),
                    old,
                    new,
                    &encoded,
                    &mut HashSet::new(),
                )?;
                writes.apply(self.state.id, &mut batch, &mut became_multikey, &mut tally);
            }
        }
        // The new version, kept for the observer only when there is one.
        let mut written: Option<RawDocumentBuf> = None;
        let result = match (decision, current.as_deref()) {
            (Modify::Keep, None) | (Modify::Delete, None) => return Ok(ModifyResult::NotFound),
            (Modify::Keep, Some(_)) => return Ok(ModifyResult::Unchanged),
            (Modify::Delete, Some(old)) => {
                tally.remove_doc(self.id_entry_len(key.len()), old.as_bytes().len());
                self.queue_remove(&mut batch, key, doc_key.unwrap_or_default());
                ModifyResult::Deleted
            }
            (Modify::Replace(_), None) => {
                return Err(MongoError::internal(format!(
                    "replace of a missing document in {}",
                    self.ns
                )));
            }
            (Modify::Replace(new), Some(old)) => {
                if !same_id(&new, &encoded) {
                    return Err(MongoError::new(
                        ErrorCode::ImmutableField,
                        "Performing an update on the path '_id' would modify the immutable field '_id'",
                    ));
                }
                tally.data_size = tally
                    .data_size
                    .saturating_sub(old.as_bytes().len() as u64)
                    .saturating_add(new.as_bytes().len() as u64);
                if self.observing() {
                    written = Some(new.clone());
                }
                batch.put(doc_key.unwrap_or_default(), new.into_bytes());
                ModifyResult::Replaced
            }
            (Modify::Insert(_), Some(_)) => return Err(self.duplicate(id).into()),
            (Modify::Insert(new), None) => {
                if !same_id(&new, &encoded) {
                    return Err(MongoError::internal(format!(
                        "upserted document's _id differs from the one it was stored under in {}",
                        self.ns
                    )));
                }
                tally.add_doc(self.id_entry_len(key.len()), new.as_bytes().len());
                // The bound no longer covers this key; read it again next time.
                *self.state.max_doc_key.lock() = None;
                if self.observing() {
                    written = Some(new.clone());
                }
                let mut next_rid = self.next_record_id_locked(1)?;
                self.queue_new(&mut batch, key, new.into_bytes(), &mut next_rid);
                self.record_ids_used_locked(next_rid);
                ModifyResult::Inserted
            }
        };
        let next_rid =
            self.capped_modify_locked(snap.as_ref(), &encoded, result, &mut batch, &mut tally)?;
        let observed = match (&written, &current, result) {
            (Some(after), Some(before), _) => Some(Op::Update { before, after }),
            (Some(doc), None, _) => Some(Op::Insert { doc }),
            (None, Some(before), ModifyResult::Deleted) if self.observing() => {
                Some(Op::Delete { before })
            }
            _ => None,
        };
        self.commit_locked(batch, &tally, &indexes, observed.as_slice())?;
        self.capped_committed_locked(next_rid);
        for ix in became_multikey {
            ix.multikey.store(true, Ordering::Release);
        }
        Ok(result)
    }

    /// Writes `batch` with the collection's new stats record and publishes the
    /// new stats; the caller holds the write lock.
    fn commit_locked(
        &self,
        mut batch: WriteBatch,
        tally: &StatsRecord,
        indexes: &[Arc<IndexState>],
        observed: &[Op<'_>],
    ) -> Result<(), StorageError> {
        if let Some(t) = txn::current() {
            // The transaction writes the stats record at its commit.
            let base = self.tally_locked(indexes);
            return t.absorb(self, batch, tally, &base, observed);
        }
        let shared_write = (self.state.server != 0).then(shared::current).flatten();
        let own = match &shared_write {
            Some(w) => Some(self.shared_stats_locked(w, &mut batch, tally, indexes)?),
            None => {
                batch.put(
                    layout::stats_key(self.state.id),
                    layout::encode_stats(tally),
                );
                None
            }
        };
        let write = |b: WriteBatch| -> Result<(), StorageError> {
            match &shared_write {
                Some(w) => w.commit(b),
                None => Ok(self.engine.write(b, Durability::Buffered)?),
            }
        };
        match self.observer.as_ref() {
            Some(observer) if !observed.is_empty() && observer.observes(self.db()) => {
                let pre_images = observed
                    .iter()
                    .any(|op| matches!(op, Op::Update { .. } | Op::Delete { .. }))
                    && self.pre_images_enabled();
                let target = Target {
                    db: self.db(),
                    coll: self.name(),
                    uuid: Some(self.state.uuid),
                    pre_images,
                };
                observer.commit(target, observed, batch, &mut |b| write(b))?;
            }
            _ => {
                if let Some(batch) = crate::observer::join(batch) {
                    write(batch)?;
                }
            }
        }
        if let Some(own) = own {
            *self.state.own_stats.lock() = own;
        }
        self.publish_tally_locked(tally, indexes);
        Ok(())
    }

    /// On a shared store: queues this server's stats record with the change
    /// from the stats as the write read them to `tally` (see
    /// `store/shared.rs`), and returns it for the caller to keep once
    /// committed. A write that makes an index multikey also bumps the
    /// catalog's version, so the other servers' planners learn it at their
    /// next command. The caller holds the write lock.
    fn shared_stats_locked(
        &self,
        w: &Arc<shared::WriteTxn>,
        batch: &mut WriteBatch,
        tally: &StatsRecord,
        indexes: &[Arc<IndexState>],
    ) -> Result<StatsRecord, StorageError> {
        let base = self.tally_locked(indexes);
        let own = self
            .queue_stats_locked(batch, &base, tally)
            .unwrap_or_default();
        let multikey = batch.ops().iter().any(
            |op| matches!(op, BatchOp::Put(k, _) if k.first() == Some(&index::MULTIKEY_REGION)),
        );
        if multikey {
            let version = match w.view().get(&layout::version_key())? {
                Some(v) => layout::decode_u64(&v)?,
                None => 0,
            };
            batch.put(
                layout::version_key(),
                version.saturating_add(1).to_be_bytes().to_vec(),
            );
        }
        Ok(own)
    }

    /// Queues the stats record that takes the collection's stats from
    /// `before` (as last read) to `after`: the record itself, or on a shared
    /// store this server's record of its changes, which is returned for the
    /// caller to keep once committed ([`Collection::keep_own_stats_locked`]).
    /// The caller holds the write lock.
    pub(crate) fn queue_stats_locked(
        &self,
        batch: &mut WriteBatch,
        before: &StatsRecord,
        after: &StatsRecord,
    ) -> Option<StatsRecord> {
        if self.state.server == 0 {
            batch.put(
                layout::stats_key(self.state.id),
                layout::encode_stats(after),
            );
            return None;
        }
        let mut own = self.state.own_stats.lock().clone();
        shared::add_change(&mut own, before, after);
        batch.put(
            shared::own_stats_key(self.state.id, self.state.server),
            layout::encode_stats(&own),
        );
        Some(own)
    }

    /// Keeps this server's stats record once the batch that wrote it
    /// committed (see [`Collection::queue_stats_locked`]).
    pub(crate) fn keep_own_stats_locked(&self, own: Option<StatsRecord>) {
        if let Some(own) = own {
            *self.state.own_stats.lock() = own;
        }
    }

    /// This handle without the store's op observer: for the observer's own
    /// collection (the oplog), which must not hold the observer that holds
    /// it (that cycle would keep the engine open forever).
    pub fn without_observer(&self) -> Collection {
        Collection {
            observer: None,
            ..self.clone()
        }
    }

    /// Whether this collection's writes are recorded by an observer (then
    /// the store keeps the documents the observer is shown).
    #[inline]
    pub(crate) fn observing(&self) -> bool {
        self.observer
            .as_ref()
            .is_some_and(|o| o.observes(self.db()))
    }

    /// The inserts of `accepted` documents, for the observer (empty when
    /// nothing observes this collection).
    pub(crate) fn observed_inserts<'d>(
        &self,
        docs: &[&'d RawDocument],
        accepted: &[usize],
    ) -> Vec<Op<'d>> {
        if !self.observing() {
            return Vec::new();
        }
        accepted
            .iter()
            .filter_map(|&i| docs.get(i).map(|doc| Op::Insert { doc }))
            .collect()
    }

    /// The stats record as last committed; the caller holds the write lock
    /// and passes the indexes it writes under.
    pub(crate) fn tally_locked(&self, indexes: &[Arc<IndexState>]) -> StatsRecord {
        StatsRecord {
            count: self.count(),
            data_size: self.data_size(),
            id_bytes: self.state.id_bytes.load(Ordering::Acquire),
            indexes: indexes.iter().map(|ix| ix.tally()).collect(),
        }
    }

    /// Makes a committed stats record current.
    pub(crate) fn publish_tally_locked(&self, tally: &StatsRecord, indexes: &[Arc<IndexState>]) {
        publish(&self.state, tally, indexes);
    }

    /// Bytes of the document keys: what the `_id` index holds, O(1).
    pub fn id_index_bytes(&self) -> u64 {
        self.state.id_bytes.load(Ordering::Acquire)
    }

    /// Deletes the document with this `_id`; `false` if there was none.
    pub fn delete(&self, id: RawBsonRef<'_>, durability: Durability) -> Result<bool, StorageError> {
        let deleted = self.delete_locked(id)?;
        if deleted && durability == Durability::Sync {
            self.engine.sync()?;
        }
        Ok(deleted)
    }

    fn delete_locked(&self, id: RawBsonRef<'_>) -> Result<bool, StorageError> {
        let _w = self.state.write_lock.lock();
        if self.state.server == 0 {
            return self.delete_held(id);
        }
        shared::retrying(
            self.engine.capabilities(),
            |again| {
                let guard = self.shared_guard(again)?;
                shared::run(&self.engine, Some(guard), || self.delete_held(id))?
            },
            |r| matches!(r, Err(e) if shared::lost_race(e)),
        )
    }

    /// [`Collection::delete_locked`] under the write lock (and, on a shared
    /// store, in its write transaction).
    fn delete_held(&self, id: RawBsonRef<'_>) -> Result<bool, StorageError> {
        let snap = self.writable_snapshot_locked()?;
        let key = self.id_key_for(id);
        let Some(located) = self.locate(snap.as_ref(), &encode_id(id))? else {
            return Ok(false);
        };
        let old = located.value;
        let mut batch = WriteBatch::with_capacity(2);
        let indexes = self.state.indexes.read().clone();
        let mut tally = self.tally_locked(&indexes);
        tally.remove_doc(self.id_entry_len(key.len()), old.len());
        // Decoded when the index entries or the observer need it.
        let before = if !indexes.is_empty() || self.observing() {
            Some(decode_doc(old)?)
        } else {
            None
        };
        if let Some(doc) = before.as_ref().filter(|_| !indexes.is_empty()) {
            let encoded = encode_id(id);
            let writes = self.index_writes(
                &indexes,
                snap.as_ref(),
                Some(doc),
                None,
                &encoded,
                &mut HashSet::new(),
            )?;
            writes.apply(self.state.id, &mut batch, &mut Vec::new(), &mut tally);
        }
        self.queue_remove(&mut batch, key, located.doc_key);
        self.forget_locked(snap.as_ref(), &encode_id(id), &mut batch)?;
        let observed = before
            .as_deref()
            .filter(|_| self.observing())
            .map(|before| Op::Delete { before });
        self.commit_locked(batch, &tally, &indexes, observed.as_slice())?;
        Ok(true)
    }

    /// Every document in the order they are stored (backwards when `reverse`),
    /// from a snapshot taken now: insertion order for a record-id collection,
    /// `_id` order for a clustered or capped one (whose natural order is
    /// [`Collection::scan_natural`]).
    pub fn scan(&self, reverse: bool) -> DocIter {
        match self.snapshot() {
            Ok(snapshot) => self.scan_in(snapshot, reverse),
            Err(e) => DocIter::failed(e),
        }
    }

    /// Like [`Collection::scan`], reading from a snapshot the caller already holds.
    pub fn scan_in(&self, snapshot: Arc<dyn Snapshot>, reverse: bool) -> DocIter {
        let (lo, hi) = layout::doc_range(self.state.id);
        DocIter {
            snapshot: Ok(snapshot),
            start: Bound::Included(lo),
            end: Bound::Excluded(hi),
            reverse,
            buffer: Vec::new().into_iter(),
            exhausted: false,
            records_of: None,
        }
    }

    /// Documents whose `_id` lies between the bounds (BSON order), ascending or
    /// descending, from a snapshot taken now.
    pub fn scan_ids(
        &self,
        start: Bound<RawBsonRef<'_>>,
        end: Bound<RawBsonRef<'_>>,
        reverse: bool,
    ) -> DocIter {
        match self.snapshot() {
            Ok(snapshot) => self.scan_ids_in(snapshot, start, end, reverse),
            // The iterator's first item reports the failure.
            Err(e) => DocIter::failed(e),
        }
    }

    /// Like [`Collection::scan_ids`], reading from a snapshot the caller already holds.
    pub fn scan_ids_in(
        &self,
        snapshot: Arc<dyn Snapshot>,
        start: Bound<RawBsonRef<'_>>,
        end: Bound<RawBsonRef<'_>>,
        reverse: bool,
    ) -> DocIter {
        // A record-id collection's `_id` order is its `_id` index's.
        let (lo, hi) = self.id_key_range();
        let key = |v: RawBsonRef<'_>| self.id_key_for(v);
        let start = match start {
            Bound::Included(v) => Bound::Included(key(v)),
            Bound::Excluded(v) => Bound::Excluded(key(v)),
            Bound::Unbounded => Bound::Included(lo),
        };
        let end = match end {
            Bound::Included(v) => Bound::Included(key(v)),
            Bound::Excluded(v) => Bound::Excluded(key(v)),
            Bound::Unbounded => Bound::Excluded(hi),
        };
        DocIter {
            snapshot: Ok(snapshot),
            start,
            end,
            reverse,
            buffer: Vec::new().into_iter(),
            exhausted: false,
            records_of: self.has_record_ids().then_some(self.state.id),
        }
    }
}

/// The document keys one insert call has queued, for its duplicate check.
/// Drivers send increasing ObjectIds, so a key above every queued one needs
/// neither hashing nor a copy; only a batch that goes back builds a set, once,
/// from the keys the batch holds (hashing every key took 3.5% of the request
/// thread on `timeseries-batch`).
#[derive(Default)]
struct QueuedKeys {
    greatest: Option<Vec<u8>>,
    set: Option<HashSet<Vec<u8>>>,
}

impl QueuedKeys {
    fn contains(&mut self, key: &[u8], batch: &WriteBatch) -> bool {
        match &self.greatest {
            None => return false,
            Some(g) if key > g.as_slice() => return false,
            Some(_) => {}
        }
        // Index entries in the batch live in other regions: never equal to a
        // document key, so taking every queued key is exact.
        let set = self.set.get_or_insert_with(|| {
            batch
                .ops()
                .iter()
                .filter_map(|op| match op {
                    BatchOp::Put(k, _) | BatchOp::Insert(k, _) => Some(k.clone()),
                    BatchOp::Delete(_) => None,
                })
                .collect()
        });
        set.contains(key)
    }

    fn add(&mut self, key: &[u8]) {
        if let Some(set) = &mut self.set {
            set.insert(key.to_vec());
        }
        match &mut self.greatest {
            Some(g) if key <= g.as_slice() => {}
            Some(g) => {
                g.clear();
                g.extend_from_slice(key);
            }
            None => self.greatest = Some(key.to_vec()),
        }
    }
}

/// Index changes for one document, queued into the document's batch.
#[derive(Default)]
struct IndexWrites {
    /// `(index id, key, length of the value)`.
    deletes: Vec<(u64, Vec<u8>, usize)>,
    /// `(index id, entry)`.
    puts: Vec<(u64, Entry)>,
    /// Indexes this document makes multikey.
    multikey: Vec<Arc<IndexState>>,
}

/// A snapshot with some keys already read (an insert batch's unique-index
/// keys, fetched at once); other reads go to the snapshot itself.
struct Prefetched {
    inner: Arc<dyn Snapshot>,
    known: HashMap<Vec<u8>, Option<Vec<u8>>>,
}

impl Snapshot for Prefetched {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        match self.known.get(key) {
            Some(v) => Ok(v.clone()),
            None => self.inner.get(key),
        }
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        self.inner.get_many(keys)
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        self.inner.scan(start, end, reverse, limit)
    }
}

impl IndexWrites {
    /// Queues the writes into `batch` and counts them in `tally`.
    fn apply(
        self,
        coll: u64,
        batch: &mut WriteBatch,
        became: &mut Vec<Arc<IndexState>>,
        tally: &mut StatsRecord,
    ) {
        for (ix, k, value_len) in self.deletes {
            tally.index_entry(ix, k.len().saturating_add(value_len), false);
            batch.delete(k);
        }
        for (ix, e) in self.puts {
            tally.index_entry(ix, e.key.len().saturating_add(e.value.len()), true);
            // Entries the document did not have before: new keys, unless
            // the index holds a stray one (an engine that writes new keys
            // its own way still handles that, see `BatchOp::Insert`).
            batch.insert(e.key, e.value);
        }
        for ix in self.multikey {
            if !became.iter().any(|b| b.id == ix.id) {
                batch.put(index::multikey_key(coll, ix.id), Vec::new());
                became.push(ix);
            }
        }
    }
}

/// Makes `tally` (a committed stats record) the collection's current stats.
/// Indexes the record does not name have no entries yet.
fn publish(state: &CollState, tally: &StatsRecord, indexes: &[Arc<IndexState>]) {
    state.count.store(tally.count, Ordering::Release);
    state.data_size.store(tally.data_size, Ordering::Release);
    state.id_bytes.store(tally.id_bytes, Ordering::Release);
    for ix in indexes {
        match tally.indexes.iter().find(|t| t.id == ix.id) {
            Some(t) => ix.set_tally(t),
            None => ix.set_tally(&layout::IndexTally::default()),
        }
    }
}

/// Reads the collection's stats record from `snap` and makes it current.
/// A record an older BisonDB wrote lacks the key and index sizes: they are
/// measured from `snap`, and the whole record is returned for the caller to
/// store.
pub(crate) fn load_stats(
    snap: &dyn Snapshot,
    state: &CollState,
) -> Result<Option<StatsRecord>, StorageError> {
    let indexes = state.indexes.read().clone();
    let (mut record, known) = match snap.get(&layout::stats_key(state.id))? {
        Some(v) => layout::decode_stats(&v)?,
        None => (StatsRecord::default(), true),
    };
    if state.server != 0 {
        // Each server's record of its changes (`store/shared.rs`), after
        // the collection's own one in key order.
        let (start, end) = layout::stats_range(state.id);
        let rows = snap.scan(
            Bound::Excluded(&start),
            Bound::Excluded(&end),
            false,
            usize::MAX,
        )?;
        let own_key = shared::own_stats_key(state.id, state.server);
        for (k, v) in rows {
            let deltas = layout::decode_stats(&v)?.0;
            shared::add_record(&mut record, &deltas);
            // This server's own record as the snapshot has it: a write whose
            // outcome was unknown (a failover) may have committed after all,
            // and the next change must add to what is stored, not to what
            // this server last kept. A write computing against an older
            // snapshot than a later commit of this record fails at commit.
            if k == own_key {
                *state.own_stats.lock() = deltas;
            }
        }
    }
    if !known {
        // The `_id` index: a record-id collection's `_id` entries (key and
        // rid, at its logical size `records::RID_LEN`), else the document keys.
        let (range, with_value) = match state.records {
            Some(_) => (records::id_range(state.id), true),
            None => (layout::doc_range(state.id), false),
        };
        validate::for_each(snap, range, |k, _| {
            let len = k.len() + if with_value { records::RID_LEN } else { 0 };
            record.id_bytes = record.id_bytes.saturating_add(len as u64);
            Ok(())
        })?;
        for ix in indexes.iter() {
            let range = index::index_range(state.id, ix.id);
            validate::for_each(snap, range, |k, v| {
                record.index_entry(ix.id, k.len().saturating_add(v.len()), true);
                Ok(())
            })?;
        }
    }
    publish(state, &record, &indexes);
    Ok((!known).then_some(record))
}

fn decode_doc(bytes: Vec<u8>) -> Result<RawDocumentBuf, StorageError> {
    RawDocumentBuf::from_bytes(bytes)
        .map_err(|e| StorageError::corrupt(format!("stored document: {e}")))
}

fn same_id(doc: &RawDocument, encoded: &[u8]) -> bool {
    id_of(doc).is_some_and(|id| encode_id(id) == encoded)
}

/// Documents of one collection in key order, read in chunks from a snapshot
/// the iterator owns (re-seeking after the last key of each chunk): the
/// document keys, or a record-id collection's `_id` entries, each followed to
/// its record.
pub struct DocIter {
    /// The view read from, or why there is none (the first read reports it).
    snapshot: Result<Arc<dyn Snapshot>, StorageError>,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    buffer: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
    /// Set when the keys read are the `_id` entries of this record-id
    /// collection, whose values are record ids.
    records_of: Option<u64>,
}

impl DocIter {
    /// An iterator whose only item is `error`: no snapshot could be taken.
    fn failed(error: StorageError) -> DocIter {
        DocIter {
            snapshot: Err(error),
            start: Bound::Unbounded,
            end: Bound::Unbounded,
            reverse: false,
            buffer: Vec::new().into_iter(),
            exhausted: false,
            records_of: None,
        }
    }

    /// The document of the record an `_id` entry names.
    fn record(&self, coll: u64, rid: &[u8]) -> Result<RawDocumentBuf, StorageError> {
        let snapshot = self.snapshot.as_ref().map_err(Clone::clone)?;
        let key = layout::record_key(coll, records::decode_rid_value(rid)?);
        match snapshot.get(&key)? {
            Some(doc) => decode_doc(doc),
            None => Err(StorageError::corrupt(format!(
                "an _id entry names record {key:?} that is not stored"
            ))),
        }
    }

    fn refill(&mut self) -> Result<(), StorageError> {
        let start = self.start.as_ref().map(Vec::as_slice);
        let end = self.end.as_ref().map(Vec::as_slice);
        let snapshot = self.snapshot.as_ref().map_err(Clone::clone)?;
        let chunk = snapshot.scan(start, end, self.reverse, SCAN_CHUNK)?;
        if chunk.len() < SCAN_CHUNK {
            self.exhausted = true;
        }
        if let Some((last, _)) = chunk.last() {
            if self.reverse {
                self.end = Bound::Excluded(last.clone());
            } else {
                self.start = Bound::Excluded(last.clone());
            }
        }
        self.buffer = chunk.into_iter();
        Ok(())
    }
}

impl Iterator for DocIter {
    type Item = Result<RawDocumentBuf, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        // Every scan stops at its operation's next check once it is killed
        // or past its deadline (`bisondb_error::interrupt`).
        if let Err(e) = bisondb_error::interrupt::check() {
            self.exhausted = true;
            self.buffer = Vec::new().into_iter();
            return Some(Err(StorageError::Mongo(e)));
        }
        loop {
            if let Some((_, value)) = self.buffer.next() {
                return Some(match self.records_of {
                    Some(coll) => self.record(coll, &value),
                    None => decode_doc(value),
                });
            }
            if self.exhausted {
                return None;
            }
            if let Err(e) = self.refill() {
                self.exhausted = true;
                return Some(Err(e));
            }
        }
    }
}

pub(crate) mod capped;
pub(crate) mod records;
pub(crate) mod shared;
pub(crate) use shared::lost_race;
pub(crate) mod txn;
pub use capped::NaturalIter;
pub(crate) use records::RecordIds;
pub use txn::{in_transaction, write_plain, Recorder, StoreTxn, TxnOp};

mod key_bounds;
mod validate;
pub use validate::{IndexReport, ValidateOptions, ValidateReport};

#[cfg(test)]
mod tests;
