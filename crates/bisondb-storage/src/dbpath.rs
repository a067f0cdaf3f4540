//! Ownership of a `--dbpath` directory by one server process, and the record of
//! which engine created the files in it.
//!
//! Two processes writing one LSM tree would corrupt it, so the first one takes an
//! OS advisory lock on `mongod.lock` (mongod's file name, so operators find it where
//! they expect). The lock dies with the process, so a crash never leaves a stale
//! lock behind; the file itself stays and only carries the owner's pid for humans.
//!
//! The engine name lives in `storage.bson` (`{storage: {engine: "lsm"}}`, the shape
//! mongod uses): opening the files with another engine would read them as garbage
//! or, worse, start an empty database beside them, so it fails with a message that
//! says which engine to start with.

use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

use bson::{doc, Document};

use bisondb_engine::EngineError;

/// Name of the lock file inside the dbpath.
pub const LOCK_FILE: &str = "mongod.lock";

/// Name of the file recording the engine that owns the dbpath.
pub const ENGINE_FILE: &str = "storage.bson";

/// Holds the dbpath lock for as long as it lives.
#[derive(Debug)]
pub struct DbPathLock {
    dbpath: PathBuf,
    // Dropping the file releases the advisory lock.
    _file: File,
}

impl DbPathLock {
    /// The directory this lock owns.
    pub fn dbpath(&self) -> &Path {
        &self.dbpath
    }
}

/// Creates `dbpath` if needed, takes its lock, and checks (or, for a fresh
/// directory, records) that it belongs to `engine`.
pub fn claim(dbpath: &Path, engine: &str) -> Result<DbPathLock, EngineError> {
    std::fs::create_dir_all(dbpath).map_err(|e| {
        EngineError::from_io(
            e,
            format!("cannot create dbpath directory {}", dbpath.display()),
        )
    })?;
    let lock = lock(dbpath)?;
    check_engine(dbpath, engine)?;
    Ok(lock)
}

/// Takes the advisory lock on `dbpath/mongod.lock` without waiting.
pub fn lock(dbpath: &Path) -> Result<DbPathLock, EngineError> {
    let path = dbpath.join(LOCK_FILE);
    let mut file = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(|e| {
            EngineError::from_io(e, format!("cannot open lock file {}", path.display()))
        })?;
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            return Err(EngineError::DbPathInUse(format!(
                "Unable to lock the lock file: {} (Resource temporarily unavailable). \
                 Another BisonDB instance is already running on the {} directory",
                path.display(),
                dbpath.display()
            )));
        }
        Err(std::fs::TryLockError::Error(e)) => {
            return Err(EngineError::from_io(
                e,
                format!("Unable to lock the lock file: {}", path.display()),
            ));
        }
    }
    // The pid is informational (mongod writes it too); failing to write it must not
    // stop a server that does own the directory.
    let _ = file
        .set_len(0)
        .and_then(|()| writeln!(file, "{}", std::process::id()))
        .and_then(|()| file.sync_data());
    Ok(DbPathLock {
        dbpath: dbpath.to_path_buf(),
        _file: file,
    })
}

/// The engine recorded in `dbpath`, if any.
pub fn recorded_engine(dbpath: &Path) -> Result<Option<String>, EngineError> {
    let path = dbpath.join(ENGINE_FILE);
    let mut bytes = Vec::new();
    match File::open(&path) {
        Ok(mut f) => {
            f.read_to_end(&mut bytes)
                .map_err(|e| EngineError::from_io(e, format!("cannot read {}", path.display())))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(EngineError::from_io(
                e,
                format!("cannot read {}", path.display()),
            ))
        }
    }
    let corrupt = |what: &str| EngineError::Corrupt(format!("{}: {what}", path.display()));
    let doc = Document::from_reader(bytes.as_slice()).map_err(|e| corrupt(&e.to_string()))?;
    let engine = doc
        .get_document("storage")
        .ok()
        .and_then(|s| s.get_str("engine").ok())
        .ok_or_else(|| corrupt("missing storage.engine"))?;
    Ok(Some(engine.to_string()))
}

/// Fails unless `dbpath` was created by `engine`; records `engine` when nothing
/// is recorded yet. The caller holds the lock.
pub fn check_engine(dbpath: &Path, engine: &str) -> Result<(), EngineError> {
    match recorded_engine(dbpath)? {
        Some(found) if found == engine => Ok(()),
        Some(found) => Err(EngineError::EngineMismatch(format!(
            "dbpath {} was created by engine '{found}'; start with --storageEngine {found} \
             or choose another --dbpath",
            dbpath.display()
        ))),
        None => record_engine(dbpath, engine),
    }
}

/// Writes `storage.bson` so that a crash leaves either no file or a whole one:
/// write a temporary file, sync it, rename it over, sync the directory.
fn record_engine(dbpath: &Path, engine: &str) -> Result<(), EngineError> {
    let path = dbpath.join(ENGINE_FILE);
    let tmp = dbpath.join(format!("{ENGINE_FILE}.tmp"));
    let body = doc! { "storage": { "engine": engine, "formatVersion": 1i32 } };
    let bytes = body
        .to_vec()
        .map_err(|e| EngineError::Internal(format!("cannot encode {ENGINE_FILE}: {e}")))?;
    let write = || -> std::io::Result<()> {
        let mut f = File::create(&tmp)?;
        f.write_all(&bytes)?;
        f.sync_all()?;
        std::fs::rename(&tmp, &path)?;
        File::open(dbpath)?.sync_all()
    };
    write().map_err(|e| EngineError::from_io(e, format!("cannot write {}", path.display())))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn second_lock_on_the_same_dbpath_fails_with_a_clear_message() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let first = claim(dir.path(), "lsm");
        assert!(first.is_ok(), "{first:?}");
        let second = lock(dir.path());
        match second {
            Err(EngineError::DbPathInUse(msg)) => {
                assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
                assert!(msg.contains(LOCK_FILE), "{msg}");
                assert!(msg.contains("already running"), "{msg}");
            }
            other => panic!("expected DbPathInUse, got {other:?}"),
        }
        drop(first);
        assert!(lock(dir.path()).is_ok(), "the lock is released on drop");
    }

    #[test]
    fn engine_is_recorded_once_and_checked() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        assert_eq!(recorded_engine(dir.path()).ok(), Some(None));
        assert!(check_engine(dir.path(), "lsm").is_ok());
        assert_eq!(recorded_engine(dir.path()).ok(), Some(Some("lsm".into())));
        assert!(check_engine(dir.path(), "lsm").is_ok());
        match check_engine(dir.path(), "rocks") {
            Err(e @ EngineError::EngineMismatch(_)) => {
                let msg = e.to_string();
                assert!(
                    msg.contains("was created by engine 'lsm'; start with --storageEngine lsm"),
                    "{msg}"
                );
                assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
            }
            other => panic!("expected EngineMismatch, got {other:?}"),
        }
        assert!(
            !dir.path().join(format!("{ENGINE_FILE}.tmp")).exists(),
            "no temporary file is left behind"
        );
    }

    #[test]
    fn damaged_engine_file_is_reported_as_corruption() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let cases: &[&[u8]] = &[
            b"not bson",
            // A valid document without storage.engine.
            &[5, 0, 0, 0, 0],
        ];
        for bytes in cases {
            std::fs::write(dir.path().join(ENGINE_FILE), bytes)
                .unwrap_or_else(|e| panic!("write: {e}"));
            assert!(
                matches!(
                    check_engine(dir.path(), "lsm"),
                    Err(EngineError::Corrupt(_))
                ),
                "{bytes:?}"
            );
        }
    }
}
