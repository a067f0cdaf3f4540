//! `$jsonSchema`: the draft-4 JSON Schema subset mongod accepts as a
//! top-level query operator, parsed once into a [`JsonSchema`] and evaluated
//! against raw documents.
//!
//! Semantics follow mongod's translation of a schema into match expressions:
//!
//! * a keyword constrains only values of the type it is about (`minimum`,
//!   `maximum` and `multipleOf` numbers; `minLength`, `maxLength` and
//!   `pattern` strings; `minItems`, `maxItems`, `uniqueItems`, `items` and
//!   `additionalItems` arrays; `properties`, `required`, `minProperties`,
//!   `maxProperties`, `patternProperties`, `additionalProperties` and
//!   `dependencies` objects) and lets values of other types through;
//! * a property that is absent satisfies its schema unless it is `required`;
//! * values are never looked into as arrays the way query predicates are:
//!   a schema describes the value itself;
//! * `enum` and `uniqueItems` compare objects without regard to field order,
//!   and numbers by value (`1`, `1.0` and `NumberLong(1)` are equal);
//! * `multipleOf` divides in decimal, with doubles rounded to 15 significant
//!   digits first (so `0.3` is a multiple of `0.1`);
//! * the top-level schema describes the document itself, so a top-level
//!   `type` that excludes `"object"` matches nothing, and top-level keywords
//!   about other types have no effect (mongod does not even compile a
//!   top-level `pattern`).
//!
//! Parse errors carry mongod's codes and messages: 9 FailedToParse for
//! unknown or unsupported keywords and invalid values, 14 TypeMismatch for
//! arguments of the wrong BSON type, 2 BadValue for unknown type aliases and
//! empty `allOf`/`anyOf`/`oneOf`, 51091 for an invalid `pattern`.

use std::cmp::Ordering;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::{RawArray, RawBsonRef, RawDocument};
use bson::spec::ElementType;
use bson::{Bson, Decimal128, Document, RawBson};

use super::{compile_regex, CmpOp, PathOp, Re, TYPE_ALIASES};
use crate::compare::{compare_raw, is_numeric_type, type_rank};

/// Schemas nested deeper than this are rejected. A schema that arrives over
/// the wire cannot get near it (BSON nesting is limited to 200 levels and each
/// schema level takes at least one); it bounds recursion for direct callers.
const MAX_SCHEMA_DEPTH: usize = 200;

/// Every keyword mongod's parser knows, sorted for binary search.
const KEYWORDS: &[&str] = &[
    "additionalItems",
    "additionalProperties",
    "allOf",
    "anyOf",
    "bsonType",
    "dependencies",
    "description",
    "encrypt",
    "encryptMetadata",
    "enum",
    "exclusiveMaximum",
    "exclusiveMinimum",
    "items",
    "maxItems",
    "maxLength",
    "maxProperties",
    "maximum",
    "minItems",
    "minLength",
    "minProperties",
    "minimum",
    "multipleOf",
    "not",
    "oneOf",
    "pattern",
    "patternProperties",
    "properties",
    "required",
    "title",
    "type",
    "uniqueItems",
];

/// Draft-4 keywords mongod rejects by name.
const UNSUPPORTED_KEYWORDS: &[&str] =
    &["$ref", "$schema", "default", "definitions", "format", "id"];

/// The aliases the JSON `type` keyword accepts (besides `"number"`).
const JSON_TYPE_ALIASES: &[(&str, ElementType)] = &[
    ("array", ElementType::Array),
    ("boolean", ElementType::Boolean),
    ("null", ElementType::Null),
    ("object", ElementType::EmbeddedDocument),
    ("string", ElementType::String),
];

/// A parsed `$jsonSchema` (or one of its subschemas): the conjunction of its rules.
#[derive(Debug, Clone)]
pub(super) struct JsonSchema {
    rules: Vec<Rule>,
}

#[derive(Debug, Clone)]
struct TypeSet {
    numbers: bool,
    types: Vec<ElementType>,
}

impl TypeSet {
    fn contains(&self, t: ElementType) -> bool {
        (self.numbers && is_numeric_type(t)) || self.types.contains(&t)
    }
}

/// The schema for array elements past the `items` tuple, or for properties
/// no other keyword covers.
#[derive(Debug, Clone)]
enum Otherwise {
    Always(bool),
    Schema(Box<JsonSchema>),
}

impl Otherwise {
    fn matches(&self, v: RawBsonRef<'_>) -> bool {
        match self {
            Otherwise::Always(b) => *b,
            Otherwise::Schema(s) => s.matches(v),
        }
    }
}

/// `multipleOf`'s divisor, as mongod's decimal conversion sees it.
#[derive(Debug, Clone, Copy)]
enum Divisor {
    /// Positive coefficient and exponent.
    Finite(u128, i32),
    Infinite,
    NaN,
}

#[derive(Debug, Clone)]
enum Dependency {
    Properties(Vec<String>),
    Schema(Box<JsonSchema>),
}

#[derive(Debug, Clone)]
enum Rule {
    /// Matches nothing: a top-level schema whose type excludes objects.
    Never,
    Type(TypeSet),
    /// `minimum` / `maximum`, as a comparison applied to numbers only.
    Bound(PathOp),
    MultipleOf(Divisor),
    MinLength(u64),
    MaxLength(u64),
    Pattern(Re),
    MinItems(u64),
    MaxItems(u64),
    UniqueItems,
    /// Element `i` of an array matches schema `i`; shorter arrays are fine.
    ItemsTuple(Vec<JsonSchema>),
    /// Every element from this index on matches.
    ItemsFrom(usize, Otherwise),
    Properties(Vec<(String, JsonSchema)>),
    /// `patternProperties` and `additionalProperties`: each field matching a
    /// pattern matches that pattern's schema; each field neither matching a
    /// pattern nor named in `properties` matches `otherwise`. A pattern that
    /// does not compile matches no field name (as in mongod).
    Allowed {
        named: Vec<String>,
        patterns: Vec<(Option<Re>, JsonSchema)>,
        otherwise: Otherwise,
    },
    Required(Vec<String>),
    MinProperties(u64),
    MaxProperties(u64),
    Dependency(String, Dependency),
    AllOf(Vec<JsonSchema>),
    AnyOf(Vec<JsonSchema>),
    OneOf(Vec<JsonSchema>),
    Not(Box<JsonSchema>),
    Enum(Vec<RawBson>),
}

// ---------------------------------------------------------------------------
// Matching
// ---------------------------------------------------------------------------

impl JsonSchema {
    /// Whether the document satisfies the schema.
    pub(super) fn matches_doc(&self, doc: &RawDocument) -> bool {
        self.matches(RawBsonRef::Document(doc))
    }

    fn matches(&self, v: RawBsonRef<'_>) -> bool {
        self.rules.iter().all(|r| r.matches(v))
    }
}

fn len_u64(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

impl Rule {
    fn matches(&self, v: RawBsonRef<'_>) -> bool {
        match self {
            Rule::Never => false,
            Rule::Type(t) => t.contains(v.element_type()),
            Rule::Bound(op) => !is_numeric_type(v.element_type()) || op.test_one(v),
            Rule::MultipleOf(d) => !is_numeric_type(v.element_type()) || is_multiple(v, *d),
            Rule::MinLength(n) => match v {
                RawBsonRef::String(s) => len_u64(s.chars().count()) >= *n,
                _ => true,
            },
            Rule::MaxLength(n) => match v {
                RawBsonRef::String(s) => len_u64(s.chars().count()) <= *n,
                _ => true,
            },
            Rule::Pattern(re) => match v {
                RawBsonRef::String(s) => re.re.is_match(s),
                _ => true,
            },
            Rule::MinItems(n) => match v {
                RawBsonRef::Array(a) => len_u64(a.into_iter().count()) >= *n,
                _ => true,
            },
            Rule::MaxItems(n) => match v {
                RawBsonRef::Array(a) => len_u64(a.into_iter().count()) <= *n,
                _ => true,
            },
            Rule::UniqueItems => match v {
                RawBsonRef::Array(a) => all_unique(a),
                _ => true,
            },
            Rule::ItemsTuple(schemas) => match v {
                RawBsonRef::Array(a) => a
                    .into_iter()
                    .flatten()
                    .zip(schemas)
                    .all(|(e, s)| s.matches(e)),
                _ => true,
            },
            Rule::ItemsFrom(from, otherwise) => match v {
                RawBsonRef::Array(a) => a
                    .into_iter()
                    .flatten()
                    .skip(*from)
                    .all(|e| otherwise.matches(e)),
                _ => true,
            },
            Rule::Properties(props) => match v {
                RawBsonRef::Document(d) => props.iter().all(|(name, s)| match d.get(name) {
                    Ok(Some(val)) => s.matches(val),
                    _ => true,
                }),
                _ => true,
            },
            Rule::Allowed {
                named,
                patterns,
                otherwise,
            } => match v {
                RawBsonRef::Document(d) => d.iter().flatten().all(|(k, val)| {
                    let name = k.as_str();
                    let mut covered = false;
                    for (re, s) in patterns {
                        if re.as_ref().is_some_and(|re| re.re.is_match(name)) {
                            covered = true;
                            if !s.matches(val) {
                                return false;
                            }
                        }
                    }
                    covered || named.iter().any(|n| n == name) || otherwise.matches(val)
                }),
                _ => true,
            },
            Rule::Required(names) => match v {
                RawBsonRef::Document(d) => names.iter().all(|n| has_field(d, n)),
                _ => true,
            },
            Rule::MinProperties(n) => match v {
                RawBsonRef::Document(d) => len_u64(d.iter().count()) >= *n,
                _ => true,
            },
            Rule::MaxProperties(n) => match v {
                RawBsonRef::Document(d) => len_u64(d.iter().count()) <= *n,
                _ => true,
            },
            Rule::Dependency(name, dep) => match v {
                RawBsonRef::Document(d) if has_field(d, name) => match dep {
                    Dependency::Properties(names) => names.iter().all(|n| has_field(d, n)),
                    Dependency::Schema(s) => s.matches(v),
                },
                _ => true,
            },
            Rule::AllOf(list) => list.iter().all(|s| s.matches(v)),
            Rule::AnyOf(list) => list.iter().any(|s| s.matches(v)),
            Rule::OneOf(list) => list.iter().filter(|s| s.matches(v)).take(2).count() == 1,
            Rule::Not(s) => !s.matches(v),
            Rule::Enum(values) => values
                .iter()
                .any(|x| unordered_cmp(x.as_raw_bson_ref(), v) == Ordering::Equal),
        }
    }
}

fn has_field(d: &RawDocument, name: &str) -> bool {
    matches!(d.get(name), Ok(Some(_)))
}

/// Whether no two elements of the array are equal (objects compared
/// without regard to field order).
fn all_unique(a: &RawArray) -> bool {
    let mut elems: Vec<RawBsonRef<'_>> = a.into_iter().flatten().collect();
    elems.sort_by(|x, y| unordered_cmp(*x, *y));
    elems
        .iter()
        .zip(elems.iter().skip(1))
        .all(|(x, y)| unordered_cmp(*x, *y) != Ordering::Equal)
}

/// mongod's comparison with "unordered fields" rules: documents compare as
/// their fields sorted by name, recursively; everything else as usual. A
/// total order, so it can sort.
fn unordered_cmp(a: RawBsonRef<'_>, b: RawBsonRef<'_>) -> Ordering {
    match (a, b) {
        (RawBsonRef::Document(x), RawBsonRef::Document(y)) => {
            let (fx, fy) = (sorted_fields(x), sorted_fields(y));
            for ((kx, vx), (ky, vy)) in fx.iter().zip(fy.iter()) {
                let o = type_rank(vx.element_type())
                    .cmp(&type_rank(vy.element_type()))
                    .then_with(|| kx.as_bytes().cmp(ky.as_bytes()))
                    .then_with(|| unordered_cmp(*vx, *vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
            fx.len().cmp(&fy.len())
        }
        (RawBsonRef::Array(x), RawBsonRef::Array(y)) => {
            let mut ix = x.into_iter().flatten();
            let mut iy = y.into_iter().flatten();
            loop {
                match (ix.next(), iy.next()) {
                    (None, None) => return Ordering::Equal,
                    (None, Some(_)) => return Ordering::Less,
                    (Some(_), None) => return Ordering::Greater,
                    (Some(p), Some(q)) => {
                        let o = unordered_cmp(p, q);
                        if o != Ordering::Equal {
                            return o;
                        }
                    }
                }
            }
        }
        _ => compare_raw(a, b),
    }
}

fn sorted_fields(d: &RawDocument) -> Vec<(&str, RawBsonRef<'_>)> {
    let mut fields: Vec<(&str, RawBsonRef<'_>)> =
        d.iter().flatten().map(|(k, v)| (k.as_str(), v)).collect();
    fields.sort_by(|x, y| x.0.as_bytes().cmp(y.0.as_bytes()));
    fields
}

/// A number as mongod converts it to a decimal: integers and decimals
/// exactly, doubles rounded to 15 significant digits. `None` for NaN and
/// infinities. The sign is dropped (it does not affect divisibility).
fn decimal_parts(v: RawBsonRef<'_>) -> Option<(u128, i32)> {
    match v {
        RawBsonRef::Int32(i) => Some((u128::from(i.unsigned_abs()), 0)),
        RawBsonRef::Int64(i) => Some((u128::from(i.unsigned_abs()), 0)),
        RawBsonRef::Double(d) => double_parts(d),
        RawBsonRef::Decimal128(d) => match decode_decimal(d) {
            DecimalValue::Finite(_, c, e) => Some((c, e)),
            _ => None,
        },
        _ => None,
    }
}

/// A Decimal128 taken apart (IEEE 754-2008 BID encoding).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum DecimalValue {
    NaN,
    Infinite,
    /// Negative, coefficient (at most 34 digits), exponent.
    Finite(bool, u128, i32),
}

fn decode_decimal(d: Decimal128) -> DecimalValue {
    const MAX_COEFF: u128 = 10u128.pow(34) - 1;
    let v = u128::from_le_bytes(d.bytes());
    let negative = v >> 127 == 1;
    match (v >> 122) & 0x1f {
        0x1f => return DecimalValue::NaN,
        0x1e => return DecimalValue::Infinite,
        _ => {}
    }
    let (exp_bits, coeff) = if (v >> 125) & 0x3 == 0x3 {
        // This form implies a coefficient of at least 2^113: non-canonical, read as zero.
        ((v >> 111) & 0x3fff, 0)
    } else {
        ((v >> 113) & 0x3fff, v & ((1u128 << 113) - 1))
    };
    let coeff = if coeff > MAX_COEFF { 0 } else { coeff };
    // 14 bits, so the cast is lossless; the bias is 6176.
    DecimalValue::Finite(negative, coeff, exp_bits as i32 - 6176)
}

/// A finite double rounded to 15 significant digits, as coefficient and exponent.
fn double_parts(d: f64) -> Option<(u128, i32)> {
    if !d.is_finite() {
        return None;
    }
    if d == 0.0 {
        return Some((0, 0));
    }
    let s = format!("{:.14e}", d.abs());
    let (mant, exp) = s.split_once('e')?;
    let exp: i32 = exp.parse().ok()?;
    let digits: String = mant.chars().filter(char::is_ascii_digit).collect();
    let coeff: u128 = digits.parse().ok()?;
    Some((coeff, exp.checked_sub(14)?))
}

/// Whether the number is an exact multiple of the divisor (a zero remainder
/// of mongod's decimal modulo; NaN and infinite values never are).
fn is_multiple(v: RawBsonRef<'_>, d: Divisor) -> bool {
    let Some((a, ea)) = decimal_parts(v) else {
        return false;
    };
    match d {
        Divisor::NaN => false,
        // x mod inf is x.
        Divisor::Infinite => a == 0,
        Divisor::Finite(b, eb) => {
            if a == 0 {
                return true;
            }
            if b == 0 {
                return false;
            }
            if ea >= eb {
                // (a * 10^k) mod b, one decimal digit at a time: r < b < 2^113,
                // so r * 10 cannot overflow. k is at most ~12,500.
                let mut r = a % b;
                let mut k = ea.abs_diff(eb);
                while k > 0 && r != 0 {
                    r = (r * 10) % b;
                    k -= 1;
                }
                r == 0
            } else {
                match 10u128
                    .checked_pow(ea.abs_diff(eb))
                    .and_then(|p| b.checked_mul(p))
                {
                    Some(m) => a % m == 0,
                    // The divisor is larger than any coefficient.
                    None => false,
                }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Parsing
// ---------------------------------------------------------------------------

fn failed(msg: impl Into<String>) -> MongoError {
    MongoError::failed_to_parse(msg)
}

fn mismatch(msg: impl Into<String>) -> MongoError {
    MongoError::type_mismatch(msg)
}

/// mongod's name for a BSON type, as its error messages print it.
fn type_name(v: &Bson) -> &'static str {
    let t = v.element_type();
    TYPE_ALIASES
        .iter()
        .find(|(_, e)| *e == t)
        .map(|(name, _)| *name)
        .unwrap_or("unknown")
}

/// Parses the argument of a top-level `$jsonSchema`.
pub(super) fn parse(v: &Bson) -> MongoResult<JsonSchema> {
    let Bson::Document(d) = v else {
        return Err(mismatch("$jsonSchema must be an object"));
    };
    parse_schema(d, true, 0)
}

/// The keywords present in one schema object.
struct Keywords<'a> {
    present: Vec<(&'static str, &'a Bson)>,
}

impl<'a> Keywords<'a> {
    fn get(&self, name: &str) -> Option<&'a Bson> {
        self.present
            .iter()
            .find(|(k, _)| *k == name)
            .map(|(_, v)| *v)
    }
}

/// Parses one schema object. `root` is set for the top-level schema and the
/// schemas that describe the same value (`allOf`, `anyOf`, `oneOf`, `not`,
/// schema `dependencies`), which all describe the document itself.
fn parse_schema(d: &Document, root: bool, depth: usize) -> MongoResult<JsonSchema> {
    if depth > MAX_SCHEMA_DEPTH {
        return Err(MongoError::bad_value(format!(
            "$jsonSchema is nested deeper than {MAX_SCHEMA_DEPTH} levels"
        )));
    }
    let mut kw = Keywords {
        present: Vec::new(),
    };
    for (k, v) in d {
        let k = k.as_str();
        match KEYWORDS.binary_search(&k) {
            Ok(i) => {
                if let Some(name) = KEYWORDS.get(i) {
                    kw.present.push((name, v));
                }
            }
            Err(_) if UNSUPPORTED_KEYWORDS.contains(&k) => {
                return Err(failed(format!(
                    "$jsonSchema keyword '{k}' is not currently supported"
                )))
            }
            Err(_) => return Err(failed(format!("Unknown $jsonSchema keyword: {k}"))),
        }
    }

    for name in ["description", "title"] {
        if kw.get(name).is_some_and(|v| !matches!(v, Bson::String(_))) {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{name}' must be of type string"
            )));
        }
    }
    let type_elem = kw.get("type");
    let bson_type_elem = kw.get("bsonType");
    if type_elem.is_some() && bson_type_elem.is_some() {
        return Err(failed(
            "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
        ));
    }
    for name in ["encrypt", "encryptMetadata"] {
        if kw.get(name).is_some() {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!("$jsonSchema keyword '{name}' is not supported by BisonDB yet"),
            ));
        }
    }
    let types = match (type_elem, bson_type_elem) {
        (Some(v), _) => Some(parse_types("type", v, JSON_TYPE_ALIASES)?),
        (None, Some(v)) => Some(parse_types("bsonType", v, TYPE_ALIASES)?),
        (None, None) => None,
    };

    let mut rules = Vec::new();
    parse_scalar_keywords(&kw, root, &mut rules)?;
    parse_array_keywords(&kw, depth, &mut rules)?;
    parse_object_keywords(&kw, root, depth, &mut rules)?;
    parse_logical_keywords(&kw, root, depth, &mut rules)?;

    if let Some(types) = types {
        if root {
            // The top-level schema describes a document.
            if !types.contains(ElementType::EmbeddedDocument) {
                return Ok(JsonSchema {
                    rules: vec![Rule::Never],
                });
            }
        } else {
            // Cheapest rule first.
            rules.insert(0, Rule::Type(types));
        }
    }
    Ok(JsonSchema { rules })
}

fn parse_types(kw: &str, v: &Bson, aliases: &[(&str, ElementType)]) -> MongoResult<TypeSet> {
    let unsupported_integer = || failed("$jsonSchema type 'integer' is not currently supported.");
    let mut names: Vec<&str> = Vec::new();
    match v {
        Bson::String(s) => {
            if s == "integer" {
                return Err(unsupported_integer());
            }
            names.push(s);
        }
        Bson::Array(items) => {
            for item in items {
                let Bson::String(s) = item else {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{kw}' array elements must be strings"
                    )));
                };
                if s == "integer" {
                    return Err(unsupported_integer());
                }
                if names.contains(&s.as_str()) {
                    return Err(failed(format!(
                        "$jsonSchema keyword '{kw}' has duplicate value: {s}"
                    )));
                }
                names.push(s);
            }
        }
        _ => {
            return Err(mismatch(format!(
                "$jsonSchema keyword '{kw}' must be either a string or an array of strings"
            )))
        }
    }
    // mongod resolves the aliases in sorted order, which decides which
    // unknown one an error names.
    names.sort_unstable();
    let mut set = TypeSet {
        numbers: false,
        types: Vec::new(),
    };
    for name in names {
        if name == "number" {
            set.numbers = true;
            continue;
        }
        match aliases.iter().find(|(a, _)| *a == name) {
            Some((_, t)) => set.types.push(*t),
            None => {
                return Err(MongoError::bad_value(format!(
                    "Unknown type name alias: {name}"
                )))
            }
        }
    }
    if !set.numbers && set.types.is_empty() {
        return Err(failed(format!(
            "$jsonSchema keyword '{kw}' must name at least one type"
        )));
    }
    Ok(set)
}

/// mongod's `parseIntegerElementToNonNegativeLong`, for length and count keywords.
fn parse_count(kw: &str, v: &Bson) -> MongoResult<u64> {
    let n = match v {
        Bson::Int32(i) => i64::from(*i),
        Bson::Int64(i) => *i,
        Bson::Double(d) => {
            if d.is_nan() {
                return Err(failed(format!(
                    "Expected an integer, but found NaN in: {kw}: {v}"
                )));
            }
            // 2^63 is exactly representable; i64 covers [-2^63, 2^63).
            let lim = -(i64::MIN as f64);
            if !(-lim..lim).contains(d) {
                return Err(failed(format!(
                    "Cannot represent as a 64-bit integer: {kw}: {v}"
                )));
            }
            if d.fract() != 0.0 {
                return Err(failed(format!("Expected an integer: {kw}: {v}")));
            }
            *d as i64
        }
        Bson::Decimal128(d) => decimal_to_i64_exact(decode_decimal(*d))
            .ok_or_else(|| failed(format!("Cannot represent as a 64-bit integer: {kw}: {v}")))?,
        _ => return Err(failed(format!("Expected a number in: {kw}: {v}"))),
    };
    u64::try_from(n).map_err(|_| failed(format!("Expected a non-negative number in: {kw}: {v}")))
}

/// The decimal's value if it is an integer that fits in an i64.
fn decimal_to_i64_exact(n: DecimalValue) -> Option<i64> {
    let DecimalValue::Finite(neg, coeff, exp) = n else {
        return None;
    };
    let magnitude = if exp >= 0 {
        coeff.checked_mul(10u128.checked_pow(exp.unsigned_abs())?)?
    } else {
        let p = 10u128.checked_pow(exp.unsigned_abs());
        match p {
            Some(p) if coeff % p == 0 => coeff / p,
            Some(_) => return None,
            // Dividing by more than 10^38 leaves a fraction unless the coefficient is 0.
            None if coeff == 0 => 0,
            None => return None,
        }
    };
    if neg {
        0i128
            .checked_sub(i128::try_from(magnitude).ok()?)
            .and_then(|m| i64::try_from(m).ok())
    } else {
        i64::try_from(magnitude).ok()
    }
}

fn is_number(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    )
}

fn parse_scalar_keywords(kw: &Keywords<'_>, root: bool, rules: &mut Vec<Rule>) -> MongoResult<()> {
    if let Some(v) = kw.get("pattern") {
        let Bson::String(p) = v else {
            return Err(mismatch("$jsonSchema keyword 'pattern' must be a string"));
        };
        // A document is never a string: mongod does not compile a top-level pattern.
        if !root {
            rules.push(Rule::Pattern(compile_regex(p, "")?));
        }
    }
    if let Some(v) = kw.get("maxLength") {
        rules.push(Rule::MaxLength(parse_count("maxLength", v)?));
    }
    if let Some(v) = kw.get("minLength") {
        rules.push(Rule::MinLength(parse_count("minLength", v)?));
    }
    if let Some(v) = kw.get("multipleOf") {
        rules.push(Rule::MultipleOf(parse_divisor(v)?));
    }
    for (bound, exclusive, strict, loose) in [
        ("maximum", "exclusiveMaximum", CmpOp::Lt, CmpOp::Lte),
        ("minimum", "exclusiveMinimum", CmpOp::Gt, CmpOp::Gte),
    ] {
        match (kw.get(bound), kw.get(exclusive)) {
            (Some(b), ex) => {
                let is_exclusive = match ex {
                    None => false,
                    Some(Bson::Boolean(x)) => *x,
                    Some(_) => {
                        return Err(mismatch(format!(
                            "$jsonSchema keyword '{exclusive}' must be a boolean"
                        )))
                    }
                };
                if !is_number(b) {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword '{bound}' must be a number"
                    )));
                }
                let op = if is_exclusive { strict } else { loose };
                rules.push(Rule::Bound(PathOp::Cmp(op, b.clone())));
            }
            (None, Some(_)) => {
                return Err(failed(format!(
                    "$jsonSchema keyword '{bound}' must be a present if {exclusive} is present"
                )))
            }
            (None, None) => {}
        }
    }
    Ok(())
}

fn parse_divisor(v: &Bson) -> MongoResult<Divisor> {
    let not_positive = || failed("$jsonSchema keyword 'multipleOf' must have a positive value");
    match v {
        Bson::Int32(_) | Bson::Int64(_) => {
            let n = match v {
                Bson::Int32(i) => i64::from(*i),
                Bson::Int64(i) => *i,
                _ => 0,
            };
            if n <= 0 {
                return Err(not_positive());
            }
            Ok(Divisor::Finite(u128::from(n.unsigned_abs()), 0))
        }
        Bson::Double(d) => {
            if d.is_sign_negative() || *d == 0.0 {
                return Err(not_positive());
            }
            if d.is_nan() {
                return Ok(Divisor::NaN);
            }
            if d.is_infinite() {
                return Ok(Divisor::Infinite);
            }
            match double_parts(*d) {
                Some((c, e)) if c > 0 => Ok(Divisor::Finite(c, e)),
                _ => Err(not_positive()),
            }
        }
        Bson::Decimal128(d) => {
            // The sign bit decides, as in mongod: -0 and -NaN are not positive.
            if u128::from_le_bytes(d.bytes()) >> 127 == 1 {
                return Err(not_positive());
            }
            match decode_decimal(*d) {
                DecimalValue::NaN => Ok(Divisor::NaN),
                DecimalValue::Infinite => Ok(Divisor::Infinite),
                DecimalValue::Finite(_, 0, _) => Err(not_positive()),
                DecimalValue::Finite(_, c, e) => Ok(Divisor::Finite(c, e)),
            }
        }
        _ => Err(mismatch(
            "$jsonSchema keyword 'multipleOf' must be a number",
        )),
    }
}

fn parse_array_keywords(kw: &Keywords<'_>, depth: usize, rules: &mut Vec<Rule>) -> MongoResult<()> {
    if let Some(v) = kw.get("minItems") {
        rules.push(Rule::MinItems(parse_count("minItems", v)?));
    }
    if let Some(v) = kw.get("maxItems") {
        rules.push(Rule::MaxItems(parse_count("maxItems", v)?));
    }
    if let Some(v) = kw.get("uniqueItems") {
        match v {
            Bson::Boolean(true) => rules.push(Rule::UniqueItems),
            Bson::Boolean(false) => {}
            _ => {
                return Err(mismatch(
                    "$jsonSchema keyword 'uniqueItems' must be a boolean",
                ))
            }
        }
    }
    // Where `additionalItems` starts applying: only after an `items` tuple.
    let mut additional_from = None;
    if let Some(v) = kw.get("items") {
        match v {
            Bson::Array(list) => {
                let mut schemas = Vec::with_capacity(list.len());
                for item in list {
                    let Bson::Document(d) = item else {
                        return Err(mismatch(format!(
                            "$jsonSchema keyword 'items' requires that each element of the \
                             array is an object, but found a {}",
                            type_name(item)
                        )));
                    };
                    schemas.push(parse_schema(d, false, depth + 1)?);
                }
                additional_from = Some(schemas.len());
                rules.push(Rule::ItemsTuple(schemas));
            }
            Bson::Document(d) => {
                let s = parse_schema(d, false, depth + 1)?;
                rules.push(Rule::ItemsFrom(0, Otherwise::Schema(Box::new(s))));
            }
            other => {
                return Err(mismatch(format!(
                    "$jsonSchema keyword 'items' must be an array or an object, not {}",
                    type_name(other)
                )))
            }
        }
    }
    if let Some(v) = kw.get("additionalItems") {
        let otherwise = match v {
            Bson::Boolean(b) => Otherwise::Always(*b),
            Bson::Document(d) => Otherwise::Schema(Box::new(parse_schema(d, false, depth + 1)?)),
            other => {
                return Err(mismatch(format!(
                    "$jsonSchema keyword 'additionalItems' must be either an object or a \
                     boolean, but got a {}",
                    type_name(other)
                )))
            }
        };
        if let Some(from) = additional_from {
            rules.push(Rule::ItemsFrom(from, otherwise));
        }
    }
    Ok(())
}

fn parse_required(v: &Bson) -> MongoResult<Vec<String>> {
    let Bson::Array(items) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword 'required' must be an array, but found an element of type {}",
            type_name(v)
        )));
    };
    let mut names: Vec<String> = Vec::with_capacity(items.len());
    for item in items {
        let Bson::String(s) = item else {
            return Err(mismatch(format!(
                "$jsonSchema keyword 'required' must be an array of strings, but found an \
                 element of type: {}",
                type_name(item)
            )));
        };
        names.push(s.clone());
    }
    let mut sorted: Vec<&String> = names.iter().collect();
    sorted.sort_unstable();
    if sorted.windows(2).any(|w| w.first() == w.get(1)) {
        return Err(failed(
            "$jsonSchema keyword 'required' array cannot contain duplicate values",
        ));
    }
    if names.is_empty() {
        return Err(failed(
            "$jsonSchema keyword 'required' cannot be an empty array",
        ));
    }
    Ok(names)
}

fn parse_object_keywords(
    kw: &Keywords<'_>,
    root: bool,
    depth: usize,
    rules: &mut Vec<Rule>,
) -> MongoResult<()> {
    let required = match kw.get("required") {
        Some(v) => parse_required(v)?,
        None => Vec::new(),
    };
    let mut named = Vec::new();
    if let Some(v) = kw.get("properties") {
        let Bson::Document(props) = v else {
            return Err(mismatch(
                "$jsonSchema keyword 'properties' must be an object",
            ));
        };
        let mut parsed = Vec::with_capacity(props.len());
        for (name, sub) in props {
            let Bson::Document(sub) = sub else {
                return Err(mismatch(format!(
                    "Nested schema for $jsonSchema property '{name}' must be an object"
                )));
            };
            parsed.push((name.clone(), parse_schema(sub, false, depth + 1)?));
            named.push(name.clone());
        }
        rules.push(Rule::Properties(parsed));
    }
    let pattern_props = kw.get("patternProperties");
    let additional = kw.get("additionalProperties");
    if pattern_props.is_some() || additional.is_some() {
        let mut patterns = Vec::new();
        if let Some(v) = pattern_props {
            let Bson::Document(pp) = v else {
                return Err(mismatch(
                    "$jsonSchema keyword 'patternProperties' must be an object",
                ));
            };
            for (pattern, sub) in pp {
                let Bson::Document(sub) = sub else {
                    return Err(mismatch(format!(
                        "$jsonSchema keyword 'patternProperties' has property '{pattern}' which \
                         is not an object"
                    )));
                };
                let s = parse_schema(sub, false, depth + 1)?;
                patterns.push((compile_regex(pattern, "").ok(), s));
            }
        }
        let otherwise = match additional {
            None | Some(Bson::Boolean(true)) => Otherwise::Always(true),
            Some(Bson::Boolean(false)) => Otherwise::Always(false),
            Some(Bson::Document(d)) => {
                Otherwise::Schema(Box::new(parse_schema(d, false, depth + 1)?))
            }
            Some(_) => {
                return Err(mismatch(
                    "$jsonSchema keyword 'additionalProperties' must be an object or a boolean",
                ))
            }
        };
        rules.push(Rule::Allowed {
            named,
            patterns,
            otherwise,
        });
    }
    if !required.is_empty() {
        rules.push(Rule::Required(required));
    }
    if let Some(v) = kw.get("minProperties") {
        rules.push(Rule::MinProperties(parse_count("minProperties", v)?));
    }
    if let Some(v) = kw.get("maxProperties") {
        rules.push(Rule::MaxProperties(parse_count("maxProperties", v)?));
    }
    if let Some(v) = kw.get("dependencies") {
        let Bson::Document(deps) = v else {
            return Err(mismatch(
                "$jsonSchema keyword 'dependencies' must be an object",
            ));
        };
        for (name, dep) in deps {
            match dep {
                Bson::Document(d) => rules.push(Rule::Dependency(
                    name.clone(),
                    Dependency::Schema(Box::new(parse_schema(d, root, depth + 1)?)),
                )),
                Bson::Array(list) => {
                    if list.is_empty() {
                        return Err(failed(format!(
                            "property '{name}' in $jsonSchema keyword 'dependencies' cannot be \
                             an empty array"
                        )));
                    }
                    let mut names: Vec<String> = Vec::with_capacity(list.len());
                    for item in list {
                        let Bson::String(s) = item else {
                            return Err(mismatch(format!(
                                "array '{name}' in $jsonSchema keyword 'dependencies' can only \
                                 contain strings, but found element of type: {}",
                                type_name(item)
                            )));
                        };
                        if names.contains(s) {
                            return Err(failed(format!(
                                "array '{name}' in $jsonSchema keyword 'dependencies' contains \
                                 duplicate element: {s}"
                            )));
                        }
                        names.push(s.clone());
                    }
                    rules.push(Rule::Dependency(
                        name.clone(),
                        Dependency::Properties(names),
                    ));
                }
                // Annotations are allowed among the dependencies.
                Bson::String(_) if name == "title" || name == "description" => {}
                _ => {
                    return Err(mismatch(format!(
                        "property '{name}' in $jsonSchema keyword 'dependencies' must be either \
                         an object or an array"
                    )))
                }
            }
        }
    }
    Ok(())
}

fn parse_schema_list(
    name: &str,
    v: &Bson,
    root: bool,
    depth: usize,
) -> MongoResult<Vec<JsonSchema>> {
    let Bson::Array(items) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword '{name}' must be an array"
        )));
    };
    if items.is_empty() {
        return Err(MongoError::bad_value(format!(
            "$jsonSchema keyword '{name}' must be a non-empty array"
        )));
    }
    items
        .iter()
        .map(|item| match item {
            Bson::Document(d) => parse_schema(d, root, depth + 1),
            other => Err(mismatch(format!(
                "$jsonSchema keyword '{name}' must be an array of objects, but found an element \
                 of type {}",
                type_name(other)
            ))),
        })
        .collect()
}

fn parse_logical_keywords(
    kw: &Keywords<'_>,
    root: bool,
    depth: usize,
    rules: &mut Vec<Rule>,
) -> MongoResult<()> {
    if let Some(v) = kw.get("allOf") {
        rules.push(Rule::AllOf(parse_schema_list("allOf", v, root, depth)?));
    }
    if let Some(v) = kw.get("anyOf") {
        rules.push(Rule::AnyOf(parse_schema_list("anyOf", v, root, depth)?));
    }
    if let Some(v) = kw.get("oneOf") {
        rules.push(Rule::OneOf(parse_schema_list("oneOf", v, root, depth)?));
    }
    if let Some(v) = kw.get("not") {
        let Bson::Document(d) = v else {
            return Err(mismatch(format!(
                "$jsonSchema keyword 'not' must be an object, but found an element of type {}",
                type_name(v)
            )));
        };
        rules.push(Rule::Not(Box::new(parse_schema(d, root, depth + 1)?)));
    }
    if let Some(v) = kw.get("enum") {
        rules.push(Rule::Enum(parse_enum(v)?));
    }
    Ok(())
}

fn parse_enum(v: &Bson) -> MongoResult<Vec<RawBson>> {
    let Bson::Array(items) = v else {
        return Err(mismatch(format!(
            "$jsonSchema keyword 'enum' must be an array, but found an element of type {}",
            type_name(v)
        )));
    };
    if items.is_empty() {
        return Err(failed(
            "$jsonSchema keyword 'enum' cannot be an empty array",
        ));
    }
    let values = items
        .iter()
        .map(|item| {
            RawBson::try_from(item.clone()).map_err(|e| {
                MongoError::new(ErrorCode::InvalidBSON, format!("invalid enum value: {e}"))
            })
        })
        .collect::<MongoResult<Vec<RawBson>>>()?;
    let mut sorted: Vec<RawBsonRef<'_>> = values.iter().map(RawBson::as_raw_bson_ref).collect();
    sorted.sort_by(|x, y| unordered_cmp(*x, *y));
    let duplicate = sorted
        .iter()
        .zip(sorted.iter().skip(1))
        .any(|(x, y)| unordered_cmp(*x, *y) == Ordering::Equal);
    if duplicate {
        return Err(failed(
            "$jsonSchema keyword 'enum' array cannot contain duplicate values.",
        ));
    }
    Ok(values)
}
