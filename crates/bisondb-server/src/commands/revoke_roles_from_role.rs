//! `revokeRolesFromRole`: takes roles a user-defined role inherits away.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::RoleGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct RevokeRolesFromRole(RoleGrant);

impl Command for RevokeRolesFromRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(RevokeRolesFromRole(RoleGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, false, false)?;
        reply::ok(doc! {})
    }
}
