//! `getLog`: the names of the in-memory logs, or their recent lines.

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct GetLog {
    which: String,
}

impl Command for GetLog {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let v = req
            .body
            .get("getLog")
            .map_err(crate::request::invalid_bson)?;
        let which = match v {
            Some(v) => fields::as_str(req.name, "getLog", v)?.to_string(),
            None => return Err(fields::missing_field(req.name, "getLog")),
        };
        Ok(GetLog { which })
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        match self.which.as_str() {
            "*" => reply::ok(doc! {"names": ["global", "startupWarnings"]}),
            "global" => {
                let lines = crate::logbuf::recent();
                let total = crate::logbuf::total_written();
                reply::ok(doc! {
                    "totalLinesWritten": total as i64,
                    "log": lines.into_iter().map(Bson::String).collect::<Vec<_>>(),
                })
            }
            "startupWarnings" => reply::ok(doc! {"totalLinesWritten": 0i64, "log": []}),
            other => Err(MongoError::new(
                bisondb_error::ErrorCode::Other(72),
                format!("No log named '{other}'"),
            )),
        }
    }
}
