//! Cluster time on the wire, and the read and write concerns a one-member
//! set answers.
//!
//! Once the set is initiated every reply carries `operationTime` (the
//! optime of the last committed write: a client that reads after it reads
//! everything this command did) and `$clusterTime` (`{clusterTime, signature:
//! {hash: 20 zero bytes, keyId: 0}}`: unsigned, as mongod without keys).
//! A request's `$clusterTime` moves the clock forward (gossip).
//!
//! Read concern: `local`, `available`, `majority`, `linearizable` and
//! `snapshot` are all served by the one member's latest data (with one
//! member, every committed write is majority-committed); `afterClusterTime`
//! waits until that time is committed (a time ahead of the clock moves it
//! and writes a no-op, as mongod's primary does); `atClusterTime` (reading
//! the past) is refused by name. Write concern: `w: 1`, `"majority"` and
//! `0` are satisfied by the write itself; a number above 1, or a tag
//! mode the configuration does not define, gets mongod's
//! `writeConcernError` (100 UnsatisfiableWriteConcern, 79
//! UnknownReplWriteConcern) beside the applied write.

use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::spec::BinarySubtype;
use bson::{doc, Binary, RawBsonRef, RawDocument, RawDocumentBuf, Timestamp};

use super::ReplState;
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
/// `afterClusterTime`.
pub fn before_command(state: &ServerState, body: &RawDocument) -> MongoResult<()> {
    let repl = state.repl();
    if !repl.enabled() {
        return check_standalone_read_concern(body);
    }
    if let Ok(Some(RawBsonRef::Document(ct))) = body.get("$clusterTime") {
        if let Ok(Some(RawBsonRef::Timestamp(ts))) = ct.get("clusterTime") {
            gossip(repl, ts);
        }
    }
    let Ok(Some(RawBsonRef::Document(rc))) = body.get("readConcern") else {
        return Ok(());
    };
    let mut after = None;
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
            ("atClusterTime", _) => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "readConcern atClusterTime (reading at a past cluster time) is not supported",
                ))
            }
            _ => {}
        }
    }
    if let Some(ts) = after {
        if level == Some("available") {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "afterClusterTime is not allowed for readConcern level 'available'",
            ));
        }
        if !repl.is_initiated() {
            return Err(MongoError::new(
                ErrorCode::NotYetInitialized,
                "Cannot read with afterClusterTime before the replica set is initiated",
            ));
        }
        wait_for(state, ts)?;
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
fn check_standalone_read_concern(body: &RawDocument) -> MongoResult<()> {
    let Ok(Some(RawBsonRef::Document(rc))) = body.get("readConcern") else {
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
    name: &str,
    body: &RawDocument,
    snapshot_reader: bool,
) -> MongoResult<()> {
    if snapshot_reader {
        return Ok(());
    }
    let Ok(Some(RawBsonRef::Document(rc))) = body.get("readConcern") else {
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

/// A client's cluster time moves ours forward; mongod refuses one more
/// than a year ahead of its wall clock, and so does this.
fn gossip(repl: &ReplState, ts: Timestamp) {
    let wall = super::wall_ms() / 1000;
    if i64::from(ts.time) <= wall + 365 * 24 * 3600 && repl.is_initiated() {
        repl.clock().advance_to(ts);
    }
}

/// Waits until a write at `ts` or later is committed.
fn wait_for(state: &ServerState, ts: Timestamp) -> MongoResult<()> {
    let repl = state.repl();
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

/// After a command, in an initiated set: the write concern's error (for a
/// write command, `writes`, that succeeded), then `$clusterTime` and
/// `operationTime`.
pub fn finish_reply(
    state: &ServerState,
    body: &RawDocument,
    writes: bool,
    reply: &mut RawDocumentBuf,
) {
    let repl = state.repl();
    if !repl.enabled() || !repl.is_initiated() {
        return;
    }
    let ok = matches!(reply.get("ok"), Ok(Some(RawBsonRef::Double(d))) if d == 1.0)
        || matches!(reply.get("ok"), Ok(Some(RawBsonRef::Int32(1))));
    if writes
        && ok
        && !reply.as_bytes().is_empty()
        && reply.get("writeConcernError").ok().flatten().is_none()
    {
        if let Some(wce) = write_concern_error(body) {
            append_doc(reply, "writeConcernError", &wce);
        }
    }
    let operation_time = repl.last_write().0;
    let cluster_time = repl.clock().now();
    let signed = doc! {
        "clusterTime": cluster_time,
        "signature": {
            "hash": Binary { subtype: BinarySubtype::Generic, bytes: vec![0u8; 20] },
            "keyId": 0i64,
        },
    };
    append_doc(reply, "$clusterTime", &signed);
    if let Ok(k) = crate::reply::key("operationTime") {
        reply.append(k, operation_time);
    }
}

fn append_doc(reply: &mut RawDocumentBuf, key: &'static str, d: &bson::Document) {
    if let (Ok(k), Ok(raw)) = (crate::reply::key(key), RawDocumentBuf::try_from(d)) {
        reply.append(k, raw);
    }
}

/// mongod's `writeConcernError` for a `w` one member cannot satisfy.
fn write_concern_error(body: &RawDocument) -> Option<bson::Document> {
    let Ok(Some(RawBsonRef::Document(wc))) = body.get("writeConcern") else {
        return None;
    };
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
