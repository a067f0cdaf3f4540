//! Command errors: unknown and unsupported commands, wrong field types, unknown
//! fields. Each carries mongod's code and codeName, and the connection stays usable.

use crate::common::*;
use bson::{doc, Document};
use mongodb::Client;

/// The client still answers commands and reads data after an error.
async fn still_works(t: &str, client: &Client) {
    let r = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{t}");
    let n = count(&client.database("err").collection::<Document>("c"), doc! {}).await;
    assert_eq!(n, 3, "{t}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_codes_and_recovery() {
    let ts = start().await;
    ts.tcp
        .database("err")
        .collection::<Document>("c")
        .insert_many((0..3).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    for (t, client) in ts.clients() {
        let db = client.database("err");
        let admin = client.database("admin");

        let e = expect_code(db.run_command(doc! {"frobnicate": 1}).await, 59);
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("CommandNotFound"),
            "{t}"
        );
        assert!(
            error_message(&e).contains("no such command"),
            "{t}: {}",
            error_message(&e)
        );
        assert!(
            error_message(&e).contains("frobnicate"),
            "{t}: {}",
            error_message(&e)
        );
        still_works(t, client).await;

        let e = expect_code(db.run_command(doc! {"compact": "c"}).await, 115);
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("CommandNotSupported"),
            "{t}"
        );
        assert!(
            error_message(&e).contains("compact"),
            "{t}: {}",
            error_message(&e)
        );
        still_works(t, client).await;

        // fsync flushes the engine; its backup lock is taken and released
        // (fsync_lock.rs tests what it does to writes).
        let r = admin.run_command(doc! {"fsync": 1}).await.unwrap();
        assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{t}: {r}");
        let r = admin
            .run_command(doc! {"fsync": 1, "lock": true})
            .await
            .unwrap();
        assert_eq!(r.get_i64("lockCount").ok(), Some(1), "{t}: {r}");
        let r = admin.run_command(doc! {"fsyncUnlock": 1}).await.unwrap();
        assert_eq!(r.get_i64("lockCount").ok(), Some(0), "{t}: {r}");
        expect_code(db.run_command(doc! {"fsync": 1}).await, 13);
        still_works(t, client).await;

        let e = expect_code(db.run_command(doc! {"compact": "c"}).await, 115);
        assert!(
            error_message(&e).contains("compact"),
            "{t}: {}",
            error_message(&e)
        );
        still_works(t, client).await;

        for bad in [
            doc! {"find": "c", "limit": "ten"},
            doc! {"find": "c", "filter": 5},
            doc! {"find": "c", "sort": "x"},
            doc! {"insert": "c", "documents": [{"a": 1}], "ordered": "yes"},
            doc! {"count": "c", "query": [1]},
        ] {
            let e = expect_code(db.run_command(bad.clone()).await, 14);
            assert_eq!(
                error_code_name(&e).as_deref(),
                Some("TypeMismatch"),
                "{t}: {bad}"
            );
            assert!(
                error_message(&e).contains("BSON field"),
                "{t}: {bad}: {}",
                error_message(&e)
            );
        }
        still_works(t, client).await;

        for bad in [
            doc! {"find": "c", "fliter": {}},
            doc! {"insert": "c", "documents": [{}], "upsert": true},
        ] {
            let e = expect_code(db.run_command(bad.clone()).await, 40415);
            assert_eq!(
                error_code_name(&e).as_deref(),
                Some("Location40415"),
                "{t}: {bad}"
            );
            assert!(
                error_message(&e).contains("is an unknown field"),
                "{t}: {}",
                error_message(&e)
            );
        }
        let e = expect_code(
            db.run_command(doc! {"find": "c", "fliter": {}}).await,
            40415,
        );
        assert!(
            error_message(&e).contains("find.fliter"),
            "{t}: {}",
            error_message(&e)
        );
        still_works(t, client).await;

        // A missing required field: 40414.
        expect_code(db.run_command(doc! {"insert": "c"}).await, 40414);
        still_works(t, client).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn errors_on_a_raw_connection_keep_it_open() {
    let ts = start().await;
    let mut raw = ts.raw_tcp().await;
    let r = raw_command(&mut raw, doc! {"nosuch": 1, "$db": "x"}).await;
    assert!(is_num(r.get("ok").unwrap(), 0.0), "{r}");
    assert_eq!(num(&r, "code"), 59);
    assert_eq!(r.get_str("codeName").ok(), Some("CommandNotFound"));
    assert!(r.get_str("errmsg").unwrap().contains("nosuch"), "{r}");

    // A body without $db is a well-formed message carrying a bad command.
    let r = raw_command(&mut raw, doc! {"ping": 1}).await;
    assert!(
        is_num(r.get("ok").unwrap(), 0.0),
        "missing $db must be refused: {r}"
    );
    assert!(num(&r, "code") > 0, "{r}");

    let r = raw_command(&mut raw, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");
}
