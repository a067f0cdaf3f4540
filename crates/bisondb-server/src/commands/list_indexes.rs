//! `listIndexes`: the indexes of a collection as a cursor, shaped as mongod shows
//! them: the `_id_` index (documents are clustered by `_id`), then the secondary
//! indexes in creation order. A clustered collection lists its clustered
//! index (`clustered: true`) in place of `_id_`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocumentBuf;

use super::{Command, Context};
use crate::cursor::{Cursor, DocSource};
use crate::fields;
use crate::request::CommandRequest;

pub struct ListIndexes {
    db: String,
    coll: String,
    batch_size: Option<usize>,
}

impl Command for ListIndexes {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        let mut batch_size = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "listIndexes" => coll = Some(fields::collection_name(n, v)?.to_string()),
                "cursor" => {
                    let c = fields::as_doc(n, "cursor", v)?;
                    if let Some(b) = c.get("batchSize").map_err(crate::request::invalid_bson)? {
                        batch_size =
                            Some(fields::as_non_negative(n, "cursor.batchSize", b)? as usize);
                    }
                }
                "includeBuildUUIDs" | "includeIndexBuildInfo" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "listIndexes"))?;
        Ok(ListIndexes {
            db: req.db.clone(),
            coll,
            batch_size,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        let Some(coll) = ctx.state.storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("ns does not exist: {ns}"),
            ));
        };
        let specs = crate::namespaces::index_specs(&coll)
            .iter()
            .map(crate::reply::to_raw)
            .collect::<MongoResult<Vec<_>>>()?;
        let src: DocSource = Box::new(specs.into_iter().map(Ok));
        let mut cursor = Cursor::new(ns.clone(), src, None);
        cursor.knows_end = true; // the listing is built in memory
        let batch = cursor.next_batch(self.batch_size)?;
        crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, false)
    }
}
