//! Find projections (`{a: 1, "b.c": 1}`, `{a: 0}`, `$slice`, `$elemMatch`).
//!
//! A projection is parsed into a tree of path components. Inclusion
//! projections copy only the named paths (plus `_id` unless excluded), keeping
//! the input document's field order; exclusion projections copy everything
//! except the named paths. Through arrays the tree applies to each embedded
//! document, as mongod does. `$slice` does not decide the mode by itself.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::RawDocument;
use bson::{doc, Bson, Document, RawDocumentBuf};

use crate::compare::NumKey;
use crate::expr::{Expr, Vars, ABSENT_META};
use crate::matcher::Matcher;
use crate::path::check_field_name;

/// A parsed find projection.
#[derive(Debug, Clone)]
pub struct Projection {
    root: Node,
    inclusion: bool,
    include_id: bool,
    /// The query filter, needed only by the positional operator `a.$`.
    filter: Option<Matcher>,
    has_positional: bool,
    /// Where `{$meta: "textScore"}` fields read the score (the filter's
    /// `$text`); `None` when the projection has no such field.
    text_score: Option<crate::text::TextScoreSource>,
}

#[derive(Debug, Clone, Default)]
struct Node {
    children: Vec<(String, Child)>,
}

#[derive(Debug, Clone)]
enum Child {
    Leaf(Leaf),
    Sub(Node),
}

#[derive(Debug, Clone)]
enum Leaf {
    Include,
    Exclude,
    /// `$slice`: optional skip, then limit (negative limit without skip counts from the end).
    Slice(Option<i64>, i64),
    /// `$elemMatch`: a matcher over `{x: <array>}` testing one element at a time.
    ElemMatch(Box<Matcher>),
    /// `a.$`: the array element the query matched.
    Positional,
    /// A computed field (an aggregation expression).
    Computed(Expr),
    /// `{$meta: "textScore"}`: the document's text search score.
    TextScore,
    /// Other `{$meta: ...}` fields, filled from [`DocMeta`].
    Meta(MetaField),
}

/// The metadata a `find` projection can show besides the text score.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MetaField {
    /// `"indexKey"`: the key of the secondary index the plan read.
    IndexKey,
    /// `"sortKey"`: the values the sort compared, as an array.
    SortKey,
    /// Metadata nothing here produces (Atlas Search's, `randVal`): mongod
    /// leaves the field out when the document has none.
    Absent,
}

/// Per-document metadata for [`Projection::apply_raw_with_meta`]; `None`
/// leaves the `$meta` field out, as mongod does when it has no such value.
#[derive(Debug, Clone, Default)]
pub struct DocMeta {
    /// The index key the document was found through.
    pub index_key: Option<Bson>,
    /// The document's sort key.
    pub sort_key: Option<Bson>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Inclusion,
    Exclusion,
    Neutral,
}

fn not_implemented(what: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("{what} is not supported by BisonDB yet"),
    )
}

fn truthy(v: &Bson) -> Option<bool> {
    match v {
        Bson::Boolean(b) => Some(*b),
        other => NumKey::of_bson(other).map(|n| n != NumKey::from_i64(0)),
    }
}

fn slice_int(v: &Bson) -> Option<i64> {
    match v {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) if d.is_finite() => Some(d.trunc().clamp(-9.0e18, 9.0e18) as i64),
        _ => None,
    }
}

fn parse_slice(v: &Bson) -> MongoResult<Leaf> {
    match v {
        Bson::Array(items) => {
            let [skip, limit] = items.as_slice() else {
                return Err(MongoError::location(
                    28724,
                    "First argument to $slice must be an array of 2 numbers",
                ));
            };
            let (Some(skip), Some(limit)) = (slice_int(skip), slice_int(limit)) else {
                return Err(MongoError::location(
                    28724,
                    "First argument to $slice must be an array of 2 numbers",
                ));
            };
            if limit <= 0 {
                return Err(MongoError::location(28724, "$slice limit must be positive"));
            }
            Ok(Leaf::Slice(Some(skip), limit))
        }
        other => match slice_int(other) {
            Some(n) => Ok(Leaf::Slice(None, n)),
            None => Err(MongoError::location(
                28724,
                "$slice only supports numbers and [skip, limit] arrays",
            )),
        },
    }
}

fn check_path(path: &str) -> MongoResult<()> {
    for part in path.split('.') {
        check_field_name(part)?;
    }
    Ok(())
}

/// Flattens a spec (including nested sub-projections like `{a: {b: 1}}`)
/// into `(path, leaf)` pairs in spec order.
fn flatten(spec: &Document, prefix: &str, out: &mut Vec<(String, Leaf)>) -> MongoResult<()> {
    for (k, v) in spec {
        let path = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        if let Some(array_path) = path.strip_suffix(".$") {
            check_path(array_path)?;
            if truthy(v) != Some(true) {
                return Err(MongoError::bad_value(format!(
                    "Cannot exclude array elements with the positional operator: {path}"
                )));
            }
            out.push((array_path.to_string(), Leaf::Positional));
            continue;
        }
        if path.split('.').any(|p| p == "$") {
            return Err(MongoError::location(
                31394,
                format!(
                    "Positional projection '{path}' may only be used at the end of a path, for example: a.b.$"
                ),
            ));
        }
        if let Some(inclusion) = truthy(v) {
            check_path(&path)?;
            out.push((
                path,
                if inclusion {
                    Leaf::Include
                } else {
                    Leaf::Exclude
                },
            ));
            continue;
        }
        match v {
            Bson::Document(d) => {
                let Some(first) = d.keys().next() else {
                    return Err(MongoError::location(
                        51270,
                        format!(
                            "An empty sub-projection is not a valid value. Found empty object at path {path}"
                        ),
                    ));
                };
                if !first.starts_with('$') {
                    flatten(d, &path, out)?;
                    continue;
                }
                check_path(&path)?;
                if d.len() != 1 || !matches!(first.as_str(), "$slice" | "$elemMatch" | "$meta") {
                    out.push((path, Leaf::Computed(Expr::parse(v)?)));
                    continue;
                }
                match (first.as_str(), d.get(first)) {
                    ("$slice", Some(arg)) => out.push((path, parse_slice(arg)?)),
                    ("$elemMatch", Some(arg)) => {
                        if path.contains('.') {
                            return Err(MongoError::bad_value(
                                "Cannot use $elemMatch projection on a nested field.",
                            ));
                        }
                        let Bson::Document(_) = arg else {
                            return Err(MongoError::bad_value(
                                "elemMatch: Invalid argument, object required.",
                            ));
                        };
                        let m = Matcher::parse_doc(&doc! {"x": {"$elemMatch": arg.clone()}})?;
                        out.push((path, Leaf::ElemMatch(Box::new(m))));
                    }
                    ("$meta", Some(Bson::String(m))) if m == "textScore" => {
                        out.push((path, Leaf::TextScore))
                    }
                    ("$meta", Some(Bson::String(m))) if m == "indexKey" => {
                        out.push((path, Leaf::Meta(MetaField::IndexKey)))
                    }
                    ("$meta", Some(Bson::String(m))) if m == "sortKey" => {
                        out.push((path, Leaf::Meta(MetaField::SortKey)))
                    }
                    ("$meta", Some(Bson::String(m))) if ABSENT_META.contains(&m.as_str()) => {
                        out.push((path, Leaf::Meta(MetaField::Absent)))
                    }
                    ("$meta", Some(Bson::String(m)))
                        if matches!(
                            m.as_str(),
                            "geoNearDistance"
                                | "geoNearPoint"
                                | "recordId"
                                | "score"
                                | "scoreDetails"
                        ) =>
                    {
                        return Err(not_implemented(&format!("$meta \"{m}\" projection")))
                    }
                    ("$meta", Some(Bson::String(m))) => {
                        return Err(MongoError::location(
                            17308,
                            format!("Unsupported argument to $meta: {m}"),
                        ))
                    }
                    ("$meta", _) => {
                        return Err(MongoError::location(
                            17307,
                            "$meta only supports string arguments",
                        ))
                    }
                    _ => out.push((path, Leaf::Computed(Expr::parse(v)?))),
                }
            }
            _ => {
                check_path(&path)?;
                out.push((path, Leaf::Computed(Expr::parse(v)?)));
            }
        }
    }
    Ok(())
}

impl Node {
    /// Inserts a leaf at a path, reporting collisions with earlier paths.
    fn insert(&mut self, full: &str, parts: &[&str], leaf: Leaf) -> MongoResult<()> {
        let Some((first, rest)) = parts.split_first() else {
            return Ok(());
        };
        let pos = self.children.iter().position(|(k, _)| k == first);
        match (pos, rest.is_empty()) {
            (None, true) => {
                self.children.push((first.to_string(), Child::Leaf(leaf)));
                Ok(())
            }
            (None, false) => {
                let mut sub = Node::default();
                sub.insert(full, rest, leaf)?;
                self.children.push((first.to_string(), Child::Sub(sub)));
                Ok(())
            }
            (Some(i), _) => match self.children.get_mut(i) {
                Some((_, Child::Sub(sub))) if !rest.is_empty() => sub.insert(full, rest, leaf),
                Some((_, Child::Leaf(_))) if !rest.is_empty() => Err(MongoError::location(
                    31250,
                    format!(
                        "Path collision at {full} remaining portion {}",
                        rest.join(".")
                    ),
                )),
                _ => Err(MongoError::location(
                    31250,
                    format!("Path collision at {full}"),
                )),
            },
        }
    }

    /// Whether a `{$meta: "textScore"}` field is anywhere in this subtree.
    fn has_text_score(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Leaf(Leaf::TextScore) => true,
            Child::Leaf(_) => false,
            Child::Sub(sub) => sub.has_text_score(),
        })
    }

    /// Whether a `{$meta: m}` field is anywhere in this subtree.
    fn has_meta(&self, m: MetaField) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Leaf(Leaf::Meta(x)) => *x == m,
            Child::Leaf(_) => false,
            Child::Sub(sub) => sub.has_meta(m),
        })
    }

    /// Whether this subtree computes any field (and so creates documents).
    fn has_computed(&self) -> bool {
        self.children.iter().any(|(_, c)| match c {
            Child::Leaf(Leaf::Computed(_) | Leaf::TextScore | Leaf::Meta(_)) => true,
            Child::Leaf(_) => false,
            Child::Sub(sub) => sub.has_computed(),
        })
    }

    fn get(&self, name: &str) -> Option<&Child> {
        self.children
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, c)| c)
    }
}

impl Projection {
    /// Parses a projection document. A positional projection (`a.$`) parsed
    /// this way has no query to take the element from and fails when applied,
    /// as mongod does for a query that matched no array element; use
    /// [`Projection::parse_with_filter`] for `find`.
    pub fn parse(spec: &Document) -> MongoResult<Projection> {
        Projection::parse_inner(spec, None)
    }

    /// Parses a projection for a query with this filter (needed by `a.$`).
    pub fn parse_with_filter(spec: &Document, filter: &Matcher) -> MongoResult<Projection> {
        Projection::parse_inner(spec, Some(filter))
    }

    fn parse_inner(spec: &Document, filter: Option<&Matcher>) -> MongoResult<Projection> {
        let mut flat = Vec::new();
        flatten(spec, "", &mut flat)?;
        let mut kind = Kind::Neutral;
        let mut include_id = true;
        let mut id_explicitly_included = false;
        let mut has_positional = false;
        let mut root = Node::default();
        for (path, leaf) in flat {
            if path == "_id" {
                match leaf {
                    Leaf::Include => {
                        include_id = true;
                        id_explicitly_included = true;
                        continue;
                    }
                    Leaf::Exclude => {
                        include_id = false;
                        continue;
                    }
                    _ => {}
                }
            }
            if matches!(leaf, Leaf::Positional) {
                if has_positional {
                    return Err(MongoError::location(
                        31276,
                        "Cannot specify more than one positional projection per query.",
                    ));
                }
                has_positional = true;
            }
            let leaf_kind = match leaf {
                Leaf::Include | Leaf::ElemMatch(_) | Leaf::Positional | Leaf::Computed(_) => {
                    Kind::Inclusion
                }
                Leaf::Exclude => Kind::Exclusion,
                Leaf::Slice(..) | Leaf::TextScore | Leaf::Meta(_) => Kind::Neutral,
            };
            match (kind, leaf_kind) {
                (Kind::Inclusion, Kind::Exclusion) => {
                    return Err(MongoError::location(
                        31254,
                        format!("Cannot do exclusion on field {path} in inclusion projection"),
                    ))
                }
                (Kind::Exclusion, Kind::Inclusion) => {
                    return Err(MongoError::location(
                        31253,
                        format!("Cannot do inclusion on field {path} in exclusion projection"),
                    ))
                }
                (Kind::Neutral, k) => kind = k,
                _ => {}
            }
            let parts: Vec<&str> = path.split('.').collect();
            root.insert(&path, &parts, leaf)?;
        }
        let inclusion = match kind {
            Kind::Inclusion => true,
            Kind::Exclusion => false,
            // Only `{_id: 1}` (possibly with `$slice`s) is an inclusion projection.
            Kind::Neutral => id_explicitly_included && root.children.is_empty(),
        };
        let text_score = if root.has_text_score() {
            match filter.and_then(|f| f.text_score_source()) {
                Some(t) => Some(t),
                None => {
                    return Err(MongoError::location(
                        40218,
                        "query requires text score metadata, but it is not available",
                    ))
                }
            }
        } else {
            None
        };
        Ok(Projection {
            text_score,
            root,
            inclusion,
            include_id,
            filter: if has_positional {
                filter.cloned()
            } else {
                None
            },
            has_positional,
        })
    }

    /// Whether a `{$meta: "sortKey"}` field is in the projection (`find`
    /// refuses it without a sort).
    pub fn needs_sort_key(&self) -> bool {
        self.root.has_meta(MetaField::SortKey)
    }

    /// Whether a `{$meta: "indexKey"}` field is in the projection.
    pub fn needs_index_key(&self) -> bool {
        self.root.has_meta(MetaField::IndexKey)
    }

    /// Whether this is an inclusion projection.
    pub fn is_inclusion(&self) -> bool {
        self.inclusion
    }

    /// Applies the projection to an owned document.
    pub fn apply(&self, doc: &Document) -> MongoResult<Document> {
        self.apply_with_meta(doc, &DocMeta::default())
    }

    /// [`Projection::apply`] with the document's `$meta` values.
    pub fn apply_with_meta(&self, doc: &Document, meta: &DocMeta) -> MongoResult<Document> {
        let key = if self.has_positional {
            let raw = RawDocumentBuf::try_from(doc)
                .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
            let key = self.filter.as_ref().and_then(|f| f.elem_match_key(&raw));
            Some(key.ok_or_else(|| {
                MongoError::location(
                    51246,
                    "positional operator '.$' couldn't find a matching element in the array",
                )
            })?)
        } else {
            None
        };
        let score = match &self.text_score {
            Some(t) => {
                let raw = RawDocumentBuf::try_from(doc)
                    .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                t.score(&raw)
            }
            None => None,
        };
        let ctx = Ctx {
            root: doc,
            key,
            score,
            meta,
        };
        self.project_doc(&self.root, doc, &ctx, true)
    }

    /// Applies the projection to a raw document.
    pub fn apply_raw(&self, doc: &RawDocument) -> MongoResult<RawDocumentBuf> {
        self.apply_raw_with_meta(doc, &DocMeta::default())
    }

    /// [`Projection::apply_raw`] with the document's `$meta` values.
    pub fn apply_raw_with_meta(
        &self,
        doc: &RawDocument,
        meta: &DocMeta,
    ) -> MongoResult<RawDocumentBuf> {
        let owned = Document::try_from(doc)
            .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
        let projected = self.apply_with_meta(&owned, meta)?;
        RawDocumentBuf::try_from(&projected)
            .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))
    }

    /// Projects one (sub)document: its fields in document order, then the
    /// computed fields of this level in spec order (as mongod's `$project`).
    fn project_doc(
        &self,
        node: &Node,
        d: &Document,
        ctx: &Ctx<'_>,
        top: bool,
    ) -> MongoResult<Document> {
        let mut out = Document::new();
        for (k, fv) in d {
            let child = node.get(k);
            if top && k == "_id" && child.is_none() {
                if self.include_id {
                    out.insert(k.clone(), fv.clone());
                }
                continue;
            }
            let r = match child {
                None => {
                    if self.inclusion {
                        None
                    } else {
                        Some(fv.clone())
                    }
                }
                // Added after the document's own fields.
                Some(Child::Leaf(Leaf::Computed(_) | Leaf::TextScore | Leaf::Meta(_))) => None,
                Some(Child::Leaf(leaf)) => apply_leaf(leaf, fv, ctx.key)?,
                Some(Child::Sub(sub)) => self.apply_sub(sub, fv, ctx)?,
            };
            if let Some(r) = r {
                out.insert(k.clone(), r);
            }
        }
        for (k, child) in &node.children {
            match child {
                Child::Leaf(Leaf::Computed(e)) => {
                    if let Some(v) = e.eval(ctx.root, &Vars::new())? {
                        out.insert(k.clone(), v);
                    }
                }
                Child::Leaf(Leaf::TextScore) => {
                    if let Some(score) = ctx.score {
                        out.insert(k.clone(), score);
                    }
                }
                Child::Leaf(Leaf::Meta(m)) => {
                    let v = match m {
                        MetaField::IndexKey => ctx.meta.index_key.as_ref(),
                        MetaField::SortKey => ctx.meta.sort_key.as_ref(),
                        MetaField::Absent => None,
                    };
                    if let Some(v) = v {
                        out.insert(k.clone(), v.clone());
                    }
                }
                Child::Sub(sub) if sub.has_computed() && !d.contains_key(k) => {
                    let v = self.project_doc(sub, &Document::new(), ctx, false)?;
                    out.insert(k.clone(), v);
                }
                _ => {}
            }
        }
        Ok(out)
    }

    /// Applies a subtree to a value: documents recurse, arrays map over their
    /// elements; scalars are dropped by inclusion (replaced by a document when
    /// the subtree computes fields) and kept by exclusion.
    fn apply_sub(&self, node: &Node, v: &Bson, ctx: &Ctx<'_>) -> MongoResult<Option<Bson>> {
        Ok(match v {
            Bson::Document(d) => Some(Bson::Document(self.project_doc(node, d, ctx, false)?)),
            Bson::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    out.extend(self.apply_sub(node, e, ctx)?);
                }
                Some(Bson::Array(out))
            }
            _ if node.has_computed() => Some(Bson::Document(self.project_doc(
                node,
                &Document::new(),
                ctx,
                false,
            )?)),
            other => {
                if self.inclusion {
                    None
                } else {
                    Some(other.clone())
                }
            }
        })
    }
}

/// Per-document state shared by the recursive projection.
struct Ctx<'a> {
    /// The whole input document, for computed fields (`$$ROOT`).
    root: &'a Document,
    /// The array index the query matched, for `a.$`.
    key: Option<usize>,
    /// The document's text score, for `{$meta: "textScore"}`.
    score: Option<f64>,
    /// The document's other metadata.
    meta: &'a DocMeta,
}

fn apply_leaf(leaf: &Leaf, v: &Bson, key: Option<usize>) -> MongoResult<Option<Bson>> {
    Ok(match leaf {
        Leaf::Positional => match (v, key) {
            (Bson::Array(items), Some(i)) => match items.get(i) {
                Some(e) => Some(Bson::Array(vec![e.clone()])),
                None => {
                    return Err(MongoError::location(
                        51247,
                        "positional operator '.$' element mismatch",
                    ))
                }
            },
            (other, _) => Some(other.clone()),
        },
        Leaf::Include => Some(v.clone()),
        // Evaluated by `project_doc`, which has the whole document.
        Leaf::Computed(_) | Leaf::TextScore | Leaf::Meta(_) => None,
        Leaf::Exclude => None,
        Leaf::Slice(skip, limit) => Some(match v {
            Bson::Array(items) => Bson::Array(slice(items, *skip, *limit)),
            other => other.clone(),
        }),
        Leaf::ElemMatch(m) => {
            let Bson::Array(items) = v else {
                return Ok(None);
            };
            items
                .iter()
                .find(|e| m.matches_doc(&doc! {"x": [(*e).clone()]}))
                .map(|e| Bson::Array(vec![e.clone()]))
        }
    })
}

fn slice(items: &[Bson], skip: Option<i64>, limit: i64) -> Vec<Bson> {
    let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
    let (start, count) = match skip {
        None if limit >= 0 => (0, limit),
        None => (len.saturating_add(limit).max(0), len),
        Some(s) if s < 0 => (len.saturating_add(s).max(0), limit),
        Some(s) => (s.min(len), limit),
    };
    let start = usize::try_from(start).unwrap_or(usize::MAX);
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    items.iter().skip(start).take(count).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    #[test]
    fn apply_table() {
        let d = doc! {
            "_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"f": 1, "g": 2}, {"f": 3}, 7, [{"f": 4, "g": 5}]],
            "s": [1, 2, 3, 4, 5]
        };
        let cases: Vec<(Document, Document)> = vec![
            (doc! {}, d.clone()),
            (doc! {"a": 1}, doc! {"_id": 1, "a": 1}),
            (doc! {"a": true, "_id": 0}, doc! {"a": 1}),
            (doc! {"_id": 1}, doc! {"_id": 1}),
            (doc! {"_id": 0}, {
                let mut x = d.clone();
                x.remove("_id");
                x
            }),
            (doc! {"b.c": 1}, doc! {"_id": 1, "b": {"c": 2}}),
            (doc! {"b": {"c": 1}}, doc! {"_id": 1, "b": {"c": 2}}),
            (doc! {"b.x": 1}, doc! {"_id": 1, "b": {}}),
            (doc! {"a.x": 1}, doc! {"_id": 1}),
            (
                doc! {"e.f": 1},
                doc! {"_id": 1, "e": [{"f": 1}, {"f": 3}, [{"f": 4}]]},
            ),
            (
                doc! {"e.f": 0, "s": 0, "b": 0},
                doc! {"_id": 1, "a": 1, "e": [{"g": 2}, {}, 7, [{"g": 5}]]},
            ),
            (
                doc! {"b.c": 0, "_id": 0, "e": 0, "s": 0},
                doc! {"a": 1, "b": {"d": 3}},
            ),
            // Output order follows the document, not the projection.
            (
                doc! {"b": 1, "a": 1},
                doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}},
            ),
            (
                doc! {"s": {"$slice": 2}, "a": 1},
                doc! {"_id": 1, "a": 1, "s": [1, 2]},
            ),
            (
                doc! {"s": {"$slice": -2}, "_id": 0, "a": 1},
                doc! {"a": 1, "s": [4, 5]},
            ),
            (
                doc! {"s": {"$slice": [1, 2]}, "a": 1},
                doc! {"_id": 1, "a": 1, "s": [2, 3]},
            ),
            (
                doc! {"s": {"$slice": [-2, 5]}, "a": 1},
                doc! {"_id": 1, "a": 1, "s": [4, 5]},
            ),
            (
                doc! {"s": {"$slice": [9, 1]}, "a": 1},
                doc! {"_id": 1, "a": 1, "s": []},
            ),
            (
                doc! {"a": {"$slice": 1}, "_id": 0, "b": 0, "e": 0, "s": 0},
                doc! {"a": 1},
            ),
            (
                doc! {"e": {"$elemMatch": {"f": {"$gt": 1}}}},
                doc! {"_id": 1, "e": [{"f": 3}]},
            ),
            (doc! {"e": {"$elemMatch": {"f": 99}}}, doc! {"_id": 1}),
        ];
        for (spec, want) in cases {
            let p = Projection::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert_eq!(p.apply(&d).unwrap(), want, "{spec}");
            let raw = RawDocumentBuf::try_from(&d).unwrap();
            let got = Document::try_from(p.apply_raw(&raw).unwrap().as_ref()).unwrap();
            assert_eq!(got, want, "raw {spec}");
        }
        // A $slice-only projection keeps every other field.
        let p = Projection::parse(&doc! {"s": {"$slice": 1}}).unwrap();
        let got = p.apply(&d).unwrap();
        assert_eq!(got.get("s"), Some(&bson::bson!([1])));
        assert_eq!(got.len(), d.len());
    }

    #[test]
    fn error_table() {
        let cases: Vec<(Document, i32, &str)> = vec![
            (
                doc! {"a": 1, "b": 0},
                31254,
                "Cannot do exclusion on field b in inclusion projection",
            ),
            (
                doc! {"a": 0, "b": 1},
                31253,
                "Cannot do inclusion on field b in exclusion projection",
            ),
            (
                doc! {"a": 1, "a.b": 1},
                31250,
                "Path collision at a.b remaining portion b",
            ),
            (doc! {"a.b": 1, "a": 1}, 31250, "Path collision at a"),
            (
                doc! {"a.b": 0, "a": {"b": 0}},
                31250,
                "Path collision at a.b",
            ),
            (doc! {"a.$.b": 1}, 31394, "may only be used at the end"),
            (doc! {"a.$": 1, "b.$": 1}, 31276, "more than one positional"),
            (doc! {"a.$": 0}, 2, "Cannot exclude array elements"),
            (
                doc! {"a": 0, "b": "$c"},
                31253,
                "Cannot do inclusion on field b",
            ),
            (
                doc! {"b": "$c", "a": 0},
                31254,
                "Cannot do exclusion on field a",
            ),
            (doc! {"a": {"$meta": "recordId"}}, 238, "$meta \"recordId\""),
            (doc! {"a": {"$meta": "geoNearDistance"}}, 238, "$meta"),
            (
                doc! {"a": {"$meta": "textScore"}},
                40218,
                "text score metadata",
            ),
            (
                doc! {"a": {"$meta": "bogus"}},
                17308,
                "Unsupported argument",
            ),
            (
                doc! {"a": {"$slice": "x"}},
                28724,
                "$slice only supports numbers",
            ),
            (
                doc! {"a": {"$slice": [1, 0]}},
                28724,
                "$slice limit must be positive",
            ),
            (doc! {"a.b": {"$elemMatch": {"c": 1}}}, 2, "nested field"),
            (doc! {"a": {"$elemMatch": 1}}, 2, "object required"),
            (doc! {"a": {}}, 51270, "empty sub-projection"),
            (doc! {"a..b": 1}, 15998, "empty strings"),
            (doc! {"$a": 1}, 16410, "may not start with '$'"),
        ];
        for (spec, code, msg) in cases {
            let e = Projection::parse(&spec).expect_err(&spec.to_string());
            assert_eq!(e.code.code(), code, "{spec}: {e}");
            assert!(e.message.contains(msg), "{spec}: {}", e.message);
        }
    }

    #[test]
    fn positional() {
        let d = doc! {"_id": 1, "e": [{"f": 1}, {"f": 3}], "s": [1, 5, 9], "n": {"t": [7, 8]}};
        let cases: Vec<(Document, Document, Document)> = vec![
            (
                doc! {"e.f": 3},
                doc! {"e.$": 1},
                doc! {"_id": 1, "e": [{"f": 3}]},
            ),
            (
                doc! {"s": {"$gt": 3}},
                doc! {"s.$": 1},
                doc! {"_id": 1, "s": [5]},
            ),
            (
                doc! {"x": {"$exists": false}, "s": 9},
                doc! {"s.$": 1, "_id": 0},
                doc! {"s": [9]},
            ),
            (
                doc! {"n.t": 8},
                doc! {"n.t.$": 1},
                doc! {"_id": 1, "n": {"t": [8]}},
            ),
            (
                doc! {"$or": [{"s": 100}, {"e": {"$elemMatch": {"f": 3}}}]},
                doc! {"e.$": 1},
                doc! {"_id": 1, "e": [{"f": 3}]},
            ),
        ];
        for (filter, spec, want) in cases {
            let m = Matcher::parse_doc(&filter).unwrap();
            assert!(m.matches_doc(&d), "{filter}");
            let p = Projection::parse_with_filter(&spec, &m).unwrap();
            assert_eq!(p.apply(&d).unwrap(), want, "{filter} {spec}");
        }
        // No array element matched (or no filter at all): mongod's error 51246.
        let p = Projection::parse(&doc! {"s.$": 1}).unwrap();
        assert_eq!(p.apply(&d).unwrap_err().code.code(), 51246);
        let m = Matcher::parse_doc(&doc! {"_id": 1}).unwrap();
        let p = Projection::parse_with_filter(&doc! {"s.$": 1}, &m).unwrap();
        assert_eq!(p.apply(&d).unwrap_err().code.code(), 51246);
    }

    #[test]
    fn nested_slice_in_inclusion() {
        // The manual's example: other fields of the embedded document are dropped.
        let d = doc! {"_id": 1, "item": "socks", "qty": 100,
        "details": {"colors": ["blue", "red"], "sizes": ["S", "M"]}};
        let p = Projection::parse(&doc! {"qty": 1, "details.colors": {"$slice": 1}}).unwrap();
        assert_eq!(
            p.apply(&d).unwrap(),
            doc! {"_id": 1, "qty": 100, "details": {"colors": ["blue"]}}
        );
    }

    #[test]
    fn computed_fields() {
        let d = doc! {"_id": 1, "a": 2, "b": {"c": 3, "d": 4}, "e": [{"f": 1}, {"f": 2}, 9]};
        let cases: Vec<(Document, Document)> = vec![
            // Computed fields come after the document's own fields, in spec order.
            (doc! {"x": "$a", "a": 1}, doc! {"_id": 1, "a": 2, "x": 2}),
            (doc! {"a": {"$literal": 7}}, doc! {"_id": 1, "a": 7}),
            (doc! {"s": "lit", "_id": 0}, doc! {"s": "lit"}),
            (doc! {"n": null, "_id": 0}, doc! {"n": null}),
            (doc! {"z": "$missing", "_id": 0}, doc! {}),
            (
                doc! {"y": {"$add": ["$a", "$b.c"]}, "_id": 0},
                doc! {"y": 5},
            ),
            (doc! {"b.z": "$a", "_id": 0}, doc! {"b": {"z": 2}}),
            (
                doc! {"b": {"c": 1, "z": "$a"}, "_id": 0},
                doc! {"b": {"c": 3, "z": 2}},
            ),
            (doc! {"q.r": "$a", "_id": 0}, doc! {"q": {"r": 2}}),
            (doc! {"a.r": 1, "_id": 0}, doc! {}),
            (doc! {"a.r": "$_id", "_id": 0}, doc! {"a": {"r": 1}}),
            (
                doc! {"e.g": "$a", "_id": 0},
                doc! {"e": [{"g": 2}, {"g": 2}, {"g": 2}]},
            ),
            (doc! {"arr": ["$a", 1], "_id": 0}, doc! {"arr": [2, 1]}),
        ];
        for (spec, want) in cases {
            let p = Projection::parse(&spec).unwrap_or_else(|e| panic!("{spec}: {e}"));
            assert!(p.is_inclusion(), "{spec}");
            assert_eq!(p.apply(&d).unwrap(), want, "{spec}");
        }
        assert!(Projection::parse(&doc! {"a": {"$noSuchOp": 1}}).is_err());
    }

    #[test]
    fn mode_detection() {
        let cases: Vec<(Document, bool)> = vec![
            (doc! {}, false),
            (doc! {"_id": 0}, false),
            (doc! {"_id": 1}, true),
            (doc! {"_id": 0, "a": 1}, true),
            (doc! {"_id": 1, "a": 0}, false),
            (doc! {"a": {"$slice": 1}}, false),
            (doc! {"a": {"$elemMatch": {"b": 1}}}, true),
        ];
        for (spec, inclusion) in cases {
            assert_eq!(
                Projection::parse(&spec).unwrap().is_inclusion(),
                inclusion,
                "{spec}"
            );
        }
    }

    #[test]
    fn meta_fields_come_from_doc_meta() {
        let d = doc! {"_id": 1, "a": 1, "b": "x"};
        let p = Projection::parse(&doc! {
            "k": {"$meta": "indexKey"},
            "s": {"$meta": "sortKey"},
            "r": {"$meta": "searchScore"},
            "v": {"$meta": "randVal"},
        })
        .unwrap();
        assert!(p.needs_sort_key() && p.needs_index_key());
        // Not an inclusion: the whole document stays, the values follow it.
        let meta = DocMeta {
            index_key: Some(Bson::from(doc! {"a": 1})),
            sort_key: Some(Bson::from(vec![Bson::Int32(1)])),
        };
        assert_eq!(
            p.apply_with_meta(&d, &meta).unwrap(),
            doc! {"_id": 1, "a": 1, "b": "x", "k": {"a": 1}, "s": [1]}
        );
        // Without values the fields are left out, as mongod does.
        assert_eq!(p.apply(&d).unwrap(), d);
        // With an inclusion, only the included fields and the metadata.
        let p = Projection::parse(&doc! {"a": 1, "k": {"$meta": "indexKey"}}).unwrap();
        assert!(!p.needs_sort_key());
        assert_eq!(
            p.apply_with_meta(&d, &meta).unwrap(),
            doc! {"_id": 1, "a": 1, "k": {"a": 1}}
        );
    }
}
