//! The query planner: turning a filter (and sort, and hint) into a stream of
//! matching documents, and describing what ran for `explain`.
//!
//! How the pieces fit:
//! - [`choose`] (`plan/choose.rs`) picks one [`Plan`] among the candidates:
//!   a hint, a `$text` or `$near` query's own index (`plan/text.rs`,
//!   `plan/geo_near.rs`), a point lookup when the filter is an equality on
//!   `_id` (documents are clustered by `_id`), else the index with the
//!   longest prefix of equalities, then a range on the next field, then an
//!   order that gives the requested sort (forward or backward) so no blocking
//!   sort is needed, else a collection scan. `find`'s `min`/`max` bypass the
//!   choice (`plan/min_max.rs`).
//! - [`execute`] (`plan/access.rs`) runs the plan's [`Access`] path: the
//!   `_id` lookup, the index scan over the bounds the filter puts on the
//!   index's fields (then a fetch that re-checks the whole filter), or the
//!   collection scan. The commands stack the blocking sort (`plan/sort.rs`),
//!   skip and projection on top.
//! - Every stage counts what it examined and returned into [`Stats`]. For
//!   explain, a [`StageTree`] (`plan/explain.rs`) holds the plan's physical
//!   stages, each of which renders its own `winningPlan` node and, from the
//!   counters, its `executionStages` node: the access paths' stages live in
//!   `access.rs`, SORT in `sort.rs`, the text and geo stages in `text.rs` and
//!   `geo_near.rs`. `plan/explain.rs` also drives the explain of a read by a
//!   filter, sort and hint, and knows the verbosities.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::bounds::FieldBounds;
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, IndexInfo};
use bson::{Bson, Document, RawBsonRef};

use crate::cursor::DocSource;

mod access;
mod choose;
mod explain;
#[cfg(test)]
mod explain_golden;
mod geo_near;
mod min_max;
mod sort;
mod text;
mod wildcard;
pub use access::{count_keys, execute};
pub use choose::choose;
pub use explain::{execution_stats, explain_read, query_planner, StageTree, Verbosity};
pub use geo_near::{resolve_stage as resolve_geo_near, GeoNear};
pub use min_max::{choose as choose_min_max, MinMax, ReturnKey};
pub use sort::{collect, sort, sort_within, sorted_source, SORT_MEMORY_LIMIT};

/// What the client asked the planner to use.
#[derive(Debug, Clone, PartialEq)]
pub enum Hint {
    Name(String),
    Key(Document),
    /// `{$natural: 1}` / `{$natural: -1}`: a collection scan in that direction.
    Natural(bool),
}

impl Hint {
    /// Parses a `hint` argument (an index name or a key pattern). An empty
    /// document or string means no hint.
    pub fn parse(v: RawBsonRef<'_>) -> MongoResult<Option<Hint>> {
        match v {
            RawBsonRef::String("") => Ok(None),
            RawBsonRef::String(s) => Ok(Some(Hint::Name(s.to_string()))),
            RawBsonRef::Document(d) => {
                let d = crate::fields::to_document(d)?;
                if d.is_empty() {
                    return Ok(None);
                }
                if let Some(v) = d.get("$natural") {
                    let forward = !matches!(v, Bson::Int32(i) if *i < 0)
                        && !matches!(v, Bson::Int64(i) if *i < 0)
                        && !matches!(v, Bson::Double(x) if *x < 0.0);
                    return Ok(Some(Hint::Natural(forward)));
                }
                Ok(Some(Hint::Key(d)))
            }
            _ => Err(MongoError::bad_value("hint must be a string or an object")),
        }
    }
}

/// How the documents are reached.
#[derive(Debug, Clone)]
pub enum Access {
    /// Nothing can match (the collection does not exist).
    Empty,
    IdLookup(Bson),
    Collscan {
        reverse: bool,
        /// Asked for through a hint of the `_id` index. The collection is
        /// clustered by `_id`, so this scan in `_id` order is the scan of that
        /// index over `[MinKey, MaxKey]`, and explain shows it as mongod does:
        /// FETCH over an IXSCAN of `_id_` (every document read is also a key
        /// examined).
        id_index: bool,
        /// With `id_index`: the bounds the filter puts on `_id`; the scan
        /// reads their hull (`None`: the whole index).
        id_bounds: Option<FieldBounds>,
    },
    Ixscan {
        /// Boxed: an index's spec is large next to the other variants.
        index: Box<IndexInfo>,
        bounds: Vec<FieldBounds>,
        reverse: bool,
    },
    /// `find`'s `min`/`max` (`min_max.rs`): one range of whole keys of the
    /// hinted index (`None`: the `_id` index, the collection's own order),
    /// from `start` (inclusive) to `end` (exclusive), scanned forward.
    KeyRange {
        index: Option<Box<IndexInfo>>,
        start: Vec<Bson>,
        end: Vec<Bson>,
    },
}

/// A chosen plan.
#[derive(Debug, Clone)]
pub struct Plan {
    pub access: Access,
    /// The access path already returns documents in the requested sort order.
    pub provides_sort: bool,
    /// Counting index keys inside the bounds gives the exact number of
    /// matching documents (no fetch needed).
    pub count_exact: bool,
    /// A `$near` query: the scan's matches are ordered by distance
    /// (`geo_near.rs`).
    pub geo_near: Option<GeoNear>,
}

/// What one stage handed to its parent, and whether it reported its end.
#[derive(Debug, Default)]
pub struct Counter {
    pub returned: AtomicU64,
    pub eof: AtomicBool,
}

impl Counter {
    pub fn n(&self) -> u64 {
        self.returned.load(Ordering::Relaxed)
    }
    pub fn is_eof(&self) -> bool {
        self.eof.load(Ordering::Relaxed)
    }
    fn add(&self) {
        self.returned.fetch_add(1, Ordering::Relaxed);
    }
    fn end(&self) {
        self.eof.store(true, Ordering::Relaxed);
    }
}

/// Keys and documents examined while a plan runs (shared with its iterator),
/// and what each stage returned, for explain's `executionStats`.
#[derive(Debug, Default)]
pub struct Stats {
    pub keys_examined: AtomicU64,
    pub docs_examined: AtomicU64,
    /// The access stage (COLLSCAN, FETCH, IDHACK): documents it returned.
    pub access: Counter,
    /// The IXSCAN (or COUNT_SCAN) under it: index entries it returned.
    pub ixscan: Counter,
    /// Multikey entries checked against the `_id`s already returned, and the
    /// repeats dropped.
    pub dups_tested: AtomicU64,
    pub dups_dropped: AtomicU64,
    /// A blocking SORT: documents it returned and the bytes it sorted.
    pub sort: Counter,
    pub sort_bytes: AtomicU64,
    /// A SKIP: documents it returned.
    pub skip: Counter,
    /// What the whole plan returned (the caller counts it).
    pub out: Counter,
}

/// A finished plan adds what it examined to serverStatus's
/// `metrics.queryExecutor` (two relaxed additions, once per plan).
impl Drop for Stats {
    fn drop(&mut self) {
        crate::metrics::add(&crate::metrics::SCANNED, self.keys());
        crate::metrics::add(&crate::metrics::SCANNED_OBJECTS, self.docs());
    }
}

impl Stats {
    pub fn keys(&self) -> u64 {
        self.keys_examined.load(Ordering::Relaxed)
    }
    pub fn docs(&self) -> u64 {
        self.docs_examined.load(Ordering::Relaxed)
    }
}

/// Which [`Counter`] of a [`Stats`] a [`counted`] source feeds.
pub type Which = fn(&Stats) -> &Counter;

/// `src`, counting what it yields (and its end) into `which(stats)`.
pub fn counted(src: DocSource, stats: Arc<Stats>, which: Which) -> DocSource {
    let mut src = src;
    Box::new(std::iter::from_fn(move || {
        let next = src.next();
        match &next {
            Some(_) => which(&stats).add(),
            None => which(&stats).end(),
        }
        next
    }))
}

/// Counts one use of the plan's index for `$indexStats` (user operations
/// only, as mongod: callers are the commands, not the TTL monitor).
pub fn note_index_use(coll: Option<&Collection>, plan: &Plan) {
    let Some(coll) = coll else { return };
    match &plan.access {
        Access::Empty
        | Access::Collscan {
            id_index: false, ..
        } => {}
        Access::IdLookup(_) | Access::Collscan { id_index: true, .. } => coll.note_index_use(None),
        Access::Ixscan { index, .. } => coll.note_index_use(Some(&index.spec.name)),
        Access::KeyRange { index, .. } => {
            coll.note_index_use(index.as_ref().map(|i| i.spec.name.as_str()))
        }
    }
}

/// Documents of `coll` (None = the collection does not exist) that match `matcher`,
/// through the best plan the planner finds.
pub fn matching(coll: Option<&Collection>, matcher: &Matcher) -> MongoResult<DocSource> {
    let plan = choose(coll, matcher, None, None, None)?;
    execute(coll, &plan, matcher, Arc::new(Stats::default()))
}

/// Like [`matching`], with the filter document so partial indexes can serve it.
pub fn matching_doc(
    coll: Option<&Collection>,
    matcher: &Matcher,
    filter: &Document,
) -> MongoResult<DocSource> {
    let plan = choose(coll, matcher, Some(filter), None, None)?;
    execute(coll, &plan, matcher, Arc::new(Stats::default()))
}
