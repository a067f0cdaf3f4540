//! `usersInfo`: the users of a database (`1`), of every database
//! (`{forAllDBs: true}`), or those named (a name, `{user, db}`, or a list),
//! as mongod shows them: `_id`, `userId`, `user`, `db`, `roles`,
//! `customData`, `mechanisms`, with `credentials` (`showCredentials`) and
//! the roles and privileges they inherit (`showPrivileges`); `filter`
//! matches the shown documents.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

/// Which users `usersInfo` asks for.
#[derive(Debug)]
enum Which {
    Db(String),
    AllDbs,
    Named(Vec<Name>),
}

#[derive(Debug)]
pub struct UsersInfo {
    which: Which,
    show_credentials: bool,
    show_privileges: bool,
    /// `showAuthenticationRestrictions`: the user's own and inherited.
    show_restrictions: bool,
    show_custom_data: bool,
    filter: Option<Document>,
}

/// Checks one user named in `usersInfo`: a name, or `{user, db}`.
fn user_name(v: RawBsonRef<'_>, db: &str) -> MongoResult<Name> {
    roles::parse_name(v, "user", db)
}

/// What the `usersInfo` argument asks for, after checking its shape.
fn which_users(v: RawBsonRef<'_>, db: &str) -> MongoResult<Which> {
    match v {
        RawBsonRef::Int32(1) | RawBsonRef::Int64(1) => Ok(Which::Db(db.to_string())),
        RawBsonRef::Double(1.0) => Ok(Which::Db(db.to_string())),
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
            Err(MongoError::bad_value(
                "usersInfo: the only numeric argument accepted is 1 (all users of the database)",
            ))
        }
        RawBsonRef::Document(d) if d.get("forAllDBs").ok().flatten().is_some() => {
            match d.get("forAllDBs").ok().flatten() {
                Some(RawBsonRef::Boolean(true)) => Ok(Which::AllDbs),
                _ => Err(MongoError::bad_value("usersInfo: 'forAllDBs' must be true")),
            }
        }
        RawBsonRef::Array(a) => {
            let mut names = Vec::new();
            for el in a {
                names.push(user_name(el.map_err(crate::request::invalid_bson)?, db)?);
            }
            Ok(Which::Named(names))
        }
        other => Ok(Which::Named(vec![user_name(other, db)?])),
    }
}

impl Command for UsersInfo {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut u = UsersInfo {
            which: Which::Named(Vec::new()),
            show_credentials: false,
            show_privileges: false,
            show_restrictions: false,
            show_custom_data: true,
            filter: None,
        };
        let mut detail = None;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "usersInfo" => u.which = which_users(v, &req.db)?,
                "showCredentials" => u.show_credentials = fields::as_bool(n, k, v)?,
                "showCustomData" => u.show_custom_data = fields::as_bool(n, k, v)?,
                "showPrivileges" | "showAuthenticationRestrictions" => {
                    if fields::as_bool(n, k, v)? {
                        detail = Some(k);
                        u.show_privileges |= k == "showPrivileges";
                        u.show_restrictions |= k == "showAuthenticationRestrictions";
                    }
                }
                "filter" => {
                    u.filter = Some(fields::to_document(fields::as_doc(n, k, v)?)?);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if let (Which::Db(_) | Which::AllDbs, Some(option)) = (&u.which, detail) {
            return Err(MongoError::bad_value(format!(
                "usersInfo: '{option}' cannot be used when asking for all users"
            )));
        }
        Ok(u)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let state = ctx.state;
        let stored: Vec<Document> = match &self.which {
            Which::Named(names) => {
                let mut out = Vec::new();
                for name in names {
                    if let Some(d) = users::get(&state.storage, users::USERS, name)? {
                        out.push(d);
                    }
                }
                out
            }
            Which::Db(db) => users::all(&state.storage, users::USERS)?
                .into_iter()
                .filter(|u| u.get_str("db").ok() == Some(db.as_str()))
                .collect(),
            Which::AllDbs => users::all(&state.storage, users::USERS)?,
        };
        let matcher = match &self.filter {
            Some(f) => Some(bisondb_query::matcher::Matcher::parse_doc(f)?),
            None => None,
        };
        let mut shown = Vec::new();
        for u in stored {
            let mut d = doc! {};
            for k in ["_id", "userId", "user", "db"] {
                if let Some(v) = u.get(k) {
                    d.insert(k, v.clone());
                }
            }
            if self.show_credentials {
                if let Some(c) = u.get("credentials") {
                    d.insert("credentials", c.clone());
                }
            }
            d.insert(
                "roles",
                u.get("roles").cloned().unwrap_or(Bson::Array(Vec::new())),
            );
            if self.show_custom_data {
                if let Some(c) = u.get("customData") {
                    d.insert("customData", c.clone());
                }
            }
            if self.show_privileges || self.show_restrictions {
                crate::auth::add_inherited(state, &users::roles_of(&u), &mut d)?;
                if !self.show_privileges {
                    d.remove("inheritedPrivileges");
                }
            }
            if self.show_restrictions {
                d.insert(
                    "authenticationRestrictions",
                    u.get("authenticationRestrictions")
                        .cloned()
                        .unwrap_or(Bson::Array(Vec::new())),
                );
            }
            let mechanisms: Vec<Bson> = users::mechanisms(&u)
                .into_iter()
                .map(Bson::String)
                .collect();
            d.insert("mechanisms", mechanisms);
            if let Some(m) = &matcher {
                if !m.matches_doc(&d) {
                    continue;
                }
            }
            shown.push(Bson::Document(d));
        }
        reply::ok(doc! {"users": shown})
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
