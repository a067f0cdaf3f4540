//! Record-id collections: documents in insertion order, `_id` as a unique index.
//!
//! mongod keeps an ordinary collection's documents under a record id that
//! grows with every insert, so a scan without a sort returns them in insertion
//! order, and the `_id` index maps each `_id` to its record. Collections
//! created since BisonDB did the same (`recordIds: true` in their catalog
//! entry) are laid out that way:
//!
//! ```text
//! [0x01] coll:u64be rid:u64be                -> the raw document
//! [0x03] coll:u64be 0:u64be encode_id(_id)   -> rid   the `_id` index
//! ```
//!
//! An `_id` entry's rid is big-endian without its leading zero bytes (1 to
//! 8 bytes; [`encode_rid_value`]): three bytes up to 16 million records
//! instead of eight, in every copy the entry makes (the batch's run, its
//! journaled blob, the tables). Entries of eight bytes decode the same.
//!
//! The `_id` index lives in the index region under index id 0 (secondary
//! index ids start at 1): the lsm engine keeps that region apart and writes
//! it through its index buffer, so a load of documents appends record keys
//! to tables that overlap no other while the `_id` entries are journaled
//! as one value per batch. In `main` beside the records, every flushed table
//! spanned both ranges and overlapped every older one, and compaction
//! rewrote them again and again (0.60x on `timeseries-batch`).
//!
//! Collections without the mark keep documents clustered by `_id` (`[0x01]
//! coll encode_id(_id)`): those created with `clusteredIndex` (time-series
//! buckets among them), capped collections (their natural order is the index
//! in `store/capped.rs`), and every collection of a dbpath written before
//! record ids existed (kept as it is: nothing is migrated at open).
//!
//! The `_id` key plays the part the document key plays in a clustered
//! collection: an insert checks it for duplicates (skipping the lookup when
//! `store::key_bounds` proves it new) and counts its bytes as the `_id`
//! index's size. Record ids come from a per-collection sequence read once per
//! engine generation as the highest stored rid + 1 (WiredTiger's rule) and
//! advanced by every insert under the write lock, never going back while the
//! process runs: a rid left by a deleted document or a failed batch is not
//! given out again.
//!
//! Invariant: a document and its `_id` entry are written and removed in the
//! same atomic batch; a replace keeps the document's rid.

use std::ops::Bound;

use bson::RawBsonRef;
use parking_lot::Mutex;

use super::capped::decode_rid;
use super::Collection;
use crate::error::StorageError;
use crate::{index, layout};
use bisondb_engine::{Snapshot, WriteBatch};

/// Bytes an `_id` entry's rid counts for in the `_id` index's size: its
/// logical size, whatever [`encode_rid_value`] stored.
pub(crate) const RID_LEN: usize = 8;

/// The value of an `_id` entry naming record `rid`: big-endian, without
/// leading zero bytes (one byte for rid 0).
pub(crate) fn encode_rid_value(rid: u64) -> Vec<u8> {
    let bytes = rid.to_be_bytes();
    let skip = (rid.leading_zeros() / 8).min(7) as usize;
    bytes[skip..].to_vec()
}

/// The rid an `_id` entry's value holds (see [`encode_rid_value`]).
pub(crate) fn decode_rid_value(v: &[u8]) -> Result<u64, StorageError> {
    if v.is_empty() || v.len() > 8 {
        return Err(StorageError::corrupt(format!(
            "bad _id entry value of {} bytes",
            v.len()
        )));
    }
    let mut bytes = [0u8; 8];
    bytes[8 - v.len()..].copy_from_slice(v);
    Ok(u64::from_be_bytes(bytes))
}

/// The record-id sequence of one record-id collection.
#[derive(Default)]
pub(crate) struct RecordIds {
    /// `(engine generation, next rid)`, under the collection's write lock.
    next: Mutex<Option<(u64, u64)>>,
    /// On a shared store: the block of rids this server took and has not
    /// given out yet, `[next, end)` (`store/shared.rs`).
    block: Mutex<(u64, u64)>,
}

/// A stored document found by its `_id`: its key and its bytes.
pub(crate) struct Located {
    pub(crate) doc_key: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

/// The index id of the `_id` index in the index region.
const ID_INDEX: u64 = 0;

/// The range of a collection's `_id` entries.
pub(super) fn id_range(coll: u64) -> (Vec<u8>, Vec<u8>) {
    index::index_range(coll, ID_INDEX)
}

/// The `_id` entry of the document whose encoded `_id` is `encoded`.
pub(crate) fn id_key(coll: u64, encoded: &[u8]) -> Vec<u8> {
    let mut k = index::index_prefix(coll, ID_INDEX);
    k.extend_from_slice(encoded);
    k
}

/// The rid a document key of a record-id collection holds.
pub(crate) fn rid_of_doc_key(key: &[u8]) -> Result<u64, StorageError> {
    key.get(9..)
        .ok_or_else(|| StorageError::corrupt(format!("bad record key {key:?}")))
        .and_then(decode_rid)
}

impl Collection {
    /// Whether documents are stored in record-id order (see the module docs).
    pub(crate) fn has_record_ids(&self) -> bool {
        self.state.records.is_some()
    }

    /// Whether a scan without a sort (natural order) returns documents in
    /// `_id` order: false for record-id and capped collections.
    pub fn natural_is_id_order(&self) -> bool {
        self.state.records.is_none() && self.state.capped.is_none()
    }

    /// The key an insert checks for a duplicate `_id`: the document key of a
    /// clustered collection, the `_id` entry of a record-id one. Both are
    /// `[region] coll:u64be encode_id(_id)`.
    pub(super) fn id_key_for(&self, id: RawBsonRef<'_>) -> Vec<u8> {
        if self.has_record_ids() {
            let mut k = index::index_prefix(self.state.id, ID_INDEX);
            crate::keycode::encode_value(id, &mut k);
            k
        } else {
            layout::doc_key_for(self.state.id, id)
        }
    }

    /// Where the encoded `_id` starts in a key of [`Collection::id_key_for`].
    pub(super) fn id_prefix_len(&self) -> usize {
        if self.has_record_ids() {
            17
        } else {
            9
        }
    }

    /// The range of the keys [`Collection::id_key_for`] gives.
    pub(super) fn id_key_range(&self) -> (Vec<u8>, Vec<u8>) {
        if self.has_record_ids() {
            id_range(self.state.id)
        } else {
            layout::doc_range(self.state.id)
        }
    }

    /// What an `_id` key of `key_len` bytes adds to the `_id` index's size.
    pub(super) fn id_entry_len(&self, key_len: usize) -> usize {
        if self.has_record_ids() {
            key_len.saturating_add(RID_LEN)
        } else {
            key_len
        }
    }

    /// The stored document whose encoded `_id` is `encoded`.
    pub(super) fn locate(
        &self,
        snap: &dyn Snapshot,
        encoded: &[u8],
    ) -> Result<Option<Located>, StorageError> {
        if !self.has_record_ids() {
            let doc_key = layout::doc_key(self.state.id, encoded);
            return Ok(snap.get(&doc_key)?.map(|value| Located { doc_key, value }));
        }
        let Some(rid) = snap.get(&id_key(self.state.id, encoded))? else {
            return Ok(None);
        };
        let rid = decode_rid_value(&rid)?;
        let doc_key = layout::record_key(self.state.id, rid);
        match snap.get(&doc_key)? {
            Some(value) => Ok(Some(Located { doc_key, value })),
            None => Err(StorageError::corrupt(format!(
                "the _id index of {} names record {rid} that is not stored",
                self.ns,
            ))),
        }
    }

    /// Queues a new document whose `_id` key (from [`Collection::id_key_for`])
    /// is `id_key`; `next_rid` is the sequence [`Collection::next_record_id_locked`]
    /// gave (`None` for a clustered collection).
    pub(super) fn queue_new(
        &self,
        batch: &mut WriteBatch,
        id_key: Vec<u8>,
        doc: Vec<u8>,
        next_rid: &mut Option<u64>,
    ) {
        match next_rid {
            Some(rid) => {
                // Record first: a one-document batch is then in key order
                // (records sort before the index region), which the lsm
                // engine's commit takes without sorting.
                batch.insert(layout::record_key(self.state.id, *rid), doc);
                batch.insert(id_key, encode_rid_value(*rid));
                *rid = rid.saturating_add(1);
            }
            None => batch.insert(id_key, doc),
        }
    }

    /// Queues the removal of a located document and of its `_id` entry.
    pub(super) fn queue_remove(&self, batch: &mut WriteBatch, id_key: Vec<u8>, doc_key: Vec<u8>) {
        if self.has_record_ids() {
            batch.delete(id_key);
        }
        batch.delete(doc_key);
    }

    /// The next record id of a record-id collection (`None` for others),
    /// under the write lock: read once per engine generation from the
    /// engine's latest state (a transaction's view may be older), never going
    /// back. The caller hands the advanced value to
    /// [`Collection::record_ids_used_locked`]. On a shared store they come
    /// from this server's block, taken from the store when fewer than
    /// `want` are left in it (`store/shared.rs`).
    pub(super) fn next_record_id_locked(&self, want: usize) -> Result<Option<u64>, StorageError> {
        let Some(records) = self.state.records.as_ref() else {
            return Ok(None);
        };
        if self.state.server != 0 {
            let want = u64::try_from(want).unwrap_or(u64::MAX);
            let mut block = records.block.lock();
            if block.1.saturating_sub(block.0) < want {
                *block =
                    super::shared::take_block(self.engine.as_ref(), self.state.id, want, || {
                        self.stored_next_rid()
                    })?;
            }
            return Ok(Some(block.0));
        }
        let generation = self.engine.generation();
        let cached = *records.next.lock();
        let previous = match cached {
            Some((g, n)) if g == generation => return Ok(Some(n)),
            Some((_, n)) => n,
            None => 1,
        };
        Ok(Some(previous.max(self.stored_next_rid()?)))
    }

    /// The rid after the highest stored one.
    fn stored_next_rid(&self) -> Result<u64, StorageError> {
        let (start, end) = layout::doc_range(self.state.id);
        let last = self.engine.snapshot()?.scan(
            Bound::Included(start.as_slice()),
            Bound::Excluded(end.as_slice()),
            true,
            1,
        )?;
        Ok(match last.first() {
            Some((k, _)) => rid_of_doc_key(k)?.saturating_add(1),
            None => 1,
        })
    }

    /// Records that rids below `next` are taken (whether or not their batch
    /// committed: a failed batch may surface after a reopen).
    pub(super) fn record_ids_used_locked(&self, next: Option<u64>) {
        if let (Some(records), Some(next)) = (self.state.records.as_ref(), next) {
            if self.state.server != 0 {
                let mut block = records.block.lock();
                block.0 = block.0.max(next);
                return;
            }
            *records.next.lock() = Some((self.engine.generation(), next));
        }
    }

    /// The record id of the document whose `_id` is `id`, as mongod's
    /// `showRecordId` shows it: `None` for a clustered collection (whose
    /// record id is the `_id`'s key) or when no such document is stored.
    /// A document keeps its rid for life, so any snapshot that holds it
    /// gives the same answer.
    pub fn record_id_of(&self, id: RawBsonRef<'_>) -> Result<Option<u64>, StorageError> {
        if !self.has_record_ids() {
            return Ok(None);
        }
        let key = self.id_key_for(id);
        match self.snapshot()?.get(&key)? {
            Some(rid) => Ok(Some(decode_rid_value(&rid)?)),
            None => Ok(None),
        }
    }

    /// The range of a record-id collection's `_id` entries (`None` for a
    /// clustered collection, whose `_id` index is its documents).
    pub(crate) fn id_index_range(&self) -> Option<(Vec<u8>, Vec<u8>)> {
        self.has_record_ids().then(|| id_range(self.state.id))
    }
}

#[cfg(test)]
mod tests {
    use super::{decode_rid_value, encode_rid_value};

    #[test]
    fn rid_values_are_short_and_round_trip() {
        for (rid, len) in [
            (0, 1),
            (1, 1),
            (255, 1),
            (256, 2),
            (1 << 24, 4),
            (u64::MAX, 8),
        ] {
            let v = encode_rid_value(rid);
            assert_eq!(v.len(), len, "{rid}");
            assert_eq!(decode_rid_value(&v).unwrap(), rid);
        }
        // The eight-byte form decodes the same.
        assert_eq!(decode_rid_value(&300u64.to_be_bytes()).unwrap(), 300);
        assert!(decode_rid_value(&[]).is_err());
        assert!(decode_rid_value(&[1; 9]).is_err());
    }
}
