//! The persistent engine against the shared contract, plus what only a
//! persistent engine has: reopen, dbpath ownership, group commit, crashes and
//! full disks.

use super::*;
use crate::catalog::Storage;
use crate::error::StorageError;
use crate::testing::retry_in_use;
use bisondb_engine::conformance;
use bson::oid::ObjectId;
use bson::{doc, rawdoc, RawDocument, RawDocumentBuf};
use proptest::prelude::*;
use std::sync::atomic::AtomicUsize;

/// The store's key regions, as it hands them to the engine (stats records
/// from 0x02, index entries 0x03, buffered); restated here so that these
/// tests exercise the engine as the store opens it without reading its layout.
const INDEX_REGION: u8 = 0x03;
const REGIONS: KeyRegions = KeyRegions {
    apart: 0x02..0x04,
    buffered: Some(INDEX_REGION),
};

/// Default options with the store's key regions.
fn options() -> LsmOptions {
    LsmOptions {
        regions: REGIONS,
        ..LsmOptions::default()
    }
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn open(dir: &Path) -> LsmEngine {
    retry_in_use(|| LsmEngine::open(dir, options())).unwrap_or_else(|e| panic!("open: {e}"))
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
    options: LsmOptions,
}

impl Factory {
    fn new() -> Factory {
        Factory::with(options())
    }

    fn with(options: LsmOptions) -> Factory {
        Factory {
            root: tempdir(),
            next: AtomicUsize::new(0),
            options,
        }
    }

    fn make(&self) -> Arc<dyn Engine> {
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        let dir = self.root.path().join(n.to_string());
        Arc::new(
            retry_in_use(|| LsmEngine::open(&dir, self.options.clone()))
                .unwrap_or_else(|e| panic!("open: {e}")),
        )
    }
}

/// Options whose index write buffer ingests after a few hundred bytes, so runs
/// are merged and ingested while the tests read.
fn tiny_buffer() -> LsmOptions {
    LsmOptions {
        index_buffer_bytes: 300,
        ..options()
    }
}

#[test]
fn passes_engine_conformance() {
    let f = Factory::new();
    conformance::run_all(&|| f.make());
}

#[test]
fn passes_engine_conformance_through_a_tiny_index_buffer() {
    let f = Factory::with(tiny_buffer());
    conformance::run_all(&|| f.make());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn matches_btreemap_model(ops in conformance::proptest_ops()) {
        let f = Factory::new();
        conformance::check_against_model(&f.make(), &ops);
    }

    #[test]
    fn matches_btreemap_model_through_a_tiny_index_buffer(ops in conformance::proptest_ops()) {
        let f = Factory::with(tiny_buffer());
        conformance::check_against_model(&f.make(), &ops);
    }
}

/// A batch's document and index entry are seen together or not at all, by
/// snapshots taken while runs are merged, ingested and dropped underneath, and
/// everything survives a reopen with nothing left in the buffer.
#[test]
fn snapshots_see_documents_and_index_entries_together_during_ingestion() {
    let dir = tempdir();
    let e = Arc::new(
        LsmEngine::open(dir.path(), tiny_buffer()).unwrap_or_else(|e| panic!("open: {e}")),
    );
    let doc = |i: u32| [&[0x01u8][..], &i.to_be_bytes()].concat();
    // Index keys in scrambled order, as real ones arrive.
    let ix = |i: u32| {
        [
            &[INDEX_REGION][..],
            &i.wrapping_mul(2_654_435_761).to_be_bytes(),
        ]
        .concat()
    };
    const N: u32 = 3000;
    let writer = {
        let e = e.clone();
        std::thread::spawn(move || {
            for i in 0..N {
                let mut b = WriteBatch::new();
                b.put(doc(i), b"d".to_vec());
                b.put(ix(i), i.to_be_bytes().to_vec());
                if i % 3 == 0 && i > 0 {
                    // Replace an older entry: delete it and write it anew.
                    b.delete(ix(i - 1));
                    b.put(ix(i - 1), (i - 1).to_be_bytes().to_vec());
                }
                e.write(b, Durability::Buffered)
                    .unwrap_or_else(|err| panic!("write {i}: {err}"));
            }
        })
    };
    let check = |s: &Arc<dyn Snapshot>| -> usize {
        let docs = s
            .scan(
                Bound::Included(&[0x01]),
                Bound::Excluded(&[0x02]),
                false,
                usize::MAX,
            )
            .unwrap_or_else(|err| panic!("scan docs: {err}"));
        let ixs = s
            .scan(
                Bound::Included(&[INDEX_REGION]),
                Bound::Excluded(&[INDEX_REGION + 1]),
                false,
                usize::MAX,
            )
            .unwrap_or_else(|err| panic!("scan index: {err}"));
        assert_eq!(docs.len(), ixs.len(), "documents and index entries in step");
        for w in ixs.windows(2) {
            assert!(w[0].0 < w[1].0, "index keys ascend");
        }
        for (k, v) in &ixs {
            let i = u32::from_be_bytes(v.as_slice().try_into().unwrap_or_else(|_| panic!("value")));
            assert_eq!(k, &ix(i));
            assert_eq!(s.get(&doc(i)).ok(), Some(Some(b"d".to_vec())));
            assert_eq!(s.get(k).ok(), Some(Some(v.clone())));
        }
        // Backwards, in chunks, the same entries.
        let mut back = Vec::new();
        let mut end = Bound::Excluded(vec![INDEX_REGION + 1]);
        loop {
            let chunk = s
                .scan(
                    Bound::Included(&[INDEX_REGION]),
                    end.as_ref().map(|k| k.as_slice()),
                    true,
                    7,
                )
                .unwrap_or_else(|err| panic!("reverse scan: {err}"));
            let Some(last) = chunk.last() else { break };
            end = Bound::Excluded(last.0.clone());
            back.extend(chunk);
        }
        back.reverse();
        assert_eq!(back, ixs);
        ixs.len()
    };
    let mut seen = 0;
    while !writer.is_finished() {
        let n = check(&e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}")));
        assert!(n >= seen, "entries never disappear: {seen} -> {n}");
        seen = n;
    }
    writer.join().unwrap_or_else(|_| panic!("writer panicked"));
    assert_eq!(
        check(&e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"))),
        N as usize
    );
    let o = e
        .shared
        .current()
        .unwrap_or_else(|err| panic!("current: {err}"));
    assert!(
        o.ix.len().unwrap_or(0) > 0,
        "the tiny buffer ingested into index tables"
    );
    drop(o);
    assert!(e.close().is_ok());
    drop(e);
    let e = open(dir.path());
    let o = e
        .shared
        .current()
        .unwrap_or_else(|err| panic!("current: {err}"));
    assert_eq!(o.wb.len().ok(), Some(0), "a clean close leaves no blobs");
    assert_eq!(o.buffered().1, 0);
    drop(o);
    let s = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(check(&s), N as usize);
}

fn put(engine: &dyn Engine, k: &[u8], v: &[u8], durability: Durability) {
    let mut b = WriteBatch::new();
    b.put(k.to_vec(), v.to_vec());
    assert!(engine.write(b, durability).is_ok(), "put {k:?}");
}

fn all(engine: &dyn Engine) -> Vec<KeyValue> {
    engine
        .snapshot()
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
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
        assert!(
            matches!(e.snapshot(), Err(EngineError::Io(ref m)) if m.contains("closed")),
            "a closed engine refuses snapshots rather than reading empty"
        );
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

/// Bytes of fjall's journal files in `dir`, by their length (a preallocated
/// journal is 64 MiB long however little it holds).
fn journal_bytes(dir: &Path) -> u64 {
    std::fs::read_dir(dir.join(DATA_DIR))
        .unwrap_or_else(|e| panic!("read_dir: {e}"))
        .filter_map(Result::ok)
        .filter(|e| is_journal(&e.path()))
        .map(|e| e.metadata().map(|m| m.len()).unwrap_or(0))
        .sum()
}

/// A clean close has written everything into tables, so it leaves no journal
/// behind; the next open still numbers its writes after the tables' (a
/// write after the reopen must win over the value flushed before it).
#[test]
fn clean_close_leaves_no_journal_and_later_writes_still_win() {
    let dir = tempdir();
    let key = |i: u32| format!("k{i:06}").into_bytes();
    let index_key = |i: u32| [&[INDEX_REGION][..], &i.to_be_bytes()].concat();
    {
        let e = open(dir.path());
        for chunk in 0..20u32 {
            let mut b = WriteBatch::new();
            for i in chunk * 100..(chunk + 1) * 100 {
                b.put(key(i), b"first".to_vec());
                b.put(index_key(i), b"ix".to_vec());
            }
            assert!(e.write(b, Durability::Buffered).is_ok());
        }
        assert!(journal_bytes(dir.path()) > 0, "the writes are journaled");
        assert!(e.close().is_ok());
        assert_eq!(
            journal_bytes(dir.path()),
            0,
            "a clean close empties the journal"
        );
    }
    for round in ["second", "third"] {
        let e = open(dir.path());
        let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
        let previous = if round == "second" { "first" } else { "second" };
        assert_eq!(
            snap.get(&key(7)).ok().flatten(),
            Some(previous.as_bytes().to_vec())
        );
        assert_eq!(
            snap.get(&index_key(1999)).ok().flatten(),
            Some(b"ix".to_vec())
        );
        drop(snap);
        assert_eq!(all(&e).len(), 4000);
        put(&e, &key(7), round.as_bytes(), Durability::Sync);
        let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
        assert_eq!(
            snap.get(&key(7)).ok().flatten(),
            Some(round.as_bytes().to_vec())
        );
        drop(snap);
        assert!(e.close().is_ok());
        assert_eq!(
            journal_bytes(dir.path()),
            0,
            "{round}: no journal after close"
        );
    }
    let e = open(dir.path());
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(snap.get(&key(7)).ok().flatten(), Some(b"third".to_vec()));
}

/// The engine's figures move with writes and syncs, and what only the
/// memtables hold counts as unflushed until a checkpoint writes it out.
#[test]
fn metrics_and_unflushed_bytes_follow_writes_and_checkpoints() {
    let dir = tempdir();
    let e = open(dir.path());
    let figure = |e: &LsmEngine, name: &str| {
        e.metrics()
            .iter()
            .find(|m| m.name == name)
            .map(|m| m.value)
            .unwrap_or_else(|| panic!("no figure {name}"))
    };
    let commits = figure(&e, "journal.commits");
    let syncs = figure(&e, "journal.syncs");
    for i in 0..200u32 {
        put(
            &e,
            format!("k{i:05}").as_bytes(),
            &[7u8; 100],
            Durability::Buffered,
        );
    }
    put(&e, b"last", b"v", Durability::Sync);
    assert_eq!(figure(&e, "journal.commits"), commits + 201);
    assert!(figure(&e, "journal.syncs") > syncs);
    assert!(figure(&e, "memtables.bytes") > 20_000);
    assert!(e.unflushed_bytes() > 20_000);
    assert!(figure(&e, "journal.bytes") > 0);
    assert!(e.metrics().iter().all(|m| !m.help.is_empty()));
    assert!(e.checkpoint().is_ok());
    // fjall's worker lowers its write-buffer figure when it finishes a
    // flush's bookkeeping, which may come just after the checkpoint returns
    // on a busy machine: wait for it (bounded), never for a duration.
    let give_up = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while e.unflushed_bytes() != 0 && std::time::Instant::now() < give_up {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    assert_eq!(e.unflushed_bytes(), 0);
    assert!(figure(&e, "main.tables") >= 1);
    assert!(figure(&e, "main.diskBytes") > 0);
}

/// A close that cannot drop the files (a snapshot still reads them) keeps the
/// journal: it is replayed at the next open.
#[test]
fn close_under_a_live_snapshot_keeps_the_journal() {
    let dir = tempdir();
    let e = open(dir.path());
    put(&e, b"k", b"v", Durability::Buffered);
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert!(e.close().is_ok());
    assert!(journal_bytes(dir.path()) > 0);
    drop(snap);
    drop(e);
    let e = open(dir.path());
    assert_eq!(all(&e), vec![(b"k".to_vec(), b"v".to_vec())]);
}

/// Index entries and stats records go to their own keyspace; a dbpath written
/// before that split (keys in `main`) has them moved on open, and reads see one
/// key space.
#[test]
fn index_region_lives_in_its_own_keyspace_and_old_layouts_are_moved() {
    let dir = tempdir();
    let index_key = |n: u8| vec![INDEX_REGION, 0, n];
    let stats_key = |n: u8| vec![REGIONS.apart.start, 0, n];
    {
        let e = open(dir.path());
        put(&e, b"\x01doc", b"d", Durability::Buffered);
        put(&e, &index_key(1), b"new", Durability::Buffered);
        put(&e, &stats_key(1), b"s1", Durability::Buffered);
        put(&e, b"\x04marker", b"m", Durability::Buffered);
        let open = e
            .shared
            .current()
            .unwrap_or_else(|e| panic!("current: {e}"));
        // Index entries wait in the write buffer (readable) until ingested.
        assert!(matches!(open.ix.get(prefixed(&index_key(1))), Ok(None)));
        assert_eq!(
            e.snapshot()
                .unwrap_or_else(|e| panic!("snapshot: {e}"))
                .get(&index_key(1))
                .ok(),
            Some(Some(b"new".to_vec()))
        );
        assert_eq!(open.wb.len().ok(), Some(1), "one journaled blob");
        assert!(open.flush_buffer().is_ok());
        assert_eq!(open.wb.len().ok(), Some(0), "blob deleted once ingested");
        for key in [index_key(1), stats_key(1)] {
            let stored = prefixed(&key);
            assert!(
                matches!(open.ix.get(&stored), Ok(Some(_))),
                "{key:?} in the index keyspace"
            );
            assert!(matches!(open.ks.get(&stored), Ok(None)), "not in main");
        }
        assert!(matches!(open.ks.get(prefixed(b"\x01doc")), Ok(Some(_))));
        // What an older version wrote: index entries and stats in `main`.
        for n in 2..=4u8 {
            assert!(open
                .ks
                .insert(prefixed(&index_key(n)), b"old".to_vec())
                .is_ok());
        }
        assert!(open
            .ks
            .insert(prefixed(&stats_key(2)), b"s2".to_vec())
            .is_ok());
        drop(open);
        assert!(e.close().is_ok());
    }
    let e = open(dir.path());
    let keys: Vec<Vec<u8>> = all(&e).into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        keys,
        vec![
            b"\x01doc".to_vec(),
            stats_key(1),
            stats_key(2),
            index_key(1),
            index_key(2),
            index_key(3),
            index_key(4),
            b"\x04marker".to_vec()
        ]
    );
    let open = e
        .shared
        .current()
        .unwrap_or_else(|e| panic!("current: {e}"));
    let (lo, hi) = apart_bounds(&REGIONS);
    assert_eq!(
        open.ks.range::<Vec<u8>, _>(lo.clone()..hi.clone()).count(),
        0,
        "main holds no entries"
    );
    assert_eq!(open.ix.range::<Vec<u8>, _>(lo..hi).count(), 6);
    // Reverse scans with limits cross the region boundaries in order too.
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    let last_three = snap
        .scan(Bound::Unbounded, Bound::Unbounded, true, 3)
        .unwrap_or_else(|e| panic!("scan: {e}"));
    let last_keys: Vec<Vec<u8>> = last_three.into_iter().map(|(k, _)| k).collect();
    assert_eq!(
        last_keys,
        vec![b"\x04marker".to_vec(), index_key(4), index_key(3)]
    );
}

/// The filter bytes of `open`'s main and index keyspaces' tables.
fn filter_sizes(open: &Open) -> (u64, u64) {
    (open.ks.tree.filter_size(), open.ix.tree.filter_size())
}

#[test]
fn main_keyspace_has_no_bloom_filters_and_older_dbpaths_keep_theirs() {
    let fill = |e: &LsmEngine, from: u8| {
        for n in from..from + 50 {
            put(e, &[0x01, 0, n], b"doc", Durability::Buffered);
            put(e, &[INDEX_REGION, 0, n], b"rid", Durability::Buffered);
        }
        let open = e
            .shared
            .current()
            .unwrap_or_else(|e| panic!("current: {e}"));
        assert!(open.flush_buffer().is_ok());
        assert!(open.flush_memtables().is_ok());
        open
    };
    // A new dbpath: documents' tables carry no filter, index tables do, and
    // point reads that miss in main still answer nothing.
    let dir = tempdir();
    let e = open(dir.path());
    let current = fill(&e, 0);
    let (main, index) = filter_sizes(&current);
    assert_eq!(main, 0, "main's tables have no bloom filter");
    assert!(index > 0, "the index keyspace keeps its filters");
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for n in [0u8, 17, 49] {
        assert_eq!(snap.get(&[0x01, 0, n]).ok(), Some(Some(b"doc".to_vec())));
    }
    for absent in [&[0x01, 0, 200][..], &[0x01, 1], &[0x01], &[0x00, 5]] {
        assert_eq!(snap.get(absent).ok(), Some(None), "{absent:?}");
    }
    drop((snap, current));
    assert!(e.close().is_ok());
    // A dbpath whose main keyspace was created with filters (here by the
    // engine without regions kept apart, as every keyspace was before) keeps
    // them when opened with the store's regions.
    let old = tempdir();
    {
        let plain = retry_in_use(|| LsmEngine::open(old.path(), LsmOptions::default()))
            .unwrap_or_else(|e| panic!("open: {e}"));
        put(&plain, &[0x01, 0, 0], b"doc", Durability::Buffered);
        assert!(plain.close().is_ok());
    }
    let e = open(old.path());
    let current = fill(&e, 1);
    assert!(
        filter_sizes(&current).0 > 0,
        "the older main keyspace keeps its filter policy"
    );
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(snap.get(&[0x01, 0, 0]).ok(), Some(Some(b"doc".to_vec())));
    assert_eq!(snap.get(&[0x01, 0, 200]).ok(), Some(None));
}

#[test]
fn snapshot_outlives_engine_and_holds_the_files_until_dropped() {
    let dir = tempdir();
    let e = open(dir.path());
    put(&e, b"k", b"old", Durability::Buffered);
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    put(&e, b"k", b"new", Durability::Buffered);
    drop(e);
    assert_eq!(snap.get(b"k").ok().flatten(), Some(b"old".to_vec()));
    // The old instance is still open through the snapshot: a reopen must not
    // run a second instance on the same files.
    match LsmEngine::open(dir.path(), options()) {
        Err(EngineError::DbPathInUse(msg)) => assert!(msg.contains("in use"), "{msg}"),
        other => panic!("expected DbPathInUse, got {other:?}"),
    }
    drop(snap);
    let e = open(dir.path());
    assert_eq!(
        e.snapshot()
            .unwrap_or_else(|e| panic!("snapshot: {e}"))
            .get(b"k")
            .ok()
            .flatten(),
        Some(b"new".to_vec())
    );
}

#[test]
fn second_open_of_a_dbpath_fails_naming_it() {
    let dir = tempdir();
    let _first = open(dir.path());
    match LsmEngine::open(dir.path(), options()) {
        Err(e @ EngineError::DbPathInUse(_)) => {
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
    match LsmEngine::open(dir.path(), options()) {
        Err(e @ EngineError::EngineMismatch(_)) => {
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
    let claimed = retry_in_use(|| dbpath::claim(lsm_dir.path(), "rocksdb"));
    assert!(
        matches!(claimed, Err(EngineError::EngineMismatch(_))),
        "{:?}",
        claimed.err()
    );
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
fn batches_are_sorted_keeping_the_last_write_per_key() {
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
        (
            vec![p("b", "1"), p("a", "1"), p("b", "2"), d("c"), p("a", "2")],
            vec![p("a", "2"), p("b", "2"), d("c")],
        ),
        // An insert's interleaved regions, each increasing, with an empty key
        // and a later write to an earlier key of one region.
        (
            vec![
                p("\u{3}x1", "1"),
                p("\u{1}r1", "d"),
                p("\u{3}x2", "2"),
                p("\u{1}r2", "e"),
                d("\u{3}x1"),
                p("", "z"),
                p("\u{2}i", "i"),
            ],
            vec![
                p("", "z"),
                p("\u{1}r1", "d"),
                p("\u{1}r2", "e"),
                p("\u{2}i", "i"),
                d("\u{3}x1"),
                p("\u{3}x2", "2"),
            ],
        ),
    ];
    for (input, want) in cases {
        assert_eq!(sorted_last_op_per_key(input.clone()), want, "{input:?}");
    }
    // Big enough to be split by region: an insert of 30 documents (record,
    // `_id` entry, index entry in decreasing order), then rewrites of some
    // keys, against a plain stable sort.
    let mut big = Vec::new();
    for i in 0..30u8 {
        big.push(BatchOp::Put(vec![1, i], vec![i]));
        big.push(BatchOp::Put(vec![3, 0, i], vec![i]));
        big.push(BatchOp::Put(vec![3, 1, 99 - i], vec![i]));
    }
    big.push(BatchOp::Delete(vec![1, 4]));
    big.push(BatchOp::Put(vec![3, 0, 7], b"new".to_vec()));
    big.push(BatchOp::Put(vec![], vec![]));
    let mut want = big.clone();
    want.sort_by(|a, b| a.key().cmp(b.key()));
    let mut dedup: Vec<BatchOp> = Vec::new();
    for op in want {
        if dedup.last().is_some_and(|l| l.key() == op.key()) {
            dedup.pop();
        }
        dedup.push(op);
    }
    assert_eq!(dedup.len(), 91);
    assert_eq!(sorted_last_op_per_key(big), dedup);
}

#[test]
fn fjall_errors_map_to_storage_errors() {
    let full = fjall::Error::Io(std::io::Error::from_raw_os_error(28));
    assert_eq!(map_fjall(full, "write"), EngineError::Full);
    let nested = fjall::Error::Storage(fjall::LsmError::Io(std::io::Error::from_raw_os_error(28)));
    assert_eq!(map_fjall(nested, "flush"), EngineError::Full);
    assert!(matches!(
        map_fjall(fjall::Error::Io(std::io::Error::from_raw_os_error(5)), "write"),
        EngineError::Io(m) if m.contains("lsm write")
    ));
    assert!(matches!(
        map_fjall(fjall::Error::Poisoned, "write"),
        EngineError::Io(m) if m.contains("earlier I/O failure")
    ));
    assert!(matches!(
        map_fjall(fjall::Error::InvalidTrailer, "read"),
        EngineError::Corrupt(_)
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

/// Set in the environment of the crash-test child: `<dbpath>|<sync|buffered>|<round>`.
const CRASH_CHILD_ENV: &str = "BISONDB_LSM_CRASH_CHILD";

/// The child side of the crash tests: inserts from several threads and prints
/// `ACK <_id>` for every insert acknowledged, until it is killed. Ignored in
/// normal runs; without the variable it does nothing.
#[test]
#[ignore = "child process of the crash tests; only runs when spawned by them"]
fn crash_child() {
    let Ok(spec) = std::env::var(CRASH_CHILD_ENV) else {
        return;
    };
    let mut parts = spec.split('|');
    let (Some(dir), Some(mode), Some(round)) = (parts.next(), parts.next(), parts.next()) else {
        panic!("bad {CRASH_CHILD_ENV}: {spec}");
    };
    let durability = if mode == "sync" {
        Durability::Sync
    } else {
        Durability::Buffered
    };
    // A small index write buffer, so kills also land mid-ingestion.
    let options = LsmOptions {
        index_buffer_bytes: 16 << 10,
        ..options()
    };
    let engine = LsmEngine::open(Path::new(dir), options).unwrap_or_else(|e| panic!("open: {e}"));
    let s = Storage::open(Arc::new(engine)).unwrap_or_else(|e| panic!("storage open: {e}"));
    s.create_index("crash", "docs", v_index())
        .unwrap_or_else(|e| panic!("create index: {e}"));
    let c = s
        .collection("crash", "docs")
        .unwrap_or_else(|| panic!("no collection after create_index"));
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let c = c.clone();
            let round = round.to_string();
            std::thread::spawn(move || {
                // Bounded so a parent that died cannot leave this running forever.
                for i in 0..200_000u32 {
                    let id = format!("{round}-{t}-{i}");
                    let batch: Vec<RawDocumentBuf> = (0..1 + i % 3)
                        .map(|j| rawdoc! {"_id": format!("{id}-{j}"), "v": i64::from(i), "pad": "xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx"})
                        .collect();
                    let refs: Vec<&RawDocument> = batch.iter().map(|d| d.as_ref()).collect();
                    let out = c.insert_many(&refs, true, durability);
                    if out.inserted == refs.len() && out.durability_error.is_none() {
                        let mut line = String::new();
                        for j in 0..refs.len() {
                            line.push_str(&format!("ACK {id}-{j}\n"));
                        }
                        let mut stdout = std::io::stdout().lock();
                        let _ = stdout.write_all(line.as_bytes());
                        let _ = stdout.flush();
                    }
                }
            })
        })
        .collect();
    for t in threads {
        let _ = t.join();
    }
}

/// Runs the child on `dir` until it has acknowledged `min_acks` inserts (or a
/// deadline passes), SIGKILLs it, and returns the acknowledged `_id`s.
fn run_and_kill_child(dir: &Path, mode: &str, round: u32, min_acks: usize) -> Vec<String> {
    use std::process::{Command, Stdio};
    let exe = std::env::current_exe().unwrap_or_else(|e| panic!("current_exe: {e}"));
    let mut child = Command::new(exe)
        .args([
            "--ignored",
            "--exact",
            "lsm::tests::crash_child",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CRASH_CHILD_ENV, format!("{}|{mode}|{round}", dir.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn: {e}"));
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("no child stdout"));
    let acks = Arc::new(parking_lot::Mutex::new(Vec::new()));
    let reader = {
        let acks = acks.clone();
        std::thread::spawn(move || {
            let mut r = std::io::BufReader::new(stdout);
            let mut line = String::new();
            loop {
                line.clear();
                match std::io::BufRead::read_line(&mut r, &mut line) {
                    Ok(0) | Err(_) => break,
                    // A line cut by the kill has no newline and was not acknowledged.
                    Ok(_) if line.ends_with('\n') => {
                        if let Some(id) = line.trim_end().strip_prefix("ACK ") {
                            acks.lock().push(id.to_string());
                        }
                    }
                    Ok(_) => {}
                }
            }
        })
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while acks.lock().len() < min_acks && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    let _ = child.kill(); // SIGKILL on Unix
    let _ = child.wait();
    let _ = reader.join();
    let acks = acks.lock().clone();
    acks
}

/// The crash child's index on `v`, whose keys arrive out of `_id` order from
/// its four threads.
fn v_index() -> crate::IndexSpec {
    crate::IndexSpec::from_document(&doc! {"key": {"v": 1}, "name": "v_1"})
        .unwrap_or_else(|| panic!("index spec"))
}

/// Every acknowledged document is present, the count record equals the
/// documents present, the index on `v` holds exactly the documents' entries,
/// and the store takes writes again.
fn verify_after_crash(dir: &Path, acks: &[String]) -> u64 {
    let s = open_storage(dir);
    let Some(c) = s.collection("crash", "docs") else {
        assert!(acks.is_empty(), "acknowledged inserts but no collection");
        return 0;
    };
    let report = c
        .validate(crate::ValidateOptions::default())
        .unwrap_or_else(|e| panic!("validate: {e}"));
    assert!(
        report.valid(),
        "index consistent after the crash: {report:?}"
    );
    for id in acks {
        let got = c
            .get(bson::RawBsonRef::String(id))
            .unwrap_or_else(|e| panic!("get {id}: {e}"));
        assert!(got.is_some(), "acknowledged {id} lost");
    }
    let present = c.scan(false).filter(Result::is_ok).count() as u64;
    assert_eq!(c.count(), present, "count record matches the documents");
    let probe = rawdoc! {"_id": format!("after-{present}")};
    assert_eq!(c.insert_many(&[&probe], true, Durability::Sync).inserted, 1);
    present + 1
}

/// A tiny deterministic generator for kill points.
fn next_rand(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

#[test]
fn acknowledged_sync_writes_survive_sigkill() {
    let dir = tempdir();
    let mut rng = 0x2545_F491_4F6C_DD1Du64
        ^ std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
    let mut all_acks = Vec::new();
    let mut present = 0;
    for round in 0..10 {
        let min_acks = 1 + (next_rand(&mut rng) % 400) as usize;
        let acks = run_and_kill_child(dir.path(), "sync", round, min_acks);
        assert!(
            acks.len() >= min_acks,
            "round {round}: {} < {min_acks}",
            acks.len()
        );
        all_acks.extend(acks);
        let now = verify_after_crash(dir.path(), &all_acks);
        assert!(
            now >= present,
            "documents never disappear: {present} -> {now}"
        );
        present = now;
    }
    assert!(
        all_acks.len() >= 10,
        "the children acknowledged writes: {}",
        all_acks.len()
    );
}

#[test]
fn buffered_writes_reopen_consistent_after_sigkill() {
    let dir = tempdir();
    for round in 0..3 {
        let acks = run_and_kill_child(dir.path(), "buffered", round, 200 + 300 * round as usize);
        // A killed process (unlike a lost machine) keeps what reached the OS,
        // and every commit reaches the OS before it is acknowledged.
        verify_after_crash(dir.path(), &acks);
    }
}

/// A small tmpfs mounted for one test, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// `None` when mounting is not permitted (not root, no mount binary).
    fn mount(size: &str) -> Option<Tmpfs> {
        let dir = tempdir();
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then_some(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

/// Fills the file system holding `path` with a file until it refuses more.
fn fill_disk(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap_or_else(|e| panic!("filler: {e}"));
    let chunk = vec![0xA5u8; 64 * 1024];
    while f.write_all(&chunk).is_ok() {}
    // Fill the last partial chunk's worth too.
    while f.write_all(&[0u8; 512]).is_ok() {}
    let _ = f.sync_all();
}

#[test]
fn full_disk_fails_writes_keeps_reads_and_recovers_after_space_is_freed() {
    let Some(fs) = Tmpfs::mount("16m") else {
        // The error mapping itself is covered by `fjall_errors_map_to_storage_errors`.
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dbpath = fs.path().join("db");
    let opts =
        LsmOptions::with_journal_commit_interval_ms(5).unwrap_or_else(|e| panic!("options: {e}"));
    let e = LsmEngine::open(&dbpath, opts.clone()).unwrap_or_else(|e| panic!("open: {e}"));
    for i in 0..100u32 {
        put(
            &e,
            format!("acked-{i:03}").as_bytes(),
            &[7u8; 100],
            Durability::Sync,
        );
    }
    let filler = fs.path().join("filler");
    fill_disk(&filler);

    // Writes fail with Full once the journal cannot grow.
    let value = vec![0x5Au8; 256 * 1024];
    let mut failure = None;
    for i in 0..64u32 {
        let mut b = WriteBatch::new();
        b.put(format!("big-{i:03}").into_bytes(), value.clone());
        if let Err(err) = e.write(b, Durability::Sync) {
            failure = Some(err);
            break;
        }
    }
    assert_eq!(
        failure,
        Some(EngineError::Full),
        "a full disk fails the write"
    );
    // Later writes keep failing with the same error, while reads still work.
    let mut b = WriteBatch::new();
    b.put(b"refused".to_vec(), b"x".to_vec());
    assert_eq!(e.write(b, Durability::Buffered), Err(EngineError::Full));
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for i in 0..100u32 {
        let key = format!("acked-{i:03}");
        assert_eq!(
            snap.get(key.as_bytes()).ok().flatten().map(|v| v.len()),
            Some(100),
            "{key} readable while the disk is full"
        );
    }
    drop(snap);

    // Free the space: the engine reopens its files in the background and
    // accepts writes again.
    std::fs::remove_file(&filler).unwrap_or_else(|err| panic!("remove filler: {err}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let mut b = WriteBatch::new();
        b.put(b"after".to_vec(), b"space freed".to_vec());
        match e.write(b, Durability::Sync) {
            Ok(()) => break,
            Err(err) => {
                assert!(
                    std::time::Instant::now() < deadline,
                    "writes never recovered: {err}"
                );
                std::thread::sleep(Duration::from_millis(10));
            }
        }
    }
    assert!(e.recoveries() >= 1, "the engine reopened its files");
    drop(e);
    let e = retry_in_use(|| LsmEngine::open(&dbpath, opts.clone()))
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for i in 0..100u32 {
        let key = format!("acked-{i:03}");
        assert!(
            snap.get(key.as_bytes()).ok().flatten().is_some(),
            "{key} survived"
        );
    }
    assert_eq!(
        snap.get(b"after").ok().flatten(),
        Some(b"space freed".to_vec())
    );
}

#[test]
fn store_on_a_full_disk_refuses_inserts_serves_reads_and_keeps_counts_exact() {
    let Some(fs) = Tmpfs::mount("16m") else {
        eprintln!("skipping: cannot mount a tmpfs here (needs root)");
        return;
    };
    let dbpath = fs.path().join("db");
    let opts =
        LsmOptions::with_journal_commit_interval_ms(5).unwrap_or_else(|e| panic!("options: {e}"));
    let engine: Arc<dyn Engine> =
        Arc::new(LsmEngine::open(&dbpath, opts.clone()).unwrap_or_else(|e| panic!("open: {e}")));
    let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("storage: {e}"));
    let c = s
        .get_or_create_collection("db", "c")
        .unwrap_or_else(|e| panic!("create: {e}"));
    let acked: Vec<RawDocumentBuf> = (0..50).map(profile).collect();
    for d in &acked {
        assert_eq!(
            c.insert_many(&[d.as_ref()], true, Durability::Sync)
                .inserted,
            1
        );
    }
    let filler = fs.path().join("filler");
    fill_disk(&filler);

    let big = "x".repeat(200 * 1024);
    let mut refused = None;
    for i in 0..64 {
        let d = rawdoc! {"_id": format!("big-{i}"), "pad": big.as_str()};
        let out = c.insert_many(&[d.as_ref()], true, Durability::Sync);
        if let Some((_, err)) = out.errors.into_iter().next() {
            refused = Some(err);
            break;
        }
    }
    assert_eq!(refused, Some(StorageError::Engine(EngineError::Full)));
    let m: bisondb_error::MongoError = EngineError::Full.into();
    assert_eq!(m.code.name(), "OutOfDiskSpace");
    for d in &acked {
        let id = d
            .get("_id")
            .ok()
            .flatten()
            .unwrap_or_else(|| panic!("no _id"));
        assert_eq!(
            c.get(id).ok().flatten().as_ref(),
            Some(d),
            "readable while full"
        );
    }

    std::fs::remove_file(&filler).unwrap_or_else(|e| panic!("remove filler: {e}"));
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let after = rawdoc! {"_id": "after"};
    while c
        .insert_many(&[after.as_ref()], true, Durability::Sync)
        .inserted
        != 1
    {
        assert!(
            std::time::Instant::now() < deadline,
            "inserts never recovered"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    // A batch refused while the disk was full may have reached the journal
    // after all; either way the count matches what is stored.
    let present = c.scan(false).filter(Result::is_ok).count() as u64;
    assert_eq!(c.count(), present);
    assert!(
        present >= 51,
        "acknowledged documents and the new one: {present}"
    );
    drop((c, s, engine));
    let s = Storage::open(Arc::new(
        retry_in_use(|| LsmEngine::open(&dbpath, opts.clone()))
            .unwrap_or_else(|e| panic!("reopen: {e}")),
    ))
    .unwrap_or_else(|e| panic!("storage reopen: {e}"));
    let c = s
        .collection("db", "c")
        .unwrap_or_else(|| panic!("collection lost"));
    assert_eq!(
        c.count(),
        c.scan(false).filter(Result::is_ok).count() as u64
    );
    assert!(c
        .get(bson::RawBsonRef::String("after"))
        .ok()
        .flatten()
        .is_some());
}

#[test]
fn random_batches_match_the_model_across_reopens() {
    use std::collections::BTreeMap;
    for seed in 1..=4u64 {
        let dir = tempdir();
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut engine = open(dir.path());
        let ops = conformance::random_ops(seed.wrapping_mul(0xD1B5_4A32_D192_ED03), 400);
        for (step, op) in ops.iter().enumerate() {
            if let conformance::Op::Write(entries) = op {
                let mut b = WriteBatch::new();
                for (k, v) in entries {
                    match v {
                        Some(v) => {
                            b.put(k.clone(), v.clone());
                            model.insert(k.clone(), v.clone());
                        }
                        None => {
                            b.delete(k.clone());
                            model.remove(k);
                        }
                    }
                }
                assert!(engine.write(b, Durability::Buffered).is_ok(), "step {step}");
            }
            if step % 97 == 96 {
                drop(engine);
                engine = open(dir.path());
                let want: Vec<KeyValue> = model.clone().into_iter().collect();
                assert_eq!(all(&engine), want, "seed {seed} step {step} after reopen");
            }
        }
        let want: Vec<KeyValue> = model.into_iter().collect();
        assert_eq!(all(&engine), want, "seed {seed} at the end");
    }
}

/// Keys past fjall's limit are stored as long keys (`lsm/long.rs`), not
/// refused and never a panic, as documents and as index entries (which take
/// the index write buffer's path), and read back.
#[test]
fn oversized_keys_are_stored_not_refused() {
    let dir = tempdir();
    let e = open(dir.path());
    let cases = [MAX_KEY_LEN, MAX_KEY_LEN + 1, 1 << 20];
    for (first, len) in [0x42u8, INDEX_REGION]
        .into_iter()
        .flat_map(|f| cases.map(|c| (f, c)))
    {
        let mut key = vec![0x42u8; len];
        key[0] = first;
        let mut b = WriteBatch::new();
        b.put(key.clone(), b"v".to_vec());
        let got = e.write(b, Durability::Buffered);
        assert!(got.is_ok(), "len {len}: {got:?}");
        let read = e
            .snapshot()
            .unwrap_or_else(|e| panic!("snapshot: {e}"))
            .get(&key)
            .ok()
            .flatten();
        assert_eq!(read.as_deref(), Some(&b"v"[..]), "len {len}");
    }
    let o = e
        .shared
        .current()
        .unwrap_or_else(|err| panic!("current: {err}"));
    assert_eq!(o.wb.len().ok(), Some(3), "each index key's blob");
    drop(o);
    put(&e, b"after", b"1", Durability::Sync);
    assert_eq!(all(&e).len(), 7);
}

/// The regions decide where keys are kept, so a dbpath opened with other
/// regions than it was written with is refused rather than read wrong; and
/// a buffered region must lie inside the regions kept apart.
#[test]
fn regions_other_than_the_stored_ones_are_refused() {
    let dir = tempdir();
    {
        let e = open(dir.path());
        put(&e, &[INDEX_REGION, 1], b"ix", Durability::Sync);
        put(&e, &[0x02, 1], b"stats", Durability::Sync);
        assert!(e.close().is_ok());
    }
    let refused = retry_in_use(|| LsmEngine::open(dir.path(), LsmOptions::default()));
    assert!(
        matches!(refused, Err(EngineError::InvalidArgument(ref m)) if m.contains("key regions")),
        "{:?}",
        refused.err()
    );
    let bad = LsmOptions {
        regions: KeyRegions {
            apart: 0x02..0x03,
            buffered: Some(INDEX_REGION),
        },
        ..LsmOptions::default()
    };
    assert!(matches!(
        LsmEngine::open(tempdir().path(), bad),
        Err(EngineError::InvalidArgument(_))
    ));
    let e = open(dir.path());
    assert_eq!(
        e.snapshot()
            .unwrap_or_else(|e| panic!("snapshot: {e}"))
            .get(&[INDEX_REGION, 1])
            .ok(),
        Some(Some(b"ix".to_vec()))
    );
}

/// Transactions go through the same commit as plain batches: keys of the
/// regions kept apart and of the buffered index region commit with the
/// documents, and conflicts on them are seen through the index buffer.
#[test]
fn transactions_span_every_key_region() {
    let dir = tempdir();
    let e = open(dir.path());
    let (doc, stats, ix) = (vec![0x01, 1], vec![0x02, 1], vec![INDEX_REGION, 1]);
    let mut t = e.begin().unwrap_or_else(|e| panic!("begin: {e}"));
    for k in [&doc, &stats, &ix] {
        assert!(t.put(k.clone(), b"t".to_vec()).is_ok());
    }
    assert_eq!(t.get(&ix).ok(), Some(Some(b"t".to_vec())));
    assert!(t.commit(Durability::Sync).is_ok());
    let s = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for k in [&doc, &stats, &ix] {
        assert_eq!(s.get(k).ok(), Some(Some(b"t".to_vec())), "{k:?}");
    }
    let mut late = e.begin().unwrap_or_else(|e| panic!("begin: {e}"));
    put(&e, &ix, b"plain", Durability::Buffered);
    assert!(late.put(ix.clone(), b"late".to_vec()).is_ok());
    assert!(matches!(
        late.commit(Durability::Buffered),
        Err(EngineError::WriteConflict(_))
    ));
    let s = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    assert_eq!(s.get(&ix).ok(), Some(Some(b"plain".to_vec())));
}

/// An I/O failure becomes OutOfDiskSpace only when the disk is full: on a
/// disk with room it stays what it was (a full one is exercised by the
/// server's `full_disk_answers_out_of_disk_space`, which needs a small
/// filesystem).
#[test]
fn io_failures_are_full_only_on_a_full_disk() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    assert!(!disk_full(dir.path()), "a test machine's temp dir has room");
    let io = EngineError::Io("lsm write: broken".into());
    assert!(matches!(
        full_if_disk_is(io, dir.path()),
        EngineError::Io(_)
    ));
    assert!(matches!(
        full_if_disk_is(EngineError::Full, dir.path()),
        EngineError::Full
    ));
    // A path that cannot be asked about is not taken for a full disk.
    assert!(!disk_full(Path::new("/nonexistent/bisondb")));
}

#[test]
fn stored_keys_are_the_prefixed_keys_short_or_long() {
    for len in [0usize, 1, 17, 62, 63, 64, 65, 300] {
        let key: Vec<u8> = (0..len).map(|i| (i % 251) as u8).collect();
        let stored = stored_key(&key).unwrap_or_else(|e| panic!("{len}: {e}"));
        assert_eq!(&stored[..], &prefixed(&key)[..], "key of {len} bytes");
    }
}

/// Runs `f` on a thread of its own and waits at most `limit` for it: `Some`
/// with its result and how long it took, `None` when it is still running
/// (a hang; the thread is left behind).
fn within<T: Send + 'static>(
    limit: Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> Option<(T, Duration)> {
    let (tx, rx) = std::sync::mpsc::channel();
    let started = std::time::Instant::now();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(limit).ok().map(|r| (r, started.elapsed()))
}

/// Issue 20, finding 3, reproduced under load: fjall 3.1's one worker reads a
/// queue of 1,000 messages, and every commit past a full memtable offers it
/// a rotation request; a flood of them could leave the worker blocked
/// sending itself a flush into its own full queue, and flushes then stopped
/// for good (writers halted behind four sealed memtables, a checkpoint or a
/// close waited forever). Here eight writers commit small batches into all
/// three keyspaces with memtables of a few KiB, so memtables fill every few
/// milliseconds, and the engine is closed and reopened each round. Every
/// round's writers must stop, its checkpoint flush and its close finish
/// within 60 s each (a hang fails, it does not wait), and every acknowledged
/// batch must be there after the last reopen. `BISONDB_FLOOD_ROUNDS` and
/// `BISONDB_FLOOD_MS` run it longer.
#[test]
fn flushes_never_stop_under_a_flood_of_commits_and_every_close_is_prompt() {
    const WRITERS: usize = 8;
    const PER_BATCH: usize = 4;
    const LIMIT: Duration = Duration::from_secs(60);
    let env = |name: &str, default: u64| {
        std::env::var(name)
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(default)
    };
    let rounds = env("BISONDB_FLOOD_ROUNDS", 4);
    let run_for = Duration::from_millis(env("BISONDB_FLOOD_MS", 2_000));
    let dir = tempdir();
    let opts = LsmOptions {
        memtable_bytes: Some(16 << 10),
        index_buffer_bytes: 64 << 10,
        ..options()
    };
    // acked[round][writer]: batches acknowledged.
    let mut acked: Vec<Vec<u64>> = Vec::new();
    let mut closes = Vec::new();
    for round in 0..rounds {
        let e = Arc::new(
            retry_in_use(|| LsmEngine::open(dir.path(), opts.clone()))
                .unwrap_or_else(|e| panic!("open: {e}")),
        );
        let stop = Arc::new(AtomicBool::new(false));
        let writers: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (e, stop) = (e.clone(), stop.clone());
                let (tx, rx) = std::sync::mpsc::channel();
                std::thread::spawn(move || {
                    let mut n = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let mut b = WriteBatch::new();
                        for j in 0..PER_BATCH {
                            let doc = format!("\x10{round:02}-{w}-{n:09}-{j}");
                            b.put(doc.clone().into_bytes(), vec![b'd'; 96]);
                            // An index entry (buffered) and a stats record (index keyspace).
                            let mut ix = vec![INDEX_REGION];
                            ix.extend_from_slice(doc.as_bytes());
                            b.put(ix, vec![b'i'; 8]);
                        }
                        b.put(vec![0x02, round as u8, w as u8], n.to_be_bytes().to_vec());
                        if e.write(b, Durability::Buffered).is_err() {
                            break;
                        }
                        n += 1;
                    }
                    let _ = tx.send(n);
                });
                rx
            })
            .collect();
        std::thread::sleep(run_for);
        stop.store(true, Ordering::Relaxed);
        let counts: Vec<u64> = writers
            .iter()
            .map(|rx| {
                rx.recv_timeout(LIMIT).unwrap_or_else(|_| {
                    panic!("round {round}: a writer is still stuck 60 s after the load stopped (fjall's flushes stopped)")
                })
            })
            .collect();
        // Every memtable into tables: needs fjall's worker to take flushes.
        let flusher = e.clone();
        let (flushed, flush_took) =
            within(LIMIT, move || flusher.checkpoint()).unwrap_or_else(|| {
                panic!(
                    "round {round}: a checkpoint did not finish in 60 s (fjall's flushes stopped)"
                )
            });
        flushed.unwrap_or_else(|err| panic!("round {round}: checkpoint: {err}"));
        let closer = e.clone();
        let (closed, close_took) = within(LIMIT, move || closer.close())
            .unwrap_or_else(|| panic!("round {round}: close did not finish in 60 s"));
        closed.unwrap_or_else(|err| panic!("round {round}: close: {err}"));
        drop(e);
        eprintln!(
            "round {round}: {} batches, checkpoint {flush_took:?}, close {close_took:?}",
            counts.iter().sum::<u64>()
        );
        assert!(
            close_took < Duration::from_secs(15),
            "round {round}: close took {close_took:?}: its flush was abandoned"
        );
        closes.push(close_took);
        acked.push(counts);
    }
    eprintln!("closes: {closes:?}");
    let e = retry_in_use(|| LsmEngine::open(dir.path(), opts.clone()))
        .unwrap_or_else(|e| panic!("reopen: {e}"));
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for (round, counts) in acked.iter().enumerate() {
        for (w, &n) in counts.iter().enumerate() {
            assert!(n > 0, "round {round}: writer {w} wrote nothing");
            for i in 0..n {
                let doc = format!("\x10{round:02}-{w}-{i:09}-{}", PER_BATCH - 1);
                let mut ix = vec![INDEX_REGION];
                ix.extend_from_slice(doc.as_bytes());
                assert!(
                    matches!(snap.get(doc.as_bytes()), Ok(Some(_)))
                        && matches!(snap.get(&ix), Ok(Some(_))),
                    "round {round}: writer {w}'s acknowledged batch {i} was lost"
                );
            }
            assert_eq!(
                snap.get(&[0x02, round as u8, w as u8]).ok().flatten(),
                Some((n - 1).to_be_bytes().to_vec()),
                "round {round}: writer {w}'s last stats record"
            );
        }
    }
}
