//! `collStats`: counts and sizes of a collection, scaled by `scale`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
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
                    coll = Some(fields::collection_name(req.name, v)?.to_string())
                }
                "scale" => scale = fields::parse_scale(req.name, v)?,
                "verbose" => {}
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(req.name, "collStats"))?;
        Ok(CollStats {
            db: req.db.clone(),
            coll,
            scale,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        ctx.state.flush_for_sizes();
        let Some(c) = ctx.state.storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection [{ns}] not found."),
            ));
        };
        let mut out = doc! {"ns": ns};
        out.extend(crate::namespaces::stats::storage_stats(
            &ctx.state.storage,
            &c,
            self.scale,
        ));
        reply::ok(out)
    }
}
