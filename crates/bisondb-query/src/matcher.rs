//! Query filter matching (`find`, `update`, `delete`, `$match`).
//!
//! A filter is parsed once into a [`Matcher`] tree, so per-document work is only
//! path lookups and comparisons. Semantics follow mongod: a predicate on a path
//! matches if any value reached through arrays satisfies it (leaf arrays are
//! also looked into, one level deep), a missing path behaves as null for
//! equality, comparisons stay inside one canonical type bracket, and `$ne` /
//! `$nin` / `$not` are plain negations of the positive predicate.

use std::cmp::Ordering;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawBsonRef, RawDocument};
use bson::spec::ElementType;
use bson::{Bson, DateTime, Document, RawDocumentBuf};

use std::sync::Arc;

use crate::collation::Collation;
use crate::compare::{
    compare_bson, compare_bson_in, compare_raw_bson, compare_raw_bson_in, has_string,
    is_numeric_type, type_rank, NumKey,
};
use crate::expr::{Expr as AggExpr, Vars};
use crate::path::lookup_raw;
use crate::value::truthy as agg_truthy;

pub mod bounds;
mod json_schema;
mod text;

/// Operators mongod has that BisonDB recognises but does not implement yet,
/// in either the top-level or the field position. Sorted, so it can be searched.
pub const NOT_IMPLEMENTED_OPERATORS: &[&str] = &[];

/// Filters nested deeper than this are rejected (mongod's limit), which also
/// bounds recursion while parsing and matching.
const MAX_DEPTH: usize = 100;

fn not_implemented(op: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!("{op} is not supported by BisonDB yet"),
    )
}

fn is_not_implemented(op: &str) -> bool {
    NOT_IMPLEMENTED_OPERATORS.binary_search(&op).is_ok()
}

/// A parsed query filter. Cheap to clone; safe to share between threads.
#[derive(Debug, Clone)]
pub struct Matcher {
    root: Expr,
    /// Set by [`Matcher::with_collation`], for callers that apply a matched
    /// update under the same collation.
    collation: Option<Arc<Collation>>,
}

#[derive(Debug, Clone)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Nor(Vec<Expr>),
    Path(String, PathOp),
    Const(bool),
    /// `$expr`: an aggregation expression evaluated against the whole document,
    /// with the operation's collation (`None`: simple).
    Agg(Box<AggExpr>, Option<Arc<Collation>>),
    /// `$jsonSchema`: a schema the whole document must satisfy.
    Schema(Box<json_schema::JsonSchema>),
    /// `$where`: a JavaScript predicate run with the document as `this`.
    Where(crate::js::Predicate),
    /// `$text` (see `matcher/text.rs`).
    Text(Box<text::TextNode>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum CmpOp {
    Lt,
    Lte,
    Gt,
    Gte,
}

/// A compiled `$regex`, keeping the source for equality with stored regex values.
#[derive(Debug, Clone)]
struct Re {
    pattern: String,
    options: String,
    re: Engine,
}

/// The linear-time `regex` engine where it can run the pattern; `fancy-regex`
/// (backtracking, bounded) only for what PCRE has and it lacks: lookaround and
/// backreferences, e.g. the common `^(?!system\.)`.
#[derive(Debug, Clone)]
enum Engine {
    Linear(regex::Regex),
    Backtracking(Box<fancy_regex::Regex>),
}

impl Engine {
    fn is_match(&self, s: &str) -> bool {
        match self {
            Engine::Linear(re) => re.is_match(s),
            // Exceeding the backtrack limit counts as no match rather than failing the query.
            Engine::Backtracking(re) => {
                // One backtracking match may be long: the operation's next
                // check (per document) reads the clock.
                bisondb_error::interrupt::hurry();
                re.is_match(s).unwrap_or(false)
            }
        }
    }
}

/// `$in` operands: plain values sorted in BSON order for binary search, regexes apart.
#[derive(Debug, Clone)]
struct InList {
    values: Vec<Bson>,
    regexes: Vec<Re>,
    has_null: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BitsTest {
    AllSet,
    AnySet,
    AllClear,
    AnyClear,
}

/// The bit positions a `$bits*` operator tests.
#[derive(Debug, Clone)]
enum BitMask {
    /// Explicit positions (from a position list or a numeric mask).
    Positions(Vec<u64>),
    /// A BinData mask, kept as bytes so a large mask costs no more memory
    /// than the filter itself (little-endian: byte 0 holds bits 0..8).
    Bytes(Vec<u8>),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TypeSel {
    Number,
    Exact(ElementType),
}

#[derive(Debug, Clone)]
enum PathOp {
    // Element-wise predicates: tested against each reached value and each
    // element of a reached array.
    Eq(Bson),
    Cmp(CmpOp, Bson),
    In(InList),
    Regex(Re),
    Type(Vec<TypeSel>),
    Mod(i64, i64),
    Bits(BitsTest, BitMask),
    /// `Eq`, `Cmp` and `In` whose operand holds a string, under a non-simple
    /// collation (see [`Matcher::with_collation`]). Kept apart so the simple
    /// path pays nothing, and so index bounds (binary order) never use them.
    EqColl(Bson, Arc<Collation>),
    CmpColl(CmpOp, Bson, Arc<Collation>),
    InColl(InList, Arc<Collation>),
    // Predicates on the reached values themselves.
    Exists(bool),
    Size(i64),
    /// `$all`; an empty list matches nothing.
    All(Vec<PathOp>),
    ElemMatchValue(Vec<PathOp>),
    ElemMatchObject(Box<Expr>),
    /// Negation of the conjunction of the operators.
    Not(Vec<PathOp>),
    And(Vec<PathOp>),
    /// `$geoWithin` / `$within`: some geometry the path holds lies in the region.
    GeoWithin(Arc<crate::geo::Region>),
    /// `$geoIntersects`: some geometry the path holds meets the operand.
    GeoIntersects(Arc<crate::geo::Intersects>),
    /// `$near` / `$nearSphere`: the nearest geometry the path holds is within
    /// the distance bounds; the planner orders the results by distance.
    Near(Arc<crate::geo::Near>),
}

// ---------------------------------------------------------------------------
// Matching
// ---------------------------------------------------------------------------

impl Matcher {
    /// Parses a raw filter document.
    ///
    /// Top-level fields are read from the raw bytes, so a filter that repeats
    /// a field (`{a: {$gt: 1}, a: {$lt: 5}}`, possible on the wire though not in
    /// an owned `Document`) keeps every predicate, ANDed, as mongod does.
    pub fn parse(filter: &RawDocument) -> MongoResult<Matcher> {
        let invalid = |e: bson::error::Error| {
            MongoError::new(ErrorCode::InvalidBSON, format!("invalid filter: {e}"))
        };
        let mut entries = Vec::new();
        for item in filter {
            let (k, v) = item.map_err(invalid)?;
            let v = Bson::try_from(v).map_err(|e| {
                MongoError::new(ErrorCode::InvalidBSON, format!("invalid filter: {e}"))
            })?;
            entries.push((k.as_str().to_string(), v));
        }
        let root = parse_entries(entries.iter().map(|(k, v)| (k, v)), 0, false)?;
        check_near(&root)?;
        text::check_text(&root)?;
        Ok(Matcher {
            root,
            collation: None,
        })
    }

    /// Parses an owned filter document.
    pub fn parse_doc(filter: &Document) -> MongoResult<Matcher> {
        let root = parse_top(filter, 0, false)?;
        check_near(&root)?;
        text::check_text(&root)?;
        Ok(Matcher {
            root,
            collation: None,
        })
    }

    /// The same filter comparing strings with `collation` (`None`: simple,
    /// which leaves the matcher unchanged). Only predicates whose operand holds
    /// a string change: `$eq`, `$ne`, the ordering operators, `$in`/`$nin`
    /// (also inside `$all`, `$not`, `$elemMatch`, logical operators), and
    /// `$expr`. `$regex`, `$type`, `$size` and field names stay binary, as in
    /// mongod.
    pub fn with_collation(mut self, collation: Option<Arc<Collation>>) -> Matcher {
        if let Some(c) = collation {
            self.root.collate(&c);
            self.collation = Some(c);
        }
        self
    }

    /// The collation given to [`Matcher::with_collation`] (`None`: simple).
    pub fn collation(&self) -> Option<&Arc<Collation>> {
        self.collation.as_ref()
    }

    /// Whether the document satisfies the filter. An error while evaluating
    /// `$expr` counts as "no match"; use [`Matcher::try_matches`] to see it.
    pub fn matches(&self, doc: &RawDocument) -> bool {
        self.root.matches(doc)
    }

    /// Like [`Matcher::matches`], but reports errors raised by `$expr`
    /// evaluation (mongod fails the whole operation with them).
    pub fn try_matches(&self, doc: &RawDocument) -> MongoResult<bool> {
        self.root.try_matches(doc)
    }

    /// Whether an owned document satisfies the filter (serializes it first).
    pub fn matches_doc(&self, doc: &Document) -> bool {
        match RawDocumentBuf::try_from(doc) {
            Ok(raw) => self.matches(&raw),
            Err(_) => false,
        }
    }

    /// For a document the filter matches, the index of the array element that
    /// made a path predicate match, in the first array met along that
    /// predicate's path (mongod's "elemMatchKey", used by the positional
    /// projection `a.$`). `None` when no array was involved or nothing matched.
    pub fn elem_match_key(&self, doc: &RawDocument) -> Option<usize> {
        if !self.root.matches(doc) {
            return None;
        }
        self.root.elem_match_key(doc)
    }

    /// Whether the filter holds a `$where` (refused in an aggregation `$match`).
    pub fn has_where(&self) -> bool {
        fn walk(e: &Expr) -> bool {
            match e {
                Expr::And(v) | Expr::Or(v) | Expr::Nor(v) => v.iter().any(walk),
                Expr::Where(_) => true,
                _ => false,
            }
        }
        walk(&self.root)
    }

    /// Whether the filter matches everything (`{}` or only `$comment`).
    pub fn is_empty(&self) -> bool {
        matches!(&self.root, Expr::And(v) if v.is_empty())
    }

    /// Top-level equality constraints (`{a: 1}`, `{a: {$eq: 1}}`, and the same
    /// inside a top-level `$and`), used to seed upserted documents.
    pub fn equality_fields(&self) -> Vec<(String, Bson)> {
        let mut out = Vec::new();
        collect_equalities(&self.root, &mut out);
        out
    }

    /// The filter's `$near` / `$nearSphere` with its path (parsing allows one,
    /// at the top level only, as mongod does).
    pub fn near(&self) -> Option<(&str, &crate::geo::Near)> {
        fn find(e: &Expr) -> Option<(&str, &crate::geo::Near)> {
            match e {
                Expr::And(v) => v.iter().find_map(find),
                Expr::Path(p, op) => find_op(op).map(|n| (p.as_str(), n)),
                _ => None,
            }
        }
        fn find_op(op: &PathOp) -> Option<&crate::geo::Near> {
            match op {
                PathOp::Near(n) => Some(n),
                PathOp::And(ops) => ops.iter().find_map(find_op),
                _ => None,
            }
        }
        find(&self.root)
    }

    /// The `_id` value if the filter is exactly an equality on `_id` (a point lookup).
    pub fn id_equality(&self) -> Option<Bson> {
        let Expr::And(children) = &self.root else {
            return None;
        };
        let [Expr::Path(path, PathOp::Eq(v))] = children.as_slice() else {
            return None;
        };
        if path != "_id" {
            return None;
        }
        match v {
            Bson::Array(_) | Bson::RegularExpression(_) | Bson::Undefined => None,
            other => Some(other.clone()),
        }
    }
}

/// `$near` / `$nearSphere` may appear once, and only at the top level (or
/// under a top-level `$and`): its results are ordered by distance.
fn check_near(root: &Expr) -> MongoResult<()> {
    fn walk(e: &Expr, top: bool, n: &mut usize) -> MongoResult<()> {
        match e {
            Expr::And(v) => v.iter().try_for_each(|c| walk(c, top, n)),
            Expr::Or(v) | Expr::Nor(v) => v.iter().try_for_each(|c| walk(c, false, n)),
            Expr::Path(_, op) => walk_op(op, top, n),
            Expr::Const(_) | Expr::Agg(..) | Expr::Schema(_) | Expr::Where(_) | Expr::Text(_) => {
                Ok(())
            }
        }
    }
    fn walk_op(op: &PathOp, top: bool, n: &mut usize) -> MongoResult<()> {
        match op {
            PathOp::Near(_) if !top => Err(MongoError::bad_value("geoNear must be top-level expr")),
            PathOp::Near(_) => {
                *n += 1;
                if *n > 1 {
                    return Err(MongoError::bad_value("Too many geoNear expressions"));
                }
                Ok(())
            }
            PathOp::And(ops) => ops.iter().try_for_each(|o| walk_op(o, top, n)),
            PathOp::All(ops) | PathOp::ElemMatchValue(ops) | PathOp::Not(ops) => {
                ops.iter().try_for_each(|o| walk_op(o, false, n))
            }
            PathOp::ElemMatchObject(e) => walk(e, false, n),
            _ => Ok(()),
        }
    }
    walk(root, true, &mut 0)
}

fn collect_equalities(e: &Expr, out: &mut Vec<(String, Bson)>) {
    match e {
        Expr::And(children) => {
            for c in children {
                collect_equalities(c, out);
            }
        }
        Expr::Path(path, op) => collect_op_equalities(path, op, out),
        _ => {}
    }
}

fn collect_op_equalities(path: &str, op: &PathOp, out: &mut Vec<(String, Bson)>) {
    match op {
        PathOp::Eq(v) | PathOp::EqColl(v, _) => out.push((path.to_string(), v.clone())),
        PathOp::And(ops) => {
            for o in ops {
                collect_op_equalities(path, o, out);
            }
        }
        _ => {}
    }
}

impl Expr {
    fn matches(&self, doc: &RawDocument) -> bool {
        self.try_matches(doc).unwrap_or(false)
    }

    fn try_matches(&self, doc: &RawDocument) -> MongoResult<bool> {
        Ok(match self {
            Expr::And(v) => {
                for e in v {
                    if !e.try_matches(doc)? {
                        return Ok(false);
                    }
                }
                true
            }
            Expr::Or(v) => {
                for e in v {
                    if e.try_matches(doc)? {
                        return Ok(true);
                    }
                }
                false
            }
            Expr::Nor(v) => {
                for e in v {
                    if e.try_matches(doc)? {
                        return Ok(false);
                    }
                }
                true
            }
            Expr::Const(b) => *b,
            // A top-level field needs no fan-out (and no allocation).
            Expr::Path(path, op) if !path.contains('.') => match doc.get(path) {
                Ok(Some(v)) => op.matches_values(&[v], false),
                _ => op.matches_values(&[], true),
            },
            Expr::Path(path, op) => {
                let mut vals = Vec::new();
                let info = lookup_raw(doc, path, &mut vals);
                op.matches_values(&vals, info.missing)
            }
            Expr::Agg(e, coll) => {
                let owned = Document::try_from(doc)
                    .map_err(|e| MongoError::new(ErrorCode::InvalidBSON, e.to_string()))?;
                let vars = match coll {
                    None => Vars::new(),
                    Some(c) => Vars::with_collation(DateTime::now(), Some(c.clone())),
                };
                agg_truthy(e.eval(&owned, &vars)?.as_ref())
            }
            Expr::Schema(s) => s.matches_doc(doc),
            Expr::Where(p) => p.matches(doc)?,
            Expr::Text(t) => t.matches(doc)?,
        })
    }
}

impl Expr {
    /// Rewrites string comparisons to use `c` (see [`Matcher::with_collation`]).
    fn collate(&mut self, c: &Arc<Collation>) {
        match self {
            Expr::And(v) | Expr::Or(v) | Expr::Nor(v) => v.iter_mut().for_each(|e| e.collate(c)),
            // Only a DBRef part (see `parse_entries`) has a path starting with
            // `$`; mongod compares `$ref` and `$db` without the collation.
            Expr::Path(p, _) if p == "$ref" || p == "$db" => {}
            Expr::Path(_, op) => op.collate(c),
            Expr::Agg(_, coll) => *coll = Some(c.clone()),
            Expr::Const(_) | Expr::Schema(_) | Expr::Where(_) | Expr::Text(_) => {}
        }
    }
}

impl PathOp {
    /// See [`Expr::collate`].
    fn collate(&mut self, c: &Arc<Collation>) {
        let placeholder = PathOp::Exists(true);
        match self {
            PathOp::Eq(x) | PathOp::Cmp(_, x) if has_string(x) => {
                *self = match std::mem::replace(self, placeholder) {
                    PathOp::Eq(x) => PathOp::EqColl(x, c.clone()),
                    PathOp::Cmp(op, x) => PathOp::CmpColl(op, x, c.clone()),
                    other => other,
                };
            }
            PathOp::In(list) if list.values.iter().any(has_string) => {
                if let PathOp::In(mut list) = std::mem::replace(self, placeholder) {
                    // Binary search needs the collation's order, and values it
                    // finds equal collapse.
                    list.values.sort_by(|a, b| compare_bson_in(a, b, Some(c)));
                    list.values
                        .dedup_by(|a, b| compare_bson_in(a, b, Some(c)) == Ordering::Equal);
                    *self = PathOp::InColl(list, c.clone());
                }
            }
            PathOp::All(ops)
            | PathOp::ElemMatchValue(ops)
            | PathOp::Not(ops)
            | PathOp::And(ops) => ops.iter_mut().for_each(|o| o.collate(c)),
            PathOp::ElemMatchObject(e) => e.collate(c),
            _ => {}
        }
    }
}

impl Expr {
    /// See [`Matcher::elem_match_key`]; only called on a matching subtree.
    fn elem_match_key(&self, doc: &RawDocument) -> Option<usize> {
        match self {
            Expr::And(v) => v.iter().find_map(|e| e.elem_match_key(doc)),
            Expr::Or(v) => v
                .iter()
                .filter(|e| e.matches(doc))
                .find_map(|e| e.elem_match_key(doc)),
            Expr::Nor(_)
            | Expr::Const(_)
            | Expr::Agg(..)
            | Expr::Schema(_)
            | Expr::Where(_)
            | Expr::Text(_) => None,
            Expr::Path(path, op) => path_elem_match_key(doc, path, op),
        }
    }
}

fn path_elem_match_key(doc: &RawDocument, path: &str, op: &PathOp) -> Option<usize> {
    let parts: Vec<&str> = path.split('.').collect();
    let mut cur = RawBsonRef::Document(doc);
    for (i, part) in parts.iter().enumerate() {
        cur = match cur {
            RawBsonRef::Document(d) => d.get(part).ok()??,
            RawBsonRef::Array(a) => {
                let rest = parts.get(i..).unwrap_or_default().join(".");
                return a.into_iter().flatten().position(|e| match e {
                    RawBsonRef::Document(d) => {
                        let mut vals = Vec::new();
                        let info = lookup_raw(d, &rest, &mut vals);
                        op.matches_values(&vals, info.missing)
                    }
                    _ => false,
                });
            }
            _ => return None,
        };
    }
    match cur {
        RawBsonRef::Array(a) => a
            .into_iter()
            .flatten()
            .position(|e| op.matches_leaf_element(e)),
        _ => None,
    }
}

/// Calls `f` on each reached value and on each element of reached arrays.
fn any_candidate(vals: &[RawBsonRef<'_>], f: &dyn Fn(RawBsonRef<'_>) -> bool) -> bool {
    vals.iter().any(|v| {
        f(*v)
            || match v {
                RawBsonRef::Array(a) => a.into_iter().flatten().any(f),
                _ => false,
            }
    })
}

fn num_to_i64_trunc(v: RawBsonRef<'_>) -> Option<i64> {
    match v {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) if d.is_finite() => Some(d.trunc() as i64),
        RawBsonRef::Decimal128(d) => d
            .to_string()
            .parse::<f64>()
            .ok()
            .filter(|f| f.is_finite())
            .map(|f| f.trunc() as i64),
        _ => None,
    }
}

impl Re {
    fn matches_value(&self, v: RawBsonRef<'_>) -> bool {
        match v {
            RawBsonRef::String(s) | RawBsonRef::Symbol(s) => self.re.is_match(s),
            RawBsonRef::RegularExpression(r) => {
                r.pattern.as_str() == self.pattern && r.options.as_str() == self.options
            }
            _ => false,
        }
    }
}

impl InList {
    fn contains(&self, v: RawBsonRef<'_>) -> bool {
        self.values
            .binary_search_by(|probe| compare_raw_bson(v, probe).reverse())
            .is_ok()
            || self.regexes.iter().any(|r| r.matches_value(v))
    }

    /// Membership under a collation; the values must be sorted by it.
    fn contains_in(&self, v: RawBsonRef<'_>, c: Option<&Collation>) -> bool {
        self.values
            .binary_search_by(|probe| compare_raw_bson_in(v, probe, c).reverse())
            .is_ok()
            || self.regexes.iter().any(|r| r.matches_value(v))
    }
}

fn raw_is_nan(v: RawBsonRef<'_>) -> bool {
    match v {
        RawBsonRef::Double(d) => d.is_nan(),
        RawBsonRef::Decimal128(d) => d.to_string().ends_with("NaN"),
        _ => false,
    }
}

fn bson_is_nan(v: &Bson) -> bool {
    match v {
        Bson::Double(d) => d.is_nan(),
        Bson::Decimal128(d) => d.to_string().ends_with("NaN"),
        _ => false,
    }
}

/// `$lt`/`$lte`/`$gt`/`$gte` on one value (within its type bracket).
fn cmp_test(op: CmpOp, v: RawBsonRef<'_>, x: &Bson, c: Option<&Collation>) -> bool {
    let bound = matches!(x, Bson::MinKey | Bson::MaxKey);
    if !bound && type_rank(v.element_type()) != type_rank(x.element_type()) {
        return false;
    }
    // mongod: NaN equals NaN and is neither less nor greater than
    // anything, though it sorts below every number.
    match (raw_is_nan(v), bson_is_nan(x)) {
        (false, false) => {}
        (true, true) => return matches!(op, CmpOp::Lte | CmpOp::Gte),
        _ => return false,
    }
    let o = compare_raw_bson_in(v, x, c);
    match op {
        CmpOp::Lt => o == Ordering::Less,
        CmpOp::Lte => o != Ordering::Greater,
        CmpOp::Gt => o == Ordering::Greater,
        CmpOp::Gte => o != Ordering::Less,
    }
}

impl PathOp {
    /// Element-wise test of one value, without looking into arrays.
    fn test_one(&self, v: RawBsonRef<'_>) -> bool {
        match self {
            PathOp::Eq(x) => compare_raw_bson(v, x) == Ordering::Equal,
            PathOp::Cmp(op, x) => cmp_test(*op, v, x, None),
            PathOp::EqColl(x, c) => compare_raw_bson_in(v, x, Some(c)) == Ordering::Equal,
            PathOp::CmpColl(op, x, c) => cmp_test(*op, v, x, Some(c)),
            PathOp::InColl(list, c) => list.contains_in(v, Some(c)),
            PathOp::In(list) => list.contains(v),
            PathOp::Regex(re) => re.matches_value(v),
            PathOp::Type(sels) => {
                let t = v.element_type();
                sels.iter().any(|s| match s {
                    TypeSel::Number => is_numeric_type(t),
                    TypeSel::Exact(e) => *e == t,
                })
            }
            PathOp::Bits(test, mask) => bits_match(*test, mask, v),
            PathOp::Mod(div, rem) => match num_to_i64_trunc(v) {
                Some(n) => n.checked_rem(*div).unwrap_or(0) == *rem,
                None => false,
            },
            other => other.matches_values(&[v], false),
        }
    }

    /// Whether a missing path satisfies an element-wise predicate (missing acts as null).
    fn matches_missing(&self) -> bool {
        match self {
            PathOp::Eq(x) => matches!(x, Bson::Null),
            PathOp::Cmp(op, x) => match x {
                Bson::Null => matches!(op, CmpOp::Lte | CmpOp::Gte),
                Bson::MinKey => matches!(op, CmpOp::Gt | CmpOp::Gte),
                Bson::MaxKey => matches!(op, CmpOp::Lt | CmpOp::Lte),
                _ => false,
            },
            PathOp::In(list) | PathOp::InColl(list, _) => list.has_null,
            _ => false,
        }
    }

    fn is_element_wise(&self) -> bool {
        matches!(
            self,
            PathOp::Eq(_)
                | PathOp::Cmp(..)
                | PathOp::In(_)
                | PathOp::EqColl(..)
                | PathOp::CmpColl(..)
                | PathOp::InColl(..)
                | PathOp::Regex(_)
                | PathOp::Type(_)
                | PathOp::Mod(..)
                | PathOp::Bits(..)
        )
    }

    /// Whether the values a path reached (plus a "missing" branch) satisfy the predicate.
    fn matches_values(&self, vals: &[RawBsonRef<'_>], missing: bool) -> bool {
        if self.is_element_wise() {
            return any_candidate(vals, &|v| self.test_one(v))
                || (missing && self.matches_missing());
        }
        match self {
            PathOp::Exists(want) => vals.is_empty() != *want,
            PathOp::Size(n) => vals.iter().any(|v| match v {
                RawBsonRef::Array(a) => {
                    i64::try_from(a.into_iter().count()).is_ok_and(|len| len == *n)
                }
                _ => false,
            }),
            PathOp::All(items) => {
                !items.is_empty() && items.iter().all(|i| i.matches_values(vals, missing))
            }
            PathOp::ElemMatchValue(ops) => {
                each_array_element(vals, &|e| ops.iter().all(|op| op.matches_single(e)))
            }
            PathOp::ElemMatchObject(expr) => each_array_element(vals, &|e| match e {
                RawBsonRef::Document(d) => expr.matches(d),
                _ => false,
            }),
            PathOp::Not(ops) => !ops.iter().all(|op| op.matches_values(vals, missing)),
            PathOp::And(ops) => ops.iter().all(|op| op.matches_values(vals, missing)),
            PathOp::GeoWithin(r) => geo_values(vals).iter().any(|s| r.contains(s)),
            PathOp::GeoIntersects(i) => geo_values(vals).iter().any(|s| i.matches(s)),
            PathOp::Near(n) => {
                let owned: Vec<Bson> = vals
                    .iter()
                    .filter_map(|v| Bson::try_from(*v).ok())
                    .collect();
                n.nearest(&owned).is_some_and(|(d, _)| n.in_range(d))
            }
            _ => false,
        }
    }

    /// Whether one element of a leaf array satisfies the predicate on its own
    /// (for `$elemMatch`, the element is what the sub-filter is tested against).
    fn matches_leaf_element(&self, e: RawBsonRef<'_>) -> bool {
        match self {
            PathOp::ElemMatchObject(expr) => match e {
                RawBsonRef::Document(d) => expr.matches(d),
                _ => false,
            },
            PathOp::ElemMatchValue(ops) => ops.iter().all(|op| op.matches_single(e)),
            PathOp::And(ops) => ops.iter().all(|op| op.matches_leaf_element(e)),
            op => op.matches_values(&[e], false),
        }
    }

    /// Test of one array element inside a value-form `$elemMatch`: predicates
    /// apply to the element itself, without looking into it if it is an array.
    fn matches_single(&self, e: RawBsonRef<'_>) -> bool {
        match self {
            PathOp::Exists(want) => *want,
            PathOp::Not(ops) => !ops.iter().all(|op| op.matches_single(e)),
            PathOp::And(ops) => ops.iter().all(|op| op.matches_single(e)),
            op if op.is_element_wise() => op.test_one(e),
            op => op.matches_values(&[e], false),
        }
    }
}

/// The geometries among the values a path reached (see [`crate::geo::stored_values`]).
fn geo_values(vals: &[RawBsonRef<'_>]) -> Vec<crate::geo::Stored> {
    vals.iter()
        .filter_map(|v| Bson::try_from(*v).ok())
        .flat_map(|v| crate::geo::stored_values(&v))
        .collect()
}

fn each_array_element(vals: &[RawBsonRef<'_>], f: &dyn Fn(RawBsonRef<'_>) -> bool) -> bool {
    vals.iter().any(|v| match v {
        RawBsonRef::Array(a) => a.into_iter().flatten().any(f),
        _ => false,
    })
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

fn depth_check(depth: usize) -> MongoResult<()> {
    if depth > MAX_DEPTH {
        return Err(MongoError::bad_value(format!(
            "exceeded maximum query tree depth of {MAX_DEPTH}"
        )));
    }
    Ok(())
}

/// `$sampleRate: r` keeps each document with probability `r`, as mongod
/// does: 0 and 1 become constants, anything between becomes
/// `$expr: {$lt: [{$rand: {}}, r]}`, so every evaluation draws afresh.
fn parse_sample_rate(v: &Bson) -> MongoResult<Expr> {
    let rate = match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(x) => *x,
        Bson::Decimal128(d) => crate::decimal::Dec::from_bson(*d).to_f64(),
        _ => {
            return Err(MongoError::bad_value(
                "argument to $sampleRate must be a numeric type",
            ))
        }
    };
    // Written so NaN fails too.
    if !(0.0..=1.0).contains(&rate) {
        return Err(MongoError::bad_value(
            "numeric argument to $sampleRate must be in [0, 1]",
        ));
    }
    if rate == 0.0 {
        return Ok(Expr::Const(false));
    }
    if rate == 1.0 {
        return Ok(Expr::Const(true));
    }
    let e = AggExpr::parse(&Bson::Document(bson::doc! {"$lt": [{"$rand": {}}, rate]}))?;
    Ok(Expr::Agg(Box::new(e), None))
}

/// Parses a filter document; `in_elem_match` is set below an object-form
/// `$elemMatch`, where `$expr` is not allowed (it sees only the top document).
fn parse_top(doc: &Document, depth: usize, in_elem_match: bool) -> MongoResult<Expr> {
    parse_entries(doc.iter(), depth, in_elem_match)
}

fn parse_entries<'a>(
    entries: impl Iterator<Item = (&'a String, &'a Bson)>,
    depth: usize,
    in_elem_match: bool,
) -> MongoResult<Expr> {
    depth_check(depth)?;
    let mut children = Vec::new();
    for (k, v) in entries {
        if k.starts_with('$') {
            match k.as_str() {
                "$and" | "$or" | "$nor" => {
                    let list = parse_logical_list(k, v, depth, in_elem_match)?;
                    children.push(match k.as_str() {
                        "$and" => Expr::And(list),
                        "$or" => Expr::Or(list),
                        _ => Expr::Nor(list),
                    });
                }
                // A DBRef's parts are field names wherever a filter names
                // fields (mongod's `parseDBRef`: an equality on the field;
                // `$id` compares under the collation, `$ref` and `$db` bytewise).
                "$ref" | "$id" | "$db" => {
                    children.push(Expr::Path(k.clone(), PathOp::Eq(v.clone())))
                }
                "$comment" => {}
                "$alwaysTrue" => children.push(Expr::Const(true)),
                "$alwaysFalse" => children.push(Expr::Const(false)),
                "$expr" => {
                    if in_elem_match {
                        return Err(MongoError::bad_value(
                            "$expr can only be applied to the top-level document",
                        ));
                    }
                    children.push(Expr::Agg(Box::new(AggExpr::parse(v)?), None));
                }
                "$jsonSchema" => children.push(Expr::Schema(Box::new(json_schema::parse(v)?))),
                "$sampleRate" => children.push(parse_sample_rate(v)?),
                "$where" => {
                    if in_elem_match {
                        return Err(MongoError::bad_value(
                            "$where can only be applied to the top-level document",
                        ));
                    }
                    children.push(Expr::Where(parse_where(v)?));
                }
                "$text" => {
                    if in_elem_match {
                        return Err(MongoError::bad_value(
                            "$text can only be applied to the top-level document",
                        ));
                    }
                    children.push(Expr::Text(Box::new(text::TextNode::parse(v)?)));
                }
                name if is_not_implemented(name) => return Err(not_implemented(name)),
                name => {
                    return Err(MongoError::bad_value(format!(
                        "unknown top level operator: {name}. If you have a field name that starts \
                         with a '$' symbol, consider using $getField or $setField."
                    )))
                }
            }
        } else {
            children.push(Expr::Path(k.clone(), parse_field_value(k, v, depth)?));
        }
    }
    Ok(Expr::And(children))
}

/// `$where`'s operand: a string or Code (compiled once, here); Code with
/// scope has been refused since mongod 4.4.
fn parse_where(v: &Bson) -> MongoResult<crate::js::Predicate> {
    let code = match v {
        Bson::String(s) | Bson::JavaScriptCode(s) => s,
        Bson::JavaScriptCodeWithScope(_) => {
            return Err(MongoError::new(
                ErrorCode::Other(4649201),
                "$where no longer supports deprecated BSON type CodeWScope",
            ))
        }
        _ => return Err(MongoError::bad_value("$where got bad type")),
    };
    if code.is_empty() {
        return Err(MongoError::bad_value("code for $where cannot be empty"));
    }
    crate::js::Predicate::compile(code)
}

fn parse_logical_list(
    op: &str,
    v: &Bson,
    depth: usize,
    in_elem_match: bool,
) -> MongoResult<Vec<Expr>> {
    let Bson::Array(items) = v else {
        return Err(MongoError::bad_value(format!("{op} must be an array")));
    };
    if items.is_empty() {
        return Err(MongoError::bad_value(
            "$and/$or/$nor must be a nonempty array",
        ));
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => parse_top(d, depth + 1, in_elem_match),
            _ => Err(MongoError::bad_value(
                "$or/$and/$nor entries need to be full objects",
            )),
        })
        .collect()
}

/// A document operand is an operator expression when its first key starts with
/// `$` and is not a DBRef field.
fn is_operator_doc(d: &Document) -> bool {
    match d.keys().next() {
        Some(k) => k.starts_with('$') && !matches!(k.as_str(), "$ref" | "$id" | "$db"),
        None => false,
    }
}

/// mongod's `isDBRefDocument`: a document holding both `$ref` and `$id`, or,
/// where an incomplete DBRef is allowed (under `$elemMatch`), any of `$ref`,
/// `$id` and `$db`.
fn is_dbref_doc(d: &Document, allow_incomplete: bool) -> bool {
    let has = |k: &str| d.contains_key(k);
    if allow_incomplete {
        has("$ref") || has("$id") || has("$db")
    } else {
        has("$ref") && has("$id")
    }
}

/// mongod's `isExpressionDocument`: a field's operand is a list of operators
/// when its first key starts with `$`, unless it is a DBRef, which is
/// compared as a value (`{a: {$ref: "c", $id: 1}}`).
fn is_expression_doc(d: &Document, allow_incomplete_dbref: bool) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$')) && !is_dbref_doc(d, allow_incomplete_dbref)
}

fn parse_field_value(path: &str, v: &Bson, depth: usize) -> MongoResult<PathOp> {
    match v {
        Bson::Document(d) if is_expression_doc(d, false) => parse_ops(path, d, depth),
        Bson::RegularExpression(r) => Ok(PathOp::Regex(compile_regex(
            r.pattern.as_str(),
            r.options.as_str(),
        )?)),
        Bson::Undefined => Err(MongoError::bad_value("cannot compare to undefined")),
        other => Ok(PathOp::Eq(other.clone())),
    }
}

fn parse_ops(path: &str, d: &Document, depth: usize) -> MongoResult<PathOp> {
    depth_check(depth)?;
    let mut ops = Vec::new();
    let mut regex: Option<(String, String)> = None;
    let mut options: Option<String> = None;
    for (k, v) in d {
        let op = match k.as_str() {
            "$eq" => {
                if matches!(v, Bson::Undefined) {
                    return Err(MongoError::bad_value("cannot compare to undefined"));
                }
                PathOp::Eq(v.clone())
            }
            "$ne" => {
                if matches!(v, Bson::RegularExpression(_)) {
                    return Err(MongoError::bad_value("Can't have regex as arg to $ne."));
                }
                if matches!(v, Bson::Undefined) {
                    return Err(MongoError::bad_value("cannot compare to undefined"));
                }
                PathOp::Not(vec![PathOp::Eq(v.clone())])
            }
            "$gt" | "$gte" | "$lt" | "$lte" => {
                if matches!(v, Bson::RegularExpression(_)) {
                    return Err(MongoError::bad_value(format!(
                        "Can't have RegEx as arg to predicate over field '{path}'."
                    )));
                }
                if matches!(v, Bson::Undefined) {
                    return Err(MongoError::bad_value("cannot compare to undefined"));
                }
                let op = match k.as_str() {
                    "$gt" => CmpOp::Gt,
                    "$gte" => CmpOp::Gte,
                    "$lt" => CmpOp::Lt,
                    _ => CmpOp::Lte,
                };
                PathOp::Cmp(op, v.clone())
            }
            "$in" => PathOp::In(parse_in_list(v, "$in")?),
            "$nin" => PathOp::Not(vec![PathOp::In(parse_in_list(v, "$nin")?)]),
            "$exists" => PathOp::Exists(truthy(v)),
            "$type" => PathOp::Type(parse_type_list(v)?),
            "$size" => PathOp::Size(parse_size(v)?),
            "$mod" => parse_mod(v)?,
            "$bitsAllSet" => PathOp::Bits(BitsTest::AllSet, parse_bitmask(k, v)?),
            "$bitsAnySet" => PathOp::Bits(BitsTest::AnySet, parse_bitmask(k, v)?),
            "$bitsAllClear" => PathOp::Bits(BitsTest::AllClear, parse_bitmask(k, v)?),
            "$bitsAnyClear" => PathOp::Bits(BitsTest::AnyClear, parse_bitmask(k, v)?),
            "$all" => parse_all(path, v, depth)?,
            "$elemMatch" => parse_elem_match(v, depth)?,
            "$not" => parse_not(path, v, depth)?,
            "$regex" => {
                regex = Some(match v {
                    Bson::String(s) => (s.clone(), String::new()),
                    Bson::RegularExpression(r) => (
                        r.pattern.as_str().to_string(),
                        r.options.as_str().to_string(),
                    ),
                    _ => return Err(MongoError::bad_value("$regex has to be a string")),
                });
                continue;
            }
            "$options" => {
                let Bson::String(s) = v else {
                    return Err(MongoError::bad_value("$options has to be a string"));
                };
                options = Some(s.clone());
                continue;
            }
            "$geoWithin" | "$within" => {
                PathOp::GeoWithin(Arc::new(crate::geo::Region::parse(k, v)?))
            }
            "$geoIntersects" => PathOp::GeoIntersects(Arc::new(crate::geo::Intersects::parse(v)?)),
            "$near" | "$nearSphere" => PathOp::Near(Arc::new(crate::geo::Near::parse_query(k, d)?)),
            // Read with their `$near`.
            "$maxDistance" | "$minDistance"
                if d.contains_key("$near") || d.contains_key("$nearSphere") =>
            {
                continue
            }
            name if is_not_implemented(name) => return Err(not_implemented(name)),
            name => return Err(MongoError::bad_value(format!("unknown operator: {name}"))),
        };
        ops.push(op);
    }
    match (regex, options) {
        (Some((pattern, flags)), opts) => {
            let flags = match opts {
                Some(_) if !flags.is_empty() => {
                    return Err(MongoError::bad_value(
                        "options set in both $regex and $options",
                    ));
                }
                Some(o) => o,
                None => flags,
            };
            ops.push(PathOp::Regex(compile_regex(&pattern, &flags)?));
        }
        (None, Some(_)) => return Err(MongoError::bad_value("$options needs a $regex")),
        (None, None) => {}
    }
    Ok(if ops.len() == 1 {
        ops.pop().unwrap_or(PathOp::And(Vec::new()))
    } else {
        PathOp::And(ops)
    })
}

/// The value side of a bit test: an integral number (sign-extended beyond
/// bit 63) or BinData bytes (zero beyond their length).
enum BitSource<'a> {
    Int(i64),
    Bytes(&'a [u8]),
}

impl BitSource<'_> {
    fn bit(&self, pos: u64) -> bool {
        match self {
            BitSource::Int(n) => {
                if pos < 64 {
                    (n >> pos) & 1 == 1
                } else {
                    *n < 0
                }
            }
            BitSource::Bytes(b) => usize::try_from(pos / 8)
                .ok()
                .and_then(|i| b.get(i))
                .is_some_and(|byte| (byte >> (pos % 8)) & 1 == 1),
        }
    }
}

fn bits_match(test: BitsTest, mask: &BitMask, v: RawBsonRef<'_>) -> bool {
    let src = match v {
        RawBsonRef::Int32(i) => BitSource::Int(i64::from(i)),
        RawBsonRef::Int64(i) => BitSource::Int(i),
        RawBsonRef::Double(d) => {
            // Only values exactly representable as a signed 64-bit integer take part.
            let lim = -(i64::MIN as f64);
            if d.fract() != 0.0 || !(-lim..lim).contains(&d) {
                return false;
            }
            BitSource::Int(d as i64)
        }
        RawBsonRef::Decimal128(d) => match d.to_string().parse::<f64>() {
            Ok(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => BitSource::Int(f as i64),
            _ => return false,
        },
        RawBsonRef::Binary(b) => BitSource::Bytes(b.bytes),
        _ => return false,
    };
    let mut positions: Box<dyn Iterator<Item = u64> + '_> = match mask {
        BitMask::Positions(p) => Box::new(p.iter().copied()),
        BitMask::Bytes(bytes) => Box::new(bytes.iter().enumerate().flat_map(|(i, byte)| {
            (0..8u64)
                .filter(move |j| (byte >> j) & 1 == 1)
                .map(move |j| (i as u64) * 8 + j)
        })),
    };
    match test {
        BitsTest::AllSet => positions.all(|p| src.bit(p)),
        BitsTest::AnySet => positions.any(|p| src.bit(p)),
        BitsTest::AllClear => positions.all(|p| !src.bit(p)),
        BitsTest::AnyClear => positions.any(|p| !src.bit(p)),
    }
}

fn parse_bitmask(op: &str, v: &Bson) -> MongoResult<BitMask> {
    let whole = |b: &Bson| -> Option<i64> {
        match b {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.2e18 => Some(*d as i64),
            Bson::Decimal128(d) => d
                .to_string()
                .parse::<f64>()
                .ok()
                .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
                .map(|f| f as i64),
            _ => None,
        }
    };
    match v {
        Bson::Binary(b) => Ok(BitMask::Bytes(b.bytes.clone())),
        Bson::Array(items) => {
            let mut positions = Vec::with_capacity(items.len());
            for item in items {
                let Some(p) = whole(item) else {
                    return Err(MongoError::bad_value(format!(
                        "bit positions must be an integer but got: {item}"
                    )));
                };
                let p = u64::try_from(p).map_err(|_| {
                    MongoError::bad_value(format!("bit positions must be >= 0 but got: {p}"))
                })?;
                positions.push(p);
            }
            Ok(BitMask::Positions(positions))
        }
        other if NumKey::of_bson(other).is_some() => {
            let n = whole(other).ok_or_else(|| {
                MongoError::bad_value(format!("{op} cannot represent {other} as a 64-bit integer"))
            })?;
            if n < 0 {
                return Err(MongoError::bad_value(format!(
                    "{op} bitmask must be a non-negative integer, but got: {other}"
                )));
            }
            Ok(BitMask::Positions(
                (0..63u64).filter(|p| (n >> p) & 1 == 1).collect(),
            ))
        }
        other => Err(MongoError::bad_value(format!(
            "{op} takes an Array, a number, or a BinData but received: {op}: {other}"
        ))),
    }
}

fn truthy(v: &Bson) -> bool {
    match v {
        Bson::Boolean(b) => *b,
        Bson::Null | Bson::Undefined => false,
        other => match NumKey::of_bson(other) {
            Some(n) => n != NumKey::from_i64(0),
            None => true,
        },
    }
}

/// Counts a long `$in`/`$nin` list against the operation's memory for as
/// long as it runs (146 ExceededMemoryLimit past its limit): the parsed
/// command's array and the sorted copy the matcher keeps, each value a
/// `Bson` plus what it points to. Short lists are not counted, so the
/// common query never looks at the tracker.
fn charge_in_list(items: &[Bson]) -> MongoResult<()> {
    const COUNTED_FROM: usize = 1024;
    if items.len() < COUNTED_FROM {
        return Ok(());
    }
    let heap = |v: &Bson| match v {
        Bson::String(s) => s.len(),
        Bson::Binary(b) => b.bytes.len(),
        Bson::Document(d) => crate::value::approx_doc_size(d),
        Bson::Array(a) => a.iter().map(crate::value::approx_size).sum(),
        _ => 0,
    };
    let one = std::mem::size_of::<Bson>();
    let bytes: usize = items.iter().map(|v| 2 * (one + heap(v))).sum();
    bisondb_error::memory::charge(bytes)
}

fn parse_in_list(v: &Bson, op: &str) -> MongoResult<InList> {
    let Bson::Array(items) = v else {
        return Err(MongoError::bad_value(format!("{op} needs an array")));
    };
    charge_in_list(items)?;
    let mut list = InList {
        values: Vec::new(),
        regexes: Vec::new(),
        has_null: false,
    };
    for item in items {
        match item {
            Bson::RegularExpression(r) => list
                .regexes
                .push(compile_regex(r.pattern.as_str(), r.options.as_str())?),
            Bson::Document(d) if is_operator_doc(d) => {
                return Err(MongoError::bad_value(format!("cannot nest $ under {op}")))
            }
            Bson::Undefined => {
                return Err(MongoError::bad_value(
                    "InMatchExpression equality cannot be undefined",
                ))
            }
            other => {
                if matches!(other, Bson::Null) {
                    list.has_null = true;
                }
                list.values.push(other.clone());
            }
        }
    }
    list.values.sort_by(compare_bson);
    list.values
        .dedup_by(|a, b| compare_bson(a, b) == Ordering::Equal);
    Ok(list)
}

const TYPE_ALIASES: &[(&str, ElementType)] = &[
    ("array", ElementType::Array),
    ("binData", ElementType::Binary),
    ("bool", ElementType::Boolean),
    ("date", ElementType::DateTime),
    ("dbPointer", ElementType::DbPointer),
    ("decimal", ElementType::Decimal128),
    ("double", ElementType::Double),
    ("int", ElementType::Int32),
    ("javascript", ElementType::JavaScriptCode),
    ("javascriptWithScope", ElementType::JavaScriptCodeWithScope),
    ("long", ElementType::Int64),
    ("maxKey", ElementType::MaxKey),
    ("minKey", ElementType::MinKey),
    ("null", ElementType::Null),
    ("object", ElementType::EmbeddedDocument),
    ("objectId", ElementType::ObjectId),
    ("regex", ElementType::RegularExpression),
    ("string", ElementType::String),
    ("symbol", ElementType::Symbol),
    ("timestamp", ElementType::Timestamp),
    ("undefined", ElementType::Undefined),
];

fn parse_type_sel(v: &Bson) -> MongoResult<TypeSel> {
    match v {
        Bson::String(s) => {
            if s == "number" {
                return Ok(TypeSel::Number);
            }
            TYPE_ALIASES
                .iter()
                .find(|(name, _)| name == s)
                .map(|(_, t)| TypeSel::Exact(*t))
                .ok_or_else(|| MongoError::bad_value(format!("Unknown type name alias: {s}")))
        }
        other => {
            let code = match other {
                Bson::Int32(i) => Some(i64::from(*i)),
                Bson::Int64(i) => Some(*i),
                Bson::Double(d) if d.fract() == 0.0 && d.abs() < 1e9 => Some(*d as i64),
                Bson::Double(_) | Bson::Decimal128(_) => None,
                _ => {
                    return Err(MongoError::type_mismatch(
                        "type must be represented as a number or a string",
                    ))
                }
            };
            // MinKey's tag byte is 0xFF but its type code is -1; 255 itself is not a code.
            code.and_then(|c| match c {
                -1 => Some(0xFF),
                255 => None,
                c => u8::try_from(c).ok(),
            })
            .and_then(ElementType::from)
            .map(TypeSel::Exact)
            .ok_or_else(|| MongoError::bad_value(format!("Invalid numerical type code: {other}")))
        }
    }
}

fn parse_type_list(v: &Bson) -> MongoResult<Vec<TypeSel>> {
    match v {
        Bson::Array(items) => items.iter().map(parse_type_sel).collect(),
        other => Ok(vec![parse_type_sel(other)?]),
    }
}

fn parse_size(v: &Bson) -> MongoResult<i64> {
    let f = match v {
        Bson::Int32(i) => return non_negative(i64::from(*i)),
        Bson::Int64(i) => return non_negative(*i),
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => d.to_string().parse::<f64>().unwrap_or(f64::NAN),
        _ => return Err(MongoError::bad_value("$size needs a number")),
    };
    if f.is_nan() || f.fract() != 0.0 {
        return Err(MongoError::bad_value("$size must be a whole number"));
    }
    if f < 0.0 {
        return Err(MongoError::bad_value("$size may not be negative"));
    }
    // Beyond i64 no array can have that size anyway.
    Ok(if f >= 9.2e18 { i64::MAX } else { f as i64 })
}

fn non_negative(n: i64) -> MongoResult<i64> {
    if n < 0 {
        Err(MongoError::bad_value("$size may not be negative"))
    } else {
        Ok(n)
    }
}

fn parse_mod(v: &Bson) -> MongoResult<PathOp> {
    let Bson::Array(items) = v else {
        return Err(MongoError::bad_value("malformed mod, needs to be an array"));
    };
    let (div, rem) = match items.as_slice() {
        [] | [_] => return Err(MongoError::bad_value("malformed mod, not enough elements")),
        [d, r] => (d, r),
        _ => return Err(MongoError::bad_value("malformed mod, too many elements")),
    };
    let to_i64 = |b: &Bson, what: &str| -> MongoResult<i64> {
        let f = match b {
            Bson::Int32(i) => return Ok(i64::from(*i)),
            Bson::Int64(i) => return Ok(*i),
            Bson::Double(d) => *d,
            Bson::Decimal128(d) => d.to_string().parse::<f64>().unwrap_or(f64::NAN),
            _ => {
                return Err(MongoError::bad_value(format!(
                    "malformed mod, {what} not a number"
                )))
            }
        };
        if !f.is_finite() {
            return Err(MongoError::bad_value(format!(
                "malformed mod, {what} value is invalid :: caused by :: {f} is not a finite number"
            )));
        }
        let t = f.trunc();
        // 2^63 is exactly representable; i64 covers [-2^63, 2^63).
        let lim = -(i64::MIN as f64);
        if !(-lim..lim).contains(&t) {
            return Err(MongoError::bad_value(format!(
                "malformed mod, {what} value is invalid :: caused by :: Out of bounds coercing to integral value"
            )));
        }
        Ok(t as i64)
    };
    let d = to_i64(div, "divisor")?;
    let r = to_i64(rem, "remainder")?;
    if d == 0 {
        return Err(MongoError::bad_value("divisor cannot be 0"));
    }
    Ok(PathOp::Mod(d, r))
}

fn parse_all(path: &str, v: &Bson, depth: usize) -> MongoResult<PathOp> {
    let Bson::Array(items) = v else {
        return Err(MongoError::bad_value("$all needs an array"));
    };
    let is_elem = |b: &Bson| matches!(b, Bson::Document(d) if d.keys().next().map(String::as_str) == Some("$elemMatch"));
    let first_is_elem = items.first().is_some_and(is_elem);
    let mut ops = Vec::new();
    for item in items {
        if is_elem(item) != first_is_elem {
            return Err(MongoError::bad_value(
                "$all/$elemMatch has to be consistent",
            ));
        }
        match item {
            Bson::Document(d) if first_is_elem => ops.push(parse_ops(path, d, depth + 1)?),
            Bson::Document(d) if is_operator_doc(d) => {
                return Err(MongoError::bad_value("no $ expressions in $all"))
            }
            Bson::RegularExpression(r) => ops.push(PathOp::Regex(compile_regex(
                r.pattern.as_str(),
                r.options.as_str(),
            )?)),
            other => ops.push(PathOp::Eq(other.clone())),
        }
    }
    Ok(PathOp::All(ops))
}

/// Top-level operators that make an `$elemMatch` argument the object form.
fn is_top_level_operator(k: &str) -> bool {
    matches!(
        k,
        "$and"
            | "$or"
            | "$nor"
            | "$where"
            | "$expr"
            | "$text"
            | "$comment"
            | "$jsonSchema"
            | "$alwaysTrue"
            | "$alwaysFalse"
            | "$sampleRate"
    )
}

fn parse_elem_match(v: &Bson, depth: usize) -> MongoResult<PathOp> {
    let Bson::Document(d) = v else {
        return Err(MongoError::bad_value("$elemMatch needs an Object"));
    };
    // Like mongod, a document naming `$ref`, `$id` or `$db` is the object
    // form, where those are field names (a DBRef's parts), not operators.
    let value_form =
        is_expression_doc(d, true) && d.keys().next().is_some_and(|k| !is_top_level_operator(k));
    if value_form {
        Ok(PathOp::ElemMatchValue(match parse_ops("", d, depth + 1)? {
            PathOp::And(ops) => ops,
            op => vec![op],
        }))
    } else {
        Ok(PathOp::ElemMatchObject(Box::new(parse_top(
            d,
            depth + 1,
            true,
        )?)))
    }
}

fn parse_not(path: &str, v: &Bson, depth: usize) -> MongoResult<PathOp> {
    match v {
        Bson::RegularExpression(r) => Ok(PathOp::Not(vec![PathOp::Regex(compile_regex(
            r.pattern.as_str(),
            r.options.as_str(),
        )?)])),
        Bson::Document(d) => {
            if d.is_empty() {
                return Err(MongoError::bad_value("$not cannot be empty"));
            }
            if !is_operator_doc(d) {
                let first = d.keys().next().map(String::as_str).unwrap_or_default();
                return Err(MongoError::bad_value(format!("unknown operator: {first}")));
            }
            Ok(PathOp::Not(match parse_ops(path, d, depth + 1)? {
                PathOp::And(ops) => ops,
                op => vec![op],
            }))
        }
        _ => Err(MongoError::bad_value("$not needs a regex or a document")),
    }
}

/// Rewrites the PCRE escapes the `regex` crate lacks but clients commonly
/// send: `\Q...\E` (quote a literal run) and `\Z` (end, or before a final
/// newline). Everything else is passed through unchanged.
fn translate_pcre(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('Q') => {
                let rest = chars.as_str();
                let (quoted, after) = match rest.find("\\E") {
                    Some(i) => (
                        rest.get(..i).unwrap_or(rest),
                        rest.get(i + 2..).unwrap_or(""),
                    ),
                    None => (rest, ""),
                };
                out.push_str(&regex::escape(quoted));
                chars = after.chars();
            }
            Some('Z') => out.push_str("(?:\\n?\\z)"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Compiles a MongoDB (PCRE-style) regex with its option letters.
fn compile_regex(pattern: &str, options: &str) -> MongoResult<Re> {
    let translated = translate_pcre(pattern);
    let mut builder = regex::RegexBuilder::new(&translated);
    for c in options.chars() {
        match c {
            'i' => {
                builder.case_insensitive(true);
            }
            'm' => {
                builder.multi_line(true);
            }
            's' => {
                builder.dot_matches_new_line(true);
            }
            'x' => {
                builder.ignore_whitespace(true);
            }
            // Locale and unicode flags change nothing for this engine.
            'l' | 'u' => {}
            other => {
                return Err(MongoError::location(
                    51108,
                    format!("invalid flag in regex options: {other}"),
                ))
            }
        }
    }
    let re = match builder.build() {
        Ok(re) => Engine::Linear(re),
        Err(e) => {
            // Options were validated above; as inline flags they reach the fallback too.
            let flags: String = options.chars().filter(|c| "imsx".contains(*c)).collect();
            let inline = if flags.is_empty() {
                translated
            } else {
                format!("(?{flags}){translated}")
            };
            match fancy_regex::Regex::new(&inline) {
                Ok(re) => Engine::Backtracking(Box::new(re)),
                Err(_) => {
                    return Err(MongoError::location(
                        51091,
                        format!("Regular expression is invalid: {e}"),
                    ))
                }
            }
        }
    };
    Ok(Re {
        pattern: pattern.to_string(),
        options: options.to_string(),
        re,
    })
}

#[cfg(test)]
mod tests;
