//! Boolean, comparison and conditional operators (`$and`, `$eq`, `$cond`,
//! `$switch`, ...) and `$let`: those that decide which of their arguments to
//! evaluate.

use super::{
    arg, check_arity, check_var_name, cmp_values, named_args, parse_opt, parse_with_vars, require,
    Ctx, Expr, Scope, Value,
};
use crate::value::{self, truthy};
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;
use std::cmp::Ordering;

/// `$and`.
pub(super) fn and(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    for a in args {
        if !truthy(cx.ev(a)?.as_ref()) {
            return Ok(Some(Bson::Boolean(false)));
        }
    }
    Ok(Some(Bson::Boolean(true)))
}

/// `$or`.
pub(super) fn or(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    for a in args {
        if truthy(cx.ev(a)?.as_ref()) {
            return Ok(Some(Bson::Boolean(true)));
        }
    }
    Ok(Some(Bson::Boolean(false)))
}

/// `$not`.
pub(super) fn not(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    Ok(Some(Bson::Boolean(!truthy(cx.ev(arg(args, 0)?)?.as_ref()))))
}

/// `$cmp`, `$eq`, `$ne`, `$gt`, `$gte`, `$lt`, `$lte`.
pub(super) fn compare(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    let b = cx.ev(arg(args, 1)?)?;
    Ok(Some(comparison(
        name,
        cmp_values(&a, &b, cx.vars.collation()),
    )))
}

/// The result of comparison operator `name` (`$cmp`, `$eq` ... `$lte`) for
/// operands ordered `o`.
pub(super) fn comparison(name: &str, o: Ordering) -> Bson {
    match name {
        "$cmp" => Bson::Int32(match o {
            Ordering::Less => -1,
            Ordering::Equal => 0,
            Ordering::Greater => 1,
        }),
        "$eq" => Bson::Boolean(o == Ordering::Equal),
        "$ne" => Bson::Boolean(o != Ordering::Equal),
        "$gt" => Bson::Boolean(o == Ordering::Greater),
        "$gte" => Bson::Boolean(o != Ordering::Less),
        "$lt" => Bson::Boolean(o == Ordering::Less),
        _ => Bson::Boolean(o != Ordering::Greater),
    }
}

/// `$cond`.
pub(super) fn cond(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let c = truthy(cx.ev(arg(args, 0)?)?.as_ref());
    cx.ev(arg(args, if c { 1 } else { 2 })?)
}

/// `$ifNull`.
pub(super) fn if_null(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let (last, rest) = args
        .split_last()
        .ok_or_else(|| MongoError::internal("$ifNull arity"))?;
    for a in rest {
        let v = cx.ev(a)?;
        if !value::nullish(v.as_ref()) {
            return Ok(v);
        }
    }
    cx.ev(last)
}

/// `$switch`.
pub(super) fn switch(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut chunks = args.chunks_exact(2);
    for pair in chunks.by_ref() {
        if let [case, then] = pair {
            if truthy(cx.ev(case)?.as_ref()) {
                return cx.ev(then);
            }
        }
    }
    match chunks.remainder() {
        [default] => cx.ev(default),
        _ => Err(MongoError::location(
            40066,
            "$switch could not find a matching branch for an input, and no default was specified.",
        )),
    }
}

/// `$let`.
pub(super) fn let_(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let (body, pairs) = args
        .split_last()
        .ok_or_else(|| MongoError::internal("$let arity"))?;
    let mut bindings = Vec::with_capacity(pairs.len() / 2);
    for pair in pairs.chunks_exact(2) {
        if let [Expr::Literal(Bson::String(n)), e] = pair {
            bindings.push((n.clone(), cx.ev(e)?.unwrap_or(Bson::Null)));
        }
    }
    let vars = cx.vars.child(bindings);
    body.eval(cx.root, &vars)
}

/// Parses the argument of `$cond`.
pub(super) fn parse_cond(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    match arg {
        Bson::Document(d) => {
            for k in d.keys() {
                if !matches!(k.as_str(), "if" | "then" | "else") {
                    return Err(MongoError::location(
                        17083,
                        format!("Unrecognized parameter to $cond: {k}"),
                    ));
                }
            }
            let i = require(d, "if", 17080, "Missing 'if' parameter to $cond", scope)?;
            let t = require(d, "then", 17081, "Missing 'then' parameter to $cond", scope)?;
            let e = require(d, "else", 17082, "Missing 'else' parameter to $cond", scope)?;
            Expr::call(name, vec![i, t, e])
        }
        Bson::Array(a) => {
            check_arity(name, a.len(), 3, 3)?;
            Expr::call(
                name,
                a.iter()
                    .map(|x| Expr::parse_in(x, scope))
                    .collect::<MongoResult<_>>()?,
            )
        }
        other => {
            check_arity(name, 1, 3, 3)?;
            Expr::call(name, vec![Expr::parse_in(other, scope)?])
        }
    }
}

/// Parses the argument of `$switch`.
pub(super) fn parse_switch(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    let d = named_args(
        name,
        arg,
        &["branches", "default"],
        (40060, "$switch requires an object as an argument, found: "),
        (40067, "$switch found an unknown argument: "),
    )?;
    let branches = match d.get("branches") {
        Some(Bson::Array(a)) => a,
        Some(other) => {
            return Err(MongoError::location(
                40061,
                format!(
                    "$switch expected an array for 'branches', found: {}",
                    value::type_name(other)
                ),
            ))
        }
        None => {
            return Err(MongoError::location(
                40068,
                "$switch requires at least one branch.",
            ))
        }
    };
    let mut args = Vec::with_capacity(branches.len() * 2 + 1);
    for b in branches {
        let Bson::Document(bd) = b else {
            return Err(MongoError::location(
                40062,
                format!(
                    "$switch expected each branch to be an object, found: {}",
                    value::type_name(b)
                ),
            ));
        };
        for k in bd.keys() {
            if k != "case" && k != "then" {
                return Err(MongoError::location(
                    40063,
                    format!("$switch found an unknown argument to a branch: {k}"),
                ));
            }
        }
        args.push(require(
            bd,
            "case",
            40064,
            "$switch requires each branch have a 'case' expression",
            scope,
        )?);
        args.push(require(
            bd,
            "then",
            40065,
            "$switch requires each branch have a 'then' expression.",
            scope,
        )?);
    }
    if args.is_empty() {
        return Err(MongoError::location(
            40068,
            "$switch requires at least one branch.",
        ));
    }
    if d.contains_key("default") {
        args.push(parse_opt(d, "default", scope)?);
    }
    Expr::call(name, args)
}

/// Parses the argument of `$let`.
pub(super) fn parse_let(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    let d = named_args(
        name,
        arg,
        &["vars", "in"],
        (
            16874,
            "$let only supports an object as its argument, found: ",
        ),
        (16875, "Unrecognized parameter to $let: "),
    )?;
    let Some(Bson::Document(vars)) = d.get("vars") else {
        return Err(MongoError::location(
            16876,
            "Missing 'vars' parameter to $let",
        ));
    };
    let Some(body) = d.get("in") else {
        return Err(MongoError::location(
            16877,
            "Missing 'in' parameter to $let",
        ));
    };
    let mut args = Vec::with_capacity(vars.len() * 2 + 1);
    let mut names = Vec::with_capacity(vars.len());
    for (k, v) in vars {
        check_var_name(k)?;
        args.push(Expr::Literal(Bson::String(k.clone())));
        args.push(Expr::parse_in(v, scope)?);
        names.push(k.clone());
    }
    args.push(parse_with_vars(body, &names, scope)?);
    Expr::call(name, args)
}
