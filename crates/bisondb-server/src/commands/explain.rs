//! `explain`: the plan the query planner picks for a `find`, `count`,
//! `aggregate`, `distinct`, `update`, `delete` or `findAndModify`, and with
//! `executionStats` / `allPlansExecution` the statistics of running its read
//! part (writes are never applied). Only one plan is ever considered, so
//! `rejectedPlans` and `allPlansExecution` are empty. The planner builds the
//! sections (`plan/explain.rs`); this command finds the read part of the
//! command it explains.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::sort::SortSpec;
use bson::{doc, Document, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::plan::{self, Verbosity};
use crate::reply;
use crate::request::CommandRequest;

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
                    verbosity = Verbosity::parse(fields::as_str(n, "verbosity", v)?)?;
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
        let execute = self.verbosity.runs();
        let (planner, exec) = match req.name {
            "find" => super::find::Find::parse(&req)?.explain(ctx, execute)?,
            "count" => super::count::Count::parse(&req)?.explain(ctx, execute)?,
            "aggregate" | "distinct" | "update" | "delete" | "findAndModify" | "findandmodify" => {
                let target = Target::parse(&req)?;
                explain_filter(ctx, &self.db, &target, execute)?
            }
            // mongod explains mapReduce as the aggregation it translates it
            // into; BisonDB runs it without one.
            "mapReduce" | "mapreduce" => return Err(MongoError::new(
                ErrorCode::CommandNotSupported,
                "BisonDB does not support explain of 'mapReduce' yet (see docs/COMPATIBILITY.md)",
            )),
            other => {
                return Err(MongoError::new(
                    ErrorCode::CommandNotFound,
                    format!("Explain failed due to unknown command: {other}"),
                ))
            }
        };
        let mut out = self.verbosity.sections(planner, exec);
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
    plan::explain_read(
        coll.as_ref(),
        crate::namespaces::ns(db, &t.coll),
        &t.filter,
        t.sort.as_ref(),
        t.hint.as_ref(),
        execute,
    )
}
