//! The `bisondb` binary: `bisondb [serve] [mongod-style flags]` starts the server;
//! `bisondb bench WORKLOAD` runs the load generator; `bisondb dump` and
//! `bisondb restore` back up and restore in mongodump's layout.
//! Argument wiring only; the meaning of every setting lives in `bisondb-server`.

use std::path::PathBuf;
use std::process::ExitCode;

use bisondb_server::config::{parse_octal, split_ips};
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
    /// Storage engine: lsm (persistent; wiredTiger is an alias) or inMemory [default: lsm].
    #[arg(long = "storageEngine")]
    storage_engine: Option<String>,
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
    /// A mongod-style YAML configuration file; flags override it.
    #[arg(long, short = 'f')]
    config: Option<PathBuf>,
    /// Log less.
    #[arg(long)]
    quiet: bool,
    /// Write the log to this file instead of standard output.
    #[arg(long)]
    logpath: Option<PathBuf>,
    /// Profiling level of every database: 0 off, 1 slow operations, 2 all [default: 0].
    #[arg(long)]
    profile: Option<i32>,
    /// Operations at least this slow (ms) are profiled at level 1 [default: 100].
    #[arg(long, allow_negative_numbers = true)]
    slowms: Option<i32>,
    /// Fraction of slow operations profiled, 0 to 1 [default: 1.0].
    #[arg(long = "slowOpSampleRate")]
    slow_op_sample_rate: Option<f64>,
    /// Set a server parameter at startup, as mongod: `enableTestCommands=1`
    /// (configureFailPoint), `ttlMonitorSleepSecs=N`. Repeatable.
    #[arg(long = "setParameter", value_name = "NAME=VALUE")]
    set_parameter: Vec<String>,
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
    if let Some(m) = a.max_conns {
        c.max_conns = m;
    }
    if a.quiet {
        c.quiet = true;
    }
    if let Some(l) = &a.logpath {
        c.logpath = Some(l.clone());
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
    for p in &a.set_parameter {
        c.apply_set_parameter_arg(p).map_err(|e| e.message)?;
    }
    c.validate().map_err(|e| e.message)?;
    Ok(c)
}

fn init_logging(c: &ServerConfig) -> Result<(), String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    use tracing_subscriber::EnvFilter;
    let default = if c.quiet { "warn" } else { "info" };
    let filter = EnvFilter::try_from_env("BISONDB_LOG").unwrap_or_else(|_| EnvFilter::new(default));
    let registry = tracing_subscriber::registry()
        .with(filter)
        .with(bisondb_server::logbuf::LogBufferLayer);
    match &c.logpath {
        Some(path) => {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .append(true)
                .open(path)
                .map_err(|e| format!("cannot open log file {}: {e}", path.display()))?;
            registry
                .with(
                    tracing_subscriber::fmt::layer()
                        .with_ansi(false)
                        .with_writer(std::sync::Mutex::new(file)),
                )
                .init();
        }
        None => {
            use std::io::IsTerminal;
            let ansi = std::io::stdout().is_terminal();
            registry
                .with(tracing_subscriber::fmt::layer().with_ansi(ansi))
                .init()
        }
    }
    Ok(())
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
    if let Err(e) = init_logging(&config) {
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
    rt.block_on(async move {
        let server = match Server::start(config).await {
            Ok(s) => s,
            Err(e) => {
                tracing::error!("{}", e.message);
                eprintln!("bisondb: {}", e.message);
                return ExitCode::from(48);
            }
        };
        let state = server.state.clone();
        tokio::spawn(async move {
            wait_for_signal().await;
            tracing::info!("signal received, shutting down");
            state.request_shutdown();
        });
        server.wait().await;
        ExitCode::SUCCESS
    })
}

async fn wait_for_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        // Without signal handlers the server still stops through the shutdown command.
        std::future::pending::<()>().await;
        return;
    };
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
