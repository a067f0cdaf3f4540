//! Property tests: parsing and evaluating arbitrary expressions, updates and
//! pipelines built from a small vocabulary must return Ok or Err, never panic.

use crate::agg::{DocStream, Pipeline};
use crate::expr::{Expr, Vars};
use crate::update::UpdateSpec;
use bson::{Bson, DateTime, Document};
use proptest::prelude::*;

const OPS: &[&str] = &[
    "$add",
    "$subtract",
    "$multiply",
    "$divide",
    "$mod",
    "$abs",
    "$round",
    "$trunc",
    "$pow",
    "$log",
    "$sqrt",
    "$concat",
    "$substrBytes",
    "$substrCP",
    "$split",
    "$indexOfBytes",
    "$arrayElemAt",
    "$slice",
    "$range",
    "$size",
    "$in",
    "$concatArrays",
    "$toInt",
    "$toLong",
    "$toString",
    "$toDate",
    "$year",
    "$week",
    "$dateToString",
    "$dateAdd",
    "$dateTrunc",
    "$dateFromParts",
    "$cmp",
    "$eq",
    "$cond",
    "$ifNull",
    "$mergeObjects",
    "$arrayToObject",
    "$objectToArray",
    "$setUnion",
    "$zip",
    "$firstN",
    "$sortArray",
    "$regexMatch",
    "$replaceAll",
    "$let",
    "$map",
    "$filter",
    "$reduce",
    "$switch",
    "$trim",
    "$bitAnd",
    "$sum",
    "$avg",
    "$max",
];

const FIELDS: &[&str] = &[
    "a",
    "b",
    "c",
    "input",
    "n",
    "date",
    "unit",
    "amount",
    "startDate",
    "format",
    "vars",
    "in",
    "as",
    "cond",
    "regex",
    "find",
    "replacement",
    "inputs",
    "sortBy",
    "year",
    "binSize",
    "branches",
    "case",
    "then",
    "default",
    "initialValue",
    "each",
    "0",
    "1",
];

fn leaf() -> impl Strategy<Value = Bson> {
    prop_oneof![
        any::<i32>().prop_map(Bson::Int32),
        any::<i64>().prop_map(Bson::Int64),
        any::<f64>().prop_map(Bson::Double),
        Just(Bson::Null),
        any::<bool>().prop_map(Bson::Boolean),
        "[a-c$.%YmdH]{0,6}".prop_map(Bson::String),
        prop::sample::select(vec![
            "$a", "$b.c", "$$ROOT", "$$NOW", "$$this", "$$value", "day", "month", "%Y-%m", "a.b"
        ])
        .prop_map(|s| Bson::String(s.to_string())),
        any::<i64>().prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
        prop::sample::select(vec![0i32, 1, -1, 2, 3, i32::MAX, i32::MIN]).prop_map(Bson::Int32),
    ]
}

fn value() -> impl Strategy<Value = Bson> {
    leaf().prop_recursive(4, 32, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            (prop::sample::select(OPS), inner.clone()).prop_map(|(op, arg)| {
                let mut d = Document::new();
                d.insert(op, arg);
                Bson::Document(d)
            }),
            prop::collection::vec((prop::sample::select(FIELDS), inner), 0..4).prop_map(|kv| {
                let mut d = Document::new();
                for (k, v) in kv {
                    d.insert(k, v);
                }
                Bson::Document(d)
            }),
        ]
    })
}

fn doc() -> impl Strategy<Value = Document> {
    prop::collection::vec((prop::sample::select(FIELDS), value()), 0..5).prop_map(|kv| {
        let mut d = Document::new();
        for (k, v) in kv {
            d.insert(k, v);
        }
        d
    })
}

const MODS: &[&str] = &[
    "$set",
    "$unset",
    "$inc",
    "$mul",
    "$min",
    "$max",
    "$push",
    "$addToSet",
    "$pop",
    "$pull",
    "$pullAll",
    "$rename",
    "$bit",
    "$currentDate",
];
const PATHS: &[&str] = &["a", "a.b", "a.0", "a.$[]", "b.1.c", "c", "a.5", "_id"];

fn update() -> impl Strategy<Value = Document> {
    prop::collection::vec(
        (
            prop::sample::select(MODS),
            prop::sample::select(PATHS),
            value(),
        ),
        1..4,
    )
    .prop_map(|ops| {
        let mut d = Document::new();
        for (m, p, v) in ops {
            let mut inner = match d.get(m) {
                Some(Bson::Document(x)) => x.clone(),
                _ => Document::new(),
            };
            inner.insert(p, v);
            d.insert(m, inner);
        }
        d
    })
}

const STAGES: &[&str] = &[
    "$project",
    "$addFields",
    "$group",
    "$sort",
    "$unwind",
    "$bucket",
    "$bucketAuto",
    "$setWindowFields",
    "$fill",
    "$densify",
    "$replaceWith",
    "$redact",
    "$limit",
    "$skip",
    "$count",
    "$sortByCount",
    "$facet",
];

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn expressions_never_panic(e in value(), d in doc()) {
        if let Ok(expr) = Expr::parse(&e) {
            let _ = expr.eval(&d, &Vars::new());
        }
    }

    #[test]
    fn updates_never_panic(u in update(), d in doc(), inserting in any::<bool>()) {
        if let Ok(spec) = UpdateSpec::parse(&u) {
            let mut target = d.clone();
            let r = spec.apply(&mut target, inserting);
            if r.is_err() {
                prop_assert_eq!(target, d, "a failed update must leave the document untouched");
            }
        }
    }

    #[test]
    fn pipelines_never_panic(stage in prop::sample::select(STAGES), arg in value(), docs in prop::collection::vec(doc(), 0..6)) {
        let mut spec = Document::new();
        spec.insert(stage, arg);
        if let Ok(p) = Pipeline::parse(&[spec]) {
            let input: DocStream = Box::new(docs.into_iter().map(Ok));
            let _ = p.run(input).take(10_000).count();
        }
    }
}
