//! Replica-set mode: one node that is the primary of its own set, as developers
//! run `mongod --replSet rs0` then `rs.initiate()` to get sessions,
//! transactions and change streams.
//!
//! The API other modules use ([`ReplState`], reached as
//! `ServerState::repl()`):
//! - [`ReplState::enabled`]: the server runs with `--replSet` (false: the
//!   standalone, and nothing here costs anything);
//! - [`ReplState::set_name`], [`ReplState::is_initiated`],
//!   [`ReplState::is_writable_primary`] (initiated: a one-member set is always
//!   its own primary), [`ReplState::term`];
//! - [`ReplState::check_writable`]: the 10107 NotWritablePrimary error a
//!   write gets before `replSetInitiate`, as on an uninitialized mongod;
//! - [`ReplState::clock`]: the one monotonic cluster-time clock
//!   ([`ClusterClock`]) every oplog entry's `ts` and every reply's
//!   `operationTime`/`$clusterTime` come from;
//! - [`ReplState::snapshots`]: the history reads at a point in time read
//!   ([`snapshots`]).
//!
//! Without `--replSet` the server is the standalone it always was:
//! `enabled()` is false, `is_writable_primary()` is true (a standalone takes
//! writes), and no oplog is written.
//!
//! On the `postgres` engine without `--replSet` the server is a mongos
//! ([`ReplState::is_mongos`]): one of possibly several stateless servers over
//! one store, so it answers `hello` as mongos 8 does (`msg: "isdbgrid"`, no
//! set), takes transaction numbers ([`ReplState::takes_txn_numbers`]:
//! retryable writes and transactions, `txn/`), and replies carry
//! `$clusterTime` and `operationTime` from the clock, ticked once per write
//! command (`cluster_time.rs`). It writes no oplog: the op observer only
//! puts a retryable write's session record into the write's batch
//! (`oplog.rs`), and change streams and reads at a past cluster time are
//! refused with errors naming the mode.

pub mod cluster_time;
pub mod diff;
pub mod hello;
pub mod oplog;
pub mod pre_images;
pub mod set_config;
pub mod signing;
pub mod snapshots;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::Timestamp;
use parking_lot::RwLock;

use crate::config::ServerConfig;

/// The largest `--oplogSize` mongod takes: 1 PB in megabytes.
const MAX_OPLOG_SIZE_MB: u64 = 1024 * 1024 * 1024;

/// Refuses replica-set settings mongod refuses at start-up.
pub fn validate_config(c: &ServerConfig) -> MongoResult<()> {
    if let Some(name) = &c.repl_set_name {
        if name.is_empty() {
            return Err(MongoError::bad_value(
                "replication.replSetName must not be empty",
            ));
        }
        if name.contains('/') {
            // mongod's legacy "name/seed1,seed2" form lists other members,
            // which a one-node set has none of.
            return Err(MongoError::bad_value(format!(
                "--replSet {name}: a seed list is not supported (one-member replica sets only); give the set's name alone"
            )));
        }
    }
    if let Some(mb) = c.oplog_size_mb {
        if mb == 0 || mb > MAX_OPLOG_SIZE_MB {
            return Err(MongoError::bad_value(
                "bad --oplogSize, arg must be greater than 0 and at most 1073741824 (1PB)",
            ));
        }
        if c.repl_set_name.is_none() {
            // mongod accepts it and ignores it without --replSet; say so
            // rather than size an oplog that does not exist.
            return Err(MongoError::bad_value(
                "--oplogSize (replication.oplogSizeMB) needs --replSet (replication.replSetName)",
            ));
        }
    }
    Ok(())
}

/// The state of a set once `replSetInitiate` ran (also read back from
/// `local.system.replset` at start-up).
#[derive(Clone, Debug)]
pub struct Initiated {
    /// The set's configuration document as `replSetGetConfig` returns it.
    pub config: bson::Document,
    /// The election term; a restart elects again, so it grows by one.
    pub term: i64,
}

/// The replica-set state of this server; see the module documentation.
pub struct ReplState {
    set_name: Option<String>,
    /// Answers as a mongos (see the module documentation).
    mongos: bool,
    initiated: RwLock<Option<Initiated>>,
    clock: ClusterClock,
    /// hello's `topologyVersion.counter`: grows on every change an awaiting
    /// hello must report (initiate, reconfig, a step-down attempt).
    topology: tokio::sync::watch::Sender<i64>,
    /// Serializes configuration changes (initiate, reconfig).
    changing: parking_lot::Mutex<()>,
    /// The optime and wall-clock milliseconds of the last write (hello's
    /// `lastWrite`, `replSetGetStatus`'s optimes).
    last_write: parking_lot::Mutex<(Timestamp, i64)>,
    /// When this node was last elected (`replSetGetStatus`'s `electionTime`).
    elected_at: parking_lot::Mutex<(Timestamp, i64)>,
    /// `local.oplog.rs`, the store's op observer in replica-set mode.
    oplog: Arc<oplog::Oplog>,
    /// The keys that sign `$clusterTime` under access control.
    keys: signing::Keys,
    /// What reads at a point in time read (`snapshots.rs`).
    snapshots: snapshots::SnapshotHistory,
}

impl ReplState {
    pub fn new(config: &ServerConfig) -> Arc<ReplState> {
        Arc::new_cyclic(|me| ReplState {
            oplog: oplog::Oplog::new(me.clone()),
            keys: signing::Keys::default(),
            snapshots: snapshots::SnapshotHistory::new(std::time::Duration::from_secs(
                config.min_snapshot_history_window_seconds,
            )),
            set_name: config.repl_set_name.clone(),
            mongos: is_mongos(config),
            initiated: RwLock::new(None),
            clock: ClusterClock::default(),
            topology: tokio::sync::watch::Sender::new(0),
            changing: parking_lot::Mutex::new(()),
            last_write: parking_lot::Mutex::new((
                Timestamp {
                    time: 0,
                    increment: 0,
                },
                0,
            )),
            elected_at: parking_lot::Mutex::new((
                Timestamp {
                    time: 0,
                    increment: 0,
                },
                0,
            )),
        })
    }

    /// Whether the server runs in replica-set mode (`--replSet`).
    #[inline]
    pub fn enabled(&self) -> bool {
        self.set_name.is_some()
    }

    /// Whether the server answers as a mongos: the `postgres` engine
    /// without `--replSet` (see the module documentation).
    #[inline]
    pub fn is_mongos(&self) -> bool {
        self.mongos
    }

    /// Whether commands may carry a `txnNumber` (retryable writes and
    /// transactions): a replica-set member or a mongos, as in mongod.
    #[inline]
    pub fn takes_txn_numbers(&self) -> bool {
        self.enabled() || self.mongos
    }

    /// Whether replies carry `$clusterTime` and `operationTime` and
    /// requests' cluster times count: an initiated member, or a mongos.
    pub fn keeps_cluster_time(&self) -> bool {
        self.mongos || (self.enabled() && self.is_initiated())
    }

    /// The set's name (`--replSet`), `None` for a standalone.
    pub fn set_name(&self) -> Option<&str> {
        self.set_name.as_deref()
    }

    /// Whether `replSetInitiate` ran (now or before a restart).
    pub fn is_initiated(&self) -> bool {
        self.initiated.read().is_some()
    }

    /// Whether writes are taken: a standalone, or the (only, so primary)
    /// member of an initiated set.
    #[inline]
    pub fn is_writable_primary(&self) -> bool {
        !self.enabled() || self.is_initiated()
    }

    /// The current election term (0 before initiate and on a standalone).
    pub fn term(&self) -> i64 {
        self.initiated.read().as_ref().map_or(0, |i| i.term)
    }

    /// The set's configuration, once initiated.
    pub fn initiated(&self) -> Option<Initiated> {
        self.initiated.read().clone()
    }

    /// Records the set as initiated (by `replSetInitiate`, a reconfig, or
    /// the configuration read back at start-up).
    pub fn set_initiated(&self, state: Initiated) {
        *self.initiated.write() = Some(state);
        self.topology_changed();
    }

    /// The optime (timestamp) and wall time in milliseconds of the last
    /// write.
    pub fn last_write(&self) -> (Timestamp, i64) {
        *self.last_write.lock()
    }

    /// Records a write at `ts` (the oplog calls it for each entry it commits).
    pub fn note_write(&self, ts: Timestamp, wall_ms: i64) {
        let mut last = self.last_write.lock();
        if pack(ts) > pack(last.0) {
            *last = (ts, wall_ms);
        }
    }

    /// The optime and wall time of this node's last election.
    pub fn elected_at(&self) -> (Timestamp, i64) {
        *self.elected_at.lock()
    }

    /// hello's `topologyVersion.counter` now.
    pub fn topology_counter(&self) -> i64 {
        *self.topology.borrow()
    }

    /// Wakes every awaiting hello: what it would answer has changed.
    pub fn topology_changed(&self) {
        self.topology.send_modify(|c| *c += 1);
    }

    /// A receiver that sees the next topology change (awaitable hello).
    pub fn watch_topology(&self) -> tokio::sync::watch::Receiver<i64> {
        self.topology.subscribe()
    }

    /// At start-up: a set initiated before the restart is initiated again,
    /// with this node elected in a new term (stored, as mongod stores its
    /// term), so it comes back as primary.
    pub fn recover(
        &self,
        storage: &bisondb_storage::Storage,
        port: u16,
        bind_ips: &[String],
    ) -> MongoResult<()> {
        if !self.enabled() {
            return Ok(());
        }
        let Some(mut config) = set_config::load(storage)? else {
            return Ok(());
        };
        if config.get_str("_id").ok() != self.set_name() {
            return Err(MongoError::new(
                ErrorCode::InvalidReplicaSetConfig,
                format!(
                    "the data in dbpath belongs to replica set {:?}, but --replSet names {:?}",
                    config.get_str("_id").unwrap_or_default(),
                    self.set_name().unwrap_or_default()
                ),
            ));
        }
        let host = set_config::member_host(&config);
        if !set_config::is_self(&host, port, bind_ips) {
            // mongod would start as a REMOVED member nobody can write to;
            // say why instead.
            return Err(MongoError::new(
                ErrorCode::NodeNotFound,
                format!(
                    "the replica set configuration in local.system.replset names this node {host}, which does not map to this server (port {port}); start it on that address"
                ),
            ));
        }
        let term = config.get_i64("term").unwrap_or(0).saturating_add(1);
        config.insert("term", term);
        set_config::store(storage, &config)?;
        self.set_initiated(Initiated { config, term });
        Ok(())
    }

    /// The oplog (`local.oplog.rs`); recording once the set is initiated.
    pub fn oplog(&self) -> &Arc<oplog::Oplog> {
        &self.oplog
    }

    /// The snapshots reads at a point in time read.
    pub fn snapshots(&self) -> &snapshots::SnapshotHistory {
        &self.snapshots
    }

    /// `replSetInitiate` and `replSetReconfig`: under one lock, `change`
    /// turns the current state into the new configuration, which is stored
    /// durably before it takes effect.
    pub fn change_config(
        &self,
        storage: &bisondb_storage::Storage,
        change: impl FnOnce(Option<&Initiated>) -> MongoResult<Initiated>,
    ) -> MongoResult<Initiated> {
        let _one_at_a_time = self.changing.lock();
        let current = self.initiated();
        let next = change(current.as_ref())?;
        set_config::store(storage, &next.config)?;
        self.set_initiated(next.clone());
        Ok(next)
    }

    /// mongod's error for a write on a member that is not primary, with
    /// the `topologyVersion` drivers compare with their last hello (so
    /// they do not take it for news and drop the server).
    pub fn check_writable(&self) -> MongoResult<()> {
        if self.is_writable_primary() {
            return Ok(());
        }
        let mut e = MongoError::new(ErrorCode::NotWritablePrimary, "not primary");
        let tv = bson::doc! {"topologyVersion": self.topology_version()};
        if let Ok(raw) = bson::RawDocumentBuf::try_from(&tv) {
            e = e.with_details(raw.into_bytes());
        }
        Err(e)
    }

    /// hello's `topologyVersion`: this process and the change counter.
    pub fn topology_version(&self) -> bson::Document {
        bson::doc! {"processId": process_id(), "counter": self.topology_counter()}
    }

    /// mongod's error for a replica-set command on a server started without
    /// `--replSet`; a mongos's (`replSetGetStatus is not supported through
    /// mongos`) in mongos mode.
    pub fn require_enabled(&self) -> MongoResult<()> {
        if self.enabled() {
            return Ok(());
        }
        if self.mongos {
            return Err(MongoError::new(
                ErrorCode::CommandNotFound,
                "replica set commands are not supported through mongos (the postgres engine answers as a mongos)",
            ));
        }
        Err(MongoError::new(
            ErrorCode::NoReplicationEnabled,
            "This node was not started with replication enabled.",
        ))
    }

    /// The set's state, or mongod's error before `replSetInitiate`.
    pub fn require_initiated(&self) -> MongoResult<Initiated> {
        self.require_enabled()?;
        self.initiated().ok_or_else(|| {
            MongoError::new(
                ErrorCode::NotYetInitialized,
                "no replset config has been received",
            )
        })
    }

    /// The cluster-time clock.
    pub fn clock(&self) -> &ClusterClock {
        &self.clock
    }

    /// The keys that sign `$clusterTime` (`signing.rs`).
    pub fn keys(&self) -> &signing::Keys {
        &self.keys
    }
}

/// Whether `config` makes the server a mongos: the `postgres` engine
/// without `--replSet`.
pub fn is_mongos(config: &ServerConfig) -> bool {
    config.repl_set_name.is_none() && config.resolved_storage_engine() == "postgres"
}

/// At start-up, once the state exists: see [`ReplState::recover`]. A
/// mongos starts its clock at the wall clock's time and installs the
/// observer that writes retryable writes' session records.
pub fn recover(state: &crate::state::ServerState) -> MongoResult<()> {
    let repl = state.repl();
    if repl.is_mongos() {
        repl.clock.tick();
        repl.oplog.activate_records_only();
        state.storage.set_op_observer(repl.oplog.clone());
        return Ok(());
    }
    if !repl.enabled() {
        return Ok(());
    }
    state.storage.set_op_observer(repl.oplog.clone());
    let port = state.bound_port.get().copied().unwrap_or(state.config.port);
    repl.recover(&state.storage, port, &state.config.bind_ip)?;
    if repl.is_initiated() {
        on_elected(state, "new primary")?;
    }
    Ok(())
}

/// This node became primary (`replSetInitiate`, a restart of an initiated
/// set): the oplog records from now on, and mongod's no-op entry `msg`
/// marks the election.
pub fn on_elected(state: &crate::state::ServerState, msg: &str) -> MongoResult<()> {
    let repl = state.repl();
    activate_oplog(state)?;
    repl.oplog.noop(&state.storage, msg)?;
    *repl.elected_at.lock() = repl.last_write();
    tracing::info!(target: "REPL", set = repl.set_name().unwrap_or_default(), term = repl.term(), "{msg}");
    Ok(())
}

/// Opens `local.oplog.rs` (creating it, capped at [`oplog_size_bytes`]),
/// moves the clock past its last entry, and starts recording into it and
/// keeping pre-images in `config.system.preimages` (created if missing).
fn activate_oplog(state: &crate::state::ServerState) -> MongoResult<()> {
    let repl = state.repl();
    if repl.oplog.is_active() {
        return Ok(());
    }
    let storage = &state.storage;
    let coll = match storage.collection(oplog::OPLOG_DB, oplog::OPLOG_COLL) {
        Some(c) => c,
        None => {
            let size = i64::try_from(oplog_size_bytes(&state.config)).unwrap_or(i64::MAX);
            storage
                .create_collection(
                    oplog::OPLOG_DB,
                    oplog::OPLOG_COLL,
                    bson::doc! {"capped": true, "size": size},
                )
                .map_err(MongoError::from)?
        }
    };
    // Each entry one key, its `ts` (an oplog written before that layout
    // is converted here: see `Storage::order_capped_by_key`).
    let purged = storage
        .order_capped_by_key(oplog::OPLOG_DB, oplog::OPLOG_COLL)
        .map_err(MongoError::from)?;
    if purged > 0 {
        tracing::info!(target: "REPL", purged, "oplog: natural-order keys of the older layout removed");
    }
    if let Some(Ok((_, last))) = coll.scan_natural(true).next() {
        if let Ok(ts) = last.get_timestamp("ts") {
            repl.clock.advance_to(ts);
            let wall = last
                .get_datetime("wall")
                .map_or(0, |d| d.timestamp_millis());
            repl.note_write(ts, wall);
        }
    }
    // Made before the oplog records, so its creation is not an entry
    // (each member keeps its own pre-images, as mongod).
    let pre_images = match storage.collection(oplog::PRE_IMAGES_DB, oplog::PRE_IMAGES_COLL) {
        Some(c) => c,
        None => storage
            .create_collection(
                oplog::PRE_IMAGES_DB,
                oplog::PRE_IMAGES_COLL,
                bson::doc! {"clusteredIndex": true},
            )
            .map_err(MongoError::from)?,
    };
    repl.oplog.activate_pre_images(pre_images);
    repl.oplog.activate(coll);
    Ok(())
}

thread_local! {
    /// Whether the command running on this thread runs on an initiated
    /// replica-set member (see [`member_scope`]).
    static MEMBER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks the command about to run on this thread as running on an
/// initiated replica-set member, until the guard drops: argument parsers
/// that have no server state at hand (the write concern's) ask
/// [`on_member`] to accept what only a member accepts (`w` above 1, tag
/// modes, answered after the write by `cluster_time::finish_reply`).
pub fn member_scope(state: &crate::state::ServerState) -> Option<MemberScope> {
    let repl = state.repl();
    if !repl.keeps_cluster_time() {
        return None;
    }
    Some(MemberScope(MEMBER.with(|m| m.replace(true))))
}

/// See [`member_scope`].
pub struct MemberScope(bool);

impl Drop for MemberScope {
    fn drop(&mut self) {
        MEMBER.with(|m| m.set(self.0));
    }
}

/// Whether the command on this thread runs on an initiated replica-set
/// member (or a mongos, which takes the same write concerns).
pub fn on_member() -> bool {
    MEMBER.with(|m| m.get())
}

/// Refuses a write (a command that takes a write concern) on a member that
/// is not primary, as mongod; the `local` database is not replicated and
/// takes writes anyway.
/// The live oplog is written only by the server: a command aimed at
/// `local.oplog.rs` that writes (insert, update, delete, drop...) fails as
/// mongod's drop of it does. The one exception is for test suites: with
/// `enableTestCommands=1`, `insert` may add hand-made entries (history a
/// change stream test needs, such as entries older than any write).
#[inline]
pub fn check_write(
    state: &crate::state::ServerState,
    db: &str,
    body: &bson::RawDocument,
) -> MongoResult<()> {
    let repl = state.repl();
    if !repl.enabled() {
        return Ok(());
    }
    if db == oplog::OPLOG_DB {
        let target = body.iter().next().and_then(|el| el.ok()).map(|(_, v)| v);
        let test_insert = state.config.enable_test_commands
            && body
                .iter()
                .next()
                .and_then(|el| el.ok())
                .is_some_and(|(k, _)| k.as_str() == "insert");
        if !test_insert && matches!(target, Some(bson::RawBsonRef::String(oplog::OPLOG_COLL))) {
            return Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "can't write to or drop the live oplog, local.oplog.rs, while replicating",
            ));
        }
        return Ok(());
    }
    repl.check_writable()
}

/// One ObjectId per server process, as mongod's `topologyVersion.processId`.
pub fn process_id() -> bson::oid::ObjectId {
    static ID: std::sync::OnceLock<bson::oid::ObjectId> = std::sync::OnceLock::new();
    *ID.get_or_init(bson::oid::ObjectId::new)
}

/// Milliseconds since the epoch now (an oplog entry's `wall`).
pub fn wall_ms() -> i64 {
    bson::DateTime::now().timestamp_millis()
}

/// The cluster time: a [`Timestamp`] (seconds, increment) that only grows,
/// ticked once per oplog entry; its seconds follow the wall clock when the
/// wall clock is ahead.
#[derive(Default)]
pub struct ClusterClock {
    /// `seconds << 32 | increment`, so one atomic holds the pair.
    packed: AtomicU64,
}

fn pack(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

fn unpack(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: v as u32,
    }
}

fn wall_seconds() -> u32 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    u32::try_from(secs).unwrap_or(u32::MAX)
}

impl ClusterClock {
    /// The latest time handed out (or advanced to).
    pub fn now(&self) -> Timestamp {
        unpack(self.packed.load(Ordering::Acquire))
    }

    /// A new time, greater than every earlier one.
    pub fn tick(&self) -> Timestamp {
        let wall = wall_seconds();
        let mut cur = self.packed.load(Ordering::Acquire);
        loop {
            let t = unpack(cur);
            let next = if wall > t.time {
                Timestamp {
                    time: wall,
                    increment: 1,
                }
            } else if t.increment == u32::MAX {
                Timestamp {
                    time: t.time.saturating_add(1),
                    increment: 1,
                }
            } else {
                Timestamp {
                    time: t.time,
                    increment: t.increment + 1,
                }
            };
            match self.packed.compare_exchange_weak(
                cur,
                pack(next),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return next,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Moves the clock to at least `ts` (the last oplog entry at start-up).
    pub fn advance_to(&self, ts: Timestamp) {
        self.packed.fetch_max(pack(ts), Ordering::AcqRel);
    }
}

/// The oplog's size in bytes: `--oplogSize`, else mongod's default, 5% of
/// the free space of the disk holding `dbpath` clamped to 990 MB..50 GB
/// (5% of physical memory for the in-memory engine, clamped the same way).
pub fn oplog_size_bytes(c: &ServerConfig) -> u64 {
    const MB: u64 = 1024 * 1024;
    if let Some(mb) = c.oplog_size_mb {
        return mb.saturating_mul(MB);
    }
    let in_memory = c
        .storage_engine_entry()
        .is_some_and(|e| !e.capabilities.persistent);
    let basis = if in_memory {
        physical_memory_bytes()
    } else {
        free_disk_bytes(&c.dbpath)
    };
    let five_percent = basis.unwrap_or(0) / 20;
    five_percent.clamp(990 * MB, 50 * 1024 * MB)
}

fn free_disk_bytes(path: &std::path::Path) -> Option<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(path.as_os_str().as_bytes()).ok()?;
    let mut st = std::mem::MaybeUninit::<libc::statvfs>::uninit();
    // SAFETY: `c` is a valid NUL-terminated path and `st` points to
    // writable memory of the right size, which statvfs fills on success.
    let rc = unsafe { libc::statvfs(c.as_ptr(), st.as_mut_ptr()) };
    if rc != 0 {
        return None;
    }
    // SAFETY: statvfs returned 0, so it initialised `st`.
    let st = unsafe { st.assume_init() };
    // The field types differ between platforms (u32 on some 32-bit ones).
    #[allow(clippy::unnecessary_cast)]
    let (blocks, size) = (st.f_bavail as u64, st.f_frsize as u64);
    Some(blocks.saturating_mul(size))
}

/// The machine's physical memory (`/proc/meminfo`'s `MemTotal`).
pub(crate) fn physical_memory_bytes() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = meminfo.lines().find(|l| l.starts_with("MemTotal:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clock_only_grows() {
        let c = ClusterClock::default();
        let a = c.tick();
        let b = c.tick();
        assert!(pack(b) > pack(a));
        c.advance_to(Timestamp {
            time: u32::MAX - 1,
            increment: 7,
        });
        let d = c.tick();
        assert_eq!((d.time, d.increment), (u32::MAX - 1, 8));
        c.advance_to(a);
        assert_eq!(c.now(), d);
    }

    #[test]
    fn settings_checked_as_mongod() {
        let mut c = ServerConfig {
            repl_set_name: Some("rs0".into()),
            oplog_size_mb: Some(50),
            ..Default::default()
        };
        assert!(validate_config(&c).is_ok());
        assert_eq!(oplog_size_bytes(&c), 50 * 1024 * 1024);
        c.oplog_size_mb = Some(0);
        assert!(validate_config(&c).is_err());
        c.oplog_size_mb = None;
        let size = oplog_size_bytes(&c);
        assert!((990 * 1024 * 1024..=50 * 1024 * 1024 * 1024).contains(&size));
        c.repl_set_name = Some(String::new());
        assert!(validate_config(&c).is_err());
        let standalone = ServerConfig {
            oplog_size_mb: Some(10),
            ..Default::default()
        };
        assert!(validate_config(&standalone).is_err());
    }

    #[test]
    fn yaml_replication_keys() {
        let mut c = ServerConfig::default();
        c.apply_yaml("replication:\n  replSetName: rs0\n  oplogSizeMB: 64\n")
            .unwrap();
        assert_eq!(c.repl_set_name.as_deref(), Some("rs0"));
        assert_eq!(c.oplog_size_mb, Some(64));
        assert!(c.apply_yaml("replication:\n  oplogSizeMB: big\n").is_err());
        assert!(c
            .apply_yaml("replication:\n  enableMajorityReadConcern: true\n")
            .is_err());
    }

    #[test]
    fn standalone_takes_writes_uninitiated_member_does_not() {
        let standalone = ReplState::new(&ServerConfig::default());
        assert!(!standalone.enabled());
        assert!(standalone.check_writable().is_ok());
        let member = ReplState::new(&ServerConfig {
            repl_set_name: Some("rs0".into()),
            ..Default::default()
        });
        assert!(member.enabled() && !member.is_initiated());
        assert!(member.check_writable().is_err());
        member.set_initiated(Initiated {
            config: bson::doc! {"_id": "rs0"},
            term: 1,
        });
        assert!(member.is_writable_primary());
        assert_eq!(member.term(), 1);
    }
}
