//! `find`'s `min`/`max` (bounds on the hinted index, min inclusive, max
//! exclusive, with mongod's 51173-51176 errors), `returnKey`, and
//! `showRecordId` (not built: 238), through the official driver.

use crate::common::*;
use bson::{doc, Document};
use mongodb::options::Hint;
use mongodb::Database;

async fn fixture(db: &Database) {
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..10).map(|j| doc! {"_id": j, "j": j, "k": j, "d": j, "arr": [j, j + 10]}))
        .await
        .unwrap();
    for key in [
        doc! {"j": 1},
        doc! {"j": 1, "k": 1},
        doc! {"d": -1},
        doc! {"arr": 1},
    ] {
        coll.create_index(mongodb::IndexModel::builder().keys(key).build())
            .await
            .unwrap();
    }
}

async fn find(db: &Database, cmd: Document) -> mongodb::error::Result<Vec<Document>> {
    let mut body = doc! {"find": "c"};
    body.extend(cmd);
    let r = db.run_command(body).await?;
    let batch = r
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|e| panic!("no firstBatch: {e} in {r}"));
    Ok(batch
        .iter()
        .map(|b| b.as_document().cloned().unwrap_or_default())
        .collect())
}

fn js(docs: &[Document], key: &str) -> Vec<i64> {
    docs.iter().map(|d| num(d, key)).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_max_bound_the_hinted_index() {
    let ts = start().await;
    let db = ts.tcp.database("mm");
    fixture(&db).await;
    let coll = db.collection::<Document>("c");

    // Through the driver's options: max is exclusive, min inclusive.
    let below = collect(
        coll.find(doc! {})
            .max(doc! {"j": 3})
            .hint(Hint::Keys(doc! {"j": 1}))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(js(&below, "j"), vec![0, 1, 2]);
    let from = collect(
        coll.find(doc! {})
            .min(doc! {"j": 3})
            .hint(Hint::Name("j_1".into()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(js(&from, "j"), vec![3, 4, 5, 6, 7, 8, 9]);

    let cases: Vec<(Document, Vec<i64>)> = vec![
        // One range over the compound key: (3, 3) <= key < (6, 0).
        (
            doc! {"min": {"j": 3, "k": 3}, "max": {"j": 6, "k": 0}, "hint": {"j": 1, "k": 1}},
            vec![3, 4, 5],
        ),
        // A descending field runs from high to low.
        (
            doc! {"min": {"d": 7}, "max": {"d": 2}, "hint": {"d": -1}},
            vec![7, 6, 5, 4, 3],
        ),
        // The filter is checked on what the range yields.
        (
            doc! {"filter": {"k": {"$gt": 5}}, "min": {"j": 3}, "max": {"j": 8}, "hint": {"j": 1}},
            vec![6, 7],
        ),
        // The `_id` index.
        (doc! {"min": {"_id": 8}, "hint": "_id_"}, vec![8, 9]),
        // A multikey index names each document once.
        (
            doc! {"min": {"arr": 5}, "max": {"arr": 12}, "hint": {"arr": 1}},
            vec![5, 6, 7, 8, 9, 0, 1],
        ),
        // sort, skip and limit apply on top.
        (
            doc! {"min": {"j": 2}, "max": {"j": 7}, "hint": {"j": 1}, "sort": {"j": -1}, "skip": 1, "limit": 2},
            vec![5, 4],
        ),
    ];
    for (cmd, want) in cases {
        let got = find(&db, cmd.clone()).await.unwrap();
        assert_eq!(js(&got, "_id"), want, "{cmd}");
    }
    // A missing collection has nothing to plan.
    let none = db
        .run_command(doc! {"find": "nope", "min": {"j": 1}, "hint": {"j": 1}})
        .await
        .unwrap();
    assert!(none
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .is_ok_and(|b| b.is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_max_errors_are_mongods() {
    let ts = start().await;
    let db = ts.tcp.database("mm");
    fixture(&db).await;
    let cases: Vec<(Document, i32, &str)> = vec![
        (doc! {"min": {"j": 1}}, 51173, "Location51173"),
        (
            doc! {"min": {"j": 1}, "hint": {"$natural": 1}},
            51173,
            "Location51173",
        ),
        (
            doc! {"min": {"k": 3, "j": 3}, "hint": {"j": 1, "k": 1}},
            51174,
            "Location51174",
        ),
        (
            doc! {"max": {"j": 3}, "hint": {"j": 1, "k": 1}},
            51174,
            "Location51174",
        ),
        (
            doc! {"min": {"j": 5}, "max": {"j": 5}, "hint": {"j": 1}},
            51175,
            "Location51175",
        ),
        (
            doc! {"min": {"d": 2}, "max": {"d": 7}, "hint": {"d": -1}},
            51175,
            "Location51175",
        ),
        (
            doc! {"min": {"j": 1}, "max": {"k": 5}, "hint": {"j": 1}},
            51176,
            "Location51176",
        ),
        (doc! {"min": {"k": 3}, "hint": "k_1"}, 2, "BadValue"),
        (doc! {"min": 3, "hint": {"j": 1}}, 14, "TypeMismatch"),
    ];
    for (cmd, code, name) in cases {
        let e = expect_code(find(&db, cmd.clone()).await, code);
        assert_eq!(error_code_name(&e).as_deref(), Some(name), "{cmd}");
    }
    // showRecordId is no error: every result carries its `$recordId`
    // (tests/compat/test_standalone_answers.py checks its values).
    let shown = find(&db, doc! {"showRecordId": true, "hint": {"j": 1}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!shown.is_empty());
    assert!(shown.iter().all(|d| d.contains_key("$recordId")));
    // An ordinary collection keeps documents under record ids: mongod
    // shows them as NumberLongs.
    assert!(
        shown
            .iter()
            .all(|d| matches!(d.get("$recordId"), Some(bson::Bson::Int64(_)))),
        "{shown:?}"
    );
    // Under a collation, string bounds cannot use the (binary) index.
    let e = expect_code(
        find(
            &db,
            doc! {"min": {"j": "a"}, "hint": {"j": 1}, "collation": {"locale": "en"}},
        )
        .await,
        51174,
    );
    assert!(error_message(&e).contains("not compatible with min/max"));
    // showRecordId: false asks for nothing.
    assert_eq!(
        find(&db, doc! {"showRecordId": false}).await.unwrap().len(),
        10
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn return_key_gives_the_index_key() {
    let ts = start().await;
    let db = ts.tcp.database("mm");
    fixture(&db).await;
    let cases: Vec<(Document, Vec<Document>)> = vec![
        (
            doc! {"filter": {"j": {"$gte": 8}}},
            vec![doc! {"j": 8}, doc! {"j": 9}],
        ),
        (
            doc! {"filter": {"j": 2, "k": 2}},
            vec![doc! {"j": 2, "k": 2}],
        ),
        // No index: empty documents, as mongod.
        (
            doc! {"filter": {"nothing": {"$exists": false}}, "limit": 2},
            vec![doc! {}, doc! {}],
        ),
        (doc! {"filter": {"_id": 4}}, vec![doc! {"_id": 4}]),
        (
            doc! {"min": {"d": 2}, "max": {"d": 0}, "hint": {"d": -1}},
            vec![doc! {"d": 2}, doc! {"d": 1}],
        ),
        // A multikey document shows the key the scan reached it by.
        (
            doc! {"filter": {"arr": {"$gte": 18}}},
            vec![doc! {"arr": 18}, doc! {"arr": 19}],
        ),
        // The projection gives way to the key.
        (
            doc! {"filter": {"j": 1}, "projection": {"k": 1}},
            vec![doc! {"j": 1}],
        ),
    ];
    for (mut cmd, want) in cases {
        cmd.insert("returnKey", true);
        let got = find(&db, cmd.clone()).await.unwrap();
        assert_eq!(got, want, "{cmd}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn explain_shows_the_key_range() {
    let ts = start().await;
    let db = ts.tcp.database("mm");
    fixture(&db).await;
    let r = db
        .run_command(doc! {
            "explain": {"find": "c", "filter": {"k": 4}, "min": {"j": 3}, "max": {"j": 6}, "hint": {"j": 1}, "returnKey": true},
            "verbosity": "executionStats",
        })
        .await
        .unwrap();
    let plan = r
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .unwrap()
        .clone();
    assert_eq!(plan.get_str("stage").unwrap(), "RETURN_KEY");
    let fetch = plan.get_document("inputStage").unwrap();
    assert_eq!(fetch.get_str("stage").unwrap(), "FETCH");
    let scan = fetch.get_document("inputStage").unwrap();
    assert_eq!(scan.get_str("indexName").unwrap(), "j_1");
    assert_eq!(
        scan.get_document("indexBounds").unwrap(),
        &doc! {"startKey": {"j": 3}, "startKeyInclusive": true, "endKey": {"j": 6}, "endKeyInclusive": false}
    );
    let stats = r.get_document("executionStats").unwrap();
    assert_eq!(num(stats, "totalKeysExamined"), 3);
    assert_eq!(num(stats, "totalDocsExamined"), 3);
    assert_eq!(num(stats, "nReturned"), 1);
    assert_eq!(
        stats
            .get_document("executionStages")
            .and_then(|s| s.get_str("stage"))
            .unwrap(),
        "RETURN_KEY"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn min_max_on_an_index_with_a_collation() {
    let ts = start().await;
    let db = ts.tcp.database("mm");
    let coll = db.collection::<Document>("c");
    coll.insert_many(
        ["apple", "Banana", "cherry", "Date", "elder"]
            .iter()
            .enumerate()
            .map(|(i, s)| doc! {"_id": i as i32, "s": *s}),
    )
    .await
    .unwrap();
    db.run_command(doc! {
        "createIndexes": "c",
        "indexes": [{"key": {"s": 1}, "name": "s_ci", "collation": {"locale": "en", "strength": 2}}],
    })
    .await
    .unwrap();
    // Under the index's own collation string bounds apply, case-insensitively
    // ("b" <= s < "D" holds Banana and cherry).
    let ci = doc! {"locale": "en", "strength": 2};
    let got = find(
        &db,
        doc! {"min": {"s": "b"}, "max": {"s": "D"}, "hint": "s_ci", "collation": ci.clone()},
    )
    .await
    .unwrap();
    assert_eq!(js(&got, "_id"), vec![1, 2]);
    // Under another collation (here the simple one) they cannot: 51174, as
    // mongod; bounds that hold no string still can.
    expect_code(
        find(&db, doc! {"min": {"s": "b"}, "hint": "s_ci"}).await,
        51174,
    );
    let all = find(&db, doc! {"min": {"s": 0}, "hint": "s_ci"})
        .await
        .unwrap();
    assert_eq!(all.len(), 5);
    // returnKey shows the key as the index holds it: the same collation key
    // for "Date" and "date".
    let key = find(
        &db,
        doc! {"filter": {"_id": 3}, "hint": "s_ci", "returnKey": true},
    )
    .await
    .unwrap();
    let lower = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 9, "s": "date"}]})
        .await
        .map(|_| ());
    assert!(lower.is_ok());
    let key2 = find(
        &db,
        doc! {"filter": {"_id": 9}, "hint": "s_ci", "returnKey": true},
    )
    .await
    .unwrap();
    assert_eq!(key.len(), 1);
    assert_eq!(key, key2);
    assert_ne!(key[0].get_str("s").ok(), Some("Date"));
}
