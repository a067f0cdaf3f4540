//! `abortTransaction`: ends the session's transaction, applying nothing. The
//! transaction itself is the session's (`crate::txn::transaction`), which
//! aborts it once this command's body parsed.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::request::CommandRequest;
use crate::{reply, sessions};

pub struct AbortTransaction;

impl Command for AbortTransaction {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        sessions::only_generic_args(req)?;
        Ok(AbortTransaction)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {})
    }
}
