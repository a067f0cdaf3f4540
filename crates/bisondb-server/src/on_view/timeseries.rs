//! Commands aimed at a time-series collection `X`: inserts and deletes of
//! measurements (stored by `namespaces::timeseries::write`), updates and
//! `findAndModify` over the measurements (`update.rs`), and index commands
//! run on the buckets with translated keys (`indexes.rs`).

use std::collections::HashMap;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Storage;
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};

use crate::commands::{delete, Context};
use crate::namespaces::timeseries::write::{
    bucket_collection, delete_matching, measurement, meta_key, write_group, Measurement,
};
use crate::namespaces::timeseries::{buckets_name, options_of, TsOptions};
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;

mod indexes;
mod update;

/// Runs a write or index command aimed at a time-series collection; `None`
/// when `coll` is not one.
pub(super) fn intercept(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    coll: &str,
) -> Option<MongoResult<RawDocumentBuf>> {
    let ts = options_of(&ctx.state.storage, &req.db, coll)?;
    Some(match req.name {
        "insert" => insert(req, ctx, coll, &ts),
        "delete" => delete(req, ctx, coll, &ts),
        "update" => update::update(req, ctx, coll, &ts),
        "findAndModify" | "findandmodify" => update::find_and_modify(req, ctx, coll, &ts),
        "createIndexes" => indexes::create_indexes(req, ctx, coll, &ts),
        "dropIndexes" => indexes::drop_indexes(req, ctx, coll, &ts),
        "listIndexes" => indexes::list_indexes(req, ctx, coll, &ts),
        other => Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!(
                "{other} on a time-series collection ({}.{coll}) is not supported by BisonDB yet (see docs/COMPATIBILITY.md)",
                req.db
            ),
        )),
    })
}

/// Whether an `aggregate` on the time-series collection `db.name` starts with
/// `$collStats`, which reads `X` itself (its buckets' statistics) rather
/// than its measurements.
pub(super) fn is_coll_stats_aggregate(
    req: &CommandRequest<'_>,
    storage: &Storage,
    name: &str,
) -> bool {
    if req.name != "aggregate" {
        return false;
    }
    let first_stage_is_coll_stats = match req.body.get("pipeline") {
        Ok(Some(RawBsonRef::Array(a))) => matches!(
            a.into_iter().next(),
            Some(Ok(RawBsonRef::Document(d))) if matches!(d.get("$collStats"), Ok(Some(_)))
        ),
        _ => false,
    };
    first_stage_is_coll_stats && options_of(storage, &req.db, name).is_some()
}

/// `insert` into a time-series collection.
fn insert(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    if let Some(v) = req.body.get("let").map_err(crate::request::invalid_bson)? {
        crate::fields::as_doc(req.name, "let", v)?;
    }
    let b = crate::fields::write::parse_write_batch(
        req,
        "documents",
        &["bypassDocumentValidation", "let"],
    )?;
    crate::validation::bypass(req.name, req.body)?;
    let buckets = bucket_collection(&ctx.state.storage, &req.db, name)?;
    let mut errors: Vec<Bson> = Vec::new();
    // Groups keep the measurements' order; `order` keeps the groups' order.
    let mut groups: HashMap<Vec<u8>, Vec<Measurement>> = HashMap::new();
    let mut order: Vec<Vec<u8>> = Vec::new();
    let mut accepted = 0u64;
    for (i, raw) in b.statements.iter().enumerate() {
        match measurement(raw, ts) {
            Ok(m) => {
                let key = meta_key(&m.meta)?;
                if !groups.contains_key(&key) {
                    order.push(key.clone());
                }
                groups.entry(key).or_default().push(m);
                accepted += 1;
            }
            Err(e) => {
                errors.push(Bson::Document(reply::write_error(i, &e, None)));
                if b.ordered {
                    break;
                }
            }
        }
    }
    for key in order {
        let Some(group) = groups.remove(&key) else {
            continue;
        };
        write_group(&buckets, ts, key, group, b.wc.durability)?;
    }
    OpCounters::add(&ctx.state.opcounters.insert, accepted);
    reply::write_reply(doc! {"n": reply::count(accepted)}, errors)
}

/// `delete` on a time-series collection: any filter, `limit` 0 or 1.
fn delete(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    let b = crate::write::Statements::parse(req, "deletes", &["let"])?;
    let buckets = ctx.state.storage.collection(&req.db, &buckets_name(name));
    let mut n = 0u64;
    let errors = b.each(|_, raw| {
        let k = delete::parse_statement(raw, &b.lets).and_then(|s| match &buckets {
            Some(c) => delete_matching(c, ts, s.selection().matcher, s.multi, b.wc.durability),
            None => Ok(0),
        })?;
        n += k;
        OpCounters::add(&ctx.state.opcounters.delete, k);
        Ok(())
    })?;
    reply::write_reply(doc! {"n": reply::count(n)}, errors)
}
