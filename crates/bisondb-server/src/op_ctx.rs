//! Operations in flight: each command's interruption context
//! ([`bisondb_error::interrupt::OpCtx`]: its `maxTimeMS` deadline and kill
//! flag) registered per connection, so `currentOp`/`$currentOp` can list it,
//! `killOp` and shutdown can interrupt it, and a watcher can kill it with 279
//! ClientDisconnect when its client hangs up while it runs.
//!
//! Per command this costs one opid increment, one allocation of the context
//! (with its memory tracker, which touches the server's pool only when the
//! command holds more than 1 MiB),
//! a copy of the command body and two uncontended locks of the connection's
//! own entry; the registry's map is locked only when a connection opens or
//! closes, and by the readers (`currentOp`, `killOp`, the watcher).

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use bisondb_error::interrupt::{self, OpCtx};
use bisondb_error::ErrorCode;
use bson::{doc, Bson, Document, RawDocumentBuf};
use parking_lot::Mutex;

use crate::auth::Name;
use crate::context::ConnectionInfo;
use crate::request::CommandRequest;
use crate::state::ServerState;

/// Every client connection and the operation each is running.
pub struct Operations {
    /// The memory every operation's tracker draws on
    /// (`bisondb_error::memory`): the server-wide and per-operation limits.
    pub memory: &'static bisondb_error::memory::Pool,
    next_opid: AtomicU32,
    clients: Mutex<BTreeMap<i64, Arc<Client>>>,
    /// Set at shutdown: every operation that begins is killed at once.
    shutting_down: AtomicBool,
}

/// One connection as `currentOp` shows it.
#[derive(Debug)]
pub struct Client {
    pub connection_id: i64,
    pub peer: String,
    /// The socket, for the disconnect watcher (`None`: not a socket, as in
    /// the in-process tests' streams).
    fd: Option<i32>,
    /// The handshake's `client` document, once the connection said hello.
    metadata: OnceLock<Document>,
    current: Mutex<Option<Arc<RunningOp>>>,
    /// The user the connection is authenticated as (`currentOp`'s
    /// `effectiveUsers`; a user without `inprog`/`killop` sees and kills
    /// only its own operations).
    user: Mutex<Option<Arc<Name>>>,
}

impl Client {
    /// The connection authenticated (or logged out: `None`).
    pub fn set_user(&self, user: Option<Arc<Name>>) {
        *self.user.lock() = user;
    }

    /// The IP address the client connected to (`serverAddress` of
    /// authentication restrictions); `None` over the Unix socket.
    pub fn local_ip(&self) -> Option<std::net::IpAddr> {
        let fd = self.fd?;
        // SAFETY: `storage` is large enough for any socket address and
        // `len` says so; getsockname writes at most `len` bytes and the fd
        // is this connection's open socket.
        let mut storage: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let rc = unsafe {
            libc::getsockname(
                fd,
                (&mut storage as *mut libc::sockaddr_storage).cast(),
                &mut len,
            )
        };
        if rc != 0 {
            return None;
        }
        match i32::from(storage.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let a = unsafe {
                    &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>()
                };
                Some(std::net::IpAddr::V4(std::net::Ipv4Addr::from(
                    u32::from_be(a.sin_addr.s_addr),
                )))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let a = unsafe {
                    &*(&storage as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>()
                };
                Some(std::net::IpAddr::V6(std::net::Ipv6Addr::from(
                    a.sin6_addr.s6_addr,
                )))
            }
            _ => None,
        }
    }
}

/// Whose operations `currentOp` and `killOp` may reach.
#[derive(Debug, Clone, Default)]
pub enum Whose {
    /// Everyone's (without `--auth`, or with `inprog`/`killop`).
    #[default]
    All,
    /// Only those of connections authenticated as this user (`None`: as
    /// nobody), as mongod's "coauthorized" clients.
    Of(Option<Arc<Name>>),
}

impl Whose {
    fn includes(&self, c: &Client) -> bool {
        self.includes_user(c.user.lock().as_deref())
    }

    /// Whether what `user` made (an operation, a cursor) is among these.
    pub fn includes_user(&self, user: Option<&Name>) -> bool {
        match self {
            Whose::All => true,
            Whose::Of(me) => user == me.as_deref(),
        }
    }
}

/// A command running now.
#[derive(Debug)]
pub struct RunningOp {
    pub opid: i32,
    pub ctx: Arc<OpCtx>,
    pub op: &'static str,
    pub ns: String,
    pub command: RawDocumentBuf,
    pub started: Instant,
    /// The plan it chose (`planSummary`), once it has one.
    pub plan_summary: Arc<OnceLock<Arc<str>>>,
}

/// Removes the connection from the registry when it closes.
pub struct Registered {
    state: Arc<ServerState>,
    id: i64,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.state.ops.clients.lock().remove(&self.id);
    }
}

/// The running command: current on this thread and listed under its
/// connection until dropped.
pub struct Running {
    client: Option<Arc<Client>>,
    _entered: interrupt::Guard,
    /// Where the command reports its plan ([`RunningOp::plan_summary`]).
    pub plan_slot: Option<Arc<OnceLock<Arc<str>>>>,
}

impl Drop for Running {
    fn drop(&mut self) {
        if let Some(c) = &self.client {
            *c.current.lock() = None;
        }
    }
}

impl Operations {
    /// No operation yet; their memory bounded as `config` says.
    pub fn with_memory(config: &crate::config::ServerConfig) -> Operations {
        let pool = bisondb_error::memory::Pool::new(
            config.server_memory_limit(),
            config.operation_memory_bytes,
        );
        Operations {
            memory: bisondb_error::memory::Pool::leak(pool),
            next_opid: AtomicU32::default(),
            clients: Mutex::default(),
            shutting_down: AtomicBool::default(),
        }
    }

    /// Lists a new connection (`fd`: its socket, watched for a hang-up while
    /// it runs a command).
    pub fn connect(
        state: &Arc<ServerState>,
        conn: &mut ConnectionInfo,
        fd: Option<i32>,
    ) -> Registered {
        let client = Arc::new(Client {
            connection_id: conn.id,
            peer: conn.peer.clone(),
            fd,
            metadata: OnceLock::new(),
            current: Mutex::new(None),
            user: Mutex::new(conn.auth.user.clone()),
        });
        state.ops.clients.lock().insert(conn.id, client.clone());
        conn.client = Some(client);
        Registered {
            state: state.clone(),
            id: conn.id,
        }
    }

    /// Starts one command: its context (deadline `max_time_ms`, 0: none)
    /// becomes current on this thread and is listed under its connection.
    pub fn begin(
        &self,
        req: &CommandRequest<'_>,
        conn: &ConnectionInfo,
        max_time_ms: u64,
    ) -> Running {
        let ctx = Arc::new(OpCtx::with_max_time_ms(max_time_ms).with_memory(self.memory));
        if self.shutting_down.load(Ordering::Relaxed) {
            ctx.kill(ErrorCode::InterruptedAtShutdown);
        }
        let entered = interrupt::enter(ctx.clone());
        let Some(client) = conn.client.clone() else {
            return Running {
                client: None,
                _entered: entered,
                plan_slot: None,
            };
        };
        if client.metadata.get().is_none() {
            if let Some(m) = &conn.client_metadata {
                let _ = client.metadata.set(m.clone());
            }
        }
        let opid = (self.next_opid.fetch_add(1, Ordering::Relaxed) & (i32::MAX as u32)) as i32;
        let running = RunningOp {
            opid: opid.max(1),
            ctx,
            op: crate::profiler::op_name(req.name),
            ns: namespace(req),
            command: command_summary(req),
            started: Instant::now(),
            plan_summary: Arc::new(OnceLock::new()),
        };
        let plan_slot = Some(running.plan_summary.clone());
        *client.current.lock() = Some(Arc::new(running));
        Running {
            client: Some(client),
            _entered: entered,
            plan_slot,
        }
    }

    fn clients(&self) -> Vec<Arc<Client>> {
        self.clients.lock().values().cloned().collect()
    }

    /// Interrupts the operation `opid` (`killOp`) if it is one of `whose`;
    /// false when none such runs.
    pub fn kill(&self, opid: i64, whose: &Whose) -> bool {
        for c in self.clients().into_iter().filter(|c| whose.includes(c)) {
            if let Some(op) = c.current.lock().as_ref() {
                if i64::from(op.opid) == opid {
                    op.ctx.kill(ErrorCode::Interrupted);
                    return true;
                }
            }
        }
        false
    }

    /// Interrupts every running operation, and every one that starts from
    /// now on, with 11600 InterruptedAtShutdown.
    pub fn kill_all_at_shutdown(&self) {
        self.shutting_down.store(true, Ordering::Relaxed);
        for c in self.clients() {
            if let Some(op) = c.current.lock().as_ref() {
                op.ctx.kill(ErrorCode::InterruptedAtShutdown);
            }
        }
    }

    /// Kills with 279 ClientDisconnect the operations whose client hung up
    /// (those running for longer than `after`).
    pub fn kill_disconnected(&self, after: Duration) {
        for c in self.clients() {
            let Some(fd) = c.fd else { continue };
            let op = c.current.lock().clone();
            let Some(op) = op else { continue };
            if op.started.elapsed() < after || op.ctx.killed().is_some() {
                continue;
            }
            if peer_hung_up(fd) {
                tracing::info!(
                    conn = c.connection_id,
                    opid = op.opid,
                    "client disconnected: interrupting its operation"
                );
                op.ctx.kill(ErrorCode::ClientDisconnect);
            }
        }
    }

    /// `$currentOp`'s documents: active operations, then (when asked) idle
    /// connections.
    pub fn report(&self, host: &str, idle_connections: bool, whose: &Whose) -> Vec<Document> {
        // mongod's form: `2026-01-01T00:00:00.000+00:00`.
        let now = chrono::DateTime::from_timestamp_millis(bson::DateTime::now().timestamp_millis())
            .unwrap_or_default()
            .format("%Y-%m-%dT%H:%M:%S%.3f+00:00")
            .to_string();
        let mut out = Vec::new();
        for c in self.clients().into_iter().filter(|c| whose.includes(c)) {
            let op = c.current.lock().clone();
            let mut d = doc! {
                "type": "op",
                "host": host,
                "desc": format!("conn{}", c.connection_id),
                "connectionId": c.connection_id,
                "client": c.peer.clone(),
            };
            if let Some(m) = c.metadata.get() {
                if let Ok(app) = m.get_document("application") {
                    if let Ok(name) = app.get_str("name") {
                        d.insert("appName", name);
                    }
                }
                d.insert("clientMetadata", m.clone());
            }
            if let Some(u) = c.user.lock().as_deref() {
                d.insert("effectiveUsers", vec![Bson::Document(u.user_doc())]);
            }
            match op {
                Some(op) => {
                    d.insert("active", true);
                    d.insert("currentOpTime", now.as_str());
                    d.insert("threaded", true);
                    d.insert("opid", op.opid);
                    if let Ok(Some(bson::RawBsonRef::Document(lsid))) = op.command.get("lsid") {
                        if let Ok(lsid) = Document::try_from(lsid) {
                            d.insert("lsid", lsid);
                        }
                    }
                    let running = op.started.elapsed();
                    d.insert("secs_running", running.as_secs() as i64);
                    d.insert(
                        "microsecs_running",
                        i64::try_from(running.as_micros()).unwrap_or(i64::MAX),
                    );
                    d.insert("op", op.op);
                    d.insert("ns", op.ns.clone());
                    d.insert("redacted", false);
                    let command = Document::try_from(op.command.as_ref())
                        .unwrap_or_else(|_| doc! {"$truncated": "unreadable command"});
                    d.insert("command", command);
                    if let Some(plan) = op.plan_summary.get() {
                        d.insert("planSummary", &**plan);
                    }
                    d.insert("numYields", 0i32);
                    d.insert("locks", Document::new());
                    d.insert("waitingForLock", false);
                    d.insert("lockStats", Document::new());
                    d.insert("waitingForFlowControl", false);
                    d.insert("flowControlStats", Document::new());
                    d.insert("killPending", op.ctx.killed().is_some());
                    out.push(d);
                }
                None if idle_connections => {
                    d.insert("active", false);
                    d.insert("currentOpTime", now.as_str());
                    out.push(d);
                }
                None => {}
            }
        }
        out
    }
}

/// The collection a command works on: its first field's value when that is
/// a string (`getMore`: its `collection`).
pub fn collection_of<'a>(req: &CommandRequest<'a>) -> Option<&'a str> {
    if req.name == "getMore" {
        req.body.get_str("collection").ok()
    } else {
        match req.body.iter().next() {
            Some(Ok((_, bson::RawBsonRef::String(s)))) => Some(s),
            _ => None,
        }
    }
}

/// Commands up to this size are listed whole by `currentOp`; larger ones
/// (an insert carrying its documents in the body) are not copied per command.
const COMMAND_COPY_LIMIT: usize = 1024;

/// The command as `currentOp` lists it: whole, or past
/// [`COMMAND_COPY_LIMIT`] its first field and mongod's `$truncated` marker.
fn command_summary(req: &CommandRequest<'_>) -> RawDocumentBuf {
    if req.body.as_bytes().len() <= COMMAND_COPY_LIMIT {
        return req.body.to_owned();
    }
    let d = match collection_of(req) {
        Some(coll) => {
            doc! {req.name: coll, "$truncated": format!("{{ {}: \"{coll}\", ... }}", req.name)}
        }
        None => doc! {req.name: 1, "$truncated": format!("{{ {}: ... }}", req.name)},
    };
    RawDocumentBuf::try_from(&d).unwrap_or_default()
}

/// The namespace a command works on: `db.coll` when it names a collection,
/// else `db.$cmd`.
fn namespace(req: &CommandRequest<'_>) -> String {
    match collection_of(req) {
        Some(c) => format!("{}.{c}", req.db),
        None => format!("{}.$cmd", req.db),
    }
}

/// Whether the peer of socket `fd` closed its end: a hang-up, or a read
/// that would return end-of-file. Never blocks and never consumes data.
fn peer_hung_up(fd: i32) -> bool {
    let mut pfd = libc::pollfd {
        fd,
        events: libc::POLLIN | libc::POLLRDHUP,
        revents: 0,
    };
    // SAFETY: one valid pollfd, timeout 0 (no wait).
    let n = unsafe { libc::poll(&mut pfd, 1, 0) };
    if n <= 0 {
        return false;
    }
    if pfd.revents & (libc::POLLRDHUP | libc::POLLHUP | libc::POLLERR) != 0 {
        return true;
    }
    if pfd.revents & libc::POLLIN != 0 {
        let mut byte = 0u8;
        // SAFETY: reads at most one byte into `byte`, peeking (nothing is consumed).
        let r = unsafe {
            libc::recv(
                fd,
                (&mut byte as *mut u8).cast(),
                1,
                libc::MSG_PEEK | libc::MSG_DONTWAIT,
            )
        };
        return r == 0;
    }
    false
}

/// How often the watcher looks for clients that hung up, and how long a
/// command runs before it is watched.
pub const DISCONNECT_WATCH: Duration = Duration::from_millis(100);

/// The task that kills the operations of clients that hung up.
pub fn spawn_disconnect_watcher(state: Arc<ServerState>) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(DISCONNECT_WATCH);
        loop {
            tokio::select! {
                _ = tick.tick() => state.ops.kill_disconnected(DISCONNECT_WATCH),
                _ = state.shutdown.notified() => break,
            }
            if state.is_shutting_down() {
                break;
            }
        }
    })
}

/// The `host` field of `currentOp`: `hostname:port`.
pub fn host(state: &ServerState) -> String {
    let port = state.bound_port.get().copied().unwrap_or(state.config.port);
    format!("{}:{port}", crate::state::hostname())
}

/// Reads a `Bson` as mongod's `killOp` reads `op`: a number that is an
/// integer.
pub fn opid_of(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.is_finite() => Some(*d as i64),
        _ => None,
    }
}
