//! Text scores outside the filter that computed them: recorded by `_id` for
//! the later stages of an aggregation, or read from the query's bound `$text`.
//! Expressions (`{$meta: "textScore"}`), sort and projection read them, so
//! they live here, below all three, rather than with the matcher.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use bson::raw::RawDocument;
use bson::Bson;

use super::BoundText;

/// Text scores recorded by document `_id`: how an aggregation pipeline
/// keeps the score of each document its leading `$text` `$match` found, for
/// `{$meta: "textScore"}` in later stages (the documents may be reshaped by
/// then, but keep their `_id`).
#[derive(Debug, Default)]
pub struct ScoresById(Mutex<HashMap<Vec<u8>, f64>>);

impl ScoresById {
    fn key(id: &Bson) -> Option<Vec<u8>> {
        bson::RawDocumentBuf::try_from(&bson::doc! {"": id.clone()})
            .ok()
            .map(|d| d.into_bytes())
    }

    /// Records the score of the document with this `_id`.
    pub fn record(&self, doc: &RawDocument, score: f64) {
        let Some(id) = doc
            .get("_id")
            .ok()
            .flatten()
            .and_then(|v| Bson::try_from(v).ok())
        else {
            return;
        };
        if let (Some(k), Ok(mut map)) = (Self::key(&id), self.0.lock()) {
            map.insert(k, score);
        }
    }

    /// The score recorded for the document whose `_id` is `id`.
    pub fn get(&self, id: &Bson) -> Option<f64> {
        let k = Self::key(id)?;
        self.0.lock().ok()?.get(&k).copied()
    }
}

/// Where `{$meta: "textScore"}` reads a document's score: the query's bound
/// `$text` (find: computed from the stored document), or the scores an
/// aggregation recorded by `_id`.
#[derive(Debug, Clone)]
pub enum TextScoreSource {
    Bound(Arc<OnceLock<Arc<BoundText>>>),
    ById(Arc<ScoresById>),
}

impl PartialEq for TextScoreSource {
    /// The same source (one query's `$text`).
    fn eq(&self, other: &TextScoreSource) -> bool {
        match (self, other) {
            (TextScoreSource::Bound(a), TextScoreSource::Bound(b)) => Arc::ptr_eq(a, b),
            (TextScoreSource::ById(a), TextScoreSource::ById(b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl TextScoreSource {
    /// The score of `doc`, when known.
    pub fn score(&self, doc: &RawDocument) -> Option<f64> {
        match self {
            TextScoreSource::Bound(b) => b.get().map(|b| b.score(doc)),
            TextScoreSource::ById(m) => doc
                .get("_id")
                .ok()
                .flatten()
                .and_then(|v| Bson::try_from(v).ok())
                .and_then(|id| m.get(&id)),
        }
    }
}
