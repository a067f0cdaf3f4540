//! Date part expressions (`$year` ... `$week`). Time zones: UTC and fixed
//! offsets (`+05:30`); Olson names need a time zone database BisonDB does not
//! ship yet and fail with NotImplemented.

use super::value::{civil_from_days, days_from_civil, nullish, type_name, type_name_opt};
use super::{arg, Ctx, Expr, Value};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::Bson;

/// Milliseconds since the epoch of a date-like value.
pub(crate) fn date_millis(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(i64::from(t.time) * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

/// Parses a time zone into an offset in milliseconds.
fn tz_offset_ms(tz: &str) -> MongoResult<i64> {
    if matches!(
        tz,
        "UTC" | "GMT" | "Z" | "Etc/UTC" | "Etc/GMT" | "UCT" | "Etc/UCT" | "Zulu" | "Etc/Zulu"
    ) {
        return Ok(0);
    }
    let bytes = tz.as_bytes();
    let sign = match bytes.first() {
        Some(b'+') => 1,
        Some(b'-') => -1,
        _ => {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("time zone '{tz}' is not supported by BisonDB yet (only UTC and fixed offsets such as +05:30)"),
            ))
        }
    };
    let digits: String = tz.chars().skip(1).filter(|c| *c != ':').collect();
    let bad = || {
        MongoError::location(
            40485,
            format!("unrecognized time zone identifier: \"{tz}\""),
        )
    };
    if !digits.bytes().all(|b| b.is_ascii_digit()) || !matches!(digits.len(), 2 | 4) {
        return Err(bad());
    }
    let hh: i64 = digits
        .get(0..2)
        .and_then(|s| s.parse().ok())
        .ok_or_else(bad)?;
    let mm: i64 = digits.get(2..4).and_then(|s| s.parse().ok()).unwrap_or(0);
    Ok(sign * (hh * 3_600_000 + mm * 60_000))
}

pub(super) fn eval(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let d = cx.ev(arg(args, 0)?)?;
    let offset = match cx.ev(arg(args, 1)?)? {
        None if matches!(arg(args, 1)?, Expr::Missing) => 0,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        Some(Bson::String(tz)) => tz_offset_ms(&tz)?,
        Some(other) => {
            return Err(MongoError::location(
                40517,
                format!(
                    "timezone must evaluate to a string, found {}",
                    type_name(&other)
                ),
            ))
        }
        None => return Ok(Some(Bson::Null)),
    };
    if nullish(d.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(ms) = d.as_ref().and_then(date_millis) else {
        return Err(MongoError::location(
            16006,
            format!(
                "can't convert from BSON type {} to Date",
                type_name_opt(d.as_ref())
            ),
        ));
    };
    let ms = ms.saturating_add(offset);
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (y, m, day) = civil_from_days(days);
    let day_of_year0 = days - days_from_civil(y, 1, 1);
    // 1970-01-01 was a Thursday; 0 = Sunday.
    let dow0 = (days + 4).rem_euclid(7);
    let v: i64 = match name {
        "$year" => y,
        "$month" => i64::from(m),
        "$dayOfMonth" => i64::from(day),
        "$hour" => rem / 3_600_000,
        "$minute" => rem / 60_000 % 60,
        "$second" => rem / 1000 % 60,
        "$millisecond" => rem % 1000,
        "$dayOfWeek" => dow0 + 1,
        "$dayOfYear" => day_of_year0 + 1,
        // Weeks start on Sunday; days before the year's first Sunday are week 0.
        "$week" => (day_of_year0 + 7 - dow0) / 7,
        other => {
            return Err(MongoError::internal(format!(
                "unhandled date operator {other}"
            )))
        }
    };
    Ok(Some(Bson::Int32(i32::try_from(v).unwrap_or(i32::MAX))))
}
