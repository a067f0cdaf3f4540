//! `$merge` (`let`, `on` fields backed by a unique index), `$out` keeping the
//! target's indexes and options, `$bucketAuto` with `granularity` and
//! `$densify` by calendar units, through the driver on the test engine.

use crate::common::*;
use bson::{doc, DateTime, Document};
use mongodb::Database;

async fn agg_err(db: &Database, coll: &str, pipeline: Vec<Document>) -> i32 {
    let err = db
        .collection::<Document>(coll)
        .aggregate(pipeline)
        .await
        .unwrap_err();
    error_code(&err).unwrap_or_default()
}

/// Runs a pipeline that writes (`$merge`, `$out`) to its end.
async fn agg_run(db: &Database, coll: &str, pipeline: Vec<Document>) {
    collect(
        db.collection::<Document>(coll)
            .aggregate(pipeline)
            .await
            .unwrap(),
    )
    .await;
}

async fn sorted(db: &Database, coll: &str) -> Vec<Document> {
    collect(
        db.collection::<Document>(coll)
            .find(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .unwrap(),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_on_a_unique_index_with_let() {
    let ts = start().await;
    let db = ts.tcp.database("aggmerge");
    let src = db.collection::<Document>("src");
    src.insert_many(vec![
        doc! {"_id": 10, "k": "a", "n": 5},
        doc! {"_id": 11, "k": "b", "n": 2},
    ])
    .await
    .unwrap();
    let merge = |on: &str| {
        doc! {"$merge": {
            "into": "t", "on": on, "let": {"inc": "$n"},
            "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$inc"]}, "from": "$$new.n"}}],
        }}
    };
    let project = doc! {"$project": {"_id": 0, "k": 1, "n": 1}};
    // No target yet: no index can make `k` unique, and nothing is created.
    assert_eq!(
        agg_err(&db, "src", vec![project.clone(), merge("k")]).await,
        51183
    );
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"t".to_string()), "{names:?}");

    let t = db.collection::<Document>("t");
    t.insert_one(doc! {"_id": 1, "k": "a", "n": 1})
        .await
        .unwrap();
    // A non-unique index does not do either.
    db.run_command(doc! {"createIndexes": "t", "indexes": [{"key": {"k": 1}, "name": "k_plain"}]})
        .await
        .unwrap();
    assert_eq!(
        agg_err(&db, "src", vec![project.clone(), merge("k")]).await,
        51183
    );
    db.run_command(doc! {"dropIndexes": "t", "index": "k_plain"})
        .await
        .unwrap();
    db.run_command(doc! {"createIndexes": "t", "indexes": [{"key": {"k": -1}, "name": "k_unique", "unique": true}]})
        .await
        .unwrap();
    agg_run(&db, "src", vec![project.clone(), merge("k")]).await;
    let docs = sorted(&db, "t").await;
    assert_eq!(docs.len(), 2, "{docs:?}");
    // The match was updated with the `let` variable and `$$new`...
    assert_eq!(docs[0], doc! {"_id": 1, "k": "a", "n": 6, "from": 5});
    // ...and the other document inserted as it came.
    assert_eq!(docs[1].get_str("k").ok(), Some("b"));
    assert_eq!(docs[1].get_i32("n").ok(), Some(2));

    // A hidden unique index still makes the fields unique.
    db.run_command(doc! {"collMod": "t", "index": {"name": "k_unique", "hidden": true}})
        .await
        .unwrap();
    agg_run(&db, "src", vec![project.clone(), merge("k")]).await;
    let docs = sorted(&db, "t").await;
    assert_eq!(docs.len(), 2, "{docs:?}");
    assert_eq!(docs[0].get_i32("n").ok(), Some(11));

    // Each document needs its `on` values, never arrays.
    let missing = doc! {"$project": {"_id": 0, "n": 1}};
    assert_eq!(agg_err(&db, "src", vec![missing, merge("k")]).await, 51132);
    let array = doc! {"$project": {"_id": 0, "k": ["$k"]}};
    assert_eq!(agg_err(&db, "src", vec![array, merge("k")]).await, 51185);
    // `let` is only for a pipeline.
    let with_mode = doc! {"$merge": {"into": "t", "let": {"a": 1}, "whenMatched": "merge"}};
    assert_eq!(agg_err(&db, "src", vec![with_mode]).await, 51199);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_keeps_the_targets_indexes_and_options() {
    let ts = start().await;
    let db = ts.tcp.database("aggoutix");
    let src = db.collection::<Document>("src");
    src.insert_many(vec![
        doc! {"_id": 1, "k": 1},
        doc! {"_id": 2, "k": 2},
        doc! {"_id": 3, "k": 2},
    ])
    .await
    .unwrap();
    db.run_command(doc! {"create": "t", "validator": {"k": {"$type": "number"}}})
        .await
        .unwrap();
    db.run_command(doc! {"createIndexes": "t", "indexes": [
        {"key": {"k": 1}, "name": "k_unique", "unique": true},
        {"key": {"z": -1}, "name": "z_desc"},
    ]})
    .await
    .unwrap();
    db.collection::<Document>("t")
        .insert_one(doc! {"_id": "old", "k": 0})
        .await
        .unwrap();

    let out = doc! {"$out": "t"};
    agg_run(
        &db,
        "src",
        vec![doc! {"$match": {"_id": {"$lt": 3}}}, out.clone()],
    )
    .await;
    assert_eq!(
        sorted(&db, "t").await,
        vec![doc! {"_id": 1, "k": 1}, doc! {"_id": 2, "k": 2}]
    );
    // The indexes and the validator survived the replacement.
    assert_eq!(
        index_names(&db, "t").await,
        vec!["_id_", "k_unique", "z_desc"]
    );
    let first = collection_entry(&db, "t").await;
    assert!(format!("{first:?}").contains("validator"), "{first:?}");
    let bad = doc! {"$project": {"k": "text"}};
    assert_eq!(agg_err(&db, "src", vec![bad, out.clone()]).await, 121);

    // A result that breaks the unique index fails, and the target stays.
    assert_eq!(agg_err(&db, "src", vec![out]).await, 11000);
    assert_eq!(
        sorted(&db, "t").await,
        vec![doc! {"_id": 1, "k": 1}, doc! {"_id": 2, "k": 2}]
    );
    assert_eq!(
        index_names(&db, "t").await,
        vec!["_id_", "k_unique", "z_desc"]
    );
    let names = db.list_collection_names().await.unwrap();
    assert!(
        names.iter().all(|n| !n.starts_with("tmp.")),
        "temporary collection left behind: {names:?}"
    );
}

async fn index_names(db: &Database, coll: &str) -> Vec<String> {
    let reply = db.run_command(doc! {"listIndexes": coll}).await.unwrap();
    let mut names: Vec<String> = reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap()
        .iter()
        .filter_map(|i| i.as_document()?.get_str("name").ok().map(String::from))
        .collect();
    names.sort();
    names
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bucket_auto_granularity_and_densify_by_month() {
    let ts = start().await;
    let db = ts.tcp.database("aggcal");
    let c = db.collection::<Document>("c");
    c.insert_many(
        [110, 120, 150, 155, 170]
            .iter()
            .map(|v| doc! {"v": *v})
            .collect::<Vec<_>>(),
    )
    .await
    .unwrap();
    let buckets = collect(
        c.aggregate(vec![
            doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R20"}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        buckets,
        vec![
            doc! {"_id": {"min": 100.0, "max": 160.0}, "count": 4},
            doc! {"_id": {"min": 160.0, "max": 180.0}, "count": 1},
        ]
    );
    c.insert_one(doc! {"v": -1}).await.unwrap();
    let err = agg_err(
        &db,
        "c",
        vec![doc! {"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "E6"}}],
    )
    .await;
    assert_eq!(err, 40260);

    let d = db.collection::<Document>("d");
    // 2024-01-31 and 2024-05-01, UTC.
    d.insert_many(vec![
        doc! {"t": DateTime::from_millis(1_706_659_200_000)},
        doc! {"t": DateTime::from_millis(1_714_521_600_000)},
    ])
    .await
    .unwrap();
    let filled = collect(
        d.aggregate(vec![
            doc! {"$densify": {"field": "t", "range": {"step": 1, "unit": "month", "bounds": "full"}}},
            doc! {"$project": {"_id": 0, "t": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    let days: Vec<i64> = filled
        .iter()
        .filter_map(|x| x.get_datetime("t").ok().map(|t| t.timestamp_millis()))
        .collect();
    // Jan 31, Feb 29, Mar 29, Apr 29, May 1.
    assert_eq!(
        days,
        vec![
            1_706_659_200_000,
            1_709_164_800_000,
            1_711_670_400_000,
            1_714_348_800_000,
            1_714_521_600_000
        ]
    );
}
