//! Query and expression operators beyond the core set, through the official
//! driver: `$sampleRate` in `find` and `$match`, `$median`/`$percentile` as
//! expressions (agreeing with the accumulators), `$toHashedIndexKey`
//! (mongod's value), and `{$meta: ...}` for `indexKey`, `sortKey` and the
//! metadata nothing here produces. Storage-backed (the index key comes from
//! a real index scan), so it runs on both engines.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Collection;

async fn seeded(s: &TestServer, name: &str, n: i32) -> Collection<Document> {
    let coll = s.tcp.database("ops_extra").collection::<Document>(name);
    coll.drop().await.unwrap();
    let docs: Vec<Document> = (0..n)
        .map(|i| doc! {"_id": i, "a": i % 10, "b": format!("s{i}"), "arr": [i, i + 1, i + 2]})
        .collect();
    coll.insert_many(docs).await.unwrap();
    coll
}

async fn aggregate(coll: &Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    collect(coll.aggregate(pipeline).await.unwrap()).await
}

#[tokio::test]
async fn sample_rate_in_find_and_match() {
    let s = start().await;
    let coll = seeded(&s, "sample", 1000).await;
    // 0 and 1 are exact; 0.5 keeps about half, drawn per document.
    let none = collect(coll.find(doc! {"$sampleRate": 0}).await.unwrap()).await;
    assert!(none.is_empty());
    let all = collect(coll.find(doc! {"$sampleRate": 1.0}).await.unwrap()).await;
    assert_eq!(all.len(), 1000);
    let half = collect(coll.find(doc! {"$sampleRate": 0.5}).await.unwrap()).await;
    assert!((350..650).contains(&half.len()), "{}", half.len());
    let r = aggregate(
        &coll,
        vec![
            doc! {"$match": {"a": {"$lt": 5}, "$sampleRate": 0.25}},
            doc! {"$count": "n"},
        ],
    )
    .await;
    let n = num(&r[0], "n");
    assert!((50..200).contains(&n), "{n}");
    assert!(r[0].get("n").is_some());
    // The count of a sampled filter is sampled too.
    let c = coll
        .count_documents(doc! {"$sampleRate": 0.1})
        .await
        .unwrap();
    assert!((30..200).contains(&c), "{c}");
    // mongod's errors.
    for (f, msg) in [
        (
            doc! {"$sampleRate": "x"},
            "argument to $sampleRate must be a numeric type",
        ),
        (
            doc! {"$sampleRate": 2},
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            doc! {"$sampleRate": -1.0},
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            doc! {"a": {"$sampleRate": 0.5}},
            "unknown operator: $sampleRate",
        ),
    ] {
        let e = expect_code(coll.find(f.clone()).await, 2);
        assert!(error_message(&e).contains(msg), "{f}: {e}");
    }
}

#[tokio::test]
async fn median_and_percentile_expressions_agree_with_accumulators() {
    let s = start().await;
    let coll = seeded(&s, "quantiles", 20).await;
    let r = aggregate(
        &coll,
        vec![
            doc! {"$match": {"_id": {"$lt": 3}}},
            doc! {"$project": {
                "m": {"$median": {"input": "$arr", "method": "approximate"}},
                "p": {"$percentile": {"input": "$arr", "p": [0.1, 1.0], "method": "approximate"}},
                "one": {"$median": {"input": "$a", "method": "approximate"}},
                "none": {"$percentile": {"input": "$b", "p": [0.5], "method": "approximate"}},
            }},
            doc! {"$sort": {"_id": 1}},
        ],
    )
    .await;
    assert_eq!(
        r,
        vec![
            doc! {"_id": 0, "m": 1.0, "p": [0.0, 2.0], "one": 0.0, "none": [Bson::Null]},
            doc! {"_id": 1, "m": 2.0, "p": [1.0, 3.0], "one": 1.0, "none": [Bson::Null]},
            doc! {"_id": 2, "m": 3.0, "p": [2.0, 4.0], "one": 2.0, "none": [Bson::Null]},
        ]
    );
    // The expression over a pushed array equals the accumulator over the group.
    let r = aggregate(
        &coll,
        vec![
            doc! {"$group": {
                "_id": null,
                "acc": {"$percentile": {"input": "$_id", "p": [0.25, 0.5, 0.9], "method": "approximate"}},
                "accm": {"$median": {"input": "$_id", "method": "approximate"}},
                "all": {"$push": "$_id"},
            }},
            doc! {"$project": {
                "_id": 0, "acc": 1, "accm": 1,
                "expr": {"$percentile": {"input": "$all", "p": [0.25, 0.5, 0.9], "method": "approximate"}},
                "exprm": {"$median": {"input": "$all", "method": "approximate"}},
            }},
        ],
    )
    .await;
    assert_eq!(r[0].get("acc"), r[0].get("expr"), "{:?}", r[0]);
    assert_eq!(r[0].get("accm"), r[0].get("exprm"), "{:?}", r[0]);
    assert_eq!(r[0].get("exprm"), Some(&Bson::Double(9.0)));
    // The accumulators' errors.
    for (e, code) in [
        (doc! {"$median": {"input": "$arr"}}, 40414),
        (doc! {"$median": {"input": "$arr", "method": "discrete"}}, 2),
        (
            doc! {"$percentile": {"input": "$arr", "p": [2], "method": "approximate"}},
            7750301,
        ),
    ] {
        let r = coll
            .aggregate(vec![doc! {"$project": {"x": e.clone()}}])
            .await;
        expect_code(r, code);
    }
}

#[tokio::test]
async fn to_hashed_index_key_is_mongods_hash() {
    let s = start().await;
    let coll = seeded(&s, "hashed", 1).await;
    let r = aggregate(
        &coll,
        vec![doc! {"$project": {
            "_id": 0,
            "h": {"$toHashedIndexKey": "string to hash"},
            "two": {"$toHashedIndexKey": 2},
            "twoish": {"$toHashedIndexKey": 2.7},
        }}],
    )
    .await;
    // The manual's example value.
    assert_eq!(r[0].get("h"), Some(&Bson::Int64(763_543_691_661_428_748)));
    assert_eq!(r[0].get("two"), r[0].get("twoish"));
}

#[tokio::test]
async fn meta_index_key_and_sort_key_in_find() {
    let s = start().await;
    let coll = seeded(&s, "meta", 5).await;
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"a": 1, "b": -1})
            .build(),
    )
    .await
    .unwrap();
    let db = s.tcp.database("ops_extra");
    let find = |cmd: Document| {
        let db = db.clone();
        async move {
            db.run_command(cmd).await.map(|r| {
                r.get_document("cursor")
                    .unwrap()
                    .get_array("firstBatch")
                    .unwrap()
                    .clone()
            })
        }
    };
    // indexKey: the key of the index scanned; left out of a collection scan.
    let b = find(
        doc! {"find": "meta", "filter": {"a": 1}, "hint": "a_1_b_-1",
        "projection": {"k": {"$meta": "indexKey"}}},
    )
    .await
    .unwrap();
    assert_eq!(
        b,
        vec![Bson::from(
            doc! {"_id": 1, "a": 1, "b": "s1", "arr": [1, 2, 3], "k": {"a": 1, "b": "s1"}}
        )]
    );
    let b = find(doc! {"find": "meta", "filter": {}, "projection": {"k": {"$meta": "indexKey"}}})
        .await
        .unwrap();
    assert_eq!(b.len(), 5);
    assert!(b
        .iter()
        .all(|d| d.as_document().unwrap().get("k").is_none()));
    // sortKey: the compared values, always an array.
    let b = find(
        doc! {"find": "meta", "filter": {"_id": {"$lt": 2}}, "sort": {"a": -1, "b": 1},
        "projection": {"b": 1, "s": {"$meta": "sortKey"}}},
    )
    .await
    .unwrap();
    assert_eq!(
        b,
        vec![
            Bson::from(doc! {"_id": 1, "b": "s1", "s": [1, "s1"]}),
            Bson::from(doc! {"_id": 0, "b": "s0", "s": [0, "s0"]}),
        ]
    );
    let b = find(
        doc! {"find": "meta", "filter": {"_id": 0}, "sort": {"arr": 1, "zz": 1},
        "projection": {"_id": 0, "s": {"$meta": "sortKey"}}},
    )
    .await
    .unwrap();
    // `_id: 0` with `$meta` is an exclusion: the rest of the document stays.
    assert_eq!(
        b,
        vec![Bson::from(
            doc! {"a": 0, "b": "s0", "arr": [0, 1, 2], "s": [0, Bson::Null]}
        )]
    );
    let e = expect_code(
        find(doc! {"find": "meta", "projection": {"s": {"$meta": "sortKey"}}}).await,
        2,
    );
    assert!(error_message(&e).contains("cannot use sortKey $meta projection without a sort"));
    // Atlas Search metadata and randVal never have a value here.
    let b = find(doc! {"find": "meta", "filter": {"_id": 0},
    "projection": {"b": 1, "x": {"$meta": "searchScore"}, "y": {"$meta": "randVal"}}})
    .await
    .unwrap();
    assert_eq!(b, vec![Bson::from(doc! {"_id": 0, "b": "s0"})]);
    let r = aggregate(
        &coll,
        vec![
            doc! {"$match": {"_id": 0}},
            doc! {"$project": {"a": 1, "x": {"$meta": "searchScore"}, "v": {"$meta": "vectorSearchScore"}}},
        ],
    )
    .await;
    assert_eq!(r, vec![doc! {"_id": 0, "a": 0}]);
    // What is still missing says so.
    expect_code(
        find(doc! {"find": "meta", "projection": {"r": {"$meta": "recordId"}}}).await,
        238,
    );
}
