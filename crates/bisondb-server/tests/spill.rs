//! Memory limits of blocking aggregation stages through the official driver:
//! with the limits lowered to a few KiB through the server's parameters
//! (`internalQueryMaxBlockingSortMemoryUsageBytes`,
//! `internalDocumentSourceGroupMaxMemoryBytes`), `$sort` and `$group` spill
//! to `<dbpath>/_tmp` and give the in-memory results; `allowDiskUse: false`
//! (or `allowDiskUseByDefault` off) fails with 292; spill files go when the
//! cursor ends, and a restart empties `_tmp`. Runs on the engine
//! BISONDB_TEST_ENGINE names (the dbpath, and so `_tmp`, exists on lsm only;
//! inMemory spills to the system temp directory).

use crate::common::*;
use bson::{doc, Document};
use futures::StreamExt;
use mongodb::Collection;

const N: i32 = 2000;

fn key(i: i32) -> i32 {
    (i * 7919) % 331
}

async fn seed(c: &Collection<Document>) {
    let docs: Vec<Document> = (0..N)
        .map(|i| doc! {"_id": i, "a": key(i), "pad": "x".repeat((i % 40) as usize)})
        .collect();
    c.insert_many(docs).await.unwrap_or_else(|e| panic!("{e}"));
}

fn tmp_files(t: &TestServer) -> usize {
    std::fs::read_dir(t.dir.path().join("db").join("_tmp")).map_or(0, |d| d.count())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sort_and_group_spill_past_the_lowered_limits() {
    let t = start_with(|c| {
        c.sort_memory_bytes = 4096;
        c.group_memory_bytes = 4096;
    })
    .await;
    let c: Collection<Document> = t.tcp.database("spill").collection("c");
    seed(&c).await;

    // $sort: the whole order, ties broken by _id as asked.
    let mut want: Vec<(i32, i32)> = (0..N).map(|i| (key(i), i)).collect();
    want.sort_unstable();
    let mut cursor = c
        .aggregate(vec![doc! {"$sort": {"a": 1, "_id": 1}}])
        .batch_size(10)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut got = Vec::new();
    while let Some(d) = cursor.next().await {
        let d = d.unwrap_or_else(|e| panic!("{e}"));
        if got.len() == 20 && test_engine() == "lsm" {
            // Mid-cursor: the runs are on disk, under the dbpath.
            assert!(tmp_files(&t) > 0, "no spill files in <dbpath>/_tmp");
        }
        got.push((d.get_i32("a").unwrap(), d.get_i32("_id").unwrap()));
    }
    assert_eq!(got, want);
    assert_eq!(tmp_files(&t), 0, "spill files left after the cursor ended");

    // A cursor killed before its end takes its spill files with it.
    let db = t.tcp.database("spill");
    let reply = db
        .run_command(
            doc! {"aggregate": "c", "pipeline": [{"$sort": {"a": 1}}], "cursor": {"batchSize": 5}},
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let id = reply.get_document("cursor").unwrap().get_i64("id").unwrap();
    assert_ne!(id, 0);
    if test_engine() == "lsm" {
        assert!(tmp_files(&t) > 0);
    }
    db.run_command(doc! {"killCursors": "c", "cursors": [id]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(tmp_files(&t), 0, "spill files left after killCursors");

    // $group: every key, with its count and sum.
    let groups = collect(
        c.aggregate(vec![
            doc! {"$group": {"_id": "$a", "n": {"$sum": 1}, "ids": {"$push": "$_id"}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    let mut want_groups: std::collections::BTreeMap<i32, Vec<i32>> = Default::default();
    for i in 0..N {
        want_groups.entry(key(i)).or_default().push(i);
    }
    let got_groups: Vec<(i32, Vec<i32>)> = groups
        .iter()
        .map(|g| {
            let ids = g
                .get_array("ids")
                .unwrap()
                .iter()
                .map(|b| b.as_i32().unwrap())
                .collect();
            (g.get_i32("_id").unwrap(), ids)
        })
        .collect();
    assert_eq!(got_groups, want_groups.into_iter().collect::<Vec<_>>());
    assert_eq!(tmp_files(&t), 0);

    // Without allowDiskUse: 292 for both stages.
    for (stage, msg) in [
        (
            doc! {"$sort": {"a": 1}},
            "Sort exceeded memory limit of 4096 bytes",
        ),
        (
            doc! {"$group": {"_id": "$_id", "n": {"$sum": 1}}},
            "Exceeded memory limit for $group",
        ),
    ] {
        let e = c
            .aggregate(vec![stage])
            .allow_disk_use(false)
            .await
            .expect_err("memory limit");
        assert_eq!(error_code(&e), Some(292), "{e}");
        assert_eq!(
            error_code_name(&e).as_deref(),
            Some("QueryExceededMemoryLimitNoDiskUseAllowed")
        );
        assert!(error_message(&e).contains(msg), "{e}");
    }
    // find's blocking sort: the same limit; allowDiskUse defaults to true.
    let all = collect(
        c.find(doc! {})
            .sort(doc! {"a": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(all.len(), N as usize);
    let e = match c
        .find(doc! {})
        .sort(doc! {"a": 1})
        .allow_disk_use(false)
        .await
    {
        Ok(cursor) => futures::TryStreamExt::try_collect::<Vec<_>>(cursor)
            .await
            .expect_err("memory limit"),
        Err(e) => e,
    };
    assert_eq!(error_code(&e), Some(292), "{e}");
    assert!(
        error_message(&e).contains("Sort exceeded memory limit of 4096 bytes"),
        "{e}"
    );
    // A $sort + small $limit keeps only its top k: never limited.
    let top = collect(
        c.aggregate(vec![
            doc! {"$sort": {"a": -1, "_id": 1}},
            doc! {"$limit": 3},
        ])
        .allow_disk_use(false)
        .await
        .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(top.len(), 3);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_disk_use_by_default_off() {
    let t = start_with(|c| {
        c.sort_memory_bytes = 4096;
        c.allow_disk_use_by_default = false;
    })
    .await;
    let c: Collection<Document> = t.tcp.database("spill").collection("c");
    seed(&c).await;
    let e = c
        .aggregate(vec![doc! {"$sort": {"a": 1}}])
        .await
        .expect_err("memory limit");
    assert_eq!(error_code(&e), Some(292), "{e}");
    let all = collect(
        c.aggregate(vec![doc! {"$sort": {"a": 1}}])
            .allow_disk_use(true)
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(all.len(), N as usize);
    let e = match c.find(doc! {}).sort(doc! {"a": 1}).await {
        Ok(cursor) => futures::TryStreamExt::try_collect::<Vec<_>>(cursor)
            .await
            .expect_err("memory limit"),
        Err(e) => e,
    };
    assert_eq!(error_code(&e), Some(292), "{e}");
    // getParameter shows the values the server started with.
    let p = t
        .tcp
        .database("admin")
        .run_command(doc! {
            "getParameter": 1,
            "allowDiskUseByDefault": 1,
            "internalQueryMaxBlockingSortMemoryUsageBytes": 1,
            "internalDocumentSourceGroupMaxMemoryBytes": 1,
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(p.get_bool("allowDiskUseByDefault").ok(), Some(false));
    assert_eq!(
        p.get_i64("internalQueryMaxBlockingSortMemoryUsageBytes")
            .ok(),
        Some(4096)
    );
    assert_eq!(
        p.get_i64("internalDocumentSourceGroupMaxMemoryBytes").ok(),
        Some(100 * 1024 * 1024)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn startup_empties_the_spill_directory() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let tmp = dbpath.join("_tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("extsort-stale"), b"left by a crash").unwrap();
    let (server, _client) = restart_lsm(dir.path(), &dbpath).await;
    assert_eq!(std::fs::read_dir(&tmp).unwrap().count(), 0);
    server.shutdown();
}
