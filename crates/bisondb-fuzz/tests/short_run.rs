//! The short fuzzing run CI makes (`cargo test --workspace` runs it): every
//! target, seeds first, then 20,000 mutated inputs each, on stable Rust. A
//! panic fails the test with the input that caused it. The long runs are
//! `bisondb-fuzz run` and `cargo +nightly fuzz run` (docs/RELIABILITY.md).

use bisondb_fuzz::driver::{self, Options};
use bisondb_fuzz::TARGETS;

/// Mutated inputs per target (BISONDB_FUZZ_ITERATIONS overrides it).
const ITERATIONS: u64 = 20_000;

#[test]
fn every_target_survives_a_short_run() {
    let iterations = std::env::var("BISONDB_FUZZ_ITERATIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(ITERATIONS);
    let mut failures = Vec::new();
    for t in TARGETS {
        let opts = Options {
            iterations: Some(iterations),
            ..Options::default()
        };
        let r = driver::run(t, &opts);
        println!(
            "{}: {} executions in {:.1} s (slowest {:.1} ms)",
            r.target,
            r.executions,
            r.elapsed.as_secs_f64(),
            r.slowest.as_secs_f64() * 1e3
        );
        if r.panics.is_empty() {
            assert_eq!(r.executions, iterations, "{}", r.target);
        }
        for (input, msg) in r.panics {
            failures.push(format!("{}: {msg}\n  input: {input:02x?}", r.target));
        }
    }
    assert!(failures.is_empty(), "panics:\n{}", failures.join("\n"));
}

#[test]
fn every_seed_passes() {
    for t in TARGETS {
        let seeds = (t.seeds)();
        assert!(!seeds.is_empty(), "{} has no seeds", t.name);
        for s in seeds {
            (t.run)(&s);
        }
    }
}
