//! End-to-end runs of every workload at small size against the built-in wire-limit
//! responder: they check that numbers are sane, never how fast anything is.

use clap::Parser;

use super::*;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    a: BenchArgs,
}

fn plan(args: &[&str]) -> Plan {
    Cli::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .unwrap()
        .a
        .plan()
        .unwrap()
}

fn assert_sane(r: &RunResult, docs: u64) {
    assert_eq!(r.docs, docs, "{r:?}");
    assert!(r.docs_per_sec > 0.0, "{r:?}");
    assert!(r.seconds > 0.0);
    let l = r.latency;
    assert!(l.p50_us >= 1, "{l:?}");
    assert!(
        l.p50_us <= l.p95_us && l.p95_us <= l.p99_us && l.p99_us <= l.max_us,
        "{l:?}"
    );
    let recorded: u64 = r.latency_counts.iter().map(|c| c.1).sum();
    assert_eq!(recorded, r.ops, "every timed command is in the histogram");
    // wire-limit reports no storageSize: no bytes-per-document figure is invented.
    assert_eq!(r.bytes_per_doc, None);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_workloads_against_wire_limit() {
    let cases: &[(&[&str], u64, u64)] = &[
        // (arguments, documents, timed commands)
        (
            &["profile-single", "--uri", "wire-limit", "--docs", "300"],
            300,
            300,
        ),
        (
            &[
                "profile-pool",
                "--uri",
                "wire-limit-socket",
                "--docs",
                "400",
                "--clients",
                "4",
            ],
            400,
            400,
        ),
        (
            &[
                "timeseries-batch",
                "--uri",
                "wire-limit",
                "--docs",
                "12345",
                "--batch",
                "1000",
                "--clients",
                "2",
            ],
            12345,
            13,
        ),
        (
            &[
                "timeseries-batch",
                "--uri",
                "wire-limit",
                "--docs",
                "50",
                "--w",
                "1",
                "--j",
                "true",
            ],
            50,
            1,
        ),
    ];
    for (args, docs, ops) in cases {
        let p = plan(args);
        let rep = run_plan(&p, false).await.unwrap();
        assert_eq!(rep.results.len(), 1);
        let r = &rep.results[0];
        assert_sane(r, *docs);
        assert_eq!(r.ops, *ops, "{args:?}");
        // The responder counted every document the driver sent.
        assert_eq!(r.objects, Some(*docs as f64), "{args:?}");
        assert_eq!(r.workload, p.workload.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregate_loads_then_runs_four_pipelines() {
    let p = plan(&[
        "timeseries-aggregate",
        "--uri",
        "wire-limit",
        "--docs",
        "2000",
        "--drop",
    ]);
    let rep = run_plan(&p, false).await.unwrap();
    let r = &rep.results[0];
    assert_sane(r, 2000);
    assert_eq!(r.ops, 4);
    let names: Vec<&str> = r.queries.iter().map(|q| q.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "per-day",
            "per-hour",
            "per-day, February",
            "per-hour, February"
        ]
    );
    // The responder stores nothing, so there are no groups to return.
    assert!(r.queries.iter().all(|q| q.groups == 0));
    assert!(rep.table().contains("per-hour, February"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compare_alternates_and_reports_json_and_plot() {
    let p = plan(&[
        "profile-single",
        "--uri",
        "wire-limit",
        "--compare",
        "wire-limit-socket",
        "--runs",
        "2",
        "--docs",
        "100",
        "--drop",
    ]);
    let rep = run_plan(&p, false).await.unwrap();
    let targets: Vec<&str> = rep.results.iter().map(|r| r.target.as_str()).collect();
    assert_eq!(
        targets,
        [
            "wire-limit",
            "wire-limit-socket",
            "wire-limit",
            "wire-limit-socket"
        ]
    );
    for r in &rep.results {
        assert_sane(r, 100);
    }
    let c = rep.comparison.as_ref().unwrap();
    assert_eq!(c.runs, 2);
    assert!(c.ratio > 0.0 && c.ratio.is_finite());
    let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
    assert_eq!(v["results"].as_array().unwrap().len(), 4);
    assert_eq!(v["comparison"]["b"], "wire-limit-socket");
    assert!(v["results"][0]["latency"]["p99_us"].as_u64().unwrap() >= 1);

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("plot.svg");
    write_plot(&path, &rep).unwrap();
    let svg = std::fs::read_to_string(&path).unwrap();
    assert!(svg.contains("<svg"));
    assert_eq!(
        svg.matches("<polyline").count(),
        8,
        "two panels x four runs"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_single_runs_both_workloads_and_reports_pool_over_single() {
    let args = "profile-pool --with-single --uri wire-limit --compare wire-limit-socket --runs 2 --docs 100 --drop";
    let p = plan(&args.split(' ').collect::<Vec<_>>());
    let rep = run_plan(&p, false).await.unwrap();
    let runs: Vec<(&str, &str)> = rep
        .results
        .iter()
        .map(|r| (r.workload.as_str(), r.target.as_str()))
        .collect();
    let each = [
        ("profile-single", "wire-limit"),
        ("profile-single", "wire-limit-socket"),
        ("profile-pool", "wire-limit"),
        ("profile-pool", "wire-limit-socket"),
    ];
    assert_eq!(runs, [each, each].concat());
    for r in &rep.results {
        assert_sane(r, 100);
        let clients = if r.workload == "profile-pool" { 8 } else { 1 };
        assert_eq!(r.clients, clients, "{}", r.workload);
    }
    let c = rep.comparison.as_ref().unwrap();
    assert_eq!(c.runs, 2, "the comparison is of the pool runs");
    let pool_a: Vec<f64> = rep
        .results
        .iter()
        .filter(|r| r.workload == "profile-pool" && r.target == "wire-limit")
        .map(|r| r.docs_per_sec)
        .collect();
    assert_eq!(c.a_median_docs_per_sec, report::median(pool_a));
    let targets: Vec<&str> = rep
        .pool_vs_single
        .iter()
        .map(|v| v.target.as_str())
        .collect();
    assert_eq!(targets, ["wire-limit", "wire-limit-socket"]);
    for v in &rep.pool_vs_single {
        assert_eq!(v.runs, 2);
        assert!(v.ratio > 0.0 && v.ratio.is_finite(), "{v:?}");
    }
    assert!(rep.table().contains("pool / single, wire-limit-socket:"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreachable_target_is_an_error_not_a_hang() {
    // Port 1 on loopback refuses; server selection gives up after its timeout.
    let p = plan(&[
        "profile-single",
        "--uri",
        "mongodb://127.0.0.1:1/?serverSelectionTimeoutMS=300",
        "--docs",
        "1",
    ]);
    let err = run_plan(&p, false).await.unwrap_err();
    assert!(err.contains("127.0.0.1:1"), "{err}");
}

#[test]
fn worker_arguments_round_trip() {
    let p = plan(&[
        "profile-pool",
        "--clients",
        "3",
        "--write-concern",
        "w=1,j=false",
        "--processes",
        "2",
    ]);
    let a = workload::worker_args(&p, "mongodb://x", 10, 5);
    // The first argument stands where the binary name would be.
    let w = Cli::try_parse_from(a.iter().map(String::as_str))
        .unwrap()
        .a
        .plan()
        .unwrap();
    assert_eq!(a[0], "bench");
    assert!(w.worker);
    assert_eq!(
        (w.docs, w.worker_offset, w.clients, w.processes),
        (10, 5, 3, 1)
    );
    assert_eq!(w.write_concern, p.write_concern);
    assert_eq!(w.collection, p.collection);
}

#[test]
fn size_on_disk_counts_indexes_when_the_target_reports_them() {
    use bson::doc;
    let mongod =
        doc! {"objects": 10_i64, "storageSize": 4096.0, "indexSize": 2048.0, "totalSize": 6144.0};
    assert_eq!(
        workload::size_and_objects(&mongod),
        (Some(6144.0), Some(10.0))
    );
    // An older server without `totalSize`.
    let old = doc! {"objects": 10, "storageSize": 4096};
    assert_eq!(workload::size_and_objects(&old), (Some(4096.0), Some(10.0)));
    assert_eq!(workload::size_and_objects(&doc! {}), (None, None));
}

/// A URI's password never reaches a report or an error: the target's label
/// (every table, JSON report and progress bar shows it) and a failed
/// connection's message carry `***` in its place.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn password_is_redacted_in_labels_and_errors() {
    let uri =
        "mongodb://bench:secret-pw@127.0.0.1:1/?authSource=admin&serverSelectionTimeoutMS=200";
    let mut r = Responders::default();
    let t = resolve(uri, &mut r).await.unwrap();
    assert_eq!(t.uri, uri, "the driver still gets the password");
    assert!(!t.label.contains("secret-pw"), "{}", t.label);
    assert!(t.label.contains("bench:***@127.0.0.1:1"), "{}", t.label);
    let p = plan(&["profile-single", "--uri", uri, "--docs", "10"]);
    let err = run_plan(&p, false).await.unwrap_err();
    assert!(!err.contains("secret-pw"), "{err}");
    assert!(err.contains("bench:***@"), "{err}");
}
