//! The blocking sort: documents held in memory (bounded to the first
//! skip + limit when there is a limit) and sorted, counting the bytes it
//! sorted for explain, and its explain stage. The buffer counts against the
//! operation's memory (`bisondb_error::memory`) while it is filled; when
//! that refuses it and the disk may be used, the sort hands over to the
//! aggregation `$sort`'s external sort.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::agg::spill::MemoryLimits;
use bisondb_query::sort::SortSpec;
use bson::{Document, RawDocumentBuf};

use super::explain::{Ran, Stage};
use super::{counted, Stats};
use crate::cursor::DocSource;

/// Blocking sort of `src` (see [`sort`]), counting the bytes sorted and the
/// documents returned into `stats` for explain. When the operation's memory
/// refuses the buffer and `allow_disk_use` allows, the sort goes on as the
/// aggregation `$sort` does, spilling to disk.
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
    let sorted: DocSource = match sort_in_memory(input, spec, keep, allow_disk_use, memory_limit)? {
        InMemory::Sorted(docs) => Box::new(docs.into_iter().map(Ok)),
        InMemory::Refused { held, rest, .. } => {
            let input: bisondb_query::agg::DocStream =
                Box::new(held.into_iter().map(Ok).chain(rest).map(|d| {
                    d.and_then(|d| {
                        Document::try_from(d.as_ref()).map_err(|e| {
                            MongoError::internal(format!("document cannot be sorted: {e}"))
                        })
                    })
                }));
            let limits = MemoryLimits {
                sort_bytes: memory_limit,
                allow_disk_use: true,
                ..MemoryLimits::default()
            };
            let sorted = bisondb_query::agg::sort_spilling(spec.clone(), input, &limits)?;
            let sorted = sorted.map(|d| {
                d.and_then(|d| {
                    RawDocumentBuf::try_from(&d).map_err(|e| {
                        MongoError::internal(format!("sorted document cannot be encoded: {e}"))
                    })
                })
            });
            match keep {
                Some(k) => Box::new(sorted.take(k)),
                None => Box::new(sorted),
            }
        }
    };
    Ok(counted(sorted, stats, |s| &s.sort))
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
/// documents stay in memory past it; the operation's memory refusing them
/// is 146 here ([`sorted_source`] spills instead).
pub fn sort_within(
    src: DocSource,
    spec: &bisondb_query::sort::SortSpec,
    keep: Option<usize>,
    allow_disk_use: bool,
    limit: usize,
) -> MongoResult<Vec<RawDocumentBuf>> {
    match sort_in_memory(src, spec, keep, allow_disk_use, limit)? {
        InMemory::Sorted(docs) => Ok(docs),
        InMemory::Refused { error, .. } => Err(error),
    }
}

/// What the in-memory sort ended with.
enum InMemory {
    /// Every document, sorted (the first `keep` with a `keep`).
    Sorted(Vec<RawDocumentBuf>),
    /// The operation's memory refused the buffer and the disk may be used:
    /// what was read, unsorted, and the rest of the input.
    Refused {
        held: Vec<RawDocumentBuf>,
        rest: DocSource,
        error: MongoError,
    },
}

fn sort_in_memory(
    mut src: DocSource,
    spec: &bisondb_query::sort::SortSpec,
    keep: Option<usize>,
    allow_disk_use: bool,
    limit: usize,
) -> MongoResult<InMemory> {
    // Every operation that sorts in memory comes here once.
    crate::metrics::add(&crate::metrics::SCAN_AND_ORDER, 1);
    let mut docs: Vec<RawDocumentBuf> = Vec::new();
    let mut bytes = 0usize;
    // The buffer counted against the operation's memory (and the
    // server's), in steps so a document costs no atomic: past either, the
    // sort spills with `allow_disk_use`, else fails with 146.
    let mut charge = bisondb_error::memory::Charge::new();
    const STEP: usize = 64 * 1024;
    let cmp = |a: &RawDocumentBuf, b: &RawDocumentBuf| spec.compare_raw(a, b);
    while let Some(d) = src.next() {
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
            if let Err(error) = charge.set(bytes) {
                if !allow_disk_use {
                    return Err(error);
                }
                return Ok(InMemory::Refused {
                    held: docs,
                    rest: src,
                    error,
                });
            }
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
    Ok(InMemory::Sorted(docs))
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
