//! `updateUser`: replaces a user's password (new credentials), roles,
//! custom data, mechanisms or authentication restrictions.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::scram::Mechanism;
use crate::auth::users::{self, UserFields};
use crate::reply;
use crate::request::CommandRequest;

pub struct UpdateUser(UserFields);

impl Command for UpdateUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let u = UserFields::parse(req)?;
        if u.pwd.is_none()
            && u.custom_data.is_none()
            && u.roles.is_none()
            && u.mechanisms.is_none()
            && u.restrictions.is_none()
        {
            return Err(MongoError::bad_value(
                "Must specify at least one field to update in updateUser",
            ));
        }
        Ok(UpdateUser(u))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let u = self.0;
        let name = u.name.clone();
        let Some(mut d) = users::get(&ctx.state.storage, users::USERS, &name)? else {
            return Err(users::user_not_found(&name));
        };
        let existing: Vec<Mechanism> = users::mechanisms(&d)
            .iter()
            .filter_map(|m| Mechanism::from_name(m))
            .collect();
        if let Some(pwd) = &u.pwd {
            if name.db == "$external" {
                return Err(MongoError::bad_value(
                    "Cannot set the password for users defined on the '$external' database",
                ));
            }
            let mechs = u.mechanisms.clone().unwrap_or_else(|| {
                if existing.is_empty() {
                    vec![Mechanism::Sha1, Mechanism::Sha256]
                } else {
                    existing.clone()
                }
            });
            let creds = users::credentials(ctx.state, &name.name, pwd, !u.digest_password, &mechs)?;
            d.insert("credentials", creds);
        } else if let Some(mechs) = &u.mechanisms {
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
        if let Some(r) = &u.roles {
            roles::check_exist(ctx.state, r)?;
            d.insert("roles", roles::to_bson(r));
        }
        u.store(ctx.state, d, false)?;
        reply::ok(doc! {})
    }
}
