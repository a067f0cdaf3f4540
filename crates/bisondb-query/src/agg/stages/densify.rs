//! `$densify`: inserts documents so that `field` takes every `step`-spaced
//! value over a range (`full`, per `partition`, or explicit bounds), per
//! partition. Numeric fields, and dates by any unit: fixed-length units
//! (millisecond to week) add milliseconds, calendar units (month, quarter,
//! year) add months as `$dateAdd` does in UTC (the day clamped to the month's
//! length, each step from the previous value).

use super::{missing_field, number_or_date, partition_fields_arg, unknown_field_or_type};
use crate::agg::{spec_doc, DocStream, RunCtx, Stage};
use crate::collation::Collation;
use crate::key::{key_of_in, Partitions};
use crate::path::edit::{set_path, split};
use crate::value::{type_name, Num};
use bisondb_error::{MongoError, MongoResult};
use bson::{Bson, DateTime, Document};

/// mongod's cap on documents one `$densify` may generate.
const MAX_GENERATED: usize = 500_000;

#[derive(Debug, Clone, PartialEq)]
enum Bounds {
    Full,
    Partition,
    Explicit(f64, f64),
}

#[derive(Debug)]
pub(crate) struct DensifyStage {
    field: String,
    partition_fields: Vec<String>,
    step: f64,
    /// The unit of a date range.
    unit: Option<Unit>,
    bounds: Bounds,
}

/// A date range's unit: a fixed number of milliseconds, or calendar months.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Unit {
    Millis(f64),
    Months(i64),
}

fn unit_of(u: &str) -> MongoResult<Unit> {
    Ok(match u {
        "millisecond" => Unit::Millis(1.0),
        "second" => Unit::Millis(1000.0),
        "minute" => Unit::Millis(60_000.0),
        "hour" => Unit::Millis(3_600_000.0),
        "day" => Unit::Millis(86_400_000.0),
        "week" => Unit::Millis(604_800_000.0),
        "month" => Unit::Months(1),
        "quarter" => Unit::Months(3),
        "year" => Unit::Months(12),
        other => {
            return Err(MongoError::bad_value(format!(
                "unknown time unit value: {other}"
            )))
        }
    })
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let spec = spec_doc(arg, 5733400, |v| {
        format!(
            "$densify specification must be an object, found {}",
            type_name(v)
        )
    })?;
    let (mut field, mut partition_fields, mut range) = (None, Vec::new(), None);
    for (k, v) in spec {
        match (k.as_str(), v) {
            ("field", Bson::String(s)) if !s.is_empty() && !s.starts_with('$') => {
                field = Some(s.clone())
            }
            ("partitionByFields", Bson::Array(a)) => {
                partition_fields.extend(partition_fields_arg("$densify", a)?)
            }
            ("range", Bson::Document(d)) => range = Some(d.clone()),
            (other, v) => return Err(unknown_field_or_type("$densify", other, v)),
        }
    }
    let field = field.ok_or_else(|| missing_field("$densify", "field"))?;
    let range = range.ok_or_else(|| missing_field("$densify", "range"))?;
    let step = range
        .get("step")
        .and_then(|s| Num::from_bson(s).map(Num::as_f64))
        .ok_or_else(|| missing_field("$densify.range", "step"))?;
    if step <= 0.0 || !step.is_finite() {
        return Err(MongoError::location(
            5733401,
            "the step parameter in a range statement must be a strictly positive numeric value",
        ));
    }
    let unit = match range.get("unit") {
        None => None,
        Some(Bson::String(u)) => Some(unit_of(u)?),
        Some(other) => {
            return Err(MongoError::type_mismatch(format!(
                "$densify unit must be a string, found {}",
                type_name(other)
            )))
        }
    };
    if unit.is_some() && step.fract() != 0.0 {
        return Err(MongoError::location(5733402, "The step parameter in a range satement must be a whole number when densifying a date range"));
    }
    let bounds = match range.get("bounds") {
        Some(Bson::String(s)) if s == "full" => Bounds::Full,
        Some(Bson::String(s)) if s == "partition" => Bounds::Partition,
        Some(Bson::Array(a)) if a.len() == 2 => {
            let (Some(lo), Some(hi)) = (a.first().and_then(number_or_date), a.get(1).and_then(number_or_date)) else {
                return Err(MongoError::location(5733403, "a bounding array in a range statement must contain two numeric or date values"));
            };
            if lo > hi {
                return Err(MongoError::location(5733402, "the lower bound of a range must be less than or equal to the upper bound"));
            }
            Bounds::Explicit(lo, hi)
        }
        _ => return Err(MongoError::location(5946802, "the bounds in a range statement must be the string 'full', 'partition', or an ascending array of two numbers or two dates")),
    };
    Ok(vec![Box::new(DensifyStage {
        field,
        partition_fields,
        step,
        unit,
        bounds,
    })])
}

impl DensifyStage {
    fn make_value(&self, x: f64, like_date: bool) -> Bson {
        if like_date {
            Bson::DateTime(DateTime::from_millis(x as i64))
        } else if x.fract() == 0.0 && x.abs() < 2f64.powi(31) {
            Bson::Int32(x as i32)
        } else if x.fract() == 0.0 && x.abs() < 9.0e15 {
            Bson::Int64(x as i64)
        } else {
            Bson::Double(x)
        }
    }

    /// The `k`th value of a range from `start`, `prev` being the one
    /// before it; `None` once a date leaves the representable range.
    fn next(&self, start: f64, prev: f64, k: f64) -> Option<f64> {
        match self.unit {
            None => Some(start + k * self.step),
            Some(Unit::Millis(ms)) => Some(start + k * self.step * ms),
            Some(Unit::Months(months)) => {
                // The step is a whole number (checked at parse time).
                let n = (self.step as i64).checked_mul(months)?;
                crate::expr::add_months(prev as i64, n).map(|ms| ms as f64)
            }
        }
    }

    fn run_all(&self, input: DocStream, c: Option<&Collation>) -> MongoResult<Vec<Document>> {
        let docs: Vec<Document> = input.collect::<MongoResult<_>>()?;
        let like_date = self.unit.is_some();
        let value_of =
            |d: &Document| crate::path::get_path_bson(d, &self.field).and_then(number_or_date);
        // Partition, remembering each partition's field values.
        let mut parts: Partitions<Document, Document> = Partitions::new();
        let mut passthrough = Vec::new();
        let (mut gmin, mut gmax) = (f64::INFINITY, f64::NEG_INFINITY);
        for d in docs {
            let Some(x) = value_of(&d) else {
                passthrough.push(d);
                continue;
            };
            gmin = gmin.min(x);
            gmax = gmax.max(x);
            let mut key = Document::new();
            for f in &self.partition_fields {
                if let Some(v) = crate::path::get_path_bson(&d, f) {
                    key.insert(f.clone(), v.clone());
                }
            }
            parts.push(key_of_in(Some(&Bson::Document(key.clone())), c), key, d);
        }
        let mut out = passthrough;
        let mut generated = 0usize;
        for (key, mut part) in parts.into_groups() {
            part.sort_by(|a, b| match (value_of(a), value_of(b)) {
                (Some(x), Some(y)) => x.total_cmp(&y),
                _ => std::cmp::Ordering::Equal,
            });
            let (pmin, pmax) = part
                .iter()
                .filter_map(value_of)
                .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), x| {
                    (lo.min(x), hi.max(x))
                });
            // Explicit bounds are half-open; full/partition include the max.
            let (start, end, inclusive) = match self.bounds {
                Bounds::Full => (gmin, gmax, true),
                Bounds::Partition => (pmin, pmax, true),
                Bounds::Explicit(lo, hi) => (lo, hi, false),
            };
            let mut existing = part.into_iter().peekable();
            let mut k: f64 = 0.0;
            let mut x = start;
            loop {
                if k > 0.0 {
                    match self.next(start, x, k) {
                        Some(next) => x = next,
                        None => break,
                    }
                }
                if x > end || (!inclusive && x >= end) || !x.is_finite() {
                    break;
                }
                // Emit existing documents up to and including x.
                let mut present = false;
                while let Some(d) = existing.next_if(|d| value_of(d).is_some_and(|v| v <= x)) {
                    if value_of(&d).is_some_and(|v| v == x) {
                        present = true;
                    }
                    out.push(d);
                }
                if !present {
                    generated += 1;
                    if generated > MAX_GENERATED {
                        return Err(MongoError::location(
                            5897900,
                            format!("Generated {generated} documents in $densify, which is over the limit of {MAX_GENERATED}. Increase the 'internalQueryMaxAllowedDensifyDocs' parameter to allow more generated documents"),
                        ));
                    }
                    let mut g = key.clone();
                    set_path(&mut g, &split(&self.field), self.make_value(x, like_date))?;
                    out.push(g);
                }
                k += 1.0;
            }
            out.extend(existing);
        }
        Ok(out)
    }
}

impl Stage for DensifyStage {
    fn run(self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        // Partitions key strings by the pipeline's collation.
        let collation = cx.collation.clone();
        crate::agg::blocking(input, move |inp| self.run_all(inp, collation.as_deref()))
    }
}
