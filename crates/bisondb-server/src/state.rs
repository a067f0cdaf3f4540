//! State shared by every connection: storage, cursors, counters, configuration.

use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use bisondb_storage::Storage;
use tokio::sync::Notify;

use crate::config::ServerConfig;
use crate::cursor::CursorManager;

/// mongod's `opcounters` section of serverStatus.
#[derive(Default)]
pub struct OpCounters {
    pub insert: AtomicU64,
    pub query: AtomicU64,
    pub update: AtomicU64,
    pub delete: AtomicU64,
    pub getmore: AtomicU64,
    pub command: AtomicU64,
}

impl OpCounters {
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }
}

/// Commands running now, for serverStatus's `globalLock.activeClients`:
/// writers run a command that takes a write concern (a write or DDL command),
/// readers anything else (the `serverStatus` asking included). The
/// connection counts each command from dispatch to reply.
#[derive(Default)]
pub struct ActiveOps {
    readers: AtomicU64,
    writers: AtomicU64,
}

/// A running command, counted by [`ActiveOps`] until it drops.
pub struct ActiveOp<'a>(&'a AtomicU64);

impl Drop for ActiveOp<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

impl ActiveOps {
    /// Counts a command (a writer when `writes`: it takes a write concern)
    /// as running until the returned guard drops.
    pub fn enter(&self, writes: bool) -> ActiveOp<'_> {
        let counter = if writes { &self.writers } else { &self.readers };
        counter.fetch_add(1, Ordering::Relaxed);
        ActiveOp(counter)
    }

    pub fn readers(&self) -> u64 {
        self.readers.load(Ordering::Relaxed)
    }

    pub fn writers(&self) -> u64 {
        self.writers.load(Ordering::Relaxed)
    }
}

pub struct ServerState {
    pub config: ServerConfig,
    pub storage: Storage,
    pub cursors: CursorManager,
    /// Logical sessions (`sessions.rs`).
    pub sessions: crate::sessions::SessionCache,
    /// Sessions' transaction numbers: retryable writes (`crate::txn`).
    pub txns: crate::txn::Transactions,
    pub opcounters: OpCounters,
    /// Per-command counters and latencies, network, documents, cursors
    /// (`metrics/`: serverStatus and the metrics endpoint).
    pub metrics: crate::metrics::Metrics,
    /// The address the metrics endpoint is bound to (`--metricsAddr`).
    pub metrics_addr: std::sync::OnceLock<std::net::SocketAddr>,
    /// Commands running now (serverStatus `globalLock.activeClients`).
    pub active: ActiveOps,
    /// Profiling levels and thresholds (`profile`), in memory as in mongod.
    pub profiler: crate::profiler::Profiler,
    pub started: Instant,
    pub started_at: SystemTime,
    pub connections_current: AtomicU64,
    pub connections_total: AtomicU64,
    next_connection_id: AtomicI64,
    /// Set by the `shutdown` command or a signal; listeners stop accepting.
    pub shutting_down: AtomicBool,
    pub shutdown: Notify,
    /// Addresses actually bound (port 0 resolves here), for diagnostics.
    pub bound_port: std::sync::OnceLock<u16>,
    /// Test-only fail points (`configureFailPoint`), all off unless a test
    /// configured one.
    pub fail_points: crate::fail_points::FailPoints,
    /// The ingress connection establishment rate limiter (`ingress.rs`).
    pub ingress: crate::ingress::RateLimiter,
    /// `fsync` with `lock: true`: writes wait while it is held.
    pub fsync_lock: crate::fsync_lock::FsyncLock,
    /// Replica-set mode (`--replSet`): see [`ServerState::repl`].
    pub repl: Arc<crate::repl::ReplState>,
    /// Operations in flight, per connection (`currentOp`, `killOp`).
    pub ops: crate::op_ctx::Operations,
    /// Per-collection time and counts (`top`).
    pub top: crate::commands::top::Top,
    /// TLS acceptor, key file and TLS counters, loaded at start-up
    /// (`tls::Security::load`); unset only in states built without a server.
    pub security: std::sync::OnceLock<crate::tls::Security>,
    /// Users, roles and `--auth` (`auth/`).
    pub auth: crate::auth::AuthState,
}

impl ServerState {
    pub fn new(config: ServerConfig, storage: Storage) -> Arc<ServerState> {
        // Before `config` moves into the state: `--profile` and `--slowms`.
        let repl = crate::repl::ReplState::new(&config);
        let profiler = crate::profiler::Profiler::new(
            config.profile,
            config.slowms,
            config.slow_op_sample_rate,
        );
        let ops = crate::op_ctx::Operations::with_memory(&config);
        let sessions =
            crate::sessions::SessionCache::new(config.local_logical_session_timeout_minutes);
        let auth = crate::auth::AuthState::new(&config);
        Arc::new(ServerState {
            auth,
            config,
            storage,
            cursors: CursorManager::default(),
            sessions,
            txns: Default::default(),
            opcounters: OpCounters::default(),
            metrics: Default::default(),
            metrics_addr: std::sync::OnceLock::new(),
            active: ActiveOps::default(),
            profiler,
            started: Instant::now(),
            started_at: SystemTime::now(),
            connections_current: AtomicU64::new(0),
            connections_total: AtomicU64::new(0),
            next_connection_id: AtomicI64::new(1),
            shutting_down: AtomicBool::new(false),
            shutdown: Notify::new(),
            bound_port: std::sync::OnceLock::new(),
            fail_points: Default::default(),
            ingress: Default::default(),
            fsync_lock: Default::default(),
            repl,
            ops,
            top: Default::default(),
            security: std::sync::OnceLock::new(),
        })
    }

    /// True when the storage engine's calls may block for long (a network
    /// store, [`bisondb_storage::Capabilities::blocking_io`]): then every
    /// command that touches storage must run off the async runtime's workers,
    /// not only the ones that may run long.
    pub fn storage_may_block(&self) -> bool {
        self.storage.capabilities().blocking_io
    }

    /// The replica-set state: whether the server runs with `--replSet`, the
    /// set's name, whether it is initiated and primary, the cluster-time
    /// clock (`crate::repl`'s module documentation lists the API).
    #[inline]
    pub fn repl(&self) -> &crate::repl::ReplState {
        &self.repl
    }

    pub fn next_connection_id(&self) -> i64 {
        self.next_connection_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Asks every listener and connection to stop.
    pub fn request_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        // Running commands end at their next check with 11600.
        self.ops.kill_all_at_shutdown();
        self.shutdown.notify_waiters();
    }

    /// Before a size report (`dbStats`, `collStats`, `listDatabases`,
    /// `$collStats`): writes what only the engine's memory tables hold into
    /// its files when that is a noticeable part of the data
    /// (`Storage::sizes_need_flush`) and waits for the engine to settle, so
    /// the sizes agree with the disk right after a load. Skipped while `fsync` holds the files still; a failed
    /// flush leaves the sizes as the files are.
    pub fn flush_for_sizes(&self) {
        if !self.storage.sizes_need_flush() {
            return;
        }
        let Some(_pass) = self.fsync_lock.try_enter() else {
            return;
        };
        // Settled, not only flushed: the flush's own follow-up work (the
        // index write buffer's keyspace compacting away the blobs it just
        // deleted) would otherwise change the sizes between two reports.
        if let Err(e) = self.storage.checkpoint_and_settle() {
            tracing::warn!(target: "STORAGE", error = %e, "could not flush before reporting sizes");
        }
    }

    pub fn is_shutting_down(&self) -> bool {
        self.shutting_down.load(Ordering::SeqCst)
    }
}

/// Where blocking aggregation stages spill: `<dbpath>/_tmp`, as mongod.
pub fn spill_dir(dbpath: &std::path::Path) -> std::path::PathBuf {
    dbpath.join("_tmp")
}

/// The host's name as the server reports it (`hostInfo`, `serverStatus`,
/// `$collStats`, `$indexStats`).
pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "localhost".to_string())
}
