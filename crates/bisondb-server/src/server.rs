//! Start-up and shutdown: open storage, bind TCP and Unix-socket listeners, accept
//! connections (bounded by `maxConns`), reap idle cursors, and clean up on exit.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Engine, OpenOptions, RemoteOptions, Storage};
use tokio::net::{TcpListener, UnixListener};
use tokio::sync::Semaphore;
use tokio::task::JoinHandle;
use tokio_util::task::TaskTracker;

use crate::config::ServerConfig;
use crate::connection;
use crate::cursor::IDLE_TIMEOUT;
use crate::state::ServerState;

pub struct Server;

/// A server that is accepting connections.
pub struct RunningServer {
    pub state: Arc<ServerState>,
    /// The TCP addresses bound (port 0 in the config resolves to a real port here).
    pub tcp_addrs: Vec<SocketAddr>,
    pub socket_path: Option<PathBuf>,
    tasks: Vec<JoinHandle<()>>,
    /// Every connection task, so shutdown can wait until none holds the state
    /// (and with it the storage engine and its dbpath lock).
    connections: TaskTracker,
}

/// Opens the engine the configuration names, off the async threads: opening
/// can take a while (recovering a journal) or block (connecting).
async fn open_engine(config: &ServerConfig) -> MongoResult<Arc<dyn Engine>> {
    let Some(entry) = config.storage_engine_entry() else {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("unknown storage engine '{}'", config.storage_engine),
        ));
    };
    let options = OpenOptions {
        dbpath: config.dbpath.clone(),
        journal_commit_interval_ms: config.journal_commit_interval_ms,
        remote: config.postgres.uri.clone().map(|uri| RemoteOptions {
            uri,
            pool_size: config.postgres.pool_size,
            tls_mode: config.postgres.tls_mode.clone(),
            tls_ca_file: config.postgres.tls_ca_file.clone(),
            tls_certificate_key_file: config.postgres.tls_certificate_key_file.clone(),
        }),
    };
    let opened = tokio::task::spawn_blocking(move || (entry.open)(&options))
        .await
        .map_err(|e| {
            MongoError::internal(format!("opening the {} storage engine: {e}", entry.name))
        })?;
    opened.map_err(|e| {
        if entry.capabilities.persistent {
            MongoError::new(
                e.code(),
                format!(
                    "cannot start the {} storage engine in {}: {e}",
                    entry.name,
                    config.dbpath.display()
                ),
            )
        } else {
            MongoError::from(e)
        }
    })
}

impl Server {
    /// Opens storage and binds every listener; returns once connections can be accepted.
    pub async fn start(config: ServerConfig) -> MongoResult<RunningServer> {
        config.validate()?;
        // Key file and certificates first: a bad one stops start-up before
        // the dbpath is opened.
        let security = crate::tls::Security::load(&config)?;
        let tls = security.tls.clone();
        tracing::info!(target: "CONTROL", id = crate::log::ids::STARTING, ctx = "initandlisten",
            pid = std::process::id(), port = config.port, dbPath = %config.dbpath.display(),
            architecture = "64-bit", host = %crate::state::hostname(), "MongoDB starting");
        tracing::info!(target: "CONTROL", id = crate::log::ids::BUILD_INFO, ctx = "initandlisten",
            buildInfo = ?crate::log::Json(serde_json::json!({
                "version": crate::commands::build_info::COMPAT_VERSION,
                "bisondb": {"version": env!("CARGO_PKG_VERSION")},
                "modules": [],
                "environment": {"target_arch": std::env::consts::ARCH, "target_os": std::env::consts::OS},
            })),
            "Build Info");
        tracing::info!(target: "CONTROL", id = crate::log::ids::OPTIONS, ctx = "initandlisten",
            options = ?crate::log::Json::doc(&crate::commands::get_cmd_line_opts::parsed_options(&config, config.port)),
            "Options set by command line");
        if config.resolved_storage_engine() != config.storage_engine {
            tracing::info!(
                "storage engine '{}' is an alias of '{}'; using '{}'",
                config.storage_engine,
                config.resolved_storage_engine(),
                config.resolved_storage_engine()
            );
        }
        let engine = open_engine(&config).await?;
        // Reading the catalog is a round of engine calls, which may block.
        let storage = tokio::task::spawn_blocking(move || Storage::open(engine))
            .await
            .map_err(|e| MongoError::internal(format!("opening the catalog: {e}")))?
            .map_err(MongoError::from)?;
        // Spill files of blocking aggregation stages a previous run left
        // behind (it crashed mid-query): nothing reads them any more.
        bisondb_query::agg::spill::clear_spill_dir(&crate::state::spill_dir(&config.dbpath));

        let mut listeners = Vec::new();
        for ip in &config.bind_ip {
            let addr = format!("{}:{}", bracket_ipv6(ip), config.port);
            let l = TcpListener::bind(&addr)
                .await
                .map_err(|e| io_error(format!("cannot listen on {addr}: {e}")))?;
            listeners.push(l);
        }
        let tcp_addrs: Vec<SocketAddr> = listeners
            .iter()
            .filter_map(|l| l.local_addr().ok())
            .collect();
        // With --port 0 every listener must share the first one's resolved port.
        let port = tcp_addrs.first().map(|a| a.port()).unwrap_or(config.port);

        let unix = if config.unix_socket {
            let path = config.socket_path(port);
            Some((bind_unix(&path, config.file_permissions)?, path))
        } else {
            None
        };

        let state = ServerState::new(config, storage);
        let _ = state.bound_port.set(port);
        crate::repl::recover(&state)?;
        let _ = state.security.set(security);
        let conns = Arc::new(Semaphore::new(
            state.config.max_conns.min(Semaphore::MAX_PERMITS),
        ));
        let tracker = TaskTracker::new();
        let mut tasks = Vec::new();
        for l in listeners {
            let (state, conns, tracker) = (state.clone(), conns.clone(), tracker.clone());
            let tls = tls.clone();
            tasks.push(tokio::spawn(async move {
                loop {
                    let accepted = tokio::select! {
                        a = l.accept() => a,
                        _ = state.shutdown.notified() => break,
                    };
                    match accepted {
                        Ok((stream, peer)) => {
                            let _ = stream.set_nodelay(true);
                            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                            match &tls {
                                None => spawn_connection(
                                    move |s, p| connection::serve(stream, s, p, Some(fd), None),
                                    peer.to_string(),
                                    &state,
                                    &conns,
                                    &tracker,
                                ),
                                Some(tls) => {
                                    let tls = tls.clone();
                                    spawn_connection(
                                        move |s, p| serve_tls_listener(stream, s, p, fd, tls),
                                        peer.to_string(),
                                        &state,
                                        &conns,
                                        &tracker,
                                    )
                                }
                            }
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                    if state.is_shutting_down() {
                        break;
                    }
                }
            }));
        }
        let socket_path = unix.as_ref().map(|(_, p)| p.clone());
        if let Some((l, path)) = unix {
            let (state, conns, tracker) = (state.clone(), conns.clone(), tracker.clone());
            tasks.push(tokio::spawn(async move {
                let peer = format!("unix:{}", path.display());
                loop {
                    let accepted = tokio::select! {
                        a = l.accept() => a,
                        _ = state.shutdown.notified() => break,
                    };
                    match accepted {
                        Ok((stream, _)) => {
                            widen_send_buffer(&stream);
                            let fd = std::os::fd::AsRawFd::as_raw_fd(&stream);
                            spawn_connection(
                                move |s, p| connection::serve(stream, s, p, Some(fd), None),
                                peer.clone(),
                                &state,
                                &conns,
                                &tracker,
                            )
                        }
                        Err(e) => {
                            tracing::warn!(error = %e, "accept failed");
                            tokio::time::sleep(Duration::from_millis(10)).await;
                        }
                    }
                    if state.is_shutting_down() {
                        break;
                    }
                }
            }));
        }
        {
            let state = state.clone();
            tasks.push(tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(60));
                loop {
                    tokio::select! {
                        _ = tick.tick() => {
                            let n = state.cursors.reap(IDLE_TIMEOUT);
                            crate::metrics::add(&state.metrics.cursors_timed_out, n as u64);
                            if n > 0 {
                                tracing::info!(cursors = n, "reaped idle cursors");
                            }
                        }
                        _ = state.shutdown.notified() => break,
                    }
                    if state.is_shutting_down() {
                        break;
                    }
                }
            }));
        }
        if let Some(addr) = state.config.metrics_addr.clone() {
            let (bound, task) = crate::metrics::prometheus::spawn(state.clone(), &addr).await?;
            let _ = state.metrics_addr.set(bound);
            tasks.push(task);
        }
        tasks.push(crate::ttl::spawn(state.clone()));
        tasks.push(crate::sessions::spawn(state.clone()));
        tasks.push(crate::op_ctx::spawn_disconnect_watcher(state.clone()));
        tasks.push(crate::txn::transaction::spawn_reaper(state.clone()));
        tasks.push(crate::repl::pre_images::spawn(state.clone()));
        if let Some(p) = &socket_path {
            tracing::info!(target: "NETWORK", id = crate::log::ids::UNIX_SOCKET, ctx = "listener",
                path = %p.display(), "Listening on a Unix socket");
        }
        for a in &tcp_addrs {
            tracing::info!(target: "NETWORK", id = crate::log::ids::WAITING_FOR_CONNECTIONS,
                ctx = "listener", port = a.port(), address = %a,
                ssl = if tls.is_some() { "on" } else { "off" }, "Waiting for connections");
        }
        Ok(RunningServer {
            state,
            tcp_addrs,
            socket_path,
            tasks,
            connections: tracker,
        })
    }
}

impl RunningServer {
    /// The TCP port actually bound.
    pub fn port(&self) -> u16 {
        self.tcp_addrs
            .first()
            .map(|a| a.port())
            .unwrap_or(self.state.config.port)
    }

    /// Asks the server to stop (as the `shutdown` command or a signal does).
    pub fn shutdown(&self) {
        self.state.request_shutdown();
    }

    /// Waits until shutdown is requested, then stops listeners, syncs storage and
    /// removes the socket file.
    pub async fn wait(self) {
        while !self.state.is_shutting_down() {
            let notified = self.state.shutdown.notified();
            if self.state.is_shutting_down() {
                break;
            }
            notified.await;
        }
        for t in &self.tasks {
            t.abort();
        }
        for t in self.tasks {
            let _ = t.await;
        }
        // Connections notice the shutdown at their next read; give them a moment.
        self.connections.close();
        if tokio::time::timeout(Duration::from_secs(10), self.connections.wait())
            .await
            .is_err()
        {
            tracing::warn!("some connections did not close within 10 s of shutdown");
        }
        if let Err(e) = self.state.storage.sync() {
            tracing::error!(error = %e, "final sync failed");
        }
        if let Some(p) = &self.socket_path {
            let _ = std::fs::remove_file(p);
        }
        tracing::info!(target: "CONTROL", id = crate::log::ids::SHUTDOWN_COMPLETE, "Shutdown complete");
    }
}

/// Runs `serve` (the connection loop, after a TLS handshake when the
/// listener has TLS) as a counted connection task.
fn spawn_connection<F, Fut>(
    serve: F,
    peer: String,
    state: &Arc<ServerState>,
    conns: &Arc<Semaphore>,
    tracker: &TaskTracker,
) where
    F: FnOnce(Arc<ServerState>, String) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let Ok(permit) = conns.clone().try_acquire_owned() else {
        tracing::warn!(peer = %peer, max = state.config.max_conns, "connection refused because too many open connections");
        return;
    };
    let state = state.clone();
    let served = serve(state.clone(), peer);
    tracker.spawn(async move {
        use std::sync::atomic::Ordering;
        // Past the rate limiter's queue the connection closes unserved.
        if !state.ingress.admit().await {
            tracing::info!(target: "NETWORK", "connection refused by the ingress connection establishment rate limiter");
            return;
        }
        state.connections_current.fetch_add(1, Ordering::Relaxed);
        state.connections_total.fetch_add(1, Ordering::Relaxed);
        served.await;
        state.connections_current.fetch_sub(1, Ordering::Relaxed);
        drop(permit);
    });
}

/// Serves a connection of a listener with TLS: plaintext or decrypted, as
/// `tls::accept` finds it.
async fn serve_tls_listener(
    stream: tokio::net::TcpStream,
    state: Arc<ServerState>,
    peer: String,
    fd: i32,
    tls: Arc<crate::tls::TlsServer>,
) {
    match crate::tls::accept(stream, &state, &peer, &tls).await {
        Some(crate::tls::Accepted::Plain(s)) => {
            connection::serve(s, state, peer, Some(fd), None).await
        }
        Some(crate::tls::Accepted::Tls(s, info)) => {
            connection::serve(s, state, peer, Some(fd), Some(info)).await
        }
        None => {}
    }
}

/// The send buffer asked for on each Unix-socket connection: what loopback TCP
/// grows to by itself (`net.ipv4.tcp_wmem`'s usual maximum).
const UNIX_SEND_BUFFER: usize = 4 << 20;

/// Widens a Unix-socket connection's send buffer. A Unix stream socket keeps
/// `net.core.wmem_default` (208 KiB) unless asked, and a reply larger than
/// that is written a send buffer at a time, each piece waiting for the client
/// to wake and read the one before: a 16 MiB batch of large documents took 80
/// writes and 80 wake-ups of each side, where loopback TCP, whose buffer
/// grows on its own, takes four. Linux caps the request at
/// `net.core.wmem_max`; the buffer is a limit, not an allocation, so an idle
/// connection holds no more memory.
fn widen_send_buffer(stream: &tokio::net::UnixStream) {
    if let Err(e) = socket2::SockRef::from(stream).set_send_buffer_size(UNIX_SEND_BUFFER) {
        tracing::debug!(error = %e, "cannot widen a Unix socket's send buffer");
    }
}

/// Binds the Unix socket, replacing a stale file left by a killed server but never
/// stealing the socket of a live one.
fn bind_unix(path: &std::path::Path, mode: u32) -> MongoResult<UnixListener> {
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            return Err(io_error(format!(
                "another server is already listening on {}; stop it or choose another --port / --unixSocketPrefix",
                path.display()
            )));
        }
        std::fs::remove_file(path).map_err(|e| {
            io_error(format!(
                "cannot remove stale socket file {}: {e}",
                path.display()
            ))
        })?;
    }
    let l = UnixListener::bind(path)
        .map_err(|e| io_error(format!("cannot listen on {}: {e}", path.display())))?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode))
        .map_err(|e| io_error(format!("cannot set permissions on {}: {e}", path.display())))?;
    Ok(l)
}

fn bracket_ipv6(ip: &str) -> String {
    if ip.contains(':') && !ip.starts_with('[') {
        format!("[{ip}]")
    } else {
        ip.to_string()
    }
}

fn io_error(msg: String) -> MongoError {
    MongoError::new(ErrorCode::Other(98), msg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn unix_connections_get_a_wide_send_buffer() {
        let (server_side, _client) = tokio::net::UnixStream::pair().unwrap();
        let before = socket2::SockRef::from(&server_side)
            .send_buffer_size()
            .unwrap();
        widen_send_buffer(&server_side);
        let after = socket2::SockRef::from(&server_side)
            .send_buffer_size()
            .unwrap();
        // Linux grants up to net.core.wmem_max (and reports twice the grant).
        let cap = std::fs::read_to_string("/proc/sys/net/core/wmem_max")
            .ok()
            .and_then(|s| s.trim().parse::<usize>().ok())
            .unwrap_or(UNIX_SEND_BUFFER);
        assert!(
            after >= UNIX_SEND_BUFFER.min(cap),
            "send buffer {before} -> {after}, wmem_max {cap}"
        );
    }
}
