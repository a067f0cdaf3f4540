//! Index commands on a time-series collection, translated to its bucket
//! collection as mongod translates them.
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
use bson::{doc, Bson, Document, RawDocumentBuf};

use super::{buckets_name, TsOptions};
use crate::args;
use crate::commands::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

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
        "name": crate::commands::create_indexes::default_name(&user_key),
    };
    let spec = IndexSpec::from_document(&spec)
        .ok_or_else(|| MongoError::internal("default time-series index spec"))?;
    storage.create_index(db, &buckets_name(name), spec)?;
    Ok(())
}

/// Runs `body` (built here) as `name` on the buckets.
fn run<C: Command>(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &'static str,
    body: Document,
) -> MongoResult<RawDocumentBuf> {
    let raw = reply::to_raw(&body)?;
    let sub = CommandRequest {
        body: &raw,
        sequences: Vec::new(),
        name,
        db: req.db.clone(),
    };
    C::parse(&sub)?.execute(ctx)
}

/// The fields of `req` other than its first, as they are.
fn rest_of(req: &CommandRequest<'_>) -> MongoResult<Vec<(String, Bson)>> {
    let mut out = Vec::new();
    for (i, el) in req.body.iter().enumerate() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        if i == 0 || k.as_str() == "$db" {
            continue;
        }
        out.push((k.as_str().to_string(), args::to_bson(v)?));
    }
    Ok(out)
}

/// `createIndexes` on `X`: each spec's key translated, its name the one the
/// key given on `X` would get.
pub(super) fn create_indexes(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    let mut body = doc! {"createIndexes": buckets_name(name)};
    for (k, v) in rest_of(req)? {
        if k != "indexes" {
            body.insert(k, v);
            continue;
        }
        let Bson::Array(specs) = v else {
            body.insert(k, v);
            continue;
        };
        let mut out = Vec::with_capacity(specs.len());
        for spec in specs {
            let Bson::Document(mut spec) = spec else {
                out.push(spec);
                continue;
            };
            if let Ok(key) = spec.get_document("key").cloned() {
                if !spec.contains_key("name") {
                    spec.insert("name", crate::commands::create_indexes::default_name(&key));
                }
                spec.insert("key", to_bucket_key(&key, ts)?);
            }
            out.push(Bson::Document(spec));
        }
        body.insert(k, out);
    }
    run::<crate::commands::create_indexes::CreateIndexes>(req, ctx, "createIndexes", body)
}

/// `dropIndexes` on `X`: names as they are, a key pattern translated.
pub(super) fn drop_indexes(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    let mut body = doc! {"dropIndexes": buckets_name(name)};
    for (k, v) in rest_of(req)? {
        match (k.as_str(), v) {
            ("index", Bson::Document(key)) => {
                body.insert(k, to_bucket_key(&key, ts)?);
            }
            (_, v) => {
                body.insert(k, v);
            }
        }
    }
    run::<crate::commands::drop_indexes::DropIndexes>(req, ctx, "dropIndexes", body)
}

/// `listIndexes` on `X`: the buckets' indexes with the keys given on `X`,
/// without the buckets' clustered index.
pub(super) fn list_indexes(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    let mut body = doc! {"listIndexes": buckets_name(name)};
    for (k, v) in rest_of(req)? {
        // The whole list in one batch: a later getMore would name the buckets.
        if k != "cursor" {
            body.insert(k, v);
        }
    }
    let raw = run::<crate::commands::list_indexes::ListIndexes>(req, ctx, "listIndexes", body)?;
    let mut reply = args::to_document(&raw)?;
    let ns = crate::commands::util::ns(&req.db, name);
    if let Ok(cursor) = reply.get_document_mut("cursor") {
        let batch = match cursor.get("firstBatch") {
            Some(Bson::Array(a)) => a.clone(),
            _ => Vec::new(),
        };
        let mut out = Vec::with_capacity(batch.len());
        for spec in batch {
            let Bson::Document(mut spec) = spec else {
                continue;
            };
            if spec.get_bool("clustered").unwrap_or(false)
                || spec.get_str("name").ok() == Some("_id_")
            {
                continue;
            }
            if let Ok(key) = spec.get_document("key") {
                let key = from_bucket_key(key, ts);
                spec.insert("key", key);
            }
            out.push(Bson::Document(spec));
        }
        cursor.insert("firstBatch", out);
        cursor.insert("ns", ns);
    }
    reply::to_raw(&reply)
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
        Ok(())
    }
}
