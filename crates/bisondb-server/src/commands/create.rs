//! `create`: an explicit collection or view creation. Options BisonDB does not
//! implement (encrypted fields) are refused by name
//! rather than stored and ignored. Clustered collections (`clusteredIndex`,
//! with a collection-level `expireAfterSeconds`) and
//! `changeStreamPreAndPostImages` are checked in `clustered.rs`. A collection's `collation` is stored
//! resolved, as its default (`crate::collation`). Capped options are checked in `capped.rs`,
//! time-series options (`timeseries`) in `namespaces/timeseries.rs`, which also creates them.
//! Validation options are checked here and kept in the catalog options, where
//! writes find them (`validation.rs`). A view (`viewOn`, `pipeline`) is a
//! catalog entry whose options hold its definition (see `namespaces/views.rs`).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct Create {
    db: String,
    coll: String,
    options: Document,
    /// `viewOn` and `pipeline` of a view.
    view: Option<(String, Vec<Document>)>,
}

/// Options mongod has that BisonDB refuses until they are built.
const UNSUPPORTED: &[&str] = &["encryptedFields"];

impl Command for Create {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        let n = req.name;
        let mut coll = None;
        let mut options = Document::new();
        let mut view_on = None;
        let mut pipeline = None;
        let mut capped = crate::namespaces::capped::CappedOptions::default();
        let mut clustered = None;
        let mut expire_after_seconds = None;
        let mut pre_and_post_images = None;
        let mut auto_index_id = true;
        // `timeseries` is the business of the time-series code: its options
        // may carry `expireAfterSeconds` (and its buckets the legacy
        // `clusteredIndex: true`), which is why the rules below ask for it.
        let timeseries = !matches!(
            req.body.get("timeseries"),
            Ok(None | Some(RawBsonRef::Null))
        );
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "create" => coll = Some(fields::collection_name(n, v)?.to_string()),
                // Stored resolved, as mongod shows it in listCollections.
                "collation" => {
                    if let Some(Some(c)) = crate::collation::parse_arg(n, v)? {
                        options.insert(k, c.spec().clone());
                    }
                }
                "viewOn" => {
                    let on = fields::as_str(n, k, v)?;
                    if on.is_empty() {
                        return Err(MongoError::bad_value("'viewOn' cannot be empty"));
                    }
                    view_on = Some(on.to_string());
                }
                "pipeline" => {
                    let mut stages = Vec::new();
                    for s in fields::as_array(n, k, v)? {
                        match s.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => stages.push(fields::to_document(d)?),
                            other => return Err(fields::wrong_type(n, k, other, "object")),
                        }
                    }
                    pipeline = Some(stages);
                }
                "validator" => {
                    let name = coll.as_deref().unwrap_or_default();
                    let rules = crate::validation::parse_validator(n, &req.db, name, v)?;
                    options.insert(k, rules);
                }
                "validationLevel" => {
                    options.insert(k, crate::validation::parse_level(n, v)?);
                }
                "validationAction" => {
                    options.insert(k, crate::validation::parse_action(n, v)?);
                }
                "capped" | "size" | "max" => capped.set(n, k, v)?,
                "storageEngine" | "indexOptionDefaults" | "idIndex" => {
                    fields::as_doc(n, k, v)?;
                }
                "autoIndexId" => auto_index_id = fields::as_bool(n, k, v)?,
                "clusteredIndex" if !matches!(v, RawBsonRef::Null) => {
                    clustered = Some(crate::namespaces::clustered::parse_arg(n, v)?);
                }
                "expireAfterSeconds" if !matches!(v, RawBsonRef::Null) => {
                    expire_after_seconds = Some(fields::as_i64(n, k, v)?);
                }
                "changeStreamPreAndPostImages" if !matches!(v, RawBsonRef::Null) => {
                    pre_and_post_images = Some(
                        crate::namespaces::clustered::parse_pre_and_post_images(n, v)?,
                    );
                }
                "timeseries" if !matches!(v, RawBsonRef::Null) => {
                    options.insert(k, crate::namespaces::timeseries::parse_create(n, v)?);
                }
                "clusteredIndex"
                | "expireAfterSeconds"
                | "changeStreamPreAndPostImages"
                | "timeseries" => {}
                _ if UNSUPPORTED.contains(&k) => {
                    let in_use = match v {
                        RawBsonRef::Boolean(b) => b,
                        RawBsonRef::Null => false,
                        _ => true,
                    };
                    if in_use {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            format!("the create option '{k}' is not supported by BisonDB yet (see docs/COMPATIBILITY.md)"),
                        ));
                    }
                    options.insert(k, fields::to_bson(v)?);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "create"))?;
        // mongod's command-level checks: a clustered collection's capped
        // options, then `expireAfterSeconds` without clustering.
        if clustered.is_some() {
            let (is_capped, size, max) = capped.given();
            crate::namespaces::clustered::check_capped(is_capped, size, max)?;
        } else {
            capped.finish(&mut options)?;
        }
        if expire_after_seconds.is_some() && clustered.is_none() && !timeseries {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "'expireAfterSeconds' is only supported on time-series collections or when the 'clusteredIndex' option is specified",
            ));
        }
        // Which options may come with `timeseries`, its field names and
        // bucketing parameters (`namespaces/timeseries.rs`).
        crate::namespaces::timeseries::check_create(&req.db, &coll, req.body, &mut options)?;
        let view = match (view_on, pipeline) {
            (Some(on), stages) => {
                if clustered.as_ref().is_some_and(|c| c.clusters()) {
                    return Err(MongoError::location(
                        6026500,
                        "The 'clusteredIndex' option is not supported with views",
                    ));
                }
                if pre_and_post_images == Some(true) {
                    return Err(MongoError::new(
                        ErrorCode::InvalidOptions,
                        "option not supported on a view: changeStreamPreAndPostImages",
                    ));
                }
                if let Some(k) = ["validator", "validationLevel", "validationAction"]
                    .into_iter()
                    .find(|k| options.contains_key(*k))
                {
                    return Err(MongoError::new(
                        ErrorCode::InvalidOptions,
                        format!("option not supported on a view: {k}"),
                    ));
                }
                let stages = stages.unwrap_or_default();
                // A view keeps its own collation (resolved), as mongod shows it.
                let collation = options.remove("collation");
                options = doc! {"viewOn": on.clone(), "pipeline": stages.clone()};
                if let Some(c) = collation {
                    options.insert("collation", c);
                }
                Some((on, stages))
            }
            (None, Some(_)) => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "'pipeline' requires 'viewOn' to also be specified",
                ))
            }
            (None, None) => {
                collection_options(
                    &req.db,
                    &mut options,
                    clustered,
                    expire_after_seconds,
                    pre_and_post_images,
                    timeseries,
                    auto_index_id,
                )?;
                if !auto_index_id {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        "autoIndexId: false is not supported",
                    ));
                }
                None
            }
        };
        Ok(Create {
            db: req.db.clone(),
            coll,
            options,
            view,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // mongod 7+: creating an existing collection with the same options is a
        // no-op, except inside a transaction, where it is always 48.
        if let Some(existing) = ctx.state.storage.collection(&self.db, &self.coll) {
            if existing.info().options == self.options && !bisondb_storage::in_transaction() {
                return reply::ok(doc! {});
            }
            return Err(exists(&self.db, &self.coll));
        }
        if self.options.contains_key("timeseries") && self.view.is_none() {
            crate::namespaces::timeseries::create(
                &ctx.state.storage,
                &self.db,
                &self.coll,
                self.options,
            )?;
            return reply::ok(doc! {});
        }
        if let Some((on, stages)) = &self.view {
            crate::namespaces::views::check_new_view(
                &ctx.state.storage,
                &self.db,
                &self.coll,
                on,
                stages,
            )?;
            crate::namespaces::views::check_view_collation(
                &ctx.state.storage,
                &self.db,
                &self.coll,
                on,
                self.options.get_document("collation").ok(),
            )?;
        }
        match ctx
            .state
            .storage
            .create_collection(&self.db, &self.coll, self.options)
        {
            Ok(_) => reply::ok(doc! {}),
            Err(bisondb_storage::StorageError::NamespaceExists(_)) => {
                Err(exists(&self.db, &self.coll))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// mongod's checks of a new collection's clustering, TTL and pre-images
/// options (after the command-level ones), storing them in `options` as
/// `listCollections` shows them.
fn collection_options(
    db: &str,
    options: &mut Document,
    clustered: Option<crate::namespaces::clustered::ClusteredArg>,
    expire_after_seconds: Option<i64>,
    pre_and_post_images: Option<bool>,
    timeseries: bool,
    auto_index_id: bool,
) -> MongoResult<()> {
    use crate::namespaces::clustered::{self, ClusteredArg};
    if pre_and_post_images == Some(true) {
        clustered::check_pre_images_db(db)?;
        options.insert(
            "changeStreamPreAndPostImages",
            clustered::pre_images_option(),
        );
    }
    let clusters = clustered.as_ref().is_some_and(ClusteredArg::clusters);
    if expire_after_seconds.is_some() && !clusters && !timeseries {
        // `clusteredIndex: false` passed the command-level check.
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "'expireAfterSeconds' can be used only for clustered collections or timeseries collections",
        ));
    }
    match clustered {
        // The time-series code decides what its collections store; the
        // legacy form is theirs (mongod requires it exactly for them).
        Some(arg) if timeseries => {
            if let ClusteredArg::Legacy(true) = arg {
                options.insert("clusteredIndex", true);
            }
        }
        Some(ClusteredArg::Legacy(true)) => {
            return Err(MongoError::location(
                5979703,
                "The 'clusteredIndex' legacy format {clusteredIndex: <bool>} is only supported for specific internal collections and vice versa",
            ))
        }
        Some(ClusteredArg::Spec(spec)) => {
            if !auto_index_id {
                return Err(MongoError::location(
                    6026501,
                    "The 'clusteredIndex' option does not support {autoIndexId: false}",
                ));
            }
            clustered::check_spec(&spec, expire_after_seconds)?;
            options.insert("clusteredIndex", spec);
        }
        Some(ClusteredArg::Legacy(false)) | None => {}
    }
    if let Some(secs) = expire_after_seconds {
        if clusters || timeseries {
            clustered::check_expire_after_seconds(secs)?;
            options.insert("expireAfterSeconds", Bson::Int64(secs));
        }
    }
    Ok(())
}

fn exists(db: &str, coll: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NamespaceExists,
        format!("Collection {db}.{coll} already exists."),
    )
}
