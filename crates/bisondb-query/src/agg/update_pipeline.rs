//! Pipeline-style updates (`u: [<stage>, ...]` and `$merge`'s `whenMatched`
//! pipeline): the stages mongod allows in an update, run over the one
//! document being updated. They are aggregation pipelines, so they live
//! here; `update` (above the stages) and `$merge` (a stage) both call in,
//! which keeps the stages from depending on `update`.

use super::{DocStream, Pipeline};
use crate::collation::Collation;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};
use std::sync::Arc;

/// The stages mongod accepts in an update pipeline.
const ALLOWED: &[&str] = &[
    "$addFields",
    "$project",
    "$replaceRoot",
    "$replaceWith",
    "$set",
    "$unset",
];

/// Checks an update pipeline: only the allowed stages, each parsing, so
/// errors surface before any document is touched.
pub(crate) fn check(stages: &[Document]) -> MongoResult<()> {
    for st in stages {
        if let Some(name) = st.keys().next() {
            if st.len() == 1 && !ALLOWED.contains(&name.as_str()) {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("{name} is not allowed to be used within an update"),
                ));
            }
        }
    }
    Pipeline::parse(stages).map(|_| ())
}

/// Runs an update pipeline over `doc` and returns the new document, with
/// `_id` restored in front when the pipeline dropped it (as mongod does) and
/// refused when the pipeline changed it.
pub(crate) fn apply(
    stages: &[Document],
    doc: &Document,
    collation: Option<Arc<Collation>>,
) -> MongoResult<Document> {
    let old_id = doc.get("_id");
    let pipeline = Pipeline::parse(stages)?.with_collation(collation);
    let input: DocStream = Box::new(std::iter::once(Ok(doc.clone())));
    let work = match pipeline.run(input).next() {
        Some(r) => r?,
        None => return Err(MongoError::internal("pipeline update produced no document")),
    };
    match (old_id, work.get("_id")) {
        (Some(id), None) => {
            let mut fixed = Document::new();
            fixed.insert("_id", id.clone());
            fixed.extend(work);
            Ok(fixed)
        }
        _ => {
            check_id_unchanged(old_id, &work)?;
            Ok(work)
        }
    }
}

/// mongod's error for an update that changes `_id` (operators or pipeline).
pub(crate) fn check_id_unchanged(old: Option<&Bson>, new: &Document) -> MongoResult<()> {
    if let Some(old) = old {
        if new.get("_id") != Some(old) {
            return Err(MongoError::new(
                ErrorCode::ImmutableField,
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ));
        }
    }
    Ok(())
}
