//! Dotted paths (`a.b.0.c`) through embedded documents and arrays.
//!
//! Three flavours exist because mongod itself has three:
//! - query matching ([`lookup_raw`]) fans out over arrays of documents, treats
//!   numeric components both as array indexes and as field names, and must say
//!   whether some branch of the traversal found nothing (so `{a: null}` can match
//!   a missing field);
//! - simple lookups ([`get_path_bson`], [`get_path_raw`]) follow exactly one
//!   branch, using numeric components as array indexes;
//! - aggregation field paths ([`get_path_bson_fanout`]) map over arrays and
//!   collect the reached values into arrays, and never index arrays.
//!
//! [`set_path_bson`] and [`remove_path_bson`] mutate owned documents for
//! projection and update operators; [`edit`] holds the update system's own
//! writes by split path (used by update operators and by the stages that
//! write fields).

pub mod edit;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document};

/// The largest array index a write may pad up to, as mongod limits backfilling.
const MAX_BACKFILL_INDEX: usize = 1_500_000;

/// What a matching lookup saw besides the values it reached.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct LookupInfo {
    /// Some branch of the traversal ended before the last component (a document
    /// without the field, or a scalar in the way), or nothing was reached at all.
    /// mongod treats such a branch as a "missing" value, which `{a: null}` and
    /// `{$exists: false}` match.
    pub missing: bool,
    /// An array was traversed before the last component.
    pub traversed_array: bool,
}

/// Parses a path component as an array index (`"0"`, `"12"`; no sign, no spaces).
pub fn array_index(component: &str) -> Option<usize> {
    if component.is_empty() || !component.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    component.parse().ok()
}

/// Collects every value a dotted path reaches in `doc`, mongod-style, into `out`.
///
/// `"a.b"` on `{a: [{b: 1}, {b: [2, 3]}]}` reaches `1` and `[2, 3]`; leaf arrays
/// are not expanded here (the matcher decides per operator whether to look
/// inside them). Numeric components index arrays and also name fields of the
/// array's embedded documents.
pub fn lookup_raw<'a>(
    doc: &'a RawDocument,
    path: &str,
    out: &mut Vec<RawBsonRef<'a>>,
) -> LookupInfo {
    let parts: Vec<&str> = path.split('.').collect();
    let mut info = LookupInfo::default();
    let start = out.len();
    walk_doc(doc, &parts, out, &mut info);
    if out.len() == start {
        info.missing = true;
    }
    info
}

fn walk_doc<'a>(
    doc: &'a RawDocument,
    parts: &[&str],
    out: &mut Vec<RawBsonRef<'a>>,
    info: &mut LookupInfo,
) {
    let Some((first, rest)) = parts.split_first() else {
        return;
    };
    match doc.get(first) {
        Ok(Some(v)) => walk_value(v, rest, out, info),
        _ => info.missing = true,
    }
}

fn walk_value<'a>(
    v: RawBsonRef<'a>,
    parts: &[&str],
    out: &mut Vec<RawBsonRef<'a>>,
    info: &mut LookupInfo,
) {
    let Some((first, rest)) = parts.split_first() else {
        out.push(v);
        return;
    };
    match v {
        RawBsonRef::Document(d) => walk_doc(d, parts, out, info),
        RawBsonRef::Array(arr) => {
            info.traversed_array = true;
            if let Some(idx) = array_index(first) {
                if let Ok(Some(elem)) = arr.get(idx) {
                    walk_value(elem, rest, out, info);
                }
            }
            for elem in arr.into_iter().flatten() {
                // Nested arrays and scalars are not traversed by a non-leaf
                // component; only embedded documents are.
                if let RawBsonRef::Document(d) = elem {
                    if array_index(first).is_some() {
                        // A numeric component names a field here; a document
                        // without it is not a "missing" branch, since the
                        // component was (also) an index.
                        if let Ok(Some(v)) = d.get(first) {
                            walk_value(v, rest, out, info);
                        }
                    } else {
                        walk_doc(d, parts, out, info);
                    }
                }
            }
        }
        _ => info.missing = true,
    }
}

/// Follows one branch of a dotted path; numeric components index arrays.
pub fn get_path_raw<'a>(doc: &'a RawDocument, path: &str) -> Option<RawBsonRef<'a>> {
    let mut parts = path.split('.');
    let first = parts.next()?;
    let mut cur = doc.get(first).ok()??;
    for p in parts {
        cur = match cur {
            RawBsonRef::Document(d) => d.get(p).ok()??,
            RawBsonRef::Array(a) => a.get(array_index(p)?).ok()??,
            _ => return None,
        };
    }
    Some(cur)
}

/// Follows one branch of a dotted path in an owned document; numeric
/// components index arrays. No fan-out over arrays.
pub fn get_path_bson<'a>(doc: &'a Document, path: &str) -> Option<&'a Bson> {
    let mut parts = path.split('.');
    let first = parts.next()?;
    let mut cur = doc.get(first)?;
    for p in parts {
        cur = match cur {
            Bson::Document(d) => d.get(p)?,
            Bson::Array(a) => a.get(array_index(p)?)?,
            _ => return None,
        };
    }
    Some(cur)
}

/// Aggregation-style field path evaluation (`"$a.b"`): through an array, the
/// result is the array of values reached in its elements (nested arrays give
/// nested results, elements without the field are skipped). `None` means the
/// path is missing. Numeric components are field names, never indexes.
pub fn get_path_bson_fanout(doc: &Document, path: &str) -> Option<Bson> {
    // A top-level field (the common `"$value"`) needs no split: this runs once
    // per field reference per document in every aggregation.
    if !path.contains('.') {
        return doc.get(path).cloned();
    }
    let parts: Vec<&str> = path.split('.').collect();
    let (first, rest) = parts.split_first()?;
    fanout(doc.get(*first)?, rest)
}

fn fanout(v: &Bson, parts: &[&str]) -> Option<Bson> {
    let Some((first, rest)) = parts.split_first() else {
        return Some(v.clone());
    };
    match v {
        Bson::Document(d) => fanout(d.get(*first)?, rest),
        Bson::Array(a) => Some(Bson::Array(
            a.iter()
                .filter(|e| matches!(e, Bson::Document(_) | Bson::Array(_)))
                .filter_map(|e| fanout(e, parts))
                .collect(),
        )),
        _ => None,
    }
}

/// Checks one component of a field path (`b` of `a.b`) as mongod's
/// `FieldPath` does: not empty, not `$`-prefixed.
pub(crate) fn check_field_name(part: &str) -> MongoResult<()> {
    if part.is_empty() {
        return Err(MongoError::location(
            15998,
            "FieldPath field names may not be empty strings.",
        ));
    }
    if part.starts_with('$') {
        return Err(MongoError::location(
            16410,
            "FieldPath field names may not start with '$'. Consider using $getField or $setField.",
        ));
    }
    Ok(())
}

fn split_checked(path: &str) -> MongoResult<Vec<&str>> {
    let parts: Vec<&str> = path.split('.').collect();
    if parts.iter().any(|p| p.is_empty()) {
        return Err(MongoError::new(
            ErrorCode::EmptyFieldName,
            format!("The path '{path}' contains an empty field name, which is not allowed."),
        ));
    }
    Ok(parts)
}

fn not_viable(field: &str, parent: &str, value: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::PathNotViable,
        format!("Cannot create field '{field}' in element {{{parent}: {value}}}"),
    )
}

/// Sets the value at a dotted path, creating intermediate documents; numeric
/// components index arrays (padding with nulls as `$set` does). Fails with
/// `PathNotViable` (28) when a scalar, or an array with a non-numeric
/// component, is in the way.
pub fn set_path_bson(doc: &mut Document, path: &str, value: Bson) -> MongoResult<()> {
    let parts = split_checked(path)?;
    set_in_doc(doc, &parts, value)
}

fn set_in_doc(doc: &mut Document, parts: &[&str], value: Bson) -> MongoResult<()> {
    let Some((first, rest)) = parts.split_first() else {
        return Ok(());
    };
    if rest.is_empty() {
        doc.insert(*first, value);
        return Ok(());
    }
    match doc.get_mut(*first) {
        None => {
            let mut sub = Document::new();
            set_in_doc(&mut sub, rest, value)?;
            doc.insert(*first, sub);
            Ok(())
        }
        Some(slot) => set_in_value(slot, first, rest, value),
    }
}

fn set_in_value(slot: &mut Bson, name: &str, parts: &[&str], value: Bson) -> MongoResult<()> {
    let Some((first, rest)) = parts.split_first() else {
        *slot = value;
        return Ok(());
    };
    match slot {
        Bson::Document(d) => set_in_doc(d, parts, value),
        Bson::Array(arr) => {
            let Some(idx) = array_index(first) else {
                return Err(not_viable(first, name, &Bson::Array(arr.clone())));
            };
            if idx > MAX_BACKFILL_INDEX {
                return Err(MongoError::bad_value(format!(
                    "can't backfill array to larger than {MAX_BACKFILL_INDEX} elements"
                )));
            }
            while arr.len() <= idx {
                arr.push(if arr.len() == idx && !rest.is_empty() {
                    Bson::Document(Document::new())
                } else {
                    Bson::Null
                });
            }
            match arr.get_mut(idx) {
                Some(elem) => set_in_value(elem, first, rest, value),
                None => Err(MongoError::internal("array padding failed")),
            }
        }
        other => Err(not_viable(first, name, other)),
    }
}

/// Removes the value at a dotted path (`$unset` semantics: an array element
/// named by index is replaced by null, keeping positions). Returns whether
/// anything was there.
pub fn remove_path_bson(doc: &mut Document, path: &str) -> bool {
    let parts: Vec<&str> = path.split('.').collect();
    let Some((last, parents)) = parts.split_last() else {
        return false;
    };
    let Some((first, middle)) = parents.split_first() else {
        return doc.remove(*last).is_some();
    };
    let Some(mut cur) = doc.get_mut(*first) else {
        return false;
    };
    for p in middle {
        cur = match cur {
            Bson::Document(d) => match d.get_mut(*p) {
                Some(v) => v,
                None => return false,
            },
            Bson::Array(a) => match array_index(p).and_then(|i| a.get_mut(i)) {
                Some(v) => v,
                None => return false,
            },
            _ => return false,
        };
    }
    match cur {
        Bson::Document(d) => d.remove(*last).is_some(),
        Bson::Array(a) => match array_index(last).and_then(|i| a.get_mut(i)) {
            Some(v) => {
                *v = Bson::Null;
                true
            }
            None => false,
        },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{bson, doc, RawDocumentBuf};

    fn lookup(d: &Document, path: &str) -> (Vec<Bson>, LookupInfo) {
        let raw = RawDocumentBuf::try_from(d).unwrap();
        let mut out = Vec::new();
        let info = lookup_raw(&raw, path, &mut out);
        let vals = out
            .into_iter()
            .map(|v| Bson::try_from(v).unwrap())
            .collect();
        (vals, info)
    }

    #[test]
    fn lookup_table() {
        let cases: Vec<(Document, &str, Vec<Bson>, bool, bool)> = vec![
            (doc! {"a": 1}, "a", vec![bson!(1)], false, false),
            (doc! {"a": 1}, "b", vec![], true, false),
            (doc! {"a": 1}, "a.b", vec![], true, false),
            (doc! {"a": {"b": 2}}, "a.b", vec![bson!(2)], false, false),
            (
                doc! {"a": [{"b": 1}, {"b": [2, 3]}]},
                "a.b",
                vec![bson!(1), bson!([2, 3])],
                false,
                true,
            ),
            (
                doc! {"a": [{"b": 1}, {"c": 2}]},
                "a.b",
                vec![bson!(1)],
                true,
                true,
            ),
            (doc! {"a": [1, 2]}, "a.b", vec![], true, true),
            (doc! {"a": [[{"b": 1}]]}, "a.b", vec![], true, true),
            (
                doc! {"a": [{"b": 1}, {"b": 2}]},
                "a.1.b",
                vec![bson!(2)],
                false,
                true,
            ),
            (
                doc! {"a": [{"0": 7}, 8]},
                "a.0",
                vec![bson!({"0": 7}), bson!(7)],
                false,
                true,
            ),
            (doc! {"a": [5]}, "a.3", vec![], true, true),
            (
                doc! {"a": {"0": "x"}},
                "a.0",
                vec![bson!("x")],
                false,
                false,
            ),
            (doc! {"a": [1, 2]}, "a", vec![bson!([1, 2])], false, false),
        ];
        for (d, path, want, missing, traversed) in cases {
            let (got, info) = lookup(&d, path);
            assert_eq!(got, want, "{d} {path}");
            assert_eq!(info.missing, missing, "missing: {d} {path}");
            assert_eq!(info.traversed_array, traversed, "traversed: {d} {path}");
        }
    }

    #[test]
    fn simple_get() {
        let d = doc! {"a": {"b": [10, {"c": 3}]}};
        assert_eq!(get_path_bson(&d, "a.b.0"), Some(&bson!(10)));
        assert_eq!(get_path_bson(&d, "a.b.1.c"), Some(&bson!(3)));
        assert_eq!(get_path_bson(&d, "a.b.c"), None);
        assert_eq!(get_path_bson(&d, "a.x"), None);
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        assert_eq!(
            get_path_raw(&raw, "a.b.1.c").map(|v| Bson::try_from(v).unwrap()),
            Some(bson!(3))
        );
        assert!(get_path_raw(&raw, "a.b.2").is_none());
    }

    #[test]
    fn fanout_table() {
        let cases: Vec<(Document, &str, Option<Bson>)> = vec![
            (doc! {"a": [{"b": 1}, {"b": 2}]}, "a.b", Some(bson!([1, 2]))),
            (doc! {"a": [{"b": 1}, {"c": 2}, 5]}, "a.b", Some(bson!([1]))),
            (
                doc! {"a": [[{"b": 1}], {"b": 2}]},
                "a.b",
                Some(bson!([[1], 2])),
            ),
            (doc! {"a": {"b": {"c": 1}}}, "a.b.c", Some(bson!(1))),
            (doc! {"a": [10, 20]}, "a.0", Some(bson!([]))),
            (doc! {"a": 1}, "a.b", None),
            (doc! {"a": 1}, "z", None),
        ];
        for (d, path, want) in cases {
            assert_eq!(get_path_bson_fanout(&d, path), want, "{d} {path}");
        }
    }

    #[test]
    fn set_table() {
        let cases: Vec<(Document, &str, Result<Document, ErrorCode>)> = vec![
            (doc! {}, "a.b.c", Ok(doc! {"a": {"b": {"c": 9}}})),
            (
                doc! {"a": {"x": 1}},
                "a.b",
                Ok(doc! {"a": {"x": 1, "b": 9}}),
            ),
            (doc! {"a": [1, 2]}, "a.1", Ok(doc! {"a": [1, 9]})),
            (doc! {"a": [1]}, "a.3", Ok(doc! {"a": [1, null, null, 9]})),
            (
                doc! {"a": [1]},
                "a.2.b",
                Ok(doc! {"a": [1, null, {"b": 9}]}),
            ),
            (doc! {"a": [{"b": 1}]}, "a.0.b", Ok(doc! {"a": [{"b": 9}]})),
            (doc! {"a": 1}, "a.b", Err(ErrorCode::PathNotViable)),
            (doc! {"a": [1]}, "a.b", Err(ErrorCode::PathNotViable)),
            (doc! {"a": [1]}, "a.0.b", Err(ErrorCode::PathNotViable)),
            (doc! {}, "a..b", Err(ErrorCode::EmptyFieldName)),
            (doc! {"a": []}, "a.99999999", Err(ErrorCode::BadValue)),
        ];
        for (mut d, path, want) in cases {
            let r = set_path_bson(&mut d, path, bson!(9));
            match want {
                Ok(w) => {
                    assert!(r.is_ok(), "{path}: {r:?}");
                    assert_eq!(d, w, "{path}");
                }
                Err(code) => assert_eq!(r.map_err(|e| e.code), Err(code), "{path}"),
            }
        }
        let mut d = doc! {"a": 1};
        let e = set_path_bson(&mut d, "a.b", bson!(1)).unwrap_err();
        assert_eq!(e.message, "Cannot create field 'b' in element {a: 1}");
    }

    #[test]
    fn remove_table() {
        let cases: Vec<(Document, &str, bool, Document)> = vec![
            (doc! {"a": 1, "b": 2}, "a", true, doc! {"b": 2}),
            (
                doc! {"a": {"b": 1, "c": 2}},
                "a.b",
                true,
                doc! {"a": {"c": 2}},
            ),
            (doc! {"a": [1, 2]}, "a.0", true, doc! {"a": [null, 2]}),
            (doc! {"a": [{"b": 1}]}, "a.0.b", true, doc! {"a": [{}]}),
            (doc! {"a": 1}, "a.b", false, doc! {"a": 1}),
            (doc! {"a": 1}, "x", false, doc! {"a": 1}),
        ];
        for (mut d, path, want, after) in cases {
            assert_eq!(remove_path_bson(&mut d, path), want, "{path}");
            assert_eq!(d, after, "{path}");
        }
    }
}
