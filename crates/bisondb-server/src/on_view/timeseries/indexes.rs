//! Index commands on a time-series collection `X`: each runs as the same
//! command on its bucket collection, keys translated
//! (`namespaces::timeseries::indexes`), and `listIndexes` translates the
//! buckets' keys back and leaves out their clustered `_id` index.

use bisondb_error::MongoResult;
use bson::{doc, Bson, Document, RawDocumentBuf};

use crate::commands::{Command, Context};
use crate::fields;
use crate::namespaces::timeseries::indexes::{from_bucket_key, to_bucket_key};
use crate::namespaces::timeseries::{buckets_name, TsOptions};
use crate::reply;
use crate::request::CommandRequest;

/// Runs `body` (built here) as `name` on the buckets.
fn run<C: Command>(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &'static str,
    body: Document,
) -> MongoResult<RawDocumentBuf> {
    crate::on_view::parse_built::<C>(req, name, &body)?.execute(ctx)
}

/// The fields of `req` other than its first, as they are.
fn rest_of(req: &CommandRequest<'_>) -> MongoResult<Vec<(String, Bson)>> {
    let mut out = Vec::new();
    for (i, el) in req.body.iter().enumerate() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        if i == 0 || k.as_str() == "$db" {
            continue;
        }
        out.push((k.as_str().to_string(), fields::to_bson(v)?));
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
                    spec.insert("name", crate::namespaces::default_index_name(&key));
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
    let mut reply = fields::to_document(&raw)?;
    let ns = crate::namespaces::ns(&req.db, name);
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
