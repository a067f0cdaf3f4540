//! Collations through the driver: each command that takes one (find, count,
//! distinct, delete, update, findAndModify, aggregate, bulkWrite), a
//! collection's default collation from `create`, index use under a collation,
//! and mongod's errors for malformed collation documents.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::options::{Collation, CollationStrength};
use mongodb::Database;

fn strength2() -> Collation {
    Collation::builder()
        .locale("en")
        .strength(CollationStrength::Secondary)
        .build()
}

async fn setup(db: &Database) -> mongodb::Collection<Document> {
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "s": "apple"},
        doc! {"_id": 2, "s": "Apple"},
        doc! {"_id": 3, "s": "banana"},
        doc! {"_id": 4, "s": "Banana"},
        doc! {"_id": 5, "s": "cherry"},
        doc! {"_id": 6, "s": "éclair"},
    ])
    .await
    .unwrap();
    c
}

fn ids(docs: &[Document]) -> Vec<i64> {
    docs.iter().map(|d| num(d, "_id")).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_and_count_with_a_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_find_{t}"));
        let c = setup(&db).await;
        // Without a collation: binary comparison.
        let plain = collect(c.find(doc! {"s": "apple"}).await.unwrap()).await;
        assert_eq!(ids(&plain), vec![1], "{t}");
        // Strength 2: case-insensitive equality, ranges and $in.
        let eq = collect(
            c.find(doc! {"s": "apple"})
                .collation(strength2())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&eq), vec![1, 2], "{t}");
        let range = collect(
            c.find(doc! {"s": {"$gte": "b", "$lt": "c"}})
                .collation(strength2())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&range), vec![3, 4], "{t}");
        let n = c
            .count_documents(doc! {"s": {"$in": ["BANANA", "cherry"]}})
            .collation(strength2())
            .await
            .unwrap();
        assert_eq!(n, 3, "{t}");
        let r = db
            .run_command(doc! {"count": "c", "query": {"s": "APPLE"}, "collation": {"locale": "en", "strength": 1}})
            .await
            .unwrap();
        assert_eq!(num(&r, "n"), 2, "{t}");
        // Sort: binary puts upper case first; "en" interleaves, and é sorts with e.
        let sorted = collect(
            c.find(doc! {})
                .sort(doc! {"s": 1, "_id": 1})
                .collation(Collation::builder().locale("en").build())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&sorted), vec![1, 2, 3, 4, 5, 6], "{t}");
        let binary = collect(c.find(doc! {}).sort(doc! {"s": 1}).await.unwrap()).await;
        assert_eq!(ids(&binary), vec![2, 4, 1, 3, 5, 6], "{t}");
        // The simple collation given explicitly is the binary one.
        let simple = collect(
            c.find(doc! {"s": "apple"})
                .collation(Collation::builder().locale("simple").build())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&simple), vec![1], "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_with_a_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_writes_{t}"));
        let c = setup(&db).await;
        let r = c
            .update_many(doc! {"s": "APPLE"}, doc! {"$set": {"u": true}})
            .collation(strength2())
            .await
            .unwrap();
        assert_eq!(r.matched_count, 2, "{t}");
        let r = c
            .delete_many(doc! {"s": "BANANA"})
            .collation(strength2())
            .await
            .unwrap();
        assert_eq!(r.deleted_count, 2, "{t}");
        let found = c
            .find_one_and_update(doc! {"s": "CHERRY"}, doc! {"$set": {"f": 1}})
            .collation(strength2())
            .await
            .unwrap();
        assert_eq!(found.map(|d| num(&d, "_id")), Some(5), "{t}");
        // Without the collation nothing matches.
        let r = c.delete_many(doc! {"s": "CHERRY"}).await.unwrap();
        assert_eq!(r.deleted_count, 0, "{t}");
        let r = c
            .delete_one(doc! {"s": "ECLAIR"})
            .collation(
                Collation::builder()
                    .locale("fr")
                    .strength(CollationStrength::Primary)
                    .build(),
            )
            .await
            .unwrap();
        assert_eq!(r.deleted_count, 1, "{t}");
        assert_eq!(count(&c, doc! {}).await, 3, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn distinct_and_aggregate_with_a_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_agg_{t}"));
        let c = setup(&db).await;
        let vals = c
            .distinct("s", doc! {})
            .collation(strength2())
            .await
            .unwrap();
        assert_eq!(vals.len(), 4, "{t}: {vals:?}");
        let vals = c.distinct("s", doc! {}).await.unwrap();
        assert_eq!(vals.len(), 6, "{t}: {vals:?}");
        let groups = collect(
            c.aggregate(vec![
                doc! {"$group": {"_id": "$s", "n": {"$sum": 1}}},
                doc! {"$sort": {"_id": 1}},
            ])
            .collation(strength2())
            .await
            .unwrap(),
        )
        .await;
        let counts: Vec<i64> = groups.iter().map(|d| num(d, "n")).collect();
        assert_eq!(counts, vec![2, 2, 1, 1], "{t}: {groups:?}");
        let eq = collect(
            c.aggregate(vec![
                doc! {"$match": {"s": "apple"}},
                doc! {"$project": {"e": {"$eq": ["$s", "APPLE"]}}},
            ])
            .collation(strength2())
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(eq.len(), 2, "{t}");
        assert!(
            eq.iter().all(|d| d.get_bool("e").ok() == Some(true)),
            "{t}: {eq:?}"
        );
        // numericOrdering in a $sort.
        let n = db.collection::<Document>("n");
        n.insert_many(vec![doc! {"v": "10"}, doc! {"v": "9"}, doc! {"v": "100"}])
            .await
            .unwrap();
        let sorted = collect(
            n.aggregate(vec![
                doc! {"$sort": {"v": 1}},
                doc! {"$project": {"_id": 0}},
            ])
            .collation(
                Collation::builder()
                    .locale("en")
                    .numeric_ordering(true)
                    .build(),
            )
            .await
            .unwrap(),
        )
        .await;
        assert_eq!(
            field(&sorted, "v"),
            vec![Bson::from("9"), Bson::from("10"), Bson::from("100")],
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn collection_default_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_default_{t}"));
        db.run_command(doc! {"create": "d", "collation": {"locale": "en", "strength": 2}})
            .await
            .unwrap();
        let c = db.collection::<Document>("d");
        c.insert_many(vec![doc! {"_id": 1, "s": "x"}, doc! {"_id": 2, "s": "X"}])
            .await
            .unwrap();
        // listCollections shows the resolved collation.
        let entry = collection_entry(&db, "d").await;
        let coll = entry
            .get_document("options")
            .and_then(|o| o.get_document("collation"))
            .unwrap();
        assert_eq!(coll.get_str("locale").ok(), Some("en"), "{t}: {entry}");
        assert_eq!(coll.get_i32("strength").ok(), Some(2), "{t}: {entry}");
        assert_eq!(coll.get_str("caseFirst").ok(), Some("off"), "{t}: {entry}");
        assert_eq!(coll.get_str("version").ok(), Some("57.1"), "{t}: {entry}");
        // Operations without a collation use the default ...
        assert_eq!(count(&c, doc! {"s": "x"}).await, 2, "{t}");
        // ... and an explicit simple collation overrides it.
        let n = c
            .count_documents(doc! {"s": "x"})
            .collation(Collation::builder().locale("simple").build())
            .await
            .unwrap();
        assert_eq!(n, 1, "{t}");
        // Creating it again with the same collation is a no-op.
        db.run_command(doc! {"create": "d", "collation": {"locale": "en", "strength": 2}})
            .await
            .unwrap();
        // Indexes take the collection's default collation: a unique one
        // refuses strings that are equal under it.
        c.create_index(mongodb::IndexModel::builder().keys(doc! {"s": 1}).build())
            .await
            .unwrap();
        assert_eq!(count(&c, doc! {"s": "X"}).await, 2, "{t}");
        db.run_command(doc! {"createIndexes": "d", "indexes": [{"key": {"u": 1}, "name": "u", "unique": true, "sparse": true}]})
            .await
            .unwrap();
        c.insert_one(doc! {"_id": 3, "u": "abc"}).await.unwrap();
        expect_code(c.insert_one(doc! {"_id": 4, "u": "ABC"}).await, 11000);
        let r = db.run_command(doc! {"listIndexes": "d"}).await.unwrap();
        let specs = r
            .get_document("cursor")
            .and_then(|c| c.get_array("firstBatch"))
            .unwrap()
            .clone();
        let u = specs
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| d.get_str("name").ok() == Some("u"))
            .unwrap();
        let uc = u.get_document("collation").unwrap();
        assert_eq!(uc.get_i32("strength").ok(), Some(2), "{t}: {u}");
        expect_code(
            db.run_command(doc! {"createIndexes": "d", "indexes": [{"key": {"w": 1}, "name": "w", "collation": {"locale": "en", "strength": 9}}]})
                .await,
            9,
        );
        // A view does not inherit its source's default collation.
        db.run_command(doc! {"create": "v", "viewOn": "d", "pipeline": []})
            .await
            .unwrap();
        assert_eq!(
            count(&db.collection::<Document>("v"), doc! {"s": "x"}).await,
            1,
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn index_bounds_ignore_strings_under_a_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_index_{t}"));
        let c = setup(&db).await;
        c.create_index(mongodb::IndexModel::builder().keys(doc! {"s": 1}).build())
            .await
            .unwrap();
        // A binary index cannot answer a case-insensitive equality or give
        // the collation's sort order; the results must still be right.
        let eq = collect(
            c.find(doc! {"s": "APPLE"})
                .collation(strength2())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&eq), vec![1, 2], "{t}");
        let sorted = collect(
            c.find(doc! {"s": {"$gt": "a"}})
                .sort(doc! {"s": -1, "_id": -1})
                .collation(Collation::builder().locale("en").build())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&sorted), vec![6, 5, 4, 3, 2, 1], "{t}");
        let hinted = collect(
            c.find(doc! {"s": "BANANA"})
                .hint(mongodb::options::Hint::Keys(doc! {"s": 1}))
                .collation(strength2())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&hinted), vec![3, 4], "{t}");
        // An index with a collation answers queries under that collation
        // (through its bounds) and still gives right answers to others.
        db.run_command(doc! {"createIndexes": "c", "indexes": [{"key": {"t": 1}, "name": "t_ci", "collation": {"locale": "en", "strength": 2}}]})
            .await
            .unwrap();
        c.insert_many(vec![
            doc! {"_id": 10, "t": "Zeta"},
            doc! {"_id": 11, "t": "zeta"},
            doc! {"_id": 12, "t": "eta"},
            doc! {"_id": 13, "t": 5},
        ])
        .await
        .unwrap();
        let ci = collect(
            c.find(doc! {"t": "ZETA"})
                .collation(strength2())
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&ci), vec![10, 11], "{t}");
        let plan = db
            .run_command(doc! {"explain": {"find": "c", "filter": {"t": "ZETA"}, "collation": {"locale": "en", "strength": 2}}})
            .await
            .unwrap();
        assert!(plan.to_string().contains("IXSCAN"), "{t}: {plan}");
        let cs = collect(c.find(doc! {"t": "zeta"}).await.unwrap()).await;
        assert_eq!(ids(&cs), vec![11], "{t}");
        let range = collect(
            c.find(doc! {"t": {"$gte": "e", "$lt": "f"}})
                .collation(strength2())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&range), vec![12], "{t}");
        let num = collect(c.find(doc! {"t": {"$gt": 1}}).await.unwrap()).await;
        assert_eq!(ids(&num), vec![13], "{t}");
        // Its order serves a sort under its collation, not a binary one.
        let sorted = collect(
            c.find(doc! {"t": {"$type": "string"}})
                .sort(doc! {"t": 1, "_id": 1})
                .collation(strength2())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&sorted), vec![12, 10, 11], "{t}");
        let binary = collect(
            c.find(doc! {"t": {"$type": "string"}})
                .sort(doc! {"t": 1})
                .hint(mongodb::options::Hint::Name("t_ci".into()))
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&binary), vec![10, 12, 11], "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn malformed_collations_fail_like_mongod() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_errors_{t}"));
        setup(&db).await;
        let cases: Vec<(Bson, i32)> = vec![
            (Bson::String("fr".into()), 14),
            (Bson::Document(doc! {"strength": 2}), 4),
            (Bson::Document(doc! {"locale": 5}), 14),
            (Bson::Document(doc! {"locale": "xx_YY"}), 2),
            (Bson::Document(doc! {"locale": "en", "bogus": 1}), 9),
            (Bson::Document(doc! {"locale": "en", "strength": 9}), 9),
            (
                Bson::Document(doc! {"locale": "en", "caseFirst": "mixed"}),
                9,
            ),
            (Bson::Document(doc! {"locale": "en", "alternate": 1}), 14),
            (Bson::Document(doc! {"locale": "simple", "strength": 1}), 9),
            (Bson::Document(doc! {"locale": "en", "version": "1"}), 161),
        ];
        for (coll, code) in cases {
            for cmd in [
                doc! {"find": "c", "filter": {}, "collation": coll.clone()},
                doc! {"aggregate": "c", "pipeline": [], "cursor": {}, "collation": coll.clone()},
                doc! {"delete": "c", "deletes": [{"q": {}, "limit": 0, "collation": coll.clone()}]},
                doc! {"create": "new", "collation": coll.clone()},
            ] {
                let r = db.run_command(cmd.clone()).await;
                let r = match r {
                    // Write errors come back inside an ok reply.
                    Ok(d) => d
                        .get_array("writeErrors")
                        .ok()
                        .and_then(|e| e.first())
                        .and_then(Bson::as_document)
                        .map(|e| num(e, "code") as i32)
                        .unwrap_or(0),
                    Err(e) => error_code(&e).unwrap_or(0),
                };
                assert_eq!(r, code, "{t}: {cmd}");
            }
        }
        // Nothing was created by the failed creates.
        let names = db.list_collection_names().await.unwrap();
        assert!(!names.contains(&"new".to_string()), "{t}: {names:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_collation_applies_to_validators_and_update_operators() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_validator_{t}"));
        db.run_command(doc! {
            "create": "v",
            "collation": {"locale": "en", "strength": 2},
            "validator": {"kind": {"$in": ["book", "film"]}},
        })
        .await
        .unwrap();
        let c = db.collection::<Document>("v");
        c.insert_one(doc! {"_id": 1, "kind": "BOOK", "tags": ["a"]})
            .await
            .unwrap();
        expect_code(c.insert_one(doc! {"_id": 2, "kind": "song"}).await, 121);
        // $addToSet and $pull under the default collation.
        c.update_one(doc! {"_id": 1}, doc! {"$addToSet": {"tags": "A"}})
            .await
            .unwrap();
        let d = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
        assert_eq!(d.get_array("tags").map(Vec::len).ok(), Some(1), "{t}: {d}");
        c.update_one(doc! {"kind": "book"}, doc! {"$pull": {"tags": "A"}})
            .await
            .unwrap();
        let d = c.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
        assert_eq!(d.get_array("tags").map(Vec::len).ok(), Some(0), "{t}: {d}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_with_a_collation() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("coll_views_{t}"));
        setup(&db).await;
        db.run_command(doc! {
            "create": "v",
            "viewOn": "c",
            "pipeline": [{"$match": {"s": {"$ne": "cherry"}}}],
            "collation": {"locale": "en", "strength": 2},
        })
        .await
        .unwrap();
        // A plain view over the same collection stays simple.
        db.run_command(doc! {"create": "p", "viewOn": "c", "pipeline": []})
            .await
            .unwrap();
        let v = db.collection::<Document>("v");
        let p = db.collection::<Document>("p");
        let found = collect(
            v.find(doc! {"s": "APPLE"})
                .sort(doc! {"_id": 1})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(ids(&found), vec![1, 2], "{t}");
        assert_eq!(count(&v, doc! {"s": "banana"}).await, 2, "{t}");
        assert_eq!(count(&p, doc! {"s": "banana"}).await, 1, "{t}");
        let vals = v.distinct("s", doc! {}).await.unwrap();
        assert_eq!(vals.len(), 3, "{t}: {vals:?}");
        let groups = collect(
            v.aggregate(vec![doc! {"$group": {"_id": "$s"}}])
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(groups.len(), 3, "{t}: {groups:?}");
        // The view's own collation may be repeated, not overridden.
        let same = collect(
            v.find(doc! {"s": "APPLE"})
                .collation(strength2())
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(same.len(), 2, "{t}");
        expect_code(
            v.find(doc! {})
                .collation(Collation::builder().locale("fr").build())
                .await,
            167,
        );
        expect_code(
            db.run_command(doc! {"count": "p", "query": {}, "collation": {"locale": "fr"}})
                .await,
            167,
        );
        // listCollections shows the resolved collation of the view.
        let entry = collection_entry(&db, "v").await;
        let coll = entry
            .get_document("options")
            .and_then(|o| o.get_document("collation"))
            .unwrap();
        assert_eq!(coll.get_i32("strength").ok(), Some(2), "{t}: {entry}");
        // Views on it keep its collation; another one conflicts.
        db.run_command(doc! {"create": "vv", "viewOn": "v", "pipeline": [], "collation": {"locale": "en", "strength": 2}})
            .await
            .unwrap();
        assert_eq!(
            count(&db.collection::<Document>("vv"), doc! {"s": "BANANA"}).await,
            2,
            "{t}"
        );
        expect_code(
            db.run_command(doc! {"create": "vx", "viewOn": "v", "pipeline": []})
                .await,
            167,
        );
    }
}
