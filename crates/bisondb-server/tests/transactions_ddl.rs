//! Collections and indexes created inside a multi-document transaction, as
//! mongod 8: they exist for the transaction (its later statements read and
//! write them) and for nobody else until it commits, vanish on abort, are
//! recorded in the transaction's one `applyOps` oplog entry, and a
//! collection of the same name created by someone else meanwhile makes the
//! commit fail with WriteConflict. Indexes may be created only on a
//! collection the transaction created and left empty (263 otherwise).

use crate::common;

use crate::common::{error_code, expect_code};
use bson::{doc, Document};

async fn names(db: &mongodb::Database) -> Vec<String> {
    db.list_collection_names().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_collections_and_indexes_appear_at_commit() {
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("ddl");
    let made = db.collection::<Document>("made");
    let implicit = db.collection::<Document>("implicit");
    let indexed = db.collection::<Document>("indexed");
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    db.create_collection("made").session(&mut s).await.unwrap();
    made.insert_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap();
    implicit
        .insert_one(doc! {"_id": 2})
        .session(&mut s)
        .await
        .unwrap();
    indexed
        .create_index(mongodb::IndexModel::builder().keys(doc! {"x": 1}).build())
        .session(&mut s)
        .await
        .unwrap();
    indexed
        .insert_one(doc! {"_id": 3, "x": [1, 2]})
        .session(&mut s)
        .await
        .unwrap();
    // The transaction reads what it created; nobody else sees any of it.
    let inside = made
        .find_one(doc! {"_id": 1})
        .session(&mut s)
        .await
        .unwrap();
    assert!(inside.is_some());
    let inside = indexed
        .find_one(doc! {"x": 2})
        .session(&mut s)
        .await
        .unwrap();
    assert!(inside.is_some());
    assert!(names(&db).await.is_empty(), "{:?}", names(&db).await);
    assert!(made.find_one(doc! {}).await.unwrap().is_none());
    let dbs = ts.tcp.list_database_names().await.unwrap();
    assert!(!dbs.contains(&"ddl".to_string()), "{dbs:?}");
    s.commit_transaction().await.unwrap();
    let mut all = names(&db).await;
    all.sort();
    assert_eq!(all, vec!["implicit", "indexed", "made"]);
    assert_eq!(made.count_documents(doc! {}).await.unwrap(), 1);
    assert_eq!(implicit.count_documents(doc! {}).await.unwrap(), 1);
    let ix = indexed.list_index_names().await.unwrap();
    assert_eq!(ix, vec!["_id_", "x_1"]);
    // The index was maintained by the transaction's insert (multikey).
    let found = indexed
        .find_one(doc! {"x": 1})
        .hint(mongodb::options::Hint::Name("x_1".into()))
        .await
        .unwrap();
    assert!(found.is_some());
    let v = db
        .run_command(doc! {"validate": "indexed", "full": true})
        .await
        .unwrap();
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    // The commit's one applyOps entry holds the creations, in statement
    // order, before the writes that followed them.
    let oplog = ts.tcp.database("local").collection::<Document>("oplog.rs");
    let commits = doc! {"op": "c", "ns": "admin.$cmd", "o.applyOps": {"$exists": true}};
    assert_eq!(oplog.count_documents(commits.clone()).await.unwrap(), 1);
    let entry = oplog.find_one(commits).await.unwrap().unwrap();
    let ops = entry
        .get_document("o")
        .unwrap()
        .get_array("applyOps")
        .unwrap();
    let shape: Vec<(String, String)> = ops
        .iter()
        .filter_map(|o| o.as_document())
        .map(|d| {
            let o = d.get_document("o").unwrap();
            let first = o.keys().next().cloned().unwrap_or_default();
            (d.get_str("op").unwrap().to_string(), first)
        })
        .collect();
    let want: Vec<(String, String)> = [
        ("c", "create"),
        ("i", "_id"),
        ("c", "create"),
        ("i", "_id"),
        ("c", "create"),
        ("c", "createIndexes"),
        ("i", "_id"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(shape, want, "{ops:?}");
    // No creation was written to the oplog on its own.
    let alone = oplog
        .count_documents(doc! {"ns": "ddl.$cmd", "o.create": {"$exists": true}})
        .await
        .unwrap();
    assert_eq!(alone, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_abort_leaves_no_collection_and_no_index() {
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("ddl");
    let c = db.collection::<Document>("c");
    let mut s = ts.tcp.start_session().await.unwrap();
    s.start_transaction().await.unwrap();
    c.insert_one(doc! {"_id": 1}).session(&mut s).await.unwrap();
    db.collection::<Document>("i")
        .create_index(mongodb::IndexModel::builder().keys(doc! {"x": 1}).build())
        .session(&mut s)
        .await
        .unwrap();
    s.abort_transaction().await.unwrap();
    assert!(names(&db).await.is_empty());
    // The name is free: a plain create and a new transaction's both work.
    db.create_collection("c").await.unwrap();
    s.start_transaction().await.unwrap();
    db.create_collection("i").session(&mut s).await.unwrap();
    s.commit_transaction().await.unwrap();
    let mut all = names(&db).await;
    all.sort();
    assert_eq!(all, vec!["c", "i"]);
    assert_eq!(
        db.collection::<Document>("i")
            .list_index_names()
            .await
            .unwrap(),
        vec!["_id_"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mongods_rules_for_ddl_in_a_transaction() {
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("ddl");
    let old = db.collection::<Document>("old");
    old.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
        .await
        .unwrap();
    let mut s = ts.tcp.start_session().await.unwrap();
    // An index that exists is a no-op inside a transaction.
    s.start_transaction().await.unwrap();
    db.run_command(doc! {"createIndexes": "old", "indexes": [{"key": {"a": 1}, "name": "a_1"}]})
        .session(&mut s)
        .await
        .unwrap();
    s.commit_transaction().await.unwrap();
    // A new index on an existing collection is 263, and ends the
    // transaction.
    s.start_transaction().await.unwrap();
    let e = expect_code(
        db.run_command(
            doc! {"createIndexes": "old", "indexes": [{"key": {"b": 1}, "name": "b_1"}]},
        )
        .session(&mut s)
        .await,
        263,
    );
    assert!(
        common::error_message(&e).contains("Cannot create new indexes on existing collection"),
        "{e:?}"
    );
    expect_code(s.commit_transaction().await, 251);
    // So is one on a collection the transaction created and filled.
    s.start_transaction().await.unwrap();
    db.create_collection("new").session(&mut s).await.unwrap();
    db.collection::<Document>("new")
        .insert_one(doc! {"a": 1})
        .session(&mut s)
        .await
        .unwrap();
    expect_code(
        db.run_command(
            doc! {"createIndexes": "new", "indexes": [{"key": {"b": 1}, "name": "b_1"}]},
        )
        .session(&mut s)
        .await,
        263,
    );
    let _ = s.abort_transaction().await;
    assert!(!names(&db).await.contains(&"new".to_string()));
    // Views, capped and time-series collections are not created in one.
    for options in [
        doc! {"viewOn": "old", "pipeline": []},
        doc! {"capped": true, "size": 4096},
        doc! {"timeseries": {"timeField": "t"}},
    ] {
        s.start_transaction().await.unwrap();
        let mut cmd = doc! {"create": "special"};
        cmd.extend(options.clone());
        let e = db.run_command(cmd).session(&mut s).await.unwrap_err();
        assert_eq!(error_code(&e), Some(263), "{options}: {e:?}");
        let _ = s.abort_transaction().await;
    }
    assert_eq!(names(&db).await, vec!["old"]);
    assert_eq!(old.list_index_names().await.unwrap(), vec!["_id_", "a_1"]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_collection_created_meanwhile_makes_the_commit_a_write_conflict() {
    let ts = common::start_repl_set().await;
    let db = ts.tcp.database("ddl");
    let mut a = ts.tcp.start_session().await.unwrap();
    let mut b = ts.tcp.start_session().await.unwrap();
    // Outside a transaction.
    a.start_transaction().await.unwrap();
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .session(&mut a)
        .await
        .unwrap();
    db.create_collection("c").await.unwrap();
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": "plain"})
        .await
        .unwrap();
    let e = a.commit_transaction().await.unwrap_err();
    assert_eq!(error_code(&e), Some(112), "{e:?}");
    assert!(e.contains_label("TransientTransactionError"), "{e:?}");
    let left = common::collect(db.collection::<Document>("c").find(doc! {}).await.unwrap()).await;
    assert_eq!(left, vec![doc! {"_id": "plain"}]);
    // Two transactions: the first to commit wins.
    a.start_transaction().await.unwrap();
    b.start_transaction().await.unwrap();
    db.create_collection("d").session(&mut a).await.unwrap();
    db.create_collection("d").session(&mut b).await.unwrap();
    b.commit_transaction().await.unwrap();
    let e = a.commit_transaction().await.unwrap_err();
    assert_eq!(error_code(&e), Some(112), "{e:?}");
    assert!(names(&db).await.contains(&"d".to_string()));
}
