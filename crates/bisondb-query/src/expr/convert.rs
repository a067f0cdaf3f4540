//! `$type`, `$isNumber` and the conversions `$toString`, `$toInt`,
//! `$toLong`, `$toDouble`, `$toBool` and `$convert`.

use super::{arg, named_args, parse_opt, Ctx, Expr, Scope, Value};
use crate::decimal::{Dec, Rounding};
use crate::value::{civil_from_days, days_from_civil, nullish, type_name};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, DateTime};

/// A double as mongod's `$toString` prints it (`1`, `1.5`, `1e+20`).
pub(crate) fn double_to_string(d: f64) -> String {
    if d.is_nan() {
        "NaN".to_string()
    } else if d.is_infinite() {
        if d > 0.0 {
            "Infinity".to_string()
        } else {
            "-Infinity".to_string()
        }
    } else if d != 0.0 && (d.abs() >= 1e15 || d.abs() < 1e-4) {
        let e = format!("{d:e}");
        match e.split_once('e') {
            Some((m, x)) if !x.starts_with('-') => format!("{m}e+{x}"),
            _ => e,
        }
    } else {
        format!("{d}")
    }
}

/// A date as mongod prints it: ISO-8601 in UTC with milliseconds.
pub(crate) fn date_to_string(d: DateTime) -> String {
    let ms = d.timestamp_millis();
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, day) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3_600_000,
        rem / 60_000 % 60,
        rem / 1000 % 60,
        rem % 1000
    )
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Target {
    Double,
    String,
    Bool,
    Int,
    Long,
    Date,
    ObjectId,
    Decimal,
}

fn target_of(v: &Bson) -> MongoResult<Target> {
    let name = match v {
        Bson::String(s) => s.as_str(),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) => {
            match crate::value::Num::from_bson(v)
                .map(crate::value::Num::as_f64)
                .filter(|x| x.fract() == 0.0 && x.abs() < 1e6)
                .map(|x| x as i64)
            {
                Some(1) => "double",
                Some(2) => "string",
                Some(8) => "bool",
                Some(16) => "int",
                Some(18) => "long",
                Some(7) => "objectId",
                Some(9) => "date",
                Some(19) => "decimal",
                _ => {
                    return Err(MongoError::failed_to_parse(format!(
                    "In $convert, numeric value for 'to' does not correspond to a BSON type: {}",
                    crate::value::render(v)
                )))
                }
            }
        }
        other => {
            return Err(MongoError::failed_to_parse(format!(
                "$convert's 'to' argument must be a string or number, but is {}",
                type_name(other)
            )))
        }
    };
    Ok(match name {
        "double" => Target::Double,
        "string" => Target::String,
        "bool" => Target::Bool,
        "int" => Target::Int,
        "long" => Target::Long,
        "date" => Target::Date,
        "objectId" => Target::ObjectId,
        "decimal" => Target::Decimal,
        "binData" => {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("$convert to '{name}' is not supported by BisonDB yet"),
            ))
        }
        other => return Err(MongoError::bad_value(format!("Unknown type name: {other}"))),
    })
}

fn conversion_failure(msg: String) -> MongoError {
    MongoError::new(ErrorCode::ConversionFailure, msg)
}

fn unsupported(from: &Bson, to: &str) -> MongoError {
    conversion_failure(format!(
        "Unsupported conversion from {} to {to} in $convert with no onError value",
        type_name(from)
    ))
}

fn float_to_int(d: f64, to_long: bool) -> MongoResult<Bson> {
    if d.is_nan() {
        return Err(conversion_failure(
            "Attempt to convert NaN value to integer type in $convert with no onError value".into(),
        ));
    }
    let t = d.trunc();
    let fits = if to_long {
        (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&t)
    } else {
        t >= f64::from(i32::MIN) && t <= f64::from(i32::MAX)
    };
    if !fits || d.is_infinite() {
        return Err(conversion_failure(format!(
            "Conversion would overflow target type in $convert with no onError value: {}",
            double_to_string(d)
        )));
    }
    Ok(if to_long {
        Bson::Int64(t as i64)
    } else {
        Bson::Int32(t as i32)
    })
}

fn parse_int_str(s: &str, to_long: bool) -> MongoResult<Bson> {
    let fail = || {
        conversion_failure(format!(
            "Failed to parse number '{s}' in $convert with no onError value: Did not consume whole string."
        ))
    };
    let n: i64 = s.parse().map_err(|_| fail())?;
    if to_long {
        Ok(Bson::Int64(n))
    } else {
        i32::try_from(n).map(Bson::Int32).map_err(|_| {
            conversion_failure(format!(
                "Failed to parse number '{s}' in $convert with no onError value: Overflow"
            ))
        })
    }
}

/// Parses the ISO-8601 forms mongod's `$toDate` accepts: a date, optionally
/// followed by `T` (or a space) and a time with optional fraction and zone.
pub(crate) fn parse_date_string(s: &str) -> Option<i64> {
    let b = s.trim().as_bytes();
    let num = |from: usize, len: usize| -> Option<i64> {
        let part = b.get(from..from + len)?;
        if !part.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(part).ok()?.parse().ok()
    };
    let year = num(0, 4)?;
    if b.get(4) != Some(&b'-') || b.get(7) != Some(&b'-') {
        return None;
    }
    let month = u32::try_from(num(5, 2)?)
        .ok()
        .filter(|m| (1..=12).contains(m))?;
    let day = u32::try_from(num(8, 2)?)
        .ok()
        .filter(|d| (1..=31).contains(d))?;
    let mut ms = days_from_civil(year, month, day) * 86_400_000;
    let mut i = 10;
    if matches!(b.get(i), Some(b'T') | Some(b' ')) {
        let h = num(i + 1, 2)?;
        if b.get(i + 3) != Some(&b':') {
            return None;
        }
        let m = num(i + 4, 2)?;
        ms += h * 3_600_000 + m * 60_000;
        i += 6;
        if b.get(i) == Some(&b':') {
            ms += num(i + 1, 2)? * 1000;
            i += 3;
            if b.get(i) == Some(&b'.') {
                let start = i + 1;
                let mut end = start;
                while b.get(end).is_some_and(u8::is_ascii_digit) {
                    end += 1;
                }
                let frac = std::str::from_utf8(b.get(start..end)?).ok()?;
                if frac.is_empty() {
                    return None;
                }
                let padded: String = frac.chars().chain("000".chars()).take(3).collect();
                ms += padded.parse::<i64>().ok()?;
                i = end;
            }
        }
    }
    match b.get(i) {
        None => Some(ms),
        Some(b'Z') if i + 1 == b.len() => Some(ms),
        Some(sign @ (b'+' | b'-')) => {
            let rest: Vec<u8> = b
                .get(i + 1..)?
                .iter()
                .copied()
                .filter(|c| *c != b':')
                .collect();
            if rest.len() != 4 && rest.len() != 2 {
                return None;
            }
            let hh: i64 = std::str::from_utf8(rest.get(0..2)?).ok()?.parse().ok()?;
            let mm: i64 = if rest.len() == 4 {
                std::str::from_utf8(rest.get(2..4)?).ok()?.parse().ok()?
            } else {
                0
            };
            let off = hh * 3_600_000 + mm * 60_000;
            Some(if *sign == b'+' { ms - off } else { ms + off })
        }
        _ => None,
    }
}

/// A decimal as a double: mongod fails when a finite value does not fit
/// (it overflows to infinity or underflows to zero).
fn decimal_to_double(d: Dec) -> MongoResult<f64> {
    let f = d.to_f64();
    if matches!(d, Dec::Finite { .. }) && (f.is_infinite() || (f == 0.0 && !d.is_zero())) {
        return Err(conversion_failure(format!(
            "Conversion would overflow target type in $convert with no onError value: {}",
            d.to_bson()
        )));
    }
    Ok(f)
}

/// A decimal as an int or long, truncated towards zero as mongod does.
fn decimal_to_int(d: Dec, to_long: bool) -> MongoResult<Bson> {
    match d {
        Dec::NaN => {
            return Err(conversion_failure(
                "Attempt to convert NaN value to integer type in $convert with no onError value"
                    .into(),
            ))
        }
        Dec::Inf(_) => return Err(conversion_failure(
            "Attempt to convert infinity value to integer type in $convert with no onError value"
                .into(),
        )),
        Dec::Finite { .. } => {}
    }
    let n = d.to_i64(Rounding::TowardZero);
    let r = if to_long {
        n.map(Bson::Int64)
    } else {
        n.and_then(|i| i32::try_from(i).ok()).map(Bson::Int32)
    };
    r.ok_or_else(|| {
        conversion_failure(format!(
            "Conversion would overflow target type in $convert with no onError value: {}",
            d.to_bson()
        ))
    })
}

/// Any convertible value as a decimal (doubles to 15 digits, as mongod).
fn to_decimal(v: &Bson) -> MongoResult<Bson> {
    let d = match v {
        Bson::Boolean(b) => Dec::from_i64(i64::from(*b)),
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => {
            Dec::from_number(v).unwrap_or(Dec::NaN)
        }
        Bson::DateTime(d) => Dec::from_i64(d.timestamp_millis()),
        Bson::String(s) => Dec::parse(s).ok_or_else(|| {
            conversion_failure(format!(
                "Failed to parse number '{s}' in $convert with no onError value: Failed to parse string to decimal"
            ))
        })?,
        other => return Err(unsupported(other, "decimal")),
    };
    Ok(d.into_bson())
}

fn convert(v: &Bson, to: Target) -> MongoResult<Bson> {
    match to {
        Target::Decimal => to_decimal(v),
        Target::Date => Ok(Bson::DateTime(DateTime::from_millis(match v {
            Bson::DateTime(d) => d.timestamp_millis(),
            Bson::Int64(i) => *i,
            Bson::Int32(i) => i64::from(*i),
            Bson::Double(d) if d.is_finite() => *d as i64,
            // Truncated milliseconds, with the same errors as to long.
            Bson::Decimal128(d) => match decimal_to_int(Dec::from_bson(*d), true)? {
                Bson::Int64(ms) => ms,
                _ => 0,
            },
            Bson::Timestamp(t) => i64::from(t.time) * 1000,
            Bson::ObjectId(o) => o.timestamp().timestamp_millis(),
            Bson::String(s) => parse_date_string(s).ok_or_else(|| {
                conversion_failure(format!("Error parsing date string '{s}' in $convert with no onError value"))
            })?,
            other => return Err(unsupported(other, "date")),
        }))),
        Target::ObjectId => match v {
            Bson::ObjectId(o) => Ok(Bson::ObjectId(*o)),
            Bson::String(s) => bson::oid::ObjectId::parse_str(s).map(Bson::ObjectId).map_err(|_| {
                conversion_failure(format!(
                    "Failed to parse objectId '{s}' in $convert with no onError value: Invalid string length for parsing to OID, expected 24 but found {}",
                    s.len()
                ))
            }),
            other => Err(unsupported(other, "objectId")),
        },
        Target::Bool => Ok(Bson::Boolean(match v {
            Bson::Boolean(b) => *b,
            Bson::Int32(i) => *i != 0,
            Bson::Int64(i) => *i != 0,
            Bson::Double(d) => *d != 0.0,
            Bson::Decimal128(d) => !Dec::from_bson(*d).is_zero(),
            _ => true,
        })),
        Target::String => Ok(Bson::String(match v {
            Bson::String(s) => s.clone(),
            Bson::Boolean(b) => b.to_string(),
            Bson::Int32(i) => i.to_string(),
            Bson::Int64(i) => i.to_string(),
            Bson::Double(d) => double_to_string(*d),
            Bson::Decimal128(d) => d.to_string(),
            Bson::ObjectId(o) => o.to_hex(),
            Bson::DateTime(d) => date_to_string(*d),
            other => return Err(unsupported(other, "string")),
        })),
        Target::Double => Ok(Bson::Double(match v {
            Bson::Boolean(b) => f64::from(u8::from(*b)),
            Bson::Int32(i) => f64::from(*i),
            Bson::Int64(i) => *i as f64,
            Bson::Double(d) => *d,
            Bson::Decimal128(d) => decimal_to_double(Dec::from_bson(*d))?,
            Bson::DateTime(d) => d.timestamp_millis() as f64,
            Bson::String(s) => s.trim().parse::<f64>().ok().filter(|_| !s.is_empty()).ok_or_else(|| {
                conversion_failure(format!(
                    "Failed to parse number '{s}' in $convert with no onError value: Did not consume whole string."
                ))
            })?,
            other => return Err(unsupported(other, "double")),
        })),
        Target::Int | Target::Long => {
            let to_long = to == Target::Long;
            match v {
                Bson::Boolean(b) => Ok(if to_long { Bson::Int64(i64::from(*b)) } else { Bson::Int32(i32::from(*b)) }),
                Bson::Int32(i) => Ok(if to_long { Bson::Int64(i64::from(*i)) } else { Bson::Int32(*i) }),
                Bson::Int64(i) => {
                    if to_long {
                        Ok(Bson::Int64(*i))
                    } else {
                        i32::try_from(*i).map(Bson::Int32).map_err(|_| {
                            conversion_failure(format!(
                                "Conversion would overflow target type in $convert with no onError value: {i}"
                            ))
                        })
                    }
                }
                Bson::Double(d) => float_to_int(*d, to_long),
                Bson::Decimal128(d) => decimal_to_int(Dec::from_bson(*d), to_long),
                Bson::DateTime(d) if to_long => Ok(Bson::Int64(d.timestamp_millis())),
                Bson::String(s) => parse_int_str(s, to_long),
                other => Err(unsupported(other, if to_long { "long" } else { "int" })),
            }
        }
    }
}

/// `$type`.
pub(super) fn type_of(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    Ok(Some(Bson::String(
        crate::value::type_name_opt(cx.ev(arg(args, 0)?)?.as_ref()).to_string(),
    )))
}

/// `$isNumber`.
pub(super) fn is_number(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    Ok(Some(Bson::Boolean(
        cx.ev(arg(args, 0)?)?
            .as_ref()
            .is_some_and(crate::value::is_number),
    )))
}

/// `$convert`.
pub(super) fn convert_op(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    let has_on_error = matches!(arg(args, 4)?, Expr::Literal(Bson::Boolean(true)));
    let has_on_null = matches!(arg(args, 5)?, Expr::Literal(Bson::Boolean(true)));
    let to = cx.ev(arg(args, 1)?)?;
    if nullish(input.as_ref()) {
        return if has_on_null {
            cx.ev(arg(args, 3)?)
        } else {
            Ok(Some(Bson::Null))
        };
    }
    let Some(to) = to.filter(|t| !nullish(Some(t))) else {
        return Ok(Some(Bson::Null));
    };
    let target = target_of(&to)?;
    let Some(input) = input else {
        return Ok(Some(Bson::Null));
    };
    match convert(&input, target) {
        Ok(v) => Ok(Some(v)),
        Err(e) if has_on_error && e.code == ErrorCode::ConversionFailure => cx.ev(arg(args, 2)?),
        Err(e) => Err(e),
    }
}

/// `$bsonSize`.
pub(super) fn bson_size(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Document(d)) => {
            let raw = bson::RawDocumentBuf::try_from(&d)
                .map_err(|e| MongoError::internal(format!("document cannot be encoded: {e}")))?;
            Ok(Some(Bson::Int32(
                i32::try_from(raw.as_bytes().len()).unwrap_or(i32::MAX),
            )))
        }
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            31393,
            format!(
                "$bsonSize requires a document input, found: {}",
                crate::value::type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$binarySize`.
pub(super) fn binary_size(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::String(s)) => Ok(Some(Bson::Int32(
            i32::try_from(s.len()).unwrap_or(i32::MAX),
        ))),
        Some(Bson::Binary(b)) => Ok(Some(Bson::Int32(
            i32::try_from(b.bytes.len()).unwrap_or(i32::MAX),
        ))),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            51276,
            format!(
                "$binarySize requires a string or BinData argument, found: {}",
                crate::value::type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$tsSecond`, `$tsIncrement`.
pub(super) fn ts_part(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Timestamp(t)) => Ok(Some(Bson::Int64(i64::from(if name == "$tsSecond" {
            t.time
        } else {
            t.increment
        })))),
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            5687301,
            format!(
                "Argument to {name} must be a timestamp, but is {}",
                crate::value::type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$toBool`, `$toDate`, `$toDecimal`, `$toDouble`, `$toInt`, `$toLong`, `$toObjectId`, `$toString`: conversions to one type.
pub(super) fn to_type(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let target = match name {
        "$toDate" => Target::Date,
        "$toObjectId" => Target::ObjectId,
        "$toString" => Target::String,
        "$toInt" => Target::Int,
        "$toLong" => Target::Long,
        "$toDouble" => Target::Double,
        "$toDecimal" => Target::Decimal,
        _ => Target::Bool,
    };
    match cx.ev(arg(args, 0)?)? {
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        Some(v) => convert(&v, target).map(Some),
        None => Ok(Some(Bson::Null)),
    }
}

/// Parses the argument of `$convert`.
pub(super) fn parse_convert(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let d = named_args(
        name,
        arg,
        &[
            "input",
            "to",
            "onError",
            "onNull",
            "format",
            "base",
            "byteOrder",
        ],
        (
            ErrorCode::FailedToParse.code(),
            "$convert expects an object of named arguments but found: ",
        ),
        (
            ErrorCode::FailedToParse.code(),
            "$convert found an unknown argument: ",
        ),
    )
    .map_err(|e| MongoError::failed_to_parse(e.message))?;
    for k in ["format", "base", "byteOrder"] {
        if d.contains_key(k) {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("$convert's '{k}' argument is not supported by BisonDB yet"),
            ));
        }
    }
    let input = match d.get("input") {
        Some(v) => Expr::parse_in(v, scope)?,
        None => {
            return Err(MongoError::failed_to_parse(
                "Missing 'input' parameter to $convert",
            ))
        }
    };
    let to = match d.get("to") {
        Some(v) => Expr::parse_in(v, scope)?,
        None => {
            return Err(MongoError::failed_to_parse(
                "Missing 'to' parameter to $convert",
            ))
        }
    };
    let on_error = parse_opt(d, "onError", scope)?;
    let on_null = parse_opt(d, "onNull", scope)?;
    let has_err = Expr::Literal(Bson::Boolean(d.contains_key("onError")));
    let has_null = Expr::Literal(Bson::Boolean(d.contains_key("onNull")));
    Expr::call(name, vec![input, to, on_error, on_null, has_err, has_null])
}
