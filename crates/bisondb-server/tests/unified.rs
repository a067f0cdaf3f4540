//! MongoDB's Unified Test Format, run against an in-process BisonDB through the
//! official Rust driver. The specification files are read from `$BISONDB_SPECS`
//! or `../shared/specs` beside the workspace and never copied into the repository;
//! when neither exists the test says it skipped and passes.
//!
//! Conformance is reported per file; the test fails only when fewer tests pass
//! than [`PASS_FLOOR`], so a regression fails CI while known gaps are printed
//! with their reasons.

mod common;

#[path = "unified/extjson.rs"]
mod extjson;
#[path = "unified/matching.rs"]
mod matching;
#[path = "unified/runner.rs"]
mod runner;

use std::path::{Path, PathBuf};

use runner::Outcome;

/// The number of tests that passed when this floor was last raised.
const PASS_FLOOR: usize = 397;

/// The spec folders (relative to the specs root) the runner executes.
const SUITES: &[&str] = &[
    "crud/unified",
    "collection-management",
    "index-management/index-rawdata.json",
    "run-command/unified",
];

fn specs_root() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BISONDB_SPECS") {
        return Some(PathBuf::from(p));
    }
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs");
    default.is_dir().then_some(default)
}

fn spec_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for suite in SUITES {
        let p = root.join(suite);
        if p.is_file() {
            files.push(p);
        } else if let Ok(rd) = std::fs::read_dir(&p) {
            let mut found: Vec<PathBuf> = rd
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.extension().is_some_and(|x| x == "json"))
                .collect();
            found.sort();
            files.extend(found);
        }
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unified_spec_conformance() {
    let Some(root) = specs_root().filter(|r| r.is_dir()) else {
        println!("unified: skipped (no specs folder; set BISONDB_SPECS)");
        return;
    };
    let only = std::env::var("BISONDB_SPECS_FILTER").ok();
    // Drivers run their unified tests against mongod with test commands on:
    // the `failPoint` operation needs configureFailPoint.
    let server = common::start_with(|c| c.enable_test_commands = true).await;
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    for path in spec_files(&root) {
        let name = path
            .strip_prefix(&root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if only.as_deref().is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                println!("FAIL {name}: unreadable: {e}");
                failed += 1;
                continue;
            }
        };
        let json: serde_json::Value = match serde_json::from_str(&text) {
            Ok(j) => j,
            Err(e) => {
                println!("FAIL {name}: bad JSON: {e}");
                failed += 1;
                continue;
            }
        };
        let report = runner::run_file(&json, &server.tcp_uri).await;
        let (mut p, mut f, mut s) = (0, 0, 0);
        for (desc, outcome) in &report.tests {
            match outcome {
                Outcome::Passed => p += 1,
                Outcome::Failed(why) => {
                    f += 1;
                    println!("  FAIL {name} :: {desc}: {why}");
                }
                Outcome::Skipped(why) => {
                    s += 1;
                    if std::env::var_os("BISONDB_SPECS_VERBOSE").is_some() {
                        println!("  skip {name} :: {desc}: {why}");
                    }
                }
            }
        }
        println!("{name}: {p} passed, {f} failed, {s} skipped");
        passed += p;
        failed += f;
        skipped += s;
    }
    println!("unified: {passed} passed, {failed} failed, {skipped} skipped");
    assert!(
        passed >= PASS_FLOOR,
        "unified conformance regressed: {passed} passed, floor is {PASS_FLOOR}"
    );
}
