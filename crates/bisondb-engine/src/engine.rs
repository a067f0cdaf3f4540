//! The engine contract: an ordered byte-key/byte-value store with atomic write
//! batches, consistent snapshots and a durability barrier.
//!
//! Everything above these traits (catalog, documents, indexes) is written once. The
//! contract is deliberately small so that an LSM tree (fjall), the in-memory model,
//! or a remote ordered transactional store can all implement it: nothing here
//! assumes a local file, a single process, or a particular iterator lifetime.
//! Range reads return owned chunks (`scan` with a `limit`) so callers can hold an
//! `Arc<dyn Snapshot>` and re-seek, which keeps cursors `'static`.

use std::ops::Bound;
use std::sync::Arc;

use crate::error::EngineError;
use crate::txn::Transaction;

/// How durable a write must be before [`Engine::write`] returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Durability {
    /// The write is visible to later snapshots; it reaches stable storage with the
    /// engine's background flush (mongod's default `j: false` behaviour).
    #[default]
    Buffered,
    /// Return only once the write is durable (`j: true`). Engines may share one
    /// sync between concurrent writers (group commit).
    Sync,
}

/// One operation inside a [`WriteBatch`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BatchOp {
    /// Set `key` to `value`.
    Put(Vec<u8>, Vec<u8>),
    /// Set `key`, which the writer found absent (a new document's record,
    /// its `_id` entry, its index entries), to `value`. Engines of one
    /// process write it as a [`BatchOp::Put`]; an engine other writers share
    /// may take a cheaper path for keys known to be new (the postgres
    /// engine's `COPY`) and then fails the whole batch with
    /// [`EngineError::WriteConflict`] when the key exists after all (another
    /// server inserted it since the writer's snapshot), applying nothing.
    Insert(Vec<u8>, Vec<u8>),
    /// Remove `key` (no error when absent).
    Delete(Vec<u8>),
}

impl BatchOp {
    /// The key the operation writes.
    pub fn key(&self) -> &[u8] {
        match self {
            BatchOp::Put(k, _) | BatchOp::Insert(k, _) | BatchOp::Delete(k) => k,
        }
    }
}

/// A set of puts and deletes applied atomically, in insertion order (a later
/// operation on the same key wins).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WriteBatch {
    ops: Vec<BatchOp>,
}

impl WriteBatch {
    /// An empty batch.
    pub fn new() -> Self {
        WriteBatch { ops: Vec::new() }
    }

    /// An empty batch with room for `n` operations, to avoid regrowth on bulk inserts.
    pub fn with_capacity(n: usize) -> Self {
        WriteBatch {
            ops: Vec::with_capacity(n),
        }
    }

    /// Queues `key = value`.
    pub fn put(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(BatchOp::Put(key, value));
    }

    /// Queues `key = value` for a key the writer found absent (see
    /// [`BatchOp::Insert`]).
    pub fn insert(&mut self, key: Vec<u8>, value: Vec<u8>) {
        self.ops.push(BatchOp::Insert(key, value));
    }

    /// Queues the removal of `key`.
    pub fn delete(&mut self, key: Vec<u8>) {
        self.ops.push(BatchOp::Delete(key));
    }

    /// Number of queued operations.
    pub fn len(&self) -> usize {
        self.ops.len()
    }

    /// True when nothing is queued.
    pub fn is_empty(&self) -> bool {
        self.ops.is_empty()
    }

    /// The queued operations, in order.
    pub fn ops(&self) -> &[BatchOp] {
        &self.ops
    }

    /// Consumes the batch, yielding its operations in order.
    pub fn into_ops(self) -> Vec<BatchOp> {
        self.ops
    }
}

/// One key and its value, as returned by [`Snapshot::scan`].
pub type KeyValue = (Vec<u8>, Vec<u8>);

/// What an engine offers beyond the required contract, and how it must be
/// called. Each engine states its capabilities once (a constant the engine
/// table and [`Engine::capabilities`] both return).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Data survives a restart (`serverStatus`' `storageEngine.persistent`).
    pub persistent: bool,
    /// Calls may block for long: every read and write is a round trip to
    /// another process (a network store). Callers on an async runtime must
    /// run storage work on threads that may block, never on the runtime's
    /// workers. Engines in this process (memory, lsm) block only for I/O
    /// they bound themselves, and say `false`.
    pub blocking_io: bool,
    /// [`Engine::snapshot_at`] works: snapshots report their
    /// [`Snapshot::commit_point`], and a snapshot at a recent commit point can
    /// be taken again later. Without it `snapshot_at` fails with
    /// [`EngineError::Unsupported`].
    pub snapshot_at: bool,
    /// Other processes may write the same store at the same time (several
    /// servers over one network store). The layers above then keep nothing
    /// cached that another process could make stale: they read the catalog's
    /// version per command, write through transactions whose conflicts the
    /// store detects, and allocate ids from the store. Engines owned by one
    /// process say `false` and pay for none of it.
    pub shared: bool,
}

/// A position in an engine's sequence of commits: a snapshot at a commit
/// point sees every commit up to and including it, and none after. Points only
/// grow, and compare in commit order; they mean nothing across engines or
/// across restarts of an engine that does not persist them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CommitPoint(pub u64);

/// An ordered key-value store (keys compare as unsigned bytes).
pub trait Engine: Send + Sync + 'static {
    /// A short name for diagnostics and `serverStatus` (`"inMemory"`, `"lsm"`, ...).
    fn name(&self) -> &'static str;

    /// What this engine offers (see [`Capabilities`]).
    fn capabilities(&self) -> Capabilities;

    /// A consistent point-in-time view: later writes are never visible through
    /// it, and it stays readable however long it is held (cursors keep one).
    ///
    /// May fail: an engine over a network store can lose its connection, a
    /// closed engine has nothing to read. Callers propagate the error; they
    /// never substitute an empty view.
    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError>;

    /// `key`'s latest committed value, read on its own: what a snapshot taken
    /// now would give for it, without keeping a view open. For a single
    /// key checked before every command (a shared store's catalog version),
    /// where an engine over a network store answers in one round trip
    /// instead of a snapshot's begin, read and end. The default takes a
    /// snapshot.
    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.snapshot()?.get(key)
    }

    /// A snapshot that sees exactly the commits up to `point` (see
    /// [`CommitPoint`]), where the engine has the [`Capabilities::snapshot_at`]
    /// capability. An engine keeps old points for a bounded window: a point it
    /// no longer keeps fails with [`EngineError::SnapshotTooOld`], a point
    /// it has not reached yet with [`EngineError::InvalidArgument`]. Engines
    /// without the capability fail with [`EngineError::Unsupported`] (the
    /// default).
    fn snapshot_at(&self, point: CommitPoint) -> Result<Arc<dyn Snapshot>, EngineError> {
        Err(EngineError::Unsupported(format!(
            "the {} storage engine cannot read at commit point {}",
            self.name(),
            point.0
        )))
    }

    /// Applies every operation of `batch` atomically: after a crash either all of
    /// them are present or none is. An empty batch is a no-op (but still honours
    /// `Durability::Sync` as a barrier for earlier writes).
    ///
    /// A plain write takes part in no transaction and waits for none: it costs
    /// what it cost before transactions existed. A transaction whose snapshot
    /// predates a plain write to a key it also wrote fails its commit (see
    /// [`Transaction::commit`]).
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError>;

    /// Starts a read-write transaction on a snapshot taken now (see
    /// [`Transaction`] for what every engine guarantees). Engines over a
    /// transactional store map it onto the store's own transactions; engines
    /// in this process share [`crate::txn::LocalTransactions`].
    fn begin(&self) -> Result<Box<dyn Transaction>, EngineError>;

    /// Starts a read-write transaction that reads `snapshot`, one this
    /// engine gave out earlier (a read at a past point in time: mongod's
    /// `startTransaction` with `atClusterTime`). Its commit checks its keys
    /// against the state then, as every transaction's does, so a key changed
    /// after `snapshot` is a conflict. Engines that cannot fail with
    /// [`EngineError::Unsupported`] (the default).
    fn begin_on(&self, snapshot: Arc<dyn Snapshot>) -> Result<Box<dyn Transaction>, EngineError> {
        drop(snapshot);
        Err(EngineError::Unsupported(format!(
            "the {} storage engine cannot start a transaction at a past snapshot",
            self.name()
        )))
    }

    /// Durability barrier: every write that returned before this call is durable
    /// when it returns. A no-op for engines without stable storage.
    fn sync(&self) -> Result<(), EngineError>;

    /// Bytes used on stable storage (0 for memory).
    fn size_on_disk(&self) -> u64;

    /// Writes buffered data into the engine's data files (not only its log) and
    /// makes everything durable, as mongod's `fsync` command does. Engines without
    /// such a distinction just sync.
    fn checkpoint(&self) -> Result<(), EngineError> {
        self.sync()
    }

    /// [`Engine::checkpoint`], then waits until the background work that would
    /// still change the data files without new writes (flushes, compactions)
    /// has finished: `fsync` with `lock: true` calls it with writes held back,
    /// so the files can then be copied as they are. Engines without background
    /// work just checkpoint.
    fn checkpoint_and_settle(&self) -> Result<(), EngineError> {
        self.checkpoint()
    }

    /// A number that changes whenever the engine reopened its files underneath
    /// its users (after a write fault). A batch whose write reported an error
    /// may then have been applied after all, so state cached from earlier reads
    /// (document counts) must be read again. Engines that never reopen keep 0.
    fn generation(&self) -> u64 {
        0
    }

    /// Bytes written but held only in memory and the log (memtables, write
    /// buffers), not yet in the data files [`Engine::size_on_disk`] counts.
    /// Sizes reported right after a load flush first ([`Engine::checkpoint`])
    /// when this is a noticeable part of the data. 0 for engines that write
    /// their data files directly.
    fn unflushed_bytes(&self) -> u64 {
        0
    }

    /// The engine's own figures for `serverStatus.bisondb` and the metrics
    /// endpoint: journal, memory tables, tables, compaction, stalls.
    fn metrics(&self) -> Vec<EngineMetric> {
        Vec::new()
    }
}

/// One figure of an engine's [`Engine::metrics`]. `name` may be dotted
/// (`main.tables`): serverStatus nests it, the metrics endpoint joins it with `_`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineMetric {
    pub name: &'static str,
    pub value: u64,
    /// Only grows (a count of events) rather than going up and down.
    pub counter: bool,
    /// One line for the metrics endpoint's `# HELP`.
    pub help: &'static str,
}

/// A read-only, point-in-time view of an [`Engine`].
pub trait Snapshot: Send + Sync {
    /// The value stored under `key`, if any.
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError>;

    /// The values of `keys`, in their order (a key given twice is answered
    /// twice). One request where the engine is across a network (an insert
    /// batch's `_id` lookups); the default asks key by key.
    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        keys.iter().map(|k| self.get(k)).collect()
    }

    /// Up to `limit` entries with key in the range given by `start` and `end`,
    /// ascending; or descending when `reverse` (then scanning from the top of the
    /// range down). `limit == 0` returns nothing.
    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError>;

    /// The commit point this snapshot reads at, for an engine with the
    /// [`Capabilities::snapshot_at`] capability (`None` otherwise):
    /// `snapshot_at` of it reads what this snapshot reads.
    fn commit_point(&self) -> Option<CommitPoint> {
        None
    }
}

/// The smallest key strictly greater than every key that starts with `prefix`,
/// or `None` when no such key exists (the prefix is all `0xFF`). Used to turn
/// "all keys with this prefix" into a half-open range.
pub fn prefix_successor(prefix: &[u8]) -> Option<Vec<u8>> {
    let mut out = prefix.to_vec();
    while let Some(last) = out.pop() {
        if last != 0xFF {
            out.push(last.wrapping_add(1));
            return Some(out);
        }
    }
    None
}

/// True when no key can satisfy both bounds; ordered-map range APIs panic on an
/// inverted range, and callers may legitimately ask for one (e.g. `$gt: 5, $lt: 3`).
pub fn range_is_empty(start: Bound<&[u8]>, end: Bound<&[u8]>) -> bool {
    match (start, end) {
        (Bound::Included(s), Bound::Included(e)) => s > e,
        (Bound::Included(s), Bound::Excluded(e))
        | (Bound::Excluded(s), Bound::Included(e))
        | (Bound::Excluded(s), Bound::Excluded(e)) => s >= e,
        _ => false,
    }
}

/// `b` with its key copied: ordered-map ranges take owned bounds of their key type.
pub fn owned_bound(b: Bound<&[u8]>) -> Bound<Vec<u8>> {
    match b {
        Bound::Included(k) => Bound::Included(k.to_vec()),
        Bound::Excluded(k) => Bound::Excluded(k.to_vec()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn inverted_ranges_are_empty() {
        type Case<'a> = (Bound<&'a [u8]>, Bound<&'a [u8]>, bool);
        let cases: &[Case<'_>] = &[
            (Bound::Included(b"b"), Bound::Excluded(b"a"), true),
            (Bound::Included(b"a"), Bound::Excluded(b"a"), true),
            (Bound::Included(b"a"), Bound::Included(b"a"), false),
            (Bound::Excluded(b"a"), Bound::Included(b"a"), true),
            (Bound::Unbounded, Bound::Excluded(b"a"), false),
        ];
        for (s, e, want) in cases {
            assert_eq!(range_is_empty(*s, *e), *want, "{s:?} {e:?}");
        }
    }

    #[test]
    fn prefix_successor_table() {
        let cases: &[(&[u8], Option<&[u8]>)] = &[
            (b"", None),
            (&[0x01], Some(&[0x02])),
            (&[0x01, 0xFF], Some(&[0x02])),
            (&[0xFF, 0xFF], None),
            (&[0x00, 0x05, 0xFF, 0xFF], Some(&[0x00, 0x06])),
        ];
        for (input, want) in cases {
            assert_eq!(prefix_successor(input).as_deref(), *want, "input {input:?}");
        }
    }

    #[test]
    fn batch_records_ops_in_order() {
        let mut b = WriteBatch::new();
        assert!(b.is_empty());
        b.put(b"a".to_vec(), b"1".to_vec());
        b.delete(b"a".to_vec());
        assert_eq!(b.len(), 2);
        assert_eq!(b.ops()[1], BatchOp::Delete(b"a".to_vec()));
    }
}
