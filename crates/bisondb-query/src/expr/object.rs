//! Object expressions: `$mergeObjects`, `$getField`, `$objectToArray`,
//! `$arrayToObject`.

use super::{arg, Ctx, Expr, Scope, Value};
use crate::value::{nullish, render, type_name, type_name_opt};
use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document};

/// `$mergeObjects`.
pub(super) fn merge_objects(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut out = Document::new();
    for (i, a) in args.iter().enumerate() {
        match cx.ev(a)? {
            Some(Bson::Document(d)) => merge_into(&mut out, d),
            v if nullish(v.as_ref()) => {}
            v => {
                return Err(MongoError::location(
                    40400,
                    format!(
                        "$mergeObjects requires object inputs, but input {} is of type {}",
                        i,
                        type_name_opt(v.as_ref())
                    ),
                ))
            }
        }
    }
    Ok(Some(Bson::Document(out)))
}

/// `$getField`.
pub(super) fn get_field(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let field = match arg(args, 0)? {
        Expr::Literal(Bson::String(s)) => s,
        _ => return Err(MongoError::internal("$getField field checked at parse")),
    };
    match cx.ev(arg(args, 1)?)? {
        Some(Bson::Document(d)) => Ok(d.get(field).cloned()),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        Some(other) => Err(MongoError::location(
            3041705,
            format!(
                "$getField requires 'input' to evaluate to type Object, but got {}",
                type_name(&other)
            ),
        )),
        None => Ok(Some(Bson::Null)),
    }
}

/// `$objectToArray`.
pub(super) fn object_to_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Document(d)) => Ok(Some(Bson::Array(
            d.into_iter()
                .map(|(k, v)| Bson::Document(doc! {"k": k, "v": v}))
                .collect(),
        ))),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            40390,
            format!(
                "$objectToArray requires a document input, found: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$arrayToObject`.
pub(super) fn array_to_object_op(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(a)) => array_to_object(a).map(|d| Some(Bson::Document(d))),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            40386,
            format!(
                "$arrayToObject requires an array input, found: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$setField`, `$unsetField`.
pub(super) fn set_unset_field(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Expr::Literal(Bson::String(field)) = arg(args, 0)? else {
        return Err(MongoError::internal("$setField field checked at parse"));
    };
    match cx.ev(arg(args, 1)?)? {
        Some(Bson::Document(mut d)) => {
            let v = if name == "$setField" {
                cx.ev(arg(args, 2)?)?
            } else {
                None
            };
            match v {
                Some(v) => {
                    d.insert(field.clone(), v);
                }
                None => {
                    d.remove(field);
                }
            }
            Ok(Some(Bson::Document(d)))
        }
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            4161105,
            format!(
                "{name} requires 'input' to evaluate to type Object, but got {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// Later documents' fields overwrite earlier ones in place.
pub(crate) fn merge_into(out: &mut Document, d: Document) {
    for (k, v) in d {
        out.insert(k, v);
    }
}

fn array_to_object(a: Vec<Bson>) -> MongoResult<Document> {
    let mut out = Document::new();
    let pairs_form = match a.first() {
        None => return Ok(out),
        Some(Bson::Array(_)) => true,
        Some(Bson::Document(_)) => false,
        Some(other) => {
            return Err(MongoError::location(
                40398,
                format!(
                    "Unrecognised input type format for $arrayToObject: {}",
                    type_name(other)
                ),
            ))
        }
    };
    for item in a {
        let (k, v) = match (pairs_form, item) {
            (true, Bson::Array(mut kv)) => {
                if kv.len() != 2 {
                    return Err(MongoError::location(
                        40397,
                        format!("$arrayToObject requires an array of size 2 arrays,found array of size: {}", kv.len()),
                    ));
                }
                let v = kv.pop().unwrap_or(Bson::Null);
                match kv.pop() {
                    Some(Bson::String(k)) => (k, v),
                    other => {
                        return Err(MongoError::location(
                            40395,
                            format!(
                                "$arrayToObject requires an array of key-value pairs, where the key must be of type string. Found key type: {}",
                                type_name_opt(other.as_ref())
                            ),
                        ))
                    }
                }
            }
            (false, Bson::Document(mut d)) => {
                if d.len() != 2 {
                    return Err(MongoError::location(
                        40392,
                        format!(
                            "$arrayToObject requires an object keys of 'k' and 'v'. Found incorrect number of keys:{}",
                            d.len()
                        ),
                    ));
                }
                let (Some(k), Some(v)) = (d.remove("k"), d.remove("v")) else {
                    return Err(MongoError::location(
                        40393,
                        format!(
                            "$arrayToObject requires an object with keys 'k' and 'v'. Missing either or both keys from: {}",
                            render(&Bson::Document(d))
                        ),
                    ));
                };
                match k {
                    Bson::String(k) => (k, v),
                    other => {
                        return Err(MongoError::location(
                            40394,
                            format!(
                                "$arrayToObject requires an object with keys 'k' and 'v', where the value of 'k' must be of type string. Found type: {}",
                                type_name(&other)
                            ),
                        ))
                    }
                }
            }
            (_, other) => {
                return Err(MongoError::location(
                    40391,
                    format!(
                        "$arrayToObject requires a consistent input format. Elements must all be arrays or all be objects. Found: {}",
                        type_name(&other)
                    ),
                ))
            }
        };
        if k.contains('\0') {
            return Err(MongoError::location(
                4940400,
                "Key field cannot contain an embedded null byte",
            ));
        }
        out.insert(k, v);
    }
    Ok(out)
}

/// Parses the argument of `$getField`.
pub(super) fn parse_get_field(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    match arg {
        Bson::Document(d) if d.contains_key("field") => {
            for k in d.keys() {
                if k != "field" && k != "input" {
                    return Err(MongoError::location(
                        3041701,
                        format!("$getField found an unknown argument: {k}"),
                    ));
                }
            }
            let field = Expr::parse_in(d.get("field").unwrap_or(&Bson::Null), scope)?;
            if !matches!(field, Expr::Literal(Bson::String(_))) {
                return Err(MongoError::location(
                    5654602,
                    "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
                ));
            }
            let input = match d.get("input") {
                Some(v) => Expr::parse_in(v, scope)?,
                None => Expr::Var {
                    name: "CURRENT".into(),
                    path: None,
                },
            };
            Expr::call(name, vec![field, input])
        }
        Bson::String(s) if !s.starts_with('$') => Expr::call(
            name,
            vec![
                Expr::Literal(arg.clone()),
                Expr::Var {
                    name: "CURRENT".into(),
                    path: None,
                },
            ],
        ),
        _ => Err(MongoError::location(
            3041702,
            "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
        )),
    }
}
