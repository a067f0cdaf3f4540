//! Index keys of a time-series collection, translated to its bucket
//! collection as mongod translates them (the index commands on `X` that use
//! these are in `on_view/timeseries/indexes.rs`).
//!
//! A key on the meta field (or a field inside it) indexes the buckets' `meta`;
//! a key on any other field `f` indexes the bucket's bounds
//! `control.min.f` and `control.max.f` (ascending: min then max; descending:
//! max then min). `listIndexes` on `X` translates the buckets' indexes back
//! and leaves out the buckets' clustered `_id` index, so `X` lists the keys it
//! was given. `create` makes mongod's default index `{<meta>: 1, <time>: 1}`
//! when there is a meta field. The indexes are maintained with the buckets;
//! reads of `X` use them through the bucket filter `Pipeline::parse` puts
//! before the unpacking (meta conditions, time bounds).

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{IndexSpec, Storage};
use bson::{doc, Bson, Document};

use super::{buckets_name, TsOptions};

/// The bucket index key of a key pattern given on `X`.
pub fn to_bucket_key(key: &Document, ts: &TsOptions) -> MongoResult<Document> {
    let mut out = Document::new();
    for (f, dir) in key {
        if let Some(m) = &ts.meta_field {
            if f == m {
                out.insert("meta", dir.clone());
                continue;
            }
            if let Some(rest) = f.strip_prefix(m.as_str()).and_then(|r| r.strip_prefix('.')) {
                out.insert(format!("meta.{rest}"), dir.clone());
                continue;
            }
        }
        if f.contains("$**") {
            // A wildcard term over the measurements would index the
            // buckets' columns, not the measurements' fields.
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                format!(
                    "a wildcard index on the measurements ('{f}') of a time-series collection is not supported by BisonDB yet (see docs/COMPATIBILITY.md); one on the metaField's subfields is"
                ),
            ));
        }
        let descending = match dir {
            Bson::Int32(i) => *i < 0,
            Bson::Int64(i) => *i < 0,
            Bson::Double(d) => *d < 0.0,
            Bson::Decimal128(_) => false,
            other => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!(
                        "an index of type {other} on the measurement field '{f}' of a time-series collection is not supported by BisonDB yet (see docs/COMPATIBILITY.md)"
                    ),
                ))
            }
        };
        let (first, second) = if descending {
            ("max", "min")
        } else {
            ("min", "max")
        };
        out.insert(format!("control.{first}.{f}"), dir.clone());
        out.insert(format!("control.{second}.{f}"), dir.clone());
    }
    Ok(out)
}

/// The key pattern `X` shows for a bucket index key.
pub fn from_bucket_key(key: &Document, ts: &TsOptions) -> Document {
    let mut out = Document::new();
    for (f, dir) in key {
        let user = if f == "meta" {
            ts.meta_field.clone().unwrap_or_else(|| f.clone())
        } else if let Some(rest) = f.strip_prefix("meta.") {
            match &ts.meta_field {
                Some(m) => format!("{m}.{rest}"),
                None => f.clone(),
            }
        } else if let Some(rest) = f
            .strip_prefix("control.min.")
            .or_else(|| f.strip_prefix("control.max."))
        {
            rest.to_string()
        } else {
            f.clone()
        };
        if !out.contains_key(&user) {
            out.insert(user, dir.clone());
        }
    }
    out
}

/// mongod's default index of a time-series collection with a meta field.
pub fn create_default_index(
    storage: &Storage,
    db: &str,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<()> {
    let Some(meta) = &ts.meta_field else {
        return Ok(());
    };
    let user_key = doc! {meta.clone(): 1, ts.time_field.clone(): 1};
    let spec = doc! {
        "key": to_bucket_key(&user_key, ts)?,
        "name": crate::namespaces::default_index_name(&user_key),
    };
    let spec = IndexSpec::from_document(&spec)
        .ok_or_else(|| MongoError::internal("default time-series index spec"))?;
    storage.create_index(db, &buckets_name(name), spec)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts() -> TsOptions {
        TsOptions {
            time_field: "t".into(),
            meta_field: Some("m".into()),
            granularity: Some("seconds".into()),
            max_span: 3600,
            rounding: 60,
        }
    }

    #[test]
    fn keys_translate_both_ways() -> MongoResult<()> {
        let ts = ts();
        let key = doc! {"m.a": 1, "t": -1, "x": 1};
        let bucket = to_bucket_key(&key, &ts)?;
        assert_eq!(
            bucket,
            doc! {"meta.a": 1, "control.max.t": -1, "control.min.t": -1, "control.min.x": 1, "control.max.x": 1}
        );
        assert_eq!(from_bucket_key(&bucket, &ts), key);
        assert_eq!(
            to_bucket_key(&doc! {"m": "2dsphere"}, &ts)?,
            doc! {"meta": "2dsphere"}
        );
        assert_eq!(
            to_bucket_key(&doc! {"x": "text"}, &ts)
                .err()
                .map(|e| e.code.code()),
            Some(238)
        );
        // A wildcard index on the metaField's subfields is one on `meta`;
        // one on the measurements is refused by name.
        assert_eq!(
            to_bucket_key(&doc! {"m.$**": 1}, &ts)?,
            doc! {"meta.$**": 1}
        );
        assert_eq!(
            to_bucket_key(&doc! {"$**": 1}, &ts)
                .err()
                .map(|e| e.code.code()),
            Some(238)
        );
        Ok(())
    }
}
