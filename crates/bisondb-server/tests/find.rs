//! Queries: filter operators, dotted paths through arrays, projection, sort across
//! types, skip/limit, and cursor mechanics (batch sizes, getMore, singleBatch,
//! killCursors) checked on the raw `find`/`getMore` replies.

use crate::common::*;
use bson::{doc, oid::ObjectId, Bson, DateTime, Document, Regex};
use mongodb::{Collection, Database};

fn ids(docs: &[Document]) -> Vec<i64> {
    docs.iter()
        .map(|d| match d.get("_id") {
            Some(Bson::Int32(n)) => i64::from(*n),
            Some(Bson::Int64(n)) => *n,
            other => panic!("non-integer _id {other:?}"),
        })
        .collect()
}

async fn fixture(coll: &Collection<Document>) {
    coll.insert_many(vec![
        doc! {"_id": 1, "a": 1, "b": "x", "tags": ["red", "blue"], "n": {"v": 5}, "arr": [{"k": 1, "v": "a"}, {"k": 2, "v": "b"}]},
        doc! {"_id": 2, "a": 2, "b": "y", "tags": ["red"], "n": {"v": 10}, "arr": [{"k": 3, "v": "c"}]},
        doc! {"_id": 3, "a": 3, "b": "xyz", "tags": [], "n": {"v": 15}, "c": Bson::Null},
        doc! {"_id": 4, "a": "3", "tags": ["blue", "green", "red"], "arr": [{"k": 1, "v": "z"}]},
        doc! {"_id": 5, "a": 4.5, "b": "X"},
    ])
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn filter_operators() {
    let ts = start().await;
    let cases: Vec<(Document, Vec<i64>)> = vec![
        (doc! {"a": 2}, vec![2]),
        (doc! {"a": {"$eq": 2}}, vec![2]),
        (doc! {"a": {"$eq": 2.0}}, vec![2]),
        (doc! {"a": {"$ne": 2}}, vec![1, 3, 4, 5]),
        // Comparisons stay within a type bracket: the string "3" never matches $gt: 2.
        (doc! {"a": {"$gt": 2}}, vec![3, 5]),
        (doc! {"a": {"$gte": 2}}, vec![2, 3, 5]),
        (doc! {"a": {"$lt": 2}}, vec![1]),
        (doc! {"a": {"$lte": 3}}, vec![1, 2, 3]),
        (doc! {"a": {"$gt": "2"}}, vec![4]),
        (doc! {"a": {"$in": [1, "3", 9]}}, vec![1, 4]),
        (doc! {"a": {"$nin": [1, 2, 3]}}, vec![4, 5]),
        (
            doc! {"$and": [{"a": {"$gt": 1}}, {"a": {"$lt": 4}}]},
            vec![2, 3],
        ),
        (doc! {"$or": [{"a": 1}, {"b": "y"}]}, vec![1, 2]),
        (doc! {"$nor": [{"a": 1}, {"b": "y"}]}, vec![3, 4, 5]),
        (doc! {"a": {"$not": {"$gt": 2}}}, vec![1, 2, 4]),
        (doc! {"c": {"$exists": true}}, vec![3]),
        (doc! {"b": {"$exists": false}}, vec![4]),
        (doc! {"c": Bson::Null}, vec![1, 2, 3, 4, 5]),
        (doc! {"a": {"$type": "string"}}, vec![4]),
        (doc! {"a": {"$type": "double"}}, vec![5]),
        (doc! {"a": {"$type": "number"}}, vec![1, 2, 3, 5]),
        (doc! {"a": {"$type": 16}}, vec![1, 2, 3]),
        (doc! {"b": {"$regex": "^x"}}, vec![1, 3]),
        (doc! {"b": {"$regex": "^x", "$options": "i"}}, vec![1, 3, 5]),
        (
            doc! {"b": Regex { pattern: "z$".to_string().try_into().unwrap(), options: String::new().try_into().unwrap() }},
            vec![3],
        ),
        (doc! {"tags": "red"}, vec![1, 2, 4]),
        (doc! {"tags": {"$all": ["red", "blue"]}}, vec![1, 4]),
        (doc! {"tags": {"$size": 0}}, vec![3]),
        (doc! {"tags": {"$size": 2}}, vec![1]),
        (doc! {"tags": ["red"]}, vec![2]),
        (doc! {"arr": {"$elemMatch": {"k": 1, "v": "z"}}}, vec![4]),
        (doc! {"arr": {"$elemMatch": {"k": {"$gte": 2}}}}, vec![1, 2]),
        // Without $elemMatch the two conditions may match different elements.
        (doc! {"arr.k": 1, "arr.v": "b"}, vec![1]),
        (doc! {"arr.k": 1}, vec![1, 4]),
        (doc! {"arr.v": "c"}, vec![2]),
        (doc! {"arr.0.k": 3}, vec![2]),
        (doc! {"tags.1": "blue"}, vec![1]),
        (doc! {"n.v": {"$gt": 7}}, vec![2, 3]),
        (doc! {"n.v": {"$in": [5, 15]}}, vec![1, 3]),
    ];
    for (t, client) in ts.clients() {
        let coll = client.database("flt").collection::<Document>(t);
        fixture(&coll).await;
        for (filter, want) in &cases {
            let got = collect(
                coll.find(filter.clone())
                    .sort(doc! {"_id": 1})
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(&ids(&got), want, "{t}: filter {filter}");
            let n = count(&coll, filter.clone()).await;
            assert_eq!(n as usize, want.len(), "{t}: count with {filter}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unknown_operators_fail_with_code_2() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("flt").collection::<Document>(t);
        fixture(&coll).await;
        let e = expect_code(coll.find(doc! {"a": {"$foo": 1}}).await, 2);
        assert!(
            error_message(&e).contains("unknown operator"),
            "{t}: {}",
            error_message(&e)
        );
        assert!(
            error_message(&e).contains("$foo"),
            "{t}: {}",
            error_message(&e)
        );
        assert_eq!(error_code_name(&e).as_deref(), Some("BadValue"));

        let e = expect_code(coll.find(doc! {"$bar": [{"a": 1}]}).await, 2);
        assert!(
            error_message(&e).contains("$bar"),
            "{t}: {}",
            error_message(&e)
        );
        // Still usable.
        assert_eq!(count(&coll, doc! {}).await, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn projection_inclusion_exclusion_and_mixing() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("proj").collection::<Document>(t);
        fixture(&coll).await;
        let one = |p: Document| coll.find_one(doc! {"_id": 1}).projection(p);

        let d = one(doc! {"a": 1}).await.unwrap().unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": 1}, "{t}");
        let d = one(doc! {"a": 1, "_id": 0}).await.unwrap().unwrap();
        assert_eq!(d, doc! {"a": 1}, "{t}");
        let d = one(doc! {"n.v": 1}).await.unwrap().unwrap();
        assert_eq!(d, doc! {"_id": 1, "n": {"v": 5}}, "{t}");
        let d = one(doc! {"arr.k": 1, "_id": 0}).await.unwrap().unwrap();
        assert_eq!(
            d,
            doc! {"arr": [{"k": 1}, {"k": 2}]},
            "{t}: dotted inclusion through an array"
        );
        let d = one(doc! {"tags": 0, "arr": 0, "n": 0})
            .await
            .unwrap()
            .unwrap();
        assert_eq!(d, doc! {"_id": 1, "a": 1, "b": "x"}, "{t}");
        let d = one(doc! {"_id": 0}).await.unwrap().unwrap();
        assert!(!d.contains_key("_id") && d.contains_key("tags"), "{t}: {d}");

        let e = expect_code(
            coll.find(doc! {}).projection(doc! {"a": 1, "b": 0}).await,
            31254,
        );
        assert!(
            error_message(&e).contains('b'),
            "{t}: {}",
            error_message(&e)
        );
        expect_code(
            coll.find(doc! {}).projection(doc! {"a": 0, "b": 1}).await,
            31253,
        );
        // _id may be excluded from an inclusion projection.
        let all = collect(
            coll.find(doc! {})
                .projection(doc! {"_id": 0, "b": 1})
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(all.len(), 5);
        assert_eq!(all[3], doc! {}, "{t}: doc without b projects to empty");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_multi_key_and_mixed_types() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("sort").collection::<Document>(t);
        let oid = ObjectId::parse_str("650000000000000000000000").unwrap();
        coll.insert_many(vec![
            doc! {"_id": 1, "v": "b", "g": 1},
            doc! {"_id": 2, "v": 3, "g": 2},
            doc! {"_id": 3, "v": Bson::Null, "g": 1},
            doc! {"_id": 4, "g": 2},
            doc! {"_id": 5, "v": true, "g": 1},
            doc! {"_id": 6, "v": {"x": 1}, "g": 2},
            doc! {"_id": 7, "v": 1.5, "g": 1},
            doc! {"_id": 8, "v": "a", "g": 2},
            doc! {"_id": 9, "v": oid, "g": 1},
            doc! {"_id": 10, "v": DateTime::from_millis(0), "g": 2},
            doc! {"_id": 11, "v": [5, 0.5], "g": 1},
        ])
        .await
        .unwrap();
        // null/missing < numbers < strings < objects < ObjectId < bool < date;
        // an array sorts by its smallest element ascending, its largest descending.
        let asc = collect(
            coll.find(doc! {})
                .sort(doc! {"v": 1, "_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&asc), vec![3, 4, 11, 7, 2, 8, 1, 6, 9, 5, 10], "{t}");
        let desc = collect(
            coll.find(doc! {})
                .sort(doc! {"v": -1, "_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&desc), vec![10, 5, 9, 6, 1, 8, 11, 2, 7, 3, 4], "{t}");

        let multi = collect(
            coll.find(doc! {})
                .sort(doc! {"g": -1, "_id": -1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&multi), vec![10, 8, 6, 4, 2, 11, 9, 7, 5, 3, 1], "{t}");

        let page = collect(
            coll.find(doc! {})
                .sort(doc! {"_id": 1})
                .skip(3)
                .limit(4)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&page), vec![4, 5, 6, 7], "{t}");
        let tail = collect(
            coll.find(doc! {})
                .sort(doc! {"_id": 1})
                .skip(9)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&tail), vec![10, 11], "{t}");
        let none = collect(coll.find(doc! {}).skip(50).await.unwrap()).await;
        assert!(none.is_empty(), "{t}");
    }
}

fn cursor_of(reply: &Document) -> (i64, usize, String) {
    let c = reply
        .get_document("cursor")
        .unwrap_or_else(|_| panic!("no cursor in {reply}"));
    let batch = c
        .get_array("firstBatch")
        .or_else(|_| c.get_array("nextBatch"))
        .unwrap();
    (
        c.get_i64("id").unwrap(),
        batch.len(),
        c.get_str("ns").unwrap().to_string(),
    )
}

async fn thousand(db: &Database, name: &str) {
    let docs: Vec<Document> = (0..1000).map(|i| doc! {"_id": i, "pad": "p"}).collect();
    db.collection::<Document>(name)
        .insert_many(docs)
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_find_default_batch_and_many_get_mores() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("cur");
        thousand(&db, t).await;

        let r = run(&db, doc! {"find": t, "filter": {}}).await;
        let (id, first, ns) = cursor_of(&r);
        assert_eq!(first, 101, "{t}: default first batch");
        assert_ne!(id, 0);
        assert_eq!(ns, format!("cur.{t}"));

        let mut total = first;
        let mut batches = 0;
        loop {
            let r = run(&db, doc! {"getMore": id, "collection": t, "batchSize": 7}).await;
            let (next_id, n, _) = cursor_of(&r);
            batches += 1;
            total += n;
            if next_id == 0 {
                assert_eq!(n, 899 % 7, "{t}: last batch");
                break;
            }
            assert_eq!(next_id, id, "{t}: the cursor id is stable");
            assert_eq!(n, 7, "{t}: batch {batches}");
            assert!(batches < 200, "runaway cursor");
        }
        assert_eq!(total, 1000, "{t}");
        assert_eq!(batches, 899 / 7 + 1, "{t}");
        // Exhausted cursors are gone.
        expect_code(
            db.run_command(doc! {"getMore": id, "collection": t}).await,
            43,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_find_batch_size_then_unbounded_get_more() {
    let ts = start().await;
    let db = ts.unix.database("cur");
    thousand(&db, "c").await;
    let r = run(&db, doc! {"find": "c", "batchSize": 7, "sort": {"_id": -1}}).await;
    let (id, n, _) = cursor_of(&r);
    assert_eq!(n, 7);
    let first = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert!(is_num(
        first[0].as_document().unwrap().get("_id").unwrap(),
        999.0
    ));
    let r = run(&db, doc! {"getMore": id, "collection": "c"}).await;
    let (id2, n, _) = cursor_of(&r);
    assert_eq!(
        (id2, n),
        (0, 993),
        "a getMore without batchSize returns the rest"
    );

    // batchSize 0 opens a cursor with an empty first batch.
    let r = run(&db, doc! {"find": "c", "batchSize": 0}).await;
    let (id, n, _) = cursor_of(&r);
    assert_eq!(n, 0);
    assert_ne!(id, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_cursor_with_small_batches() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("cur");
        thousand(&db, t).await;
        let coll = db.collection::<Document>(t);
        let docs = collect(
            coll.find(doc! {"_id": {"$gte": 10}})
                .sort(doc! {"_id": 1})
                .batch_size(7)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(docs.len(), 990, "{t}");
        let want: Vec<i64> = (10..1000).collect();
        assert_eq!(ids(&docs), want, "{t}");
        let limited = collect(
            coll.find(doc! {})
                .sort(doc! {"_id": 1})
                .batch_size(3)
                .limit(10)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&limited), (0..10).collect::<Vec<i64>>(), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn single_batch_and_limit_close_the_cursor() {
    let ts = start().await;
    let db = ts.tcp.database("cur");
    thousand(&db, "c").await;
    let r = run(&db, doc! {"find": "c", "batchSize": 5, "singleBatch": true}).await;
    assert_eq!(cursor_of(&r), (0, 5, "cur.c".to_string()));

    let r = run(&db, doc! {"find": "c", "limit": 5, "batchSize": 2}).await;
    let (id, n, _) = cursor_of(&r);
    assert_eq!(n, 2);
    let r = run(&db, doc! {"getMore": id, "collection": "c", "batchSize": 2}).await;
    assert_eq!(cursor_of(&r).1, 2);
    let r = run(&db, doc! {"getMore": id, "collection": "c", "batchSize": 2}).await;
    let (id_last, n, _) = cursor_of(&r);
    assert_eq!(
        (id_last, n),
        (0, 1),
        "limit 5 ends the cursor after 5 documents"
    );

    let r = run(&db, doc! {"find": "c", "limit": 3}).await;
    assert_eq!(
        cursor_of(&r).0,
        0,
        "a limit that fits in the first batch closes the cursor"
    );
    assert_eq!(cursor_of(&r).1, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_cursors_then_get_more_fails_43() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("kc");
        thousand(&db, t).await;
        let r = run(&db, doc! {"find": t, "batchSize": 2}).await;
        let (id, _, _) = cursor_of(&r);
        assert_ne!(id, 0);
        let missing = 123_456_789i64;
        let k = run(&db, doc! {"killCursors": t, "cursors": [id, missing]}).await;
        assert_eq!(
            k.get_array("cursorsKilled").unwrap(),
            &vec![Bson::Int64(id)],
            "{t}: {k}"
        );
        assert_eq!(
            k.get_array("cursorsNotFound").unwrap(),
            &vec![Bson::Int64(missing)],
            "{t}: {k}"
        );
        assert!(k.get_array("cursorsAlive").unwrap().is_empty());

        let e = expect_code(
            db.run_command(doc! {"getMore": id, "collection": t}).await,
            43,
        );
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("CursorNotFound"),
            "{t}"
        );
        // The connection survives the error.
        let r = run(&db, doc! {"find": t, "batchSize": 1}).await;
        assert_eq!(cursor_of(&r).1, 1);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_on_missing_collection_is_empty() {
    let ts = start().await;
    let db = ts.tcp.database("nothing");
    let r = db.run_command(doc! {"find": "absent"}).await.unwrap();
    assert_eq!(cursor_of(&r), (0, 0, "nothing.absent".to_string()));
    let none = db
        .collection::<Document>("absent")
        .find_one(doc! {})
        .await
        .unwrap();
    assert!(none.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_more_on_another_collection_is_refused() {
    let ts = start().await;
    let db = ts.tcp.database("cur");
    thousand(&db, "a").await;
    let r = run(&db, doc! {"find": "a", "batchSize": 2}).await;
    let (id, _, _) = cursor_of(&r);
    let e = expect_code(
        db.run_command(doc! {"getMore": id, "collection": "b"})
            .await,
        13,
    );
    assert!(error_message(&e).contains("cur.a"), "{}", error_message(&e));
    // The refused getMore leaves the cursor usable from its own collection.
    let r = run(&db, doc! {"getMore": id, "collection": "a", "batchSize": 3}).await;
    let (same, n, _) = cursor_of(&r);
    assert_eq!((same, n), (id, 3));
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap();
    assert!(
        is_num(batch[0].as_document().unwrap().get("_id").unwrap(), 2.0),
        "continues after the first batch"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_filter_shapes() {
    let ts = start().await;
    let coll = ts.unix.database("flt").collection::<Document>("more");
    fixture(&coll).await;
    let re = |p: &str| {
        Bson::RegularExpression(Regex {
            pattern: p.to_string().try_into().unwrap(),
            options: String::new().try_into().unwrap(),
        })
    };
    let cases: Vec<(Document, Vec<i64>)> = vec![
        (doc! {"tags": {"$elemMatch": {"$eq": "green"}}}, vec![4]),
        (doc! {"b": {"$in": [re("^xy"), "y"]}}, vec![2, 3]),
        (doc! {"b": {"$not": re("^x")}}, vec![2, 4, 5]),
        (doc! {"tags": {"$all": []}}, vec![]),
        (doc! {"arr": {"$size": 1}}, vec![2, 4]),
        (doc! {"n": {"v": 10}}, vec![2]),
        (doc! {"n": {"v": 10, "w": 1}}, vec![]),
        (
            doc! {"_id": {"$gt": 2}, "a": {"$type": ["string", "double"]}},
            vec![4, 5],
        ),
        (doc! {"arr.k": {"$gt": 1, "$lt": 3}}, vec![1]),
        (doc! {"tags": {"$exists": true, "$ne": []}}, vec![1, 2, 4]),
        (
            doc! {"$and": [{"$or": [{"a": 1}, {"a": 2}]}, {"$or": [{"b": "y"}, {"b": "z"}]}]},
            vec![2],
        ),
    ];
    for (filter, want) in &cases {
        let got = collect(
            coll.find(filter.clone())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(&ids(&got), want, "filter {filter}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_schema_filters() {
    let ts = start().await;
    let strict = doc! {"$jsonSchema": {
        "required": ["b"],
        "properties": {
            "a": {"bsonType": "number", "minimum": 2},
            "b": {"bsonType": "string", "pattern": "^x"},
        },
    }};
    let cases: Vec<(Document, Vec<i64>)> = vec![
        (strict.clone(), vec![3]),
        // A missing property is fine; nested schemas only constrain objects.
        (
            doc! {"$jsonSchema": {"properties": {"n": {
                "bsonType": "object", "properties": {"v": {"maximum": 10}}
            }}}},
            vec![1, 2, 4, 5],
        ),
        // Combined with another predicate (implicit AND) and inside $or.
        (
            doc! {"$jsonSchema": {"required": ["tags"]}, "a": {"$type": "number"}},
            vec![1, 2, 3],
        ),
        (
            doc! {"$or": [{"$jsonSchema": {"required": ["c"]}}, {"a": "3"}]},
            vec![3, 4],
        ),
        (
            doc! {"$jsonSchema": {"properties": {"tags": {"minItems": 2, "uniqueItems": true}}}},
            vec![1, 4, 5],
        ),
    ];
    for (t, client) in ts.clients() {
        let coll = client.database("flt").collection::<Document>(t);
        fixture(&coll).await;
        for (filter, want) in &cases {
            let got = collect(
                coll.find(filter.clone())
                    .sort(doc! {"_id": 1})
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(&ids(&got), want, "{t}: filter {filter}");
            let n = coll.count_documents(filter.clone()).await.unwrap();
            assert_eq!(n as usize, want.len(), "{t}: count_documents with {filter}");
            assert_eq!(count(&coll, filter.clone()).await as usize, want.len());
        }

        let e = expect_code(coll.find(doc! {"$jsonSchema": {"required": "b"}}).await, 14);
        assert_eq!(error_code_name(&e).as_deref(), Some("TypeMismatch"));
        assert!(
            error_message(&e).contains("'required' must be an array"),
            "{t}: {}",
            error_message(&e)
        );
        let e = expect_code(
            coll.count_documents(doc! {"$jsonSchema": {"minlength": 1}})
                .await,
            9,
        );
        assert_eq!(error_code_name(&e).as_deref(), Some("FailedToParse"));
        assert!(error_message(&e).contains("Unknown $jsonSchema keyword: minlength"));
        // Only a top-level operator.
        let e = expect_code(coll.find(doc! {"a": {"$jsonSchema": {}}}).await, 2);
        assert!(error_message(&e).contains("unknown operator: $jsonSchema"));
    }
}
