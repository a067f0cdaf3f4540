//! The store's failures as [`EngineError`]s: a transaction that lost a race
//! (serialization failure, a lock another transaction holds, a deadlock) is
//! `WriteConflict`, which clients retry; a full disk is `Full`; a key too
//! long for the store's index is `InvalidArgument`; everything else (a lost
//! connection, a standby that refuses writes, a pool that stayed exhausted)
//! is `Io` with the store's own words.

use bisondb_engine::EngineError;
use tokio_postgres::error::SqlState;

/// The engine error for a failure of the store while doing `what`.
pub fn map_error(e: &tokio_postgres::Error, what: &str) -> EngineError {
    let Some(db) = e.as_db_error() else {
        if e.is_closed() {
            return EngineError::Io(format!(
                "{what}: the connection to PostgreSQL was lost: {e}"
            ));
        }
        return EngineError::Io(format!("{what}: {e}"));
    };
    let code = db.code();
    if *code == SqlState::T_R_SERIALIZATION_FAILURE
        || *code == SqlState::T_R_DEADLOCK_DETECTED
        || *code == SqlState::LOCK_NOT_AVAILABLE
    {
        EngineError::write_conflict(format!("WriteConflict: {}", db.message()))
    } else if *code == SqlState::DISK_FULL {
        EngineError::Full
    } else if *code == SqlState::PROGRAM_LIMIT_EXCEEDED {
        EngineError::InvalidArgument(format!(
            "{what}: the key is too long for the store's index: {}",
            db.message()
        ))
    } else if *code == SqlState::READ_ONLY_SQL_TRANSACTION {
        EngineError::Io(format!(
            "{what}: the PostgreSQL server is read-only (a standby, or a primary being \
             demoted): {}",
            db.message()
        ))
    } else if *code == SqlState::ADMIN_SHUTDOWN
        || *code == SqlState::CRASH_SHUTDOWN
        || *code == SqlState::CANNOT_CONNECT_NOW
    {
        EngineError::Io(format!(
            "{what}: the PostgreSQL server is shutting down or starting: {}",
            db.message()
        ))
    } else {
        EngineError::Io(format!("{what}: {} ({})", db.message(), code.code()))
    }
}

/// The engine error for a pooled connection that could not be had.
pub(crate) fn pool_error(e: deadpool_postgres::PoolError) -> EngineError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => map_error(&e, "connecting to PostgreSQL"),
        e => EngineError::Io(format!(
            "no connection to PostgreSQL: {e} (every pooled connection is held by an open \
             cursor or transaction, or the server cannot be reached; see storage.postgres.poolSize)"
        )),
    }
}
