//! The server on the `postgres` engine answers as a mongos (issue 18): its
//! `hello` is mongos 8's (`msg: "isdbgrid"`, no set), replies carry
//! `$clusterTime` and `operationTime`, replica-set commands are refused as
//! through mongos, and drivers retry writes: a write with `lsid` and
//! `txnNumber` executes once, its retry (after the connection closed, or on
//! the next server over the same store) answers the first outcome from the
//! session's record, written in the write's batch. Transactions run (a
//! commit retried on the next server succeeds from the record); change
//! streams are refused with an error naming the engine. Each test starts
//! its own PostgreSQL schema (skipped with a loud message when PostgreSQL's
//! binaries are missing, failed in CI).

use std::sync::Arc;

use bisondb_postgres::testing::TestCluster;
use bisondb_server::{PostgresConfig, RunningServer, Server, ServerConfig};
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::Client;

use crate::common::{self, error_code, num, tcp_uri};

/// A postgres store for one test, with the cluster kept alive meanwhile.
fn store() -> Option<(Arc<TestCluster>, PostgresConfig)> {
    let cluster = TestCluster::shared()?;
    let pg = PostgresConfig {
        uri: Some(cluster.fresh_schema_uri()),
        pool_size: 16,
        ..Default::default()
    };
    Some((cluster, pg))
}

fn mongos_config(dir: &std::path::Path, pg: &PostgresConfig) -> ServerConfig {
    let mut c = common::config(dir);
    c.storage_engine = "postgres".into();
    c.postgres = pg.clone();
    c.unix_socket = false;
    c.enable_test_commands = true;
    c
}

/// Starts a server on `pg`, retrying while a stopped one still holds the
/// store (its connections release it a moment after it stopped).
async fn start(dir: &std::path::Path, pg: &PostgresConfig) -> (RunningServer, Client) {
    let mut last = None;
    for _ in 0..50 {
        match Server::start(mongos_config(dir, pg)).await {
            Ok(server) => {
                let client = Client::with_uri_str(tcp_uri(server.port()))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                return (server, client);
            }
            Err(e) => {
                last = Some(format!("{} ({:?})", e.message, e.code));
                tokio::time::sleep(std::time::Duration::from_millis(100)).await;
            }
        }
    }
    panic!("postgres server: {last:?}");
}

async fn stop(server: RunningServer, client: Client) {
    server.shutdown();
    drop(client);
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_answers_as_a_mongos() {
    let Some((_cluster, pg)) = store() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &pg).await;
    let admin = client.database("admin");
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_str("msg").ok(), Some("isdbgrid"), "{hello}");
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
    for absent in ["setName", "hosts", "secondary", "readOnly", "isreplicaset"] {
        assert!(!hello.contains_key(absent), "{absent} in {hello}");
    }
    assert_eq!(num(&hello, "maxWireVersion"), 25);
    assert_eq!(num(&hello, "minWireVersion"), 0);
    assert_eq!(num(&hello, "maxWriteBatchSize"), 100_000);
    assert_eq!(num(&hello, "logicalSessionTimeoutMinutes"), 30);
    let tv = hello.get_document("topologyVersion").unwrap();
    assert!(tv.get_object_id("processId").is_ok(), "{hello}");
    assert!(hello.get_timestamp("operationTime").is_ok(), "{hello}");
    let ct = hello.get_document("$clusterTime").unwrap();
    assert!(ct.get_timestamp("clusterTime").unwrap().time > 0, "{hello}");
    let legacy = admin.run_command(doc! {"isMaster": 1}).await.unwrap();
    assert_eq!(legacy.get_bool("ismaster").ok(), Some(true), "{legacy}");
    assert_eq!(legacy.get_str("msg").ok(), Some("isdbgrid"), "{legacy}");

    // A write command's operationTime is a new tick of the clock.
    let db = client.database("m");
    let before = hello.get_timestamp("operationTime").unwrap();
    let wrote = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap();
    let after = wrote.get_timestamp("operationTime").unwrap();
    assert!(
        (after.time, after.increment) > (before.time, before.increment),
        "{wrote}"
    );
    // Causal consistency: a read after that time is served at once.
    let read = db
        .run_command(doc! {"find": "c", "readConcern": {"afterClusterTime": after}})
        .await
        .unwrap();
    let batch = read
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{read}");

    // Replica-set commands are refused as through mongos.
    for cmd in ["replSetGetStatus", "replSetGetConfig", "replSetInitiate"] {
        let e = admin.run_command(doc! {cmd: 1}).await.unwrap_err();
        assert_eq!(error_code(&e), Some(59), "{cmd}: {e:?}");
    }
    // The oplog is not kept: change streams say so.
    let Err(e) = db.collection::<Document>("c").watch().await else {
        panic!("a change stream opened on the postgres engine");
    };
    assert_eq!(error_code(&e), Some(40573), "{e:?}");
    assert!(format!("{e:?}").contains("postgres"), "{e:?}");
    stop(server, client).await;
}

/// `checkMetadataConsistency` (the drivers' run-command specification runs
/// it through `runCursorCommand` on sharded clusters): one store holds
/// everything, so the cursor of inconsistencies is empty for the cluster, a
/// database and a collection; its options are checked as mongos does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn check_metadata_consistency_finds_nothing_on_one_store() {
    let Some((_cluster, pg)) = store() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &pg).await;
    let db = client.database("cmc");
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    for (on, cmd, ns) in [
        (
            "admin",
            doc! {"checkMetadataConsistency": 1},
            "admin.$cmd.aggregate",
        ),
        (
            "cmc",
            doc! {"checkMetadataConsistency": 1},
            "cmc.$cmd.aggregate",
        ),
        (
            "cmc",
            doc! {"checkMetadataConsistency": 1, "checkIndexes": true, "cursor": {"batchSize": 5}},
            "cmc.$cmd.aggregate",
        ),
        ("cmc", doc! {"checkMetadataConsistency": "c"}, "cmc.c"),
        (
            "cmc",
            doc! {"checkMetadataConsistency": 1, "coll": "c"},
            "cmc.c",
        ),
    ] {
        let reply = client.database(on).run_command(cmd.clone()).await.unwrap();
        let cursor = reply
            .get_document("cursor")
            .unwrap_or_else(|e| panic!("{cmd}: {e} in {reply}"));
        assert_eq!(cursor.get_i64("id").ok(), Some(0), "{cmd}: {reply}");
        assert_eq!(cursor.get_str("ns").ok(), Some(ns), "{cmd}: {reply}");
        let batch = cursor.get_array("firstBatch").unwrap();
        assert!(batch.is_empty(), "{cmd}: {reply}");
    }
    for bad in [
        doc! {"checkMetadataConsistency": 1, "checkIndexes": "yes"},
        doc! {"checkMetadataConsistency": 1, "cursor": {"batchSize": -1}},
        doc! {"checkMetadataConsistency": 1, "cursor": 1},
    ] {
        let e = db.run_command(bad.clone()).await.unwrap_err();
        assert!(
            matches!(error_code(&e), Some(2) | Some(14) | Some(51024)),
            "{bad}: {e:?}"
        );
    }
    let e = db
        .run_command(doc! {"checkMetadataConsistency": 1, "nosuchoption": 1})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(40415), "{e:?}");
    let listed = client
        .database("admin")
        .run_command(doc! {"listCommands": 1})
        .await
        .unwrap();
    let commands = listed.get_document("commands").unwrap();
    assert!(
        commands.contains_key("checkMetadataConsistency"),
        "{listed}"
    );
    stop(server, client).await;
}

/// The test-only `onPrimaryTransactionalWrite` fail point: the write
/// commits, then the connection closes before the reply.
async fn hang_up_after_next_write(client: &Client) {
    client
        .database("admin")
        .run_command(
            doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": {"times": 1}, "data": {}},
        )
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_retries_writes_and_each_runs_once() {
    let Some((_cluster, pg)) = store() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &pg).await;
    let c = client.database("m").collection::<Document>("c");
    // The connection closes before the insert runs: the retry runs it.
    client
        .database("admin")
        .run_command(
            doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["insert"], "closeConnection": true}},
        )
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    // The connection closes after the insert committed: the retry answers
    // from the session's record and writes nothing more.
    hang_up_after_next_write(&client).await;
    c.insert_one(doc! {"_id": 2, "x": 0}).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
    hang_up_after_next_write(&client).await;
    c.update_one(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .await
        .unwrap();
    // findAndModify's retry returns the document of the first attempt.
    hang_up_after_next_write(&client).await;
    let got = c
        .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(num(&got, "x"), 2, "{got}");
    let stored = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&stored, "x"), 2, "a retried write ran twice: {stored}");
    hang_up_after_next_write(&client).await;
    c.delete_one(doc! {"_id": 2}).await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    // The session records went to the store with the writes, listing what
    // each statement wrote.
    let records: Vec<Document> = {
        use futures::TryStreamExt;
        client
            .database("config")
            .collection::<Document>("transactions")
            .find(doc! {})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    assert!(!records.is_empty());
    assert!(
        records.iter().all(|r| r.get_array("stmts").is_ok()),
        "{records:?}"
    );
    stop(server, client).await;
}

/// A new session id, as a driver makes one.
fn new_lsid() -> Document {
    doc! {"id": bson::Binary {
        subtype: bson::spec::BinarySubtype::Uuid,
        bytes: bson::Uuid::new().bytes().to_vec(),
    }}
}

/// A retry that reaches the next server over the store (the first one
/// stopped after the write) is answered from the session's record: nothing
/// runs twice, a findAndModify returns its first document, and an older
/// number is refused.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_on_the_next_server_runs_nothing_twice() {
    let Some((_cluster, pg)) = store() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &pg).await;
    let lsid = new_lsid();
    let db = client.database("m");
    let insert = doc! {"insert": "c", "documents": [{"_id": 1, "x": 0}, {"_id": 2, "x": 0}],
    "lsid": lsid.clone(), "txnNumber": 1i64};
    let update = doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$inc": {"x": 1}}},
    {"q": {"_id": 3}, "u": {"$set": {"x": 7}}, "upsert": true}],
    "lsid": lsid.clone(), "txnNumber": 2i64};
    let first = db.run_command(insert.clone()).await.unwrap();
    assert_eq!(num(&first, "n"), 2, "{first}");
    let updated = db.run_command(update.clone()).await.unwrap();
    assert_eq!(num(&updated, "n"), 2, "{updated}");
    let fam = doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$inc": {"x": 1}},
    "lsid": lsid.clone(), "txnNumber": 3i64};
    let first_fam = db.run_command(fam.clone()).await.unwrap();
    assert_eq!(
        num(first_fam.get_document("value").unwrap(), "x"),
        0,
        "{first_fam}"
    );
    stop(server, client).await;

    let next = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(next.path(), &pg).await;
    let db = client.database("m");
    // The latest number's retry: findAndModify's first reply, document
    // and all.
    let again = db.run_command(fam).await.unwrap();
    assert_eq!(
        again.get_document("value").ok(),
        first_fam.get_document("value").ok(),
        "{again}"
    );
    assert_eq!(
        again.get_document("lastErrorObject").ok(),
        first_fam.get_document("lastErrorObject").ok(),
        "{again}"
    );
    // An older number is too old.
    let e = db.run_command(update.clone()).await.unwrap_err();
    assert_eq!(error_code(&e), Some(225), "{e:?}");
    // A new number whose first attempt ran on the stopped server.
    let delete = doc! {"delete": "c", "deletes": [{"q": {"_id": 1}, "limit": 1}],
    "lsid": lsid.clone(), "txnNumber": 4i64};
    let update5 = doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$inc": {"x": 10}}},
    {"q": {"_id": 4}, "u": {"$set": {"x": 1}}, "upsert": true}],
    "lsid": lsid.clone(), "txnNumber": 5i64};
    db.run_command(delete.clone()).await.unwrap();
    let r5 = db.run_command(update5.clone()).await.unwrap();
    // Another session's batch of inserts (kept as one run of statements).
    let other = new_lsid();
    let batch = doc! {"insert": "d", "documents": (10..15).map(|i| doc! {"_id": i}).collect::<Vec<_>>(),
    "lsid": other, "txnNumber": 1i64};
    assert_eq!(num(&db.run_command(batch.clone()).await.unwrap(), "n"), 5);
    stop(server, client).await;

    let third = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(third.path(), &pg).await;
    let db = client.database("m");
    let again = db.run_command(update5).await.unwrap();
    assert_eq!(num(&again, "n"), num(&r5, "n"), "{again} vs {r5}");
    assert_eq!(
        num(&again, "nModified"),
        num(&r5, "nModified"),
        "{again} vs {r5}"
    );
    assert_eq!(
        again.get_array("upserted").ok().map(|u| u.len()),
        Some(1),
        "{again}"
    );
    let again = db.run_command(batch).await.unwrap();
    assert_eq!(num(&again, "n"), 5, "{again}");
    assert!(!again.contains_key("writeErrors"), "{again}");
    let d = db.collection::<Document>("d");
    assert_eq!(d.count_documents(doc! {}).await.unwrap(), 5);
    let c = db.collection::<Document>("c");
    let docs: Vec<Document> = {
        use futures::TryStreamExt;
        c.find(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    let xs: Vec<(i64, i64)> = docs.iter().map(|d| (num(d, "_id"), num(d, "x"))).collect();
    // _id 2: once by findAndModify, once by txnNumber 5's $inc.
    assert_eq!(xs, vec![(2, 11), (3, 7), (4, 1)], "{docs:?}");
    stop(server, client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transactions_commit_or_abort_as_one() {
    let Some((_cluster, pg)) = store() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &pg).await;
    let c = client.database("m").collection::<Document>("c");
    c.insert_one(doc! {"_id": 0}).await.unwrap();
    let mut s = client.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1}).session(&mut s).await.unwrap();
    c.update_one(doc! {"_id": 0}, doc! {"$set": {"x": 1}})
        .session(&mut s)
        .await
        .unwrap();
    // Not visible outside before the commit.
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    s.commit_transaction().await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
    let zero = c.find_one(doc! {"_id": 0}).await.unwrap().unwrap();
    assert_eq!(zero.get("x"), Some(&Bson::Int32(1)), "{zero}");
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 2}).session(&mut s).await.unwrap();
    s.abort_transaction().await.unwrap();
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
    drop(s);
    // A commit retried on the next server (the first stopped after the
    // commit) succeeds from the session's record and writes nothing again.
    let lsid = new_lsid();
    let db = client.database("m");
    db.run_command(
        doc! {"insert": "c", "documents": [{"_id": 3}], "lsid": lsid.clone(),
        "txnNumber": 1i64, "autocommit": false, "startTransaction": true},
    )
    .await
    .unwrap();
    let commit =
        doc! {"commitTransaction": 1, "lsid": lsid.clone(), "txnNumber": 1i64, "autocommit": false};
    let admin = client.database("admin");
    admin.run_command(commit.clone()).await.unwrap();
    stop(server, client).await;
    let next = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(next.path(), &pg).await;
    client.database("admin").run_command(commit).await.unwrap();
    let c = client.database("m").collection::<Document>("c");
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 3);
    stop(server, client).await;
}
