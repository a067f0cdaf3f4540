//! The database profiler through the official driver: the `profile` command's
//! replies and errors, and the entries written to `system.profile` for finds,
//! getMores, commands, inserts, updates, deletes and failed commands, at
//! level 2, at level 1 with `slowms` and with a filter, and none at level 0.

use crate::common;

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Database;

/// Runs a `profile` command; its reply without the cluster time a mongos
/// adds.
async fn profile(db: &Database, cmd: Document) -> Document {
    without_cluster_time(db.run_command(cmd).await.unwrap())
}

/// The profile entries of `db`, oldest first, except those of `profile`.
async fn entries(db: &Database, filter: Document) -> Vec<Document> {
    let coll = db.collection::<Document>("system.profile");
    collect(coll.find(filter).await.unwrap()).await
}

fn one(mut list: Vec<Document>, what: &str) -> Document {
    assert_eq!(list.len(), 1, "{what}: {list:?}");
    list.remove(0)
}

#[tokio::test]
async fn profile_command_reads_and_sets_the_settings() {
    let s = start().await;
    let db = s.tcp.database("prof_settings");
    let r = profile(&db, doc! {"profile": -1}).await;
    assert_eq!(
        r,
        doc! {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    );
    // Reading creates nothing.
    let names = db.list_collection_names().await.unwrap();
    assert!(!names.contains(&"system.profile".to_string()), "{names:?}");

    let r = profile(&db, doc! {"profile": 1, "slowms": 20, "sampleRate": 0.5}).await;
    assert_eq!(
        r,
        doc! {"was": 0, "slowms": 100, "sampleRate": 1.0, "ok": 1.0}
    );
    let r = profile(&db, doc! {"profile": -1}).await;
    assert_eq!(
        r,
        doc! {"was": 1, "slowms": 20, "sampleRate": 0.5, "ok": 1.0}
    );
    // Turning profiling on created system.profile: capped, 1 MiB.
    let first = collection_entry(&db, "system.profile").await;
    let options = first.get_document("options").unwrap();
    assert_eq!(options.get_bool("capped").ok(), Some(true));
    assert_eq!(num(options, "size"), 1 << 20);

    // Another database keeps its own level; slowms is server-wide.
    let other = s.tcp.database("prof_settings_other");
    let r = profile(&other, doc! {"profile": -1}).await;
    assert_eq!(
        r,
        doc! {"was": 0, "slowms": 20, "sampleRate": 0.5, "ok": 1.0}
    );

    // A filter is shown with a note; "unset" removes it.
    let r = profile(&db, doc! {"profile": 1, "filter": {"op": "query"}}).await;
    assert!(r.get("filter").is_none());
    assert!(r
        .get_str("note")
        .unwrap()
        .starts_with("When a filter expression is set"));
    let r = profile(&db, doc! {"profile": -1}).await;
    assert_eq!(r.get_document("filter").unwrap(), &doc! {"op": "query"});
    assert!(r.contains_key("note"));
    profile(&db, doc! {"profile": -1, "filter": "unset"}).await;
    let r = profile(&db, doc! {"profile": 5}).await;
    assert_eq!(
        r.keys().collect::<Vec<_>>(),
        ["was", "slowms", "sampleRate", "ok"]
    );
    assert_eq!(num(&r, "was"), 1, "a level outside 0..2 only reads");

    // Errors, with mongod's codes; nothing changes.
    for (cmd, code) in [
        (doc! {"profile": 0, "sampleRate": 1.5}, 2),
        (doc! {"profile": 0, "sampleRate": -0.1}, 2),
        (doc! {"profile": 0, "filter": Bson::Null}, 2),
        (doc! {"profile": 0, "filter": "none"}, 2),
        (doc! {"profile": "all"}, 14),
        (doc! {"profile": 0, "slowms": "fast"}, 14),
        (doc! {"profile": 0, "bogus": 1}, 40415),
    ] {
        expect_code(db.run_command(cmd.clone()).await, code);
    }
    let r = profile(&db, doc! {"profile": 0, "slowms": 100, "sampleRate": 1.0}).await;
    assert_eq!(num(&r, "was"), 1);
}

#[tokio::test]
async fn level_two_records_every_operation() {
    let s = start().await;
    let db = s.tcp.database("prof_all");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..5).map(|i| doc! {"_id": i, "a": i}))
        .await
        .unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    profile(&db, doc! {"profile": 2}).await;

    // find: op query, the command as received (comment and $db included).
    let found = collect(coll.find(doc! {}).comment("hello").await.unwrap()).await;
    assert_eq!(found.len(), 5);
    let e = one(
        entries(&db, doc! {"op": "query", "command.comment": "hello"}).await,
        "find",
    );
    assert_eq!(e.get_str("ns").ok(), Some("prof_all.c"));
    let cmd = e.get_document("command").unwrap();
    assert_eq!(cmd.get_str("find").ok(), Some("c"));
    assert_eq!(cmd.get_str("$db").ok(), Some("prof_all"));
    assert_eq!(num(&e, "nreturned"), 5);
    assert_eq!(num(&e, "docsExamined"), 5);
    assert_eq!(num(&e, "keysExamined"), 0);
    assert_eq!(e.get_str("planSummary").ok(), Some("COLLSCAN"));
    assert_eq!(e.get_bool("cursorExhausted").ok(), Some(true));
    assert!(matches!(e.get("ts"), Some(Bson::DateTime(_))));
    assert_eq!(e.get_str("client").ok(), Some("127.0.0.1"));
    assert_eq!(e.get_array("allUsers").map(Vec::len).ok(), Some(0));
    assert_eq!(e.get_str("user").ok(), Some(""));
    assert!(num(&e, "responseLength") > 0);
    assert!(e.contains_key("millis") && e.contains_key("numYield"));

    // An index scan, then a getMore continuing its counters.
    let r = db
        .run_command(
            doc! {"find": "c", "filter": {"a": {"$gte": 1}}, "batchSize": 2, "comment": "ix"},
        )
        .await
        .unwrap();
    let id = r.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    let e = one(
        entries(&db, doc! {"command.comment": "ix"}).await,
        "indexed find",
    );
    assert_eq!(e.get_str("planSummary").ok(), Some("IXSCAN { a: 1 }"));
    assert_eq!(e.get_i64("cursorid").ok(), Some(id));
    assert_eq!(num(&e, "nreturned"), 2);
    db.run_command(doc! {"getMore": id, "collection": "c"})
        .await
        .unwrap();
    let e = one(entries(&db, doc! {"op": "getmore"}).await, "getMore");
    assert_eq!(e.get_str("ns").ok(), Some("prof_all.c"));
    let orig = e.get_document("originatingCommand").unwrap();
    assert_eq!(orig.get_str("comment").ok(), Some("ix"));
    assert_eq!(e.get_i64("cursorid").ok(), Some(id));
    assert_eq!(num(&e, "nreturned"), 2);
    assert_eq!(e.get_str("planSummary").ok(), Some("IXSCAN { a: 1 }"));
    assert_eq!(e.get_bool("cursorExhausted").ok(), Some(true));
    assert!(num(&e, "keysExamined") >= 2);

    // Commands: op command, ns of their collection.
    coll.distinct("a", doc! {}).comment("d").await.unwrap();
    let e = one(
        entries(&db, doc! {"op": "command", "command.distinct": "c"}).await,
        "distinct",
    );
    assert_eq!(e.get_str("ns").ok(), Some("prof_all.c"));
    assert_eq!(
        e.get_document("command").unwrap().get_str("comment").ok(),
        Some("d")
    );
    coll.count_documents(doc! {"a": 3}).await.unwrap();
    one(
        entries(&db, doc! {"op": "command", "command.aggregate": "c"}).await,
        "countDocuments",
    );

    // Writes: insert as one entry, update and delete one per statement.
    coll.insert_many([doc! {"_id": 10}, doc! {"_id": 11}])
        .await
        .unwrap();
    let e = one(entries(&db, doc! {"op": "insert"}).await, "insert");
    assert_eq!(num(&e, "ninserted"), 2);
    db.run_command(doc! {"update": "c", "updates": [
        {"q": {"a": {"$lt": 2}}, "u": {"$set": {"b": 1}}, "multi": true},
        {"q": {"_id": 99}, "u": {"$set": {"b": 2}}, "upsert": true},
    ]})
    .await
    .unwrap();
    let ups = entries(&db, doc! {"op": "update"}).await;
    assert_eq!(ups.len(), 2, "{ups:?}");
    assert_eq!(
        ups[0]
            .get_document("command")
            .unwrap()
            .get_bool("multi")
            .ok(),
        Some(true)
    );
    assert_eq!(num(&ups[0], "nMatched"), 2);
    assert_eq!(num(&ups[0], "nModified"), 2);
    assert_eq!(num(&ups[1], "nUpserted"), 1);
    // Each statement reports the plan that found its targets.
    assert_eq!(ups[0].get_str("planSummary").ok(), Some("IXSCAN { a: 1 }"));
    assert_eq!(num(&ups[0], "keysExamined"), 2);
    assert_eq!(num(&ups[0], "docsExamined"), 2);
    assert_eq!(ups[1].get_str("planSummary").ok(), Some("IDHACK"));
    coll.delete_many(doc! {"_id": {"$gte": 10}})
        .comment("del")
        .await
        .unwrap();
    let e = one(entries(&db, doc! {"op": "remove"}).await, "delete");
    assert_eq!(num(&e, "ndeleted"), 3);
    // mongod's `appendCommentField`: the statement's entry carries the
    // command's comment.
    let cmd = e.get_document("command").unwrap();
    assert_eq!(
        cmd.get_document("q").ok(),
        Some(&doc! {"_id": {"$gte": 10}})
    );
    assert_eq!(cmd.get_str("comment").ok(), Some("del"), "{cmd}");
    assert!(e.contains_key("planSummary") && e.contains_key("docsExamined"));
    coll.find_one_and_update(doc! {"a": 4}, doc! {"$set": {"c": 1}})
        .await
        .unwrap();
    let e = one(
        entries(&db, doc! {"command.findAndModify": "c"}).await,
        "findAndModify",
    );
    assert_eq!(e.get_str("op").ok(), Some("command"));
    assert_eq!(e.get_str("planSummary").ok(), Some("IXSCAN { a: 1 }"));
    assert_eq!(num(&e, "docsExamined"), 1);
    let agg = collect(
        coll.aggregate([doc! {"$match": {"a": {"$gte": 3}}}])
            .comment("agg")
            .await
            .unwrap(),
    )
    .await;
    let e = one(
        entries(&db, doc! {"command.comment": "agg"}).await,
        "aggregate",
    );
    assert_eq!(num(&e, "nreturned"), agg.len() as i64);
    assert_eq!(e.get_str("planSummary").ok(), Some("IXSCAN { a: 1 }"));

    // A failed command is recorded with its error.
    expect_code(
        db.run_command(doc! {"find": "c", "filter": {"$bogus": 1}, "comment": "bad"})
            .await,
        2,
    );
    let e = one(entries(&db, doc! {"command.comment": "bad"}).await, "error");
    assert!(common::is_num(e.get("ok").unwrap(), 0.0));
    assert_eq!(num(&e, "errCode"), 2);
    assert_eq!(e.get_str("errName").ok(), Some("BadValue"));
    assert!(!e.get_str("errMsg").unwrap().is_empty());

    // Reading system.profile is profiled too, as in mongod (tools count
    // their own queries that way); level 0 records nothing more.
    let before = entries(&db, doc! {}).await.len();
    let read = entries(&db, doc! {}).await;
    assert_eq!(read.len(), before + 1, "the first read was recorded");
    let last = read.last().unwrap();
    assert_eq!(last.get_str("ns").ok(), Some("prof_all.system.profile"));
    assert_eq!(last.get_str("op").ok(), Some("query"));
    profile(&db, doc! {"profile": 0}).await;
    let after_off = entries(&db, doc! {}).await.len();
    coll.find_one(doc! {}).await.unwrap();
    assert_eq!(entries(&db, doc! {}).await.len(), after_off);
    // The second read and the `profile` command that turned it off.
    assert_eq!(after_off, before + 3, "{before} then {after_off}");
    // Other databases were never profiled.
    let other = s.tcp.database("prof_all_other");
    other
        .collection::<Document>("c")
        .insert_one(doc! {})
        .await
        .unwrap();
    assert!(!other
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"system.profile".to_string()));
}

#[tokio::test]
async fn level_one_uses_slowms_or_the_filter() {
    let s = start().await;
    let db = s.tcp.database("prof_slow");
    let coll = db.collection::<Document>("c");
    profile(&db, doc! {"profile": 1, "slowms": 100_000}).await;
    coll.insert_one(doc! {"a": 1}).await.unwrap();
    coll.find_one(doc! {}).await.unwrap();
    assert!(
        entries(&db, doc! {}).await.is_empty(),
        "nothing is that slow"
    );

    // slowms 0: everything is slow enough.
    profile(&db, doc! {"profile": 1, "slowms": 0}).await;
    coll.find_one(doc! {}).comment("slow").await.unwrap();
    one(
        entries(&db, doc! {"command.comment": "slow"}).await,
        "slowms 0",
    );

    // A filter replaces slowms and sampleRate.
    profile(
        &db,
        doc! {"profile": 1, "slowms": 100_000, "sampleRate": 0.0, "filter": {"op": "insert"}},
    )
    .await;
    coll.insert_one(doc! {"a": 2}).await.unwrap();
    coll.find_one(doc! {})
        .comment("not selected")
        .await
        .unwrap();
    one(entries(&db, doc! {"op": "insert"}).await, "filtered insert");
    assert!(entries(&db, doc! {"command.comment": "not selected"})
        .await
        .is_empty());
    profile(
        &db,
        doc! {"profile": 0, "slowms": 100, "sampleRate": 1.0, "filter": "unset"},
    )
    .await;
}

#[tokio::test]
async fn system_profile_drops_only_when_profiling_is_off() {
    let s = start().await;
    let db = s.tcp.database("prof_drop");
    profile(&db, doc! {"profile": 2}).await;
    db.collection::<Document>("c")
        .insert_one(doc! {})
        .await
        .unwrap();
    let e = expect_code(db.run_command(doc! {"drop": "system.profile"}).await, 20);
    assert_eq!(error_code_name(&e).as_deref(), Some("IllegalOperation"));
    profile(&db, doc! {"profile": 0}).await;
    db.collection::<Document>("system.profile")
        .drop()
        .await
        .unwrap();
    assert!(!db
        .list_collection_names()
        .await
        .unwrap()
        .contains(&"system.profile".to_string()));

    // dropDatabase takes the settings with it, and leaves no system.profile.
    profile(&db, doc! {"profile": 2}).await;
    db.drop().await.unwrap();
    assert!(db.list_collection_names().await.unwrap().is_empty());
    let r = profile(&db, doc! {"profile": -1}).await;
    assert_eq!(num(&r, "was"), 0);
}

#[tokio::test]
async fn startup_options_set_the_default_level_and_slowms() {
    let s = start_with(|c| {
        c.profile = 2;
        c.slowms = 7;
    })
    .await;
    let db = s.tcp.database("prof_startup");
    let r = profile(&db, doc! {"profile": -1}).await;
    assert_eq!(
        r,
        doc! {"was": 2, "slowms": 7, "sampleRate": 1.0, "ok": 1.0}
    );
    db.collection::<Document>("c")
        .insert_one(doc! {"x": 1})
        .await
        .unwrap();
    one(
        entries(&db, doc! {"op": "insert"}).await,
        "insert at --profile 2",
    );
    // The command still sets one database apart.
    profile(&db, doc! {"profile": 0}).await;
    db.collection::<Document>("c")
        .insert_one(doc! {"x": 2})
        .await
        .unwrap();
    assert_eq!(entries(&db, doc! {"op": "insert"}).await.len(), 1);
}
