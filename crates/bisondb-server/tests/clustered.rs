//! Clustered collections and `changeStreamPreAndPostImages` through the
//! official driver: `create` and its errors, `listCollections` and
//! `listIndexes` shapes, `createIndexes`/`dropIndexes` on the clustered
//! index, `collMod`, the TTL monitor on a clustered collection's `_id`, and
//! the options surviving a restart of the persistent engine.

use std::time::Duration;

use crate::common::*;
use bisondb_server::Server;
use bson::{doc, Bson, Document};
use mongodb::{Client, Database};

async fn indexes(db: &Database, name: &str) -> Vec<Document> {
    first_batch(&run(db, doc! {"listIndexes": name}).await)
}

#[tokio::test]
async fn create_list_collections_and_list_indexes() {
    let t = start().await;
    let db = t.tcp.database("clus");
    run(
        &db,
        doc! {"create": "named", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "test index"}},
    )
    .await;
    let entry = collection_entry(&db, "named").await;
    assert_eq!(
        entry.get_document("options").ok(),
        Some(
            &doc! {"clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "test index", "unique": true}}
        ),
        "{entry}"
    );
    // The clustered index takes the `_id` index's place.
    assert!(!entry.contains_key("idIndex"), "{entry}");
    assert_eq!(
        indexes(&db, "named").await,
        vec![
            doc! {"v": 2, "key": {"_id": 1}, "name": "test index", "unique": true, "clustered": true}
        ]
    );

    // The default name, a TTL and a collation show in listIndexes too.
    run(
        &db,
        doc! {"create": "ttl", "clusteredIndex": {"key": {"_id": 1}, "unique": true},
        "expireAfterSeconds": 60, "collation": {"locale": "fr"}},
    )
    .await;
    let entry = collection_entry(&db, "ttl").await;
    let options = entry.get_document("options").cloned().unwrap_or_default();
    assert_eq!(
        options.get_document("clusteredIndex").ok(),
        Some(&doc! {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": true})
    );
    assert_eq!(options.get("expireAfterSeconds"), Some(&Bson::Int64(60)));
    let listed = indexes(&db, "ttl").await;
    assert_eq!(listed[0].get_str("name").ok(), Some("_id_"));
    assert_eq!(listed[0].get("expireAfterSeconds"), Some(&Bson::Int64(60)));
    assert_eq!(listed[0].get_bool("clustered").ok(), Some(true));
    assert!(listed[0].get_document("collation").is_ok(), "{listed:?}");

    // Creating it again with the same options is a no-op; other options are 48.
    run(
        &db,
        doc! {"create": "named", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "test index"}},
    )
    .await;
    expect_code(db.run_command(doc! {"create": "named"}).await, 48);

    // Documents: `_id` stays unique, queries work as on any collection.
    let coll = db.collection::<Document>("named");
    coll.insert_many(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    expect_code(coll.insert_one(doc! {"_id": 1}).await, 11000);
    assert_eq!(count(&coll, doc! {"a": 2}).await, 1);

    // collStats and validate know the collection has no `_id_` index.
    let stats = run(&db, doc! {"collStats": "named"}).await;
    assert_eq!(num(&stats, "nindexes"), 0, "{stats}");
    let v = run(&db, doc! {"validate": "named"}).await;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    assert_eq!(num(&v, "nIndexes"), 0, "{v}");
    let db_stats = run(&db, doc! {"dbStats": 1}).await;
    assert_eq!(num(&db_stats, "indexes"), 0, "{db_stats}");
    assert_eq!(v.get_document("keysPerIndex").ok(), Some(&doc! {}), "{v}");
}

#[tokio::test]
async fn create_errors_are_mongods() {
    let t = start().await;
    let db = t.tcp.database("clus_err");
    let cases: Vec<(Document, i32)> = vec![
        // IDL: required fields, unknown fields, types.
        (doc! {"clusteredIndex": {"key": {"_id": 1}}}, 40414),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true, "randField": 1}},
            40415,
        ),
        (doc! {"clusteredIndex": "yes"}, 14),
        // The index's rules.
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": false}},
            5979700,
        ),
        (
            doc! {"clusteredIndex": {"key": {"a": 1}, "unique": true}},
            197,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": -1}, "unique": true}},
            197,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true, "v": 12345}},
            5979704,
        ),
        // The legacy form belongs to time-series buckets.
        (doc! {"clusteredIndex": true}, 5979703),
        // With other options.
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "size": 10},
            6049200,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "max": 10},
            6049204,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "capped": true},
            6127800,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "viewOn": "src"},
            6026500,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "autoIndexId": false},
            6026501,
        ),
        (
            doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}, "expireAfterSeconds": -10},
            72,
        ),
        // expireAfterSeconds needs clustering.
        (doc! {"expireAfterSeconds": 5}, 72),
        (doc! {"clusteredIndex": false, "expireAfterSeconds": 5}, 72),
        // changeStreamPreAndPostImages is a strict {enabled: bool}.
        (doc! {"changeStreamPreAndPostImages": {}}, 40414),
        (doc! {"changeStreamPreAndPostImages": {"enabled": 1}}, 14),
        (
            doc! {"changeStreamPreAndPostImages": {"enabled": true, "x": 1}},
            40415,
        ),
        (doc! {"changeStreamPreAndPostImages": true}, 14),
        (
            doc! {"changeStreamPreAndPostImages": {"enabled": true}, "viewOn": "src"},
            72,
        ),
    ];
    for (options, code) in cases {
        let mut cmd = doc! {"create": "c"};
        cmd.extend(options.clone());
        let e = expect_code(db.run_command(cmd).await, code);
        let name = error_code_name(&e).unwrap_or_default();
        assert!(!name.is_empty(), "{options}: {e}");
    }
    // Nothing was created by the failures.
    let r = run(&db, doc! {"listCollections": 1}).await;
    assert!(first_batch(&r).is_empty(), "{r}");
    // clusteredIndex: false is an ordinary collection.
    run(&db, doc! {"create": "plain", "clusteredIndex": false}).await;
    let entry = collection_entry(&db, "plain").await;
    assert_eq!(entry.get_document("options").ok(), Some(&doc! {}));
    assert!(entry.contains_key("idIndex"), "{entry}");
    // Pre-images are refused in admin.
    expect_code(
        t.tcp
            .database("admin")
            .run_command(doc! {"create": "c", "changeStreamPreAndPostImages": {"enabled": true}})
            .await,
        72,
    );
}

#[tokio::test]
async fn clustered_index_cannot_be_dropped_and_create_index_on_it_is_a_no_op() {
    let t = start().await;
    let db = t.tcp.database("clus_ix");
    run(
        &db,
        doc! {"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "ck"}},
    )
    .await;
    for index in [
        Bson::String("ck".into()),
        Bson::Document(doc! {"_id": 1}),
        Bson::Array(vec![Bson::String("ck".into())]),
    ] {
        let e = expect_code(
            db.run_command(doc! {"dropIndexes": "c", "index": index})
                .await,
            5979800,
        );
        assert!(error_message(&e).contains("illegal to drop the clusteredIndex"));
    }
    // `_id_` is not an index of a clustered collection.
    expect_code(
        db.run_command(doc! {"dropIndexes": "c", "index": "_id_"})
            .await,
        27,
    );
    // The cluster key, with or without `clustered` and whatever the name: a no-op.
    for spec in [
        doc! {"key": {"_id": 1}, "name": "_id_"},
        doc! {"key": {"_id": 1}, "name": "other"},
        doc! {"key": {"_id": -1}, "name": "_id_-1"},
        doc! {"key": {"_id": 1}, "name": "ck", "clustered": true, "unique": true, "v": 2},
    ] {
        let r = run(&db, doc! {"createIndexes": "c", "indexes": [spec.clone()]}).await;
        assert_eq!(num(&r, "numIndexesBefore"), 0, "{spec}: {r}");
        assert_eq!(num(&r, "numIndexesAfter"), 0, "{spec}: {r}");
        assert_eq!(r.get_str("note").ok(), Some("all indexes already exist"));
    }
    for (spec, code) in [
        (
            doc! {"key": {"a": 1}, "name": "a_1", "clustered": true, "unique": true},
            6243700,
        ),
        (doc! {"key": {"a": 1}, "name": "ck"}, 6100906),
        (
            doc! {"key": {"_id": 1}, "name": "x", "unique": false},
            6100909,
        ),
        (
            doc! {"key": {"_id": 1}, "name": "x", "clustered": false, "unique": true},
            6492800,
        ),
    ] {
        expect_code(
            db.run_command(doc! {"createIndexes": "c", "indexes": [spec]})
                .await,
            code,
        );
    }
    // A secondary index is an ordinary one, counted without the clustered one.
    let r = run(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}]},
    )
    .await;
    assert_eq!(
        (num(&r, "numIndexesBefore"), num(&r, "numIndexesAfter")),
        (0, 1)
    );
    let names: Vec<String> = indexes(&db, "c")
        .await
        .iter()
        .filter_map(|d| d.get_str("name").ok().map(str::to_string))
        .collect();
    assert_eq!(names, ["ck", "a_1"]);
    let r = run(&db, doc! {"dropIndexes": "c", "index": "*"}).await;
    assert_eq!(num(&r, "nIndexesWas"), 1, "{r}");

    // On an ordinary collection, `clustered` is refused and `{_id: 1}` by
    // another name conflicts with `_id_`.
    run(&db, doc! {"create": "plain"}).await;
    expect_code(
        db.run_command(doc! {"createIndexes": "plain", "indexes": [
            {"key": {"_id": 1}, "name": "_id_", "clustered": true, "unique": true}
        ]})
        .await,
        6243700,
    );
    expect_code(
        db.run_command(
            doc! {"createIndexes": "plain", "indexes": [{"key": {"_id": 1}, "name": "x"}]},
        )
        .await,
        85,
    );
    expect_code(
        db.run_command(doc! {"createIndexes": "missing", "indexes": [
            {"key": {"_id": 1}, "name": "_id_", "clustered": true, "unique": true}
        ]})
        .await,
        6100900,
    );
}

#[tokio::test]
async fn coll_mod_changes_ttl_and_pre_images() {
    let t = start().await;
    let db = t.tcp.database("clus_mod");
    run(
        &db,
        doc! {"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": true}},
    )
    .await;
    let r = run(&db, doc! {"collMod": "c", "expireAfterSeconds": 30}).await;
    assert_eq!(without_cluster_time(r), doc! {"ok": 1.0});
    let options = collection_entry(&db, "c").await;
    assert_eq!(
        options
            .get_document("options")
            .ok()
            .and_then(|o| o.get("expireAfterSeconds")),
        Some(&Bson::Int64(30))
    );
    run(&db, doc! {"collMod": "c", "expireAfterSeconds": "off"}).await;
    let options = collection_entry(&db, "c").await;
    assert!(!options
        .get_document("options")
        .is_ok_and(|o| o.contains_key("expireAfterSeconds")));
    expect_code(
        db.run_command(doc! {"collMod": "c", "expireAfterSeconds": "soon"})
            .await,
        72,
    );
    expect_code(
        db.run_command(doc! {"collMod": "c", "expireAfterSeconds": -1})
            .await,
        72,
    );
    expect_code(
        db.run_command(doc! {"collMod": "c", "expireAfterSeconds": true})
            .await,
        14,
    );

    // Pre- and post-images on any collection; disabling removes the option.
    run(
        &db,
        doc! {"create": "p", "changeStreamPreAndPostImages": {"enabled": false}},
    )
    .await;
    let entry = collection_entry(&db, "p").await;
    assert_eq!(entry.get_document("options").ok(), Some(&doc! {}));
    let r = run(
        &db,
        doc! {"collMod": "p", "changeStreamPreAndPostImages": {"enabled": true}},
    )
    .await;
    assert_eq!(without_cluster_time(r), doc! {"ok": 1.0});
    let entry = collection_entry(&db, "p").await;
    assert_eq!(
        entry.get_document("options").ok(),
        Some(&doc! {"changeStreamPreAndPostImages": {"enabled": true}})
    );
    run(
        &db,
        doc! {"collMod": "p", "changeStreamPreAndPostImages": {"enabled": false}},
    )
    .await;
    let entry = collection_entry(&db, "p").await;
    assert_eq!(entry.get_document("options").ok(), Some(&doc! {}));
    expect_code(
        db.run_command(doc! {"collMod": "p", "changeStreamPreAndPostImages": {"on": true}})
            .await,
        40415,
    );
    // TTL needs a clustered collection; neither option applies to a view.
    expect_code(
        db.run_command(doc! {"collMod": "p", "expireAfterSeconds": 5})
            .await,
        72,
    );
    run(&db, doc! {"create": "v", "viewOn": "p", "pipeline": []}).await;
    for cmd in [
        doc! {"collMod": "v", "changeStreamPreAndPostImages": {"enabled": true}},
        doc! {"collMod": "v", "expireAfterSeconds": 5},
    ] {
        expect_code(db.run_command(cmd).await, 72);
    }
    // The clustered index cannot be hidden; it is not a secondary index.
    expect_code(
        db.run_command(doc! {"collMod": "c", "index": {"name": "_id_", "hidden": true}})
            .await,
        6011800,
    );
}

#[tokio::test]
async fn ttl_monitor_expires_clustered_documents_by_id() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = config(dir.path());
    cfg.ttl_monitor_sleep_secs = 1;
    let server = Server::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("{}", e.message));
    let client = Client::with_uri_str(tcp_uri(server.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let db = client.database("clus_ttl");
    run(
        &db,
        doc! {"create": "events", "clusteredIndex": {"key": {"_id": 1}, "unique": true},
        "expireAfterSeconds": 60},
    )
    .await;
    let now = bson::DateTime::now().timestamp_millis();
    let at = |ms: i64| Bson::DateTime(bson::DateTime::from_millis(ms));
    let coll = db.collection::<Document>("events");
    coll.insert_many(vec![
        doc! {"_id": at(now - 3_600_000), "n": "old"},
        doc! {"_id": at(now + 3_600_000), "n": "future"},
        doc! {"_id": at(now), "n": "fresh"},
        doc! {"_id": "not-a-date", "n": "string"},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let left = left_after_ttl(&coll, "n", 3).await;
    assert_eq!(
        left,
        vec![
            Bson::String("fresh".into()),
            Bson::String("future".into()),
            Bson::String("string".into())
        ]
    );
    // With the TTL off, nothing more expires.
    run(&db, doc! {"collMod": "events", "expireAfterSeconds": "off"}).await;
    coll.insert_one(doc! {"_id": at(now - 3_600_000), "n": "old again"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    tokio::time::sleep(Duration::from_millis(2500)).await;
    assert_eq!(count(&coll, doc! {}).await, 4);
    server.shutdown();
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustered_options_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    run(
        &db,
        doc! {"create": "c", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "ck"},
        "expireAfterSeconds": 3600},
    )
    .await;
    run(
        &db,
        doc! {"create": "p", "changeStreamPreAndPostImages": {"enabled": true}},
    )
    .await;
    shutdown_by_command(server, client).await;

    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    let entry = collection_entry(&db, "c").await;
    assert_eq!(
        entry.get_document("options").ok(),
        Some(&doc! {
            "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "ck", "unique": true},
            "expireAfterSeconds": 3600i64,
        }),
        "{entry}"
    );
    assert_eq!(
        indexes(&db, "c").await,
        vec![
            doc! {"v": 2, "key": {"_id": 1}, "name": "ck", "unique": true,
            "expireAfterSeconds": 3600i64, "clustered": true}
        ]
    );
    let entry = collection_entry(&db, "p").await;
    assert_eq!(
        entry.get_document("options").ok(),
        Some(&doc! {"changeStreamPreAndPostImages": {"enabled": true}})
    );
    server.shutdown();
    drop(client);
    server.wait().await;
}
