//! The 8.0 admin `bulkWrite` command through the driver's `Client::bulk_write`:
//! mixed ops over two namespaces, ordered and unordered failures, verbose results,
//! upserts, and malformed commands sent raw.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::error::ErrorKind;
use mongodb::options::{
    DeleteManyModel, DeleteOneModel, InsertOneModel, ReplaceOneModel, UpdateManyModel,
    UpdateOneModel, WriteModel,
};
use mongodb::Namespace;

fn ns(coll: &str) -> Namespace {
    Namespace::new("bw", coll)
}

fn insert(coll: &str, d: Document) -> WriteModel {
    InsertOneModel::builder()
        .namespace(ns(coll))
        .document(d)
        .build()
        .into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_ops_over_two_namespaces() {
    let ts = start().await;
    let db = ts.tcp.database("bw");
    let a = db.collection::<Document>("a");
    let b = db.collection::<Document>("b");
    a.insert_many(vec![doc! {"_id": 1, "x": 1}, doc! {"_id": 2, "x": 2}])
        .await
        .unwrap();
    let models: Vec<WriteModel> = vec![
        insert("a", doc! {"_id": 3, "x": 3}),
        insert("b", doc! {"_id": 1, "y": 1}),
        insert("b", doc! {"_id": 2, "y": 2}),
        UpdateManyModel::builder()
            .namespace(ns("a"))
            .filter(doc! {"x": {"$gte": 2}})
            .update(doc! {"$inc": {"x": 10}})
            .build()
            .into(),
        DeleteOneModel::builder()
            .namespace(ns("b"))
            .filter(doc! {"_id": 2})
            .build()
            .into(),
        DeleteManyModel::builder()
            .namespace(ns("a"))
            .filter(doc! {"_id": 1})
            .build()
            .into(),
    ];
    let r = ts.tcp.bulk_write(models).await.unwrap();
    assert_eq!(r.inserted_count, 3);
    assert_eq!(r.matched_count, 2);
    assert_eq!(r.modified_count, 2);
    assert_eq!(r.deleted_count, 2);
    assert_eq!(r.upserted_count, 0);
    let xs = field(&collect(a.find(doc! {}).await.unwrap()).await, "x");
    assert_eq!(xs, vec![Bson::Int32(12), Bson::Int32(13)]);
    let ys = field(&collect(b.find(doc! {}).await.unwrap()).await, "y");
    assert_eq!(ys, vec![Bson::Int32(1)]);
}

fn duplicate_batch() -> Vec<WriteModel> {
    vec![
        insert("dup", doc! {"_id": 1}),
        insert("dup", doc! {"_id": 1}),
        insert("other", doc! {"_id": 5}),
        insert("dup", doc! {"_id": 2}),
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_stops_at_first_duplicate() {
    let ts = start().await;
    let err = ts.tcp.bulk_write(duplicate_batch()).await.unwrap_err();
    let ErrorKind::BulkWrite(e) = *err.kind else {
        panic!("expected a bulk write error, got {err:?}");
    };
    assert_eq!(e.write_errors.len(), 1, "{e:?}");
    let we = e.write_errors.get(&1).expect("error at index 1");
    assert_eq!(we.code, 11000);
    let partial = match e.partial_result {
        Some(mongodb::error::PartialBulkWriteResult::Summary(s)) => s,
        other => panic!("expected a summary partial result, got {other:?}"),
    };
    assert_eq!(partial.inserted_count, 1);
    let db = ts.tcp.database("bw");
    assert_eq!(count(&db.collection("dup"), doc! {}).await, 1);
    assert_eq!(count(&db.collection("other"), doc! {}).await, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_continues_after_duplicate() {
    let ts = start().await;
    let err = ts
        .tcp
        .bulk_write(duplicate_batch())
        .ordered(false)
        .await
        .unwrap_err();
    let ErrorKind::BulkWrite(e) = *err.kind else {
        panic!("expected a bulk write error, got {err:?}");
    };
    assert_eq!(e.write_errors.len(), 1, "{e:?}");
    assert_eq!(e.write_errors.get(&1).map(|w| w.code), Some(11000));
    let partial = match e.partial_result {
        Some(mongodb::error::PartialBulkWriteResult::Summary(s)) => s,
        other => panic!("expected a summary partial result, got {other:?}"),
    };
    assert_eq!(partial.inserted_count, 3);
    let db = ts.tcp.database("bw");
    assert_eq!(count(&db.collection("dup"), doc! {}).await, 2);
    assert_eq!(count(&db.collection("other"), doc! {}).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verbose_results_and_upsert() {
    let ts = start().await;
    let c = ts.tcp.database("bw").collection::<Document>("v");
    c.insert_many(vec![doc! {"_id": 1, "x": 1}, doc! {"_id": 2, "x": 2}])
        .await
        .unwrap();
    let models: Vec<WriteModel> = vec![
        insert("v", doc! {"_id": 3, "x": 3}),
        UpdateOneModel::builder()
            .namespace(ns("v"))
            .filter(doc! {"_id": 1})
            .update(doc! {"$set": {"x": 100}})
            .build()
            .into(),
        UpdateOneModel::builder()
            .namespace(ns("v"))
            .filter(doc! {"_id": 9})
            .update(doc! {"$set": {"x": 9}})
            .upsert(true)
            .build()
            .into(),
        ReplaceOneModel::builder()
            .namespace(ns("v"))
            .filter(doc! {"_id": 2})
            .replacement(doc! {"x": 20})
            .build()
            .into(),
        DeleteManyModel::builder()
            .namespace(ns("v"))
            .filter(doc! {"x": {"$lt": 10}})
            .build()
            .into(),
    ];
    let r = ts.tcp.bulk_write(models).verbose_results().await.unwrap();
    assert_eq!(r.summary.inserted_count, 1);
    assert_eq!(r.summary.matched_count, 2);
    assert_eq!(r.summary.modified_count, 2);
    assert_eq!(r.summary.upserted_count, 1);
    assert_eq!(r.summary.deleted_count, 2, "{r:?}");
    assert_eq!(
        r.insert_results.get(&0).map(|i| i.inserted_id.clone()),
        Some(Bson::Int32(3))
    );
    let u1 = r.update_results.get(&1).expect("update result 1");
    assert_eq!((u1.matched_count, u1.modified_count), (1, 1));
    assert_eq!(u1.upserted_id, None);
    let u2 = r.update_results.get(&2).expect("update result 2");
    assert_eq!(u2.upserted_id, Some(Bson::Int32(9)));
    let u3 = r.update_results.get(&3).expect("replace result 3");
    assert_eq!((u3.matched_count, u3.modified_count), (1, 1));
    assert_eq!(r.delete_results.get(&4).map(|d| d.deleted_count), Some(2));
    let left = collect(c.find(doc! {}).await.unwrap()).await;
    assert_eq!(
        left,
        vec![doc! {"_id": 1, "x": 100}, doc! {"_id": 2, "x": 20}]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_op_failure_is_reported_at_its_index() {
    // An unknown update operator fails only its own op.
    let ts = start().await;
    let models: Vec<WriteModel> = vec![
        insert("bad", doc! {"_id": 1}),
        UpdateOneModel::builder()
            .namespace(ns("bad"))
            .filter(doc! {"_id": 1})
            .update(doc! {"$frobnicate": {"x": 1}})
            .build()
            .into(),
        insert("bad", doc! {"_id": 2}),
    ];
    let err = ts
        .tcp
        .bulk_write(models)
        .ordered(false)
        .verbose_results()
        .await
        .unwrap_err();
    let ErrorKind::BulkWrite(e) = *err.kind else {
        panic!("expected a bulk write error, got {err:?}");
    };
    assert_eq!(e.write_errors.keys().copied().collect::<Vec<_>>(), vec![1]);
    match e.partial_result {
        Some(mongodb::error::PartialBulkWriteResult::Verbose(v)) => {
            assert_eq!(v.summary.inserted_count, 2);
            assert!(v.insert_results.contains_key(&0) && v.insert_results.contains_key(&2));
        }
        other => panic!("expected a verbose partial result, got {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_replies_and_malformed_commands() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let r = admin
        .run_command(doc! {
            "bulkWrite": 1,
            "ops": [
                {"insert": 0, "document": {"_id": 1}},
                {"insert": 1, "document": {"_id": 1}},
                {"insert": 0, "document": {"_id": 1}},
                {"update": 1, "filter": {"_id": 7}, "updateMods": {"$set": {"a": 1}}, "upsert": true},
                {"delete": 0, "filter": {}, "multi": true},
            ],
            "nsInfo": [{"ns": "bw.r0"}, {"ns": "bw.r1"}],
            "ordered": false,
        })
        .await
        .unwrap();
    assert_eq!(num(&r, "nErrors"), 1, "{r}");
    assert_eq!(num(&r, "nInserted"), 2, "{r}");
    assert_eq!(num(&r, "nUpserted"), 1, "{r}");
    assert_eq!(num(&r, "nMatched"), 0, "{r}");
    assert_eq!(num(&r, "nDeleted"), 1, "{r}");
    let cursor = r.get_document("cursor").unwrap();
    assert_eq!(cursor.get_str("ns").ok(), Some("admin.$cmd.bulkWrite"));
    assert_eq!(num(cursor, "id"), 0);
    let batch = cursor.get_array("firstBatch").unwrap();
    assert_eq!(batch.len(), 5, "{r}");
    let third = batch[2].as_document().unwrap();
    assert_eq!(num(third, "ok"), 0);
    assert_eq!(num(third, "idx"), 2);
    assert_eq!(num(third, "code"), 11000);
    assert!(third.contains_key("keyValue"), "{third}");
    let fourth = batch[3].as_document().unwrap();
    assert_eq!(
        fourth.get_document("upserted").unwrap(),
        &doc! {"_id": 7},
        "{fourth}"
    );

    // errorsOnly: only the failure is in the batch.
    let r = admin
        .run_command(doc! {
            "bulkWrite": 1,
            "ops": [{"insert": 0, "document": {"_id": 1}}, {"insert": 0, "document": {"_id": 1}}],
            "nsInfo": [{"ns": "bw.e"}],
            "errorsOnly": true,
        })
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{r}");
    assert_eq!(num(batch[0].as_document().unwrap(), "idx"), 1);

    let bad = [
        // nsInfo index out of range
        (
            doc! {"bulkWrite": 1, "ops": [{"insert": 1, "document": {}}], "nsInfo": [{"ns": "bw.x"}]},
            2,
        ),
        // no op type
        (
            doc! {"bulkWrite": 1, "ops": [{"document": {}}], "nsInfo": [{"ns": "bw.x"}]},
            9,
        ),
        // unknown op field
        (
            doc! {"bulkWrite": 1, "ops": [{"delete": 0, "filter": {}, "limit": 1}], "nsInfo": [{"ns": "bw.x"}]},
            40415,
        ),
        // missing updateMods
        (
            doc! {"bulkWrite": 1, "ops": [{"update": 0, "filter": {}}], "nsInfo": [{"ns": "bw.x"}]},
            40414,
        ),
        // wrong type
        (
            doc! {"bulkWrite": 1, "ops": [{"delete": 0, "filter": 3}], "nsInfo": [{"ns": "bw.x"}]},
            14,
        ),
        // empty ops
        (
            doc! {"bulkWrite": 1, "ops": [], "nsInfo": [{"ns": "bw.x"}]},
            16,
        ),
        // bad namespace
        (
            doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "nodot"}]},
            73,
        ),
        // unknown top-level field
        (
            doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "bw.x"}], "bogus": 1},
            40415,
        ),
        // missing nsInfo
        (
            doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {}}]},
            40414,
        ),
    ];
    for (cmd, code) in bad {
        expect_code(admin.run_command(cmd.clone()).await, code);
    }
    assert_eq!(
        count(&ts.tcp.database("bw").collection("x"), doc! {}).await,
        0
    );

    // Only the admin database runs it.
    expect_code(
        ts.tcp
            .database("bw")
            .run_command(doc! {"bulkWrite": 1, "ops": [{"insert": 0, "document": {}}], "nsInfo": [{"ns": "bw.x"}]})
            .await,
        13,
    );
}
