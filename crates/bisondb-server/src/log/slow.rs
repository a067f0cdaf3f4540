//! mongod's "Slow query" line (id 51803): a command that ran at least
//! `slowms` (the profiler's threshold and sample rate, `profile`/`--slowms`/
//! `--slowOpSampleRate`) is logged with mongod's attributes. Nothing is built
//! for a faster command.

use std::time::Instant;

use bson::{RawBsonRef, RawDocument};

use super::{client_data, ids};
use crate::context::ConnectionInfo;
use crate::request::CommandRequest;
use crate::state::ServerState;

/// Logs the command that started at `started` and answered `reply` if it was
/// slow. The plan figures are there when the profiler collected them (its
/// database profiles); the rest always.
pub fn log_if_slow(
    state: &ServerState,
    req: &CommandRequest<'_>,
    conn: &ConnectionInfo,
    reply: &RawDocument,
    started: Instant,
) {
    let millis = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
    let slowms = state.profiler.slowms();
    if slowms < 0 || millis < u64::try_from(slowms).unwrap_or(0) {
        return;
    }
    // mongod samples slow operations for the log as for the profiler.
    let rate = state.profiler.sample_rate();
    if rate < 1.0 && rand::random::<f64>() >= rate {
        return;
    }
    let (plan_summary, examined) = conn.op.plan_figures();
    let get = |k: &str| reply.get(k).ok().flatten();
    let ok = match get("ok") {
        Some(RawBsonRef::Double(d)) => d as i32,
        Some(RawBsonRef::Int32(n)) => n,
        _ => 0,
    };
    let nreturned = match get("cursor") {
        Some(RawBsonRef::Document(c)) => {
            match c.get("firstBatch").or_else(|_| c.get("nextBatch")) {
                Ok(Some(RawBsonRef::Array(a))) => Some(a.into_iter().count() as u64),
                _ => None,
            }
        }
        _ => None,
    };
    let err_code = match get("code") {
        Some(RawBsonRef::Int32(n)) => Some(n),
        _ => None,
    };
    tracing::info!(
        target: "COMMAND",
        id = ids::SLOW_QUERY,
        conn = conn.id,
        "type" = "command",
        ns = %crate::profiler::namespace(req),
        appName = crate::profiler::app_name(conn),
        command = ?client_data(req.body),
        planSummary = plan_summary,
        keysExamined = examined.map(|e| e.0),
        docsExamined = examined.map(|e| e.1),
        nreturned,
        ok,
        errCode = err_code,
        reslen = reply.as_bytes().len() as u64,
        remote = %conn.peer,
        protocol = "op_msg",
        durationMillis = millis,
        "Slow query"
    );
}
