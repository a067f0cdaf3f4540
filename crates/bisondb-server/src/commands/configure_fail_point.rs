//! `configureFailPoint`: turns a fail point on or off (test commands only).
//!
//! `{configureFailPoint: <name>, mode: "alwaysOn" | "off" | {times: n} |
//! {skip: n} | {activationProbability: p}, data: {...}}` against `admin`,
//! answered with `{count: <times the fail point fired before>, ok: 1}` as
//! mongod. The registry serves it only when the server runs with
//! `--setParameter enableTestCommands=1`; the fail points themselves, and
//! what `data` means to each, are in `crate::fail_points`.

use bisondb_error::MongoResult;
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fail_points::{self, Mode};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct ConfigureFailPoint {
    name: String,
    /// Kept unparsed-as-error until the name is known: mongod reports an
    /// unknown fail point before a bad mode.
    mode: MongoResult<Mode>,
    data: MongoResult<Document>,
}

impl Command for ConfigureFailPoint {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        const CMD: &str = "configureFailPoint";
        let body = req.body;
        let name = match body.get(CMD) {
            Ok(Some(v)) => fields::as_str(CMD, CMD, v)?.to_string(),
            Ok(None) => String::new(),
            Err(e) => return Err(crate::request::invalid_bson(e)),
        };
        let mode = Mode::parse(body.get("mode").map_err(crate::request::invalid_bson)?);
        let data = match body.get("data").map_err(crate::request::invalid_bson)? {
            None => Ok(Document::new()),
            Some(RawBsonRef::Document(d)) => fields::to_document(d),
            Some(_) => Err(bisondb_error::MongoError::type_mismatch(
                "the 'data' option must be a JSON object",
            )),
        };
        Ok(ConfigureFailPoint { name, mode, data })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        fail_points::check_name(&self.name)?;
        let mode = self.mode?;
        let data = self.data?;
        let count = ctx.state.fail_points.configure(&self.name, mode, &data)?;
        tracing::warn!(fail_point = %self.name, ?mode, "fail point configured");
        reply::ok(doc! {"count": reply::count(u64::try_from(count).unwrap_or(0))})
    }
}
