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
use bisondb_error::{MongoError, MongoResult};
use bson::Document;

/// Applies a per-document transformation lazily, passing errors through.
pub(crate) fn map_docs<F>(input: DocStream, mut f: F) -> DocStream
where
    F: FnMut(Document) -> MongoResult<Document> + Send + 'static,
{
    Box::new(input.map(move |r| r.and_then(&mut f)))
}

/// Maps each input document with `each`, given state that `prepare` builds
/// from `this` when the first document arrives, so an empty input never
/// reads the foreign collection (`$lookup`, `$graphLookup`). Input errors
/// pass through; a failed `prepare` is returned once and ends the stream.
pub(crate) fn map_docs_prepared<T, S, P, F>(
    input: DocStream,
    this: T,
    prepare: P,
    mut each: F,
) -> DocStream
where
    T: Send + 'static,
    S: Send + 'static,
    P: FnOnce(&T) -> MongoResult<S> + Send + 'static,
    F: FnMut(&T, Document, &S) -> MongoResult<Document> + Send + 'static,
{
    let mut input = input;
    let mut prepare = Some(prepare);
    let mut state: Option<S> = None;
    Box::new(std::iter::from_fn(move || {
        if prepare.is_none() && state.is_none() {
            // `prepare` failed.
            return None;
        }
        let doc = match input.next()? {
            Ok(d) => d,
            Err(e) => return Some(Err(e)),
        };
        if let Some(p) = prepare.take() {
            match p(&this) {
                Ok(s) => state = Some(s),
                Err(e) => return Some(Err(e)),
            }
        }
        let s = state.as_ref()?;
        Some(each(&this, doc, s))
    }))
}

/// Reads a whole number: an int, a long or an integral double (a double
/// past the i64 range saturates).
pub(crate) fn whole_number(v: &bson::Bson) -> Option<i64> {
    match v {
        bson::Bson::Int32(i) => Some(i64::from(*i)),
        bson::Bson::Int64(i) => Some(*i),
        bson::Bson::Double(d) if d.fract() == 0.0 => Some(*d as i64),
        _ => None,
    }
}

/// Reads the count of `$skip`/`$limit` (they reject a negative one): a whole
/// number, but no double past 9e18.
pub(crate) fn integral_arg(v: &bson::Bson) -> Option<i64> {
    match v {
        bson::Bson::Double(d) if d.abs() >= 9.0e18 => None,
        other => whole_number(other),
    }
}

/// A number or a date (as epoch milliseconds) as a double: the values
/// `$densify` ranges over and `$fill`/`$setWindowFields` interpolate or
/// measure ranges on.
pub(crate) fn number_or_date(v: &bson::Bson) -> Option<f64> {
    match v {
        bson::Bson::DateTime(d) => Some(d.timestamp_millis() as f64),
        other => crate::value::Num::from_bson(other).map(crate::value::Num::as_f64),
    }
}

/// Reads `partitionByFields` of `stage` (`$densify`, `$fill`): field names.
pub(crate) fn partition_fields_arg(stage: &str, a: &[bson::Bson]) -> MongoResult<Vec<String>> {
    let mut fields = Vec::with_capacity(a.len());
    for f in a {
        match f {
            bson::Bson::String(s) => fields.push(s.clone()),
            _ => {
                return Err(MongoError::type_mismatch(format!(
                    "{stage} partitionByFields must be an array of strings"
                )))
            }
        }
    }
    Ok(fields)
}

/// mongod's error for a field a stage's spec does not have (40415), worded
/// as its spec parser words it: `BSON field '<parent>.<field>' ...`.
pub(crate) fn unknown_field(parent: &str, field: &str) -> MongoError {
    MongoError::location(
        40415,
        format!("BSON field '{parent}.{field}' is an unknown field."),
    )
}

/// [`unknown_field`] for a parser that also reports a known field of the
/// wrong type this way (`$densify`, `$fill`).
pub(crate) fn unknown_field_or_type(parent: &str, field: &str, v: &bson::Bson) -> MongoError {
    MongoError::location(
        40415,
        format!(
            "BSON field '{parent}.{field}' is an unknown field or has the wrong type '{}'.",
            crate::value::type_name(v)
        ),
    )
}

/// Lives with the values, as the quantile specs below the stages need it too.
pub(crate) use crate::value::missing_field;
