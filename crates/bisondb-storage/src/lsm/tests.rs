//! The persistent engine against the shared contract, plus what only a
//! persistent engine has: reopen, dbpath ownership, group commit, crashes and
//! full disks.

use super::*;
use crate::catalog::Storage;
use crate::conformance;
use bson::oid::ObjectId;
use bson::{doc, rawdoc, RawDocument, RawDocumentBuf};
use proptest::prelude::*;
use std::sync::atomic::AtomicUsize;

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn open(dir: &Path) -> LsmEngine {
    LsmEngine::open(dir, LsmOptions::default()).unwrap_or_else(|e| panic!("open: {e}"))
}

fn open_storage(dir: &Path) -> Storage {
    let engine: Arc<dyn Engine> = Arc::new(open(dir));
    Storage::open(engine).unwrap_or_else(|e| panic!("storage open: {e}"))
}

/// Fresh engines in numbered sub-directories of one temporary directory that
/// outlives them all.
struct Factory {
    root: tempfile::TempDir,
    next: AtomicUsize,
}

impl Factory {
    fn new() -> Factory {
        Factory {
            root: tempdir(),
            next: AtomicUsize::new(0),
        }
    }

    fn make(&self) -> Arc<dyn Engine> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        Arc::new(open(&self.root.path().join(n.to_string())))
    }
}

#[test]
fn passes_engine_conformance() {
    let f = Factory::new();
    conformance::run_all(&|| f.make());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matches_btreemap_model(ops in conformance::proptest_ops()) {
        let f = Factory::new();
        conformance::check_against_model(&f.make(), &ops);
    }
}

fn put(engine: &dyn Engine, k: &[u8], v: &[u8], durability: Durability) {
    let mut b = WriteBatch::new();
    b.put(k.to_vec(), v.to_vec());
    assert!(engine.write(b, durability).is_ok(), "put {k:?}");
}

fn all(engine: &dyn Engine) -> Vec<KeyValue> {
    engine
        .snapshot()
        .scan(Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
        .unwrap_or_else(|e| panic!("scan: {e}"))
}

#[test]
fn data_survives_close_and_reopen() {
    let dir = tempdir();
    {
        let e = open(dir.path());
        put(&e, b"a", b"1", Durability::Buffered);
        put(&e, b"b", b"2", Durability::Sync);
        let mut b = WriteBatch::new();
        b.delete(b"a".to_vec());
        b.put(b"c".to_vec(), b"3".to_vec());
        assert!(e.write(b, Durability::Buffered).is_ok());
        assert!(e.close().is_ok());
        let mut b = WriteBatch::new();
        b.put(b"d".to_vec(), b"4".to_vec());
        assert!(e.write(b, Durability::Buffered).is_err(), "closed");
    }
    let e = open(dir.path());
    assert_eq!(
        all(&e),
        vec![
            (b"b".to_vec(), b"2".to_vec()),
            (b"c".to_vec(), b"3".to_vec())
        ]
    );
    assert!(e.size_on_disk() > 0);
}

#[test]
fn snapshot_outlives_engine_and_holds_the_files_until_dropped() {
    let dir = tempdir();
    let e = open(dir.path());
    put(&e, b"k", b"old", Durability::Buffered);
    let snap = e.snapshot();
    put(&e, b"k", b"new", Durability::Buffered);
    drop(e);
    assert_eq!(snap.get(b"k").ok().flatten(), Some(b"old".to_vec()));
    // The old instance is still open through the snapshot: a reopen must not
    // run a second instance on the same files.
    match LsmEngine::open(dir.path(), LsmOptions::default()) {
        Err(StorageError::DbPathInUse(msg)) => assert!(msg.contains("in use"), "{msg}"),
        other => panic!("expected DbPathInUse, got {other:?}"),
    }
    drop(snap);
    let e = open(dir.path());
    assert_eq!(e.snapshot().get(b"k").ok().flatten(), Some(b"new".to_vec()));
}

#[test]
fn second_open_of_a_dbpath_fails_naming_it() {
    let dir = tempdir();
    let _first = open(dir.path());
    match LsmEngine::open(dir.path(), LsmOptions::default()) {
        Err(e @ StorageError::DbPathInUse(_)) => {
            let msg = e.to_string();
            assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
            assert!(msg.contains(dbpath::LOCK_FILE), "{msg}");
        }
        other => panic!("expected DbPathInUse, got {other:?}"),
    }
}

#[test]
fn dbpath_of_another_engine_is_refused() {
    let dir = tempdir();
    assert!(dbpath::claim(dir.path(), "rocksdb").is_ok());
    match LsmEngine::open(dir.path(), LsmOptions::default()) {
        Err(e @ StorageError::EngineMismatch(_)) => {
            let msg = e.to_string();
            assert!(
                msg.contains("created by engine 'rocksdb'; start with --storageEngine rocksdb"),
                "{msg}"
            );
        }
        other => panic!("expected EngineMismatch, got {other:?}"),
    }
    assert!(
        !dir.path().join(DATA_DIR).exists(),
        "no lsm files are created in a foreign dbpath"
    );
    // And the other way round: an lsm dbpath refuses another engine's claim.
    let lsm_dir = tempdir();
    drop(open(lsm_dir.path()));
    assert!(matches!(
        dbpath::claim(lsm_dir.path(), "rocksdb"),
        Err(StorageError::EngineMismatch(_))
    ));
}

#[test]
fn journal_commit_interval_is_validated() {
    let cases = [
        (0u64, false),
        (1, true),
        (100, true),
        (500, true),
        (501, false),
    ];
    for (ms, ok) in cases {
        let got = LsmOptions::with_journal_commit_interval_ms(ms);
        assert_eq!(got.is_ok(), ok, "{ms}");
        if let Ok(o) = got {
            assert_eq!(o.journal_commit_interval, Duration::from_millis(ms));
        }
    }
    assert_eq!(
        LsmOptions::default().journal_commit_interval,
        Duration::from_millis(100)
    );
}

#[test]
fn last_op_per_key_keeps_order_and_the_last_write() {
    let p = |k: &str, v: &str| BatchOp::Put(k.into(), v.into());
    let d = |k: &str| BatchOp::Delete(k.into());
    let cases = vec![
        (vec![], vec![]),
        (vec![p("a", "1")], vec![p("a", "1")]),
        (
            vec![p("a", "1"), p("b", "2")],
            vec![p("a", "1"), p("b", "2")],
        ),
        (vec![p("a", "1"), d("a")], vec![d("a")]),
        (
            vec![p("k", "1"), d("k"), p("j", "x"), p("k", "2")],
            vec![p("j", "x"), p("k", "2")],
        ),
    ];
    for (input, want) in cases {
        assert_eq!(last_op_per_key(input.clone()), want, "{input:?}");
    }
}

#[test]
fn fjall_errors_map_to_storage_errors() {
    let full = fjall::Error::Io(std::io::Error::from_raw_os_error(28));
    assert_eq!(map_fjall(full, "write"), StorageError::Full);
    let nested = fjall::Error::Storage(fjall::LsmError::Io(std::io::Error::from_raw_os_error(28)));
    assert_eq!(map_fjall(nested, "flush"), StorageError::Full);
    assert!(matches!(
        map_fjall(fjall::Error::Io(std::io::Error::from_raw_os_error(5)), "write"),
        StorageError::Io(m) if m.contains("lsm write")
    ));
    assert!(matches!(
        map_fjall(fjall::Error::Poisoned, "write"),
        StorageError::Io(m) if m.contains("earlier I/O failure")
    ));
    assert!(matches!(
        map_fjall(fjall::Error::InvalidTrailer, "read"),
        StorageError::Corrupt(_)
    ));
}

fn profile(i: i64) -> RawDocumentBuf {
    rawdoc! {"_id": ObjectId::new(), "name": "Huidong Tian", "id": i}
}

#[test]
fn catalog_documents_options_and_counts_survive_reopen() {
    let dir = tempdir();
    let docs: Vec<RawDocumentBuf> = (0..300).map(profile).collect();
    let size: u64 = docs.iter().map(|d| d.as_bytes().len() as u64).sum();
    {
        let s = open_storage(dir.path());
        let c = s
            .create_collection("app", "people", doc! {"capped": false, "comment": "x"})
            .unwrap_or_else(|e| panic!("create: {e}"));
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        assert_eq!(
            c.insert_many(&refs, true, Durability::Buffered).inserted,
            300
        );
        assert!(s.create_collection("other", "empty", doc! {}).is_ok());
        let gone = s
            .create_collection("app", "gone", doc! {})
            .unwrap_or_else(|e| panic!("create: {e}"));
        assert_eq!(
            gone.insert_many(&[docs[0].as_ref()], true, Durability::Sync)
                .inserted,
            1
        );
        assert!(s.drop_collection("app", "gone").is_ok());
    }
    let s = open_storage(dir.path());
    assert_eq!(s.engine_name(), "lsm");
    assert_eq!(
        s.list_databases(),
        vec!["app".to_string(), "other".to_string()]
    );
    let infos = s.list_collections("app");
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].options, doc! {"capped": false, "comment": "x"});
    let c = s
        .collection("app", "people")
        .unwrap_or_else(|| panic!("people missing"));
    assert_eq!(c.count(), 300);
    assert_eq!(c.data_size(), size);
    let stored: Vec<RawDocumentBuf> = c.scan(false).filter_map(Result::ok).collect();
    let mut want = docs.clone();
    want.sort_by_key(|d| d.get_object_id("_id").ok());
    assert_eq!(stored, want, "documents come back in _id order");
    assert!(s.collection("other", "empty").is_some());
}

#[test]
fn concurrent_sync_writers_share_syncs_and_all_survive() {
    let dir = tempdir();
    const THREADS: usize = 8;
    const PER_THREAD: usize = 50;
    {
        let e = Arc::new(open(dir.path()));
        let handles: Vec<_> = (0..THREADS)
            .map(|t| {
                let e = e.clone();
                std::thread::spawn(move || {
                    (0..PER_THREAD)
                        .filter(|i| {
                            let mut b = WriteBatch::new();
                            b.put(format!("{t:02}-{i:03}").into_bytes(), vec![1]);
                            e.write(b, Durability::Sync).is_ok()
                        })
                        .count()
                })
            })
            .collect();
        let ok: usize = handles.into_iter().map(|h| h.join().unwrap_or(0)).sum();
        assert_eq!(ok, THREADS * PER_THREAD, "every Sync write succeeds");
        let st = e.shared.sync.lock().unwrap_or_else(|p| p.into_inner());
        assert!(
            st.started <= (THREADS * PER_THREAD) as u64 + 10,
            "never more syncs than writes (plus background ones): {}",
            st.started
        );
    }
    let e = open(dir.path());
    assert_eq!(all(&e).len(), THREADS * PER_THREAD);
}

#[test]
fn sync_without_new_commits_does_not_fsync() {
    let dir = tempdir();
    let e = open(dir.path());
    put(&e, b"a", b"1", Durability::Sync);
    let before = e.shared.sync.lock().map(|s| s.started).unwrap_or(0);
    for _ in 0..5 {
        assert!(e.sync().is_ok());
        assert!(e.write(WriteBatch::new(), Durability::Sync).is_ok());
    }
    let after = e.shared.sync.lock().map(|s| s.started).unwrap_or(0);
    assert_eq!(before, after, "nothing new to make durable");
}

#[test]
fn background_flusher_syncs_buffered_writes() {
    let dir = tempdir();
    let opts =
        LsmOptions::with_journal_commit_interval_ms(5).unwrap_or_else(|e| panic!("options: {e}"));
    let e = LsmEngine::open(dir.path(), opts).unwrap_or_else(|e| panic!("open: {e}"));
    put(&e, b"a", b"1", Durability::Buffered);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while e.shared.durable_commits.load(Ordering::Acquire) < 1 {
        assert!(std::time::Instant::now() < deadline, "no background sync");
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(e.shared.durable_commits.load(Ordering::Acquire) >= 1);
}
