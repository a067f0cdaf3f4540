//! `$text` queries: the collection's text index is required (27 otherwise);
//! the filter's `$text` is bound to it, then the index is scanned for every
//! term of the search (one point per term under the equality values of the
//! index's prefix fields) and each document found is re-checked by the whole
//! filter, which now holds the bound `$text` (phrases, negations, the rest).
//! A `$text` inside an `$or` scans the collection instead: the bound matcher
//! decides per document.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::matcher::bounds::{implies, FieldBounds, Interval};
use bisondb_query::matcher::Matcher;
use bisondb_query::text::{BoundText, TextParams, TextQuery, TextSpec, TEXT_INDEX_VERSION};
use bisondb_storage::IndexInfo;
use bson::{doc, Bson, Document};

use super::access::IndexScanStage;
use super::explain::{FetchStage, PassThrough, Ran, Stage, StageTree};
use super::{Access, Stats};

/// The access path of a filter with `$text`, after binding it; `None` when
/// the filter has no `$text`.
pub(super) fn choose(
    indexes: &[IndexInfo],
    m: &Matcher,
    filter_doc: Option<&Document>,
) -> MongoResult<Option<Access>> {
    let Some(params) = m.text_params() else {
        return Ok(None);
    };
    // A partial text index serves only queries that imply its filter.
    let eligible = |ix: &&IndexInfo| match &ix.spec.partial_filter {
        Some(p) => filter_doc.is_some_and(|f| implies(f, p)),
        None => true,
    };
    let Some(ix) = indexes
        .iter()
        .filter(eligible)
        .find(|ix| ix.spec.is_text() && !ix.spec.hidden)
    else {
        return Err(MongoError::new(
            ErrorCode::IndexNotFound,
            "text index required for $text query",
        ));
    };
    let spec = TextSpec::from_stored(&ix.spec.key, &ix.spec.type_options)?;
    let query = TextQuery::parse(params, spec.default_language)?;
    let terms: Vec<String> = query.terms_for_bounds.iter().cloned().collect();
    let prefix_paths = spec.prefix.clone();
    m.bind_text(BoundText { spec, query });
    if !m.text_is_top_level() {
        return Ok(Some(Access::Collscan {
            reverse: false,
            id_index: false,
            id_bounds: None,
        }));
    }
    // Every prefix field needs an equality: the index is ordered by them first.
    let equalities = m.equality_fields();
    let mut prefix = Vec::with_capacity(prefix_paths.len());
    for p in &prefix_paths {
        match equalities.iter().find(|(path, _)| path == p) {
            Some((_, v)) if !matches!(v, Bson::Array(_) | Bson::RegularExpression(_)) => {
                prefix.push(v.clone())
            }
            _ => {
                return Err(MongoError::new(
                    ErrorCode::NoQueryExecutionPlans,
                    "error processing query: planner returned error :: caused by :: failed to use text index to satisfy $text query (if text index is compound, are equality predicates given for all prefix fields?)",
                ))
            }
        }
    }
    Ok(Some(Access::Ixscan {
        index: Box::new(ix.clone()),
        bounds: bounds(ix, &prefix, &terms),
        reverse: false,
    }))
}

/// Prefix points, one point per term (none: nothing matches), then anything.
fn bounds(ix: &IndexInfo, prefix: &[Bson], terms: &[String]) -> Vec<FieldBounds> {
    let point = |v: Bson| Interval::point(v);
    let mut b: Vec<FieldBounds> = prefix
        .iter()
        .map(|v| FieldBounds {
            intervals: vec![point(v.clone())],
            exact: false,
        })
        .collect();
    b.push(FieldBounds {
        intervals: terms
            .iter()
            .map(|t| point(Bson::String(t.clone())))
            .collect(),
        exact: false,
    });
    while b.len() < ix.fields.len() {
        b.push(FieldBounds::full());
    }
    b
}

/// explain's stages for a `$text` scan, shaped as mongod's: TEXT_MATCH (the
/// parsed query) over a FETCH over TEXT_OR over the index scan.
pub(super) fn stages<'a>(
    ix: &'a IndexInfo,
    filter: &'a Document,
    scan: IndexScanStage<'a>,
) -> StageTree<'a> {
    let mut prefix = Document::new();
    for (k, v) in scan.index_bounds() {
        if k == "_fts" {
            break;
        }
        prefix.insert(k, v);
    }
    StageTree::leaf(scan)
        .then(PassThrough("TEXT_OR"))
        .then(FetchStage { filter: None })
        .then(TextMatchStage { ix, filter, prefix })
}

/// explain's TEXT_MATCH: the search as parsed, checked on each document.
struct TextMatchStage<'a> {
    ix: &'a IndexInfo,
    filter: &'a Document,
    /// The bounds of the index's fields before the text key.
    prefix: Document,
}

impl Stage for TextMatchStage<'_> {
    fn name(&self) -> &'static str {
        "TEXT_MATCH"
    }

    fn describe(&self, out: &mut Document) {
        let ix = self.ix;
        let parsed = self
            .filter
            .get("$text")
            .and_then(|t| TextParams::parse(t).ok())
            .and_then(|p| {
                let spec = TextSpec::from_stored(&ix.spec.key, &ix.spec.type_options).ok()?;
                TextQuery::parse(&p, spec.default_language).ok()
            })
            .unwrap_or_default();
        let list = |v: Vec<String>| v.into_iter().map(Bson::String).collect::<Vec<_>>();
        out.insert("indexPrefix", self.prefix.clone());
        out.insert("indexName", ix.spec.name.clone());
        out.insert(
            "parsedTextQuery",
            doc! {
                "terms": list(parsed.positive_terms.into_iter().collect()),
                "negatedTerms": list(parsed.negated_terms.into_iter().collect()),
                "phrases": list(parsed.positive_phrases),
                "negatedPhrases": list(parsed.negated_phrases),
            },
        );
        out.insert("textIndexVersion", TEXT_INDEX_VERSION);
    }

    fn ran(&self, s: &Stats, input: Option<&Ran>) -> Ran {
        Ran::as_input(input, s)
    }
}
