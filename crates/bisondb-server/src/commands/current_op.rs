//! `currentOp`: the operations in flight, as `{inprog: [...]}`. As in mongod
//! it is the `$currentOp` stage (`stages/current_op.rs`; `$all` lists idle
//! connections too) followed by a match of the command's other fields,
//! which form a query filter over the operation documents. `$ownOps: true`
//! lists only the caller's operations, and then needs no `inprog`.

use bisondb_error::MongoResult;
use bisondb_query::matcher::Matcher;
use bson::{doc, Document, RawDocumentBuf};

use super::{Command, Context};
use crate::fields;
use crate::reply;
use crate::request::CommandRequest;
use crate::stages::current_op::Options;

pub struct CurrentOp {
    all: bool,
    /// `$ownOps`: only the caller's operations (under `--auth`).
    own_ops: bool,
    filter: Document,
}

impl Command for CurrentOp {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut all = false;
        let mut own_ops = false;
        let mut filter = Document::new();
        for el in req.body.iter().skip(1) {
            let (k, v) = el.map_err(crate::request::invalid_bson)?;
            let k = k.as_str();
            match k {
                "$all" => all = fields::as_bool("currentOp", k, v)?,
                "$ownOps" => own_ops = fields::as_bool("currentOp", k, v)?,
                k if fields::is_generic_arg(k) => {}
                k => {
                    filter.insert(k, fields::to_bson(v)?);
                }
            }
        }
        Ok(CurrentOp {
            all,
            own_ops,
            filter,
        })
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let matcher = Matcher::parse_doc(&self.filter)?;
        let options = Options {
            idle_connections: self.all,
            idle_cursors: false,
            all_users: !self.own_ops,
        };
        // Without authentication every operation is everyone's.
        let whose = if self.own_ops {
            crate::auth::own_ops(ctx)
        } else {
            crate::op_ctx::Whose::All
        };
        let inprog: Vec<Document> = options
            .report(ctx.state, &whose)
            .into_iter()
            .filter(|d| matcher.matches_doc(d))
            .collect();
        reply::ok(doc! {"inprog": inprog})
    }
}
