//! Expressions evaluated over stored BSON as it is (`&RawDocument`), without
//! converting the input into an owned `Document` first.
//!
//! [`RawExpr::compile`] turns a parsed [`Expr`] into a tree of nodes: field
//! paths pre-split, the date part operators (`$year` ... `$week`, UTC), the
//! arithmetic of `$add`/`$subtract`/`$multiply`/`$divide` on numbers, the
//! comparisons, literals and object literals run here over borrowed values
//! ([`RawVal`]); owned values are built only for what the caller keeps.
//! Everything else is a fallback node holding the original expression and
//! the top-level fields it reads: it converts just those fields and runs the
//! owned evaluator, so behaviour never differs from it. A ported node that
//! meets an operand it does not handle (a decimal, a date in `$add`, a path
//! through an array, an error to report) also hands the whole node to the
//! owned evaluator rather than repeat its rules.
//!
//! One [`RawCx`] per input document caches the civil date of the last date
//! read, so `{year: {$year: "$d"}, month: {$month: "$d"}, ...}` computes it
//! once per document.

use super::date::{Civil, DatePart};
use super::{cmp_values, logic, Expr, Value, Vars};
use crate::collation::Collation;
use crate::key::{
    canonical_key_in, canonical_key_raw, object_key_end, object_key_field, object_key_start,
};
use crate::value::{num_add, num_mul, num_sub, LongOverflow, Num};
use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{Bson, Document, RawBsonRef, RawDocument};
use std::cell::{Cell, RefCell};

/// A compiled expression over raw documents.
#[derive(Debug)]
pub struct RawExpr {
    node: Node,
}

/// The owned evaluator's expression and the top-level fields it reads
/// (`None`: the whole document, as `$$ROOT` does).
#[derive(Debug)]
struct Fallback {
    expr: Expr,
    deps: Option<Vec<String>>,
}

#[derive(Debug, Clone, Copy)]
enum Arith {
    Add,
    Multiply,
    Subtract,
    Divide,
}

#[derive(Debug)]
enum Node {
    Literal(Bson),
    Missing,
    /// `"$a.b.c"`: its components.
    Field(Vec<String>, Box<Fallback>),
    Object(Vec<(String, Node)>),
    /// A date part of a date, in UTC (no `timezone` argument).
    DatePart(DatePart, Box<Node>, Box<Fallback>),
    Arith(Arith, Vec<Node>, Box<Fallback>),
    /// `$cmp`, `$eq` ... `$lte`: the operator's name and its two operands.
    Compare(&'static str, Box<[Node; 2]>),
    Owned(Box<Fallback>),
}

/// A value an expression yields over a raw document: borrowed from the
/// document or from the expression where it can be.
#[derive(Debug, Clone)]
pub enum RawVal<'a> {
    Missing,
    Raw(RawBsonRef<'a>),
    Lit(&'a Bson),
    Owned(Bson),
}

/// The evaluation of one input document: the document, the variables, and
/// the civil date of the last date a date part operator read.
pub struct RawCx<'a, 'v> {
    doc: &'a RawDocument,
    vars: &'a Vars<'v>,
    civil: Cell<Option<(i64, Civil)>>,
    /// Top-level fields already looked up in this document (a lookup walks
    /// the document's elements; seed 003's per-day group reads
    /// `created_on` and `value` three times each).
    seen: RefCell<Vec<(&'a str, Option<RawBsonRef<'a>>)>>,
}

impl<'a, 'v> RawCx<'a, 'v> {
    pub fn new(doc: &'a RawDocument, vars: &'a Vars<'v>) -> RawCx<'a, 'v> {
        RawCx {
            doc,
            vars,
            civil: Cell::new(None),
            seen: RefCell::new(Vec::new()),
        }
    }

    /// The top-level field `name` (`None`: absent), or `Err` when the
    /// document cannot be read.
    fn top(&self, name: &'a str) -> Result<Option<RawBsonRef<'a>>, ()> {
        if let Some((_, v)) = self.seen.borrow().iter().find(|(n, _)| *n == name) {
            return Ok(*v);
        }
        let v = self.doc.get(name).map_err(|_| ())?;
        self.seen.borrow_mut().push((name, v));
        Ok(v)
    }

    /// The document being evaluated.
    pub fn doc(&self) -> &'a RawDocument {
        self.doc
    }

    fn civil(&self, ms: i64) -> Civil {
        match self.civil.get() {
            Some((at, c)) if at == ms => c,
            _ => {
                let c = Civil::of(ms);
                self.civil.set(Some((ms, c)));
                c
            }
        }
    }

    /// The top-level `fields` of the document (all of it for `None`), owned.
    pub fn owned_fields(&self, fields: Option<&[String]>) -> MongoResult<Document> {
        owned_fields(self.doc, fields)
    }
}

/// The top-level `fields` of `doc` that it has, in its order, as an owned
/// document (`None`: every field).
pub fn owned_fields(doc: &RawDocument, fields: Option<&[String]>) -> MongoResult<Document> {
    let Some(fields) = fields else {
        return Document::try_from(doc).map_err(invalid_bson);
    };
    let mut out = Document::new();
    for el in doc.iter() {
        let (k, v) = el.map_err(invalid_bson)?;
        let k = k.as_str();
        if fields.iter().any(|f| f == k) {
            out.insert(k, Bson::try_from(v).map_err(invalid_bson)?);
        }
    }
    Ok(out)
}

fn invalid_bson(e: impl std::fmt::Display) -> MongoError {
    MongoError::new(ErrorCode::InvalidBSON, format!("invalid stored BSON: {e}"))
}

impl RawVal<'_> {
    /// The owned value (`None` for missing).
    pub fn into_value(self) -> MongoResult<Value> {
        Ok(match self {
            RawVal::Missing => None,
            // The common scalars directly; the rest through bson's conversion.
            RawVal::Raw(RawBsonRef::Double(d)) => Some(Bson::Double(d)),
            RawVal::Raw(RawBsonRef::Int32(i)) => Some(Bson::Int32(i)),
            RawVal::Raw(RawBsonRef::Int64(i)) => Some(Bson::Int64(i)),
            RawVal::Raw(RawBsonRef::DateTime(d)) => Some(Bson::DateTime(d)),
            RawVal::Raw(RawBsonRef::Null) => Some(Bson::Null),
            RawVal::Raw(r) => Some(Bson::try_from(r).map_err(invalid_bson)?),
            RawVal::Lit(b) => Some(b.clone()),
            RawVal::Owned(b) => Some(b),
        })
    }

    /// Missing, null or undefined.
    fn nullish(&self) -> bool {
        match self {
            RawVal::Missing => true,
            RawVal::Raw(r) => matches!(r, RawBsonRef::Null | RawBsonRef::Undefined),
            RawVal::Lit(b) => matches!(b, Bson::Null | Bson::Undefined),
            RawVal::Owned(b) => matches!(b, Bson::Null | Bson::Undefined),
        }
    }

    /// An int, a long or a double (not a decimal: the owned evaluator's).
    fn num(&self) -> Option<Num> {
        match self {
            RawVal::Raw(RawBsonRef::Int32(i)) => Some(Num::I32(*i)),
            RawVal::Raw(RawBsonRef::Int64(i)) => Some(Num::I64(*i)),
            RawVal::Raw(RawBsonRef::Double(d)) => Some(Num::F64(*d)),
            RawVal::Lit(b) => Num::from_bson(b),
            RawVal::Owned(b) => Num::from_bson(b),
            _ => None,
        }
    }

    fn date_millis(&self) -> Option<i64> {
        match self {
            RawVal::Raw(RawBsonRef::DateTime(d)) => Some(d.timestamp_millis()),
            RawVal::Lit(Bson::DateTime(d)) => Some(d.timestamp_millis()),
            RawVal::Owned(Bson::DateTime(d)) => Some(d.timestamp_millis()),
            _ => None,
        }
    }

    /// Appends the canonical group key of this value (see `key`).
    pub fn key_into(self, out: &mut Vec<u8>, c: Option<&Collation>) -> MongoResult<()> {
        match self {
            RawVal::Raw(r) if canonical_key_raw(r, out, c) => {}
            RawVal::Lit(b) => canonical_key_in(Some(b), out, c),
            other => canonical_key_in(other.into_value()?.as_ref(), out, c),
        }
        Ok(())
    }
}

impl RawExpr {
    /// Compiles `expr` for evaluation over raw documents.
    pub fn compile(expr: &Expr) -> RawExpr {
        RawExpr {
            node: Node::compile(expr),
        }
    }

    /// Evaluates over the document of `cx`.
    pub fn eval<'a>(&'a self, cx: &RawCx<'a, '_>) -> MongoResult<RawVal<'a>> {
        self.node.eval(cx)
    }

    /// Evaluates into an owned value (`None`: missing).
    pub fn eval_value<'a>(&'a self, cx: &RawCx<'a, '_>) -> MongoResult<Value> {
        self.node.eval(cx)?.into_value()
    }

    /// Appends the canonical group key of the value to `out`, as
    /// `key::canonical_key_in` of [`RawExpr::eval_value`] would, without
    /// building an object literal's document.
    pub fn key_into<'a>(
        &'a self,
        cx: &RawCx<'a, '_>,
        out: &mut Vec<u8>,
        c: Option<&Collation>,
    ) -> MongoResult<()> {
        self.node.key_into(cx, out, c)
    }
}

fn fallback(expr: &Expr) -> Box<Fallback> {
    let mut deps = Vec::new();
    let known = expr.top_level_deps(&mut deps);
    Box::new(Fallback {
        expr: expr.clone(),
        deps: known.then_some(deps),
    })
}

impl Fallback {
    fn eval<'a>(&self, cx: &RawCx<'a, '_>) -> MongoResult<RawVal<'a>> {
        let doc = cx.owned_fields(self.deps.as_deref())?;
        Ok(match self.expr.eval(&doc, cx.vars)? {
            Some(b) => RawVal::Owned(b),
            None => RawVal::Missing,
        })
    }
}

impl Node {
    fn compile(expr: &Expr) -> Node {
        match expr {
            Expr::Literal(b) => Node::Literal(b.clone()),
            Expr::Missing => Node::Missing,
            Expr::Field(p) => {
                Node::Field(p.split('.').map(str::to_string).collect(), fallback(expr))
            }
            Expr::Object(fields) => Node::Object(
                fields
                    .iter()
                    .map(|(k, e)| (k.clone(), Node::compile(e)))
                    .collect(),
            ),
            Expr::Call(op, args) => Node::compile_call(op.name(), args, expr),
            Expr::Var { .. } | Expr::Array(_) | Expr::Regex(_) => Node::Owned(fallback(expr)),
        }
    }

    fn compile_call(name: &'static str, args: &[Expr], expr: &Expr) -> Node {
        let all = || args.iter().map(Node::compile).collect::<Vec<_>>();
        if let Some(part) = DatePart::from_name(name) {
            if let [date, Expr::Missing] = args {
                return Node::DatePart(part, Box::new(Node::compile(date)), fallback(expr));
            }
        }
        let arith = match name {
            "$add" => Some(Arith::Add),
            "$multiply" => Some(Arith::Multiply),
            "$subtract" if args.len() == 2 => Some(Arith::Subtract),
            "$divide" if args.len() == 2 => Some(Arith::Divide),
            _ => None,
        };
        if let Some(op) = arith {
            return Node::Arith(op, all(), fallback(expr));
        }
        if let ("$cmp" | "$eq" | "$ne" | "$gt" | "$gte" | "$lt" | "$lte", [a, b]) = (name, args) {
            return Node::Compare(name, Box::new([Node::compile(a), Node::compile(b)]));
        }
        Node::Owned(fallback(expr))
    }

    fn eval<'a>(&'a self, cx: &RawCx<'a, '_>) -> MongoResult<RawVal<'a>> {
        match self {
            Node::Literal(b) => Ok(RawVal::Lit(b)),
            Node::Missing => Ok(RawVal::Missing),
            Node::Field(path, fb) => match field(cx, path) {
                Some(v) => Ok(v),
                None => fb.eval(cx),
            },
            Node::Object(fields) => {
                let mut out = Document::new();
                for (k, e) in fields {
                    if let Some(v) = e.eval(cx)?.into_value()? {
                        out.insert(k.clone(), v);
                    }
                }
                Ok(RawVal::Owned(Bson::Document(out)))
            }
            Node::DatePart(part, date, fb) => {
                let d = date.eval(cx)?;
                if d.nullish() {
                    return Ok(RawVal::Owned(Bson::Null));
                }
                match d.date_millis() {
                    Some(ms) => Ok(RawVal::Owned(cx.civil(ms).part(*part))),
                    // Timestamps, ObjectIds and the errors.
                    None => fb.eval(cx),
                }
            }
            Node::Arith(op, args, fb) => match arith(*op, args, cx)? {
                Some(v) => Ok(v),
                None => fb.eval(cx),
            },
            Node::Compare(name, operands) => {
                let [a, b] = operands.as_ref();
                let a = a.eval(cx)?.into_value()?;
                let b = b.eval(cx)?.into_value()?;
                let o = cmp_values(&a, &b, cx.vars.collation());
                Ok(RawVal::Owned(logic::comparison(name, o)))
            }
            Node::Owned(fb) => fb.eval(cx),
        }
    }

    fn key_into<'a>(
        &'a self,
        cx: &RawCx<'a, '_>,
        out: &mut Vec<u8>,
        c: Option<&Collation>,
    ) -> MongoResult<()> {
        match self {
            Node::Object(fields) => {
                // As `canonical_key_in` of the document `eval` builds: its
                // present fields, in order.
                object_key_start(out);
                for (k, e) in fields {
                    let v = e.eval(cx)?;
                    if !matches!(v, RawVal::Missing) {
                        object_key_field(out, k);
                        v.key_into(out, c)?;
                    }
                }
                object_key_end(out);
                Ok(())
            }
            other => other.eval(cx)?.key_into(out, c),
        }
    }
}

/// Follows `path` through embedded documents; `None` when it meets an array
/// on the way (the owned evaluator's fan-out decides then) or the document
/// cannot be read (the owned conversion reports it).
fn field<'a>(cx: &RawCx<'a, '_>, path: &'a [String]) -> Option<RawVal<'a>> {
    if cx.vars.get("CURRENT").is_some() {
        return None;
    }
    let (first, rest) = path.split_first()?;
    let mut cur = match cx.top(first.as_str()).ok()? {
        Some(v) => v,
        None => return Some(RawVal::Missing),
    };
    for part in rest {
        cur = match cur {
            RawBsonRef::Document(d) => match d.get(part).ok()? {
                Some(v) => v,
                None => return Some(RawVal::Missing),
            },
            RawBsonRef::Array(_) => return None,
            _ => return Some(RawVal::Missing),
        };
    }
    Some(RawVal::Raw(cur))
}

/// The arithmetic operators on ints, longs and doubles, with the owned
/// evaluator's promotion rules; `None` for any other operand (or a zero
/// divisor), which the owned evaluator then handles.
fn arith<'a>(op: Arith, args: &'a [Node], cx: &RawCx<'a, '_>) -> MongoResult<Option<RawVal<'a>>> {
    let null = || Ok(Some(RawVal::Owned(Bson::Null)));
    match op {
        Arith::Add | Arith::Multiply => {
            let mut acc = Num::I32(if matches!(op, Arith::Add) { 0 } else { 1 });
            let mut saw_null = false;
            for a in args {
                let v = a.eval(cx)?;
                if v.nullish() {
                    // `$add` stops at the first null; `$multiply` still
                    // checks the operands after it.
                    if matches!(op, Arith::Add) {
                        return null();
                    }
                    saw_null = true;
                    continue;
                }
                let Some(n) = v.num() else {
                    return Ok(None);
                };
                let r = match op {
                    Arith::Add => num_add(acc, n, LongOverflow::ToDouble),
                    _ => num_mul(acc, n, LongOverflow::ToDouble),
                };
                acc = r.unwrap_or(Num::F64(f64::NAN));
            }
            if saw_null {
                return null();
            }
            Ok(Some(RawVal::Owned(acc.to_bson())))
        }
        Arith::Subtract | Arith::Divide => {
            let [a, b] = args else {
                return Ok(None);
            };
            let (a, b) = (a.eval(cx)?, b.eval(cx)?);
            if matches!(op, Arith::Subtract) && (a.nullish() || b.nullish()) {
                return null();
            }
            let (Some(x), Some(y)) = (a.num(), b.num()) else {
                return Ok(None);
            };
            Ok(Some(RawVal::Owned(match op {
                Arith::Subtract => num_sub(x, y).to_bson(),
                _ if y.is_zero() => return Ok(None),
                _ => Bson::Double(x.as_f64() / y.as_f64()),
            })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, rawdoc, DateTime};

    fn both(expr: Bson, doc: &bson::RawDocumentBuf) -> (Value, Value) {
        let e = Expr::parse(&expr).expect("parses");
        let vars = Vars::new();
        let owned = e.eval(&Document::try_from(doc.as_ref()).expect("doc"), &vars);
        let raw = RawExpr::compile(&e).eval_value(&RawCx::new(doc, &vars));
        (owned.expect("owned"), raw.expect("raw"))
    }

    #[test]
    fn ported_operators_agree_with_the_owned_evaluator() {
        let d = rawdoc! {
            "t": DateTime::from_millis(1_330_000_000_123),
            "v": 7, "l": 9_i64, "f": 2.5, "n": null,
            "s": {"a": {"b": 3}}, "arr": [{"b": 1}, {"b": 2}],
            "dec": bson::Decimal128::from_bytes([0; 16]),
        };
        for e in [
            bson::bson!({"$year": "$t"}),
            bson::bson!({"$week": "$t"}),
            bson::bson!({"$dayOfYear": ["$t"]}),
            bson::bson!({"$hour": {"date": "$t", "timezone": "+05:30"}}),
            bson::bson!({"$month": "$n"}),
            bson::bson!({"$month": "$nothing"}),
            bson::bson!({"y": {"$year": "$t"}, "m": {"$month": "$t"}, "x": "$nothing"}),
            bson::bson!({"$add": ["$v", "$l", "$f"]}),
            bson::bson!({"$add": ["$v", "$t"]}),
            bson::bson!({"$multiply": ["$v", "$n", 2]}),
            bson::bson!({"$subtract": ["$l", "$v"]}),
            bson::bson!({"$divide": ["$v", "$f"]}),
            bson::bson!({"$add": ["$v", "$dec"]}),
            bson::bson!({"$gt": ["$v", "$f"]}),
            bson::bson!({"$cmp": ["$s", "$nothing"]}),
            bson::bson!("$s.a.b"),
            bson::bson!("$arr.b"),
            bson::bson!("$v.b"),
            bson::bson!({"$concat": ["a", "b"]}),
        ] {
            let (owned, raw) = both(e.clone(), &d);
            assert_eq!(owned, raw, "{e}");
        }
    }

    #[test]
    fn errors_come_from_the_owned_evaluator() {
        let d = rawdoc! {"s": "x", "v": 0};
        for e in [
            bson::bson!({"$year": "$s"}),
            bson::bson!({"$add": ["$s", 1]}),
            bson::bson!({"$divide": [1, "$v"]}),
        ] {
            let ex = Expr::parse(&e).expect("parses");
            let vars = Vars::new();
            let owned = ex
                .eval(&Document::try_from(d.as_ref()).expect("doc"), &vars)
                .expect_err("owned fails");
            let raw = RawExpr::compile(&ex)
                .eval_value(&RawCx::new(&d, &vars))
                .expect_err("raw fails");
            assert_eq!(owned.to_string(), raw.to_string(), "{e}");
        }
    }

    #[test]
    fn object_keys_match_the_owned_key() {
        let d = rawdoc! {"t": DateTime::from_millis(86_400_000 * 400), "v": 1.0, "s": "a"};
        let e = Expr::parse(&bson::bson!({"y": {"$year": "$t"}, "v": "$v", "s": "$s", "x": "$x"}))
            .expect("parses");
        let vars = Vars::new();
        let raw = RawExpr::compile(&e);
        let cx = RawCx::new(&d, &vars);
        let mut k = Vec::new();
        raw.key_into(&cx, &mut k, None).expect("key");
        let owned = e
            .eval(&Document::try_from(d.as_ref()).expect("doc"), &vars)
            .expect("eval");
        assert_eq!(k, crate::key::key_of_in(owned.as_ref(), None));
        let _ = doc! {};
    }
}
