//! mongod's `$v: 2` update entries: the difference between a document
//! before and after an update, in the format mongod's oplog uses
//! (`doc_diff`): `{$v: 2, diff: {d: {field: false}, u: {field: value},
//! i: {field: value}, s<field>: sub-diff}}`, where a sub-diff of an array is
//! `{a: true, l: newLength, u<index>: value, s<index>: sub-diff}`.
//!
//! Fields are compared in order. A field whose value changed type, or any
//! change mongod's format cannot express in place (a field moved), is
//! written whole; for a pipeline update, if the diff would be larger than
//! the new document, the entry is the whole document instead (a
//! replacement), as mongod does (operator updates always log their diff).

use bisondb_storage::StorageError;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

fn internal(e: impl std::fmt::Display) -> StorageError {
    StorageError::internal(format!("oplog diff: {e}"))
}

/// The `o` of an update entry for `before` → `after`: the `$v: 2` diff, or
/// (when `size_limited`) the whole new document when that is smaller;
/// `None` when nothing changed.
/// Works on the raw documents: unchanged fields cost a byte comparison and
/// are never converted (a time-series bucket's columns grow by a few values
/// per update).
pub fn update_entry(
    before: &RawDocument,
    after: &RawDocument,
    size_limited: bool,
) -> Result<Option<RawDocumentBuf>, StorageError> {
    if before.as_bytes() == after.as_bytes() {
        return Ok(None);
    }
    let Some(diff) = diff_raw(before, after)? else {
        return Ok(Some(after.to_owned()));
    };
    if diff.is_empty() {
        return Ok(None);
    }
    let entry = RawDocumentBuf::try_from(&doc! {"$v": 2i32, "diff": diff}).map_err(internal)?;
    if size_limited && entry.as_bytes().len() > after.as_bytes().len() {
        return Ok(Some(after.to_owned()));
    }
    Ok(Some(entry))
}

fn owned(v: RawBsonRef<'_>) -> Result<Bson, StorageError> {
    Bson::try_from(v).map_err(internal)
}

fn fields(d: &RawDocument) -> Result<Vec<(&str, RawBsonRef<'_>)>, StorageError> {
    d.iter()
        .map(|el| el.map(|(k, v)| (k.as_str(), v)).map_err(internal))
        .collect()
}

/// The sections of a diff being built (`d`, `u`, `i`, then the `s<field>`
/// sub-diffs, in mongod's order).
#[derive(Default)]
struct Sections {
    d: Document,
    u: Document,
    i: Document,
    s: Document,
}

impl Sections {
    /// A field both documents have, `old` before and `new` after.
    fn shared(
        &mut self,
        k: &str,
        old: RawBsonRef<'_>,
        new: RawBsonRef<'_>,
    ) -> Result<(), StorageError> {
        if old == new {
            return Ok(());
        }
        match sub_diff(old, new)? {
            Some(sub) if !sub.is_empty() => {
                self.s.insert(format!("s{k}"), sub);
            }
            Some(_) => {}
            None => {
                self.u.insert(k, owned(new)?);
            }
        }
        Ok(())
    }

    fn into_diff(self) -> Document {
        let mut out = Document::new();
        for (name, section) in [("d", self.d), ("u", self.u), ("i", self.i)] {
            if !section.is_empty() {
                out.insert(name, section);
            }
        }
        out.extend(self.s);
        out
    }
}

/// The diff of two raw documents; `None` when the fields they share are not
/// in the same order, or a new field comes before a shared one (the format
/// cannot move a field: the caller replaces).
fn diff_raw(before: &RawDocument, after: &RawDocument) -> Result<Option<Document>, StorageError> {
    let b = fields(before)?;
    let a = fields(after)?;
    let mut out = Sections::default();
    // The common case (a time-series bucket's columns, a `$set` of a
    // field): the old fields, in order, start the new document. Then only
    // values that differ and the new tail are looked at, without hashing.
    if a.len() >= b.len() && b.iter().zip(&a).all(|((x, _), (y, _))| x == y) {
        for ((k, old), (_, new)) in b.iter().zip(&a) {
            out.shared(k, *old, *new)?;
        }
        for (k, new) in a.get(b.len()..).unwrap_or_default() {
            out.i.insert(*k, owned(*new)?);
        }
        return Ok(Some(out.into_diff()));
    }
    let in_after: std::collections::HashMap<&str, RawBsonRef<'_>> = a.iter().copied().collect();
    let in_before: std::collections::HashSet<&str> = b.iter().map(|(k, _)| *k).collect();
    let shared_before = b
        .iter()
        .filter(|(k, _)| in_after.contains_key(k))
        .map(|(k, _)| *k);
    let shared_after = a
        .iter()
        .filter(|(k, _)| in_before.contains(k))
        .map(|(k, _)| *k);
    if !shared_before.eq(shared_after) {
        return Ok(None);
    }
    let mut seen_new = false;
    for (k, _) in &a {
        if in_before.contains(k) {
            if seen_new {
                return Ok(None);
            }
        } else {
            seen_new = true;
        }
    }
    for (k, old) in &b {
        match in_after.get(k) {
            Some(new) => out.shared(k, *old, *new)?,
            None => {
                out.d.insert(*k, false);
            }
        }
    }
    for (k, new) in &a {
        if !in_before.contains(k) {
            out.i.insert(*k, owned(*new)?);
        }
    }
    Ok(Some(out.into_diff()))
}

/// A sub-diff for two values of the same kind (both documents, both
/// arrays); `None` when the new value must be written whole.
fn sub_diff(old: RawBsonRef<'_>, new: RawBsonRef<'_>) -> Result<Option<Document>, StorageError> {
    match (old, new) {
        (RawBsonRef::Document(a), RawBsonRef::Document(b)) => diff_raw(a, b),
        (RawBsonRef::Array(a), RawBsonRef::Array(b)) => {
            let a: Vec<RawBsonRef<'_>> =
                a.into_iter().collect::<Result<_, _>>().map_err(internal)?;
            let b: Vec<RawBsonRef<'_>> =
                b.into_iter().collect::<Result<_, _>>().map_err(internal)?;
            let mut out = doc! {"a": true};
            if b.len() < a.len() {
                out.insert("l", b.len() as i32);
            }
            for (idx, new) in b.iter().enumerate() {
                match a.get(idx) {
                    Some(old) if old == new => {}
                    Some(old) => match sub_diff(*old, *new)? {
                        Some(sub) if !sub.is_empty() => {
                            out.insert(format!("s{idx}"), sub);
                        }
                        Some(_) => {}
                        None => {
                            out.insert(format!("u{idx}"), owned(*new)?);
                        }
                    },
                    None => {
                        out.insert(format!("u{idx}"), owned(*new)?);
                    }
                }
            }
            if out.len() == 1 {
                return Ok(Some(Document::new()));
            }
            Ok(Some(out))
        }
        _ => Ok(None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn diff(before: bson::RawDocumentBuf, after: bson::RawDocumentBuf) -> Option<Document> {
        update_entry(&before, &after, true)
            .unwrap()
            .map(|d| Document::try_from(d.as_ref()).unwrap())
    }

    #[test]
    fn operator_updates_keep_a_diff_larger_than_the_document() {
        let (before, after) = (rawdoc! {"_id": 1, "a": 1}, rawdoc! {"_id": 1, "a": 2});
        let o = update_entry(&before, &after, false).unwrap().unwrap();
        let o = Document::try_from(o.as_ref()).unwrap();
        assert_eq!(o, doc! {"$v": 2, "diff": {"u": {"a": 2}}});
        let o = update_entry(&before, &after, true).unwrap().unwrap();
        let o = Document::try_from(o.as_ref()).unwrap();
        assert_eq!(o, doc! {"_id": 1, "a": 2});
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
    fn a_bucket_insert_logs_only_the_new_measurement_and_control_fields() {
        let pad = "a meta value long enough that a diff beats the whole bucket";
        let before = rawdoc! {"_id": 1, "control": {"version": 1, "min": {"t": 1, "v": 5}, "max": {"t": 2, "v": 9}},
        "meta": pad, "data": {"t": {"0": 1, "1": 2}, "v": {"0": 5, "1": 9}}};
        let after = rawdoc! {"_id": 1, "control": {"version": 1, "min": {"t": 1, "v": 5}, "max": {"t": 3, "v": 9}},
        "meta": pad, "data": {"t": {"0": 1, "1": 2, "2": 3}, "v": {"0": 5, "1": 9, "2": 7}}};
        assert_eq!(
            diff(before, after).unwrap(),
            doc! {"$v": 2, "diff": {
                "scontrol": {"smax": {"u": {"t": 3}}},
                "sdata": {"st": {"i": {"2": 3}}, "sv": {"i": {"2": 7}}},
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
