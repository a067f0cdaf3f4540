//! `$facet`: runs several sub-pipelines over the same input and returns one
//! document with each sub-pipeline's results as an array.

use crate::agg::spill::bson_doc_size;
use crate::agg::{spec_doc, DocStream, Pipeline, RunCtx, Stage};
use crate::value::type_name;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document};

/// Stages mongod refuses inside `$facet`.
const FORBIDDEN: &[&str] = &[
    "$collStats",
    "$facet",
    "$geoNear",
    "$indexStats",
    "$merge",
    "$out",
    "$planCacheStats",
    "$search",
];

#[derive(Debug)]
pub(crate) struct FacetStage {
    facets: Vec<(String, Vec<Document>)>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 15955, |v| {
        format!(
            "the $facet specification must be a non-empty object, but found: {}",
            type_name(v)
        )
    })?;
    if spec.is_empty() {
        return Err(MongoError::location(
            40169,
            "the $facet specification must be a non-empty object",
        ));
    }
    let mut facets = Vec::with_capacity(spec.len());
    for (name, v) in spec {
        if name.is_empty() || name.starts_with('$') || name.contains('.') {
            return Err(MongoError::location(
                40172,
                format!(
                    "$facet field names may not be empty, start with '$', or contain '.': {name}"
                ),
            ));
        }
        let Bson::Array(stages) = v else {
            return Err(MongoError::location(
                40170,
                format!(
                    "arguments to $facet must be arrays, {name} is type {}",
                    type_name(v)
                ),
            ));
        };
        let mut docs = Vec::with_capacity(stages.len());
        for st in stages {
            let Bson::Document(d) = st else {
                return Err(MongoError::location(40171, format!("subpipeline of $facet must be an array of objects, {name} has a non-object element")));
            };
            if let Some(k) = d.keys().next() {
                if FORBIDDEN.contains(&k.as_str()) {
                    return Err(MongoError::location(
                        40600,
                        format!("{k} is not allowed to be used within a $facet stage"),
                    ));
                }
            }
            docs.push(d.clone());
        }
        Pipeline::parse(&docs)?;
        facets.push((name.clone(), docs));
    }
    Ok(vec![Box::new(FacetStage { facets })])
}

/// mongod's `internalQueryFacetMaxOutputDocSizeBytes`.
const MAX_FACET_OUTPUT_BYTES: usize = 100 * 1024 * 1024;

fn facet_all(
    facets: &[(String, Vec<Document>)],
    input: DocStream,
    cx: &RunCtx,
) -> MongoResult<Document> {
    // The buffered input counts against the blocking stages' memory limit,
    // the output against mongod's limit on the document `$facet` builds
    // (`internalQueryFacetMaxOutputDocSizeBytes`, 100 MiB): past either the
    // stage fails rather than hold more.
    let limit = cx.memory.group_bytes;
    let mut docs: Vec<Document> = Vec::new();
    let mut held = 0usize;
    // The input and the output built, counted against the operation's
    // memory (`bisondb_error::memory`) too: 146 when that refuses.
    let mut charge = bisondb_error::memory::Charge::new();
    for d in input {
        let d = d?;
        let size = bson_doc_size(&d);
        charge.grow(size)?;
        held += size;
        if held > limit {
            return Err(MongoError::new(
                ErrorCode::ExceededMemoryLimit,
                format!("$facet's input exceeded the memory limit of {limit} bytes"),
            ));
        }
        docs.push(d);
    }
    let mut out = Document::new();
    let mut built = 0usize;
    for (name, stages) in facets {
        let p = Pipeline::parse(stages)?;
        let sub: DocStream = Box::new(docs.clone().into_iter().map(Ok));
        let mut results: Vec<Document> = Vec::new();
        for r in p.run_stages(sub, cx) {
            let r = r?;
            let size = bson_doc_size(&r);
            charge.grow(size)?;
            built += size;
            if built > MAX_FACET_OUTPUT_BYTES {
                return Err(MongoError::location(
                    4031700,
                    format!(
                        "document constructed by $facet is {built} bytes, which exceeds the limit of {MAX_FACET_OUTPUT_BYTES} bytes"
                    ),
                ));
            }
            results.push(r);
        }
        out.insert(
            name.clone(),
            Bson::Array(results.into_iter().map(Bson::Document).collect()),
        );
    }
    Ok(out)
}

impl Stage for FacetStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        let mut input = Some(input);
        Box::new(std::iter::from_fn(move || {
            let inp = input.take()?;
            Some(facet_all(&self.facets, inp, &cx))
        }))
    }

    fn foreign_collections(&self, out: &mut Vec<String>) {
        for (_, stages) in &self.facets {
            if let Ok(p) = Pipeline::parse(stages) {
                out.extend(p.foreign_collections());
            }
        }
    }
}
