//! The TTL monitor: every `ttlMonitorSleepSecs` seconds, deletes documents
//! whose TTL-indexed date field (or the earliest date in it, for an array) is
//! older than the index's `expireAfterSeconds`, as mongod's TTL monitor does.
//! Documents whose field holds no date never expire. A clustered collection
//! with a collection-level `expireAfterSeconds` is a TTL collection on `_id`:
//! documents whose `_id` is an older date go (`clustered.rs`). A time-series
//! collection with `expireAfterSeconds` loses the buckets whose newest
//! measurement is older (`namespaces/timeseries.rs`).

use std::sync::Arc;
use std::time::Duration;

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, Durability};
use bson::{doc, RawBson};

use crate::plan;
use crate::state::ServerState;

/// Runs the monitor until shutdown (its deletes are writes: they wait while
/// `fsync` holds the lock).
pub fn spawn(state: Arc<ServerState>) -> tokio::task::JoinHandle<()> {
    let every = Duration::from_secs(state.config.ttl_monitor_sleep_secs.max(1));
    crate::background::spawn_periodic_writes(state, every, run_once, |outcome| match outcome {
        Ok(Ok(0)) => {}
        Ok(Ok(n)) => tracing::info!(deleted = n, "TTL monitor removed expired documents"),
        Ok(Err(e)) => tracing::warn!(error = %e, "TTL monitor pass failed"),
        Err(e) => tracing::warn!(error = %e, "TTL monitor task failed"),
    })
}

/// One pass over every TTL index; returns how many documents it deleted.
pub fn run_once(state: &ServerState) -> MongoResult<u64> {
    crate::metrics::add(&state.metrics.ttl.passes, 1);
    let deleted = expire_all(state)?;
    crate::metrics::add(&state.metrics.ttl.deleted_documents, deleted);
    Ok(deleted)
}

fn expire_all(state: &ServerState) -> MongoResult<u64> {
    let storage = &state.storage;
    // On a store shared by several servers each runs the monitor: its
    // deletes are checked by the store, so two monitors removing the same
    // document delete it once (the other finds it gone). It first sees the
    // TTL indexes other servers made.
    storage.refresh_catalog()?;
    let mut deleted = 0u64;
    let now = bson::DateTime::now().timestamp_millis();
    for db in storage.list_databases() {
        for info in storage.list_collections(&db) {
            let Some(coll) = storage.collection(&db, &info.name) else {
                continue;
            };
            // A time-series collection's old buckets go whole.
            deleted += crate::namespaces::timeseries::expire(
                storage,
                &db,
                &info.name,
                &info.options,
                now,
            )?;
            if let Some(secs) = crate::namespaces::clustered::ttl_of(&coll.options()) {
                let cutoff = now.saturating_sub(secs.saturating_mul(1000));
                // The `_id` index (the clustered order itself) finds them.
                deleted += expire(&coll, "_id_", "_id", cutoff)?;
            }
            for ix in coll.indexes() {
                let (Some(secs), [field]) = (ix.spec.expire_after_seconds, ix.fields.as_slice())
                else {
                    continue;
                };
                let cutoff = now.saturating_sub(secs.saturating_mul(1000));
                deleted += expire(&coll, &ix.spec.name, &field.path, cutoff)?;
            }
        }
    }
    Ok(deleted)
}

fn expire(coll: &Collection, index: &str, path: &str, cutoff: i64) -> MongoResult<u64> {
    let filter = doc! {path: {"$lt": bson::DateTime::from_millis(cutoff)}};
    let m = Matcher::parse_doc(&filter)?;
    let hint = plan::Hint::Name(index.to_string());
    let chosen = plan::choose(Some(coll), &m, Some(&filter), None, Some(&hint))?;
    let mut ids = Vec::new();
    for d in plan::execute(Some(coll), &chosen, &m, Default::default())? {
        let d = d?;
        if let Some(id) = bisondb_storage::id_of(&d) {
            ids.push(RawBson::from(id));
        }
    }
    let mut n = 0;
    for id in ids {
        // A concurrent update may have moved the date since the scan: re-check.
        let mut gone = false;
        coll.modify(id.as_raw_bson_ref(), Durability::Buffered, &mut |cur| {
            Ok(match cur {
                Some(d) if m.matches(d) => {
                    gone = true;
                    bisondb_storage::Modify::Delete
                }
                _ => bisondb_storage::Modify::Keep,
            })
        })?;
        n += u64::from(gone);
    }
    Ok(n)
}
