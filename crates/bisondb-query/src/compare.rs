//! BSON comparison and sort order, as mongod defines it ("Comparison/Sort Order").
//!
//! Values are ordered first by a canonical type rank (all numeric types share one
//! rank, as do strings and symbols), then within a rank by value. Numbers of
//! different BSON types compare by mathematical value, exactly for integers and
//! decimals, so `1 == 1.0 == NumberDecimal("1.00")`. The same order is used for
//! owned [`Bson`] and borrowed [`RawBsonRef`] values; both go through the shared
//! scalar helpers here so they can never disagree.

use std::cmp::Ordering;

use bson::raw::{RawArray, RawBsonRef, RawDocument};
use bson::spec::ElementType;
use bson::{Bson, Decimal128, Document};

use crate::collation::Collation;

/// Canonical type rank used for comparison: lower ranks sort first.
///
/// The numbers follow mongod's canonical type values so that gaps stay meaningful
/// (undefined sorts before null, JavaScript types sort after regular expressions).
pub fn type_rank(t: ElementType) -> u8 {
    match t {
        ElementType::MinKey => 0,
        ElementType::Undefined => 1,
        ElementType::Null => 5,
        ElementType::Double | ElementType::Int32 | ElementType::Int64 | ElementType::Decimal128 => {
            10
        }
        ElementType::String | ElementType::Symbol => 15,
        ElementType::EmbeddedDocument => 20,
        ElementType::Array => 25,
        ElementType::Binary => 30,
        ElementType::ObjectId => 35,
        ElementType::Boolean => 40,
        ElementType::DateTime => 45,
        ElementType::Timestamp => 47,
        ElementType::RegularExpression => 50,
        ElementType::DbPointer => 55,
        ElementType::JavaScriptCode => 60,
        ElementType::JavaScriptCodeWithScope => 65,
        ElementType::MaxKey => 127,
    }
}

/// Whether the element type is one of the four numeric BSON types.
pub fn is_numeric_type(t: ElementType) -> bool {
    matches!(
        t,
        ElementType::Double | ElementType::Int32 | ElementType::Int64 | ElementType::Decimal128
    )
}

// ---------------------------------------------------------------------------
// Numbers
// ---------------------------------------------------------------------------

/// A numeric value as an `f64` (a decimal through its string, so the nearest
/// double), `None` for any other type: how index specs, geo coordinates and
/// text weights read numbers given in any of the four numeric types.
pub fn number_as_f64(v: &Bson) -> Option<f64> {
    match v {
        Bson::Int32(i) => Some(f64::from(*i)),
        Bson::Int64(i) => Some(*i as f64),
        Bson::Double(d) => Some(*d),
        Bson::Decimal128(d) => d.to_string().parse().ok(),
        _ => None,
    }
}

/// A number reduced to a form where every BSON numeric type compares exactly
/// (or, for non-integral doubles against decimals, through the shortest
/// decimal string that round-trips the double).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NumKey {
    NaN,
    NegInf,
    /// `negative`, coefficient, base-10 exponent. Zero is always stored as
    /// `(false, 0, 0)` so that `-0 == 0` and `0E+5 == 0`.
    Finite(bool, u128, i32),
    PosInf,
}

const DEC_MAX_COEFF: u128 = 10u128.pow(34) - 1;

impl NumKey {
    fn finite(neg: bool, coeff: u128, exp: i32) -> NumKey {
        if coeff == 0 {
            NumKey::Finite(false, 0, 0)
        } else {
            NumKey::Finite(neg, coeff, exp)
        }
    }

    pub(crate) fn from_i64(v: i64) -> NumKey {
        NumKey::finite(v < 0, u128::from(v.unsigned_abs()), 0)
    }

    pub(crate) fn from_f64(v: f64) -> NumKey {
        if v.is_nan() {
            return NumKey::NaN;
        }
        if v.is_infinite() {
            return if v > 0.0 {
                NumKey::PosInf
            } else {
                NumKey::NegInf
            };
        }
        if v == 0.0 {
            return NumKey::Finite(false, 0, 0);
        }
        let neg = v < 0.0;
        let a = v.abs();
        // Integral doubles below 1e34 are converted exactly so that comparisons with
        // int64 and decimal values stay exact (and therefore transitive).
        if a.fract() == 0.0 && a < 1e34 {
            return NumKey::finite(neg, a as u128, 0);
        }
        // Otherwise use the shortest round-tripping decimal representation.
        let s = format!("{a:e}");
        parse_sci(&s)
            .map(|(c, e)| NumKey::finite(neg, c, e))
            .unwrap_or(NumKey::NaN)
    }

    pub(crate) fn from_decimal(d: Decimal128) -> NumKey {
        let v = u128::from_le_bytes(d.bytes());
        let neg = (v >> 127) & 1 == 1;
        let comb = (v >> 122) & 0x1f;
        if comb == 0x1f {
            return NumKey::NaN;
        }
        if comb == 0x1e {
            return if neg { NumKey::NegInf } else { NumKey::PosInf };
        }
        let (exp_bits, coeff) = if (v >> 125) & 0x3 == 0x3 {
            // Coefficients in this form are at least 2^113 > 10^34 - 1: non-canonical, so zero.
            (((v >> 111) & 0x3fff) as i32, 0u128)
        } else {
            (((v >> 113) & 0x3fff) as i32, v & ((1u128 << 113) - 1))
        };
        let coeff = if coeff > DEC_MAX_COEFF { 0 } else { coeff };
        NumKey::finite(neg, coeff, exp_bits - 6176)
    }

    /// Numeric value of an owned element, if it is a number.
    pub(crate) fn of_bson(v: &Bson) -> Option<NumKey> {
        match *v {
            Bson::Int32(i) => Some(NumKey::from_i64(i64::from(i))),
            Bson::Int64(i) => Some(NumKey::from_i64(i)),
            Bson::Double(d) => Some(NumKey::from_f64(d)),
            Bson::Decimal128(d) => Some(NumKey::from_decimal(d)),
            _ => None,
        }
    }
}

/// Parses `d.ddddde±x` (as produced by `{:e}` on a positive double).
fn parse_sci(s: &str) -> Option<(u128, i32)> {
    let (mant, exp) = s.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let (int_part, frac_part) = mant.split_once('.').unwrap_or((mant, ""));
    let digits = format!("{int_part}{frac_part}");
    let coeff: u128 = digits.parse().ok()?;
    let frac_len = i32::try_from(frac_part.len()).ok()?;
    Some((coeff, exp.checked_sub(frac_len)?))
}

fn digit_count(mut c: u128) -> i32 {
    let mut n = 0;
    while c > 0 {
        c /= 10;
        n += 1;
    }
    n
}

fn pow10(n: u32) -> Option<u128> {
    10u128.checked_pow(n)
}

/// Compares two non-zero magnitudes `c1 * 10^e1` and `c2 * 10^e2`.
fn cmp_magnitude(c1: u128, e1: i32, c2: u128, e2: i32) -> Ordering {
    let m1 = digit_count(c1) + e1;
    let m2 = digit_count(c2) + e2;
    if m1 != m2 {
        return m1.cmp(&m2);
    }
    // Same order of magnitude: align to the smaller exponent. The difference is at
    // most the digit count difference (< 39), and all coefficients have <= 34
    // digits, so the scaled value fits in a u128.
    if e1 >= e2 {
        let shift = u32::try_from(e1 - e2).unwrap_or(u32::MAX);
        match pow10(shift).and_then(|p| c1.checked_mul(p)) {
            Some(s1) => s1.cmp(&c2),
            None => Ordering::Greater,
        }
    } else {
        let shift = u32::try_from(e2 - e1).unwrap_or(u32::MAX);
        match pow10(shift).and_then(|p| c2.checked_mul(p)) {
            Some(s2) => c1.cmp(&s2),
            None => Ordering::Less,
        }
    }
}

/// Total order on numbers: NaN first, then -inf, finite values, +inf.
pub(crate) fn cmp_num(a: NumKey, b: NumKey) -> Ordering {
    use NumKey::*;
    fn class(n: &NumKey) -> u8 {
        match n {
            NaN => 0,
            NegInf => 1,
            Finite(..) => 2,
            PosInf => 3,
        }
    }
    match (a, b) {
        (Finite(n1, c1, e1), Finite(n2, c2, e2)) => {
            let s1 = if c1 == 0 {
                0
            } else if n1 {
                -1
            } else {
                1
            };
            let s2 = if c2 == 0 {
                0
            } else if n2 {
                -1
            } else {
                1
            };
            if s1 != s2 || s1 == 0 {
                return s1.cmp(&s2);
            }
            let mag = cmp_magnitude(c1, e1, c2, e2);
            if s1 < 0 {
                mag.reverse()
            } else {
                mag
            }
        }
        _ => class(&a).cmp(&class(&b)),
    }
}

/// A number as stored, for fast comparisons that avoid building a [`NumKey`]
/// (which formats non-integral doubles) unless a decimal is involved.
#[derive(Debug, Clone, Copy)]
enum NumView {
    Int(i64),
    Double(f64),
    Decimal(Decimal128),
}

impl NumView {
    fn of_raw(v: &RawBsonRef<'_>) -> Option<NumView> {
        match *v {
            RawBsonRef::Int32(i) => Some(NumView::Int(i64::from(i))),
            RawBsonRef::Int64(i) => Some(NumView::Int(i)),
            RawBsonRef::Double(d) => Some(NumView::Double(d)),
            RawBsonRef::Decimal128(d) => Some(NumView::Decimal(d)),
            _ => None,
        }
    }

    fn of_bson(v: &Bson) -> Option<NumView> {
        match *v {
            Bson::Int32(i) => Some(NumView::Int(i64::from(i))),
            Bson::Int64(i) => Some(NumView::Int(i)),
            Bson::Double(d) => Some(NumView::Double(d)),
            Bson::Decimal128(d) => Some(NumView::Decimal(d)),
            _ => None,
        }
    }

    fn key(self) -> NumKey {
        match self {
            NumView::Int(i) => NumKey::from_i64(i),
            NumView::Double(d) => NumKey::from_f64(d),
            NumView::Decimal(d) => NumKey::from_decimal(d),
        }
    }
}

/// Exact comparison of an integer with a double (NaN sorts lowest).
fn cmp_int_double(i: i64, d: f64) -> Ordering {
    if d.is_nan() {
        return Ordering::Greater;
    }
    // 2^63 is exactly representable; i64 covers [-2^63, 2^63).
    let lim = -(i64::MIN as f64);
    if d >= lim {
        return Ordering::Less;
    }
    if d < -lim {
        return Ordering::Greater;
    }
    let t = d.trunc();
    // In range and integral, so the cast is exact.
    match i.cmp(&(t as i64)) {
        Ordering::Equal => {
            let f = d - t;
            if f > 0.0 {
                Ordering::Less
            } else if f < 0.0 {
                Ordering::Greater
            } else {
                Ordering::Equal
            }
        }
        o => o,
    }
}

fn cmp_num_view(a: NumView, b: NumView) -> Ordering {
    match (a, b) {
        (NumView::Int(x), NumView::Int(y)) => x.cmp(&y),
        (NumView::Double(x), NumView::Double(y)) => match (x.is_nan(), y.is_nan()) {
            (true, true) => Ordering::Equal,
            (true, false) => Ordering::Less,
            (false, true) => Ordering::Greater,
            // Neither is NaN, so this is total; -0 == 0.
            (false, false) => x.partial_cmp(&y).unwrap_or(Ordering::Equal),
        },
        (NumView::Int(x), NumView::Double(y)) => cmp_int_double(x, y),
        (NumView::Double(x), NumView::Int(y)) => cmp_int_double(y, x).reverse(),
        _ => cmp_num(a.key(), b.key()),
    }
}

// ---------------------------------------------------------------------------
// Shared scalar helpers
// ---------------------------------------------------------------------------

fn cmp_binary(st1: u8, b1: &[u8], st2: u8, b2: &[u8]) -> Ordering {
    b1.len()
        .cmp(&b2.len())
        .then(st1.cmp(&st2))
        .then_with(|| b1.cmp(b2))
}

fn cmp_timestamp(a: bson::Timestamp, b: bson::Timestamp) -> Ordering {
    (a.time, a.increment).cmp(&(b.time, b.increment))
}

/// Namespace and id bytes of a DBPointer (the fields are private in `bson`, so
/// they are read back from the value's serialized form).
fn dbpointer_parts(p: &bson::DbPointer) -> (Vec<u8>, Vec<u8>) {
    let mut d = Document::new();
    d.insert("x", Bson::DbPointer(p.clone()));
    let bytes = bson::RawDocumentBuf::try_from(&d)
        .map(|b| b.into_bytes())
        .unwrap_or_default();
    // Layout: i32 doc len, type byte, "x\0", i32 string len, ns bytes + \0, 12-byte oid, \0.
    let body = bytes.get(7..).unwrap_or_default();
    let ns_len = body
        .get(0..4)
        .and_then(|s| <[u8; 4]>::try_from(s).ok())
        .map(|s| i32::from_le_bytes(s).max(1) as usize)
        .unwrap_or(1);
    let ns = body.get(4..4 + ns_len - 1).unwrap_or_default().to_vec();
    let oid = body
        .get(4 + ns_len..4 + ns_len + 12)
        .unwrap_or_default()
        .to_vec();
    (ns, oid)
}

fn cmp_dbpointer(a: &bson::DbPointer, b: &bson::DbPointer) -> Ordering {
    let (ns1, id1) = dbpointer_parts(a);
    let (ns2, id2) = dbpointer_parts(b);
    ns1.len()
        .cmp(&ns2.len())
        .then_with(|| ns1.cmp(&ns2))
        .then_with(|| id1.cmp(&id2))
}

fn raw_dbpointer(v: &RawBsonRef<'_>) -> Option<bson::DbPointer> {
    match Bson::try_from(*v) {
        Ok(Bson::DbPointer(p)) => Some(p),
        _ => None,
    }
}

// ---------------------------------------------------------------------------
// Raw comparison
// ---------------------------------------------------------------------------

/// Regexes order by pattern, then options, bytewise (raw and owned alike).
fn cmp_regex(x: (&str, &str), y: (&str, &str)) -> Ordering {
    x.0.as_bytes()
        .cmp(y.0.as_bytes())
        .then_with(|| x.1.as_bytes().cmp(y.1.as_bytes()))
}

/// Compares two strings: bytewise under the simple collation, else with `c`.
#[inline]
pub fn cmp_str(a: &str, b: &str, c: Option<&Collation>) -> Ordering {
    match c {
        None => a.as_bytes().cmp(b.as_bytes()),
        Some(c) => c.compare_str(a, b),
    }
}

/// Compares two raw values in MongoDB's total comparison/sort order.
#[inline]
pub fn compare_raw(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    compare_raw_in(a, b, None)
}

/// Compares documents field by field: type rank, then field name, then value;
/// a document that is a prefix of the other sorts first.
#[inline]
pub fn compare_raw_docs(a: &RawDocument, b: &RawDocument) -> Ordering {
    compare_raw_docs_in(a, b, None)
}

/// Compares arrays element by element; a prefix sorts first.
#[inline]
pub fn compare_raw_arrays(a: &RawArray, b: &RawArray) -> Ordering {
    compare_raw_arrays_in(a, b, None)
}

/// Compares two owned values in MongoDB's total comparison/sort order; agrees
/// with [`compare_raw`] on the serialized forms.
#[inline]
pub fn compare_bson(a: &Bson, b: &Bson) -> Ordering {
    compare_bson_in(a, b, None)
}

/// Owned counterpart of [`compare_raw_docs`].
#[inline]
pub fn compare_docs(a: &Document, b: &Document) -> Ordering {
    compare_docs_in(a, b, None)
}

/// Owned counterpart of [`compare_raw_arrays`].
#[inline]
pub fn compare_arrays(a: &[Bson], b: &[Bson]) -> Ordering {
    compare_arrays_in(a, b, None)
}

/// Compares a raw value with an owned one without converting the raw value
/// unless it is a container.
#[inline]
pub fn compare_raw_bson(a: RawBsonRef<'_>, b: &Bson) -> Ordering {
    compare_raw_bson_in(a, b, None)
}

/// Owned equality under a collation (see [`values_equal_bson`]).
pub fn values_equal_bson_in(a: &Bson, b: &Bson, c: Option<&Collation>) -> bool {
    compare_bson_in(a, b, c) == Ordering::Equal
}

/// Whether a value contains a string or symbol anywhere (the only values a
/// collation can compare differently).
pub fn has_string(v: &Bson) -> bool {
    match v {
        Bson::String(_) | Bson::Symbol(_) => true,
        Bson::Array(a) => a.iter().any(has_string),
        Bson::Document(d) => d.values().any(has_string),
        _ => false,
    }
}

// Collation-aware forms: `c` is `None` for the simple collation. Strings and
// symbols compare with the collation at any depth; everything else as above.

/// [`compare_raw`] under a collation.
pub fn compare_raw_in(a: RawBsonRef<'_>, b: RawBsonRef<'_>, c: Option<&Collation>) -> Ordering {
    let ra = type_rank(a.element_type());
    let rb = type_rank(b.element_type());
    if ra != rb {
        return ra.cmp(&rb);
    }
    use RawBsonRef as R;
    match (a, b) {
        (R::String(x) | R::Symbol(x), R::String(y) | R::Symbol(y)) => cmp_str(x, y, c),
        (R::Document(x), R::Document(y)) => compare_raw_docs_in(x, y, c),
        (R::Array(x), R::Array(y)) => compare_raw_arrays_in(x, y, c),
        (R::Binary(x), R::Binary(y)) => {
            cmp_binary(u8::from(x.subtype), x.bytes, u8::from(y.subtype), y.bytes)
        }
        (R::ObjectId(x), R::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (R::Boolean(x), R::Boolean(y)) => x.cmp(&y),
        (R::DateTime(x), R::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (R::Timestamp(x), R::Timestamp(y)) => cmp_timestamp(x, y),
        (R::RegularExpression(x), R::RegularExpression(y)) => cmp_regex(
            (x.pattern.as_str(), x.options.as_str()),
            (y.pattern.as_str(), y.options.as_str()),
        ),
        (R::JavaScriptCode(x), R::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (R::JavaScriptCodeWithScope(x), R::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_raw_docs_in(x.scope, y.scope, c)),
        (R::DbPointer(_), R::DbPointer(_)) => match (raw_dbpointer(&a), raw_dbpointer(&b)) {
            (Some(x), Some(y)) => cmp_dbpointer(&x, &y),
            _ => Ordering::Equal,
        },
        _ => match (NumView::of_raw(&a), NumView::of_raw(&b)) {
            (Some(x), Some(y)) => cmp_num_view(x, y),
            // MinKey, MaxKey, Null, Undefined: one value per rank.
            _ => Ordering::Equal,
        },
    }
}

/// Compares documents field by field: type rank, then field name, then value;
/// a document that is a prefix of the other sorts first.
pub fn compare_raw_docs_in(a: &RawDocument, b: &RawDocument, c: Option<&Collation>) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        // A malformed element ends iteration: documents reaching here were
        // validated on the way in, and a total order must not panic.
        let ea = ia.next().and_then(Result::ok);
        let eb = ib.next().and_then(Result::ok);
        match (ea, eb) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = type_rank(va.element_type())
                    .cmp(&type_rank(vb.element_type()))
                    .then_with(|| ka.as_str().as_bytes().cmp(kb.as_str().as_bytes()))
                    .then_with(|| compare_raw_in(va, vb, c));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// Compares arrays element by element; a prefix sorts first.
pub fn compare_raw_arrays_in(a: &RawArray, b: &RawArray, c: Option<&Collation>) -> Ordering {
    let mut ia = a.into_iter();
    let mut ib = b.into_iter();
    loop {
        match (
            ia.next().and_then(Result::ok),
            ib.next().and_then(Result::ok),
        ) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some(va), Some(vb)) => {
                let o = compare_raw_in(va, vb, c);
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Owned comparison
// ---------------------------------------------------------------------------

/// Compares two owned values in MongoDB's total comparison/sort order; agrees
/// with [`compare_raw`] on the serialized forms.
pub fn compare_bson_in(a: &Bson, b: &Bson, c: Option<&Collation>) -> Ordering {
    let ra = type_rank(a.element_type());
    let rb = type_rank(b.element_type());
    if ra != rb {
        return ra.cmp(&rb);
    }
    use Bson as B;
    match (a, b) {
        (B::String(x) | B::Symbol(x), B::String(y) | B::Symbol(y)) => cmp_str(x, y, c),
        (B::Document(x), B::Document(y)) => compare_docs_in(x, y, c),
        (B::Array(x), B::Array(y)) => compare_arrays_in(x, y, c),
        (B::Binary(x), B::Binary(y)) => {
            cmp_binary(u8::from(x.subtype), &x.bytes, u8::from(y.subtype), &y.bytes)
        }
        (B::ObjectId(x), B::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (B::Boolean(x), B::Boolean(y)) => x.cmp(y),
        (B::DateTime(x), B::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (B::Timestamp(x), B::Timestamp(y)) => cmp_timestamp(*x, *y),
        (B::RegularExpression(x), B::RegularExpression(y)) => cmp_regex(
            (x.pattern.as_str(), x.options.as_str()),
            (y.pattern.as_str(), y.options.as_str()),
        ),
        (B::JavaScriptCode(x), B::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (B::JavaScriptCodeWithScope(x), B::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| compare_docs_in(&x.scope, &y.scope, c)),
        (B::DbPointer(x), B::DbPointer(y)) => cmp_dbpointer(x, y),
        _ => match (NumView::of_bson(a), NumView::of_bson(b)) {
            (Some(x), Some(y)) => cmp_num_view(x, y),
            _ => Ordering::Equal,
        },
    }
}

/// Owned counterpart of [`compare_raw_docs`].
pub fn compare_docs_in(a: &Document, b: &Document, c: Option<&Collation>) -> Ordering {
    let mut ia = a.iter();
    let mut ib = b.iter();
    loop {
        match (ia.next(), ib.next()) {
            (None, None) => return Ordering::Equal,
            (None, Some(_)) => return Ordering::Less,
            (Some(_), None) => return Ordering::Greater,
            (Some((ka, va)), Some((kb, vb))) => {
                let o = type_rank(va.element_type())
                    .cmp(&type_rank(vb.element_type()))
                    .then_with(|| ka.as_bytes().cmp(kb.as_bytes()))
                    .then_with(|| compare_bson_in(va, vb, c));
                if o != Ordering::Equal {
                    return o;
                }
            }
        }
    }
}

/// Owned counterpart of [`compare_raw_arrays`].
pub fn compare_arrays_in(a: &[Bson], b: &[Bson], c: Option<&Collation>) -> Ordering {
    for (x, y) in a.iter().zip(b.iter()) {
        let o = compare_bson_in(x, y, c);
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

/// Equality in the query sense: same canonical type rank and equal value
/// (`1 == 1.0`, `"a"` equals symbol `"a"`).
pub fn values_equal_raw(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> bool {
    compare_raw(a, b) == Ordering::Equal
}

/// Owned counterpart of [`values_equal_raw`].
pub fn values_equal_bson(a: &Bson, b: &Bson) -> bool {
    compare_bson(a, b) == Ordering::Equal
}

/// Compares a raw value with an owned one without converting the raw value
/// unless it is a container.
pub fn compare_raw_bson_in(a: RawBsonRef<'_>, b: &Bson, c: Option<&Collation>) -> Ordering {
    let ra = type_rank(a.element_type());
    let rb = type_rank(b.element_type());
    if ra != rb {
        return ra.cmp(&rb);
    }
    if let (Some(x), Some(y)) = (NumView::of_raw(&a), NumView::of_bson(b)) {
        return cmp_num_view(x, y);
    }
    match (a, b) {
        (RawBsonRef::String(x) | RawBsonRef::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => {
            cmp_str(x, y, c)
        }
        (RawBsonRef::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (RawBsonRef::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (RawBsonRef::DateTime(x), Bson::DateTime(y)) => {
            x.timestamp_millis().cmp(&y.timestamp_millis())
        }
        (RawBsonRef::Null, _)
        | (RawBsonRef::Undefined, _)
        | (RawBsonRef::MinKey, _)
        | (RawBsonRef::MaxKey, _) => Ordering::Equal,
        _ => match Bson::try_from(a) {
            Ok(owned) => compare_bson_in(&owned, b, c),
            Err(_) => Ordering::Less,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::oid::ObjectId;
    use bson::spec::BinarySubtype;
    use bson::{doc, Binary, DateTime, Regex, Timestamp};
    use proptest::prelude::*;
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    /// Decimals with 32 to 34 significant digits are canonical and must
    /// compare by value (the largest coefficient is 10^34 - 1).
    #[test]
    fn decimals_with_34_digits_compare_by_value() {
        let big = dec("1234567890123456789012345678901234");
        assert_eq!(cmp_both(&big, &dec("1")), Ordering::Greater);
        assert_eq!(cmp_both(&big, &Bson::Int64(i64::MAX)), Ordering::Greater);
        let max = dec("9999999999999999999999999999999999");
        assert_eq!(cmp_both(&max, &big), Ordering::Greater);
        assert_eq!(
            cmp_both(&dec("-9999999999999999999999999999999999"), &dec("0")),
            Ordering::Less
        );
        assert_eq!(
            cmp_both(
                &dec("12345678901234567890123456789012.34"),
                &dec("12345678901234567890123456789012.33")
            ),
            Ordering::Greater
        );
    }

    fn re(p: &str, o: &str) -> Regex {
        Regex {
            pattern: bson::raw::CString::try_from(p).unwrap(),
            options: bson::raw::CString::try_from(o).unwrap(),
        }
    }

    fn raw_of(v: &Bson) -> bson::RawDocumentBuf {
        bson::RawDocumentBuf::try_from(&doc! {"v": v.clone()}).unwrap()
    }

    fn cmp_both(a: &Bson, b: &Bson) -> Ordering {
        let o = compare_bson(a, b);
        let ra = raw_of(a);
        let rb = raw_of(b);
        let r = compare_raw(ra.get("v").unwrap().unwrap(), rb.get("v").unwrap().unwrap());
        assert_eq!(o, r, "bson/raw disagree on {a:?} vs {b:?}");
        let m = compare_raw_bson(ra.get("v").unwrap().unwrap(), b);
        assert_eq!(o, m, "raw/bson mixed disagree on {a:?} vs {b:?}");
        o
    }

    /// One value per type bracket, in ascending canonical order.
    fn type_ladder() -> Vec<Bson> {
        vec![
            Bson::MinKey,
            Bson::Undefined,
            Bson::Null,
            Bson::Int32(5),
            Bson::String("a".into()),
            Bson::Document(doc! {"a": 1}),
            Bson::Array(vec![Bson::Int32(1)]),
            Bson::Binary(Binary {
                subtype: BinarySubtype::Generic,
                bytes: vec![1],
            }),
            Bson::ObjectId(ObjectId::from_bytes([1; 12])),
            Bson::Boolean(false),
            Bson::DateTime(DateTime::from_millis(0)),
            Bson::Timestamp(Timestamp {
                time: 1,
                increment: 1,
            }),
            Bson::RegularExpression(re("a", "")),
            Bson::JavaScriptCode("x".into()),
            Bson::MaxKey,
        ]
    }

    #[test]
    fn type_order_ladder() {
        let l = type_ladder();
        for (i, a) in l.iter().enumerate() {
            for (j, b) in l.iter().enumerate() {
                assert_eq!(cmp_both(a, b), i.cmp(&j), "{a:?} vs {b:?}");
            }
        }
    }

    #[test]
    fn numeric_table() {
        use Ordering::*;
        let cases: Vec<(Bson, Bson, Ordering)> = vec![
            (Bson::Int32(1), Bson::Double(1.0), Equal),
            (Bson::Int32(1), Bson::Int64(1), Equal),
            (Bson::Int32(1), dec("1.00"), Equal),
            (Bson::Double(-0.0), Bson::Int32(0), Equal),
            (dec("-0"), Bson::Double(0.0), Equal),
            (
                Bson::Double(f64::NAN),
                Bson::Double(f64::NEG_INFINITY),
                Less,
            ),
            (Bson::Double(f64::NAN), dec("NaN"), Equal),
            (Bson::Double(f64::INFINITY), dec("Infinity"), Equal),
            (dec("-Infinity"), Bson::Int64(i64::MIN), Less),
            (
                Bson::Int64(9_007_199_254_740_993),
                Bson::Double(9_007_199_254_740_992.0),
                Greater,
            ),
            (
                Bson::Int64(i64::MAX),
                Bson::Double(9_223_372_036_854_775_808.0),
                Less,
            ),
            (Bson::Double(0.1), dec("0.1"), Equal),
            (Bson::Double(0.5), dec("0.49999"), Greater),
            (dec("1.5"), Bson::Int32(2), Less),
            (dec("-1.5"), Bson::Int32(-2), Greater),
            (dec("1E+40"), Bson::Double(1e39), Greater),
            (
                dec("1152921504606846976"),
                Bson::Double(1_152_921_504_606_846_976.0),
                Equal,
            ),
            (Bson::Double(2.5), Bson::Int32(2), Greater),
            (Bson::Double(-2.5), Bson::Int32(-2), Less),
            (Bson::Double(1e300), Bson::Int64(i64::MAX), Greater),
        ];
        for (a, b, want) in cases {
            assert_eq!(cmp_both(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(cmp_both(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn within_type_table() {
        use Ordering::*;
        let bin = |st: u8, b: &[u8]| {
            Bson::Binary(Binary {
                subtype: BinarySubtype::from(st),
                bytes: b.to_vec(),
            })
        };
        let cases: Vec<(Bson, Bson, Ordering)> = vec![
            (Bson::String("a".into()), Bson::String("b".into()), Less),
            (Bson::String("ab".into()), Bson::String("a".into()), Greater),
            (Bson::String("B".into()), Bson::String("a".into()), Less),
            (Bson::Symbol("a".into()), Bson::String("a".into()), Equal),
            (bin(0, &[9]), bin(0, &[1, 1]), Less),
            (bin(5, &[1]), bin(0, &[9]), Greater),
            (bin(0, &[1]), bin(0, &[2]), Less),
            (Bson::Boolean(false), Bson::Boolean(true), Less),
            (
                Bson::DateTime(DateTime::from_millis(-5)),
                Bson::DateTime(DateTime::from_millis(3)),
                Less,
            ),
            (
                Bson::Timestamp(Timestamp {
                    time: 2,
                    increment: 0,
                }),
                Bson::Timestamp(Timestamp {
                    time: 1,
                    increment: 9,
                }),
                Greater,
            ),
            (Bson::Null, Bson::Null, Equal),
            (
                Bson::Document(doc! {"a": 1}),
                Bson::Document(doc! {"a": 1, "b": 1}),
                Less,
            ),
            (
                Bson::Document(doc! {"a": 2}),
                Bson::Document(doc! {"b": 1}),
                Less,
            ),
            // Type rank of the field beats the field name.
            (
                Bson::Document(doc! {"b": 1}),
                Bson::Document(doc! {"a": "x"}),
                Less,
            ),
            (
                Bson::Document(doc! {"a": 1.0}),
                Bson::Document(doc! {"a": 1}),
                Equal,
            ),
            (
                Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
                Bson::Array(vec![Bson::Int32(1)]),
                Greater,
            ),
            (Bson::Array(vec![]), Bson::Array(vec![Bson::Null]), Less),
            (
                Bson::RegularExpression(re("a", "i")),
                Bson::RegularExpression(re("a", "")),
                Greater,
            ),
        ];
        for (a, b, want) in cases {
            assert_eq!(cmp_both(&a, &b), want, "{a:?} vs {b:?}");
            assert_eq!(cmp_both(&b, &a), want.reverse(), "{b:?} vs {a:?}");
        }
    }

    #[test]
    fn equality_helpers() {
        assert!(values_equal_bson(&Bson::Int32(1), &Bson::Double(1.0)));
        assert!(!values_equal_bson(
            &Bson::Int32(1),
            &Bson::String("1".into())
        ));
        let r = raw_of(&Bson::Int64(7));
        let s = raw_of(&dec("7.0"));
        assert!(values_equal_raw(
            r.get("v").unwrap().unwrap(),
            s.get("v").unwrap().unwrap()
        ));
    }

    fn arb_scalar() -> impl Strategy<Value = Bson> {
        prop_oneof![
            Just(Bson::Null),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
            Just(Bson::Undefined),
            any::<i32>().prop_map(Bson::Int32),
            (-5i64..5).prop_map(Bson::Int64),
            any::<i64>().prop_map(Bson::Int64),
            any::<f64>().prop_map(Bson::Double),
            (-4i32..4).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
            (-50i64..50, -3i32..3).prop_map(|(c, e)| dec(&format!("{c}E{e}"))),
            prop_oneof![Just("NaN"), Just("Infinity"), Just("-Infinity"), Just("-0")].prop_map(dec),
            "[a-c]{0,3}".prop_map(Bson::String),
            "[a-c]{0,2}".prop_map(Bson::Symbol),
            any::<bool>().prop_map(Bson::Boolean),
            (-3i64..3).prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
            (0u8..3, prop::collection::vec(0u8..3, 0..3)).prop_map(|(s, b)| Bson::Binary(Binary {
                subtype: BinarySubtype::from(s),
                bytes: b
            })),
            (0u8..3).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
        ]
    }

    fn arb_bson() -> impl Strategy<Value = Bson> {
        arb_scalar().prop_recursive(2, 8, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                prop::collection::vec(("[ab]", inner), 0..3).prop_map(|kv| {
                    let mut d = Document::new();
                    for (k, v) in kv {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
            ]
        })
    }

    fn arb_num_view() -> impl Strategy<Value = NumView> {
        prop_oneof![
            any::<i64>().prop_map(NumView::Int),
            (-10i64..10).prop_map(NumView::Int),
            any::<f64>().prop_map(NumView::Double),
            (-40i32..40).prop_map(|i| NumView::Double(f64::from(i) / 4.0)),
            prop_oneof![
                Just(f64::NAN),
                Just(-0.0),
                Just(9_223_372_036_854_775_808.0),
                Just(-9_223_372_036_854_775_808.0),
                Just(f64::INFINITY),
            ]
            .prop_map(NumView::Double),
        ]
    }

    proptest! {
        #[test]
        fn fast_numeric_paths_agree_with_exact_keys(a in arb_num_view(), b in arb_num_view()) {
            prop_assert_eq!(cmp_num_view(a, b), cmp_num(a.key(), b.key()), "{:?} vs {:?}", a, b);
        }

        #[test]
        fn raw_and_owned_agree(a in arb_bson(), b in arb_bson()) {
            let o = cmp_both(&a, &b);
            prop_assert_eq!(o, cmp_both(&b, &a).reverse());
        }

        #[test]
        fn total_order(a in arb_bson(), b in arb_bson(), c in arb_bson()) {
            let ab = cmp_both(&a, &b);
            let bc = cmp_both(&b, &c);
            let ac = cmp_both(&a, &c);
            prop_assert_eq!(cmp_both(&a, &a), Ordering::Equal);
            if ab != Ordering::Greater && bc != Ordering::Greater {
                prop_assert_ne!(ac, Ordering::Greater, "{:?} <= {:?} <= {:?}", a, b, c);
            }
            if ab == Ordering::Equal && bc == Ordering::Equal {
                prop_assert_eq!(ac, Ordering::Equal);
            }
        }
    }
}
