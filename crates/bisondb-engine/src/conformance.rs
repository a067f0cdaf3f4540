//! Engine conformance checks, generic over `Arc<dyn Engine>`, so every engine
//! (the in-memory reference, lsm, and any engine added later) is held to the
//! same contract: an engine's tests call [`run_all`] with a factory of fresh
//! engines, and [`check_against_model`] with generated operations.
//!
//! Two layers: hand-written scenarios that pin the contract's edge cases
//! (atomic batches, snapshot isolation, bounds, reverse scans, limits), and a
//! model check that replays any sequence of [`Op`]s against the engine and a
//! `BTreeMap`, comparing every read. The model check is driven both by a
//! deterministic generator and by proptest strategies ([`proptest_ops`]).

use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::Arc;

use crate::engine::{CommitPoint, Durability, Engine, Snapshot, WriteBatch};
use crate::error::EngineError;
use crate::txn::Transaction;

/// A factory producing a fresh, empty engine for each scenario.
pub type EngineFactory<'a> = &'a dyn Fn() -> Arc<dyn Engine>;

/// One step of a model test.
#[derive(Debug, Clone)]
pub enum Op {
    /// Apply these puts (`Some`) and deletes (`None`) as one batch.
    Write(Vec<(Vec<u8>, Option<Vec<u8>>)>),
    /// Take a snapshot and remember it (with the model's state at that moment).
    Snapshot,
    /// Read `key` through remembered snapshot `snap` (modulo the number taken; the
    /// slot one past the last means "a fresh snapshot of now").
    Get { snap: usize, key: Vec<u8> },
    /// Range read through snapshot `snap` (same convention as `Get`).
    Scan {
        snap: usize,
        start: Bound<Vec<u8>>,
        end: Bound<Vec<u8>>,
        reverse: bool,
        limit: usize,
    },
}

type Model = BTreeMap<Vec<u8>, Vec<u8>>;

fn as_ref_bound(b: &Bound<Vec<u8>>) -> Bound<&[u8]> {
    match b {
        Bound::Included(k) => Bound::Included(k.as_slice()),
        Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
        Bound::Unbounded => Bound::Unbounded,
    }
}

fn model_scan(
    model: &Model,
    start: &Bound<Vec<u8>>,
    end: &Bound<Vec<u8>>,
    reverse: bool,
    limit: usize,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let inside = |k: &Vec<u8>| {
        let lo = match start {
            Bound::Included(s) => k >= s,
            Bound::Excluded(s) => k > s,
            Bound::Unbounded => true,
        };
        let hi = match end {
            Bound::Included(e) => k <= e,
            Bound::Excluded(e) => k < e,
            Bound::Unbounded => true,
        };
        lo && hi
    };
    let all = model
        .iter()
        .filter(|(k, _)| inside(k))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        let mut v: Vec<_> = all.collect();
        v.reverse();
        v.truncate(limit);
        v
    } else {
        all.take(limit).collect()
    }
}

/// Replays `ops` against `engine` (which must start empty) and a `BTreeMap`
/// model, panicking with the failing step on any difference.
pub fn check_against_model(engine: &Arc<dyn Engine>, ops: &[Op]) {
    let mut model = Model::new();
    let mut snaps: Vec<(Arc<dyn Snapshot>, Model)> = Vec::new();
    for (step, op) in ops.iter().enumerate() {
        match op {
            Op::Write(entries) => {
                let mut batch = WriteBatch::new();
                for (k, v) in entries {
                    match v {
                        Some(v) => {
                            batch.put(k.clone(), v.clone());
                            model.insert(k.clone(), v.clone());
                        }
                        None => {
                            batch.delete(k.clone());
                            model.remove(k);
                        }
                    }
                }
                let durability = if step % 2 == 0 {
                    Durability::Buffered
                } else {
                    Durability::Sync
                };
                assert!(
                    engine.write(batch, durability).is_ok(),
                    "step {step}: write failed"
                );
            }
            Op::Snapshot => snaps.push((snapshot_of(engine), model.clone())),
            Op::Get { snap, key } => {
                let (s, m) = pick(engine, &snaps, &model, *snap);
                let got = s.get(key).ok().flatten();
                assert_eq!(got.as_ref(), m.get(key), "step {step}: get {key:?}");
            }
            Op::Scan {
                snap,
                start,
                end,
                reverse,
                limit,
            } => {
                let (s, m) = pick(engine, &snaps, &model, *snap);
                let got = s.scan(as_ref_bound(start), as_ref_bound(end), *reverse, *limit);
                let want = model_scan(&m, start, end, *reverse, *limit);
                assert_eq!(
                    got.ok(),
                    Some(want),
                    "step {step}: scan {start:?}..{end:?} rev={reverse} limit={limit}"
                );
            }
        }
    }
}

fn pick(
    engine: &Arc<dyn Engine>,
    snaps: &[(Arc<dyn Snapshot>, Model)],
    model: &Model,
    index: usize,
) -> (Arc<dyn Snapshot>, Model) {
    let slot = index % (snaps.len() + 1);
    match snaps.get(slot) {
        Some((s, m)) => (s.clone(), m.clone()),
        None => (snapshot_of(engine), model.clone()),
    }
}

/// A tiny deterministic generator, so [`run_all`] covers the model check with
/// fixed seeds (reproducible in every engine's test run).
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Keys over a tiny alphabet that includes 0x00 and 0xFF, so prefixes, equal
/// keys and the byte-order extremes all occur often.
fn random_key(rng: &mut XorShift) -> Vec<u8> {
    const ALPHABET: [u8; 4] = [0x00, 0x01, 0x7F, 0xFF];
    let len = rng.below(4);
    (0..len)
        .map(|_| ALPHABET[(rng.below(4)) as usize % ALPHABET.len()])
        .collect()
}

fn random_bound(rng: &mut XorShift) -> Bound<Vec<u8>> {
    match rng.below(3) {
        0 => Bound::Unbounded,
        1 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

/// A deterministic pseudo-random op sequence of length `n` from `seed`.
pub fn random_ops(seed: u64, n: usize) -> Vec<Op> {
    let mut rng = XorShift(seed | 1);
    let mut ops = Vec::with_capacity(n);
    for _ in 0..n {
        let op = match rng.below(10) {
            0..=3 => {
                let entries = (0..rng.below(5) + 1)
                    .map(|_| {
                        let k = random_key(&mut rng);
                        let v = if rng.below(3) == 0 {
                            None
                        } else {
                            Some(rng.next().to_be_bytes().to_vec())
                        };
                        (k, v)
                    })
                    .collect();
                Op::Write(entries)
            }
            4 => Op::Snapshot,
            5 => Op::Get {
                snap: rng.below(8) as usize,
                key: random_key(&mut rng),
            },
            _ => Op::Scan {
                snap: rng.below(8) as usize,
                start: random_bound(&mut rng),
                end: random_bound(&mut rng),
                reverse: rng.below(2) == 0,
                limit: rng.below(8) as usize,
            },
        };
        ops.push(op);
    }
    ops
}

/// Runs every scenario against fresh engines from `factory`.
pub fn run_all(factory: EngineFactory<'_>) {
    empty_engine(&factory());
    put_get_delete(&factory());
    batch_last_write_wins(&factory());
    snapshot_isolation(&factory());
    get_latest_sees_every_commit(&factory());
    get_many_answers_as_get(&factory());
    insert_acts_as_put(&factory());
    scan_bounds_and_limits(&factory());
    chunked_rescan(&factory());
    transaction_reads_its_writes_and_commits_atomically(&factory());
    transaction_first_writer_wins(&factory());
    transaction_commit_fails_after_a_later_commit(&factory());
    transaction_rollback_frees_its_keys(&factory());
    transaction_scan_merges_its_writes(&factory());
    snapshot_at_or_refusal(&factory());
    transaction_on_a_past_snapshot(&factory());
    transactions_serialize_concurrent_increments(&factory());
    for seed in 1..=20u64 {
        check_against_model(
            &factory(),
            &random_ops(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15), 300),
        );
    }
}

/// `get_latest` answers what a snapshot taken now would: the last committed
/// value (a plain write's and a transaction's), nothing once deleted, and
/// never a value an open transaction has not committed yet.
fn get_latest_sees_every_commit(engine: &Arc<dyn Engine>) {
    let key = b"latest".to_vec();
    assert_eq!(engine.get_latest(&key).unwrap(), None);
    let mut batch = WriteBatch::new();
    batch.put(key.clone(), b"1".to_vec());
    engine.write(batch, Durability::Buffered).unwrap();
    assert_eq!(engine.get_latest(&key).unwrap(), Some(b"1".to_vec()));
    let mut txn = engine.begin().unwrap();
    txn.put(key.clone(), b"2".to_vec()).unwrap();
    assert_eq!(
        engine.get_latest(&key).unwrap(),
        Some(b"1".to_vec()),
        "an uncommitted transaction's write is not the latest value"
    );
    txn.commit(Durability::Buffered).unwrap();
    assert_eq!(engine.get_latest(&key).unwrap(), Some(b"2".to_vec()));
    assert_eq!(
        snapshot_of(engine).get(&key).unwrap(),
        engine.get_latest(&key).unwrap()
    );
    let mut batch = WriteBatch::new();
    batch.delete(key.clone());
    engine.write(batch, Durability::Buffered).unwrap();
    assert_eq!(engine.get_latest(&key).unwrap(), None);
}

/// `get_many` answers each key as `get` would, in the order asked, through a
/// snapshot and through a transaction (its own writes and deletes included).
fn get_many_answers_as_get(engine: &Arc<dyn Engine>) {
    let mut batch = WriteBatch::new();
    for i in 0u8..5 {
        batch.put(vec![b'm', i], vec![i]);
    }
    engine.write(batch, Durability::Buffered).unwrap();
    let keys: Vec<Vec<u8>> = vec![
        vec![b'm', 3],
        vec![b'm', 9],
        vec![b'm', 0],
        vec![b'm', 3],
        vec![],
        vec![b'm', 4],
    ];
    let refs: Vec<&[u8]> = keys.iter().map(Vec::as_slice).collect();
    let snap = snapshot_of(engine);
    let one_by_one: Vec<_> = refs.iter().map(|k| snap.get(k).unwrap()).collect();
    assert_eq!(snap.get_many(&refs).unwrap(), one_by_one);
    assert_eq!(one_by_one[0], Some(vec![3]));
    assert_eq!(one_by_one[1], None);
    assert!(snap.get_many(&[]).unwrap().is_empty());
    let mut txn = engine.begin().unwrap();
    txn.put(vec![b'm', 9], vec![90]).unwrap();
    txn.delete(vec![b'm', 0]).unwrap();
    let expected: Vec<_> = refs.iter().map(|k| txn.get(k).unwrap()).collect();
    assert_eq!(txn.get_many(&refs).unwrap(), expected);
    assert_eq!(expected[1], Some(vec![90]));
    assert_eq!(expected[2], None);
    drop(txn);
}

/// [`WriteBatch::insert`] has a put's effect, whatever the engine does with
/// the hint: in a plain batch and in a transaction's batch, enough keys for
/// a bulk path, a key that exists after all (overwritten), a key the batch
/// removed first; and a key another commit inserted after a transaction's
/// snapshot fails the transaction's batch as a put's would, applying none of
/// it.
fn insert_acts_as_put(engine: &Arc<dyn Engine>) {
    let key = |prefix: u8, i: u32| {
        let mut k = vec![prefix];
        k.extend_from_slice(&i.to_be_bytes());
        k
    };
    put(engine, &key(b'i', 7), b"old");
    put(engine, &key(b't', 7), b"old");
    let mut batch = WriteBatch::new();
    batch.delete(key(b'i', 300));
    batch.insert(key(b'i', 300), b"after delete".to_vec());
    for i in 0..200 {
        batch.insert(key(b'i', i), i.to_be_bytes().to_vec());
    }
    engine.write(batch, Durability::Buffered).unwrap();
    let snap = snapshot_of(engine);
    assert_eq!(
        snap.get(&key(b'i', 7)).unwrap(),
        Some(7u32.to_be_bytes().to_vec())
    );
    assert_eq!(
        snap.get(&key(b'i', 199)).unwrap(),
        Some(199u32.to_be_bytes().to_vec())
    );
    assert_eq!(
        snap.get(&key(b'i', 300)).unwrap(),
        Some(b"after delete".to_vec())
    );
    drop(snap);
    // Through a transaction: all new, then one that exists since before its
    // snapshot.
    for (prefix, with_old) in [(b'n', false), (b't', true)] {
        let txn = begin(engine);
        let mut batch = WriteBatch::new();
        for i in 0..200 {
            if i != 7 || with_old {
                batch.insert(key(prefix, i), vec![prefix]);
            }
        }
        txn.commit_batch(batch, Durability::Buffered).unwrap();
        let snap = snapshot_of(engine);
        let found = snap
            .scan(
                Bound::Included(&[prefix][..]),
                Bound::Excluded(&[prefix + 1][..]),
                false,
                usize::MAX,
            )
            .unwrap();
        assert_eq!(found.len(), if with_old { 200 } else { 199 });
        assert!(
            found.iter().all(|(_, v)| v == &vec![prefix]),
            "every key holds the batch's value"
        );
    }
    // A key inserted by another commit after the snapshot: a conflict.
    let txn = begin(engine);
    assert_eq!(txn.get(&key(b'c', 50)).unwrap(), None);
    put(engine, &key(b'c', 50), b"theirs");
    let mut batch = WriteBatch::new();
    for i in 0..200 {
        batch.insert(key(b'c', i), b"mine".to_vec());
    }
    assert!(is_conflict(&txn.commit_batch(batch, Durability::Buffered)));
    let snap = snapshot_of(engine);
    assert_eq!(snap.get(&key(b'c', 50)).unwrap(), Some(b"theirs".to_vec()));
    assert_eq!(
        snap.get(&key(b'c', 0)).unwrap(),
        None,
        "a failed batch applies nothing"
    );
}

/// A snapshot of `engine`; the engines under test are healthy, so a failure
/// fails the test.
fn snapshot_of(engine: &Arc<dyn Engine>) -> Arc<dyn Snapshot> {
    engine
        .snapshot()
        .unwrap_or_else(|e| panic!("snapshot of a healthy engine failed: {e}"))
}

fn all(s: &Arc<dyn Snapshot>) -> Vec<(Vec<u8>, Vec<u8>)> {
    s.scan(Bound::Unbounded, Bound::Unbounded, false, usize::MAX)
        .unwrap_or_default()
}

fn kv(k: &[u8], v: &[u8]) -> (Vec<u8>, Vec<u8>) {
    (k.to_vec(), v.to_vec())
}

fn empty_engine(engine: &Arc<dyn Engine>) {
    let s = snapshot_of(engine);
    assert_eq!(s.get(b"").ok(), Some(None));
    assert!(all(&s).is_empty());
    assert!(
        engine.write(WriteBatch::new(), Durability::Sync).is_ok(),
        "empty batch must be accepted"
    );
    assert!(engine.sync().is_ok());
}

fn put_get_delete(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    b.put(b"a".to_vec(), b"1".to_vec());
    b.put(vec![], b"empty key".to_vec());
    b.put(vec![0xFF, 0xFF], vec![]);
    assert!(engine.write(b, Durability::Buffered).is_ok());
    let s = snapshot_of(engine);
    assert_eq!(s.get(b"a").ok().flatten(), Some(b"1".to_vec()));
    assert_eq!(s.get(b"").ok().flatten(), Some(b"empty key".to_vec()));
    assert_eq!(
        s.get(&[0xFF, 0xFF]).ok().flatten(),
        Some(vec![]),
        "empty values are values"
    );
    assert_eq!(s.get(b"b").ok(), Some(None));

    let mut b = WriteBatch::new();
    b.delete(b"a".to_vec());
    b.delete(b"never-existed".to_vec());
    assert!(engine.write(b, Durability::Sync).is_ok());
    let s = snapshot_of(engine);
    assert_eq!(s.get(b"a").ok(), Some(None));
    assert_eq!(all(&s), vec![kv(b"", b"empty key"), kv(&[0xFF, 0xFF], b"")]);
}

fn batch_last_write_wins(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    b.put(b"k".to_vec(), b"1".to_vec());
    b.delete(b"k".to_vec());
    b.put(b"k".to_vec(), b"2".to_vec());
    b.put(b"j".to_vec(), b"1".to_vec());
    b.delete(b"j".to_vec());
    assert!(engine.write(b, Durability::Buffered).is_ok());
    assert_eq!(all(&snapshot_of(engine)), vec![kv(b"k", b"2")]);
}

fn snapshot_isolation(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    b.put(b"x".to_vec(), b"old".to_vec());
    assert!(engine.write(b, Durability::Buffered).is_ok());
    let before = snapshot_of(engine);
    let mut b = WriteBatch::new();
    b.put(b"x".to_vec(), b"new".to_vec());
    b.put(b"y".to_vec(), b"added".to_vec());
    assert!(engine.write(b, Durability::Buffered).is_ok());
    assert_eq!(
        all(&before),
        vec![kv(b"x", b"old")],
        "snapshot must not see later writes"
    );
    assert_eq!(
        all(&snapshot_of(engine)),
        vec![kv(b"x", b"new"), kv(b"y", b"added")]
    );
    // A snapshot outlives further writes and its engine handle.
    drop(snapshot_of(engine));
    assert_eq!(before.get(b"y").ok(), Some(None));
}

fn scan_bounds_and_limits(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    for k in [&b"a"[..], b"b", b"ba", b"c", &[0x00], &[0xFF]] {
        b.put(k.to_vec(), k.to_vec());
    }
    assert!(engine.write(b, Durability::Buffered).is_ok());
    let s = snapshot_of(engine);
    let keys =
        |start: Bound<&[u8]>, end: Bound<&[u8]>, reverse: bool, limit: usize| -> Vec<Vec<u8>> {
            s.scan(start, end, reverse, limit)
                .unwrap_or_default()
                .into_iter()
                .map(|(k, _)| k)
                .collect()
        };
    use Bound::*;
    let v = |xs: &[&[u8]]| xs.iter().map(|x| x.to_vec()).collect::<Vec<_>>();
    assert_eq!(
        keys(Included(b"b"), Excluded(b"c"), false, 10),
        v(&[b"b", b"ba"])
    );
    assert_eq!(
        keys(Excluded(b"b"), Included(b"c"), false, 10),
        v(&[b"ba", b"c"])
    );
    assert_eq!(
        keys(Included(b"b"), Excluded(b"c"), true, 10),
        v(&[b"ba", b"b"])
    );
    assert_eq!(keys(Unbounded, Unbounded, true, 2), v(&[&[0xFF], b"c"]));
    assert_eq!(keys(Unbounded, Unbounded, false, 2), v(&[&[0x00], b"a"]));
    assert_eq!(keys(Unbounded, Unbounded, false, 0), Vec::<Vec<u8>>::new());
    assert_eq!(
        keys(Included(b"c"), Excluded(b"a"), false, 10),
        Vec::<Vec<u8>>::new(),
        "inverted range"
    );
    assert_eq!(
        keys(Excluded(b"b"), Excluded(b"b"), true, 10),
        Vec::<Vec<u8>>::new()
    );
    assert_eq!(keys(Included(b"b"), Included(b"b"), true, 10), v(&[b"b"]));
}

/// The pattern cursors use: fetch a chunk, then re-seek strictly after (or before)
/// the last key seen. Both directions must visit every key exactly once.
fn chunked_rescan(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    let want: Vec<Vec<u8>> = (0u16..100).map(|i| i.to_be_bytes().to_vec()).collect();
    for k in &want {
        b.put(k.clone(), vec![1]);
    }
    assert!(engine.write(b, Durability::Buffered).is_ok());
    let s = snapshot_of(engine);
    for reverse in [false, true] {
        let mut seen = Vec::new();
        let mut last: Option<Vec<u8>> = None;
        loop {
            let (start, end) = match (&last, reverse) {
                (None, _) => (Bound::Unbounded, Bound::Unbounded),
                (Some(l), false) => (Bound::Excluded(l.as_slice()), Bound::Unbounded),
                (Some(l), true) => (Bound::Unbounded, Bound::Excluded(l.as_slice())),
            };
            let chunk = s.scan(start, end, reverse, 7).unwrap_or_default();
            if chunk.is_empty() {
                break;
            }
            last = chunk.last().map(|(k, _)| k.clone());
            seen.extend(chunk.into_iter().map(|(k, _)| k));
        }
        let mut expected = want.clone();
        if reverse {
            expected.reverse();
        }
        assert_eq!(seen, expected, "reverse={reverse}");
    }
}

fn put(engine: &Arc<dyn Engine>, k: &[u8], v: &[u8]) {
    let mut b = WriteBatch::new();
    b.put(k.to_vec(), v.to_vec());
    assert!(engine.write(b, Durability::Buffered).is_ok());
}

fn begin(engine: &Arc<dyn Engine>) -> Box<dyn Transaction> {
    engine
        .begin()
        .unwrap_or_else(|e| panic!("begin on a healthy engine failed: {e}"))
}

fn is_conflict<T>(r: &Result<T, EngineError>) -> bool {
    matches!(r, Err(EngineError::WriteConflict(_)))
}

fn transaction_reads_its_writes_and_commits_atomically(engine: &Arc<dyn Engine>) {
    put(engine, b"a", b"1");
    let mut t = begin(engine);
    assert_eq!(t.get(b"a").ok(), Some(Some(b"1".to_vec())));
    assert!(t.put(b"b".to_vec(), b"2".to_vec()).is_ok());
    assert!(t.delete(b"a".to_vec()).is_ok());
    assert!(t.put(b"c".to_vec(), b"3".to_vec()).is_ok());
    assert!(
        t.put(b"c".to_vec(), b"4".to_vec()).is_ok(),
        "rewriting its own key"
    );
    assert_eq!(t.get(b"a").ok(), Some(None), "its own delete");
    assert_eq!(
        t.get(b"c").ok(),
        Some(Some(b"4".to_vec())),
        "its latest write"
    );
    // Nobody else sees uncommitted writes.
    let outside = snapshot_of(engine);
    assert_eq!(all(&outside), vec![kv(b"a", b"1")]);
    assert!(t.commit(Durability::Sync).is_ok());
    assert_eq!(
        all(&snapshot_of(engine)),
        vec![kv(b"b", b"2"), kv(b"c", b"4")]
    );
    assert_eq!(
        all(&outside),
        vec![kv(b"a", b"1")],
        "earlier snapshots unchanged"
    );
    // A transaction reads its snapshot, not later commits.
    let t = begin(engine);
    put(engine, b"d", b"5");
    assert_eq!(t.get(b"d").ok(), Some(None));
    assert!(t.commit(Durability::Buffered).is_ok(), "nothing written");
}

fn transaction_first_writer_wins(engine: &Arc<dyn Engine>) {
    put(engine, b"k", b"0");
    let mut first = begin(engine);
    let mut second = begin(engine);
    assert!(first.put(b"k".to_vec(), b"1".to_vec()).is_ok());
    assert!(
        is_conflict(&second.put(b"k".to_vec(), b"2".to_vec())),
        "a key another open transaction wrote fails at once"
    );
    assert!(is_conflict(&second.delete(b"k".to_vec())));
    // The loser keeps its other writes.
    assert!(second.put(b"other".to_vec(), b"x".to_vec()).is_ok());
    assert!(first.commit(Durability::Buffered).is_ok());
    assert_eq!(
        snapshot_of(engine).get(b"k").ok(),
        Some(Some(b"1".to_vec()))
    );
    drop(second);
    assert_eq!(snapshot_of(engine).get(b"other").ok(), Some(None));
}

fn transaction_commit_fails_after_a_later_commit(engine: &Arc<dyn Engine>) {
    put(engine, b"k", b"0");
    // Another transaction commits the key after this one's snapshot.
    let mut late = begin(engine);
    let mut early = begin(engine);
    assert!(early.put(b"k".to_vec(), b"1".to_vec()).is_ok());
    assert!(early.commit(Durability::Buffered).is_ok());
    let wrote = late.put(b"k".to_vec(), b"2".to_vec());
    let other = late.put(b"j".to_vec(), b"2".to_vec());
    if wrote.is_ok() && other.is_ok() {
        assert!(is_conflict(&late.commit(Durability::Buffered)));
    } else {
        assert!(is_conflict(&wrote), "{wrote:?}");
    }
    let now = snapshot_of(engine);
    assert_eq!(now.get(b"k").ok(), Some(Some(b"1".to_vec())));
    assert_eq!(
        now.get(b"j").ok(),
        Some(None),
        "a failed commit applies nothing"
    );
    // A plain write after the snapshot conflicts the same way.
    let mut t = begin(engine);
    put(engine, b"k", b"plain");
    let wrote = t.put(b"k".to_vec(), b"3".to_vec());
    if wrote.is_ok() {
        assert!(is_conflict(&t.commit(Durability::Buffered)));
    } else {
        assert!(is_conflict(&wrote), "{wrote:?}");
    }
    assert_eq!(
        snapshot_of(engine).get(b"k").ok(),
        Some(Some(b"plain".to_vec()))
    );
    // Writes to keys nobody else changed commit beside a conflict elsewhere.
    let mut a = begin(engine);
    let mut b = begin(engine);
    assert!(a.put(b"x".to_vec(), b"a".to_vec()).is_ok());
    assert!(b.put(b"y".to_vec(), b"b".to_vec()).is_ok());
    assert!(b.commit(Durability::Buffered).is_ok());
    assert!(a.commit(Durability::Buffered).is_ok());
}

fn transaction_rollback_frees_its_keys(engine: &Arc<dyn Engine>) {
    let mut t = begin(engine);
    assert!(t.put(b"k".to_vec(), b"1".to_vec()).is_ok());
    drop(t);
    assert_eq!(snapshot_of(engine).get(b"k").ok(), Some(None));
    let mut t = begin(engine);
    assert!(t.put(b"k".to_vec(), b"2".to_vec()).is_ok());
    assert!(t.commit(Durability::Buffered).is_ok());
    // A committed transaction frees its keys too.
    let mut t = begin(engine);
    assert!(t.put(b"k".to_vec(), b"3".to_vec()).is_ok());
    assert!(t.commit(Durability::Buffered).is_ok());
    assert_eq!(
        snapshot_of(engine).get(b"k").ok(),
        Some(Some(b"3".to_vec()))
    );
}

fn transaction_scan_merges_its_writes(engine: &Arc<dyn Engine>) {
    let mut b = WriteBatch::new();
    for k in [&b"a"[..], b"b", b"c", b"d", b"e"] {
        b.put(k.to_vec(), b"stored".to_vec());
    }
    assert!(engine.write(b, Durability::Buffered).is_ok());
    let mut t = begin(engine);
    assert!(t.delete(b"b".to_vec()).is_ok());
    assert!(t.delete(b"c".to_vec()).is_ok());
    assert!(t.put(b"bb".to_vec(), b"own".to_vec()).is_ok());
    assert!(t.put(b"d".to_vec(), b"own".to_vec()).is_ok());
    assert!(t.delete(b"zz".to_vec()).is_ok());
    let keys = |start: Bound<&[u8]>, end: Bound<&[u8]>, reverse: bool, limit: usize| {
        t.scan(start, end, reverse, limit)
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (String::from_utf8_lossy(&k).into_owned(), v == b"own"))
            .collect::<Vec<_>>()
    };
    let s = |k: &str, own: bool| (k.to_string(), own);
    use Bound::*;
    assert_eq!(
        keys(Unbounded, Unbounded, false, 10),
        vec![s("a", false), s("bb", true), s("d", true), s("e", false)]
    );
    assert_eq!(
        keys(Unbounded, Unbounded, false, 2),
        vec![s("a", false), s("bb", true)]
    );
    assert_eq!(
        keys(Unbounded, Unbounded, true, 3),
        vec![s("e", false), s("d", true), s("bb", true)]
    );
    assert_eq!(
        keys(Excluded(b"a"), Included(b"d"), false, 10),
        vec![s("bb", true), s("d", true)]
    );
    assert_eq!(keys(Included(b"c"), Excluded(b"b"), false, 10), vec![]);
    assert_eq!(keys(Unbounded, Unbounded, false, 0), vec![]);
}

/// Threads that each read a counter and write it back plus one, retrying on
/// conflicts, lose no increment: conflicts are detected, and a commit applies
/// whole.
fn transactions_serialize_concurrent_increments(engine: &Arc<dyn Engine>) {
    const THREADS: u64 = 4;
    const EACH: u64 = 25;
    put(engine, b"n", &0u64.to_be_bytes());
    let read = |v: Option<Vec<u8>>| {
        v.and_then(|b| <[u8; 8]>::try_from(b.as_slice()).ok())
            .map_or(0, u64::from_be_bytes)
    };
    std::thread::scope(|scope| {
        for _ in 0..THREADS {
            scope.spawn(|| {
                let mut done = 0;
                while done < EACH {
                    let mut t = begin(engine);
                    let n = read(t.get(b"n").unwrap_or_default());
                    let wrote = t.put(b"n".to_vec(), (n + 1).to_be_bytes().to_vec());
                    let other = t.put(format!("log{n}").into_bytes(), vec![1]);
                    if wrote.is_err() || other.is_err() {
                        assert!(is_conflict(&wrote) || is_conflict(&other));
                        continue;
                    }
                    match t.commit(Durability::Buffered) {
                        Ok(()) => done += 1,
                        Err(e) => assert!(matches!(e, EngineError::WriteConflict(_)), "{e}"),
                    }
                }
            });
        }
    });
    let s = snapshot_of(engine);
    assert_eq!(read(s.get(b"n").unwrap_or_default()), THREADS * EACH);
    let logs = s
        .scan(
            Bound::Included(b"log"),
            Bound::Excluded(b"loh"),
            false,
            usize::MAX,
        )
        .unwrap_or_default();
    assert_eq!(
        logs.len() as u64,
        THREADS * EACH,
        "one log entry per increment"
    );
}

/// Engines with the `snapshot_at` capability read again at a point a
/// snapshot reported (while that snapshot is held); the others refuse.
fn snapshot_at_or_refusal(engine: &Arc<dyn Engine>) {
    put(engine, b"k", b"1");
    let first = snapshot_of(engine);
    put(engine, b"k", b"2");
    put(engine, b"j", b"3");
    if !engine.capabilities().snapshot_at {
        assert_eq!(first.commit_point(), None);
        assert!(matches!(
            engine.snapshot_at(CommitPoint(1)),
            Err(EngineError::Unsupported(_))
        ));
        return;
    }
    let point = first
        .commit_point()
        .unwrap_or_else(|| panic!("a snapshot of an engine with snapshot_at has a point"));
    let again = engine
        .snapshot_at(point)
        .unwrap_or_else(|e| panic!("snapshot_at a held point: {e}"));
    assert_eq!(all(&again), all(&first));
    assert_eq!(all(&again), vec![kv(b"k", b"1")]);
    let now = snapshot_of(engine);
    let latest = now
        .commit_point()
        .unwrap_or_else(|| panic!("every snapshot has a point"));
    assert!(latest > point, "points grow with commits");
    assert!(matches!(
        engine.snapshot_at(CommitPoint(latest.0.saturating_add(1))),
        Err(EngineError::InvalidArgument(_))
    ));
}

/// A transaction begun on a snapshot taken earlier reads it, not the
/// present; its commit of a key changed since is a conflict, of another key
/// applies. Engines that cannot refuse with Unsupported.
fn transaction_on_a_past_snapshot(engine: &Arc<dyn Engine>) {
    put(engine, b"k", b"1");
    let past = snapshot_of(engine);
    put(engine, b"k", b"2");
    let mut t = match engine.begin_on(past.clone()) {
        Ok(t) => t,
        Err(EngineError::Unsupported(_)) => return,
        Err(e) => panic!("begin_on a held snapshot: {e}"),
    };
    assert_eq!(t.get(b"k").ok(), Some(Some(b"1".to_vec())));
    assert!(t.put(b"k".to_vec(), b"3".to_vec()).is_ok());
    assert!(is_conflict(&t.commit(Durability::Buffered)));
    assert_eq!(
        snapshot_of(engine).get(b"k").ok(),
        Some(Some(b"2".to_vec()))
    );
    let mut t = engine
        .begin_on(past)
        .unwrap_or_else(|e| panic!("begin_on a held snapshot: {e}"));
    assert!(t.put(b"other".to_vec(), b"4".to_vec()).is_ok());
    assert!(t.commit(Durability::Buffered).is_ok());
    assert_eq!(
        snapshot_of(engine).get(b"other").ok(),
        Some(Some(b"4".to_vec()))
    );
}

/// Proptest strategies for [`Op`] sequences.
pub fn proptest_ops() -> impl proptest::strategy::Strategy<Value = Vec<Op>> {
    use proptest::prelude::*;
    let key = || {
        proptest::collection::vec(
            // First bytes 0x02..=0x04 straddle the regions the store's layout
            // writes out of order, which an engine may keep apart (lsm gives
            // them a keyspace of their own): scans must cross such splits.
            prop_oneof![
                Just(0x00u8),
                Just(0x01),
                Just(0x02),
                Just(0x03),
                Just(0x04),
                Just(0x7F),
                Just(0xFF)
            ],
            0..4,
        )
    };
    let bound = move || {
        prop_oneof![
            Just(Bound::Unbounded),
            key().prop_map(Bound::Included),
            key().prop_map(Bound::Excluded)
        ]
    };
    let op = prop_oneof![
        4 => proptest::collection::vec((key(), proptest::option::of(proptest::collection::vec(any::<u8>(), 0..3))), 1..6)
            .prop_map(Op::Write),
        1 => Just(Op::Snapshot),
        1 => (0usize..8, key()).prop_map(|(snap, key)| Op::Get { snap, key }),
        3 => (0usize..8, bound(), bound(), any::<bool>(), 0usize..10)
            .prop_map(|(snap, start, end, reverse, limit)| Op::Scan { snap, start, end, reverse, limit }),
    ];
    proptest::collection::vec(op, 0..80)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn random_ops_are_deterministic_and_mixed() {
        let a = random_ops(42, 200);
        let b = random_ops(42, 200);
        assert_eq!(format!("{a:?}"), format!("{b:?}"));
        assert!(a.iter().any(|o| matches!(o, Op::Snapshot)));
        assert!(a
            .iter()
            .any(|o| matches!(o, Op::Scan { reverse: true, .. })));
        assert!(a.iter().any(|o| matches!(o, Op::Write(_))));
    }

    #[test]
    fn model_scan_reverse_takes_from_top() {
        let mut m = Model::new();
        for k in [1u8, 2, 3, 4] {
            m.insert(vec![k], vec![]);
        }
        let got = model_scan(&m, &Bound::Included(vec![2]), &Bound::Unbounded, true, 2);
        assert_eq!(
            got.into_iter().map(|(k, _)| k).collect::<Vec<_>>(),
            vec![vec![4], vec![3]]
        );
    }
}
