//! `create`: an explicit collection or view creation. Options BisonDB does not
//! implement (time series, clustered) are refused by name
//! rather than stored and ignored. A collection's `collation` is stored
//! resolved, as its default (`crate::collation`). Capped options are checked in `capped.rs`.
//! Validation options are checked here and kept in the catalog options, where
//! writes find them (`validation.rs`). A view (`viewOn`, `pipeline`) is a
//! catalog entry whose options hold its definition (see `views.rs`).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::args;
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
const UNSUPPORTED: &[&str] = &[
    "changeStreamPreAndPostImages",
    "clusteredIndex",
    "encryptedFields",
    "expireAfterSeconds",
    "timeseries",
];

impl Command for Create {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        super::util::write_concern(req.name, req.body)?;
        let n = req.name;
        let mut coll = None;
        let mut options = Document::new();
        let mut view_on = None;
        let mut pipeline = None;
        let mut capped = super::capped::CappedOptions::default();
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "create" => coll = Some(args::collection_name(n, v)?.to_string()),
                // Stored resolved, as mongod shows it in listCollections.
                "collation" => {
                    if let Some(Some(c)) = crate::collation::parse_arg(n, v)? {
                        options.insert(k, c.spec().clone());
                    }
                }
                "viewOn" => {
                    let on = args::as_str(n, k, v)?;
                    if on.is_empty() {
                        return Err(MongoError::bad_value("'viewOn' cannot be empty"));
                    }
                    view_on = Some(on.to_string());
                }
                "pipeline" => {
                    let mut stages = Vec::new();
                    for s in args::as_array(n, k, v)? {
                        match s.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => stages.push(args::to_document(d)?),
                            other => return Err(args::wrong_type(n, k, other, "object")),
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
                    args::as_doc(n, k, v)?;
                }
                "autoIndexId" => {
                    if !args::as_bool(n, k, v)? {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            "autoIndexId: false is not supported",
                        ));
                    }
                }
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
                    options.insert(k, args::to_bson(v)?);
                }
                other => args::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| args::missing_field(n, "create"))?;
        capped.finish(&mut options)?;
        let view = match (view_on, pipeline) {
            (Some(on), stages) => {
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
            (None, None) => None,
        };
        Ok(Create {
            db: req.db.clone(),
            coll,
            options,
            view,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // mongod 7+: creating an existing collection with the same options is a no-op.
        if let Some(existing) = ctx.state.storage.collection(&self.db, &self.coll) {
            if existing.info().options == self.options {
                return reply::ok(doc! {});
            }
            return Err(exists(&self.db, &self.coll));
        }
        if let Some((on, stages)) = &self.view {
            super::views::check_new_view(&ctx.state.storage, &self.db, &self.coll, on, stages)?;
            super::views::check_view_collation(
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

fn exists(db: &str, coll: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NamespaceExists,
        format!("Collection {db}.{coll} already exists."),
    )
}
