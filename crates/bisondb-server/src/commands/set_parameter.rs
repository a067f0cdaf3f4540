//! `setParameter`: the server parameters that change at run time: the log's
//! (`logLevel`, the global verbosity; `logComponentVerbosity`, which
//! mongosh's `db.setLogLevel(n, "query")` sends as `{query: {verbosity: n}}`;
//! `quiet`), SCRAM's iteration counts and the ingress connection
//! establishment rate limiter's (`ingress.rs`) and the memory limits
//! (`internalQueryMaxMemoryUsageBytesPerOperation`,
//! `bisondbMaxServerMemoryUsageBytes`: `bisondb_error::memory`). The reply's `was` is the parameter's value before, as mongod's.
//! mongod's errors: another parameter BisonDB has is 20 IllegalOperation
//! `not allowed to change [name] at runtime`, an unknown name 72.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;

/// The parameters `setParameter` changes at run time.
pub const RUNTIME_PARAMETERS: &[&str] = &[
    crate::config::SERVER_MEMORY_PARAMETER,
    crate::ingress::BURST_CAPACITY_SECS,
    crate::ingress::MAX_QUEUE_DEPTH,
    crate::ingress::ENABLED,
    crate::ingress::RATE_PER_SEC,
    "logComponentVerbosity",
    crate::config::OPERATION_MEMORY_PARAMETER,
    "logLevel",
    "quiet",
    "scramIterationCount",
    "scramSHA256IterationCount",
];

pub struct SetParameter {
    params: Vec<(String, Bson)>,
}

impl Command for SetParameter {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut params = Vec::new();
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            if k == "setParameter" || fields::is_generic_arg(k) {
                continue;
            }
            let v = Bson::try_from(v).map_err(crate::request::invalid_bson)?;
            params.push((k.to_string(), v));
        }
        if params.is_empty() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "no option found to set, use help:true to see options ",
            ));
        }
        for (name, _) in &params {
            if super::get_parameter::is_parameter(name)
                && !RUNTIME_PARAMETERS.contains(&name.as_str())
            {
                return Err(MongoError::new(
                    ErrorCode::IllegalOperation,
                    format!("not allowed to change [{name}] at runtime"),
                ));
            }
            if !RUNTIME_PARAMETERS.contains(&name.as_str()) {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("attempted to set unrecognized parameter [{name}], use help:true to see options "),
                ));
            }
        }
        Ok(SetParameter { params })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut was = Bson::Null;
        for (name, value) in self.params {
            was = match name.as_str() {
                "logLevel" => {
                    let old = Bson::Int32(i32::from(crate::log::verbosity(None)));
                    let n = verbosity_value(&name, &value)?;
                    crate::log::set_verbosity(None, n.max(0)).map_err(MongoError::bad_value)?;
                    old
                }
                "scramIterationCount" | "scramSHA256IterationCount" => {
                    use crate::auth::scram::Mechanism;
                    let mech = if name == "scramIterationCount" {
                        Mechanism::Sha1
                    } else {
                        Mechanism::Sha256
                    };
                    let text = match &value {
                        Bson::Int32(i) => i.to_string(),
                        Bson::Int64(i) => i.to_string(),
                        Bson::Double(d) if d.fract() == 0.0 => format!("{d:.0}"),
                        other => other.to_string(),
                    };
                    let n = crate::auth::parse_iteration_count(&name, &text)?;
                    let old = Bson::Int32(ctx.state.auth.iterations(mech));
                    ctx.state.auth.set_iterations(mech, n);
                    old
                }
                crate::ingress::ENABLED
                | crate::ingress::RATE_PER_SEC
                | crate::ingress::BURST_CAPACITY_SECS
                | crate::ingress::MAX_QUEUE_DEPTH => ctx.state.ingress.set(&name, &value)?,
                crate::config::OPERATION_MEMORY_PARAMETER
                | crate::config::SERVER_MEMORY_PARAMETER => {
                    let n = memory_bytes(&name, &value)?;
                    let pool = &ctx.state.ops.memory;
                    let old = if name == crate::config::OPERATION_MEMORY_PARAMETER {
                        let old = pool.operation_limit();
                        pool.set_operation_limit(n);
                        old
                    } else {
                        let old = pool.limit();
                        pool.set_limit(n);
                        old
                    };
                    Bson::Int64(i64::try_from(old).unwrap_or(i64::MAX))
                }
                "quiet" => {
                    let Bson::Boolean(b) = value else {
                        return Err(MongoError::bad_value(format!(
                            "Invalid value for parameter quiet: {value} is not a boolean"
                        )));
                    };
                    let old = Bson::Boolean(crate::log::quiet());
                    crate::log::set_quiet(b);
                    old
                }
                _ => {
                    let old = Bson::Document(crate::log::component_verbosity_doc());
                    let Bson::Document(d) = value else {
                        return Err(MongoError::bad_value(
                            "logComponentVerbosity must be a document",
                        ));
                    };
                    set_components(None, &d)?;
                    old
                }
            };
        }
        reply::ok(doc! {"was": was})
    }
}

/// A memory limit: a whole number of bytes, at least 1.
fn memory_bytes(name: &str, v: &Bson) -> MongoResult<usize> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 && *d >= 1.0 && *d < 9.2e18 => *d as i64,
        _ => 0,
    };
    usize::try_from(n).ok().filter(|n| *n >= 1).ok_or_else(|| {
        MongoError::bad_value(format!(
            "Invalid value for parameter {name}: {v} is not a whole number of bytes >= 1"
        ))
    })
}

/// An integer verbosity, -1 (inherit) to 5.
fn verbosity_value(name: &str, v: &Bson) -> MongoResult<i8> {
    let n = match v {
        Bson::Int32(n) => i64::from(*n),
        Bson::Int64(n) => *n,
        Bson::Double(d) if d.fract() == 0.0 => *d as i64,
        _ => {
            return Err(MongoError::bad_value(format!(
                "Invalid value for {name}: {v} is not a number"
            )))
        }
    };
    i8::try_from(n.clamp(-1, 5)).map_err(|_| MongoError::bad_value("bad verbosity"))
}

/// Applies a `logComponentVerbosity` document: `verbosity` for the level it
/// sits at, each component as a number or `{verbosity: n}`. Checked whole
/// before anything changes, so a bad name leaves the levels as they were.
fn set_components(component: Option<&str>, d: &Document) -> MongoResult<()> {
    let mut changes: Vec<(Option<String>, i8)> = Vec::new();
    for (k, v) in d {
        if k == "verbosity" {
            changes.push((component.map(str::to_string), verbosity_value(k, v)?));
            continue;
        }
        if component.is_some() || !crate::log::COMPONENTS.iter().any(|(n, _)| n == k) {
            return Err(MongoError::bad_value(format!(
                "Invalid component name {}{k}",
                component.map(|c| format!("{c}.")).unwrap_or_default()
            )));
        }
        match v {
            Bson::Document(sub) => {
                for (sk, sv) in sub {
                    if sk != "verbosity" {
                        return Err(MongoError::bad_value(format!(
                            "Invalid component name {k}.{sk}"
                        )));
                    }
                    changes.push((Some(k.clone()), verbosity_value(sk, sv)?));
                }
            }
            other => changes.push((Some(k.clone()), verbosity_value(k, other)?)),
        }
    }
    for (c, level) in changes {
        let level = if c.is_none() { level.max(0) } else { level };
        crate::log::set_verbosity(c.as_deref(), level).map_err(MongoError::bad_value)?;
    }
    Ok(())
}
