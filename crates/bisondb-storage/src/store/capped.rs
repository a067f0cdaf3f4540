//! Capped collections: a size (and optionally count) bound, insertion order,
//! and the oldest documents removed by the insert that overflows the bound.
//!
//! Documents stay clustered by `_id` like everywhere else; a capped collection
//! adds a natural-order index beside them:
//!
//! ```text
//! [0x05] coll:u64be rid:u64be        -> encode_id(_id)   insertion order
//! [0x06] coll:u64be encode_id(_id)   -> rid:u64be        the way back (deletes)
//! ```
//!
//! `rid` (record id) comes from a per-collection sequence that only grows while
//! the process runs: it is read once per engine generation as the highest stored
//! rid + 1 and advanced by every insert, so a later insert always sorts after an
//! earlier one, even when the newest document was deleted in between (a tailable
//! cursor remembers the last rid it returned and must never miss a new one).
//!
//! The oplog is stored by key instead (`byKey: true` in its catalog entry,
//! `Storage::order_capped_by_key`): each entry is one key, `[0x01] coll
//! encode(ts)`, written in `ts` order by [`Collection::append_capped_in`],
//! so the document keys are the natural order and an entry's record id is
//! its `ts` (64 bits, seconds then increment, as mongod's oplog record ids);
//! no `0x05`/`0x06` key exists. An insert into it (hand-made entries of a
//! test suite) is likewise keyed by the document's `ts`, as mongod's
//! oplog; an upsert is refused.
//!
//! Invariants: a document of a capped collection and its two natural-order keys
//! are written and removed in the same atomic batch; the documents an insert
//! evicts (oldest first, never the document just inserted, as mongod's
//! `cappedDeleteUntilBelowConfiguredMaximum`) are deleted, with their index
//! entries and natural-order keys, in that insert's batch, together with the
//! new stats record. Updates keep a document's rid and never evict (mongod
//! 8.0 allows updates that change a document's size and deletes).

use std::collections::{HashSet, VecDeque};
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use parking_lot::Mutex;
use tokio::sync::watch;

use super::{decode_doc, id_of, Collection, IndexWrites, InsertOutcome, ModifyResult};
use crate::error::StorageError;
use crate::index::IndexState;
use crate::layout::{self, StatsRecord};
use bisondb_engine::{prefix_successor, KeyValue, Snapshot, WriteBatch};

const NATURAL: u8 = 0x05;
const RID_OF: u8 = 0x06;

/// Natural-order keys read per engine scan.
const CHUNK: usize = 128;

/// The limits and the record-id sequence of one capped collection.
pub(crate) struct CappedState {
    /// `size`: the bound on the sum of the documents' BSON sizes.
    pub(crate) size: u64,
    /// `max`: the bound on the number of documents, when set.
    pub(crate) max: Option<u64>,
    /// `(engine generation, next rid)`, under the collection's write lock.
    next_rid: Mutex<Option<(u64, u64)>>,
    /// The highest rid committed so far; tailable cursors wait on it.
    latest: watch::Sender<u64>,
    /// Entries stored under a key that grows with each append (the
    /// oplog's `ts`, see [`Collection::append_capped_in`]): natural order
    /// is key order and the record id is the key, so neither
    /// natural-order key is written. Set at creation or by
    /// `Storage::order_capped_by_key`, never cleared.
    by_key: AtomicBool,
}

impl CappedState {
    /// The capped state described by a collection's options (`capped: true`,
    /// `size`, optional `max`, as `create` stores them); `None` for others.
    pub(crate) fn from_options(options: &Document) -> Option<CappedState> {
        if !matches!(options.get("capped"), Some(Bson::Boolean(true))) {
            return None;
        }
        let number = |k: &str| match options.get(k) {
            Some(Bson::Int32(i)) => u64::try_from(*i).ok(),
            Some(Bson::Int64(i)) => u64::try_from(*i).ok(),
            Some(Bson::Double(d)) if *d >= 0.0 => Some(*d as u64),
            _ => None,
        };
        Some(CappedState {
            size: number("size").filter(|s| *s > 0).unwrap_or(u64::MAX),
            max: number("max").filter(|m| *m > 0),
            next_rid: Mutex::new(None),
            latest: watch::channel(0).0,
            by_key: AtomicBool::new(false),
        })
    }

    /// Whether entries are stored by key (see [`CappedState::by_key`]'s
    /// field).
    pub(crate) fn by_key(&self) -> bool {
        self.by_key.load(Ordering::Acquire)
    }

    /// Marks the collection as storing its entries by key (or not, when
    /// the conversion could not be persisted).
    pub(crate) fn set_by_key(&self, by_key: bool) {
        self.by_key.store(by_key, Ordering::Release);
    }

    fn over(&self, count: u64, size: u64) -> bool {
        size > self.size || self.max.is_some_and(|m| count > m)
    }
}

fn push_u64(k: &mut Vec<u8>, v: u64) {
    k.extend_from_slice(&v.to_be_bytes());
}

pub(crate) fn natural_key(coll: u64, rid: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(NATURAL);
    push_u64(&mut k, coll);
    push_u64(&mut k, rid);
    k
}

fn natural_range(coll: u64) -> (Vec<u8>, Vec<u8>) {
    let mut start = vec![NATURAL];
    push_u64(&mut start, coll);
    // A prefix ending in a u64 after 0x05 always has a successor.
    let end = prefix_successor(&start).unwrap_or_else(|| vec![RID_OF]);
    (start, end)
}

pub(super) fn rid_key(coll: u64, encoded_id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + encoded_id.len());
    k.push(RID_OF);
    push_u64(&mut k, coll);
    k.extend_from_slice(encoded_id);
    k
}

/// Every key range a capped collection `coll` owns besides its documents (for
/// the purge after a drop).
pub(crate) fn collection_ranges(coll: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    [NATURAL, RID_OF]
        .into_iter()
        .filter_map(|tag| {
            let mut p = vec![tag];
            push_u64(&mut p, coll);
            prefix_successor(&p).map(|end| (p, end))
        })
        .collect()
}

/// The key of the entry with record id `rid` in a collection stored by key:
/// the entry's `ts`, whose 64 bits (seconds, then increment) are the record
/// id, as mongod's oplog record ids.
fn entry_key(coll: u64, rid: u64) -> Vec<u8> {
    let ts = bson::Timestamp {
        time: (rid >> 32) as u32,
        increment: rid as u32,
    };
    layout::doc_key_for(coll, bson::RawBsonRef::Timestamp(ts))
}

/// The record id of an entry's key in a collection stored by key.
pub(super) fn rid_of_entry_key(key: &[u8]) -> Result<u64, StorageError> {
    match key.get(9..) {
        Some([crate::keycode::tag::TIMESTAMP, rest @ ..]) => <[u8; 8]>::try_from(rest)
            .map(u64::from_be_bytes)
            .map_err(|_| StorageError::corrupt(format!("bad entry key {key:?}"))),
        _ => Err(StorageError::corrupt(format!(
            "an entry of a collection stored by ts has key {key:?}, not a timestamp"
        ))),
    }
}

fn rid_of_natural_key(key: &[u8]) -> Result<u64, StorageError> {
    key.get(9..17)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StorageError::corrupt(format!("bad natural-order key {key:?}")))
}

pub(super) fn decode_rid(v: &[u8]) -> Result<u64, StorageError> {
    <[u8; 8]>::try_from(v)
        .map(u64::from_be_bytes)
        .map_err(|_| StorageError::corrupt(format!("bad record id of {} bytes", v.len())))
}

/// A document of this call not yet committed, oldest first: eviction may
/// reach it once the stored documents are gone.
struct Fresh {
    encoded: Vec<u8>,
    rid: u64,
    doc: usize,
}

/// Finds the oldest documents and queues their removal.
struct Evictor<'a> {
    coll: &'a Collection,
    snap: &'a dyn Snapshot,
    indexes: &'a [Arc<IndexState>],
    /// The last natural-order key taken from the snapshot.
    resume: Option<Vec<u8>>,
    buffer: VecDeque<KeyValue>,
    stored_done: bool,
    fresh: VecDeque<Fresh>,
    /// Document keys removed by this call (a later document may reuse the `_id`).
    evicted: HashSet<Vec<u8>>,
}

impl<'a> Evictor<'a> {
    fn new(coll: &'a Collection, snap: &'a dyn Snapshot, indexes: &'a [Arc<IndexState>]) -> Self {
        Evictor {
            coll,
            snap,
            indexes,
            resume: None,
            buffer: VecDeque::new(),
            stored_done: false,
            fresh: VecDeque::new(),
            evicted: HashSet::new(),
        }
    }

    /// The oldest stored `(natural key, encoded _id)` not yet evicted (of
    /// a collection stored by key: `(document key, document)`).
    fn next_stored(&mut self) -> Result<Option<KeyValue>, StorageError> {
        if self.buffer.is_empty() && !self.stored_done {
            let (start, end) = self.coll.natural_bounds();
            let from = match &self.resume {
                Some(k) => Bound::Excluded(k.as_slice()),
                None => Bound::Included(start.as_slice()),
            };
            let chunk = self
                .snap
                .scan(from, Bound::Excluded(end.as_slice()), false, CHUNK)?;
            self.stored_done = chunk.len() < CHUNK;
            if let Some((k, _)) = chunk.last() {
                self.resume = Some(k.clone());
            }
            self.buffer.extend(chunk);
        }
        Ok(self.buffer.pop_front())
    }

    /// Removes the oldest documents while the count or size in `tally`
    /// exceeds the limits, counting what it removes there.
    fn evict(
        &mut self,
        capped: &CappedState,
        docs: &[&RawDocument],
        batch: &mut WriteBatch,
        tally: &mut StatsRecord,
    ) -> Result<(), StorageError> {
        self.evict_below(capped.size, capped.max, docs, batch, tally)
    }

    /// [`Evictor::evict`] down to `size` bytes and `max` documents.
    fn evict_below(
        &mut self,
        size: u64,
        max: Option<u64>,
        docs: &[&RawDocument],
        batch: &mut WriteBatch,
        tally: &mut StatsRecord,
    ) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let by_key = self.coll.by_key();
        while tally.data_size > size || max.is_some_and(|m| tally.count > m) {
            // The natural-order key is `None` for a collection stored by key.
            let (natural, encoded, doc): (Option<Vec<u8>>, Vec<u8>, RawDocumentBuf) =
                if let Some((first, second)) = self.next_stored()? {
                    if by_key {
                        let encoded = first.get(9..).unwrap_or_default().to_vec();
                        (None, encoded, decode_doc(second)?)
                    } else {
                        let key = layout::doc_key(id, &second);
                        let Some(bytes) = self.snap.get(&key)? else {
                            return Err(StorageError::corrupt(format!(
                                "natural-order key without its document in {}",
                                self.coll.ns
                            )));
                        };
                        (Some(first), second, decode_doc(bytes)?)
                    }
                } else if let Some(f) = self.fresh.pop_front() {
                    let doc = docs
                        .get(f.doc)
                        .map(|d| (*d).to_owned())
                        .ok_or_else(|| StorageError::internal("evicted an unknown document"))?;
                    let natural = (!by_key).then(|| natural_key(id, f.rid));
                    (natural, f.encoded, doc)
                } else {
                    break;
                };
            if !self.indexes.is_empty() {
                let writes = self.coll.index_writes(
                    self.indexes,
                    self.snap,
                    Some(&doc),
                    None,
                    &encoded,
                    &mut HashSet::new(),
                )?;
                writes.apply(id, batch, &mut Vec::new(), tally);
            }
            let key = layout::doc_key(id, &encoded);
            tally.remove_doc(key.len(), doc.as_bytes().len());
            batch.delete(key.clone());
            if let Some(natural) = natural {
                batch.delete(natural);
                batch.delete(rid_key(id, &encoded));
            }
            self.evicted.insert(key);
        }
        Ok(())
    }
}

impl Collection {
    /// Whether this is a capped collection.
    pub fn is_capped(&self) -> bool {
        self.state.capped.is_some()
    }

    /// Whether this capped collection stores its entries by key (the
    /// oplog, see [`CappedState`]'s `by_key`).
    pub fn by_key(&self) -> bool {
        self.state.capped.as_ref().is_some_and(|c| c.by_key())
    }

    /// The key range of this capped collection's natural order: its
    /// natural-order keys, or its documents when they are stored by key.
    fn natural_bounds(&self) -> (Vec<u8>, Vec<u8>) {
        if self.by_key() {
            layout::doc_range(self.state.id)
        } else {
            natural_range(self.state.id)
        }
    }

    /// `(size, max)` of a capped collection.
    pub fn capped_limits(&self) -> Option<(u64, Option<u64>)> {
        self.state.capped.as_ref().map(|c| (c.size, c.max))
    }

    /// A receiver whose value is the highest record id committed so far; it
    /// changes with every insert (a tailable cursor's `awaitData` waits on it).
    /// `None` for a collection that is not capped.
    pub fn subscribe_inserts(&self) -> Option<watch::Receiver<u64>> {
        self.state.capped.as_ref().map(|c| c.latest.subscribe())
    }

    /// Every document with its record id, in insertion order (newest first when
    /// `reverse`), from a snapshot taken now. Empty for a collection that is
    /// not capped (its natural order is its `_id` order: use `scan`).
    pub fn scan_natural(&self, reverse: bool) -> NaturalIter {
        let (start, end) = self.natural_bounds();
        NaturalIter::new(self, Bound::Included(start), Bound::Excluded(end), reverse)
    }

    /// The documents inserted after record id `after`, oldest first, from a
    /// snapshot taken now (what a tailable cursor reads on `getMore`).
    pub fn scan_natural_after(&self, after: u64) -> NaturalIter {
        let (_, end) = self.natural_bounds();
        let from = if self.by_key() {
            entry_key(self.state.id, after)
        } else {
            natural_key(self.state.id, after)
        };
        NaturalIter::new(self, Bound::Excluded(from), Bound::Excluded(end), false)
    }

    /// Whether the document with record id `rid` is still stored (a tailable
    /// cursor whose position was evicted has lost its place).
    pub fn has_record(&self, rid: u64) -> Result<bool, StorageError> {
        let key = if self.by_key() {
            entry_key(self.state.id, rid)
        } else {
            natural_key(self.state.id, rid)
        };
        Ok(self.engine.snapshot()?.get(&key)?.is_some())
    }

    /// The next record id, under the write lock: read once per engine
    /// generation (a batch reported failed may have been applied after a
    /// reopen), never going back.
    fn next_rid_locked(
        &self,
        capped: &CappedState,
        snap: &dyn Snapshot,
        generation: u64,
    ) -> Result<u64, StorageError> {
        let mut cached = capped.next_rid.lock();
        let previous = match *cached {
            Some((g, n)) if g == generation => return Ok(n),
            Some((_, n)) => n,
            None => 1,
        };
        let (start, end) = natural_range(self.state.id);
        let last = snap.scan(
            Bound::Included(start.as_slice()),
            Bound::Excluded(end.as_slice()),
            true,
            1,
        )?;
        let stored_next = match last.first() {
            Some((k, _)) => rid_of_natural_key(k)?.saturating_add(1),
            None => 1,
        };
        let next = previous.max(stored_next);
        *cached = Some((generation, next));
        Ok(next)
    }

    /// Records that rids below `next` are used and wakes tailable cursors.
    fn publish_locked(&self, capped: &CappedState, generation: u64, next: u64) {
        *capped.next_rid.lock() = Some((generation, next));
        capped.latest.send_replace(next.saturating_sub(1));
    }

    /// `insert_many` into a capped collection, under the write lock: documents
    /// one after the other, each followed by the eviction it causes, all in one
    /// batch with the stats record.
    pub(super) fn insert_capped_locked(
        &self,
        capped: &CappedState,
        docs: &[&RawDocument],
        ordered: bool,
    ) -> InsertOutcome {
        let mut out = InsertOutcome::default();
        let fail_all = |out: &mut InsertOutcome, upto: usize, e: StorageError| {
            out.errors = (0..upto).map(|i| (i, e.clone())).collect();
            if ordered {
                out.errors.truncate(1);
            }
        };
        let snap = match self.writable_snapshot_locked() {
            Ok(s) => s,
            Err(e) => {
                fail_all(&mut out, docs.len(), e);
                return out;
            }
        };
        let generation = self.engine.generation();
        let by_key = capped.by_key();
        let mut rid = match self.next_rid_locked(capped, snap.as_ref(), generation) {
            // Stored by key: each document's key is its record id.
            _ if by_key => 0,
            Ok(r) => r,
            Err(e) => {
                fail_all(&mut out, docs.len(), e);
                return out;
            }
        };
        let indexes = self.state.indexes.read().clone();
        let mut batch = WriteBatch::with_capacity(docs.len() * 3 + 1);
        let mut queued: HashSet<Vec<u8>> = HashSet::new();
        let mut queued_unique: HashSet<Vec<u8>> = HashSet::new();
        let mut evictor = Evictor::new(self, snap.as_ref(), &indexes);
        let mut tally = self.tally_locked(&indexes);
        let mut accepted: Vec<usize> = Vec::with_capacity(docs.len());
        let mut became_multikey = Vec::new();
        for (i, doc) in docs.iter().enumerate() {
            let prepared = (|| {
                let id = if by_key {
                    self.ts_of(doc)?
                } else {
                    id_of(doc).ok_or_else(|| {
                        StorageError::invalid_argument("document has no _id field")
                    })?
                };
                let key = layout::doc_key_for(self.state.id, id);
                let taken = !evictor.evicted.contains(&key)
                    && (queued.contains(&key) || snap.get(&key)?.is_some());
                if taken {
                    return Err(self.duplicate(id));
                }
                let encoded = key.get(9..).unwrap_or_default().to_vec();
                let writes = if indexes.is_empty() {
                    IndexWrites::default()
                } else {
                    self.index_writes(
                        &indexes,
                        snap.as_ref(),
                        None,
                        Some(doc),
                        &encoded,
                        &mut queued_unique,
                    )?
                };
                Ok((key, encoded, writes))
            })();
            let (key, encoded, writes) = match prepared {
                Ok(p) => p,
                Err(e) => {
                    out.errors.push((i, e));
                    if ordered {
                        break;
                    }
                    continue;
                }
            };
            batch.put(key.clone(), doc.as_bytes().to_vec());
            if by_key {
                rid = match rid_of_entry_key(&key) {
                    Ok(r) => r,
                    Err(e) => {
                        fail_all(&mut out, i + 1, e);
                        return out;
                    }
                };
            } else {
                batch.put(natural_key(self.state.id, rid), encoded.clone());
                batch.put(rid_key(self.state.id, &encoded), rid.to_be_bytes().to_vec());
            }
            writes.apply(self.state.id, &mut batch, &mut became_multikey, &mut tally);
            evictor.evicted.remove(&key);
            tally.add_doc(key.len(), doc.as_bytes().len());
            queued.insert(key);
            if let Err(e) = evictor.evict(capped, docs, &mut batch, &mut tally) {
                // Nothing is written: every document of the call fails.
                fail_all(&mut out, i + 1, e);
                return out;
            }
            evictor.fresh.push_back(Fresh {
                encoded,
                rid,
                doc: i,
            });
            rid = rid.saturating_add(1);
            accepted.push(i);
        }
        if accepted.is_empty() {
            return out;
        }
        let observed = self.observed_inserts(docs, &accepted);
        match self.commit_inserts_locked(batch, &tally, &indexes, became_multikey, &observed) {
            Ok(()) => {
                // Evictions lower the highest key; read the bound again next time.
                *self.state.max_doc_key.lock() = None;
                out.inserted = accepted.len();
                self.publish_locked(capped, generation, rid);
            }
            Err(e) => out.batch_failed(accepted, ordered, e),
        }
        out
    }

    /// Queues what a capped collection needs beside a delete, an upsert or a
    /// replacement by [`Collection::modify`] (under the write lock): a delete
    /// drops the natural-order keys, an upsert gets a record id and evicts as an
    /// insert does, counting the evictions in `tally`. Returns, for an upsert,
    /// the next record id to publish once the batch is committed.
    pub(super) fn capped_modify_locked(
        &self,
        snap: &dyn Snapshot,
        encoded: &[u8],
        result: ModifyResult,
        batch: &mut WriteBatch,
        tally: &mut StatsRecord,
    ) -> Result<Option<u64>, StorageError> {
        let Some(capped) = self.state.capped.as_ref() else {
            return Ok(None);
        };
        let id = self.state.id;
        match result {
            ModifyResult::Deleted => {
                self.forget_locked(snap, encoded, batch)?;
                Ok(None)
            }
            ModifyResult::Inserted if capped.by_key() => Err(self.appended_only()),
            ModifyResult::Inserted => {
                let rid = self.next_rid_locked(capped, snap, self.engine.generation())?;
                batch.put(natural_key(id, rid), encoded.to_vec());
                batch.put(rid_key(id, encoded), rid.to_be_bytes().to_vec());
                let indexes = self.state.indexes.read().clone();
                let mut evictor = Evictor::new(self, snap, &indexes);
                evictor.evict(capped, &[], batch, tally)?;
                Ok(Some(rid.saturating_add(1)))
            }
            _ => Ok(None),
        }
    }

    /// Checks that every document of this capped collection is keyed by a
    /// timestamp, as storing it by key needs: the first and the last key
    /// (keys sort by type first, so every key between two timestamp keys
    /// is one too). Under the write lock.
    pub(crate) fn check_keyed_by_ts_locked(&self) -> Result<(), StorageError> {
        let snap = self.engine.snapshot()?;
        let (start, end) = layout::doc_range(self.state.id);
        for reverse in [false, true] {
            let edge = snap.scan(
                Bound::Included(start.as_slice()),
                Bound::Excluded(end.as_slice()),
                reverse,
                1,
            )?;
            if let Some((key, _)) = edge.first() {
                rid_of_entry_key(key).map_err(|_| {
                    StorageError::invalid_argument(format!(
                        "{} holds documents that are not oplog entries keyed by their ts (inserted while the server ran without --replSet?): move them out of it or drop it before starting as a replica-set member",
                        self.ns
                    ))
                })?;
            }
        }
        Ok(())
    }

    /// Removes the natural-order keys a capped collection converted to
    /// storing its entries by key left (none once done; a crash in the
    /// middle leaves the rest for the next call). They are read by nothing
    /// once the collection is stored by key, so the removal need not be
    /// atomic.
    pub(crate) fn purge_natural_keys(&self) -> Result<u64, StorageError> {
        let mut removed = 0u64;
        for (start, end) in collection_ranges(self.state.id) {
            loop {
                let chunk = self.engine.snapshot()?.scan(
                    Bound::Included(start.as_slice()),
                    Bound::Excluded(end.as_slice()),
                    false,
                    4096,
                )?;
                if chunk.is_empty() {
                    break;
                }
                let mut batch = WriteBatch::with_capacity(chunk.len());
                for (k, _) in chunk {
                    batch.delete(k);
                    removed += 1;
                }
                self.engine
                    .write(batch, bisondb_engine::Durability::Buffered)?;
            }
        }
        Ok(removed)
    }

    /// The key of a document inserted into a collection stored by key:
    /// its `ts`, which must be a timestamp (as mongod's oplog, whose
    /// record id it is).
    fn ts_of<'d>(&self, doc: &'d RawDocument) -> Result<bson::RawBsonRef<'d>, StorageError> {
        match doc.get("ts") {
            Ok(Some(ts @ bson::RawBsonRef::Timestamp(_))) => Ok(ts),
            _ => Err(StorageError::invalid_argument(format!(
                "{} keeps each document under its ts: a document needs a timestamp ts",
                self.ns
            ))),
        }
    }

    /// Why a document cannot be upserted into a collection stored by key:
    /// its key would be its `ts`, not the `_id` the upsert looked for.
    fn appended_only(&self) -> StorageError {
        StorageError::invalid_argument(format!(
            "{} keeps each document under its ts: upserts into it are not supported",
            self.ns
        ))
    }

    /// After the batch of [`Collection::capped_modify_locked`] committed.
    pub(super) fn capped_committed_locked(&self, next: Option<u64>) {
        if let (Some(capped), Some(next)) = (self.state.capped.as_ref(), next) {
            self.publish_locked(capped, self.engine.generation(), next);
        }
    }

    /// Queues the removal of the natural-order keys of the document whose
    /// encoded `_id` is `encoded` (a delete); nothing for other collections.
    pub(super) fn forget_locked(
        &self,
        snap: &dyn Snapshot,
        encoded: &[u8],
        batch: &mut WriteBatch,
    ) -> Result<(), StorageError> {
        if self.state.capped.as_ref().is_none_or(|c| c.by_key()) {
            return Ok(());
        }
        let key = rid_key(self.state.id, encoded);
        if let Some(v) = snap.get(&key)? {
            batch.delete(natural_key(self.state.id, decode_rid(&v)?));
        }
        batch.delete(key);
        Ok(())
    }
}

/// Documents of a capped collection in insertion order with their record ids,
/// read in chunks from a snapshot the iterator owns.
pub struct NaturalIter {
    /// The view read from, or why there is none (the first read reports it).
    snapshot: Result<Arc<dyn Snapshot>, StorageError>,
    coll: u64,
    /// The scan reads the documents themselves (a collection stored by key).
    by_key: bool,
    start: Bound<Vec<u8>>,
    end: Bound<Vec<u8>>,
    reverse: bool,
    buffer: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
}

impl NaturalIter {
    fn new(
        coll: &Collection,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
    ) -> NaturalIter {
        NaturalIter {
            snapshot: coll.engine.snapshot().map_err(StorageError::from),
            coll: coll.state.id,
            by_key: coll.by_key(),
            start,
            end,
            reverse,
            buffer: Vec::new().into_iter(),
            exhausted: false,
        }
    }

    fn refill(&mut self) -> Result<(), StorageError> {
        let start = self.start.as_ref().map(Vec::as_slice);
        let end = self.end.as_ref().map(Vec::as_slice);
        let snapshot = self.snapshot.as_ref().map_err(Clone::clone)?;
        let chunk = snapshot.scan(start, end, self.reverse, CHUNK)?;
        self.exhausted = chunk.len() < CHUNK;
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

    fn fetch(&self, key: &[u8], value: Vec<u8>) -> Result<(u64, RawDocumentBuf), StorageError> {
        if self.by_key {
            return Ok((rid_of_entry_key(key)?, decode_doc(value)?));
        }
        let encoded = value.as_slice();
        let rid = rid_of_natural_key(key)?;
        let snapshot = self.snapshot.as_ref().map_err(Clone::clone)?;
        match snapshot.get(&layout::doc_key(self.coll, encoded))? {
            Some(bytes) => Ok((rid, decode_doc(bytes)?)),
            None => Err(StorageError::corrupt(format!(
                "natural-order key {rid} without its document"
            ))),
        }
    }
}

impl Iterator for NaturalIter {
    type Item = Result<(u64, RawDocumentBuf), StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Err(e) = bisondb_error::interrupt::check() {
            self.exhausted = true;
            self.buffer = Vec::new().into_iter();
            return Some(Err(StorageError::Mongo(e)));
        }
        loop {
            if let Some((key, value)) = self.buffer.next() {
                return Some(self.fetch(&key, value));
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

/// An entry for [`Collection::append_capped_in`]: the value it is stored
/// under (in place of an `_id`, which oplog entries do not have) and the
/// document.
pub type KeyedEntry = (Bson, RawDocumentBuf);

impl Collection {
    /// Appends documents to this capped collection (the oplog) inside
    /// another write's batch: under this collection's write lock, `build`
    /// makes the entries (so their order is the record order, and a clock
    /// ticked inside it grows with it), which are queued into `batch` with
    /// their natural-order keys, the evictions they cause and this
    /// collection's new stats record; then `write` commits the whole batch
    /// once, and on success the new records are published (tailable
    /// cursors wake). Entries are stored under their key value, which must
    /// grow with each entry; the documents carry no `_id`. In a collection
    /// stored by key (the oplog, see `Storage::order_capped_by_key`) that key
    /// must be a timestamp and an entry is that one key: no natural-order
    /// keys.
    ///
    /// The append is on every write's path, so it reads nothing while the
    /// collection has room: no snapshot is taken unless the cached stats or
    /// record ids are of an older engine generation, or entries must go.
    /// When they must, it removes the oldest down to 1/16 below the size
    /// (as mongod truncates its oplog a stretch at a time), so the scan of
    /// the oldest entries is paid once per stretch, not once per write.
    pub fn append_capped_in(
        &self,
        mut batch: WriteBatch,
        build: &mut dyn FnMut() -> Result<Vec<KeyedEntry>, StorageError>,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let Some(capped) = self.state.capped.as_ref() else {
            return Err(StorageError::internal(format!(
                "{} is not a capped collection",
                self.ns
            )));
        };
        // An append is never part of a transaction (transactions cannot
        // write capped collections): it is written at once.
        let _outside = super::txn::Outside::enter();
        let _w = self.state.write_lock.lock();
        self.check_live()?;
        let generation = self.engine.generation();
        let by_key = capped.by_key();
        let current = self.state.stats_generation.load(Ordering::Acquire) == generation
            && (by_key || matches!(*capped.next_rid.lock(), Some((g, _)) if g == generation));
        // Read when needed, then shared by the record ids and the evictions.
        let snap: std::cell::OnceCell<Arc<dyn Snapshot>> = std::cell::OnceCell::new();
        if !current {
            let _ = snap.set(self.writable_snapshot_locked()?);
        }
        let mut rid = match snap.get() {
            // Stored by key: each entry's key is its record id.
            _ if by_key => 0,
            Some(s) => self.next_rid_locked(capped, s.as_ref(), generation)?,
            // Cached for this generation: no read.
            None => capped.next_rid.lock().map_or(1, |(_, next)| next),
        };
        let entries = build()?;
        let indexes = self.state.indexes.read().clone();
        let mut tally = self.tally_locked(&indexes);
        let docs: Vec<&RawDocument> = entries.iter().map(|(_, d)| d.as_ref()).collect();
        let mut evictor: Option<Evictor<'_>> = None;
        let mut fresh: VecDeque<Fresh> = VecDeque::new();
        let low = capped.size.saturating_sub(capped.size / 16);
        for (i, (key_value, doc)) in entries.iter().enumerate() {
            let key = match key_value {
                Bson::Timestamp(ts) => {
                    layout::doc_key_for(self.state.id, bson::RawBsonRef::Timestamp(*ts))
                }
                other => {
                    let raw = bson::RawBson::try_from(other.clone())
                        .map_err(|e| StorageError::internal(format!("oplog key: {e}")))?;
                    layout::doc_key_for(self.state.id, raw.as_raw_bson_ref())
                }
            };
            let encoded = key.get(9..).unwrap_or_default().to_vec();
            if by_key {
                rid = rid_of_entry_key(&key)?;
            } else {
                batch.put(natural_key(self.state.id, rid), encoded.clone());
                batch.put(rid_key(self.state.id, &encoded), rid.to_be_bytes().to_vec());
            }
            tally.add_doc(key.len(), doc.as_bytes().len());
            batch.put(key, doc.as_bytes().to_vec());
            if capped.over(tally.count, tally.data_size) {
                if evictor.is_none() {
                    if snap.get().is_none() {
                        let _ = snap.set(self.writable_snapshot_locked()?);
                    }
                    let s = snap
                        .get()
                        .ok_or_else(|| StorageError::internal("capped: no snapshot"))?;
                    let mut e = Evictor::new(self, s.as_ref(), &indexes);
                    e.fresh = std::mem::take(&mut fresh);
                    evictor = Some(e);
                }
                if let Some(e) = evictor.as_mut() {
                    e.evict_below(low, capped.max, &docs, &mut batch, &mut tally)?;
                }
            }
            let f = Fresh {
                encoded,
                rid,
                doc: i,
            };
            match evictor.as_mut() {
                Some(e) => e.fresh.push_back(f),
                None => fresh.push_back(f),
            }
            rid = rid.saturating_add(1);
        }
        batch.put(
            layout::stats_key(self.state.id),
            layout::encode_stats(&tally),
        );
        if let Err(e) = write(batch) {
            *self.state.max_doc_key.lock() = None;
            return Err(e);
        }
        *self.state.max_doc_key.lock() = None;
        self.publish_tally_locked(&tally, &indexes);
        if !entries.is_empty() {
            self.publish_locked(capped, generation, rid);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::catalog::Storage;
    use crate::index::IndexSpec;
    use crate::Modify;
    use bisondb_engine::memory::MemoryEngine;
    use bisondb_engine::Durability;
    use bson::{doc, rawdoc, RawBsonRef};

    fn capped(s: &Storage, size: i64, max: Option<i64>) -> Collection {
        let mut options = doc! {"capped": true, "size": size};
        if let Some(m) = max {
            options.insert("max", m);
        }
        s.create_collection("db", "cap", options)
            .unwrap_or_else(|e| panic!("create: {e}"))
    }

    fn insert(c: &Collection, ids: &[i32]) -> InsertOutcome {
        let docs: Vec<RawDocumentBuf> = ids.iter().map(|i| rawdoc! {"_id": *i, "a": *i}).collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        c.insert_many(&refs, true, Durability::Buffered)
    }

    fn natural(c: &Collection, reverse: bool) -> Vec<i32> {
        c.scan_natural(reverse)
            .map(|r| {
                let (_, d) = r.unwrap_or_else(|e| panic!("scan: {e}"));
                d.get_i32("_id").unwrap_or(-1)
            })
            .collect()
    }

    fn stored_size(c: &Collection) -> u64 {
        c.scan(false)
            .map(|d| d.map(|d| d.as_bytes().len() as u64).unwrap_or(0))
            .sum()
    }

    #[test]
    fn options_give_limits_only_when_capped() {
        assert!(CappedState::from_options(&doc! {}).is_none());
        assert!(CappedState::from_options(&doc! {"capped": false, "size": 10}).is_none());
        let c = CappedState::from_options(&doc! {"capped": true, "size": 4096_i64, "max": 5})
            .unwrap_or_else(|| panic!("capped"));
        assert_eq!((c.size, c.max), (4096, Some(5)));
        let c = CappedState::from_options(&doc! {"capped": true, "size": 256})
            .unwrap_or_else(|| panic!("capped"));
        assert_eq!((c.size, c.max), (256, None));
    }

    #[test]
    fn max_evicts_oldest_in_insertion_order_not_id_order() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, Some(3));
        // `_id`s out of order: natural order must follow insertion, not `_id`.
        for id in [5, 1, 9, 3] {
            assert_eq!(insert(&c, &[id]).inserted, 1);
        }
        assert_eq!(natural(&c, false), vec![1, 9, 3]);
        assert_eq!(natural(&c, true), vec![3, 9, 1]);
        // One call inserting more than `max`: only the last three remain.
        assert_eq!(insert(&c, &[20, 21, 22, 23, 24]).inserted, 5);
        assert_eq!(natural(&c, false), vec![22, 23, 24]);
        assert_eq!(c.count(), 3);
        assert_eq!(c.data_size(), stored_size(&c));
        // An evicted `_id` can be inserted again (it is not a duplicate).
        assert_eq!(insert(&c, &[20]).inserted, 1);
        assert_eq!(natural(&c, false), vec![23, 24, 20]);
        // A duplicate of a live `_id` fails and evicts nothing.
        let out = insert(&c, &[24]);
        assert_eq!(out.inserted, 0);
        assert_eq!(natural(&c, false), vec![23, 24, 20]);
    }

    #[test]
    fn size_evicts_and_never_the_document_just_inserted() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let one = rawdoc! {"_id": 0, "a": 0}.as_bytes().len() as u64;
        let c = capped(&s, (one * 3) as i64, None);
        insert(&c, &[0, 1, 2, 3, 4]);
        assert_eq!(natural(&c, false), vec![2, 3, 4]);
        assert!(c.data_size() <= one * 3);
        assert_eq!(c.data_size(), stored_size(&c));
        // A document larger than the whole cap stays, alone.
        let big = rawdoc! {"_id": 100, "pad": "x".repeat(200)};
        let out = c.insert_many(&[big.as_ref()], true, Durability::Buffered);
        assert_eq!(out.inserted, 1);
        assert_eq!(natural(&c, false), vec![100]);
        assert_eq!(c.count(), 1);
    }

    #[test]
    fn eviction_removes_index_entries_and_deletes_keep_order() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, Some(2));
        let spec = IndexSpec {
            name: "a_1".into(),
            key: doc! {"a": 1},
            unique: true,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: None,
            hidden: false,
            background: None,
            collation: None,
            type_options: bson::Document::new(),
        };
        assert!(s
            .create_index("db", "cap", spec)
            .unwrap_or_else(|e| panic!("{e}")));
        insert(&c, &[1, 2, 3]);
        // `a: 1` went with document 1: the unique key is free again.
        let again = rawdoc! {"_id": 10, "a": 1};
        let out = c.insert_many(&[again.as_ref()], true, Durability::Buffered);
        assert_eq!(out.inserted, 1, "{:?}", out.errors);
        assert_eq!(natural(&c, false), vec![3, 10]);
        // Deleting the newest keeps the order of the rest and never reuses its rid.
        let last_before = c
            .scan_natural(true)
            .next()
            .and_then(|r| r.ok())
            .map(|(r, _)| r);
        assert!(c
            .delete(RawBsonRef::Int32(10), Durability::Buffered)
            .unwrap_or(false));
        insert(&c, &[11]);
        let newest = c
            .scan_natural(true)
            .next()
            .and_then(|r| r.ok())
            .map(|(r, _)| r);
        assert!(newest > last_before, "{newest:?} after {last_before:?}");
        assert_eq!(natural(&c, false), vec![3, 11]);
        assert_eq!(c.count(), 2);
        // Evictions took their index entries out of the sizes too: the stats
        // record matches what is stored (validate compares them).
        assert_eq!(c.indexes().first().map(|i| i.entries), Some(2));
        crate::testing::assert_validates_clean(&c);
    }

    #[test]
    fn upsert_gets_a_record_id_and_evicts() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, Some(2));
        insert(&c, &[1, 2]);
        let r = c.modify(RawBsonRef::Int32(7), Durability::Buffered, &mut |cur| {
            assert!(cur.is_none());
            Ok(Modify::Insert(rawdoc! {"_id": 7}))
        });
        assert_eq!(r.ok(), Some(ModifyResult::Inserted));
        assert_eq!(natural(&c, false), vec![2, 7]);
        // A replacement keeps its place.
        let r = c.modify(RawBsonRef::Int32(2), Durability::Buffered, &mut |_| {
            Ok(Modify::Replace(
                rawdoc! {"_id": 2, "grown": "x".repeat(100)},
            ))
        });
        assert_eq!(r.ok(), Some(ModifyResult::Replaced));
        assert_eq!(natural(&c, false), vec![2, 7]);
        let r = c.modify(RawBsonRef::Int32(2), Durability::Buffered, &mut |_| {
            Ok(Modify::Delete)
        });
        assert_eq!(r.ok(), Some(ModifyResult::Deleted));
        assert_eq!(natural(&c, false), vec![7]);
        assert_eq!(c.data_size(), stored_size(&c));
        crate::testing::assert_validates_clean(&c);
    }

    #[test]
    fn tail_reads_after_a_record_and_inserts_wake_subscribers() {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, Some(3));
        let mut rx = c.subscribe_inserts().unwrap_or_else(|| panic!("capped"));
        insert(&c, &[1, 2]);
        assert!(rx.has_changed().unwrap_or(false));
        let seen = *rx.borrow_and_update();
        let first: Vec<(u64, RawDocumentBuf)> =
            c.scan_natural(false).filter_map(Result::ok).collect();
        assert_eq!(first.last().map(|(r, _)| *r), Some(seen));
        insert(&c, &[3]);
        let after: Vec<i32> = c
            .scan_natural_after(seen)
            .filter_map(Result::ok)
            .map(|(_, d)| d.get_i32("_id").unwrap_or(-1))
            .collect();
        assert_eq!(after, vec![3]);
        assert!(c.has_record(seen).unwrap_or(false));
        insert(&c, &[4, 5, 6]);
        assert!(!c.has_record(seen).unwrap_or(true), "evicted");
        let plain = s
            .get_or_create_collection("db", "plain")
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(plain.subscribe_inserts().is_none() && !plain.is_capped());
    }

    #[test]
    fn appends_drop_the_oldest_a_stretch_at_a_time() {
        let engine = MemoryEngine::shared();
        let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
        let one = rawdoc! {"n": 0_i64, "pad": "x".repeat(100)}
            .as_bytes()
            .len() as u64;
        let c = capped(&s, (one * 64) as i64, None);
        let mut next = 0_i64;
        let mut append = |n: usize| {
            let mut build = || {
                Ok((0..n)
                    .map(|_| {
                        next += 1;
                        let ts = bson::Timestamp {
                            time: 1,
                            increment: next as u32,
                        };
                        (
                            Bson::Timestamp(ts),
                            rawdoc! {"n": next, "pad": "x".repeat(100)},
                        )
                    })
                    .collect())
            };
            let e = engine.clone();
            c.append_capped_in(WriteBatch::new(), &mut build, &mut |b| {
                Ok(e.write(b, Durability::Buffered)?)
            })
            .unwrap_or_else(|e| panic!("append: {e}"));
        };
        append(60);
        assert_eq!(c.count(), 60, "room left: nothing dropped");
        // The append that overflows drops the oldest down to 1/16 below the
        // size, so the next few appends find room without reading.
        append(10);
        let low = one * 64 - one * 64 / 16;
        assert!(c.data_size() <= low, "{} > {low}", c.data_size());
        let kept = c.count();
        append(1);
        assert_eq!(c.count(), kept + 1, "no drop while under the size");
        let ns: Vec<i64> = c
            .scan_natural(false)
            .map(|r| r.map(|(_, d)| d.get_i64("n").unwrap_or(-1)))
            .collect::<Result<_, _>>()
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ns.last(), Some(&71));
        assert!(ns.windows(2).all(|w| w[1] == w[0] + 1), "{ns:?}");
        assert_eq!(c.data_size(), stored_size(&c));
    }

    /// Appends `n` entries of about `pad` bytes keyed by timestamps after
    /// `*next` (the oplog's way), in one batch.
    fn append_ts(
        engine: &Arc<dyn bisondb_engine::Engine>,
        c: &Collection,
        next: &mut u32,
        n: usize,
        pad: usize,
    ) {
        let mut build = || {
            Ok((0..n)
                .map(|_| {
                    *next += 1;
                    let ts = bson::Timestamp {
                        time: 7,
                        increment: *next,
                    };
                    (
                        Bson::Timestamp(ts),
                        rawdoc! {"ts": ts, "pad": "x".repeat(pad)},
                    )
                })
                .collect())
        };
        let e = engine.clone();
        c.append_capped_in(WriteBatch::new(), &mut build, &mut |b| {
            Ok(e.write(b, Durability::Buffered)?)
        })
        .unwrap_or_else(|e| panic!("append: {e}"));
    }

    fn increments(it: NaturalIter) -> Vec<(u64, u32)> {
        it.map(|r| {
            let (rid, d) = r.unwrap_or_else(|e| panic!("{e}"));
            let ts = d.get_timestamp("ts").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(rid, (u64::from(ts.time) << 32) | u64::from(ts.increment));
            (rid, ts.increment)
        })
        .collect()
    }

    fn keys_in(engine: &Arc<dyn bisondb_engine::Engine>, ranges: Vec<(Vec<u8>, Vec<u8>)>) -> usize {
        let snap = engine.snapshot().unwrap_or_else(|e| panic!("{e}"));
        ranges
            .iter()
            .map(|(start, end)| {
                snap.scan(
                    Bound::Included(start),
                    Bound::Excluded(end),
                    false,
                    usize::MAX,
                )
                .unwrap_or_else(|e| panic!("{e}"))
                .len()
            })
            .sum()
    }

    /// Stored by key, an entry is one key: its `ts` is its record id and
    /// its place in natural order; readers, truncation and validation work
    /// without natural-order keys, and ordinary inserts are refused.
    #[test]
    fn entries_stored_by_ts_are_one_key_each() {
        let engine = MemoryEngine::shared();
        let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
        let one = rawdoc! {"ts": bson::Timestamp { time: 7, increment: 1 }, "pad": "x".repeat(100)}
            .as_bytes()
            .len() as u64;
        let c = capped(&s, (one * 64) as i64, None);
        assert_eq!(s.order_capped_by_key("db", "cap").ok(), Some(0));
        assert!(c.by_key());
        let mut rx = c.subscribe_inserts().unwrap_or_else(|| panic!("capped"));
        let mut next = 0;
        append_ts(&engine, &c, &mut next, 3, 100);
        let rid3 = (7u64 << 32) | 3;
        assert_eq!(*rx.borrow_and_update(), rid3);
        assert_eq!(keys_in(&engine, collection_ranges(c.state.id)), 0);
        assert_eq!(
            keys_in(&engine, vec![layout::doc_range(c.state.id)]),
            3,
            "one key per entry"
        );
        let all = increments(c.scan_natural(false));
        assert_eq!(all.iter().map(|x| x.1).collect::<Vec<_>>(), vec![1, 2, 3]);
        let back = increments(c.scan_natural(true));
        assert_eq!(back.iter().map(|x| x.1).collect::<Vec<_>>(), vec![3, 2, 1]);
        let first = all[0].0;
        append_ts(&engine, &c, &mut next, 2, 100);
        let after = increments(c.scan_natural_after(rid3));
        assert_eq!(after.iter().map(|x| x.1).collect::<Vec<_>>(), vec![4, 5]);
        assert!(c.has_record(first).unwrap_or(false));
        // Past the size: the oldest go, a stretch at a time, by their keys.
        for _ in 0..20 {
            append_ts(&engine, &c, &mut next, 4, 100);
        }
        assert!(c.data_size() <= one * 64, "{}", c.data_size());
        assert!(!c.has_record(first).unwrap_or(true), "truncated");
        let kept = increments(c.scan_natural(false));
        assert_eq!(kept.last().map(|x| x.1), Some(85));
        assert!(kept.windows(2).all(|w| w[1].1 == w[0].1 + 1), "{kept:?}");
        assert_eq!(c.count(), kept.len() as u64);
        assert_eq!(c.data_size(), stored_size(&c));
        crate::testing::assert_validates_clean(&c);
        // An insert is keyed by its `ts` too, and needs one.
        let out = insert(&c, &[1]);
        assert_eq!(out.inserted, 0);
        assert!(!out.errors.is_empty());
        let ts = bson::Timestamp {
            time: 7,
            increment: 1000,
        };
        let made = rawdoc! {"_id": 1, "ts": ts};
        let out = c.insert_many(&[made.as_ref()], true, Durability::Buffered);
        assert_eq!(out.inserted, 1, "{:?}", out.errors);
        assert!(c.has_record((7 << 32) | 1000).unwrap_or(false));
        let kept = increments(c.scan_natural(false));
        assert_eq!(kept.last().map(|x| x.1), Some(1000));
        assert_eq!(keys_in(&engine, collection_ranges(c.state.id)), 0);
        crate::testing::assert_validates_clean(&c);
        // The flag is in the catalog: a reopened store reads the same.
        let s2 = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
        let c2 = s2
            .collection("db", "cap")
            .unwrap_or_else(|| panic!("reopened"));
        assert!(c2.by_key());
        assert_eq!(increments(c2.scan_natural(false)), kept);
    }

    /// A collection written with natural-order keys (the oplog of an older
    /// BisonDB) converts in place: same entries, same order, its
    /// natural-order keys gone; one holding other keys is refused.
    #[test]
    fn an_oplog_with_natural_order_keys_converts() {
        let engine = MemoryEngine::shared();
        let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, None);
        let mut next = 0;
        append_ts(&engine, &c, &mut next, 5, 10);
        assert_eq!(keys_in(&engine, collection_ranges(c.state.id)), 10);
        let before: Vec<u32> = increments_old(&c);
        assert_eq!(s.order_capped_by_key("db", "cap").ok(), Some(10));
        assert_eq!(keys_in(&engine, collection_ranges(c.state.id)), 0);
        let after: Vec<u32> = increments(c.scan_natural(false))
            .iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(after, before);
        append_ts(&engine, &c, &mut next, 1, 10);
        assert_eq!(c.count(), 6);
        crate::testing::assert_validates_clean(&c);
        assert_eq!(s.order_capped_by_key("db", "cap").ok(), Some(0));
        // Documents keyed by `_id` cannot be stored by `ts`.
        let plain = s
            .create_collection("db", "cap2", doc! {"capped": true, "size": 4096})
            .unwrap_or_else(|e| panic!("{e}"));
        insert(&plain, &[1]);
        assert!(s.order_capped_by_key("db", "cap2").is_err());
        assert!(!plain.by_key());
        assert_eq!(natural(&plain, false), vec![1]);
    }

    fn increments_old(c: &Collection) -> Vec<u32> {
        c.scan_natural(false)
            .map(|r| {
                let (_, d) = r.unwrap_or_else(|e| panic!("{e}"));
                d.get_timestamp("ts")
                    .unwrap_or_else(|e| panic!("{e}"))
                    .increment
            })
            .collect()
    }

    #[test]
    fn drop_purges_natural_keys() {
        let engine = MemoryEngine::shared();
        let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
        let c = capped(&s, 1 << 20, None);
        insert(&c, &[1, 2, 3]);
        let id = c.state.id;
        assert!(s.drop_collection("db", "cap").unwrap_or(false));
        for (start, end) in collection_ranges(id) {
            let left = engine
                .snapshot()
                .unwrap_or_else(|e| panic!("snapshot: {e}"))
                .scan(Bound::Included(&start), Bound::Excluded(&end), false, 10)
                .unwrap_or_else(|e| panic!("{e}"));
            assert!(left.is_empty(), "{left:?}");
        }
    }

    #[test]
    fn lsm_keeps_order_limits_and_sequence_across_restart() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let open = || {
            let engine = crate::testing::open_lsm(dir.path(), crate::store_lsm_options());
            Storage::open(Arc::new(engine)).unwrap_or_else(|e| panic!("{e}"))
        };
        {
            let s = open();
            let c = capped(&s, 1 << 20, Some(3));
            insert(&c, &[9, 8, 7, 6]);
            s.sync().unwrap_or_else(|e| panic!("{e}"));
        }
        let s = open();
        let c = s
            .collection("db", "cap")
            .unwrap_or_else(|| panic!("reopened"));
        assert_eq!(c.capped_limits(), Some((1 << 20, Some(3))));
        assert_eq!(natural(&c, false), vec![8, 7, 6]);
        insert(&c, &[1]);
        assert_eq!(natural(&c, false), vec![7, 6, 1]);
        assert_eq!(c.count(), 3);
    }
}
