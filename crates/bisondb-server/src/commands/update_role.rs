//! `updateRole`: replaces a user-defined role's privileges and/or the roles
//! it inherits.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::privileges::Privilege;
use crate::auth::roles;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct UpdateRole {
    name: Name,
    privileges: Option<Vec<Privilege>>,
    roles: Option<Vec<Name>>,
    restrictions: Option<Bson>,
}

impl Command for UpdateRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = UpdateRole {
            name: Name::new("", req.db.clone()),
            privileges: None,
            roles: None,
            restrictions: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "updateRole" => c.name.name = fields::as_str(n, "updateRole", v)?.to_string(),
                "privileges" => c.privileges = Some(roles::parse_privileges(n, v, &req.db)?),
                "roles" => c.roles = Some(roles::parse_role_names(n, "roles", v, &req.db)?),
                "authenticationRestrictions" => {
                    fields::as_array(n, "authenticationRestrictions", v)?;
                    let r = fields::to_bson(v)?;
                    crate::auth::restrictions::parse(&r)?;
                    c.restrictions = Some(r);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if c.privileges.is_none() && c.roles.is_none() && c.restrictions.is_none() {
            return Err(MongoError::bad_value(
                "Must specify at least one field to update in updateRole",
            ));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut d = roles::stored_role(ctx.state, &self.name)?;
        if let Some(p) = &self.privileges {
            d.insert("privileges", roles::privileges_to_bson(p));
        }
        if let Some(r) = &self.roles {
            roles::check_exist(ctx.state, r)?;
            roles::check_no_cycle(ctx.state, &self.name, r)?;
            d.insert("roles", roles::to_bson(r));
        }
        if let Some(r) = self.restrictions {
            d.insert("authenticationRestrictions", r);
        }
        roles::save(ctx.state, users::ROLES, &self.name, &d)?;
        reply::ok(doc! {})
    }
}
