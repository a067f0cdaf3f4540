//! `update` on a time-series collection, as mongod 8 allows it: any filter,
//! operator, replacement or pipeline updates, `multi`, `upsert`.
//!
//! Each bucket holding a match is rewritten in one atomic read-modify-write
//! (`Collection::modify`, re-checking the bucket as it is then): a measurement
//! whose new version keeps the bucket's meta value and still fits its time
//! span stays in it; one that does not leaves it and is inserted afterwards as
//! a new measurement would be (so a reader may briefly miss it between the two
//! writes). A new version must still hold a date in the time field (2 BadValue,
//! as on insert). With `sort` (mongod 8, single-measurement updates) and in
//! `findAndModify` the one measurement is the first match in `sort` order
//! (else the first found), removed or rewritten alone.

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::agg::unpack_bucket;
use bisondb_query::matcher::Matcher;
use bisondb_query::projection::Projection;
use bisondb_storage::{Collection, Durability, Modify};
use bson::{doc, Bson, Document, RawBson, RawDocumentBuf};

use crate::commands::update::{parse_statement, Statement};
use crate::commands::Context;
use crate::fields;
use crate::namespaces::timeseries::write::{
    bucket_collection, keep_new_version, keep_row, meta_key, open_rewrite, rewritten, write_group,
    Measurement,
};
use crate::namespaces::timeseries::TsOptions;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;
use crate::write::upsert_document;

#[derive(Default)]
struct Outcome {
    matched: u64,
    modified: u64,
    upserted: Option<Bson>,
}

/// `update` into a time-series collection.
pub(super) fn update(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    // Parsed as for any collection; a validator does not apply to buckets.
    let u = crate::commands::update::Update::parse(req)?.batch;
    let buckets = bucket_collection(&ctx.state.storage, &req.db, name)?;
    let mut tally = reply::UpdateTally::default();
    let errors = u.each(|i, raw| {
        let outcome = parse_statement("update", raw, &u.lets)
            .and_then(|s| apply_statement(&buckets, ts, &s, u.wc.durability));
        OpCounters::add(&ctx.state.opcounters.update, 1);
        let o = outcome?;
        tally.add(i, o.matched, o.modified, o.upserted);
        Ok(())
    })?;
    tally.reply(errors)
}

fn apply_statement(
    buckets: &Collection,
    ts: &TsOptions,
    s: &Statement,
    durability: Durability,
) -> MongoResult<Outcome> {
    let matcher = &s.filter;
    // mongod 8's `sort` (single-measurement updates only): the first match in
    // that order is the one to change.
    if let Some(sort) = &s.sort {
        let mut out = Outcome::default();
        if let Some((id, before)) = find_target(buckets, ts, matcher, Some(sort))? {
            let mut after = before.clone();
            let changed = s
                .update
                .apply_with_query(&mut after, false, Some(matcher))?;
            let new_version = Measurement::from_document(after, ts)?;
            if !changed || rewrite_one(buckets, ts, &id, &before, Some(new_version), durability)? {
                out.matched = 1;
                out.modified = u64::from(changed);
            }
            return Ok(out);
        }
        if s.upsert {
            let d = upsert_document(matcher, &s.update)?;
            out.upserted = d.get("_id").cloned();
            let m = Measurement::from_document(d, ts)?;
            write_measurements(buckets, ts, vec![m], durability)?;
        }
        return Ok(out);
    }
    let mut out = Outcome::default();
    let mut budget = if s.multi { u64::MAX } else { 1 };
    // The buckets with a match in a snapshot; each is re-checked when rewritten.
    let mut ids = Vec::new();
    for bucket in buckets.scan(false) {
        let d = fields::to_document(&bucket?)?;
        let rows = unpack_bucket(&d, &ts.time_field, ts.meta_field.as_deref());
        if rows.iter().any(|r| matcher.matches_doc(r)) {
            if let Some(id) = d.get("_id").cloned() {
                ids.push(RawBson::try_from(id).map_err(|e| MongoError::internal(e.to_string()))?);
            }
        }
    }
    let mut moved: Vec<Measurement> = Vec::new();
    for id in ids {
        if budget == 0 {
            break;
        }
        let mut step = (0u64, 0u64, Vec::new());
        buckets.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
            step = (0, 0, Vec::new());
            let Some((rows, mut kept)) = open_rewrite(cur, ts)? else {
                return Ok(Modify::Keep);
            };
            let mut left = budget;
            for row in rows {
                let mut new_version = None;
                if left > 0 && matcher.matches_doc(&row) {
                    left -= 1;
                    step.0 += 1;
                    let mut after = row.clone();
                    if s.update
                        .apply_with_query(&mut after, false, Some(matcher))?
                    {
                        step.1 += 1;
                        new_version = Some(after);
                    }
                }
                match new_version {
                    Some(after) => {
                        let m = Measurement::from_document(after, ts)?;
                        if !keep_new_version(&mut kept, ts, &m) {
                            step.2.push(m);
                        }
                    }
                    None => keep_row(&mut kept, ts, row),
                }
            }
            rewritten(&kept, step.1 > 0)
        })?;
        budget = budget.saturating_sub(step.0);
        out.matched += step.0;
        out.modified += step.1;
        moved.extend(step.2);
    }
    write_measurements(buckets, ts, moved, durability)?;
    if out.matched == 0 && s.upsert {
        let d = upsert_document(&s.filter, &s.update)?;
        out.upserted = d.get("_id").cloned();
        let m = Measurement::from_document(d, ts)?;
        write_measurements(buckets, ts, vec![m], durability)?;
    }
    Ok(out)
}

/// Writes measurements as an insert does: grouped by meta value, in order.
fn write_measurements(
    buckets: &Collection,
    ts: &TsOptions,
    ms: Vec<Measurement>,
    durability: Durability,
) -> MongoResult<()> {
    let mut groups: Vec<(Vec<u8>, Vec<Measurement>)> = Vec::new();
    for m in ms {
        let key = meta_key(&m.meta)?;
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, g)) => g.push(m),
            None => groups.push((key, vec![m])),
        }
    }
    for (key, group) in groups {
        write_group(buckets, ts, key, group, durability)?;
    }
    Ok(())
}

/// `findAndModify` on a time-series collection: the command parsed as for any
/// collection, run over the measurements.
pub(super) fn find_and_modify(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    name: &str,
    ts: &TsOptions,
) -> MongoResult<RawDocumentBuf> {
    use crate::commands::Command;
    let f = crate::commands::find_and_modify::FindAndModify::parse(req)?;
    let buckets = bucket_collection(&ctx.state.storage, &req.db, name)?;
    let fields = match &f.fields {
        Some(p) => Some(Projection::parse_with_filter(p, &f.query)?),
        None => None,
    };
    let project =
        |d: Option<Document>| crate::commands::find_and_modify::project_value(d, fields.as_ref());
    let target = find_target(&buckets, ts, &f.query, f.sort.as_ref())?;
    let durability = f.wc.durability;
    let Some((id, before)) = target else {
        // No match: an upsert inserts, anything else reports nothing.
        if let (Some(spec), true) = (&f.update, f.upsert) {
            let d = upsert_document(&f.query, spec)?;
            let upserted = d.get("_id").cloned().unwrap_or(Bson::Null);
            let m = Measurement::from_document(d.clone(), ts)?;
            write_measurements(&buckets, ts, vec![m], durability)?;
            OpCounters::add(&ctx.state.opcounters.update, 1);
            let value = if f.new { project(Some(d))? } else { Bson::Null };
            return reply::ok(doc! {
                "lastErrorObject": {"n": 1, "updatedExisting": false, "upserted": upserted},
                "value": value,
            });
        }
        let leo = if f.remove {
            doc! {"n": 0}
        } else {
            doc! {"n": 0, "updatedExisting": false}
        };
        return reply::ok(doc! {"lastErrorObject": leo, "value": Bson::Null});
    };
    let after = match &f.update {
        Some(spec) => {
            let mut after = before.clone();
            spec.apply_with_query(&mut after, false, Some(&f.query))?;
            Some(after)
        }
        None => None,
    };
    let new_version = match &after {
        Some(a) => Some(Measurement::from_document(a.clone(), ts)?),
        None => None,
    };
    let found = rewrite_one(&buckets, ts, &id, &before, new_version, durability)?;
    let n = u64::from(found);
    if f.remove {
        OpCounters::add(&ctx.state.opcounters.delete, n);
        let value = if found {
            project(Some(before))?
        } else {
            Bson::Null
        };
        return reply::ok(doc! {"lastErrorObject": {"n": reply::count(n)}, "value": value});
    }
    OpCounters::add(&ctx.state.opcounters.update, 1);
    let value = match (found, f.new) {
        (false, _) => Bson::Null,
        (true, true) => project(after)?,
        (true, false) => project(Some(before))?,
    };
    reply::ok(doc! {
        "lastErrorObject": {"n": reply::count(n), "updatedExisting": found},
        "value": value,
    })
}

/// The measurement a single-measurement write targets: the first match in
/// `sort` order, else the first found; with the id of its bucket.
fn find_target(
    buckets: &Collection,
    ts: &TsOptions,
    query: &Matcher,
    sort: Option<&bisondb_query::sort::SortSpec>,
) -> MongoResult<Option<(RawBson, Document)>> {
    let mut target: Option<(RawBson, Document, Vec<Bson>)> = None;
    for bucket in buckets.scan(false) {
        let d = fields::to_document(&bucket?)?;
        for row in unpack_bucket(&d, &ts.time_field, ts.meta_field.as_deref()) {
            if !query.matches_doc(&row) {
                continue;
            }
            let key = match sort {
                Some(s) => s.sort_key(&reply::to_raw(&row)?),
                None => Vec::new(),
            };
            let better = match (&target, sort) {
                (None, _) => true,
                (Some((_, _, best)), Some(s)) => {
                    s.compare_keys(&key, best) == std::cmp::Ordering::Less
                }
                (Some(_), None) => false,
            };
            if better {
                let id = d.get("_id").cloned().unwrap_or(Bson::Null);
                let id = RawBson::try_from(id).map_err(|e| MongoError::internal(e.to_string()))?;
                target = Some((id, row, key));
            }
        }
        if target.is_some() && sort.is_none() {
            break;
        }
    }
    Ok(target.map(|(id, row, _)| (id, row)))
}

/// Replaces the measurement `before` of bucket `id` (as the bucket is now)
/// by `new_version`, or removes it when there is none; a new version that no
/// longer fits the bucket is inserted as a new measurement. Returns whether
/// the measurement was still there.
fn rewrite_one(
    buckets: &Collection,
    ts: &TsOptions,
    id: &RawBson,
    before: &Document,
    new_version: Option<Measurement>,
    durability: Durability,
) -> MongoResult<bool> {
    let mut found = false;
    let mut moved = false;
    buckets.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
        found = false;
        moved = false;
        let Some((rows, mut kept)) = open_rewrite(cur, ts)? else {
            return Ok(Modify::Keep);
        };
        for row in rows {
            if !found && row == *before {
                found = true;
                if let Some(m) = &new_version {
                    moved = !keep_new_version(&mut kept, ts, m);
                }
                continue;
            }
            keep_row(&mut kept, ts, row);
        }
        rewritten(&kept, found)
    })?;
    if moved {
        if let Some(m) = new_version {
            write_measurements(buckets, ts, vec![m], durability)?;
        }
    }
    Ok(found)
}
