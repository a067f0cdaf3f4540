//! `bisondb bench`: replays the seed insert benchmarks (single vs pooled inserts,
//! TCP vs Unix socket, 5000-document batches from several processes, and the
//! time-series analysis) against any MongoDB-compatible URI through the official
//! driver, and reports throughput, latency percentiles and bytes on disk per document.
//!
//! It depends on no server crate: what it measures is what any client sees.

pub mod args;
pub mod plot;
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

/// Resolves a target name, starting the built-in responder on first use.
async fn resolve(name: &str, wl: &mut Option<WireLimit>) -> Result<Target, String> {
    if name != WIRE_LIMIT && name != WIRE_LIMIT_SOCKET {
        return Ok(Target {
            label: name.to_string(),
            uri: name.to_string(),
        });
    }
    if wl.is_none() {
        *wl = Some(
            WireLimit::start()
                .await
                .map_err(|e| format!("cannot start the wire-limit responder: {e}"))?,
        );
    }
    let w = wl
        .as_ref()
        .ok_or_else(|| "wire-limit responder missing".to_string())?;
    Ok(Target {
        label: name.to_string(),
        uri: if name == WIRE_LIMIT {
            w.tcp_uri.clone()
        } else {
            w.socket_uri.clone()
        },
    })
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
    let mut wl = None;
    let a = resolve(&plan.uri, &mut wl).await?;
    let b = match &plan.compare {
        Some(c) => Some(resolve(c, &mut wl).await?),
        None => None,
    };
    let mut results = Vec::new();
    for _ in 0..plan.runs {
        for t in std::iter::once(&a).chain(b.as_ref()) {
            let bar = progress_bar(show_progress);
            results.push(workload::run_once(plan, t, &bar).await?);
        }
    }
    let comparison = b
        .as_ref()
        .map(|b| report::compare(&a.label, &b.label, &results));
    Ok(Report {
        results,
        comparison,
    })
}

#[cfg(test)]
mod tests;
