//! Capped collections and tailable cursors through the official driver: the
//! `create` options and their errors, eviction by `max` and by `size`, natural
//! order (`$natural` sort and hint), tailable and `awaitData` cursors, and the
//! options and order surviving a restart of the persistent engine.

use std::time::{Duration, Instant};

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::StreamExt;
use mongodb::options::CursorType;
use mongodb::Database;

fn ids(docs: &[Document]) -> Vec<i32> {
    docs.iter()
        .map(|d| d.get_i32("_id").unwrap_or(-1))
        .collect()
}

fn batch(reply: &Document, which: &str) -> Vec<Document> {
    let cursor = reply.get_document("cursor").unwrap();
    cursor
        .get_array(which)
        .unwrap()
        .iter()
        .filter_map(|b| b.as_document().cloned())
        .collect()
}

fn cursor_id(reply: &Document) -> i64 {
    reply.get_document("cursor").unwrap().get_i64("id").unwrap()
}

async fn find_ids(db: &Database, cmd: Document) -> Vec<i32> {
    let r = db.run_command(cmd).await.unwrap();
    ids(&batch(&r, "firstBatch"))
}

async fn insert(db: &Database, coll: &str, ids: impl IntoIterator<Item = i32>) {
    let docs: Vec<Document> = ids.into_iter().map(|i| doc! {"_id": i, "v": i}).collect();
    let r = db
        .run_command(doc! {"insert": coll, "documents": docs})
        .await
        .unwrap();
    assert!(r.get("writeErrors").is_none(), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_options_are_checked_listed_and_reported() {
    let t = start().await;
    let db = t.tcp.database("capped_create");
    db.run_command(doc! {"create": "c", "capped": true, "size": 1000, "max": 5})
        .await
        .unwrap();
    let listed = db
        .run_command(doc! {"listCollections": 1, "filter": {"options.capped": true}})
        .await
        .unwrap();
    let first = batch(&listed, "firstBatch");
    assert_eq!(first.len(), 1, "{listed}");
    // mongod rounds the size up to a multiple of 256.
    assert_eq!(
        first[0].get_document("options").unwrap(),
        &doc! {"capped": true, "size": 1024, "max": 5}
    );
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true), "{stats}");
    assert_eq!(num(&stats, "maxSize"), 1024, "{stats}");
    assert_eq!(num(&stats, "max"), 5, "{stats}");
    // The same options again: a no-op; different ones: 48.
    db.run_command(doc! {"create": "c", "capped": true, "size": 1024, "max": 5})
        .await
        .unwrap();
    expect_code(
        db.run_command(doc! {"create": "c", "capped": true, "size": 4096})
            .await,
        48,
    );
    db.collection::<Document>("plain")
        .insert_one(doc! {})
        .await
        .unwrap();
    let stats = db.run_command(doc! {"collStats": "plain"}).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(false), "{stats}");

    for (cmd, code) in [
        (doc! {"create": "e", "capped": true}, 72),
        (doc! {"create": "e", "size": 4096}, 72),
        (doc! {"create": "e", "capped": false, "max": 3}, 72),
        (doc! {"create": "e", "capped": true, "size": 0}, 51024),
        (doc! {"create": "e", "capped": true, "size": -1}, 51024),
        (
            doc! {"create": "e", "capped": true, "size": (1_i64 << 50) + 1},
            51024,
        ),
        (doc! {"create": "e", "capped": true, "size": "big"}, 14),
        (
            doc! {"create": "e", "capped": true, "size": 4096, "max": 1_i64 << 31},
            2,
        ),
    ] {
        let e = expect_code(db.run_command(cmd.clone()).await, code);
        assert!(!error_message(&e).is_empty(), "{cmd}");
    }
    assert!(!db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"e".to_string()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_evicts_the_oldest_and_natural_order_is_insertion_order() {
    let t = start().await;
    let db = t.tcp.database("capped_max");
    db.run_command(doc! {"create": "c", "capped": true, "size": 1 << 20, "max": 3})
        .await
        .unwrap();
    for id in [5, 1, 9, 3] {
        insert(&db, "c", [id]).await;
    }
    assert_eq!(find_ids(&db, doc! {"find": "c"}).await, vec![1, 9, 3]);
    assert_eq!(
        find_ids(&db, doc! {"find": "c", "sort": {"$natural": -1}}).await,
        vec![3, 9, 1]
    );
    assert_eq!(
        find_ids(&db, doc! {"find": "c", "hint": {"$natural": 1}}).await,
        vec![1, 9, 3]
    );
    // `_id` order is still available by sorting on it.
    assert_eq!(
        find_ids(&db, doc! {"find": "c", "sort": {"_id": 1}}).await,
        vec![1, 3, 9]
    );
    // One insert of more documents than `max`: the last three remain.
    insert(&db, "c", 10..16).await;
    assert_eq!(find_ids(&db, doc! {"find": "c"}).await, vec![13, 14, 15]);
    let coll = db.collection::<Document>("c");
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 3);
    assert_eq!(coll.estimated_document_count().await.unwrap(), 3);
    // Deletes and growing updates are allowed (mongod 8.0) and keep the order.
    coll.delete_one(doc! {"_id": 14}).await.unwrap();
    coll.update_one(doc! {"_id": 13}, doc! {"$set": {"pad": "x".repeat(500)}})
        .await
        .unwrap();
    insert(&db, "c", [2]).await;
    assert_eq!(find_ids(&db, doc! {"find": "c"}).await, vec![13, 15, 2]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn size_evicts_the_oldest() {
    let t = start().await;
    let db = t.tcp.database("capped_size");
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096})
        .await
        .unwrap();
    let pad = "p".repeat(100);
    for chunk in (0..100).collect::<Vec<i32>>().chunks(7) {
        let docs: Vec<Document> = chunk
            .iter()
            .map(|i| doc! {"_id": *i, "pad": pad.clone()})
            .collect();
        db.collection::<Document>("c")
            .insert_many(docs)
            .await
            .unwrap();
    }
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert!(num(&stats, "size") <= 4096, "{stats}");
    let left = find_ids(&db, doc! {"find": "c", "batchSize": 1000}).await;
    assert!(left.len() > 20, "{left:?}");
    assert_eq!(num(&stats, "count") as usize, left.len());
    // The newest documents, in insertion order.
    let newest: Vec<i32> = (100 - left.len() as i32..100).collect();
    assert_eq!(left, newest);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tailable_options_are_checked() {
    let t = start().await;
    let db = t.tcp.database("capped_errors");
    insert(&db, "plain", [1]).await;
    let e = expect_code(
        db.run_command(doc! {"find": "plain", "tailable": true})
            .await,
        2,
    );
    assert!(
        error_message(&e).contains("tailable cursor requested on non capped collection"),
        "{e}"
    );
    expect_code(
        db.run_command(doc! {"find": "plain", "awaitData": true})
            .await,
        9,
    );
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096})
        .await
        .unwrap();
    expect_code(
        db.run_command(doc! {"find": "c", "tailable": true, "sort": {"_id": 1}})
            .await,
        2,
    );
    expect_code(
        db.run_command(doc! {"find": "c", "tailable": true, "singleBatch": true})
            .await,
        2,
    );
    // On an empty capped collection the tailable cursor is dead at once.
    let r = db
        .run_command(doc! {"find": "c", "tailable": true})
        .await
        .unwrap();
    assert_eq!(cursor_id(&r), 0, "{r}");
    // maxTimeMS on the getMore of a cursor that is not awaitData: 2.
    insert(&db, "plain", 2..10).await;
    let r = db
        .run_command(doc! {"find": "plain", "batchSize": 2})
        .await
        .unwrap();
    expect_code(
        db.run_command(doc! {"getMore": cursor_id(&r), "collection": "plain", "maxTimeMS": 10})
            .await,
        2,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tailable_await_data_get_more_waits_for_inserts() {
    let t = start().await;
    let db = t.tcp.database("capped_tail");
    db.run_command(doc! {"create": "c", "capped": true, "size": 1 << 20, "max": 4})
        .await
        .unwrap();
    insert(&db, "c", [1, 2]).await;
    let r = db
        .run_command(
            doc! {"find": "c", "filter": {"v": {"$ne": 5}}, "tailable": true, "awaitData": true},
        )
        .await
        .unwrap();
    assert_eq!(ids(&batch(&r, "firstBatch")), vec![1, 2]);
    let id = cursor_id(&r);
    assert_ne!(id, 0, "{r}");
    let get_more = |ms: i32| doc! {"getMore": id, "collection": "c", "maxTimeMS": ms};

    // Nothing new: waits about maxTimeMS, returns an empty batch, stays open.
    let started = Instant::now();
    let r = db.run_command(get_more(300)).await.unwrap();
    let waited = started.elapsed();
    assert!(batch(&r, "nextBatch").is_empty(), "{r}");
    assert_eq!(cursor_id(&r), id);
    assert!(waited >= Duration::from_millis(250), "{waited:?}");

    // An insert during the wait ends it early; a non-matching one does not.
    let writer = t.tcp.database("capped_tail");
    let insert_later = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(200)).await;
        insert(&writer, "c", [5]).await;
        tokio::time::sleep(Duration::from_millis(200)).await;
        insert(&writer, "c", [6]).await;
    });
    let started = Instant::now();
    let r = db.run_command(get_more(10_000)).await.unwrap();
    let waited = started.elapsed();
    assert_eq!(ids(&batch(&r, "nextBatch")), vec![6], "{r}");
    assert!(waited >= Duration::from_millis(350), "{waited:?}");
    assert!(waited < Duration::from_secs(5), "{waited:?}");
    insert_later.await.unwrap();

    // Without maxTimeMS the default wait is one second.
    let started = Instant::now();
    let r = db
        .run_command(doc! {"getMore": id, "collection": "c"})
        .await
        .unwrap();
    assert!(batch(&r, "nextBatch").is_empty(), "{r}");
    assert!(started.elapsed() >= Duration::from_millis(900));

    // The last record the cursor saw is evicted: CappedPositionLost, cursor gone.
    insert(&db, "c", 10..15).await;
    expect_code(db.run_command(get_more(10)).await, 136);
    expect_code(db.run_command(get_more(10)).await, 43);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_tailable_cursor_follows_inserts() {
    let t = start().await;
    let db = t.tcp.database("capped_driver");
    db.run_command(doc! {"create": "log", "capped": true, "size": 65536})
        .await
        .unwrap();
    let coll = db.collection::<Document>("log");
    coll.insert_one(doc! {"_id": 0}).await.unwrap();
    let mut cursor = coll
        .find(doc! {})
        .cursor_type(CursorType::TailableAwait)
        .max_await_time(Duration::from_millis(100))
        .await
        .unwrap();
    let first = cursor.next().await.unwrap().unwrap();
    assert_eq!(first.get_i32("_id").ok(), Some(0));
    let writer = coll.clone();
    let feeder = tokio::spawn(async move {
        for i in 1..=3 {
            tokio::time::sleep(Duration::from_millis(150)).await;
            writer.insert_one(doc! {"_id": i}).await.unwrap();
        }
    });
    let mut seen = Vec::new();
    while seen.len() < 3 {
        let next = tokio::time::timeout(Duration::from_secs(10), cursor.next())
            .await
            .expect("the tailable cursor delivers new documents");
        seen.push(next.unwrap().unwrap().get_i32("_id").unwrap());
    }
    assert_eq!(seen, vec![1, 2, 3]);
    feeder.await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn capped_options_and_order_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    db.run_command(doc! {"create": "c", "capped": true, "size": 4096, "max": 3})
        .await
        .unwrap();
    for id in [9, 8, 7, 6] {
        insert(&db, "c", [id]).await;
    }
    shutdown_by_command(server, client).await;

    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    let listed = db.run_command(doc! {"listCollections": 1}).await.unwrap();
    let options = batch(&listed, "firstBatch")[0]
        .get_document("options")
        .ok()
        .cloned();
    assert_eq!(
        options,
        Some(doc! {"capped": true, "size": 4096, "max": 3}),
        "{listed}"
    );
    assert_eq!(find_ids(&db, doc! {"find": "c"}).await, vec![8, 7, 6]);
    // The record-id sequence continues after the restart.
    insert(&db, "c", [1]).await;
    assert_eq!(find_ids(&db, doc! {"find": "c"}).await, vec![7, 6, 1]);
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(num(&stats, "count"), 3, "{stats}");
    assert_eq!(stats.get("capped"), Some(&Bson::Boolean(true)));
    server.shutdown();
    drop(client);
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coll_stats_stage_reports_capped() {
    let t = start().await;
    let db = t.tcp.database("capped_stage");
    db.run_command(doc! {"create": "c", "capped": true, "size": 8192, "max": 10})
        .await
        .unwrap();
    insert(&db, "c", 0..12).await;
    let r = db
        .run_command(doc! {
            "aggregate": "c",
            "pipeline": [{"$collStats": {"storageStats": {"scale": 2}, "count": {}}}, {"$project": {"host": 0, "localTime": 0}}],
            "cursor": {},
        })
        .await
        .unwrap();
    let out = batch(&r, "firstBatch");
    assert_eq!(out.len(), 1, "{r}");
    let stats = out[0].get_document("storageStats").unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true), "{stats}");
    assert_eq!(num(stats, "maxSize"), 4096, "{stats}");
    assert_eq!(num(stats, "max"), 10, "{stats}");
    assert_eq!(num(&out[0], "count"), 10, "{r}");
    assert_eq!(out[0].get_str("ns").ok(), Some("capped_stage.c"));
    assert!(out[0].get("host").is_none(), "the stages after it run");
    expect_code(
        db.run_command(
            doc! {"aggregate": "c", "pipeline": [{"$collStats": {"nope": {}}}], "cursor": {}},
        )
        .await,
        40415,
    );
    expect_code(
        db.run_command(doc! {"aggregate": "missing", "pipeline": [{"$collStats": {"count": {}}}], "cursor": {}})
            .await,
        26,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn convert_and_clone_as_capped() {
    let t = start().await;
    let db = t.tcp.database("capped_convert");
    insert(&db, "src", [4, 2, 0, 3, 1]).await;
    db.collection::<Document>("src")
        .create_index(mongodb::IndexModel::builder().keys(doc! {"v": 1}).build())
        .await
        .unwrap();

    db.run_command(doc! {"cloneCollectionAsCapped": "src", "toCollection": "copy", "size": 1000})
        .await
        .unwrap();
    assert_eq!(
        collection_entry(&db, "copy")
            .await
            .get_document("options")
            .ok(),
        Some(&doc! {"capped": true, "size": 1024})
    );
    // The source's natural (insertion) order is the copy's, as mongod's
    // cloneCollectionAsCapped copies with a forward collection scan.
    assert_eq!(
        find_ids(&db, doc! {"find": "copy"}).await,
        vec![4, 2, 0, 3, 1]
    );
    expect_code(
        db.run_command(
            doc! {"cloneCollectionAsCapped": "src", "toCollection": "copy", "size": 1000},
        )
        .await,
        48,
    );
    expect_code(
        db.run_command(doc! {"cloneCollectionAsCapped": "none", "toCollection": "x", "size": 1000})
            .await,
        26,
    );
    expect_code(
        db.run_command(doc! {"cloneCollectionAsCapped": "src", "toCollection": "x"})
            .await,
        40414,
    );

    db.run_command(doc! {"convertToCapped": "src", "size": 4096})
        .await
        .unwrap();
    let stats = db.run_command(doc! {"collStats": "src"}).await.unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true), "{stats}");
    assert_eq!(num(&stats, "count"), 5, "{stats}");
    // Only the `_id` index is left, as in mongod.
    assert_eq!(num(&stats, "nindexes"), 1, "{stats}");
    insert(&db, "src", [9]).await;
    assert_eq!(
        find_ids(&db, doc! {"find": "src"}).await,
        vec![4, 2, 0, 3, 1, 9]
    );
    expect_code(
        db.run_command(doc! {"convertToCapped": "none", "size": 4096})
            .await,
        26,
    );
    let names = db.list_collection_names().await.unwrap();
    assert!(names.iter().all(|n| !n.starts_with("tmp.")), "{names:?}");
}
