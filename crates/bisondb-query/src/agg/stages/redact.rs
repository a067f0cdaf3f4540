//! `$redact`: evaluates its expression at every document level (with
//! `$$CURRENT` bound to that level) and keeps (`$$KEEP`), removes
//! (`$$PRUNE`) or descends into (`$$DESCEND`) it.

use crate::agg::{DocStream, RunCtx, Stage};
use crate::expr::{Expr, Vars};
use crate::value::render;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct RedactStage {
    expr: Expr,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    Ok(vec![Box::new(RedactStage {
        expr: Expr::parse(arg)?,
    })])
}

enum Decision {
    Keep,
    Prune,
    Descend,
}

impl RedactStage {
    fn decide(&self, level: &Document, root: &Document, vars: &Vars) -> MongoResult<Decision> {
        let scope = vars.child(vec![("CURRENT".to_string(), Bson::Document(level.clone()))]);
        match self.expr.eval(root, &scope)? {
            Some(Bson::String(s)) if s == "keep" => Ok(Decision::Keep),
            Some(Bson::String(s)) if s == "prune" => Ok(Decision::Prune),
            Some(Bson::String(s)) if s == "descend" => Ok(Decision::Descend),
            other => Err(MongoError::location(
                17053,
                format!(
                    "$redact's expression should not return anything aside from the variables $$KEEP, $$DESCEND, and $$PRUNE, but returned {}",
                    other.as_ref().map_or_else(|| "MISSING".to_string(), render)
                ),
            )),
        }
    }

    /// The redacted level, or `None` when it is pruned.
    fn redact(
        &self,
        level: Document,
        root: &Document,
        vars: &Vars,
    ) -> MongoResult<Option<Document>> {
        match self.decide(&level, root, vars)? {
            Decision::Keep => Ok(Some(level)),
            Decision::Prune => Ok(None),
            Decision::Descend => {
                let mut out = Document::new();
                for (k, v) in level {
                    if let Some(v) = self.redact_value(v, root, vars)? {
                        out.insert(k, v);
                    }
                }
                Ok(Some(out))
            }
        }
    }

    fn redact_value(&self, v: Bson, root: &Document, vars: &Vars) -> MongoResult<Option<Bson>> {
        Ok(match v {
            Bson::Document(d) => self.redact(d, root, vars)?.map(Bson::Document),
            Bson::Array(a) => {
                let mut out = Vec::with_capacity(a.len());
                for x in a {
                    if let Some(x) = self.redact_value(x, root, vars)? {
                        out.push(x);
                    }
                }
                Some(Bson::Array(out))
            }
            other => Some(other),
        })
    }
}

impl Stage for RedactStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        Box::new(input.filter_map(move |r| match r {
            Ok(d) => {
                let root = d.clone();
                self.redact(d, &root, &vars).transpose()
            }
            Err(e) => Some(Err(e)),
        }))
    }
}
