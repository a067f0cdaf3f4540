//! Operators of no larger family: `$literal`, `$rand`, `$median` and
//! `$percentile`, `$toHashedIndexKey`, `$meta` and `$function`.

use super::{arg, hashed, Ctx, Expr, Scope, Value, ABSENT_META};
use crate::value;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::Bson;

/// `$literal` is parsed straight to its constant; a call, were one built,
/// is its argument.
pub(super) fn literal(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    cx.ev(arg(args, 0)?)
}

/// Parses the argument of `$literal`.
pub(super) fn parse_literal(
    _name: &'static str,
    arg: &Bson,
    _scope: &mut Scope,
) -> MongoResult<Expr> {
    Ok(Expr::Literal(arg.clone()))
}

/// `$rand`.
pub(super) fn rand(_name: &str, _args: &[Expr], _cx: &Ctx) -> MongoResult<Value> {
    Ok(Some(Bson::Double(rand_unit())))
}

/// A uniformly distributed double in [0, 1) for `$rand`, drawn from the
/// standard library's randomly keyed hasher (no extra dependency).
fn rand_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Parses the argument of `$rand`.
pub(super) fn parse_rand(name: &'static str, arg: &Bson, _scope: &mut Scope) -> MongoResult<Expr> {
    match arg {
        Bson::Document(d) if d.is_empty() => Expr::call(name, Vec::new()),
        _ => Err(MongoError::location(
            3040501,
            "$rand does not currently accept arguments",
        )),
    }
}

/// `$median`, `$percentile` over one value: an array's numeric elements, or
/// the value itself when it is a number; anything else counts as no data
/// (null results), as the accumulators ignore non-numeric inputs.
pub(super) fn quantiles(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    use crate::stats::quantile_input;
    let vals: Vec<f64> = match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(items)) => items.iter().filter_map(quantile_input).collect(),
        Some(v) => quantile_input(&v).into_iter().collect(),
        None => Vec::new(),
    };
    let ps: Vec<f64> = match arg(args, 1)? {
        Expr::Literal(Bson::Array(ps)) => ps.iter().filter_map(Bson::as_f64).collect(),
        _ => return Err(MongoError::internal("percentile list")),
    };
    let mut out = crate::stats::quantiles(vals, &ps);
    Ok(Some(if name == "$median" {
        out.pop().unwrap_or(Bson::Null)
    } else {
        Bson::Array(out)
    }))
}

/// Parses the argument of `$median`, `$percentile`.
/// The accumulators' spec and checks; the percentiles are constants.
pub(super) fn parse_quantiles(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let (input, ps) = crate::stats::parse_quantile_spec(name, name == "$median", arg)?;
    let ps = Bson::Array(ps.into_iter().map(Bson::Double).collect());
    Expr::call(
        name,
        vec![Expr::parse_in(&input, scope)?, Expr::Literal(ps)],
    )
}

/// `$toHashedIndexKey`.
/// A missing value hashes as null, as mongod.
pub(super) fn to_hashed_index_key(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let v = cx.ev(arg(args, 0)?)?.unwrap_or(Bson::Null);
    Ok(Some(Bson::Int64(hashed::hash64(&v))))
}

/// Parses the argument of `$toHashedIndexKey`.
/// The operand as a whole, as mongod: an array is hashed as an array.
pub(super) fn parse_operand(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    Expr::call(name, vec![Expr::parse_in(arg, scope)?])
}

/// `$meta`.
/// Missing when the document has no recorded score (as mongod).
pub(super) fn meta(_name: &str, _args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    Ok(cx.vars.text_score(cx.root).map(Bson::Double))
}

/// Parses the argument of `$meta`.
/// Only the text score is kept per document so far.
pub(super) fn parse_meta(name: &'static str, arg: &Bson, _scope: &mut Scope) -> MongoResult<Expr> {
    match arg {
        Bson::String(m) if m == "textScore" => Expr::call(name, Vec::new()),
        // Nothing here sets these (no Atlas Search stages; `$sample`
        // keeps no random values): mongod's value for a document
        // without the metadata is missing.
        Bson::String(m) if ABSENT_META.contains(&m.as_str()) => Ok(Expr::Missing),
        Bson::String(m)
            if matches!(
                m.as_str(),
                "geoNearDistance"
                    | "geoNearPoint"
                    | "recordId"
                    | "indexKey"
                    | "sortKey"
                    | "score"
                    | "scoreDetails"
            ) =>
        {
            Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("$meta \"{m}\" is not supported by BisonDB yet"),
            ))
        }
        Bson::String(m) => Err(MongoError::location(
            17308,
            format!("Unsupported argument to $meta: {m}"),
        )),
        _ => Err(MongoError::location(
            17307,
            "$meta only supports string arguments",
        )),
    }
}

/// `$function`.
pub(super) fn function(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let body = match arg(args, 0)? {
        Expr::Literal(Bson::String(s)) => s,
        _ => return Err(MongoError::internal("$function body")),
    };
    match cx.ev(arg(args, 1)?)? {
        Some(Bson::Array(values)) => Ok(Some(crate::js::call_function(body, &values)?)),
        _ => Err(MongoError::location(
            31266,
            "The args field must be of type array",
        )),
    }
}

/// `{$function: {body, args, lang: "js"}}`, with mongod's parse errors; the
/// body (a constant string or Code) is compiled here so a syntax error fails
/// before any document is read. Evaluates as `Call("$function", [body, args])`.
pub(super) fn parse_function(
    _name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            31260,
            format!(
                "$function requires an object as an argument, found: {}",
                value::type_name(arg)
            ),
        ));
    };
    let body = d
        .get("body")
        .ok_or_else(|| MongoError::location(31261, "The body function must be specified."))?;
    let body = match Expr::parse_in(body, scope)? {
        Expr::Literal(Bson::String(s)) | Expr::Literal(Bson::JavaScriptCode(s)) => s,
        Expr::Literal(_) => {
            return Err(MongoError::location(
                31262,
                "The body function must evaluate to type string or code",
            ))
        }
        _ => {
            return Err(MongoError::location(
                31432,
                "The body function must be a constant expression",
            ))
        }
    };
    let args = d
        .get("args")
        .ok_or_else(|| MongoError::location(31263, "The args field must be specified."))?;
    let args = Expr::parse_in(args, scope)?;
    match d.get("lang") {
        None => {
            return Err(MongoError::location(
                31418,
                "The lang field must be specified.",
            ))
        }
        Some(Bson::String(l)) if l == "js" => {}
        Some(_) => {
            return Err(MongoError::location(
                31419,
                "Currently the only supported language specifier is 'js'.",
            ))
        }
    }
    crate::js::check_function(&body)?;
    Expr::call("$function", vec![Expr::Literal(Bson::String(body)), args])
}
