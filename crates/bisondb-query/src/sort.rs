//! Sort specifications (`{a: 1, "b.c": -1}`) and document comparison by them.
//!
//! mongod sorts on a key extracted per field: through arrays, an ascending sort
//! uses the smallest reached value and a descending sort the largest; a missing
//! field sorts as null, and an empty array as undefined (just below null).
//! With a collation, strings in the keys compare by it (also when choosing the
//! smallest/largest element of an array).

use std::cmp::Ordering;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document, RawDocumentBuf};

use std::sync::Arc;

use crate::collation::Collation;
use crate::compare::{compare_bson_in, compare_raw_in, NumKey};
use crate::path::{check_field_name, lookup_raw};
use crate::text::TextScoreSource;

/// A parsed sort specification.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct SortSpec {
    fields: Vec<(String, bool)>,
    /// `None`: the simple (binary) collation.
    collation: Option<Arc<Collation>>,
    /// The filter's `$text`, for `{$meta: "textScore"}` fields (see
    /// [`SortSpec::with_text_score`]).
    text_score: Option<TextScoreSource>,
}

/// The path a `{$meta: "textScore"}` sort field is kept under: a field path
/// never starts with `$`, so no index or document field can match it.
pub const TEXT_SCORE_PATH: &str = "$textScore";

fn check_sort_path(path: &str) -> MongoResult<()> {
    if path.is_empty() {
        return Err(MongoError::location(
            40352,
            "FieldPath cannot be constructed with empty string",
        ));
    }
    for part in path.split('.') {
        check_field_name(part)?;
    }
    Ok(())
}

impl SortSpec {
    /// Parses a sort document; each value must be 1 or -1 (any numeric type).
    pub fn parse(spec: &Document) -> MongoResult<SortSpec> {
        let mut fields = Vec::with_capacity(spec.len());
        for (k, v) in spec {
            let ascending =
                match v {
                    // Highest score first, whatever else the spec says.
                    Bson::Document(d)
                        if d.len() == 1 && d.get_str("$meta").is_ok_and(|m| m == "textScore") =>
                    {
                        check_sort_path(k)?;
                        fields.push((TEXT_SCORE_PATH.to_string(), false));
                        continue;
                    }
                    Bson::Document(d) if d.contains_key("$meta") => {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            "$meta sort other than textScore is not supported by BisonDB yet",
                        ))
                    }
                    other => match NumKey::of_bson(other) {
                        Some(n) if n == NumKey::from_i64(1) => true,
                        Some(n) if n == NumKey::from_i64(-1) => false,
                        Some(_) => return Err(MongoError::location(
                            15975,
                            "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
                        )),
                        None => {
                            return Err(MongoError::location(
                                15974,
                                format!("Illegal key in $sort specification: {k}: {other}"),
                            ))
                        }
                    },
                };
            check_sort_path(k)?;
            fields.push((k.clone(), ascending));
        }
        Ok(SortSpec {
            fields,
            collation: None,
            text_score: None,
        })
    }

    /// Whether the spec sorts by `{$meta: "textScore"}`.
    pub fn needs_text_score(&self) -> bool {
        self.fields.iter().any(|(p, _)| p == TEXT_SCORE_PATH)
    }

    /// The same spec reading text scores from `source` (the filter's
    /// `$text`); mongod's 40218 when it sorts by a score the query lacks.
    pub fn with_text_score(mut self, source: Option<TextScoreSource>) -> MongoResult<SortSpec> {
        if self.needs_text_score() {
            match source {
                Some(s) => self.text_score = Some(s),
                None => {
                    return Err(MongoError::location(
                        40218,
                        "query requires text score metadata, but it is not available",
                    ))
                }
            }
        }
        Ok(self)
    }

    fn score(&self, doc: &RawDocument) -> f64 {
        self.text_score
            .as_ref()
            .and_then(|t| t.score(doc))
            .unwrap_or(0.0)
    }

    /// The same spec comparing strings with `collation` (`None`: simple).
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> SortSpec {
        self.collation = collation;
        self
    }

    /// The collation strings compare with (`None`: simple).
    pub fn collation(&self) -> Option<&Collation> {
        self.collation.as_deref()
    }

    /// The sort fields in order, with `true` for ascending.
    pub fn fields(&self) -> &[(String, bool)] {
        &self.fields
    }

    /// Whether the spec sorts nothing (`{}`).
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// The extracted sort key of one document: one value per sort field. Useful
    /// to decorate documents once before sorting many of them.
    pub fn sort_key(&self, doc: &RawDocument) -> Vec<Bson> {
        self.fields
            .iter()
            .map(|(path, asc)| {
                if path == TEXT_SCORE_PATH {
                    return Bson::Double(self.score(doc));
                }
                field_key(doc, path, *asc, self.collation())
                    .and_then(|v| Bson::try_from(v).ok())
                    .unwrap_or(Bson::Null)
            })
            .collect()
    }

    /// Compares two keys produced by [`SortSpec::sort_key`].
    pub fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((x, y), (_, asc)) in a.iter().zip(b.iter()).zip(self.fields.iter()) {
            let o = compare_bson_in(x, y, self.collation());
            let o = if *asc { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Compares two documents by this spec (Equal when the spec is empty).
    pub fn compare_raw(&self, a: &RawDocument, b: &RawDocument) -> Ordering {
        for (path, asc) in &self.fields {
            if path == TEXT_SCORE_PATH {
                let o = self.score(b).total_cmp(&self.score(a));
                if o != Ordering::Equal {
                    return o;
                }
                continue;
            }
            let c = self.collation();
            let ka = field_key(a, path, *asc, c).unwrap_or(RawBsonRef::Null);
            let kb = field_key(b, path, *asc, c).unwrap_or(RawBsonRef::Null);
            let o = compare_raw_in(ka, kb, c);
            let o = if *asc { o } else { o.reverse() };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Owned-document counterpart of [`SortSpec::compare_raw`].
    pub fn compare_doc(&self, a: &Document, b: &Document) -> Ordering {
        match (RawDocumentBuf::try_from(a), RawDocumentBuf::try_from(b)) {
            (Ok(ra), Ok(rb)) => self.compare_raw(&ra, &rb),
            // Unserializable documents cannot be stored; order them last, stably.
            (Ok(_), Err(_)) => Ordering::Less,
            (Err(_), Ok(_)) => Ordering::Greater,
            (Err(_), Err(_)) => Ordering::Equal,
        }
    }
}

/// The sort key of one field: the minimum (ascending) or maximum (descending)
/// of the reached values, looking one level into arrays. `None` means null.
fn field_key<'a>(
    doc: &'a RawDocument,
    path: &str,
    ascending: bool,
    c: Option<&Collation>,
) -> Option<RawBsonRef<'a>> {
    // Common case, without allocating: a top-level scalar field or a missing one.
    if !path.contains('.') {
        match doc.get(path) {
            Ok(Some(RawBsonRef::Array(_))) => {}
            Ok(Some(v)) => return Some(v),
            _ => return None,
        }
    }
    let mut vals = Vec::new();
    let info = lookup_raw(doc, path, &mut vals);
    let mut best: Option<RawBsonRef<'a>> = None;
    let mut consider = |v: RawBsonRef<'a>| {
        best = Some(match best {
            None => v,
            Some(b) => {
                let o = compare_raw_in(v, b, c);
                if (ascending && o == Ordering::Less) || (!ascending && o == Ordering::Greater) {
                    v
                } else {
                    b
                }
            }
        });
    };
    if info.missing {
        consider(RawBsonRef::Null);
    }
    for v in vals {
        match v {
            RawBsonRef::Array(a) => {
                let mut any = false;
                for e in a.into_iter().flatten() {
                    any = true;
                    consider(e);
                }
                if !any {
                    consider(RawBsonRef::Undefined);
                }
            }
            other => consider(other),
        }
    }
    best
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn sorted(spec: Document, docs: Vec<Document>) -> Vec<i32> {
        let s = SortSpec::parse(&spec).unwrap();
        let mut raws: Vec<RawDocumentBuf> = docs
            .iter()
            .map(|d| RawDocumentBuf::try_from(d).unwrap())
            .collect();
        raws.sort_by(|a, b| s.compare_raw(a, b));
        let mut owned = docs.clone();
        owned.sort_by(|a, b| s.compare_doc(a, b));
        let mut keyed: Vec<(Vec<Bson>, &RawDocumentBuf)> =
            raws.iter().map(|r| (s.sort_key(r), r)).collect();
        keyed.sort_by(|a, b| s.compare_keys(&a.0, &b.0));
        let ids: Vec<i32> = raws.iter().map(|r| r.get_i32("_id").unwrap()).collect();
        let owned_ids: Vec<i32> = owned.iter().map(|d| d.get_i32("_id").unwrap()).collect();
        let keyed_ids: Vec<i32> = keyed
            .iter()
            .map(|(_, r)| r.get_i32("_id").unwrap())
            .collect();
        assert_eq!(ids, owned_ids);
        assert_eq!(ids, keyed_ids);
        ids
    }

    #[test]
    fn scalars_and_mixed_types() {
        let docs = vec![
            doc! {"_id": 1, "a": "x"},
            doc! {"_id": 2, "a": 2.5},
            doc! {"_id": 3},
            doc! {"_id": 4, "a": 1},
            doc! {"_id": 5, "a": null},
            doc! {"_id": 6, "a": {"b": 1}},
            doc! {"_id": 7, "a": true},
        ];
        // Missing and null tie and keep input order (stable sort).
        assert_eq!(
            sorted(doc! {"a": 1}, docs.clone()),
            vec![3, 5, 4, 2, 1, 6, 7]
        );
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![7, 6, 1, 2, 4, 3, 5]);
    }

    #[test]
    fn arrays_use_min_and_max() {
        let docs = vec![
            doc! {"_id": 1, "a": [1, 10]},
            doc! {"_id": 2, "a": 5},
            doc! {"_id": 3, "a": [3, 4]},
            doc! {"_id": 4, "a": []},
            doc! {"_id": 5, "a": null},
        ];
        assert_eq!(sorted(doc! {"a": 1}, docs.clone()), vec![4, 5, 1, 3, 2]);
        assert_eq!(sorted(doc! {"a": -1}, docs), vec![1, 2, 3, 5, 4]);
    }

    #[test]
    fn dotted_and_compound() {
        let docs = vec![
            doc! {"_id": 1, "a": [{"b": 3}, {"b": 1}], "c": 1},
            doc! {"_id": 2, "a": {"b": 2}, "c": 1},
            doc! {"_id": 3, "a": [{"b": 2}, {"x": 0}], "c": 0},
            doc! {"_id": 4, "a": {"b": 2}, "c": 0},
        ];
        // _id 3 has a missing branch, so its ascending key is null.
        assert_eq!(
            sorted(doc! {"a.b": 1, "c": 1}, docs.clone()),
            vec![3, 1, 4, 2]
        );
        assert_eq!(
            sorted(doc! {"a.b": -1, "c": -1}, docs.clone()),
            vec![1, 2, 3, 4]
        );
        assert_eq!(sorted(doc! {"c": 1, "_id": -1}, docs), vec![4, 3, 2, 1]);
    }

    #[test]
    fn parse_table() {
        let ok: Vec<(Document, Vec<(&str, bool)>)> = vec![
            (doc! {}, vec![]),
            (doc! {"a": 1, "b": -1}, vec![("a", true), ("b", false)]),
            (doc! {"a": 1.0, "b": -1i64}, vec![("a", true), ("b", false)]),
        ];
        for (spec, want) in ok {
            let s = SortSpec::parse(&spec).unwrap();
            let got: Vec<(&str, bool)> = s.fields().iter().map(|(k, a)| (k.as_str(), *a)).collect();
            assert_eq!(got, want);
        }
        assert!(SortSpec::parse(&doc! {}).unwrap().is_empty());
        let errs: Vec<(Document, i32)> = vec![
            (doc! {"a": 0}, 15975),
            (doc! {"a": 2}, 15975),
            (doc! {"a": "asc"}, 15974),
            (doc! {"a": {"$meta": "searchScore"}}, 238),
            (doc! {"": 1}, 40352),
            (doc! {"a..b": 1}, 15998),
            (doc! {"$a": 1}, 16410),
        ];
        for (spec, code) in errs {
            let e = SortSpec::parse(&spec).unwrap_err();
            assert_eq!(e.code.code(), code, "{spec}: {e}");
        }
        let e = SortSpec::parse(&doc! {"a": 0}).unwrap_err();
        assert_eq!(
            e.message,
            "$sort key ordering must be 1 (for ascending) or -1 (for descending)"
        );
    }

    #[test]
    fn empty_spec_is_equal() {
        let s = SortSpec::parse(&doc! {}).unwrap();
        assert_eq!(
            s.compare_doc(&doc! {"a": 1}, &doc! {"a": 2}),
            Ordering::Equal
        );
    }
}
