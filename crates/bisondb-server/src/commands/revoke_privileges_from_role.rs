//! `revokePrivilegesFromRole`: takes actions of privileges away from a user-defined role.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::PrivilegeGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct RevokePrivilegesFromRole(PrivilegeGrant);

impl Command for RevokePrivilegesFromRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(RevokePrivilegesFromRole(PrivilegeGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, false)?;
        reply::ok(doc! {})
    }
}
