//! `$bucketAuto`: sorts documents by `groupBy` and splits them into up to
//! `buckets` groups of about equal size, never splitting equal values; each
//! bucket's `_id` is `{min, max}` (max is the next bucket's min).

use crate::agg::accumulators::{AccOp, Accumulator};
use crate::agg::{DocStream, RunCtx, Stage};
use crate::compare::compare_bson_in;
use crate::expr::value::{render, type_name};
use crate::expr::Expr;
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document};
use std::cmp::Ordering;

#[derive(Debug)]
pub(crate) struct BucketAutoStage {
    group_by: Expr,
    buckets: usize,
    output: Vec<(String, Accumulator)>,
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let Bson::Document(spec) = arg else {
        return Err(MongoError::location(
            40240,
            format!(
                "The argument to $bucketAuto must be an object, but found type: {}",
                type_name(arg)
            ),
        ));
    };
    let (mut group_by, mut buckets, mut output) = (None, None, None);
    for (k, v) in spec {
        match k.as_str() {
            "groupBy" => {
                let ok = matches!(v, Bson::String(s) if s.starts_with('$'))
                    || matches!(v, Bson::Document(d) if d.keys().next().is_some_and(|f| f.starts_with('$')));
                if !ok {
                    return Err(MongoError::location(
                        40239,
                        format!("The $bucketAuto 'groupBy' field must be defined as a $-prefixed path or an expression object, but found: {}", render(v)),
                    ));
                }
                group_by = Some(Expr::parse(v)?);
            }
            "buckets" => {
                let n = match v {
                    Bson::Int32(i) => i64::from(*i),
                    Bson::Int64(i) => *i,
                    Bson::Double(d) if d.fract() == 0.0 => *d as i64,
                    other => {
                        return Err(MongoError::location(
                            40241,
                            format!("The $bucketAuto 'buckets' field must be a numeric value, but found type: {}", type_name(other)),
                        ))
                    }
                };
                if n <= 0 || n > i64::from(i32::MAX) {
                    return Err(MongoError::location(
                        40243,
                        format!("The $bucketAuto 'buckets' field must be greater than 0, but found: {n}"),
                    ));
                }
                buckets = Some(usize::try_from(n).unwrap_or(1));
            }
            "output" => match v {
                Bson::Document(d) => {
                    let mut out = Vec::with_capacity(d.len());
                    for (name, acc) in d {
                        out.push((name.clone(), Accumulator::parse(name, acc)?));
                    }
                    output = Some(out);
                }
                other => {
                    return Err(MongoError::location(
                        40244,
                        format!(
                            "The $bucketAuto 'output' field must be an object, but found type: {}",
                            type_name(other)
                        ),
                    ))
                }
            },
            "granularity" => {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    "$bucketAuto 'granularity' is not supported by BisonDB yet",
                ))
            }
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
    let output = output.unwrap_or_else(|| {
        vec![(
            "count".to_string(),
            Accumulator::new(AccOp::Sum, Expr::Literal(Bson::Int32(1))),
        )]
    });
    Ok(vec![Box::new(BucketAutoStage {
        group_by,
        buckets,
        output,
    })])
}

impl BucketAutoStage {
    fn run_all(&self, input: DocStream, cx: &RunCtx) -> MongoResult<Vec<Document>> {
        let vars = cx.vars();
        let mut rows: Vec<(Bson, Document)> = Vec::new();
        for r in input {
            let d = r?;
            let v = self.group_by.eval(&d, &vars)?.unwrap_or(Bson::Null);
            rows.push((v, d));
        }
        let c = vars.collation();
        rows.sort_by(|a, b| compare_bson_in(&a.0, &b.0, c));
        let total = rows.len();
        let approx = ((total as f64) / (self.buckets as f64)).round().max(1.0) as usize;
        let mut groups: Vec<Vec<(Bson, Document)>> = Vec::new();
        let mut it = rows.into_iter().peekable();
        while it.peek().is_some() {
            let last_bucket = groups.len() + 1 == self.buckets;
            let mut bucket: Vec<(Bson, Document)> = Vec::new();
            while let Some(row) = it.next_if(|_| last_bucket || bucket.len() < approx) {
                bucket.push(row);
            }
            // Equal values stay in one bucket.
            if let Some((lastv, _)) = bucket.last() {
                let lastv = lastv.clone();
                while let Some(row) =
                    it.next_if(|(v, _)| compare_bson_in(v, &lastv, c) == Ordering::Equal)
                {
                    bucket.push(row);
                }
            }
            groups.push(bucket);
        }
        let mins: Vec<Bson> = groups
            .iter()
            .map(|g| g.first().map(|r| r.0.clone()).unwrap_or(Bson::Null))
            .collect();
        let mut out = Vec::with_capacity(groups.len());
        for (i, g) in groups.into_iter().enumerate() {
            let min = mins.get(i).cloned().unwrap_or(Bson::Null);
            let max = match mins.get(i + 1) {
                Some(next) => next.clone(),
                None => g.last().map(|r| r.0.clone()).unwrap_or(Bson::Null),
            };
            let mut states: Vec<_> = self.output.iter().map(|(_, a)| a.new_state()).collect();
            for (_, d) in &g {
                for ((_, acc), st) in self.output.iter().zip(states.iter_mut()) {
                    acc.accumulate(st, d, &vars)?;
                }
            }
            let mut res = doc! {"_id": {"min": min, "max": max}};
            for ((name, acc), st) in self.output.iter().zip(states) {
                res.insert(name.clone(), st.finish(acc.op));
            }
            out.push(res);
        }
        Ok(out)
    }
}

impl Stage for BucketAutoStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        crate::agg::blocking(input, move |inp| self.run_all(inp, &cx))
    }
}
