//! `create`: an explicit collection creation. Options BisonDB does not implement
//! (capped, validators, views, time series, clustered, collation) are refused by name
//! rather than stored and ignored.

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
}

/// Options mongod has that BisonDB refuses until they are built.
const UNSUPPORTED: &[&str] = &[
    "capped",
    "changeStreamPreAndPostImages",
    "clusteredIndex",
    "encryptedFields",
    "expireAfterSeconds",
    "max",
    "pipeline",
    "size",
    "timeseries",
    "validationAction",
    "validationLevel",
    "validator",
    "viewOn",
];

impl Command for Create {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        super::util::write_concern(req.name, req.body)?;
        let n = req.name;
        let mut coll = None;
        let mut options = Document::new();
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "create" => coll = Some(args::collection_name(n, v)?.to_string()),
                "collation" => super::find::check_collation(n, v)?,
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
        Ok(Create {
            db: req.db.clone(),
            coll,
            options,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // mongod 7+: creating an existing collection with the same options is a no-op.
        if let Some(existing) = ctx.state.storage.collection(&self.db, &self.coll) {
            if existing.info().options == self.options {
                return reply::ok(doc! {});
            }
        }
        match ctx
            .state
            .storage
            .create_collection(&self.db, &self.coll, self.options)
        {
            Ok(_) => reply::ok(doc! {}),
            Err(bisondb_storage::StorageError::NamespaceExists(_)) => Err(MongoError::new(
                ErrorCode::NamespaceExists,
                format!("Collection {}.{} already exists.", self.db, self.coll),
            )),
            Err(e) => Err(e.into()),
        }
    }
}
