//! `grantPrivilegesToRole`: adds privileges to a user-defined role.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::PrivilegeGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct GrantPrivilegesToRole(PrivilegeGrant);

impl Command for GrantPrivilegesToRole {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(GrantPrivilegesToRole(PrivilegeGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, true)?;
        reply::ok(doc! {})
    }
}
