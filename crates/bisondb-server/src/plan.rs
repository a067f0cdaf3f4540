//! Turning a filter into a stream of matching documents.
//!
//! Today there are two plans: a point lookup when the filter is an equality on `_id`
//! (documents are clustered by `_id`), and a collection scan otherwise. Secondary
//! indexes will add index scans here, behind the same interface.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_storage::Collection;
use bson::{RawBson, RawDocumentBuf};

use crate::cursor::DocSource;

/// Documents of `coll` (None = the collection does not exist) that match `matcher`.
pub fn matching(coll: Option<&Collection>, matcher: &Matcher) -> MongoResult<DocSource> {
    let Some(coll) = coll else {
        return Ok(Box::new(std::iter::empty()));
    };
    if let Some(id) = matcher.id_equality() {
        let id = RawBson::try_from(id).map_err(crate::request::invalid_bson)?;
        let found = coll.get(id.as_raw_bson_ref()).map_err(MongoError::from)?;
        // The filter may hold more than the _id equality in future plans; re-check.
        let m = matcher.clone();
        return Ok(Box::new(
            found.into_iter().filter(move |d| m.matches(d)).map(Ok),
        ));
    }
    let m = matcher.clone();
    let all = m.is_empty();
    Ok(Box::new(coll.scan(false).filter_map(move |r| match r {
        Ok(d) if all => Some(Ok(d)),
        // $expr may fail to evaluate; mongod fails the operation rather than skip the document.
        Ok(d) => match m.try_matches(&d) {
            Ok(true) => Some(Ok(d)),
            Ok(false) => None,
            Err(e) => Some(Err(e)),
        },
        Err(e) => Some(Err(MongoError::from(e))),
    })))
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
        if bytes > SORT_MEMORY_LIMIT && !allow_disk_use {
            return Err(MongoError::new(
                bisondb_error::ErrorCode::QueryExceededMemoryLimitNoDiskUseAllowed,
                "Sort exceeded memory limit of 104857600 bytes, but did not opt in to external sorting.",
            ));
        }
    }
    docs.sort_by(cmp);
    if let Some(k) = keep {
        docs.truncate(k);
    }
    Ok(docs)
}
