//! `$text` in a filter: parsed with the filter, bound to the collection's text
//! index by the planner (the index's weights and languages decide what a
//! document's words are), then matched and scored per document.

use std::sync::{Arc, OnceLock};

use bisondb_error::{MongoError, MongoResult};
use bson::raw::RawDocument;
use bson::Bson;

use super::{Expr, Matcher};
use crate::text::{BoundText, TextParams, TextScoreSource};

/// A `$text` operator. The binding is shared by every clone of the matcher,
/// so binding it once (in the planner) serves the projection and sort that
/// hold clones made before.
#[derive(Debug, Clone)]
pub(super) struct TextNode {
    pub(super) params: TextParams,
    pub(super) bound: Arc<OnceLock<Arc<BoundText>>>,
}

impl TextNode {
    pub(super) fn parse(v: &Bson) -> MongoResult<TextNode> {
        Ok(TextNode {
            params: TextParams::parse(v)?,
            bound: Arc::new(OnceLock::new()),
        })
    }

    /// An unbound `$text` matches nothing: every path that runs a filter
    /// with `$text` goes through the planner, which binds it first.
    pub(super) fn matches(&self, doc: &RawDocument) -> MongoResult<bool> {
        match self.bound.get() {
            Some(b) => b.matches(doc),
            None => Ok(false),
        }
    }
}

/// Where `$text` sits in a filter.
fn find<'a>(e: &'a Expr, out: &mut Vec<(&'a TextNode, bool, bool)>, top: bool, in_nor: bool) {
    match e {
        Expr::And(v) => v.iter().for_each(|c| find(c, out, top, in_nor)),
        Expr::Or(v) => v.iter().for_each(|c| find(c, out, false, in_nor)),
        Expr::Nor(v) => v.iter().for_each(|c| find(c, out, false, true)),
        Expr::Text(t) => out.push((t, top, in_nor)),
        _ => {}
    }
}

/// mongod's canonical-query checks: one `$text` at most, never under `$nor`.
pub(super) fn check_text(root: &Expr) -> MongoResult<()> {
    let mut found = Vec::new();
    find(root, &mut found, true, false);
    if found.len() > 1 {
        return Err(MongoError::bad_value("Too many text expressions"));
    }
    if found.iter().any(|(_, _, nor)| *nor) {
        return Err(MongoError::bad_value("text expression not allowed in nor"));
    }
    Ok(())
}

impl Matcher {
    fn text_node(&self) -> Option<(&TextNode, bool)> {
        let mut found = Vec::new();
        find(&self.root, &mut found, true, false);
        found.first().map(|(t, top, _)| (*t, *top))
    }

    /// The filter's `$text` arguments, if it has one.
    pub fn text_params(&self) -> Option<&TextParams> {
        self.text_node().map(|(t, _)| &t.params)
    }

    /// Whether the `$text` is a conjunct of the whole filter (so its index
    /// lookup bounds the result), not inside an `$or`.
    pub fn text_is_top_level(&self) -> bool {
        self.text_node().is_some_and(|(_, top)| top)
    }

    /// Binds the filter's `$text` to the collection's text index (first
    /// binding wins; later ones are ignored, as they come from the same index).
    pub fn bind_text(&self, bound: BoundText) {
        if let Some((t, _)) = self.text_node() {
            let _ = t.bound.set(Arc::new(bound));
        }
    }

    /// The bound `$text`, once the planner bound it.
    pub fn bound_text(&self) -> Option<Arc<BoundText>> {
        self.text_node().and_then(|(t, _)| t.bound.get().cloned())
    }

    /// Where `{$meta: "textScore"}` reads its value for this filter; `None`
    /// when the filter has no `$text`.
    pub fn text_score_source(&self) -> Option<TextScoreSource> {
        self.text_node()
            .map(|(t, _)| TextScoreSource::Bound(t.bound.clone()))
    }
}
