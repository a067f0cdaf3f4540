//! Read-only views, as mongod has them: a catalog entry whose options hold
//! `viewOn` and `pipeline` and that has no documents of its own.
//!
//! Reads through a view (`find`, `count`, `distinct`, `aggregate`) resolve it to
//! its source collection and the concatenated pipelines of the chain of views
//! (at most [`MAX_VIEW_DEPTH`] deep) and run as an aggregation, as mongod does.
//! Writes and index commands on a view fail with 166 CommandNotSupportedOnView.
//! A time-series collection reads the same way, as a view over its bucket
//! collection (`timeseries.rs`), whose writes [`intercept`] hands over there.
//! A view's `collation` (resolved, in its options; simple when absent) is the
//! collation every read through it runs with; an operation may repeat it but
//! not override it (167), and a view on a view must have the same one.
//! [`intercept`] is called by the registry before a command's own handler.

use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::agg::{CollectionReader, DocStream, Pipeline};
use bisondb_query::collation::Collation;
use bisondb_query::matcher::Matcher;
use bisondb_storage::Storage;
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::args;
use crate::plan;
use crate::registry::OnView;
use crate::reply;
use crate::request::CommandRequest;

/// mongod's limit on a chain of views on views.
pub const MAX_VIEW_DEPTH: usize = 20;

/// A view's definition as stored in the catalog.
#[derive(Debug, Clone)]
pub struct ViewDef {
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// The view's resolved collation; `None` is the simple collation.
    pub collation: Option<Document>,
}

/// The definition of `db.name` if it is a view.
pub fn definition(storage: &Storage, db: &str, name: &str) -> Option<ViewDef> {
    // Runs before every read and write command: read the options in place
    // rather than copying the collection's info.
    let coll = storage.collection(db, name)?;
    let options = coll.options();
    // A time-series collection reads as a view over its buckets.
    view_of_options(&options).or_else(|| super::timeseries::view_def(name, &options))
}

/// A view's definition from catalog options (`None` for a collection).
pub fn view_of_options(options: &Document) -> Option<ViewDef> {
    let view_on = options.get_str("viewOn").ok()?.to_string();
    let pipeline = match options.get("pipeline") {
        Some(Bson::Array(a)) => a
            .iter()
            .filter_map(|s| match s {
                Bson::Document(d) => Some(d.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some(ViewDef {
        view_on,
        pipeline,
        collation: options.get_document("collation").ok().cloned(),
    })
}

/// A view resolved down to a collection: its name and the pipeline to run over it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub source: String,
    pub pipeline: Vec<Document>,
    /// The (outermost) view's collation; `None` is simple.
    pub collation: Option<Document>,
}

fn depth_error() -> MongoError {
    MongoError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth too deep or view cycle detected. Maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// Resolves `db.name` if it is a view; `None` for a collection or a missing name.
pub fn resolve(storage: &Storage, db: &str, name: &str) -> MongoResult<Option<Resolved>> {
    let mut chain: Vec<Vec<Document>> = Vec::new();
    let mut current = name.to_string();
    let mut collation = None;
    while let Some(def) = definition(storage, db, &current) {
        if chain.len() >= MAX_VIEW_DEPTH {
            return Err(depth_error());
        }
        if chain.is_empty() {
            collation = def.collation;
        }
        chain.push(def.pipeline);
        current = def.view_on;
    }
    if chain.is_empty() {
        return Ok(None);
    }
    // The innermost view's stages run first.
    let pipeline = chain.into_iter().rev().flatten().collect();
    Ok(Some(Resolved {
        source: current,
        pipeline,
        collation,
    }))
}

/// A view `db.name` on `view_on` must have the collation of `view_on` when that
/// is a view too (mongod's check when a view is created).
pub fn check_view_collation(
    storage: &Storage,
    db: &str,
    name: &str,
    view_on: &str,
    collation: Option<&Document>,
) -> MongoResult<()> {
    match definition(storage, db, view_on) {
        Some(def) if def.collation.as_ref() != collation => Err(MongoError::new(
            ErrorCode::OptionNotSupportedOnView,
            format!("View {db}.{name} has conflicting collation with view {db}.{view_on}"),
        )),
        _ => Ok(()),
    }
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

/// Checks a new view `db.name` on `view_on` with `pipeline` before it is stored:
/// the pipeline must parse and must not write, and the chain of views it starts
/// must neither loop nor be deeper than [`MAX_VIEW_DEPTH`].
pub fn check_new_view(
    storage: &Storage,
    db: &str,
    name: &str,
    view_on: &str,
    pipeline: &[Document],
) -> MongoResult<()> {
    for (i, stage) in pipeline.iter().enumerate() {
        if let Some(op) = stage.keys().next() {
            if op == "$out" || op == "$merge" {
                return Err(MongoError::new(
                    ErrorCode::OptionNotSupportedOnView,
                    format!(
                        "The aggregation stage {op} in location {i} of the pipeline cannot be used in the view definition of {db}.{name} because it writes to disk"
                    ),
                ));
            }
        }
    }
    Pipeline::parse(pipeline)?;
    let mut depth = 1;
    let mut current = view_on.to_string();
    loop {
        if current == name {
            return Err(MongoError::new(
                ErrorCode::GraphContainsCycle,
                format!("View cycle detected: {db}.{name} is its own source"),
            ));
        }
        match definition(storage, db, &current) {
            Some(def) => {
                depth += 1;
                if depth > MAX_VIEW_DEPTH {
                    return Err(depth_error());
                }
                current = def.view_on;
            }
            None => return Ok(()),
        }
    }
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
    if super::timeseries::is_coll_stats_aggregate(req, &ctx.state.storage, coll) {
        return None;
    }
    if on_view == OnView::Refused {
        // Inserts and deletes into a time-series collection fill its buckets.
        if let Some(r) = super::timeseries::intercept(req, ctx, coll) {
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

/// Runs an `aggregate` body built here through the aggregate command, its
/// cursor named after the view.
fn run_aggregate(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    view: &str,
    body: Document,
) -> MongoResult<RawDocumentBuf> {
    let raw = reply::to_raw(&body)?;
    let sub = CommandRequest {
        body: &raw,
        sequences: Vec::new(),
        name: "aggregate",
        db: req.db.clone(),
    };
    super::aggregate::Aggregate::parse(&sub)?
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
                    filter = Some(args::to_document(args::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "sort" => {
                if !matches!(v, RawBsonRef::Null) {
                    sort = Some(args::to_document(args::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "projection" => {
                if !matches!(v, RawBsonRef::Null) {
                    projection = Some(args::to_document(args::as_doc(n, k.as_str(), v)?)?);
                }
            }
            "skip" => skip = args::as_non_negative(n, "skip", v)?,
            "limit" => limit = args::as_i64(n, "limit", v)?,
            "batchSize" => batch_size = Some(args::as_non_negative(n, "batchSize", v)?),
            "singleBatch" | "allowDiskUse" | "noCursorTimeout" | "allowPartialResults" => {
                args::as_bool(n, k.as_str(), v)?;
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
                body.insert(other, args::to_bson(v)?);
            }
            other => args::check_known(n, other, &[])?,
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
                let mut stages: Vec<Bson> = resolved
                    .pipeline
                    .iter()
                    .cloned()
                    .map(Bson::Document)
                    .collect();
                for s in args::as_array(req.name, "pipeline", v)? {
                    stages.push(args::to_bson(s.map_err(crate::request::invalid_bson)?)?);
                }
                body.insert("pipeline", stages);
            }
            "explain" => {
                if args::as_bool(req.name, "explain", v)? {
                    return Err(explain_unsupported(&req.db, view));
                }
            }
            "$db" => {}
            "collation" => check_op_collation(req.name, v, resolved.collation.as_ref())?,
            other => {
                body.insert(other, args::to_bson(v)?);
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
    let q = args::to_document(args::as_doc(n, "query", v)?)?;
    Ok((!q.is_empty()).then(|| doc! {"$match": q}))
}

/// `count` on a view runs as an aggregation ending in `$count`.
fn count(
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let n = req.name;
    let mut stages = resolved.pipeline;
    let mut skip = 0i64;
    let mut limit = 0i64;
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "count" | "hint" | "fields" => {}
            "query" => stages.extend(query_stage(v, n)?),
            "skip" => skip = args::as_non_negative(n, "skip", v)?,
            "limit" => limit = args::as_i64(n, "limit", v)?,
            "collation" => check_op_collation(n, v, resolved.collation.as_ref())?,
            other => args::check_known(n, other, &[])?,
        }
    }
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
    resolved: Resolved,
) -> MongoResult<RawDocumentBuf> {
    let n = req.name;
    let mut stages = resolved.pipeline;
    let mut key = None;
    for el in req.body.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "distinct" | "hint" => {}
            "key" => key = Some(args::as_str(n, "key", v)?.to_string()),
            "query" => stages.extend(query_stage(v, n)?),
            "collation" => check_op_collation(n, v, resolved.collation.as_ref())?,
            other => args::check_known(n, other, &[])?,
        }
    }
    let key = key.ok_or_else(|| args::missing_field(n, "key"))?;
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
    super::distinct::values_reply_in(docs, &key, collation.as_deref())
}

/// The collation of a view, parsed (`None`: simple).
fn view_collation(spec: Option<&Document>) -> MongoResult<Option<Arc<Collation>>> {
    match spec {
        Some(d) => crate::collation::parse_spec(d),
        None => Ok(None),
    }
}

/// Runs `stages` over a scan of `db.source` (which may be missing).
pub fn run_stages(
    storage: &Storage,
    db: &str,
    source: &str,
    stages: &[Document],
) -> MongoResult<DocStream> {
    run_stages_in(storage, db, source, stages, None)
}

/// [`run_stages`] under a collation (`None`: simple).
fn run_stages_in(
    storage: &Storage,
    db: &str,
    source: &str,
    stages: &[Document],
    collation: Option<Arc<Collation>>,
) -> MongoResult<DocStream> {
    let pipeline = Pipeline::parse(stages)?.with_collation(collation.clone());
    let coll = storage.collection(db, source);
    let filter = pipeline.leading_match().cloned().unwrap_or_default();
    let matcher = Matcher::parse_doc(&filter)?.with_collation(collation);
    let scan = plan::matching_doc(coll.as_ref(), &matcher, &filter)?;
    let input: DocStream = Box::new(scan.map(|r| r.and_then(|d| args::to_document(&d))));
    let reader: Arc<dyn CollectionReader> = Arc::new(super::aggregate::StorageReader {
        storage: storage.clone(),
        db: db.to_string(),
    });
    Ok(pipeline.run_with_reader(input, Some(reader)))
}

/// The documents `$lookup`, `$unionWith` and `$graphLookup` see in `db.name`:
/// through its pipeline when it is a view.
pub fn read_through(storage: &Storage, db: &str, name: &str) -> MongoResult<Option<DocStream>> {
    match resolve(storage, db, name)? {
        Some(r) => {
            let collation = view_collation(r.collation.as_ref())?;
            Ok(Some(run_stages_in(
                storage,
                db,
                &r.source,
                &r.pipeline,
                collation,
            )?))
        }
        None => Ok(None),
    }
}
