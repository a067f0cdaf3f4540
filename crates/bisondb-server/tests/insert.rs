//! Inserts through the driver and raw commands: generated ids, duplicate keys in
//! ordered and unordered batches, numeric `_id` equality, invalid `_id`, the 16 MiB
//! document limit, and `$`-prefixed field names.

use crate::common::*;
use bson::{doc, Bson, Document};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insert_one_and_many_generate_object_ids() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("ins").collection::<Document>(t);
        let r = coll.insert_one(doc! {"a": 1}).await.unwrap();
        let id = match r.inserted_id {
            Bson::ObjectId(id) => id,
            other => panic!("{t}: expected an ObjectId, got {other:?}"),
        };
        let back = coll
            .find_one(doc! {"_id": id})
            .await
            .unwrap()
            .expect("inserted doc");
        assert_eq!(back.get_i32("a").ok(), Some(1));
        // _id is stored first, as mongod does.
        assert_eq!(
            back.keys().next().map(String::as_str),
            Some("_id"),
            "{t}: {back}"
        );

        let many = coll
            .insert_many(vec![
                doc! {"b": 1},
                doc! {"_id": "x", "b": 2},
                doc! {"b": 3},
            ])
            .await
            .unwrap();
        assert_eq!(many.inserted_ids.len(), 3);
        assert_eq!(many.inserted_ids.get(&1), Some(&Bson::String("x".into())));
        assert!(matches!(many.inserted_ids.get(&2), Some(Bson::ObjectId(_))));
        assert_eq!(count(&coll, doc! {}).await, 4, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_generates_id_when_missing() {
    // The driver always adds _id; a raw command lets the server do it.
    let ts = start().await;
    let db = ts.tcp.database("ins");
    let r = db
        .run_command(doc! {"insert": "gen", "documents": [{"v": 1}, {"v": 2}]})
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 2, "{r}");
    let docs = collect(
        db.collection::<Document>("gen")
            .find(doc! {})
            .sort(doc! {"v": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(docs.len(), 2);
    let a = docs[0].get_object_id("_id").unwrap();
    let b = docs[1].get_object_id("_id").unwrap();
    assert_ne!(a, b);
    assert_eq!(docs[0].keys().next().map(String::as_str), Some("_id"));
    assert!(a.timestamp().timestamp_millis() > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ordered_insert_stops_at_duplicate() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("dup");
        let r = db
            .run_command(doc! {"insert": t, "documents": [{"_id": 1}, {"_id": 2}, {"_id": 1, "x": 1}, {"_id": 3}]})
            .await
            .unwrap();
        assert_eq!(num(&r, "n"), 2, "{t}: {r}");
        let errs = r.get_array("writeErrors").unwrap();
        assert_eq!(errs.len(), 1, "{t}: {r}");
        let e = errs[0].as_document().unwrap();
        assert_eq!(num(e, "index"), 2, "{e}");
        assert_eq!(num(e, "code"), 11000, "{e}");
        assert_eq!(e.get_str("codeName").ok(), Some("DuplicateKey"));
        assert!(
            e.get_str("errmsg")
                .unwrap()
                .contains("E11000 duplicate key error"),
            "{e}"
        );
        assert_eq!(
            e.get_document("keyPattern").unwrap(),
            &doc! {"_id": 1},
            "{e}"
        );
        let kv = e.get_document("keyValue").unwrap();
        assert!(is_num(kv.get("_id").unwrap(), 1.0), "{e}");
        let coll = db.collection::<Document>(t);
        assert_eq!(
            count(&coll, doc! {}).await,
            2,
            "{t}: _id 3 must not be inserted"
        );

        // Through the driver: an InsertMany error with the index of the duplicate.
        let err = coll
            .insert_many(vec![doc! {"_id": 10}, doc! {"_id": 2}, doc! {"_id": 11}])
            .await
            .unwrap_err();
        match err.kind.as_ref() {
            mongodb::error::ErrorKind::InsertMany(im) => {
                let we = im.write_errors.as_ref().expect("write errors");
                assert_eq!(we.len(), 1);
                assert_eq!((we[0].index, we[0].code), (1, 11000));
            }
            other => panic!("{t}: unexpected {other:?}"),
        }
        assert_eq!(count(&coll, doc! {}).await, 3, "{t}: 10 inserted, 11 not");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unordered_insert_continues_after_duplicates() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("dup");
        let r = db
            .run_command(doc! {
                "insert": t,
                "documents": [{"_id": 1}, {"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}],
                "ordered": false,
            })
            .await
            .unwrap();
        assert_eq!(num(&r, "n"), 3, "{t}: {r}");
        let idx: Vec<i64> = r
            .get_array("writeErrors")
            .unwrap()
            .iter()
            .map(|e| num(e.as_document().unwrap(), "index"))
            .collect();
        assert_eq!(idx, vec![1, 3], "{t}: {r}");

        let coll = db.collection::<Document>(t);
        let err = coll
            .insert_many(vec![
                doc! {"_id": 3},
                doc! {"_id": 4},
                doc! {"_id": 1},
                doc! {"_id": 5},
            ])
            .ordered(false)
            .await
            .unwrap_err();
        assert_eq!(error_code(&err), Some(11000));
        assert_eq!(count(&coll, doc! {}).await, 5, "{t}: 4 and 5 inserted");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn numeric_ids_of_different_types_collide() {
    let ts = start().await;
    let coll = ts.tcp.database("num").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    expect_code(coll.insert_one(doc! {"_id": 1.0}).await, 11000);
    expect_code(coll.insert_one(doc! {"_id": 1i64}).await, 11000);
    expect_code(
        coll.insert_one(doc! {"_id": Bson::Decimal128("1".parse().unwrap())})
            .await,
        11000,
    );
    // 1.5 and "1" are different keys.
    coll.insert_one(doc! {"_id": 1.5}).await.unwrap();
    coll.insert_one(doc! {"_id": "1"}).await.unwrap();
    assert_eq!(count(&coll, doc! {}).await, 3);
    // And a lookup by any numeric type finds the int32 document.
    let found = coll
        .find_one(doc! {"_id": 1i64})
        .await
        .unwrap()
        .expect("found by 1i64");
    assert_eq!(found.get("_id"), Some(&Bson::Int32(1)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn array_id_is_rejected() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("bad").collection::<Document>(t);
        let e = expect_code(coll.insert_one(doc! {"_id": [1, 2]}).await, 53);
        assert!(
            error_message(&e).contains("array"),
            "{t}: {}",
            error_message(&e)
        );
        assert_eq!(count(&coll, doc! {}).await, 0);
        coll.insert_one(doc! {"_id": {"a": [1, 2]}}).await.unwrap();
        assert_eq!(
            count(&coll, doc! {}).await,
            1,
            "{t}: a document _id holding an array is fine"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn document_over_16_mib_is_rejected() {
    let ts = start().await;
    let coll = ts.tcp.database("big").collection::<Document>("c");
    let big = "x".repeat(16 * 1024 * 1024);
    let err = coll
        .insert_one(doc! {"_id": 1, "s": big})
        .await
        .unwrap_err();
    // The driver may refuse it itself; if it reaches the server, 10334 BSONObjectTooLarge.
    if let Some(code) = error_code(&err) {
        assert_eq!(code, 10334, "{err}");
    }
    assert_eq!(count(&coll, doc! {}).await, 0);

    // Just under the limit is accepted.
    let ok = "y".repeat(16 * 1024 * 1024 - 100);
    coll.insert_one(doc! {"_id": 2, "s": ok}).await.unwrap();
    assert_eq!(count(&coll, doc! {}).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversize_document_in_raw_sequence_gets_10334() {
    // Bypass the driver: a kind-1 section carrying a 17 MB document.
    let ts = start().await;
    let mut raw = ts.raw_tcp().await;
    let body = bson::RawDocumentBuf::try_from(&doc! {"insert": "c", "$db": "big"}).unwrap();
    let big = bson::RawDocumentBuf::try_from(&doc! {"_id": 1, "s": "z".repeat(17 * 1024 * 1024)})
        .unwrap();
    let small = bson::RawDocumentBuf::try_from(&doc! {"_id": 2}).unwrap();
    let docs: [&bson::RawDocument; 2] = [&big, &small];
    let msg =
        bisondb_wire::encode_op_msg_with_sequences(1, 0, 0, &body, &[("documents", &docs)], None)
            .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut raw, &msg)
        .await
        .unwrap();
    let r = read_reply(&mut raw).await;
    let code = if r.contains_key("writeErrors") {
        let e = r.get_array("writeErrors").unwrap()[0]
            .as_document()
            .unwrap()
            .clone();
        assert_eq!(num(&e, "index"), 0, "{r}");
        assert_eq!(num(&r, "n"), 0, "ordered: stops at the first error: {r}");
        num(&e, "code")
    } else {
        num(&r, "code")
    };
    assert_eq!(code, 10334, "{r}");
    let n = count(&ts.tcp.database("big").collection::<Document>("c"), doc! {}).await;
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dollar_prefixed_top_level_fields_are_accepted() {
    let ts = start().await;
    let db = ts.tcp.database("dollar");
    let r = db
        .run_command(doc! {"insert": "c", "documents": [{"_id": 1, "$price": 5, "a.b": 1}]})
        .await
        .unwrap();
    assert_eq!(
        num(&r, "n"),
        1,
        "mongod 5+ stores $-prefixed and dotted field names: {r}"
    );
    let got = db
        .collection::<Document>("c")
        .find_one(doc! {"_id": 1})
        .await
        .unwrap()
        .expect("stored");
    assert!(is_num(got.get("$price").unwrap(), 5.0), "{got}");
    assert!(is_num(got.get("a.b").unwrap(), 1.0), "{got}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn invalid_batches_and_namespaces() {
    let ts = start().await;
    let db = ts.tcp.database("inv");
    let e = expect_code(
        db.run_command(doc! {"insert": "c", "documents": []}).await,
        16,
    );
    assert!(error_message(&e).contains("Got 0"), "{}", error_message(&e));
    let e = expect_code(
        db.run_command(doc! {"insert": "system.foo", "documents": [{"a": 1}]})
            .await,
        73,
    );
    assert_eq!(error_code_name(&e).as_deref(), Some("InvalidNamespace"));
    expect_code(
        db.run_command(doc! {"insert": "", "documents": [{"a": 1}]})
            .await,
        73,
    );
    assert!(
        db.list_collection_names().await.unwrap().is_empty(),
        "nothing created"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_document_sequence_and_write_concern() {
    let ts = start().await;
    let mut raw = ts.raw_tcp().await;
    let body = bson::RawDocumentBuf::try_from(
        &doc! {"insert": "seq", "writeConcern": {"w": 1, "j": true}, "$db": "ins"},
    )
    .unwrap();
    let docs: Vec<bson::RawDocumentBuf> = (0..3)
        .map(|i| bson::RawDocumentBuf::try_from(&doc! {"_id": i, "v": i * 10}).unwrap())
        .collect();
    let refs: Vec<&bson::RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    let msg =
        bisondb_wire::encode_op_msg_with_sequences(1, 0, 0, &body, &[("documents", &refs)], None)
            .unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut raw, &msg)
        .await
        .unwrap();
    let r = read_reply(&mut raw).await;
    assert_eq!(num(&r, "n"), 3, "{r}");
    assert!(!r.contains_key("writeErrors"), "{r}");
    let coll = ts.unix.database("ins").collection::<Document>("seq");
    let got = coll.find_one(doc! {"_id": 2}).await.unwrap().unwrap();
    assert_eq!(got, doc! {"_id": 2, "v": 20});

    // w > 1 cannot be satisfied without replication.
    let r = ts
        .tcp
        .database("ins")
        .run_command(doc! {"insert": "seq", "documents": [{"_id": 9}], "writeConcern": {"w": 2}})
        .await;
    if test_engine() == "postgres" {
        // A mongos (`mongos.rs`) applies the write and reports the write
        // concern it could not satisfy, as a one-member set does.
        let r = r.unwrap();
        let wce = r.get_document("writeConcernError").unwrap();
        assert_eq!(wce.get_i32("code").ok(), Some(100), "{r}");
        assert_eq!(count(&coll, doc! {}).await, 4, "{r}");
        return;
    }
    assert!(r.is_err(), "w: 2 on a standalone must fail: {r:?}");
    assert_eq!(
        count(&coll, doc! {}).await,
        3,
        "the w: 2 insert did not happen"
    );
}
