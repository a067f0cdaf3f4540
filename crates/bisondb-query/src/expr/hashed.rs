//! `$toHashedIndexKey`: the 64-bit hash mongod's hashed indexes store.
//!
//! mongod hashes a value as the MD5 digest of a seed (0, as a little-endian
//! int32) followed by the value's canonical bytes, and keeps the digest's
//! first 8 bytes as a little-endian signed integer. The canonical bytes of a
//! value are its canonical type (the number mongod orders types by, as a
//! little-endian int32) and then:
//! - numbers: the value as a 64-bit integer (doubles truncated, decimals
//!   rounded half to even; NaN is 0, out-of-range values clamp), so 2, 2.0
//!   and 2.7 hash alike, as the manual says;
//! - objects and arrays: each element's canonical type, its field name with
//!   its NUL terminator (arrays: "0", "1", ...), and its canonical bytes;
//! - everything else: the element's BSON value bytes as stored (a string's
//!   length prefix, bytes and NUL; an ObjectId's 12 bytes, ...).
//!
//! Checked against the manual's example (`"string to hash"` hashes to
//! 763543691661428748). BisonDB's own hashed indexes use another hash (see
//! `bisondb_storage::keycode::hashed_key`); this one is only for the expression.

use crate::decimal::{Dec, Rounding};
use bson::{Bson, Document};
use md5::{Digest, Md5};

/// mongod's hash of `v` with seed 0.
pub fn hash64(v: &Bson) -> i64 {
    let mut h = Md5::new();
    h.update(0_i32.to_le_bytes());
    hash_value(&mut h, v);
    let digest = h.finalize();
    let mut first = [0u8; 8];
    first.copy_from_slice(&digest[..8]);
    i64::from_le_bytes(first)
}

/// mongod's canonical type numbers (the order of types in comparisons).
fn canonical_type(v: &Bson) -> i32 {
    match v {
        Bson::MinKey => -1,
        Bson::Undefined => 0,
        Bson::Null => 5,
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => 10,
        Bson::String(_) | Bson::Symbol(_) => 15,
        Bson::Document(_) => 20,
        Bson::Array(_) => 25,
        Bson::Binary(_) => 30,
        Bson::ObjectId(_) => 35,
        Bson::Boolean(_) => 40,
        Bson::DateTime(_) => 45,
        Bson::Timestamp(_) => 47,
        Bson::RegularExpression(_) => 50,
        Bson::DbPointer(_) => 55,
        Bson::JavaScriptCode(_) => 60,
        Bson::JavaScriptCodeWithScope(_) => 65,
        Bson::MaxKey => 100,
    }
}

/// A number as the 64-bit integer mongod hashes (its "safe" conversion).
fn as_hash_long(v: &Bson) -> i64 {
    match v {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        // `as` truncates toward zero, maps NaN to 0 and saturates, which is
        // what mongod's safe conversion does.
        Bson::Double(d) => *d as i64,
        Bson::Decimal128(d) => {
            let d = Dec::from_bson(*d);
            if d.is_nan() {
                return 0;
            }
            d.to_i64(Rounding::HalfEven).unwrap_or_else(|| {
                if d.cmp_zero() == Some(std::cmp::Ordering::Less) {
                    i64::MIN
                } else {
                    i64::MAX
                }
            })
        }
        _ => 0,
    }
}

fn string_bytes(h: &mut Md5, s: &str) {
    // BSON strings: int32 length counting the NUL, the bytes, the NUL.
    let len = i32::try_from(s.len() + 1).unwrap_or(i32::MAX);
    h.update(len.to_le_bytes());
    h.update(s.as_bytes());
    h.update([0]);
}

fn cstring(h: &mut Md5, s: &str) {
    h.update(s.as_bytes());
    h.update([0]);
}

fn hash_value(h: &mut Md5, v: &Bson) {
    h.update(canonical_type(v).to_le_bytes());
    hash_body(h, v);
}

fn hash_fields<'a>(h: &mut Md5, fields: impl Iterator<Item = (String, &'a Bson)>) {
    for (name, v) in fields {
        h.update(canonical_type(v).to_le_bytes());
        cstring(h, &name);
        hash_body(h, v);
    }
}

fn hash_document(h: &mut Md5, d: &Document) {
    hash_fields(h, d.iter().map(|(k, v)| (k.clone(), v)));
}

fn hash_body(h: &mut Md5, v: &Bson) {
    match v {
        Bson::Double(_) | Bson::Int32(_) | Bson::Int64(_) | Bson::Decimal128(_) => {
            h.update(as_hash_long(v).to_le_bytes())
        }
        Bson::Document(d) => hash_document(h, d),
        Bson::Array(a) => hash_fields(h, a.iter().enumerate().map(|(i, v)| (i.to_string(), v))),
        // The scope is not an embedded object to mongod's hasher: only the type counts.
        Bson::JavaScriptCodeWithScope(_) => {}
        Bson::MinKey | Bson::MaxKey | Bson::Null | Bson::Undefined => {}
        Bson::String(s) | Bson::Symbol(s) | Bson::JavaScriptCode(s) => string_bytes(h, s),
        Bson::Binary(b) => {
            let len = i32::try_from(b.bytes.len()).unwrap_or(i32::MAX);
            h.update(len.to_le_bytes());
            h.update([u8::from(b.subtype)]);
            h.update(&b.bytes);
        }
        Bson::ObjectId(o) => h.update(o.bytes()),
        Bson::Boolean(b) => h.update([u8::from(*b)]),
        Bson::DateTime(d) => h.update(d.timestamp_millis().to_le_bytes()),
        Bson::Timestamp(t) => {
            h.update(t.increment.to_le_bytes());
            h.update(t.time.to_le_bytes());
        }
        Bson::RegularExpression(r) => {
            cstring(h, r.pattern.as_str());
            cstring(h, r.options.as_str());
        }
        Bson::DbPointer(p) => {
            // The driver keeps the parts private: take the value bytes
            // (length, namespace, NUL, ObjectId) from `{x: p}` serialized,
            // after its length, type byte and "x\0", before its final NUL.
            let mut d = Document::new();
            d.insert("x", Bson::DbPointer(p.clone()));
            if let Ok(raw) = bson::RawDocumentBuf::try_from(&d) {
                let bytes = raw.as_bytes();
                h.update(
                    bytes
                        .get(7..bytes.len().saturating_sub(1))
                        .unwrap_or_default(),
                );
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, oid::ObjectId, Decimal128};

    #[test]
    fn matches_mongod() {
        // The manual's example for $toHashedIndexKey.
        assert_eq!(
            hash64(&Bson::from("string to hash")),
            763_543_691_661_428_748
        );
        // Numbers hash as their 64-bit integer: equal values and doubles
        // with the same integer part hash alike (the manual's caveat).
        let two = hash64(&Bson::Int32(2));
        for v in [
            Bson::Int64(2),
            Bson::Double(2.0),
            Bson::Double(2.3),
            Bson::Double(2.9),
            Bson::Decimal128("2".parse::<Decimal128>().unwrap()),
        ] {
            assert_eq!(hash64(&v), two, "{v}");
        }
        assert_ne!(hash64(&Bson::Int32(3)), two);
        assert_eq!(hash64(&Bson::Double(f64::NAN)), hash64(&Bson::Int32(0)));
        assert_eq!(hash64(&Bson::Double(1e300)), hash64(&Bson::Int64(i64::MAX)));
        // Strings and symbols share a canonical type and bytes; other types differ.
        assert_eq!(
            hash64(&Bson::Symbol("a".into())),
            hash64(&Bson::String("a".into()))
        );
        assert_ne!(hash64(&Bson::Null), hash64(&Bson::Undefined));
        assert_ne!(
            hash64(&Bson::from(doc! {"a": 1})),
            hash64(&Bson::from(doc! {"b": 1}))
        );
        assert_ne!(
            hash64(&Bson::from(vec![Bson::Int32(1)])),
            hash64(&Bson::from(doc! {"0": 1}))
        );
        let oid = ObjectId::from_bytes([1; 12]);
        assert_eq!(hash64(&Bson::ObjectId(oid)), hash64(&Bson::ObjectId(oid)));
    }
}
