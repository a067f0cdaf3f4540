//! Databases and collections: listing, create, drop, rename, dropDatabase,
//! listIndexes, and the dbStats/collStats numbers.

use crate::common::*;
use bson::{doc, Document};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_databases_and_collections() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let (d1, d2) = (format!("m1_{t}"), format!("m2_{t}"));
        client
            .database(&d1)
            .collection::<Document>("a")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
        client
            .database(&d2)
            .collection::<Document>("b")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
        let names = client.list_database_names().await.unwrap();
        assert!(names.contains(&d1) && names.contains(&d2), "{t}: {names:?}");

        let db = client.database(&d1);
        db.create_collection("c").await.unwrap();
        db.collection::<Document>("b")
            .insert_one(doc! {})
            .await
            .unwrap();
        let mut colls = db.list_collection_names().await.unwrap();
        colls.sort();
        assert_eq!(colls, vec!["a", "b", "c"], "{t}");
        let filtered = db
            .list_collection_names()
            .filter(doc! {"name": "b"})
            .await
            .unwrap();
        assert_eq!(filtered, vec!["b"], "{t}");
        let filtered = db
            .list_collection_names()
            .filter(doc! {"name": {"$in": ["a", "c", "zz"]}})
            .await
            .unwrap();
        assert_eq!(filtered.len(), 2, "{t}: {filtered:?}");

        let specs = collect_specs(&db).await;
        let a = specs
            .iter()
            .find(|s| s.get_str("name").ok() == Some("a"))
            .expect("a listed");
        assert_eq!(a.get_str("type").ok(), Some("collection"), "{t}: {a}");

        client.database(&d2).drop().await.unwrap();
        let names = client.list_database_names().await.unwrap();
        assert!(
            !names.contains(&d2),
            "{t}: dropped database still listed: {names:?}"
        );
        assert!(names.contains(&d1));
    }
}

async fn collect_specs(db: &mongodb::Database) -> Vec<Document> {
    let r = db.run_command(doc! {"listCollections": 1}).await.unwrap();
    let c = r.get_document("cursor").unwrap();
    assert_eq!(c.get_i64("id").ok(), Some(0));
    c.get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|b| b.as_document().unwrap().clone())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_twice_and_drop() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("cr_{t}"));
        db.create_collection("c").await.unwrap();
        // mongod 7+ (SERVER-60064): the same create again is a successful no-op;
        // different options are 48 NamespaceExists.
        db.create_collection("c").await.unwrap();
        let e = expect_code(
            db.run_command(doc! {"create": "c", "capped": true, "size": 4096})
                .await,
            48,
        );
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("NamespaceExists"),
            "{t}"
        );

        db.collection::<Document>("c")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
        db.collection::<Document>("c").drop().await.unwrap();
        assert!(db.list_collection_names().await.unwrap().is_empty(), "{t}");
        assert_eq!(count(&db.collection::<Document>("c"), doc! {}).await, 0);

        // mongod 7+ answers ok to dropping a missing collection; send it raw since
        // the driver would hide a NamespaceNotFound.
        let r = db
            .run_command(doc! {"drop": "never_existed"})
            .await
            .unwrap();
        assert!(is_num(r.get("ok").unwrap(), 1.0), "{t}: {r}");
        db.create_collection("c").await.unwrap();
        assert_eq!(
            db.list_collection_names().await.unwrap(),
            vec!["c"],
            "{t}: re-creatable after drop"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rename_collection() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let dbn = format!("rn_{t}");
        let db = client.database(&dbn);
        let admin = client.database("admin");
        db.collection::<Document>("a")
            .insert_many((0..3).map(|i| doc! {"_id": i}))
            .await
            .unwrap();
        db.collection::<Document>("b")
            .insert_one(doc! {"_id": "b"})
            .await
            .unwrap();

        let e = expect_code(
            admin
                .run_command(
                    doc! {"renameCollection": format!("{dbn}.a"), "to": format!("{dbn}.b")},
                )
                .await,
            48,
        );
        assert!(
            error_message(&e).contains("exists"),
            "{t}: {}",
            error_message(&e)
        );

        admin
            .run_command(doc! {"renameCollection": format!("{dbn}.a"), "to": format!("{dbn}.b"), "dropTarget": true})
            .await
            .unwrap();
        let b = db.collection::<Document>("b");
        assert_eq!(
            count(&b, doc! {}).await,
            3,
            "{t}: b now holds a's documents"
        );
        assert!(
            b.find_one(doc! {"_id": "b"}).await.unwrap().is_none(),
            "{t}: old target dropped"
        );
        assert_eq!(db.list_collection_names().await.unwrap(), vec!["b"], "{t}");

        admin
            .run_command(doc! {"renameCollection": format!("{dbn}.b"), "to": format!("{dbn}.c")})
            .await
            .unwrap();
        assert_eq!(
            count(&db.collection::<Document>("c"), doc! {}).await,
            3,
            "{t}"
        );
        assert_eq!(db.list_collection_names().await.unwrap(), vec!["c"], "{t}");

        expect_code(
            admin
                .run_command(
                    doc! {"renameCollection": format!("{dbn}.missing"), "to": format!("{dbn}.x")},
                )
                .await,
            26,
        );
        // renameCollection is an admin command.
        expect_code(
            db.run_command(doc! {"renameCollection": format!("{dbn}.c"), "to": format!("{dbn}.d")})
                .await,
            13,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_database_and_list_indexes() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("dd_{t}"));
        let coll = db.collection::<Document>("c");
        coll.insert_one(doc! {"x": 1}).await.unwrap();
        assert_eq!(coll.list_index_names().await.unwrap(), vec!["_id_"], "{t}");
        let r = db.run_command(doc! {"listIndexes": "c"}).await.unwrap();
        let idx = r
            .get_document("cursor")
            .unwrap()
            .get_array("firstBatch")
            .unwrap();
        assert_eq!(idx.len(), 1);
        let id = idx[0].as_document().unwrap();
        assert_eq!(
            id.get_document("key").unwrap(),
            &doc! {"_id": 1},
            "{t}: {id}"
        );
        assert_eq!(id.get_str("name").ok(), Some("_id_"));
        assert_eq!(num(id, "v"), 2, "{t}: {id}");
        expect_code(db.run_command(doc! {"listIndexes": "missing"}).await, 26);

        let r = db.run_command(doc! {"dropDatabase": 1}).await.unwrap();
        assert!(is_num(r.get("ok").unwrap(), 1.0), "{t}: {r}");
        assert!(db.list_collection_names().await.unwrap().is_empty(), "{t}");
        assert_eq!(count(&coll, doc! {}).await, 0, "{t}");
        assert!(
            !client
                .list_database_names()
                .await
                .unwrap()
                .contains(&format!("dd_{t}")),
            "{t}"
        );
        // Dropping it again is fine.
        db.drop().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn db_stats_and_coll_stats() {
    // {_id: int32, s: 100-char string} is 4 + 9 + 108 + 1 = 122 BSON bytes.
    const DOC: i64 = 122;
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("st_{t}"));
        let docs: Vec<Document> = (0..100)
            .map(|i| doc! {"_id": i, "s": "x".repeat(100)})
            .collect();
        assert_eq!(docs[0].to_vec().unwrap().len() as i64, DOC);
        db.collection::<Document>("c")
            .insert_many(docs)
            .await
            .unwrap();
        db.create_collection("empty").await.unwrap();

        let cs = db.run_command(doc! {"collStats": "c"}).await.unwrap();
        assert_eq!(num(&cs, "count"), 100, "{t}: {cs}");
        assert_eq!(num(&cs, "size"), 100 * DOC, "{t}: {cs}");
        assert_eq!(num(&cs, "avgObjSize"), DOC, "{t}: {cs}");
        assert!(num(&cs, "storageSize") >= 0, "{t}: {cs}");
        assert_eq!(num(&cs, "nindexes"), 1, "{t}: {cs}");
        assert_eq!(num(&cs, "scaleFactor"), 1, "{t}: {cs}");
        assert_eq!(cs.get_str("ns").ok(), Some(format!("st_{t}.c").as_str()));

        // Secondary indexes are counted and listed by name.
        db.run_command(doc! {"createIndexes": "c", "indexes": [{"key": {"s": 1}, "name": "s_1"}]})
            .await
            .unwrap();
        let cs = db.run_command(doc! {"collStats": "c"}).await.unwrap();
        assert_eq!(num(&cs, "nindexes"), 2, "{t}: {cs}");
        let names: Vec<&str> = cs
            .get_document("indexSizes")
            .map(|d| d.keys().map(String::as_str).collect())
            .unwrap_or_default();
        assert_eq!(names, vec!["_id_", "s_1"], "{t}: {cs}");
        db.run_command(doc! {"dropIndexes": "c", "index": "s_1"})
            .await
            .unwrap();

        let scaled = db
            .run_command(doc! {"collStats": "c", "scale": 1024})
            .await
            .unwrap();
        assert_eq!(num(&scaled, "size"), 100 * DOC / 1024, "{t}: {scaled}");
        assert_eq!(num(&scaled, "scaleFactor"), 1024, "{t}");
        assert_eq!(num(&scaled, "count"), 100, "{t}: count is not scaled");

        let ds = db.run_command(doc! {"dbStats": 1}).await.unwrap();
        assert_eq!(num(&ds, "collections"), 2, "{t}: {ds}");
        assert_eq!(num(&ds, "objects"), 100, "{t}: {ds}");
        assert_eq!(num(&ds, "dataSize"), 100 * DOC, "{t}: {ds}");
        assert_eq!(float(&ds, "avgObjSize"), DOC as f64, "{t}: {ds}");
        assert_eq!(num(&ds, "indexes"), 2, "{t}: {ds}");
        assert!(num(&ds, "storageSize") >= 0);
        assert_eq!(num(&ds, "scaleFactor"), 1);
        let ds = db
            .run_command(doc! {"dbStats": 1, "scale": 1024})
            .await
            .unwrap();
        assert_eq!(num(&ds, "dataSize"), 100 * DOC / 1024, "{t}: {ds}");
        assert_eq!(num(&ds, "scaleFactor"), 1024, "{t}");

        expect_code(db.run_command(doc! {"dbStats": 1, "scale": 0}).await, 2);
        let empty = client
            .database("nothing_here")
            .run_command(doc! {"dbStats": 1})
            .await
            .unwrap();
        assert_eq!(
            (num(&empty, "collections"), num(&empty, "objects")),
            (0, 0),
            "{t}: {empty}"
        );
    }
}

/// DDL commands check their write concern like the write commands do: a
/// standalone server cannot satisfy `w > 1` (pymongo's test_create).
#[tokio::test]
async fn ddl_commands_refuse_write_concerns_a_standalone_cannot_satisfy() {
    let ts = start_standalone().await;
    let db = ts.tcp.database("ddl_wc");
    let wc = doc! {"w": 50};
    for cmd in [
        doc! {"create": "c", "writeConcern": wc.clone()},
        doc! {"createIndexes": "c", "indexes": [{"key": {"a": 1}, "name": "a_1"}], "writeConcern": wc.clone()},
        doc! {"dropIndexes": "c", "index": "*", "writeConcern": wc.clone()},
        doc! {"drop": "c", "writeConcern": wc.clone()},
        doc! {"dropDatabase": 1, "writeConcern": wc.clone()},
    ] {
        expect_code(db.run_command(cmd.clone()).await, 2);
    }
    expect_code(
        ts.tcp
            .database("admin")
            .run_command(
                doc! {"renameCollection": "ddl_wc.c", "to": "ddl_wc.d", "writeConcern": wc.clone()},
            )
            .await,
        2,
    );
    assert!(
        db.list_collection_names().await.unwrap().is_empty(),
        "nothing was created"
    );
    db.run_command(doc! {"create": "c", "writeConcern": {"w": 1, "j": true}})
        .await
        .unwrap();
    assert_eq!(
        db.list_collection_names().await.unwrap(),
        vec!["c".to_string()]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn users_info_finds_no_users_and_checks_its_argument() {
    // No user was created: every well-formed request finds nothing, and the
    // reply has no cursor (pymongo's cursor_command refuses it).
    let ts = start().await;
    let db = ts.tcp.database("users");
    for arg in [
        bson::Bson::Int32(1),
        bson::Bson::String("alice".into()),
        bson::Bson::Document(doc! {"user": "alice", "db": "users"}),
        bson::Bson::Document(doc! {"forAllDBs": true}),
    ] {
        let reply = db
            .run_command(doc! {"usersInfo": arg.clone()})
            .await
            .unwrap_or_else(|e| panic!("{arg}: {e}"));
        assert_eq!(
            reply.get_array("users").map(|a| a.len()).ok(),
            Some(0),
            "{arg}: {reply}"
        );
        assert!(!reply.contains_key("cursor"), "{reply}");
    }
    for bad in [
        doc! {"usersInfo": 2},
        doc! {"usersInfo": {"user": "alice"}},
        doc! {"usersInfo": 1, "showPrivileges": true},
    ] {
        let err = db.run_command(bad.clone()).await.expect_err("malformed");
        match *err.kind {
            mongodb::error::ErrorKind::Command(ref c) => assert_eq!(c.code, 2, "{bad}: {c:?}"),
            ref other => panic!("{bad}: {other:?}"),
        }
    }
}

/// `indexSizes` of a collection, by name.
fn index_sizes(cs: &Document) -> Vec<(String, i64)> {
    cs.get_document("indexSizes")
        .map(|d| d.keys().map(|k| (k.clone(), num(d, k))).collect())
        .unwrap_or_default()
}

/// What collStats, dbStats and listDatabases say of index sizes, for a
/// server whose only collection is `db.c`: per index, their sum, and the
/// totals agree.
async fn check_size_totals(client: &mongodb::Client, db: &mongodb::Database) -> Document {
    let cs = db.run_command(doc! {"collStats": "c"}).await.unwrap();
    let sum: i64 = index_sizes(&cs).iter().map(|(_, n)| n).sum();
    assert_eq!(num(&cs, "totalIndexSize"), sum, "{cs}");
    assert_eq!(
        num(&cs, "totalSize"),
        num(&cs, "storageSize") + num(&cs, "totalIndexSize"),
        "{cs}"
    );
    // The database's figures are shares of the same whole: they differ from
    // the collection's sum only by rounding, one byte per index at most.
    let ds = db.run_command(doc! {"dbStats": 1}).await.unwrap();
    let slack = index_sizes(&cs).len() as i64;
    assert!((num(&ds, "indexSize") - sum).abs() <= slack, "{ds} / {cs}");
    assert_eq!(num(&ds, "storageSize"), num(&cs, "storageSize"), "{ds}");
    assert_eq!(
        num(&ds, "totalSize"),
        num(&ds, "storageSize") + num(&ds, "indexSize"),
        "{ds}"
    );
    let listed = client
        .database("admin")
        .run_command(doc! {"listDatabases": 1, "filter": {"name": db.name()}})
        .await
        .unwrap();
    let on_disk = listed
        .get_array("databases")
        .ok()
        .and_then(|a| a.first())
        .and_then(|d| d.as_document())
        .map(|d| num(d, "sizeOnDisk"))
        .unwrap_or(-1);
    assert_eq!(on_disk, num(&ds, "totalSize"), "{listed}");
    cs
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_sizes_are_measured_per_index_and_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("sizes");
    let c = db.collection::<Document>("c");
    // `s` keys are ~100 bytes, `n` keys a few: the `s_1` index is the larger.
    let docs: Vec<Document> = (0..2000)
        .map(|i| doc! {"_id": i, "s": format!("{i:0>100}"), "n": i})
        .collect();
    c.insert_many(docs).await.unwrap();
    db.run_command(doc! {"createIndexes": "c", "indexes": [
        {"key": {"s": 1}, "name": "s_1"},
        {"key": {"n": 1}, "name": "n_1"},
    ]})
    .await
    .unwrap();
    let cs = check_size_totals(&client, &db).await;
    let sizes = index_sizes(&cs);
    let size = |name: &str| {
        sizes
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, s)| *s)
            .unwrap_or(-1)
    };
    assert!(size("_id_") > 0, "{cs}");
    assert!(size("s_1") > size("n_1") && size("n_1") > 0, "{cs}");

    // Writes change the sizes; deleting every document with `n` < 1000
    // takes half of each index away.
    c.delete_many(doc! {"n": {"$lt": 1000}}).await.unwrap();
    let cs = check_size_totals(&client, &db).await;
    assert!(num(&cs, "totalIndexSize") > 0, "{cs}");

    db.run_command(doc! {"dropIndexes": "c", "index": "s_1"})
        .await
        .unwrap();
    let cs = check_size_totals(&client, &db).await;
    let names: Vec<String> = index_sizes(&cs).into_iter().map(|(n, _)| n).collect();
    assert_eq!(names, vec!["_id_", "n_1"], "{cs}");

    shutdown_by_command(server, client).await;
    let (_server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("sizes");
    let cs = check_size_totals(&client, &db).await;
    let after: Vec<String> = index_sizes(&cs)
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .map(|(n, _)| n)
        .collect();
    assert_eq!(after, vec!["_id_", "n_1"], "{cs}");
    assert_eq!(num(&cs, "count"), 1000, "{cs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_without_files_reports_no_sizes_on_disk() {
    let ts = start_with(|cfg| cfg.storage_engine = "inMemory".into()).await;
    let (_, client) = ts.clients()[0];
    let db = client.database("sizes_mem");
    db.collection::<Document>("c")
        .insert_many((0..100).map(|i| doc! {"_id": i, "n": i}))
        .await
        .unwrap();
    db.run_command(doc! {"createIndexes": "c", "indexes": [{"key": {"n": 1}, "name": "n_1"}]})
        .await
        .unwrap();
    let cs = check_size_totals(client, &db).await;
    assert_eq!(
        index_sizes(&cs),
        vec![("_id_".to_string(), 0), ("n_1".to_string(), 0)],
        "{cs}"
    );
    assert_eq!(num(&cs, "storageSize"), 0, "{cs}");
}

/// mongod creates `admin`, `config` and `local` at startup, so even a fresh
/// standalone lists them (`listDatabases`, manual: "returns a document that
/// lists all databases"); `nameOnly` and `filter` apply to them as to any
/// other database.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_databases_shows_admin_config_and_local() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let r = admin.run_command(doc! {"listDatabases": 1}).await.unwrap();
    let dbs: Vec<&Document> = r
        .get_array("databases")
        .unwrap()
        .iter()
        .filter_map(|d| d.as_document())
        .collect();
    let names: Vec<&str> = dbs.iter().filter_map(|d| d.get_str("name").ok()).collect();
    for n in ["admin", "config", "local"] {
        assert!(names.contains(&n), "{n} missing: {r}");
    }
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted, "{r}");
    let local = dbs
        .iter()
        .find(|d| d.get_str("name").ok() == Some("local"))
        .unwrap();
    assert!(
        local.get_bool("empty").is_ok() && local.contains_key("sizeOnDisk"),
        "{local}"
    );
    let r = admin
        .run_command(doc! {"listDatabases": 1, "nameOnly": true, "filter": {"name": "config"}})
        .await
        .unwrap();
    assert_eq!(
        r.get_array("databases").unwrap(),
        &vec![bson::Bson::Document(doc! {"name": "config"})],
        "{r}"
    );
}

/// serverStatus's `globalLock` as mongod fills it: `totalTime` in
/// microseconds since startup, `currentQueue` and `activeClients` split into
/// readers and writers (the serverStatus itself is a running reader).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_status_global_lock() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let r = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
    let gl = r.get_document("globalLock").unwrap();
    let total_time = gl.get_i64("totalTime").unwrap();
    let uptime_ms = r.get_i64("uptimeMillis").unwrap();
    assert!(
        total_time >= uptime_ms * 1000 - 1000 && total_time > 0,
        "{gl} / {uptime_ms}"
    );
    let q = gl.get_document("currentQueue").unwrap();
    assert_eq!(q, &doc! {"total": 0, "readers": 0, "writers": 0});
    let a = gl.get_document("activeClients").unwrap();
    assert!(num(a, "readers") >= 1, "{a}");
    assert_eq!(
        num(a, "total"),
        num(a, "readers") + num(a, "writers"),
        "{a}"
    );
}

/// `checkMetadataConsistency` is a mongos command: a standalone mongod has
/// no such command (59), so neither has BisonDB off mongos mode
/// (`mongos.rs` tests the mongos answer).
#[tokio::test]
async fn check_metadata_consistency_is_no_command_on_a_standalone() {
    let ts = start_standalone().await;
    for db in ["admin", "cmc"] {
        let e = ts
            .tcp
            .database(db)
            .run_command(doc! {"checkMetadataConsistency": 1})
            .await
            .unwrap_err();
        assert_eq!(error_code(&e), Some(59), "{db}: {e:?}");
        assert!(
            format!("{e:?}").contains("no such command: 'checkMetadataConsistency'"),
            "{e:?}"
        );
    }
    let listed = ts
        .tcp
        .database("admin")
        .run_command(doc! {"listCommands": 1})
        .await
        .unwrap();
    let commands = listed.get_document("commands").unwrap();
    assert!(commands.contains_key("find"), "{listed}");
    assert!(
        !commands.contains_key("checkMetadataConsistency"),
        "{listed}"
    );
}
