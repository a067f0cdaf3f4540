//! `$unset: "a"` or `["a", "b.c"]`: an exclusion projection.

use super::project::{AggProjection, ProjectStage};
use crate::agg::Stage;
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let paths: Vec<String> = match arg {
        Bson::String(s) => vec![s.clone()],
        Bson::Array(a) => {
            let mut out = Vec::with_capacity(a.len());
            for x in a {
                match x {
                    Bson::String(s) => out.push(s.clone()),
                    _ => {
                        return Err(MongoError::location(
                            31120,
                            "$unset specification must be a string or an array containing only string values",
                        ))
                    }
                }
            }
            if out.is_empty() {
                return Err(MongoError::location(
                    31119,
                    "$unset specification must be a string or an array with at least one field",
                ));
            }
            out
        }
        _ => {
            return Err(MongoError::location(
                31002,
                "$unset specification must be a string or an array",
            ))
        }
    };
    Ok(vec![Box::new(ProjectStage::new(AggProjection::exclusion(
        &paths,
    )?))])
}
