//! `updateUser`: replaces a user's password (new credentials), roles,
//! custom data, mechanisms or authentication restrictions.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::scram::Mechanism;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct UpdateUser {
    name: Name,
    pwd: Option<String>,
    digest_password: bool,
    custom_data: Option<Document>,
    roles: Option<Vec<Name>>,
    mechanisms: Option<Vec<Mechanism>>,
    restrictions: Option<Bson>,
}

impl Command for UpdateUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = UpdateUser {
            name: Name::new("", req.db.clone()),
            pwd: None,
            digest_password: true,
            custom_data: None,
            roles: None,
            mechanisms: None,
            restrictions: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "updateUser" => c.name.name = fields::as_str(n, "updateUser", v)?.to_string(),
                "pwd" => c.pwd = Some(fields::as_str(n, "pwd", v)?.to_string()),
                "digestPassword" => c.digest_password = fields::as_bool(n, "digestPassword", v)?,
                "customData" => {
                    c.custom_data = Some(fields::to_document(fields::as_doc(n, "customData", v)?)?)
                }
                "roles" => c.roles = Some(roles::parse_role_names(n, "roles", v, &req.db)?),
                "mechanisms" => c.mechanisms = Some(users::parse_mechanisms(n, v)?),
                "authenticationRestrictions" => {
                    fields::as_array(n, "authenticationRestrictions", v)?;
                    c.restrictions = Some(fields::to_bson(v)?);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if c.pwd.is_none()
            && c.custom_data.is_none()
            && c.roles.is_none()
            && c.mechanisms.is_none()
            && c.restrictions.is_none()
        {
            return Err(MongoError::bad_value(
                "Must specify at least one field to update in updateUser",
            ));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let name = self.name;
        let Some(mut d) = users::get(&ctx.state.storage, users::USERS, &name)? else {
            return Err(users::user_not_found(&name));
        };
        let existing: Vec<Mechanism> = users::mechanisms(&d)
            .iter()
            .filter_map(|m| Mechanism::from_name(m))
            .collect();
        if let Some(pwd) = &self.pwd {
            if name.db == "$external" {
                return Err(MongoError::bad_value(
                    "Cannot set the password for users defined on the '$external' database",
                ));
            }
            let mechs = self.mechanisms.clone().unwrap_or_else(|| {
                if existing.is_empty() {
                    vec![Mechanism::Sha1, Mechanism::Sha256]
                } else {
                    existing.clone()
                }
            });
            let creds =
                users::credentials(ctx.state, &name.name, pwd, !self.digest_password, &mechs)?;
            d.insert("credentials", creds);
        } else if let Some(mechs) = &self.mechanisms {
            if mechs.iter().any(|m| !existing.contains(m)) {
                return Err(MongoError::bad_value(
                    "mechanisms field must be a subset of previously set mechanisms",
                ));
            }
            if let Ok(creds) = d.get_document_mut("credentials") {
                for m in existing.iter().filter(|m| !mechs.contains(m)) {
                    creds.remove(m.name());
                }
            }
        }
        if let Some(r) = &self.roles {
            roles::check_exist(ctx.state, r)?;
            d.insert("roles", roles::to_bson(r));
        }
        if let Some(cd) = self.custom_data {
            d.insert("customData", cd);
        }
        if let Some(r) = self.restrictions {
            d.insert("authenticationRestrictions", r);
        }
        users::put(
            &ctx.state.storage,
            users::USERS,
            &name,
            &d,
            false,
            || users::user_not_found(&name),
            || users::user_not_found(&name),
        )?;
        ctx.state.auth.changed();
        reply::ok(doc! {})
    }
}
