//! `collMod`: changes a collection's validation options (`validator`,
//! `validationLevel`, `validationAction`), one index's `hidden`,
//! `expireAfterSeconds`, `prepareUnique`, `unique` or `forceNonUnique`, or a
//! view's `viewOn`/`pipeline`, as mongod 8.0 does.
//!
//! Options are replaced in the catalog in one step (persisted before writers
//! see them); `hidden` and `expireAfterSeconds` are edited in the index's
//! definition in place (its entries do not depend on them); `unique` and
//! `forceNonUnique` rebuild the index (the key format differs). The reply names
//! what changed on an index (`expireAfterSeconds_old/_new`, `hidden_old/_new`,
//! `unique_new`, `prepareUnique_old/_new`, `forceNonUnique_new`). Capped-size
//! changes fail with 238 NotImplemented naming the option; a time-series
//! collection's `timeseries` (granularity, bucketing) is checked and applied
//! in `namespaces/timeseries.rs`.
//! A clustered collection's collection-level `expireAfterSeconds` (a number,
//! or `"off"`) and any collection's `changeStreamPreAndPostImages` are
//! options like the validation ones (`clustered.rs`); their reply is `{ok: 1}`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::IndexSpec;
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;
use crate::validation;

const CMD: &str = "collMod";

/// The `index` field: which index (by `name` or `keyPattern`) and what to change.
#[derive(Debug, Default)]
struct IndexMod {
    name: Option<String>,
    key_pattern: Option<Document>,
    expire_after_seconds: Option<i64>,
    hidden: Option<bool>,
    unique: Option<bool>,
    prepare_unique: Option<bool>,
    force_non_unique: Option<bool>,
}

pub struct CollMod {
    db: String,
    coll: String,
    index: Option<IndexMod>,
    /// The validator as sent; checked against the namespace when executed.
    validator: Option<RawDocumentBuf>,
    level: Option<String>,
    action: Option<String>,
    view_on: Option<String>,
    pipeline: Option<Vec<Document>>,
    /// Options BisonDB does not build yet, in the order given.
    not_built: Vec<&'static str>,
    /// `changeStreamPreAndPostImages.enabled`.
    pre_images: Option<bool>,
    /// A collection-level TTL: `Some(None)` for `"off"`.
    expire_after_seconds: Option<Option<i64>>,
    /// Options only a time-series or capped collection has.
    other_kind: Vec<&'static str>,
    /// A time-series collection's new `timeseries` (`namespaces/timeseries.rs`).
    timeseries: Option<Document>,
    dry_run: bool,
}

fn parse_index(v: RawBsonRef<'_>) -> MongoResult<IndexMod> {
    let d = fields::as_doc(CMD, "index", v)?;
    let mut m = IndexMod::default();
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "name" => m.name = Some(fields::as_str(CMD, "index.name", v)?.to_string()),
            "keyPattern" => {
                m.key_pattern = Some(fields::to_document(fields::as_doc(
                    CMD,
                    "index.keyPattern",
                    v,
                )?)?)
            }
            "expireAfterSeconds" => {
                m.expire_after_seconds = Some(fields::as_i64(CMD, "index.expireAfterSeconds", v)?)
            }
            "hidden" => m.hidden = Some(fields::as_bool(CMD, "index.hidden", v)?),
            "unique" => m.unique = Some(fields::as_bool(CMD, "index.unique", v)?),
            "prepareUnique" => {
                m.prepare_unique = Some(fields::as_bool(CMD, "index.prepareUnique", v)?)
            }
            "forceNonUnique" => {
                m.force_non_unique = Some(fields::as_bool(CMD, "index.forceNonUnique", v)?)
            }
            other => return Err(fields::unknown_field("collMod.index", other)),
        }
    }
    match (&m.name, &m.key_pattern) {
        (Some(_), Some(_)) => {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Cannot specify both key pattern and name.",
            ))
        }
        (None, None) => {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Must specify either index name or key pattern.",
            ))
        }
        _ => {}
    }
    if m.expire_after_seconds.is_none()
        && m.hidden.is_none()
        && m.unique.is_none()
        && m.prepare_unique.is_none()
        && m.force_non_unique.is_none()
    {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "no expireAfterSeconds, hidden, unique, or prepareUnique field",
        ));
    }
    if m.unique.is_some() && m.force_non_unique.is_some() {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "collMod does not support 'unique' and 'forceNonUnique' options at the same time",
        ));
    }
    if let Some(s) = m.expire_after_seconds {
        if !(0..=i64::from(i32::MAX)).contains(&s) {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "TTL index 'expireAfterSeconds' option must be within an acceptable range, try a lower number",
            ));
        }
    }
    Ok(m)
}

impl Command for CollMod {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        crate::fields::write::write_concern(req.name, req.body)?;
        let mut c = CollMod {
            db: req.db.clone(),
            coll: String::new(),
            index: None,
            validator: None,
            level: None,
            action: None,
            view_on: None,
            pipeline: None,
            not_built: Vec::new(),
            pre_images: None,
            expire_after_seconds: None,
            other_kind: Vec::new(),
            timeseries: None,
            dry_run: false,
        };
        let mut have_coll = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "collMod" => {
                    c.coll = fields::collection_name(CMD, v)?.to_string();
                    have_coll = true;
                }
                "index" => c.index = Some(parse_index(v)?),
                "validator" => {
                    c.validator = Some(fields::as_doc(CMD, "validator", v)?.to_owned());
                }
                "validationLevel" => c.level = Some(validation::parse_level(CMD, v)?),
                "validationAction" => c.action = Some(validation::parse_action(CMD, v)?),
                "viewOn" => {
                    let on = fields::as_str(CMD, "viewOn", v)?;
                    if on.is_empty() {
                        return Err(MongoError::bad_value("'viewOn' cannot be empty"));
                    }
                    c.view_on = Some(on.to_string());
                }
                "pipeline" => {
                    let mut stages = Vec::new();
                    for s in fields::as_array(CMD, "pipeline", v)? {
                        match s.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => stages.push(fields::to_document(d)?),
                            other => {
                                return Err(fields::wrong_type(CMD, "pipeline", other, "object"))
                            }
                        }
                    }
                    c.pipeline = Some(stages);
                }
                "dryRun" => c.dry_run = fields::as_bool(CMD, "dryRun", v)?,
                "changeStreamPreAndPostImages" => {
                    c.pre_images = Some(crate::namespaces::clustered::parse_pre_and_post_images(
                        CMD, v,
                    )?);
                }
                "expireAfterSeconds" => {
                    c.expire_after_seconds = Some(match v {
                        RawBsonRef::String("off") => None,
                        RawBsonRef::String(s) => {
                            return Err(MongoError::new(
                                ErrorCode::InvalidOptions,
                                format!("Invalid string value for the 'clusteredIndex::expireAfterSeconds' option. Got: '{s}'. Accepted value is 'off'"),
                            ))
                        }
                        RawBsonRef::Int32(_)
                        | RawBsonRef::Int64(_)
                        | RawBsonRef::Double(_)
                        | RawBsonRef::Decimal128(_) => {
                            Some(fields::as_i64(CMD, "expireAfterSeconds", v)?)
                        }
                        other => {
                            return Err(fields::wrong_type(
                                CMD,
                                "expireAfterSeconds",
                                other,
                                "[string, long, int, decimal, double]",
                            ))
                        }
                    });
                }
                "timeseries" => {
                    let t = fields::as_doc(CMD, "timeseries", v)?;
                    c.timeseries = Some(fields::to_document(t)?);
                }
                "cappedSize" => c.other_kind.push("cappedSize"),
                "cappedMax" => c.other_kind.push("cappedMax"),
                // Accepted as mongod's IDL accepts them; BisonDB has no use for them.
                "collectionUUID" | "isTimeseriesNamespace" => {}
                other => fields::check_known(CMD, other, &[])?,
            }
        }
        if !have_coll {
            return Err(fields::missing_field(CMD, "collMod"));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let storage = &ctx.state.storage;
        let Some(coll) = storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                "ns does not exist",
            ));
        };
        let old_options = coll.options();
        let is_view = old_options.contains_key("viewOn");
        let on_view = |field: &str| {
            MongoError::new(
                ErrorCode::InvalidOptions,
                format!("option not supported on a view: {field}"),
            )
        };
        let only_view = |field: &str| {
            MongoError::new(
                ErrorCode::InvalidOptions,
                format!("option only supported on a view: {field}"),
            )
        };
        if let Some(&field) = self.other_kind.first() {
            let message = match field {
                "cappedSize" | "cappedMax" if is_view || !old_options.contains_key("capped") => {
                    "Collection must be capped.".to_string()
                }
                "cappedSize" | "cappedMax" => {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        format!("collMod '{field}' is not supported by BisonDB yet (see docs/COMPATIBILITY.md)"),
                    ))
                }
                _ => format!("option only supported on a time-series collection: {field}"),
            };
            return Err(MongoError::new(ErrorCode::InvalidOptions, message));
        }
        let mut options = old_options.as_ref().clone();
        let mut index_change = None;
        if let Some(ix) = &self.index {
            if is_view {
                return Err(on_view("index"));
            }
            index_change = self.plan_index(&coll, ix)?;
        }
        if let Some(v) = &self.validator {
            if is_view {
                return Err(on_view("validator"));
            }
            let rules =
                validation::parse_validator(CMD, &self.db, &self.coll, RawBsonRef::Document(v))?;
            options.insert("validator", rules);
        }
        if let Some(level) = &self.level {
            if is_view {
                return Err(on_view("validationLevel"));
            }
            options.insert("validationLevel", level.clone());
        }
        if let Some(action) = &self.action {
            if is_view {
                return Err(on_view("validationAction"));
            }
            options.insert("validationAction", action.clone());
        }
        if let Some(p) = &self.pipeline {
            if !is_view {
                return Err(only_view("pipeline"));
            }
            options.insert("pipeline", p.clone());
        }
        if let Some(on) = &self.view_on {
            if !is_view {
                return Err(only_view("viewOn"));
            }
            options.insert("viewOn", on.clone());
        }
        if is_view && (self.view_on.is_some() || self.pipeline.is_some()) {
            if let Some(def) = crate::namespaces::views::view_of_options(&options) {
                crate::namespaces::views::check_new_view(
                    storage,
                    &self.db,
                    &self.coll,
                    &def.view_on,
                    &def.pipeline,
                )?;
            }
        }
        if let Some(enabled) = self.pre_images {
            let field = "changeStreamPreAndPostImages";
            if is_view {
                return Err(on_view(field));
            }
            if enabled {
                crate::namespaces::clustered::check_pre_images_db(&self.db)?;
                options.insert(field, crate::namespaces::clustered::pre_images_option());
            } else {
                options.remove(field);
            }
        }
        if let Some(secs) = self.expire_after_seconds {
            let field = "expireAfterSeconds";
            if is_view {
                return Err(on_view(field));
            }
            // A time-series collection's TTL is one too (its buckets are
            // clustered in mongod); the time-series code keeps it there.
            if crate::namespaces::clustered::Clustered::of_options(&options).is_none()
                && !options.contains_key("timeseries")
            {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "'expireAfterSeconds' option is only supported on collections clustered by _id",
                ));
            }
            match secs {
                Some(secs) => {
                    crate::namespaces::clustered::check_expire_after_seconds(secs)?;
                    options.insert(field, Bson::Int64(secs));
                }
                None => {
                    options.remove(field);
                }
            }
        }
        if let Some(t) = &self.timeseries {
            options = crate::namespaces::timeseries::coll_mod(&self.coll, &options, Some(t))?;
        }
        if let Some(&field) = self.not_built.first() {
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!(
                    "collMod '{field}' is not supported by BisonDB yet (see docs/COMPATIBILITY.md)"
                ),
            ));
        }
        if self.dry_run {
            return reply::ok(doc! {});
        }
        // mongod records every collMod that is not a dry run, even one that
        // changes nothing (a change stream with `showExpandedEvents` reports
        // it as a `modify` event); an index change records its own entry.
        if options != *old_options || index_change.is_none() {
            storage
                .set_collection_options(&self.db, &self.coll, options)
                .map_err(MongoError::from)?;
        }
        let mut r = Document::new();
        if let Some(change) = index_change {
            change.apply(storage, &self.db, &self.coll, &mut r)?;
        }
        reply::ok(r)
    }
}

/// What `collMod` will do to one index.
struct IndexChange {
    name: String,
    old: IndexSpec,
    expire_after_seconds: Option<i64>,
    /// A new `hidden` value (a no-op change is dropped, as mongod drops it).
    hidden: Option<bool>,
    /// The current `prepareUnique` and a new value, when it changes.
    prepare_unique: (bool, Option<bool>),
    /// Rebuild as unique (`unique: true`)...
    make_unique: bool,
    /// ...or as non-unique (`forceNonUnique: true`).
    make_non_unique: bool,
}

impl CollMod {
    /// Finds the index `ix` names and checks the change is allowed.
    fn plan_index(
        &self,
        coll: &bisondb_storage::Collection,
        ix: &IndexMod,
    ) -> MongoResult<Option<IndexChange>> {
        let ns = format!("{}.{}", self.db, self.coll);
        // A clustered collection's clustered index is the collection itself,
        // not one of its indexes: it cannot be hidden, nor found to change.
        if let Some(c) = crate::namespaces::clustered::Clustered::of_options(&coll.options()) {
            let targets_it = match (&ix.name, &ix.key_pattern) {
                (Some(n), _) => n == c.name(),
                (None, Some(k)) => c.spec.get_document("key").is_ok_and(|ck| same_key(ck, k)),
                _ => false,
            };
            if targets_it && ix.hidden.is_some() {
                return Err(MongoError::location(
                    6011800,
                    "The 'hidden' option is not supported for a clusteredIndex",
                ));
            }
            let wanted = match (&ix.name, &ix.key_pattern) {
                (Some(n), _) => Some(n.clone()),
                (None, Some(k)) => Some(k.to_string()),
                _ => None,
            };
            let is_secondary = coll
                .indexes()
                .iter()
                .any(|i| match (&ix.name, &ix.key_pattern) {
                    (Some(n), _) => &i.spec.name == n,
                    (None, Some(k)) => same_key(&i.spec.key, k),
                    _ => false,
                });
            if let (false, Some(wanted)) = (is_secondary, wanted) {
                return Err(MongoError::new(
                    ErrorCode::IndexNotFound,
                    format!("cannot find index {wanted} for ns {ns}"),
                ));
            }
        }
        let is_id = match (&ix.name, &ix.key_pattern) {
            (Some(n), _) => n == "_id_",
            (None, Some(k)) => k.len() == 1 && k.keys().next().is_some_and(|f| f == "_id"),
            _ => false,
        };
        if ix.unique == Some(false) {
            return Err(MongoError::bad_value("Cannot make index non-unique"));
        }
        if ix.force_non_unique == Some(false) {
            return Err(MongoError::bad_value(
                "'forceNonUnique: false' is not supported",
            ));
        }
        if is_id {
            // The _id index is implicit (documents are clustered by _id).
            if ix.expire_after_seconds.is_some() {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "the _id field does not support TTL indexes",
                ));
            }
            if ix.hidden.is_some() {
                return Err(MongoError::bad_value("can't hide _id index"));
            }
            if ix.force_non_unique.is_some() {
                return Err(MongoError::bad_value(
                    "the _id index cannot be made non-unique",
                ));
            }
            // `unique` and `prepareUnique` on an index that is unique change nothing.
            return Ok(None);
        }
        let indexes = coll.indexes();
        let found: Vec<&bisondb_storage::IndexInfo> = match (&ix.name, &ix.key_pattern) {
            (Some(n), _) => indexes.iter().filter(|i| &i.spec.name == n).collect(),
            (None, Some(k)) => indexes
                .iter()
                .filter(|i| same_key(&i.spec.key, k))
                .collect(),
            _ => Vec::new(),
        };
        let (spec, prepared) = match found.as_slice() {
            [one] => (one.spec.clone(), one.prepare_unique),
            [] => {
                let wanted = match (&ix.name, &ix.key_pattern) {
                    (Some(n), _) => n.clone(),
                    (None, Some(k)) => k.to_string(),
                    _ => String::new(),
                };
                return Err(MongoError::new(
                    ErrorCode::IndexNotFound,
                    format!("cannot find index {wanted} for ns {ns}"),
                ));
            }
            [a, b, ..] => {
                return Err(MongoError::new(
                    ErrorCode::AmbiguousIndexKeyPattern,
                    format!(
                        "index keyPattern {} matches {} indexes, must use index name. Conflicting indexes:{}, {}",
                        ix.key_pattern.clone().unwrap_or_default(),
                        found.len(),
                        a.spec.to_document(),
                        b.spec.to_document()
                    ),
                ))
            }
        };
        if ix.expire_after_seconds.is_some()
            && spec.expire_after_seconds.is_none()
            && spec.key.len() != 1
        {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "TTL indexes are single-field indexes, compound indexes do not support TTL",
            ));
        }
        if ix.hidden.is_some() && self.coll.starts_with("system.") {
            return Err(MongoError::bad_value(
                "Can't hide index on system collection",
            ));
        }
        // A hashed index is never unique (hashes may collide), so it is never
        // prepared for it either; the same refusal as createIndexes'.
        if spec.hashed_field().is_some()
            && (ix.unique == Some(true) || ix.prepare_unique == Some(true))
        {
            return Err(MongoError::new(
                ErrorCode::Other(16764),
                "Currently hashed indexes cannot guarantee uniqueness. Use a regular index.",
            ));
        }
        // Converting needs the preparation first; a unique index is already there.
        let make_unique = ix.unique == Some(true) && !spec.unique;
        if make_unique && !prepared {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "Cannot make index unique with 'prepareUnique=false'. Run collMod to set it first.",
            ));
        }
        Ok(Some(IndexChange {
            name: spec.name.clone(),
            hidden: ix.hidden.filter(|h| *h != spec.hidden),
            expire_after_seconds: ix.expire_after_seconds,
            prepare_unique: (
                prepared,
                ix.prepare_unique.filter(|p| *p != prepared && !spec.unique),
            ),
            make_unique,
            make_non_unique: ix.force_non_unique == Some(true) && spec.unique,
            old: spec,
        }))
    }
}

impl IndexChange {
    /// Edits the index and adds mongod's reply fields to `r`.
    fn apply(
        self,
        storage: &bisondb_storage::Storage,
        db: &str,
        coll: &str,
        r: &mut Document,
    ) -> MongoResult<()> {
        let (expire, hidden) = (self.expire_after_seconds, self.hidden);
        let changes_spec =
            hidden.is_some() || expire.is_some_and(|e| self.old.expire_after_seconds != Some(e));
        if changes_spec {
            let edited = storage.modify_index(db, coll, &self.name, &|s: &mut IndexSpec| {
                if let Some(e) = expire {
                    s.expire_after_seconds = Some(e);
                }
                if let Some(h) = hidden {
                    s.hidden = h;
                }
            })?;
            if edited.is_none() {
                // Dropped between the lookup and the edit.
                return Err(MongoError::new(
                    ErrorCode::IndexNotFound,
                    format!("cannot find index {} for ns {db}.{coll}", self.name),
                ));
            }
        }
        if let Some(e) = expire {
            if let Some(old) = self.old.expire_after_seconds {
                r.insert("expireAfterSeconds_old", Bson::Int64(old));
            }
            r.insert("expireAfterSeconds_new", Bson::Int64(e));
        }
        if let Some(h) = hidden {
            r.insert("hidden_old", self.old.hidden);
            r.insert("hidden_new", h);
        }
        if self.make_unique {
            convert(storage, db, coll, &self.name, true)?;
            r.insert("unique_new", true);
        }
        if let (old, Some(new)) = self.prepare_unique {
            storage
                .set_index_prepare_unique(db, coll, &self.name, new)
                .map_err(MongoError::from)?;
            r.insert("prepareUnique_old", old);
            r.insert("prepareUnique_new", new);
        }
        if self.make_non_unique {
            convert(storage, db, coll, &self.name, false)?;
            r.insert("forceNonUnique_new", true);
        }
        Ok(())
    }
}

/// Rebuilds index `name` as unique or not; documents sharing a key make the
/// conversion to unique fail with 359 and their `_id`s (`violations`).
fn convert(
    storage: &bisondb_storage::Storage,
    db: &str,
    coll: &str,
    name: &str,
    unique: bool,
) -> MongoResult<()> {
    match storage.convert_index(db, coll, name, unique)? {
        Ok(true) => Ok(()),
        Ok(false) => Err(MongoError::new(
            ErrorCode::IndexNotFound,
            format!("cannot find index {name} for ns {db}.{coll}"),
        )),
        Err(groups) => {
            let violations: Vec<Bson> = groups
                .into_iter()
                .map(|ids| Bson::Document(doc! {"ids": ids}))
                .collect();
            let e = MongoError::new(
                ErrorCode::CannotConvertIndexToUnique,
                "Cannot convert the index to unique. Please resolve conflicting documents before running collMod again.",
            );
            Err(match reply::to_raw(&doc! {"violations": violations}) {
                Ok(raw) => e.with_details(raw.into_bytes()),
                Err(_) => e,
            })
        }
    }
}

/// Whether two key patterns name the same fields in the same order and
/// directions (`{a: 1}` and `{a: 1.0}` are the same index).
fn same_key(a: &Document, b: &Document) -> bool {
    fn direction(v: &Bson) -> Option<i8> {
        let x = match v {
            Bson::Int32(i) => f64::from(*i),
            Bson::Int64(i) => *i as f64,
            Bson::Double(d) => *d,
            _ => return None,
        };
        Some(if x < 0.0 { -1 } else { 1 })
    }
    a.len() == b.len()
        && a.iter().zip(b.iter()).all(|((ka, va), (kb, vb))| {
            ka == kb
                && match (direction(va), direction(vb)) {
                    (Some(x), Some(y)) => x == y,
                    _ => va == vb,
                }
        })
}

#[cfg(test)]
mod tests;
