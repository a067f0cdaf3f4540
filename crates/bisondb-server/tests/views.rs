//! Read-only views through the driver: creation, reads (find, counts, distinct,
//! aggregate), views on views, listCollections, write errors and drop.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Database;

/// The `create` command of view `v` over `src`: `qty >= 2`, without `secret`.
fn create_v() -> Document {
    doc! {
        "create": "v",
        "viewOn": "src",
        "pipeline": [
            {"$match": {"qty": {"$gte": 2}}},
            {"$project": {"secret": 0}},
        ],
    }
}

async fn setup(db: &Database) {
    db.collection::<Document>("src")
        .insert_many(vec![
            doc! {"_id": 1, "item": "apple", "qty": 5, "store": "n", "secret": 1},
            doc! {"_id": 2, "item": "pear", "qty": 2, "store": "n", "secret": 2},
            doc! {"_id": 3, "item": "apple", "qty": 1, "store": "s", "secret": 3},
            doc! {"_id": 4, "item": "kale", "qty": 7, "store": "s", "secret": 4},
            doc! {"_id": 5, "item": "fig", "qty": 4, "store": "s", "secret": 5},
        ])
        .await
        .unwrap();
    db.run_command(create_v()).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_through_a_view() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database(&format!("views_find_{t}"));
        setup(&db).await;
        let v = db.collection::<Document>("v");
        let all = collect(v.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
        assert_eq!(
            field(&all, "_id"),
            vec![
                Bson::Int32(1),
                Bson::Int32(2),
                Bson::Int32(4),
                Bson::Int32(5)
            ],
            "{t}"
        );
        assert!(all.iter().all(|d| !d.contains_key("secret")), "{t}");

        let some = collect(
            v.find(doc! {"store": "s"})
                .sort(doc! {"qty": -1})
                .limit(1)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(field(&some, "_id"), vec![Bson::Int32(4)], "{t}");

        let skipped = collect(
            v.find(doc! {})
                .sort(doc! {"_id": 1})
                .skip(1)
                .limit(2)
                .projection(doc! {"item": 1, "_id": 0})
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(
            skipped,
            vec![doc! {"item": "pear"}, doc! {"item": "kale"}],
            "{t}"
        );

        // Small batches come back through getMore on the view's namespace.
        let batched = collect(
            v.find(doc! {})
                .sort(doc! {"_id": 1})
                .batch_size(1)
                .await
                .unwrap(),
        )
        .await;
        assert_eq!(batched.len(), 4, "{t}");

        let one = v.find_one(doc! {"item": "fig"}).await.unwrap();
        assert_eq!(one.map(|d| num(&d, "qty")), Some(4), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn counts_distinct_and_aggregate_through_a_view() {
    let ts = start().await;
    let db = ts.tcp.database("views_counts");
    setup(&db).await;
    let v = db.collection::<Document>("v");
    assert_eq!(v.count_documents(doc! {}).await.unwrap(), 4);
    assert_eq!(v.count_documents(doc! {"store": "n"}).await.unwrap(), 2);
    assert_eq!(v.estimated_document_count().await.unwrap(), 4);
    let r = db
        .run_command(doc! {"count": "v", "query": {"store": "s"}, "limit": 1})
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 1);

    let items = v.distinct("item", doc! {}).await.unwrap();
    assert_eq!(
        items,
        vec![
            Bson::from("apple"),
            Bson::from("fig"),
            Bson::from("kale"),
            Bson::from("pear")
        ]
    );
    let items = v.distinct("item", doc! {"store": "s"}).await.unwrap();
    assert_eq!(items, vec![Bson::from("fig"), Bson::from("kale")]);

    let grouped = collect(
        v.aggregate(vec![
            doc! {"$group": {"_id": "$store", "total": {"$sum": "$qty"}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap(),
    )
    .await;
    assert_eq!(
        grouped,
        vec![
            doc! {"_id": "n", "total": 7},
            doc! {"_id": "s", "total": 11}
        ]
    );

    // $lookup from a view reads through its pipeline.
    let looked = collect(
        db.collection::<Document>("src")
            .aggregate(vec![
                doc! {"$match": {"_id": 3}},
                doc! {"$lookup": {"from": "v", "localField": "item", "foreignField": "item", "as": "m"}},
            ])
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(looked.len(), 1);
    let m = looked[0].get_array("m").unwrap();
    assert_eq!(m.len(), 1, "the view hides qty < 2: {m:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn views_on_views_and_missing_sources() {
    let ts = start().await;
    let db = ts.tcp.database("views_nested");
    setup(&db).await;
    db.run_command(doc! {"create": "v2", "viewOn": "v", "pipeline": [{"$match": {"store": "s"}}]})
        .await
        .unwrap();
    let v2 = db.collection::<Document>("v2");
    let docs = collect(v2.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
    assert_eq!(field(&docs, "_id"), vec![Bson::Int32(4), Bson::Int32(5)]);
    assert_eq!(v2.count_documents(doc! {}).await.unwrap(), 2);

    // A view over a collection that does not exist (yet) is empty.
    db.run_command(doc! {"create": "ghost", "viewOn": "nothing", "pipeline": []})
        .await
        .unwrap();
    let ghost = db.collection::<Document>("ghost");
    assert_eq!(ghost.count_documents(doc! {}).await.unwrap(), 0);
    db.collection::<Document>("nothing")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    assert_eq!(ghost.count_documents(doc! {}).await.unwrap(), 1);

    // A cycle is refused at creation.
    db.run_command(doc! {"create": "c1", "viewOn": "c2", "pipeline": []})
        .await
        .unwrap();
    expect_code(
        db.run_command(doc! {"create": "c2", "viewOn": "c1", "pipeline": []})
            .await,
        180,
    );

    // A chain deeper than 20 views is refused.
    for i in 1..=20 {
        db.run_command(
            doc! {"create": format!("d{i}"), "viewOn": format!("d{}", i - 1), "pipeline": []},
        )
        .await
        .unwrap();
    }
    expect_code(
        db.run_command(doc! {"create": "d21", "viewOn": "d20", "pipeline": []})
            .await,
        182,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_and_list_collections() {
    let ts = start().await;
    let db = ts.tcp.database("views_list");
    setup(&db).await;
    // Bad stage: mongod's 40324.
    expect_code(
        db.run_command(doc! {"create": "bad", "viewOn": "src", "pipeline": [{"$nosuch": {}}]})
            .await,
        40324,
    );
    // Writing stages are not allowed in a view.
    expect_code(
        db.run_command(doc! {"create": "bad", "viewOn": "src", "pipeline": [{"$out": "x"}]})
            .await,
        167,
    );
    // Existing names.
    expect_code(
        db.run_command(doc! {"create": "src", "viewOn": "v", "pipeline": []})
            .await,
        48,
    );
    expect_code(db.run_command(doc! {"create": "v"}).await, 48);
    // Same definition again is a no-op, as for collections.
    db.run_command(create_v()).await.unwrap();
    // A view on a view must have that view's collation (collations on
    // views are tested in collation.rs).
    expect_code(
        db.run_command(
            doc! {"create": "vc", "viewOn": "v", "pipeline": [], "collation": {"locale": "fr"}},
        )
        .await,
        167,
    );

    let r = db
        .run_command(doc! {"listCollections": 1, "filter": {"type": "view"}})
        .await
        .unwrap();
    let batch = r
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap();
    assert_eq!(batch.len(), 1, "{batch:?}");
    let entry = batch[0].as_document().unwrap();
    assert_eq!(
        entry,
        &doc! {
            "name": "v",
            "type": "view",
            "options": {
                "viewOn": "src",
                "pipeline": [
                    {"$match": {"qty": {"$gte": 2}}},
                    {"$project": {"secret": 0}},
                ],
            },
            "info": {"readOnly": true},
        }
    );
    let mut names = db.list_collection_names().await.unwrap();
    names.sort();
    assert_eq!(names, vec!["src".to_string(), "v".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_to_a_view_fail_and_drop_works() {
    let ts = start().await;
    let db = ts.tcp.database("views_writes");
    setup(&db).await;
    let v = db.collection::<Document>("v");
    let e = expect_code(v.insert_one(doc! {"_id": 9}).await, 166);
    assert!(
        error_message(&e).contains("Namespace views_writes.v is a view, not a collection"),
        "{e}"
    );
    expect_code(v.update_one(doc! {}, doc! {"$set": {"a": 1}}).await, 166);
    expect_code(v.delete_many(doc! {}).await, 166);
    expect_code(
        v.find_one_and_update(doc! {}, doc! {"$set": {"a": 1}})
            .await,
        166,
    );
    expect_code(
        v.create_index(mongodb::IndexModel::builder().keys(doc! {"a": 1}).build())
            .await,
        166,
    );
    // The source is untouched.
    assert_eq!(
        db.collection::<Document>("src")
            .count_documents(doc! {})
            .await
            .unwrap(),
        5
    );
    // explain on a view is refused clearly.
    expect_code(
        db.run_command(doc! {"explain": {"find": "v", "filter": {}}})
            .await,
        238,
    );

    v.drop().await.unwrap();
    let names = db.list_collection_names().await.unwrap();
    assert_eq!(names, vec!["src".to_string()]);
    // After the drop the name is free for a collection.
    v.insert_one(doc! {"_id": 9}).await.unwrap();
    assert_eq!(v.count_documents(doc! {}).await.unwrap(), 1);
}
