//! `$limit`: passes the first n documents, then stops pulling its input.

use super::integral_arg;
use crate::agg::{DocStream, RunCtx, Stage};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct LimitStage {
    n: u64,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let n = integral_arg(arg).ok_or_else(|| {
        MongoError::location(
            15957,
            format!("invalid argument to $limit stage: Expected a number in: $limit: {arg}"),
        )
    })?;
    if n <= 0 {
        return Err(MongoError::location(
            15958,
            format!("invalid argument to $limit stage: Expected a positive number in: $limit: {n}"),
        ));
    }
    Ok(vec![Box::new(LimitStage {
        n: n.unsigned_abs(),
    })])
}

struct Limit {
    inner: DocStream,
    left: u64,
}

impl Iterator for Limit {
    type Item = MongoResult<Document>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.left == 0 {
            return None;
        }
        let r = self.inner.next()?;
        if r.is_ok() {
            self.left -= 1;
        }
        Some(r)
    }
}

impl Stage for LimitStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        Box::new(Limit {
            inner: input,
            left: self.n,
        })
    }

    fn limit_value(&self) -> Option<u64> {
        Some(self.n)
    }
}
