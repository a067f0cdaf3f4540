//! `usersInfo`: the users a database defines. BisonDB has no authentication
//! and no user store yet (`createUser` fails with 115, see
//! docs/COMPATIBILITY.md), so every well-formed request truthfully finds no
//! users; malformed ones fail as mongod's parser fails them. Drivers and
//! tools call it to list users (mongosh's `db.getUsers()`), and pymongo checks
//! that it is not a cursor command.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

#[derive(Debug)]
pub struct UsersInfo;

/// Checks one user named in `usersInfo`: a name, or `{user, db}`.
fn check_user_name(v: RawBsonRef<'_>) -> MongoResult<()> {
    match v {
        RawBsonRef::String(_) => Ok(()),
        RawBsonRef::Document(d) => {
            let mut user = false;
            let mut db = false;
            for el in d.iter() {
                let (k, v) = el.map_err(crate::request::invalid_bson)?;
                match (k.as_str(), v) {
                    ("user", RawBsonRef::String(_)) => user = true,
                    ("db", RawBsonRef::String(_)) => db = true,
                    ("user" | "db", _) => {
                        return Err(MongoError::bad_value(format!(
                            "'{}' must be a string in a user name document",
                            k.as_str()
                        )))
                    }
                    _ => {}
                }
            }
            if user && db {
                Ok(())
            } else {
                Err(MongoError::bad_value(
                    "A user name document must contain the fields 'user' and 'db'",
                ))
            }
        }
        _ => Err(MongoError::bad_value(
            "User and role names must be either strings or objects",
        )),
    }
}

/// Whether the `usersInfo` argument asks for every user (`1` or
/// `{forAllDBs: true}`), after checking its shape.
fn check_argument(v: RawBsonRef<'_>) -> MongoResult<bool> {
    match v {
        RawBsonRef::Int32(1) | RawBsonRef::Int64(1) => Ok(true),
        RawBsonRef::Double(1.0) => Ok(true),
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
            Err(MongoError::bad_value(
                "usersInfo: the only numeric argument accepted is 1 (all users of the database)",
            ))
        }
        RawBsonRef::Document(d) if d.get("forAllDBs").ok().flatten().is_some() => {
            match d.get("forAllDBs").ok().flatten() {
                Some(RawBsonRef::Boolean(true)) => Ok(true),
                _ => Err(MongoError::bad_value("usersInfo: 'forAllDBs' must be true")),
            }
        }
        RawBsonRef::Array(a) => {
            for el in a {
                check_user_name(el.map_err(crate::request::invalid_bson)?)?;
            }
            Ok(false)
        }
        other => check_user_name(other).map(|()| false),
    }
}

impl Command for UsersInfo {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut all = false;
        let mut detail = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "usersInfo" => all = check_argument(v)?,
                "showCredentials" | "showCustomData" => {
                    fields::as_bool(n, k, v)?;
                }
                "showPrivileges" | "showAuthenticationRestrictions" => {
                    if fields::as_bool(n, k, v)? {
                        detail = Some(k);
                    }
                }
                "filter" => {
                    fields::as_doc(n, k, v)?;
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if let (true, Some(option)) = (all, detail) {
            return Err(MongoError::bad_value(format!(
                "usersInfo: '{option}' cannot be used when asking for all users"
            )));
        }
        Ok(UsersInfo)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {"users": Bson::Array(Vec::new())})
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn parse(body: RawDocumentBuf) -> MongoResult<UsersInfo> {
        let req = CommandRequest::from_body(&body, "db")?;
        UsersInfo::parse(&req)
    }

    #[test]
    fn accepts_every_form_mongod_accepts() {
        for body in [
            rawdoc! {"usersInfo": 1},
            rawdoc! {"usersInfo": "alice"},
            rawdoc! {"usersInfo": {"user": "alice", "db": "db"}},
            rawdoc! {"usersInfo": ["alice", {"user": "bob", "db": "admin"}]},
            rawdoc! {"usersInfo": {"forAllDBs": true}},
            rawdoc! {"usersInfo": 1, "showCredentials": true, "filter": {"mechanisms": "SCRAM-SHA-256"}},
            rawdoc! {"usersInfo": "alice", "showPrivileges": true},
        ] {
            assert!(parse(body.clone()).is_ok(), "{body:?}");
        }
    }

    #[test]
    fn rejects_malformed_requests() {
        for body in [
            rawdoc! {"usersInfo": 2},
            rawdoc! {"usersInfo": true},
            rawdoc! {"usersInfo": {"user": "alice"}},
            rawdoc! {"usersInfo": [1]},
            rawdoc! {"usersInfo": {"forAllDBs": false}},
            rawdoc! {"usersInfo": 1, "showPrivileges": true},
            rawdoc! {"usersInfo": 1, "showCredentials": "yes"},
            rawdoc! {"usersInfo": 1, "bogus": 1},
        ] {
            assert!(parse(body.clone()).is_err(), "{body:?}");
        }
    }
}
