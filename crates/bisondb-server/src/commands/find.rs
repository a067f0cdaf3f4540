//! `find`: filter, sort, skip, limit, projection, and the first batch of a cursor.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::projection::{DocMeta, Projection};
use bisondb_query::sort::SortSpec;
use std::sync::Arc;

use bson::{Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::cursor::{Cursor, DocSource, DEFAULT_FIRST_BATCH};
use crate::fields;
use crate::let_vars::LetVars;
use crate::plan;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct Find {
    db: String,
    coll: String,
    filter: Matcher,
    filter_doc: Document,
    hint: Option<plan::Hint>,
    projection: Option<Document>,
    sort: Option<SortSpec>,
    skip: u64,
    limit: Option<u64>,
    batch_size: Option<usize>,
    single_batch: bool,
    /// `allowDiskUse`, when given (else the server's `allowDiskUseByDefault`,
    /// true as in mongod 8.0).
    allow_disk_use: Option<bool>,
    no_cursor_timeout: bool,
    lsid: Option<Document>,
    /// `tailable` and `awaitData` (see `crate::tailable`).
    tailable: bool,
    await_data: bool,
    /// The command's `collation`, if it gave one (else the collection's default).
    collation: crate::collation::Given,
    /// `min`/`max`: bounds on the hinted index (`plan::min_max`).
    min_max: plan::MinMax,
    /// `returnKey`: the index key instead of each document.
    return_key: bool,
    /// `showRecordId`: each result carries its record id as `$recordId`.
    show_record_id: bool,
}

const KNOWN: &[&str] = &[
    "allowDiskUse",
    "allowPartialResults",
    "awaitData",
    "batchSize",
    "collation",
    "filter",
    "find",
    "hint",
    "let",
    "limit",
    "max",
    "min",
    "noCursorTimeout",
    "oplogReplay",
    "projection",
    "readOnce",
    "returnKey",
    "showRecordId",
    "singleBatch",
    "skip",
    "sort",
    "tailable",
    "term",
];

impl Command for Find {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut f = Find {
            db: req.db.clone(),
            coll: String::new(),
            filter: Matcher::parse_doc(&Document::new())?,
            filter_doc: Document::new(),
            hint: None,
            projection: None,
            sort: None,
            skip: 0,
            limit: None,
            batch_size: None,
            single_batch: false,
            allow_disk_use: None,
            no_cursor_timeout: false,
            lsid: None,
            tailable: false,
            await_data: false,
            collation: None,
            min_max: plan::MinMax::default(),
            return_key: false,
            show_record_id: false,
        };
        // `sort: {$natural: ±1}`: the collection's own order, as a hint.
        let mut natural = None;
        let mut have_coll = false;
        let lets = LetVars::from_body(n, req.body)?;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "find" => {
                    f.coll = fields::collection_name(n, v)?.to_string();
                    have_coll = true;
                }
                "filter" if lets.is_empty() => {
                    f.filter = Matcher::parse(fields::as_doc(n, "filter", v)?)?
                }
                "filter" => {
                    let d = fields::to_document(fields::as_doc(n, "filter", v)?)?;
                    f.filter = Matcher::parse_doc(&lets.filter(&d))?;
                }
                "projection" => {
                    let p = fields::to_document(fields::as_doc(n, "projection", v)?)?;
                    let p = match lets.expr(&bson::Bson::Document(p)) {
                        bson::Bson::Document(d) => d,
                        _ => Document::new(),
                    };
                    if !p.is_empty() {
                        f.projection = Some(p);
                    }
                }
                "sort" => {
                    let s = fields::to_document(fields::as_doc(n, "sort", v)?)?;
                    if let Some(forward) = natural_sort(&s) {
                        natural = Some(forward);
                    } else if !s.is_empty() {
                        f.sort = Some(SortSpec::parse(&s)?);
                    }
                }
                "skip" => f.skip = fields::as_non_negative(n, "skip", v)? as u64,
                "limit" => {
                    let l = fields::as_non_negative(n, "limit", v)?;
                    f.limit = (l > 0).then_some(l as u64);
                }
                "batchSize" => {
                    f.batch_size = Some(fields::as_non_negative(n, "batchSize", v)? as usize)
                }
                "singleBatch" => f.single_batch = fields::as_bool(n, "singleBatch", v)?,
                "allowDiskUse" => f.allow_disk_use = Some(fields::as_bool(n, "allowDiskUse", v)?),
                "noCursorTimeout" => {
                    f.no_cursor_timeout = fields::as_bool(n, "noCursorTimeout", v)?
                }
                "hint" => f.hint = plan::Hint::parse(v)?,
                "collation" => f.collation = crate::collation::parse_arg(n, v)?,
                "tailable" => f.tailable = fields::as_bool(n, "tailable", v)?,
                "awaitData" => f.await_data = fields::as_bool(n, "awaitData", v)?,
                "min" => f.min_max.min = fields::to_document(fields::as_doc(n, "min", v)?)?,
                "max" => f.min_max.max = fields::to_document(fields::as_doc(n, "max", v)?)?,
                "returnKey" => f.return_key = fields::as_bool(n, "returnKey", v)?,
                "showRecordId" => f.show_record_id = fields::as_bool(n, "showRecordId", v)?,
                // Accepted for drivers and mongos, with no effect on a
                // standalone server; typed as mongod's IDL types them.
                k @ ("allowPartialResults" | "oplogReplay" | "readOnce") => {
                    fields::as_bool(n, k, v)?;
                }
                "term" => {
                    fields::as_i64(n, "term", v)?;
                }
                "lsid" => f.lsid = Some(fields::to_document(fields::as_doc(n, "lsid", v)?)?),
                "let" => {} // read before the loop by `LetVars::from_body`
                other => fields::check_known(n, other, KNOWN)?,
            }
        }
        if !have_coll {
            return Err(fields::missing_field(n, "find"));
        }
        f.min_max.validate()?;
        // mongod's checks, in its order (query_request_helper).
        if f.tailable {
            if f.sort.is_some() || natural == Some(false) {
                return Err(MongoError::bad_value(
                    "cannot use tailable option with a sort other than {$natural: 1}",
                ));
            }
            if f.single_batch {
                return Err(MongoError::bad_value(
                    "cannot use tailable option with the 'singleBatch' option",
                ));
            }
        }
        if f.await_data && !f.tailable {
            return Err(MongoError::failed_to_parse(
                "Cannot set 'awaitData' without also setting 'tailable'",
            ));
        }
        if let (Some(forward), None) = (natural, &f.hint) {
            f.hint = Some(plan::Hint::Natural(forward));
        }
        // The filter as sent: partial-index implication and explain's parsedQuery.
        if let Ok(Some(RawBsonRef::Document(d))) = req.body.get("filter") {
            f.filter_doc = fields::to_document(d)?;
        }
        // Parsed after the loop: a positional projection (`a.$`) needs the filter.
        if let Some(p) = &f.projection {
            Projection::parse_with_filter(p, &f.filter)?;
        }
        Ok(f)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        OpCounters::add(&ctx.state.opcounters.query, 1);
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        if self.tailable {
            return self.execute_tailable(ctx, coll);
        }
        let stats = Arc::new(plan::Stats::default());
        let allow_disk_use = self
            .allow_disk_use
            .unwrap_or(ctx.state.config.allow_disk_use_by_default);
        let sort_memory = (allow_disk_use, ctx.state.config.sort_memory_bytes);
        let (chosen, src) = self.source(coll.as_ref(), stats.clone(), sort_memory)?;
        ctx.conn.op.plan(&stats, &chosen);
        let mut cursor = Cursor::new(ns.clone(), src, self.limit);
        cursor.profile = ctx.conn.op.cursor_profile();
        // A blocking sort holds all its results, and an `_id` lookup has at
        // most one: both know their end (mongod's SORT and IDHACK `isEOF`).
        cursor.knows_end = matches!(
            chosen.access,
            plan::Access::IdLookup(_) | plan::Access::Empty
        ) || (self.sort.is_some() && !chosen.provides_sort);
        cursor.no_timeout = self.no_cursor_timeout;
        cursor.lsid = self.lsid;
        let first = self.batch_size.unwrap_or(DEFAULT_FIRST_BATCH);
        let batch = cursor.next_batch(Some(first))?;
        crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, self.single_batch)
    }
}

impl Find {
    /// A tailable find: insertion order from the start, then a cursor that
    /// stays open at the end of the data.
    fn execute_tailable(
        self,
        ctx: &mut Context<'_>,
        coll: Option<bisondb_storage::Collection>,
    ) -> MongoResult<RawDocumentBuf> {
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        // A tailable cursor reads in natural order, through no index.
        for (used, name) in [
            (!self.min_max.min.is_empty(), "min"),
            (!self.min_max.max.is_empty(), "max"),
            (self.return_key, "returnKey"),
            (self.show_record_id, "showRecordId"),
        ] {
            if used {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("find option '{name}' with 'tailable' is not supported by BisonDB yet"),
                ));
            }
        }
        let Some(coll) = coll else {
            return crate::cursor::cursor_reply(&ns, 0, bson::RawArrayBuf::new(), true);
        };
        let Some(inserts) = coll.subscribe_inserts() else {
            return Err(MongoError::bad_value(format!(
                "error processing query: ns={ns} tailable cursor requested on non capped collection"
            )));
        };
        let src: DocSource = Box::new(crate::tailable::TailSource::new(
            coll.clone(),
            self.filter.clone(),
        ));
        let src: DocSource = if self.skip > 0 {
            Box::new(src.skip(self.skip as usize))
        } else {
            src
        };
        let src: DocSource = match &self.projection {
            Some(p) => {
                let p = Projection::parse_with_filter(p, &self.filter)?;
                Box::new(src.map(move |d| d.and_then(|d| p.apply_raw(&d))))
            }
            None => src,
        };
        let mut cursor = Cursor::new(ns.clone(), src, self.limit);
        cursor.no_timeout = self.no_cursor_timeout;
        cursor.lsid = self.lsid;
        cursor.tail = Some(crate::tailable::Tail {
            await_data: self.await_data,
            inserts,
        });
        let first = self.batch_size.unwrap_or(DEFAULT_FIRST_BATCH);
        let batch = cursor.next_batch(Some(first))?;
        // mongod keeps a tailable cursor only on a collection that has
        // records (SERVER-13955): on an empty one the cursor is dead at once.
        if coll.count() == 0 {
            return crate::cursor::cursor_reply(&ns, 0, batch.docs, true);
        }
        crate::cursor::finish_first_batch(ctx.state, &ns, cursor, batch, false)
    }

    /// Plans the query and builds the document stream (before the limit,
    /// which the cursor applies).
    fn source(
        &self,
        coll: Option<&bisondb_storage::Collection>,
        stats: Arc<plan::Stats>,
        // `allowDiskUse` (resolved) and the blocking sort's memory limit.
        (allow_disk_use, sort_memory_bytes): (bool, usize),
    ) -> MongoResult<(plan::Plan, DocSource)> {
        // Under a non-simple collation, string comparisons in the filter and
        // the sort use it (the planner then keeps string bounds and index
        // order out of the plan).
        let collation = crate::collation::effective(&self.collation, coll)?;
        let query_collation = collation.clone();
        let (filter_c, sort_c);
        let (filter, sort) = match collation {
            None => (&self.filter, self.sort.as_ref()),
            Some(c) => {
                filter_c = self.filter.clone().with_collation(Some(c.clone()));
                sort_c = self.sort.clone().map(|s| s.with_collation(Some(c)));
                (&filter_c, sort_c.as_ref())
            }
        };
        // `{$meta: "textScore"}` in the sort reads the filter's `$text`.
        let sort_t;
        let sort = match sort {
            Some(s) if s.needs_text_score() => {
                sort_t = s.clone().with_text_score(self.filter.text_score_source())?;
                Some(&sort_t)
            }
            other => other,
        };
        let chosen = if self.min_max.is_empty() {
            plan::choose(
                coll,
                filter,
                Some(&self.filter_doc),
                sort,
                self.hint.as_ref(),
            )?
        } else {
            plan::choose_min_max(
                coll,
                self.hint.as_ref(),
                &self.min_max,
                sort,
                query_collation.as_deref(),
            )?
        };
        plan::note_index_use(coll, &chosen);
        let src = plan::execute(coll, &chosen, filter, stats.clone())?;
        let src: DocSource = match sort {
            Some(spec) if !chosen.provides_sort => {
                let keep = self.limit.map(|l| l.saturating_add(self.skip) as usize);
                plan::sorted_source(
                    src,
                    spec,
                    keep,
                    allow_disk_use,
                    sort_memory_bytes,
                    stats.clone(),
                )?
            }
            _ => src,
        };
        let src: DocSource = if self.skip > 0 {
            plan::counted(Box::new(src.skip(self.skip as usize)), stats, |s| &s.skip)
        } else {
            src
        };
        let show = self.show_record_id;
        if show && coll.is_some_and(|c| c.is_capped()) {
            // A capped collection's record ids are its natural-order keys,
            // which its `_id`-ordered scans do not carry.
            return Err(MongoError::new(
                ErrorCode::NotImplemented,
                "find option 'showRecordId' on a capped collection is not supported by BisonDB yet",
            ));
        }
        let src: DocSource = match &self.projection {
            // mongod's RETURN_KEY stage replaces the projection, and its
            // output is the key alone: no `$recordId` even with
            // `showRecordId` (the command-monitoring spec's "find with
            // showRecordId and returnKey" expects `{_id: 1}`).
            _ if self.return_key => {
                let keys = plan::ReturnKey::new(&chosen)?;
                project(src, coll, false, move |d| keys.key_of(d))
            }
            Some(p) => {
                let p = Projection::parse_with_filter(p, &self.filter)?;
                if p.needs_sort_key() || p.needs_index_key() {
                    if show {
                        return Err(MongoError::new(
                            ErrorCode::NotImplemented,
                            "find option 'showRecordId' with a $meta sortKey or indexKey projection is not supported by BisonDB yet",
                        ));
                    }
                    meta_projection(p, &chosen, sort.cloned(), src)?
                } else {
                    project(src, coll, show, move |d| p.apply_raw(d))
                }
            }
            None if show => project(src, coll, show, |d| Ok(d.clone())),
            None => src,
        };
        Ok((chosen, src))
    }

    /// `explain` of this find: the plan tree, and with `execute` the
    /// statistics of actually running it to completion.
    pub fn explain(
        self,
        ctx: &mut Context<'_>,
        execute: bool,
    ) -> MongoResult<(Document, Option<Document>)> {
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        let stats = Arc::new(plan::Stats::default());
        let started = std::time::Instant::now();
        let allow_disk_use = self
            .allow_disk_use
            .unwrap_or(ctx.state.config.allow_disk_use_by_default);
        let sort_memory = (allow_disk_use, ctx.state.config.sort_memory_bytes);
        let (chosen, src) = self.source(coll.as_ref(), stats.clone(), sort_memory)?;
        let tree = if self.express(&chosen, coll.as_ref())? {
            plan::StageTree::express_id(self.projection.as_ref())
        } else {
            let mut tree = plan::StageTree::of_plan(&chosen, &self.filter_doc, false);
            if let Some(s) = &self.sort {
                if !chosen.provides_sort {
                    tree = tree.sort(s, self.limit);
                }
            }
            if self.skip > 0 {
                tree = tree.skip(self.skip);
            }
            if let Some(l) = self.limit {
                tree = tree.limit(l);
            }
            if self.return_key {
                tree = tree.return_key();
            } else if let Some(p) = &self.projection {
                tree = tree.projection(p);
            }
            tree
        };
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        let planner = plan::query_planner(ns, &self.filter_doc, &tree);
        if !execute {
            return Ok((planner, None));
        }
        // Like LIMIT, stop asking for documents once the limit is reached.
        let limit = self.limit.unwrap_or(u64::MAX);
        let src = plan::counted(src, stats.clone(), |s| &s.out);
        for d in src.take(usize::try_from(limit).unwrap_or(usize::MAX)) {
            d?;
        }
        let exec = plan::execution_stats(&stats, started, tree.execution_stages(&stats));
        Ok((planner, Some(exec)))
    }
}

impl Find {
    /// Whether mongod 8 answers this find on its express path
    /// (`isExpressEligible`): a filter that is only an `_id` equality on an
    /// existing collection, under the collection's own collation, with at
    /// most a simple projection and none of hint, skip, min/max, returnKey,
    /// batchSize or tailable. Other finds by `_id` keep IDHACK.
    fn express(
        &self,
        chosen: &plan::Plan,
        coll: Option<&bisondb_storage::Collection>,
    ) -> MongoResult<bool> {
        if coll.is_none()
            || !matches!(chosen.access, plan::Access::IdLookup(_))
            || self.hint.is_some()
            || self.skip > 0
            || !self.min_max.is_empty()
            || self.return_key
            || self.batch_size.is_some()
            || self.tailable
            || !self.projection.as_ref().is_none_or(simple_projection)
        {
            return Ok(false);
        }
        let default = crate::collation::of_collection(coll)?;
        let query = crate::collation::effective(&self.collation, coll)?;
        Ok(bisondb_query::collation::same(
            query.as_deref(),
            default.as_deref(),
        ))
    }
}

/// mongod's simple projection: plain fields included or excluded, no
/// positional `$`, operators or computed values.
fn simple_projection(p: &Document) -> bool {
    p.iter().all(|(k, v)| {
        let plain = match v {
            Bson::Boolean(_) | Bson::Int32(0 | 1) | Bson::Int64(0 | 1) => true,
            Bson::Double(d) => *d == 0.0 || *d == 1.0,
            _ => false,
        };
        plain && !k.contains('$')
    })
}

/// A projection with `{$meta: "sortKey"}` or `{$meta: "indexKey"}`: each
/// document's sort key (the values the sort compared, always an array) and
/// the key of the secondary index the plan read, as mongod shows them.
/// Applies a find's projection (or `returnKey`) to each document and, with
/// `showRecordId`, appends the stored document's record id as mongod's
/// `showRecordId` does, after the projection so that no projection drops it.
/// A record-id collection shows the document's record id as a NumberLong,
/// as mongod shows an ordinary collection's. A collection clustered by `_id`
/// (mongod's clustered collections, and ordinary ones of a dbpath written
/// before record ids) has the `_id`'s key as its record id, which mongod
/// shows as BinData (`RecordId::serializeToken`).
fn project(
    src: DocSource,
    coll: Option<&bisondb_storage::Collection>,
    show_record_id: bool,
    f: impl Fn(&RawDocumentBuf) -> MongoResult<RawDocumentBuf> + Send + 'static,
) -> DocSource {
    let coll = coll.filter(|_| show_record_id).cloned();
    Box::new(src.map(move |d| {
        d.and_then(|d| {
            let mut out = f(&d)?;
            if show_record_id {
                let id = d
                    .get("_id")
                    .map_err(crate::request::invalid_bson)?
                    .ok_or_else(|| MongoError::internal("a stored document without _id"))?;
                let rid = match &coll {
                    Some(c) => c.record_id_of(id)?,
                    None => None,
                };
                let shown = match rid {
                    Some(rid) => bson::RawBson::Int64(i64::try_from(rid).unwrap_or(i64::MAX)),
                    None => bson::RawBson::Binary(bson::Binary {
                        subtype: bson::spec::BinarySubtype::Generic,
                        bytes: bisondb_storage::encode_id(id),
                    }),
                };
                out.append(bson::raw::cstr!("$recordId"), shown);
            }
            Ok(out)
        })
    }))
}

fn meta_projection(
    p: Projection,
    chosen: &plan::Plan,
    sort: Option<SortSpec>,
    src: DocSource,
) -> MongoResult<DocSource> {
    let sort = if p.needs_sort_key() {
        match sort {
            Some(s) if !s.is_empty() => Some(s),
            _ => {
                return Err(MongoError::bad_value(
                    "cannot use sortKey $meta projection without a sort",
                ))
            }
        }
    } else {
        None
    };
    let keys = if p.needs_index_key() {
        Some(plan::ReturnKey::new(chosen)?).filter(|k| k.from_secondary_index())
    } else {
        None
    };
    Ok(Box::new(src.map(move |d| {
        let d = d?;
        let meta = DocMeta {
            index_key: match &keys {
                Some(k) => Some(Bson::Document(
                    Document::try_from(k.key_of(&d)?.as_ref())
                        .map_err(crate::request::invalid_bson)?,
                )),
                None => None,
            },
            sort_key: sort.as_ref().map(|s| Bson::Array(s.sort_key(&d))),
        };
        p.apply_raw_with_meta(&d, &meta)
    })))
}

/// `{$natural: 1}` / `{$natural: -1}` as a sort: `Some(forward)`.
fn natural_sort(sort: &Document) -> Option<bool> {
    if sort.len() != 1 {
        return None;
    }
    let v = sort.get("$natural")?;
    let backward = match v {
        bson::Bson::Int32(i) => *i < 0,
        bson::Bson::Int64(i) => *i < 0,
        bson::Bson::Double(d) => *d < 0.0,
        _ => false,
    };
    Some(!backward)
}
