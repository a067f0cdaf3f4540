//! `$indexStats` through the official driver: each index with its usage
//! counter, advanced by the operations whose plan read that index (find,
//! count, distinct, aggregate, update, delete, findAndModify), and mongod's errors.

use crate::common::*;
use bson::{doc, Document};
use futures::TryStreamExt;
use mongodb::Database;

async fn stats(db: &Database) -> Vec<Document> {
    let coll = db.collection::<Document>("c");
    let cursor = coll.aggregate([doc! {"$indexStats": {}}]).await.unwrap();
    cursor.try_collect().await.unwrap()
}

fn ops(stats: &[Document], name: &str) -> i64 {
    let s = stats
        .iter()
        .find(|d| d.get_str("name").ok() == Some(name))
        .unwrap_or_else(|| panic!("no index {name} in {stats:?}"));
    s.get_document("accesses").unwrap().get_i64("ops").unwrap()
}

#[tokio::test]
async fn counts_the_operations_that_used_each_index() {
    let t = start().await;
    let db = t.tcp.database("ixstats");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..20).map(|i| doc! {"_id": i, "a": i, "b": i % 3}))
        .await
        .unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();

    let s = stats(&db).await;
    assert_eq!(s.len(), 2, "{s:?}");
    let a = s
        .iter()
        .find(|d| d.get_str("name").ok() == Some("a_1"))
        .unwrap();
    let keys: Vec<&str> = a.keys().map(String::as_str).collect();
    assert_eq!(keys, ["name", "key", "host", "accesses", "spec"]);
    assert_eq!(a.get_document("key").unwrap(), &doc! {"a": 1});
    assert_eq!(
        a.get_document("spec").unwrap().get_str("name").unwrap(),
        "a_1"
    );
    assert!(a.get_str("host").unwrap().contains(':'));
    assert_eq!(ops(&s, "a_1"), 0);
    assert_eq!(ops(&s, "_id_"), 0);

    // Each of these reads through `a_1`.
    let _: Vec<Document> = coll
        .find(doc! {"a": {"$gt": 5}})
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    coll.count_documents(doc! {"a": 3}).await.unwrap();
    coll.distinct("b", doc! {"a": {"$lt": 4}}).await.unwrap();
    coll.update_one(doc! {"a": 7}, doc! {"$set": {"x": 1}})
        .await
        .unwrap();
    coll.delete_one(doc! {"a": 19}).await.unwrap();
    coll.find_one_and_update(doc! {"a": 8}, doc! {"$set": {"y": 1}})
        .await
        .unwrap();
    // Through `_id`, and a collection scan that counts for no index.
    coll.find_one(doc! {"_id": 2}).await.unwrap();
    coll.find_one(doc! {"b": 2}).await.unwrap();

    let s = stats(&db).await;
    // countDocuments is an aggregate whose leading $match uses the index.
    assert_eq!(ops(&s, "a_1"), 6, "{s:?}");
    assert_eq!(ops(&s, "_id_"), 1, "{s:?}");

    // Dropping and re-creating the index starts its counter again.
    coll.drop_index("a_1").await.unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    assert_eq!(ops(&stats(&db).await, "a_1"), 0);
}

#[tokio::test]
async fn errors_and_edge_cases_like_mongod() {
    let t = start().await;
    let db = t.tcp.database("ixstats_err");
    let coll = db.collection::<Document>("c");
    // A missing collection has no indexes.
    assert!(stats(&db).await.is_empty());
    coll.insert_one(doc! {"a": 1}).await.unwrap();
    let r = coll.aggregate([doc! {"$indexStats": {"x": 1}}]).await;
    expect_code(r, 28803);
    let r = coll
        .aggregate([doc! {"$match": {}}, doc! {"$indexStats": {}}])
        .await;
    expect_code(r, 40602);
    let r = db
        .run_command(doc! {"aggregate": 1, "pipeline": [{"$indexStats": {}}], "cursor": {}})
        .await;
    expect_code(r, 73);
    // Later stages work on its output.
    let names: Vec<Document> = coll
        .aggregate([
            doc! {"$indexStats": {}},
            doc! {"$project": {"_id": 0, "name": 1}},
        ])
        .await
        .unwrap()
        .try_collect()
        .await
        .unwrap();
    assert_eq!(names, vec![doc! {"name": "_id_"}]);
}
