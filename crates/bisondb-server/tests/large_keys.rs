//! Keys past the lsm engine's 64 KiB fjall limit, through the driver: a
//! document with an 8 MB string `_id` and a uniquely indexed 200 KB field is
//! inserted, found (by `_id`, by the index, by `_id` ranges both ways),
//! updated, refused as a duplicate by either key, and deleted, as on mongod
//! 4.2+, which has no index key size limit. Runs on the test engine
//! (`BISONDB_TEST_ENGINE=lsm` for the persistent one); the restart test is
//! always on lsm.

use crate::common::*;
use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::options::IndexOptions;
use mongodb::{Collection, IndexModel};

fn huge_id() -> String {
    "i".repeat(8 << 20)
}

fn big(c: char) -> String {
    c.to_string().repeat(200 << 10)
}

/// Names documents by a short form of their `_id` in assertion messages.
fn id_tags(docs: &[Document]) -> Vec<String> {
    docs.iter()
        .map(|d| match d.get("_id") {
            Some(Bson::String(s)) => format!("string of {}", s.len()),
            other => format!("{other:?}"),
        })
        .collect()
}

async fn ids(coll: &Collection<Document>, filter: Document, sort: i32) -> Vec<String> {
    let found: Vec<Document> = coll
        .find(filter)
        .sort(doc! {"_id": sort})
        .projection(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("find: {e}"));
    id_tags(&found)
}

async fn check_round_trip(coll: &Collection<Document>) {
    let id = huge_id();
    coll.create_index(
        IndexModel::builder()
            .keys(doc! {"v": 1})
            .options(IndexOptions::builder().unique(true).build())
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("createIndexes: {e}"));
    coll.insert_many(vec![
        doc! {"_id": id.clone(), "v": big('a'), "n": 1},
        doc! {"_id": "small", "v": big('b')},
    ])
    .await
    .unwrap_or_else(|e| panic!("insert: {e}"));

    let got = coll
        .find_one(doc! {"_id": id.clone()})
        .await
        .unwrap_or_else(|e| panic!("find by _id: {e}"))
        .unwrap_or_else(|| panic!("the huge _id is not found"));
    assert_eq!(got.get_str("_id").ok().map(str::len), Some(8 << 20));
    assert_eq!(got.get_i32("n").ok(), Some(1));
    let by_v = coll
        .find_one(doc! {"v": big('a')})
        .hint(mongodb::options::Hint::Keys(doc! {"v": 1}))
        .await
        .unwrap_or_else(|e| panic!("find by v: {e}"));
    assert_eq!(by_v.and_then(|d| d.get_i32("n").ok()), Some(1));

    // `_id` ranges bounded by the huge value, ascending and descending.
    let huge = format!("string of {}", 8 << 20);
    let small = "string of 5".to_string();
    assert_eq!(
        ids(coll, doc! {}, 1).await,
        vec![huge.clone(), small.clone()]
    );
    assert_eq!(
        ids(coll, doc! {}, -1).await,
        vec![small.clone(), huge.clone()]
    );
    assert_eq!(
        ids(coll, doc! {"_id": {"$gte": id.clone()}}, 1).await,
        vec![huge.clone(), small.clone()]
    );
    assert_eq!(
        ids(coll, doc! {"_id": {"$gt": id.clone()}}, -1).await,
        vec![small.clone()]
    );
    assert_eq!(
        ids(coll, doc! {"_id": {"$lte": id.clone()}}, -1).await,
        vec![huge.clone()]
    );

    // Duplicates by either key are E11000, as on mongod.
    for dup in [
        doc! {"_id": id.clone(), "v": 1},
        doc! {"_id": 2, "v": big('a')},
    ] {
        let err = coll.insert_one(dup).await.expect_err("duplicate accepted");
        assert_eq!(error_code(&err), Some(11000), "{err}");
    }
    // One character past 200 KB makes another value.
    let mut near = big('a');
    near.push('!');
    coll.insert_one(doc! {"_id": 3, "v": near})
        .await
        .unwrap_or_else(|e| panic!("a distinct long value: {e}"));

    let r = coll
        .update_one(
            doc! {"_id": id.clone()},
            doc! {"$inc": {"n": 1}, "$set": {"v": big('c')}},
        )
        .await
        .unwrap_or_else(|e| panic!("update: {e}"));
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    // The old index key is gone with the update, the new one is taken.
    coll.insert_one(doc! {"_id": 4, "v": big('a')})
        .await
        .unwrap_or_else(|e| panic!("the old value is free again: {e}"));
    let err = coll
        .insert_one(doc! {"_id": 5, "v": big('c')})
        .await
        .expect_err("the new value is taken");
    assert_eq!(error_code(&err), Some(11000), "{err}");
    let got = coll
        .find_one(doc! {"v": big('c')})
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .unwrap_or_else(|| panic!("updated document not found by its new value"));
    assert_eq!(got.get_i32("n").ok(), Some(2));
}

async fn check_delete(db: &mongodb::Database, coll: &Collection<Document>) {
    let id = huge_id();
    let r = coll
        .delete_one(doc! {"_id": id.clone()})
        .await
        .unwrap_or_else(|e| panic!("delete: {e}"));
    assert_eq!(r.deleted_count, 1);
    assert!(coll
        .find_one(doc! {"_id": id.clone()})
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .is_none());
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(3));
    // Both of its keys are free again.
    coll.insert_one(doc! {"_id": id, "v": big('c')})
        .await
        .unwrap_or_else(|e| panic!("reinsert: {e}"));
    let v = db
        .run_command(doc! {"validate": coll.name(), "full": true})
        .await
        .unwrap_or_else(|e| panic!("validate: {e}"));
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_id_and_indexed_value_insert_find_update_delete() {
    let ts = start().await;
    let db = ts.tcp.database("keys");
    let coll = db.collection::<Document>("c");
    check_round_trip(&coll).await;
    check_delete(&db, &coll).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn huge_keys_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let dbpath = dir.path().join("db");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let coll = client.database("keys").collection::<Document>("c");
    check_round_trip(&coll).await;
    shutdown_by_command(server, client).await;
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keys");
    let coll = db.collection::<Document>("c");
    let got = coll
        .find_one(doc! {"_id": huge_id()})
        .await
        .unwrap_or_else(|e| panic!("find: {e}"))
        .unwrap_or_else(|| panic!("the huge _id is lost after a restart"));
    assert_eq!(got.get_i32("n").ok(), Some(2));
    check_delete(&db, &coll).await;
    shutdown_by_command(server, client).await;
}
