//! `insert`: validates each document, adds `_id` where missing, and hands the raw
//! bytes to storage in one batch. Documents are never parsed into owned values here.

use std::borrow::Cow;

use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, RawDocument, RawDocumentBuf};

use super::Context;
use crate::fields;
use crate::fields::write::WriteConcern;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct Insert<'a> {
    db: String,
    coll: String,
    docs: Vec<&'a RawDocument>,
    ordered: bool,
    wc: WriteConcern,
    bypass_validation: bool,
}

impl<'a> Insert<'a> {
    pub fn parse(req: &CommandRequest<'a>) -> MongoResult<Self> {
        if let Some(v) = req.body.get("let").map_err(crate::request::invalid_bson)? {
            fields::as_doc(req.name, "let", v)?;
        }
        let b = crate::fields::write::parse_write_batch(
            req,
            "documents",
            &["bypassDocumentValidation", "let"],
        )?;
        Ok(Insert {
            db: req.db.clone(),
            coll: b.coll,
            docs: b.statements,
            ordered: b.ordered,
            wc: b.wc,
            bypass_validation: crate::validation::bypass(req.name, req.body)?,
        })
    }

    pub fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let db = self.db.as_str();
        crate::namespaces::check_writable(db, &self.coll, crate::namespaces::Writer::Command)?;
        let coll = ctx
            .state
            .storage
            .get_or_create_collection(db, &self.coll)
            .map_err(MongoError::from)?;
        // Parsed once for the batch; `None` (no validator) costs nothing per document.
        let validator =
            crate::validation::Validator::for_collection(Some(&coll), self.bypass_validation)?;
        // Validation failures become writeErrors at their index, like mongod's.
        let mut prepared: Vec<Cow<'_, RawDocument>> = Vec::with_capacity(self.docs.len());
        let mut positions: Vec<usize> = Vec::with_capacity(self.docs.len());
        let mut errors: Vec<(usize, MongoError, Option<bson::Document>)> = Vec::new();
        // A retryable write's retry: statements that ran already count as
        // inserted and do not run again.
        let retry = ctx.conn.txn.clone();
        let mut already = 0usize;
        for (i, d) in self.docs.iter().enumerate() {
            if retry.as_ref().is_some_and(|t| t.executed(i).is_some()) {
                already += 1;
                continue;
            }
            let fault = match &retry {
                Some(t) => t.write_fault(&ctx.state.fail_points),
                None => Ok(()),
            };
            let checked = fault
                .and_then(|()| crate::storable::prepare_for_insert(d))
                .and_then(|p| match &validator {
                    Some(v) => v.check(&p, None).map(|()| p),
                    None => Ok(p),
                });
            match checked {
                Ok(p) => {
                    prepared.push(p);
                    positions.push(i);
                }
                Err(e) => {
                    errors.push((i, e, None));
                    if self.ordered {
                        break;
                    }
                }
            }
        }
        let refs: Vec<&RawDocument> = prepared.iter().map(|c| c.as_ref()).collect();
        if db == crate::repl::oplog::OPLOG_DB && self.coll == crate::repl::oplog::OPLOG_COLL {
            crate::repl::oplog::before_hand_made(ctx.state.repl(), &refs);
        }
        let outcome = if retry.is_some() {
            crate::repl::oplog::with_insert_stmts(&refs, &positions, || {
                coll.insert_many(&refs, self.ordered, self.wc.durability)
            })
        } else {
            coll.insert_many(&refs, self.ordered, self.wc.durability)
        };
        let mut inserted = outcome.inserted;
        let wc_error = outcome.durability_error.map(MongoError::from);
        if let Some(t) = &retry {
            // The documents storage accepted: all but the failed ones, and
            // in an ordered batch only those before the first failure.
            let stop = if self.ordered {
                outcome.errors.first().map_or(positions.len(), |(j, _)| *j)
            } else {
                positions.len()
            };
            for (j, &i) in positions.iter().enumerate().take(stop) {
                if !outcome.errors.iter().any(|(k, _)| *k == j) {
                    t.record(i, crate::txn::StmtOutcome::Inserted);
                }
            }
        }
        for (j, e) in outcome.errors {
            let idx = positions.get(j).copied().unwrap_or(j);
            let details = crate::reply::storage_error_details(&e);
            let e = MongoError::from(e);
            if crate::write::fails_the_command(&e) {
                return Err(e);
            }
            errors.push((idx, e, details));
        }
        if self.ordered {
            // Storage stopped at its first failure; a validation failure earlier still wins.
            errors.sort_by_key(|(i, _, _)| *i);
            if let Some((first, _, _)) = errors.first() {
                let first = *first;
                errors.truncate(1);
                inserted = inserted.min(first);
            }
        } else {
            errors.sort_by_key(|(i, _, _)| *i);
        }
        OpCounters::add(&ctx.state.opcounters.insert, inserted as u64);
        crate::metrics::add(&ctx.state.metrics.document.inserted, inserted as u64);
        let inserted = inserted + already;
        let mut r = doc! {"n": reply::count(inserted as u64)};
        if !errors.is_empty() {
            let list: Vec<Bson> = errors
                .into_iter()
                .map(|(i, e, extra)| Bson::Document(reply::write_error(i, &e, extra)))
                .collect();
            r.insert("writeErrors", list);
        }
        if let Some(e) = wc_error {
            // The documents are written but the requested sync failed.
            r.insert(
                "writeConcernError",
                doc! {"code": e.code.code(), "codeName": e.code.name().into_owned(), "errmsg": e.message},
            );
        }
        reply::ok(r)
    }
}

/// The registry's entry point. Insert borrows the request's documents, so it is
/// wired by hand rather than through [`super::run`].
pub fn handle(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    Insert::parse(req)?.execute(ctx)
}
