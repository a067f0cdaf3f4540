//! Wildcard indexes (`{"$**": 1}`, `{"a.$**": 1}`, `wildcardProjection`,
//! compound wildcard indexes) through the official driver, against mongod
//! 8's behaviour: the same results with and without the index, explain
//! choosing an IXSCAN on `{$_path: 1, <path>: 1}` where mongod does and a
//! collection scan where a wildcard index cannot answer (`null`, `$ne`,
//! `$exists: false`, object and array equality), sorts given by the index
//! only on a path no document holds an array at, the restrictions' errors,
//! index maintenance, and the index surviving a restart on lsm.

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;

/// A collection of schemaless documents: nested objects, arrays of values
/// and of objects, nested arrays, nulls, empty objects and arrays, mixed
/// types, missing fields.
fn dataset() -> Vec<Document> {
    vec![
        doc! {"_id": 1, "a": 1, "b": "x", "c": {"d": 5, "e": "p"}},
        doc! {"_id": 2, "a": 2, "b": "y", "c": {"d": 6}},
        doc! {"_id": 3, "a": [1, 3], "b": null, "tags": ["red", "blue"]},
        doc! {"_id": 4, "a": 4.5, "c": {"d": [7, 8]}, "items": [{"k": 1, "v": "a"}, {"k": 2}]},
        doc! {"_id": 5, "b": "x", "c": {}, "tags": []},
        doc! {"_id": 6, "a": "str", "c": {"d": null}, "items": [{"k": 3, "v": "b"}]},
        doc! {"_id": 7, "a": [[1, 2], 9], "n": {"m": {"o": 1}}},
        doc! {"_id": 8, "z": true},
        doc! {"_id": 9, "a": {"x": 1}, "b": "z", "c": {"d": 5}},
        doc! {"_id": 10, "a": 3, "b": "y", "when": bson::DateTime::from_millis(1_000)},
    ]
}

/// Filters whose predicates a wildcard index answers (mongod 8 plans an
/// IXSCAN on `$_path` for each), with the path it scans.
fn answered() -> Vec<(Document, &'static str)> {
    vec![
        (doc! {"a": 1}, "a"),
        (doc! {"a": {"$gt": 1}}, "a"),
        (doc! {"a": {"$gte": 1, "$lt": 4}}, "a"),
        (doc! {"a": {"$in": [1, 4.5, "str"]}}, "a"),
        (doc! {"b": "x"}, "b"),
        (doc! {"b": {"$gte": "y"}}, "b"),
        (doc! {"c.d": 5}, "c.d"),
        (doc! {"c.d": {"$gt": 5}}, "c.d"),
        (doc! {"c": {}}, "c"),
        (doc! {"c": {"$exists": true}}, "c"),
        (doc! {"a.x": 1}, "a.x"),
        (doc! {"tags": "blue"}, "tags"),
        (doc! {"items.k": {"$lte": 2}}, "items.k"),
        (doc! {"items.v": "b", "b": null}, "items.v"),
        (doc! {"n.m.o": {"$exists": true}}, "n.m.o"),
        (
            doc! {"when": {"$gt": bson::DateTime::from_millis(0)}},
            "when",
        ),
        (doc! {"z": true, "a": {"$ne": 1}}, "z"),
    ]
}

/// Filters a wildcard index cannot answer: a collection scan, as in mongod.
fn unanswered() -> Vec<Document> {
    vec![
        doc! {"b": null},
        doc! {"a": {"$ne": 1}},
        doc! {"c": {"$exists": false}},
        doc! {"c": {"d": 5}},
        doc! {"a": [1, 3]},
        doc! {"a": {"$nin": [1]}},
        doc! {"_id": {"$gt": 3}},
        doc! {"a.0": 1},
    ]
}

async fn ids(db: &mongodb::Database, filter: &Document, hint: Option<Document>) -> Vec<Bson> {
    let mut cmd = doc! {"find": "w", "filter": filter.clone(), "sort": {"_id": 1}};
    if let Some(h) = hint {
        cmd.insert("hint", h);
    }
    let r = run(db, cmd).await;
    field(&first_batch(&r), "_id")
}

async fn winning(db: &mongodb::Database, find: Document) -> Document {
    let r = run(db, doc! {"explain": find, "verbosity": "queryPlanner"}).await;
    r.get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .unwrap_or_else(|_| panic!("no winningPlan in {r}"))
        .clone()
}

/// The first stage named `name` in a plan tree.
fn stage<'a>(plan: &'a Document, name: &str) -> Option<&'a Document> {
    if plan.get_str("stage").ok() == Some(name) {
        return Some(plan);
    }
    ["inputStage", "queryPlan"]
        .iter()
        .filter_map(|k| plan.get_document(k).ok())
        .find_map(|p| stage(p, name))
}

#[tokio::test]
async fn same_results_with_and_without_the_index_and_explain_uses_it() {
    let t = start().await;
    let db = t.tcp.database("wild_same");
    let c = db.collection::<Document>("w");
    c.insert_many(dataset())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut before = Vec::new();
    for (f, _) in answered() {
        before.push(ids(&db, &f, None).await);
    }
    for f in unanswered() {
        before.push(ids(&db, &f, None).await);
    }
    let r = run(
        &db,
        doc! {"createIndexes": "w", "indexes": [{"key": {"$**": 1}, "name": "$**_1"}]},
    )
    .await;
    assert_eq!(num(&r, "numIndexesAfter"), 2);
    let mut after = Vec::new();
    for (f, path) in answered() {
        after.push(ids(&db, &f, None).await);
        let plan = winning(&db, doc! {"find": "w", "filter": f.clone()}).await;
        let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{f}: no IXSCAN in {plan}"));
        assert_eq!(ix.get_str("indexName").ok(), Some("$**_1"), "{f}");
        let mut key = doc! {"$_path": 1};
        key.insert(path, 1);
        assert_eq!(ix.get_document("keyPattern").ok(), Some(&key), "{f}");
        let bounds = ix
            .get_document("indexBounds")
            .unwrap_or_else(|e| panic!("{e}"));
        let paths = bounds
            .get_array("$_path")
            .unwrap_or_else(|e| panic!("{f}: {e}"));
        assert_eq!(
            paths.first(),
            Some(&Bson::String(format!("[\"{path}\", \"{path}\"]")))
        );
    }
    for f in unanswered() {
        after.push(ids(&db, &f, None).await);
        let plan = winning(&db, doc! {"find": "w", "filter": f.clone()}).await;
        // Another index (the `_id` index of a record-id collection) may
        // serve it; the wildcard index must not.
        let ix = stage(&plan, "IXSCAN").and_then(|s| s.get_str("indexName").ok());
        assert_ne!(ix, Some("$**_1"), "{f}: {plan}");
    }
    assert_eq!(before, after);
    // The concrete answers, as mongod gives them for this data.
    assert_eq!(
        ids(&db, &doc! {"a": 1}, None).await,
        vec![Bson::Int32(1), Bson::Int32(3)]
    );
    assert_eq!(
        ids(&db, &doc! {"c": {"$exists": true}}, None).await,
        [1, 2, 4, 5, 6, 9].map(Bson::Int32).to_vec()
    );
    assert_eq!(ids(&db, &doc! {"c": {}}, None).await, vec![Bson::Int32(5)]);
    assert_eq!(
        ids(&db, &doc! {"items.k": {"$lte": 2}}, None).await,
        vec![Bson::Int32(4)]
    );
    // `$exists: true` scans the path and every path under it.
    let plan = winning(&db, doc! {"find": "w", "filter": {"c": {"$exists": true}}}).await;
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(
        ix.get_document("indexBounds").ok(),
        Some(&doc! {"$_path": ["[\"c\", \"c\"]", "[\"c.\", \"c/\")"], "c": ["[MinKey, MaxKey]"]})
    );
    // A hint of the wildcard index needs a predicate it can answer.
    let hinted = ids(&db, &doc! {"b": "y"}, Some(doc! {"$**": 1})).await;
    assert_eq!(hinted, vec![Bson::Int32(2), Bson::Int32(10)]);
    expect_code(
        db.run_command(doc! {"find": "w", "filter": {}, "hint": "$**_1"})
            .await,
        2,
    );
    // count and distinct and aggregate go through the same planner.
    assert_eq!(
        c.count_documents(doc! {"b": "y"})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        2
    );
    let agg: Vec<Document> = c
        .aggregate([
            doc! {"$match": {"a": {"$gte": 3}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(field(&agg, "_id"), [3, 4, 7, 10].map(Bson::Int32).to_vec());
}

#[tokio::test]
async fn sorts_on_one_field_unless_it_is_multikey() {
    let t = start().await;
    let db = t.tcp.database("wild_sort");
    let c = wildcard_over(
        &db,
        vec![
            doc! {"_id": 1, "s": 3, "m": [1, 2]},
            doc! {"_id": 2, "s": 1, "m": 5},
            doc! {"_id": 3, "s": 2},
            doc! {"_id": 4, "t": 1},
        ],
    )
    .await;
    let find = doc! {"find": "w", "filter": {"s": {"$gt": 0}}, "sort": {"s": -1}};
    let plan = winning(&db, find.clone()).await;
    assert!(stage(&plan, "SORT").is_none(), "{plan}");
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(ix.get_str("direction").ok(), Some("backward"));
    assert_eq!(ix.get_bool("isMultiKey").ok(), Some(false));
    let r = run(&db, find).await;
    assert_eq!(
        field(&first_batch(&r), "_id"),
        [1, 3, 2].map(Bson::Int32).to_vec()
    );
    // `m` holds an array in one document: the index cannot give its order.
    let find = doc! {"find": "w", "filter": {"m": {"$gte": 1}}, "sort": {"m": 1}};
    let plan = winning(&db, find.clone()).await;
    assert!(stage(&plan, "SORT").is_some(), "{plan}");
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(ix.get_bool("isMultiKey").ok(), Some(true));
    let r = run(&db, find).await;
    assert_eq!(
        field(&first_batch(&r), "_id"),
        [1, 2].map(Bson::Int32).to_vec()
    );
    // Multikey: the two range predicates are not intersected (the element
    // matching each may differ), so `[1, 2]` still matches.
    let r = run(
        &db,
        doc! {"find": "w", "filter": {"m": {"$gt": 1, "$lt": 2}}},
    )
    .await;
    assert_eq!(field(&first_batch(&r), "_id"), vec![Bson::Int32(1)]);
    // Deleting the only array makes the path single-valued again.
    c.delete_one(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let plan = winning(
        &db,
        doc! {"find": "w", "filter": {"m": {"$gte": 1}}, "sort": {"m": 1}},
    )
    .await;
    assert!(stage(&plan, "SORT").is_none(), "{plan}");
    // Without a predicate on the sorted path the index holds too little.
    let plan = winning(&db, doc! {"find": "w", "filter": {}, "sort": {"s": 1}}).await;
    assert!(stage(&plan, "IXSCAN").is_none(), "{plan}");
}

#[tokio::test]
async fn subpaths_projections_and_id() {
    let t = start().await;
    let db = t.tcp.database("wild_proj");
    let docs = vec![
        doc! {"_id": 1, "attrs": {"color": "red", "size": 3}, "other": 1},
        doc! {"_id": 2, "attrs": {"color": "blue"}, "other": 2},
        doc! {"_id": 3, "attrs": "flat", "other": 1},
    ];
    for (coll, spec, hit, miss) in [
        (
            "sub",
            doc! {"key": {"attrs.$**": 1}, "name": "w"},
            doc! {"attrs.color": "red"},
            doc! {"other": 1},
        ),
        (
            "sub2",
            doc! {"key": {"attrs.$**": 1}, "name": "w"},
            doc! {"attrs": "flat"},
            doc! {"other": 2},
        ),
        (
            "inc",
            doc! {"key": {"$**": 1}, "name": "w", "wildcardProjection": {"attrs.size": 1, "other": 1}},
            doc! {"attrs.size": 3},
            doc! {"attrs.color": "blue"},
        ),
        (
            "exc",
            doc! {"key": {"$**": 1}, "name": "w", "wildcardProjection": {"attrs": 0}},
            doc! {"other": 2},
            doc! {"attrs.color": "red"},
        ),
        (
            "id",
            doc! {"key": {"$**": 1}, "name": "w", "wildcardProjection": {"_id": 1, "other": 1}},
            doc! {"_id": {"$gt": 1}, "other": {"$gt": 5}},
            doc! {"attrs.color": "red"},
        ),
    ] {
        let c = db.collection::<Document>(coll);
        c.insert_many(docs.clone())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let before_hit = ids_in(&db, coll, &hit).await;
        let before_miss = ids_in(&db, coll, &miss).await;
        run(&db, doc! {"createIndexes": coll, "indexes": [spec.clone()]}).await;
        let plan = winning(&db, doc! {"find": coll, "filter": hit.clone()}).await;
        assert!(stage(&plan, "IXSCAN").is_some(), "{coll} {hit}: {plan}");
        let plan = winning(&db, doc! {"find": coll, "filter": miss.clone()}).await;
        assert!(stage(&plan, "IXSCAN").is_none(), "{coll} {miss}: {plan}");
        assert_eq!(ids_in(&db, coll, &hit).await, before_hit, "{coll} {hit}");
        assert_eq!(ids_in(&db, coll, &miss).await, before_miss, "{coll} {miss}");
        // listIndexes shows the specification as created.
        let listed = run(&db, doc! {"listIndexes": coll}).await;
        let specs = first_batch(&listed);
        let w = specs
            .iter()
            .find(|s| s.get_str("name").ok() == Some("w"))
            .unwrap_or_else(|| panic!("{listed}"));
        assert_eq!(w.get_document("key").ok(), spec.get_document("key").ok());
        assert_eq!(
            w.get("wildcardProjection"),
            spec.get("wildcardProjection"),
            "{coll}"
        );
    }
}

/// Collection `w` holding `docs`, then a `{"$**": 1}` index named `w` built
/// over them.
async fn wildcard_over(
    db: &mongodb::Database,
    docs: Vec<Document>,
) -> mongodb::Collection<Document> {
    let c = db.collection::<Document>("w");
    c.insert_many(docs).await.unwrap_or_else(|e| panic!("{e}"));
    run(
        db,
        doc! {"createIndexes": "w", "indexes": [{"key": {"$**": 1}, "name": "w"}]},
    )
    .await;
    c
}

async fn ids_in(db: &mongodb::Database, coll: &str, filter: &Document) -> Vec<Bson> {
    let r = run(
        db,
        doc! {"find": coll, "filter": filter.clone(), "sort": {"_id": 1}},
    )
    .await;
    field(&first_batch(&r), "_id")
}

#[tokio::test]
async fn compound_wildcard_indexes() {
    let t = start().await;
    let db = t.tcp.database("wild_compound");
    let c = db.collection::<Document>("w");
    let mut docs = Vec::new();
    for i in 0..40 {
        docs.push(doc! {"_id": i, "tenant": i % 4, "f": {"x": i, "y": format!("s{}", i % 3)}});
    }
    docs.push(doc! {"_id": 100, "tenant": 1});
    c.insert_many(docs).await.unwrap_or_else(|e| panic!("{e}"));
    let queries = [
        doc! {"tenant": 1, "f.x": {"$gte": 10}},
        doc! {"tenant": 2, "f.y": "s2"},
        doc! {"tenant": 1},
    ];
    let mut before = Vec::new();
    for q in &queries {
        before.push(ids_in(&db, "w", q).await);
    }
    // The regular field must be kept out of the wildcard term.
    expect_code(
        db.run_command(doc! {"createIndexes": "w", "indexes": [{"key": {"tenant": 1, "$**": 1}, "name": "bad"}]})
            .await,
        67,
    );
    run(
        &db,
        doc! {"createIndexes": "w", "indexes": [
            {"key": {"tenant": 1, "$**": 1}, "name": "cw", "wildcardProjection": {"tenant": 0}},
        ]},
    )
    .await;
    for (q, want) in queries.iter().zip(&before) {
        assert_eq!(&ids_in(&db, "w", q).await, want, "{q}");
    }
    let plan = winning(&db, doc! {"find": "w", "filter": queries[0].clone()}).await;
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    assert_eq!(
        ix.get_document("keyPattern").ok(),
        Some(&doc! {"tenant": 1, "$_path": 1, "f.x": 1})
    );
    // By the regular field alone: every path, from MinKey (documents
    // without a wildcard leaf, like _id 100).
    let plan = winning(&db, doc! {"find": "w", "filter": queries[2].clone()}).await;
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    let bounds = ix
        .get_document("indexBounds")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        bounds.get_array("$_path").ok(),
        Some(&vec![
            Bson::String("[MinKey, MinKey]".into()),
            Bson::String("[\"\", {})".into())
        ])
    );
    assert!(before[2].contains(&Bson::Int32(100)));
    // The regular fields may not hold arrays (mongod: single key terms only).
    let e = expect_code(c.insert_one(doc! {"_id": 200, "tenant": [1, 2]}).await, 201);
    assert!(!error_message(&e).is_empty());
}

#[tokio::test]
async fn restrictions_fail_as_in_mongod() {
    let t = start().await;
    let db = t.tcp.database("wild_errors");
    let cases: Vec<(Document, i32)> = vec![
        (doc! {"key": {"$**": 1}, "unique": true}, 67),
        (doc! {"key": {"$**": 1}, "sparse": true}, 67),
        (doc! {"key": {"$**": 1}, "expireAfterSeconds": 60}, 67),
        (doc! {"key": {"$**": "hashed"}}, 67),
        (doc! {"key": {"$**": "2dsphere"}}, 67),
        (doc! {"key": {"$**": "2d"}}, 67),
        (doc! {"key": {"a.$**": "text"}}, 67),
        (doc! {"key": {"$**": 0}}, 67),
        (doc! {"key": {"$**.$**": 1}}, 67),
        (doc! {"key": {"a.$**": 1, "b.$**": 1}}, 67),
        (
            doc! {"key": {"$**": 1}, "wildcardProjection": {"a": 1, "b": 0}},
            31254,
        ),
        (
            doc! {"key": {"$**": 1}, "wildcardProjection": {"a": "x"}},
            51271,
        ),
        (doc! {"key": {"$**": 1}, "wildcardProjection": {}}, 9),
        (doc! {"key": {"a": 1}, "wildcardProjection": {"a": 1}}, 2),
        (doc! {"key": {"a.$**": 1}, "wildcardProjection": "x"}, 14),
        (
            doc! {"key": {"a.$**": 1}, "wildcardProjection": {"b": 1}},
            9,
        ),
    ];
    for (mut spec, code) in cases {
        spec.insert("name", "w");
        let e = expect_code(
            db.run_command(doc! {"createIndexes": "c", "indexes": [spec.clone()]})
                .await,
            code,
        );
        assert!(!error_message(&e).is_empty(), "{spec}");
    }
    // Descending and `_id`-including projections are valid (mongod 7+).
    run(
        &db,
        doc! {"createIndexes": "c", "indexes": [
            {"key": {"$**": -1}, "name": "d", "wildcardProjection": {"_id": 1, "a": 0}},
        ]},
    )
    .await;
}

#[tokio::test]
async fn maintenance_stats_and_validate() {
    let t = start().await;
    let db = t.tcp.database("wild_maint");
    // Built over existing documents, then kept by inserts, updates, deletes.
    let c = wildcard_over(
        &db,
        vec![
            doc! {"_id": 1, "a": {"b": 1}},
            doc! {"_id": 2, "a": {"b": 2}},
        ],
    )
    .await;
    c.insert_one(doc! {"_id": 3, "a": {"b": [3, 1]}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.update_one(doc! {"_id": 2}, doc! {"$set": {"a.b": 1, "q": "new"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    c.delete_one(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ids_in(&db, "w", &doc! {"a.b": 1}).await,
        [2, 3].map(Bson::Int32).to_vec()
    );
    assert_eq!(ids_in(&db, "w", &doc! {"a.b": 2}).await, Vec::<Bson>::new());
    assert_eq!(
        ids_in(&db, "w", &doc! {"q": "new"}).await,
        vec![Bson::Int32(2)]
    );
    let v = run(&db, doc! {"validate": "w", "full": true}).await;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    let stats = run(&db, doc! {"collStats": "w"}).await;
    let sizes = stats
        .get_document("indexSizes")
        .unwrap_or_else(|e| panic!("{stats}: {e}"));
    assert!(sizes.contains_key("w"), "{stats}");
    let r = run(
        &db,
        doc! {"aggregate": "w", "pipeline": [{"$indexStats": {}}], "cursor": {}},
    )
    .await;
    let names = field(&first_batch(&r), "name");
    assert!(names.contains(&Bson::String("w".into())), "{r}");
    // Dropping it leaves a collection scan.
    run(&db, doc! {"dropIndexes": "w", "index": "w"}).await;
    assert_eq!(
        ids_in(&db, "w", &doc! {"a.b": 1}).await,
        [2, 3].map(Bson::Int32).to_vec()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn wildcard_index_survives_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("wild_restart");
    let c = db.collection::<Document>("w");
    c.insert_many(vec![
        doc! {"_id": 1, "p": {"q": 1}},
        doc! {"_id": 2, "p": {"q": [2, 3]}},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    run(
        &db,
        doc! {"createIndexes": "w", "indexes": [
            {"key": {"$**": 1}, "name": "w", "wildcardProjection": {"p": 1}},
        ]},
    )
    .await;
    shutdown_by_command(server, client).await;
    let (_server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("wild_restart");
    let c = db.collection::<Document>("w");
    c.insert_one(doc! {"_id": 3, "p": {"q": 3}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        ids_in(&db, "w", &doc! {"p.q": {"$gte": 2}}).await,
        [2, 3].map(Bson::Int32).to_vec()
    );
    let plan = winning(&db, doc! {"find": "w", "filter": {"p.q": 3}}).await;
    let ix = stage(&plan, "IXSCAN").unwrap_or_else(|| panic!("{plan}"));
    // The multikey path entries were kept too.
    assert_eq!(ix.get_bool("isMultiKey").ok(), Some(true));
    let listed = run(&db, doc! {"listIndexes": "w"}).await;
    assert!(
        listed.to_string().contains("wildcardProjection"),
        "{listed}"
    );
}
