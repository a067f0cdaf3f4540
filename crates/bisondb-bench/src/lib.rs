//! `bisondb bench`: replays the seed insert benchmarks (single vs pooled inserts,
//! TCP vs Unix socket, 5000-document batches from several processes, and the
//! time-series analysis) against any MongoDB-compatible URI through the official
//! driver, and reports throughput, latency percentiles and bytes on disk per document.
//!
//! It depends on no server crate: what it measures is what any client sees.

pub mod args;
pub mod cpu;
pub mod plot;
pub mod pymongo;
pub mod replset;
pub mod report;
pub mod wirelimit;
pub mod workload;

use std::io::IsTerminal;
use std::process::ExitCode;

use indicatif::{ProgressBar, ProgressStyle};

pub use args::{BenchArgs, Plan, Workload};
pub use report::{Comparison, Latency, Report, RunResult};
use wirelimit::WireLimit;
use workload::Target;

/// Target names that select the built-in responder instead of a URI.
pub const WIRE_LIMIT: &str = "wire-limit";
pub const WIRE_LIMIT_SOCKET: &str = "wire-limit-socket";
/// The same responder in a child process: what a server that does no work at all
/// reaches across the process boundary a real server has.
pub const WIRE_LIMIT_PROCESS: &str = "wire-limit-process";
pub const WIRE_LIMIT_PROCESS_SOCKET: &str = "wire-limit-process-socket";

/// Entry point of the `bench` subcommand: validates, runs, prints; exit code 2 for bad
/// arguments, 1 for a failed run.
pub fn run(args: BenchArgs) -> ExitCode {
    let plan = match args.plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bisondb bench: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bisondb bench: cannot start the async runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(port) = plan.serve_wire_limit {
        return rt.block_on(serve_wire_limit(port));
    }
    let show_progress = !plan.json && !plan.worker && std::io::stdout().is_terminal();
    match rt.block_on(run_plan(&plan, show_progress)) {
        Ok(report) => match emit(&plan, &report) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("bisondb bench: {e}");
                ExitCode::FAILURE
            }
        },
        Err(e) => {
            eprintln!("bisondb bench: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Prints the report (worker line, JSON or table) and writes the plot.
fn emit(plan: &Plan, report: &Report) -> Result<(), String> {
    if plan.worker {
        for r in &report.results {
            let line = serde_json::to_string(r).map_err(|e| e.to_string())?;
            println!("result {line}");
        }
        return Ok(());
    }
    if let Some(path) = &plan.plot {
        write_plot(path, report)?;
    }
    if plan.json {
        println!("{}", report.to_json());
    } else {
        print!("{}", report.table());
        if let Some(path) = &plan.plot {
            println!("plot: {}", path.display());
        }
    }
    Ok(())
}

/// `--serve-wire-limit PORT`: the responder alone, until Ctrl-C (SIGINT).
async fn serve_wire_limit(port: u16) -> ExitCode {
    match WireLimit::start_on(port).await {
        Ok(w) => {
            println!("wire-limit listening: {} and {}", w.tcp_uri, w.socket_uri);
            // For a parent that started this process (`wire-limit-process`): it
            // removes the socket file after killing this process.
            println!("wire-limit socket file: {}", w.socket_path().display());
            let _ = tokio::signal::ctrl_c().await;
            println!("wire-limit answered {} commands", w.requests());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("bisondb bench: cannot start the wire-limit responder: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Writes `--plot`'s SVG.
pub fn write_plot(path: &std::path::Path, report: &Report) -> Result<(), String> {
    std::fs::write(path, plot::svg(&report.results))
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The responders a run started, kept alive until it ends.
#[derive(Default)]
struct Responders {
    in_process: Option<WireLimit>,
    child: Option<ChildResponder>,
}

/// Resolves a target name, starting the built-in responder on first use.
async fn resolve(name: &str, r: &mut Responders) -> Result<Target, String> {
    let mut server_pid = None;
    let (tcp, socket) = match name {
        WIRE_LIMIT | WIRE_LIMIT_SOCKET => {
            if r.in_process.is_none() {
                r.in_process = Some(
                    WireLimit::start()
                        .await
                        .map_err(|e| format!("cannot start the wire-limit responder: {e}"))?,
                );
            }
            let w = r
                .in_process
                .as_ref()
                .ok_or_else(|| "wire-limit responder missing".to_string())?;
            (w.tcp_uri.clone(), w.socket_uri.clone())
        }
        WIRE_LIMIT_PROCESS | WIRE_LIMIT_PROCESS_SOCKET => {
            if r.child.is_none() {
                r.child = Some(ChildResponder::start().await?);
            }
            let c = r
                .child
                .as_ref()
                .ok_or_else(|| "wire-limit responder process missing".to_string())?;
            server_pid = c.pid;
            (c.tcp_uri.clone(), c.socket_uri.clone())
        }
        _ => {
            return Ok(Target {
                label: workload::redact_uri(name),
                uri: name.to_string(),
                server_pid: None,
            })
        }
    };
    Ok(Target {
        label: name.to_string(),
        uri: if name.ends_with("-socket") {
            socket
        } else {
            tcp
        },
        server_pid,
    })
}

/// The wire-limit responder in a child process (this executable with
/// `bench profile-single --serve-wire-limit 0`), killed when dropped.
struct ChildResponder {
    tcp_uri: String,
    socket_uri: String,
    socket_file: Option<std::path::PathBuf>,
    pid: Option<u32>,
    _child: tokio::process::Child,
}

impl ChildResponder {
    async fn start() -> Result<Self, String> {
        use tokio::io::{AsyncBufReadExt, BufReader};
        let exe = workload::worker_exe()?;
        let mut child = tokio::process::Command::new(&exe)
            .args(["bench", "profile-single", "--serve-wire-limit", "0"])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {} as a responder: {e}", exe.display()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "the responder process has no stdout".to_string())?;
        let mut lines = BufReader::new(stdout).lines();
        let mut uris = None;
        let mut socket_file = None;
        while uris.is_none() || socket_file.is_none() {
            let line = tokio::time::timeout(std::time::Duration::from_secs(10), lines.next_line())
                .await
                .map_err(|_| "the responder process did not start within 10 s".to_string())?
                .map_err(|e| format!("reading the responder process: {e}"))?
                .ok_or_else(|| "the responder process exited before listening".to_string())?;
            if let Some(rest) = line.strip_prefix("wire-limit listening: ") {
                uris = rest
                    .split_once(" and ")
                    .map(|(t, s)| (t.to_string(), s.to_string()));
            } else if let Some(path) = line.strip_prefix("wire-limit socket file: ") {
                socket_file = Some(std::path::PathBuf::from(path));
            }
        }
        let (tcp_uri, socket_uri) =
            uris.ok_or_else(|| "the responder process printed no address".to_string())?;
        Ok(ChildResponder {
            tcp_uri,
            socket_uri,
            socket_file,
            pid: child.id(),
            _child: child,
        })
    }
}

impl Drop for ChildResponder {
    fn drop(&mut self) {
        // The child is killed (kill_on_drop) without running its own cleanup.
        if let Some(p) = &self.socket_file {
            let _ = std::fs::remove_file(p);
        }
    }
}

fn progress_bar(show: bool) -> ProgressBar {
    if !show {
        return ProgressBar::hidden();
    }
    let bar = ProgressBar::new(0);
    if let Ok(style) = ProgressStyle::with_template(
        "{prefix:24} [{elapsed_precise}] {wide_bar} {human_pos}/{human_len} {msg} eta {eta}",
    ) {
        bar.set_style(style);
    }
    bar
}

/// Runs every run the plan asks for (A, or A B A B ... with `--compare`) and gathers
/// the results. Public so tests can drive it without a process.
pub async fn run_plan(plan: &Plan, show_progress: bool) -> Result<Report, String> {
    let mut responders = Responders::default();
    let mut a = resolve(&plan.uri, &mut responders).await?;
    a.server_pid = plan.server_pid.or(a.server_pid);
    let b = match &plan.compare {
        Some(c) => {
            let mut b = resolve(c, &mut responders).await?;
            b.server_pid = plan.compare_server_pid.or(b.server_pid);
            Some(b)
        }
        None => None,
    };
    let single = plan.with_single.then(|| plan.single_plan());
    let mut results = Vec::new();
    for _ in 0..plan.runs {
        for p in single.iter().chain(std::iter::once(plan)) {
            for t in std::iter::once(&a).chain(b.as_ref()) {
                let bar = progress_bar(show_progress);
                results.push(workload::run_once(p, t, &bar).await?);
            }
        }
    }
    let own: Vec<RunResult> = results
        .iter()
        .filter(|r| r.workload == plan.workload.name())
        .cloned()
        .collect();
    let comparison = b
        .as_ref()
        .map(|b| report::compare(&a.label, &b.label, &own));
    let pool_vs_single = match single {
        Some(_) => std::iter::once(&a)
            .chain(b.as_ref())
            .map(|t| report::pool_vs_single(&t.label, &results))
            .collect(),
        None => Vec::new(),
    };
    Ok(Report {
        results,
        comparison,
        pool_vs_single,
    })
}

#[cfg(test)]
mod tests;
