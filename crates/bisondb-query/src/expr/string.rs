//! String expressions. Indexes are in UTF-8 bytes for the `Bytes` variants
//! and in code points for the `CP` variants, as in mongod.

use super::{arg, named_args, parse_opt, require, Ctx, Expr, Scope, Value};
use crate::value::{nullish, type_name, type_name_opt};
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;

/// Strings longer than a BSON document can hold are refused before they
/// are built.
const MAX_STRING_BYTES: usize = 16 * 1024 * 1024;

fn check_len(len: usize, op: &str) -> MongoResult<()> {
    if len > MAX_STRING_BYTES {
        return Err(MongoError::location(
            16493,
            format!("string from {op} is too long: more than {MAX_STRING_BYTES} bytes"),
        ));
    }
    Ok(())
}

/// mongod's string coercion for `$toLower`, `$toUpper`, `$substr*`, `$strcasecmp`.
pub(crate) fn coerce_to_string(v: &Value, code: i32) -> MongoResult<String> {
    Ok(match v {
        None | Some(Bson::Null) | Some(Bson::Undefined) => String::new(),
        Some(Bson::String(s)) | Some(Bson::Symbol(s)) => s.clone(),
        Some(Bson::Int32(i)) => i.to_string(),
        Some(Bson::Int64(i)) => i.to_string(),
        Some(Bson::Double(d)) => super::convert::double_to_string(*d),
        Some(Bson::Decimal128(d)) => d.to_string(),
        Some(Bson::DateTime(d)) => super::convert::date_to_string(*d),
        Some(Bson::Timestamp(t)) => format!("Timestamp({}, {})", t.time, t.increment),
        Some(other) => {
            return Err(MongoError::location(
                code,
                format!(
                    "can't convert from BSON type {} to String",
                    type_name(other)
                ),
            ))
        }
    })
}

fn int_arg(v: &Value, op: &str, what: &str, code: i32) -> MongoResult<i64> {
    match v {
        Some(Bson::Int32(i)) => Ok(i64::from(*i)),
        Some(Bson::Int64(i)) => Ok(*i),
        Some(Bson::Double(d)) if d.fract() == 0.0 && d.is_finite() => Ok(*d as i64),
        Some(Bson::Double(_)) => Ok(i64::MIN),
        other => Err(MongoError::location(
            code,
            format!(
                "{op}: {what} must be a numeric type (is BSON type {})",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$concat`.
pub(super) fn concat(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut out = String::new();
    let mut null = false;
    for a in args {
        match cx.ev(a)? {
            Some(Bson::String(s)) => {
                check_len(out.len().saturating_add(s.len()), "$concat")?;
                out.push_str(&s)
            }
            v if nullish(v.as_ref()) => null = true,
            Some(v) => {
                return Err(MongoError::location(
                    16702,
                    format!("$concat only supports strings, not {}", type_name(&v)),
                ))
            }
            None => null = true,
        }
    }
    Ok(Some(if null { Bson::Null } else { Bson::String(out) }))
}

/// `$toLower`, `$toUpper`.
pub(super) fn change_case(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let s = coerce_to_string(&cx.ev(arg(args, 0)?)?, 16007)?;
    // mongod changes case of ASCII letters only.
    Ok(Some(Bson::String(if name == "$toLower" {
        s.to_ascii_lowercase()
    } else {
        s.to_ascii_uppercase()
    })))
}

/// `$substr`, `$substrBytes`.
pub(super) fn substr_bytes(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let s = coerce_to_string(&cx.ev(arg(args, 0)?)?, 16007)?;
    let start = int_arg(
        &cx.ev(arg(args, 1)?)?,
        "$substrBytes",
        "starting index",
        16034,
    )?;
    let len = int_arg(&cx.ev(arg(args, 2)?)?, "$substrBytes", "length", 16035)?;
    if start < 0 {
        return Err(MongoError::location(
            50752,
            format!("$substrBytes: starting index must be non-negative (got: {start})"),
        ));
    }
    let bytes = s.as_bytes();
    let start = usize::try_from(start)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    if !s.is_char_boundary(start) {
        return Err(MongoError::location(
            28656,
            "$substrBytes:  Invalid range, starting index is a UTF-8 continuation byte.",
        ));
    }
    let end = if len < 0 {
        bytes.len()
    } else {
        start
            .saturating_add(usize::try_from(len).unwrap_or(usize::MAX))
            .min(bytes.len())
    };
    if !s.is_char_boundary(end) {
        return Err(MongoError::location(
            28657,
            "$substrBytes:  Invalid range, ending index is in the middle of a UTF-8 character.",
        ));
    }
    Ok(Some(Bson::String(
        s.get(start..end).unwrap_or("").to_string(),
    )))
}

/// `$substrCP`.
pub(super) fn substr_cp(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let s = coerce_to_string(&cx.ev(arg(args, 0)?)?, 16007)?;
    let start = int_arg(&cx.ev(arg(args, 1)?)?, "$substrCP", "starting index", 34450)?;
    let len = int_arg(&cx.ev(arg(args, 2)?)?, "$substrCP", "length", 34452)?;
    if start < 0 {
        return Err(MongoError::location(
            34455,
            "$substrCP: the starting index must be nonnegative integer.",
        ));
    }
    if len < 0 {
        return Err(MongoError::location(
            34454,
            "$substrCP: length must be a nonnegative integer.",
        ));
    }
    let out: String = s
        .chars()
        .skip(usize::try_from(start).unwrap_or(usize::MAX))
        .take(usize::try_from(len).unwrap_or(usize::MAX))
        .collect();
    Ok(Some(Bson::String(out)))
}

/// `$strLenBytes`, `$strLenCP`.
pub(super) fn str_len(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match cx.ev(arg(args, 0)?)? {
        Some(Bson::String(s)) => {
            let n = if name == "$strLenBytes" {
                s.len()
            } else {
                s.chars().count()
            };
            Ok(Some(Bson::Int32(i32::try_from(n).unwrap_or(i32::MAX))))
        }
        other => Err(MongoError::location(
            if name == "$strLenBytes" { 34473 } else { 34471 },
            format!(
                "{name} requires a string argument, found: {}",
                type_name_opt(other.as_ref())
            ),
        )),
    }
}

/// `$split`.
pub(super) fn split(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let s = cx.ev(arg(args, 0)?)?;
    let d = cx.ev(arg(args, 1)?)?;
    if nullish(s.as_ref()) || nullish(d.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::String(s)) = s else {
        return Err(MongoError::location(
            40085,
            format!(
                "$split requires an expression that evaluates to a string as a first argument, found: {}",
                type_name_opt(s.as_ref())
            ),
        ));
    };
    let Some(Bson::String(d)) = d else {
        return Err(MongoError::location(
            40086,
            format!(
                "$split requires an expression that evaluates to a string as a second argument, found: {}",
                type_name_opt(d.as_ref())
            ),
        ));
    };
    if d.is_empty() {
        return Err(MongoError::location(
            40087,
            "$split requires a non-empty separator",
        ));
    }
    Ok(Some(Bson::Array(
        s.split(d.as_str())
            .map(|p| Bson::String(p.to_string()))
            .collect(),
    )))
}

/// `$trim`, `$ltrim`, `$rtrim`.
pub(super) fn trim(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    if nullish(input.as_ref()) {
        return Ok(Some(Bson::Null));
    }
    let Some(Bson::String(s)) = input else {
        return Err(MongoError::location(
            50699,
            format!(
                "{name} requires its input to be a string, got {} (of type {}) instead.",
                super::render_value(&input),
                type_name_opt(input.as_ref())
            ),
        ));
    };
    let chars = cx.ev(arg(args, 1)?)?;
    let set: Option<Vec<char>> = match chars {
        None => None,
        Some(Bson::Null) | Some(Bson::Undefined) => return Ok(Some(Bson::Null)),
        Some(Bson::String(c)) => Some(c.chars().collect()),
        Some(other) => {
            return Err(MongoError::location(
                50700,
                format!(
                    "{name} requires 'chars' to be a string, got {} (of type {}) instead.",
                    crate::value::render(&other),
                    type_name(&other)
                ),
            ))
        }
    };
    let is_trim = |c: char| match &set {
        Some(set) => set.contains(&c),
        None => c == '\0' || c.is_whitespace(),
    };
    let out = match name {
        "$ltrim" => s.trim_start_matches(is_trim),
        "$rtrim" => s.trim_end_matches(is_trim),
        _ => s.trim_matches(is_trim),
    };
    Ok(Some(Bson::String(out.to_string())))
}

/// `$indexOfBytes`.
pub(super) fn index_of_bytes(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Some((s, sub)) = index_of_strings(args, cx, "$indexOfBytes", (40091, 40092))? else {
        return Ok(Some(Bson::Null));
    };
    let Some((start, end)) = index_bounds(args, cx, "$indexOfBytes", s.len())? else {
        return Ok(Some(Bson::Int32(-1)));
    };
    Ok(Some(first_index(s.as_bytes(), sub.as_bytes(), start, end)))
}

/// `$strcasecmp`.
pub(super) fn strcasecmp(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let a = coerce_to_string(&cx.ev(arg(args, 0)?)?, 16007)?.to_ascii_uppercase();
    let b = coerce_to_string(&cx.ev(arg(args, 1)?)?, 16007)?.to_ascii_uppercase();
    Ok(Some(Bson::Int32(match a.cmp(&b) {
        std::cmp::Ordering::Less => -1,
        std::cmp::Ordering::Equal => 0,
        std::cmp::Ordering::Greater => 1,
    })))
}

/// `$replaceOne`, `$replaceAll`.
pub(super) fn replace(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let mut vals: Vec<Option<String>> = Vec::with_capacity(3);
    for (i, what) in ["input", "find", "replacement"].iter().enumerate() {
        match cx.ev(arg(args, i)?)? {
            Some(Bson::String(s)) => vals.push(Some(s)),
            v if nullish(v.as_ref()) => vals.push(None),
            Some(other) => {
                return Err(MongoError::location(
                    51746,
                    format!(
                        "{name} requires that '{what}' be a string, found: {}",
                        crate::value::render(&other)
                    ),
                ))
            }
            None => vals.push(None),
        }
    }
    let (Some(Some(input)), Some(Some(find)), Some(Some(rep))) =
        (vals.first(), vals.get(1), vals.get(2))
    else {
        return Ok(Some(Bson::Null));
    };
    let hits = if name == "$replaceOne" {
        usize::from(input.contains(find.as_str()))
    } else {
        input.matches(find.as_str()).count()
    };
    check_len(
        input.len().saturating_add(hits.saturating_mul(rep.len())),
        name,
    )?;
    Ok(Some(Bson::String(if name == "$replaceOne" {
        input.replacen(find.as_str(), rep, 1)
    } else {
        input.replace(find.as_str(), rep)
    })))
}

/// The optional start and end indexes (arguments 3 and 4) of `$indexOfBytes` and
/// `$indexOfCP`, clamped to `len`; `None` when the range is empty (result -1).
fn index_bounds(
    args: &[Expr],
    cx: &Ctx,
    op: &str,
    len: usize,
) -> MongoResult<Option<(usize, usize)>> {
    let mut bounds = [0usize, len];
    for (i, slot) in bounds.iter_mut().enumerate() {
        if let Some(e) = args.get(i + 2) {
            let v = cx.ev(e)?;
            let n = match v {
                Some(Bson::Int32(x)) => i64::from(x),
                Some(Bson::Int64(x)) => x,
                Some(Bson::Double(d)) if d.fract() == 0.0 => d as i64,
                _ => {
                    return Err(MongoError::location(
                        40096,
                        format!(
                            "{op} requires an integral {} index, found a value of type: {}",
                            if i == 0 { "starting" } else { "ending" },
                            type_name_opt(v.as_ref())
                        ),
                    ))
                }
            };
            if n < 0 {
                return Err(MongoError::location(
                    40097,
                    format!(
                        "{op} requires a nonnegative {} index, found: {n}",
                        if i == 0 { "start" } else { "end" }
                    ),
                ));
            }
            *slot = usize::try_from(n).unwrap_or(usize::MAX);
        }
    }
    let [start, end] = bounds;
    let end = end.min(len);
    Ok((start <= end).then_some((start, end)))
}

/// The string and substring arguments of `op` (`$indexOfBytes`,
/// `$indexOfCP`); `None` when the string is null or missing (the result is
/// then null). `codes`: the errors for a string and a substring that are not
/// strings.
fn index_of_strings(
    args: &[Expr],
    cx: &Ctx,
    op: &str,
    codes: (i32, i32),
) -> MongoResult<Option<(String, String)>> {
    let s = cx.ev(arg(args, 0)?)?;
    if nullish(s.as_ref()) {
        return Ok(None);
    }
    let Some(Bson::String(s)) = s else {
        return Err(MongoError::location(
            codes.0,
            format!(
                "{op} requires a string as the first argument, found: {}",
                type_name_opt(s.as_ref())
            ),
        ));
    };
    let sub = cx.ev(arg(args, 1)?)?;
    let Some(Bson::String(sub)) = sub else {
        return Err(MongoError::location(
            codes.1,
            format!(
                "{op} requires a string as the second argument, found: {}",
                type_name_opt(sub.as_ref())
            ),
        ));
    };
    Ok(Some((s, sub)))
}

/// The result of `$indexOfBytes`/`$indexOfCP`: where `needle` first starts
/// within `hay[start..end]`, counted from the start of `hay`, or -1.
fn first_index<T: PartialEq>(hay: &[T], needle: &[T], start: usize, end: usize) -> Bson {
    let hay = hay.get(start..end).unwrap_or_default();
    let found = if needle.is_empty() {
        Some(0)
    } else {
        hay.windows(needle.len()).position(|w| w == needle)
    };
    Bson::Int32(found.map_or(-1, |p| i32::try_from(p + start).unwrap_or(i32::MAX)))
}

pub(super) fn index_of_cp(_name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let Some((s, sub)) = index_of_strings(args, cx, "$indexOfCP", (40093, 40094))? else {
        return Ok(Some(Bson::Null));
    };
    let chars: Vec<char> = s.chars().collect();
    let needle: Vec<char> = sub.chars().collect();
    let Some((start, end)) = index_bounds(args, cx, "$indexOfCP", chars.len())? else {
        return Ok(Some(Bson::Int32(-1)));
    };
    Ok(Some(first_index(&chars, &needle, start, end)))
}

/// A regex compiled once at parse time; equality is by source.
#[derive(Debug, Clone)]
pub struct CompiledRegex(std::sync::Arc<regex::Regex>);

impl CompiledRegex {
    pub fn pattern(&self) -> &str {
        self.0.as_str()
    }
}

impl PartialEq for CompiledRegex {
    fn eq(&self, other: &Self) -> bool {
        self.0.as_str() == other.0.as_str()
    }
}

fn build_regex(name: &str, pattern: &str, opts: &str) -> MongoResult<regex::Regex> {
    let mut flags = String::new();
    for c in opts.chars() {
        match c {
            'i' | 'm' | 's' | 'x' => {
                if !flags.contains(c) {
                    flags.push(c);
                }
            }
            other => {
                return Err(MongoError::location(
                    51108,
                    format!("{name} invalid flag in regex options: {other}"),
                ));
            }
        }
    }
    let src = if flags.is_empty() {
        pattern.to_string()
    } else {
        format!("(?{flags}){pattern}")
    };
    regex::Regex::new(&src)
        .map_err(|e| MongoError::location(51111, format!("Invalid Regex in {name}: {e}")))
}

/// Pattern and options from the `regex` and `options` values.
fn regex_source(name: &str, re: &Bson, opts: &Value) -> MongoResult<(String, String)> {
    let opt_str = match opts {
        None | Some(Bson::Null) | Some(Bson::Undefined) => None,
        Some(Bson::String(o)) => Some(o.clone()),
        Some(other) => {
            return Err(MongoError::location(
                51106,
                format!(
                    "{name} needs 'options' to be of type string, found: {}",
                    type_name(other)
                ),
            ))
        }
    };
    match re {
        Bson::String(p) => Ok((p.clone(), opt_str.unwrap_or_default())),
        Bson::RegularExpression(r) => {
            let own = r.options.to_string();
            if !own.is_empty() && opt_str.as_deref().is_some_and(|o| !o.is_empty()) {
                return Err(MongoError::location(
                    51107,
                    format!("{name} found regex option(s) specified in both 'regex' and 'option' fields"),
                ));
            }
            Ok((
                r.pattern.to_string(),
                if own.is_empty() {
                    opt_str.unwrap_or_default()
                } else {
                    own
                },
            ))
        }
        other => Err(MongoError::location(
            51105,
            format!(
                "{name} needs 'regex' to be of type string or regex, found: {}",
                type_name(other)
            ),
        )),
    }
}

/// Compiles a constant `regex` argument once, at parse time.
pub(super) fn precompile_regex(name: &str, args: &mut [Expr]) -> MongoResult<()> {
    let opts = match args.get(2) {
        Some(Expr::Missing) | None => None,
        Some(Expr::Literal(v)) => Some(v.clone()),
        Some(_) => return Ok(()),
    };
    if let Some(slot) = args.get_mut(1) {
        if let Expr::Literal(re) = slot {
            if nullish(Some(re)) {
                return Ok(());
            }
            let (p, o) = regex_source(name, re, &opts)?;
            *slot = Expr::Regex(CompiledRegex(std::sync::Arc::new(build_regex(
                name, &p, &o,
            )?)));
        }
    }
    Ok(())
}

fn match_doc(s: &str, caps: &regex::Captures<'_>) -> Bson {
    let m = caps.get(0);
    // mongod reports the match position in code points.
    let idx = m.map_or(0, |m| s.get(..m.start()).map_or(0, |p| p.chars().count()));
    let captures: Vec<Bson> = caps
        .iter()
        .skip(1)
        .map(|g| g.map_or(Bson::Null, |g| Bson::String(g.as_str().to_string())))
        .collect();
    Bson::Document(bson::doc! {
        "match": m.map_or("", |m| m.as_str()),
        "idx": i32::try_from(idx).unwrap_or(i32::MAX),
        "captures": captures,
    })
}

pub(super) fn regex_op(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    let input = cx.ev(arg(args, 0)?)?;
    let compiled;
    let re: &regex::Regex = match arg(args, 1)? {
        Expr::Regex(r) => &r.0,
        e => {
            let v = cx.ev(e)?;
            let Some(v) = v.filter(|v| !nullish(Some(v))) else {
                return Ok(Some(null_result(name)));
            };
            let opts = cx.ev(arg(args, 2)?)?;
            let (p, o) = regex_source(name, &v, &opts)?;
            compiled = build_regex(name, &p, &o)?;
            &compiled
        }
    };
    let s = match input {
        Some(Bson::String(s)) => s,
        v if nullish(v.as_ref()) => return Ok(Some(null_result(name))),
        other => {
            return Err(MongoError::location(
                51104,
                format!(
                    "{name} needs 'input' to be of type string, found: {}",
                    type_name_opt(other.as_ref())
                ),
            ))
        }
    };
    Ok(Some(match name {
        "$regexMatch" => Bson::Boolean(re.is_match(&s)),
        "$regexFind" => match re.captures(&s) {
            Some(c) => match_doc(&s, &c),
            None => Bson::Null,
        },
        _ => Bson::Array(re.captures_iter(&s).map(|c| match_doc(&s, &c)).collect()),
    }))
}

fn null_result(name: &str) -> Bson {
    match name {
        "$regexMatch" => Bson::Boolean(false),
        "$regexFindAll" => Bson::Array(Vec::new()),
        _ => Bson::Null,
    }
}

/// Parses the argument of `$trim`, `$ltrim`, `$rtrim`.
pub(super) fn parse_trim(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    let d = named_args(
        name,
        arg,
        &["input", "chars"],
        (
            50696,
            &format!("{name} requires an object as an argument, found: "),
        ),
        (50694, &format!("{name} found an unknown argument: ")),
    )?;
    let input = require(
        d,
        "input",
        50695,
        &format!("{name} requires an 'input' field"),
        scope,
    )?;
    let chars = parse_opt(d, "chars", scope)?;
    Expr::call(name, vec![input, chars])
}
