//! `connectionStatus`: who is authenticated on this connection, the roles
//! that user holds (inherited ones included) and, with `showPrivileges`,
//! the privileges they grant.

use bisondb_error::MongoResult;
use bson::{doc, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct ConnectionStatus {
    show_privileges: bool,
}

impl Command for ConnectionStatus {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut show_privileges = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "connectionStatus" => {}
                "showPrivileges" => show_privileges = fields::as_bool(req.name, k.as_str(), v)?,
                other => fields::check_known(req.name, other, &[])?,
            }
        }
        Ok(ConnectionStatus { show_privileges })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let auth = crate::auth::connection_status(ctx, self.show_privileges)?;
        reply::ok(doc! {"authInfo": auth})
    }
}
