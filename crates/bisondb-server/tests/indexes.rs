//! Secondary indexes through the official driver: createIndexes / listIndexes /
//! dropIndexes as mongod answers them, unique enforcement, builds over existing
//! data, the planner and `explain`, hints, index-only counts, and the TTL
//! monitor with a short interval.

use std::time::Duration;

use crate::common::*;
use bisondb_server::Server;
use bson::{doc, Bson, Document};
use mongodb::options::IndexOptions;
use mongodb::IndexModel;

fn get_doc<'a>(d: &'a Document, path: &str) -> &'a Document {
    let mut cur = d;
    for p in path.split('.') {
        cur = cur
            .get_document(p)
            .unwrap_or_else(|_| panic!("no document at {path} in {d}"));
    }
    cur
}

#[tokio::test]
async fn create_list_drop_like_mongod() {
    let t = start().await;
    let db = t.tcp.database("ix");
    let r = db
        .run_command(doc! {"createIndexes": "c", "indexes": [
            {"key": {"a": 1}, "name": "a_1"},
            {"key": {"b": -1, "c.d": 1}, "name": "b_-1_c.d_1", "unique": true, "background": true},
            {"key": {"s": 1}, "name": "s_1", "sparse": true, "hidden": true},
            {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
            {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 3600},
        ]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "numIndexesBefore"), 1);
    assert_eq!(num(&r, "numIndexesAfter"), 6);
    assert_eq!(
        r.get_bool("createdCollectionAutomatically").ok(),
        Some(true)
    );
    // Same request again: nothing new.
    let again = db
        .run_command(doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        again.get_str("note").ok(),
        Some("all indexes already exist")
    );
    assert!(
        !again.contains_key("createdCollectionAutomatically"),
        "mongod's no-op reply has only the note: {again}"
    );

    let coll = db.collection::<Document>("c");
    let listed = db
        .run_command(doc! {"listIndexes": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let batch = get_doc(&listed, "cursor")
        .get_array("firstBatch")
        .unwrap_or_else(|e| panic!("{e}"))
        .clone();
    let want = vec![
        doc! {"v": 2, "key": {"_id": 1}, "name": "_id_"},
        doc! {"v": 2, "key": {"a": 1}, "name": "a_1"},
        // mongod keeps `background` as given (it no longer changes how the build runs).
        doc! {"v": 2, "key": {"b": -1, "c.d": 1}, "name": "b_-1_c.d_1", "unique": true, "background": true},
        doc! {"v": 2, "key": {"s": 1}, "name": "s_1", "sparse": true, "hidden": true},
        doc! {"v": 2, "key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
        doc! {"v": 2, "key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 3600i64},
    ];
    let got: Vec<Document> = batch
        .into_iter()
        .filter_map(|b| b.as_document().cloned())
        .collect();
    assert_eq!(got, want);

    // Errors as mongod gives them.
    let cases: Vec<(Document, i32)> = vec![
        // Text indexes work (tests/text.rs); their fields must be adjacent.
        (
            doc! {"key": {"a": "text", "b": 1, "c": "text"}, "name": "a_text"},
            67,
        ),
        // One geo index type per index (2d and 2dsphere themselves work:
        // tests/geo.rs).
        (doc! {"key": {"a": "2dsphere", "b": "2d"}, "name": "g"}, 67),
        (
            doc! {"key": {"a": "hashed", "b": "hashed"}, "name": "h"},
            31303,
        ),
        (
            doc! {"key": {"a": "hashed"}, "name": "h", "unique": true},
            16764,
        ),
        // Wildcard indexes refuse `unique` as mongod does (tests/wildcard.rs).
        (doc! {"key": {"$**": 1}, "name": "w", "unique": true}, 67),
        (doc! {"key": {"a": -1}, "name": "a_1"}, 86),
        (doc! {"key": {"a": 1}, "name": "other"}, 85),
        // `unique` is part of mongod's index signature (compareIndexOptions):
        // the same name over another signature is 86, not 85.
        (doc! {"key": {"a": 1}, "name": "a_1", "unique": true}, 86),
        (
            doc! {"key": {"a": 1}, "name": "a_1", "expireAfterSeconds": 5},
            85,
        ),
        (doc! {"key": {"a": 1}, "name": "x", "bogus": 1}, 197),
        (doc! {"key": {"a": "nope"}, "name": "x"}, 67),
    ];
    for (spec, code) in cases {
        let e = expect_code(
            db.run_command(doc! {"createIndexes": "c", "indexes": [spec.clone()]})
                .await,
            code,
        );
        assert!(!error_message(&e).is_empty(), "{spec}");
    }

    let e = expect_code(
        db.run_command(doc! {"dropIndexes": "c", "index": "_id_"})
            .await,
        72,
    );
    assert_eq!(error_message(&e), "cannot drop _id index");
    expect_code(
        db.run_command(doc! {"dropIndexes": "c", "index": "missing"})
            .await,
        27,
    );
    let r = db
        .run_command(doc! {"dropIndexes": "c", "index": {"a": 1}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "nIndexesWas"), 6);
    db.run_command(doc! {"dropIndexes": "c", "index": ["s_1", "p_1"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = db
        .run_command(doc! {"dropIndexes": "c", "index": "*"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "nIndexesWas"), 3);
    let names = coll
        .list_index_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(names, vec!["_id_".to_string()]);
}

/// mongod's index signature (`IndexDescriptor::compareIndexOptions`) is
/// the key pattern with the collation, the partial filter, `unique` and
/// `sparse`: one key may be indexed under two collations or as unique and
/// not, each under its own name; the same signature under another name is
/// 85 "Index already exists with a different name".
#[tokio::test]
async fn indexes_with_one_key_and_different_signatures_coexist() {
    let t = start().await;
    let db = t.tcp.database("ixsig");
    db.run_command(doc! {"createIndexes": "c", "indexes": [
        {"key": {"f": 1}, "name": "f_1", "collation": {"locale": "en_US"}},
        {"key": {"f": 1}, "name": "japanese_version", "collation": {"locale": "ja"}},
        {"key": {"f": 1}, "name": "simple"},
        {"key": {"f": 1}, "name": "f_unique", "unique": true},
        {"key": {"f": 1}, "name": "f_partial", "partialFilterExpression": {"f": {"$gt": 1}}},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let listed = db
        .run_command(doc! {"listIndexes": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = get_doc(&listed, "cursor")
        .get_array("firstBatch")
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter_map(|b| b.as_document()?.get_str("name").ok().map(String::from))
        .collect();
    assert_eq!(
        names,
        [
            "_id_",
            "f_1",
            "japanese_version",
            "simple",
            "f_unique",
            "f_partial"
        ]
    );
    let e = expect_code(
        db.run_command(doc! {"createIndexes": "c", "indexes": [
            {"key": {"f": 1}, "name": "again", "collation": {"locale": "ja"}},
        ]})
        .await,
        85,
    );
    assert_eq!(
        error_message(&e),
        "Index already exists with a different name: japanese_version"
    );
    db.run_command(doc! {"dropIndexes": "c", "index": "f_1"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A key pattern that names several indexes is ambiguous to dropIndexes.
    expect_code(
        db.run_command(doc! {"dropIndexes": "c", "index": {"f": 1}})
            .await,
        132,
    );
}

#[tokio::test]
async fn unique_index_enforced_and_built_over_existing_data() {
    let t = start().await;
    let coll = t.tcp.database("ix").collection::<Document>("u");
    coll.insert_many((0..500).map(|i| doc! {"_id": i, "email": format!("u{i}@x"), "n": i % 7}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A unique build over duplicates fails with 11000 and leaves no index.
    let e = expect_code(
        coll.create_index(
            IndexModel::builder()
                .keys(doc! {"n": 1})
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await,
        11000,
    );
    assert!(
        error_message(&e).contains("E11000"),
        "{}",
        error_message(&e)
    );
    assert_eq!(
        coll.list_index_names()
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec!["_id_".to_string()]
    );
    coll.create_index(
        IndexModel::builder()
            .keys(doc! {"email": 1})
            .options(IndexOptions::builder().unique(true).build())
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let e = expect_code(
        coll.insert_one(doc! {"_id": 1000, "email": "u3@x"}).await,
        11000,
    );
    assert_eq!(
        error_message(&e),
        "E11000 duplicate key error collection: ix.u index: email_1 dup key: { email: \"u3@x\" }"
    );
    // The index answers queries built before it existed.
    let found = collect(
        coll.find(doc! {"email": "u42@x"})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(field(&found, "_id"), vec![Bson::Int32(42)]);
    // An update that would duplicate is refused too.
    expect_code(
        coll.update_one(doc! {"_id": 1}, doc! {"$set": {"email": "u2@x"}})
            .await,
        11000,
    );
    // Racing inserts of one key: exactly one wins.
    for round in 0..20 {
        let email = format!("race{round}@x");
        let (a, b) = tokio::join!(
            coll.insert_one(doc! {"_id": 10_000 + round * 2, "email": email.clone()}),
            coll.insert_one(doc! {"_id": 10_001 + round * 2, "email": email.clone()}),
        );
        assert_eq!(a.is_ok() as u8 + b.is_ok() as u8, 1, "round {round}");
    }
}

async fn explain(db: &mongodb::Database, cmd: Document, verbosity: &str) -> Document {
    db.run_command(doc! {"explain": cmd, "verbosity": verbosity})
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// Collection `ts` of `n` documents `{_id: i, day: i % days, v: i}` with an
/// index on `day`, as the explain tests read it.
async fn days_with_index(
    db: &mongodb::Database,
    n: i32,
    days: i32,
) -> mongodb::Collection<Document> {
    let coll = db.collection::<Document>("ts");
    coll.insert_many((0..n).map(|i| doc! {"_id": i, "day": i % days, "v": i}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.create_index(IndexModel::builder().keys(doc! {"day": 1}).build())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll
}

#[tokio::test]
async fn planner_and_explain_tell_what_ran() {
    let t = start().await;
    let db = t.tcp.database("ex");
    let coll = days_with_index(&db, 1000, 100).await;

    // Equality: IXSCAN under FETCH, 10 keys and 10 documents examined.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": 7}},
        "executionStats",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(plan.get_str("stage").ok(), Some("FETCH"));
    let ix = get_doc(plan, "inputStage");
    assert_eq!(ix.get_str("stage").ok(), Some("IXSCAN"));
    assert_eq!(ix.get_str("indexName").ok(), Some("day_1"));
    assert_eq!(ix.get_str("direction").ok(), Some("forward"));
    assert_eq!(ix.get_document("keyPattern").ok(), Some(&doc! {"day": 1}));
    assert_eq!(ix.get_bool("isMultiKey").ok(), Some(false));
    assert_eq!(
        get_doc(ix, "indexBounds").get_array("day").ok(),
        Some(&vec![Bson::String("[7, 7]".into())])
    );
    // The bounds [7, 7] answer the whole filter: FETCH has nothing to check
    // (mongod shows no filter there), and parsedQuery is the $eq form.
    assert!(!plan.contains_key("filter"), "{plan}");
    assert_eq!(
        get_doc(&e, "queryPlanner").get_document("parsedQuery").ok(),
        Some(&doc! {"day": {"$eq": 7}})
    );
    let stats = get_doc(&e, "executionStats");
    assert_eq!(num(stats, "nReturned"), 10);
    // Small counters are int32, as mongod sends them (mongosh shows Long('10') otherwise).
    for f in [
        "nReturned",
        "totalKeysExamined",
        "totalDocsExamined",
        "executionTimeMillis",
    ] {
        assert!(matches!(stats.get(f), Some(Bson::Int32(_))), "{f}: {stats}");
    }
    assert_eq!(num(stats, "totalKeysExamined"), 10);
    assert_eq!(num(stats, "totalDocsExamined"), 10);
    assert!(stats.contains_key("executionTimeMillis"));

    // A condition the bounds do not answer stays on FETCH (mongod keeps only
    // that residual condition there; BisonDB shows the whole filter).
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": 7, "v": {"$gt": 500}}},
        "queryPlanner",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(plan.get_str("stage").ok(), Some("FETCH"));
    let filter = plan
        .get_document("filter")
        .unwrap_or_else(|e| panic!("{e}: {plan}"));
    assert_eq!(filter.get_document("v").ok(), Some(&doc! {"$gt": 500}));

    // Range with sort by the index backward, limit and projection: no SORT stage.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": {"$gte": 10, "$lt": 12}}, "sort": {"day": -1}, "limit": 5, "projection": {"v": 1}},
        "queryPlanner",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(plan.get_str("stage").ok(), Some("PROJECTION_SIMPLE"));
    assert_eq!(
        get_doc(plan, "inputStage").get_str("stage").ok(),
        Some("LIMIT")
    );
    let scan = get_doc(plan, "inputStage.inputStage.inputStage");
    assert_eq!(scan.get_str("stage").ok(), Some("IXSCAN"));
    assert_eq!(scan.get_str("direction").ok(), Some("backward"));
    assert!(!e.contains_key("executionStats"));

    // The results honour the order without a blocking sort.
    let docs = collect(
        coll.find(doc! {"day": {"$gte": 10, "$lt": 12}})
            .sort(doc! {"day": -1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(docs.len(), 20);
    assert!(docs.iter().take(10).all(|d| num(d, "day") == 11));

    // No usable index: COLLSCAN examining every document.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"v": 5}},
        "allPlansExecution",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan")
            .get_str("stage")
            .ok(),
        Some("COLLSCAN")
    );
    assert_eq!(
        num(get_doc(&e, "executionStats"), "totalDocsExamined"),
        1000
    );
    assert!(get_doc(&e, "executionStats").contains_key("allPlansExecution"));

    // count on the indexed field counts keys only.
    let e = explain(
        &db,
        doc! {"count": "ts", "query": {"day": {"$lt": 3}}},
        "executionStats",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(plan.get_str("stage").ok(), Some("COUNT"));
    assert_eq!(
        get_doc(plan, "inputStage").get_str("stage").ok(),
        Some("COUNT_SCAN")
    );
    // mongod's COUNT_SCAN shape: one key range, no direction.
    let cs = get_doc(plan, "inputStage");
    assert!(!cs.contains_key("direction"), "{cs}");
    assert_eq!(
        cs.get_document("indexBounds").ok(),
        Some(&doc! {
            "startKey": {"day": f64::NEG_INFINITY},
            "startKeyInclusive": true,
            "endKey": {"day": 3},
            "endKeyInclusive": false,
        })
    );
    assert_eq!(num(get_doc(&e, "executionStats"), "totalDocsExamined"), 0);
    // 30 keys, plus the step that finds the end of the range (as mongod counts).
    assert_eq!(num(get_doc(&e, "executionStats"), "totalKeysExamined"), 31);
    assert_eq!(count(&coll, doc! {"day": {"$lt": 3}}).await, 30);

    // Hints: by name and by key pattern work; an unknown one is error 2.
    let hinted = collect(
        coll.find(doc! {"v": {"$lt": 3}})
            .hint(mongodb::options::Hint::Name("day_1".into()))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(hinted.len(), 3);
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {}, "hint": {"day": 1}},
        "queryPlanner",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan.inputStage")
            .get_str("indexName")
            .ok(),
        Some("day_1")
    );
    expect_code(db.run_command(doc! {"find": "ts", "hint": "nope"}).await, 2);
    expect_code(
        db.run_command(doc! {"find": "ts", "hint": {"zzz": 1}})
            .await,
        2,
    );

    // Aggregation: a leading $match uses the index.
    let e = explain(
        &db,
        doc! {"aggregate": "ts", "pipeline": [{"$match": {"day": 3}}, {"$group": {"_id": null, "n": {"$sum": 1}}}], "cursor": {}},
        "executionStats",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan.inputStage")
            .get_str("stage")
            .ok(),
        Some("IXSCAN")
    );
    assert_eq!(num(get_doc(&e, "executionStats"), "totalKeysExamined"), 10);
    let agg = collect(
        coll.aggregate(vec![doc! {"$match": {"day": 3}}, doc! {"$count": "n"}])
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(agg.first().map(|d| num(d, "n")), Some(10));

    // A $sort right after the leading $match comes from the index scan: a
    // backward scan yields equal keys in descending _id order, where a blocking
    // (stable) sort of the collection scan would keep them ascending.
    let pipeline = vec![
        doc! {"$match": {"day": {"$gte": 40, "$lt": 42}}},
        doc! {"$sort": {"day": -1}},
        doc! {"$limit": 3},
        doc! {"$project": {"_id": 1}},
    ];
    let ids: Vec<i64> = collect(
        coll.aggregate(pipeline.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await
    .iter()
    .map(|d| num(d, "_id"))
    .collect();
    assert_eq!(ids, vec![941, 841, 741]);
    // Without an index on the sort field the pipeline sorts (stable): ascending _id.
    let ids: Vec<i64> = collect(
        coll.aggregate(vec![
            doc! {"$match": {"day": {"$gte": 40, "$lt": 42}}},
            doc! {"$sort": {"day": -1}},
            doc! {"$limit": 3},
        ])
        .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e}")),
    )
    .await
    .iter()
    .map(|d| num(d, "_id"))
    .collect();
    assert_eq!(ids, vec![41, 141, 241]);
    // A leading $sort alone also uses the index.
    let first: Vec<i64> = collect(
        coll.aggregate(vec![doc! {"$sort": {"day": 1}}, doc! {"$limit": 2}])
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await
    .iter()
    .map(|d| num(d, "_id"))
    .collect();
    assert_eq!(first, vec![0, 100]);

    // aggregate with explain: true answers with the plan (no cursor needed).
    let e = db
        .run_command(doc! {"aggregate": "ts", "pipeline": pipeline, "explain": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(
        plan.get_str("stage").ok(),
        Some("FETCH"),
        "no SORT stage: {e}"
    );
    let scan = get_doc(plan, "inputStage");
    assert_eq!(scan.get_str("indexName").ok(), Some("day_1"));
    assert_eq!(scan.get_str("direction").ok(), Some("backward"));
    assert!(!e.contains_key("executionStats"));
    assert!(!e.contains_key("cursor"));
    expect_code(
        db.run_command(doc! {"aggregate": "ts", "pipeline": [], "explain": true, "hint": "nope"})
            .await,
        2,
    );

    // A compound index serves a sort on its second field when the first is
    // pinned by equality (no SORT stage; backward for the opposite direction).
    coll.create_index(IndexModel::builder().keys(doc! {"day": 1, "v": -1}).build())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for (dir, scan) in [(-1, "forward"), (1, "backward")] {
        let e = explain(
            &db,
            doc! {"find": "ts", "filter": {"day": 7}, "sort": {"v": dir}},
            "queryPlanner",
        )
        .await;
        let plan = get_doc(&e, "queryPlanner.winningPlan");
        assert_eq!(plan.get_str("stage").ok(), Some("FETCH"), "no SORT: {e}");
        let ix = get_doc(plan, "inputStage");
        assert_eq!(ix.get_str("indexName").ok(), Some("day_1_v_-1"));
        assert_eq!(ix.get_str("direction").ok(), Some(scan));
        let vs: Vec<i64> = collect(
            coll.find(doc! {"day": 7})
                .sort(doc! {"v": dir})
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .await
        .iter()
        .map(|d| num(d, "v"))
        .collect();
        let mut want: Vec<i64> = (0..10).map(|k| 7 + 100 * k).collect();
        if dir < 0 {
            want.reverse();
        }
        assert_eq!(vs, want);
    }
    // A range on the first field cannot give the second field's order.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": {"$gt": 7}}, "sort": {"v": 1}},
        "queryPlanner",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan")
            .get_str("stage")
            .ok(),
        Some("SORT"),
        "{e}"
    );
    coll.drop_index("day_1_v_-1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // Deletes and updates through the index keep it consistent.
    coll.delete_many(doc! {"day": 5})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.update_many(doc! {"day": 6}, doc! {"$set": {"day": 5}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count(&coll, doc! {"day": 5}).await, 10);
    assert_eq!(count(&coll, doc! {"day": 6}).await, 0);

    // Unknown inner command.
    expect_code(db.run_command(doc! {"explain": {"nosuch": "ts"}}).await, 59);
}

/// Common per-stage counters of an `executionStages` node, as int32:
/// (nReturned, works, advanced, needTime, isEOF).
fn stage_counters(stage: &Document) -> (i64, i64, i64, i64, i64) {
    for f in [
        "nReturned",
        "executionTimeMillisEstimate",
        "works",
        "advanced",
        "needTime",
        "needYield",
        "saveState",
        "restoreState",
        "isEOF",
    ] {
        assert!(matches!(stage.get(f), Some(Bson::Int32(_))), "{f}: {stage}");
    }
    (
        num(stage, "nReturned"),
        num(stage, "works"),
        num(stage, "advanced"),
        num(stage, "needTime"),
        num(stage, "isEOF"),
    )
}

#[tokio::test]
async fn execution_stages_report_per_stage_stats() {
    let t = start().await;
    let db = t.tcp.database("exstages");
    days_with_index(&db, 200, 20).await;

    // FETCH -> IXSCAN: 10 keys, 10 documents, 5 of them match `v < 100`.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": 7, "v": {"$lt": 100}}},
        "executionStats",
    )
    .await;
    let stats = get_doc(&e, "executionStats");
    assert_eq!(num(stats, "nReturned"), 5);
    let fetch = get_doc(stats, "executionStages");
    assert_eq!(fetch.get_str("stage").ok(), Some("FETCH"));
    // 11 works: one per key the scan examined plus the one finding its end.
    assert_eq!(stage_counters(fetch), (5, 11, 5, 5, 1));
    assert_eq!(num(fetch, "docsExamined"), 10);
    assert_eq!(num(fetch, "alreadyHasObj"), 0);
    assert!(fetch.contains_key("filter"), "{fetch}");
    let ix = get_doc(fetch, "inputStage");
    assert_eq!(ix.get_str("stage").ok(), Some("IXSCAN"));
    assert_eq!(stage_counters(ix), (10, 11, 10, 0, 1));
    assert_eq!(num(ix, "keysExamined"), 10);
    assert_eq!(num(ix, "seeks"), 1);
    assert_eq!(num(ix, "dupsTested"), 0);
    assert_eq!(num(ix, "dupsDropped"), 0);
    assert_eq!(ix.get_str("indexName").ok(), Some("day_1"));
    assert_eq!(
        (
            num(stats, "totalKeysExamined"),
            num(stats, "totalDocsExamined")
        ),
        (10, 10)
    );

    // COLLSCAN: every document examined, one work each plus the end.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"v": {"$gte": 190}}},
        "executionStats",
    )
    .await;
    let scan = get_doc(&e, "executionStats.executionStages");
    assert_eq!(scan.get_str("stage").ok(), Some("COLLSCAN"));
    assert_eq!(stage_counters(scan), (10, 201, 10, 190, 1));
    assert_eq!(num(scan, "docsExamined"), 200);
    assert_eq!(scan.get_str("direction").ok(), Some("forward"));

    // LIMIT over a blocking SORT: the sort reads everything, LIMIT stops at 3.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {}, "sort": {"v": -1}, "limit": 3, "skip": 2},
        "executionStats",
    )
    .await;
    let limit = get_doc(&e, "executionStats.executionStages");
    assert_eq!(limit.get_str("stage").ok(), Some("LIMIT"));
    assert_eq!(num(limit, "limitAmount"), 3);
    assert_eq!(num(limit, "nReturned"), 3);
    assert_eq!(num(limit, "isEOF"), 1);
    let skip = get_doc(limit, "inputStage");
    assert_eq!(skip.get_str("stage").ok(), Some("SKIP"));
    assert_eq!(num(skip, "skipAmount"), 2);
    assert_eq!(num(skip, "nReturned"), 3);
    let sort = get_doc(skip, "inputStage");
    assert_eq!(sort.get_str("stage").ok(), Some("SORT"));
    assert_eq!(num(sort, "nReturned"), 5);
    assert_eq!(num(sort, "memLimit"), 100 * 1024 * 1024);
    assert_eq!(sort.get_bool("usedDisk").ok(), Some(false));
    assert!(num(sort, "totalDataSizeSorted") > 0);
    let under = get_doc(sort, "inputStage");
    assert_eq!(stage_counters(under), (200, 201, 200, 0, 1));

    // hint `_id_`: the clustered scan shown as FETCH over IXSCAN `_id_`.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"day": 3}, "hint": "_id_"},
        "executionStats",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_eq!(plan.get_str("stage").ok(), Some("FETCH"));
    let ix = get_doc(plan, "inputStage");
    assert_eq!(ix.get_str("indexName").ok(), Some("_id_"));
    assert_eq!(ix.get_bool("isUnique").ok(), Some(true));
    assert_eq!(
        get_doc(ix, "indexBounds"),
        &doc! {"_id": ["[MinKey, MaxKey]"]}
    );
    let stats = get_doc(&e, "executionStats");
    assert_eq!(
        (
            num(stats, "nReturned"),
            num(stats, "totalKeysExamined"),
            num(stats, "totalDocsExamined")
        ),
        (10, 200, 200)
    );
    let fetch = get_doc(stats, "executionStages");
    assert_eq!(num(fetch, "docsExamined"), 200);
    assert_eq!(num(fetch, "nReturned"), 10);
    let ix = get_doc(fetch, "inputStage");
    assert_eq!(stage_counters(ix), (200, 201, 200, 0, 1));
    assert_eq!(num(ix, "keysExamined"), 200);

    // count over an index only: COUNT_SCAN counts the step finding the end.
    let e = explain(
        &db,
        doc! {"count": "ts", "query": {"day": 4}},
        "executionStats",
    )
    .await;
    let count = get_doc(&e, "executionStats.executionStages");
    assert_eq!(count.get_str("stage").ok(), Some("COUNT"));
    assert_eq!((num(count, "nCounted"), num(count, "nSkipped")), (10, 0));
    let cs = get_doc(count, "inputStage");
    assert_eq!(cs.get_str("stage").ok(), Some("COUNT_SCAN"));
    assert_eq!(stage_counters(cs), (10, 11, 10, 0, 1));
    assert_eq!(num(cs, "keysExamined"), 11);
}

#[tokio::test]
async fn multikey_and_parallel_arrays() {
    let t = start().await;
    let coll = t.tcp.database("mk").collection::<Document>("m");
    coll.create_index(IndexModel::builder().keys(doc! {"a": 1, "b": 1}).build())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.insert_many(vec![
        doc! {"_id": 1, "a": [1, 5], "b": 1},
        doc! {"_id": 2, "a": 3, "b": [1, 2]},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let e = expect_code(
        coll.insert_one(doc! {"_id": 3, "a": [1], "b": [2]}).await,
        171,
    );
    assert!(
        error_message(&e).contains("cannot index parallel arrays"),
        "{}",
        error_message(&e)
    );
    // {a: {$gt: 2, $lt: 4}} on a multikey index: doc 1 matches (5 > 2, 1 < 4).
    let got = collect(
        coll.find(doc! {"a": {"$gt": 2, "$lt": 4}})
            .sort(doc! {"_id": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(field(&got, "_id"), vec![Bson::Int32(1), Bson::Int32(2)]);
    let e = t
        .tcp
        .database("mk")
        .run_command(doc! {"explain": {"find": "m", "filter": {"a": 1}}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan.inputStage")
            .get_bool("isMultiKey")
            .ok(),
        Some(true)
    );
    // Each matching document once, although it has two keys in range.
    assert_eq!(count(&coll, doc! {"a": {"$gte": 1}}).await, 2);
}

#[tokio::test]
async fn ttl_monitor_deletes_expired_documents() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = config(dir.path());
    cfg.ttl_monitor_sleep_secs = 1;
    let server = Server::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("{}", e.message));
    let client = mongodb::Client::with_uri_str(tcp_uri(server.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = client.database("ttl");
    let p = client
        .database("admin")
        .run_command(doc! {"getParameter": 1, "ttlMonitorSleepSecs": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&p, "ttlMonitorSleepSecs"), 1);
    let coll = db.collection::<Document>("events");
    coll.create_index(
        IndexModel::builder()
            .keys(doc! {"at": 1})
            .options(
                IndexOptions::builder()
                    .expire_after(Duration::from_secs(60))
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let now = bson::DateTime::now().timestamp_millis();
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
    coll.insert_many(vec![
        doc! {"_id": "old", "at": at(now - 3_600_000)},
        doc! {"_id": "old-array", "at": [at(now + 3_600_000), at(now - 3_600_000)]},
        doc! {"_id": "fresh", "at": at(now)},
        doc! {"_id": "not-a-date", "at": "yesterday"},
        doc! {"_id": "missing"},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let left = left_after_ttl(&coll, "_id", 3).await;
    assert_eq!(
        left,
        vec![
            Bson::String("fresh".into()),
            Bson::String("missing".into()),
            Bson::String("not-a-date".into())
        ]
    );
    // serverStatus's metrics.ttl (mongod's; mongodb_exporter reads it).
    let status = client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ttl = status
        .get_document("metrics")
        .and_then(|m| m.get_document("ttl"))
        .unwrap_or_else(|e| panic!("{e}: {status}"));
    assert_eq!(num(ttl, "deletedDocuments"), 2, "{ttl}");
    assert!(num(ttl, "passes") >= 1, "{ttl}");
    server.shutdown();
    server.wait().await;
}

/// Ten documents `{_id: i, a: i % 3, p: i}` with `s: i` on even `_id`s only,
/// and indexes `a_1`, a sparse `s_1` (a hint on it sees the even documents only,
/// which shows the hint was followed) and a partial `p_1` (`p > 5`).
async fn hint_fixture(db: &mongodb::Database, name: &str) -> mongodb::Collection<Document> {
    let coll = db.collection::<Document>(name);
    let docs: Vec<Document> = (0..10)
        .map(|i| {
            let mut d = doc! {"_id": i, "a": i % 3, "p": i};
            if i % 2 == 0 {
                d.insert("s", i);
            }
            d
        })
        .collect();
    coll.insert_many(docs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.run_command(doc! {"createIndexes": name, "indexes": [
        {"key": {"a": 1}, "name": "a_1"},
        {"key": {"s": 1}, "name": "s_1", "sparse": true},
        {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    coll
}

async fn ids(coll: &mongodb::Collection<Document>, filter: Document) -> Vec<Bson> {
    let docs = collect(
        coll.find(filter)
            .sort(doc! {"_id": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    field(&docs, "_id")
}

fn ints(v: &[i32]) -> Vec<Bson> {
    v.iter().map(|i| Bson::Int32(*i)).collect()
}

#[tokio::test]
async fn update_and_delete_follow_their_hint() {
    use mongodb::options::Hint;
    let t = start().await;
    let db = t.tcp.database("hints");

    // update: by name, by key pattern, through a partial index the filter
    // implies, and {$natural: 1}.
    let coll = hint_fixture(&db, "u").await;
    let r = coll
        .update_many(doc! {"a": 1}, doc! {"$set": {"u": 1}})
        .hint(Hint::Name("a_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.matched_count, r.modified_count), (3, 3));
    assert_eq!(ids(&coll, doc! {"u": 1}).await, ints(&[1, 4, 7]));
    let r = coll
        .update_many(doc! {}, doc! {"$set": {"v": 1}})
        .hint(Hint::Keys(doc! {"s": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.matched_count, 5,
        "the sparse index holds the even ids only"
    );
    assert_eq!(ids(&coll, doc! {"v": 1}).await, ints(&[0, 2, 4, 6, 8]));
    let r = coll
        .update_many(doc! {"p": {"$gt": 5}}, doc! {"$set": {"w": 1}})
        .hint(Hint::Name("p_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.matched_count, 4);
    let r = coll
        .update_many(doc! {"a": 2}, doc! {"$set": {"n": 1}})
        .hint(Hint::Keys(doc! {"$natural": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.matched_count, 3);
    // A hint naming no index: 2 BadValue, nothing changed.
    let e = expect_code(
        coll.update_one(doc! {"a": 2}, doc! {"$set": {"x": 1}})
            .hint(Hint::Name("nope".into()))
            .await,
        2,
    );
    assert!(
        error_message(&e).contains("hint provided does not correspond to an existing index"),
        "{e}"
    );
    expect_code(
        coll.update_many(doc! {}, doc! {"$set": {"x": 1}})
            .hint(Hint::Keys(doc! {"a": -1}))
            .await,
        2,
    );
    assert!(ids(&coll, doc! {"x": 1}).await.is_empty());

    // The bad hint is that statement's writeError: unordered goes on, ordered stops.
    let stmts = |f: &str| {
        vec![
            doc! {"q": {"_id": 0}, "u": {"$set": {f: 1}}},
            doc! {"q": {"_id": 1}, "u": {"$set": {f: 1}}, "hint": "nope"},
            doc! {"q": {"_id": 2}, "u": {"$set": {f: 1}}, "hint": {"a": 1}},
        ]
    };
    let r = db
        .run_command(doc! {"update": "u", "updates": stmts("o1"), "ordered": false})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 2, "{r}");
    let errs = r
        .get_array("writeErrors")
        .unwrap_or_else(|e| panic!("{e}: {r}"));
    assert_eq!(errs.len(), 1, "{r}");
    let err = errs[0].as_document().unwrap_or_else(|| panic!("{r}"));
    assert_eq!((num(err, "index"), num(err, "code")), (1, 2), "{r}");
    assert_eq!(ids(&coll, doc! {"o1": 1}).await, ints(&[0, 2]));
    let r = db
        .run_command(doc! {"update": "u", "updates": stmts("o2")})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 1, "{r}");
    let errs = r
        .get_array("writeErrors")
        .unwrap_or_else(|e| panic!("{e}: {r}"));
    assert_eq!(errs.len(), 1, "{r}");
    assert_eq!(ids(&coll, doc! {"o2": 1}).await, ints(&[0]));

    // On a collection that does not exist any hint is accepted, and an upsert
    // creates it; once it exists, the hint must name one of its indexes.
    let missing = db.collection::<Document>("u_missing");
    let r = missing
        .update_one(doc! {"k": 1}, doc! {"$set": {"m": 1}})
        .upsert(true)
        .hint(Hint::Name("a_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.upserted_id.is_some(), "{r:?}");
    assert_eq!(count(&missing, doc! {"k": 1, "m": 1}).await, 1);
    expect_code(
        missing
            .update_one(doc! {"k": 1}, doc! {"$set": {"m": 2}})
            .upsert(true)
            .hint(Hint::Name("a_1".into()))
            .await,
        2,
    );
    assert_eq!(count(&missing, doc! {}).await, 1);

    // delete: the same rules.
    let coll = hint_fixture(&db, "d").await;
    let r = coll
        .delete_many(doc! {"a": 2})
        .hint(Hint::Keys(doc! {"a": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.deleted_count, 3);
    let r = coll
        .delete_many(doc! {})
        .hint(Hint::Name("s_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.deleted_count, 3,
        "the sparse index holds 0, 4 and 6 still"
    );
    assert_eq!(ids(&coll, doc! {}).await, ints(&[1, 3, 7, 9]));
    expect_code(
        coll.delete_one(doc! {})
            .hint(Hint::Name("nope".into()))
            .await,
        2,
    );
    expect_code(
        coll.delete_many(doc! {})
            .hint(Hint::Name("p_1".into()))
            .await,
        2,
    );
    assert_eq!(count(&coll, doc! {}).await, 4);
    let r = db
        .run_command(doc! {"delete": "d", "ordered": false, "deletes": [
            {"q": {"_id": 1}, "limit": 1, "hint": "nope"},
            {"q": {"_id": 3}, "limit": 1, "hint": {"$natural": -1}},
            {"q": {"_id": 7}, "limit": 0, "hint": "_id_"},
        ]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 2, "{r}");
    let errs = r
        .get_array("writeErrors")
        .unwrap_or_else(|e| panic!("{e}: {r}"));
    assert_eq!(errs.len(), 1, "{r}");
    let err = errs[0].as_document().unwrap_or_else(|| panic!("{r}"));
    assert_eq!((num(err, "index"), num(err, "code")), (0, 2), "{r}");
    assert_eq!(ids(&coll, doc! {}).await, ints(&[1, 9]));
    let r = db
        .collection::<Document>("d_missing")
        .delete_many(doc! {})
        .hint(Hint::Name("a_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.deleted_count, 0);
}

#[tokio::test]
async fn find_and_modify_and_distinct_follow_their_hint() {
    use mongodb::options::{Hint, ReturnDocument};
    let t = start().await;
    let db = t.tcp.database("hints");

    let coll = hint_fixture(&db, "f").await;
    let after = coll
        .find_one_and_update(doc! {"a": 0}, doc! {"$set": {"f": 1}})
        .hint(Hint::Name("a_1".into()))
        .sort(doc! {"_id": -1})
        .return_document(ReturnDocument::After)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(after, Some(doc! {"_id": 9, "a": 0, "p": 9, "f": 1}));
    // Sorted on `s` ascending the odd ids (no `s`) come first; through the
    // sparse index only the even ones exist.
    let removed = coll
        .find_one_and_delete(doc! {})
        .hint(Hint::Keys(doc! {"s": 1}))
        .sort(doc! {"s": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(removed.map(|d| num(&d, "_id")), Some(0));
    let removed = coll
        .find_one_and_delete(doc! {})
        .sort(doc! {"s": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let removed = removed.unwrap_or_else(|| panic!("nothing removed"));
    assert!(!removed.contains_key("s"), "{removed}");
    let replaced = coll
        .find_one_and_replace(doc! {"p": {"$gt": 5}}, doc! {"r": 1})
        .hint(Hint::Name("p_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(replaced.map(|d| num(&d, "_id")), Some(6));
    let e = expect_code(
        coll.find_one_and_replace(doc! {"_id": 3}, doc! {"r": 2})
            .hint(Hint::Name("nope".into()))
            .await,
        2,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("BadValue"));
    expect_code(
        db.run_command(
            doc! {"findAndModify": "f", "query": {}, "remove": true, "hint": {"zzz": 1}},
        )
        .await,
        2,
    );
    assert_eq!(count(&coll, doc! {"r": 2}).await, 0);
    assert_eq!(count(&coll, doc! {}).await, 8);
    let upserted = db
        .collection::<Document>("f_missing")
        .find_one_and_update(doc! {"_id": 1}, doc! {"$set": {"m": 1}})
        .upsert(true)
        .hint(Hint::Name("a_1".into()))
        .return_document(ReturnDocument::After)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(upserted, Some(doc! {"_id": 1, "m": 1}));

    let coll = hint_fixture(&db, "x").await;
    let distinct = |key: &'static str, filter: Document, hint: Hint| {
        let coll = coll.clone();
        async move { coll.distinct(key, filter).hint(hint).await }
    };
    let v = distinct("a", doc! {}, Hint::Name("a_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v, ints(&[0, 1, 2]));
    let v = distinct("_id", doc! {}, Hint::Keys(doc! {"s": 1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v, ints(&[0, 2, 4, 6, 8]));
    let v = distinct("_id", doc! {"p": {"$gt": 5}}, Hint::Name("p_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v, ints(&[6, 7, 8, 9]));
    let v = distinct("_id", doc! {"a": 1}, Hint::Keys(doc! {"$natural": -1}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v, ints(&[1, 4, 7]));
    expect_code(distinct("a", doc! {}, Hint::Name("nope".into())).await, 2);
    expect_code(
        distinct("a", doc! {}, Hint::Keys(doc! {"a": 1, "b": 1})).await,
        2,
    );
    let v = db
        .collection::<Document>("x_missing")
        .distinct("a", doc! {})
        .hint(Hint::Name("a_1".into()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(v.is_empty());
}

/// The `_id`s `filter` finds, sorted.
async fn sorted_ids(coll: &mongodb::Collection<Document>, filter: Document) -> Vec<Bson> {
    let got = collect(
        coll.find(filter)
            .sort(doc! {"_id": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    field(&got, "_id")
}

#[tokio::test]
async fn hashed_indexes_answer_equality_and_refuse_arrays_and_unique() {
    let t = start().await;
    let db = t.tcp.database("hx");
    let coll = db.collection::<Document>("h");
    coll.insert_many((0..40).map(|i| doc! {"_id": i, "a": i % 10, "b": i % 4}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.insert_many(vec![
        doc! {"_id": 100, "a": 3.0, "b": 0},
        doc! {"_id": 101, "a": 3i64, "b": 1},
        doc! {"_id": 102, "b": 2},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    coll.create_index(IndexModel::builder().keys(doc! {"a": "hashed"}).build())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    coll.create_index(
        IndexModel::builder()
            .keys(doc! {"b": 1, "a": "hashed"})
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));

    // listIndexes shows the pattern with the string "hashed" and its name.
    let reply = db
        .run_command(doc! {"listIndexes": "h"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let listed: Vec<Document> = get_doc(&reply, "cursor")
        .get_array("firstBatch")
        .unwrap_or_else(|e| panic!("{e}"))
        .iter()
        .filter_map(|v| v.as_document())
        .map(|d| doc! {"key": d.get("key").cloned(), "name": d.get("name").cloned()})
        .collect();
    assert!(
        listed.contains(&doc! {"key": {"a": "hashed"}, "name": "a_hashed"}),
        "{listed:?}"
    );
    assert!(
        listed.contains(&doc! {"key": {"b": 1, "a": "hashed"}, "name": "b_1_a_hashed"}),
        "{listed:?}"
    );

    // Equality: numerically equal values (3, 3.0, NumberLong(3)) are found,
    // through an IXSCAN over the hashed bound.
    let threes = vec![3, 13, 23, 33, 100, 101]
        .into_iter()
        .map(Bson::Int32)
        .collect::<Vec<_>>();
    for v in [Bson::Int32(3), Bson::Double(3.0), Bson::Int64(3)] {
        assert_eq!(sorted_ids(&coll, doc! {"a": v.clone()}).await, threes);
    }
    let e = explain(
        &db,
        doc! {"find": "h", "filter": {"a": 3}, "hint": "a_hashed"},
        "executionStats",
    )
    .await;
    let ix = get_doc(&e, "queryPlanner.winningPlan.inputStage");
    assert_eq!(ix.get_str("stage").ok(), Some("IXSCAN"), "{e}");
    let shown = get_doc(ix, "indexBounds")
        .get_array("a")
        .unwrap_or_else(|e| panic!("{e}"))
        .clone();
    assert_eq!(shown.len(), 1);
    assert_ne!(shown[0], Bson::String("[3, 3]".into()), "bounds are hashes");
    let e = explain(
        &db,
        doc! {"find": "h", "filter": {"a": 3}},
        "executionStats",
    );
    let e = e.await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan.inputStage")
            .get_str("stage")
            .ok(),
        Some("IXSCAN"),
        "{e}"
    );
    assert_eq!(num(get_doc(&e, "executionStats"), "nReturned"), 6);

    // returnKey gives the key the index holds: the hash.
    let hashed_three = shown[0]
        .as_str()
        .and_then(|s| s.trim_start_matches('[').split(',').next())
        .and_then(|s| s.parse::<i64>().ok())
        .unwrap_or_else(|| panic!("bounds {shown:?}"));
    let got = collect(
        coll.find(doc! {"a": 3, "_id": 3})
            .hint(mongodb::options::Hint::Name("a_hashed".into()))
            .return_key(true)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(got, vec![doc! {"a": hashed_three}]);

    // $in: one hashed point per distinct value.
    assert_eq!(
        sorted_ids(&coll, doc! {"a": {"$in": [1, 1.0, 2]}}).await,
        ints(&[1, 2, 11, 12, 21, 22, 31, 32])
    );
    let e = explain(
        &db,
        doc! {"find": "h", "filter": {"a": {"$in": [1, 1.0, 2]}}},
        "queryPlanner",
    )
    .await;
    let ix = get_doc(&e, "queryPlanner.winningPlan.inputStage");
    assert_eq!(ix.get_str("stage").ok(), Some("IXSCAN"), "{e}");
    assert_eq!(
        get_doc(ix, "indexBounds")
            .get_array("a")
            .map(|a| a.len())
            .ok(),
        Some(2),
        "{e}"
    );

    // A null equality finds the document missing `a` (stored as null).
    assert_eq!(sorted_ids(&coll, doc! {"a": null}).await, ints(&[102]));

    // A range cannot use the hashed field: a collection scan, right results.
    assert_eq!(
        sorted_ids(&coll, doc! {"a": {"$gt": 8}}).await,
        ints(&[9, 19, 29, 39])
    );
    let e = explain(
        &db,
        doc! {"find": "h", "filter": {"a": {"$gt": 8}}},
        "queryPlanner",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner.winningPlan")
            .get_str("stage")
            .ok(),
        Some("COLLSCAN"),
        "{e}"
    );
    // The compound index bounds `b` and re-checks the range on `a`.
    assert_eq!(
        sorted_ids(&coll, doc! {"b": 1, "a": {"$lt": 2}}).await,
        ints(&[1, 21])
    );
    // Sorting on the hashed field is a real sort (hash order is not value order).
    let got = collect(
        coll.find(doc! {"b": 0})
            .sort(doc! {"a": 1, "_id": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(
        field(&got, "_id"),
        ints(&[0, 20, 12, 32, 100, 4, 24, 16, 36, 8, 28])
    );
    // Counts re-check documents (hashes may collide): still exact results.
    assert_eq!(count(&coll, doc! {"a": 3}).await, 6);
    assert_eq!(count(&coll, doc! {"b": 1, "a": 3}).await, 3);

    // Arrays anywhere in a hashed index's fields are refused (16766).
    for bad in [
        doc! {"_id": 200, "a": [1, 2]},
        doc! {"_id": 201, "a": 1, "b": []},
    ] {
        let e = expect_code(coll.insert_one(bad).await, 16766);
        assert!(
            error_message(&e).contains("hashed indexes do not currently support array values"),
            "{}",
            error_message(&e)
        );
    }
    expect_code(
        coll.update_one(doc! {"_id": 1}, doc! {"$set": {"a": [1]}})
            .await,
        16766,
    );
    // ...and a build over an array fails the same way.
    let other = db.collection::<Document>("arr");
    other
        .insert_one(doc! {"_id": 1, "x": [1]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    expect_code(
        other
            .create_index(IndexModel::builder().keys(doc! {"x": "hashed"}).build())
            .await,
        16766,
    );

    // Unique hashed indexes and two hashed fields are refused.
    let e = expect_code(
        coll.create_index(
            IndexModel::builder()
                .keys(doc! {"b": "hashed"})
                .options(IndexOptions::builder().unique(true).build())
                .build(),
        )
        .await,
        16764,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("Location16764"));
    for opt in ["prepareUnique", "unique"] {
        let mut index = doc! {"name": "a_hashed"};
        index.insert(opt, true);
        expect_code(
            db.run_command(doc! {"collMod": "h", "index": index}).await,
            16764,
        );
    }
    expect_code(
        coll.create_index(
            IndexModel::builder()
                .keys(doc! {"a": "hashed", "b": "hashed"})
                .build(),
        )
        .await,
        31303,
    );
}

/// mongod 8 answers a find whose filter is only an `_id` equality on its
/// express path: explain shows one EXPRESS_IXSCAN node (`isCached`, the key
/// pattern as the string `{ _id: 1 }`, `_id_`), with no per-stage counters,
/// whatever the limit or simple projection; what the express path leaves to
/// the planner (skip, hint, batchSize, another collation) keeps IDHACK or
/// the index plan.
#[tokio::test]
async fn find_by_id_explains_as_the_express_path() {
    let t = start().await;
    let db = t.tcp.database("express");
    days_with_index(&db, 20, 4).await;
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"_id": 7}, "limit": 1, "projection": {"v": 1}},
        "executionStats",
    )
    .await;
    assert_eq!(
        get_doc(&e, "queryPlanner").get_document("winningPlan").ok(),
        Some(&doc! {
            "isCached": false,
            "stage": "EXPRESS_IXSCAN",
            "keyPattern": "{ _id: 1 }",
            "indexName": "_id_",
            "projection": {"v": 1},
            "projectionCovered": false,
        })
    );
    let stats = get_doc(&e, "executionStats");
    assert_eq!(
        stats.get_document("executionStages").ok(),
        Some(&doc! {
            "isCached": false,
            "stage": "EXPRESS_IXSCAN",
            "keyPattern": "{ _id: 1 }",
            "indexName": "_id_",
            "projection": {"v": 1},
            "projectionCovered": false,
            "nReturned": 1,
            "keysExamined": 1,
            "docsExamined": 1,
        })
    );
    assert_eq!(num(stats, "nReturned"), 1);
    // A missing _id examines its key and no document.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"_id": {"$eq": 99}}},
        "executionStats",
    )
    .await;
    let stages = get_doc(&e, "executionStats.executionStages");
    assert_eq!(stages.get_str("stage").ok(), Some("EXPRESS_IXSCAN"));
    assert_eq!(
        (
            num(stages, "nReturned"),
            num(stages, "keysExamined"),
            num(stages, "docsExamined")
        ),
        (0, 1, 0)
    );
    // Not the express path: skip and batchSize keep IDHACK, as in mongod.
    for extra in [doc! {"skip": 1}, doc! {"batchSize": 5}] {
        let mut cmd = doc! {"find": "ts", "filter": {"_id": 7}};
        cmd.extend(extra);
        let e = explain(&db, cmd.clone(), "queryPlanner").await;
        let plan = get_doc(&e, "queryPlanner.winningPlan");
        assert_ne!(
            plan.get_str("stage").ok(),
            Some("EXPRESS_IXSCAN"),
            "{cmd}: {plan}"
        );
    }
    // Another filter goes through the planner.
    let e = explain(
        &db,
        doc! {"find": "ts", "filter": {"_id": 7, "day": 3}},
        "queryPlanner",
    )
    .await;
    let plan = get_doc(&e, "queryPlanner.winningPlan");
    assert_ne!(plan.get_str("stage").ok(), Some("EXPRESS_IXSCAN"), "{plan}");
}
