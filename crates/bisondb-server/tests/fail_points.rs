//! Test commands and fail points: `--setParameter enableTestCommands=1`,
//! `configureFailPoint` with the `failCommand` fail point in each mode and
//! with each of its actions, `maxTimeAlwaysTimeOut`, and the command's absence
//! when test commands are off.

use crate::common;

use std::time::{Duration, Instant};

use crate::common::{error_code, error_code_name, error_message, expect_code, num, TestServer};
use bson::{doc, Document};
use mongodb::error::{ErrorKind, WriteFailure};
use mongodb::Client;

async fn with_test_commands() -> TestServer {
    common::start_with(|c| {
        c.apply_set_parameter_arg("enableTestCommands=1")
            .expect("known parameter")
    })
    .await
}

async fn configure(client: &Client, cmd: Document) -> Document {
    client
        .database("admin")
        .run_command(cmd)
        .await
        .unwrap_or_else(|e| panic!("configureFailPoint: {e}"))
}

async fn ping(client: &Client) -> mongodb::error::Result<Document> {
    client.database("admin").run_command(doc! {"ping": 1}).await
}

#[tokio::test]
async fn disabled_without_enable_test_commands() {
    let s = common::start().await;
    let admin = s.tcp.database("admin");
    let e = expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "failCommand", "mode": "off"})
            .await,
        59,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("CommandNotFound"));
    let p = admin
        .run_command(doc! {"getParameter": 1, "enableTestCommands": 1})
        .await
        .unwrap();
    assert!(!p.get_bool("enableTestCommands").unwrap());
    let cmds = admin.run_command(doc! {"listCommands": 1}).await.unwrap();
    assert!(!cmds
        .get_document("commands")
        .unwrap()
        .contains_key("configureFailPoint"));
}

#[tokio::test]
async fn parameters_report_test_commands() {
    let s = with_test_commands().await;
    let admin = s.tcp.database("admin");
    let p = admin.run_command(doc! {"getParameter": "*"}).await.unwrap();
    assert!(p.get_bool("enableTestCommands").unwrap());
    let opts = admin.run_command(doc! {"getCmdLineOpts": 1}).await.unwrap();
    let set = opts
        .get_document("parsed")
        .and_then(|p| p.get_document("setParameter"))
        .unwrap();
    assert_eq!(set, &doc! {"enableTestCommands": "1"});
    let cmds = admin.run_command(doc! {"listCommands": 1}).await.unwrap();
    assert!(cmds
        .get_document("commands")
        .unwrap()
        .contains_key("configureFailPoint"));
}

#[tokio::test]
async fn configure_errors_as_mongod() {
    let s = with_test_commands().await;
    let admin = s.tcp.database("admin");
    let e = expect_code(
        s.tcp
            .database("test")
            .run_command(doc! {"configureFailPoint": "failCommand", "mode": "off"})
            .await,
        13,
    );
    assert!(error_message(&e).contains("admin database"), "{e}");
    let e = expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "noSuchFailPoint", "mode": "alwaysOn"})
            .await,
        266,
    );
    assert_eq!(error_message(&e), "noSuchFailPoint not found");
    assert_eq!(error_code_name(&e).as_deref(), Some("FailPointSetFailed"));
    let e = expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "stopReplProducer", "mode": "alwaysOn"})
            .await,
        238,
    );
    assert!(error_message(&e).contains("stopReplProducer"), "{e}");
    expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "failCommand"})
            .await,
        20,
    );
    expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "failCommand", "mode": "sometimes"})
            .await,
        2,
    );
    expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "failCommand", "mode": {"times": -1}})
            .await,
        2,
    );
    expect_code(
        admin
            .run_command(doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn", "data": 1})
            .await,
        14,
    );
}

#[tokio::test]
async fn times_counts_matching_commands_only() {
    let s = with_test_commands().await;
    let coll = s.tcp.database("fp").collection::<Document>("c");
    let r = configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 2},
        "data": {"failCommands": ["insert"], "errorCode": 8}},
    )
    .await;
    assert_eq!(num(&r, "count"), 0);
    assert!(common::is_num(r.get("ok").unwrap(), 1.0));
    for _ in 0..2 {
        // A find does not use up the fail point.
        coll.find_one(doc! {}).await.unwrap();
        let e = expect_code(coll.insert_one(doc! {"x": 1}).await, 8);
        assert_eq!(error_code_name(&e).as_deref(), Some("UnknownError"));
        assert_eq!(
            error_message(&e),
            "Failing command via 'failCommand' failpoint"
        );
    }
    coll.insert_one(doc! {"x": 1}).await.unwrap();
    assert_eq!(common::count(&coll, doc! {}).await, 1);
    // count: how many times it fired before, as mongod's timesEntered.
    let r = configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
    assert_eq!(num(&r, "count"), 2);
}

#[tokio::test]
async fn always_on_with_labels_until_off() {
    let s = with_test_commands().await;
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping", "find"], "errorCode": 112, "errorLabels": ["TestLabel"]}},
    )
    .await;
    for _ in 0..3 {
        // (Not a "node is shutting down" code: the driver would mark the
        // server unknown, as it does against mongod.)
        let e = expect_code(ping(&s.tcp).await, 112);
        assert!(e.contains_label("TestLabel"), "{e}");
        assert_eq!(error_code_name(&e).as_deref(), Some("WriteConflict"));
    }
    // The fail point is server-wide: the Unix-socket client sees it too.
    expect_code(
        s.unix
            .database("fp")
            .collection::<Document>("c")
            .find_one(doc! {})
            .await,
        112,
    );
    // configureFailPoint itself is never failed, even when listed.
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
    ping(&s.tcp).await.unwrap();
}

#[tokio::test]
async fn skip_and_probability() {
    let s = with_test_commands().await;
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"skip": 2},
        "data": {"failCommands": ["ping"], "errorCode": 2}},
    )
    .await;
    ping(&s.tcp).await.unwrap();
    ping(&s.tcp).await.unwrap();
    expect_code(ping(&s.tcp).await, 2);
    expect_code(ping(&s.tcp).await, 2);
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"activationProbability": 0.0},
        "data": {"failCommands": ["ping"], "errorCode": 2}},
    )
    .await;
    for _ in 0..5 {
        ping(&s.tcp).await.unwrap();
    }
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"activationProbability": 1},
        "data": {"failCommands": ["ping"], "errorCode": 2}},
    )
    .await;
    for _ in 0..3 {
        expect_code(ping(&s.tcp).await, 2);
    }
    let r = configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": "off"},
    )
    .await;
    assert_eq!(
        num(&r, "count"),
        5,
        "2 skip-mode and 3 probability-1 failures"
    );
}

#[tokio::test]
async fn close_connection_hangs_up_without_reply() {
    let s = with_test_commands().await;
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["ping"], "closeConnection": true}},
    )
    .await;
    let mut raw = s.raw_tcp().await;
    common::send_msg(&mut raw, 1, &doc! {"ping": 1, "$db": "admin"}).await;
    assert!(common::closed_by_server(&mut raw).await);
    // Only that connection: the next one works (times: 1 is used up).
    let mut raw = s.raw_tcp().await;
    let r = common::raw_command(&mut raw, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(common::is_num(r.get("ok").unwrap(), 1.0), "{r}");

    // Through the driver the closed connection is a network error.
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["count"], "closeConnection": true}},
    )
    .await;
    let e = s
        .tcp
        .database("fp")
        .run_command(doc! {"count": "c"})
        .await
        .unwrap_err();
    assert!(
        matches!(
            *e.kind,
            ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. }
        ),
        "{e}"
    );
    ping(&s.tcp).await.unwrap();
}

#[tokio::test]
async fn block_connection_waits_then_runs_or_fails() {
    let s = with_test_commands().await;
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["ping"], "blockConnection": true, "blockTimeMS": 300}},
    )
    .await;
    let t = Instant::now();
    ping(&s.tcp).await.unwrap();
    assert!(
        t.elapsed() >= Duration::from_millis(300),
        "{:?}",
        t.elapsed()
    );

    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
              "data": {"failCommands": ["ping"], "blockConnection": true, "blockTimeMS": 200, "errorCode": 89}},
    )
    .await;
    let t = Instant::now();
    expect_code(ping(&s.tcp).await, 89);
    assert!(
        t.elapsed() >= Duration::from_millis(200),
        "{:?}",
        t.elapsed()
    );

    // Other connections are served while one is blocked.
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["ping"], "blockConnection": true, "blockTimeMS": 2000}},
    )
    .await;
    let blocked = tokio::spawn({
        let c = s.tcp.clone();
        async move { ping(&c).await }
    });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let t = Instant::now();
    ping(&s.unix).await.unwrap();
    assert!(
        t.elapsed() < Duration::from_millis(1500),
        "{:?}",
        t.elapsed()
    );
    blocked.await.unwrap().unwrap();

    // blockConnection without blockTimeMS fails the command, as mongod.
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["ping"], "blockConnection": true}},
    )
    .await;
    expect_code(ping(&s.tcp).await, 72);
}

#[tokio::test]
async fn app_name_and_aliases() {
    let s = with_test_commands().await;
    let app = s.tcp_client_with("appName=failing").await;
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": "alwaysOn",
        "data": {"failCommands": ["ping"], "errorCode": 2, "appName": "failing"}},
    )
    .await;
    ping(&s.tcp).await.unwrap();
    expect_code(ping(&app).await, 2);
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
        "data": {"failCommands": ["isMaster"], "errorCode": 2}},
    )
    .await;
    // failCommands matches a command's aliases: isMaster fails hello.
    let mut raw = s.raw_tcp().await;
    let r = common::raw_command(&mut raw, doc! {"hello": 1, "$db": "admin"}).await;
    assert_eq!(r.get_i32("code").unwrap(), 2, "{r}");
}

#[tokio::test]
async fn write_concern_error_joins_the_reply() {
    let s = with_test_commands().await;
    let coll = s.tcp.database("fp").collection::<Document>("c");
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "failCommand", "mode": {"times": 1},
              "data": {"failCommands": ["insert"], "writeConcernError": {"code": 64, "errmsg": "waiting for replication timed out"}}},
    )
    .await;
    let e = coll.insert_one(doc! {"_id": 1}).await.unwrap_err();
    match &*e.kind {
        ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
            assert_eq!(w.code, 64);
            assert_eq!(w.message, "waiting for replication timed out");
        }
        other => panic!("expected a write concern error, got {other:?}"),
    }
    // The write itself happened, as on mongod.
    assert_eq!(common::count(&coll, doc! {}).await, 1);
    coll.insert_one(doc! {"_id": 2}).await.unwrap();
}

#[tokio::test]
async fn max_time_always_time_out() {
    let s = with_test_commands().await;
    let db = s.tcp.database("fp");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..10).map(|i| doc! {"i": i}))
        .await
        .unwrap();
    let mut cursor = coll
        .find(doc! {})
        .batch_size(2)
        .max_time(Duration::from_secs(60))
        .await
        .unwrap();
    assert!(cursor.advance().await.unwrap());
    configure(
        &s.tcp,
        doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "alwaysOn"},
    )
    .await;
    db.run_command(doc! {"count": "c"}).await.unwrap();
    let e = expect_code(
        db.run_command(doc! {"count": "c", "maxTimeMS": 1}).await,
        50,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("MaxTimeMSExpired"));
    // The cursor's getMore carries the find's time limit.
    let mut result = Ok(true);
    for _ in 0..5 {
        result = cursor.advance().await;
        if result.is_err() {
            break;
        }
    }
    let e = result.unwrap_err();
    assert_eq!(error_code(&e), Some(50), "{e}");
    let r = configure(
        &s.tcp,
        doc! {"configureFailPoint": "maxTimeAlwaysTimeOut", "mode": "off"},
    )
    .await;
    assert_eq!(num(&r, "count"), 2);
    db.run_command(doc! {"count": "c", "maxTimeMS": 1})
        .await
        .unwrap();
}
