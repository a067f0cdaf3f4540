//! Long keys through the engine and the store: order among long keys sharing
//! their head and against short keys, scans both ways, point reads, unique
//! duplicates, the index write buffer's ingestion, and reopening.

use std::collections::BTreeMap;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use bisondb_engine::{Durability, Engine, KeyValue, WriteBatch};
use bson::{doc, rawdoc, RawBsonRef, RawDocument};

use super::super::{KeyRegions, LsmEngine, LsmOptions, MAX_KEY_LEN};
use super::HEAD_LEN;
use crate::catalog::Storage;
use crate::testing::retry_in_use;

const INDEX_REGION: u8 = 0x03;

fn options(index_buffer_bytes: usize) -> LsmOptions {
    LsmOptions {
        regions: KeyRegions {
            apart: 0x02..0x04,
            buffered: Some(INDEX_REGION),
        },
        index_buffer_bytes,
        ..LsmOptions::default()
    }
}

fn open(dir: &Path, index_buffer_bytes: usize) -> LsmEngine {
    retry_in_use(|| LsmEngine::open(dir, options(index_buffer_bytes)))
        .unwrap_or_else(|e| panic!("open: {e}"))
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"))
}

fn next(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A key of the kind long keys meet: in the main region or the buffered
/// one; short, just short, just long or long; many sharing all of a head
/// (`a` bytes) and differing only after it, or just before its end.
fn random_key(rng: &mut u64) -> Vec<u8> {
    let region = if next(rng).is_multiple_of(2) {
        0x42
    } else {
        INDEX_REGION
    };
    let len = match next(rng) % 8 {
        0 => (next(rng) % 40) as usize + 1,
        1 => MAX_KEY_LEN - (next(rng) % 3) as usize,
        2 => MAX_KEY_LEN + 1 + (next(rng) % 3) as usize,
        3 => HEAD_LEN - 1 + (next(rng) % 3) as usize,
        _ => HEAD_LEN + 2 + (next(rng) % 120_000) as usize,
    };
    let mut key = vec![b'a'; len];
    key[0] = region;
    // Vary a byte after the head, at its last byte, or early on; each from
    // a small alphabet so that keys repeat and collide on their heads.
    for _ in 0..2 {
        let at = match next(rng) % 3 {
            0 => HEAD_LEN + (next(rng) % 3) as usize,
            1 => HEAD_LEN - 1,
            _ => 1 + (next(rng) % 2) as usize,
        };
        if let Some(b) = key.get_mut(at) {
            *b = b'a' - 1 + (next(rng) % 3) as u8;
        }
    }
    key
}

fn all(e: &dyn Engine, reverse: bool) -> Vec<KeyValue> {
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    snap.scan(Bound::Unbounded, Bound::Unbounded, reverse, usize::MAX)
        .unwrap_or_else(|e| panic!("scan: {e}"))
}

fn want_range(
    model: &BTreeMap<Vec<u8>, Vec<u8>>,
    lo: Bound<&[u8]>,
    hi: Bound<&[u8]>,
    reverse: bool,
    limit: usize,
) -> Vec<KeyValue> {
    if bisondb_engine::range_is_empty(lo, hi) {
        return Vec::new();
    }
    let range = model
        .range::<[u8], _>((lo, hi))
        .map(|(k, v)| (k.clone(), v.clone()));
    if reverse {
        range.rev().take(limit).collect()
    } else {
        range.take(limit).collect()
    }
}

fn bound(rng: &mut u64) -> Bound<Vec<u8>> {
    match next(rng) % 5 {
        0 => Bound::Unbounded,
        1 | 2 => Bound::Included(random_key(rng)),
        _ => Bound::Excluded(random_key(rng)),
    }
}

fn short_names(kvs: &[KeyValue]) -> Vec<(usize, u64)> {
    // Keys of 100 KB make assertion messages unreadable: name them by length and hash.
    kvs.iter()
        .map(|(k, _)| (k.len(), xxhash_rust::xxh64::xxh64(k, 0)))
        .collect()
}

fn check(e: &dyn Engine, model: &BTreeMap<Vec<u8>, Vec<u8>>, rng: &mut u64, at: &str) {
    let want: Vec<KeyValue> = model.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
    let got = all(e, false);
    assert!(
        got == want,
        "{at}: forward {:?} != {:?}",
        short_names(&got),
        short_names(&want)
    );
    let mut rev = want.clone();
    rev.reverse();
    let got = all(e, true);
    assert!(
        got == rev,
        "{at}: reverse {:?} != {:?}",
        short_names(&got),
        short_names(&rev)
    );
    let snap = e.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for _ in 0..20 {
        let (lo, hi) = (bound(rng), bound(rng));
        let reverse = next(rng).is_multiple_of(2);
        let limit = [1, 2, 3, usize::MAX][(next(rng) % 4) as usize];
        let (lo, hi) = (
            lo.as_ref().map(Vec::as_slice),
            hi.as_ref().map(Vec::as_slice),
        );
        let got = snap
            .scan(lo, hi, reverse, limit)
            .unwrap_or_else(|e| panic!("{at}: scan: {e}"));
        let want = want_range(model, lo, hi, reverse, limit);
        assert!(
            got == want,
            "{at}: range reverse={reverse} limit={limit}: {:?} != {:?}",
            short_names(&got),
            short_names(&want)
        );
        let probe = random_key(rng);
        let got = snap
            .get(&probe)
            .unwrap_or_else(|e| panic!("{at}: get: {e}"));
        assert_eq!(got.as_ref(), model.get(&probe), "{at}: get");
    }
}

/// Random batches of long and short keys in both regions against a model,
/// with the index write buffer ingesting every batch or holding many, and
/// reopens: every scan (both ways, bounded by long or short keys, limited)
/// and point read answers as the model does.
#[test]
fn long_keys_match_the_model_in_order_across_ingestion_and_reopen() {
    for (seed, buffer) in [(1u64, 300usize), (2, 64 << 20), (3, 300)] {
        let dir = tempdir();
        let mut rng = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut model: BTreeMap<Vec<u8>, Vec<u8>> = BTreeMap::new();
        let mut engine = open(dir.path(), buffer);
        check(&engine, &model, &mut rng, "empty");
        for step in 0..60 {
            let mut b = WriteBatch::new();
            for _ in 0..(next(&mut rng) % 4 + 1) {
                let key = random_key(&mut rng);
                if next(&mut rng).is_multiple_of(4) {
                    b.delete(key.clone());
                    model.remove(&key);
                } else {
                    let value = format!("{seed}-{step}").into_bytes();
                    b.put(key.clone(), value.clone());
                    model.insert(key, value);
                }
            }
            engine
                .write(b, Durability::Buffered)
                .unwrap_or_else(|e| panic!("seed {seed} step {step}: {e}"));
            if step % 10 == 9 {
                check(
                    &engine,
                    &model,
                    &mut rng,
                    &format!("seed {seed} step {step}"),
                );
            }
            if step % 25 == 24 {
                drop(engine);
                engine = open(dir.path(), buffer);
                check(
                    &engine,
                    &model,
                    &mut rng,
                    &format!("seed {seed} reopened at {step}"),
                );
            }
        }
        assert!(
            model.keys().any(|k| k.len() > MAX_KEY_LEN),
            "the model holds long keys"
        );
    }
}

/// Several long keys sharing their whole head come back in key order, not
/// their digests', between the short keys around them.
#[test]
fn long_keys_sharing_a_head_keep_their_order() {
    let dir = tempdir();
    let e = open(dir.path(), 64 << 20);
    let mut keys: Vec<Vec<u8>> = Vec::new();
    for region in [0x42u8, INDEX_REGION] {
        let mut head = vec![b'k'; HEAD_LEN];
        head[0] = region;
        // Long past the head by 40 bytes or more, and one short key inside them.
        let tails: [Vec<u8>; 7] = [
            vec![b'z'; 40],
            vec![b'a'; 40],
            vec![b'm'; 40],
            vec![b'm'; 41],
            b"a".to_vec(),
            vec![b'b'; 40],
            vec![0u8; 70_000],
        ];
        for tail in tails {
            let mut k = head.clone();
            k.extend_from_slice(&tail);
            keys.push(k);
        }
        // Short keys just below and above the head, and the head itself.
        let mut below = head.clone();
        below[HEAD_LEN - 1] = b'j';
        let mut above = head.clone();
        above[HEAD_LEN - 1] = b'l';
        keys.extend([below, above, head]);
    }
    let mut b = WriteBatch::new();
    for (i, k) in keys.iter().enumerate() {
        b.put(k.clone(), i.to_le_bytes().to_vec());
    }
    assert!(e.write(b, Durability::Sync).is_ok());
    assert_eq!(keys.iter().filter(|k| k.len() > MAX_KEY_LEN).count(), 12);
    keys.sort();
    let got: Vec<Vec<u8>> = all(&e, false).into_iter().map(|(k, _)| k).collect();
    assert!(got == keys, "forward order");
    keys.reverse();
    let got: Vec<Vec<u8>> = all(&e, true).into_iter().map(|(k, _)| k).collect();
    assert!(got == keys, "reverse order");
}

fn open_storage(dir: &Path) -> Storage {
    let engine: Arc<dyn Engine> = Arc::new(open(dir, 64 << 20));
    Storage::open(engine).unwrap_or_else(|e| panic!("storage open: {e}"))
}

/// A document with an 8 MB string `_id` and a unique index over 200 KB
/// values: inserted, found, a duplicate refused by either key, updated,
/// scanned through the index both ways, found again after a restart, and
/// deleted, the collection's validation passing throughout.
#[test]
fn huge_id_documents_and_index_keys_work_through_the_store() {
    let dir = tempdir();
    let id = "i".repeat(8 << 20);
    let big = |c: char| c.to_string().repeat(200 << 10);
    let doc = rawdoc! {"_id": id.clone(), "v": big('a')};
    let valid = |c: &crate::Collection| {
        let report = c
            .validate(crate::ValidateOptions::default())
            .unwrap_or_else(|e| panic!("validate: {e}"));
        assert!(report.valid(), "{report:?}");
    };
    {
        let s = open_storage(dir.path());
        s.create_collection("db", "c", doc! {})
            .unwrap_or_else(|e| panic!("create: {e}"));
        let spec =
            crate::IndexSpec::from_document(&doc! {"key": {"v": 1}, "name": "v_1", "unique": true})
                .unwrap_or_else(|| panic!("index spec"));
        assert!(s.create_index("db", "c", spec).is_ok());
        let c = s
            .collection("db", "c")
            .unwrap_or_else(|| panic!("collection"));
        let other = rawdoc! {"_id": 1, "v": big('b')};
        let docs: [&RawDocument; 2] = [&doc, &other];
        assert_eq!(c.insert_many(&docs, true, Durability::Sync).inserted, 2);
        // The same huge `_id`, and another document with the same huge value.
        let dup_id = rawdoc! {"_id": id.clone(), "v": 1};
        let dup_v = rawdoc! {"_id": 2, "v": big('a')};
        for dup in [&dup_id, &dup_v] {
            let out = c.insert_many(&[dup.as_ref()], true, Durability::Sync);
            assert_eq!(out.inserted, 0, "duplicate accepted");
            assert!(
                out.errors
                    .first()
                    .is_some_and(|(_, e)| e.to_string().contains("duplicate")),
                "{:?}",
                out.errors
            );
        }
        // A value differing from the stored one only after 200 KB is no duplicate.
        let mut near = big('a');
        near.push('!');
        let near_doc = rawdoc! {"_id": 3, "v": near};
        assert_eq!(
            c.insert_many(&[&near_doc], true, Durability::Sync).inserted,
            1
        );
        let got = c
            .get(RawBsonRef::String(&id))
            .unwrap_or_else(|e| panic!("get: {e}"));
        assert_eq!(got.as_ref(), Some(&doc));
        let updated = rawdoc! {"_id": id.clone(), "v": big('c')};
        let r = c.modify(RawBsonRef::String(&id), Durability::Sync, &mut |cur| {
            assert!(cur.is_some());
            Ok(crate::Modify::Replace(updated.clone()))
        });
        assert_eq!(r.ok(), Some(crate::ModifyResult::Replaced));
        valid(&c);
        let ids = |reverse: bool| -> Vec<String> {
            let snap = c.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
            let scan = c
                .index_scan(snap.clone(), "v_1", &[], reverse)
                .unwrap_or_else(|| panic!("no index"));
            scan.map(|e| {
                let encoded_id = e.unwrap_or_else(|e| panic!("scan: {e}"));
                let d = c
                    .fetch(snap.as_ref(), &encoded_id)
                    .unwrap_or_else(|e| panic!("fetch: {e}"))
                    .unwrap_or_else(|| panic!("entry without document"));
                match d.get("_id") {
                    Ok(Some(RawBsonRef::String(s))) => format!("s{}", s.len()),
                    Ok(Some(other)) => format!("{other:?}"),
                    other => panic!("no _id: {other:?}"),
                }
            })
            .collect()
        };
        let forward = ids(false);
        assert_eq!(
            forward,
            vec!["Int32(3)", "Int32(1)", &format!("s{}", 8 << 20)]
        );
        let mut backward = ids(true);
        backward.reverse();
        assert_eq!(backward, forward);
    }
    let s = open_storage(dir.path());
    let c = s
        .collection("db", "c")
        .unwrap_or_else(|| panic!("collection"));
    valid(&c);
    let got = c
        .get(RawBsonRef::String(&id))
        .unwrap_or_else(|e| panic!("get: {e}"));
    assert_eq!(
        got.and_then(|d| d.get_str("v").ok().map(|v| v.starts_with('c'))),
        Some(true)
    );
    assert_eq!(c.count(), 3);
    assert_eq!(
        c.delete(RawBsonRef::String(&id), Durability::Sync).ok(),
        Some(true)
    );
    assert!(c.get(RawBsonRef::String(&id)).ok().flatten().is_none());
    assert_eq!(c.count(), 2);
    valid(&c);
    let again = rawdoc! {"_id": 4, "v": big('c')};
    assert_eq!(
        c.insert_many(&[&again], true, Durability::Sync).inserted,
        1,
        "the deleted value is free"
    );
}
