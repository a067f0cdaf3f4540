//! Read-write transactions on the store's own transactions.
//!
//! A transaction is a `REPEATABLE READ` transaction on a pooled connection
//! with a short `lock_timeout`. Its writes reach the store at once, which
//! gives the contract's conflicts from the store itself, across every server
//! sharing it: a key another open transaction wrote is locked, and the write
//! fails after `lock_timeout` with "lock not available" (first writer wins);
//! a key changed by a commit after the snapshot fails with a serialization
//! failure. Each write runs under a savepoint, so a failed write leaves the
//! transaction open with its other writes, as the contract asks.

use std::ops::Bound;
use std::sync::Arc;

use bisondb_engine::{CommitGuard, Durability, EngineError, KeyValue, Transaction, WriteBatch};
use deadpool_postgres::Object;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use crate::engine::{
    apply_in_transaction, final_state, one_key_statement, open_connection, write_on, FinalState,
    Shared, STATEMENTS,
};
use crate::error::map_error;

/// Begins the transaction and takes its snapshot. The lock wait bounds how
/// long a write waits for a key another transaction holds before it reports
/// the conflict (a plain write holding the row for its commit is shorter).
const BEGIN: &str =
    "BEGIN ISOLATION LEVEL REPEATABLE READ; SET LOCAL lock_timeout = '20ms'; SELECT 1";

/// The wait of a lock taken to serialize with a catalog change on another
/// server (a guarded commit's shared lock, `lock_key`'s exclusive one): as
/// long as an index build may run, since the writer waits for it as a
/// writer of the building server waits for its collection's lock.
const LONG_WAIT: &str = "SET LOCAL lock_timeout = '10min'";

/// Back to the wait of [`BEGIN`] for the transaction's other statements.
const SHORT_WAIT: &str = "SET LOCAL lock_timeout = '20ms'";

/// An open transaction (see the module doc).
pub(crate) struct PgTransaction {
    shared: Arc<Shared>,
    /// `Some` until committed or dropped.
    conn: Option<Arc<Object>>,
    wrote: bool,
}

impl PgTransaction {
    pub(crate) fn begin(shared: Arc<Shared>) -> Result<Box<dyn Transaction>, EngineError> {
        let conn = shared.begin_on_connection(BEGIN)?;
        Ok(Box::new(PgTransaction {
            shared,
            conn: Some(conn),
            wrote: false,
        }))
    }

    fn conn(&self) -> Result<Arc<Object>, EngineError> {
        open_connection(self.conn.as_ref())
    }

    /// Writes one key (`value` `None`: removes it) under a savepoint.
    fn write(&mut self, key: Vec<u8>, value: Option<Vec<u8>>) -> Result<(), EngineError> {
        let conn = self.conn()?;
        self.shared
            .run(async move { guarded_write(&conn, key, value).await })?;
        self.wrote = true;
        Ok(())
    }
}

/// The savepoint, the write and the savepoint's release are sent together;
/// only a failed write costs a second round trip, rolling back to the
/// savepoint so the transaction goes on.
async fn guarded_write(
    conn: &Object,
    key: Vec<u8>,
    value: Option<Vec<u8>>,
) -> Result<(), EngineError> {
    let statement = conn
        .prepare_cached(one_key_statement(value.is_some()))
        .await
        .map_err(|e| map_error(&e, "preparing a write"))?;
    let mut params: Vec<&(dyn ToSql + Sync)> = vec![&key];
    if let Some(v) = &value {
        params.push(v);
    }
    let (saved, wrote, released) = futures::join!(
        conn.batch_execute("SAVEPOINT bisondb_write"),
        conn.execute(&statement, &params),
        conn.batch_execute("RELEASE SAVEPOINT bisondb_write"),
    );
    let failure = match (saved, wrote, released) {
        (Ok(()), Ok(_), Ok(())) => return Ok(()),
        (_, Err(e), _) | (Err(e), _, _) | (_, _, Err(e)) => map_error(&e, "writing a key"),
    };
    conn.batch_execute("ROLLBACK TO SAVEPOINT bisondb_write; RELEASE SAVEPOINT bisondb_write")
        .await
        .map_err(|e| map_error(&e, "rolling back a failed write"))?;
    Err(failure)
}

impl Transaction for PgTransaction {
    fn get(&self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        self.shared.get_through(self.conn.as_ref(), key)
    }

    /// Its writes are in the store already, so one statement sees them.
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

    fn put(&mut self, key: Vec<u8>, value: Vec<u8>) -> Result<(), EngineError> {
        self.write(key, Some(value))
    }

    fn delete(&mut self, key: Vec<u8>) -> Result<(), EngineError> {
        self.write(key, None)
    }

    fn commit(self: Box<Self>, durability: Durability) -> Result<(), EngineError> {
        self.commit_with(WriteBatch::default(), durability)
    }

    /// The batch goes into the store's transaction as two array statements
    /// (no savepoint: a failure ends the transaction, applying nothing), so
    /// the store checks its keys as it checks the transaction's own writes:
    /// a row another transaction holds waits `lock_timeout`, a row changed
    /// or inserted by a commit after the snapshot is a serialization
    /// failure, both WriteConflict.
    fn commit_batch(
        mut self: Box<Self>,
        batch: WriteBatch,
        _durability: Durability,
    ) -> Result<(), EngineError> {
        let conn = self.conn()?;
        self.conn = None;
        let state = final_state(batch);
        let copy = self.shared.copy_new_keys();
        self.shared.run(async move {
            let outcome = match apply_in_transaction(&conn, state, copy).await {
                Ok(()) => conn
                    .batch_execute("COMMIT")
                    .await
                    .map_err(|e| map_error(&e, "committing a write")),
                Err(e) => {
                    let _ = conn.batch_execute("ROLLBACK").await;
                    Err(map_error(&e, "writing a batch"))
                }
            };
            release(conn);
            outcome
        })
    }

    /// The guard's statements go ahead of the batch's in the same round
    /// trip: the shared lock (its long wait set around it alone), then the
    /// guarded key's read, then the batch. A lock the store cannot give
    /// (the key changed after the snapshot) fails the transaction, and the
    /// batch with it; a guarded key that does not hold what the caller
    /// expects rolls back what the batch wrote. Either is WriteConflict.
    fn commit_batch_guarded(
        mut self: Box<Self>,
        batch: WriteBatch,
        _durability: Durability,
        guard: &CommitGuard,
    ) -> Result<(), EngineError> {
        let conn = self.conn()?;
        self.conn = None;
        let state = final_state(batch);
        let copy = self.shared.copy_new_keys();
        let guard = guard.clone();
        self.shared.run(async move {
            let written = async {
                let lock = conn.prepare_cached(&STATEMENTS.lock_shared).await?;
                let get = conn.prepare_cached(&STATEMENTS.get).await?;
                let (lock_params, get_params): (
                    [&(dyn ToSql + Sync); 1],
                    [&(dyn ToSql + Sync); 1],
                ) = ([&guard.lock], [&guard.key]);
                let (wait, locked, restore, checked, applied) = futures::join!(
                    conn.batch_execute(LONG_WAIT),
                    conn.query_opt(&lock, &lock_params),
                    conn.batch_execute(SHORT_WAIT),
                    conn.query_opt(&get, &get_params),
                    apply_in_transaction(&conn, state, copy),
                );
                wait?;
                locked?;
                restore?;
                let value = checked?.map(|r| r.try_get::<_, Vec<u8>>(0)).transpose()?;
                applied?;
                Ok::<_, tokio_postgres::Error>(value)
            }
            .await;
            let outcome = match written {
                Ok(value) if value == guard.expected => conn
                    .batch_execute("COMMIT")
                    .await
                    .map_err(|e| map_error(&e, "committing a write")),
                Ok(_) => {
                    let _ = conn.batch_execute("ROLLBACK").await;
                    Err(EngineError::write_conflict(
                        "WriteConflict: the catalog changed since the write read it",
                    ))
                }
                Err(e) => {
                    let _ = conn.batch_execute("ROLLBACK").await;
                    Err(map_error(&e, "writing a batch"))
                }
            };
            release(conn);
            outcome
        })
    }

    fn lock_key(&mut self, key: &[u8]) -> Result<Option<Vec<u8>>, EngineError> {
        let conn = self.conn()?;
        let key = key.to_vec();
        self.shared.run(async move {
            let statement = conn
                .prepare_cached(&STATEMENTS.lock_exclusive)
                .await
                .map_err(|e| map_error(&e, "preparing a lock"))?;
            let params: [&(dyn ToSql + Sync); 1] = [&key];
            let (wait, row, restore) = futures::join!(
                conn.batch_execute(LONG_WAIT),
                conn.query_opt(&statement, &params),
                conn.batch_execute(SHORT_WAIT),
            );
            let failed = |e: tokio_postgres::Error| map_error(&e, "locking a key");
            wait.map_err(failed)?;
            let row = row.map_err(failed)?;
            restore.map_err(failed)?;
            row.map(|r| r.try_get::<_, Vec<u8>>(0))
                .transpose()
                .map_err(failed)
        })
    }

    /// The unchecked writes (a collection's count record) go into the
    /// store's transaction before its `COMMIT`, under a savepoint, so they
    /// normally apply with it or not at all. The store checks every write of
    /// a `REPEATABLE READ` transaction, these too: when a plain write changed
    /// one of their keys after this transaction's snapshot (which the caller
    /// allows: it computed them under its own lock), they are written right
    /// after the `COMMIT` instead, as a plain write: only a crash between the
    /// two could then leave the count record behind the documents.
    fn commit_with(
        mut self: Box<Self>,
        unchecked: WriteBatch,
        _durability: Durability,
    ) -> Result<(), EngineError> {
        let conn = self.conn()?;
        self.conn = None;
        let wrote = self.wrote || !unchecked.is_empty();
        let end = if wrote { "COMMIT" } else { "ROLLBACK" };
        let state = final_state(unchecked);
        let pool = self.shared.pool.clone();
        let committed = self.shared.run(async move {
            let in_transaction = if state.is_empty() {
                Ok(true)
            } else {
                // A few count records: copied, as the write after the
                // `COMMIT` may need them again.
                unchecked_in_transaction(&conn, state.clone()).await
            };
            let failed = |e: tokio_postgres::Error| map_error(&e, "committing a transaction");
            let outcome = match in_transaction {
                Ok(applied) => match conn.batch_execute(end).await {
                    Ok(()) if applied => Ok(()),
                    Ok(()) => write_on(pool, state).await,
                    Err(e) => Err(failed(e)),
                },
                Err(e) => {
                    // The transaction is aborted: end it, report the write.
                    let _ = conn.batch_execute("ROLLBACK").await;
                    Err(failed(e))
                }
            };
            // The transaction is over either way (a failed COMMIT rolls
            // back).
            release(conn);
            outcome
        });
        if let Err(e) = &committed {
            self.shared.write_failed(e);
        }
        committed
    }
}

/// Gives the connection of an ended transaction back to the pool, or drops
/// it when it was lost (it is not handed out again).
fn release(conn: Arc<Object>) {
    if let Ok(conn) = Arc::try_unwrap(conn) {
        if conn.is_closed() {
            drop(Object::take(conn));
        }
    }
}

/// Writes the unchecked keys inside the transaction under a savepoint:
/// `Ok(true)` when they are written, `Ok(false)` when the store refused them
/// as changed after the snapshot (the savepoint undone, the transaction
/// still open), `Err` on any other failure.
async fn unchecked_in_transaction(
    conn: &Object,
    state: FinalState,
) -> Result<bool, tokio_postgres::Error> {
    conn.batch_execute("SAVEPOINT bisondb_unchecked").await?;
    // A few count records: never enough for a copy.
    match apply_in_transaction(conn, state, false).await {
        Ok(()) => {
            conn.batch_execute("RELEASE SAVEPOINT bisondb_unchecked")
                .await?;
            Ok(true)
        }
        Err(e) if e.code() == Some(&SqlState::T_R_SERIALIZATION_FAILURE) => {
            conn.batch_execute(
                "ROLLBACK TO SAVEPOINT bisondb_unchecked; RELEASE SAVEPOINT bisondb_unchecked",
            )
            .await?;
            Ok(false)
        }
        Err(e) => Err(e),
    }
}

impl Drop for PgTransaction {
    fn drop(&mut self) {
        if let Some(conn) = self.conn.take() {
            self.shared.end_in_background(conn, "ROLLBACK");
        }
    }
}
