//! The server's integration tests, in one test binary: each module is one area
//! of the server (named after it), driven through the official Rust driver or
//! raw OP_MSG against servers started in this process by [`common`].
//!
//! One binary rather than one per file: the test code links once instead of 32
//! times (one executable on disk instead of 32 of about the same size), and a
//! change to `common` builds one target. Every test starts its own server on
//! its own port, socket and dbpath, so tests share nothing but the process;
//! nothing here may set process-wide state (environment variables, signal
//! handlers, a global tracing subscriber), since the tests of all modules run
//! side by side on the default test threads.
//!
//! Cargo does not make a binary of each file here (`autotests = false` in the
//! package's Cargo.toml), so a new test file must be declared below;
//! [`every_test_file_is_a_module`] fails until it is.
//!
//! Run one module's tests with `cargo test -p bisondb-server --test it find::`
//! (the unified-format runner: `--test it unified -- --nocapture`), all of them
//! on the persistent engine with `BISONDB_TEST_ENGINE=lsm`.

mod common;

mod aggregate;
mod aggregate_output;
mod auth;
mod auth_restrictions;
mod authz;
mod bulk_write;
mod capped;
mod change_streams;
mod clustered;
mod collation;
mod decimal_math;
mod errors;
mod exhaust;
mod fail_points;
mod find;
mod fsync_lock;
mod geo;
mod handshake;
mod hardening;
mod index_stats;
mod indexes;
mod insert;
mod interrupt;
mod large_keys;
mod lifecycle;
mod logs;
mod management;
mod map_reduce;
mod memory;
mod min_max;
mod mongos;
mod natural_order;
mod observability;
mod operators_extra;
mod oplog;
mod ownership;
mod persistence;
mod postgres;
mod profiler;
mod repl_set;
mod retryable_writes;
mod robustness;
mod sessions;
mod shared_store;
mod signed_cluster_time;
mod snapshot_reads;
mod spill;
mod text;
mod timeseries;
mod tls;
mod transactions;
mod transactions_ddl;
mod unified;
mod update;
mod validate;
mod validation;
mod views;
mod where_js;
mod wildcard;

/// Every `.rs` file and folder module beside this file is declared above: with
/// `autotests = false` a file left out would compile into nothing and never run.
#[test]
fn every_test_file_is_a_module() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let declared = include_str!("main.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
        let path = entry.unwrap_or_else(|e| panic!("{e}")).path();
        let name = match path.extension() {
            Some(ext) if ext == "rs" => path.file_stem(),
            // A folder is a module of its own only with a mod.rs (unified/
            // holds unified.rs's submodules).
            None if path.join("mod.rs").is_file() => path.file_name(),
            _ => None,
        };
        let Some(name) = name.and_then(|n| n.to_str()) else {
            continue;
        };
        if name != "main" && !declared.lines().any(|l| l == format!("mod {name};")) {
            missing.push(name.to_owned());
        }
    }
    assert!(
        missing.is_empty(),
        "tests/main.rs does not declare `mod` for {missing:?}: their tests would never run"
    );
}
