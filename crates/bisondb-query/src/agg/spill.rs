//! Memory limits of blocking stages and their spilling to disk.
//!
//! mongod caps what one blocking stage may hold in memory (100 MiB by default:
//! `internalQueryMaxBlockingSortMemoryUsageBytes` for `$sort`,
//! `internalDocumentSourceGroupMaxMemoryBytes` for `$group`). Past the cap a
//! stage fails with 292 QueryExceededMemoryLimitNoDiskUseAllowed unless
//! `allowDiskUse` (default true since 6.0) lets it spill to temporary files.
//!
//! [`Sorter`] is the external merge sort both `$sort` and `$group` spill
//! through: documents are buffered with their sort key; when the buffer's
//! estimated size passes the limit it is sorted (stably) and written as one
//! run of raw BSON to a file in the spill directory; at the end the runs are
//! merged, ties going to the earlier run, so the whole sort stays stable.
//! This is the only place `bisondb-query` does I/O. Spill files are removed
//! when their run is dropped (the cursor ended, was killed or failed).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawDocument, RawDocumentBuf};
use std::cmp::Ordering;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering as AtomicOrdering};
use std::sync::Arc;

/// mongod's default per-stage limit (100 MiB).
pub const DEFAULT_LIMIT_BYTES: usize = 100 * 1024 * 1024;

/// At most this many runs are merged at once; more are first merged in
/// groups into longer runs, so open files stay few.
const MAX_FAN_IN: usize = 64;

/// The memory limits blocking stages run under, and where they spill.
#[derive(Debug, Clone)]
pub struct MemoryLimits {
    /// `$sort` (`internalQueryMaxBlockingSortMemoryUsageBytes`).
    pub sort_bytes: usize,
    /// `$group` (`internalDocumentSourceGroupMaxMemoryBytes`); also the limit
    /// of the blocking stages that cannot spill (`$bucketAuto`, ...).
    pub group_bytes: usize,
    /// The command's `allowDiskUse` (else the server's `allowDiskUseByDefault`).
    pub allow_disk_use: bool,
    /// Where spill files go (`<dbpath>/_tmp`); `None`: the system temp dir.
    pub spill_dir: Option<PathBuf>,
}

impl Default for MemoryLimits {
    fn default() -> Self {
        MemoryLimits {
            sort_bytes: DEFAULT_LIMIT_BYTES,
            group_bytes: DEFAULT_LIMIT_BYTES,
            allow_disk_use: true,
            spill_dir: None,
        }
    }
}

impl MemoryLimits {
    fn dir(&self) -> PathBuf {
        self.spill_dir.clone().unwrap_or_else(std::env::temp_dir)
    }
}

/// 292 for `$sort` past its limit without `allowDiskUse`.
pub(crate) fn sort_limit_error(limit: usize) -> MongoError {
    MongoError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        format!(
            "Sort exceeded memory limit of {limit} bytes, but did not opt in to external sorting."
        ),
    )
}

/// 292 for `$group` past its limit without `allowDiskUse`.
pub(crate) fn group_limit_error() -> MongoError {
    MongoError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        "Exceeded memory limit for $group, but didn't allow external spilling; pass allowDiskUse:true to opt in.",
    )
}

/// 292 for a blocking stage that cannot spill (`$bucketAuto`,
/// `$setWindowFields`...), whatever `allowDiskUse` says.
pub(crate) fn stage_limit_error(stage: &str, limit: usize) -> MongoError {
    MongoError::new(
        ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
        format!(
            "{stage} exceeded its memory limit of {limit} bytes; BisonDB does not spill {stage} to disk"
        ),
    )
}

/// The memory estimates live with the values (the matcher uses them too).
pub(crate) use crate::value::{approx_doc_size, approx_size};

/// mongod's largest document a stage may produce: 16 MiB plus 16 KiB of
/// room for the fields the server adds (`BSONObjectMaxInternalSize`).
pub const MAX_INTERNAL_DOC_BYTES: usize = 16 * 1024 * 1024 + 16 * 1024;

/// The exact size of `d` encoded as BSON, without encoding it.
pub fn bson_doc_size(d: &Document) -> usize {
    5 + d
        .iter()
        .map(|(k, v)| 2 + k.len() + bson_value_size(v))
        .sum::<usize>()
}

/// The exact size of the value part of an element holding `v`.
pub fn bson_value_size(v: &Bson) -> usize {
    match v {
        Bson::Double(_) | Bson::DateTime(_) | Bson::Int64(_) | Bson::Timestamp(_) => 8,
        Bson::String(s) | Bson::JavaScriptCode(s) | Bson::Symbol(s) => 5 + s.len(),
        Bson::Document(d) => bson_doc_size(d),
        Bson::Array(a) => {
            let mut n = 5;
            for (i, e) in a.iter().enumerate() {
                n += 2 + decimal_digits(i) + bson_value_size(e);
            }
            n
        }
        Bson::Binary(b) => 5 + b.bytes.len(),
        Bson::ObjectId(_) => 12,
        Bson::Boolean(_) => 1,
        Bson::Null | Bson::Undefined | Bson::MaxKey | Bson::MinKey => 0,
        Bson::RegularExpression(r) => r.pattern.len() + r.options.len() + 2,
        Bson::JavaScriptCodeWithScope(c) => 4 + 5 + c.code.len() + bson_doc_size(&c.scope),
        Bson::Int32(_) => 4,
        Bson::Decimal128(_) => 16,
        Bson::DbPointer(_) => 5 + 12 + 24,
    }
}

fn decimal_digits(mut i: usize) -> usize {
    let mut n = 1;
    while i >= 10 {
        i /= 10;
        n += 1;
    }
    n
}

fn io_err(what: &str, e: std::io::Error) -> MongoError {
    MongoError::internal(format!("spilling to disk failed ({what}): {e}"))
}

/// A spill file, removed when dropped.
struct SpillFile {
    path: PathBuf,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

static SPILL_SEQ: AtomicU64 = AtomicU64::new(0);

fn new_spill_file(dir: &std::path::Path) -> MongoResult<(SpillFile, File)> {
    std::fs::create_dir_all(dir).map_err(|e| io_err("creating the spill directory", e))?;
    let n = SPILL_SEQ.fetch_add(1, AtomicOrdering::Relaxed);
    let path = dir.join(format!("extsort-{}-{n}", std::process::id()));
    let file = File::create(&path).map_err(|e| io_err("creating a spill file", e))?;
    Ok((SpillFile { path }, file))
}

/// Writes documents (raw BSON, each self-delimited by its length) as one run.
fn write_run(
    dir: &std::path::Path,
    docs: impl Iterator<Item = MongoResult<RawDocumentBuf>>,
) -> MongoResult<SpillFile> {
    let (guard, file) = new_spill_file(dir)?;
    let mut w = BufWriter::new(file);
    for d in docs {
        w.write_all(d?.as_bytes())
            .map_err(|e| io_err("writing a run", e))?;
    }
    w.flush().map_err(|e| io_err("writing a run", e))?;
    Ok(guard)
}

/// Reads one run back, document by document.
struct RunReader {
    r: BufReader<File>,
    _file: SpillFile,
}

impl RunReader {
    fn open(file: SpillFile) -> MongoResult<RunReader> {
        let f = File::open(&file.path).map_err(|e| io_err("opening a run", e))?;
        Ok(RunReader {
            r: BufReader::new(f),
            _file: file,
        })
    }

    fn next_doc(&mut self) -> MongoResult<Option<RawDocumentBuf>> {
        let mut len = [0u8; 4];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(io_err("reading a run", e)),
        }
        let n = usize::try_from(i32::from_le_bytes(len))
            .ok()
            .filter(|n| (5..=64 * 1024 * 1024).contains(n))
            .ok_or_else(|| MongoError::internal("corrupt spill file: bad document length"))?;
        let mut buf = vec![0u8; n];
        buf[..4].copy_from_slice(&len);
        self.r
            .read_exact(&mut buf[4..])
            .map_err(|e| io_err("reading a run", e))?;
        RawDocumentBuf::from_bytes(buf)
            .map(Some)
            .map_err(|e| MongoError::internal(format!("corrupt spill file: {e}")))
    }
}

/// Computes a spilled document's sort key again when it is read back.
pub(crate) type KeyFn<K> = Arc<dyn Fn(&RawDocument) -> MongoResult<K> + Send + Sync>;
/// Orders keys.
pub(crate) type CmpFn<K> = Arc<dyn Fn(&K, &K) -> Ordering + Send + Sync>;

/// An external merge sort of documents by a key (see the module docs).
pub(crate) struct Sorter<K> {
    key_of: KeyFn<K>,
    cmp: CmpFn<K>,
    limit: usize,
    dir: PathBuf,
    buf: Vec<(K, Document)>,
    bytes: usize,
    runs: Vec<SpillFile>,
    /// The buffer's bytes, counted against the operation's memory
    /// (`bisondb_error::memory`); when that refuses, the buffer spills.
    charge: bisondb_error::memory::Charge,
}

impl<K: Send + 'static> Sorter<K> {
    pub(crate) fn new(
        limit: usize,
        limits: &MemoryLimits,
        key_of: KeyFn<K>,
        cmp: CmpFn<K>,
    ) -> Self {
        Sorter {
            key_of,
            cmp,
            limit,
            dir: limits.dir(),
            buf: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            charge: bisondb_error::memory::Charge::new(),
        }
    }

    /// The key of a document, as a spilled one gets it when read back.
    pub(crate) fn key_of(&self, raw: &RawDocument) -> MongoResult<K> {
        (self.key_of)(raw)
    }

    /// Whether adding `size` bytes takes the buffer past the limit.
    pub(crate) fn would_exceed(&self, size: usize) -> bool {
        self.bytes.saturating_add(size) > self.limit
    }

    /// Whether anything went to disk.
    #[cfg(test)]
    pub(crate) fn spilled(&self) -> bool {
        !self.runs.is_empty()
    }

    /// Counts `size` more bytes against the operation, or fails with its
    /// 146 (the caller spills, or gives up when it may not).
    pub(crate) fn charge(&mut self, size: usize) -> MongoResult<()> {
        self.charge.grow(size)
    }

    /// Adds a document with its key; `size` is its estimated memory cost.
    /// Past the stage's limit, or when the operation's memory (or the
    /// server's) refuses the bytes, the buffer goes to disk.
    pub(crate) fn push(&mut self, key: K, doc: Document, size: usize) -> MongoResult<()> {
        let refused = self.charge.grow(size).is_err();
        self.buf.push((key, doc));
        self.bytes = self.bytes.saturating_add(size);
        if refused || self.bytes > self.limit {
            self.spill()?;
        }
        Ok(())
    }

    /// Adds a document whose `size` [`Self::charge`] already counted; it
    /// never spills (for a caller that may not).
    pub(crate) fn push_charged(&mut self, key: K, doc: Document, size: usize) {
        self.buf.push((key, doc));
        self.bytes = self.bytes.saturating_add(size);
    }

    fn sort_buf(&mut self) {
        let cmp = self.cmp.clone();
        self.buf.sort_by(|a, b| cmp(&a.0, &b.0));
    }

    fn spill(&mut self) -> MongoResult<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        self.sort_buf();
        let docs = std::mem::take(&mut self.buf).into_iter().map(|(_, d)| {
            RawDocumentBuf::try_from(&d)
                .map_err(|e| MongoError::internal(format!("document cannot be spilled: {e}")))
        });
        let run = write_run(&self.dir, docs)?;
        self.runs.push(run);
        self.bytes = 0;
        self.charge.clear();
        Ok(())
    }

    /// Every document pushed, in key order (stable), streamed.
    pub(crate) fn finish(mut self) -> MongoResult<SortedDocs> {
        if self.runs.is_empty() {
            self.sort_buf();
            // The buffer stays counted until its reader is gone.
            let charge = std::mem::take(&mut self.charge);
            return Ok(Box::new(self.buf.into_iter().map(move |(_, d)| {
                let _held = &charge;
                Ok(d)
            })));
        }
        self.spill()?;
        let mut runs = std::mem::take(&mut self.runs);
        // Merge the earliest runs first and keep the result in their place,
        // so ties still go to the earlier input.
        while runs.len() > MAX_FAN_IN {
            let rest = runs.split_off(MAX_FAN_IN);
            let merged = Merge::new(runs, self.key_of.clone(), self.cmp.clone())?;
            let run = write_run(&self.dir, merged.map(|r| r.map(|(_, raw)| raw)))?;
            runs = std::iter::once(run).chain(rest).collect();
        }
        let merged = Merge::new(runs, self.key_of, self.cmp)?;
        Ok(Box::new(merged.map(|r| {
            r.and_then(|(_, raw)| {
                Document::try_from(raw)
                    .map_err(|e| MongoError::internal(format!("corrupt spill file: {e}")))
            })
        })))
    }
}

/// The sorted output of a [`Sorter`].
pub(crate) type SortedDocs = Box<dyn Iterator<Item = MongoResult<Document>> + Send>;

/// A k-way merge of sorted runs; the smallest head wins, the earliest run on
/// ties.
struct Merge<K> {
    runs: Vec<RunReader>,
    heads: Vec<Option<(K, RawDocumentBuf)>>,
    key_of: KeyFn<K>,
    cmp: CmpFn<K>,
    failed: bool,
}

impl<K> Merge<K> {
    fn new(files: Vec<SpillFile>, key_of: KeyFn<K>, cmp: CmpFn<K>) -> MongoResult<Merge<K>> {
        let mut runs = Vec::with_capacity(files.len());
        let mut heads = Vec::with_capacity(files.len());
        for f in files {
            let mut r = RunReader::open(f)?;
            heads.push(Self::read_head(&mut r, &key_of)?);
            runs.push(r);
        }
        Ok(Merge {
            runs,
            heads,
            key_of,
            cmp,
            failed: false,
        })
    }

    fn read_head(r: &mut RunReader, key_of: &KeyFn<K>) -> MongoResult<Option<(K, RawDocumentBuf)>> {
        match r.next_doc()? {
            Some(raw) => Ok(Some((key_of(&raw)?, raw))),
            None => Ok(None),
        }
    }
}

impl<K> Iterator for Merge<K> {
    type Item = MongoResult<(K, RawDocumentBuf)>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed {
            return None;
        }
        let mut best: Option<usize> = None;
        for (i, h) in self.heads.iter().enumerate() {
            let Some((k, _)) = h else { continue };
            let better = match best
                .and_then(|b| self.heads.get(b))
                .and_then(|h| h.as_ref())
            {
                Some((bk, _)) => (self.cmp)(k, bk) == Ordering::Less,
                None => true,
            };
            if better {
                best = Some(i);
            }
        }
        let i = best?;
        let (run, head) = (self.runs.get_mut(i)?, self.heads.get_mut(i)?);
        let next = match Self::read_head(run, &self.key_of) {
            Ok(n) => n,
            Err(e) => {
                self.failed = true;
                return Some(Err(e));
            }
        };
        std::mem::replace(head, next).map(Ok)
    }
}

/// Empties a spill directory (at startup: files a crashed server left).
pub fn clear_spill_dir(dir: &std::path::Path) {
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn int_sorter(limit: usize, dir: &std::path::Path) -> Sorter<i64> {
        let limits = MemoryLimits {
            spill_dir: Some(dir.to_path_buf()),
            ..MemoryLimits::default()
        };
        Sorter::new(
            limit,
            &limits,
            Arc::new(|raw: &RawDocument| {
                raw.get_i64("k")
                    .map_err(|e| MongoError::internal(e.to_string()))
            }),
            Arc::new(|a: &i64, b: &i64| a.cmp(b)),
        )
    }

    #[test]
    fn spilled_merge_is_sorted_stable_and_cleans_up() {
        let dir = std::env::temp_dir().join(format!("bisondb-spill-test-{}", std::process::id()));
        let mut s = int_sorter(256, &dir);
        let mut expect = Vec::new();
        // Enough documents for more than MAX_FAN_IN runs (an extra merge pass).
        for i in 0..3000i64 {
            let k = (i * 7919) % 101;
            s.push(k, bson::doc! {"k": k, "i": i}, 64).unwrap();
            expect.push((k, i));
        }
        assert!(s.spilled());
        assert!(std::fs::read_dir(&dir).unwrap().count() > MAX_FAN_IN);
        expect.sort_by_key(|(k, _)| *k);
        let out: Vec<(i64, i64)> = s
            .finish()
            .unwrap()
            .map(|d| {
                let d = d.unwrap();
                (d.get_i64("k").unwrap(), d.get_i64("i").unwrap())
            })
            .collect();
        assert_eq!(out, expect);
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let _ = std::fs::remove_dir(&dir);
    }

    /// Pseudo-random documents: few distinct values, so ties and shared
    /// groups are common, plus a sequence number to see stability.
    fn random_docs(n: usize) -> Vec<Document> {
        let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
        (0..n)
            .map(|i| {
                x = x
                    .wrapping_mul(6_364_136_223_846_793_005)
                    .wrapping_add(1_442_695_040_888_963_407);
                let a = ((x >> 33) % 300) as i64;
                let b = ((x >> 13) % 7) as i64;
                bson::doc! {"seq": i as i64, "a": a, "b": format!("s{b}"), "pad": "x".repeat((a % 50) as usize)}
            })
            .collect()
    }

    fn run_with(
        stages: Vec<Document>,
        input: Vec<Document>,
        limits: MemoryLimits,
    ) -> MongoResult<Vec<Document>> {
        let mut p = crate::agg::Pipeline::parse(&stages)?;
        p.set_memory_limits(limits);
        let stream: crate::agg::DocStream = Box::new(input.into_iter().map(Ok));
        p.run(stream).collect()
    }

    fn tiny(dir: &std::path::Path, allow_disk_use: bool) -> MemoryLimits {
        MemoryLimits {
            sort_bytes: 1024,
            group_bytes: 1024,
            allow_disk_use,
            spill_dir: Some(dir.to_path_buf()),
        }
    }

    fn test_dir(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("bisondb-{name}-{}", std::process::id()))
    }

    /// Runs `f` as an operation whose memory is bounded to `op_limit`.
    fn bounded_to<T>(op_limit: usize, f: impl FnOnce() -> T) -> T {
        use bisondb_error::{interrupt, memory};
        let pool = memory::Pool::leak(memory::Pool::new(usize::MAX, op_limit));
        let op = std::sync::Arc::new(interrupt::OpCtx::default().with_memory(pool));
        let out = {
            let _current = interrupt::enter(op.clone());
            f()
        };
        drop(op);
        assert_eq!(
            pool.used(),
            0,
            "the operation's memory went back to the pool"
        );
        out
    }

    #[test]
    fn the_operations_memory_makes_sort_and_group_spill_or_fail() {
        let dir = test_dir("op-memory");
        let input = random_docs(3000);
        let roomy = |allow_disk_use| MemoryLimits {
            allow_disk_use,
            spill_dir: Some(dir.clone()),
            ..MemoryLimits::default()
        };
        let sort = vec![bson::doc! {"$sort": {"a": 1, "seq": 1}}];
        let group = vec![bson::doc! {"$group": {"_id": "$seq", "p": {"$push": "$pad"}}}];
        for stages in [sort, group] {
            let expect = run_with(stages.clone(), input.clone(), roomy(true)).unwrap();
            // The stage limits are roomy; the operation's 64 KiB is not.
            let spilled = bounded_to(64 * 1024, || {
                run_with(stages.clone(), input.clone(), roomy(true))
            })
            .unwrap();
            assert_eq!(spilled.len(), expect.len());
            let e = bounded_to(64 * 1024, || {
                run_with(stages.clone(), input.clone(), roomy(false))
            })
            .unwrap_err();
            assert_eq!(e.code, ErrorCode::ExceededMemoryLimit, "{stages:?}: {e}");
        }
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 0);
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn joins_and_facets_count_against_the_operations_memory() {
        let input = random_docs(3000);
        for stages in [
            vec![bson::doc! {"$bucketAuto": {"groupBy": "$a", "buckets": 3}}],
            vec![bson::doc! {"$facet": {"x": [{"$match": {}}]}}],
            vec![
                bson::doc! {"$setWindowFields": {"sortBy": {"seq": 1}, "output": {"n": {"$sum": 1}}}},
            ],
        ] {
            let ok = bounded_to(usize::MAX, || {
                run_with(stages.clone(), input.clone(), MemoryLimits::default())
            });
            assert!(ok.is_ok(), "{stages:?}");
            let e = bounded_to(64 * 1024, || {
                run_with(stages.clone(), input.clone(), MemoryLimits::default())
            })
            .unwrap_err();
            assert_eq!(e.code, ErrorCode::ExceededMemoryLimit, "{stages:?}: {e}");
        }
    }

    #[test]
    fn long_in_lists_count_against_the_operations_memory() {
        let list: Vec<i64> = (0..100_000).collect();
        let filter = bson::doc! {"a": {"$in": list.clone()}};
        let e = bounded_to(1024 * 1024, || {
            crate::matcher::Matcher::parse_doc(&filter).map(|_| ())
        })
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::ExceededMemoryLimit);
        let filter = bson::doc! {"a": {"$nin": list}};
        assert!(
            bounded_to(64 * 1024 * 1024, || crate::matcher::Matcher::parse_doc(
                &filter
            )
            .map(|_| ()))
            .is_ok()
        );
        // A short list never reaches the tracker.
        let short = bson::doc! {"a": {"$in": [1, 2, 3]}};
        assert!(bounded_to(1, || crate::matcher::Matcher::parse_doc(&short).map(|_| ())).is_ok());
    }

    #[test]
    fn sort_spills_with_the_same_result() {
        let dir = test_dir("sort-spill");
        let input = random_docs(3000);
        for stages in [
            vec![bson::doc! {"$sort": {"a": 1}}],
            vec![bson::doc! {"$sort": {"b": -1, "a": 1}}],
            vec![
                bson::doc! {"$sort": {"a": -1}},
                bson::doc! {"$limit": 20_000},
            ],
        ] {
            let want = run_with(stages.clone(), input.clone(), MemoryLimits::default()).unwrap();
            let got = run_with(stages.clone(), input.clone(), tiny(&dir, true)).unwrap();
            assert_eq!(got.len(), input.len());
            // Same order, ties included (the merge is stable).
            assert_eq!(got, want, "{stages:?}");
            assert_eq!(
                std::fs::read_dir(&dir).unwrap().count(),
                0,
                "spill files left"
            );
        }
        let e = run_with(
            vec![bson::doc! {"$sort": {"a": 1}}],
            input,
            tiny(&dir, false),
        )
        .unwrap_err();
        assert_eq!(e.code.code(), 292);
        assert_eq!(
            e.message,
            "Sort exceeded memory limit of 1024 bytes, but did not opt in to external sorting."
        );
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn top_k_sort_is_not_limited() {
        let dir = test_dir("sort-topk");
        let stages = vec![bson::doc! {"$sort": {"a": 1}}, bson::doc! {"$limit": 5}];
        let got = run_with(stages, random_docs(2000), tiny(&dir, false)).unwrap();
        assert_eq!(got.len(), 5);
    }

    #[test]
    fn group_spills_with_the_same_groups() {
        let dir = test_dir("group-spill");
        let input = random_docs(4000);
        let stages = vec![bson::doc! {"$group": {
            "_id": {"a": "$a", "b": "$b"},
            "n": {"$sum": 1},
            "s": {"$sum": "$a"},
            "avg": {"$avg": "$seq"},
            "first": {"$first": "$seq"},
            "last": {"$last": "$seq"},
            "all": {"$push": "$seq"},
            "bs": {"$addToSet": "$b"},
        }}];
        let by_id = |mut v: Vec<Document>| {
            v.sort_by_key(|d| {
                d.get_document("_id")
                    .map(|i| i.to_string())
                    .unwrap_or_default()
            });
            v
        };
        let want = by_id(run_with(stages.clone(), input.clone(), MemoryLimits::default()).unwrap());
        let got = by_id(run_with(stages.clone(), input.clone(), tiny(&dir, true)).unwrap());
        assert!(want.len() > 1000, "many groups: {}", want.len());
        assert_eq!(got, want);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "spill files left"
        );
        let e = run_with(stages, input, tiny(&dir, false)).unwrap_err();
        assert_eq!(e.code.code(), 292);
        assert!(
            e.message.contains("Exceeded memory limit for $group"),
            "{e}"
        );
        let _ = std::fs::remove_dir(&dir);
    }

    #[test]
    fn group_limit_counts_growing_states() {
        // One group only, but $push grows its state past the limit.
        let dir = test_dir("group-push");
        let stages = vec![bson::doc! {"$group": {"_id": null, "all": {"$push": "$pad"}}}];
        let e = run_with(stages, random_docs(500), tiny(&dir, false)).unwrap_err();
        assert_eq!(e.code.code(), 292);
    }

    #[test]
    fn set_window_fields_fails_past_the_limit() {
        let dir = test_dir("swf");
        let stages = vec![bson::doc! {"$setWindowFields": {
            "sortBy": {"seq": 1},
            "output": {"n": {"$sum": 1}},
        }}];
        for allow in [true, false] {
            let e = run_with(stages.clone(), random_docs(500), tiny(&dir, allow)).unwrap_err();
            assert_eq!(e.code.code(), 292);
        }
        assert_eq!(
            run_with(stages, random_docs(500), MemoryLimits::default())
                .unwrap()
                .len(),
            500
        );
    }

    #[test]
    fn small_input_stays_in_memory() {
        let dir = std::env::temp_dir().join(format!("bisondb-spill-mem-{}", std::process::id()));
        let mut s = int_sorter(1 << 20, &dir);
        for k in [3i64, 1, 2] {
            s.push(k, bson::doc! {"k": k}, 64).unwrap();
        }
        assert!(!s.spilled());
        let out: Vec<i64> = s
            .finish()
            .unwrap()
            .map(|d| d.unwrap().get_i64("k").unwrap())
            .collect();
        assert_eq!(out, vec![1, 2, 3]);
    }
}
