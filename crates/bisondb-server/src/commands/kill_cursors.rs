//! `killCursors`: closes cursors by id on one collection.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct KillCursors {
    ns: String,
    ids: Vec<i64>,
}

impl KillCursors {
    /// Whether the caller holds `killAnyCursor` on the namespace.
    fn may_kill_any(&self, ctx: &mut Context<'_>) -> MongoResult<bool> {
        let (db, coll) = self.ns.split_once('.').unwrap_or((self.ns.as_str(), ""));
        crate::auth::has_ns_action(ctx, db, coll, crate::auth::Action::KillAnyCursor)
    }
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
        // Another user's cursor needs `killAnyCursor` on the namespace; one
        // such cursor fails the whole command before any is killed, as
        // mongod's authorization check (a cursor not found is no reason).
        for id in &self.ids {
            let Some(owner) = ctx.state.cursors.owner_of(*id, &self.ns) else {
                continue;
            };
            if !crate::auth::is_coauthorized_with(ctx, owner.as_deref())
                && !self.may_kill_any(ctx)?
            {
                return Err(MongoError::new(
                    ErrorCode::Unauthorized,
                    format!("not authorized to kill cursor on {}", self.ns),
                ));
            }
        }
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
