//! `$bucket`: groups documents into ranges of `groupBy` values given by
//! sorted `boundaries` (lower bound inclusive), plus an optional `default`
//! bucket; each bucket's `_id` is its lower bound.

use crate::agg::accumulators::{
    accumulate_all, finish_all, new_states, AccOp, AccState, Accumulator,
};
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::collation::Collation;
use crate::compare::{compare_bson, compare_bson_in};
use crate::expr::Expr;
use crate::value::{is_number, render, type_name};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, Document};
use std::cmp::Ordering;

#[derive(Debug)]
pub(crate) struct BucketStage {
    group_by: Expr,
    boundaries: Vec<Bson>,
    default: Option<Bson>,
    output: Vec<(String, Accumulator)>,
}

fn same_type(a: &Bson, b: &Bson) -> bool {
    (is_number(a) && is_number(b)) || std::mem::discriminant(a) == std::mem::discriminant(b)
}

/// Whether a `groupBy` (of `$bucketAuto` too) is a `$`-prefixed path or an
/// expression object.
pub(super) fn is_group_by(v: &Bson) -> bool {
    matches!(v, Bson::String(s) if s.starts_with('$'))
        || matches!(v, Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')))
}

/// Parses the `output` of `stage` (`$bucket` or `$bucketAuto`): its
/// accumulators by field name; anything but an object fails with `code`.
pub(super) fn parse_output(
    v: &Bson,
    stage: &str,
    code: i32,
) -> MongoResult<Vec<(String, Accumulator)>> {
    let Bson::Document(d) = v else {
        return Err(MongoError::location(
            code,
            format!(
                "The {stage} 'output' field must be an object, but found type: {}",
                type_name(v)
            ),
        ));
    };
    let mut out = Vec::with_capacity(d.len());
    for (name, acc) in d {
        out.push((name.clone(), Accumulator::parse(name, acc)?));
    }
    Ok(out)
}

/// The output of a bucket stage without `output`: `{count: {$sum: 1}}`.
pub(super) fn count_output() -> Vec<(String, Accumulator)> {
    vec![(
        "count".to_string(),
        Accumulator::new(AccOp::Sum, Expr::Literal(Bson::Int32(1))),
    )]
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 40201, |v| {
        format!(
            "Argument to $bucket stage must be an object, but found type: {}",
            type_name(v)
        )
    })?;
    let (mut group_by, mut boundaries, mut default, mut output) = (None, None, None, None);
    for (k, v) in spec {
        match k.as_str() {
            "groupBy" => {
                if !is_group_by(v) {
                    return Err(MongoError::location(
                        40202,
                        format!("The $bucket 'groupBy' field must be defined as a $-prefixed path or an expression, but found: {}", render(v)),
                    ));
                }
                group_by = Some(Expr::parse(v)?);
            }
            "boundaries" => match v {
                Bson::Array(a) if a.len() > 1 => boundaries = Some(a.clone()),
                _ => {
                    return Err(MongoError::location(
                        40200,
                        format!(
                        "The $bucket 'boundaries' field must be an array of values. But found: {}",
                        render(v)
                    ),
                    ))
                }
            },
            "default" => default = Some(v.clone()),
            "output" => output = Some(parse_output(v, "$bucket", 40196)?),
            other => {
                return Err(MongoError::location(
                    40197,
                    format!("Unrecognized option to $bucket: {other}."),
                ))
            }
        }
    }
    let (Some(group_by), Some(boundaries)) = (group_by, boundaries) else {
        return Err(MongoError::location(
            40198,
            "$bucket requires 'groupBy' and 'boundaries' to be specified.",
        ));
    };
    for w in boundaries.windows(2) {
        if let [a, b] = w {
            if !same_type(a, b) {
                return Err(MongoError::location(
                    40193,
                    format!(
                        "All values in the the 'boundaries' option to $bucket must have the same type. Found conflicting types {} and {}.",
                        type_name(a),
                        type_name(b)
                    ),
                ));
            }
            if compare_bson(a, b) != Ordering::Less {
                return Err(MongoError::location(
                    40194,
                    format!("The 'boundaries' option to $bucket must be sorted in ascending order, but elements {} and {} are not in ascending order", render(a), render(b)),
                ));
            }
        }
    }
    if let (Some(d), Some(first), Some(last)) = (&default, boundaries.first(), boundaries.last()) {
        let inside =
            compare_bson(d, first) != Ordering::Less && compare_bson(d, last) == Ordering::Less;
        if inside && same_type(d, first) {
            return Err(MongoError::location(
                40199,
                "The $bucket 'default' field must be less than the lowest boundary or greater than or equal to the highest boundary.",
            ));
        }
    }
    let output = output.unwrap_or_else(count_output);
    Ok(vec![Box::new(BucketStage {
        group_by,
        boundaries,
        default,
        output,
    })])
}

impl BucketStage {
    /// Bucket index for a value; `boundaries.len() - 1` is the default bucket.
    /// Strings compare under the pipeline's collation `c`.
    fn bucket_of(&self, v: &Bson, c: Option<&Collation>) -> Option<usize> {
        let first = self.boundaries.first()?;
        let last = self.boundaries.last()?;
        if !same_type(v, first)
            || compare_bson_in(v, first, c) == Ordering::Less
            || compare_bson_in(v, last, c) != Ordering::Less
        {
            return None;
        }
        // The last boundary not above v.
        let pos = self
            .boundaries
            .partition_point(|b| compare_bson_in(b, v, c) != Ordering::Greater);
        pos.checked_sub(1)
    }

    fn bucket_all(&self, input: DocStream, cx: &RunCtx) -> MongoResult<Vec<Document>> {
        let vars = cx.vars();
        let n = self.boundaries.len().saturating_sub(1);
        // Slot n holds the default bucket.
        let mut states: Vec<Option<Vec<AccState>>> = vec![None; n + 1];
        for r in input {
            let doc = r?;
            let v = self.group_by.eval(&doc, &vars)?.unwrap_or(Bson::Null);
            let slot = match self.bucket_of(&v, vars.collation()) {
                Some(i) => i,
                None if self.default.is_some() => n,
                None => {
                    return Err(MongoError::location(
                        40066,
                        "$switch could not find a matching branch for an input, and no default was specified.",
                    ))
                }
            };
            let st = states
                .get_mut(slot)
                .ok_or_else(|| MongoError::internal("bucket slot"))?;
            let st = st.get_or_insert_with(|| new_states(&self.output));
            accumulate_all(&self.output, st, &doc, &vars)?;
        }
        let mut out = Vec::new();
        for (i, st) in states.into_iter().enumerate() {
            let Some(st) = st else { continue };
            let id = if i == n {
                self.default.clone().unwrap_or(Bson::Null)
            } else {
                self.boundaries.get(i).cloned().unwrap_or(Bson::Null)
            };
            out.push(finish_all(id, &self.output, st));
        }
        Ok(out)
    }
}

impl Stage for BucketStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        crate::agg::blocking(input, move |inp| self.bucket_all(inp, &cx))
    }
}
