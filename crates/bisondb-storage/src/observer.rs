//! The op observer: a hook the store calls while it builds the engine batch
//! of every write, so that a record of the write (the server's oplog,
//! `local.oplog.rs`) goes to the engine in the same atomic batch as the write
//! itself. A crash then leaves both or neither: data and oplog never
//! disagree. It is mongod's `OpObserver`, reduced to the one place each
//! write commits.
//!
//! The store calls [`OpObserver::commit`] instead of writing the batch
//! itself, for
//! - documents: inserts ([`Op::Insert`], a capped collection's too),
//!   replacements of a stored document ([`Op::Update`], before and after:
//!   the observer computes what changed), deletes ([`Op::Delete`], the
//!   document removed), from `Collection::insert_many`, `modify` and
//!   `delete`; a capped collection's evictions are not observed, as the
//!   oplog's own are not;
//! - catalog changes ([`Op::Command`]): `create`, `drop`, `renameCollection`,
//!   `dropDatabase` (one per dropped collection, then the database),
//!   `createIndexes`, `dropIndexes`, `collMod`, each with mongod's oplog
//!   `o` (and `o2`) shape, from the `Storage` methods that make them.
//!
//! The call happens with the written collection's lock held (the catalog
//! lock for catalog changes), so the observer sees one collection's writes
//! in commit order. The observer adds its own operations to the batch and
//! then calls `write` exactly once with it (or returns an error, and nothing
//! is written); it must not write to storage any other way, nor call back
//! into a collection whose lock the caller may hold, except the collection
//! it records into (`Collection::append_capped_in`), which nothing observed
//! ever locks first.
//!
//! Nothing is observed until `Storage::set_op_observer` installs an
//! observer (the server does in replica-set mode, and as a mongos on the
//! `postgres` engine, where only retryable writes are observed), and then
//! only the databases [`OpObserver::observes`] says: without one, a write
//! pays one `OnceLock` load.
//!
//! Users of the API (the replica-set issue): the server's oplog writer
//! (`bisondb-server/src/repl/oplog.rs`) turns each [`Op`] into an entry and
//! appends them; sessions and transactions add `lsid`/`txnNumber`/`stmtId`
//! to the entries of the write they run through the observer's own
//! per-thread context (set around the write by the server, read by its
//! observer), and a transaction's commit becomes one batch with one
//! `applyOps` entry; change streams read the entries back.

use std::cell::RefCell;

use bson::{Document, RawDocument, Uuid};

use crate::error::StorageError;
use bisondb_engine::WriteBatch;

/// The collection a write went to.
#[derive(Clone, Copy, Debug)]
pub struct Target<'a> {
    pub db: &'a str,
    /// The collection's name; for a database-level command (`dropDatabase`)
    /// empty.
    pub coll: &'a str,
    /// The collection's UUID (none for a database-level command).
    pub uuid: Option<Uuid>,
    /// The collection has `changeStreamPreAndPostImages` enabled: the
    /// observer keeps the documents updates and deletes replace (mongod's
    /// `config.system.preimages`) in the same batch.
    pub pre_images: bool,
}

/// One change the batch makes.
#[derive(Clone, Copy, Debug)]
pub enum Op<'a> {
    /// A new document (an insert, an upsert).
    Insert { doc: &'a RawDocument },
    /// A stored document replaced by another with the same `_id`.
    Update {
        before: &'a RawDocument,
        after: &'a RawDocument,
    },
    /// A document removed.
    Delete { before: &'a RawDocument },
    /// A catalog change, as mongod records it: `o` (e.g. `{create: "c",
    /// ...options}`, `{drop: "c"}`) and, for some, `o2` (a dropped index's
    /// spec, a dropped collection's `numRecords`).
    Command {
        o: &'a Document,
        o2: Option<&'a Document>,
    },
}

/// Writes that must be recorded, in the same batch; see the module
/// documentation.
pub trait OpObserver: Send + Sync {
    /// Whether writes to `db` are observed (cheap: asked before anything
    /// else is prepared).
    fn observes(&self, db: &str) -> bool;

    /// Adds the record of `ops` (made to `target`, in this order) to
    /// `batch`, then calls `write` with it once, returning its result.
    fn commit(
        &self,
        target: Target<'_>,
        ops: &[Op<'_>],
        batch: WriteBatch,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError>;
}

thread_local! {
    /// The batch this thread's unobserved writes join, while
    /// [`join_writes`] runs.
    static JOINING: RefCell<Option<WriteBatch>> = const { RefCell::new(None) };
}

/// Runs `f`, whose writes to collections without an observer are not
/// written but added to `batch` (with their stats records), and returns
/// `f`'s result with `batch`. Those collections' counts are published when
/// `f` returns, before the caller writes the batch: a failed engine write
/// leaves them ahead of the data until the next restart reads them again.
pub fn join_writes<R>(batch: WriteBatch, f: impl FnOnce() -> R) -> (R, WriteBatch) {
    let previous = JOINING.with(|j| j.replace(Some(batch)));
    let out = f();
    let joined = JOINING.with(|j| j.replace(previous)).unwrap_or_default();
    (out, joined)
}

/// The store's unobserved write of `batch`: `None` when it joined the
/// batch of a running [`join_writes`], else the batch to write.
pub(crate) fn join(batch: WriteBatch) -> Option<WriteBatch> {
    JOINING.with(|j| match j.borrow_mut().as_mut() {
        Some(joined) => {
            for op in batch.into_ops() {
                match op {
                    bisondb_engine::BatchOp::Put(k, v) => joined.put(k, v),
                    bisondb_engine::BatchOp::Insert(k, v) => joined.insert(k, v),
                    bisondb_engine::BatchOp::Delete(k) => joined.delete(k),
                }
            }
            None
        }
        None => Some(batch),
    })
}
