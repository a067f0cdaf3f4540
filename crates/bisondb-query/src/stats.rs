//! Percentiles, shared by the `$median`/`$percentile` accumulators and the
//! expressions of the same names (mongod parses and computes both alike), and
//! the numeric input of the statistics accumulators. It sits below
//! expressions and accumulators so that both reach it without reaching each
//! other.

use crate::value::{missing_field, Num, Value};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};

/// Checks that an object-form accumulator's spec `d` has only `allowed`
/// fields and all `required` ones.
pub(crate) fn check_fields(
    name: &str,
    d: &Document,
    allowed: &[&str],
    required: &[&str],
) -> MongoResult<()> {
    for k in d.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(MongoError::location(
                5787901,
                format!("Unknown argument to {name} '{k}'"),
            ));
        }
    }
    for k in required {
        if !d.contains_key(*k) {
            return Err(missing_field(name, k));
        }
    }
    Ok(())
}

/// Checks the fields of a `$median`/`$percentile` spec (accumulator or
/// expression: mongod parses both alike) and returns the requested
/// percentiles: the `p` list, or 0.5 for `$median`.
pub(crate) fn parse_quantile_spec(
    name: &str,
    median: bool,
    arg: &Bson,
) -> MongoResult<(Bson, Vec<f64>)> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            5787801,
            format!("specification must be an object; found {name}: {arg}"),
        ));
    };
    let (allowed, required): (&[&str], &[&str]) = if median {
        (&["input", "method"], &["input", "method"])
    } else {
        (&["input", "p", "method"], &["input", "p", "method"])
    };
    check_fields(name, d, allowed, required)?;
    let ps = quantile_params(median, d)?;
    Ok((d.get("input").cloned().unwrap_or(Bson::Null), ps))
}

/// `method` (only "approximate", as mongod 8) and the percentiles of a
/// `$median`/`$percentile` spec.
fn quantile_params(median: bool, d: &Document) -> MongoResult<Vec<f64>> {
    if let Some(method) = d.get("method") {
        if method != &Bson::String("approximate".into()) {
            return Err(MongoError::bad_value(format!(
                "Currently only 'approximate' can be used as percentile 'method', found {method}"
            )));
        }
    }
    Ok(match (median, d.get("p")) {
        (true, _) => vec![0.5],
        (_, Some(Bson::Array(ps))) if !ps.is_empty() => {
            let mut out = Vec::with_capacity(ps.len());
            for p in ps {
                match Num::from_bson(p).map(Num::as_f64) {
                    Some(x) if (0.0..=1.0).contains(&x) => out.push(x),
                    _ => {
                        return Err(MongoError::location(
                            7750301,
                            format!("The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: {p}"),
                        ))
                    }
                }
            }
            out
        }
        (_, Some(other)) => {
            return Err(MongoError::location(
                7750301,
                format!("The $percentile 'p' field must be an array of numbers from [0.0, 1.0], but found: {other}"),
            ))
        }
        (_, None) => Vec::new(),
    })
}

/// Discrete percentiles of `vals` (sorted here): for each p, the smallest
/// value with at least p of the data at or below it; null when empty.
pub(crate) fn quantiles(mut vals: Vec<f64>, ps: &[f64]) -> Vec<Bson> {
    vals.sort_by(f64::total_cmp);
    ps.iter()
        .map(|p| {
            if vals.is_empty() {
                return Bson::Null;
            }
            let rank = (p * vals.len() as f64).ceil() as usize;
            vals.get(rank.saturating_sub(1).min(vals.len() - 1))
                .map_or(Bson::Null, |x| Bson::Double(*x))
        })
        .collect()
}

/// The double a `$median`/`$percentile` input counts as (None: ignored).
pub(crate) fn quantile_input(v: &Bson) -> Option<f64> {
    number(&Some(v.clone()), "$percentile")
        .ok()
        .flatten()
        .map(Num::as_f64)
}

/// A numeric input of `$stdDevPop`/`$stdDevSamp`/`$percentile`/`$median`,
/// which compute in doubles: mongod reads a decimal as its double value.
/// (`$sum`/`$avg` take decimals before getting here.)
pub(crate) fn number(v: &Value, _op: &str) -> MongoResult<Option<Num>> {
    match v {
        Some(Bson::Decimal128(d)) => {
            Ok(Some(Num::F64(crate::decimal::Dec::from_bson(*d).to_f64())))
        }
        Some(b) => Ok(Num::from_bson(b)),
        None => Ok(None),
    }
}
