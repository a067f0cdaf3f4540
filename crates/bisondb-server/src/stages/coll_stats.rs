//! `$collStats`, the first stage of an aggregation on a collection: one
//! document with the collection's statistics.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::doc;

use crate::namespaces::{stats, timeseries};

/// `$collStats`, the first stage of an aggregation on a collection: one
/// document with the collection's statistics (`storageStats` as `collStats`
/// reports them, `count`, `latencyStats` from `top`'s per-collection counts,
/// without histograms, and an empty `queryExecStats`, which BisonDB does not
/// measure).
#[derive(Debug, Clone, Default)]
pub struct CollStatsStage {
    latency: bool,
    storage_scale: Option<u64>,
    count: bool,
    query_exec: bool,
}

impl CollStatsStage {
    const NAME: &'static str = "$collStats";

    /// Parses the stage's argument as mongod's IDL does.
    pub fn parse(spec: &bson::Bson) -> MongoResult<CollStatsStage> {
        let bson::Bson::Document(spec) = spec else {
            return Err(MongoError::location(
                5447000,
                format!("$collStats must take a nested object but found: {spec}"),
            ));
        };
        let mut stage = CollStatsStage::default();
        for (k, v) in spec {
            let bson::Bson::Document(sub) = v else {
                return Err(MongoError::type_mismatch(format!(
                    "BSON field '$collStats.{k}' is the wrong type '{}', expected type 'object'",
                    crate::fields::type_name(v.element_type())
                )));
            };
            match k.as_str() {
                "latencyStats" => stage.latency = true,
                "count" => stage.count = true,
                "queryExecStats" => stage.query_exec = true,
                "storageStats" => {
                    let mut scale = 1;
                    for (sk, sv) in sub {
                        match sk.as_str() {
                            "scale" => {
                                let raw = bson::RawBson::try_from(sv.clone())
                                    .map_err(crate::request::invalid_bson)?;
                                scale = crate::fields::parse_scale(
                                    "$collStats.storageStats",
                                    raw.as_raw_bson_ref(),
                                )?;
                            }
                            "verbose" | "waitForLock" | "numericOnly" => {}
                            other => {
                                return Err(crate::fields::unknown_field(
                                    "$collStats.storageStats",
                                    other,
                                ))
                            }
                        }
                    }
                    stage.storage_scale = Some(scale);
                }
                other => return Err(crate::fields::unknown_field(Self::NAME, other)),
            }
        }
        Ok(stage)
    }

    /// The stage's one output document for `db.coll`.
    pub fn output(
        &self,
        state: &crate::state::ServerState,
        db: &str,
        coll: &str,
    ) -> MongoResult<bson::Document> {
        let ns = crate::namespaces::ns(db, coll);
        let found = state.storage.collection(db, coll);
        let missing = |what: &str| {
            MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Unable to retrieve {what} in $collStats stage :: caused by :: Collection [{ns}] not found."),
            )
        };
        let mut out = doc! {
            "ns": ns.clone(),
            "host": crate::state::hostname(),
            "localTime": bson::DateTime::now(),
        };
        if self.latency {
            out.insert("latencyStats", state.top.latency_stats(db, coll));
        }
        if let Some(scale) = self.storage_scale {
            let c = found.as_ref().ok_or_else(|| missing("storageStats"))?;
            state.flush_for_sizes();
            out.insert(
                "storageStats",
                stats::storage_stats(&state.storage, c, scale),
            );
        }
        if self.count {
            let c = found.as_ref().ok_or_else(|| missing("count"))?;
            // A time-series collection counts its measurements.
            let n = match timeseries::measurement_count(&state.storage, c)? {
                Some(n) => n,
                None => c.count(),
            };
            out.insert("count", n as i64);
        }
        if self.query_exec {
            out.insert(
                "queryExecStats",
                doc! {"collectionScans": {"total": 0i64, "nonTailable": 0i64}},
            );
        }
        Ok(out)
    }
}
