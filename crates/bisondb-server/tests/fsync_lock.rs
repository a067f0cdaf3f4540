//! `fsync` with `lock: true` and `fsyncUnlock`, as mongod's fsyncLock: a write
//! from another client waits (it does not fail) while reads go on, the data
//! files of the lsm engine do not change while locked, the lock counts
//! nested holds, unlocking lets the waiting write finish, and a server
//! shut down while locked still stops.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use bson::{doc, Document};
use mongodb::Client;

use crate::common::{self, expect_code, num};

/// Every file under `dir` with its length and modification time.
fn files(dir: &Path) -> BTreeMap<PathBuf, (u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(meta) = entry.metadata() else {
                continue;
            };
            if meta.is_dir() {
                stack.push(path);
            } else if let Ok(modified) = meta.modified() {
                out.insert(path, (meta.len(), modified));
            }
        }
    }
    out
}

async fn admin(client: &Client, cmd: Document) -> mongodb::error::Result<Document> {
    client.database("admin").run_command(cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_while_locked_and_the_files_stay_put() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = common::restart_lsm(dir.path(), &dbpath).await;
    let other = Client::with_uri_str(common::tcp_uri(server.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let coll = client.database("fl").collection::<Document>("c");
    for i in 0..100 {
        coll.insert_one(doc! {"_id": i, "pad": "x".repeat(200)})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }

    // Unlocking what is not locked fails as on mongod.
    let e = expect_code(admin(&client, doc! {"fsyncUnlock": 1}).await, 20);
    assert!(
        common::error_message(&e).contains("fsyncUnlock called when not locked"),
        "{e}"
    );

    let locked = admin(&client, doc! {"fsync": 1, "lock": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(locked.get_i64("lockCount").ok(), Some(1), "{locked}");
    assert_eq!(
        locked.get_str("info").ok(),
        Some("now locked against writes, use db.fsyncUnlock() to unlock")
    );
    let before = files(&dbpath);
    assert!(!before.is_empty());

    // A write from another client waits...
    let writer = {
        let coll = other.database("fl").collection::<Document>("c");
        tokio::spawn(async move { coll.insert_one(doc! {"_id": "late"}).await })
    };
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(!writer.is_finished(), "the write waits for the lock");
    // ...while reads go on, and so does a plain fsync.
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(100));
    admin(&client, doc! {"fsync": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A second hold nests.
    let again = admin(&client, doc! {"fsync": 1, "lock": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(again.get_i64("lockCount").ok(), Some(2), "{again}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Compared after unlocking: a failed assertion with the write still
    // waiting would leave the server's runtime unable to stop.
    let during = files(&dbpath);

    let one = admin(&client, doc! {"fsyncUnlock": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(one.get_i64("lockCount").ok(), Some(1), "{one}");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished(), "still locked once");
    let zero = admin(&client, doc! {"fsyncUnlock": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(zero.get_i64("lockCount").ok(), Some(0), "{zero}");
    assert_eq!(zero.get_str("info").ok(), Some("fsyncUnlock completed"));
    assert_eq!(during, before, "the data files changed while locked");
    tokio::time::timeout(Duration::from_secs(10), writer)
        .await
        .unwrap_or_else(|e| panic!("the write never finished: {e}"))
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(101));
    drop(other);
    common::shutdown_by_command(server, client).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_locked_server_with_a_waiting_write_still_shuts_down() {
    let ts = common::start().await;
    let coll = ts.tcp.database("fl").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let locked = admin(&ts.tcp, doc! {"fsync": 1, "lock": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&locked, "lockCount"), 1);
    // fsync is admin-only, as on mongod.
    expect_code(
        ts.tcp
            .database("fl")
            .run_command(doc! {"fsyncUnlock": 1})
            .await,
        13,
    );
    let writer = {
        let coll = ts.unix.database("fl").collection::<Document>("c");
        tokio::spawn(async move { coll.insert_one(doc! {"_id": 2}).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(!writer.is_finished());
    let common::TestServer {
        server, tcp, dir, ..
    } = ts;
    common::shutdown_by_command(server, tcp).await;
    // The waiting write ended (with an error or a closed connection).
    let done = tokio::time::timeout(Duration::from_secs(10), writer).await;
    assert!(done.is_ok(), "the waiting write never ended");
    drop(dir);
}
