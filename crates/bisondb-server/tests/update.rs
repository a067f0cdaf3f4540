//! Writes other than insert: update operators, upserts, replacements, matched vs
//! modified counts, deletes, and findAndModify in its three driver forms.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::options::ReturnDocument;
use mongodb::results::UpdateResult;
use mongodb::Collection;

async fn seeded(coll: &Collection<Document>) {
    coll.insert_many(vec![
        doc! {"_id": 1, "n": 1, "tags": ["a"], "old": "x", "q": 10},
        doc! {"_id": 2, "n": 2, "tags": ["a", "b", "a"], "q": 20},
        doc! {"_id": 3, "n": 3, "tags": [], "q": 30},
    ])
    .await
    .unwrap();
}

async fn get(coll: &Collection<Document>, id: i32) -> Document {
    coll.find_one(doc! {"_id": id})
        .await
        .unwrap()
        .unwrap_or_else(|| panic!("document {id} missing"))
}

/// Runs an update (`update_one`, `update_many`) and returns its
/// `(matched, modified)`, for the tests of those counts.
async fn counts(
    update: impl std::future::IntoFuture<Output = mongodb::error::Result<UpdateResult>>,
) -> (u64, u64) {
    let r = update.await.unwrap();
    (r.matched_count, r.modified_count)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_operators() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("upd").collection::<Document>(t);
        seeded(&coll).await;

        let r = coll
            .update_one(
                doc! {"_id": 1},
                doc! {
                    "$set": {"s": "new", "deep.x": 1},
                    "$unset": {"old": ""},
                    "$inc": {"n": 5, "fresh": 2},
                    "$push": {"tags": "b"},
                    "$rename": {"q": "qq"},
                    "$mul": {"m": 3},
                },
            )
            .await
            .unwrap();
        assert_eq!((r.matched_count, r.modified_count), (1, 1), "{t}");
        assert!(r.upserted_id.is_none());
        let d = get(&coll, 1).await;
        assert_eq!(d.get_str("s").ok(), Some("new"), "{t}: {d}");
        assert_eq!(d.get_document("deep").unwrap(), &doc! {"x": 1}, "{t}: {d}");
        assert!(!d.contains_key("old"), "{t}: {d}");
        assert!(is_num(d.get("n").unwrap(), 6.0), "{t}: {d}");
        assert!(is_num(d.get("fresh").unwrap(), 2.0), "{t}: {d}");
        assert_eq!(
            d.get_array("tags").unwrap(),
            &vec![Bson::from("a"), Bson::from("b")],
            "{t}"
        );
        assert!(
            !d.contains_key("q") && is_num(d.get("qq").unwrap(), 10.0),
            "{t}: {d}"
        );
        assert!(
            is_num(d.get("m").unwrap(), 0.0),
            "{t}: $mul on a missing field sets 0: {d}"
        );

        let r = coll
            .update_one(
                doc! {"_id": 2},
                doc! {"$pull": {"tags": "a"}, "$addToSet": {"set": {"$each": [1, 2, 1]}}},
            )
            .await
            .unwrap();
        assert_eq!(r.modified_count, 1);
        let d = get(&coll, 2).await;
        assert_eq!(
            d.get_array("tags").unwrap(),
            &vec![Bson::from("b")],
            "{t}: {d}"
        );
        assert_eq!(
            d.get_array("set").unwrap(),
            &vec![Bson::Int32(1), Bson::Int32(2)],
            "{t}: {d}"
        );
        coll.update_one(doc! {"_id": 2}, doc! {"$addToSet": {"tags": "b"}})
            .await
            .unwrap();
        assert_eq!(
            get(&coll, 2).await.get_array("tags").unwrap().len(),
            1,
            "{t}: addToSet keeps it a set"
        );

        coll.update_one(doc! {"_id": 3}, doc! {"$min": {"n": 1}, "$max": {"q": 99}})
            .await
            .unwrap();
        let d = get(&coll, 3).await;
        assert!(
            is_num(d.get("n").unwrap(), 1.0) && is_num(d.get("q").unwrap(), 99.0),
            "{t}: {d}"
        );
        assert_eq!(
            counts(coll.update_one(doc! {"_id": 3}, doc! {"$min": {"n": 5}, "$max": {"q": 50}}))
                .await,
            (1, 0),
            "{t}: $min/$max that change nothing"
        );

        assert_eq!(
            counts(coll.update_many(doc! {}, doc! {"$inc": {"all": 1}})).await,
            (3, 3),
            "{t}"
        );
        assert_eq!(
            counts(coll.update_many(doc! {"n": {"$gt": 100}}, doc! {"$set": {"x": 1}})).await,
            (0, 0),
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn setting_the_same_value_is_matched_not_modified() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("upd").collection::<Document>(t);
        seeded(&coll).await;
        assert_eq!(
            counts(coll.update_many(doc! {"n": {"$lte": 2}}, doc! {"$set": {"n": 2}})).await,
            (2, 1),
            "{t}: _id 2 already has n: 2"
        );
        assert_eq!(
            counts(coll.update_one(doc! {"_id": 3}, doc! {"$set": {"q": 30}})).await,
            (1, 0),
            "{t}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upsert_seeds_equality_fields_and_set_on_insert() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("ups").collection::<Document>(t);
        let r = coll
            .update_one(
                doc! {"k": "a", "n": {"$gt": 5}, "sub.x": 1},
                doc! {"$set": {"v": 1}, "$setOnInsert": {"created": true}},
            )
            .upsert(true)
            .await
            .unwrap();
        assert_eq!((r.matched_count, r.modified_count), (0, 0), "{t}");
        let id = r.upserted_id.clone().expect("upserted id");
        assert!(matches!(id, Bson::ObjectId(_)), "{t}: {id:?}");
        let d = coll
            .find_one(doc! {"_id": id.clone()})
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            d.get_str("k").ok(),
            Some("a"),
            "{t}: equality field seeded: {d}"
        );
        assert!(
            !d.contains_key("n"),
            "{t}: a $gt condition seeds nothing: {d}"
        );
        assert_eq!(d.get_document("sub").unwrap(), &doc! {"x": 1}, "{t}: {d}");
        assert_eq!(d.get_bool("created").ok(), Some(true), "{t}");

        // The second time it matches: $setOnInsert is ignored.
        let r = coll
            .update_one(
                doc! {"k": "a"},
                doc! {"$set": {"v": 2}, "$setOnInsert": {"created": false}},
            )
            .upsert(true)
            .await
            .unwrap();
        assert_eq!((r.matched_count, r.modified_count), (1, 1));
        assert!(r.upserted_id.is_none());
        let d = coll.find_one(doc! {"k": "a"}).await.unwrap().unwrap();
        assert_eq!(d.get_bool("created").ok(), Some(true), "{t}: {d}");
        assert!(is_num(d.get("v").unwrap(), 2.0));

        // An _id in the filter becomes the new document's _id.
        let r = coll
            .update_one(doc! {"_id": 42}, doc! {"$inc": {"c": 1}})
            .upsert(true)
            .await
            .unwrap();
        assert_eq!(r.upserted_id, Some(Bson::Int32(42)), "{t}");
        let r = coll
            .replace_one(doc! {"_id": 43}, doc! {"r": 1})
            .upsert(true)
            .await
            .unwrap();
        assert_eq!(r.upserted_id, Some(Bson::Int32(43)), "{t}");
        assert_eq!(count(&coll, doc! {}).await, 3);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replace_keeps_id_and_refuses_to_change_it() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("rep").collection::<Document>(t);
        seeded(&coll).await;
        let r = coll
            .replace_one(doc! {"n": 2}, doc! {"whole": "new"})
            .await
            .unwrap();
        assert_eq!((r.matched_count, r.modified_count), (1, 1), "{t}");
        assert_eq!(get(&coll, 2).await, doc! {"_id": 2, "whole": "new"}, "{t}");

        let r = coll
            .replace_one(doc! {"_id": 2}, doc! {"_id": 2, "whole": "again"})
            .await
            .unwrap();
        assert_eq!(r.modified_count, 1, "{t}: same _id is allowed");

        let e = expect_code(
            coll.replace_one(doc! {"_id": 2}, doc! {"_id": 99, "x": 1})
                .await,
            66,
        );
        assert!(
            error_message(&e).contains("_id"),
            "{t}: {}",
            error_message(&e)
        );
        expect_code(
            coll.update_one(doc! {"_id": 1}, doc! {"$set": {"_id": 5}})
                .await,
            66,
        );
        assert_eq!(
            get(&coll, 2).await.get_str("whole").ok(),
            Some("again"),
            "{t}: unchanged"
        );
        assert!(coll.find_one(doc! {"_id": 99}).await.unwrap().is_none());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn multi_update_with_replacement_fails() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let db = client.database("rep");
        seeded(&db.collection::<Document>(t)).await;
        // The driver refuses this itself, so send the raw command.
        let res = db
            .run_command(doc! {"update": t, "updates": [{"q": {}, "u": {"x": 1}, "multi": true}]})
            .await;
        let (code, msg) = match res {
            Ok(r) => {
                let e = r
                    .get_array("writeErrors")
                    .unwrap_or_else(|_| panic!("{t}: expected an error: {r}"))[0]
                    .as_document()
                    .unwrap()
                    .clone();
                assert_eq!(num(&r, "nModified"), 0);
                (
                    num(&e, "code") as i32,
                    e.get_str("errmsg").unwrap().to_string(),
                )
            }
            Err(e) => (error_code(&e).unwrap(), error_message(&e)),
        };
        assert_eq!(code, 9, "{t}: FailedToParse");
        assert!(msg.contains("multi"), "{t}: {msg}");
        let n = count(&db.collection::<Document>(t), doc! {"x": 1}).await;
        assert_eq!(n, 0, "{t}: nothing replaced");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_update_reports_n_and_n_modified() {
    let ts = start().await;
    let db = ts.tcp.database("raw");
    seeded(&db.collection::<Document>("c")).await;
    let r = db
        .run_command(doc! {"update": "c", "updates": [
            {"q": {"_id": 1}, "u": {"$set": {"n": 1}}},
            {"q": {"_id": {"$in": [2, 3]}}, "u": {"$set": {"z": 1}}, "multi": true},
            {"q": {"_id": 7}, "u": {"$set": {"z": 1}}, "upsert": true},
        ]})
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 4, "1 + 2 matched + 1 upserted: {r}");
    assert_eq!(num(&r, "nModified"), 2, "{r}");
    let ups = r.get_array("upserted").unwrap();
    assert_eq!(ups.len(), 1);
    let u = ups[0].as_document().unwrap();
    assert_eq!(num(u, "index"), 2, "{r}");
    assert!(is_num(u.get("_id").unwrap(), 7.0), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("del").collection::<Document>(t);
        coll.insert_many((0..10).map(|i| doc! {"_id": i, "even": i % 2 == 0}))
            .await
            .unwrap();
        let r = coll.delete_one(doc! {"even": true}).await.unwrap();
        assert_eq!(r.deleted_count, 1, "{t}");
        let r = coll.delete_many(doc! {"even": true}).await.unwrap();
        assert_eq!(r.deleted_count, 4, "{t}");
        let r = coll.delete_one(doc! {"even": true}).await.unwrap();
        assert_eq!(r.deleted_count, 0, "{t}");
        let left = collect(coll.find(doc! {}).sort(doc! {"_id": 1}).await.unwrap()).await;
        let ids: Vec<Bson> = field(&left, "_id");
        assert_eq!(
            ids,
            vec![
                Bson::Int32(1),
                Bson::Int32(3),
                Bson::Int32(5),
                Bson::Int32(7),
                Bson::Int32(9)
            ],
            "{t}"
        );
        let r = coll.delete_many(doc! {}).await.unwrap();
        assert_eq!(r.deleted_count, 5);
        assert_eq!(coll.estimated_document_count().await.unwrap(), 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_one_and_update_before_after_upsert() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("fam").collection::<Document>(t);
        seeded(&coll).await;
        let before = coll
            .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"n": 10}})
            .await
            .unwrap()
            .unwrap();
        assert!(
            is_num(before.get("n").unwrap(), 1.0),
            "{t}: returns the old document by default"
        );
        let after = coll
            .find_one_and_update(doc! {"_id": 1}, doc! {"$inc": {"n": 10}})
            .return_document(ReturnDocument::After)
            .await
            .unwrap()
            .unwrap();
        assert!(is_num(after.get("n").unwrap(), 21.0), "{t}: {after}");

        let projected = coll
            .find_one_and_update(doc! {"n": {"$gte": 2}}, doc! {"$set": {"hit": true}})
            .sort(doc! {"n": -1})
            .projection(doc! {"n": 1, "hit": 1})
            .return_document(ReturnDocument::After)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(
            projected,
            doc! {"_id": 1, "n": 21, "hit": true},
            "{t}: sort picks the highest n"
        );

        let none = coll
            .find_one_and_update(doc! {"_id": 50}, doc! {"$set": {"a": 1}})
            .await
            .unwrap();
        assert!(none.is_none(), "{t}");
        let up = coll
            .find_one_and_update(doc! {"_id": 50}, doc! {"$set": {"a": 1}})
            .upsert(true)
            .return_document(ReturnDocument::After)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(up, doc! {"_id": 50, "a": 1}, "{t}");
        let up_before = coll
            .find_one_and_update(doc! {"_id": 51}, doc! {"$set": {"a": 1}})
            .upsert(true)
            .await
            .unwrap();
        assert!(
            up_before.is_none(),
            "{t}: an upsert returning the old document returns null"
        );
        assert_eq!(count(&coll, doc! {}).await, 5);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_one_and_replace_and_delete_with_sort() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("fam").collection::<Document>(t);
        seeded(&coll).await;
        let old = coll
            .find_one_and_replace(doc! {"_id": 2}, doc! {"r": 1})
            .await
            .unwrap()
            .unwrap();
        assert!(is_num(old.get("n").unwrap(), 2.0), "{t}: {old}");
        assert_eq!(get(&coll, 2).await, doc! {"_id": 2, "r": 1}, "{t}");
        let new = coll
            .find_one_and_replace(doc! {"_id": 2}, doc! {"r": 2})
            .return_document(ReturnDocument::After)
            .await
            .unwrap()
            .unwrap();
        assert_eq!(new, doc! {"_id": 2, "r": 2}, "{t}");

        let gone = coll
            .find_one_and_delete(doc! {"q": {"$exists": true}})
            .sort(doc! {"q": -1})
            .await
            .unwrap()
            .unwrap();
        assert!(
            is_num(gone.get("_id").unwrap(), 3.0),
            "{t}: highest q first: {gone}"
        );
        let gone = coll
            .find_one_and_delete(doc! {})
            .sort(doc! {"_id": 1})
            .await
            .unwrap()
            .unwrap();
        assert!(is_num(gone.get("_id").unwrap(), 1.0), "{t}: {gone}");
        assert!(coll
            .find_one_and_delete(doc! {"_id": 1})
            .await
            .unwrap()
            .is_none());
        assert_eq!(count(&coll, doc! {}).await, 1, "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_find_and_modify_reply_shape() {
    let ts = start().await;
    let db = ts.tcp.database("fam");
    seeded(&db.collection::<Document>("c")).await;
    let r = db
        .run_command(doc! {"findAndModify": "c", "query": {"_id": 2}, "update": {"$inc": {"n": 1}}, "new": true})
        .await
        .unwrap();
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(num(leo, "n"), 1, "{r}");
    assert_eq!(leo.get_bool("updatedExisting").ok(), Some(true), "{r}");
    assert!(
        is_num(r.get_document("value").unwrap().get("n").unwrap(), 3.0),
        "{r}"
    );

    let r = db
        .run_command(doc! {"findAndModify": "c", "query": {"_id": 9}, "update": {"$set": {"x": 1}}, "upsert": true})
        .await
        .unwrap();
    let leo = r.get_document("lastErrorObject").unwrap();
    assert_eq!(leo.get_bool("updatedExisting").ok(), Some(false), "{r}");
    assert!(is_num(leo.get("upserted").unwrap(), 9.0), "{r}");
    assert_eq!(
        r.get("value"),
        Some(&Bson::Null),
        "old image of an upsert is null: {r}"
    );

    let r = db
        .run_command(doc! {"findAndModify": "c", "query": {"_id": 1}, "remove": true})
        .await
        .unwrap();
    assert_eq!(
        num(r.get_document("lastErrorObject").unwrap(), "n"),
        1,
        "{r}"
    );
    assert!(is_num(
        r.get_document("value").unwrap().get("_id").unwrap(),
        1.0
    ));

    let r = db
        .run_command(doc! {"findAndModify": "c", "query": {"_id": 1}, "remove": true})
        .await
        .unwrap();
    assert_eq!(
        num(r.get_document("lastErrorObject").unwrap(), "n"),
        0,
        "{r}"
    );
    assert_eq!(r.get("value"), Some(&Bson::Null));

    // remove and update together are refused.
    let res = db
        .run_command(
            doc! {"findAndModify": "c", "query": {}, "remove": true, "update": {"$set": {"a": 1}}},
        )
        .await;
    assert!(res.is_err(), "{res:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_delete_limits() {
    let ts = start().await;
    let db = ts.unix.database("del");
    let coll = db.collection::<Document>("c");
    coll.insert_many((0..6).map(|i| doc! {"_id": i, "k": i % 2}))
        .await
        .unwrap();
    let r = db
        .run_command(doc! {"delete": "c", "deletes": [
            {"q": {"k": 0}, "limit": 1},
            {"q": {"k": 1}, "limit": 0},
        ]})
        .await
        .unwrap();
    assert_eq!(num(&r, "n"), 4, "1 + 3: {r}");
    assert_eq!(count(&coll, doc! {}).await, 2);
    assert_eq!(count(&coll, doc! {"k": 0}).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn update_one_with_sort_changes_the_first_in_sort_order() {
    let ts = start().await;
    let coll = ts.tcp.database("upsort").collection::<Document>("c");
    coll.insert_many(vec![
        doc! {"_id": 1, "x": 11},
        doc! {"_id": 2, "x": 22},
        doc! {"_id": 3, "x": 33},
    ])
    .await
    .unwrap();
    let r = coll
        .update_one(doc! {"_id": {"$gt": 1}}, doc! {"$inc": {"x": 1}})
        .sort(doc! {"_id": -1})
        .await
        .unwrap();
    assert_eq!(r.modified_count, 1);
    let third = coll.find_one(doc! {"_id": 3}).await.unwrap().unwrap();
    assert_eq!(
        third.get_i32("x").unwrap(),
        34,
        "the highest _id was updated"
    );
    let second = coll.find_one(doc! {"_id": 2}).await.unwrap().unwrap();
    assert_eq!(second.get_i32("x").unwrap(), 22);
    // multi: true with sort is refused, as by mongod.
    let raw = ts
        .tcp
        .database("upsort")
        .run_command(doc! {"update": "c", "updates": [{"q": {}, "u": {"$set": {"y": 1}}, "multi": true, "sort": {"_id": 1}}]})
        .await
        .unwrap();
    let errs = raw.get_array("writeErrors").unwrap();
    assert_eq!(errs.len(), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inc_and_mul_with_decimal128() {
    let dec = |s: &str| Bson::Decimal128(s.parse().unwrap());
    let ts = start().await;
    for (t, client) in ts.clients() {
        let coll = client.database("upd").collection::<Document>(t);
        coll.insert_many(vec![
            doc! {"_id": 1, "n": 1, "d": dec("1.50")},
            doc! {"_id": 2, "n": 0.1},
        ])
        .await
        .unwrap();
        coll.update_one(
            doc! {"_id": 1},
            doc! {"$inc": {"n": dec("0.25"), "d": 1}, "$mul": {"m": dec("1.5")}},
        )
        .await
        .unwrap();
        let d = get(&coll, 1).await;
        assert_eq!(d.get("n"), Some(&dec("1.25")), "{t}: {d}");
        assert_eq!(d.get("d"), Some(&dec("2.50")), "{t}: {d}");
        assert_eq!(d.get("m"), Some(&dec("0.0")), "{t}: {d}");
        coll.update_one(doc! {"_id": 1}, doc! {"$mul": {"d": dec("2")}})
            .await
            .unwrap();
        assert_eq!(get(&coll, 1).await.get("d"), Some(&dec("5.00")), "{t}");
        // A double meeting a decimal converts to 15 significant digits.
        coll.update_one(doc! {"_id": 2}, doc! {"$inc": {"n": dec("1")}})
            .await
            .unwrap();
        assert_eq!(
            get(&coll, 2).await.get("n"),
            Some(&dec("1.100000000000000")),
            "{t}"
        );
    }
}
