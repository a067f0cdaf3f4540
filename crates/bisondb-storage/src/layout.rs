//! The key layout of the single engine key space.
//!
//! ```text
//! [0x00 0x00]                         -> catalog meta {version, nextId}
//! [0x00 0x01] db 0x00 collection      -> catalog entry (BSON)
//! [0x00 0x02] id:u64be                -> pending drop marker (cleanup after a crash)
//! [0x00 0x03]                         -> catalog version:u64be (shared stores only)
//! [0x00 0x04] id:u64be                -> next free record id (shared stores only)
//! [0x00 0x05]                         -> next server id (shared stores only)
//! [0x01] id:u64be encode_id(_id)      -> the raw document (clustered by `_id`)
//! [0x01] id:u64be rid:u64be           -> the raw document (record-id collections,
//!                                        see `crate::store::records`)
//! [0x02] id:u64be                     -> count:u64be data_size:u64be 0x01 id_bytes:u64be
//!                                        (index:u64be entries:u64be bytes:u64be)*
//! [0x02] id:u64be server:u64be         -> the same, the changes one server made
//!                                        (shared stores, see `crate::store::shared`)
//! [0x03] ...                          -> index entries (see `crate::index`)
//! [0x04] ...                          -> multikey markers (see `crate::index`)
//! [0x05] id:u64be rid:u64be            -> natural order of a capped collection
//! [0x06] id:u64be encode_id(_id)      -> its record id (a capped collection's way
//!                                        back, see `crate::store::capped`; a
//!                                        record-id collection's `_id` index)
//! ```
//!
//! Collection ids come from a counter and are never reused, so a dropped
//! collection's leftovers (if a crash interrupted their cleanup) can never show
//! up in a new collection. Keys carry the id rather than the name, which makes a
//! rename a catalog-only change.

use crate::error::StorageError;
use bisondb_engine::prefix_successor;

const CATALOG: u8 = 0x00;
const DOCS: u8 = 0x01;
const STATS: u8 = 0x02;

/// First byte of every secondary-index entry key. Engines may store this region
/// apart (the lsm engine gives it its own keyspace, since its keys arrive in
/// random order while documents mostly append).
pub(crate) const INDEX_REGION: u8 = 0x03;

/// The regions whose keys do not arrive in append order: each collection's stats
/// record (rewritten by every write) and index entries. An engine that keeps
/// document tables apart from them (the lsm engine) lets a load of increasing
/// `_id`s flush tables that overlap no other: with the stats record among the
/// documents, every flushed table spanned up to it, so each one overlapped every
/// older one and compaction rewrote the whole collection again and again.
pub(crate) const APART_REGIONS: std::ops::Range<u8> = STATS..INDEX_REGION + 1;

const META: u8 = 0x00;
const ENTRY: u8 = 0x01;
const PENDING_DROP: u8 = 0x02;
const VERSION: u8 = 0x03;
const RID_COUNTER: u8 = 0x04;
const SERVER_COUNTER: u8 = 0x05;

/// The catalog's version on a shared store: every catalog change bumps it in
/// its own batch, and a server reads it per command to see another's changes.
pub(crate) fn version_key() -> Vec<u8> {
    vec![CATALOG, VERSION]
}

/// The next record id no server has taken of collection `id` (shared stores).
pub(crate) fn rid_counter_key(id: u64) -> Vec<u8> {
    let mut k = vec![CATALOG, RID_COUNTER];
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The next server id of a shared store.
pub(crate) fn server_counter_key() -> Vec<u8> {
    vec![CATALOG, SERVER_COUNTER]
}

/// A big-endian u64 value (versions, counters).
pub(crate) fn decode_u64(v: &[u8]) -> Result<u64, StorageError> {
    <[u8; 8]>::try_from(v)
        .map(u64::from_be_bytes)
        .map_err(|_| StorageError::corrupt(format!("bad counter of {} bytes", v.len())))
}

/// `[start, end)` of collection `id`'s stats records: its own and, on a
/// shared store, each server's.
pub(crate) fn stats_range(id: u64) -> (Vec<u8>, Vec<u8>) {
    let start = stats_key(id);
    let end = prefix_successor(&start).unwrap_or_else(|| vec![INDEX_REGION]);
    (start, end)
}

pub(crate) fn meta_key() -> Vec<u8> {
    vec![CATALOG, META]
}

pub(crate) fn entry_prefix() -> Vec<u8> {
    vec![CATALOG, ENTRY]
}

/// Database names cannot contain NUL (checked by the catalog), so `db 0x00 name`
/// is unambiguous and sorts by database, then collection.
pub(crate) fn entry_key(db: &str, name: &str) -> Vec<u8> {
    let mut k = entry_prefix();
    k.extend_from_slice(db.as_bytes());
    k.push(0);
    k.extend_from_slice(name.as_bytes());
    k
}

pub(crate) fn pending_drop_prefix() -> Vec<u8> {
    vec![CATALOG, PENDING_DROP]
}

pub(crate) fn pending_drop_key(id: u64) -> Vec<u8> {
    let mut k = pending_drop_prefix();
    k.extend_from_slice(&id.to_be_bytes());
    k
}

pub(crate) fn pending_drop_id(key: &[u8]) -> Result<u64, StorageError> {
    key.get(2..)
        .and_then(|b| <[u8; 8]>::try_from(b).ok())
        .map(u64::from_be_bytes)
        .ok_or_else(|| StorageError::corrupt(format!("bad pending-drop key {key:?}")))
}

/// All document keys of collection `id` start with this.
pub(crate) fn doc_prefix(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(DOCS);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// The key of one document; `encoded_id` comes from `keycode::encode_id`.
pub(crate) fn doc_key(id: u64, encoded_id: &[u8]) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + encoded_id.len());
    k.push(DOCS);
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(encoded_id);
    k
}

/// The key of the document with record id `rid` in a record-id collection.
pub(crate) fn record_key(id: u64, rid: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(DOCS);
    k.extend_from_slice(&id.to_be_bytes());
    k.extend_from_slice(&rid.to_be_bytes());
    k
}

/// The key of the document whose `_id` is `value`, encoded in place.
pub(crate) fn doc_key_for(id: u64, value: bson::RawBsonRef<'_>) -> Vec<u8> {
    let mut k = Vec::with_capacity(9 + 16);
    k.push(DOCS);
    k.extend_from_slice(&id.to_be_bytes());
    crate::keycode::encode_value(value, &mut k);
    k
}

/// `[start, end)` covering every document key of collection `id`.
pub(crate) fn doc_range(id: u64) -> (Vec<u8>, Vec<u8>) {
    let start = doc_prefix(id);
    // The prefix ends in a u64 and starts with 0x01, so a successor always exists.
    let end = prefix_successor(&start).unwrap_or_else(|| vec![STATS]);
    (start, end)
}

pub(crate) fn stats_key(id: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(9);
    k.push(STATS);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

/// What a collection's stats record keeps: its document count and sizes,
/// rewritten by every write in the same batch as the write, so it is exactly
/// as durable as the documents it describes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct StatsRecord {
    pub(crate) count: u64,
    /// Sum of the documents' BSON sizes.
    pub(crate) data_size: u64,
    /// Sum of the lengths of the documents' keys: what the `_id` index holds.
    pub(crate) id_bytes: u64,
    /// One per secondary index, in no particular order. An index that is not
    /// (or no longer) in the catalog is ignored: index ids are never reused.
    pub(crate) indexes: Vec<IndexTally>,
}

/// The entries of one secondary index and their bytes (key plus value).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct IndexTally {
    pub(crate) id: u64,
    pub(crate) entries: u64,
    pub(crate) bytes: u64,
}

impl StatsRecord {
    /// One more document, stored under a key of `key` bytes.
    pub(crate) fn add_doc(&mut self, key: usize, doc: usize) {
        self.count = self.count.saturating_add(1);
        self.data_size = self.data_size.saturating_add(doc as u64);
        self.id_bytes = self.id_bytes.saturating_add(key as u64);
    }

    /// One document fewer.
    pub(crate) fn remove_doc(&mut self, key: usize, doc: usize) {
        self.count = self.count.saturating_sub(1);
        self.data_size = self.data_size.saturating_sub(doc as u64);
        self.id_bytes = self.id_bytes.saturating_sub(key as u64);
    }

    /// An entry of `bytes` (key plus value) added to or removed from index `ix`.
    pub(crate) fn index_entry(&mut self, ix: u64, bytes: usize, added: bool) {
        let at = match self.indexes.iter().position(|t| t.id == ix) {
            Some(at) => at,
            None => {
                self.indexes.push(IndexTally {
                    id: ix,
                    ..IndexTally::default()
                });
                self.indexes.len().saturating_sub(1)
            }
        };
        let Some(t) = self.indexes.get_mut(at) else {
            return;
        };
        if added {
            t.entries = t.entries.saturating_add(1);
            t.bytes = t.bytes.saturating_add(bytes as u64);
        } else {
            t.entries = t.entries.saturating_sub(1);
            t.bytes = t.bytes.saturating_sub(bytes as u64);
        }
    }
}

/// Version byte after the count and data size; a record without one was
/// written before index sizes were kept (see [`decode_stats`]).
const STATS_V1: u8 = 0x01;

pub(crate) fn encode_stats(r: &StatsRecord) -> Vec<u8> {
    let mut v = Vec::with_capacity(25 + 24 * r.indexes.len());
    v.extend_from_slice(&r.count.to_be_bytes());
    v.extend_from_slice(&r.data_size.to_be_bytes());
    v.push(STATS_V1);
    v.extend_from_slice(&r.id_bytes.to_be_bytes());
    for ix in &r.indexes {
        v.extend_from_slice(&ix.id.to_be_bytes());
        v.extend_from_slice(&ix.entries.to_be_bytes());
        v.extend_from_slice(&ix.bytes.to_be_bytes());
    }
    v
}

/// The record, and whether it knows the index sizes: a record of 16 bytes
/// (count and data size only) was written by an older BisonDB, and its
/// `id_bytes` and `indexes` come back empty for the caller to measure.
pub(crate) fn decode_stats(v: &[u8]) -> Result<(StatsRecord, bool), StorageError> {
    let word = |at: usize| {
        v.get(at..at + 8)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    let bad = || StorageError::corrupt(format!("bad collection stats record of {} bytes", v.len()));
    let (Some(count), Some(data_size)) = (word(0), word(8)) else {
        return Err(bad());
    };
    let mut r = StatsRecord {
        count,
        data_size,
        ..StatsRecord::default()
    };
    if v.len() == 16 {
        return Ok((r, false));
    }
    let tail = v.len().checked_sub(25).ok_or_else(bad)?;
    if v.get(16) != Some(&STATS_V1) || tail % 24 != 0 {
        return Err(bad());
    }
    r.id_bytes = word(17).ok_or_else(bad)?;
    r.indexes = (0..tail / 24)
        .map(|i| {
            let at = 25 + 24 * i;
            match (word(at), word(at + 8), word(at + 16)) {
                (Some(id), Some(entries), Some(bytes)) => Ok(IndexTally { id, entries, bytes }),
                _ => Err(bad()),
            }
        })
        .collect::<Result<_, _>>()?;
    Ok((r, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_reject_garbage() {
        let r = StatsRecord {
            count: 3,
            data_size: u64::MAX,
            id_bytes: 42,
            indexes: vec![
                IndexTally {
                    id: 9,
                    entries: 3,
                    bytes: 120,
                },
                IndexTally {
                    id: 11,
                    entries: 0,
                    bytes: 0,
                },
            ],
        };
        assert_eq!(decode_stats(&encode_stats(&r)).ok(), Some((r, true)));
        let none = StatsRecord::default();
        assert_eq!(decode_stats(&encode_stats(&none)).ok(), Some((none, true)));
        let mut bad_version = encode_stats(&StatsRecord::default());
        bad_version[16] = 2;
        let mut torn = encode_stats(&StatsRecord {
            indexes: vec![IndexTally::default()],
            ..StatsRecord::default()
        });
        torn.pop();
        for bad in [&[][..], &[0u8; 15][..], &[0u8; 17][..], &bad_version, &torn] {
            assert!(matches!(
                decode_stats(bad),
                Err(StorageError::Engine(bisondb_engine::EngineError::Corrupt(
                    _
                )))
            ));
        }
    }

    #[test]
    fn a_record_of_an_older_release_has_no_index_sizes() {
        let mut old = 3u64.to_be_bytes().to_vec();
        old.extend_from_slice(&100u64.to_be_bytes());
        let (r, known) = decode_stats(&old).expect("16-byte record");
        assert!(!known);
        assert_eq!((r.count, r.data_size, r.id_bytes), (3, 100, 0));
        assert!(r.indexes.is_empty());
    }

    #[test]
    fn regions_do_not_overlap() {
        let (start, end) = doc_range(7);
        let inside = doc_key(7, &[0xFF, 0xFF, 0xFF]);
        assert!(inside >= start && inside < end);
        assert!(
            doc_key(8, &[]) >= end,
            "next collection is outside the range"
        );
        assert!(doc_key(6, &[0xFF; 4]) < start);
        assert!(entry_key("a", "b") < doc_prefix(0));
        assert!(stats_key(0) > doc_key(u64::MAX, &[0xFF]));
        assert!(meta_key() < entry_prefix() && entry_prefix() < pending_drop_prefix());
        assert_eq!(pending_drop_id(&pending_drop_key(42)).ok(), Some(42));
        let v = bson::RawBsonRef::Int32(5);
        assert_eq!(doc_key_for(7, v), doc_key(7, &crate::keycode::encode_id(v)));
    }

    #[test]
    fn entries_sort_by_database_then_collection() {
        assert!(entry_key("a", "z") < entry_key("ab", "a"));
        assert!(entry_key("a", "b") < entry_key("a", "b.c"));
    }
}
