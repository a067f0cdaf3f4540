//! The persistent `lsm` engine through the server: data survives a clean restart,
//! and a second server cannot open a dbpath that is in use.

use std::path::Path;

use crate::common::*;
use bisondb_server::{RunningServer, Server};
use bson::{doc, Document};
use mongodb::Client;

async fn start_lsm(dir: &Path, dbpath: &Path) -> (RunningServer, Client) {
    let server = match Server::start(lsm_config(dir, dbpath)).await {
        Ok(s) => s,
        Err(e) => panic!("lsm server failed to start: {} ({:?})", e.message, e.code),
    };
    let client = Client::with_uri_str(tcp_uri(server.port())).await.unwrap();
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn data_survives_a_clean_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");

    let (server, client) = start_lsm(dir.path(), &dbpath).await;
    let coll = client.database("keep").collection::<Document>("c");
    coll.insert_many((0..500).map(|i| doc! {"_id": i, "v": i}))
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 7}, doc! {"$set": {"v": "seven"}})
        .await
        .unwrap();
    coll.delete_many(doc! {"_id": {"$gte": 400}}).await.unwrap();
    client
        .database("keep")
        .create_collection("empty")
        .await
        .unwrap();
    // A journaled write is acknowledged only once durable.
    let r = client
        .database("keep")
        .run_command(
            doc! {"insert": "j", "documents": [{"_id": 1}], "writeConcern": {"w": 1, "j": true}},
        )
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 1, "{r}");
    shutdown_by_command(server, client).await;

    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    let coll = db.collection::<Document>("c");
    assert_eq!(count(&coll, doc! {}).await, 400);
    let seven = coll.find_one(doc! {"_id": 7}).await.unwrap().unwrap();
    assert_eq!(seven, doc! {"_id": 7, "v": "seven"});
    assert!(coll.find_one(doc! {"_id": 450}).await.unwrap().is_none());
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["c", "empty", "j"]);
    let stats = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    assert_eq!(num(&stats, "count"), 400, "{stats}");
    // Still writable after recovery, with the old keys still unique.
    expect_code(coll.insert_one(doc! {"_id": 1}).await, 11000);
    coll.insert_one(doc! {"_id": 1000}).await.unwrap();
    assert_eq!(count(&coll, doc! {}).await, 401);
    server.shutdown();
    drop(client);
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_server_on_the_same_dbpath_fails() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (server, client) = start_lsm(dir.path(), &dbpath).await;

    let other = tempfile::tempdir().unwrap();
    match Server::start(lsm_config(other.path(), &dbpath)).await {
        Ok(_) => panic!("two servers opened {}", dbpath.display()),
        Err(e) => {
            assert_eq!(e.code.code(), 98, "DBPathInUse: {}", e.message);
            assert!(
                e.message.contains(&dbpath.display().to_string()),
                "the error names the dbpath: {}",
                e.message
            );
        }
    }
    // The failed start did not disturb the running server.
    let coll = client.database("x").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(count(&coll, doc! {}).await, 1);
    server.shutdown();
    drop(client);
    server.wait().await;
}

/// `RunningServer::wait()` must leave the dbpath reusable: an in-process restart
/// (tests, embedding) right after it returns must not find the lock still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dbpath_is_free_once_wait_returns() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    // Several cycles, so a race that loses only sometimes still shows.
    for cycle in 0..10u64 {
        let server = match Server::start(lsm_config(dir.path(), &dbpath)).await {
            Ok(s) => s,
            Err(e) => panic!(
                "cycle {cycle}: restart right after wait() failed: {} ({:?})",
                e.message, e.code
            ),
        };
        let client = Client::with_uri_str(tcp_uri(server.port())).await.unwrap();
        let coll = client.database("cyc").collection::<Document>("c");
        coll.insert_one(doc! {"cycle": cycle as i64}).await.unwrap();
        assert_eq!(count(&coll, doc! {}).await, cycle + 1);
        // An idle connection left open at shutdown, as real clients do.
        let mut idle = tokio::net::TcpStream::connect(("127.0.0.1", server.port()))
            .await
            .unwrap();
        let r = raw_command(&mut idle, doc! {"ping": 1, "$db": "admin"}).await;
        assert!(is_num(r.get("ok").unwrap(), 1.0));
        drop(client);
        server.shutdown();
        server.wait().await;
    }
}
