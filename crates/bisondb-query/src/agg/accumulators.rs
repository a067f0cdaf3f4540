//! `$group` accumulators: parsing (`{$sum: <expr>}`) and per-group state.

use crate::collation::Collation;
use crate::compare::{compare_bson, compare_bson_in};
use crate::expr::{Expr, Value, Vars};
use crate::key::key_of_in;
use crate::sort::SortSpec;
use crate::stats::{check_fields, number, parse_quantile_spec, quantiles};
use crate::value::{nullish, type_name_opt, Summer};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawDocumentBuf};
use std::cmp::Ordering;
use std::collections::HashSet;

/// An accumulator operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccOp {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    StdDevPop,
    StdDevSamp,
    MergeObjects,
    FirstN,
    LastN,
    MaxN,
    MinN,
    Top,
    Bottom,
    TopN,
    BottomN,
    Median,
    Percentile,
    /// `$accumulator`: JavaScript `init`/`accumulate`/`finalize` (see [`JsAcc`]).
    Js,
}

/// Accumulators implemented, sorted by name. `$count` is `$sum: 1`.
const ACCUMULATORS: &[(&str, Option<AccOp>)] = &[
    ("$accumulator", Some(AccOp::Js)),
    ("$addToSet", Some(AccOp::AddToSet)),
    ("$avg", Some(AccOp::Avg)),
    ("$bottom", Some(AccOp::Bottom)),
    ("$bottomN", Some(AccOp::BottomN)),
    ("$count", None),
    ("$first", Some(AccOp::First)),
    ("$firstN", Some(AccOp::FirstN)),
    ("$last", Some(AccOp::Last)),
    ("$lastN", Some(AccOp::LastN)),
    ("$max", Some(AccOp::Max)),
    ("$maxN", Some(AccOp::MaxN)),
    ("$median", Some(AccOp::Median)),
    ("$mergeObjects", Some(AccOp::MergeObjects)),
    ("$min", Some(AccOp::Min)),
    ("$minN", Some(AccOp::MinN)),
    ("$percentile", Some(AccOp::Percentile)),
    ("$push", Some(AccOp::Push)),
    ("$stdDevPop", Some(AccOp::StdDevPop)),
    ("$stdDevSamp", Some(AccOp::StdDevSamp)),
    ("$sum", Some(AccOp::Sum)),
    ("$top", Some(AccOp::Top)),
    ("$topN", Some(AccOp::TopN)),
];

/// mongod accumulators BisonDB does not implement yet, sorted.
const NOT_IMPLEMENTED: &[&str] = &["$concatArrays", "$setUnion"];

/// A parsed accumulator: operator and argument expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Accumulator {
    pub op: AccOp,
    pub arg: Expr,
    pub params: AccParams,
}

/// Extra arguments of the N-element, ranked and percentile accumulators.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct AccParams {
    /// `n` of `$firstN`, `$topN`, ...
    pub n: usize,
    /// `sortBy` of `$top`/`$bottom` and their N forms.
    pub sort: Option<SortSpec>,
    /// Percentiles of `$percentile` (0.5 for `$median`).
    pub p: Vec<f64>,
    /// The functions of `$accumulator`.
    pub js: Option<Box<JsAcc>>,
}

/// `$accumulator`'s JavaScript: function sources and `initArgs` (its
/// `accumulateArgs` is the accumulator's argument expression). `merge` is
/// checked but never needed: groups are never split and merged here.
#[derive(Debug, Clone, PartialEq)]
pub struct JsAcc {
    pub init: String,
    pub init_args: Option<Expr>,
    pub accumulate: String,
    pub finalize: Option<String>,
}

impl Accumulator {
    /// Parses the value of one `$group` output field.
    pub fn parse(field: &str, spec: &Bson) -> MongoResult<Accumulator> {
        let Bson::Document(d) = spec else {
            return Err(MongoError::location(
                40234,
                format!("The field '{field}' must be an accumulator object"),
            ));
        };
        let mut it = d.iter();
        let (name, arg) = match (it.next(), it.next()) {
            (Some(kv), None) => kv,
            (None, _) => {
                return Err(MongoError::location(
                    40234,
                    format!("The field '{field}' must be an accumulator object"),
                ))
            }
            (Some(_), Some(_)) => {
                return Err(MongoError::location(
                    40238,
                    format!("The field '{field}' must specify one accumulator"),
                ))
            }
        };
        if !name.starts_with('$') {
            return Err(MongoError::location(
                40234,
                format!("The field '{field}' must be an accumulator object"),
            ));
        }
        match ACCUMULATORS.binary_search_by(|(n, _)| n.cmp(&name.as_str())) {
            Ok(i) => match ACCUMULATORS.get(i).and_then(|(_, op)| *op) {
                Some(AccOp::Js) => parse_js(arg),
                Some(op) if is_object_form(op) => parse_object_form(name, op, arg),
                Some(op) => {
                    if matches!(arg, Bson::Array(_)) {
                        return Err(MongoError::location(
                            40237,
                            format!("The {name} accumulator is a unary operator"),
                        ));
                    }
                    Ok(Accumulator::new(op, Expr::parse(arg)?))
                }
                None => {
                    if !matches!(arg, Bson::Document(a) if a.is_empty()) {
                        return Err(MongoError::bad_value(
                            "$count takes no arguments, i.e. $count:{}",
                        ));
                    }
                    Ok(Accumulator::new(AccOp::Sum, Expr::Literal(Bson::Int32(1))))
                }
            },
            Err(_) if NOT_IMPLEMENTED.binary_search(&name.as_str()).is_ok() => {
                Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("Accumulator {name} is not supported by BisonDB yet"),
                ))
            }
            Err(_) => Err(MongoError::location(
                15952,
                format!("unknown group operator '{name}'"),
            )),
        }
    }

    /// An accumulator without extra parameters.
    pub fn new(op: AccOp, arg: Expr) -> Accumulator {
        Accumulator {
            op,
            arg,
            params: AccParams::default(),
        }
    }

    /// Evaluates the argument for `doc` and folds it into `state`.
    pub fn accumulate(&self, state: &mut AccState, doc: &Document, vars: &Vars) -> MongoResult<()> {
        let v = self.arg.eval(doc, vars)?;
        if let (AccState::Js { state, result }, Some(js)) = (&mut *state, &self.params.js) {
            return js.accumulate(state, result, v, doc, vars);
        }
        if let AccState::Ranked {
            items,
            n,
            sort,
            bottom,
        } = state
        {
            // `sortBy` orders strings by the operation's collation; the state
            // starts without it (it is built before any variables exist).
            if sort.collation().is_none() {
                if let Some(c) = vars.collation_arc() {
                    *sort = std::mem::take(sort).with_collation(Some(c.clone()));
                }
            }
            let raw = RawDocumentBuf::try_from(doc).map_err(|e| {
                MongoError::internal(format!("document cannot be encoded for sorting: {e}"))
            })?;
            items.push((sort.sort_key(&raw), v.unwrap_or(Bson::Null)));
            // Keep memory bounded: trim to the best n once the buffer doubles.
            if items.len() > n.saturating_mul(2).max(64) {
                trim_ranked(items, *n, sort, *bottom);
            }
            return Ok(());
        }
        state.add_in(self.op, v, vars.collation())
    }

    /// A fresh state for a new group.
    pub fn new_state(&self) -> AccState {
        let n = self.params.n;
        match self.op {
            AccOp::FirstN => AccState::FirstN(Vec::new(), n),
            AccOp::LastN => AccState::LastN(std::collections::VecDeque::new(), n),
            AccOp::MaxN | AccOp::MinN => AccState::Extremes(Vec::new(), n),
            AccOp::Top | AccOp::Bottom | AccOp::TopN | AccOp::BottomN => AccState::Ranked {
                items: Vec::new(),
                n: if matches!(self.op, AccOp::Top | AccOp::Bottom) {
                    1
                } else {
                    n
                },
                sort: self.params.sort.clone().unwrap_or_default(),
                bottom: matches!(self.op, AccOp::Bottom | AccOp::BottomN),
            },
            AccOp::Median | AccOp::Percentile => {
                AccState::Quantiles(Vec::new(), self.params.p.clone())
            }
            AccOp::Sum => AccState::Sum(Summer::default()),
            AccOp::Avg => AccState::Avg(Summer::default()),
            AccOp::Min | AccOp::Max => AccState::Extreme(None),
            AccOp::First => AccState::First(None),
            AccOp::Last => AccState::Last(Bson::Null),
            AccOp::Push => AccState::Push(Vec::new()),
            AccOp::AddToSet => AccState::Set(Vec::new(), HashSet::new()),
            AccOp::StdDevPop | AccOp::StdDevSamp => AccState::StdDev {
                count: 0,
                mean: 0.0,
                m2: 0.0,
            },
            AccOp::MergeObjects => AccState::Merge(Document::new()),
            AccOp::Js => AccState::Js {
                state: None,
                result: Bson::Null,
            },
        }
    }
}

/// `{$accumulator: {init, initArgs?, accumulate, accumulateArgs, merge,
/// finalize?, lang: "js"}}` with mongod's errors; the functions are compiled
/// here so a syntax error fails before any document is read.
fn parse_js(arg: &Bson) -> MongoResult<Accumulator> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            4544703,
            format!(
                "$accumulator expects an object as an argument; found: {}",
                type_name_opt(Some(arg))
            ),
        ));
    };
    for k in d.keys() {
        if !matches!(
            k.as_str(),
            "init" | "initArgs" | "accumulate" | "accumulateArgs" | "merge" | "finalize" | "lang"
        ) {
            return Err(MongoError::location(
                4544706,
                format!("$accumulator got an unexpected field: {k}"),
            ));
        }
    }
    let function = |key: &str, missing: Option<i32>| -> MongoResult<Option<String>> {
        let Some(v) = d.get(key) else {
            return match missing {
                Some(code) => Err(MongoError::location(
                    code,
                    format!("$accumulator missing required argument '{key}'"),
                )),
                None => Ok(None),
            };
        };
        match Expr::parse(v)? {
            Expr::Literal(Bson::String(s)) | Expr::Literal(Bson::JavaScriptCode(s)) => {
                crate::js::check_function(&s)?;
                Ok(Some(s))
            }
            Expr::Literal(_) => Err(MongoError::location(
                4544702,
                format!("$accumulator '{key}' must be a String or Code"),
            )),
            _ => Err(MongoError::location(
                4544701,
                format!("$accumulator '{key}' must be a constant expression"),
            )),
        }
    };
    let init = function("init", Some(4544707))?.unwrap_or_default();
    let accumulate = function("accumulate", Some(4544708))?.unwrap_or_default();
    function("merge", Some(4544709))?;
    let finalize = function("finalize", None)?;
    let accumulate_args = d.get("accumulateArgs").ok_or_else(|| {
        MongoError::location(
            4544710,
            "$accumulator missing required argument 'accumulateArgs'",
        )
    })?;
    let init_args = d.get("initArgs").map(Expr::parse).transpose()?;
    match d.get("lang") {
        Some(Bson::String(l)) if l == "js" => {}
        Some(Bson::String(_)) => {
            return Err(MongoError::location(
                4544705,
                "$accumulator only supports lang: 'js'",
            ))
        }
        other => {
            return Err(MongoError::location(
                4544704,
                format!(
                    "$accumulator lang must be a string; found: {}",
                    type_name_opt(other)
                ),
            ))
        }
    }
    Ok(Accumulator {
        op: AccOp::Js,
        arg: Expr::parse(accumulate_args)?,
        params: AccParams {
            js: Some(Box::new(JsAcc {
                init,
                init_args,
                accumulate,
                finalize,
            })),
            ..AccParams::default()
        },
    })
}

impl JsAcc {
    /// One document: `init(...initArgs)` on a group's first, then
    /// `state = accumulate(state, ...accumulateArgs)`; `result` follows with
    /// `finalize(state)` (or the state), so finishing cannot fail.
    fn accumulate(
        &self,
        state: &mut Option<Bson>,
        result: &mut Bson,
        args: Value,
        doc: &Document,
        vars: &Vars,
    ) -> MongoResult<()> {
        let args = match args {
            Some(Bson::Array(a)) => a,
            other => {
                return Err(MongoError::location(
                    4544712,
                    format!(
                        "$accumulator accumulateArgs must evaluate to an array: {}",
                        crate::expr::render_value(&other)
                    ),
                ))
            }
        };
        let current = match state.take() {
            Some(s) => s,
            None => {
                let init_args = match &self.init_args {
                    None => Vec::new(),
                    Some(e) => match e.eval(doc, vars)? {
                        Some(Bson::Array(a)) => a,
                        other => {
                            return Err(MongoError::location(
                                4544711,
                                format!(
                                    "$accumulator initArgs must evaluate to an array: {}",
                                    crate::expr::render_value(&other)
                                ),
                            ))
                        }
                    },
                };
                crate::js::call_function(&self.init, &init_args)?
            }
        };
        let mut call_args = Vec::with_capacity(args.len() + 1);
        call_args.push(current);
        call_args.extend(args);
        let next = crate::js::call_function(&self.accumulate, &call_args)?;
        *result = match &self.finalize {
            Some(f) => crate::js::call_function(f, std::slice::from_ref(&next))?,
            None => next.clone(),
        };
        *state = Some(next);
        Ok(())
    }
}

impl Accumulator {
    /// As [`Expr::top_level_deps`], for the accumulator's argument and the
    /// `sortBy` of `$top`/`$bottom` and their N forms.
    pub fn top_level_deps(&self, out: &mut Vec<String>) -> bool {
        if let Some(sort) = &self.params.sort {
            for (path, _) in sort.fields() {
                crate::expr::push_top(path, out);
            }
        }
        self.arg.top_level_deps(out)
    }
}

/// A fresh state for each of a stage's named accumulators (`$group`'s
/// fields, `$bucket`'s and `$bucketAuto`'s `output`).
pub(crate) fn new_states(accs: &[(String, Accumulator)]) -> Vec<AccState> {
    accs.iter().map(|(_, a)| a.new_state()).collect()
}

/// Folds `doc` into every state of `accs` (made by [`new_states`]).
pub(crate) fn accumulate_all(
    accs: &[(String, Accumulator)],
    states: &mut [AccState],
    doc: &Document,
    vars: &Vars,
) -> MongoResult<()> {
    for ((_, acc), st) in accs.iter().zip(states.iter_mut()) {
        acc.accumulate(st, doc, vars)?;
    }
    Ok(())
}

/// A group's output document: `_id` first, then each accumulator's result
/// under its name.
pub(crate) fn finish_all(
    id: Bson,
    accs: &[(String, Accumulator)],
    states: Vec<AccState>,
) -> Document {
    let mut out = Document::new();
    out.insert("_id", id);
    for ((name, acc), st) in accs.iter().zip(states) {
        out.insert(name.clone(), st.finish(acc.op));
    }
    out
}

/// Running state of one accumulator in one group.
#[derive(Debug, Clone)]
pub enum AccState {
    Sum(Summer),
    Avg(Summer),
    Extreme(Option<Bson>),
    First(Option<Bson>),
    Last(Bson),
    Push(Vec<Bson>),
    Set(Vec<Bson>, HashSet<Vec<u8>>),
    StdDev {
        count: u64,
        mean: f64,
        m2: f64,
    },
    Merge(Document),
    FirstN(Vec<Bson>, usize),
    LastN(std::collections::VecDeque<Bson>, usize),
    Extremes(Vec<Bson>, usize),
    /// Sort key and output value of each document seen (`$top`...).
    Ranked {
        items: Vec<(Vec<Bson>, Bson)>,
        n: usize,
        sort: SortSpec,
        bottom: bool,
    },
    Quantiles(Vec<f64>, Vec<f64>),
    /// `$accumulator`: the JavaScript state (none before the group's first
    /// document) and the finalized result so far.
    Js {
        state: Option<Bson>,
        result: Bson,
    },
}

fn is_object_form(op: AccOp) -> bool {
    matches!(
        op,
        AccOp::FirstN
            | AccOp::LastN
            | AccOp::MaxN
            | AccOp::MinN
            | AccOp::Top
            | AccOp::Bottom
            | AccOp::TopN
            | AccOp::BottomN
            | AccOp::Median
            | AccOp::Percentile
    )
}

fn parse_object_form(name: &str, op: AccOp, arg: &Bson) -> MongoResult<Accumulator> {
    if matches!(op, AccOp::Median | AccOp::Percentile) {
        let (input, p) = parse_quantile_spec(name, op == AccOp::Median, arg)?;
        return Ok(Accumulator {
            op,
            arg: Expr::parse(&input)?,
            params: AccParams {
                p,
                ..AccParams::default()
            },
        });
    }
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            5787801,
            format!("specification must be an object; found {name}: {arg}"),
        ));
    };
    let (allowed, required): (&[&str], &[&str]) = match op {
        AccOp::FirstN | AccOp::LastN | AccOp::MaxN | AccOp::MinN => {
            (&["input", "n"], &["input", "n"])
        }
        AccOp::Top | AccOp::Bottom => (&["sortBy", "output"], &["sortBy", "output"]),
        AccOp::TopN | AccOp::BottomN => (&["n", "sortBy", "output"], &["n", "sortBy", "output"]),
        // `$median`/`$percentile` returned above.
        _ => (&["input"], &["input"]),
    };
    check_fields(name, d, allowed, required)?;
    let mut params = AccParams::default();
    if let Some(n) = d.get("n") {
        params.n = match n {
            Bson::Int32(i) if *i > 0 => usize::try_from(*i).unwrap_or(1),
            Bson::Int64(i) if *i > 0 => usize::try_from(*i).unwrap_or(usize::MAX),
            Bson::Double(x) if *x > 0.0 && x.fract() == 0.0 => *x as usize,
            other => {
                return Err(MongoError::location(
                    5787908,
                    format!("Value for 'n' must be a positive integral value, found: {other}"),
                ))
            }
        };
    }
    if let Some(sort) = d.get("sortBy") {
        let Bson::Document(spec) = sort else {
            return Err(MongoError::location(
                5788604,
                format!("expected 'sortBy' to be an object, found: {sort}"),
            ));
        };
        params.sort = Some(SortSpec::parse(spec)?);
    }
    let arg_src = d
        .get("output")
        .or_else(|| d.get("input"))
        .unwrap_or(&Bson::Null);
    Ok(Accumulator {
        op,
        arg: Expr::parse(arg_src)?,
        params,
    })
}

/// Keeps the n best entries in sort order (the last n for `$bottom`).
fn trim_ranked(items: &mut Vec<(Vec<Bson>, Bson)>, n: usize, sort: &SortSpec, bottom: bool) {
    items.sort_by(|a, b| sort.compare_keys(&a.0, &b.0));
    if bottom {
        let skip = items.len().saturating_sub(n);
        items.drain(..skip);
    } else {
        items.truncate(n);
    }
}

impl AccState {
    /// Folds one evaluated argument into the state.
    pub fn add(&mut self, op: AccOp, v: Value) -> MongoResult<()> {
        self.add_in(op, v, None)
    }

    /// [`AccState::add`] under a collation: `$min`/`$max` compare strings and
    /// `$addToSet` dedups them with it (`None`: simple).
    pub fn add_in(&mut self, op: AccOp, v: Value, c: Option<&Collation>) -> MongoResult<()> {
        match self {
            AccState::Sum(acc) | AccState::Avg(acc) => {
                if let Some(Bson::Decimal128(d)) = &v {
                    acc.add_dec(crate::decimal::Dec::from_bson(*d));
                } else if let Some(n) = number(&v, if op == AccOp::Avg { "$avg" } else { "$sum" })?
                {
                    acc.add(n);
                }
            }
            AccState::Extreme(best) => {
                if let Some(v) = v.filter(|x| !nullish(Some(x))) {
                    let want = if op == AccOp::Min {
                        Ordering::Less
                    } else {
                        Ordering::Greater
                    };
                    let replace = match best {
                        Some(b) => compare_bson_in(&v, b, c) == want,
                        None => true,
                    };
                    if replace {
                        *best = Some(v);
                    }
                }
            }
            AccState::First(first) => {
                if first.is_none() {
                    *first = Some(v.unwrap_or(Bson::Null));
                }
            }
            AccState::Last(last) => *last = v.unwrap_or(Bson::Null),
            AccState::Push(items) => {
                if let Some(v) = v {
                    items.push(v);
                }
            }
            AccState::Set(items, seen) => {
                if let Some(v) = v {
                    if seen.insert(key_of_in(Some(&v), c)) {
                        items.push(v);
                    }
                }
            }
            AccState::StdDev { count, mean, m2 } => {
                let name = if op == AccOp::StdDevPop {
                    "$stdDevPop"
                } else {
                    "$stdDevSamp"
                };
                if let Some(n) = number(&v, name)? {
                    // Welford's online update keeps the variance numerically stable.
                    let x = n.as_f64();
                    *count += 1;
                    let delta = x - *mean;
                    *mean += delta / *count as f64;
                    *m2 += delta * (x - *mean);
                }
            }
            AccState::FirstN(items, n) => {
                if items.len() < *n {
                    items.push(v.unwrap_or(Bson::Null));
                }
            }
            AccState::LastN(items, n) => {
                items.push_back(v.unwrap_or(Bson::Null));
                if items.len() > *n {
                    items.pop_front();
                }
            }
            AccState::Extremes(items, n) => {
                if let Some(v) = v.filter(|x| !nullish(Some(x))) {
                    items.push(v);
                    if items.len() > n.saturating_mul(2).max(64) {
                        sort_extremes(items, op == AccOp::MaxN);
                        items.truncate(*n);
                    }
                }
            }
            AccState::Ranked { items, .. } => items.push((Vec::new(), v.unwrap_or(Bson::Null))),
            AccState::Js { .. } => {
                return Err(MongoError::location(
                    5788600,
                    "$accumulator is not supported in this context",
                ))
            }
            AccState::Quantiles(vals, _) => {
                if let Some(n) = number(&v, "$percentile")? {
                    vals.push(n.as_f64());
                }
            }
            AccState::Merge(out) => match v {
                Some(Bson::Document(d)) => crate::expr::merge_objects_into(out, d),
                other if nullish(other.as_ref()) => {}
                other => {
                    return Err(MongoError::location(
                        40400,
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            crate::expr::render_value(&other),
                            type_name_opt(other.as_ref())
                        ),
                    ))
                }
            },
        }
        Ok(())
    }

    /// The accumulated result.
    pub fn finish(self, op: AccOp) -> Bson {
        match self {
            AccState::Sum(acc) => acc.total_bson(),
            AccState::Avg(acc) => acc.mean_bson(),
            AccState::Extreme(best) => best.unwrap_or(Bson::Null),
            AccState::First(first) => first.unwrap_or(Bson::Null),
            AccState::Last(last) => last,
            AccState::Push(items) | AccState::Set(items, _) => Bson::Array(items),
            AccState::StdDev { count, m2, .. } => {
                let n = if op == AccOp::StdDevPop {
                    count
                } else {
                    count.saturating_sub(1)
                };
                if n == 0 {
                    Bson::Null
                } else {
                    Bson::Double((m2 / n as f64).sqrt())
                }
            }
            AccState::Merge(d) => Bson::Document(d),
            AccState::FirstN(items, _) => Bson::Array(items),
            AccState::LastN(items, _) => Bson::Array(items.into_iter().collect()),
            AccState::Extremes(mut items, n) => {
                sort_extremes(&mut items, op == AccOp::MaxN);
                items.truncate(n);
                Bson::Array(items)
            }
            AccState::Ranked {
                mut items,
                n,
                sort,
                bottom,
            } => {
                trim_ranked(&mut items, n, &sort, bottom);
                let mut out: Vec<Bson> = items.into_iter().map(|(_, v)| v).collect();
                if matches!(op, AccOp::Top | AccOp::Bottom) {
                    out.pop().unwrap_or(Bson::Null)
                } else {
                    Bson::Array(out)
                }
            }
            AccState::Js { result, .. } => result,
            AccState::Quantiles(vals, ps) => {
                if op == AccOp::Median {
                    quantiles(vals, &[0.5]).pop().unwrap_or(Bson::Null)
                } else {
                    Bson::Array(quantiles(vals, &ps))
                }
            }
        }
    }
}

fn sort_extremes(items: &mut [Bson], max: bool) {
    items.sort_by(|a, b| {
        if max {
            compare_bson(b, a)
        } else {
            compare_bson(a, b)
        }
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn run(spec: Bson, inputs: Vec<Value>) -> MongoResult<Bson> {
        let acc = Accumulator::parse("f", &spec)?;
        let mut st = acc.new_state();
        for v in inputs {
            st.add(acc.op, v)?;
        }
        Ok(st.finish(acc.op))
    }

    fn s(v: impl Into<Bson>) -> Value {
        Some(v.into())
    }

    #[test]
    fn accumulator_table() {
        let cases: Vec<(Bson, Vec<Value>, Bson)> = vec![
            (
                doc! {"$sum": "$x"}.into(),
                vec![s(1), s(2), s("x"), None],
                Bson::Int32(3),
            ),
            (
                doc! {"$sum": "$x"}.into(),
                vec![s(i32::MAX), s(1)],
                Bson::Int64(i64::from(i32::MAX) + 1),
            ),
            (
                doc! {"$sum": "$x"}.into(),
                vec![s(1), s(0.5)],
                Bson::Double(1.5),
            ),
            (doc! {"$sum": "$x"}.into(), vec![], Bson::Int32(0)),
            (doc! {"$count": {}}.into(), vec![s(1), s(1)], Bson::Int32(2)),
            (
                doc! {"$avg": "$x"}.into(),
                vec![s(1), s(2), s(Bson::Null)],
                Bson::Double(1.5),
            ),
            (doc! {"$avg": "$x"}.into(), vec![s("a")], Bson::Null),
            (
                doc! {"$min": "$x"}.into(),
                vec![s(3), s(Bson::Null), s(1), None],
                Bson::Int32(1),
            ),
            (
                doc! {"$max": "$x"}.into(),
                vec![s(3), s("a"), s(1)],
                Bson::String("a".into()),
            ),
            (doc! {"$max": "$x"}.into(), vec![None], Bson::Null),
            (doc! {"$first": "$x"}.into(), vec![None, s(2)], Bson::Null),
            (
                doc! {"$first": "$x"}.into(),
                vec![s(1), s(2)],
                Bson::Int32(1),
            ),
            (
                doc! {"$last": "$x"}.into(),
                vec![s(1), s(2)],
                Bson::Int32(2),
            ),
            (
                doc! {"$push": "$x"}.into(),
                vec![s(1), None, s(Bson::Null)],
                Bson::Array(vec![Bson::Int32(1), Bson::Null]),
            ),
            (
                doc! {"$addToSet": "$x"}.into(),
                vec![s(1), s(1.0), s(2)],
                Bson::Array(vec![Bson::Int32(1), Bson::Int32(2)]),
            ),
            (
                doc! {"$stdDevPop": "$x"}.into(),
                vec![s(2), s(4), s(4), s(4), s(5), s(5), s(7), s(9)],
                Bson::Double(2.0),
            ),
            (doc! {"$stdDevSamp": "$x"}.into(), vec![s(1)], Bson::Null),
            (
                doc! {"$stdDevSamp": "$x"}.into(),
                vec![s(1), s(3)],
                Bson::Double(2f64.sqrt()),
            ),
            (
                doc! {"$mergeObjects": "$x"}.into(),
                vec![s(doc! {"a": 1}), s(Bson::Null), s(doc! {"a": 2, "b": 3})],
                Bson::Document(doc! {"a": 2, "b": 3}),
            ),
        ];
        for (spec, inputs, want) in cases {
            assert_eq!(run(spec.clone(), inputs).unwrap(), want, "{spec}");
        }
    }

    #[test]
    fn accumulator_errors() {
        let cases: Vec<(Bson, i32, &str)> = vec![
            (
                doc! {"$foo": 1}.into(),
                15952,
                "unknown group operator '$foo'",
            ),
            (
                Bson::Int32(1),
                40234,
                "The field 'f' must be an accumulator object",
            ),
            (
                doc! {"$sum": 1, "$avg": 1}.into(),
                40238,
                "must specify one accumulator",
            ),
            (
                doc! {"$accumulator": {}}.into(),
                4544707,
                "$accumulator missing required argument 'init'",
            ),
            (
                doc! {"$sum": [1, 2]}.into(),
                40237,
                "The $sum accumulator is a unary operator",
            ),
        ];
        for (spec, code, msg) in cases {
            let e = run(spec.clone(), vec![]).expect_err(&spec.to_string());
            assert_eq!(e.code.code(), code, "{spec}: {e}");
            assert!(e.message.contains(msg), "{spec}: {}", e.message);
        }
        let e = run(doc! {"$mergeObjects": "$x"}.into(), vec![s(1)]).unwrap_err();
        assert_eq!(e.code.code(), 40400);
    }

    #[test]
    fn tables_sorted() {
        assert!(ACCUMULATORS.windows(2).all(|w| w[0].0 < w[1].0));
        assert!(NOT_IMPLEMENTED.windows(2).all(|w| w[0] < w[1]));
    }
}
