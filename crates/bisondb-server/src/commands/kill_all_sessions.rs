//! `killAllSessions`: ends the cursors of every session of the users listed
//! (`{user, db}`), or of every session when the list is empty. The sessions
//! stay usable.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;
use crate::sessions::{self, Pattern};

pub struct KillAllSessions {
    patterns: Vec<Pattern>,
}

impl Command for KillAllSessions {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut patterns = Vec::new();
        for item in sessions::array_arg(req)? {
            let item = item.map_err(crate::request::invalid_bson)?;
            patterns.push(Pattern {
                uid: Some(parse_user(req.name, req.name, item)?),
                ..Pattern::all()
            });
        }
        if patterns.is_empty() {
            patterns.push(Pattern::all());
        }
        Ok(KillAllSessions { patterns })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.sessions.kill(ctx.state, &self.patterns);
        crate::txn::transaction::abort_sessions(ctx.state, |id| {
            self.patterns.iter().any(|p| p.matches_id(id))
        });
        reply::ok(doc! {})
    }
}

/// The owner id of a `{user, db}` element of `field`.
pub fn parse_user(cmd: &str, field: &str, v: bson::RawBsonRef<'_>) -> MongoResult<sessions::Uid> {
    let d = crate::fields::as_doc(cmd, field, v)?;
    let mut user = None;
    let mut db = None;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let path = format!("{field}.{k}");
        match k.as_str() {
            "user" => user = Some(crate::fields::as_str(cmd, &path, v)?),
            "db" => db = Some(crate::fields::as_str(cmd, &path, v)?),
            _ => return Err(crate::fields::unknown_field(cmd, &path)),
        }
    }
    let user = user.ok_or_else(|| crate::fields::missing_field(cmd, &format!("{field}.user")))?;
    let db = db.ok_or_else(|| crate::fields::missing_field(cmd, &format!("{field}.db")))?;
    Ok(sessions::user_uid(user, db))
}
