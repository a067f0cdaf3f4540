//! `commitTransaction`: applies the session's transaction atomically. The
//! transaction itself is the session's (`crate::txn::transaction`), which
//! commits it once this command's body parsed; a committed transaction's
//! commit, retried, succeeds again.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::request::CommandRequest;
use crate::{reply, sessions};

pub struct CommitTransaction;

impl Command for CommitTransaction {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        sessions::only_generic_args(req)?;
        Ok(CommitTransaction)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(doc! {})
    }
}
