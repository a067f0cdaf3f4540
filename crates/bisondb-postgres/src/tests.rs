//! The engine against the contract: `bisondb_engine::conformance` (the
//! scenarios, the seeded model runs and proptest's) on a private PostgreSQL
//! cluster, each engine in a fresh schema; and what is particular to a store
//! shared by several processes (two engines over one store, the format check,
//! long scans in pages).

use std::ops::Bound;
use std::sync::Arc;

use bisondb_engine::conformance;
use bisondb_engine::{Durability, Engine, EngineError, WriteBatch};
use proptest::prelude::*;

use crate::testing::TestCluster;
use crate::PostgresEngine;

/// An engine on an empty schema of `cluster`. Its pool is larger than the
/// model runs' held snapshots (about 30), as each open snapshot holds a
/// connection.
fn fresh(cluster: &TestCluster) -> Arc<dyn Engine> {
    let uri = cluster.fresh_schema_uri();
    Arc::new(PostgresEngine::open(&uri, 64).unwrap_or_else(|e| panic!("open: {e}")))
}

#[test]
fn passes_engine_conformance() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    conformance::run_all(&|| fresh(&cluster));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn matches_btreemap_model(ops in conformance::proptest_ops()) {
        if let Some(cluster) = TestCluster::shared() {
            conformance::check_against_model(&fresh(&cluster), &ops);
        }
    }
}

/// Two engines over one store (two servers): each sees the other's commits,
/// and their transactions conflict through the store.
#[test]
fn two_engines_share_one_store() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let open = || PostgresEngine::open(&uri, 4).unwrap_or_else(|e| panic!("open: {e}"));
    let (a, b) = (open(), open());
    let mut batch = WriteBatch::new();
    batch.put(b"k".to_vec(), b"from a".to_vec());
    a.write(batch, Durability::Sync)
        .unwrap_or_else(|e| panic!("{e}"));
    let seen = b.snapshot().and_then(|s| s.get(b"k"));
    assert_eq!(seen, Ok(Some(b"from a".to_vec())));
    let mut first = a.begin().unwrap_or_else(|e| panic!("{e}"));
    let mut second = b.begin().unwrap_or_else(|e| panic!("{e}"));
    assert!(first.put(b"k".to_vec(), b"1".to_vec()).is_ok());
    assert!(matches!(
        second.put(b"k".to_vec(), b"2".to_vec()),
        Err(EngineError::WriteConflict(_))
    ));
    assert!(first.commit(Durability::Sync).is_ok());
    drop(second);
    let seen = b.snapshot().and_then(|s| s.get(b"k"));
    assert_eq!(seen, Ok(Some(b"1".to_vec())));
}

/// Two servers that both read a key absent and then commit a batch setting
/// it: the store lets exactly one commit (the other is WriteConflict,
/// applying nothing of its batch), whether the winner committed before the
/// loser wrote or still held the row.
#[test]
fn racing_batches_through_transactions_let_one_win() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let open = || PostgresEngine::open(&uri, 4).unwrap_or_else(|e| panic!("open: {e}"));
    let (a, b) = (open(), open());
    let batch = |v: &[u8]| {
        let mut batch = WriteBatch::new();
        batch.put(b"new".to_vec(), v.to_vec());
        batch.put(b"other".to_vec(), v.to_vec());
        batch
    };
    let first = a.begin().unwrap_or_else(|e| panic!("{e}"));
    let second = b.begin().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(first.get(b"new").ok(), Some(None));
    assert_eq!(second.get(b"new").ok(), Some(None));
    assert!(first.commit_batch(batch(b"a"), Durability::Sync).is_ok());
    assert!(matches!(
        second.commit_batch(batch(b"b"), Durability::Sync),
        Err(EngineError::WriteConflict(_))
    ));
    let snap = b.snapshot().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(snap.get(b"new"), Ok(Some(b"a".to_vec())));
    assert_eq!(snap.get(b"other"), Ok(Some(b"a".to_vec())));
}

/// A scan longer than a page comes back whole and in order, both ways.
#[test]
fn long_scans_read_page_by_page() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let engine = fresh(&cluster);
    let n: u32 = 2_500;
    let mut batch = WriteBatch::new();
    for i in 0..n {
        batch.put(i.to_be_bytes().to_vec(), vec![1]);
    }
    engine
        .write(batch, Durability::Buffered)
        .unwrap_or_else(|e| panic!("{e}"));
    let snapshot = engine.snapshot().unwrap_or_else(|e| panic!("{e}"));
    for reverse in [false, true] {
        let keys: Vec<u32> = snapshot
            .scan(Bound::Unbounded, Bound::Unbounded, reverse, usize::MAX)
            .unwrap_or_else(|e| panic!("{e}"))
            .into_iter()
            .map(|(k, _)| u32::from_be_bytes([k[0], k[1], k[2], k[3]]))
            .collect();
        let mut want: Vec<u32> = (0..n).collect();
        if reverse {
            want.reverse();
        }
        assert_eq!(keys, want, "reverse={reverse}");
    }
    let some = snapshot
        .scan(
            Bound::Excluded(&5u32.to_be_bytes()),
            Bound::Unbounded,
            false,
            1_500,
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(some.len(), 1_500);
    assert_eq!(some[0].0, 6u32.to_be_bytes().to_vec());
}

/// A store recorded in another format is refused with a message saying so.
#[test]
fn refuses_a_store_of_another_format() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    drop(PostgresEngine::open(&uri, 2).unwrap_or_else(|e| panic!("open: {e}")));
    let schema = uri.rsplit("%3D").next().unwrap_or_default();
    cluster.execute(&format!(
        "UPDATE {schema}.bisondb_meta SET value = '999' WHERE name = 'format'"
    ));
    match PostgresEngine::open(&uri, 2) {
        Err(EngineError::EngineMismatch(m)) => assert!(m.contains("store format 999"), "{m}"),
        Err(e) => panic!("{e}"),
        Ok(_) => panic!("opened a store of another format"),
    }
}

/// What cannot be honoured is refused when the engine opens.
#[test]
fn refuses_what_it_does_not_implement() {
    // libpq TLS settings the engine does not implement, or cannot use
    // (the TLS tests have the rest: `tls::unit`, `tls_tests`).
    for uri in [
        "postgresql://u@127.0.0.1:1/db?sslmode=allow",
        "postgresql://u@127.0.0.1:1/db?sslmode=require&sslcrl=/crl.pem",
        "postgresql://u@127.0.0.1:1/db?sslmode=verify-full",
    ] {
        assert!(
            matches!(
                PostgresEngine::open(uri, 4),
                Err(EngineError::InvalidArgument(_))
            ),
            "{uri}"
        );
    }
    assert!(matches!(
        PostgresEngine::open("not a uri at all://", 4),
        Err(EngineError::InvalidArgument(_))
    ));
    assert!(matches!(
        PostgresEngine::open("postgresql://u@127.0.0.1:1/db", 0),
        Err(EngineError::InvalidArgument(_))
    ));
}

/// Many calls from inside a task of another tokio runtime, as a command runs
/// on a current-thread runtime (the server's tests): each call once spent
/// that task's cooperative budget waiting on a `JoinHandle`, and the 129th
/// never returned (tokio deferred its wake-up to the blocked thread).
#[test]
fn many_calls_from_inside_another_runtime_return() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let engine = fresh(&cluster);
    let mut batch = WriteBatch::new();
    batch.put(b"k".to_vec(), b"v".to_vec());
    engine
        .write(batch, Durability::Sync)
        .unwrap_or_else(|e| panic!("{e}"));
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        runtime.block_on(async move {
            let task = tokio::spawn(async move {
                let snapshot = engine.snapshot().unwrap_or_else(|e| panic!("{e}"));
                for _ in 0..500 {
                    assert_eq!(snapshot.get(b"k"), Ok(Some(b"v".to_vec())));
                }
            });
            let _ = done_tx.send(task.await.is_ok());
        });
    });
    let finished = done_rx.recv_timeout(std::time::Duration::from_secs(120));
    assert_eq!(finished, Ok(true), "500 calls from inside a runtime's task");
}

/// A write whose connection the store ends mid-statement (as a failover
/// does) fails with a retryable error and moves the generation on: its
/// commit may have reached the promoted standby, so the layers above must
/// read their cached counts again. A write that succeeds, and a conflict
/// the store reported (rolled back), leave the generation alone.
#[test]
fn a_write_of_unknown_outcome_moves_the_generation() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    // Its own application name: only this test's backends are ended.
    let name = "bisondb_unknown_outcome";
    let uri = format!("{}&application_name={name}", cluster.fresh_schema_uri());
    let engine = Arc::new(PostgresEngine::open(&uri, 4).unwrap_or_else(|e| panic!("open: {e}")));
    let put = |value: &[u8]| {
        let mut batch = WriteBatch::new();
        batch.put(b"k".to_vec(), value.to_vec());
        batch
    };
    engine
        .write(put(b"0"), Durability::Sync)
        .unwrap_or_else(|e| panic!("{e}"));
    let start = engine.generation();

    // A transaction holds the key: a second one conflicts (rolled back by
    // the store, outcome known) and a plain write waits for the lock.
    let mut holder = engine.begin().unwrap_or_else(|e| panic!("{e}"));
    holder
        .put(b"k".to_vec(), b"held".to_vec())
        .unwrap_or_else(|e| panic!("{e}"));
    let mut loser = engine.begin().unwrap_or_else(|e| panic!("{e}"));
    assert!(matches!(
        loser.put(b"k".to_vec(), b"2".to_vec()),
        Err(EngineError::WriteConflict(_))
    ));
    drop(loser);
    assert_eq!(engine.generation(), start, "a conflict's outcome is known");

    let writer = engine.clone();
    let (done_tx, done_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = done_tx.send(writer.write(put(b"1"), Durability::Sync));
    });
    // End the waiting backend, as a primary's death or demotion does.
    let mut outcome = None;
    for _ in 0..300 {
        cluster.execute(&format!(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
             WHERE application_name = '{name}' AND wait_event_type = 'Lock'"
        ));
        if let Ok(o) = done_rx.recv_timeout(std::time::Duration::from_millis(100)) {
            outcome = Some(o);
            break;
        }
    }
    match outcome {
        Some(Err(EngineError::Unavailable { .. })) => {}
        other => panic!("the ended write returned {other:?}"),
    }
    assert!(
        engine.generation() > start,
        "a write whose connection was lost left the generation at {start}"
    );
    drop(holder);
    let moved = engine.generation();
    engine
        .write(put(b"3"), Durability::Sync)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        engine.generation(),
        moved,
        "a committed write's outcome is known"
    );
}

/// A batch's keys sorted into what is upserted, what may be copied in (keys
/// the writer found absent, written by nothing else in the batch) and what
/// is removed, each once, with its last value.
#[test]
fn final_state_keeps_new_keys_apart() {
    let mut batch = WriteBatch::new();
    batch.insert(b"n1".to_vec(), b"a".to_vec());
    batch.put(b"p".to_vec(), b"b".to_vec());
    batch.delete(b"d".to_vec());
    batch.insert(b"d".to_vec(), b"after delete".to_vec());
    batch.put(b"x".to_vec(), b"1".to_vec());
    batch.insert(b"x".to_vec(), b"2".to_vec());
    batch.insert(b"n0".to_vec(), b"c".to_vec());
    batch.insert(b"gone".to_vec(), b"e".to_vec());
    batch.delete(b"gone".to_vec());
    let state = crate::engine::final_state(batch);
    assert_eq!(state.new_keys, vec![b"n0".to_vec(), b"n1".to_vec()]);
    assert_eq!(state.new_values, vec![b"c".to_vec(), b"a".to_vec()]);
    assert_eq!(
        state.keys,
        vec![b"d".to_vec(), b"p".to_vec(), b"x".to_vec()]
    );
    assert_eq!(
        state.values,
        vec![b"after delete".to_vec(), b"b".to_vec(), b"2".to_vec()]
    );
    assert_eq!(state.gone, vec![b"gone".to_vec()]);
    // Upserted together (a plain batch, or too few to copy): in key order.
    let (keys, values, _) = state.all_upserts();
    let names: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    assert_eq!(names, [&b"d"[..], b"n0", b"n1", b"p", b"x"]);
    assert_eq!(values[1], b"c".to_vec());
}
