//! Structural validation of BSON documents received from clients.
//!
//! The bson crate parses lazily and only checks a document's outer envelope, so a
//! malformed element would surface as an error deep inside the server (or be
//! stored and break later readers). [`validate_bson`] walks every element once,
//! iteratively with a fixed-size stack of open documents (no recursion, no heap
//! allocation on success), and rejects anything the BSON specification forbids,
//! including the semantic cases of the BSON corpus `decodeErrors` (invalid UTF-8,
//! boolean bytes other than 0/1, inconsistent code-with-scope and old-binary
//! lengths).

use crate::WireError;

/// Deepest nesting of documents and arrays accepted below the top-level document.
///
/// A document whose elements nest more than this many levels is rejected, which
/// bounds the validator's stack and protects every later recursive reader.
pub const MAX_BSON_DEPTH: usize = 200;

const MIN_DOC_LEN: usize = 5;
/// int32 total + smallest string (4-byte length + NUL) + smallest document.
const MIN_CODE_W_SCOPE_LEN: usize = 4 + 5 + MIN_DOC_LEN;
const OLD_BINARY_SUBTYPE: u8 = 0x02;

fn err(msg: &str, pos: usize) -> WireError {
    WireError::bson(format!("{msg} at byte {pos}"))
}

fn read_i32(bytes: &[u8], pos: usize, limit: usize) -> Result<i32, WireError> {
    let end = pos.checked_add(4).filter(|&e| e <= limit);
    let slice = end
        .and_then(|e| bytes.get(pos..e))
        .ok_or_else(|| err("length field overruns its document", pos))?;
    let mut a = [0u8; 4];
    a.copy_from_slice(slice);
    Ok(i32::from_le_bytes(a))
}

/// Reads a non-negative length; negative values are errors, not huge sizes.
fn read_len(bytes: &[u8], pos: usize, limit: usize) -> Result<usize, WireError> {
    let v = read_i32(bytes, pos, limit)?;
    usize::try_from(v).map_err(|_| err("negative length", pos))
}

/// Skips `n` bytes from `pos`, which must stay within `limit`.
fn skip(pos: usize, n: usize, limit: usize) -> Result<usize, WireError> {
    pos.checked_add(n)
        .filter(|&e| e <= limit)
        .ok_or_else(|| err("value overruns its document", pos))
}

fn check_utf8(bytes: &[u8], start: usize, end: usize) -> Result<(), WireError> {
    let slice = bytes
        .get(start..end)
        .ok_or_else(|| err("string overruns its document", start))?;
    std::str::from_utf8(slice)
        .map(|_| ())
        .map_err(|_| err("invalid UTF-8", start))
}

/// Validates a cstring starting at `pos` ending before `limit`; returns the
/// position after its NUL.
fn cstring(bytes: &[u8], pos: usize, limit: usize) -> Result<usize, WireError> {
    let area = bytes
        .get(pos..limit)
        .ok_or_else(|| err("cstring overruns its document", pos))?;
    let nul = area
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| err("cstring is not NUL-terminated", pos))?;
    let end = pos.saturating_add(nul);
    check_utf8(bytes, pos, end)?;
    Ok(end.saturating_add(1))
}

/// Validates a BSON string (int32 length including the NUL, bytes, NUL).
fn string(bytes: &[u8], pos: usize, limit: usize) -> Result<usize, WireError> {
    let len = read_len(bytes, pos, limit)?;
    if len < 1 {
        return Err(err("string length must be at least 1", pos));
    }
    let start = skip(pos, 4, limit)?;
    let end = skip(start, len, limit)?;
    let nul_at = end.saturating_sub(1);
    if bytes.get(nul_at) != Some(&0) {
        return Err(err("string is not NUL-terminated", nul_at));
    }
    check_utf8(bytes, start, nul_at)?;
    Ok(end)
}

/// Reads an embedded document's length and checks that it fits before `limit`.
fn doc_len(bytes: &[u8], pos: usize, limit: usize) -> Result<usize, WireError> {
    let len = read_len(bytes, pos, limit)?;
    if len < MIN_DOC_LEN {
        return Err(err("embedded document length is below 5", pos));
    }
    skip(pos, len, limit)?;
    Ok(len)
}

/// Checks that `bytes` is exactly one structurally valid BSON document.
///
/// Verified: the declared length equals `bytes.len()` (no trailing bytes) and is at
/// least 5; every element type is known; keys, regex patterns and options are
/// NUL-terminated UTF-8; strings (also code, symbol, DBPointer names) have a
/// positive length prefix, a NUL terminator and valid UTF-8; fixed-size values fit;
/// booleans are 0 or 1; binary lengths are non-negative (and consistent for the old
/// subtype 2); code-with-scope lengths add up exactly; every embedded document or
/// array ends with its terminator exactly at its declared length, nested at most
/// [`MAX_BSON_DEPTH`] levels. Not checked: size limits (the caller knows which one
/// applies), array keys being "0", "1", ..., and duplicate keys.
pub fn validate_bson(bytes: &[u8]) -> Result<(), WireError> {
    let total = read_len(bytes, 0, bytes.len())?;
    if total < MIN_DOC_LEN {
        return Err(err("document length is below 5", 0));
    }
    if total != bytes.len() {
        return Err(WireError::bson(format!(
            "document declares {total} bytes but {} were given",
            bytes.len()
        )));
    }

    // ends[d] is the exclusive end of the document open at depth d; the element
    // area of that document stops one byte earlier, at its terminator.
    let mut ends = [0usize; MAX_BSON_DEPTH + 1];
    ends[0] = total;
    let mut depth = 0usize;
    let mut pos = 4usize;

    loop {
        let end = *ends
            .get(depth)
            .ok_or_else(|| err("nesting depth exceeded", pos))?;
        let tag = *bytes
            .get(pos)
            .ok_or_else(|| err("document is truncated", pos))?;
        pos = pos.saturating_add(1);
        if tag == 0 {
            if pos != end {
                return Err(err(
                    "document terminator before its declared end",
                    pos.saturating_sub(1),
                ));
            }
            if depth == 0 {
                return Ok(());
            }
            depth -= 1;
            continue;
        }
        // end >= 5 for every open document, so the element area is well defined.
        let limit = end.saturating_sub(1);
        pos = cstring(bytes, pos, limit)?;
        pos = match tag {
            // double, UTC datetime, timestamp, int64
            0x01 | 0x09 | 0x11 | 0x12 => skip(pos, 8, limit)?,
            // ObjectId
            0x07 => skip(pos, 12, limit)?,
            // int32
            0x10 => skip(pos, 4, limit)?,
            // decimal128
            0x13 => skip(pos, 16, limit)?,
            // undefined, null, max key, min key
            0x06 | 0x0A | 0x7F | 0xFF => pos,
            0x08 => {
                let b = *bytes
                    .get(pos)
                    .filter(|_| pos < limit)
                    .ok_or_else(|| err("boolean overruns its document", pos))?;
                if b > 1 {
                    return Err(err("boolean byte is neither 0 nor 1", pos));
                }
                pos.saturating_add(1)
            }
            // string, JavaScript code, symbol
            0x02 | 0x0D | 0x0E => string(bytes, pos, limit)?,
            // embedded document, array
            0x03 | 0x04 => {
                let len = doc_len(bytes, pos, limit)?;
                depth = push(&mut ends, depth, pos, len)?;
                skip(pos, 4, limit)?
            }
            0x05 => {
                let len = read_len(bytes, pos, limit)?;
                let subtype_at = skip(pos, 4, limit)?;
                let data = skip(subtype_at, 1, limit)?;
                let after = skip(data, len, limit)?;
                if bytes.get(subtype_at) == Some(&OLD_BINARY_SUBTYPE) {
                    let inner = read_len(bytes, data, after)?;
                    if inner.checked_add(4) != Some(len) {
                        return Err(err("binary subtype 2 inner length is inconsistent", data));
                    }
                }
                after
            }
            // regular expression: pattern and options
            0x0B => {
                let p = cstring(bytes, pos, limit)?;
                cstring(bytes, p, limit)?
            }
            // DBPointer: namespace string and ObjectId
            0x0C => {
                let p = string(bytes, pos, limit)?;
                skip(p, 12, limit)?
            }
            // code with scope: int32 total, string, document
            0x0F => {
                let total = read_len(bytes, pos, limit)?;
                if total < MIN_CODE_W_SCOPE_LEN {
                    return Err(err("code with scope length is too small", pos));
                }
                let cws_end = skip(pos, total, limit)?;
                let scope_at = string(bytes, skip(pos, 4, cws_end)?, cws_end)?;
                let len = doc_len(bytes, scope_at, cws_end)?;
                if scope_at.checked_add(len) != Some(cws_end) {
                    return Err(err("code with scope length does not match its parts", pos));
                }
                depth = push(&mut ends, depth, scope_at, len)?;
                skip(scope_at, 4, cws_end)?
            }
            other => {
                return Err(WireError::bson(format!(
                    "unknown element type {other:#04x} at byte {}",
                    pos
                )))
            }
        };
    }
}

/// Opens an embedded document spanning `len` bytes from `start`.
fn push(
    ends: &mut [usize; MAX_BSON_DEPTH + 1],
    depth: usize,
    start: usize,
    len: usize,
) -> Result<usize, WireError> {
    let next = depth.saturating_add(1);
    let slot = ends.get_mut(next).ok_or_else(|| {
        WireError::bson(format!(
            "document nesting exceeds the maximum depth of {MAX_BSON_DEPTH}"
        ))
    })?;
    *slot = start
        .checked_add(len)
        .ok_or_else(|| err("length overflow", start))?;
    Ok(next)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::spec::BinarySubtype;
    use bson::{
        doc, Binary, Bson, Decimal128, Document, JavaScriptCodeWithScope, Regex, Timestamp,
    };
    use proptest::prelude::*;
    use std::path::PathBuf;

    fn hex(s: &str) -> Vec<u8> {
        let digits: Vec<u8> = s
            .bytes()
            .filter_map(|c| (c as char).to_digit(16).and_then(|d| u8::try_from(d).ok()))
            .collect();
        digits.chunks(2).map(|p| p[0] * 16 + p[1]).collect()
    }

    fn sample_documents() -> Vec<Document> {
        let mut nested = doc! { "leaf": 1 };
        for i in 0..60 {
            nested = if i % 3 == 0 {
                doc! { "arr": [Bson::Document(nested), 1] }
            } else {
                doc! { format!("level{i}"): nested }
            };
        }
        vec![
            doc! {},
            doc! { "_id": bson::oid::ObjectId::new(), "name": "Ada", "age": 36_i32 },
            doc! {
                "double": 1.5_f64,
                "string": "héllo wörld ✓",
                "empty": "",
                "embedded_nul": "a\u{0}b",
                "doc": { "a": { "b": [1, 2, { "c": null }] } },
                "array": [1_i32, 2_i64, "three", 4.0, [], {}],
                "generic": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2, 3] },
                "old": Binary { subtype: BinarySubtype::BinaryOld, bytes: vec![9; 7] },
                "uuid": Binary { subtype: BinarySubtype::Uuid, bytes: vec![0; 16] },
                "user": Binary { subtype: BinarySubtype::UserDefined(0x80), bytes: vec![] },
                "undefined": Bson::Undefined,
                "bool_t": true,
                "bool_f": false,
                "date": bson::DateTime::from_millis(-1),
                "null": Bson::Null,
                "regex": Regex { pattern: "^a.*b$".try_into().unwrap(), options: "im".try_into().unwrap() },
                "code": Bson::JavaScriptCode("function() { return 1; }".into()),
                "symbol": Bson::Symbol("sym".into()),
                "cws": JavaScriptCodeWithScope { code: "x".into(), scope: doc! { "x": 1 } },
                "int32": i32::MIN,
                "ts": Timestamp { time: 1, increment: 2 },
                "int64": i64::MAX,
                "dec": Decimal128::from_bytes([7; 16]),
                "min": Bson::MinKey,
                "max": Bson::MaxKey,
            },
            nested,
            doc! { "big": "x".repeat(100_000), "many": (0..1000).collect::<Vec<i32>>() },
        ]
    }

    #[test]
    fn accepts_serializer_output() {
        for d in sample_documents() {
            let bytes = d.to_vec().unwrap();
            assert_eq!(
                validate_bson(&bytes).map_err(|e| e.to_string()),
                Ok(()),
                "{d}"
            );
        }
    }

    #[test]
    fn rejects_corrupt_documents() {
        // Each case: description, hex bytes.
        let cases = [
            ("empty input", ""),
            ("shorter than its length field", "050000"),
            ("length below 5", "0400000000"),
            ("negative length", "FFFFFFFF00"),
            ("missing terminator", "05000000"),
            ("terminator not zero", "0500000001"),
            ("trailing bytes", "050000000000"),
            ("declared longer than input", "0600000000"),
            ("unknown type 0x14", "0C000000146100000000000000"),
            ("unknown type 0x80", "08000000806100 00"),
            ("key without NUL", "0800000010616100"),
            ("key not UTF-8", "0C00000010FF000100000000"),
            ("int32 truncated", "0A00000010610001000000"),
            ("bool 2", "090000000862000200"),
            ("string length 0", "0D000000026100000000000000"),
            ("string without NUL", "0E00000002610002000000616100"),
            ("string bad UTF-8", "0E00000002610002000000C30000"),
            ("string overruns", "0E00000002610009000000610000"),
            ("embedded doc too short", "0D0000000361000400000000 00"),
            (
                "embedded doc shorter than declared",
                "0E00000003610006000000000000",
            ),
            ("binary negative length", "0E0000000561 00FFFFFFFF0000 00"),
            (
                "old binary bad inner length",
                "1300000005780006000000020300000001 0200",
            ),
            ("regex pattern not UTF-8", "0B0000000B6100FF000000"),
            (
                "dbpointer short oid",
                "180000000C610002000000610000010203040506070809 00",
            ),
            (
                "code w scope too small",
                "100000000F61000C000000 0000000000",
            ),
            (
                "code w scope parts disagree",
                "170000000F61000F00000001000000000500000000 00 00",
            ),
        ];
        for (desc, h) in cases {
            let bytes = hex(h);
            assert!(validate_bson(&bytes).is_err(), "{desc} should be rejected");
        }
    }

    #[test]
    fn nesting_limit_is_enforced_without_recursion() {
        fn nested(levels: usize) -> Vec<u8> {
            // { "a": { "a": ... {} } } built from the inside out.
            let mut doc = vec![5, 0, 0, 0, 0];
            for _ in 0..levels {
                let len = i32::try_from(doc.len() + 8).unwrap();
                let mut outer = len.to_le_bytes().to_vec();
                outer.extend_from_slice(&[0x03, b'a', 0]);
                outer.extend_from_slice(&doc);
                outer.push(0);
                doc = outer;
            }
            doc
        }
        assert!(validate_bson(&nested(MAX_BSON_DEPTH)).is_ok());
        let err = validate_bson(&nested(MAX_BSON_DEPTH + 1)).unwrap_err();
        assert!(err.to_string().contains("depth"), "{err}");
        // Far deeper than any recursive validator could survive on a test thread.
        assert!(validate_bson(&nested(100_000)).is_err());
    }

    fn specs_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("BISONDB_SPECS")
            .map(PathBuf::from)
            .unwrap_or_else(|| {
                PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs")
            })
            .join("bson-corpus");
        dir.is_dir().then_some(dir)
    }

    #[test]
    fn bson_corpus() {
        let Some(dir) = specs_dir() else {
            println!("bson corpus not found (set BISONDB_SPECS); skipping");
            return;
        };
        let mut files: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "json"))
            .collect();
        files.sort();
        assert!(!files.is_empty(), "no corpus files in {}", dir.display());
        let (mut valid, mut rejected) = (0usize, 0usize);
        let mut failures = Vec::new();
        for file in &files {
            let text = std::fs::read_to_string(file).unwrap();
            // JSON is a subset of YAML; serde_yaml is already a workspace dependency.
            let root: serde_yaml::Value = serde_yaml::from_str(&text).unwrap();
            let name = file.file_name().unwrap().to_string_lossy().into_owned();
            let cases = |key: &str| {
                root.get(key)
                    .and_then(|v| v.as_sequence())
                    .cloned()
                    .unwrap_or_default()
            };
            for case in cases("valid") {
                let desc = case
                    .get("description")
                    .and_then(|d| d.as_str())
                    .unwrap_or("?");
                for field in ["canonical_bson", "degenerate_bson"] {
                    if let Some(h) = case.get(field).and_then(|v| v.as_str()) {
                        match validate_bson(&hex(h)) {
                            Ok(()) => valid += 1,
                            Err(e) => failures
                                .push(format!("{name}: valid {desc:?} ({field}) rejected: {e}")),
                        }
                    }
                }
            }
            for case in cases("decodeErrors") {
                let desc = case
                    .get("description")
                    .and_then(|d| d.as_str())
                    .unwrap_or("?");
                let h = case
                    .get("bson")
                    .and_then(|v| v.as_str())
                    .unwrap_or_default();
                match validate_bson(&hex(h)) {
                    Err(_) => rejected += 1,
                    Ok(()) => failures.push(format!("{name}: decodeError {desc:?} accepted")),
                }
            }
        }
        println!(
            "bson corpus: {valid} valid accepted, {rejected} decodeErrors rejected, {} failures",
            failures.len()
        );
        assert!(failures.is_empty(), "{failures:#?}");
        assert!(valid > 500 && rejected > 70, "corpus looked too small");
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
            let _ = validate_bson(&bytes);
        }

        /// Flip bytes of a valid document: never a panic, and whatever the validator
        /// accepts the bson crate must be able to read in full.
        #[test]
        fn mutated_documents_agree_with_bson(
            which in 0usize..4,
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let docs = sample_documents();
            let mut bytes = docs[which % docs.len()].to_vec().unwrap();
            for (idx, val) in edits {
                if !bytes.is_empty() {
                    let i = idx.index(bytes.len());
                    bytes[i] = val;
                }
            }
            if validate_bson(&bytes).is_ok() {
                let raw = bson::RawDocument::from_bytes(&bytes).unwrap();
                prop_assert!(Document::try_from(raw).is_ok());
            }
        }
    }
}
