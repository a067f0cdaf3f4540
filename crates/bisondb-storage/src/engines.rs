//! The engine table: every engine BisonDB offers, by the name
//! `--storageEngine` takes, with what it offers and how to open it. The
//! configuration checks names against it, `buildInfo` lists it, and the
//! server opens the engine it names; nothing else matches engine names.
//!
//! It lives here, not in `bisondb-engine`, because this is where every engine
//! is reachable (the lsm engine needs fjall), and where the store's key
//! layout can be handed to the engines that want it.

use std::sync::Arc;

use bisondb_engine::{Engine, EngineEntry, EngineError, MemoryEngine, OpenOptions};
use bisondb_postgres::PostgresEngine;

use crate::dbpath;
use crate::layout;
use crate::lsm::{self, KeyRegions, LsmEngine, LsmOptions};

/// Every engine, in the order `buildInfo` lists them and error messages name
/// them. The default (`ServerConfig`'s) is `lsm`.
pub const ENGINES: &[EngineEntry] = &[
    EngineEntry {
        name: MemoryEngine::NAME,
        aliases: &[],
        capabilities: MemoryEngine::CAPABILITIES,
        open: open_memory,
    },
    EngineEntry {
        name: lsm::ENGINE_NAME,
        aliases: &["wiredTiger"],
        capabilities: LsmEngine::CAPABILITIES,
        open: open_lsm,
    },
    EngineEntry {
        name: POSTGRES_ENGINE,
        aliases: &[],
        capabilities: bisondb_postgres::CAPABILITIES,
        open: open_postgres,
    },
];

/// The name of the engine over a PostgreSQL-wire store (`--postgresUri`).
pub const POSTGRES_ENGINE: &str = bisondb_postgres::ENGINE_NAME;

/// The engine `name` means (its name or an alias), if BisonDB has it.
pub fn find_engine(name: &str) -> Option<&'static EngineEntry> {
    bisondb_engine::entry::find(ENGINES, name)
}

/// The names of [`ENGINES`], in order.
pub fn engine_names() -> Vec<&'static str> {
    ENGINES.iter().map(|e| e.name).collect()
}

/// `inMemory` writes nothing, but like mongod it refuses a dbpath that holds
/// another engine's data files, and it locks an existing dbpath against a
/// persistent server for as long as it runs.
fn open_memory(options: &OpenOptions) -> Result<Arc<dyn Engine>, EngineError> {
    let dbpath = &options.dbpath;
    if !dbpath.is_dir() {
        return Ok(Arc::new(MemoryEngine::new()));
    }
    let lock = dbpath::lock(dbpath)?;
    match dbpath::recorded_engine(dbpath)? {
        Some(found) if found != MemoryEngine::NAME => Err(EngineError::EngineMismatch(format!(
            "Detected data files in {} created by the '{found}' storage engine, but the \
             specified storage engine was '{}'; start with --storageEngine {found} \
             or choose another --dbpath",
            dbpath.display(),
            MemoryEngine::NAME
        ))),
        _ => Ok(Arc::new(MemoryEngine::holding(Box::new(lock)))),
    }
}

/// Opens (creating the directory) the persistent engine in the dbpath.
fn open_lsm(options: &OpenOptions) -> Result<Arc<dyn Engine>, EngineError> {
    let lsm_options = LsmOptions {
        regions: store_regions(),
        ..LsmOptions::with_journal_commit_interval_ms(options.journal_commit_interval_ms)?
    };
    LsmEngine::open_shared(&options.dbpath, lsm_options)
}

/// Connects to the store `--postgresUri` names, which other servers may
/// share (the layers above the engine keep nothing another server could make
/// stale: `store/shared.rs`); the dbpath is not used (the store keeps the
/// data; the server's spill files still go there).
fn open_postgres(options: &OpenOptions) -> Result<Arc<dyn Engine>, EngineError> {
    let Some(remote) = &options.remote else {
        return Err(EngineError::InvalidArgument(
            "--storageEngine postgres needs --postgresUri postgresql://...".into(),
        ));
    };
    let tls = bisondb_postgres::TlsSettings {
        mode: remote.tls_mode.clone(),
        ca_file: remote.tls_ca_file.clone(),
        certificate_key_file: remote.tls_certificate_key_file.clone(),
    };
    Ok(Arc::new(PostgresEngine::open_with_tls(
        &remote.uri,
        remote.pool_size,
        &tls,
    )?))
}

/// What the lsm engine needs to know of the store's key layout: the regions
/// written out of order (stats records and index entries), and the index
/// entries, which go through its index write buffer.
fn store_regions() -> KeyRegions {
    KeyRegions {
        apart: layout::APART_REGIONS,
        buffered: Some(layout::INDEX_REGION),
    }
}

/// The default lsm options with the store's key regions: what a [`crate::Storage`]
/// over an lsm engine opened by hand (tests, benchmarks) needs.
pub fn store_lsm_options() -> LsmOptions {
    LsmOptions {
        regions: store_regions(),
        ..LsmOptions::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_aliases_and_capabilities() {
        assert_eq!(engine_names(), vec!["inMemory", "lsm", "postgres"]);
        assert_eq!(find_engine("wiredTiger").map(|e| e.name), Some("lsm"));
        assert_eq!(find_engine("lsm").map(|e| e.name), Some("lsm"));
        assert!(find_engine("mmapv1").is_none());
        for entry in ENGINES {
            assert!(find_engine(entry.name).is_some());
        }
        assert!(find_engine("lsm").is_some_and(|e| e.capabilities.persistent));
        assert!(find_engine("inMemory").is_some_and(|e| !e.capabilities.persistent));
    }

    /// Each engine reports the name and capabilities its row says.
    #[test]
    fn opened_engines_match_their_rows() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        // The postgres engine's conformance tests open it on a store of
        // their own (bisondb-postgres); here it must refuse to open without one.
        for entry in ENGINES {
            let options = OpenOptions {
                dbpath: dir.path().join(entry.name),
                journal_commit_interval_ms: 100,
                remote: None,
            };
            if entry.name == POSTGRES_ENGINE {
                assert!(matches!(
                    (entry.open)(&options),
                    Err(EngineError::InvalidArgument(m)) if m.contains("--postgresUri")
                ));
                assert!(entry.capabilities.blocking_io && entry.capabilities.persistent);
                continue;
            }
            let engine = (entry.open)(&options).unwrap_or_else(|e| panic!("{}: {e}", entry.name));
            assert_eq!(engine.name(), entry.name);
            assert_eq!(engine.capabilities(), entry.capabilities);
        }
    }

    #[test]
    fn memory_refuses_a_dbpath_of_another_engine() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        drop(dbpath::claim(dir.path(), "lsm").unwrap_or_else(|e| panic!("{e}")));
        let options = OpenOptions {
            dbpath: dir.path().to_path_buf(),
            journal_commit_interval_ms: 100,
            remote: None,
        };
        match open_memory(&options) {
            Err(EngineError::EngineMismatch(m)) => {
                assert!(m.contains("created by the 'lsm' storage engine"), "{m}")
            }
            Err(e) => panic!("{e}"),
            Ok(_) => panic!("inMemory opened an lsm dbpath"),
        }
    }
}
