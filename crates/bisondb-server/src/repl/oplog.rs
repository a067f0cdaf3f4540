//! The oplog, `local.oplog.rs`: a capped collection of mongod's entry shape
//! that records every write of a replica-set member, appended in the same
//! engine batch as the write (through `bisondb_storage::observer`), so that
//! data and oplog never disagree after a crash.
//!
//! An entry: `{op, ns, ui, o, o2, ts, t, v: 2, wall}` with
//! - `op`: `i` insert (`o` the document, `o2` its `{_id}`), `u` update (`o`
//!   mongod's `$v: 2` diff, [`super::diff`], or the whole new document for a
//!   replacement; `o2` `{_id}`), `d` delete (`o` `{_id}`), `c` a command on
//!   `db.$cmd` (`create`, `drop`, `renameCollection`, `dropDatabase`,
//!   `createIndexes`, `dropIndexes`, `collMod`), `n` a no-op (`{msg}`);
//! - `ts` from the one cluster-time clock ([`super::ClusterClock`]), ticked
//!   under the oplog's write lock, so `ts` order is commit order and record
//!   order (a tailing reader never sees a later `ts` before an earlier one);
//! - `t` the term, `wall` the wall-clock time.
//!
//! Entries are stored keyed by `ts` (they have no `_id`, as mongod's), each
//! one engine key that is also its record id and its place in natural
//! order (the collection is stored by key: `bisondb_storage`'s capped
//! module), as mongod's oplog whose record ids are the entries' `ts`.
//! Writes to `local` (not replicated), to `system.profile` collections and
//! to `config.transactions` (which mongod derives from the entries'
//! session fields) are not recorded.
//!
//! Entries are written straight as raw BSON: the document an insert
//! stored is copied into `o` as bytes, never converted, and an update's
//! `$v: 2` diff holds only what changed (a time-series bucket's new
//! measurements and control fields, not its columns).
//!
//! For retryable writes: [`with_retryable`] runs a write with the session
//! ([`Retryable`]): each entry it records gets mongod's `lsid`,
//! `txnNumber`, `stmtId` (the statement, set by the command with
//! [`with_stmt`] or, for a batch of inserts, [`with_insert_stmts`]) and
//! `prevOpTime` (the session's previous entry, so the entries of one
//! transaction number form a chain a restarted server walks back), and the
//! session's `config.transactions` record goes into the same engine batch
//! as the entries and the write. [`Oplog::append`] appends entries the
//! caller built (a transaction's one `applyOps` entry) in the caller's
//! batch, with `ts`, `t`, `v` and `wall` filled in. Change streams read the
//! collection (tailable, awaitData cursors on it work as on any capped
//! collection).
//!
//! A mongos (`super::ReplState::is_mongos`) writes no oplog: the observer
//! is installed there only for retryable writes ([`Oplog::activate_records_only`]),
//! whose session record goes into the write's batch as above, holding
//! what each statement wrote (`stmts`: `[stmtId, op]`, plus the `_id` an
//! upsert inserted; `[first, "I", n]` for the inserts of statements
//! `first..first + n`), which the oplog's entries hold in a replica set,
//! so a retry on any server over the store answers from it.
//!
//! Change-stream pre-images: an update or delete of a collection with
//! `changeStreamPreAndPostImages` enabled also stores the document it
//! replaced in `config.system.preimages`, as mongod 8 keeps them
//! (`{_id: {nsUUID, ts, applyOpsIndex}, operationTime, preImage}`, `ts`
//! the entry's, `applyOpsIndex` the operation's place in a transaction's
//! `applyOps`), in the same engine batch as the write and its entry
//! (`bisondb_storage::join_writes`), so a change stream finds the pre-image
//! of every entry it reads.

use std::cell::RefCell;
use std::sync::{Arc, OnceLock, Weak};

use bisondb_error::{MongoError, MongoResult};
use bisondb_storage::{
    Collection, KeyedEntry, Modify, Op, OpObserver, StorageError, Target, WriteBatch,
};
use bson::raw::cstr;
use bson::Uuid;
use bson::{doc, Bson, DateTime, Document, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

use super::ReplState;

pub const OPLOG_DB: &str = "local";
pub const OPLOG_COLL: &str = "oplog.rs";

/// Before hand-made entries are inserted into the oplog (test commands
/// only, `check_write`): the oplog is keyed by `ts`, so the cluster clock
/// and the last write move to the latest of them, and the entries the
/// server writes next sort after them, as a change stream opened meanwhile
/// expects. Older entries (history a test needs) move nothing.
pub fn before_hand_made(repl: &ReplState, docs: &[&RawDocument]) {
    for d in docs {
        if let Ok(Some(RawBsonRef::Timestamp(ts))) = d.get("ts") {
            repl.clock().advance_to(ts);
            repl.note_write(ts, super::wall_ms());
        }
    }
}
pub const PRE_IMAGES_DB: &str = "config";
pub const PRE_IMAGES_COLL: &str = "system.preimages";

/// An optime: an entry's `ts` and term `t`.
pub type OpTime = (Timestamp, i64);

/// mongod's `prevOpTime` of a transaction number's first entry.
const NO_OPTIME: OpTime = (
    Timestamp {
        time: 0,
        increment: 0,
    },
    -1,
);

/// The session of a retryable write, whose entries carry it (see the module
/// documentation).
pub struct Retryable {
    /// `{id, uid}`, the entries' `lsid` and the record's `_id`.
    pub lsid: RawDocumentBuf,
    pub txn_number: i64,
    /// The optime of the last entry this transaction number wrote (the
    /// next entry's `prevOpTime`); `None` before its first.
    pub last: Option<OpTime>,
    /// `config.transactions`, where the session's record is written in the
    /// batch of the entries; `None` writes no record.
    pub records: Option<Collection>,
    /// Set once a batch with this session's entries (and record) committed.
    pub recorded: bool,
    stmt: Stmts,
    /// A mongos: the statements the batch being committed wrote, for the
    /// record's `stmts` (see the module documentation).
    added: bson::RawArrayBuf,
}

/// A record's `stmts` once `added` joins those of `current` (the stored
/// record, kept only when it is of `txn_number`).
pub fn stmts_with(
    current: Option<&RawDocument>,
    txn_number: i64,
    added: &bson::RawArrayBuf,
) -> bson::RawArrayBuf {
    let mut all = bson::RawArrayBuf::new();
    if let Some(cur) = current.filter(|c| record_txn_number(c) == Some(txn_number)) {
        if let Ok(Some(RawBsonRef::Array(old))) = cur.get("stmts") {
            for v in old.into_iter().flatten() {
                all.push(v);
            }
        }
    }
    for v in added.into_iter().flatten() {
        all.push(v);
    }
    all
}

/// A `config.transactions` record's `txnNum`.
pub fn record_txn_number(record: &RawDocument) -> Option<i64> {
    match record.get("txnNum") {
        Ok(Some(RawBsonRef::Int64(n))) => Some(n),
        Ok(Some(RawBsonRef::Int32(n))) => Some(i64::from(n)),
        _ => None,
    }
}

/// What an update's oplog entry holds, by the kind of update, as mongod
/// decides it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UpdateEntry {
    /// The whole new document: a replacement (an update command's
    /// replacement document, `$merge`'s replace).
    Whole,
    /// The `$v: 2` diff, whatever its size: update operators, whose diff
    /// mongod logs as they apply (so a change stream sees `update`).
    Diff,
    /// The diff, or the whole document when that is smaller: pipeline
    /// updates and the server's own rewrites, as mongod's
    /// `computeOplogDiff` falls back.
    DiffOrWhole,
}

impl Retryable {
    pub fn new(
        lsid: RawDocumentBuf,
        txn_number: i64,
        last: Option<OpTime>,
        records: Option<Collection>,
    ) -> Retryable {
        Retryable {
            lsid,
            txn_number,
            last,
            records,
            recorded: false,
            stmt: Stmts::None,
            added: bson::RawArrayBuf::new(),
        }
    }

    /// The `stmtId` of an entry recording `op`.
    fn stmt_of(&mut self, op: &Op<'_>) -> Option<i32> {
        match &mut self.stmt {
            Stmts::None => None,
            Stmts::One(i) => Some(*i),
            Stmts::Docs { docs, next } => {
                let Op::Insert { doc } = op else {
                    return None;
                };
                let at = doc.as_bytes().as_ptr() as usize;
                // The store reports a batch's inserts in the order it was
                // given them: look from the last match on.
                let found = docs.iter().skip(*next).position(|(p, _)| *p == at)?;
                *next += found + 1;
                docs.get(*next - 1).map(|(_, s)| *s)
            }
        }
    }

    /// `config.transactions`'s record of this session at `last`; on a
    /// mongos with the statements written so far (those of `current`, the
    /// stored record, when it is of the same number, then [`Self::added`]).
    fn record(
        &self,
        last: OpTime,
        current: Option<&RawDocument>,
    ) -> Result<RawDocumentBuf, StorageError> {
        let mut r = RawDocumentBuf::new();
        r.append(cstr!("_id"), &self.lsid);
        r.append(cstr!("txnNum"), self.txn_number);
        let mut op_time = RawDocumentBuf::new();
        op_time.append(cstr!("ts"), last.0);
        op_time.append(cstr!("t"), last.1);
        r.append(cstr!("lastWriteOpTime"), op_time);
        r.append(cstr!("lastWriteDate"), DateTime::now());
        let stmts = stmts_with(current, self.txn_number, &self.added);
        if !stmts.is_empty() {
            r.append(cstr!("stmts"), stmts);
        }
        Ok(r)
    }
}

/// Which statements the entries of the running write record.
enum Stmts {
    None,
    /// Every entry: one statement (an update, a delete, a findAndModify).
    One(i32),
    /// A batch of inserts: the statement of each document, by the address
    /// of the document the store is handed.
    Docs {
        docs: Vec<(usize, i32)>,
        next: usize,
    },
}

thread_local! {
    /// The retryable write running on this thread.
    static SESSION: RefCell<Option<Retryable>> = const { RefCell::new(None) };
    /// What the current thread's update entries hold.
    static UPDATE_ENTRY: RefCell<UpdateEntry> = const { RefCell::new(UpdateEntry::DiffOrWhole) };
    /// The batch of a retryable write waiting for its session record (see
    /// [`Oplog::commit`]).
    static JOIN: RefCell<Option<Joined>> = const { RefCell::new(None) };
}

/// A retryable write's batch (its documents and entries) waiting for the
/// session's record: the record's own commit, which writes the same
/// engine, takes it and commits both as one batch.
struct Joined(WriteBatch);

/// Runs `f`, a retryable write, with `session`: its entries carry the
/// session (see the module documentation). Returns `f`'s result and the
/// session as the write left it (`last`, `recorded`).
pub fn with_retryable<R>(session: Retryable, f: impl FnOnce() -> R) -> (R, Retryable) {
    let previous = SESSION.with(|c| c.replace(Some(session)));
    let out = f();
    let session = SESSION.with(|c| std::mem::replace(&mut *c.borrow_mut(), previous));
    match session {
        Some(s) => (out, s),
        // Nothing takes it out while `f` runs.
        None => unreachable!("the retryable write's session vanished"),
    }
}

/// Runs `f`, statement `i` of the retryable write on this thread (if any):
/// its entries get `stmtId: i`.
pub fn with_stmt<R>(i: usize, f: impl FnOnce() -> R) -> R {
    let id = i32::try_from(i).unwrap_or(i32::MAX);
    let previous = SESSION.with(|c| {
        c.borrow_mut()
            .as_mut()
            .map(|s| std::mem::replace(&mut s.stmt, Stmts::One(id)))
    });
    let out = f();
    restore_stmts(previous);
    out
}

/// Runs `f`, which inserts `docs` (statements `stmts`, one per document) in
/// one call to the store, for the retryable write on this thread (if any).
pub fn with_insert_stmts<R>(docs: &[&RawDocument], stmts: &[usize], f: impl FnOnce() -> R) -> R {
    let previous = SESSION.with(|c| {
        c.borrow_mut().as_mut().map(|s| {
            let docs = docs
                .iter()
                .zip(stmts)
                .map(|(d, i)| {
                    (
                        d.as_bytes().as_ptr() as usize,
                        i32::try_from(*i).unwrap_or(i32::MAX),
                    )
                })
                .collect();
            std::mem::replace(&mut s.stmt, Stmts::Docs { docs, next: 0 })
        })
    });
    let out = f();
    restore_stmts(previous);
    out
}

fn restore_stmts(previous: Option<Stmts>) {
    if let Some(p) = previous {
        SESSION.with(|c| {
            if let Some(s) = c.borrow_mut().as_mut() {
                s.stmt = p;
            }
        });
    }
}

/// Runs `f`, whose updates are replacements (an update command's
/// replacement document, `$merge`'s replace) when `replacing`: their
/// entries hold the whole new document rather than a diff, as mongod's.
pub fn with_replacement<R>(replacing: bool, f: impl FnOnce() -> R) -> R {
    let kind = if replacing {
        UpdateEntry::Whole
    } else {
        UpdateEntry::DiffOrWhole
    };
    with_update_entry(kind, f)
}

/// Runs `f`, whose updates record entries of `kind`.
pub fn with_update_entry<R>(kind: UpdateEntry, f: impl FnOnce() -> R) -> R {
    let previous = UPDATE_ENTRY.with(|c| c.replace(kind));
    let out = f();
    UPDATE_ENTRY.with(|c| *c.borrow_mut() = previous);
    out
}

/// The oplog of a member, installed as the store's op observer.
pub struct Oplog {
    /// The state whose clock and term stamp the entries (weak: the state
    /// owns this oplog).
    repl: Weak<ReplState>,
    coll: OnceLock<Collection>,
    /// `config.system.preimages`, without an observer (its writes join the
    /// recorded write's batch).
    pre_images: OnceLock<Collection>,
    /// The oldest entry's `ts` (packed) when the pre-images older than it
    /// were last all removed (`super::pre_images`).
    pub pre_images_expired_before: std::sync::atomic::AtomicU64,
    /// A mongos: no entries, only retryable writes' session records (see
    /// the module documentation).
    records_only: std::sync::atomic::AtomicBool,
}

/// A document an update or delete replaced, to keep as a pre-image.
pub struct PreImage<'a> {
    /// The entry (of those committed together) that records the change.
    pub entry: usize,
    pub uuid: Uuid,
    /// The operation's place in a transaction's `applyOps` (0 outside).
    pub apply_ops_index: i64,
    pub before: &'a RawDocument,
}

/// A pre-image's `_id`: `{nsUUID, ts, applyOpsIndex}`, as mongod's.
pub fn pre_image_id(uuid: Uuid, ts: Timestamp, apply_ops_index: i64) -> RawDocumentBuf {
    let mut id = RawDocumentBuf::new();
    id.append(
        cstr!("nsUUID"),
        bson::RawBinaryRef {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: &uuid.bytes(),
        },
    );
    id.append(cstr!("ts"), ts);
    id.append(cstr!("applyOpsIndex"), apply_ops_index);
    id
}

/// An entry's `o`: the stored document itself, or one built for it.
enum Body<'a> {
    Raw(&'a RawDocument),
    Owned(RawDocumentBuf),
}

impl Body<'_> {
    fn raw(&self) -> &RawDocument {
        match self {
            Body::Raw(d) => d,
            Body::Owned(d) => d,
        }
    }
}

/// An entry before it has its time: what [`Oplog::append_raw`] stamps.
struct Pending<'a> {
    op: &'static str,
    o: Body<'a>,
    o2: Option<Body<'a>>,
    stmt: Option<i32>,
}

/// The common part of the entries of one commit.
struct Common<'a> {
    ns: &'a str,
    ui: Option<bson::Uuid>,
}

impl Oplog {
    pub fn new(repl: Weak<ReplState>) -> Arc<Oplog> {
        Arc::new(Oplog {
            repl,
            coll: OnceLock::new(),
            pre_images: OnceLock::new(),
            pre_images_expired_before: std::sync::atomic::AtomicU64::new(0),
            records_only: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// A mongos: observe only the writes of retryable writes, to put their
    /// session records in their batches.
    pub fn activate_records_only(&self) {
        self.records_only
            .store(true, std::sync::atomic::Ordering::Relaxed);
    }

    /// Starts recording into `coll` (`local.oplog.rs`).
    pub fn activate(&self, coll: Collection) {
        let _ = self.coll.set(coll.without_observer());
    }

    /// Starts keeping pre-images in `coll` (`config.system.preimages`).
    pub fn activate_pre_images(&self, coll: Collection) {
        let _ = self.pre_images.set(coll.without_observer());
    }

    /// Adds the pre-images `pre` of entries stamped at `times` (`ts`, wall
    /// milliseconds, by entry) to `batch`.
    fn join_pre_images(
        &self,
        batch: WriteBatch,
        pre: &[PreImage<'_>],
        times: &[(Timestamp, i64)],
    ) -> Result<WriteBatch, StorageError> {
        let Some(coll) = self.pre_images.get().filter(|_| !pre.is_empty()) else {
            return Ok(batch);
        };
        let mut docs = Vec::with_capacity(pre.len());
        for p in pre {
            let &(ts, wall) = times
                .get(p.entry)
                .ok_or_else(|| StorageError::internal("pre-image of an unstamped entry"))?;
            let mut d = RawDocumentBuf::new();
            d.append(cstr!("_id"), pre_image_id(p.uuid, ts, p.apply_ops_index));
            d.append(cstr!("operationTime"), DateTime::from_millis(wall));
            d.append(cstr!("preImage"), p.before);
            docs.push(d);
        }
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        let (out, batch) = bisondb_storage::join_writes(batch, || {
            coll.insert_many(&refs, true, bisondb_storage::Durability::Buffered)
        });
        match out.errors.into_iter().next() {
            Some((_, e)) => Err(e),
            None => Ok(batch),
        }
    }

    /// Appends `entry` (a transaction's `applyOps`; it then gets `ts`, `t`,
    /// `v`, `wall`) inside `batch` with the pre-images `pre` of its
    /// operations, then commits it with `write`.
    pub fn append_with_pre_images(
        &self,
        batch: WriteBatch,
        entry: &Document,
        pre: &[PreImage<'_>],
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<Vec<Timestamp>, StorageError> {
        let made = RawDocumentBuf::try_from(entry)
            .map_err(|e| StorageError::internal(format!("oplog entry: {e}")))?;
        let times: RefCell<Vec<(Timestamp, i64)>> = RefCell::new(Vec::new());
        let mut stamp = |ts: Timestamp, term: i64, wall: i64, _: usize| {
            times.borrow_mut().push((ts, wall));
            let mut e = made.clone();
            e.append(cstr!("ts"), ts);
            e.append(cstr!("t"), term);
            e.append(cstr!("v"), 2i64);
            e.append(cstr!("wall"), DateTime::from_millis(wall));
            Ok(e)
        };
        let mut commit = |b: WriteBatch| {
            let b = self.join_pre_images(b, pre, &times.borrow())?;
            write(b)
        };
        self.append_raw(batch, 1, &mut stamp, &mut commit)
    }

    pub fn is_active(&self) -> bool {
        self.coll.get().is_some()
    }

    /// The entry stored at `ts`, if it is still in the oplog.
    pub fn entry_at(&self, ts: Timestamp) -> Result<Option<RawDocumentBuf>, StorageError> {
        match self.coll.get() {
            Some(c) => c.get(RawBsonRef::Timestamp(ts)),
            None => Ok(None),
        }
    }

    /// Appends the entries `make` builds (each then gets `ts`, `t`, `v`,
    /// `wall`) to the oplog inside `batch`, then commits it with `write`.
    pub fn append(
        &self,
        batch: WriteBatch,
        make: &mut dyn FnMut() -> Vec<Document>,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<Vec<Timestamp>, StorageError> {
        let mut made: Vec<RawDocumentBuf> = Vec::new();
        for d in make() {
            made.push(
                RawDocumentBuf::try_from(&d)
                    .map_err(|e| StorageError::internal(format!("oplog entry: {e}")))?,
            );
        }
        let mut stamp = |ts: Timestamp, term: i64, wall: i64, i: usize| {
            let mut e = made.get(i).cloned().unwrap_or_default();
            e.append(cstr!("ts"), ts);
            e.append(cstr!("t"), term);
            e.append(cstr!("v"), 2i64);
            e.append(cstr!("wall"), DateTime::from_millis(wall));
            Ok(e)
        };
        let n = made.len();
        self.append_raw(batch, n, &mut stamp, write)
    }

    /// Appends `n` entries, the `i`th made by `stamp(ts, t, wall, i)` once
    /// its time is known (under the oplog's lock, so `ts` order is record
    /// order), to the oplog inside `batch`, then commits it with `write`.
    fn append_raw(
        &self,
        batch: WriteBatch,
        n: usize,
        stamp: &mut dyn FnMut(Timestamp, i64, i64, usize) -> Result<RawDocumentBuf, StorageError>,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<Vec<Timestamp>, StorageError> {
        let (Some(coll), Some(repl)) = (self.coll.get(), self.repl.upgrade()) else {
            write(batch)?;
            return Ok(Vec::new());
        };
        let mut stamped: Vec<Timestamp> = Vec::with_capacity(n);
        let mut wall = 0;
        let term = repl.term();
        let mut build = || -> Result<Vec<KeyedEntry>, StorageError> {
            wall = super::wall_ms();
            let mut out = Vec::with_capacity(n);
            for i in 0..n {
                let ts = repl.clock().tick();
                out.push((Bson::Timestamp(ts), stamp(ts, term, wall, i)?));
                stamped.push(ts);
            }
            Ok(out)
        };
        let last = std::cell::Cell::new(None);
        let mut stamp_and_build = || {
            let out = build();
            last.set(
                out.as_ref()
                    .ok()
                    .and_then(|o| o.last())
                    .and_then(|(k, _)| match k {
                        Bson::Timestamp(ts) => Some(*ts),
                        _ => None,
                    }),
            );
            out
        };
        // Inside the oplog's lock, right after the commit: what reads at
        // this commit's time read (`snapshots.rs`).
        let mut write_and_keep = |b: WriteBatch| {
            write(b)?;
            if let Some(ts) = last.get() {
                repl.snapshots().after_commit(coll.engine(), ts);
            }
            Ok(())
        };
        coll.append_capped_in(batch, &mut stamp_and_build, &mut write_and_keep)?;
        if let Some(&ts) = stamped.last() {
            repl.note_write(ts, wall);
        }
        Ok(stamped)
    }

    /// A no-op entry (`op: "n"`, `o: {msg}`), in a batch of its own.
    pub fn noop(&self, storage: &bisondb_storage::Storage, msg: &str) -> MongoResult<()> {
        let engine = storage.engine().clone();
        self.append(
            WriteBatch::new(),
            &mut || vec![doc! {"op": "n", "ns": "", "o": {"msg": msg}}],
            &mut |b| Ok(engine.write(b, bisondb_storage::Durability::Buffered)?),
        )
        .map_err(MongoError::from)?;
        Ok(())
    }
}

/// An empty document whose buffer holds `cap` bytes before it grows.
pub(super) fn with_capacity(cap: usize) -> RawDocumentBuf {
    let mut bytes = Vec::with_capacity(cap.max(5));
    bytes.extend_from_slice(&[5, 0, 0, 0, 0]);
    RawDocumentBuf::from_bytes(bytes).unwrap_or_default()
}

/// `{_id}` of a document.
fn id_doc(d: &RawDocument) -> Result<RawDocumentBuf, StorageError> {
    let id = bisondb_storage::id_of(d)
        .ok_or_else(|| StorageError::internal("oplog: document without _id"))?;
    let mut o = with_capacity(64);
    o.append(cstr!("_id"), id);
    Ok(o)
}

/// The entry of one observed operation; `None` for an update that changed
/// nothing.
fn pending<'a>(op: &Op<'a>) -> Result<Option<Pending<'a>>, StorageError> {
    let (kind, o, o2) = match op {
        Op::Insert { doc } => ("i", Body::Raw(doc), Some(Body::Owned(id_doc(doc)?))),
        Op::Update { before, after } => {
            let kind = UPDATE_ENTRY.with(|r| *r.borrow());
            let o = if kind == UpdateEntry::Whole {
                Body::Raw(after)
            } else {
                let size_limited = kind == UpdateEntry::DiffOrWhole;
                match super::diff::update_entry(before, after, size_limited)? {
                    Some(o) => Body::Owned(o),
                    None => return Ok(None),
                }
            };
            ("u", o, Some(Body::Owned(id_doc(after)?)))
        }
        Op::Delete { before } => ("d", Body::Owned(id_doc(before)?), None),
        Op::Command { o, o2 } => {
            let raw = |d: &Document| {
                RawDocumentBuf::try_from(d)
                    .map_err(|e| StorageError::internal(format!("oplog entry: {e}")))
            };
            let o2 = match o2 {
                Some(d) => Some(Body::Owned(raw(d)?)),
                None => None,
            };
            ("c", Body::Owned(raw(o)?), o2)
        }
    };
    Ok(Some(Pending {
        op: kind,
        o,
        o2,
        stmt: None,
    }))
}

/// Writes one entry in mongod's field order (`lsid`, `txnNumber`, `op`,
/// `ns`, `ui`, `o`, `o2`, `stmtId`, `ts`, `t`, `v`, `wall`, `prevOpTime`).
fn encode(
    common: &Common<'_>,
    p: &Pending<'_>,
    session: Option<(&RawDocument, i64, OpTime)>,
    now: (Timestamp, i64, i64),
) -> RawDocumentBuf {
    let (ts, term, wall) = now;
    // Sized once: grown append by append from 5 bytes, an entry was
    // reallocated five or six times (a third of its cost).
    let mut cap = 96 + common.ns.len() + p.o.raw().as_bytes().len();
    if let Some(o2) = &p.o2 {
        cap += 8 + o2.raw().as_bytes().len();
    }
    if let Some((lsid, _, _)) = session {
        cap += 64 + lsid.as_bytes().len();
    }
    let mut e = with_capacity(cap);
    if let Some((lsid, txn_number, _)) = session {
        e.append(cstr!("lsid"), lsid);
        e.append(cstr!("txnNumber"), txn_number);
    }
    e.append(cstr!("op"), p.op);
    e.append(cstr!("ns"), common.ns);
    if let Some(uuid) = common.ui {
        e.append(
            cstr!("ui"),
            bson::RawBinaryRef {
                subtype: bson::spec::BinarySubtype::Uuid,
                bytes: &uuid.bytes(),
            },
        );
    }
    e.append(cstr!("o"), p.o.raw());
    if let Some(o2) = &p.o2 {
        e.append(cstr!("o2"), o2.raw());
    }
    if let Some(stmt) = p.stmt {
        e.append(cstr!("stmtId"), stmt);
    }
    e.append(cstr!("ts"), ts);
    e.append(cstr!("t"), term);
    e.append(cstr!("v"), 2i64);
    e.append(cstr!("wall"), DateTime::from_millis(wall));
    if let Some((_, _, prev)) = session {
        let mut p = RawDocumentBuf::new();
        p.append(cstr!("ts"), prev.0);
        p.append(cstr!("t"), prev.1);
        e.append(cstr!("prevOpTime"), p);
    }
    e
}

/// Puts the session back on the thread when the commit that took it ends.
struct SessionBack(Option<Retryable>);

impl Drop for SessionBack {
    fn drop(&mut self) {
        if let Some(s) = self.0.take() {
            SESSION.with(|c| *c.borrow_mut() = Some(s));
        }
    }
}

/// Where sessions' records live (`config.transactions`).
fn is_records(target: &Target<'_>) -> bool {
    target.db == "config" && target.coll == "transactions"
}

impl Oplog {
    /// Commits `batch` with the session record of `session` at `last` in
    /// it: the record's write (under its collection's lock, taken after the
    /// oplog's) finds the batch in [`JOIN`] and commits both at once.
    fn commit_with_record(
        records: &Collection,
        session: &Retryable,
        last: OpTime,
        batch: WriteBatch,
    ) -> Result<(), StorageError> {
        JOIN.with(|j| *j.borrow_mut() = Some(Joined(batch)));
        let result = records.modify(
            RawBsonRef::Document(&session.lsid),
            bisondb_storage::Durability::Buffered,
            &mut |cur| {
                let record = session
                    .record(last, cur)
                    .map_err(|e| MongoError::internal(e.to_string()))?;
                Ok(match cur {
                    Some(_) => Modify::Replace(record),
                    None => Modify::Insert(record),
                })
            },
        );
        // Taken by the record's commit unless it failed before committing:
        // then nothing is written.
        let unjoined = JOIN.with(|j| j.borrow_mut().take());
        match result {
            Ok(_) if unjoined.is_none() => Ok(()),
            Ok(_) => Err(StorageError::internal(
                "the session record was not written with its write",
            )),
            Err(e) => Err(StorageError::Mongo(e)),
        }
    }
}

impl Oplog {
    /// A mongos's commit: `batch` with the running retryable write's
    /// session record (if any), which lists the statements `ops` wrote.
    fn commit_records_only(
        &self,
        target: Target<'_>,
        ops: &[Op<'_>],
        batch: WriteBatch,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let command = matches!(ops.first(), Some(Op::Command { .. }));
        let mut session = SessionBack(if command || is_records(&target) {
            None
        } else {
            SESSION.with(|c| c.borrow_mut().take())
        });
        let (Some(s), Some(repl)) = (session.0.as_mut(), self.repl.upgrade()) else {
            return write(batch);
        };
        let Some(records) = s.records.clone() else {
            return write(batch);
        };
        let one = matches!(s.stmt, Stmts::One(_));
        let mut stmts = bson::RawArrayBuf::new();
        // A batch of inserts is kept as runs of consecutive statements,
        // `[first, "I", n]`, so its record stays small.
        let mut run: Option<(i32, i32)> = None;
        let flush = |stmts: &mut bson::RawArrayBuf, run: &mut Option<(i32, i32)>| {
            if let Some((first, n)) = run.take() {
                let mut e = bson::RawArrayBuf::new();
                e.push(first);
                if n == 1 {
                    e.push("i");
                } else {
                    e.push("I");
                    e.push(n);
                }
                stmts.push(e);
            }
        };
        for op in ops {
            let kind = match op {
                Op::Insert { .. } => "i",
                Op::Update { .. } => "u",
                Op::Delete { .. } => "d",
                Op::Command { .. } => continue,
            };
            let Some(stmt) = s.stmt_of(op) else {
                continue;
            };
            if kind == "i" && !one {
                match &mut run {
                    Some((first, n)) if first.checked_add(*n) == Some(stmt) => *n += 1,
                    _ => {
                        flush(&mut stmts, &mut run);
                        run = Some((stmt, 1));
                    }
                }
                continue;
            }
            flush(&mut stmts, &mut run);
            let mut e = bson::RawArrayBuf::new();
            e.push(stmt);
            e.push(kind);
            // An upsert's `_id` (its statement's reply names it).
            if let (true, Op::Insert { doc }) = (one, op) {
                if let Some(id) = bisondb_storage::id_of(doc) {
                    e.push(id);
                }
            }
            stmts.push(e);
        }
        flush(&mut stmts, &mut run);
        let at = (repl.clock().tick(), 0);
        repl.note_write(at.0, super::wall_ms());
        s.added = stmts;
        Self::commit_with_record(&records, s, at, batch)?;
        s.last = Some(at);
        s.recorded = true;
        Ok(())
    }
}

impl OpObserver for Oplog {
    fn observes(&self, db: &str) -> bool {
        if db == OPLOG_DB {
            return false;
        }
        self.is_active()
            || (self.records_only.load(std::sync::atomic::Ordering::Relaxed)
                && (SESSION.with(|c| c.borrow().is_some()) || JOIN.with(|j| j.borrow().is_some())))
    }

    fn commit(
        &self,
        target: Target<'_>,
        ops: &[Op<'_>],
        batch: WriteBatch,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        if !self.is_active() && !is_records(&target) {
            return self.commit_records_only(target, ops, batch, write);
        }
        if is_records(&target) {
            // mongod derives these from the entries' session fields; a
            // retryable write's record joins the write's batch.
            return match JOIN.with(|j| j.borrow_mut().take()) {
                Some(Joined(mut joined)) => {
                    for op in batch.into_ops() {
                        match op {
                            bisondb_storage::BatchOp::Put(k, v) => joined.put(k, v),
                            bisondb_storage::BatchOp::Insert(k, v) => joined.insert(k, v),
                            bisondb_storage::BatchOp::Delete(k) => joined.delete(k),
                        }
                    }
                    write(joined)
                }
                None => write(batch),
            };
        }
        // Pre-images are each member's own, as mongod keeps them.
        if target.coll == "system.profile"
            || (target.db == PRE_IMAGES_DB && target.coll == PRE_IMAGES_COLL)
        {
            return write(batch);
        }
        let command = matches!(ops.first(), Some(Op::Command { .. }));
        // A collection a retryable write creates is not one of its
        // statements.
        let mut session = SessionBack(if command {
            None
        } else {
            SESSION.with(|c| c.borrow_mut().take())
        });
        let mut entries = Vec::with_capacity(ops.len());
        let mut pre = Vec::new();
        for op in ops {
            if let Some(mut e) = pending(op)? {
                e.stmt = session.0.as_mut().and_then(|s| s.stmt_of(op));
                if let (true, Some(uuid), Op::Update { before, .. } | Op::Delete { before }) =
                    (target.pre_images, target.uuid, op)
                {
                    pre.push(PreImage {
                        entry: entries.len(),
                        uuid,
                        apply_ops_index: 0,
                        before,
                    });
                }
                entries.push(e);
            }
        }
        if entries.is_empty() {
            return write(batch);
        }
        let ns = if command {
            format!("{}.$cmd", target.db)
        } else {
            format!("{}.{}", target.db, target.coll)
        };
        let common = Common {
            ns: &ns,
            ui: target.uuid,
        };
        let sess = session.0.as_ref();
        // The optime of the entry stamped last.
        let last: std::cell::Cell<Option<OpTime>> = std::cell::Cell::new(None);
        // Each entry's `ts` and wall time, for its pre-image.
        let times: RefCell<Vec<(Timestamp, i64)>> = RefCell::new(Vec::new());
        let mut stamp = |ts: Timestamp, term: i64, wall: i64, i: usize| {
            if !pre.is_empty() {
                times.borrow_mut().push((ts, wall));
            }
            let e = entries
                .get(i)
                .ok_or_else(|| StorageError::internal("oplog: entry out of range"))?;
            let with = sess.map(|s| {
                let prev = last.get().or(s.last).unwrap_or(NO_OPTIME);
                (s.lsid.as_ref(), s.txn_number, prev)
            });
            last.set(Some((ts, term)));
            Ok(encode(&common, e, with, (ts, term, wall)))
        };
        let n = entries.len();
        let records = sess.and_then(|s| s.records.as_ref());
        let mut commit = |b: WriteBatch| {
            let b = self.join_pre_images(b, &pre, &times.borrow())?;
            match (records, sess, last.get()) {
                (Some(records), Some(s), Some(at)) => Self::commit_with_record(records, s, at, b),
                _ => write(b),
            }
        };
        self.append_raw(batch, n, &mut stamp, &mut commit)?;
        if let Some(s) = session.0.as_mut() {
            s.last = last.get().or(s.last);
            s.recorded |= s.records.is_some();
        }
        Ok(())
    }
}
