//! Command-line arguments of `bisondb bench` and their validation into a [`Plan`].
//! Validation is separate from parsing so that impossible combinations (a batch of 0,
//! `--processes` on a read workload) fail before anything connects.

use std::path::PathBuf;

use clap::{Args, ValueEnum};
use mongodb::options::{Acknowledgment, WriteConcern};

/// The seed benchmarks, named after what they replay.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Workload {
    /// Seed 000: one `insert` command per profile document, one client.
    ProfileSingle,
    /// Seed 000: the same documents from N concurrent clients (default 8).
    ProfilePool,
    /// Seed 003: `{created_on, value}` documents in batches of `--batch` (default 5000).
    TimeseriesBatch,
    /// Seed 003's analysis: per-day and per-hour avg/min/max of `value`, over the
    /// collection and over one month.
    TimeseriesAggregate,
    /// Seed 001: one `insert` per document carrying a `--doc-size` string
    /// (default 256 KiB), one client.
    LargeInsert,
    /// Seed 001: the same documents loaded (untimed), then read back with one
    /// `find`, one client.
    LargeRead,
    /// Replica set only: small multi-document transactions (read one account,
    /// update two, commit) through the driver's session API, retried on
    /// TransientTransactionError as `with_transaction` does; `--docs`
    /// transactions (default 10000) from `--clients` tasks.
    Transactions,
    /// Replica set only: change-event latency, from the start of an insert to
    /// the event's delivery on an awaiting change stream; `--docs` inserts
    /// (default 10000), one at a time, one client.
    ChangeEvents,
    /// Read-heavy: `find_one` by a random `_id` over a read set of
    /// `READ_SET_DOCS` profile documents (loaded untimed when the collection
    /// holds another number); `--docs` reads (default 100000) from
    /// `--clients` tasks (default 8). With several hosts in the URI (servers
    /// over one store answering as mongos) the driver spreads the reads.
    PointReads,
}

impl Workload {
    /// The kebab-case name used on the command line and in reports.
    pub fn name(self) -> &'static str {
        match self {
            Workload::ProfileSingle => "profile-single",
            Workload::ProfilePool => "profile-pool",
            Workload::TimeseriesBatch => "timeseries-batch",
            Workload::TimeseriesAggregate => "timeseries-aggregate",
            Workload::LargeInsert => "large-insert",
            Workload::LargeRead => "large-read",
            Workload::Transactions => "transactions",
            Workload::ChangeEvents => "change-events",
            Workload::PointReads => "point-reads",
        }
    }
}

/// The client that runs the workload.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum ClientKind {
    /// The official Rust driver, in this process.
    Rust,
    /// pymongo, as the seeds ran it: `--python` runs `--pymongo-script` once per
    /// run (profile-*, large-*).
    Pymongo,
}

/// The string added to each document of the large-* workloads by default.
pub const LARGE_DOC_SIZE: usize = 256 * 1024;
/// The largest `--doc-size`: the document must stay under the 16 MiB BSON limit.
pub const MAX_DOC_SIZE: usize = 16 * 1024 * 1024 - 4096;

/// `bisondb bench`: replay the seed insert benchmarks against any MongoDB-compatible URI.
#[derive(Args, Clone, Debug)]
#[command(
    after_help = "Targets: a mongodb:// URI (TCP, or a Unix socket such as \
mongodb://%2Ftmp%2Fbisondb-27017.sock), or `wire-limit` / `wire-limit-socket`: a \
built-in responder that acknowledges every command without storing, i.e. the \
client-and-protocol ceiling of this machine; `wire-limit-process` / \
`wire-limit-process-socket`: the same responder in a child process, i.e. the ceiling \
of any server across the process boundary."
)]
pub struct BenchArgs {
    /// What to replay.
    #[arg(value_enum)]
    pub workload: Workload,
    /// Target URI, or wire-limit / wire-limit-socket.
    #[arg(long, default_value = "mongodb://127.0.0.1:27017")]
    pub uri: String,
    /// Documents to insert (timeseries-aggregate: to load when the collection is empty)
    /// [default: 100000 for profile-*, 1000000 for timeseries-*].
    #[arg(long)]
    pub docs: Option<u64>,
    /// Concurrent clients per process [default: 8 for profile-pool, else 1].
    #[arg(long)]
    pub clients: Option<usize>,
    /// Separate OS processes, each inserting its share (as seed 003 did with Python).
    #[arg(long, default_value_t = 1)]
    pub processes: usize,
    /// Documents per insert command for timeseries-*.
    #[arg(long, default_value_t = 5000)]
    pub batch: usize,
    /// Write concern as `w=1,j=true` (w: a number, `majority` or a tag).
    #[arg(long = "write-concern")]
    pub write_concern: Option<String>,
    /// Write concern w (alternative to --write-concern).
    #[arg(long)]
    pub w: Option<String>,
    /// Write concern j (alternative to --write-concern).
    #[arg(long)]
    pub j: Option<bool>,
    /// Drop the collection first (and before every run of a comparison).
    #[arg(long)]
    pub drop: bool,
    /// timeseries-*: load into a time-series collection (`timeField:
    /// "created_on"`; seed 003 has no meta field), created when missing, with
    /// each run's `created_on` values rising through 2012 as a device sends
    /// them rather than in random order.
    #[arg(long)]
    pub timeseries: bool,
    /// Run the same workload against a second target, alternating A B A B.
    #[arg(long)]
    pub compare: Option<String>,
    /// Runs per target with --compare or --with-single.
    #[arg(long, default_value_t = 3)]
    pub runs: usize,
    /// profile-pool: before each pool run on a target, one profile-single run
    /// on it (collection `single`, or `<--collection>_single`), and the
    /// report gives pool / single per target: seed 000's headline. With
    /// --compare: single A, single B, pool A, pool B, each run.
    #[arg(long)]
    pub with_single: bool,
    /// Database to use.
    #[arg(long, default_value = "bench")]
    pub db: String,
    /// Collection to use [default: the workload's seed name: single, multiple, randomData].
    #[arg(long)]
    pub collection: Option<String>,
    /// The client: the Rust driver, or pymongo through `--pymongo-script`.
    #[arg(long, value_enum, default_value = "rust")]
    pub client: ClientKind,
    /// Python interpreter with pymongo installed, for `--client pymongo`.
    #[arg(long, default_value = "python3")]
    pub python: String,
    /// The script `--client pymongo` runs once per run.
    #[arg(long, default_value = "scripts/pymongo_bench.py")]
    pub pymongo_script: PathBuf,
    /// Bytes of string added to each profile-* or large-* document
    /// [default: 262144 for large-*, else 0].
    #[arg(long)]
    pub doc_size: Option<usize>,
    /// The server behind --uri: its CPU time per document is read from
    /// /proc/PID/stat around each run (known without it for wire-limit-process).
    #[arg(long)]
    pub server_pid: Option<u32>,
    /// The server behind --compare, as --server-pid.
    #[arg(long)]
    pub compare_server_pid: Option<u32>,
    /// Print the results as JSON instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Write throughput over time and the latency distribution to this SVG file.
    #[arg(long)]
    pub plot: Option<PathBuf>,
    /// Diagnostic: serve the wire-limit responder on this TCP port (and a Unix socket)
    /// in this process until interrupted, instead of running the workload, so the
    /// ceiling can be measured across processes like a real server.
    #[arg(long, hide = true)]
    pub serve_wire_limit: Option<u16>,
    /// Internal: run as a child of --processes, reporting on stdout.
    #[arg(long, hide = true)]
    pub worker: bool,
    /// Internal: first document id of this worker's share.
    #[arg(long, hide = true, default_value_t = 0)]
    pub worker_offset: u64,
}

/// A validated run description.
#[derive(Clone, Debug)]
pub struct Plan {
    pub workload: Workload,
    pub uri: String,
    pub compare: Option<String>,
    pub docs: u64,
    pub clients: usize,
    pub processes: usize,
    pub batch: usize,
    pub write_concern: Option<WriteConcern>,
    /// The write concern as given, to hand on to worker processes.
    pub write_concern_arg: Option<String>,
    pub drop: bool,
    /// Load into a time-series collection, in time order.
    pub timeseries: bool,
    pub runs: usize,
    /// profile-pool: a profile-single run before each pool run.
    pub with_single: bool,
    pub db: String,
    pub collection: String,
    pub json: bool,
    pub plot: Option<PathBuf>,
    pub worker: bool,
    pub worker_offset: u64,
    pub serve_wire_limit: Option<u16>,
    pub client: ClientKind,
    pub python: String,
    pub pymongo_script: PathBuf,
    /// Bytes of string added to each profile-* or large-* document.
    pub doc_size: usize,
    pub server_pid: Option<u32>,
    pub compare_server_pid: Option<u32>,
}

/// Parses `w=1,j=true` (either key optional, any order).
pub fn parse_write_concern(s: &str) -> Result<WriteConcern, String> {
    let mut w = None;
    let mut j = None;
    for part in s.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (k, v) = part
            .split_once('=')
            .ok_or_else(|| format!("--write-concern: expected key=value, got `{part}`"))?;
        match k.trim() {
            "w" => w = Some(v.trim().to_string()),
            "j" => j = Some(parse_bool(v.trim())?),
            other => return Err(format!("--write-concern: unknown key `{other}` (use w, j)")),
        }
    }
    build_write_concern(w.as_deref(), j)
}

fn parse_bool(s: &str) -> Result<bool, String> {
    match s {
        "true" | "1" => Ok(true),
        "false" | "0" => Ok(false),
        _ => Err(format!("j must be true or false, got `{s}`")),
    }
}

fn build_write_concern(w: Option<&str>, j: Option<bool>) -> Result<WriteConcern, String> {
    let mut wc = WriteConcern::default();
    if let Some(w) = w {
        wc.w = Some(match w {
            "" => return Err("w must not be empty".into()),
            "majority" => Acknowledgment::Majority,
            n if n.bytes().all(|b| b.is_ascii_digit()) => Acknowledgment::Nodes(
                n.parse::<u32>()
                    .map_err(|_| format!("w `{n}` is out of range"))?,
            ),
            tag => Acknowledgment::Custom(tag.to_string()),
        });
    }
    wc.journal = j;
    Ok(wc)
}

impl BenchArgs {
    /// Checks the arguments and fills in the workload's defaults.
    pub fn plan(&self) -> Result<Plan, String> {
        let w = self.workload;
        if self.batch == 0 {
            return Err("--batch must be at least 1".into());
        }
        if self.batch > 100_000 {
            return Err("--batch must be at most 100000 (maxWriteBatchSize)".into());
        }
        if self.processes == 0 {
            return Err("--processes must be at least 1".into());
        }
        if self.runs == 0 {
            return Err("--runs must be at least 1".into());
        }
        if self.with_single && w != Workload::ProfilePool {
            return Err("--with-single compares profile-pool with profile-single".into());
        }
        let clients = match (w, self.clients) {
            (_, Some(0)) => return Err("--clients must be at least 1".into()),
            (Workload::ProfileSingle, Some(n)) if n != 1 => {
                return Err("profile-single uses one client; use profile-pool for more".into())
            }
            (Workload::TimeseriesAggregate, Some(n)) if n != 1 => {
                return Err("timeseries-aggregate runs its queries from one client".into())
            }
            (Workload::LargeInsert | Workload::LargeRead | Workload::ChangeEvents, Some(n))
                if n != 1 =>
            {
                return Err(format!("{} uses one client", w.name()))
            }
            (_, Some(n)) => n,
            (Workload::ProfilePool | Workload::PointReads, None) => 8,
            (_, None) => 1,
        };
        if matches!(
            w,
            Workload::TimeseriesAggregate
                | Workload::LargeInsert
                | Workload::LargeRead
                | Workload::Transactions
                | Workload::ChangeEvents
                | Workload::PointReads
        ) && self.processes != 1
        {
            return Err(format!(
                "--processes applies to the insert workloads of many documents, not {}",
                w.name()
            ));
        }
        let large = matches!(w, Workload::LargeInsert | Workload::LargeRead);
        let doc_size = self
            .doc_size
            .unwrap_or(if large { LARGE_DOC_SIZE } else { 0 });
        if doc_size > MAX_DOC_SIZE {
            return Err(format!(
                "--doc-size must be at most {MAX_DOC_SIZE} (the 16 MiB document limit)"
            ));
        }
        if self.timeseries && !w.name().starts_with("timeseries") {
            return Err("--timeseries applies to timeseries-batch and timeseries-aggregate".into());
        }
        let replset = matches!(w, Workload::Transactions | Workload::ChangeEvents);
        let reads = w == Workload::PointReads;
        if self.doc_size.is_some() && (w.name().starts_with("timeseries") || replset || reads) {
            return Err("--doc-size applies to profile-* and large-*".into());
        }
        if self.client == ClientKind::Pymongo {
            if w.name().starts_with("timeseries") || replset || reads {
                return Err("--client pymongo runs profile-* and large-*".into());
            }
            if self.processes != 1 {
                return Err("--client pymongo runs in one process (its pool is threads)".into());
            }
            if self.write_concern.is_some() || self.w.is_some() || self.j.is_some() {
                return Err("--client pymongo uses the URI's write concern".into());
            }
            if self.plot.is_some() {
                return Err("--plot needs the Rust client's latencies".into());
            }
        }
        let docs = self.docs.unwrap_or(match w {
            Workload::ProfileSingle | Workload::ProfilePool | Workload::PointReads => 100_000,
            Workload::LargeInsert | Workload::LargeRead => 300,
            Workload::Transactions | Workload::ChangeEvents => 10_000,
            _ => 1_000_000,
        });
        if docs == 0 {
            return Err("--docs must be at least 1".into());
        }
        let write_concern_arg = match (&self.write_concern, &self.w, self.j) {
            (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                return Err("give either --write-concern or --w/--j, not both".into())
            }
            (Some(s), None, None) => Some(s.clone()),
            (None, None, None) => None,
            (None, w, j) => Some(
                [
                    w.as_ref().map(|w| format!("w={w}")),
                    j.map(|j| format!("j={j}")),
                ]
                .into_iter()
                .flatten()
                .collect::<Vec<_>>()
                .join(","),
            ),
        };
        let write_concern = write_concern_arg
            .as_deref()
            .map(parse_write_concern)
            .transpose()?;
        if self.uri.is_empty() || self.compare.as_deref() == Some("") {
            return Err("a target URI must not be empty".into());
        }
        let collection = self.collection.clone().unwrap_or_else(|| {
            match w {
                Workload::ProfileSingle => "single",
                Workload::ProfilePool => "multiple",
                Workload::LargeInsert | Workload::LargeRead => "large",
                Workload::Transactions => "accounts",
                Workload::ChangeEvents => "events",
                Workload::PointReads => "reads",
                _ => "randomData",
            }
            .to_string()
        });
        Ok(Plan {
            workload: w,
            uri: self.uri.clone(),
            compare: self.compare.clone(),
            docs,
            clients,
            processes: self.processes,
            batch: self.batch,
            write_concern,
            write_concern_arg,
            drop: self.drop,
            timeseries: self.timeseries,
            runs: if self.compare.is_some() || self.with_single {
                self.runs
            } else {
                1
            },
            with_single: self.with_single,
            db: self.db.clone(),
            collection,
            json: self.json,
            plot: self.plot.clone(),
            worker: self.worker,
            worker_offset: self.worker_offset,
            serve_wire_limit: self.serve_wire_limit,
            client: self.client,
            python: self.python.clone(),
            pymongo_script: self.pymongo_script.clone(),
            doc_size,
            server_pid: self.server_pid,
            compare_server_pid: self.compare_server_pid,
        })
    }
}

impl Plan {
    /// The profile-single run that `--with-single` puts before each pool
    /// run: one client, the same documents, its own collection.
    pub fn single_plan(&self) -> Plan {
        let mut p = self.clone();
        p.workload = Workload::ProfileSingle;
        p.clients = 1;
        p.with_single = false;
        p.collection = if p.collection == "multiple" {
            "single".into()
        } else {
            format!("{}_single", p.collection)
        };
        p
    }
}

/// `bisondb bench ARGS` parsed and validated, for the crate's tests.
#[cfg(test)]
pub(crate) fn test_plan(args: &[&str]) -> Result<Plan, String> {
    use clap::Parser;

    #[derive(Parser)]
    struct T {
        #[command(flatten)]
        a: BenchArgs,
    }
    let t = T::try_parse_from(std::iter::once("bench").chain(args.iter().copied()))
        .map_err(|e| e.to_string())?;
    t.a.plan()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Result<Plan, String> {
        test_plan(args)
    }

    #[test]
    fn rejects_bad_combinations() {
        let cases: &[(&[&str], &str)] = &[
            (
                &["timeseries-batch", "--batch", "0"],
                "--batch must be at least 1",
            ),
            (&["timeseries-batch", "--batch", "100001"], "at most 100000"),
            (
                &["profile-pool", "--clients", "0"],
                "--clients must be at least 1",
            ),
            (
                &["profile-single", "--clients", "4"],
                "profile-single uses one client",
            ),
            (
                &["profile-single", "--processes", "0"],
                "--processes must be at least 1",
            ),
            (
                &["timeseries-aggregate", "--processes", "2"],
                "--processes applies",
            ),
            (
                &["profile-single", "--docs", "0"],
                "--docs must be at least 1",
            ),
            (
                &["profile-single", "--compare", "x", "--runs", "0"],
                "--runs must be",
            ),
            (
                &["profile-single", "--write-concern", "w=1", "--j", "true"],
                "either",
            ),
            (&["profile-single", "--write-concern", "x=1"], "unknown key"),
            (
                &["profile-single", "--write-concern", "j=maybe"],
                "true or false",
            ),
            (&["profile-single", "--write-concern", "w1"], "key=value"),
            (&["profile-single", "--w", "99999999999"], "out of range"),
            (&["nosuch"], "invalid value"),
            (&["large-insert", "--clients", "2"], "uses one client"),
            (&["large-read", "--processes", "2"], "not large-read"),
            (&["large-insert", "--doc-size", "16777216"], "at most"),
            (&["timeseries-batch", "--doc-size", "10"], "applies to"),
            (
                &["profile-pool", "--timeseries"],
                "applies to timeseries-batch",
            ),
            (
                &["timeseries-batch", "--client", "pymongo"],
                "runs profile-* and large-*",
            ),
            (
                &["profile-pool", "--client", "pymongo", "--processes", "2"],
                "one process",
            ),
            (
                &["profile-single", "--client", "pymongo", "--w", "1"],
                "write concern",
            ),
            (&["profile-single", "--client", "perl"], "invalid value"),
            (
                &["profile-single", "--with-single"],
                "compares profile-pool",
            ),
        ];
        for (args, want) in cases {
            let err = plan(args).expect_err(&format!("{args:?} should fail"));
            assert!(err.contains(want), "{args:?}: {err}");
        }
    }

    #[test]
    fn defaults_per_workload() {
        let p = plan(&["profile-pool"]).unwrap();
        assert_eq!(
            (p.clients, p.docs, p.collection.as_str()),
            (8, 100_000, "multiple")
        );
        let p = plan(&["timeseries-batch"]).unwrap();
        assert_eq!((p.clients, p.docs, p.batch), (1, 1_000_000, 5000));
        assert_eq!(p.collection, "randomData");
        assert_eq!(p.uri, "mongodb://127.0.0.1:27017");
        assert_eq!(p.runs, 1, "without --compare there is one run");
        let p = plan(&["profile-single", "--compare", "wire-limit"]).unwrap();
        assert_eq!(p.runs, 3);
        assert_eq!((p.client, p.doc_size), (ClientKind::Rust, 0));
        let p = plan(&["large-read", "--client", "pymongo", "--server-pid", "7"]).unwrap();
        assert_eq!((p.docs, p.doc_size, p.clients), (300, LARGE_DOC_SIZE, 1));
        assert_eq!((p.client, p.server_pid), (ClientKind::Pymongo, Some(7)));
        assert_eq!(p.collection, "large");
        let p = plan(&["profile-pool", "--doc-size", "1000"]).unwrap();
        assert_eq!((p.doc_size, p.clients), (1000, 8));
        let p = plan(&["profile-pool", "--with-single", "--runs", "5"]).unwrap();
        assert_eq!((p.runs, p.with_single), (5, true), "runs without --compare");
        let s = p.single_plan();
        assert_eq!(
            (s.workload, s.clients, s.collection.as_str()),
            (Workload::ProfileSingle, 1, "single")
        );
        assert!(!s.with_single);
        let p = plan(&["profile-pool", "--with-single", "--collection", "c"]).unwrap();
        assert_eq!(p.single_plan().collection, "c_single");
    }

    #[test]
    fn write_concern_forms_agree() {
        let a = plan(&["profile-single", "--w", "1", "--j", "true"]).unwrap();
        let b = plan(&["profile-single", "--write-concern", "w=1,j=true"]).unwrap();
        assert_eq!(a.write_concern, b.write_concern);
        let wc = a.write_concern.unwrap();
        assert_eq!(wc.w, Some(Acknowledgment::Nodes(1)));
        assert_eq!(wc.journal, Some(true));
        let m = parse_write_concern("w=majority").unwrap();
        assert_eq!(m.w, Some(Acknowledgment::Majority));
        assert_eq!(m.journal, None);
        assert!(plan(&["profile-single"]).unwrap().write_concern.is_none());
    }

    #[test]
    fn replica_set_workloads() {
        let t = plan(&["transactions", "--clients", "4"]).unwrap();
        assert_eq!(
            (t.workload.name(), t.docs, t.clients, t.collection.as_str()),
            ("transactions", 10_000, 4, "accounts")
        );
        let c = plan(&["change-events", "--docs", "50"]).unwrap();
        assert_eq!(
            (c.workload.name(), c.docs, c.clients, c.collection.as_str()),
            ("change-events", 50, 1, "events")
        );
        for (args, err) in [
            (
                &["change-events", "--clients", "2"][..],
                "change-events uses one client",
            ),
            (
                &["transactions", "--processes", "2"][..],
                "--processes applies",
            ),
            (
                &["change-events", "--doc-size", "10"][..],
                "--doc-size applies",
            ),
            (
                &["transactions", "--client", "pymongo"][..],
                "--client pymongo runs",
            ),
        ] {
            let e = plan(args).unwrap_err();
            assert!(e.contains(err), "{args:?}: {e}");
        }
    }
}
