//! `grantRolesToUser`: adds roles to a user's `roles`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::RoleGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct GrantRolesToUser(RoleGrant);

impl Command for GrantRolesToUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(GrantRolesToUser(RoleGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, true, true)?;
        reply::ok(doc! {})
    }
}
