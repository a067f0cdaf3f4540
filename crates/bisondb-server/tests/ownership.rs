//! What belongs to a user under `--auth`, through the Rust driver: a cursor
//! is its opener's (another user's `getMore` and `killCursors` get mongod's
//! 13 Unauthorized; `killAnyCursor` kills any), and without `inprog` /
//! `killop` a user sees (`currentOp` with `$ownOps`, `$currentOp` without
//! `allUsers`) and kills only its own operations.

use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use mongodb::Client;

use crate::common::{self, error_code, error_message};

async fn login(port: u16, user: &str, pwd: &str) -> Client {
    Client::with_uri_str(format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{port}/?authSource=admin&serverSelectionTimeoutMS=5000"
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `--auth` with `root`, and `alice` and `bob` who may read and write `app`.
async fn two_users() -> (common::TestServer, Client, Client, Client) {
    let s = common::start_with_root().await;
    let port = s.server.port();
    let root = login(port, "root", "rootpw").await;
    for u in ["alice", "bob"] {
        root.database("admin")
            .run_command(
                doc! {"createUser": u, "pwd": "pw", "roles": [{"role": "readWrite", "db": "app"}]},
            )
            .await
            .unwrap();
    }
    let alice = login(port, "alice", "pw").await;
    let bob = login(port, "bob", "pw").await;
    (s, root, alice, bob)
}

fn cursor_id(reply: &Document) -> i64 {
    reply.get_document("cursor").unwrap().get_i64("id").unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cursor_belongs_to_the_user_who_opened_it() {
    let (_s, root, alice, bob) = two_users().await;
    let app = alice.database("app");
    let docs: Vec<Document> = (0..5).map(|i| doc! {"_id": i}).collect();
    app.collection::<Document>("c")
        .insert_many(docs)
        .await
        .unwrap();
    let reply = app
        .run_command(doc! {"find": "c", "batchSize": 1})
        .await
        .unwrap();
    let id = cursor_id(&reply);
    assert_ne!(id, 0);

    // Bob may read app.c, but not on Alice's cursor, nor kill it.
    let e = bob
        .database("app")
        .run_command(doc! {"getMore": id, "collection": "c", "batchSize": 1})
        .await
        .expect_err("another user's getMore");
    assert_eq!(error_code(&e), Some(13), "{e}");
    assert_eq!(
        error_message(&e),
        format!("cursor id {id} was not created by the authenticated user")
    );
    let e = bob
        .database("app")
        .run_command(doc! {"killCursors": "c", "cursors": [id]})
        .await
        .expect_err("another user's killCursors");
    assert_eq!(error_code(&e), Some(13), "{e}");
    assert_eq!(error_message(&e), "not authorized to kill cursor on app.c");
    // Not even root reads on another user's cursor.
    let e = root
        .database("app")
        .run_command(doc! {"getMore": id, "collection": "c", "batchSize": 1})
        .await
        .expect_err("root's getMore on alice's cursor");
    assert_eq!(error_code(&e), Some(13), "{e}");

    // Alice goes on (the refusals left the cursor as it was), on another
    // connection of hers too.
    let more = app
        .run_command(doc! {"getMore": id, "collection": "c", "batchSize": 1})
        .await
        .unwrap();
    let batch = more
        .get_document("cursor")
        .unwrap()
        .get_array("nextBatch")
        .unwrap();
    assert_eq!(batch, &vec![Bson::Document(doc! {"_id": 1})]);
    let port = _s.server.port();
    let alice2 = login(port, "alice", "pw").await;
    alice2
        .database("app")
        .run_command(doc! {"getMore": id, "collection": "c", "batchSize": 1})
        .await
        .unwrap();

    // Root holds killAnyCursor (hostManager): it may kill the cursor.
    let killed = root
        .database("app")
        .run_command(doc! {"killCursors": "c", "cursors": [id]})
        .await
        .unwrap();
    assert_eq!(
        killed.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );

    // Alice kills her own; an unknown id is reported, not refused.
    let id = cursor_id(
        &app.run_command(doc! {"find": "c", "batchSize": 1})
            .await
            .unwrap(),
    );
    let killed = app
        .run_command(doc! {"killCursors": "c", "cursors": [id, 424242i64]})
        .await
        .unwrap();
    assert_eq!(
        killed.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(id)]
    );
    assert_eq!(
        killed.get_array("cursorsNotFound").unwrap(),
        &vec![Bson::Int64(424242)]
    );
}

/// Starts a find by `client` that runs for about `ms` milliseconds.
fn slow_find(
    client: &Client,
    ms: u32,
) -> tokio::task::JoinHandle<mongodb::error::Result<Document>> {
    let db = client.database("app");
    tokio::spawn(async move {
        db.run_command(
            doc! {"find": "slow", "filter": {"$where": format!("sleep({ms}); return true")}},
        )
        .await
    })
}

/// The opid of the running `find` on `app.slow`, as `client` sees it with
/// `$ownOps` (waits for it to start).
async fn own_slow_op(client: &Client) -> (i64, Document) {
    let until = Instant::now() + Duration::from_secs(10);
    loop {
        let r = client
            .database("admin")
            .run_command(doc! {"currentOp": 1, "$ownOps": true, "ns": "app.slow"})
            .await
            .unwrap();
        if let Some(Bson::Document(op)) = r.get_array("inprog").unwrap().first() {
            return (common::num(op, "opid"), op.clone());
        }
        assert!(Instant::now() < until, "the slow find never showed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_inprog_and_killop_a_user_sees_and_kills_only_its_own_operations() {
    let (s, root, alice, bob) = two_users().await;
    alice
        .database("app")
        .collection::<Document>("slow")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let running = slow_find(&alice, 4000);
    let alice2 = login(s.server.port(), "alice", "pw").await;
    let (opid, op) = own_slow_op(&alice2).await;
    assert_eq!(
        op.get_array("effectiveUsers").unwrap(),
        &vec![Bson::Document(doc! {"user": "alice", "db": "admin"})],
        "{op}"
    );

    // Bob: currentOp without $ownOps needs inprog; with it he sees none of
    // Alice's; $currentOp without allUsers is his own too.
    let admin_bob = bob.database("admin");
    let e = admin_bob
        .run_command(doc! {"currentOp": 1})
        .await
        .expect_err("currentOp without inprog");
    assert_eq!(error_code(&e), Some(13), "{e}");
    let mine = admin_bob
        .run_command(doc! {"currentOp": 1, "$ownOps": true, "ns": "app.slow"})
        .await
        .unwrap();
    assert!(mine.get_array("inprog").unwrap().is_empty(), "{mine}");
    let mut agg = admin_bob
        .aggregate(vec![
            doc! {"$currentOp": {}},
            doc! {"$match": {"ns": "app.slow"}},
        ])
        .await
        .unwrap();
    assert!(!agg.advance().await.unwrap(), "bob sees alice's op");
    let e = admin_bob
        .aggregate(vec![doc! {"$currentOp": {"allUsers": true}}])
        .await
        .expect_err("allUsers without inprog");
    assert_eq!(error_code(&e), Some(13), "{e}");
    // Root sees everyone's.
    let all = root
        .database("admin")
        .run_command(doc! {"currentOp": 1, "ns": "app.slow"})
        .await
        .unwrap();
    assert_eq!(all.get_array("inprog").unwrap().len(), 1, "{all}");

    // Bob's killOp of Alice's operation answers as always and leaves it be.
    let r = admin_bob
        .run_command(doc! {"killOp": 1, "op": opid})
        .await
        .unwrap();
    assert_eq!(r.get_str("info").ok(), Some("attempting to kill op"), "{r}");
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (still, _) = own_slow_op(&alice2).await;
    assert_eq!(still, opid, "bob's killOp reached alice's operation");

    // Alice kills her own without killop.
    alice2
        .database("admin")
        .run_command(doc! {"killOp": 1, "op": opid})
        .await
        .unwrap();
    let e = running.await.unwrap().expect_err("the killed find");
    assert_eq!(error_code(&e), Some(11601), "{e}");
}
