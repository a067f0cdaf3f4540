//! `rolesInfo`: the roles of a database (`1`), or those named (a name,
//! `{role, db}`, or a list), user-defined and (`showBuiltinRoles`, or when
//! named) built in, with their inherited roles and, with
//! `showPrivileges`, their privileges.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct RolesInfo {
    /// `None`: every role of `db`.
    named: Option<Vec<Name>>,
    db: String,
    show_privileges: bool,
    /// `showAuthenticationRestrictions`.
    show_restrictions: bool,
    show_builtin: bool,
}

impl Command for RolesInfo {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut r = RolesInfo {
            named: Some(Vec::new()),
            db: req.db.clone(),
            show_privileges: false,
            show_restrictions: false,
            show_builtin: false,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "rolesInfo" => {
                    r.named = match v {
                        RawBsonRef::Int32(1) | RawBsonRef::Int64(1) => None,
                        RawBsonRef::Double(1.0) => None,
                        RawBsonRef::Array(a) => Some(
                            a.into_iter()
                                .map(|e| {
                                    roles::parse_name(
                                        e.map_err(crate::request::invalid_bson)?,
                                        "role",
                                        &req.db,
                                    )
                                })
                                .collect::<MongoResult<Vec<_>>>()?,
                        ),
                        RawBsonRef::String(_) | RawBsonRef::Document(_) => {
                            Some(vec![roles::parse_name(v, "role", &req.db)?])
                        }
                        _ => return Err(MongoError::bad_value(
                            "rolesInfo must be 1, a role name, a role document or an array of them",
                        )),
                    }
                }
                "showPrivileges" => {
                    r.show_privileges = match v {
                        RawBsonRef::String("asUserFragment") => true,
                        _ => fields::as_bool(n, "showPrivileges", v)?,
                    }
                }
                "showBuiltinRoles" => r.show_builtin = fields::as_bool(n, "showBuiltinRoles", v)?,
                "showAuthenticationRestrictions" => {
                    r.show_restrictions = fields::as_bool(n, "showAuthenticationRestrictions", v)?;
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        Ok(r)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let names = match self.named {
            Some(n) => n,
            None => {
                let mut n: Vec<Name> = users::all(&ctx.state.storage, users::ROLES)?
                    .iter()
                    .filter(|r| r.get_str("db").ok() == Some(self.db.as_str()))
                    .filter_map(|r| Some(Name::new(r.get_str("role").ok()?, &self.db)))
                    .collect();
                if self.show_builtin {
                    n.extend(roles::builtin_of(&self.db));
                }
                n
            }
        };
        let mut out = Vec::new();
        for name in &names {
            if let Some(d) = roles::info(
                ctx.state,
                name,
                self.show_privileges,
                self.show_restrictions,
            )? {
                out.push(Bson::Document(d));
            }
        }
        reply::ok(doc! {"roles": out})
    }
}
