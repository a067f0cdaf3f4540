//! Writes to the buckets of a time-series collection: inserts, deletes of
//! measurements, and the TTL monitor's deletion of old buckets.
//!
//! Insert: each measurement must hold a BSON date in the time field (else
//! 2 BadValue at its index; ordered inserts stop there, as for any insert);
//! `_id` is added (last) when missing and may repeat. Measurements are grouped
//! by meta value; each group first tops up the group's open bucket (the one
//! this process last wrote for that meta value, remembered in [`OPEN`]) inside
//! one atomic read-modify-write, then fills new buckets. Forgetting an open
//! bucket (restart, eviction) only means the next measurement opens a new one.
//!
//! Delete: every bucket is unpacked and the statement's filter checked per
//! measurement; a bucket that lost rows is rewritten from the rows it keeps
//! (same `_id`), or deleted when none remain, again atomically per bucket and
//! re-checked against the bucket as it is at that moment.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::agg::unpack_bucket;
use bisondb_query::matcher::Matcher;
use bisondb_storage::{Collection, Durability, Modify, Storage};
use bson::oid::ObjectId;
use bson::{doc, Bson, Document, RawBson, RawBsonRef, RawDocument};

use super::bucket::{bucket_id, round_down, Bucket};
use super::{buckets_name, TsOptions};
use crate::fields;
use crate::reply;

/// Open buckets: (bucket collection's UUID, meta value's bytes) -> bucket id.
type OpenMap = HashMap<(bson::Uuid, Vec<u8>), ObjectId>;

/// Bound on [`OPEN`]; past it the map starts over (buckets just reopen).
const MAX_OPEN: usize = 100_000;

static OPEN: OnceLock<Mutex<OpenMap>> = OnceLock::new();

fn open_map() -> &'static Mutex<OpenMap> {
    OPEN.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A measurement ready for its bucket.
pub(crate) struct Measurement {
    pub(crate) time_ms: i64,
    pub(crate) meta: Option<Bson>,
    /// Its fields without the meta field, `_id` included.
    pub(crate) fields: Document,
}

impl Measurement {
    /// A whole measurement (as a read returns it, or as an update or upsert
    /// made it): checks the time field and splits off the meta field.
    pub(crate) fn from_document(mut d: Document, ts: &TsOptions) -> MongoResult<Measurement> {
        let time_ms = match d.get(&ts.time_field) {
            Some(Bson::DateTime(t)) => t.timestamp_millis(),
            _ => return Err(bad_time(ts)),
        };
        let meta = ts.meta_field.as_ref().and_then(|m| d.remove(m));
        Ok(Measurement {
            time_ms,
            meta,
            fields: d,
        })
    }
}

pub(crate) fn bad_time(ts: &TsOptions) -> MongoError {
    MongoError::bad_value(format!(
        "'{}' must be present and contain a valid BSON UTC datetime value",
        ts.time_field
    ))
}

/// Checks one document and splits off its meta value.
pub(crate) fn measurement(raw: &bson::RawDocument, ts: &TsOptions) -> MongoResult<Measurement> {
    let len = raw.as_bytes().len();
    if len > crate::storable::MAX_USER_DOC {
        return Err(MongoError::new(
            bisondb_error::ErrorCode::BSONObjectTooLarge,
            format!(
                "object to insert too large. size in bytes: {len}, max size: {}",
                crate::storable::MAX_USER_DOC
            ),
        ));
    }
    let mut time_ms = None;
    let mut meta = None;
    let mut fields = Document::new();
    let mut has_id = false;
    for el in raw.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let k = k.as_str();
        if k == ts.time_field {
            match v {
                RawBsonRef::DateTime(d) => time_ms = Some(d.timestamp_millis()),
                _ => return Err(bad_time(ts)),
            }
        }
        if k == "_id" {
            if has_id {
                return Err(MongoError::bad_value(
                    "can't have multiple _id fields in one document",
                ));
            }
            crate::storable::check_id_value(v)?;
            has_id = true;
        }
        let value = fields::to_bson(v)?;
        if ts.meta_field.as_deref() == Some(k) {
            meta = Some(value);
        } else {
            fields.insert(k, value);
        }
    }
    let time_ms = time_ms.ok_or_else(|| bad_time(ts))?;
    if !has_id {
        fields.insert("_id", ObjectId::new());
    }
    Ok(Measurement {
        time_ms,
        meta,
        fields,
    })
}

/// Bytes identifying a meta value (missing is its own group).
pub(crate) fn meta_key(meta: &Option<Bson>) -> MongoResult<Vec<u8>> {
    match meta {
        None => Ok(Vec::new()),
        Some(m) => {
            let d = reply::to_raw(&doc! {"m": m.clone()})?;
            Ok(d.into_bytes())
        }
    }
}

/// The bucket collection of the time-series collection `db.name`.
pub(crate) fn bucket_collection(
    storage: &Storage,
    db: &str,
    name: &str,
) -> MongoResult<Collection> {
    storage.collection(db, &buckets_name(name)).ok_or_else(|| {
        MongoError::new(
            bisondb_error::ErrorCode::NamespaceNotFound,
            format!("Buckets collection not found for time-series collection {db}.{name}"),
        )
    })
}

/// Writes one meta value's measurements: the open bucket first, then new ones.
pub(crate) fn write_group(
    buckets: &Collection,
    ts: &TsOptions,
    key: Vec<u8>,
    group: Vec<Measurement>,
    durability: Durability,
) -> MongoResult<()> {
    let map_key = (buckets.uuid(), key);
    let open = open_map()
        .lock()
        .ok()
        .and_then(|m| m.get(&map_key).copied());
    let mut rest: &[Measurement] = &group;
    if let Some(id) = open {
        let mut taken = 0;
        buckets.modify(RawBsonRef::ObjectId(id), durability, &mut |cur| {
            taken = 0;
            let Some(cur) = cur else {
                return Ok(Modify::Keep);
            };
            let Some(mut b) = fields::to_document(cur)
                .ok()
                .and_then(|d| Bucket::from_document(&d, &ts.time_field))
            else {
                return Ok(Modify::Keep);
            };
            for m in &group {
                if !b.fits(m.time_ms, ts.max_span) {
                    break;
                }
                b.push(&ts.time_field, &m.fields);
                taken += 1;
            }
            if taken == 0 {
                return Ok(Modify::Keep);
            }
            Ok(Modify::Replace(reply::to_raw(&b.to_document()?)?))
        })?;
        rest = group.get(taken..).unwrap_or_default();
    }
    let mut new: Vec<Bucket> = Vec::new();
    for m in rest {
        match new.last_mut() {
            Some(b) if b.fits(m.time_ms, ts.max_span) => b.push(&ts.time_field, &m.fields),
            _ => {
                let start = round_down(m.time_ms, ts.rounding);
                let mut b = Bucket::new(bucket_id(start), start, m.meta.clone());
                b.push(&ts.time_field, &m.fields);
                new.push(b);
            }
        }
    }
    let Some(last) = new.last().map(|b| b.id) else {
        return Ok(());
    };
    let raws = new
        .iter()
        .map(|b| reply::to_raw(&b.to_document()?))
        .collect::<MongoResult<Vec<_>>>()?;
    let refs: Vec<&bson::RawDocument> = raws.iter().map(|r| r.as_ref()).collect();
    let outcome = buckets.insert_many(&refs, true, durability);
    if let Some((_, e)) = outcome.errors.into_iter().next() {
        return Err(e.into());
    }
    if let Some(e) = outcome.durability_error {
        return Err(e.into());
    }
    if let Ok(mut m) = open_map().lock() {
        if m.len() >= MAX_OPEN {
            m.clear();
        }
        m.insert(map_key, last);
    }
    Ok(())
}

/// Removes the measurements `keep_row` rejects from the bucket `id`, as it is
/// now; returns how many it removed.
fn rewrite_bucket(
    buckets: &Collection,
    ts: &TsOptions,
    id: RawBsonRef<'_>,
    durability: Durability,
    remove_row: &mut dyn FnMut(&Document) -> bool,
) -> MongoResult<u64> {
    let mut removed = 0u64;
    buckets.modify(id, durability, &mut |cur| {
        removed = 0;
        let Some((rows, mut kept)) = open_rewrite(cur, ts)? else {
            return Ok(Modify::Keep);
        };
        for row in rows {
            if remove_row(&row) {
                removed += 1;
                continue;
            }
            keep_row(&mut kept, ts, row);
        }
        rewritten(&kept, removed > 0)
    })?;
    Ok(removed)
}

/// The stored bucket `cur` opened for a rewrite inside one `modify`: its
/// measurements (meta field included), and an empty bucket with the same
/// `_id`, start and meta that collects those that stay. `None` when it is gone
/// or not a bucket: nothing to rewrite.
pub(crate) fn open_rewrite(
    cur: Option<&RawDocument>,
    ts: &TsOptions,
) -> MongoResult<Option<(Vec<Document>, Bucket)>> {
    let Some(cur) = cur else {
        return Ok(None);
    };
    let d = fields::to_document(cur)?;
    let Some(old) = Bucket::from_document(&d, &ts.time_field) else {
        return Ok(None);
    };
    let rows = unpack_bucket(&d, &ts.time_field, ts.meta_field.as_deref());
    Ok(Some((rows, Bucket::new(old.id, old.start_ms, old.meta))))
}

/// Keeps an unpacked measurement in the rewritten bucket; its meta field is
/// the bucket's meta, stored once for all, not per row.
pub(crate) fn keep_row(kept: &mut Bucket, ts: &TsOptions, mut row: Document) {
    if let Some(mf) = &ts.meta_field {
        row.remove(mf);
    }
    kept.push(&ts.time_field, &row);
}

/// Adds a changed measurement to the rewritten bucket when it still belongs
/// there (same meta value, time within the bucket's span); `false` when it
/// must move to another bucket.
pub(crate) fn keep_new_version(kept: &mut Bucket, ts: &TsOptions, m: &Measurement) -> bool {
    if m.meta == kept.meta && kept.fits(m.time_ms, ts.max_span) {
        kept.push(&ts.time_field, &m.fields);
        true
    } else {
        false
    }
}

/// What a rewrite does to the stored bucket: nothing when no row changed, a
/// delete when none remain, else the rebuilt bucket under the same `_id`.
pub(crate) fn rewritten(kept: &Bucket, changed: bool) -> MongoResult<Modify> {
    Ok(if !changed {
        Modify::Keep
    } else if kept.is_empty() {
        Modify::Delete
    } else {
        Modify::Replace(reply::to_raw(&kept.to_document()?)?)
    })
}

pub(crate) fn delete_matching(
    buckets: &Collection,
    ts: &TsOptions,
    matcher: &Matcher,
    multi: bool,
    durability: Durability,
) -> MongoResult<u64> {
    let mut n = 0u64;
    for bucket in buckets.scan(false) {
        let bucket = bucket?;
        let d = fields::to_document(&bucket)?;
        let rows = unpack_bucket(&d, &ts.time_field, ts.meta_field.as_deref());
        if !rows.iter().any(|r| matcher.matches_doc(r)) {
            continue;
        }
        let Some(id) = d.get("_id").cloned() else {
            continue;
        };
        let id = RawBson::try_from(id).map_err(|e| MongoError::internal(e.to_string()))?;
        // Re-checked on the bucket as it is when it is rewritten.
        let mut budget = if multi { u64::MAX } else { 1 };
        n += rewrite_bucket(buckets, ts, id.as_raw_bson_ref(), durability, &mut |row| {
            if budget > 0 && matcher.matches_doc(row) {
                budget -= 1;
                true
            } else {
                false
            }
        })?;
        if !multi && n > 0 {
            break;
        }
    }
    Ok(n)
}

/// The TTL monitor's pass: deletes every bucket whose newest time is before
/// `cutoff_ms`.
pub(crate) fn delete_buckets_older_than(
    buckets: &Collection,
    ts: &TsOptions,
    cutoff_ms: i64,
) -> MongoResult<u64> {
    let newest = |d: &bson::RawDocument| -> Option<i64> {
        let control = d.get_document("control").ok()?;
        let max = control.get_document("max").ok()?;
        Some(max.get_datetime(&ts.time_field).ok()?.timestamp_millis())
    };
    let mut ids = Vec::new();
    for bucket in buckets.scan(false) {
        let bucket = bucket?;
        if newest(&bucket).is_some_and(|t| t < cutoff_ms) {
            if let Ok(Some(id)) = bucket.get("_id") {
                ids.push(RawBson::from(id));
            }
        }
    }
    let mut n = 0;
    for id in ids {
        let mut gone = false;
        buckets.modify(id.as_raw_bson_ref(), Durability::Buffered, &mut |cur| {
            gone = false;
            Ok(match cur {
                // Re-checked: an insert may have added a newer measurement since.
                Some(d) if newest(d).is_some_and(|t| t < cutoff_ms) => {
                    gone = true;
                    Modify::Delete
                }
                _ => Modify::Keep,
            })
        })?;
        n += u64::from(gone);
    }
    Ok(n)
}
