//! Index key generation: which keys one document contributes to an index with
//! a given key pattern.
//!
//! The values of each field come from the same path traversal the matcher uses
//! ([`lookup_raw`]), so every value a query predicate can see is present in the
//! index; that is what makes "scan the index bounds, then re-check the filter"
//! return exactly what a collection scan returns. Like mongod:
//! - a reached array contributes one key per element (an empty array the key
//!   `undefined`), and such an index becomes multikey;
//! - a missing field (or a branch of the traversal that ends early) is `null`;
//! - a compound key is the cross product of the values of its fields; two fields
//!   reaching different arrays are "parallel arrays" (code 171);
//! - a sparse index skips documents missing every indexed field, and a partial
//!   index skips documents its filter does not match.

use std::collections::BTreeSet;
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawBsonRef, RawDocument};
use bson::{Bson, Document, RawBson};

use crate::collation::Collation;
use crate::compare::{compare_raw_in, number_as_f64};
use crate::matcher::Matcher;
use crate::path::{array_index, lookup_raw, LookupInfo};

pub mod wildcard;

use wildcard::WildcardPaths;

/// More keys than this from one document fails the write instead of
/// exhausting memory (mongod has no explicit cap; its cross products are
/// bounded by the document size limit in practice).
pub const MAX_KEYS_PER_DOCUMENT: usize = 100_000;

/// One field of a key pattern.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyField {
    /// Dotted path.
    pub path: String,
    /// `-1` in the key pattern.
    pub descending: bool,
}

/// A compiled index definition, as far as key generation needs it.
#[derive(Debug, Clone)]
pub struct KeyGenerator {
    fields: Vec<KeyField>,
    sparse: bool,
    partial: Option<Matcher>,
    /// An index with a collation stores strings as their collation keys
    /// (`Collation::index_value`); `None`: simple, strings as they are.
    collation: Option<Arc<Collation>>,
    /// A hashed index: a field reaching an array fails the write (16766).
    refuse_arrays: bool,
    /// A geospatial index: its geo field and what it must hold.
    geo: Option<(usize, GeoField)>,
    /// A wildcard index: see [`KeyGenerator::with_wildcard`].
    wildcard: Option<Arc<Wildcard>>,
}

/// The wildcard term of a wildcard index and its regular fields' generator.
#[derive(Debug)]
struct Wildcard {
    /// Position of the `$_path` component in the key (the value follows).
    at: usize,
    paths: WildcardPaths,
    /// The regular fields of a compound wildcard index.
    regular: Option<KeyGenerator>,
}

/// What the geo field of a geospatial index must hold.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum GeoField {
    /// `"2d"`: legacy coordinate pairs inside `[min, max)`.
    Flat { min: f64, max: f64 },
    /// `"2dsphere"`: GeoJSON geometries or legacy pairs on the sphere.
    Sphere,
}

/// The keys of one document.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DocKeys {
    /// Each key holds one value per field of the pattern; duplicates removed.
    pub keys: Vec<Vec<RawBson>>,
    /// Some field reached an array.
    pub multikey: bool,
    /// A wildcard index: the paths where the document holds an array.
    pub multikey_paths: Vec<String>,
}

impl KeyGenerator {
    /// A generator for `fields` (non-empty). The partial filter, if any, must
    /// already be validated.
    pub fn new(
        fields: Vec<KeyField>,
        sparse: bool,
        partial: Option<&Document>,
    ) -> MongoResult<KeyGenerator> {
        if fields.is_empty() {
            return Err(MongoError::new(
                ErrorCode::CannotCreateIndex,
                "Index keys cannot be empty.",
            ));
        }
        let partial = partial.map(Matcher::parse_doc).transpose()?;
        Ok(KeyGenerator {
            fields,
            sparse,
            partial,
            collation: None,
            refuse_arrays: false,
            geo: None,
            wildcard: None,
        })
    }

    /// The same generator for a wildcard index whose key components `at`
    /// (`$_path`) and `at + 1` (the value) come from the wildcard term
    /// `paths` (the module doc of [`wildcard`] says how); the other fields
    /// (a compound wildcard index's) are regular and may not hold arrays.
    /// A document without any wildcard leaf gets no key, unless the index is
    /// compound: then its wildcard components are `MinKey`, so the regular
    /// fields still find it.
    pub fn with_wildcard(mut self, w: Option<(usize, WildcardPaths)>) -> KeyGenerator {
        let Some((at, paths)) = w else {
            return self;
        };
        let regular: Vec<KeyField> = self
            .fields
            .iter()
            .enumerate()
            .filter(|(i, _)| *i != at && *i != at + 1)
            .map(|(_, f)| f.clone())
            .collect();
        let regular = (!regular.is_empty()).then(|| KeyGenerator {
            fields: regular,
            sparse: false,
            partial: None,
            collation: self.collation.clone(),
            refuse_arrays: false,
            geo: None,
            wildcard: None,
        });
        self.wildcard = Some(Arc::new(Wildcard { at, paths, regular }));
        self
    }

    /// The wildcard term's paths, for a wildcard index.
    pub fn wildcard_paths(&self) -> Option<&WildcardPaths> {
        self.wildcard.as_deref().map(|w| &w.paths)
    }

    fn wildcard_keys(&self, w: &Wildcard, doc: &RawDocument) -> MongoResult<DocKeys> {
        let regular = match &w.regular {
            Some(g) => {
                let k = g.keys(doc)?;
                if k.multikey {
                    return Err(MongoError::new(
                        ErrorCode::CannotBuildIndexKeys,
                        "Compound wildcard indexes do not support multikey values in their non-wildcard fields",
                    ));
                }
                k.keys
            }
            None => vec![Vec::new()],
        };
        let owned = Document::try_from(doc).map_err(|e| {
            MongoError::new(ErrorCode::InvalidBSON, format!("invalid document: {e}"))
        })?;
        let (leaves, multikey_paths) = w.paths.leaves(&owned);
        let mut pairs: Vec<(RawBson, RawBson)> = Vec::with_capacity(leaves.len());
        for (path, v) in leaves {
            let v = RawBson::try_from(v).map_err(|e| {
                MongoError::new(ErrorCode::InvalidBSON, format!("invalid document: {e}"))
            })?;
            pairs.push((RawBson::String(path), self.stored(v.as_raw_bson_ref())));
        }
        let c = self.collation.as_deref();
        pairs.sort_by(|(pa, va), (pb, vb)| {
            compare_raw_in(pa.as_raw_bson_ref(), pb.as_raw_bson_ref(), None)
                .then_with(|| compare_raw_in(va.as_raw_bson_ref(), vb.as_raw_bson_ref(), c))
        });
        pairs.dedup_by(|(pa, va), (pb, vb)| {
            pa == pb && compare_raw_in(va.as_raw_bson_ref(), vb.as_raw_bson_ref(), c).is_eq()
        });
        if pairs.is_empty() {
            if w.regular.is_none() {
                return Ok(DocKeys::default());
            }
            pairs.push((RawBson::MinKey, RawBson::MinKey));
        }
        let total = pairs.len().saturating_mul(regular.len());
        if total > MAX_KEYS_PER_DOCUMENT {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                format!("a document would generate {total} keys in one index, over the limit of {MAX_KEYS_PER_DOCUMENT}"),
            ));
        }
        let mut keys = Vec::with_capacity(total);
        for r in &regular {
            for (p, v) in &pairs {
                let mut k = Vec::with_capacity(r.len() + 2);
                k.extend(r.iter().take(w.at).cloned());
                k.push(p.clone());
                k.push(v.clone());
                k.extend(r.iter().skip(w.at).cloned());
                keys.push(k);
            }
        }
        Ok(DocKeys {
            keys,
            multikey: !multikey_paths.is_empty(),
            multikey_paths,
        })
    }

    /// The same generator for a geospatial index whose field `field` is
    /// `kind`: a document whose geo field is missing (or null) is not
    /// indexed, one whose geo field is not valid geometry fails the write
    /// (16755 for 2dsphere; 16804, 13068, 13026, 13027 for 2d). The geo
    /// component of each key is the cell of each location
    /// ([`crate::geo::Grid::cell_of`], an Int64), so a query scans the cells
    /// covering its region and checks the exact predicate on each document.
    pub fn with_geo(mut self, geo: Option<(usize, GeoField)>) -> KeyGenerator {
        self.geo = geo;
        self
    }

    /// Validates the geo field of `doc` and returns its cell keys
    /// (`crate::geo::Grid`), one per location, duplicates removed; none when
    /// it holds nothing (the document is then not indexed).
    fn geo_cells(&self, doc: &RawDocument) -> MongoResult<Vec<i64>> {
        let Some((i, kind)) = self.geo else {
            return Ok(Vec::new());
        };
        let Some(f) = self.fields.get(i) else {
            return Ok(Vec::new());
        };
        let mut reached = Vec::new();
        lookup_raw(doc, &f.path, &mut reached);
        let values: Vec<Bson> = reached
            .into_iter()
            .filter(|v| !matches!(v, RawBsonRef::Null | RawBsonRef::Undefined))
            .filter_map(|v| Bson::try_from(v).ok())
            .collect();
        let mut cells = Vec::new();
        if values.is_empty() {
            return Ok(cells);
        }
        let shown = || {
            Document::try_from(doc)
                .map(|d| d.to_string())
                .unwrap_or_default()
        };
        for v in &values {
            // An array that is not itself a coordinate pair holds several.
            let items: Vec<&Bson> = match v {
                Bson::Array(a) if crate::geo::holds_several(a) => a.iter().collect(),
                other => vec![other],
            };
            for item in items {
                match kind {
                    GeoField::Sphere => {
                        let why = match crate::geo::parse_stored(item) {
                            Some(Ok(crate::geo::Stored::Legacy(p)))
                                if !(-180.0..=180.0).contains(&p.x)
                                    || !(-90.0..=90.0).contains(&p.y) =>
                            {
                                format!(
                                    "longitude/latitude is out of bounds, lng: {} lat: {}",
                                    p.x, p.y
                                )
                            }
                            Some(Ok(s)) => {
                                if let Some(b) = s.sphere_bbox() {
                                    cells.push(crate::geo::Grid::sphere().cell_of(&b));
                                }
                                continue;
                            }
                            Some(Err(e)) => e,
                            None => format!(
                                "Point must be an array or object, instead got type {}",
                                crate::value::type_name(item)
                            ),
                        };
                        return Err(MongoError::location(
                            16755,
                            format!("Can't extract geo keys: {}  {why}", shown()),
                        ));
                    }
                    GeoField::Flat { min, max } => {
                        let p = check_flat(item, min, max)?;
                        let b = crate::geo::BBox {
                            x0: p.x,
                            y0: p.y,
                            x1: p.x,
                            y1: p.y,
                        };
                        cells.push(crate::geo::Grid::flat(min, max).cell_of(&b));
                    }
                }
            }
        }
        cells.sort_unstable();
        cells.dedup();
        Ok(cells)
    }

    /// The same generator for a hashed index when `refuse`: any field that
    /// reaches an array (along its path or at its end) fails with 16766, as
    /// mongod's hashed indexes have no multikey form.
    pub fn refusing_arrays(mut self, refuse: bool) -> KeyGenerator {
        self.refuse_arrays = refuse;
        self
    }

    /// The same generator for an index with `collation` (`None`: simple).
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> KeyGenerator {
        // The partial filter matches under the index's collation, as in mongod.
        self.partial = self.partial.map(|m| m.with_collation(collation.clone()));
        self.collation = collation;
        self
    }

    /// One key value as the index stores it.
    fn stored(&self, v: RawBsonRef<'_>) -> RawBson {
        match (&self.collation, v) {
            (None, v) => RawBson::from(v),
            (Some(c), RawBsonRef::String(s) | RawBsonRef::Symbol(s)) => {
                RawBson::String(c.index_key(s))
            }
            (Some(c), v @ (RawBsonRef::Document(_) | RawBsonRef::Array(_))) => {
                match Bson::try_from(v)
                    .ok()
                    .map(|b| c.index_value(&b))
                    .and_then(|b| RawBson::try_from(b).ok())
                {
                    Some(r) => r,
                    None => RawBson::from(v),
                }
            }
            (Some(_), v) => RawBson::from(v),
        }
    }

    /// The fields of the key pattern, in order.
    pub fn fields(&self) -> &[KeyField] {
        &self.fields
    }

    /// The keys `doc` contributes (none when sparse or partial exclude it).
    pub fn keys(&self, doc: &RawDocument) -> MongoResult<DocKeys> {
        if let Some(p) = &self.partial {
            if !p.matches(doc) {
                return Ok(DocKeys::default());
            }
        }
        if let Some(w) = &self.wildcard {
            return self.wildcard_keys(w, doc);
        }
        let cells = self.geo_cells(doc)?;
        if self.geo.is_some() && cells.is_empty() {
            // A geo index skips a document without a location.
            return Ok(DocKeys::default());
        }
        let mut per_field: Vec<Vec<RawBsonRef<'_>>> = Vec::with_capacity(self.fields.len());
        let mut array_paths: Vec<Vec<String>> = Vec::with_capacity(self.fields.len());
        let mut multikey = false;
        let mut all_missing = true;
        for (fi, f) in self.fields.iter().enumerate() {
            if self.geo.is_some_and(|(g, _)| g == fi) {
                // Validated above; see `with_geo`.
                multikey |= cells.len() > 1;
                per_field.push(cells.iter().map(|c| RawBsonRef::Int64(*c)).collect());
                array_paths.push(Vec::new());
                all_missing = false;
                continue;
            }
            let mut reached = Vec::new();
            let info = if f.path.contains('.') {
                lookup_raw(doc, &f.path, &mut reached)
            } else {
                // A top-level field: no traversal, no allocation for the path.
                match doc.get(&f.path) {
                    Ok(Some(v)) => {
                        reached.push(v);
                        LookupInfo::default()
                    }
                    _ => LookupInfo {
                        missing: true,
                        traversed_array: false,
                    },
                }
            };
            if !reached.is_empty() {
                all_missing = false;
            }
            let mut values: Vec<RawBsonRef<'_>> = Vec::with_capacity(reached.len() + 1);
            let mut leaf_array = false;
            for v in reached {
                match v {
                    RawBsonRef::Array(a) => {
                        leaf_array = true;
                        let before = values.len();
                        values.extend(a.into_iter().flatten());
                        if values.len() == before {
                            values.push(RawBsonRef::Undefined);
                        }
                    }
                    other => values.push(other),
                }
            }
            if info.missing {
                values.push(RawBsonRef::Null);
            }
            let paths = if info.traversed_array || leaf_array {
                if self.refuse_arrays {
                    return Err(MongoError::new(
                        ErrorCode::Other(16766),
                        "hashed indexes do not currently support array values",
                    ));
                }
                multikey = true;
                arrays_along(doc, &f.path)
            } else {
                Vec::new()
            };
            if values.len() > 1 {
                // Under a collation, values it finds equal are one key.
                let c = self.collation.as_deref();
                values.sort_by(|a, b| compare_raw_in(*a, *b, c));
                values.dedup_by(|a, b| compare_raw_in(*a, *b, c).is_eq());
            }
            per_field.push(values);
            array_paths.push(paths);
        }
        if self.sparse && all_missing {
            return Ok(DocKeys::default());
        }
        self.check_parallel(&array_paths)?;
        let mut total = 1usize;
        for v in &per_field {
            total = total.saturating_mul(v.len().max(1));
        }
        if total > MAX_KEYS_PER_DOCUMENT {
            return Err(MongoError::new(
                ErrorCode::BadValue,
                format!("a document would generate {total} keys in one index, over the limit of {MAX_KEYS_PER_DOCUMENT}"),
            ));
        }
        if let [values] = per_field.as_slice() {
            let keys = values.iter().map(|v| vec![self.stored(*v)]).collect();
            return Ok(DocKeys {
                keys,
                multikey,
                multikey_paths: Vec::new(),
            });
        }
        let mut keys: Vec<Vec<RawBson>> = vec![Vec::with_capacity(self.fields.len())];
        for values in &per_field {
            let mut next = Vec::with_capacity(keys.len().saturating_mul(values.len()));
            for k in &keys {
                for v in values {
                    let mut k2 = k.clone();
                    k2.push(self.stored(*v));
                    next.push(k2);
                }
            }
            keys = next;
        }
        Ok(DocKeys {
            keys,
            multikey,
            multikey_paths: Vec::new(),
        })
    }

    /// Two fields whose values come from different arrays cannot be indexed
    /// together (the cross product would be meaningless); fields under one
    /// shared array (`a.b`, `a.c`) can.
    fn check_parallel(&self, array_paths: &[Vec<String>]) -> MongoResult<()> {
        for (i, pi) in array_paths.iter().enumerate() {
            for (j, pj) in array_paths.iter().enumerate().skip(i + 1) {
                if pi.is_empty() || pj.is_empty() {
                    continue;
                }
                let (Some(fi), Some(fj)) = (self.fields.get(i), self.fields.get(j)) else {
                    continue;
                };
                let shared = pi.iter().all(|p| is_path_prefix(p, &fj.path))
                    && pj.iter().all(|p| is_path_prefix(p, &fi.path));
                if !shared {
                    let name = |ps: &[String]| ps.first().cloned().unwrap_or_default();
                    return Err(MongoError::new(
                        ErrorCode::CannotIndexParallelArrays,
                        format!(
                            "cannot index parallel arrays [{}] [{}]",
                            last_component(&name(pj)),
                            last_component(&name(pi))
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// One location of a 2d index: a coordinate pair (array or document) of
/// numbers inside `[min, max)`.
fn check_flat(v: &Bson, min: f64, max: f64) -> MongoResult<crate::geo::Pt> {
    if !matches!(v, Bson::Array(_) | Bson::Document(_)) {
        return Err(MongoError::location(
            16804,
            "location object expected, location array not in correct format",
        ));
    }
    let mut it: Box<dyn Iterator<Item = &Bson>> = match v {
        Bson::Array(a) => Box::new(a.iter()),
        Bson::Document(d) => Box::new(d.values()),
        _ => Box::new(std::iter::empty()),
    };
    let Some(x) = it.next() else {
        return Err(MongoError::location(
            13067,
            format!("geo field is empty :: caused by :: {v}"),
        ));
    };
    let Some(y) = it.next() else {
        return Err(MongoError::location(
            13068,
            format!("geo field only has 1 element :: caused by :: {v}"),
        ));
    };
    let (Some(x), Some(y)) = (number_as_f64(x), number_as_f64(y)) else {
        return Err(MongoError::location(
            13026,
            format!(
                "geo values must be 'legacy coordinate pairs' for 2d indexes :: caused by :: {v}"
            ),
        ));
    };
    if !(min..max).contains(&x) || !(min..max).contains(&y) {
        return Err(MongoError::location(
            13027,
            format!("point not in interval of [ {min}, {max} ) :: caused by :: {v}"),
        ));
    }
    Ok(crate::geo::Pt { x, y })
}

fn last_component(p: &str) -> &str {
    p.rsplit('.').next().unwrap_or(p)
}

/// `a` is a prefix of `a.b` and of `a`, not of `ab`.
fn is_path_prefix(prefix: &str, path: &str) -> bool {
    path == prefix || (path.starts_with(prefix) && path.as_bytes().get(prefix.len()) == Some(&b'.'))
}

/// The path prefixes along `path` at which `doc` holds an array (for the
/// parallel-arrays check), fanning out over arrays of documents.
fn arrays_along(doc: &RawDocument, path: &str) -> Vec<String> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut out = BTreeSet::new();
    walk(RawBsonRef::Document(doc), &parts, 0, &mut out);
    out.into_iter().collect()
}

fn walk(v: RawBsonRef<'_>, parts: &[&str], depth: usize, out: &mut BTreeSet<String>) {
    let here = || parts.get(..depth).unwrap_or_default().join(".");
    match v {
        RawBsonRef::Array(a) => {
            out.insert(here());
            let Some(next) = parts.get(depth) else {
                return;
            };
            if let Some(i) = array_index(next) {
                if let Ok(Some(e)) = a.get(i) {
                    walk(e, parts, depth + 1, out);
                }
            }
            for e in a.into_iter().flatten() {
                if let RawBsonRef::Document(d) = e {
                    if let Ok(Some(x)) = d.get(*next) {
                        walk(x, parts, depth + 1, out);
                    }
                }
            }
        }
        RawBsonRef::Document(d) => {
            if let Some(next) = parts.get(depth) {
                if let Ok(Some(x)) = d.get(*next) {
                    walk(x, parts, depth + 1, out);
                }
            }
        }
        _ => {}
    }
}

/// Converts key values to a `{field: value}` document for error messages
/// (`keyValue` of a duplicate key error).
pub fn key_document(fields: &[KeyField], key: &[RawBson]) -> Document {
    let mut d = Document::new();
    for (f, v) in fields.iter().zip(key) {
        d.insert(
            f.path.clone(),
            Bson::try_from(v.clone()).unwrap_or(Bson::Null),
        );
    }
    d
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc};

    fn gen(fields: &[(&str, bool)], sparse: bool, partial: Option<Document>) -> KeyGenerator {
        let fields = fields
            .iter()
            .map(|(p, d)| KeyField {
                path: p.to_string(),
                descending: *d,
            })
            .collect();
        KeyGenerator::new(fields, sparse, partial.as_ref()).unwrap()
    }

    fn keys_of(g: &KeyGenerator, d: &bson::RawDocumentBuf) -> Vec<Vec<Bson>> {
        g.keys(d)
            .unwrap()
            .keys
            .into_iter()
            .map(|k| k.into_iter().map(|v| Bson::try_from(v).unwrap()).collect())
            .collect()
    }

    #[test]
    fn single_field_table() {
        let g = gen(&[("a.b", false)], false, None);
        let cases: Vec<(bson::RawDocumentBuf, Vec<Bson>, bool)> = vec![
            (rawdoc! {"a": {"b": 1}}, vec![Bson::Int32(1)], false),
            (rawdoc! {"x": 1}, vec![Bson::Null], false),
            (
                rawdoc! {"a": [{"b": 2}, {"b": 1}, {"c": 1}]},
                vec![Bson::Null, Bson::Int32(1), Bson::Int32(2)],
                true,
            ),
            (
                rawdoc! {"a": {"b": [3, 3, "x"]}},
                vec![Bson::Int32(3), Bson::String("x".into())],
                true,
            ),
            (rawdoc! {"a": {"b": []}}, vec![Bson::Undefined], true),
            (
                rawdoc! {"a": {"b": [[1, 2]]}},
                vec![Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)])],
                true,
            ),
        ];
        for (d, want, multi) in cases {
            let got: Vec<Bson> = keys_of(&g, &d).into_iter().flatten().collect();
            assert_eq!(got, want, "doc {d:?}");
            assert_eq!(g.keys(&d).unwrap().multikey, multi, "doc {d:?}");
        }
    }

    #[test]
    fn compound_cross_product_and_parallel_arrays() {
        let g = gen(&[("a", false), ("b", true)], false, None);
        assert_eq!(
            keys_of(&g, &rawdoc! {"a": [1, 2], "b": 5}),
            vec![
                vec![Bson::Int32(1), Bson::Int32(5)],
                vec![Bson::Int32(2), Bson::Int32(5)]
            ]
        );
        let err = g.keys(&rawdoc! {"a": [1], "b": [2]}).unwrap_err();
        assert_eq!(err.code.code(), 171);
        assert!(err.message.contains("cannot index parallel arrays"));
        // One shared array is fine.
        let shared = gen(&[("a.b", false), ("a.c", false)], false, None);
        let k = shared
            .keys(&rawdoc! {"a": [{"b": 1, "c": 2}, {"b": 3, "c": 4}]})
            .unwrap();
        assert_eq!(k.keys.len(), 4);
        assert!(k.multikey);
    }

    #[test]
    fn sparse_and_partial_exclude() {
        let sparse = gen(&[("a", false), ("b", false)], true, None);
        assert!(keys_of(&sparse, &rawdoc! {"c": 1}).is_empty());
        assert_eq!(
            keys_of(&sparse, &rawdoc! {"b": 1}),
            vec![vec![Bson::Null, Bson::Int32(1)]]
        );
        let partial = gen(&[("a", false)], false, Some(doc! {"a": {"$gt": 5}}));
        assert!(keys_of(&partial, &rawdoc! {"a": 1}).is_empty());
        assert_eq!(keys_of(&partial, &rawdoc! {"a": 6}).len(), 1);
    }

    #[test]
    fn too_many_keys_fail() {
        let g = gen(&[("a.b", false), ("a.c", false)], false, None);
        let items: Vec<Bson> = (0..400)
            .map(|i| Bson::Document(doc! {"b": i, "c": i}))
            .collect();
        let d = bson::RawDocumentBuf::try_from(&doc! {"a": items}).unwrap();
        assert!(g.keys(&d).is_err());
    }

    #[test]
    fn refusing_arrays_fails_with_16766() {
        let g = gen(&[("a.b", false), ("c", false)], false, None).refusing_arrays(true);
        assert_eq!(keys_of(&g, &rawdoc! {"a": {"b": 1}, "c": 2}).len(), 1);
        for d in [
            rawdoc! {"a": {"b": [1]}},
            rawdoc! {"a": [{"b": 1}]},
            rawdoc! {"a": {"b": 1}, "c": []},
        ] {
            let err = g.keys(&d).unwrap_err();
            assert_eq!(err.code.code(), 16766, "doc {d:?}");
            assert_eq!(
                err.message, "hashed indexes do not currently support array values",
                "doc {d:?}"
            );
        }
    }

    #[test]
    fn key_document_names_fields() {
        let fields = vec![KeyField {
            path: "email".into(),
            descending: false,
        }];
        let d = key_document(&fields, &[RawBson::String("a@b".into())]);
        assert_eq!(d, doc! {"email": "a@b"});
    }
}
