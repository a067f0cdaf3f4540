//! `mapReduce` through the driver, with mongod 8's answers: the manual's
//! "Map-Reduce Examples" (orders per customer: 95, 125, 60, 155), inline and
//! collection output (`replace`, `merge`, incremental `reduce`, another
//! database), `finalize`, `scope`, `query`/`sort`/`limit`, `reduce` called
//! for a key with one value (mongod 8's default), document validation of the
//! output, mongod's errors (and the explain BisonDB leaves out), and
//! `maxTimeMS` and `killOp` ending a running `map`.

use crate::common::*;
use bson::{doc, Bson, Document, JavaScriptCodeWithScope};
use mongodb::{Client, Database};

/// The manual's `orders` collection (db.collection.mapReduce examples).
async fn orders(client: &Client, db: &str) -> Database {
    let db = client.database(db);
    let rows = [
        (
            1,
            "Ant O. Knee",
            25,
            vec![("oranges", 5, 2.5), ("apples", 5, 2.5)],
        ),
        (
            2,
            "Ant O. Knee",
            70,
            vec![("oranges", 8, 2.5), ("chocolates", 5, 10.0)],
        ),
        (
            3,
            "Busby Bee",
            50,
            vec![("oranges", 10, 2.5), ("pears", 10, 2.5)],
        ),
        (4, "Busby Bee", 25, vec![("oranges", 10, 2.5)]),
        (5, "Busby Bee", 50, vec![("chocolates", 5, 10.0)]),
        (
            6,
            "Cam Elot",
            35,
            vec![("carrots", 10, 1.0), ("apples", 10, 2.5)],
        ),
        (7, "Cam Elot", 25, vec![("oranges", 10, 2.5)]),
        (
            8,
            "Don Quis",
            75,
            vec![("chocolates", 5, 10.0), ("apples", 10, 2.5)],
        ),
        (
            9,
            "Don Quis",
            55,
            vec![
                ("carrots", 5, 1.0),
                ("apples", 10, 2.5),
                ("oranges", 10, 2.5),
            ],
        ),
        (10, "Don Quis", 25, vec![("oranges", 10, 2.5)]),
    ];
    let docs = rows.into_iter().map(|(id, cust, price, items)| {
        let items: Vec<Document> = items
            .into_iter()
            .map(|(sku, qty, price)| doc! {"sku": sku, "qty": qty, "price": price})
            .collect();
        doc! {"_id": id, "cust_id": cust, "price": price, "items": items, "status": "A"}
    });
    db.collection::<Document>("orders")
        .insert_many(docs)
        .await
        .unwrap();
    db
}

const MAP_PRICE: &str = "function() { emit(this.cust_id, this.price); }";
const SUM: &str = "function(key, values) { return Array.sum(values); }";

/// `{_id: value}` pairs of results, in order.
fn pairs(docs: &[Bson]) -> Vec<(String, f64)> {
    docs.iter()
        .map(|d| {
            let d = d.as_document().unwrap();
            (
                d.get_str("_id").unwrap().to_string(),
                match d.get("value") {
                    Some(Bson::Double(f)) => *f,
                    Some(Bson::Int32(i)) => f64::from(*i),
                    other => panic!("value {other:?}"),
                },
            )
        })
        .collect()
}

fn totals() -> Vec<(String, f64)> {
    [
        ("Ant O. Knee", 95.0),
        ("Busby Bee", 125.0),
        ("Cam Elot", 60.0),
        ("Don Quis", 155.0),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

async fn stored(db: &Database, coll: &str) -> Vec<Bson> {
    let c = db.collection::<Document>(coll);
    collect(c.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap())
        .await
        .into_iter()
        .map(Bson::Document)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inline_results_as_the_manual_shows() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = orders(client, &format!("mr_inline_{t}")).await;
        let reply = run(
            &db,
            doc! {"mapReduce": "orders", "map": Bson::JavaScriptCode(MAP_PRICE.into()),
            "reduce": SUM, "out": {"inline": 1}},
        )
        .await;
        // mongod 8's shape: results and ok, no counts or timing (verbose is
        // ignored since 4.4).
        let shape = without_cluster_time(reply.clone());
        let keys: Vec<&str> = shape.keys().map(String::as_str).collect();
        assert_eq!(keys, ["results", "ok"], "{t}: {reply}");
        assert_eq!(pairs(reply.get_array("results").unwrap()), totals(), "{t}");
        let verbose = run(
            &db,
            doc! {"mapreduce": "orders", "map": MAP_PRICE, "reduce": SUM,
            "out": {"inline": 1}, "verbose": true, "jsMode": true},
        )
        .await;
        assert_eq!(
            without_cluster_time(verbose.clone()).keys().count(),
            2,
            "{t}: {verbose}"
        );
        assert_eq!(pairs(verbose.get_array("results").unwrap()), totals());

        // query, sort and limit pick the input; finalize and scope shape
        // the output. Orders 1..=4 only: Ant O. Knee 95, Busby Bee 75.
        let reply = run(
            &db,
            doc! {"mapReduce": "orders",
            "map": "function() { for (const it of this.items) emit(this.cust_id, {n: 1, qty: it.qty}); }",
            "reduce": "function(k, vals) { let r = {n: 0, qty: 0}; vals.forEach(v => { r.n += v.n; r.qty += v.qty; }); return r; }",
            "finalize": Bson::JavaScriptCode("function(k, v) { return {avg: v.qty / v.n, label: prefix + k}; }".into()),
            "scope": {"prefix": "customer "},
            "query": {"status": "A"}, "sort": {"_id": 1}, "limit": 4, "out": {"inline": 1}},
        )
        .await;
        let results = reply.get_array("results").unwrap();
        assert_eq!(
            results,
            &vec![
                Bson::Document(
                    doc! {"_id": "Ant O. Knee", "value": {"avg": 5.75, "label": "customer Ant O. Knee"}}
                ),
                Bson::Document(
                    doc! {"_id": "Busby Bee", "value": {"avg": 10.0, "label": "customer Busby Bee"}}
                ),
            ],
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reduce_runs_for_a_key_with_one_value() {
    // mongod's jstest for SERVER-68766: without mrEnableSingleReduceOptimization
    // (off by default) reduce runs even on one value.
    let ts = start().await;
    let db = ts.tcp.database("mr_single");
    db.collection::<Document>("bar")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let reply = run(
        &db,
        doc! {"mapReduce": "bar", "map": "function() { emit(0, 'mapped value'); }",
        "reduce": "function(key, values) { return 'reduced value'; }", "out": {"inline": 1}},
    )
    .await;
    assert_eq!(
        reply.get_array("results").unwrap(),
        &vec![Bson::Document(doc! {"_id": 0.0, "value": "reduced value"})]
    );
    // No input, no results.
    let reply = run(
        &db,
        doc! {"mapReduce": "missing", "map": "function() { emit(0, 1); }",
        "reduce": SUM, "out": {"inline": 1}},
    )
    .await;
    assert_eq!(reply.get_array("results").unwrap(), &Vec::<Bson>::new());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_collections_replace_merge_and_reduce() {
    let ts = start().await;
    let db = orders(&ts.tcp, "mr_out").await;
    let totals_docs: Vec<Bson> = totals()
        .into_iter()
        .map(|(k, v)| Bson::Document(doc! {"_id": k, "value": v}))
        .collect();

    // replace: the collection holds exactly the results; an index on the
    // target survives (as $out keeps it).
    let target = db.collection::<Document>("totals");
    target
        .insert_one(doc! {"_id": "stale", "value": 1})
        .await
        .unwrap();
    target
        .create_index(
            mongodb::IndexModel::builder()
                .keys(doc! {"value": 1})
                .build(),
        )
        .await
        .unwrap();
    let reply = run(
        &db,
        doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM, "out": "totals"},
    )
    .await;
    assert_eq!(
        without_cluster_time(reply),
        doc! {"result": "totals", "ok": 1.0}
    );
    assert_eq!(stored(&db, "totals").await, totals_docs);
    let names = target.list_index_names().await.unwrap();
    assert!(names.contains(&"value_1".to_string()), "{names:?}");

    // Incremental: reduce orders 1..=5 then 6..=10 into the same collection;
    // the second run reduces each new total with the stored one.
    for (query, mode) in [
        (doc! {"_id": {"$lte": 5}}, "replace"),
        (doc! {"_id": {"$gt": 5}}, "reduce"),
    ] {
        run(
            &db,
            doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM,
            "query": query, "out": {mode: "incremental"}},
        )
        .await;
    }
    assert_eq!(stored(&db, "incremental").await, totals_docs);

    // merge: new results replace documents with the same _id, others stay.
    let merged = db.collection::<Document>("merged");
    merged
        .insert_many([
            doc! {"_id": "Ant O. Knee", "value": 0, "extra": true},
            doc! {"_id": "Zed", "value": 7},
        ])
        .await
        .unwrap();
    run(
        &db,
        doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM,
        "query": {"cust_id": "Ant O. Knee"}, "out": {"merge": "merged", "nonAtomic": true}},
    )
    .await;
    assert_eq!(
        stored(&db, "merged").await,
        vec![
            Bson::Document(doc! {"_id": "Ant O. Knee", "value": 95.0}),
            Bson::Document(doc! {"_id": "Zed", "value": 7}),
        ]
    );

    // Another database: the reply names it.
    let reply = run(
        &db,
        doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM,
        "out": {"replace": "totals", "db": "mr_out_other"}},
    )
    .await;
    assert_eq!(
        without_cluster_time(reply),
        doc! {"result": {"db": "mr_out_other", "collection": "totals"}, "ok": 1.0}
    );
    assert_eq!(
        stored(&ts.tcp.database("mr_out_other"), "totals").await,
        totals_docs
    );

    // The output collection's validator applies unless bypassed.
    db.create_collection("checked")
        .validator(doc! {"value": {"$lt": 100}})
        .await
        .unwrap();
    let cmd = doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM,
    "out": {"merge": "checked"}};
    let e = db.run_command(cmd.clone()).await.unwrap_err();
    assert_eq!(error_code(&e), Some(121), "{e}");
    let mut bypass = cmd;
    bypass.insert("bypassDocumentValidation", true);
    run(&db, bypass).await;
    assert_eq!(stored(&db, "checked").await, totals_docs);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongod_errors() {
    let ts = start().await;
    let db = orders(&ts.tcp, "mr_errors").await;
    db.create_collection("v")
        .view_on("orders".to_string())
        .pipeline(vec![])
        .await
        .unwrap();
    let base = doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM, "out": {"inline": 1}};
    let with = |k: &str, v: Bson| {
        let mut d = base.clone();
        d.insert(k, v);
        d
    };
    let mut missing_out = base.clone();
    missing_out.remove("out");
    let cases: Vec<(Document, i32, &str)> = vec![
        (
            missing_out,
            40414,
            "BSON field 'mapReduce.out' is missing but a required field",
        ),
        (
            with("map", Bson::Int32(1)),
            2,
            "'map' must be of string or code type",
        ),
        (
            with(
                "reduce",
                Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
                    code: SUM.into(),
                    scope: doc! {},
                }),
            ),
            2,
            "'reduce' must be of string or code type",
        ),
        (
            with("out", Bson::Int32(1)),
            2,
            "'out' must be either a string or an object",
        ),
        (
            with("out", Bson::Document(doc! {"inline": 1, "db": "x"})),
            72,
            "'inline' must be specified alone",
        ),
        (
            with(
                "out",
                Bson::Document(doc! {"merge": "x", "nonAtomic": false}),
            ),
            2,
            "nonAtomic field value must be true",
        ),
        (
            with("out", Bson::Document(doc! {"merge": "x", "db": "admin"})),
            115,
            "cannot target internal database as output",
        ),
        (
            with("out", Bson::String("system.js".into())),
            17385,
            "Can't output mapReduce results to special collection system.js",
        ),
        (
            with("out", Bson::Document(doc! {"db": "x"})),
            2,
            "'out' requires 'replace', 'merge' or 'reduce'",
        ),
        (
            with("limit", Bson::Int32(0)),
            15958,
            "The limit specified to mapReduce must be positive",
        ),
        (
            with("sort", Bson::Document(doc! {})),
            15976,
            "The mapReduce sort option must have at least one sort key",
        ),
        (
            with("scope", Bson::Int32(1)),
            2,
            "'scope' must be an object",
        ),
        (
            with("bogus", Bson::Int32(1)),
            40415,
            "BSON field 'mapReduce.bogus' is an unknown field.",
        ),
        (
            with("mapReduce", Bson::String("v".into())),
            166,
            "mapReduce on a view is not supported",
        ),
        (
            with("map", Bson::String("function() { emit(1); }".into())),
            31220,
            "emit takes 2 args",
        ),
        (
            with(
                "map",
                Bson::String("function() { throw new Error('boom'); }".into()),
            ),
            139,
            "Error: boom",
        ),
        (
            with(
                "reduce",
                Bson::String("function() { return nosuch; }".into()),
            ),
            139,
            "ReferenceError",
        ),
        (with("map", Bson::String("function( {".into())), 139, ""),
    ];
    for (cmd, code, message) in cases {
        let e = db.run_command(cmd.clone()).await.unwrap_err();
        assert_eq!(error_code(&e), Some(code), "{cmd}: {e}");
        assert!(error_message(&e).contains(message), "{cmd}: {e}");
    }
    // explain of mapReduce is left out, with an error naming it.
    let e = db
        .run_command(doc! {"explain": base.clone()})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(115), "{e}");
    assert!(error_message(&e).contains("explain of 'mapReduce'"), "{e}");
    // Nothing was written by the failed commands.
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"x".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_time_ms_ends_a_running_map() {
    let ts = start().await;
    let db = orders(&ts.tcp, "mr_interrupt").await;
    let started = std::time::Instant::now();
    let e = db
        .run_command(
            doc! {"mapReduce": "orders", "map": "function() { while (true) {} }",
            "reduce": SUM, "out": {"inline": 1}, "maxTimeMS": 200},
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(50), "{e}");
    assert!(started.elapsed() < std::time::Duration::from_secs(10));
    // The server goes on answering.
    let reply = run(
        &db,
        doc! {"mapReduce": "orders", "map": MAP_PRICE, "reduce": SUM, "out": {"inline": 1}},
    )
    .await;
    assert_eq!(pairs(reply.get_array("results").unwrap()), totals());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_op_ends_a_running_map() {
    let ts = start().await;
    let db = orders(&ts.tcp, "mr_kill").await;
    let runner = db.clone();
    let task = tokio::spawn(async move {
        runner
            .run_command(
                doc! {"mapReduce": "orders", "map": "function() { while (true) {} }",
                "reduce": SUM, "out": {"inline": 1}},
            )
            .await
            .err()
            .map(|e| error_code(&e))
    });
    let admin = ts.unix.database("admin");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    let opid = loop {
        let reply = run(&admin, doc! {"currentOp": 1, "command.mapReduce": "orders"}).await;
        if let Some(Bson::Document(op)) = reply.get_array("inprog").unwrap().first() {
            break op.get("opid").cloned().unwrap();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the mapReduce never showed"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    run(&admin, doc! {"killOp": 1, "op": opid}).await;
    let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), task)
        .await
        .expect("the killed mapReduce ends")
        .unwrap();
    assert_eq!(outcome, Some(Some(11601)));
}
