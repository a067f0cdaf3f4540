//! `logout`: ends the connection's authentication (mongod 8 still answers
//! it, deprecated); the connection is as unauthenticated as a new one.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct Logout;

impl Command for Logout {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(Logout)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        crate::auth::logout(ctx.conn);
        reply::ok(doc! {})
    }
}
