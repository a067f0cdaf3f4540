//! Positional update paths: `$` (the array element the query matched),
//! `$[]` (every element) and `$[<id>]` (elements passing an `arrayFilters`
//! condition). Paths are expanded into concrete ones against the document
//! before the operator runs.

use super::path::{self, Lookup};
use super::FieldPath;
use crate::matcher::Matcher;
use crate::value::render;
use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document};

/// One parsed `arrayFilters` entry: its identifier and condition.
#[derive(Debug, Clone)]
pub(crate) struct ArrayFilter {
    pub id: String,
    matcher: Matcher,
}

impl ArrayFilter {
    /// The same filter matching under `collation` (the update's).
    pub(crate) fn collated(&self, collation: &std::sync::Arc<crate::collation::Collation>) -> Self {
        ArrayFilter {
            id: self.id.clone(),
            matcher: self.matcher.clone().with_collation(Some(collation.clone())),
        }
    }
}

/// The kind of a path component.
pub(crate) enum Component<'a> {
    Plain,
    /// `$`
    Matched,
    /// `$[]`
    All,
    /// `$[id]`
    Filtered(&'a str),
}

pub(crate) fn classify(p: &str) -> Component<'_> {
    if p == "$" {
        Component::Matched
    } else if p == "$[]" {
        Component::All
    } else if let Some(id) = p.strip_prefix("$[").and_then(|r| r.strip_suffix(']')) {
        Component::Filtered(id)
    } else {
        Component::Plain
    }
}

pub(crate) fn is_positional(p: &str) -> bool {
    !matches!(classify(p), Component::Plain)
}

/// Checks identifiers: alphanumeric, starting with a lowercase letter.
pub(crate) fn check_identifier(id: &str, path: &str) -> MongoResult<()> {
    let ok = id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
        && id.chars().all(|c| c.is_ascii_alphanumeric());
    if ok {
        Ok(())
    } else {
        Err(MongoError::bad_value(format!(
            "The array filter identifier '{id}' in path '{path}' must be an alphanumeric string beginning with a lowercase letter"
        )))
    }
}

/// Parses `arrayFilters`.
pub(crate) fn parse_array_filters(filters: &[Document]) -> MongoResult<Vec<ArrayFilter>> {
    let mut out: Vec<ArrayFilter> = Vec::with_capacity(filters.len());
    for f in filters {
        let mut id: Option<&str> = None;
        for k in f.keys() {
            let top = k.split('.').next().unwrap_or("");
            if top.starts_with('$') {
                return Err(MongoError::bad_value(
                    "Cannot use an expression without a top-level field name in arrayFilters",
                ));
            }
            match id {
                None => id = Some(top),
                Some(prev) if prev != top => {
                    return Err(MongoError::failed_to_parse(format!(
                        "Error parsing array filter :: caused by :: Expected a single top-level field name, found '{prev}' and '{top}'"
                    )))
                }
                Some(_) => {}
            }
        }
        let Some(id) = id else {
            return Err(MongoError::bad_value(
                "Cannot use an expression without a top-level field name in arrayFilters",
            ));
        };
        if !(id.chars().next().is_some_and(|c| c.is_ascii_lowercase())
            && id.chars().all(|c| c.is_ascii_alphanumeric()))
        {
            return Err(MongoError::bad_value(format!(
                "Error parsing array filter :: caused by :: The top-level field name must be an alphanumeric string beginning with a lowercase letter, found '{id}'"
            )));
        }
        if out.iter().any(|a| a.id == id) {
            return Err(MongoError::failed_to_parse(format!(
                "Found multiple array filters with the same top-level field name {id}"
            )));
        }
        out.push(ArrayFilter {
            id: id.to_string(),
            matcher: Matcher::parse_doc(f)?,
        });
    }
    Ok(out)
}

const NO_MATCH: &str = "The positional operator did not find the match needed from the query.";

/// The index of the first element of the array at `prefix` that makes the
/// query match (mongod's `$`): the document is re-matched with the array
/// narrowed to that one element.
fn matched_index(doc: &Document, prefix: &[String], query: Option<&Matcher>) -> MongoResult<usize> {
    let Some(query) = query else {
        return Err(MongoError::bad_value(NO_MATCH));
    };
    let Lookup::Found(Bson::Array(items)) = path::lookup(doc, prefix) else {
        return Err(MongoError::bad_value(NO_MATCH));
    };
    let mut probe = doc.clone();
    // A query that matches regardless of the array's content names no element.
    path::set_path(&mut probe, prefix, Bson::Array(Vec::new()))?;
    if query.matches_doc(&probe) {
        return Err(MongoError::bad_value(NO_MATCH));
    }
    for (i, e) in items.iter().enumerate() {
        path::set_path(&mut probe, prefix, Bson::Array(vec![e.clone()]))?;
        if query.matches_doc(&probe) {
            return Ok(i);
        }
    }
    Err(MongoError::bad_value(NO_MATCH))
}

/// Expands a path with positional components into concrete paths.
pub(crate) fn expand(
    doc: &Document,
    fp: &FieldPath,
    query: Option<&Matcher>,
    filters: &[ArrayFilter],
) -> MongoResult<Vec<FieldPath>> {
    let mut out = Vec::new();
    expand_rec(doc, &fp.parts, Vec::new(), fp, query, filters, &mut out)?;
    Ok(out
        .into_iter()
        .map(|parts| FieldPath {
            dotted: parts.join("."),
            parts,
        })
        .collect())
}

fn expand_rec(
    doc: &Document,
    rest: &[String],
    mut done: Vec<String>,
    fp: &FieldPath,
    query: Option<&Matcher>,
    filters: &[ArrayFilter],
    out: &mut Vec<Vec<String>>,
) -> MongoResult<()> {
    let Some(j) = rest.iter().position(|p| is_positional(p)) else {
        done.extend(rest.iter().cloned());
        out.push(done);
        return Ok(());
    };
    let (before, after) = rest.split_at(j);
    done.extend(before.iter().cloned());
    let (comp, after) = after
        .split_first()
        .ok_or_else(|| MongoError::internal("positional split"))?;
    if let Component::Matched = classify(comp) {
        let i = matched_index(doc, &done, query)?;
        done.push(i.to_string());
        return expand_rec(doc, after, done, fp, query, filters, out);
    }
    let items = match path::lookup(doc, &done) {
        Lookup::Found(Bson::Array(a)) => a,
        Lookup::Found(other) => {
            return Err(MongoError::bad_value(format!(
                "Cannot apply array updates to non-array element {}: {}",
                done.last().map_or("", String::as_str),
                render(other)
            )))
        }
        _ => {
            return Err(MongoError::bad_value(format!(
                "The path '{}' must exist in the document in order to apply array updates.",
                done.join(".")
            )))
        }
    };
    let filter = match classify(comp) {
        Component::Filtered(id) => Some(filters.iter().find(|f| f.id == id).ok_or_else(|| {
            MongoError::bad_value(format!(
                "No array filter found for identifier '{id}' in path '{}'",
                fp.dotted
            ))
        })?),
        _ => None,
    };
    for (i, e) in items.iter().enumerate() {
        if let Some(f) = filter {
            if !f.matcher.matches_doc(&doc! {f.id.clone(): e.clone()}) {
                continue;
            }
        }
        let mut next = done.clone();
        next.push(i.to_string());
        expand_rec(doc, after, next, fp, query, filters, out)?;
    }
    Ok(())
}
