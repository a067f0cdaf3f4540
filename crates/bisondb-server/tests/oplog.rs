//! The oplog of a replica-set member (`local.oplog.rs`): mongod's entry shape
//! for inserts, updates (`$v: 2` diffs and replacements), deletes and
//! catalog commands, `ts` growing in commit order, the capped bound,
//! tailable awaitData cursors on it, entries kept across a restart, and no
//! oplog on a standalone.

use std::time::Duration;

use crate::common::*;
use bisondb_server::Server;
use bson::spec::BinarySubtype;
use bson::{doc, Bson, Document, Timestamp};
use futures::TryStreamExt;
use mongodb::options::{CursorType, FindOptions};
use mongodb::Client;

async fn entries(client: &Client, filter: Document) -> Vec<Document> {
    client
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(filter)
        .sort(doc! {"$natural": 1})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

fn ts(e: &Document) -> Timestamp {
    e.get_timestamp("ts").unwrap()
}

fn assert_common(e: &Document, term: i64) {
    assert_eq!(e.get_i64("t").ok(), Some(term), "{e}");
    assert_eq!(e.get_i64("v").ok(), Some(2), "{e}");
    assert!(e.get_datetime("wall").is_ok(), "{e}");
    assert!(!e.contains_key("_id"), "{e}");
}

fn ui(e: &Document) -> bson::Binary {
    match e.get("ui") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => b.clone(),
        other => panic!("no ui in {e}: {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_write_has_its_entry_in_mongods_shape() {
    let ts_ = start_repl_set().await;
    let client = direct_client(ts_.server.port()).await;
    let noop = entries(&client, doc! {"op": "n"}).await;
    assert_eq!(noop.len(), 1, "{noop:?}");
    assert_eq!(
        noop[0].get_document("o").unwrap(),
        &doc! {"msg": "initiating set"}
    );
    let start = ts(&noop[0]);

    let db = client.database("app");
    let c = db.collection::<Document>("c");
    c.insert_many([doc! {"_id": 1, "a": 1, "n": {"x": 1, "y": 2}, "arr": [1, 2, 3], "pad": "a long string that does not change at all"}, doc! {"_id": 2, "a": 2}])
        .await
        .unwrap();
    c.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a": 5, "n.y": 3, "new": true}, "$unset": {"arr": ""}},
    )
    .await
    .unwrap();
    c.replace_one(doc! {"_id": 2}, doc! {"b": 1}).await.unwrap();
    // An update that changes nothing records nothing.
    c.update_one(doc! {"_id": 2}, doc! {"$set": {"b": 1}})
        .await
        .unwrap();
    c.delete_one(doc! {"_id": 1}).await.unwrap();
    c.create_index(mongodb::IndexModel::builder().keys(doc! {"b": 1}).build())
        .await
        .unwrap();
    db.run_command(doc! {"dropIndexes": "c", "index": "b_1"})
        .await
        .unwrap();
    client
        .database("admin")
        .run_command(doc! {"renameCollection": "app.c", "to": "app.d"})
        .await
        .unwrap();
    db.collection::<Document>("d").drop().await.unwrap();
    db.create_collection("e").await.unwrap();
    db.drop().await.unwrap();

    let all = entries(&client, doc! {"ts": {"$gt": start}}).await;
    let ops: Vec<(String, String)> = all
        .iter()
        .map(|e| {
            (
                e.get_str("op").unwrap().to_string(),
                e.get_str("ns").unwrap().to_string(),
            )
        })
        .collect();
    let expect = |op: &str, ns: &str| (op.to_string(), ns.to_string());
    assert_eq!(
        ops,
        vec![
            expect("c", "app.$cmd"), // create (implicit, by the insert)
            expect("i", "app.c"),
            expect("i", "app.c"),
            expect("u", "app.c"),
            expect("u", "app.c"),
            expect("d", "app.c"),
            expect("c", "app.$cmd"), // createIndexes
            expect("c", "app.$cmd"), // dropIndexes
            expect("c", "app.$cmd"), // renameCollection
            expect("c", "app.$cmd"), // drop
            expect("c", "app.$cmd"), // create e
            expect("c", "app.$cmd"), // drop e (by dropDatabase)
            expect("c", "app.$cmd"), // dropDatabase
        ],
        "{all:#?}"
    );
    for w in all.windows(2) {
        let (a, b) = (ts(&w[0]), ts(&w[1]));
        assert!((a.time, a.increment) < (b.time, b.increment), "{all:#?}");
    }
    for e in &all {
        assert_common(e, 1);
    }
    let coll_ui = ui(&all[1]);
    assert_eq!(
        all[0].get_document("o").unwrap().get_str("create").ok(),
        Some("c")
    );
    assert_eq!(ui(&all[0]), coll_ui);
    assert_eq!(
        all[1].get_document("o2").unwrap(),
        &doc! {"_id": 1},
        "{}",
        all[1]
    );
    assert_eq!(all[2].get_document("o").unwrap(), &doc! {"_id": 2, "a": 2});
    assert_eq!(
        all[3].get_document("o").unwrap(),
        &doc! {"$v": 2, "diff": {"d": {"arr": false}, "u": {"a": 5}, "i": {"new": true}, "sn": {"u": {"y": 3}}}},
        "{}",
        all[3]
    );
    assert_eq!(all[3].get_document("o2").unwrap(), &doc! {"_id": 1});
    // A replacement records the whole new document.
    assert_eq!(all[4].get_document("o").unwrap(), &doc! {"_id": 2, "b": 1});
    assert_eq!(all[5].get_document("o").unwrap(), &doc! {"_id": 1});
    assert_eq!(ui(&all[5]), coll_ui);
    let create_index = all[6].get_document("o").unwrap();
    assert_eq!(create_index.get_str("createIndexes").ok(), Some("c"));
    assert_eq!(create_index.get_document("key").unwrap(), &doc! {"b": 1});
    assert_eq!(create_index.get_str("name").ok(), Some("b_1"));
    assert_eq!(
        all[7].get_document("o").unwrap(),
        &doc! {"dropIndexes": "c", "index": "b_1"}
    );
    let rename = all[8].get_document("o").unwrap();
    assert_eq!(rename.get_str("renameCollection").ok(), Some("app.c"));
    assert_eq!(rename.get_str("to").ok(), Some("app.d"));
    assert_eq!(ui(&all[8]), coll_ui);
    assert_eq!(all[9].get_document("o").unwrap(), &doc! {"drop": "d"});
    assert_eq!(
        all[9].get_document("o2").unwrap(),
        &doc! {"numRecords": 1i64}
    );
    assert_eq!(
        all[12].get_document("o").unwrap(),
        &doc! {"dropDatabase": 1}
    );
    assert!(!all[12].contains_key("ui"));

    // Writes to `local` are not recorded.
    let before = entries(&client, doc! {}).await.len();
    client
        .database("local")
        .collection::<Document>("scratch")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    assert_eq!(entries(&client, doc! {}).await.len(), before);

    // Only the server writes the live oplog.
    let local = client.database("local");
    for cmd in [
        doc! {"insert": "oplog.rs", "documents": [{"x": 1}]},
        doc! {"delete": "oplog.rs", "deletes": [{"q": {}, "limit": 0}]},
        doc! {"drop": "oplog.rs"},
    ] {
        expect_code(local.run_command(cmd).await, 20);
    }

    // The oplog is capped at --oplogSize.
    let stats = client
        .database("local")
        .run_command(doc! {"collStats": "oplog.rs"})
        .await
        .unwrap();
    assert_eq!(stats.get_bool("capped").ok(), Some(true), "{stats}");
    assert_eq!(num(&stats, "maxSize"), 16 * 1024 * 1024, "{stats}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_keeps_no_oplog() {
    let ts_ = start().await;
    ts_.tcp
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    let names = ts_
        .tcp
        .database("local")
        .list_collection_names()
        .await
        .unwrap();
    assert!(!names.contains(&"oplog.rs".to_string()), "{names:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tailable_cursor_follows_the_oplog() {
    let ts_ = start_repl_set().await;
    let client = direct_client(ts_.server.port()).await;
    let last = entries(&client, doc! {}).await;
    let after = ts(last.last().unwrap());
    let oplog = client.database("local").collection::<Document>("oplog.rs");
    let mut cursor = oplog
        .find(doc! {"ts": {"$gt": after}})
        .with_options(
            FindOptions::builder()
                .cursor_type(CursorType::TailableAwait)
                .max_await_time(Duration::from_secs(5))
                .build(),
        )
        .await
        .unwrap();
    let writer = client.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        writer
            .database("app")
            .collection::<Document>("t")
            .insert_one(doc! {"_id": "tailed"})
            .await
            .unwrap();
    });
    let mut seen = Vec::new();
    while seen.len() < 2 {
        let next = tokio::time::timeout(Duration::from_secs(10), cursor.try_next())
            .await
            .expect("the insert's entries arrive")
            .unwrap();
        if let Some(e) = next {
            seen.push(e);
        }
    }
    // The implicit create, then the insert.
    assert_eq!(seen[0].get_str("op").ok(), Some("c"), "{seen:?}");
    assert_eq!(seen[1].get_str("op").ok(), Some("i"), "{seen:?}");
    assert_eq!(seen[1].get_document("o").unwrap(), &doc! {"_id": "tailed"});
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_oldest_entries_make_room() {
    let ts_ = start_repl_set_with(|c| c.oplog_size_mb = Some(1)).await;
    let client = direct_client(ts_.server.port()).await;
    let c = client.database("app").collection::<Document>("big");
    let pad = "x".repeat(10_000);
    for i in 0..300 {
        c.insert_one(doc! {"_id": i, "pad": pad.clone()})
            .await
            .unwrap();
    }
    let all = entries(&client, doc! {}).await;
    let bytes: usize = all
        .iter()
        .map(|e| {
            bson::RawDocumentBuf::try_from(e)
                .map(|v| v.as_bytes().len())
                .unwrap_or(0)
        })
        .sum();
    assert!(bytes <= 1024 * 1024, "{bytes}");
    assert!(all.len() < 300, "{}", all.len());
    // The newest entry is the last insert.
    let newest = all.last().unwrap();
    assert_eq!(newest.get_document("o2").unwrap(), &doc! {"_id": 299});
    // The collection itself is whole.
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 300);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn entries_survive_a_restart_and_time_goes_on() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    // A fixed port: the configuration names this node by address.
    let (port, cfg) = lsm_member(dir.path(), &dbpath);
    let server = Server::start(cfg()).await.unwrap();
    initiate(port).await;
    let client = direct_client(port).await;
    client
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let before = entries(&client, doc! {}).await;
    shutdown_by_command(server, client).await;

    let mut server = None;
    for _ in 0..100 {
        match Server::start(cfg()).await {
            Ok(s) => {
                server = Some(s);
                break;
            }
            Err(e) if e.code.code() == 98 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("restart failed: {} ({:?})", e.message, e.code),
        }
    }
    let server = server.unwrap();
    let client = direct_client(port).await;
    client
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 2})
        .await
        .unwrap();
    let after = entries(&client, doc! {}).await;
    assert_eq!(&after[..before.len()], &before[..]);
    let new: Vec<&Document> = after[before.len()..].iter().collect();
    // The new primary's no-op, then the insert, in the new term.
    assert_eq!(new.len(), 2, "{new:?}");
    assert_eq!(
        new[0].get_document("o").unwrap(),
        &doc! {"msg": "new primary"}
    );
    assert_eq!(new[1].get_document("o2").unwrap(), &doc! {"_id": 2});
    assert_common(new[1], 2);
    let (a, b) = (ts(before.last().unwrap()), ts(new[0]));
    assert!((a.time, a.increment) < (b.time, b.increment));
    server.shutdown();
    drop(client);
    server.wait().await;
}
