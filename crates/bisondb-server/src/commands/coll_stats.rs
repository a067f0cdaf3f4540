//! `collStats`: counts and sizes of a collection, scaled by `scale`.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, RawDocumentBuf};

use super::{util, Command, Context};
use crate::args;
use crate::reply;
use crate::request::CommandRequest;

pub struct CollStats {
    db: String,
    coll: String,
    scale: u64,
}

impl Command for CollStats {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut coll = None;
        let mut scale = 1;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "collStats" | "collstats" => {
                    coll = Some(args::collection_name(req.name, v)?.to_string())
                }
                "scale" => scale = super::db_stats::parse_scale(req.name, v)?,
                "verbose" => {}
                other => args::check_known(req.name, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| args::missing_field(req.name, "collStats"))?;
        Ok(CollStats {
            db: req.db.clone(),
            coll,
            scale,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let ns = util::ns(&self.db, &self.coll);
        let Some(c) = ctx.state.storage.collection(&self.db, &self.coll) else {
            return Err(MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Collection [{ns}] not found."),
            ));
        };
        let mut out = doc! {"ns": ns};
        out.extend(storage_stats(&ctx.state.storage, &c, self.scale));
        reply::ok(out)
    }
}

/// A collection's statistics as `collStats` reports them (after `ns`) and
/// `$collStats` under `storageStats`, sizes divided by `scale`.
pub fn storage_stats(
    storage: &bisondb_storage::Storage,
    c: &bisondb_storage::Collection,
    scale: u64,
) -> bson::Document {
    // A time-series collection reports its buckets, as mongod does.
    if let Some(out) = super::timeseries::bucket_stats(storage, c, scale) {
        return out;
    }
    let scale = scale.max(1);
    let (count, size) = (c.count(), c.data_size());
    // On-disk sizes are the engine's, apportioned by logical bytes (see
    // `DiskShare`); an engine without files reports 0.
    let share = storage.disk_share();
    let sc = |n: u64| (n / scale) as i64;
    // A clustered collection has no `_id_` index: its clustered index is the
    // collection itself (its keys count with the documents), which mongod
    // does not list among its indexes.
    let clustered = super::clustered::Clustered::of_options(&c.options()).is_some();
    let (storage_size, mut index_sizes, mut total_index) = if clustered {
        (
            share.of(size.saturating_add(c.id_index_bytes())),
            doc! {},
            0u64,
        )
    } else {
        let id = share.of(c.id_index_bytes());
        (share.of(size), doc! {"_id_": sc(id)}, id)
    };
    let secondary = c.indexes();
    for ix in &secondary {
        let bytes = share.of(ix.bytes);
        total_index = total_index.saturating_add(bytes);
        index_sizes.insert(ix.spec.name.clone(), sc(bytes));
    }
    let avg = size.checked_div(count).unwrap_or(0);
    let mut out = doc! {
        "size": sc(size),
        "count": count as i64,
        "avgObjSize": avg as i64,
        "storageSize": sc(storage_size),
    };
    // `capped`, and for a capped collection `max` and `maxSize`.
    out.extend(super::capped::stats_fields(c, scale));
    out.extend(doc! {
        "nindexes": i32::from(!clustered) + secondary.len() as i32,
        "indexDetails": {},
        "indexBuilds": [],
        "totalIndexSize": sc(total_index),
        "totalSize": sc(storage_size.saturating_add(total_index)),
        "indexSizes": index_sizes,
        "scaleFactor": scale as i64,
    });
    out
}

/// `$collStats`, the first stage of an aggregation on a collection: one
/// document with the collection's statistics (`storageStats` as `collStats`
/// reports them, `count`, and empty `latencyStats` / `queryExecStats`, which
/// BisonDB does not measure).
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
                    crate::args::type_name(v.element_type())
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
                                scale = super::db_stats::parse_scale(
                                    "$collStats.storageStats",
                                    raw.as_raw_bson_ref(),
                                )?;
                            }
                            "verbose" | "waitForLock" | "numericOnly" => {}
                            other => {
                                return Err(crate::args::unknown_field(
                                    "$collStats.storageStats",
                                    other,
                                ))
                            }
                        }
                    }
                    stage.storage_scale = Some(scale);
                }
                other => return Err(crate::args::unknown_field(Self::NAME, other)),
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
        let ns = util::ns(db, coll);
        let found = state.storage.collection(db, coll);
        let missing = |what: &str| {
            MongoError::new(
                ErrorCode::NamespaceNotFound,
                format!("Unable to retrieve {what} in $collStats stage :: caused by :: Collection [{ns}] not found."),
            )
        };
        let mut out = doc! {
            "ns": ns.clone(),
            "host": super::host_info::hostname(),
            "localTime": bson::DateTime::now(),
        };
        if self.latency {
            let zero = doc! {"latency": 0i64, "ops": 0i64};
            out.insert(
                "latencyStats",
                doc! {"reads": zero.clone(), "writes": zero.clone(), "commands": zero.clone(), "transactions": zero},
            );
        }
        if let Some(scale) = self.storage_scale {
            let c = found.as_ref().ok_or_else(|| missing("storageStats"))?;
            out.insert("storageStats", storage_stats(&state.storage, c, scale));
        }
        if self.count {
            let c = found.as_ref().ok_or_else(|| missing("count"))?;
            // A time-series collection counts its measurements.
            let n = match super::timeseries::measurement_count(&state.storage, c)? {
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
