//! `$sort`: a blocking, stable sort. Followed directly by `$limit k`, it keeps
//! only the best k documents seen so far (bounded memory). Otherwise it holds
//! at most the memory limit (`internalQueryMaxBlockingSortMemoryUsageBytes`)
//! and then spills sorted runs to disk ([`crate::agg::spill::Sorter`]), or
//! fails with 292 when `allowDiskUse` is false.

use crate::agg::spill::{self, MemoryLimits, Sorter};
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::sort::SortSpec;
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};
use std::cmp::Ordering;
use std::sync::Arc;

#[derive(Debug)]
pub(crate) struct SortStage {
    spec: SortSpec,
    top_k: Option<u64>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 15973, |_| {
        "the $sort key specification must be an object".to_string()
    })?;
    Ok(vec![Box::new(SortStage::new(spec)?)])
}

impl SortStage {
    pub(crate) fn new(spec: &Document) -> MongoResult<SortStage> {
        if spec.is_empty() {
            return Err(MongoError::location(
                15976,
                "$sort stage must have at least one sort key",
            ));
        }
        Ok(SortStage {
            spec: SortSpec::parse(spec)?,
            top_k: None,
        })
    }
}

/// A `$sort` + `$limit` keeping at most this many documents stays in memory.
const TOP_K_IN_MEMORY: u64 = 10_000;

/// A document with its sort key extracted once.
struct Keyed {
    key: Vec<Bson>,
    doc: Document,
}

fn sort_all(spec: &SortSpec, input: DocStream, top_k: Option<u64>) -> MongoResult<Vec<Document>> {
    let k = top_k.and_then(|k| usize::try_from(k).ok());
    let mut buf: Vec<Keyed> = Vec::new();
    let cmp = |a: &Keyed, b: &Keyed| -> Ordering { spec.compare_keys(&a.key, &b.key) };
    for r in input {
        let doc = r?;
        let raw = RawDocumentBuf::try_from(&doc).map_err(|e| {
            MongoError::internal(format!("document cannot be encoded for sorting: {e}"))
        })?;
        buf.push(Keyed {
            key: spec.sort_key(&raw),
            doc,
        });
        // Top-k: trim when the buffer doubles, so the cost stays O(n log k).
        if let Some(k) = k {
            if buf.len() >= k.saturating_mul(2).max(64) {
                buf.sort_by(cmp);
                buf.truncate(k);
            }
        }
    }
    buf.sort_by(cmp);
    if let Some(k) = k {
        buf.truncate(k);
    }
    Ok(buf.into_iter().map(|x| x.doc).collect())
}

/// The whole input in order, within the memory limit or spilled.
pub(crate) fn sort_external(
    spec: SortSpec,
    input: DocStream,
    limits: &MemoryLimits,
) -> MongoResult<DocStream> {
    let spec = Arc::new(spec);
    let (s1, s2) = (spec.clone(), spec);
    let limit = limits.sort_bytes;
    let mut sorter = Sorter::new(
        limit,
        limits,
        Arc::new(move |raw: &bson::RawDocument| Ok(s1.sort_key(raw))),
        Arc::new(move |a: &Vec<Bson>, b: &Vec<Bson>| s2.compare_keys(a, b)),
    );
    for r in input {
        let doc = r?;
        let raw = RawDocumentBuf::try_from(&doc).map_err(|e| {
            MongoError::internal(format!("document cannot be encoded for sorting: {e}"))
        })?;
        let key = sorter.key_of(&raw)?;
        // The raw size stands for the document; the key is held beside it.
        let size = raw.as_bytes().len() + key.iter().map(spill::approx_size).sum::<usize>();
        if !limits.allow_disk_use {
            if sorter.would_exceed(size) {
                return Err(spill::sort_limit_error(limit));
            }
            // The operation's (or the server's) memory refusing is 146.
            sorter.charge(size)?;
            sorter.push_charged(key, doc, size);
            continue;
        }
        sorter.push(key, doc, size)?;
    }
    sorter.finish()
}

impl Stage for SortStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let top_k = self.top_k;
        let spec = self.spec.with_collation(cx.collation.clone());
        // `{$meta: "textScore"}` reads the scores the leading `$text`
        // `$match` recorded (40218 without one).
        let scores = cx
            .text_scores
            .clone()
            .map(crate::text::TextScoreSource::ById);
        let spec = match spec.with_text_score(scores) {
            Ok(s) => s,
            Err(e) => return Box::new(std::iter::once(Err(e))),
        };
        // A small top k is bounded by itself; mongod does not count it either.
        match top_k {
            Some(k) if k <= TOP_K_IN_MEMORY => {
                crate::agg::blocking(input, move |inp| sort_all(&spec, inp, Some(k)))
            }
            top_k => {
                let limits = cx.memory.clone();
                crate::agg::blocking_stream(input, move |inp| {
                    let sorted = sort_external(spec, inp, &limits)?;
                    Ok(match top_k.and_then(|k| usize::try_from(k).ok()) {
                        Some(k) => Box::new(sorted.take(k)),
                        None => sorted,
                    })
                })
            }
        }
    }

    fn set_top_k(&mut self, k: u64) -> bool {
        self.top_k = Some(self.top_k.map_or(k, |old| old.min(k)));
        true
    }

    fn sort_spec(&self) -> Option<&SortSpec> {
        Some(&self.spec)
    }
}
