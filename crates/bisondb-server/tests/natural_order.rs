//! Natural order: an ordinary collection returns documents in insertion
//! order (mongod keeps them under a growing record id, with `_id` as a unique
//! index), while clustered collections and time-series buckets stay in `_id`
//! order, as on mongod.

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::FindOptions;

async fn ids(
    coll: &mongodb::Collection<Document>,
    filter: Document,
    opts: FindOptions,
) -> Vec<Bson> {
    let docs: Vec<Document> = coll
        .find(filter)
        .with_options(opts)
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("cursor: {e}"));
    field(&docs, "_id")
}

fn strs(v: &[&str]) -> Vec<Bson> {
    v.iter().map(|s| Bson::String(s.to_string())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_without_sort_returns_insertion_order() {
    let t = start().await;
    let coll = t.tcp.database("nat").collection::<Document>("c");
    for id in ["b", "a", "c"] {
        coll.insert_one(doc! {"_id": id}).await.unwrap();
    }
    // mongod: b, a, c (insertion order), not a, b, c.
    assert_eq!(
        ids(&coll, doc! {}, FindOptions::default()).await,
        strs(&["b", "a", "c"])
    );
    // `$natural: -1` is newest first; a `$natural` hint is a forward scan.
    let back = FindOptions::builder().sort(doc! {"$natural": -1}).build();
    assert_eq!(ids(&coll, doc! {}, back).await, strs(&["c", "a", "b"]));
    let hinted = FindOptions::builder()
        .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}))
        .build();
    assert_eq!(ids(&coll, doc! {}, hinted).await, strs(&["b", "a", "c"]));
    // A sort by `_id` reads the `_id` index, as mongod's IXSCAN does.
    let by_id = FindOptions::builder().sort(doc! {"_id": 1}).build();
    assert_eq!(ids(&coll, doc! {}, by_id).await, strs(&["a", "b", "c"]));
    let by_id_desc = FindOptions::builder().sort(doc! {"_id": -1}).build();
    assert_eq!(
        ids(&coll, doc! {}, by_id_desc).await,
        strs(&["c", "b", "a"])
    );
    let explain = run(
        &t.tcp.database("nat"),
        doc! {"explain": {"find": "c", "sort": {"_id": 1}}, "verbosity": "queryPlanner"},
    )
    .await;
    let plan = explain
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .map(|p| p.to_string())
        .unwrap_or_default();
    assert!(plan.contains("IXSCAN") && plan.contains("_id_"), "{plan}");
    assert!(!plan.contains("SORT"), "{plan}");
    // A hint of the `_id` index returns `_id` order too.
    let id_hint = FindOptions::builder()
        .hint(mongodb::options::Hint::Name("_id_".into()))
        .build();
    assert_eq!(ids(&coll, doc! {}, id_hint).await, strs(&["a", "b", "c"]));

    // Updates keep a document's place; a delete and re-insert moves it last.
    coll.update_one(doc! {"_id": "b"}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": "a"}).await.unwrap();
    coll.insert_one(doc! {"_id": "a"}).await.unwrap();
    assert_eq!(
        ids(&coll, doc! {}, FindOptions::default()).await,
        strs(&["b", "c", "a"])
    );
    // The `_id` index still refuses duplicates and finds by `_id`.
    let dup = coll.insert_one(doc! {"_id": "c"}).await;
    expect_code(dup, 11000);
    let b = coll.find_one(doc! {"_id": "b"}).await.unwrap();
    assert_eq!(b, Some(doc! {"_id": "b", "x": 1}));
    let ranged = ids(&coll, doc! {"_id": {"$gte": "b"}}, by_id_sort()).await;
    assert_eq!(ranged, strs(&["b", "c"]));
    // A filter on `_id` reads the `_id` index's range, in `_id` order, as
    // mongod's IXSCAN of `_id_` does; the bounds hold what the filter keeps.
    let nat = FindOptions::default;
    assert_eq!(
        ids(&coll, doc! {"_id": {"$gt": "a", "$lte": "c"}}, nat()).await,
        strs(&["b", "c"])
    );
    assert_eq!(
        ids(&coll, doc! {"_id": {"$in": ["c", "a"]}}, nat()).await,
        strs(&["a", "c"])
    );
    let desc = FindOptions::builder().sort(doc! {"_id": -1}).build();
    assert_eq!(
        ids(&coll, doc! {"_id": {"$lt": "c"}}, desc).await,
        strs(&["b", "a"])
    );
    assert!(ids(&coll, doc! {"_id": {"$gt": "c", "$lt": "a"}}, nat())
        .await
        .is_empty());
    let explain = run(
        &t.tcp.database("nat"),
        doc! {"explain": {"find": "c", "filter": {"_id": {"$gte": "b"}}}, "verbosity": "executionStats"},
    )
    .await;
    let stats = explain.get_document("executionStats").unwrap();
    assert_eq!(num(stats, "totalDocsExamined"), 2, "{explain}");
    assert!(stats.to_string().contains("IXSCAN"), "{explain}");
    let v = run(&t.tcp.database("nat"), doc! {"validate": "c"}).await;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
}

fn by_id_sort() -> FindOptions {
    FindOptions::builder().sort(doc! {"_id": 1}).build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upserts_and_server_generated_ids_follow_insertion_order() {
    let t = start().await;
    let coll = t.tcp.database("nat").collection::<Document>("u");
    coll.insert_one(doc! {"_id": 5, "n": 1}).await.unwrap();
    // An upsert with a server-generated ObjectId lands after the first.
    coll.update_one(doc! {"n": 2}, doc! {"$set": {"m": 1}})
        .upsert(true)
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": 1, "n": 3}).await.unwrap();
    coll.update_one(doc! {"_id": 0}, doc! {"$set": {"n": 4}})
        .upsert(true)
        .await
        .unwrap();
    let docs: Vec<Document> = coll
        .find(doc! {})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    let n: Vec<Bson> = field(&docs, "n");
    assert_eq!(
        n,
        vec![
            Bson::Int32(1),
            Bson::Int32(2),
            Bson::Int32(3),
            Bson::Int32(4)
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn clustered_collections_and_time_series_keep_id_order() {
    let t = start().await;
    let db = t.tcp.database("nat");
    run(
        &db,
        doc! {"create": "cl", "clusteredIndex": {"key": {"_id": 1}, "unique": true}},
    )
    .await;
    let cl = db.collection::<Document>("cl");
    for id in ["b", "a", "c"] {
        cl.insert_one(doc! {"_id": id}).await.unwrap();
    }
    // mongod: a clustered collection's natural order is its cluster key's.
    assert_eq!(
        ids(&cl, doc! {}, FindOptions::default()).await,
        strs(&["a", "b", "c"])
    );

    run(
        &db,
        doc! {"create": "ts", "timeseries": {"timeField": "t", "metaField": "m"}},
    )
    .await;
    let ts = db.collection::<Document>("ts");
    for (m, day) in [("z", 3), ("y", 2), ("x", 1)] {
        let t = bson::DateTime::from_millis(day * 86_400_000);
        ts.insert_one(doc! {"t": t, "m": m}).await.unwrap();
    }
    // Buckets are clustered by their `_id`, whose leading bytes are the
    // bucket's time: unpacked, the oldest measurement comes first.
    let docs: Vec<Document> = ts.find(doc! {}).await.unwrap().try_collect().await.unwrap();
    assert_eq!(field(&docs, "m"), strs(&["x", "y", "z"]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn record_ids_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let coll = client.database("nat").collection::<Document>("r");
    for id in [30, 10, 20] {
        coll.insert_one(doc! {"_id": id}).await.unwrap();
    }
    // The newest record is deleted before the restart: later inserts still
    // come after every surviving one.
    coll.delete_one(doc! {"_id": 20}).await.unwrap();
    shutdown_by_command(server, client).await;

    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let coll = client.database("nat").collection::<Document>("r");
    let order = |v: &[i32]| v.iter().map(|i| Bson::Int32(*i)).collect::<Vec<_>>();
    assert_eq!(
        ids(&coll, doc! {}, FindOptions::default()).await,
        order(&[30, 10])
    );
    coll.insert_one(doc! {"_id": 5}).await.unwrap();
    coll.insert_one(doc! {"_id": 40}).await.unwrap();
    assert_eq!(
        ids(&coll, doc! {}, FindOptions::default()).await,
        order(&[30, 10, 5, 40])
    );
    assert_eq!(
        ids(&coll, doc! {}, by_id_sort()).await,
        order(&[5, 10, 30, 40])
    );
    let dup = coll.insert_one(doc! {"_id": 10}).await;
    expect_code(dup, 11000);
    let v = run(&client.database("nat"), doc! {"validate": "r"}).await;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    shutdown_by_command(server, client).await;
}

/// A dbpath written before record ids existed: its collections' catalog
/// entries carry no `recordIds` and their documents are keyed by `_id`. They
/// open and keep that layout (and `_id` order); new collections get record ids.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_old_layout_dbpath_still_opens() {
    use bisondb_storage::{Durability, LsmEngine, Storage};
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    {
        let engine = LsmEngine::open_shared(&dbpath, bisondb_storage::store_lsm_options()).unwrap();
        let storage = Storage::open(engine.clone()).unwrap();
        storage
            .create_collection("nat", "old", Document::new())
            .unwrap();
        // The catalog entry as an older BisonDB wrote it: `[0x00 0x01] db 0x00 name`.
        let mut key = vec![0u8, 1];
        key.extend_from_slice(b"nat\0old");
        let bytes = engine.snapshot().unwrap().get(&key).unwrap().unwrap();
        let mut entry = Document::from_reader(bytes.as_slice()).unwrap();
        assert_eq!(entry.remove("recordIds"), Some(Bson::Boolean(true)));
        let mut batch = bisondb_storage::WriteBatch::new();
        let mut out = Vec::new();
        entry.to_writer(&mut out).unwrap();
        batch.put(key, out);
        engine.write(batch, Durability::Sync).unwrap();
    }
    {
        let engine = LsmEngine::open_shared(&dbpath, bisondb_storage::store_lsm_options()).unwrap();
        let storage = Storage::open(engine).unwrap();
        let old = storage.collection("nat", "old").unwrap();
        let docs: Vec<bson::RawDocumentBuf> = ["b", "a", "c"]
            .iter()
            .map(|id| bson::rawdoc! {"_id": *id})
            .collect();
        let refs: Vec<&bson::RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        assert_eq!(old.insert_many(&refs, true, Durability::Sync).inserted, 3);
    }
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("nat");
    let old = db.collection::<Document>("old");
    // Kept clustered by `_id`: its natural order is `_id` order.
    assert_eq!(
        ids(&old, doc! {}, FindOptions::default()).await,
        strs(&["a", "b", "c"])
    );
    old.insert_one(doc! {"_id": "0"}).await.unwrap();
    old.update_one(doc! {"_id": "a"}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    assert_eq!(
        ids(&old, doc! {}, FindOptions::default()).await,
        strs(&["0", "a", "b", "c"])
    );
    let v = run(&db, doc! {"validate": "old"}).await;
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    let fresh = db.collection::<Document>("fresh");
    for id in ["b", "a", "c"] {
        fresh.insert_one(doc! {"_id": id}).await.unwrap();
    }
    assert_eq!(
        ids(&fresh, doc! {}, FindOptions::default()).await,
        strs(&["b", "a", "c"])
    );
    shutdown_by_command(server, client).await;
}

/// A find with `showRecordId`.
async fn with_record_ids(
    coll: &mongodb::Collection<Document>,
    filter: Document,
    projection: Option<Document>,
) -> Vec<Document> {
    coll.find(filter)
        .with_options(FindOptions::builder().projection(projection).build())
        .show_record_id(true)
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("cursor: {e}"))
}

/// `showRecordId`: an ordinary collection shows each document's record id as
/// a NumberLong that grows with insertion (mongod's), and a replace keeps it;
/// a clustered collection shows its `_id`'s key as BinData.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn show_record_id_is_the_record_id() {
    let t = start().await;
    let db = t.tcp.database("nat_rid");
    let coll = db.collection::<Document>("c");
    for id in ["b", "a", "c"] {
        coll.insert_one(doc! {"_id": id, "x": 1}).await.unwrap();
    }
    let shown = |docs: &[Document]| -> Vec<(Bson, Bson)> {
        docs.iter()
            .map(|d| {
                (
                    d.get("_id").cloned().unwrap_or(Bson::Null),
                    d.get("$recordId").cloned().unwrap_or(Bson::Null),
                )
            })
            .collect()
    };
    let docs = with_record_ids(&coll, doc! {}, None).await;
    let rids = shown(&docs);
    assert_eq!(rids.len(), 3);
    let longs: Vec<i64> = rids
        .iter()
        .map(|(_, r)| match r {
            Bson::Int64(n) => *n,
            other => panic!("$recordId {other:?} is not a NumberLong"),
        })
        .collect();
    assert!(longs.windows(2).all(|w| w[0] < w[1]), "{longs:?}");
    assert_eq!(
        rids.iter().map(|(id, _)| id.clone()).collect::<Vec<_>>(),
        strs(&["b", "a", "c"])
    );

    // A replace keeps the record id; a projection does not drop it; an
    // index scan shows the same one.
    coll.replace_one(doc! {"_id": "a"}, doc! {"x": 2, "pad": "p".repeat(100)})
        .await
        .unwrap();
    let again = with_record_ids(&coll, doc! {"_id": "a"}, Some(doc! {"_id": 0, "x": 1})).await;
    assert_eq!(again, vec![doc! {"x": 2, "$recordId": longs[1]}]);

    // With `returnKey` the result is the key alone, as mongod's RETURN_KEY
    // stage gives it (the command-monitoring spec's "find with showRecordId
    // and returnKey" expects `{_id: 1}`, no `$recordId`); a sort on `_id`
    // reads the `_id` index, so the key is `{_id}`.
    let keys: Vec<Document> = coll
        .find(doc! {})
        .sort(doc! {"_id": 1})
        .show_record_id(true)
        .return_key(true)
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("cursor: {e}"));
    assert_eq!(
        keys,
        vec![doc! {"_id": "a"}, doc! {"_id": "b"}, doc! {"_id": "c"}]
    );

    run(
        &db,
        doc! {"create": "cl", "clusteredIndex": {"key": {"_id": 1}, "unique": true}},
    )
    .await;
    let cl = db.collection::<Document>("cl");
    cl.insert_one(doc! {"_id": 7}).await.unwrap();
    let docs = with_record_ids(&cl, doc! {}, None).await;
    assert!(
        matches!(docs[0].get("$recordId"), Some(Bson::Binary(_))),
        "{docs:?}"
    );
}
