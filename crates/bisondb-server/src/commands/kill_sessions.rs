//! `killSessions`: ends the cursors of the caller's sessions named by id (all
//! of the caller's sessions for an empty list). The sessions stay usable.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;
use crate::sessions::{self, Pattern};

pub struct KillSessions {
    patterns: Vec<Pattern>,
}

impl Command for KillSessions {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        // Only the caller's own sessions: with authentication off, the
        // sessions of the unauthenticated user.
        let uid = Some(sessions::no_auth_uid());
        let mut patterns = Vec::new();
        for item in sessions::array_arg(req)? {
            let item = item.map_err(crate::request::invalid_bson)?;
            let id = sessions::parse_lsid(req.name, req.name, item)?;
            patterns.push(Pattern {
                id: Some(id),
                uid,
                nothing: false,
            });
        }
        if patterns.is_empty() {
            patterns.push(Pattern {
                uid,
                ..Pattern::all()
            });
        }
        Ok(KillSessions { patterns })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        ctx.state.sessions.kill(ctx.state, &self.patterns);
        crate::txn::transaction::abort_sessions(ctx.state, |id| {
            self.patterns.iter().any(|p| p.matches_id(id))
        });
        reply::ok(doc! {})
    }
}
