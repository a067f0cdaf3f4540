//! Retryable writes in replica-set mode: a write with `lsid` and `txnNumber`
//! runs each statement once, a retry answers what the first attempt did
//! (the same document for findAndModify, the rest of a partly applied
//! batch run), an older number is 225, commands that are not retryable
//! writes refuse a number (50768), the driver's own retry after a
//! retryable write concern error applies the write once, and errors a
//! driver retries on carry `RetryableWriteError`, and the test-only
//! `onPrimaryTransactionalWrite` fail point drivers' suites provoke retries
//! with.

use crate::common;

use crate::common::{error_code, expect_code, num};
use bson::{doc, Document, Timestamp};
use mongodb::{ClientSession, Database};

async fn session_db(ts: &common::TestServer) -> (Database, ClientSession) {
    let db = ts.tcp.database("rw");
    let s = ts.tcp.start_session().await.unwrap();
    (db, s)
}

async fn run(
    db: &Database,
    s: &mut ClientSession,
    cmd: Document,
) -> mongodb::error::Result<Document> {
    db.run_command(cmd).session(s).await
}

async fn count(db: &Database) -> u64 {
    db.collection::<Document>("c")
        .count_documents(doc! {})
        .await
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_same_txn_number_inserts_once() {
    let ts = common::start_repl_set().await;
    let (db, mut s) = session_db(&ts).await;
    let cmd = doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2}], "txnNumber": 1i64};
    let first = run(&db, &mut s, cmd.clone()).await.unwrap();
    assert_eq!(num(&first, "n"), 2);
    // The retry answers the same count and writes nothing (no duplicate key).
    let retry = run(&db, &mut s, cmd).await.unwrap();
    assert_eq!(num(&retry, "n"), 2, "{retry}");
    assert!(!retry.contains_key("writeErrors"), "{retry}");
    assert_eq!(count(&db).await, 2);
    // A new number is a new write.
    let e = run(
        &db,
        &mut s,
        doc! {"insert": "c", "documents": [{"_id": 1}], "txnNumber": 2i64},
    )
    .await
    .unwrap();
    assert!(e.contains_key("writeErrors"), "{e}");
    // An older number is too old.
    let old = expect_code(
        run(
            &db,
            &mut s,
            doc! {"insert": "c", "documents": [{"_id": 9}], "txnNumber": 1i64},
        )
        .await,
        225,
    );
    assert!(common::error_message(&old).contains("txnNumber 1"), "{old}");
    assert_eq!(count(&db).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partly_applied_batch_runs_only_the_rest() {
    let ts = common::start_repl_set().await;
    let (db, mut s) = session_db(&ts).await;
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 2})
        .await
        .unwrap();
    let cmd = doc! {"insert": "c", "documents": [{"_id": 1}, {"_id": 2, "new": true}, {"_id": 3}], "txnNumber": 5i64};
    let first = run(&db, &mut s, cmd.clone()).await.unwrap();
    assert_eq!(num(&first, "n"), 1, "{first}");
    assert!(first.contains_key("writeErrors"));
    // The failed statement may succeed on the retry; the one that ran does
    // not run again (it would be a duplicate key).
    db.collection::<Document>("c")
        .delete_one(doc! {"_id": 2})
        .await
        .unwrap();
    let retry = run(&db, &mut s, cmd).await.unwrap();
    assert_eq!(num(&retry, "n"), 3, "{retry}");
    assert!(!retry.contains_key("writeErrors"), "{retry}");
    assert_eq!(count(&db).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_deletes_and_find_and_modify_apply_once() {
    let ts = common::start_repl_set().await;
    let (db, mut s) = session_db(&ts).await;
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "x": 0},
        doc! {"_id": 2},
        doc! {"_id": 3},
    ])
    .await
    .unwrap();
    let update = doc! {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$inc": {"x": 1}}},
        {"q": {"_id": 7}, "u": {"$set": {"y": 1}}, "upsert": true},
    ], "txnNumber": 1i64};
    let first = run(&db, &mut s, update.clone()).await.unwrap();
    let retry = run(&db, &mut s, update).await.unwrap();
    assert_eq!(num(&retry, "n"), num(&first, "n"));
    assert_eq!(num(&retry, "nModified"), 1);
    assert_eq!(
        retry.get_array("upserted").ok(),
        first.get_array("upserted").ok()
    );
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 1, "the $inc ran twice: {one}");

    let delete = doc! {"delete": "c", "deletes": [{"q": {"_id": {"$in": [2, 3]}}, "limit": 0}], "txnNumber": 2i64};
    let first = run(&db, &mut s, delete.clone()).await.unwrap();
    assert_eq!(num(&first, "n"), 2);
    // The retry reports the two documents the first attempt deleted.
    c.insert_one(doc! {"_id": 2}).await.unwrap();
    let retry = run(&db, &mut s, delete).await.unwrap();
    assert_eq!(num(&retry, "n"), 2);
    assert!(c.find_one(doc! {"_id": 2}).await.unwrap().is_some());

    let fam = doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"x": 10}}, "new": true, "txnNumber": 3i64};
    let first = run(&db, &mut s, fam.clone()).await.unwrap();
    let retry = run(&db, &mut s, fam).await.unwrap();
    assert_eq!(
        first.get_document("value").unwrap(),
        &doc! {"_id": 1, "x": 11}
    );
    assert_eq!(
        retry.get_document("value").ok(),
        first.get_document("value").ok()
    );
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 11);

    // The session's record in config.transactions.
    let rec = ts
        .tcp
        .database("config")
        .collection::<Document>("transactions")
        .find_one(doc! {"_id.id": s.id().get("id").cloned().unwrap()})
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no config.transactions record"));
    assert_eq!(rec.get_i64("txnNum").ok(), Some(3), "{rec}");
    assert!(rec.get_datetime("lastWriteDate").is_ok(), "{rec}");
    assert!(rec.get_document("lastWriteOpTime").is_ok(), "{rec}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_retryable_writes_take_a_txn_number() {
    let ts = common::start_repl_set().await;
    let (db, mut s) = session_db(&ts).await;
    for cmd in [
        doc! {"find": "c", "txnNumber": 1i64},
        doc! {"count": "c", "txnNumber": 1i64},
        doc! {"create": "d", "txnNumber": 1i64},
    ] {
        expect_code(run(&db, &mut s, cmd).await, 50768);
    }
    expect_code(
        run(
            &db,
            &mut s,
            doc! {"find": "c", "txnNumber": 1i64, "autocommit": true},
        )
        .await,
        72,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_driver_retries_after_a_retryable_write_concern_error_once() {
    let ts = common::start_repl_set_with(|c| {
        c.apply_set_parameter_arg("enableTestCommands=1").unwrap();
    })
    .await;
    let admin = ts.tcp.database("admin");
    // The write happens, its reply says it may not have: the driver retries.
    admin
        .run_command(doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["insert", "update"], "writeConcernError": {"code": 262, "errmsg": "exceeded time limit"}}})
        .await
        .unwrap();
    let c = ts.tcp.database("rw").collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    assert_eq!(count(&ts.tcp.database("rw")).await, 1);
    admin
        .run_command(doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["update"], "writeConcernError": {"code": 262, "errmsg": "exceeded time limit"}}})
        .await
        .unwrap();
    c.update_one(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .await
        .unwrap();
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 1, "the retried $inc ran twice: {one}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_drivers_retry_on_carry_the_label() {
    // Before replSetInitiate a member is not primary: 10107, retryable.
    let ts = common::start_with(|c| c.repl_set_name = Some(common::SET_NAME.into())).await;
    let direct = common::direct_client(ts.server.port()).await;
    let db = direct.database("rw");
    let mut s = direct.start_session().await.unwrap();
    let e = run(
        &db,
        &mut s,
        doc! {"insert": "c", "documents": [{"_id": 1}], "txnNumber": 1i64},
    )
    .await
    .unwrap_err();
    assert_eq!(error_code(&e), Some(10107));
    assert!(e.contains_label("RetryableWriteError"), "{e:?}");
    // Without a transaction number the write is not retryable: no label.
    let e = run(&db, &mut s, doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap_err();
    assert!(!e.contains_label("RetryableWriteError"), "{e:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oplog_entries_carry_the_session_and_number() {
    let ts = common::start_repl_set().await;
    let (db, mut s) = session_db(&ts).await;
    run(
        &db,
        &mut s,
        doc! {"insert": "c", "documents": [{"_id": 42}], "txnNumber": 4i64},
    )
    .await
    .unwrap();
    let e = ts
        .tcp
        .database("local")
        .collection::<Document>("oplog.rs")
        .find_one(doc! {"ns": "rw.c", "o._id": 42})
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("no oplog entry"));
    assert_eq!(e.get_i64("txnNumber").ok(), Some(4), "{e}");
    assert_eq!(e.get_document("lsid").unwrap().get("id"), s.id().get("id"));
}

/// The entries of one retryable write, oldest first.
async fn session_entries(client: &mongodb::Client, lsid: &Document) -> Vec<Document> {
    use futures::TryStreamExt;
    client
        .database("local")
        .collection::<Document>("oplog.rs")
        .find(doc! {"lsid.id": lsid.get("id").cloned().unwrap()})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap()
}

/// What each statement of a retryable write did survives a restart (lsm):
/// the oplog entries carry `stmtId` and `prevOpTime` as mongod's, the
/// session's `config.transactions` record points at the last of them, and
/// a retry after the restart answers from them without running anything
/// twice; only a findAndModify, whose document is not in its entries, is
/// 217 IncompleteTransactionHistory.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retry_after_a_restart_runs_nothing_twice() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (port, cfg) = common::lsm_member(dir.path(), &dbpath);
    let server = common::start_retrying(&cfg).await;
    common::initiate(port).await;
    let client = common::direct_client(port).await;
    let db = client.database("rw");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    let (a, b, d, f) = (
        doc! {"id": bson::Uuid::new()},
        doc! {"id": bson::Uuid::new()},
        doc! {"id": bson::Uuid::new()},
        doc! {"id": bson::Uuid::new()},
    );
    let insert = doc! {"insert": "c", "documents": [{"_id": 10}, {"_id": 11}], "lsid": a.clone(), "txnNumber": 1i64};
    let update = doc! {"update": "c", "updates": [
        {"q": {"_id": 1}, "u": {"$inc": {"x": 1}}},
        {"q": {"_id": 7}, "u": {"$inc": {"y": 1}}, "upsert": true},
    ], "lsid": b.clone(), "txnNumber": 3i64};
    let delete = doc! {"delete": "c", "deletes": [{"q": {"_id": {"$in": [10, 11]}}, "limit": 0}], "lsid": d.clone(), "txnNumber": 5i64};
    let fam = doc! {"findAndModify": "c", "query": {"_id": 1}, "update": {"$inc": {"x": 10}}, "new": true, "lsid": f.clone(), "txnNumber": 1i64};
    assert_eq!(num(&db.run_command(insert.clone()).await.unwrap(), "n"), 2);
    let updated = db.run_command(update.clone()).await.unwrap();
    assert_eq!(num(&updated, "n"), 2, "{updated}");
    assert_eq!(num(&db.run_command(delete.clone()).await.unwrap(), "n"), 2);
    db.run_command(fam.clone()).await.unwrap();

    // mongod's session fields: one statement per entry, each pointing at
    // the session's previous entry.
    let entries = session_entries(&client, &a).await;
    assert_eq!(entries.len(), 2, "{entries:?}");
    let zero = doc! {"ts": Timestamp { time: 0, increment: 0 }, "t": -1i64};
    assert_eq!(
        entries[0].get_i32("stmtId").ok(),
        Some(0),
        "{:?}",
        entries[0]
    );
    assert_eq!(entries[0].get_document("prevOpTime").ok(), Some(&zero));
    assert_eq!(entries[1].get_i32("stmtId").ok(), Some(1));
    let first_ts = entries[0].get_timestamp("ts").unwrap();
    assert_eq!(
        entries[1]
            .get_document("prevOpTime")
            .unwrap()
            .get_timestamp("ts")
            .ok(),
        Some(first_ts)
    );
    assert_eq!(entries[1].get_i64("txnNumber").ok(), Some(1));
    // The record names the last entry (they were written together).
    let rec = client
        .database("config")
        .collection::<Document>("transactions")
        .find_one(doc! {"_id.id": a.get("id").cloned().unwrap()})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        rec.get_document("lastWriteOpTime")
            .unwrap()
            .get_timestamp("ts")
            .ok(),
        entries[1].get_timestamp("ts").ok(),
        "{rec}"
    );
    let deletes = session_entries(&client, &d).await;
    assert_eq!(deletes.len(), 2, "{deletes:?}");
    assert!(deletes.iter().all(|e| e.get_i32("stmtId").ok() == Some(0)));

    common::shutdown_by_command(server, client).await;
    let server = common::start_retrying(&cfg).await;
    let client = common::direct_client(port).await;
    let db = client.database("rw");
    let c = db.collection::<Document>("c");
    // A document the delete removed comes back: the retried delete must not
    // remove it again.
    c.insert_one(doc! {"_id": 10}).await.unwrap();

    let retry = db.run_command(insert).await.unwrap();
    assert_eq!(num(&retry, "n"), 2, "{retry}");
    assert!(!retry.contains_key("writeErrors"), "{retry}");
    let retry = db.run_command(update).await.unwrap();
    assert_eq!(num(&retry, "n"), 2, "{retry}");
    assert_eq!(num(&retry, "nModified"), 1, "{retry}");
    assert_eq!(
        retry.get_array("upserted").ok(),
        updated.get_array("upserted").ok(),
        "{retry}"
    );
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 11, "the $inc ran again: {one}");
    let seven = c.find_one(doc! {"_id": 7}).await.unwrap().unwrap();
    assert_eq!(num(&seven, "y"), 1, "the upsert ran again: {seven}");
    let retry = db.run_command(delete).await.unwrap();
    assert_eq!(num(&retry, "n"), 2, "{retry}");
    assert!(c.find_one(doc! {"_id": 10}).await.unwrap().is_some());
    expect_code(db.run_command(fam).await, 217);
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 11);
    // The sessions go on with new numbers.
    let next =
        doc! {"insert": "c", "documents": [{"_id": 12}], "lsid": a.clone(), "txnNumber": 2i64};
    assert_eq!(num(&db.run_command(next).await.unwrap(), "n"), 1);
    server.shutdown();
    drop(client);
    server.wait().await;
}

/// `onPrimaryTransactionalWrite`: a statement that ran before the hang-up is
/// answered from history on the driver's retry; one failed before commit is
/// not written, so the retry writes it; failing every attempt leaves nothing.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_transactional_write_fail_point() {
    let ts = common::start_repl_set_with(|c| c.enable_test_commands = true).await;
    let admin = ts.tcp.database("admin");
    let db = ts.tcp.database("rw");
    let c = db.collection::<Document>("c");
    let fail_point = |mode: bson::Bson, data: Document| async {
        admin
            .run_command(doc! {"configureFailPoint": "onPrimaryTransactionalWrite", "mode": mode, "data": data})
            .await
            .unwrap();
    };
    // Committed, then the connection closes: the retry writes nothing more.
    fail_point(doc! {"times": 1}.into(), doc! {}).await;
    c.insert_one(doc! {"_id": 1}).await.unwrap();
    c.update_one(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .await
        .unwrap();
    // Not committed on the first attempt: the retry does it.
    fail_point(
        doc! {"times": 1}.into(),
        doc! {"failBeforeCommitExceptionCode": 1},
    )
    .await;
    c.update_one(doc! {"_id": 1}, doc! {"$inc": {"x": 1}})
        .await
        .unwrap();
    let one = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(num(&one, "x"), 2, "{one}");
    // Never committed: both attempts fail, nothing is written.
    fail_point(
        doc! {"times": 2}.into(),
        doc! {"failBeforeCommitExceptionCode": 1},
    )
    .await;
    c.insert_one(doc! {"_id": 2}).await.unwrap_err();
    assert_eq!(count(&db).await, 1);
    // With the connection kept, the failing statement is a write error and
    // an ordered batch stops there; the statements before it are written.
    fail_point(
        doc! {"skip": 1}.into(),
        doc! {"failBeforeCommitExceptionCode": 96, "closeConnection": false},
    )
    .await;
    let mut s = ts.tcp.start_session().await.unwrap();
    let r = run(
        &db,
        &mut s,
        doc! {"insert": "c", "documents": [{"_id": 3}, {"_id": 4}, {"_id": 5}], "txnNumber": 1i64},
    )
    .await
    .unwrap();
    // `skip: 1` lets the first statement through, so the failure is at
    // index 1. Under load the CI run once saw it one statement later (an
    // activation of the fail point this test does not account for; issue
    // 17's closing note): what must hold whatever the position is that the
    // batch stopped at the failing statement with every statement before it
    // written.
    let n = num(&r, "n");
    let errors = r.get_array("writeErrors").unwrap();
    assert_eq!(errors.len(), 1, "{r}");
    let first = errors[0].as_document().unwrap();
    assert_eq!((num(first, "index"), num(first, "code")), (n, 96), "{r}");
    assert!((1..=2).contains(&n), "{r}");
    fail_point("off".into(), doc! {}).await;
    assert_eq!(count(&db).await, 1 + u64::try_from(n).unwrap());
}
