//! `bisondb bench` through the real binary against the built-in wire-limit target:
//! the subcommand is wired, the table prints, `--processes` spawns workers of the same
//! binary and their counts add up, and bad arguments exit with status 2. The
//! replica-set workloads (`transactions`, `change-events`) run against the
//! real binary as a one-member set, and fail with a clear error elsewhere.

mod support;

use std::process::Command;

fn bisondb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args(args)
        .output()
        .expect("run bisondb")
}

#[test]
fn bench_prints_a_table() {
    let out = bisondb(&[
        "bench",
        "profile-single",
        "--uri",
        "wire-limit",
        "--docs",
        "200",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains("profile-single: 1 client(s) x 1 process(es)"),
        "{stdout}"
    );
    assert!(
        stdout.contains("docs/s") && stdout.contains("p99 µs"),
        "{stdout}"
    );
    let row = stdout
        .lines()
        .find(|l| l.starts_with("1 "))
        .expect("a result row");
    let cells: Vec<&str> = row.split_whitespace().collect();
    assert_eq!(cells[1], "wire-limit");
    assert_eq!(cells[2], "200");
    assert!(cells[4].parse::<f64>().unwrap() > 0.0, "{row}");
}

#[test]
fn processes_split_the_documents_and_the_plot_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let svg = dir.path().join("ts.svg");
    let out = bisondb(&[
        "bench",
        "timeseries-batch",
        "--uri",
        "wire-limit",
        "--docs",
        "20001",
        "--batch",
        "1000",
        "--processes",
        "2",
        "--drop",
        "--json",
        "--plot",
        svg.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON output");
    let r = &v["results"][0];
    assert_eq!(r["docs"], 20001);
    assert_eq!(r["processes"], 2);
    // 10001 + 10000 documents in batches of 1000: 11 + 10 insert commands.
    assert_eq!(r["ops"], 21);
    assert_eq!(r["objects"], 20001.0, "the responder saw every document");
    assert!(r["docs_per_sec"].as_f64().unwrap() > 0.0);
    assert!(std::fs::read_to_string(&svg).unwrap().contains("<svg"));
}

#[test]
fn bad_arguments_exit_2() {
    for args in [
        &["bench", "timeseries-batch", "--batch", "0"][..],
        &["bench", "profile-pool", "--clients", "0"][..],
    ] {
        let out = bisondb(args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&out.stderr).contains("must be at least 1"));
    }
}

#[test]
fn wire_limit_process_runs_the_responder_in_a_child_and_cleans_up() {
    let before = responder_socket_files();
    let out = bisondb(&[
        "bench",
        "profile-single",
        "--uri",
        "wire-limit-process-socket",
        "--compare",
        "wire-limit-process",
        "--runs",
        "1",
        "--docs",
        "300",
        "--drop",
        "--json",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON output");
    let results = v["results"].as_array().expect("results");
    assert_eq!(results.len(), 2);
    for (r, target) in results
        .iter()
        .zip(["wire-limit-process-socket", "wire-limit-process"])
    {
        assert_eq!(r["target"], target);
        assert_eq!(r["docs"], 300);
        // The child counted every document the driver sent it.
        assert_eq!(r["objects"], 300.0, "{r}");
        assert!(r["docs_per_sec"].as_f64().unwrap() > 0.0);
    }
    // The child's socket file is gone with it: every responder socket file that
    // appeared during the run and is still there belongs to a live process (another
    // test's in-process responder), never to the killed child.
    for name in responder_socket_files().difference(&before) {
        let pid: u32 = name
            .trim_start_matches("bisondb-bench-wire-limit-")
            .split('-')
            .next()
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        assert!(
            std::path::Path::new(&format!("/proc/{pid}")).exists(),
            "stale socket file {name}"
        );
    }
}

fn responder_socket_files() -> std::collections::BTreeSet<String> {
    std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("bisondb-bench-wire-limit-"))
        .collect()
}

/// `bisondb bench WORKLOAD --docs N --json` against `uri`: the parsed report.
fn bench_json(workload: &str, uri: &str, extra: &[&str]) -> serde_json::Value {
    let mut args = vec!["bench", workload, "--uri", uri, "--json"];
    args.extend_from_slice(extra);
    let out = bisondb(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{workload}: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).expect("JSON output")
}

#[tokio::test(flavor = "multi_thread")]
async fn replica_set_workloads_run_against_a_member() {
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let _server = support::start_member(dir.path(), port, "inMemory");
    let client = support::initiate(port).await;
    let uri = support::uri(port, 10_000);

    // Transactions from two clients (so some may conflict and retry); the
    // run itself checks that the balances still sum to zero.
    let v = tokio::task::block_in_place(|| {
        bench_json("transactions", &uri, &["--docs", "200", "--clients", "2"])
    });
    let r = &v["results"][0];
    assert_eq!(r["workload"], "transactions");
    assert_eq!(r["docs"], 200);
    assert_eq!(r["ops"], 200, "one latency per transaction: {r}");
    assert!(r["latency"]["p99_us"].as_u64().unwrap() >= 1, "{r}");
    let accounts = client
        .database("bench")
        .collection::<mongodb::bson::Document>("accounts");
    assert_eq!(
        accounts
            .count_documents(mongodb::bson::doc! {})
            .await
            .unwrap(),
        1000
    );
    // The oplog holds one applyOps entry per committed transaction.
    let oplog = client
        .database("local")
        .collection::<mongodb::bson::Document>("oplog.rs");
    let commits = oplog
        .count_documents(mongodb::bson::doc! {"o.applyOps.ns": "bench.accounts"})
        .await
        .unwrap();
    assert_eq!(commits, 200);

    let v = tokio::task::block_in_place(|| bench_json("change-events", &uri, &["--docs", "100"]));
    let r = &v["results"][0];
    assert_eq!(r["workload"], "change-events");
    assert_eq!(r["docs"], 100);
    assert_eq!(r["ops"], 100, "one latency per event: {r}");
    let l = &r["latency"];
    assert!(
        l["p50_us"].as_u64().unwrap() <= l["p99_us"].as_u64().unwrap(),
        "{l}"
    );
    let events = client
        .database("bench")
        .collection::<mongodb::bson::Document>("events");
    assert_eq!(
        events
            .count_documents(mongodb::bson::doc! {})
            .await
            .unwrap(),
        100
    );
}

#[test]
fn replica_set_workloads_need_a_replica_set() {
    for workload in ["transactions", "change-events"] {
        let out = bisondb(&["bench", workload, "--uri", "wire-limit", "--docs", "5"]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{workload}: {stderr}");
        assert!(stderr.contains("replica set"), "{workload}: {stderr}");
    }
}

/// `point-reads` loads its read set once, then reads it back by `_id` from
/// several clients; a second run reuses the load (the collection still holds
/// exactly the read set) and every read must find its document.
#[tokio::test(flavor = "multi_thread")]
async fn point_reads_load_the_read_set_once_and_find_every_document() {
    let dir = tempfile::tempdir().unwrap();
    let port = support::free_port();
    let _server = support::start_bisondb(dir.path(), port, &["--storageEngine", "inMemory"]);
    let uri = support::uri(port, 10_000);
    let client = mongodb::Client::with_uri_str(&uri).await.unwrap();
    let reads = client
        .database("bench")
        .collection::<mongodb::bson::Document>("reads");
    for run in 0..2 {
        let v = tokio::task::block_in_place(|| {
            bench_json("point-reads", &uri, &["--docs", "300", "--clients", "3"])
        });
        let r = &v["results"][0];
        assert_eq!(r["workload"], "point-reads", "run {run}: {r}");
        assert_eq!(r["docs"], 300, "run {run}: {r}");
        assert_eq!(r["ops"], 300, "one latency per read: {r}");
        assert_eq!(
            reads.count_documents(mongodb::bson::doc! {}).await.unwrap(),
            10_000
        );
    }
    // A collection of another size is reloaded, not read with misses.
    reads
        .delete_one(mongodb::bson::doc! {"_id": 7_i64})
        .await
        .unwrap();
    let v = tokio::task::block_in_place(|| bench_json("point-reads", &uri, &["--docs", "50"]));
    assert_eq!(v["results"][0]["docs"], 50);
    assert_eq!(
        reads
            .count_documents(mongodb::bson::doc! {"_id": 7_i64})
            .await
            .unwrap(),
        1
    );
}
