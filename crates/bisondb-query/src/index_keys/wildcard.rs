//! Wildcard index keys (`{"$**": 1}`, `{"a.$**": 1}`, `wildcardProjection`,
//! and the wildcard term of a compound wildcard index), as mongod 8 makes
//! them: the document is first reduced by the index's projection, then every
//! leaf contributes one key `(path, value)`:
//! - an object is descended (an empty one is the leaf value `{}`);
//! - an array is descended without adding its positions to the path, and
//!   its path is recorded as multikey; an empty array is the value
//!   `undefined`, and an array directly inside an array is a leaf value;
//! - a field name holding a `.` is skipped (no query can address it);
//! - `_id` is left out unless the projection includes it.
//!
//! The projection is mongod's find projection without computed fields:
//! all inclusions or all exclusions (`_id` apart), with path collisions
//! refused. `{"a.$**": 1}` is the inclusion `{a: 1}`; `{"$**": 1}` without a
//! projection is the exclusion `{_id: 0}`.

use std::collections::BTreeMap;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// The name of a wildcard key's path component, as explain shows it.
pub const PATH_FIELD: &str = "$_path";

/// Whether `field` (a key pattern field name) is a wildcard term.
pub fn is_wildcard_field(field: &str) -> bool {
    field == "$**" || field.ends_with(".$**")
}

/// Which paths a wildcard term indexes.
#[derive(Debug, Clone, PartialEq)]
pub struct WildcardPaths {
    /// The projection includes `paths` (else it excludes them).
    inclusion: bool,
    /// Projected dotted paths, `_id` apart.
    paths: Vec<String>,
    /// `_id` is indexed.
    id: bool,
    /// `paths` as a tree, for projecting documents.
    tree: Tree,
}

#[derive(Debug, Clone, PartialEq, Default)]
struct Tree(BTreeMap<String, Node>);

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Leaf,
    Inner(Tree),
}

fn is_under(path: &str, root: &str) -> bool {
    path == root
        || path
            .strip_prefix(root)
            .is_some_and(|rest| rest.starts_with('.'))
}

fn projection_value(path: &str, v: &Bson) -> MongoResult<bool> {
    match v {
        Bson::Boolean(b) => Ok(*b),
        Bson::Int32(i) => Ok(*i != 0),
        Bson::Int64(i) => Ok(*i != 0),
        Bson::Double(d) => Ok(*d != 0.0),
        Bson::Decimal128(d) => Ok(d.to_string() != "0" && !d.to_string().starts_with("0E")),
        _ => Err(MongoError::location(
            51271,
            format!(
                "Bad projection specification, cannot use computed fields when parsing a spec in kBanComputedFields mode (field '{path}')"
            ),
        )),
    }
}

fn flatten(prefix: &str, d: &Document, out: &mut Vec<(String, bool)>) -> MongoResult<()> {
    for (k, v) in d {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if k.starts_with('$') {
            return Err(MongoError::location(
                51271,
                format!(
                    "Bad projection specification, cannot use computed fields when parsing a spec in kBanComputedFields mode (field '{path}')"
                ),
            ));
        }
        match v {
            Bson::Document(sub) if !sub.is_empty() => flatten(&path, sub, out)?,
            other => out.push((path.clone(), projection_value(&path, other)?)),
        }
    }
    Ok(())
}

impl WildcardPaths {
    /// The paths of wildcard term `field` (`$**` or `a.b.$**`) under the
    /// index's `wildcardProjection` (validated here: 31254 for a mix of
    /// inclusions and exclusions, 51271 for computed fields, 31249 for a
    /// path collision).
    pub fn new(field: &str, projection: Option<&Document>) -> MongoResult<WildcardPaths> {
        if let Some(root) = field.strip_suffix(".$**") {
            return Ok(WildcardPaths::from_parts(
                true,
                vec![root.to_string()],
                false,
            ));
        }
        let Some(p) = projection else {
            return Ok(WildcardPaths::from_parts(false, Vec::new(), false));
        };
        let mut entries = Vec::new();
        flatten("", p, &mut entries)?;
        let mut id = None;
        let mut mode: Option<bool> = None;
        let mut paths = Vec::new();
        for (path, include) in entries {
            if path == "_id" {
                id = Some(include);
                continue;
            }
            match mode {
                Some(m) if m != include => {
                    let (what, kind) = if include {
                        ("inclusion", "exclusion")
                    } else {
                        ("exclusion", "inclusion")
                    };
                    return Err(MongoError::location(
                        31254,
                        format!("Cannot do {what} on field {path} in {kind} projection"),
                    ));
                }
                _ => mode = Some(include),
            }
            paths.push(path);
        }
        for (i, a) in paths.iter().enumerate() {
            for b in paths.iter().skip(i + 1) {
                let (short, long) = if a.len() <= b.len() { (a, b) } else { (b, a) };
                if is_under(long, short) {
                    let rest = long.get(short.len() + 1..).unwrap_or_default();
                    return Err(MongoError::location(
                        31249,
                        format!("Path collision at {long} remaining portion {rest}"),
                    ));
                }
            }
        }
        // Only `_id` given: it decides the kind.
        let inclusion = mode.unwrap_or(id == Some(true));
        Ok(WildcardPaths::from_parts(
            inclusion,
            paths,
            id == Some(true),
        ))
    }

    fn from_parts(inclusion: bool, paths: Vec<String>, id: bool) -> WildcardPaths {
        let mut tree = Tree::default();
        for p in &paths {
            tree.insert(p);
        }
        // `_id` follows its own rule: excluded unless included.
        if inclusion == id {
            tree.insert("_id");
        }
        WildcardPaths {
            inclusion,
            paths,
            id,
            tree,
        }
    }

    /// Whether every value a query on `path` can reach is indexed, so the
    /// index may answer predicates on it: `path` is at or under an included
    /// path, or at or under no excluded one.
    pub fn covers(&self, path: &str) -> bool {
        if is_under(path, "_id") {
            return self.id;
        }
        if self.inclusion {
            self.paths.iter().any(|r| is_under(path, r))
        } else {
            !self.paths.iter().any(|r| is_under(path, r))
        }
    }

    /// The `(path, value)` leaves of `doc` after projection, in document
    /// order, and the paths where an array was descended (sorted, once each).
    pub fn leaves(&self, doc: &Document) -> (Vec<(String, Bson)>, Vec<String>) {
        let projected = self.tree.project_doc(doc, self.inclusion);
        let mut out = Vec::new();
        let mut multikey = Vec::new();
        let mut path = String::new();
        walk_doc(&projected, &mut path, &mut out, &mut multikey);
        multikey.sort();
        multikey.dedup();
        (out, multikey)
    }
}

impl Tree {
    fn insert(&mut self, path: &str) {
        let mut node = self;
        let parts: Vec<&str> = path.split('.').collect();
        for (i, part) in parts.iter().enumerate() {
            if i + 1 == parts.len() {
                node.0.insert((*part).to_string(), Node::Leaf);
                return;
            }
            let entry = node
                .0
                .entry((*part).to_string())
                .or_insert_with(|| Node::Inner(Tree::default()));
            match entry {
                Node::Inner(t) => node = t,
                // A shorter path already covers this one.
                Node::Leaf => return,
            }
        }
    }

    fn project_doc(&self, doc: &Document, inclusion: bool) -> Document {
        let mut out = Document::new();
        for (k, v) in doc {
            match (self.0.get(k), inclusion) {
                (Some(Node::Leaf), true) | (None, false) => {
                    out.insert(k.clone(), v.clone());
                }
                (Some(Node::Leaf), false) | (None, true) => {}
                (Some(Node::Inner(t)), _) => {
                    if let Some(p) = t.project_value(v, inclusion) {
                        out.insert(k.clone(), p);
                    }
                }
            }
        }
        out
    }

    /// A value below an inner node: documents are projected, arrays
    /// element-wise; a scalar stays only in an exclusion.
    fn project_value(&self, v: &Bson, inclusion: bool) -> Option<Bson> {
        match v {
            Bson::Document(d) => Some(Bson::Document(self.project_doc(d, inclusion))),
            Bson::Array(a) => Some(Bson::Array(
                a.iter()
                    .filter_map(|e| self.project_value(e, inclusion))
                    .collect(),
            )),
            other if !inclusion => Some(other.clone()),
            _ => None,
        }
    }
}

fn walk_doc(
    d: &Document,
    path: &mut String,
    out: &mut Vec<(String, Bson)>,
    multikey: &mut Vec<String>,
) {
    for (k, v) in d {
        if k.contains('.') {
            continue;
        }
        let len = path.len();
        if !path.is_empty() {
            path.push('.');
        }
        path.push_str(k);
        visit(v, false, path, out, multikey);
        path.truncate(len);
    }
}

fn visit(
    v: &Bson,
    in_array: bool,
    path: &mut String,
    out: &mut Vec<(String, Bson)>,
    multikey: &mut Vec<String>,
) {
    match v {
        // An array inside an array is a value, not descended.
        Bson::Array(_) if in_array => out.push((path.clone(), v.clone())),
        Bson::Array(a) => {
            multikey.push(path.clone());
            if a.is_empty() {
                out.push((path.clone(), Bson::Undefined));
            }
            for e in a {
                visit(e, true, path, out, multikey);
            }
        }
        Bson::Document(d) if d.is_empty() => out.push((path.clone(), v.clone())),
        Bson::Document(d) => walk_doc(d, path, out, multikey),
        other => out.push((path.clone(), other.clone())),
    }
}

/// Checks a compound wildcard key pattern as mongod 7+ does: one wildcard
/// term, and no regular field the wildcard term also indexes (the
/// projection must exclude it). `CannotCreateIndex` otherwise.
pub fn check_compound(
    fields: &[&str],
    projection: Option<&Document>,
) -> MongoResult<Option<WildcardPaths>> {
    let wild: Vec<&&str> = fields.iter().filter(|f| is_wildcard_field(f)).collect();
    let Some(w) = wild.first() else {
        return Ok(None);
    };
    if wild.len() > 1 {
        return Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            "A compound wildcard index can only have one wildcard field",
        ));
    }
    let paths = WildcardPaths::new(w, projection)?;
    for f in fields.iter().filter(|f| !is_wildcard_field(f)) {
        let overlaps = if paths.inclusion {
            paths.paths.iter().any(|r| is_under(f, r) || is_under(r, f))
        } else {
            // An exclusion indexes `f` unless `f` (or a path above it) is excluded.
            !(paths.paths.iter().any(|r| is_under(f, r)) || (is_under(f, "_id") && !paths.id))
        };
        if overlaps {
            return Err(MongoError::new(
                ErrorCode::CannotCreateIndex,
                format!(
                    "Compound wildcard index cannot index the same field twice: '{f}' is indexed by the wildcard term too; exclude it with 'wildcardProjection'"
                ),
            ));
        }
    }
    Ok(Some(paths))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn leaves(
        field: &str,
        proj: Option<Document>,
        d: Document,
    ) -> (Vec<(String, Bson)>, Vec<String>) {
        let p = WildcardPaths::new(field, proj.as_ref()).unwrap_or_else(|e| panic!("{e}"));
        p.leaves(&d)
    }

    fn keys(v: Vec<(&str, Bson)>) -> Vec<(String, Bson)> {
        v.into_iter().map(|(p, b)| (p.to_string(), b)).collect()
    }

    /// mongod 8's key generator golden file
    /// (src/mongo/db/index/expected_output/key_generator_golden_test/wildcard_keys.txt).
    #[test]
    fn mongod_golden_cases() {
        type Case = (
            &'static str,
            Option<Document>,
            Document,
            Vec<(&'static str, Bson)>,
            Vec<&'static str>,
        );
        let cases: Vec<Case> = vec![
            (
                "$**",
                None,
                doc! {"a": 1, "b": "hello", "c": true},
                vec![("a", 1.into()), ("b", "hello".into()), ("c", true.into())],
                vec![],
            ),
            (
                "$**",
                None,
                doc! {"a": {"b": 1, "c": 2}},
                vec![("a.b", 1.into()), ("a.c", 2.into())],
                vec![],
            ),
            (
                "$**",
                None,
                doc! {"a": [1, 2, 3]},
                vec![("a", 1.into()), ("a", 2.into()), ("a", 3.into())],
                vec!["a"],
            ),
            ("$**", None, doc! {}, vec![], vec![]),
            (
                "$**",
                None,
                doc! {"a": null},
                vec![("a", Bson::Null)],
                vec![],
            ),
            (
                "$**",
                None,
                doc! {"a": {}},
                vec![("a", Bson::Document(doc! {}))],
                vec![],
            ),
            (
                "$**",
                None,
                doc! {"a": []},
                vec![("a", Bson::Undefined)],
                vec!["a"],
            ),
            (
                "$**",
                None,
                doc! {"a": [{"b": 1}, {"b": 2}]},
                vec![("a.b", 1.into()), ("a.b", 2.into())],
                vec!["a"],
            ),
            (
                "$**",
                None,
                doc! {"_id": 1, "a": 2, "b": 3},
                vec![("a", 2.into()), ("b", 3.into())],
                vec![],
            ),
            (
                "a.$**",
                None,
                doc! {"a": {"x": 1, "y": 2}, "b": 3},
                vec![("a.x", 1.into()), ("a.y", 2.into())],
                vec![],
            ),
            (
                "$**",
                None,
                doc! {"a": [[1, 2], [3, 4]]},
                vec![("a", bson::bson!([1, 2])), ("a", bson::bson!([3, 4]))],
                vec!["a"],
            ),
            (
                "$**",
                None,
                doc! {"a": [{"b": [1, 2]}, {"b": [3, 4]}]},
                vec![
                    ("a.b", 1.into()),
                    ("a.b", 2.into()),
                    ("a.b", 3.into()),
                    ("a.b", 4.into()),
                ],
                vec!["a", "a.b"],
            ),
            (
                "$**",
                None,
                doc! {"a": {"b": [{"c": [1, 2]}, {"c": [3]}]}},
                vec![
                    ("a.b.c", 1.into()),
                    ("a.b.c", 2.into()),
                    ("a.b.c", 3.into()),
                ],
                vec!["a.b", "a.b.c"],
            ),
            (
                "a.b.$**",
                None,
                doc! {"a": {"b": {"x": 1, "y": 2}, "c": 3}, "d": 4},
                vec![("a.b.x", 1.into()), ("a.b.y", 2.into())],
                vec![],
            ),
            (
                "$**",
                Some(doc! {"a": 1, "b": 1}),
                doc! {"a": 1, "b": 2, "c": 3, "d": 4},
                vec![("a", 1.into()), ("b", 2.into())],
                vec![],
            ),
            (
                "$**",
                Some(doc! {"a": 0, "b": 0}),
                doc! {"a": 1, "b": 2, "c": 3, "d": 4},
                vec![("c", 3.into()), ("d", 4.into())],
                vec![],
            ),
            ("$**", None, doc! {"_id": "onlyid"}, vec![], vec![]),
        ];
        for (field, proj, d, want, mk) in cases {
            let (got, got_mk) = leaves(field, proj.clone(), d.clone());
            assert_eq!(got, keys(want), "{field} {proj:?} {d}");
            assert_eq!(got_mk, mk, "{field} {proj:?} {d}");
        }
    }

    #[test]
    fn projections_and_id() {
        let (got, _) = leaves(
            "$**",
            Some(doc! {"_id": 1, "a": 1}),
            doc! {"_id": 7, "a": 1, "b": 2},
        );
        assert_eq!(got, keys(vec![("_id", 7.into()), ("a", 1.into())]));
        let (got, _) = leaves(
            "$**",
            Some(doc! {"_id": 1, "a": 0}),
            doc! {"_id": 7, "a": 1, "b": 2},
        );
        assert_eq!(got, keys(vec![("_id", 7.into()), ("b", 2.into())]));
        // Inclusion below an array: scalars dropped, documents projected.
        let (got, mk) = leaves(
            "$**",
            Some(doc! {"a.b": 1}),
            doc! {"a": [1, {"b": 2, "c": 3}, {"c": 4}]},
        );
        assert_eq!(
            got,
            keys(vec![("a.b", 2.into()), ("a", Bson::Document(doc! {}))])
        );
        assert_eq!(mk, vec!["a"]);
        // Field names holding a dot are skipped.
        let (got, _) = leaves("$**", None, doc! {"a.b": 1, "c": 2});
        assert_eq!(got, keys(vec![("c", 2.into())]));
    }

    #[test]
    fn projection_errors() {
        let code = |p: Document| {
            WildcardPaths::new("$**", Some(&p))
                .err()
                .map(|e| e.code.code())
        };
        assert_eq!(code(doc! {"a": 1, "b": 0}), Some(31254));
        assert_eq!(code(doc! {"a": 1, "b": "x"}), Some(51271));
        assert_eq!(code(doc! {"a": 1, "a.b": 1}), Some(31249));
        assert_eq!(code(doc! {"a": {"b": 1}, "c": 1}), None);
    }

    #[test]
    fn coverage() {
        let all = WildcardPaths::new("$**", None).unwrap_or_else(|e| panic!("{e}"));
        assert!(all.covers("a.b") && !all.covers("_id") && !all.covers("_id.x"));
        let sub = WildcardPaths::new("a.$**", None).unwrap_or_else(|e| panic!("{e}"));
        assert!(sub.covers("a") && sub.covers("a.b") && !sub.covers("ab") && !sub.covers("b"));
        let ex =
            WildcardPaths::new("$**", Some(&doc! {"a.b": 0})).unwrap_or_else(|e| panic!("{e}"));
        assert!(ex.covers("a") && ex.covers("a.c") && !ex.covers("a.b.c"));
    }

    #[test]
    fn compound_checks() {
        assert!(check_compound(&["a", "$**"], None).is_err());
        assert!(check_compound(&["a", "$**"], Some(&doc! {"a": 0})).is_ok());
        assert!(check_compound(&["a", "b.$**"], None).is_ok());
        assert!(check_compound(&["b.c", "b.$**"], None).is_err());
        assert!(check_compound(&["a.$**", "b.$**"], None).is_err());
        assert!(check_compound(&["_id", "$**"], None).is_ok());
    }
}
