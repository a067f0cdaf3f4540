//! `$sortByCount: <expr>`: `$group {_id: <expr>, count: {$sum: 1}}` then
//! `$sort {count: -1}`.

use super::group::GroupStage;
use super::sort::SortStage;
use crate::agg::accumulators::{AccOp, Accumulator};
use crate::agg::Stage;
use crate::expr::Expr;
use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson};

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let ok = match arg {
        Bson::String(s) => s.starts_with('$'),
        Bson::Document(d) => d.len() == 1 && d.keys().next().is_some_and(|k| k.starts_with('$')),
        _ => false,
    };
    if !ok {
        return Err(MongoError::location(
            40147,
            "the sortByCount field must be defined as a $-prefixed path or an expression",
        ));
    }
    let id = Expr::parse(arg)?;
    let count = Accumulator::new(AccOp::Sum, Expr::Literal(Bson::Int32(1)));
    Ok(vec![
        Box::new(GroupStage::new(id, vec![("count".to_string(), count)])),
        Box::new(SortStage::new(&doc! {"count": -1})?),
    ])
}
