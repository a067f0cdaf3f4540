//! `dropDatabase`: removes every collection of the database, and its
//! profiling settings.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct DropDatabase {
    db: String,
}

impl Command for DropDatabase {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // A write concern a standalone server cannot satisfy fails the command.
        crate::fields::write::write_concern(req.name, req.body)?;
        for el in req.body.iter() {
            let (k, _) = el.map_err(crate::request::invalid_bson)?;
            fields::check_known(req.name, k.as_str(), &["dropDatabase"])?;
        }
        Ok(DropDatabase { db: req.db.clone() })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.storage.drop_database(&self.db)?;
        ctx.state.cursors.kill_database(&self.db);
        // Profiling settings belong to the database and go with it, as in mongod.
        ctx.state.profiler.forget(&self.db);
        reply::ok(doc! {"dropped": self.db})
    }
}
