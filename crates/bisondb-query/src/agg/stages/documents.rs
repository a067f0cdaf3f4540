//! `$documents: <array expression>`: the pipeline's input is this array of
//! documents instead of a collection (collection-less `aggregate: 1`).

use crate::agg::{DocStream, RunCtx, Stage};
use crate::expr::Expr;
use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct DocumentsStage {
    expr: Expr,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    Ok(vec![Box::new(DocumentsStage {
        expr: Expr::parse(arg)?,
    })])
}

fn evaluate(e: &Expr, cx: &RunCtx) -> MongoResult<Vec<Document>> {
    let vars = cx.vars();
    match e.eval(&Document::new(), &vars)? {
        Some(Bson::Array(items)) => items
            .into_iter()
            .map(|x| match x {
                Bson::Document(d) => Ok(d),
                other => Err(MongoError::type_mismatch(format!(
                    "$documents expected an array of objects, but found an element of type {}",
                    type_name(&other)
                ))),
            })
            .collect(),
        other => Err(MongoError::location(
            5858203,
            format!(
                "an array is expected, found {}",
                other.as_ref().map_or("missing", type_name)
            ),
        )),
    }
}

impl Stage for DocumentsStage {
    fn run(self: Box<Self>, _input: DocStream, cx: &RunCtx) -> DocStream {
        match evaluate(&self.expr, cx) {
            Ok(docs) => Box::new(docs.into_iter().map(Ok)),
            Err(e) => Box::new(std::iter::once(Err(e))),
        }
    }
}
