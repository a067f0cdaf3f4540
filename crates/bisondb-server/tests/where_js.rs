//! `$where` through the driver: JavaScript predicates in find, count, update
//! and delete (alone, with other predicates, with an index), mongod's errors
//! (a script that throws, Code with scope, bad operands, `$where` where it is
//! not allowed), `maxTimeMS` interrupting a sleeping script, and a sleeping
//! script leaving other connections alone.

use std::time::{Duration, Instant};

use crate::common::*;
use bson::{doc, Bson, Document, JavaScriptCodeWithScope};
use mongodb::Client;

async fn setup(client: &Client, db: &str) -> mongodb::Collection<Document> {
    let c = client.database(db).collection::<Document>("c");
    c.insert_many(
        (0..10).map(|i| doc! {"_id": i, "x": i, "tag": if i % 2 == 0 { "even" } else { "odd" }}),
    )
    .await
    .unwrap();
    c
}

/// The documents `pipeline` returns from `c`.
async fn aggregate(c: &mongodb::Collection<Document>, pipeline: Vec<Document>) -> Vec<Document> {
    collect(c.aggregate(pipeline).await.unwrap().with_type::<Document>()).await
}

fn xs(docs: &[Document]) -> Vec<i64> {
    docs.iter().map(|d| num(d, "x")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_filters_documents() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = format!("where_find_{t}");
        let c = setup(client, &db).await;
        let found = |filter: Document| {
            let c = c.clone();
            async move { xs(&collect(c.find(filter).sort(doc! {"x": 1}).await.unwrap()).await) }
        };
        assert_eq!(
            found(doc! {"$where": "this.x < 3"}).await,
            vec![0, 1, 2],
            "{t}"
        );
        assert_eq!(
            found(doc! {"$where": Bson::JavaScriptCode("obj.x >= 8".into())}).await,
            vec![8, 9],
            "{t}"
        );
        assert_eq!(
            found(doc! {"$where": "function() { return this.tag == 'odd' && this.x > 4; }"}).await,
            vec![5, 7, 9],
            "{t}"
        );
        // With other predicates, and through an index on x.
        c.create_index(mongodb::IndexModel::builder().keys(doc! {"x": 1}).build())
            .await
            .unwrap();
        assert_eq!(
            found(doc! {"x": {"$gte": 5}, "$where": "this.x % 2 == 0"}).await,
            vec![6, 8],
            "{t}"
        );
        assert_eq!(
            found(doc! {"$or": [{"x": 1}, {"$where": "this.x == 9"}]}).await,
            vec![1, 9],
            "{t}"
        );
        assert_eq!(
            found(doc! {"x": 5, "$where": "this.x < 3"}).await,
            Vec::<i64>::new()
        );
        // count, update and delete take it too.
        let n = client
            .database(&db)
            .run_command(doc! {"count": "c", "query": {"$where": "this.x > 6"}})
            .await
            .unwrap();
        assert_eq!(num(&n, "n"), 3, "{t}");
        let r = c
            .update_many(doc! {"$where": "this.x < 2"}, doc! {"$set": {"low": true}})
            .await
            .unwrap();
        assert_eq!(r.modified_count, 2, "{t}");
        let r = c.delete_many(doc! {"$where": "this.x > 7"}).await.unwrap();
        assert_eq!(r.deleted_count, 2, "{t}");
        assert_eq!(count(&c, doc! {}).await, 8, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn where_errors_are_mongods() {
    let ts = start().await;
    let c = setup(&ts.tcp, "where_errors").await;
    let find_err = |filter: Document| {
        let c = c.clone();
        async move {
            match c.find(filter).await {
                Ok(cursor) => match cursor_result(cursor).await {
                    Ok(n) => panic!("expected an error, got {n} documents"),
                    Err(e) => e,
                },
                Err(e) => e,
            }
        }
    };
    let e = find_err(doc! {"$where": "throw new Error('boom')"}).await;
    assert_eq!(error_code(&e), Some(139));
    assert_eq!(error_code_name(&e).as_deref(), Some("JSInterpreterFailure"));
    assert!(error_message(&e).contains("Error: boom"), "{e}");
    let e = find_err(doc! {"$where": "this.x <"}).await;
    assert_eq!(error_code(&e), Some(139));
    assert!(error_message(&e).contains("SyntaxError"), "{e}");
    let scoped = JavaScriptCodeWithScope {
        code: "this.x < i".into(),
        scope: doc! {"i": 3},
    };
    let e = find_err(doc! {"$where": scoped}).await;
    assert_eq!(error_code(&e), Some(4649201));
    let e = find_err(doc! {"$where": 5}).await;
    assert_eq!(error_code(&e), Some(2));
    assert!(error_message(&e).contains("$where got bad type"), "{e}");
    let e = find_err(doc! {"a": {"$elemMatch": {"$where": "true"}}}).await;
    assert!(
        error_message(&e).contains("$where can only be applied to the top-level document"),
        "{e}"
    );
    // Not in an aggregation's $match, and not in a validator.
    let e = c
        .aggregate(vec![doc! {"$match": {"$where": "true"}}])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(2));
    assert!(
        error_message(&e).contains("$where is not allowed in this context"),
        "{e}"
    );
    let e = ts
        .tcp
        .database("where_errors")
        .run_command(doc! {"create": "v", "validator": {"$where": "true"}})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(224));
}

/// `e` is the 50 MaxTimeMSExpired of an interrupted script, and it came
/// within `secs` seconds of `started` (the script itself sleeps far longer).
fn assert_interrupted(e: &mongodb::error::Error, started: Instant, secs: u64) {
    assert_eq!(error_code(e), Some(50), "{e}");
    assert!(
        started.elapsed() < Duration::from_secs(secs),
        "{:?}",
        started.elapsed()
    );
}

async fn cursor_result(mut cursor: mongodb::Cursor<Document>) -> mongodb::error::Result<usize> {
    use futures::TryStreamExt;
    let mut n = 0;
    while cursor.try_next().await?.is_some() {
        n += 1;
    }
    Ok(n)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_time_ms_interrupts_a_sleeping_where() {
    let ts = start().await;
    let c = setup(&ts.tcp, "where_time").await;
    let slow = doc! {"$where": "sleep(10000); return true;"};
    let started = Instant::now();
    let e = c
        .find(slow.clone())
        .max_time(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_interrupted(&e, started, 5);
    assert_eq!(error_code_name(&e).as_deref(), Some("MaxTimeMSExpired"));
    // count too, and a script that catches the interruption still ends.
    let started = Instant::now();
    let e = ts
        .tcp
        .database("where_time")
        .run_command(doc! {
            "count": "c",
            "query": {"$where": "while (true) { try { sleep(1000) } catch (e) {} }"},
            "maxTimeMS": 200,
        })
        .await
        .unwrap_err();
    assert_interrupted(&e, started, 5);
    // A short script under a generous limit is unaffected.
    let n = collect(
        c.find(doc! {"$where": "sleep(1); return this.x < 2"})
            .max_time(Duration::from_secs(30))
            .await
            .unwrap(),
    )
    .await
    .len();
    assert_eq!(n, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sleeping_where_does_not_block_other_connections() {
    let ts = start().await;
    let c = setup(&ts.tcp, "where_block").await;
    // One document sleeps for 1.5 s in its own connection pool...
    let sleeper = {
        let c = c.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let docs = collect(
                c.find(doc! {"$where": "if (this.x == 0) { sleep(1500) } return this.x == 0"})
                    .await
                    .unwrap(),
            )
            .await;
            (docs.len(), started.elapsed())
        })
    };
    tokio::time::sleep(Duration::from_millis(200)).await;
    // ...while another client is served at once.
    let other = ts.unix_client_with("appName=other").await;
    let started = Instant::now();
    let n = count(
        &other.database("where_block").collection("c"),
        doc! {"x": {"$lt": 5}},
    )
    .await;
    let quick = started.elapsed();
    assert_eq!(n, 5);
    let (found, slept) = sleeper.await.unwrap();
    assert_eq!(found, 1);
    assert!(slept >= Duration::from_millis(1400), "{slept:?}");
    assert!(quick < Duration::from_millis(1000), "blocked for {quick:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn function_expressions_run_javascript() {
    let ts = start().await;
    let db = ts.tcp.database("function_agg");
    let c = setup(&ts.tcp, "function_agg").await;
    let double = doc! {"$function": {
        "body": "function(x, tag) { return tag == 'odd' ? x * 10 : null }",
        "args": ["$x", "$tag"],
        "lang": "js",
    }};
    let docs = aggregate(&c, vec![
            doc! {"$match": {"$expr": {"$function": {"body": "(x) => x < 4", "args": ["$x"], "lang": "js"}}}},
            doc! {"$project": {"_id": 0, "x": 1, "y": double}},
            doc! {"$sort": {"x": 1}},
        ]).await;
    assert_eq!(
        docs,
        vec![
            doc! {"x": 0, "y": Bson::Null},
            doc! {"x": 1, "y": 10.0},
            doc! {"x": 2, "y": Bson::Null},
            doc! {"x": 3, "y": 30.0},
        ]
    );
    // mongod's errors: a throw, a bad spec, and no JavaScript in validators.
    let e = c
        .aggregate(vec![doc! {"$project": {"y": {"$function": {
        "body": "function() { throw new Error('bad') }", "args": [], "lang": "js"}}}}])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(139), "{e}");
    let e = c
        .aggregate(vec![
            doc! {"$project": {"y": {"$function": {"body": "function() {}", "args": []}}}},
        ])
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(31418), "{e}");
    let e = db
        .run_command(doc! {"create": "v", "validator": {"$expr": {"$function": {
        "body": "function() { return true }", "args": [], "lang": "js"}}}})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(4660800), "{e}");
    // maxTimeMS on aggregate interrupts a sleeping function.
    let started = Instant::now();
    let e = c
        .aggregate(vec![doc! {"$project": {"y": {"$function": {
        "body": "function() { sleep(10000); return 1 }", "args": [], "lang": "js"}}}}])
        .max_time(Duration::from_millis(200))
        .await
        .unwrap_err();
    assert_interrupted(&e, started, 5);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_time_ms_carries_over_to_get_more() {
    let ts = start().await;
    let c = setup(&ts.tcp, "where_getmore").await;
    // The first batch is quick; the later documents sleep 300 ms each, so the
    // getMores run past the 500 ms the find was given.
    let cursor = c
        .find(doc! {"$where": "if (this.x >= 2) { sleep(300) } return true"})
        .sort(doc! {"_id": 1})
        .batch_size(2)
        .max_time(Duration::from_millis(500))
        .await
        .unwrap();
    let started = Instant::now();
    let e = cursor_result(cursor).await.unwrap_err();
    assert_interrupted(&e, started, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accumulator_runs_javascript_per_group() {
    let ts = start().await;
    let c = setup(&ts.tcp, "js_accumulator").await;
    let avg = doc! {"$accumulator": {
        "init": "function(start) { return {count: 0, sum: start} }",
        "initArgs": [0],
        "accumulate": "function(state, x) { return {count: state.count + 1, sum: state.sum + x} }",
        "accumulateArgs": ["$x"],
        "merge": "function(a, b) { return {count: a.count + b.count, sum: a.sum + b.sum} }",
        "finalize": "function(state) { return state.sum / state.count }",
        "lang": "js",
    }};
    let docs = aggregate(
        &c,
        vec![
            doc! {"$group": {"_id": "$tag", "avg": avg, "n": {"$sum": 1}}},
            doc! {"$sort": {"_id": 1}},
        ],
    )
    .await;
    assert_eq!(
        docs,
        vec![
            doc! {"_id": "even", "avg": 4.0, "n": 5},
            doc! {"_id": "odd", "avg": 5.0, "n": 5},
        ]
    );
    // Without finalize the state is the result.
    let docs = aggregate(
        &c,
        vec![doc! {"$group": {"_id": null, "s": {"$accumulator": {
            "init": "function() { return [] }",
            "accumulate": "function(s, x) { if (x < 3) s.push(x); return s }",
            "accumulateArgs": ["$x"],
            "merge": "function(a, b) { return a.concat(b) }",
            "lang": "js",
        }}}}],
    )
    .await;
    let mut got: Vec<f64> = docs[0]
        .get_array("s")
        .unwrap()
        .iter()
        .filter_map(Bson::as_f64)
        .collect();
    got.sort_by(f64::total_cmp);
    assert_eq!(got, vec![0.0, 1.0, 2.0]);
    // mongod's errors.
    let bad = |spec: Document| {
        let c = c.clone();
        async move {
            let e = c
                .aggregate(vec![
                    doc! {"$group": {"_id": null, "a": {"$accumulator": spec}}},
                ])
                .await
                .unwrap_err();
            error_code(&e)
        }
    };
    let base = doc! {
        "init": "function() { return 0 }",
        "accumulate": "function(s) { return s }",
        "accumulateArgs": [],
        "merge": "function(a, b) { return a }",
        "lang": "js",
    };
    let mut no_init = base.clone();
    no_init.remove("init");
    assert_eq!(bad(no_init).await, Some(4544707));
    let mut not_array = base.clone();
    not_array.insert("accumulateArgs", 5);
    assert_eq!(bad(not_array).await, Some(4544712));
    let mut py = base.clone();
    py.insert("lang", "py");
    assert_eq!(bad(py).await, Some(4544705));
    let mut extra = base.clone();
    extra.insert("other", 1);
    assert_eq!(bad(extra).await, Some(4544706));
    let mut throws = base.clone();
    throws.insert("accumulate", "function(s) { throw new Error('no') }");
    assert_eq!(bad(throws).await, Some(139));
}
