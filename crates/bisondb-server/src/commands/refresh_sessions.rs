//! `refreshSessions`: marks logical sessions as used now, so they do not
//! expire (drivers send it for sessions kept idle).

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::request::CommandRequest;
use crate::{reply, sessions};

pub struct RefreshSessions {
    ids: Vec<sessions::SessionId>,
}

impl Command for RefreshSessions {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut ids = Vec::new();
        for item in sessions::array_arg(req)? {
            let item = item.map_err(crate::request::invalid_bson)?;
            ids.push(sessions::parse_lsid(req.name, req.name, item)?);
        }
        Ok(RefreshSessions { ids })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.sessions.refresh(&self.ids);
        reply::ok(doc! {})
    }
}
