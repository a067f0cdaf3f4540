//! Replica-set mode (`--replSet`): `replSetInitiate`, hello as an
//! uninitialized member and as the primary, the set's commands
//! (`replSetGetStatus`, `replSetGetConfig`, `replSetReconfig`,
//! `replSetStepDown`, `replSetFreeze`), writes refused before initiate, the
//! configuration kept across a restart, and the standalone unchanged.

use std::time::{Duration, Instant};

use crate::common::*;
use bisondb_server::Server;
use bson::{doc, Bson, Document, Timestamp};
use mongodb::Client;

async fn admin_cmd(client: &Client, cmd: Document) -> mongodb::error::Result<Document> {
    client.database("admin").run_command(cmd).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_is_not_a_replica_set() {
    let ts = start_standalone().await;
    let hello = admin_cmd(&ts.tcp, doc! {"hello": 1}).await.unwrap();
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
    assert!(!hello.contains_key("setName"), "{hello}");
    assert!(!hello.contains_key("isreplicaset"), "{hello}");
    for cmd in [
        doc! {"replSetGetStatus": 1},
        doc! {"replSetGetConfig": 1},
        doc! {"replSetInitiate": {}},
        doc! {"replSetStepDown": 60},
    ] {
        let e = expect_code(admin_cmd(&ts.tcp, cmd.clone()).await, 76);
        assert!(
            error_message(&e).contains("replication enabled"),
            "{cmd}: {e}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_initiate_the_member_takes_no_writes() {
    let ts = start_with(|c| c.repl_set_name = Some(SET_NAME.into())).await;
    let port = ts.server.port();
    let direct = direct_client(port).await;
    let hello = admin_cmd(&direct, doc! {"hello": 1}).await.unwrap();
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(false),
        "{hello}"
    );
    assert_eq!(hello.get_bool("secondary").ok(), Some(false), "{hello}");
    assert_eq!(hello.get_bool("isreplicaset").ok(), Some(true), "{hello}");
    assert_eq!(
        hello.get_str("info").ok(),
        Some("Does not have a valid replica set config"),
        "{hello}"
    );
    let legacy = admin_cmd(&direct, doc! {"isMaster": 1}).await.unwrap();
    assert_eq!(legacy.get_bool("ismaster").ok(), Some(false), "{legacy}");
    let coll = direct.database("app").collection::<Document>("c");
    let e = expect_code(coll.insert_one(doc! {"x": 1}).await, 10107);
    assert_eq!(error_code_name(&e).as_deref(), Some("NotWritablePrimary"));
    expect_code(coll.delete_many(doc! {}).await, 10107);
    expect_code(direct.database("app").create_collection("d").await, 10107);
    // The local database is not replicated: writable on any member.
    direct
        .database("local")
        .collection::<Document>("scratch")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    expect_code(admin_cmd(&direct, doc! {"replSetGetStatus": 1}).await, 94);
    expect_code(admin_cmd(&direct, doc! {"replSetGetConfig": 1}).await, 94);
    // A configuration that is not this set's, or not this node's.
    let e = expect_code(
        admin_cmd(
            &direct,
            doc! {"replSetInitiate": {"_id": "other", "members": [{"_id": 0, "host": format!("127.0.0.1:{port}")}]}},
        )
        .await,
        93,
    );
    assert!(
        error_message(&e).contains("command line reports rs0"),
        "{e}"
    );
    expect_code(
        admin_cmd(
            &direct,
            doc! {"replSetInitiate": {"_id": SET_NAME, "members": [{"_id": 0, "host": "127.0.0.1:1"}]}},
        )
        .await,
        74,
    );
    expect_code(
        admin_cmd(
            &direct,
            doc! {"replSetInitiate": {"_id": SET_NAME, "members": [
                {"_id": 0, "host": format!("127.0.0.1:{port}")},
                {"_id": 1, "host": "127.0.0.1:2"},
            ]}},
        )
        .await,
        93,
    );
    // Only against admin.
    expect_code(
        direct
            .database("app")
            .run_command(doc! {"replSetInitiate": {}})
            .await,
        13,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiated_member_is_the_primary_of_its_set() {
    let ts = start_repl_set().await;
    let port = ts.server.port();
    let me = format!("127.0.0.1:{port}");
    let hello = admin_cmd(&ts.tcp, doc! {"hello": 1}).await.unwrap();
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
    assert_eq!(hello.get_bool("secondary").ok(), Some(false), "{hello}");
    assert_eq!(hello.get_str("setName").ok(), Some(SET_NAME), "{hello}");
    assert_eq!(hello.get_i32("setVersion").ok(), Some(1), "{hello}");
    assert_eq!(
        hello.get_array("hosts").unwrap(),
        &vec![Bson::String(me.clone())]
    );
    assert_eq!(hello.get_str("primary").ok(), Some(me.as_str()), "{hello}");
    assert_eq!(hello.get_str("me").ok(), Some(me.as_str()), "{hello}");
    assert_eq!(
        hello.get_object_id("electionId").unwrap().to_hex(),
        "7fffffff0000000000000001"
    );
    let last_write = hello.get_document("lastWrite").unwrap();
    let op_time = last_write.get_document("opTime").unwrap();
    assert!(op_time.get_timestamp("ts").unwrap().time > 0, "{hello}");
    assert_eq!(op_time.get_i64("t").ok(), Some(1), "{hello}");
    assert!(last_write.get_datetime("lastWriteDate").is_ok(), "{hello}");
    assert!(last_write.get_document("majorityOpTime").is_ok(), "{hello}");
    assert_eq!(hello.get_i32("logicalSessionTimeoutMinutes").ok(), Some(30));
    assert!(!hello.contains_key("isreplicaset"), "{hello}");

    // A second initiate: already initialized.
    let e = expect_code(admin_cmd(&ts.tcp, doc! {"replSetInitiate": {}}).await, 23);
    assert_eq!(error_code_name(&e).as_deref(), Some("AlreadyInitialized"));

    let config = admin_cmd(&ts.tcp, doc! {"replSetGetConfig": 1})
        .await
        .unwrap();
    let config = config.get_document("config").unwrap();
    assert_eq!(config.get_str("_id").ok(), Some(SET_NAME));
    assert_eq!(config.get_i32("version").ok(), Some(1));
    assert_eq!(config.get_i64("term").ok(), Some(1));
    let members = config.get_array("members").unwrap();
    assert_eq!(members.len(), 1);
    let member = members[0].as_document().unwrap();
    assert_eq!(member.get_str("host").ok(), Some(me.as_str()));
    assert_eq!(member.get_i32("votes").ok(), Some(1));
    assert!(config
        .get_document("settings")
        .unwrap()
        .get_object_id("replicaSetId")
        .is_ok());

    let status = admin_cmd(&ts.tcp, doc! {"replSetGetStatus": 1})
        .await
        .unwrap();
    assert_eq!(status.get_str("set").ok(), Some(SET_NAME), "{status}");
    assert_eq!(status.get_i32("myState").ok(), Some(1), "{status}");
    assert_eq!(status.get_i64("term").ok(), Some(1), "{status}");
    let member = status.get_array("members").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(member.get_str("stateStr").ok(), Some("PRIMARY"), "{status}");
    assert_eq!(member.get_bool("self").ok(), Some(true), "{status}");
    assert_eq!(member.get_str("name").ok(), Some(me.as_str()), "{status}");

    // Writes are taken, and the driver sees a replica set with a primary.
    let rs_client = Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{port}/?replicaSet={SET_NAME}&retryWrites=false&serverSelectionTimeoutMS=5000"
    ))
    .await
    .unwrap();
    let coll = rs_client.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 1);

    // Step-down with no electable secondary fails after the catch-up period
    // and the node stays primary.
    let e = expect_code(
        admin_cmd(
            &ts.tcp,
            doc! {"replSetStepDown": 5, "secondaryCatchUpPeriodSecs": 0},
        )
        .await,
        262,
    );
    assert!(
        error_message(&e).contains("No electable secondaries caught up"),
        "{e}"
    );
    expect_code(
        admin_cmd(
            &ts.tcp,
            doc! {"replSetStepDown": 5, "secondaryCatchUpPeriodSecs": 10},
        )
        .await,
        2,
    );
    expect_code(
        admin_cmd(&ts.tcp, doc! {"replSetStepDown": 60, "force": true}).await,
        115,
    );
    expect_code(admin_cmd(&ts.tcp, doc! {"replSetFreeze": 30}).await, 95);
    let hello = admin_cmd(&ts.tcp, doc! {"hello": 1}).await.unwrap();
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
    // Replica-set commands mongod has and BisonDB does not serve.
    expect_code(admin_cmd(&ts.tcp, doc! {"replSetSyncFrom": me}).await, 115);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initiate_without_a_config_uses_this_host() {
    let ts = start_with(|c| c.repl_set_name = Some(SET_NAME.into())).await;
    let direct = direct_client(ts.server.port()).await;
    let reply = admin_cmd(&direct, doc! {"replSetInitiate": {}})
        .await
        .unwrap();
    let me = reply.get_str("me").unwrap().to_string();
    assert!(me.ends_with(&format!(":{}", ts.server.port())), "{reply}");
    assert!(reply.get_str("info2").is_ok(), "{reply}");
    let hello = admin_cmd(&direct, doc! {"hello": 1}).await.unwrap();
    assert_eq!(hello.get_str("me").ok(), Some(me.as_str()), "{hello}");
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reconfig_follows_the_version_rules_and_wakes_awaiting_hellos() {
    let ts = start_repl_set().await;
    let port = ts.server.port();
    let direct = direct_client(port).await;
    let config = admin_cmd(&direct, doc! {"replSetGetConfig": 1})
        .await
        .unwrap()
        .get_document("config")
        .unwrap()
        .clone();

    // An awaitable hello at the current topology waits...
    let hello = admin_cmd(&direct, doc! {"hello": 1}).await.unwrap();
    let tv = hello.get_document("topologyVersion").unwrap().clone();
    let waiter = {
        let direct = direct.clone();
        let tv = tv.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let r = admin_cmd(
                &direct,
                doc! {"hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": 20000},
            )
            .await
            .unwrap();
            (started.elapsed(), r)
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;

    let mut same = config.clone();
    same.insert("version", 1);
    let e = expect_code(
        admin_cmd(&direct, doc! {"replSetReconfig": same}).await,
        103,
    );
    assert!(error_message(&e).contains("must be greater"), "{e}");
    let mut renamed = config.clone();
    renamed.insert("_id", "rs9");
    renamed.insert("version", 2);
    expect_code(
        admin_cmd(&direct, doc! {"replSetReconfig": renamed}).await,
        103,
    );
    let mut elsewhere = config.clone();
    elsewhere.insert("version", 2);
    elsewhere.insert(
        "members",
        vec![Bson::Document(doc! {"_id": 0, "host": "127.0.0.1:1"})],
    );
    expect_code(
        admin_cmd(&direct, doc! {"replSetReconfig": elsewhere}).await,
        74,
    );

    // ...until a reconfig changes what it would answer.
    let mut next = config.clone();
    next.insert("version", 2);
    admin_cmd(&direct, doc! {"replSetReconfig": next})
        .await
        .unwrap();
    let (waited, answer) = tokio::time::timeout(Duration::from_secs(10), waiter)
        .await
        .expect("awaiting hello woken by the reconfig")
        .unwrap();
    assert!(waited < Duration::from_secs(10), "{waited:?}");
    assert_eq!(answer.get_i32("setVersion").ok(), Some(2), "{answer}");
    let counter = answer
        .get_document("topologyVersion")
        .unwrap()
        .get_i64("counter")
        .unwrap();
    assert!(counter > tv.get_i64("counter").unwrap(), "{answer}");
    let stored = admin_cmd(&direct, doc! {"replSetGetConfig": 1})
        .await
        .unwrap();
    let stored = stored.get_document("config").unwrap();
    assert_eq!(stored.get_i32("version").ok(), Some(2));
    assert_eq!(stored.get_i64("term").ok(), Some(1));

    // force picks a much larger version itself.
    let mut forced = config.clone();
    forced.insert("version", 1);
    admin_cmd(&direct, doc! {"replSetReconfig": forced, "force": true})
        .await
        .unwrap();
    let hello = admin_cmd(&direct, doc! {"hello": 1}).await.unwrap();
    assert!(hello.get_i32("setVersion").unwrap() > 10_000, "{hello}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_member_is_primary_again() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    // A fixed port: the configuration names this node by address.
    let (port, cfg) = lsm_member(dir.path(), &dbpath);
    let server = Server::start(cfg()).await.unwrap();
    initiate(port).await;
    let client = direct_client(port).await;
    client
        .database("app")
        .collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    shutdown_by_command(server, client).await;

    let mut server = None;
    for _ in 0..100 {
        match Server::start(cfg()).await {
            Ok(s) => {
                server = Some(s);
                break;
            }
            Err(e) if e.code.code() == 98 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("restart failed: {} ({:?})", e.message, e.code),
        }
    }
    let server = server.expect("the dbpath lock was never released");
    let client = direct_client(port).await;
    let hello = admin_cmd(&client, doc! {"hello": 1}).await.unwrap();
    assert_eq!(
        hello.get_bool("isWritablePrimary").ok(),
        Some(true),
        "{hello}"
    );
    assert_eq!(hello.get_str("setName").ok(), Some(SET_NAME), "{hello}");
    // A new election after the restart: a new term.
    assert_eq!(
        hello.get_object_id("electionId").unwrap().to_hex(),
        "7fffffff0000000000000002"
    );
    let coll = client.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 2}).await.unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2);
    // The same set under another name is refused at start-up.
    server.shutdown();
    drop(client);
    server.wait().await;
    let mut other = cfg();
    other.repl_set_name = Some("rs1".into());
    let mut refused = None;
    for _ in 0..100 {
        match Server::start(other.clone()).await {
            Err(e) if e.code.code() == 98 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => {
                refused = Some(e);
                break;
            }
            Ok(_) => panic!("a server of set rs1 opened rs0's data"),
        }
    }
    assert_eq!(refused.expect("start refused").code.code(), 93);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_carry_cluster_time_and_write_concerns_are_answered() {
    let ts = start_repl_set().await;
    let client = direct_client(ts.server.port()).await;
    let db = client.database("app");
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1}]})
        .await
        .unwrap();
    let op_time = r.get_timestamp("operationTime").unwrap();
    let cluster = r.get_document("$clusterTime").unwrap();
    let cluster_time = cluster.get_timestamp("clusterTime").unwrap();
    assert!(
        (cluster_time.time, cluster_time.increment) >= (op_time.time, op_time.increment),
        "{r}"
    );
    let signature = cluster.get_document("signature").unwrap();
    assert_eq!(signature.get_i64("keyId").ok(), Some(0));
    match signature.get("hash") {
        Some(Bson::Binary(b)) => assert_eq!(b.bytes, vec![0u8; 20]),
        other => panic!("{other:?}"),
    }
    // The insert's own entry is at operationTime.
    let entry = client
        .database("local")
        .collection::<Document>("oplog.rs")
        .find_one(doc! {"op": "i", "o2": {"_id": 1}})
        .await
        .unwrap()
        .unwrap();
    assert_eq!(entry.get_timestamp("ts").ok(), Some(op_time));
    // Reads after it see it, at every level.
    for level in ["local", "available", "majority", "linearizable", "snapshot"] {
        let mut rc = doc! {"level": level};
        if level != "available" {
            rc.insert("afterClusterTime", op_time);
        }
        let r = db
            .run_command(doc! {"find": "c", "filter": {"_id": 1}, "readConcern": rc})
            .await
            .unwrap_or_else(|e| panic!("{level}: {e}"));
        assert_eq!(first_batch(&r).len(), 1, "{level}: {r}");
    }
    // A time ahead of the clock: the member moves there and answers.
    let ahead = Timestamp {
        time: op_time.time + 5,
        increment: 1,
    };
    let r = db
        .run_command(doc! {"find": "c", "readConcern": {"afterClusterTime": ahead}})
        .await
        .unwrap();
    let after = r.get_timestamp("operationTime").unwrap();
    assert!(
        (after.time, after.increment) >= (ahead.time, ahead.increment),
        "{r}"
    );
    expect_code(
        db.run_command(doc! {"find": "c", "readConcern": {"level": "bogus"}})
            .await,
        9,
    );
    // Reads at a point in time (snapshot_reads.rs): no history reaches
    // back before the first snapshot read; on postgres (no history) the
    // `snapshot` read above answered the clock's time, `op_time`, and kept
    // its snapshot, so that time reads (snapshot_reads.rs has the rest).
    let at_op_time = db
        .run_command(
            doc! {"find": "c", "readConcern": {"level": "snapshot", "atClusterTime": op_time}},
        )
        .await;
    if test_engine() == "postgres" {
        let r = at_op_time.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(first_batch(&r).len(), 1, "{r}");
    } else {
        expect_code(at_op_time, 239);
    }
    // w: 1 and majority are satisfied; w: 2 cannot be, and says so beside
    // the applied write; so does an unknown tag mode.
    for w in [Bson::Int32(1), Bson::String("majority".into())] {
        let r = db
            .run_command(doc! {"insert": "c", "documents": [{}], "writeConcern": {"w": w.clone()}})
            .await
            .unwrap();
        assert!(!r.contains_key("writeConcernError"), "{w}: {r}");
    }
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": "w2"}], "writeConcern": {"w": 2, "wtimeout": 100}})
        .await
        .unwrap();
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").ok(), Some(100), "{r}");
    assert_eq!(
        wce.get_str("codeName").ok(),
        Some("UnsatisfiableWriteConcern")
    );
    assert_eq!(num(&r, "n"), 1, "{r}");
    // Through the driver's insert API it is a write concern error.
    let e = db
        .collection::<Document>("c")
        .insert_one(doc! {"_id": "w2b"})
        .with_options(
            mongodb::options::InsertOneOptions::builder()
                .write_concern(
                    mongodb::options::WriteConcern::builder()
                        .w(mongodb::options::Acknowledgment::Nodes(2))
                        .build(),
                )
                .build(),
        )
        .await
        .unwrap_err();
    assert!(
        format!("{e}").contains("Not enough data-bearing nodes"),
        "{e}"
    );
    assert_eq!(
        db.collection::<Document>("c")
            .count_documents(doc! {"_id": "w2"})
            .await
            .unwrap(),
        1
    );
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{}], "writeConcern": {"w": "dc2"}})
        .await
        .unwrap();
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").ok(), Some(79), "{r}");
}

/// `readConcern: {level: "snapshot"}` outside a transaction: the reads that
/// run at a snapshot (find, aggregate, distinct) take it; writes and the
/// listing commands get 72 InvalidOptions, as mongod (the sessions spec's
/// snapshot-sessions-unsupported-ops tests). `$out`/`$merge` refuse
/// `linearizable` (the CRUD spec's aggregate-out-readConcern test).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn snapshot_and_linearizable_read_concerns_commands_refuse() {
    let ts = start_repl_set().await;
    let db = ts.tcp.database("snap");
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let rc = doc! {"level": "snapshot"};
    for cmd in [
        doc! {"find": "c", "readConcern": rc.clone()},
        doc! {"aggregate": "c", "pipeline": [], "cursor": {}, "readConcern": rc.clone()},
        doc! {"distinct": "c", "key": "_id", "readConcern": rc.clone()},
    ] {
        let r = db.run_command(cmd.clone()).await;
        assert!(r.is_ok(), "{cmd:?}: {r:?}");
    }
    for (cmd, name) in [
        (
            doc! {"insert": "c", "documents": [{"_id": 2}], "readConcern": rc.clone()},
            "insert",
        ),
        (
            doc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"a": 1}}}], "readConcern": rc.clone()},
            "update",
        ),
        (
            doc! {"delete": "c", "deletes": [{"q": {}, "limit": 1}], "readConcern": rc.clone()},
            "delete",
        ),
        (
            doc! {"findAndModify": "c", "query": {}, "update": {"$set": {"a": 1}}, "readConcern": rc.clone()},
            "findAndModify",
        ),
        (
            doc! {"listCollections": 1, "readConcern": rc.clone()},
            "listCollections",
        ),
        (
            doc! {"listIndexes": "c", "readConcern": rc.clone()},
            "listIndexes",
        ),
        (doc! {"create": "d", "readConcern": rc.clone()}, "create"),
    ] {
        let e = expect_code(db.run_command(cmd).await, 72);
        assert!(
            error_message(&e).contains(&format!("Command {name} does not support")),
            "{e:?}"
        );
    }
    let e = expect_code(
        ts.tcp
            .database("admin")
            .run_command(doc! {"listDatabases": 1, "readConcern": rc.clone()})
            .await,
        72,
    );
    assert!(error_message(&e).contains("listDatabases"), "{e:?}");
    // An aggregation that writes cannot read at linearizable.
    for stage in [doc! {"$out": "o"}, doc! {"$merge": {"into": "o"}}] {
        let name = stage.keys().next().cloned().unwrap_or_default();
        let e = expect_code(
            db.run_command(doc! {"aggregate": "c", "pipeline": [stage], "cursor": {},
            "readConcern": {"level": "linearizable"}})
                .await,
            72,
        );
        assert!(
            error_message(&e).contains(&format!(
                "{name} cannot be used with a 'linearizable' read concern level"
            )),
            "{e:?}"
        );
    }
    db.run_command(doc! {"aggregate": "c", "pipeline": [], "cursor": {},
    "readConcern": {"level": "linearizable"}})
        .await
        .unwrap();
    // Nothing was written by the refused writes.
    let n = db
        .collection::<Document>("c")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(n, 1);
    assert!(!db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"d".to_string()));
}

/// `validate` with `background: true` runs in replica-set mode (mongod
/// refuses it only on a standalone, 115); its refused combinations stay 72.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_validate_runs_in_replica_set_mode() {
    let ts = start_repl_set().await;
    let db = ts.tcp.database("val");
    db.collection::<Document>("c")
        .insert_one(doc! {"a": 1})
        .await
        .unwrap();
    let r = db
        .run_command(doc! {"validate": "c", "background": true})
        .await
        .unwrap();
    assert_eq!(r.get_bool("valid").ok(), Some(true), "{r:?}");
    assert_eq!(r.get_str("ns").ok(), Some("val.c"), "{r:?}");
    expect_code(
        db.run_command(doc! {"validate": "c", "background": true, "full": true})
            .await,
        72,
    );
    expect_code(
        db.run_command(doc! {"validate": "none", "background": true})
            .await,
        26,
    );
}

/// A write that fails still reports the write concern it cannot satisfy,
/// as mongod waits for the write concern of a failed command too (so
/// pymongo raises the write concern error, `test_raise_write_concern_error`):
/// the reply carries both its error and `writeConcernError`. Errors raised
/// before the write concern is read (here a malformed one) carry none.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failed_write_reports_its_unsatisfiable_write_concern() {
    let ts = start_repl_set().await;
    let db = ts.tcp.database("wce");
    db.create_collection("a").await.unwrap();
    db.create_collection("b").await.unwrap();
    let mut raw = tokio::net::TcpStream::connect(("127.0.0.1", ts.server.port()))
        .await
        .unwrap();
    let r = raw_command(
        &mut raw,
        doc! {"renameCollection": "wce.a", "to": "wce.b", "writeConcern": {"w": 2, "wtimeout": 1}, "$db": "admin"},
    )
    .await;
    assert_eq!(r.get_i32("code").ok(), Some(48), "{r}");
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").ok(), Some(100), "{r}");
    let r = raw_command(
        &mut raw,
        doc! {"dropIndexes": "a", "index": "none_1", "writeConcern": {"w": "dc2"}, "$db": "wce"},
    )
    .await;
    assert_eq!(r.get_i32("code").ok(), Some(27), "{r}");
    let wce = r.get_document("writeConcernError").unwrap();
    assert_eq!(wce.get_i32("code").ok(), Some(79), "{r}");
    let r = raw_command(
        &mut raw,
        doc! {"insert": "a", "documents": [{}], "writeConcern": {"w": 2, "j": "x"}, "$db": "wce"},
    )
    .await;
    assert_eq!(num(&r, "ok"), 0, "{r}");
    assert!(!r.contains_key("writeConcernError"), "{r}");
    // A read's failure has no write concern to report.
    let r = raw_command(
        &mut raw,
        doc! {"find": "a", "filter": {"$bad": 1}, "$db": "wce"},
    )
    .await;
    assert!(!r.contains_key("writeConcernError"), "{r}");
}
