//! The `collation` argument of commands and the collation an operation runs
//! with.
//!
//! An operation uses its own `collation` when it gives one (an explicit
//! `{locale: "simple"}` included), else its collection's default collation,
//! which `create` stores, resolved, under `collation` in the collection's
//! options (where `listCollections` shows it, as mongod does). The comparison
//! itself is `bisondb_query::collation`.
//!
//! Building a collator is cheap but not free, and a collection's default is
//! needed by every operation on it, so collators are kept in a small cache
//! keyed by their specification.

use std::collections::HashMap;
use std::sync::Arc;

use bisondb_error::MongoResult;
use bisondb_query::collation::Collation;
use bisondb_storage::Collection;
use bson::{Bson, Document, RawBsonRef};
use parking_lot::Mutex;

use crate::fields;

/// What a command said about collation: `None` when it gave no `collation`
/// field, `Some(None)` for the simple collation, `Some(Some(c))` otherwise.
pub type Given = Option<Option<Arc<Collation>>>;

/// Distinct specifications kept; the cache is emptied when it fills (clients
/// rarely use more than a handful, and a flood of distinct ones must not grow
/// memory).
const CACHE_LIMIT: usize = 64;

static CACHE: Mutex<Option<HashMap<String, Arc<Collation>>>> = Mutex::new(None);

/// Parses a collation specification, through the cache.
pub fn parse_spec(spec: &Document) -> MongoResult<Option<Arc<Collation>>> {
    let key = spec.to_string();
    if let Some(c) = CACHE.lock().as_ref().and_then(|m| m.get(&key)) {
        return Ok(Some(c.clone()));
    }
    let parsed = Collation::parse(spec)?;
    if let Some(c) = &parsed {
        let mut guard = CACHE.lock();
        let map = guard.get_or_insert_with(HashMap::new);
        if map.len() >= CACHE_LIMIT {
            map.clear();
        }
        map.insert(key, c.clone());
    }
    Ok(parsed)
}

/// Parses the `collation` field of command `cmd` (an object, else 14 with
/// mongod's IDL message). An empty object means no collation was given, as in
/// mongod.
pub fn parse_arg(cmd: &str, v: RawBsonRef<'_>) -> MongoResult<Given> {
    let d = fields::to_document(fields::as_doc(cmd, "collation", v)?)?;
    if d.is_empty() {
        return Ok(None);
    }
    parse_spec(&d).map(Some)
}

/// The collection's default collation (`None`: simple, or no collection).
pub fn of_collection(coll: Option<&Collection>) -> MongoResult<Option<Arc<Collation>>> {
    let Some(coll) = coll else { return Ok(None) };
    match coll.options().get("collation") {
        Some(Bson::Document(d)) => parse_spec(d),
        _ => Ok(None),
    }
}

/// The collation an operation on `coll` runs with: its own, else the
/// collection's default.
pub fn effective(given: &Given, coll: Option<&Collection>) -> MongoResult<Option<Arc<Collation>>> {
    match given {
        Some(c) => Ok(c.clone()),
        None => of_collection(coll),
    }
}

/// The resolved specification to show for a collation (`None` when simple).
pub fn spec_of(c: Option<&Arc<Collation>>) -> Option<Document> {
    c.map(|c| c.spec().clone())
}
