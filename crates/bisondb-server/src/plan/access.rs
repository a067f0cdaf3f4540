//! Access paths: how a plan reaches its documents. The `_id` point lookup,
//! the collection scan (in natural order for a capped collection, or through
//! the `_id` index when hinted), the index scan over the bounds the filter
//! puts on an index's fields followed by a fetch that re-checks the whole
//! filter, and counting index keys alone when they answer a count. Each
//! counts the keys and documents it examined into [`Stats`], and renders its
//! explain stage (IDHACK, COLLSCAN, IXSCAN or COUNT_SCAN) from them.

use std::collections::HashSet;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::collation::Collation;
use bisondb_query::index_keys::KeyField;
use bisondb_query::matcher::bounds::{field_bounds_in, FieldBounds, Interval};
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, IndexInfo, IndexScan, Snapshot};
use bson::{doc, Bson, Document, RawBson, RawDocumentBuf};

use super::explain::{Ran, Stage};
use super::{counted, geo_near, min_max, Access, Plan, Stats};
use crate::cursor::DocSource;
use crate::reply::count;

pub(super) fn bounds_for(index: &IndexInfo, m: &Matcher) -> Vec<FieldBounds> {
    bisondb_storage::hash_bounds(&index.spec, raw_bounds_for(index, m))
}

/// The bounds the filter puts on each field of `index`, before hashing.
pub(super) fn raw_bounds_for(index: &IndexInfo, m: &Matcher) -> Vec<FieldBounds> {
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

/// The collation of an index: `Some(None)` for simple, `None` when its stored
/// collation cannot be read (validated when the index was created, so only a
/// damaged catalog gets here).
pub(super) fn index_collation(index: &IndexInfo) -> Option<Option<Arc<Collation>>> {
    match &index.spec.collation {
        None => Some(None),
        Some(c) => crate::collation::parse_spec(c).ok(),
    }
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
        Access::IdLookup(id) => id_lookup(coll, id, m, &stats),
        Access::Collscan {
            reverse,
            id_index,
            id_bounds,
        } => Ok(collscan(
            coll,
            *reverse,
            id_index.then_some(id_bounds.as_ref()),
            m,
            stats,
        )),
        Access::Ixscan {
            index,
            bounds,
            reverse,
        } => ixscan(coll, index, bounds, *reverse, m, stats),
    }
}

/// The document with `_id` `id`, if it matches.
fn id_lookup(coll: &Collection, id: &Bson, m: Matcher, stats: &Stats) -> MongoResult<DocSource> {
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

/// Every document in natural order (insertion order, or `_id` order for a
/// clustered collection), or in `_id` order when `id_index` asks for the
/// `_id` index, each checked by `m`.
fn collscan(
    coll: &Collection,
    reverse: bool,
    id_index: Option<Option<&FieldBounds>>,
    m: Matcher,
    stats: Arc<Stats>,
) -> DocSource {
    let all = m.is_empty();
    // A capped collection's natural order is insertion order.
    let via_id = id_index.is_some();
    let mut scan: Box<dyn Iterator<Item = _> + Send> = if let Some(bounds) = id_index {
        // Only the `_id`s the filter allows: the hull of its bounds on `_id`
        // (every document is checked by `m` below).
        let (lo, hi) = bounds
            .map(id_hull)
            .unwrap_or((Bound::Unbounded, Bound::Unbounded));
        fn bound(b: &Bound<RawBson>) -> Bound<bson::RawBsonRef<'_>> {
            match b {
                Bound::Included(v) => Bound::Included(v.as_raw_bson_ref()),
                Bound::Excluded(v) => Bound::Excluded(v.as_raw_bson_ref()),
                Bound::Unbounded => Bound::Unbounded,
            }
        }
        Box::new(coll.scan_ids(bound(&lo), bound(&hi), reverse))
    } else if coll.is_capped() {
        Box::new(coll.scan_natural(reverse).map(|r| r.map(|(_, d)| d)))
    } else {
        Box::new(coll.scan(reverse))
    };
    let read = std::iter::from_fn(move || {
        let r = scan.next();
        match &r {
            Some(Ok(_)) => {
                stats.docs_examined.fetch_add(1, Ordering::Relaxed);
                if via_id {
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
    Box::new(read.filter_map(move |r| {
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
    }))
}

/// The smallest `_id` range holding every `_id` the filter can match
/// (MinKey and MaxKey: unbounded).
fn id_hull(b: &FieldBounds) -> (Bound<RawBson>, Bound<RawBson>) {
    let (Some(first), Some(last)) = (b.intervals.first(), b.intervals.last()) else {
        // Nothing can match: an empty range.
        return (
            Bound::Excluded(RawBson::MinKey),
            Bound::Excluded(RawBson::MinKey),
        );
    };
    let end = |v: &Bson, inclusive: bool| match (v, RawBson::try_from(v.clone())) {
        (Bson::MinKey | Bson::MaxKey, _) | (_, Err(_)) => Bound::Unbounded,
        (_, Ok(raw)) if inclusive => Bound::Included(raw),
        (_, Ok(raw)) => Bound::Excluded(raw),
    };
    (
        end(&first.lo, first.lo_inclusive),
        end(&last.hi, last.hi_inclusive),
    )
}

/// The documents the entries of `index` within `bounds` name, each checked by `m`.
fn ixscan(
    coll: &Collection,
    index: &IndexInfo,
    bounds: &[FieldBounds],
    reverse: bool,
    m: Matcher,
    stats: Arc<Stats>,
) -> MongoResult<DocSource> {
    let snapshot = coll.snapshot()?;
    let scan = coll.index_scan(snapshot.clone(), &index.spec.name, bounds, reverse);
    Fetch::over(coll, snapshot, scan, index, m, stats)
}

/// Counts the index keys inside the plan's bounds without fetching documents
/// (valid when `plan.count_exact`).
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
pub(super) struct Fetch {
    coll: Collection,
    snapshot: Arc<dyn Snapshot>,
    scan: IndexScan,
    /// Multikey indexes can name a document once per array element.
    seen: Option<HashSet<Vec<u8>>>,
    matcher: Matcher,
    stats: Arc<Stats>,
}

impl Fetch {
    /// The documents named by the entries `scan` reads (of `index`, in
    /// `snapshot`), each checked by `m`. No scan: the index was dropped after
    /// the plan was chosen.
    pub(super) fn over(
        coll: &Collection,
        snapshot: Arc<dyn Snapshot>,
        scan: Option<IndexScan>,
        index: &IndexInfo,
        m: Matcher,
        stats: Arc<Stats>,
    ) -> MongoResult<DocSource> {
        let scan = scan.ok_or_else(|| {
            MongoError::new(
                ErrorCode::QueryPlanKilled,
                format!("index {} dropped during the query", index.spec.name),
            )
        })?;
        Ok(Box::new(Fetch {
            coll: coll.clone(),
            snapshot,
            scan,
            // A wildcard index holds a document once per leaf in the bounds.
            seen: (index.multikey || super::wildcard::is_wildcard(index)).then(HashSet::new),
            matcher: m,
            stats,
        }))
    }

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

/// explain's IDHACK: the `_id` point lookup.
pub(super) struct IdHackStage;

impl Stage for IdHackStage {
    fn name(&self) -> &'static str {
        "IDHACK"
    }
    fn describe(&self, _: &mut Document) {}
    fn ran(&self, s: &Stats, _: Option<&Ran>) -> Ran {
        let eof = s.access.is_eof();
        Ran {
            works: s.docs().max(s.access.n()) + u64::from(eof),
            advanced: s.access.n(),
            eof,
        }
    }
    fn describe_run(&self, s: &Stats, out: &mut Document) {
        out.insert("keysExamined", count(s.keys()));
        out.insert("docsExamined", count(s.docs()));
    }
}

/// explain's EXPRESS_IXSCAN: mongod 8's express path, which answers a find
/// whose filter is only an `_id` equality (and nothing the express path
/// leaves to the planner: see `commands::find`) without planning. Its node
/// has no per-stage counters; the index key pattern is shown as a string, as
/// mongod 8.0 does; a projection is applied in the node itself.
pub(super) struct ExpressIdStage<'a> {
    pub projection: Option<&'a Document>,
}

impl Stage for ExpressIdStage<'_> {
    fn name(&self) -> &'static str {
        "EXPRESS_IXSCAN"
    }
    fn express(&self) -> bool {
        true
    }
    fn describe(&self, out: &mut Document) {
        out.insert("keyPattern", "{ _id: 1 }");
        out.insert("indexName", "_id_");
        if let Some(p) = self.projection {
            out.insert("projection", p.clone());
            out.insert("projectionCovered", false);
        }
    }
    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        IdHackStage.ran(s, input)
    }
    fn describe_run(&self, s: &Stats, out: &mut Document) {
        out.insert("keysExamined", count(s.keys()));
        out.insert("docsExamined", count(s.docs()));
    }
}

/// explain's COLLSCAN: every document, each checked against `filter`.
pub(super) struct CollscanStage<'a> {
    pub filter: Option<&'a Document>,
    pub reverse: bool,
}

impl Stage for CollscanStage<'_> {
    fn name(&self) -> &'static str {
        "COLLSCAN"
    }
    fn filter(&self) -> Option<&Document> {
        self.filter
    }
    fn describe(&self, out: &mut Document) {
        out.insert("direction", direction(self.reverse));
    }
    fn ran(&self, s: &Stats, _: Option<&Ran>) -> Ran {
        let eof = s.access.is_eof();
        Ran {
            works: s.docs() + u64::from(eof),
            advanced: s.access.n(),
            eof,
        }
    }
    fn describe_run(&self, s: &Stats, out: &mut Document) {
        self.describe(out);
        out.insert("docsExamined", count(s.docs()));
    }
}

fn direction(reverse: bool) -> &'static str {
    if reverse {
        "backward"
    } else {
        "forward"
    }
}

/// What part of an index a scan reads, as explain shows it.
pub(super) enum ScanBounds<'a> {
    /// The bounds the filter put on each field.
    Fields(&'a [FieldBounds]),
    /// The whole `_id` index.
    All,
    /// `find`'s `min`/`max`: whole keys from `start` (inclusive) to `end`
    /// (exclusive).
    KeyRange { start: &'a [Bson], end: &'a [Bson] },
}

/// explain's IXSCAN (or COUNT_SCAN, which reads keys without fetching).
pub(super) struct IndexScanStage<'a> {
    /// `None`: the `_id` index (the collection's own order).
    index: Option<&'a IndexInfo>,
    bounds: ScanBounds<'a>,
    reverse: bool,
    counting: bool,
}

impl<'a> IndexScanStage<'a> {
    pub fn new(index: Option<&'a IndexInfo>, bounds: ScanBounds<'a>, reverse: bool) -> Self {
        IndexScanStage {
            index,
            bounds,
            reverse,
            counting: false,
        }
    }

    /// The same scan as a COUNT_SCAN.
    pub fn counting(self) -> Self {
        IndexScanStage {
            counting: true,
            ..self
        }
    }

    /// The index's fields (the `_id` index's when none).
    fn fields(&self) -> Vec<KeyField> {
        match self.index {
            Some(ix) => ix.fields.clone(),
            None => vec![KeyField {
                path: "_id".into(),
                descending: false,
            }],
        }
    }

    /// `indexBounds` as an IXSCAN shows them: each field's intervals in the
    /// order the scan meets them.
    pub fn index_bounds(&self) -> Document {
        match &self.bounds {
            ScanBounds::Fields(bounds) => {
                let mut ib = Document::new();
                for (f, b) in self.fields().iter().zip(bounds.iter()) {
                    let shown: Vec<Bson> = if self.reverse != f.descending {
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
                ib
            }
            ScanBounds::All => {
                let full = if self.reverse {
                    "[MaxKey, MinKey]"
                } else {
                    "[MinKey, MaxKey]"
                };
                doc! {"_id": [full]}
            }
            ScanBounds::KeyRange { start, end } => {
                let fields = self.fields();
                let key_doc = |values: &[Bson]| -> Document {
                    fields
                        .iter()
                        .zip(values)
                        .map(|(f, v)| (f.path.clone(), v.clone()))
                        .collect()
                };
                doc! {
                    "startKey": key_doc(start),
                    "startKeyInclusive": true,
                    "endKey": key_doc(end),
                    "endKeyInclusive": false,
                }
            }
        }
    }

    /// mongod's COUNT_SCAN shows one key range as `startKey`/`endKey` with
    /// their inclusivity and no direction; bounds of several intervals keep
    /// the IXSCAN form (mongod would not count-scan them).
    fn count_range(&self) -> Option<Document> {
        let ScanBounds::Fields(bounds) = &self.bounds else {
            return None;
        };
        let fields = self.fields();
        let intervals: Vec<&Interval> = bounds
            .iter()
            .map(|b| match b.intervals.as_slice() {
                [i] => Some(i),
                _ => None,
            })
            .collect::<Option<_>>()
            .filter(|v: &Vec<&Interval>| v.len() == fields.len())?;
        let mut start = Document::new();
        let mut end = Document::new();
        let (mut start_inc, mut end_inc) = (true, true);
        for (f, i) in fields.iter().zip(&intervals) {
            // A descending field stores its values inverted: its range starts high.
            let (lo, lo_inc, hi, hi_inc) = if f.descending {
                (&i.hi, i.hi_inclusive, &i.lo, i.lo_inclusive)
            } else {
                (&i.lo, i.lo_inclusive, &i.hi, i.hi_inclusive)
            };
            start.insert(f.path.clone(), lo.clone());
            end.insert(f.path.clone(), hi.clone());
            start_inc &= lo_inc;
            end_inc &= hi_inc;
        }
        Some(doc! {
            "startKey": start,
            "startKeyInclusive": start_inc,
            "endKey": end,
            "endKeyInclusive": end_inc,
        })
    }

    /// The number of key ranges the scan seeks to: one per combination of
    /// the point intervals on the leading fields, times the intervals of the
    /// first ranged field (as the storage scan builds them).
    fn seeks(&self) -> u64 {
        let ScanBounds::Fields(bounds) = &self.bounds else {
            return 1;
        };
        let mut n = 1u64;
        for b in bounds.iter() {
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
}

impl Stage for IndexScanStage<'_> {
    fn name(&self) -> &'static str {
        if self.counting {
            "COUNT_SCAN"
        } else {
            "IXSCAN"
        }
    }

    fn describe(&self, out: &mut Document) {
        let (key, name, multikey, unique, sparse, partial) = match self.index {
            Some(ix) => (
                ix.spec.key.clone(),
                ix.spec.name.as_str(),
                ix.multikey,
                ix.spec.unique,
                ix.spec.sparse,
                ix.spec.partial_filter.is_some(),
            ),
            None => (doc! {"_id": 1}, "_id_", false, true, false, false),
        };
        let mut multikey_paths = Document::new();
        for f in self.fields() {
            let v: Vec<Bson> = if multikey {
                vec![Bson::String(f.path.clone())]
            } else {
                Vec::new()
            };
            multikey_paths.insert(f.path, v);
        }
        out.insert("keyPattern", key);
        out.insert("indexName", name);
        out.insert("isMultiKey", multikey);
        out.insert("multiKeyPaths", multikey_paths);
        out.insert("isUnique", unique);
        out.insert("isSparse", sparse);
        out.insert("isPartial", partial);
        out.insert("indexVersion", 2);
        let range = if self.counting {
            self.count_range()
        } else {
            None
        };
        match range {
            Some(range) => {
                out.insert("indexBounds", range);
            }
            None => {
                out.insert("direction", direction(self.reverse));
                out.insert("indexBounds", self.index_bounds());
            }
        }
    }

    fn ran(&self, s: &Stats, _: Option<&Ran>) -> Ran {
        let eof = s.ixscan.is_eof();
        let works = if self.counting {
            // keysExamined already counts the step that found the end.
            s.keys().max(s.ixscan.n() + u64::from(eof))
        } else {
            s.keys().max(s.ixscan.n()) + u64::from(eof)
        };
        Ran {
            works,
            advanced: s.ixscan.n(),
            eof,
        }
    }

    fn describe_run(&self, s: &Stats, out: &mut Document) {
        self.describe(out);
        out.insert("keysExamined", count(s.keys()));
        if self.counting {
            out.insert("dupsTested", 0);
            out.insert("dupsDropped", 0);
        } else {
            out.insert("seeks", count(self.seeks()));
            out.insert("dupsTested", count(s.dups_tested.load(Ordering::Relaxed)));
            out.insert("dupsDropped", count(s.dups_dropped.load(Ordering::Relaxed)));
        }
    }
}

/// An interval as a backward scan meets it: `[5, 1]` for `[1, 5]`.
fn reversed(i: &Interval) -> String {
    let flipped = Interval {
        lo: i.hi.clone(),
        lo_inclusive: i.hi_inclusive,
        hi: i.lo.clone(),
        hi_inclusive: i.lo_inclusive,
    };
    flipped.display()
}
