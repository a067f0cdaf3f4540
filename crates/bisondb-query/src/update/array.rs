//! `$push` (with `$each`, `$position`, `$slice`, `$sort`), `$addToSet`,
//! `$pop`, `$pull` and `$pullAll`.

use super::path::{self, Lookup};
use super::{Ctx, FieldPath, OpKind};
use crate::collation::Collation;
use crate::compare::{compare_bson_in, values_equal_bson_in};
use crate::matcher::Matcher;
use crate::value::{render, type_name};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

/// How `$push` sorts the array after inserting.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum PushSort {
    /// Sort whole elements; `true` for ascending.
    Whole(bool),
    /// Sort embedded documents by these fields (`true` for ascending).
    Fields(Vec<(Vec<String>, bool)>),
}

/// A parsed `$push` argument.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PushSpec {
    each: Vec<Bson>,
    position: Option<i64>,
    slice: Option<i64>,
    sort: Option<PushSort>,
}

fn integral(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e15 => Some(*d as i64),
        _ => None,
    }
}

fn sort_dir(v: &Bson) -> Option<bool> {
    match integral(v) {
        Some(1) => Some(true),
        Some(-1) => Some(false),
        _ => None,
    }
}

const SORT_INVALID: &str = "The $sort is invalid: use 1/-1 to sort the whole element, or {field:1/-1} to sort embedded fields";

pub(super) fn parse_push(_fp: &FieldPath, value: &Bson) -> MongoResult<OpKind> {
    let spec = match value {
        Bson::Document(d) if d.contains_key("$each") => {
            let mut spec = PushSpec {
                each: Vec::new(),
                position: None,
                slice: None,
                sort: None,
            };
            for (k, v) in d {
                match k.as_str() {
                    "$each" => match v {
                        Bson::Array(a) => spec.each = a.clone(),
                        other => {
                            return Err(MongoError::bad_value(format!(
                                "The argument to $each in $push must be an array but it was of type: {}",
                                type_name(other)
                            )))
                        }
                    },
                    "$slice" => {
                        spec.slice = Some(integral(v).ok_or_else(|| {
                            MongoError::bad_value(format!(
                                "The value for $slice must be an integer value but was given type: {}",
                                type_name(v)
                            ))
                        })?)
                    }
                    "$position" => {
                        spec.position = Some(integral(v).ok_or_else(|| {
                            MongoError::bad_value(format!(
                                "The value for $position must be an integer value, not of type: {}",
                                type_name(v)
                            ))
                        })?)
                    }
                    "$sort" => spec.sort = Some(parse_push_sort(v)?),
                    other => return Err(MongoError::bad_value(format!("Unrecognized clause in $push: {other}"))),
                }
            }
            spec
        }
        other => PushSpec {
            each: vec![other.clone()],
            position: None,
            slice: None,
            sort: None,
        },
    };
    Ok(OpKind::Push(spec))
}

fn parse_push_sort(v: &Bson) -> MongoResult<PushSort> {
    if let Some(dir) = sort_dir(v) {
        return Ok(PushSort::Whole(dir));
    }
    let Bson::Document(d) = v else {
        return Err(MongoError::bad_value(SORT_INVALID));
    };
    if d.is_empty() {
        return Err(MongoError::bad_value(
            "The $sort pattern is empty when it should be a set of fields.",
        ));
    }
    let mut fields = Vec::with_capacity(d.len());
    for (k, dir) in d {
        if k.is_empty() || k.split('.').any(str::is_empty) || k.starts_with('$') {
            return Err(MongoError::bad_value(format!(
                "The $sort field is a dotted field but has an empty part: {k}"
            )));
        }
        let dir = sort_dir(dir).ok_or_else(|| MongoError::bad_value(SORT_INVALID))?;
        fields.push((path::split(k), dir));
    }
    Ok(PushSort::Fields(fields))
}

fn not_array(fp: &FieldPath, cur: &Bson, ctx: &Ctx) -> MongoError {
    MongoError::bad_value(format!(
        "The field '{}' must be an array but is of type {} in document {}",
        fp.parts.last().map_or("", String::as_str),
        type_name(cur),
        ctx.id_desc
    ))
}

fn sort_key<'a>(v: &'a Bson, parts: &'a [String]) -> &'a Bson {
    match v {
        Bson::Document(d) => match path::lookup(d, parts) {
            Lookup::Found(x) => x,
            _ => &Bson::Null,
        },
        _ => &Bson::Null,
    }
}

pub(super) fn push(
    doc: &mut Document,
    fp: &FieldPath,
    spec: &PushSpec,
    ctx: &Ctx,
) -> MongoResult<()> {
    let mut arr = match path::lookup(doc, &fp.parts) {
        Lookup::Found(Bson::Array(a)) => a.clone(),
        Lookup::Found(other) => return Err(not_array(fp, other, ctx)),
        _ => Vec::new(),
    };
    let len = i64::try_from(arr.len()).unwrap_or(i64::MAX);
    let at = match spec.position {
        None => arr.len(),
        Some(p) if p >= 0 => usize::try_from(p.min(len)).unwrap_or(arr.len()),
        Some(p) => usize::try_from(len.saturating_add(p).max(0)).unwrap_or(0),
    };
    arr.splice(at..at, spec.each.iter().cloned());
    let c = ctx.collation.as_deref();
    match &spec.sort {
        Some(PushSort::Whole(asc)) => arr.sort_by(|a, b| dir(compare_bson_in(a, b, c), *asc)),
        Some(PushSort::Fields(fields)) => arr.sort_by(|a, b| {
            for (parts, asc) in fields {
                let o = dir(
                    compare_bson_in(sort_key(a, parts), sort_key(b, parts), c),
                    *asc,
                );
                if o != Ordering::Equal {
                    return o;
                }
            }
            Ordering::Equal
        }),
        None => {}
    }
    if let Some(s) = spec.slice {
        let n = usize::try_from(s.unsigned_abs()).unwrap_or(usize::MAX);
        if s >= 0 {
            arr.truncate(n);
        } else if n < arr.len() {
            arr.drain(..arr.len() - n);
        }
    }
    path::set_path(doc, &fp.parts, Bson::Array(arr))
}

fn dir(o: Ordering, asc: bool) -> Ordering {
    if asc {
        o
    } else {
        o.reverse()
    }
}

pub(super) fn parse_add_to_set(value: &Bson) -> MongoResult<OpKind> {
    match value {
        Bson::Document(d) if d.keys().next().is_some_and(|k| k == "$each") => {
            if d.len() > 1 {
                return Err(MongoError::bad_value(format!(
                    "Found unexpected fields after $each in $addToSet: {}",
                    render(value)
                )));
            }
            match d.get("$each") {
                Some(Bson::Array(a)) => Ok(OpKind::AddToSet(a.clone())),
                Some(other) => Err(MongoError::bad_value(format!(
                    "The argument to $each in $addToSet must be an array but it was of type {}",
                    type_name(other)
                ))),
                None => Err(MongoError::internal("$each vanished")),
            }
        }
        other => Ok(OpKind::AddToSet(vec![other.clone()])),
    }
}

pub(super) fn add_to_set(
    doc: &mut Document,
    fp: &FieldPath,
    vals: &[Bson],
    ctx: &Ctx,
) -> MongoResult<()> {
    let mut arr = match path::lookup(doc, &fp.parts) {
        Lookup::Found(Bson::Array(a)) => a.clone(),
        Lookup::Found(other) => {
            return Err(MongoError::bad_value(format!(
                "Cannot apply $addToSet to non-array field. Field named '{}' has non-array type {}",
                fp.parts.last().map_or("", String::as_str),
                type_name(other)
            )))
        }
        _ => Vec::new(),
    };
    for v in vals {
        if !arr
            .iter()
            .any(|x| values_equal_bson_in(x, v, ctx.collation.as_deref()))
        {
            arr.push(v.clone());
        }
    }
    path::set_path(doc, &fp.parts, Bson::Array(arr))
}

pub(super) fn parse_pop(value: &Bson) -> MongoResult<OpKind> {
    let Some(n) = crate::value::Num::from_bson(value).map(crate::value::Num::as_f64) else {
        return Err(MongoError::failed_to_parse(format!(
            "Expected a number in: {}",
            render(value)
        )));
    };
    if n == 1.0 {
        Ok(OpKind::Pop { first: false })
    } else if n == -1.0 {
        Ok(OpKind::Pop { first: true })
    } else {
        Err(MongoError::failed_to_parse(format!(
            "$pop expects 1 or -1, found: {}",
            render(value)
        )))
    }
}

pub(super) fn pop(doc: &mut Document, fp: &FieldPath, first: bool) -> MongoResult<()> {
    let mut arr = match path::lookup(doc, &fp.parts) {
        Lookup::Found(Bson::Array(a)) => a.clone(),
        Lookup::Found(other) => {
            return Err(MongoError::type_mismatch(format!(
                "Path '{}' contains an element of non-array type '{}'",
                fp.dotted,
                type_name(other)
            )))
        }
        _ => return Ok(()),
    };
    if arr.is_empty() {
        return Ok(());
    }
    if first {
        arr.remove(0);
    } else {
        arr.pop();
    }
    path::set_path(doc, &fp.parts, Bson::Array(arr))
}

/// What `$pull` removes.
#[derive(Debug, Clone)]
pub(crate) enum PullCond {
    /// Elements equal to this value.
    Equal(Bson),
    /// Document elements matching this query.
    Docs(Matcher),
    /// Elements whose value matches operator conditions (`{$gte: 6}`); each
    /// element is wrapped as `{v: element}` and matched against `{v: cond}`.
    Values(Matcher),
}

/// Top-level query operators that make a `$pull` condition a document query.
const QUERY_TOP_LEVEL: &[&str] = &[
    "$and",
    "$comment",
    "$expr",
    "$jsonSchema",
    "$nor",
    "$or",
    "$text",
    "$where",
];

pub(super) fn parse_pull(value: &Bson) -> MongoResult<OpKind> {
    let cond = match value {
        Bson::Document(d) => match d.keys().next() {
            Some(k) if k.starts_with('$') && !QUERY_TOP_LEVEL.contains(&k.as_str()) => {
                PullCond::Values(Matcher::parse_doc(&doc! {"v": value.clone()})?)
            }
            _ => PullCond::Docs(Matcher::parse_doc(d)?),
        },
        other => PullCond::Equal(other.clone()),
    };
    Ok(OpKind::Pull(cond))
}

fn pull_matches(cond: &PullCond, elem: &Bson, c: Option<&Collation>) -> MongoResult<bool> {
    Ok(match cond {
        PullCond::Equal(v) => values_equal_bson_in(v, elem, c),
        PullCond::Docs(m) => match elem {
            Bson::Document(d) => m.matches_doc(d),
            _ => false,
        },
        PullCond::Values(m) => m.matches_doc(&doc! {"v": elem.clone()}),
    })
}

fn pull_where(
    doc: &mut Document,
    fp: &FieldPath,
    mut remove: impl FnMut(&Bson) -> MongoResult<bool>,
) -> MongoResult<()> {
    let arr = match path::lookup(doc, &fp.parts) {
        Lookup::Found(Bson::Array(a)) => a,
        Lookup::Found(_) => {
            return Err(MongoError::bad_value(
                "Cannot apply $pull to a non-array value",
            ))
        }
        _ => return Ok(()),
    };
    let mut kept = Vec::with_capacity(arr.len());
    for x in arr {
        if !remove(x)? {
            kept.push(x.clone());
        }
    }
    if kept.len() == arr.len() {
        return Ok(());
    }
    path::set_path(doc, &fp.parts, Bson::Array(kept))
}

pub(super) fn pull(
    doc: &mut Document,
    fp: &FieldPath,
    cond: &PullCond,
    ctx: &Ctx,
) -> MongoResult<()> {
    // Conditions that are queries match under the update's collation.
    let collated;
    let cond = match (&ctx.collation, cond) {
        (Some(c), PullCond::Docs(m)) => {
            collated = PullCond::Docs(m.clone().with_collation(Some(c.clone())));
            &collated
        }
        (Some(c), PullCond::Values(m)) => {
            collated = PullCond::Values(m.clone().with_collation(Some(c.clone())));
            &collated
        }
        _ => cond,
    };
    let c = ctx.collation.as_deref();
    pull_where(doc, fp, |x| pull_matches(cond, x, c))
}

pub(super) fn parse_pull_all(value: &Bson) -> MongoResult<OpKind> {
    match value {
        Bson::Array(a) => Ok(OpKind::PullAll(a.clone())),
        other => Err(MongoError::new(
            ErrorCode::BadValue,
            format!(
                "$pullAll requires an array argument but was given a {}",
                type_name(other)
            ),
        )),
    }
}

pub(super) fn pull_all(
    doc: &mut Document,
    fp: &FieldPath,
    vals: &[Bson],
    ctx: &Ctx,
) -> MongoResult<()> {
    let c = ctx.collation.as_deref();
    pull_where(doc, fp, |x| {
        Ok(vals.iter().any(|v| values_equal_bson_in(v, x, c)))
    })
}
