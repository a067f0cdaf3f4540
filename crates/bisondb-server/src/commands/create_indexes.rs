//! `createIndexes`: only the `_id` index exists so far, so a request for it succeeds
//! (creating the collection if needed) and any other index fails with an error that
//! names secondary indexes as not yet supported.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::args;
use crate::reply;
use crate::request::CommandRequest;

pub struct CreateIndexes {
    db: String,
    coll: String,
}

impl Command for CreateIndexes {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        let mut count = 0;
        let mut have_indexes = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "createIndexes" => coll = Some(args::collection_name(n, v)?.to_string()),
                "indexes" => {
                    have_indexes = true;
                    for spec in args::as_array(n, "indexes", v)? {
                        let spec = match spec.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => d,
                            other => return Err(args::wrong_type(n, "indexes", other, "object")),
                        };
                        let key = match spec.get("key").map_err(crate::request::invalid_bson)? {
                            Some(RawBsonRef::Document(k)) => args::to_document(k)?,
                            _ => {
                                return Err(MongoError::failed_to_parse(
                                    "Error in specification: the 'key' field is a required property of an index specification",
                                ))
                            }
                        };
                        let is_id = key.len() == 1
                            && matches!(
                                key.get("_id"),
                                Some(Bson::Int32(1) | Bson::Int64(1) | Bson::Double(1.0))
                            );
                        if !is_id {
                            return Err(MongoError::new(
                                ErrorCode::NotImplemented,
                                format!("secondary indexes are not supported by BisonDB yet (index key {key})"),
                            ));
                        }
                        count += 1;
                    }
                }
                "commitQuorum" => {}
                other => args::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| args::missing_field(n, "createIndexes"))?;
        if !have_indexes {
            return Err(args::missing_field(n, "indexes"));
        }
        if count == 0 {
            return Err(MongoError::bad_value(
                "Must specify at least one index to create",
            ));
        }
        Ok(CreateIndexes {
            db: req.db.clone(),
            coll,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let existed = ctx.state.storage.collection(&self.db, &self.coll).is_some();
        ctx.state
            .storage
            .get_or_create_collection(&self.db, &self.coll)?;
        reply::ok(doc! {
            "numIndexesBefore": 1,
            "numIndexesAfter": 1,
            "createdCollectionAutomatically": !existed,
            "note": "all indexes already exist",
        })
    }
}
