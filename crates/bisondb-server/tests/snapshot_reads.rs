//! Reads at a point in time in replica-set mode: `readConcern: {level:
//! "snapshot"}` on find, aggregate and distinct outside a transaction
//! answers the time it read at (`atClusterTime`, in the cursor or at the
//! top for distinct), a later read at that time sees that state whatever
//! was written since (a cursor's later batches too), `startTransaction`
//! with `atClusterTime` reads it and conflicts with later writes, and the
//! errors: a time in the future (72), before the history (239
//! SnapshotTooOld), past the window, with another level or
//! `afterClusterTime` (72), `$out` (72); through the driver's snapshot
//! sessions too. On the postgres engine (no history: each snapshot holds a
//! connection) only the times snapshot reads answered can be read (others
//! 239), and a transaction at `atClusterTime` is 238.

use crate::common;

use crate::common::{error_code, expect_code, first_batch, next_batch, num, run};
use bson::{doc, Bson, Document, Timestamp};
use mongodb::Database;

/// Whether the test engine keeps a history of snapshots (not postgres).
fn has_history() -> bool {
    common::test_engine() != "postgres"
}

fn cursor_time(reply: &Document) -> Timestamp {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_timestamp("atClusterTime"))
        .unwrap_or_else(|e| panic!("no cursor.atClusterTime ({e}): {reply}"))
}

fn snapshot(at: Option<Timestamp>) -> Document {
    match at {
        Some(t) => doc! {"level": "snapshot", "atClusterTime": t},
        None => doc! {"level": "snapshot"},
    }
}

async fn x_of(db: &Database, at: Timestamp) -> Vec<Bson> {
    let r = run(
        db,
        doc! {"find": "c", "filter": {}, "sort": {"_id": 1}, "readConcern": snapshot(Some(at))},
    )
    .await;
    assert_eq!(cursor_time(&r), at, "{r}");
    first_batch(&r)
        .iter()
        .map(|d| d.get("x").cloned().unwrap_or(Bson::Null))
        .collect()
}

/// A set with `{_id: 1, x: 1}` and `{_id: 2, x: 2}` in `snap.c`, and the
/// time a snapshot read of them answered.
async fn two_documents_and_their_time(
    ts: &common::TestServer,
) -> (Database, mongodb::Collection<Document>, Timestamp) {
    let db = ts.tcp.database("snap");
    let c = db.collection::<Document>("c");
    c.insert_many([doc! {"_id": 1, "x": 1}, doc! {"_id": 2, "x": 2}])
        .await
        .unwrap();
    let r = run(&db, doc! {"find": "c", "readConcern": snapshot(None)}).await;
    assert_eq!(first_batch(&r).len(), 2);
    let t = cursor_time(&r);
    (db, c, t)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_read_answers_its_time_and_reads_it_again_later() {
    if !has_history() {
        return;
    }
    let ts = common::start_repl_set().await;
    let (db, c, t) = two_documents_and_their_time(&ts).await;
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 10}})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 3, "x": 3}).await.unwrap();
    c.delete_one(doc! {"_id": 2}).await.unwrap();
    assert_eq!(x_of(&db, t).await, vec![Bson::Int32(1), Bson::Int32(2)]);
    // The present, read as a snapshot, has a later time.
    let now = run(&db, doc! {"find": "c", "readConcern": snapshot(None)}).await;
    let t2 = cursor_time(&now);
    assert!((t2.time, t2.increment) > (t.time, t.increment));
    assert_eq!(x_of(&db, t2).await, vec![Bson::Int32(10), Bson::Int32(3)]);
    // aggregate: in the cursor; distinct: at the top.
    let agg = run(
        &db,
        doc! {"aggregate": "c", "pipeline": [{"$count": "n"}], "cursor": {}, "readConcern": snapshot(Some(t))},
    )
    .await;
    assert_eq!(cursor_time(&agg), t);
    assert_eq!(num(&first_batch(&agg)[0], "n"), 2, "{agg}");
    let d = run(
        &db,
        doc! {"distinct": "c", "key": "x", "readConcern": snapshot(Some(t))},
    )
    .await;
    assert_eq!(d.get_timestamp("atClusterTime").ok(), Some(t), "{d}");
    assert_eq!(
        d.get_array("values").unwrap(),
        &vec![Bson::Int32(1), Bson::Int32(2)]
    );
    // Reads without a snapshot level carry no atClusterTime.
    let plain = run(&db, doc! {"find": "c"}).await;
    assert!(plain
        .get_document("cursor")
        .unwrap()
        .get("atClusterTime")
        .is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_cursor_reads_its_time_to_the_end() {
    if !has_history() {
        return;
    }
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("snap");
    let c = db.collection::<Document>("c");
    c.insert_many((0..5).map(|i| doc! {"_id": i, "x": i}))
        .await
        .unwrap();
    let r = run(
        &db,
        doc! {"find": "c", "sort": {"_id": 1}, "batchSize": 1, "readConcern": snapshot(None)},
    )
    .await;
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    c.update_many(doc! {}, doc! {"$set": {"x": -1}})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 9, "x": 9}).await.unwrap();
    let more = run(&db, doc! {"getMore": id, "collection": "c"}).await;
    let xs: Vec<i64> = next_batch(&more).iter().map(|d| num(d, "x")).collect();
    assert_eq!(xs, vec![1, 2, 3, 4], "{more}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn read_concern_errors_at_a_cluster_time() {
    if !has_history() {
        return;
    }
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("snap");
    let ins = run(&db, doc! {"insert": "c", "documents": [{"_id": 1}]}).await;
    let written = ins.get_timestamp("operationTime").unwrap();
    // Before any snapshot read the history does not reach back to it.
    let e = expect_code(
        db.run_command(doc! {"find": "c", "readConcern": snapshot(Some(written))})
            .await,
        239,
    );
    assert!(
        format!("{e}").contains("older than the oldest available"),
        "{e}"
    );
    let future = Timestamp {
        time: written.time + 3600,
        increment: 0,
    };
    for rc in [
        doc! {"level": "snapshot", "atClusterTime": future},
        doc! {"level": "snapshot", "atClusterTime": Timestamp { time: 0, increment: 0 }},
        doc! {"level": "majority", "atClusterTime": written},
        doc! {"atClusterTime": written},
        doc! {"level": "snapshot", "atClusterTime": written, "afterClusterTime": written},
    ] {
        let r = db
            .run_command(doc! {"find": "c", "readConcern": rc.clone()})
            .await;
        assert_eq!(error_code(&r.unwrap_err()), Some(72), "{rc}");
    }
    let e = db
        .run_command(doc! {"find": "c", "readConcern": {"level": "snapshot", "atClusterTime": 5}})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(14), "{e}");
    let e = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$out": "o"}], "cursor": {}, "readConcern": snapshot(None)})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(72), "{e}");
    assert!(!db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"o".to_string()));
}

/// `minSnapshotHistoryWindowInSeconds`: a time older than the window is
/// 239 once the history has moved past it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn times_older_than_the_window_are_too_old() {
    if !has_history() {
        return;
    }
    let ts = common::start_repl_set_with(|c| c.min_snapshot_history_window_seconds = 1).await;
    let db = ts.tcp.database("snap");
    run(&db, doc! {"insert": "c", "documents": [{"_id": 1}]}).await;
    let t = cursor_time(&run(&db, doc! {"find": "c", "readConcern": snapshot(None)}).await);
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    // A write past the window drops the history no read used since.
    run(&db, doc! {"insert": "c", "documents": [{"_id": 2}]}).await;
    expect_code(
        db.run_command(doc! {"find": "c", "readConcern": snapshot(Some(t))})
            .await,
        239,
    );
    let got = ts
        .tcp
        .database("admin")
        .run_command(doc! {"getParameter": 1, "minSnapshotHistoryWindowInSeconds": 1})
        .await
        .unwrap();
    assert_eq!(num(&got, "minSnapshotHistoryWindowInSeconds"), 1, "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_at_a_cluster_time_reads_it() {
    if !has_history() {
        return;
    }
    let ts = common::start_repl_set().await;
    let (db, c, t) = two_documents_and_their_time(&ts).await;
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 10}})
        .await
        .unwrap();
    let lsid = doc! {"id": bson::Uuid::new()};
    let first = run(
        &db,
        doc! {"find": "c", "filter": {"_id": 1}, "lsid": lsid.clone(), "txnNumber": 1i64,
        "startTransaction": true, "autocommit": false, "readConcern": snapshot(Some(t))},
    )
    .await;
    assert_eq!(num(&first_batch(&first)[0], "x"), 1, "{first}");
    // Writing a document changed after its time is a conflict (112): at
    // the write or, at the latest, at the commit.
    let w = db
        .run_command(
            doc! {"update": "c", "updates": [{"q": {"_id": 1}, "u": {"$set": {"y": 1}}}],
            "lsid": lsid.clone(), "txnNumber": 1i64, "autocommit": false},
        )
        .await;
    let e = match w {
        Err(e) => e,
        Ok(_) => db
            .client()
            .database("admin")
            .run_command(doc! {"commitTransaction": 1, "lsid": lsid.clone(), "txnNumber": 1i64, "autocommit": false})
            .await
            .expect_err("a write of a document changed after the transaction's time committed"),
    };
    assert_eq!(error_code(&e), Some(112), "{e}");
    assert!(c.find_one(doc! {"y": 1}).await.unwrap().is_none());
    // A document unchanged since can be written and committed.
    let lsid2 = doc! {"id": bson::Uuid::new()};
    run(
        &db,
        doc! {"update": "c", "updates": [{"q": {"_id": 2}, "u": {"$set": {"x": 20}}}],
        "lsid": lsid2.clone(), "txnNumber": 1i64, "startTransaction": true,
        "autocommit": false, "readConcern": snapshot(Some(t))},
    )
    .await;
    run(
        &ts.tcp.database("admin"),
        doc! {"commitTransaction": 1, "lsid": lsid2, "txnNumber": 1i64, "autocommit": false},
    )
    .await;
    let two = c.find_one(doc! {"_id": 2}).await.unwrap().unwrap();
    assert_eq!(num(&two, "x"), 20);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn driver_snapshot_sessions_read_their_first_time() {
    // On every engine: without a history too, the session's first read
    // keeps its snapshot for the later ones.
    let ts = common::start_repl_set().await;
    let c = ts.tcp.database("snap").collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "x": 1}).await.unwrap();
    let mut s = ts.tcp.start_session().snapshot(true).await.unwrap();
    let first = c
        .find_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(num(&first, "x"), 1);
    c.update_one(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .await
        .unwrap();
    let again = c
        .find_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(num(&again, "x"), 1, "the session reads its first time");
    let present = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&present, "x"), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_history_only_answered_times_are_read() {
    if has_history() {
        return;
    }
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("snap");
    let ins = run(&db, doc! {"insert": "c", "documents": [{"_id": 1}]}).await;
    let written = ins.get_timestamp("operationTime").unwrap();
    // A time no snapshot read answered: nothing kept for it.
    expect_code(
        db.run_command(doc! {"find": "c", "readConcern": snapshot(Some(written))})
            .await,
        239,
    );
    // A read of the present answers its time and keeps its snapshot: a
    // later read at that time (a snapshot session's) reads it, whatever
    // was written since.
    let r = run(&db, doc! {"find": "c", "readConcern": snapshot(None)}).await;
    assert_eq!(first_batch(&r).len(), 1);
    let t = cursor_time(&r);
    assert!(
        t >= written,
        "{t:?} covers the acknowledged write {written:?}"
    );
    run(&db, doc! {"insert": "c", "documents": [{"_id": 2}]}).await;
    let again = run(&db, doc! {"find": "c", "readConcern": snapshot(Some(t))}).await;
    assert_eq!(cursor_time(&again), t);
    assert_eq!(first_batch(&again).len(), 1, "the kept snapshot: {again}");
    let d = run(
        &db,
        doc! {"distinct": "c", "key": "_id", "readConcern": snapshot(Some(t))},
    )
    .await;
    assert_eq!(d.get_array("values").map(Vec::len).ok(), Some(1), "{d}");
    let now = run(&db, doc! {"find": "c", "readConcern": snapshot(None)}).await;
    assert_eq!(first_batch(&now).len(), 2);
    // A transaction at a point in time needs a history.
    let session = ts.tcp.start_session().await.unwrap();
    let lsid = session.id().clone();
    expect_code(
        db.run_command(doc! {
            "find": "c", "lsid": lsid, "txnNumber": 1i64, "startTransaction": true,
            "autocommit": false, "readConcern": snapshot(Some(t)),
        })
        .await,
        238,
    );
}
