//! Secondary indexes: their definitions, the key layout of their entries, and
//! scans over index bounds.
//!
//! ```text
//! [0x03] coll:u64be index:u64be key [encode_id(_id)]  -> encode_id(_id)
//! [0x04] coll:u64be index:u64be                       -> multikey marker
//! ```
//!
//! `key` is the concatenation of the fields' `keycode::encode_value`s; a
//! descending field has every byte of its component inverted, which reverses
//! its order (the encoding is prefix-free, so inverted components stay
//! prefix-free and concatenation keeps the lexicographic order per field).
//! A unique index leaves `_id` out of the key, so a second document with the
//! same key hits the same engine key; the value always names the document.
//!
//! A wildcard index's key pattern term (`$**`, `a.$**`) is two components of
//! the key: the leaf's path (`$_path`) and its value
//! (`bisondb_query::index_keys::wildcard`). Each document also writes one
//! entry per path where it holds an array, `key` being `0x00` then the
//! path's encoding (below every encoded value, so no scan of values meets
//! them): the planner asks whether a path is multikey with one probe, and
//! the entries come and go with the documents like any other.
//! Both regions start with the collection id, so dropping a collection purges
//! its indexes with its documents, and index ids are never reused, so leftovers
//! of an interrupted drop never surface in a new index.

use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::MongoError;
use bisondb_query::index_keys::wildcard::{self, WildcardPaths};
use bisondb_query::index_keys::{key_document, GeoField, KeyField, KeyGenerator};
use bisondb_query::matcher::bounds::{FieldBounds, Interval};
use bisondb_query::text::TextSpec;
use bson::{Bson, Document, RawBson, RawDocument};

use crate::error::{DuplicateKeyInfo, StorageError};
use crate::keycode::encode_value;
use bisondb_engine::{prefix_successor, Snapshot};

const ENTRIES: u8 = crate::layout::INDEX_REGION;
const MULTIKEY: u8 = MULTIKEY_REGION;

/// First byte of every multikey marker.
pub(crate) const MULTIKEY_REGION: u8 = 0x04;

/// Index entries fetched per engine scan.
const SCAN_CHUNK: usize = 512;

/// More scan ranges than this (from `$in` lists on several fields) fall back to
/// ranges over the leading fields only.
const MAX_RANGES: usize = 4096;

/// A secondary index as `createIndexes` defines it and `listIndexes` shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct IndexSpec {
    pub name: String,
    /// The key pattern, e.g. `{created_on: 1}` or `{a: 1, "b.c": -1}`.
    pub key: Document,
    pub unique: bool,
    pub sparse: bool,
    pub partial_filter: Option<Document>,
    pub expire_after_seconds: Option<i64>,
    pub hidden: bool,
    /// `background` as the client gave it: ignored (builds are foreground,
    /// as in mongod 4.2+) but kept in the spec, as mongod shows it.
    pub background: Option<bool>,
    /// The index's collation, resolved (`None`: simple): its keys hold
    /// strings as collation keys (`bisondb_query::collation`).
    pub collation: Option<Document>,
    /// Options particular to the index's type, stored and shown by
    /// `listIndexes` as `createIndexes` resolved them (mongod's defaults
    /// filled in): a 2dsphere index's `2dsphereIndexVersion`, a 2d index's
    /// `bits`, `min`, `max`.
    pub type_options: Document,
}

/// The fields of a stored spec that are not type options.
const COMMON_SPEC_FIELDS: &[&str] = &[
    "background",
    "collation",
    "expireAfterSeconds",
    "hidden",
    "key",
    "name",
    "partialFilterExpression",
    "sparse",
    "unique",
    "v",
];

/// The kind of a geospatial index field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GeoKind {
    /// `"2d"`: legacy points on a plane bounded by `min`/`max`.
    Flat,
    /// `"2dsphere"`: GeoJSON on the sphere.
    Sphere,
}

impl IndexSpec {
    /// The geospatial field of the key pattern, if any (`createIndexes`
    /// allows one), with its kind.
    pub fn geo_field(&self) -> Option<(usize, GeoKind)> {
        self.key.iter().enumerate().find_map(|(i, (_, v))| match v {
            Bson::String(t) if t == "2d" => Some((i, GeoKind::Flat)),
            Bson::String(t) if t == "2dsphere" => Some((i, GeoKind::Sphere)),
            _ => None,
        })
    }

    /// A 2d index's `[min, max)` (default `[-180, 180)`).
    pub fn geo_bounds(&self) -> (f64, f64) {
        let num = |k: &str, d: f64| match self.type_options.get(k) {
            Some(Bson::Int32(i)) => f64::from(*i),
            Some(Bson::Int64(i)) => *i as f64,
            Some(Bson::Double(x)) => *x,
            _ => d,
        };
        (num("min", -180.0), num("max", 180.0))
    }

    /// The fields of the key pattern: a negative number means descending.
    pub fn fields(&self) -> Vec<KeyField> {
        self.key
            .iter()
            .map(|(k, v)| KeyField {
                path: k.clone(),
                descending: match v {
                    Bson::Int32(i) => *i < 0,
                    Bson::Int64(i) => *i < 0,
                    Bson::Double(d) => *d < 0.0,
                    Bson::Decimal128(d) => d.to_string().starts_with('-'),
                    _ => false,
                },
            })
            .collect()
    }

    /// A text index (key `{..., _fts: "text", _ftsx: 1, ...}`, as
    /// `createIndexes` stores it; its options are in `type_options`).
    pub fn is_text(&self) -> bool {
        matches!(self.key.get("_fts"), Some(Bson::String(t)) if t == "text")
    }

    /// The position of the `"hashed"` field of the key pattern, if any
    /// (`createIndexes` allows at most one).
    pub fn hashed_field(&self) -> Option<usize> {
        self.key
            .iter()
            .position(|(_, v)| matches!(v, Bson::String(t) if t == "hashed"))
    }

    /// The position of the wildcard term (`$**`, `a.$**`) of the key
    /// pattern, for a wildcard index (`createIndexes` allows one).
    pub fn wildcard_field(&self) -> Option<usize> {
        self.key
            .iter()
            .position(|(k, v)| wildcard::is_wildcard_field(k) && !matches!(v, Bson::String(_)))
    }

    /// The paths the wildcard term indexes, for a wildcard index.
    pub fn wildcard_paths(&self) -> Option<Result<WildcardPaths, MongoError>> {
        let at = self.wildcard_field()?;
        let (field, _) = self.key.iter().nth(at)?;
        Some(WildcardPaths::new(
            field,
            self.type_options.get_document("wildcardProjection").ok(),
        ))
    }

    /// The fields of the index's keys: the key pattern's, with a wildcard
    /// term as its two components, `$_path` then the value (named after the
    /// term).
    pub fn key_fields(&self) -> Vec<KeyField> {
        let mut fields = self.fields();
        if let Some(at) = self.wildcard_field() {
            fields.insert(
                at,
                KeyField {
                    path: wildcard::PATH_FIELD.to_string(),
                    descending: false,
                },
            );
        }
        fields
    }

    /// The spec as stored in the catalog (and shown by `listIndexes`, with `v`).
    pub fn to_document(&self) -> Document {
        let mut d = Document::new();
        d.insert("v", 2i32);
        d.insert("key", self.key.clone());
        d.insert("name", self.name.clone());
        if self.unique {
            d.insert("unique", true);
        }
        if self.sparse {
            d.insert("sparse", true);
        }
        if let Some(p) = &self.partial_filter {
            d.insert("partialFilterExpression", p.clone());
        }
        if let Some(s) = self.expire_after_seconds {
            d.insert("expireAfterSeconds", s);
        }
        if self.hidden {
            d.insert("hidden", true);
        }
        if let Some(b) = self.background {
            d.insert("background", b);
        }
        if let Some(c) = &self.collation {
            d.insert("collation", c.clone());
        }
        for (k, v) in &self.type_options {
            d.insert(k.clone(), v.clone());
        }
        d
    }

    /// Reads back what [`IndexSpec::to_document`] wrote.
    pub fn from_document(d: &Document) -> Option<IndexSpec> {
        Some(IndexSpec {
            name: d.get_str("name").ok()?.to_string(),
            key: d.get_document("key").ok()?.clone(),
            unique: d.get_bool("unique").unwrap_or(false),
            sparse: d.get_bool("sparse").unwrap_or(false),
            partial_filter: d.get_document("partialFilterExpression").ok().cloned(),
            expire_after_seconds: match d.get("expireAfterSeconds") {
                Some(Bson::Int64(i)) => Some(*i),
                Some(Bson::Int32(i)) => Some(i64::from(*i)),
                _ => None,
            },
            hidden: d.get_bool("hidden").unwrap_or(false),
            background: d.get_bool("background").ok(),
            collation: d.get_document("collation").ok().cloned(),
            type_options: d
                .iter()
                .filter(|(k, _)| !COMMON_SPEC_FIELDS.contains(&k.as_str()))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        })
    }

    /// Same key pattern (field names, order and directions).
    pub fn same_key(&self, other: &IndexSpec) -> bool {
        self.fields() == other.fields()
    }

    /// The same index signature, mongod's identity of an index (since 5.0,
    /// SERVER-47657): key pattern, collation, partial filter, `unique` and
    /// `sparse`. Indexes whose signatures differ may coexist under
    /// different names (one key indexed under two collations).
    pub fn same_signature(&self, other: &IndexSpec) -> bool {
        self.same_key(other)
            && self.collation == other.collation
            && self.partial_filter == other.partial_filter
            && self.unique == other.unique
            && self.sparse == other.sparse
    }

    /// Same options that change what the index holds or does.
    pub fn same_options(&self, other: &IndexSpec) -> bool {
        self.unique == other.unique
            && self.sparse == other.sparse
            && self.partial_filter == other.partial_filter
            && self.expire_after_seconds == other.expire_after_seconds
            && self.hidden == other.hidden
            && self.collation == other.collation
            && self.type_options == other.type_options
    }
}

/// What the planner needs to know about one index.
#[derive(Debug, Clone)]
pub struct IndexInfo {
    pub spec: IndexSpec,
    pub fields: Vec<KeyField>,
    /// Some document put more than one key in it (mongod never clears this).
    pub multikey: bool,
    /// `collMod`'s `prepareUnique`: new duplicate keys are refused, existing
    /// ones stay, until the index is converted to unique.
    pub prepare_unique: bool,
    /// Entries in the index, and their bytes (key plus value) before the
    /// engine compresses them.
    pub entries: u64,
    pub bytes: u64,
}

/// How often user operations used one index since `since` (`$indexStats`'
/// `accesses`). Kept in memory only: as in mongod, a restart, a drop and
/// re-create, or a `collMod` of the index starts it again.
#[derive(Debug)]
pub struct IndexUsage {
    ops: AtomicU64,
    since: bson::DateTime,
}

impl IndexUsage {
    pub(crate) fn new() -> IndexUsage {
        IndexUsage {
            ops: AtomicU64::new(0),
            since: bson::DateTime::now(),
        }
    }

    /// One more operation used the index.
    pub(crate) fn note(&self) {
        self.ops.fetch_add(1, Ordering::Relaxed);
    }

    /// `(ops, since)`.
    pub fn get(&self) -> (u64, bson::DateTime) {
        (self.ops.load(Ordering::Relaxed), self.since)
    }
}

/// One live index of a collection.
pub(crate) struct IndexState {
    pub(crate) id: u64,
    pub(crate) spec: IndexSpec,
    pub(crate) fields: Vec<KeyField>,
    pub(crate) keygen: KeyGenerator,
    pub(crate) multikey: AtomicBool,
    /// See [`IndexInfo::prepare_unique`]; kept beside the spec (in the catalog's
    /// index record) because only `collMod` sets it. Changed under the
    /// collection's write lock.
    pub(crate) prepare_unique: AtomicBool,
    /// A text index's definition (its entries come from it, not `keygen`).
    pub(crate) text: Option<TextSpec>,
    /// `$indexStats`' counter.
    pub(crate) usage: IndexUsage,
    /// Entries and their bytes (key plus value), as the collection's stats
    /// record last committed them; changed under the collection's write lock.
    pub(crate) entries: AtomicU64,
    pub(crate) bytes: AtomicU64,
}

impl std::fmt::Debug for IndexState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexState")
            .field("id", &self.id)
            .field("name", &self.spec.name)
            .finish_non_exhaustive()
    }
}

impl IndexState {
    pub(crate) fn new(id: u64, spec: IndexSpec, multikey: bool) -> Result<IndexState, MongoError> {
        let fields = spec.key_fields();
        let wildcard = match spec.wildcard_paths() {
            Some(p) => Some((spec.wildcard_field().unwrap_or(0), p?)),
            None => None,
        };
        let collation = match &spec.collation {
            Some(c) => bisondb_query::collation::Collation::parse(c)?,
            None => None,
        };
        let keygen = KeyGenerator::new(fields.clone(), spec.sparse, spec.partial_filter.as_ref())?
            .with_collation(collation)
            // mongod's hashed indexes refuse arrays in every field (16766).
            .refusing_arrays(spec.hashed_field().is_some())
            .with_geo(spec.geo_field().map(|(i, kind)| {
                let field = match kind {
                    GeoKind::Sphere => GeoField::Sphere,
                    GeoKind::Flat => {
                        let (min, max) = spec.geo_bounds();
                        GeoField::Flat { min, max }
                    }
                };
                (i, field)
            }))
            .with_wildcard(wildcard);
        let text = if spec.is_text() {
            Some(TextSpec::from_stored(&spec.key, &spec.type_options)?)
        } else {
            None
        };
        Ok(IndexState {
            text,
            id,
            spec,
            fields,
            keygen,
            multikey: AtomicBool::new(multikey),
            prepare_unique: AtomicBool::new(false),
            usage: IndexUsage::new(),
            entries: AtomicU64::new(0),
            bytes: AtomicU64::new(0),
        })
    }

    /// This index's line in the stats record.
    pub(crate) fn tally(&self) -> crate::layout::IndexTally {
        crate::layout::IndexTally {
            id: self.id,
            entries: self.entries.load(Ordering::Acquire),
            bytes: self.bytes.load(Ordering::Acquire),
        }
    }

    /// Makes `t` (a committed record's line for this index) current.
    pub(crate) fn set_tally(&self, t: &crate::layout::IndexTally) {
        self.entries.store(t.entries, Ordering::Release);
        self.bytes.store(t.bytes, Ordering::Release);
    }

    pub(crate) fn info(&self) -> IndexInfo {
        IndexInfo {
            spec: self.spec.clone(),
            fields: self.fields.clone(),
            multikey: self.multikey.load(Ordering::Acquire),
            prepare_unique: self.prepare_unique.load(Ordering::Acquire),
            entries: self.entries.load(Ordering::Acquire),
            bytes: self.bytes.load(Ordering::Acquire),
        }
    }
}

/// The shared list of a collection's indexes; replaced whole on create/drop.
pub(crate) type IndexList = Arc<Vec<Arc<IndexState>>>;

fn push_u64(out: &mut Vec<u8>, v: u64) {
    out.extend_from_slice(&v.to_be_bytes());
}

/// Every entry of index `index` of collection `coll` starts with this.
pub(crate) fn index_prefix(coll: u64, index: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(ENTRIES);
    push_u64(&mut k, coll);
    push_u64(&mut k, index);
    k
}

pub(crate) fn multikey_key(coll: u64, index: u64) -> Vec<u8> {
    let mut k = Vec::with_capacity(17);
    k.push(MULTIKEY);
    push_u64(&mut k, coll);
    push_u64(&mut k, index);
    k
}

/// `[start, end)` ranges holding every index key and marker of collection `coll`.
pub(crate) fn collection_ranges(coll: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    [ENTRIES, MULTIKEY]
        .into_iter()
        .filter_map(|tag| {
            let mut p = vec![tag];
            push_u64(&mut p, coll);
            prefix_successor(&p).map(|end| (p, end))
        })
        .collect()
}

/// `[start, end)` of one index's entries.
pub(crate) fn index_range(coll: u64, index: u64) -> (Vec<u8>, Vec<u8>) {
    let p = index_prefix(coll, index);
    let end = prefix_successor(&p).unwrap_or_else(|| vec![MULTIKEY]);
    (p, end)
}

fn encode_component(v: &RawBson, descending: bool, out: &mut Vec<u8>) {
    let start = out.len();
    encode_value(v.as_raw_bson_ref(), out);
    if descending {
        if let Some(tail) = out.get_mut(start..) {
            tail.iter_mut().for_each(|b| *b = !*b);
        }
    }
}

fn encode_bound(v: &Bson, descending: bool, out: &mut Vec<u8>) {
    match RawBson::try_from(v.clone()) {
        Ok(raw) => encode_component(&raw, descending, out),
        // Bounds are built from parsed filter values, which always convert.
        Err(_) => encode_component(&RawBson::Null, descending, out),
    }
}

/// Bounds on the fields of an index with spec `spec`, made fit to scan it:
/// the bounds of a hashed field are the hashes of its points (the keys the
/// index stores), sorted as the index stores them; a range says nothing about
/// hashes, so it bounds nothing. Hashes may collide: never exact.
pub fn hash_bounds(spec: &IndexSpec, mut bounds: Vec<FieldBounds>) -> Vec<FieldBounds> {
    let Some(b) = spec.hashed_field().and_then(|i| bounds.get_mut(i)) else {
        return bounds;
    };
    if b.is_full() || !b.is_points() {
        *b = FieldBounds::full();
        return bounds;
    }
    let mut hashes: Vec<i64> = Vec::with_capacity(b.intervals.len());
    for i in &b.intervals {
        match RawBson::try_from(i.lo.clone()) {
            Ok(v) => hashes.push(crate::keycode::hashed_key(v.as_raw_bson_ref())),
            // Bounds come from parsed filter values, which always convert;
            // if one did not, bounding nothing stays correct.
            Err(_) => {
                *b = FieldBounds::full();
                return bounds;
            }
        }
    }
    hashes.sort_unstable();
    hashes.dedup();
    b.intervals = hashes
        .into_iter()
        .map(|h| Interval::point(Bson::Int64(h)))
        .collect();
    b.exact = false;
    bounds
}

/// One engine write an index needs for a document.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub(crate) struct Entry {
    pub(crate) key: Vec<u8>,
    pub(crate) value: Vec<u8>,
}

/// An entry with the key values it encodes.
pub(crate) type KeyedEntry = (Entry, Vec<RawBson>);

/// A byte range being scanned.
type OpenRange = (Bound<Vec<u8>>, Bound<Vec<u8>>);

/// The entries of `doc` (whose `_id` encodes to `encoded_id`) in index `ix`
/// of collection `coll`, with the key values (for duplicate-key errors).
pub(crate) fn entries(
    ix: &IndexState,
    coll: u64,
    doc: &RawDocument,
    encoded_id: &[u8],
) -> Result<(Vec<KeyedEntry>, bool), StorageError> {
    if let Some(text) = &ix.text {
        return text_entries(ix, text, coll, doc, encoded_id);
    }
    let keys = ix.keygen.keys(doc).map_err(StorageError::Mongo)?;
    let mut prefix = Vec::with_capacity(64);
    prefix.push(ENTRIES);
    push_u64(&mut prefix, coll);
    push_u64(&mut prefix, ix.id);
    let mut out = Vec::with_capacity(keys.keys.len());
    let hashed = ix.spec.hashed_field();
    for mut values in keys.keys {
        // A hashed field stores the hash of its value (the key values are
        // kept hashed too, as mongod's keys are).
        if let Some(v) = hashed.and_then(|i| values.get_mut(i)) {
            *v = RawBson::Int64(crate::keycode::hashed_key(v.as_raw_bson_ref()));
        }
        let mut key = prefix.clone();
        for (v, f) in values.iter().zip(&ix.fields) {
            encode_component(v, f.descending, &mut key);
        }
        if !ix.spec.unique {
            key.extend_from_slice(encoded_id);
        }
        out.push((
            Entry {
                key,
                value: encoded_id.to_vec(),
            },
            values,
        ));
    }
    for path in keys.multikey_paths {
        let mut key = prefix.clone();
        key.push(WILDCARD_MULTIKEY);
        let path = RawBson::String(path);
        encode_component(&path, false, &mut key);
        key.extend_from_slice(encoded_id);
        out.push((
            Entry {
                key,
                value: encoded_id.to_vec(),
            },
            vec![path],
        ));
    }
    Ok((out, keys.multikey))
}

/// Leads a wildcard index's multikey path entries (see the module doc):
/// below the first byte of every encoded value, ascending or inverted.
const WILDCARD_MULTIKEY: u8 = 0x00;

/// Whether some document of index `ix` (a wildcard index) holds an array
/// at `path` or at a path above it, in `snap`.
pub(crate) fn wildcard_multikey(
    snap: &dyn Snapshot,
    coll: u64,
    ix: &IndexState,
    path: &str,
) -> Result<bool, StorageError> {
    let mut prefix = index_prefix(coll, ix.id);
    prefix.push(WILDCARD_MULTIKEY);
    let mut end = 0;
    loop {
        end = path
            .get(end..)
            .and_then(|rest| rest.find('.'))
            .map_or(path.len(), |i| end + i);
        let mut k = prefix.clone();
        encode_component(
            &RawBson::String(path.get(..end).unwrap_or(path).to_string()),
            false,
            &mut k,
        );
        let stop = prefix_successor(&k);
        let stop = match &stop {
            Some(e) => Bound::Excluded(e.as_slice()),
            None => Bound::Unbounded,
        };
        if !snap.scan(Bound::Included(&k), stop, false, 1)?.is_empty() {
            return Ok(true);
        }
        if end >= path.len() {
            return Ok(false);
        }
        end += 1;
    }
}

/// The value of a text index's prefix or suffix field in `doc` (null when
/// missing); an array along the path fails the write, as in mongod.
fn text_extra(doc: &RawDocument, path: &str) -> Result<RawBson, StorageError> {
    let mut vals = Vec::new();
    let info = bisondb_query::path::lookup_raw(doc, path, &mut vals);
    let array =
        info.traversed_array || vals.iter().any(|v| matches!(v, bson::RawBsonRef::Array(_)));
    if array {
        let shown = bson::Document::try_from(doc)
            .map(|d| crate::error::shell_format_document(&d))
            .unwrap_or_default();
        return Err(StorageError::Mongo(MongoError::new(
            bisondb_error::ErrorCode::CannotBuildIndexKeys,
            format!("Field '{path}' of text index contains an array in document: {shown}"),
        )));
    }
    Ok(vals
        .first()
        .map(|v| RawBson::from(*v))
        .unwrap_or(RawBson::Null))
}

/// A text index's entries for `doc`: one per term, keyed by the prefix
/// fields' values, the term, its score in the document and the suffix
/// fields' values (mongod's key layout), so a lookup of a term under equal
/// prefix values is one range.
fn text_entries(
    ix: &IndexState,
    text: &TextSpec,
    coll: u64,
    doc: &RawDocument,
    encoded_id: &[u8],
) -> Result<(Vec<KeyedEntry>, bool), StorageError> {
    let before = text
        .prefix
        .iter()
        .map(|p| text_extra(doc, p))
        .collect::<Result<Vec<_>, _>>()?;
    let after = text
        .suffix
        .iter()
        .map(|p| text_extra(doc, p))
        .collect::<Result<Vec<_>, _>>()?;
    // A partial text index holds only the documents its filter matches (the
    // key generator applies the filter: no keys means left out).
    if ix.spec.partial_filter.is_some()
        && ix
            .keygen
            .keys(doc)
            .map_err(StorageError::Mongo)?
            .keys
            .is_empty()
    {
        return Ok((Vec::new(), false));
    }
    let scores = text.term_scores(doc).map_err(StorageError::Mongo)?;
    let multikey = scores.len() > 1;
    let mut out = Vec::with_capacity(scores.len());
    let prefix = index_prefix(coll, ix.id);
    for (term, score) in scores {
        let mut values = before.clone();
        values.push(RawBson::String(term));
        values.push(RawBson::Double(score));
        values.extend(after.iter().cloned());
        let mut key = prefix.clone();
        for (v, f) in values.iter().zip(&ix.fields) {
            encode_component(v, f.descending, &mut key);
        }
        key.extend_from_slice(encoded_id);
        out.push((
            Entry {
                key,
                value: encoded_id.to_vec(),
            },
            values,
        ));
    }
    Ok((out, multikey))
}

/// Whether a document other than `encoded_id` has an entry starting with
/// `values_key` (a non-unique index key without its `_id` suffix) in `snap`.
pub(crate) fn other_owner(
    snap: &dyn Snapshot,
    values_key: &[u8],
    encoded_id: &[u8],
) -> Result<bool, StorageError> {
    let end = prefix_successor(values_key);
    let end = match &end {
        Some(e) => Bound::Excluded(e.as_slice()),
        None => Bound::Unbounded,
    };
    let found = snap.scan(Bound::Included(values_key), end, false, 2)?;
    Ok(found
        .iter()
        .any(|(_, owner)| owner.as_slice() != encoded_id))
}

/// The duplicate-key error for `values` in unique index `ix`.
pub(crate) fn duplicate(ns: &str, ix: &IndexState, values: &[RawBson]) -> StorageError {
    StorageError::DuplicateKey(Box::new(DuplicateKeyInfo {
        namespace: ns.to_string(),
        index_name: ix.spec.name.clone(),
        key_pattern: ix.spec.key.clone(),
        key_value: key_document(&ix.fields, values),
    }))
}

/// Engine key ranges `[start, end)` covering `bounds` (one per field of the
/// key pattern), sorted and non-overlapping. Leading fields whose bounds are
/// points extend the prefix; the first field with a range ends it (the fetch
/// re-checks predicates on later fields).
pub(crate) fn scan_ranges(
    coll: u64,
    ix: &IndexState,
    bounds: &[FieldBounds],
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let mut prefixes = vec![index_prefix(coll, ix.id)];
    let mut ranges: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    let mut done = false;
    for (f, b) in ix.fields.iter().zip(bounds) {
        if b.intervals.is_empty() {
            return Vec::new();
        }
        if b.is_full() {
            break;
        }
        let product = prefixes.len().saturating_mul(b.intervals.len());
        if b.is_points() && product <= MAX_RANGES {
            let mut next = Vec::with_capacity(product);
            for p in &prefixes {
                for i in &b.intervals {
                    let mut k = p.clone();
                    encode_bound(&i.lo, f.descending, &mut k);
                    next.push(k);
                }
            }
            prefixes = next;
            continue;
        }
        if product > MAX_RANGES {
            break;
        }
        for p in &prefixes {
            for i in &b.intervals {
                ranges.extend(interval_range(p, i, f.descending));
            }
        }
        done = true;
        break;
    }
    if !done {
        for p in prefixes {
            if let Some(end) = prefix_successor(&p) {
                ranges.push((p, end));
            }
        }
    }
    if ix.spec.wildcard_field().is_some() {
        // Keep the multikey path entries (below every value) out of scans.
        let mut floor = index_prefix(coll, ix.id);
        floor.push(WILDCARD_MULTIKEY + 1);
        for r in &mut ranges {
            if r.0 < floor {
                r.0 = floor.clone();
            }
        }
        ranges.retain(|r| r.0 < r.1);
    }
    merge(ranges)
}

fn interval_range(prefix: &[u8], i: &Interval, descending: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    if i.is_full() {
        return prefix_successor(prefix).map(|end| (prefix.to_vec(), end));
    }
    let at = |v: &Bson| {
        let mut k = prefix.to_vec();
        encode_bound(v, descending, &mut k);
        k
    };
    // In byte order a descending field runs from `hi` down to `lo`.
    let ((first, first_inc), (last, last_inc)) = if descending {
        ((&i.hi, i.hi_inclusive), (&i.lo, i.lo_inclusive))
    } else {
        ((&i.lo, i.lo_inclusive), (&i.hi, i.hi_inclusive))
    };
    let start = if first_inc {
        at(first)
    } else {
        prefix_successor(&at(first))?
    };
    let end = if last_inc {
        prefix_successor(&at(last))?
    } else {
        at(last)
    };
    (start < end).then_some((start, end))
}

fn merge(mut ranges: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Vec<u8>, Vec<u8>)> {
    ranges.sort();
    let mut out: Vec<(Vec<u8>, Vec<u8>)> = Vec::with_capacity(ranges.len());
    for (s, e) in ranges {
        if let Some(last) = out.last_mut() {
            if s <= last.1 {
                if e > last.1 {
                    last.1 = e;
                }
                continue;
            }
        }
        out.push((s, e));
    }
    out
}

/// Walks index entries over a list of byte ranges (ascending, or descending
/// when `reverse`), yielding the encoded `_id` each entry names. Counts the
/// keys it examined.
pub struct IndexScan {
    snapshot: Arc<dyn Snapshot>,
    ranges: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    current: Option<OpenRange>,
    reverse: bool,
    buffer: std::vec::IntoIter<(Vec<u8>, Vec<u8>)>,
    keys_examined: u64,
    prefix_len: usize,
}

impl IndexScan {
    pub(crate) fn new(
        snapshot: Arc<dyn Snapshot>,
        mut ranges: Vec<(Vec<u8>, Vec<u8>)>,
        reverse: bool,
        prefix_len: usize,
    ) -> IndexScan {
        if reverse {
            ranges.reverse();
        }
        IndexScan {
            snapshot,
            ranges: ranges.into_iter(),
            current: None,
            reverse,
            buffer: Vec::new().into_iter(),
            keys_examined: 0,
            prefix_len,
        }
    }

    /// Index keys read so far.
    pub fn keys_examined(&self) -> u64 {
        self.keys_examined
    }

    /// The next entry as `(key bytes after the index prefix, encoded _id)`.
    pub fn next_entry(&mut self) -> Option<Result<crate::KeyValue, StorageError>> {
        // Stops at its operation's next check (`bisondb_error::interrupt`).
        if let Err(e) = bisondb_error::interrupt::check() {
            self.current = None;
            self.ranges = Vec::new().into_iter();
            self.buffer = Vec::new().into_iter();
            return Some(Err(StorageError::Mongo(e)));
        }
        loop {
            if let Some((k, v)) = self.buffer.next() {
                self.keys_examined = self.keys_examined.saturating_add(1);
                let key = k.get(self.prefix_len..).unwrap_or_default().to_vec();
                return Some(Ok((key, v)));
            }
            if self.current.is_none() {
                let (s, e) = self.ranges.next()?;
                self.current = Some((Bound::Included(s), Bound::Excluded(e)));
            }
            let Some((start, end)) = self.current.as_mut() else {
                continue;
            };
            let chunk = match self.snapshot.scan(
                start.as_ref().map(Vec::as_slice),
                end.as_ref().map(Vec::as_slice),
                self.reverse,
                SCAN_CHUNK,
            ) {
                Ok(c) => c,
                Err(e) => {
                    self.current = None;
                    self.ranges = Vec::new().into_iter();
                    return Some(Err(e.into()));
                }
            };
            if chunk.len() < SCAN_CHUNK {
                self.current = None;
            } else if let Some((last, _)) = chunk.last() {
                if self.reverse {
                    *end = Bound::Excluded(last.clone());
                } else {
                    *start = Bound::Excluded(last.clone());
                }
            }
            self.buffer = chunk.into_iter();
        }
    }
}

impl Iterator for IndexScan {
    type Item = Result<Vec<u8>, StorageError>;

    fn next(&mut self) -> Option<Self::Item> {
        self.next_entry().map(|r| r.map(|(_, id)| id))
    }
}

#[cfg(test)]
mod tests;
