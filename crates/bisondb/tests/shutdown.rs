//! Shutdown under load, through the real binary (issue 20, findings 2-3):
//! SIGTERM while a script loops forever and clients write as fast as they
//! can, on the persistent engine, repeated; every run must exit within a
//! generous bound (60 s, to catch hangs), and every acknowledged write must
//! be there afterwards. The measured times are printed (`--nocapture`) for
//! the record; the goal is under 5 s. `BISONDB_SHUTDOWN_ROUNDS` sets the
//! number of rounds (3 by default).

#![cfg(unix)]

mod support;

use std::path::Path;
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use mongodb::Client;
use support::{free_port, Bison};

fn start(dbpath: &Path, port: u16) -> Bison {
    support::start_bisondb(dbpath, port, &["--storageEngine", "lsm"])
}

/// Waits until the server answers a ping (at most 30 s).
async fn connect(port: u16) -> Client {
    let uri = format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=30000");
    let client = Client::with_uri_str(&uri).await.expect("client");
    client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .expect("server up");
    client
}

/// Waits for the process to exit; the time it took, or `None` past `limit`.
fn wait_exit(b: &mut Bison, limit: Duration) -> Option<Duration> {
    let started = Instant::now();
    while started.elapsed() < limit {
        if let Ok(Some(_)) = b.0.try_wait() {
            return Some(started.elapsed());
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    None
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_under_load_always_exits() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dbpath = dir.path().join("db");
    std::fs::create_dir_all(&dbpath).expect("dbpath");
    let rounds: usize = std::env::var("BISONDB_SHUTDOWN_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let mut times = Vec::new();
    // acked[round][writer]: batches acknowledged.
    let mut acked: Vec<Vec<std::sync::Arc<std::sync::atomic::AtomicU64>>> = Vec::new();
    for round in 0..rounds {
        let port = free_port();
        let mut b = start(&dbpath, port);
        let client = connect(port).await;
        let coll = client.database("load").collection::<Document>("c");
        coll.insert_one(doc! {"_id": format!("seed{round}")})
            .await
            .expect("seed");
        // A script that never ends, with no maxTimeMS.
        let runaway = coll.clone();
        tokio::spawn(async move {
            let _ = runaway.find_one(doc! {"$where": "while(true){}"}).await;
        });
        // Writers as fast as they go, with indexes to maintain.
        coll.create_index(mongodb::IndexModel::builder().keys(doc! {"k": 1}).build())
            .await
            .expect("index");
        let counts: Vec<_> = (0..4)
            .map(|_| std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0)))
            .collect();
        for (w, count) in counts.iter().enumerate() {
            let c = coll.clone();
            let count = count.clone();
            tokio::spawn(async move {
                let mut i = 0u64;
                loop {
                    let docs: Vec<Document> = (0..500)
                        .map(|j| doc! {"k": format!("{round:03}-{w}-{i:06}-{j:03}"), "v": "x".repeat(200)})
                        .collect();
                    if c.insert_many(docs).await.is_err() {
                        break;
                    }
                    i += 1;
                    count.store(i, std::sync::atomic::Ordering::SeqCst);
                }
            });
        }
        acked.push(counts);
        tokio::time::sleep(Duration::from_secs(3)).await;
        let pid = i32::try_from(b.0.id()).expect("pid");
        // SAFETY: signals our own child.
        assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
        let took = tokio::task::block_in_place(|| wait_exit(&mut b, Duration::from_secs(60)));
        let took = took.unwrap_or_else(|| panic!("round {round}: no exit 60 s after SIGTERM"));
        eprintln!("round {round}: exited {took:?} after SIGTERM");
        times.push(took);
    }
    eprintln!("shutdown times under load: {times:?}");
    let mut sorted = times.clone();
    sorted.sort();
    if let (Some(min), Some(max)) = (sorted.first(), sorted.last()) {
        eprintln!(
            "{} rounds: min {min:?}, median {:?}, max {max:?}",
            sorted.len(),
            sorted[sorted.len() / 2]
        );
    }
    // Every acknowledged write survived the restarts.
    let port = free_port();
    let mut b = start(&dbpath, port);
    let client = connect(port).await;
    let coll = client.database("load").collection::<Document>("c");
    for (round, counts) in acked.iter().enumerate() {
        let found = coll
            .find_one(doc! {"_id": format!("seed{round}")})
            .await
            .expect("find");
        assert!(found.is_some(), "seed{round} lost");
        for (w, count) in counts.iter().enumerate() {
            let n = count.load(std::sync::atomic::Ordering::SeqCst);
            let range = doc! {"k": {
                "$gte": format!("{round:03}-{w}-"),
                "$lt": format!("{round:03}-{w}-{n:06}"),
            }};
            let stored = coll.count_documents(range).await.expect("count");
            assert_eq!(
                stored,
                n * 500,
                "round {round}, writer {w}: {n} batches of 500 were acknowledged"
            );
        }
    }
    drop(client);
    let pid = i32::try_from(b.0.id()).expect("pid");
    // SAFETY: signals our own child.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    assert!(wait_exit(&mut b, Duration::from_secs(60)).is_some());
}
