//! Date expressions (`$year` ... `$week`, `$dateToString`, `$dateAdd`,
//! `$dateTrunc`, ...). Time zones are UTC, fixed offsets (`+05:30`, `-0800`,
//! `+03`) or Olson/IANA names (`America/New_York`) resolved with the tz
//! database compiled into `chrono-tz`.

use super::{arg, check_arity, parse_opt, require, Ctx, Expr, Scope, Value};
use crate::value::{civil_from_days, days_from_civil, nullish, type_name, type_name_opt};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::Bson;
use chrono::{LocalResult, Offset, TimeZone};
use chrono_tz::OffsetComponents;

/// Milliseconds since the epoch of a date-like value.
pub(crate) fn date_millis(v: &Bson) -> Option<i64> {
    match v {
        Bson::DateTime(d) => Some(d.timestamp_millis()),
        Bson::Timestamp(t) => Some(i64::from(t.time) * 1000),
        Bson::ObjectId(o) => Some(o.timestamp().timestamp_millis()),
        _ => None,
    }
}

/// [`date_millis`] of an operator's date argument, which must be a date
/// (or a timestamp or an ObjectId).
fn to_date_millis(d: &Value) -> MongoResult<i64> {
    d.as_ref().and_then(date_millis).ok_or_else(|| {
        MongoError::location(
            16006,
            format!(
                "can't convert from BSON type {} to Date",
                type_name_opt(d.as_ref())
            ),
        )
    })
}

/// Seconds bound (about 95,000 years either side of 1970) for time zone
/// look-ups: chrono cannot represent every BSON date, and no zone's rules
/// change that far out, so clamping does not change the offset found.
const ZONE_LOOKUP_LIMIT_SECS: i64 = 3_000_000_000_000;

/// A `timezone` argument: a fixed offset from UTC or a named zone.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Zone {
    /// Offset in milliseconds; `Fixed(0)` is mongod's UTC zone.
    Fixed(i64),
    Named(chrono_tz::Tz),
}

impl Zone {
    const UTC: Zone = Zone::Fixed(0);

    /// Parses an Olson identifier or a `±HH`, `±HHMM`, `±HH:MM` offset, the
    /// forms mongod accepts; anything else is error 40485.
    fn parse(tz: &str) -> MongoResult<Zone> {
        if matches!(tz, "UTC" | "Z") {
            return Ok(Zone::UTC);
        }
        if let Some(ms) = parse_utc_offset(tz) {
            return Ok(Zone::Fixed(ms));
        }
        tz.parse::<chrono_tz::Tz>().map(Zone::Named).map_err(|_| {
            MongoError::location(
                40485,
                format!("unrecognized time zone identifier: \"{tz}\""),
            )
        })
    }

    /// mongod's "UTC zone": the default format of `$dateToString` ends in
    /// `Z` only there.
    fn is_utc(self) -> bool {
        self == Zone::UTC
    }

    /// The UTC instant (whole seconds, clamped) as a chrono date-time.
    fn naive(ms: i64) -> Option<chrono::NaiveDateTime> {
        let secs = ms
            .div_euclid(1000)
            .clamp(-ZONE_LOOKUP_LIMIT_SECS, ZONE_LOOKUP_LIMIT_SECS);
        chrono::DateTime::from_timestamp(secs, 0).map(|d| d.naive_utc())
    }

    fn named_offset(tz: chrono_tz::Tz, utc_ms: i64) -> Option<chrono_tz::TzOffset> {
        Self::naive(utc_ms).map(|n| tz.offset_from_utc_datetime(&n))
    }

    /// Offset from UTC in milliseconds in force at the instant `utc_ms`.
    fn offset_ms(self, utc_ms: i64) -> i64 {
        match self {
            Zone::Fixed(ms) => ms,
            Zone::Named(tz) => Self::named_offset(tz, utc_ms)
                .map_or(0, |o| i64::from(o.fix().local_minus_utc()) * 1000),
        }
    }

    /// Whether daylight saving time is in force at the instant `utc_ms`.
    fn is_dst(self, utc_ms: i64) -> bool {
        match self {
            Zone::Fixed(_) => false,
            Zone::Named(tz) => {
                Self::named_offset(tz, utc_ms).is_some_and(|o| o.dst_offset().num_seconds() != 0)
            }
        }
    }

    /// Wall-clock time at `utc_ms`, as milliseconds of a UTC-like calendar.
    fn local(self, utc_ms: i64) -> i64 {
        utc_ms.saturating_add(self.offset_ms(utc_ms))
    }

    /// The instant whose wall-clock time is `local_ms`, resolving DST the
    /// way mongod's timelib does:
    /// - a time skipped by a spring-forward gap is read with the offset in
    ///   force before the gap (New York 02:30 on 2021-03-14 is 07:30Z,
    ///   03:30 EDT);
    /// - a time repeated by a fall-back overlap takes the occurrence whose
    ///   DST flag equals `prefer_dst` (timelib keeps the flag of the time it
    ///   started from: the start date for `$dateAdd`, 2000-01-01 for
    ///   `$dateTrunc`, 1970-01-01 for `$dateFromParts`/`$dateFromString`);
    ///   when the flag does not decide (an offset change without DST), the
    ///   offset in force at `local_ms` read as UTC wins, else the earlier
    ///   occurrence.
    fn to_utc(self, local_ms: i64, prefer_dst: bool) -> i64 {
        let tz = match self {
            Zone::Fixed(ms) => return local_ms.saturating_sub(ms),
            Zone::Named(tz) => tz,
        };
        let Some(naive) = Self::naive(local_ms) else {
            return local_ms;
        };
        let secs = |o: &chrono_tz::TzOffset| i64::from(o.fix().local_minus_utc());
        let offset = match tz.offset_from_local_datetime(&naive) {
            LocalResult::Single(o) => secs(&o),
            LocalResult::Ambiguous(a, b) => {
                let dst = |o: &chrono_tz::TzOffset| o.dst_offset().num_seconds() != 0;
                if dst(&a) != dst(&b) {
                    if dst(&a) == prefer_dst {
                        secs(&a)
                    } else {
                        secs(&b)
                    }
                } else {
                    let at = secs(&tz.offset_from_utc_datetime(&naive));
                    if at == secs(&b) {
                        at
                    } else {
                        secs(&a)
                    }
                }
            }
            LocalResult::None => chrono_tz::GapInfo::new(&naive, &tz)
                .and_then(|g| g.begin)
                .map_or_else(
                    || secs(&tz.offset_from_utc_datetime(&naive)),
                    |(_, before)| secs(&before),
                ),
        };
        local_ms.saturating_sub(offset * 1000)
    }

    /// The DST flag timelib gives a time built from parts (it sets the zone
    /// on an instant of 0, 1970-01-01T00:00Z).
    fn epoch_dst(self) -> bool {
        self.is_dst(0)
    }
}

/// `±HH`, `±HHMM` or `±HH:MM` in milliseconds.
fn parse_utc_offset(tz: &str) -> Option<i64> {
    let b = tz.as_bytes();
    let sign = match b.first()? {
        b'+' => 1,
        b'-' => -1,
        _ => return None,
    };
    let two = |i: usize| -> Option<i64> {
        let (h, l) = (*b.get(i)?, *b.get(i + 1)?);
        (h.is_ascii_digit() && l.is_ascii_digit()).then(|| i64::from((h - b'0') * 10 + (l - b'0')))
    };
    let (hh, mm) = match b.len() {
        3 => (two(1)?, 0),
        5 => (two(1)?, two(3)?),
        6 if b.get(3) == Some(&b':') => (two(1)?, two(4)?),
        _ => return None,
    };
    Some(sign * (hh * 3_600_000 + mm * 60_000))
}

/// `$year`, `$month`, `$dayOfMonth`, `$hour`, `$minute`, `$second`,
/// `$millisecond`, `$dayOfWeek`, `$dayOfYear`, `$week`.
pub(super) fn date_part(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let d = cx.ev(arg(args, 0)?)?;
    let zone = match cx.ev(arg(args, 1)?)? {
        None if matches!(arg(args, 1)?, Expr::Missing) => Zone::UTC,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        Some(Bson::String(tz)) => Zone::parse(&tz)?,
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
    let ms = zone.local(to_date_millis(&d)?);
    let part = DatePart::from_name(name)
        .ok_or_else(|| MongoError::internal(format!("unhandled date operator {name}")))?;
    Ok(Some(Civil::of(ms).part(part)))
}

/// A date part operator (`$year` ... `$week`), resolved once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum DatePart {
    Year,
    Month,
    DayOfMonth,
    Hour,
    Minute,
    Second,
    Millisecond,
    DayOfWeek,
    DayOfYear,
    Week,
}

impl DatePart {
    pub(super) fn from_name(name: &str) -> Option<DatePart> {
        Some(match name {
            "$year" => DatePart::Year,
            "$month" => DatePart::Month,
            "$dayOfMonth" => DatePart::DayOfMonth,
            "$hour" => DatePart::Hour,
            "$minute" => DatePart::Minute,
            "$second" => DatePart::Second,
            "$millisecond" => DatePart::Millisecond,
            "$dayOfWeek" => DatePart::DayOfWeek,
            "$dayOfYear" => DatePart::DayOfYear,
            "$week" => DatePart::Week,
            _ => return None,
        })
    }
}

/// The civil date and time of day of a (zone-shifted) instant: computed
/// once, then read by every date part operator of the same date.
#[derive(Debug, Clone, Copy)]
pub(super) struct Civil {
    days: i64,
    /// Milliseconds into the day.
    rem: i64,
    year: i64,
    month: u32,
    day: u32,
}

impl Civil {
    pub(super) fn of(ms: i64) -> Civil {
        let days = ms.div_euclid(86_400_000);
        let (year, month, day) = civil_from_days(days);
        Civil {
            days,
            rem: ms.rem_euclid(86_400_000),
            year,
            month,
            day,
        }
    }

    /// The value of `part`, as the operator returns it.
    pub(super) fn part(&self, part: DatePart) -> Bson {
        // 1970-01-01 was a Thursday; 0 = Sunday.
        let dow0 = || (self.days + 4).rem_euclid(7);
        let day_of_year0 = || self.days - days_from_civil(self.year, 1, 1);
        let rem = self.rem;
        let v: i64 = match part {
            DatePart::Year => self.year,
            DatePart::Month => i64::from(self.month),
            DatePart::DayOfMonth => i64::from(self.day),
            DatePart::Hour => rem / 3_600_000,
            DatePart::Minute => rem / 60_000 % 60,
            DatePart::Second => rem / 1000 % 60,
            DatePart::Millisecond => rem % 1000,
            DatePart::DayOfWeek => dow0() + 1,
            DatePart::DayOfYear => day_of_year0() + 1,
            // Weeks start on Sunday; days before the year's first Sunday are week 0.
            DatePart::Week => (day_of_year0() + 7 - dow0()) / 7,
        };
        Bson::Int32(i32::try_from(v).unwrap_or(i32::MAX))
    }
}

/// Broken-down UTC (or offset-shifted) time.
struct Parts {
    year: i64,
    month: u32,
    day: u32,
    hour: i64,
    minute: i64,
    second: i64,
    millis: i64,
    /// 0 = Sunday.
    dow0: i64,
    /// 0-based day of the year.
    doy0: i64,
}

fn parts_of(ms: i64) -> Parts {
    let days = ms.div_euclid(86_400_000);
    let rem = ms.rem_euclid(86_400_000);
    let (year, month, day) = civil_from_days(days);
    Parts {
        year,
        month,
        day,
        hour: rem / 3_600_000,
        minute: rem / 60_000 % 60,
        second: rem / 1000 % 60,
        millis: rem % 1000,
        dow0: (days + 4).rem_euclid(7),
        doy0: days - days_from_civil(year, 1, 1),
    }
}

fn is_leap(y: i64) -> bool {
    (y % 4 == 0 && y % 100 != 0) || y % 400 == 0
}

/// ISO-8601 weeks in a year: 53 when it starts on a Thursday (or a
/// Wednesday in a leap year).
fn iso_weeks_in_year(y: i64) -> i64 {
    let jan1_dow0 = (days_from_civil(y, 1, 1) + 4).rem_euclid(7);
    if jan1_dow0 == 4 || (jan1_dow0 == 3 && is_leap(y)) {
        53
    } else {
        52
    }
}

/// (ISO week-numbering year, ISO week, ISO weekday 1 = Monday).
fn iso_parts(p: &Parts) -> (i64, i64, i64) {
    let iso_dow = (p.dow0 + 6) % 7 + 1;
    let week = (p.doy0 + 1 - iso_dow + 10) / 7;
    if week < 1 {
        (p.year - 1, iso_weeks_in_year(p.year - 1), iso_dow)
    } else if week > iso_weeks_in_year(p.year) {
        (p.year + 1, 1, iso_dow)
    } else {
        (p.year, week, iso_dow)
    }
}

/// `$isoDayOfWeek`, `$isoWeek`, `$isoWeekYear` (same argument forms as `$year`).
pub(super) fn iso_date_part(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Some(ms) = date_arg(args, cx, name)? else {
        return Ok(Some(Bson::Null));
    };
    let (y, w, d) = iso_parts(&parts_of(ms));
    let v = match name {
        "$isoDayOfWeek" => d,
        "$isoWeek" => w,
        _ => y,
    };
    Ok(Some(Bson::Int32(i32::try_from(v).unwrap_or(i32::MAX))))
}

/// Evaluates `[date, timezone]` into wall-clock milliseconds (`None` for null).
fn date_arg(args: &[Expr], cx: &Ctx, name: &str) -> MongoResult<Option<i64>> {
    let Some(zone) = tz_arg(args.get(1), cx)? else {
        return Ok(None);
    };
    let d = cx.ev(arg(args, 0)?)?;
    if nullish(d.as_ref()) {
        return Ok(None);
    }
    let ms = to_date_millis(&d)?;
    let _ = name;
    Ok(Some(zone.local(ms)))
}

/// The zone of an optional timezone argument (UTC when absent); `None` when
/// it is null.
fn tz_arg(e: Option<&Expr>, cx: &Ctx) -> MongoResult<Option<Zone>> {
    match e {
        None | Some(Expr::Missing) => Ok(Some(Zone::UTC)),
        Some(e) => match cx.ev(e)? {
            v if nullish(v.as_ref()) => Ok(None),
            Some(Bson::String(tz)) => Zone::parse(&tz).map(Some),
            Some(other) => Err(MongoError::location(
                40517,
                format!(
                    "timezone must evaluate to a string, found {}",
                    type_name(&other)
                ),
            )),
            None => Ok(None),
        },
    }
}

const DEFAULT_FORMAT: &str = "%Y-%m-%dT%H:%M:%S.%LZ";
/// mongod's default format when the zone is not UTC: no `Z` suffix.
const DEFAULT_FORMAT_NON_UTC: &str = "%Y-%m-%dT%H:%M:%S.%L";

fn format_date(fmt: &str, ms: i64, offset_ms: i64) -> MongoResult<String> {
    use std::fmt::Write as _;
    let p = parts_of(ms);
    let mut out = String::with_capacity(fmt.len() + 8);
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let Some(spec) = chars.next() else {
            return Err(MongoError::location(
                18535,
                "Unmatched '%' at end of format string",
            ));
        };
        let (iso_y, iso_w, iso_d) = iso_parts(&p);
        let _ = match spec {
            'Y' => write!(out, "{:04}", p.year),
            'm' => write!(out, "{:02}", p.month),
            'd' => write!(out, "{:02}", p.day),
            'H' => write!(out, "{:02}", p.hour),
            'M' => write!(out, "{:02}", p.minute),
            'S' => write!(out, "{:02}", p.second),
            'L' => write!(out, "{:03}", p.millis),
            'j' => write!(out, "{:03}", p.doy0 + 1),
            'w' => write!(out, "{}", p.dow0 + 1),
            'u' => write!(out, "{iso_d}"),
            'U' => write!(out, "{:02}", (p.doy0 + 7 - p.dow0) / 7),
            'V' => write!(out, "{iso_w:02}"),
            'G' => write!(out, "{iso_y:04}"),
            'z' => {
                let sign = if offset_ms < 0 { '-' } else { '+' };
                let m = offset_ms.abs() / 60_000;
                write!(out, "{sign}{:02}{:02}", m / 60, m % 60)
            }
            'Z' => write!(out, "{}", offset_ms / 60_000),
            '%' => write!(out, "%"),
            other => {
                return Err(MongoError::location(
                    18536,
                    format!("Invalid format character '%{other}' in format string"),
                ));
            }
        };
    }
    Ok(out)
}

/// Adds calendar months, clamping the day to the target month's length.
/// `None` when the result leaves the representable range.
pub(crate) fn add_months(ms: i64, months: i64) -> Option<i64> {
    let p = parts_of(ms);
    let total = (p.year * 12 + i64::from(p.month) - 1).checked_add(months)?;
    // Stay far inside the range where the calendar arithmetic cannot overflow.
    if total.abs() > 12 * 300_000_000 {
        return None;
    }
    let (y, m) = (total.div_euclid(12), (total.rem_euclid(12) + 1) as u32);
    let next = if m == 12 {
        days_from_civil(y + 1, 1, 1)
    } else {
        days_from_civil(y, m + 1, 1)
    };
    let month_len = next - days_from_civil(y, m, 1);
    let day = i64::from(p.day).min(month_len);
    let days = days_from_civil(y, m, 1) + day - 1;
    days.checked_mul(86_400_000)?
        .checked_add(ms.rem_euclid(86_400_000))
}

/// Start of the `step`-sized bin (counted from `origin`) containing `ms`.
fn floor_to(ms: i64, origin: i64, step: i64) -> Option<i64> {
    let (ms, origin, step) = (i128::from(ms), i128::from(origin), i128::from(step));
    i64::try_from(origin + (ms - origin).div_euclid(step) * step).ok()
}

fn date_overflow(name: &str) -> MongoError {
    MongoError::location(5166406, format!("{name} overflowed"))
}

fn unit_ms(unit: &str) -> Option<i64> {
    Some(match unit {
        "millisecond" => 1,
        "second" => 1000,
        "minute" => 60_000,
        "hour" => 3_600_000,
        "day" => 86_400_000,
        "week" => 7 * 86_400_000,
        _ => return None,
    })
}

fn unit_arg(v: Value, name: &str) -> MongoResult<Option<String>> {
    match v {
        Some(Bson::String(u)) => {
            if unit_ms(&u).is_some() || matches!(u.as_str(), "month" | "quarter" | "year") {
                Ok(Some(u))
            } else {
                Err(MongoError::bad_value(format!(
                    "{name}: unknown time unit value: {u}"
                )))
            }
        }
        v if nullish(v.as_ref()) => Ok(None),
        Some(other) => Err(MongoError::bad_value(format!(
            "{name} requires 'unit' to be a string, but got {}",
            type_name(&other)
        ))),
        None => Ok(None),
    }
}

fn start_of_week(v: Value, name: &str) -> MongoResult<Option<i64>> {
    let s = match v {
        None => return Ok(Some(0)),
        Some(Bson::String(s)) => s.to_ascii_lowercase(),
        v if nullish(v.as_ref()) => return Ok(None),
        Some(other) => {
            return Err(MongoError::bad_value(format!(
                "{name} requires 'startOfWeek' to be a string, but got {}",
                type_name(&other)
            )))
        }
    };
    let days = [
        "sunday",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
    ];
    match days
        .iter()
        .position(|d| *d == s || d.get(..3) == Some(s.as_str()))
    {
        Some(i) => Ok(Some(i as i64)),
        None => Err(MongoError::bad_value(format!(
            "{name} parameter 'startOfWeek' value cannot be recognized as a day of a week: {s}"
        ))),
    }
}

fn int_of(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e18 => Some(*d as i64),
        _ => None,
    }
}

/// Reads the `format` argument of `op` (`$dateToString`, `$dateFromString`):
/// `Some(None)` when it is missing (the default format), `None` when it is
/// null (the result is then null).
fn format_arg(v: Value, op: &str, code: i32) -> MongoResult<Option<Option<String>>> {
    match v {
        None => Ok(Some(None)),
        Some(Bson::String(f)) => Ok(Some(Some(f))),
        v if nullish(v.as_ref()) => Ok(None),
        Some(other) => Err(MongoError::location(
            code,
            format!(
                "{op} requires that 'format' be a string, found: {} with value {}",
                type_name(&other),
                crate::value::render(&other)
            ),
        )),
    }
}

/// The result for a null input: the `onNull` argument at `i`, or null
/// without one.
fn on_null(args: &[Expr], i: usize, cx: &Ctx) -> MongoResult<Value> {
    match arg(args, i)? {
        Expr::Missing => Ok(Some(Bson::Null)),
        e => cx.ev(e),
    }
}

/// The result for an input that fails with `e`: the `onError` argument at
/// `i`, or `e` without one.
fn on_error(args: &[Expr], i: usize, cx: &Ctx, e: MongoError) -> MongoResult<Value> {
    match arg(args, i)? {
        Expr::Missing => Err(e),
        on_error => cx.ev(on_error),
    }
}

/// Evaluates the named-argument date operators. `args` follow the order of
/// the operator's entry in the named-argument table.
/// `$dateToString`.
pub(super) fn date_to_string(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // date, format, timezone, onNull
    let d = cx.ev(arg(args, 0)?)?;
    let Some(fmt) = format_arg(cx.ev(arg(args, 1)?)?, "$dateToString", 18533)? else {
        return Ok(Some(Bson::Null));
    };
    let Some(zone) = tz_arg(args.get(2), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let fmt = fmt.unwrap_or_else(|| {
        if zone.is_utc() {
            DEFAULT_FORMAT
        } else {
            DEFAULT_FORMAT_NON_UTC
        }
        .to_string()
    });
    if nullish(d.as_ref()) {
        return on_null(args, 3, cx);
    }
    let ms = to_date_millis(&d)?;
    format_date(&fmt, zone.local(ms), zone.offset_ms(ms)).map(|s| Some(Bson::String(s)))
}

/// `$dateAdd`, `$dateSubtract`.
pub(super) fn date_add_subtract(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // startDate, unit, amount, timezone
    let start = cx.ev(arg(args, 0)?)?;
    let unit = unit_arg(cx.ev(arg(args, 1)?)?, name)?;
    let amount = cx.ev(arg(args, 2)?)?;
    let Some(zone) = tz_arg(args.get(3), cx)? else {
        return Ok(Some(Bson::Null));
    };
    if nullish(start.as_ref()) || nullish(amount.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(unit) = unit else {
        return Ok(Some(Bson::Null));
    };
    let ms = start.as_ref().and_then(date_millis).ok_or_else(|| {
        MongoError::location(
            5166403,
            format!("{name} requires startDate to be convertible to a date"),
        )
    })?;
    let Some(mut n) = amount.as_ref().and_then(int_of) else {
        return Err(MongoError::location(
            5166402,
            format!("{name} expects integer amount of time units"),
        ));
    };
    if name == "$dateSubtract" {
        n = n.checked_neg().ok_or_else(|| {
            MongoError::location(
                5166406,
                format!("invalid {name} 'amount' parameter value: {n}"),
            )
        })?;
    }
    // Days and larger units move the wall clock (so across a DST
    // change a day is 23 or 25 hours); smaller units add elapsed time.
    let local = zone.local(ms);
    let wall = |local_out: i64| zone.to_utc(local_out, zone.is_dst(ms));
    let out = match unit.as_str() {
        "month" => wall(add_months(local, n).ok_or_else(|| date_overflow(name))?),
        "quarter" => {
            wall(add_months(local, n.saturating_mul(3)).ok_or_else(|| date_overflow(name))?)
        }
        "year" => wall(add_months(local, n.saturating_mul(12)).ok_or_else(|| date_overflow(name))?),
        "day" | "week" => wall(local.saturating_add(n.saturating_mul(unit_ms(&unit).unwrap_or(0)))),
        u => ms.saturating_add(n.saturating_mul(unit_ms(u).unwrap_or(0))),
    };
    Ok(Some(Bson::DateTime(bson::DateTime::from_millis(out))))
}

/// `$dateDiff`.
pub(super) fn date_diff(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // startDate, endDate, unit, timezone, startOfWeek
    let a = cx.ev(arg(args, 0)?)?;
    let b = cx.ev(arg(args, 1)?)?;
    let unit = unit_arg(cx.ev(arg(args, 2)?)?, name)?;
    let Some(zone) = tz_arg(args.get(3), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let Some(sow) = start_of_week(cx.ev(arg(args, 4)?)?, name)? else {
        return Ok(Some(Bson::Null));
    };
    if nullish(a.as_ref()) || nullish(b.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(unit) = unit else {
        return Ok(Some(Bson::Null));
    };
    let to_ms = |v: &Value, which: &str| {
        v.as_ref().and_then(date_millis).ok_or_else(|| {
            MongoError::location(
                5166307,
                format!(
                    "{name} requires '{which}' to be a date, but got {}",
                    type_name_opt(v.as_ref())
                ),
            )
        })
    };
    let (ux, uy) = (to_ms(&a, "startDate")?, to_ms(&b, "endDate")?);
    // Boundaries are counted on the local wall clock.
    let (x, y) = (zone.local(ux), zone.local(uy));
    let months = |ms: i64| {
        let p = parts_of(ms);
        p.year * 12 + i64::from(p.month) - 1
    };
    let diff = match unit.as_str() {
        "year" => parts_of(y).year - parts_of(x).year,
        "quarter" => months(y).div_euclid(3) - months(x).div_euclid(3),
        "month" => months(y) - months(x),
        // Weeks are counted by crossed week starts (startOfWeek, Sunday by default).
        "week" => {
            let wk = |ms: i64| (ms.div_euclid(86_400_000) + 4 - sow).div_euclid(7);
            wk(y) - wk(x)
        }
        "millisecond" => uy
            .checked_sub(ux)
            .ok_or_else(|| MongoError::location(5166308, "dateDiff overflowed"))?,
        // Hours, minutes and seconds: local boundaries, corrected by
        // the change of offset in between (as mongod does, truncating).
        u => {
            let step = unit_ms(u).unwrap_or(1);
            let correction = (zone.offset_ms(ux) - zone.offset_ms(uy)) / step;
            y.div_euclid(step) - x.div_euclid(step) + correction
        }
    };
    Ok(Some(Bson::Int64(diff)))
}

/// `$dateTrunc`.
pub(super) fn date_trunc(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // date, unit, binSize, timezone, startOfWeek
    let d = cx.ev(arg(args, 0)?)?;
    let unit = unit_arg(cx.ev(arg(args, 1)?)?, name)?;
    let bin = match cx.ev(arg(args, 2)?)? {
        None => 1,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        Some(v) => match int_of(&v) {
            Some(n) if n > 0 => n,
            _ => {
                return Err(MongoError::location(
                    5439017,
                    format!("$dateTrunc requires 'binSize' to be a 64-bit integer greater than 0, but got value '{}' of type {}", crate::value::render(&v), type_name(&v)),
                ))
            }
        },
    };
    let Some(zone) = tz_arg(args.get(3), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let Some(sow) = start_of_week(cx.ev(arg(args, 4)?)?, name)? else {
        return Ok(Some(Bson::Null));
    };
    if nullish(d.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(unit) = unit else {
        return Ok(Some(Bson::Null));
    };
    let utc = d.as_ref().and_then(date_millis).ok_or_else(|| {
        MongoError::location(
            5439012,
            format!(
                "$dateTrunc requires 'date' to be a date, but got {}",
                type_name_opt(d.as_ref())
            ),
        )
    })?;
    let ms = zone.local(utc);
    // Bins are counted from 2000-01-01T00:00:00 local time (for
    // weeks, from the first startOfWeek on or after it), as mongod
    // does. Units of a day and more are cut on the local calendar and
    // the bin start converted back with the reference point's DST
    // flag; smaller units are fixed spans of elapsed time from the
    // reference instant.
    let reference = days_from_civil(2000, 1, 1) * 86_400_000;
    let reference_utc = reference - zone.offset_ms(reference);
    let wall = |local: i64| zone.to_utc(local, zone.is_dst(reference_utc));
    let out = match unit.as_str() {
        "year" | "quarter" | "month" => {
            let per = match unit.as_str() {
                "year" => 12_i64,
                "quarter" => 3,
                _ => 1,
            }
            .saturating_mul(bin);
            let p = parts_of(ms);
            let m = (p.year - 2000) * 12 + i64::from(p.month) - 1;
            let start = m.div_euclid(per).saturating_mul(per);
            wall(add_months(reference, start).ok_or_else(|| date_overflow(name))?)
        }
        "week" => {
            let ref_dow0 = (days_from_civil(2000, 1, 1) + 4).rem_euclid(7);
            let week_ref = reference + (sow - ref_dow0).rem_euclid(7) * 86_400_000;
            let step = (7 * 86_400_000_i64).saturating_mul(bin);
            wall(floor_to(ms, week_ref, step).ok_or_else(|| date_overflow(name))?)
        }
        "day" => {
            let step = 86_400_000_i64.saturating_mul(bin);
            wall(floor_to(ms, reference, step).ok_or_else(|| date_overflow(name))?)
        }
        u => {
            let step = unit_ms(u).unwrap_or(1).saturating_mul(bin);
            floor_to(utc, reference_utc, step).ok_or_else(|| date_overflow(name))?
        }
    };
    Ok(Some(Bson::DateTime(bson::DateTime::from_millis(out))))
}

/// `$dateToParts`.
pub(super) fn date_to_parts(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // date, timezone, iso8601
    let d = cx.ev(arg(args, 0)?)?;
    let Some(zone) = tz_arg(args.get(1), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let iso = match cx.ev(arg(args, 2)?)? {
        None => false,
        Some(Bson::Boolean(b)) => b,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        Some(other) => {
            return Err(MongoError::location(
                40521,
                format!(
                    "iso8601 must evaluate to a bool, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    if nullish(d.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let ms = to_date_millis(&d)?;
    let p = parts_of(zone.local(ms));
    let i = |v: i64| Bson::Int32(i32::try_from(v).unwrap_or(i32::MAX));
    let mut out = bson::Document::new();
    if iso {
        let (y, w, dow) = iso_parts(&p);
        out.insert("isoWeekYear", i(y));
        out.insert("isoWeek", i(w));
        out.insert("isoDayOfWeek", i(dow));
    } else {
        out.insert("year", i(p.year));
        out.insert("month", i(i64::from(p.month)));
        out.insert("day", i(i64::from(p.day)));
    }
    out.insert("hour", i(p.hour));
    out.insert("minute", i(p.minute));
    out.insert("second", i(p.second));
    out.insert("millisecond", i(p.millis));
    Ok(Some(Bson::Document(out)))
}

/// `$dateFromString`.
pub(super) fn date_from_string(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // dateString, format, timezone, onError, onNull
    let s = cx.ev(arg(args, 0)?)?;
    let Some(fmt) = format_arg(cx.ev(arg(args, 1)?)?, "$dateFromString", 40684)? else {
        return Ok(Some(Bson::Null));
    };
    let Some(zone) = tz_arg(args.get(2), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let s = match s {
        Some(Bson::String(s)) => s,
        v if nullish(v.as_ref()) => return on_null(args, 4, cx),
        Some(other) => {
            let e = MongoError::new(
                ErrorCode::ConversionFailure,
                format!("$dateFromString requires that 'dateString' be a string, found: {} with value {}", type_name(&other), crate::value::render(&other)),
            );
            return on_error(args, 3, cx, e);
        }
        None => return Ok(Some(Bson::Null)),
    };
    let parsed = match &fmt {
        None => super::convert::parse_date_string(&s).map(|ms| (ms, has_zone(&s))),
        Some(f) => parse_with_format(&s, f),
    };
    match parsed {
        Some((ms, zoned)) => {
            let ms = if zoned {
                ms
            } else {
                zone.to_utc(ms, zone.epoch_dst())
            };
            Ok(Some(Bson::DateTime(bson::DateTime::from_millis(ms))))
        }
        None => {
            let e = MongoError::new(
                ErrorCode::ConversionFailure,
                format!("Error parsing date string '{s}'"),
            );
            on_error(args, 3, cx, e)
        }
    }
}

/// True when an ISO date string carries its own offset or `Z`.
fn has_zone(s: &str) -> bool {
    let t = s.trim();
    t.ends_with('Z')
        || t.get(10..).is_some_and(|rest| {
            rest.contains('+') || rest.get(1..).is_some_and(|r| r.contains('-'))
        })
}

/// Parses `s` with a `$dateToString`-style format. Returns milliseconds and
/// whether the string carried its own zone (`%z`/`%Z`).
fn parse_with_format(s: &str, fmt: &str) -> Option<(i64, bool)> {
    let b = s.as_bytes();
    let mut pos = 0usize;
    let (mut y, mut mo, mut d, mut h, mut mi, mut se, mut ms) =
        (1970i64, 1i64, 1i64, 0i64, 0i64, 0i64, 0i64);
    let mut zone: Option<i64> = None;
    let digits = |pos: &mut usize, max: usize| -> Option<i64> {
        let start = *pos;
        while *pos < b.len() && *pos - start < max && b.get(*pos).is_some_and(u8::is_ascii_digit) {
            *pos += 1;
        }
        if *pos == start {
            return None;
        }
        std::str::from_utf8(b.get(start..*pos)?).ok()?.parse().ok()
    };
    let mut chars = fmt.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            let mut buf = [0u8; 4];
            let lit = c.encode_utf8(&mut buf).as_bytes();
            if b.get(pos..pos + lit.len()) != Some(lit) {
                return None;
            }
            pos += lit.len();
            continue;
        }
        match chars.next()? {
            'Y' => y = digits(&mut pos, 4)?,
            'm' => mo = digits(&mut pos, 2)?,
            'd' => d = digits(&mut pos, 2)?,
            'H' => h = digits(&mut pos, 2)?,
            'M' => mi = digits(&mut pos, 2)?,
            'S' => se = digits(&mut pos, 2)?,
            'L' => ms = digits(&mut pos, 3)?,
            'z' => {
                let sign = match b.get(pos)? {
                    b'+' => 1,
                    b'-' => -1,
                    _ => return None,
                };
                pos += 1;
                let hh = digits(&mut pos, 2)?;
                if b.get(pos) == Some(&b':') {
                    pos += 1;
                }
                let mm = digits(&mut pos, 2)?;
                zone = Some(sign * (hh * 3_600_000 + mm * 60_000));
            }
            'Z' => {
                let sign = if b.get(pos) == Some(&b'-') {
                    pos += 1;
                    -1
                } else {
                    if b.get(pos) == Some(&b'+') {
                        pos += 1;
                    }
                    1
                };
                zone = Some(sign * digits(&mut pos, 4)? * 60_000);
            }
            '%' => {
                if b.get(pos) != Some(&b'%') {
                    return None;
                }
                pos += 1;
            }
            _ => return None,
        }
    }
    if pos != b.len()
        || !(1..=12).contains(&mo)
        || !(1..=31).contains(&d)
        || h > 23
        || mi > 59
        || se > 59
    {
        return None;
    }
    let days = days_from_civil(y, u32::try_from(mo).ok()?, u32::try_from(d).ok()?);
    let local = days * 86_400_000 + h * 3_600_000 + mi * 60_000 + se * 1000 + ms;
    Some(match zone {
        Some(z) => (local - z, true),
        None => (local, false),
    })
}

pub(super) fn date_from_parts(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    // year ... isoDayOfWeek, then timezone.
    let names = super::arg_names("$dateFromParts");
    let mut vals: [Option<i64>; 10] = [None; 10];
    for (i, slot) in vals.iter_mut().enumerate() {
        let e = arg(args, i)?;
        if matches!(e, Expr::Missing) {
            continue;
        }
        let v = cx.ev(e)?;
        if nullish(v.as_ref()) {
            return Ok(Some(Bson::Null));
        }
        let pname = names.get(i).copied().unwrap_or("");
        let n = v.as_ref().and_then(int_of).ok_or_else(|| {
            MongoError::location(
                40515,
                format!(
                    "'{pname}' must evaluate to an integer, found {} with value {}",
                    type_name_opt(v.as_ref()),
                    super::render_value(&v)
                ),
            )
        })?;
        let (lo, hi) = if i == 0 || i == 7 {
            (1, 9999)
        } else {
            (-32768, 32767)
        };
        if n < lo || n > hi {
            let code = if i == 0 || i == 7 { 40523 } else { 31034 };
            return Err(MongoError::location(code, format!("'{pname}' must evaluate to a value in the range [{lo}, {hi}]; value {n} is not in range")));
        }
        *slot = Some(n);
    }
    let Some(zone) = tz_arg(args.get(10), cx)? else {
        return Ok(Some(Bson::Null));
    };
    let [year, month, day, hour, minute, second, milli, iso_year, iso_week, iso_dow] = vals;
    let days = match (year, iso_year) {
        (Some(_), Some(_)) => {
            return Err(MongoError::location(
                40489,
                "$dateFromParts does not allow mixing natural dates with ISO dates",
            ))
        }
        (Some(y), None) => {
            if iso_week.is_some() || iso_dow.is_some() {
                return Err(MongoError::location(
                    40489,
                    "$dateFromParts does not allow mixing natural dates with ISO dates",
                ));
            }
            let m = month.unwrap_or(1) - 1;
            let (y, m) = (y + m.div_euclid(12), (m.rem_euclid(12) + 1) as u32);
            days_from_civil(y, m, 1) + day.unwrap_or(1) - 1
        }
        (None, Some(iy)) => {
            if month.is_some() || day.is_some() {
                return Err(MongoError::location(
                    40489,
                    "$dateFromParts does not allow mixing natural dates with ISO dates",
                ));
            }
            // ISO week 1 contains January 4th.
            let jan4 = days_from_civil(iy, 1, 4);
            let jan4_iso_dow = (jan4 + 4 + 6).rem_euclid(7) + 1;
            let week1_monday = jan4 - (jan4_iso_dow - 1);
            week1_monday + (iso_week.unwrap_or(1) - 1) * 7 + iso_dow.unwrap_or(1) - 1
        }
        (None, None) => {
            return Err(MongoError::location(
                40516,
                "$dateFromParts requires either 'year' or 'isoWeekYear' to be present",
            ))
        }
    };
    let local = days * 86_400_000
        + hour.unwrap_or(0) * 3_600_000
        + minute.unwrap_or(0) * 60_000
        + second.unwrap_or(0) * 1000
        + milli.unwrap_or(0);
    let ms = zone.to_utc(local, zone.epoch_dst());
    Ok(Some(Bson::DateTime(bson::DateTime::from_millis(ms))))
}

/// The argument of the date part operators (`$year` ... `$week`, `$isoWeek`,
/// ...): `<date>`, `[<date>]` or `{date, timezone}`.
pub(super) fn parse_date_part(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let (date, tz) = match arg {
        Bson::Document(d) if d.contains_key("date") => {
            for k in d.keys() {
                if k != "date" && k != "timezone" {
                    return Err(MongoError::location(
                        40535,
                        format!("unrecognized option to {name}: \"{k}\""),
                    ));
                }
            }
            (
                require(d, "date", 40539, "missing 'date' argument", scope)?,
                parse_opt(d, "timezone", scope)?,
            )
        }
        Bson::Array(a) => {
            check_arity(name, a.len(), 1, 1)?;
            (
                Expr::parse_in(a.first().unwrap_or(&Bson::Null), scope)?,
                Expr::Missing,
            )
        }
        other => (Expr::parse_in(other, scope)?, Expr::Missing),
    };
    Expr::call(name, vec![date, tz])
}
