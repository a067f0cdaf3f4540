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
//! Entries are stored keyed by `ts` (they have no `_id`, as mongod's).
//! Writes to `local` (not replicated), to `system.profile` collections and
//! to `config.transactions` (which mongod derives from the entries'
//! session fields) are not recorded.
//!
//! For sessions and transactions: [`with_entry_fields`] runs a write with
//! extra fields (`lsid`, `txnNumber`, `stmtId`, `prevOpTime`) added to each
//! entry it records; [`Oplog::append`] appends entries the caller built (a
//! transaction's one `applyOps` entry) in the caller's batch, with `ts`,
//! `t`, `v` and `wall` filled in. Change streams read the collection
//! (tailable, awaitData cursors on it work as on any capped collection).

use std::cell::RefCell;
use std::sync::{Arc, OnceLock, Weak};

use bisondb_error::{MongoError, MongoResult};
use bisondb_storage::{Collection, KeyedEntry, Op, OpObserver, StorageError, Target, WriteBatch};
use bson::{doc, Bson, DateTime, Document, RawDocument, Timestamp};

use super::ReplState;

pub const OPLOG_DB: &str = "local";
pub const OPLOG_COLL: &str = "oplog.rs";

thread_local! {
    /// Fields added to every entry the current thread's writes record.
    static ENTRY_FIELDS: RefCell<Option<Document>> = const { RefCell::new(None) };
    /// What the current thread's update entries hold.
    static UPDATE_ENTRY: RefCell<UpdateEntry> = const { RefCell::new(UpdateEntry::DiffOrWhole) };
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

/// Runs `f` with `fields` (e.g. `lsid`, `txnNumber`, `stmtId`) added to each
/// oplog entry its writes record on this thread.
pub fn with_entry_fields<R>(fields: Document, f: impl FnOnce() -> R) -> R {
    let previous = ENTRY_FIELDS.with(|c| c.replace(Some(fields)));
    let out = f();
    ENTRY_FIELDS.with(|c| *c.borrow_mut() = previous);
    out
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
}

impl Oplog {
    pub fn new(repl: Weak<ReplState>) -> Arc<Oplog> {
        Arc::new(Oplog {
            repl,
            coll: OnceLock::new(),
        })
    }

    /// Starts recording into `coll` (`local.oplog.rs`).
    pub fn activate(&self, coll: Collection) {
        let _ = self.coll.set(coll.without_observer());
    }

    pub fn is_active(&self) -> bool {
        self.coll.get().is_some()
    }

    /// Appends the entries `make` builds (each then gets `ts`, `t`, `v`,
    /// `wall`) to the oplog inside `batch`, then commits it with `write`.
    pub fn append(
        &self,
        batch: WriteBatch,
        make: &mut dyn FnMut() -> Vec<Document>,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<Vec<Timestamp>, StorageError> {
        let (Some(coll), Some(repl)) = (self.coll.get(), self.repl.upgrade()) else {
            write(batch)?;
            return Ok(Vec::new());
        };
        let mut stamped: Vec<(Timestamp, i64)> = Vec::new();
        let term = repl.term();
        let mut build = || -> Result<Vec<KeyedEntry>, StorageError> {
            let wall = super::wall_ms();
            let mut out = Vec::new();
            for mut entry in make() {
                let ts = repl.clock().tick();
                entry.insert("ts", ts);
                entry.insert("t", term);
                entry.insert("v", 2i64);
                entry.insert("wall", DateTime::from_millis(wall));
                let raw = bson::RawDocumentBuf::try_from(&entry)
                    .map_err(|e| StorageError::internal(format!("oplog entry: {e}")))?;
                stamped.push((ts, wall));
                out.push((Bson::Timestamp(ts), raw));
            }
            Ok(out)
        };
        coll.append_capped_in(batch, &mut build, write)?;
        if let Some(&(ts, wall)) = stamped.last() {
            repl.note_write(ts, wall);
        }
        Ok(stamped.into_iter().map(|(ts, _)| ts).collect())
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

fn to_doc(d: &RawDocument) -> Result<Document, StorageError> {
    Document::try_from(d).map_err(|e| StorageError::internal(format!("oplog: {e}")))
}

fn id_doc(d: &RawDocument) -> Result<Document, StorageError> {
    let id = bisondb_storage::id_of(d)
        .ok_or_else(|| StorageError::internal("oplog: document without _id"))?;
    let id = Bson::try_from(id).map_err(|e| StorageError::internal(format!("oplog: {e}")))?;
    Ok(doc! {"_id": id})
}

/// The entry of one observed operation; `None` for an update that changed
/// nothing.
fn entry_of(target: &Target<'_>, op: &Op<'_>) -> Result<Option<Document>, StorageError> {
    let ns = format!("{}.{}", target.db, target.coll);
    let mut e = match op {
        Op::Insert { doc } => doc! {
            "op": "i",
            "ns": ns,
            "o": to_doc(doc)?,
            "o2": id_doc(doc)?,
        },
        Op::Update { before, after } => {
            let kind = UPDATE_ENTRY.with(|r| *r.borrow());
            let o = if kind == UpdateEntry::Whole {
                to_doc(after)?
            } else {
                let size_limited = kind == UpdateEntry::DiffOrWhole;
                match super::diff::update_entry(before, after, size_limited)? {
                    Some(o) => o,
                    None => return Ok(None),
                }
            };
            doc! {"op": "u", "ns": ns, "o": o, "o2": id_doc(after)?}
        }
        Op::Delete { before } => doc! {"op": "d", "ns": ns, "o": id_doc(before)?},
        Op::Command { o, o2 } => {
            let mut e = doc! {"op": "c", "ns": format!("{}.$cmd", target.db), "o": (*o).clone()};
            if let Some(o2) = o2 {
                e.insert("o2", (*o2).clone());
            }
            e
        }
    };
    if let Some(uuid) = target.uuid {
        // mongod puts `ui` after `ns`.
        let mut ordered = Document::new();
        for (k, v) in e {
            let after_ns = k == "ns";
            ordered.insert(k, v);
            if after_ns {
                ordered.insert("ui", bson::Binary::from_uuid(uuid));
            }
        }
        e = ordered;
    }
    if let Some(fields) = ENTRY_FIELDS.with(|f| f.borrow().clone()) {
        for (k, v) in fields {
            e.insert(k, v);
        }
    }
    Ok(Some(e))
}

impl OpObserver for Oplog {
    fn observes(&self, db: &str) -> bool {
        db != OPLOG_DB && self.is_active()
    }

    fn commit(
        &self,
        target: Target<'_>,
        ops: &[Op<'_>],
        batch: WriteBatch,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let unrecorded = target.coll == "system.profile"
            || (target.db == "config" && target.coll == "transactions");
        if unrecorded {
            return write(batch);
        }
        let mut entries = Vec::with_capacity(ops.len());
        for op in ops {
            if let Some(e) = entry_of(&target, op)? {
                entries.push(e);
            }
        }
        if entries.is_empty() {
            return write(batch);
        }
        let mut entries = Some(entries);
        self.append(batch, &mut || entries.take().unwrap_or_default(), write)?;
        Ok(())
    }
}
