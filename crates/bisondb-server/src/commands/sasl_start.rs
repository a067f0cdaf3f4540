//! `saslStart`: the first message of a SASL conversation (SCRAM-SHA-256 or
//! SCRAM-SHA-1; `auth::sasl_start` does the work). With
//! `options: {skipEmptyExchange: true}` the conversation ends with the
//! server's final message instead of one more empty round trip.

use bisondb_error::MongoResult;
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

pub struct SaslStart {
    mechanism: String,
    payload: Vec<u8>,
    skip_empty_exchange: bool,
    db: String,
}

/// A SASL payload: binary data (what drivers send) or a string.
pub fn payload_of(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<Vec<u8>> {
    match v {
        RawBsonRef::Binary(b) => Ok(b.bytes.to_vec()),
        RawBsonRef::String(s) => Ok(s.as_bytes().to_vec()),
        other => Err(fields::wrong_type(cmd, "payload", other, "binData")),
    }
}

/// The `payload`/`done`/`conversationId` reply of both SASL commands.
pub fn sasl_reply(r: &crate::auth::SaslReply) -> bson::Document {
    doc! {
        "conversationId": 1i32,
        "done": r.done,
        "payload": Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: r.payload.clone(),
        }),
    }
}

/// Reads `saslStart`'s fields from `body` (also `hello`'s
/// `speculativeAuthenticate` document).
pub fn parse_start(cmd: &str, body: &bson::RawDocument, db: &str) -> MongoResult<SaslStart> {
    let mut s = SaslStart {
        mechanism: String::new(),
        payload: Vec::new(),
        skip_empty_exchange: false,
        db: db.to_string(),
    };
    let mut has_mechanism = false;
    let mut has_payload = false;
    for el in body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "saslStart" | "autoAuthorize" => {}
            "mechanism" => {
                s.mechanism = fields::as_str(cmd, "mechanism", v)?.to_string();
                has_mechanism = true;
            }
            "payload" => {
                s.payload = payload_of(cmd, v)?;
                has_payload = true;
            }
            "db" => s.db = fields::as_str(cmd, "db", v)?.to_string(),
            "options" => {
                let o = fields::as_doc(cmd, "options", v)?;
                if let Some(v) = o
                    .get("skipEmptyExchange")
                    .map_err(crate::request::invalid_bson)?
                {
                    s.skip_empty_exchange = fields::as_bool(cmd, "skipEmptyExchange", v)?;
                }
            }
            other => fields::check_known(cmd, other, &[])?,
        }
    }
    if !has_mechanism {
        return Err(fields::missing_field(cmd, "mechanism"));
    }
    if !has_payload {
        return Err(fields::missing_field(cmd, "payload"));
    }
    Ok(s)
}

impl SaslStart {
    /// Runs the first step; `speculative` when it came in `hello`.
    pub fn start(self, ctx: &mut Context<'_>, speculative: bool) -> MongoResult<bson::Document> {
        let r = crate::auth::sasl_start(
            ctx,
            &self.db,
            &self.mechanism,
            &self.payload,
            self.skip_empty_exchange,
            speculative,
        )?;
        Ok(sasl_reply(&r))
    }
}

impl Command for SaslStart {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        parse_start(req.name, req.body, &req.db)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        reply::ok(self.start(ctx, false)?)
    }
}
