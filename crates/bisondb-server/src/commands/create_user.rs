//! `createUser`: a user of the command's database, stored in
//! `admin.system.users` with SCRAM credentials (never the password). Users
//! of `$external` (MONGODB-X509) have no password.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::scram::Mechanism;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct CreateUser {
    name: Name,
    pwd: Option<String>,
    digest_password: bool,
    custom_data: Option<Document>,
    roles: Vec<Name>,
    mechanisms: Option<Vec<Mechanism>>,
    restrictions: Option<Bson>,
}

impl Command for CreateUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = CreateUser {
            name: Name::new("", req.db.clone()),
            pwd: None,
            digest_password: true,
            custom_data: None,
            roles: Vec::new(),
            mechanisms: None,
            restrictions: None,
        };
        let mut has_roles = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "createUser" => c.name.name = fields::as_str(n, "createUser", v)?.to_string(),
                "pwd" => c.pwd = Some(fields::as_str(n, "pwd", v)?.to_string()),
                "digestPassword" => c.digest_password = fields::as_bool(n, "digestPassword", v)?,
                "customData" => {
                    c.custom_data = Some(fields::to_document(fields::as_doc(n, "customData", v)?)?)
                }
                "roles" => {
                    c.roles = roles::parse_role_names(n, "roles", v, &req.db)?;
                    has_roles = true;
                }
                "mechanisms" => c.mechanisms = Some(users::parse_mechanisms(n, v)?),
                "authenticationRestrictions" => {
                    fields::as_array(n, "authenticationRestrictions", v)?;
                    c.restrictions = Some(fields::to_bson(v)?);
                }
                other => fields::check_known(n, other, &[])?,
            }
        }
        if !has_roles {
            return Err(fields::missing_field(n, "roles"));
        }
        if c.name.name.is_empty() {
            return Err(MongoError::bad_value(
                "User document needs 'user' field to be non-empty",
            ));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let name = self.name;
        if name.db == "local" {
            return Err(MongoError::bad_value(
                "Cannot create users in the local database",
            ));
        }
        let external = name.db == "$external";
        let credentials = match (&self.pwd, external) {
            (Some(_), true) => {
                return Err(MongoError::bad_value(
                    "Cannot set the password for users defined on the '$external' database",
                ))
            }
            (None, true) => doc! {"external": true},
            (None, false) => {
                return Err(MongoError::bad_value(
                    "Must provide a 'pwd' field for all user documents, except those with '$external' as the user's source db",
                ))
            }
            (Some(pwd), false) => {
                let mechs = self
                    .mechanisms
                    .unwrap_or_else(|| vec![Mechanism::Sha1, Mechanism::Sha256]);
                users::credentials(ctx.state, &name.name, pwd, !self.digest_password, &mechs)?
            }
        };
        roles::check_exist(ctx.state, &self.roles)?;
        let mut d = doc! {
            "_id": name.id(),
            "userId": users::new_uuid(),
            "user": &name.name,
            "db": &name.db,
            "credentials": credentials,
            "roles": roles::to_bson(&self.roles),
        };
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
            true,
            || {
                MongoError::new(
                    ErrorCode::Other(51003),
                    format!("User \"{name}\" already exists"),
                )
            },
            || users::user_not_found(&name),
        )?;
        ctx.state.auth.changed();
        reply::ok(doc! {})
    }
}
