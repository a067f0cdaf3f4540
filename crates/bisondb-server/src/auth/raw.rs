//! Two reads of a command body on the authorization path that every
//! `insert` makes under `--auth`, done over the raw bytes: the string the
//! first field holds (the collection) and whether a boolean field is
//! `true`. The `bson` crate's iterator checks every key and value it
//! passes as UTF-8, which cost more than the rest of the privilege check;
//! this walk compares key bytes and skips values by their length. The body
//! was validated when its message was decoded; anything unexpected here
//! reads as "not found".

use bisondb_query::bsoncolumn::value_len;
use bson::RawDocument;

/// Calls `f(key, type, value)` for each element until it returns true.
fn find(body: &RawDocument, mut f: impl FnMut(&[u8], u8, &[u8]) -> bool) -> bool {
    let bytes = body.as_bytes();
    let mut at = 4;
    while at < bytes.len() {
        let t = bytes[at];
        if t == 0 {
            return false;
        }
        let Some(key_len) = bytes[at + 1..].iter().position(|&b| b == 0) else {
            return false;
        };
        let key = &bytes[at + 1..at + 1 + key_len];
        let v = &bytes[at + 2 + key_len..];
        let Some(n) = value_len(t, v) else {
            return false;
        };
        if f(key, t, &v[..n]) {
            return true;
        }
        at += 2 + key_len + n;
    }
    false
}

/// Whether the body's field `key` is the boolean `true`.
pub fn flag_is_true(body: &RawDocument, key: &str) -> bool {
    let mut set = false;
    find(body, |k, t, v| {
        if k == key.as_bytes() {
            set = t == 0x08 && v == [1];
            return true;
        }
        false
    });
    set
}

/// The first field's value when it is a string (the collection a command
/// names).
pub fn first_string(body: &RawDocument) -> Option<&str> {
    let bytes = body.as_bytes();
    if bytes.get(4) != Some(&0x02) {
        return None;
    }
    let key_len = bytes.get(5..)?.iter().position(|&b| b == 0)?;
    let v = bytes.get(6 + key_len..)?;
    let n = value_len(0x02, v)?;
    // A string value is its length, its bytes and a NUL.
    std::str::from_utf8(v.get(4..n.checked_sub(1)?)?).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn reads_what_the_bson_crate_reads() {
        let oid = bson::oid::ObjectId::new();
        let body = rawdoc! {
            "insert": "coll", "ordered": true, "n": 1.5, "re": bson::Regex { pattern: "a".try_into().unwrap(), options: "i".try_into().unwrap() }, "id": oid, "when": bson::DateTime::now(),
            "docs": [{"a": 1}], "sub": {"x": null}, "big": 5i64, "ts": bson::Timestamp { time: 1, increment: 2 },
            "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: vec![1, 2, 3] },
            "bypassDocumentValidation": true, "off": false, "$db": "app",
        };
        assert_eq!(first_string(&body), Some("coll"));
        assert!(flag_is_true(&body, "bypassDocumentValidation"));
        assert!(flag_is_true(&body, "ordered"));
        assert!(!flag_is_true(&body, "off"));
        assert!(!flag_is_true(&body, "n"));
        assert!(!flag_is_true(&body, "absent"));
        assert_eq!(first_string(&rawdoc! {"insert": 1}), None);
        assert_eq!(first_string(&rawdoc! {}), None);
        assert!(!flag_is_true(
            &rawdoc! {"insert": "c", "bypassDocumentValidation": 1},
            "bypassDocumentValidation"
        ));
    }
}
