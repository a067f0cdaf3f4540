//! MongoDB's Unified Test Format, run against an in-process BisonDB through the
//! official Rust driver. The specification files are read from `$BISONDB_SPECS`
//! or `../shared/specs` beside the workspace and never copied into the repository.
//! When `BISONDB_SPECS` is set the folder must exist (CI sets it, so a missing
//! copy fails there); when it is not set and the default folder is absent, the
//! test says it skipped and passes.
//!
//! Two passes: the standalone suites ([`SUITES`]) against a standalone
//! server, then the replica-set suites ([`REPL_SUITES`]: transactions,
//! sessions, retryable writes and reads, change streams, causal consistency,
//! read/write concern) against a one-member replica set, each with the
//! topology `runOnRequirements` names.
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

/// The number of tests that passed in replica-set mode when this floor was
/// last raised.
const REPL_PASS_FLOOR: usize = 681;

// Why the tests in SKIPPED_TESTS cannot pass. "server:" is a BisonDB gap
// (docs/COMPATIBILITY.md); "runner:" is this runner, which sends some
// operations as raw commands; the others are the Rust driver's behaviour.
const RAW_LIST: &str = "runner: listCollections/listIndexes are raw cursor commands (results keep the server's fields), which the Rust driver does not retry";
const RAW_COUNT: &str = "runner: count is a raw command (the Rust driver has no count helper), which the driver does not retry";
const RAW_UNACKNOWLEDGED: &str =
    "runner: unacknowledged writes are sent as raw commands outside the session";
const RAW_BULK_WRITE: &str = "runner: a collection bulkWrite is sent as raw insert/update/delete commands, which the driver neither numbers (txnNumber) nor retries";
const CLIENT_BULK_WRITE_SESSION: &str =
    "runner: clientBulkWrite does not take the operation's session";
const DRIVER_STREAM_COMMENT: &str = "the Rust driver sends `comment` inside the $changeStream stage, which the server refuses (40415, as mongod's parser)";
const RUN_COMMAND_READ_PREFERENCE: &str =
    "runner: runCommand's readPreference argument is not passed to the driver";
const DRIVER_SOCKET_TIMEOUT: &str = "the Rust driver does not support socketTimeoutMS";
const CURSOR_COMMAND_SESSION: &str =
    "runner: runCursorCommand does not take the operation's session";
const DRIVER_IMPLICIT_SESSION_POOL: &str = "the Rust driver's implicit-session pool may give consecutive commands different sessions (passes intermittently)";

const POSTGRES_NO_HISTORY: &str = "server: the postgres engine keeps no snapshot history (readConcern atClusterTime is 238, snapshot reads answer no atClusterTime)";

/// Tests skipped by name on one engine only (`BISONDB_TEST_ENGINE`), with the
/// reason: the engine lacks what they need (docs/COMPATIBILITY.md).
const ENGINE_SKIPPED_TESTS: &[(&str, &str, &str)] = &[
    ("postgres", "sessions/snapshot-sessions.json :: Find operation with snapshot", POSTGRES_NO_HISTORY),
    ("postgres", "sessions/snapshot-sessions.json :: Distinct operation with snapshot", POSTGRES_NO_HISTORY),
    ("postgres", "sessions/snapshot-sessions.json :: Aggregate operation with snapshot", POSTGRES_NO_HISTORY),
    ("postgres", "sessions/snapshot-sessions.json :: countDocuments operation with snapshot", POSTGRES_NO_HISTORY),
    ("postgres", "sessions/snapshot-sessions.json :: Mixed operation with snapshot", POSTGRES_NO_HISTORY),
    ("postgres", "sessions/snapshot-sessions.json :: Write commands with snapshot session do not affect snapshot reads", POSTGRES_NO_HISTORY),
];

/// Tests skipped by name (`<file> :: <description>`), with the reason: each
/// cannot pass against BisonDB or through this runner. The runner's other
/// skips are by requirement (topology, server version, auth) or by a feature
/// it does not model, each with its reason, counted per reason in the output.
const SKIPPED_TESTS: &[(&str, &str)] = &[
    (
        "causal-consistency/causal-consistency-clientBulkWrite.json :: clientBulkWrite includes afterClusterTime in causally consistent session",
        CLIENT_BULK_WRITE_SESSION,
    ),
    (
        "causal-consistency/causal-consistency-write-commands.json :: bulkWrite includes afterClusterTime in causally consistent session",
        RAW_BULK_WRITE,
    ),
    (
        "change-streams/unified/change-streams.json :: Test that comment is set on getMore",
        DRIVER_STREAM_COMMENT,
    ),
    (
        "change-streams/unified/change-streams.json :: Test with document comment",
        DRIVER_STREAM_COMMENT,
    ),
    (
        "change-streams/unified/change-streams.json :: Test with string comment",
        DRIVER_STREAM_COMMENT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count fails after two NotWritablePrimary errors",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after HostNotFound",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after HostUnreachable",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after InterruptedAtShutdown",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after InterruptedDueToReplStateChange",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after NetworkTimeout",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after NotPrimaryNoSecondaryOk",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after NotPrimaryOrSecondary",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after NotWritablePrimary",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after PrimarySteppedDown",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after ShutdownInProgress",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count-serverErrors.json :: Count succeeds after SocketException",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count.json :: Count fails on second attempt",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/count.json :: Count succeeds on second attempt",
        RAW_COUNT,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections fails after two NotWritablePrimary errors",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after HostNotFound",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after HostUnreachable",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after InterruptedAtShutdown",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after InterruptedDueToReplStateChange",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after NetworkTimeout",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after NotPrimaryNoSecondaryOk",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after NotPrimaryOrSecondary",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after NotWritablePrimary",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after PrimarySteppedDown",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after ShutdownInProgress",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections-serverErrors.json :: ListCollections succeeds after SocketException",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections.json :: ListCollections fails on second attempt",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listCollections.json :: ListCollections succeeds on second attempt",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes fails after two NotWritablePrimary errors",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after HostNotFound",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after HostUnreachable",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after InterruptedAtShutdown",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after InterruptedDueToReplStateChange",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after NetworkTimeout",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after NotPrimaryNoSecondaryOk",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after NotPrimaryOrSecondary",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after NotWritablePrimary",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after PrimarySteppedDown",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after ShutdownInProgress",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes-serverErrors.json :: ListIndexes succeeds after SocketException",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes.json :: ListIndexes fails on second attempt",
        RAW_LIST,
    ),
    (
        "retryable-reads/unified/listIndexes.json :: ListIndexes succeeds on second attempt",
        RAW_LIST,
    ),
    (
        "retryable-writes/unified/bulkWrite-errorLabels.json :: BulkWrite succeeds after PrimarySteppedDown",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite-errorLabels.json :: BulkWrite succeeds with RetryableWriteError from server",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite-serverErrors.json :: BulkWrite fails with a RetryableWriteError label after two connection failures",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite-serverErrors.json :: BulkWrite succeeds after retryable writeConcernError in first batch",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite.json :: BulkWrite with unordered execution",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite.json :: First command is retried",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite.json :: First insertOne is never committed",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite.json :: Second updateOne is never committed",
        RAW_BULK_WRITE,
    ),
    (
        "retryable-writes/unified/bulkWrite.json :: Third updateOne is never committed",
        RAW_BULK_WRITE,
    ),
    (
        "run-command/unified/runCursorCommand.json :: accepts an explicit session that is reused across getMores",
        CURSOR_COMMAND_SESSION,
    ),
    (
        "sessions/driver-sessions-server-support.json :: Server supports implicit sessions",
        DRIVER_IMPLICIT_SESSION_POOL,
    ),
    (
        "transactions/unified/client-bulkWrite.json :: client bulkWrite in a transaction",
        CLIENT_BULK_WRITE_SESSION,
    ),
    (
        "transactions/unified/client-bulkWrite.json :: client bulkWrite with writeConcern in a transaction causes a transaction error",
        CLIENT_BULK_WRITE_SESSION,
    ),
    (
        "transactions/unified/client-bulkWrite.json :: client writeConcern ignored for client bulkWrite in transaction",
        CLIENT_BULK_WRITE_SESSION,
    ),
    (
        "transactions/unified/error-labels-blockConnection.json :: add RetryableWriteError and UnknownTransactionCommitResult labels to connection errors",
        DRIVER_SOCKET_TIMEOUT,
    ),
    (
        "transactions/unified/run-command.json :: run command fails with explicit secondary read preference",
        RUN_COMMAND_READ_PREFERENCE,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll bulkWrite",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll deleteMany",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll deleteOne",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll findOneAndDelete",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll findOneAndReplace",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll findOneAndUpdate",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll insertMany",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll insertOne",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll updateMany",
        RAW_UNACKNOWLEDGED,
    ),
    (
        "transactions/unified/write-concern.json :: unacknowledged write concern coll updateOne",
        RAW_UNACKNOWLEDGED,
    ),
];

/// The spec folders run against a one-member replica set.
const REPL_SUITES: &[&str] = &[
    "transactions/unified",
    "transactions-convenient-api/unified",
    "sessions",
    "retryable-writes/unified",
    "retryable-reads/unified",
    "change-streams/unified",
    "causal-consistency",
    "read-write-concern/operation",
];

/// The spec folders (relative to the specs root) the runner executes
/// against a standalone server.
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
fn spec_files(root: &Path, suites: &[&str]) -> Vec<PathBuf> {
    let mut files = Vec::new();
    for suite in suites {
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

/// What a pass over some suites found.
#[derive(Default)]
struct Tally {
    passed: usize,
    failed: usize,
    skipped: usize,
    /// Failures not in EXPECTED_FAILURES, by name.
    unexpected: Vec<String>,
    /// The listed tests that ran, and whether they passed.
    ran: Vec<(String, bool)>,
    /// How many tests each skip reason covers.
    reasons: std::collections::BTreeMap<String, usize>,
}

async fn run_suites(
    root: &Path,
    suites: &[&str],
    uri: &str,
    topology: runner::Topology,
    only: Option<&str>,
    t: &mut Tally,
) {
    for path in spec_files(root, suites) {
        let name = path
            .strip_prefix(root)
            .unwrap_or(&path)
            .display()
            .to_string();
        if only.is_some_and(|f| !name.contains(f)) {
            continue;
        }
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                println!("FAIL {name}: unreadable: {e}");
                t.failed += 1;
                t.unexpected.push(name);
                continue;
            }
        };
        let json: serde_json::Value = match serde_json::from_str(&text) {
            Ok(j) => j,
            Err(e) => {
                println!("FAIL {name}: bad JSON: {e}");
                t.failed += 1;
                t.unexpected.push(name);
                continue;
            }
        };
        let prefix = format!("{name} :: ");
        let engine = common::test_engine();
        let skips: Vec<(&str, &str)> = SKIPPED_TESTS
            .iter()
            .map(|(test, why)| (*test, *why))
            .chain(
                ENGINE_SKIPPED_TESTS
                    .iter()
                    .filter(|(e, _, _)| *e == engine)
                    .map(|(_, test, why)| (*test, *why)),
            )
            .filter_map(|(test, why)| test.strip_prefix(prefix.as_str()).map(|d| (d, why)))
            .collect();
        let report = runner::run_file(&json, uri, topology, &skips).await;
        let (mut p, mut f, mut s) = (0, 0, 0);
        for (desc, outcome) in &report.tests {
            let test = format!("{name} :: {desc}");
            let listed = EXPECTED_FAILURES.iter().any(|(t, _)| *t == test);
            match outcome {
                Outcome::Passed => {
                    p += 1;
                    if listed {
                        t.ran.push((test, true));
                    }
                }
                Outcome::Failed(why) => {
                    f += 1;
                    if listed {
                        println!("  FAIL (expected) {test}: {why}");
                        t.ran.push((test, false));
                    } else {
                        println!("  FAIL {test}: {why}");
                        t.unexpected.push(test);
                    }
                }
                Outcome::Skipped(why) => {
                    s += 1;
                    *t.reasons.entry(why.clone()).or_default() += 1;
                    if std::env::var_os("BISONDB_SPECS_VERBOSE").is_some() {
                        println!("  skip {name} :: {desc}: {why}");
                    }
                }
            }
        }
        println!("{name}: {p} passed, {f} failed, {s} skipped");
        t.passed += p;
        t.failed += f;
        t.skipped += s;
    }
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
    let mut t = Tally::default();
    {
        let server = common::start_with(|c| c.enable_test_commands = true).await;
        run_suites(
            &root,
            SUITES,
            &server.tcp_uri,
            runner::Topology::Single,
            only.as_deref(),
            &mut t,
        )
        .await;
    }
    let standalone_passed = t.passed;
    {
        let server = common::start_repl_set_with(|c| c.enable_test_commands = true).await;
        // After a state-change error the driver drops the server until its
        // next hello, which an awaitable hello answers after
        // heartbeatFrequencyMS: keep that short, as drivers' runners do, so
        // retries find the server within the selection timeout.
        let uri = format!("{}&heartbeatFrequencyMS=500", server.tcp_uri);
        run_suites(
            &root,
            REPL_SUITES,
            &uri,
            runner::Topology::ReplicaSet,
            only.as_deref(),
            &mut t,
        )
        .await;
    }
    let repl_passed = t.passed - standalone_passed;
    println!("unified: skip reasons:");
    for (why, n) in &t.reasons {
        println!("  {n:4}  {why}");
    }
    let Tally {
        passed,
        failed,
        skipped,
        unexpected,
        ran,
        ..
    } = t;
    println!("unified: {passed} passed, {failed} failed, {skipped} skipped");
    println!("unified: {standalone_passed} passed standalone, {repl_passed} in replica-set mode");
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
    if only.is_none() {
        assert!(
            standalone_passed >= PASS_FLOOR,
            "unified conformance regressed: {standalone_passed} passed, floor is {PASS_FLOOR}"
        );
        // The floor counts every engine's tests; an engine's own skips (all
        // replica-set tests today) come off it.
        let engine = common::test_engine();
        let repl_floor = REPL_PASS_FLOOR
            - ENGINE_SKIPPED_TESTS
                .iter()
                .filter(|(e, _, _)| *e == engine)
                .count();
        assert!(
            repl_passed >= repl_floor,
            "unified conformance in replica-set mode regressed: {repl_passed} passed, floor is {repl_floor}"
        );
    }
}
