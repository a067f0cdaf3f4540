//! Read-write transactions: what every engine guarantees ([`Transaction`]),
//! and [`LocalTransactions`], the implementation the engines in this process
//! share, layered over an engine's own snapshots and atomic writes.
//!
//! The rules are mongod's (snapshot isolation, first writer wins): a
//! transaction reads one snapshot plus its own writes; a write to a key that
//! another open transaction has written fails at once with
//! [`EngineError::WriteConflict`] (the client retries, as it does mongod's
//! WriteConflict); and a commit fails, applying nothing, when a key it wrote
//! was changed by another commit after its snapshot. An engine over a
//! transactional store (PostgreSQL's `REPEATABLE READ` with `NOWAIT` row
//! locks gives exactly these answers) implements [`Transaction`] natively.

use std::collections::{BTreeMap, HashMap};
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

use crate::engine::{range_is_empty, Durability, KeyValue, Snapshot, WriteBatch};
use crate::error::EngineError;

/// An open read-write transaction of an engine (see [`crate::Engine::begin`]).
/// Dropping it without [`Transaction::commit`] rolls it back: nothing it
/// wrote is applied, and the keys it wrote are free for other transactions.
pub trait Transaction: Send {
    /// The value of `key` as this transaction sees it: its own latest write
    /// to the key, else what its snapshot holds.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError>;

    /// Like [`Snapshot::get_many`], as [`Transaction::get`] sees each key.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Like [`Snapshot::scan`], over the transaction's snapshot with its own
    /// writes applied.
    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError>;

    /// Sets `key` to `value` inside the transaction: visible to its own reads
    /// at once, to others only after the commit. Fails at once with
    /// [`EngineError::WriteConflict`] when another open transaction has
    /// written `key` (first writer wins); the transaction stays open and
    /// keeps its other writes, so the caller decides whether to roll back.
    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), EngineError>;

    /// Removes `key` inside the transaction (no error when absent); conflicts
    /// as [`Transaction::put`] does.
    fn delete(&mut self, key: Vec<u8>) -> Result<(), EngineError>;

    /// Applies every write of the transaction atomically, as
    /// [`crate::Engine::write`] applies a batch, and ends it. Fails with
    /// [`EngineError::WriteConflict`], applying nothing, when a key it wrote
    /// was changed by another commit (a transaction's or a plain write's)
    /// after the transaction's snapshot; an engine may report that conflict
    /// earlier, at the write itself. A transaction that wrote nothing
    /// commits trivially.
    fn commit(self: Box<Self>, durability: Durability) -> Result<(), EngineError>;

    /// Like [`Transaction::commit`], also applying `unchecked` in the same
    /// atomic batch: writes the caller derives from the transaction's own
    /// (a store's per-collection count record) whose keys no transaction
    /// claims and whose races the caller rules out under its own locks, so
    /// they are neither claimed nor checked for conflicts. An engine that
    /// cannot add them to its commit refuses, applying nothing.
    fn commit_with(
        self: Box<Self>,
        unchecked: WriteBatch,
        durability: Durability,
    ) -> Result<(), EngineError> {
        if unchecked.is_empty() {
            return self.commit(durability);
        }
        Err(EngineError::InvalidArgument(
            "this engine's transactions cannot commit writes outside the transaction".into(),
        ))
    }

    /// Writes every operation of `batch` inside the transaction, checked as
    /// its own writes are (a key another transaction holds, or changed by a
    /// commit after this transaction's snapshot, is
    /// [`EngineError::WriteConflict`], applying nothing), then commits. A
    /// whole batch at once: an engine over a network store sends it in one
    /// round trip rather than one per key (the default writes key by key).
    fn commit_batch(
        mut self: Box<Self>,
        batch: WriteBatch,
        durability: Durability,
    ) -> Result<(), EngineError> {
        for op in batch.into_ops() {
            match op {
                crate::engine::BatchOp::Put(k, v) | crate::engine::BatchOp::Insert(k, v) => {
                    self.put(k, v)?
                }
                crate::engine::BatchOp::Delete(k) => self.delete(k)?,
            }
        }
        self.commit(durability)
    }

    /// [`Transaction::commit_batch`], only while `guard` holds: `guard.lock`
    /// is locked against writers until the commit ends (waiting, long, for a
    /// transaction that holds it through [`Transaction::lock_key`]), and the
    /// commit fails with [`EngineError::WriteConflict`], applying nothing,
    /// when that key was changed by a commit after this transaction's
    /// snapshot or `guard.key` does not hold `guard.expected` in it. A
    /// shared store's writes check so that the catalog they planned with is
    /// still the catalog (`bisondb-storage`'s shared writes). An engine
    /// owned by one process only compares (the default): nobody else
    /// changes its catalog under a writer.
    fn commit_batch_guarded(
        self: Box<Self>,
        batch: WriteBatch,
        durability: Durability,
        guard: &CommitGuard,
    ) -> Result<(), EngineError> {
        if self.get(&guard.key)? != guard.expected {
            return Err(EngineError::write_conflict(
                "the catalog changed since the write read it",
            ));
        }
        self.commit_batch(batch, durability)
    }

    /// Locks `key` against every other writer until this transaction ends,
    /// waiting (long, not the short wait of a write) while others hold it,
    /// guarded commits' shared locks included, and returns its value.
    /// [`EngineError::WriteConflict`] when it was changed by a commit after
    /// the snapshot. An engine owned by one process only reads it (the
    /// default): its callers serialize under their own locks.
    fn lock_key(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.get(key)
    }
}

/// What [`Transaction::commit_batch_guarded`] checks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommitGuard {
    /// Locked (shared) until the commit ends; a change after the snapshot
    /// is a conflict.
    pub lock: Vec<u8>,
    /// Must hold `expected` in the transaction's snapshot.
    pub key: Vec<u8>,
    pub expected: Option<Vec<u8>>,
}

/// What [`LocalTransactions`] needs from an engine: its snapshots and its
/// atomic writes (the engine's own, or the part of it that owns them).
pub trait TxnStore: Send + Sync + 'static {
    /// As [`crate::Engine::snapshot`].
    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError>;

    /// As [`crate::Engine::write`].
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError>;
}

/// Transactions for an engine in this process, built from its snapshots and
/// atomic writes: a table of the keys open transactions have written (first
/// writer wins), and commits serialized among themselves, each checking that
/// the keys it writes still hold what its snapshot saw.
///
/// Plain writes ([`crate::Engine::write`]) never touch this table, so they
/// cost what they cost without transactions. The price: a plain write is
/// checked against a transaction's commit only when it finished before that
/// commit began; a plain write racing with the commit itself is ordered by
/// the caller's locks (the store serializes a collection's writes under its
/// write lock). A commit compares values, so a key changed and changed back
/// since the snapshot is no conflict: the transaction's writes then apply to
/// the state it read.
#[derive(Default)]
pub struct LocalTransactions {
    /// Keys written by open transactions, with the transaction that wrote them.
    owners: Mutex<HashMap<Vec<u8>, u64>>,
    /// Held while a commit checks its keys and writes them.
    committing: Mutex<()>,
    next_id: AtomicU64,
}

impl LocalTransactions {
    /// A table for one engine (engines keep it beside their data).
    pub fn new() -> Arc<LocalTransactions> {
        Arc::new(LocalTransactions::default())
    }

    /// Starts a transaction over `store` on a snapshot taken now.
    pub fn begin(
        self: &Arc<Self>,
        store: Arc<dyn TxnStore>,
    ) -> Result<Box<dyn Transaction>, EngineError> {
        let snapshot = store.snapshot()?;
        self.begin_on(store, snapshot)
    }

    /// Starts a transaction over `store` that reads `snapshot` (one of
    /// `store`'s, possibly taken long ago).
    pub fn begin_on(
        self: &Arc<Self>,
        store: Arc<dyn TxnStore>,
        snapshot: Arc<dyn Snapshot>,
    ) -> Result<Box<dyn Transaction>, EngineError> {
        Ok(Box::new(LocalTransaction {
            id: self.next_id.fetch_add(1, Ordering::Relaxed),
            table: self.clone(),
            store,
            snapshot,
            writes: BTreeMap::new(),
        }))
    }
}

struct LocalTransaction {
    id: u64,
    table: Arc<LocalTransactions>,
    store: Arc<dyn TxnStore>,
    snapshot: Arc<dyn Snapshot>,
    /// Its writes by key (`None`: deleted); every key here is owned in `table`.
    writes: BTreeMap<Vec<u8>, Option<Vec<u8>>>,
}

impl LocalTransaction {
    /// Makes this transaction the owner of `key`, unless another one is.
    fn claim(&self, key: &[u8]) -> Result<(), EngineError> {
        if self.writes.contains_key(key) {
            return Ok(());
        }
        let mut owners = self.table.owners.lock();
        match owners.get(key) {
            Some(&owner) if owner != self.id => Err(EngineError::write_conflict(
                "WriteConflict: another transaction has written this key",
            )),
            Some(_) => Ok(()),
            None => {
                owners.insert(key.to_vec(), self.id);
                Ok(())
            }
        }
    }

    fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<(), EngineError> {
        self.claim(&key)?;
        self.writes.insert(key, value);
        Ok(())
    }

    /// Checks the written keys against the state now and applies the writes
    /// (with `unchecked` in the same batch), with no other commit in between.
    fn apply(&self, unchecked: WriteBatch, durability: Durability) -> Result<(), EngineError> {
        let _committing = self.table.committing.lock();
        let now = self.store.snapshot()?;
        for key in self.writes.keys() {
            if now.get(key)? != self.snapshot.get(key)? {
                return Err(EngineError::write_conflict(
                    "WriteConflict: a key this transaction wrote was changed after its snapshot",
                ));
            }
        }
        let mut batch = unchecked;
        for (key, value) in &self.writes {
            match value {
                Some(v) => batch.put(key.clone(), v.clone()),
                None => batch.delete(key.clone()),
            }
        }
        self.store.write(batch, durability)
    }
}

impl Transaction for LocalTransaction {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        match self.writes.get(key) {
            Some(own) => Ok(own.clone()),
            None => self.snapshot.get(key),
        }
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        if limit == 0 || range_is_empty(start, end) {
            return Ok(Vec::new());
        }
        let own: Vec<(&Vec<u8>, &Option<Vec<u8>>)> =
            self.writes.range::<[u8], _>((start, end)).collect();
        // Each own delete hides at most one stored entry; reading that many
        // more keeps `limit` entries before the first one left unread.
        let deletes = own.iter().filter(|(_, v)| v.is_none()).count();
        let stored = self
            .snapshot
            .scan(start, end, reverse, limit.saturating_add(deletes))?;
        let mut out: Vec<KeyValue> = stored
            .into_iter()
            .filter(|(k, _)| !self.writes.contains_key(k))
            .collect();
        out.extend(
            own.into_iter()
                .filter_map(|(k, v)| v.as_ref().map(|v| (k.clone(), v.clone()))),
        );
        out.sort_by(|a, b| a.0.cmp(&b.0));
        if reverse {
            out.reverse();
        }
        out.truncate(limit);
        Ok(out)
    }

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), EngineError> {
        self.write(key, Some(value))
    }

    fn delete(&mut self, key: Vec<u8>) -> Result<(), EngineError> {
        self.write(key, None)
    }

    fn commit(self: Box<Self>, durability: Durability) -> Result<(), EngineError> {
        self.commit_with(WriteBatch::default(), durability)
    }

    fn commit_with(
        self: Box<Self>,
        unchecked: WriteBatch,
        durability: Durability,
    ) -> Result<(), EngineError> {
        if self.writes.is_empty() && unchecked.is_empty() {
            return Ok(());
        }
        // Dropping `self` afterwards frees its keys, whatever the outcome.
        self.apply(unchecked, durability)
    }
}

impl Drop for LocalTransaction {
    fn drop(&mut self) {
        if self.writes.is_empty() {
            return;
        }
        let mut owners = self.table.owners.lock();
        for key in self.writes.keys() {
            if owners.get(key) == Some(&self.id) {
                owners.remove(key);
            }
        }
    }
}
