//! Wildcard indexes in the planner, as mongod 8 plans them: a wildcard index
//! (`{"$**": 1}`, `{"a.$**": 1}`, compound `{a: 1, "$**": 1}`) stands for
//! one index per path the filter constrains, `{$_path: 1, <path>: 1}`
//! (regular fields around it), scanned at `$_path` equal to that path and
//! the value bounds of the path's predicates. Only predicates the index can
//! answer count (`bounds::wildcard_field_bounds`: no `null`, object or array
//! equality, no negation, no `$exists: false`); a path under `_id` or outside
//! the `wildcardProjection` is not in the index; a path with a numeric
//! component (`a.0`, an array position or a field name) is not planned on
//! the index. A path where some document holds an array (the index's
//! multikey path entries) takes one predicate's bounds and never gives a
//! sort. A compound wildcard index whose wildcard term the filter does not
//! constrain is scanned over every path (`$_path` from `MinKey`, which
//! documents without a wildcard leaf store, to the last string).

use bisondb_query::index_keys::wildcard::PATH_FIELD;
use bisondb_query::matcher::bounds::{
    constrained_paths, field_bounds_in, wildcard_field_bounds, FieldBounds, Interval,
};
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, IndexInfo};
use bson::{Bson, Document};

use super::access::index_collation;

/// Whether `ix` is a wildcard index, or one path's index made of one
/// (`expand`): a document may have several keys in its bounds.
pub(super) fn is_wildcard(ix: &IndexInfo) -> bool {
    ix.spec.wildcard_field().is_some() || ix.spec.key.contains_key(PATH_FIELD)
}

/// The indexes wildcard index `ix` stands for under filter `m`, each with
/// its bounds (one per key component).
pub(super) fn expand(
    coll: &Collection,
    ix: &IndexInfo,
    m: &Matcher,
) -> Vec<(IndexInfo, Vec<FieldBounds>)> {
    let (Some(at), Some(Ok(paths))) = (ix.spec.wildcard_field(), ix.spec.wildcard_paths()) else {
        return Vec::new();
    };
    let Some(collation) = index_collation(ix) else {
        return Vec::new();
    };
    let regular = |bounds: &mut Vec<FieldBounds>, path_b: FieldBounds, value_b: FieldBounds| {
        for (i, f) in ix.fields.iter().enumerate() {
            if i == at {
                bounds.push(path_b.clone());
            } else if i == at + 1 {
                bounds.push(value_b.clone());
            } else {
                // Regular fields of a compound wildcard index are never multikey.
                bounds.push(field_bounds_in(m, &f.path, false, collation.as_deref()));
            }
        }
    };
    let mut out = Vec::new();
    for path in constrained_paths(m) {
        if path.starts_with('$')
            || !paths.covers(&path)
            || path
                .split('.')
                .any(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        {
            continue;
        }
        // An index in the catalog whose entries cannot be read: not planned on.
        let Ok(multikey) = coll.wildcard_multikey(&ix.spec.name, &path) else {
            continue;
        };
        let Some((path_b, value_b)) =
            wildcard_field_bounds(m, &path, multikey, collation.as_deref())
        else {
            continue;
        };
        let mut bounds = Vec::with_capacity(ix.fields.len());
        regular(&mut bounds, path_b, value_b);
        out.push((virtual_index(ix, at, &path, multikey), bounds));
    }
    if out.is_empty() && ix.fields.len() > 2 {
        // A compound wildcard index by its regular fields alone.
        let every_path = FieldBounds {
            intervals: vec![
                Interval::point(Bson::MinKey),
                Interval {
                    lo: Bson::String(String::new()),
                    lo_inclusive: true,
                    hi: Bson::Document(Document::new()),
                    hi_inclusive: false,
                },
            ],
            exact: false,
        };
        let mut bounds = Vec::with_capacity(ix.fields.len());
        regular(&mut bounds, every_path, FieldBounds::full());
        if bounds
            .iter()
            .enumerate()
            .any(|(i, b)| i != at && i != at + 1 && !b.is_full())
        {
            let term = ix.fields.get(at + 1).map_or("$**", |f| f.path.as_str());
            let mut v = virtual_index(ix, at, term, ix.multikey);
            // A document may have keys under several paths.
            v.multikey = true;
            out.push((v, bounds));
        }
    }
    out
}

/// `ix` as the index of one path: key pattern `{..., $_path: 1, path: ±1,
/// ...}` (what explain shows), fields named alike.
fn virtual_index(ix: &IndexInfo, at: usize, path: &str, multikey: bool) -> IndexInfo {
    let mut v = ix.clone();
    let descending = ix.fields.get(at + 1).is_some_and(|f| f.descending);
    if let Some(f) = v.fields.get_mut(at + 1) {
        f.path = path.to_string();
    }
    let mut key = Document::new();
    for (i, (k, val)) in ix.spec.key.iter().enumerate() {
        if i == at {
            key.insert(PATH_FIELD, 1);
            key.insert(path, if descending { -1 } else { 1 });
        } else {
            key.insert(k.clone(), val.clone());
        }
    }
    v.spec.key = key;
    v.multikey = multikey;
    v
}
