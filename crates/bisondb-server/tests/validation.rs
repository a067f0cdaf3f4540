//! Document validation and `collMod` through the driver: validators on create,
//! every write path checking them, `validationLevel` and `validationAction`,
//! `bypassDocumentValidation`, the 121 error's `errInfo`, `collMod` changes
//! taking effect, and validators and index changes surviving an lsm restart.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::{Collection, Database};

/// `db.c` with the validator `{a: {$gte: 0}}` and the given extra options.
async fn validated(db: &Database, extra: Document) -> Collection<Document> {
    let mut cmd = doc! {"create": "c", "validator": {"a": {"$gte": 0}}};
    cmd.extend(extra);
    db.run_command(cmd).await.unwrap();
    db.collection("c")
}

async fn count(c: &Collection<Document>, filter: Document) -> u64 {
    c.count_documents(filter).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_stores_the_options_and_list_collections_shows_them() {
    let ts = start().await;
    let db = ts.tcp.database("val_create");
    validated(
        &db,
        doc! {"validationLevel": "moderate", "validationAction": "warn"},
    )
    .await;
    let first = collection_entry(&db, "c").await;
    assert_eq!(
        first.get_document("options").unwrap(),
        &doc! {"validator": {"a": {"$gte": 0}}, "validationLevel": "moderate", "validationAction": "warn"}
    );
    // Creating it again with the same options is a no-op; different ones conflict.
    db.run_command(doc! {"create": "c", "validator": {"a": {"$gte": 0}}, "validationLevel": "moderate", "validationAction": "warn"})
        .await
        .unwrap();
    expect_code(
        db.run_command(doc! {"create": "c", "validator": {"a": 1}})
            .await,
        48,
    );
    // Bad options fail as mongod fails them.
    for (cmd, code) in [
        (doc! {"create": "d", "validationLevel": "lax"}, 2),
        (doc! {"create": "d", "validationAction": "errorAndLog"}, 2),
        (doc! {"create": "d", "validator": "x"}, 14),
        (doc! {"create": "d", "validator": {"$where": "true"}}, 224),
        (
            doc! {"create": "d", "validator": {"a": {"$near": [0, 0]}}},
            224,
        ),
        (
            doc! {"create": "d", "validator": {"$text": {"$search": "a"}}},
            224,
        ),
        (
            doc! {"create": "d", "viewOn": "c", "validator": {"a": 1}},
            72,
        ),
    ] {
        expect_code(db.run_command(cmd.clone()).await, code);
    }
    expect_code(
        ts.tcp
            .database("admin")
            .run_command(doc! {"create": "d", "validator": {"a": 1}})
            .await,
        72,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_insert_is_121_with_err_info() {
    let ts = start().await;
    let db = ts.tcp.database("val_insert");
    let c = validated(&db, doc! {}).await;
    let r = db
        .run_command(doc! {
            "insert": "c",
            "documents": [{"_id": 1, "a": 1}, {"_id": 2, "a": -1}, {"_id": 3, "a": 2}],
        })
        .await
        .unwrap();
    // Ordered: the first failure stops the batch, the documents before it stay.
    assert_eq!(num(&r, "n"), 1, "{r}");
    let e = r.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(num(&e, "index"), 1);
    assert_eq!(num(&e, "code"), 121);
    assert_eq!(e.get_str("codeName").unwrap(), "DocumentValidationFailure");
    assert_eq!(e.get_str("errmsg").unwrap(), "Document failed validation");
    let info = e.get_document("errInfo").unwrap();
    assert_eq!(info.get("failingDocumentId"), Some(&Bson::Int32(2)));
    assert_eq!(
        info.get_document("details").unwrap(),
        &doc! {
            "operatorName": "$gte",
            "specifiedAs": {"a": {"$gte": 0}},
            "reason": "comparison failed",
            "consideredValue": -1,
        }
    );
    // Unordered: every valid document goes in.
    let r = db
        .run_command(doc! {
            "insert": "c", "ordered": false,
            "documents": [{"_id": 4, "a": -4}, {"_id": 5, "a": 5}, {"a": -6}],
        })
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 1, "{r}");
    assert_eq!(r.get_array("writeErrors").unwrap().len(), 2, "{r}");
    assert_eq!(count(&c, doc! {}).await, 2);
    // The driver surfaces the code.
    expect_code(c.insert_one(doc! {"a": "x"}).await, 121);
    expect_code(c.insert_one(doc! {}).await, 121);
    // Bypassed, anything goes.
    c.insert_one(doc! {"_id": 9, "a": -9})
        .bypass_document_validation(true)
        .await
        .unwrap();
    c.insert_many(vec![doc! {"a": -10}, doc! {"a": -11}])
        .bypass_document_validation(true)
        .await
        .unwrap();
    assert_eq!(count(&c, doc! {"a": {"$lt": 0}}).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_update_form_is_checked() {
    let ts = start().await;
    let db = ts.tcp.database("val_update");
    let c = validated(&db, doc! {}).await;
    c.insert_many(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": 2}])
        .await
        .unwrap();
    expect_code(
        c.update_one(doc! {"_id": 1}, doc! {"$set": {"a": -1}})
            .await,
        121,
    );
    expect_code(c.replace_one(doc! {"_id": 1}, doc! {"b": 1}).await, 121);
    expect_code(
        c.update_one(
            doc! {"_id": 1},
            vec![doc! {"$set": {"a": {"$subtract": ["$a", 10]}}}],
        )
        .await,
        121,
    );
    expect_code(
        c.update_one(doc! {"_id": 7}, doc! {"$set": {"a": -7}})
            .upsert(true)
            .await,
        121,
    );
    expect_code(
        c.find_one_and_update(doc! {"_id": 2}, doc! {"$inc": {"a": -5}})
            .await,
        121,
    );
    expect_code(
        c.find_one_and_replace(doc! {"_id": 2}, doc! {"a": -2})
            .await,
        121,
    );
    // Nothing changed.
    assert_eq!(count(&c, doc! {"a": {"$gte": 0}}).await, 2);
    assert_eq!(count(&c, doc! {}).await, 2);
    // The update command reports the failure at its statement, with errInfo.
    let r = db
        .run_command(doc! {"update": "c", "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"a": 10}}},
            {"q": {"_id": 2}, "u": {"$set": {"a": -2}}},
        ]})
        .await
        .unwrap();
    assert_eq!(num(&r, "nModified"), 1, "{r}");
    let e = r.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .clone();
    assert_eq!(num(&e, "index"), 1);
    assert_eq!(num(&e, "code"), 121);
    assert_eq!(
        e.get_document("errInfo").unwrap().get("failingDocumentId"),
        Some(&Bson::Int32(2))
    );
    // Valid changes still go through, and bypass lets the invalid ones in.
    c.update_one(doc! {"_id": 2}, doc! {"$inc": {"a": 1}})
        .await
        .unwrap();
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"a": -1}})
        .bypass_document_validation(true)
        .await
        .unwrap();
    c.update_one(doc! {"_id": 8}, doc! {"$set": {"a": -8}})
        .upsert(true)
        .bypass_document_validation(true)
        .await
        .unwrap();
    let after = c
        .find_one_and_update(doc! {"_id": 2}, doc! {"$set": {"a": -3}})
        .bypass_document_validation(true)
        .return_document(ReturnDocument::After)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(after, doc! {"_id": 2, "a": -3});
    assert_eq!(count(&c, doc! {"a": {"$lt": 0}}).await, 3);
    // Strict: a document that already fails may not be updated into another failure.
    expect_code(
        c.update_one(doc! {"_id": 1}, doc! {"$set": {"b": 1}}).await,
        121,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moderate_warn_and_off() {
    let ts = start().await;
    let db = ts.tcp.database("val_levels");
    let c = validated(&db, doc! {"validationLevel": "moderate"}).await;
    c.insert_one(doc! {"_id": 1, "a": -1})
        .bypass_document_validation(true)
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 2, "a": 2}).await.unwrap();
    // Moderate: an already invalid document may be updated, even into another invalid one...
    c.update_one(doc! {"_id": 1}, doc! {"$set": {"a": -5}})
        .await
        .unwrap();
    // ...but a valid one may not become invalid, and inserts are always checked.
    expect_code(
        c.update_one(doc! {"_id": 2}, doc! {"$set": {"a": -2}})
            .await,
        121,
    );
    expect_code(c.insert_one(doc! {"a": -3}).await, 121);

    // Warn: the write succeeds.
    db.run_command(doc! {"collMod": "c", "validationAction": "warn", "validationLevel": "strict"})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 3, "a": -3}).await.unwrap();
    c.update_one(doc! {"_id": 2}, doc! {"$set": {"a": -2}})
        .await
        .unwrap();
    assert_eq!(count(&c, doc! {"a": {"$lt": 0}}).await, 3);

    // Off: nothing is checked.
    db.run_command(doc! {"collMod": "c", "validationAction": "error", "validationLevel": "off"})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 4, "a": -4}).await.unwrap();
    db.run_command(doc! {"collMod": "c", "validationLevel": "strict"})
        .await
        .unwrap();
    expect_code(c.insert_one(doc! {"_id": 5, "a": -5}).await, 121);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coll_mod_changes_take_effect() {
    let ts = start().await;
    let db = ts.tcp.database("val_collmod");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "z": 5}).await.unwrap();
    let e = expect_code(
        db.run_command(doc! {"collMod": "missing", "validator": {"a": 1}})
            .await,
        26,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("NamespaceNotFound"));
    db.run_command(doc! {"collMod": "c", "validator": {"$jsonSchema": {
        "required": ["z"],
        "properties": {"z": {"bsonType": "int", "minimum": 0}},
    }}})
    .await
    .unwrap();
    expect_code(
        c.update_one(doc! {"_id": 1}, doc! {"$inc": {"z": -10}})
            .await,
        121,
    );
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 2, "z": "five"}]})
        .await
        .unwrap();
    let info = r.get_array("writeErrors").unwrap()[0]
        .as_document()
        .unwrap()
        .get_document("errInfo")
        .unwrap()
        .clone();
    assert_eq!(
        info.get_document("details").unwrap(),
        &doc! {
            "operatorName": "$jsonSchema",
            "schemaRulesNotSatisfied": [{
                "operatorName": "properties",
                "propertiesNotSatisfied": [{"propertyName": "z", "details": [{
                    "operatorName": "bsonType",
                    "specifiedAs": {"bsonType": "int"},
                    "reason": "type did not match",
                    "consideredValue": "five",
                    "consideredType": "string",
                }]}],
            }],
        }
    );
    // An empty validator removes the check.
    db.run_command(doc! {"collMod": "c", "validator": {}})
        .await
        .unwrap();
    c.insert_one(doc! {"_id": 3}).await.unwrap();
    expect_code(
        db.run_command(doc! {"collMod": "c", "unknownOption": 1})
            .await,
        40415,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn coll_mod_changes_index_options() {
    let ts = start().await;
    let db = ts.tcp.database("val_index");
    db.run_command(doc! {"createIndexes": "c", "indexes": [
        {"key": {"a": 1}, "name": "a_1"},
        {"key": {"t": 1}, "name": "t_1", "expireAfterSeconds": 100},
    ]})
    .await
    .unwrap();
    let r = db
        .run_command(doc! {"collMod": "c", "index": {"keyPattern": {"a": 1}, "hidden": true}})
        .await
        .unwrap();
    assert_eq!(r.get_bool("hidden_old").ok(), Some(false), "{r}");
    assert_eq!(r.get_bool("hidden_new").ok(), Some(true), "{r}");
    let r = db
        .run_command(doc! {"collMod": "c", "index": {"name": "t_1", "expireAfterSeconds": 5}})
        .await
        .unwrap();
    assert_eq!(
        r.get("expireAfterSeconds_old"),
        Some(&Bson::Int64(100)),
        "{r}"
    );
    assert_eq!(
        r.get("expireAfterSeconds_new"),
        Some(&Bson::Int64(5)),
        "{r}"
    );
    let specs = collect_indexes(&db, "c").await;
    let a = specs
        .iter()
        .find(|s| s.get_str("name").ok() == Some("a_1"))
        .unwrap();
    assert_eq!(a.get_bool("hidden").ok(), Some(true), "{a}");
    let t = specs
        .iter()
        .find(|s| s.get_str("name").ok() == Some("t_1"))
        .unwrap();
    assert_eq!(num(t, "expireAfterSeconds"), 5, "{t}");
    // A hidden index cannot be hinted.
    expect_code(
        db.run_command(doc! {"find": "c", "hint": {"a": 1}}).await,
        2,
    );
    expect_code(
        db.run_command(doc! {"collMod": "c", "index": {"name": "nope", "hidden": true}})
            .await,
        27,
    );
}

/// `listIndexes` of `c`, as the server sends it.
async fn collect_indexes(db: &Database, coll: &str) -> Vec<Document> {
    let r = db.run_command(doc! {"listIndexes": coll}).await.unwrap();
    r.get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .filter_map(|d| d.as_document().cloned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn out_and_merge_respect_the_target_validator() {
    let ts = start().await;
    let db = ts.tcp.database("val_agg");
    let src = db.collection::<Document>("src");
    src.insert_many(vec![doc! {"_id": 1, "a": 1}, doc! {"_id": 2, "a": -2}])
        .await
        .unwrap();
    let target = validated(&db, doc! {}).await;
    // $merge writes document by document: the valid one before the failure stays.
    expect_code(
        src.aggregate(vec![doc! {"$merge": {"into": "c"}}]).await,
        121,
    );
    assert_eq!(count(&target, doc! {}).await, 1);
    // $out replaces the target only when every document was written.
    expect_code(src.aggregate(vec![doc! {"$out": "c"}]).await, 121);
    assert_eq!(count(&target, doc! {}).await, 1);
    src.aggregate(vec![doc! {"$out": "c"}])
        .bypass_document_validation(true)
        .await
        .unwrap();
    assert_eq!(count(&target, doc! {}).await, 2);
    // $out kept the target's options.
    expect_code(target.insert_one(doc! {"a": -1}).await, 121);
    src.aggregate(vec![
        doc! {"$set": {"a": {"$abs": "$a"}}},
        doc! {"$merge": {"into": "c"}},
    ])
    .await
    .unwrap();
    assert_eq!(count(&target, doc! {"a": {"$gte": 0}}).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_bulk_write_bypasses_when_asked() {
    use mongodb::options::{InsertOneModel, UpdateOneModel, WriteModel};
    let ts = start().await;
    let db = ts.tcp.database("val_bulk");
    validated(&db, doc! {}).await;
    let ns = mongodb::Namespace::new("val_bulk", "c");
    let models = || {
        vec![
            WriteModel::from(
                InsertOneModel::builder()
                    .namespace(ns.clone())
                    .document(doc! {"_id": 1, "a": -1})
                    .build(),
            ),
            WriteModel::from(
                UpdateOneModel::builder()
                    .namespace(ns.clone())
                    .filter(doc! {"_id": 1})
                    .update(doc! {"$inc": {"a": -1}})
                    .build(),
            ),
        ]
    };
    let err = ts.tcp.bulk_write(models()).await.unwrap_err();
    assert!(format!("{err}").contains("121"), "{err}");
    ts.tcp
        .bulk_write(models())
        .bypass_document_validation(true)
        .await
        .unwrap();
    let c = db.collection::<Document>("c");
    assert_eq!(
        c.find_one(doc! {"_id": 1}).await.unwrap(),
        Some(doc! {"_id": 1, "a": -2})
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validators_and_coll_mod_survive_an_lsm_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (server, client) = restart_lsm(dir.path(), &dir.path().join("data")).await;
    let db = client.database("val_lsm");
    validated(&db, doc! {"validationAction": "error"}).await;
    db.run_command(doc! {"createIndexes": "c", "indexes": [{"key": {"b": 1}, "name": "b_1"}]})
        .await
        .unwrap();
    db.run_command(doc! {"collMod": "c", "validationLevel": "moderate", "index": {"name": "b_1", "hidden": true}})
        .await
        .unwrap();
    server.shutdown();
    drop(client);
    server.wait().await;

    let (server, client) = restart_lsm(dir.path(), &dir.path().join("data")).await;
    let db = client.database("val_lsm");
    let c = db.collection::<Document>("c");
    expect_code(c.insert_one(doc! {"a": -1}).await, 121);
    c.insert_one(doc! {"a": 1}).await.unwrap();
    let options = collection_entry(&db, "c")
        .await
        .get_document("options")
        .unwrap()
        .clone();
    assert_eq!(
        options,
        doc! {"validator": {"a": {"$gte": 0}}, "validationAction": "error", "validationLevel": "moderate"}
    );
    let specs = collect_indexes(&db, "c").await;
    let b = specs
        .iter()
        .find(|s| s.get_str("name").ok() == Some("b_1"))
        .unwrap();
    assert_eq!(b.get_bool("hidden").ok(), Some(true), "{b}");
    server.shutdown();
    drop(client);
    server.wait().await;
}
