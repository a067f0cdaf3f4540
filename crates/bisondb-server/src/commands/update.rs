//! `update`: a list of update statements (`q`, `u`, `multi`, `upsert`, ...), applied in
//! order; `ordered` stops at the first failing statement.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_query::update::UpdateSpec;
use bson::{Document, RawBsonRef, RawDocument, RawDocumentBuf};

use super::Context;
use crate::fields;
use crate::let_vars::LetVars;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;
use crate::write;

pub struct Statement {
    pub filter: Matcher,
    /// `q` as sent (after `let` substitution): lets a partial index serve it.
    pub filter_doc: Document,
    pub update: UpdateSpec,
    pub multi: bool,
    pub upsert: bool,
    /// mongod 8's `sort` for single-document updates: which match to change.
    pub sort: Option<SortSpec>,
    /// The index the statement must use (`hint`).
    pub hint: Option<plan::Hint>,
    /// The statement's `collation`, if it gave one.
    pub collation: crate::collation::Given,
}

impl Statement {
    /// Applies the statement's collation, else the collection's default, to
    /// its filter and sort (update operators themselves stay binary).
    pub(crate) fn collate(
        mut self,
        coll: Option<&bisondb_storage::Collection>,
    ) -> MongoResult<Self> {
        if let Some(c) = crate::collation::effective(&self.collation, coll)? {
            self.filter = self.filter.with_collation(Some(c.clone()));
            self.sort = self.sort.map(|s| s.with_collation(Some(c)));
        }
        // `{$meta: "textScore"}` in the sort reads the filter's `$text`.
        self.sort = match self.sort {
            Some(s) => Some(s.with_text_score(self.filter.text_score_source())?),
            None => None,
        };
        Ok(self)
    }

    /// The documents this statement targets, as `write::update` takes them.
    pub fn selection(&self) -> write::Selection<'_> {
        write::Selection {
            matcher: &self.filter,
            filter_doc: Some(&self.filter_doc),
            sort: self.sort.as_ref(),
            hint: self.hint.as_ref(),
        }
    }
}

pub struct Update<'a> {
    pub(crate) batch: write::Statements<'a>,
    bypass_validation: bool,
}

/// Parses the `u` field: a document (replacement or operators) or a pipeline.
pub fn parse_update_spec(
    cmd: &str,
    field: &str,
    v: RawBsonRef<'_>,
    array_filters: &[Document],
    lets: &LetVars,
) -> MongoResult<UpdateSpec> {
    match v {
        RawBsonRef::Document(d) => {
            UpdateSpec::parse_with_array_filters(&fields::to_document(d)?, array_filters)
        }
        RawBsonRef::Array(a) => {
            let mut stages = Vec::new();
            for s in a {
                match s.map_err(crate::request::invalid_bson)? {
                    RawBsonRef::Document(d) => stages.push(fields::to_document(d)?),
                    other => return Err(fields::wrong_type(cmd, field, other, "object")),
                }
            }
            UpdateSpec::parse_pipeline(&lets.pipeline(&stages))
        }
        other => Err(fields::wrong_type(cmd, field, other, "[object, array]")),
    }
}

/// mongod names the stages of every pipeline-style update before it runs
/// any statement (the update command's authorization check lite-parses
/// them), so an unknown stage fails the whole command with 40324 rather
/// than one statement; a known stage an update may not use is the
/// statement's error ([`UpdateSpec::parse_pipeline`]).
fn check_pipeline_stage_names(statements: &[&RawDocument]) -> MongoResult<()> {
    for raw in statements {
        let Ok(Some(RawBsonRef::Array(stages))) = raw.get("u") else {
            continue;
        };
        for stage in stages {
            let Ok(RawBsonRef::Document(d)) = stage else {
                continue;
            };
            let mut keys = d.iter();
            if let (Some(Ok((name, _))), None) = (keys.next(), keys.next()) {
                if !bisondb_query::agg::is_stage_name(name.as_str()) {
                    return Err(MongoError::location(
                        40324,
                        format!("Unrecognized pipeline stage name: '{name}'"),
                    ));
                }
            }
        }
    }
    Ok(())
}

/// Replacement documents may not hold top-level `$` fields (operators belong elsewhere).
pub fn check_replacement(spec: &UpdateSpec) -> MongoResult<()> {
    if let UpdateSpec::Replacement(r) = spec {
        if let Some(k) = r.keys().find(|k| k.starts_with('$')) {
            return Err(MongoError::new(
                ErrorCode::DollarPrefixedFieldName,
                format!("The dollar ($) prefixed field '{k}' in '{k}' is not allowed in the context of an update's replacement document. Consider using an aggregation pipeline with $replaceWith."),
            ));
        }
    }
    Ok(())
}

/// Parses one `updates` entry (`q`, `u`, `multi`, `upsert`, ...); `bulkWrite` maps
/// its update ops onto this shape.
pub(crate) fn parse_statement(
    cmd: &str,
    d: &RawDocument,
    lets: &LetVars,
) -> MongoResult<Statement> {
    let mut q = None;
    let mut sort = None;
    let mut hint = None;
    let mut collation = None;
    let mut u = None;
    let mut multi = false;
    let mut upsert = false;
    let mut array_filters = Vec::new();
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "q" => {
                let f = lets.filter(&fields::to_document(fields::as_doc(cmd, "updates.q", v)?)?);
                q = Some((Matcher::parse_doc(&f)?, f));
            }
            "u" => u = Some(v),
            "multi" => multi = fields::as_bool(cmd, "updates.multi", v)?,
            "upsert" => upsert = fields::as_bool(cmd, "updates.upsert", v)?,
            "hint" => hint = plan::Hint::parse(v)?,
            "collation" => collation = crate::collation::parse_arg(cmd, v)?,
            "arrayFilters" => array_filters = parse_array_filters(cmd, v)?,
            "c" => {
                fields::as_doc(cmd, "updates.c", v)?;
            }
            "sort" => {
                let s = fields::to_document(fields::as_doc(cmd, "updates.sort", v)?)?;
                if !s.is_empty() {
                    sort = Some(SortSpec::parse(&s)?);
                }
            }
            other => return Err(fields::unknown_field("UpdateOpEntry", other)),
        }
    }
    let (filter, filter_doc) = q.ok_or_else(|| fields::missing_field("update.updates", "q"))?;
    let u = u.ok_or_else(|| fields::missing_field("update.updates", "u"))?;
    let update = parse_update_spec(cmd, "updates.u", u, &array_filters, lets)?;
    check_replacement(&update)?;
    if multi && sort.is_some() {
        return Err(MongoError::new(
            ErrorCode::FailedToParse,
            "The sort option is only supported for single-document updates (multi: false)",
        ));
    }
    if multi && update.is_replacement() {
        return Err(MongoError::failed_to_parse(
            "multi update is not supported for replacement-style update",
        ));
    }
    Ok(Statement {
        filter,
        filter_doc,
        update,
        multi,
        upsert,
        sort,
        hint,
        collation,
    })
}

/// Reads `arrayFilters`: a list of filter documents for `$[<identifier>]`.
pub fn parse_array_filters(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<Vec<Document>> {
    let mut out = Vec::new();
    for f in fields::as_array(cmd, "arrayFilters", v)? {
        match f.map_err(crate::request::invalid_bson)? {
            RawBsonRef::Document(d) => out.push(fields::to_document(d)?),
            other => return Err(fields::wrong_type(cmd, "arrayFilters", other, "object")),
        }
    }
    Ok(out)
}

impl<'a> Update<'a> {
    pub fn parse(req: &CommandRequest<'a>) -> MongoResult<Self> {
        // `let` is read with the batch.
        let batch = write::Statements::parse(req, "updates", &["bypassDocumentValidation", "let"])?;
        check_pipeline_stage_names(&batch.statements)?;
        Ok(Update {
            bypass_validation: crate::validation::bypass(req.name, req.body)?,
            batch,
        })
    }

    pub fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let mut tally = reply::UpdateTally::default();
        // Parsed once for all statements; `None` when there is nothing to check.
        let b = &self.batch;
        let coll = ctx.state.storage.collection(&b.db, &b.coll);
        let validator =
            crate::validation::Validator::for_collection(coll.as_ref(), self.bypass_validation)?;
        let retry = ctx.conn.txn.clone();
        let errors = b.each(|i, raw| {
            // A retryable write's retry answers a statement that ran already
            // with what it did then.
            if let Some(crate::txn::StmtOutcome::Updated {
                matched,
                modified,
                upserted,
            }) = retry.as_ref().and_then(|t| t.executed(i))
            {
                tally.add(i, matched, modified, upserted);
                return Ok(());
            }
            if let Some(t) = &retry {
                t.write_fault(&ctx.state.fail_points)?;
            }
            let outcome = parse_statement("update", raw, &b.lets)
                .and_then(|s| s.collate(coll.as_ref()))
                .and_then(|s| {
                    crate::repl::oplog::with_stmt(i, || {
                        write::update(
                            &ctx.state.storage,
                            &b.db,
                            &b.coll,
                            s.selection(),
                            &s.update,
                            s.multi,
                            s.upsert,
                            b.wc.durability,
                            false,
                            validator.as_ref(),
                        )
                    })
                });
            OpCounters::add(&ctx.state.opcounters.update, 1);
            match &outcome {
                Ok(r) => ctx.conn.op.write(
                    crate::profiler::WriteOutcome {
                        matched: r.matched,
                        modified: r.modified,
                        upserted: r.upserted_id.is_some(),
                        ..Default::default()
                    },
                    r.plan.as_ref(),
                ),
                Err(e) => ctx.conn.op.write_failed(e),
            }
            let r = outcome?;
            crate::metrics::note_update(ctx.state, r.modified, r.upserted_id.is_some());
            if let Some(t) = &retry {
                t.record(
                    i,
                    crate::txn::StmtOutcome::Updated {
                        matched: r.matched,
                        modified: r.modified,
                        upserted: r.upserted_id.clone(),
                    },
                );
            }
            tally.add(i, r.matched, r.modified, r.upserted_id);
            Ok(())
        })?;
        tally.reply(errors)
    }
}

pub fn handle(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    Update::parse(req)?.execute(ctx)
}
