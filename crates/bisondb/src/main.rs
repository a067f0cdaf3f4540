//! The `bisondb` binary: `bisondb [serve] [mongod-style flags]` starts the server;
//! `bisondb bench WORKLOAD` runs the load generator; `bisondb dump` and
//! `bisondb restore` back up and restore in mongodump's layout.
//! Argument wiring only; the meaning of every setting lives in `bisondb-server`.

use std::path::PathBuf;
use std::process::ExitCode;

use bisondb_server::config::{parse_log_rotate, parse_octal, split_ips};
use bisondb_server::log::ids;
use bisondb_server::{Server, ServerConfig};
use clap::{Args, Parser, Subcommand};

/// mimalloc instead of glibc's allocator: the insert path allocates and frees
/// many small buffers per batch (keys, values, index entries), and in a profile
/// of 5000-document inserts with one index glibc's malloc, free and
/// `malloc_consolidate` took about 30% of the inserting thread; with mimalloc the
/// same storage-level load ran 1.6x faster (docs/PERFORMANCE.md).
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[derive(Parser)]
#[command(
    name = "bisondb",
    version,
    about = "BisonDB: a MongoDB-compatible document database server"
)]
struct Cli {
    #[command(subcommand)]
    command: Option<Cmd>,
    #[command(flatten)]
    serve: ServeArgs,
}

#[derive(Subcommand)]
enum Cmd {
    /// Run the server (the default).
    Serve(ServeArgs),
    /// Replay the seed insert benchmarks against any MongoDB-compatible URI.
    Bench(bisondb_bench::BenchArgs),
    /// Dump databases to a directory in mongodump's layout.
    Dump(bisondb_tools::DumpArgs),
    /// Restore a directory mongodump or `bisondb dump` wrote.
    Restore(bisondb_tools::RestoreArgs),
}

#[derive(Args, Clone, Default)]
struct ServeArgs {
    /// TCP port to listen on [default: 27017].
    #[arg(long)]
    port: Option<u16>,
    /// Comma-separated addresses to bind [default: 127.0.0.1].
    #[arg(long = "bind_ip")]
    bind_ip: Option<String>,
    /// Bind to all IPv4 addresses.
    #[arg(long = "bind_ip_all")]
    bind_ip_all: bool,
    /// Directory for data files [default: ./data].
    #[arg(long)]
    dbpath: Option<PathBuf>,
    /// Storage engine: lsm (persistent; wiredTiger is an alias), inMemory, or
    /// postgres (a PostgreSQL-wire store, with --postgresUri) [default: lsm].
    #[arg(long = "storageEngine")]
    storage_engine: Option<String>,
    /// The postgres engine's store: postgresql://user@host:port/database?...
    #[arg(long = "postgresUri")]
    postgres_uri: Option<String>,
    /// Longest time in milliseconds between journal syncs, 1 to 500 [default: 100].
    #[arg(long = "journalCommitInterval")]
    journal_commit_interval: Option<u64>,
    /// Directory for the Unix domain socket [default: /tmp].
    #[arg(long = "unixSocketPrefix")]
    unix_socket_prefix: Option<PathBuf>,
    /// Do not listen on a Unix domain socket.
    #[arg(long)]
    nounixsocket: bool,
    /// Permissions of the Unix socket file, octal [default: 0700].
    #[arg(long = "filePermissions")]
    file_permissions: Option<String>,
    /// Maximum simultaneous connections.
    #[arg(long = "maxConns")]
    max_conns: Option<usize>,
    /// Serve Prometheus metrics at http://HOST:PORT/metrics (off by default).
    #[arg(long = "metricsAddr", value_name = "HOST:PORT")]
    metrics_addr: Option<String>,
    /// A mongod-style YAML configuration file; flags override it.
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Log less.
    #[arg(long)]
    quiet: bool,
    /// Write the log to this file instead of standard output.
    #[arg(long)]
    logpath: Option<PathBuf>,
    /// Append to the log file instead of renaming the old one at start-up.
    #[arg(long)]
    logappend: bool,
    /// What logRotate and SIGUSR1 do to the log file: rename or reopen [default: rename].
    #[arg(long = "logRotate")]
    log_rotate: Option<String>,
    /// More log lines: -v to -vvvvv (the global verbosity, 1 to 5).
    #[arg(short = 'v', long = "verbose", action = clap::ArgAction::Count)]
    verbose: u8,
    /// Write "###" in log lines instead of client data (command arguments, documents).
    #[arg(long = "redactClientLogData")]
    redact_client_log_data: bool,
    /// Profiling level of every database: 0 off, 1 slow operations, 2 all [default: 0].
    #[arg(long)]
    profile: Option<i32>,
    /// Operations at least this slow (ms) are profiled at level 1 [default: 100].
    #[arg(long, allow_negative_numbers = true)]
    slowms: Option<i32>,
    /// Fraction of slow operations profiled, 0 to 1 [default: 1.0].
    #[arg(long = "slowOpSampleRate")]
    slow_op_sample_rate: Option<f64>,
    /// Require authentication and enforce roles (SCRAM users of admin.system.users).
    #[arg(long)]
    auth: bool,
    /// Do not require authentication (the default; overrides the config file).
    #[arg(long, conflicts_with = "auth")]
    noauth: bool,
    /// Set a server parameter at startup, as mongod: `enableTestCommands=1`
    /// (configureFailPoint), `ttlMonitorSleepSecs=N`. Repeatable.
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    set_parameter: Vec<String>,
    /// Run as a member of this replica set (then `rs.initiate()` it).
    #[arg(long = "replSet", value_name = "NAME")]
    repl_set: Option<String>,
    /// Size of the oplog in megabytes [default: 5% of free disk, 990 MB to 50 GB].
    #[arg(long = "oplogSize", value_name = "MB")]
    oplog_size: Option<u64>,
    #[command(flatten)]
    security: Box<SecurityArgs>,
}

/// TLS and key-file flags, mongod's names (the `--ssl*` ones are mongod's
/// deprecated aliases, still accepted by mongod 8).
#[derive(Args, Clone, Default)]
struct SecurityArgs {
    /// TLS on the TCP listeners: disabled, allowTLS, preferTLS or requireTLS [default: disabled].
    #[arg(long = "tlsMode")]
    tls_mode: Option<String>,
    /// PEM file with the server's certificate chain and private key.
    #[arg(long = "tlsCertificateKeyFile")]
    tls_certificate_key_file: Option<String>,
    /// Password of an encrypted (PKCS#8) key in --tlsCertificateKeyFile.
    #[arg(long = "tlsCertificateKeyFilePassword")]
    tls_certificate_key_file_password: Option<String>,
    /// PEM file of the CAs client certificates must chain to; clients must then present one.
    #[arg(long = "tlsCAFile")]
    tls_ca_file: Option<String>,
    /// With --tlsCAFile, let clients connect without a certificate.
    #[arg(long = "tlsAllowConnectionsWithoutCertificates")]
    tls_allow_connections_without_certificates: bool,
    /// Accept invalid client certificates (logged; they give no X.509 identity).
    #[arg(long = "tlsAllowInvalidCertificates")]
    tls_allow_invalid_certificates: bool,
    /// Accepted as mongod; a standalone server checks no peer's hostname.
    #[arg(long = "tlsAllowInvalidHostnames")]
    tls_allow_invalid_hostnames: bool,
    /// Comma-separated TLS1_0, TLS1_1, TLS1_2, TLS1_3 to refuse (BisonDB offers TLS 1.2 and 1.3 only).
    #[arg(long = "tlsDisabledProtocols")]
    tls_disabled_protocols: Option<String>,
    #[arg(long = "sslMode", hide = true)]
    ssl_mode: Option<String>,
    #[arg(long = "sslPEMKeyFile", hide = true)]
    ssl_pem_key_file: Option<String>,
    #[arg(long = "sslPEMKeyPassword", hide = true)]
    ssl_pem_key_password: Option<String>,
    #[arg(long = "sslCAFile", hide = true)]
    ssl_ca_file: Option<String>,
    #[arg(long = "sslAllowConnectionsWithoutCertificates", hide = true)]
    ssl_allow_connections_without_certificates: bool,
    #[arg(long = "sslAllowInvalidCertificates", hide = true)]
    ssl_allow_invalid_certificates: bool,
    #[arg(long = "sslAllowInvalidHostnames", hide = true)]
    ssl_allow_invalid_hostnames: bool,
    #[arg(long = "sslDisabledProtocols", hide = true)]
    ssl_disabled_protocols: Option<String>,
    /// The replica-set key file (owner-only permissions; 6 to 1024 base64 characters).
    #[arg(long = "keyFile")]
    key_file: Option<PathBuf>,
    /// Cluster member authentication: keyFile, sendKeyFile, sendX509 or x509.
    #[arg(long = "clusterAuthMode")]
    cluster_auth_mode: Option<String>,
}

impl SecurityArgs {
    fn apply(&self, c: &mut ServerConfig) -> Result<(), String> {
        use bisondb_server::tls::settings::OptionValue::{Flag, Text};
        let texts = [
            ("mode", &self.tls_mode, false),
            ("certificateKeyFile", &self.tls_certificate_key_file, false),
            (
                "certificateKeyFilePassword",
                &self.tls_certificate_key_file_password,
                false,
            ),
            ("CAFile", &self.tls_ca_file, false),
            ("disabledProtocols", &self.tls_disabled_protocols, false),
            ("mode", &self.ssl_mode, true),
            ("PEMKeyFile", &self.ssl_pem_key_file, true),
            ("PEMKeyPassword", &self.ssl_pem_key_password, true),
            ("CAFile", &self.ssl_ca_file, true),
            ("disabledProtocols", &self.ssl_disabled_protocols, true),
        ];
        for (key, value, ssl) in texts {
            if let Some(v) = value {
                c.tls.apply_flag(key, Text(v), ssl).map_err(|e| e.message)?;
            }
        }
        let flags = [
            (
                "allowConnectionsWithoutCertificates",
                self.tls_allow_connections_without_certificates,
                false,
            ),
            (
                "allowInvalidCertificates",
                self.tls_allow_invalid_certificates,
                false,
            ),
            (
                "allowInvalidHostnames",
                self.tls_allow_invalid_hostnames,
                false,
            ),
            (
                "allowConnectionsWithoutCertificates",
                self.ssl_allow_connections_without_certificates,
                true,
            ),
            (
                "allowInvalidCertificates",
                self.ssl_allow_invalid_certificates,
                true,
            ),
            (
                "allowInvalidHostnames",
                self.ssl_allow_invalid_hostnames,
                true,
            ),
        ];
        for (key, on, ssl) in flags {
            if on {
                c.tls
                    .apply_flag(key, Flag(true), ssl)
                    .map_err(|e| e.message)?;
            }
        }
        if let Some(k) = &self.key_file {
            c.key_file = Some(k.clone());
        }
        if let Some(m) = &self.cluster_auth_mode {
            c.cluster_auth_mode =
                Some(bisondb_server::tls::ClusterAuthMode::parse(m).map_err(|e| e.message)?);
        }
        Ok(())
    }
}

fn build_config(a: &ServeArgs) -> Result<ServerConfig, String> {
    let mut c = ServerConfig {
        argv: std::env::args().collect(),
        ..Default::default()
    };
    if let Some(f) = &a.config {
        c.apply_yaml_file(f).map_err(|e| e.message)?;
    }
    if let Some(p) = a.port {
        c.port = p;
    }
    if let Some(ip) = &a.bind_ip {
        c.bind_ip = split_ips(ip);
    }
    if a.bind_ip_all {
        c.bind_ip = vec!["0.0.0.0".to_string()];
    }
    if let Some(d) = &a.dbpath {
        c.dbpath = d.clone();
    }
    if let Some(e) = &a.storage_engine {
        c.storage_engine = e.clone();
    }
    if let Some(uri) = &a.postgres_uri {
        c.postgres.uri = Some(uri.clone());
    }
    if let Some(ms) = a.journal_commit_interval {
        c.journal_commit_interval_ms = ms;
    }
    if let Some(p) = &a.unix_socket_prefix {
        c.unix_socket_prefix = p.clone();
    }
    if a.nounixsocket {
        c.unix_socket = false;
    }
    if let Some(m) = &a.file_permissions {
        c.file_permissions =
            parse_octal(m).ok_or_else(|| format!("--filePermissions {m} is not an octal mode"))?;
    }
    if let Some(m) = &a.metrics_addr {
        c.metrics_addr = Some(m.clone());
    }
    if let Some(m) = a.max_conns {
        c.max_conns = m;
    }
    if a.quiet {
        c.quiet = true;
    }
    if let Some(l) = &a.logpath {
        c.logpath = Some(l.clone());
        c.log_destination = bisondb_server::log::Destination::File;
    }
    if a.logappend {
        c.log_append = true;
    }
    if let Some(r) = &a.log_rotate {
        c.log_rotate = parse_log_rotate(r)
            .ok_or_else(|| format!("--logRotate must be rename or reopen, got {r}"))?;
    }
    if a.verbose > 0 {
        c.verbosity = i8::try_from(a.verbose.min(5)).unwrap_or(5);
    }
    if a.redact_client_log_data {
        c.redact_client_log_data = true;
    }
    if let Some(p) = a.profile {
        c.profile = p;
    }
    if let Some(ms) = a.slowms {
        c.slowms = ms;
    }
    if let Some(r) = a.slow_op_sample_rate {
        c.slow_op_sample_rate = r;
    }
    if let Some(name) = &a.repl_set {
        c.repl_set_name = Some(name.clone());
    }
    if let Some(mb) = a.oplog_size {
        c.oplog_size_mb = Some(mb);
    }
    if a.auth {
        c.auth = true;
    }
    if a.noauth {
        c.auth = false;
    }
    for p in &a.set_parameter {
        c.apply_set_parameter_arg(p).map_err(|e| e.message)?;
    }
    a.security.apply(&mut c)?;
    c.validate().map_err(|e| e.message)?;
    Ok(c)
}

/// Transparent huge pages off for this process, unless `MIMALLOC_ALLOW_THP`
/// asks for them. mimalloc marks its arenas for huge pages, and the storage
/// engine frees each flushed memtable and fills a new one, so requests kept
/// faulting in fresh 2 MiB pages and zeroing them whole (the kernel's
/// `clear_page` was 5% of the server's samples during a `timeseries-batch` load,
/// and 11.6% of the bench client's, which builds and frees a batch at a time);
/// with 4 KiB pages the server's request threads used about 10% less CPU per
/// document (docs/PERFORMANCE.md). mongod before 8.0 also asks for THP to be off.
#[cfg(target_os = "linux")]
fn disable_transparent_huge_pages() {
    if std::env::var_os("MIMALLOC_ALLOW_THP").is_some() {
        return;
    }
    // SAFETY: PR_SET_THP_DISABLE takes integers only and sets a flag on this
    // process; no memory is read or written through the arguments.
    let rc = unsafe { libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0) };
    if rc != 0 {
        // Only a speed matter, so start anyway; the logger is not up yet.
        eprintln!(
            "bisondb: could not turn transparent huge pages off for this process: {}",
            std::io::Error::last_os_error()
        );
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    #[cfg(target_os = "linux")]
    disable_transparent_huge_pages();
    let args = match cli.command {
        Some(Cmd::Serve(a)) => a,
        Some(Cmd::Bench(b)) => return bisondb_bench::run(b),
        Some(Cmd::Dump(d)) => return bisondb_tools::run_dump(d),
        Some(Cmd::Restore(r)) => return bisondb_tools::run_restore(r),
        None => cli.serve,
    };
    let config = match build_config(&args) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("bisondb: {e}");
            return ExitCode::from(2);
        }
    };
    // Before the first file (the log, the dbpath, fjall's files) is created.
    #[cfg(unix)]
    if let Some(mask) = config.process_umask_to_set() {
        // SAFETY: umask only replaces this process's file-creation mask.
        unsafe { libc::umask(mask as libc::mode_t) };
    }
    if let Err(e) = bisondb_server::log::install(&config) {
        eprintln!("bisondb: {e}");
        return ExitCode::from(2);
    }
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bisondb: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let code = rt.block_on(async move {
        let server = match Server::start(config).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!(target: "CONTROL", ctx = "initandlisten", error = %e.message, "Could not start");
                eprintln!("bisondb: {}", e.message);
                return 48;
            }
        };
        let state = server.state.clone();
        tokio::spawn(async move {
            let (signal, error) = wait_for_signal().await;
            tracing::info!(target: "CONTROL", id = ids::RECEIVED_SIGNAL, ctx = "SignalHandler",
                signal, error, "Received signal");
            state.request_shutdown();
        });
        tokio::spawn(rotate_on_sigusr1());
        server.wait().await;
        0
    });
    tracing::info!(target: "CONTROL", id = ids::NOW_EXITING, ctx = "initandlisten", "Now exiting");
    tracing::info!(target: "CONTROL", id = ids::SHUTTING_DOWN, ctx = "initandlisten",
        exitCode = code, "Shutting down");
    ExitCode::from(code)
}

/// Waits for SIGTERM or SIGINT; returns its number and name, as mongod logs them.
async fn wait_for_signal() -> (i32, &'static str) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the server still stops through the shutdown command.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = term.recv() => (libc::SIGTERM, "Terminated"),
        _ = int.recv() => (libc::SIGINT, "Interrupt"),
    }
}

/// SIGUSR1 rotates the log, as `logRotate` does (mongod's signal for it).
async fn rotate_on_sigusr1() {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut usr1) = signal(SignalKind::user_defined1()) else {
        return;
    };
    while usr1.recv().await.is_some() {
        if let Err(e) = bisondb_server::log::rotate() {
            tracing::warn!(target: "CONTROL", id = ids::LOG_ROTATION, ctx = "SignalHandler", error = %e, "Log rotation failed");
        }
    }
}
