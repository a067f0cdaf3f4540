//! The unified format's matching rules: numeric types compare by value, root
//! documents (and the documents directly inside a root array, as the spec files
//! expect: `find-comment.json` lists `{_id: 1}` for `{_id: 1, x: 11}`) may carry
//! extra fields, nested documents may not, and the `$$` operators (`$$exists`,
//! `$$type`, `$$unsetOrMatches`, `$$matchesEntity`, `$$lte`) stand in for values.

use std::collections::HashMap;

use bson::{Bson, Document};

/// Checks `actual` against `expected`; the error names the first mismatch's path.
pub fn matches(
    expected: &Bson,
    actual: Option<&Bson>,
    root: bool,
    entities: &HashMap<String, Bson>,
    path: &str,
) -> Result<(), String> {
    if let Bson::Document(d) = expected {
        if let Some((op, arg)) = special(d) {
            return special_match(op, arg, actual, root, entities, path);
        }
    }
    let Some(actual) = actual else {
        return Err(format!("{path}: expected {expected}, field is missing"));
    };
    match (expected, actual) {
        (Bson::Document(e), Bson::Document(a)) => {
            for (k, ev) in e {
                matches(ev, a.get(k), false, entities, &format!("{path}.{k}"))?;
            }
            if !root {
                if let Some(extra) = a.keys().find(|k| !e.contains_key(k.as_str())) {
                    return Err(format!("{path}: unexpected field {extra} in {a}"));
                }
            }
            Ok(())
        }
        (Bson::Array(e), Bson::Array(a)) => {
            if e.len() != a.len() {
                return Err(format!(
                    "{path}: expected {} elements, got {}: {}",
                    e.len(),
                    a.len(),
                    Bson::Array(a.clone())
                ));
            }
            for (i, (ev, av)) in e.iter().zip(a).enumerate() {
                matches(ev, Some(av), root, entities, &format!("{path}[{i}]"))?;
            }
            Ok(())
        }
        _ => {
            if values_equal(expected, actual) {
                Ok(())
            } else {
                Err(format!("{path}: expected {expected}, got {actual}"))
            }
        }
    }
}

/// A one-key document whose key starts with `$$` is a matching operator.
fn special(d: &Document) -> Option<(&str, &Bson)> {
    if d.len() != 1 {
        return None;
    }
    let (k, v) = d.iter().next()?;
    k.starts_with("$$").then_some((k.as_str(), v))
}

fn special_match(
    op: &str,
    arg: &Bson,
    actual: Option<&Bson>,
    root: bool,
    entities: &HashMap<String, Bson>,
    path: &str,
) -> Result<(), String> {
    match op {
        "$$exists" => {
            let want = matches!(arg, Bson::Boolean(true));
            if actual.is_some() == want {
                Ok(())
            } else {
                Err(format!("{path}: $$exists {want} but got {actual:?}"))
            }
        }
        "$$unsetOrMatches" => match actual {
            None => Ok(()),
            Some(a) => matches(arg, Some(a), root, entities, path),
        },
        "$$type" => {
            let Some(a) = actual else {
                return Err(format!("{path}: $$type {arg} but field is missing"));
            };
            let names: Vec<&str> = match arg {
                Bson::String(s) => vec![s.as_str()],
                Bson::Array(items) => items.iter().filter_map(Bson::as_str).collect(),
                _ => vec![],
            };
            let actual_name = type_name(a);
            let ok = names.iter().any(|n| {
                *n == actual_name
                    || (*n == "number"
                        && matches!(actual_name, "int" | "long" | "double" | "decimal"))
            });
            if ok {
                Ok(())
            } else {
                Err(format!("{path}: expected type {arg}, got {actual_name}"))
            }
        }
        "$$matchesEntity" => {
            let id = arg.as_str().unwrap_or_default();
            let Some(ent) = entities.get(id) else {
                return Err(format!("{path}: no entity {id}"));
            };
            matches(ent, actual, root, entities, path)
        }
        "$$sessionLsid" => {
            // The runner keeps each session's lsid as the value `lsid:<id>`.
            let id = arg.as_str().unwrap_or_default();
            let Some(lsid) = entities.get(&format!("lsid:{id}")) else {
                return Err(format!("{path}: no session {id}"));
            };
            if actual == Some(lsid) {
                Ok(())
            } else {
                Err(format!("{path}: expected the lsid of {id}, got {actual:?}"))
            }
        }
        "$$lte" => match (actual.and_then(as_f64), as_f64(arg)) {
            (Some(a), Some(e)) if a <= e => Ok(()),
            _ => Err(format!("{path}: expected <= {arg}, got {actual:?}")),
        },
        other => Err(format!(
            "{path}: matching operator {other} is not supported by the runner"
        )),
    }
}

fn as_f64(b: &Bson) -> Option<f64> {
    match b {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        _ => None,
    }
}

/// Numbers of any width are equal when their values are; everything else by BSON equality.
pub fn values_equal(a: &Bson, b: &Bson) -> bool {
    match (a, b) {
        (Bson::Int32(x), Bson::Int64(y)) | (Bson::Int64(y), Bson::Int32(x)) => i64::from(*x) == *y,
        (Bson::Double(_), Bson::Int32(_) | Bson::Int64(_))
        | (Bson::Int32(_) | Bson::Int64(_), Bson::Double(_)) => as_f64(a) == as_f64(b),
        (Bson::Double(x), Bson::Double(y)) => x == y || (x.is_nan() && y.is_nan()),
        _ => a == b,
    }
}

/// The type aliases `$type` and the unified format use.
pub fn type_name(b: &Bson) -> &'static str {
    match b {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Document(_) => "object",
        Bson::Array(_) => "array",
        Bson::Binary(_) => "binData",
        Bson::Undefined => "undefined",
        Bson::ObjectId(_) => "objectId",
        Bson::Boolean(_) => "bool",
        Bson::DateTime(_) => "date",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::DbPointer(_) => "dbPointer",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::Symbol(_) => "symbol",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Timestamp(_) => "timestamp",
        Bson::Int64(_) => "long",
        Bson::Decimal128(_) => "decimal",
        Bson::MinKey => "minKey",
        Bson::MaxKey => "maxKey",
    }
}
