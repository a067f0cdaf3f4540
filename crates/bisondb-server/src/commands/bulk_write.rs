//! `bulkWrite` (MongoDB 8.0, admin database only): inserts, updates and deletes
//! over several namespaces in one command, as drivers' `Client::bulk_write` sends it.
//!
//! `{bulkWrite: 1, ops: [{insert: <nsInfo index>, document}, {update: i, filter,
//! updateMods, multi, upsert, arrayFilters, hint, collation, sort, constants},
//! {delete: i, filter, multi, hint, collation}], nsInfo: [{ns: "db.coll"}], ordered,
//! errorsOnly, bypassDocumentValidation, let, writeConcern}`; `ops` and `nsInfo` may
//! also arrive as OP_MSG document sequences.
//!
//! The shape of every op is checked before anything is written (a malformed op fails
//! the whole command, as mongod's IDL parse does); what an op does is decided by the
//! same per-statement code the `insert`, `update` and `delete` commands run, and its
//! failures are reported per op. The reply carries one result per op (only errors
//! with `errorsOnly: true`) in a cursor's first batch, plus the summary counters.

use std::borrow::Cow;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::cstr;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};

use super::{delete, update, Context};
use crate::fields;
use crate::fields::write::WriteConcern;
use crate::let_vars::LetVars;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;
use crate::validation::Validator;
use crate::write;

const CMD: &str = "bulkWrite";

/// The cursor namespace mongod names in the reply.
const REPLY_NS: &str = "admin.$cmd.bulkWrite";

/// mongod's `maxWriteBatchSize`.
const MAX_OPS: usize = 100_000;

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Insert,
    Update,
    Delete,
}

/// One entry of `ops`, shape-checked; `body` is the op as sent.
struct Op<'a> {
    kind: Kind,
    ns: usize,
    body: &'a RawDocument,
}

/// One entry of `nsInfo`.
struct Namespace {
    db: String,
    coll: String,
}

pub struct BulkWrite<'a> {
    ops: Vec<Op<'a>>,
    namespaces: Vec<Namespace>,
    ordered: bool,
    errors_only: bool,
    wc: WriteConcern,
    lets: LetVars,
    bypass_validation: bool,
    /// Each namespace's validator, parsed when the first op on it runs.
    validators: Vec<std::cell::OnceCell<Option<Validator>>>,
}

/// Fields each op kind accepts besides its kind field, and mongod's IDL struct name.
fn op_fields(kind: Kind) -> (&'static str, &'static [&'static str]) {
    match kind {
        Kind::Insert => ("BulkWriteInsertOp", &["document"]),
        Kind::Update => (
            "BulkWriteUpdateOp",
            &[
                "filter",
                "updateMods",
                "multi",
                "upsert",
                "upsertSupplied",
                "arrayFilters",
                "hint",
                "collation",
                "sort",
                "constants",
            ],
        ),
        Kind::Delete => (
            "BulkWriteDeleteOp",
            &["filter", "multi", "hint", "collation"],
        ),
    }
}

/// Checks one op's fields and types (not their meaning) and its namespace index.
fn parse_op<'a>(i: usize, d: &'a RawDocument, n_ns: usize) -> MongoResult<Op<'a>> {
    let mut found: Option<(Kind, RawBsonRef<'a>)> = None;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let kind = match k.as_str() {
            "insert" => Kind::Insert,
            "update" => Kind::Update,
            "delete" => Kind::Delete,
            _ => continue,
        };
        if found.is_some() {
            return Err(MongoError::failed_to_parse(format!(
                "BulkWrite ops entry {i} names more than one operation type"
            )));
        }
        found = Some((kind, v));
    }
    let Some((kind, idx)) = found else {
        return Err(MongoError::failed_to_parse(format!(
            "BulkWrite ops entry {i} has no operation type: it needs one of 'insert', 'update' or 'delete'"
        )));
    };
    let (idl, known) = op_fields(kind);
    let kind_field = match kind {
        Kind::Insert => "insert",
        Kind::Update => "update",
        Kind::Delete => "delete",
    };
    let ns = match idx {
        RawBsonRef::Int32(_) | RawBsonRef::Int64(_) | RawBsonRef::Double(_) => {
            fields::as_i64(idl, kind_field, idx)?
        }
        other => return Err(fields::wrong_type(idl, kind_field, other, "int")),
    };
    let ns = usize::try_from(ns)
        .ok()
        .filter(|&n| n < n_ns)
        .ok_or_else(|| {
            MongoError::bad_value(format!(
                "BulkWrite ops entry {i} has an invalid nsInfo index."
            ))
        })?;
    let mut has_filter = false;
    let mut has_mods = false;
    let mut has_document = false;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        let k = k.as_str();
        if k == kind_field {
            continue;
        }
        if !known.contains(&k) {
            return Err(fields::unknown_field(idl, k));
        }
        match k {
            "document" => {
                fields::as_doc(idl, k, v)?;
                has_document = true;
            }
            "filter" => {
                fields::as_doc(idl, k, v)?;
                has_filter = true;
            }
            "updateMods" => {
                if !matches!(v, RawBsonRef::Document(_) | RawBsonRef::Array(_)) {
                    return Err(fields::wrong_type(idl, k, v, "[object, array]"));
                }
                has_mods = true;
            }
            "multi" | "upsert" | "upsertSupplied" => {
                fields::as_bool(idl, k, v)?;
            }
            "arrayFilters" => {
                fields::as_array(idl, k, v)?;
            }
            "sort" | "constants" => {
                fields::as_doc(idl, k, v)?;
            }
            // `hint` and `collation` are checked by the statement parsers.
            _ => {}
        }
    }
    let missing = match kind {
        Kind::Insert => (!has_document).then_some("document"),
        Kind::Update if !has_filter => Some("filter"),
        Kind::Update => (!has_mods).then_some("updateMods"),
        Kind::Delete => (!has_filter).then_some("filter"),
    };
    if let Some(field) = missing {
        return Err(fields::missing_field(idl, field));
    }
    Ok(Op { kind, ns, body: d })
}

fn parse_namespace(d: &RawDocument) -> MongoResult<Namespace> {
    let idl = "NamespaceInfoEntry";
    let mut ns = None;
    for el in d.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "ns" => ns = Some(fields::as_str(idl, "ns", v)?),
            // Accepted and not checked: BisonDB has no collection UUIDs to compare,
            // no queryable encryption and no time-series collections.
            "collectionUUID" | "encryptionInformation" | "isTimeseriesNamespace" => {}
            other => return Err(fields::unknown_field(idl, other)),
        }
    }
    let ns = ns.ok_or_else(|| fields::missing_field(idl, "ns"))?;
    let invalid = || {
        MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid namespace specified '{ns}'"),
        )
    };
    let (db, coll) = ns.split_once('.').ok_or_else(invalid)?;
    crate::request::check_db_name(db)?;
    fields::check_collection_name(coll)?;
    Ok(Namespace {
        db: db.to_string(),
        coll: coll.to_string(),
    })
}

/// Rewrites a bulkWrite update op as an `update` command statement
/// (`filter` → `q`, `updateMods` → `u`, `constants` → `c`).
fn as_update_statement(op: &RawDocument) -> MongoResult<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    for el in op.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "update" | "upsertSupplied" => {}
            "filter" => out.append(cstr!("q"), v),
            "updateMods" => out.append(cstr!("u"), v),
            "constants" => out.append(cstr!("c"), v),
            _ => out.append(k, v),
        }
    }
    Ok(out)
}

/// Rewrites a bulkWrite delete op as a `delete` command statement
/// (`filter` → `q`, `multi` → `limit: 0` or `1`).
fn as_delete_statement(op: &RawDocument) -> MongoResult<RawDocumentBuf> {
    let mut out = RawDocumentBuf::new();
    let mut multi = false;
    for el in op.iter() {
        let (k, v) = el.map_err(crate::request::invalid_bson)?;
        match k.as_str() {
            "delete" => {}
            "filter" => out.append(cstr!("q"), v),
            "multi" => multi = fields::as_bool("BulkWriteDeleteOp", "multi", v)?,
            _ => out.append(k, v),
        }
    }
    out.append(cstr!("limit"), if multi { 0i32 } else { 1i32 });
    Ok(out)
}

/// What one op did, or why it failed.
enum Outcome {
    Inserted,
    Updated {
        matched: u64,
        modified: u64,
        upserted: Option<Bson>,
    },
    Deleted(u64),
    Failed(MongoError, Option<Document>),
}

impl Outcome {
    /// What a retryable write's earlier attempt recorded for this op.
    fn from_stmt(done: crate::txn::StmtOutcome) -> Outcome {
        use crate::txn::StmtOutcome;
        match done {
            StmtOutcome::Inserted => Outcome::Inserted,
            StmtOutcome::Updated {
                matched,
                modified,
                upserted,
            } => Outcome::Updated {
                matched,
                modified,
                upserted,
            },
            StmtOutcome::Deleted { n } => Outcome::Deleted(n),
            StmtOutcome::Reply(_) => Outcome::Failed(
                MongoError::internal("a bulkWrite op recorded as a findAndModify"),
                None,
            ),
        }
    }

    /// What a retry of this op must answer; `None` for a failure (a retry
    /// runs it again).
    fn to_stmt(&self) -> Option<crate::txn::StmtOutcome> {
        use crate::txn::StmtOutcome;
        match self {
            Outcome::Inserted => Some(StmtOutcome::Inserted),
            Outcome::Updated {
                matched,
                modified,
                upserted,
            } => Some(StmtOutcome::Updated {
                matched: *matched,
                modified: *modified,
                upserted: upserted.clone(),
            }),
            Outcome::Deleted(n) => Some(StmtOutcome::Deleted { n: *n }),
            Outcome::Failed(..) => None,
        }
    }
}

/// The running totals and per-op results of one command.
#[derive(Default)]
struct Tally {
    results: Vec<Bson>,
    errors: u64,
    inserted: u64,
    matched: u64,
    modified: u64,
    upserted: u64,
    deleted: u64,
    wc_error: Option<MongoError>,
}

impl Tally {
    /// Records op `idx`'s outcome; true when it failed.
    fn record(&mut self, idx: usize, outcome: Outcome, errors_only: bool) -> bool {
        let mut r = doc! {"ok": 1.0, "idx": reply::count(idx as u64)};
        match outcome {
            Outcome::Inserted => {
                self.inserted += 1;
                r.insert("n", 1i32);
            }
            Outcome::Updated {
                matched,
                modified,
                upserted,
            } => {
                self.matched += matched;
                self.modified += modified;
                let n = matched + u64::from(upserted.is_some());
                r.insert("n", reply::count(n));
                r.insert("nModified", reply::count(modified));
                if let Some(id) = upserted {
                    self.upserted += 1;
                    r.insert("upserted", doc! {"_id": id});
                }
            }
            Outcome::Deleted(n) => {
                self.deleted += n;
                r.insert("n", reply::count(n));
            }
            Outcome::Failed(e, details) => {
                self.errors += 1;
                let mut r = doc! {
                    "ok": 0.0,
                    "idx": reply::count(idx as u64),
                    "code": e.code.code(),
                    "codeName": e.code.name().into_owned(),
                    "errmsg": e.message.clone(),
                };
                r.extend(details.unwrap_or_else(|| reply::details(&e)));
                self.results.push(Bson::Document(r));
                return true;
            }
        }
        if !errors_only {
            self.results.push(Bson::Document(r));
        }
        false
    }
}

impl<'a> BulkWrite<'a> {
    pub fn parse(req: &CommandRequest<'a>) -> MongoResult<Self> {
        let mut ordered = true;
        let mut errors_only = false;
        let mut bypass_validation = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "ordered" => ordered = fields::as_bool(CMD, "ordered", v)?,
                "errorsOnly" => errors_only = fields::as_bool(CMD, "errorsOnly", v)?,
                "bypassDocumentValidation" => {
                    bypass_validation = fields::as_bool(CMD, "bypassDocumentValidation", v)?;
                }
                "cursor" => {
                    let c = fields::as_doc(CMD, "cursor", v)?;
                    for el in c.iter() {
                        let (k, v) = el.map_err(crate::request::invalid_bson)?;
                        match k.as_str() {
                            "batchSize" => {
                                fields::as_non_negative(CMD, "cursor.batchSize", v)?;
                            }
                            other => {
                                return Err(fields::unknown_field("BulkWriteCommandCursor", other))
                            }
                        }
                    }
                }
                // `let` is read by `LetVars::from_body`; `ops` and `nsInfo` below.
                CMD | "ops" | "nsInfo" | "let" => {}
                other => fields::check_known(CMD, other, &[])?,
            }
        }
        let lets = LetVars::from_body(CMD, req.body)?;
        let wc = crate::fields::write::write_concern(CMD, req.body)?;
        let raw_ns = req
            .documents("nsInfo")?
            .ok_or_else(|| fields::missing_field(CMD, "nsInfo"))?;
        let raw_ops = req
            .documents("ops")?
            .ok_or_else(|| fields::missing_field(CMD, "ops"))?;
        if raw_ops.is_empty() || raw_ops.len() > MAX_OPS {
            return Err(MongoError::new(
                ErrorCode::InvalidLength,
                format!(
                    "Write batch sizes must be between 1 and {MAX_OPS}. Got {} operations.",
                    raw_ops.len()
                ),
            ));
        }
        let namespaces = raw_ns
            .iter()
            .map(|d| parse_namespace(d))
            .collect::<MongoResult<Vec<_>>>()?;
        let ops = raw_ops
            .iter()
            .enumerate()
            .map(|(i, d)| parse_op(i, d, namespaces.len()))
            .collect::<MongoResult<Vec<_>>>()?;
        let validators = namespaces.iter().map(|_| Default::default()).collect();
        Ok(BulkWrite {
            ops,
            namespaces,
            ordered,
            errors_only,
            wc,
            lets,
            bypass_validation,
            validators,
        })
    }

    /// The validator of namespace `ns` (see [`Validator::for_collection`]).
    fn validator(&self, ctx: &Context<'_>, ns: usize) -> MongoResult<Option<&Validator>> {
        let (Some(cell), Some(name)) = (self.validators.get(ns), self.namespaces.get(ns)) else {
            return Ok(None);
        };
        if let Some(v) = cell.get() {
            return Ok(v.as_ref());
        }
        let coll = ctx.state.storage.collection(&name.db, &name.coll);
        let v = Validator::for_collection(coll.as_ref(), self.bypass_validation)?;
        Ok(cell.get_or_init(|| v).as_ref())
    }

    pub fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        // Time-series collections are written through their buckets
        // (`timeseries/`), which this command does not do yet: refuse rather
        // than store measurements where no read would find them.
        if let Some(ns) = self.namespaces.iter().find(|ns| {
            crate::namespaces::timeseries::options_of(&ctx.state.storage, &ns.db, &ns.coll)
                .is_some()
        }) {
            return Err(MongoError::new(
                bisondb_error::ErrorCode::NotImplemented,
                format!(
                    "bulkWrite on a time-series collection ({}.{}) is not supported by BisonDB yet (see docs/COMPATIBILITY.md)",
                    ns.db, ns.coll
                ),
            ));
        }
        let mut tally = Tally::default();
        let mut i = 0;
        while i < self.ops.len() {
            let Some(op) = self.ops.get(i) else { break };
            let stop = if op.kind == Kind::Insert {
                // Consecutive inserts into one namespace go to storage as one batch.
                let end = self
                    .ops
                    .get(i..)
                    .unwrap_or_default()
                    .iter()
                    .position(|o| o.kind != Kind::Insert || o.ns != op.ns)
                    .map_or(self.ops.len(), |p| i + p);
                let stop = self.run_inserts(ctx, i, end, &mut tally)?;
                i = end;
                stop
            } else {
                // A retryable write's retry answers an op that ran already
                // with what it did then.
                let retry = ctx.conn.txn.clone();
                let outcome = match retry.as_ref().and_then(|t| t.executed(i)) {
                    Some(done) => Outcome::from_stmt(done),
                    None => {
                        let outcome = crate::repl::oplog::with_stmt(i, || self.run_one(ctx, op));
                        if let (Some(t), Some(done)) = (&retry, outcome.to_stmt()) {
                            t.record(i, done);
                        }
                        outcome
                    }
                };
                let failed = tally.record(i, outcome, self.errors_only);
                i += 1;
                failed && self.ordered
            };
            if stop {
                break;
            }
        }
        let mut r = doc! {
            "cursor": {
                "id": 0i64,
                "firstBatch": tally.results,
                "ns": REPLY_NS,
            },
            "nErrors": reply::count(tally.errors),
            "nInserted": reply::count(tally.inserted),
            "nMatched": reply::count(tally.matched),
            "nModified": reply::count(tally.modified),
            "nUpserted": reply::count(tally.upserted),
            "nDeleted": reply::count(tally.deleted),
        };
        if let Some(e) = tally.wc_error {
            // The writes happened but the requested sync failed.
            r.insert(
                "writeConcernError",
                doc! {"code": e.code.code(), "codeName": e.code.name().into_owned(), "errmsg": e.message},
            );
        }
        reply::ok(r)
    }

    /// One update or delete op, through the `update`/`delete` commands' statement code.
    fn run_one(&self, ctx: &mut Context<'_>, op: &Op<'_>) -> Outcome {
        let Some(ns) = self.namespaces.get(op.ns) else {
            return Outcome::Failed(MongoError::internal("nsInfo index out of range"), None);
        };
        let durability = self.wc.durability;
        let result = match op.kind {
            Kind::Update => {
                OpCounters::add(&ctx.state.opcounters.update, 1);
                as_update_statement(op.body)
                    .and_then(|raw| update::parse_statement(CMD, &raw, &self.lets))
                    .and_then(|s| {
                        s.collate(ctx.state.storage.collection(&ns.db, &ns.coll).as_ref())
                    })
                    .and_then(|s| Ok((s, self.validator(ctx, op.ns)?)))
                    .and_then(|(s, validator)| {
                        write::update(
                            &ctx.state.storage,
                            &ns.db,
                            &ns.coll,
                            s.selection(),
                            &s.update,
                            s.multi,
                            s.upsert,
                            durability,
                            false,
                            validator,
                        )
                    })
                    .map(|r| Outcome::Updated {
                        matched: r.matched,
                        modified: r.modified,
                        upserted: r.upserted_id,
                    })
            }
            Kind::Delete => as_delete_statement(op.body)
                .and_then(|raw| delete::parse_statement(&raw, &self.lets))
                .and_then(|s| {
                    let coll = ctx.state.storage.collection(&ns.db, &ns.coll);
                    let s = s.collate(coll.as_ref())?;
                    write::delete(coll.as_ref(), s.selection(), s.multi, durability, false)
                })
                .map(|(n, _)| {
                    OpCounters::add(&ctx.state.opcounters.delete, n);
                    Outcome::Deleted(n)
                }),
            Kind::Insert => Err(MongoError::internal("insert op outside an insert batch")),
        };
        result.unwrap_or_else(|e| Outcome::Failed(e, None))
    }

    /// Inserts ops `start..end` (all inserts into one namespace) as one storage
    /// batch, as the `insert` command does; true when an ordered bulk must stop.
    fn run_inserts(
        &self,
        ctx: &mut Context<'_>,
        start: usize,
        end: usize,
        tally: &mut Tally,
    ) -> MongoResult<bool> {
        let ops = self.ops.get(start..end).unwrap_or_default();
        let Some(ns) = ops.first().and_then(|o| self.namespaces.get(o.ns)) else {
            return Ok(false);
        };
        let mut outcomes: Vec<(usize, Outcome)> = Vec::with_capacity(ops.len());
        if ns.coll.starts_with("system.") {
            for (j, _) in ops.iter().enumerate() {
                let e = MongoError::new(
                    ErrorCode::InvalidNamespace,
                    format!(
                        "Invalid namespace specified '{}.{}': cannot write to system collections",
                        ns.db, ns.coll
                    ),
                );
                outcomes.push((start + j, Outcome::Failed(e, None)));
                if self.ordered {
                    break;
                }
            }
            return Ok(self.finish_inserts(outcomes, tally));
        }
        let validator = ops
            .first()
            .map_or(Ok(None), |o| self.validator(ctx, o.ns))?;
        // Validation failures are per-op errors, like the insert command's writeErrors.
        let mut prepared: Vec<Cow<'_, RawDocument>> = Vec::with_capacity(ops.len());
        let mut positions: Vec<usize> = Vec::with_capacity(ops.len());
        let retry = ctx.conn.txn.clone();
        for (j, op) in ops.iter().enumerate() {
            if retry
                .as_ref()
                .is_some_and(|t| t.executed(start + j).is_some())
            {
                outcomes.push((start + j, Outcome::Inserted));
                continue;
            }
            let doc = match op
                .body
                .get("document")
                .map_err(crate::request::invalid_bson)
            {
                Ok(Some(RawBsonRef::Document(d))) => Ok(d),
                Ok(_) => Err(fields::missing_field("BulkWriteInsertOp", "document")),
                Err(e) => Err(e),
            };
            let checked = doc
                .and_then(crate::storable::prepare_for_insert)
                .and_then(|p| match validator {
                    Some(v) => v.check(&p, None).map(|()| p),
                    None => Ok(p),
                });
            match checked {
                Ok(p) => {
                    prepared.push(p);
                    positions.push(start + j);
                }
                Err(e) => {
                    outcomes.push((start + j, Outcome::Failed(e, None)));
                    if self.ordered {
                        break;
                    }
                }
            }
        }
        if !prepared.is_empty() {
            let coll = ctx
                .state
                .storage
                .get_or_create_collection(&ns.db, &ns.coll)
                .map_err(MongoError::from)?;
            let refs: Vec<&RawDocument> = prepared.iter().map(|c| c.as_ref()).collect();
            let outcome = crate::repl::oplog::with_insert_stmts(&refs, &positions, || {
                coll.insert_many(&refs, self.ordered, self.wc.durability)
            });
            if let Some(e) = outcome.durability_error {
                tally.wc_error.get_or_insert(MongoError::from(e));
            }
            let mut failed_at: Vec<usize> = Vec::with_capacity(outcome.errors.len());
            for (j, e) in outcome.errors {
                let details = crate::reply::storage_error_details(&e);
                failed_at.push(j);
                if let Some(&idx) = positions.get(j) {
                    outcomes.push((idx, Outcome::Failed(MongoError::from(e), details)));
                }
            }
            // Ordered storage stops at its first failure; later documents are not written.
            let first_failure = if self.ordered {
                failed_at.first().copied().unwrap_or(usize::MAX)
            } else {
                usize::MAX
            };
            let mut written = 0u64;
            for (j, &idx) in positions.iter().enumerate() {
                if j < first_failure && !failed_at.contains(&j) {
                    if let Some(t) = &retry {
                        t.record(idx, crate::txn::StmtOutcome::Inserted);
                    }
                    outcomes.push((idx, Outcome::Inserted));
                    written += 1;
                }
            }
            OpCounters::add(&ctx.state.opcounters.insert, written);
        }
        Ok(self.finish_inserts(outcomes, tally))
    }

    /// Records an insert batch's outcomes in op order; an ordered bulk keeps only
    /// what precedes its first failure. True when an ordered bulk must stop.
    fn finish_inserts(&self, mut outcomes: Vec<(usize, Outcome)>, tally: &mut Tally) -> bool {
        outcomes.sort_by_key(|(i, _)| *i);
        for (idx, outcome) in outcomes {
            if tally.record(idx, outcome, self.errors_only) && self.ordered {
                return true;
            }
        }
        false
    }
}

/// The registry's entry point. BulkWrite borrows the request's documents, so it is
/// wired by hand rather than through [`super::run`].
pub fn handle(req: &CommandRequest<'_>, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
    BulkWrite::parse(req)?.execute(ctx)
}
