//! `dropAllRolesFromDatabase`: removes every user-defined role of the
//! command's database (and takes them from their holders); `n` counts them.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::drop_role::forget_roles;
use super::{Command, Context};
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropAllRolesFromDatabase {
    db: String,
}

impl Command for DropAllRolesFromDatabase {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        for el in req.body.iter() {
            let (k, _) = el.map_err(crate::request::invalid_bson)?;
            if k.as_str() != req.name {
                fields::check_known(req.name, k.as_str(), &[])?;
            }
        }
        Ok(DropAllRolesFromDatabase { db: req.db.clone() })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut dropped = Vec::new();
        for r in users::all(&ctx.state.storage, users::ROLES)? {
            if r.get_str("db").ok() == Some(self.db.as_str()) {
                if let Ok(role) = r.get_str("role") {
                    let name = Name::new(role, &self.db);
                    if users::remove(&ctx.state.storage, users::ROLES, &name)? {
                        dropped.push(name);
                    }
                }
            }
        }
        forget_roles(ctx.state, &dropped)?;
        ctx.state.auth.changed();
        reply::ok(doc! {"n": dropped.len() as i32})
    }
}
