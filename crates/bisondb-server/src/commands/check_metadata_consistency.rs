//! `checkMetadataConsistency` (mongosh `db.checkMetadataConsistency()`,
//! `sh.checkMetadataConsistency()`): a mongos 7.0+ command that compares
//! the sharding catalog with what the shards hold and answers one cursor
//! document per inconsistency.
//!
//! In mongos mode (the `postgres` engine) every server reads the one store
//! and there is no sharding catalog apart from it, so nothing can disagree:
//! the reply is an exhausted cursor with an empty first batch, for the
//! cluster (on `admin`), a database, or one collection
//! (`{checkMetadataConsistency: "<coll>"}`, or 7.0's `coll` field).
//! `checkIndexes` and `cursor.batchSize` are checked and accepted.
//!
//! mongod does not have the command (the manual: "executable only when
//! connecting to mongos"), so a standalone or a replica-set member keeps
//! answering 59 "no such command" exactly as for an unknown name.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{RawArrayBuf, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::request::CommandRequest;

pub struct CheckMetadataConsistency {
    db: String,
    /// The collection of the collection-level form.
    coll: Option<String>,
}

impl Command for CheckMetadataConsistency {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == n => {
                    // 1 (any number) for the database or, on admin, the
                    // cluster; a string names a collection.
                    if let RawBsonRef::String(_) = v {
                        coll = Some(fields::collection_name(n, v)?.to_string());
                    }
                }
                "coll" => coll = Some(fields::collection_name(n, v)?.to_string()),
                "checkIndexes" => {
                    fields::as_bool(n, "checkIndexes", v)?;
                }
                "cursor" => {
                    let c = fields::as_doc(n, "cursor", v)?;
                    if let Some(b) = c.get("batchSize").map_err(crate::request::invalid_bson)? {
                        fields::as_non_negative(n, "cursor.batchSize", b)?;
                    }
                }
                // `dbMetadataLockMaxTimeMS` is one of the command's
                // internal options; nothing here takes a lock.
                "dbMetadataLockMaxTimeMS" => {
                    fields::as_non_negative(n, "dbMetadataLockMaxTimeMS", v)?;
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(CheckMetadataConsistency {
            db: req.db.clone(),
            coll,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if !ctx.state.repl().is_mongos() {
            // The registry's words for a name mongod does not know.
            return Err(MongoError::new(
                ErrorCode::CommandNotFound,
                "no such command: 'checkMetadataConsistency'",
            ));
        }
        let ns = match &self.coll {
            Some(c) => crate::namespaces::ns(&self.db, c),
            None => format!("{}.$cmd.aggregate", self.db),
        };
        // One store, no separate sharding catalog: no inconsistency.
        crate::cursor::cursor_reply(&ns, 0, RawArrayBuf::new(), true)
    }
}
