//! `validate` for one collection: reads every stored document and every index
//! entry from one snapshot and reports what does not agree.
//!
//! Checks, as mongod's foreground validation makes them:
//!
//! - every document is well-formed BSON down to its last nested value and its
//!   `_id` encodes to the key it is stored under (else it is an invalid
//!   document, a "corrupt record");
//! - every secondary index holds exactly the entries its key generator makes
//!   for the documents (key and the `_id` it names): missing and extra entries
//!   are listed;
//! - a document with more than one key in an index marked not multikey;
//! - a capped collection's natural-order keys map each document to one record
//!   id and back;
//! - the stored count and data size match the documents (corrected in place,
//!   as mongod does, with a warning).
//!
//! Index entries are compared the way mongod does it, so memory stays bounded
//! by the inconsistencies rather than by the collection: a first pass adds
//! every expected entry and subtracts every stored one into hash buckets; only
//! if some bucket does not come out at zero does a second pass over the same
//! snapshot keep the entries of those buckets to name them.
//!
//! Everything runs under the collection's write lock (mongod takes the
//! collection's exclusive lock too): writers to this collection wait, readers
//! and other collections do not.

use std::collections::hash_map::DefaultHasher;
use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{capped, id_of, Collection};
use crate::error::StorageError;
use crate::index::{self, IndexState};
use crate::layout::{self, StatsRecord};
use bisondb_engine::{Durability, Snapshot, WriteBatch};

/// Keys read per engine scan.
const CHUNK: usize = 512;

/// Hash buckets of the first pass (a power of two).
const BUCKETS: usize = 1 << 16;

/// The listed missing or extra entries stop growing past this many bytes
/// (mongod's limit); the first one is always listed.
const LIST_LIMIT_BYTES: usize = 1 << 20;

/// Nesting deeper than this is reported rather than followed (BSON from the
/// wire is already bounded well below it; this keeps a corrupt record from
/// exhausting the stack).
const MAX_DEPTH: usize = 512;

/// What `validate` asks of [`Collection::validate`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ValidateOptions {
    /// Fix what was found: insert missing index entries, remove extra ones,
    /// remove invalid documents, mark indexes multikey.
    pub repair: bool,
}

/// One index in a [`ValidateReport`].
#[derive(Debug, Clone, PartialEq)]
pub struct IndexReport {
    pub name: String,
    /// Entries found in the index (documents for `_id_`).
    pub keys: u64,
    pub valid: bool,
}

/// The outcome of [`Collection::validate`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ValidateReport {
    /// Documents stored (valid or not).
    pub nrecords: u64,
    /// Documents that are not well-formed or not stored under their `_id`.
    pub invalid_documents: u64,
    /// `_id_` first, then the secondary indexes in catalog order.
    pub indexes: Vec<IndexReport>,
    pub errors: Vec<String>,
    pub warnings: Vec<String>,
    /// `{indexName, recordId, indexKey}` of each entry no document accounts for.
    pub extra_index_entries: Vec<Document>,
    /// `{indexName, recordId, idKey, indexKey}` of each entry a document needs.
    pub missing_index_entries: Vec<Document>,
    /// The storage keys (after the collection prefix) of invalid documents.
    pub corrupt_records: Vec<Bson>,
    /// Something was fixed (only with `repair`).
    pub repaired: bool,
    pub removed_corrupt_records: u64,
    pub removed_extra_index_entries: u64,
    pub inserted_missing_index_entries: u64,
}

impl ValidateReport {
    /// No error and every index consistent.
    pub fn valid(&self) -> bool {
        self.errors.is_empty() && self.indexes.iter().all(|i| i.valid)
    }
}

impl Collection {
    /// Checks the collection's documents, indexes and statistics against each
    /// other (see the module documentation); with `repair`, fixes what it can.
    pub fn validate(&self, options: ValidateOptions) -> Result<ValidateReport, StorageError> {
        let _w = self.state.write_lock.lock();
        let snap = self.writable_snapshot_locked()?;
        let indexes = self.state.indexes.read().clone();
        let mut run = Run {
            coll: self,
            snap: snap.as_ref(),
            indexes: &indexes,
            repair: options.repair,
            report: ValidateReport::default(),
            index_keys: vec![0; indexes.len()],
            index_bytes: vec![0; indexes.len()],
            index_errors: vec![Vec::new(); indexes.len()],
            batch: WriteBatch::new(),
        };
        run.run()?;
        Ok(run.report)
    }
}

/// One expected or stored index entry, as compared: which index, the engine
/// key and the `_id` it names.
type EntryId = (usize, Vec<u8>, Vec<u8>);

/// Where an entry's bucket sits.
fn bucket_of(ix: usize, key: &[u8], value: &[u8]) -> usize {
    let mut h = DefaultHasher::new();
    ix.hash(&mut h);
    key.hash(&mut h);
    value.hash(&mut h);
    (h.finish() as usize) & (BUCKETS - 1)
}

/// A document as the passes see it.
struct StoredDoc {
    /// The storage key after the collection prefix (the encoded `_id` it is
    /// stored under, which index entries name).
    suffix: Vec<u8>,
    doc: RawDocumentBuf,
}

struct Run<'a> {
    coll: &'a Collection,
    snap: &'a dyn Snapshot,
    indexes: &'a [Arc<IndexState>],
    repair: bool,
    report: ValidateReport,
    /// Entries found per index.
    index_keys: Vec<u64>,
    /// Their bytes (key plus value), as the stats record keeps them.
    index_bytes: Vec<u64>,
    /// Errors per index (an index with any is not valid).
    index_errors: Vec<Vec<String>>,
    /// Repairs, committed at the end in one batch.
    batch: WriteBatch,
}

impl Run<'_> {
    fn run(&mut self) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let mut buckets = vec![0i64; if self.indexes.is_empty() { 0 } else { BUCKETS }];
        let mut size = 0u64;
        let mut key_bytes = 0u64;
        let mut kept = 0u64;
        let mut invalid_reasons: Vec<String> = Vec::new();
        let mut not_multikey: Vec<bool> = vec![false; self.indexes.len()];

        // Pass 1 over the documents: check each, add its expected entries.
        let doc_range = layout::doc_range(id);
        let indexes = self.indexes;
        let records = self.coll.has_record_ids();
        let by_key = self.coll.by_key();
        for_each(self.snap, doc_range.clone(), |key, value| {
            self.report.nrecords += 1;
            let len = value.len() as u64;
            match check_document(key, value, records, by_key) {
                Ok(d) => {
                    size = size.saturating_add(len);
                    // What the `_id` index holds for it: the document key, or
                    // the `_id` entry of a record-id collection.
                    let id_len = self
                        .coll
                        .id_entry_len(self.coll.id_prefix_len() + d.suffix.len());
                    key_bytes = key_bytes.saturating_add(id_len as u64);
                    kept += 1;
                    for (i, ix) in indexes.iter().enumerate() {
                        match index::entries(ix, id, &d.doc, &d.suffix) {
                            Ok((entries, multikey)) => {
                                if multikey && !ix.multikey.load(Ordering::Acquire) {
                                    not_multikey[i] = true;
                                }
                                for (e, _) in entries {
                                    buckets[bucket_of(i, &e.key, &e.value)] += 1;
                                }
                            }
                            Err(e) => self.index_errors[i].push(format!(
                                "Index with name '{}' could not generate the keys of the document with _id {}: {e}",
                                ix.spec.name,
                                id_text(&d.doc)
                            )),
                        }
                    }
                }
                Err(reason) => {
                    self.report.invalid_documents += 1;
                    let suffix = key.get(9..).unwrap_or_default();
                    self.report.corrupt_records.push(Bson::Binary(bson::Binary {
                        subtype: bson::spec::BinarySubtype::Generic,
                        bytes: suffix.to_vec(),
                    }));
                    if invalid_reasons.len() < 10 {
                        invalid_reasons.push(reason);
                    }
                    if self.repair {
                        self.batch.delete(key.to_vec());
                        self.coll
                            .forget_locked(self.snap, suffix, &mut self.batch)?;
                        self.report.removed_corrupt_records += 1;
                    } else {
                        size = size.saturating_add(len);
                        key_bytes = key_bytes.saturating_add(key.len() as u64);
                        kept += 1;
                    }
                }
            }
            Ok(())
        })?;

        // Pass 1 over the indexes: subtract every stored entry.
        for (i, ix) in indexes.iter().enumerate() {
            let (mut n, mut bytes) = (0u64, 0u64);
            for_each(self.snap, index::index_range(id, ix.id), |key, value| {
                n += 1;
                bytes = bytes.saturating_add((key.len() + value.len()) as u64);
                buckets[bucket_of(i, key, value)] -= 1;
                Ok(())
            })?;
            self.index_keys[i] = n;
            self.index_bytes[i] = bytes;
        }

        if self.report.invalid_documents > 0 {
            if self.repair {
                self.report.warnings.push(format!(
                    "Removed {} invalid documents.",
                    self.report.removed_corrupt_records
                ));
            } else {
                self.report
                    .errors
                    .push("Detected one or more invalid documents. See logs.".to_string());
                for r in invalid_reasons {
                    self.report.warnings.push(format!("Invalid document: {r}"));
                }
            }
        }

        let uneven: Vec<bool> = buckets.iter().map(|b| *b != 0).collect();
        if uneven.iter().any(|u| *u) {
            self.name_inconsistencies(&uneven)?;
        }
        self.check_multikey(&not_multikey);
        if self.coll.state.capped.is_some() {
            self.check_natural_order()?;
        }
        if records {
            self.check_id_index()?;
        }
        let found = StatsRecord {
            count: kept,
            data_size: size,
            id_bytes: key_bytes,
            indexes: indexes
                .iter()
                .zip(self.index_keys.iter().zip(&self.index_bytes))
                .map(|(ix, (&entries, &bytes))| layout::IndexTally {
                    id: ix.id,
                    entries,
                    bytes,
                })
                .collect(),
        };
        self.check_stats(found)?;

        self.report.indexes.push(IndexReport {
            name: "_id_".to_string(),
            keys: kept,
            valid: true,
        });
        for (i, ix) in indexes.iter().enumerate() {
            let errors = std::mem::take(&mut self.index_errors[i]);
            let valid = errors.is_empty();
            self.report.errors.extend(errors);
            self.report.indexes.push(IndexReport {
                name: ix.spec.name.clone(),
                keys: self.index_keys[i],
                valid,
            });
        }

        // `check_stats` committed the repairs: the indexes may now say so.
        for (i, ix) in indexes.iter().enumerate() {
            if self.repair && not_multikey[i] {
                ix.multikey.store(true, Ordering::Release);
            }
        }
        Ok(())
    }

    /// Pass 2: the entries of the buckets that did not balance, listed (or,
    /// with `repair`, fixed).
    fn name_inconsistencies(&mut self, uneven: &[bool]) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let indexes = self.indexes;
        // Expected entries of the uneven buckets, with the key values and the
        // document's `_id` to describe them.
        let mut expected: HashMap<EntryId, (Vec<bson::RawBson>, Bson)> = HashMap::new();
        let repair = self.repair;
        let records = self.coll.has_record_ids();
        let by_key = self.coll.by_key();
        for_each(self.snap, layout::doc_range(id), |key, value| {
            let Ok(d) = check_document(key, value, records, by_key) else {
                return Ok(());
            };
            for (i, ix) in indexes.iter().enumerate() {
                let Ok((entries, _)) = index::entries(ix, id, &d.doc, &d.suffix) else {
                    continue;
                };
                for (e, values) in entries {
                    if uneven[bucket_of(i, &e.key, &e.value)] {
                        let idv = id_of(&d.doc)
                            .and_then(|v| Bson::try_from(v).ok())
                            .unwrap_or(Bson::Null);
                        expected.insert((i, e.key, e.value), (values, idv));
                    }
                }
            }
            Ok(())
        })?;
        let mut extra: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
        for (i, ix) in indexes.iter().enumerate() {
            for_each(self.snap, index::index_range(id, ix.id), |key, value| {
                if uneven[bucket_of(i, key, value)]
                    && expected
                        .remove(&(i, key.to_vec(), value.to_vec()))
                        .is_none()
                {
                    extra.push((i, key.to_vec(), value.to_vec()));
                }
                Ok(())
            })?;
        }
        let mut missing: Vec<(EntryId, (Vec<bson::RawBson>, Bson))> =
            expected.into_iter().collect();
        // A stable order for the reply: by index, then key.
        missing.sort_by(|a, b| a.0.cmp(&b.0));

        // Missing entries left missing, extra entries found, entries inserted.
        let (mut n_missing, mut n_extra, mut inserted) = (0u64, 0u64, 0u64);
        let mut listed = Lister::default();
        // Keys the repair removes (a unique key may then go to its rightful owner).
        let mut removed: std::collections::HashSet<Vec<u8>> = std::collections::HashSet::new();
        for (i, key, value) in extra {
            n_extra += 1;
            let ix = &indexes[i];
            if repair {
                removed.insert(key.clone());
                self.index_bytes[i] =
                    self.index_bytes[i].saturating_sub((key.len() + value.len()) as u64);
                self.batch.delete(key);
                self.index_keys[i] = self.index_keys[i].saturating_sub(1);
                continue;
            }
            // The key encoding cannot be read back into values: the entry is
            // shown as stored, after the index's prefix.
            let prefix = index::index_prefix(id, ix.id).len();
            let info = doc! {
                "indexName": ix.spec.name.clone(),
                "recordId": self.record_id(&value)?,
                "indexKey": Bson::Binary(bson::Binary {
                    subtype: bson::spec::BinarySubtype::Generic,
                    bytes: key.get(prefix..).unwrap_or_default().to_vec(),
                }),
            };
            if !listed.push(&mut self.report.extra_index_entries, info) {
                listed.note_extra_truncated(&mut self.report.errors);
            }
            self.flag_index(i);
        }
        for ((i, key, value), (values, idv)) in missing {
            let ix = &indexes[i];
            // A unique key another document holds cannot be given to this one.
            let taken = ix.spec.unique
                && !removed.contains(&key)
                && self.snap.get(&key)?.is_some_and(|owner| owner != value);
            if repair && !taken {
                self.index_bytes[i] =
                    self.index_bytes[i].saturating_add((key.len() + value.len()) as u64);
                self.batch.put(key, value);
                self.index_keys[i] += 1;
                inserted += 1;
                continue;
            }
            n_missing += 1;
            if taken {
                self.index_errors[i].push(format!(
                    "Index with name '{}' cannot take the key of the document with _id {idv}: another document holds it.",
                    ix.spec.name
                ));
            }
            let info = doc! {
                "indexName": ix.spec.name.clone(),
                "recordId": idv.clone(),
                "idKey": {"_id": idv},
                "indexKey": bisondb_query::index_keys::key_document(&ix.fields, &values),
            };
            if !listed.push(&mut self.report.missing_index_entries, info) {
                listed.note_missing_truncated(&mut self.report.errors);
            }
            self.flag_index(i);
        }
        if n_missing > 0 {
            self.report
                .warnings
                .push(format!("Detected {n_missing} missing index entries."));
        }
        if repair {
            self.report.removed_extra_index_entries = n_extra;
            self.report.inserted_missing_index_entries = inserted;
            if inserted > 0 {
                self.report
                    .warnings
                    .push(format!("Inserted {inserted} missing index entries."));
            }
            if n_extra > 0 {
                self.report
                    .warnings
                    .push(format!("Removed {n_extra} extra index entries."));
            }
        } else if n_extra > 0 {
            self.report
                .warnings
                .push(format!("Detected {n_extra} extra index entries."));
        }
        Ok(())
    }

    /// Records the first inconsistency of index `i`.
    fn flag_index(&mut self, i: usize) {
        if self.index_errors[i].is_empty() {
            let name = &self.indexes[i].spec.name;
            self.index_errors[i].push(format!("Index with name '{name}' has inconsistencies."));
        }
    }

    /// The `_id` of the document an index entry names, or the entry's raw
    /// value when no such document exists.
    fn record_id(&self, encoded_id: &[u8]) -> Result<Bson, StorageError> {
        // An `_id` entry naming no record reads as no document here.
        let stored = self.coll.locate(self.snap, encoded_id).ok().flatten();
        let id = stored
            .and_then(|l| RawDocumentBuf::from_bytes(l.value).ok())
            .and_then(|d| id_of(&d).and_then(|v| Bson::try_from(v).ok()));
        Ok(id.unwrap_or_else(|| {
            Bson::Binary(bson::Binary {
                subtype: bson::spec::BinarySubtype::Generic,
                bytes: encoded_id.to_vec(),
            })
        }))
    }

    fn check_multikey(&mut self, not_multikey: &[bool]) {
        for (i, ix) in self.indexes.iter().enumerate() {
            if !not_multikey.get(i).copied().unwrap_or(false) {
                continue;
            }
            if self.repair {
                self.batch
                    .put(index::multikey_key(self.coll.state.id, ix.id), Vec::new());
                self.report.warnings.push(format!(
                    "Index with name '{}' was marked multikey: a document has more than one key in it.",
                    ix.spec.name
                ));
            } else {
                self.index_errors[i].push(format!(
                    "Index with name '{}' is not multikey but a document has more than one key in it.",
                    ix.spec.name
                ));
            }
        }
    }

    /// Every document of a capped collection has one record id whose
    /// natural-order key names it, and there are no other natural-order keys.
    fn check_natural_order(&mut self) -> Result<(), StorageError> {
        // Every stored document, invalid ones too: their keys are in the
        // snapshot (a repair removes them with the documents).
        let documents = self.report.nrecords;
        let id = self.coll.state.id;
        let mut unmapped = 0u64;
        let snap = self.snap;
        if self.coll.by_key() {
            return self.check_keyed_by_ts();
        }
        for_each(snap, layout::doc_range(id), |key, _| {
            let suffix = key.get(9..).unwrap_or_default();
            let ok = match snap.get(&capped::rid_key(id, suffix))? {
                Some(rid) => match capped::decode_rid(&rid) {
                    Ok(rid) => snap.get(&capped::natural_key(id, rid))?.as_deref() == Some(suffix),
                    Err(_) => false,
                },
                None => false,
            };
            if !ok {
                unmapped += 1;
            }
            Ok(())
        })?;
        let mut region_counts = Vec::new();
        for range in capped::collection_ranges(id) {
            region_counts.push(count_keys(snap, range)?);
        }
        if unmapped > 0 {
            self.report.errors.push(format!(
                "{unmapped} documents of capped collection {} have no consistent natural-order record.",
                self.coll.ns
            ));
        }
        // Only when every document has its record: otherwise the counts
        // differ for the reason already reported.
        if region_counts.iter().any(|n| *n != documents) && unmapped == 0 {
            self.report.errors.push(format!(
                "Capped collection {} has {} natural-order records and {} record-id keys for {documents} documents.",
                self.coll.ns,
                region_counts.first().copied().unwrap_or(0),
                region_counts.get(1).copied().unwrap_or(0),
            ));
        }
        Ok(())
    }

    /// A capped collection stored by key (the oplog): every document is
    /// keyed by a timestamp, and no natural-order key is left.
    fn check_keyed_by_ts(&mut self) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let mut misplaced = 0u64;
        for_each(self.snap, layout::doc_range(id), |key, _| {
            if capped::rid_of_entry_key(key).is_err() {
                misplaced += 1;
            }
            Ok(())
        })?;
        let mut left = 0u64;
        for range in capped::collection_ranges(id) {
            left += count_keys(self.snap, range)?;
        }
        if misplaced > 0 {
            self.report.errors.push(format!(
                "{misplaced} documents of {} are not keyed by a timestamp.",
                self.coll.ns
            ));
        }
        if left > 0 {
            self.report.errors.push(format!(
                "{} is stored by ts but has {left} natural-order keys.",
                self.coll.ns
            ));
        }
        Ok(())
    }

    /// Every document of a record-id collection has the `_id` entry naming
    /// its record, and there are no other `_id` entries.
    fn check_id_index(&mut self) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let snap = self.snap;
        let (mut documents, mut unmapped) = (0u64, 0u64);
        for_each(snap, layout::doc_range(id), |key, value| {
            documents += 1;
            let rid = key.get(9..).unwrap_or_default();
            let ok = match RawDocumentBuf::from_bytes(value.to_vec())
                .ok()
                .and_then(|d| id_of(&d).map(crate::keycode::encode_id))
            {
                Some(encoded) => snap
                    .get(&super::records::id_key(id, &encoded))?
                    .and_then(|v| super::records::decode_rid_value(&v).ok())
                    .is_some_and(|named| capped::decode_rid(rid).ok() == Some(named)),
                None => false,
            };
            if !ok {
                unmapped += 1;
            }
            Ok(())
        })?;
        let entries = match self.coll.id_index_range() {
            Some(range) => count_keys(snap, range)?,
            None => 0,
        };
        if unmapped > 0 {
            self.report.errors.push(format!(
                "{unmapped} documents of {} have no _id index entry naming their record.",
                self.coll.ns
            ));
        } else if entries != documents {
            self.report.errors.push(format!(
                "The _id index of {} has {entries} entries for {documents} documents.",
                self.coll.ns
            ));
        }
        Ok(())
    }

    /// The stored stats record (count, sizes, index entries) against what
    /// the passes found; corrected in the repair batch (or on its own) when
    /// they differ.
    fn check_stats(&mut self, found: StatsRecord) -> Result<(), StorageError> {
        let id = self.coll.state.id;
        let mut stored = match self.snap.get(&layout::stats_key(id))? {
            Some(v) => layout::decode_stats(&v).ok(),
            None => Some((StatsRecord::default(), true)),
        };
        // On a shared store the servers' records of their changes add up
        // with the collection's own (`store/shared.rs`); a repair rewrites
        // only the collection's own, so that the sum is right.
        let mut servers = StatsRecord::default();
        if self.coll.state.server != 0 {
            let (start, end) = layout::stats_range(id);
            let rows = self.snap.scan(
                std::ops::Bound::Excluded(&start),
                std::ops::Bound::Excluded(&end),
                false,
                usize::MAX,
            )?;
            for (_, v) in rows {
                super::shared::add_record(&mut servers, &layout::decode_stats(&v)?.0);
            }
            if let Some((r, _)) = stored.as_mut() {
                super::shared::add_record(r, &servers);
            }
        }
        // Lines of indexes no longer in the catalog are ignored when read.
        let stored = stored.map(|(mut r, known)| {
            r.indexes
                .retain(|t| found.indexes.iter().any(|f| f.id == t.id));
            r.indexes.sort_by_key(|t| t.id);
            (r, known)
        });
        let mut sorted = found.clone();
        sorted.indexes.sort_by_key(|t| t.id);
        let matches = stored
            .as_ref()
            .is_some_and(|(r, known)| *known && *r == sorted);
        let changes = !self.batch.is_empty();
        if matches && !changes {
            return Ok(());
        }
        if !matches && self.report.removed_corrupt_records == 0 {
            let (c, s) = stored
                .as_ref()
                .map_or((0, 0), |(r, _)| (r.count, r.data_size));
            let (count, size) = (found.count, found.data_size);
            self.report.warnings.push(if (c, s) == (count, size) {
                "The collection's key and index sizes did not match its documents and index entries and were corrected.".to_string()
            } else {
                format!(
                    "The collection's count and data size ({c} documents, {s} bytes) did not match its documents ({count}, {size} bytes) and were corrected."
                )
            });
        }
        let mut own = StatsRecord::default();
        super::shared::add_change(&mut own, &servers, &found);
        own.indexes
            .retain(|t| found.indexes.iter().any(|f| f.id == t.id));
        self.batch
            .put(layout::stats_key(id), layout::encode_stats(&own));
        let batch = std::mem::take(&mut self.batch);
        self.coll.engine.write(batch, Durability::Buffered)?;
        self.coll.publish_tally_locked(&found, self.indexes);
        if changes {
            self.report.repaired = true;
        }
        Ok(())
    }
}

/// Lists entries up to [`LIST_LIMIT_BYTES`] in all.
#[derive(Default)]
struct Lister {
    bytes: usize,
    first_done: bool,
    missing_truncated: bool,
    extra_truncated: bool,
}

impl Lister {
    /// Whether `info` was listed.
    fn push(&mut self, list: &mut Vec<Document>, info: Document) -> bool {
        let len = RawDocumentBuf::try_from(&info)
            .map(|d| d.as_bytes().len())
            .unwrap_or(0);
        self.bytes = self.bytes.saturating_add(len);
        if !self.first_done || self.bytes <= LIST_LIMIT_BYTES {
            self.first_done = true;
            list.push(info);
            return true;
        }
        false
    }

    fn note_missing_truncated(&mut self, errors: &mut Vec<String>) {
        if !std::mem::replace(&mut self.missing_truncated, true) {
            errors.push(
                "Not all missing index entry inconsistencies are listed due to size limitations."
                    .to_string(),
            );
        }
    }

    fn note_extra_truncated(&mut self, errors: &mut Vec<String>) {
        if !std::mem::replace(&mut self.extra_truncated, true) {
            errors.push(
                "Not all extra index entry inconsistencies are listed due to size limitations."
                    .to_string(),
            );
        }
    }
}

/// How many keys `range` holds.
fn count_keys(snap: &dyn Snapshot, range: (Vec<u8>, Vec<u8>)) -> Result<u64, StorageError> {
    let mut n = 0u64;
    for_each(snap, range, |_, _| {
        n += 1;
        Ok(())
    })?;
    Ok(n)
}

/// Calls `f` on every key and value in `[start, end)` of `snap`, in chunks.
pub(super) fn for_each(
    snap: &dyn Snapshot,
    (start, end): (Vec<u8>, Vec<u8>),
    mut f: impl FnMut(&[u8], &[u8]) -> Result<(), StorageError>,
) -> Result<(), StorageError> {
    let mut from = Bound::Included(start);
    loop {
        let chunk = snap.scan(
            from.as_ref().map(Vec::as_slice),
            Bound::Excluded(end.as_slice()),
            false,
            CHUNK,
        )?;
        for (k, v) in &chunk {
            f(k, v)?;
        }
        match chunk.last() {
            Some((k, _)) if chunk.len() == CHUNK => from = Bound::Excluded(k.clone()),
            _ => return Ok(()),
        }
    }
}

/// A stored document that is well-formed and stored under its own `_id`, or
/// why it is not.
/// A stored document, read and checked; `records`: the key holds a record id
/// (`store/records.rs`) rather than the encoded `_id`; `by_key`: an entry of
/// a capped collection stored by key (the oplog), under its `ts`.
fn check_document(
    key: &[u8],
    value: &[u8],
    records: bool,
    by_key: bool,
) -> Result<StoredDoc, String> {
    let doc = RawDocumentBuf::from_bytes(value.to_vec()).map_err(|e| format!("{e}"))?;
    check_nested(&doc, 0)?;
    if by_key {
        // An oplog entry has no `_id`: it is stored under its `ts`.
        let suffix = key.get(9..).unwrap_or_default();
        return match doc.get("ts") {
            Ok(Some(ts @ RawBsonRef::Timestamp(_))) if crate::keycode::encode_id(ts) == suffix => {
                Ok(StoredDoc {
                    suffix: suffix.to_vec(),
                    doc,
                })
            }
            _ => Err("entry is not stored under its ts".to_string()),
        };
    }
    let id = id_of(&doc).ok_or_else(|| "document has no _id field".to_string())?;
    if records {
        return Ok(StoredDoc {
            suffix: crate::keycode::encode_id(id),
            doc,
        });
    }
    let suffix = key.get(9..).unwrap_or_default();
    if crate::keycode::encode_id(id) != suffix {
        return Err(format!(
            "document with _id {} is stored under another _id's key",
            id_text(&doc)
        ));
    }
    Ok(StoredDoc {
        suffix: suffix.to_vec(),
        doc,
    })
}

/// Reads every element of `doc` and of everything nested in it.
fn check_nested(doc: &RawDocument, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(format!("nested deeper than {MAX_DEPTH} levels"));
    }
    for el in doc.iter() {
        let (_, v) = el.map_err(|e| format!("{e}"))?;
        check_value(v, depth)?;
    }
    Ok(())
}

fn check_value(v: RawBsonRef<'_>, depth: usize) -> Result<(), String> {
    match v {
        RawBsonRef::Document(d) => check_nested(d, depth + 1),
        RawBsonRef::JavaScriptCodeWithScope(c) => check_nested(c.scope, depth + 1),
        RawBsonRef::Array(a) => {
            if depth > MAX_DEPTH {
                return Err(format!("nested deeper than {MAX_DEPTH} levels"));
            }
            for item in a {
                check_value(item.map_err(|e| format!("{e}"))?, depth + 1)?;
            }
            Ok(())
        }
        _ => Ok(()),
    }
}

/// A document's `_id` for a message.
fn id_text(doc: &RawDocument) -> String {
    id_of(doc)
        .and_then(|v| Bson::try_from(v).ok())
        .map(|v| v.to_string())
        .unwrap_or_else(|| "(none)".to_string())
}

#[cfg(test)]
mod tests;
