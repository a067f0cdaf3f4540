//! Results of runs and their presentation: the human table, the JSON document, and the
//! medians and ratio of a comparison.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

use crate::args::ClientKind;

/// Latency summary in microseconds, from an HDR histogram (3 significant digits).
#[derive(Clone, Copy, Debug, Default, Serialize, Deserialize, PartialEq)]
pub struct Latency {
    pub p50_us: u64,
    pub p95_us: u64,
    pub p99_us: u64,
    pub max_us: u64,
    pub mean_us: f64,
}

impl Latency {
    pub fn from_histogram(h: &Histogram<u64>) -> Latency {
        if h.is_empty() {
            return Latency::default();
        }
        Latency {
            p50_us: h.value_at_quantile(0.50),
            p95_us: h.value_at_quantile(0.95),
            p99_us: h.value_at_quantile(0.99),
            max_us: h.max(),
            mean_us: h.mean(),
        }
    }
}

/// Timing of one aggregation pipeline of `timeseries-aggregate`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct QueryTime {
    pub name: String,
    pub groups: u64,
    pub ms: f64,
}

/// One run of one workload against one target.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    pub workload: String,
    /// The target as given (`wire-limit`, or the URI).
    pub target: String,
    /// The client that ran it.
    #[serde(default = "rust_client")]
    pub client: ClientKind,
    /// The client's CPU microseconds per document over the timed part (this
    /// process and the workers or script it waited for).
    #[serde(default)]
    pub client_cpu_us_per_doc: Option<f64>,
    /// The server's CPU microseconds per document over the timed part, when
    /// its pid is known (`--server-pid`, wire-limit-process).
    #[serde(default)]
    pub server_cpu_us_per_doc: Option<f64>,
    /// Documents inserted (for timeseries-aggregate: documents in the collection).
    pub docs: u64,
    /// Commands timed: inserts, batches or pipelines.
    pub ops: u64,
    pub clients: usize,
    pub processes: usize,
    pub seconds: f64,
    /// Documents per second (for timeseries-aggregate: documents scanned per second).
    pub docs_per_sec: f64,
    /// Latency of one timed command.
    pub latency: Latency,
    /// dbStats totalSize (else storageSize) / objects, when the target reports a size.
    pub bytes_per_doc: Option<f64>,
    /// The database's size on disk: dbStats totalSize, else storageSize.
    pub storage_size: Option<f64>,
    pub objects: Option<f64>,
    pub queries: Vec<QueryTime>,
    /// (seconds since start, documents per second over the preceding interval).
    pub timeline: Vec<(f64, f64)>,
    /// (latency in microseconds, count) as recorded, for the distribution plot and for
    /// merging the histograms of worker processes.
    pub latency_counts: Vec<(u64, u64)>,
}

fn rust_client() -> ClientKind {
    ClientKind::Rust
}

/// Histogram bounds: 1 µs to 1 hour keeps 3 significant digits in a few KiB.
pub fn new_histogram() -> Histogram<u64> {
    // Constant, valid bounds: this cannot fail.
    #[allow(clippy::expect_used)]
    Histogram::new_with_bounds(1, 3_600_000_000, 3).expect("valid histogram bounds")
}

/// Records a duration, clamped into the histogram's range rather than dropped.
pub fn record(h: &mut Histogram<u64>, us: u64) {
    let v = us.clamp(1, h.high());
    let _ = h.record(v);
}

pub fn histogram_counts(h: &Histogram<u64>) -> Vec<(u64, u64)> {
    h.iter_recorded()
        .map(|v| (v.value_iterated_to(), v.count_at_value()))
        .collect()
}

pub fn histogram_from_counts(c: &[(u64, u64)]) -> Histogram<u64> {
    let mut h = new_histogram();
    for &(v, n) in c {
        let _ = h.record_n(v.clamp(1, h.high()), n);
    }
    h
}

/// Medians of a comparison and the ratio B/A of the median throughputs.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Comparison {
    pub a: String,
    pub b: String,
    pub runs: usize,
    pub a_median_docs_per_sec: f64,
    pub b_median_docs_per_sec: f64,
    pub a_median_p50_us: u64,
    pub b_median_p50_us: u64,
    /// Medians of the CPU per document, where measured.
    pub a_median_client_cpu_us: Option<f64>,
    pub b_median_client_cpu_us: Option<f64>,
    pub a_median_server_cpu_us: Option<f64>,
    pub b_median_server_cpu_us: Option<f64>,
    /// b / a: above 1 means B is faster.
    pub ratio: f64,
}

pub fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(|a, b| a.total_cmp(b));
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    }
}

pub fn compare(a: &str, b: &str, results: &[RunResult]) -> Comparison {
    fn pick<'a>(rs: &'a [RunResult], t: &'a str) -> impl Iterator<Item = &'a RunResult> {
        rs.iter().filter(move |r| r.target == t)
    }
    let ta = median(pick(results, a).map(|r| r.docs_per_sec).collect());
    let tb = median(pick(results, b).map(|r| r.docs_per_sec).collect());
    let la = median(pick(results, a).map(|r| r.latency.p50_us as f64).collect());
    let lb = median(pick(results, b).map(|r| r.latency.p50_us as f64).collect());
    let cpu = |t: &str, f: fn(&RunResult) -> Option<f64>| {
        let v: Vec<f64> = pick(results, t).filter_map(f).collect();
        (!v.is_empty()).then(|| median(v))
    };
    Comparison {
        a_median_client_cpu_us: cpu(a, |r| r.client_cpu_us_per_doc),
        b_median_client_cpu_us: cpu(b, |r| r.client_cpu_us_per_doc),
        a_median_server_cpu_us: cpu(a, |r| r.server_cpu_us_per_doc),
        b_median_server_cpu_us: cpu(b, |r| r.server_cpu_us_per_doc),
        a: a.to_string(),
        b: b.to_string(),
        runs: pick(results, a).count(),
        a_median_docs_per_sec: ta,
        b_median_docs_per_sec: tb,
        a_median_p50_us: la as u64,
        b_median_p50_us: lb as u64,
        ratio: if ta > 0.0 { tb / ta } else { 0.0 },
    }
}

/// Seed 000's headline for one target (`--with-single`): medians of its
/// profile-single and profile-pool runs and their ratio.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct PoolVsSingle {
    pub target: String,
    pub runs: usize,
    pub single_median_docs_per_sec: f64,
    pub pool_median_docs_per_sec: f64,
    /// pool / single: above 1 means the pool is faster.
    pub ratio: f64,
    pub single_median_client_cpu_us: Option<f64>,
    pub pool_median_client_cpu_us: Option<f64>,
    pub single_median_server_cpu_us: Option<f64>,
    pub pool_median_server_cpu_us: Option<f64>,
}

/// [`PoolVsSingle`] of `target` from the runs of both workloads.
pub fn pool_vs_single(target: &str, results: &[RunResult]) -> PoolVsSingle {
    let of = |w: &str| -> Vec<&RunResult> {
        results
            .iter()
            .filter(|r| r.target == target && r.workload == w)
            .collect()
    };
    let (single, pool) = (of("profile-single"), of("profile-pool"));
    let rate = |rs: &[&RunResult]| median(rs.iter().map(|r| r.docs_per_sec).collect());
    let cpu = |rs: &[&RunResult], f: fn(&RunResult) -> Option<f64>| {
        let v: Vec<f64> = rs.iter().filter_map(|r| f(r)).collect();
        (!v.is_empty()).then(|| median(v))
    };
    let (s, p) = (rate(&single), rate(&pool));
    PoolVsSingle {
        target: target.to_string(),
        runs: pool.len(),
        single_median_docs_per_sec: s,
        pool_median_docs_per_sec: p,
        ratio: if s > 0.0 { p / s } else { 0.0 },
        single_median_client_cpu_us: cpu(&single, |r| r.client_cpu_us_per_doc),
        pool_median_client_cpu_us: cpu(&pool, |r| r.client_cpu_us_per_doc),
        single_median_server_cpu_us: cpu(&single, |r| r.server_cpu_us_per_doc),
        pool_median_server_cpu_us: cpu(&pool, |r| r.server_cpu_us_per_doc),
    }
}

/// The whole output of one `bisondb bench` invocation.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    pub results: Vec<RunResult>,
    /// With --compare: medians of the workload's runs (profile-pool's, with
    /// --with-single) and their ratio.
    pub comparison: Option<Comparison>,
    /// With --with-single: pool / single per target.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pool_vs_single: Vec<PoolVsSingle>,
}

impl Report {
    /// JSON without the raw series unless asked: they make the document large.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_else(|e| format!("{{\"error\":\"{e}\"}}"))
    }

    pub fn table(&self) -> String {
        let mut rows = vec![[
            "run",
            "target",
            "docs",
            "seconds",
            "docs/s",
            "p50 µs",
            "p95 µs",
            "p99 µs",
            "max µs",
            "bytes/doc",
            "client cpu µs/doc",
            "server cpu µs/doc",
        ]
        .map(String::from)];
        let multi = self.results.len() > 1;
        // --with-single mixes two workloads: each row names its own.
        let mixed = self
            .results
            .iter()
            .any(|r| Some(&r.workload) != self.results.first().map(|f| &f.workload));
        for (i, r) in self.results.iter().enumerate() {
            // pymongo's script times the run, not each command.
            let timed = !r.latency_counts.is_empty();
            let us = |v: u64| if timed { v.to_string() } else { "-".into() };
            rows.push([
                if multi {
                    format!("{}", i + 1)
                } else {
                    "1".into()
                },
                if mixed {
                    format!("{} {}", r.workload, short_target(&r.target))
                } else {
                    short_target(&r.target)
                },
                r.docs.to_string(),
                format!("{:.2}", r.seconds),
                format!("{:.0}", r.docs_per_sec),
                us(r.latency.p50_us),
                us(r.latency.p95_us),
                us(r.latency.p99_us),
                us(r.latency.max_us),
                optional(r.bytes_per_doc, 1),
                cpu_cell(r.client_cpu_us_per_doc),
                cpu_cell(r.server_cpu_us_per_doc),
            ]);
        }
        let widths: Vec<usize> = (0..rows[0].len())
            .map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0))
            .collect();
        let mut out = String::new();
        if let Some(r) = self.results.first() {
            out.push_str(&format!(
                "{}: {} client(s) x {} process(es), {} driver\n",
                r.workload,
                r.clients,
                r.processes,
                match r.client {
                    ClientKind::Rust => "Rust",
                    ClientKind::Pymongo => "pymongo",
                }
            ));
        }
        for row in &rows {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (s, w))| {
                    if c < 2 {
                        format!("{s:<w$}")
                    } else {
                        format!("{s:>w$}")
                    }
                })
                .collect();
            out.push_str(cells.join("  ").trim_end());
            out.push('\n');
        }
        for r in &self.results {
            for q in &r.queries {
                out.push_str(&format!(
                    "  {} {}: {} groups in {:.1} ms\n",
                    short_target(&r.target),
                    q.name,
                    q.groups,
                    q.ms
                ));
            }
        }
        if let Some(c) = &self.comparison {
            out.push_str(&format!(
                "median of {} runs: A {} {:.0} docs/s (p50 {} µs), B {} {:.0} docs/s (p50 {} µs)\n",
                c.runs,
                short_target(&c.a),
                c.a_median_docs_per_sec,
                c.a_median_p50_us,
                short_target(&c.b),
                c.b_median_docs_per_sec,
                c.b_median_p50_us
            ));
            if c.a_median_client_cpu_us.is_some() || c.a_median_server_cpu_us.is_some() {
                out.push_str(&format!(
                    "median cpu µs/doc: A client {} server {}, B client {} server {}\n",
                    cpu_cell(c.a_median_client_cpu_us),
                    cpu_cell(c.a_median_server_cpu_us),
                    cpu_cell(c.b_median_client_cpu_us),
                    cpu_cell(c.b_median_server_cpu_us),
                ));
            }
            out.push_str(&format!("ratio B/A: {:.3}x\n", c.ratio));
        }
        for v in &self.pool_vs_single {
            out.push_str(&format!(
                "pool / single, {}: {:.0} / {:.0} docs/s = {:.3}x (medians of {}; cpu µs/doc client {} / {}, server {} / {})\n",
                short_target(&v.target),
                v.pool_median_docs_per_sec,
                v.single_median_docs_per_sec,
                v.ratio,
                v.runs,
                cpu_cell(v.pool_median_client_cpu_us),
                cpu_cell(v.single_median_client_cpu_us),
                cpu_cell(v.pool_median_server_cpu_us),
                cpu_cell(v.single_median_server_cpu_us),
            ));
        }
        out
    }
}

/// A measured figure with `decimals`, or `-`.
fn optional(v: Option<f64>, decimals: usize) -> String {
    v.map(|v| format!("{v:.decimals$}"))
        .unwrap_or_else(|| "-".into())
}

/// CPU µs per document with three significant digits at most: batched
/// inserts cost a few µs a document, large documents hundreds.
fn cpu_cell(v: Option<f64>) -> String {
    let decimals = match v {
        Some(v) if v < 10.0 => 2,
        Some(v) if v < 100.0 => 1,
        _ => 0,
    };
    optional(v, decimals)
}

/// Keeps the table narrow: the scheme adds nothing.
fn short_target(t: &str) -> String {
    t.strip_prefix("mongodb://").unwrap_or(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn result(target: &str, rate: f64, p50: u64) -> RunResult {
        RunResult {
            workload: "profile-single".into(),
            target: target.into(),
            client: ClientKind::Rust,
            client_cpu_us_per_doc: None,
            server_cpu_us_per_doc: None,
            docs: 10,
            ops: 10,
            clients: 1,
            processes: 1,
            seconds: 1.0,
            docs_per_sec: rate,
            latency: Latency {
                p50_us: p50,
                p95_us: p50,
                p99_us: p50,
                max_us: p50,
                mean_us: p50 as f64,
            },
            bytes_per_doc: None,
            storage_size: None,
            objects: None,
            queries: vec![],
            timeline: vec![],
            latency_counts: vec![],
        }
    }

    #[test]
    fn medians() {
        for (v, m) in [
            (vec![], 0.0),
            (vec![3.0], 3.0),
            (vec![3.0, 1.0, 2.0], 2.0),
            (vec![4.0, 1.0, 2.0, 3.0], 2.5),
        ] {
            assert_eq!(median(v.clone()), m, "{v:?}");
        }
    }

    #[test]
    fn comparison_ratio_uses_medians() {
        let rs = vec![
            result("a", 100.0, 10),
            result("b", 150.0, 5),
            result("a", 300.0, 20),
            result("b", 200.0, 6),
            result("a", 200.0, 30),
            result("b", 1000.0, 7),
        ];
        let c = compare("a", "b", &rs);
        assert_eq!(c.runs, 3);
        assert_eq!(c.a_median_docs_per_sec, 200.0);
        assert_eq!(c.b_median_docs_per_sec, 200.0);
        assert_eq!(c.ratio, 1.0);
        assert_eq!((c.a_median_p50_us, c.b_median_p50_us), (20, 6));
    }

    #[test]
    fn pool_against_single_per_target() {
        let run = |w: &str, t: &str, rate: f64, cpu: f64| {
            let mut r = result(t, rate, 1);
            r.workload = w.into();
            r.client_cpu_us_per_doc = Some(cpu);
            r
        };
        let rs = vec![
            run("profile-single", "a", 100.0, 10.0),
            run("profile-single", "b", 50.0, 20.0),
            run("profile-pool", "a", 150.0, 11.0),
            run("profile-pool", "b", 40.0, 30.0),
            run("profile-single", "a", 300.0, 12.0),
            run("profile-single", "b", 60.0, 22.0),
            run("profile-pool", "a", 330.0, 13.0),
            run("profile-pool", "b", 80.0, 32.0),
            run("profile-single", "a", 200.0, 14.0),
            run("profile-single", "b", 70.0, 24.0),
            run("profile-pool", "a", 240.0, 15.0),
            run("profile-pool", "b", 84.0, 34.0),
        ];
        let a = pool_vs_single("a", &rs);
        assert_eq!(
            (
                a.runs,
                a.single_median_docs_per_sec,
                a.pool_median_docs_per_sec
            ),
            (3, 200.0, 240.0)
        );
        assert!((a.ratio - 1.2).abs() < 1e-9);
        assert_eq!(
            (a.single_median_client_cpu_us, a.pool_median_client_cpu_us),
            (Some(12.0), Some(13.0))
        );
        assert_eq!(a.pool_median_server_cpu_us, None);
        let b = pool_vs_single("b", &rs);
        assert_eq!(
            (b.single_median_docs_per_sec, b.pool_median_docs_per_sec),
            (60.0, 80.0)
        );
        let pools: Vec<RunResult> = rs
            .iter()
            .filter(|r| r.workload == "profile-pool")
            .cloned()
            .collect();
        let rep = Report {
            comparison: Some(compare("a", "b", &pools)),
            results: rs,
            pool_vs_single: vec![a, b],
        };
        let t = rep.table();
        assert!(
            t.contains("profile-single a") && t.contains("profile-pool b"),
            "{t}"
        );
        assert!(t.contains("pool / single, a: 240 / 200 docs/s = 1.200x (medians of 3; cpu µs/doc client 13.0 / 12.0"), "{t}");
        assert!(
            t.contains("pool / single, b: 80 / 60 docs/s = 1.333x"),
            "{t}"
        );
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
        assert_eq!(v["pool_vs_single"][1]["target"], "b");
        assert_eq!(v["comparison"]["a_median_docs_per_sec"], 240.0);
    }

    #[test]
    fn histogram_round_trip_and_percentiles() {
        let mut h = new_histogram();
        for v in 1..=1000u64 {
            record(&mut h, v);
        }
        record(&mut h, 0); // clamped to 1, not lost
        let l = Latency::from_histogram(&h);
        assert!(l.p50_us <= l.p95_us && l.p95_us <= l.p99_us && l.p99_us <= l.max_us);
        assert!((499..=501).contains(&l.p50_us), "{}", l.p50_us);
        let back = histogram_from_counts(&histogram_counts(&h));
        assert_eq!(back.len(), 1001);
        assert_eq!(Latency::from_histogram(&back), l);
    }

    #[test]
    fn table_and_json_shapes() {
        let mut r = result("mongodb://127.0.0.1:1", 1234.4, 42);
        r.bytes_per_doc = Some(55.55);
        let rep = Report {
            results: vec![r.clone(), result("wire-limit", 2000.0, 10)],
            comparison: Some(compare("mongodb://127.0.0.1:1", "wire-limit", &[r])),
            pool_vs_single: vec![],
        };
        let t = rep.table();
        assert!(
            t.contains("127.0.0.1:1") && !t.contains("mongodb://"),
            "{t}"
        );
        assert!(t.contains("1234"), "{t}");
        assert!(t.contains("55.5") || t.contains("55.6"), "{t}");
        assert!(t.contains("ratio B/A"), "{t}");
        let v: serde_json::Value = serde_json::from_str(&rep.to_json()).unwrap();
        assert_eq!(v["results"][1]["target"], "wire-limit");
        assert_eq!(v["results"][0]["latency"]["p50_us"], 42);
        assert_eq!(v["results"][0]["client"], "rust");
        assert!(v["results"][0]["server_cpu_us_per_doc"].is_null());
        assert!(!t.contains("median cpu"), "no CPU measured: {t}");
    }

    #[test]
    fn cpu_columns_and_pymongo_rows() {
        let mut a = result("mongodb://127.0.0.1:1", 1000.0, 40);
        a.client_cpu_us_per_doc = Some(88.4);
        a.server_cpu_us_per_doc = Some(39.6);
        let mut b = a.clone();
        b.target = "mongodb://127.0.0.1:2".into();
        b.client = ClientKind::Pymongo;
        b.latency_counts.clear();
        b.server_cpu_us_per_doc = Some(91.0);
        a.latency_counts = vec![(40, 10)];
        let rs = vec![a.clone(), b.clone()];
        let rep = Report {
            comparison: Some(compare(&a.target, &b.target, &rs)),
            results: rs,
            pool_vs_single: vec![],
        };
        let t = rep.table();
        assert!(
            t.contains("client cpu µs/doc") && t.contains("server cpu µs/doc"),
            "{t}"
        );
        let rows: Vec<&str> = t.lines().collect();
        // A Rust-client row has latencies; pymongo's has dashes.
        assert!(
            rows[2].contains(" 40 ") && rows[2].contains("88.4") && rows[2].ends_with("39.6"),
            "{t}"
        );
        assert!(rows[3].contains(" - ") && rows[3].ends_with("91.0"), "{t}");
        assert!(
            t.contains("median cpu µs/doc: A client 88.4 server 39.6, B client 88.4 server 91.0"),
            "{t}"
        );
        assert_eq!(cpu_cell(Some(1.234)), "1.23");
        assert_eq!(cpu_cell(Some(1234.4)), "1234");
        let c = rep.comparison.as_ref().unwrap();
        assert_eq!(c.b_median_server_cpu_us, Some(91.0));
        // Results written by an older bench (worker lines) still parse.
        let old = r#"{"workload":"profile-single","target":"t","docs":1,"ops":1,"clients":1,
            "processes":1,"seconds":1.0,"docs_per_sec":1.0,"latency":{"p50_us":1,"p95_us":1,
            "p99_us":1,"max_us":1,"mean_us":1.0},"bytes_per_doc":null,"storage_size":null,
            "objects":null,"queries":[],"timeline":[],"latency_counts":[]}"#;
        let r: RunResult = serde_json::from_str(old).unwrap();
        assert_eq!(
            (r.client, r.server_cpu_us_per_doc),
            (ClientKind::Rust, None)
        );
    }
}
