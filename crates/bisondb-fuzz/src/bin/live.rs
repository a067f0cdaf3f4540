//! `bisondb-fuzz-live`: random valid commands against a live server, checking
//! its invariants.
//!
//! ```text
//! bisondb-fuzz-live --server target/debug/bisondb [--engine lsm|inMemory]
//! bisondb-fuzz-live --uri mongodb://127.0.0.1:27017 [--pid PID]
//!     [--seconds S] [--iterations N] [--seed X] [--workers K] [--rss-limit-mb M]
//! ```
//! With `--server` it starts the server itself on a free port and a fresh
//! dbpath (and reads its log); with `--uri` it uses a running one (the server's
//! RSS is then read only when `--pid` names its process).
//!
//! `--workers` tasks each send find, aggregate, update, insert, delete,
//! createIndexes, distinct, count (and getMore/killCursors on the cursors they
//! open) over a few collections of one database, each command with a random
//! `maxTimeMS` or none. Invariants, any breach of which fails the run:
//! - no command panics (a reply "command '...' panicked", or a panic in the log);
//! - no command outlives its `maxTimeMS` by more than `--overrun-ms` (the
//!   largest overrun is printed as a figure);
//! - no command hangs: none without `maxTimeMS` takes over 60 s;
//! - the server's RSS stays under `--rss-limit-mb`;
//! - afterwards `validate` (full) is clean on every collection and the server
//!   still answers.
//!
//! It prints its count of commands, time, errors by code and the figures.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::{Child, Command, ExitCode, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use mongodb::options::ClientOptions;
use mongodb::{Client, Database};
use rand::rngs::SmallRng;
use rand::{Rng, SeedableRng};

const DB: &str = "fuzzlive";
const COLLS: &[&str] = &["c0", "c1", "c2"];
const FIELDS: &[&str] = &["a", "b", "c", "a.b", "arr", "tags", "n", "s", "d", "x.y"];

struct Opts {
    server: Option<PathBuf>,
    engine: Option<String>,
    uri: Option<String>,
    pid: Option<u32>,
    seconds: Option<f64>,
    iterations: Option<u64>,
    seed: u64,
    workers: usize,
    rss_limit_mb: u64,
    overrun_ms: u64,
}

fn parse_args() -> Result<Opts, String> {
    let mut o = Opts {
        server: None,
        engine: None,
        uri: None,
        pid: None,
        seconds: None,
        iterations: None,
        seed: 1,
        workers: 4,
        rss_limit_mb: 2048,
        overrun_ms: 1000,
    };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let v = args.get(i + 1).cloned().ok_or("missing value")?;
        let bad = |_| format!("bad value for {}", args[i]);
        match args[i].as_str() {
            "--server" => o.server = Some(PathBuf::from(v)),
            "--engine" => o.engine = Some(v),
            "--uri" => o.uri = Some(v),
            "--pid" => o.pid = Some(v.parse().map_err(bad)?),
            "--seconds" => o.seconds = Some(v.parse().map_err(|_| "bad --seconds")?),
            "--iterations" => o.iterations = Some(v.parse().map_err(bad)?),
            "--seed" => o.seed = v.parse().map_err(bad)?,
            "--workers" => o.workers = v.parse().map_err(bad)?,
            "--rss-limit-mb" => o.rss_limit_mb = v.parse().map_err(bad)?,
            "--overrun-ms" => o.overrun_ms = v.parse().map_err(bad)?,
            other => return Err(format!("unknown argument {other}")),
        }
        i += 2;
    }
    if o.server.is_none() == o.uri.is_none() {
        return Err("give exactly one of --server and --uri".into());
    }
    if o.seconds.is_none() && o.iterations.is_none() {
        o.seconds = Some(60.0);
    }
    Ok(o)
}

/// The server this run started (killed when dropped).
struct Started {
    child: Child,
    dir: PathBuf,
    log: PathBuf,
}

impl Drop for Started {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(self.dir.join("db"));
    }
}

fn free_port() -> std::io::Result<u16> {
    Ok(std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port())
}

fn start_server(bin: &PathBuf, engine: Option<&str>) -> Result<(Started, String), String> {
    let dir = std::env::temp_dir().join(format!("bisondb-fuzz-live-{}", std::process::id()));
    let db = dir.join("db");
    std::fs::create_dir_all(&db).map_err(|e| e.to_string())?;
    let port = free_port().map_err(|e| e.to_string())?;
    let log = dir.join("server.log");
    let out = std::fs::File::create(&log).map_err(|e| e.to_string())?;
    let err = out.try_clone().map_err(|e| e.to_string())?;
    let mut cmd = Command::new(bin);
    cmd.arg("--port")
        .arg(port.to_string())
        .arg("--bind_ip")
        .arg("127.0.0.1")
        .arg("--dbpath")
        .arg(&db)
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err);
    if let Some(e) = engine {
        cmd.arg("--storageEngine").arg(e);
    }
    let child = cmd.spawn().map_err(|e| format!("{}: {e}", bin.display()))?;
    Ok((
        Started { child, dir, log },
        format!("mongodb://127.0.0.1:{port}/?directConnection=true"),
    ))
}

fn rss_mb(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = s.lines().find(|l| l.starts_with("VmRSS:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb / 1024)
}

// -- random valid commands ------------------------------------------------------

fn value(r: &mut SmallRng) -> Bson {
    match r.random_range(0..10) {
        0..=3 => Bson::Int32(r.random_range(-5..50)),
        4 => Bson::Double(f64::from(r.random_range(-50..500)) / 10.0),
        5 => Bson::String(["x", "y", "zz", "", "abc"][r.random_range(0..5)].into()),
        6 => Bson::Null,
        7 => Bson::Boolean(r.random()),
        8 => Bson::Int64(r.random_range(-5..50)),
        _ => Bson::Array(
            (0..r.random_range(0..4))
                .map(|_| Bson::Int32(r.random_range(0..10)))
                .collect(),
        ),
    }
}

fn pick(r: &mut SmallRng, xs: &[&'static str]) -> &'static str {
    xs[r.random_range(0..xs.len())]
}

fn field(r: &mut SmallRng) -> &'static str {
    FIELDS[r.random_range(0..FIELDS.len())]
}

fn predicate(r: &mut SmallRng) -> Bson {
    match r.random_range(0..12) {
        0..=2 => value(r),
        3 => Bson::Document(doc! {"$gt": value(r)}),
        4 => Bson::Document(doc! {"$gte": value(r), "$lt": value(r)}),
        5 => Bson::Document(
            doc! {"$in": (0..r.random_range(0..20)).map(|_| value(r)).collect::<Vec<_>>()},
        ),
        6 => Bson::Document(doc! {"$exists": r.random::<bool>()}),
        7 => Bson::Document(doc! {"$ne": value(r)}),
        8 => Bson::Document(doc! {"$type": pick(r, &["string", "int", "array", "null", "double"])}),
        9 => {
            Bson::Document(doc! {"$regex": pick(r, &["^a", "b", "z+$", "(x|y)"]), "$options": "i"})
        }
        10 => Bson::Document(doc! {"$elemMatch": {"$gt": r.random_range(0..10)}}),
        _ => Bson::Document(doc! {"$size": r.random_range(0..4)}),
    }
}

fn filter(r: &mut SmallRng) -> Document {
    let mut f = Document::new();
    match r.random_range(0..8) {
        0 => {}
        1 => {
            let n = r.random_range(1..4);
            let arms: Vec<Bson> = (0..n)
                .map(|_| Bson::Document(doc! {field(r): predicate(r)}))
                .collect();
            f.insert(if r.random() { "$or" } else { "$and" }, arms);
        }
        2 => {
            f.insert("$expr", doc! {"$gt": [format!("${}", field(r)), value(r)]});
        }
        _ => {
            for _ in 0..r.random_range(1..3) {
                f.insert(field(r), predicate(r));
            }
        }
    }
    f
}

fn stored_doc(r: &mut SmallRng) -> Document {
    let mut d = doc! {"a": value(r), "n": r.random_range(0..1000)};
    if r.random() {
        d.insert("b", value(r));
    }
    if r.random() {
        d.insert(
            "arr",
            (0..r.random_range(0..6))
                .map(|_| value(r))
                .collect::<Vec<_>>(),
        );
    }
    if r.random_ratio(1, 3) {
        d.insert("s", "s".repeat(r.random_range(0..200)));
    }
    if r.random_ratio(1, 4) {
        d.insert("x", doc! {"y": value(r)});
    }
    if r.random_ratio(1, 4) {
        d.insert("tags", ["p", "q", "r"][..r.random_range(0..4)].to_vec());
    }
    d
}

fn sort(r: &mut SmallRng) -> Document {
    let mut s = Document::new();
    for _ in 0..r.random_range(1..3) {
        s.insert(field(r), if r.random() { 1 } else { -1 });
    }
    s
}

fn update_doc(r: &mut SmallRng) -> Bson {
    if r.random_ratio(1, 6) {
        return Bson::Array(vec![Bson::Document(
            doc! {"$set": {"b": {"$add": [{"$ifNull": ["$n", 0]}, 1]}}},
        )]);
    }
    let mut u = Document::new();
    match r.random_range(0..7) {
        0 => u.insert("$set", doc! {field(r): value(r)}),
        1 => u.insert("$inc", doc! {"n": r.random_range(-3..4)}),
        2 => u.insert("$push", doc! {"arr": {"$each": [value(r)], "$slice": -10}}),
        3 => u.insert("$unset", doc! {field(r): ""}),
        4 => u.insert("$addToSet", doc! {"tags": pick(r, &["p", "q", "r", "s"])}),
        5 => u.insert("$pull", doc! {"arr": {"$gt": r.random_range(0..10)}}),
        _ => u.insert("$max", doc! {"n": r.random_range(0..1000)}),
    };
    Bson::Document(u)
}

fn stage(r: &mut SmallRng) -> Document {
    let f = field(r);
    match r.random_range(0..13) {
        0 => doc! {"$match": filter(r)},
        1 => doc! {"$group": {"_id": format!("${f}"), "n": {"$sum": 1}, "m": {"$max": "$n"}}},
        2 => doc! {"$sort": sort(r)},
        3 => doc! {"$project": {"a": 1, "n": 1, "t": {"$multiply": [{"$ifNull": ["$n", 0]}, 2]}}},
        4 => doc! {"$unwind": {"path": "$arr", "preserveNullAndEmptyArrays": r.random::<bool>()}},
        5 => doc! {"$limit": r.random_range(1..100)},
        6 => doc! {"$skip": r.random_range(0..50)},
        7 => {
            doc! {"$lookup": {"from": COLLS[r.random_range(0..COLLS.len())], "localField": "a", "foreignField": "a", "as": "j"}}
        }
        8 => doc! {"$facet": {"x": [{"$count": "k"}], "y": [{"$sortByCount": "$a"}]}},
        9 => doc! {"$bucketAuto": {"groupBy": "$n", "buckets": r.random_range(1..6)}},
        10 => doc! {"$count": "k"},
        11 => doc! {"$addFields": {"z": {"$concat": [{"$toString": "$n"}, "-"]}}},
        _ => doc! {"$group": {"_id": null, "all": {"$push": "$n"}, "avg": {"$avg": "$n"}}},
    }
}

const INDEXES: &[(&str, i32)] = &[
    ("a", 1),
    ("n", -1),
    ("b", 1),
    ("a.b", 1),
    ("arr", 1),
    ("tags", 1),
];

fn command(r: &mut SmallRng) -> (Document, &'static str) {
    let coll = COLLS[r.random_range(0..COLLS.len())];
    let (mut cmd, kind) = match r.random_range(0..16) {
        0..=3 => {
            let mut c = doc! {"find": coll, "filter": filter(r)};
            if r.random() {
                c.insert("sort", sort(r));
            }
            if r.random() {
                c.insert("limit", r.random_range(0..200));
            }
            if r.random_ratio(1, 3) {
                c.insert("skip", r.random_range(0..100));
            }
            if r.random_ratio(1, 3) {
                c.insert("projection", doc! {"a": 1, "n": 1});
            }
            c.insert("batchSize", r.random_range(1..300));
            (c, "find")
        }
        4..=6 => {
            let stages: Vec<Document> = (0..r.random_range(1..5)).map(|_| stage(r)).collect();
            (
                doc! {"aggregate": coll, "pipeline": stages, "cursor": {"batchSize": r.random_range(1..300)}, "allowDiskUse": r.random::<bool>()},
                "aggregate",
            )
        }
        7 | 8 => {
            let u = doc! {"q": filter(r), "u": update_doc(r), "multi": r.random::<bool>(), "upsert": r.random_ratio(1, 5)};
            (doc! {"update": coll, "updates": [u]}, "update")
        }
        9 | 10 => {
            let docs: Vec<Document> = (0..r.random_range(1..20)).map(|_| stored_doc(r)).collect();
            (
                doc! {"insert": coll, "documents": docs, "ordered": r.random::<bool>()},
                "insert",
            )
        }
        11 => (
            doc! {"delete": coll, "deletes": [{"q": filter(r), "limit": r.random_range(0..2)}]},
            "delete",
        ),
        12 => {
            let (f, dir) = INDEXES[r.random_range(0..INDEXES.len())];
            let mut key = doc! {f: dir};
            if r.random() {
                let (g, d2) = INDEXES[r.random_range(0..INDEXES.len())];
                if g != f {
                    key.insert(g, d2);
                }
            }
            let name = key
                .iter()
                .map(|(k, v)| format!("{k}_{v}"))
                .collect::<Vec<_>>()
                .join("_");
            (
                doc! {"createIndexes": coll, "indexes": [{"key": key, "name": name, "sparse": r.random_ratio(1, 4)}]},
                "createIndexes",
            )
        }
        13 => (
            doc! {"distinct": coll, "key": field(r), "query": filter(r)},
            "distinct",
        ),
        14 => (doc! {"count": coll, "query": filter(r)}, "count"),
        _ => (
            doc! {"findAndModify": coll, "query": filter(r), "update": update_doc(r), "new": r.random::<bool>()},
            "findAndModify",
        ),
    };
    if r.random_ratio(3, 4) {
        let ms = match r.random_range(0..4) {
            0 => r.random_range(1..5),
            1 => r.random_range(5..100),
            _ => r.random_range(100..3000),
        };
        cmd.insert("maxTimeMS", ms);
    }
    (cmd, kind)
}

// -- the run ------------------------------------------------------------------

#[derive(Default)]
struct Stats {
    by_kind: BTreeMap<&'static str, u64>,
    errors: BTreeMap<String, u64>,
    findings: Vec<String>,
    max_overrun_ms: f64,
    max_overrun_cmd: String,
    slowest_unbounded_ms: f64,
}

async fn worker(
    db: Database,
    seed: u64,
    stop: Arc<AtomicBool>,
    count: Arc<AtomicU64>,
    limit: Option<u64>,
    stats: Arc<Mutex<Stats>>,
    overrun_limit: f64,
) {
    let mut r = SmallRng::seed_from_u64(seed);
    while !stop.load(Ordering::Relaxed) {
        let n = count.fetch_add(1, Ordering::Relaxed);
        if limit.is_some_and(|l| n >= l) {
            break;
        }
        let (cmd, kind) = command(&mut r);
        let max_time = cmd.get_i32("maxTimeMS").ok().map(f64::from);
        let t0 = Instant::now();
        let res = tokio::time::timeout(Duration::from_secs(60), db.run_command(cmd.clone())).await;
        let ms = t0.elapsed().as_secs_f64() * 1e3;
        let reply = {
            let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
            *st.by_kind.entry(kind).or_default() += 1;
            let reply = match res {
                Err(_) => {
                    st.findings.push(format!("hang: no reply in 60 s to {cmd}"));
                    stop.store(true, Ordering::Relaxed);
                    None
                }
                Ok(Err(e)) => {
                    let text = e.to_string();
                    let code = match *e.kind {
                        mongodb::error::ErrorKind::Command(ref c) => {
                            format!("{} {}", c.code, c.code_name)
                        }
                        mongodb::error::ErrorKind::Write(_) => "write error".to_string(),
                        _ => format!("client: {}", text.chars().take(80).collect::<String>()),
                    };
                    if text.contains("panicked") {
                        st.findings.push(format!("panic: {text} on {cmd}"));
                    }
                    *st.errors.entry(code).or_default() += 1;
                    None
                }
                Ok(Ok(reply)) => Some(reply),
            };
            match max_time {
                Some(limit) => {
                    let over = ms - limit;
                    if over > st.max_overrun_ms {
                        st.max_overrun_ms = over;
                        st.max_overrun_cmd = format!("{kind} maxTimeMS {limit} took {ms:.0} ms");
                    }
                    if over > overrun_limit {
                        st.findings
                            .push(format!("maxTimeMS {limit} overrun: {ms:.0} ms for {cmd}"));
                    }
                }
                None => st.slowest_unbounded_ms = st.slowest_unbounded_ms.max(ms),
            }
            reply
        };
        // Write errors come back in the reply of a successful command.
        if let Some(reply) = &reply {
            if let Ok(we) = reply.get_array("writeErrors") {
                for e in we {
                    if let Bson::Document(e) = e {
                        let msg = e.get_str("errmsg").unwrap_or_default();
                        let code = e.get_i32("code").unwrap_or_default();
                        let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
                        if msg.contains("panicked") {
                            st.findings.push(format!("panic: {msg} on {cmd}"));
                        }
                        *st.errors.entry(format!("writeError {code}")).or_default() += 1;
                    }
                }
            }
            // Follow an open cursor once, then close it.
            if let Ok(c) = reply.get_document("cursor") {
                let id = c.get_i64("id").unwrap_or(0);
                if id != 0 {
                    let coll = cmd
                        .get_str("find")
                        .or_else(|_| cmd.get_str("aggregate"))
                        .unwrap_or("c0")
                        .to_string();
                    if r.random() {
                        let gm = doc! {"getMore": id, "collection": &coll, "batchSize": r.random_range(1..500), "maxTimeMS": r.random_range(1..2000)};
                        if let Err(e) = db.run_command(gm).await {
                            if e.to_string().contains("panicked") {
                                let mut st = stats.lock().unwrap_or_else(|e| e.into_inner());
                                st.findings.push(format!("panic in getMore: {e}"));
                            }
                        }
                    }
                    let _ = db
                        .run_command(doc! {"killCursors": &coll, "cursors": [id]})
                        .await;
                }
            }
        }
    }
}

async fn check_validate(db: &Database, findings: &mut Vec<String>) -> u64 {
    let mut checked = 0;
    for coll in COLLS {
        match db.run_command(doc! {"validate": *coll, "full": true}).await {
            Ok(r) => {
                checked += 1;
                if !r.get_bool("valid").unwrap_or(false) {
                    findings.push(format!("validate {coll}: {r}"));
                }
            }
            Err(e) => findings.push(format!("validate {coll} failed: {e}")),
        }
    }
    checked
}

async fn run(o: Opts) -> Result<bool, String> {
    let mut started = None;
    let (uri, pid) = match (&o.server, &o.uri) {
        (Some(bin), _) => {
            let (s, uri) = start_server(bin, o.engine.as_deref())?;
            let pid = s.child.id();
            started = Some(s);
            (uri, Some(pid))
        }
        (None, Some(uri)) => (uri.clone(), o.pid),
        (None, None) => return Err("no server".into()),
    };
    let mut opts = ClientOptions::parse(&uri)
        .await
        .map_err(|e| e.to_string())?;
    opts.max_pool_size = Some(u32::try_from(o.workers).unwrap_or(4) + 2);
    let client = Client::with_options(opts).map_err(|e| e.to_string())?;
    let db = client.database(DB);
    // Wait for the server, then start from known collections.
    let t0 = Instant::now();
    loop {
        match db.run_command(doc! {"ping": 1}).await {
            Ok(_) => break,
            Err(e) if t0.elapsed() > Duration::from_secs(60) => return Err(e.to_string()),
            Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
        }
    }
    db.drop().await.map_err(|e| e.to_string())?;
    let mut r = SmallRng::seed_from_u64(o.seed);
    for coll in COLLS {
        let docs: Vec<Document> = (0..500).map(|_| stored_doc(&mut r)).collect();
        db.run_command(doc! {"insert": *coll, "documents": docs})
            .await
            .map_err(|e| e.to_string())?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let count = Arc::new(AtomicU64::new(0));
    let stats = Arc::new(Mutex::new(Stats::default()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for w in 0..o.workers {
        tasks.push(tokio::spawn(worker(
            db.clone(),
            o.seed.wrapping_mul(1000).wrapping_add(w as u64),
            stop.clone(),
            count.clone(),
            o.iterations,
            stats.clone(),
            o.overrun_ms as f64,
        )));
    }
    let mut peak_rss = 0;
    let mut rss_finding = None;
    while !tasks.iter().all(|t| t.is_finished()) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(p) = pid {
            match rss_mb(p) {
                Some(m) => {
                    peak_rss = peak_rss.max(m);
                    if m > o.rss_limit_mb {
                        rss_finding =
                            Some(format!("server RSS {m} MiB over {} MiB", o.rss_limit_mb));
                        stop.store(true, Ordering::Relaxed);
                    }
                }
                None => {
                    rss_finding = Some("the server process is gone".to_string());
                    stop.store(true, Ordering::Relaxed);
                }
            }
        }
        if o.seconds
            .is_some_and(|s| start.elapsed().as_secs_f64() >= s)
        {
            stop.store(true, Ordering::Relaxed);
        }
    }
    for t in tasks {
        let _ = t.await;
    }
    let elapsed = start.elapsed();
    let mut st = std::mem::take(&mut *stats.lock().unwrap_or_else(|e| e.into_inner()));
    if let Some(f) = rss_finding {
        st.findings.push(f);
    }
    let validated = check_validate(&db, &mut st.findings).await;
    if db.run_command(doc! {"ping": 1}).await.is_err() {
        st.findings.push("the server no longer answers ping".into());
    }
    if let Some(s) = &started {
        let log = std::fs::read_to_string(&s.log).unwrap_or_default();
        for line in log.lines().filter(|l| l.contains("panicked")) {
            st.findings.push(format!("log: {line}"));
        }
    }
    let total: u64 = st.by_kind.values().sum();
    println!(
        "live: {total} commands in {:.1} s ({:.0}/s), {} workers, seed {}",
        elapsed.as_secs_f64(),
        total as f64 / elapsed.as_secs_f64().max(1e-9),
        o.workers,
        o.seed
    );
    println!("  by command: {:?}", st.by_kind);
    println!("  errors: {:?}", st.errors);
    println!(
        "  largest maxTimeMS overrun: {:.0} ms ({}); slowest command without maxTimeMS: {:.0} ms",
        st.max_overrun_ms, st.max_overrun_cmd, st.slowest_unbounded_ms
    );
    match pid {
        Some(_) => println!(
            "  peak server RSS: {peak_rss} MiB (limit {} MiB)",
            o.rss_limit_mb
        ),
        None => println!("  server RSS not read (no --pid)"),
    }
    println!("  validate: {validated} collections checked");
    for f in &st.findings {
        println!("  FINDING: {f}");
    }
    Ok(st.findings.is_empty())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("bisondb-fuzz-live: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("bisondb-fuzz-live: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(run(o)) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::FAILURE,
        Err(e) => {
            eprintln!("bisondb-fuzz-live: {e}");
            ExitCode::FAILURE
        }
    }
}
