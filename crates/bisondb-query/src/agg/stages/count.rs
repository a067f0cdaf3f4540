//! `$count`: one document `{<name>: <number of inputs>}` (none for no input).

use crate::agg::{DocStream, RunCtx, Stage};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct CountStage {
    field: String,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let Bson::String(field) = arg else {
        return Err(MongoError::location(
            40156,
            "the count field must be a non-empty string",
        ));
    };
    if field.is_empty() {
        return Err(MongoError::location(
            40157,
            "the count field must be a non-empty string",
        ));
    }
    if field.starts_with('$') {
        return Err(MongoError::location(
            40158,
            "the count field cannot be a $-prefixed path",
        ));
    }
    if field.contains('.') {
        return Err(MongoError::location(
            40160,
            "the count field cannot contain '.'",
        ));
    }
    Ok(vec![Box::new(CountStage {
        field: field.clone(),
    })])
}

impl Stage for CountStage {
    fn run(self: Box<Self>, input: DocStream, _cx: &RunCtx) -> DocStream {
        let field = self.field;
        let mut input = Some(input);
        Box::new(std::iter::from_fn(move || {
            let input = input.take()?;
            let mut n: i64 = 0;
            for r in input {
                if let Err(e) = r {
                    return Some(Err(e));
                }
                n += 1;
            }
            if n == 0 {
                return None;
            }
            let v = i32::try_from(n).map_or(Bson::Int64(n), Bson::Int32);
            let mut out = Document::new();
            out.insert(field.clone(), v);
            Some(Ok(out))
        }))
    }
}
