//! The persistent engine (`--storageEngine lsm`, the default): an LSM tree from the
//! `fjall` crate (pure Rust, LZ4-compressed data blocks) behind [`Engine`].
//!
//! Files: the dbpath holds `mongod.lock` and `storage.bson` (see [`crate::dbpath`])
//! and a `lsm/` directory that belongs to fjall (its journal and table files).
//!
//! Two fjall keyspaces share one journal: `index` holds the regions of the key
//! space that are written out of order (collection stats and secondary-index
//! entries, in the store's layout) and `main` everything else. The engine
//! knows nothing of the layout: the store names those regions, by their
//! first byte, when it opens the engine ([`KeyRegions`]). Documents
//! arrive in `_id` order (ObjectIds grow), so their tables append and need no
//! rewriting, while index keys land all over their range and every write rewrites
//! its collection's stats record; kept together, every flushed table would
//! overlap every older one and compaction would rewrite the documents with them. A
//! batch spanning both keyspaces is still one atomic journal entry, and scans
//! read the region's keyspace in its place in key order, so the split is
//! invisible behind [`Engine`].
//!
//! Index entries do not go into fjall one by one: each batch's index-region
//! operations are journaled as one value and kept in memory as a sorted run
//! that reads merge in, until a background thread ingests the runs into index
//! tables in bulk (see `lsm/buffer.rs` for the protocol and why it is safe).
//!
//! Durability follows mongod: every commit reaches the operating system at once
//! (so a killed process loses nothing), and the journal is fsynced in the
//! background at least every `journal_commit_interval` (so a power loss loses at
//! most that window). [`Durability::Sync`] writes wait for an fsync that started
//! after they committed; concurrent waiters share one fsync (group commit): one
//! caller becomes the leader and syncs, the others sleep until a sync that covers
//! them has finished.
//!
//! Memtables are rotated by the commit that would fill them ([`Open::commit`]),
//! never by fjall's own rotation requests, which could deadlock its worker.
//!
//! Faults: fjall refuses every write after a failed journal write or fsync (its
//! "poisoned" state), because the journal tail is then unknown. Reads keep working
//! from memory and the table files. The background thread then waits until the
//! disk accepts a probe write again and no snapshot holds the old instance, and
//! reopens the files: fjall's recovery cuts the journal back to its last whole
//! batch, so nothing acknowledged is lost and writes work again.

use std::io::Write;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use fjall::config::{BlockSizePolicy, CompressionPolicy, FilterPolicy, RestartIntervalPolicy};
use fjall::{
    AbstractTree, CompressionType, Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable,
};
use parking_lot::RwLock;

use bisondb_engine::txn::{LocalTransactions, Transaction, TxnStore};
use bisondb_engine::{
    range_is_empty, BatchOp, Capabilities, Durability, Engine, EngineError, EngineMetric, KeyValue,
    Snapshot, WriteBatch,
};

use crate::dbpath::{self, DbPathLock};

mod buffer;
use buffer::{Merged, Run};
mod long;

/// The engine name recorded in the dbpath and reported by [`Engine::name`].
pub const ENGINE_NAME: &str = "lsm";

/// mongod's default `storage.journal.commitIntervalMs`.
pub const DEFAULT_JOURNAL_COMMIT_INTERVAL: Duration = Duration::from_millis(100);

/// The range mongod accepts for `--journalCommitInterval`, in milliseconds.
pub const JOURNAL_COMMIT_INTERVAL_RANGE_MS: std::ops::RangeInclusive<u64> = 1..=500;

/// Sub-directory of the dbpath that fjall owns.
const DATA_DIR: &str = "lsm";

/// The fjall keyspace holding the rest of the key space (documents, catalog, ...).
const KEYSPACE: &str = "main";

/// The fjall keyspace holding the regions kept apart ([`KeyRegions::apart`]).
const INDEX_KEYSPACE: &str = "index";

/// The fjall keyspace journaling the index write buffer's runs (see [`buffer`]).
const BUFFER_KEYSPACE: &str = "ixbuf";

/// Memtable size of the buffer keyspace: its blobs are deleted once ingested,
/// so a memtable larger than the buffer rarely writes them into tables at all.
const BUFFER_MEMTABLE_BYTES: u64 = 128 << 20;

/// Default [`LsmOptions::index_buffer_bytes`]: ingesting 64 MiB of index
/// entries at a time adds as much to level 0 per ingestion as four 16 MiB
/// memtable flushes did, so compaction works as before.
pub const DEFAULT_INDEX_BUFFER_BYTES: usize = 64 << 20;

/// Level-0 tables of the main keyspace before they are merged down (fjall's
/// default is 4). One client's increasing `_id`s flush tables that overlap no
/// other and move down untouched, but two client processes interleave theirs
/// (each ObjectId carries its process's bytes), so consecutive tables overlap
/// where one second's keys of both meet, level 0 is never disjoint, and each
/// merge also rewrites the newest table of the level below. Merging 16 at a time
/// rewrites that table a quarter as often: with two `timeseries-batch`
/// processes on 10M documents the fjall worker used 0.99 instead of 1.28 µs per
/// document and the load ran at 725,916 instead of 579,141 docs/s; one process
/// was unchanged (562,959 vs 564,512), and seed 003's aggregations over 4M such
/// documents took 0-7% longer (more level-0 tables to merge while reading).
/// fjall stores these options when it creates the keyspace, so dbpaths created
/// before keep theirs.
const MAIN_L0_TABLES: u8 = 16;

/// `checkpoint_and_settle`: how many looks 10 ms apart must find fjall's
/// worker idle, and how long to wait for that at most (a long compaction is
/// left running rather than holding `fsync` for minutes).
const SETTLE_LOOKS: u32 = 5;
const SETTLE_AT_MOST: Duration = Duration::from_secs(60);

/// Memtable size of the main keyspace: fjall's default (64 MiB), which every
/// main keyspace was created with before it was named here.
const MAIN_MEMTABLE_BYTES: u64 = 64 << 20;

/// Memtable size of the index keyspace. Chosen (16 MiB, a quarter of fjall's
/// default) when index entries went through it in random order, to make each
/// skiplist search cheaper; since the index write buffer only the stats records
/// do (index entries arrive by ingestion), so the size now matters little.
/// fjall stores these options when it creates the keyspace, so dbpaths created
/// before keep theirs.
const INDEX_MEMTABLE_BYTES: u64 = 16 << 20;

/// Level-0 tables of the index keyspace before they are merged down (fjall
/// slows writers from 20 level-0 tables on, so this stays below that). Each
/// ingestion of the index write buffer adds one run of up to 64 MiB, so about
/// 1 GiB of index entries accumulates before the first merge; reads merge those
/// runs meanwhile (seed 003's one-day count over 10M documents, 8 runs, took
/// the same 15 ms as before the buffer).
const INDEX_L0_TABLES: u8 = 16;

/// The memtable size of each keyspace (see [`LsmOptions::memtable_bytes`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct MemtableSizes {
    main: u64,
    index: u64,
    buffer: u64,
}

impl MemtableSizes {
    fn of(options: &LsmOptions) -> MemtableSizes {
        match options.memtable_bytes {
            Some(n) => MemtableSizes {
                main: n,
                index: n,
                buffer: n,
            },
            None => MemtableSizes {
                main: MAIN_MEMTABLE_BYTES,
                index: INDEX_MEMTABLE_BYTES,
                buffer: BUFFER_MEMTABLE_BYTES,
            },
        }
    }
}

/// Entries moved per batch when an older dbpath's regions kept apart are moved into
/// the index keyspace on open.
const MIGRATE_CHUNK: usize = 4096;

/// Data block size. LZ4 only finds repeats inside one block, and documents of a
/// collection repeat their field names: measured on 1,000,000 documents, 32 KiB
/// blocks store the seed-000 profile document in 20 B instead of 44 B (4 KiB,
/// fjall's default) and the seed-003 time-series document in 27 B instead of
/// 30 B, at no measurable cost to batch inserts. Point reads decompress a whole
/// block, but inserts of new `_id`s are answered first by `store::key_bounds`
/// or the `_id` index's bloom filter (the main keyspace has none, see
/// [`main_filter_policy`]).
const DATA_BLOCK_BYTES: u32 = 32 * 1024;

/// Keys between full (not prefix-truncated) keys inside a data block; keys of a
/// collection share their collection-id prefix, so sparse restarts save space.
const RESTART_INTERVAL: u8 = 32;

/// Bytes written (and removed) to check that the disk takes writes again before
/// reopening after a failure; a reopen itself writes a little.
const PROBE_BYTES: usize = 1 << 20;

/// What the engine is told about the key space it stores: regions named by
/// the first byte of their keys. They decide only where keys are kept, never
/// what a read returns; but a dbpath must always be opened with the regions
/// it was written with (the store passes its layout's, always the same).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRegions {
    /// Keys written out of order (each collection's stats record, index
    /// entries), kept in a keyspace of their own so that document tables
    /// written in key order overlap no other.
    pub apart: std::ops::Range<u8>,
    /// Keys written only through the index write buffer (see `lsm/buffer.rs`); a
    /// region inside `apart`. Nothing else may write it directly.
    pub buffered: Option<u8>,
}

impl KeyRegions {
    /// No region kept apart and no write buffer: one keyspace for everything.
    pub const NONE: KeyRegions = KeyRegions {
        apart: 0..0,
        buffered: None,
    };

    fn check(&self) -> Result<(), EngineError> {
        match self.buffered {
            Some(b) if !self.apart.contains(&b) => Err(EngineError::InvalidArgument(format!(
                "the buffered key region {b:#04x} lies outside the regions kept apart {:?}",
                self.apart
            ))),
            _ => Ok(()),
        }
    }

    fn is_apart(&self, key: &[u8]) -> bool {
        key.first().is_some_and(|r| self.apart.contains(r))
    }
}

/// Settings of an [`LsmEngine`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LsmOptions {
    /// How often buffered writes are synced to disk at the latest.
    pub journal_commit_interval: Duration,
    /// Bytes of buffered index entries that start an ingestion into index
    /// tables; at twice this, writers ingest themselves rather than wait.
    pub index_buffer_bytes: usize,
    /// The key regions the store lays out ([`KeyRegions::NONE`] by default;
    /// the store passes its own, see `bisondb_storage::store_lsm_options`).
    pub regions: KeyRegions,
    /// The memtable size of every keyspace, in place of the defaults, when
    /// the dbpath is created (tests use a few KiB, so that memtables rotate
    /// all the time). fjall keeps the size its keyspaces were created with, so
    /// a dbpath must always be opened with the value it was created with.
    pub memtable_bytes: Option<u64>,
}

impl Default for LsmOptions {
    fn default() -> Self {
        LsmOptions {
            journal_commit_interval: DEFAULT_JOURNAL_COMMIT_INTERVAL,
            index_buffer_bytes: DEFAULT_INDEX_BUFFER_BYTES,
            regions: KeyRegions::NONE,
            memtable_bytes: None,
        }
    }
}

impl LsmOptions {
    /// Options with `--journalCommitInterval ms`; mongod accepts 1 to 500.
    pub fn with_journal_commit_interval_ms(ms: u64) -> Result<LsmOptions, EngineError> {
        if !JOURNAL_COMMIT_INTERVAL_RANGE_MS.contains(&ms) {
            return Err(EngineError::InvalidArgument(format!(
                "journalCommitInterval must be between 1 and 500 milliseconds, got {ms}"
            )));
        }
        Ok(LsmOptions {
            journal_commit_interval: Duration::from_millis(ms),
            ..LsmOptions::default()
        })
    }
}

/// An open fjall instance. Snapshots hold it, so it outlives a reopen until the
/// last reader lets go.
struct Open {
    db: Database,
    ks: Keyspace,
    /// The regions kept apart (see the module docs).
    ix: Keyspace,
    /// The journaled blobs of the index write buffer.
    wb: Keyspace,
    /// The index write buffer's runs.
    buffer: IndexBuffer,
    /// Which keys live in `ix` and which go through the buffer.
    regions: KeyRegions,
    /// The memtable sizes the keyspaces were created with: where
    /// [`Open::commit`] rotates them.
    memtables: MemtableSizes,
    /// Held by [`Open::commit`] from its look at the memtables to its
    /// commit, so no other batch fills a memtable in between.
    commit_turn: parking_lot::Mutex<()>,
    /// Whether a long key (see `lsm/long.rs`) may be stored: set before the
    /// first batch writing one commits, and on open when the files hold one.
    /// Until then reads do not look for them.
    has_long: AtomicBool,
}

/// One of the three keyspaces of an [`Open`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Space {
    Main = 0,
    Index = 1,
    Buffer = 2,
}

impl Space {
    const ALL: [Space; 3] = [Space::Main, Space::Index, Space::Buffer];
}

/// Bytes fjall counts for an entry in a memtable beyond its key and value (its
/// `size_of::<InternalValue>()`, under 64 bytes in lsm-tree 3.1); overstated
/// here, so that a batch is never taken for smaller than fjall counts it.
const MEMTABLE_ENTRY_OVERHEAD: u64 = 128;

/// A write batch on its way to fjall, with the bytes it adds to each
/// keyspace's memtable (see [`Open::commit`]).
struct Batch {
    b: fjall::OwnedWriteBatch,
    adds: [u64; 3],
}

impl Batch {
    fn new(open: &Open) -> Batch {
        Batch {
            b: open.db.batch(),
            adds: [0; 3],
        }
    }

    /// A batch with room for `items` operations: grown by doubling instead,
    /// a load's batch of thousands of documents reallocated and copied its
    /// items a dozen times (290 instructions a document on `timeseries-batch`).
    /// Its durability is what [`Database::batch`] sets (the journal written
    /// to the operating system at commit), which `with_capacity` leaves out:
    /// without it a killed process lost acknowledged writes (the crash tests
    /// caught it).
    fn with_capacity(open: &Open, items: usize) -> Batch {
        Batch {
            b: fjall::OwnedWriteBatch::with_capacity(open.db.clone(), items)
                .durability(Some(PersistMode::Buffer)),
            adds: [0; 3],
        }
    }

    fn count(&mut self, space: Space, key: usize, value: usize) {
        let bytes = (key as u64)
            .saturating_add(value as u64)
            .saturating_add(MEMTABLE_ENTRY_OVERHEAD);
        let slot = &mut self.adds[space as usize];
        *slot = slot.saturating_add(bytes);
    }

    fn insert(&mut self, open: &Open, space: Space, key: fjall::Slice, value: fjall::Slice) {
        self.count(space, key.len(), value.len());
        self.b.insert(open.keyspace(space), key, value);
    }

    fn remove(&mut self, open: &Open, space: Space, key: fjall::Slice) {
        self.count(space, key.len(), 0);
        self.b.remove(open.keyspace(space), key);
    }
}

/// What the index write buffer holds, under one mutex that commits with index
/// operations and snapshot creation take, so a snapshot sees a batch's
/// documents and its run together or neither.
#[derive(Default)]
struct BufferState {
    /// Oldest first; shared with the snapshots that captured it.
    runs: Arc<Vec<Arc<Run>>>,
    /// Sequence number of the next run's blob.
    next_seq: u64,
    /// Encoded bytes in `runs`.
    bytes: usize,
}

#[derive(Default)]
struct IndexBuffer {
    state: parking_lot::Mutex<BufferState>,
    /// Held while runs are merged or ingested: only its holder removes or
    /// replaces runs (commits only append), so positions in the list stay put.
    maintain: parking_lot::Mutex<()>,
}

/// The key of part `part` of run `seq`'s blob.
fn blob_key(seq: u64, part: u32) -> [u8; 12] {
    let mut k = [0u8; 12];
    k[..8].copy_from_slice(&seq.to_be_bytes());
    k[8..].copy_from_slice(&part.to_be_bytes());
    k
}

/// A part of the key space: `[lower, upper)` and the keyspace holding it.
type Segment<'a> = (Bound<Vec<u8>>, Bound<Vec<u8>>, &'a Keyspace);

impl Open {
    /// Records that long keys may be stored from now on (before they are).
    fn note_long(&self) {
        self.has_long.store(true, Ordering::SeqCst);
    }

    fn may_hold_long(&self) -> bool {
        self.has_long.load(Ordering::SeqCst)
    }

    /// The keyspace that stores `key` (an unprefixed engine key).
    fn keyspace_for(&self, key: &[u8]) -> &Keyspace {
        self.keyspace(self.space_for(key))
    }

    fn space_for(&self, key: &[u8]) -> Space {
        if self.regions.is_apart(key) {
            Space::Index
        } else {
            Space::Main
        }
    }

    fn keyspace(&self, space: Space) -> &Keyspace {
        match space {
            Space::Main => &self.ks,
            Space::Index => &self.ix,
            Space::Buffer => &self.wb,
        }
    }

    fn memtable_limit(&self, space: Space) -> u64 {
        match space {
            Space::Main => self.memtables.main,
            Space::Index => self.memtables.index,
            Space::Buffer => self.memtables.buffer,
        }
    }

    /// Commits `batch`, first rotating every memtable it would carry past the
    /// size fjall rotates at, so that fjall itself never has to.
    ///
    /// fjall 3.1 asks its worker for a rotation from every commit that leaves
    /// a memtable past its size (`Keyspace::check_memtable_rotate` ->
    /// `request_rotation`, a `try_send` into the worker's queue of 1,000
    /// messages), until the worker gets to the first request. A flood of
    /// commits fills the queue while the worker flushes or compacts; the
    /// worker then takes a request, rotates, and blocks in
    /// `inner_rotate_memtable` sending itself the `Flush` message into its own
    /// queue, whose one free slot a writer took meanwhile. Nothing drains the
    /// queue again: flushes stop, writers halt behind four sealed memtables,
    /// and every later rotation (the index buffer's ingestion, a checkpoint,
    /// closing) blocks on the same send (issue 20, finding 3).
    ///
    /// Here one commit at a time looks at the memtables it writes and rotates
    /// those the batch would carry past their size (the rotation's `Flush`
    /// goes out from this thread, never from the worker), so a memtable is
    /// past its size after a commit only when that one batch is larger than a
    /// whole memtable: each such batch sends one request, and fjall's own
    /// stall at four sealed memtables bounds how many there can be. The
    /// worker's queue then holds a few messages, never 1,000. Commits were
    /// already one at a time in fjall (its journal lock), so the turn costs
    /// one lock.
    ///
    /// This reads fjall's hidden `Keyspace::tree` (the active memtable's size)
    /// and calls its hidden `rotate_memtable`: an upgrade of fjall must check
    /// both still exist, and whether its queue still floods (the fix upstream
    /// is fjall-rs/fjall#323, unreleased as of fjall 3.1.13).
    fn commit(&self, batch: Batch) -> Result<(), fjall::Error> {
        let _turn = self.commit_turn.lock();
        for space in Space::ALL {
            let adds = batch.adds[space as usize];
            if adds == 0 {
                continue;
            }
            let ks = self.keyspace(space);
            let active = ks.tree.active_memtable().size();
            if active > 0 && active.saturating_add(adds) > self.memtable_limit(space) {
                ks.rotate_memtable()?;
            }
        }
        batch.b.commit()
    }

    /// The keyspaces, for whole-database maintenance.
    fn keyspaces(&self) -> [&Keyspace; 3] {
        [&self.ks, &self.ix, &self.wb]
    }

    /// The runs and their size, as of now.
    fn buffered(&self) -> (Arc<Vec<Arc<Run>>>, usize) {
        let st = self.buffer.state.lock();
        (st.runs.clone(), st.bytes)
    }

    /// Ingests every run buffered now into index tables, deletes their blobs
    /// and drops them from the list, in that order (see [`buffer`]).
    fn flush_buffer(&self) -> Result<(), EngineError> {
        self.flush_buffer_from(1)
    }

    /// [`Open::flush_buffer`] if the runs still hold at least `min_bytes` once
    /// this caller's turn comes (writers that all found the buffer full must
    /// not ingest one after another).
    fn flush_buffer_from(&self, min_bytes: usize) -> Result<(), EngineError> {
        let _maintain = self.buffer.maintain.lock();
        let (runs, bytes) = self.buffered();
        if bytes < min_bytes {
            return Ok(());
        }
        let Some(max_seq) = runs.iter().map(|r| r.max_seq).max() else {
            return Ok(());
        };
        let mut ingest = self
            .ix
            .start_ingestion()
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        // Ingestion takes stored keys in order, and every long key's comes
        // after every short one's (see `lsm/long.rs`).
        let mut long_ops: Vec<(Vec<u8>, Option<Vec<u8>>)> = Vec::new();
        for (k, v) in buffer::all_in_key_order(&runs) {
            if long::is_long(k) {
                let value = v.map(|v| long::stored_value(k, v)).transpose()?;
                long_ops.push((long::stored_key(k), value));
                continue;
            }
            let key = stored_key(k)?;
            match v {
                Some(v) => ingest.write(key, v),
                None => ingest.write_tombstone(key),
            }
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        }
        long_ops.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        for (k, v) in long_ops {
            match v {
                Some(v) => ingest.write(k, v),
                None => ingest.write_tombstone(k),
            }
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        }
        ingest
            .finish()
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        let end = blob_key(max_seq.saturating_add(1), 0);
        let mut b = Batch::new(self);
        for guard in self.wb.range::<&[u8], _>(..&end[..]) {
            let k = guard.key().map_err(|e| map_fjall(e, "index ingestion"))?;
            b.remove(self, Space::Buffer, k);
        }
        self.commit(b)
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        // Flushing the blobs' memtable now, while nearly all of it is deleted,
        // writes little more than tombstones and lets fjall drop the journals
        // holding them; later it would write live blobs into tables, dead soon after.
        self.wb
            .rotate_memtable()
            .map_err(|e| map_fjall(e, "index ingestion"))?;
        let mut st = self.buffer.state.lock();
        let removed: usize = runs.iter().map(|r| r.bytes()).sum();
        let list = Arc::make_mut(&mut st.runs);
        list.drain(..runs.len().min(list.len()));
        st.bytes = st.bytes.saturating_sub(removed);
        Ok(())
    }

    /// Merges one group of runs of a size class, if there is one; true when
    /// it did (the caller loops).
    fn merge_runs(&self) -> Result<bool, EngineError> {
        let _maintain = self.buffer.maintain.lock();
        let (runs, _) = self.buffered();
        let Some(group) = buffer::mergeable(&runs) else {
            return Ok(false);
        };
        let parts = runs.get(group.clone()).unwrap_or_default();
        let level = parts.first().map_or(0, |r| r.level.saturating_add(1));
        let merged = Arc::new(buffer::merge(parts, level)?);
        let mut st = self.buffer.state.lock();
        // Only the maintainer removes runs, so the group is where it was.
        let still = st
            .runs
            .get(group.clone())
            .is_some_and(|now| now.iter().zip(parts).all(|(a, b)| Arc::ptr_eq(a, b)));
        if !still {
            return Err(EngineError::Internal(
                "index write buffer runs moved during a merge".into(),
            ));
        }
        let before: usize = parts.iter().map(|r| r.bytes()).sum();
        st.bytes = st
            .bytes
            .saturating_sub(before)
            .saturating_add(merged.bytes());
        let list = Arc::make_mut(&mut st.runs);
        list.splice(group, [merged]);
        Ok(true)
    }

    /// Loads the blobs a crash left behind back into runs (the caller ingests them).
    fn recover_buffer(&self) -> Result<usize, EngineError> {
        let mut runs: Vec<Arc<Run>> = Vec::new();
        let mut parts: Vec<fjall::Slice> = Vec::new();
        let mut current: Option<u64> = None;
        let finish = |seq: u64, parts: &mut Vec<fjall::Slice>, runs: &mut Vec<Arc<Run>>| {
            let slices: Vec<&[u8]> = parts.iter().map(|p| &p[..]).collect();
            let run = buffer::decode_run(&slices, seq)?;
            parts.clear();
            runs.push(Arc::new(run));
            Ok::<(), EngineError>(())
        };
        for guard in self.wb.iter() {
            let (k, v) = guard
                .into_inner()
                .map_err(|e| map_fjall(e, "index buffer recovery"))?;
            let seq = k
                .get(..8)
                .and_then(|b| <[u8; 8]>::try_from(b).ok())
                .map(u64::from_be_bytes)
                .ok_or_else(|| EngineError::Corrupt(format!("bad index buffer key {k:?}")))?;
            if let Some(prev) = current.filter(|&p| p != seq) {
                finish(prev, &mut parts, &mut runs)?;
            }
            current = Some(seq);
            parts.push(v);
        }
        if let Some(prev) = current {
            finish(prev, &mut parts, &mut runs)?;
        }
        let n = runs.len();
        let mut st = self.buffer.state.lock();
        st.next_seq = runs.iter().map(|r| r.max_seq + 1).max().unwrap_or(0);
        st.bytes = runs.iter().map(|r| r.bytes()).sum();
        st.runs = Arc::new(runs);
        Ok(n)
    }

    /// Writes every memtable into tables and waits for fjall's worker to finish.
    /// Not `rotate_memtable_and_wait`: a failed flush makes fjall refuse writes
    /// and its worker exit, and that call would then wait forever for a queue
    /// nobody drains (a shutdown hung that way); here the refusal ends the wait.
    fn flush_memtables(&self) -> Result<(), EngineError> {
        for ks in self.keyspaces() {
            ks.rotate_memtable().map_err(|e| map_fjall(e, "flush"))?;
        }
        while self
            .keyspaces()
            .iter()
            .any(|ks| ks.sealed_memtable_count() > 0)
        {
            self.db
                .persist(PersistMode::Buffer)
                .map_err(|e| map_fjall(e, "flush"))?;
            std::thread::sleep(Duration::from_millis(2));
        }
        Ok(())
    }

    /// The parts of the key space in key order, each with its keyspace:
    /// below the regions kept apart, those regions, above them.
    fn segments(&self) -> [Segment<'_>; 3] {
        let (lo, hi) = (vec![self.regions.apart.start], vec![self.regions.apart.end]);
        [
            (Bound::Unbounded, Bound::Excluded(lo.clone()), &self.ks),
            (Bound::Included(lo), Bound::Excluded(hi.clone()), &self.ix),
            (Bound::Included(hi), Bound::Unbounded, &self.ks),
        ]
    }
}

/// Group-commit bookkeeping, under one mutex.
#[derive(Default)]
struct SyncState {
    /// Number of syncs started so far; the one running (if any) has this number.
    started: u64,
    /// Number of syncs finished (successfully or not).
    finished: u64,
    /// Number of the last sync that succeeded.
    last_ok: u64,
    running: bool,
    last_error: Option<EngineError>,
}

struct Shared {
    dbpath: PathBuf,
    data_dir: PathBuf,
    open: RwLock<Option<Arc<Open>>>,
    /// Set when fjall refused a write; the flusher then reopens the files.
    failed: AtomicBool,
    /// The error that started the failure, so later refusals say what happened.
    failure: parking_lot::Mutex<Option<EngineError>>,
    /// Incremented on every reopen after a failure.
    generation: AtomicU64,
    /// Batches committed so far.
    commits: AtomicU64,
    /// Journal fsyncs done (serverStatus `bisondb.journal.syncs`).
    syncs: AtomicU64,
    /// Writes that found the index write buffer at twice its size and
    /// ingested it themselves (`bisondb.indexBuffer.writeStalls`).
    buffer_stalls: AtomicU64,
    /// `commits` as read at the start of the last successful sync: every batch up
    /// to that count is durable.
    durable_commits: AtomicU64,
    sync: Mutex<SyncState>,
    sync_done: Condvar,
    stop: Mutex<bool>,
    stop_signal: Condvar,
    lock: Arc<DbPathLock>,
    /// [`LsmOptions::index_buffer_bytes`].
    index_buffer_bytes: usize,
    /// [`LsmOptions::regions`], for reopening.
    regions: KeyRegions,
    /// [`LsmOptions::memtable_bytes`], for reopening.
    memtables: MemtableSizes,
    /// Wakes the index buffer's maintainer: (work is due, stop).
    maintainer_signal: parking_lot::Mutex<(bool, bool)>,
    maintainer_wake: parking_lot::Condvar,
}

/// The persistent [`Engine`].
pub struct LsmEngine {
    shared: Arc<Shared>,
    /// Transactions, through the layer the in-process engines share.
    txns: Arc<LocalTransactions>,
    flusher: parking_lot::Mutex<Option<JoinHandle<()>>>,
    maintainer: parking_lot::Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for LsmEngine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LsmEngine")
            .field("dbpath", &self.shared.dbpath)
            .finish_non_exhaustive()
    }
}

impl LsmEngine {
    /// What the engine offers: its data survives restarts. No snapshots at a
    /// commit point: fjall 3 opens snapshots only at the current instant (a
    /// snapshot's sequence number is a hidden API, and old versions are kept
    /// only for snapshots open at the time), and the index write buffer's runs
    /// would need versions of their own; `snapshot_at` is refused.
    pub const CAPABILITIES: Capabilities = Capabilities {
        persistent: true,
        blocking_io: false,
        snapshot_at: false,
        shared: false,
    };

    /// Opens (creating if needed) the engine in `dbpath`: takes the dbpath lock,
    /// checks the recorded engine, recovers the journal, and starts the background
    /// journal flusher.
    pub fn open(dbpath: &Path, options: LsmOptions) -> Result<LsmEngine, EngineError> {
        options.regions.check()?;
        let lock = Arc::new(dbpath::claim(dbpath, ENGINE_NAME)?);
        let data_dir = dbpath.join(DATA_DIR);
        let memtables = MemtableSizes::of(&options);
        let open = open_fjall(&data_dir, dbpath, &options.regions, memtables)?;
        let shared = Arc::new(Shared {
            dbpath: dbpath.to_path_buf(),
            data_dir,
            open: RwLock::new(Some(Arc::new(open))),
            failed: AtomicBool::new(false),
            failure: parking_lot::Mutex::new(None),
            generation: AtomicU64::new(0),
            commits: AtomicU64::new(0),
            syncs: AtomicU64::new(0),
            buffer_stalls: AtomicU64::new(0),
            durable_commits: AtomicU64::new(0),
            sync: Mutex::new(SyncState::default()),
            sync_done: Condvar::new(),
            stop: Mutex::new(false),
            stop_signal: Condvar::new(),
            lock,
            index_buffer_bytes: options.index_buffer_bytes.max(1),
            regions: options.regions.clone(),
            memtables,
            maintainer_signal: parking_lot::Mutex::new((false, false)),
            maintainer_wake: parking_lot::Condvar::new(),
        });
        let interval = options
            .journal_commit_interval
            .max(Duration::from_millis(1));
        let worker = shared.clone();
        let flusher = std::thread::Builder::new()
            .name("bisondb-journal".into())
            .spawn(move || worker.run_flusher(interval))
            .map_err(|e| EngineError::Io(format!("cannot start the journal flusher: {e}")))?;
        let worker = shared.clone();
        let maintainer = std::thread::Builder::new()
            .name("bisondb-ixbuf".into())
            .spawn(move || worker.run_maintainer())
            .map_err(|e| {
                EngineError::Io(format!("cannot start the index buffer maintainer: {e}"))
            })?;
        tracing::info!(dbpath = %dbpath.display(), "lsm storage engine opened");
        Ok(LsmEngine {
            shared,
            txns: LocalTransactions::new(),
            flusher: parking_lot::Mutex::new(Some(flusher)),
            maintainer: parking_lot::Mutex::new(Some(maintainer)),
        })
    }

    /// The engine behind the `Arc<dyn Engine>` that `Storage::open` takes.
    pub fn open_shared(dbpath: &Path, options: LsmOptions) -> Result<Arc<dyn Engine>, EngineError> {
        Ok(Arc::new(LsmEngine::open(dbpath, options)?))
    }

    /// The dbpath this engine owns.
    pub fn dbpath(&self) -> &Path {
        self.shared.lock.dbpath()
    }

    /// How many times the engine reopened its files after a write failure.
    pub fn recoveries(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// Stops the background flusher, syncs everything and releases the files (once
    /// no snapshot holds them any more). Later writes fail; idempotent.
    pub fn close(&self) -> Result<(), EngineError> {
        self.stop_maintainer();
        self.stop_flusher();
        // The journal first: whatever becomes of the flush below, every
        // acknowledged write is then on disk and the next open replays it.
        let synced = match self.shared.open.read().is_some() {
            true if !self.shared.failed.load(Ordering::Acquire) => self.shared.sync_all_now(),
            _ => Ok(()),
        };
        // Ingesting what the index buffer holds, then writing every memtable
        // into tables, lets the next open skip replaying the journal.
        let flushed = match self.shared.open.read().clone() {
            Some(open) if !self.shared.failed.load(Ordering::Acquire) => {
                flush_within(open, CLOSE_FLUSH_LIMIT)
            }
            _ => Ok(Flushed::Abandoned),
        };
        let all_flushed = matches!(flushed, Ok(Flushed::All));
        let result = synced
            .and(flushed.map(|_| ()))
            .and(self.shared.sync_all_now());
        // Dropping the last handle on the fjall instance joins its workers; a
        // snapshot still alive defers that to its own drop.
        let taken = self.shared.open.write().take();
        if let Some(open) = taken {
            // Only with every handle gone is the journal closed for good; a
            // snapshot still alive keeps the instance (and its journal) open.
            let last = Arc::try_unwrap(open).ok();
            let alone = last.is_some();
            drop(last);
            if alone && result.is_ok() && all_flushed {
                if let Err(e) = empty_journals(&self.shared.data_dir) {
                    tracing::warn!(error = %e, "lsm storage engine: could not empty the journal after a clean close");
                }
            }
            tracing::info!(dbpath = %self.shared.dbpath.display(), "lsm storage engine closed");
        }
        result
    }

    fn stop_maintainer(&self) {
        self.shared.maintainer_signal.lock().1 = true;
        self.shared.maintainer_wake.notify_all();
        if let Some(handle) = self.maintainer.lock().take() {
            if handle.join().is_err() {
                tracing::error!("the index buffer maintainer thread panicked");
            }
        }
    }

    fn stop_flusher(&self) {
        if let Ok(mut stop) = self.shared.stop.lock() {
            *stop = true;
        }
        self.shared.stop_signal.notify_all();
        if let Some(handle) = self.flusher.lock().take() {
            if handle.join().is_err() {
                tracing::error!("the journal flusher thread panicked");
            }
        }
    }

    /// Flushes memtables and compacts everything into one sorted run, so a
    /// measurement of the size on disk sees the engine settled.
    pub fn settle(&self) -> Result<(), EngineError> {
        let open = self.shared.current()?;
        open.flush_buffer()?;
        open.flush_memtables()?;
        for ks in open.keyspaces() {
            ks.major_compact().map_err(|e| map_fjall(e, "compaction"))?;
        }
        self.shared.sync_all_now()
    }
}

impl Drop for LsmEngine {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(error = %e, "lsm storage engine did not close cleanly");
        }
    }
}

/// How long closing waits for the final flush before leaving the memtables to
/// the journal (see [`flush_within`]).
const CLOSE_FLUSH_LIMIT: Duration = Duration::from_secs(20);

/// Flushes the index buffer and the memtables into tables on a thread of its
/// own, waiting at most `limit`.
///
/// fjall 3.1's worker could deadlock on its own queue (see [`Open::commit`],
/// which keeps that from happening), and closing, which rotates memtables,
/// then hung behind it (issue 20, finding 3). The bound stays as a guard
/// against any other stall of fjall's worker: past the limit the flush is
/// abandoned; the journal was synced before it, so nothing acknowledged is
/// lost and the next open replays the journal; the stuck thread keeps its
/// handle, so the instance is never dropped (dropping it would join the
/// stuck worker) and the process can exit.
fn flush_within(open: Arc<Open>, limit: Duration) -> Result<Flushed, EngineError> {
    let (tx, rx) = std::sync::mpsc::channel();
    let spawned = std::thread::Builder::new()
        .name("lsm-close-flush".into())
        .spawn(move || {
            let r = open
                .flush_buffer()
                .and_then(|()| open.flush_memtables())
                // Only deleted blobs are left in it: compacting drops them.
                .and_then(|()| {
                    open.wb
                        .major_compact()
                        .map_err(|e| map_fjall(e, "compaction"))
                });
            // Let go of the instance before reporting: `close` empties the
            // journal only when its handle is the last, and a handle dropped
            // after the send raced with that check (a clean close then kept
            // a full journal now and then, under load).
            drop(open);
            let _ = tx.send(r);
        });
    if let Err(e) = spawned {
        return Err(EngineError::Io(format!(
            "could not start the closing flush: {e}"
        )));
    }
    match rx.recv_timeout(limit) {
        Ok(r) => r.map(|()| Flushed::All),
        Err(_) => {
            tracing::error!(
                limit_secs = limit.as_secs(),
                "lsm storage engine: the final flush did not finish (fjall's worker is stuck); \
                 the synced journal holds every write and is replayed at the next start"
            );
            Ok(Flushed::Abandoned)
        }
    }
}

/// What the closing flush achieved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flushed {
    /// Every memtable and the index buffer are in tables: the journal holds
    /// nothing the tables do not.
    All,
    /// The flush did not run or did not finish: the journal is needed.
    Abandoned,
}

/// Empties fjall's journal after a clean close, once the instance is dropped
/// and every write is in tables (a 64 MiB preallocated file otherwise stays
/// in the dbpath). The sealed journals go and the newest one is truncated to
/// nothing rather than deleted: fjall recovers its sequence number from the
/// tables only when it finds an existing active journal, and starting a new
/// one at sequence number 0 would let later writes hide behind older table
/// entries. An empty journal replays nothing, and fjall appends to it.
fn empty_journals(data_dir: &Path) -> std::io::Result<()> {
    let mut journals: Vec<(u64, PathBuf)> = std::fs::read_dir(data_dir)?
        .filter_map(Result::ok)
        .map(|e| e.path())
        .filter(|p| is_journal(p))
        .filter_map(|p| {
            let id = p.file_stem()?.to_str()?.parse::<u64>().ok()?;
            Some((id, p))
        })
        .collect();
    journals.sort_by_key(|(id, _)| *id);
    let Some((_, active)) = journals.pop() else {
        return Ok(());
    };
    for (_, sealed) in journals {
        std::fs::remove_file(sealed)?;
    }
    let file = std::fs::OpenOptions::new().write(true).open(&active)?;
    file.set_len(0)?;
    file.sync_all()?;
    std::fs::File::open(data_dir)?.sync_all()
}

/// The main keyspace's bloom filters: none when the store keeps its
/// out-of-order regions apart (for dbpaths created since; fjall keeps the filter
/// policy a keyspace was created with, so older ones keep theirs, and filters
/// never change what a read returns). A filter only saves the block read of a
/// point read that misses, and main's point reads hit: an ordinary
/// collection's document is read by the record id its `_id` entry names
/// (`store/records.rs`). The reads that miss are a duplicate-`_id` check in a
/// clustered collection (time-series buckets, `clusteredIndex`) that
/// `store::key_bounds` cannot prove new, and `_id` lookups of absent
/// documents there: each then reads one block per level whose tables span
/// the key (main's tables are mostly disjoint, since documents append), as a
/// B-tree reads its leaf. What the filters cost was 19 bits per record at
/// level 0 (fjall's default false-positive rate of 0.0001 there): 2.4 bytes
/// of a 1M-document time-series load's 35.6 per document on disk, and a
/// hash and probes per key on every flush and point read.
fn main_filter_policy(regions: &KeyRegions) -> Option<FilterPolicy> {
    (!regions.apart.is_empty()).then(FilterPolicy::disabled)
}

fn open_fjall(
    data_dir: &Path,
    dbpath: &Path,
    regions: &KeyRegions,
    memtables: MemtableSizes,
) -> Result<Open, EngineError> {
    // No compression of journaled values: fjall LZ4-compresses every value
    // of 4 KiB or more as it journals it, which here means each batch's
    // index run (the index write buffer's blob, ~40 bytes an entry) and large
    // documents. On a time-series load that was 410 instructions a document
    // (2.8% of the server's), for a file that lives until the next memtable
    // flush and is read only by a recovery; tables stay compressed. The
    // journal takes more bytes instead (a large document's whole size), which
    // the background sync writes out. Each journal entry names its own
    // compression, so journals written with LZ4 before replay as they are.
    //
    // One background worker for flushes and compactions: with two, fjall's
    // worker 0 hands every compaction to the others and re-queues the message
    // to itself while they work, a busy loop that took 12% of the CPU of an
    // indexed load (fjall 3.1.13, worker_pool.rs) and on a 2-core machine
    // competes with the inserting thread itself.
    let db = Database::builder(data_dir)
        .worker_threads(1)
        .journal_compression(CompressionType::None)
        .open()
        .map_err(|e| match e {
            fjall::Error::Locked => EngineError::DbPathInUse(format!(
                "the data files in {} are in use by another BisonDB instance",
                dbpath.display()
            )),
            e => map_fjall(e, "open"),
        })?;
    let options = || {
        KeyspaceCreateOptions::default()
            .data_block_compression_policy(CompressionPolicy::all(CompressionType::Lz4))
            .data_block_size_policy(BlockSizePolicy::all(DATA_BLOCK_BYTES))
            .data_block_restart_interval_policy(RestartIntervalPolicy::all(RESTART_INTERVAL))
    };
    let ks = db
        .keyspace(KEYSPACE, || {
            let main = options();
            let main = match main_filter_policy(regions) {
                Some(policy) => main.filter_policy(policy),
                None => main,
            };
            main.max_memtable_size(memtables.main)
                .compaction_strategy(Arc::new(
                    fjall::compaction::Leveled::default().with_l0_threshold(MAIN_L0_TABLES),
                ))
        })
        .map_err(|e| map_fjall(e, "open"))?;
    let ix = db
        .keyspace(INDEX_KEYSPACE, || {
            options()
                .max_memtable_size(memtables.index)
                .compaction_strategy(Arc::new(
                    fjall::compaction::Leveled::default().with_l0_threshold(INDEX_L0_TABLES),
                ))
        })
        .map_err(|e| map_fjall(e, "open"))?;
    let wb = db
        .keyspace(BUFFER_KEYSPACE, || {
            KeyspaceCreateOptions::default().max_memtable_size(memtables.buffer)
        })
        .map_err(|e| map_fjall(e, "open"))?;
    let open = Open {
        db,
        ks,
        ix,
        wb,
        buffer: IndexBuffer::default(),
        regions: regions.clone(),
        memtables,
        commit_turn: parking_lot::Mutex::new(()),
        has_long: AtomicBool::new(false),
    };
    move_apart_regions(&open)?;
    check_apart_keyspace(&open)?;
    let replayed = open.recover_buffer()?;
    if replayed > 0 {
        open.flush_buffer()?;
        tracing::info!(
            runs = replayed,
            "ingested index entries the write buffer held at the last stop"
        );
    }
    // Long keys' stored keys sort after every short one's.
    for ks in [&open.ks, &open.ix] {
        let last = ks.last_key_value().map(|g| g.key()).transpose();
        let last = last.map_err(|e| map_fjall(e, "open"))?;
        if last.is_some_and(|k| k.first() == Some(&long::LONG_PREFIX)) {
            open.note_long();
        }
    }
    Ok(open)
}

/// `[lo, hi)` of the stored (prefixed) keys of [`KeyRegions::apart`].
fn apart_bounds(regions: &KeyRegions) -> (Vec<u8>, Vec<u8>) {
    (
        vec![KEY_PREFIX, regions.apart.start],
        vec![KEY_PREFIX, regions.apart.end],
    )
}

/// Refuses to open a dbpath whose index keyspace holds keys outside the
/// regions these options keep apart: they were written with other regions,
/// and reads would look for those keys in `main`.
fn check_apart_keyspace(open: &Open) -> Result<(), EngineError> {
    let outside = |guard: Option<fjall::Guard>| -> Result<bool, EngineError> {
        match guard {
            None => Ok(false),
            Some(g) => {
                let k = g.key().map_err(|e| map_fjall(e, "open"))?;
                // A long key's stored key names its region in its second byte too.
                let region = k.get(1).copied().unwrap_or_default();
                Ok(!open.regions.apart.contains(&region))
            }
        }
    };
    if outside(open.ix.first_key_value())? || outside(open.ix.last_key_value())? {
        return Err(EngineError::InvalidArgument(format!(
            "the lsm data files keep key regions apart that differ from {:?}; \
             open them with the regions they were written with",
            open.regions.apart
        )));
    }
    Ok(())
}

/// Moves the keys of the regions kept apart that a dbpath written before the
/// split keeps in `main` (index entries before the index keyspace, stats records
/// before they joined it) into the index keyspace, a chunk per atomic batch, so
/// a crash midway leaves every entry in exactly one place and the next open
/// finishes the move.
fn move_apart_regions(open: &Open) -> Result<(), EngineError> {
    let (lo, hi) = apart_bounds(&open.regions);
    if lo >= hi {
        return Ok(());
    }
    let mut moved = 0usize;
    loop {
        let mut b = Batch::new(open);
        let mut n = 0usize;
        for guard in open
            .ks
            .range::<Vec<u8>, _>(lo.clone()..hi.clone())
            .take(MIGRATE_CHUNK)
        {
            let (k, v) = guard.into_inner().map_err(|e| map_fjall(e, "open"))?;
            b.insert(open, Space::Index, k.clone(), v);
            b.remove(open, Space::Main, k);
            n += 1;
        }
        if n == 0 {
            break;
        }
        open.commit(b).map_err(|e| map_fjall(e, "open"))?;
        moved += n;
    }
    if moved > 0 {
        open.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| map_fjall(e, "open"))?;
        tracing::info!(
            entries = moved,
            "moved index entries and collection stats into the index keyspace"
        );
    }
    Ok(())
}

/// Free space below which a failed write is taken to have met a full disk.
const NEARLY_FULL_BYTES: u64 = 1 << 20;

/// `err`, or [`EngineError::Full`] when it is an I/O failure and the disk
/// holding `dbpath` is (nearly) full. A write that fails on a full disk does
/// not always say so: when fjall's own worker met the ENOSPC first (a flush),
/// the next commit only sees fjall poisoned. Asking the filesystem makes every
/// write on a full disk answer OutOfDiskSpace (14031), the first and the next.
fn full_if_disk_is(err: EngineError, dbpath: &Path) -> EngineError {
    match err {
        EngineError::Io(_) if disk_full(dbpath) => EngineError::Full,
        other => other,
    }
}

/// Whether the filesystem holding `path` has less than [`NEARLY_FULL_BYTES`]
/// available to this process.
#[cfg(unix)]
fn disk_full(path: &Path) -> bool {
    use std::os::unix::ffi::OsStrExt;
    let Ok(c) = std::ffi::CString::new(path.as_os_str().as_bytes()) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated path and `st` a zeroed statvfs that the
    // call fills; nothing else is read or written.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return false;
    }
    (st.f_bavail as u64).saturating_mul(st.f_frsize as u64) < NEARLY_FULL_BYTES
}

#[cfg(not(unix))]
fn disk_full(_path: &Path) -> bool {
    false
}

/// Translates a fjall error; a full disk becomes [`EngineError::Full`].
fn map_fjall(e: fjall::Error, what: &str) -> EngineError {
    match e {
        fjall::Error::Io(io) | fjall::Error::Storage(fjall::LsmError::Io(io)) => {
            EngineError::from_io(io, format!("lsm {what}"))
        }
        fjall::Error::Poisoned => EngineError::Io(format!(
            "lsm {what}: the engine refuses writes after an earlier I/O failure"
        )),
        fjall::Error::Decompress(_)
        | fjall::Error::InvalidTrailer
        | fjall::Error::InvalidTag(_)
        | fjall::Error::JournalRecovery(_)
        | fjall::Error::Unrecoverable
        | fjall::Error::Storage(_) => EngineError::Corrupt(format!("lsm {what}: {e:?}")),
        other => EngineError::Io(format!("lsm {what}: {other:?}")),
    }
}

impl Shared {
    fn current(&self) -> Result<Arc<Open>, EngineError> {
        if self.failed.load(Ordering::Acquire) {
            return Err(self.failure_error());
        }
        self.open
            .read()
            .clone()
            .ok_or_else(|| EngineError::Io("the lsm storage engine is closed".into()))
    }

    fn failure_error(&self) -> EngineError {
        self.failure.lock().clone().unwrap_or_else(|| {
            full_if_disk_is(
                EngineError::Io(
                    "lsm: the engine refuses writes after an earlier I/O failure".into(),
                ),
                &self.dbpath,
            )
        })
    }

    /// Records a failed commit or sync: fjall now refuses writes until reopened.
    fn fail(&self, e: fjall::Error, what: &str) -> EngineError {
        let err = full_if_disk_is(map_fjall(e, what), &self.dbpath);
        let mut failure = self.failure.lock();
        if !self.failed.load(Ordering::Acquire) {
            tracing::error!(error = %err, "lsm write failed; writes are refused until the disk recovers");
            *failure = Some(err.clone());
            self.failed.store(true, Ordering::Release);
            // The first error is the cause; later "poisoned" ones only echo it.
            return err;
        }
        failure.clone().unwrap_or(err)
    }

    fn commit(&self, batch: WriteBatch) -> Result<(), EngineError> {
        let open = self.current()?;
        let mut ops = sorted_last_op_per_key(batch.into_ops());
        // Sorted, so the buffered region's operations are one stretch.
        let indexed: Vec<BatchOp> = match open.regions.buffered {
            Some(region) => {
                let region = Some(&region);
                let lo = ops.partition_point(|op| op.key().first() < region);
                let hi = ops.partition_point(|op| op.key().first() <= region);
                ops.drain(lo..hi).collect()
            }
            None => Vec::new(),
        };
        // The records, and the index run's blob in one part or a few.
        let mut b = Batch::with_capacity(&open, ops.len().saturating_add(4));
        for op in ops {
            match op {
                BatchOp::Put(k, v) | BatchOp::Insert(k, v) if long::is_long(&k) => {
                    open.note_long();
                    let v = long::stored_value(&k, &v)?;
                    b.insert(
                        &open,
                        open.space_for(&k),
                        long::stored_key(&k).into(),
                        v.into(),
                    );
                }
                BatchOp::Delete(k) if long::is_long(&k) => {
                    open.note_long();
                    b.remove(&open, open.space_for(&k), long::stored_key(&k).into());
                }
                BatchOp::Put(k, v) | BatchOp::Insert(k, v) => {
                    b.insert(&open, open.space_for(&k), stored_key(&k)?, v.into())
                }
                BatchOp::Delete(k) => b.remove(&open, open.space_for(&k), stored_key(&k)?),
            }
        }
        if indexed.is_empty() {
            open.commit(b).map_err(|e| self.fail(e, "write"))?;
        } else {
            self.commit_with_run(&open, b, &indexed)?;
        }
        self.commits.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }

    /// Commits `b` together with the blob of the run of `indexed` (sorted index
    /// operations), then makes the run visible, both under the buffer's state
    /// lock so no snapshot sees one without the other.
    fn commit_with_run(
        &self,
        open: &Open,
        mut b: Batch,
        indexed: &[BatchOp],
    ) -> Result<(), EngineError> {
        // Ingestion writes them into fjall later, and reads must look for
        // them there from then on.
        if indexed.iter().any(|op| long::is_long(op.key())) {
            open.note_long();
        }
        let limit = self.index_buffer_bytes.saturating_mul(2);
        if open.buffered().1 >= limit {
            // The maintainer is behind: ingest here rather than grow without bound.
            self.buffer_stalls.fetch_add(1, Ordering::Relaxed);
            open.flush_buffer_from(limit)?;
        }
        let mut run = buffer::run_of_ops(indexed)?;
        let parts: Vec<fjall::Slice> = run.parts().into_iter().map(fjall::Slice::from).collect();
        let mut st = open.buffer.state.lock();
        let seq = st.next_seq;
        for (i, part) in parts.into_iter().enumerate() {
            let i = u32::try_from(i).map_err(|_| {
                EngineError::InvalidArgument("a write with too many index entries".into())
            })?;
            b.insert(
                open,
                Space::Buffer,
                fjall::Slice::from(&blob_key(seq, i)[..]),
                part,
            );
        }
        open.commit(b).map_err(|e| self.fail(e, "write"))?;
        run.max_seq = seq;
        st.next_seq = seq.saturating_add(1);
        st.bytes = st.bytes.saturating_add(run.bytes());
        Arc::make_mut(&mut st.runs).push(Arc::new(run));
        let due = st.runs.len() >= buffer::FAN_IN || st.bytes >= self.index_buffer_bytes;
        drop(st);
        if due {
            self.maintainer_signal.lock().0 = true;
            self.maintainer_wake.notify_one();
        }
        Ok(())
    }

    /// The index buffer's background thread: merges runs and ingests them when
    /// a commit says work is due (and once a second regardless).
    fn run_maintainer(&self) {
        loop {
            {
                let mut signal = self.maintainer_signal.lock();
                if !signal.0 && !signal.1 {
                    self.maintainer_wake
                        .wait_for(&mut signal, Duration::from_secs(1));
                }
                if signal.1 {
                    return;
                }
                signal.0 = false;
            }
            if self.failed.load(Ordering::Acquire) {
                continue;
            }
            let Some(open) = self.open.read().clone() else {
                continue;
            };
            if let Err(e) = self.maintain(&open) {
                tracing::warn!(error = %e, "index write buffer maintenance failed; will retry");
            }
        }
    }

    /// Ingests the buffer once it is full, else merges runs while a group is due.
    fn maintain(&self, open: &Open) -> Result<(), EngineError> {
        while !self.maintainer_signal.lock().1 {
            if open.buffered().1 >= self.index_buffer_bytes {
                open.flush_buffer_from(self.index_buffer_bytes)?;
            } else if !open.merge_runs()? {
                break;
            }
        }
        Ok(())
    }

    /// The group-commit barrier: returns once a sync that started after this call
    /// has succeeded (or fails with the error of the syncs that covered it).
    fn sync(&self) -> Result<(), EngineError> {
        if self.commits.load(Ordering::Acquire) <= self.durable_commits.load(Ordering::Acquire) {
            return Ok(());
        }
        let poisoned = |_| EngineError::Internal("lsm sync state lock poisoned".into());
        let mut st = self.sync.lock().map_err(poisoned)?;
        // A sync already running may have started before our commit; we need one
        // that starts after now.
        let target = st.started.saturating_add(1);
        loop {
            if st.last_ok >= target {
                return Ok(());
            }
            if st.finished >= target {
                return Err(st
                    .last_error
                    .clone()
                    .unwrap_or_else(|| EngineError::Io("lsm sync failed".into())));
            }
            if st.running {
                st = self.sync_done.wait(st).map_err(poisoned)?;
                continue;
            }
            st.running = true;
            st.started = st.started.saturating_add(1);
            let me = st.started;
            drop(st);
            let result = self.sync_all_now();
            st = self.sync.lock().map_err(poisoned)?;
            st.running = false;
            st.finished = me;
            match &result {
                Ok(()) => st.last_ok = me,
                Err(e) => st.last_error = Some(e.clone()),
            }
            self.sync_done.notify_all();
        }
    }

    /// One fsync of the journal (the caller arranges the sharing).
    fn sync_all_now(&self) -> Result<(), EngineError> {
        let covered = self.commits.load(Ordering::Acquire);
        let open = self.current()?;
        open.db
            .persist(PersistMode::SyncAll)
            .map_err(|e| self.fail(e, "journal sync"))?;
        self.syncs.fetch_add(1, Ordering::Relaxed);
        self.durable_commits.fetch_max(covered, Ordering::AcqRel);
        Ok(())
    }

    fn run_flusher(&self, interval: Duration) {
        loop {
            // The stop flag's lock is released before the work below, so `close`
            // never waits for more than the sync already running.
            let stopped = match self.stop.lock() {
                Ok(guard) if *guard => true,
                Ok(guard) => match self.stop_signal.wait_timeout(guard, interval) {
                    Ok((guard, _)) => *guard,
                    Err(_) => true,
                },
                Err(_) => true,
            };
            if stopped {
                return;
            }
            if self.failed.load(Ordering::Acquire) {
                self.try_recover();
            } else if let Err(e) = self.sync() {
                tracing::warn!(error = %e, "background journal sync failed");
            }
        }
    }

    /// Reopens the files after a failure, once the disk takes writes and no
    /// snapshot still uses the old instance (fjall's lock file forbids two).
    fn try_recover(&self) {
        if let Err(e) = probe_writable(&self.data_dir) {
            tracing::debug!(error = %e, "lsm still cannot write; recovery postponed");
            return;
        }
        let mut slot = self.open.write();
        let Some(old) = slot.take() else {
            return;
        };
        if Arc::strong_count(&old) > 1 {
            // Open cursors still read from it; try again on the next tick.
            *slot = Some(old);
            return;
        }
        drop(old);
        match open_fjall(&self.data_dir, &self.dbpath, &self.regions, self.memtables) {
            Ok(open) => {
                // Writes committed before the failure may sit in journals that
                // were never fsynced; flushing them into (synced) tables makes
                // them as durable as a sync would have.
                if let Err(e) = open.flush_memtables() {
                    tracing::warn!(error = ?e, "flush after reopen failed; will retry");
                    return;
                }
                *slot = Some(Arc::new(open));
                self.generation.fetch_add(1, Ordering::AcqRel);
                *self.failure.lock() = None;
                self.failed.store(false, Ordering::Release);
                tracing::warn!(dbpath = %self.dbpath.display(), "lsm engine reopened after a write failure; writes are accepted again");
            }
            Err(e) => {
                tracing::error!(error = %e, "lsm engine could not reopen its files; will retry");
            }
        }
    }
}

/// fjall rejects empty keys (the contract allows them), so every stored key
/// carries this byte in front; a constant prefix keeps the byte order.
const KEY_PREFIX: u8 = 0;

/// The longest key stored as itself (fjall's longest minus our prefix);
/// longer ones are stored as `lsm/long.rs` says.
pub const MAX_KEY_LEN: usize = u16::MAX as usize - 1;

/// Refuses a key too long for fjall (rather than letting it panic): the
/// callers of [`stored_key`] take long keys elsewhere first.
fn check_key_len(key: &[u8]) -> Result<(), EngineError> {
    if key.len() > MAX_KEY_LEN {
        return Err(EngineError::Internal(format!(
            "a key of {} bytes reached the short keys' path",
            key.len()
        )));
    }
    Ok(())
}

/// A short `key` as stored: prefixed, and checked by [`check_key_len`]. Built straight
/// into fjall's key type: one allocation and copy per key on the write path.
fn stored_key(key: &[u8]) -> Result<fjall::Slice, EngineError> {
    check_key_len(key)?;
    // Most keys (a record's, an `_id` entry's) are short: assembled on the
    // stack they are copied once, without the chained reader's per-call
    // work, which took as long as the copy itself.
    let mut short = [0u8; 64];
    if let Some(room) = short.get_mut(1..=key.len()) {
        room.copy_from_slice(key);
        short[0] = KEY_PREFIX;
        return Ok(fjall::Slice::new(&short[..=key.len()]));
    }
    let mut parts = std::io::Read::chain(&[KEY_PREFIX][..], key);
    fjall::Slice::from_reader(&mut parts, key.len() + 1)
        .map_err(|e| EngineError::Internal(format!("building a stored key: {e}")))
}

/// The stored-key range of the short keys within the key bounds `lo`/`hi`.
/// A bound longer than any short key becomes a bound at its first
/// [`MAX_KEY_LEN`] bytes, which no short key lies strictly between (and
/// fjall refuses longer bounds); the range ends where long keys begin.
fn short_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let lo = match lo {
        Bound::Included(k) | Bound::Excluded(k) if long::is_long(k) => {
            Bound::Excluded(prefixed(k.get(..MAX_KEY_LEN).unwrap_or(k)))
        }
        Bound::Included(k) => Bound::Included(prefixed(k)),
        Bound::Excluded(k) => Bound::Excluded(prefixed(k)),
        Bound::Unbounded => Bound::Unbounded,
    };
    let hi = match hi {
        Bound::Included(k) | Bound::Excluded(k) if long::is_long(k) => {
            Bound::Included(prefixed(k.get(..MAX_KEY_LEN).unwrap_or(k)))
        }
        Bound::Included(k) => Bound::Included(prefixed(k)),
        Bound::Excluded(k) => Bound::Excluded(prefixed(k)),
        Bound::Unbounded => Bound::Excluded(vec![long::LONG_PREFIX]),
    };
    (lo, hi)
}

fn prefixed(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(key.len().saturating_add(1));
    out.push(KEY_PREFIX);
    out.extend_from_slice(key);
    out
}

/// Writes, syncs and removes a probe file in `dir`.
fn probe_writable(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(".bisondb-space-probe");
    let result = (|| {
        let mut f = std::fs::File::create(&path)?;
        f.write_all(&[0u8; PROBE_BYTES])?;
        f.sync_all()
    })();
    let _ = std::fs::remove_file(&path);
    result
}

/// The batch in key order with only the last operation on each key: fjall
/// stamps a whole batch with one sequence number, so two operations on one key
/// would be ambiguous; the index write buffer takes a batch's index operations
/// as one sorted run; and inserting in key order lets neighbouring memtable
/// (skip-list) searches share their path. The sort is stable, so the last of
/// equal keys is the latest.
///
/// An insert's batch interleaves regions (a record, its `_id` entry, its
/// index entries), each often increasing on its own: split stably by region
/// first, the sort of each finds it already in order (one comparison per
/// key) instead of merging the interleaved keys (a sixth of timeseries-batch's
/// key comparisons).
fn sorted_last_op_per_key(ops: Vec<BatchOp>) -> Vec<BatchOp> {
    let in_order = |a: &BatchOp, b: &BatchOp| a.key() < b.key();
    if ops.is_sorted_by(in_order) {
        return ops;
    }
    let n = ops.len();
    if n <= 16 {
        return last_op_per_key(ops);
    }
    // A batch touches a few regions: a short list beats a map.
    let mut regions: Vec<(Option<u8>, Vec<BatchOp>)> = Vec::new();
    for op in ops {
        let region = op.key().first().copied();
        match regions.iter_mut().find(|(r, _)| *r == region) {
            Some((_, v)) => v.push(op),
            None => regions.push((region, vec![op])),
        }
    }
    regions.sort_by_key(|(r, _)| *r);
    let mut ops = Vec::with_capacity(n);
    for (_, mut v) in regions {
        ops.append(&mut v);
    }
    last_op_per_key(ops)
}

/// `ops` sorted by key (stably) with only the last operation on each key.
fn last_op_per_key(mut ops: Vec<BatchOp>) -> Vec<BatchOp> {
    // Each region's stretch sorts on its own; a stretch already in order
    // costs one comparison per key.
    ops.sort_by(|a, b| a.key().cmp(b.key()));
    let mut out: Vec<BatchOp> = Vec::with_capacity(ops.len());
    for op in ops {
        if out.last().is_some_and(|last| last.key() == op.key()) {
            out.pop();
        }
        out.push(op);
    }
    out
}

impl Engine for LsmEngine {
    fn name(&self) -> &'static str {
        ENGINE_NAME
    }

    fn capabilities(&self) -> Capabilities {
        Self::CAPABILITIES
    }

    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        TxnStore::snapshot(self.shared.as_ref())
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError> {
        TxnStore::write(self.shared.as_ref(), batch, durability)
    }

    fn begin(&self) -> Result<Box<dyn Transaction>, EngineError> {
        self.txns.begin(self.shared.clone())
    }

    fn begin_on(&self, snapshot: Arc<dyn Snapshot>) -> Result<Box<dyn Transaction>, EngineError> {
        self.txns.begin_on(self.shared.clone(), snapshot)
    }

    fn sync(&self) -> Result<(), EngineError> {
        self.shared.sync()
    }

    fn checkpoint(&self) -> Result<(), EngineError> {
        // Flush the memtable into a compressed table so data files reflect the
        // data; compaction is left to the background.
        let open = self.shared.current()?;
        open.flush_buffer()?;
        open.flush_memtables()?;
        self.shared.sync_all_now()
    }

    fn checkpoint_and_settle(&self) -> Result<(), EngineError> {
        self.checkpoint()?;
        // fjall's worker finishes a flush's bookkeeping (a new version of the
        // keyspace's manifest) and may start a compaction after the sealed
        // memtables are gone; a compaction is queued before it counts as
        // active, so the engine counts as settled only once it has been idle
        // for several looks in a row.
        let open = self.shared.current()?;
        let mut idle = 0;
        let give_up = std::time::Instant::now() + SETTLE_AT_MOST;
        while idle < SETTLE_LOOKS && std::time::Instant::now() < give_up {
            std::thread::sleep(Duration::from_millis(10));
            if open.db.outstanding_flushes() == 0 && open.db.active_compactions() == 0 {
                idle += 1;
            } else {
                idle = 0;
            }
        }
        self.shared.sync_all_now()
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    /// The space the files really occupy (what `du` shows): fjall pre-sizes its
    /// journal to 64 MiB as a sparse file, so apparent file lengths (and fjall's
    /// own `disk_space`) would overstate a small database many times over.
    fn size_on_disk(&self) -> u64 {
        // The tables and metadata, not the write-ahead journal: like WiredTiger's
        // storageSize, which leaves out its journal, this is where the data lives
        // once flushed (the journal is recycled and bounded in size).
        dir_size(&self.shared.data_dir)
    }

    /// The memtables (every keyspace's, fjall's write buffer) and the index
    /// write buffer's runs: journaled, not yet in tables.
    fn unflushed_bytes(&self) -> u64 {
        match self.shared.open.read().as_ref() {
            Some(open) => open
                .db
                .write_buffer_size()
                .saturating_add(open.buffered().1 as u64),
            None => 0,
        }
    }

    fn metrics(&self) -> Vec<EngineMetric> {
        const COUNTER: bool = true;
        const GAUGE: bool = false;
        let sh = &self.shared;
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut rows: Vec<(&'static str, u64, bool, &'static str)> = vec![
            (
                "journal.commits",
                load(&sh.commits),
                COUNTER,
                "write batches committed to the journal",
            ),
            (
                "journal.syncs",
                load(&sh.syncs),
                COUNTER,
                "fsyncs of the journal",
            ),
            (
                "recoveries",
                load(&sh.generation),
                COUNTER,
                "reopens of the files after a write failure",
            ),
            (
                "indexBuffer.writeStalls",
                load(&sh.buffer_stalls),
                COUNTER,
                "writes that ingested the full index write buffer themselves",
            ),
        ];
        if let Some(open) = sh.open.read().clone() {
            let (runs, buffered) = open.buffered();
            let n = |n: usize| n as u64;
            let sealed: usize = open
                .keyspaces()
                .iter()
                .map(|k| k.sealed_memtable_count())
                .sum();
            let compacting =
                u64::try_from(open.db.time_compacting().as_micros()).unwrap_or(u64::MAX);
            rows.extend([
                (
                    "journal.bytes",
                    open.db.journal_disk_space().unwrap_or(0),
                    GAUGE,
                    "bytes of the journal files",
                ),
                (
                    "journal.files",
                    n(open.db.journal_count()),
                    GAUGE,
                    "journal files",
                ),
                (
                    "memtables.bytes",
                    open.db.write_buffer_size(),
                    GAUGE,
                    "bytes held in memtables (active and sealed)",
                ),
                (
                    "memtables.sealed",
                    n(sealed),
                    GAUGE,
                    "sealed memtables waiting to be flushed",
                ),
                (
                    "indexBuffer.bytes",
                    n(buffered),
                    GAUGE,
                    "bytes of index entries in the index write buffer",
                ),
                (
                    "indexBuffer.runs",
                    n(runs.len()),
                    GAUGE,
                    "sorted runs in the index write buffer",
                ),
                (
                    "flushes.outstanding",
                    n(open.db.outstanding_flushes()),
                    GAUGE,
                    "memtable flushes queued",
                ),
                (
                    "compaction.active",
                    n(open.db.active_compactions()),
                    GAUGE,
                    "compactions running",
                ),
                (
                    "compaction.completed",
                    n(open.db.compactions_completed()),
                    COUNTER,
                    "compactions finished",
                ),
                (
                    "compaction.micros",
                    compacting,
                    COUNTER,
                    "time spent compacting, in microseconds",
                ),
                (
                    "cache.bytes",
                    open.db.cache_size(),
                    GAUGE,
                    "bytes in the block cache",
                ),
                (
                    "cache.capacity",
                    open.db.cache_capacity(),
                    GAUGE,
                    "capacity of the block cache",
                ),
            ]);
            for (ks, [tables, l0, disk]) in [
                (
                    &open.ks,
                    ["main.tables", "main.level0Tables", "main.diskBytes"],
                ),
                (
                    &open.ix,
                    ["index.tables", "index.level0Tables", "index.diskBytes"],
                ),
            ] {
                rows.extend([
                    (tables, n(ks.table_count()), GAUGE, "tables of the keyspace"),
                    (
                        l0,
                        n(ks.l0_table_count()),
                        GAUGE,
                        "level-0 tables of the keyspace",
                    ),
                    (
                        disk,
                        ks.disk_space(),
                        GAUGE,
                        "bytes of the keyspace's tables",
                    ),
                ]);
            }
        }
        rows.into_iter()
            .map(|(name, value, counter, help)| EngineMetric {
                name,
                value,
                counter,
                help,
            })
            .collect()
    }
}

/// The engine's reads and writes, which its transactions use too.
impl TxnStore for Shared {
    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        match self.open.read().clone() {
            Some(open) => {
                // Under the buffer's lock: a batch's documents and index run together.
                let st = open.buffer.state.lock();
                let snap = open.db.snapshot();
                let runs = st.runs.clone();
                drop(st);
                Ok(Arc::new(LsmSnapshot { snap, runs, open }))
            }
            None => Err(EngineError::Io("the lsm storage engine is closed".into())),
        }
    }

    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError> {
        if !batch.is_empty() {
            self.commit(batch)?;
        }
        if durability == Durability::Sync {
            self.sync()?;
        }
        Ok(())
    }
}

/// Bytes allocated to the regular files under `dir` (0 for what cannot be read).
fn dir_size(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return 0;
    };
    entries
        .filter_map(Result::ok)
        .map(|entry| match entry.file_type() {
            Ok(t) if t.is_dir() => dir_size(&entry.path()),
            Ok(t) if t.is_file() && is_journal(&entry.path()) => 0,
            Ok(t) if t.is_file() => entry.metadata().map(|m| allocated(&m)).unwrap_or(0),
            _ => 0,
        })
        .fold(0u64, u64::saturating_add)
}

/// fjall's journal files (`<n>.jnl`).
fn is_journal(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "jnl")
}

#[cfg(unix)]
fn allocated(m: &std::fs::Metadata) -> u64 {
    use std::os::unix::fs::MetadataExt;
    // st_blocks counts 512-byte units whatever the file system's block size.
    m.blocks().saturating_mul(512)
}

#[cfg(not(unix))]
fn allocated(m: &std::fs::Metadata) -> u64 {
    m.len()
}

/// A point-in-time view: a fjall snapshot, the index buffer's runs at the
/// same instant, and the instance it reads from.
struct LsmSnapshot {
    snap: fjall::Snapshot,
    runs: Arc<Vec<Arc<Run>>>,
    open: Arc<Open>,
}

impl Snapshot for LsmSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        // Runs hold only the buffered region; the newest run that mentions the key decides.
        if self
            .open
            .regions
            .buffered
            .is_some_and(|r| key.first() == Some(&r))
        {
            if let Some(op) = self.runs.iter().rev().find_map(|r| r.get(key)) {
                return Ok(op.map(<[u8]>::to_vec));
            }
        }
        if long::is_long(key) {
            if !self.open.may_hold_long() {
                return Ok(None);
            }
            let stored = self
                .snap
                .get(self.open.keyspace_for(key), long::stored_key(key))
                .map_err(|e| map_fjall(e, "read"))?;
            return stored.map(|v| long::value_of(key, &v)).transpose();
        }
        self.snap
            .get(self.open.keyspace_for(key), prefixed(key))
            .map(|v| v.map(|v| v.to_vec()))
            .map_err(|e| map_fjall(e, "read"))
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
        let has_long = self.open.may_hold_long();
        let mut out = Vec::with_capacity(limit.min(256));
        let mut segments = self.open.segments();
        if reverse {
            segments.reverse();
        }
        for (seg_lo, seg_hi, ks) in segments {
            let lo = tighter(start, as_ref(&seg_lo), std::cmp::Ordering::Greater);
            let hi = tighter(end, as_ref(&seg_hi), std::cmp::Ordering::Less);
            if range_is_empty(lo, hi) {
                continue;
            }
            if !self.runs.is_empty() && std::ptr::eq(ks, &self.open.ix) {
                if self.scan_merged(ks, lo, hi, reverse, limit, &mut out)? {
                    break;
                }
                continue;
            }
            if has_long {
                for kv in self.entries(ks, lo, hi, reverse) {
                    out.push(kv?);
                    if out.len() >= limit {
                        return Ok(out);
                    }
                }
                continue;
            }
            // No long keys: the range holds short keys alone.
            let range = short_range(lo, hi);
            if range_is_empty(as_ref(&range.0), as_ref(&range.1)) {
                continue;
            }
            let iter = self.snap.range::<Vec<u8>, _>(ks, range);
            let mut push = |guard: fjall::Guard| -> Result<bool, EngineError> {
                let (k, v) = guard.into_inner().map_err(|e| map_fjall(e, "scan"))?;
                let key = k.get(1..).unwrap_or_default().to_vec();
                out.push((key, v.to_vec()));
                Ok(out.len() < limit)
            };
            let more = if reverse {
                iter.rev().map(&mut push).find(|r| !matches!(r, Ok(true)))
            } else {
                iter.map(&mut push).find(|r| !matches!(r, Ok(true)))
            };
            match more {
                None => {}
                Some(Ok(_)) => break,
                Some(Err(e)) => return Err(e),
            }
        }
        Ok(out)
    }
}

impl LsmSnapshot {
    /// The entries of `ks` within the key bounds `lo`/`hi`, in key order
    /// (descending when `reverse`): its short keys, with its long keys merged
    /// in when there may be any.
    fn entries<'s>(
        &'s self,
        ks: &Keyspace,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
    ) -> Box<dyn Iterator<Item = Result<KeyValue, EngineError>> + 's> {
        let range = short_range(lo, hi);
        let guards: Box<dyn Iterator<Item = fjall::Guard>> =
            if range_is_empty(as_ref(&range.0), as_ref(&range.1)) {
                Box::new(std::iter::empty())
            } else if reverse {
                Box::new(self.snap.range::<Vec<u8>, _>(ks, range).rev())
            } else {
                Box::new(self.snap.range::<Vec<u8>, _>(ks, range))
            };
        let short = guards.map(|g| {
            let (k, v) = g.into_inner().map_err(|e| map_fjall(e, "scan"))?;
            Ok((k.get(1..).unwrap_or_default().to_vec(), v.to_vec()))
        });
        if !self.open.may_hold_long() {
            return Box::new(short);
        }
        let (long_lo, long_hi) = long::stored_range(lo, hi);
        let iter = self.snap.range::<Vec<u8>, _>(ks, (long_lo, long_hi));
        let guards: Box<dyn Iterator<Item = fjall::Guard>> = if reverse {
            Box::new(iter.rev())
        } else {
            Box::new(iter)
        };
        let raw = guards.map(|g| g.into_inner().map_err(|e| map_fjall(e, "scan")));
        let long = long::Entries::new(raw, lo, hi, reverse);
        Box::new(long::MergeTwo::new(short, long, reverse))
    }

    /// Appends to `out` (up to `limit` in all) the entries of `ks` within the
    /// key bounds `lo`/`hi`, merged with the index buffer's runs, which
    /// are newer than anything in fjall. True when `out` is full.
    fn scan_merged(
        &self,
        ks: &Keyspace,
        lo: Bound<&[u8]>,
        hi: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
        out: &mut Vec<KeyValue>,
    ) -> Result<bool, EngineError> {
        let mut runs = Merged::new(&self.runs, lo, hi, reverse).peekable();
        let mut stored = self.entries(ks, lo, hi, reverse);
        let mut next_stored = || stored.next().transpose();
        let mut head = next_stored()?;
        let first = if reverse {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Less
        };
        while out.len() < limit {
            let order = match (&head, runs.peek()) {
                (None, None) => return Ok(false),
                (Some(_), None) => first,
                (None, Some(_)) => first.reverse(),
                (Some((k, _)), Some((rk, _))) => k.as_slice().cmp(rk),
            };
            if order == first {
                if let Some(kv) = head.take() {
                    out.push(kv);
                }
                head = next_stored()?;
                continue;
            }
            if order == std::cmp::Ordering::Equal {
                // The run's operation replaces what fjall holds.
                head = next_stored()?;
            }
            if let Some((k, Some(v))) = runs.next() {
                out.push((k.to_vec(), v.to_vec()));
            }
        }
        Ok(true)
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k),
        Bound::Excluded(k) => Bound::Excluded(k),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// The more restrictive of two bounds on the same side of a range: `keep` is
/// how the kept key compares to the other (`Greater` for lower bounds, `Less`
/// for upper ones); on equal keys the exclusive bound wins.
fn tighter<'a>(
    a: Bound<&'a [u8]>,
    b: Bound<&'a [u8]>,
    keep: std::cmp::Ordering,
) -> Bound<&'a [u8]> {
    let pick = |x: &'a [u8], y: &'a [u8]| if x.cmp(y) == keep { x } else { y };
    match (a, b) {
        (Bound::Unbounded, x) | (x, Bound::Unbounded) => x,
        (Bound::Included(x), Bound::Included(y)) => Bound::Included(pick(x, y)),
        (Bound::Excluded(x), Bound::Excluded(y)) => Bound::Excluded(pick(x, y)),
        (Bound::Included(i), Bound::Excluded(e)) | (Bound::Excluded(e), Bound::Included(i)) => {
            if i.cmp(e) == keep {
                Bound::Included(i)
            } else {
                Bound::Excluded(e)
            }
        }
    }
}

#[cfg(test)]
mod tests;
