//! `dropUser`: removes one user of the command's database.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropUser {
    name: Name,
}

impl Command for DropUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut name = Name::new("", req.db.clone());
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "dropUser" => name.name = fields::as_str(req.name, "dropUser", v)?.to_string(),
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(DropUser { name })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if !users::remove(&ctx.state.storage, users::USERS, &self.name)? {
            return Err(users::user_not_found(&self.name));
        }
        ctx.state.auth.changed();
        reply::ok(doc! {})
    }
}
