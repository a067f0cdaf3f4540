//! Cluster time on the wire, and the read and write concerns a one-member
//! set answers.
//!
//! Once the set is initiated every reply carries `operationTime` (the
//! optime of the last committed write: a client that reads after it reads
//! everything this command did) and `$clusterTime` (`{clusterTime, signature:
//! {hash, keyId}}`). Without access control the signature is mongod's dummy
//! one (20 zero bytes, key id 0); with it, the keys of `admin.system.keys`
//! sign it and a client's time is checked before it counts (`signing.rs`).
//! A request's `$clusterTime` moves the clock forward (gossip).
//!
//! A mongos (`ReplState::is_mongos`, no oplog) ticks the clock once per
//! write command and answers `operationTime` with that tick (a read's is
//! the clock's time); `afterClusterTime` needs no wait there: every write
//! another server acknowledged is committed in the one store, which every
//! new snapshot reads, so the clock only moves to the time asked.
//!
//! Read concern: `local`, `available`, `majority`, `linearizable` and
//! `snapshot` are all served by the one member's latest data (with one
//! member, every committed write is majority-committed); `afterClusterTime`
//! waits until that time is committed (a time ahead of the clock moves it
//! and writes a no-op, as mongod's primary does); `atClusterTime` (with
//! level `snapshot` only, never later than the cluster's time) reads the
//! past (`snapshots.rs`). Write concern: `w: 1`, `"majority"` and
//! `0` are satisfied by the write itself; a number above 1, or a tag
//! mode the configuration does not define, gets mongod's
//! `writeConcernError` (100 UnsatisfiableWriteConcern, 79
//! UnknownReplWriteConcern) beside the applied write, and beside the error
//! of a write that failed, as mongod waits for the write concern of a
//! failed command too ([`BEFORE_WRITE_CONCERN`] names the errors it raises
//! before reading one).

use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::cstr;
use bson::spec::BinarySubtype;
use bson::{doc, RawBinaryRef, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

use super::signing;
use super::ReplState;
use crate::context::Context;
use crate::request::CommandRequest;
use crate::state::ServerState;

/// The levels mongod knows.
const LEVELS: &[&str] = &["local", "available", "majority", "linearizable", "snapshot"];

/// How long `afterClusterTime` waits for a time already handed out to a
/// write in flight to commit.
const IN_FLIGHT_WAIT: Duration = Duration::from_secs(10);

fn cmp_ts(a: Timestamp, b: Timestamp) -> std::cmp::Ordering {
    (a.time, a.increment).cmp(&(b.time, b.increment))
}

/// Before a command runs in replica-set mode: takes the request's
/// `$clusterTime`, checks its `readConcern` and waits for its
/// `afterClusterTime`. The body's generic arguments are read once per
/// request (`CommandRequest::generic`), shared with the checks after.
pub fn before_command(ctx: &mut Context<'_>, req: &CommandRequest<'_>) -> MongoResult<()> {
    let state = ctx.state;
    let repl = state.repl();
    let args = req.generic();
    if !repl.enabled() && !repl.is_mongos() {
        return check_standalone_read_concern(args.read_concern);
    }
    if let Some(ct) = args.cluster_time {
        if let Some(ts) = admit(ctx, ct)? {
            gossip(repl, ts);
        }
    }
    let Some(rc) = args.read_concern else {
        return Ok(());
    };
    let mut after = None;
    let mut at = None;
    let mut level = None;
    for el in rc.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match (k.as_str(), v) {
            ("level", v) => level = Some(parse_level(v)?),
            ("afterClusterTime", RawBsonRef::Timestamp(ts)) => after = Some(ts),
            ("afterClusterTime", other) => {
                return Err(crate::fields::wrong_type(
                    "readConcern",
                    "afterClusterTime",
                    other,
                    "timestamp",
                ))
            }
            ("atClusterTime", RawBsonRef::Timestamp(ts)) => at = Some(ts),
            ("atClusterTime", other) => {
                return Err(crate::fields::wrong_type(
                    "readConcern",
                    "atClusterTime",
                    other,
                    "timestamp",
                ))
            }
            _ => {}
        }
    }
    if let Some(ts) = at {
        check_at_cluster_time(repl, ts, level, after.is_some())?;
    }
    if let Some(ts) = after {
        if level == Some("available") {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "afterClusterTime is not allowed for readConcern level 'available'",
            ));
        }
        if !repl.keeps_cluster_time() {
            return Err(MongoError::new(
                ErrorCode::NotYetInitialized,
                "Cannot read with afterClusterTime before the replica set is initiated",
            ));
        }
        wait_for(state, ts)?;
    }
    Ok(())
}

/// `readConcern.atClusterTime` (a read at a point in time,
/// `snapshots.rs`): only with level `snapshot`, not with
/// `afterClusterTime`, not null, not later than the cluster's time.
fn check_at_cluster_time(
    repl: &ReplState,
    ts: Timestamp,
    level: Option<&str>,
    with_after: bool,
) -> MongoResult<()> {
    let invalid = |m: String| Err(MongoError::new(ErrorCode::InvalidOptions, m));
    if level != Some("snapshot") {
        return invalid("readConcern atClusterTime is only valid with level 'snapshot'".into());
    }
    if with_after {
        return invalid("Can not specify both afterClusterTime and atClusterTime".into());
    }
    if ts.time == 0 && ts.increment == 0 {
        return invalid("readConcern atClusterTime cannot be a null timestamp".into());
    }
    if !repl.keeps_cluster_time() {
        return Err(MongoError::new(
            ErrorCode::NotYetInitialized,
            "Cannot read with atClusterTime before the replica set is initiated",
        ));
    }
    let now = repl.clock().now();
    if cmp_ts(ts, now) == std::cmp::Ordering::Greater {
        return invalid(format!(
            "readConcern atClusterTime value must not be greater than the current clusterTime. Requested clusterTime: Timestamp({}, {}); current clusterTime: Timestamp({}, {})",
            ts.time, ts.increment, now.time, now.increment
        ));
    }
    Ok(())
}

/// `readConcern.level`: one of mongod's levels.
fn parse_level(v: RawBsonRef<'_>) -> MongoResult<&str> {
    match v {
        RawBsonRef::String(s) if LEVELS.contains(&s) => Ok(s),
        RawBsonRef::String(s) => Err(MongoError::new(
            ErrorCode::FailedToParse,
            format!("Enumeration value '{s}' for field 'readConcern.level' is not a valid value."),
        )),
        other => Err(crate::fields::wrong_type(
            "readConcern",
            "level",
            other,
            "string",
        )),
    }
}

/// A standalone's read concern, as mongod's `waitForReadConcern` answers it
/// without replication: an unknown level fails to parse; `linearizable` and
/// `snapshot` need a replica set (123 NotAReplicaSet, so a snapshot
/// session's reads fail there as drivers' tests expect); `afterClusterTime`
/// and `atClusterTime` need replication (20 IllegalOperation). `local`,
/// `available` and `majority` read the latest data.
fn check_standalone_read_concern(read_concern: Option<&RawDocument>) -> MongoResult<()> {
    let Some(rc) = read_concern else {
        return Ok(());
    };
    let mut level = None;
    let mut at = None;
    for el in rc.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "level" => level = Some(parse_level(v)?),
            k @ ("afterClusterTime" | "atClusterTime") => at = Some(k),
            _ => {}
        }
    }
    match level {
        Some("linearizable") => Err(MongoError::new(
            ErrorCode::NotAReplicaSet,
            "node needs to be a replica set member to use read concern",
        )),
        Some("snapshot") => Err(MongoError::new(
            ErrorCode::NotAReplicaSet,
            "node needs to be a replica set member to use readConcern: snapshot",
        )),
        _ => match at {
            Some(name) => Err(MongoError::new(
                ErrorCode::IllegalOperation,
                format!("Cannot specify {name} readConcern without replication enabled"),
            )),
            None => Ok(()),
        },
    }
}

/// `readConcern: {level: "snapshot"}` outside a transaction: mongod serves
/// it to the commands that read at a snapshot (`snapshot_reader`) and
/// refuses it to every other one with 72 InvalidOptions.
pub fn check_snapshot_outside_txn(
    req: &CommandRequest<'_>,
    snapshot_reader: bool,
) -> MongoResult<()> {
    if snapshot_reader {
        return Ok(());
    }
    let name = req.name;
    let Some(rc) = req.generic().read_concern else {
        return Ok(());
    };
    if matches!(rc.get("level"), Ok(Some(RawBsonRef::String("snapshot")))) {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!(
                "Command {name} does not support {{ readConcern: {{ level: \"snapshot\", provenance: \"clientSupplied\" }} }}"
            ),
        ));
    }
    Ok(())
}

/// An aggregation that writes (ends in `$out` or `$merge`) cannot read at
/// `readConcern: {level: "linearizable"}`: 72 InvalidOptions naming the
/// stage, as mongod.
pub fn check_linearizable_aggregate(body: &RawDocument) -> MongoResult<()> {
    let Ok(Some(RawBsonRef::Document(rc))) = body.get("readConcern") else {
        return Ok(());
    };
    if !matches!(
        rc.get("level"),
        Ok(Some(RawBsonRef::String("linearizable")))
    ) {
        return Ok(());
    }
    let Ok(Some(RawBsonRef::Array(stages))) = body.get("pipeline") else {
        return Ok(());
    };
    let last = stages.into_iter().last().and_then(Result::ok);
    if let Some(RawBsonRef::Document(stage)) = last {
        if let Some(Ok((name, _))) = stage.iter().next() {
            let name = name.as_str();
            if name == "$out" || name == "$merge" {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("{name} cannot be used with a 'linearizable' read concern level"),
                ));
            }
        }
    }
    Ok(())
}

/// The time of a request's `$clusterTime` that may move the clock: any,
/// without access control; with it, one whose signature this server's keys
/// check (`signing::Keys::validate`), unless the user holds
/// `advanceClusterTime`. Before authentication an unsigned time is ignored
/// rather than refused, as mongod.
fn admit(ctx: &mut Context<'_>, ct: &RawDocument) -> MongoResult<Option<Timestamp>> {
    let state = ctx.state;
    if !state.auth.enabled {
        return Ok(match ct.get("clusterTime") {
            Ok(Some(RawBsonRef::Timestamp(ts))) => Some(ts),
            _ => None,
        });
    }
    let Some(sent) = signing::Sent::parse(ct)? else {
        return Ok(None);
    };
    if ctx.conn.auth.user.is_none() && sent.proof.is_none() {
        return Ok(None);
    }
    if may_advance(ctx)? {
        return Ok(Some(sent.time));
    }
    state.repl().keys().validate(&state.storage, &sent)?;
    Ok(Some(sent.time))
}

/// Whether the connection may move the cluster time without a signature:
/// its user holds `advanceClusterTime` on the cluster.
fn may_advance(ctx: &mut Context<'_>) -> MongoResult<bool> {
    crate::auth::has_cluster_action(ctx, crate::auth::Action::AdvanceClusterTime)
}

/// A client's cluster time moves ours forward; mongod refuses one more
/// than a year ahead of its wall clock, and so does this.
fn gossip(repl: &ReplState, ts: Timestamp) {
    let wall = super::wall_ms() / 1000;
    if i64::from(ts.time) <= wall + 365 * 24 * 3600 && repl.keeps_cluster_time() {
        repl.clock().advance_to(ts);
    }
}

/// Waits until a write at `ts` or later is committed.
fn wait_for(state: &ServerState, ts: Timestamp) -> MongoResult<()> {
    let repl = state.repl();
    if repl.is_mongos() {
        repl.clock().advance_to(ts);
        return Ok(());
    }
    if cmp_ts(repl.last_write().0, ts).is_ge() {
        return Ok(());
    }
    if cmp_ts(repl.clock().now(), ts).is_lt() {
        // A time no write has reached: move there with a no-op, as mongod's
        // primary does for a read after a time it has not seen.
        repl.clock().advance_to(ts);
        repl.oplog()
            .noop(&state.storage, "read after a future cluster time")?;
        return Ok(());
    }
    let until = Instant::now() + IN_FLIGHT_WAIT;
    while cmp_ts(repl.last_write().0, ts).is_lt() {
        if Instant::now() >= until {
            return Err(MongoError::new(
                ErrorCode::MaxTimeMSExpired,
                "timed out waiting for afterClusterTime to be committed",
            ));
        }
        bisondb_js::deadline::check()?;
        std::thread::sleep(Duration::from_micros(200));
    }
    Ok(())
}

/// Errors mongod raises before it reads a command's write concern (a
/// malformed one, authorization, a command it does not know, the node's
/// state, a write concern inside a transaction): their replies carry no
/// `writeConcernError`. Every other failed write still waits for its write
/// concern and reports it (pymongo then raises the write concern error).
const BEFORE_WRITE_CONCERN: &[i32] = &[2, 9, 13, 14, 59, 72, 10107, 13435];

/// After a command, in an initiated set: the write concern's error (for a
/// write command, `writes`, unless it failed before reading its write
/// concern), then `$clusterTime` and `operationTime`, appended as raw BSON.
pub fn finish_reply(
    ctx: &mut Context<'_>,
    req: &CommandRequest<'_>,
    writes: bool,
    reply: &mut RawDocumentBuf,
) {
    let state = ctx.state;
    let repl = state.repl();
    if !repl.keeps_cluster_time() {
        return;
    }
    // The reply is read only when the write concern cannot be satisfied.
    let wce = match req.generic().write_concern {
        Some(wc) if writes => write_concern_error(wc),
        _ => None,
    };
    if let Some(wce) = wce {
        let ok = matches!(reply.get("ok"), Ok(Some(RawBsonRef::Double(d))) if d == 1.0)
            || matches!(reply.get("ok"), Ok(Some(RawBsonRef::Int32(1))));
        let waits = ok
            || !matches!(reply.get("code"), Ok(Some(RawBsonRef::Int32(c))) if BEFORE_WRITE_CONCERN.contains(&c));
        if waits
            && !reply.as_bytes().is_empty()
            && reply.get("writeConcernError").ok().flatten().is_none()
        {
            append_doc(reply, "writeConcernError", &wce);
        }
    }
    let operation_time = if !repl.is_mongos() {
        repl.last_write().0
    } else if writes {
        let ts = repl.clock().tick();
        repl.note_write(ts, super::wall_ms());
        ts
    } else {
        repl.clock().now()
    };
    let cluster_time = repl.clock().now();
    if let Some((hash, key_id)) = signature(ctx, cluster_time) {
        // Sized once, as the entries of the oplog: grown from 5 bytes,
        // these two took eight reallocations per reply.
        let mut signature = super::oplog::with_capacity(64);
        signature.append(
            cstr!("hash"),
            RawBinaryRef {
                subtype: BinarySubtype::Generic,
                bytes: &hash,
            },
        );
        signature.append(cstr!("keyId"), key_id);
        let mut signed = super::oplog::with_capacity(96);
        signed.append(cstr!("clusterTime"), cluster_time);
        signed.append(cstr!("signature"), signature);
        reply.append(cstr!("$clusterTime"), signed);
    }
    reply.append(cstr!("operationTime"), operation_time);
}

/// The signature a reply's `$clusterTime` carries: the dummy one without
/// access control or for a user with `advanceClusterTime`, else the
/// current key's. `None` (no `$clusterTime` at all, as mongod without keys)
/// when no key could be read or made.
fn signature(ctx: &mut Context<'_>, time: Timestamp) -> Option<(signing::Proof, i64)> {
    let dummy = Some(([0u8; 20], 0));
    if !ctx.state.auth.enabled || may_advance(ctx).unwrap_or(false) {
        return dummy;
    }
    if time.time == 0 {
        // The clock has not started (a reply racing `replSetInitiate`'s
        // first entry): nothing worth a key, and a key made for time 0
        // would have expired at once.
        return None;
    }
    match ctx.state.repl().keys().sign(&ctx.state.storage, time) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(target: "REPL", error = %e, "cannot sign the cluster time");
            None
        }
    }
}

fn append_doc(reply: &mut RawDocumentBuf, key: &'static str, d: &bson::Document) {
    if let (Ok(k), Ok(raw)) = (crate::reply::key(key), RawDocumentBuf::try_from(d)) {
        reply.append(k, raw);
    }
}

/// mongod's `writeConcernError` for a `w` (of the request's
/// `writeConcern`, `wc`) one member cannot satisfy.
fn write_concern_error(wc: &RawDocument) -> Option<bson::Document> {
    let w = wc.get("w").ok().flatten()?;
    let wtimeout = match wc.get("wtimeout").ok().flatten() {
        Some(RawBsonRef::Int32(i)) => i64::from(i),
        Some(RawBsonRef::Int64(i)) => i,
        Some(RawBsonRef::Double(d)) => d as i64,
        _ => 0,
    };
    let (code, msg, w_value) = match w {
        RawBsonRef::Int32(n) if n > 1 => (
            100,
            "Not enough data-bearing nodes".to_string(),
            bson::Bson::Int32(n),
        ),
        RawBsonRef::Int64(n) if n > 1 => (
            100,
            "Not enough data-bearing nodes".to_string(),
            bson::Bson::Int64(n),
        ),
        RawBsonRef::Double(n) if n > 1.0 => (
            100,
            "Not enough data-bearing nodes".to_string(),
            bson::Bson::Double(n),
        ),
        RawBsonRef::String(s) if s != "majority" => (
            79,
            format!("unrecognized getLastError mode: {s}"),
            bson::Bson::String(s.to_string()),
        ),
        _ => return None,
    };
    let code_name = ErrorCode::from_code(code).name().into_owned();
    Some(doc! {
        "code": code,
        "codeName": code_name,
        "errmsg": msg,
        "errInfo": {"writeConcern": {"w": w_value, "wtimeout": wtimeout, "provenance": "clientSupplied"}},
    })
}
