//! Clustered collections and `changeStreamPreAndPostImages` at the command
//! level, as a standalone mongod 8.0 has them.
//!
//! Every BisonDB collection already stores its documents clustered by `_id`
//! (`bisondb_storage::store`), so a clustered collection differs from an
//! ordinary one only in its catalog options and in what commands show and
//! allow: `create` takes `clusteredIndex: {key: {_id: 1}, unique: true,
//! name?, v?}` and stores it normalized (`{v: 2, key, name, unique: true}`,
//! the name defaulting to `_id_`, as `listCollections` shows it);
//! `listIndexes` lists that index (with `clustered: true`) in place of `_id_`;
//! `dropIndexes` refuses it (5979800); `createIndexes` of its key is a no-op.
//! A clustered collection with `expireAfterSeconds` (stored beside
//! `clusteredIndex`, changed by `collMod`) is a TTL collection on `_id`: the
//! TTL monitor (`ttl.rs`) deletes documents whose `_id` is an older date.
//!
//! `changeStreamPreAndPostImages: {enabled}` is validated, stored when enabled
//! and shown by `listCollections`; a standalone server has no change streams,
//! so that is the whole feature there, as on a standalone mongod.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::compare::number_as_f64;
use bson::{doc, Bson, Document, RawBsonRef};

use crate::fields;

/// The clustered index's name when `create` gives none.
pub const DEFAULT_NAME: &str = "_id_";

/// The `clusteredIndex` option of `create` as sent.
#[derive(Debug, Clone, PartialEq)]
pub enum ClusteredArg {
    /// `clusteredIndex: <bool>`, the legacy form mongod keeps for the
    /// buckets of time-series collections.
    Legacy(bool),
    /// `clusteredIndex: {...}`, normalized to `{v, key, name, unique}` (not
    /// yet checked against mongod's rules: see [`check_spec`]).
    Spec(Document),
}

impl ClusteredArg {
    /// Whether the collection will be clustered (`clusteredIndex: false` is
    /// not, though mongod's command-level checks still see the option).
    pub fn clusters(&self) -> bool {
        !matches!(self, ClusteredArg::Legacy(false))
    }
}

/// Parses `create`'s `clusteredIndex` as mongod's IDL does: a bool or a
/// strict `{v, key, name, unique}` struct with `key` and `unique` required.
pub fn parse_arg(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<ClusteredArg> {
    let d = match v {
        RawBsonRef::Boolean(b) => return Ok(ClusteredArg::Legacy(b)),
        RawBsonRef::Document(d) => d,
        other => {
            return Err(fields::wrong_type(
                cmd,
                "clusteredIndex",
                other,
                "[bool, object]",
            ))
        }
    };
    let ctx = format!("{cmd}.clusteredIndex");
    let (mut version, mut key, mut name, mut unique) = (2i64, None, None, None);
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "v" => version = fields::as_i64(&ctx, "v", v)?,
            "key" => key = Some(fields::to_document(fields::as_doc(&ctx, "key", v)?)?),
            "name" => name = Some(fields::as_str(&ctx, "name", v)?.to_string()),
            "unique" => unique = Some(fields::as_bool(&ctx, "unique", v)?),
            other => return Err(fields::unknown_field(&ctx, other)),
        }
    }
    let key = key.ok_or_else(|| fields::missing_field(&ctx, "key"))?;
    let unique = unique.ok_or_else(|| fields::missing_field(&ctx, "unique"))?;
    let name = name.unwrap_or_else(|| DEFAULT_NAME.to_string());
    let v = i32::try_from(version)
        .map(Bson::Int32)
        .unwrap_or(Bson::Int64(version));
    Ok(ClusteredArg::Spec(
        doc! {"v": v, "key": key, "name": name, "unique": unique},
    ))
}

/// mongod's checks of a clustered index specification, in its order:
/// `unique: true` (5979700), the key `{_id: 1}` (197), the collection's
/// `expireAfterSeconds` (72), then `v: 2` (5979704).
pub fn check_spec(spec: &Document, expire_after_seconds: Option<i64>) -> MongoResult<()> {
    if spec.get_bool("unique").ok() != Some(true) {
        return Err(MongoError::location(
            5979700,
            "The clusteredIndex option requires unique: true to be specified",
        ));
    }
    if !spec.get_document("key").is_ok_and(is_id_ascending) {
        return Err(MongoError::new(
            ErrorCode::InvalidIndexSpecificationOption,
            "The clusteredIndex option is only supported for key: {_id: 1}",
        ));
    }
    if let Some(secs) = expire_after_seconds {
        check_expire_after_seconds(secs)?;
    }
    let v = match spec.get("v") {
        Some(Bson::Int32(v)) => i64::from(*v),
        Some(Bson::Int64(v)) => *v,
        _ => 2,
    };
    if v != 2 {
        return Err(MongoError::location(
            5979704,
            format!(
                "Invalid clusteredIndex specification {}; cannot create a clusteredIndex with v={v}",
                bisondb_storage::error::shell_format_document(spec)
            ),
        ));
    }
    Ok(())
}

/// `{_id: 1}` exactly (any numeric 1: mongod compares the values as numbers).
fn is_id_ascending(key: &Document) -> bool {
    key.len() == 1 && key.get("_id").and_then(number_as_f64) == Some(1.0)
}

/// mongod's rules between `clusteredIndex` and the capped options: `size`
/// (6049200) and `max` (6049204) are refused, and a capped clustered
/// collection exists only with `enableTestCommands` (6127800), which a
/// production server (and BisonDB) does not have. mongod applies them
/// whenever the option is present, `clusteredIndex: false` included.
pub fn check_capped(capped: bool, size: bool, max: bool) -> MongoResult<()> {
    if size {
        return Err(MongoError::location(
            6049200,
            "'size' field for capped collections is not allowed on clustered collections. Did you mean 'capped: true' with 'expireAfterSeconds'?",
        ));
    }
    if max {
        return Err(MongoError::location(
            6049204,
            "'max' field for capped collections is not allowed on clustered collections. Did you mean 'capped: true' with 'expireAfterSeconds'?",
        ));
    }
    if capped {
        return Err(MongoError::location(
            6127800,
            "Clustered capped collection only available with 'enableTestCommands' server parameter",
        ));
    }
    Ok(())
}

/// A collection-level `expireAfterSeconds` of `create` or `collMod`: a whole
/// number of seconds, not negative, and (as mongod requires of a clustered
/// TTL) no longer than the time since the epoch.
pub fn check_expire_after_seconds(secs: i64) -> MongoResult<()> {
    if secs < 0 {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option cannot be less than 0",
        ));
    }
    let now_ms = bson::DateTime::now().timestamp_millis();
    if secs.checked_mul(1000).is_none_or(|ms| ms > now_ms) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
        ));
    }
    Ok(())
}

/// What `createIndexes` does with one specification on a collection that
/// may be clustered, as mongod decides it: `Ok(true)` when the index already
/// exists as the clustered index (a no-op, whatever name it was given),
/// `Ok(false)` for an ordinary index; a `clustered: true` specification must
/// name the clustered index of an existing clustered collection.
pub fn check_index_spec(
    spec: &Document,
    collection: Option<Option<&Clustered>>,
) -> MongoResult<bool> {
    let key = spec.get_document("key").ok();
    let wants_clustered = spec.contains_key("clustered");
    let Some(clustered) = collection else {
        if wants_clustered {
            return Err(MongoError::location(
                6100900,
                "Cannot implicitly create a new collection with createIndex 'clustered' option",
            ));
        }
        return Ok(false);
    };
    let keys_match = clustered.is_some() && key.is_some_and(Clustered::matches_key);
    if wants_clustered && !keys_match {
        return Err(MongoError::location(
            6243700,
            "Cannot create index with option 'clustered' that does not match an existing clustered index",
        ));
    }
    let Some(c) = clustered else {
        return Ok(false);
    };
    let names_match = spec.get_str("name").ok() == Some(c.name());
    if !keys_match && names_match {
        return Err(MongoError::location(
            6100906,
            format!(
                "Cannot create an index where the name matches the clusteredIndex but the key does not - indexSpec: {}, clusteredIndex: {}",
                bisondb_storage::error::shell_format_document(spec),
                bisondb_storage::error::shell_format_document(&c.spec)
            ),
        ));
    }
    if !keys_match {
        return Ok(false);
    }
    if spec
        .get("v")
        .and_then(number_as_f64)
        .is_some_and(|v| v != 2.0)
    {
        return Err(MongoError::location(
            6100908,
            "Cannot create an index with the same key pattern as the collection's clusteredIndex but a different 'v' field",
        ));
    }
    if matches!(spec.get("unique"), Some(Bson::Boolean(false))) {
        return Err(MongoError::location(
            6100909,
            "Cannot create an index with the same key pattern as the collection's clusteredIndex but a different 'unique' field",
        ));
    }
    Ok(true)
}

/// The clustered index a collection's stored options describe, if any.
#[derive(Debug, Clone, PartialEq)]
pub struct Clustered {
    /// `{v, key, name, unique}` as `listCollections` shows it.
    pub spec: Document,
}

impl Clustered {
    /// From a collection's catalog options (`clusteredIndex: {...}`, or the
    /// legacy `clusteredIndex: true`, which clusters on `_id` as `_id_`).
    pub fn of_options(options: &Document) -> Option<Clustered> {
        match options.get("clusteredIndex") {
            Some(Bson::Document(d)) => Some(Clustered { spec: d.clone() }),
            Some(Bson::Boolean(true)) => Some(Clustered {
                spec: doc! {"v": 2, "key": {"_id": 1}, "name": DEFAULT_NAME, "unique": true},
            }),
            _ => None,
        }
    }

    pub fn name(&self) -> &str {
        self.spec.get_str("name").unwrap_or(DEFAULT_NAME)
    }

    /// Whether an index key pattern names the cluster key, as mongod decides
    /// it: one numeric field, `_id` (so `{_id: -1}` does too).
    pub fn matches_key(key: &Document) -> bool {
        key.len() == 1 && key.get("_id").and_then(number_as_f64).is_some()
    }

    /// The clustered index as `listIndexes` shows it: the specification, the
    /// collection's default collation and TTL when it has them, then
    /// `clustered: true`.
    pub fn list_indexes_entry(&self, options: &Document) -> Document {
        let mut d = self.spec.clone();
        if let Ok(c) = options.get_document("collation") {
            d.insert("collation", c.clone());
        }
        if let Some(secs) = options.get("expireAfterSeconds").and_then(|v| match v {
            Bson::Int32(i) => Some(i64::from(*i)),
            Bson::Int64(i) => Some(*i),
            _ => None,
        }) {
            d.insert("expireAfterSeconds", secs);
        }
        d.insert("clustered", true);
        d
    }
}

/// The TTL of a clustered collection, from its options: `Some(seconds)` when
/// it is clustered and has a collection-level `expireAfterSeconds`.
pub fn ttl_of(options: &Document) -> Option<i64> {
    Clustered::of_options(options)?;
    match options.get("expireAfterSeconds")? {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        _ => None,
    }
}

/// mongod's refusal to drop the clustered index (by name or key).
pub fn cannot_drop() -> MongoError {
    MongoError::location(5979800, "It is illegal to drop the clusteredIndex")
}

/// Parses `changeStreamPreAndPostImages: {enabled: <bool>}` (a strict IDL
/// struct: `enabled` required and a bool) of `cmd` and returns `enabled`.
pub fn parse_pre_and_post_images(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<bool> {
    const FIELD: &str = "changeStreamPreAndPostImages";
    let d = fields::as_doc(cmd, FIELD, v)?;
    let ctx = format!("{cmd}.{FIELD}");
    let mut enabled = None;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match (k.as_str(), v) {
            ("enabled", RawBsonRef::Boolean(b)) => enabled = Some(b),
            ("enabled", other) => return Err(fields::wrong_type(&ctx, "enabled", other, "bool")),
            (other, _) => return Err(fields::unknown_field(&ctx, other)),
        }
    }
    enabled.ok_or_else(|| fields::missing_field(&ctx, "enabled"))
}

/// mongod refuses enabled pre- and post-images in the `admin`, `local` and
/// `config` databases.
pub fn check_pre_images_db(db: &str) -> MongoResult<()> {
    if matches!(db, "admin" | "local" | "config") {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("changeStreamPreAndPostImages collection option is not supported on the {db} database"),
        ));
    }
    Ok(())
}

/// The options value stored for enabled pre- and post-images (a disabled
/// one is not stored, and `listCollections` does not show it, as in mongod).
pub fn pre_images_option() -> Bson {
    Bson::Document(doc! {"enabled": true})
}

#[cfg(test)]
mod tests;
