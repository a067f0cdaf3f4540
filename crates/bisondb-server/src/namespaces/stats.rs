//! A collection's statistics as `collStats` reports them and `$collStats`
//! under `storageStats`, for every kind of collection.

use bisondb_storage::{Collection, Storage};
use bson::{doc, Document};

use super::timeseries::{buckets_name, TsOptions};

/// A collection's statistics as `collStats` reports them (after `ns`) and
/// `$collStats` under `storageStats`, sizes divided by `scale`.
pub fn storage_stats(storage: &Storage, c: &Collection, scale: u64) -> Document {
    // A time-series collection reports its buckets, as mongod does.
    if let Some(out) = bucket_stats(storage, c, scale) {
        return out;
    }
    collection_stats(storage, c, scale)
}

/// [`storage_stats`] of a collection's own documents and indexes.
fn collection_stats(storage: &Storage, c: &Collection, scale: u64) -> Document {
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

/// `collStats` / `$collStats` storage statistics of a time-series collection:
/// its bucket collection's, without `count` (buckets are not measurements),
/// with mongod's `timeseries` section. `None` for any other collection.
fn bucket_stats(storage: &Storage, c: &Collection, scale: u64) -> Option<Document> {
    TsOptions::of(c.name(), &c.options())?;
    let buckets_ns = buckets_name(c.name());
    let b = storage.collection(c.db(), &buckets_ns)?;
    let mut out = collection_stats(storage, &b, scale);
    out.remove("count");
    out.remove("avgObjSize");
    let count = b.count();
    let avg = b.data_size().checked_div(count).unwrap_or(0);
    out.insert(
        "timeseries",
        doc! {
            "bucketsNs": format!("{}.{buckets_ns}", c.db()),
            "bucketCount": count as i64,
            "avgBucketSize": avg as i64,
        },
    );
    Some(out)
}
