//! `listCommands`: every command the server serves, with its help text.
//!
//! The table it lists is the registry's; the registry hands its entries in
//! ([`ListCommands::execute`]'s `served`), so that `commands/` never imports
//! the registry that imports it.

use bisondb_error::MongoResult;
use bson::{doc, Document, RawDocumentBuf};

use super::Context;
use crate::reply;
use crate::request::CommandRequest;

/// What `listCommands` shows of one served command.
pub struct Listed {
    pub name: &'static str,
    pub help: &'static str,
    pub admin_only: bool,
    /// Shown only when test commands are enabled.
    pub test_only: bool,
}

pub struct ListCommands;

impl ListCommands {
    pub fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(ListCommands)
    }

    /// Lists `served`, the commands that have a handler, in their order.
    pub fn execute(
        self,
        ctx: &mut Context<'_>,
        served: impl Iterator<Item = Listed>,
    ) -> MongoResult<RawDocumentBuf> {
        let mut commands = Document::new();
        let test_commands = ctx.state.config.enable_test_commands;
        for c in served.filter(|c| test_commands || !c.test_only) {
            commands.insert(
                c.name,
                doc! {"help": c.help, "adminOnly": c.admin_only, "requiresAuth": false, "secondaryOk": true, "apiVersions": []},
            );
        }
        reply::ok(doc! {"commands": commands})
    }
}
