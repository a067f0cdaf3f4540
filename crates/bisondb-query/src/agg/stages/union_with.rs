//! `$unionWith`: after the input, the documents of another collection
//! (optionally through a sub-pipeline).

use super::{missing_field, unknown_field};
use crate::agg::{DocStream, Pipeline, RunCtx, Stage};
use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

#[derive(Debug)]
pub(crate) struct UnionWithStage {
    coll: String,
    pipeline: Vec<Document>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let (coll, pipeline) = match arg {
        Bson::String(s) => (s.clone(), Vec::new()),
        Bson::Document(d) => {
            let mut coll = None;
            let mut pipeline = Vec::new();
            for (k, v) in d {
                match (k.as_str(), v) {
                    ("coll", Bson::String(s)) => coll = Some(s.clone()),
                    ("pipeline", Bson::Array(a)) => {
                        for st in a {
                            match st {
                                Bson::Document(sd) => pipeline.push(sd.clone()),
                                _ => {
                                    return Err(MongoError::failed_to_parse(
                                        "$unionWith 'pipeline' must be an array of stages",
                                    ))
                                }
                            }
                        }
                    }
                    ("coll" | "pipeline", other) => {
                        return Err(MongoError::type_mismatch(format!(
                            "BSON field '$unionWith.{k}' is the wrong type '{}'",
                            type_name(other)
                        )))
                    }
                    (other, _) => return Err(unknown_field("$unionWith", other)),
                }
            }
            let coll = coll.ok_or_else(|| missing_field("$unionWith", "coll"))?;
            (coll, pipeline)
        }
        other => {
            return Err(MongoError::failed_to_parse(format!(
                "the $unionWith stage specification must be an object or string, but found {}",
                type_name(other)
            )))
        }
    };
    if Pipeline::parse(&pipeline)?.output().is_some() {
        return Err(MongoError::location(
            31441,
            "$out and $merge are not allowed to be used within a $unionWith stage",
        ));
    }
    Ok(vec![Box::new(UnionWithStage { coll, pipeline })])
}

impl Stage for UnionWithStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        let mut second: Option<DocStream> = None;
        let mut first = Some(input);
        Box::new(std::iter::from_fn(move || {
            if let Some(inp) = first.as_mut() {
                if let Some(r) = inp.next() {
                    return Some(r);
                }
                first = None;
                let stream = cx.read(&self.coll, "$unionWith").and_then(|s| {
                    let p = Pipeline::parse(&self.pipeline)?;
                    Ok(p.run_stages(s, &cx))
                });
                match stream {
                    Ok(s) => second = Some(s),
                    Err(e) => return Some(Err(e)),
                }
            }
            second.as_mut()?.next()
        }))
    }

    fn foreign_collections(&self, out: &mut Vec<String>) {
        out.push(self.coll.clone());
        if let Ok(p) = Pipeline::parse(&self.pipeline) {
            out.extend(p.foreign_collections());
        }
    }
}
