//! One file per aggregation stage; each exposes a `parse` function that the
//! stage table in `agg/mod.rs` points at.

pub(crate) mod add_fields;
pub(crate) mod bucket;
pub(crate) mod bucket_auto;
pub(crate) mod count;
pub(crate) mod densify;
pub(crate) mod documents;
pub(crate) mod facet;
pub(crate) mod fill;
pub(crate) mod geo_near;
pub(crate) mod graph_lookup;
pub(crate) mod group;
pub(crate) mod internal_unpack_bucket;
pub(crate) mod limit;
pub(crate) mod lookup;
pub(crate) mod match_;
pub(crate) mod project;
pub(crate) mod redact;
pub(crate) mod replace_root;
pub(crate) mod sample;
pub(crate) mod set_window_fields;
pub(crate) mod skip;
pub(crate) mod sort;
pub(crate) mod sort_by_count;
pub(crate) mod union_with;
pub(crate) mod unset;
pub(crate) mod unwind;

use super::DocStream;
use bisondb_error::MongoResult;
use bson::Document;

/// Applies a per-document transformation lazily, passing errors through.
pub(crate) fn map_docs<F>(input: DocStream, mut f: F) -> DocStream
where
    F: FnMut(Document) -> MongoResult<Document> + Send + 'static,
{
    Box::new(input.map(move |r| r.and_then(&mut f)))
}

/// Reads a non-negative integral count for `$skip`/`$limit`.
pub(crate) fn integral_arg(v: &bson::Bson) -> Option<i64> {
    match v {
        bson::Bson::Int32(i) => Some(i64::from(*i)),
        bson::Bson::Int64(i) => Some(*i),
        bson::Bson::Double(d) if d.fract() == 0.0 && d.abs() < 9.0e18 => Some(*d as i64),
        _ => None,
    }
}
