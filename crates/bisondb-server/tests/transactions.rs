//! Multi-document transactions in replica-set mode through the driver's
//! session API: commit applies every write at once, abort none, outside
//! readers never see uncommitted writes, a transaction reads one snapshot,
//! two transactions writing one document conflict (112 with
//! TransientTransactionError), commands mongod refuses in a transaction are
//! refused (263), NoSuchTransaction, and a retried commit.

use crate::common;

use crate::common::{error_code, expect_code, num};
use bson::{doc, Document};
use mongodb::{ClientSession, Collection};

fn coll(ts: &common::TestServer) -> Collection<Document> {
    ts.tcp.database("tx").collection::<Document>("c")
}

async fn find_x(c: &Collection<Document>, s: Option<&mut ClientSession>) -> Option<i64> {
    let found = match s {
        Some(s) => c.find_one(doc! {"_id": 1}).session(s).await.unwrap(),
        None => c.find_one(doc! {"_id": 1}).await.unwrap(),
    };
    found.map(|d| num(&d, "x"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_applies_everything_at_once_and_abort_nothing() {
    let ts = common::start_repl_set().await;
    let c = coll(&ts);
    c.insert_one(doc! {"_id": 0}).await.unwrap();
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1, "x": 1})
        .session(&mut s)
        .await
        .unwrap();
    c.update_one(doc! {"_id": 0}, doc! {"$set": {"y": 1}})
        .session(&mut s)
        .await
        .unwrap();
    // Inside: its own writes; outside: none of them.
    assert_eq!(find_x(&c, Some(&mut s)).await, Some(1));
    assert_eq!(find_x(&c, None).await, None);
    assert!(c.find_one(doc! {"_id": 0, "y": 1}).await.unwrap().is_none());
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 1);
    s.commit_transaction().await.unwrap();
    assert_eq!(find_x(&c, None).await, Some(1));
    assert!(c.find_one(doc! {"_id": 0, "y": 1}).await.unwrap().is_some());
    assert_eq!(c.count_documents(doc! {}).await.unwrap(), 2);
    assert_eq!(c.estimated_document_count().await.unwrap(), 2);

    s.start_transaction().await.unwrap();
    c.delete_many(doc! {}).session(&mut s).await.unwrap();
    c.insert_one(doc! {"_id": 9}).session(&mut s).await.unwrap();
    s.abort_transaction().await.unwrap();
    assert_eq!(c.estimated_document_count().await.unwrap(), 2);
    assert!(c.find_one(doc! {"_id": 9}).await.unwrap().is_none());
    let v = ts
        .tcp
        .database("tx")
        .run_command(doc! {"validate": "c"})
        .await
        .unwrap();
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_transaction_reads_one_snapshot() {
    let ts = common::start_repl_set().await;
    let c = coll(&ts);
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    assert_eq!(find_x(&c, Some(&mut s)).await, Some(0));
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 5}})
        .await
        .unwrap();
    assert_eq!(find_x(&c, Some(&mut s)).await, Some(0));
    s.commit_transaction().await.unwrap();
    assert_eq!(find_x(&c, None).await, Some(5));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_first_writer_wins() {
    let ts = common::start_repl_set().await;
    let c = coll(&ts);
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    let mut a = ts.tcp.start_session().await.unwrap();
    let mut b = ts.tcp.start_session().await.unwrap();
    a.start_transaction().await.unwrap();
    b.start_transaction().await.unwrap();
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"x": 1}})
        .session(&mut a)
        .await
        .unwrap();
    let e = c
        .update_one(doc! {"_id": 1}, doc! {"$set": {"x": 2}})
        .session(&mut b)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(112), "{e:?}");
    assert!(e.contains_label("TransientTransactionError"), "{e:?}");
    // The loser's transaction is over; the winner commits.
    let _ = b.abort_transaction().await;
    a.commit_transaction().await.unwrap();
    assert_eq!(find_x(&c, None).await, Some(1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn transaction_rules() {
    let ts = common::start_repl_set().await;
    let c = coll(&ts);
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    let db = ts.tcp.database("tx");
    let mut s = ts.tcp.start_session().await.unwrap();
    // count is not allowed in a transaction; the transaction is aborted.
    s.start_transaction().await.unwrap();
    let e = db
        .run_command(doc! {"count": "c"})
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(263), "{e:?}");
    assert!(
        common::error_message(&e).contains("Cannot run 'count' in a multi-document transaction.")
    );
    let _ = s.abort_transaction().await;
    // A committed transaction's commit, retried, succeeds.
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 2}).session(&mut s).await.unwrap();
    s.commit_transaction().await.unwrap();
    s.commit_transaction().await.unwrap();
    // Raw statements: a number that was never started is NoSuchTransaction.
    let mut raw = ts.tcp.start_session().await.unwrap();
    let admin = ts.tcp.database("admin");
    let e = expect_code(
        db.run_command(doc! {"find": "c", "txnNumber": 7i64, "autocommit": false})
            .session(&mut raw)
            .await,
        251,
    );
    assert!(e.contains_label("TransientTransactionError"), "{e:?}");
    // A transaction may not start with another read concern.
    expect_code(
        db.run_command(doc! {"find": "c", "txnNumber": 8i64, "autocommit": false, "startTransaction": true, "readConcern": {"level": "available"}})
            .session(&mut raw)
            .await,
        72,
    );
    db.run_command(doc! {"insert": "c", "documents": [{"_id": 3}], "txnNumber": 9i64, "autocommit": false, "startTransaction": true})
        .session(&mut raw)
        .await
        .unwrap();
    admin
        .run_command(doc! {"abortTransaction": 1, "txnNumber": 9i64, "autocommit": false})
        .session(&mut raw)
        .await
        .unwrap();
    expect_code(
        admin
            .run_command(doc! {"commitTransaction": 1, "txnNumber": 9i64, "autocommit": false})
            .session(&mut raw)
            .await,
        251,
    );
    assert!(c.find_one(doc! {"_id": 3}).await.unwrap().is_none());
    // An older number is too old.
    expect_code(
        db.run_command(
            doc! {"find": "c", "txnNumber": 8i64, "autocommit": false, "startTransaction": true},
        )
        .session(&mut raw)
        .await,
        225,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_transactions_are_aborted() {
    let ts = common::start_repl_set_with(|c| {
        c.apply_set_parameter_arg("transactionLifetimeLimitSeconds=1")
            .unwrap();
    })
    .await;
    let c = coll(&ts);
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1}).session(&mut s).await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(2500)).await;
    let e = s.commit_transaction().await.unwrap_err();
    assert_eq!(error_code(&e), Some(251), "{e:?}");
    assert!(c.find_one(doc! {"_id": 1}).await.unwrap().is_none());
    // Its key is free again.
    c.insert_one(doc! {"_id": 1}).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_commit_is_one_apply_ops_oplog_entry() {
    let ts = common::start_repl_set().await;
    let c = coll(&ts);
    c.insert_one(doc! {"_id": 0, "x": 0}).await.unwrap();
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1}).session(&mut s).await.unwrap();
    c.update_one(doc! {"_id": 0}, doc! {"$set": {"x": 1}})
        .session(&mut s)
        .await
        .unwrap();
    c.delete_one(doc! {"_id": 1}).session(&mut s).await.unwrap();
    s.commit_transaction().await.unwrap();
    let oplog = ts.tcp.database("local").collection::<Document>("oplog.rs");
    let entries = common::collect(
        oplog
            .find(doc! {"o.applyOps": {"$exists": true}})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(entries.len(), 1, "{entries:?}");
    let e = &entries[0];
    assert_eq!(e.get_str("op").ok(), Some("c"));
    assert_eq!(e.get_str("ns").ok(), Some("admin.$cmd"));
    assert_eq!(e.get_document("lsid").unwrap().get("id"), s.id().get("id"));
    assert!(e.get_i64("txnNumber").is_ok(), "{e}");
    let ops = e.get_document("o").unwrap().get_array("applyOps").unwrap();
    let kinds: Vec<&str> = ops
        .iter()
        .filter_map(|o| o.as_document().and_then(|d| d.get_str("op").ok()))
        .collect();
    assert_eq!(kinds, vec!["i", "u", "d"], "{ops:?}");
    // The transaction's writes have no entries of their own.
    let plain = oplog
        .count_documents(doc! {"ns": "tx.c", "o._id": 1})
        .await
        .unwrap();
    assert_eq!(plain, 0);
}

/// Outside a transaction `create` of an existing collection with the same
/// options is a no-op (mongod 7+); inside one it is 48 NamespaceExists, as
/// pymongo's `test_create_collection` expects, and ends the transaction.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_of_an_existing_collection_in_a_transaction_is_48() {
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("tx");
    db.create_collection("made").await.unwrap();
    run_ok(&db, doc! {"create": "made"}).await;
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    let e = db
        .run_command(doc! {"create": "made"})
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(48), "{e:?}");
    let e = s.commit_transaction().await.unwrap_err();
    assert_eq!(error_code(&e), Some(251), "{e:?}");
    // A new collection can still be created inside one.
    s.start_transaction().await.unwrap();
    db.run_command(doc! {"create": "fresh"})
        .session(&mut s)
        .await
        .unwrap();
    s.commit_transaction().await.unwrap();
    assert!(db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"fresh".to_string()));
}

async fn run_ok(db: &mongodb::Database, cmd: Document) {
    let r = db.run_command(cmd).await.unwrap();
    assert!(
        common::is_num(r.get("ok").unwrap_or(&bson::Bson::Null), 1.0),
        "{r:?}"
    );
}

/// A commit whose write concern can never be satisfied (`w: 2` on one
/// member: 100 UnsatisfiableWriteConcern) carries no
/// `UnknownTransactionCommitResult` (retrying cannot help), and LockTimeout
/// on a transaction statement is a `TransientTransactionError`, as mongod
/// labels them (the transactions spec's error-labels tests).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn commit_and_transient_error_labels() {
    let ts = common::start_repl_set_with(|c| c.enable_test_commands = true).await;
    let db = ts.tcp.database("tx");
    let admin = ts.tcp.database("admin");
    let mut raw = ts.tcp.start_session().await.unwrap();
    db.run_command(doc! {"insert": "c", "documents": [{"_id": 1}], "txnNumber": 1i64, "autocommit": false, "startTransaction": true})
        .session(&mut raw)
        .await
        .unwrap();
    let r = admin
        .run_command(doc! {"commitTransaction": 1, "txnNumber": 1i64, "autocommit": false, "writeConcern": {"w": 2}})
        .session(&mut raw)
        .await
        .unwrap();
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").ok(), Some(100), "{r:?}");
    assert!(r.get("errorLabels").is_none(), "{r:?}");
    // A write concern error that may yet be satisfied still gets the label:
    // the failCommand fail point's 64 WriteConcernFailed.
    admin
        .run_command(doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["commitTransaction"], "writeConcernError": {"code": 64, "errmsg": "waiting"}}})
        .await
        .unwrap();
    db.run_command(doc! {"insert": "c", "documents": [{"_id": 2}], "txnNumber": 2i64, "autocommit": false, "startTransaction": true})
        .session(&mut raw)
        .await
        .unwrap();
    let r = admin
        .run_command(doc! {"commitTransaction": 1, "txnNumber": 2i64, "autocommit": false})
        .session(&mut raw)
        .await
        .unwrap();
    let labels = r.get_array("errorLabels").unwrap();
    assert!(
        labels.contains(&bson::Bson::String("UnknownTransactionCommitResult".into())),
        "{r:?}"
    );
    admin
        .run_command(doc! {"configureFailPoint": "failCommand", "mode": "off"})
        .await
        .unwrap();
    // LockTimeout (24) on a statement of a transaction is transient.
    admin
        .run_command(
            doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
            "data": {"failCommands": ["insert"], "errorCode": 24}},
        )
        .await
        .unwrap();
    let e = expect_code(
        db.run_command(doc! {"insert": "c", "documents": [{"_id": 3}], "txnNumber": 3i64, "autocommit": false, "startTransaction": true})
            .session(&mut raw)
            .await,
        24,
    );
    assert!(e.contains_label("TransientTransactionError"), "{e:?}");
}

/// A statement of a transaction failing with a retryable (state-change)
/// error may be retried with the whole transaction: TransientTransactionError,
/// as mongod's isTransientTransactionError. The error carries the member's
/// topologyVersion, so a driver that saw it in hello keeps the server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_state_change_error_in_a_transaction_is_transient() {
    let ts = common::start_repl_set_with(|c| c.enable_test_commands = true).await;
    let direct = common::direct_client(ts.server.port()).await;
    let db = direct.database("tx");
    let admin = direct.database("admin");
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    let tv = hello.get_document("topologyVersion").unwrap().clone();
    admin
        .run_command(
            doc! {"configureFailPoint": "failCommand", "mode": {"times": 2},
            "data": {"failCommands": ["insert"], "errorCode": 10107}},
        )
        .await
        .unwrap();
    let mut s = direct.start_session().await.unwrap();
    let e = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1}], "txnNumber": 1i64, "autocommit": false, "startTransaction": true})
        .session(&mut s)
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(10107));
    assert!(e.contains_label("TransientTransactionError"), "{e:?}");
    // Outside a transaction: the reply itself, with the topologyVersion.
    let raw = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap_err();
    let reply = raw.server_response().expect("a server reply");
    let reply = Document::try_from(reply.as_ref()).unwrap();
    assert_eq!(
        reply.get_document("topologyVersion").unwrap(),
        &tv,
        "{reply}"
    );
}
