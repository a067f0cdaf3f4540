//! The workloads: seed documents, the timed loops, worker processes, and the sampler
//! that turns a shared counter into throughput over time and the progress bar.

use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::oid::ObjectId;
use bson::{doc, Bson, DateTime, Document, RawDocumentBuf};
use futures::TryStreamExt;
use hdrhistogram::Histogram;
use indicatif::ProgressBar;
use mongodb::options::{ClientOptions, CollectionOptions};
use mongodb::{Client, Collection, Database};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use tokio::io::{AsyncBufReadExt, BufReader};

use crate::args::{ClientKind, Plan, Workload};
use crate::cpu;
use crate::replset;
use crate::report::{
    histogram_counts, histogram_from_counts, new_histogram, record, Latency, QueryTime, RunResult,
};

/// 2012-01-01T00:00:00Z and 2013-01-01T00:00:00Z in milliseconds: seed 003's date range.
pub const YEAR_2012_MS: (i64, i64) = (1_325_376_000_000, 1_356_998_400_000);
/// How often throughput is sampled for the timeline and the progress bar.
const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// Seed 000's document, field for field.
pub fn profile_doc(id: u64) -> Document {
    sized_profile_doc(id, "")
}

/// Seed 000's document with `value`, a string of `--doc-size` bytes, when
/// `padding` is not empty (seed 001's large values).
pub fn sized_profile_doc(id: u64, padding: &str) -> Document {
    let mut d = doc! {
        "name": "Huidong Tian",
        "title": "PhD",
        "id": i64::try_from(id).unwrap_or(i64::MAX),
        "des": "I am a data scientist focusing on Python and R",
        "other": "As for why the book was created, a theory which has gained considerable interest, although still controversial is Persian imperial authorisation. ",
    };
    if !padding.is_empty() {
        d.insert("value", padding);
    }
    d
}

/// Seed 003's documents as a driver sends them: `_id` (an ObjectId made here, as
/// drivers add one to documents without it), a random instant in 2012 (UTC) and a
/// random value in [0, 1), 57 bytes of BSON each.
///
/// Written straight as bytes, a batch at a time: the generator runs inside the
/// timed loop (as the seed's scripts generated theirs), so whatever it costs is
/// charged to the server under test. Building each document with `rawdoc!` and
/// `ObjectId::new()` (a clock read per document) took 0.2–0.4 µs of the client's
/// 1.6–2.0 µs per document against BisonDB; this takes one clock read per batch.
/// The ObjectIds are those `ObjectId::new()` would give: this process's 5 random
/// bytes and a counter shared by every client task of the process (so `--clients`
/// never repeats an id), with the batch's second as the timestamp.
pub struct TimeseriesDocs {
    process: [u8; 5],
    /// With `in_time_order`: how many documents share 2012.
    ordered_over: Option<u64>,
}

/// The next ObjectId counter of this process, reserved a batch at a time.
fn reserve_counters(n: u32) -> u32 {
    static NEXT: std::sync::LazyLock<std::sync::atomic::AtomicU32> =
        std::sync::LazyLock::new(|| {
            let b = ObjectId::new().bytes();
            std::sync::atomic::AtomicU32::new(u32::from_be_bytes([0, b[9], b[10], b[11]]))
        });
    NEXT.fetch_add(n, Ordering::Relaxed)
}

/// `{_id: ObjectId, created_on: Date, value: double}` in BSON.
const TIMESERIES_DOC_LEN: usize = 4 + (1 + 4 + 12) + (1 + 11 + 8) + (1 + 6 + 8) + 1;

impl TimeseriesDocs {
    pub fn new() -> Self {
        let mut process = [0u8; 5];
        process.copy_from_slice(&ObjectId::new().bytes()[4..9]);
        TimeseriesDocs {
            process,
            ordered_over: None,
        }
    }

    /// Documents whose `created_on` rises with their index: document `i` of
    /// `total` falls in the `i`-th of `total` equal slices of 2012, at a random
    /// time within it (the same year, in the order a device sends them).
    pub fn in_time_order(mut self, total: u64) -> Self {
        self.ordered_over = Some(total.max(1));
        self
    }

    /// `fill` for documents `first..first + n` of the run (their index places
    /// them in time with `in_time_order`).
    pub fn fill_from(
        &mut self,
        rng: &mut impl Rng,
        first: u64,
        n: usize,
        out: &mut Vec<RawDocumentBuf>,
    ) {
        self.fill(rng, n, out);
        let Some(total) = self.ordered_over else {
            return;
        };
        let (lo, hi) = YEAR_2012_MS;
        let step = ((hi - lo) as u64 / total).max(1);
        for (i, d) in out.iter_mut().enumerate() {
            let slot = (first + i as u64).min(total - 1);
            let t = lo + (slot * step + rng.random_range(0..step)) as i64;
            let mut bytes = d.as_bytes().to_vec();
            // created_on's 8 bytes follow `_id` (4 + 17) and its own name (12).
            let at = 4 + 17 + 12;
            bytes[at..at + 8].copy_from_slice(&t.to_le_bytes());
            *d = RawDocumentBuf::from_bytes(bytes).unwrap_or_default();
        }
    }

    /// Replaces `out`'s contents with `n` new documents.
    pub fn fill(&mut self, rng: &mut impl Rng, n: usize, out: &mut Vec<RawDocumentBuf>) {
        let secs = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| u32::try_from(d.as_secs()).unwrap_or(u32::MAX))
            .unwrap_or(0);
        let first = reserve_counters(u32::try_from(n).unwrap_or(u32::MAX));
        out.clear();
        out.extend((0..n).map(|i| self.doc(secs, first.wrapping_add(i as u32), rng)));
    }

    fn doc(&self, secs: u32, counter: u32, rng: &mut impl Rng) -> RawDocumentBuf {
        let (lo, hi) = YEAR_2012_MS;
        // The low 3 bytes, as ObjectId::new() wraps its counter.
        let c = counter.to_be_bytes();
        let mut b = Vec::with_capacity(TIMESERIES_DOC_LEN);
        b.extend_from_slice(&(TIMESERIES_DOC_LEN as i32).to_le_bytes());
        b.extend_from_slice(b"\x07_id\0");
        b.extend_from_slice(&secs.to_be_bytes());
        b.extend_from_slice(&self.process);
        b.extend_from_slice(&c[1..]);
        b.extend_from_slice(b"\x09created_on\0");
        b.extend_from_slice(&rng.random_range(lo..hi).to_le_bytes());
        b.extend_from_slice(b"\x01value\0");
        b.extend_from_slice(&rng.random::<f64>().to_le_bytes());
        b.push(0);
        // The length and the terminator are right by construction, which is all
        // from_bytes checks; an Err is impossible, and an empty document stands in.
        RawDocumentBuf::from_bytes(b).unwrap_or_default()
    }
}

impl Default for TimeseriesDocs {
    fn default() -> Self {
        Self::new()
    }
}

/// Seed 003's analysis: (name, pipeline). Grouping on $year/$month/$dayOfMonth/$hour
/// rather than $dateTrunc keeps the pipelines valid on servers older than 5.0.
pub fn aggregate_pipelines() -> Vec<(&'static str, Vec<Document>)> {
    let day = doc! {
        "year": {"$year": "$created_on"},
        "month": {"$month": "$created_on"},
        "day": {"$dayOfMonth": "$created_on"},
    };
    let mut hour = day.clone();
    hour.insert("hour", doc! {"$hour": "$created_on"});
    let group = |key: &Document| {
        vec![
            doc! {"$group": {
                "_id": key.clone(),
                "count": {"$sum": 1},
                "avg": {"$avg": "$value"},
                "min": {"$min": "$value"},
                "max": {"$max": "$value"},
            }},
            doc! {"$sort": {"_id": 1}},
        ]
    };
    let month = doc! {"$match": {"created_on": {
        "$gte": DateTime::from_millis(1_328_054_400_000), // 2012-02-01
        "$lt": DateTime::from_millis(1_330_560_000_000),  // 2012-03-01
    }}};
    let in_month = |key: &Document| {
        let mut p = vec![month.clone()];
        p.extend(group(key));
        p
    };
    vec![
        ("per-day", group(&day)),
        ("per-hour", group(&hour)),
        ("per-day, February", in_month(&day)),
        ("per-hour, February", in_month(&hour)),
    ]
}

/// A target to run against: its label in reports and the URI the driver connects to.
#[derive(Clone, Debug)]
pub struct Target {
    pub label: String,
    pub uri: String,
    /// The server's process, for its CPU time per document.
    pub server_pid: Option<u32>,
}

/// What a timed phase hands back.
pub(crate) struct Phase {
    pub(crate) docs: u64,
    pub(crate) ops: u64,
    pub(crate) hist: Histogram<u64>,
    pub(crate) queries: Vec<QueryTime>,
}

/// `uri` as reports and errors show it: the password in its user
/// information replaced by `***` (`mongodb://bench:***@host/`), so a table or
/// a JSON report pasted anywhere never carries a credential.
pub fn redact_uri(uri: &str) -> String {
    let Some(scheme_end) = uri.find("://").map(|i| i + 3) else {
        return uri.to_string();
    };
    let rest = &uri[scheme_end..];
    // The authority ends at the path or the options; a password's own `/`,
    // `?` and `@` are percent-encoded, so the last `@` before it ends the
    // user information.
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let Some(at) = rest[..authority_end].rfind('@') else {
        return uri.to_string();
    };
    match rest[..at].find(':') {
        Some(colon) => format!(
            "{}{}:***{}",
            &uri[..scheme_end],
            &rest[..colon],
            &rest[at..]
        ),
        None => uri.to_string(),
    }
}

pub async fn connect(plan: &Plan, uri: &str) -> Result<(Client, Database), String> {
    let shown = redact_uri(uri);
    let mut opts = ClientOptions::parse(uri)
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    opts.app_name = Some("bisondb-bench".into());
    // One connection per concurrent client, so the pool never queues a client.
    let want = u32::try_from(plan.clients).unwrap_or(u32::MAX).max(10);
    opts.max_pool_size = Some(want);
    if opts.server_selection_timeout.is_none() {
        opts.server_selection_timeout = Some(Duration::from_secs(5));
    }
    let client = Client::with_options(opts).map_err(|e| format!("{shown}: {e}"))?;
    let db = client.database(&plan.db);
    // Connect (and handshake) before the clock starts.
    db.run_command(doc! {"ping": 1})
        .await
        .map_err(|e| format!("{shown}: {e}"))?;
    Ok((client, db))
}

fn collection(plan: &Plan, db: &Database) -> Collection<Document> {
    let opts = CollectionOptions::builder()
        .write_concern(plan.write_concern.clone())
        .build();
    db.collection_with_options(&plan.collection, opts)
}

/// Runs the workload once against `target` in this process (or, with
/// `--processes N`, in N children) and measures it.
pub async fn run_once(
    plan: &Plan,
    target: &Target,
    bar: &ProgressBar,
) -> Result<RunResult, String> {
    if plan.client == ClientKind::Pymongo {
        return run_pymongo(plan, target).await;
    }
    let (client, db) = connect(plan, &target.uri).await?;
    let result = measure(plan, target, bar, &db).await;
    // Ending sessions here, while the runtime is alive: a Client dropped during runtime
    // shutdown makes the driver panic in its connection requester.
    client.shutdown().await;
    result
}

async fn measure(
    plan: &Plan,
    target: &Target,
    bar: &ProgressBar,
    db: &Database,
) -> Result<RunResult, String> {
    let coll = collection(plan, db);
    if plan.drop && !plan.worker {
        coll.drop().await.map_err(|e| format!("drop: {e}"))?;
    }
    if plan.timeseries && !plan.worker {
        create_timeseries(db, &plan.collection).await?;
    }
    if plan.workload == Workload::TimeseriesAggregate {
        let have = coll
            .estimated_document_count()
            .await
            .map_err(|e| format!("count: {e}"))?;
        if have == 0 {
            bar.set_prefix("loading");
            let done = Arc::new(AtomicU64::new(0));
            bar.set_length(plan.docs);
            let s = Sampler::start(done.clone(), bar.clone(), false);
            batches(plan, &coll, plan.docs, &done).await?;
            s.stop().await;
        }
    }
    let done = Arc::new(AtomicU64::new(0));
    bar.set_position(0);
    bar.set_prefix(target.label.clone());
    let total = match plan.workload {
        Workload::TimeseriesAggregate => aggregate_pipelines().len() as u64,
        _ => plan.docs,
    };
    bar.set_length(total);
    // The replica-set workloads start from a fresh collection (untimed).
    match plan.workload {
        Workload::Transactions => {
            replset::require_replica_set(db.client()).await?;
            replset::seed_accounts(&coll).await?;
        }
        Workload::ChangeEvents => {
            replset::require_replica_set(db.client()).await?;
            coll.drop().await.map_err(|e| format!("drop: {e}"))?;
        }
        _ => {}
    }
    if plan.workload == Workload::PointReads {
        bar.set_prefix("loading");
        load_read_set(&coll).await?;
        bar.set_prefix(target.label.clone());
    }
    if plan.workload == Workload::LargeRead {
        bar.set_prefix("loading");
        profile(plan, &coll, &Arc::new(AtomicU64::new(0))).await?;
        bar.set_prefix(target.label.clone());
    }
    let sampler = Sampler::start(done.clone(), bar.clone(), plan.worker);
    let (client0, server0) = (
        cpu::own_cpu_secs(),
        target.server_pid.and_then(cpu::process_cpu_secs),
    );
    let start = Instant::now();
    let phase = if plan.processes > 1 && !plan.worker {
        spawn_workers(plan, target, &done).await
    } else {
        match plan.workload {
            Workload::ProfileSingle | Workload::ProfilePool | Workload::LargeInsert => {
                profile(plan, &coll, &done).await
            }
            Workload::TimeseriesBatch => batches(plan, &coll, plan.docs, &done).await,
            Workload::TimeseriesAggregate => aggregate(&coll, &done).await,
            Workload::LargeRead => read_back(plan, &coll, &done).await,
            Workload::Transactions => {
                let retries = Arc::new(AtomicU64::new(0));
                replset::transactions(plan, db.client(), &coll, &done, &retries).await
            }
            Workload::ChangeEvents => replset::change_events(plan, &coll, &done).await,
            Workload::PointReads => point_reads(plan, &coll, &done).await,
        }
    };
    let seconds = start.elapsed().as_secs_f64();
    let (client1, server1) = (
        cpu::own_cpu_secs(),
        target.server_pid.and_then(cpu::process_cpu_secs),
    );
    let timeline = sampler.stop().await;
    let phase = phase?;
    bar.finish_and_clear();
    if plan.workload == Workload::Transactions {
        replset::check_balances(&coll).await?;
    }
    let (storage_size, objects) = if plan.worker {
        (None, None)
    } else {
        db_stats(db).await
    };
    // A time-series collection's objects are its buckets; its size is per
    // measurement, and the measurements are what the collection counts.
    let objects = if plan.timeseries && !plan.worker {
        coll.estimated_document_count()
            .await
            .ok()
            .map(|n| n as f64)
            .or(objects)
    } else {
        objects
    };
    let bytes_per_doc = match (storage_size, objects) {
        (Some(s), Some(o)) if o > 0.0 => Some(s / o),
        _ => None,
    };
    let scanned = if plan.workload == Workload::TimeseriesAggregate {
        phase.docs.saturating_mul(phase.ops)
    } else {
        phase.docs
    };
    Ok(RunResult {
        workload: plan.workload.name().into(),
        target: target.label.clone(),
        client: ClientKind::Rust,
        client_cpu_us_per_doc: cpu::per_doc_us(client0, client1, scanned),
        server_cpu_us_per_doc: cpu::per_doc_us(server0, server1, scanned),
        docs: phase.docs,
        ops: phase.ops,
        clients: plan.clients,
        processes: plan.processes,
        seconds,
        docs_per_sec: if seconds > 0.0 {
            scanned as f64 / seconds
        } else {
            0.0
        },
        latency: Latency::from_histogram(&phase.hist),
        bytes_per_doc,
        storage_size,
        objects,
        queries: phase.queries,
        timeline,
        latency_counts: histogram_counts(&phase.hist),
    })
}

/// How many documents point-reads reads from: small enough to stay cached on
/// every engine, so the figure is the per-read path (wire, command, lookup,
/// and on a shared store its round trips), not the disk.
pub const READ_SET_DOCS: u64 = 10_000;

/// Point-reads' collection: `_id` 0..READ_SET_DOCS, each a profile document;
/// loaded (untimed) unless the collection already holds exactly that many, so
/// the runs of a comparison and the servers over one store share one load.
async fn load_read_set(coll: &Collection<Document>) -> Result<(), String> {
    let have = coll
        .count_documents(doc! {})
        .await
        .map_err(|e| format!("count: {e}"))?;
    if have == READ_SET_DOCS {
        return Ok(());
    }
    coll.drop().await.map_err(|e| format!("drop: {e}"))?;
    let ids: Vec<u64> = (0..READ_SET_DOCS).collect();
    for chunk in ids.chunks(1000) {
        let docs = chunk.iter().map(|&i| {
            let mut d = profile_doc(i);
            d.insert("_id", i64::try_from(i).unwrap_or(i64::MAX));
            d
        });
        coll.insert_many(docs)
            .await
            .map_err(|e| format!("insert: {e}"))?;
    }
    Ok(())
}

/// `plan.docs` `find_one({_id: k})` for random `k` in the read set, from
/// `clients` tasks; a miss is an error (the read set is loaded first).
async fn point_reads(
    plan: &Plan,
    coll: &Collection<Document>,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(plan.clients);
    for task in 0..plan.clients {
        let coll = coll.clone_with_type::<RawDocumentBuf>();
        let (next, done, n) = (next.clone(), done.clone(), plan.docs);
        tasks.push(tokio::spawn(async move {
            let mut rng = StdRng::seed_from_u64(task as u64);
            let mut h = new_histogram();
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let k = rng.random_range(0..READ_SET_DOCS);
                let id = i64::try_from(k).unwrap_or(i64::MAX);
                let t = Instant::now();
                let found = coll
                    .find_one(doc! {"_id": id})
                    .await
                    .map_err(|e| format!("find_one: {e}"))?;
                record(&mut h, t.elapsed().as_micros() as u64);
                if found.is_none() {
                    return Err(format!("find_one: _id {k} of the read set is missing"));
                }
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(h)
        }));
    }
    client_phase(tasks, done).await
}

/// One `insert` per document from `clients` concurrent tasks sharing an id counter.
async fn profile(
    plan: &Plan,
    coll: &Collection<Document>,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(plan.clients);
    for _ in 0..plan.clients {
        let (coll, next, done) = (coll.clone(), next.clone(), done.clone());
        let (n, offset) = (plan.docs, plan.worker_offset);
        let padding = "x".repeat(plan.doc_size);
        tasks.push(tokio::spawn(async move {
            let mut h = new_histogram();
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let d = sized_profile_doc(offset.saturating_add(i), &padding);
                let t = Instant::now();
                coll.insert_one(d)
                    .await
                    .map_err(|e| format!("insert: {e}"))?;
                record(&mut h, t.elapsed().as_micros() as u64);
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(h)
        }));
    }
    client_phase(tasks, done).await
}

/// Seed 001's read: one `find` over the loaded collection, timed to its last
/// document; the latency is the wait for each document (long at each batch).
async fn read_back(
    plan: &Plan,
    coll: &Collection<Document>,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let coll = coll.clone_with_type::<RawDocumentBuf>();
    let mut h = new_histogram();
    let mut cursor = coll.find(doc! {}).await.map_err(|e| format!("find: {e}"))?;
    let mut t = Instant::now();
    let mut n = 0u64;
    while cursor.advance().await.map_err(|e| format!("find: {e}"))? {
        record(&mut h, t.elapsed().as_micros() as u64);
        n += 1;
        done.fetch_add(1, Ordering::Relaxed);
        t = Instant::now();
    }
    if n != plan.docs {
        return Err(format!(
            "find returned {n} documents, expected {}",
            plan.docs
        ));
    }
    Ok(Phase {
        docs: n,
        ops: h.len(),
        hist: h,
        queries: vec![],
    })
}

/// One run through pymongo ([`crate::pymongo`]), with the server's CPU time
/// read around it.
async fn run_pymongo(plan: &Plan, target: &Target) -> Result<RunResult, String> {
    let r = crate::pymongo::run(plan, &target.uri, target.server_pid).await?;
    Ok(RunResult {
        workload: plan.workload.name().into(),
        target: target.label.clone(),
        client: ClientKind::Pymongo,
        client_cpu_us_per_doc: cpu::per_doc_us(Some(0.0), Some(r.client_cpu_secs), r.docs),
        server_cpu_us_per_doc: r
            .server_cpu_secs
            .and_then(|s| cpu::per_doc_us(Some(0.0), Some(s), r.docs)),
        docs: r.docs,
        ops: r.docs,
        clients: r.threads,
        processes: 1,
        seconds: r.secs,
        docs_per_sec: r.docs as f64 / r.secs,
        latency: Latency::default(),
        bytes_per_doc: None,
        storage_size: None,
        objects: None,
        queries: vec![],
        timeline: vec![],
        latency_counts: vec![],
    })
}

/// `docs` time-series documents in `--batch` batches from `clients` tasks; the
/// documents are generated inside the timed loop, as the seed's scripts did.
async fn batches(
    plan: &Plan,
    coll: &Collection<Document>,
    docs: u64,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let batch = plan.batch as u64;
    let ordered = plan.timeseries;
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(plan.clients);
    for _ in 0..plan.clients {
        let coll = coll.clone_with_type::<RawDocumentBuf>();
        let (next, done) = (next.clone(), done.clone());
        tasks.push(tokio::spawn(async move {
            let mut h = new_histogram();
            let mut rng = StdRng::from_rng(&mut rand::rng());
            let mut gen = TimeseriesDocs::new();
            if ordered {
                gen = gen.in_time_order(docs);
            }
            let mut buf = Vec::with_capacity(batch as usize);
            loop {
                let first = next.fetch_add(batch, Ordering::Relaxed);
                if first >= docs {
                    break;
                }
                let n = batch.min(docs - first);
                gen.fill_from(&mut rng, first, n as usize, &mut buf);
                let t = Instant::now();
                coll.insert_many(&buf)
                    .await
                    .map_err(|e| format!("insert: {e}"))?;
                record(&mut h, t.elapsed().as_micros() as u64);
                done.fetch_add(n, Ordering::Relaxed);
            }
            Ok::<_, String>(h)
        }));
    }
    client_phase(tasks, done).await
}

/// The four analysis pipelines, each timed to its last result.
async fn aggregate(coll: &Collection<Document>, done: &Arc<AtomicU64>) -> Result<Phase, String> {
    let docs = coll
        .estimated_document_count()
        .await
        .map_err(|e| format!("count: {e}"))?;
    let mut hist = new_histogram();
    let mut queries = Vec::new();
    for (name, pipeline) in aggregate_pipelines() {
        let t = Instant::now();
        let groups: Vec<Document> = coll
            .aggregate(pipeline)
            .await
            .map_err(|e| format!("aggregate {name}: {e}"))?
            .try_collect()
            .await
            .map_err(|e| format!("aggregate {name}: {e}"))?;
        let el = t.elapsed();
        record(&mut hist, el.as_micros() as u64);
        done.fetch_add(1, Ordering::Relaxed);
        queries.push(QueryTime {
            name: name.into(),
            groups: groups.len() as u64,
            ms: el.as_secs_f64() * 1000.0,
        });
    }
    Ok(Phase {
        docs,
        ops: queries.len() as u64,
        hist,
        queries,
    })
}

/// The phase of client tasks that each timed their commands and counted
/// their documents in `done`: their latencies merged, or the first error.
pub(crate) async fn client_phase(
    tasks: Vec<tokio::task::JoinHandle<Result<Histogram<u64>, String>>>,
    done: &AtomicU64,
) -> Result<Phase, String> {
    let hist = join_histograms(tasks).await?;
    Ok(Phase {
        docs: done.load(Ordering::Relaxed),
        ops: hist.len(),
        hist,
        queries: vec![],
    })
}

pub(crate) async fn join_histograms(
    tasks: Vec<tokio::task::JoinHandle<Result<Histogram<u64>, String>>>,
) -> Result<Histogram<u64>, String> {
    let mut hist = new_histogram();
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(h)) => {
                let _ = hist.add(&h);
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(format!("client task failed: {e}"));
            }
        }
    }
    match first_err {
        Some(e) => Err(e),
        None => Ok(hist),
    }
}

/// Creates `name` as a time-series collection over seed 003's time field,
/// unless it exists (then it must be one).
async fn create_timeseries(db: &Database, name: &str) -> Result<(), String> {
    let listed = db
        .run_command(doc! {"listCollections": 1, "filter": {"name": name}})
        .await
        .map_err(|e| format!("listCollections: {e}"))?;
    let existing = listed
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .ok()
        .and_then(|b| b.first())
        .and_then(|c| c.as_document())
        .map(|c| c.get_str("type").unwrap_or("collection").to_string());
    match existing.as_deref() {
        None => db
            .run_command(doc! {"create": name, "timeseries": {"timeField": "created_on"}})
            .await
            .map(|_| ())
            .map_err(|e| format!("create: {e}")),
        Some("timeseries") => Ok(()),
        Some(other) => Err(format!(
            "--timeseries: {name} exists as a {other}; drop it first (--drop)"
        )),
    }
}

/// The database's size on disk and its object count, when the target reports
/// them (see [`size_and_objects`]).
async fn db_stats(db: &Database) -> (Option<f64>, Option<f64>) {
    match db.run_command(doc! {"dbStats": 1}).await {
        Ok(s) => size_and_objects(&s),
        Err(_) => (None, None),
    }
}

/// From a dbStats reply: the size on disk, `totalSize` (documents and indexes,
/// what `show dbs` prints) or `storageSize` from a target without `totalSize`,
/// and `objects`.
pub(crate) fn size_and_objects(s: &bson::Document) -> (Option<f64>, Option<f64>) {
    let num = |k: &str| match s.get(k) {
        Some(Bson::Int32(v)) => Some(f64::from(*v)),
        Some(Bson::Int64(v)) => Some(*v as f64),
        Some(Bson::Double(v)) => Some(*v),
        _ => None,
    };
    (
        num("totalSize").or_else(|| num("storageSize")),
        num("objects"),
    )
}

/// The executable that re-runs this benchmark as a worker: `BISONDB_BENCH_EXE` when
/// set (tests), else this process's own binary, which has the `bench` subcommand.
pub(crate) fn worker_exe() -> Result<std::path::PathBuf, String> {
    match std::env::var_os("BISONDB_BENCH_EXE") {
        Some(p) => Ok(p.into()),
        None => std::env::current_exe().map_err(|e| format!("cannot find own executable: {e}")),
    }
}

/// Argument list for worker `i` of `plan.processes`, inserting `share` documents.
pub fn worker_args(plan: &Plan, uri: &str, share: u64, offset: u64) -> Vec<String> {
    let mut a = vec![
        "bench".to_string(),
        plan.workload.name().to_string(),
        "--uri".into(),
        uri.to_string(),
        "--docs".into(),
        share.to_string(),
        "--batch".into(),
        plan.batch.to_string(),
        "--db".into(),
        plan.db.clone(),
        "--collection".into(),
        plan.collection.clone(),
        "--worker".into(),
        "--worker-offset".into(),
        offset.to_string(),
    ];
    if plan.workload != Workload::ProfileSingle {
        a.extend(["--clients".into(), plan.clients.to_string()]);
    }
    if let Some(wc) = &plan.write_concern_arg {
        a.extend(["--write-concern".into(), wc.clone()]);
    }
    if plan.timeseries {
        a.push("--timeseries".into());
    }
    a
}

/// Starts `plan.processes` workers, each inserting its share; their progress lines
/// feed `done`, and their histograms are merged.
async fn spawn_workers(
    plan: &Plan,
    target: &Target,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let exe = worker_exe()?;
    let n = plan.processes as u64;
    let mut offset = 0u64;
    let mut tasks = Vec::new();
    for i in 0..n {
        // The first workers take the remainder, as evenly as integers allow.
        let share = plan.docs / n + u64::from(i < plan.docs % n);
        let args = worker_args(plan, &target.uri, share, offset);
        offset += share;
        let mut child = tokio::process::Command::new(&exe)
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start worker {}: {e}", exe.display()))?;
        let stdout = child
            .stdout
            .take()
            .ok_or_else(|| "worker has no stdout".to_string())?;
        let done = done.clone();
        tasks.push(tokio::spawn(async move {
            let mut lines = BufReader::new(stdout).lines();
            let mut last = 0u64;
            let mut result = None;
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(p) = line.strip_prefix("progress ") {
                    if let Ok(p) = p.trim().parse::<u64>() {
                        done.fetch_add(p.saturating_sub(last), Ordering::Relaxed);
                        last = last.max(p);
                    }
                } else if let Some(j) = line.strip_prefix("result ") {
                    result = serde_json::from_str::<RunResult>(j).ok();
                }
            }
            let status = child.wait().await.map_err(|e| e.to_string())?;
            match result {
                Some(r) if status.success() => {
                    done.fetch_add(r.docs.saturating_sub(last), Ordering::Relaxed);
                    Ok(r)
                }
                _ => Err(format!("worker {i} failed ({status})")),
            }
        }));
    }
    let mut hist = new_histogram();
    let mut docs = 0u64;
    let mut first_err = None;
    for t in tasks {
        match t.await {
            Ok(Ok(r)) => {
                docs = docs.saturating_add(r.docs);
                let _ = hist.add(histogram_from_counts(&r.latency_counts));
            }
            Ok(Err(e)) => {
                first_err.get_or_insert(e);
            }
            Err(e) => {
                first_err.get_or_insert(e.to_string());
            }
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    Ok(Phase {
        docs,
        ops: hist.len(),
        hist,
        queries: vec![],
    })
}

/// Samples the shared counter: drives the progress bar, records the timeline, and in
/// a worker prints `progress N` lines for the parent.
struct Sampler {
    stop: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<Vec<(f64, f64)>>,
}

impl Sampler {
    fn start(done: Arc<AtomicU64>, bar: ProgressBar, print: bool) -> Sampler {
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let task = tokio::spawn(async move {
            let start = Instant::now();
            let mut timeline = Vec::new();
            let (mut last_t, mut last_n) = (0.0f64, 0u64);
            let mut tick = tokio::time::interval(SAMPLE_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let stopping = s.load(Ordering::Relaxed);
                let n = done.load(Ordering::Relaxed);
                let t = start.elapsed().as_secs_f64();
                let dt = t - last_t;
                if dt > 0.0 && (n > last_n || !stopping) {
                    let rate = n.saturating_sub(last_n) as f64 / dt;
                    timeline.push((t, rate));
                    bar.set_message(format!("{rate:.0}/s"));
                }
                bar.set_position(n);
                if print {
                    println!("progress {n}");
                }
                (last_t, last_n) = (t, n);
                if stopping {
                    return timeline;
                }
            }
        });
        Sampler { stop, task }
    }

    async fn stop(self) -> Vec<(f64, f64)> {
        self.stop.store(true, Ordering::Relaxed);
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn redacted_uris_keep_everything_but_the_password() {
        let cases = [
            (
                "mongodb://bench:bench-pw@127.0.0.1:28471/?authSource=admin",
                "mongodb://bench:***@127.0.0.1:28471/?authSource=admin",
            ),
            (
                "mongodb://u:p%40ss%2Fw@h1,h2/db?tls=true",
                "mongodb://u:***@h1,h2/db?tls=true",
            ),
            ("mongodb://u:pw@host", "mongodb://u:***@host"),
            (
                "mongodb+srv://u:pw@cluster.example",
                "mongodb+srv://u:***@cluster.example",
            ),
            // No password, nothing to hide.
            (
                "mongodb://u@host/?authMechanism=MONGODB-X509",
                "mongodb://u@host/?authMechanism=MONGODB-X509",
            ),
            (
                "mongodb://127.0.0.1:27017/?a=b@c",
                "mongodb://127.0.0.1:27017/?a=b@c",
            ),
            ("wire-limit", "wire-limit"),
        ];
        for (uri, shown) in cases {
            assert_eq!(redact_uri(uri), shown, "{uri}");
        }
    }

    #[test]
    fn profile_document_is_the_seeds() {
        let d = profile_doc(7);
        let keys: Vec<&str> = d.keys().map(String::as_str).collect();
        assert_eq!(keys, ["name", "title", "id", "des", "other"]);
        assert_eq!(d.get_i64("id").unwrap(), 7);
        assert_eq!(d.get_str("title").unwrap(), "PhD");
        assert!(d.get_str("other").unwrap().ends_with("authorisation. "));
    }

    #[test]
    fn timeseries_documents_in_time_order_rise_through_2012() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut gen = TimeseriesDocs::new().in_time_order(3000);
        let mut all = Vec::new();
        let mut docs = Vec::new();
        for first in [0u64, 1000, 2000] {
            gen.fill_from(&mut rng, first, 1000, &mut docs);
            all.append(&mut docs);
        }
        let times: Vec<i64> = all
            .iter()
            .map(|d| d.get_datetime("created_on").unwrap().timestamp_millis())
            .collect();
        assert!(times.windows(2).all(|w| w[0] <= w[1]));
        assert!((YEAR_2012_MS.0..YEAR_2012_MS.0 + 20_000_000).contains(&times[0]));
        assert!((YEAR_2012_MS.1 - 20_000_000..YEAR_2012_MS.1).contains(&times[2999]));
        for d in &all {
            assert_eq!(d.as_bytes().len(), TIMESERIES_DOC_LEN);
            assert!(d.get_f64("value").is_ok() && d.get_object_id("_id").is_ok());
        }
    }

    #[test]
    fn timeseries_documents_fall_in_2012() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut gen = TimeseriesDocs::new();
        let mut docs = Vec::new();
        gen.fill(&mut rng, 1000, &mut docs);
        assert_eq!(docs.len(), 1000);
        let mut last: Option<ObjectId> = None;
        for d in &docs {
            // Exactly what rawdoc! would build from the same values.
            let id = d.get_object_id("_id").unwrap();
            let created = d.get_datetime("created_on").unwrap();
            let v = d.get_f64("value").unwrap();
            let same = rawdoc! {"_id": id, "created_on": created, "value": v};
            assert_eq!(d.as_bytes(), same.as_bytes());
            assert_eq!(d.as_bytes().len(), TIMESERIES_DOC_LEN);
            let ms = created.timestamp_millis();
            assert!((YEAR_2012_MS.0..YEAR_2012_MS.1).contains(&ms));
            assert!((0.0..1.0).contains(&v));
            // One process's ids: its 5 bytes, a fresh counter each, recent time.
            assert_eq!(id.bytes()[4..9], ObjectId::new().bytes()[4..9]);
            let age = bson::DateTime::now().timestamp_millis() - id.timestamp().timestamp_millis();
            assert!((0..60_000).contains(&age), "{age}");
            assert_ne!(Some(id), last);
            last = Some(id);
        }
        // A second client task of the same process (`--clients 2`) within the
        // same second: no id repeats across the two.
        let mut other = Vec::new();
        TimeseriesDocs::new().fill(&mut rng, 1000, &mut other);
        let unique: std::collections::HashSet<_> = docs
            .iter()
            .chain(&other)
            .map(|d| d.get_object_id("_id").unwrap())
            .collect();
        assert_eq!(unique.len(), docs.len() + other.len());
    }

    #[test]
    fn pipelines_group_by_day_and_hour() {
        let p = aggregate_pipelines();
        assert_eq!(p.len(), 4);
        for (name, stages) in &p {
            let g = stages
                .iter()
                .find_map(|s| s.get_document("$group").ok())
                .unwrap();
            let id = g.get_document("_id").unwrap();
            assert_eq!(id.contains_key("hour"), name.contains("hour"), "{name}");
            assert!(["avg", "min", "max"].iter().all(|k| g.contains_key(*k)));
            let first = stages[0].keys().next().unwrap();
            assert_eq!(first == "$match", name.contains("February"), "{name}");
        }
    }
}
