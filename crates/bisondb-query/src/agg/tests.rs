//! Stage-by-stage tables and whole-pipeline tests.

use super::*;
use bson::{doc, oid::ObjectId};
use std::sync::Arc;

fn run(stages: Vec<Document>, input: Vec<Document>) -> MongoResult<Vec<Document>> {
    let p = Pipeline::parse(&stages)?;
    let stream: DocStream = Box::new(input.into_iter().map(Ok));
    p.run(stream).collect()
}

fn check(cases: Vec<(Vec<Document>, Vec<Document>, Vec<Document>)>) {
    for (stages, input, want) in cases {
        let got = run(stages.clone(), input).unwrap_or_else(|e| panic!("{stages:?}: {e}"));
        assert_eq!(got, want, "{stages:?}");
        for (g, w) in got.iter().zip(&want) {
            assert_eq!(
                g.keys().collect::<Vec<_>>(),
                w.keys().collect::<Vec<_>>(),
                "field order for {stages:?}"
            );
        }
    }
}

fn check_err(cases: Vec<(Vec<Document>, Vec<Document>, i32, &str)>) {
    for (stages, input, code, msg) in cases {
        let e = run(stages.clone(), input).expect_err(&format!("{stages:?}"));
        assert_eq!(e.code.code(), code, "{stages:?}: {e}");
        assert!(
            e.message.contains(msg),
            "{stages:?}: got {:?}, want {msg:?}",
            e.message
        );
    }
}

fn people() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "name": "ann", "age": 30, "city": "Oslo", "tags": ["a", "b"]},
        doc! {"_id": 2, "name": "bob", "age": 25, "city": "Rome", "tags": []},
        doc! {"_id": 3, "name": "cy", "age": 35, "city": "Oslo"},
        doc! {"_id": 4, "name": "di", "age": 25.0, "city": "Rome", "tags": "solo"},
    ]
}

#[test]
fn match_skip_limit_count() {
    check(vec![
        (
            vec![doc! {"$match": {"city": "Oslo"}}],
            people(),
            vec![people()[0].clone(), people()[2].clone()],
        ),
        (vec![doc! {"$skip": 3}], people(), vec![people()[3].clone()]),
        (
            vec![doc! {"$limit": 1}],
            people(),
            vec![people()[0].clone()],
        ),
        (vec![doc! {"$count": "n"}], people(), vec![doc! {"n": 4}]),
        (
            vec![doc! {"$match": {"city": "Nowhere"}}, doc! {"$count": "n"}],
            people(),
            vec![],
        ),
    ]);
}

#[test]
fn project_stage() {
    let d = vec![doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1, "x": 0}, 5]}];
    check(vec![
        (
            vec![doc! {"$project": {"a": 1}}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1}],
        ),
        (
            vec![doc! {"$project": {"a": 1, "_id": 0}}],
            d.clone(),
            vec![doc! {"a": 1}],
        ),
        (
            vec![doc! {"$project": {"b.c": 1}}],
            d.clone(),
            vec![doc! {"_id": 1, "b": {"c": 2}}],
        ),
        (
            vec![doc! {"$project": {"e.c": 1}}],
            d.clone(),
            vec![doc! {"_id": 1, "e": [{"c": 1}]}],
        ),
        (
            vec![doc! {"$project": {"b": 0, "e": 0}}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1}],
        ),
        (
            vec![doc! {"$project": {"b.d": 0, "_id": 0, "e": 0}}],
            d.clone(),
            vec![doc! {"a": 1, "b": {"c": 2}}],
        ),
        (
            vec![
                doc! {"$project": {"sum": {"$add": ["$a", "$b.c"]}, "a": 1, "lit": {"$literal": 1}, "s": "$b.d"}},
            ],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1, "sum": 3, "lit": 1, "s": 3}],
        ),
        (
            vec![doc! {"$project": {"x": "$missing", "a": 1}}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1}],
        ),
        (
            vec![doc! {"$project": {"_id": "$a", "k": "$b.c"}}],
            d.clone(),
            vec![doc! {"_id": 1, "k": 2}],
        ),
        (
            vec![doc! {"$project": {"n.m": {"$literal": 7}}}],
            d.clone(),
            vec![doc! {"_id": 1, "n": {"m": 7}}],
        ),
        (
            vec![doc! {"$unset": ["b", "e"]}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1}],
        ),
        (
            vec![doc! {"$unset": "e.x"}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1, "b": {"c": 2, "d": 3}, "e": [{"c": 1}, 5]}],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$project": {}}],
            vec![],
            51272,
            "projection specification must have at least one field",
        ),
        (
            vec![doc! {"$project": {"a": 1, "b": 0}}],
            vec![],
            31254,
            "Cannot do exclusion on field b in inclusion projection",
        ),
        (
            vec![doc! {"$project": {"a": 0, "b": 1}}],
            vec![],
            31253,
            "Cannot do inclusion on field b in exclusion projection",
        ),
        (
            vec![doc! {"$project": {"a": 0, "b": "$x"}}],
            vec![],
            31252,
            "Cannot use expression other than $meta",
        ),
        (
            vec![doc! {"$project": {"a": 1, "a.b": 1}}],
            vec![],
            31250,
            "Path collision at a.b",
        ),
        (
            vec![doc! {"$project": 1}],
            vec![],
            15969,
            "$project specification must be an object",
        ),
        (
            vec![doc! {"$unset": 1}],
            vec![],
            31002,
            "$unset specification must be a string or an array",
        ),
    ]);
}

#[test]
fn add_fields_and_replace_root() {
    let d = vec![doc! {"_id": 1, "a": 1, "o": {"x": 1}, "arr": [{"x": 1}, {"x": 2}]}];
    check(vec![
        (
            vec![doc! {"$addFields": {"b": {"$add": ["$a", 1]}, "a": 10}}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 10, "o": {"x": 1}, "arr": [{"x": 1}, {"x": 2}], "b": 2}],
        ),
        (
            vec![doc! {"$set": {"o.y": "$a", "arr.z": 0}}],
            d.clone(),
            vec![
                doc! {"_id": 1, "a": 1, "o": {"x": 1, "y": 1}, "arr": [{"x": 1, "z": 0}, {"x": 2, "z": 0}]},
            ],
        ),
        (
            vec![doc! {"$set": {"o": {"w": 5}}}],
            d.clone(),
            vec![doc! {"_id": 1, "a": 1, "o": {"x": 1, "w": 5}, "arr": [{"x": 1}, {"x": 2}]}],
        ),
        (
            vec![doc! {"$set": {"a": "$$REMOVE"}}],
            d.clone(),
            vec![doc! {"_id": 1, "o": {"x": 1}, "arr": [{"x": 1}, {"x": 2}]}],
        ),
        (
            vec![doc! {"$replaceRoot": {"newRoot": "$o"}}],
            d.clone(),
            vec![doc! {"x": 1}],
        ),
        (
            vec![doc! {"$replaceWith": {"$mergeObjects": ["$o", {"id": "$_id"}]}}],
            d.clone(),
            vec![doc! {"x": 1, "id": 1}],
        ),
    ]);
    check_err(vec![
        (vec![doc! {"$replaceRoot": {"newRoot": "$a"}}], d.clone(), 40228, "'newRoot' expression must evaluate to an object, but resulting value was: 1. Type of resulting value: 'int'"),
        (vec![doc! {"$replaceRoot": {"newRoot": "$nope"}}], d.clone(), 40228, "resulting value was: MISSING"),
        (vec![doc! {"$replaceRoot": {}}], vec![], 40231, "no newRoot specified"),
        (vec![doc! {"$addFields": 1}], vec![], 40272, "$addFields specification stage must be an object"),
    ]);
}

#[test]
fn unwind_stage() {
    check(vec![
        (
            vec![doc! {"$unwind": "$tags"}],
            people(),
            vec![
                doc! {"_id": 1, "name": "ann", "age": 30, "city": "Oslo", "tags": "a"},
                doc! {"_id": 1, "name": "ann", "age": 30, "city": "Oslo", "tags": "b"},
                doc! {"_id": 4, "name": "di", "age": 25.0, "city": "Rome", "tags": "solo"},
            ],
        ),
        (
            vec![
                doc! {"$unwind": {"path": "$tags", "includeArrayIndex": "i", "preserveNullAndEmptyArrays": true}},
                doc! {"$project": {"tags": 1, "i": 1}},
            ],
            people(),
            vec![
                doc! {"_id": 1, "tags": "a", "i": 0_i64},
                doc! {"_id": 1, "tags": "b", "i": 1_i64},
                // mongod drops an empty array's field (manual, `$unwind`).
                doc! {"_id": 2, "i": null},
                doc! {"_id": 3, "i": null},
                doc! {"_id": 4, "tags": "solo", "i": null},
            ],
        ),
        (
            // The manual's "Preserve Null and Empty Arrays" example: `sizes:
            // []` comes out without `sizes`, `null` and missing as they were.
            vec![doc! {"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": true}}],
            vec![
                doc! {"_id": 2, "item": "EFG", "sizes": []},
                doc! {"_id": 4, "item": "LMN"},
                doc! {"_id": 5, "item": "XYZ", "sizes": null},
                doc! {"_id": 6, "o": {"l": [], "k": 0}},
            ],
            vec![
                doc! {"_id": 2, "item": "EFG"},
                doc! {"_id": 4, "item": "LMN"},
                doc! {"_id": 5, "item": "XYZ", "sizes": null},
                doc! {"_id": 6, "o": {"l": [], "k": 0}},
            ],
        ),
        (
            vec![doc! {"$unwind": {"path": "$o.l", "preserveNullAndEmptyArrays": true}}],
            vec![doc! {"_id": 6, "o": {"l": [], "k": 0}}],
            vec![doc! {"_id": 6, "o": {"k": 0}}],
        ),
        (
            vec![doc! {"$unwind": "$o.l"}],
            vec![doc! {"_id": 1, "o": {"l": [1, 2], "k": 0}}],
            vec![
                doc! {"_id": 1, "o": {"l": 1, "k": 0}},
                doc! {"_id": 1, "o": {"l": 2, "k": 0}},
            ],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$unwind": "tags"}],
            vec![],
            28818,
            "path option to $unwind stage should be prefixed with a '$': tags",
        ),
        (
            vec![doc! {"$unwind": 1}],
            vec![],
            15981,
            "expected either a string or an object",
        ),
        (
            vec![doc! {"$unwind": {"path": "$a", "bogus": 1}}],
            vec![],
            28811,
            "unrecognized option to $unwind stage: bogus",
        ),
        (
            vec![doc! {"$unwind": {"includeArrayIndex": "i"}}],
            vec![],
            28812,
            "no path specified to $unwind stage",
        ),
        (
            vec![doc! {"$unwind": {"path": "$a", "preserveNullAndEmptyArrays": 1}}],
            vec![],
            28809,
            "expected a boolean",
        ),
    ]);
}

#[test]
fn group_stage() {
    check(vec![
        (
            vec![doc! {"$group": {"_id": "$age", "n": {"$sum": 1}, "names": {"$push": "$name"}}}],
            people(),
            vec![
                doc! {"_id": 30, "n": 1, "names": ["ann"]},
                doc! {"_id": 25, "n": 2, "names": ["bob", "di"]},
                doc! {"_id": 35, "n": 1, "names": ["cy"]},
            ],
        ),
        (
            vec![
                doc! {"$group": {"_id": null, "avg": {"$avg": "$age"}, "min": {"$min": "$age"}, "max": {"$max": "$name"}, "c": {"$count": {}}}},
            ],
            people(),
            vec![doc! {"_id": null, "avg": 28.75, "min": 25, "max": "di", "c": 4}],
        ),
        (
            vec![
                doc! {"$group": {"_id": {"c": "$city"}, "first": {"$first": "$name"}, "last": {"$last": "$name"}, "set": {"$addToSet": "$age"}}},
            ],
            people(),
            vec![
                doc! {"_id": {"c": "Oslo"}, "first": "ann", "last": "cy", "set": [30, 35]},
                doc! {"_id": {"c": "Rome"}, "first": "bob", "last": "di", "set": [25]},
            ],
        ),
        (
            vec![doc! {"$group": {"_id": "$nope"}}],
            people(),
            vec![doc! {"_id": null}],
        ),
        (
            vec![doc! {"$group": {"_id": 1, "n": {"$sum": 1}}}],
            vec![],
            vec![],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$group": {"n": {"$sum": 1}}}],
            vec![],
            15955,
            "a group specification must include an _id",
        ),
        (
            vec![doc! {"$group": {"_id": 1, "n": {"$foo": 1}}}],
            vec![],
            15952,
            "unknown group operator '$foo'",
        ),
        (
            vec![doc! {"$group": {"_id": 1, "n": 1}}],
            vec![],
            40234,
            "The field 'n' must be an accumulator object",
        ),
        (
            vec![doc! {"$group": {"_id": 1, "a.b": {"$sum": 1}}}],
            vec![],
            40235,
            "The field name 'a.b' cannot contain '.'",
        ),
        (
            vec![doc! {"$group": 1}],
            vec![],
            15947,
            "a group's fields must be specified in an object",
        ),
    ]);
}

#[test]
fn sort_and_sort_by_count() {
    let ids = |docs: Vec<Document>| {
        docs.iter()
            .map(|d| d.get("_id").cloned().unwrap_or(Bson::Null))
            .collect::<Vec<_>>()
    };
    let got = run(vec![doc! {"$sort": {"age": 1, "_id": -1}}], people()).unwrap();
    assert_eq!(
        ids(got),
        vec![
            Bson::Int32(4),
            Bson::Int32(2),
            Bson::Int32(1),
            Bson::Int32(3)
        ]
    );
    // $sort + $limit keeps only the top k, same answer as a full sort.
    let many: Vec<Document> = (0..500)
        .map(|i| doc! {"_id": i, "v": (i * 37) % 101})
        .collect();
    let top = run(
        vec![doc! {"$sort": {"v": -1, "_id": 1}}, doc! {"$limit": 3}],
        many.clone(),
    )
    .unwrap();
    let mut full = run(vec![doc! {"$sort": {"v": -1, "_id": 1}}], many).unwrap();
    full.truncate(3);
    assert_eq!(top, full);
    assert_eq!(top.len(), 3);
    check(vec![(
        vec![doc! {"$sortByCount": "$city"}],
        vec![
            doc! {"city": "Rome"},
            doc! {"city": "Oslo"},
            doc! {"city": "Rome"},
        ],
        vec![
            doc! {"_id": "Rome", "count": 2},
            doc! {"_id": "Oslo", "count": 1},
        ],
    )]);
    check_err(vec![
        (
            vec![doc! {"$sort": 1}],
            vec![],
            15973,
            "the $sort key specification must be an object",
        ),
        (
            vec![doc! {"$sort": {}}],
            vec![],
            15976,
            "$sort stage must have at least one sort key",
        ),
        (
            vec![doc! {"$sortByCount": "city"}],
            vec![],
            40147,
            "the sortByCount field must be defined as a $-prefixed path or an expression",
        ),
    ]);
}

#[test]
fn pipeline_parse_errors() {
    check_err(vec![
        (
            vec![doc! {"$foo": 1}],
            vec![],
            40324,
            "Unrecognized pipeline stage name: '$foo'",
        ),
        (
            vec![doc! {"$changeStream": {}}],
            vec![],
            40602,
            "$changeStream is only valid as the first stage in a pipeline",
        ),
        (
            vec![doc! {"$match": {}, "$limit": 1}],
            vec![],
            40323,
            "must contain exactly one field",
        ),
        (
            vec![doc! {}],
            vec![],
            40323,
            "must contain exactly one field",
        ),
        (
            vec![doc! {"$limit": 0}],
            vec![],
            15958,
            "Expected a positive number",
        ),
        (
            vec![doc! {"$limit": "x"}],
            vec![],
            15957,
            "Expected a number",
        ),
        (
            vec![doc! {"$skip": -1}],
            vec![],
            15956,
            "Expected a non-negative number",
        ),
        (
            vec![doc! {"$count": ""}],
            vec![],
            40157,
            "the count field must be a non-empty string",
        ),
        (
            vec![doc! {"$count": "a.b"}],
            vec![],
            40160,
            "the count field cannot contain '.'",
        ),
        (
            vec![doc! {"$match": 1}],
            vec![],
            15959,
            "the match filter must be an expression in an object",
        ),
    ]);
}

#[test]
fn runtime_error_ends_the_stream() {
    let p = Pipeline::parse(&[doc! {"$project": {"x": {"$divide": [1, "$d"]}}}]).unwrap();
    let input: DocStream = Box::new(
        vec![doc! {"d": 1}, doc! {"d": 0}, doc! {"d": 2}]
            .into_iter()
            .map(Ok),
    );
    let out: Vec<_> = p.run(input).collect();
    assert_eq!(out.len(), 2);
    assert!(out[0].is_ok());
    assert_eq!(out[1].as_ref().map_err(|e| e.code.code()), Err(16608));
}

#[test]
fn leading_sort_is_found_after_a_leading_match_and_removed_keeping_the_limit() {
    let sorted_ids = |p: Pipeline, docs: Vec<Document>| -> Vec<i32> {
        p.run(Box::new(docs.into_iter().map(Ok)))
            .map(|d| d.ok().and_then(|d| d.get_i32("_id").ok()).unwrap_or(-1))
            .collect()
    };
    let stages = [
        doc! {"$match": {"a": {"$gt": 0}}},
        doc! {"$sort": {"a": -1}},
        doc! {"$limit": 2},
    ];
    let p = Pipeline::parse(&stages).unwrap();
    let spec = p.leading_sort().map(|s| s.fields().to_vec());
    assert_eq!(spec, Some(vec![("a".to_string(), false)]));
    let mut p = Pipeline::parse(&stages).unwrap();
    p.remove_leading_sort();
    assert_eq!(p.len(), 2, "$match and $limit stay");
    assert!(p.leading_sort().is_none());
    // Input already in the index's order: the $limit still cuts it.
    let docs = vec![
        doc! {"_id": 3, "a": 3},
        doc! {"_id": 2, "a": 2},
        doc! {"_id": 1, "a": 1},
    ];
    assert_eq!(sorted_ids(p, docs), vec![3, 2]);
    // No $match: the $sort must be first; later ones are not leading.
    let p = Pipeline::parse(&[doc! {"$sort": {"b": 1}}]).unwrap();
    assert!(p.leading_sort().is_some());
    let mut p = Pipeline::parse(&[doc! {"$limit": 5}, doc! {"$sort": {"b": 1}}]).unwrap();
    assert!(p.leading_sort().is_none());
    p.remove_leading_sort();
    assert_eq!(p.len(), 2, "nothing removed");
}

#[test]
fn leading_match_and_tables() {
    let p = Pipeline::parse(&[doc! {"$match": {"a": 1}}, doc! {"$limit": 2}]).unwrap();
    assert_eq!(p.leading_match(), Some(&doc! {"a": 1}));
    assert_eq!(p.len(), 2);
    let mut p = Pipeline::parse(&[doc! {"$limit": 2}, doc! {"$match": {"a": 1}}]).unwrap();
    assert_eq!(p.leading_match(), None);
    assert_eq!(p.take_leading_match(), None);
    let mut p = Pipeline::parse(&[doc! {"$match": {"a": 1}}, doc! {"$limit": 1}]).unwrap();
    assert_eq!(p.take_leading_match(), Some(doc! {"a": 1}));
    assert_eq!(p.len(), 1);
    // The caller filtered already: the rest of the pipeline runs unfiltered.
    let out: Vec<_> = p
        .run(Box::new(
            vec![doc! {"a": 2}, doc! {"a": 3}].into_iter().map(Ok),
        ))
        .collect();
    assert_eq!(out.len(), 1);
    assert!(STAGES.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(NOT_IMPLEMENTED_STAGES.windows(2).all(|w| w[0] < w[1]));
    for n in NOT_IMPLEMENTED_STAGES {
        assert!(STAGES.iter().all(|(s, _)| s != n), "{n} in both tables");
    }
}

/// The analysis from seed 003: random time-series events
/// `{created_on: <date>, value: <double>}` grouped by day and hour with the
/// average, minimum and maximum value.
#[test]
fn seed_003_time_series_analysis() {
    let base = 1_335_056_993_000_i64; // 2012-04-22T01:09:53Z
    let hour = 3_600_000_i64;
    let events: Vec<(i64, f64)> = vec![
        (base, 0.25),
        (base + 10 * 60_000, 0.75),
        (base + hour, 0.5),
        (base + 24 * hour, 0.125),
        (base + 24 * hour + 1000, 0.375),
    ];
    let input: Vec<Document> = events
        .iter()
        .map(|(ms, v)| doc! {"_id": ObjectId::new(), "created_on": DateTime::from_millis(*ms), "value": *v})
        .collect();
    let pipeline = vec![
        doc! {"$match": {"created_on": {"$gte": DateTime::from_millis(base - hour)}}},
        doc! {"$group": {
            "_id": {
                "year": {"$year": "$created_on"},
                "month": {"$month": "$created_on"},
                "day": {"$dayOfMonth": "$created_on"},
                "hour": {"$hour": "$created_on"},
            },
            "count": {"$sum": 1},
            "avg": {"$avg": "$value"},
            "min": {"$min": "$value"},
            "max": {"$max": "$value"},
        }},
        doc! {"$sort": {"_id": 1}},
    ];
    let got = run(pipeline, input).unwrap();
    let key = |d: u32, h: u32| doc! {"year": 2012, "month": 4, "day": d as i32, "hour": h as i32};
    assert_eq!(
        got,
        vec![
            doc! {"_id": key(22, 1), "count": 2, "avg": 0.5, "min": 0.25, "max": 0.75},
            doc! {"_id": key(22, 2), "count": 1, "avg": 0.5, "min": 0.5, "max": 0.5},
            doc! {"_id": key(23, 1), "count": 2, "avg": 0.25, "min": 0.125, "max": 0.375},
        ]
    );
}

/// A reader over fixed collections, standing in for the server's storage.
struct FixedReader(Vec<(String, Vec<Document>)>);

impl CollectionReader for FixedReader {
    fn read(&self, collection: &str) -> MongoResult<DocStream> {
        let docs = self
            .0
            .iter()
            .find(|(n, _)| n == collection)
            .map(|(_, d)| d.clone())
            .unwrap_or_default();
        Ok(Box::new(docs.into_iter().map(Ok)))
    }
}

fn run_with(
    stages: Vec<Document>,
    input: Vec<Document>,
    colls: Vec<(&str, Vec<Document>)>,
) -> MongoResult<Vec<Document>> {
    let p = Pipeline::parse(&stages)?;
    let reader: Arc<dyn CollectionReader> = Arc::new(FixedReader(
        colls.into_iter().map(|(n, d)| (n.to_string(), d)).collect(),
    ));
    let stream: DocStream = Box::new(input.into_iter().map(Ok));
    p.run_with_reader(stream, Some(reader)).collect()
}

#[test]
fn lookup_stage() {
    let orders = vec![
        doc! {"_id": 1, "item": "a", "qty": 2},
        doc! {"_id": 2, "item": ["b", "c"]},
        doc! {"_id": 3},
    ];
    let items = vec![
        doc! {"_id": "x", "sku": "a", "price": 5},
        doc! {"_id": "y", "sku": "b"},
        doc! {"_id": "z", "sku": ["c", "d"]},
        doc! {"_id": "w"},
    ];
    let got = run_with(
        vec![doc! {"$lookup": {"from": "items", "localField": "item", "foreignField": "sku", "as": "found"}}],
        orders.clone(),
        vec![("items", items.clone())],
    )
    .unwrap();
    let found = |d: &Document| -> Vec<Bson> {
        d.get_array("found")
            .map(|a| {
                a.iter()
                    .map(|x| {
                        x.as_document()
                            .and_then(|x| x.get("_id"))
                            .cloned()
                            .unwrap_or(Bson::Null)
                    })
                    .collect()
            })
            .unwrap_or_default()
    };
    assert_eq!(found(&got[0]), vec![Bson::from("x")]);
    assert_eq!(found(&got[1]), vec![Bson::from("y"), Bson::from("z")]);
    // A missing local field matches foreign documents without the field.
    assert_eq!(found(&got[2]), vec![Bson::from("w")]);

    let got = run_with(
        vec![doc! {"$lookup": {"from": "items", "pipeline": [{"$match": {"price": {"$gt": 1}}}, {"$project": {"_id": 1}}], "as": "cheap"}}],
        vec![doc! {"_id": 1}],
        vec![("items", items.clone())],
    )
    .unwrap();
    assert_eq!(got, vec![doc! {"_id": 1, "cheap": [{"_id": "x"}]}]);

    let got = run_with(
        vec![doc! {"$lookup": {"from": "nothing", "localField": "item", "foreignField": "sku", "as": "f"}}],
        vec![doc! {"_id": 1, "item": "a"}],
        vec![],
    )
    .unwrap();
    assert_eq!(got, vec![doc! {"_id": 1, "item": "a", "f": []}]);

    let p = Pipeline::parse(&[
        doc! {"$lookup": {"from": "items", "localField": "a", "foreignField": "b", "as": "c"}},
        doc! {"$unionWith": "more"},
    ])
    .unwrap();
    assert_eq!(
        p.foreign_collections(),
        vec!["items".to_string(), "more".to_string()]
    );

    check_err(vec![
        (
            vec![doc! {"$lookup": {"from": "x", "localField": "a", "as": "c"}}],
            vec![],
            9,
            "requires either 'pipeline' or both 'localField' and 'foreignField'",
        ),
        (
            vec![doc! {"$lookup": {"from": "x", "localField": "a", "foreignField": "b"}}],
            vec![],
            9,
            "must specify 'as' field for a $lookup",
        ),
        (
            vec![doc! {"$lookup": {"from": "x", "let": {"Bad": 1}, "pipeline": [], "as": "c"}}],
            vec![],
            16867,
            "starts with an invalid character",
        ),
        (
            vec![doc! {"$lookup": {"from": "x", "bogus": 1, "as": "c"}}],
            vec![],
            9,
            "unknown argument to $lookup: bogus",
        ),
    ]);
    // Without a reader, $lookup reports the missing wiring rather than joining nothing.
    let e = run(
        vec![doc! {"$lookup": {"from": "x", "localField": "a", "foreignField": "b", "as": "c"}}],
        vec![doc! {}],
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InternalError);
}

#[test]
fn union_with_and_facet() {
    let got = run_with(
        vec![doc! {"$unionWith": {"coll": "b", "pipeline": [{"$project": {"_id": 0, "v": 1}}]}}],
        vec![doc! {"_id": 1}],
        vec![("b", vec![doc! {"_id": 9, "v": 2}])],
    )
    .unwrap();
    assert_eq!(got, vec![doc! {"_id": 1}, doc! {"v": 2}]);
    check(vec![(
        vec![
            doc! {"$facet": {"n": [{"$count": "c"}], "top": [{"$sort": {"age": -1}}, {"$limit": 1}, {"$project": {"name": 1, "_id": 0}}]}},
        ],
        people(),
        vec![doc! {"n": [{"c": 4}], "top": [{"name": "cy"}]}],
    )]);
    check_err(vec![
        (
            vec![doc! {"$facet": {}}],
            vec![],
            40169,
            "the $facet specification must be a non-empty object",
        ),
        (
            vec![doc! {"$facet": {"a": 1}}],
            vec![],
            40170,
            "arguments to $facet must be arrays",
        ),
        (
            vec![doc! {"$facet": {"a": [{"$facet": {"b": []}}]}}],
            vec![],
            40600,
            "$facet is not allowed to be used within a $facet stage",
        ),
    ]);
}

#[test]
fn bucket_and_sample() {
    check(vec![
        (
            vec![doc! {"$bucket": {"groupBy": "$age", "boundaries": [20, 30, 40]}}],
            people(),
            vec![doc! {"_id": 20, "count": 2}, doc! {"_id": 30, "count": 2}],
        ),
        (
            vec![
                doc! {"$bucket": {"groupBy": "$age", "boundaries": [26, 40], "default": "other", "output": {"names": {"$push": "$name"}}}},
            ],
            people(),
            vec![
                doc! {"_id": 26, "names": ["ann", "cy"]},
                doc! {"_id": "other", "names": ["bob", "di"]},
            ],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$bucket": {"groupBy": "$age", "boundaries": [26, 40]}}],
            people(),
            40066,
            "could not find a matching branch",
        ),
        (
            vec![doc! {"$bucket": {"groupBy": "$age", "boundaries": [40, 26]}}],
            vec![],
            40194,
            "must be sorted in ascending order",
        ),
        (
            vec![doc! {"$bucket": {"groupBy": "$age", "boundaries": [1, "a"]}}],
            vec![],
            40193,
            "must have the same type",
        ),
        (
            vec![doc! {"$bucket": {"boundaries": [1, 2]}}],
            vec![],
            40198,
            "$bucket requires 'groupBy' and 'boundaries' to be specified.",
        ),
        (
            vec![doc! {"$bucket": {"groupBy": "$a", "boundaries": [1, 5], "default": 3}}],
            vec![],
            40199,
            "'default' field must be less than the lowest boundary",
        ),
    ]);
    let many: Vec<Document> = (0..100).map(|i| doc! {"_id": i}).collect();
    let got = run(vec![doc! {"$sample": {"size": 10}}], many.clone()).unwrap();
    assert_eq!(got.len(), 10);
    let mut ids: Vec<i32> = got.iter().filter_map(|d| d.get_i32("_id").ok()).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), 10, "sampled documents are distinct");
    assert_eq!(
        run(vec![doc! {"$sample": {"size": 500}}], many)
            .unwrap()
            .len(),
        100
    );
    check_err(vec![
        (
            vec![doc! {"$sample": {"size": -1}}],
            vec![],
            28747,
            "must not be negative",
        ),
        (
            vec![doc! {"$sample": {}}],
            vec![],
            28749,
            "$sample stage must specify a size",
        ),
    ]);
}

#[test]
fn ranked_and_n_accumulators() {
    let scores = vec![
        doc! {"g": 1, "p": "a", "s": 10},
        doc! {"g": 1, "p": "b", "s": 30},
        doc! {"g": 1, "p": "c", "s": 20},
        doc! {"g": 1, "p": "d"},
    ];
    check(vec![(
        vec![doc! {"$group": {
            "_id": "$g",
            "top": {"$top": {"sortBy": {"s": -1}, "output": "$p"}},
            "bottom": {"$bottom": {"sortBy": {"s": -1}, "output": ["$p", "$s"]}},
            "top2": {"$topN": {"n": 2, "sortBy": {"s": -1}, "output": "$p"}},
            "bottom2": {"$bottomN": {"n": 2, "sortBy": {"s": -1}, "output": "$p"}},
            "first2": {"$firstN": {"input": "$s", "n": 2}},
            "last2": {"$lastN": {"input": "$s", "n": 2}},
            "max2": {"$maxN": {"input": "$s", "n": 2}},
            "min2": {"$minN": {"input": "$s", "n": 5}},
            "median": {"$median": {"input": "$s", "method": "approximate"}},
            "pct": {"$percentile": {"input": "$s", "p": [0.0, 0.5, 1.0], "method": "approximate"}},
        }}],
        scores,
        vec![doc! {
            "_id": 1,
            "top": "b",
            "bottom": ["d", null],
            "top2": ["b", "c"],
            "bottom2": ["a", "d"],
            "first2": [10, 30],
            "last2": [20, null],
            "max2": [30, 20],
            "min2": [10, 20, 30],
            "median": 20.0,
            "pct": [10.0, 20.0, 30.0],
        }],
    )]);
    check_err(vec![
        (
            vec![doc! {"$group": {"_id": 1, "x": {"$topN": {"sortBy": {"s": 1}, "output": "$p"}}}}],
            vec![],
            40414,
            "'$topN.n' is missing",
        ),
        (
            vec![doc! {"$group": {"_id": 1, "x": {"$firstN": {"input": "$s", "n": 0}}}}],
            vec![],
            5787908,
            "must be a positive integral value",
        ),
        (
            vec![doc! {"$group": {"_id": 1, "x": {"$median": {"input": "$s", "method": "exact"}}}}],
            vec![],
            2,
            "only 'approximate'",
        ),
        (
            vec![
                doc! {"$group": {"_id": 1, "x": {"$percentile": {"input": "$s", "p": [2], "method": "approximate"}}}},
            ],
            vec![],
            7750301,
            "'p' field must be an array of numbers",
        ),
    ]);
}

#[test]
fn lookup_with_let() {
    let orders = vec![
        doc! {"_id": 1, "item": "a", "min": 3},
        doc! {"_id": 2, "item": "b", "min": 0},
    ];
    let stock = vec![
        doc! {"_id": 10, "sku": "a", "qty": 5},
        doc! {"_id": 11, "sku": "a", "qty": 1},
        doc! {"_id": 12, "sku": "b", "qty": 2},
    ];
    let got = run_with(
        vec![doc! {"$lookup": {
            "from": "stock",
            "let": {"it": "$item", "lo": "$min"},
            "pipeline": [
                {"$match": {"$expr": {"$and": [{"$eq": ["$sku", "$$it"]}, {"$gte": ["$qty", "$$lo"]}]}}},
                {"$project": {"_id": 1}},
            ],
            "as": "ok",
        }}],
        orders,
        vec![("stock", stock)],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            doc! {"_id": 1, "item": "a", "min": 3, "ok": [{"_id": 10}]},
            doc! {"_id": 2, "item": "b", "min": 0, "ok": [{"_id": 12}]},
        ]
    );
}

#[test]
fn graph_lookup_stage() {
    let employees = vec![
        doc! {"_id": 1, "name": "Dev"},
        doc! {"_id": 2, "name": "Eliot", "reportsTo": "Dev"},
        doc! {"_id": 3, "name": "Ron", "reportsTo": "Eliot"},
        doc! {"_id": 4, "name": "Andrew", "reportsTo": "Eliot"},
        doc! {"_id": 5, "name": "Asya", "reportsTo": "Ron"},
    ];
    let got = run_with(
        vec![
            doc! {"$match": {"name": "Asya"}},
            doc! {"$graphLookup": {
                "from": "employees",
                "startWith": "$reportsTo",
                "connectFromField": "reportsTo",
                "connectToField": "name",
                "as": "chain",
                "depthField": "d",
            }},
            doc! {"$project": {"chain.name": 1, "chain.d": 1, "_id": 0}},
        ],
        employees.clone(),
        vec![("employees", employees.clone())],
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            doc! {"chain": [{"name": "Ron", "d": 0_i64}, {"name": "Eliot", "d": 1_i64}, {"name": "Dev", "d": 2_i64}]}
        ]
    );
    let got = run_with(
        vec![
            doc! {"$match": {"name": "Asya"}},
            doc! {"$graphLookup": {"from": "employees", "startWith": "$reportsTo", "connectFromField": "reportsTo", "connectToField": "name", "as": "chain", "maxDepth": 0}},
        ],
        employees.clone(),
        vec![("employees", employees)],
    )
    .unwrap();
    assert_eq!(got[0].get_array("chain").map(Vec::len).ok(), Some(1));
    check_err(vec![
        (
            vec![
                doc! {"$graphLookup": {"from": "e", "startWith": "$a", "connectFromField": "a", "connectToField": "b"}},
            ],
            vec![],
            40105,
            "missing 'as' option",
        ),
        (
            vec![doc! {"$graphLookup": {"from": "e", "bogus": 1}}],
            vec![],
            40104,
            "Unknown argument to $graphLookup: bogus",
        ),
        (
            vec![doc! {"$graphLookup": {"maxDepth": -1}}],
            vec![],
            40101,
            "maxDepth requires a nonnegative argument",
        ),
    ]);
}

#[test]
fn set_window_fields_stage() {
    let sales = vec![
        doc! {"_id": 1, "st": "A", "day": 1, "amt": 10},
        doc! {"_id": 2, "st": "B", "day": 1, "amt": 5},
        doc! {"_id": 3, "st": "A", "day": 2, "amt": 20},
        doc! {"_id": 4, "st": "A", "day": 3, "amt": 20},
        doc! {"_id": 5, "st": "B", "day": 2, "amt": 7},
    ];
    let got = run(
        vec![
            doc! {"$setWindowFields": {
                "partitionBy": "$st",
                "sortBy": {"day": 1},
                "output": {
                    "cum": {"$sum": "$amt", "window": {"documents": ["unbounded", "current"]}},
                    "total": {"$sum": "$amt"},
                    "mov": {"$avg": "$amt", "window": {"documents": [-1, 0]}},
                    "near": {"$sum": "$amt", "window": {"range": [-1, 1]}},
                    "n": {"$documentNumber": {}},
                    "prev": {"$shift": {"output": "$amt", "by": -1, "default": 0}},
                },
            }},
            doc! {"$project": {"st": 0, "day": 0, "amt": 0}},
        ],
        sales,
    )
    .unwrap();
    assert_eq!(
        got,
        vec![
            doc! {"_id": 1, "cum": 10, "total": 50, "mov": 10.0, "near": 30, "n": 1, "prev": 0},
            doc! {"_id": 3, "cum": 30, "total": 50, "mov": 15.0, "near": 50, "n": 2, "prev": 10},
            doc! {"_id": 4, "cum": 50, "total": 50, "mov": 20.0, "near": 40, "n": 3, "prev": 20},
            doc! {"_id": 2, "cum": 5, "total": 12, "mov": 5.0, "near": 12, "n": 1, "prev": 0},
            doc! {"_id": 5, "cum": 12, "total": 12, "mov": 6.0, "near": 12, "n": 2, "prev": 5},
        ]
    );
    let ranks = run(
        vec![
            doc! {"$setWindowFields": {"sortBy": {"s": -1}, "output": {"r": {"$rank": {}}, "d": {"$denseRank": {}}, "l": {"$locf": "$v"}}}},
            doc! {"$project": {"_id": 1, "r": 1, "d": 1, "l": 1}},
        ],
        vec![doc! {"_id": 1, "s": 5, "v": 1}, doc! {"_id": 2, "s": 9}, doc! {"_id": 3, "s": 5}, doc! {"_id": 4, "s": 1, "v": 7}],
    )
    .unwrap();
    assert_eq!(
        ranks,
        vec![
            doc! {"_id": 2, "r": 1, "d": 1, "l": null},
            doc! {"_id": 1, "r": 2, "d": 2, "l": 1},
            doc! {"_id": 3, "r": 2, "d": 2, "l": 1},
            doc! {"_id": 4, "r": 4, "d": 3, "l": 7},
        ]
    );
    check_err(vec![
        (
            vec![doc! {"$setWindowFields": {"output": {"r": {"$rank": {}}}}}],
            vec![],
            5371602,
            "require a sortBy",
        ),
        (
            vec![doc! {"$setWindowFields": {"sortBy": {"a": 1}}}],
            vec![],
            40414,
            "'$setWindowFields.output' is missing",
        ),
        (
            vec![doc! {"$setWindowFields": {"output": {"x": {"$derivative": {}}}}}],
            vec![],
            238,
            "Window function $derivative is not supported",
        ),
        (
            vec![doc! {"$setWindowFields": {"output": {"x": {"$foo": 1}}}}],
            vec![],
            9,
            "Unrecognized window function, $foo",
        ),
    ]);
}

#[test]
fn redact_stage() {
    let d = vec![doc! {
        "_id": 1,
        "level": 1,
        "sub": {"level": 5, "secret": true},
        "list": [{"level": 1, "x": 1}, {"level": 9}, 3],
    }];
    let got = run(
        vec![doc! {"$redact": {"$cond": {"if": {"$gt": [{"$ifNull": ["$level", 0]}, 4]}, "then": "$$PRUNE", "else": "$$DESCEND"}}}],
        d.clone(),
    )
    .unwrap();
    assert_eq!(
        got,
        vec![doc! {"_id": 1, "level": 1, "list": [{"level": 1, "x": 1}, 3]}]
    );
    let none = run(vec![doc! {"$redact": "$$PRUNE"}], d.clone()).unwrap();
    assert!(none.is_empty());
    assert_eq!(run(vec![doc! {"$redact": "$$KEEP"}], d.clone()).unwrap(), d);
    check_err(vec![(
        vec![doc! {"$redact": "x"}],
        d,
        17053,
        "$redact's expression should not return anything aside from",
    )]);
}

#[test]
fn out_and_merge() {
    use super::output::{MergeAction, OutputStage, WhenMatched, WhenNotMatched};
    let p = Pipeline::parse(&[doc! {"$match": {}}, doc! {"$out": "target"}]).unwrap();
    assert_eq!(
        p.output(),
        Some(&OutputStage::Out {
            db: None,
            coll: "target".into()
        })
    );
    assert_eq!(p.len(), 1);
    let p = Pipeline::parse(&[doc! {"$merge": {"into": {"db": "d", "coll": "c"}, "on": "k", "whenMatched": "replace", "whenNotMatched": "discard"}}]).unwrap();
    assert_eq!(
        p.output(),
        Some(&OutputStage::Merge {
            db: Some("d".into()),
            coll: "c".into(),
            on: vec!["k".into()],
            when_matched: WhenMatched::Replace,
            when_not_matched: WhenNotMatched::Discard,
        })
    );
    let out = p.output().unwrap();
    assert_eq!(
        out.merge_one(None, doc! {"k": 1}).unwrap(),
        MergeAction::Discard
    );
    assert_eq!(
        out.merge_one(
            Some(&doc! {"_id": 7, "k": 1, "old": 1}),
            doc! {"_id": 8, "k": 1, "new": 2}
        )
        .unwrap(),
        MergeAction::Replace(doc! {"_id": 7, "k": 1, "new": 2})
    );
    let merge = OutputStage::parse("$merge", &Bson::from("c")).unwrap();
    assert_eq!(
        merge
            .merge_one(
                Some(&doc! {"_id": 1, "a": 1, "b": 1}),
                doc! {"_id": 1, "b": 2, "c": 3}
            )
            .unwrap(),
        MergeAction::Replace(doc! {"_id": 1, "a": 1, "b": 2, "c": 3})
    );
    let piped = OutputStage::parse(
        "$merge",
        &Bson::from(doc! {"into": "c", "whenMatched": [{"$set": {"total": {"$add": ["$total", "$$new.total"]}}}]}),
    )
    .unwrap();
    assert_eq!(
        piped
            .merge_one(
                Some(&doc! {"_id": 1, "total": 5}),
                doc! {"_id": 1, "total": 3}
            )
            .unwrap(),
        MergeAction::Replace(doc! {"_id": 1, "total": 8})
    );
    let fail = OutputStage::parse(
        "$merge",
        &Bson::from(doc! {"into": "c", "whenMatched": "fail", "whenNotMatched": "fail"}),
    )
    .unwrap();
    assert_eq!(
        fail.merge_one(Some(&doc! {"_id": 1}), doc! {"_id": 1})
            .unwrap_err()
            .code,
        ErrorCode::DuplicateKey
    );
    assert_eq!(
        fail.merge_one(None, doc! {"_id": 1})
            .unwrap_err()
            .code
            .code(),
        13113
    );
    check_err(vec![
        (
            vec![doc! {"$out": "x"}, doc! {"$match": {}}],
            vec![],
            40601,
            "$out can only be the final stage in the pipeline",
        ),
        (
            vec![doc! {"$merge": {"on": "a"}}],
            vec![],
            40414,
            "'$merge.into' is missing",
        ),
        (
            vec![doc! {"$merge": {"into": "c", "whenMatched": "nope"}}],
            vec![],
            2,
            "Enumeration value 'nope'",
        ),
        (
            vec![doc! {"$lookup": {"from": "x", "pipeline": [{"$out": "y"}], "as": "z"}}],
            vec![],
            51047,
            "not allowed to be used within a $lookup stage",
        ),
    ]);
}

#[test]
fn merge_let() {
    use super::output::{MergeAction, OutputStage};
    let merge = |spec: Document| OutputStage::parse("$merge", &Bson::from(spec));
    // Variables are evaluated against the incoming document; `new` stays
    // bound to it when the merge inserts.
    let m = merge(doc! {"into": "c", "let": {"add": "$n", "tag": {"$concat": ["x", "$s"]}},
        "whenMatched": [{"$set": {"total": {"$add": ["$total", "$$add"]}, "tag": "$$tag", "was": "$$new.n"}}]})
    .unwrap();
    assert_eq!(
        m.merge_one(
            Some(&doc! {"_id": 1, "total": 5}),
            doc! {"_id": 1, "n": 3, "s": "y"}
        )
        .unwrap(),
        MergeAction::Replace(doc! {"_id": 1, "total": 8, "tag": "xy", "was": 3})
    );
    // Without `let`, `new` is the incoming document.
    let m = merge(doc! {"into": "c", "whenMatched": [{"$set": {"v": "$$new.v"}}]}).unwrap();
    assert_eq!(
        m.merge_one(Some(&doc! {"_id": 1, "v": 1}), doc! {"_id": 1, "v": 2})
            .unwrap(),
        MergeAction::Replace(doc! {"_id": 1, "v": 2})
    );
    for (spec, code) in [
        (
            doc! {"into": "c", "let": {"a": 1}, "whenMatched": "merge"},
            51199,
        ),
        (doc! {"into": "c", "let": {"a": 1}}, 51199),
        (
            doc! {"into": "c", "let": {"new": "$x"}, "whenMatched": [{"$set": {"a": 1}}]},
            51273,
        ),
        (
            doc! {"into": "c", "let": 5, "whenMatched": [{"$set": {"a": 1}}]},
            14,
        ),
    ] {
        let e = merge(spec.clone()).unwrap_err();
        assert_eq!(e.code.code(), code, "{spec}: {}", e.message);
    }
    let e = merge(doc! {"into": "c", "let": {"a": 1}, "whenMatched": "keepExisting"}).unwrap_err();
    assert_eq!(
        e.message,
        "Cannot use 'let' variables with 'whenMatched: keepExisting' mode"
    );
}

#[test]
fn bucket_auto_granularity() {
    let docs = |vs: &[i32]| vs.iter().map(|v| doc! {"v": *v}).collect::<Vec<_>>();
    check(vec![
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R20"}}],
            docs(&[110, 130, 150, 170, 190, 210]),
            vec![
                doc! {"_id": {"min": 100.0, "max": 160.0}, "count": 3},
                doc! {"_id": {"min": 160.0, "max": 224.0}, "count": 3},
            ],
        ),
        // 155 falls below the first bucket's rounded max, so it joins it.
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R20"}}],
            docs(&[110, 120, 150, 155, 170]),
            vec![
                doc! {"_id": {"min": 100.0, "max": 160.0}, "count": 4},
                doc! {"_id": {"min": 160.0, "max": 180.0}, "count": 1},
            ],
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "POWERSOF2"}}],
            docs(&[1, 2, 3, 5]),
            vec![
                doc! {"_id": {"min": 0, "max": 4}, "count": 3},
                doc! {"_id": {"min": 4, "max": 8}, "count": 1},
            ],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R20"}}],
            vec![doc! {"v": "a"}],
            40258,
            "numeric boundaries only",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}],
            vec![doc! {"v": -1}],
            40260,
            "non-negative",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R3"}}],
            vec![],
            40257,
            "Unknown rounding granularity 'R3'",
        ),
    ]);
}

#[test]
fn bucket_auto_and_documents() {
    let input: Vec<Document> = [1, 2, 2, 3, 4, 5, 6, 7]
        .iter()
        .map(|v| doc! {"v": *v})
        .collect();
    check(vec![(
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 3}}],
        input,
        vec![
            doc! {"_id": {"min": 1, "max": 3}, "count": 3},
            doc! {"_id": {"min": 3, "max": 6}, "count": 3},
            doc! {"_id": {"min": 6, "max": 7}, "count": 2},
        ],
    )]);
    check(vec![(
        vec![
            doc! {"$documents": [{"a": 1}, {"a": 2}]},
            doc! {"$match": {"a": 2}},
        ],
        vec![doc! {"ignored": true}],
        vec![doc! {"a": 2}],
    )]);
    check_err(vec![
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v"}}],
            vec![],
            40246,
            "requires 'groupBy' and 'buckets'",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 0}}],
            vec![],
            40243,
            "must be greater than 0",
        ),
        (
            vec![doc! {"$match": {}}, doc! {"$documents": []}],
            vec![],
            40602,
            "only valid as the first stage",
        ),
        (
            vec![doc! {"$documents": 1}],
            vec![],
            5858203,
            "an array is expected",
        ),
    ]);
}

#[test]
fn fill_stage() {
    let input = vec![
        doc! {"_id": 1, "t": 1, "v": 10, "s": "a"},
        doc! {"_id": 2, "t": 2, "v": null},
        doc! {"_id": 3, "t": 4, "s": "b"},
        doc! {"_id": 4, "t": 5, "v": 40},
    ];
    check(vec![(
        vec![
            doc! {"$fill": {"sortBy": {"t": 1}, "output": {"v": {"method": "linear"}, "s": {"method": "locf"}, "z": {"value": 0}}}},
        ],
        input,
        vec![
            doc! {"_id": 1, "t": 1, "v": 10, "s": "a", "z": 0},
            doc! {"_id": 2, "t": 2, "v": 17.5, "s": "a", "z": 0},
            doc! {"_id": 3, "t": 4, "s": "b", "v": 32.5, "z": 0},
            doc! {"_id": 4, "t": 5, "v": 40, "s": "b", "z": 0},
        ],
    )]);
    check_err(vec![
        (
            vec![doc! {"$fill": {"output": {"v": {"method": "linear"}}}}],
            vec![],
            6050201,
            "requires a sortBy",
        ),
        (
            vec![doc! {"$fill": {"sortBy": {"t": 1}}}],
            vec![],
            40414,
            "'$fill.output' is missing",
        ),
        (
            vec![doc! {"$fill": {"output": {"v": {"method": "x"}}}}],
            vec![],
            6050203,
            "Exactly one of 'value' and 'method'",
        ),
    ]);
}

#[test]
fn densify_stage() {
    check(vec![
        (
            vec![doc! {"$densify": {"field": "v", "range": {"step": 2, "bounds": "full"}}}],
            vec![doc! {"v": 1}, doc! {"v": 6}, doc! {"x": 0}],
            vec![
                doc! {"x": 0},
                doc! {"v": 1},
                doc! {"v": 3},
                doc! {"v": 5},
                doc! {"v": 6},
            ],
        ),
        (
            vec![
                doc! {"$densify": {"field": "v", "partitionByFields": ["p"], "range": {"step": 1, "bounds": "partition"}}},
            ],
            vec![
                doc! {"p": "a", "v": 1},
                doc! {"p": "b", "v": 5},
                doc! {"p": "a", "v": 3},
            ],
            vec![
                doc! {"p": "a", "v": 1},
                doc! {"p": "a", "v": 2},
                doc! {"p": "a", "v": 3},
                doc! {"p": "b", "v": 5},
            ],
        ),
        (
            vec![
                doc! {"$densify": {"field": "t", "range": {"step": 1, "unit": "hour", "bounds": [DateTime::from_millis(0), DateTime::from_millis(7_200_000)]}}},
            ],
            vec![doc! {"t": DateTime::from_millis(3_600_000), "x": 1}],
            vec![
                doc! {"t": DateTime::from_millis(0)},
                doc! {"t": DateTime::from_millis(3_600_000), "x": 1},
            ],
        ),
    ]);
    check_err(vec![
        (
            vec![doc! {"$densify": {"field": "v", "range": {"step": 0, "bounds": "full"}}}],
            vec![],
            5733401,
            "strictly positive",
        ),
        (
            vec![doc! {"$densify": {"field": "v", "range": {"step": 1e-9, "bounds": [0, 1]}}}],
            vec![doc! {"v": 0}],
            5897900,
            "over the limit",
        ),
        (
            vec![
                doc! {"$densify": {"field": "t", "range": {"step": 1.5, "unit": "month", "bounds": "full"}}},
            ],
            vec![],
            5733402,
            "whole number",
        ),
    ]);
}

#[test]
fn densify_calendar_units() {
    let t = |ms: i64| doc! {"t": DateTime::from_millis(ms)};
    check(vec![
        // Each month is added to the previous value, the day clamped to the
        // month's length (Jan 31 -> Feb 29 -> Mar 29), as $dateAdd does.
        (
            vec![
                doc! {"$densify": {"field": "t", "range": {"step": 1, "unit": "month", "bounds": "full"}}},
            ],
            vec![t(1_706_659_200_000), t(1_714_521_600_000)],
            vec![
                t(1_706_659_200_000),
                t(1_709_164_800_000),
                t(1_711_670_400_000),
                t(1_714_348_800_000),
                t(1_714_521_600_000),
            ],
        ),
        // A quarter is three months; explicit bounds are half-open.
        (
            vec![
                doc! {"$densify": {"field": "t", "range": {"step": 1, "unit": "quarter", "bounds": [DateTime::from_millis(1_700_006_400_000), DateTime::from_millis(1_715_731_200_000)]}}},
            ],
            vec![t(1_700_006_400_000)],
            vec![t(1_700_006_400_000), t(1_707_955_200_000)],
        ),
        (
            vec![
                doc! {"$densify": {"field": "t", "range": {"step": 1, "unit": "year", "bounds": "full"}}},
            ],
            vec![t(1_700_006_400_000), t(1_763_164_800_000)],
            vec![
                t(1_700_006_400_000),
                t(1_731_628_800_000),
                t(1_763_164_800_000),
            ],
        ),
    ]);
}

/// The spec errors the stages word through shared helpers keep each
/// stage's code and wording.
#[test]
fn shared_spec_errors() {
    check_err(vec![
        (
            vec![doc! {"$graphLookup": {"from": "c", "maxDepth": "x"}}],
            vec![],
            40100,
            "maxDepth must be numeric, found type: string",
        ),
        (
            vec![doc! {"$graphLookup": 1}],
            vec![],
            40327,
            "the $graphLookup stage specification must be an object",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$a", "buckets": "x"}}],
            vec![],
            40241,
            "The $bucketAuto 'buckets' field must be a numeric value, but found type: string",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$a", "buckets": 1.0e19}}],
            vec![],
            40243,
            "must be greater than 0, but found: 9223372036854775807",
        ),
        (
            vec![doc! {"$bucketAuto": {"groupBy": "$a", "buckets": 2, "output": 1}}],
            vec![],
            40244,
            "The $bucketAuto 'output' field must be an object, but found type: int",
        ),
        (
            vec![doc! {"$bucket": {"groupBy": "$a", "boundaries": [0, 1], "output": 1}}],
            vec![],
            40196,
            "The $bucket 'output' field must be an object, but found type: int",
        ),
        (
            vec![doc! {"$bucket": "x"}],
            vec![],
            40201,
            "Argument to $bucket stage must be an object, but found type: string",
        ),
        (
            vec![
                doc! {"$densify": {"field": "v", "partitionByFields": [1], "range": {"step": 1, "bounds": "full"}}},
            ],
            vec![],
            14,
            "$densify partitionByFields must be an array of strings",
        ),
        (
            vec![doc! {"$fill": {"partitionByFields": [1], "output": {"v": {"value": 0}}}}],
            vec![],
            14,
            "$fill partitionByFields must be an array of strings",
        ),
        (
            vec![doc! {"$densify": {"field": "v", "range": {"bounds": "full"}}}],
            vec![],
            40414,
            "BSON field '$densify.range.step' is missing but a required field",
        ),
        (
            vec![doc! {"$fill": {"output": {"v": {"value": 0}}, "x": 1}}],
            vec![],
            40415,
            "BSON field '$fill.x' is an unknown field or has the wrong type 'int'.",
        ),
        (
            vec![doc! {"$setWindowFields": {"output": {}, "x": 1}}],
            vec![],
            40415,
            "BSON field '$setWindowFields.x' is an unknown field.",
        ),
        (
            vec![doc! {"$replaceRoot": {"newRoot": "$a", "x": 1}}],
            vec![],
            40415,
            "BSON field '$replaceRoot.x' is an unknown field.",
        ),
        (
            vec![doc! {"$unionWith": {"pipeline": []}}],
            vec![],
            40414,
            "BSON field '$unionWith.coll' is missing but a required field",
        ),
    ]);
}

/// `$lookup` and `$graphLookup` read their foreign collection when the
/// first document arrives: never for an empty input, and a failed read is
/// reported once and ends the stream.
#[test]
fn foreign_stages_prepare_on_first_document() {
    let stages = [
        doc! {"$lookup": {"from": "c", "localField": "a", "foreignField": "b", "as": "f"}},
        doc! {"$graphLookup": {"from": "c", "startWith": "$a", "connectFromField": "a", "connectToField": "b", "as": "f"}},
    ];
    for stage in stages {
        // `run` supplies no collection reader, so reading fails.
        assert_eq!(run(vec![stage.clone()], vec![]).unwrap(), vec![]);
        let p = Pipeline::parse(std::slice::from_ref(&stage)).unwrap();
        let input: DocStream = Box::new(vec![doc! {"a": 1}, doc! {"a": 2}].into_iter().map(Ok));
        let out: Vec<MongoResult<Document>> = p.run(input).collect();
        assert_eq!(out.len(), 1, "{stage:?}");
        assert!(out.first().is_some_and(Result::is_err), "{stage:?}");
    }
}

/// The stages the server supplies: listed in the table, first in a
/// command's pipeline only, run through the server's implementation.
#[test]
fn server_stages_run_through_the_server() {
    #[derive(Debug)]
    struct Fake;
    impl ServerStages for Fake {
        fn run(&self, name: &str, spec: &Bson) -> MongoResult<DocStream> {
            let d = doc! {"stage": name, "spec": spec.clone()};
            Ok(Box::new(std::iter::once(Ok(d))))
        }
    }
    for name in ["$collStats", "$indexStats", "$listLocalSessions"] {
        assert!(STAGES.iter().any(|(n, _)| *n == name), "{name}");
        let first = [doc! {name: {}}, doc! {"$project": {"_id": 0}}];
        // Anywhere but first in a command's pipeline: refused.
        let e = Pipeline::parse(&first).unwrap_err();
        let later = [doc! {"$match": {}}, doc! {name: {}}];
        let e2 = Pipeline::parse_command(&later).unwrap_err();
        assert_eq!((e.code, &e.message), (e2.code, &e2.message), "{name}");
        if name == "$indexStats" {
            assert_eq!(e.code.code(), 40602);
        } else {
            assert_eq!(e.message, format!("{name} is not supported by BisonDB yet"));
        }
        let p = Pipeline::parse_command(&first).unwrap();
        assert_eq!(p.leading_server_stage(), Some(name));
        // Without the server's implementation the run fails precisely.
        let out: Vec<_> = p.run(Box::new(std::iter::empty())).collect();
        assert!(
            matches!(&out[..], [Err(e)] if e.message.contains("without the server's stages")),
            "{out:?}"
        );
        let mut p = Pipeline::parse_command(&first).unwrap();
        p.set_server_stages(Arc::new(Fake));
        let out: Vec<_> = p
            .run(Box::new(std::iter::empty()))
            .collect::<MongoResult<_>>()
            .unwrap();
        assert_eq!(out, vec![doc! {"stage": name, "spec": {}}]);
    }
    assert_eq!(
        Pipeline::parse(&[doc! {"$match": {}}])
            .unwrap()
            .leading_server_stage(),
        None
    );
}

#[test]
fn facet_input_is_bounded_by_the_memory_limit() {
    let mut p = Pipeline::parse(&[doc! {"$facet": {"a": [{"$match": {}}]}}]).unwrap();
    p.set_memory_limits(crate::agg::spill::MemoryLimits {
        group_bytes: 1000,
        ..Default::default()
    });
    let input: DocStream = Box::new((0..100).map(|i| Ok(doc! {"_id": i, "s": "x".repeat(50)})));
    let out: Vec<_> = p.run(input).collect();
    assert_eq!(
        out[0].as_ref().unwrap_err().code,
        bisondb_error::ErrorCode::ExceededMemoryLimit
    );
}

#[test]
fn interrupted_pipelines_end_with_the_interruption() {
    use bisondb_error::interrupt;
    let op = std::sync::Arc::new(interrupt::OpCtx::default());
    let _current = interrupt::enter(op.clone());
    op.kill(bisondb_error::ErrorCode::Interrupted);
    let p = Pipeline::parse(&[doc! {"$group": {"_id": "$g", "n": {"$sum": 1}}}]).unwrap();
    let input: DocStream = Box::new((0..10).map(|i| Ok(doc! {"g": i})));
    let out: Vec<_> = p.run(input).collect();
    assert_eq!(out.len(), 1);
    assert_eq!(
        out[0].as_ref().unwrap_err().code,
        bisondb_error::ErrorCode::Interrupted
    );
}
