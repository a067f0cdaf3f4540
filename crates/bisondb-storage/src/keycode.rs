//! Order-preserving encoding of BSON values: comparing two encodings as bytes
//! gives MongoDB's BSON comparison order, and values that compare equal encode
//! identically (so `1`, `NumberLong(1)` and `1.0` are one `_id`).
//!
//! Layout: one type byte per value, from mongod's canonical type order
//! (MinKey < Undefined < Null < numbers < strings/symbols < objects < arrays <
//! BinData < ObjectId < bool < Date < Timestamp < Regex < DBPointer < Code <
//! CodeWithScope < MaxKey), then a self-delimiting body, so values can be
//! concatenated inside documents, arrays and compound index keys.
//!
//! Numbers of every type share one body that places the value exactly on the
//! binary number line: class (NaN < negative < zero < positive), binary exponent,
//! then up to 128 fraction bits plus a "sticky" bit meaning "strictly more than
//! that". Every int32, int64 and double is exact in that form, so mixed
//! comparisons (e.g. int64 above 2^53 against doubles) are exact. Decimal128
//! values are placed exactly too: a decimal that equals a double or an int64
//! encodes identically to it; any other decimal falls strictly between the
//! neighbouring binary values, and two distinct decimals always differ within
//! the first 128 fraction bits (34 digits need < 113 bits), so the sticky bit
//! never merges distinct decimals. The only departure from mongod is that mongod
//! compares doubles with decimals after rounding the double to 34 digits; this
//! encoding compares the exact values, which can differ from mongod only for a
//! double and a decimal within ~1e-34 relative of each other.

use bson::raw::{RawArray, RawDocument};
use bson::{Decimal128, RawBsonRef};

use crate::bignum::Big;

/// Type bytes, in mongod's canonical type order. Zero is reserved as the
/// end-of-document/array terminator, so every type byte must be greater.
pub(crate) mod tag {
    pub const MIN_KEY: u8 = 0x01;
    pub const UNDEFINED: u8 = 0x02;
    pub const NULL: u8 = 0x07;
    pub const NUMBER: u8 = 0x0C;
    pub const STRING: u8 = 0x11;
    pub const OBJECT: u8 = 0x16;
    pub const ARRAY: u8 = 0x1B;
    pub const BINARY: u8 = 0x20;
    pub const OBJECT_ID: u8 = 0x25;
    pub const BOOLEAN: u8 = 0x2A;
    pub const DATE: u8 = 0x2F;
    pub const TIMESTAMP: u8 = 0x31;
    pub const REGEX: u8 = 0x34;
    pub const DB_POINTER: u8 = 0x39;
    pub const CODE: u8 = 0x3E;
    pub const CODE_WITH_SCOPE: u8 = 0x43;
    pub const MAX_KEY: u8 = 0x81;
}

/// Number classes, ordered.
mod class {
    pub const NAN: u8 = 0x10;
    pub const NEGATIVE: u8 = 0x20;
    pub const ZERO: u8 = 0x30;
    pub const POSITIVE: u8 = 0x40;
}

/// Ends a document or array; below every type byte.
const END: u8 = 0x00;

/// The key a hashed index (`{a: "hashed"}`) stores for `v`: xxh64 with seed 0
/// of `v`'s [`encode_value`] bytes, as a signed 64-bit integer. Values that
/// compare equal encode identically (1, 1.0 and NumberLong(1) alike), so they
/// hash alike. The hash is persisted in index entries, so neither this
/// function nor the encoding under it may ever change (xxh64 is fixed by its
/// specification, unlike std's `DefaultHasher`). The values differ from
/// mongod's (an MD5 of its own encoding); they only show in explain bounds.
pub fn hashed_key(v: RawBsonRef<'_>) -> i64 {
    let mut buf = Vec::with_capacity(32);
    encode_value(v, &mut buf);
    i64::from_be_bytes(xxhash_rust::xxh64::xxh64(&buf, 0).to_be_bytes())
}

/// Appends the order-preserving encoding of `v` to `out`.
///
/// Malformed nested BSON (which validated documents never contain) ends the
/// enclosing document or array at the bad element instead of failing.
pub fn encode_value(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    out.push(type_tag(v));
    encode_body(v, out);
}

/// The key of a document with this `_id` inside its collection.
pub fn encode_id(id: RawBsonRef<'_>) -> Vec<u8> {
    let mut out = Vec::with_capacity(16);
    encode_value(id, &mut out);
    out
}

/// The type byte of `v` (shared by all numeric types and by string/symbol).
fn type_tag(v: RawBsonRef<'_>) -> u8 {
    match v {
        RawBsonRef::MinKey => tag::MIN_KEY,
        RawBsonRef::Undefined => tag::UNDEFINED,
        RawBsonRef::Null => tag::NULL,
        RawBsonRef::Double(_)
        | RawBsonRef::Int32(_)
        | RawBsonRef::Int64(_)
        | RawBsonRef::Decimal128(_) => tag::NUMBER,
        RawBsonRef::String(_) | RawBsonRef::Symbol(_) => tag::STRING,
        RawBsonRef::Document(_) => tag::OBJECT,
        RawBsonRef::Array(_) => tag::ARRAY,
        RawBsonRef::Binary(_) => tag::BINARY,
        RawBsonRef::ObjectId(_) => tag::OBJECT_ID,
        RawBsonRef::Boolean(_) => tag::BOOLEAN,
        RawBsonRef::DateTime(_) => tag::DATE,
        RawBsonRef::Timestamp(_) => tag::TIMESTAMP,
        RawBsonRef::RegularExpression(_) => tag::REGEX,
        RawBsonRef::DbPointer(_) => tag::DB_POINTER,
        RawBsonRef::JavaScriptCode(_) => tag::CODE,
        RawBsonRef::JavaScriptCodeWithScope(_) => tag::CODE_WITH_SCOPE,
        RawBsonRef::MaxKey => tag::MAX_KEY,
    }
}

fn encode_body(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    match v {
        RawBsonRef::MinKey | RawBsonRef::MaxKey | RawBsonRef::Null | RawBsonRef::Undefined => {}
        RawBsonRef::Int32(i) => encode_number(&Number::from_int(i64::from(i)), out),
        RawBsonRef::Int64(i) => encode_number(&Number::from_int(i), out),
        RawBsonRef::Double(d) => encode_number(&Number::from_f64(d), out),
        RawBsonRef::Decimal128(d) => encode_number(&Number::from_decimal(d), out),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) | RawBsonRef::JavaScriptCode(s) => {
            encode_bytes(s.as_bytes(), out)
        }
        RawBsonRef::Document(d) => encode_document(d, out),
        RawBsonRef::Array(a) => encode_array(a, out),
        RawBsonRef::Binary(b) => {
            // mongod orders BinData by length, then subtype, then bytes; the fixed
            // width length makes the body self-delimiting too.
            let len = u32::try_from(b.bytes.len()).unwrap_or(u32::MAX);
            out.extend_from_slice(&len.to_be_bytes());
            out.push(u8::from(b.subtype));
            out.extend_from_slice(b.bytes);
        }
        RawBsonRef::ObjectId(o) => out.extend_from_slice(&o.bytes()),
        RawBsonRef::Boolean(b) => out.push(u8::from(b)),
        RawBsonRef::DateTime(d) => {
            out.extend_from_slice(&flip_sign(d.timestamp_millis()).to_be_bytes())
        }
        RawBsonRef::Timestamp(t) => {
            out.extend_from_slice(&t.time.to_be_bytes());
            out.extend_from_slice(&t.increment.to_be_bytes());
        }
        RawBsonRef::RegularExpression(r) => {
            // Neither part can contain NUL (both are C strings).
            out.extend_from_slice(r.pattern.as_str().as_bytes());
            out.push(0);
            out.extend_from_slice(r.options.as_str().as_bytes());
            out.push(0);
        }
        RawBsonRef::DbPointer(_) => encode_db_pointer(v, out),
        RawBsonRef::JavaScriptCodeWithScope(c) => {
            encode_bytes(c.code.as_bytes(), out);
            encode_document(c.scope, out);
        }
    }
}

/// Maps i64 order onto u64 order.
fn flip_sign(v: i64) -> u64 {
    (v as u64) ^ (1 << 63)
}

/// Byte strings: `0x00` escaped as `00 FF`, terminated by `00 00`, so a proper
/// prefix sorts first and embedded NULs keep their order.
fn encode_bytes(bytes: &[u8], out: &mut Vec<u8>) {
    out.reserve(bytes.len() + 2);
    for &b in bytes {
        out.push(b);
        if b == 0 {
            out.push(0xFF);
        }
    }
    out.extend_from_slice(&[0, 0]);
}

/// Field by field: type, name, value (mongod's element comparison order).
fn encode_document(d: &RawDocument, out: &mut Vec<u8>) {
    for item in d.iter() {
        let Ok((name, value)) = item else { break };
        out.push(type_tag(value));
        out.extend_from_slice(name.as_str().as_bytes());
        out.push(0);
        encode_body(value, out);
    }
    out.push(END);
}

/// Element by element; array field names are positions, so they carry no order.
fn encode_array(a: &RawArray, out: &mut Vec<u8>) {
    for item in a {
        let Ok(value) = item else { break };
        encode_value(value, out);
    }
    out.push(END);
}

/// mongod orders DBPointers by the size of their BSON value, then its bytes
/// (namespace, then ObjectId). bson keeps the parts private, so read them back
/// from the value's own BSON encoding.
fn encode_db_pointer(v: RawBsonRef<'_>, out: &mut Vec<u8>) {
    let mut holder = bson::RawDocumentBuf::new();
    holder.append(bson::raw::cstr!(""), v);
    let bytes = holder.as_bytes();
    // document length (4), type byte (1), empty key terminator (1), then the value
    // up to the document's trailing NUL.
    let value = bytes
        .get(6..bytes.len().saturating_sub(1))
        .unwrap_or_default();
    let size = u32::try_from(value.len()).unwrap_or(u32::MAX);
    out.extend_from_slice(&size.to_be_bytes());
    out.extend_from_slice(value);
}

/// A number placed exactly on the binary number line.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Number {
    NaN,
    Zero,
    Infinite { negative: bool },
    Finite(Finite),
}

/// `±2^exp × (1.frac…)` where the fraction is 128 bits, then `sticky` = "more
/// non-zero bits follow".
#[derive(Debug, Clone, PartialEq, Eq)]
struct Finite {
    negative: bool,
    exp: i32,
    frac: u128,
    sticky: bool,
}

impl Number {
    fn from_int(i: i64) -> Number {
        if i == 0 {
            return Number::Zero;
        }
        Number::Finite(Finite::from_u128(i < 0, u128::from(i.unsigned_abs()), 0))
    }

    fn from_f64(d: f64) -> Number {
        if d.is_nan() {
            return Number::NaN;
        }
        if d == 0.0 {
            return Number::Zero;
        }
        if d.is_infinite() {
            return Number::Infinite { negative: d < 0.0 };
        }
        let bits = d.to_bits();
        let biased = ((bits >> 52) & 0x7FF) as i32;
        let mantissa = bits & ((1u64 << 52) - 1);
        let (m, e) = if biased == 0 {
            (mantissa, -1074)
        } else {
            (mantissa | (1 << 52), biased - 1075)
        };
        Number::Finite(Finite::from_u128(d < 0.0, u128::from(m), e))
    }

    /// IEEE 754-2008 BID decoding (the encoding BSON uses), then exact placement.
    fn from_decimal(d: Decimal128) -> Number {
        let bits = u128::from_le_bytes(d.bytes());
        let negative = bits >> 127 == 1;
        let combination = (bits >> 122) & 0x1F;
        if combination == 0x1F {
            return Number::NaN;
        }
        if combination == 0x1E {
            return Number::Infinite { negative };
        }
        if (bits >> 125) & 0b11 == 0b11 {
            // The "large coefficient" form always exceeds 10^34 - 1: non-canonical,
            // which the standard defines as zero.
            return Number::Zero;
        }
        let biased_exp = ((bits >> 113) & 0x3FFF) as i32;
        let mut coefficient = bits & ((1u128 << 113) - 1);
        if coefficient == 0 || coefficient > MAX_DECIMAL_COEFFICIENT {
            return Number::Zero;
        }
        let mut q = biased_exp - 6176;
        // Trailing zeros only change the representation (1.0 vs 1), not the value.
        while q < 0 && coefficient.is_multiple_of(10) {
            coefficient /= 10;
            q += 1;
        }
        if q >= 0 {
            // c × 10^q = (c × 5^q) × 2^q
            let mut m = Big::from_u128(coefficient);
            m.mul_pow5(q.unsigned_abs());
            return Number::Finite(Finite::from_big(negative, &m, i64::from(q), false));
        }
        let k = q.unsigned_abs();
        // c / 10^k = (c / 5^k) × 2^-k; exact when 5^k divides c.
        if let Some(p) = 5u128.checked_pow(k) {
            if coefficient.is_multiple_of(p) {
                return Number::Finite(Finite::from_u128(negative, coefficient / p, -(k as i32)));
            }
        }
        Number::Finite(divide_by_pow5(negative, coefficient, k))
    }
}

/// 10^34 - 1, the largest canonical Decimal128 coefficient.
const MAX_DECIMAL_COEFFICIENT: u128 = 9_999_999_999_999_999_999_999_999_999_999_999;

/// Places `c × 2^-k / 5^k` (not exactly dyadic) by long division to 130+ bits.
fn divide_by_pow5(negative: bool, c: u128, k: u32) -> Finite {
    let d = Big::pow5(k);
    let n_bits = u64::from(128 - c.leading_zeros());
    // Scale the numerator by 2^t so the quotient has at least 130 bits.
    let t = d.bit_len() + 131 - n_bits;
    // Bits of N·2^t above the lowest 132 form a value below d (it has fewer bits),
    // so the quotient's high bits are zero and the remainder starts as that prefix.
    let mut r = if t >= 132 {
        Big::from_u128(c).shl(t - 132)
    } else {
        Big::from_u128(c >> (132 - t))
    };
    let mut q = Big::from_u128(0);
    for i in (0..132u64).rev() {
        // bit i of N·2^t is bit (i - t) of N.
        let bit = i >= t && (c >> (i - t)) & 1 == 1;
        r.shl1_or(bit);
        let take = r >= d;
        if take {
            r.sub_assign(&d);
        }
        q.shl1_or(take);
    }
    let exp = -i64::from(k) - i64::try_from(t).unwrap_or(0);
    Finite::from_big(negative, &q, exp, !r.is_zero())
}

impl Finite {
    /// `±m × 2^e`, `m > 0`.
    fn from_u128(negative: bool, m: u128, e: i32) -> Finite {
        let lz = m.leading_zeros();
        let normalized = m << lz;
        Finite {
            negative,
            exp: e + 127 - lz as i32,
            frac: normalized << 1,
            sticky: false,
        }
    }

    /// `±(m + ε) × 2^e`, `m > 0`, where `sticky` says ε > 0.
    fn from_big(negative: bool, m: &Big, e: i64, sticky: bool) -> Finite {
        let len = m.bit_len();
        let mut frac = 0u128;
        for j in 0..128u64 {
            // The j-th bit after the leading one.
            if let Some(idx) = len.checked_sub(2 + j) {
                if m.bit(idx) {
                    frac |= 1u128 << (127 - j);
                }
            }
        }
        let lost = len
            .checked_sub(129)
            .is_some_and(|below| m.any_bit_below(below));
        let exp = e
            .saturating_add(i64::try_from(len).unwrap_or(i64::MAX))
            .saturating_sub(1);
        Finite {
            negative,
            exp: i32::try_from(exp).unwrap_or(i32::MAX),
            frac,
            sticky: sticky || lost,
        }
    }
}

/// Exponent field value reserved for infinities (above every finite exponent).
const INFINITE_EXP: u16 = 0xFFFF;

fn encode_number(n: &Number, out: &mut Vec<u8>) {
    match n {
        Number::NaN => out.push(class::NAN),
        Number::Zero => out.push(class::ZERO),
        Number::Infinite { negative } => {
            let body = push_class(*negative, out);
            out.extend_from_slice(&INFINITE_EXP.to_be_bytes());
            out.push(0);
            invert_if_negative(*negative, body, out);
        }
        Number::Finite(f) => {
            let body = push_class(f.negative, out);
            // Finite exponents lie within about ±20 600 (Decimal128 extremes).
            let biased = f
                .exp
                .saturating_add(0x8000)
                .clamp(0, i32::from(INFINITE_EXP) - 1) as u16;
            out.extend_from_slice(&biased.to_be_bytes());
            encode_fraction(f.frac, f.sticky, out);
            invert_if_negative(f.negative, body, out);
        }
    }
}

/// Pushes the sign class and returns where the body starts.
fn push_class(negative: bool, out: &mut Vec<u8>) -> usize {
    out.push(if negative {
        class::NEGATIVE
    } else {
        class::POSITIVE
    });
    out.len()
}

/// Negative numbers sort by decreasing magnitude: invert their (prefix-free) body.
fn invert_if_negative(negative: bool, body_start: usize, out: &mut [u8]) {
    if negative {
        if let Some(body) = out.get_mut(body_start..) {
            body.iter_mut().for_each(|b| *b = !*b);
        }
    }
}

/// The 129-bit fraction (128 bits, then the sticky bit) with trailing zero bits
/// dropped, in 7-bit groups; each byte is `group << 1 | more`. A fraction that
/// stops early is smaller than one that continues with non-zero bits, and the
/// `more` flag says so at the first byte where they differ, so the code is
/// order-preserving and prefix-free. Zero is the single byte `0x00`.
fn encode_fraction(frac: u128, sticky: bool, out: &mut Vec<u8>) {
    let significant: u32 = if sticky {
        129
    } else if frac == 0 {
        0
    } else {
        128 - frac.trailing_zeros()
    };
    if significant == 0 {
        out.push(0);
        return;
    }
    let bit = |i: u32| -> u8 {
        match i {
            0..=127 => ((frac >> (127 - i)) & 1) as u8,
            128 => u8::from(sticky),
            _ => 0,
        }
    };
    let groups = significant.div_ceil(7);
    for g in 0..groups {
        let mut value = 0u8;
        for j in 0..7 {
            value = (value << 1) | bit(g * 7 + j);
        }
        let more = u8::from(g + 1 < groups);
        out.push((value << 1) | more);
    }
}

#[cfg(test)]
mod tests;
