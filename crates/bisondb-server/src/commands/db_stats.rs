//! `dbStats`: counts and sizes of a database, scaled by `scale`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DbStats {
    db: String,
    scale: u64,
}

impl Command for DbStats {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut scale = 1;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "dbStats" | "dbstats" => {}
                "scale" => scale = fields::parse_scale(req.name, v)?,
                "freeStorage" => {}
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(DbStats {
            db: req.db.clone(),
            scale,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.flush_for_sizes();
        let s = ctx.state.storage.database_stats(&self.db);
        let sc = |n: u64| (n / self.scale) as i64;
        let avg = if s.objects == 0 {
            0.0
        } else {
            s.data_size as f64 / s.objects as f64
        };
        reply::ok(doc! {
            "db": self.db,
            "collections": s.collections as i64,
            "views": 0i64,
            "objects": s.objects as i64,
            "avgObjSize": avg,
            "dataSize": sc(s.data_size) as f64,
            "storageSize": sc(s.storage_size) as f64,
            "indexes": s.indexes as i64,
            "indexSize": sc(s.index_size) as f64,
            "totalSize": sc(s.storage_size.saturating_add(s.index_size)) as f64,
            "scaleFactor": self.scale as i64,
        })
    }
}
