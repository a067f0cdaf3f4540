//! Choosing a plan among the candidates: a hint, a `$text` or `$near`
//! query's own index, the `_id` point lookup, the index ranked best by the
//! bounds the filter puts on it and whether its order gives the sort, an
//! index or the `_id` order that saves the sort, else a collection scan.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::bounds::{
    constrained_paths, field_bounds, implies, only_predicates_on, FieldBounds,
};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_storage::{Collection, IndexInfo};
use bson::{doc, Bson, Document};

use super::access::{bounds_for, index_collation, raw_bounds_for};
use super::{geo_near, text, Access, GeoNear, Hint, Plan};

pub(super) fn bad_hint() -> MongoError {
    MongoError::bad_value("error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index")
}

/// Same key pattern: same field names in the same order with the same
/// directions (any numeric spelling).
pub(super) fn same_pattern(a: &Document, b: &Document) -> bool {
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
pub(super) fn sort_direction(
    index: &IndexInfo,
    sort: &SortSpec,
    bounds: &[FieldBounds],
) -> Option<bool> {
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

pub(super) fn contains(i: &bisondb_query::matcher::bounds::Interval, v: &Bson) -> bool {
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

/// Whether `bounds` on a geo index come from a geo predicate on its geo
/// field: the index holds only documents with a location, so it may answer
/// only a query that needs one. True for other indexes.
fn geo_usable(index: &IndexInfo, bounds: &[FieldBounds]) -> bool {
    match index.spec.geo_field() {
        Some((i, _)) => bounds.get(i).is_some_and(|b| !b.is_full()),
        None => true,
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
        || super::wildcard::is_wildcard(index)
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
        return Ok(near_plan(g, sort));
    }
    let q = Query {
        m,
        filter_doc,
        sort,
    };
    if let Some(h) = hint {
        return hinted(coll, &indexes, &q, h);
    }
    if let Some(id) = m.id_equality() {
        return Ok(plan(Access::IdLookup(id), true, false));
    }
    if let Some(best) = best_index(coll, &indexes, &q) {
        return Ok(best);
    }
    if let Some(ranged) = id_range(coll, m, sort) {
        return Ok(ranged);
    }
    // No index narrows the filter: an index in sort order still saves the sort.
    if let Some(ordered) = sort.and_then(|s| in_sort_order(coll, &indexes, m, s)) {
        return Ok(ordered);
    }
    Ok(plan(collscan(false), false, false))
}

/// What a query asks of the planner besides a hint.
struct Query<'a> {
    m: &'a Matcher,
    filter_doc: Option<&'a Document>,
    sort: Option<&'a SortSpec>,
}

fn plan(access: Access, provides_sort: bool, count_exact: bool) -> Plan {
    Plan {
        access,
        provides_sort,
        count_exact,
        geo_near: None,
    }
}

fn collscan(reverse: bool) -> Access {
    Access::Collscan {
        reverse,
        id_index: false,
        id_bounds: None,
    }
}

/// A scan of the `_id` index over the bounds `m` puts on `_id`.
fn id_scan(m: &Matcher, reverse: bool) -> Access {
    let b = field_bounds(m, "_id", false);
    Access::Collscan {
        reverse,
        id_index: true,
        id_bounds: (!b.is_full()).then_some(b),
    }
}

/// A scan of `ix` over `bounds`, in the direction that gives the sort when
/// it can.
fn index_plan(ix: &IndexInfo, bounds: Vec<FieldBounds>, q: &Query<'_>) -> Plan {
    let dir = q.sort.and_then(|s| sort_direction(ix, s, &bounds));
    let exact = count_exact(ix, &bounds, q.m);
    plan(
        Access::Ixscan {
            index: Box::new(ix.clone()),
            bounds,
            reverse: dir.unwrap_or(false),
        },
        dir.is_some(),
        exact,
    )
}

/// A `$near` query: its index's cells around the point when the distance
/// is bounded (`geo_near.rs`), else every document; ordered by distance.
fn near_plan(g: GeoNear, sort: Option<&SortSpec>) -> Plan {
    let access = match geo_near::near_bounds(&g) {
        Some(bounds) => Access::Ixscan {
            index: g.index.clone(),
            bounds,
            reverse: false,
        },
        None => collscan(false),
    };
    Plan {
        access,
        provides_sort: sort.is_none(),
        count_exact: false,
        geo_near: Some(g),
    }
}

/// The plan a hint asks for: a collection scan in a direction, the `_id`
/// index (the collection's own order), or a named index (code 2 when none
/// is, or when it cannot answer the filter).
fn hinted(coll: &Collection, indexes: &[IndexInfo], q: &Query<'_>, h: &Hint) -> MongoResult<Plan> {
    if let Hint::Natural(forward) = h {
        return Ok(plan(collscan(!forward), false, false));
    }
    if hints_id_index(coll, h) {
        let access = id_scan(q.m, false);
        return Ok(plan(access, false, false));
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
    if ix.spec.is_text() || !geo_usable(ix, &raw_bounds_for(ix, q.m)) {
        return Ok(plan(collscan(false), false, false));
    }
    if ix.spec.wildcard_field().is_some() {
        // A wildcard index holds only the paths it has leaves for: a hint
        // needs a predicate it can answer (mongod's planner finds no index
        // to hint otherwise).
        let mut best: Option<(Rank, IndexInfo, Vec<FieldBounds>)> = None;
        for (v, bounds) in super::wildcard::expand(coll, ix, q.m) {
            if let Some(key) = rank_bounds(&v, &bounds, q) {
                if best.as_ref().is_none_or(|(k, _, _)| key > *k) {
                    best = Some((key, v, bounds));
                }
            }
        }
        return match best {
            Some((_, v, bounds)) => Ok(index_plan(&v, bounds, q)),
            None => Err(bad_hint()),
        };
    }
    if let Some(p) = &ix.spec.partial_filter {
        if !q.filter_doc.is_some_and(|f| implies(f, p)) {
            return Err(MongoError::bad_value("error processing query: planner returned error :: caused by :: hint provided does not correspond to an existing index (a partial index the filter does not imply cannot answer it)"));
        }
    }
    Ok(index_plan(ix, bounds_for(ix, q.m), q))
}

/// Whether `h` names the `_id` index, or a clustered collection's clustered
/// index (its `_id` order).
fn hints_id_index(coll: &Collection, h: &Hint) -> bool {
    match h {
        Hint::Name(n) => {
            n == "_id_"
                || crate::namespaces::clustered::Clustered::of_options(&coll.options())
                    .is_some_and(|c| c.name() == n)
        }
        Hint::Key(k) => same_pattern(k, &doc! {"_id": 1}),
        Hint::Natural(_) => false,
    }
}

/// The index whose bounds narrow the filter most (see [`rank`]), if any does.
fn best_index(coll: &Collection, indexes: &[IndexInfo], q: &Query<'_>) -> Option<Plan> {
    if constrained_paths(q.m).is_empty() {
        return None;
    }
    let mut best: Option<(Rank, std::borrow::Cow<'_, IndexInfo>, Vec<FieldBounds>)> = None;
    // A text index holds only documents with words: it answers `$text`
    // alone (`plan/text.rs`).
    for ix in indexes
        .iter()
        .filter(|ix| !ix.spec.hidden && !ix.spec.is_text())
    {
        if ix.spec.wildcard_field().is_some() {
            // One candidate per path the filter constrains (`wildcard.rs`).
            for (v, bounds) in super::wildcard::expand(coll, ix, q.m) {
                let Some(key) = rank_bounds(&v, &bounds, q) else {
                    continue;
                };
                if best.as_ref().is_none_or(|(k, _, _)| key > *k) {
                    best = Some((key, std::borrow::Cow::Owned(v), bounds));
                }
            }
            continue;
        }
        let Some((key, bounds)) = rank(ix, q) else {
            continue;
        };
        if best.as_ref().is_none_or(|(k, _, _)| key > *k) {
            best = Some((key, std::borrow::Cow::Borrowed(ix), bounds));
        }
    }
    best.map(|(_, ix, bounds)| index_plan(&ix, bounds, q))
}

/// [`rank`] for a wildcard index's candidate, whose bounds are already
/// made (`wildcard.rs`).
fn rank_bounds(ix: &IndexInfo, bounds: &[FieldBounds], q: &Query<'_>) -> Option<Rank> {
    if !usable(ix, bounds, q.filter_doc) {
        return None;
    }
    let (points, range) = score(bounds);
    if points == 0 && !range {
        return None;
    }
    let sorted = q
        .sort
        .is_some_and(|s| sort_direction(ix, s, bounds).is_some());
    Some((points, range, sorted, -(ix.fields.len() as isize)))
}

/// How good `ix` is for the query, with the bounds it would scan; `None`
/// when it cannot answer it or its bounds narrow nothing.
fn rank(ix: &IndexInfo, q: &Query<'_>) -> Option<(Rank, Vec<FieldBounds>)> {
    let raw = raw_bounds_for(ix, q.m);
    // Whether a sparse index may miss a match depends on the values the
    // filter allows, not on their hashes.
    if !geo_usable(ix, &raw) || !usable(ix, &raw, q.filter_doc) {
        return None;
    }
    let bounds = bisondb_storage::hash_bounds(&ix.spec, raw);
    let (points, range) = score(&bounds);
    if points == 0 && !range {
        return None;
    }
    let sorted = q
        .sort
        .is_some_and(|s| sort_direction(ix, s, &bounds).is_some());
    Some(((points, range, sorted, -(ix.fields.len() as isize)), bounds))
}

/// A range of the `_id` index when the filter bounds `_id` and the
/// collection's natural order is not `_id` order (a clustered collection's
/// scan is already in `_id` order): as mongod's IXSCAN of `_id_`, the scan
/// reads only the `_id`s inside the bounds (`access::collscan`) and returns
/// them in `_id` order, which saves a sort on `_id`.
fn id_range(coll: &Collection, m: &Matcher, sort: Option<&SortSpec>) -> Option<Plan> {
    if coll.natural_is_id_order() || coll.is_capped() {
        return None;
    }
    if field_bounds(m, "_id", false).is_full() {
        return None;
    }
    let by_id = sort.and_then(|s| match s.fields() {
        [(path, asc)] if path == "_id" && s.collation().is_none() => Some(*asc),
        _ => None,
    });
    let access = id_scan(m, by_id == Some(false));
    Some(plan(access, sort.is_none() || by_id.is_some(), false))
}

/// A scan in `s` order when nothing narrows the filter: an index whose
/// order is the sort's (forward or backward), or the collection's own
/// `_id` order.
fn in_sort_order(
    coll: &Collection,
    indexes: &[IndexInfo],
    m: &Matcher,
    s: &SortSpec,
) -> Option<Plan> {
    for ix in indexes.iter().filter(|ix| {
        !ix.spec.hidden
            && !ix.spec.sparse
            && ix.spec.partial_filter.is_none()
            && ix.spec.geo_field().is_none()
            && !ix.spec.is_text()
            // Holds only the documents with a leaf: never a scan of all.
            && ix.spec.wildcard_field().is_none()
    }) {
        if let Some(reverse) = sort_direction(ix, s, &[]) {
            let access = Access::Ixscan {
                index: Box::new(ix.clone()),
                bounds: bounds_for(ix, m),
                reverse,
            };
            return Some(plan(access, true, false));
        }
    }
    // `_id` order, bytewise for strings: a clustered collection's own
    // order, else (insertion order) the `_id` index's.
    match s.fields() {
        [(path, asc)] if path == "_id" && !coll.is_capped() && s.collation().is_none() => {
            let access = if coll.natural_is_id_order() {
                collscan(!asc)
            } else {
                id_scan(m, !asc)
            };
            Some(plan(access, true, false))
        }
        _ => None,
    }
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
