//! Canonical byte keys for grouping and set membership: two values get the
//! same key exactly when mongod treats them as equal for `$group` and
//! `$addToSet` (so 1, 1L and 1.0 group together, and null with missing).
//! Under a collation a string is keyed by its collation sort key, so strings
//! the collation finds equal (`"a"` and `"A"` at strength 2) group together.

use bson::{Bson, RawBsonRef};
use std::collections::HashMap;

use crate::collation::Collation;

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.extend_from_slice(&(s.len() as u64).to_le_bytes());
    out.extend_from_slice(s.as_bytes());
}

fn put_int(out: &mut Vec<u8>, i: i64) {
    out.push(b'I');
    out.extend_from_slice(&i.to_le_bytes());
}

fn put_bool(out: &mut Vec<u8>, b: bool) {
    out.push(b'b');
    out.push(u8::from(b));
}

fn put_date(out: &mut Vec<u8>, d: bson::DateTime) {
    out.push(b'd');
    out.extend_from_slice(&d.timestamp_millis().to_le_bytes());
}

fn put_timestamp(out: &mut Vec<u8>, t: bson::Timestamp) {
    out.push(b't');
    out.extend_from_slice(&t.time.to_le_bytes());
    out.extend_from_slice(&t.increment.to_le_bytes());
}

fn put_oid(out: &mut Vec<u8>, o: &bson::oid::ObjectId) {
    out.push(b'O');
    out.extend_from_slice(&o.bytes());
}

fn put_num(out: &mut Vec<u8>, d: f64) {
    // Integral doubles in i64 range share the integer encoding.
    if d.fract() == 0.0 && (-9.223_372_036_854_776e18..9.223_372_036_854_776e18).contains(&d) {
        out.push(b'I');
        out.extend_from_slice(&(d as i64).to_le_bytes());
    } else if d.is_nan() {
        out.push(b'N');
    } else {
        out.push(b'F');
        out.extend_from_slice(&d.to_bits().to_le_bytes());
    }
}

/// Appends the canonical key of `v` (`None` = missing, keyed like null).
/// Under a collation (`c` not `None`) strings are keyed by their sort keys.
pub fn canonical_key_in(v: Option<&Bson>, out: &mut Vec<u8>, c: Option<&Collation>) {
    let Some(v) = v else {
        out.push(b'n');
        return;
    };
    match v {
        Bson::Null => out.push(b'n'),
        Bson::Undefined => out.push(b'u'),
        Bson::MinKey => out.push(b'<'),
        Bson::MaxKey => out.push(b'>'),
        Bson::Int32(i) => put_int(out, i64::from(*i)),
        Bson::Int64(i) => put_int(out, *i),
        Bson::Double(d) => put_num(out, *d),
        Bson::Decimal128(d) => match d.to_string().parse::<f64>() {
            Ok(f) => put_num(out, f),
            Err(_) => {
                out.push(b'M');
                put_str(out, &d.to_string());
            }
        },
        Bson::String(s) | Bson::Symbol(s) => match c {
            None => {
                out.push(b's');
                put_str(out, s);
            }
            Some(c) => {
                out.push(b'k');
                let mut k = Vec::new();
                c.write_key(s, &mut k);
                out.extend_from_slice(&(k.len() as u64).to_le_bytes());
                out.extend_from_slice(&k);
            }
        },
        Bson::Document(d) => {
            out.push(b'o');
            for (k, v) in d {
                out.push(1);
                put_str(out, k);
                canonical_key_in(Some(v), out, c);
            }
            out.push(0);
        }
        Bson::Array(a) => {
            out.push(b'a');
            for x in a {
                out.push(1);
                canonical_key_in(Some(x), out, c);
            }
            out.push(0);
        }
        Bson::Boolean(b) => put_bool(out, *b),
        Bson::DateTime(d) => put_date(out, *d),
        Bson::Timestamp(t) => put_timestamp(out, *t),
        Bson::ObjectId(o) => put_oid(out, o),
        Bson::Binary(b) => {
            out.push(b'B');
            out.push(u8::from(b.subtype));
            out.extend_from_slice(&(b.bytes.len() as u64).to_le_bytes());
            out.extend_from_slice(&b.bytes);
        }
        Bson::RegularExpression(r) => {
            out.push(b'r');
            put_str(out, &r.pattern.to_string());
            put_str(out, &r.options.to_string());
        }
        other => {
            // Rare types (code, code with scope, DBPointer): their display
            // form identifies them.
            out.push(b'x');
            put_str(out, &other.to_string());
        }
    }
}

/// [`canonical_key_in`] of a borrowed raw value, for the types a group key
/// is usually made of (numbers, strings, dates, ...), without building an
/// owned value. Returns `false`, writing nothing, for the others (documents,
/// arrays, decimals, binaries ...): the caller converts those and uses
/// [`canonical_key_in`], so both give the same bytes.
pub(crate) fn canonical_key_raw(
    v: RawBsonRef<'_>,
    out: &mut Vec<u8>,
    c: Option<&Collation>,
) -> bool {
    match v {
        RawBsonRef::Null => out.push(b'n'),
        RawBsonRef::Undefined => out.push(b'u'),
        RawBsonRef::MinKey => out.push(b'<'),
        RawBsonRef::MaxKey => out.push(b'>'),
        RawBsonRef::Int32(i) => put_int(out, i64::from(i)),
        RawBsonRef::Int64(i) => put_int(out, i),
        RawBsonRef::Double(d) => put_num(out, d),
        RawBsonRef::String(s) | RawBsonRef::Symbol(s) if c.is_none() => {
            out.push(b's');
            put_str(out, s);
        }
        RawBsonRef::Boolean(b) => put_bool(out, b),
        RawBsonRef::DateTime(d) => put_date(out, d),
        RawBsonRef::Timestamp(t) => put_timestamp(out, t),
        RawBsonRef::ObjectId(o) => put_oid(out, &o),
        _ => return false,
    }
    true
}

/// Starts the key of a document built field by field (an `_id` of
/// `{year: ..., month: ...}` keyed without building it): then
/// [`object_key_field`] before each present field's value key, and
/// [`object_key_end`].
pub(crate) fn object_key_start(out: &mut Vec<u8>) {
    out.push(b'o');
}

/// See [`object_key_start`].
pub(crate) fn object_key_field(out: &mut Vec<u8>, name: &str) {
    out.push(1);
    put_str(out, name);
}

/// See [`object_key_start`].
pub(crate) fn object_key_end(out: &mut Vec<u8>) {
    out.push(0);
}

/// The canonical key of one value (simple collation).
#[cfg(test)]
pub fn key_of(v: Option<&Bson>) -> Vec<u8> {
    key_of_in(v, None)
}

/// The canonical key of one value under a collation (`None`: simple).
pub fn key_of_in(v: Option<&Bson>, c: Option<&Collation>) -> Vec<u8> {
    let mut out = Vec::new();
    canonical_key_in(v, &mut out, c);
    out
}

/// Items gathered into groups by canonical key: the groups in first-seen
/// order, each with the value its key was first seen with (the partitions
/// of `$densify`, `$fill` and `$setWindowFields`).
pub(crate) struct Partitions<K, T> {
    groups: Vec<(K, Vec<T>)>,
    index: HashMap<Vec<u8>, usize>,
}

impl<K, T> Partitions<K, T> {
    pub(crate) fn new() -> Self {
        Partitions {
            groups: Vec::new(),
            index: HashMap::new(),
        }
    }

    /// Adds `item` to the group of `key` (canonical key bytes), which starts
    /// with `value` when the key is new.
    pub(crate) fn push(&mut self, key: Vec<u8>, value: K, item: T) {
        let groups = &mut self.groups;
        let slot = *self.index.entry(key).or_insert_with(|| {
            groups.push((value, Vec::new()));
            groups.len() - 1
        });
        if let Some((_, items)) = groups.get_mut(slot) {
            items.push(item);
        }
    }

    pub(crate) fn into_groups(self) -> Vec<(K, Vec<T>)> {
        self.groups
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn equal_values_share_keys() {
        let same = [
            (Bson::Int32(1), Bson::Double(1.0)),
            (Bson::Int64(1), Bson::Int32(1)),
            (Bson::Null, Bson::Null),
            (
                Bson::Document(doc! {"a": 1}),
                Bson::Document(doc! {"a": 1.0}),
            ),
            (
                Bson::Array(vec![Bson::Int32(2)]),
                Bson::Array(vec![Bson::Int64(2)]),
            ),
            (Bson::Double(0.0), Bson::Double(-0.0)),
        ];
        for (a, b) in same {
            assert_eq!(key_of(Some(&a)), key_of(Some(&b)), "{a} vs {b}");
        }
        assert_eq!(key_of(None), key_of(Some(&Bson::Null)));
        let different = [
            (Bson::Int32(1), Bson::String("1".into())),
            (
                Bson::Document(doc! {"a": 1, "b": 2}),
                Bson::Document(doc! {"b": 2, "a": 1}),
            ),
            (Bson::Double(1.5), Bson::Int32(1)),
            (Bson::Array(vec![]), Bson::Null),
        ];
        for (a, b) in different {
            assert_ne!(key_of(Some(&a)), key_of(Some(&b)), "{a} vs {b}");
        }
    }
}
