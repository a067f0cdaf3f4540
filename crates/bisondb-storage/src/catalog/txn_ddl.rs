//! Collections and indexes created inside a multi-document transaction, as
//! mongod 8 makes them: a collection a statement creates (by `create`, or
//! implicitly by a write or `createIndexes`) belongs to the transaction
//! alone until it commits. Its later statements find it
//! ([`Storage::collection`] asks the transaction entered on the thread) and
//! write to it through the transaction like to any other collection; others
//! do not see it. The commit writes its catalog record in the same engine
//! batch as the transaction's documents and publishes it; an abort leaves
//! nothing (its id is never reused).
//!
//! A collection of the same name that someone else created after the
//! statement (a plain `create`, another transaction's commit) makes the
//! commit fail with WriteConflict, as mongod's.
//!
//! An index may be created inside a transaction only on a collection the
//! transaction created and left empty, mongod's rule (on an existing
//! collection an index that already exists is the usual no-op), so no index
//! is ever built over documents here. Views, capped and time-series
//! collections cannot be created inside a transaction.
//!
//! Each change is also one `c` operation of the transaction's record (the
//! oplog's `applyOps` entry at commit), in statement order.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_engine::{EngineError, WriteBatch};
use bisondb_error::{ErrorCode, MongoError};
use bson::Document;
use parking_lot::MutexGuard;

use super::{check_names, create_command, encode_entry, encode_meta, existing_index, Storage};
use crate::error::StorageError;
use crate::index::{IndexSpec, IndexState};
use crate::layout;
use crate::store::txn::{Created, StoreTxn, TxnOp};
use crate::store::Collection;

fn not_in_transaction(msg: String) -> StorageError {
    StorageError::Mongo(MongoError::new(
        ErrorCode::OperationNotSupportedInTransaction,
        msg,
    ))
}

fn command_op(db: &str, uuid: bson::Uuid, o: &Document) -> Result<TxnOp, StorageError> {
    let o = bson::RawDocumentBuf::try_from(o)
        .map_err(|e| StorageError::internal(format!("command record: {e}")))?;
    Ok(TxnOp {
        ns: format!("{db}.$cmd"),
        uuid,
        op: "c",
        o,
        before: None,
    })
}

impl Storage {
    /// Creates `db.name` for the transaction `txn` (the caller checked that
    /// no collection of that name exists, for it or anyone).
    pub(super) fn create_in_txn(
        &self,
        txn: &StoreTxn,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Collection, StorageError> {
        check_names(db, name)?;
        txn.can_create()?;
        let kind = if options.contains_key("viewOn") {
            Some("a view")
        } else if options.contains_key("timeseries") {
            Some("a time-series collection")
        } else if options.get_bool("capped").unwrap_or(false) {
            Some("a capped collection")
        } else {
            None
        };
        if let Some(kind) = kind {
            return Err(not_in_transaction(format!(
                "Cannot create {kind} in a multi-document transaction: {db}.{name}"
            )));
        }
        let id = self.allocate_id()?;
        let state = Arc::new(self.new_state(id, db, options));
        let op = command_op(db, state.uuid, &create_command(name, &state.options.read()))?;
        let created = Created {
            db: db.to_string(),
            name: name.to_string(),
            state: state.clone(),
        };
        txn.add_ddl(Some(created), op);
        tracing::debug!(db, name, id, "collection created in a transaction");
        Ok(self.handle(state, db, name))
    }

    /// `create_index` inside the transaction `txn` on `coll`, which exists
    /// for it (committed, or created by it).
    pub(super) fn create_index_in_txn(
        &self,
        txn: &StoreTxn,
        coll: &Collection,
        spec: IndexSpec,
    ) -> Result<bool, MongoError> {
        let state = coll.state();
        if existing_index(state, &spec)? {
            return Ok(false);
        }
        let ns = coll.namespace();
        match txn.created_count(state.id) {
            None => {
                return Err(not_in_transaction(format!(
                    "Cannot create new indexes on existing collection {ns} in a multi-document transaction."
                ))
                .into())
            }
            Some(n) if n > 0 => {
                return Err(not_in_transaction(format!(
                    "Cannot create new indexes on non-empty collection {ns} in a multi-document transaction."
                ))
                .into())
            }
            Some(_) => {}
        }
        let id = self.allocate_id()?;
        let ix = Arc::new(IndexState::new(id, spec, false)?);
        let mut o = bson::doc! {"createIndexes": coll.name()};
        o.extend(ix.spec.to_document());
        // The collection is the transaction's alone: nobody else reads its
        // index list before the commit publishes it.
        let mut list = (**state.indexes.read()).clone();
        list.push(ix);
        *state.indexes.write() = Arc::new(list);
        txn.add_ddl(None, command_op(coll.db(), state.uuid, &o)?);
        Ok(true)
    }

    /// A new collection or index id; ids are never reused, so one a
    /// transaction took and did not commit is simply skipped.
    fn allocate_id(&self) -> Result<u64, StorageError> {
        let mut next_id = self.inner.ddl.lock();
        let id = *next_id;
        *next_id = id
            .checked_add(1)
            .ok_or_else(|| StorageError::internal("ids exhausted"))?;
        Ok(id)
    }

    /// The first half of a commit that created collections: under the DDL
    /// lock (returned, to be held until [`Storage::publish_created`]),
    /// refuses with WriteConflict when a collection of one of their names
    /// exists now, and adds their catalog records to `batch` (with the id
    /// counter, and empty stats for those `touched` does not say the commit
    /// writes stats for; the multikey markers of their indexes are among the
    /// transaction's own writes).
    ///
    /// On a shared store the commit is a catalog change like any other: it
    /// bumps the catalog's version in its batch, refused with WriteConflict
    /// when the stored version is not the one this server last read (another
    /// server changed the catalog, perhaps taking one of these ids, since);
    /// a change after that read is after the transaction's snapshot, so the
    /// store fails one of the two commits writing the version.
    pub(crate) fn stage_created(
        &self,
        created: &[Created],
        touched: impl Fn(u64) -> bool,
        batch: &mut WriteBatch,
    ) -> Result<Staged<'_>, StorageError> {
        let next_id = self.inner.ddl.lock();
        {
            let map = self.inner.collections.read();
            if let Some(c) = created
                .iter()
                .find(|c| map.contains_key(&(c.db.clone(), c.name.clone())))
            {
                return Err(EngineError::write_conflict(format!(
                    "Collection {}.{} was created by another operation while the transaction created it",
                    c.db, c.name
                ))
                .into());
            }
        }
        let mut version = None;
        if self.inner.server != 0 {
            let snap = self.inner.engine.snapshot()?;
            let stored = match snap.get(&layout::version_key())? {
                Some(v) => layout::decode_u64(&v)?,
                None => 0,
            };
            let taken = {
                let map = self.inner.collections.read();
                created
                    .iter()
                    .any(|c| map.values().any(|s| s.id == c.state.id))
            };
            if stored != self.inner.version.load(Ordering::Acquire) || taken {
                return Err(EngineError::write_conflict(
                    "the catalog was changed by another server sharing the store while the \
                     transaction created a collection; run the transaction again",
                )
                .into());
            }
            let next = stored.saturating_add(1);
            batch.put(layout::version_key(), next.to_be_bytes().to_vec());
            version = Some(next);
        }
        batch.put(layout::meta_key(), encode_meta(*next_id)?);
        for c in created {
            batch.put(
                layout::entry_key(&c.db, &c.name),
                encode_entry(&c.db, &c.name, &c.state)?,
            );
            if !touched(c.state.id) {
                batch.put(
                    layout::stats_key(c.state.id),
                    layout::encode_stats(&layout::StatsRecord::default()),
                );
            }
        }
        Ok(Staged {
            _ddl: next_id,
            version,
        })
    }

    /// The second half: after the commit's batch is written, the created
    /// collections join the catalog (the DDL lock is released on return).
    pub(crate) fn publish_created(&self, staged: Staged<'_>, created: Vec<Created>) {
        if let Some(version) = staged.version {
            self.inner.version.fetch_max(version, Ordering::AcqRel);
        }
        let mut map = self.inner.collections.write();
        for c in created {
            tracing::debug!(
                db = c.db,
                name = c.name,
                id = c.state.id,
                "collection committed"
            );
            map.insert((c.db, c.name), c.state);
        }
        drop(map);
        drop(staged);
    }
}

/// What [`Storage::stage_created`] holds until [`Storage::publish_created`]:
/// the DDL lock, and on a shared store the catalog version the commit writes.
pub(crate) struct Staged<'a> {
    /// Held, not read: released when the commit is published.
    _ddl: MutexGuard<'a, u64>,
    version: Option<u64>,
}
