//! Small helpers over BSON values shared by every layer above (expressions,
//! the matcher, update operators, accumulators, stages): mongod's type names,
//! its compact value rendering for error messages, truthiness, numeric
//! arithmetic with mongod's type promotion, and the memory estimate of a value
//! that blocking stages and `$in` lists are charged with. It sits at the bottom
//! of the crate, beside `decimal`, so it must not use any module above it.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Decimal128, Document};
use std::fmt::Write as _;

/// The result of evaluating an expression: `None` is a missing value.
pub type Value = Option<Bson>;

/// mongod's `$type` name for a value.
pub fn type_name(v: &Bson) -> &'static str {
    match v {
        Bson::Double(_) => "double",
        Bson::String(_) => "string",
        Bson::Array(_) => "array",
        Bson::Document(_) => "object",
        Bson::Boolean(_) => "bool",
        Bson::Null => "null",
        Bson::RegularExpression(_) => "regex",
        Bson::JavaScriptCode(_) => "javascript",
        Bson::JavaScriptCodeWithScope(_) => "javascriptWithScope",
        Bson::Int32(_) => "int",
        Bson::Int64(_) => "long",
        Bson::Timestamp(_) => "timestamp",
        Bson::Binary(_) => "binData",
        Bson::ObjectId(_) => "objectId",
        Bson::DateTime(_) => "date",
        Bson::Symbol(_) => "symbol",
        Bson::Decimal128(_) => "decimal",
        Bson::Undefined => "undefined",
        Bson::MaxKey => "maxKey",
        Bson::MinKey => "minKey",
        Bson::DbPointer(_) => "dbPointer",
    }
}

/// Type name of a possibly missing value ("missing" as `$type` reports it).
pub fn type_name_opt(v: Option<&Bson>) -> &'static str {
    v.map_or("missing", type_name)
}

/// Renders a value the way mongod prints values in error messages
/// (`{_id: 1, a: "x"}`), so messages read like the server's.
pub fn render(v: &Bson) -> String {
    let mut s = String::new();
    render_into(v, &mut s);
    s
}

/// Renders a document like [`render`].
pub fn render_doc(d: &Document) -> String {
    let mut s = String::new();
    render_doc_into(d, &mut s);
    s
}

fn render_doc_into(d: &Document, s: &mut String) {
    if d.is_empty() {
        s.push_str("{}");
        return;
    }
    s.push_str("{ ");
    for (i, (k, v)) in d.iter().enumerate() {
        if i > 0 {
            s.push_str(", ");
        }
        s.push_str(k);
        s.push_str(": ");
        render_into(v, s);
    }
    s.push_str(" }");
}

fn render_into(v: &Bson, s: &mut String) {
    match v {
        Bson::Document(d) => render_doc_into(d, s),
        Bson::Array(a) => {
            s.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    s.push_str(", ");
                }
                render_into(x, s);
            }
            s.push(']');
        }
        Bson::String(x) => {
            let _ = write!(s, "\"{x}\"");
        }
        Bson::Int32(x) => {
            let _ = write!(s, "{x}");
        }
        Bson::Int64(x) => {
            let _ = write!(s, "{x}");
        }
        Bson::Double(x) => s.push_str(&fmt_double(*x)),
        Bson::Boolean(b) => {
            let _ = write!(s, "{b}");
        }
        Bson::Null => s.push_str("null"),
        Bson::ObjectId(o) => {
            let _ = write!(s, "ObjectId('{o}')");
        }
        Bson::DateTime(d) => {
            let _ = write!(s, "new Date({})", d.timestamp_millis());
        }
        Bson::Decimal128(d) => {
            let _ = write!(s, "NumberDecimal(\"{d}\")");
        }
        other => {
            let _ = write!(s, "{other}");
        }
    }
}

/// Formats a double as mongod's value rendering does (`1.0`, `1.5`, `inf`).
pub fn fmt_double(x: f64) -> String {
    if x.is_nan() {
        "nan".to_string()
    } else if x.is_infinite() {
        if x > 0.0 {
            "inf".to_string()
        } else {
            "-inf".to_string()
        }
    } else if x.fract() == 0.0 && x.abs() < 1e15 {
        format!("{x:.1}")
    } else {
        format!("{x}")
    }
}

/// Aggregation truthiness: false, null, undefined, missing and numeric zero are false.
pub fn truthy(v: Option<&Bson>) -> bool {
    match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) | Some(Bson::Boolean(false)) => false,
        Some(Bson::Int32(0)) | Some(Bson::Int64(0)) => false,
        Some(Bson::Double(d)) => *d != 0.0,
        Some(Bson::Decimal128(d)) => dec_to_f64(d) != 0.0,
        _ => true,
    }
}

/// True when the value is null, undefined or missing (mongod's "nullish").
pub fn nullish(v: Option<&Bson>) -> bool {
    matches!(v, None | Some(Bson::Null) | Some(Bson::Undefined))
}

/// True for the four numeric BSON types.
pub fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

/// Approximates a Decimal128 as a double through its string form.
pub fn dec_to_f64(d: &Decimal128) -> f64 {
    d.to_string().parse::<f64>().unwrap_or(f64::NAN)
}

/// A numeric value, any of BSON's number types.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Num {
    I32(i32),
    I64(i64),
    F64(f64),
}

impl Num {
    /// A running non-decimal total met by a decimal: integers exactly, a
    /// double total to 34 digits (mongod's summation keeps its partial sum
    /// at full precision when it turns decimal).
    pub fn to_dec(self) -> crate::decimal::Dec {
        use crate::decimal::Dec;
        match self {
            Num::I32(i) => Dec::from_i64(i64::from(i)),
            Num::I64(i) => Dec::from_i64(i),
            Num::F64(d) => Dec::from_f64_34(d),
        }
    }

    /// Reads a BSON number; Decimal128 is read as a double (BisonDB has no
    /// decimal arithmetic yet, see [`decimal_unsupported`]).
    pub fn from_bson(v: &Bson) -> Option<Num> {
        match v {
            Bson::Int32(i) => Some(Num::I32(*i)),
            Bson::Int64(i) => Some(Num::I64(*i)),
            Bson::Double(d) => Some(Num::F64(*d)),
            _ => None,
        }
    }

    pub fn to_bson(self) -> Bson {
        match self {
            Num::I32(i) => Bson::Int32(i),
            Num::I64(i) => Bson::Int64(i),
            Num::F64(d) => Bson::Double(d),
        }
    }

    pub fn as_f64(self) -> f64 {
        match self {
            Num::I32(i) => f64::from(i),
            Num::I64(i) => i as f64,
            Num::F64(d) => d,
        }
    }

    fn as_i64(self) -> Option<i64> {
        match self {
            Num::I32(i) => Some(i64::from(i)),
            Num::I64(i) => Some(i),
            Num::F64(_) => None,
        }
    }

    /// Narrowest integer representation of a 64-bit result.
    pub fn from_i64_narrow(i: i64) -> Num {
        match i32::try_from(i) {
            Ok(v) => Num::I32(v),
            Err(_) => Num::I64(i),
        }
    }

    pub fn is_zero(self) -> bool {
        match self {
            Num::I32(i) => i == 0,
            Num::I64(i) => i == 0,
            Num::F64(d) => d == 0.0,
        }
    }
}

/// What to do when 64-bit integer arithmetic overflows: aggregation falls back
/// to double, update operators report an error.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LongOverflow {
    ToDouble,
    Fail,
}

/// Adds with mongod's promotion rules: int+int overflowing widens to long.
/// Returns `None` when a long overflows and `on_overflow` is `Fail`.
pub fn num_add(a: Num, b: Num, on_overflow: LongOverflow) -> Option<Num> {
    match (a, b) {
        (Num::I32(x), Num::I32(y)) => Some(match x.checked_add(y) {
            Some(v) => Num::I32(v),
            None => Num::I64(i64::from(x) + i64::from(y)),
        }),
        (Num::F64(_), _) | (_, Num::F64(_)) => Some(Num::F64(a.as_f64() + b.as_f64())),
        _ => {
            let (x, y) = (a.as_i64()?, b.as_i64()?);
            match x.checked_add(y) {
                Some(v) => Some(Num::I64(v)),
                None if on_overflow == LongOverflow::ToDouble => {
                    Some(Num::F64(x as f64 + y as f64))
                }
                None => None,
            }
        }
    }
}

/// Multiplies with the same promotion rules as [`num_add`].
pub fn num_mul(a: Num, b: Num, on_overflow: LongOverflow) -> Option<Num> {
    match (a, b) {
        (Num::I32(x), Num::I32(y)) => Some(match x.checked_mul(y) {
            Some(v) => Num::I32(v),
            None => Num::I64(i64::from(x) * i64::from(y)),
        }),
        (Num::F64(_), _) | (_, Num::F64(_)) => Some(Num::F64(a.as_f64() * b.as_f64())),
        _ => {
            let (x, y) = (a.as_i64()?, b.as_i64()?);
            match x.checked_mul(y) {
                Some(v) => Some(Num::I64(v)),
                None if on_overflow == LongOverflow::ToDouble => {
                    Some(Num::F64(x as f64 * y as f64))
                }
                None => None,
            }
        }
    }
}

/// Subtracts with the same promotion rules as [`num_add`].
pub fn num_sub(a: Num, b: Num) -> Num {
    match (a, b) {
        (Num::I32(x), Num::I32(y)) => match x.checked_sub(y) {
            Some(v) => Num::I32(v),
            None => Num::I64(i64::from(x) - i64::from(y)),
        },
        (Num::F64(_), _) | (_, Num::F64(_)) => Num::F64(a.as_f64() - b.as_f64()),
        _ => match (a.as_i64(), b.as_i64()) {
            (Some(x), Some(y)) => match x.checked_sub(y) {
                Some(v) => Num::I64(v),
                None => Num::F64(x as f64 - y as f64),
            },
            _ => Num::F64(a.as_f64() - b.as_f64()),
        },
    }
}

/// The error for arithmetic on Decimal128 values, which BisonDB does not do yet.
pub fn decimal_unsupported(op: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("{op} on Decimal128 values is not supported by BisonDB yet"),
    )
}

/// Reads a number, failing on Decimal128 with NotImplemented rather than
/// computing an inexact result.
pub fn num_or_decimal_err(v: &Bson, op: &str) -> MongoResult<Option<Num>> {
    if matches!(v, Bson::Decimal128(_)) {
        return Err(decimal_unsupported(op));
    }
    Ok(Num::from_bson(v))
}

/// Sums numbers the way `$sum`/`$avg` do: integers exactly (int widening to
/// long, long overflowing to double) and doubles with compensated
/// (Neumaier) summation, so a sum of many doubles rounds like mongod's
/// double-double accumulator instead of drifting.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summer {
    ints: i128,
    sum: f64,
    comp: f64,
    saw_long: bool,
    saw_double: bool,
    count: u64,
    /// The decimal values' own exact sum; any decimal makes the result a
    /// decimal (mongod keeps the same two totals).
    dec: Option<crate::decimal::Dec>,
}

impl Summer {
    pub fn add(&mut self, n: Num) {
        self.count += 1;
        match n {
            Num::I32(i) => self.ints += i128::from(i),
            Num::I64(i) => {
                self.ints += i128::from(i);
                self.saw_long = true;
            }
            Num::F64(x) => {
                self.saw_double = true;
                self.add_f(x);
            }
        }
    }

    fn add_f(&mut self, x: f64) {
        if !x.is_finite() || !self.sum.is_finite() {
            self.sum += x;
            return;
        }
        let t = self.sum + x;
        if self.sum.abs() >= x.abs() {
            self.comp += (self.sum - t) + x;
        } else {
            self.comp += (x - t) + self.sum;
        }
        self.sum = t;
    }

    fn double_total(&self) -> f64 {
        if !self.sum.is_finite() {
            return self.sum;
        }
        let mut s = *self;
        s.add_f(self.ints as f64);
        s.sum + s.comp
    }

    /// Adds a decimal: from now on the sum and the mean are decimals.
    pub fn add_dec(&mut self, d: crate::decimal::Dec) {
        self.count += 1;
        self.dec = Some(self.dec.unwrap_or(crate::decimal::Dec::ZERO).plus(d));
    }

    /// The decimal total (decimals plus the other numbers converted) when a
    /// decimal was added.
    fn dec_total(&self) -> Option<crate::decimal::Dec> {
        use crate::decimal::Dec;
        let d = self.dec?;
        Some(if self.saw_double {
            d.plus(Dec::from_f64_34(self.double_total()))
        } else if self.ints != 0 {
            d.plus(Dec::from_i128(self.ints))
        } else {
            d
        })
    }

    /// The sum as BSON: [`Summer::total`], or a decimal when one was added.
    pub fn total_bson(&self) -> Bson {
        match self.dec_total() {
            Some(d) => d.into_bson(),
            None => self.total().to_bson(),
        }
    }

    /// The mean as BSON: null when nothing was added, a decimal when a
    /// decimal was added, else a double.
    pub fn mean_bson(&self) -> Bson {
        if self.count == 0 {
            return Bson::Null;
        }
        match self.dec_total() {
            Some(d) => d
                .quotient(crate::decimal::Dec::from_i128(i128::from(self.count)))
                .into_bson(),
            None => Bson::Double(self.double_total() / self.count as f64),
        }
    }

    /// Number of values added.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// The sum with mongod's result type.
    pub fn total(&self) -> Num {
        if self.saw_double {
            return Num::F64(self.double_total());
        }
        match (i32::try_from(self.ints), i64::try_from(self.ints)) {
            (Ok(v), _) if !self.saw_long => Num::I32(v),
            (_, Ok(v)) => Num::I64(v),
            _ => Num::F64(self.ints as f64),
        }
    }

    /// The mean, or `None` when nothing was added.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.double_total() / self.count as f64)
    }
}

/// Days since 1970-01-01 to (year, month 1-12, day 1-31) in the proleptic
/// Gregorian calendar (the usual era-based civil-from-days arithmetic).
pub fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

/// Inverse of [`civil_from_days`].
pub fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let m = i64::from(m);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// An estimate of what a value costs in memory (mongod also estimates).
pub(crate) fn approx_size(v: &Bson) -> usize {
    match v {
        Bson::String(s) => 24 + s.len(),
        Bson::Document(d) => approx_doc_size(d),
        Bson::Array(a) => 24 + a.iter().map(approx_size).sum::<usize>(),
        Bson::Binary(b) => 24 + b.bytes.len(),
        _ => 16,
    }
}

/// [`approx_size`] of a document: its fields' names and values.
pub(crate) fn approx_doc_size(d: &Document) -> usize {
    24 + d
        .iter()
        .map(|(k, v)| 24 + k.len() + approx_size(v))
        .sum::<usize>()
}

/// mongod's error for a required field missing from a spec (40414).
pub(crate) fn missing_field(parent: &str, field: &str) -> MongoError {
    MongoError::location(
        40414,
        format!("BSON field '{parent}.{field}' is missing but a required field"),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn promotion_rules() {
        let cases = [
            (
                Num::I32(1),
                Num::I32(2),
                LongOverflow::Fail,
                Some(Num::I32(3)),
            ),
            (
                Num::I32(i32::MAX),
                Num::I32(1),
                LongOverflow::Fail,
                Some(Num::I64(i64::from(i32::MAX) + 1)),
            ),
            (Num::I64(i64::MAX), Num::I32(1), LongOverflow::Fail, None),
            (
                Num::I64(i64::MAX),
                Num::I32(1),
                LongOverflow::ToDouble,
                Some(Num::F64(i64::MAX as f64 + 1.0)),
            ),
            (
                Num::I32(1),
                Num::F64(0.5),
                LongOverflow::Fail,
                Some(Num::F64(1.5)),
            ),
        ];
        for (a, b, o, want) in cases {
            assert_eq!(num_add(a, b, o), want, "{a:?} + {b:?}");
        }
        assert_eq!(
            num_mul(Num::I32(65536), Num::I32(65536), LongOverflow::Fail),
            Some(Num::I64(1 << 32))
        );
        assert_eq!(
            num_sub(Num::I32(i32::MIN), Num::I32(1)),
            Num::I64(i64::from(i32::MIN) - 1)
        );
    }

    #[test]
    fn compensated_sums() {
        let mut s = Summer::default();
        for _ in 0..10 {
            s.add(Num::F64(0.1));
        }
        assert_eq!(s.total(), Num::F64(1.0));
        let mut s = Summer::default();
        s.add(Num::I32(i32::MAX));
        s.add(Num::I32(1));
        assert_eq!(s.total(), Num::I64(i64::from(i32::MAX) + 1));
        let mut s = Summer::default();
        s.add(Num::I64(i64::MAX));
        s.add(Num::I64(1));
        assert_eq!(s.total(), Num::F64(i64::MAX as f64 + 1.0));
        let mut s = Summer::default();
        s.add(Num::I32(1));
        s.add(Num::I32(2));
        assert_eq!((s.total(), s.mean()), (Num::I32(3), Some(1.5)));
        assert_eq!(Summer::default().mean(), None);
    }

    #[test]
    fn civil_round_trip() {
        for (days, want) in [
            (0, (1970, 1, 1)),
            (15_452, (2012, 4, 22)),
            (-1, (1969, 12, 31)),
            (11_016, (2000, 2, 29)),
        ] {
            assert_eq!(civil_from_days(days), want);
            assert_eq!(days_from_civil(want.0, want.1, want.2), days);
        }
    }

    #[test]
    fn render_and_truthiness() {
        assert_eq!(
            render_doc(&doc! {"_id": 1, "a": "x", "b": [1.5, null]}),
            "{ _id: 1, a: \"x\", b: [1.5, null] }"
        );
        assert!(!truthy(None));
        assert!(!truthy(Some(&Bson::Double(0.0))));
        assert!(truthy(Some(&Bson::String(String::new()))));
        assert!(truthy(Some(&Bson::Array(vec![]))));
    }
}
