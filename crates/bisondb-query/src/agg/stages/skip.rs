//! `$skip`: drops the first n documents.

use super::integral_arg;
use crate::agg::{DocStream, RunCtx, Stage};
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;

#[derive(Debug)]
pub(crate) struct SkipStage {
    n: u64,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let n = integral_arg(arg).ok_or_else(|| {
        MongoError::location(
            15972,
            format!("invalid argument to $skip stage: Expected an integer: $skip: {arg}"),
        )
    })?;
    let n = u64::try_from(n).map_err(|_| {
        MongoError::location(
            15956,
            format!(
                "invalid argument to $skip stage: Expected a non-negative number in: $skip: {n}"
            ),
        )
    })?;
    Ok(vec![Box::new(SkipStage { n })])
}

impl Stage for SkipStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        let mut left = self.n;
        Box::new(input.filter(move |r| {
            if r.is_ok() && left > 0 {
                left -= 1;
                false
            } else {
                true
            }
        }))
    }
}
