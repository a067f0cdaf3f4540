//! A mutational driver that runs on stable Rust: starts from a target's seeds,
//! mutates them (bit flips, interesting bytes and integers, insertions,
//! deletions, duplicated runs, splices of two inputs) with a seeded RNG, and
//! runs the target on each result under `catch_unwind`. Without coverage
//! feedback it keeps a bounded pool of recent mutants, so mutations stack.
//! libFuzzer (`fuzz/`, nightly) runs the same functions with coverage.

use std::panic::{self, AssertUnwindSafe};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

use crate::targets::Target;

/// How long one run goes on: whichever limit comes first.
#[derive(Clone, Debug)]
pub struct Options {
    pub iterations: Option<u64>,
    pub seconds: Option<f64>,
    pub seed: u64,
    /// Largest input the mutator makes.
    pub max_len: usize,
    /// Where a panicking input is written (`crash-<target>-<n>`), if anywhere.
    pub artifacts: Option<PathBuf>,
    /// Stop at the first panic (else count them and go on).
    pub stop_on_panic: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            iterations: Some(20_000),
            seconds: None,
            seed: 0x5eed,
            max_len: 4096,
            artifacts: None,
            stop_on_panic: true,
        }
    }
}

/// What a run did.
#[derive(Debug)]
pub struct Report {
    pub target: &'static str,
    pub executions: u64,
    pub elapsed: Duration,
    /// The panics: input and message.
    pub panics: Vec<(Vec<u8>, String)>,
    /// The slowest execution and its time.
    pub slowest: Duration,
}

const POOL: usize = 1024;

fn message(p: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = p.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = p.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-string payload".to_string()
    }
}

/// Runs `target` as `opts` says.
pub fn run(target: &Target, opts: &Options) -> Report {
    let mut rng = SmallRng::seed_from_u64(opts.seed);
    let seeds = (target.seeds)();
    let mut pool: Vec<Vec<u8>> = seeds.clone();
    if pool.is_empty() {
        pool.push(Vec::new());
    }
    let start = Instant::now();
    let mut report = Report {
        target: target.name,
        executions: 0,
        elapsed: Duration::ZERO,
        panics: Vec::new(),
        slowest: Duration::ZERO,
    };
    // Silence the default hook: a panic is recorded in the report instead.
    let hook = panic::take_hook();
    panic::set_hook(Box::new(|_| {}));
    loop {
        if opts.iterations.is_some_and(|n| report.executions >= n) {
            break;
        }
        if report.executions.is_multiple_of(256) {
            if let Some(s) = opts.seconds {
                if start.elapsed().as_secs_f64() >= s {
                    break;
                }
            }
        }
        // The seeds themselves first, then mutants.
        let input = if (report.executions as usize) < seeds.len() {
            seeds[report.executions as usize].clone()
        } else {
            let base = &pool[rng.random_range(0..pool.len())];
            let other = &pool[rng.random_range(0..pool.len())];
            mutate(&mut rng, base, other, opts.max_len)
        };
        let t0 = Instant::now();
        let r = panic::catch_unwind(AssertUnwindSafe(|| (target.run)(&input)));
        let took = t0.elapsed();
        report.slowest = report.slowest.max(took);
        report.executions += 1;
        if let Err(p) = r {
            let msg = message(p.as_ref());
            if let Some(dir) = &opts.artifacts {
                let _ = std::fs::create_dir_all(dir);
                let path = dir.join(format!("crash-{}-{}", target.name, report.panics.len()));
                let _ = std::fs::write(&path, &input);
            }
            report.panics.push((input, msg));
            if opts.stop_on_panic {
                break;
            }
            continue;
        }
        if pool.len() < POOL {
            pool.push(input);
        } else if rng.random_ratio(1, 4) {
            // Keep the seeds; replace a mutant.
            let lo = seeds.len().min(POOL - 1);
            let i = rng.random_range(lo..POOL);
            pool[i] = input;
        }
    }
    panic::set_hook(hook);
    report.elapsed = start.elapsed();
    report
}

/// One to four stacked byte-level mutations of `base`.
pub fn mutate(rng: &mut SmallRng, base: &[u8], other: &[u8], max_len: usize) -> Vec<u8> {
    let mut v = base.to_vec();
    let n = 1 + rng.random_range(0..4);
    for _ in 0..n {
        let len = v.len();
        match rng.random_range(0..10) {
            0 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] ^= 1 << rng.random_range(0..8);
            }
            1 if len > 0 => {
                let i = rng.random_range(0..len);
                v[i] = rng.random();
            }
            2 if len > 0 => {
                const INTERESTING: &[u8] = &[0, 1, 0x7f, 0x80, 0xff, 0x10, 0x20, 0x40];
                let i = rng.random_range(0..len);
                v[i] = INTERESTING[rng.random_range(0..INTERESTING.len())];
            }
            3 if len >= 4 => {
                // An interesting 32-bit value (BSON and wire lengths are i32).
                const INTERESTING: &[i32] = &[0, 1, -1, 4, 5, 16, 0x7fff_ffff, i32::MIN, 4096];
                let i = rng.random_range(0..len - 3);
                let x = INTERESTING[rng.random_range(0..INTERESTING.len())];
                let delta = if rng.random_ratio(1, 2) {
                    i32::from_le_bytes([v[i], v[i + 1], v[i + 2], v[i + 3]])
                        .wrapping_add(rng.random_range(-4..=4))
                } else {
                    x
                };
                v[i..i + 4].copy_from_slice(&delta.to_le_bytes());
            }
            4 if len < max_len => {
                let i = rng.random_range(0..=len);
                let k = rng.random_range(1..=8.min(max_len - len));
                let bytes: Vec<u8> = (0..k).map(|_| rng.random()).collect();
                v.splice(i..i, bytes);
            }
            5 if len > 0 => {
                let i = rng.random_range(0..len);
                let k = rng.random_range(1..=(len - i).min(16));
                v.drain(i..i + k);
            }
            6 if len > 0 && len < max_len => {
                // Duplicate a run.
                let i = rng.random_range(0..len);
                let k = rng.random_range(1..=(len - i).min(32).min(max_len - len));
                let run: Vec<u8> = v[i..i + k].to_vec();
                let at = rng.random_range(0..=len);
                v.splice(at..at, run);
            }
            7 if !other.is_empty() => {
                // Splice: a head of this input, a tail of another.
                let cut = rng.random_range(0..=len);
                let from = rng.random_range(0..other.len());
                v.truncate(cut);
                v.extend_from_slice(&other[from..]);
                v.truncate(max_len);
            }
            8 if len > 1 => {
                // Copy a run of another input over this one.
                if !other.is_empty() {
                    let from = rng.random_range(0..other.len());
                    let k = rng.random_range(1..=(other.len() - from).min(16));
                    let at = rng.random_range(0..len);
                    for j in 0..k {
                        if at + j < v.len() {
                            v[at + j] = other[from + j];
                        }
                    }
                }
            }
            _ => {
                if len > 0 {
                    // Nudge a byte: choices and lengths move by small steps.
                    let i = rng.random_range(0..len);
                    v[i] = v[i].wrapping_add(rng.random_range(1..=3));
                } else {
                    v.push(rng.random());
                }
            }
        }
    }
    v
}
