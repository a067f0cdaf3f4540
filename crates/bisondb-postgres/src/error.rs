//! The store's failures as [`EngineError`]s, with the codes a mongod or
//! mongos would answer in the same situation, so drivers retry what can be
//! retried:
//! - a transaction that lost a race (serialization failure 40001, deadlock
//!   40P01, a lock another transaction holds 55P03) is `WriteConflict`
//!   (112, `TransientTransactionError` inside a transaction);
//! - a lost connection, or one that could not be made, is HostUnreachable
//!   (6); a backend ended by the administrator or a crash (57P01, 57P02) is
//!   InterruptedAtShutdown (11600); a server starting or stopping (57P03)
//!   is ShutdownInProgress (91); a read-only server (25006: a standby, or a
//!   primary being demoted) is NotWritablePrimary (10107). All four are
//!   [`EngineError::Unavailable`]: codes of the retryable writes
//!   specification, which fail the whole command and get
//!   `RetryableWriteError` on a retryable write (a failover shows to the
//!   client as a retryable error);
//! - a full disk (53100) is `Full`, OutOfDiskSpace (14031), which mongod
//!   does not label retryable either;
//! - a key too long for the store's index is `InvalidArgument`;
//! - everything else is `Io` with the store's own words.

use bisondb_engine::EngineError;
use bisondb_error::ErrorCode;
use tokio_postgres::error::SqlState;

/// The engine error for a failure of the store while doing `what`.
pub fn map_error(e: &tokio_postgres::Error, what: &str) -> EngineError {
    let Some(db) = e.as_db_error() else {
        // The connection's own failure (closed, reset, refused): the store
        // is unreachable. Anything else (a value that does not convert) is
        // no reason to retry.
        let network =
            e.is_closed() || std::error::Error::source(e).is_some_and(|s| s.is::<std::io::Error>());
        // tokio-postgres's message names the kind only ("error performing
        // TLS handshake"); the reason (a certificate's unknown issuer, a
        // refused connection) is in its sources.
        let mut shown = e.to_string();
        let mut source = std::error::Error::source(e);
        while let Some(cause) = source {
            shown.push_str(": ");
            shown.push_str(&cause.to_string());
            source = cause.source();
        }
        if network {
            return unavailable(
                ErrorCode::HostUnreachable,
                format!(
                    "{what}: the connection to PostgreSQL was lost or could not be made: {shown}"
                ),
            );
        }
        return EngineError::Io(format!("{what}: {shown}"));
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
        unavailable(
            ErrorCode::NotWritablePrimary,
            format!(
                "{what}: the PostgreSQL server is read-only (a standby, or a primary being \
                 demoted): {}",
                db.message()
            ),
        )
    } else if *code == SqlState::ADMIN_SHUTDOWN || *code == SqlState::CRASH_SHUTDOWN {
        unavailable(
            ErrorCode::InterruptedAtShutdown,
            format!(
                "{what}: PostgreSQL ended the connection (shutdown, failover or \
                 pg_terminate_backend): {}",
                db.message()
            ),
        )
    } else if *code == SqlState::CANNOT_CONNECT_NOW {
        unavailable(
            ErrorCode::ShutdownInProgress,
            format!(
                "{what}: the PostgreSQL server is starting or shutting down: {}",
                db.message()
            ),
        )
    } else {
        EngineError::Io(format!("{what}: {} ({})", db.message(), code.code()))
    }
}

fn unavailable(code: ErrorCode, message: String) -> EngineError {
    EngineError::Unavailable { code, message }
}

/// The engine error for a pooled connection that could not be had.
pub(crate) fn pool_error(e: deadpool_postgres::PoolError) -> EngineError {
    match e {
        deadpool_postgres::PoolError::Backend(e) => map_error(&e, "connecting to PostgreSQL"),
        // Making a connection took too long: the store is unreachable.
        deadpool_postgres::PoolError::Timeout(deadpool_postgres::TimeoutType::Create) => {
            unavailable(
                ErrorCode::HostUnreachable,
                "connecting to PostgreSQL timed out".into(),
            )
        }
        e => EngineError::Io(format!(
            "no connection to PostgreSQL: {e} (every pooled connection is held by an open \
             cursor or transaction, or the server cannot be reached; see storage.postgres.poolSize)"
        )),
    }
}
