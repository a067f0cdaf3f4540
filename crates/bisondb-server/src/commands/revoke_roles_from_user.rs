//! `revokeRolesFromUser`: takes roles from a user's `roles`.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::auth::roles::RoleGrant;
use crate::reply;
use crate::request::CommandRequest;

pub struct RevokeRolesFromUser(RoleGrant);

impl Command for RevokeRolesFromUser {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(RevokeRolesFromUser(RoleGrant::parse(req)?))
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        self.0.apply(ctx.state, true, false)?;
        reply::ok(doc! {})
    }
}
