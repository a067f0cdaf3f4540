//! The blocking sort: documents held in memory (bounded to the first
//! skip + limit when there is a limit) and sorted, counting the bytes it
//! sorted for explain.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bson::RawDocumentBuf;

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
    let mut docs: Vec<RawDocumentBuf> = Vec::new();
    let mut bytes = 0usize;
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
