//! `dropIndexes`: with only the `_id` index, `"*"` drops nothing, `_id_` is refused as
//! mongod refuses it, and any other name is not found.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::args;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropIndexes {
    db: String,
    coll: String,
    target: Target,
}

enum Target {
    All,
    Id,
    Other(String),
}

impl Command for DropIndexes {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        let mut target = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "dropIndexes" | "deleteIndexes" => {
                    coll = Some(args::collection_name(n, v)?.to_string())
                }
                "index" => {
                    target = Some(match v {
                        RawBsonRef::String("*") => Target::All,
                        RawBsonRef::String("_id_") => Target::Id,
                        RawBsonRef::String(s) => Target::Other(s.to_string()),
                        RawBsonRef::Document(d) => {
                            let key = args::to_document(d)?;
                            if key.len() == 1 && key.contains_key("_id") {
                                Target::Id
                            } else {
                                Target::Other(format!("{key}"))
                            }
                        }
                        RawBsonRef::Array(a) => {
                            let names: Vec<String> = a
                                .into_iter()
                                .filter_map(|x| x.ok().and_then(|x| x.as_str().map(str::to_string)))
                                .collect();
                            match names.iter().find(|n| n.as_str() != "_id_") {
                                Some(other) => Target::Other(other.clone()),
                                None if names.is_empty() => Target::All,
                                None => Target::Id,
                            }
                        }
                        other => {
                            return Err(args::wrong_type(
                                n,
                                "index",
                                other,
                                "[string, object, array]",
                            ))
                        }
                    })
                }
                other => args::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| args::missing_field(n, "dropIndexes"))?;
        let target = target.ok_or_else(|| args::missing_field(n, "index"))?;
        Ok(DropIndexes {
            db: req.db.clone(),
            coll,
            target,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if ctx.state.storage.collection(&self.db, &self.coll).is_none() {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns not found {}.{}", self.db, self.coll),
            ));
        }
        match self.target {
            Target::All => {
                reply::ok(doc! {"nIndexesWas": 1, "msg": "non-_id indexes dropped for collection"})
            }
            Target::Id => Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "cannot drop _id index",
            )),
            Target::Other(name) => Err(MongoError::new(
                ErrorCode::IndexNotFound,
                format!("index not found with name [{name}]"),
            )),
        }
    }
}
