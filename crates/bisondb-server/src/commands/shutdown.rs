//! `shutdown`: stop the server cleanly (listeners close, storage syncs, the socket
//! file is removed). The reply goes out before the connections close.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct Shutdown;

impl Command for Shutdown {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        for el in req.body.iter() {
            let (k, _) = el.map_err(crate::request::invalid_bson)?;
            fields::check_known(req.name, k.as_str(), &["shutdown", "force", "timeoutSecs"])?;
        }
        Ok(Shutdown)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        tracing::info!("shutdown requested by command");
        let state = ctx.state.clone();
        // Let this reply reach the client before connections are told to close.
        std::thread::spawn(move || {
            std::thread::sleep(std::time::Duration::from_millis(50));
            state.request_shutdown();
        });
        reply::ok(doc! {})
    }
}
