//! Differential test of the evaluator over raw BSON (`expr::raw`, `$group`'s
//! raw path) against the owned evaluator, which serves as the reference
//! interpreter: random documents (ints, longs, doubles, decimals, dates,
//! strings, nulls, missing fields, arrays, embedded documents) and random
//! expressions built from the ported operators (field paths, date parts,
//! arithmetic, comparisons, object literals) mixed with operators that fall
//! back (`$ifNull`, `$concat`, `$toString`, time zones).
//!
//! - Expressions (what `$project` computes): every document through
//!   `RawExpr::eval_value` and `Expr::eval`, the same value or error.
//! - Pipelines `[$match?, $group]`: `Pipeline::run_raw_with_reader` over the
//!   stored bytes and `Pipeline::run` over owned documents, the same groups
//!   (compared order-insensitively) or the same error.

use bisondb_query::agg::{DocStream, Pipeline, RawDocStream};
use bisondb_query::expr::raw::{RawCx, RawExpr};
use bisondb_query::expr::{Expr, Vars};
use bson::{doc, Bson, DateTime, Decimal128, Document, RawDocumentBuf};
use proptest::prelude::*;

fn date(ms: i64) -> Bson {
    Bson::DateTime(DateTime::from_millis(ms))
}

/// A number of any of the four types, from a small set so groups collide
/// (1, 1L and 1.0 must share a group).
fn number() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (-3i32..4).prop_map(Bson::Int32),
        (-3i64..4).prop_map(Bson::Int64),
        (-3i32..4).prop_map(|i| Bson::Double(f64::from(i))),
        (-30i32..40).prop_map(|i| Bson::Double(f64::from(i) / 8.0)),
        Just(Bson::Int32(i32::MAX)),
        Just(Bson::Int64(i64::MAX)),
        Just(Bson::Double(f64::NAN)),
        Just(Bson::Double(-0.0)),
        Just(Bson::Decimal128(
            "2.5"
                .parse::<Decimal128>()
                .unwrap_or(Decimal128::from_bytes([0; 16]))
        )),
    ]
}

/// A date in 2011-2013 (and one before 1970), in whole hours or not.
fn a_date() -> impl Strategy<Value = Bson> {
    prop_oneof![
        (0i64..26_000).prop_map(|h| date(1_293_840_000_000 + h * 3_600_000)),
        (0i64..1_000_000_000).prop_map(|s| date(1_293_840_000_000 + s * 97)),
        Just(date(-86_400_000 * 400 - 1)),
    ]
}

fn scalar() -> impl Strategy<Value = Bson> {
    prop_oneof![
        4 => number(),
        3 => a_date(),
        1 => Just(Bson::Null),
        1 => prop_oneof![Just("a"), Just("b"), Just("A")].prop_map(|s| Bson::String(s.into())),
        1 => Just(Bson::Boolean(true)),
        1 => Just(Bson::Timestamp(bson::Timestamp { time: 1_330_000_000, increment: 1 })),
    ]
}

/// A field's value: a scalar, an array, an embedded document, or absent.
fn field_value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        6 => scalar().prop_map(Some),
        1 => Just(None),
        1 => prop::collection::vec(scalar(), 0..3).prop_map(|a| Some(Bson::Array(a))),
        1 => (scalar(), scalar()).prop_map(|(x, y)| Some(Bson::Document(doc! {"x": x, "y": y}))),
        1 => prop::collection::vec((scalar(), scalar()), 0..3).prop_map(|a| {
            Some(Bson::Array(
                a.into_iter()
                    .map(|(x, y)| Bson::Document(doc! {"x": x, "y": y}))
                    .collect(),
            ))
        }),
    ]
}

const FIELDS: &[&str] = &["d", "v", "w", "s", "o"];

/// A document of [`FIELDS`], and `e`, a second date (usually), so one
/// document's expressions read two different dates.
fn document() -> impl Strategy<Value = Document> {
    (
        prop::collection::vec(field_value(), FIELDS.len()),
        prop_oneof![4 => a_date().prop_map(Some), 1 => field_value()],
    )
        .prop_map(|(vals, e)| {
            let mut d = Document::new();
            for (name, v) in FIELDS.iter().zip(vals) {
                if let Some(v) = v {
                    d.insert(*name, v);
                }
            }
            if let Some(e) = e {
                d.insert("e", e);
            }
            d
        })
}

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        6 => prop_oneof![
            Just("$d"), Just("$e"), Just("$v"), Just("$w"), Just("$s"), Just("$o"),
            Just("$o.x"), Just("$o.y"), Just("$d.x"), Just("$v.y"), Just("$missing"),
        ]
        .prop_map(|p| Bson::String(p.into())),
        2 => scalar(),
        1 => Just(Bson::String("$$NOW".into())),
    ]
}

const DATE_PARTS: &[&str] = &[
    "$year",
    "$month",
    "$dayOfMonth",
    "$hour",
    "$minute",
    "$second",
    "$millisecond",
    "$dayOfWeek",
    "$dayOfYear",
    "$week",
    "$isoWeek",
];
const ARITH: &[&str] = &["$add", "$subtract", "$multiply", "$divide"];
const COMPARE: &[&str] = &["$eq", "$ne", "$gt", "$gte", "$lt", "$lte", "$cmp"];

fn expression() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(3, 24, 3, |inner| {
        prop_oneof![
            4 => (prop::sample::select(DATE_PARTS), inner.clone(), 0..4u8).prop_map(|(op, e, form)| {
                match form {
                    0 => Bson::Document(doc! {op: e}),
                    1 => Bson::Document(doc! {op: [e]}),
                    2 => Bson::Document(doc! {op: {"date": e}}),
                    _ => Bson::Document(doc! {op: {"date": e, "timezone": "+01:00"}}),
                }
            }),
            3 => (prop::sample::select(ARITH), prop::collection::vec(inner.clone(), 2..4))
                .prop_map(|(op, mut args)| {
                    if op == "$subtract" || op == "$divide" {
                        args.truncate(2);
                    }
                    Bson::Document(doc! {op: args})
                }),
            2 => (prop::sample::select(COMPARE), inner.clone(), inner.clone())
                .prop_map(|(op, a, b)| Bson::Document(doc! {op: [a, b]})),
            2 => (inner.clone(), inner.clone(), inner.clone())
                .prop_map(|(a, b, c)| Bson::Document(doc! {"a": a, "b": b, "c": c})),
            1 => (inner.clone(), inner.clone())
                .prop_map(|(a, b)| Bson::Document(doc! {"$ifNull": [a, b]})),
            1 => inner.clone().prop_map(|a| Bson::Document(doc! {"$toString": a})),
        ]
    })
}

const ACCUMULATORS: &[&str] = &["$sum", "$avg", "$min", "$max", "$first", "$last", "$push"];

/// A group key: a field, an object of fields and date parts (seed 003's
/// shape), or any expression.
fn group_key() -> impl Strategy<Value = Bson> {
    let part = prop_oneof![
        leaf(),
        (
            prop::sample::select(DATE_PARTS),
            prop_oneof![Just("$d"), Just("$e")]
        )
            .prop_map(|(op, f)| Bson::Document(doc! {op: f})),
    ];
    prop_oneof![
        leaf(),
        prop::collection::vec(part, 1..4).prop_map(|parts| {
            let mut d = Document::new();
            for (i, p) in parts.into_iter().enumerate() {
                d.insert(format!("k{i}"), p);
            }
            Bson::Document(d)
        }),
        expression(),
    ]
}

fn group() -> impl Strategy<Value = Document> {
    (
        group_key(),
        prop::collection::vec((prop::sample::select(ACCUMULATORS), expression()), 0..4),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(id, accs, count, top)| {
            let mut g = doc! {"_id": id};
            for (i, (op, e)) in accs.into_iter().enumerate() {
                g.insert(format!("f{i}"), doc! {op: e});
            }
            if count {
                g.insert("n", doc! {"$count": {}});
            }
            if top {
                // Falls back to owned documents (it needs a sort key).
                g.insert("t", doc! {"$top": {"sortBy": {"w": 1}, "output": "$v"}});
            }
            g
        })
}

fn filter() -> impl Strategy<Value = Option<Document>> {
    prop_oneof![
        2 => Just(None),
        1 => number().prop_map(|n| Some(doc! {"v": {"$gt": n}})),
        1 => a_date().prop_map(|d| Some(doc! {"d": {"$gte": d}})),
        1 => Just(Some(doc! {"s": {"$in": ["a", null]}})),
    ]
}

/// A value, or the error's message: what both evaluators must agree on.
fn outcome<T: std::fmt::Debug>(r: bisondb_error::MongoResult<T>) -> String {
    match r {
        Ok(v) => format!("ok {v:?}"),
        Err(e) => format!("error {e}"),
    }
}

fn raw_docs(docs: &[Document]) -> Vec<RawDocumentBuf> {
    docs.iter()
        .map(|d| RawDocumentBuf::try_from(d).expect("encodes"))
        .collect()
}

/// The pipeline's output, groups sorted (by their debug form), or the error.
fn run_sorted(out: DocStream) -> String {
    match out.collect::<Result<Vec<_>, _>>() {
        Ok(docs) => {
            let mut shown: Vec<String> = docs.iter().map(|d| format!("{d:?}")).collect();
            shown.sort();
            format!("ok {shown:?}")
        }
        Err(e) => format!("error {e}"),
    }
}

fn now() -> DateTime {
    DateTime::from_millis(1_330_000_000_000)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn expressions_agree(e in expression(), docs in prop::collection::vec(document(), 1..8)) {
        let Ok(parsed) = Expr::parse(&e) else { return Ok(()); };
        let compiled = RawExpr::compile(&parsed);
        let vars = Vars::with_now(now());
        for (d, raw) in docs.iter().zip(raw_docs(&docs)) {
            let owned = outcome(parsed.eval(d, &vars));
            let from_raw = outcome(compiled.eval_value(&RawCx::new(&raw, &vars)));
            prop_assert_eq!(&owned, &from_raw, "expression {} on {}", e, d);
        }
    }

    #[test]
    fn groups_agree(
        m in filter(),
        g in group(),
        docs in prop::collection::vec(document(), 0..40),
    ) {
        let mut stages = Vec::new();
        if let Some(m) = m {
            stages.push(doc! {"$match": m});
        }
        stages.push(doc! {"$group": g});
        let Ok(reference) = Pipeline::parse(&stages) else { return Ok(()); };
        let reference = reference.with_now(now());
        let raw = Pipeline::parse(&stages).expect("parsed once").with_now(now());
        prop_assert!(raw.reads_raw(), "{:?} should read raw documents", stages);
        let owned: DocStream = Box::new(docs.clone().into_iter().map(Ok));
        let stored: RawDocStream = Box::new(raw_docs(&docs).into_iter().map(Ok));
        let expected = run_sorted(reference.run(owned));
        let got = run_sorted(raw.run_raw_with_reader(stored, None));
        prop_assert_eq!(expected, got, "pipeline {:?}", stages);
    }
}

/// The cases the issue names, spelled out: 1, 1.0 and NumberLong(1) group
/// together over raw input, and seed 003's per-day group gives the owned
/// evaluator's result.
#[test]
fn numeric_keys_and_the_per_day_group() {
    let docs = vec![
        doc! {"k": 1, "created_on": date(1_330_000_000_000), "value": 1.5},
        doc! {"k": 1.0, "created_on": date(1_330_000_000_000 + 3_600_000), "value": 2},
        doc! {"k": 1_i64, "created_on": date(1_330_000_000_000 + 86_400_000), "value": 3_i64},
        doc! {"created_on": Bson::Null, "value": "x"},
    ];
    let per_day = doc! {"$group": {
        "_id": {
            "year": {"$year": "$created_on"},
            "month": {"$month": "$created_on"},
            "day": {"$dayOfMonth": "$created_on"},
        },
        "count": {"$count": {}},
        "avg": {"$avg": "$value"},
        "min": {"$min": "$value"},
        "max": {"$max": "$value"},
    }};
    for stages in [
        vec![doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}}],
        vec![per_day],
    ] {
        let owned: DocStream = Box::new(docs.clone().into_iter().map(Ok));
        let stored: RawDocStream = Box::new(raw_docs(&docs).into_iter().map(Ok));
        let expected = run_sorted(Pipeline::parse(&stages).expect("parses").run(owned));
        let raw = Pipeline::parse(&stages).expect("parses");
        assert!(raw.reads_raw());
        assert_eq!(expected, run_sorted(raw.run_raw_with_reader(stored, None)));
    }
    // Past a tiny memory limit the raw path spills new groups' documents as
    // the owned one does, with the same result.
    let many: Vec<Document> = (0..200)
        .map(|i| doc! {"k": i % 37, "created_on": date(1_330_000_000_000 + i * 3_600_000), "value": i})
        .collect();
    let spilling = |p: Pipeline| {
        let mut p = p;
        p.set_memory_limits(bisondb_query::agg::spill::MemoryLimits {
            group_bytes: 2_000,
            allow_disk_use: true,
            ..Default::default()
        });
        p
    };
    let stages = [doc! {"$group": {
        "_id": {"k": "$k", "d": {"$dayOfMonth": "$created_on"}},
        "n": {"$sum": 1}, "first": {"$first": "$value"}, "last": {"$last": "$value"},
    }}];
    let owned: DocStream = Box::new(many.clone().into_iter().map(Ok));
    let stored: RawDocStream = Box::new(raw_docs(&many).into_iter().map(Ok));
    let expected = run_sorted(spilling(Pipeline::parse(&stages).expect("parses")).run(owned));
    assert!(expected.starts_with("ok"), "{expected}");
    let got = run_sorted(
        spilling(Pipeline::parse(&stages).expect("parses")).run_raw_with_reader(stored, None),
    );
    assert_eq!(expected, got);

    let stored: RawDocStream = Box::new(raw_docs(&docs).into_iter().map(Ok));
    let one = Pipeline::parse(&[doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}}])
        .expect("parses")
        .run_raw_with_reader(stored, None)
        .collect::<Result<Vec<_>, _>>()
        .expect("runs");
    assert_eq!(one.len(), 2, "{one:?}");
}
