//! `dropRole`: removes a user-defined role, and takes it from every user
//! and role that held it, as mongod does.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles;
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropRole {
    name: Name,
}

/// Removes `dropped` roles from every stored user and role holding them.
pub fn forget_roles(state: &crate::state::ServerState, dropped: &[Name]) -> MongoResult<()> {
    for coll in [users::USERS, users::ROLES] {
        for mut d in users::all(&state.storage, coll)? {
            let held = users::roles_of(&d);
            if !held.iter().any(|r| dropped.contains(r)) {
                continue;
            }
            let key = if coll == users::USERS { "user" } else { "role" };
            let (Ok(n), Ok(db)) = (d.get_str(key), d.get_str("db")) else {
                continue;
            };
            let name = Name::new(n, db);
            roles::change_roles(&mut d, dropped, false);
            roles::save(state, coll, &name, &d)?;
        }
    }
    Ok(())
}

impl Command for DropRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut name = Name::new("", req.db.clone());
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "dropRole" => name.name = fields::as_str(req.name, "dropRole", v)?.to_string(),
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(DropRole { name })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        roles::stored_role(ctx.state, &self.name)?;
        users::remove(&ctx.state.storage, users::ROLES, &self.name)?;
        forget_roles(ctx.state, std::slice::from_ref(&self.name))?;
        ctx.state.auth.changed();
        reply::ok(doc! {})
    }
}
