//! `delete`: a list of delete statements (`q`, `limit` 0 = all or 1 = one).

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bson::{doc, Document, RawDocument, RawDocumentBuf};

use super::Context;
use crate::fields;
use crate::let_vars::LetVars;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;
use crate::write;

pub struct Delete<'a> {
    batch: write::Statements<'a>,
}

/// One parsed delete statement.
pub(crate) struct Statement {
    filter: Matcher,
    /// `q` as sent (after `let` substitution): lets a partial index serve it.
    filter_doc: Document,
    /// `limit: 0`: every matching document.
    pub(crate) multi: bool,
    hint: Option<plan::Hint>,
    collation: crate::collation::Given,
}

impl Statement {
    /// Applies the statement's collation, else the collection's default, to
    /// its filter.
    pub(crate) fn collate(
        mut self,
        coll: Option<&bisondb_storage::Collection>,
    ) -> MongoResult<Self> {
        if let Some(c) = crate::collation::effective(&self.collation, coll)? {
            self.filter = self.filter.with_collation(Some(c));
        }
        Ok(self)
    }

    /// The documents this statement targets, as `write::delete` takes them.
    pub(crate) fn selection(&self) -> write::Selection<'_> {
        write::Selection {
            matcher: &self.filter,
            filter_doc: Some(&self.filter_doc),
            sort: None,
            hint: self.hint.as_ref(),
        }
    }
}

/// Parses one `deletes` entry (`q`, `limit`, ...); `bulkWrite` maps its delete ops
/// onto this shape.
pub(crate) fn parse_statement(d: &RawDocument, lets: &LetVars) -> MongoResult<Statement> {
    let cmd = "delete";
    let mut q = None;
    let mut limit = None;
    let mut hint = None;
    let mut collation = None;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "q" => {
                let f = lets.filter(&fields::to_document(fields::as_doc(cmd, "deletes.q", v)?)?);
                q = Some((Matcher::parse_doc(&f)?, f));
            }
            "limit" => {
                let l = fields::as_i64(cmd, "deletes.limit", v)?;
                if l != 0 && l != 1 {
                    return Err(MongoError::failed_to_parse(format!(
                        "The limit field in delete objects must be 0 or 1. Got {l}"
                    )));
                }
                limit = Some(l);
            }
            "hint" => hint = plan::Hint::parse(v)?,
            "collation" => collation = crate::collation::parse_arg(cmd, v)?,
            other => return Err(fields::unknown_field("DeleteOpEntry", other)),
        }
    }
    let (filter, filter_doc) = q.ok_or_else(|| fields::missing_field("delete.deletes", "q"))?;
    let limit = limit.ok_or_else(|| fields::missing_field("delete.deletes", "limit"))?;
    Ok(Statement {
        filter,
        filter_doc,
        multi: limit == 0,
        hint,
        collation,
    })
}

impl<'a> Delete<'a> {
    pub fn parse(req: &CommandRequest<'a>) -> MongoResult<Self> {
        // `let` is read with the batch.
        let batch = write::Statements::parse(req, "deletes", &["let"])?;
        Ok(Delete { batch })
    }

    pub fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let b = &self.batch;
        let coll = ctx.state.storage.collection(&b.db, &b.coll);
        let mut n = 0u64;
        let retry = ctx.conn.txn.clone();
        let errors = b.each(|i, raw| {
            // A retryable write's retry answers a statement that ran already
            // with what it did then.
            if let Some(crate::txn::StmtOutcome::Deleted { n: k }) =
                retry.as_ref().and_then(|t| t.executed(i))
            {
                n += k;
                return Ok(());
            }
            if let Some(t) = &retry {
                t.write_fault(&ctx.state.fail_points)?;
            }
            let outcome = parse_statement(raw, &b.lets)
                .and_then(|s| s.collate(coll.as_ref()))
                .and_then(|s| {
                    crate::repl::oplog::with_stmt(i, || {
                        write::delete_planned(
                            coll.as_ref(),
                            s.selection(),
                            s.multi,
                            b.wc.durability,
                            false,
                        )
                    })
                });
            match &outcome {
                Ok((k, _, run)) => ctx.conn.op.write(
                    crate::profiler::WriteOutcome {
                        deleted: *k,
                        ..Default::default()
                    },
                    run.as_ref(),
                ),
                Err(e) => ctx.conn.op.write_failed(e),
            }
            let (k, _, _) = outcome?;
            if let Some(t) = &retry {
                t.record(i, crate::txn::StmtOutcome::Deleted { n: k });
            }
            n += k;
            OpCounters::add(&ctx.state.opcounters.delete, k);
            crate::metrics::add(&ctx.state.metrics.document.deleted, k);
            Ok(())
        })?;
        reply::write_reply(doc! {"n": reply::count(n)}, errors)
    }
}

pub fn handle(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    Delete::parse(req)?.execute(ctx)
}
