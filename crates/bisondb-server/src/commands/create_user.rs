//! `createUser`: a user of the command's database, stored in
//! `admin.system.users` with SCRAM credentials (never the password). Users
//! of `$external` (MONGODB-X509) have no password.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::scram::Mechanism;
use crate::auth::users::{self, UserFields};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct CreateUser(UserFields);

impl Command for CreateUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let u = UserFields::parse(req)?;
        if u.roles.is_none() {
            return Err(fields::missing_field(req.name, "roles"));
        }
        if u.name.name.is_empty() {
            return Err(MongoError::bad_value(
                "User document needs 'user' field to be non-empty",
            ));
        }
        Ok(CreateUser(u))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut u = self.0;
        let name = u.name.clone();
        if name.db == "local" {
            return Err(MongoError::bad_value(
                "Cannot create users in the local database",
            ));
        }
        let external = name.db == "$external";
        let credentials = match (&u.pwd, external) {
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
                let mechs = u
                    .mechanisms
                    .clone()
                    .unwrap_or_else(|| vec![Mechanism::Sha1, Mechanism::Sha256]);
                users::credentials(ctx.state, &name.name, pwd, !u.digest_password, &mechs)?
            }
        };
        let granted = u.roles.take().unwrap_or_default();
        roles::check_exist(ctx.state, &granted)?;
        let d = doc! {
            "_id": name.id(),
            "userId": users::new_uuid(),
            "user": &name.name,
            "db": &name.db,
            "credentials": credentials,
            "roles": roles::to_bson(&granted),
        };
        u.store(ctx.state, d, true)?;
        reply::ok(doc! {})
    }
}
