//! An update's `updateDescription` from the oplog's `$v: 2` diff.
//!
//! The diff mirrors the document's shape: an object level has `u` (fields
//! set), `i` (fields added), `d` (fields removed) and `s<field>` (a nested
//! diff); an array level has `a: true`, `l` (the new length, written only
//! when the array shrank), `u<index>` (elements set) and `s<index>` (nested
//! diffs). A path is written dotted; when a dotted path could be read two
//! ways (a field name that is a number or holds a dot), `disambiguatedPaths`
//! gives its components, array indexes as integers.
//!
//! [`apply`] applies a diff to the document before the update (a stored
//! pre-image), which gives the post-image `fullDocument: "whenAvailable"`
//! and `"required"` return, as mongod computes it.

use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

/// One step of a path: an object field or an array index.
#[derive(Debug, Clone)]
enum Part {
    Field(String),
    Index(i32),
}

#[derive(Default)]
struct Out {
    updated: Document,
    removed: Vec<Bson>,
    truncated: Vec<Bson>,
    disambiguated: Document,
}

fn bad(msg: &str) -> MongoError {
    MongoError::internal(format!("malformed update diff in the oplog: {msg}"))
}

/// An array diff's `l`: the array's new length.
fn new_length(v: &Bson) -> MongoResult<i64> {
    match v {
        Bson::Int32(n) => Ok(i64::from(*n)),
        Bson::Int64(n) => Ok(*n),
        Bson::Double(d) => Ok(*d as i64),
        _ => Err(bad("'l' is not a number")),
    }
}

impl Out {
    /// Records the path's dotted form, and its components when the dotted
    /// form is ambiguous.
    fn path(&mut self, parts: &[Part]) -> String {
        let mut dotted = String::new();
        let mut ambiguous = false;
        for (i, p) in parts.iter().enumerate() {
            if i > 0 {
                dotted.push('.');
            }
            match p {
                Part::Field(f) => {
                    ambiguous |=
                        f.contains('.') || (!f.is_empty() && f.bytes().all(|b| b.is_ascii_digit()));
                    dotted.push_str(f);
                }
                Part::Index(n) => dotted.push_str(&n.to_string()),
            }
        }
        if ambiguous {
            let comps = parts
                .iter()
                .map(|p| match p {
                    Part::Field(f) => Bson::String(f.clone()),
                    Part::Index(n) => Bson::Int32(*n),
                })
                .collect();
            self.disambiguated
                .insert(dotted.clone(), Bson::Array(comps));
        }
        dotted
    }

    fn object(&mut self, diff: &Document, at: &mut Vec<Part>) -> MongoResult<()> {
        for (k, v) in diff {
            match k.as_str() {
                "u" | "i" => {
                    let Bson::Document(fields) = v else {
                        return Err(bad("'u'/'i' is not an object"));
                    };
                    for (f, value) in fields {
                        at.push(Part::Field(f.clone()));
                        let p = self.path(at);
                        self.updated.insert(p, value.clone());
                        at.pop();
                    }
                }
                "d" => {
                    let Bson::Document(fields) = v else {
                        return Err(bad("'d' is not an object"));
                    };
                    for f in fields.keys() {
                        at.push(Part::Field(f.clone()));
                        let p = self.path(at);
                        self.removed.push(Bson::String(p));
                        at.pop();
                    }
                }
                _ => {
                    let Some(field) = k.strip_prefix('s') else {
                        return Err(bad(&format!("unknown key '{k}'")));
                    };
                    let Bson::Document(sub) = v else {
                        return Err(bad("a nested diff is not an object"));
                    };
                    at.push(Part::Field(field.to_string()));
                    self.nested(sub, at)?;
                    at.pop();
                }
            }
        }
        Ok(())
    }

    fn nested(&mut self, sub: &Document, at: &mut Vec<Part>) -> MongoResult<()> {
        if matches!(sub.get("a"), Some(Bson::Boolean(true))) {
            self.array(sub, at)
        } else {
            self.object(sub, at)
        }
    }

    fn array(&mut self, diff: &Document, at: &mut Vec<Part>) -> MongoResult<()> {
        for (k, v) in diff {
            if k == "a" {
                continue;
            }
            if k == "l" {
                let size = new_length(v)?;
                let p = self.path(at);
                self.truncated.push(Bson::Document(bson::doc! {
                    "field": p,
                    "newSize": i32::try_from(size).map_err(|_| bad("'l' out of range"))?,
                }));
                continue;
            }
            let (kind, index) = k.split_at(1.min(k.len()));
            let index: i32 = index
                .parse()
                .map_err(|_| bad(&format!("bad array key '{k}'")))?;
            at.push(Part::Index(index));
            match (kind, v) {
                ("u", value) => {
                    let p = self.path(at);
                    self.updated.insert(p, value.clone());
                }
                ("s", Bson::Document(sub)) => self.nested(sub, at)?,
                _ => return Err(bad(&format!("bad array key '{k}'"))),
            }
            at.pop();
        }
        Ok(())
    }
}

/// The document `diff` (an update entry's `$v: 2` diff) makes of `before`.
pub fn apply(before: &Document, diff: &Document) -> MongoResult<Document> {
    let mut doc = before.clone();
    apply_object(&mut doc, diff)?;
    Ok(doc)
}

fn apply_object(doc: &mut Document, diff: &Document) -> MongoResult<()> {
    for (k, v) in diff {
        match k.as_str() {
            "d" => {
                let Bson::Document(fields) = v else {
                    return Err(bad("'d' is not an object"));
                };
                for f in fields.keys() {
                    doc.remove(f);
                }
            }
            // Fields set in place keep their position; new ones go last.
            "u" | "i" => {
                let Bson::Document(fields) = v else {
                    return Err(bad("'u'/'i' is not an object"));
                };
                for (f, value) in fields {
                    doc.insert(f.clone(), value.clone());
                }
            }
            _ => {
                let Some(field) = k.strip_prefix('s') else {
                    return Err(bad(&format!("unknown key '{k}'")));
                };
                let Bson::Document(sub) = v else {
                    return Err(bad("a nested diff is not an object"));
                };
                let Some(target) = doc.get_mut(field) else {
                    return Err(bad("a nested diff of a missing field"));
                };
                apply_nested(target, sub)?;
            }
        }
    }
    Ok(())
}

fn apply_nested(target: &mut Bson, sub: &Document) -> MongoResult<()> {
    match (target, matches!(sub.get("a"), Some(Bson::Boolean(true)))) {
        (Bson::Array(items), true) => apply_array(items, sub),
        (Bson::Document(d), false) => apply_object(d, sub),
        _ => Err(bad("a nested diff does not match the field's type")),
    }
}

fn apply_array(items: &mut Vec<Bson>, diff: &Document) -> MongoResult<()> {
    for (k, v) in diff {
        if k == "a" {
            continue;
        }
        if k == "l" {
            let size = usize::try_from(new_length(v)?).map_err(|_| bad("'l' out of range"))?;
            items.resize(size, Bson::Null);
            continue;
        }
        let (kind, index) = k.split_at(1.min(k.len()));
        let index: usize = index
            .parse()
            .map_err(|_| bad(&format!("bad array key '{k}'")))?;
        match (kind, v) {
            ("u", value) => {
                if index >= items.len() {
                    items.resize(index + 1, Bson::Null);
                }
                if let Some(slot) = items.get_mut(index) {
                    *slot = value.clone();
                }
            }
            ("s", Bson::Document(sub)) => {
                let Some(slot) = items.get_mut(index) else {
                    return Err(bad("a nested diff of a missing array element"));
                };
                apply_nested(slot, sub)?;
            }
            _ => return Err(bad(&format!("bad array key '{k}'"))),
        }
    }
    Ok(())
}

/// The `updateDescription` of an update whose oplog `o` is
/// `{$v: 2, diff: ...}`; `disambiguatedPaths` only with `showExpandedEvents`.
pub fn update_description(diff: &Document, expanded: bool) -> MongoResult<Document> {
    let mut out = Out::default();
    out.object(diff, &mut Vec::new())?;
    let mut d = bson::doc! {
        "updatedFields": out.updated,
        "removedFields": out.removed,
        "truncatedArrays": out.truncated,
    };
    if expanded {
        d.insert("disambiguatedPaths", out.disambiguated);
    }
    Ok(d)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn applies_to_the_pre_image() {
        let before = doc! {"_id": 1, "gone": 1, "a": 0, "b": {"c": 1, "d": {"x": 1}}, "arr": [1, 2, 3], "t": [{"y": 1}]};
        let diff = doc! {"d": {"gone": false}, "u": {"a": 1}, "i": {"new": "x"}, "sb": {"u": {"c": 2}, "sd": {"i": {"e": 3}}}, "sarr": {"a": true, "l": 2, "u4": 9}, "st": {"a": true, "s0": {"u": {"y": 2}}}};
        assert_eq!(
            apply(&before, &diff).unwrap(),
            doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": {"x": 1, "e": 3}}, "arr": [1, 2, null, null, 9], "t": [{"y": 2}], "new": "x"}
        );
        assert!(apply(&before, &doc! {"smissing": {"u": {"x": 1}}}).is_err());
    }

    #[test]
    fn flat_and_nested() {
        let diff = doc! {"d": {"gone": false}, "u": {"a": 1}, "i": {"new": "x"}, "sb": {"u": {"c": 2}, "sd": {"i": {"e": 3}}}};
        let d = update_description(&diff, false).unwrap();
        assert_eq!(
            d,
            doc! {
                "updatedFields": {"a": 1, "new": "x", "b.c": 2, "b.d.e": 3},
                "removedFields": ["gone"],
                "truncatedArrays": [],
            }
        );
    }

    #[test]
    fn arrays() {
        let diff = doc! {"sarr": {"a": true, "l": 2, "u1": 5}, "sobjs": {"a": true, "s0": {"u": {"x": 1}}}};
        let d = update_description(&diff, true).unwrap();
        assert_eq!(
            d,
            doc! {
                "updatedFields": {"arr.1": 5, "objs.0.x": 1},
                "removedFields": [],
                "truncatedArrays": [{"field": "arr", "newSize": 2}],
                "disambiguatedPaths": {},
            }
        );
    }

    #[test]
    fn disambiguates_numeric_and_dotted_fields() {
        // {a: {"1": ...}} and {a: [{"1": ...}]} as the spec tests change them.
        let d = update_description(&doc! {"sa": {"u": {"1": 2}}}, true).unwrap();
        assert_eq!(
            d.get_document("disambiguatedPaths").unwrap(),
            &doc! {"a.1": ["a", "1"]}
        );
        let d = update_description(&doc! {"sa": {"a": true, "s0": {"u": {"1": 2}}}}, true).unwrap();
        assert_eq!(
            d.get_document("disambiguatedPaths").unwrap(),
            &doc! {"a.0.1": ["a", 0, "1"]}
        );
        let d = update_description(&doc! {"d": {"x.y": false}}, true).unwrap();
        assert_eq!(
            d.get_document("disambiguatedPaths").unwrap(),
            &doc! {"x.y": ["x.y"]}
        );
        assert_eq!(
            d.get_array("removedFields").unwrap(),
            &vec![Bson::String("x.y".into())]
        );
        assert!(update_description(&doc! {"q": 1}, true).is_err());
    }
}
