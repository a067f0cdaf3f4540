//! `$replaceRoot: {newRoot: <expr>}` and `$replaceWith: <expr>`.

use super::unknown_field;
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::expr::Expr;
use crate::value::{render, render_doc, type_name};
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;

#[derive(Debug)]
pub(crate) struct ReplaceRootStage {
    new_root: Expr,
}

pub(crate) fn parse_replace_root(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let d = spec_doc(arg, 40229, |v| {
        format!(
            "expected an object as specification for $replaceRoot stage, got {}",
            type_name(v)
        )
    })?;
    for k in d.keys() {
        if k != "newRoot" {
            return Err(unknown_field("$replaceRoot", k));
        }
    }
    let new_root = d.get("newRoot").ok_or_else(|| {
        MongoError::location(40231, "no newRoot specified for the $replaceRoot stage")
    })?;
    Ok(vec![Box::new(ReplaceRootStage {
        new_root: Expr::parse(new_root)?,
    })])
}

pub(crate) fn parse_replace_with(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    Ok(vec![Box::new(ReplaceRootStage {
        new_root: Expr::parse(arg)?,
    })])
}

impl Stage for ReplaceRootStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let vars = cx.vars();
        let e = self.new_root;
        super::map_docs(input, move |doc| match e.eval(&doc, &vars)? {
            Some(Bson::Document(d)) => Ok(d),
            other => {
                let (shown, ty) = match &other {
                    Some(v) => (render(v), type_name(v)),
                    None => ("MISSING".to_string(), "missing"),
                };
                Err(MongoError::location(
                    40228,
                    format!(
                        "'newRoot' expression must evaluate to an object, but resulting value was: {shown}. Type of resulting value: '{ty}'. Input document: {}",
                        render_doc(&doc)
                    ),
                ))
            }
        })
    }
}
