//! `getParameter`: server parameters by name, or all of them with `'*'`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

/// The parameters BisonDB has, with their values. Sorted by name.
fn parameters() -> Vec<(&'static str, Bson)> {
    vec![
        ("allowDiskUseByDefault", Bson::Boolean(true)),
        (
            "authenticationMechanisms",
            Bson::Array(vec!["SCRAM-SHA-1".into(), "SCRAM-SHA-256".into()]),
        ),
        (crate::config::SERVER_MEMORY_PARAMETER, Bson::Int64(0)),
        (
            "cursorTimeoutMillis",
            Bson::Int64(crate::cursor::IDLE_TIMEOUT.as_millis() as i64),
        ),
        // `--setParameter enableTestCommands=1` turns on configureFailPoint;
        // drivers' test suites read this to decide whether to use fail points.
        ("enableTestCommands", Bson::Boolean(false)),
        (
            "featureCompatibilityVersion",
            Bson::Document(doc! {"version": "8.0"}),
        ),
        (crate::ingress::BURST_CAPACITY_SECS, Bson::Double(f64::MAX)),
        (crate::ingress::MAX_QUEUE_DEPTH, Bson::Int64(0)),
        (crate::ingress::ENABLED, Bson::Boolean(false)),
        (crate::ingress::RATE_PER_SEC, Bson::Int32(i32::MAX)),
        (
            "internalDocumentSourceGroupMaxMemoryBytes",
            Bson::Int64(100 * 1024 * 1024),
        ),
        (
            "internalQueryMaxBlockingSortMemoryUsageBytes",
            Bson::Int64(100 * 1024 * 1024),
        ),
        (crate::config::OPERATION_MEMORY_PARAMETER, Bson::Int64(0)),
        ("localLogicalSessionTimeoutMinutes", Bson::Int32(30)),
        ("logComponentVerbosity", Bson::Document(Default::default())),
        ("logLevel", Bson::Int32(0)),
        ("logicalSessionRefreshMillis", Bson::Int32(300_000)),
        ("maxBSONDepth", Bson::Int32(200)),
        ("maxTransactionLockRequestTimeoutMillis", Bson::Int32(5)),
        ("minSnapshotHistoryWindowInSeconds", Bson::Int32(300)),
        ("quiet", Bson::Boolean(false)),
        ("redactClientLogData", Bson::Boolean(false)),
        ("requireApiVersion", Bson::Boolean(false)),
        (
            "scramIterationCount",
            Bson::Int32(crate::auth::DEFAULT_SHA1_ITERATIONS),
        ),
        (
            "scramSHA256IterationCount",
            Bson::Int32(crate::auth::DEFAULT_SHA256_ITERATIONS),
        ),
        ("transactionLifetimeLimitSeconds", Bson::Int32(60)),
        ("ttlMonitorSleepSecs", Bson::Int32(60)),
    ]
}

/// Whether `name` is a parameter BisonDB has (settable at run time or not).
pub fn is_parameter(name: &str) -> bool {
    parameters().iter().any(|(n, _)| *n == name)
}

pub struct GetParameter {
    all: bool,
    names: Vec<String>,
}

impl Command for GetParameter {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut all = false;
        let mut names = Vec::new();
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            if k == "getParameter" {
                match v {
                    RawBsonRef::String("*") => all = true,
                    RawBsonRef::Document(d) => {
                        if let Ok(Some(RawBsonRef::Boolean(true))) = d.get("allParameters") {
                            all = true;
                        }
                    }
                    _ => {}
                }
            } else if !crate::fields::is_generic_arg(k) {
                names.push(k.to_string());
            }
        }
        Ok(GetParameter { all, names })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut params = parameters();
        let ttl = i32::try_from(ctx.state.config.ttl_monitor_sleep_secs).unwrap_or(i32::MAX);
        for (k, v) in params.iter_mut() {
            match *k {
                "ttlMonitorSleepSecs" => *v = Bson::Int32(ttl),
                "localLogicalSessionTimeoutMinutes" => {
                    *v = Bson::Int32(
                        i32::try_from(ctx.state.config.local_logical_session_timeout_minutes)
                            .unwrap_or(i32::MAX),
                    )
                }
                "transactionLifetimeLimitSeconds" => {
                    *v = Bson::Int32(
                        i32::try_from(ctx.state.config.transaction_lifetime_limit_seconds)
                            .unwrap_or(i32::MAX),
                    )
                }
                "maxTransactionLockRequestTimeoutMillis" => {
                    *v = Bson::Int32(
                        i32::try_from(ctx.state.config.max_transaction_lock_request_timeout_millis)
                            .unwrap_or(i32::MAX),
                    )
                }
                "minSnapshotHistoryWindowInSeconds" => {
                    *v = Bson::Int32(
                        i32::try_from(ctx.state.config.min_snapshot_history_window_seconds)
                            .unwrap_or(i32::MAX),
                    )
                }
                "logicalSessionRefreshMillis" => {
                    *v = Bson::Int32(
                        i32::try_from(ctx.state.config.logical_session_refresh_millis)
                            .unwrap_or(i32::MAX),
                    )
                }
                // The log's settings live in `crate::log`, changed by setParameter.
                "logLevel" => *v = Bson::Int32(i32::from(crate::log::verbosity(None))),
                "logComponentVerbosity" => {
                    *v = Bson::Document(crate::log::component_verbosity_doc())
                }
                "quiet" => *v = Bson::Boolean(crate::log::quiet()),
                n @ (crate::ingress::ENABLED
                | crate::ingress::RATE_PER_SEC
                | crate::ingress::BURST_CAPACITY_SECS
                | crate::ingress::MAX_QUEUE_DEPTH) => {
                    if let Some(live) = ctx.state.ingress.get(n) {
                        *v = live;
                    }
                }
                "redactClientLogData" => *v = Bson::Boolean(crate::log::redacting()),
                "enableTestCommands" => *v = Bson::Boolean(ctx.state.config.enable_test_commands),
                "scramIterationCount" => {
                    *v = Bson::Int32(
                        ctx.state
                            .auth
                            .iterations(crate::auth::scram::Mechanism::Sha1),
                    )
                }
                "scramSHA256IterationCount" => {
                    *v = Bson::Int32(
                        ctx.state
                            .auth
                            .iterations(crate::auth::scram::Mechanism::Sha256),
                    )
                }
                // The blocking aggregation stages' limits as set at startup.
                "allowDiskUseByDefault" => {
                    *v = Bson::Boolean(ctx.state.config.allow_disk_use_by_default)
                }
                "internalDocumentSourceGroupMaxMemoryBytes" => {
                    *v = Bson::Int64(
                        i64::try_from(ctx.state.config.group_memory_bytes).unwrap_or(i64::MAX),
                    )
                }
                "internalQueryMaxBlockingSortMemoryUsageBytes" => {
                    *v = Bson::Int64(
                        i64::try_from(ctx.state.config.sort_memory_bytes).unwrap_or(i64::MAX),
                    )
                }
                // The memory limits as they are now (`setParameter` changes them).
                crate::config::OPERATION_MEMORY_PARAMETER => {
                    let n = ctx.state.ops.memory.operation_limit();
                    *v = Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX))
                }
                crate::config::SERVER_MEMORY_PARAMETER => {
                    let n = ctx.state.ops.memory.limit();
                    *v = Bson::Int64(i64::try_from(n).unwrap_or(i64::MAX))
                }
                _ => {}
            }
        }
        let mut out = Document::new();
        if self.all {
            for (k, v) in params {
                out.insert(k, v);
            }
        } else {
            if self.names.is_empty() {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "no option found to get",
                ));
            }
            for name in &self.names {
                match params.iter().find(|(k, _)| k == name) {
                    Some((k, v)) => {
                        out.insert(*k, v.clone());
                    }
                    None => {
                        return Err(MongoError::new(
                            ErrorCode::InvalidOptions,
                            format!("no option found to get: '{name}' is not a server parameter BisonDB knows"),
                        ))
                    }
                }
            }
        }
        reply::ok(out)
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn table_sorted() {
        let p = super::parameters();
        for w in p.windows(2) {
            assert!(w[0].0 < w[1].0);
        }
    }
}
