//! `count`: documents matching a query. Without a query it reads the collection's
//! maintained count, O(1) like mongod.

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bson::{doc, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::args;
use crate::plan;
use crate::reply;
use crate::request::CommandRequest;
use crate::state::OpCounters;

pub struct Count {
    db: String,
    coll: String,
    query: Matcher,
    skip: u64,
    limit: Option<u64>,
}

impl Command for Count {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let n = req.name;
        let mut c = Count {
            db: req.db.clone(),
            coll: String::new(),
            query: Matcher::parse_doc(&Document::new())?,
            skip: 0,
            limit: None,
        };
        let mut have = false;
        for el in req.body.iter() {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            match k.as_str() {
                "count" => {
                    c.coll = args::collection_name(n, v)?.to_string();
                    have = true;
                }
                "query" => {
                    if let bson::RawBsonRef::Document(d) = v {
                        c.query = Matcher::parse(d)?;
                    } else if !matches!(v, bson::RawBsonRef::Null) {
                        return Err(args::wrong_type(n, "query", v, "object"));
                    }
                }
                "skip" => c.skip = args::as_non_negative(n, "skip", v)? as u64,
                // mongod treats a negative count limit like its absolute value.
                "limit" => {
                    let l = args::as_i64(n, "limit", v)?.unsigned_abs();
                    c.limit = (l > 0).then_some(l);
                }
                "hint" => super::find::check_hint(v)?,
                "collation" => super::find::check_collation(n, v)?,
                "fields" => {}
                other => args::check_known(n, other, &[])?,
            }
        }
        if !have {
            return Err(args::missing_field(n, "count"));
        }
        Ok(c)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        OpCounters::add(&ctx.state.opcounters.query, 1);
        let coll = ctx.state.storage.collection(&self.db, &self.coll);
        let total = match &coll {
            None => 0,
            Some(c) if self.query.is_empty() => c.count(),
            Some(_) => {
                let mut n = 0u64;
                for d in plan::matching(coll.as_ref(), &self.query)? {
                    d?;
                    n += 1;
                }
                n
            }
        };
        let mut n = total.saturating_sub(self.skip);
        if let Some(l) = self.limit {
            n = n.min(l);
        }
        reply::ok(doc! {"n": reply::count(n)})
    }
}
