//! The log's commands on an in-process server: `setParameter` (`logLevel`,
//! `logComponentVerbosity` as mongosh's `db.setLogLevel` sends it, mongod's
//! errors), `getParameter` reporting them, and `logRotate` when the log goes
//! to standard output. The log lines themselves need the process's tracing
//! subscriber, which this binary may not install: `crates/bisondb/tests/logs.rs`
//! checks them through the real binary.

use bson::{doc, Document};

use crate::common::{expect_code, start};

/// `getParameter logComponentVerbosity`'s level of `component`.
async fn component_verbosity(admin: &mongodb::Database, component: &str) -> Option<i32> {
    let p = admin
        .run_command(doc! {"getParameter": 1, "logComponentVerbosity": 1})
        .await
        .unwrap();
    let v: &Document = p.get_document("logComponentVerbosity").unwrap();
    v.get_document(component).ok()?.get_i32("verbosity").ok()
}

/// The only test here that changes a verbosity, and it puts it back: the
/// levels are process-wide, though nothing in this binary writes a line.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_log_level_as_mongosh_and_get_parameter() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let r = admin
        .run_command(doc! {"setParameter": 1, "logComponentVerbosity": {"query": {"verbosity": 3}}})
        .await
        .unwrap();
    let was = r.get_document("was").unwrap();
    assert_eq!(
        was.get_document("query").unwrap().get_i32("verbosity").ok(),
        Some(-1)
    );
    let p = admin
        .run_command(doc! {"getParameter": 1, "logComponentVerbosity": 1, "logLevel": 1})
        .await
        .unwrap();
    let v: &Document = p.get_document("logComponentVerbosity").unwrap();
    assert_eq!(
        v.get_document("query").unwrap().get_i32("verbosity").ok(),
        Some(3)
    );
    assert!(v.get_document("network").is_ok() && v.get_i32("verbosity").is_ok());
    assert!(p.get_i32("logLevel").is_ok());
    // A component as a bare number, as mongod also takes it; -1 inherits.
    admin
        .run_command(doc! {"setParameter": 1, "logComponentVerbosity": {"query": -1}})
        .await
        .unwrap();
    assert_eq!(component_verbosity(&admin, "query").await, Some(-1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn set_parameter_errors_as_mongod() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let e = expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "noSuchParameter": 1})
            .await,
        72,
    );
    assert!(
        e.to_string()
            .contains("attempted to set unrecognized parameter [noSuchParameter]"),
        "{e}"
    );
    let e = expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "enableTestCommands": true})
            .await,
        20,
    );
    assert!(
        e.to_string()
            .contains("not allowed to change [enableTestCommands] at runtime"),
        "{e}"
    );
    expect_code(admin.run_command(doc! {"setParameter": 1}).await, 72);
    // A bad component changes nothing (checked before any level is set).
    expect_code(
        admin
            .run_command(
                doc! {"setParameter": 1, "logComponentVerbosity": {"command": 2, "nosuch": 1}},
            )
            .await,
        2,
    );
    assert_eq!(component_verbosity(&admin, "command").await, Some(-1));
    expect_code(
        admin
            .run_command(doc! {"setParameter": 1, "logLevel": "high"})
            .await,
        2,
    );
    // Admin only, as mongod.
    expect_code(
        ts.tcp
            .database("test")
            .run_command(doc! {"setParameter": 1, "logLevel": 0})
            .await,
        13,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn log_rotate_without_a_file() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    for arg in [bson::Bson::Int32(1), bson::Bson::String("server".into())] {
        let r = admin.run_command(doc! {"logRotate": arg}).await.unwrap();
        assert_eq!(r.get_f64("ok").ok(), Some(1.0));
    }
    expect_code(admin.run_command(doc! {"logRotate": "audit"}).await, 4);
    expect_code(
        ts.tcp
            .database("test")
            .run_command(doc! {"logRotate": 1})
            .await,
        13,
    );
}
