//! Document validation: a collection's `validator` (any query filter,
//! `$jsonSchema` and `$expr` included), `validationLevel` and
//! `validationAction`, as mongod 8.0 applies them to inserts and updates.
//!
//! The options live in the collection's catalog options (so both engines
//! persist them and `listCollections` shows them). A write command asks
//! [`Validator::for_collection`] once: a collection without a validator costs
//! one map lookup and nothing per document; one with a validator has its filter
//! parsed once per command. A failing document gets 121
//! DocumentValidationFailure with mongod's `errInfo: {failingDocumentId,
//! details}`; the details are worked out only then (see [`explain`]).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use std::sync::Arc;

use bisondb_query::collation::Collation;
use bisondb_query::expr::{Expr as AggExpr, Vars};
use bisondb_query::matcher::Matcher;
use bisondb_storage::Collection;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

use crate::fields;

/// The `validationLevel` values of mongod 8.0 (`"strict"` is the default).
const LEVELS: &[&str] = &["off", "strict", "moderate"];
/// The `validationAction` values of mongod 8.0 (`"error"` is the default;
/// `errorAndLog` is new in 8.1 and refused, as 8.0 refuses it).
const ACTIONS: &[&str] = &["error", "warn"];

/// Databases whose collections may not have validators (mongod's internal ones).
const INTERNAL_DBS: &[&str] = &["admin", "config", "local"];

/// Reads `validationLevel` from a `create` or `collMod` command.
pub fn parse_level(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<String> {
    parse_enum(cmd, "validationLevel", v, LEVELS)
}

/// Reads `validationAction` from a `create` or `collMod` command.
pub fn parse_action(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<String> {
    parse_enum(cmd, "validationAction", v, ACTIONS)
}

fn parse_enum(cmd: &str, field: &str, v: RawBsonRef<'_>, allowed: &[&str]) -> MongoResult<String> {
    let s = fields::as_str(cmd, field, v)?;
    if !allowed.contains(&s) {
        // mongod's IDL wording for an enum value it does not know.
        return Err(MongoError::bad_value(format!(
            "Enumeration value '{s}' for field '{cmd}.{field}' is not a valid value."
        )));
    }
    Ok(s.to_string())
}

/// The command's `bypassDocumentValidation` (false when absent).
pub fn bypass(cmd: &str, body: &RawDocument) -> MongoResult<bool> {
    match body.get("bypassDocumentValidation") {
        Ok(Some(v)) => fields::as_bool(cmd, "bypassDocumentValidation", v),
        Ok(None) => Ok(false),
        Err(e) => Err(crate::request::invalid_bson(e)),
    }
}

/// Checks a `validator` given to `create` or `collMod` for `db.coll`: where
/// validators are allowed, operators mongod refuses in them, and that it parses
/// as a filter. Returns it as an owned document for the catalog.
pub fn parse_validator(
    cmd: &str,
    db: &str,
    coll: &str,
    v: RawBsonRef<'_>,
) -> MongoResult<Document> {
    let rules = fields::to_document(fields::as_doc(cmd, "validator", v)?)?;
    if rules.is_empty() {
        return Ok(rules);
    }
    if coll.starts_with("system.") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("Document validators not allowed on system collection {db}.{coll}"),
        ));
    }
    if INTERNAL_DBS.contains(&db) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("Document validators are not allowed on collection {db}.{coll} in the {db} internal database"),
        ));
    }
    check_banned(&rules, 0)?;
    Matcher::parse_doc(&rules)?;
    Ok(rules)
}

/// Whether `key` is a field name anywhere inside `v` (bounded like the filter).
fn mentions(v: &Bson, key: &str, depth: usize) -> bool {
    if depth > 100 {
        return false;
    }
    match v {
        Bson::Document(d) => d
            .iter()
            .any(|(k, v)| k == key || mentions(v, key, depth + 1)),
        Bson::Array(items) => items.iter().any(|v| mentions(v, key, depth + 1)),
        _ => false,
    }
}

/// Operators a validator may not use (mongod parses validators without the
/// text, geoNear and JavaScript features), found at any depth of the filter.
fn check_banned(filter: &Document, depth: usize) -> MongoResult<()> {
    if depth > 100 {
        // The matcher rejects the nesting itself with mongod's error.
        return Ok(());
    }
    for (k, v) in filter {
        let not_allowed = |what: &str| {
            MongoError::new(
                ErrorCode::QueryFeatureNotAllowed,
                format!("{what} not allowed in this context"),
            )
        };
        match k.as_str() {
            "$where" => return Err(not_allowed("$where is")),
            "$text" => return Err(not_allowed("$text is")),
            "$near" | "$nearSphere" | "$geoNear" => {
                return Err(not_allowed("$geoNear, $near, and $nearSphere are"))
            }
            // Nor server-side JavaScript in an expression.
            "$expr" if mentions(v, "$function", 0) => {
                return Err(MongoError::location(
                    4660800,
                    "$function cannot be used inside a validator.",
                ))
            }
            // Schemas and aggregation expressions are not filters.
            "$jsonSchema" | "$expr" => continue,
            _ => {}
        }
        match v {
            Bson::Document(d) => check_banned(d, depth + 1)?,
            Bson::Array(items) => {
                for item in items {
                    if let Bson::Document(d) = item {
                        check_banned(d, depth + 1)?;
                    }
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// A collection's validator, parsed for one write command.
pub struct Validator {
    matcher: Matcher,
    rules: Document,
    /// The collection's default collation, under which the validator matches.
    check: Check,
    moderate: bool,
    warn: bool,
    ns: String,
}

impl Validator {
    /// The validator writes to `coll` must pass, or `None` when there is
    /// nothing to check: no validator, `validationLevel: "off"`, or the
    /// command's `bypassDocumentValidation: true`.
    pub fn for_collection(coll: Option<&Collection>, bypass: bool) -> MongoResult<Option<Self>> {
        let Some(coll) = coll else { return Ok(None) };
        if bypass {
            return Ok(None);
        }
        let options = coll.options();
        let rules = match options.get("validator") {
            Some(Bson::Document(d)) if !d.is_empty() => d,
            _ => return Ok(None),
        };
        let level = options.get_str("validationLevel").unwrap_or("strict");
        if level == "off" {
            return Ok(None);
        }
        // mongod matches a validator under the collection's default collation.
        let collation = crate::collation::of_collection(Some(coll))?;
        Ok(Some(Validator {
            matcher: Matcher::parse_doc(rules)?.with_collation(collation.clone()),
            rules: rules.clone(),
            check: Check { collation },
            moderate: level == "moderate",
            warn: options
                .get_str("validationAction")
                .is_ok_and(|a| a == "warn"),
            ns: coll.namespace().to_string(),
        }))
    }

    /// Checks a document about to be written. `before` is the document an
    /// update replaces (`None` for inserts and upserts): with
    /// `validationLevel: "moderate"` a document that already failed may be
    /// updated into another failing one. With `validationAction: "warn"` a
    /// failure is logged and the write goes on.
    pub fn check(&self, doc: &RawDocument, before: Option<&RawDocument>) -> MongoResult<()> {
        if self.matcher.matches(doc) {
            return Ok(());
        }
        if self.moderate && before.is_some_and(|b| !self.matcher.matches(b)) {
            return Ok(());
        }
        let failure = self.failure(doc);
        if self.warn {
            tracing::warn!(
                id = 20294,
                namespace = %self.ns,
                error = %crate::reply::details(&failure),
                "Document would fail validation"
            );
            return Ok(());
        }
        Err(failure)
    }

    /// Whether `doc` passes the validator (`validate` counts those that do
    /// not, whatever `validationLevel` and `validationAction` say).
    pub fn complies(&self, doc: &RawDocument) -> bool {
        self.matcher.matches(doc)
    }

    /// Like [`Validator::check`] for an owned document.
    pub fn check_doc(&self, doc: &Document, before: Option<&RawDocument>) -> MongoResult<()> {
        let raw = RawDocumentBuf::try_from(doc)
            .map_err(|e| MongoError::internal(format!("document is not valid BSON: {e}")))?;
        self.check(&raw, before)
    }

    /// 121 with mongod's `errInfo`.
    fn failure(&self, doc: &RawDocument) -> MongoError {
        let id = doc
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| Bson::try_from(v).ok())
            .unwrap_or(Bson::Null);
        let owned = Document::try_from(doc).unwrap_or_default();
        let info = doc! {"errInfo": {"failingDocumentId": id, "details": explain_with(&self.check, &self.rules, &owned)}};
        let e = MongoError::new(
            ErrorCode::DocumentValidationFailure,
            "Document failed validation",
        );
        match crate::reply::to_raw(&info) {
            Ok(raw) => e.with_details(raw.into_bytes()),
            Err(_) => e,
        }
    }
}

/// How an explanation re-checks pieces of a validator: under the collation
/// the validator itself matched with.
#[derive(Default)]
struct Check {
    collation: Option<Arc<Collation>>,
}

impl Check {
    /// Whether `doc` satisfies `filter` (an unparsable piece does not).
    fn matches(&self, filter: &Document, doc: &Document) -> bool {
        Matcher::parse_doc(filter)
            .map(|m| m.with_collation(self.collation.clone()))
            .is_ok_and(|m| m.matches_doc(doc))
    }
}

/// Whether `doc` satisfies the filter `{key: value}`.
fn clause_matches(ck: &Check, key: &str, value: &Bson, doc: &Document) -> bool {
    let mut f = Document::new();
    f.insert(key, value.clone());
    ck.matches(&f, doc)
}

/// mongod's explanation of why `doc` fails the validator `rules` (the
/// `errInfo.details` of 121): the failing clause, or `$and` with the clauses
/// that failed when there are several.
pub fn explain(rules: &Document, doc: &Document) -> Document {
    explain_with(&Check::default(), rules, doc)
}

fn explain_with(ck: &Check, rules: &Document, doc: &Document) -> Document {
    let clauses: Vec<(&String, &Bson)> = rules.iter().filter(|(k, _)| *k != "$comment").collect();
    if let [(k, v)] = clauses.as_slice() {
        return explain_clause(ck, k, v, doc);
    }
    and_details(ck, "$and", clauses.iter().map(|(k, v)| (*k, *v)), doc)
}

fn and_details<'a>(
    ck: &Check,
    name: &str,
    clauses: impl Iterator<Item = (&'a String, &'a Bson)>,
    doc: &Document,
) -> Document {
    let mut failed = Vec::new();
    for (i, (k, v)) in clauses.enumerate() {
        if !clause_matches(ck, k, v, doc) {
            failed.push(Bson::Document(
                doc! {"index": i as i32, "details": explain_clause(ck, k, v, doc)},
            ));
        }
    }
    doc! {"operatorName": name, "clausesNotSatisfied": failed}
}

/// The details of one top-level clause `{key: value}` that `doc` fails.
fn explain_clause(ck: &Check, key: &str, value: &Bson, doc: &Document) -> Document {
    match (key, value) {
        ("$jsonSchema", Bson::Document(schema)) => doc! {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": schema_rules(ck, schema, &Bson::Document(doc.clone())),
        },
        ("$expr", _) => {
            let mut d = doc! {
                "operatorName": "$expr",
                "specifiedAs": {"$expr": value.clone()},
                "reason": "expression did not match",
            };
            // What the expression gave (a falsy value); left out if it now fails.
            let vars = Vars::with_collation(bson::DateTime::now(), ck.collation.clone());
            if let Ok(result) = AggExpr::parse(value).and_then(|e| e.eval(doc, &vars)) {
                d.insert("expressionResult", result.unwrap_or(Bson::Null));
            }
            d
        }
        ("$and" | "$or" | "$nor", Bson::Array(items)) => {
            let mut failed = Vec::new();
            for (i, item) in items.iter().enumerate() {
                let Bson::Document(sub) = item else { continue };
                let sub_fails = !ck.matches(sub, doc);
                // $nor fails on the clauses that matched; the others on those that did not.
                if sub_fails != (key == "$nor") {
                    let details = if key == "$nor" {
                        doc! {"operatorName": "$nor", "specifiedAs": sub.clone(), "reason": "clause matched"}
                    } else {
                        explain_with(ck, sub, doc)
                    };
                    failed.push(Bson::Document(doc! {"index": i as i32, "details": details}));
                }
            }
            doc! {"operatorName": key, "clausesNotSatisfied": failed}
        }
        // `$options` belongs to its `$regex`: such a pair is one predicate.
        (path, Bson::Document(ops))
            if !path.starts_with('$') && is_operator_doc(ops) && ops.contains_key("$options") =>
        {
            explain_path_op(path, "$regex", value, doc)
        }
        (path, Bson::Document(ops)) if !path.starts_with('$') && is_operator_doc(ops) => {
            let failing: Vec<(&String, &Bson)> = ops
                .iter()
                .filter(|(op, v)| {
                    !clause_matches(
                        ck,
                        path,
                        &Bson::Document(doc! {op.as_str(): (*v).clone()}),
                        doc,
                    )
                })
                .collect();
            if let [(op, v)] = failing.as_slice() {
                return explain_path_op(path, op, v, doc);
            }
            let mut failed = Vec::new();
            for (i, (op, v)) in ops.iter().enumerate() {
                if failing.iter().any(|(f, _)| *f == op) {
                    failed.push(Bson::Document(doc! {
                        "index": i as i32,
                        "details": explain_path_op(path, op, v, doc),
                    }));
                }
            }
            doc! {"operatorName": "$and", "clausesNotSatisfied": failed}
        }
        (path, v) if !path.starts_with('$') => explain_path_op(path, "$eq", v, doc),
        _ => {
            doc! {"operatorName": key, "specifiedAs": {key: value.clone()}, "reason": "expression did not match"}
        }
    }
}

fn is_operator_doc(d: &Document) -> bool {
    d.keys().next().is_some_and(|k| k.starts_with('$'))
}

/// `{operatorName, specifiedAs, reason, consideredValue}` for `{path: {op: v}}`.
fn explain_path_op(path: &str, op: &str, v: &Bson, doc: &Document) -> Document {
    let specified = match v {
        // A `$regex` with its `$options`: the operator document as given.
        Bson::Document(d) if op == "$regex" && d.contains_key("$regex") => doc! {path: v.clone()},
        _ if op == "$eq" => doc! {path: v.clone()},
        _ => doc! {path: {op: v.clone()}},
    };
    let value = bisondb_query::path::get_path_bson(doc, path).cloned();
    let mut out = doc! {"operatorName": op, "specifiedAs": specified};
    let reason = match (op, &value) {
        ("$exists", None) => "path does not exist",
        ("$exists", Some(_)) => "path does exist",
        (_, None) => "field was missing",
        ("$type", _) => "type did not match",
        ("$in", _) => "no matching value found in array",
        ("$nin", _) => "matching value found in array",
        ("$regex", _) => "regular expression did not match",
        ("$not", _) => "child expression matched",
        ("$elemMatch", _) => "array did not satisfy the child predicate",
        ("$size", _) => "array length was not equal to given size",
        ("$all", _) => "array did not contain all specified values",
        ("$mod", _) => "$mod did not evaluate to expected remainder",
        _ => "comparison failed",
    };
    out.insert("reason", reason);
    if let Some(value) = value {
        if op == "$type" {
            out.insert("consideredType", type_of(&value));
        }
        out.insert("consideredValue", value);
    }
    out
}

fn type_of(v: &Bson) -> &'static str {
    fields::type_name(v.element_type())
}

/// Whether `value` satisfies the one-keyword schema `{keyword: spec}`.
fn schema_keyword_holds(ck: &Check, keyword: &str, spec: &Bson, value: &Bson) -> bool {
    let filter = doc! {"$jsonSchema": {"properties": {"v": {keyword: spec.clone()}}}};
    let wrapped = doc! {"v": value.clone()};
    ck.matches(&filter, &wrapped)
}

/// mongod's `schemaRulesNotSatisfied`: one entry per keyword of `schema` that
/// `value` breaks, with nested `propertiesNotSatisfied` for `properties`.
fn schema_rules(ck: &Check, schema: &Document, value: &Bson) -> Vec<Bson> {
    let mut out = Vec::new();
    for (kw, spec) in schema {
        if matches!(kw.as_str(), "title" | "description" | "$comment") {
            continue;
        }
        if schema_keyword_holds(ck, kw, spec, value) {
            continue;
        }
        let object = match value {
            Bson::Document(d) => Some(d),
            _ => None,
        };
        let mut rule = doc! {"operatorName": kw.as_str()};
        match (kw.as_str(), spec, object) {
            ("properties", Bson::Document(props), Some(obj)) => {
                let mut failed = Vec::new();
                for (name, sub) in props {
                    let (Bson::Document(sub), Some(v)) = (sub, obj.get(name)) else {
                        continue;
                    };
                    let details = schema_rules(ck, sub, v);
                    if !details.is_empty() {
                        failed.push(Bson::Document(
                            doc! {"propertyName": name.as_str(), "details": details},
                        ));
                    }
                }
                rule.insert("propertiesNotSatisfied", failed);
            }
            ("required", Bson::Array(names), Some(obj)) => {
                rule.insert("specifiedAs", doc! {"required": spec.clone()});
                let missing: Vec<Bson> = names
                    .iter()
                    .filter(|n| matches!(n, Bson::String(s) if !obj.contains_key(s)))
                    .cloned()
                    .collect();
                rule.insert("missingProperties", missing);
            }
            ("additionalProperties", Bson::Boolean(false), Some(obj)) => {
                rule.insert("specifiedAs", doc! {"additionalProperties": false});
                let declared = schema.get_document("properties").ok();
                let extra: Vec<Bson> = obj
                    .keys()
                    .filter(|k| !declared.is_some_and(|p| p.contains_key(*k)))
                    .map(|k| Bson::String(k.clone()))
                    .collect();
                rule.insert("additionalProperties", extra);
            }
            _ => {
                rule.insert("specifiedAs", doc! {kw.as_str(): spec.clone()});
                let reason = match kw.as_str() {
                    "bsonType" | "type" => "type did not match",
                    "enum" => "value was not found in enum",
                    "minimum" | "maximum" => "comparison failed",
                    "minLength" | "maxLength" => "specified string length was not satisfied",
                    "pattern" => "regular expression did not match",
                    "minItems" | "maxItems" => "array did not match specified length",
                    "minProperties" | "maxProperties" => {
                        "specified number of properties was not satisfied"
                    }
                    "multipleOf" => "considered value was not a multiple of specified value",
                    "uniqueItems" => "found a duplicate item",
                    _ => "schema keyword was not satisfied",
                };
                rule.insert("reason", reason);
                rule.insert("consideredValue", value.clone());
                if matches!(kw.as_str(), "bsonType" | "type") {
                    rule.insert("consideredType", type_of(value));
                }
            }
        }
        out.push(Bson::Document(rule));
    }
    out
}

#[cfg(test)]
mod tests;
