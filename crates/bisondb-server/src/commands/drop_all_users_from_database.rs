//! `dropAllUsersFromDatabase`: removes every user of the command's
//! database; `n` counts them.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::users::{self, Name};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropAllUsersFromDatabase {
    db: String,
}

impl Command for DropAllUsersFromDatabase {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        for el in req.body.iter() {
            let (k, _) = el.map_err(crate::request::invalid_bson)?;
            if k.as_str() != req.name {
                fields::check_known(req.name, k.as_str(), &[])?;
            }
        }
        Ok(DropAllUsersFromDatabase { db: req.db.clone() })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut n = 0i32;
        for u in users::all(&ctx.state.storage, users::USERS)? {
            if u.get_str("db").ok() == Some(self.db.as_str()) {
                if let Ok(user) = u.get_str("user") {
                    if users::remove(&ctx.state.storage, users::USERS, &Name::new(user, &self.db))?
                    {
                        n += 1;
                    }
                }
            }
        }
        ctx.state.auth.changed();
        reply::ok(doc! {"n": n})
    }
}
