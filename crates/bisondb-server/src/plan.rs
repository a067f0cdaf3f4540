//! The query planner: turning a filter (and sort, and hint) into a stream of
//! matching documents, and describing what ran for `explain`.
//!
//! Access paths: a point lookup when the filter is an equality on `_id`
//! (documents are clustered by `_id`), an index scan over the bounds the filter
//! puts on an index's fields (then a fetch that re-checks the whole filter), or
//! a collection scan. Among indexes the planner prefers the longest prefix of
//! equalities, then a range on the next field, then an index whose order gives
//! the requested sort (forward or backward) so no blocking sort is needed.
//! Every access path counts the keys and documents it examined, so explain's
//! `executionStats` report what actually happened.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::collation::Collation;
use bisondb_query::matcher::bounds::{
    constrained_paths, field_bounds_in, implies, only_predicates_on, FieldBounds,
};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_storage::{Collection, IndexInfo, IndexScan, Snapshot};
use bson::{doc, Bson, Document, RawBson, RawBsonRef, RawDocumentBuf};

use crate::cursor::DocSource;

mod geo_near;
mod min_max;
mod text;
pub use geo_near::{resolve_stage as resolve_geo_near, GeoNear};
pub use min_max::{choose as choose_min_max, MinMax, ReturnKey};

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
                let d = crate::args::to_document(d)?;
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

fn bad_hint() -> MongoError {
    MongoError::bad_value("error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index")
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

/// Same key pattern: same field names in the same order with the same
/// directions (any numeric spelling).
fn same_pattern(a: &Document, b: &Document) -> bool {
    let dir = |v: &Bson| match v {
        Bson::Int32(i) => Some(*i as f64),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    };
    a.len() == b.len()
        && a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && dir(va).is_some() && dir(va) == dir(vb))
}

/// Whether scanning `index` forward (`Some(false)`) or backward
/// (`Some(true)`) yields `sort` order.
fn sort_direction(index: &IndexInfo, sort: &SortSpec, bounds: &[FieldBounds]) -> Option<bool> {
    let fields = sort.fields();
    if fields.is_empty() || index.multikey {
        return None;
    }
    // Index order is the index's collation order: it gives only a sort under
    // the same collation.
    match index_collation(index) {
        Some(c) if bisondb_query::collation::same(c.as_deref(), sort.collation()) => {}
        _ => return None,
    }
    // An index field the filter pins to one value does not change the order of
    // what the scan returns, so the sort may skip it: `{a: 3}` sorted by `b`
    // is served by `{a: 1, b: -1}` (mongod's rule).
    let pinned = |i: usize| {
        bounds
            .get(i)
            .is_some_and(|b| b.intervals.len() == 1 && b.is_points())
    };
    let hashed = index.spec.hashed_field();
    // Cells are in space-filling-curve order, not value order.
    if index.spec.geo_field().is_some() {
        return None;
    }
    let mut dir = None;
    let mut want = fields.iter().peekable();
    for (i, f) in index.fields.iter().enumerate() {
        match want.peek() {
            None => break,
            // Hashed keys are in hash order, not value order.
            Some((path, _)) if *path == f.path && hashed == Some(i) => return None,
            Some((path, asc)) if *path == f.path => {
                let reverse = *asc == f.descending;
                if *dir.get_or_insert(reverse) != reverse {
                    return None;
                }
                want.next();
            }
            Some(_) if pinned(i) => {}
            Some(_) => return None,
        }
    }
    if want.peek().is_some() {
        return None;
    }
    dir
}

/// Whether a sparse or partial index holds every document the filter can match.
fn usable(index: &IndexInfo, bounds: &[FieldBounds], filter_doc: Option<&Document>) -> bool {
    if let Some(p) = &index.spec.partial_filter {
        match filter_doc {
            Some(f) if implies(f, p) => {}
            _ => return false,
        }
    }
    if index.spec.sparse {
        // A document missing every indexed field is absent; it cannot match
        // when some field's bounds exclude null (what a missing field is).
        let excludes_null = |b: &FieldBounds| {
            !b.is_full()
                && !b.intervals.iter().any(|i| {
                    let probe = bisondb_query::matcher::bounds::Interval::point(Bson::Null);
                    contains(i, &probe.lo)
                })
        };
        if !bounds.iter().any(excludes_null) {
            return false;
        }
    }
    true
}

fn contains(i: &bisondb_query::matcher::bounds::Interval, v: &Bson) -> bool {
    use bisondb_query::compare::compare_bson;
    use std::cmp::Ordering::*;
    let lo = match compare_bson(&i.lo, v) {
        Less => true,
        Equal => i.lo_inclusive,
        Greater => false,
    };
    let hi = match compare_bson(v, &i.hi) {
        Less => true,
        Equal => i.hi_inclusive,
        Greater => false,
    };
    lo && hi
}

fn bounds_for(index: &IndexInfo, m: &Matcher) -> Vec<FieldBounds> {
    bisondb_storage::hash_bounds(&index.spec, raw_bounds_for(index, m))
}

/// The bounds the filter puts on each field of `index`, before hashing.
fn raw_bounds_for(index: &IndexInfo, m: &Matcher) -> Vec<FieldBounds> {
    // An index with a collation holds collation keys for strings: only string
    // predicates under that collation can bound it.
    let Some(collation) = index_collation(index) else {
        // A collation that cannot be read: the index bounds nothing.
        return index.fields.iter().map(|_| FieldBounds::full()).collect();
    };
    let geo = index.spec.geo_field().map(|(i, _)| i);
    index
        .fields
        .iter()
        .enumerate()
        .map(|(i, f)| {
            if geo == Some(i) {
                // A geo field holds cells, bounded only by geo predicates.
                return geo_near::field_bounds(index, m, &f.path);
            }
            field_bounds_in(m, &f.path, index.multikey, collation.as_deref())
        })
        .collect()
}

/// Whether `bounds` on a geo index come from a geo predicate on its geo
/// field: the index holds only documents with a location, so it may answer
/// only a query that needs one. True for other indexes.
fn geo_usable(index: &IndexInfo, bounds: &[FieldBounds]) -> bool {
    match index.spec.geo_field() {
        Some((i, _)) => bounds.get(i).is_some_and(|b| !b.is_full()),
        None => true,
    }
}

/// The collation of an index: `Some(None)` for simple, `None` when its stored
/// collation cannot be read (validated when the index was created, so only a
/// damaged catalog gets here).
fn index_collation(index: &IndexInfo) -> Option<Option<Arc<Collation>>> {
    match &index.spec.collation {
        None => Some(None),
        Some(c) => crate::collation::parse_spec(c).ok(),
    }
}

/// (equality prefix length, next field bounded): larger is better.
fn score(bounds: &[FieldBounds]) -> (usize, bool) {
    let points = bounds
        .iter()
        .take_while(|b| b.is_points() && !b.is_full())
        .count();
    let range = bounds.get(points).is_some_and(|b| !b.is_full());
    (points, range)
}

fn count_exact(index: &IndexInfo, bounds: &[FieldBounds], m: &Matcher) -> bool {
    // Hashed keys may collide, so counting them is never exact.
    if index.multikey
        || index.spec.sparse
        || index.spec.partial_filter.is_some()
        || index.spec.hashed_field().is_some()
        || index.spec.geo_field().is_some()
    {
        return false;
    }
    let paths: Vec<&str> = index.fields.iter().map(|f| f.path.as_str()).collect();
    if !only_predicates_on(m, &paths) {
        return false;
    }
    let mut product = 1usize;
    let mut ranged = false;
    for b in bounds {
        if ranged {
            if !b.is_full() {
                return false;
            }
            continue;
        }
        if !b.exact {
            return false;
        }
        if b.is_full() {
            ranged = true;
        } else if b.is_points() {
            product = product.saturating_mul(b.intervals.len());
        } else {
            ranged = true;
        }
    }
    product <= 4096
}

/// How good an index is for a query: equality prefix length, a range on the
/// next field, gives the sort order, fewer fields (larger is better).
type Rank = (usize, bool, bool, isize);

/// Chooses how to run a query on `coll`. `filter_doc` (the filter as sent)
/// lets partial indexes be used when the filter implies their filter.
pub fn choose(
    coll: Option<&Collection>,
    m: &Matcher,
    filter_doc: Option<&Document>,
    sort: Option<&SortSpec>,
    hint: Option<&Hint>,
) -> MongoResult<Plan> {
    let plan = |access, provides_sort, count_exact| Plan {
        access,
        provides_sort,
        count_exact,
        geo_near: None,
    };
    let Some(coll) = coll else {
        // mongod accepts any hint on a missing collection (nothing to scan).
        return Ok(plan(Access::Empty, true, true));
    };
    let indexes = coll.indexes();
    // `$text` must use the text index, whatever the hint (`plan/text.rs`).
    if let Some(access) = text::choose(&indexes, m, filter_doc)? {
        return Ok(plan(access, false, false));
    }
    if let Some(g) = geo_near::choose(&indexes, m)? {
        let access = match geo_near::near_bounds(&g) {
            Some(bounds) => Access::Ixscan {
                index: g.index.clone(),
                bounds,
                reverse: false,
            },
            None => Access::Collscan {
                reverse: false,
                id_index: false,
            },
        };
        return Ok(Plan {
            access,
            provides_sort: sort.is_none(),
            count_exact: false,
            geo_near: Some(g),
        });
    }
    let ixscan = |ix: &IndexInfo, reverse: bool| {
        let bounds = bounds_for(ix, m);
        let exact = count_exact(ix, &bounds, m);
        (
            Access::Ixscan {
                index: Box::new(ix.clone()),
                bounds,
                reverse,
            },
            exact,
        )
    };
    match hint {
        Some(Hint::Natural(forward)) => {
            return Ok(plan(
                Access::Collscan {
                    reverse: !forward,
                    id_index: false,
                },
                false,
                false,
            ))
        }
        Some(h) => {
            let is_id = match h {
                // A clustered collection's clustered index is its `_id` order.
                Hint::Name(n) => {
                    n == "_id_"
                        || crate::commands::clustered::Clustered::of_options(&coll.options())
                            .is_some_and(|c| c.name() == n)
                }
                Hint::Key(k) => same_pattern(k, &doc! {"_id": 1}),
                Hint::Natural(_) => false,
            };
            if is_id {
                return Ok(plan(
                    Access::Collscan {
                        reverse: false,
                        id_index: true,
                    },
                    false,
                    false,
                ));
            }
            let found = indexes.iter().find(|ix| match h {
                Hint::Name(n) => &ix.spec.name == n,
                Hint::Key(k) => same_pattern(k, &ix.spec.key),
                Hint::Natural(_) => false,
            });
            let Some(ix) = found.filter(|ix| !ix.spec.hidden) else {
                return Err(bad_hint());
            };
            // A text index (without `$text`, which took the text plan above)
            // would miss the documents without words, as a geo index without
            // a geo predicate on its field would miss the documents without
            // a location: the query scans the collection, and explain says so.
            if ix.spec.is_text() || !geo_usable(ix, &raw_bounds_for(ix, m)) {
                return Ok(plan(
                    Access::Collscan {
                        reverse: false,
                        id_index: false,
                    },
                    false,
                    false,
                ));
            }
            if let Some(p) = &ix.spec.partial_filter {
                if !filter_doc.is_some_and(|f| implies(f, p)) {
                    return Err(MongoError::bad_value("error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index (a partial index the filter does not imply cannot answer it)"));
                }
            }
            let dir = sort.and_then(|s| sort_direction(ix, s, &bounds_for(ix, m)));
            let (access, exact) = ixscan(ix, dir.unwrap_or(false));
            return Ok(plan(access, dir.is_some(), exact));
        }
        None => {}
    }
    if let Some(id) = m.id_equality() {
        return Ok(plan(Access::IdLookup(id), true, false));
    }
    let mut best: Option<(Rank, &IndexInfo, Vec<FieldBounds>)> = None;
    if !constrained_paths(m).is_empty() {
        // A text index holds only documents with words: it answers `$text`
        // alone (`plan/text.rs`).
        for ix in indexes
            .iter()
            .filter(|ix| !ix.spec.hidden && !ix.spec.is_text())
        {
            let raw = raw_bounds_for(ix, m);
            if !geo_usable(ix, &raw) {
                continue;
            }
            // Whether a sparse index may miss a match depends on the values
            // the filter allows, not on their hashes.
            if !usable(ix, &raw, filter_doc) {
                continue;
            }
            let bounds = bisondb_storage::hash_bounds(&ix.spec, raw);
            let (points, range) = score(&bounds);
            if points == 0 && !range {
                continue;
            }
            let sorted = sort.is_some_and(|s| sort_direction(ix, s, &bounds).is_some());
            let key = (points, range, sorted, -(ix.fields.len() as isize));
            if best.as_ref().is_none_or(|(k, _, _)| key > *k) {
                best = Some((key, ix, bounds));
            }
        }
    }
    if let Some((_, ix, bounds)) = best {
        let dir = sort.and_then(|s| sort_direction(ix, s, &bounds));
        let exact = count_exact(ix, &bounds, m);
        return Ok(plan(
            Access::Ixscan {
                index: Box::new(ix.clone()),
                bounds,
                reverse: dir.unwrap_or(false),
            },
            dir.is_some(),
            exact,
        ));
    }
    // No index narrows the filter: an index in sort order still saves the sort.
    if let Some(s) = sort {
        for ix in indexes.iter().filter(|ix| {
            !ix.spec.hidden
                && !ix.spec.sparse
                && ix.spec.partial_filter.is_none()
                && ix.spec.geo_field().is_none()
                && !ix.spec.is_text()
        }) {
            if let Some(reverse) = sort_direction(ix, s, &[]) {
                let (access, _) = ixscan(ix, reverse);
                return Ok(plan(access, true, false));
            }
        }
        // `_id` order is the collection's own order (a capped one's is
        // insertion order), bytewise for strings.
        if let [(path, asc)] = s.fields() {
            if path == "_id" && !coll.is_capped() && s.collation().is_none() {
                return Ok(plan(
                    Access::Collscan {
                        reverse: !asc,
                        id_index: false,
                    },
                    true,
                    false,
                ));
            }
        }
    }
    Ok(plan(
        Access::Collscan {
            reverse: false,
            id_index: false,
        },
        false,
        false,
    ))
}

/// Runs `plan`, yielding the documents that match `m` and counting what it
/// examined into `stats`.
pub fn execute(
    coll: Option<&Collection>,
    plan: &Plan,
    m: &Matcher,
    stats: Arc<Stats>,
) -> MongoResult<DocSource> {
    let Some(coll) = coll else {
        stats.access.end();
        return Ok(Box::new(std::iter::empty()));
    };
    let src = access_source(coll, plan, m, stats.clone())?;
    let src = counted(src, stats, |s| &s.access);
    match &plan.geo_near {
        Some(g) => geo_near::sorted(src, g),
        None => Ok(src),
    }
}

fn access_source(
    coll: &Collection,
    plan: &Plan,
    m: &Matcher,
    stats: Arc<Stats>,
) -> MongoResult<DocSource> {
    let m = m.clone();
    match &plan.access {
        Access::Empty => Ok(Box::new(std::iter::empty())),
        Access::KeyRange { index, start, end } => {
            min_max::source(coll, index.as_deref(), start, end, m, stats)
        }
        Access::IdLookup(id) => {
            let id = RawBson::try_from(id.clone()).map_err(crate::request::invalid_bson)?;
            let found = coll.get(id.as_raw_bson_ref()).map_err(MongoError::from)?;
            stats.keys_examined.fetch_add(1, Ordering::Relaxed);
            stats
                .docs_examined
                .fetch_add(found.is_some() as u64, Ordering::Relaxed);
            Ok(Box::new(
                found.into_iter().filter(move |d| m.matches(d)).map(Ok),
            ))
        }
        Access::Collscan { reverse, id_index } => {
            let all = m.is_empty();
            let id_index = *id_index;
            // A capped collection's natural order is insertion order.
            let mut scan: Box<dyn Iterator<Item = _> + Send> = if coll.is_capped() && !id_index {
                Box::new(coll.scan_natural(*reverse).map(|r| r.map(|(_, d)| d)))
            } else {
                Box::new(coll.scan(*reverse))
            };
            let read = std::iter::from_fn(move || {
                let r = scan.next();
                match &r {
                    Some(Ok(_)) => {
                        stats.docs_examined.fetch_add(1, Ordering::Relaxed);
                        if id_index {
                            // The `_id` index entry of this document.
                            stats.keys_examined.fetch_add(1, Ordering::Relaxed);
                            stats.ixscan.add();
                        }
                    }
                    Some(Err(_)) => {}
                    None => stats.ixscan.end(),
                }
                r
            });
            Ok(Box::new(read.filter_map(move |r| {
                match r {
                    Ok(d) if all => Some(Ok(d)),
                    // $expr may fail to evaluate; mongod fails the operation rather than skip the document.
                    Ok(d) => match m.try_matches(&d) {
                        Ok(true) => Some(Ok(d)),
                        Ok(false) => None,
                        Err(e) => Some(Err(e)),
                    },
                    Err(e) => Some(Err(MongoError::from(e))),
                }
            })))
        }
        Access::Ixscan {
            index,
            bounds,
            reverse,
        } => {
            let snapshot = coll.snapshot()?;
            let scan = coll
                .index_scan(snapshot.clone(), &index.spec.name, bounds, *reverse)
                .ok_or_else(|| {
                    MongoError::new(
                        ErrorCode::QueryPlanKilled,
                        format!("index {} dropped during the query", index.spec.name),
                    )
                })?;
            Ok(Box::new(Fetch {
                coll: coll.clone(),
                snapshot,
                scan,
                seen: index.multikey.then(HashSet::new),
                matcher: m,
                stats,
            }))
        }
    }
}

/// Counts the index keys inside the plan's bounds without fetching documents
/// (valid when `plan.count_exact`).
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

pub fn count_keys(coll: &Collection, plan: &Plan, stats: &Stats) -> MongoResult<u64> {
    let Access::Ixscan {
        index,
        bounds,
        reverse,
    } = &plan.access
    else {
        return Err(MongoError::internal("count_keys without an index scan"));
    };
    let mut scan = coll
        .index_scan(coll.snapshot()?, &index.spec.name, bounds, *reverse)
        .ok_or_else(|| MongoError::new(ErrorCode::QueryPlanKilled, "index dropped during count"))?;
    let mut n = 0u64;
    for r in scan.by_ref() {
        r?;
        n += 1;
        stats.ixscan.add();
    }
    stats.ixscan.end();
    // mongod's COUNT_SCAN counts a key examined on every step, including the
    // last one that finds the end of the range (10 matching keys: 11).
    stats
        .keys_examined
        .fetch_add(scan.keys_examined().saturating_add(1), Ordering::Relaxed);
    Ok(n)
}

/// Index scan then fetch: each entry's document is read from the scan's
/// snapshot and re-checked against the whole filter (bounds are a superset).
/// Results follow index order, as mongod's IXSCAN → FETCH does: applications and
/// drivers' tests rely on it (pymongo's `test_hint`).
struct Fetch {
    coll: Collection,
    snapshot: Arc<dyn Snapshot>,
    scan: IndexScan,
    /// Multikey indexes can name a document once per array element.
    seen: Option<HashSet<Vec<u8>>>,
    matcher: Matcher,
    stats: Arc<Stats>,
}

impl Fetch {
    /// The next encoded `_id` to fetch, skipping repeats from multikey entries.
    fn next_id(&mut self) -> Option<MongoResult<Vec<u8>>> {
        loop {
            let before = self.scan.keys_examined();
            let next = self.scan.next();
            let after = self.scan.keys_examined();
            self.stats
                .keys_examined
                .fetch_add(after.saturating_sub(before), Ordering::Relaxed);
            let Some(next) = next else {
                self.stats.ixscan.end();
                return None;
            };
            match next {
                Err(e) => return Some(Err(e.into())),
                Ok(id) => {
                    if let Some(seen) = &mut self.seen {
                        self.stats.dups_tested.fetch_add(1, Ordering::Relaxed);
                        if !seen.insert(id.clone()) {
                            self.stats.dups_dropped.fetch_add(1, Ordering::Relaxed);
                            continue;
                        }
                    }
                    self.stats.ixscan.add();
                    return Some(Ok(id));
                }
            }
        }
    }
}

impl Iterator for Fetch {
    type Item = MongoResult<RawDocumentBuf>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            let id = match self.next_id()? {
                Ok(id) => id,
                Err(e) => return Some(Err(e)),
            };
            let doc = match self.coll.fetch(self.snapshot.as_ref(), &id) {
                Ok(Some(d)) => d,
                Ok(None) => continue,
                Err(e) => return Some(Err(e.into())),
            };
            self.stats.docs_examined.fetch_add(1, Ordering::Relaxed);
            match self.matcher.try_matches(&doc) {
                Ok(true) => return Some(Ok(doc)),
                Ok(false) => continue,
                Err(e) => return Some(Err(e)),
            }
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

/// The access part of explain's `winningPlan`.
pub fn describe(plan: &Plan, filter: &Document, count_scan: bool) -> Document {
    if let Some(g) = &plan.geo_near {
        let scan = Plan {
            geo_near: None,
            ..plan.clone()
        };
        return geo_near::describe(g, describe(&scan, filter, count_scan));
    }
    let filter_field = |d: &mut Document| {
        if !filter.is_empty() {
            d.insert("filter", filter.clone());
        }
    };
    match &plan.access {
        Access::Empty => doc! {"stage": "EOF"},
        Access::KeyRange { index, start, end } => {
            let mut fetch = doc! {"stage": "FETCH"};
            filter_field(&mut fetch);
            fetch.insert(
                "inputStage",
                min_max::describe(index.as_deref(), start, end),
            );
            fetch
        }
        Access::IdLookup(_) => doc! {"stage": "IDHACK"},
        Access::Collscan {
            reverse,
            id_index: true,
        } => {
            let full = if *reverse {
                "[MaxKey, MinKey]"
            } else {
                "[MinKey, MaxKey]"
            };
            let scan = doc! {
                "stage": "IXSCAN",
                "keyPattern": {"_id": 1},
                "indexName": "_id_",
                "isMultiKey": false,
                "multiKeyPaths": {"_id": []},
                "isUnique": true,
                "isSparse": false,
                "isPartial": false,
                "indexVersion": 2,
                "direction": if *reverse { "backward" } else { "forward" },
                "indexBounds": {"_id": [full]},
            };
            let mut fetch = doc! {"stage": "FETCH"};
            filter_field(&mut fetch);
            fetch.insert("inputStage", scan);
            fetch
        }
        Access::Collscan { reverse, .. } => {
            let mut d = doc! {"stage": "COLLSCAN"};
            filter_field(&mut d);
            d.insert("direction", if *reverse { "backward" } else { "forward" });
            d
        }
        Access::Ixscan {
            index,
            bounds,
            reverse,
        } => {
            let mut ib = Document::new();
            for (f, b) in index.fields.iter().zip(bounds) {
                let shown: Vec<Bson> = if *reverse != f.descending {
                    b.intervals
                        .iter()
                        .rev()
                        .map(|i| Bson::String(reversed(i)))
                        .collect()
                } else {
                    b.intervals
                        .iter()
                        .map(|i| Bson::String(i.display()))
                        .collect()
                };
                ib.insert(f.path.clone(), shown);
            }
            let mut multikey_paths = Document::new();
            for f in &index.fields {
                let v: Vec<Bson> = if index.multikey {
                    vec![Bson::String(f.path.clone())]
                } else {
                    Vec::new()
                };
                multikey_paths.insert(f.path.clone(), v);
            }
            let scan = doc! {
                "stage": if count_scan { "COUNT_SCAN" } else { "IXSCAN" },
                "keyPattern": index.spec.key.clone(),
                "indexName": index.spec.name.clone(),
                "isMultiKey": index.multikey,
                "multiKeyPaths": multikey_paths,
                "isUnique": index.spec.unique,
                "isSparse": index.spec.sparse,
                "isPartial": index.spec.partial_filter.is_some(),
                "indexVersion": 2,
                "direction": if *reverse { "backward" } else { "forward" },
                "indexBounds": ib,
            };
            if count_scan {
                return count_scan_stage(scan, index, bounds);
            }
            if index.spec.is_text() {
                return text::describe(index, filter, scan);
            }
            let mut fetch = doc! {"stage": "FETCH"};
            // Bounds that answer the whole filter leave FETCH nothing to
            // check, and mongod shows no filter there.
            if !plan.count_exact {
                filter_field(&mut fetch);
            }
            fetch.insert("inputStage", scan);
            fetch
        }
    }
}

/// mongod's COUNT_SCAN shows one key range as `startKey`/`endKey` with their
/// inclusivity and no direction; bounds of several intervals keep the IXSCAN
/// form (mongod would not count-scan them).
fn count_scan_stage(mut scan: Document, index: &IndexInfo, bounds: &[FieldBounds]) -> Document {
    let single: Option<Vec<&bisondb_query::matcher::bounds::Interval>> = bounds
        .iter()
        .map(|b| match b.intervals.as_slice() {
            [i] => Some(i),
            _ => None,
        })
        .collect();
    let Some(intervals) = single.filter(|v| v.len() == index.fields.len()) else {
        return scan;
    };
    let mut start = Document::new();
    let mut end = Document::new();
    for (f, i) in index.fields.iter().zip(&intervals) {
        // A descending field stores its values inverted: its range starts high.
        let (lo, hi) = if f.descending {
            (&i.hi, &i.lo)
        } else {
            (&i.lo, &i.hi)
        };
        start.insert(f.path.clone(), lo.clone());
        end.insert(f.path.clone(), hi.clone());
    }
    let (start_inc, end_inc) =
        intervals
            .iter()
            .zip(&index.fields)
            .fold((true, true), |(s, e), (i, f)| {
                let (lo_inc, hi_inc) = if f.descending {
                    (i.hi_inclusive, i.lo_inclusive)
                } else {
                    (i.lo_inclusive, i.hi_inclusive)
                };
                (s && lo_inc, e && hi_inc)
            });
    scan.remove("direction");
    scan.insert(
        "indexBounds",
        doc! {
            "startKey": start,
            "startKeyInclusive": start_inc,
            "endKey": end,
            "endKeyInclusive": end_inc,
        },
    );
    scan
}

/// An interval as a backward scan meets it: `[5, 1]` for `[1, 5]`.
fn reversed(i: &bisondb_query::matcher::bounds::Interval) -> String {
    let flipped = bisondb_query::matcher::bounds::Interval {
        lo: i.hi.clone(),
        lo_inclusive: i.hi_inclusive,
        hi: i.lo.clone(),
        hi_inclusive: i.lo_inclusive,
    };
    flipped.display()
}

/// The number of key ranges an index scan over `bounds` seeks to: one per
/// combination of the point intervals on the leading fields, times the
/// intervals of the first ranged field (as the storage scan builds them).
fn seeks(plan: Option<&Plan>) -> u64 {
    let Some(Access::Ixscan { bounds, .. }) = plan.map(|p| &p.access) else {
        return 1;
    };
    let mut n = 1u64;
    for b in bounds {
        if b.is_full() {
            break;
        }
        n = n.saturating_mul(b.intervals.len() as u64);
        if !b.is_points() {
            break;
        }
    }
    n
}

/// How a stage ran: calls to its `work()`, results it returned, whether it
/// reached its end.
struct Ran {
    works: u64,
    advanced: u64,
    eof: bool,
}

impl Ran {
    /// A stage that works once per call of its child (FETCH, SKIP): as many
    /// works as the child, and at least one per result plus the end.
    fn passing_through(child: Option<&Ran>, advanced: u64, eof: bool) -> Ran {
        Ran {
            works: child.map_or(0, |c| c.works).max(advanced + u64::from(eof)),
            advanced,
            eof,
        }
    }
}

/// explain's `executionStats.executionStages`: the `winning` plan tree with
/// each stage's statistics from what ran (`stats`). BisonDB's stages are
/// iterators, not mongod's `work()` state machines, so `works` is derived as
/// mongod's would count it: a scan does one work per key or document examined
/// plus one that finds its end; FETCH, SKIP, LIMIT and projections one per
/// work of their input (LIMIT one more when it stops before its input ends);
/// a blocking SORT one per input work, then one per document it returns and
/// one for its end. `needTime` is what is left after `advanced` and the end.
/// Nothing yields, so `needYield`, `saveState` and `restoreState` are 0;
/// times are not measured per stage (`executionTimeMillisEstimate` 0).
pub fn execution_stages(winning: &Document, plan: Option<&Plan>, stats: &Stats) -> Document {
    annotate(winning, plan, stats).0
}

fn annotate(stage: &Document, plan: Option<&Plan>, s: &Stats) -> (Document, Ran) {
    let name = stage.get_str("stage").unwrap_or_default();
    let child = stage
        .get_document("inputStage")
        .ok()
        .map(|c| annotate(c, plan, s));
    let n = crate::reply::count;
    let mut extra = Document::new();
    let eof_n = |b: bool| b as u64;
    let ran = match name {
        "COLLSCAN" => {
            extra.insert("docsExamined", n(s.docs()));
            let eof = s.access.is_eof();
            Ran {
                works: s.docs() + eof_n(eof),
                advanced: s.access.n(),
                eof,
            }
        }
        "IDHACK" => {
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("docsExamined", n(s.docs()));
            let eof = s.access.is_eof();
            Ran {
                works: s.docs().max(s.access.n()) + eof_n(eof),
                advanced: s.access.n(),
                eof,
            }
        }
        "IXSCAN" => {
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("seeks", n(seeks(plan)));
            extra.insert("dupsTested", n(s.dups_tested.load(Ordering::Relaxed)));
            extra.insert("dupsDropped", n(s.dups_dropped.load(Ordering::Relaxed)));
            let eof = s.ixscan.is_eof();
            Ran {
                works: s.keys().max(s.ixscan.n()) + eof_n(eof),
                advanced: s.ixscan.n(),
                eof,
            }
        }
        "COUNT_SCAN" => {
            // keysExamined already counts the step that found the end.
            extra.insert("keysExamined", n(s.keys()));
            extra.insert("dupsTested", 0);
            extra.insert("dupsDropped", 0);
            let eof = s.ixscan.is_eof();
            Ran {
                works: s.keys().max(s.ixscan.n() + eof_n(eof)),
                advanced: s.ixscan.n(),
                eof,
            }
        }
        "FETCH" => {
            extra.insert("docsExamined", n(s.docs()));
            extra.insert("alreadyHasObj", 0);
            Ran::passing_through(
                child.as_ref().map(|c| &c.1),
                s.access.n(),
                s.access.is_eof(),
            )
        }
        "SORT" => {
            extra.insert("memLimit", n(SORT_MEMORY_LIMIT as u64));
            extra.insert("type", "simple");
            extra.insert(
                "totalDataSizeSorted",
                n(s.sort_bytes.load(Ordering::Relaxed)),
            );
            extra.insert("usedDisk", false);
            extra.insert("spills", 0);
            let eof = s.sort.is_eof();
            let advanced = s.sort.n();
            Ran {
                works: child.as_ref().map_or(0, |c| c.1.works) + advanced + eof_n(eof),
                advanced,
                eof,
            }
        }
        "SKIP" => Ran::passing_through(child.as_ref().map(|c| &c.1), s.skip.n(), s.skip.is_eof()),
        "LIMIT" => {
            let advanced = s.out.n();
            let amount = match stage.get("limitAmount") {
                Some(Bson::Int32(i)) => *i as u64,
                Some(Bson::Int64(i)) => *i as u64,
                _ => u64::MAX,
            };
            let hit = advanced >= amount;
            let (child_works, child_eof) =
                child.as_ref().map_or((0, true), |c| (c.1.works, c.1.eof));
            let eof = hit || child_eof;
            Ran {
                works: (child_works + eof_n(hit && !child_eof)).max(advanced + eof_n(eof)),
                advanced,
                eof,
            }
        }
        "EOF" | "RECORD_STORE_FAST_COUNT" => Ran {
            works: 1,
            advanced: 0,
            eof: true,
        },
        "COUNT" => {
            let (works, eof) = child.as_ref().map_or((1, true), |c| (c.1.works, c.1.eof));
            Ran {
                works,
                advanced: 0,
                eof,
            }
        }
        // Projections and anything else passing its input through.
        _ => match &child {
            Some((_, c)) => Ran {
                works: c.works,
                advanced: c.advanced,
                eof: c.eof,
            },
            None => Ran {
                works: s.out.n() + eof_n(s.out.is_eof()),
                advanced: s.out.n(),
                eof: s.out.is_eof(),
            },
        },
    };
    let mut d = doc! {"stage": name};
    if let Some(f) = stage.get("filter") {
        d.insert("filter", f.clone());
    }
    d.insert("nReturned", n(ran.advanced));
    d.insert("executionTimeMillisEstimate", 0);
    d.insert("works", n(ran.works));
    d.insert("advanced", n(ran.advanced));
    d.insert(
        "needTime",
        n(ran.works.saturating_sub(ran.advanced + eof_n(ran.eof))),
    );
    d.insert("needYield", 0);
    d.insert("saveState", 0);
    d.insert("restoreState", 0);
    d.insert("isEOF", ran.eof as i32);
    for (k, v) in stage {
        if !matches!(k.as_str(), "stage" | "filter" | "inputStage") && !extra.contains_key(k) {
            d.insert(k.clone(), v.clone());
        }
    }
    for (k, v) in extra {
        d.insert(k, v);
    }
    if let Some((c, _)) = child {
        d.insert("inputStage", c);
    }
    (d, ran)
}

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

#[cfg(test)]
mod tests {
    use super::*;
    use bisondb_storage::{IndexSpec, MemoryEngine, Storage};

    fn spec(name: &str, key: Document) -> IndexSpec {
        IndexSpec {
            name: name.into(),
            key,
            unique: false,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: None,
            hidden: false,
            background: None,
            collation: None,
            type_options: bson::Document::new(),
        }
    }

    fn setup() -> Collection {
        let s = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
        for (n, k) in [
            ("a_1", doc! {"a": 1}),
            ("a_1_b_-1", doc! {"a": 1, "b": -1}),
            ("c_-1", doc! {"c": -1}),
        ] {
            s.create_index("db", "t", spec(n, k))
                .unwrap_or_else(|e| panic!("{e}"));
        }
        let mut hidden = spec("h_1", doc! {"h": 1});
        hidden.hidden = true;
        s.create_index("db", "t", hidden)
            .unwrap_or_else(|e| panic!("{e}"));
        s.collection("db", "t").unwrap_or_else(|| panic!("coll"))
    }

    fn chosen(c: &Collection, filter: Document, sort: Option<Document>) -> String {
        let m = Matcher::parse_doc(&filter).unwrap_or_else(|e| panic!("{e}"));
        let sort = sort.map(|s| SortSpec::parse(&s).unwrap_or_else(|e| panic!("{e}")));
        let p = choose(Some(c), &m, Some(&filter), sort.as_ref(), None)
            .unwrap_or_else(|e| panic!("{e}"));
        match p.access {
            Access::Ixscan { index, reverse, .. } => format!(
                "{}{}{}",
                index.spec.name,
                if reverse { " backward" } else { "" },
                if p.provides_sort { " sorted" } else { "" }
            ),
            Access::Collscan { .. } => "COLLSCAN".into(),
            Access::KeyRange { .. } => "KEYRANGE".into(),
            Access::IdLookup(_) => "IDHACK".into(),
            Access::Empty => "EOF".into(),
        }
    }

    #[test]
    fn planner_choices_table() {
        let c = setup();
        let cases: Vec<(Document, Option<Document>, &str)> = vec![
            (doc! {"a": 1}, None, "a_1"),
            (doc! {"a": 1, "b": 2}, None, "a_1_b_-1"),
            (doc! {"a": {"$gt": 1}}, None, "a_1"),
            (doc! {"a": {"$in": [1, 2]}}, None, "a_1"),
            (doc! {"b": 1}, None, "COLLSCAN"),
            (doc! {"h": 1}, None, "COLLSCAN"),
            (doc! {"_id": 3}, None, "IDHACK"),
            (doc! {}, Some(doc! {"c": 1}), "c_-1 backward sorted"),
            (doc! {}, Some(doc! {"c": -1}), "c_-1 sorted"),
            (doc! {"c": {"$gt": 1}}, Some(doc! {"c": -1}), "c_-1 sorted"),
            (
                doc! {},
                Some(doc! {"a": -1, "b": 1}),
                "a_1_b_-1 backward sorted",
            ),
            (doc! {}, Some(doc! {"b": 1}), "COLLSCAN"),
            (doc! {"$or": [{"a": 1}, {"a": 2}]}, None, "COLLSCAN"),
        ];
        for (f, s, want) in cases {
            assert_eq!(
                chosen(&c, f.clone(), s.clone()),
                want,
                "filter {f} sort {s:?}"
            );
        }
    }

    #[test]
    fn hints_name_an_index_or_fail_with_code_2() {
        let c = setup();
        let m = Matcher::parse_doc(&doc! {}).unwrap_or_else(|e| panic!("{e}"));
        let ok = [
            Hint::Name("a_1".into()),
            Hint::Key(doc! {"a": 1, "b": -1}),
            Hint::Name("_id_".into()),
            Hint::Natural(false),
        ];
        for h in ok {
            assert!(choose(Some(&c), &m, None, None, Some(&h)).is_ok(), "{h:?}");
        }
        let bad = [
            Hint::Name("nope".into()),
            Hint::Key(doc! {"a": -1}),
            Hint::Name("h_1".into()),
        ];
        for h in bad {
            let e = choose(Some(&c), &m, None, None, Some(&h))
                .err()
                .unwrap_or_else(|| panic!("{h:?} should fail"));
            assert_eq!(e.code.code(), 2);
        }
    }

    #[test]
    fn count_exactness() {
        let c = setup();
        let exact = |f: Document| {
            let m = Matcher::parse_doc(&f).unwrap_or_else(|e| panic!("{e}"));
            choose(Some(&c), &m, Some(&f), None, None)
                .unwrap_or_else(|e| panic!("{e}"))
                .count_exact
        };
        assert!(exact(doc! {"a": 1}));
        assert!(exact(doc! {"a": {"$gte": 1, "$lt": 5}}));
        assert!(!exact(doc! {"a": 1, "z": 1}));
        assert!(!exact(doc! {"a": null}));
        assert!(!exact(doc! {"a": {"$exists": true}}));
    }
}
