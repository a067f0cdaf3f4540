//! `bisondb-fuzz`: the stable driver's command line.
//!
//! ```text
//! bisondb-fuzz run <target|all> [--iterations N] [--seconds S] [--seed X]
//!                  [--artifacts DIR] [--keep-going]
//! bisondb-fuzz replay <target> FILE...     run the target on saved inputs
//! bisondb-fuzz seeds DIR                   write each target's seeds (a corpus)
//! bisondb-fuzz list
//! ```
//! Prints one line per target: executions, time, rate, slowest input, panics.

use std::path::PathBuf;
use std::process::ExitCode;

use bisondb_fuzz::driver::{self, Options};

/// The server's allocator (`crates/bisondb/src/main.rs`), so a campaign runs
/// the targets as the server does: under glibc's malloc, `malloc_consolidate`,
/// `unlink_chunk` and the page faults of freshly mapped arenas took about 40%
/// of a `pipeline` campaign's profile, a cost of the fuzzer's process, not of
/// the code under test.
#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;
use bisondb_fuzz::{target, TARGETS};

fn usage() -> ExitCode {
    eprintln!(
        "usage: bisondb-fuzz run <target|all> [--iterations N] [--seconds S] [--seed X] [--artifacts DIR] [--keep-going]\n       bisondb-fuzz replay <target> FILE...\n       bisondb-fuzz seeds DIR\n       bisondb-fuzz list"
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("list") => {
            for t in TARGETS {
                println!("{}", t.name);
            }
            ExitCode::SUCCESS
        }
        Some("seeds") => {
            let Some(dir) = args.get(1) else {
                return usage();
            };
            for t in TARGETS {
                let d = PathBuf::from(dir).join(t.name);
                if let Err(e) = std::fs::create_dir_all(&d) {
                    eprintln!("{}: {e}", d.display());
                    return ExitCode::FAILURE;
                }
                for (i, s) in (t.seeds)().iter().enumerate() {
                    if let Err(e) = std::fs::write(d.join(format!("seed-{i:03}")), s) {
                        eprintln!("{}: {e}", d.display());
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Some("replay") => {
            let Some(t) = args.get(1).and_then(|n| target(n)) else {
                return usage();
            };
            for f in &args[2..] {
                match std::fs::read(f) {
                    Ok(data) => {
                        (t.run)(&data);
                        println!("{f}: ok");
                    }
                    Err(e) => {
                        eprintln!("{f}: {e}");
                        return ExitCode::FAILURE;
                    }
                }
            }
            ExitCode::SUCCESS
        }
        Some("run") => run(&args[1..]),
        _ => usage(),
    }
}

fn run(args: &[String]) -> ExitCode {
    let Some(which) = args.first() else {
        return usage();
    };
    let mut opts = Options {
        iterations: None,
        seconds: None,
        ..Options::default()
    };
    let mut i = 1;
    while i < args.len() {
        let val = args.get(i + 1);
        match (args[i].as_str(), val) {
            ("--iterations", Some(v)) => opts.iterations = v.parse().ok(),
            ("--seconds", Some(v)) => opts.seconds = v.parse().ok(),
            ("--seed", Some(v)) => opts.seed = v.parse().unwrap_or(opts.seed),
            ("--artifacts", Some(v)) => opts.artifacts = Some(PathBuf::from(v)),
            ("--keep-going", _) => {
                opts.stop_on_panic = false;
                i += 1;
                continue;
            }
            _ => return usage(),
        }
        i += 2;
    }
    if opts.iterations.is_none() && opts.seconds.is_none() {
        opts.iterations = Some(20_000);
    }
    let targets: Vec<_> = if which == "all" {
        TARGETS.iter().collect()
    } else {
        match target(which) {
            Some(t) => vec![t],
            None => return usage(),
        }
    };
    let mut failed = false;
    for t in targets {
        let r = driver::run(t, &opts);
        let secs = r.elapsed.as_secs_f64();
        println!(
            "{:<9} executions {:>11}  time {:>9.1} s  rate {:>9.0}/s  slowest {:>7.1} ms  panics {}",
            r.target,
            r.executions,
            secs,
            r.executions as f64 / secs.max(1e-9),
            r.slowest.as_secs_f64() * 1e3,
            r.panics.len()
        );
        for (input, msg) in &r.panics {
            failed = true;
            println!(
                "  panic: {msg}\n  input ({} bytes): {:02x?}",
                input.len(),
                input
            );
        }
    }
    if failed {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}
