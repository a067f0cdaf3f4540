//! `killCursors`: closes cursors by id on one collection.

use bisondb_error::MongoResult;
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct KillCursors {
    ns: String,
    ids: Vec<i64>,
}

impl Command for KillCursors {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut coll = None;
        let mut ids = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "killCursors" => coll = Some(crate::cursor::cursor_collection(req.name, v)?),
                "cursors" => {
                    let mut out = Vec::new();
                    for id in fields::as_array(req.name, "cursors", v)? {
                        match id.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Int64(i) => out.push(i),
                            other => {
                                return Err(fields::wrong_type(req.name, "cursors", other, "long"))
                            }
                        }
                    }
                    ids = Some(out);
                }
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(req.name, "killCursors"))?;
        let ids = ids.ok_or_else(|| fields::missing_field(req.name, "cursors"))?;
        Ok(KillCursors {
            ns: crate::namespaces::ns(&req.db, coll),
            ids,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // Only cursors of this namespace may be killed through it.
        let mut mine = Vec::new();
        let mut not_found = Vec::new();
        for id in self.ids {
            match ctx.state.cursors.take(id, &self.ns) {
                Ok(_) => mine.push(id),
                Err(_) => not_found.push(id),
            }
        }
        let list = |v: Vec<i64>| Bson::Array(v.into_iter().map(Bson::Int64).collect());
        reply::ok(doc! {
            "cursorsKilled": list(mine),
            "cursorsNotFound": list(not_found),
            "cursorsAlive": [],
            "cursorsUnknown": [],
        })
    }
}
