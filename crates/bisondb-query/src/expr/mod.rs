//! Aggregation expressions: parsed once from BSON, evaluated per document.
//!
//! Every operator is an [`Expr::Call`] whose arguments are kept unevaluated,
//! so operators that are lazy (`$cond`, `$and`, `$ifNull`, `$switch`) or bind
//! variables (`$let`, `$map`, `$filter`, `$reduce`) need no special variant.
//! Evaluation returns `Option<Bson>`: `None` is a missing value, which differs
//! from null (missing fields are dropped by `$project`, `$$REMOVE` is missing).
//!
//! Operators are dispatched through one sorted table, `OPERATORS`: name,
//! how the argument parses (positional with bounds on the count, named
//! arguments, or a parse function of its own), and the evaluation function.
//! Each family has its file: `arith` (numbers, trigonometry, bits), `array`,
//! `string`, `date`, `convert` (types and conversions), `object`, `logic`
//! (booleans, comparisons, conditionals, `$let`) and `misc`. To add an
//! operator, write `fn op(name: &str, args: &[Expr], cx: &Ctx) ->
//! MongoResult<Value>` in its family's file (`cx.ev(arg(args, i)?)` evaluates
//! argument `i`) and add its row to `OPERATORS`; an argument of a shape of
//! its own also needs a parse function (`Custom`).

mod arith;
mod array;
mod convert;
mod date;
mod deps;
mod hashed;
mod logic;
mod misc;
mod object;
pub mod raw;
mod string;

/// Calendar month arithmetic, shared with `$densify`'s month/quarter/year units.
pub(crate) use date::add_months;
/// The walk of [`Expr::top_level_deps`], for the accumulators' own fields.
pub(crate) use deps::push_top;

use crate::collation::Collation;
use crate::compare::compare_bson_in;
use crate::path::{check_field_name, get_path_bson_fanout};
use crate::value::{self, render};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, DateTime, Document};
use std::cmp::Ordering;
use std::sync::Arc;

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
    /// `{$op: args}` with its arguments unevaluated; the operator was found in
    /// [`OPERATORS`] at parse time, so evaluation never looks a name up.
    Call(Op, Vec<Expr>),
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

/// How an operator's argument is parsed.
#[derive(Clone, Copy)]
enum Parse {
    /// Positional (one value, or an array of them), with inclusive bounds on
    /// the count.
    N(usize, usize),
    /// Only named arguments: their names, in the order of the parsed
    /// arguments, and the required ones.
    Named(&'static [&'static str], &'static [&'static str]),
    /// The operator parses its own argument shape.
    Custom(fn(&'static str, &Bson, &mut Scope) -> MongoResult<Expr>),
}

use Parse::{Custom, Named, N};

/// No upper bound on the argument count.
const MANY: usize = usize::MAX;

/// Evaluates a call of an operator: its name (one function may serve a
/// family, as `$sin` ... `$atanh`), its parsed arguments, the context.
type Eval = fn(&str, &[Expr], &Ctx) -> MongoResult<Value>;

/// Every expression operator: name, how its argument parses, how it
/// evaluates. Sorted by name (binary searched, at parse and per call). A new
/// operator is one evaluation function, in the file of its family, and one
/// row here (and a parse function when its argument has a shape of its own).
const OPERATORS: &[(&str, Parse, Eval)] = &[
    ("$abs", N(1, 1), arith::unary),
    ("$acos", N(1, 1), arith::trig),
    ("$acosh", N(1, 1), arith::trig),
    ("$add", N(0, MANY), arith::add),
    ("$allElementsTrue", N(1, 1), array::all_any_elements_true),
    ("$and", N(0, MANY), logic::and),
    ("$anyElementTrue", N(1, 1), array::all_any_elements_true),
    ("$arrayElemAt", N(2, 2), array::array_elem_at),
    ("$arrayToObject", N(1, 1), object::array_to_object_op),
    ("$asin", N(1, 1), arith::trig),
    ("$asinh", N(1, 1), arith::trig),
    ("$atan", N(1, 1), arith::trig),
    ("$atan2", N(2, 2), arith::atan2),
    ("$atanh", N(1, 1), arith::trig),
    ("$avg", N(1, MANY), arith::group_like),
    ("$binarySize", N(1, 1), convert::binary_size),
    ("$bitAnd", N(0, MANY), arith::bitwise),
    ("$bitNot", N(1, 1), arith::bit_not),
    ("$bitOr", N(0, MANY), arith::bitwise),
    ("$bitXor", N(0, MANY), arith::bitwise),
    ("$bsonSize", N(1, 1), convert::bson_size),
    ("$ceil", N(1, 1), arith::unary),
    ("$cmp", N(2, 2), logic::compare),
    ("$concat", N(0, MANY), string::concat),
    ("$concatArrays", N(0, MANY), array::concat_arrays),
    ("$cond", Custom(logic::parse_cond), logic::cond),
    (
        "$convert",
        Custom(convert::parse_convert),
        convert::convert_op,
    ),
    ("$cos", N(1, 1), arith::trig),
    ("$cosh", N(1, 1), arith::trig),
    (
        "$dateAdd",
        Named(
            &["startDate", "unit", "amount", "timezone"],
            &["startDate", "unit", "amount"],
        ),
        date::date_add_subtract,
    ),
    (
        "$dateDiff",
        Named(
            &["startDate", "endDate", "unit", "timezone", "startOfWeek"],
            &["startDate", "endDate", "unit"],
        ),
        date::date_diff,
    ),
    (
        "$dateFromParts",
        Named(
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
        date::date_from_parts,
    ),
    (
        "$dateFromString",
        Named(
            &["dateString", "format", "timezone", "onError", "onNull"],
            &["dateString"],
        ),
        date::date_from_string,
    ),
    (
        "$dateSubtract",
        Named(
            &["startDate", "unit", "amount", "timezone"],
            &["startDate", "unit", "amount"],
        ),
        date::date_add_subtract,
    ),
    (
        "$dateToParts",
        Named(&["date", "timezone", "iso8601"], &["date"]),
        date::date_to_parts,
    ),
    (
        "$dateToString",
        Named(&["date", "format", "timezone", "onNull"], &["date"]),
        date::date_to_string,
    ),
    (
        "$dateTrunc",
        Named(
            &["date", "unit", "binSize", "timezone", "startOfWeek"],
            &["date", "unit"],
        ),
        date::date_trunc,
    ),
    (
        "$dayOfMonth",
        Custom(date::parse_date_part),
        date::date_part,
    ),
    ("$dayOfWeek", Custom(date::parse_date_part), date::date_part),
    ("$dayOfYear", Custom(date::parse_date_part), date::date_part),
    ("$degreesToRadians", N(1, 1), arith::trig),
    ("$divide", N(2, 2), arith::divide),
    ("$eq", N(2, 2), logic::compare),
    ("$exp", N(1, 1), arith::unary),
    (
        "$filter",
        Custom(array::parse_map_filter),
        array::map_filter,
    ),
    ("$first", N(1, 1), array::first_last),
    (
        "$firstN",
        Named(&["input", "n"], &["input", "n"]),
        array::n_elements,
    ),
    ("$floor", N(1, 1), arith::unary),
    ("$function", Custom(misc::parse_function), misc::function),
    (
        "$getField",
        Custom(object::parse_get_field),
        object::get_field,
    ),
    ("$gt", N(2, 2), logic::compare),
    ("$gte", N(2, 2), logic::compare),
    ("$hour", Custom(date::parse_date_part), date::date_part),
    ("$ifNull", N(2, MANY), logic::if_null),
    ("$in", N(2, 2), array::in_array),
    ("$indexOfArray", N(2, 4), array::index_of_array),
    ("$indexOfBytes", N(2, 4), string::index_of_bytes),
    ("$indexOfCP", N(2, 4), string::index_of_cp),
    ("$isArray", N(1, 1), array::is_array),
    ("$isNumber", N(1, 1), convert::is_number),
    (
        "$isoDayOfWeek",
        Custom(date::parse_date_part),
        date::iso_date_part,
    ),
    (
        "$isoWeek",
        Custom(date::parse_date_part),
        date::iso_date_part,
    ),
    (
        "$isoWeekYear",
        Custom(date::parse_date_part),
        date::iso_date_part,
    ),
    ("$last", N(1, 1), array::first_last),
    (
        "$lastN",
        Named(&["input", "n"], &["input", "n"]),
        array::n_elements,
    ),
    ("$let", Custom(logic::parse_let), logic::let_),
    ("$literal", Custom(misc::parse_literal), misc::literal),
    ("$ln", N(1, 1), arith::unary),
    ("$log", N(2, 2), arith::log),
    ("$log10", N(1, 1), arith::unary),
    ("$lt", N(2, 2), logic::compare),
    ("$lte", N(2, 2), logic::compare),
    ("$ltrim", Custom(string::parse_trim), string::trim),
    ("$map", Custom(array::parse_map_filter), array::map_filter),
    ("$max", N(1, MANY), arith::group_like),
    (
        "$maxN",
        Named(&["input", "n"], &["input", "n"]),
        array::n_elements,
    ),
    ("$median", Custom(misc::parse_quantiles), misc::quantiles),
    ("$mergeObjects", N(0, MANY), object::merge_objects),
    ("$meta", Custom(misc::parse_meta), misc::meta),
    (
        "$millisecond",
        Custom(date::parse_date_part),
        date::date_part,
    ),
    ("$min", N(1, MANY), arith::group_like),
    (
        "$minN",
        Named(&["input", "n"], &["input", "n"]),
        array::n_elements,
    ),
    ("$minute", Custom(date::parse_date_part), date::date_part),
    ("$mod", N(2, 2), arith::modulo),
    ("$month", Custom(date::parse_date_part), date::date_part),
    ("$multiply", N(0, MANY), arith::multiply),
    ("$ne", N(2, 2), logic::compare),
    ("$not", N(1, 1), logic::not),
    ("$objectToArray", N(1, 1), object::object_to_array),
    ("$or", N(0, MANY), logic::or),
    (
        "$percentile",
        Custom(misc::parse_quantiles),
        misc::quantiles,
    ),
    ("$pow", N(2, 2), arith::pow_op),
    ("$radiansToDegrees", N(1, 1), arith::trig),
    ("$rand", Custom(misc::parse_rand), misc::rand),
    ("$range", N(2, 3), array::range),
    ("$reduce", Custom(array::parse_reduce), array::reduce),
    (
        "$regexFind",
        Named(&["input", "regex", "options"], &["input", "regex"]),
        string::regex_op,
    ),
    (
        "$regexFindAll",
        Named(&["input", "regex", "options"], &["input", "regex"]),
        string::regex_op,
    ),
    (
        "$regexMatch",
        Named(&["input", "regex", "options"], &["input", "regex"]),
        string::regex_op,
    ),
    (
        "$replaceAll",
        Named(
            &["input", "find", "replacement"],
            &["input", "find", "replacement"],
        ),
        string::replace,
    ),
    (
        "$replaceOne",
        Named(
            &["input", "find", "replacement"],
            &["input", "find", "replacement"],
        ),
        string::replace,
    ),
    ("$reverseArray", N(1, 1), array::reverse_array),
    ("$round", N(1, 2), arith::unary),
    ("$rtrim", Custom(string::parse_trim), string::trim),
    ("$second", Custom(date::parse_date_part), date::date_part),
    ("$setDifference", N(2, 2), array::set_op),
    ("$setEquals", N(2, MANY), array::set_op),
    (
        "$setField",
        Named(&["field", "input", "value"], &["field", "input", "value"]),
        object::set_unset_field,
    ),
    ("$setIntersection", N(0, MANY), array::set_op),
    ("$setIsSubset", N(2, 2), array::set_op),
    ("$setUnion", N(0, MANY), array::set_op),
    ("$sin", N(1, 1), arith::trig),
    ("$sinh", N(1, 1), arith::trig),
    ("$size", N(1, 1), array::size),
    ("$slice", N(2, 3), array::slice),
    (
        "$sortArray",
        Named(&["input", "sortBy"], &["input", "sortBy"]),
        array::sort_array,
    ),
    ("$split", N(2, 2), string::split),
    ("$sqrt", N(1, 1), arith::unary),
    ("$stdDevPop", N(1, MANY), arith::group_like),
    ("$stdDevSamp", N(1, MANY), arith::group_like),
    ("$strLenBytes", N(1, 1), string::str_len),
    ("$strLenCP", N(1, 1), string::str_len),
    ("$strcasecmp", N(2, 2), string::strcasecmp),
    ("$substr", N(3, 3), string::substr_bytes),
    ("$substrBytes", N(3, 3), string::substr_bytes),
    ("$substrCP", N(3, 3), string::substr_cp),
    ("$subtract", N(2, 2), arith::subtract),
    ("$sum", N(1, MANY), arith::group_like),
    ("$switch", Custom(logic::parse_switch), logic::switch),
    ("$tan", N(1, 1), arith::trig),
    ("$tanh", N(1, 1), arith::trig),
    ("$toBool", N(1, 1), convert::to_type),
    ("$toDate", N(1, 1), convert::to_type),
    ("$toDecimal", N(1, 1), convert::to_type),
    ("$toDouble", N(1, 1), convert::to_type),
    (
        "$toHashedIndexKey",
        Custom(misc::parse_operand),
        misc::to_hashed_index_key,
    ),
    ("$toInt", N(1, 1), convert::to_type),
    ("$toLong", N(1, 1), convert::to_type),
    ("$toLower", N(1, 1), string::change_case),
    ("$toObjectId", N(1, 1), convert::to_type),
    ("$toString", N(1, 1), convert::to_type),
    ("$toUpper", N(1, 1), string::change_case),
    ("$trim", Custom(string::parse_trim), string::trim),
    ("$trunc", N(1, 2), arith::unary),
    ("$tsIncrement", N(1, 1), convert::ts_part),
    ("$tsSecond", N(1, 1), convert::ts_part),
    ("$type", N(1, 1), convert::type_of),
    (
        "$unsetField",
        Named(&["field", "input"], &["field", "input"]),
        object::set_unset_field,
    ),
    ("$week", Custom(date::parse_date_part), date::date_part),
    ("$year", Custom(date::parse_date_part), date::date_part),
    (
        "$zip",
        Named(&["inputs", "useLongestLength", "defaults"], &["inputs"]),
        array::zip,
    ),
];

/// mongod expression operators BisonDB does not implement yet. Sorted.
const NOT_IMPLEMENTED: &[&str] = &[];

fn lookup_op(name: &str) -> Option<&'static (&'static str, Parse, Eval)> {
    OPERATORS.get(op_index(name)?)
}

fn op_index(name: &str) -> Option<usize> {
    OPERATORS.binary_search_by(|(n, _, _)| n.cmp(&name)).ok()
}

/// An operator resolved at parse time: its row in [`OPERATORS`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Op(u16);

impl Op {
    /// The operator's name, as written (`"$add"`).
    pub fn name(self) -> &'static str {
        OPERATORS.get(usize::from(self.0)).map_or("", |row| row.0)
    }

    fn eval(self) -> Option<Eval> {
        OPERATORS.get(usize::from(self.0)).map(|row| row.2)
    }
}

impl Expr {
    /// A call of the operator `name`, resolved now. Every caller passes a name
    /// taken from [`OPERATORS`]; any other is the parser's bug.
    fn call(name: &'static str, args: Vec<Expr>) -> MongoResult<Expr> {
        let index = op_index(name)
            .and_then(|i| u16::try_from(i).ok())
            .ok_or_else(|| MongoError::internal(format!("unknown expression operator {name}")))?;
        Ok(Expr::Call(Op(index), args))
    }
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
        let Some(&(name, parse, _)) = lookup_op(name) else {
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
        match parse {
            N(min, max) => {
                let parsed: Vec<Expr> = match arg {
                    Bson::Array(a) => a
                        .iter()
                        .map(|x| Self::parse_in(x, scope))
                        .collect::<MongoResult<_>>()?,
                    other => vec![Self::parse_in(other, scope)?],
                };
                check_arity(name, parsed.len(), min, max)?;
                Expr::call(name, parsed)
            }
            Named(allowed, required) => parse_named_op(name, arg, allowed, required, scope),
            Custom(parse) => parse(name, arg, scope),
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
            Expr::Call(op, args) => eval_call(*op, args, &Ctx { root, vars }),
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

/// The argument names of a named-argument operator, in the order of its
/// parsed arguments.
pub(super) fn arg_names(op: &str) -> &'static [&'static str] {
    match lookup_op(op) {
        Some((_, Named(names, _), _)) => names,
        _ => &[],
    }
}

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
    Expr::call(name, args)
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

fn eval_call(op: Op, args: &[Expr], cx: &Ctx) -> MongoResult<Value> {
    match op.eval() {
        Some(eval) => eval(op.name(), args, cx),
        None => Err(MongoError::internal("expression operator out of the table")),
    }
}

/// Merges `d` into `out` as `$mergeObjects` does (later fields win in place).
pub(crate) fn merge_objects_into(out: &mut Document, d: Document) {
    object::merge_into(out, d);
}

/// Renders a value for messages (`missing` when absent).
pub(crate) fn render_value(v: &Value) -> String {
    v.as_ref().map_or_else(|| "missing".to_string(), render)
}

#[cfg(test)]
mod fuzz_tests;
#[cfg(test)]
mod tests;
