//! The aggregation stages the server supplies because they read what only
//! it has: storage statistics (`$collStats`), index usage counters
//! (`$indexStats`), the session cache (`$listLocalSessions`), the operations
//! in flight (`$currentOp`), the oplog (`$changeStream`, which also makes its
//! own cursor: `change_stream.rs`). `bisondb-query`'s
//! stage table lists them as server stages; an `aggregate` command hands the
//! pipeline [`ServerStagesOf`], which runs them.

use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::agg::{DocStream, ServerStages};
use bisondb_storage::Collection;
use bson::{Bson, Document};

use crate::state::ServerState;

pub mod change_stream;
pub mod coll_stats;
pub mod current_op;
pub mod index_stats;
pub mod list_local_sessions;

/// Checks a server stage that starts an `aggregate` command's pipeline (its
/// argument, and the namespace it needs: `coll` is `None` for
/// `{aggregate: 1}`); any other first stage passes.
pub fn check_first(stage: &Document, db: &str, coll: Option<&str>) -> MongoResult<()> {
    if let Some(spec) = stage.get("$currentOp") {
        current_op::Options::parse(spec)?;
        if db != "admin" || coll.is_some() {
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                "$currentOp must be run against the 'admin' database with {aggregate: 1}",
            ));
        }
    } else if let Some(spec) = stage.get("$listLocalSessions") {
        list_local_sessions::check_spec(spec)?;
        if coll.is_some() {
            return Err(MongoError::new(
                ErrorCode::InvalidNamespace,
                "$listLocalSessions must be run against a database with {aggregate: 1}",
            ));
        }
    } else if let Some(spec) = stage.get("$collStats") {
        // `{aggregate: 1}` was refused before, as not collection-less.
        coll_stats::CollStatsStage::parse(spec)?;
    } else if let Some(spec) = stage.get("$indexStats") {
        index_stats::check_spec(spec, coll)?;
    }
    Ok(())
}

/// The server stages mongod registers as never in the Stable API's version
/// 1 (`AllowedWithApiStrict::kNeverInVersion1`). `$collStats` is in it with
/// its `count` option only.
const NOT_IN_API_VERSION_1: &[&str] = &["$currentOp", "$indexStats", "$listLocalSessions"];

/// A pipeline sent with `apiStrict: true`: a stage outside API version 1
/// fails with 323 APIStrictError, as in mongod.
pub fn check_api_version_1(stages: &[Document]) -> MongoResult<()> {
    for stage in stages {
        let Some((name, spec)) = stage.iter().next() else {
            continue;
        };
        if NOT_IN_API_VERSION_1.contains(&name.as_str()) {
            return Err(MongoError::new(
                ErrorCode::APIStrictError,
                format!("{name} is not allowed with 'apiStrict: true' in API Version 1"),
            ));
        }
        if name == "$collStats" {
            if let Bson::Document(d) = spec {
                if d.keys().any(|k| k != "count") {
                    return Err(MongoError::new(
                        ErrorCode::APIStrictError,
                        "only the 'count' option to $collStats is supported in API Version 1",
                    ));
                }
            }
        }
    }
    Ok(())
}

/// The server stages of one `aggregate` command on `db` (and the
/// collection it names, when it names one).
pub struct ServerStagesOf {
    pub state: Arc<ServerState>,
    pub db: String,
    pub coll_name: Option<String>,
    /// The collection, when it exists.
    pub coll: Option<Collection>,
    /// Whose operations `$currentOp` without `allUsers` lists: the
    /// caller's own under `--auth`, everyone's without.
    pub own_ops: crate::op_ctx::Whose,
}

impl std::fmt::Debug for ServerStagesOf {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServerStagesOf")
            .field("db", &self.db)
            .field("coll", &self.coll_name)
            .finish()
    }
}

impl ServerStages for ServerStagesOf {
    fn run(&self, name: &str, spec: &Bson) -> MongoResult<DocStream> {
        match name {
            "$listLocalSessions" => Ok(Box::new(self.state.sessions.list().into_iter().map(Ok))),
            "$currentOp" => {
                let options = current_op::Options::parse(spec)?;
                let whose = if options.all_users {
                    crate::op_ctx::Whose::All
                } else {
                    self.own_ops.clone()
                };
                Ok(Box::new(
                    options.report(&self.state, &whose).into_iter().map(Ok),
                ))
            }
            "$collStats" => {
                let stage = coll_stats::CollStatsStage::parse(spec)?;
                let coll = self.coll_name.as_deref().unwrap_or_default();
                let stats = stage.output(&self.state, &self.db, coll)?;
                Ok(Box::new(std::iter::once(Ok(stats))))
            }
            "$indexStats" => {
                let port = self.state.bound_port.get().copied().unwrap_or(0);
                let host = format!("{}:{port}", crate::state::hostname());
                let docs = index_stats::output(self.coll.as_ref(), &host)?;
                Ok(Box::new(docs.into_iter().map(Ok)))
            }
            other => Err(MongoError::internal(format!(
                "the server does not supply the stage {other}"
            ))),
        }
    }
}
