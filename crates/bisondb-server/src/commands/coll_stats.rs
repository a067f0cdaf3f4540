//! `collStats`: counts and sizes of a collection, scaled by `scale`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{util, Command, Context};
use crate::args;
use crate::reply;
use crate::request::CommandRequest;

pub struct CollStats {
    db: String,
    coll: String,
    scale: u64,
}

impl Command for CollStats {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut coll = None;
        let mut scale = 1;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "collStats" | "collstats" => {
                    coll = Some(args::collection_name(req.name, v)?.to_string())
                }
                "scale" => scale = super::db_stats::parse_scale(req.name, v)?,
                "verbose" => {}
                other => args::check_known(req.name, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| args::missing_field(req.name, "collStats"))?;
        Ok(CollStats {
            db: req.db.clone(),
            coll,
            scale,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let ns = util::ns(&self.db, &self.coll);
        let Some(c) = ctx.state.storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection [{ns}] not found."),
            ));
        };
        let (count, size) = (c.count(), c.data_size());
        let db = ctx.state.storage.database_stats(&self.db);
        // The database's on-disk bytes, apportioned to this collection by data size.
        let storage = if db.data_size == 0 {
            0
        } else {
            (db.storage_size as u128 * size as u128 / db.data_size as u128) as u64
        };
        let sc = |n: u64| (n / self.scale) as i64;
        // Index entries are not measured apart from the data yet (see
        // docs/COMPATIBILITY.md): every index is listed, with size 0.
        let mut index_sizes = doc! {"_id_": 0i64};
        let secondary = c.indexes();
        for ix in &secondary {
            index_sizes.insert(ix.spec.name.clone(), 0i64);
        }
        let avg = size.checked_div(count).unwrap_or(0);
        let mut out = doc! {
            "ns": ns,
            "size": sc(size),
            "count": count as i64,
            "avgObjSize": avg as i64,
            "storageSize": sc(storage),
        };
        // `capped`, and for a capped collection `max` and `maxSize`.
        out.extend(super::capped::stats_fields(&c, self.scale));
        out.extend(doc! {
            "nindexes": 1 + secondary.len() as i32,
            "indexDetails": {},
            "indexBuilds": [],
            "totalIndexSize": 0i64,
            "totalSize": sc(storage),
            "indexSizes": index_sizes,
            "scaleFactor": self.scale as i64,
        });
        reply::ok(out)
    }
}
