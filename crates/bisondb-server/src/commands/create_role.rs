//! `createRole`: a user-defined role of the command's database, stored in
//! `admin.system.roles` with its privileges and the roles it inherits.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::privileges::Privilege;
use crate::auth::roles;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct CreateRole {
    name: Name,
    privileges: Vec<Privilege>,
    roles: Vec<Name>,
    restrictions: Option<Bson>,
}

impl Command for CreateRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = CreateRole {
            name: Name::new("", req.db.clone()),
            privileges: Vec::new(),
            roles: Vec::new(),
            restrictions: None,
        };
        let (mut has_privileges, mut has_roles) = (false, false);
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "createRole" => c.name.name = fields::as_str(n, "createRole", v)?.to_string(),
                "privileges" => {
                    c.privileges = roles::parse_privileges(n, v, &req.db)?;
                    has_privileges = true;
                }
                "roles" => {
                    c.roles = roles::parse_role_names(n, "roles", v, &req.db)?;
                    has_roles = true;
                }
                "authenticationRestrictions" => {
                    fields::as_array(n, "authenticationRestrictions", v)?;
                    let r = fields::to_bson(v)?;
                    crate::auth::restrictions::parse(&r)?;
                    c.restrictions = Some(r);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if !has_privileges {
            return Err(fields::missing_field(n, "privileges"));
        }
        if !has_roles {
            return Err(fields::missing_field(n, "roles"));
        }
        if c.name.name.is_empty() {
            return Err(MongoError::bad_value("Role name must be non-empty"));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let name = self.name;
        if roles::is_builtin_name(&name.name) {
            return Err(MongoError::bad_value(format!(
                "Cannot create roles with the same name as a built-in role: {name}"
            )));
        }
        roles::check_exist(ctx.state, &self.roles)?;
        let mut d = doc! {
            "_id": name.id(),
            "role": &name.name,
            "db": &name.db,
            "privileges": roles::privileges_to_bson(&self.privileges),
            "roles": roles::to_bson(&self.roles),
        };
        if let Some(r) = self.restrictions {
            d.insert("authenticationRestrictions", r);
        }
        users::put(
            &ctx.state.storage,
            users::ROLES,
            &name,
            &d,
            true,
            || {
                MongoError::new(
                    ErrorCode::Other(51002),
                    format!("Role \"{name}\" already exists"),
                )
            },
            || roles::role_not_found(&name),
        )?;
        ctx.state.auth.changed();
        reply::ok(doc! {})
    }
}
