//! `drop`: removes a collection and its cursors. Dropping a missing collection
//! succeeds, as in mongod 7+. Dropping a time-series collection drops its
//! bucket collection too.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct Drop {
    db: String,
    coll: String,
}

impl Command for Drop {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        let mut coll = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "drop" => coll = Some(fields::collection_name(req.name, v)?.to_string()),
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(req.name, "drop"))?;
        Ok(Drop {
            db: req.db.clone(),
            coll,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        // As mongod: the profiler's collection goes only once it is unused.
        if self.coll == crate::profiler::COLLECTION
            && ctx.state.profiler.settings(&self.db).level > 0
        {
            return Err(bisondb_error::MongoError::new(
                bisondb_error::ErrorCode::IllegalOperation,
                "turn off profiling before dropping system.profile collection",
            ));
        }
        let timeseries =
            crate::namespaces::timeseries::options_of(&ctx.state.storage, &self.db, &self.coll)
                .is_some();
        let existed = ctx.state.storage.drop_collection(&self.db, &self.coll)?;
        if timeseries {
            // A time-series collection goes with its buckets.
            crate::namespaces::timeseries::drop_buckets(&ctx.state.storage, &self.db, &self.coll)?;
            ctx.state.cursors.kill_namespace(&crate::namespaces::ns(
                &self.db,
                &crate::namespaces::timeseries::buckets_name(&self.coll),
            ));
        }
        ctx.state.cursors.kill_namespace(&ns);
        if existed {
            reply::ok(doc! {"nIndexesWas": 1, "ns": ns})
        } else {
            reply::ok(doc! {})
        }
    }
}
