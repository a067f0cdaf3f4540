//! mongod's `$v: 2` update entries: the difference between a document
//! before and after an update, in the format mongod's oplog uses
//! (`doc_diff`): `{$v: 2, diff: {d: {field: false}, u: {field: value},
//! i: {field: value}, s<field>: sub-diff}}`, where a sub-diff of an array is
//! `{a: true, l: newLength, u<index>: value, s<index>: sub-diff}`.
//!
//! Fields are compared in order. A field whose value changed type, or any
//! change mongod's format cannot express in place (a field moved), is
//! written whole; if the diff would be larger than the new document, the
//! entry is the whole document instead (a replacement), as mongod does.

use bisondb_storage::StorageError;
use bson::{doc, Bson, Document, RawDocument};

fn internal(e: impl std::fmt::Display) -> StorageError {
    StorageError::internal(format!("oplog diff: {e}"))
}

/// The `o` of an update entry for `before` → `after`: the `$v: 2` diff, or
/// the whole new document when that is smaller; `None` when nothing changed.
pub fn update_entry(
    before: &RawDocument,
    after: &RawDocument,
) -> Result<Option<Document>, StorageError> {
    if before.as_bytes() == after.as_bytes() {
        return Ok(None);
    }
    let b = Document::try_from(before).map_err(internal)?;
    let a = Document::try_from(after).map_err(internal)?;
    let Some(diff) = diff_documents(&b, &a) else {
        return Ok(Some(a));
    };
    if diff.is_empty() {
        return Ok(None);
    }
    let entry = doc! {"$v": 2i32, "diff": diff};
    let size = bson::RawDocumentBuf::try_from(&entry)
        .map_err(internal)?
        .as_bytes()
        .len();
    if size > after.as_bytes().len() {
        return Ok(Some(a));
    }
    Ok(Some(entry))
}

/// The diff of two documents; `None` when the fields they share are not in
/// the same order (the format cannot move a field: the caller replaces).
pub fn diff_documents(before: &Document, after: &Document) -> Option<Document> {
    let shared_before: Vec<&String> = before.keys().filter(|k| after.contains_key(*k)).collect();
    let shared_after: Vec<&String> = after.keys().filter(|k| before.contains_key(*k)).collect();
    if shared_before != shared_after {
        return None;
    }
    // Inserted fields are appended by the format: they must come after
    // every shared field.
    let mut seen_new = false;
    for k in after.keys() {
        if before.contains_key(k) {
            if seen_new {
                return None;
            }
        } else {
            seen_new = true;
        }
    }
    let mut d = Document::new();
    let mut u = Document::new();
    let mut i = Document::new();
    let mut s = Document::new();
    for (k, old) in before {
        match after.get(k) {
            None => {
                d.insert(k.clone(), false);
            }
            Some(new) if new == old && same_type(old, new) => {}
            Some(new) => match sub_diff(old, new) {
                Some(sub) if !sub.is_empty() => {
                    s.insert(format!("s{k}"), sub);
                }
                Some(_) => {}
                None => {
                    u.insert(k.clone(), new.clone());
                }
            },
        }
    }
    for (k, new) in after {
        if !before.contains_key(k) {
            i.insert(k.clone(), new.clone());
        }
    }
    let mut out = Document::new();
    if !d.is_empty() {
        out.insert("d", d);
    }
    if !u.is_empty() {
        out.insert("u", u);
    }
    if !i.is_empty() {
        out.insert("i", i);
    }
    out.extend(s);
    Some(out)
}

/// Values that compare equal in Rust's `Bson` but differ on the wire
/// (`1` and `1.0`) must be written.
fn same_type(a: &Bson, b: &Bson) -> bool {
    a.element_type() == b.element_type()
}

/// A sub-diff for two values of the same kind (both documents, both
/// arrays); `None` when the new value must be written whole.
fn sub_diff(old: &Bson, new: &Bson) -> Option<Document> {
    match (old, new) {
        (Bson::Document(a), Bson::Document(b)) => diff_documents(a, b),
        (Bson::Array(a), Bson::Array(b)) => {
            let mut out = doc! {"a": true};
            if b.len() < a.len() {
                out.insert("l", b.len() as i32);
            }
            for (idx, new) in b.iter().enumerate() {
                match a.get(idx) {
                    Some(old) if old == new && same_type(old, new) => {}
                    Some(old) => match sub_diff(old, new) {
                        Some(sub) if !sub.is_empty() => {
                            out.insert(format!("s{idx}"), sub);
                        }
                        Some(_) => {}
                        None => {
                            out.insert(format!("u{idx}"), new.clone());
                        }
                    },
                    None => {
                        out.insert(format!("u{idx}"), new.clone());
                    }
                }
            }
            if out.len() == 1 {
                return Some(Document::new());
            }
            Some(out)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn diff(before: bson::RawDocumentBuf, after: bson::RawDocumentBuf) -> Option<Document> {
        update_entry(&before, &after).unwrap()
    }

    #[test]
    fn diffs_in_mongods_format() {
        let before = rawdoc! {"_id": 1, "a": 1, "b": "a long string that stays the same, long enough that the diff is smaller than the document", "c": {"x": 1, "y": 2}, "arr": [1, 2, 3], "gone": true};
        let after = rawdoc! {"_id": 1, "a": 2, "b": "a long string that stays the same, long enough that the diff is smaller than the document", "c": {"x": 1, "y": 3}, "arr": [1, 5], "new": "n"};
        let o = diff(before, after).unwrap();
        assert_eq!(
            o,
            doc! {"$v": 2, "diff": {
                "d": {"gone": false},
                "u": {"a": 2},
                "i": {"new": "n"},
                "sc": {"u": {"y": 3}},
                "sarr": {"a": true, "l": 2, "u1": 5},
            }}
        );
    }

    #[test]
    fn unchanged_is_no_entry_and_type_changes_are_written() {
        assert!(diff(rawdoc! {"_id": 1, "a": 1}, rawdoc! {"_id": 1, "a": 1}).is_none());
        let o = diff(
            rawdoc! {"_id": 1, "a": 1, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
            rawdoc! {"_id": 1, "a": 1.0, "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"},
        )
        .unwrap();
        assert_eq!(o, doc! {"$v": 2, "diff": {"u": {"a": 1.0}}});
    }

    #[test]
    fn moved_fields_or_big_diffs_replace() {
        let o = diff(
            rawdoc! {"_id": 1, "a": 1, "b": 2},
            rawdoc! {"_id": 1, "b": 2, "a": 1},
        )
        .unwrap();
        assert_eq!(o, doc! {"_id": 1, "b": 2, "a": 1});
        // Everything changed: the whole document is smaller.
        let o = diff(rawdoc! {"_id": 1, "a": 1}, rawdoc! {"_id": 1, "a": 2}).unwrap();
        assert!(o.contains_key("$v") || o == doc! {"_id": 1, "a": 2});
    }
}
