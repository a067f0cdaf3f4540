//! Array expressions, including the variable-binding `$map`, `$filter` and
//! `$reduce`.

use super::{
    arg, check_var_name, named_args, parse_opt, parse_with_vars, require, Ctx, Expr, Scope, Value,
};
use crate::collation::Collation;
use crate::compare::values_equal_bson_in;
use crate::value::{nullish, render, truthy, type_name, type_name_opt};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::Bson;

/// mongod caps `$range` output at its 64 MiB expression memory limit; with
/// its 16-byte values that is this many elements.
const MAX_RANGE_ELEMENTS: i64 = 64 * 1024 * 1024 / 16;

/// The same bound for arrays built by `$concatArrays`.
const MAX_ARRAY_ELEMENTS: usize = 64 * 1024 * 1024 / 16;

fn int32_of(v: &Bson) -> Option<i32> {
    match v {
        Bson::Int32(i) => Some(*i),
        Bson::Int64(i) => i32::try_from(*i).ok(),
        Bson::Double(d)
            if d.fract() == 0.0 && *d >= f64::from(i32::MIN) && *d <= f64::from(i32::MAX) =>
        {
            Some(*d as i32)
        }
        _ => None,
    }
}

fn is_numeric(v: &Bson) -> bool {
    crate::value::is_number(v)
}

/// `$size`.
pub(super) fn size(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(a)) => Ok(Some(Bson::Int32(
            i32::try_from(a.len()).unwrap_or(i32::MAX),
        ))),
        other => Err(MongoError::location(
            17124,
            format!(
                "The argument to $size must be an array, but was of type: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$isArray`.
pub(super) fn is_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    Ok(Some(Bson::Boolean(matches!(
        cx.ev(arg(args, 0)?)?,
        Some(Bson::Array(_))
    ))))
}

/// `$arrayElemAt`.
pub(super) fn array_elem_at(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    let i = cx.ev(arg(args, 1)?)?;
    if nullish(a.as_ref()) || nullish(i.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(a)) = a else {
        return Err(MongoError::location(
            28689,
            format!(
                "$arrayElemAt's first argument must be an array, but is {}",
                type_name_opt(a.as_ref())
            ),
        ));
    };
    let Some(iv) = i else {
        return Ok(Some(Bson::Null));
    };
    if !is_numeric(&iv) {
        return Err(MongoError::location(
            28690,
            format!(
                "$arrayElemAt's second argument must be a numeric value, but is {}",
                type_name(&iv)
            ),
        ));
    }
    let Some(idx) = int32_of(&iv) else {
        return Err(MongoError::location(
            28691,
            format!(
                "$arrayElemAt's second argument must be representable as a 32-bit integer: {}",
                render(&iv)
            ),
        ));
    };
    Ok(elem_at(&a, i64::from(idx)))
}

/// `$first`, `$last`.
pub(super) fn first_last(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    if nullish(a.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    match a {
        Some(Bson::Array(a)) => Ok(elem_at(&a, if name == "$first" { 0 } else { -1 })),
        other => Err(MongoError::location(
            28689,
            format!(
                "{name}'s argument must be an array, but is {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$in`.
pub(super) fn in_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let x = cx.ev(arg(args, 0)?)?;
    match cx.ev(arg(args, 1)?)? {
        Some(Bson::Array(a)) => Ok(Some(Bson::Boolean(match x {
            Some(x) => a
                .iter()
                .any(|e| values_equal_bson_in(e, &x, cx.vars.collation())),
            None => false,
        }))),
        other => Err(MongoError::location(
            40081,
            format!(
                "$in requires an array as a second argument, found: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$concatArrays`.
pub(super) fn concat_arrays(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut out = Vec::new();
    for a in args {
        match cx.ev(a)? {
            Some(Bson::Array(x)) => {
                // Repeated doubling (e.g. inside $reduce) must not exhaust memory.
                if out.len().saturating_add(x.len()) > MAX_ARRAY_ELEMENTS {
                    return Err(MongoError::new(
                        ErrorCode::ExceededMemoryLimit,
                        format!(
                            "$concatArrays would produce more than {MAX_ARRAY_ELEMENTS} elements"
                        ),
                    ));
                }
                out.extend(x)
            }
            v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
            Some(v) => {
                return Err(MongoError::location(
                    28664,
                    format!("$concatArrays only supports arrays, not {}", type_name(&v)),
                ))
            }
            None => return Ok(Some(Bson::Null)),
        }
    }
    Ok(Some(Bson::Array(out)))
}

/// `$reverseArray`.
pub(super) fn reverse_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(mut a)) => {
            a.reverse();
            Ok(Some(Bson::Array(a)))
        }
        v if nullish(v.as_ref()) => Ok(Some(Bson::Null)),
        other => Err(MongoError::location(
            34435,
            format!(
                "The argument to $reverseArray must be an array, but was of type: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$reduce`.
pub(super) fn reduce(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    if nullish(input.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(items)) = input else {
        return Err(MongoError::location(
            40080,
            format!(
                "$reduce requires that 'input' be an array, found: {}",
                super::render_value(&input)
            ),
        ));
    };
    let mut acc = cx.ev(arg(args, 1)?)?.unwrap_or(Bson::Null);
    let body = arg(args, 2)?;
    for item in items {
        let vars = cx
            .vars
            .child(vec![("value".to_string(), acc), ("this".to_string(), item)]);
        acc = body.eval(cx.root, &vars)?.unwrap_or(Bson::Null);
    }
    Ok(Some(acc))
}

/// `$allElementsTrue`, `$anyElementTrue`.
pub(super) fn all_any_elements_true(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(a)) => Ok(Some(Bson::Boolean(if name == "$allElementsTrue" {
            a.iter().all(|x| truthy(Some(x)))
        } else {
            a.iter().any(|x| truthy(Some(x)))
        }))),
        other => Err(MongoError::location(
            if name == "$allElementsTrue" {
                17040
            } else {
                17041
            },
            format!(
                "{name}'s argument must be an array, but is {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

pub(super) fn index_of_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    if nullish(a.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(a)) = a else {
        return Err(MongoError::location(
            40090,
            format!(
                "$indexOfArray requires an array as a first argument, found: {}",
                type_name_opt(a.as_ref())
            ),
        ));
    };
    let x = cx.ev(arg(args, 1)?)?;
    let mut bounds = [0usize, a.len()];
    for (i, slot) in bounds.iter_mut().enumerate() {
        if let Some(e) = args.get(i + 2) {
            let v = cx.ev(e)?;
            let n = v.as_ref().and_then(int32_of).ok_or_else(|| {
                MongoError::location(
                    40096,
                    format!(
                        "$indexOfArray requires an integral {} index, found a value of type: {}",
                        if i == 0 { "starting" } else { "ending" },
                        type_name_opt(v.as_ref())
                    ),
                )
            })?;
            if n < 0 {
                return Err(MongoError::location(
                    40097,
                    format!(
                        "$indexOfArray requires a nonnegative {} index, found: {n}",
                        if i == 0 { "start" } else { "end" }
                    ),
                ));
            }
            *slot = usize::try_from(n).unwrap_or(usize::MAX);
        }
    }
    let [start, end] = bounds;
    let end = end.min(a.len());
    let found = match &x {
        Some(x) if start < end => a.get(start..end).and_then(|s| {
            s.iter()
                .position(|e| values_equal_bson_in(e, x, cx.vars.collation()))
        }),
        _ => None,
    };
    Ok(Some(Bson::Int32(found.map_or(-1, |p| {
        i32::try_from(p + start).unwrap_or(i32::MAX)
    }))))
}

fn dedup(items: impl IntoIterator<Item = Bson>, c: Option<&Collation>) -> Vec<Bson> {
    let mut seen = std::collections::HashSet::new();
    items
        .into_iter()
        .filter(|x| seen.insert(crate::key::key_of_in(Some(x), c)))
        .collect()
}

fn contains(set: &[Bson], x: &Bson, c: Option<&Collation>) -> bool {
    set.iter().any(|e| values_equal_bson_in(e, x, c))
}

pub(super) fn set_op(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut arrays = Vec::with_capacity(args.len());
    for (i, e) in args.iter().enumerate() {
        let v = cx.ev(e)?;
        match v {
            Some(Bson::Array(a)) => arrays.push(a),
            v if nullish(v.as_ref())
                && matches!(name, "$setUnion" | "$setIntersection" | "$setDifference") =>
            {
                return Ok(Some(Bson::Null));
            }
            other => {
                let ty = type_name_opt(other.as_ref());
                let which = if i == 0 { "First" } else { "Second" };
                let (code, msg) = match name {
                    "$setUnion" => (17043, format!("All operands of $setUnion must be arrays. One argument is of type: {ty}")),
                    "$setIntersection" => {
                        (17047, format!("All operands of $setIntersection must be arrays. One argument is of type: {ty}"))
                    }
                    "$setEquals" => (17044, format!("All operands of $setEquals must be arrays. One argument is of type: {ty}")),
                    "$setDifference" => (
                        if i == 0 { 17048 } else { 17049 },
                        format!("both operands of $setDifference must be arrays. {which} argument is of type: {ty}"),
                    ),
                    _ => (
                        if i == 0 { 17046 } else { 17042 },
                        format!("both operands of $setIsSubset must be arrays. {which} argument is of type: {ty}"),
                    ),
                };
                return Err(MongoError::location(code, msg));
            }
        }
    }
    let c = cx.vars.collation();
    let mut it = arrays.into_iter();
    let first = it.next().unwrap_or_default();
    Ok(Some(match name {
        "$setUnion" => Bson::Array(dedup(first.into_iter().chain(it.flatten()), c)),
        "$setIntersection" => {
            let rest: Vec<Vec<Bson>> = it.collect();
            Bson::Array(dedup(
                first
                    .into_iter()
                    .filter(|x| rest.iter().all(|r| contains(r, x, c))),
                c,
            ))
        }
        "$setDifference" => {
            let other = it.next().unwrap_or_default();
            Bson::Array(dedup(
                first.into_iter().filter(|x| !contains(&other, x, c)),
                c,
            ))
        }
        "$setEquals" => {
            let base = dedup(first, c);
            Bson::Boolean(it.all(|a| {
                let a = dedup(a, c);
                a.len() == base.len() && a.iter().all(|x| contains(&base, x, c))
            }))
        }
        _ => {
            let other = it.next().unwrap_or_default();
            Bson::Boolean(first.iter().all(|x| contains(&other, x, c)))
        }
    }))
}

pub(super) fn zip(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let inputs = match arg(args, 0)? {
        Expr::Array(items) => items,
        _ => {
            return Err(MongoError::location(
                34460,
                "inputs must be an array of expressions",
            ))
        }
    };
    let longest = match cx.ev(arg(args, 1)?)? {
        None => false,
        Some(Bson::Boolean(b)) => b,
        Some(other) => {
            return Err(MongoError::location(
                34463,
                format!(
                    "useLongestLength must be a bool, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let defaults = match cx.ev(arg(args, 2)?)? {
        None => None,
        Some(Bson::Array(d)) => {
            if !longest {
                return Err(MongoError::location(
                    34466,
                    "cannot specify defaults unless useLongestLength is true",
                ));
            }
            if d.len() != inputs.len() {
                return Err(MongoError::location(
                    34467,
                    "defaults and inputs must have the same length",
                ));
            }
            Some(d)
        }
        Some(other) => {
            return Err(MongoError::location(
                34462,
                format!(
                    "defaults must be an array of expressions, found {}",
                    type_name(&other)
                ),
            ))
        }
    };
    let mut arrays = Vec::with_capacity(inputs.len());
    for e in inputs {
        match cx.ev(e)? {
            Some(Bson::Array(a)) => arrays.push(a),
            Some(other) if !nullish(Some(&other)) => {
                return Err(MongoError::location(
                    34468,
                    format!(
                        "$zip found a non-array expression in input: {}",
                        render(&other)
                    ),
                ))
            }
            _ => return Ok(Some(Bson::Null)),
        }
    }
    let lens = arrays.iter().map(Vec::len);
    let len = if longest { lens.max() } else { lens.min() }.unwrap_or(0);
    let mut out = Vec::with_capacity(len);
    for i in 0..len {
        let row: Vec<Bson> = arrays
            .iter()
            .enumerate()
            .map(|(j, a)| {
                a.get(i).cloned().unwrap_or_else(|| {
                    defaults
                        .as_ref()
                        .and_then(|d| d.get(j))
                        .cloned()
                        .unwrap_or(Bson::Null)
                })
            })
            .collect();
        out.push(Bson::Array(row));
    }
    Ok(Some(Bson::Array(out)))
}

fn sort_dir(v: &Bson) -> Option<bool> {
    match v {
        Bson::Int32(1) | Bson::Int64(1) => Some(true),
        Bson::Int32(-1) | Bson::Int64(-1) => Some(false),
        Bson::Double(x) if *x == 1.0 || *x == -1.0 => Some(*x > 0.0),
        _ => None,
    }
}

pub(super) fn sort_array(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    let Expr::Literal(spec) = arg(args, 1)? else {
        return Err(MongoError::internal("$sortArray sortBy is a literal"));
    };
    let fields: Vec<(String, bool)> = match spec {
        Bson::Document(d) if !d.is_empty() => {
            let mut f = Vec::with_capacity(d.len());
            for (k, v) in d {
                let asc = sort_dir(v).ok_or_else(|| {
                    MongoError::location(2942506, "$sortArray sortBy values must be 1 or -1")
                })?;
                f.push((k.clone(), asc));
            }
            f
        }
        other => match sort_dir(other) {
            Some(asc) => vec![(String::new(), asc)],
            None => {
                return Err(MongoError::location(
                    2942505,
                    "$sortArray requires 'sortBy' to be 1, -1, or a non-empty object",
                ))
            }
        },
    };
    let mut items = match input {
        Some(Bson::Array(a)) => a,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        other => {
            return Err(MongoError::location(
                2942504,
                format!(
                    "The input argument to $sortArray must be an array, but was of type: {}",
                    type_name_opt(other.as_ref())
                ),
            ))
        }
    };
    let key = |v: &Bson, path: &str| -> Bson {
        if path.is_empty() {
            return v.clone();
        }
        match v {
            Bson::Document(d) => crate::path::get_path_bson(d, path)
                .cloned()
                .unwrap_or(Bson::Null),
            _ => Bson::Null,
        }
    };
    items.sort_by(|a, b| {
        for (path, asc) in &fields {
            let o =
                crate::compare::compare_bson_in(&key(a, path), &key(b, path), cx.vars.collation());
            let o = if *asc { o } else { o.reverse() };
            if o != std::cmp::Ordering::Equal {
                return o;
            }
        }
        std::cmp::Ordering::Equal
    });
    Ok(Some(Bson::Array(items)))
}

pub(super) fn n_elements(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let nv = cx.ev(arg(args, 1)?)?;
    let n = match nv.as_ref().and_then(int32_of) {
        Some(n) if n > 0 => usize::try_from(n).unwrap_or(usize::MAX),
        _ => {
            return Err(MongoError::location(
                5787908,
                format!(
                    "Value for 'n' must be a positive integral value, found: {}",
                    super::render_value(&nv)
                ),
            ))
        }
    };
    let items = match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(a)) => a,
        v if nullish(v.as_ref()) => return Ok(Some(Bson::Null)),
        other => {
            return Err(MongoError::location(
                5154700,
                format!(
                    "Input to {name} must be an array, but was of type: {}",
                    type_name_opt(other.as_ref())
                ),
            ))
        }
    };
    Ok(Some(Bson::Array(match name {
        "$firstN" => items.into_iter().take(n).collect(),
        "$lastN" => {
            let skip = items.len().saturating_sub(n);
            items.into_iter().skip(skip).collect()
        }
        _ => {
            let mut v: Vec<Bson> = items.into_iter().filter(|x| !nullish(Some(x))).collect();
            v.sort_by(|a, b| crate::compare::compare_bson_in(a, b, cx.vars.collation()));
            if name == "$maxN" {
                v.reverse();
            }
            v.truncate(n);
            v
        }
    })))
}

fn elem_at(a: &[Bson], idx: i64) -> Value {
    let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
    let i = if idx < 0 { len + idx } else { idx };
    if i < 0 {
        return None;
    }
    usize::try_from(i).ok().and_then(|i| a.get(i)).cloned()
}

pub(super) fn slice(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = cx.ev(arg(args, 0)?)?;
    let mut nums = Vec::with_capacity(2);
    for e in args.iter().skip(1) {
        nums.push(cx.ev(e)?);
    }
    if nullish(a.as_ref()) || nums.iter().any(|n| nullish(n.as_ref())) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(a)) = a else {
        return Err(MongoError::location(
            28724,
            format!(
                "First argument to $slice must be an array, but is of type: {}",
                type_name_opt(a.as_ref())
            ),
        ));
    };
    let mut ints = Vec::with_capacity(2);
    for (i, n) in nums.iter().enumerate() {
        let ord = if i == 0 { "Second" } else { "Third" };
        let Some(n) = n else {
            return Ok(Some(Bson::Null));
        };
        if !is_numeric(n) {
            return Err(MongoError::location(
                if i == 0 { 28725 } else { 28727 },
                format!(
                    "{ord} argument to $slice must be a numeric value, but is of type: {}",
                    type_name(n)
                ),
            ));
        }
        let v = int32_of(n).ok_or_else(|| {
            MongoError::location(
                if i == 0 { 28726 } else { 28728 },
                format!(
                    "{ord} argument to $slice can't be represented as a 32-bit integer: {}",
                    render(n)
                ),
            )
        })?;
        ints.push(i64::from(v));
    }
    let len = i64::try_from(a.len()).unwrap_or(i64::MAX);
    let (start, count) = match ints.as_slice() {
        [n] if *n >= 0 => (0, *n),
        [n] => ((len + n).max(0), len),
        [pos, n] => {
            if *n <= 0 {
                return Err(MongoError::location(
                    28729,
                    format!("Third argument to $slice must be positive: {n}"),
                ));
            }
            let start = if *pos < 0 {
                (len + pos).max(0)
            } else {
                (*pos).min(len)
            };
            (start, *n)
        }
        _ => return Err(MongoError::internal("$slice arity")),
    };
    let start = usize::try_from(start).unwrap_or(a.len());
    let count = usize::try_from(count).unwrap_or(0);
    Ok(Some(Bson::Array(
        a.into_iter().skip(start).take(count).collect(),
    )))
}

pub(super) fn range(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let names = ["starting value", "ending value", "step value"];
    let codes = [(34443, 34444), (34445, 34446), (34447, 34448)];
    let mut vals = [0i64, 0, 1];
    for (i, e) in args.iter().enumerate().take(3) {
        let v = cx.ev(e)?;
        let (c_num, c_int) = codes.get(i).copied().unwrap_or((34443, 34444));
        let what = names.get(i).copied().unwrap_or("value");
        let tn = type_name_opt(v.as_ref());
        let Some(v) = v.filter(is_numeric) else {
            return Err(MongoError::location(
                c_num,
                format!("$range requires a numeric {what}, found value of type: {tn}"),
            ));
        };
        let n = int32_of(&v).ok_or_else(|| {
            MongoError::location(
                c_int,
                format!("$range requires a {what} that can be represented as a 32-bit integer, found value: {}", render(&v)),
            )
        })?;
        if let Some(slot) = vals.get_mut(i) {
            *slot = i64::from(n);
        }
    }
    let [start, end, step] = vals;
    if step == 0 {
        return Err(MongoError::location(
            34449,
            "$range requires a non-zero step value",
        ));
    }
    let count = if (step > 0 && end > start) || (step < 0 && end < start) {
        (end - start + step - step.signum()) / step
    } else {
        0
    };
    if count > MAX_RANGE_ELEMENTS {
        return Err(MongoError::new(
            ErrorCode::ExceededMemoryLimit,
            format!("$range would use too much memory ({} bytes) and cannot spill to disk. Memory limit: 67108864 bytes", count * 16),
        ));
    }
    let mut out = Vec::with_capacity(usize::try_from(count).unwrap_or(0));
    let mut cur = start;
    for _ in 0..count {
        out.push(Bson::Int32(i32::try_from(cur).unwrap_or(i32::MAX)));
        cur += step;
    }
    Ok(Some(Bson::Array(out)))
}

pub(super) fn map_filter(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    if nullish(input.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::Array(items)) = input else {
        let code = if name == "$map" { 16883 } else { 28651 };
        return Err(MongoError::location(
            code,
            format!(
                "input to {name} must be an array not {}",
                type_name_opt(input.as_ref())
            ),
        ));
    };
    let Expr::Literal(Bson::String(var)) = arg(args, 1)? else {
        return Err(MongoError::internal("map/filter variable name"));
    };
    let body = arg(args, 2)?;
    let limit = match cx.ev(arg(args, 3)?)? {
        None | Some(Bson::Null) => None,
        Some(v) => match int32_of(&v) {
            Some(n) if n > 0 => Some(usize::try_from(n).unwrap_or(usize::MAX)),
            _ => {
                return Err(MongoError::location(
                    327391,
                    format!("$filter: limit must be represented as a 32-bit integral value and greater than 0: {}", render(&v)),
                ))
            }
        },
    };
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        if limit.is_some_and(|l| out.len() >= l) {
            break;
        }
        let vars = cx.vars.child(vec![(var.clone(), item)]);
        let r = body.eval(cx.root, &vars)?;
        if name == "$map" {
            out.push(r.unwrap_or(Bson::Null));
        } else if truthy(r.as_ref()) {
            // The binding owns the element; take it back out of the scope.
            if let Some((_, v)) = vars.into_frame().pop() {
                out.push(v);
            }
        }
    }
    Ok(Some(Bson::Array(out)))
}

/// Parses the argument of `$map`, `$filter`.
pub(super) fn parse_map_filter(
    name: &'static str,
    arg: &Bson,
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let (allowed, code_obj, code_unknown): (&[&str], i32, i32) = if name == "$map" {
        (&["input", "as", "in"], 16878, 16879)
    } else {
        (&["input", "as", "cond", "limit"], 28646, 28647)
    };
    let d = named_args(
        name,
        arg,
        allowed,
        (
            code_obj,
            &format!("{name} only supports an object as its argument, found: "),
        ),
        (code_unknown, &format!("Unrecognized parameter to {name}: ")),
    )?;
    let input = require(
        d,
        "input",
        28648,
        &format!("Missing 'input' parameter to {name}"),
        scope,
    )?;
    let var = match d.get("as") {
        Some(Bson::String(s)) => {
            check_var_name(s)?;
            s.clone()
        }
        Some(other) => {
            return Err(MongoError::location(
                16866,
                format!(
                    "{name} 'as' must be a string, found: {}",
                    crate::value::type_name(other)
                ),
            ))
        }
        None => "this".to_string(),
    };
    let body_key = if name == "$map" { "in" } else { "cond" };
    let Some(body) = d.get(body_key) else {
        return Err(MongoError::location(
            28649,
            format!("Missing '{body_key}' parameter to {name}"),
        ));
    };
    let body = parse_with_vars(body, std::slice::from_ref(&var), scope)?;
    let limit = parse_opt(d, "limit", scope)?;
    Expr::call(
        name,
        vec![input, Expr::Literal(Bson::String(var)), body, limit],
    )
}

/// Parses the argument of `$reduce`.
pub(super) fn parse_reduce(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    let d = named_args(
        name,
        arg,
        &["input", "initialValue", "in"],
        (40075, "$reduce requires an object as an argument, found: "),
        (40076, "$reduce found an unknown argument: "),
    )?;
    let input = require(
        d,
        "input",
        40077,
        "$reduce requires 'input' to be specified",
        scope,
    )?;
    let init = require(
        d,
        "initialValue",
        40078,
        "$reduce requires 'initialValue' to be specified",
        scope,
    )?;
    let Some(body) = d.get("in") else {
        return Err(MongoError::location(
            40079,
            "$reduce requires 'in' to be specified",
        ));
    };
    let body = parse_with_vars(body, &["value".to_string(), "this".to_string()], scope)?;
    Expr::call(name, vec![input, init, body])
}
