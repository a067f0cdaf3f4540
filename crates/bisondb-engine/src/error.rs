//! What an engine call can fail with, and the mongod error code each failure
//! maps to.
//!
//! Only failures of the key-value layer live here (I/O, corruption, a full
//! disk, a dbpath owned by someone else, a write conflict, a capability the
//! engine lacks); what the catalog and the document store add on top
//! (duplicate keys, missing namespaces) is `bisondb_storage::StorageError`,
//! which wraps this type.

use std::sync::atomic::{AtomicU64, Ordering};

use bisondb_error::{ErrorCode, MongoError};

/// Write conflicts raised in this process (serverStatus
/// `metrics.operation.writeConflicts`): every [`EngineError::WriteConflict`]
/// is made by [`EngineError::write_conflict`], which counts it. Process-wide
/// because an engine has no handle on the server that uses it.
static WRITE_CONFLICTS: AtomicU64 = AtomicU64::new(0);

/// How many write conflicts the engines have raised since the process began.
pub fn write_conflicts() -> u64 {
    WRITE_CONFLICTS.load(Ordering::Relaxed)
}

/// A failure below the document store: in an engine or its files.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// The backend failed to read or write (or lost its connection).
    #[error("storage I/O error: {0}")]
    Io(String),
    /// Stored bytes do not decode; never caused by the client.
    #[error("storage corruption detected: {0}")]
    Corrupt(String),
    /// The backend is out of space.
    #[error("storage is full: no space left on the device holding the dbpath")]
    Full,
    /// Another process owns the dbpath (its lock file is locked).
    #[error("{0}")]
    DbPathInUse(String),
    /// The dbpath was created by another storage engine.
    #[error("{0}")]
    EngineMismatch(String),
    /// The caller passed something the engine cannot accept (a key too long, an
    /// option out of range).
    #[error("{0}")]
    InvalidArgument(String),
    /// A broken invariant.
    #[error("{0}")]
    Internal(String),
    /// A transaction lost a write-write race: another open transaction already
    /// wrote the key, or a commit after this transaction's snapshot changed it
    /// (mongod's WriteConflict, which a client retries).
    #[error("{0}")]
    WriteConflict(String),
    /// The engine does not offer what was asked (see [`crate::Capabilities`]).
    #[error("{0}")]
    Unsupported(String),
    /// A snapshot at a commit point the engine no longer keeps (mongod's
    /// SnapshotTooOld).
    #[error("{0}")]
    SnapshotTooOld(String),
    /// The store cannot take the operation now but may soon (a network
    /// store's lost connection, a server shutting down or starting, a
    /// read-only standby during a failover), as `code`, one of the codes
    /// drivers retry on (HostUnreachable, NotWritablePrimary,
    /// InterruptedAtShutdown...): the server fails the whole command with it,
    /// so a retryable write or a transaction gets the label drivers retry on.
    #[error("{message}")]
    Unavailable {
        /// The mongod error the failure reaches the client as.
        code: ErrorCode,
        /// What failed, in the store's words.
        message: String,
    },
}

impl EngineError {
    /// A [`EngineError::WriteConflict`] with `msg`, counted in
    /// [`write_conflicts`] (one relaxed addition).
    pub fn write_conflict(msg: impl Into<String>) -> EngineError {
        WRITE_CONFLICTS.fetch_add(1, Ordering::Relaxed);
        EngineError::WriteConflict(msg.into())
    }

    /// The mongod error code this error maps to.
    pub fn code(&self) -> ErrorCode {
        match self {
            EngineError::Full => ErrorCode::OutOfDiskSpace,
            EngineError::DbPathInUse(_) => ErrorCode::DBPathInUse,
            // mongod reports this one with a bare location code (28662).
            EngineError::EngineMismatch(_) => ErrorCode::Other(28662),
            EngineError::InvalidArgument(_) => ErrorCode::BadValue,
            EngineError::WriteConflict(_) => ErrorCode::WriteConflict,
            EngineError::Unsupported(_) => ErrorCode::NotImplemented,
            EngineError::SnapshotTooOld(_) => ErrorCode::SnapshotTooOld,
            EngineError::Unavailable { code, .. } => *code,
            EngineError::Io(_) | EngineError::Corrupt(_) | EngineError::Internal(_) => {
                ErrorCode::InternalError
            }
        }
    }

    /// The error for an I/O failure in `context`, turning "no space left"
    /// into [`EngineError::Full`].
    pub fn from_io(e: std::io::Error, context: String) -> EngineError {
        if is_disk_full(&e) {
            EngineError::Full
        } else {
            EngineError::Io(format!("{context}: {e}"))
        }
    }
}

/// True for the errors a full disk or an exhausted quota produce.
pub fn is_disk_full(e: &std::io::Error) -> bool {
    matches!(
        e.kind(),
        std::io::ErrorKind::StorageFull | std::io::ErrorKind::QuotaExceeded
    )
}

impl From<EngineError> for MongoError {
    fn from(e: EngineError) -> MongoError {
        match e {
            EngineError::Internal(m) => MongoError::internal(m),
            e => MongoError::new(e.code(), e.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_match_mongod() {
        let cases = [
            (EngineError::Full, 14031, "OutOfDiskSpace"),
            (EngineError::InvalidArgument("x".into()), 2, "BadValue"),
            (EngineError::Io("x".into()), 1, "InternalError"),
            (EngineError::Corrupt("x".into()), 1, "InternalError"),
            (EngineError::DbPathInUse("x".into()), 98, "DBPathInUse"),
            (
                EngineError::EngineMismatch("x".into()),
                28662,
                "Location28662",
            ),
            (EngineError::Internal("x".into()), 1, "InternalError"),
            (EngineError::WriteConflict("x".into()), 112, "WriteConflict"),
            (EngineError::Unsupported("x".into()), 238, "NotImplemented"),
            (
                EngineError::Unavailable {
                    code: ErrorCode::NotWritablePrimary,
                    message: "x".into(),
                },
                10107,
                "NotWritablePrimary",
            ),
        ];
        for (e, code, name) in cases {
            let m: MongoError = e.into();
            assert_eq!(m.code.code(), code);
            assert_eq!(m.code.name(), name);
        }
    }

    #[test]
    fn full_disk_errors_map_to_full() {
        let cases = [
            (std::io::Error::from_raw_os_error(28), true), // ENOSPC
            (std::io::Error::from_raw_os_error(122), true), // EDQUOT
            (std::io::Error::from_raw_os_error(5), false), // EIO
            (std::io::Error::other("x"), false),
        ];
        for (e, full) in cases {
            let mapped = EngineError::from_io(e, "ctx".into());
            assert_eq!(mapped == EngineError::Full, full, "{mapped:?}");
            if !full {
                assert!(matches!(mapped, EngineError::Io(ref m) if m.starts_with("ctx: ")));
            }
        }
    }
}
