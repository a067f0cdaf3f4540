//! Arithmetic expressions (`$add` ... `$log10`) and the expression forms of
//! `$sum`, `$avg`, `$min` and `$max`.

use super::{arg, cmp_values, Ctx, Expr, Value};
use crate::decimal::{Dec, Rounding, Trig};
use crate::value::{
    decimal_unsupported, is_number, nullish, num_add, num_mul, num_sub, type_name, LongOverflow,
    Num,
};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, DateTime};
use std::cmp::Ordering;

fn num(v: &Bson, op: &str) -> MongoResult<Option<Num>> {
    if matches!(v, Bson::Decimal128(_)) {
        return Err(decimal_unsupported(op));
    }
    Ok(Num::from_bson(v))
}

/// `$multiply`.
pub(super) fn multiply(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut acc = Num::I32(1);
    // Set once a decimal operand is met: the rest of the product is decimal.
    let mut dec: Option<Dec> = None;
    let mut null = false;
    for a in args {
        match cx.ev(a)? {
            v if nullish(v.as_ref()) => null = true,
            Some(Bson::Decimal128(d)) => {
                let total = dec.unwrap_or_else(|| acc.to_dec());
                dec = Some(total.times(Dec::from_bson(d)));
            }
            Some(v) if dec.is_some() && is_number(&v) => {
                dec = dec.map(|t| t.times(Dec::from_number(&v).unwrap_or(Dec::NaN)));
            }
            Some(v) => match num(&v, name)? {
                Some(n) => {
                    acc = num_mul(acc, n, LongOverflow::ToDouble).unwrap_or(Num::F64(f64::NAN))
                }
                None => {
                    return Err(MongoError::location(
                        16555,
                        format!(
                            "$multiply only supports numeric types, not {}",
                            type_name(&v)
                        ),
                    ))
                }
            },
            None => null = true,
        }
    }
    Ok(Some(match (null, dec) {
        (true, _) => Bson::Null,
        (false, Some(d)) => d.into_bson(),
        (false, None) => acc.to_bson(),
    }))
}

/// `$subtract`.
pub(super) fn subtract(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    let b = cx.ev(arg(args, 1)?)?;
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(Some(Bson::Null));
    };
    if nullish(Some(&a)) || nullish(Some(&b)) {
        return Ok(Some(Bson::Null));
    }
    let r = match (&a, &b) {
        (Bson::DateTime(x), Bson::Decimal128(d)) => Bson::DateTime(DateTime::from_millis(
            x.timestamp_millis()
                .wrapping_sub(dec_millis(Dec::from_bson(*d))),
        )),
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) if is_number(&a) && is_number(&b) => {
            match (Dec::from_number(&a), Dec::from_number(&b)) {
                (Some(x), Some(y)) => x.minus(y).into_bson(),
                _ => Bson::Null,
            }
        }
        (Bson::Decimal128(_), _) | (_, Bson::Decimal128(_)) => {
            return Err(MongoError::location(
                16556,
                format!("can't $subtract {} from {}", type_name(&b), type_name(&a)),
            ))
        }
        (Bson::DateTime(x), Bson::DateTime(y)) => {
            Bson::Int64(x.timestamp_millis().wrapping_sub(y.timestamp_millis()))
        }
        (Bson::DateTime(x), n) if is_number(n) => {
            let ms = match num(n, name)? {
                Some(Num::F64(d)) => d.round() as i64,
                Some(Num::I32(i)) => i64::from(i),
                Some(Num::I64(i)) => i,
                None => 0,
            };
            Bson::DateTime(DateTime::from_millis(x.timestamp_millis().wrapping_sub(ms)))
        }
        _ => match (num(&a, name)?, num(&b, name)?) {
            (Some(x), Some(y)) => num_sub(x, y).to_bson(),
            _ => {
                return Err(MongoError::location(
                    16556,
                    format!("can't $subtract {} from {}", type_name(&b), type_name(&a)),
                ))
            }
        },
    };
    Ok(Some(r))
}

/// `$divide`.
pub(super) fn divide(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let ops = nonzero_divisor(
        args,
        cx,
        16609,
        "$divide only supports numeric types, not",
        (16608, "can't $divide by zero"),
    )?;
    Ok(Some(match ops {
        Operands::Null => Bson::Null,
        Operands::Decs(a, b) => a.quotient(b).into_bson(),
        Operands::Nums(a, b) => Bson::Double(a.as_f64() / b.as_f64()),
    }))
}

/// `$mod`.
pub(super) fn modulo(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let (a, b) = match nonzero_divisor(
        args,
        cx,
        16611,
        "$mod only supports numeric types, not",
        (16610, "can't $mod by zero"),
    )? {
        Operands::Null => return Ok(Some(Bson::Null)),
        Operands::Decs(a, b) => return Ok(Some(a.fmod(b).into_bson())),
        Operands::Nums(a, b) => (a, b),
    };
    Ok(Some(match (a, b) {
        (Num::I32(x), Num::I32(y)) => Bson::Int32(x.wrapping_rem(y)),
        (Num::F64(_), _) | (_, Num::F64(_)) => Bson::Double(a.as_f64() % b.as_f64()),
        _ => Bson::Int64(as_i64(a).wrapping_rem(as_i64(b))),
    }))
}

/// `$pow`.
pub(super) fn pow_op(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    let b = cx.ev(arg(args, 1)?)?;
    if nullish(a.as_ref()) || nullish(b.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let (Some(a), Some(b)) = (a, b) else {
        return Ok(Some(Bson::Null));
    };
    if matches!(a, Bson::Decimal128(_)) || matches!(b, Bson::Decimal128(_)) {
        return pow_decimal(&a, &b).map(Some);
    }
    let base = num(&a, name)?.ok_or_else(|| {
        MongoError::location(
            28762,
            format!("$pow's base must be numeric, not {}", type_name(&a)),
        )
    })?;
    let exp = num(&b, name)?.ok_or_else(|| {
        MongoError::location(
            28763,
            format!("$pow's exponent must be numeric, not {}", type_name(&b)),
        )
    })?;
    if base.is_zero() && exp.as_f64() < 0.0 {
        return Err(MongoError::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    Ok(Some(pow(base, exp)))
}

/// `$log`.
pub(super) fn log(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let (a, b) = match two_operands(args, cx, 28756, "$log's argument must be numeric, not")? {
        Operands::Null => return Ok(Some(Bson::Null)),
        Operands::Decs(x, base) => return log_decimal(x, base).map(Some),
        Operands::Nums(a, b) => (a, b),
    };
    let (x, base) = (a.as_f64(), b.as_f64());
    if x <= 0.0 || x.is_nan() {
        return Err(MongoError::location(
            28758,
            format!("$log's argument must be a positive number, but is {x}"),
        ));
    }
    if base <= 0.0 || base == 1.0 || base.is_nan() {
        return Err(MongoError::location(
            28759,
            format!("$log's base must be a positive number not equal to 1, but is {base}"),
        ));
    }
    Ok(Some(Bson::Double(x.ln() / base.ln())))
}

/// `$bitAnd`, `$bitOr`, `$bitXor`.
pub(super) fn bitwise(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut acc: Option<Num> = None;
    for a in args {
        let v = cx.ev(a)?;
        if nullish(v.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let n = match v {
            Some(Bson::Int32(i)) => Num::I32(i),
            Some(Bson::Int64(i)) => Num::I64(i),
            other => {
                return Err(MongoError::location(
                    28765,
                    format!(
                        "{name} only supports int and long operands, not {}",
                        crate::value::type_name_opt(other.as_ref())
                    ),
                ))
            }
        };
        acc = Some(match acc {
            None => n,
            Some(prev) => bit_combine(name, prev, n),
        });
    }
    Ok(Some(
        acc.unwrap_or(if name == "$bitAnd" {
            Num::I32(-1)
        } else {
            Num::I32(0)
        })
        .to_bson(),
    ))
}

/// `$bitNot`.
pub(super) fn bit_not(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Int32(i)) => Ok(Some(Bson::Int32(!i))),
        Some(Bson::Int64(i)) => Ok(Some(Bson::Int64(!i))),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            28765,
            format!(
                "$bitNot only supports int and long, not: {}",
                crate::value::type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$atan2`.
pub(super) fn atan2(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let (a, b) = match two_operands(args, cx, 51044, "$atan2 only supports numeric types, not")? {
        Operands::Null => return Ok(Some(Bson::Null)),
        Operands::Decs(y, x) => return Ok(Some(y.atan2(x).into_bson())),
        Operands::Nums(a, b) => (a, b),
    };
    Ok(Some(Bson::Double(a.as_f64().atan2(b.as_f64()))))
}

/// `$log` when either operand is a decimal: computed in decimal128, with
/// mongod's errors for a non-positive argument or base and a base of one
/// (NaN passes and gives NaN).
fn log_decimal(x: Dec, base: Dec) -> MongoResult<Bson> {
    if matches!(x.cmp_zero(), Some(Ordering::Less | Ordering::Equal)) {
        return Err(MongoError::location(
            28758,
            format!(
                "$log's argument must be a positive number, but is {}",
                x.to_bson()
            ),
        ));
    }
    let one = Dec::from_i64(1);
    if matches!(base.cmp_zero(), Some(Ordering::Less | Ordering::Equal))
        || base.minus(one).cmp_zero() == Some(Ordering::Equal)
    {
        return Err(MongoError::location(
            28759,
            format!(
                "$log's base must be a positive number not equal to 1, but is {}",
                base.to_bson()
            ),
        ));
    }
    Ok(x.log(base).into_bson())
}

/// `$pow` when either operand is a decimal: both are read as decimals
/// (a double through mongod's 15-digit conversion) and the power is
/// computed in decimal128.
fn pow_decimal(a: &Bson, b: &Bson) -> MongoResult<Bson> {
    let base = Dec::from_number(a).ok_or_else(|| {
        MongoError::location(
            28762,
            format!("$pow's base must be numeric, not {}", type_name(a)),
        )
    })?;
    let exp = Dec::from_number(b).ok_or_else(|| {
        MongoError::location(
            28763,
            format!("$pow's exponent must be numeric, not {}", type_name(b)),
        )
    })?;
    if base.cmp_zero() == Some(Ordering::Equal) && exp.cmp_zero() == Some(Ordering::Less) {
        return Err(MongoError::location(
            28764,
            "$pow cannot take a base of 0 and a negative exponent",
        ));
    }
    Ok(base.pow(exp).into_bson())
}

fn as_i64(n: Num) -> i64 {
    match n {
        Num::I32(i) => i64::from(i),
        Num::I64(i) => i,
        Num::F64(d) => d as i64,
    }
}

/// Two numeric operands, as decimals when either one is a decimal.
enum Operands {
    Null,
    Nums(Num, Num),
    Decs(Dec, Dec),
}

fn two_operands(args: &[Expr], cx: &Ctx, code: i32, prefix: &str) -> MongoResult<Operands> {
    let a = cx.ev(arg(args, 0)?)?;
    let b = cx.ev(arg(args, 1)?)?;
    if nullish(a.as_ref()) || nullish(b.as_ref()) {
        return Ok(Operands::Null);
    }
    let (Some(av), Some(bv)) = (&a, &b) else {
        return Ok(Operands::Null);
    };
    let decimal = matches!(av, Bson::Decimal128(_)) || matches!(bv, Bson::Decimal128(_));
    if decimal {
        if let (Some(x), Some(y)) = (Dec::from_number(av), Dec::from_number(bv)) {
            return Ok(Operands::Decs(x, y));
        }
    } else if let (Some(x), Some(y)) = (Num::from_bson(av), Num::from_bson(bv)) {
        return Ok(Operands::Nums(x, y));
    }
    Err(MongoError::location(
        code,
        format!("{prefix} {} and {}", type_name(av), type_name(bv)),
    ))
}

/// [`two_operands`] of `$divide`/`$mod`: a zero divisor fails with `zero`
/// (code, message), decimal or not (mongod refuses a zero decimal too).
fn nonzero_divisor(
    args: &[Expr],
    cx: &Ctx,
    code: i32,
    prefix: &str,
    zero: (i32, &str),
) -> MongoResult<Operands> {
    let ops = two_operands(args, cx, code, prefix)?;
    let zero_divisor = match &ops {
        Operands::Null => false,
        Operands::Nums(_, b) => b.is_zero(),
        Operands::Decs(_, b) => b.is_zero(),
    };
    if zero_divisor {
        return Err(MongoError::location(zero.0, zero.1));
    }
    Ok(ops)
}

/// mongod's error for `$ln` or `$log10` (`op`) of a number out of its
/// domain; `shown` is the argument as the message prints it.
fn log_domain_error(op: &str, shown: impl std::fmt::Display) -> MongoError {
    let code = if op == "$ln" { 28766 } else { 28761 };
    MongoError::location(
        code,
        format!("{op}'s argument must be a positive number, but is {shown}"),
    )
}

/// `$add`: numbers, with at most one date (the sum is then a date).
pub(super) fn add(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut acc = Num::I32(0);
    // Set once a decimal operand is met: the rest of the sum is decimal.
    let mut dec: Option<Dec> = None;
    let mut date: Option<i64> = None;
    for a in args {
        let v = cx.ev(a)?;
        let Some(v) = v.filter(|v| !nullish(Some(v))) else {
            return Ok(Some(Bson::Null));
        };
        match v {
            Bson::DateTime(d) => {
                if date.is_some() {
                    return Err(MongoError::location(
                        16612,
                        "only one date allowed in an $add expression",
                    ));
                }
                date = Some(d.timestamp_millis());
            }
            Bson::Decimal128(d) => {
                let total = dec.unwrap_or_else(|| acc.to_dec());
                dec = Some(total.plus(Dec::from_bson(d)));
            }
            other if dec.is_some() && is_number(&other) => {
                dec = dec.map(|t| t.plus(Dec::from_number(&other).unwrap_or(Dec::NaN)));
            }
            other => match num(&other, "$add")? {
                Some(n) => {
                    acc = num_add(acc, n, LongOverflow::ToDouble).unwrap_or(Num::F64(f64::NAN))
                }
                None => {
                    return Err(MongoError::location(
                        16554,
                        format!(
                            "$add only supports numeric or date types, not {}",
                            type_name(&other)
                        ),
                    ))
                }
            },
        }
    }
    Ok(Some(match (date, dec) {
        (Some(ms), Some(d)) => {
            Bson::DateTime(DateTime::from_millis(ms.wrapping_add(dec_millis(d))))
        }
        (Some(ms), None) => {
            let delta = match acc {
                Num::F64(d) => d.round() as i64,
                n => as_i64(n),
            };
            Bson::DateTime(DateTime::from_millis(ms.wrapping_add(delta)))
        }
        (None, Some(d)) => d.into_bson(),
        (None, None) => acc.to_bson(),
    }))
}

/// A decimal number of milliseconds added to or taken from a date: rounded
/// to the nearest integer, saturating like the double path's `as i64`.
fn dec_millis(d: Dec) -> i64 {
    d.to_i64(Rounding::HalfEven).unwrap_or_else(|| {
        let f = d.to_f64();
        if f.is_nan() {
            0
        } else {
            f as i64
        }
    })
}

fn pow(base: Num, exp: Num) -> Bson {
    if let (Some(b), Num::I32(_) | Num::I64(_)) = (int_of(base), exp) {
        let e = as_i64(exp);
        if e >= 0 {
            if let Ok(e32) = u32::try_from(e) {
                if let Some(r) = b.checked_pow(e32) {
                    return match (base, exp) {
                        (Num::I32(_), Num::I32(_)) => Num::from_i64_narrow(r).to_bson(),
                        _ => Bson::Int64(r),
                    };
                }
            }
        } else if b == 1 || b == -1 {
            let r = if b == -1 && e % 2 != 0 { -1 } else { 1 };
            return match (base, exp) {
                (Num::I32(_), Num::I32(_)) => Bson::Int32(r as i32),
                _ => Bson::Int64(r),
            };
        }
    }
    Bson::Double(base.as_f64().powf(exp.as_f64()))
}

fn int_of(n: Num) -> Option<i64> {
    match n {
        Num::I32(i) => Some(i64::from(i)),
        Num::I64(i) => Some(i),
        Num::F64(_) => None,
    }
}

/// The operand of a one-argument operator; `None` when it is null or
/// missing (the result is then null).
fn first_operand(args: &[Expr], cx: &Ctx) -> MongoResult<Option<Bson>> {
    let v = cx.ev(arg(args, 0)?)?;
    Ok(v.filter(|v| !nullish(Some(v))))
}

pub(super) fn unary(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Some(v) = first_operand(args, cx)? else {
        return Ok(Some(Bson::Null));
    };
    if let Bson::Decimal128(d) = v {
        if name == "$sqrt" {
            let d = Dec::from_bson(d);
            if d.cmp_zero() == Some(Ordering::Less) {
                return Err(MongoError::location(
                    28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            return Ok(Some(d.sqrt().into_bson()));
        }
        if matches!(name, "$exp" | "$ln" | "$log10") {
            let x = Dec::from_bson(d);
            // mongod lets NaN through (its result is NaN) and refuses zero
            // and negative numbers for the logarithms.
            if name != "$exp" && matches!(x.cmp_zero(), Some(Ordering::Less | Ordering::Equal)) {
                return Err(log_domain_error(name, x.to_bson()));
            }
            return Ok(Some(
                match name {
                    "$exp" => x.exp(),
                    "$ln" => x.ln(),
                    _ => x.log10(),
                }
                .into_bson(),
            ));
        }
        if matches!(name, "$abs" | "$ceil" | "$floor" | "$round" | "$trunc") {
            let Some(place) = place_arg(name, args, cx)? else {
                return Ok(Some(Bson::Null));
            };
            let d = Dec::from_bson(d);
            return Ok(Some(
                match name {
                    "$abs" => d.abs(),
                    "$ceil" => d.to_integral(Rounding::Ceiling),
                    "$floor" => d.to_integral(Rounding::Floor),
                    // mongod quantizes to the place (19.25 at -1 is 2E+1).
                    "$round" => d.round_to_place(place, Rounding::HalfEven),
                    _ => d.round_to_place(place, Rounding::TowardZero),
                }
                .into_bson(),
            ));
        }
    }
    let Some(n) = num(&v, name)? else {
        let code = match name {
            "$sqrt" => 28715,
            "$exp" => 28765,
            "$ln" => 28765,
            "$log10" => 28765,
            "$round" | "$trunc" => 51081,
            _ => 28765,
        };
        return Err(MongoError::location(
            code,
            format!("{name} only supports numeric types, not {}", type_name(&v)),
        ));
    };
    let Some(place) = place_arg(name, args, cx)? else {
        return Ok(Some(Bson::Null));
    };
    let f = n.as_f64();
    Ok(Some(match name {
        "$abs" => match n {
            Num::I32(i) => match i.checked_abs() {
                Some(a) => Bson::Int32(a),
                None => Bson::Int64(i64::from(i).abs()),
            },
            Num::I64(i) => match i.checked_abs() {
                Some(a) => Bson::Int64(a),
                None => {
                    return Err(MongoError::location(
                        28680,
                        "can't take $abs of long long min",
                    ))
                }
            },
            Num::F64(d) => Bson::Double(d.abs()),
        },
        "$ceil" => float_only(n, f.ceil()),
        "$floor" => float_only(n, f.floor()),
        "$round" | "$trunc" => round(n, place, name == "$round"),
        "$sqrt" => {
            if f < 0.0 {
                return Err(MongoError::location(
                    28714,
                    "$sqrt's argument must be greater than or equal to 0",
                ));
            }
            Bson::Double(f.sqrt())
        }
        "$exp" => Bson::Double(f.exp()),
        "$ln" | "$log10" => {
            if f <= 0.0 || f.is_nan() {
                return Err(log_domain_error(name, super::render_value(&Some(v))));
            }
            Bson::Double(if name == "$ln" { f.ln() } else { f.log10() })
        }
        other => {
            return Err(MongoError::internal(format!(
                "unhandled arithmetic operator {other}"
            )))
        }
    }))
}

/// The `place` argument of `$round`/`$trunc` (0 when absent); `None` when it
/// is null or missing, which makes the result null.
fn place_arg(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Option<i64>> {
    Ok(match args.get(1) {
        Some(p) => match cx.ev(p)? {
            None | Some(Bson::Null) | Some(Bson::Undefined) => return Ok(None),
            // A decimal place is read as a double: only small integers pass.
            Some(Bson::Decimal128(d)) => place_of(
                name,
                Some(Num::F64(Dec::from_bson(d).to_f64())),
                &Bson::Decimal128(d),
            )?,
            Some(p) => place_of(name, num(&p, name)?, &p)?,
        },
        None => Some(0),
    })
}

fn place_of(name: &str, n: Option<Num>, p: &Bson) -> MongoResult<Option<i64>> {
    Ok(match n {
        Some(Num::F64(d)) if d.fract() != 0.0 => {
            return Err(MongoError::location(
                51082,
                format!("precision argument to {name} must be a integral value"),
            ))
        }
        Some(pn) => {
            let place = as_i64(pn);
            if !(-20..=100).contains(&place) {
                return Err(MongoError::location(
                                51083,
                                format!("cannot apply {name} with precision value {place} value must be in [-20, 100]"),
                            ));
            }
            Some(place)
        }
        None => {
            return Err(MongoError::location(
                51082,
                format!(
                    "precision argument to {name} must be a integral value, got {}",
                    type_name(p)
                ),
            ))
        }
    })
}

fn float_only(n: Num, f: f64) -> Bson {
    match n {
        Num::F64(_) => Bson::Double(f),
        other => other.to_bson(),
    }
}

/// Rounds (half to even, as mongod does) or truncates to `place` decimal digits.
fn round(n: Num, place: i64, half_even: bool) -> Bson {
    let apply = |x: f64| {
        if half_even {
            x.round_ties_even()
        } else {
            x.trunc()
        }
    };
    match n {
        Num::F64(d) => {
            let scale = 10f64.powi(place as i32);
            if place >= 0 {
                Bson::Double(apply(d * scale) / scale)
            } else {
                let s = 10f64.powi((-place) as i32);
                Bson::Double(apply(d / s) * s)
            }
        }
        Num::I32(_) | Num::I64(_) if place >= 0 => n.to_bson(),
        _ => {
            let i = as_i64(n);
            let s = 10i128.pow(u32::try_from(-place).unwrap_or(0).min(30));
            let q = i128::from(i) / s;
            let r = i128::from(i) % s;
            let mut q2 = q;
            if half_even {
                let twice = r.abs() * 2;
                if twice > s || (twice == s && q % 2 != 0) {
                    q2 = q + r.signum();
                }
            }
            let out = q2 * s;
            match n {
                Num::I32(_) => match i32::try_from(out) {
                    Ok(v) => Bson::Int32(v),
                    Err(_) => i64::try_from(out).map_or(Bson::Double(out as f64), Bson::Int64),
                },
                _ => i64::try_from(out).map_or(Bson::Double(out as f64), Bson::Int64),
            }
        }
    }
}

/// `$sum`, `$avg`, `$min`, `$max` as expressions: over one array argument's
/// elements, or over the arguments themselves.
pub(super) fn group_like(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut vals: Vec<Bson> = Vec::new();
    if let [single] = args {
        match cx.ev(single)? {
            Some(Bson::Array(a)) => vals = a,
            Some(v) => vals.push(v),
            None => {}
        }
    } else {
        for a in args {
            if let Some(v) = cx.ev(a)? {
                vals.push(v);
            }
        }
    }
    match name {
        "$stdDevPop" | "$stdDevSamp" => {
            // Computed in doubles, a decimal read as its double (as mongod).
            let xs: Vec<f64> = vals
                .iter()
                .filter_map(|v| match v {
                    Bson::Decimal128(d) => Some(Dec::from_bson(*d).to_f64()),
                    _ => Num::from_bson(v).map(Num::as_f64),
                })
                .collect();
            let n = xs.len();
            let denom = if name == "$stdDevPop" {
                n
            } else {
                n.saturating_sub(1)
            };
            if denom == 0 {
                return Ok(Some(Bson::Null));
            }
            let mean = xs.iter().sum::<f64>() / n as f64;
            let var = xs.iter().map(|x| (x - mean) * (x - mean)).sum::<f64>() / denom as f64;
            Ok(Some(Bson::Double(var.sqrt())))
        }
        "$sum" | "$avg" => {
            let mut acc = crate::value::Summer::default();
            for v in &vals {
                if let Bson::Decimal128(d) = v {
                    acc.add_dec(Dec::from_bson(*d));
                } else if let Some(n) = Num::from_bson(v) {
                    acc.add(n);
                }
            }
            if name == "$sum" {
                Ok(Some(acc.total_bson()))
            } else {
                Ok(Some(acc.mean_bson()))
            }
        }
        _ => {
            let want = if name == "$min" {
                Ordering::Less
            } else {
                Ordering::Greater
            };
            let mut best: Value = None;
            for v in vals.into_iter().filter(|v| !nullish(Some(v))) {
                let cand = Some(v);
                if best.is_none() || cmp_values(&cand, &best, cx.vars.collation()) == want {
                    best = cand;
                }
            }
            Ok(Some(best.unwrap_or(Bson::Null)))
        }
    }
}

fn bit_combine(name: &str, a: Num, b: Num) -> Num {
    let f = |x: i64, y: i64| match name {
        "$bitAnd" => x & y,
        "$bitOr" => x | y,
        _ => x ^ y,
    };
    match (a, b) {
        (Num::I32(x), Num::I32(y)) => Num::I32(f(i64::from(x), i64::from(y)) as i32),
        _ => Num::I64(f(as_i64(a), as_i64(b))),
    }
}

pub(super) fn trig(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Some(v) = first_operand(args, cx)? else {
        return Ok(Some(Bson::Null));
    };
    if let Bson::Decimal128(d) = v {
        return trig_decimal(name, Dec::from_bson(d)).map(Some);
    }
    let Some(n) = num(&v, name)? else {
        return Err(MongoError::location(
            28765,
            format!("{name} only supports numeric types, not {}", type_name(&v)),
        ));
    };
    let x = n.as_f64();
    let bounded = |lo: f64, hi: f64| -> MongoResult<f64> {
        if x.is_nan() || (lo..=hi).contains(&x) {
            Ok(x)
        } else {
            Err(MongoError::location(
                50989,
                format!("cannot apply {name} to {x}, value must be in [{lo},{hi}]"),
            ))
        }
    };
    let r = match name {
        "$sin" => x.sin(),
        "$cos" => x.cos(),
        "$tan" => x.tan(),
        "$asin" => bounded(-1.0, 1.0)?.asin(),
        "$acos" => bounded(-1.0, 1.0)?.acos(),
        "$atan" => x.atan(),
        "$sinh" => x.sinh(),
        "$cosh" => x.cosh(),
        "$tanh" => x.tanh(),
        "$asinh" => x.asinh(),
        "$acosh" => bounded(1.0, f64::INFINITY)?.acosh(),
        "$atanh" => bounded(-1.0, 1.0)?.atanh(),
        "$degreesToRadians" => x.to_radians(),
        _ => x.to_degrees(),
    };
    Ok(Some(Bson::Double(r)))
}

/// The trigonometric operators on a decimal, computed in decimal128, with
/// mongod's 50989 for an argument outside the function's domain (the
/// infinities for `$sin`, `$cos` and `$tan`); NaN gives NaN.
fn trig_decimal(name: &str, x: Dec) -> MongoResult<Bson> {
    let f = match name {
        "$sin" => Trig::Sin,
        "$cos" => Trig::Cos,
        "$tan" => Trig::Tan,
        "$asin" => Trig::Asin,
        "$acos" => Trig::Acos,
        "$atan" => Trig::Atan,
        "$sinh" => Trig::Sinh,
        "$cosh" => Trig::Cosh,
        "$tanh" => Trig::Tanh,
        "$asinh" => Trig::Asinh,
        "$acosh" => Trig::Acosh,
        "$atanh" => Trig::Atanh,
        "$degreesToRadians" => Trig::DegreesToRadians,
        _ => Trig::RadiansToDegrees,
    };
    let bounds = match f {
        Trig::Sin | Trig::Cos | Trig::Tan => Some("(-inf,inf)"),
        Trig::Asin | Trig::Acos | Trig::Atanh => Some("[-1,1]"),
        Trig::Acosh => Some("[1,inf]"),
        _ => None,
    };
    let r = x.trig(f);
    // Out of the domain is exactly where a non-NaN argument gives NaN.
    if let Some(bounds) = bounds {
        if r.is_nan() && !x.is_nan() {
            return Err(MongoError::location(
                50989,
                format!(
                    "cannot apply {name} to {}, value must be in {bounds}",
                    x.to_bson()
                ),
            ));
        }
    }
    Ok(r.into_bson())
}
