//! Mutable dotted-path access for update operators and aggregation stages that
//! write fields: numeric components index arrays, missing intermediate fields
//! become documents, and writes past an array's end pad it with nulls, as
//! mongod's update system does.

use crate::value::render;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// How far past an array's end a write may pad with nulls; mongod refuses to
/// grow arrays without bound from one update.
const MAX_PAD: usize = 1_500_000;

/// Parses an array index component: ASCII digits without a leading zero.
pub fn parse_index(s: &str) -> Option<usize> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) || (s.len() > 1 && s.starts_with('0'))
    {
        return None;
    }
    s.parse().ok()
}

/// The result of looking a path up without changing anything.
#[derive(Debug)]
pub enum Lookup<'a> {
    Found(&'a Bson),
    Missing,
    /// A scalar (or an array met by a non-numeric component) stands where a
    /// container is needed. `name` is the field holding it.
    Blocked {
        name: &'a str,
        value: &'a Bson,
        next: &'a str,
    },
}

/// Looks a path up in a document without traversing arrays implicitly.
pub fn lookup<'a>(doc: &'a Document, parts: &'a [String]) -> Lookup<'a> {
    let Some((first, rest)) = parts.split_first() else {
        return Lookup::Missing;
    };
    let Some(mut cur) = doc.get(first) else {
        return Lookup::Missing;
    };
    let mut name: &str = first;
    for part in rest {
        let next = match cur {
            Bson::Document(d) => d.get(part),
            Bson::Array(a) => match parse_index(part) {
                Some(i) => a.get(i),
                None => {
                    return Lookup::Blocked {
                        name,
                        value: cur,
                        next: part,
                    }
                }
            },
            other => {
                return Lookup::Blocked {
                    name,
                    value: other,
                    next: part,
                }
            }
        };
        match next {
            Some(v) => {
                cur = v;
                name = part;
            }
            None => return Lookup::Missing,
        }
    }
    Lookup::Found(cur)
}

fn not_viable(next: &str, name: &str, value: &Bson) -> MongoError {
    MongoError::new(
        ErrorCode::PathNotViable,
        format!(
            "Cannot create field '{next}' in element {{{name}: {}}}",
            render(value)
        ),
    )
}

/// Sets `value` at `parts`, creating intermediate documents.
pub fn set_path(doc: &mut Document, parts: &[String], value: Bson) -> MongoResult<()> {
    let Some((first, rest)) = parts.split_first() else {
        return Err(MongoError::internal("set_path with an empty path"));
    };
    if rest.is_empty() {
        doc.insert(first.clone(), value);
        return Ok(());
    }
    if !doc.contains_key(first) {
        doc.insert(first.clone(), Bson::Document(Document::new()));
    }
    match doc.get_mut(first) {
        Some(child) => set_in_value(child, first, rest, value),
        None => Err(MongoError::internal("field vanished during set_path")),
    }
}

fn set_in_value(target: &mut Bson, name: &str, parts: &[String], value: Bson) -> MongoResult<()> {
    let Some((first, rest)) = parts.split_first() else {
        *target = value;
        return Ok(());
    };
    match target {
        Bson::Document(d) => set_path(d, parts, value),
        Bson::Array(a) => {
            let Some(idx) = parse_index(first) else {
                return Err(not_viable(first, name, &Bson::Array(a.clone())));
            };
            if idx >= a.len() {
                if idx - a.len() > MAX_PAD {
                    return Err(MongoError::bad_value(format!(
                        "can't set array element at index {idx}: it is too far past the end of the array"
                    )));
                }
                a.resize(idx, Bson::Null);
                a.push(if rest.is_empty() {
                    Bson::Null
                } else {
                    Bson::Document(Document::new())
                });
            }
            match a.get_mut(idx) {
                Some(slot) if rest.is_empty() => {
                    *slot = value;
                    Ok(())
                }
                Some(slot) => set_in_value(slot, first, rest, value),
                None => Err(MongoError::internal("array index vanished during set_path")),
            }
        }
        other => Err(not_viable(first, name, other)),
    }
}

/// Checks that `set_path` would succeed without changing the document.
pub fn check_settable(doc: &Document, parts: &[String]) -> MongoResult<()> {
    if let Lookup::Blocked { name, value, next } = lookup(doc, parts) {
        return Err(not_viable(next, name, value));
    }
    Ok(())
}

/// Removes the value at `parts`. Array elements are set to null rather than
/// removed (mongod's `$unset` keeps array positions). Returns whether anything
/// was there.
pub fn unset_path(doc: &mut Document, parts: &[String]) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    if rest.is_empty() {
        return doc.remove(first).is_some();
    }
    match doc.get_mut(first) {
        Some(child) => unset_in_value(child, rest),
        None => false,
    }
}

fn unset_in_value(target: &mut Bson, parts: &[String]) -> bool {
    let Some((first, rest)) = parts.split_first() else {
        return false;
    };
    match target {
        Bson::Document(d) => unset_path(d, parts),
        Bson::Array(a) => {
            let Some(slot) = parse_index(first).and_then(|i| a.get_mut(i)) else {
                return false;
            };
            if rest.is_empty() {
                *slot = Bson::Null;
                true
            } else {
                unset_in_value(slot, rest)
            }
        }
        _ => false,
    }
}

/// Splits a dotted path into components.
pub fn split(path: &str) -> Vec<String> {
    path.split('.').map(str::to_string).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn set_creates_and_pads() {
        let cases = [
            (doc! {}, "a.b", doc! {"a": {"b": 1}}),
            (doc! {"a": [1]}, "a.3", doc! {"a": [1, null, null, 1]}),
            (doc! {"a": []}, "a.1.b", doc! {"a": [null, {"b": 1}]}),
            (
                doc! {"x": 0, "a": {"c": 2}},
                "a.b",
                doc! {"x": 0, "a": {"c": 2, "b": 1}},
            ),
        ];
        for (mut d, p, want) in cases {
            set_path(&mut d, &split(p), Bson::Int32(1)).unwrap();
            assert_eq!(d, want, "{p}");
        }
    }

    #[test]
    fn set_through_scalar_fails() {
        let mut d = doc! {"a": 5};
        let e = set_path(&mut d, &split("a.b"), Bson::Int32(1)).unwrap_err();
        assert_eq!(e.code, ErrorCode::PathNotViable);
        assert_eq!(e.message, "Cannot create field 'b' in element {a: 5}");
        let mut d = doc! {"a": [1]};
        assert!(set_path(&mut d, &split("a.b"), Bson::Int32(1)).is_err());
        assert!(check_settable(&doc! {"a": [1]}, &split("a.b")).is_err());
    }

    #[test]
    fn unset_nulls_array_elements() {
        let mut d = doc! {"a": [1, 2], "b": {"c": 1}};
        assert!(unset_path(&mut d, &split("a.0")));
        assert!(unset_path(&mut d, &split("b.c")));
        assert!(!unset_path(&mut d, &split("z.y")));
        assert_eq!(d, doc! {"a": [null, 2], "b": {}});
    }

    #[test]
    fn index_parsing() {
        assert_eq!(parse_index("0"), Some(0));
        assert_eq!(parse_index("12"), Some(12));
        assert_eq!(parse_index("01"), None);
        assert_eq!(parse_index("-1"), None);
        assert_eq!(parse_index("99999999999999999999999"), None);
    }
}
