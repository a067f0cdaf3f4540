//! The key layout of the single engine key space.
//!
//! ```text
//! [0x00 0x00]                         -> catalog meta {version, nextId}
//! [0x00 0x01] db 0x00 collection      -> catalog entry (BSON)
//! [0x00 0x02] id:u64be                -> pending drop marker (cleanup after a crash)
//! [0x01] id:u64be encode_id(_id)      -> the raw document
//! [0x02] id:u64be                     -> count:u64be data_size:u64be
//! [0x03] ...                          -> index entries (see `crate::index`)
//! [0x04] ...                          -> multikey markers (see `crate::index`)
//! [0x05] id:u64be rid:u64be            -> natural order of a capped collection
//! [0x06] id:u64be encode_id(_id)      -> its record id (see `crate::store::capped`)
//! ```
//!
//! Collection ids come from a counter and are never reused, so a dropped
//! collection's leftovers (if a crash interrupted their cleanup) can never show
//! up in a new collection. Keys carry the id rather than the name, which makes a
//! rename a catalog-only change.

use crate::engine::prefix_successor;
use crate::error::StorageError;

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
        .ok_or_else(|| StorageError::Corrupt(format!("bad pending-drop key {key:?}")))
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

pub(crate) fn encode_stats(count: u64, data_size: u64) -> Vec<u8> {
    let mut v = Vec::with_capacity(16);
    v.extend_from_slice(&count.to_be_bytes());
    v.extend_from_slice(&data_size.to_be_bytes());
    v
}

pub(crate) fn decode_stats(v: &[u8]) -> Result<(u64, u64), StorageError> {
    let word = |r: std::ops::Range<usize>| {
        v.get(r)
            .and_then(|b| <[u8; 8]>::try_from(b).ok())
            .map(u64::from_be_bytes)
    };
    match (word(0..8), word(8..16), v.len()) {
        (Some(c), Some(s), 16) => Ok((c, s)),
        _ => Err(StorageError::Corrupt(format!(
            "bad collection stats record of {} bytes",
            v.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_round_trip_and_reject_garbage() {
        assert_eq!(
            decode_stats(&encode_stats(3, u64::MAX)).ok(),
            Some((3, u64::MAX))
        );
        for bad in [&[][..], &[0u8; 15][..], &[0u8; 17][..]] {
            assert!(matches!(decode_stats(bad), Err(StorageError::Corrupt(_))));
        }
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
