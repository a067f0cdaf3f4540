//! Storage-level measurements of the lsm engine (no server, no wire protocol):
//! single-document commit rates with `Sync` and `Buffered` durability, 5000-document
//! batch inserts of the seed-003 time-series document (without and with an index
//! on `created_on`), and bytes on disk per document after 1,000,000 time-series
//! and 1,000,000 seed-000 profile documents.
//!
//! Run: `cargo run --release -p bisondb-storage --example lsm_bench [-- <dir>]`
//! (`LSM_BENCH_ONLY_INDEX=1` runs only the time-series loads without and with
//! the index, the pair to compare when working on the indexed insert path;
//! `LSM_BENCH_ONLY_INDEX=indexed` only the indexed one; `LSM_BENCH_DOCS=N`
//! loads N documents instead of 1,000,000).
//! (Unix only: sizes are allocated blocks, as `du` counts them.)
//! (`<dir>` defaults to a temporary directory; it must not exist or be empty).
//! Figures go to stdout; nothing is asserted (timing belongs here, not in tests).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bisondb_storage::{Durability, Engine, IndexSpec, LsmEngine, Storage};
use bson::oid::ObjectId;
use bson::{rawdoc, DateTime, RawDocument, RawDocumentBuf};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const MILLION: usize = 1_000_000;
const BATCH: usize = 5000;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// Seed 003: `{_id: ObjectId, created_on: <random date in 2012>, value: <random>}`.
fn time_series(rng: &mut Rng) -> RawDocumentBuf {
    const START_MS: i64 = 1_325_376_000_000; // 2012-01-01
    const YEAR_MS: f64 = 366.0 * 86_400_000.0;
    let created = DateTime::from_millis(START_MS + (rng.unit() * YEAR_MS) as i64);
    rawdoc! {"_id": ObjectId::new(), "created_on": created, "value": rng.unit()}
}

/// Seed 000: the profile document, `id` counting up.
fn profile(i: usize) -> RawDocumentBuf {
    rawdoc! {
        "_id": ObjectId::new(),
        "name": "Huidong Tian",
        "title": "PhD",
        "id": i as i64,
        "des": "I am a data scientist focusing on Python and R",
        "other": "As for why the book was created, a theory which has gained considerable interest, although still controversial is Persian imperial authorisation. ",
    }
}

fn open(dir: &Path) -> (Arc<LsmEngine>, Storage) {
    let engine = Arc::new(
        LsmEngine::open(dir, bisondb_storage::store_lsm_options()).unwrap_or_else(|e| {
            eprintln!("cannot open {}: {e}", dir.display());
            std::process::exit(1)
        }),
    );
    let dyn_engine: Arc<dyn Engine> = engine.clone();
    let storage = Storage::open(dyn_engine).unwrap_or_else(|e| {
        eprintln!("cannot open storage: {e}");
        std::process::exit(1)
    });
    (engine, storage)
}

fn rate(n: usize, d: Duration) -> String {
    format!("{:.0}/s", n as f64 / d.as_secs_f64().max(1e-9))
}

/// What `du` reports: bytes allocated to the files under `dir`.
fn du(dir: &Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|rd| {
            rd.filter_map(Result::ok)
                .map(|e| match e.file_type() {
                    Ok(t) if t.is_dir() => du(&e.path()),
                    Ok(_) => e
                        .metadata()
                        .map(|m| std::os::unix::fs::MetadataExt::blocks(&m) * 512)
                        .unwrap_or(0),
                    Err(_) => 0,
                })
                .sum()
        })
        .unwrap_or(0)
}

fn single_commits(root: &Path, durability: Durability, n: usize, threads: usize) {
    let dir = root.join(format!("single-{durability:?}-{threads}"));
    let (_engine, storage) = open(&dir);
    let c = storage
        .get_or_create_collection("bench", "profile")
        .unwrap_or_else(|e| panic!("create: {e}"));
    let per_thread = n / threads;
    let start = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            let c = c.clone();
            s.spawn(move || {
                for i in 0..per_thread {
                    let d = profile(t * per_thread + i);
                    let out = c.insert_many(&[d.as_ref()], true, durability);
                    assert_eq!(out.inserted, 1, "{:?}", out.errors);
                }
            });
        }
    });
    let took = start.elapsed();
    println!(
        "single-document commits, {durability:?}, {threads} thread(s): {} docs in {:.2}s = {}",
        per_thread * threads,
        took.as_secs_f64(),
        rate(per_thread * threads, took)
    );
}

/// Documents per bulk load: `LSM_BENCH_DOCS`, default 1,000,000.
fn docs_per_load() -> usize {
    std::env::var("LSM_BENCH_DOCS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MILLION)
}

/// User + system CPU time of this process so far (all threads, including
/// fjall's background worker), from /proc/self/stat; 0 where that is missing.
fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // Fields after the parenthesised command name: utime and stime are the
    // 12th and 13th of them, in clock ticks (100 per second on Linux).
    let Some(rest) = stat.rsplit(')').next() else {
        return 0.0;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| f.get(i).and_then(|v| v.parse::<f64>().ok()).unwrap_or(0.0);
    (ticks(11) + ticks(12)) / 100.0
}

/// (seconds on a CPU, seconds runnable but waiting for a CPU) of the calling
/// thread, from /proc/thread-self/schedstat; zeros where that is missing. Wall
/// time minus both is the time the thread was blocked (fjall's write stalls).
fn thread_schedstat() -> (f64, f64) {
    let Ok(s) = std::fs::read_to_string("/proc/thread-self/schedstat") else {
        return (0.0, 0.0);
    };
    let mut f = s
        .split_whitespace()
        .map(|v| v.parse::<f64>().unwrap_or(0.0) / 1e9);
    (f.next().unwrap_or(0.0), f.next().unwrap_or(0.0))
}

fn bulk(
    root: &Path,
    name: &str,
    make: &mut dyn FnMut(usize) -> RawDocumentBuf,
    batch: usize,
    index_on: Option<&str>,
) {
    let dir = root.join(name);
    let (engine, storage) = open(&dir);
    if let Some(field) = index_on {
        let spec = IndexSpec {
            name: format!("{field}_1"),
            key: bson::doc! {field: 1},
            unique: false,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: None,
            hidden: false,
            background: None,
            collation: None,
            type_options: bson::Document::new(),
        };
        storage
            .create_index("bench", name, spec)
            .unwrap_or_else(|e| panic!("create index: {e}"));
    }
    let c = storage
        .get_or_create_collection("bench", name)
        .unwrap_or_else(|e| panic!("create: {e}"));
    let total = docs_per_load();
    let mut raw = 0u64;
    let mut insert_time = Duration::ZERO;
    let mut next = 0usize;
    let cpu_start = process_cpu_seconds();
    let sched_start = thread_schedstat();
    while next < total {
        let docs: Vec<RawDocumentBuf> = (next..(next + batch).min(total)).map(&mut *make).collect();
        raw += docs.iter().map(|d| d.as_bytes().len() as u64).sum::<u64>();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        let start = Instant::now();
        let out = c.insert_many(&refs, true, Durability::Buffered);
        insert_time += start.elapsed();
        assert_eq!(out.inserted, refs.len(), "{:?}", out.errors.first());
        next += refs.len();
    }
    let cpu = process_cpu_seconds() - cpu_start;
    let sched_end = thread_schedstat();
    let (run, wait) = (sched_end.0 - sched_start.0, sched_end.1 - sched_start.1);
    let wall = insert_time.as_secs_f64();
    println!(
        "{name}: {total} docs in batches of {batch}: {:.2}s inserting = {} (raw BSON {:.1} B/doc); process CPU {:.2}s = {:.2} µs/doc",
        insert_time.as_secs_f64(),
        rate(total, insert_time),
        raw as f64 / total as f64,
        cpu,
        cpu * 1e6 / total as f64,
    );
    println!(
        "{name}: inserting thread ran {run:.2}s, waited for a core {wait:.2}s, was blocked (write stalls, locks, I/O) {:.2}s",
        (wall - run - wait).max(0.0)
    );
    let unsettled = engine.size_on_disk();
    let start = Instant::now();
    engine.settle().unwrap_or_else(|e| panic!("settle: {e}"));
    let settled = engine.size_on_disk();
    println!(
        "{name}: on disk before settling {:.1} B/doc; after flush+compaction ({:.1}s) {:.1} B/doc = {:.2}x raw; du of the dbpath {:.1} B/doc",
        unsettled as f64 / total as f64,
        start.elapsed().as_secs_f64(),
        settled as f64 / total as f64,
        settled as f64 / raw as f64,
        du(&dir) as f64 / total as f64,
    );
    drop(c);
    drop(storage);
    drop(engine);
    println!(
        "{name}: du of the dbpath after a clean close {:.1} B/doc",
        du(&dir) as f64 / total as f64
    );
}

fn main() {
    let arg = std::env::args().nth(1);
    let tmp;
    let root: PathBuf = match arg {
        Some(p) => PathBuf::from(p),
        None => {
            tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
            tmp.path().to_path_buf()
        }
    };
    println!("dbpaths under {}", root.display());
    let only_index = std::env::var_os("LSM_BENCH_ONLY_INDEX").is_some();
    if !only_index {
        single_commits(&root, Durability::Sync, 2_000, 1);
        single_commits(&root, Durability::Sync, 20_000, 8);
        single_commits(&root, Durability::Buffered, 200_000, 1);
        single_commits(&root, Durability::Buffered, 200_000, 2);
    }
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
    // `LSM_BENCH_ONLY_INDEX=indexed` skips the plain load (for profiling).
    if std::env::var("LSM_BENCH_ONLY_INDEX").as_deref() != Ok("indexed") {
        bulk(
            &root,
            "timeseries",
            &mut |_| time_series(&mut rng),
            BATCH,
            None,
        );
    }
    bulk(
        &root,
        "timeseries-indexed",
        &mut |_| time_series(&mut rng),
        BATCH,
        Some("created_on"),
    );
    if only_index {
        return;
    }
    bulk(&root, "profile", &mut profile, BATCH, None);
}
