//! MongoDB's Unified Test Format, run against an in-process BisonDB through the
//! official Rust driver. The specification files are read from `$BISONDB_SPECS`
//! or `../shared/specs` beside the workspace and never copied into the repository.
//! When `BISONDB_SPECS` is set the folder must exist (CI sets it, so a missing
//! copy fails there); when it is not set and the default folder is absent, the
//! test says it skipped and passes.
//!
//! Conformance is reported per file. The test fails on any failure not in
//! [`EXPECTED_FAILURES`], on a listed test that passes or no longer exists (so
//! the list stays true), and when fewer tests pass than [`PASS_FLOOR`] (tests
//! that start being skipped are a regression too).

use crate::common;

mod extjson;
mod matching;
mod runner;

use std::path::{Path, PathBuf};

use runner::Outcome;

/// The number of tests that passed when this floor was last raised.
const PASS_FLOOR: usize = 397;

/// Tests that fail today, as `<file> :: <description>` (the file relative to the
/// specs root), each with the reason. Empty: every test that runs passes; the
/// ones the runner cannot run are skipped with their reason (a topology or
/// server version BisonDB does not claim, or a feature the runner does not
/// model), see `runner.rs`.
const EXPECTED_FAILURES: &[(&str, &str)] = &[];

/// The spec folders (relative to the specs root) the runner executes.
const SUITES: &[&str] = &[
    "crud/unified",
    "collection-management",
    "index-management/index-rawdata.json",
    "run-command/unified",
];

/// The specs folder: `$BISONDB_SPECS`, which must then exist, or else
/// `../shared/specs` beside the workspace when it is there.
fn specs_root() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("BISONDB_SPECS") {
        let p = PathBuf::from(p);
        assert!(
            p.is_dir(),
            "BISONDB_SPECS is set to {}, which is not a folder",
            p.display()
        );
        return Some(p);
    }
    let default = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs");
    default.is_dir().then_some(default)
}

/// The JSON files of every suite, in order. A suite missing from the specs
/// folder fails the test: the copy is incomplete.
fn spec_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for suite in SUITES {
        let p = root.join(suite);
        if p.is_file() {
            files.push(p);
            continue;
        }
        let rd = std::fs::read_dir(&p)
            .unwrap_or_else(|e| panic!("spec suite {} is missing: {e}", p.display()));
        let mut found: Vec<PathBuf> = rd
            .filter_map(Result::ok)
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        found.sort();
        files.extend(found);
    }
    files
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unified_spec_conformance() {
    let Some(root) = specs_root() else {
        println!("unified: skipped (no specs folder; set BISONDB_SPECS)");
        return;
    };
    let only = std::env::var("BISONDB_SPECS_FILTER").ok();
    // Drivers run their unified tests against mongod with test commands on:
    // the `failPoint` operation needs configureFailPoint.
    let server = common::start_with(|c| c.enable_test_commands = true).await;
    let (mut passed, mut failed, mut skipped) = (0usize, 0usize, 0usize);
    // Failures not in EXPECTED_FAILURES, and the listed tests that ran, by name.
    let mut unexpected: Vec<String> = Vec::new();
    let mut ran: Vec<(String, bool)> = Vec::new();
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
                unexpected.push(name);
                continue;
            }
        };
        let json: serde_json::Value = match serde_json::from_str(&text) {
            Ok(j) => j,
            Err(e) => {
                println!("FAIL {name}: bad JSON: {e}");
                failed += 1;
                unexpected.push(name);
                continue;
            }
        };
        let report = runner::run_file(&json, &server.tcp_uri).await;
        let (mut p, mut f, mut s) = (0, 0, 0);
        for (desc, outcome) in &report.tests {
            let test = format!("{name} :: {desc}");
            let listed = EXPECTED_FAILURES.iter().any(|(t, _)| *t == test);
            match outcome {
                Outcome::Passed => {
                    p += 1;
                    if listed {
                        ran.push((test, true));
                    }
                }
                Outcome::Failed(why) => {
                    f += 1;
                    if listed {
                        println!("  FAIL (expected) {test}: {why}");
                        ran.push((test, false));
                    } else {
                        println!("  FAIL {test}: {why}");
                        unexpected.push(test);
                    }
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
        unexpected.is_empty(),
        "unified: {} failures not in EXPECTED_FAILURES (fix them, or list each with its reason):\n  {}",
        unexpected.len(),
        unexpected.join("\n  ")
    );
    let now_passing: Vec<&str> = ran
        .iter()
        .filter(|(_, passed)| *passed)
        .map(|(t, _)| t.as_str())
        .collect();
    assert!(
        now_passing.is_empty(),
        "unified: listed in EXPECTED_FAILURES but passing now (take them off the list):\n  {}",
        now_passing.join("\n  ")
    );
    // With a filter only part of the list runs; otherwise every entry must.
    if only.is_none() {
        let gone: Vec<&str> = EXPECTED_FAILURES
            .iter()
            .map(|(t, _)| *t)
            .filter(|t| !ran.iter().any(|(r, _)| r == t))
            .collect();
        assert!(
            gone.is_empty(),
            "unified: listed in EXPECTED_FAILURES but not run (renamed, removed or skipped now):\n  {}",
            gone.join("\n  ")
        );
    }
    assert!(
        passed >= PASS_FLOOR,
        "unified conformance regressed: {passed} passed, floor is {PASS_FLOOR}"
    );
}
