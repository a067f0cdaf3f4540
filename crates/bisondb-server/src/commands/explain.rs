//! `explain`: the plan the query planner picks for a `find`, `count`,
//! `aggregate`, `distinct`, `update`, `delete` or `findAndModify`, and with
//! `executionStats` / `allPlansExecution` the statistics of running its read
//! part (writes are never applied). Only one plan is ever considered, so
//! `rejectedPlans` and `allPlansExecution` are empty.

use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_query::sort::SortSpec;
use bson::{doc, Bson, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verbosity {
    QueryPlanner,
    ExecutionStats,
    AllPlansExecution,
}

pub struct Explain {
    db: String,
    inner: RawDocumentBuf,
    verbosity: Verbosity,
}

impl Explain {
    /// The explain of `command` at `queryPlanner` verbosity, which is what an
    /// `aggregate` with `explain: true` replies.
    pub(crate) fn query_planner(db: String, command: RawDocumentBuf) -> Explain {
        Explain {
            db,
            inner: command,
            verbosity: Verbosity::QueryPlanner,
        }
    }
}

impl Command for Explain {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut inner = None;
        let mut verbosity = Verbosity::AllPlansExecution;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "explain" => inner = Some(fields::as_doc(n, "explain", v)?.to_owned()),
                "verbosity" => {
                    verbosity = match fields::as_str(n, "verbosity", v)? {
                        "queryPlanner" => Verbosity::QueryPlanner,
                        "executionStats" => Verbosity::ExecutionStats,
                        "allPlansExecution" => Verbosity::AllPlansExecution,
                        other => {
                            return Err(MongoError::bad_value(format!(
                                "verbosity string must be one of {{'queryPlanner', 'executionStats', 'allPlansExecution'}}, got '{other}'"
                            )))
                        }
                    }
                }
                "comment" | "maxTimeMS" | "lsid" | "readConcern" | "$readPreference" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        let inner = inner.ok_or_else(|| fields::missing_field(n, "explain"))?;
        Ok(Explain {
            db: req.db.clone(),
            inner,
            verbosity,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let req = CommandRequest::from_body(&self.inner, &self.db)?;
        let execute = self.verbosity != Verbosity::QueryPlanner;
        let (planner, exec) = match req.name {
            "find" => super::find::Find::parse(&req)?.explain(ctx, execute)?,
            "count" => super::count::Count::parse(&req)?.explain(ctx, execute)?,
            "aggregate" | "distinct" | "update" | "delete" | "findAndModify" | "findandmodify" => {
                let target = Target::parse(&req)?;
                explain_filter(ctx, &self.db, &target, execute)?
            }
            other => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotFound,
                    format!("Explain failed due to unknown command: {other}"),
                ))
            }
        };
        let mut out = doc! {"explainVersion": "1", "queryPlanner": planner};
        if let Some(mut e) = exec {
            if self.verbosity == Verbosity::AllPlansExecution {
                e.insert("allPlansExecution", Vec::<Bson>::new());
            }
            out.insert("executionStats", e);
        }
        let mut command = fields::to_document(&self.inner)?;
        command.insert("$db", self.db.clone());
        out.insert("command", command);
        out.insert(
            "serverInfo",
            doc! {"host": "localhost", "port": ctx.state.bound_port.get().copied().unwrap_or(0) as i32},
        );
        reply::ok(out)
    }
}

/// The read part of a command other than find and count.
struct Target {
    coll: String,
    filter: Document,
    sort: Option<SortSpec>,
    hint: Option<plan::Hint>,
}

impl Target {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Target> {
        let n = req.name;
        let body = req.body;
        let coll = body
            .get(n)
            .map_err(crate::request::invalid_bson)?
            .ok_or_else(|| fields::missing_field(n, n))
            .and_then(|v| fields::collection_name(n, v))?
            .to_string();
        let get_doc = |d: &bson::RawDocument, f: &str| -> MongoResult<Option<Document>> {
            match d.get(f).map_err(crate::request::invalid_bson)? {
                Some(RawBsonRef::Document(x)) => Ok(Some(fields::to_document(x)?)),
                Some(RawBsonRef::Null) | None => Ok(None),
                Some(other) => Err(fields::wrong_type(n, f, other, "object")),
            }
        };
        let hint_of = |d: &bson::RawDocument| -> MongoResult<Option<plan::Hint>> {
            match d.get("hint").map_err(crate::request::invalid_bson)? {
                Some(v) => plan::Hint::parse(v),
                None => Ok(None),
            }
        };
        let first_statement = |field: &str| -> MongoResult<bson::RawDocumentBuf> {
            let arr = body
                .get_array(field)
                .map_err(|_| fields::missing_field(n, field))?;
            match arr.into_iter().next() {
                Some(Ok(RawBsonRef::Document(d))) => Ok(d.to_owned()),
                _ => Err(MongoError::bad_value(format!(
                    "explain of {n} needs one statement in '{field}'"
                ))),
            }
        };
        let (filter, sort, hint) = match n {
            "distinct" => (get_doc(body, "query")?, None, hint_of(body)?),
            "findAndModify" | "findandmodify" => (
                get_doc(body, "query")?,
                get_doc(body, "sort")?,
                hint_of(body)?,
            ),
            "update" => {
                let s = first_statement("updates")?;
                (get_doc(&s, "q")?, None, hint_of(&s)?)
            }
            "delete" => {
                let s = first_statement("deletes")?;
                (get_doc(&s, "q")?, None, hint_of(&s)?)
            }
            _ => {
                // aggregate: a leading $match (and a $sort right after it) run
                // through the planner; the rest of the pipeline runs on its output.
                let arr = body
                    .get_array("pipeline")
                    .map_err(|_| fields::missing_field(n, "pipeline"))?;
                let stages: Vec<Document> = arr
                    .into_iter()
                    .filter_map(|s| match s {
                        Ok(RawBsonRef::Document(d)) => fields::to_document(d).ok(),
                        _ => None,
                    })
                    .collect();
                let mut it = stages.iter().peekable();
                let mut filter = None;
                if let Some(Ok(m)) = it.peek().map(|s| s.get_document("$match")) {
                    filter = Some(m.clone());
                    it.next();
                }
                let sort = match it.peek().map(|s| s.get_document("$sort")) {
                    Some(Ok(s)) => Some(s.clone()),
                    _ => None,
                };
                (filter, sort, hint_of(body)?)
            }
        };
        Ok(Target {
            coll,
            filter: filter.unwrap_or_default(),
            sort: sort
                .filter(|s| !s.is_empty())
                .map(|s| SortSpec::parse(&s))
                .transpose()?,
            hint,
        })
    }
}

fn explain_filter(
    ctx: &mut Context<'_>,
    db: &str,
    t: &Target,
    execute: bool,
) -> MongoResult<(Document, Option<Document>)> {
    let coll = ctx.state.storage.collection(db, &t.coll);
    let m = Matcher::parse_doc(&t.filter)?;
    let started = std::time::Instant::now();
    let chosen = plan::choose(
        coll.as_ref(),
        &m,
        Some(&t.filter),
        t.sort.as_ref(),
        t.hint.as_ref(),
    )?;
    let mut tree = plan::describe(&chosen, &t.filter, false);
    if let (Some(s), false) = (&t.sort, chosen.provides_sort) {
        let mut pattern = Document::new();
        for (k, asc) in s.fields() {
            pattern.insert(k.clone(), if *asc { 1 } else { -1 });
        }
        tree = doc! {"stage": "SORT", "sortPattern": pattern, "memLimit": plan::SORT_MEMORY_LIMIT as i64, "type": "simple", "inputStage": tree};
    }
    let planner = doc! {
        "namespace": crate::namespaces::ns(db, &t.coll),
        "parsedQuery": parsed_query(&t.filter),
        "indexFilterSet": false,
        "winningPlan": tree.clone(),
        "rejectedPlans": [],
    };
    if !execute {
        return Ok((planner, None));
    }
    let stats = Arc::new(plan::Stats::default());
    let mut src = plan::execute(coll.as_ref(), &chosen, &m, stats.clone())?;
    if let (Some(s), false) = (&t.sort, chosen.provides_sort) {
        src = plan::sorted_source(src, s, None, true, plan::SORT_MEMORY_LIMIT, stats.clone())?;
    }
    for d in plan::counted(src, stats.clone(), |s| &s.out) {
        d?;
    }
    let returned = stats.out.n();
    let stages = plan::execution_stages(&tree, Some(&chosen), &stats);
    Ok((
        planner,
        Some(doc! {
            "executionSuccess": true,
            "nReturned": reply::count(returned),
            "executionTimeMillis": reply::count(started.elapsed().as_millis() as u64),
            "totalKeysExamined": reply::count(stats.keys()),
            "totalDocsExamined": reply::count(stats.docs()),
            "executionStages": stages,
        }),
    ))
}

/// The filter as mongod's explain shows its parsed form for the common
/// shapes: a field compared to a plain value is an `$eq` (a regular
/// expression value a `$regex`), operator documents stay as sent. (mongod
/// also gathers several conditions under `$and` in its canonical order;
/// BisonDB keeps them as one document.)
pub(crate) fn parsed_query(filter: &Document) -> Document {
    let mut out = Document::new();
    for (k, v) in filter {
        let shown = match v {
            _ if k.starts_with('$') => v.clone(),
            Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')) => v.clone(),
            Bson::RegularExpression(r) => {
                let mut d = doc! {"$regex": r.pattern.as_str()};
                if !r.options.is_empty() {
                    d.insert("$options", r.options.as_str());
                }
                Bson::Document(d)
            }
            _ => Bson::Document(doc! {"$eq": v.clone()}),
        };
        out.insert(k.clone(), shown);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::parsed_query;
    use bson::{doc, Regex};

    #[test]
    fn parsed_query_shows_equalities_as_eq() {
        assert_eq!(parsed_query(&doc! {"a": 3}), doc! {"a": {"$eq": 3}});
        assert_eq!(
            parsed_query(&doc! {"a": {"x": 1}}),
            doc! {"a": {"$eq": {"x": 1}}}
        );
        assert_eq!(
            parsed_query(&doc! {"a": {"$gt": 1}, "$or": [{"b": 1}]}),
            doc! {"a": {"$gt": 1}, "$or": [{"b": 1}]}
        );
        let re = Regex {
            pattern: "^x".to_string().try_into().expect("pattern"),
            options: "i".to_string().try_into().expect("options"),
        };
        assert_eq!(
            parsed_query(&doc! {"s": re}),
            doc! {"s": {"$regex": "^x", "$options": "i"}}
        );
    }
}
