//! Issue 20's memory bounds through the driver: the per-operation limit
//! (`internalQueryMaxMemoryUsageBytesPerOperation`) and the server-wide one
//! (`bisondbMaxServerMemoryUsageBytes`) refuse hostile queries with 146
//! ExceededMemoryLimit (or the stage's own code), and the server goes on
//! serving. Each test prints the test process's peak RSS (`VmHWM`, the
//! servers run in this process): run one alone for a meaningful figure.

use crate::common::*;
use bson::{doc, Document};
use mongodb::Database;

/// The peak resident memory of this process so far, in MiB.
fn peak_rss_mib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find(|l| l.starts_with("VmHWM:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|kb| kb.parse::<u64>().ok())
        .map_or(0, |kb| kb / 1024)
}

async fn set_parameter(ts: &TestServer, name: &str, bytes: i64) {
    ts.tcp
        .database("admin")
        .run_command(doc! {"setParameter": 1, name: bytes})
        .await
        .unwrap();
}

/// The server still answers: a ping and a small query.
async fn still_serving(db: &Database, coll: &str) {
    db.run_command(doc! {"ping": 1}).await.unwrap();
    let r = db
        .run_command(doc! {"find": coll, "filter": {}, "limit": 1})
        .await
        .unwrap();
    assert_eq!(r.get_f64("ok").unwrap_or(0.0), 1.0);
}

/// A server whose `db.c` holds `n` documents `{_id: i, a: i, k: 1, pad}`,
/// `pad` a string of `pad_bytes`, inserted 1,000 or 8 MiB at a time.
async fn server_with(db: &str, n: i32, pad_bytes: usize) -> (TestServer, Database) {
    let ts = start().await;
    let db = ts.tcp.database(db);
    let coll = db.collection::<Document>("c");
    let pad = "p".repeat(pad_bytes);
    let per_batch = (8 << 20) / (pad_bytes as i32 + 64).max(1);
    let per_batch = per_batch.clamp(1, 1000);
    let mut i = 0;
    while i < n {
        let end = (i + per_batch).min(n);
        coll.insert_many((i..end).map(|i| doc! {"_id": i, "a": i, "k": 1, "pad": pad.clone()}))
            .await
            .unwrap();
        i = end;
    }
    (ts, db)
}

/// A command's error code (panics when it succeeds).
async fn code_of(db: &Database, cmd: Document) -> i32 {
    let name = cmd.keys().next().cloned().unwrap_or_default();
    match db.run_command(cmd).await {
        Ok(r) => panic!("{name} should fail, answered ok={:?}", r.get("ok")),
        Err(e) => error_code(&e).unwrap_or(-1),
    }
}

#[tokio::test]
async fn limits_are_server_parameters() {
    let ts = start_with(|c| {
        c.set_parameter("bisondbMaxServerMemoryUsageBytes", "123456789")
            .unwrap()
    })
    .await;
    let admin = ts.tcp.database("admin");
    let r = admin
        .run_command(doc! {
            "getParameter": 1,
            "internalQueryMaxMemoryUsageBytesPerOperation": 1,
            "bisondbMaxServerMemoryUsageBytes": 1,
        })
        .await
        .unwrap();
    assert_eq!(
        r.get_i64("internalQueryMaxMemoryUsageBytesPerOperation")
            .unwrap(),
        100 * 1024 * 1024
    );
    assert_eq!(
        r.get_i64("bisondbMaxServerMemoryUsageBytes").unwrap(),
        123456789
    );
    let r = admin
        .run_command(
            doc! {"setParameter": 1, "internalQueryMaxMemoryUsageBytesPerOperation": 5_000_000i64},
        )
        .await
        .unwrap();
    assert_eq!(r.get_i64("was").unwrap(), 100 * 1024 * 1024);
    for bad in [bson::Bson::Int32(0), bson::Bson::Int32(-1), "x".into()] {
        let code = code_of(
            &admin,
            doc! {"setParameter": 1, "internalQueryMaxMemoryUsageBytesPerOperation": bad},
        )
        .await;
        assert_eq!(code, 2);
    }
}

/// Issue 20: a 1,000,000-element `$in` cost ~725 MiB. Under a per-operation
/// limit it is refused with 146, and smaller lists still run.
#[tokio::test]
async fn a_long_in_list_is_refused_past_the_operation_limit() {
    let (ts, db) = server_with("mem_in", 100, 0).await;
    set_parameter(
        &ts,
        "internalQueryMaxMemoryUsageBytesPerOperation",
        32 << 20,
    )
    .await;
    let list: Vec<i32> = (0..1_000_000).collect();
    for op in ["$in", "$nin"] {
        let code = code_of(
            &db,
            doc! {"find": "c", "filter": {"a": {op: list.clone()}}, "batchSize": 1},
        )
        .await;
        assert_eq!(code, 146, "{op}");
        still_serving(&db, "c").await;
    }
    let code = code_of(
        &db,
        doc! {"count": "c", "query": {"a": {"$in": list.clone()}}},
    )
    .await;
    assert_eq!(code, 146);
    // 10,000 values fit.
    let r = db
        .run_command(doc! {"count": "c", "query": {"a": {"$in": list[..10_000].to_vec()}}})
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 100);
    eprintln!("a_long_in_list: peak RSS {} MiB", peak_rss_mib());
}

/// Issue 20: three nested self-`$lookup`s over 300 documents grew past 6 GB.
#[tokio::test]
async fn a_nested_self_lookup_is_bounded() {
    let (_ts, db) = server_with("mem_lookup", 300, 100).await;
    let pipeline = vec![
        doc! {"$lookup": {"from": "c", "pipeline": [
            {"$lookup": {"from": "c", "pipeline": [
                {"$lookup": {"from": "c", "pipeline": [], "as": "m"}}
            ], "as": "k"}}
        ], "as": "j"}},
        doc! {"$count": "n"},
    ];
    let started = std::time::Instant::now();
    let code = code_of(
        &db,
        doc! {"aggregate": "c", "pipeline": pipeline, "cursor": {}, "maxTimeMS": 60_000},
    )
    .await;
    assert!([146, 4568].contains(&code), "code {code}");
    still_serving(&db, "c").await;
    eprintln!(
        "a_nested_self_lookup: failed with {code} after {:?}, peak RSS {} MiB",
        started.elapsed(),
        peak_rss_mib()
    );
}

/// A `$graphLookup` over a dense graph (every document reaches every other)
/// holds the collection and each search's visited set: past the operation's
/// limit, 146.
#[tokio::test]
async fn a_dense_graph_lookup_is_bounded() {
    let (ts, db) = server_with("mem_graph", 5000, 1000).await;
    set_parameter(&ts, "internalQueryMaxMemoryUsageBytesPerOperation", 4 << 20).await;
    let lookup = doc! {"$graphLookup": {
    "from": "c", "startWith": "$k", "connectFromField": "k",
    "connectToField": "k", "as": "all"}};
    let code = code_of(
        &db,
        doc! {"aggregate": "c", "pipeline": [lookup.clone(), {"$project": {"n": {"$size": "$all"}}}], "cursor": {}},
    )
    .await;
    assert_eq!(code, 146);
    still_serving(&db, "c").await;
    // Under a roomier limit the same search runs.
    set_parameter(
        &ts,
        "internalQueryMaxMemoryUsageBytesPerOperation",
        64 << 20,
    )
    .await;
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [
        {"$limit": 1}, lookup, {"$project": {"n": {"$size": "$all"}}}], "cursor": {}})
        .await
        .unwrap();
    assert_eq!(num(&first_batch(&r)[0], "n"), 5000);
    eprintln!("a_dense_graph_lookup: peak RSS {} MiB", peak_rss_mib());
}

/// `$group` with `$push` over many big documents: one group's state cannot
/// spill, so past the operation's limit it fails with 146 whatever
/// `allowDiskUse` says; the stage's own limit gives 292 without it.
#[tokio::test]
async fn a_group_pushing_big_documents_fails_with_the_code() {
    let (ts, db) = server_with("mem_group", 80, 256 * 1024).await;
    let push = |allow: bool| {
        doc! {"aggregate": "c", "pipeline": [
        {"$group": {"_id": null, "all": {"$push": "$$ROOT"}}},
        {"$project": {"n": {"$size": "$all"}}}],
        "cursor": {}, "allowDiskUse": allow}
    };
    set_parameter(&ts, "internalQueryMaxMemoryUsageBytesPerOperation", 8 << 20).await;
    assert_eq!(code_of(&db, push(false)).await, 146);
    assert_eq!(code_of(&db, push(true)).await, 146);
    still_serving(&db, "c").await;
    // Many groups (one per document) spill with allowDiskUse instead.
    let per_doc = doc! {"aggregate": "c", "pipeline": [
    {"$group": {"_id": "$_id", "d": {"$push": "$pad"}}},
    {"$count": "n"}], "cursor": {}, "allowDiskUse": true};
    let r = db.run_command(per_doc).await.unwrap();
    assert_eq!(num(&first_batch(&r)[0], "n"), 80);
    eprintln!(
        "a_group_pushing_big_documents: peak RSS {} MiB",
        peak_rss_mib()
    );
}

/// The server-wide limit: a query that needs more than the server has left
/// fails with 146 while small queries running beside it succeed; with
/// `allowDiskUse` the same sort spills instead.
#[tokio::test]
async fn the_server_limit_fails_one_query_and_not_the_others() {
    let (ts, db) = server_with("mem_server", 160, 64 * 1024).await;
    set_parameter(&ts, "bisondbMaxServerMemoryUsageBytes", 4 << 20).await;
    let sort = |allow: bool| {
        doc! {"aggregate": "c", "pipeline": [{"$sort": {"pad": 1, "_id": -1}}, {"$project": {"_id": 1}}],
        "cursor": {}, "allowDiskUse": allow}
    };
    let big = {
        let db = db.clone();
        let cmd = sort(false);
        tokio::spawn(async move { code_of(&db, cmd).await })
    };
    let small = {
        let db = db.clone();
        tokio::spawn(async move {
            for i in 0..50 {
                let r = db
                    .run_command(doc! {"find": "c", "filter": {"_id": i}, "projection": {"_id": 1}})
                    .await
                    .unwrap();
                assert_eq!(first_batch(&r).len(), 1);
            }
        })
    };
    assert_eq!(big.await.unwrap(), 146);
    small.await.unwrap();
    let r = db.run_command(sort(true)).await.unwrap();
    assert_eq!(first_batch(&r).len(), 101);
    still_serving(&db, "c").await;
    // Everything went back to the pool: a roomy limit again serves all.
    set_parameter(&ts, "bisondbMaxServerMemoryUsageBytes", 1 << 30).await;
    let r = db.run_command(sort(false)).await.unwrap();
    assert_eq!(first_batch(&r).len(), 101);
    eprintln!("the_server_limit: peak RSS {} MiB", peak_rss_mib());
}

/// `find`'s blocking sort counts against the operation: past its limit it
/// spills with `allowDiskUse` (the same order) and fails with 146 without.
#[tokio::test]
async fn a_find_sort_past_the_operation_limit_spills_or_fails() {
    let (ts, db) = server_with("mem_find_sort", 160, 64 * 1024).await;
    set_parameter(&ts, "internalQueryMaxMemoryUsageBytesPerOperation", 4 << 20).await;
    let find = |allow: bool| {
        doc! {"find": "c", "sort": {"pad": 1, "_id": -1}, "projection": {"_id": 1},
        "batchSize": 200, "allowDiskUse": allow}
    };
    let r = db.run_command(find(true)).await.unwrap();
    let ids: Vec<i64> = first_batch(&r).iter().map(|d| num(d, "_id")).collect();
    assert_eq!(ids, (0..160).rev().collect::<Vec<i64>>());
    assert_eq!(code_of(&db, find(false)).await, 146);
    // With a limit the sort keeps only the top k: no spill, no refusal.
    let mut top = find(false);
    top.insert("limit", 3);
    let r = db.run_command(top).await.unwrap();
    assert_eq!(first_batch(&r).len(), 3);
    still_serving(&db, "c").await;
}

/// Issue 20's `$in` finding under the default limits: four 1,000,000-element
/// `$in` queries at once (1.3 GiB before). A measurement (its figure is in
/// the report), run alone:
/// `cargo test -p bisondb-server --test it memory::four_long_in_lists -- --ignored --nocapture`.
#[tokio::test]
#[ignore = "a measurement: run alone for its peak RSS"]
async fn four_long_in_lists_at_once_under_the_defaults() {
    let (_ts, db) = server_with("mem_in4", 100, 0).await;
    let before = peak_rss_mib();
    let mut runs = Vec::new();
    for _ in 0..4 {
        let db = db.clone();
        runs.push(tokio::spawn(async move {
            let list: Vec<i32> = (0..1_000_000).collect();
            db.run_command(doc! {"count": "c", "query": {"a": {"$in": list}}})
                .await
                .map(|r| num(&r, "n"))
                .map_err(|e| error_code(&e))
        }));
    }
    for r in runs {
        let r = r.await.unwrap();
        eprintln!("one 1M-element $in: {r:?}");
        assert_eq!(r, Err(Some(146)));
    }
    still_serving(&db, "c").await;
    eprintln!(
        "four_long_in_lists: peak RSS {} MiB (before {before} MiB; the client's lists included)",
        peak_rss_mib()
    );
}
