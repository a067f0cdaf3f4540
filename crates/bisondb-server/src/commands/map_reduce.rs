//! `mapReduce`: JavaScript `map`, `reduce` and `finalize` over a collection,
//! as mongod 8 runs it (since 4.4 mongod translates the command into an
//! aggregation; the observable steps are these):
//!
//! 1. The input: the collection's documents matching `query`, in `sort`
//!    order, at most `limit` of them (through the planner, with the
//!    command's `collation`).
//! 2. `map` runs once per document with the document as `this`; each
//!    `emit(key, value)` adds `value` to `key`'s group (keys compare as
//!    `$group` compares them: 1 and 1.0 are one key, strings under the
//!    collation).
//! 3. `reduce(key, values)` runs once for every key, even a key with one
//!    value (mongod 8's default, `mrEnableSingleReduceOptimization: false`),
//!    the values last-emitted first as mongod's accumulator hands them over;
//!    values beyond 16 MiB are reduced in several calls whose results are
//!    reduced again. `finalize(key, value)` then runs on the result.
//! 4. The results `{_id: key, value}` (in key order here; mongod leaves the
//!    order unspecified) go back inline (`results`) or into a collection:
//!    `replace` as `$out` does, `merge` as `$merge` replacing documents with
//!    the same `_id`, `reduce` reducing a new value with the stored one
//!    (`reduce(key, [stored, new])`, then `finalize`) before it replaces it.
//!
//! `jsMode` and `verbose` change nothing (mongod ignores them; the reply has no
//! `counts` or `timing`); `out.nonAtomic` may only be true. The command is
//! deprecated in mongod, which logs a warning (id 5725801) now and then; so
//! does BisonDB. Scripts run in a context of their own
//! (`bisondb_js::mapreduce`), interrupted by `maxTimeMS` and `killOp` like any
//! other script.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use bisondb_error::{interrupt, ErrorCode, MongoError, MongoResult};
use bisondb_js::mapreduce::{approximate_size, MapReduce as Job};
use bisondb_query::agg::output::{OutputStage, WhenMatched, WhenNotMatched};
use bisondb_query::collation::Collation;
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bson::{doc, Bson, Document, RawBson, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::namespaces::Writer;
use crate::plan;
use crate::request::CommandRequest;

/// The name mongod's parser reports fields under (whichever alias was sent).
const CMD: &str = "mapReduce";

/// mongod's `BSONObjMaxUserSize`: one `reduce` call's values stay below it.
const MAX_REDUCE_BYTES: usize = 16 * 1024 * 1024;

/// Where the results go.
#[derive(Debug, Clone, PartialEq)]
pub enum Out {
    Inline,
    /// Into `db.coll` (`db` when `out.db` named one).
    Collection {
        mode: Mode,
        db: Option<String>,
        coll: String,
    },
}

/// How results meet an existing output collection.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Replace,
    Merge,
    Reduce,
}

pub struct MapReduce {
    db: String,
    coll: String,
    map: String,
    reduce: String,
    finalize: Option<String>,
    out: Out,
    query: Document,
    sort: Option<SortSpec>,
    limit: Option<usize>,
    scope: Option<RawDocumentBuf>,
    collation: crate::collation::Given,
    bypass_validation: bool,
    wc: fields::write::WriteConcern,
}

/// JavaScript given as a string or as code.
fn code(field: &str, v: RawBsonRef<'_>) -> MongoResult<String> {
    match v {
        RawBsonRef::String(s) | RawBsonRef::JavaScriptCode(s) => Ok(s.to_string()),
        _ => Err(MongoError::bad_value(format!(
            "'{field}' must be of string or code type"
        ))),
    }
}

/// `out`, as mongod's `MapReduceOutOptions::parseFromBSON` reads it.
pub fn parse_out(v: RawBsonRef<'_>) -> MongoResult<Out> {
    let obj = match v {
        RawBsonRef::String(s) => {
            return Ok(Out::Collection {
                mode: Mode::Replace,
                db: None,
                coll: s.to_string(),
            })
        }
        RawBsonRef::Document(d) => d,
        _ => {
            return Err(MongoError::bad_value(
                "'out' must be either a string or an object",
            ))
        }
    };
    let get = |k: &str| obj.get(k).map_err(crate::request::invalid_bson);
    let fields_given = obj.iter().count();
    if let Some(inline) = get("inline")? {
        if fields_given != 1 {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                "'inline' must be specified alone",
            ));
        }
        let one = match inline {
            RawBsonRef::Int32(i) => f64::from(i) == 1.0,
            RawBsonRef::Int64(i) => i == 1,
            RawBsonRef::Double(d) => d == 1.0,
            _ => false,
        };
        if !one {
            return Err(MongoError::bad_value("'inline' takes only numeric '1'"));
        }
        return Ok(Out::Inline);
    }
    let mut allowed = 4;
    if let Some(sharded) = get("sharded")? {
        match sharded {
            RawBsonRef::Boolean(true) => {}
            RawBsonRef::Boolean(false) => {
                return Err(MongoError::bad_value("sharded field value must be true"))
            }
            _ => return Err(MongoError::bad_value("sharded field value must be boolean")),
        }
        // Outputting to a sharded collection needs one that exists and is
        // sharded by _id (mongod's check after parsing); a standalone has none.
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "Cannot use mapReduce to create a new sharded collection. Please create and shard the target collection before proceeding.",
        ));
    }
    allowed -= 1;
    let name = |k: &str, v: RawBsonRef<'_>| match v {
        RawBsonRef::String(s) => Ok(s.to_string()),
        _ => Err(MongoError::bad_value(format!(
            "'{k}' supports only string consisting of output collection name"
        ))),
    };
    let (mode, coll) = if let Some(v) = get("replace")? {
        (Mode::Replace, name("replace", v)?)
    } else if let Some(v) = get("merge")? {
        (Mode::Merge, name("merge", v)?)
    } else if let Some(v) = get("reduce")? {
        (Mode::Reduce, name("reduce", v)?)
    } else {
        return Err(MongoError::bad_value(
            "'out' requires 'replace', 'merge' or 'reduce'",
        ));
    };
    let db = match get("db")? {
        Some(RawBsonRef::String(db)) => {
            if matches!(db, "admin" | "local" | "config") {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupported,
                    "cannot target internal database as output",
                ));
            }
            Some(db.to_string())
        }
        Some(_) => return Err(MongoError::bad_value("db field value must be string")),
        None => {
            allowed -= 1;
            None
        }
    };
    match get("nonAtomic")? {
        Some(RawBsonRef::Boolean(true)) => {}
        Some(RawBsonRef::Boolean(false)) => {
            return Err(MongoError::bad_value("nonAtomic field value must be true"))
        }
        Some(_) => {
            return Err(MongoError::bad_value(
                "nonAtomic field value must be boolean",
            ))
        }
        None => allowed -= 1,
    }
    if fields_given != allowed {
        return Err(MongoError::bad_value(
            "'out' supports only output type with collection name, optional 'sharded' and optional 'db'",
        ));
    }
    Ok(Out::Collection { mode, db, coll })
}

impl Out {
    /// The output namespace and who writes it, for a command run in `db`.
    fn target<'a>(&'a self, db: &'a str) -> Option<(Mode, &'a str, &'a str)> {
        match self {
            Out::Inline => None,
            Out::Collection { mode, db: to, coll } => {
                Some((*mode, to.as_deref().unwrap_or(db), coll))
            }
        }
    }
}

/// mongod's reasons for an output namespace it refuses
/// (`interpretTranslationError`): the codes of `$out`/`$merge`, the words of
/// mapReduce.
fn check_output(mode: Mode, db: &str, coll: &str) -> MongoResult<()> {
    let invalid = || {
        MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("Invalid output namespace {db}.{coll} for MapReduce"),
        )
    };
    crate::request::check_db_name(db).map_err(|_| invalid())?;
    fields::check_collection_name(coll).map_err(|_| invalid())?;
    let writer = match mode {
        Mode::Replace => Writer::Out,
        Mode::Merge | Mode::Reduce => Writer::Merge,
    };
    crate::namespaces::check_writable(db, coll, writer).map_err(|e| {
        let message = match e.code.code() {
            17385 | 31319 => format!("Can't output mapReduce results to special collection {coll}"),
            31320 | 31321 => format!("Can't output mapReduce results to internal DB {db}"),
            _ => return e,
        };
        MongoError::new(e.code, message)
    })
}

impl Command for MapReduce {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut coll = None;
        let (mut map, mut reduce, mut finalize, mut out) = (None, None, None, None);
        let mut query = Document::new();
        let (mut sort, mut limit, mut scope, mut collation) = (None, None, None, None);
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                k if k == req.name => coll = Some(fields::collection_name(CMD, v)?.to_string()),
                "map" => map = Some(code("map", v)?),
                "reduce" => reduce = Some(code("reduce", v)?),
                "finalize" => {
                    finalize = Some(match v {
                        RawBsonRef::Null => None,
                        v => Some(code("finalize", v)?),
                    })
                }
                "out" => out = Some(parse_out(v)?),
                "query" => query = fields::to_document(fields::as_doc(CMD, "query", v)?)?,
                "sort" => {
                    let s = fields::to_document(fields::as_doc(CMD, "sort", v)?)?;
                    if s.is_empty() {
                        return Err(MongoError::location(
                            15976,
                            "The mapReduce sort option must have at least one sort key",
                        ));
                    }
                    sort = Some(SortSpec::parse(&s)?);
                }
                "limit" => {
                    let n = fields::as_i64(CMD, "limit", v)?;
                    if n <= 0 {
                        return Err(MongoError::location(
                            15958,
                            "The limit specified to mapReduce must be positive",
                        ));
                    }
                    limit = Some(usize::try_from(n).unwrap_or(usize::MAX));
                }
                "scope" => match v {
                    RawBsonRef::Null => scope = None,
                    RawBsonRef::Document(d) => scope = Some(d.to_owned()),
                    _ => return Err(MongoError::bad_value("'scope' must be an object")),
                },
                "collation" => collation = crate::collation::parse_arg(CMD, v)?,
                "verbose" | "jsMode" | "bypassDocumentValidation" => {
                    fields::as_bool(CMD, k.as_str(), v)?;
                }
                other => fields::check_known(CMD, other, &[])?,
            }
        }
        let coll = coll.ok_or_else(|| fields::missing_field(CMD, CMD))?;
        let map = map.ok_or_else(|| fields::missing_field(CMD, "map"))?;
        let reduce = reduce.ok_or_else(|| fields::missing_field(CMD, "reduce"))?;
        let out = out.ok_or_else(|| fields::missing_field(CMD, "out"))?;
        if let Some((mode, db, coll)) = out.target(&req.db) {
            check_output(mode, db, coll)?;
        }
        // The filter fails now, before any script runs.
        Matcher::parse_doc(&query)?;
        Ok(MapReduce {
            db: req.db.clone(),
            coll,
            map,
            reduce,
            finalize: finalize.flatten(),
            out,
            query,
            sort,
            limit,
            scope,
            collation,
            bypass_validation: crate::validation::bypass(CMD, req.body)?,
            wc: fields::write::write_concern(CMD, req.body)?,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        deprecation_warning();
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        if let Some(c) = &coll {
            let options = c.options();
            if options.contains_key("viewOn") || options.contains_key("timeseries") {
                return Err(MongoError::new(
                    ErrorCode::CommandNotSupportedOnView,
                    "mapReduce on a view is not supported",
                ));
            }
        }
        let ns = format!("{}.{}", self.db, self.coll);
        self.run(ctx, coll.as_ref()).map_err(|e| MongoError {
            message: format!(
                "Executor error during MapReduce command on namespace: {ns} :: caused by :: {}",
                e.message
            ),
            ..e
        })
    }
}

impl MapReduce {
    fn run(
        &self,
        ctx: &mut Context<'_>,
        coll: Option<&bisondb_storage::Collection>,
    ) -> MongoResult<RawDocumentBuf> {
        let collation = crate::collation::effective(&self.collation, coll)?;
        let job = Job::new(
            &self.map,
            &self.reduce,
            self.finalize.as_deref(),
            self.scope.as_deref(),
        )
        // A kill or deadline that lands while the context is being set up
        // interrupts its scripts: report it as such, not as their failure.
        .map_err(|e| match interrupt::check_now() {
            Err(stopped) => stopped,
            Ok(()) => e,
        })?;
        let groups = self.map_phase(ctx, coll, collation.clone(), &job)?;
        let mut results = Vec::with_capacity(groups.len());
        for (_, group) in groups {
            interrupt::check()?;
            let value = reduce_all(&job, &group.key, group.values)?;
            let value = job.finalize(&group.key, value)?;
            results.push((group.key, value));
        }
        match self.out.target(&self.db) {
            None => {
                let results: Vec<Bson> = results
                    .into_iter()
                    .map(|(k, v)| Bson::Document(doc! {"_id": k, "value": v}))
                    .collect();
                let reply = crate::reply::ok(doc! {"results": results})?;
                check_reply_size(&reply)?;
                Ok(reply)
            }
            Some((mode, db, coll)) => {
                let docs = match mode {
                    Mode::Reduce => self.reduce_with_stored(ctx, &job, db, coll, results)?,
                    Mode::Replace | Mode::Merge => results
                        .into_iter()
                        .map(|(k, v)| doc! {"_id": k, "value": v})
                        .collect(),
                };
                let stage = match mode {
                    Mode::Replace => OutputStage::Out {
                        db: Some(db.to_string()),
                        coll: coll.to_string(),
                    },
                    Mode::Merge | Mode::Reduce => OutputStage::Merge {
                        db: Some(db.to_string()),
                        coll: coll.to_string(),
                        on: vec!["_id".to_string()],
                        when_matched: WhenMatched::Replace,
                        when_not_matched: WhenNotMatched::Insert,
                    },
                };
                crate::write::write_output(
                    &ctx.state.storage,
                    &self.db,
                    &stage,
                    docs.into_iter().map(Ok),
                    self.wc.durability,
                    self.bypass_validation,
                )?;
                let result = match &self.out {
                    Out::Collection { db: Some(db), .. } => {
                        Bson::Document(doc! {"db": db, "collection": coll})
                    }
                    _ => Bson::String(coll.to_string()),
                };
                crate::reply::ok(doc! {"result": result})
            }
        }
    }

    /// Runs `map` over the input, grouping what it emits by key.
    fn map_phase(
        &self,
        ctx: &mut Context<'_>,
        coll: Option<&bisondb_storage::Collection>,
        collation: Option<Arc<Collation>>,
        job: &Job,
    ) -> MongoResult<BTreeMap<Vec<u8>, Group>> {
        let matcher = Matcher::parse_doc(&self.query)?.with_collation(collation.clone());
        let sort = self
            .sort
            .clone()
            .map(|s| s.with_collation(collation.clone()));
        let chosen = plan::choose(coll, &matcher, Some(&self.query), sort.as_ref(), None)?;
        let stats = Arc::new(plan::Stats::default());
        ctx.conn.op.plan(&stats, &chosen);
        plan::note_index_use(coll, &chosen);
        let mut src = plan::execute(coll, &chosen, &matcher, stats.clone())?;
        if let Some(spec) = sort.as_ref().filter(|_| !chosen.provides_sort) {
            let cfg = &ctx.state.config;
            src = plan::sorted_source(
                src,
                spec,
                self.limit,
                cfg.allow_disk_use_by_default,
                cfg.sort_memory_bytes,
                stats,
            )?;
        }
        let src = src.take(self.limit.unwrap_or(usize::MAX));
        // What the groups hold, bounded as mongod bounds `$group` (which
        // spills past it where BisonDB stops).
        let memory_limit = ctx.state.config.group_memory_bytes;
        let mut held = 0usize;
        let mut groups: BTreeMap<Vec<u8>, Group> = BTreeMap::new();
        for d in src {
            let d = d?;
            for (key, value) in job.map(&d)? {
                let grouping = group_key(&key, collation.as_deref())?;
                held = held.saturating_add(approximate_size(&value));
                let group = groups.entry(grouping).or_insert_with(|| {
                    held = held.saturating_add(approximate_size(&key));
                    Group {
                        key,
                        values: Vec::new(),
                    }
                });
                group.values.push(value);
            }
            if held > memory_limit {
                return Err(MongoError::new(
                    ErrorCode::ExceededMemoryLimit,
                    format!(
                        "mapReduce's emitted values exceeded {memory_limit} bytes \
                         (internalDocumentSourceGroupMaxMemoryBytes); BisonDB keeps them in \
                         memory and does not spill them to disk"
                    ),
                ));
            }
        }
        Ok(groups)
    }

    /// `out: {reduce}`: each result reduced with the value already stored
    /// under its `_id` (`reduce(key, [stored, new])`, then `finalize`), as
    /// mongod's `$merge` pipeline does.
    fn reduce_with_stored(
        &self,
        ctx: &Context<'_>,
        job: &Job,
        db: &str,
        coll: &str,
        results: Vec<(Bson, Bson)>,
    ) -> MongoResult<Vec<Document>> {
        let target = ctx.state.storage.collection(db, coll);
        let mut docs = Vec::with_capacity(results.len());
        for (key, value) in results {
            interrupt::check()?;
            let stored = match &target {
                Some(t) => {
                    let id = RawBson::try_from(key.clone())
                        .map_err(|e| MongoError::internal(format!("mapReduce key: {e}")))?;
                    t.get(id.as_raw_bson_ref())
                        .map_err(MongoError::from)?
                        .map(|d| fields::to_document(&d))
                        .transpose()?
                }
                None => None,
            };
            let value = match stored {
                Some(stored) => {
                    let old = stored.get("value").cloned().unwrap_or(Bson::Null);
                    let reduced = job.reduce(&key, vec![old, value])?;
                    job.finalize(&key, reduced)?
                }
                None => value,
            };
            docs.push(doc! {"_id": key, "value": value});
        }
        Ok(docs)
    }
}

/// One key's emitted values, in emission order.
struct Group {
    key: Bson,
    values: Vec<Bson>,
}

/// The bytes keys are grouped (and ordered) by: BSON order, equal values alike
/// (1, 1.0 and NumberLong(1)), strings compared under the collation.
fn group_key(key: &Bson, collation: Option<&Collation>) -> MongoResult<Vec<u8>> {
    let compared = match collation {
        Some(c) => c.index_value(key),
        None => key.clone(),
    };
    let raw = RawBson::try_from(compared)
        .map_err(|e| MongoError::internal(format!("mapReduce key: {e}")))?;
    let mut out = Vec::new();
    bisondb_storage::encode_value(raw.as_raw_bson_ref(), &mut out);
    Ok(out)
}

/// Reduces `values` to one, as mongod's `$_internalJsReduce` does: the values
/// handed over last-emitted first, as many per call as fit in 16 MiB, each
/// call's result joining the values still left until one call took them all.
fn reduce_all(job: &Job, key: &Bson, mut values: Vec<Bson>) -> MongoResult<Bson> {
    let key_size = approximate_size(key);
    loop {
        let mut batch = Vec::new();
        let mut bytes = 0usize;
        while let Some(last) = values.last() {
            let size = approximate_size(last);
            if bytes + key_size + size > MAX_REDUCE_BYTES {
                if batch.len() <= 1 {
                    return Err(MongoError::location(31392, "Value too large to reduce"));
                }
                break;
            }
            bytes += size;
            batch.extend(values.pop());
        }
        let reduced = job.reduce(key, batch)?;
        if values.is_empty() {
            return Ok(reduced);
        }
        values.push(reduced);
    }
}

/// An inline reply is one document: past 16 MiB it fails as mongod's does.
fn check_reply_size(reply: &RawDocumentBuf) -> MongoResult<()> {
    let len = reply.as_bytes().len();
    if len > bisondb_wire::MAX_BSON_OBJECT_SIZE {
        return Err(MongoError::new(
            ErrorCode::BSONObjectTooLarge,
            format!(
                "mapReduce command failed :: caused by :: BSONObj size: {len} (0x{len:X}) is invalid. Size must be between 0 and 16793600(16MB)"
            ),
        ));
    }
    Ok(())
}

/// mongod logs that the command is deprecated for the first call and then
/// rarely (its `Rarely` sampler: one call in 128).
fn deprecation_warning() {
    static CALLS: AtomicU64 = AtomicU64::new(0);
    if CALLS.fetch_add(1, Ordering::Relaxed).is_multiple_of(128) {
        tracing::warn!(
            target: "COMMAND",
            id = 5725801u64,
            "The map reduce command is deprecated. For more information, see https://docs.mongodb.com/manual/core/map-reduce/"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn out(v: bson::RawDocumentBuf) -> MongoResult<Out> {
        parse_out(v.get("out").unwrap().unwrap())
    }

    #[test]
    fn out_options_as_mongod_parses_them() {
        assert_eq!(out(rawdoc! {"out": {"inline": 1}}).unwrap(), Out::Inline);
        assert_eq!(
            out(rawdoc! {"out": "c"}).unwrap(),
            Out::Collection {
                mode: Mode::Replace,
                db: None,
                coll: "c".into()
            }
        );
        assert_eq!(
            out(rawdoc! {"out": {"reduce": "c", "db": "other", "nonAtomic": true}}).unwrap(),
            Out::Collection {
                mode: Mode::Reduce,
                db: Some("other".into()),
                coll: "c".into()
            }
        );
        let code = |v| out(v).unwrap_err().code.code();
        assert_eq!(code(rawdoc! {"out": {"inline": 1, "db": "x"}}), 72);
        assert_eq!(code(rawdoc! {"out": {"inline": 2}}), 2);
        assert_eq!(code(rawdoc! {"out": {"merge": "c", "nonAtomic": false}}), 2);
        assert_eq!(code(rawdoc! {"out": {"merge": "c", "extra": 1}}), 2);
        assert_eq!(code(rawdoc! {"out": {"db": "x"}}), 2);
        assert_eq!(code(rawdoc! {"out": {"merge": 1}}), 2);
        assert_eq!(code(rawdoc! {"out": {"merge": "c", "db": "admin"}}), 115);
        assert_eq!(code(rawdoc! {"out": 1}), 2);
    }

    #[test]
    fn keys_group_as_group_does() {
        let one = group_key(&Bson::Int32(1), None).unwrap();
        assert_eq!(one, group_key(&Bson::Double(1.0), None).unwrap());
        assert_eq!(one, group_key(&Bson::Int64(1), None).unwrap());
        assert!(one < group_key(&Bson::String("a".into()), None).unwrap());
    }
}
