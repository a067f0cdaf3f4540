//! Commands aimed at a view or a time-series collection, as each command's
//! `on_view` fact (`registry::OnView`) says: reads run as an aggregation
//! over the view's source (the view's pipeline, then the read's own
//! options as stages), writes and index commands fail with 166
//! CommandNotSupportedOnView, and on a time-series collection they go to its
//! buckets instead ([`timeseries`]). An operation on a view may repeat the
//! view's collation but not override it (167). [`intercept`] is called by the
//! registry before a command's own handler; it sits above `commands/`, whose
//! `aggregate` it runs.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use crate::commands::{Command, Context};
use crate::fields;
use crate::namespaces::views::{definition, resolve, run_stages_in, view_collation, Resolved};
use crate::reply;
use crate::request::CommandRequest;

mod timeseries;

/// How a command treats a view (or a time-series collection, which reads as
/// a view over its buckets) named by its first field.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OnView {
    /// A read: runs as an aggregation over the view's source.
    ReadsThrough,
    /// Writes to its namespace or manages its indexes: 166
    /// CommandNotSupportedOnView on a view; a time-series collection's
    /// buckets take it instead.
    Refused,
    /// `explain`: refused while the command it explains names a view.
    ExplainsCommand,
    /// Names no collection, or its handler deals with a view itself (`drop`,
    /// `collMod`, `listCollections`, ...).
    Unaffected,
}

/// An operation on a view may give the view's own collation (or none), not
/// another one.
fn check_op_collation(n: &str, v: RawBsonRef<'_>, view: Option<&Document>) -> MongoResult<()> {
    let given = crate::collation::parse_arg(n, v)?;
    let same = match given {
        None => true,
        Some(c) => crate::collation::spec_of(c.as_ref()).as_ref() == view,
    };
    if same {
        Ok(())
    } else {
        Err(MongoError::new(
            ErrorCode::OptionNotSupportedOnView,
            "Cannot override a view's default collation",
        ))
    }
}

/// The `collation` field an aggregation over a view's source carries: the
/// view's, or simple (a view never inherits its source's default).
fn collation_arg(view: Option<&Document>) -> Bson {
    Bson::Document(view.cloned().unwrap_or_else(|| doc! {"locale": "simple"}))
}

fn not_a_collection(db: &str, coll: &str) -> MongoError {
    MongoError::new(
        ErrorCode::CommandNotSupportedOnView,
        format!("Namespace {db}.{coll} is a view, not a collection"),
    )
}

/// The collection a command names in its first field, when it is a string.
fn target<'a>(req: &CommandRequest<'a>) -> Option<&'a str> {
    match req.body.iter().next()? {
        Ok((_, RawBsonRef::String(s))) => Some(s),
        _ => None,
    }
}

/// Runs `req` against a view when its namespace is one, as its command's
/// `on_view` says; `None` lets the command's own handler run.
pub fn intercept(
    on_view: OnView,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> Option<MongoResult<RawDocumentBuf>> {
    match on_view {
        OnView::Unaffected => return None,
        OnView::ExplainsCommand => return explain_on_view(req, ctx),
        OnView::ReadsThrough | OnView::Refused => {}
    }
    let coll = target(req)?;
    definition(&ctx.state.storage, &req.db, coll)?;
    if timeseries::is_coll_stats_aggregate(req, &ctx.state.storage, coll) {
        return None;
    }
    if on_view == OnView::Refused {
        // Inserts and deletes into a time-series collection fill its buckets.
        if let Some(r) = timeseries::intercept(req, ctx, coll) {
            return Some(r);
        }
        return Some(Err(not_a_collection(&req.db, coll)));
    }
    let storage = &ctx.state.storage;
    let resolved = match resolve(storage, &req.db, coll) {
        Ok(Some(r)) => r,
        Ok(None) => return None,
        Err(e) => return Some(Err(e)),
    };
    let coll = coll.to_string();
    Some(match req.name {
        "find" => find(req, ctx, &coll, resolved),
        "count" => count(req, ctx, resolved),
        "distinct" => distinct(req, ctx, resolved),
        _ => aggregate(req, ctx, &coll, resolved),
    })
}

/// `explain` of a command on a view is not built yet.
fn explain_on_view(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
) -> Option<MongoResult<RawDocumentBuf>> {
    let inner = match req.body.get("explain") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        _ => return None,
    };
    let coll = match inner.iter().next()? {
        Ok((_, RawBsonRef::String(s))) => s,
        _ => return None,
    };
    definition(&ctx.state.storage, &req.db, coll)?;
    Some(Err(explain_unsupported(&req.db, coll)))
}

fn explain_unsupported(db: &str, coll: &str) -> MongoError {
    MongoError::new(
        ErrorCode::NotImplemented,
        format!(
            "explain on a view ({db}.{coll}) is not supported by BisonDB yet (see docs/COMPATIBILITY.md)"
        ),
    )
}

/// Parses `body`, built here, as the command `name` on the database of `req`.
pub(crate) fn parse_built<C: Command>(
    req: &CommandRequest<'_>,
    name: &'static str,
    body: &Document,
) -> MongoResult<C> {
    let raw = reply::to_raw(body)?;
    C::parse(&CommandRequest {
        body: &raw,
        sequences: Vec::new(),
        name,
        db: req.db.clone(),
        generic: std::cell::OnceCell::new(),
    })
}

/// Runs an `aggregate` body built here through the aggregate command, its
/// cursor named after the view.
fn run_aggregate(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    view: &str,
    body: Document,
) -> MongoResult<RawDocumentBuf> {
    parse_built::<crate::commands::aggregate::Aggregate>(req, "aggregate", &body)?
        .with_namespace(view)
        .execute(ctx)
}

/// Options of the original command that carry over to the aggregation as they are.
const CARRIED: &[&str] = &["lsid", "let", "hint", "comment", "maxTimeMS", "readConcern"];

/// `find` on a view: the view's pipeline, then `$match`, `$sort`, `$skip`,
/// `$limit` and `$project` from the find's options.
fn find(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    view: &str,
    resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let n = req.name;
    let mut stages = resolved.pipeline;
    let mut filter = None;
    let mut sort = None;
    let mut projection = None;
    let mut skip = 0i64;
    let mut limit = 0i64;
    let mut batch_size = None;
    let mut body = Document::new();
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "find" => {}
            "filter" => {
                if !matches!(v, RawBsonRef::Null) {
                    filter = Some(fields::to_document(fields::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "sort" => {
                if !matches!(v, RawBsonRef::Null) {
                    sort = Some(fields::to_document(fields::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "projection" => {
                if !matches!(v, RawBsonRef::Null) {
                    projection = Some(fields::to_document(fields::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "skip" => skip = fields::as_non_negative(n, "skip", v)?,
            "limit" => limit = fields::as_i64(n, "limit", v)?,
            "batchSize" => batch_size = Some(fields::as_non_negative(n, "batchSize", v)?),
            "singleBatch" | "allowDiskUse" | "noCursorTimeout" | "allowPartialResults" => {
                fields::as_bool(n, k.as_str(), v)?;
            }
            "collation" => check_op_collation(n, v, resolved.collation.as_ref())?,
            "tailable" | "awaitData" | "min" | "max" | "returnKey" | "showRecordId" => {
                if !matches!(v, RawBsonRef::Boolean(false) | RawBsonRef::Null) {
                    return Err(MongoError::new(
                        ErrorCode::InvalidPipelineOperator,
                        format!("the find option '{k}' is not supported on a view"),
                    ));
                }
            }
            other if CARRIED.contains(&other) => {
                body.insert(other, fields::to_bson(v)?);
            }
            other => fields::check_known(n, other, &[])?,
        }
    }
    if let Some(f) = filter.filter(|f| !f.is_empty()) {
        stages.push(doc! {"$match": f});
    }
    if let Some(s) = sort.filter(|s| !s.is_empty()) {
        stages.push(doc! {"$sort": s});
    }
    if skip > 0 {
        stages.push(doc! {"$skip": skip});
    }
    if limit != 0 {
        stages.push(doc! {"$limit": limit.saturating_abs()});
    }
    if let Some(p) = projection.filter(|p| !p.is_empty()) {
        stages.push(doc! {"$project": p});
    }
    let mut cursor = Document::new();
    if let Some(b) = batch_size {
        cursor.insert("batchSize", b);
    }
    let mut full = doc! {"aggregate": resolved.source, "pipeline": stages, "cursor": cursor};
    full.insert("collation", collation_arg(resolved.collation.as_ref()));
    full.extend(body);
    run_aggregate(req, ctx, view, full)
}

/// `aggregate` on a view: the view's pipeline, then the user's.
fn aggregate(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    view: &str,
    resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let mut body = Document::new();
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "aggregate" => {
                body.insert("aggregate", resolved.source.clone());
            }
            "pipeline" => {
                // A change stream watches collections, never a view's output.
                if let Some(Ok(RawBsonRef::Document(first))) =
                    fields::as_array(req.name, "pipeline", v)?
                        .into_iter()
                        .next()
                {
                    if matches!(first.get("$changeStream"), Ok(Some(_))) {
                        return Err(MongoError::new(
                            ErrorCode::CommandNotSupportedOnView,
                            format!("Namespace {}.{view} is a view, not a collection", req.db),
                        ));
                    }
                }
                let mut stages: Vec<Bson> = resolved
                    .pipeline
                    .iter()
                    .cloned()
                    .map(Bson::Document)
                    .collect();
                for s in fields::as_array(req.name, "pipeline", v)? {
                    stages.push(fields::to_bson(s.map_err(crate::request::invalid_bson)?)?);
                }
                body.insert("pipeline", stages);
            }
            "explain" => {
                if fields::as_bool(req.name, "explain", v)? {
                    return Err(explain_unsupported(&req.db, view));
                }
            }
            "$db" => {}
            "collation" => check_op_collation(req.name, v, resolved.collation.as_ref())?,
            other => {
                body.insert(other, fields::to_bson(v)?);
            }
        }
    }
    body.insert("collation", collation_arg(resolved.collation.as_ref()));
    run_aggregate(req, ctx, view, body)
}

/// The options `count` and `distinct` share with a query.
fn query_stage(v: RawBsonRef<'_>, n: &str) -> MongoResult<Option<Document>> {
    if matches!(v, RawBsonRef::Null) {
        return Ok(None);
    }
    let q = fields::to_document(fields::as_doc(n, "query", v)?)?;
    Ok((!q.is_empty()).then(|| doc! {"$match": q}))
}

/// Reads the body of a `count` or `distinct` on a view into the stages to
/// run: the view's, then a `$match` of the `query`. `collation` may only
/// repeat the view's; `hint` is ignored (the aggregation plans for itself);
/// `own` reads the command's other fields and returns false for one it
/// does not know.
fn query_stages(
    req: &CommandRequest<'_>,
    resolved: &mut Resolved,
    mut own: impl FnMut(&str, RawBsonRef<'_>) -> MongoResult<bool>,
) -> MongoResult<Vec<Document>> {
    let n = req.name;
    let mut stages = std::mem::take(&mut resolved.pipeline);
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "hint" => {}
            k if k == n => {}
            "query" => stages.extend(query_stage(v, n)?),
            "collation" => check_op_collation(n, v, resolved.collation.as_ref())?,
            other => {
                if !own(other, v)? {
                    fields::check_known(n, other, &[])?;
                }
            }
        }
    }
    Ok(stages)
}

/// `count` on a view runs as an aggregation ending in `$count`.
fn count(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    mut resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let n = req.name;
    let mut skip = 0i64;
    let mut limit = 0i64;
    let mut stages = query_stages(req, &mut resolved, |k, v| {
        match k {
            "fields" => {}
            "skip" => skip = fields::as_non_negative(n, "skip", v)?,
            "limit" => limit = fields::as_i64(n, "limit", v)?,
            _ => return Ok(false),
        }
        Ok(true)
    })?;
    if skip > 0 {
        stages.push(doc! {"$skip": skip});
    }
    if limit != 0 {
        stages.push(doc! {"$limit": limit.saturating_abs()});
    }
    let mut total: i64 = 0;
    let collation = view_collation(resolved.collation.as_ref())?;
    for d in run_stages_in(
        &ctx.state.storage,
        &req.db,
        &resolved.source,
        &stages,
        collation,
    )? {
        d?;
        total = total.saturating_add(1);
    }
    reply::ok(doc! {"n": reply::count(total as u64)})
}

/// `distinct` on a view: the view's pipeline and the query, then the values.
fn distinct(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    mut resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let n = req.name;
    let mut key = None;
    let stages = query_stages(req, &mut resolved, |k, v| {
        if k != "key" {
            return Ok(false);
        }
        key = Some(fields::as_str(n, "key", v)?.to_string());
        Ok(true)
    })?;
    let key = key.ok_or_else(|| fields::missing_field(n, "key"))?;
    if key.is_empty() {
        return Err(MongoError::bad_value(
            "FieldPath cannot be constructed with empty string",
        ));
    }
    let collation = view_collation(resolved.collation.as_ref())?;
    let docs = run_stages_in(
        &ctx.state.storage,
        &req.db,
        &resolved.source,
        &stages,
        collation.clone(),
    )?;
    crate::commands::distinct::values_reply_in(docs, &key, collation.as_deref())
}
