//! `$setWindowFields`: per-partition window computations. Supported window
//! functions: the `$group` accumulators over `documents` or `range` windows
//! (default: the whole partition), `$rank`, `$denseRank`, `$documentNumber`,
//! `$shift` and `$locf`. Others fail with NotImplemented.

use super::{missing_field, number_or_date, unknown_field};
use crate::agg::accumulators::{AccOp, Accumulator};
use crate::agg::{DocStream, RunCtx, Stage};
use crate::compare::compare_bson_in;
use crate::expr::{Expr, Vars};
use crate::key::{key_of_in, Partitions};
use crate::path::edit::{set_path, split};
use crate::sort::SortSpec;
use crate::value::{nullish, type_name, Num};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};

/// One end of a window.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Bound {
    Unbounded,
    Current,
    /// Relative offset: documents for `documents` windows, sort-key
    /// distance for `range` windows.
    Offset(f64),
}

#[derive(Debug, Clone, PartialEq)]
enum Window {
    Documents(Bound, Bound),
    /// Range over the (single) sort field; `unit_ms` set for date ranges.
    Range(Bound, Bound, Option<f64>),
}

#[derive(Debug, Clone)]
enum Func {
    Acc(Accumulator, Window),
    Rank,
    DenseRank,
    DocumentNumber,
    Shift {
        output: Expr,
        by: i64,
        default: Bson,
    },
    Locf(Expr),
}

#[derive(Debug)]
pub(crate) struct SetWindowFieldsStage {
    partition_by: Option<Expr>,
    sort: Option<SortSpec>,
    sort_field: Option<String>,
    outputs: Vec<(Vec<String>, Func)>,
}

const NOT_IMPLEMENTED: &[&str] = &[
    "$covariancePop",
    "$covarianceSamp",
    "$derivative",
    "$expMovingAvg",
    "$integral",
    "$linearFill",
];

fn bound(v: &Bson) -> MongoResult<Bound> {
    match v {
        Bson::String(s) if s == "unbounded" => Ok(Bound::Unbounded),
        Bson::String(s) if s == "current" => Ok(Bound::Current),
        other => match Num::from_bson(other) {
            Some(n) => Ok(Bound::Offset(n.as_f64())),
            None => Err(MongoError::failed_to_parse(format!(
                "Window bounds must be 'unbounded', 'current', or a number, found {}",
                type_name(other)
            ))),
        },
    }
}

fn unit_ms(u: &str) -> Option<f64> {
    Some(match u {
        "millisecond" => 1.0,
        "second" => 1000.0,
        "minute" => 60_000.0,
        "hour" => 3_600_000.0,
        "day" => 86_400_000.0,
        "week" => 604_800_000.0,
        _ => return None,
    })
}

fn parse_window(v: &Bson) -> MongoResult<Window> {
    let Bson::Document(d) = v else {
        return Err(MongoError::failed_to_parse(
            "'window' field must be an object",
        ));
    };
    let pair = |x: &Bson| -> MongoResult<(Bound, Bound)> {
        match x {
            Bson::Array(a) if a.len() == 2 => {
                let lo = bound(a.first().unwrap_or(&Bson::Null))?;
                let hi = bound(a.get(1).unwrap_or(&Bson::Null))?;
                Ok((lo, hi))
            }
            _ => Err(MongoError::failed_to_parse(
                "Window bounds must be a 2-element array",
            )),
        }
    };
    let unit = match d.get("unit") {
        None => None,
        Some(Bson::String(u)) => Some(unit_ms(u).ok_or_else(|| {
            MongoError::new(
                ErrorCode::NotImplemented,
                format!("window unit '{u}' is not supported by BisonDB yet"),
            )
        })?),
        Some(other) => {
            return Err(MongoError::failed_to_parse(format!(
                "'unit' must be a string, found {}",
                type_name(other)
            )))
        }
    };
    for k in d.keys() {
        if !matches!(k.as_str(), "documents" | "range" | "unit") {
            return Err(MongoError::failed_to_parse(format!(
                "'window' has an invalid parameter: {k}"
            )));
        }
    }
    match (d.get("documents"), d.get("range")) {
        (Some(x), None) if unit.is_none() => {
            let (lo, hi) = pair(x)?;
            Ok(Window::Documents(lo, hi))
        }
        (None, Some(x)) => {
            let (lo, hi) = pair(x)?;
            Ok(Window::Range(lo, hi, unit))
        }
        _ => Err(MongoError::failed_to_parse(
            "'window' field can only specify one of 'documents' or 'range'",
        )),
    }
}

fn parse_func(field: &str, spec: &Bson) -> MongoResult<Func> {
    let Bson::Document(d) = spec else {
        return Err(MongoError::failed_to_parse(format!(
            "The field '{field}' must be an object"
        )));
    };
    let window = match d.get("window") {
        Some(w) => Some(parse_window(w)?),
        None => None,
    };
    let mut funcs = d.iter().filter(|(k, _)| k.as_str() != "window");
    let Some((name, arg)) = funcs.next() else {
        return Err(MongoError::failed_to_parse(format!(
            "Expected a $-prefixed window function, found no function for '{field}'"
        )));
    };
    if funcs.next().is_some() {
        return Err(MongoError::failed_to_parse(format!(
            "Window function for '{field}' must be a single $-prefixed function"
        )));
    }
    let no_window = |f: Func| -> MongoResult<Func> {
        if window.is_some() {
            return Err(MongoError::failed_to_parse(format!(
                "{name} does not accept a 'window' field"
            )));
        }
        Ok(f)
    };
    match name.as_str() {
        "$rank" => no_window(Func::Rank),
        "$denseRank" => no_window(Func::DenseRank),
        "$documentNumber" => no_window(Func::DocumentNumber),
        "$locf" => no_window(Func::Locf(Expr::parse(arg)?)),
        "$shift" => {
            let Bson::Document(a) = arg else {
                return Err(MongoError::failed_to_parse(
                    "Argument to $shift must be an object",
                ));
            };
            let output = Expr::parse(a.get("output").ok_or_else(|| {
                MongoError::failed_to_parse("$shift requires an 'output' expression")
            })?)?;
            let by = match a.get("by") {
                Some(Bson::Int32(i)) => i64::from(*i),
                Some(Bson::Int64(i)) => *i,
                Some(Bson::Double(x)) if x.fract() == 0.0 => *x as i64,
                _ => {
                    return Err(MongoError::failed_to_parse(
                        "'$shift:by' field must be an integer",
                    ))
                }
            };
            let default = a.get("default").cloned().unwrap_or(Bson::Null);
            no_window(Func::Shift {
                output,
                by,
                default,
            })
        }
        n if NOT_IMPLEMENTED.contains(&n) => Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!("Window function {n} is not supported by BisonDB yet"),
        )),
        _ => {
            let mut one = Document::new();
            one.insert(name.clone(), arg.clone());
            let acc = Accumulator::parse(field, &Bson::Document(one)).map_err(|e| {
                if e.code.code() == 15952 {
                    MongoError::failed_to_parse(format!("Unrecognized window function, {name}"))
                } else {
                    e
                }
            })?;
            Ok(Func::Acc(
                acc,
                window.unwrap_or(Window::Documents(Bound::Unbounded, Bound::Unbounded)),
            ))
        }
    }
}

pub(crate) fn parse(arg: &Bson) -> MongoResult<Vec<Box<dyn Stage>>> {
    let Bson::Document(spec) = arg else {
        return Err(MongoError::failed_to_parse(
            "the $setWindowFields stage specification must be an object",
        ));
    };
    let (mut partition_by, mut sort, mut sort_field, mut outputs) = (None, None, None, None);
    for (k, v) in spec {
        match k.as_str() {
            "partitionBy" => partition_by = Some(Expr::parse(v)?),
            "sortBy" => {
                let Bson::Document(d) = v else {
                    return Err(MongoError::type_mismatch(format!(
                        "BSON field '$setWindowFields.sortBy' is the wrong type '{}'",
                        type_name(v)
                    )));
                };
                sort = Some(SortSpec::parse(d)?);
                if d.len() == 1 {
                    sort_field = d.keys().next().cloned();
                }
            }
            "output" => {
                let Bson::Document(d) = v else {
                    return Err(MongoError::type_mismatch(format!(
                        "BSON field '$setWindowFields.output' is the wrong type '{}'",
                        type_name(v)
                    )));
                };
                let mut out = Vec::with_capacity(d.len());
                for (field, f) in d {
                    out.push((split(field), parse_func(field, f)?));
                }
                outputs = Some(out);
            }
            other => return Err(unknown_field("$setWindowFields", other)),
        }
    }
    let outputs = outputs.ok_or_else(|| missing_field("$setWindowFields", "output"))?;
    for (_, f) in &outputs {
        let needs_one_sort = matches!(
            f,
            Func::Rank | Func::DenseRank | Func::Acc(_, Window::Range(..))
        );
        if needs_one_sort && sort_field.is_none() {
            return Err(MongoError::location(
                5371602,
                "Rank style window functions and range windows require a sortBy with exactly one field",
            ));
        }
        if matches!(f, Func::DocumentNumber | Func::Shift { .. } | Func::Locf(_)) && sort.is_none()
        {
            return Err(MongoError::location(
                5371603,
                "This window function requires a sortBy",
            ));
        }
    }
    Ok(vec![Box::new(SetWindowFieldsStage {
        partition_by,
        sort,
        sort_field,
        outputs,
    })])
}

impl SetWindowFieldsStage {
    fn run_all(&self, input: DocStream, cx: &RunCtx) -> MongoResult<Vec<Document>> {
        let vars = cx.vars();
        // Partition (first-seen order, then sorted by partition value).
        let mut partitions = Partitions::new();
        // The whole input is held: counted against the blocking-stage limit,
        // past which it fails with 292 (BisonDB does not spill this stage).
        let limit = cx.memory.group_bytes;
        let mut bytes = 0usize;
        // And against the operation's memory (146 when that refuses).
        let mut charge = bisondb_error::memory::Charge::new();
        for r in input {
            let d = r?;
            let size = crate::agg::spill::approx_doc_size(&d);
            charge.grow(size)?;
            bytes = bytes.saturating_add(size);
            if bytes > limit {
                return Err(crate::agg::spill::stage_limit_error(
                    "$setWindowFields",
                    limit,
                ));
            }
            let pv = match &self.partition_by {
                Some(e) => e.eval(&d, &vars)?,
                None => None,
            };
            let key = key_of_in(pv.as_ref(), vars.collation());
            partitions.push(key, pv.unwrap_or(Bson::Null), d);
        }
        let mut parts = partitions.into_groups();
        parts.sort_by(|a, b| compare_bson_in(&a.0, &b.0, vars.collation()));
        let mut out = Vec::new();
        for (_, docs) in parts {
            out.extend(self.partition(docs, &vars)?);
        }
        Ok(out)
    }

    fn partition(&self, docs: Vec<Document>, vars: &Vars) -> MongoResult<Vec<Document>> {
        let mut keyed: Vec<(Vec<Bson>, Document)> = Vec::with_capacity(docs.len());
        for d in docs {
            let key = match &self.sort {
                Some(s) => {
                    let raw = RawDocumentBuf::try_from(&d).map_err(|e| {
                        MongoError::internal(format!("document cannot be encoded for sorting: {e}"))
                    })?;
                    s.sort_key(&raw)
                }
                None => Vec::new(),
            };
            keyed.push((key, d));
        }
        if let Some(s) = &self.sort {
            keyed.sort_by(|a, b| s.compare_keys(&a.0, &b.0));
        }
        let n = keyed.len();
        let mut results: Vec<Vec<Bson>> = vec![Vec::with_capacity(self.outputs.len()); n];
        for (_, func) in &self.outputs {
            let col = self.column(func, &keyed, vars)?;
            for (r, v) in results.iter_mut().zip(col) {
                r.push(v);
            }
        }
        let mut out = Vec::with_capacity(n);
        for ((_, mut d), vals) in keyed.into_iter().zip(results) {
            for ((path, _), v) in self.outputs.iter().zip(vals) {
                set_path(&mut d, path, v)?;
            }
            out.push(d);
        }
        Ok(out)
    }

    fn sort_value(&self, d: &Document) -> Option<f64> {
        let f = self.sort_field.as_ref()?;
        number_or_date(crate::path::get_path_bson(d, f)?)
    }

    /// Computes one output field for every document of a sorted partition.
    fn column(
        &self,
        func: &Func,
        keyed: &[(Vec<Bson>, Document)],
        vars: &Vars,
    ) -> MongoResult<Vec<Bson>> {
        let n = keyed.len();
        let same = |a: usize, b: usize| match (keyed.get(a), keyed.get(b), &self.sort) {
            (Some(x), Some(y), Some(s)) => s.compare_keys(&x.0, &y.0) == std::cmp::Ordering::Equal,
            _ => false,
        };
        let mut out = Vec::with_capacity(n);
        match func {
            Func::DocumentNumber => {
                out.extend((1..=n).map(|i| Bson::Int32(i32::try_from(i).unwrap_or(i32::MAX))))
            }
            Func::Rank | Func::DenseRank => {
                let (mut rank, mut dense) = (0usize, 0usize);
                for i in 0..n {
                    if i == 0 || !same(i - 1, i) {
                        rank = i + 1;
                        dense += 1;
                    }
                    let v = if matches!(func, Func::Rank) {
                        rank
                    } else {
                        dense
                    };
                    out.push(Bson::Int32(i32::try_from(v).unwrap_or(i32::MAX)));
                }
            }
            Func::Shift {
                output,
                by,
                default,
            } => {
                for i in 0..n {
                    let j = i64::try_from(i).unwrap_or(i64::MAX).saturating_add(*by);
                    let v = match usize::try_from(j).ok().and_then(|j| keyed.get(j)) {
                        Some((_, d)) => output.eval(d, vars)?.unwrap_or(Bson::Null),
                        None => default.clone(),
                    };
                    out.push(v);
                }
            }
            Func::Locf(e) => {
                let mut last = Bson::Null;
                for (_, d) in keyed {
                    let v = e.eval(d, vars)?;
                    if !nullish(v.as_ref()) {
                        last = v.unwrap_or(Bson::Null);
                    }
                    out.push(last.clone());
                }
            }
            Func::Acc(acc, window) => {
                let values: Vec<_> = keyed
                    .iter()
                    .map(|(_, d)| acc.arg.eval(d, vars))
                    .collect::<MongoResult<_>>()?;
                let sort_vals: Vec<Option<f64>> =
                    keyed.iter().map(|(_, d)| self.sort_value(d)).collect();
                let running = matches!(window, Window::Documents(Bound::Unbounded, Bound::Current))
                    && !matches!(
                        acc.op,
                        AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN
                    );
                if running {
                    let mut st = acc.new_state();
                    for v in &values {
                        st.add(acc.op, v.clone())?;
                        out.push(st.clone().finish(acc.op));
                    }
                    return Ok(out);
                }
                for i in 0..n {
                    let (lo, hi) = window_range(window, i, n, &sort_vals)?;
                    let mut st = acc.new_state();
                    for j in lo..hi {
                        if let Some(v) = values.get(j) {
                            if let Some((_, d)) = keyed.get(j) {
                                if matches!(
                                    acc.op,
                                    AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN
                                ) {
                                    acc.accumulate(&mut st, d, vars)?;
                                    continue;
                                }
                            }
                            st.add(acc.op, v.clone())?;
                        }
                    }
                    out.push(st.finish(acc.op));
                }
            }
        }
        Ok(out)
    }
}

/// Half-open index range of the window around document `i`.
fn window_range(
    w: &Window,
    i: usize,
    n: usize,
    sort_vals: &[Option<f64>],
) -> MongoResult<(usize, usize)> {
    match w {
        Window::Documents(lo, hi) => {
            let at = |b: &Bound, is_hi: bool| -> i64 {
                match b {
                    Bound::Unbounded => {
                        if is_hi {
                            i64::try_from(n).unwrap_or(i64::MAX) - 1
                        } else {
                            0
                        }
                    }
                    Bound::Current => i64::try_from(i).unwrap_or(i64::MAX),
                    Bound::Offset(o) => i64::try_from(i)
                        .unwrap_or(i64::MAX)
                        .saturating_add(*o as i64),
                }
            };
            let (a, b) = (
                at(lo, false).max(0),
                at(hi, true).min(i64::try_from(n).unwrap_or(i64::MAX) - 1),
            );
            if a > b {
                return Ok((0, 0));
            }
            Ok((
                usize::try_from(a).unwrap_or(0),
                usize::try_from(b).unwrap_or(0) + 1,
            ))
        }
        Window::Range(lo, hi, unit) => {
            let scale = unit.unwrap_or(1.0);
            let Some(Some(cur)) = sort_vals.get(i) else {
                return Err(MongoError::failed_to_parse(
                    "Invalid range: Expected the sortBy field to be a number or a date",
                ));
            };
            let lo_v = match lo {
                Bound::Unbounded => f64::NEG_INFINITY,
                Bound::Current => *cur,
                Bound::Offset(o) => cur + o * scale,
            };
            let hi_v = match hi {
                Bound::Unbounded => f64::INFINITY,
                Bound::Current => *cur,
                Bound::Offset(o) => cur + o * scale,
            };
            let first = sort_vals
                .iter()
                .position(|v| v.is_some_and(|v| v >= lo_v))
                .unwrap_or(n);
            let last = sort_vals
                .iter()
                .rposition(|v| v.is_some_and(|v| v <= hi_v))
                .map_or(0, |p| p + 1);
            Ok(if first < last { (first, last) } else { (0, 0) })
        }
    }
}

impl Stage for SetWindowFieldsStage {
    fn run(mut self: Box<Self>, input: DocStream, cx: &RunCtx) -> DocStream {
        let cx = cx.clone();
        // `sortBy` orders strings by the pipeline's collation.
        self.sort = self
            .sort
            .take()
            .map(|s| s.with_collation(cx.collation.clone()));
        crate::agg::blocking(input, move |inp| self.run_all(inp, &cx))
    }
}
