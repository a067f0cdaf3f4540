//! Read-only views, as mongod has them: a catalog entry whose options hold
//! `viewOn` and `pipeline` and that has no documents of its own.
//!
//! A view resolves to its source collection and the concatenated pipelines
//! of the chain of views (at most [`MAX_VIEW_DEPTH`] deep); reads through it
//! run as an aggregation over that source, as mongod does (the commands'
//! side of that is in `on_view/`). A time-series collection reads the same
//! way, as a view over its bucket collection ([`definition`]).
//! A view's `collation` (resolved, in its options; simple when absent) is the
//! collation every read through it runs with, and a view on a view must have
//! the same one.

use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::agg::{CollectionReader, DocStream, Pipeline};
use bisondb_query::collation::Collation;
use bisondb_query::matcher::Matcher;
use bisondb_storage::Storage;
use bson::{doc, Bson, Document};

use super::timeseries::{buckets_name, TsOptions};
use crate::fields;
use crate::plan;

/// mongod's limit on a chain of views on views.
pub const MAX_VIEW_DEPTH: usize = 20;

/// A view's definition as stored in the catalog.
#[derive(Debug, Clone)]
pub struct ViewDef {
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// The view's resolved collation; `None` is the simple collation.
    pub collation: Option<Document>,
}

/// The definition of `db.name` if it is a view.
pub fn definition(storage: &Storage, db: &str, name: &str) -> Option<ViewDef> {
    // Runs before every read and write command: read the options in place
    // rather than copying the collection's info.
    let coll = storage.collection(db, name)?;
    let options = coll.options();
    // A time-series collection reads as a view over its buckets.
    view_of_options(&options).or_else(|| time_series_view(name, &options))
}

/// A view's definition from catalog options (`None` for a collection).
pub fn view_of_options(options: &Document) -> Option<ViewDef> {
    let view_on = options.get_str("viewOn").ok()?.to_string();
    let pipeline = match options.get("pipeline") {
        Some(Bson::Array(a)) => a
            .iter()
            .filter_map(|s| match s {
                Bson::Document(d) => Some(d.clone()),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    };
    Some(ViewDef {
        view_on,
        pipeline,
        collation: options.get_document("collation").ok().cloned(),
    })
}

/// A time-series collection `name` read as a view: its buckets through
/// `$_internalUnpackBucket`.
fn time_series_view(name: &str, options: &Document) -> Option<ViewDef> {
    let ts = TsOptions::of(name, options)?;
    Some(ViewDef {
        view_on: buckets_name(name),
        pipeline: vec![doc! {"$_internalUnpackBucket": ts.unpack_spec()}],
        collation: options.get_document("collation").ok().cloned(),
    })
}

/// A view resolved down to a collection: its name and the pipeline to run over it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub source: String,
    pub pipeline: Vec<Document>,
    /// The (outermost) view's collation; `None` is simple.
    pub collation: Option<Document>,
}

fn depth_error() -> MongoError {
    MongoError::new(
        ErrorCode::ViewDepthLimitExceeded,
        format!("View depth too deep or view cycle detected. Maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// Resolves `db.name` if it is a view; `None` for a collection or a missing name.
pub fn resolve(storage: &Storage, db: &str, name: &str) -> MongoResult<Option<Resolved>> {
    let mut chain: Vec<Vec<Document>> = Vec::new();
    let mut current = name.to_string();
    let mut collation = None;
    while let Some(def) = definition(storage, db, &current) {
        if chain.len() >= MAX_VIEW_DEPTH {
            return Err(depth_error());
        }
        if chain.is_empty() {
            collation = def.collation;
        }
        chain.push(def.pipeline);
        current = def.view_on;
    }
    if chain.is_empty() {
        return Ok(None);
    }
    // The innermost view's stages run first.
    let pipeline = chain.into_iter().rev().flatten().collect();
    Ok(Some(Resolved {
        source: current,
        pipeline,
        collation,
    }))
}

/// A view `db.name` on `view_on` must have the collation of `view_on` when that
/// is a view too (mongod's check when a view is created).
pub fn check_view_collation(
    storage: &Storage,
    db: &str,
    name: &str,
    view_on: &str,
    collation: Option<&Document>,
) -> MongoResult<()> {
    match definition(storage, db, view_on) {
        Some(def) if def.collation.as_ref() != collation => Err(MongoError::new(
            ErrorCode::OptionNotSupportedOnView,
            format!("View {db}.{name} has conflicting collation with view {db}.{view_on}"),
        )),
        _ => Ok(()),
    }
}

/// Checks a new view `db.name` on `view_on` with `pipeline` before it is stored:
/// the pipeline must parse and must not write, and the chain of views it starts
/// must neither loop nor be deeper than [`MAX_VIEW_DEPTH`].
pub fn check_new_view(
    storage: &Storage,
    db: &str,
    name: &str,
    view_on: &str,
    pipeline: &[Document],
) -> MongoResult<()> {
    for (i, stage) in pipeline.iter().enumerate() {
        if let Some(op) = stage.keys().next() {
            if op == "$out" || op == "$merge" {
                return Err(MongoError::new(
                    ErrorCode::OptionNotSupportedOnView,
                    format!(
                        "The aggregation stage {op} in location {i} of the pipeline cannot be used in the view definition of {db}.{name} because it writes to disk"
                    ),
                ));
            }
        }
    }
    Pipeline::parse(pipeline)?;
    let mut depth = 1;
    let mut current = view_on.to_string();
    loop {
        if current == name {
            return Err(MongoError::new(
                ErrorCode::GraphContainsCycle,
                format!("View cycle detected: {db}.{name} is its own source"),
            ));
        }
        match definition(storage, db, &current) {
            Some(def) => {
                depth += 1;
                if depth > MAX_VIEW_DEPTH {
                    return Err(depth_error());
                }
                current = def.view_on;
            }
            None => return Ok(()),
        }
    }
}

/// The collation of a view, parsed (`None`: simple).
pub fn view_collation(spec: Option<&Document>) -> MongoResult<Option<Arc<Collation>>> {
    match spec {
        Some(d) => crate::collation::parse_spec(d),
        None => Ok(None),
    }
}

/// Runs `stages` over a scan of `db.source` (which may be missing).
pub fn run_stages(
    storage: &Storage,
    db: &str,
    source: &str,
    stages: &[Document],
) -> MongoResult<DocStream> {
    run_stages_in(storage, db, source, stages, None)
}

/// [`run_stages`] under a collation (`None`: simple).
pub fn run_stages_in(
    storage: &Storage,
    db: &str,
    source: &str,
    stages: &[Document],
    collation: Option<Arc<Collation>>,
) -> MongoResult<DocStream> {
    let pipeline = Pipeline::parse(stages)?.with_collation(collation.clone());
    let coll = storage.collection(db, source);
    let filter = pipeline.leading_match().cloned().unwrap_or_default();
    let matcher = Matcher::parse_doc(&filter)?.with_collation(collation);
    let scan = plan::matching_doc(coll.as_ref(), &matcher, &filter)?;
    let input: DocStream = Box::new(scan.map(|r| r.and_then(|d| fields::to_document(&d))));
    let reader: Arc<dyn CollectionReader> = Arc::new(StorageReader {
        storage: storage.clone(),
        db: db.to_string(),
    });
    Ok(pipeline.run_with_reader(input, Some(reader)))
}

/// The documents `$lookup`, `$unionWith` and `$graphLookup` see in `db.name`:
/// through its pipeline when it is a view.
pub fn read_through(storage: &Storage, db: &str, name: &str) -> MongoResult<Option<DocStream>> {
    match resolve(storage, db, name)? {
        Some(r) => {
            let collation = view_collation(r.collation.as_ref())?;
            Ok(Some(run_stages_in(
                storage,
                db,
                &r.source,
                &r.pipeline,
                collation,
            )?))
        }
        None => Ok(None),
    }
}

/// Lets `$lookup`, `$graphLookup` and `$unionWith` read other collections of the
/// same database (each read is a fresh snapshot scan).
pub struct StorageReader {
    pub storage: bisondb_storage::Storage,
    pub db: String,
}

impl CollectionReader for StorageReader {
    fn read(&self, collection: &str) -> MongoResult<DocStream> {
        if let Some(docs) = read_through(&self.storage, &self.db, collection)? {
            return Ok(docs);
        }
        let coll = self.storage.collection(&self.db, collection);
        let all = Matcher::parse_doc(&Document::new())?;
        let scan = plan::matching(coll.as_ref(), &all)?;
        Ok(Box::new(
            scan.map(|r| r.and_then(|d| fields::to_document(&d))),
        ))
    }
}
