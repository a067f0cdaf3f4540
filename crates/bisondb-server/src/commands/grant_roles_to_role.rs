//! `grantRolesToRole`: adds roles a user-defined role inherits (no cycle).

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::RoleGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct GrantRolesToRole(RoleGrant);

impl Command for GrantRolesToRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(GrantRolesToRole(RoleGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, false, true)?;
        reply::ok(doc! {})
    }
}
