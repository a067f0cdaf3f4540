//! Multi-document transactions over the store: the seam between the
//! collection code and an engine [`Transaction`].
//!
//! A [`StoreTxn`] is entered on the thread that runs one of its statements
//! ([`StoreTxn::run`]); while it is, every [`Collection`] read and write on
//! that thread goes through it instead of the engine: snapshots are the
//! transaction's view (the snapshot it began with plus its own writes), and
//! a write's batch is added to the transaction (first writer wins: a key
//! another open transaction wrote is [`StorageError`] WriteConflict at
//! once) instead of being written. The collection's count and sizes are
//! not written with each statement: the transaction keeps, per collection,
//! the change its statements made, and [`StoreTxn::commit`] writes each
//! touched collection's stats record as it is then plus that change, in the
//! same engine batch as the transaction's writes, under the collections'
//! write locks. So concurrent transactions on one collection conflict only
//! on the documents and index keys they both write.
//!
//! Outside a transaction the collection code pays one thread-local read per
//! snapshot and per commit; nothing else changes.
//!
//! Capped collections refuse writes inside a transaction, as mongod's do.
//!
//! Collections (and their indexes) a statement creates are the
//! transaction's own until it commits ([`Created`], `catalog/txn_ddl.rs`):
//! [`Storage::collection`](crate::Storage::collection) finds them only on
//! the thread that runs the transaction, and the commit enters them in the
//! catalog in the same engine batch as the writes.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::Arc;

use bisondb_engine::{
    BatchOp, CommitPoint, Durability, EngineError, KeyValue, Snapshot, Transaction, WriteBatch,
};
use parking_lot::Mutex;

use crate::catalog::{CollState, Storage};
use crate::error::StorageError;
use crate::index::IndexState;
use crate::layout::StatsRecord;
use crate::observer::Op;
use crate::store::Collection;

thread_local! {
    /// The transaction entered on this thread, if any.
    static CURRENT: RefCell<Option<Arc<StoreTxn>>> = const { RefCell::new(None) };
}

/// The transaction entered on this thread (see [`StoreTxn::run`]).
pub(crate) fn current() -> Option<Arc<StoreTxn>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The collection `db.name` the transaction entered on this thread created,
/// if it did (one thread-local read when no transaction is entered).
pub(crate) fn created_collection(db: &str, name: &str) -> Option<Arc<CollState>> {
    CURRENT.with(|c| {
        let current = c.borrow();
        let t = current.as_ref()?;
        let inner = t.inner.lock();
        inner
            .created
            .iter()
            .find(|c| c.db == db && c.name == name)
            .map(|c| c.state.clone())
    })
}

/// Whether this thread runs a statement of a multi-document transaction
/// (inside [`StoreTxn::run`]): commands whose answer differs inside one
/// (`create` of an existing collection) ask it.
pub fn in_transaction() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

/// Leaves the transaction entered on this thread until dropped: for the
/// writes a statement causes that are not part of it (appends to a capped
/// collection, such as the oplog, which a transaction cannot write).
pub(crate) struct Outside(Option<Arc<StoreTxn>>);

impl Outside {
    pub(crate) fn enter() -> Outside {
        Outside(CURRENT.with(|c| c.borrow_mut().take()))
    }
}

impl Drop for Outside {
    fn drop(&mut self) {
        if let Some(t) = self.0.take() {
            CURRENT.with(|c| *c.borrow_mut() = Some(t));
        }
    }
}

/// What a transaction's statements changed in one collection's stats.
#[derive(Default)]
struct Delta {
    count: i64,
    data_size: i64,
    id_bytes: i64,
    /// By index id: entries and bytes.
    indexes: HashMap<u64, (i64, i64)>,
}

fn diff(new: u64, old: u64) -> i64 {
    (new as i128 - old as i128).clamp(i64::MIN as i128, i64::MAX as i128) as i64
}

fn apply(v: u64, d: i64) -> u64 {
    if d >= 0 {
        v.saturating_add(d as u64)
    } else {
        v.saturating_sub(d.unsigned_abs())
    }
}

struct Touched {
    coll: Collection,
    delta: Delta,
}

/// One write of a transaction, kept for its record (the oplog's one
/// `applyOps` entry at commit) when the store has an op observer.
#[derive(Clone, Debug)]
pub struct TxnOp {
    /// `db.collection` (`db.$cmd` for a command).
    pub ns: String,
    pub uuid: bson::Uuid,
    /// `i`, `u` (the whole new document), `d`, or `c` (a collection or
    /// index the transaction created).
    pub op: &'static str,
    /// The inserted or new document; for a delete, `{_id}`; for a command,
    /// the command (`{create: ...}`, `{createIndexes: ...}`).
    pub o: bson::RawDocumentBuf,
    /// The document an update or delete replaced, when the collection keeps
    /// change-stream pre-images.
    pub before: Option<bson::RawDocumentBuf>,
}

/// How a commit's batch is written: the server's recorder adds the
/// transaction's record (its `applyOps` oplog entry, from the ops) to the
/// batch and calls the writer exactly once.
pub type Recorder<'a> = &'a mut dyn FnMut(
    &[TxnOp],
    WriteBatch,
    &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError>;

/// A collection a statement of the transaction created: it exists for the
/// transaction alone until the commit enters it in the catalog.
pub(crate) struct Created {
    pub(crate) db: String,
    pub(crate) name: String,
    pub(crate) state: Arc<CollState>,
}

struct Inner {
    /// `None` once committed or aborted.
    txn: Option<Box<dyn Transaction>>,
    /// The collections its statements created, in creation order.
    created: Vec<Created>,
    /// The writes to record at commit, in statement order.
    ops: Vec<TxnOp>,
    /// The collections written, by collection id (locked in this order at
    /// commit, so two commits never wait on each other in a circle).
    touched: BTreeMap<u64, Touched>,
}

/// An open multi-document transaction of the store; see the module
/// documentation.
pub struct StoreTxn {
    inner: Mutex<Inner>,
    /// The store the transaction may create collections in (`None` for a
    /// read at a point in time, which writes nothing).
    catalog: Option<Storage>,
}

impl std::fmt::Debug for StoreTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreTxn")
    }
}

fn ended() -> StorageError {
    StorageError::from(EngineError::InvalidArgument(
        "the transaction has already ended".into(),
    ))
}

impl StoreTxn {
    /// Begins a transaction of `storage` on a snapshot of its engine taken
    /// now.
    pub(crate) fn begin(storage: &Storage) -> Result<Arc<StoreTxn>, StorageError> {
        let txn = storage.engine().begin()?;
        Ok(StoreTxn::over(txn, Some(storage.clone())))
    }

    /// Begins a transaction of `storage` that reads `snapshot`, taken from
    /// its engine earlier (`startTransaction` at a past cluster time).
    pub(crate) fn begin_on(
        storage: &Storage,
        snapshot: Arc<dyn Snapshot>,
    ) -> Result<Arc<StoreTxn>, StorageError> {
        let txn = storage.engine().begin_on(snapshot)?;
        Ok(StoreTxn::over(txn, Some(storage.clone())))
    }

    /// A transaction that only reads `snapshot`: the collection code run
    /// inside it reads that point in time (a snapshot read outside a
    /// transaction), and any write it attempts fails.
    pub fn read_only(snapshot: Arc<dyn Snapshot>) -> Arc<StoreTxn> {
        StoreTxn::over(Box::new(ReadOnly(snapshot)), None)
    }

    fn over(txn: Box<dyn Transaction>, catalog: Option<Storage>) -> Arc<StoreTxn> {
        Arc::new(StoreTxn {
            inner: Mutex::new(Inner {
                txn: Some(txn),
                created: Vec::new(),
                ops: Vec::new(),
                touched: BTreeMap::new(),
            }),
            catalog,
        })
    }

    /// Whether the transaction may create collections (it is not a read at
    /// a point in time) and is still open.
    pub(crate) fn can_create(&self) -> Result<(), StorageError> {
        if self.catalog.is_none() {
            return Err(read_only_write().into());
        }
        match self.inner.lock().txn {
            Some(_) => Ok(()),
            None => Err(ended()),
        }
    }

    /// Records a catalog change a statement made: `created` joins the
    /// transaction's collections (when the change created one), and `op`
    /// (its `c` entry) the writes its commit records.
    pub(crate) fn add_ddl(&self, created: Option<Created>, op: TxnOp) {
        let mut inner = self.inner.lock();
        inner.created.extend(created);
        inner.ops.push(op);
    }

    /// Whether collection `id` is one the transaction created, and if so
    /// how many documents its statements left in it.
    pub(crate) fn created_count(&self, id: u64) -> Option<i64> {
        let inner = self.inner.lock();
        inner.created.iter().find(|c| c.state.id == id)?;
        Some(inner.touched.get(&id).map_or(0, |t| t.delta.count))
    }

    /// Runs `f` with this transaction entered on the current thread: the
    /// collection code reads and writes through it until `f` returns.
    pub fn run<R>(self: &Arc<Self>, f: impl FnOnce() -> R) -> R {
        struct Leave(Option<Arc<StoreTxn>>);
        impl Drop for Leave {
            fn drop(&mut self) {
                let before = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = before);
            }
        }
        let before = CURRENT.with(|c| c.borrow_mut().replace(self.clone()));
        let _leave = Leave(before);
        f()
    }

    /// The transaction's view as a snapshot: what it began with plus its
    /// own writes, read when the view is read.
    pub(crate) fn view(self: &Arc<Self>) -> Arc<dyn Snapshot> {
        Arc::new(TxnView(self.clone()))
    }

    /// Adds a collection write's batch to the transaction (instead of
    /// writing it) and remembers how it changes the collection's stats
    /// (`tally` against `base`, the stats as committed). The caller holds
    /// the collection's write lock.
    pub(crate) fn absorb(
        &self,
        coll: &Collection,
        batch: WriteBatch,
        tally: &StatsRecord,
        base: &StatsRecord,
        observed: &[Op<'_>],
    ) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        let Inner {
            txn, ops, touched, ..
        } = &mut *inner;
        let txn = txn.as_mut().ok_or_else(ended)?;
        for op in batch.into_ops() {
            match op {
                BatchOp::Put(k, v) | BatchOp::Insert(k, v) => txn.put(k, v)?,
                BatchOp::Delete(k) => txn.delete(k)?,
            }
        }
        let pre_images = coll.pre_images_enabled();
        for op in observed {
            let before = match op {
                Op::Update { before, .. } | Op::Delete { before } if pre_images => {
                    Some((*before).to_owned())
                }
                _ => None,
            };
            let (kind, o) = match op {
                Op::Insert { doc } => ("i", (*doc).to_owned()),
                Op::Update { after, .. } => ("u", (*after).to_owned()),
                Op::Delete { before } => {
                    let mut id = bson::RawDocumentBuf::new();
                    if let Some(v) = crate::store::id_of(before) {
                        id.append(bson::raw::cstr!("_id"), bson::RawBson::from(v));
                    }
                    ("d", id)
                }
                Op::Command { .. } => continue,
            };
            ops.push(TxnOp {
                ns: coll.namespace().to_string(),
                uuid: coll.uuid(),
                op: kind,
                o,
                before,
            });
        }
        let t = touched.entry(coll.state().id).or_insert_with(|| Touched {
            coll: coll.clone(),
            delta: Delta::default(),
        });
        t.delta.count += diff(tally.count, base.count);
        t.delta.data_size += diff(tally.data_size, base.data_size);
        t.delta.id_bytes += diff(tally.id_bytes, base.id_bytes);
        for ix in &tally.indexes {
            let before = base
                .indexes
                .iter()
                .find(|b| b.id == ix.id)
                .copied()
                .unwrap_or_default();
            let e = t.delta.indexes.entry(ix.id).or_default();
            e.0 += diff(ix.entries, before.entries);
            e.1 += diff(ix.bytes, before.bytes);
        }
        Ok(())
    }

    /// Whether the transaction wrote anything.
    pub fn wrote(&self) -> bool {
        let inner = self.inner.lock();
        !inner.touched.is_empty() || !inner.created.is_empty()
    }

    /// Applies every write of the transaction, the touched collections'
    /// stats records and the catalog records of the collections it created
    /// in one atomic engine batch. Fails with WriteConflict, applying
    /// nothing, when a key it wrote was changed by another commit after its
    /// snapshot, or a collection it created was created by another since.
    pub fn commit(&self, record: Recorder<'_>) -> Result<(), StorageError> {
        let mut inner = self.inner.lock();
        let txn = inner.txn.take().ok_or_else(ended)?;
        let touched = std::mem::take(&mut inner.touched);
        let ops = std::mem::take(&mut inner.ops);
        let created = std::mem::take(&mut inner.created);
        drop(inner);
        let mut unchecked = WriteBatch::new();
        // The catalog's lock comes before the collections' write locks.
        let catalog = match (&self.catalog, created.is_empty()) {
            (_, true) => None,
            (Some(catalog), false) => Some((
                catalog,
                catalog.stage_created(&created, |id| touched.contains_key(&id), &mut unchecked)?,
            )),
            (None, false) => return Err(read_only_write().into()),
        };
        let states: Vec<Arc<CollState>> =
            touched.values().map(|t| t.coll.state().clone()).collect();
        let _locks: Vec<_> = states.iter().map(|s| s.write_lock.lock()).collect();
        let mut publish: Vec<Publish> = Vec::new();
        let mut own_records: Vec<(Collection, Option<StatsRecord>)> = Vec::new();
        for t in touched.into_values() {
            // Dropped since: 26 NamespaceNotFound, as a write to it would be.
            let snap = t.coll.writable_snapshot_locked()?;
            if t.coll.state().server != 0 {
                // Other servers changed the stats too: start from them.
                crate::store::load_stats(snap.as_ref(), t.coll.state())?;
            }
            let indexes = t.coll.state().indexes.read().clone();
            let base = t.coll.tally_locked(&indexes);
            let mut tally = base.clone();
            tally.count = apply(tally.count, t.delta.count);
            tally.data_size = apply(tally.data_size, t.delta.data_size);
            tally.id_bytes = apply(tally.id_bytes, t.delta.id_bytes);
            for ix in tally.indexes.iter_mut() {
                if let Some((entries, bytes)) = t.delta.indexes.get(&ix.id) {
                    ix.entries = apply(ix.entries, *entries);
                    ix.bytes = apply(ix.bytes, *bytes);
                }
            }
            let own = t.coll.queue_stats_locked(&mut unchecked, &base, &tally);
            own_records.push((t.coll.clone(), own));
            publish.push((t.coll, tally, indexes));
        }
        let mut txn = Some(txn);
        record(&ops, unchecked, &mut |batch| match txn.take() {
            Some(t) => Ok(t.commit_with(batch, Durability::Buffered)?),
            None => Err(ended()),
        })?;
        for (coll, own) in own_records {
            coll.keep_own_stats_locked(own);
        }
        for (coll, tally, indexes) in publish {
            coll.publish_tally_locked(&tally, &indexes);
            // The key bounds that let inserts skip their lookup know nothing
            // of the keys this commit added: read them again.
            *coll.state().max_doc_key.lock() = None;
        }
        if let Some((catalog, ddl)) = catalog {
            catalog.publish_created(ddl, created);
        }
        Ok(())
    }

    /// Ends the transaction without applying anything (its keys are free
    /// for other transactions at once).
    pub fn abort(&self) {
        let mut inner = self.inner.lock();
        inner.txn = None;
        inner.touched.clear();
        inner.ops.clear();
        inner.created.clear();
    }
}

/// A [`Recorder`] that records nothing: the batch as it is.
pub fn write_plain(
    _: &[TxnOp],
    batch: WriteBatch,
    write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    write(batch)
}

/// A committed collection's new stats, made current after the commit.
type Publish = (Collection, StatsRecord, Arc<Vec<Arc<IndexState>>>);

/// [`StoreTxn::read_only`]'s transaction: reads of one snapshot, no writes.
struct ReadOnly(Arc<dyn Snapshot>);

fn read_only_write() -> EngineError {
    EngineError::InvalidArgument("a read at a point in time cannot write".into())
}

impl Transaction for ReadOnly {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.0.get(key)
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        self.0.scan(start, end, reverse, limit)
    }

    fn put(&mut self, _: Vec<u8>, _: Vec<u8>) -> Result<(), EngineError> {
        Err(read_only_write())
    }

    fn delete(&mut self, _: Vec<u8>) -> Result<(), EngineError> {
        Err(read_only_write())
    }

    fn commit(self: Box<Self>, _: Durability) -> Result<(), EngineError> {
        Ok(())
    }
}

/// [`StoreTxn::view`].
struct TxnView(Arc<StoreTxn>);

impl Snapshot for TxnView {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        let inner = self.0.inner.lock();
        match inner.txn.as_ref() {
            Some(t) => t.get(key),
            None => Err(EngineError::InvalidArgument(
                "the transaction has already ended".into(),
            )),
        }
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        let inner = self.0.inner.lock();
        match inner.txn.as_ref() {
            Some(t) => t.scan(start, end, reverse, limit),
            None => Err(EngineError::InvalidArgument(
                "the transaction has already ended".into(),
            )),
        }
    }

    fn commit_point(&self) -> Option<CommitPoint> {
        None
    }
}

#[cfg(test)]
mod tests {
    use bisondb_engine::MemoryEngine;
    use bson::{rawdoc, RawBsonRef};

    use crate::catalog::Storage;
    use crate::store::Modify;
    use crate::Durability;

    fn storage() -> Storage {
        Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("open: {e}"))
    }

    #[test]
    fn writes_are_isolated_until_commit_and_counted_then() {
        let s = storage();
        let c = s.get_or_create_collection("db", "c").unwrap();
        c.insert_many(&[&rawdoc! {"_id": 0}], true, Durability::Buffered);
        let t = s.begin_transaction().unwrap();
        let out = t.run(|| {
            c.insert_many(
                &[&rawdoc! {"_id": 1}, &rawdoc! {"_id": 2}],
                true,
                Durability::Buffered,
            )
        });
        assert_eq!(out.inserted, 2, "{out:?}");
        // Its own reads see them; others do not, and the count is unchanged.
        assert_eq!(t.run(|| c.scan(false).count()), 3);
        assert_eq!(c.scan(false).count(), 1);
        assert_eq!(c.count(), 1);
        // A duplicate of its own insert is a duplicate inside it.
        let dup = t.run(|| c.insert_many(&[&rawdoc! {"_id": 1}], true, Durability::Buffered));
        assert_eq!(dup.errors.len(), 1);
        t.commit(&mut super::write_plain).unwrap();
        assert_eq!(c.scan(false).count(), 3);
        assert_eq!(c.count(), 3);
        crate::testing::assert_validates_clean(&c);
    }

    #[test]
    fn reads_at_a_past_snapshot_see_it_and_cannot_write() {
        let s = storage();
        let c = s.get_or_create_collection("db", "c").unwrap();
        c.insert_many(&[&rawdoc! {"_id": 1}], true, Durability::Buffered);
        let past = s.engine().snapshot().unwrap();
        c.insert_many(&[&rawdoc! {"_id": 2}], true, Durability::Buffered);
        let r = super::StoreTxn::read_only(past.clone());
        assert_eq!(r.run(|| c.scan(false).count()), 1);
        assert_eq!(c.scan(false).count(), 2);
        let out = r.run(|| c.insert_many(&[&rawdoc! {"_id": 3}], true, Durability::Buffered));
        assert_eq!(out.inserted, 0, "{out:?}");
        assert_eq!(c.scan(false).count(), 2);
        // A transaction on the past snapshot reads it and may write.
        let t = s.begin_transaction_on(past).unwrap();
        assert_eq!(t.run(|| c.scan(false).count()), 1);
        let out = t.run(|| c.insert_many(&[&rawdoc! {"_id": 4}], true, Durability::Buffered));
        assert_eq!(out.inserted, 1, "{out:?}");
        t.commit(&mut super::write_plain).unwrap();
        assert_eq!(c.scan(false).count(), 3);
        crate::testing::assert_validates_clean(&c);
    }

    #[test]
    fn the_first_writer_wins_and_abort_applies_nothing() {
        let s = storage();
        let c = s.get_or_create_collection("db", "c").unwrap();
        c.insert_many(&[&rawdoc! {"_id": 1, "x": 0}], true, Durability::Buffered);
        let set = |x: i32| {
            move |cur: Option<&bson::RawDocument>| {
                Ok(match cur {
                    Some(_) => Modify::Replace(rawdoc! {"_id": 1, "x": x}),
                    None => Modify::Keep,
                })
            }
        };
        let a = s.begin_transaction().unwrap();
        let b = s.begin_transaction().unwrap();
        let id = RawBsonRef::Int32(1);
        a.run(|| c.modify(id, Durability::Buffered, &mut set(1)))
            .unwrap();
        let e = b
            .run(|| c.modify(id, Durability::Buffered, &mut set(2)))
            .unwrap_err();
        assert_eq!(e.code.code(), 112, "{e:?}");
        b.abort();
        a.commit(&mut super::write_plain).unwrap();
        let now = c.get(id).unwrap().unwrap();
        assert_eq!(now.get_i32("x").ok(), Some(1));
        // An aborted transaction leaves nothing.
        let d = s.begin_transaction().unwrap();
        d.run(|| c.delete(id, Durability::Buffered)).unwrap();
        d.abort();
        assert!(c.get(id).unwrap().is_some());
        assert_eq!(c.count(), 1);
    }

    fn spec(name: &str, key: &str) -> crate::IndexSpec {
        crate::IndexSpec::from_document(&bson::doc! {"name": name, "key": {key: 1}})
            .unwrap_or_else(|| panic!("spec {name}"))
    }

    #[test]
    fn collections_created_in_a_transaction_appear_at_commit() {
        let engine = MemoryEngine::shared();
        let s = Storage::open(engine.clone()).unwrap();
        let t = s.begin_transaction().unwrap();
        t.run(|| {
            s.create_collection("db", "made", bson::Document::new())
                .unwrap();
            assert!(s.create_index("db", "made", spec("a_1", "a")).unwrap());
            // Implicitly, with its index, by `createIndexes`.
            assert!(s.create_index("db", "other", spec("b_1", "b")).unwrap());
            let c = s.collection("db", "made").expect("seen inside");
            let out = c.insert_many(
                &[&rawdoc! {"_id": 1, "a": [1, 2]}],
                true,
                Durability::Buffered,
            );
            assert_eq!(out.inserted, 1, "{out:?}");
            // Creating it again inside is NamespaceExists.
            assert!(s
                .create_collection("db", "made", bson::Document::new())
                .is_err());
        });
        assert!(s.collection("db", "made").is_none());
        assert!(s.collection("db", "other").is_none());
        assert!(s.list_databases().is_empty());
        t.commit(&mut super::write_plain).unwrap();
        let c = s.collection("db", "made").expect("committed");
        assert_eq!(c.count(), 1);
        assert_eq!(c.indexes().len(), 1);
        crate::testing::assert_validates_clean(&c);
        assert_eq!(s.collection("db", "other").unwrap().indexes().len(), 1);
        // The catalog records were in the commit's batch: a reopen has them.
        drop(c);
        let again = Storage::open(engine).unwrap();
        let c = again.collection("db", "made").expect("persisted");
        assert_eq!(c.count(), 1);
        assert_eq!(c.indexes().len(), 1);
        crate::testing::assert_validates_clean(&c);
        // Ids taken by the transaction are not given out again.
        let next = again
            .create_collection("db", "next", bson::Document::new())
            .unwrap();
        assert!(next.state().id > c.state().id);
    }

    #[test]
    fn an_aborted_transaction_creates_nothing() {
        let s = storage();
        let t = s.begin_transaction().unwrap();
        t.run(|| {
            let c = s.get_or_create_collection("db", "c").unwrap();
            c.insert_many(&[&rawdoc! {"_id": 1}], true, Durability::Buffered);
        });
        t.abort();
        assert!(s.collection("db", "c").is_none());
        let t = s.begin_transaction().unwrap();
        t.run(|| s.get_or_create_collection("db", "c").unwrap());
        assert!(t.commit(&mut super::write_plain).is_ok());
        assert_eq!(s.collection("db", "c").unwrap().count(), 0);
    }

    #[test]
    fn indexes_in_a_transaction_only_on_its_own_empty_collections() {
        let s = storage();
        let c = s.get_or_create_collection("db", "old").unwrap();
        s.create_index("db", "old", spec("a_1", "a")).unwrap();
        let t = s.begin_transaction().unwrap();
        t.run(|| {
            // The same index again is a no-op; a new one is 263.
            assert!(!s.create_index("db", "old", spec("a_1", "a")).unwrap());
            let e = s.create_index("db", "old", spec("b_1", "b")).unwrap_err();
            assert_eq!(e.code.code(), 263, "{e:?}");
            let n = s.get_or_create_collection("db", "new").unwrap();
            n.insert_many(&[&rawdoc! {"_id": 1}], true, Durability::Buffered);
            let e = s.create_index("db", "new", spec("b_1", "b")).unwrap_err();
            assert_eq!(e.code.code(), 263, "{e:?}");
            let capped = bson::doc! {"capped": true, "size": 4096};
            assert!(s.create_collection("db", "capped", capped).is_err());
        });
        assert_eq!(c.indexes().len(), 1);
        t.abort();
    }

    #[test]
    fn a_collection_created_meanwhile_makes_the_commit_conflict() {
        let s = storage();
        let t = s.begin_transaction().unwrap();
        t.run(|| {
            let c = s.get_or_create_collection("db", "c").unwrap();
            c.insert_many(&[&rawdoc! {"_id": 1}], true, Durability::Buffered);
        });
        let plain = s
            .create_collection("db", "c", bson::Document::new())
            .unwrap();
        let e = t.commit(&mut super::write_plain).unwrap_err();
        assert_eq!(bisondb_error::MongoError::from(e).code.code(), 112);
        assert_eq!(plain.count(), 0);
        assert!(plain.scan(false).next().is_none());
    }

    #[test]
    fn a_commit_after_a_plain_write_to_its_key_conflicts() {
        let s = storage();
        let c = s.get_or_create_collection("db", "c").unwrap();
        let t = s.begin_transaction().unwrap();
        t.run(|| c.insert_many(&[&rawdoc! {"_id": 5}], true, Durability::Buffered));
        c.insert_many(
            &[&rawdoc! {"_id": 5, "plain": true}],
            true,
            Durability::Buffered,
        );
        assert!(t.commit(&mut super::write_plain).is_err());
        assert_eq!(c.count(), 1);
        crate::testing::assert_validates_clean(&c);
    }
}
