//! The shape of one row of the engine table: how the configuration and the
//! server find an engine by name, what it offers before it is opened, and how
//! to open it. The table itself lives where every engine is reachable
//! (`bisondb_storage::ENGINES`); adding an engine is one more row there.

use std::path::PathBuf;
use std::sync::Arc;

use crate::engine::{Capabilities, Engine};
use crate::error::EngineError;

/// The settings an engine may read when it opens, from the server's
/// configuration. An engine ignores what does not concern it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OpenOptions {
    /// `--dbpath`: where a persistent engine keeps its files (an engine without
    /// files still refuses one that holds another engine's data).
    pub dbpath: PathBuf,
    /// `storage.journal.commitIntervalMs`: the longest a buffered write waits
    /// for its journal sync (1 to 500).
    pub journal_commit_interval_ms: u64,
    /// Where an engine over a network store connects (`--postgresUri`,
    /// `storage.postgres.*`); `None` for the engines in this process.
    pub remote: Option<RemoteOptions>,
}

/// How an engine over a network store reaches it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RemoteOptions {
    /// The store's connection URI (`postgresql://user@host:port/db?...`).
    pub uri: String,
    /// The most connections the engine keeps open; each open snapshot
    /// (a cursor's) and transaction holds one.
    pub pool_size: usize,
    /// `storage.postgres.tlsMode`: libpq's `sslmode` name, if configured
    /// (the URI may say it instead).
    pub tls_mode: Option<String>,
    /// `storage.postgres.tlsCAFile`: the CA the store's certificate must
    /// chain to.
    pub tls_ca_file: Option<PathBuf>,
    /// `storage.postgres.tlsCertificateKeyFile`: the engine's client
    /// certificate and key, one PEM file.
    pub tls_certificate_key_file: Option<PathBuf>,
}

/// One engine in the table.
#[derive(Debug, Clone, Copy)]
pub struct EngineEntry {
    /// The name `--storageEngine` takes, `storage.bson` records and
    /// [`Engine::name`] returns.
    pub name: &'static str,
    /// Other names `--storageEngine` accepts for this engine (`wiredTiger`
    /// for the default, so mongod configuration files keep working).
    pub aliases: &'static [&'static str],
    /// What the engine offers, known before it is opened (the engine's own
    /// [`Engine::capabilities`] returns the same).
    pub capabilities: Capabilities,
    /// Opens the engine. It may block (recovering a journal, connecting to a
    /// server): callers on an async runtime run it on a blocking thread.
    pub open: fn(&OpenOptions) -> Result<Arc<dyn Engine>, EngineError>,
}

impl EngineEntry {
    /// True when `name` is this engine's name or one of its aliases.
    pub fn answers_to(&self, name: &str) -> bool {
        self.name == name || self.aliases.contains(&name)
    }
}

/// The entry of `table` that answers to `name` (its name or an alias).
pub fn find<'a>(table: &'a [EngineEntry], name: &str) -> Option<&'a EngineEntry> {
    table.iter().find(|e| e.answers_to(name))
}
