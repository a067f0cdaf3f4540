//! `convertToCapped` and `cloneCollectionAsCapped`: a collection's documents
//! in a new capped collection of `size` bytes (checked and rounded as
//! `create` does), replacing the source or under `toCollection`. The new
//! collection keeps the source's other options and only the `_id` index, as
//! in mongod; the copy evicts like any insert when it does not fit.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::namespaces::capped::CappedOptions;
use crate::reply;
use crate::request::CommandRequest;

pub struct ConvertToCapped {
    name: &'static str,
    db: String,
    from: String,
    /// `cloneCollectionAsCapped`'s `toCollection`; `None` converts in place.
    to: Option<String>,
    capped: CappedOptions,
}

impl Command for ConvertToCapped {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let clone = n == "cloneCollectionAsCapped";
        let mut from = None;
        let mut to = None;
        let mut size = false;
        let mut capped = CappedOptions::default();
        capped.set(n, "capped", RawBsonRef::Boolean(true))?;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == n => from = Some(fields::collection_name(n, v)?.to_string()),
                "toCollection" if clone => to = Some(fields::collection_name(n, v)?.to_string()),
                "size" => {
                    // mongod's IDL takes any number here.
                    if !matches!(
                        v,
                        RawBsonRef::Int32(_)
                            | RawBsonRef::Int64(_)
                            | RawBsonRef::Double(_)
                            | RawBsonRef::Decimal128(_)
                    ) {
                        return Err(fields::wrong_type(
                            n,
                            "size",
                            v,
                            "[long, int, decimal, double]",
                        ));
                    }
                    capped.set(n, "size", v)?;
                    size = true;
                }
                "writeConcern" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        let from = from.ok_or_else(|| fields::missing_field(n, n))?;
        if clone && to.is_none() {
            return Err(fields::missing_field(n, "toCollection"));
        }
        if !size {
            return Err(fields::missing_field(n, "size"));
        }
        Ok(ConvertToCapped {
            name: if clone {
                "cloneCollectionAsCapped"
            } else {
                "convertToCapped"
            },
            db: req.db.clone(),
            from,
            to,
            capped,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let storage = &ctx.state.storage;
        let from_ns = crate::namespaces::ns(&self.db, &self.from);
        let Some(source) = storage.collection(&self.db, &self.from) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("source collection {from_ns} does not exist"),
            ));
        };
        let source_options = source.options();
        if source_options.contains_key("viewOn") {
            return Err(MongoError::new(
                ErrorCode::CommandNotSupportedOnView,
                format!("{} not supported for views: {from_ns}", self.name),
            ));
        }
        let mut options = Document::new();
        self.capped.finish(&mut options)?;
        for (k, v) in source_options.iter() {
            if !matches!(k.as_str(), "capped" | "size" | "max") {
                options.insert(k.clone(), v.clone());
            }
        }
        let done = match &self.to {
            Some(to) => storage.clone_collection_as_capped(&self.db, &self.from, to, options),
            None => storage.convert_to_capped(&self.db, &self.from, options),
        };
        match done {
            Ok(()) => {}
            Err(bisondb_storage::StorageError::NamespaceExists(_)) => {
                return Err(MongoError::new(
                    ErrorCode::NamespaceExists,
                    "to collection already exists",
                ))
            }
            Err(e) => return Err(e.into()),
        }
        if self.to.is_none() {
            // The old collection is gone: so are its cursors.
            ctx.state.cursors.kill_namespace(&from_ns);
        }
        reply::ok(doc! {})
    }
}
