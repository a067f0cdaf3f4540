//! `createIndexes`: validates each index specification as mongod does, then
//! creates and builds the indexes one by one (creating the collection when it
//! is missing). The `_id` index always exists; geoHaystack fails as in
//! mongod 5+; wildcard indexes are checked against mongod's restrictions.
//! An index's collation (its own, else the collection's default) is stored
//! resolved in its spec.
//! On a clustered collection an index on the cluster key already exists as
//! the clustered index (`clustered.rs` decides, as mongod does), and mongod
//! does not count the clustered index in `numIndexesBefore`/`After`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::compare::number_as_f64;
use bisondb_storage::IndexSpec;
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct CreateIndexes {
    db: String,
    coll: String,
    /// Each specification as sent, and `None` for a request of the `_id`
    /// index, which always exists.
    specs: Vec<(Document, Option<IndexSpec>)>,
}

/// Options an index specification may carry.
const SPEC_FIELDS: &[&str] = &[
    // 2d: bits of precision and the plane's bounds; 2dsphere: the version.
    "2dsphereIndexVersion",
    "background",
    "bits",
    // Only on the cluster key of a clustered collection (`clustered.rs`).
    "clustered",
    "collation",
    // Text indexes (`bisondb_query::text::fix_spec`).
    "default_language",
    // Accepted and ignored, as mongod has since 3.0 (duplicates always fail a
    // unique build).
    "dropDups",
    "expireAfterSeconds",
    "hidden",
    "key",
    "language_override",
    "max",
    "min",
    "name",
    "ns",
    "partialFilterExpression",
    "sparse",
    "textIndexVersion",
    "unique",
    "v",
    "weights",
    // Wildcard indexes (`bisondb_query::index_keys::wildcard`).
    "wildcardProjection",
];

/// Options only a text index takes.
const TEXT_OPTIONS: &[&str] = &[
    "default_language",
    "language_override",
    "textIndexVersion",
    "weights",
];

impl Command for CreateIndexes {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        let n = req.name;
        let mut coll = None;
        let mut specs = Vec::new();
        let mut have_indexes = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "createIndexes" => coll = Some(fields::collection_name(n, v)?.to_string()),
                "indexes" => {
                    have_indexes = true;
                    for spec in fields::as_array(n, "indexes", v)? {
                        let spec = match spec.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => fields::to_document(d)?,
                            other => return Err(fields::wrong_type(n, "indexes", other, "object")),
                        };
                        let parsed = parse_spec(&spec)?;
                        specs.push((spec, parsed));
                    }
                }
                "commitQuorum" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "createIndexes"))?;
        if !have_indexes {
            return Err(fields::missing_field(n, "indexes"));
        }
        if specs.is_empty() {
            return Err(MongoError::bad_value(
                "Must specify at least one index to create",
            ));
        }
        Ok(CreateIndexes {
            db: req.db.clone(),
            coll,
            specs,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let storage = &ctx.state.storage;
        let existing = storage.collection(&self.db, &self.coll);
        let clustered = existing
            .as_ref()
            .and_then(|c| crate::namespaces::clustered::Clustered::of_options(&c.options()));
        // Every specification is checked before any index is built.
        let mut wanted = Vec::new();
        for (raw, spec) in self.specs {
            let on_collection = existing.as_ref().map(|_| clustered.as_ref());
            if crate::namespaces::clustered::check_index_spec(&raw, on_collection)? {
                continue; // it exists as the clustered index
            }
            match spec {
                Some(spec) => wanted.push(spec),
                // `{_id: 1}` by another name names the existing `_id_` index.
                None => {
                    check_id_index_spec(&raw)?;
                    if raw.get_str("name").is_ok_and(|n| n != "_id_") {
                        return Err(MongoError::new(
                            ErrorCode::IndexOptionsConflict,
                            "Index already exists with a different name: _id_",
                        ));
                    }
                }
            }
        }
        let implicit = usize::from(clustered.is_none());
        let before = existing
            .as_ref()
            .map_or(0, |c| c.indexes().len() + implicit);
        if existing.is_none() {
            storage.get_or_create_collection(&self.db, &self.coll)?;
        }
        // An index without a collation of its own gets the collection's
        // default, as in mongod; an explicit simple one stays simple.
        let default = crate::collation::of_collection(existing.as_ref())?;
        let mut created = 0;
        for mut spec in wanted {
            spec.collation = match spec.collation.take() {
                Some(c) if c == simple_marker() => None,
                Some(c) => Some(c),
                None => crate::collation::spec_of(default.as_ref()),
            };
            if spec.is_text() {
                check_text_index(storage, &self.db, &self.coll, &spec)?;
            }
            if storage.create_index(&self.db, &self.coll, spec)? {
                created += 1;
            }
        }
        let after = storage
            .collection(&self.db, &self.coll)
            .map_or(1, |c| c.indexes().len() + implicit);
        let mut reply = doc! {
            "numIndexesBefore": before.max(implicit) as i32,
            "numIndexesAfter": after as i32,
        };
        // mongod's "nothing to do" reply carries the note instead of
        // createdCollectionAutomatically.
        if created == 0 && existing.is_some() {
            reply.insert("note", "all indexes already exist");
        } else {
            reply.insert("createdCollectionAutomatically", existing.is_none());
        }
        reply::ok(reply)
    }
}

/// A text index compares words, not collation keys, and a collection has one
/// text index at most (the same one again is a no-op the catalog sees).
fn check_text_index(
    storage: &bisondb_storage::Storage,
    db: &str,
    coll: &str,
    spec: &IndexSpec,
) -> MongoResult<()> {
    if let Some(c) = &spec.collation {
        return Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            format!(
                "Index type 'text' does not support collation: {}",
                bisondb_storage::error::shell_format_document(c)
            ),
        ));
    }
    let existing = storage.collection(db, coll).map(|c| c.indexes());
    if let Some(other) = existing
        .iter()
        .flat_map(|v| v.iter())
        .find(|ix| ix.spec.is_text() && ix.spec.name != spec.name)
    {
        return Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            format!(
                "only one text index per collection allowed, found existing text index \"{}\"",
                other.spec.name
            ),
        ));
    }
    Ok(())
}

fn spec_error(spec: &Document, why: &str) -> MongoError {
    MongoError::new(
        ErrorCode::CannotCreateIndex,
        format!(
            "Error in specification {} :: caused by :: {why}",
            bisondb_storage::error::shell_format_document(spec)
        ),
    )
}

/// mongod's `validateIdIndexSpec`: an `{_id: 1}` specification may hold only
/// `key`, `name`, `v`, `ns`, `collation` (and the legacy `_id`); any other
/// option (`unique`, `sparse`, `background`, `expireAfterSeconds`, ...) is 197
/// InvalidIndexSpecificationOption, checked before the name conflict (85).
/// The specification is shown as mongod prepared it, with `v: 2` appended.
fn check_id_index_spec(spec: &Document) -> MongoResult<()> {
    const ALLOWED: &[&str] = &["collation", "name", "v", "key", "ns", "_id"];
    let Some(k) = spec.keys().find(|k| !ALLOWED.contains(&k.as_str())) else {
        return Ok(());
    };
    let mut shown = spec.clone();
    if !shown.contains_key("v") {
        shown.insert("v", 2);
    }
    Err(MongoError::new(
        ErrorCode::InvalidIndexSpecificationOption,
        format!(
            "The field '{k}' is not valid for an _id index specification. Specification: {}",
            bisondb_storage::error::shell_format_document(&shown)
        ),
    ))
}

/// Validates one specification; `None` for the `_id` index.
fn parse_spec(spec: &Document) -> MongoResult<Option<IndexSpec>> {
    for k in spec.keys() {
        if !SPEC_FIELDS.contains(&k.as_str()) {
            return Err(MongoError::new(
                ErrorCode::InvalidIndexSpecificationOption,
                format!(
                    "The field '{k}' is not valid for an index specification. Specification: {}",
                    bisondb_storage::error::shell_format_document(spec)
                ),
            ));
        }
    }
    let key = match spec.get("key") {
        Some(Bson::Document(k)) => k.clone(),
        Some(_) => return Err(MongoError::type_mismatch("The 'key' field must be an object")),
        None => {
            return Err(MongoError::failed_to_parse(
                "Error in specification: the 'key' field is a required property of an index specification",
            ))
        }
    };
    if key.is_empty() {
        return Err(spec_error(spec, "Index keys cannot be empty."));
    }
    for (field, v) in &key {
        if field.is_empty() {
            return Err(spec_error(spec, "Index keys cannot be an empty field."));
        }
        let text = matches!(v, Bson::String(t) if t == "text");
        // `{"$**": "text"}` is a text index over every string, not a
        // wildcard index.
        if text && (field == "$**" || field == "_fts") {
            continue;
        }
        if field.contains("$**") {
            check_wildcard_term(spec, field, v)?;
            continue;
        }
        if field.starts_with('$') {
            return Err(spec_error(
                spec,
                "Index key contains an illegal field name: field name starts with '$'.",
            ));
        }
        match v {
            // Text fields (adjacent; `fix_spec` checks the layout).
            Bson::String(t) if t == "text" => {}
            // One field may be hashed; the others are ascending or descending.
            Bson::String(t) if t == "hashed" => {}
            Bson::String(t) if t == "2d" || t == "2dsphere" => {}
            // Removed from mongod in 5.0.
            Bson::String(t) if t == "geoHaystack" => {
                return Err(MongoError::new(
                    ErrorCode::CannotCreateIndex,
                    "GeoHaystack indexes cannot be created in version 4.9 and above",
                ))
            }
            Bson::String(t) => {
                return Err(spec_error(spec, &format!("Unknown index plugin '{t}'")))
            }
            other => match number_as_f64(other) {
                Some(x) if x != 0.0 && !x.is_nan() => {}
                Some(_) => {
                    return Err(spec_error(
                        spec,
                        "Values in the index key pattern can't be 0.",
                    ))
                }
                None => {
                    return Err(spec_error(
                        spec,
                        &format!(
                            "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers < 0, and strings are allowed.",
                            fields::type_name(other.element_type())
                        ),
                    ))
                }
            },
        }
    }
    let hashed = key
        .values()
        .filter(|v| matches!(v, Bson::String(t) if t == "hashed"))
        .count();
    if hashed > 1 {
        return Err(MongoError::new(
            ErrorCode::Other(31303),
            format!(
                "A maximum of one index field is allowed to be hashed but found {hashed} for 'key' {key}"
            ),
        ));
    }
    let name = match spec.get("name") {
        Some(Bson::String(s)) if !s.is_empty() => s.clone(),
        Some(Bson::String(_)) => return Err(spec_error(spec, "index name cannot be empty")),
        Some(_) => {
            return Err(MongoError::type_mismatch(
                "The 'name' field must be a string",
            ))
        }
        None => crate::namespaces::default_index_name(&key),
    };
    let flag = |f: &str| -> MongoResult<bool> {
        match spec.get(f) {
            None => Ok(false),
            Some(Bson::Boolean(b)) => Ok(*b),
            Some(v) => number_as_f64(v).map(|x| x != 0.0).ok_or_else(|| {
                MongoError::type_mismatch(format!("The field '{f}' must be a boolean"))
            }),
        }
    };
    let (unique, sparse, hidden) = (flag("unique")?, flag("sparse")?, flag("hidden")?);
    let mut type_options = geo_options(spec, &key, hashed > 0)?;
    wildcard_options(spec, &key, unique, sparse, &mut type_options)?;
    let mut key = key;
    if bisondb_query::text::is_text_key(&key) {
        // Stored as mongod stores it: `{_fts: "text", _ftsx: 1}` in place of
        // the text fields, with its resolved options.
        (key, type_options) = bisondb_query::text::fix_spec(spec)?;
    } else if let Some(k) = TEXT_OPTIONS.iter().find(|k| spec.contains_key(**k)) {
        return Err(MongoError::new(
            ErrorCode::InvalidIndexSpecificationOption,
            format!(
                "The field '{k}' is not valid for an index specification. Specification: {}",
                bisondb_storage::error::shell_format_document(spec)
            ),
        ));
    }
    if unique && hashed > 0 {
        // A hash collision would make two distinct values duplicates.
        return Err(MongoError::new(
            ErrorCode::Other(16764),
            "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
        ));
    }
    let background = match spec.get("background") {
        Some(_) => Some(flag("background")?),
        None => None,
    };
    // The index's own collation, resolved; an explicit simple one is marked
    // so that it does not take the collection's default (see `execute`).
    let collation = match spec.get("collation") {
        None => None,
        Some(Bson::Document(d)) if d.is_empty() => Some(simple_marker()),
        Some(Bson::Document(d)) => Some(
            crate::collation::spec_of(crate::collation::parse_spec(d)?.as_ref())
                .unwrap_or_else(simple_marker),
        ),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "The field 'collation' must be an object, but got {}",
                bisondb_query::value::type_name(other)
            )))
        }
    };
    if let Some(c) = spec.get("clustered") {
        if !matches!(c, Bson::Boolean(true)) && number_as_f64(c).is_none_or(|x| x == 0.0) {
            return Err(MongoError::location(
                6492800,
                "Value 'false' for field 'clustered' is invalid",
            ));
        }
        if !unique {
            return Err(spec_error(
                spec,
                "The 'unique' field is required when 'clustered' is specified",
            ));
        }
    }
    let is_id = key.len() == 1 && key.get("_id").and_then(number_as_f64) == Some(1.0);
    if is_id {
        // A different name conflicts with `_id_`, unless the collection is
        // clustered (`execute` decides).
        return Ok(None);
    }
    if name == "_id_" {
        return Err(spec_error(
            spec,
            "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found key: ...",
        ));
    }
    let partial_filter = match spec.get("partialFilterExpression") {
        None => None,
        Some(Bson::Document(d)) => {
            if sparse {
                return Err(spec_error(
                    spec,
                    "cannot mix \"partialFilterExpression\" and \"sparse\" options",
                ));
            }
            bisondb_query::matcher::Matcher::parse_doc(d)?;
            Some(d.clone())
        }
        Some(_) => {
            return Err(MongoError::type_mismatch(
                "The field 'partialFilterExpression' must be an object",
            ))
        }
    };
    let expire_after_seconds = match spec.get("expireAfterSeconds") {
        None => None,
        Some(v) => {
            let Some(x) = number_as_f64(v) else {
                return Err(spec_error(
                    spec,
                    "TTL index 'expireAfterSeconds' option must be numeric",
                ));
            };
            if !(0.0..=2_147_483_647.0).contains(&x) {
                return Err(spec_error(
                    spec,
                    "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
                ));
            }
            if key.len() > 1 {
                return Err(spec_error(
                    spec,
                    "TTL indexes are single-field indexes, compound indexes do not support TTL.",
                ));
            }
            Some(x as i64)
        }
    };
    Ok(Some(IndexSpec {
        type_options,
        name,
        key,
        unique,
        sparse,
        partial_filter,
        expire_after_seconds,
        hidden,
        background,
        collation,
    }))
}

/// A wildcard term of a key pattern (`$**` or `path.$**`, ascending or
/// descending): anything else holding `$**` is 67, as in mongod.
fn check_wildcard_term(spec: &Document, field: &str, v: &Bson) -> MongoResult<()> {
    let root = field.strip_suffix("$**");
    let well_formed = match root {
        Some("") => true,
        Some(r) => {
            r.ends_with('.')
                && !r.contains("$**")
                && r.trim_end_matches('.')
                    .split('.')
                    .all(|p| !p.is_empty() && !p.starts_with('$'))
        }
        None => false,
    };
    if !well_formed || matches!(v, Bson::String(_)) {
        return Err(spec_error(
            spec,
            "Index key contains an illegal field name: field name starts with '$'.",
        ));
    }
    match number_as_f64(v) {
        Some(x) if x != 0.0 && !x.is_nan() => Ok(()),
        Some(_) => Err(spec_error(
            spec,
            "Values in the index key pattern can't be 0.",
        )),
        None => Err(spec_error(
            spec,
            &format!(
                "Values in v:2 index key pattern cannot be of type {}. Only numbers > 0, numbers < 0, and strings are allowed.",
                fields::type_name(v.element_type())
            ),
        )),
    }
}

/// Checks a wildcard index's options as mongod 8 does and keeps its
/// `wildcardProjection` (shown by `listIndexes`) in `out`: no `unique`,
/// `sparse` or TTL, no other index type in the key pattern, one wildcard
/// term, regular fields of a compound wildcard index kept out of the
/// wildcard term, and a projection only with `$**` (2 on a non-wildcard
/// index, 14 when not an object, 9 when empty or with `path.$**`).
fn wildcard_options(
    spec: &Document,
    key: &Document,
    unique: bool,
    sparse: bool,
    out: &mut Document,
) -> MongoResult<()> {
    use bisondb_query::index_keys::wildcard;
    // `{"$**": "text"}` is a text index, not a wildcard term.
    let wild: Vec<&String> = key
        .iter()
        .filter(|(k, v)| wildcard::is_wildcard_field(k) && !matches!(v, Bson::String(_)))
        .map(|(k, _)| k)
        .collect();
    let projection = spec.get("wildcardProjection");
    let Some(term) = wild.first() else {
        if projection.is_some() {
            return Err(MongoError::bad_value(
                "The field 'wildcardProjection' is only allowed in an 'wildcard' index",
            ));
        }
        return Ok(());
    };
    let refuse = |why: &str| {
        Err(MongoError::new(
            ErrorCode::CannotCreateIndex,
            why.to_string(),
        ))
    };
    if key.values().any(|v| matches!(v, Bson::String(_))) {
        return Err(spec_error(
            spec,
            "Can't use more than one index plugin for a single index.",
        ));
    }
    if unique {
        return refuse("Index type 'wildcard' does not support the unique option");
    }
    if sparse {
        return refuse("Index type 'wildcard' does not support the sparse option");
    }
    if spec.contains_key("expireAfterSeconds") {
        return refuse("Index type 'wildcard' cannot be a TTL index");
    }
    let projection = match projection {
        None => None,
        Some(Bson::Document(p)) => {
            if term.as_str() != "$**" {
                return Err(MongoError::failed_to_parse(
                    "The field 'wildcardProjection' is only allowed when 'key' is {\"$**\": ±1}",
                ));
            }
            if p.is_empty() {
                return Err(MongoError::failed_to_parse(
                    "The 'wildcardProjection' field can't be an empty object",
                ));
            }
            Some(p)
        }
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "The field 'wildcardProjection' must be a non-empty object, but got {}",
                bisondb_query::value::type_name(other)
            )))
        }
    };
    let fields: Vec<&str> = key.keys().map(String::as_str).collect();
    wildcard::check_compound(&fields, projection)?;
    if let Some(p) = projection {
        out.insert("wildcardProjection", p.clone());
    }
    Ok(())
}

/// Checks the geospatial fields of a key pattern and resolves their options
/// as mongod stores them: a 2dsphere index gets `2dsphereIndexVersion` (3 by
/// default); a 2d index keeps the `bits`, `min`, `max` it was given.
/// One geo field per index (a 2d one first), never with a hashed field.
fn geo_options(spec: &Document, key: &Document, hashed: bool) -> MongoResult<Document> {
    let kinds: Vec<(usize, &str)> = key
        .values()
        .enumerate()
        .filter_map(|(i, v)| match v {
            Bson::String(t) if t == "2d" || t == "2dsphere" => Some((i, t.as_str())),
            _ => None,
        })
        .collect();
    let mut out = Document::new();
    let Some(&(pos, kind)) = kinds.first() else {
        return Ok(out);
    };
    if hashed || kinds.iter().any(|(_, k)| *k != kind) {
        return Err(spec_error(
            spec,
            "Can't use more than one index plugin for a single index.",
        ));
    }
    if kinds.len() > 1 {
        if kind == "2d" {
            return Err(MongoError::location(16800, "can't have 2 geo fields"));
        }
        return Err(MongoError::new(
            ErrorCode::NotImplemented,
            "2dsphere indexes with more than one 2dsphere field are not supported by BisonDB yet",
        ));
    }
    let opt_num = |f: &str| -> MongoResult<Option<f64>> {
        match spec.get(f) {
            None => Ok(None),
            Some(v) => number_as_f64(v)
                .map(Some)
                .ok_or_else(|| spec_error(spec, &format!("{f} must be a number"))),
        }
    };
    if kind == "2d" {
        if pos != 0 {
            return Err(MongoError::location(16801, "2d has to be first in index"));
        }
        if let Some(b) = opt_num("bits")? {
            if !(1.0..=32.0).contains(&b) {
                return Err(MongoError::location(
                    13028,
                    "bits in geo index must be between 1 and 32",
                ));
            }
        }
        let (min, max) = (opt_num("min")?, opt_num("max")?);
        if min.unwrap_or(-180.0) >= max.unwrap_or(180.0) {
            return Err(MongoError::location(13067, "max must be greater than min"));
        }
        for f in ["bits", "min", "max"] {
            if let Some(v) = spec.get(f) {
                out.insert(f, v.clone());
            }
        }
    } else {
        let version = match opt_num("2dsphereIndexVersion")? {
            None => 3,
            Some(v) if v == 2.0 || v == 3.0 => v as i32,
            Some(v) => {
                return Err(MongoError::location(
                    16750,
                    format!("unsupported geo index version {{ 2dsphereIndexVersion : {v} }}, only support versions: [2,3]"),
                ))
            }
        };
        out.insert("2dsphereIndexVersion", version);
    }
    Ok(out)
}

/// Stands for an explicit `{locale: "simple"}` between parsing and execution.
fn simple_marker() -> Document {
    doc! {"locale": "simple"}
}

#[cfg(test)]
mod tests {
    use super::*;

    /// mongod 8 (index_key_validate.cpp, `validateIdIndexSpec`): only `key`,
    /// `name`, `v`, `ns` and `collation` are valid in an `_id` index spec.
    #[test]
    fn id_index_spec_options() {
        assert!(check_id_index_spec(&doc! {"key": {"_id": 1}, "name": "_id_", "v": 2}).is_ok());
        let e = check_id_index_spec(&doc! {"key": {"_id": 1}, "name": "_id_1", "unique": true})
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidIndexSpecificationOption);
        assert_eq!(
            e.message,
            "The field 'unique' is not valid for an _id index specification. \
             Specification: { key: { _id: 1 }, name: \"_id_1\", unique: true, v: 2 }"
        );
        let e = check_id_index_spec(&doc! {"key": {"_id": 1}, "background": true}).unwrap_err();
        assert!(e.message.starts_with("The field 'background' is not valid"));
    }

    #[test]
    fn spec_validation_table() {
        let cases: Vec<(Document, Result<Option<&str>, i32>)> = vec![
            (doc! {"key": {"a": 1}, "name": "a_1"}, Ok(Some("a_1"))),
            (doc! {"key": {"a": 1, "b": -1}}, Ok(Some("a_1_b_-1"))),
            (doc! {"key": {"_id": 1}, "name": "_id_"}, Ok(None)),
            (doc! {"key": {"a": "text"}}, Ok(Some("a_text"))),
            (doc! {"key": {"$**": "text"}}, Ok(Some("$**_text"))),
            (
                doc! {"key": {"a": 1, "b": "text", "c": "text"}, "weights": {"b": 5}},
                Ok(Some("a_1_b_text_c_text")),
            ),
            (doc! {"key": {"a": "text", "b": 1, "c": "text"}}, Err(67)),
            (
                doc! {"key": {"a": "text"}, "default_language": "xx"},
                Err(67),
            ),
            (doc! {"key": {"a": 1}, "weights": {"a": 1}}, Err(197)),
            (doc! {"key": {"a": "2dsphere"}}, Ok(Some("a_2dsphere"))),
            (doc! {"key": {"a": "2d", "b": 1}}, Ok(Some("a_2d_b_1"))),
            (doc! {"key": {"b": 1, "a": "2d"}}, Err(16801)),
            (doc! {"key": {"a": "2d"}, "bits": 33}, Err(13028)),
            (doc! {"key": {"a": "2d"}, "min": 10, "max": 9}, Err(13067)),
            (
                doc! {"key": {"a": "2dsphere"}, "2dsphereIndexVersion": 1},
                Err(16750),
            ),
            (doc! {"key": {"a": "2dsphere", "b": "2d"}}, Err(67)),
            (doc! {"key": {"a": "2dsphere", "b": "hashed"}}, Err(67)),
            (doc! {"key": {"a": "geoHaystack", "b": 1}}, Err(67)),
            (doc! {"key": {"a": "hashed"}}, Ok(Some("a_hashed"))),
            (
                doc! {"key": {"a": 1, "b": "hashed"}},
                Ok(Some("a_1_b_hashed")),
            ),
            (doc! {"key": {"a": "hashed", "b": "hashed"}}, Err(31303)),
            (doc! {"key": {"a": "hashed"}, "unique": true}, Err(16764)),
            (doc! {"key": {"$**": 1}}, Ok(Some("$**_1"))),
            (doc! {"key": {"a.$**": -1}}, Ok(Some("a.$**_-1"))),
            (
                doc! {"key": {"a": 1, "$**": 1}, "wildcardProjection": {"a": 0}},
                Ok(Some("a_1_$**_1")),
            ),
            (doc! {"key": {"a": 1, "$**": 1}}, Err(67)),
            (doc! {"key": {"a.$**": 1, "b.$**": 1}}, Err(67)),
            (doc! {"key": {"$**": 0}}, Err(67)),
            (doc! {"key": {"$**": 1}, "sparse": true}, Err(67)),
            (doc! {"key": {"$**": 1}, "unique": true}, Err(67)),
            (doc! {"key": {"$**": 1}, "expireAfterSeconds": 10}, Err(67)),
            (doc! {"key": {"$**": "hashed"}}, Err(67)),
            (doc! {"key": {"$**": "2dsphere"}}, Err(67)),
            (doc! {"key": {"$**": "2d"}}, Err(67)),
            (doc! {"key": {"a.$**": "text"}}, Err(67)),
            (doc! {"key": {"$**": "wildcard"}}, Err(67)),
            (doc! {"key": {"a.$**.$**": 1}}, Err(67)),
            (doc! {"key": {"$**.$**": 1}}, Err(67)),
            (
                doc! {"key": {"$**": 1}, "wildcardProjection": {"a": 1, "b": 0}},
                Err(31254),
            ),
            (
                doc! {"key": {"$**": 1}, "wildcardProjection": {"a": 1, "b": "s"}},
                Err(51271),
            ),
            (doc! {"key": {"$**": 1}, "wildcardProjection": {}}, Err(9)),
            (
                doc! {"key": {"a": 1}, "wildcardProjection": {"a": 1}},
                Err(2),
            ),
            (
                doc! {"key": {"$**": "text"}, "wildcardProjection": {"a": 1}},
                Err(2),
            ),
            (
                doc! {"key": {"a.$**": 1}, "wildcardProjection": "s"},
                Err(14),
            ),
            (
                doc! {"key": {"a.$**": 1}, "wildcardProjection": {"a": 1}},
                Err(9),
            ),
            (
                doc! {"key": {"$**": 1}, "wildcardProjection": {"_id": 1, "a": 0}},
                Ok(Some("$**_1")),
            ),
            (
                doc! {"key": {"a": 1}, "collation": {"locale": "fr"}},
                Ok(Some("a_1")),
            ),
            (
                doc! {"key": {"a": 1}, "collation": {"locale": "xx"}},
                Err(2),
            ),
            (doc! {"key": {"a": 1}, "collation": "fr"}, Err(14)),
            (doc! {"key": {"a": "bogus"}}, Err(67)),
            (doc! {"key": {"a": 0}}, Err(67)),
            (doc! {"key": {"a": {"x": 1}}}, Err(67)),
            (doc! {"key": {}}, Err(67)),
            (doc! {"key": {"a": 1}, "foo": 1}, Err(197)),
            (
                doc! {"key": {"a": 1, "b": 1}, "expireAfterSeconds": 5},
                Err(67),
            ),
            (doc! {"key": {"a": 1}, "expireAfterSeconds": -1}, Err(67)),
            (
                doc! {"key": {"a": 1}, "sparse": true, "partialFilterExpression": {"a": 1}},
                Err(67),
            ),
            (
                doc! {"key": {"a": 1}, "background": true, "unique": true},
                Ok(Some("a_1")),
            ),
        ];
        for (spec, want) in cases {
            let got = parse_spec(&spec)
                .map(|s| s.map(|s| s.name))
                .map_err(|e| e.code.code());
            assert_eq!(got, want.map(|o| o.map(str::to_string)), "spec {spec}");
        }
    }
}
