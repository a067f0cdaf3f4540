//! `aggregate`: runs a pipeline from `bisondb-query` over a collection and returns a
//! cursor. A leading `$match` filters during the scan.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use std::sync::Arc;

use bisondb_query::agg::spill::MemoryLimits;
use bisondb_query::agg::{CollectionReader, DocStream, Pipeline};
use bisondb_query::matcher::Matcher;
use bson::{Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::cursor::{Cursor, DocSource, DEFAULT_FIRST_BATCH};
use crate::fields;
use crate::let_vars::LetVars;
use crate::plan;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct Aggregate {
    db: String,
    /// `None` for a collection-less `{aggregate: 1}` (the pipeline starts with `$documents`).
    coll: Option<String>,
    pipeline: Pipeline,
    wc: crate::fields::write::WriteConcern,
    batch_size: Option<usize>,
    lsid: Option<Document>,
    hint: Option<plan::Hint>,
    /// `allowDiskUse`, when given (else the server's `allowDiskUseByDefault`).
    allow_disk_use: Option<bool>,
    /// With `explain: true`, the command itself: the reply is its plan (as the
    /// `explain` command with `queryPlanner` verbosity gives) and nothing runs.
    explain: Option<RawDocumentBuf>,
    /// The collection name the cursor reports, when it differs from the one
    /// scanned (a view read through its source collection).
    ns_coll: Option<String>,
    /// `bypassDocumentValidation`: `$out`/`$merge` skip the target's validator.
    bypass_validation: bool,
    /// The command's `collation`, if it gave one (else the collection's default).
    collation: crate::collation::Given,
    /// A leading `$changeStream`'s argument.
    change_stream: Option<bisondb_query::change_stream::ChangeStreamSpec>,
}

impl Command for Aggregate {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut coll = None;
        let mut stages = None;
        let mut batch_size = None;
        let mut have_cursor = false;
        let mut lsid = None;
        let mut hint = None;
        let mut allow_disk_use = None;
        let mut collation = None;
        let mut explain = false;
        let lets = LetVars::from_body(n, req.body)?;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "aggregate" => match v {
                    RawBsonRef::String(_) => {
                        coll = Some(Some(fields::collection_name(n, v)?.to_string()))
                    }
                    RawBsonRef::Int32(1) | RawBsonRef::Int64(1) => coll = Some(None),
                    RawBsonRef::Double(1.0) => coll = Some(None),
                    _ => return Err(MongoError::new(
                        ErrorCode::InvalidNamespace,
                        "Invalid aggregate namespace: 'aggregate' must be a collection name or 1",
                    )),
                },
                "pipeline" => {
                    let mut list = Vec::new();
                    for s in fields::as_array(n, "pipeline", v)? {
                        match s.map_err(crate::request::invalid_bson)? {
                            RawBsonRef::Document(d) => list.push(fields::to_document(d)?),
                            other => {
                                return Err(fields::wrong_type(n, "pipeline", other, "object"))
                            }
                        }
                    }
                    stages = Some(list);
                }
                "cursor" => {
                    have_cursor = true;
                    let c = fields::as_doc(n, "cursor", v)?;
                    for el in c.iter() {
                        let (ck, cv) = el.map_err(crate::request::invalid_bson)?;
                        match ck.as_str() {
                            "batchSize" => {
                                batch_size =
                                    Some(fields::as_non_negative(n, "cursor.batchSize", cv)?
                                        as usize)
                            }
                            other => return Err(fields::unknown_field("aggregate.cursor", other)),
                        }
                    }
                }
                "explain" => explain = fields::as_bool(n, "explain", v)?,
                "hint" => hint = plan::Hint::parse(v)?,
                "collation" => collation = crate::collation::parse_arg(n, v)?,
                "allowDiskUse" => allow_disk_use = Some(fields::as_bool(n, "allowDiskUse", v)?),
                "bypassDocumentValidation" => {
                    fields::as_bool(n, k.as_str(), v)?;
                }
                "lsid" => lsid = Some(fields::to_document(fields::as_doc(n, "lsid", v)?)?),
                "let" => {} // read by `LetVars::from_body`
                other => fields::check_known(n, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(n, "aggregate"))?;
        let stages = stages.ok_or_else(|| fields::missing_field(n, "pipeline"))?;
        if !have_cursor && !explain {
            return Err(MongoError::failed_to_parse(
                "The 'cursor' option is required, except for aggregate with the explain argument",
            ));
        }
        if coll.is_none() {
            let first = stages
                .first()
                .and_then(|s| s.keys().next())
                .map(String::as_str);
            // Stages that produce their own input; the ones BisonDB lacks fail in `Pipeline::parse`.
            const COLLECTIONLESS: &[&str] = &[
                "$changeStream",
                "$currentOp",
                "$documents",
                "$listLocalSessions",
                "$listSessions",
                "$querySettings",
            ];
            if !first.is_some_and(|f| COLLECTIONLESS.contains(&f)) {
                return Err(MongoError::new(
                    ErrorCode::InvalidNamespace,
                    format!(
                        "{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                        first.unwrap_or("")
                    ),
                ));
            }
        }
        // A leading stage the server supplies: its namespace and argument
        // are checked here, before the rest of the pipeline is parsed.
        if let Some(first) = stages.first() {
            crate::stages::check_first(first, &req.db, coll.as_deref())?;
        }
        if fields::api_strict(req.body) {
            crate::stages::check_api_version_1(&stages)?;
        }
        let change_stream = match stages.first() {
            Some(first) if first.contains_key("$changeStream") => {
                crate::stages::change_stream::check_read_concern(req.body)?;
                Some(crate::stages::change_stream::check(
                    &stages,
                    &req.db,
                    coll.as_deref(),
                )?)
            }
            _ => None,
        };
        // The server splits the events the pipeline returns.
        let stages = match &change_stream {
            Some(cs) if cs.split_large_events => stages
                .get(..stages.len().saturating_sub(1))
                .unwrap_or_default()
                .to_vec(),
            _ => stages,
        };
        let pipeline = Pipeline::parse_command(&lets.pipeline(&stages))?;
        // mongod refuses a forbidden target when it parses the stage, before
        // anything runs (explain included).
        if let Some(out) = pipeline.output() {
            let (writer, target_db, target) = crate::write::output_target(out, &req.db);
            crate::namespaces::check_writable(target_db, target, writer)?;
        }
        Ok(Aggregate {
            wc: crate::fields::write::write_concern(n, req.body)?,
            db: req.db.clone(),
            coll,
            pipeline,
            batch_size,
            lsid,
            hint,
            allow_disk_use,
            explain: explain.then(|| req.body.to_owned()),
            ns_coll: None,
            bypass_validation: crate::validation::bypass(n, req.body)?,
            collation,
            change_stream,
        })
    }

    fn execute(mut self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        if let Some(body) = self.explain {
            return super::explain::Explain::query_planner(self.db, body).execute(ctx);
        }
        OpCounters::add(&ctx.state.opcounters.command, 0);
        if let Some(spec) = self.change_stream {
            return crate::stages::change_stream::open(
                ctx.state,
                crate::stages::change_stream::Open {
                    db: self.db,
                    coll: self.coll,
                    spec,
                    pipeline: self.pipeline,
                    batch_size: self.batch_size,
                    lsid: self.lsid,
                },
            );
        }
        let ns_coll = self.ns_coll.as_deref().or(self.coll.as_deref());
        let ns = crate::namespaces::ns(&self.db, ns_coll.unwrap_or("$cmd.aggregate"));
        let coll = self
            .coll
            .as_deref()
            .and_then(|c| ctx.state.storage.collection(&self.db, c));
        // Every stage compares strings with the command's collation, else the
        // collection's default.
        let collation = crate::collation::effective(&self.collation, coll.as_ref())?;
        self.pipeline.set_collation(collation.clone());
        // A leading $geoNear reads the cells of its distance when its index
        // can tell them, else the whole collection.
        let mut geo_scan = None;
        if let Some(stage) = self.pipeline.geo_near_mut() {
            match coll.as_ref() {
                Some(c) => geo_scan = plan::resolve_geo_near(&c.indexes(), stage)?,
                // No collection, nothing to read: any field will do.
                None => stage.set_key("_id".into(), false),
            }
        }
        let filter = self.pipeline.leading_match().cloned().unwrap_or_default();
        let matcher = Matcher::parse_doc(&filter)?.with_collation(collation.clone());
        let leading_sort = self
            .pipeline
            .leading_sort()
            .map(|s| s.clone().with_collation(collation));
        // The leading $match and a $sort right after it go through the
        // planner (indexes, hint); when an index scan yields that order, the
        // $sort stage has nothing left to do.
        let chosen = match geo_scan {
            Some(p) => p,
            None => plan::choose(
                coll.as_ref(),
                &matcher,
                Some(&filter),
                leading_sort.as_ref(),
                self.hint.as_ref(),
            )?,
        };
        if chosen.provides_sort {
            self.pipeline.remove_leading_sort();
        } else if leading_sort.is_some() {
            // The pipeline's `$sort` sorts in memory (mongod's scanAndOrder).
            crate::metrics::add(&crate::metrics::SCAN_AND_ORDER, 1);
        }
        let input: Input = if self.pipeline.leading_server_stage().is_some() {
            // The stage makes the input from what the server has.
            self.pipeline
                .set_server_stages(Arc::new(crate::stages::ServerStagesOf {
                    state: ctx.state.clone(),
                    db: self.db.clone(),
                    coll_name: self.coll.clone(),
                    coll: coll.clone(),
                    own_ops: crate::auth::own_ops(ctx),
                }));
            Input::Owned(Box::new(std::iter::empty()))
        } else {
            let stats = Arc::new(plan::Stats::default());
            ctx.conn.op.plan(&stats, &chosen);
            plan::note_index_use(coll.as_ref(), &chosen);
            let scan = plan::execute(coll.as_ref(), &chosen, &matcher, stats)?;
            // A leading `$text`: each document's score is recorded by `_id`
            // as it enters, for `{$meta: "textScore"}` in later stages.
            let scan: DocSource = match matcher.bound_text() {
                Some(bound) => {
                    let scores = Arc::new(bisondb_query::text::ScoresById::default());
                    self.pipeline.set_text_scores(scores.clone());
                    Box::new(scan.inspect(move |r| {
                        if let Ok(d) = r {
                            scores.record(d, bound.score(d));
                        }
                    }))
                }
                None => scan,
            };
            // The scan applied the leading $match to the stored documents:
            // matching them again as owned documents would be wasted work.
            self.pipeline.take_leading_match();
            // A pipeline that starts with $group evaluates over the stored
            // BSON itself (or converts only the fields it reads).
            if self.pipeline.reads_raw() || self.pipeline.needed_fields().is_some() {
                Input::Raw(scan)
            } else {
                Input::Owned(Box::new(
                    scan.map(|r| r.and_then(|d| fields::to_document(&d))),
                ))
            }
        };
        let reader: Arc<dyn CollectionReader> = Arc::new(crate::namespaces::views::StorageReader {
            storage: ctx.state.storage.clone(),
            db: self.db.clone(),
        });
        let out_stage = self.pipeline.output().cloned();
        self.pipeline
            .set_memory_limits(memory_limits(ctx, self.allow_disk_use));
        let output = match input {
            Input::Owned(docs) => self.pipeline.run_with_reader(docs, Some(reader)),
            Input::Raw(docs) => self.pipeline.run_raw_with_reader(docs, Some(reader)),
        };
        if let Some(stage) = out_stage {
            crate::write::write_output(
                &ctx.state.storage,
                &self.db,
                &stage,
                output,
                self.wc.durability,
                self.bypass_validation,
            )?;
            let mut cursor = Cursor::new(ns.clone(), Box::new(std::iter::empty()), None);
            let batch = cursor.next_batch(Some(0))?;
            return crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, true);
        }
        let src: DocSource = Box::new(output.map(|r| r.and_then(|d| result_doc(&d))));
        let mut cursor = Cursor::new(ns.clone(), src, None);
        cursor.lsid = self.lsid;
        cursor.profile = ctx.conn.op.cursor_profile();
        let batch = cursor.next_batch(Some(self.batch_size.unwrap_or(DEFAULT_FIRST_BATCH)))?;
        crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, false)
    }
}

impl Aggregate {
    /// Names the cursor after `coll` (a view) rather than the collection scanned.
    pub(crate) fn with_namespace(mut self, coll: &str) -> Aggregate {
        self.ns_coll = Some(coll.to_string());
        self
    }
}

/// The blocking stages' limits from the server's parameters, the command's
/// `allowDiskUse`, and the spill directory: `<dbpath>/_tmp` when the dbpath
/// exists (also for inMemory, as mongod), else the system temp directory.
fn memory_limits(ctx: &Context<'_>, allow_disk_use: Option<bool>) -> MemoryLimits {
    let cfg = &ctx.state.config;
    MemoryLimits {
        sort_bytes: cfg.sort_memory_bytes,
        group_bytes: cfg.group_memory_bytes,
        allow_disk_use: allow_disk_use.unwrap_or(cfg.allow_disk_use_by_default),
        spill_dir: cfg
            .dbpath
            .is_dir()
            .then(|| crate::state::spill_dir(&cfg.dbpath)),
    }
}

/// What the pipeline reads: owned documents, or the scan's stored ones
/// (which it reads raw, or converts only the fields it needs of).
enum Input {
    Owned(DocStream),
    Raw(DocSource),
}

/// A pipeline's result document as it goes into a reply: no document a stage
/// produces reaches the client past 16 MiB (mongod's 10334 BSONObjectTooLarge,
/// whichever stage built it: `$group` with `$push`, `$lookup`, `$facet`).
fn result_doc(d: &bson::Document) -> MongoResult<bson::RawDocumentBuf> {
    let raw = crate::reply::to_raw(d)?;
    let len = raw.as_bytes().len();
    if len > crate::storable::MAX_USER_DOC {
        let first = raw
            .iter()
            .next()
            .and_then(Result::ok)
            .map(|(k, _)| k.as_str().to_string())
            .unwrap_or_default();
        return Err(MongoError::new(
            ErrorCode::BSONObjectTooLarge,
            format!(
                "BSONObj size: {len} (0x{len:X}) is invalid. Size must be between 0 and {}(16MB) First element: {first}",
                bisondb_query::agg::spill::MAX_INTERNAL_DOC_BYTES
            ),
        ));
    }
    Ok(raw)
}
