//! The catalog: which databases and collections exist, their ids, UUIDs and
//! options, persisted in the engine so a persistent engine reopens with them.
//!
//! Locking: catalog changes (create, drop, rename) are serialized by one DDL
//! mutex, which is rare and never taken on the data path; lookups read a
//! `RwLock`ed map; each collection has its own write lock (in
//! [`crate::store`]), so inserts into different collections never contend.
//! Lock order is DDL, then a collection's write lock, then the map.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError};
use bson::{Binary, Bson, Document, RawDocumentBuf, Uuid};
use parking_lot::{Mutex, RwLock};

use crate::error::{shell_format_document, StorageError};
use crate::index::{self, IndexList, IndexSpec, IndexState};
use crate::layout;
use crate::store::capped::CappedState;
use crate::store::Collection;
use bisondb_engine::{Durability, Engine, WriteBatch};

/// Catalog format version written in the meta record.
const FORMAT_VERSION: i32 = 1;

/// The database of what a server keeps for itself (see [`single_server`]).
const LOCAL_DB: &str = "local";

/// Collections written as on a store of one server even when the store is
/// shared: those of `local`, which holds what a server keeps for itself (a
/// replica set's oplog: replica-set mode keeps to one server per store),
/// and capped collections, whose record-id sequence and evictions live in
/// the process that writes them. Each must be written through one server
/// only; nothing enforces it yet.
fn single_server(db: &str, capped: bool) -> bool {
    db == LOCAL_DB || capped
}

/// How many keys one cleanup batch deletes when a collection is dropped.
const DROP_CHUNK: usize = 4096;

/// What `listCollections` reports about one collection.
#[derive(Debug, Clone, PartialEq)]
pub struct CollectionInfo {
    pub name: String,
    pub options: Document,
    pub uuid: Uuid,
    /// Always `"collection"`: views and time-series collections are catalog
    /// entries like any other, told apart by their options, from which the
    /// server's `listCollections` reports `"view"` or `"timeseries"`.
    pub kind: &'static str,
}

/// What `dbStats` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DbStats {
    pub collections: u64,
    pub objects: u64,
    /// Sum of the BSON sizes of all documents.
    pub data_size: u64,
    /// The engine's on-disk size apportioned to this database's documents
    /// (see [`DiskShare`]).
    pub storage_size: u64,
    /// The `_id` index of each collection plus its secondary indexes.
    pub indexes: u64,
    /// The engine's on-disk size apportioned to those indexes.
    pub index_size: u64,
}

/// The engine's size on disk, apportioned to what it stores by logical bytes:
/// documents (their BSON sizes), `_id` indexes (the document keys) and
/// secondary indexes (their entries). The engine compresses and shares its
/// files, so no part has a file of its own to measure; the shares of all
/// parts add up to the whole. An engine without files (inMemory) has no
/// size on disk: every share is 0.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskShare {
    on_disk: u64,
    logical: u64,
}

impl DiskShare {
    /// The on-disk bytes of `logical` bytes.
    pub fn of(&self, logical: u64) -> u64 {
        if self.logical == 0 {
            return 0;
        }
        let share = u128::from(self.on_disk) * u128::from(logical) / u128::from(self.logical);
        u64::try_from(share).unwrap_or(u64::MAX)
    }
}

/// Logical bytes of one collection: documents, document keys, index entries.
fn logical_bytes(state: &CollState) -> (u64, u64, u64) {
    let indexes = state.indexes.read().iter().fold(0u64, |n, ix| {
        n.saturating_add(ix.bytes.load(Ordering::Relaxed))
    });
    (
        state.data_size.load(Ordering::Relaxed),
        state.id_bytes.load(Ordering::Relaxed),
        indexes,
    )
}

/// Shared state of one collection; every [`Collection`] handle points at it.
pub(crate) struct CollState {
    pub(crate) id: u64,
    /// Replaced whole (under `write_lock`) by `collMod`; readers clone the `Arc`.
    pub(crate) options: RwLock<Arc<Document>>,
    pub(crate) uuid: Uuid,
    /// Serializes read-check-write on this collection only.
    pub(crate) write_lock: Mutex<()>,
    pub(crate) count: AtomicU64,
    pub(crate) data_size: AtomicU64,
    /// Bytes of the document keys (the `_id` index); each secondary index keeps
    /// its own in its [`IndexState`].
    pub(crate) id_bytes: AtomicU64,
    /// Set (under `write_lock`) when the collection is dropped, so stale handles
    /// stop writing keys nobody will clean up.
    pub(crate) dropped: AtomicBool,
    /// The [`Engine::generation`] the stats (count, sizes) were read under.
    pub(crate) stats_generation: AtomicU64,
    /// Secondary indexes; replaced (under `write_lock`) when one is created or dropped.
    pub(crate) indexes: RwLock<IndexList>,
    /// Upper bounds of the collection's document keys, with the engine generation
    /// they were read under (taken under `write_lock`). A new key above them cannot
    /// exist, so inserts of increasing `_id`s (ObjectIds) skip the existence lookup.
    pub(crate) max_doc_key: Mutex<Option<crate::store::DocKeyBounds>>,
    /// Limits and record-id sequence of a capped collection (from `options`).
    pub(crate) capped: Option<CappedState>,
    /// The record-id sequence when documents are stored in insertion order
    /// (`store/records.rs`); `None` when they are clustered by `_id`.
    pub(crate) records: Option<crate::store::RecordIds>,
    /// `$indexStats`' counter of the `_id` index (the documents' own order).
    pub(crate) id_usage: crate::index::IndexUsage,
    /// On a shared store, this server's id (`0`: the store is not shared).
    pub(crate) server: u64,
    /// On a shared store, this server's record of the changes its writes
    /// made to the stats (`store/shared.rs`), under `write_lock`.
    pub(crate) own_stats: Mutex<layout::StatsRecord>,
    /// On a shared store, the catalog version this collection's entry was
    /// last read at on its own ([`Collection::reload_entry_locked`]); its
    /// options and indexes are those of the version that is the larger of
    /// this and the catalog's. Written under `write_lock`.
    ///
    /// [`Collection::reload_entry_locked`]: crate::Collection
    pub(crate) catalog_version: AtomicU64,
}

type Key = (String, String);

struct Inner {
    engine: Arc<dyn Engine>,
    collections: RwLock<BTreeMap<Key, Arc<CollState>>>,
    /// Serializes catalog changes; holds the next collection id.
    ddl: Mutex<u64>,
    /// Records each write in its batch, once installed (`crate::observer`).
    observer: std::sync::OnceLock<Arc<dyn crate::observer::OpObserver>>,
    /// On a shared store, this server's id (`0`: the store is not shared).
    server: u64,
    /// On a shared store, the catalog version the map above was read at
    /// (shared with every [`Collection`] handle, whose writes check it).
    version: Arc<AtomicU64>,
}

/// A handle on the whole store; cheap to clone and shareable across threads.
#[derive(Clone)]
pub struct Storage {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Storage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Storage")
            .field("engine", &self.inner.engine.name())
            .finish_non_exhaustive()
    }
}

impl Storage {
    /// Opens the store over `engine`, loading the catalog it holds (empty for a new
    /// engine) and finishing any drop a crash interrupted.
    ///
    /// Counts and per-collection locks live in the returned handle, so only one
    /// `Storage` may write to an engine at a time; clone the handle to share it.
    /// An engine that says [`Capabilities::shared`] is the exception: each
    /// `Storage` over it (each server) takes a server id from the store and
    /// keeps nothing another could make stale (`store/shared.rs`).
    ///
    /// [`Capabilities::shared`]: bisondb_engine::Capabilities::shared
    pub fn open(engine: Arc<dyn Engine>) -> Result<Storage, StorageError> {
        let server = if engine.capabilities().shared {
            crate::store::shared::take_server_id(engine.as_ref())?
        } else {
            0
        };
        let snap = engine.snapshot()?;
        let version = match snap.get(&layout::version_key())? {
            Some(v) if server != 0 => layout::decode_u64(&v)?,
            _ => 0,
        };
        let mut next_id = match snap.get(&layout::meta_key())? {
            Some(bytes) => parse_meta(&bytes)?,
            None => 1,
        };
        let mut collections = BTreeMap::new();
        let mut migrated = WriteBatch::new();
        let entries = catalog_entries(snap.as_ref())?;
        for (_, value) in entries {
            let (db, name, mut state, index_records) = parse_entry(&value)?;
            state.server = if single_server(&db, state.capped.is_some()) {
                0
            } else {
                server
            };
            let mut list = Vec::with_capacity(index_records.len());
            for (ix_id, spec, prepare_unique) in index_records {
                let multikey = snap.get(&index::multikey_key(state.id, ix_id))?.is_some();
                let ix = IndexState::new(ix_id, spec, multikey)
                    .map_err(|e| StorageError::corrupt(format!("stored index: {}", e.message)))?;
                ix.prepare_unique.store(prepare_unique, Ordering::Release);
                next_id = next_id.max(ix_id.saturating_add(1));
                list.push(Arc::new(ix));
            }
            *state.indexes.write() = Arc::new(list);
            if let Some(measured) = crate::store::load_stats(snap.as_ref(), &state)? {
                // Written by an older BisonDB, without index sizes: store them
                // so that this is the only open that measures.
                tracing::info!(db, name, "measured the sizes of the collection's indexes");
                migrated.put(layout::stats_key(state.id), layout::encode_stats(&measured));
            }
            state
                .stats_generation
                .store(engine.generation(), Ordering::Relaxed);
            next_id = next_id.max(state.id.saturating_add(1));
            collections.insert((db, name), Arc::new(state));
        }
        if !migrated.is_empty() {
            engine.write(migrated, Durability::Buffered)?;
        }
        let end = layout::pending_drop_prefix();
        let pending_end = bisondb_engine::prefix_successor(&end);
        let pending = snap.scan(
            Bound::Included(&end),
            pending_end
                .as_deref()
                .map_or(Bound::Unbounded, Bound::Excluded),
            false,
            usize::MAX,
        )?;
        for (key, _) in pending {
            let id = layout::pending_drop_id(&key)?;
            next_id = next_id.max(id.saturating_add(1));
            purge_collection_keys(engine.as_ref(), id)?;
        }
        tracing::debug!(
            engine = engine.name(),
            collections = collections.len(),
            "storage opened"
        );
        Ok(Storage {
            inner: Arc::new(Inner {
                engine,
                collections: RwLock::new(collections),
                ddl: Mutex::new(next_id),
                observer: std::sync::OnceLock::new(),
                server,
                version: Arc::new(AtomicU64::new(version)),
            }),
        })
    }

    /// Installs the observer that records every later write in its batch
    /// (`crate::observer`); once per store. `false` when one already is.
    pub fn set_op_observer(&self, observer: Arc<dyn crate::observer::OpObserver>) -> bool {
        self.inner.observer.set(observer).is_ok()
    }

    /// Writes a catalog change's batch, recorded by the observer as the
    /// command `o` (with `o2`) on `db` (`coll`, with `uuid`) when it observes
    /// `db`; `o` is built only then.
    fn write_catalog(
        &self,
        batch: WriteBatch,
        db: &str,
        coll: &str,
        uuid: Option<Uuid>,
        o: impl FnOnce() -> (Document, Option<Document>),
    ) -> Result<(), StorageError> {
        self.write_catalog_held(batch, None, db, coll, uuid, o)
    }

    /// [`Storage::write_catalog`] through `held`, a transaction that locked
    /// the entries the batch changes (see [`Storage::commit_catalog`]).
    fn write_catalog_held(
        &self,
        batch: WriteBatch,
        mut held: Option<Box<dyn bisondb_engine::Transaction>>,
        db: &str,
        coll: &str,
        uuid: Option<Uuid>,
        o: impl FnOnce() -> (Document, Option<Document>),
    ) -> Result<(), StorageError> {
        match self.inner.observer.get() {
            Some(observer) if observer.observes(db) => {
                let (o, o2) = o();
                let target = crate::observer::Target {
                    db,
                    coll,
                    uuid,
                    pre_images: false,
                };
                let op = crate::observer::Op::Command {
                    o: &o,
                    o2: o2.as_ref(),
                };
                observer.commit(target, &[op], batch, &mut |b| {
                    self.commit_catalog(b, held.take())
                })
            }
            _ => self.commit_catalog(batch, held),
        }
    }

    /// Writes a catalog change. On a shared store it bumps the catalog's
    /// version in the same transaction, which fails with WriteConflict,
    /// applying nothing, when another server changed the catalog since this
    /// one read it (the client runs the command again, which then starts
    /// from the other server's change).
    ///
    /// The entries it changes are locked first ([`Transaction::lock_key`]),
    /// waiting for the writes of other servers that hold them (each write
    /// share-locks its collection's entry until it commits,
    /// `store/shared.rs`): those writes commit first and read nothing
    /// stale, and every later one fails on the changed entry and runs again
    /// with it. `held` is a transaction that locked them already (an index
    /// build holds its collection's entry while it reads the documents).
    ///
    /// [`Transaction::lock_key`]: bisondb_engine::Transaction::lock_key
    fn commit_catalog(
        &self,
        mut batch: WriteBatch,
        held: Option<Box<dyn bisondb_engine::Transaction>>,
    ) -> Result<(), StorageError> {
        if self.inner.server == 0 {
            return Ok(self.inner.engine.write(batch, Durability::Buffered)?);
        }
        let mut txn = match held {
            Some(txn) => txn,
            None => self.inner.engine.begin()?,
        };
        let prefix = layout::entry_prefix();
        let mut entries: Vec<&[u8]> = batch
            .ops()
            .iter()
            .map(|op| op.key())
            .filter(|k| k.starts_with(&prefix))
            .collect();
        // One order on every server, so two changes cannot wait for each
        // other.
        entries.sort_unstable();
        entries.dedup();
        for key in entries {
            txn.lock_key(key)?;
        }
        let stored = match txn.get(&layout::version_key())? {
            Some(v) => layout::decode_u64(&v)?,
            None => 0,
        };
        if stored != self.inner.version.load(Ordering::Acquire) {
            return Err(bisondb_engine::EngineError::write_conflict(
                "the catalog was changed by another server sharing the store; run the \
                 command again",
            )
            .into());
        }
        let next = stored.saturating_add(1);
        batch.put(layout::version_key(), next.to_be_bytes().to_vec());
        txn.commit_batch(batch, Durability::Buffered)?;
        self.inner.version.store(next, Ordering::Release);
        Ok(())
    }

    /// The server id a collection writes as: this server's on a shared
    /// store, except for collections written as on a store of one server
    /// (see [`single_server`]).
    fn server_for(&self, db: &str, capped: bool) -> u64 {
        if single_server(db, capped) {
            0
        } else {
            self.inner.server
        }
    }

    /// Whether other servers share this store ([`Capabilities::shared`]):
    /// then [`Storage::refresh_catalog`] runs before each command.
    ///
    /// [`Capabilities::shared`]: bisondb_engine::Capabilities::shared
    pub fn is_shared(&self) -> bool {
        self.inner.server != 0
    }

    /// On a shared store, makes the catalog current: one read of its version
    /// and, when another server changed it, a new read of every entry
    /// (collections created, dropped or renamed, indexes built, dropped or
    /// changed, multikey markers). Handles of collections that another server
    /// dropped fail their writes with NamespaceNotFound from then on. A
    /// no-op on a store that is not shared.
    pub fn refresh_catalog(&self) -> Result<(), StorageError> {
        if self.inner.server == 0 {
            return Ok(());
        }
        let decode = |v: Option<Vec<u8>>| -> Result<u64, StorageError> {
            match v {
                Some(v) => layout::decode_u64(&v),
                None => Ok(0),
            }
        };
        let read_version = |snap: &dyn bisondb_engine::Snapshot| -> Result<u64, StorageError> {
            decode(snap.get(&layout::version_key())?)
        };
        // The common case, every command: one read of the key alone (one
        // round trip to a network store), no snapshot kept open.
        let latest = decode(self.inner.engine.get_latest(&layout::version_key())?)?;
        if latest == self.inner.version.load(Ordering::Acquire) {
            return Ok(());
        }
        let mut next_id = self.inner.ddl.lock();
        let snap = self.inner.engine.snapshot()?;
        let version = read_version(snap.as_ref())?;
        if version == self.inner.version.load(Ordering::Acquire) {
            return Ok(());
        }
        self.reload_locked(&mut next_id, snap.as_ref(), version)?;
        self.inner.version.store(version, Ordering::Release);
        tracing::debug!(version, "catalog changed by another server: read again");
        Ok(())
    }

    /// Reads the whole catalog from `snap` into the map, keeping the state
    /// of each collection whose id did not change (its counters and locks)
    /// and updating its options and indexes in place. The caller holds the
    /// DDL lock.
    fn reload_locked(
        &self,
        next_id: &mut u64,
        snap: &dyn bisondb_engine::Snapshot,
        version: u64,
    ) -> Result<(), StorageError> {
        if let Some(bytes) = snap.get(&layout::meta_key())? {
            *next_id = (*next_id).max(parse_meta(&bytes)?);
        }
        let entries = catalog_entries(snap)?;
        let old = self.inner.collections.read().clone();
        let mut map: BTreeMap<Key, Arc<CollState>> = BTreeMap::new();
        for (_, value) in entries {
            let (db, name, mut fresh, index_records) = parse_entry(&value)?;
            fresh.server = self.server_for(&db, fresh.capped.is_some());
            let key = (db, name);
            let options = fresh.options.read().clone();
            let kept = old.get(&key).filter(|s| s.id == fresh.id).cloned();
            let state = match kept {
                Some(s) => s,
                None => Arc::new(fresh),
            };
            let _w = state.write_lock.lock();
            let top = apply_entry_locked(snap, &state, index_records, options)?;
            *next_id = (*next_id).max(top);
            crate::store::load_stats(snap, &state)?;
            *next_id = (*next_id).max(state.id.saturating_add(1));
            state.catalog_version.store(version, Ordering::Release);
            drop(_w);
            map.insert(key, state);
        }
        for state in old.values() {
            if !map.values().any(|s| Arc::ptr_eq(s, state)) {
                let _w = state.write_lock.lock();
                state.dropped.store(true, Ordering::SeqCst);
            }
        }
        *self.inner.collections.write() = map;
        Ok(())
    }

    /// The engine's name (`"inMemory"`, ...).
    pub fn engine_name(&self) -> &'static str {
        self.inner.engine.name()
    }

    /// What the engine below this store offers (see [`bisondb_engine::Capabilities`]).
    pub fn capabilities(&self) -> bisondb_engine::Capabilities {
        self.inner.engine.capabilities()
    }

    /// The engine below this store.
    pub fn engine(&self) -> &Arc<dyn Engine> {
        &self.inner.engine
    }

    /// Database names, sorted; a database exists while it has a collection.
    pub fn list_databases(&self) -> Vec<String> {
        let map = self.inner.collections.read();
        let mut out: Vec<String> = Vec::new();
        for (db, _) in map.keys() {
            if out.last() != Some(db) {
                out.push(db.clone());
            }
        }
        out
    }

    /// The collections of `db`, sorted by name.
    pub fn list_collections(&self, db: &str) -> Vec<CollectionInfo> {
        self.collections_of(db)
            .into_iter()
            .map(|c| c.info())
            .collect()
    }

    fn collections_of(&self, db: &str) -> Vec<Collection> {
        let map = self.inner.collections.read();
        map.range((db.to_string(), String::new())..)
            .take_while(|((d, _), _)| d == db)
            .map(|((d, n), s)| {
                Collection::new(
                    self.inner.engine.clone(),
                    self.inner.observer.get().cloned(),
                    self.inner.version.clone(),
                    s.clone(),
                    d,
                    n,
                )
            })
            .collect()
    }

    /// A handle on `db.name`, if it exists (inside a transaction: for it,
    /// `catalog/txn_ddl.rs`).
    pub fn collection(&self, db: &str, name: &str) -> Option<Collection> {
        if let Some(state) = crate::store::txn::created_collection(db, name) {
            return Some(self.handle(state, db, name));
        }
        let map = self.inner.collections.read();
        map.get(&(db.to_string(), name.to_string())).map(|s| {
            Collection::new(
                self.inner.engine.clone(),
                self.inner.observer.get().cloned(),
                self.inner.version.clone(),
                s.clone(),
                db,
                name,
            )
        })
    }

    /// Begins a multi-document transaction on a snapshot taken now
    /// (`store/txn.rs`).
    pub fn begin_transaction(&self) -> Result<Arc<crate::store::StoreTxn>, StorageError> {
        crate::store::StoreTxn::begin(self)
    }

    /// Begins a multi-document transaction that reads `snapshot`, one of
    /// this storage's engine taken earlier (a transaction at a past cluster
    /// time); engines that cannot refuse (Unsupported).
    pub fn begin_transaction_on(
        &self,
        snapshot: Arc<dyn bisondb_engine::Snapshot>,
    ) -> Result<Arc<crate::store::StoreTxn>, StorageError> {
        crate::store::StoreTxn::begin_on(self, snapshot)
    }

    /// Creates `db.name`; `NamespaceExists` if it is already there.
    pub fn create_collection(
        &self,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Collection, StorageError> {
        check_names(db, name)?;
        if let Some(txn) = crate::store::txn::current() {
            if self.collection(db, name).is_some() {
                return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
            }
            return self.create_in_txn(&txn, db, name, options);
        }
        let mut next_id = self.inner.ddl.lock();
        if self.collection(db, name).is_some() {
            return Err(StorageError::NamespaceExists(format!("{db}.{name}")));
        }
        self.create_locked(&mut next_id, db, name, options)
    }

    /// The collection `db.name`, created with default options if missing (implicit
    /// creation by insert and upsert). Concurrent callers get the same collection.
    pub fn get_or_create_collection(
        &self,
        db: &str,
        name: &str,
    ) -> Result<Collection, StorageError> {
        if let Some(c) = self.collection(db, name) {
            return Ok(c);
        }
        check_names(db, name)?;
        if let Some(txn) = crate::store::txn::current() {
            return self.create_in_txn(&txn, db, name, Document::new());
        }
        let mut attempts = 0;
        loop {
            let created = {
                let mut next_id = self.inner.ddl.lock();
                if let Some(c) = self.collection(db, name) {
                    return Ok(c);
                }
                self.create_locked(&mut next_id, db, name, Document::new())
            };
            // On a shared store another server changed the catalog first
            // (perhaps creating this very collection): read it and look again.
            match created {
                Err(e) if self.inner.server != 0 && attempts < 5 && crate::store::lost_race(&e) => {
                    attempts += 1;
                    self.refresh_catalog()?;
                }
                other => return other,
            }
        }
    }

    fn create_locked(
        &self,
        next_id: &mut u64,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<Collection, StorageError> {
        let id = *next_id;
        let new_next = id
            .checked_add(1)
            .ok_or_else(|| StorageError::internal("collection ids exhausted"))?;
        let state = self.new_state(id, db, options);
        let mut batch = WriteBatch::new();
        batch.put(layout::meta_key(), encode_meta(new_next)?);
        batch.put(layout::entry_key(db, name), encode_entry(db, name, &state)?);
        batch.put(
            layout::stats_key(id),
            layout::encode_stats(&layout::StatsRecord::default()),
        );
        let uuid = state.uuid;
        self.write_catalog(batch, db, name, Some(uuid), || {
            (create_command(name, &state.options.read()), None)
        })?;
        *next_id = new_next;
        let state = Arc::new(state);
        self.inner
            .collections
            .write()
            .insert((db.to_string(), name.to_string()), state.clone());
        tracing::debug!(db, name, id, "collection created");
        Ok(self.handle(state, db, name))
    }

    /// A handle on the collection `state` is, named `db.name`.
    fn handle(&self, state: Arc<CollState>, db: &str, name: &str) -> Collection {
        Collection::new(
            self.inner.engine.clone(),
            self.inner.observer.get().cloned(),
            self.inner.version.clone(),
            state,
            db,
            name,
        )
    }

    /// The state of a new, empty collection `id` of database `db` with `options`.
    fn new_state(&self, id: u64, db: &str, options: Document) -> CollState {
        let capped = CappedState::from_options(&options);
        let server = self.server_for(db, capped.is_some());
        // mongod's ordinary collections keep insertion order; clustered ones
        // (time-series buckets among them) and capped ones stay by `_id`.
        let records = (capped.is_none()
            && !options.contains_key("clusteredIndex")
            && !options.contains_key("viewOn"))
        .then(crate::store::RecordIds::default);
        CollState {
            id,
            options: RwLock::new(Arc::new(options)),
            uuid: Uuid::new(),
            write_lock: Mutex::new(()),
            count: AtomicU64::new(0),
            data_size: AtomicU64::new(0),
            id_bytes: AtomicU64::new(0),
            dropped: AtomicBool::new(false),
            stats_generation: AtomicU64::new(self.inner.engine.generation()),
            indexes: RwLock::new(Arc::new(Vec::new())),
            max_doc_key: Mutex::new(None),
            capped,
            records,
            id_usage: crate::index::IndexUsage::new(),
            server,
            own_stats: Mutex::new(layout::StatsRecord::default()),
            catalog_version: AtomicU64::new(0),
        }
    }

    /// Drops `db.name` and all its documents; `false` if it did not exist.
    pub fn drop_collection(&self, db: &str, name: &str) -> Result<bool, StorageError> {
        let dropped = {
            let _ddl = self.inner.ddl.lock();
            self.unlink_locked(db, name)?
        };
        // Deleting the documents can take a while; other catalog changes need not
        // wait for it (the id is never reused, and `open` finishes it after a crash).
        match dropped {
            Some(id) => purge_collection_keys(self.inner.engine.as_ref(), id).map(|()| true),
            None => Ok(false),
        }
    }

    /// The catalog half of a drop, under the DDL lock: the collection disappears
    /// atomically and a pending-drop marker records that its keys must go.
    /// Returns the id whose keys the caller must purge.
    fn unlink_locked(&self, db: &str, name: &str) -> Result<Option<u64>, StorageError> {
        let key = (db.to_string(), name.to_string());
        let Some(state) = self.inner.collections.read().get(&key).cloned() else {
            return Ok(None);
        };
        // Waits for in-flight writes; later writes through stale handles see
        // `dropped` and fail instead of leaving orphan keys.
        let _w = state.write_lock.lock();
        let mut batch = WriteBatch::new();
        batch.delete(layout::entry_key(db, name));
        mark_dropped(&mut batch, state.id);
        self.write_catalog(batch, db, name, Some(state.uuid), || {
            let records = state.count.load(Ordering::Acquire);
            (
                bson::doc! {"drop": name},
                Some(bson::doc! {"numRecords": i64::try_from(records).unwrap_or(i64::MAX)}),
            )
        })?;
        state.dropped.store(true, Ordering::SeqCst);
        self.inner.collections.write().remove(&key);
        tracing::debug!(db, name, id = state.id, "collection dropped");
        Ok(Some(state.id))
    }

    /// Drops every collection of `db` (a no-op when it has none).
    pub fn drop_database(&self, db: &str) -> Result<(), StorageError> {
        let ids = {
            let _ddl = self.inner.ddl.lock();
            let names: Vec<String> = self
                .collections_of(db)
                .into_iter()
                .map(|c| c.name().to_string())
                .collect();
            let mut ids = Vec::with_capacity(names.len());
            for name in names {
                ids.extend(self.unlink_locked(db, &name)?);
            }
            if self.inner.observer.get().is_some_and(|o| o.observes(db)) {
                self.write_catalog(WriteBatch::new(), db, "", None, || {
                    (bson::doc! {"dropDatabase": 1i32}, None)
                })?;
            }
            ids
        };
        for id in ids {
            purge_collection_keys(self.inner.engine.as_ref(), id)?;
        }
        Ok(())
    }

    /// Renames `from_db.from` to `to_db.to`, keeping its documents, UUID and
    /// options. An existing target is dropped when `drop_target` (in the same
    /// atomic catalog write as the rename), otherwise the rename fails with
    /// `NamespaceExists`.
    pub fn rename_collection(
        &self,
        from_db: &str,
        from: &str,
        to_db: &str,
        to: &str,
        drop_target: bool,
    ) -> Result<(), StorageError> {
        check_names(to_db, to)?;
        let replaced = {
            let _ddl = self.inner.ddl.lock();
            self.rename_locked(from_db, from, to_db, to, drop_target)?
        };
        if let Some(id) = replaced {
            purge_collection_keys(self.inner.engine.as_ref(), id)?;
        }
        Ok(())
    }

    fn rename_locked(
        &self,
        from_db: &str,
        from: &str,
        to_db: &str,
        to: &str,
        drop_target: bool,
    ) -> Result<Option<u64>, StorageError> {
        let from_key = (from_db.to_string(), from.to_string());
        let to_key = (to_db.to_string(), to.to_string());
        let (source, target) = {
            let map = self.inner.collections.read();
            (map.get(&from_key).cloned(), map.get(&to_key).cloned())
        };
        let Some(source) = source else {
            return Err(StorageError::NamespaceNotFound(format!("{from_db}.{from}")));
        };
        if from_key == to_key {
            return Err(StorageError::IllegalOperation(
                "Can't rename a collection to itself".into(),
            ));
        }
        if target.is_some() && !drop_target {
            return Err(StorageError::NamespaceExists(format!("{to_db}.{to}")));
        }
        // Both write locks: writers only ever hold one, so this cannot deadlock.
        let _target_lock = target.as_ref().map(|t| t.write_lock.lock());
        let _source_lock = source.write_lock.lock();
        let mut batch = WriteBatch::new();
        if let Some(t) = &target {
            mark_dropped(&mut batch, t.id);
        }
        batch.delete(layout::entry_key(from_db, from));
        batch.put(
            layout::entry_key(to_db, to),
            encode_entry(to_db, to, &source)?,
        );
        self.write_catalog(batch, from_db, from, Some(source.uuid), || {
            let drop_target = match &target {
                Some(t) => Bson::Binary(Binary::from_uuid(t.uuid)),
                None => Bson::Boolean(false),
            };
            (
                bson::doc! {
                    "renameCollection": format!("{from_db}.{from}"),
                    "to": format!("{to_db}.{to}"),
                    "stayTemp": false,
                    "dropTarget": drop_target,
                },
                None,
            )
        })?;
        if let Some(t) = &target {
            t.dropped.store(true, Ordering::SeqCst);
        }
        let mut map = self.inner.collections.write();
        map.remove(&from_key);
        map.insert(to_key, source.clone());
        Ok(target.as_ref().map(|t| t.id))
    }

    /// Creates a secondary index on `db.name` (creating the collection when
    /// missing) and builds it over the existing documents. Returns `false`
    /// when an identical index already exists. Conflicting definitions fail
    /// with mongod's codes (85 IndexOptionsConflict, 86 IndexKeySpecsConflict);
    /// a unique build over duplicates fails with 11000 and leaves nothing.
    ///
    /// Writers to the collection wait while the index builds, so the index
    /// is complete the moment it becomes visible.
    pub fn create_index(&self, db: &str, name: &str, spec: IndexSpec) -> Result<bool, MongoError> {
        check_names(db, name)?;
        if let Some(txn) = crate::store::txn::current() {
            let coll = match self.collection(db, name) {
                Some(c) => c,
                None => self.create_in_txn(&txn, db, name, Document::new())?,
            };
            return self.create_index_in_txn(&txn, &coll, spec);
        }
        let mut next_id = self.inner.ddl.lock();
        let coll = match self.collection(db, name) {
            Some(c) => c,
            None => self.create_locked(&mut next_id, db, name, Document::new())?,
        };
        let state = coll.state().clone();
        if existing_index(&state, &spec)? {
            return Ok(false);
        }
        let id = *next_id;
        let new_next = id
            .checked_add(1)
            .ok_or_else(|| StorageError::internal("ids exhausted"))?;
        let ix = Arc::new(IndexState::new(id, spec, false)?);
        let _w = state.write_lock.lock();
        if state.dropped.load(Ordering::SeqCst) {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")).into());
        }
        // On a shared store, other servers' writers of the collection wait
        // from here until the index is in the catalog, as this server's
        // wait on the write lock: the entry is locked before the build
        // reads the documents (its snapshot is taken after), so each write
        // committed before (the build sees it) or commits after the index
        // is in the catalog and then maintains it (`store/shared.rs`).
        let held = if self.inner.server != 0 {
            let mut txn = self.inner.engine.begin()?;
            txn.lock_key(&layout::entry_key(db, name))?;
            Some(txn)
        } else {
            None
        };
        let (multikey, tally) = match coll.build_index_locked(&ix) {
            Ok(m) => m,
            Err(e) => {
                purge_range(self.inner.engine.as_ref(), index::index_range(state.id, id))?;
                return Err(e.into());
            }
        };
        ix.multikey.store(multikey, Ordering::Release);
        let previous = state.indexes.read().clone();
        let mut list = (*previous).clone();
        list.push(ix);
        let list = Arc::new(list);
        *state.indexes.write() = list.clone();
        let mut batch = WriteBatch::new();
        batch.put(layout::meta_key(), encode_meta(new_next)?);
        let before = coll.tally_locked(&previous);
        let own = coll.queue_stats_locked(&mut batch, &before, &tally);
        let record = encode_entry(db, name, &state);
        match record {
            Ok(r) => batch.put(layout::entry_key(db, name), r),
            Err(e) => {
                *state.indexes.write() = previous;
                return Err(e.into());
            }
        }
        if multikey {
            batch.put(index::multikey_key(state.id, id), Vec::new());
        }
        let spec_doc = || {
            let mut o = bson::doc! {"createIndexes": name};
            if let Some(ix) = list.last() {
                o.extend(ix.spec.to_document());
            }
            (o, None)
        };
        if let Err(e) = self.write_catalog_held(batch, held, db, name, Some(state.uuid), spec_doc) {
            *state.indexes.write() = previous;
            purge_range(self.inner.engine.as_ref(), index::index_range(state.id, id))?;
            return Err(e.into());
        }
        coll.keep_own_stats_locked(own);
        coll.publish_tally_locked(&tally, &list);
        *next_id = new_next;
        tracing::debug!(db, name, index = id, "index created");
        Ok(true)
    }

    /// Drops the secondary index `index_name` of `db.name`; `false` when there
    /// is no such index.
    pub fn drop_index(&self, db: &str, name: &str, index_name: &str) -> Result<bool, StorageError> {
        let (coll_id, ix_id) = {
            let _ddl = self.inner.ddl.lock();
            let Some(coll) = self.collection(db, name) else {
                return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")));
            };
            let state = coll.state().clone();
            let _w = state.write_lock.lock();
            let previous = state.indexes.read().clone();
            let Some(ix) = previous.iter().find(|i| i.spec.name == index_name).cloned() else {
                return Ok(false);
            };
            let list: Vec<_> = previous.iter().filter(|i| i.id != ix.id).cloned().collect();
            *state.indexes.write() = Arc::new(list);
            let mut batch = WriteBatch::new();
            match encode_entry(db, name, &state) {
                Ok(r) => batch.put(layout::entry_key(db, name), r),
                Err(e) => {
                    *state.indexes.write() = previous;
                    return Err(e);
                }
            }
            batch.delete(index::multikey_key(state.id, ix.id));
            let o = || {
                (
                    bson::doc! {"dropIndexes": name, "index": index_name},
                    Some(ix.spec.to_document()),
                )
            };
            if let Err(e) = self.write_catalog(batch, db, name, Some(state.uuid), o) {
                *state.indexes.write() = previous;
                return Err(e);
            }
            (state.id, ix.id)
        };
        // Readers that planned with the index before it went away may miss
        // entries from here on; ids are never reused, so nothing else sees them.
        purge_range(
            self.inner.engine.as_ref(),
            index::index_range(coll_id, ix_id),
        )?;
        Ok(true)
    }

    /// Replaces the options of `db.name` (`collMod`: a validator, a view's
    /// definition). The new options are persisted before any writer sees them.
    pub fn set_collection_options(
        &self,
        db: &str,
        name: &str,
        options: Document,
    ) -> Result<(), StorageError> {
        let _ddl = self.inner.ddl.lock();
        let Some(coll) = self.collection(db, name) else {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")));
        };
        let state = coll.state().clone();
        // Writers check the validator before they take this lock; holding it
        // orders the change after every write already in flight.
        let _w = state.write_lock.lock();
        let previous = std::mem::replace(&mut *state.options.write(), Arc::new(options));
        let mut batch = WriteBatch::new();
        let written = encode_entry(db, name, &state).and_then(|r| {
            batch.put(layout::entry_key(db, name), r);
            self.write_catalog(batch, db, name, Some(state.uuid), || {
                // mongod records the options collMod set; the store knows
                // the whole new set of them.
                let mut o = bson::doc! {"collMod": name};
                for (k, v) in state.options.read().iter() {
                    o.insert(k.clone(), v.clone());
                }
                (o, None)
            })
        });
        if let Err(e) = written {
            *state.options.write() = previous;
            return Err(e);
        }
        Ok(())
    }

    /// Changes the definition of the secondary index `index_name` of `db.name`
    /// in place (`collMod`: `hidden`, `expireAfterSeconds`); its entries stay as
    /// they are, so only options that do not change the keys may be edited.
    /// Returns the spec before and after, or `None` when there is no such index.
    pub fn modify_index(
        &self,
        db: &str,
        name: &str,
        index_name: &str,
        edit: &dyn Fn(&mut IndexSpec),
    ) -> Result<Option<(IndexSpec, IndexSpec)>, MongoError> {
        let _ddl = self.inner.ddl.lock();
        let Some(coll) = self.collection(db, name) else {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")).into());
        };
        let state = coll.state().clone();
        let _w = state.write_lock.lock();
        let previous = state.indexes.read().clone();
        let Some(old) = previous.iter().find(|i| i.spec.name == index_name).cloned() else {
            return Ok(None);
        };
        let mut spec = old.spec.clone();
        edit(&mut spec);
        let replacement = Arc::new(IndexState::new(
            old.id,
            spec.clone(),
            old.multikey.load(Ordering::Acquire),
        )?);
        replacement.prepare_unique.store(
            old.prepare_unique.load(Ordering::Acquire),
            Ordering::Release,
        );
        // Same id, same entries.
        replacement.set_tally(&old.tally());
        *state.indexes.write() = Arc::new(with_index_replaced(&previous, old.id, &replacement));
        let mut batch = WriteBatch::new();
        let written = encode_entry(db, name, &state).and_then(|r| {
            batch.put(layout::entry_key(db, name), r);
            self.write_catalog(batch, db, name, Some(state.uuid), || {
                let mut index = bson::doc! {"name": index_name};
                let new = spec.to_document();
                let before = old.spec.to_document();
                for (k, v) in new.iter() {
                    if before.get(k) != Some(v) {
                        index.insert(k.clone(), v.clone());
                    }
                }
                (bson::doc! {"collMod": name, "index": index}, None)
            })
        });
        if let Err(e) = written {
            *state.indexes.write() = previous;
            return Err(e.into());
        }
        Ok(Some((old.spec.clone(), spec)))
    }

    /// Sets `prepareUnique` on the secondary index `index_name` of `db.name`
    /// (`collMod`): from then on writes may not add a key another document
    /// has. Returns the previous value, or `None` when there is no such index.
    pub fn set_index_prepare_unique(
        &self,
        db: &str,
        name: &str,
        index_name: &str,
        prepare: bool,
    ) -> Result<Option<bool>, StorageError> {
        let _ddl = self.inner.ddl.lock();
        let Some(coll) = self.collection(db, name) else {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")));
        };
        let state = coll.state().clone();
        // Writers read the flag under this lock, so none is half-way through.
        let _w = state.write_lock.lock();
        let list = state.indexes.read().clone();
        let Some(ix) = list.iter().find(|i| i.spec.name == index_name) else {
            return Ok(None);
        };
        let old = ix.prepare_unique.swap(prepare, Ordering::AcqRel);
        let mut batch = WriteBatch::new();
        let written = encode_entry(db, name, &state).and_then(|r| {
            batch.put(layout::entry_key(db, name), r);
            self.commit_catalog(batch, None)
        });
        if let Err(e) = written {
            ix.prepare_unique.store(old, Ordering::Release);
            return Err(e);
        }
        Ok(Some(old))
    }

    /// Rebuilds the secondary index `index_name` of `db.name` as unique or as
    /// non-unique (`collMod`'s `unique` / `forceNonUnique`; the key format
    /// differs, so its entries are written anew under a new index id).
    /// Converting to unique first looks for keys several documents share:
    /// `Ok(Err(groups))` lists their `_id`s and nothing changes. `Ok(Ok(false))`
    /// when there is no such index.
    pub fn convert_index(
        &self,
        db: &str,
        name: &str,
        index_name: &str,
        unique: bool,
    ) -> Result<Result<bool, Vec<Vec<Bson>>>, MongoError> {
        let mut next_id = self.inner.ddl.lock();
        let Some(coll) = self.collection(db, name) else {
            return Err(StorageError::NamespaceNotFound(format!("{db}.{name}")).into());
        };
        let state = coll.state().clone();
        let _w = state.write_lock.lock();
        let previous = state.indexes.read().clone();
        let Some(old) = previous.iter().find(|i| i.spec.name == index_name).cloned() else {
            return Ok(Ok(false));
        };
        if unique {
            let groups = coll.shared_keys_locked(&old)?;
            if !groups.is_empty() {
                return Ok(Err(groups));
            }
        }
        let id = *next_id;
        let new_next = id
            .checked_add(1)
            .ok_or_else(|| StorageError::internal("ids exhausted"))?;
        let mut spec = old.spec.clone();
        spec.unique = unique;
        let ix = Arc::new(IndexState::new(id, spec, false)?);
        let (multikey, mut tally) = match coll.build_index_locked(&ix) {
            Ok(m) => m,
            Err(e) => {
                purge_range(self.inner.engine.as_ref(), index::index_range(state.id, id))?;
                return Err(e.into());
            }
        };
        tally.indexes.retain(|t| t.id != old.id);
        ix.multikey.store(multikey, Ordering::Release);
        // A unique index needs no preparation any more; a non-unique one starts without.
        let list = Arc::new(with_index_replaced(&previous, old.id, &ix));
        *state.indexes.write() = list.clone();
        let mut batch = WriteBatch::new();
        let before = coll.tally_locked(&previous);
        let own = coll.queue_stats_locked(&mut batch, &before, &tally);
        let written = encode_meta(new_next)
            .and_then(|meta| {
                batch.put(layout::meta_key(), meta);
                encode_entry(db, name, &state)
            })
            .and_then(|r| {
                batch.put(layout::entry_key(db, name), r);
                if multikey {
                    batch.put(index::multikey_key(state.id, id), Vec::new());
                }
                batch.delete(index::multikey_key(state.id, old.id));
                self.commit_catalog(batch, None)
            });
        if let Err(e) = written {
            *state.indexes.write() = previous;
            purge_range(self.inner.engine.as_ref(), index::index_range(state.id, id))?;
            return Err(e.into());
        }
        coll.keep_own_stats_locked(own);
        coll.publish_tally_locked(&tally, &list);
        *next_id = new_next;
        // The old entries are unreachable now; ids are never reused.
        purge_range(
            self.inner.engine.as_ref(),
            index::index_range(state.id, old.id),
        )?;
        Ok(Ok(true))
    }

    /// Durability barrier for everything written so far.
    pub fn sync(&self) -> Result<(), StorageError> {
        Ok(self.inner.engine.sync()?)
    }

    /// Flushes buffered data into the engine's data files and syncs (`fsync`).
    pub fn checkpoint(&self) -> Result<(), StorageError> {
        Ok(self.inner.engine.checkpoint()?)
    }

    /// [`Storage::checkpoint`], then waits for the engine's background work to
    /// stop changing its files (`fsync` with `lock: true`).
    pub fn checkpoint_and_settle(&self) -> Result<(), StorageError> {
        Ok(self.inner.engine.checkpoint_and_settle()?)
    }

    /// Whether sizes read now would leave out a noticeable part of the data:
    /// more than a sixteenth of what the data files hold (and at least 4 KiB)
    /// is still only in memory tables and the journal, as right after a load.
    /// The size commands then flush first ([`Storage::checkpoint`]), so what
    /// they report agrees with the files a clean shutdown leaves. Each such
    /// flush writes at least a sixteenth of the data, so however often sizes
    /// are asked, they add at most one flush per 6% of growth.
    pub fn sizes_need_flush(&self) -> bool {
        let unflushed = self.inner.engine.unflushed_bytes();
        unflushed >= 4096 && unflushed > self.inner.engine.size_on_disk() / 16
    }

    /// The engine's own figures (`serverStatus.bisondb`, the metrics endpoint).
    pub fn engine_metrics(&self) -> Vec<crate::EngineMetric> {
        self.inner.engine.metrics()
    }

    /// How the engine's size on disk divides among what it stores.
    pub fn disk_share(&self) -> DiskShare {
        let logical = self
            .inner
            .collections
            .read()
            .values()
            .fold(0u64, |n, state| {
                let (docs, keys, indexes) = logical_bytes(state);
                n.saturating_add(docs)
                    .saturating_add(keys)
                    .saturating_add(indexes)
            });
        DiskShare {
            on_disk: self.inner.engine.size_on_disk(),
            logical,
        }
    }

    /// Counts and sizes for `dbStats`; all zero for a missing database.
    pub fn database_stats(&self, db: &str) -> DbStats {
        let share = self.disk_share();
        let mut stats = DbStats::default();
        let (mut doc_bytes, mut index_bytes) = (0u64, 0u64);
        let collections = self.inner.collections.read();
        for (_, state) in collections.iter().filter(|(k, _)| k.0 == db) {
            let (docs, keys, indexes) = logical_bytes(state);
            stats.collections += 1;
            // Every collection has its `_id` index, except a clustered
            // one: its documents are that index, which mongod does not count.
            let id_index = !state.options.read().contains_key("clusteredIndex");
            stats.indexes += u64::from(id_index) + state.indexes.read().len() as u64;
            stats.objects = stats
                .objects
                .saturating_add(state.count.load(Ordering::Relaxed));
            stats.data_size = stats.data_size.saturating_add(docs);
            doc_bytes = doc_bytes.saturating_add(docs);
            index_bytes = index_bytes.saturating_add(indexes);
            // A clustered collection's keys count with its documents.
            if id_index {
                index_bytes = index_bytes.saturating_add(keys);
            } else {
                doc_bytes = doc_bytes.saturating_add(keys);
            }
        }
        stats.storage_size = share.of(doc_bytes);
        stats.index_size = share.of(index_bytes);
        stats
    }
}

/// Whether `spec` exists on the collection already (the same name and
/// definition); an index it clashes with is its error.
fn existing_index(state: &CollState, spec: &IndexSpec) -> Result<bool, MongoError> {
    for ix in state.indexes.read().iter() {
        if let Some(e) = conflict(&ix.spec, spec)? {
            return Err(e);
        }
        if ix.spec.name == spec.name {
            return Ok(true);
        }
    }
    Ok(false)
}

/// The oplog's record of creating collection `name` with `options`, as
/// mongod writes it (with its `_id` index unless clustered or a view).
fn create_command(name: &str, options: &Document) -> Document {
    let mut o = bson::doc! {"create": name};
    for (k, v) in options.iter() {
        o.insert(k.clone(), v.clone());
    }
    if !o.contains_key("clusteredIndex") && !o.contains_key("viewOn") {
        o.insert(
            "idIndex",
            bson::doc! {"v": 2i32, "key": {"_id": 1i32}, "name": "_id_"},
        );
    }
    o
}

/// How a requested index clashes with an existing one, as mongod's
/// `_doesSpecConflictWithExisting` reports it; `None` when they are
/// unrelated (another name and another signature) or identical.
fn conflict(existing: &IndexSpec, requested: &IndexSpec) -> Result<Option<MongoError>, MongoError> {
    let same_name = existing.name == requested.name;
    let same_signature = existing.same_signature(requested);
    let same_options = existing.same_options(requested);
    let show = |s: &IndexSpec| shell_format_document(&s.to_document());
    Ok(match (same_name, same_signature, same_options) {
        (true, true, true) | (false, false, _) => None,
        (true, false, _) => Some(MongoError::new(
            ErrorCode::IndexKeySpecsConflict,
            format!(
                "An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: {}, existing index: {}",
                show(requested),
                show(existing)
            ),
        )),
        (true, true, false) => Some(MongoError::new(
            ErrorCode::IndexOptionsConflict,
            format!(
                "An equivalent index already exists with the same name but different options. Requested index: {}, existing index: {}",
                show(requested),
                show(existing)
            ),
        )),
        (false, true, _) => Some(MongoError::new(
            ErrorCode::IndexOptionsConflict,
            format!("Index already exists with a different name: {}", existing.name),
        )),
    })
}

/// Names the catalog key layout cannot represent. Full namespace validation
/// (mongod's rules and messages) belongs to the server.
/// Gives `state` the indexes and options of its catalog entry as parsed
/// (`index_records`, `options`), reading the multikey markers from `snap`;
/// indexes that did not change keep their state (usage counters, multikey).
/// The caller holds `state`'s write lock. Returns one above the largest
/// index id, for the caller's next id.
fn apply_entry_locked(
    snap: &dyn bisondb_engine::Snapshot,
    state: &CollState,
    index_records: Vec<IndexRecord>,
    options: Arc<Document>,
) -> Result<u64, StorageError> {
    let previous = state.indexes.read().clone();
    let mut list = Vec::with_capacity(index_records.len());
    let mut top = 0u64;
    for (ix_id, spec, prepare_unique) in index_records {
        let multikey = snap.get(&index::multikey_key(state.id, ix_id))?.is_some();
        top = top.max(ix_id.saturating_add(1));
        let ix = match previous.iter().find(|i| i.id == ix_id && i.spec == spec) {
            Some(ix) => {
                if multikey {
                    ix.multikey.store(true, Ordering::Release);
                }
                ix.clone()
            }
            None => Arc::new(
                IndexState::new(ix_id, spec, multikey)
                    .map_err(|e| StorageError::corrupt(format!("stored index: {}", e.message)))?,
            ),
        };
        ix.prepare_unique.store(prepare_unique, Ordering::Release);
        list.push(ix);
    }
    *state.indexes.write() = Arc::new(list);
    *state.options.write() = options;
    Ok(top)
}

/// On a shared store, reads the catalog entry of `db.name` (the collection
/// `state` is, whose write lock the caller holds) again from `snap`, with
/// the catalog's version there: a write that lost a race to another
/// server's catalog change then plans with the collection's indexes as
/// they are now, without waiting for the next command's refresh of the
/// whole catalog (which needs locks the writer holds). A collection whose
/// entry is gone, or is another collection now, was dropped or renamed:
/// NamespaceNotFound (the next command reads the whole catalog).
pub(crate) fn reload_entry_locked(
    snap: &dyn bisondb_engine::Snapshot,
    state: &CollState,
    db: &str,
    name: &str,
) -> Result<(), StorageError> {
    let version = match snap.get(&layout::version_key())? {
        Some(v) => layout::decode_u64(&v)?,
        None => 0,
    };
    let gone = || StorageError::NamespaceNotFound(format!("{db}.{name}"));
    let bytes = snap.get(&layout::entry_key(db, name))?.ok_or_else(gone)?;
    let (_, _, fresh, index_records) = parse_entry(&bytes)?;
    if fresh.id != state.id {
        return Err(gone());
    }
    let options = fresh.options.read().clone();
    apply_entry_locked(snap, state, index_records, options)?;
    state.catalog_version.store(version, Ordering::Release);
    tracing::debug!(db, name, version, "collection's catalog entry read again");
    Ok(())
}

fn check_names(db: &str, name: &str) -> Result<(), StorageError> {
    if db.is_empty() || db.contains(['\0', '.']) {
        return Err(StorageError::invalid_argument(format!(
            "Invalid database name: '{db}'"
        )));
    }
    if name.is_empty() || name.contains('\0') {
        return Err(StorageError::invalid_argument(format!(
            "Invalid collection name: '{name}'"
        )));
    }
    // mongod's limit on `db.coll` (NamespaceString::MaxNsCollectionLen), checked
    // here because every way of making a namespace (create, implicit creation,
    // rename, $out/$merge targets, views) passes through this function.
    if db.len() + 1 + name.len() > MAX_NAMESPACE_BYTES {
        return Err(StorageError::Mongo(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!(
                "Fully qualified namespace is too long. Namespace: {db}.{name} Max: {MAX_NAMESPACE_BYTES}"
            ),
        )));
    }
    Ok(())
}

/// The longest `db.collection` mongod accepts, in bytes.
pub const MAX_NAMESPACE_BYTES: usize = 255;

/// Queues the removal of collection `id`'s stats and a marker saying its
/// documents still have to be purged.
fn mark_dropped(batch: &mut WriteBatch, id: u64) {
    batch.delete(layout::stats_key(id));
    batch.put(layout::pending_drop_key(id), Vec::new());
}

/// Deletes every document and the stats of collection `id`, then its pending-drop
/// marker, in bounded batches (a crash midway is finished by the next `open`).
/// Every catalog entry `snap` holds.
fn catalog_entries(
    snap: &dyn bisondb_engine::Snapshot,
) -> Result<Vec<bisondb_engine::KeyValue>, StorageError> {
    let (start, end) = (layout::entry_prefix(), layout::pending_drop_prefix());
    Ok(snap.scan(
        Bound::Included(&start),
        Bound::Excluded(&end),
        false,
        usize::MAX,
    )?)
}

fn purge_collection_keys(engine: &dyn Engine, id: u64) -> Result<(), StorageError> {
    purge_range(engine, layout::doc_range(id))?;
    for range in index::collection_ranges(id) {
        purge_range(engine, range)?;
    }
    for range in crate::store::capped::collection_ranges(id) {
        purge_range(engine, range)?;
    }
    if engine.capabilities().shared {
        // Each server's stats record too (`store/shared.rs`).
        purge_range(engine, layout::stats_range(id))?;
    }
    let mut batch = WriteBatch::new();
    batch.delete(layout::stats_key(id));
    batch.delete(layout::pending_drop_key(id));
    Ok(engine.write(batch, Durability::Buffered)?)
}

/// Deletes every key in `[start, end)` in bounded batches.
pub(crate) fn purge_range(
    engine: &dyn Engine,
    (start, end): (Vec<u8>, Vec<u8>),
) -> Result<(), StorageError> {
    // Each chunk resumes after the last key deleted: restarting at `start`
    // would make every scan wade through all the tombstones left so far
    // (quadratic on an LSM tree). Nothing writes into the range any more.
    let mut resume: Option<Vec<u8>> = None;
    loop {
        let snap = engine.snapshot()?;
        let from = match &resume {
            Some(k) => Bound::Excluded(k.as_slice()),
            None => Bound::Included(start.as_slice()),
        };
        let chunk = snap.scan(from, Bound::Excluded(&end), false, DROP_CHUNK)?;
        let Some((last, _)) = chunk.last() else {
            break;
        };
        resume = Some(last.clone());
        let mut batch = WriteBatch::with_capacity(chunk.len());
        for (k, _) in chunk {
            batch.delete(k);
        }
        engine.write(batch, Durability::Buffered)?;
    }
    Ok(())
}

fn to_bytes(doc: &Document) -> Result<Vec<u8>, StorageError> {
    RawDocumentBuf::try_from(doc)
        .map(RawDocumentBuf::into_bytes)
        .map_err(|e| StorageError::internal(format!("cannot encode catalog record: {e}")))
}

fn from_bytes(bytes: &[u8]) -> Result<Document, StorageError> {
    RawDocumentBuf::from_bytes(bytes.to_vec())
        .ok()
        .and_then(|raw| Document::try_from(raw).ok())
        .ok_or_else(|| StorageError::corrupt("undecodable catalog record"))
}

fn encode_meta(next_id: u64) -> Result<Vec<u8>, StorageError> {
    let mut doc = Document::new();
    doc.insert("version", FORMAT_VERSION);
    doc.insert(
        "nextId",
        i64::try_from(next_id).map_err(|_| StorageError::internal("collection id overflow"))?,
    );
    to_bytes(&doc)
}

fn parse_meta(bytes: &[u8]) -> Result<u64, StorageError> {
    let doc = from_bytes(bytes)?;
    match doc.get_i32("version") {
        Ok(FORMAT_VERSION) => {}
        Ok(v) => {
            return Err(StorageError::corrupt(format!(
                "unsupported catalog format version {v}"
            )))
        }
        Err(_) => return Err(StorageError::corrupt("catalog meta without version")),
    }
    doc.get_i64("nextId")
        .ok()
        .and_then(|n| u64::try_from(n).ok())
        .ok_or_else(|| StorageError::corrupt("catalog meta without nextId"))
}

fn encode_entry(db: &str, name: &str, state: &CollState) -> Result<Vec<u8>, StorageError> {
    let mut doc = Document::new();
    doc.insert("db", db);
    doc.insert("name", name);
    doc.insert(
        "id",
        i64::try_from(state.id).map_err(|_| StorageError::internal("collection id overflow"))?,
    );
    doc.insert("uuid", Bson::Binary(Binary::from(state.uuid)));
    doc.insert("options", state.options.read().as_ref().clone());
    // Absent: documents clustered by `_id` (every entry written before
    // record ids existed reads that way).
    if state.records.is_some() {
        doc.insert("recordIds", true);
    }
    // Absent: a capped collection with natural-order keys.
    if state.capped.as_ref().is_some_and(|c| c.by_key()) {
        doc.insert("byKey", true);
    }
    let mut list = Vec::new();
    for ix in state.indexes.read().iter() {
        let mut d = Document::new();
        d.insert(
            "id",
            i64::try_from(ix.id).map_err(|_| StorageError::internal("index id overflow"))?,
        );
        d.insert("spec", ix.spec.to_document());
        if ix.prepare_unique.load(Ordering::Acquire) {
            d.insert("prepareUnique", true);
        }
        list.push(Bson::Document(d));
    }
    if !list.is_empty() {
        doc.insert("indexes", list);
    }
    to_bytes(&doc)
}

/// A stored index definition: its id and spec.
/// A stored index definition: its id, spec and `prepareUnique` flag.
type IndexRecord = (u64, IndexSpec, bool);

fn parse_entry(
    bytes: &[u8],
) -> Result<(String, String, CollState, Vec<IndexRecord>), StorageError> {
    let doc = from_bytes(bytes)?;
    let corrupt = |what: &str| StorageError::corrupt(format!("catalog entry without valid {what}"));
    let db = doc.get_str("db").map_err(|_| corrupt("db"))?.to_string();
    let name = doc
        .get_str("name")
        .map_err(|_| corrupt("name"))?
        .to_string();
    let id = doc
        .get_i64("id")
        .ok()
        .and_then(|i| u64::try_from(i).ok())
        .ok_or_else(|| corrupt("id"))?;
    let uuid = match doc.get("uuid") {
        Some(Bson::Binary(b)) => <[u8; 16]>::try_from(b.bytes.as_slice())
            .map(Uuid::from_bytes)
            .map_err(|_| corrupt("uuid"))?,
        _ => return Err(corrupt("uuid")),
    };
    let options = doc
        .get_document("options")
        .map_err(|_| corrupt("options"))?
        .clone();
    let mut index_records = Vec::new();
    if let Ok(list) = doc.get_array("indexes") {
        for item in list {
            let Bson::Document(d) = item else {
                return Err(corrupt("indexes"));
            };
            let id = d
                .get_i64("id")
                .ok()
                .and_then(|i| u64::try_from(i).ok())
                .ok_or_else(|| corrupt("index id"))?;
            let spec = d
                .get_document("spec")
                .ok()
                .and_then(IndexSpec::from_document)
                .ok_or_else(|| corrupt("index spec"))?;
            let prepare_unique = d.get_bool("prepareUnique").unwrap_or(false);
            index_records.push((id, spec, prepare_unique));
        }
    }
    let capped = CappedState::from_options(&options);
    if let Some(c) = &capped {
        c.set_by_key(doc.get_bool("byKey").unwrap_or(false));
    }
    let records = doc
        .get_bool("recordIds")
        .unwrap_or(false)
        .then(crate::store::RecordIds::default);
    let state = CollState {
        id,
        options: RwLock::new(Arc::new(options)),
        uuid,
        write_lock: Mutex::new(()),
        count: AtomicU64::new(0),
        data_size: AtomicU64::new(0),
        id_bytes: AtomicU64::new(0),
        dropped: AtomicBool::new(false),
        stats_generation: AtomicU64::new(0),
        indexes: RwLock::new(Arc::new(Vec::new())),
        max_doc_key: Mutex::new(None),
        capped,
        records,
        id_usage: crate::index::IndexUsage::new(),
        server: 0,
        own_stats: Mutex::new(layout::StatsRecord::default()),
        catalog_version: AtomicU64::new(0),
    };
    Ok((db, name, state, index_records))
}

mod capped;
mod txn_ddl;

#[cfg(test)]
mod tests;

/// `list` with index `old_id` replaced by `new`, in the same place (an index
/// whose options changed, or that was rebuilt as unique, keeps its position).
fn with_index_replaced(
    list: &[Arc<IndexState>],
    old_id: u64,
    new: &Arc<IndexState>,
) -> Vec<Arc<IndexState>> {
    list.iter()
        .map(|i| {
            if i.id == old_id {
                new.clone()
            } else {
                i.clone()
            }
        })
        .collect()
}
