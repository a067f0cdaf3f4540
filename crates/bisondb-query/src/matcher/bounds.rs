//! Index bounds from a parsed filter: for one indexed path, the ordered list of
//! value intervals that every matching document's index key must fall in.
//!
//! The contract is "superset": a document the filter matches always has a key
//! inside the bounds, so scanning the bounds and re-checking the filter on the
//! fetched documents returns exactly what a collection scan returns. Bounds are
//! `exact` only when every key inside them belongs to a matching document
//! (then a count may skip the fetch).
//!
//! Only predicates of the top-level conjunction constrain a path. On a multikey
//! index two predicates on one path may be satisfied by different array
//! elements, so their bounds are not intersected (mongod's rule): one predicate
//! is used and the fetch re-checks the rest. `$elemMatch` on values is one
//! element, so its operators do intersect.

use std::cmp::Ordering;

use bson::{Bson, Document};

use super::{CmpOp, Expr, Matcher, PathOp};
use crate::collation::Collation;
use crate::compare::{compare_bson, has_string};

/// An interval of BSON values in index order.
#[derive(Debug, Clone, PartialEq)]
pub struct Interval {
    pub lo: Bson,
    pub lo_inclusive: bool,
    pub hi: Bson,
    pub hi_inclusive: bool,
}

impl Interval {
    /// `[MinKey, MaxKey]`: every key.
    pub fn full() -> Interval {
        Interval {
            lo: Bson::MinKey,
            lo_inclusive: true,
            hi: Bson::MaxKey,
            hi_inclusive: true,
        }
    }

    /// `[v, v]`.
    pub fn point(v: Bson) -> Interval {
        Interval {
            lo: v.clone(),
            lo_inclusive: true,
            hi: v,
            hi_inclusive: true,
        }
    }

    fn range(lo: Bson, lo_inclusive: bool, hi: Bson, hi_inclusive: bool) -> Interval {
        Interval {
            lo,
            lo_inclusive,
            hi,
            hi_inclusive,
        }
    }

    /// True for `[MinKey, MaxKey]`.
    pub fn is_full(&self) -> bool {
        matches!(self.lo, Bson::MinKey)
            && matches!(self.hi, Bson::MaxKey)
            && self.lo_inclusive
            && self.hi_inclusive
    }

    /// True for a single value.
    pub fn is_point(&self) -> bool {
        self.lo_inclusive && self.hi_inclusive && compare_bson(&self.lo, &self.hi).is_eq()
    }

    fn is_empty(&self) -> bool {
        match compare_bson(&self.lo, &self.hi) {
            Ordering::Greater => true,
            Ordering::Equal => !(self.lo_inclusive && self.hi_inclusive),
            Ordering::Less => false,
        }
    }

    fn intersect(&self, other: &Interval) -> Option<Interval> {
        let (lo, lo_inclusive) = match compare_bson(&self.lo, &other.lo) {
            Ordering::Greater => (self.lo.clone(), self.lo_inclusive),
            Ordering::Less => (other.lo.clone(), other.lo_inclusive),
            Ordering::Equal => (self.lo.clone(), self.lo_inclusive && other.lo_inclusive),
        };
        let (hi, hi_inclusive) = match compare_bson(&self.hi, &other.hi) {
            Ordering::Less => (self.hi.clone(), self.hi_inclusive),
            Ordering::Greater => (other.hi.clone(), other.hi_inclusive),
            Ordering::Equal => (self.hi.clone(), self.hi_inclusive && other.hi_inclusive),
        };
        let i = Interval::range(lo, lo_inclusive, hi, hi_inclusive);
        (!i.is_empty()).then_some(i)
    }

    /// mongod's explain rendering: `[1, 1]`, `(5, inf.0]`, `["a", {})`.
    pub fn display(&self) -> String {
        format!(
            "{}{}, {}{}",
            if self.lo_inclusive { '[' } else { '(' },
            show(&self.lo),
            show(&self.hi),
            if self.hi_inclusive { ']' } else { ')' },
        )
    }
}

fn show(v: &Bson) -> String {
    match v {
        Bson::MinKey => "MinKey".into(),
        Bson::MaxKey => "MaxKey".into(),
        Bson::Double(d) if d.is_infinite() => {
            if *d > 0.0 {
                "inf.0".into()
            } else {
                "-inf.0".into()
            }
        }
        Bson::Double(d) if d.is_nan() => "nan.0".into(),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e15 => format!("{d:.1}"),
        Bson::String(s) => format!("{s:?}"),
        Bson::DateTime(d) => format!("new Date({})", d.timestamp_millis()),
        Bson::ObjectId(o) => format!("ObjectId('{}')", o.to_hex()),
        Bson::Undefined => "undefined".into(),
        Bson::Null => "null".into(),
        other => other.to_string(),
    }
}

/// The bounds of one indexed path.
#[derive(Debug, Clone, PartialEq)]
pub struct FieldBounds {
    /// Sorted, non-overlapping; empty means nothing can match.
    pub intervals: Vec<Interval>,
    /// Every key inside the intervals belongs to a document the predicates on
    /// this path match.
    pub exact: bool,
}

impl FieldBounds {
    /// No constraint: `[MinKey, MaxKey]`.
    pub fn full() -> FieldBounds {
        FieldBounds {
            intervals: vec![Interval::full()],
            exact: true,
        }
    }

    /// True when the bounds constrain nothing.
    pub fn is_full(&self) -> bool {
        matches!(self.intervals.as_slice(), [i] if i.is_full())
    }

    /// True when every interval is a single value.
    pub fn is_points(&self) -> bool {
        self.intervals.iter().all(Interval::is_point)
    }
}

/// The bounds the filter puts on `path` for an index that is (or may be)
/// `multikey`.
pub fn field_bounds(m: &Matcher, path: &str, multikey: bool) -> FieldBounds {
    field_bounds_in(m, path, multikey, None)
}

/// [`field_bounds`] for an index with collation `ix` (`None`: simple). Its keys
/// hold strings as collation keys, so only string predicates under that same
/// collation bound it (through [`Collation::index_value`]); string predicates
/// under another collation bound nothing (and on a simple index, collated ones
/// never do). Such bounds are inexact: the fetch re-checks the filter.
pub fn field_bounds_in(
    m: &Matcher,
    path: &str,
    multikey: bool,
    ix: Option<&Collation>,
) -> FieldBounds {
    let mut preds: Vec<&PathOp> = Vec::new();
    collect(&m.root, path, &mut preds);
    if preds.is_empty() {
        return FieldBounds::full();
    }
    let each: Vec<FieldBounds> = preds.into_iter().map(|p| op_bounds(p, ix)).collect();
    combine(each, multikey)
}

/// The bounds of several predicates on one path: intersected, or on a
/// multikey path the best single one (see the module doc).
fn combine(each: Vec<FieldBounds>, multikey: bool) -> FieldBounds {
    if multikey {
        // One predicate only: prefer points, then any constraint.
        let best = each
            .iter()
            .find(|b| b.is_points())
            .or_else(|| each.iter().find(|b| !b.is_full()))
            .cloned()
            .unwrap_or_else(FieldBounds::full);
        let exact = each.len() == 1 && best.exact;
        return FieldBounds {
            intervals: best.intervals,
            exact,
        };
    }
    let mut acc = FieldBounds::full();
    for b in each {
        acc = FieldBounds {
            intervals: intersect_lists(&acc.intervals, &b.intervals),
            exact: acc.exact && b.exact,
        };
    }
    acc
}

/// The bounds a wildcard index puts on `path` for the filter: its `$_path`
/// component and its value component, or `None` when no predicate on `path`
/// is one a wildcard index can answer (mongod's rules: the index holds only
/// leaves, so neither `null`, nor a non-empty object or an array, nor a
/// negation, nor `$exists: false` can be looked up in it). `$exists: true`
/// alone scans `path` and every path under it. `multikey`: some document
/// holds an array along `path`.
pub fn wildcard_field_bounds(
    m: &Matcher,
    path: &str,
    multikey: bool,
    ix: Option<&Collation>,
) -> Option<(FieldBounds, FieldBounds)> {
    let mut preds: Vec<&PathOp> = Vec::new();
    collect(&m.root, path, &mut preds);
    preds.retain(|p| wildcard_answers(p));
    if preds.is_empty() {
        return None;
    }
    let exists_only = preds.iter().all(|p| matches!(p, PathOp::Exists(true)));
    let point = Interval::point(Bson::String(path.to_string()));
    let paths = if exists_only {
        FieldBounds {
            intervals: vec![
                point,
                Interval::range(
                    Bson::String(format!("{path}.")),
                    true,
                    Bson::String(format!("{path}/")),
                    false,
                ),
            ],
            exact: false,
        }
    } else {
        FieldBounds {
            intervals: vec![point],
            exact: true,
        }
    };
    let each: Vec<FieldBounds> = preds.into_iter().map(|p| op_bounds(p, ix)).collect();
    Some((paths, combine(each, multikey)))
}

/// Whether a wildcard index, which holds leaves only, holds a key for every
/// document `op` matches.
fn wildcard_answers(op: &PathOp) -> bool {
    fn leaf(v: &Bson) -> bool {
        match v {
            Bson::Document(d) => d.is_empty(),
            Bson::Null
            | Bson::Undefined
            | Bson::Array(_)
            | Bson::MinKey
            | Bson::MaxKey
            | Bson::RegularExpression(_) => false,
            _ => true,
        }
    }
    match op {
        PathOp::Eq(v) | PathOp::EqColl(v, _) => leaf(v),
        PathOp::Cmp(_, x) | PathOp::CmpColl(_, x, _) => bracket(x).is_some(),
        PathOp::In(list) | PathOp::InColl(list, _) => {
            list.regexes.is_empty() && !list.values.is_empty() && list.values.iter().all(leaf)
        }
        PathOp::Exists(true) => true,
        _ => false,
    }
}

/// The paths the top-level conjunction constrains, in filter order.
pub fn constrained_paths(m: &Matcher) -> Vec<String> {
    let mut out = Vec::new();
    paths(&m.root, &mut out);
    out
}

/// True when the filter is only a conjunction of path predicates on `paths`
/// (nothing else, such as `$or` or `$expr`, that bounds could not express).
pub fn only_predicates_on(m: &Matcher, paths: &[&str]) -> bool {
    fn ok(e: &Expr, paths: &[&str]) -> bool {
        match e {
            Expr::And(v) => v.iter().all(|c| ok(c, paths)),
            Expr::Path(p, _) => paths.contains(&p.as_str()),
            _ => false,
        }
    }
    ok(&m.root, paths)
}

/// Whether a document that matches `filter` surely matches the partial filter
/// `partial`. Each top-level condition of `partial` must appear verbatim among
/// the top-level conditions of `filter`, or be a comparison on a field that a
/// condition of `filter` on that field implies: `{a: 1}` or `{a: {$lte: 1}}`
/// implies `{a: {$lte: 1.5}}`, as mongod proves it. Each operator is implied on
/// its own, which stays sound for arrays (the element that satisfies the
/// stronger bound satisfies the weaker one). Anything else answers false, so a
/// partial index is never used wrongly.
pub fn implies(filter: &Document, partial: &Document) -> bool {
    fn conds(d: &Document, out: &mut Vec<(String, Bson)>) {
        for (k, v) in d {
            if k == "$and" {
                if let Bson::Array(a) = v {
                    for x in a {
                        if let Bson::Document(x) = x {
                            conds(x, out);
                        }
                    }
                }
            } else {
                out.push((k.clone(), v.clone()));
            }
        }
    }
    let (mut have, mut need) = (Vec::new(), Vec::new());
    conds(filter, &mut have);
    conds(partial, &mut need);
    need.iter().all(|n| {
        if have.contains(n) {
            return true;
        }
        let (path, cond) = n;
        if path.starts_with('$') {
            return false;
        }
        let known: Vec<(&str, &Bson)> = have
            .iter()
            .filter(|(p, _)| p == path)
            .flat_map(|(_, v)| comparisons(v))
            .collect();
        comparisons(cond)
            .iter()
            .all(|(op, c)| known.iter().any(|(k, q)| op_implies(k, q, op, c)))
            && !comparisons(cond).is_empty()
    })
}

/// A condition on one field as `(operator, value)` pairs: `{$lte: 1, $gt: 0}`
/// or a plain value (equality). Empty when it holds anything else.
fn comparisons(cond: &Bson) -> Vec<(&str, &Bson)> {
    match cond {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k.starts_with('$')) => {
            let ops: Vec<(&str, &Bson)> = d.iter().map(|(k, v)| (k.as_str(), v)).collect();
            if ops
                .iter()
                .all(|(k, _)| matches!(*k, "$eq" | "$lt" | "$lte" | "$gt" | "$gte"))
            {
                ops
            } else {
                Vec::new()
            }
        }
        Bson::Document(_) | Bson::Array(_) | Bson::RegularExpression(_) => Vec::new(),
        v => vec![("$eq", v)],
    }
}

/// Whether `field <have_op> q` implies `field <need_op> c` for the same value.
fn op_implies(have_op: &str, q: &Bson, need_op: &str, c: &Bson) -> bool {
    let nan = |v: &Bson| matches!(v, Bson::Double(d) if d.is_nan());
    if nan(q)
        || nan(c)
        || crate::compare::type_rank(q.element_type())
            != crate::compare::type_rank(c.element_type())
    {
        return false;
    }
    let o = compare_bson(q, c);
    use Ordering::{Equal, Greater, Less};
    match (have_op, need_op) {
        ("$eq", "$eq") => o == Equal,
        ("$eq", "$lte") | ("$lte", "$lte") | ("$lt", "$lte") | ("$lt", "$lt") => o != Greater,
        ("$eq", "$lt") | ("$lte", "$lt") => o == Less,
        ("$eq", "$gte") | ("$gte", "$gte") | ("$gt", "$gte") | ("$gt", "$gt") => o != Less,
        ("$eq", "$gt") | ("$gte", "$gt") => o == Greater,
        _ => false,
    }
}

fn paths(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::And(v) => v.iter().for_each(|c| paths(c, out)),
        Expr::Path(p, _) if !out.contains(p) => out.push(p.clone()),
        _ => {}
    }
}

fn collect<'a>(e: &'a Expr, path: &str, out: &mut Vec<&'a PathOp>) {
    match e {
        Expr::And(v) => v.iter().for_each(|c| collect(c, path, out)),
        Expr::Path(p, op) if p == path => match op {
            PathOp::And(ops) => out.extend(ops.iter()),
            other => out.push(other),
        },
        _ => {}
    }
}

fn inexact(intervals: Vec<Interval>) -> FieldBounds {
    FieldBounds {
        intervals,
        exact: false,
    }
}

fn eq_bounds(v: &Bson) -> FieldBounds {
    match v {
        // The array itself (as an element of an outer array) or its first
        // element (when the reached value is this array) is in the index.
        Bson::Array(a) => {
            let first = a.first().cloned().unwrap_or(Bson::Undefined);
            inexact(union(vec![
                Interval::point(first),
                Interval::point(v.clone()),
            ]))
        }
        Bson::Null | Bson::Undefined => inexact(union(vec![
            Interval::point(Bson::Undefined),
            Interval::point(Bson::Null),
        ])),
        Bson::RegularExpression(_) => inexact(vec![Interval::full()]),
        other => FieldBounds {
            intervals: vec![Interval::point(other.clone())],
            exact: true,
        },
    }
}

/// The smallest and largest value of `v`'s comparison bracket, when the
/// bracket has such values that the index can use.
fn bracket(v: &Bson) -> Option<(Bson, bool, Bson, bool)> {
    Some(match v {
        Bson::Double(d) if d.is_nan() => return None,
        // NaN sorts below every number but no range predicate matches it
        // (see the matcher), so the number bracket starts at -inf.
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => (
            Bson::Double(f64::NEG_INFINITY),
            true,
            Bson::Double(f64::INFINITY),
            true,
        ),
        Bson::String(_) | Bson::Symbol(_) => (
            Bson::String(String::new()),
            true,
            Bson::Document(Document::new()),
            false,
        ),
        Bson::DateTime(_) => (
            Bson::DateTime(bson::DateTime::from_millis(i64::MIN)),
            true,
            Bson::DateTime(bson::DateTime::from_millis(i64::MAX)),
            true,
        ),
        Bson::ObjectId(_) => (
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([0; 12])),
            true,
            Bson::ObjectId(bson::oid::ObjectId::from_bytes([0xFF; 12])),
            true,
        ),
        Bson::Boolean(_) => (Bson::Boolean(false), true, Bson::Boolean(true), true),
        Bson::Timestamp(_) => (
            Bson::Timestamp(bson::Timestamp {
                time: 0,
                increment: 0,
            }),
            true,
            Bson::Timestamp(bson::Timestamp {
                time: u32::MAX,
                increment: u32::MAX,
            }),
            true,
        ),
        _ => return None,
    })
}

fn cmp_bounds(op: CmpOp, x: &Bson) -> FieldBounds {
    let Some((lo, lo_inc, hi, hi_inc)) = bracket(x) else {
        return inexact(vec![Interval::full()]);
    };
    let i = match op {
        CmpOp::Gt => Interval::range(x.clone(), false, hi, hi_inc),
        CmpOp::Gte => Interval::range(x.clone(), true, hi, hi_inc),
        CmpOp::Lt => Interval::range(lo, lo_inc, x.clone(), false),
        CmpOp::Lte => Interval::range(lo, lo_inc, x.clone(), true),
    };
    FieldBounds {
        intervals: if i.is_empty() { Vec::new() } else { vec![i] },
        exact: true,
    }
}

/// Bounds of string predicates on an index with collation `ix` (see
/// [`field_bounds_in`]): `None` when they bound nothing.
fn collated_bounds(op: &PathOp, ix: &Collation) -> Option<FieldBounds> {
    let b = match op {
        PathOp::EqColl(v, c) if c.as_ref() == ix => eq_bounds(&ix.index_value(v)),
        PathOp::CmpColl(o, x, c) if c.as_ref() == ix => cmp_bounds(*o, &ix.index_value(x)),
        PathOp::InColl(list, c) if c.as_ref() == ix && list.regexes.is_empty() => {
            let mut all = Vec::new();
            for v in &list.values {
                all.extend(eq_bounds(&ix.index_value(v)).intervals);
            }
            FieldBounds {
                intervals: union(all),
                exact: false,
            }
        }
        _ => return None,
    };
    Some(inexact(b.intervals))
}

fn op_bounds(op: &PathOp, ix: Option<&Collation>) -> FieldBounds {
    let full = || inexact(vec![Interval::full()]);
    match (op, ix) {
        (PathOp::EqColl(..) | PathOp::CmpColl(..) | PathOp::InColl(..), Some(c)) => {
            return collated_bounds(op, c).unwrap_or_else(full)
        }
        (PathOp::Eq(v) | PathOp::Cmp(_, v), Some(_)) if has_string(v) => return full(),
        (PathOp::In(list), Some(_)) if list.values.iter().any(has_string) => return full(),
        _ => {}
    }
    match op {
        PathOp::Eq(v) => eq_bounds(v),
        PathOp::Cmp(c, x) => cmp_bounds(*c, x),
        PathOp::In(list) => {
            if !list.regexes.is_empty() {
                return inexact(vec![Interval::full()]);
            }
            let mut all = Vec::new();
            let mut exact = true;
            for v in &list.values {
                let b = eq_bounds(v);
                exact &= b.exact;
                all.extend(b.intervals);
            }
            FieldBounds {
                intervals: union(all),
                exact,
            }
        }
        PathOp::All(ops) => match ops.first() {
            Some(first) => inexact(op_bounds(first, ix).intervals),
            None => FieldBounds {
                intervals: Vec::new(),
                exact: true,
            },
        },
        PathOp::ElemMatchValue(ops) => {
            let mut acc = vec![Interval::full()];
            for o in ops {
                acc = intersect_lists(&acc, &op_bounds(o, ix).intervals);
            }
            inexact(acc)
        }
        _ => inexact(vec![Interval::full()]),
    }
}

/// Sorts and merges overlapping or touching intervals.
fn union(mut v: Vec<Interval>) -> Vec<Interval> {
    v.retain(|i| !i.is_empty());
    v.sort_by(|a, b| compare_bson(&a.lo, &b.lo).then_with(|| b.lo_inclusive.cmp(&a.lo_inclusive)));
    let mut out: Vec<Interval> = Vec::with_capacity(v.len());
    for i in v {
        if let Some(last) = out.last_mut() {
            let o = compare_bson(&i.lo, &last.hi);
            let touches = o == Ordering::Less
                || (o == Ordering::Equal && (i.lo_inclusive || last.hi_inclusive));
            if touches {
                match compare_bson(&i.hi, &last.hi) {
                    Ordering::Greater => {
                        last.hi = i.hi;
                        last.hi_inclusive = i.hi_inclusive;
                    }
                    Ordering::Equal => last.hi_inclusive |= i.hi_inclusive,
                    Ordering::Less => {}
                }
                continue;
            }
        }
        out.push(i);
    }
    out
}

fn intersect_lists(a: &[Interval], b: &[Interval]) -> Vec<Interval> {
    let mut out = Vec::new();
    for x in a {
        for y in b {
            out.extend(x.intersect(y));
        }
    }
    union(out)
}

/// A box holding every location a top-level `$geoWithin` / `$within` /
/// `$geoIntersects` on `path` lets through (the first such predicate), for
/// scanning a geo index's cells; `None` when there is none (a geo index,
/// which skips documents without a location, may then not be used).
pub fn geo_bbox(m: &Matcher, path: &str) -> Option<crate::geo::BBox> {
    let mut ops = Vec::new();
    collect(&m.root, path, &mut ops);
    ops.iter().find_map(|op| match op {
        PathOp::GeoWithin(r) => r.bbox(),
        PathOp::GeoIntersects(i) => i.bbox(),
        _ => None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn fb(filter: Document, path: &str, multikey: bool) -> (Vec<String>, bool) {
        let m = Matcher::parse_doc(&filter).unwrap();
        let b = field_bounds(&m, path, multikey);
        (b.intervals.iter().map(Interval::display).collect(), b.exact)
    }

    /// mongod's wildcard planning: which predicates a wildcard index answers
    /// and the `$_path` and value bounds it scans for them.
    #[test]
    fn wildcard_bounds_table() {
        type Case = (
            Document,
            bool,
            Option<(Vec<&'static str>, Vec<&'static str>)>,
        );
        let cases: Vec<Case> = vec![
            (
                doc! {"a": 5},
                false,
                Some((vec!["[\"a\", \"a\"]"], vec!["[5, 5]"])),
            ),
            (
                doc! {"a": {"$gt": 1, "$lte": 5}},
                false,
                Some((vec!["[\"a\", \"a\"]"], vec!["(1, 5]"])),
            ),
            (
                doc! {"a": {"$gt": 1, "$lte": 5}},
                true,
                Some((vec!["[\"a\", \"a\"]"], vec!["(1, inf.0]"])),
            ),
            (
                doc! {"a": {"$in": [2, "x"]}},
                false,
                Some((vec!["[\"a\", \"a\"]"], vec!["[2, 2]", "[\"x\", \"x\"]"])),
            ),
            (
                doc! {"a": {"$exists": true}},
                false,
                Some((
                    vec!["[\"a\", \"a\"]", "[\"a.\", \"a/\")"],
                    vec!["[MinKey, MaxKey]"],
                )),
            ),
            (
                doc! {"a": {}},
                false,
                Some((vec!["[\"a\", \"a\"]"], vec!["[{}, {}]"])),
            ),
            // Not answerable: the index holds no key for these documents.
            (doc! {"a": null}, false, None),
            (doc! {"a": {"$in": [1, null]}}, false, None),
            (doc! {"a": {"b": 1}}, false, None),
            (doc! {"a": [1, 2]}, false, None),
            (doc! {"a": {"$ne": 1}}, false, None),
            (doc! {"a": {"$nin": [1]}}, false, None),
            (doc! {"a": {"$exists": false}}, false, None),
            (doc! {"a": {"$gte": null}}, false, None),
            (doc! {"b": 1}, false, None),
            // An answerable predicate beside one that is not: the fetch
            // checks the other.
            (
                doc! {"a": {"$ne": 3, "$lt": 9}},
                false,
                Some((vec!["[\"a\", \"a\"]"], vec!["[-inf.0, 9)"])),
            ),
        ];
        let show = |b: &FieldBounds| -> Vec<String> {
            b.intervals.iter().map(Interval::display).collect()
        };
        for (filter, multikey, want) in cases {
            let m = Matcher::parse_doc(&filter).unwrap();
            let got =
                wildcard_field_bounds(&m, "a", multikey, None).map(|(p, v)| (show(&p), show(&v)));
            let want = want.map(|(p, v)| {
                (
                    p.into_iter().map(String::from).collect::<Vec<_>>(),
                    v.into_iter().map(String::from).collect::<Vec<_>>(),
                )
            });
            assert_eq!(got, want, "{filter} multikey {multikey}");
        }
    }

    #[test]
    fn bounds_table() {
        let cases: Vec<(Document, bool, Vec<&str>, bool)> = vec![
            (doc! {"a": 5}, false, vec!["[5, 5]"], true),
            (doc! {"a": {"$gt": 5}}, false, vec!["(5, inf.0]"], true),
            (
                doc! {"a": {"$gt": 1, "$lte": 5}},
                false,
                vec!["(1, 5]"],
                true,
            ),
            // Multikey: the two predicates may hold for different elements.
            (
                doc! {"a": {"$gt": 1, "$lte": 5}},
                true,
                vec!["(1, inf.0]"],
                false,
            ),
            (
                doc! {"a": {"$elemMatch": {"$gt": 1, "$lte": 5}}},
                true,
                vec!["(1, 5]"],
                false,
            ),
            (
                doc! {"a": {"$in": [3, 1, 3]}},
                false,
                vec!["[1, 1]", "[3, 3]"],
                true,
            ),
            (doc! {"a": {"$lt": "m"}}, false, vec!["[\"\", \"m\")"], true),
            (
                doc! {"a": null},
                false,
                vec!["[undefined, undefined]", "[null, null]"],
                false,
            ),
            (
                doc! {"a": [2, 1]},
                false,
                vec!["[2, 2]", "[[2, 1], [2, 1]]"],
                false,
            ),
            (
                doc! {"a": {"$exists": true}},
                false,
                vec!["[MinKey, MaxKey]"],
                false,
            ),
            (doc! {"b": 1}, false, vec!["[MinKey, MaxKey]"], true),
            (doc! {"a": {"$gt": 5, "$lt": 2}}, false, vec![], true),
            (
                doc! {"$or": [{"a": 1}, {"a": 2}]},
                false,
                vec!["[MinKey, MaxKey]"],
                true,
            ),
        ];
        for (filter, multikey, want, exact) in cases {
            let (got, got_exact) = fb(filter.clone(), "a", multikey);
            assert_eq!(got, want, "filter {filter}");
            assert_eq!(got_exact, exact, "exactness for {filter}");
        }
    }

    #[test]
    fn predicates_and_paths() {
        let m = Matcher::parse_doc(&doc! {"a": 1, "b.c": {"$gt": 2}}).unwrap();
        assert_eq!(
            constrained_paths(&m),
            vec!["a".to_string(), "b.c".to_string()]
        );
        assert!(only_predicates_on(&m, &["a", "b.c"]));
        assert!(!only_predicates_on(&m, &["a"]));
        let or = Matcher::parse_doc(&doc! {"$or": [{"a": 1}]}).unwrap();
        assert!(!only_predicates_on(&or, &["a"]));
    }

    #[test]
    fn partial_implication() {
        let partial = doc! {"x": {"$gt": 5}};
        assert!(implies(&doc! {"a": 1, "x": {"$gt": 5}}, &partial));
        assert!(implies(
            &doc! {"$and": [{"x": {"$gt": 5}}], "a": 1},
            &partial
        ));
        assert!(!implies(&doc! {"a": 1}, &partial));
        assert!(!implies(&doc! {"x": {"$gt": 4}}, &partial));
        // Comparisons implied by stronger ones on the same field (pymongo's
        // test_index_filter): {a: {$lte: 1.5}}.
        let lte = doc! {"a": {"$lte": 1.5}};
        for yes in [
            doc! {"x": 6, "a": 1},
            doc! {"a": {"$lte": 1}},
            doc! {"a": {"$lt": 1.5}},
            doc! {"a": {"$eq": 1.5}},
            doc! {"a": {"$gt": 0, "$lte": 1}},
        ] {
            assert!(implies(&yes, &lte), "{yes} should imply {lte}");
        }
        for no in [
            doc! {"x": 6},
            doc! {"a": {"$lte": 1.6}},
            doc! {"a": {"$gte": 1}},
            doc! {"a": "1"},
            doc! {"a": f64::NAN},
            doc! {"a": {"$in": [1]}},
            doc! {"b": 1},
        ] {
            assert!(!implies(&no, &lte), "{no} must not imply {lte}");
        }
        assert!(implies(&doc! {"a": 7}, &doc! {"a": {"$gt": 5, "$lt": 10}}));
        assert!(!implies(
            &doc! {"a": {"$gt": 5}},
            &doc! {"a": {"$gt": 5, "$lt": 10}}
        ));
        assert!(implies(&doc! {"a": {"$gt": 5}}, &doc! {"a": {"$gte": 5}}));
        assert!(!implies(&doc! {"a": {"$gte": 5}}, &doc! {"a": {"$gt": 5}}));
        assert!(implies(&doc! {"a": 3}, &doc! {"a": 3}));
        assert!(implies(&doc! {"a": 3}, &doc! {"a": 3.0}));
        assert!(!implies(&doc! {"a": 3}, &doc! {"a": {"$exists": true}}));
    }
}
