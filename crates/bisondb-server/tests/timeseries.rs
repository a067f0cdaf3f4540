//! Time-series collections through the official driver: `create`'s options and
//! mongod's errors for them, the two catalog entries (`X` and
//! `system.buckets.X`) in `listCollections`, inserts into buckets (time field
//! checks, duplicate `_id`s, ordered and unordered errors, 1000 measurements
//! per bucket, one bucket per meta value), reads of measurements (`find`,
//! `count`, `distinct`, `aggregate`), deletes, updates, `findAndModify`,
//! index commands, `drop`,
//! `collMod`, the TTL monitor, and a restart of the persistent engine;
//! buckets stored compressed (`control.version: 2`, BSONColumn columns) and
//! version 1 buckets of an older dbpath still read and compressed when
//! rewritten.

use std::time::Duration;

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Database;

/// The values of a bucket's column, which must be a BSONColumn.
fn column(b: &Bson) -> Vec<Option<Bson>> {
    match b {
        Bson::Binary(b) if b.subtype == bson::spec::BinarySubtype::Column => {
            bisondb_query::bsoncolumn::decode(&b.bytes).unwrap_or_else(|e| panic!("{e:?}"))
        }
        other => panic!("not a BSONColumn: {other:?}"),
    }
}

fn at(ms: i64) -> Bson {
    Bson::DateTime(bson::DateTime::from_millis(ms))
}

const T0: i64 = 1_552_949_630_482;

async fn listed(db: &Database) -> Vec<Document> {
    let r = db
        .run_command(doc! {"listCollections": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    r.get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|a| a.iter().filter_map(|b| b.as_document().cloned()).collect())
        .unwrap_or_default()
}

async fn find(db: &Database, cmd: Document) -> Vec<Document> {
    let r = db.run_command(cmd).await.unwrap_or_else(|e| panic!("{e}"));
    r.get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|a| a.iter().filter_map(|b| b.as_document().cloned()).collect())
        .unwrap_or_default()
}

async fn create_weather(db: &Database) {
    db.run_command(doc! {
        "create": "weather",
        "timeseries": {"timeField": "ts", "metaField": "sensor", "granularity": "minutes"},
        "expireAfterSeconds": 604800,
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_checks_options_as_mongod_does() {
    let t = start().await;
    let db = t.tcp.database("ts_create");
    let bad = [
        (doc! {"create": "c", "timeseries": {}}, 40414),
        (doc! {"create": "c", "timeseries": {"timeField": 1}}, 14),
        (doc! {"create": "c", "timeseries": 1}, 14),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "bogus": 1}},
            40415,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "granularity": "days"}},
            2,
        ),
        (doc! {"create": "c", "timeseries": {"timeField": "a.b"}}, 72),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "t"}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "metaField": "_id"}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 30}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 0, "bucketRoundingSeconds": 0}},
            51024,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t"}, "capped": true, "size": 100},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t"}, "viewOn": "x"},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t"}, "validator": {}},
            72,
        ),
        (
            doc! {"create": "c", "timeseries": {"timeField": "t"}, "expireAfterSeconds": -1},
            72,
        ),
        (doc! {"create": "c", "expireAfterSeconds": 10}, 72),
    ];
    for (cmd, code) in bad {
        let e = expect_code(db.run_command(cmd.clone()).await, code);
        assert!(!error_message(&e).is_empty(), "{cmd}");
    }
    assert!(
        listed(&db).await.is_empty(),
        "a refused create leaves nothing"
    );

    db.run_command(doc! {"create": "c", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 3600}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The same options again are a no-op, other ones a conflict.
    db.run_command(doc! {"create": "c", "timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 3600, "bucketRoundingSeconds": 3600}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    expect_code(
        db.run_command(doc! {"create": "c", "timeseries": {"timeField": "u"}})
            .await,
        48,
    );
    create_weather(&db).await;
    let all = listed(&db).await;
    let by_name = |n: &str| {
        all.iter()
            .find(|d| d.get_str("name").ok() == Some(n))
            .cloned()
            .unwrap_or_else(|| panic!("{n} not listed: {all:?}"))
    };
    let w = by_name("weather");
    assert_eq!(w.get_str("type").ok(), Some("timeseries"));
    assert_eq!(
        w.get_document("options").ok(),
        Some(&doc! {
            "timeseries": {"timeField": "ts", "metaField": "sensor", "granularity": "minutes", "bucketMaxSpanSeconds": 86400},
            "expireAfterSeconds": 604800i64,
        })
    );
    assert_eq!(w.get_document("info").ok(), Some(&doc! {"readOnly": false}));
    let c = by_name("c");
    assert_eq!(
        c.get_document("options")
            .and_then(|o| o.get_document("timeseries"))
            .ok(),
        Some(&doc! {"timeField": "t", "bucketRoundingSeconds": 3600, "bucketMaxSpanSeconds": 3600})
    );
    let b = by_name("system.buckets.weather");
    assert_eq!(b.get_str("type").ok(), Some("collection"));
    assert_eq!(
        b.get_document("options")
            .and_then(|o| o.get_document("timeseries"))
            .ok(),
        w.get_document("options")
            .and_then(|o| o.get_document("timeseries"))
            .ok()
    );
    // A collection of the default granularity shows mongod's defaults.
    db.run_command(doc! {"create": "d", "timeseries": {"timeField": "t"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let d = listed(&db)
        .await
        .into_iter()
        .find(|d| d.get_str("name").ok() == Some("d"));
    assert_eq!(
        d.and_then(|d| d.get_document("options").ok().cloned()),
        Some(
            doc! {"timeseries": {"timeField": "t", "granularity": "seconds", "bucketMaxSpanSeconds": 3600}}
        )
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn inserts_fill_buckets_and_reads_return_measurements() {
    let t = start().await;
    let db = t.tcp.database("ts_rw");
    create_weather(&db).await;
    let docs = vec![
        doc! {"_id": 1, "ts": at(T0), "sensor": {"id": 5}, "temp": 12},
        doc! {"sensor": {"id": 5}, "_id": 1, "ts": at(T0 + 1), "temp": 13},
        doc! {"ts": at(T0 + 2), "sensor": {"id": 6}, "temp": 20, "hum": 0.5},
        doc! {"ts": at(T0 + 3), "temp": 1},
    ];
    let r = db
        .run_command(doc! {"insert": "weather", "documents": docs})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 4, "{r}");

    let got = find(&db, doc! {"find": "weather", "sort": {"ts": 1}}).await;
    assert_eq!(got.len(), 4);
    // mongod's order: time, meta, then the other fields as inserted.
    assert_eq!(
        got[0],
        doc! {"ts": at(T0), "sensor": {"id": 5}, "_id": 1, "temp": 12}
    );
    assert_eq!(
        got[1],
        doc! {"ts": at(T0 + 1), "sensor": {"id": 5}, "_id": 1, "temp": 13}
    );
    // A generated `_id` comes last; no meta field when the measurement had none.
    let keys: Vec<&str> = got[3].keys().map(String::as_str).collect();
    assert_eq!(keys, vec!["ts", "temp", "_id"]);
    assert!(got[3].get_object_id("_id").is_ok());

    let some = find(
        &db,
        doc! {"find": "weather", "filter": {"sensor.id": 5, "temp": {"$gt": 12}}, "projection": {"_id": 0, "temp": 1}},
    )
    .await;
    assert_eq!(some, vec![doc! {"temp": 13}]);
    let coll = db.collection::<Document>("weather");
    assert_eq!(count(&coll, doc! {}).await, 4);
    // Filters on the time and meta fields also narrow the buckets scanned.
    assert_eq!(
        count(&coll, doc! {"ts": {"$gte": at(T0 + 1), "$lt": at(T0 + 3)}}).await,
        2
    );
    assert_eq!(count(&coll, doc! {"ts": at(T0 + 2)}).await, 1);
    assert_eq!(count(&coll, doc! {"ts": {"$gt": at(T0 + 3)}}).await, 0);
    assert_eq!(
        count(&coll, doc! {"sensor": {"id": 5}, "ts": {"$lte": at(T0)}}).await,
        1
    );
    assert_eq!(count(&coll, doc! {"sensor": {"$exists": false}}).await, 1);
    assert_eq!(
        count(
            &coll,
            doc! {"$and": [{"sensor.id": {"$in": [5, 6]}}, {"temp": {"$gte": 13}}]}
        )
        .await,
        2
    );
    assert_eq!(count(&coll, doc! {"sensor.id": 5}).await, 2);
    let temps = coll
        .distinct("temp", doc! {"temp": {"$lt": 20}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(temps.len(), 3);
    let agg = find(
        &db,
        doc! {"aggregate": "weather", "pipeline": [
            {"$group": {"_id": "$sensor.id", "n": {"$sum": 1}}},
            {"$sort": {"n": -1}},
        ], "cursor": {}},
    )
    .await;
    assert_eq!(agg.first(), Some(&doc! {"_id": 5, "n": 2}));

    // The buckets: one per meta value, mongod's layout.
    let buckets = find(
        &db,
        doc! {"find": "system.buckets.weather", "sort": {"_id": 1}},
    )
    .await;
    assert_eq!(buckets.len(), 3, "{buckets:?}");
    let five = buckets
        .iter()
        .find(|b| b.get_document("meta").ok() == Some(&doc! {"id": 5}))
        .unwrap_or_else(|| panic!("{buckets:?}"));
    let control = five.get_document("control").cloned().unwrap_or_default();
    // Compressed, as mongod 8 writes buckets: version 2 (rows in time order).
    assert_eq!(control.get_i32("version").ok(), Some(2));
    assert_eq!(control.get_i32("count").ok(), Some(2));
    // Rounded down to the hour for granularity "minutes".
    let start = T0 - T0.rem_euclid(3_600_000);
    assert_eq!(
        control
            .get_document("min")
            .ok()
            .and_then(|m| m.get("ts").cloned()),
        Some(at(start))
    );
    assert_eq!(
        control
            .get_document("max")
            .ok()
            .and_then(|m| m.get("ts").cloned()),
        Some(at(T0 + 1))
    );
    assert_eq!(
        five.get_document("data")
            .ok()
            .and_then(|d| d.get("temp"))
            .map(column),
        Some(vec![Some(Bson::Int32(12)), Some(Bson::Int32(13))])
    );
    assert_eq!(
        five.get_object_id("_id")
            .ok()
            .map(|id| id.timestamp().timestamp_millis()),
        Some(start)
    );
    // A later insert tops up the open bucket of its meta value.
    db.run_command(doc! {"insert": "weather", "documents": [{"ts": at(T0 + 10), "sensor": {"id": 5}, "temp": 14}]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let buckets = find(&db, doc! {"find": "system.buckets.weather"}).await;
    assert_eq!(buckets.len(), 3, "{buckets:?}");
    assert_eq!(count(&coll, doc! {"sensor.id": 5}).await, 3);
    // Writing to the buckets directly is refused, as for any system collection.
    expect_code(
        db.run_command(doc! {"insert": "system.buckets.weather", "documents": [{"a": 1}]})
            .await,
        73,
    );
    // collStats and $collStats report the buckets, as mongod does.
    let stats = db
        .run_command(doc! {"collStats": "weather"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let section = stats
        .get_document("timeseries")
        .cloned()
        .unwrap_or_default();
    assert_eq!(
        section.get_str("bucketsNs").ok(),
        Some("ts_rw.system.buckets.weather"),
        "{stats}"
    );
    assert_eq!(num(&section, "bucketCount"), 3);
    assert!(num(&stats, "size") > 0, "{stats}");
    let agg = find(
        &db,
        doc! {"aggregate": "weather", "pipeline": [{"$collStats": {"storageStats": {}, "count": {}}}], "cursor": {}},
    )
    .await;
    // `count` counts measurements.
    assert_eq!(agg.first().map(|d| num(d, "count")), Some(5), "{agg:?}");
    let storage = agg
        .first()
        .and_then(|d| d.get_document("storageStats").ok().cloned())
        .unwrap_or_default();
    assert_eq!(
        storage
            .get_document("timeseries")
            .ok()
            .map(|t| num(t, "bucketCount")),
        Some(3),
        "{agg:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_time_values_fail_per_document_ordered_or_not() {
    let t = start().await;
    let db = t.tcp.database("ts_errors");
    db.run_command(doc! {"create": "m", "timeseries": {"timeField": "time"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let docs = vec![
        doc! {"time": at(T0), "v": 1},
        doc! {"time": "yesterday", "v": 2},
        doc! {"v": 3},
        doc! {"time": at(T0 + 5), "v": 4},
    ];
    let r = db
        .run_command(doc! {"insert": "m", "documents": docs.clone()})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 1, "{r}");
    let errors = r.get_array("writeErrors").cloned().unwrap_or_default();
    assert_eq!(errors.len(), 1, "{r}");
    let e = errors[0].as_document().cloned().unwrap_or_default();
    assert_eq!(num(&e, "index"), 1);
    assert_eq!(num(&e, "code"), 2);
    assert_eq!(
        e.get_str("errmsg").ok(),
        Some("'time' must be present and contain a valid BSON UTC datetime value")
    );
    let r = db
        .run_command(doc! {"insert": "m", "documents": docs, "ordered": false})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "n"), 2, "{r}");
    let indexes: Vec<i64> = r
        .get_array("writeErrors")
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|e| e.as_document().map(|d| num(d, "index")))
        .collect();
    assert_eq!(indexes, vec![1, 2]);
    assert_eq!(count(&db.collection::<Document>("m"), doc! {}).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_hold_at_most_1000_measurements_and_one_span() {
    let t = start().await;
    let db = t.tcp.database("ts_many");
    db.run_command(doc! {"create": "m", "timeseries": {"timeField": "t", "metaField": "k"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let base = T0 - T0.rem_euclid(3_600_000);
    let docs: Vec<Document> = (0..2500)
        .map(|i| doc! {"t": at(base + i), "k": "a", "i": i})
        .collect();
    let coll = db.collection::<Document>("m");
    coll.insert_many(docs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // An hour later does not fit the open bucket (span 3600 s).
    coll.insert_one(doc! {"t": at(base + 3_600_000), "k": "a", "i": -1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let buckets = db.collection::<Document>("system.buckets.m");
    assert_eq!(count(&buckets, doc! {}).await, 4);
    assert_eq!(count(&coll, doc! {}).await, 2501);
    let last = find(
        &db,
        doc! {"find": "m", "sort": {"t": -1}, "limit": 1, "projection": {"_id": 0}},
    )
    .await;
    assert_eq!(
        last,
        vec![doc! {"t": at(base + 3_600_000), "k": "a", "i": -1}]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deletes_remove_measurements() {
    let t = start().await;
    let db = t.tcp.database("ts_delete");
    create_weather(&db).await;
    let coll = db.collection::<Document>("weather");
    let docs: Vec<Document> = (0..10)
        .map(|i| doc! {"ts": at(T0 + i), "sensor": i % 2, "v": i})
        .collect();
    coll.insert_many(docs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // By meta value: whole buckets.
    let r = coll
        .delete_many(doc! {"sensor": 0})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.deleted_count, 5);
    assert_eq!(
        count(
            &db.collection::<Document>("system.buckets.weather"),
            doc! {}
        )
        .await,
        1
    );
    // By measurement field: the bucket is rewritten.
    let r = coll
        .delete_one(doc! {"v": {"$gte": 5}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.deleted_count, 1);
    let r = coll
        .delete_many(doc! {"v": {"$in": [1, 3]}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.deleted_count, 2);
    let left = find(
        &db,
        doc! {"find": "weather", "sort": {"v": 1}, "projection": {"_id": 0, "v": 1}},
    )
    .await;
    assert_eq!(left.len(), 2, "{left:?}");
    // New measurements still go to a bucket after the rewrite.
    coll.insert_one(doc! {"ts": at(T0 + 20), "sensor": 1, "v": 20})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count(&coll, doc! {"sensor": 1}).await, 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drop_removes_both_and_coll_mod_changes_options() {
    let t = start().await;
    let db = t.tcp.database("ts_drop");
    create_weather(&db).await;
    db.collection::<Document>("weather")
        .insert_one(doc! {"ts": at(T0), "sensor": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = db
        .run_command(doc! {"collMod": "weather", "timeseries": {"granularity": "hours"}, "expireAfterSeconds": 60})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.get_f64("ok").ok(), Some(1.0));
    let w = listed(&db)
        .await
        .into_iter()
        .find(|d| d.get_str("name").ok() == Some("weather"))
        .and_then(|d| d.get_document("options").ok().cloned());
    assert_eq!(
        w,
        Some(doc! {
            "timeseries": {"timeField": "ts", "metaField": "sensor", "granularity": "hours", "bucketMaxSpanSeconds": 2592000},
            "expireAfterSeconds": 60i64,
        })
    );
    expect_code(
        db.run_command(doc! {"collMod": "weather", "timeseries": {"granularity": "seconds"}})
            .await,
        72,
    );
    db.run_command(doc! {"collMod": "weather", "expireAfterSeconds": "off"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.run_command(doc! {"create": "plain"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    expect_code(
        db.run_command(doc! {"collMod": "plain", "timeseries": {"granularity": "hours"}})
            .await,
        72,
    );
    db.collection::<Document>("weather")
        .drop()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let names: Vec<String> = listed(&db)
        .await
        .iter()
        .filter_map(|d| d.get_str("name").ok().map(str::to_string))
        .collect();
    assert_eq!(names, vec!["plain".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttl_monitor_deletes_old_buckets() {
    let t = start_with(|c| c.ttl_monitor_sleep_secs = 1).await;
    let db = t.tcp.database("ts_ttl");
    db.run_command(doc! {"create": "e", "timeseries": {"timeField": "t", "metaField": "m"}, "expireAfterSeconds": 60})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let now = bson::DateTime::now().timestamp_millis();
    let coll = db.collection::<Document>("e");
    coll.insert_many(vec![
        doc! {"t": at(now - 7_200_000), "m": "old", "v": 1},
        doc! {"t": at(now - 7_100_000), "m": "old", "v": 2},
        doc! {"t": at(now), "m": "fresh", "v": 3},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut left = u64::MAX;
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        left = count(&coll, doc! {}).await;
        if left == 1 {
            break;
        }
    }
    assert_eq!(left, 1);
    assert_eq!(count(&coll, doc! {"m": "fresh"}).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn time_series_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    create_weather(&db).await;
    db.collection::<Document>("weather")
        .insert_many(vec![
            doc! {"ts": at(T0), "sensor": 1, "v": 1},
            doc! {"ts": at(T0 + 1), "sensor": 1, "v": 2},
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    shutdown_by_command(server, client).await;

    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("keep");
    let w = listed(&db)
        .await
        .into_iter()
        .find(|d| d.get_str("name").ok() == Some("weather"));
    assert_eq!(
        w.as_ref().and_then(|d| d.get_str("type").ok()),
        Some("timeseries")
    );
    // Inserts go on after the restart, and reads see every measurement.
    db.collection::<Document>("weather")
        .insert_one(doc! {"ts": at(T0 + 2), "sensor": 1, "v": 3})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let got = find(
        &db,
        doc! {"find": "weather", "sort": {"ts": 1}, "projection": {"_id": 0, "v": 1}},
    )
    .await;
    assert_eq!(got, vec![doc! {"v": 1}, doc! {"v": 2}, doc! {"v": 3}]);
    server.shutdown();
    drop(client);
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn updates_rewrite_measurements_in_place_or_move_them() {
    let t = start().await;
    let db = t.tcp.database("ts_update");
    create_weather(&db).await;
    let coll = db.collection::<Document>("weather");
    coll.insert_many(vec![
        doc! {"_id": 1, "ts": at(T0), "sensor": 1, "v": 1},
        doc! {"_id": 2, "ts": at(T0 + 1), "sensor": 1, "v": 2},
        doc! {"_id": 3, "ts": at(T0 + 2), "sensor": 2, "v": 3},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let buckets = db.collection::<Document>("system.buckets.weather");
    assert_eq!(count(&buckets, doc! {}).await, 2);
    let r = coll
        .update_many(doc! {"sensor": 1}, doc! {"$set": {"v": 100}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.matched_count, r.modified_count), (2, 2));
    assert_eq!(count(&coll, doc! {"v": 100}).await, 2);
    // Still in place: same buckets.
    assert_eq!(count(&buckets, doc! {}).await, 2);
    // A new meta value moves the measurement to a bucket of its own.
    let r = coll
        .update_one(doc! {"_id": 2}, doc! {"$set": {"sensor": 7}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.matched_count, r.modified_count), (1, 1));
    assert_eq!(count(&buckets, doc! {}).await, 3);
    let moved = find(&db, doc! {"find": "weather", "filter": {"sensor": 7}}).await;
    assert_eq!(
        moved,
        vec![doc! {"ts": at(T0 + 1), "sensor": 7, "_id": 2, "v": 100}]
    );
    // Matching without changing counts as matched only.
    let r = coll
        .update_one(doc! {"_id": 3}, doc! {"$set": {"v": 3}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((r.matched_count, r.modified_count), (1, 0));
    // The time field must stay a date.
    expect_code(
        coll.update_one(doc! {"_id": 3}, doc! {"$unset": {"ts": 1}})
            .await,
        2,
    );
    assert_eq!(count(&coll, doc! {}).await, 3);
    // mongod 8's sort picks the one measurement a single update changes.
    let r = db
        .run_command(doc! {"update": "weather", "updates": [
            {"q": {}, "u": {"$set": {"first": true}}, "sort": {"ts": -1}},
        ]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((num(&r, "n"), num(&r, "nModified")), (1, 1), "{r}");
    assert_eq!(count(&coll, doc! {"first": true, "_id": 3}).await, 1);
    // Upserts insert a measurement.
    let r = coll
        .update_one(
            doc! {"sensor": 9, "ts": at(T0 + 50)},
            doc! {"$set": {"v": 9}},
        )
        .upsert(true)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(r.upserted_id.is_some(), "{r:?}");
    assert_eq!(count(&coll, doc! {"sensor": 9, "v": 9}).await, 1);
    // A replacement keeps the _id.
    coll.replace_one(
        doc! {"_id": 3},
        doc! {"ts": at(T0 + 3), "sensor": 2, "w": true},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let got = find(&db, doc! {"find": "weather", "filter": {"_id": 3}}).await;
    assert_eq!(
        got,
        vec![doc! {"ts": at(T0 + 3), "sensor": 2, "_id": 3, "w": true}]
    );
}

async fn index_keys(db: &Database, coll: &str) -> Vec<(String, Document)> {
    find(db, doc! {"listIndexes": coll})
        .await
        .iter()
        .map(|s| {
            (
                s.get_str("name").unwrap_or_default().to_string(),
                s.get_document("key").cloned().unwrap_or_default(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn indexes_translate_to_the_buckets() {
    let t = start().await;
    let db = t.tcp.database("ts_indexes");
    create_weather(&db).await;
    // mongod's default index on the meta and time fields.
    assert_eq!(
        index_keys(&db, "weather").await,
        vec![("sensor_1_ts_1".to_string(), doc! {"sensor": 1, "ts": 1})]
    );
    let coll = db.collection::<Document>("weather");
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"temp": -1})
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        index_keys(&db, "weather").await,
        vec![
            ("sensor_1_ts_1".to_string(), doc! {"sensor": 1, "ts": 1}),
            ("temp_-1".to_string(), doc! {"temp": -1}),
        ]
    );
    let bucket_keys = index_keys(&db, "system.buckets.weather").await;
    assert!(
        bucket_keys.contains(&(
            "temp_-1".to_string(),
            doc! {"control.max.temp": -1, "control.min.temp": -1}
        )),
        "{bucket_keys:?}"
    );
    assert!(
        bucket_keys.contains(&(
            "sensor_1_ts_1".to_string(),
            doc! {"meta": 1, "control.min.ts": 1, "control.max.ts": 1}
        )),
        "{bucket_keys:?}"
    );
    // Writes keep the bucket indexes; reads still see every measurement.
    coll.insert_many(vec![
        doc! {"ts": at(T0), "sensor": 1, "temp": 3},
        doc! {"ts": at(T0 + 1), "sensor": 2, "temp": 4},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    coll.update_many(doc! {}, doc! {"$inc": {"temp": 1}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(count(&coll, doc! {"temp": {"$gt": 3}}).await, 2);
    let v = db
        .run_command(doc! {"validate": "system.buckets.weather"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    coll.drop_index("temp_-1")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.run_command(doc! {"dropIndexes": "weather", "index": {"sensor": 1, "ts": 1}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(index_keys(&db, "weather").await.is_empty());
    // Without a meta field there is no default index.
    db.run_command(doc! {"create": "plain_ts", "timeseries": {"timeField": "t"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(index_keys(&db, "plain_ts").await.is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn find_and_modify_picks_one_measurement() {
    let t = start().await;
    let db = t.tcp.database("ts_fam");
    create_weather(&db).await;
    let coll = db.collection::<Document>("weather");
    coll.insert_many(vec![
        doc! {"_id": 1, "ts": at(T0), "sensor": 1, "v": 5},
        doc! {"_id": 2, "ts": at(T0 + 1), "sensor": 1, "v": 9},
        doc! {"_id": 3, "ts": at(T0 + 2), "sensor": 2, "v": 7},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // The highest v: before and after images, in mongod's field order.
    let before = coll
        .find_one_and_update(doc! {}, doc! {"$inc": {"v": 1}})
        .sort(doc! {"v": -1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        before,
        Some(doc! {"ts": at(T0 + 1), "sensor": 1, "_id": 2, "v": 9})
    );
    let after = coll
        .find_one_and_update(doc! {"_id": 2}, doc! {"$set": {"sensor": 4}})
        .return_document(mongodb::options::ReturnDocument::After)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        after,
        Some(doc! {"ts": at(T0 + 1), "sensor": 4, "_id": 2, "v": 10})
    );
    assert_eq!(count(&coll, doc! {"sensor": 4}).await, 1);
    assert_eq!(count(&coll, doc! {}).await, 3);
    let gone = coll
        .find_one_and_delete(doc! {"v": {"$lt": 7}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(gone.and_then(|d| d.get_i32("_id").ok()), Some(1));
    assert_eq!(count(&coll, doc! {}).await, 2);
    let none = coll
        .find_one_and_delete(doc! {"v": 1000})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(none.is_none());
    let r = db
        .run_command(doc! {
            "findAndModify": "weather",
            "query": {"_id": 50, "ts": at(T0 + 9), "sensor": 9},
            "update": {"$set": {"v": 1}},
            "upsert": true,
            "new": true,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.get_document("lastErrorObject").ok(),
        Some(&doc! {"n": 1, "updatedExisting": false, "upserted": 50})
    );
    assert_eq!(count(&coll, doc! {"sensor": 9, "v": 1}).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn admin_bulk_write_is_refused_rather_than_misplaced() {
    let t = start().await;
    let db = t.tcp.database("ts_bulk");
    create_weather(&db).await;
    let e = expect_code(
        t.tcp
            .database("admin")
            .run_command(doc! {
                "bulkWrite": 1,
                "ops": [{"insert": 0, "document": {"ts": at(T0), "sensor": 1}}],
                "nsInfo": [{"ns": "ts_bulk.weather"}],
            })
            .await,
        238,
    );
    assert!(error_message(&e).contains("ts_bulk.weather"), "{e}");
    assert_eq!(
        count(&db.collection::<Document>("weather"), doc! {}).await,
        0
    );
}

/// Measurements of one sensor every second with a slowly moving reading, as
/// a device sends them.
fn readings(n: i64, from: i64) -> Vec<Document> {
    (from..from + n)
        .map(|i| {
            let mut d = doc! {"ts": at(T0 + i * 1000), "sensor": {"id": 7}, "temp": 20.0 + (i % 50) as f64 / 10.0};
            if i % 3 == 0 {
                d.insert("flag", true);
            }
            d
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn buckets_are_compressed_columns_and_read_back_whole() {
    let t = start().await;
    let db = t.tcp.database("ts_col");
    create_weather(&db).await;
    let coll = db.collection::<Document>("weather");
    let sent = readings(2500, 0);
    // In three inserts, so open buckets are reopened, extended and rewritten.
    for chunk in sent.chunks(900) {
        coll.insert_many(chunk.to_vec())
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let buckets = find(
        &db,
        doc! {"find": "system.buckets.weather", "sort": {"control.min.ts": 1}},
    )
    .await;
    // 2500 measurements within an hour: 1000, 1000 and 500 per bucket.
    let counts: Vec<_> = buckets
        .iter()
        .map(|b| {
            b.get_document("control")
                .and_then(|c| c.get_i32("count"))
                .ok()
        })
        .collect();
    assert_eq!(counts, [Some(1000), Some(1000), Some(500)], "{buckets:?}");
    let mut rows = 0;
    for b in &buckets {
        let control = b.get_document("control").unwrap();
        assert_eq!(control.get_i32("version").ok(), Some(2));
        let data = b.get_document("data").unwrap();
        let mut keys: Vec<_> = data.keys().collect();
        keys.sort();
        assert_eq!(keys, ["_id", "flag", "temp", "ts"], "{data:?}");
        let ts = column(data.get("ts").unwrap());
        let flag = column(data.get("flag").unwrap());
        assert_eq!(ts.len(), flag.len());
        // Skips where a measurement has no flag.
        assert!(flag.iter().any(Option::is_none) && flag.iter().any(Option::is_some));
        rows += ts.len();
        // Regular times and readings take a few bytes each, far from 8.
        if let Some(Bson::Binary(t)) = data.get("ts") {
            assert!(t.bytes.len() < 100, "{}", t.bytes.len());
        }
        if let Some(Bson::Binary(t)) = data.get("temp") {
            assert!(t.bytes.len() < 1200, "{}", t.bytes.len());
        }
    }
    assert_eq!(rows, 2500);

    // Every read path sees every measurement as it was sent.
    let got = find(
        &db,
        doc! {"find": "weather", "sort": {"ts": 1}, "projection": {"_id": 0}, "batchSize": 3000},
    )
    .await;
    let want: Vec<Document> = sent
        .iter()
        .map(|d| {
            let mut d = d.clone();
            d.remove("_id");
            d
        })
        .collect();
    assert_eq!(got.len(), want.len());
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.get("ts"), w.get("ts"));
        assert_eq!(g.get("temp"), w.get("temp"));
        assert_eq!(g.get("flag"), w.get("flag"));
        assert_eq!(g.get("sensor"), w.get("sensor"));
    }
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2500);
    assert_eq!(
        coll.count_documents(doc! {"flag": true}).await.unwrap(),
        834
    );
    let window = coll
        .count_documents(doc! {"ts": {"$gte": at(T0 + 100_000), "$lt": at(T0 + 200_000)}})
        .await
        .unwrap();
    assert_eq!(window, 100);
    let sum = find(
        &db,
        doc! {"aggregate": "weather", "pipeline": [
            {"$match": {"sensor.id": 7}},
            {"$group": {"_id": null, "n": {"$sum": 1}, "max": {"$max": "$temp"}, "min": {"$min": "$ts"}}}
        ], "cursor": {}},
    )
    .await;
    assert_eq!(
        sum,
        vec![doc! {"_id": null, "n": 2500, "max": 24.9, "min": at(T0)}]
    );
    // A delete rewrites a bucket, still compressed.
    coll.delete_many(doc! {"ts": {"$lt": at(T0 + 10_000)}})
        .await
        .unwrap();
    assert_eq!(coll.count_documents(doc! {}).await.unwrap(), 2490);
    let first = find(
        &db,
        doc! {"find": "system.buckets.weather", "sort": {"control.min.ts": 1}, "limit": 1},
    )
    .await;
    let control = first[0].get_document("control").unwrap();
    assert_eq!(control.get_i32("count").ok(), Some(990));
    assert_eq!(control.get_i32("version").ok(), Some(2));
    // Out of order, a bucket is version 3, as in mongod 8.
    coll.insert_many(vec![
        doc! {"ts": at(T0 + 5_000_000), "sensor": {"id": 8}, "temp": 1.0},
        doc! {"ts": at(T0 + 4_999_000), "sensor": {"id": 8}, "temp": 2.0},
    ])
    .await
    .unwrap();
    let eight = find(
        &db,
        doc! {"find": "system.buckets.weather", "filter": {"meta.id": 8}},
    )
    .await;
    assert_eq!(
        eight[0]
            .get_document("control")
            .and_then(|c| c.get_i32("version"))
            .ok(),
        Some(3)
    );
    let got = find(
        &db,
        doc! {"find": "weather", "filter": {"sensor.id": 8}, "sort": {"ts": 1}, "projection": {"_id": 0, "temp": 1}},
    )
    .await;
    assert_eq!(got, vec![doc! {"temp": 2.0}, doc! {"temp": 1.0}]);
}

/// A dbpath whose buckets an older BisonDB wrote uncompressed (version 1):
/// they read as before, take new measurements, and are written back
/// compressed when they change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn version_1_buckets_still_read_and_compress_when_rewritten() {
    use bisondb_storage::{Durability, LsmEngine, Modify, Storage};
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("old");
    create_weather(&db).await;
    db.collection::<Document>("weather")
        .insert_one(doc! {"ts": at(T0), "sensor": 1, "v": 0})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    shutdown_by_command(server, client).await;
    {
        // Replace the bucket with the version 1 layout of three measurements.
        let engine = LsmEngine::open_shared(&dbpath, bisondb_storage::store_lsm_options())
            .unwrap_or_else(|e| panic!("{e:?}"));
        let storage = Storage::open(engine).unwrap_or_else(|e| panic!("{e:?}"));
        let buckets = storage
            .collection("old", "system.buckets.weather")
            .unwrap_or_else(|| panic!("no buckets"));
        let first = buckets.scan(false).next().unwrap().unwrap();
        let id = first.get_object_id("_id").unwrap();
        let start = T0 - T0.rem_euclid(3_600_000);
        let v1 = bson::rawdoc! {
            "_id": id,
            "control": {"version": 1, "min": {"ts": bson::DateTime::from_millis(start), "_id": 1, "v": 1},
                        "max": {"ts": bson::DateTime::from_millis(T0 + 2), "_id": 3, "v": 3}},
            "meta": 1,
            "data": {"ts": {"0": bson::DateTime::from_millis(T0), "1": bson::DateTime::from_millis(T0 + 1),
                            "2": bson::DateTime::from_millis(T0 + 2)},
                     "_id": {"0": 1, "1": 2, "2": 3}, "v": {"0": 1, "2": 3}},
        };
        buckets
            .modify(
                bson::RawBsonRef::ObjectId(id),
                Durability::Sync,
                &mut |_| Ok(Modify::Replace(v1.clone())),
            )
            .unwrap_or_else(|e| panic!("{e:?}"));
    }
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("old");
    let got = find(
        &db,
        doc! {"find": "weather", "sort": {"ts": 1}, "projection": {"_id": 1, "v": 1}},
    )
    .await;
    assert_eq!(
        got,
        vec![
            doc! {"_id": 1, "v": 1},
            doc! {"_id": 2},
            doc! {"_id": 3, "v": 3}
        ]
    );
    let b = find(&db, doc! {"find": "system.buckets.weather"}).await;
    assert_eq!(
        b[0].get_document("control")
            .and_then(|c| c.get_i32("version"))
            .ok(),
        Some(1)
    );
    // Deleting one measurement rewrites the bucket, compressed.
    db.collection::<Document>("weather")
        .delete_one(doc! {"_id": 2})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let b = find(&db, doc! {"find": "system.buckets.weather"}).await;
    let control = b[0].get_document("control").unwrap();
    assert_eq!(control.get_i32("version").ok(), Some(2));
    assert_eq!(control.get_i32("count").ok(), Some(2));
    assert_eq!(
        column(b[0].get_document("data").unwrap().get("v").unwrap()),
        vec![Some(Bson::Int32(1)), Some(Bson::Int32(3))]
    );
    let got = find(
        &db,
        doc! {"find": "weather", "sort": {"ts": 1}, "projection": {"_id": 1, "v": 1}},
    )
    .await;
    assert_eq!(got, vec![doc! {"_id": 1, "v": 1}, doc! {"_id": 3, "v": 3}]);
    shutdown_by_command(server, client).await;
}

/// `$group`/`$count` pipelines that decode only the columns they read give
/// what the same stages give behind a `$project` (which keeps every column
/// decoded): per-hour and per-minute date parts, the meta field, a time
/// window and a field some measurements lack.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_over_some_columns_matches_full_unpacking() {
    let t = start().await;
    let db = t.tcp.database("ts_cols");
    create_weather(&db).await;
    let coll = db.collection::<Document>("weather");
    coll.insert_many(readings(2500, 0))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let window = doc! {"$match": {"ts": {"$gte": at(T0 + 300_000)}, "sensor.id": 7}};
    let everything = doc! {"$project": {"ts": 1, "sensor": 1, "temp": 1, "flag": 1}};
    let tails = [
        vec![
            doc! {"$group": {"_id": {"h": {"$hour": "$ts"}, "m": {"$minute": "$ts"}},
            "avg": {"$avg": "$temp"}, "min": {"$min": "$temp"}, "max": {"$max": "$temp"},
            "flags": {"$sum": {"$cond": ["$flag", 1, 0]}}, "n": {"$count": {}}}},
            doc! {"$sort": {"_id": 1}},
        ],
        vec![
            doc! {"$group": {"_id": "$sensor", "sum": {"$sum": "$temp"}, "first": {"$min": "$ts"}}},
        ],
        vec![doc! {"$count": "n"}],
    ];
    for tail in tails {
        let run = |head: Vec<Document>| {
            let pipeline: Vec<Document> = head.into_iter().chain(tail.clone()).collect();
            let db = db.clone();
            async move {
                find(
                    &db,
                    doc! {"aggregate": "weather", "pipeline": pipeline, "cursor": {"batchSize": 5000}},
                )
                .await
            }
        };
        let got = run(vec![window.clone()]).await;
        let want = run(vec![window.clone(), everything.clone()]).await;
        assert!(!got.is_empty(), "{tail:?}");
        assert_eq!(got, want, "{tail:?}");
    }
    let n = run_count(&db, window).await;
    assert_eq!(n, 2200);
}

async fn run_count(db: &Database, stage: Document) -> i32 {
    let r = find(
        db,
        doc! {"aggregate": "weather", "pipeline": [stage, {"$count": "n"}], "cursor": {}},
    )
    .await;
    r.first().and_then(|d| d.get_i32("n").ok()).unwrap_or(-1)
}
