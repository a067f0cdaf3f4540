//! Geospatial indexes and queries through the official driver: 2d and
//! 2dsphere indexes as listIndexes shows them, geometry validation on writes,
//! `$geoWithin` / `$within` / `$geoIntersects`, `$near` / `$nearSphere`
//! ordered by distance (and 291 without a geo index), the `$geoNear` stage,
//! and what explain says ran. Runs on the engine BISONDB_TEST_ENGINE names;
//! one test restarts an lsm server to check the index options persist.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Database;

fn ids(docs: &[Document]) -> Vec<i32> {
    docs.iter()
        .map(|d| d.get_i32("_id").unwrap_or_else(|_| panic!("no _id in {d}")))
        .collect()
}

async fn find(db: &Database, coll: &str, filter: Document) -> mongodb::error::Result<Vec<i32>> {
    let c = db.collection::<Document>(coll);
    let docs = collect(c.find(filter).await?).await;
    Ok(ids(&docs))
}

/// The winning plan `explain` reports for a find on `p` with `filter`.
async fn winning_plan(db: &Database, filter: Document) -> Document {
    let ex = db
        .run_command(doc! {"explain": {"find": "p", "filter": filter}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    ex.get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .cloned()
        .unwrap_or_else(|e| panic!("{e}: {ex}"))
}

fn point(x: f64, y: f64) -> Document {
    doc! {"type": "Point", "coordinates": [x, y]}
}

/// Points along the equator 1, 2, 3... degrees east of 0, inserted in a
/// scrambled order so distance order is not insertion order.
async fn seed_points(db: &Database) {
    let c = db.collection::<Document>("p");
    for i in [3, 1, 4, 2, 5] {
        c.insert_one(doc! {"_id": i, "geo": point(f64::from(i), 0.0), "loc": [f64::from(i), 0.0], "k": i % 2})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
}

#[tokio::test]
async fn index_specs_like_mongod() {
    let t = start().await;
    let db = t.tcp.database("geo_specs");
    let r = db
        .run_command(doc! {"createIndexes": "c", "indexes": [
            {"key": {"geo": "2dsphere"}, "name": "geo_2dsphere"},
            {"key": {"loc": "2d", "k": 1}, "name": "loc_2d_k_1", "bits": 20, "min": -500, "max": 500},
        ]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(num(&r, "numIndexesAfter"), 3);
    let list = db
        .run_command(doc! {"listIndexes": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let batch = list
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .unwrap_or_else(|e| panic!("{e}"));
    let by_name = |n: &str| -> Document {
        batch
            .iter()
            .filter_map(Bson::as_document)
            .find(|d| d.get_str("name").ok() == Some(n))
            .cloned()
            .unwrap_or_else(|| panic!("no {n} in {list}"))
    };
    assert_eq!(
        by_name("geo_2dsphere"),
        doc! {"v": 2, "key": {"geo": "2dsphere"}, "name": "geo_2dsphere", "2dsphereIndexVersion": 3}
    );
    let flat = by_name("loc_2d_k_1");
    assert_eq!(flat.get_i32("bits").ok(), Some(20));
    assert_eq!(flat.get_i32("min").ok(), Some(-500));

    for (spec, code) in [
        (
            doc! {"key": {"h": "geoHaystack", "t": 1}, "bucketSize": 1},
            197,
        ),
        (doc! {"key": {"h": "geoHaystack", "t": 1}}, 67),
        (doc! {"key": {"k": 1, "loc": "2d"}}, 16801),
        (doc! {"key": {"loc": "2d"}, "bits": 0}, 13028),
    ] {
        let e = db
            .run_command(doc! {"createIndexes": "c", "indexes": [spec.clone()]})
            .await
            .err()
            .unwrap_or_else(|| panic!("{spec} should fail"));
        assert_eq!(error_code(&e), Some(code), "{spec}: {e}");
    }
}

#[tokio::test]
async fn writes_are_validated_against_geo_indexes() {
    let t = start().await;
    let db = t.tcp.database("geo_writes");
    let c = db.collection::<Document>("c");
    c.insert_one(doc! {"_id": 0, "geo": {"type": "Point", "coordinates": [500, 0]}, "loc": "x"})
        .await
        .unwrap_or_else(|e| panic!("without an index anything goes: {e}"));
    // Building over an invalid document fails as an insert would.
    let e = db
        .run_command(
            doc! {"createIndexes": "c", "indexes": [{"key": {"geo": "2dsphere"}, "name": "g"}]},
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("the build must fail"));
    assert_eq!(error_code(&e), Some(16755), "{e}");
    c.delete_one(doc! {"_id": 0})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.run_command(doc! {"createIndexes": "c", "indexes": [
        {"key": {"geo": "2dsphere"}, "name": "g"},
        {"key": {"loc": "2d"}, "name": "l"},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let cases: Vec<(Document, Option<i32>)> = vec![
        (
            doc! {"_id": 1, "geo": point(10.0, 20.0), "loc": [1, 2]},
            None,
        ),
        (doc! {"_id": 2, "k": "missing fields are fine"}, None),
        (
            doc! {"_id": 3, "geo": [10, 20], "loc": {"x": 1, "y": 2}},
            None,
        ),
        (doc! {"_id": 4, "geo": null}, None),
        (
            doc! {"_id": 5, "geo": {"type": "Point", "coordinates": [200, 0]}},
            Some(16755),
        ),
        (
            doc! {"_id": 6, "geo": {"type": "Polygon", "coordinates": [[[0, 0], [1, 0], [1, 1]]]}},
            Some(16755),
        ),
        (doc! {"_id": 7, "geo": "nowhere"}, Some(16755)),
        (doc! {"_id": 8, "loc": "x"}, Some(16804)),
        (doc! {"_id": 9, "loc": [1]}, Some(13068)),
        (doc! {"_id": 10, "loc": ["a", "b"]}, Some(13026)),
        (doc! {"_id": 11, "loc": [200, 0]}, Some(13027)),
    ];
    for (d, want) in cases {
        let got = c.insert_one(d.clone()).await;
        match want {
            None => {
                got.unwrap_or_else(|e| panic!("{d}: {e}"));
            }
            Some(code) => {
                expect_code(got, code);
            }
        }
    }
    // Updates are checked the same way.
    let e = c
        .update_one(
            doc! {"_id": 1},
            doc! {"$set": {"geo.coordinates": [0, 100]}},
        )
        .await
        .err()
        .unwrap_or_else(|| panic!("the update must fail"));
    assert_eq!(error_code(&e), Some(16755), "{e}");
    assert_eq!(count(&c, doc! {}).await, 4);
}

#[tokio::test]
async fn within_and_intersects() {
    let t = start().await;
    let db = t.tcp.database("geo_within");
    seed_points(&db).await;
    let square = doc! {"type": "Polygon", "coordinates": [[[1.5, -1], [3.5, -1], [3.5, 1], [1.5, 1], [1.5, -1]]]};
    // No index needed for these, as in mongod.
    for filter in [
        doc! {"geo": {"$geoWithin": {"$geometry": square.clone()}}},
        doc! {"geo": {"$within": {"$geometry": square.clone()}}},
        doc! {"loc": {"$geoWithin": {"$box": [[1.5, -1], [3.5, 1]]}}},
        doc! {"loc": {"$geoWithin": {"$polygon": [[1.5, -1], [3.5, -1], [3.5, 1], [1.5, 1]]}}},
        doc! {"loc": {"$geoWithin": {"$center": [[2.5, 0], 0.9]}}},
        doc! {"geo": {"$geoWithin": {"$centerSphere": [[2.5, 0], 0.9_f64.to_radians()]}}},
        doc! {"geo": {"$geoIntersects": {"$geometry": square.clone()}}},
    ] {
        let mut got = find(&db, "p", filter.clone())
            .await
            .unwrap_or_else(|e| panic!("{filter}: {e}"));
        got.sort_unstable();
        assert_eq!(got, vec![2, 3], "{filter}");
    }
    // The same through a 2dsphere index: explain shows the cells it scanned.
    db.run_command(
        doc! {"createIndexes": "p", "indexes": [{"key": {"geo": "2dsphere"}, "name": "g"}]},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let mut got = find(
        &db,
        "p",
        doc! {"geo": {"$within": {"$geometry": square.clone()}}},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    got.sort_unstable();
    assert_eq!(got, vec![2, 3]);
    let win = winning_plan(
        &db,
        doc! {"geo": {"$geoWithin": {"$geometry": square.clone()}}},
    )
    .await;
    assert_eq!(win.get_str("stage").ok(), Some("FETCH"), "{win}");
    let scan = win
        .get_document("inputStage")
        .unwrap_or_else(|e| panic!("{e}: {win}"));
    assert_eq!(scan.get_str("stage").ok(), Some("IXSCAN"), "{scan}");
    assert_eq!(scan.get_str("indexName").ok(), Some("g"), "{scan}");
    // Malformed shapes fail as mongod's BadValue.
    let e = find(
        &db,
        "p",
        doc! {"geo": {"$geoWithin": {"$geometry": point(0.0, 0.0)}}},
    )
    .await
    .err()
    .unwrap_or_else(|| panic!("a point is not a region"));
    assert_eq!(error_code(&e), Some(2), "{e}");
}

#[tokio::test]
async fn near_needs_an_index_and_sorts_by_distance() {
    let t = start().await;
    let db = t.tcp.database("geo_near");
    seed_points(&db).await;
    let geo_near = doc! {"geo": {"$near": {"$geometry": point(0.0, 0.0)}}};
    let e = find(&db, "p", geo_near.clone())
        .await
        .err()
        .unwrap_or_else(|| panic!("$near without an index must fail"));
    assert_eq!(error_code(&e), Some(291), "{e}");
    assert!(error_message(&e).contains("unable to find index for $geoNear query"));
    db.run_command(doc! {"createIndexes": "p", "indexes": [
        {"key": {"geo": "2dsphere"}, "name": "g"},
        {"key": {"loc": "2d"}, "name": "l"},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        find(&db, "p", geo_near)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![1, 2, 3, 4, 5]
    );
    // One degree on the equator is about 111.3 km.
    let bounded = doc! {"geo": {"$nearSphere": {"$geometry": point(5.0, 0.0), "$maxDistance": 250_000, "$minDistance": 50_000}}};
    assert_eq!(
        find(&db, "p", bounded)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![4, 3]
    );
    // Legacy pairs on the 2d index: planar units.
    let legacy = doc! {"loc": {"$near": [3.2, 0], "$maxDistance": 1.5}};
    assert_eq!(
        find(&db, "p", legacy)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![3, 4, 2]
    );
    // With the other predicates of the filter.
    let mixed = doc! {"k": 1, "loc": {"$nearSphere": [0, 0]}};
    assert_eq!(
        find(&db, "p", mixed)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![1, 3, 5]
    );
    let e = find(
        &db,
        "p",
        doc! {"$or": [{"loc": {"$near": [0, 0]}}, {"k": 1}]},
    )
    .await
    .err()
    .unwrap_or_else(|| panic!("$near under $or must fail"));
    assert_eq!(error_code(&e), Some(2), "{e}");
    let win = winning_plan(&db, doc! {"geo": {"$near": {"$geometry": point(0.0, 0.0)}}}).await;
    assert_eq!(
        win.get_str("stage").ok(),
        Some("GEO_NEAR_2DSPHERE"),
        "{win}"
    );
    assert_eq!(win.get_str("indexName").ok(), Some("g"), "{win}");
    assert_eq!(
        win.get_document("inputStage")
            .and_then(|s| s.get_str("stage"))
            .ok(),
        Some("COLLSCAN"),
        "{win}"
    );
    // With a $maxDistance the cells around the point are scanned instead.
    let win = winning_plan(
        &db,
        doc! {"geo": {"$near": {"$geometry": point(0.0, 0.0), "$maxDistance": 250_000}}},
    )
    .await;
    assert_eq!(
        win.get_str("stage").ok(),
        Some("GEO_NEAR_2DSPHERE"),
        "{win}"
    );
    assert_eq!(
        win.get_document("inputStage")
            .and_then(|s| s.get_str("stage"))
            .ok(),
        Some("FETCH"),
        "{win}"
    );
    let near_max = doc! {"geo": {"$near": {"$geometry": point(0.0, 0.0), "$maxDistance": 250_000}}};
    assert_eq!(
        find(&db, "p", near_max)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![1, 2]
    );
}

#[tokio::test]
async fn geo_near_stage() {
    let t = start().await;
    let db = t.tcp.database("geo_stage");
    seed_points(&db).await;
    let c = db.collection::<Document>("p");
    let run = |pipeline: Vec<Document>| {
        let c = c.clone();
        async move {
            let cursor = c.aggregate(pipeline).await?;
            Ok::<_, mongodb::error::Error>(collect(cursor).await)
        }
    };
    let stage = doc! {"$geoNear": {"near": point(0.0, 0.0), "distanceField": "d"}};
    let e = run(vec![stage.clone()])
        .await
        .err()
        .unwrap_or_else(|| panic!("no index"));
    assert_eq!(error_code(&e), Some(27), "{e}");
    db.run_command(
        doc! {"createIndexes": "p", "indexes": [{"key": {"geo": "2dsphere"}, "name": "g"}]},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let out = run(vec![
        doc! {"$geoNear": {
            "near": point(0.0, 0.0), "distanceField": "dist.m", "maxDistance": 350_000,
            "query": {"k": 1}, "includeLocs": "where", "distanceMultiplier": 0.001,
        }},
        doc! {"$project": {"dist": 1, "where": 1}},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&out), vec![1, 3]);
    let km = out
        .first()
        .and_then(|d| d.get_document("dist").ok())
        .and_then(|d| d.get_f64("m").ok())
        .unwrap_or_else(|| panic!("{out:?}"));
    assert!((km - 111.318).abs() < 0.01, "{km}");
    assert_eq!(
        out.first()
            .and_then(|d| d.get_document("where").ok())
            .cloned(),
        Some(point(1.0, 0.0))
    );
    // Legacy point with spherical: radians.
    let out = run(vec![
        doc! {"$geoNear": {"near": [0, 0], "distanceField": "d", "spherical": true, "key": "geo"}},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&out), vec![1, 2, 3, 4, 5]);
    let d = out
        .first()
        .and_then(|d| d.get_f64("d").ok())
        .unwrap_or_default();
    assert!((d - 1.0_f64.to_radians()).abs() < 1e-9, "{d}");
    // On a 2d index with a maxDistance: planar distances, the cells of that
    // distance read (the same answer as a full read).
    db.run_command(doc! {"createIndexes": "p", "indexes": [{"key": {"loc": "2d"}, "name": "l"}]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let out = run(vec![doc! {"$geoNear": {"near": [2.2, 0], "distanceField": "d", "key": "loc", "maxDistance": 1.5}}])
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ids(&out), vec![2, 3, 1]);
    let e = run(vec![doc! {"$match": {}}, stage.clone()])
        .await
        .err()
        .unwrap_or_else(|| panic!("$geoNear must be first"));
    assert_eq!(error_code(&e), Some(40603), "{e}");
    let e = run(vec![
        doc! {"$match": {"geo": {"$near": {"$geometry": point(0.0, 0.0)}}}},
    ])
    .await
    .err()
    .unwrap_or_else(|| panic!("$near in $match"));
    assert_eq!(error_code(&e), Some(5626500), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn geo_index_options_survive_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("geo_restart");
    db.run_command(doc! {"createIndexes": "c", "indexes": [
        {"key": {"geo": "2dsphere"}, "name": "g"},
        {"key": {"loc": "2d"}, "name": "l", "min": 0, "max": 10},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    shutdown_by_command(server, client).await;
    let (_server, client) = restart_lsm(dir.path(), &dbpath).await;
    let db = client.database("geo_restart");
    let c = db.collection::<Document>("c");
    // The 2d index still has its bounds: 11 is outside [0, 10).
    expect_code(c.insert_one(doc! {"loc": [11, 1]}).await, 13027);
    expect_code(c.insert_one(doc! {"geo": [0, 91]}).await, 16755);
    c.insert_one(doc! {"_id": 1, "loc": [5, 5], "geo": point(5.0, 5.0)})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        find(&db, "c", doc! {"loc": {"$near": [0, 0]}})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
        vec![1]
    );
}

/// A grid of points queried with many regions, through each index kind and
/// by a collection scan: the same documents.
#[tokio::test]
async fn index_scans_find_what_collection_scans_find() {
    let t = start().await;
    let db = t.tcp.database("geo_same");
    let c = db.collection::<Document>("g");
    let mut docs = Vec::new();
    let mut id = 0;
    for x in (-180..=180).step_by(9) {
        for y in (-90..=90).step_by(6) {
            id += 1;
            let (x, y) = (f64::from(x), f64::from(y));
            docs.push(doc! {"_id": id, "geo": point(x, y), "loc": [x, y]});
        }
    }
    // A few shapes too, for 2dsphere.
    docs.push(
        doc! {"_id": 100_001, "geo": {"type": "LineString", "coordinates": [[170, 5], [-170, 5]]}},
    );
    docs.push(doc! {"_id": 100_002, "geo": {"type": "Polygon", "coordinates": [[[0, 80], [120, 80], [-120, 80], [0, 80]]]}});
    c.insert_many(docs).await.unwrap_or_else(|e| panic!("{e}"));
    let regions = vec![
        doc! {"geo": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[[-20, -10], [30, -10], [30, 40], [-20, 40], [-20, -10]]]}}}},
        doc! {"geo": {"$geoWithin": {"$centerSphere": [[0, 0], 0.3]}}},
        doc! {"geo": {"$geoWithin": {"$centerSphere": [[179, 60], 0.4]}}},
        doc! {"geo": {"$geoIntersects": {"$geometry": {"type": "LineString", "coordinates": [[175, 0], [175, 10]]}}}},
        doc! {"geo": {"$geoIntersects": {"$geometry": point(0.0, 90.0)}}},
        doc! {"geo": {"$geoIntersects": {"$geometry": {"type": "Polygon", "coordinates": [[[-180, -90], [180, -90], [180, -60], [-180, -60], [-180, -90]]]}}}},
        doc! {"geo": {"$geoWithin": {"$box": [[-45, -30], [45, 30]]}}},
        doc! {"loc": {"$geoWithin": {"$box": [[-45, -30], [45, 30]]}}},
        doc! {"loc": {"$geoWithin": {"$center": [[90, 0], 25]}}},
        doc! {"loc": {"$geoWithin": {"$polygon": [[0, 0], [100, 0], [0, 60]]}}},
        doc! {"loc": {"$geoWithin": {"$box": [[180, 90], [180, 90]]}}},
    ];
    let scan = |filter: Document| {
        let c = c.clone();
        async move {
            let mut ids = ids(&collect(
                c.find(filter)
                    .hint(mongodb::options::Hint::Keys(doc! {"$natural": 1}))
                    .await
                    .unwrap_or_else(|e| panic!("{e}")),
            )
            .await);
            ids.sort_unstable();
            ids
        }
    };
    let mut expected = Vec::new();
    for r in &regions {
        expected.push(scan(r.clone()).await);
    }
    assert!(expected.iter().all(|e| !e.is_empty()), "{expected:?}");
    db.run_command(doc! {"createIndexes": "g", "indexes": [
        {"key": {"geo": "2dsphere"}, "name": "s"},
        {"key": {"loc": "2d"}, "name": "f", "max": 180.5},
    ]})
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // The stored cells are what key generation gives (validate regenerates them).
    let v = db
        .run_command(doc! {"validate": "g"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    for (r, want) in regions.iter().zip(&expected) {
        let mut got = find(&db, "g", r.clone())
            .await
            .unwrap_or_else(|e| panic!("{r}: {e}"));
        got.sort_unstable();
        assert_eq!(&got, want, "{r}");
        let ex = db
            .run_command(
                doc! {"explain": {"find": "g", "filter": r.clone()}, "verbosity": "executionStats"},
            )
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let stats = ex
            .get_document("executionStats")
            .unwrap_or_else(|e| panic!("{e}: {ex}"));
        assert!(num(stats, "totalDocsExamined") < 1000, "{r}: {stats}");
    }
}
