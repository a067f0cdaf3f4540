//! The write paths shared by `update`, `delete` and `findAndModify`: pick the target
//! documents, then change each one with an atomic read-modify-write by `_id` that
//! re-checks the filter (a concurrent writer may have changed the document since the
//! snapshot that found it).

use bisondb_error::{interrupt, MongoError, MongoResult};
use bisondb_query::agg::output::{MergeAction, OutputStage};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bisondb_query::update::{upsert_seed, UpdateSpec};
use bisondb_storage::{Collection, Durability, Modify};
use bson::{Bson, Document, RawBson, RawDocument, RawDocumentBuf};

use crate::fields::write::WriteConcern;
use crate::let_vars::LetVars;
use crate::plan;
use crate::request::CommandRequest;
use crate::validation::Validator;

/// The body of an `update` or `delete` command: the target, the statements
/// (each parsed as it runs, so one bad statement is one write error),
/// `ordered`, the write concern and `let`.
pub struct Statements<'a> {
    pub db: String,
    pub coll: String,
    pub statements: Vec<&'a RawDocument>,
    pub ordered: bool,
    pub wc: WriteConcern,
    pub lets: LetVars,
}

impl<'a> Statements<'a> {
    /// Reads the batch (`list` names its statements, `also` the command's
    /// other fields) and `let`.
    pub fn parse(req: &CommandRequest<'a>, list: &str, also: &[&str]) -> MongoResult<Self> {
        let b = crate::fields::write::parse_write_batch(req, list, also)?;
        let lets = LetVars::from_body(req.name, req.body)?;
        Ok(Statements {
            db: req.db.clone(),
            coll: b.coll,
            statements: b.statements,
            ordered: b.ordered,
            wc: b.wc,
            lets,
        })
    }

    /// [`each_statement`] over these statements.
    pub fn each(
        &self,
        run: impl FnMut(usize, &'a RawDocument) -> MongoResult<()>,
    ) -> MongoResult<Vec<Bson>> {
        each_statement(&self.statements, self.ordered, run)
    }
}

/// Runs `run` on each statement of a write batch, in order, and returns the
/// write errors: a failing statement is one (with its index) and, in an
/// ordered batch, the last statement run. An error that
/// [fails the command](fails_the_command) ends the batch as the command's
/// own error instead.
pub fn each_statement<'a>(
    statements: &[&'a RawDocument],
    ordered: bool,
    mut run: impl FnMut(usize, &'a RawDocument) -> MongoResult<()>,
) -> MongoResult<Vec<Bson>> {
    let mut errors = Vec::new();
    for (i, raw) in statements.iter().enumerate() {
        if let Err(e) = run(i, raw) {
            if fails_the_command(&e) {
                return Err(e);
            }
            errors.push(Bson::Document(crate::reply::write_error(i, &e, None)));
            if ordered {
                break;
            }
        }
    }
    Ok(errors)
}

/// Whether a statement's error fails the whole write command rather than
/// being one write error: an error drivers retry a write on (a store that
/// cannot take writes now: a network store's lost connection, a read-only
/// standby, a store or server shutting down, `EngineError::Unavailable`).
/// mongod fails the whole batch on a shutdown or a step-down the same way,
/// and only a command error carries the `RetryableWriteError` label a driver
/// retries the write on (write errors are never retried).
pub fn fails_the_command(e: &MongoError) -> bool {
    crate::txn::retries_on(e.code.code())
}

/// What one update statement did.
#[derive(Debug, Default)]
pub struct UpdateResult {
    pub matched: u64,
    pub modified: u64,
    pub upserted_id: Option<Bson>,
    /// The document before and after the change (only the last one for multi).
    pub before: Option<Document>,
    pub after: Option<Document>,
    /// The plan that found the targets and what it examined (for the profiler).
    pub plan: Option<PlanRun>,
}

/// A plan that ran and the keys and documents it examined.
#[derive(Debug, Clone)]
pub struct PlanRun {
    pub stats: std::sync::Arc<plan::Stats>,
    pub plan: plan::Plan,
}

/// Which documents a write targets: the parsed filter, the filter document it
/// was parsed from (so a partial index can serve it), the order that picks the
/// target of a single-document write, and the client's `hint`.
#[derive(Clone, Copy)]
pub struct Selection<'a> {
    pub matcher: &'a Matcher,
    pub filter_doc: Option<&'a Document>,
    pub sort: Option<&'a SortSpec>,
    pub hint: Option<&'a plan::Hint>,
}

impl<'a> Selection<'a> {
    /// The documents matching `matcher`, in no particular order, planned freely.
    pub fn filter(matcher: &'a Matcher) -> Self {
        Selection {
            matcher,
            filter_doc: None,
            sort: None,
            hint: None,
        }
    }
}

/// The `_id` values of the documents an operation targets, in filter (or sort)
/// order. The scan is planned as `find` plans it (`plan::choose`): a hint that
/// names no index fails with 2 BadValue, `{$natural: ±1}` forces a collection scan.
pub fn target_ids(
    coll: Option<&Collection>,
    sel: Selection<'_>,
    multi: bool,
) -> MongoResult<Vec<RawBson>> {
    target_ids_planned(coll, sel, multi).map(|(ids, _)| ids)
}

/// [`target_ids`], and the plan that found them with what it examined.
pub fn target_ids_planned(
    coll: Option<&Collection>,
    sel: Selection<'_>,
    multi: bool,
) -> MongoResult<(Vec<RawBson>, PlanRun)> {
    let chosen = plan::choose(coll, sel.matcher, sel.filter_doc, sel.sort, sel.hint)?;
    plan::note_index_use(coll, &chosen);
    let stats = std::sync::Arc::new(plan::Stats::default());
    let src = plan::execute(coll, &chosen, sel.matcher, stats.clone())?;
    let docs: Box<dyn Iterator<Item = MongoResult<RawDocumentBuf>>> = match sel.sort {
        Some(s) if !chosen.provides_sort => Box::new(
            plan::sort(src, s, (!multi).then_some(1), true)?
                .into_iter()
                .map(Ok),
        ),
        _ => src,
    };
    let mut ids = Vec::new();
    for d in docs {
        let d = d?;
        let id = d
            .get("_id")
            .map_err(crate::request::invalid_bson)?
            .ok_or_else(|| MongoError::internal("stored document without _id"))?;
        ids.push(RawBson::from(id));
        if !multi {
            break;
        }
    }
    Ok((
        ids,
        PlanRun {
            stats,
            plan: chosen,
        },
    ))
}

fn to_doc(d: &RawDocument) -> MongoResult<Document> {
    Document::try_from(d)
        .map_err(|e| MongoError::internal(format!("stored document is not valid BSON: {e}")))
}

/// Applies one update statement (`q`, `u`, `multi`, `upsert`, `sort`, `hint`).
/// Each new version of a document, upserts included, must pass `validator`
/// (the collection's, parsed once by the command; `None` when it has none or
/// the command bypasses it).
#[allow(clippy::too_many_arguments)]
pub fn update(
    storage: &bisondb_storage::Storage,
    db: &str,
    coll_name: &str,
    sel: Selection<'_>,
    spec: &UpdateSpec,
    multi: bool,
    upsert: bool,
    durability: Durability,
    keep_images: bool,
    validator: Option<&Validator>,
) -> MongoResult<UpdateResult> {
    let matcher = sel.matcher;
    let mut res = UpdateResult::default();
    let coll = storage.collection(db, coll_name);
    let (ids, run) = target_ids_planned(coll.as_ref(), sel, multi)?;
    res.plan = Some(run);
    if let Some(coll) = &coll {
        update_each(
            coll,
            &ids,
            matcher,
            spec,
            durability,
            keep_images,
            validator,
            &mut res,
        )?;
    }
    if res.matched == 0 && upsert {
        let doc = upsert_document(matcher, spec)?;
        let raw = crate::storable::prepare_owned(&doc)?;
        if let Some(v) = validator {
            v.check(&raw, None)?;
        }
        let coll = storage
            .get_or_create_collection(db, coll_name)
            .map_err(MongoError::from)?;
        let outcome = coll.insert_many(&[&raw], true, durability);
        if let Some((_, e)) = outcome.errors.into_iter().next() {
            return Err(MongoError::from(e));
        }
        res.upserted_id = doc.get("_id").cloned();
        if keep_images {
            res.after = Some(doc);
        }
    }
    Ok(res)
}

/// Applies `spec` to each of `ids` that still matches `matcher`, one atomic
/// read-modify-write each, counting into `res`.
#[allow(clippy::too_many_arguments)]
fn update_each(
    coll: &Collection,
    ids: &[RawBson],
    matcher: &Matcher,
    spec: &UpdateSpec,
    durability: Durability,
    keep_images: bool,
    validator: Option<&Validator>,
    res: &mut UpdateResult,
) -> MongoResult<()> {
    // A replacement's oplog entry is the whole new document; update
    // operators' is their diff; a pipeline's the smaller of the two.
    let entry_kind = match spec {
        UpdateSpec::Replacement(_) => crate::repl::oplog::UpdateEntry::Whole,
        UpdateSpec::Operators(_) => crate::repl::oplog::UpdateEntry::Diff,
        UpdateSpec::Pipeline(_) => crate::repl::oplog::UpdateEntry::DiffOrWhole,
    };
    for id in ids {
        // Each document is a locked read-modify-write of its own: a
        // multi-update of many documents stops at its operation's deadline
        // or kill between two of them (the scan that found them checks too,
        // but these writes are the long part).
        interrupt::check()?;
        let modify = || {
            coll.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
                let Some(cur) = cur else {
                    return Ok(Modify::Keep);
                };
                if !matcher.matches(cur) {
                    return Ok(Modify::Keep);
                }
                res.matched += 1;
                let before = to_doc(cur)?;
                let mut after = before.clone();
                let changed = spec.apply_with_query(&mut after, false, Some(matcher))?;
                let action = if changed {
                    let raw = crate::storable::prepare_owned(&after)?;
                    if let Some(v) = validator {
                        v.check(&raw, Some(cur))?;
                    }
                    res.modified += 1;
                    Modify::Replace(raw)
                } else {
                    Modify::Keep
                };
                if keep_images {
                    res.before = Some(before);
                    res.after = Some(after);
                }
                Ok(action)
            })
        };
        crate::repl::oplog::with_update_entry(entry_kind, modify)?;
    }
    Ok(())
}

/// The document an upsert inserts: the replacement (with the filter's `_id`),
/// or the filter's equality fields with the update applied; `_id` first,
/// generated when missing. Shared with the time-series write path.
pub fn upsert_document(matcher: &Matcher, spec: &UpdateSpec) -> MongoResult<Document> {
    let d = match spec {
        UpdateSpec::Replacement(r) => {
            let mut d = Document::new();
            if !r.contains_key("_id") {
                if let Some(id) = matcher.id_equality() {
                    d.insert("_id", id);
                }
            }
            d.extend(r.clone());
            d
        }
        _ => {
            let mut d = upsert_seed(&matcher.equality_fields())?;
            spec.apply_with_query(&mut d, true, Some(matcher))?;
            d
        }
    };
    if d.contains_key("_id") {
        return Ok(d);
    }
    let mut with_id = Document::new();
    with_id.insert("_id", bson::oid::ObjectId::new());
    with_id.extend(d);
    Ok(with_id)
}

/// Deletes the documents `sel` selects (at most one unless `multi`); returns
/// the number deleted and, with `keep_image`, the last deleted document.
pub fn delete(
    coll: Option<&Collection>,
    sel: Selection<'_>,
    multi: bool,
    durability: Durability,
    keep_image: bool,
) -> MongoResult<(u64, Option<Document>)> {
    delete_planned(coll, sel, multi, durability, keep_image).map(|(n, image, _)| (n, image))
}

/// [`delete`], and the plan that found the targets (none when the collection
/// does not exist).
pub fn delete_planned(
    coll: Option<&Collection>,
    sel: Selection<'_>,
    multi: bool,
    durability: Durability,
    keep_image: bool,
) -> MongoResult<(u64, Option<Document>, Option<PlanRun>)> {
    let Some(c) = coll else {
        return Ok((0, None, None));
    };
    let (ids, run) = target_ids_planned(coll, sel, multi)?;
    let (n, image) = delete_each(c, &ids, sel.matcher, durability, keep_image)?;
    Ok((n, image, Some(run)))
}

/// Deletes each of `ids` that still matches `matcher`, one atomic
/// read-modify-write each; returns how many it deleted and, with
/// `keep_image`, the last one.
fn delete_each(
    c: &Collection,
    ids: &[RawBson],
    matcher: &Matcher,
    durability: Durability,
    keep_image: bool,
) -> MongoResult<(u64, Option<Document>)> {
    let mut n = 0u64;
    let mut image = None;
    for id in ids {
        // As in `update_each`: a multi-delete stops between two documents.
        interrupt::check()?;
        c.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
            let Some(cur) = cur else {
                return Ok(Modify::Keep);
            };
            if !matcher.matches(cur) {
                return Ok(Modify::Keep);
            }
            n += 1;
            if keep_image {
                image = Some(to_doc(cur)?);
            }
            Ok(Modify::Delete)
        })?;
    }
    Ok((n, image))
}

/// Documents `$out` writes per storage batch (bounded memory, few batches).
const OUT_BATCH: usize = 1000;

/// Who writes through `stage` (a pipeline run in database `db`), and into
/// which database and collection.
pub fn output_target<'s>(
    stage: &'s OutputStage,
    db: &'s str,
) -> (crate::namespaces::Writer, &'s str, &'s str) {
    use crate::namespaces::Writer;
    match stage {
        OutputStage::Out { db: to, coll } => (Writer::Out, to.as_deref().unwrap_or(db), coll),
        OutputStage::Merge { db: to, coll, .. } => {
            (Writer::Merge, to.as_deref().unwrap_or(db), coll)
        }
    }
}

/// Carries out a pipeline's trailing `$out` or `$merge` in database `db`.
///
/// `$out` fills a temporary collection and renames it over the target, so the
/// target is replaced only when every document was written (as mongod does).
/// `$merge` applies [`OutputStage::merge_one`] to each document against the
/// target document that has the same `on` fields.
///
/// Unless `bypass_validation`, documents must pass the target's validator;
/// `$out` keeps the target's options (its validator among them), as mongod does.
pub fn write_output(
    storage: &bisondb_storage::Storage,
    db: &str,
    stage: &OutputStage,
    docs: impl Iterator<Item = MongoResult<Document>>,
    durability: Durability,
    bypass_validation: bool,
) -> MongoResult<()> {
    // Checked again here, not only when the command was parsed, so that no
    // caller can write through a forbidden target; and a view can appear
    // between the parse and the run.
    let (writer, target_db, target) = output_target(stage, db);
    crate::namespaces::check_writable(target_db, target, writer)?;
    crate::namespaces::check_not_view(storage, target_db, target)?;
    match stage {
        OutputStage::Out {
            db: target_db,
            coll,
        } => {
            let target_db = target_db.as_deref().unwrap_or(db);
            let tmp = format!("tmp.agg_out.{:016x}", rand::random::<u64>());
            // The replacement keeps the target's options (validator,
            // collation...) and its indexes, built on the temporary
            // collection before it is filled: a document that breaks a
            // unique index fails the $out and the target stays as it was.
            let (options, indexes) = match storage.collection(target_db, coll) {
                Some(existing) if !existing.options().contains_key("viewOn") => {
                    (existing.options().as_ref().clone(), existing.indexes())
                }
                _ => (Document::new(), Vec::new()),
            };
            let tmp_coll = storage
                .create_collection(target_db, &tmp, options)
                .map_err(MongoError::from)?;
            let indexed = indexes
                .into_iter()
                .try_for_each(|ix| storage.create_index(target_db, &tmp, ix.spec).map(|_| ()));
            let filled = indexed
                .and_then(|()| Validator::for_collection(Some(&tmp_coll), bypass_validation))
                .and_then(|v| fill_out(&tmp_coll, docs, durability, v.as_ref()));
            let renamed = filled.and_then(|()| {
                storage
                    .rename_collection(target_db, &tmp, target_db, coll, true)
                    .map_err(MongoError::from)
            });
            if renamed.is_err() {
                // Best effort: the error the client needs is the write's, not the cleanup's.
                let _ = storage.drop_collection(target_db, &tmp);
            }
            Ok(renamed?)
        }
        OutputStage::Merge {
            db: target_db,
            coll,
            on,
            ..
        } => {
            let target_db = target_db.as_deref().unwrap_or(db);
            let on: Vec<String> = if on.is_empty() {
                vec!["_id".to_string()]
            } else {
                on.clone()
            };
            // `on` fields other than `_id` need a unique index on exactly
            // them (checked before the target is created): it finds each
            // document's match, and guarantees there is at most one.
            let hint = if on.len() == 1 && on.first().is_some_and(|f| f == "_id") {
                None
            } else {
                let existing = storage.collection(target_db, coll);
                merge_on_index(existing.as_ref(), &on)?.map(plan::Hint::Name)
            };
            let target = storage
                .get_or_create_collection(target_db, coll)
                .map_err(MongoError::from)?;
            let validator = Validator::for_collection(Some(&target), bypass_validation)?;
            for d in docs {
                merge_doc(
                    &target,
                    stage,
                    &on,
                    hint.as_ref(),
                    d?,
                    durability,
                    validator.as_ref(),
                )?;
            }
            Ok(())
        }
    }
}

fn fill_out(
    coll: &Collection,
    docs: impl Iterator<Item = MongoResult<Document>>,
    durability: Durability,
    validator: Option<&Validator>,
) -> MongoResult<()> {
    let mut batch: Vec<RawDocumentBuf> = Vec::new();
    let flush = |batch: &mut Vec<RawDocumentBuf>| -> MongoResult<()> {
        let refs: Vec<&RawDocument> = batch.iter().map(|d| d.as_ref()).collect();
        let outcome = coll.insert_many(&refs, true, durability);
        batch.clear();
        match outcome.errors.into_iter().next() {
            Some((_, e)) => Err(MongoError::from(e)),
            None => Ok(()),
        }
    };
    for d in docs {
        let raw = crate::storable::prepare_owned(&d?)?;
        if let Some(v) = validator {
            v.check(&raw, None)?;
        }
        batch.push(raw);
        if batch.len() >= OUT_BATCH {
            flush(&mut batch)?;
        }
    }
    if !batch.is_empty() {
        flush(&mut batch)?;
    }
    Ok(())
}

/// The name of the target's index that supports `$merge` on `on`: unique,
/// not partial, on exactly those fields (in any order and direction).
/// mongod's 51183 otherwise, a missing target included. `None` for a
/// hidden index: it still makes the fields unique, but the planner may not
/// be told to use it.
fn merge_on_index(target: Option<&Collection>, on: &[String]) -> MongoResult<Option<String>> {
    let wanted: std::collections::BTreeSet<&str> = on.iter().map(String::as_str).collect();
    target
        .into_iter()
        .flat_map(|c| c.indexes())
        .find(|ix| {
            let fields: std::collections::BTreeSet<&str> =
                ix.spec.key.keys().map(String::as_str).collect();
            ix.spec.unique
                && ix.spec.partial_filter.is_none()
                && ix.spec.key.len() == fields.len()
                && fields == wanted
        })
        .map(|ix| (!ix.spec.hidden).then_some(ix.spec.name))
        .ok_or_else(|| {
            MongoError::location(
                51183,
                "Cannot find index to verify that join fields will be unique",
            )
        })
}

/// The value of the `on` field `path` in `doc`, as mongod reads it: an
/// array anywhere along the path fails (51185), a path through a
/// non-document is missing.
fn merge_on_value<'d>(doc: &'d Document, path: &str) -> MongoResult<Option<&'d Bson>> {
    let mut cur: Option<&Bson> = None;
    let mut here = doc;
    let mut parts = path.split('.').peekable();
    while let Some(part) = parts.next() {
        cur = here.get(part);
        match cur {
            Some(Bson::Array(_)) => {
                return Err(MongoError::location(
                    51185,
                    format!("$merge write error: 'on' field '{path}' is an array"),
                ))
            }
            Some(Bson::Document(d)) => here = d,
            _ if parts.peek().is_some() => return Ok(None),
            _ => {}
        }
    }
    Ok(cur)
}

fn merge_doc(
    target: &Collection,
    stage: &OutputStage,
    on: &[String],
    hint: Option<&plan::Hint>,
    incoming: Document,
    durability: Durability,
    validator: Option<&Validator>,
) -> MongoResult<()> {
    let mut key = Document::new();
    let mut key_value = Document::new();
    for field in on {
        match merge_on_value(&incoming, field)? {
            Some(Bson::Null | Bson::Undefined) | None if field != "_id" => {
                return Err(MongoError::location(
                    51132,
                    format!("$merge write error: 'on' field '{field}' cannot be missing, null or undefined if supporting index is sparse"),
                ))
            }
            Some(v) => {
                key.insert(field.clone(), bson::doc! {"$eq": v.clone()});
                key_value.insert(field.clone(), v.clone());
            }
            // A document without `_id` matches nothing: it is inserted
            // with a new one.
            None => {}
        }
    }
    let existing = if key.is_empty() {
        None
    } else {
        let matcher = Matcher::parse_doc(&key)?;
        let sel = Selection {
            hint,
            ..Selection::filter(&matcher)
        };
        match target_ids(Some(target), sel, false)?.into_iter().next() {
            Some(id) => target
                .get(id.as_raw_bson_ref())
                .map_err(MongoError::from)?
                .map(|d| to_doc(&d))
                .transpose()?,
            None => None,
        }
    };
    let action = stage
        .merge_one(existing.as_ref(), incoming)
        .map_err(|error| {
            // mongod's reply names the matching document's `on` fields when
            // $merge may not touch it.
            if error.code != bisondb_error::ErrorCode::DuplicateKey || existing.is_none() {
                return error;
            }
            let pattern: Document = on.iter().map(|f| (f.clone(), Bson::Int32(1))).collect();
            let details = bson::doc! {"keyPattern": pattern, "keyValue": key_value.clone()};
            match crate::reply::to_raw(&details) {
                Ok(raw) => error.with_details(raw.into_bytes()),
                Err(_) => error,
            }
        })?;
    match action {
        MergeAction::Insert(doc) => {
            let raw = crate::storable::prepare_owned(&doc)?;
            if let Some(v) = validator {
                v.check(&raw, None)?;
            }
            let outcome = target.insert_many(&[&raw], true, durability);
            if let Some((_, e)) = outcome.errors.into_iter().next() {
                return Err(MongoError::from(e));
            }
        }
        MergeAction::Replace(doc) => {
            let raw = crate::storable::prepare_owned(&doc)?;
            let Some(id) = existing.as_ref().and_then(|e| e.get("_id")) else {
                return Err(MongoError::internal(
                    "$merge replaced a document without _id",
                ));
            };
            let id = RawBson::try_from(id.clone())
                .map_err(|_| MongoError::internal("$merge target _id is not encodable"))?;
            crate::repl::oplog::with_replacement(true, || {
                target.modify(id.as_raw_bson_ref(), durability, &mut |cur| {
                    if let Some(v) = validator {
                        v.check(&raw, cur)?;
                    }
                    Ok(Modify::Replace(raw.clone()))
                })
            })?;
        }
        MergeAction::Keep | MergeAction::Discard => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::{delete_each, merge_on_value, target_ids, update_each, Selection, UpdateResult};
    use bisondb_error::interrupt::{self, OpCtx};
    use bisondb_error::ErrorCode;
    use bisondb_query::matcher::Matcher;
    use bisondb_query::update::UpdateSpec;
    use bisondb_storage::{Collection, Durability, Storage};
    use bson::{doc, Bson, RawDocumentBuf};
    use std::sync::Arc;
    use std::time::Instant;

    const DOCS: i32 = 1000;

    /// A store holding a collection of `DOCS` documents `{_id: i, x: 0}`,
    /// and the `_id`s a multi-write of all of them targets.
    fn filled() -> (Storage, Collection, Vec<bson::RawBson>, Matcher) {
        let storage = Storage::open(Arc::new(bisondb_storage::MemoryEngine::new())).unwrap();
        let coll = storage.get_or_create_collection("t", "c").unwrap();
        let docs: Vec<RawDocumentBuf> = (0..DOCS)
            .map(|i| RawDocumentBuf::try_from(&doc! {"_id": i, "x": 0}).unwrap())
            .collect();
        let refs: Vec<&bson::RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        assert!(coll
            .insert_many(&refs, true, Durability::Buffered)
            .errors
            .is_empty());
        let matcher = Matcher::parse_doc(&doc! {}).unwrap();
        let ids = target_ids(Some(&coll), Selection::filter(&matcher), true).unwrap();
        assert_eq!(ids.len(), DOCS as usize);
        (storage, coll, ids, matcher)
    }

    /// Runs `f` as an operation whose deadline has passed.
    fn expired<R>(f: impl FnOnce() -> R) -> R {
        let _op = interrupt::enter(Arc::new(OpCtx::new(Some(Instant::now()))));
        f()
    }

    /// Documents whose `x` is `x`.
    fn with_x(coll: &Collection, x: i32) -> usize {
        coll.scan(false)
            .filter(|d| d.as_ref().unwrap().get_i32("x").ok() == Some(x))
            .count()
    }

    /// A multi-delete past its deadline stops within one check interval of
    /// its targets with 50, and what it deleted is gone from the count too.
    #[test]
    fn a_multi_delete_stops_at_its_deadline() {
        let (_storage, coll, ids, matcher) = filled();
        let e = expired(|| delete_each(&coll, &ids, &matcher, Durability::Buffered, false))
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::MaxTimeMSExpired);
        let left = coll.scan(false).count() as u64;
        assert!(
            left >= (DOCS as u64) - u64::from(interrupt::CLOCK_EVERY),
            "{left}"
        );
        assert_eq!(coll.count(), left);
        // Without a deadline the same targets all go.
        let (n, _) = delete_each(&coll, &ids, &matcher, Durability::Buffered, false).unwrap();
        assert_eq!(n, left);
        assert_eq!(coll.count(), 0);
    }

    /// A multi-update past its deadline stops within one check interval of
    /// its targets with 50; each document is either updated or untouched.
    #[test]
    fn a_multi_update_stops_at_its_deadline() {
        let (_storage, coll, ids, matcher) = filled();
        let spec = UpdateSpec::parse(&doc! {"$inc": {"x": 1}}).unwrap();
        let mut res = UpdateResult::default();
        let e = expired(|| {
            update_each(
                &coll,
                &ids,
                &matcher,
                &spec,
                Durability::Buffered,
                false,
                None,
                &mut res,
            )
        })
        .unwrap_err();
        assert_eq!(e.code, ErrorCode::MaxTimeMSExpired);
        assert!(res.modified < u64::from(interrupt::CLOCK_EVERY), "{res:?}");
        assert_eq!(with_x(&coll, 1) as u64, res.modified);
        assert_eq!(with_x(&coll, 0) as u64, (DOCS as u64) - res.modified);
        assert_eq!(coll.count(), DOCS as u64);
    }

    #[test]
    fn merge_on_values() {
        let d = doc! {"a": 1, "b": {"c": "x", "l": [1]}, "arr": [{"c": 1}], "s": "str"};
        let cases: &[(&str, Result<Option<Bson>, i32>)] = &[
            ("a", Ok(Some(Bson::Int32(1)))),
            ("b.c", Ok(Some(Bson::String("x".into())))),
            ("missing", Ok(None)),
            // A path through a scalar is missing.
            ("s.c", Ok(None)),
            // An array anywhere along the path fails.
            ("b.l", Err(51185)),
            ("arr.c", Err(51185)),
            ("arr", Err(51185)),
        ];
        for (path, want) in cases {
            let got = merge_on_value(&d, path)
                .map(|v| v.cloned())
                .map_err(|e| e.code.code());
            assert_eq!(&got, want, "{path}");
        }
    }
}
