//! `validate` through the official driver: the reply mongod 8 gives, its
//! option checks and error codes, schema non-compliance, capped collections.
//! (Corrupted collections are covered by the storage crate's tests, which can
//! write to the engine behind the collection's back.)

use crate::common::*;
use bson::{doc, Bson, Document};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_reports_a_consistent_collection() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("val_{t}"));
        let c = db.collection::<Document>("c");
        c.insert_many((0..50).map(|i| doc! {"_id": i, "a": [i, -i], "b": i % 3}))
            .await
            .unwrap();
        c.create_index(mongodb::IndexModel::builder().keys(doc! {"b": 1}).build())
            .await
            .unwrap();
        c.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
            .await
            .unwrap();
        for cmd in [
            doc! {"validate": "c"},
            doc! {"validate": "c", "full": true},
            doc! {"validate": "c", "scandata": true, "full": 1, "checkBSONConformance": true},
        ] {
            let r = without_cluster_time(db.run_command(cmd.clone()).await.unwrap());
            let keys: Vec<&str> = r.keys().map(String::as_str).collect();
            assert_eq!(
                keys,
                [
                    "ns",
                    "uuid",
                    "nInvalidDocuments",
                    "nNonCompliantDocuments",
                    "nrecords",
                    "nIndexes",
                    "keysPerIndex",
                    "indexDetails",
                    "valid",
                    "repaired",
                    "warnings",
                    "errors",
                    "extraIndexEntries",
                    "missingIndexEntries",
                    "corruptRecords",
                    "ok"
                ],
                "{t} {cmd}: {r}"
            );
            assert_eq!(r.get_str("ns").ok(), Some(format!("val_{t}.c").as_str()));
            assert!(matches!(r.get("uuid"), Some(Bson::Binary(b)) if b.bytes.len() == 16));
            assert_eq!(r.get("nrecords"), Some(&Bson::Int32(50)), "{t}: {r}");
            assert_eq!(r.get("nIndexes"), Some(&Bson::Int32(3)));
            assert_eq!(
                r.get_document("keysPerIndex").unwrap(),
                &doc! {"_id_": 50, "a_1": 99, "b_1": 50},
                "{t}: {r}"
            );
            assert_eq!(
                r.get_document("indexDetails").unwrap(),
                &doc! {"_id_": {"valid": true}, "a_1": {"valid": true}, "b_1": {"valid": true}}
            );
            assert_eq!(r.get_bool("valid").ok(), Some(true), "{t}: {r}");
            assert_eq!(r.get_bool("repaired").ok(), Some(false));
            assert!(r.get_array("errors").unwrap().is_empty());
            assert!(r.get("advice").is_none());
        }
        // repair on a standalone is allowed; nothing to fix here.
        let r = db
            .run_command(doc! {"validate": "c", "repair": true})
            .await
            .unwrap();
        assert_eq!(r.get_bool("valid").ok(), Some(true), "{t}: {r}");
        assert_eq!(r.get_bool("repaired").ok(), Some(false));
        assert_eq!(
            r.get("numInsertedMissingIndexEntries"),
            Some(&Bson::Int32(0))
        );
        // Collection still usable afterwards.
        assert_eq!(c.count_documents(doc! {"b": 1}).await.unwrap(), 17);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_errors_as_mongod() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("valerr_{t}"));
        db.collection::<Document>("c")
            .insert_one(doc! {"x": 1})
            .await
            .unwrap();
        db.run_command(doc! {"create": "v", "viewOn": "c", "pipeline": []})
            .await
            .unwrap();
        let e = expect_code(db.run_command(doc! {"validate": "nope"}).await, 26);
        assert_eq!(
            error_message(&e),
            format!("Collection 'valerr_{t}.nope' does not exist to validate.")
        );
        let e = expect_code(db.run_command(doc! {"validate": "v"}).await, 166);
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("CommandNotSupportedOnView")
        );
        expect_code(db.run_command(doc! {"validate": 5}).await, 73);
        for bad in [
            doc! {"validate": "c", "full": true, "background": true},
            doc! {"validate": "c", "background": true, "repair": true},
            doc! {"validate": "c", "full": true, "checkBSONConformance": false},
            doc! {"validate": "c", "repair": true, "checkBSONConformance": true},
            doc! {"validate": "c", "metadata": true, "full": true},
        ] {
            let e = expect_code(db.run_command(bad.clone()).await, 72);
            assert_eq!(
                error_code_name(&e).as_deref(),
                Some("InvalidOptions"),
                "{bad}"
            );
        }
        let background = db
            .run_command(doc! {"validate": "c", "background": true})
            .await;
        if test_engine() == "postgres" {
            // A mongos validates in the background as its shards do.
            let r = background.unwrap();
            assert_eq!(r.get_bool("valid").ok(), Some(true), "{r}");
        } else {
            // A standalone has no checkpoint to validate in the background.
            expect_code(background, 115);
        }
        // Falsy values are fine.
        db.run_command(doc! {"validate": "c", "background": false, "full": 0})
            .await
            .unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn validate_counts_documents_failing_the_validator_and_checks_capped() {
    let ts = start().await;
    let db = ts.tcp.database("val_schema");
    let c = db.collection::<Document>("s");
    c.insert_many([doc! {"n": 1}, doc! {"n": "one"}, doc! {"n": 2}])
        .await
        .unwrap();
    db.run_command(
        doc! {"collMod": "s", "validator": {"n": {"$type": "int"}}, "validationLevel": "moderate"},
    )
    .await
    .unwrap();
    let r = db.run_command(doc! {"validate": "s"}).await.unwrap();
    assert_eq!(
        r.get("nNonCompliantDocuments"),
        Some(&Bson::Int32(1)),
        "{r}"
    );
    assert_eq!(r.get_bool("valid").ok(), Some(true));
    assert_eq!(r.get_array("warnings").unwrap().len(), 1, "{r}");

    db.run_command(doc! {"create": "cap", "capped": true, "size": 4096, "max": 3})
        .await
        .unwrap();
    let cap = db.collection::<Document>("cap");
    for i in 0..10 {
        cap.insert_one(doc! {"_id": i}).await.unwrap();
    }
    let r = db
        .run_command(doc! {"validate": "cap", "full": true})
        .await
        .unwrap();
    assert_eq!(r.get_bool("valid").ok(), Some(true), "{r}");
    assert_eq!(r.get("nrecords"), Some(&Bson::Int32(3)), "{r}");

    let r = db
        .run_command(doc! {"validate": "cap", "metadata": true})
        .await
        .unwrap();
    assert_eq!(r.get_bool("valid").ok(), Some(true), "{r}");
}
