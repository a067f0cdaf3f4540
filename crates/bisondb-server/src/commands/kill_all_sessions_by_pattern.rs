//! `killAllSessionsByPattern`: ends the cursors of the sessions matching any
//! pattern (`{lsid: {id, uid}}`, `{uid}`, `{users: [{user, db}]}`, `{roles:
//! [...]}`), or of every session when the list is empty. The sessions stay
//! usable. A role pattern matches no session: sessions carry no roles while
//! authentication is off.

use bisondb_error::MongoResult;
use bson::spec::BinarySubtype;
use bson::{doc, RawBsonRef, RawDocumentBuf};

use super::kill_all_sessions::parse_user;
use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;
use crate::sessions::{self, Pattern};

pub struct KillAllSessionsByPattern {
    patterns: Vec<Pattern>,
}

/// A `uid` field: 32 bytes of binary data.
fn parse_uid(cmd: &str, path: &str, v: RawBsonRef<'_>) -> MongoResult<sessions::Uid> {
    match v {
        RawBsonRef::Binary(b) if b.subtype == BinarySubtype::Generic => {
            b.bytes.try_into().map_err(|_| {
                bisondb_error::MongoError::bad_value(format!(
                    "{path} must be a SHA-256 digest of 32 bytes"
                ))
            })
        }
        other => Err(fields::wrong_type(cmd, path, other, "binData")),
    }
}

impl Command for KillAllSessionsByPattern {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let cmd = req.name;
        let mut patterns = Vec::new();
        for item in sessions::array_arg(req)? {
            let item = item.map_err(crate::request::invalid_bson)?;
            let d = fields::as_doc(cmd, cmd, item)?;
            let mut p = Pattern::all();
            let mut users = None;
            for el in d.iter() {
                let (k, v) = el.map_err(crate::request::invalid_bson)?;
                let path = format!("{cmd}.{k}");
                match k.as_str() {
                    "lsid" => {
                        let lsid = fields::as_doc(cmd, &path, v)?;
                        p.id = Some(sessions::parse_lsid(cmd, &path, v)?);
                        p.uid = match lsid.get("uid").map_err(crate::request::invalid_bson)? {
                            Some(u) => Some(parse_uid(cmd, &format!("{path}.uid"), u)?),
                            None => Some(sessions::no_auth_uid()),
                        };
                    }
                    "uid" => p.uid = Some(parse_uid(cmd, &path, v)?),
                    "users" => {
                        let mut uids = Vec::new();
                        for u in fields::as_array(cmd, &path, v)? {
                            let u = u.map_err(crate::request::invalid_bson)?;
                            uids.push(parse_user(cmd, &path, u)?);
                        }
                        users = Some(uids);
                    }
                    "roles" => {
                        fields::as_array(cmd, &path, v)?;
                        p.nothing = true;
                    }
                    _ => return Err(fields::unknown_field(cmd, &path)),
                }
            }
            match users {
                // Each user's sessions, within what the rest of the pattern says.
                Some(uids) => patterns.extend(uids.into_iter().map(|uid| Pattern {
                    uid: Some(uid),
                    ..p.clone()
                })),
                None => patterns.push(p),
            }
        }
        if patterns.is_empty() {
            patterns.push(Pattern::all());
        }
        Ok(KillAllSessionsByPattern { patterns })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.sessions.kill(ctx.state, &self.patterns);
        crate::txn::transaction::abort_sessions(ctx.state, |id| {
            self.patterns.iter().any(|p| p.matches_id(id))
        });
        reply::ok(doc! {})
    }
}
