//! `count`: documents matching a query. Without a query it reads the collection's
//! maintained count, O(1) like mongod; when an index's bounds express the whole
//! query exactly it counts index keys without fetching documents (mongod's
//! COUNT_SCAN).

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bson::{doc, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct Count {
    db: String,
    coll: String,
    query: Matcher,
    query_doc: Document,
    hint: Option<plan::Hint>,
    skip: u64,
    limit: Option<u64>,
    collation: crate::collation::Given,
}

impl Command for Count {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = Count {
            db: req.db.clone(),
            coll: String::new(),
            query: Matcher::parse_doc(&Document::new())?,
            query_doc: Document::new(),
            hint: None,
            skip: 0,
            limit: None,
            collation: None,
        };
        let mut have = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "count" => {
                    c.coll = fields::collection_name(n, v)?.to_string();
                    have = true;
                }
                "query" => {
                    if let bson::RawBsonRef::Document(d) = v {
                        c.query = Matcher::parse(d)?;
                        c.query_doc = fields::to_document(d)?;
                    } else if !matches!(v, bson::RawBsonRef::Null) {
                        return Err(fields::wrong_type(n, "query", v, "object"));
                    }
                }
                "skip" => c.skip = fields::as_non_negative(n, "skip", v)? as u64,
                // mongod treats a negative count limit like its absolute value.
                "limit" => {
                    let l = fields::as_i64(n, "limit", v)?.unsigned_abs();
                    c.limit = (l > 0).then_some(l);
                }
                "hint" => c.hint = plan::Hint::parse(v)?,
                "collation" => c.collation = crate::collation::parse_arg(n, v)?,
                "fields" => {}
                other => fields::check_known(n, other, &[])?,
            }
        }
        if !have {
            return Err(fields::missing_field(n, "count"));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        OpCounters::add(&ctx.state.opcounters.query, 1);
        let stats = std::sync::Arc::new(plan::Stats::default());
        let (total, chosen, keys_only) = self.run(ctx, stats.clone())?;
        if let Some(chosen) = &chosen {
            ctx.conn.op.ran(&stats, chosen, keys_only);
        }
        let mut n = total.saturating_sub(self.skip);
        if let Some(l) = self.limit {
            n = n.min(l);
        }
        reply::ok(doc! {"n": reply::count(n)})
    }
}

impl Count {
    /// The number of matching documents (before skip and limit), the plan,
    /// and whether it counted index keys only.
    fn run(
        &self,
        ctx: &mut Context<'_>,
        stats: std::sync::Arc<plan::Stats>,
    ) -> MongoResult<(u64, Option<plan::Plan>, bool)> {
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        let Some(c) = &coll else {
            return Ok((0, None, false));
        };
        if self.query.is_empty() && self.hint.is_none() {
            return Ok((c.count(), None, false));
        }
        let query_c;
        let query = match crate::collation::effective(&self.collation, coll.as_ref())? {
            None => &self.query,
            Some(col) => {
                query_c = self.query.clone().with_collation(Some(col));
                &query_c
            }
        };
        let chosen = plan::choose(
            coll.as_ref(),
            query,
            Some(&self.query_doc),
            None,
            self.hint.as_ref(),
        )?;
        plan::note_index_use(coll.as_ref(), &chosen);
        if chosen.count_exact && matches!(chosen.access, plan::Access::Ixscan { .. }) {
            let n = plan::count_keys(c, &chosen, &stats)?;
            return Ok((n, Some(chosen), true));
        }
        let mut n = 0u64;
        for d in plan::execute(coll.as_ref(), &chosen, query, stats)? {
            d?;
            n += 1;
        }
        Ok((n, Some(chosen), false))
    }

    /// `explain` of this count.
    pub fn explain(
        self,
        ctx: &mut Context<'_>,
        execute: bool,
    ) -> MongoResult<(Document, Option<Document>)> {
        let stats = std::sync::Arc::new(plan::Stats::default());
        let started = std::time::Instant::now();
        let (total, chosen, keys_only) = self.run(ctx, stats.clone())?;
        let tree = match &chosen {
            Some(p) => plan::StageTree::of_plan(p, &self.query_doc, keys_only),
            None => plan::StageTree::fast_count(),
        }
        .count();
        let ns = crate::namespaces::ns(&self.db, &self.coll);
        let planner = plan::query_planner(ns, &self.query_doc, &tree);
        if !execute {
            return Ok((planner, None));
        }
        let mut n = total.saturating_sub(self.skip);
        if let Some(l) = self.limit {
            n = n.min(l);
        }
        let mut stages = tree.execution_stages(&stats);
        stages.insert("nCounted", reply::count(n));
        stages.insert("nSkipped", reply::count(total.min(self.skip)));
        let exec = plan::execution_stats(&stats, started, stages);
        Ok((planner, Some(exec)))
    }
}
