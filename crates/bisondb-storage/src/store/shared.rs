//! Writes on a store other servers write too ([`Capabilities::shared`]).
//!
//! One process can serialize a collection's read-check-write under its
//! write lock; several servers over one store cannot. So on a shared store
//! every plain write (insert, modify, delete) runs in an engine
//! [`Transaction`] entered on the writing thread ([`run`]): the write's
//! snapshot is the transaction's ([`WriteTxn::view`]), and its batch is
//! committed through it ([`WriteTxn::commit`]), so the store itself checks
//! every key the batch writes against commits made after the snapshot. Two
//! servers inserting the same `_id` or unique key both read it absent; the
//! store lets one commit and fails the other with WriteConflict, and the
//! loser runs its write again ([`retrying`]), now sees the key, and answers
//! 11000 as one server would.
//!
//! A collection's count and sizes are not one record every write rewrites
//! (that row would serialize every insert of every server): each server
//! keeps its own record of what its writes changed (`[0x02] coll server`,
//! the deltas as wrapping 64-bit numbers), and a read sums them with the
//! collection's base record ([`crate::store::load_stats`]). A server's own
//! record is only written under that collection's write lock in that
//! server, so it never conflicts with another server.
//!
//! Record ids come from blocks each server takes from a per-collection
//! counter in the store ([`take_block`]), so servers never hand out the same
//! one and do not contend per insert: natural order is insertion order
//! within a block, as a sharded cluster has no global natural order either.
//!
//! On an engine that is not shared none of this runs: [`current`] is one
//! thread-local read, as for [`crate::store::txn`].

use std::cell::RefCell;
use std::ops::Bound;
use std::sync::Arc;

use bisondb_engine::{
    Capabilities, CommitGuard, Durability, Engine, EngineError, KeyValue, Snapshot, Transaction,
    WriteBatch,
};
use bisondb_error::ErrorCode;
use parking_lot::Mutex;

use crate::error::StorageError;
use crate::layout::{self, IndexTally, StatsRecord};

/// How many times a write that lost a race to another server runs again
/// before its WriteConflict reaches the client (which may retry it too).
const ATTEMPTS: usize = 20;

/// Record ids one block holds.
pub(crate) const RID_BLOCK: u64 = 1024;

thread_local! {
    static CURRENT: RefCell<Option<Arc<WriteTxn>>> = const { RefCell::new(None) };
}

/// The write transaction entered on this thread, if any.
pub(crate) fn current() -> Option<Arc<WriteTxn>> {
    CURRENT.with(|c| c.borrow().clone())
}

/// The engine transaction one plain write runs in on a shared store.
pub(crate) struct WriteTxn {
    /// `None` once committed.
    txn: Mutex<Option<Box<dyn Transaction>>>,
    /// What the commit checks: the collection's catalog is still the one
    /// the write planned with (see [`run`]).
    guard: Option<CommitGuard>,
}

impl WriteTxn {
    /// The transaction's snapshot, for the write's reads.
    pub(crate) fn view(self: &Arc<Self>) -> Arc<dyn Snapshot> {
        Arc::new(View(self.clone()))
    }

    /// Commits `batch` through the transaction: WriteConflict, applying
    /// nothing, when another server changed one of its keys since the
    /// snapshot.
    pub(crate) fn commit(&self, batch: WriteBatch) -> Result<(), StorageError> {
        let txn = self.txn.lock().take().ok_or_else(|| {
            StorageError::internal("a shared-store write committed twice".to_string())
        })?;
        match &self.guard {
            Some(guard) => Ok(txn.commit_batch_guarded(batch, Durability::Buffered, guard)?),
            None => Ok(txn.commit_batch(batch, Durability::Buffered)?),
        }
    }
}

/// Runs `f` (one plain write) in a transaction of `engine` entered on this
/// thread; a write it does not commit is rolled back. On an engine that is
/// not shared, or inside a multi-document transaction, `f` just runs.
///
/// The commit checks `guard` ([`Transaction::commit_batch_guarded`]): the
/// written collection's catalog entry, share-locked, was not changed after
/// the transaction's snapshot, and the catalog's version in it is the one
/// the write's indexes were read at. So a write that planned with a stale
/// catalog (an index another server built, dropped, a collection it
/// dropped or renamed) fails with WriteConflict, applying nothing, and
/// runs again ([`retrying`]) once the collection's entry is read again;
/// and another server's catalog change waits for the writes holding the
/// lock, so an index build that reads the documents after taking the
/// entry's lock sees every write that did not see its index.
pub(crate) fn run<R>(
    engine: &Arc<dyn Engine>,
    guard: Option<CommitGuard>,
    f: impl FnOnce() -> R,
) -> Result<R, StorageError> {
    if !engine.capabilities().shared || crate::store::txn::in_transaction() || current().is_some() {
        return Ok(f());
    }
    let entered = Arc::new(WriteTxn {
        txn: Mutex::new(Some(engine.begin()?)),
        guard,
    });
    struct Leave;
    impl Drop for Leave {
        fn drop(&mut self) {
            CURRENT.with(|c| *c.borrow_mut() = None);
        }
    }
    CURRENT.with(|c| *c.borrow_mut() = Some(entered));
    let _leave = Leave;
    Ok(f())
}

/// Whether `e` is a write that lost a race and may simply run again: the
/// engine's conflict, or the same conflict met by a write joined to this one
/// (a mongos's session record, committed with the write it records, reports
/// it as a MongoDB error).
pub(crate) fn lost_race(e: &StorageError) -> bool {
    match e {
        StorageError::Engine(EngineError::WriteConflict(_)) => true,
        StorageError::Mongo(m) => m.code == ErrorCode::WriteConflict,
        _ => false,
    }
}

/// Runs `attempt` until it no longer loses a race to another server
/// ([`lost_race`] on what `conflicted` finds in its result), at most
/// [`ATTEMPTS`] times. On an engine that is not shared it runs once, and so
/// does a write nested in another's transaction (a session record written
/// with the write it records): its conflict consumed that transaction, so
/// only the outermost write can run again, in a new one.
///
/// `attempt` is told whether it runs again after a lost race (the first
/// run is `false`): it then reads its collection's catalog entry again.
pub(crate) fn retrying<R>(
    caps: Capabilities,
    mut attempt: impl FnMut(bool) -> R,
    conflicted: impl Fn(&R) -> bool,
) -> R {
    let nested = current().is_some();
    let mut out = attempt(false);
    if !caps.shared || crate::store::txn::in_transaction() || nested {
        return out;
    }
    for _ in 1..ATTEMPTS {
        if !conflicted(&out) {
            break;
        }
        out = attempt(true);
    }
    out
}

/// [`run`]'s transaction as a snapshot.
struct View(Arc<WriteTxn>);

fn ended() -> EngineError {
    EngineError::Internal("a shared-store write read after its commit".into())
}

impl Snapshot for View {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        match self.0.txn.lock().as_ref() {
            Some(t) => t.get(key),
            None => Err(ended()),
        }
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        match self.0.txn.lock().as_ref() {
            Some(t) => t.get_many(keys),
            None => Err(ended()),
        }
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        match self.0.txn.lock().as_ref() {
            Some(t) => t.scan(start, end, reverse, limit),
            None => Err(ended()),
        }
    }
}

/// The key of server `server`'s record of collection `coll`'s stats.
pub(crate) fn own_stats_key(coll: u64, server: u64) -> Vec<u8> {
    let mut k = layout::stats_key(coll);
    k.extend_from_slice(&server.to_be_bytes());
    k
}

/// `own` plus what a write changed (`after` against `before`), in wrapping
/// arithmetic: a server's record holds deltas, negative ones included.
pub(crate) fn add_change(own: &mut StatsRecord, before: &StatsRecord, after: &StatsRecord) {
    let step = |o: u64, b: u64, a: u64| o.wrapping_add(a.wrapping_sub(b));
    own.count = step(own.count, before.count, after.count);
    own.data_size = step(own.data_size, before.data_size, after.data_size);
    own.id_bytes = step(own.id_bytes, before.id_bytes, after.id_bytes);
    // An index `after` leaves out has no entries any more.
    let ids = after.indexes.iter().chain(&before.indexes).map(|t| t.id);
    let mut seen: Vec<u64> = Vec::new();
    for id in ids {
        if seen.contains(&id) {
            continue;
        }
        seen.push(id);
        let find = |r: &StatsRecord| {
            r.indexes
                .iter()
                .find(|t| t.id == id)
                .copied()
                .unwrap_or_default()
        };
        let (b, a) = (find(before), find(after));
        let o = tally_mut(own, id);
        o.entries = step(o.entries, b.entries, a.entries);
        o.bytes = step(o.bytes, b.bytes, a.bytes);
    }
}

/// Adds the deltas of a server's record to `total`.
pub(crate) fn add_record(total: &mut StatsRecord, deltas: &StatsRecord) {
    total.count = total.count.wrapping_add(deltas.count);
    total.data_size = total.data_size.wrapping_add(deltas.data_size);
    total.id_bytes = total.id_bytes.wrapping_add(deltas.id_bytes);
    for d in &deltas.indexes {
        let t = tally_mut(total, d.id);
        t.entries = t.entries.wrapping_add(d.entries);
        t.bytes = t.bytes.wrapping_add(d.bytes);
    }
}

fn tally_mut(r: &mut StatsRecord, id: u64) -> &mut IndexTally {
    let at = match r.indexes.iter().position(|t| t.id == id) {
        Some(at) => at,
        None => {
            r.indexes.push(IndexTally {
                id,
                ..IndexTally::default()
            });
            r.indexes.len() - 1
        }
    };
    &mut r.indexes[at]
}

/// Takes the next block of at least `want` record ids of collection `coll`
/// from its counter in the store (created from `first` when missing), in a
/// transaction of its own retried when another server takes one at the same
/// time. Returns the block's `[start, end)`.
pub(crate) fn take_block(
    engine: &dyn Engine,
    coll: u64,
    want: u64,
    first: impl Fn() -> Result<u64, StorageError>,
) -> Result<(u64, u64), StorageError> {
    let key = layout::rid_counter_key(coll);
    let size = want.max(RID_BLOCK);
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let txn = engine.begin()?;
        let start = match txn.get(&key)? {
            Some(v) => layout::decode_u64(&v)?,
            None => first()?,
        };
        let end = start
            .checked_add(size)
            .ok_or_else(|| StorageError::internal("record ids exhausted"))?;
        let mut batch = WriteBatch::new();
        batch.put(key.clone(), end.to_be_bytes().to_vec());
        match txn.commit_batch(batch, Durability::Buffered) {
            Ok(()) => return Ok((start, end)),
            Err(e @ EngineError::WriteConflict(_)) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .map(StorageError::from)
        .unwrap_or_else(|| StorageError::internal("no record id block")))
}

/// A number no other server of the store holds: this server's id, taken
/// from the store's counter when the store is opened.
pub(crate) fn take_server_id(engine: &dyn Engine) -> Result<u64, StorageError> {
    let key = layout::server_counter_key();
    let mut last = None;
    for _ in 0..ATTEMPTS {
        let txn = engine.begin()?;
        let id = match txn.get(&key)? {
            Some(v) => layout::decode_u64(&v)?,
            None => 1,
        };
        let mut batch = WriteBatch::new();
        batch.put(key.clone(), id.saturating_add(1).to_be_bytes().to_vec());
        match txn.commit_batch(batch, Durability::Buffered) {
            Ok(()) => return Ok(id),
            Err(e @ EngineError::WriteConflict(_)) => last = Some(e),
            Err(e) => return Err(e.into()),
        }
    }
    Err(last
        .map(StorageError::from)
        .unwrap_or_else(|| StorageError::internal("no server id")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deltas_sum_to_the_total_through_negative_steps() {
        let zero = StatsRecord::default();
        let mut one = StatsRecord::default();
        one.add_doc(10, 100);
        one.index_entry(7, 20, true);
        // Server A inserted one document, server B deleted it.
        let (mut a, mut b) = (StatsRecord::default(), StatsRecord::default());
        add_change(&mut a, &zero, &one);
        add_change(&mut b, &one, &zero);
        let mut total = StatsRecord::default();
        add_record(&mut total, &a);
        assert_eq!((total.count, total.data_size), (1, 100));
        add_record(&mut total, &b);
        assert_eq!((total.count, total.data_size, total.id_bytes), (0, 0, 0));
        assert_eq!(
            total.indexes.first().map(|t| (t.entries, t.bytes)),
            Some((0, 0))
        );
        // The deltas survive their encoding.
        let (back, known) = layout::decode_stats(&layout::encode_stats(&b)).expect("decodes");
        assert!(known);
        assert_eq!(back, b);
    }
}
