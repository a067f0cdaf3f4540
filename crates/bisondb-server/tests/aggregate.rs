//! Counting, distinct and the aggregation pipeline through the driver.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Collection;

async fn sales(coll: &Collection<Document>) {
    coll.insert_many(vec![
        doc! {"_id": 1, "item": "apple", "qty": 5, "price": 1.0, "tags": ["fruit", "red"], "store": "n"},
        doc! {"_id": 2, "item": "pear", "qty": 2, "price": 2.0, "tags": ["fruit"], "store": "n"},
        doc! {"_id": 3, "item": "apple", "qty": 1, "price": 1.5, "tags": ["red"], "store": "s"},
        doc! {"_id": 4, "item": "kale", "qty": 7, "price": 3.0, "tags": [], "store": "s"},
        doc! {"_id": 5, "item": "pear", "qty": 4, "price": 2.5, "store": "s"},
    ])
    .await
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn count_documents_runs_an_aggregation() {
    // The driver's count_documents is a $match + $group pipeline.
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("agg").collection::<Document>(t);
        sales(&coll).await;
        assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 5, "{t}");
        assert_eq!(
            coll.count_documents(doc! {"item": "apple"}).await.unwrap(),
            2,
            "{t}"
        );
        assert_eq!(
            coll.count_documents(doc! {"qty": {"$gt": 100}})
                .await
                .unwrap(),
            0,
            "{t}"
        );
        let skipped = coll
            .count_documents(doc! {})
            .skip(1)
            .limit(3)
            .await
            .unwrap();
        assert_eq!(skipped, 3, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn estimated_count_distinct_and_count_command() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("agg").collection::<Document>(t);
        sales(&coll).await;
        assert_eq!(coll.estimated_document_count().await.unwrap(), 5, "{t}");

        let items = coll.distinct("item", doc! {}).await.unwrap();
        assert_eq!(
            items,
            vec![Bson::from("apple"), Bson::from("kale"), Bson::from("pear")],
            "{t}"
        );
        // Arrays are unwound, duplicates removed, values sorted.
        let tags = coll.distinct("tags", doc! {}).await.unwrap();
        assert_eq!(tags, vec![Bson::from("fruit"), Bson::from("red")], "{t}");
        let filtered = coll.distinct("qty", doc! {"store": "s"}).await.unwrap();
        assert_eq!(
            filtered,
            vec![Bson::Int32(1), Bson::Int32(4), Bson::Int32(7)],
            "{t}"
        );
        assert!(
            coll.distinct("nothing", doc! {}).await.unwrap().is_empty(),
            "{t}"
        );

        let raw = client
            .database("agg")
            .run_command(doc! {"count": t, "query": {"store": "n"}})
            .await
            .unwrap();
        assert_eq!(num(&raw, "n"), 2, "{t}: {raw}");
        let raw = client
            .database("agg")
            .run_command(doc! {"count": t, "skip": 1, "limit": 2})
            .await
            .unwrap();
        assert_eq!(num(&raw, "n"), 2, "{t}: {raw}");
        let missing = client
            .database("agg")
            .run_command(doc! {"count": "nope"})
            .await
            .unwrap();
        assert_eq!(num(&missing, "n"), 0, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_mixed_types_sorted_in_bson_order() {
    let ts = start().await;
    let coll = ts.unix.database("agg").collection::<Document>("mixed");
    coll.insert_many(vec![
        doc! {"v": "b"},
        doc! {"v": 2},
        doc! {"v": 2.0},
        doc! {"v": [1, "a", 2]},
        doc! {"v": Bson::Null},
        doc! {"x": 1},
    ])
    .await
    .unwrap();
    let got = coll.distinct("v", doc! {}).await.unwrap();
    assert_eq!(got.len(), 5, "null, 1, 2 (once), a, b: {got:?}");
    assert_eq!(got[0], Bson::Null);
    assert!(is_num(&got[1], 1.0) && is_num(&got[2], 2.0), "{got:?}");
    assert_eq!(&got[3..], &[Bson::from("a"), Bson::from("b")], "{got:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pipeline_stages() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("agg").collection::<Document>(t);
        sales(&coll).await;

        let grouped = collect(
            coll.aggregate(vec![
                doc! {"$match": {"qty": {"$gte": 2}}},
                doc! {"$group": {
                    "_id": "$item",
                    "total": {"$sum": "$qty"},
                    "n": {"$sum": 1},
                    "avg": {"$avg": "$price"},
                    "lo": {"$min": "$price"},
                    "hi": {"$max": "$price"},
                    "stores": {"$push": "$store"},
                    "uniq": {"$addToSet": "$store"},
                }},
                doc! {"$sort": {"_id": 1}},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            field(&grouped, "_id"),
            vec![Bson::from("apple"), Bson::from("kale"), Bson::from("pear")],
            "{t}"
        );
        let pear = &grouped[2];
        assert!(is_num(pear.get("total").unwrap(), 6.0), "{t}: {pear}");
        assert!(is_num(pear.get("n").unwrap(), 2.0), "{t}: {pear}");
        assert_eq!(float(pear, "avg"), 2.25, "{t}: {pear}");
        assert_eq!(
            (float(pear, "lo"), float(pear, "hi")),
            (2.0, 2.5),
            "{t}: {pear}"
        );
        assert_eq!(
            pear.get_array("stores").unwrap(),
            &vec![Bson::from("n"), Bson::from("s")],
            "{t}: {pear}"
        );
        assert_eq!(pear.get_array("uniq").unwrap().len(), 2, "{t}: {pear}");
        let apple = &grouped[0];
        assert!(
            is_num(apple.get("total").unwrap(), 5.0),
            "{t}: qty 1 filtered out: {apple}"
        );

        let shaped = collect(
            coll.aggregate(vec![
                doc! {"$project": {"item": 1, "qty": 1, "_id": 0}},
                doc! {"$addFields": {"double": {"$multiply": ["$qty", 2]}}},
                doc! {"$sort": {"qty": -1}},
                doc! {"$skip": 1},
                doc! {"$limit": 2},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            shaped,
            vec![
                doc! {"item": "apple", "qty": 5, "double": 10},
                doc! {"item": "pear", "qty": 4, "double": 8}
            ],
            "{t}"
        );

        let unwound = collect(
            coll.aggregate(vec![
                doc! {"$unwind": "$tags"},
                doc! {"$sort": {"_id": 1, "tags": 1}},
                doc! {"$project": {"tags": 1}},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            unwound.len(),
            4,
            "{t}: empty and missing arrays produce nothing: {unwound:?}"
        );
        assert_eq!(unwound[0], doc! {"_id": 1, "tags": "fruit"}, "{t}");
        assert_eq!(unwound[1], doc! {"_id": 1, "tags": "red"}, "{t}");

        let counted = collect(
            coll.aggregate(vec![
                doc! {"$match": {"store": "s"}},
                doc! {"$count": "howMany"},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(counted.len(), 1);
        assert!(
            is_num(counted[0].get("howMany").unwrap(), 3.0),
            "{t}: {counted:?}"
        );

        let total = collect(
            coll.aggregate(vec![
                doc! {"$group": {"_id": Bson::Null, "q": {"$sum": "$qty"}}},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(total.len(), 1);
        assert!(is_num(total[0].get("q").unwrap(), 19.0), "{t}: {total:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aggregate_cursor_batches_and_unknown_stage() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("agg");
        let coll = db.collection::<Document>(t);
        coll.insert_many((0..250).map(|i| doc! {"_id": i}))
            .await
            .unwrap();
        let all = collect(
            coll.aggregate(vec![doc! {"$sort": {"_id": -1}}])
                .batch_size(30)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(all.len(), 250, "{t}");
        assert!(is_num(all[0].get("_id").unwrap(), 249.0));

        let r = db
            .run_command(doc! {"aggregate": t, "pipeline": [], "cursor": {}})
            .await
            .unwrap();
        let c = r.get_document("cursor").unwrap();
        assert_eq!(
            c.get_array("firstBatch").unwrap().len(),
            101,
            "{t}: default first batch"
        );
        assert_ne!(c.get_i64("id").unwrap(), 0);

        let e = expect_code(coll.aggregate(vec![doc! {"$frobnicate": {}}]).await, 40324);
        assert!(
            error_message(&e).contains("$frobnicate"),
            "{t}: {}",
            error_message(&e)
        );
        assert_eq!(
            coll.count_documents(doc! {}).await.unwrap(),
            250,
            "{t}: client still works"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_and_merge_write_their_targets() {
    let ts = start().await;
    let db = ts.tcp.database("aggout");
    let coll = db.collection::<Document>("sales");
    sales(&coll).await;
    let target = db.collection::<Document>("totals");
    target.insert_one(doc! {"_id": "stale"}).await.unwrap();
    let group = doc! {"$group": {"_id": "$item", "qty": {"$sum": "$qty"}}};
    let out: Vec<Document> = collect(
        coll.aggregate(vec![group.clone(), doc! {"$out": "totals"}])
            .await
            .unwrap(),
    )
    .await;
    assert!(out.is_empty(), "$out returns no documents");
    let mut totals = collect(target.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
    assert_eq!(
        totals,
        vec![
            doc! {"_id": "apple", "qty": 6},
            doc! {"_id": "kale", "qty": 7},
            doc! {"_id": "pear", "qty": 6},
        ],
        "$out replaced the target, dropping the stale document"
    );

    // $merge with the defaults: replace-merge matches, insert the others.
    let merge = doc! {"$merge": {"into": "totals", "whenMatched": "merge"}};
    let extra = doc! {"$project": {"_id": "$item", "price": 1}};
    let pipeline = vec![doc! {"$match": {"_id": {"$in": [1, 4]}}}, extra, merge];
    collect(coll.aggregate(pipeline).await.unwrap()).await;
    totals = collect(target.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
    assert_eq!(totals[0], doc! {"_id": "apple", "qty": 6, "price": 1.0});
    assert_eq!(totals[1], doc! {"_id": "kale", "qty": 7, "price": 3.0});

    // whenMatched: fail is a DuplicateKey error.
    let fail = doc! {"$merge": {"into": "totals", "whenMatched": "fail"}};
    let err = coll
        .aggregate(vec![doc! {"$project": {"_id": "$item"}}, fail])
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), Some(11000));
    // mongod's reply names the matched document by its `on` fields.
    let reply = db
        .run_command(doc! {
            "aggregate": coll.name(),
            "pipeline": [{"$project": {"_id": "$item"}}, {"$merge": {"into": "totals", "whenMatched": "fail"}}],
            "cursor": {},
        })
        .await
        .unwrap_err();
    let raw = match *reply.kind {
        mongodb::error::ErrorKind::Command(ref c) => c.clone(),
        ref other => panic!("not a command error: {other:?}"),
    };
    assert_eq!(raw.code, 11000);
    let server = reply
        .server_response()
        .and_then(|r| bson::Document::try_from(r).ok())
        .unwrap_or_default();
    assert_eq!(
        server.get_document("keyPattern").ok(),
        Some(&doc! {"_id": 1})
    );
    assert!(server.get_document("keyValue").is_ok(), "{server}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_let_reaches_expr_and_pipelines() {
    let ts = start().await;
    let db = ts.tcp.database("agglet");
    let coll = db.collection::<Document>("sales");
    sales(&coll).await;
    let found = collect(
        coll.find(doc! {"$expr": {"$eq": ["$item", "$$wanted"]}})
            .let_vars(doc! {"wanted": "pear"})
            .sort(doc! {"_id": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(found.len(), 2);
    let agg = collect(
        coll.aggregate(vec![
            doc! {"$match": {"$expr": {"$gte": ["$qty", "$$min.qty"]}}},
            doc! {"$project": {"_id": 1, "tag": "$$label"}},
        ])
        .let_vars(doc! {"min": {"qty": 5}, "label": {"$concat": ["b", "ig"]}})
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        agg,
        vec![doc! {"_id": 1, "tag": "big"}, doc! {"_id": 4, "tag": "big"}]
    );
    let r = coll
        .update_many(
            doc! {"$expr": {"$eq": ["$store", "$$s"]}},
            vec![doc! {"$set": {"seen": "$$s"}}],
        )
        .let_vars(doc! {"s": "n"})
        .await
        .unwrap();
    assert_eq!(r.modified_count, 2);
    let err = coll
        .find(doc! {})
        .let_vars(doc! {"Bad": 1})
        .await
        .unwrap_err();
    assert_eq!(error_code(&err), Some(16870));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collectionless_aggregate_runs_documents() {
    let ts = start().await;
    let db = ts.tcp.database("aggdocs");
    let docs = collect(
        db.aggregate(vec![
            doc! {"$documents": [{"x": 1}, {"x": 2}]},
            doc! {"$match": {"x": 2}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(docs, vec![doc! {"x": 2}]);
    let err = db.aggregate(vec![doc! {"$match": {}}]).await.unwrap_err();
    assert_eq!(error_code(&err), Some(73));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn named_time_zones_in_date_expressions() {
    use bson::DateTime;
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("aggtz").collection::<Document>(t);
        coll.insert_many(vec![
            // 2021-03-14T15:00Z is 11:00 EDT, the day New York springs forward.
            doc! {"_id": 1, "d": DateTime::from_millis(1_615_734_000_000)},
            // 2021-11-07T12:00Z is 07:00 EST, the day it falls back.
            doc! {"_id": 2, "d": DateTime::from_millis(1_636_286_400_000)},
        ])
        .await
        .unwrap();
        let out = collect(
            coll.aggregate(vec![
                doc! {"$sort": {"_id": 1}},
                doc! {"$project": {
                    "s": {"$dateToString": {"date": "$d", "format": "%Y-%m-%d %H:%M", "timezone": "America/New_York"}},
                    "day": {"$dateTrunc": {"date": "$d", "unit": "day", "timezone": "America/New_York"}},
                }},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            out,
            vec![
                // Local midnight was still EST (05:00Z) on the 14th ...
                doc! {"_id": 1, "s": "2021-03-14 11:00", "day": DateTime::from_millis(1_615_698_000_000)},
                // ... and still EDT (04:00Z) on the 7th.
                doc! {"_id": 2, "s": "2021-11-07 07:00", "day": DateTime::from_millis(1_636_257_600_000)},
            ],
            "{t}"
        );
        let e = expect_code(
            coll.aggregate(vec![doc! {"$project": {
                "h": {"$hour": {"date": "$d", "timezone": "Mars/Olympus"}},
            }}])
            .await,
            40485,
        );
        assert!(
            error_message(&e).contains("unrecognized time zone identifier: \"Mars/Olympus\""),
            "{t}: {}",
            error_message(&e)
        );
    }
}

async fn collect(c: mongodb::Cursor<Document>) -> Vec<Document> {
    use futures::TryStreamExt;
    c.try_collect().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_local_sessions_shows_the_sessions_in_use() {
    let ts = start().await;
    let db = ts.tcp.database("sess");
    let mut session = ts.tcp.start_session().await.unwrap();
    db.run_command(doc! {"ping": 1})
        .session(&mut session)
        .await
        .unwrap();
    let mine = session.id().get("id").cloned();
    let listed: Vec<Document> = collect(
        db.aggregate(vec![doc! {"$listLocalSessions": {}}])
            .await
            .unwrap(),
    )
    .await;
    let ids: Vec<Option<Bson>> = listed
        .iter()
        .map(|d| {
            d.get_document("_id")
                .ok()
                .and_then(|i| i.get("id").cloned())
        })
        .collect();
    assert!(ids.contains(&mine), "{listed:?} lacks {mine:?}");
    assert!(listed.iter().all(|d| d.get_datetime("lastUse").is_ok()));
    // A collection namespace or an unknown option is refused.
    expect_code(
        db.run_command(
            doc! {"aggregate": "c", "pipeline": [{"$listLocalSessions": {}}], "cursor": {}},
        )
        .await,
        73,
    );
    expect_code(
        db.run_command(
            doc! {"aggregate": 1, "pipeline": [{"$listLocalSessions": {"bogus": 1}}], "cursor": {}},
        )
        .await,
        40415,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_first_pipelines_read_only_the_fields_they_name() {
    // A pipeline starting with $group gets documents holding only the fields
    // its key and accumulators name; $$ROOT, dotted paths and $top's sortBy
    // must still see what they read, and a leading $match (applied by the
    // scan) still filters.
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("agg").collection::<Document>(t);
        sales(&coll).await;
        coll.insert_one(
            doc! {"_id": 6, "item": "fig", "qty": 3, "price": 4.0, "store": "n", "meta": {"w": 9}},
        )
        .await
        .unwrap();
        let run = |pipeline: Vec<Document>| {
            let coll = coll.clone();
            async move {
                let mut cursor = coll.aggregate(pipeline).await.unwrap();
                let mut out = Vec::new();
                while cursor.advance().await.unwrap() {
                    out.push(cursor.deserialize_current().unwrap());
                }
                out
            }
        };
        let by_store = run(vec![
            doc! {"$match": {"qty": {"$gte": 2}}},
            doc! {"$group": {"_id": "$store", "n": {"$sum": 1}, "qty": {"$sum": "$qty"},
            "hi": {"$max": "$price"}, "w": {"$max": "$meta.w"}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await;
        assert_eq!(
            by_store,
            vec![
                doc! {"_id": "n", "n": 3, "qty": 10, "hi": 4.0, "w": 9},
                doc! {"_id": "s", "n": 2, "qty": 11, "hi": 3.0, "w": Bson::Null},
            ],
            "{t}"
        );
        let whole = run(vec![
            doc! {"$match": {"item": "pear"}},
            doc! {"$group": {"_id": null, "docs": {"$push": "$$ROOT"}}},
        ])
        .await;
        let docs = whole[0].get_array("docs").unwrap();
        assert_eq!(docs.len(), 2, "{t}");
        assert_eq!(
            docs[0].as_document().unwrap(),
            &doc! {"_id": 2, "item": "pear", "qty": 2, "price": 2.0, "tags": ["fruit"], "store": "n"},
            "{t}"
        );
        let top = run(vec![
            doc! {"$group": {"_id": "$store",
            "best": {"$top": {"sortBy": {"qty": -1}, "output": "$item"}}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await;
        assert_eq!(
            top,
            vec![
                doc! {"_id": "n", "best": "apple"},
                doc! {"_id": "s", "best": "kale"}
            ],
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn a_long_aggregation_does_not_hold_up_other_connections() {
    // One runtime worker: a command that kept it busy would stall every other
    // connection (and drivers' heartbeats) until it finished. A ping sent
    // while a long aggregation runs must come back before it does.
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let ts = start().await;
    let coll = ts.tcp.database("agg").collection::<Document>("long");
    let docs: Vec<Document> = (0..1000).map(|n| doc! {"n": n}).collect();
    coll.insert_many(docs).await.unwrap();
    let finished = Arc::new(AtomicBool::new(false));
    let agg = {
        let (coll, finished) = (coll.clone(), finished.clone());
        tokio::spawn(async move {
            // 1000 x 1000 $expr evaluations: seconds, not milliseconds.
            let pipeline = vec![
                doc! {"$lookup": {"from": "long", "as": "j", "let": {"x": "$n"}, "pipeline": [
                    {"$match": {"$expr": {"$gte": [{"$add": ["$n", "$$x"]}, 0]}}},
                    {"$count": "c"},
                ]}},
                doc! {"$count": "n"},
            ];
            let mut cursor = coll.aggregate(pipeline).await.unwrap();
            let n = cursor.advance().await.unwrap();
            finished.store(true, Ordering::SeqCst);
            n
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    ts.unix
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert!(
        !finished.load(Ordering::SeqCst),
        "the ping waited for the aggregation"
    );
    assert!(agg.await.unwrap());
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(s.parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decimal128_arithmetic_accumulators_and_conversions() {
    // A decimal operand makes the result a decimal, computed exactly and
    // rounded to 34 digits; trailing zeros are kept as mongod keeps them.
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("agg").collection::<Document>(t);
        coll.insert_many(vec![
            doc! {"_id": 1, "g": "a", "p": dec("1.10"), "q": 2},
            doc! {"_id": 2, "g": "a", "p": dec("2.2"), "q": 3i64},
            doc! {"_id": 3, "g": "b", "p": 0.5, "q": dec("3")},
        ])
        .await
        .unwrap();
        let got = collect(
            coll.aggregate(vec![
                doc! {"$match": {"_id": 1}},
                doc! {"$project": {
                    "_id": 0,
                    "add": {"$add": ["$p", "$q", 1.0]},
                    "sub": {"$subtract": ["$p", dec("0.1")]},
                    "mul": {"$multiply": ["$p", "$q"]},
                    "div": {"$divide": [dec("1"), 3]},
                    "mod": {"$mod": ["$p", dec("0.3")]},
                    "round": {"$round": [dec("19.25"), 1]},
                    "trunc": {"$trunc": [dec("-19.25"), 0]},
                    "abs": {"$abs": dec("-1.50")},
                    "floor": {"$floor": dec("-1.2")},
                    "date": {"$add": [bson::DateTime::from_millis(1000), dec("2.5")]},
                    "sum": {"$sum": ["$p", "$q"]},
                    "toDec": {"$toDecimal": 2.5},
                    "fromStr": {"$convert": {"input": "1.50", "to": "decimal"}},
                    "toLong": {"$toLong": dec("-7.9")},
                    "toStr": {"$toString": {"$add": [dec("1.0"), dec("1.00")]}},
                    "inf": {"$multiply": [dec("9E+6144"), 10]},
                }},
            ])
            .await
            .unwrap(),
        )
        .await;
        let want = doc! {
            "add": dec("4.10000000000000"),
            "sub": dec("1.00"),
            "mul": dec("2.20"),
            "div": dec("0.3333333333333333333333333333333333"),
            "mod": dec("0.20"),
            "round": dec("19.2"),
            "trunc": dec("-19"),
            "abs": dec("1.50"),
            "floor": dec("-2"),
            "date": bson::DateTime::from_millis(1002),
            "sum": dec("3.10"),
            "toDec": dec("2.50000000000000"),
            "fromStr": dec("1.50"),
            "toLong": -7i64,
            "toStr": "2.00",
            "inf": dec("Infinity"),
        };
        assert_eq!(got, vec![want], "{t}");

        let groups = collect(
            coll.aggregate(vec![
                doc! {"$group": {"_id": "$g", "s": {"$sum": "$p"}, "a": {"$avg": "$p"}, "n": {"$sum": "$q"}}},
                doc! {"$sort": {"_id": 1}},
            ])
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            groups,
            vec![
                doc! {"_id": "a", "s": dec("3.30"), "a": dec("1.65"), "n": 5i64},
                doc! {"_id": "b", "s": 0.5, "a": 0.5, "n": dec("3")},
            ],
            "{t}"
        );

        // mongod's errors: a zero decimal divisor, an overflowing conversion,
        // the logarithm of a decimal zero.
        for (stage, code) in [
            (
                doc! {"$project": {"x": {"$divide": ["$p", dec("0")]}}},
                16608,
            ),
            (doc! {"$project": {"x": {"$toInt": dec("1E+10")}}}, 241),
            (doc! {"$project": {"x": {"$ln": dec("0")}}}, 28766),
        ] {
            expect_code(coll.aggregate(vec![stage]).await, code);
        }
    }
}
