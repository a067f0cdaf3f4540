//! [`PostgresEngine`]: the engine, its runtime and pool, its snapshots, and
//! the reads and writes the snapshots and transactions share.

use std::collections::BTreeMap;
use std::future::Future;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

use bisondb_engine::{
    owned_bound, range_is_empty, BatchOp, Capabilities, Durability, Engine, EngineError, KeyValue,
    Snapshot, Transaction, WriteBatch,
};
use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};
use tokio_postgres::binary_copy::BinaryCopyInWriter;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::{ToSql, Type};
use tokio_postgres::NoTls;

use crate::error::{map_error, pool_error};
use crate::sql::{self, Edge, Flavor};
use crate::tls::TlsSettings;
use crate::txn::PgTransaction;

/// The name `--storageEngine` takes.
pub const ENGINE_NAME: &str = "postgres";

/// The layout of the store's tables this build reads and writes, recorded in
/// `bisondb_meta` by the first server; a server finding another refuses to
/// start rather than misread the store.
pub const FORMAT_VERSION: &str = "1";

/// Persistent; every call is a round trip to the store; no reads at an
/// earlier commit point (the store's snapshots are its transactions');
/// shared by every server pointed at the same database and schema.
pub const CAPABILITIES: Capabilities = Capabilities {
    persistent: true,
    blocking_io: true,
    snapshot_at: false,
    shared: true,
};

/// The most rows one scan statement returns: a long range is read page by
/// page (keyset pagination), never as one unbounded result.
const PAGE: usize = 1000;

/// How long a pooled connection is waited for (all held by open cursors and
/// transactions) or a new one is being made, before the call fails.
const POOL_WAIT: Duration = Duration::from_secs(30);

/// The statements, built once (prepared once per connection by
/// `prepare_cached`, which is keyed by their text).
pub(crate) struct Statements {
    pub(crate) get: String,
    get_many: String,
    upsert_many: String,
    copy_in: String,
    delete_many: String,
    pub(crate) upsert_one: String,
    pub(crate) delete_one: String,
    pub(crate) lock_shared: String,
    pub(crate) lock_exclusive: String,
    /// Indexed by [`scan_index`].
    scans: Vec<String>,
}

pub(crate) static STATEMENTS: LazyLock<Statements> = LazyLock::new(|| {
    let edges = [Edge::Included, Edge::Excluded, Edge::Unbounded];
    let mut scans = Vec::with_capacity(18);
    for start in edges {
        for end in edges {
            for reverse in [false, true] {
                scans.push(sql::scan(start, end, reverse));
            }
        }
    }
    Statements {
        get: sql::get(),
        get_many: sql::get_many(),
        upsert_many: sql::upsert_many(),
        copy_in: sql::copy_in(),
        delete_many: sql::delete_many(),
        upsert_one: sql::upsert_one(),
        delete_one: sql::delete_one(),
        lock_shared: sql::lock_shared(),
        lock_exclusive: sql::lock_exclusive(),
        scans,
    }
});

fn edge_index(e: Edge) -> usize {
    match e {
        Edge::Included => 0,
        Edge::Excluded => 1,
        Edge::Unbounded => 2,
    }
}

fn scan_index(start: Edge, end: Edge, reverse: bool) -> usize {
    edge_index(start) * 6 + edge_index(end) * 2 + usize::from(reverse)
}

/// The statement writing one key inside a transaction (`put` or `delete`).
pub(crate) fn one_key_statement(put: bool) -> &'static str {
    if put {
        &STATEMENTS.upsert_one
    } else {
        &STATEMENTS.delete_one
    }
}

/// An engine over one PostgreSQL-wire database (`--storageEngine postgres`).
pub struct PostgresEngine {
    shared: Arc<Shared>,
}

/// What the engine, its snapshots and its transactions share: the runtime
/// the client runs on and the pool. It lives until the last of them is gone.
pub(crate) struct Shared {
    /// `Some` until dropped; shut down without waiting, as the last user may
    /// be dropped anywhere, an async task included.
    runtime: Option<tokio::runtime::Runtime>,
    handle: tokio::runtime::Handle,
    pub(crate) pool: Pool,
    /// [`Engine::generation`]: moved on by every write whose outcome the
    /// engine cannot know (see [`Shared::write_failed`]).
    generation: AtomicU64,
    /// Whether keys found absent go in by `COPY` ([`copy_new`]): on
    /// PostgreSQL (and Citus). CockroachDB's `COPY` needs the admin role in
    /// the versions its documentation covers, so the distributed flavors
    /// upsert them.
    copy_new_keys: AtomicBool,
}

impl Drop for Shared {
    fn drop(&mut self) {
        if let Some(runtime) = self.runtime.take() {
            runtime.shutdown_background();
        }
    }
}

impl Shared {
    /// Whether a transaction's batch copies its new keys in (see
    /// [`apply_in_transaction`]).
    pub(crate) fn copy_new_keys(&self) -> bool {
        self.copy_new_keys.load(Ordering::Relaxed)
    }

    /// Runs `work` on the engine's runtime and waits for it. Waiting through
    /// a task rather than entering the runtime here works from any thread,
    /// an async worker's included (the server calls from blocking threads).
    ///
    /// The answer comes back on a plain channel, not the task's
    /// `JoinHandle`: polling a `JoinHandle` from a thread that is running a
    /// task of another tokio runtime (a command on a current-thread runtime,
    /// as the server's tests run) spends that task's cooperative budget, and
    /// once it is spent tokio defers the wake-up to that runtime's scheduler,
    /// which is this very thread, blocked here: after about 128 calls in one
    /// command (an index build's unique checks) the call never returned.
    pub(crate) fn run<T, F>(&self, work: F) -> Result<T, EngineError>
    where
        T: Send + 'static,
        F: Future<Output = Result<T, EngineError>> + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        drop(self.handle.spawn(async move {
            // The caller waits for this; it is gone only if it panicked.
            let _ = tx.send(work.await);
        }));
        rx.recv().unwrap_or_else(|_| {
            Err(EngineError::Internal(
                "a postgres engine task ended abnormally (it panicked, or the engine's \
                 runtime stopped)"
                    .into(),
            ))
        })
    }

    /// Notes a failed write (a batch, or a transaction's commit). When the
    /// failure is the connection's (lost, or the server ended or demoted
    /// during a failover) its `COMMIT` may have been applied after all: a
    /// primary killed after its synchronous standby received the commit
    /// fails the write here, and the promoted standby has it. The
    /// generation then moves on, so the layers above read again what they
    /// cached from their own writes (a collection's count record, its
    /// largest `_id`) instead of writing a stale count over the committed
    /// one. Failures the store reported for the statement itself (a
    /// conflict, a full disk, a key too long) rolled it back: no change.
    pub(crate) fn write_failed(&self, e: &EngineError) {
        if matches!(e, EngineError::Unavailable { .. } | EngineError::Io(_)) {
            self.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Starts `work` without waiting for it (ending a dropped snapshot's
    /// transaction).
    pub(crate) fn spawn<F>(&self, work: F)
    where
        F: Future<Output = ()> + Send + 'static,
    {
        drop(self.handle.spawn(work));
    }

    /// A connection of the pool with a transaction begun by `begin`: the
    /// store's snapshot is taken by the first statement, so `begin` must end
    /// with one.
    pub(crate) fn begin_on_connection(
        &self,
        begin: &'static str,
    ) -> Result<Arc<Object>, EngineError> {
        let pool = self.pool.clone();
        self.run(async move {
            let conn = pool.get().await.map_err(pool_error)?;
            match conn.batch_execute(begin).await {
                Ok(()) => Ok(Arc::new(conn)),
                Err(e) => {
                    // Its state is unknown: never hand it out again.
                    drop(Object::take(conn));
                    Err(map_error(&e, "starting a transaction"))
                }
            }
        })
    }

    /// `key`'s value as the transaction open on `conn` sees it (a
    /// snapshot's or a read-write transaction's; `None`: it has ended).
    pub(crate) fn get_through(
        &self,
        conn: Option<&Arc<Object>>,
        key: &[u8],
    ) -> Result<Option<Vec<u8>>, EngineError> {
        let conn = open_connection(conn)?;
        let key = key.to_vec();
        self.run(async move { get_on(&conn, key).await })
    }

    /// The values of `keys` as the transaction open on `conn` sees them, in
    /// one statement (see [`Shared::get_through`]).
    pub(crate) fn get_many_through(
        &self,
        conn: Option<&Arc<Object>>,
        keys: &[&[u8]],
    ) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        match keys {
            [] => return Ok(Vec::new()),
            [one] => return Ok(vec![self.get_through(conn, one)?]),
            _ => {}
        }
        let conn = open_connection(conn)?;
        let owned: Vec<Vec<u8>> = keys.iter().map(|k| k.to_vec()).collect();
        self.run(async move { get_many_on(&conn, owned).await })
    }

    /// A range as the transaction open on `conn` sees it (see
    /// [`Shared::get_through`]).
    pub(crate) fn scan_through(
        &self,
        conn: Option<&Arc<Object>>,
        (start, end): (Bound<&[u8]>, Bound<&[u8]>),
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        if limit == 0 || range_is_empty(start, end) {
            return Ok(Vec::new());
        }
        let conn = open_connection(conn)?;
        let (start, end) = (owned_bound(start), owned_bound(end));
        self.run(async move { scan_on(&conn, start, end, reverse, limit).await })
    }

    /// Ends the transaction on `conn` with `end` (`ROLLBACK`), in the
    /// background, and gives the connection back to the pool (or drops it
    /// when the statement failed, its state being unknown).
    pub(crate) fn end_in_background(&self, conn: Arc<Object>, end: &'static str) {
        self.spawn(async move {
            if let Ok(conn) = Arc::try_unwrap(conn) {
                if conn.batch_execute(end).await.is_err() {
                    drop(Object::take(conn));
                }
            }
        });
    }
}

impl PostgresEngine {
    /// Connects to the store at `uri` with at most `pool_size` connections,
    /// creating its tables when they are missing; refuses a store written in
    /// another format. TLS only as the URI asks (see [`crate::tls`]).
    pub fn open(uri: &str, pool_size: usize) -> Result<PostgresEngine, EngineError> {
        PostgresEngine::open_with_tls(uri, pool_size, &TlsSettings::default())
    }

    /// [`PostgresEngine::open`] with the configuration's TLS settings beside
    /// the URI's (`storage.postgres.tls*`); conflicting ones are refused.
    pub fn open_with_tls(
        uri: &str,
        pool_size: usize,
        tls: &TlsSettings,
    ) -> Result<PostgresEngine, EngineError> {
        let resolved = crate::tls::resolve(uri, tls)?;
        let connector = crate::tls::connector(&resolved)?;
        let config = resolved.config;
        if pool_size == 0 {
            return Err(EngineError::InvalidArgument(
                "storage.postgres.poolSize must be at least 1".into(),
            ));
        }
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("bisondb-postgres")
            .enable_all()
            .build()
            .map_err(|e| {
                EngineError::from_io(e, "starting the postgres engine's runtime".into())
            })?;
        let manager_config = ManagerConfig {
            recycling_method: RecyclingMethod::Fast,
        };
        let manager = match connector {
            Some(tls) => Manager::from_config(config, tls, manager_config),
            None => Manager::from_config(config, NoTls, manager_config),
        };
        let pool = Pool::builder(manager)
            .max_size(pool_size)
            .runtime(deadpool_postgres::Runtime::Tokio1)
            .wait_timeout(Some(POOL_WAIT))
            .create_timeout(Some(POOL_WAIT))
            .build()
            .map_err(|e| EngineError::InvalidArgument(format!("the PostgreSQL pool: {e}")))?;
        let shared = Arc::new(Shared {
            handle: runtime.handle().clone(),
            runtime: Some(runtime),
            pool: pool.clone(),
            generation: AtomicU64::new(0),
            copy_new_keys: AtomicBool::new(false),
        });
        let flavor = shared.run(prepare_store(pool))?;
        shared
            .copy_new_keys
            .store(flavor == Flavor::Postgres, Ordering::Relaxed);
        Ok(PostgresEngine { shared })
    }
}

/// Creates the tables if they are missing and checks the recorded format;
/// answers the store's flavor.
async fn prepare_store(pool: Pool) -> Result<Flavor, EngineError> {
    let conn = pool.get().await.map_err(pool_error)?;
    let version: String = conn
        .query_one("SELECT version()", &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| map_error(&e, "reading the store's version"))?;
    let flavor = Flavor::from_version(&version);
    for create in flavor.create_tables() {
        match conn.batch_execute(&create).await {
            Ok(()) => {}
            // Two servers creating the tables at once: PostgreSQL's `IF NOT
            // EXISTS` is no guard against a concurrent create, whose loser
            // fails on the catalog's unique index; the table is there.
            Err(e)
                if e.code() == Some(&SqlState::UNIQUE_VIOLATION)
                    || e.code() == Some(&SqlState::DUPLICATE_TABLE) => {}
            Err(e) => return Err(map_error(&e, "creating the store's tables")),
        }
    }
    conn.execute(&sql::record_format(), &[&FORMAT_VERSION])
        .await
        .map_err(|e| map_error(&e, "recording the store's format"))?;
    let found: String = conn
        .query_one(&sql::read_format(), &[])
        .await
        .and_then(|row| row.try_get(0))
        .map_err(|e| map_error(&e, "reading the store's format"))?;
    if found != FORMAT_VERSION {
        return Err(EngineError::EngineMismatch(format!(
            "the PostgreSQL store was written by an incompatible BisonDB (store format \
             {found}, this server reads format {FORMAT_VERSION}); point --postgresUri at \
             another database or schema, or run the BisonDB that wrote it"
        )));
    }
    Ok(flavor)
}

/// The connection of a transaction still open.
pub(crate) fn open_connection(conn: Option<&Arc<Object>>) -> Result<Arc<Object>, EngineError> {
    conn.cloned().ok_or_else(|| {
        EngineError::Internal("a postgres snapshot or transaction used after its end".into())
    })
}

/// `key`'s value as the transaction on `conn` sees it.
pub(crate) async fn get_on(conn: &Object, key: Vec<u8>) -> Result<Option<Vec<u8>>, EngineError> {
    let statement = conn
        .prepare_cached(&STATEMENTS.get)
        .await
        .map_err(|e| map_error(&e, "preparing a read"))?;
    let row = conn
        .query_opt(&statement, &[&key])
        .await
        .map_err(|e| map_error(&e, "reading a key"))?;
    row.map(|r| r.try_get::<_, Vec<u8>>(0))
        .transpose()
        .map_err(|e| map_error(&e, "reading a value"))
}

/// The values of `keys` as the transaction on `conn` sees them, in their
/// order: one `= ANY` statement, matched back by key.
pub(crate) async fn get_many_on(
    conn: &Object,
    keys: Vec<Vec<u8>>,
) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
    let statement = conn
        .prepare_cached(&STATEMENTS.get_many)
        .await
        .map_err(|e| map_error(&e, "preparing a read"))?;
    let rows = conn
        .query(&statement, &[&keys])
        .await
        .map_err(|e| map_error(&e, "reading keys"))?;
    let mut found = std::collections::HashMap::with_capacity(rows.len());
    for row in rows {
        let k: Vec<u8> = row.try_get(0).map_err(|e| map_error(&e, "reading a key"))?;
        let v: Vec<u8> = row
            .try_get(1)
            .map_err(|e| map_error(&e, "reading a value"))?;
        found.insert(k, v);
    }
    Ok(keys.iter().map(|k| found.get(k).cloned()).collect())
}

/// Up to `limit` entries between the bounds as the transaction on `conn`
/// sees them, read page by page.
pub(crate) async fn scan_on(
    conn: &Object,
    mut start: Bound<Vec<u8>>,
    mut end: Bound<Vec<u8>>,
    reverse: bool,
    limit: usize,
) -> Result<Vec<KeyValue>, EngineError> {
    let mut out: Vec<KeyValue> = Vec::new();
    loop {
        if out.len() >= limit || range_is_empty(as_ref(&start), as_ref(&end)) {
            return Ok(out);
        }
        let want = (limit - out.len()).min(PAGE);
        let text = &STATEMENTS.scans[scan_index(Edge::of(&start), Edge::of(&end), reverse)];
        let statement = conn
            .prepare_cached(text)
            .await
            .map_err(|e| map_error(&e, "preparing a scan"))?;
        let page = i64::try_from(want).unwrap_or(i64::MAX);
        let rows = {
            let mut params: Vec<&(dyn ToSql + Sync)> = Vec::with_capacity(3);
            if let Bound::Included(k) | Bound::Excluded(k) = &start {
                params.push(k);
            }
            if let Bound::Included(k) | Bound::Excluded(k) = &end {
                params.push(k);
            }
            params.push(&page);
            conn.query(&statement, &params)
                .await
                .map_err(|e| map_error(&e, "scanning a range"))?
        };
        let got = rows.len();
        for row in rows {
            let k: Vec<u8> = row.try_get(0).map_err(|e| map_error(&e, "reading a key"))?;
            let v: Vec<u8> = row
                .try_get(1)
                .map_err(|e| map_error(&e, "reading a value"))?;
            out.push((k, v));
        }
        if got < want {
            return Ok(out);
        }
        let Some((last, _)) = out.last() else {
            return Ok(out);
        };
        if reverse {
            end = Bound::Excluded(last.clone());
        } else {
            start = Bound::Excluded(last.clone());
        }
    }
}

fn as_ref(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

/// Fewer keys the writer found absent than this are upserted with the rest:
/// `COPY` costs two more round trips than the upsert it replaces, which only
/// a bigger batch (an `insertMany`, a bulk load) wins back.
const COPY_MIN: usize = 64;

/// Keys to set, their values, and keys to remove.
pub(crate) type Upserts = (Vec<Vec<u8>>, Vec<Vec<u8>>, Vec<Vec<u8>>);

/// A batch's final state of each key: what it sets, what it sets that the
/// writer found absent, what it removes. The batch's last operation on each
/// key is what it leaves; each key then appears once in one statement (an
/// upsert may not touch a row twice).
#[derive(Debug, Clone, Default)]
pub(crate) struct FinalState {
    /// Keys set (upserted), in key order, and their values.
    pub(crate) keys: Vec<Vec<u8>>,
    pub(crate) values: Vec<Vec<u8>>,
    /// Keys set by [`BatchOp::Insert`] alone, in key order, and their values.
    pub(crate) new_keys: Vec<Vec<u8>>,
    pub(crate) new_values: Vec<Vec<u8>>,
    /// Keys removed, in key order.
    pub(crate) gone: Vec<Vec<u8>>,
}

impl FinalState {
    /// Whether it writes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.keys.is_empty() && self.new_keys.is_empty() && self.gone.is_empty()
    }

    /// The keys to upsert, new keys included, in key order (transactions
    /// writing overlapping keys then lock them in one order).
    pub(crate) fn all_upserts(self) -> Upserts {
        if self.new_keys.is_empty() {
            return (self.keys, self.values, self.gone);
        }
        let total = self.keys.len() + self.new_keys.len();
        let (mut keys, mut values) = (Vec::with_capacity(total), Vec::with_capacity(total));
        let mut old = self.keys.into_iter().zip(self.values).peekable();
        let mut new = self.new_keys.into_iter().zip(self.new_values).peekable();
        loop {
            let take_old = match (old.peek(), new.peek()) {
                (Some((a, _)), Some((b, _))) => a < b,
                (Some(_), None) => true,
                (None, Some(_)) => false,
                (None, None) => break,
            };
            let next = if take_old { old.next() } else { new.next() };
            if let Some((k, v)) = next {
                keys.push(k);
                values.push(v);
            }
        }
        (keys, values, self.gone)
    }
}

/// The final state of each key `batch` writes (see [`FinalState`]). A key
/// an earlier operation of the batch wrote or removed is not new, whatever
/// the last one says.
pub(crate) fn final_state(batch: WriteBatch) -> FinalState {
    // The value (`None`: removed), and whether the key is new.
    let mut last: BTreeMap<Vec<u8>, (Option<Vec<u8>>, bool)> = BTreeMap::new();
    for op in batch.into_ops() {
        match op {
            BatchOp::Put(k, v) => {
                last.insert(k, (Some(v), false));
            }
            BatchOp::Delete(k) => {
                last.insert(k, (None, false));
            }
            BatchOp::Insert(k, v) => {
                let fresh = !last.contains_key(&k);
                last.insert(k, (Some(v), fresh));
            }
        }
    }
    let mut state = FinalState::default();
    for (k, (v, fresh)) in last {
        match v {
            Some(v) if fresh => {
                state.new_keys.push(k);
                state.new_values.push(v);
            }
            Some(v) => {
                state.keys.push(k);
                state.values.push(v);
            }
            None => state.gone.push(k),
        }
    }
    state
}

/// Applies `state` inside the transaction open on `conn` (a read-write
/// transaction's commit with its unchecked writes). Enough new keys go in
/// by `COPY` ([`copy_new`]), the rest as upserts.
pub(crate) async fn apply_in_transaction(
    conn: &Object,
    mut state: FinalState,
    copy: bool,
) -> Result<(), tokio_postgres::Error> {
    if copy
        && state.new_keys.len() >= COPY_MIN
        && copy_new(conn, &state.new_keys, &state.new_values).await?
    {
        state.new_keys.clear();
        state.new_values.clear();
    }
    let (keys, values, gone) = state.all_upserts();
    if !keys.is_empty() {
        let upsert = conn.prepare_cached(&STATEMENTS.upsert_many).await?;
        conn.execute(&upsert, &[&keys, &values]).await?;
    }
    if !gone.is_empty() {
        let delete = conn.prepare_cached(&STATEMENTS.delete_many).await?;
        conn.execute(&delete, &[&gone]).await?;
    }
    Ok(())
}

/// Writes keys the writer found absent with a binary `COPY` (about half the
/// store's work per row of an `INSERT ... ON CONFLICT` over arrays, which
/// matters for bulk loads) under a savepoint. `Ok(false)` when one of them
/// exists after all (a unique violation: another server inserted it, or a
/// stray index entry): the savepoint is undone and the caller upserts them
/// with the rest, so a key that changed since the transaction's snapshot
/// still fails as the upsert's serialization failure (WriteConflict), and an
/// `Insert` never means more than a `Put`.
async fn copy_new(
    conn: &Object,
    keys: &[Vec<u8>],
    values: &[Vec<u8>],
) -> Result<bool, tokio_postgres::Error> {
    // Sent together: the savepoint's answer precedes the copy's.
    let (saved, sink) = futures::join!(
        conn.batch_execute("SAVEPOINT bisondb_copy"),
        conn.copy_in(STATEMENTS.copy_in.as_str()),
    );
    saved?;
    let copied = async {
        let writer = BinaryCopyInWriter::new(sink?, &[Type::BYTEA, Type::BYTEA]);
        let mut writer = std::pin::pin!(writer);
        for (k, v) in keys.iter().zip(values) {
            writer.as_mut().write(&[k, v]).await?;
        }
        writer.finish().await
    }
    .await;
    match copied {
        Ok(_) => {
            conn.batch_execute("RELEASE SAVEPOINT bisondb_copy").await?;
            Ok(true)
        }
        Err(e) if e.code() == Some(&SqlState::UNIQUE_VIOLATION) => {
            conn.batch_execute(
                "ROLLBACK TO SAVEPOINT bisondb_copy; RELEASE SAVEPOINT bisondb_copy",
            )
            .await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

/// Writes a batch's final state of each key: `keys`/`values` set, `gone`
/// removed, in one transaction whose statements are sent together.
pub(crate) async fn write_on(pool: Pool, state: FinalState) -> Result<(), EngineError> {
    // A plain batch's new keys are upserted: one statement is one round
    // trip and a transaction of its own, where `COPY` needs a transaction
    // around it.
    let (keys, values, gone) = state.all_upserts();
    let conn = pool.get().await.map_err(pool_error)?;
    let outcome = async {
        let upsert = if keys.is_empty() {
            None
        } else {
            Some(conn.prepare_cached(&STATEMENTS.upsert_many).await?)
        };
        let delete = if gone.is_empty() {
            None
        } else {
            Some(conn.prepare_cached(&STATEMENTS.delete_many).await?)
        };
        match (upsert, delete) {
            // One statement is a transaction of its own.
            (Some(upsert), None) => conn.execute(&upsert, &[&keys, &values]).await.map(drop),
            (None, Some(delete)) => conn.execute(&delete, &[&gone]).await.map(drop),
            (Some(upsert), Some(delete)) => {
                // Sent back to back, answered together: one round trip. A
                // failed statement aborts the transaction, and the COMMIT
                // then rolls it back, so nothing of the batch applies.
                let (gone_params, set_params): (
                    [&(dyn ToSql + Sync); 1],
                    [&(dyn ToSql + Sync); 2],
                ) = ([&gone], [&keys, &values]);
                let (begin, deleted, upserted, commit) = futures::join!(
                    conn.batch_execute("BEGIN"),
                    conn.execute(&delete, &gone_params),
                    conn.execute(&upsert, &set_params),
                    conn.batch_execute("COMMIT"),
                );
                begin.and(deleted).and(upserted).and(commit)
            }
            (None, None) => Ok(()),
        }
    }
    .await;
    outcome.map_err(|e| {
        let mapped = map_error(&e, "writing a batch");
        // A connection the store ended (a failover, `pg_terminate_backend`)
        // reports the end as an error before the client sees the socket
        // close: never hand it out again, or the next write meets "connection
        // closed" on it.
        if e.is_closed() || matches!(mapped, EngineError::Unavailable { .. }) {
            drop(Object::take(conn));
        }
        mapped
    })
}

impl Engine for PostgresEngine {
    fn name(&self) -> &'static str {
        ENGINE_NAME
    }

    fn capabilities(&self) -> Capabilities {
        CAPABILITIES
    }

    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        let conn = self
            .shared
            .begin_on_connection("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY; SELECT 1")?;
        Ok(Arc::new(PgSnapshot {
            shared: self.shared.clone(),
            conn: Some(conn),
        }))
    }

    /// One autocommit `SELECT` on a pooled connection: one round trip, where
    /// a snapshot costs its `BEGIN`, the read and a `ROLLBACK`.
    fn get_latest(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        let pool = self.shared.pool.clone();
        let key = key.to_vec();
        self.shared.run(async move {
            let conn = pool.get().await.map_err(pool_error)?;
            get_on(&conn, key).await
        })
    }

    fn write(&self, batch: WriteBatch, _durability: Durability) -> Result<(), EngineError> {
        if batch.is_empty() {
            return Ok(());
        }
        let state = final_state(batch);
        // Durable once committed (PostgreSQL's default synchronous_commit),
        // so both durabilities are the same write.
        self.shared
            .run(write_on(self.shared.pool.clone(), state))
            .inspect_err(|e| self.shared.write_failed(e))
    }

    fn begin(&self) -> Result<Box<dyn Transaction>, EngineError> {
        PgTransaction::begin(self.shared.clone())
    }

    fn sync(&self) -> Result<(), EngineError> {
        // Every write returned after its commit, which is durable.
        Ok(())
    }

    fn generation(&self) -> u64 {
        self.shared.generation.load(Ordering::Acquire)
    }

    fn size_on_disk(&self) -> u64 {
        let pool = self.shared.pool.clone();
        self.shared
            .run(async move {
                let conn = pool.get().await.map_err(pool_error)?;
                let size: i64 = conn
                    .query_one(&sql::table_size(), &[])
                    .await
                    .and_then(|row| row.try_get(0))
                    .map_err(|e| map_error(&e, "reading the table's size"))?;
                Ok(u64::try_from(size).unwrap_or(0))
            })
            // Stores without PostgreSQL's size functions report nothing.
            .unwrap_or(0)
    }
}

/// A read-only `REPEATABLE READ` transaction on a pooled connection.
struct PgSnapshot {
    shared: Arc<Shared>,
    /// `Some` until dropped.
    conn: Option<Arc<Object>>,
}

impl Snapshot for PgSnapshot {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.shared.get_through(self.conn.as_ref(), key)
    }

    fn get_many(&self, keys: &[&[u8]]) -> Result<Vec<Option<Vec<u8>>>, EngineError> {
        self.shared.get_many_through(self.conn.as_ref(), keys)
    }

    fn scan(
        &self,
        start: Bound<&[u8]>,
        end: Bound<&[u8]>,
        reverse: bool,
        limit: usize,
    ) -> Result<Vec<KeyValue>, EngineError> {
        self.shared
            .scan_through(self.conn.as_ref(), (start, end), reverse, limit)
    }
}

impl Drop for PgSnapshot {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.shared.end_in_background(conn, "ROLLBACK");
        }
    }
}

#[cfg(test)]
impl PostgresEngine {
    /// The first column of `sql`'s one row, as text, on a connection of the
    /// pool (the TLS tests ask `pg_stat_ssl` about the engine's own).
    pub(crate) fn query_text(&self, sql: &'static str) -> Result<String, EngineError> {
        let pool = self.shared.pool.clone();
        self.shared.run(async move {
            let conn = pool.get().await.map_err(pool_error)?;
            let row = conn
                .query_one(sql, &[])
                .await
                .map_err(|e| EngineError::Io(e.to_string()))?;
            row.try_get::<_, String>(0)
                .map_err(|e| EngineError::Io(e.to_string()))
        })
    }
}
