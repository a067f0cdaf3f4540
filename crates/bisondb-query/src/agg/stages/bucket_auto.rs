//! `$bucketAuto`: sorts documents by `groupBy` and splits them into up to
//! `buckets` groups of about equal size, never splitting equal values; each
//! bucket's `_id` is `{min, max}` (max is the next bucket's min). With a
//! `granularity`, boundaries are rounded to a preferred number series
//! (`granularity.rs`): a bucket's max is its last value rounded up, and it
//! absorbs the following values below that max.

mod granularity;
use granularity::Granularity;

use super::bucket::{count_output, is_group_by, parse_output};
use super::whole_number;

use crate::agg::accumulators::{accumulate_all, finish_all, new_states, Accumulator};
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::compare::compare_bson_in;
use crate::expr::Expr;
use crate::value::{render, type_name};
use bisondb_error::{MongoError, MongoResult};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

/// A document with its `groupBy` value.
type Row = (Bson, Document);

#[derive(Debug)]
pub(crate) struct BucketAutoStage {
    group_by: Expr,
    buckets: usize,
    output: Vec<(String, Accumulator)>,
    granularity: Option<Granularity>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 40240, |v| {
        format!(
            "The argument to $bucketAuto must be an object, but found type: {}",
            type_name(v)
        )
    })?;
    let (mut group_by, mut buckets, mut output) = (None, None, None);
    let mut granularity = None;
    for (k, v) in spec {
        match k.as_str() {
            "groupBy" => {
                if !is_group_by(v) {
                    return Err(MongoError::location(
                        40239,
                        format!("The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object, but found: {}", render(v)),
                    ));
                }
                group_by = Some(Expr::parse(v)?);
            }
            "buckets" => {
                let n = whole_number(v).ok_or_else(|| {
                    MongoError::location(
                        40241,
                        format!("The $bucketAuto 'buckets' field must be a numeric value, but found type: {}", type_name(v)),
                    )
                })?;
                if n <= 0 || n > i64::from(i32::MAX) {
                    return Err(MongoError::location(
                        40243,
                        format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {n}"),
                    ));
                }
                buckets = Some(usize::try_from(n).unwrap_or(1));
            }
            "output" => output = Some(parse_output(v, "$bucketAuto", 40244)?),
            "granularity" => granularity = Some(Granularity::parse(v)?),
            other => {
                return Err(MongoError::location(
                    40245,
                    format!("Unrecognized option to $bucketAuto: {other}."),
                ))
            }
        }
    }
    let (Some(group_by), Some(buckets)) = (group_by, buckets) else {
        return Err(MongoError::location(
            40246,
            "$bucketAuto requires 'groupBy' and 'buckets' to be specified",
        ));
    };
    let output = output.unwrap_or_else(count_output);
    Ok(vec![Box::new(BucketAutoStage {
        group_by,
        buckets,
        output,
        granularity,
    })])
}

impl BucketAutoStage {
    fn run_all(&self, input: DocStream, cx: &RunCtx) -> MongoResult<Vec<Document>> {
        let vars = cx.vars();
        let mut rows: Vec<(Bson, Document)> = Vec::new();
        // The whole input is held: counted against the operation's memory
        // (`bisondb_error::memory`, 146 when it refuses; this stage does
        // not spill).
        let mut charge = bisondb_error::memory::Charge::new();
        for r in input {
            let d = r?;
            let v = self.group_by.eval(&d, &vars)?.unwrap_or(Bson::Null);
            charge.grow(
                crate::agg::spill::approx_doc_size(&d) + crate::agg::spill::approx_size(&v),
            )?;
            if self.granularity.is_some() {
                granularity::check_value(&v)?;
            }
            rows.push((v, d));
        }
        let c = vars.collation();
        rows.sort_by(|a, b| compare_bson_in(&a.0, &b.0, c));
        let total = rows.len();
        let approx = ((total as f64) / (self.buckets as f64)).round().max(1.0) as usize;
        // Each group with its (min, max) boundaries.
        let mut groups: Vec<(Bson, Bson, Vec<Row>)> = Vec::new();
        let mut it = rows.into_iter().peekable();
        while let Some(first) = it.next() {
            let last_bucket = groups.len() + 1 == self.buckets;
            let min = match (&self.granularity, groups.last()) {
                (Some(_), Some((_, prev_max, _))) => prev_max.clone(),
                (Some(g), None) => g.round_down(&first.0),
                (None, _) => first.0.clone(),
            };
            let mut bucket = vec![first];
            while let Some(row) = it.next_if(|_| last_bucket || bucket.len() < approx) {
                bucket.push(row);
            }
            let lastv = bucket.last().map(|r| r.0.clone()).unwrap_or(Bson::Null);
            let max = match &self.granularity {
                Some(g) => {
                    // Values below the rounded-up boundary belong here too.
                    let boundary = g.round_up(&lastv);
                    while let Some(row) =
                        it.next_if(|(v, _)| compare_bson_in(&boundary, v, c) == Ordering::Greater)
                    {
                        bucket.push(row);
                    }
                    // A first bucket of zeros rounds up to zero: its max is
                    // then the next value rounded down, so it stays exclusive.
                    match it.peek() {
                        Some((next, _)) if granularity_is_zero(&boundary) => g.round_down(next),
                        _ => boundary,
                    }
                }
                None => {
                    // Equal values stay in one bucket.
                    while let Some(row) =
                        it.next_if(|(v, _)| compare_bson_in(v, &lastv, c) == Ordering::Equal)
                    {
                        bucket.push(row);
                    }
                    match it.peek() {
                        Some((next, _)) => next.clone(),
                        None => bucket.last().map(|r| r.0.clone()).unwrap_or(Bson::Null),
                    }
                }
            };
            groups.push((min, max, bucket));
        }
        let mut out = Vec::with_capacity(groups.len());
        for (min, max, g) in groups {
            let mut states = new_states(&self.output);
            for (_, d) in &g {
                accumulate_all(&self.output, &mut states, d, &vars)?;
            }
            let id = Bson::Document(doc! {"min": min, "max": max});
            out.push(finish_all(id, &self.output, states));
        }
        Ok(out)
    }
}

fn granularity_is_zero(v: &Bson) -> bool {
    match v {
        Bson::Int32(i) => *i == 0,
        Bson::Int64(i) => *i == 0,
        Bson::Double(d) => *d == 0.0,
        _ => false,
    }
}

impl Stage for BucketAutoStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        crate::agg::blocking(input, move |inp| self.run_all(inp, &cx))
    }
}
