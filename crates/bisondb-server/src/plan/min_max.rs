//! `find`'s `min` and `max` (one range of whole keys of a hinted index) and
//! `returnKey` (each result replaced by the index key that led to it).
//!
//! mongod 4.2+ plans a `min`/`max` query only on the index its `hint` names
//! (query_planner.cpp): no hint is 51173, bounds whose fields are not exactly
//! the key pattern's (in order) are 51174, a `min` not below `max` in the
//! index's order is 51175; the parser refuses a `min` and `max` with
//! different field names (51176). The scan runs forward from `min`
//! (inclusive) to `max` (exclusive) over the compound key; the filter is
//! checked on each fetched document.

use std::cmp::Ordering as CmpOrdering;
use std::ops::Bound;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::collation::Collation;
use bisondb_query::compare::compare_bson;
use bisondb_query::index_keys::{KeyField, KeyGenerator};
use bisondb_query::matcher::bounds::FieldBounds;
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_storage::{Collection, IndexInfo};
use bson::{doc, Bson, Document, RawBson, RawDocumentBuf};

use super::access::{index_collation, Fetch};
use super::choose::{bad_hint, contains, same_pattern, sort_direction};
use super::{Access, Hint, Plan, Stats};
use crate::cursor::DocSource;

/// A `find`'s `min` and `max` as sent (an empty document: not given).
#[derive(Debug, Clone, Default)]
pub struct MinMax {
    pub min: Document,
    pub max: Document,
}

impl MinMax {
    pub fn is_empty(&self) -> bool {
        self.min.is_empty() && self.max.is_empty()
    }

    /// mongod's parse-time check (query_request_helper): both given, they
    /// must name the same fields in the same order.
    pub fn validate(&self) -> MongoResult<()> {
        if self.min.is_empty() || self.max.is_empty() {
            return Ok(());
        }
        if !self.min.keys().eq(self.max.keys()) {
            return Err(MongoError::location(
                51176,
                "min and max must have the same field names",
            ));
        }
        Ok(())
    }
}

/// mongod's wording for an error of the planner.
fn planner_error(code: i32, reason: &str) -> MongoError {
    MongoError::location(
        code,
        format!("error processing query: planner returned error :: caused by :: {reason}"),
    )
}

/// The `_id` index's fields, for `min`/`max` and `returnKey` through it.
fn id_fields() -> Vec<KeyField> {
    vec![KeyField {
        path: "_id".into(),
        descending: false,
    }]
}

/// Whether `bound` names exactly the fields of the key pattern, in order,
/// and (under a collation other than the index's) holds no value the
/// collation would change (strings, and documents or arrays that may hold
/// them), as mongod's `indexCompatibleMaxMin`.
fn compatible(bound: &Document, fields: &[KeyField], collated: bool) -> bool {
    bound.len() == fields.len()
        && bound.iter().zip(fields).all(|((k, v), f)| {
            *k == f.path
                && !(collated
                    && matches!(
                        v,
                        Bson::String(_) | Bson::Symbol(_) | Bson::Document(_) | Bson::Array(_)
                    ))
        })
}

/// A bound with its field names stripped, its strings as the index stores
/// them (collation keys when the index has a collation); an absent one is
/// the first (`first`) or last key of the index in its order: MinKey for an
/// ascending field, MaxKey for a descending one, or the reverse (mongod's
/// `finishMinObj`/`finishMaxObj`).
fn finish(
    bound: &Document,
    fields: &[KeyField],
    first: bool,
    collation: Option<&Collation>,
) -> Vec<Bson> {
    if !bound.is_empty() {
        return bound
            .values()
            .map(|v| collation.map_or_else(|| v.clone(), |c| c.index_value(v)))
            .collect();
    }
    fields
        .iter()
        .map(|f| {
            if first != f.descending {
                Bson::MinKey
            } else {
                Bson::MaxKey
            }
        })
        .collect()
}

/// Two whole keys compared in the index's order (mongod's `woCompare` with
/// the key pattern): a descending field reverses its comparison.
fn compare_keys(a: &[Bson], b: &[Bson], fields: &[KeyField]) -> CmpOrdering {
    for ((x, y), f) in a.iter().zip(b).zip(fields) {
        let c = compare_bson(x, y);
        let c = if f.descending { c.reverse() } else { c };
        if c != CmpOrdering::Equal {
            return c;
        }
    }
    CmpOrdering::Equal
}

/// Plans a `find` with `min`/`max` on the index `hint` names, for a query
/// under `collation` (`None`: simple).
pub fn choose(
    coll: Option<&Collection>,
    hint: Option<&Hint>,
    mm: &MinMax,
    sort: Option<&SortSpec>,
    collation: Option<&Collation>,
) -> MongoResult<Plan> {
    let plan = |access, provides_sort| Plan {
        access,
        provides_sort,
        count_exact: false,
        geo_near: None,
    };
    let Some(coll) = coll else {
        // Nothing to scan; mongod does not plan (or check) a query on a
        // collection that does not exist.
        return Ok(plan(Access::Empty, true));
    };
    let hint = match hint {
        Some(h @ (Hint::Name(_) | Hint::Key(_))) => h,
        // A `$natural` hint names no index either.
        _ => {
            return Err(planner_error(
                51173,
                "When using min()/max() a hint of which index to use must be provided",
            ))
        }
    };
    let is_id = match hint {
        Hint::Name(n) => n == "_id_",
        Hint::Key(k) => same_pattern(k, &doc! {"_id": 1}),
        Hint::Natural(_) => false,
    };
    let index = if is_id {
        None
    } else {
        let indexes = coll.indexes();
        let found = indexes.into_iter().find(|ix| match hint {
            Hint::Name(n) => &ix.spec.name == n,
            Hint::Key(k) => same_pattern(k, &ix.spec.key),
            Hint::Natural(_) => false,
        });
        match found.filter(|ix| !ix.spec.hidden) {
            Some(ix) => Some(Box::new(ix)),
            None => return Err(bad_hint()),
        }
    };
    let fields = index
        .as_ref()
        .map_or_else(id_fields, |ix| ix.fields.clone());
    // The index orders strings by its own collation (the `_id` index
    // bytewise); string bounds apply only under that same collation, as
    // mongod's `collatorsMatch` (an unreadable one matches nothing).
    let index_coll = match &index {
        Some(ix) => index_collation(ix),
        None => Some(None),
    };
    let same = index_coll
        .as_ref()
        .is_some_and(|c| bisondb_query::collation::same(c.as_deref(), collation));
    for bound in [&mm.min, &mm.max] {
        if !bound.is_empty() && !compatible(bound, &fields, !same) {
            return Err(planner_error(
                51174,
                "The index chosen is not compatible with min/max",
            ));
        }
    }
    let stored_as = index_coll.flatten();
    let start = finish(&mm.min, &fields, true, stored_as.as_deref());
    let end = finish(&mm.max, &fields, false, stored_as.as_deref());
    if compare_keys(&start, &end, &fields) != CmpOrdering::Less {
        return Err(planner_error(
            51175,
            "The value provided for min() does not come before the value provided for max() in the hinted index",
        ));
    }
    // The scan runs forward only: it gives a sort that is the index order.
    let provides_sort = match (sort, &index) {
        (None, _) => true,
        (Some(s), Some(ix)) => sort_direction(ix, s, &[]) == Some(false),
        (Some(s), None) => matches!(s.fields(), [(p, true)] if p == "_id"),
    };
    Ok(plan(Access::KeyRange { index, start, end }, provides_sort))
}

fn raw(values: &[Bson]) -> MongoResult<Vec<RawBson>> {
    values
        .iter()
        .map(|v| RawBson::try_from(v.clone()).map_err(crate::request::invalid_bson))
        .collect()
}

/// The documents of a [`Access::KeyRange`] plan that match `m`.
pub(super) fn source(
    coll: &Collection,
    index: Option<&IndexInfo>,
    start: &[Bson],
    end: &[Bson],
    m: Matcher,
    stats: Arc<Stats>,
) -> MongoResult<DocSource> {
    let (lo, hi) = (raw(start)?, raw(end)?);
    let Some(ix) = index else {
        // The `_id` index is the collection's own order.
        let (Some(lo), Some(hi)) = (lo.first(), hi.first()) else {
            return Err(MongoError::internal("min/max on _id without a bound"));
        };
        let mut scan = coll.scan_ids(
            Bound::Included(lo.as_raw_bson_ref()),
            Bound::Excluded(hi.as_raw_bson_ref()),
            false,
        );
        let read = std::iter::from_fn(move || {
            let r = scan.next();
            match &r {
                Some(Ok(_)) => {
                    // One `_id` key examined, and its document fetched.
                    stats.keys_examined.fetch_add(1, Ordering::Relaxed);
                    stats.docs_examined.fetch_add(1, Ordering::Relaxed);
                    stats.ixscan.add();
                }
                Some(Err(_)) => {}
                None => stats.ixscan.end(),
            }
            r
        });
        return Ok(Box::new(read.filter_map(move |r| match r {
            Ok(d) => match m.try_matches(&d) {
                Ok(true) => Some(Ok(d)),
                Ok(false) => None,
                Err(e) => Some(Err(e)),
            },
            Err(e) => Some(Err(MongoError::from(e))),
        })));
    };
    let snapshot = coll.snapshot()?;
    let scan = coll.index_scan_keys(snapshot.clone(), &ix.spec.name, &lo, &hi, false);
    Fetch::over(coll, snapshot, scan, ix, m, stats)
}

/// `returnKey`: the index key a plan reached each document through, as a
/// document shaped by the key pattern (`{created_on: ...}`); an empty
/// document when the plan used no index (a collection scan), as mongod.
pub struct ReturnKey {
    how: KeyFrom,
}

enum KeyFrom {
    Nothing,
    Id,
    Index {
        fields: Vec<KeyField>,
        /// Boxed: a generator is large next to the other variants.
        keys: Box<KeyGenerator>,
        /// The hashed field of a hashed index: its key is the value's hash.
        hashed: Option<usize>,
        /// Which of a multikey document's keys the scan met first.
        within: Within,
        reverse: bool,
    },
}

/// The part of an index a scan read.
enum Within {
    Fields(Vec<FieldBounds>),
    Range(Vec<Bson>, Vec<Bson>),
}

impl ReturnKey {
    pub fn new(plan: &Plan) -> MongoResult<ReturnKey> {
        let index = |ix: &IndexInfo, within: Within, reverse: bool| -> MongoResult<KeyFrom> {
            // Keys as the index holds them: collation keys for the strings of
            // an index with a collation, as mongod returns them.
            let keys = KeyGenerator::new(ix.fields.clone(), false, None)?
                .with_collation(index_collation(ix).flatten());
            Ok(KeyFrom::Index {
                fields: ix.fields.clone(),
                keys: Box::new(keys),
                hashed: ix.spec.hashed_field(),
                within,
                reverse,
            })
        };
        let how = match &plan.access {
            Access::Empty
            | Access::Collscan {
                id_index: false, ..
            } => KeyFrom::Nothing,
            Access::IdLookup(_) | Access::Collscan { id_index: true, .. } => KeyFrom::Id,
            Access::KeyRange { index: None, .. } => KeyFrom::Id,
            Access::KeyRange {
                index: Some(ix),
                start,
                end,
            } => index(ix, Within::Range(start.clone(), end.clone()), false)?,
            Access::Ixscan {
                index: ix,
                bounds,
                reverse,
            } => index(ix, Within::Fields(bounds.clone()), *reverse)?,
        };
        Ok(ReturnKey { how })
    }

    /// Whether the plan reads a secondary index (`{$meta: "indexKey"}` has
    /// a value only then: mongod leaves it out for collection scans and
    /// `_id` lookups).
    pub fn from_secondary_index(&self) -> bool {
        matches!(self.how, KeyFrom::Index { .. })
    }

    /// The key document for `doc`.
    pub fn key_of(&self, doc: &RawDocumentBuf) -> MongoResult<RawDocumentBuf> {
        let d = match &self.how {
            KeyFrom::Nothing => Document::new(),
            KeyFrom::Id => match doc.get("_id").map_err(crate::request::invalid_bson)? {
                Some(id) => {
                    let id =
                        Bson::try_from(RawBson::from(id)).map_err(crate::request::invalid_bson)?;
                    doc! {"_id": id}
                }
                None => Document::new(),
            },
            KeyFrom::Index {
                fields,
                keys,
                hashed,
                within,
                reverse,
            } => {
                let mut candidates: Vec<Vec<Bson>> = Vec::new();
                for mut k in keys.keys(doc)?.keys {
                    if let Some(v) = hashed.and_then(|i| k.get_mut(i)) {
                        *v = RawBson::Int64(bisondb_storage::hashed_key(v.as_raw_bson_ref()));
                    }
                    let k: Result<Vec<Bson>, _> = k.into_iter().map(Bson::try_from).collect();
                    candidates.push(k.map_err(crate::request::invalid_bson)?);
                }
                // The scan meets a document's keys in index order (or its
                // reverse) and keeps the first inside what it reads.
                candidates.sort_by(|a, b| {
                    let c = compare_keys(a, b, fields);
                    if *reverse {
                        c.reverse()
                    } else {
                        c
                    }
                });
                let inside = |k: &Vec<Bson>| match within {
                    Within::Fields(bounds) => k
                        .iter()
                        .zip(bounds)
                        .all(|(v, b)| b.is_full() || b.intervals.iter().any(|i| contains(i, v))),
                    Within::Range(lo, hi) => {
                        compare_keys(k, lo, fields) != CmpOrdering::Less
                            && compare_keys(k, hi, fields) == CmpOrdering::Less
                    }
                };
                let chosen = candidates.iter().find(|k| inside(k)).or(candidates.first());
                match chosen {
                    Some(k) => fields
                        .iter()
                        .zip(k)
                        .map(|(f, v)| (f.path.clone(), v.clone()))
                        .collect(),
                    None => Document::new(),
                }
            }
        };
        RawDocumentBuf::try_from(&d).map_err(crate::request::invalid_bson)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(spec: &[(&str, bool)]) -> Vec<KeyField> {
        spec.iter()
            .map(|(p, d)| KeyField {
                path: (*p).into(),
                descending: *d,
            })
            .collect()
    }

    #[test]
    fn min_and_max_name_the_same_fields() {
        let ok = MinMax {
            min: doc! {"a": 1, "b": 2},
            max: doc! {"a": 3, "b": 0},
        };
        assert!(ok.validate().is_ok());
        let one_side = MinMax {
            min: doc! {"a": 1},
            max: Document::new(),
        };
        assert!(one_side.validate().is_ok());
        for (min, max) in [
            (doc! {"a": 1, "b": 2}, doc! {"b": 3, "a": 0}),
            (doc! {"a": 1}, doc! {"a": 3, "b": 0}),
        ] {
            let e = MinMax { min, max }
                .validate()
                .err()
                .unwrap_or_else(|| panic!("should fail"));
            assert_eq!(e.code.code(), 51176);
        }
    }

    #[test]
    fn bounds_must_be_the_whole_key_pattern_in_order() {
        let f = fields(&[("j", false), ("k", false)]);
        assert!(compatible(&doc! {"j": 3, "k": 3}, &f, false));
        assert!(!compatible(&doc! {"k": 3, "j": 3}, &f, false));
        assert!(!compatible(&doc! {"j": 3}, &f, false));
        assert!(!compatible(&doc! {"j": 3, "k": 3, "l": 1}, &f, false));
        // Under a collation the index does not share, strings cannot bound it.
        assert!(!compatible(&doc! {"j": "x", "k": 3}, &f, true));
        assert!(compatible(&doc! {"j": 1, "k": 3}, &f, true));
    }

    #[test]
    fn absent_bounds_are_the_ends_of_the_index_order() {
        let f = fields(&[("a", false), ("b", true)]);
        assert_eq!(
            finish(&Document::new(), &f, true, None),
            vec![Bson::MinKey, Bson::MaxKey]
        );
        assert_eq!(
            finish(&Document::new(), &f, false, None),
            vec![Bson::MaxKey, Bson::MinKey]
        );
        assert_eq!(
            finish(&doc! {"a": 1, "b": 2}, &f, true, None),
            vec![Bson::Int32(1), Bson::Int32(2)]
        );
    }

    #[test]
    fn keys_compare_in_index_order() {
        let f = fields(&[("a", false), ("b", true)]);
        let k = |a: i32, b: i32| vec![Bson::Int32(a), Bson::Int32(b)];
        assert_eq!(compare_keys(&k(1, 5), &k(2, 0), &f), CmpOrdering::Less);
        // `b` is descending: 5 comes before 2.
        assert_eq!(compare_keys(&k(1, 5), &k(1, 2), &f), CmpOrdering::Less);
        assert_eq!(compare_keys(&k(1, 2), &k(1, 2), &f), CmpOrdering::Equal);
        assert_eq!(compare_keys(&k(1, 2), &k(1, 5), &f), CmpOrdering::Greater);
    }
}
