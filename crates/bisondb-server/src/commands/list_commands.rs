//! `listCommands`: every command in the registry with its help text.

use bisondb_error::MongoResult;
use bson::{doc, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::registry::COMMANDS;
use crate::reply;
use crate::request::CommandRequest;

pub struct ListCommands;

impl Command for ListCommands {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(ListCommands)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut commands = Document::new();
        let test_commands = ctx.state.config.enable_test_commands;
        // Names BisonDB knows but does not serve are left out.
        let listed = COMMANDS
            .iter()
            .filter(|c| c.handler().is_some() && (test_commands || !c.test_only));
        for c in listed {
            commands.insert(
                c.name,
                doc! {"help": c.help, "adminOnly": c.admin_only, "requiresAuth": false, "secondaryOk": true, "apiVersions": []},
            );
        }
        reply::ok(doc! {"commands": commands})
    }
}
