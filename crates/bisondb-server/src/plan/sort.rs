//! The blocking sort: documents held in memory (bounded to the first
//! skip + limit when there is a limit) and sorted, counting the bytes it
//! sorted for explain, and its explain stage. The buffer counts against the
//! operation's memory (`bisondb_error::memory`) while it is filled.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::sort::SortSpec;
use bson::{Document, RawDocumentBuf};

use super::explain::{Ran, Stage};
use super::{counted, Stats};
use crate::cursor::DocSource;

/// Blocking sort of `src` (see [`sort`]), counting the bytes sorted and the
/// documents returned into `stats` for explain.
pub fn sorted_source(
    src: DocSource,
    spec: &bisondb_query::sort::SortSpec,
    keep: Option<usize>,
    allow_disk_use: bool,
    memory_limit: usize,
    stats: Arc<Stats>,
) -> MongoResult<DocSource> {
    let st = stats.clone();
    let input: DocSource = Box::new(src.inspect(move |d| {
        if let Ok(d) = d {
            st.sort_bytes
                .fetch_add(d.as_bytes().len() as u64, Ordering::Relaxed);
        }
    }));
    let sorted = sort_within(input, spec, keep, allow_disk_use, memory_limit)?;
    Ok(counted(Box::new(sorted.into_iter().map(Ok)), stats, |s| {
        &s.sort
    }))
}

/// Collects a source, failing on the first error.
pub fn collect(src: DocSource) -> MongoResult<Vec<RawDocumentBuf>> {
    src.collect()
}

/// mongod's limit for a blocking sort held in memory (100 MiB).
pub const SORT_MEMORY_LIMIT: usize = 100 * 1024 * 1024;

/// Sorts `src` by `spec`. With `keep` (skip + limit) only that many leading documents
/// are retained while reading, so `sort` + `limit` costs O(n log k) and little memory.
pub fn sort(
    src: DocSource,
    spec: &bisondb_query::sort::SortSpec,
    keep: Option<usize>,
    allow_disk_use: bool,
) -> MongoResult<Vec<RawDocumentBuf>> {
    sort_within(src, spec, keep, allow_disk_use, SORT_MEMORY_LIMIT)
}

/// [`sort`] under `limit` bytes (the server's
/// `internalQueryMaxBlockingSortMemoryUsageBytes`). With `allow_disk_use` the
/// documents stay in memory past it (find's sort does not spill).
pub fn sort_within(
    src: DocSource,
    spec: &bisondb_query::sort::SortSpec,
    keep: Option<usize>,
    allow_disk_use: bool,
    limit: usize,
) -> MongoResult<Vec<RawDocumentBuf>> {
    // Every operation that sorts in memory comes here once.
    crate::metrics::add(&crate::metrics::SCAN_AND_ORDER, 1);
    let mut docs: Vec<RawDocumentBuf> = Vec::new();
    let mut bytes = 0usize;
    // The buffer counted against the operation's memory (and the
    // server's), in steps so a document costs no atomic: past either, 146
    // (this sort does not spill).
    let mut charge = bisondb_error::memory::Charge::new();
    const STEP: usize = 64 * 1024;
    let cmp = |a: &RawDocumentBuf, b: &RawDocumentBuf| spec.compare_raw(a, b);
    for d in src {
        let d = d?;
        bytes = bytes.saturating_add(d.as_bytes().len());
        docs.push(d);
        if let Some(k) = keep {
            // Trim to k once the buffer doubles: amortised O(n log k).
            if docs.len() >= k.saturating_mul(2).max(64) {
                docs.sort_by(cmp);
                docs.truncate(k);
                bytes = docs.iter().map(|d| d.as_bytes().len()).sum();
            }
        }
        if bytes > charge.bytes().saturating_add(STEP) || bytes < charge.bytes() {
            charge.set(bytes)?;
        }
        if bytes > limit && !allow_disk_use {
            return Err(MongoError::new(
                bisondb_error::ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                format!("Sort exceeded memory limit of {limit} bytes, but did not opt in to external sorting."),
            ));
        }
    }
    docs.sort_by(cmp);
    if let Some(k) = keep {
        docs.truncate(k);
    }
    Ok(docs)
}

/// explain's SORT: a blocking sort by `pattern`, keeping the first `limit`
/// when `find` gives one.
pub(super) struct SortStage {
    pattern: Document,
    limit: Option<u64>,
}

impl SortStage {
    pub fn new(spec: &SortSpec, limit: Option<u64>) -> SortStage {
        let mut pattern = Document::new();
        for (k, asc) in spec.fields() {
            pattern.insert(k.clone(), if *asc { 1 } else { -1 });
        }
        SortStage { pattern, limit }
    }
}

impl Stage for SortStage {
    fn name(&self) -> &'static str {
        "SORT"
    }

    fn describe(&self, out: &mut Document) {
        out.insert("sortPattern", self.pattern.clone());
        out.insert("memLimit", SORT_MEMORY_LIMIT as i64);
        out.insert("type", "simple");
        if let Some(l) = self.limit {
            out.insert("limitAmount", l as i64);
        }
    }

    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        let eof = s.sort.is_eof();
        let advanced = s.sort.n();
        Ran {
            works: input.map_or(0, |c| c.works) + advanced + u64::from(eof),
            advanced,
            eof,
        }
    }

    fn describe_run(&self, s: &Stats, out: &mut Document) {
        let n = crate::reply::count;
        out.insert("sortPattern", self.pattern.clone());
        if let Some(l) = self.limit {
            out.insert("limitAmount", l as i64);
        }
        out.insert("memLimit", n(SORT_MEMORY_LIMIT as u64));
        out.insert("type", "simple");
        out.insert(
            "totalDataSizeSorted",
            n(s.sort_bytes.load(Ordering::Relaxed)),
        );
        out.insert("usedDisk", false);
        out.insert("spills", 0);
    }
}
