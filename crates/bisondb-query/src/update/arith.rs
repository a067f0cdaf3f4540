//! `$inc`, `$mul`, `$min`, `$max` and `$bit`.
//!
//! Numeric results follow mongod's SafeNum rules: int32 overflow widens to
//! int64, int64 overflow fails the update rather than losing precision.

use super::path::{self, Lookup};
use super::{Ctx, FieldPath, OpKind};
use crate::compare::compare_bson_in;
use crate::decimal::Dec;
use crate::value::{num_add, num_mul, render, type_name, LongOverflow, Num};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};
use std::cmp::Ordering;

/// A numeric update argument.
pub(crate) type NumArg = Num;

/// The argument of `$inc`/`$mul`: a decimal makes the result a decimal.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum ArithArg {
    Num(Num),
    Dec(Dec),
}

pub(super) fn parse_num_arg(op: &str, fp: &FieldPath, value: &Bson) -> MongoResult<ArithArg> {
    if let Bson::Decimal128(d) = value {
        return Ok(ArithArg::Dec(Dec::from_bson(*d)));
    }
    Num::from_bson(value).map(ArithArg::Num).ok_or_else(|| {
        let verb = if op == "$inc" {
            "increment"
        } else {
            "multiply"
        };
        MongoError::type_mismatch(format!(
            "Cannot {verb} with non-numeric argument: {{{}: {}}}",
            fp.dotted,
            render(value)
        ))
    })
}

fn safe_num_desc(v: &Bson) -> String {
    let ty = match v {
        Bson::Int32(_) => "NumberInt",
        Bson::Int64(_) => "NumberLong",
        _ => "NumberDouble",
    };
    format!("({ty}){}", render(v))
}

fn arith(
    doc: &mut Document,
    fp: &FieldPath,
    arg: ArithArg,
    ctx: &Ctx,
    op: &str,
) -> MongoResult<()> {
    let new = match path::lookup(doc, &fp.parts) {
        Lookup::Found(cur) => {
            let non_numeric = || {
                MongoError::type_mismatch(format!(
                    "Cannot apply {op} to a value of non-numeric type. {} has the field '{}' of non-numeric type {}",
                    ctx.id_desc,
                    fp.parts.last().map_or("", String::as_str),
                    type_name(cur)
                ))
            };
            match (arg, cur) {
                // SafeNum rules: a decimal on either side makes a decimal
                // result (the other side converted exactly, a double to 15
                // digits); decimals never fail, they round or reach infinity.
                (ArithArg::Dec(_), _) | (ArithArg::Num(_), Bson::Decimal128(_)) => {
                    let c = Dec::from_number(cur).ok_or_else(non_numeric)?;
                    let a = match arg {
                        ArithArg::Dec(a) => a,
                        ArithArg::Num(n) => Dec::from_number(&n.to_bson()).unwrap_or(Dec::NaN),
                    };
                    if op == "$inc" { c.plus(a) } else { c.times(a) }.into_bson()
                }
                (ArithArg::Num(arg), _) => {
                    let n = Num::from_bson(cur).ok_or_else(non_numeric)?;
                    let r = if op == "$inc" {
                        num_add(n, arg, LongOverflow::Fail)
                    } else {
                        num_mul(n, arg, LongOverflow::Fail)
                    };
                    match r {
                        Some(v) => v.to_bson(),
                        None => {
                            return Err(MongoError::bad_value(format!(
                            "Failed to apply {op} operations to current value ({}) for document {}",
                            safe_num_desc(cur),
                            ctx.id_desc
                        )))
                        }
                    }
                }
            }
        }
        // $mul on a missing field stores zero times the argument (mongod
        // multiplies an int 0 by it): a zero of the argument's type.
        _ if op == "$mul" => match arg {
            ArithArg::Num(Num::I32(_)) => Bson::Int32(0),
            ArithArg::Num(Num::I64(_)) => Bson::Int64(0),
            ArithArg::Num(Num::F64(_)) => Bson::Double(0.0),
            ArithArg::Dec(a) => Dec::ZERO.times(a).into_bson(),
        },
        _ => match arg {
            ArithArg::Num(n) => n.to_bson(),
            ArithArg::Dec(a) => a.into_bson(),
        },
    };
    path::set_path(doc, &fp.parts, new)
}

pub(super) fn inc(doc: &mut Document, fp: &FieldPath, arg: ArithArg, ctx: &Ctx) -> MongoResult<()> {
    arith(doc, fp, arg, ctx, "$inc")
}

pub(super) fn mul(doc: &mut Document, fp: &FieldPath, arg: ArithArg, ctx: &Ctx) -> MongoResult<()> {
    arith(doc, fp, arg, ctx, "$mul")
}

/// `$min` (`want` = Less) and `$max` (`want` = Greater): replace when the
/// argument sorts before/after the current value in BSON order.
pub(super) fn min_max(
    doc: &mut Document,
    fp: &FieldPath,
    arg: &Bson,
    want: Ordering,
    ctx: &Ctx,
) -> MongoResult<()> {
    let replace = match path::lookup(doc, &fp.parts) {
        Lookup::Found(cur) => compare_bson_in(arg, cur, ctx.collation.as_deref()) == want,
        _ => true,
    };
    if replace {
        path::set_path(doc, &fp.parts, arg.clone())?;
    }
    Ok(())
}

/// A bitwise operation of `$bit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BitOp {
    And,
    Or,
    Xor,
}

pub(super) fn parse_bit(fp: &FieldPath, value: &Bson) -> MongoResult<OpKind> {
    let Bson::Document(d) = value else {
        return Err(MongoError::bad_value(format!(
            "The $bit modifier is not compatible with a {}. You must pass in an embedded document: {{$bit: {{field: {{and/or/xor: #}}}}",
            type_name(value)
        )));
    };
    let mut ops = Vec::with_capacity(d.len());
    for (k, v) in d {
        let op = match k.as_str() {
            "and" => BitOp::And,
            "or" => BitOp::Or,
            "xor" => BitOp::Xor,
            _ => {
                return Err(MongoError::bad_value(format!(
                    "The $bit modifier only supports 'and', 'or', and 'xor', not '{k}' which is an unknown operator: {{{k}: {}}}",
                    render(v)
                )))
            }
        };
        let n = match v {
            Bson::Int32(i) => Num::I32(*i),
            Bson::Int64(i) => Num::I64(*i),
            _ => {
                return Err(MongoError::bad_value(format!(
                    "The $bit modifier field must be an Integer(32/64 bit); a '{}' is not supported here: {{{k}: {}}}",
                    type_name(v),
                    render(v)
                )))
            }
        };
        ops.push((op, n));
    }
    if ops.is_empty() {
        return Err(MongoError::bad_value(format!(
            "You must pass in at least one bitwise operation. The format is: {{$bit: {{field: {{and/or/xor: #}}}}. Found an empty document for field {}",
            fp.dotted
        )));
    }
    Ok(OpKind::Bit(ops))
}

pub(super) fn bit(
    doc: &mut Document,
    fp: &FieldPath,
    ops: &[(BitOp, Num)],
    ctx: &Ctx,
) -> MongoResult<()> {
    let mut cur = match path::lookup(doc, &fp.parts) {
        Lookup::Found(Bson::Int32(i)) => Num::I32(*i),
        Lookup::Found(Bson::Int64(i)) => Num::I64(*i),
        Lookup::Found(other) => {
            return Err(MongoError::bad_value(format!(
                "Cannot apply $bit to a value of non-integral type.{} has the field {} of non-integer type {}",
                ctx.id_desc,
                fp.parts.last().map_or("", String::as_str),
                type_name(other)
            )))
        }
        _ => Num::I32(0),
    };
    for (op, arg) in ops {
        cur = match (cur, *arg) {
            (Num::I32(a), Num::I32(b)) => Num::I32(match op {
                BitOp::And => a & b,
                BitOp::Or => a | b,
                BitOp::Xor => a ^ b,
            }),
            (a, b) => {
                let (a, b) = (as_long(a), as_long(b));
                Num::I64(match op {
                    BitOp::And => a & b,
                    BitOp::Or => a | b,
                    BitOp::Xor => a ^ b,
                })
            }
        };
    }
    path::set_path(doc, &fp.parts, cur.to_bson())
}

fn as_long(n: Num) -> i64 {
    match n {
        Num::I32(i) => i64::from(i),
        Num::I64(i) => i,
        // Only integers reach $bit; parse and lookup reject doubles.
        Num::F64(d) => d as i64,
    }
}
