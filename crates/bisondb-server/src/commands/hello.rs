//! `hello` (and the legacy `isMaster` / `ismaster`): the handshake every driver sends
//! first. Reports a writable standalone with mongod 8.0's limits (or, with
//! `--replSet`, the set's member: `crate::repl::hello`; on the `postgres`
//! engine a mongos: `msg: "isdbgrid"` and no `readOnly`, as mongos 8
//! answers, so drivers given several servers spread load over them and
//! retry writes), records the client metadata, and agrees on wire
//! compression.

use bisondb_error::{MongoError, MongoResult};
use bisondb_wire::Compressor;
use bson::{doc, Bson, DateTime, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

/// MongoDB 8.0's wire version.
pub const MAX_WIRE_VERSION: i32 = 25;

pub struct Hello {
    legacy: bool,
    hello_ok: bool,
    compression: Vec<String>,
    client: Option<bson::Document>,
    /// `saslSupportedMechs: "<db>.<user>"`: answer that user's mechanisms.
    sasl_supported_mechs: Option<crate::auth::Name>,
    /// `speculativeAuthenticate`: a `saslStart` run with the handshake.
    speculative: Option<super::sasl_start::SaslStart>,
    /// `speculativeAuthenticate` with `authenticate` (MONGODB-X509),
    /// answered by `authenticate::speculative`.
    speculative_x509: Option<RawDocumentBuf>,
}

impl Command for Hello {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let legacy = req.name != "hello";
        let mut h = Hello {
            legacy,
            hello_ok: false,
            compression: Vec::new(),
            client: None,
            sasl_supported_mechs: None,
            speculative_x509: None,
            speculative: None,
        };
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "helloOk" => h.hello_ok = fields::as_bool(req.name, "helloOk", v)?,
                "compression" => {
                    for c in fields::as_array(req.name, "compression", v)? {
                        match c.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::String(s) => h.compression.push(s.to_string()),
                            other => {
                                return Err(fields::wrong_type(
                                    req.name,
                                    "compression",
                                    other,
                                    "string",
                                ))
                            }
                        }
                    }
                }
                "client" => {
                    h.client = Some(fields::to_document(fields::as_doc(req.name, "client", v)?)?)
                }
                "saslSupportedMechs" => {
                    let s = fields::as_str(req.name, "saslSupportedMechs", v)?;
                    h.sasl_supported_mechs = s
                        .split_once('.')
                        .map(|(db, user)| crate::auth::Name::new(user, db));
                }
                // A speculative `saslStart` that cannot even be read is left
                // out, as mongod does: the driver then authenticates anew.
                "speculativeAuthenticate" => {
                    if let RawBsonRef::Document(d) = v {
                        if d.get("saslStart").ok().flatten().is_some() {
                            h.speculative =
                                super::sasl_start::parse_start("saslStart", d, &req.db).ok();
                        } else if d.get("authenticate").ok().flatten().is_some() {
                            h.speculative_x509 = Some(d.to_owned());
                        }
                    }
                }
                // Everything else (topologyVersion, maxAwaitTimeMS,
                // loadBalanced, backpressure, ...) concerns replica sets, auth or newer
                // driver features; the handshake must never fail on a field a newer
                // driver adds, so they are accepted and ignored.
                _ => {}
            }
        }
        Ok(h)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if let Some(client) = self.client {
            if ctx.conn.client_metadata.is_some() {
                return Err(MongoError::new(
                    bisondb_error::ErrorCode::Other(186),
                    "The client metadata document may only be sent in the first hello",
                ));
            }
            tracing::info!(target: "NETWORK", id = crate::log::ids::CLIENT_METADATA,
                conn = ctx.conn.id, remote = %ctx.conn.peer, client = format!("conn{}", ctx.conn.id),
                doc = ?crate::log::Json::doc(&client), "client metadata");
            ctx.conn.client_metadata = Some(client);
            // Compression is agreed in the first handshake only.
            ctx.conn.compressors = self
                .compression
                .iter()
                .filter_map(|c| supported_compressor(c))
                .collect();
        }
        let mut d = doc! {};
        let writable_key = if self.legacy {
            "ismaster"
        } else {
            "isWritablePrimary"
        };
        let repl = ctx.state.repl();
        d.insert(writable_key, true);
        if repl.is_mongos() {
            d.insert("msg", "isdbgrid");
        }
        if self.hello_ok {
            d.insert("helloOk", true);
        }
        d.insert("topologyVersion", repl.topology_version());
        if repl.enabled() {
            crate::repl::hello::add_fields(repl, &mut d, writable_key);
        }
        d.insert(
            "maxBsonObjectSize",
            bisondb_wire::MAX_BSON_OBJECT_SIZE as i32,
        );
        d.insert("maxMessageSizeBytes", bisondb_wire::MAX_MESSAGE_SIZE as i32);
        d.insert("maxWriteBatchSize", 100_000i32);
        d.insert("localTime", DateTime::now());
        d.insert(
            "logicalSessionTimeoutMinutes",
            i32::try_from(ctx.state.sessions.timeout_minutes()).unwrap_or(i32::MAX),
        );
        d.insert("connectionId", Bson::Int64(ctx.conn.id));
        d.insert("minWireVersion", 0i32);
        d.insert("maxWireVersion", MAX_WIRE_VERSION);
        if !repl.is_mongos() {
            d.insert("readOnly", false);
        }
        if !ctx.conn.compressors.is_empty() {
            let names: Vec<Bson> = ctx
                .conn
                .compressors
                .iter()
                .map(|c| Bson::String(c.name().to_string()))
                .collect();
            d.insert("compression", names);
        }
        if let Some(user) = &self.sasl_supported_mechs {
            if let Some(u) =
                crate::auth::users::get(&ctx.state.storage, crate::auth::users::USERS, user)?
            {
                let mechs: Vec<Bson> = crate::auth::users::mechanisms(&u)
                    .into_iter()
                    .filter(|m| m != "external")
                    .map(Bson::String)
                    .collect();
                d.insert("saslSupportedMechs", mechs);
            }
        }
        // A failed speculative authentication is no error of the handshake:
        // the reply leaves the field out (the failure is logged).
        if let Some(start) = self.speculative {
            if let Ok(r) = start.start(ctx, true) {
                d.insert("speculativeAuthenticate", r);
            }
        }
        if let Some(request) = &self.speculative_x509 {
            if let Some(done) = super::authenticate::speculative(ctx, request) {
                d.insert("speculativeAuthenticate", done);
            }
        }
        reply::ok(d)
    }
}

pub use crate::repl::process_id;

/// For an awaitable hello, how long to hold it at most and the receiver
/// that ends the wait early when the topology changes.
pub fn awaitable_hello(
    body: &bson::RawDocument,
    state: &crate::state::ServerState,
) -> Option<(std::time::Duration, tokio::sync::watch::Receiver<i64>)> {
    let repl = state.repl();
    let counter = repl.topology_counter();
    let delay = awaitable_delay(body, counter)?;
    let mut topology = repl.watch_topology();
    // A change between reading the counter and subscribing: answer now.
    if *topology.borrow_and_update() != counter {
        return None;
    }
    Some((delay, topology))
}

/// mongod's cap on `maxAwaitTimeMS` for awaitable hello is the client's value; we
/// cap it so a bad value cannot park a connection for long.
const MAX_AWAIT: std::time::Duration = std::time::Duration::from_secs(60);

/// For an awaitable hello (the drivers' streaming monitor: `topologyVersion` equal to
/// ours, `counter` the current one, plus `maxAwaitTimeMS`), how long to hold the
/// reply at most. Until the topology changes (a replica set's initiate or
/// reconfig; a standalone's never does) mongod answers only when the time is up;
/// answering at once makes every monitor spin in a tight hello loop.
pub fn awaitable_delay(body: &bson::RawDocument, counter: i64) -> Option<std::time::Duration> {
    let name = body.iter().next()?.ok()?.0.as_str();
    if !matches!(name, "hello" | "isMaster" | "ismaster") {
        return None;
    }
    let tv = match body.get("topologyVersion").ok()?? {
        RawBsonRef::Document(d) => d,
        _ => return None,
    };
    let same_process =
        matches!(tv.get("processId").ok()?, Some(RawBsonRef::ObjectId(id)) if id == process_id());
    if !same_process {
        // A different processId means the client saw another server: answer now.
        return None;
    }
    let seen = match tv.get("counter").ok()? {
        Some(RawBsonRef::Int64(c)) => c,
        Some(RawBsonRef::Int32(c)) => i64::from(c),
        _ => return None,
    };
    if seen != counter {
        // The client has not seen the current topology yet.
        return None;
    }
    let ms = match body.get("maxAwaitTimeMS").ok()?? {
        RawBsonRef::Int32(i) => i64::from(i),
        RawBsonRef::Int64(i) => i,
        RawBsonRef::Double(d) => d as i64,
        _ => return None,
    };
    let ms = u64::try_from(ms).ok()?;
    Some(std::time::Duration::from_millis(ms).min(MAX_AWAIT))
}

/// The compressors this server offers, by mongod's names.
fn supported_compressor(name: &str) -> Option<Compressor> {
    match Compressor::from_name(name) {
        Some(Compressor::Noop) | None => None,
        some => some,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    #[test]
    fn awaitable_hello_waits_only_for_our_topology() {
        let ours = rawdoc! {"hello": 1, "topologyVersion": {"processId": process_id(), "counter": 0i64}, "maxAwaitTimeMS": 10000};
        assert_eq!(
            awaitable_delay(&ours, 0),
            Some(std::time::Duration::from_secs(10))
        );
        assert_eq!(awaitable_delay(&ours, 1), None);
        let other = rawdoc! {"hello": 1, "topologyVersion": {"processId": bson::oid::ObjectId::new(), "counter": 0i64}, "maxAwaitTimeMS": 10000};
        assert_eq!(awaitable_delay(&other, 0), None);
        let plain = rawdoc! {"hello": 1};
        assert_eq!(awaitable_delay(&plain, 0), None);
        let ping = rawdoc! {"ping": 1, "maxAwaitTimeMS": 5};
        assert_eq!(awaitable_delay(&ping, 0), None);
        let huge = rawdoc! {"isMaster": 1, "topologyVersion": {"processId": process_id(), "counter": 0i64}, "maxAwaitTimeMS": 9_000_000_000i64};
        assert_eq!(awaitable_delay(&huge, 0), Some(MAX_AWAIT));
    }
}
