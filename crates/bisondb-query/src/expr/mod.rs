//! Aggregation expressions: parsed once from BSON, evaluated per document.
//!
//! Every operator is an [`Expr::Call`] whose arguments are kept unevaluated,
//! so operators that are lazy (`$cond`, `$and`, `$ifNull`, `$switch`) or bind
//! variables (`$let`, `$map`, `$filter`, `$reduce`) need no special variant.
//! Evaluation returns `Option<Bson>`: `None` is a missing value, which differs
//! from null (missing fields are dropped by `$project`, `$$REMOVE` is missing).

mod arith;
mod array;
mod convert;
mod date;
mod deps;
mod hashed;
mod object;
mod string;
/// Moved to [`crate::value`] (below expressions); kept here for callers
/// outside the crate that name `expr::value`.
pub use crate::value;

/// Calendar month arithmetic, shared with `$densify`'s month/quarter/year units.
pub(crate) use date::add_months;
/// The walk of [`Expr::top_level_deps`], for the accumulators' own fields.
pub(crate) use deps::push_top;

use crate::collation::Collation;
use crate::compare::compare_bson_in;
use crate::path::{check_field_name, get_path_bson_fanout};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, DateTime, Document};
use std::cmp::Ordering;
use std::sync::Arc;
use value::{render, truthy};

pub use crate::value::Value;

/// A parsed aggregation expression.
#[derive(Debug, Clone, PartialEq)]
pub enum Expr {
    /// A constant.
    Literal(Bson),
    /// A missing value (`$$REMOVE`, or an optional argument not given).
    Missing,
    /// `"$a.b"`: a path into `$$CURRENT`.
    Field(String),
    /// `"$$name"` or `"$$name.a.b"`.
    Var { name: String, path: Option<String> },
    /// `{a: <expr>, b: <expr>}`.
    Object(Vec<(String, Expr)>),
    /// `[<expr>, ...]`.
    Array(Vec<Expr>),
    /// `{$op: args}` with its arguments unevaluated.
    Call(&'static str, Vec<Expr>),
    /// A regular expression compiled at parse time (constant `regex` of
    /// `$regexMatch` and friends).
    Regex(string::CompiledRegex),
}

/// Variable bindings visible to an expression, innermost frame first.
#[derive(Debug)]
pub struct Vars<'a> {
    parent: Option<&'a Vars<'a>>,
    frame: Vec<(String, Bson)>,
    now: DateTime,
    /// The operation's collation, set on the top frame only (children find it
    /// through `parent`, so a nested scope costs no reference count).
    collation: Option<Arc<Collation>>,
    /// Where `{$meta: "textScore"}` reads scores (top frame only, as the
    /// collation): an aggregation after a leading `$text` `$match`.
    text_scores: Option<Arc<crate::text::ScoresById>>,
}

impl Default for Vars<'static> {
    fn default() -> Self {
        Vars::new()
    }
}

impl Vars<'static> {
    /// Top-level bindings; `$$NOW` is fixed when this is created, so one
    /// command sees one time.
    pub fn new() -> Vars<'static> {
        Vars {
            parent: None,
            frame: Vec::new(),
            now: DateTime::now(),
            collation: None,
            text_scores: None,
        }
    }

    /// Top-level bindings with a given `$$NOW` (tests, or a command-wide clock).
    pub fn with_now(now: DateTime) -> Vars<'static> {
        Vars {
            parent: None,
            frame: Vec::new(),
            now,
            collation: None,
            text_scores: None,
        }
    }

    /// Top-level bindings with a given `$$NOW` and the operation's collation
    /// (`None`: simple), which string comparisons in expressions then use.
    pub fn with_collation(now: DateTime, collation: Option<Arc<Collation>>) -> Vars<'static> {
        Vars {
            parent: None,
            frame: Vec::new(),
            now,
            collation,
            text_scores: None,
        }
    }
}

impl<'a> Vars<'a> {
    /// A nested scope adding `bindings` (used by `$let`, `$map`, ...).
    pub fn child(&'a self, bindings: Vec<(String, Bson)>) -> Vars<'a> {
        Vars {
            parent: Some(self),
            frame: bindings,
            now: self.now,
            collation: None,
            text_scores: None,
        }
    }

    /// The same top-level bindings with text scores for `{$meta: "textScore"}`.
    pub fn with_text_scores(mut self, scores: Option<Arc<crate::text::ScoresById>>) -> Self {
        self.text_scores = scores;
        self
    }

    /// The text score of the document `root` (by its `_id`), if recorded.
    fn text_score(&self, root: &Document) -> Option<f64> {
        let mut cur = self;
        while let Some(p) = cur.parent {
            cur = p;
        }
        cur.text_scores.as_ref()?.get(root.get("_id")?)
    }

    /// The collation string comparisons use (`None`: simple).
    pub fn collation(&self) -> Option<&Collation> {
        self.collation_arc().map(Arc::as_ref)
    }

    /// [`Vars::collation`], shared (for a `SortSpec` that must hold it).
    pub fn collation_arc(&self) -> Option<&Arc<Collation>> {
        let mut cur = self;
        while let Some(p) = cur.parent {
            cur = p;
        }
        cur.collation.as_ref()
    }

    fn get(&self, name: &str) -> Option<&Bson> {
        let mut cur = Some(self);
        while let Some(v) = cur {
            if let Some((_, b)) = v.frame.iter().rev().find(|(n, _)| n == name) {
                return Some(b);
            }
            cur = v.parent;
        }
        None
    }

    pub fn now(&self) -> DateTime {
        self.now
    }

    fn into_frame(self) -> Vec<(String, Bson)> {
        self.frame
    }
}

/// Variables in scope while parsing, to reject undefined ones as mongod does.
#[derive(Debug, Default)]
pub(crate) struct Scope {
    names: Vec<String>,
    depth: usize,
}

/// Deepest expression nesting accepted (mongod's BSON depth limit is 200).
const MAX_PARSE_DEPTH: usize = 200;

impl Scope {
    fn defined(&self, name: &str) -> bool {
        matches!(
            name,
            "ROOT" | "CURRENT" | "REMOVE" | "NOW" | "DESCEND" | "PRUNE" | "KEEP"
        ) || self.names.iter().any(|n| n == name)
    }
}

/// Operators implemented here: name and how to parse the argument.
#[derive(Clone, Copy)]
enum Args {
    /// Positional, with inclusive bounds on the count.
    N(usize, usize),
    /// The operator parses its own argument shape.
    Custom,
}

/// Sorted by name (binary searched).
const OPERATORS: &[(&str, Args)] = &[
    ("$abs", Args::N(1, 1)),
    ("$acos", Args::N(1, 1)),
    ("$acosh", Args::N(1, 1)),
    ("$add", Args::N(0, usize::MAX)),
    ("$allElementsTrue", Args::N(1, 1)),
    ("$and", Args::N(0, usize::MAX)),
    ("$anyElementTrue", Args::N(1, 1)),
    ("$arrayElemAt", Args::N(2, 2)),
    ("$arrayToObject", Args::N(1, 1)),
    ("$asin", Args::N(1, 1)),
    ("$asinh", Args::N(1, 1)),
    ("$atan", Args::N(1, 1)),
    ("$atan2", Args::N(2, 2)),
    ("$atanh", Args::N(1, 1)),
    ("$avg", Args::N(1, usize::MAX)),
    ("$binarySize", Args::N(1, 1)),
    ("$bitAnd", Args::N(0, usize::MAX)),
    ("$bitNot", Args::N(1, 1)),
    ("$bitOr", Args::N(0, usize::MAX)),
    ("$bitXor", Args::N(0, usize::MAX)),
    ("$bsonSize", Args::N(1, 1)),
    ("$ceil", Args::N(1, 1)),
    ("$cmp", Args::N(2, 2)),
    ("$concat", Args::N(0, usize::MAX)),
    ("$concatArrays", Args::N(0, usize::MAX)),
    ("$cond", Args::Custom),
    ("$convert", Args::Custom),
    ("$cos", Args::N(1, 1)),
    ("$cosh", Args::N(1, 1)),
    ("$dateAdd", Args::Custom),
    ("$dateDiff", Args::Custom),
    ("$dateFromParts", Args::Custom),
    ("$dateFromString", Args::Custom),
    ("$dateSubtract", Args::Custom),
    ("$dateToParts", Args::Custom),
    ("$dateToString", Args::Custom),
    ("$dateTrunc", Args::Custom),
    ("$dayOfMonth", Args::Custom),
    ("$dayOfWeek", Args::Custom),
    ("$dayOfYear", Args::Custom),
    ("$degreesToRadians", Args::N(1, 1)),
    ("$divide", Args::N(2, 2)),
    ("$eq", Args::N(2, 2)),
    ("$exp", Args::N(1, 1)),
    ("$filter", Args::Custom),
    ("$first", Args::N(1, 1)),
    ("$firstN", Args::Custom),
    ("$floor", Args::N(1, 1)),
    ("$function", Args::Custom),
    ("$getField", Args::Custom),
    ("$gt", Args::N(2, 2)),
    ("$gte", Args::N(2, 2)),
    ("$hour", Args::Custom),
    ("$ifNull", Args::N(2, usize::MAX)),
    ("$in", Args::N(2, 2)),
    ("$indexOfArray", Args::N(2, 4)),
    ("$indexOfBytes", Args::N(2, 4)),
    ("$indexOfCP", Args::N(2, 4)),
    ("$isArray", Args::N(1, 1)),
    ("$isNumber", Args::N(1, 1)),
    ("$isoDayOfWeek", Args::Custom),
    ("$isoWeek", Args::Custom),
    ("$isoWeekYear", Args::Custom),
    ("$last", Args::N(1, 1)),
    ("$lastN", Args::Custom),
    ("$let", Args::Custom),
    ("$literal", Args::Custom),
    ("$ln", Args::N(1, 1)),
    ("$log", Args::N(2, 2)),
    ("$log10", Args::N(1, 1)),
    ("$lt", Args::N(2, 2)),
    ("$lte", Args::N(2, 2)),
    ("$ltrim", Args::Custom),
    ("$map", Args::Custom),
    ("$max", Args::N(1, usize::MAX)),
    ("$maxN", Args::Custom),
    ("$median", Args::Custom),
    ("$mergeObjects", Args::N(0, usize::MAX)),
    ("$meta", Args::Custom),
    ("$millisecond", Args::Custom),
    ("$min", Args::N(1, usize::MAX)),
    ("$minN", Args::Custom),
    ("$minute", Args::Custom),
    ("$mod", Args::N(2, 2)),
    ("$month", Args::Custom),
    ("$multiply", Args::N(0, usize::MAX)),
    ("$ne", Args::N(2, 2)),
    ("$not", Args::N(1, 1)),
    ("$objectToArray", Args::N(1, 1)),
    ("$or", Args::N(0, usize::MAX)),
    ("$percentile", Args::Custom),
    ("$pow", Args::N(2, 2)),
    ("$radiansToDegrees", Args::N(1, 1)),
    ("$rand", Args::Custom),
    ("$range", Args::N(2, 3)),
    ("$reduce", Args::Custom),
    ("$regexFind", Args::Custom),
    ("$regexFindAll", Args::Custom),
    ("$regexMatch", Args::Custom),
    ("$replaceAll", Args::Custom),
    ("$replaceOne", Args::Custom),
    ("$reverseArray", Args::N(1, 1)),
    ("$round", Args::N(1, 2)),
    ("$rtrim", Args::Custom),
    ("$second", Args::Custom),
    ("$setDifference", Args::N(2, 2)),
    ("$setEquals", Args::N(2, usize::MAX)),
    ("$setField", Args::Custom),
    ("$setIntersection", Args::N(0, usize::MAX)),
    ("$setIsSubset", Args::N(2, 2)),
    ("$setUnion", Args::N(0, usize::MAX)),
    ("$sin", Args::N(1, 1)),
    ("$sinh", Args::N(1, 1)),
    ("$size", Args::N(1, 1)),
    ("$slice", Args::N(2, 3)),
    ("$sortArray", Args::Custom),
    ("$split", Args::N(2, 2)),
    ("$sqrt", Args::N(1, 1)),
    ("$stdDevPop", Args::N(1, usize::MAX)),
    ("$stdDevSamp", Args::N(1, usize::MAX)),
    ("$strLenBytes", Args::N(1, 1)),
    ("$strLenCP", Args::N(1, 1)),
    ("$strcasecmp", Args::N(2, 2)),
    ("$substr", Args::N(3, 3)),
    ("$substrBytes", Args::N(3, 3)),
    ("$substrCP", Args::N(3, 3)),
    ("$subtract", Args::N(2, 2)),
    ("$sum", Args::N(1, usize::MAX)),
    ("$switch", Args::Custom),
    ("$tan", Args::N(1, 1)),
    ("$tanh", Args::N(1, 1)),
    ("$toBool", Args::N(1, 1)),
    ("$toDate", Args::N(1, 1)),
    ("$toDecimal", Args::N(1, 1)),
    ("$toDouble", Args::N(1, 1)),
    ("$toHashedIndexKey", Args::Custom),
    ("$toInt", Args::N(1, 1)),
    ("$toLong", Args::N(1, 1)),
    ("$toLower", Args::N(1, 1)),
    ("$toObjectId", Args::N(1, 1)),
    ("$toString", Args::N(1, 1)),
    ("$toUpper", Args::N(1, 1)),
    ("$trim", Args::Custom),
    ("$trunc", Args::N(1, 2)),
    ("$tsIncrement", Args::N(1, 1)),
    ("$tsSecond", Args::N(1, 1)),
    ("$type", Args::N(1, 1)),
    ("$unsetField", Args::Custom),
    ("$week", Args::Custom),
    ("$year", Args::Custom),
    ("$zip", Args::Custom),
];

/// mongod expression operators BisonDB does not implement yet. Sorted.
const NOT_IMPLEMENTED: &[&str] = &[];

fn lookup_op(name: &str) -> Option<(&'static str, Args)> {
    OPERATORS
        .binary_search_by(|(n, _)| n.cmp(&name))
        .ok()
        .and_then(|i| OPERATORS.get(i).copied())
}

/// Validates a field path used as `"$a.b"` (without the `$`).
fn check_field_path(path: &str) -> MongoResult<()> {
    if path.is_empty() {
        return Err(MongoError::location(
            16872,
            "'$' by itself is not a valid FieldPath",
        ));
    }
    for p in path.split('.') {
        check_field_name(p)?;
        if p.contains('\0') {
            return Err(MongoError::location(
                16411,
                "FieldPath field names may not contain '\0'.",
            ));
        }
    }
    Ok(())
}

/// Validates a user variable name (`$let`, `as` of `$map`/`$filter`).
pub(crate) fn check_var_name(name: &str) -> MongoResult<()> {
    let mut chars = name.chars();
    let Some(first) = chars.next() else {
        return Err(MongoError::location(
            16866,
            "empty variable names are not allowed",
        ));
    };
    if !first.is_ascii_lowercase() && first.is_ascii() {
        return Err(MongoError::location(
            16867,
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(bad) = chars.find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii())) {
        return Err(MongoError::location(
            16868,
            format!("'{name}' contains an invalid character for a variable name: '{bad}'"),
        ));
    }
    Ok(())
}

impl Expr {
    /// Parses an expression.
    pub fn parse(v: &Bson) -> MongoResult<Expr> {
        Self::parse_in(v, &mut Scope::default())
    }

    /// Parses an expression with user variables already in scope.
    pub(crate) fn parse_in(v: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
        // Bound recursion on client-supplied nesting (mongod caps BSON depth too).
        if scope.depth >= MAX_PARSE_DEPTH {
            return Err(MongoError::new(
                ErrorCode::Overflow,
                format!("expression nesting exceeds the maximum depth of {MAX_PARSE_DEPTH}"),
            ));
        }
        scope.depth += 1;
        let r = Self::parse_in_inner(v, scope);
        scope.depth -= 1;
        r
    }

    fn parse_in_inner(v: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
        match v {
            Bson::String(s) if s.starts_with("$$") => Self::parse_var(&s[2..], scope),
            Bson::String(s) if s.starts_with('$') => {
                check_field_path(&s[1..])?;
                Ok(Expr::Field(s[1..].to_string()))
            }
            Bson::Document(d) => Self::parse_doc(d, scope),
            Bson::Array(a) => Ok(Expr::Array(
                a.iter()
                    .map(|x| Self::parse_in(x, scope))
                    .collect::<MongoResult<_>>()?,
            )),
            other => Ok(Expr::Literal(other.clone())),
        }
    }

    fn parse_var(s: &str, scope: &Scope) -> MongoResult<Expr> {
        let (name, path) = match s.split_once('.') {
            Some((n, p)) => (n, Some(p)),
            None => (s, None),
        };
        if let Some(p) = path {
            check_field_path(p)?;
        }
        if name.is_empty() {
            return Err(MongoError::location(
                16869,
                "empty variable names are not allowed",
            ));
        }
        if !scope.defined(name) {
            if matches!(
                name,
                "CLUSTER_TIME" | "SEARCH_META" | "USER_ROLES" | "SEARCH_SCORE"
            ) {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("The variable $${name} is not supported by BisonDB yet"),
                ));
            }
            return Err(MongoError::location(
                17276,
                format!("Use of undefined variable: {name}"),
            ));
        }
        if name == "REMOVE" && path.is_none() {
            return Ok(Expr::Missing);
        }
        Ok(Expr::Var {
            name: name.to_string(),
            path: path.map(str::to_string),
        })
    }

    fn parse_doc(d: &Document, scope: &mut Scope) -> MongoResult<Expr> {
        let Some(first) = d.keys().next() else {
            return Ok(Expr::Literal(Bson::Document(Document::new())));
        };
        if first.starts_with('$') {
            if d.len() != 1 {
                return Err(MongoError::location(
                    15983,
                    format!(
                        "an expression specification must contain exactly one field, the name of the expression. Found {} fields in {}",
                        d.len(),
                        value::render_doc(d)
                    ),
                ));
            }
            let arg = d
                .get(first)
                .ok_or_else(|| MongoError::internal("first key vanished"))?;
            return Self::parse_call(first, arg, scope);
        }
        let mut fields = Vec::with_capacity(d.len());
        for (k, v) in d {
            if k.starts_with('$') {
                return Err(MongoError::location(
                    16404,
                    format!("FieldPath field names may not start with '$'. Found: {k}"),
                ));
            }
            if k.contains('.') {
                return Err(MongoError::location(
                    16412,
                    format!("FieldPath field names may not contain '.'. Found: {k}"),
                ));
            }
            if k.is_empty() {
                return Err(MongoError::location(
                    16410,
                    "FieldPath field names may not be empty strings.",
                ));
            }
            fields.push((k.clone(), Self::parse_in(v, scope)?));
        }
        Ok(Expr::Object(fields))
    }

    fn parse_call(name: &str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
        let Some((name, args)) = lookup_op(name) else {
            if NOT_IMPLEMENTED.binary_search(&name).is_ok() {
                return Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("Expression {name} is not supported by BisonDB yet"),
                ));
            }
            return Err(MongoError::new(
                ErrorCode::InvalidPipelineOperator,
                format!("Unrecognized expression '{name}'"),
            ));
        };
        match args {
            Args::N(min, max) => {
                let parsed: Vec<Expr> = match arg {
                    Bson::Array(a) => a
                        .iter()
                        .map(|x| Self::parse_in(x, scope))
                        .collect::<MongoResult<_>>()?,
                    other => vec![Self::parse_in(other, scope)?],
                };
                check_arity(name, parsed.len(), min, max)?;
                Ok(Expr::Call(name, parsed))
            }
            Args::Custom => parse_custom(name, arg, scope),
        }
    }

    /// True when the expression is a constant.
    pub fn is_literal(&self) -> bool {
        matches!(self, Expr::Literal(_))
    }

    /// Evaluates against `root` (also `$$CURRENT` unless rebound).
    pub fn eval(&self, root: &Document, vars: &Vars) -> MongoResult<Value> {
        match self {
            Expr::Literal(v) => Ok(Some(v.clone())),
            Expr::Missing => Ok(None),
            Expr::Field(p) => Ok(match vars.get("CURRENT") {
                Some(cur) => sub_path(cur, p),
                None => get_path_bson_fanout(root, p),
            }),
            Expr::Var { name, path } => {
                let base: Bson = match name.as_str() {
                    "ROOT" => Bson::Document(root.clone()),
                    "NOW" => Bson::DateTime(vars.now),
                    "CURRENT" => match vars.get("CURRENT") {
                        Some(v) => v.clone(),
                        None => Bson::Document(root.clone()),
                    },
                    "REMOVE" => return Ok(None),
                    // $redact's decisions.
                    "DESCEND" => Bson::String("descend".into()),
                    "PRUNE" => Bson::String("prune".into()),
                    "KEEP" => Bson::String("keep".into()),
                    n => match vars.get(n) {
                        Some(v) => v.clone(),
                        None => {
                            return Err(MongoError::location(
                                17276,
                                format!("Use of undefined variable: {n}"),
                            ))
                        }
                    },
                };
                Ok(match path {
                    Some(p) => sub_path(&base, p),
                    None => Some(base),
                })
            }
            Expr::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(root, vars)? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(Some(Bson::Document(out)))
            }
            Expr::Array(items) => {
                let mut out = Vec::with_capacity(items.len());
                for e in items {
                    out.push(e.eval(root, vars)?.unwrap_or(Bson::Null));
                }
                Ok(Some(Bson::Array(out)))
            }
            Expr::Call(name, args) => eval_call(name, args, &Ctx { root, vars }),
            Expr::Regex(r) => Ok(Some(Bson::String(r.pattern().to_string()))),
        }
    }
}

/// Follows a dotted path into an arbitrary value with aggregation fan-out.
fn sub_path(base: &Bson, path: &str) -> Value {
    match base {
        Bson::Document(d) => get_path_bson_fanout(d, path),
        Bson::Array(_) => get_path_bson_fanout(&doc! {"v": base.clone()}, &format!("v.{path}")),
        _ => None,
    }
}

fn check_arity(name: &str, n: usize, min: usize, max: usize) -> MongoResult<()> {
    if n >= min && n <= max {
        return Ok(());
    }
    if name == "$ifNull" {
        return Err(MongoError::location(
            1257300,
            format!("$ifNull needs at least two arguments, had: {n}"),
        ));
    }
    let msg = if min == max {
        format!("Expression {name} takes exactly {min} arguments. {n} were passed in.")
    } else if n < min {
        format!("Expression {name} takes at least {min} arguments, and at most {max}. {n} were passed in.")
    } else {
        format!("Expression {name} takes at most {max} arguments. {n} were passed in.")
    };
    Err(MongoError::location(16020, msg))
}

/// Evaluation context passed to operator implementations.
pub(crate) struct Ctx<'a, 'v> {
    pub root: &'a Document,
    pub vars: &'a Vars<'v>,
}

impl Ctx<'_, '_> {
    pub fn ev(&self, e: &Expr) -> MongoResult<Value> {
        e.eval(self.root, self.vars)
    }
}

fn named_args<'a>(
    op: &str,
    arg: &'a Bson,
    allowed: &[&str],
    not_object: (i32, &str),
    unknown: (i32, &str),
) -> MongoResult<&'a Document> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            not_object.0,
            format!("{}{}", not_object.1, value::type_name(arg)),
        ));
    };
    for k in d.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(MongoError::location(unknown.0, format!("{}{k}", unknown.1)));
        }
    }
    let _ = op;
    Ok(d)
}

fn parse_opt(d: &Document, key: &str, scope: &mut Scope) -> MongoResult<Expr> {
    match d.get(key) {
        Some(v) => Expr::parse_in(v, scope),
        None => Ok(Expr::Missing),
    }
}

fn require(d: &Document, key: &str, code: i32, msg: &str, scope: &mut Scope) -> MongoResult<Expr> {
    match d.get(key) {
        Some(v) => Expr::parse_in(v, scope),
        None => Err(MongoError::location(code, msg.to_string())),
    }
}

/// Parses a body with extra variables in scope.
fn parse_with_vars(v: &Bson, names: &[String], scope: &mut Scope) -> MongoResult<Expr> {
    let before = scope.names.len();
    scope.names.extend(names.iter().cloned());
    let r = Expr::parse_in(v, scope);
    scope.names.truncate(before);
    r
}

/// `$meta` names that never have a value here (no Atlas Search stages, and
/// no random values are kept per document): they read as missing, in
/// expressions and in find projections.
pub(crate) const ABSENT_META: &[&str] = &[
    "randVal",
    "searchScore",
    "searchHighlights",
    "searchScoreDetails",
    "searchSequenceToken",
    "vectorSearchScore",
];

/// The argument names of a named-argument operator (see [`NAMED`]), in the
/// order of its parsed arguments.
pub(super) fn arg_names(op: &str) -> &'static [&'static str] {
    NAMED
        .iter()
        .find(|(n, _, _)| *n == op)
        .map_or(&[], |(_, names, _)| names)
}

/// Operators taking only named arguments: name, argument names (their order
/// is the order of the parsed arguments), required ones.
const NAMED: &[(&str, &[&str], &[&str])] = &[
    (
        "$dateAdd",
        &["startDate", "unit", "amount", "timezone"],
        &["startDate", "unit", "amount"],
    ),
    (
        "$dateDiff",
        &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
        &["startDate", "endDate", "unit"],
    ),
    (
        "$dateFromParts",
        &[
            "year",
            "month",
            "day",
            "hour",
            "minute",
            "second",
            "millisecond",
            "isoWeekYear",
            "isoWeek",
            "isoDayOfWeek",
            "timezone",
        ],
        &[],
    ),
    (
        "$dateSubtract",
        &["startDate", "unit", "amount", "timezone"],
        &["startDate", "unit", "amount"],
    ),
    (
        "$dateFromString",
        &["dateString", "format", "timezone", "onError", "onNull"],
        &["dateString"],
    ),
    ("$dateToParts", &["date", "timezone", "iso8601"], &["date"]),
    (
        "$dateToString",
        &["date", "format", "timezone", "onNull"],
        &["date"],
    ),
    (
        "$dateTrunc",
        &["date", "unit", "binSize", "timezone", "startOfWeek"],
        &["date", "unit"],
    ),
    ("$firstN", &["input", "n"], &["input", "n"]),
    ("$lastN", &["input", "n"], &["input", "n"]),
    ("$maxN", &["input", "n"], &["input", "n"]),
    ("$minN", &["input", "n"], &["input", "n"]),
    (
        "$regexFind",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$regexFindAll",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$regexMatch",
        &["input", "regex", "options"],
        &["input", "regex"],
    ),
    (
        "$replaceAll",
        &["input", "find", "replacement"],
        &["input", "find", "replacement"],
    ),
    (
        "$replaceOne",
        &["input", "find", "replacement"],
        &["input", "find", "replacement"],
    ),
    (
        "$setField",
        &["field", "input", "value"],
        &["field", "input", "value"],
    ),
    ("$sortArray", &["input", "sortBy"], &["input", "sortBy"]),
    ("$unsetField", &["field", "input"], &["field", "input"]),
    (
        "$zip",
        &["inputs", "useLongestLength", "defaults"],
        &["inputs"],
    ),
];

fn parse_named_op(
    name: &'static str,
    arg: &Bson,
    allowed: &[&str],
    required: &[&str],
    scope: &mut Scope,
) -> MongoResult<Expr> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::failed_to_parse(format!(
            "{name} only supports an object as its argument, found: {}",
            value::type_name(arg)
        )));
    };
    for k in d.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(MongoError::failed_to_parse(format!(
                "Unrecognized argument to {name}: {k}"
            )));
        }
    }
    for k in required {
        if !d.contains_key(*k) {
            return Err(MongoError::failed_to_parse(format!(
                "Missing '{k}' parameter to {name}"
            )));
        }
    }
    let mut args = Vec::with_capacity(allowed.len());
    for k in allowed {
        let e = match (name, *k, d.get(*k)) {
            // Sort specs and constant field names are not expressions.
            ("$sortArray", "sortBy", Some(v)) => Expr::Literal(v.clone()),
            ("$setField" | "$unsetField", "field", Some(v)) => {
                let e = Expr::parse_in(v, scope)?;
                if !matches!(e, Expr::Literal(Bson::String(_))) {
                    return Err(MongoError::location(
                        4161106,
                        format!("{name} requires 'field' to evaluate to type String"),
                    ));
                }
                e
            }
            (_, _, Some(v)) => Expr::parse_in(v, scope)?,
            (_, _, None) => Expr::Missing,
        };
        args.push(e);
    }
    if matches!(name, "$regexMatch" | "$regexFind" | "$regexFindAll") {
        string::precompile_regex(name, &mut args)?;
    }
    Ok(Expr::Call(name, args))
}

/// `{$function: {body, args, lang: "js"}}`, with mongod's parse errors; the
/// body (a constant string or Code) is compiled here so a syntax error fails
/// before any document is read. Evaluates as `Call("$function", [body, args])`.
fn parse_function(arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    let Bson::Document(d) = arg else {
        return Err(MongoError::location(
            31260,
            format!(
                "$function requires an object as an argument, found: {}",
                value::type_name(arg)
            ),
        ));
    };
    let body = d
        .get("body")
        .ok_or_else(|| MongoError::location(31261, "The body function must be specified."))?;
    let body = match Expr::parse_in(body, scope)? {
        Expr::Literal(Bson::String(s)) | Expr::Literal(Bson::JavaScriptCode(s)) => s,
        Expr::Literal(_) => {
            return Err(MongoError::location(
                31262,
                "The body function must evaluate to type string or code",
            ))
        }
        _ => {
            return Err(MongoError::location(
                31432,
                "The body function must be a constant expression",
            ))
        }
    };
    let args = d
        .get("args")
        .ok_or_else(|| MongoError::location(31263, "The args field must be specified."))?;
    let args = Expr::parse_in(args, scope)?;
    match d.get("lang") {
        None => {
            return Err(MongoError::location(
                31418,
                "The lang field must be specified.",
            ))
        }
        Some(Bson::String(l)) if l == "js" => {}
        Some(_) => {
            return Err(MongoError::location(
                31419,
                "Currently the only supported language specifier is 'js'.",
            ))
        }
    }
    crate::js::check_function(&body)?;
    Ok(Expr::Call(
        "$function",
        vec![Expr::Literal(Bson::String(body)), args],
    ))
}

fn parse_custom(name: &'static str, arg: &Bson, scope: &mut Scope) -> MongoResult<Expr> {
    if let Some((_, allowed, required)) = NAMED.iter().find(|(n, _, _)| *n == name) {
        return parse_named_op(name, arg, allowed, required, scope);
    }
    match name {
        "$literal" => Ok(Expr::Literal(arg.clone())),
        // The operand as a whole, as mongod: an array is hashed as an array.
        "$toHashedIndexKey" => Ok(Expr::Call(name, vec![Expr::parse_in(arg, scope)?])),
        // The accumulators' spec and checks; the percentiles are constants.
        "$median" | "$percentile" => {
            let (input, ps) =
                crate::stats::parse_quantile_spec(name, name == "$median", arg)?;
            let ps = Bson::Array(ps.into_iter().map(Bson::Double).collect());
            Ok(Expr::Call(name, vec![Expr::parse_in(&input, scope)?, Expr::Literal(ps)]))
        }
        "$function" => parse_function(arg, scope),
        // Only the text score is kept per document so far.
        "$meta" => match arg {
            Bson::String(m) if m == "textScore" => Ok(Expr::Call(name, Vec::new())),
            // Nothing here sets these (no Atlas Search stages; `$sample`
            // keeps no random values): mongod's value for a document
            // without the metadata is missing.
            Bson::String(m) if ABSENT_META.contains(&m.as_str()) => Ok(Expr::Missing),
            Bson::String(m)
                if matches!(
                    m.as_str(),
                    "geoNearDistance"
                        | "geoNearPoint"
                        | "recordId"
                        | "indexKey"
                        | "sortKey"
                        | "score"
                        | "scoreDetails"
                ) =>
            {
                Err(MongoError::new(
                    ErrorCode::NotImplemented,
                    format!("$meta \"{m}\" is not supported by BisonDB yet"),
                ))
            }
            Bson::String(m) => Err(MongoError::location(
                17308,
                format!("Unsupported argument to $meta: {m}"),
            )),
            _ => Err(MongoError::location(
                17307,
                "$meta only supports string arguments",
            )),
        },
        "$rand" => match arg {
            Bson::Document(d) if d.is_empty() => Ok(Expr::Call(name, Vec::new())),
            _ => Err(MongoError::location(3040501, "$rand does not currently accept arguments")),
        },
        "$cond" => match arg {
            Bson::Document(d) => {
                for k in d.keys() {
                    if !matches!(k.as_str(), "if" | "then" | "else") {
                        return Err(MongoError::location(17083, format!("Unrecognized parameter to $cond: {k}")));
                    }
                }
                let i = require(d, "if", 17080, "Missing 'if' parameter to $cond", scope)?;
                let t = require(d, "then", 17081, "Missing 'then' parameter to $cond", scope)?;
                let e = require(d, "else", 17082, "Missing 'else' parameter to $cond", scope)?;
                Ok(Expr::Call(name, vec![i, t, e]))
            }
            Bson::Array(a) => {
                check_arity(name, a.len(), 3, 3)?;
                Ok(Expr::Call(name, a.iter().map(|x| Expr::parse_in(x, scope)).collect::<MongoResult<_>>()?))
            }
            other => {
                check_arity(name, 1, 3, 3)?;
                Ok(Expr::Call(name, vec![Expr::parse_in(other, scope)?]))
            }
        },
        "$switch" => {
            let d = named_args(
                name,
                arg,
                &["branches", "default"],
                (40060, "$switch requires an object as an argument, found: "),
                (40067, "$switch found an unknown argument: "),
            )?;
            let branches = match d.get("branches") {
                Some(Bson::Array(a)) => a,
                Some(other) => {
                    return Err(MongoError::location(
                        40061,
                        format!("$switch expected an array for 'branches', found: {}", value::type_name(other)),
                    ))
                }
                None => return Err(MongoError::location(40068, "$switch requires at least one branch.")),
            };
            let mut args = Vec::with_capacity(branches.len() * 2 + 1);
            for b in branches {
                let Bson::Document(bd) = b else {
                    return Err(MongoError::location(
                        40062,
                        format!("$switch expected each branch to be an object, found: {}", value::type_name(b)),
                    ));
                };
                for k in bd.keys() {
                    if k != "case" && k != "then" {
                        return Err(MongoError::location(40063, format!("$switch found an unknown argument to a branch: {k}")));
                    }
                }
                args.push(require(bd, "case", 40064, "$switch requires each branch have a 'case' expression", scope)?);
                args.push(require(bd, "then", 40065, "$switch requires each branch have a 'then' expression.", scope)?);
            }
            if args.is_empty() {
                return Err(MongoError::location(40068, "$switch requires at least one branch."));
            }
            if d.contains_key("default") {
                args.push(parse_opt(d, "default", scope)?);
            }
            Ok(Expr::Call(name, args))
        }
        "$let" => {
            let d = named_args(
                name,
                arg,
                &["vars", "in"],
                (16874, "$let only supports an object as its argument, found: "),
                (16875, "Unrecognized parameter to $let: "),
            )?;
            let Some(Bson::Document(vars)) = d.get("vars") else {
                return Err(MongoError::location(16876, "Missing 'vars' parameter to $let"));
            };
            let Some(body) = d.get("in") else {
                return Err(MongoError::location(16877, "Missing 'in' parameter to $let"));
            };
            let mut args = Vec::with_capacity(vars.len() * 2 + 1);
            let mut names = Vec::with_capacity(vars.len());
            for (k, v) in vars {
                check_var_name(k)?;
                args.push(Expr::Literal(Bson::String(k.clone())));
                args.push(Expr::parse_in(v, scope)?);
                names.push(k.clone());
            }
            args.push(parse_with_vars(body, &names, scope)?);
            Ok(Expr::Call(name, args))
        }
        "$map" | "$filter" => {
            let (allowed, code_obj, code_unknown): (&[&str], i32, i32) = if name == "$map" {
                (&["input", "as", "in"], 16878, 16879)
            } else {
                (&["input", "as", "cond", "limit"], 28646, 28647)
            };
            let d = named_args(
                name,
                arg,
                allowed,
                (code_obj, &format!("{name} only supports an object as its argument, found: ")),
                (code_unknown, &format!("Unrecognized parameter to {name}: ")),
            )?;
            let input = require(d, "input", 28648, &format!("Missing 'input' parameter to {name}"), scope)?;
            let var = match d.get("as") {
                Some(Bson::String(s)) => {
                    check_var_name(s)?;
                    s.clone()
                }
                Some(other) => {
                    return Err(MongoError::location(
                        16866,
                        format!("{name} 'as' must be a string, found: {}", value::type_name(other)),
                    ))
                }
                None => "this".to_string(),
            };
            let body_key = if name == "$map" { "in" } else { "cond" };
            let Some(body) = d.get(body_key) else {
                return Err(MongoError::location(28649, format!("Missing '{body_key}' parameter to {name}")));
            };
            let body = parse_with_vars(body, std::slice::from_ref(&var), scope)?;
            let limit = parse_opt(d, "limit", scope)?;
            Ok(Expr::Call(name, vec![input, Expr::Literal(Bson::String(var)), body, limit]))
        }
        "$reduce" => {
            let d = named_args(
                name,
                arg,
                &["input", "initialValue", "in"],
                (40075, "$reduce requires an object as an argument, found: "),
                (40076, "$reduce found an unknown argument: "),
            )?;
            let input = require(d, "input", 40077, "$reduce requires 'input' to be specified", scope)?;
            let init = require(d, "initialValue", 40078, "$reduce requires 'initialValue' to be specified", scope)?;
            let Some(body) = d.get("in") else {
                return Err(MongoError::location(40079, "$reduce requires 'in' to be specified"));
            };
            let body = parse_with_vars(body, &["value".to_string(), "this".to_string()], scope)?;
            Ok(Expr::Call(name, vec![input, init, body]))
        }
        "$convert" => {
            let d = named_args(
                name,
                arg,
                &["input", "to", "onError", "onNull", "format", "base", "byteOrder"],
                (
                    ErrorCode::FailedToParse.code(),
                    "$convert expects an object of named arguments but found: ",
                ),
                (ErrorCode::FailedToParse.code(), "$convert found an unknown argument: "),
            )
            .map_err(|e| MongoError::failed_to_parse(e.message))?;
            for k in ["format", "base", "byteOrder"] {
                if d.contains_key(k) {
                    return Err(MongoError::new(
                        ErrorCode::NotImplemented,
                        format!("$convert's '{k}' argument is not supported by BisonDB yet"),
                    ));
                }
            }
            let input = match d.get("input") {
                Some(v) => Expr::parse_in(v, scope)?,
                None => return Err(MongoError::failed_to_parse("Missing 'input' parameter to $convert")),
            };
            let to = match d.get("to") {
                Some(v) => Expr::parse_in(v, scope)?,
                None => return Err(MongoError::failed_to_parse("Missing 'to' parameter to $convert")),
            };
            let on_error = parse_opt(d, "onError", scope)?;
            let on_null = parse_opt(d, "onNull", scope)?;
            let has_err = Expr::Literal(Bson::Boolean(d.contains_key("onError")));
            let has_null = Expr::Literal(Bson::Boolean(d.contains_key("onNull")));
            Ok(Expr::Call(name, vec![input, to, on_error, on_null, has_err, has_null]))
        }
        "$trim" | "$ltrim" | "$rtrim" => {
            let d = named_args(
                name,
                arg,
                &["input", "chars"],
                (50696, &format!("{name} requires an object as an argument, found: ")),
                (50694, &format!("{name} found an unknown argument: ")),
            )?;
            let input = require(d, "input", 50695, &format!("{name} requires an 'input' field"), scope)?;
            let chars = parse_opt(d, "chars", scope)?;
            Ok(Expr::Call(name, vec![input, chars]))
        }
        "$getField" => match arg {
            Bson::Document(d) if d.contains_key("field") => {
                for k in d.keys() {
                    if k != "field" && k != "input" {
                        return Err(MongoError::location(3041701, format!("$getField found an unknown argument: {k}")));
                    }
                }
                let field = Expr::parse_in(d.get("field").unwrap_or(&Bson::Null), scope)?;
                if !matches!(field, Expr::Literal(Bson::String(_))) {
                    return Err(MongoError::location(
                        5654602,
                        "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
                    ));
                }
                let input = match d.get("input") {
                    Some(v) => Expr::parse_in(v, scope)?,
                    None => Expr::Var { name: "CURRENT".into(), path: None },
                };
                Ok(Expr::Call(name, vec![field, input]))
            }
            Bson::String(s) if !s.starts_with('$') => {
                Ok(Expr::Call(name, vec![Expr::Literal(arg.clone()), Expr::Var { name: "CURRENT".into(), path: None }]))
            }
            _ => Err(MongoError::location(
                3041702,
                "$getField requires 'field' to evaluate to a constant, but got a non-constant argument",
            )),
        },
        // Date part operators: `<date>`, `[<date>]` or `{date, timezone}`.
        _ => {
            let (date, tz) = match arg {
                Bson::Document(d) if d.contains_key("date") => {
                    for k in d.keys() {
                        if k != "date" && k != "timezone" {
                            return Err(MongoError::location(40535, format!("unrecognized option to {name}: \"{k}\"")));
                        }
                    }
                    (require(d, "date", 40539, "missing 'date' argument", scope)?, parse_opt(d, "timezone", scope)?)
                }
                Bson::Array(a) => {
                    check_arity(name, a.len(), 1, 1)?;
                    (Expr::parse_in(a.first().unwrap_or(&Bson::Null), scope)?, Expr::Missing)
                }
                other => (Expr::parse_in(other, scope)?, Expr::Missing),
            };
            Ok(Expr::Call(name, vec![date, tz]))
        }
    }
}

fn arg(args: &[Expr], i: usize) -> MongoResult<&Expr> {
    args.get(i)
        .ok_or_else(|| MongoError::internal("expression argument count checked at parse"))
}

/// Compares two possibly-missing values; missing sorts before everything.
pub(crate) fn cmp_values(a: &Value, b: &Value, c: Option<&Collation>) -> Ordering {
    match (a, b) {
        (None, None) => Ordering::Equal,
        (None, Some(_)) => Ordering::Less,
        (Some(_), None) => Ordering::Greater,
        (Some(x), Some(y)) => compare_bson_in(x, y, c),
    }
}

fn eval_call(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match name {
        "$and" => {
            for a in args {
                if !truthy(cx.ev(a)?.as_ref()) {
                    return Ok(Some(Bson::Boolean(false)));
                }
            }
            Ok(Some(Bson::Boolean(true)))
        }
        "$or" => {
            for a in args {
                if truthy(cx.ev(a)?.as_ref()) {
                    return Ok(Some(Bson::Boolean(true)));
                }
            }
            Ok(Some(Bson::Boolean(false)))
        }
        "$not" => Ok(Some(Bson::Boolean(!truthy(cx.ev(arg(args, 0)?)?.as_ref())))),
        "$cmp" | "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte" => {
            let a = cx.ev(arg(args, 0)?)?;
            let b = cx.ev(arg(args, 1)?)?;
            let o = cmp_values(&a, &b, cx.vars.collation());
            Ok(Some(match name {
                "$cmp" => Bson::Int32(match o {
                    Ordering::Less => -1,
                    Ordering::Equal => 0,
                    Ordering::Greater => 1,
                }),
                "$eq" => Bson::Boolean(o == Ordering::Equal),
                "$ne" => Bson::Boolean(o != Ordering::Equal),
                "$gt" => Bson::Boolean(o == Ordering::Greater),
                "$gte" => Bson::Boolean(o != Ordering::Less),
                "$lt" => Bson::Boolean(o == Ordering::Less),
                _ => Bson::Boolean(o != Ordering::Greater),
            }))
        }
        "$cond" => {
            let c = truthy(cx.ev(arg(args, 0)?)?.as_ref());
            cx.ev(arg(args, if c { 1 } else { 2 })?)
        }
        "$ifNull" => {
            let (last, rest) = args
                .split_last()
                .ok_or_else(|| MongoError::internal("$ifNull arity"))?;
            for a in rest {
                let v = cx.ev(a)?;
                if !value::nullish(v.as_ref()) {
                    return Ok(v);
                }
            }
            cx.ev(last)
        }
        "$switch" => {
            let mut chunks = args.chunks_exact(2);
            for pair in chunks.by_ref() {
                if let [case, then] = pair {
                    if truthy(cx.ev(case)?.as_ref()) {
                        return cx.ev(then);
                    }
                }
            }
            match chunks.remainder() {
                [default] => cx.ev(default),
                _ => Err(MongoError::location(
                    40066,
                    "$switch could not find a matching branch for an input, and no default was specified.",
                )),
            }
        }
        "$let" => {
            let (body, pairs) = args
                .split_last()
                .ok_or_else(|| MongoError::internal("$let arity"))?;
            let mut bindings = Vec::with_capacity(pairs.len() / 2);
            for pair in pairs.chunks_exact(2) {
                if let [Expr::Literal(Bson::String(n)), e] = pair {
                    bindings.push((n.clone(), cx.ev(e)?.unwrap_or(Bson::Null)));
                }
            }
            let vars = cx.vars.child(bindings);
            body.eval(cx.root, &vars)
        }
        "$map" | "$filter" | "$reduce" | "$size" | "$arrayElemAt" | "$first" | "$last" | "$in"
        | "$isArray" | "$concatArrays" | "$slice" | "$range" | "$reverseArray"
        | "$indexOfArray" | "$setUnion" | "$setIntersection" | "$setDifference" | "$setEquals"
        | "$setIsSubset" | "$allElementsTrue" | "$anyElementTrue" | "$zip" | "$sortArray"
        | "$firstN" | "$lastN" | "$maxN" | "$minN" => array::eval(name, args, cx),
        "$dateToString" | "$dateFromParts" | "$dateAdd" | "$dateSubtract" | "$dateDiff"
        | "$dateTrunc" | "$dateToParts" | "$dateFromString" => date::eval_named(name, args, cx),
        "$isoDayOfWeek" | "$isoWeek" | "$isoWeekYear" => date::eval_iso(name, args, cx),
        "$indexOfCP" | "$replaceOne" | "$replaceAll" | "$regexMatch" | "$regexFind"
        | "$regexFindAll" => string::eval(name, args, cx),
        "$toDate" | "$toObjectId" | "$bsonSize" | "$binarySize" | "$tsSecond" | "$tsIncrement" => {
            convert::eval(name, args, cx)
        }
        "$setField" | "$unsetField" => object::eval(name, args, cx),
        "$rand" => Ok(Some(Bson::Double(rand_unit()))),
        "$median" | "$percentile" => eval_quantiles(name, args, cx),
        // A missing value hashes as null, as mongod.
        "$toHashedIndexKey" => {
            let v = cx.ev(arg(args, 0)?)?.unwrap_or(Bson::Null);
            Ok(Some(Bson::Int64(hashed::hash64(&v))))
        }
        // Missing when the document has no recorded score (as mongod).
        "$meta" => Ok(cx.vars.text_score(cx.root).map(Bson::Double)),
        "$function" => {
            let body = match arg(args, 0)? {
                Expr::Literal(Bson::String(s)) => s,
                _ => return Err(MongoError::internal("$function body")),
            };
            match cx.ev(arg(args, 1)?)? {
                Some(Bson::Array(values)) => Ok(Some(crate::js::call_function(body, &values)?)),
                _ => Err(MongoError::location(
                    31266,
                    "The args field must be of type array",
                )),
            }
        }
        "$concat" | "$toLower" | "$toUpper" | "$substr" | "$substrBytes" | "$substrCP"
        | "$strLenBytes" | "$strLenCP" | "$split" | "$trim" | "$ltrim" | "$rtrim"
        | "$indexOfBytes" | "$strcasecmp" => string::eval(name, args, cx),
        "$type" | "$toString" | "$toInt" | "$toLong" | "$toDouble" | "$toDecimal" | "$toBool"
        | "$convert" | "$isNumber" => convert::eval(name, args, cx),
        "$year" | "$month" | "$dayOfMonth" | "$hour" | "$minute" | "$second" | "$millisecond"
        | "$dayOfWeek" | "$dayOfYear" | "$week" => date::eval(name, args, cx),
        "$mergeObjects" | "$getField" | "$objectToArray" | "$arrayToObject" => {
            object::eval(name, args, cx)
        }
        _ => arith::eval(name, args, cx),
    }
}

/// `$median`/`$percentile` over one value: an array's numeric elements, or
/// the value itself when it is a number; anything else counts as no data
/// (null results), as the accumulators ignore non-numeric inputs.
fn eval_quantiles(name: &str, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    use crate::stats::{quantile_input, quantiles};
    let vals: Vec<f64> = match cx.ev(arg(args, 0)?)? {
        Some(Bson::Array(items)) => items.iter().filter_map(quantile_input).collect(),
        Some(v) => quantile_input(&v).into_iter().collect(),
        None => Vec::new(),
    };
    let ps: Vec<f64> = match arg(args, 1)? {
        Expr::Literal(Bson::Array(ps)) => ps.iter().filter_map(Bson::as_f64).collect(),
        _ => return Err(MongoError::internal("percentile list")),
    };
    let mut out = quantiles(vals, &ps);
    Ok(Some(if name == "$median" {
        out.pop().unwrap_or(Bson::Null)
    } else {
        Bson::Array(out)
    }))
}

/// Merges `d` into `out` as `$mergeObjects` does (later fields win in place).
pub(crate) fn merge_objects_into(out: &mut Document, d: Document) {
    object::merge_into(out, d);
}

/// A uniformly distributed double in [0, 1) for `$rand`, drawn from the
/// standard library's randomly keyed hasher (no extra dependency).
fn rand_unit() -> f64 {
    use std::hash::{BuildHasher, Hasher};
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    (h.finish() >> 11) as f64 / (1u64 << 53) as f64
}

/// Renders a value for messages (`missing` when absent).
pub(crate) fn render_value(v: &Value) -> String {
    v.as_ref().map_or_else(|| "missing".to_string(), render)
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
