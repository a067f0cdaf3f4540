//! Secondary indexes against a model: for random documents (arrays, nested
//! documents, mixed types) and random filters, an index scan plus a re-check
//! of the filter returns exactly what a collection scan returns, on both
//! engines, after inserts, replacements and deletes. Plus unique enforcement
//! under racing writers, builds, drops and reopening.

use std::collections::BTreeSet;
use std::sync::Arc;

use bisondb_query::matcher::bounds::field_bounds;
use bisondb_query::matcher::Matcher;
use bson::{doc, Bson, Document, RawDocument, RawDocumentBuf};

use crate::catalog::Storage;
use crate::store::{Collection, Modify};
use crate::{id_of, LsmEngine, LsmOptions};
use bisondb_engine::memory::MemoryEngine;
use bisondb_engine::{Durability, Engine};

use super::IndexSpec;

/// xorshift64*: deterministic and dependency-free.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn scalar(r: &mut Rng) -> Bson {
    match r.below(9) {
        0 => Bson::Int32(r.below(6) as i32),
        1 => Bson::Int64(r.below(6) as i64),
        2 => Bson::Double(r.below(12) as f64 / 2.0),
        3 => Bson::String(["", "a", "b", "ab"][r.below(4) as usize].to_string()),
        4 => Bson::Null,
        5 => Bson::Boolean(r.below(2) == 1),
        6 => Bson::DateTime(bson::DateTime::from_millis(r.below(5) as i64 * 1000)),
        7 => Bson::Document(doc! {"b": r.below(4) as i32}),
        _ => Bson::Double(f64::NAN),
    }
}

fn value(r: &mut Rng) -> Bson {
    match r.below(6) {
        0 => Bson::Array((0..r.below(4)).map(|_| scalar(r)).collect()),
        1 => Bson::Array(
            (0..r.below(3))
                .map(|_| Bson::Document(doc! {"b": scalar(r)}))
                .collect(),
        ),
        _ => scalar(r),
    }
}

fn random_doc(r: &mut Rng, id: i32) -> RawDocumentBuf {
    let mut d = doc! {"_id": id};
    if r.below(5) != 0 {
        d.insert("a", value(r));
    }
    if r.below(4) != 0 {
        d.insert("c", scalar(r));
    }
    RawDocumentBuf::try_from(&d).unwrap_or_else(|e| panic!("doc: {e}"))
}

fn random_filter(r: &mut Rng) -> Document {
    let path = ["a", "a.b", "c"][r.below(3) as usize];
    let op = |r: &mut Rng| -> Bson {
        match r.below(8) {
            0 => scalar(r),
            1 => Bson::Document(doc! {"$gt": scalar(r)}),
            2 => Bson::Document(doc! {"$lte": scalar(r)}),
            3 => Bson::Document(doc! {"$gte": scalar(r), "$lt": scalar(r)}),
            4 => Bson::Document(doc! {"$in": [scalar(r), scalar(r), scalar(r)]}),
            5 => Bson::Document(doc! {"$elemMatch": {"$gt": scalar(r), "$lt": scalar(r)}}),
            6 => value(r),
            _ => Bson::Document(doc! {"$ne": scalar(r)}),
        }
    };
    let mut f = Document::new();
    f.insert(path, op(r));
    if r.below(3) == 0 {
        let other = ["a", "c"][r.below(2) as usize];
        if other != path {
            f.insert(other, op(r));
        }
    }
    f
}

fn specs() -> Vec<IndexSpec> {
    let spec = |name: &str, key: Document| IndexSpec {
        name: name.into(),
        key,
        unique: false,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        background: None,
        collation: None,
        type_options: bson::Document::new(),
    };
    vec![
        spec("a_1", doc! {"a": 1}),
        spec("a_-1_c_1", doc! {"a": -1, "c": 1}),
        spec("a.b_1", doc! {"a.b": 1}),
        spec("c_-1_a_1", doc! {"c": -1, "a": 1}),
        // Hashed (`c` never holds arrays, which a hashed index refuses).
        spec("c_hashed", doc! {"c": "hashed"}),
    ]
}

fn ids_of(docs: impl Iterator<Item = RawDocumentBuf>) -> BTreeSet<String> {
    docs.map(|d| {
        id_of(&d)
            .and_then(|v| Bson::try_from(v).ok())
            .map(|b| b.to_string())
            .unwrap_or_default()
    })
    .collect()
}

fn by_scan(c: &Collection, m: &Matcher) -> BTreeSet<String> {
    ids_of(
        c.scan(false)
            .map(|d| d.unwrap_or_else(|e| panic!("{e}")))
            .filter(|d| m.matches(d)),
    )
}

fn by_index(c: &Collection, m: &Matcher, name: &str, reverse: bool) -> BTreeSet<String> {
    let info = c
        .indexes()
        .into_iter()
        .find(|i| i.spec.name == name)
        .unwrap_or_else(|| panic!("no index {name}"));
    let bounds: Vec<_> = info
        .fields
        .iter()
        .map(|f| field_bounds(m, &f.path, info.multikey))
        .collect();
    let bounds = super::hash_bounds(&info.spec, bounds);
    let snap = c.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    let scan = c
        .index_scan(snap.clone(), name, &bounds, reverse)
        .unwrap_or_else(|| panic!("scan {name}"));
    let mut out = Vec::new();
    for id in scan {
        let id = id.unwrap_or_else(|e| panic!("{e}"));
        if let Some(d) = c
            .fetch(snap.as_ref(), &id)
            .unwrap_or_else(|e| panic!("{e}"))
        {
            if m.matches(&d) {
                out.push(d);
            }
        }
    }
    ids_of(out.into_iter())
}

/// Every key and value stored in `[start, end)`.
fn stored(
    snap: &dyn bisondb_engine::Snapshot,
    (s, e): (Vec<u8>, Vec<u8>),
) -> Vec<(Vec<u8>, Vec<u8>)> {
    snap.scan(
        std::ops::Bound::Included(&s),
        std::ops::Bound::Excluded(&e),
        false,
        usize::MAX,
    )
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The ranges of the collection's secondary-index entries and markers
/// (the `_id` index of a record-id collection, index id 0, left out).
fn secondary_ranges(c: &Collection) -> Vec<(Vec<u8>, Vec<u8>)> {
    let id = c.state().id;
    super::collection_ranges(id)
        .into_iter()
        .map(|(s, e)| {
            if s == super::index_prefix(id, 0)[..9] {
                (super::index_prefix(id, 1), e)
            } else {
                (s, e)
            }
        })
        .collect()
}

/// Every index holds exactly the keys its documents generate, and the
/// collection's stats record counts exactly the stored entries and key bytes.
fn check_consistent(c: &Collection) {
    let snap = c.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    let state = c.state().clone();
    // The `_id` index: the document keys, or a record-id collection's `_id` entries.
    let id_range = c
        .id_index_range()
        .unwrap_or_else(|| crate::layout::doc_range(state.id));
    let key_bytes: u64 = stored(snap.as_ref(), id_range)
        .iter()
        .map(|(k, v)| {
            // A record-id collection's entries name a record: their rid
            // counts at its logical size (`records::RID_LEN`).
            if c.has_record_ids() {
                crate::store::records::decode_rid_value(v)
                    .unwrap_or_else(|e| panic!("_id entry {k:?}: {e}"));
            }
            (k.len()
                + if c.has_record_ids() {
                    crate::store::records::RID_LEN
                } else {
                    0
                }) as u64
        })
        .sum();
    assert_eq!(c.id_index_bytes(), key_bytes, "bytes of the document keys");
    for ix in state.indexes.read().iter() {
        let mut want = BTreeSet::new();
        for d in c.scan(false) {
            let d = d.unwrap_or_else(|e| panic!("{e}"));
            let enc = crate::keycode::encode_id(id_of(&d).unwrap_or(bson::RawBsonRef::Null));
            for (e, _) in super::entries(ix, state.id, &d, &enc)
                .unwrap_or_else(|e| panic!("{e}"))
                .0
            {
                want.insert(e.key);
            }
        }
        let entries = stored(snap.as_ref(), super::index_range(state.id, ix.id));
        let bytes: u64 = entries
            .iter()
            .map(|(k, v)| (k.len() + v.len()) as u64)
            .sum();
        let got: BTreeSet<Vec<u8>> = entries.into_iter().map(|(k, _)| k).collect();
        assert_eq!(got, want, "entries of {}", ix.spec.name);
        let info = ix.info();
        assert_eq!(
            (info.entries, info.bytes),
            (got.len() as u64, bytes),
            "tally of {}",
            ix.spec.name
        );
    }
}

fn model_run(engine: Arc<dyn Engine>, seed: u64) {
    let storage = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
    let mut r = Rng(seed);
    // Half the indexes exist before the documents (maintained on insert), half
    // are built over existing documents.
    let all = specs();
    let (early, late) = all.split_at(2);
    for s in early {
        storage
            .create_index("db", "c", s.clone())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let c = storage
        .collection("db", "c")
        .unwrap_or_else(|| panic!("coll"));
    let mut n = 0;
    let insert = |c: &Collection, r: &mut Rng, n: &mut i32| {
        let docs: Vec<RawDocumentBuf> = (0..20)
            .map(|_| {
                *n += 1;
                random_doc(r, *n)
            })
            .collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        let out = c.insert_many(&refs, false, Durability::Buffered);
        // Parallel arrays are impossible here (only `a` holds arrays).
        assert!(out.errors.is_empty(), "{:?}", out.errors);
    };
    for _ in 0..5 {
        insert(&c, &mut r, &mut n);
    }
    for s in late {
        storage
            .create_index("db", "c", s.clone())
            .unwrap_or_else(|e| panic!("{e}"));
    }
    for round in 0..6 {
        insert(&c, &mut r, &mut n);
        for _ in 0..15 {
            let id = Bson::Int32(r.below(n as u64 + 1) as i32);
            let raw = bson::RawBson::try_from(id.clone()).unwrap_or_else(|e| panic!("{e}"));
            let replacement = {
                let mut d = Document::try_from(random_doc(&mut r, 0).as_ref())
                    .unwrap_or_else(|e| panic!("{e}"));
                d.insert("_id", id);
                RawDocumentBuf::try_from(&d).unwrap_or_else(|e| panic!("{e}"))
            };
            let delete = r.below(3) == 0;
            c.modify(raw.as_raw_bson_ref(), Durability::Buffered, &mut |cur| {
                Ok(match cur {
                    None => Modify::Keep,
                    Some(_) if delete => Modify::Delete,
                    Some(_) => Modify::Replace(replacement.clone()),
                })
            })
            .unwrap_or_else(|e| panic!("{e}"));
        }
        check_consistent(&c);
        for _ in 0..40 {
            let f = random_filter(&mut r);
            let m = Matcher::parse_doc(&f).unwrap_or_else(|e| panic!("{e}"));
            let want = by_scan(&c, &m);
            for s in &all {
                for reverse in [false, true] {
                    assert_eq!(
                        by_index(&c, &m, &s.name, reverse),
                        want,
                        "round {round} filter {f} index {} reverse {reverse}",
                        s.name
                    );
                }
            }
        }
    }
    // The sizes are read back from the stats record as they were kept.
    let sizes = |c: &Collection| {
        let ix: Vec<(String, u64, u64)> = c
            .indexes()
            .into_iter()
            .map(|i| (i.spec.name, i.entries, i.bytes))
            .collect();
        (c.count(), c.data_size(), c.id_index_bytes(), ix)
    };
    let reopened = Storage::open(engine).unwrap_or_else(|e| panic!("{e}"));
    let again = reopened
        .collection("db", "c")
        .unwrap_or_else(|| panic!("coll"));
    assert_eq!(sizes(&again), sizes(&c));
    check_consistent(&again);
}

#[test]
fn index_results_equal_collection_scan_memory() {
    for seed in 1..6 {
        model_run(MemoryEngine::shared(), seed);
    }
}

#[test]
fn index_results_equal_collection_scan_lsm() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine =
        LsmEngine::open(dir.path(), crate::store_lsm_options()).unwrap_or_else(|e| panic!("{e}"));
    model_run(Arc::new(engine), 7);
}

/// The same with an index write buffer of a few KiB, so index reads merge runs
/// with index tables that ingestion fills meanwhile.
#[test]
fn index_results_equal_collection_scan_lsm_through_a_small_index_buffer() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let options = LsmOptions {
        index_buffer_bytes: 4 << 10,
        ..crate::store_lsm_options()
    };
    let engine = LsmEngine::open(dir.path(), options).unwrap_or_else(|e| panic!("{e}"));
    model_run(Arc::new(engine), 11);
}

fn unique(name: &str, key: Document) -> IndexSpec {
    IndexSpec {
        name: name.into(),
        key,
        unique: true,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        background: None,
        collation: None,
        type_options: bson::Document::new(),
    }
}

fn raw(d: Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(&d).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn racing_unique_inserts_give_exactly_one_success() {
    let storage = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
    storage
        .create_index("db", "u", unique("email_1", doc! {"email": 1}))
        .unwrap_or_else(|e| panic!("{e}"));
    let c = storage
        .collection("db", "u")
        .unwrap_or_else(|| panic!("coll"));
    for round in 0..200 {
        let email = format!("user{round}@x");
        let barrier = Arc::new(std::sync::Barrier::new(2));
        let handles: Vec<_> = (0..2)
            .map(|t| {
                let (c, b, email) = (c.clone(), barrier.clone(), email.clone());
                std::thread::spawn(move || {
                    let d = raw(doc! {"_id": round * 2 + t, "email": email});
                    b.wait();
                    c.insert_many(&[d.as_ref()], true, Durability::Buffered)
                })
            })
            .collect();
        let outs: Vec<_> = handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| panic!("thread")))
            .collect();
        let ok = outs.iter().filter(|o| o.inserted == 1).count();
        assert_eq!(ok, 1, "round {round}");
        let err = outs
            .iter()
            .find_map(|o| o.errors.first().map(|(_, e)| e.to_string()))
            .unwrap_or_default();
        assert_eq!(
            err,
            format!(
                "E11000 duplicate key error collection: db.u index: email_1 dup key: {{ email: \"{email}\" }}"
            )
        );
    }
    assert_eq!(c.count(), 200);
}

#[test]
fn unique_build_over_duplicates_fails_and_leaves_nothing() {
    let storage = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
    let c = storage
        .get_or_create_collection("db", "d")
        .unwrap_or_else(|e| panic!("{e}"));
    let docs: Vec<RawDocumentBuf> = (0..20_000)
        .map(|i| raw(doc! {"_id": i, "k": if i == 19_999 { 0 } else { i }}))
        .collect();
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    assert_eq!(
        c.insert_many(&refs, true, Durability::Buffered).inserted,
        20_000
    );
    let err = storage
        .create_index("db", "d", unique("k_1", doc! {"k": 1}))
        .err()
        .unwrap_or_else(|| panic!("build should fail"));
    assert_eq!(err.code.code(), 11000);
    assert!(c.indexes().is_empty());
    let snap = c.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for (s, e) in secondary_ranges(&c) {
        let left = snap
            .scan(
                std::ops::Bound::Included(&s),
                std::ops::Bound::Excluded(&e),
                false,
                1,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(left.is_empty(), "no index keys may remain");
    }
    // A non-unique build over the same data works and is complete.
    let mut spec = unique("k_1", doc! {"k": 1});
    spec.unique = false;
    assert!(storage
        .create_index("db", "d", spec)
        .unwrap_or_else(|e| panic!("{e}")));
    check_consistent(&c);
}

#[test]
fn unique_updates_and_parallel_arrays_are_refused() {
    let storage = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
    storage
        .create_index("db", "p", unique("x_1", doc! {"x": 1}))
        .unwrap_or_else(|e| panic!("{e}"));
    let ab = IndexSpec {
        unique: false,
        ..unique("a_1_b_1", doc! {"a": 1, "b": 1})
    };
    storage
        .create_index("db", "p", ab)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = storage
        .collection("db", "p")
        .unwrap_or_else(|| panic!("coll"));
    let docs = [raw(doc! {"_id": 1, "x": 1}), raw(doc! {"_id": 2, "x": 2})];
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    assert_eq!(c.insert_many(&refs, true, Durability::Buffered).inserted, 2);
    let err = c
        .modify(
            bson::RawBsonRef::Int32(2),
            Durability::Buffered,
            &mut |_| Ok(Modify::Replace(raw(doc! {"_id": 2, "x": 1}))),
        )
        .err()
        .unwrap_or_else(|| panic!("duplicate expected"));
    assert_eq!(err.code.code(), 11000);
    // Keeping its own key is fine.
    c.modify(
        bson::RawBsonRef::Int32(2),
        Durability::Buffered,
        &mut |_| Ok(Modify::Replace(raw(doc! {"_id": 2, "x": 2, "y": 1}))),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let bad = raw(doc! {"_id": 3, "a": [1], "b": [2]});
    let out = c.insert_many(&[bad.as_ref()], true, Durability::Buffered);
    let e: bisondb_error::MongoError = out.errors[0].1.clone().into();
    assert_eq!(e.code.code(), 171);
    assert_eq!(c.count(), 2);
    check_consistent(&c);
}

#[test]
fn conflicting_definitions_and_drop() {
    let storage = Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
    let base = IndexSpec {
        unique: false,
        ..unique("a_1", doc! {"a": 1})
    };
    assert!(storage
        .create_index("db", "x", base.clone())
        .unwrap_or_else(|e| panic!("{e}")));
    assert!(!storage
        .create_index("db", "x", base.clone())
        .unwrap_or_else(|e| panic!("{e}")));
    let cases = [
        (
            IndexSpec {
                key: doc! {"a": -1},
                ..base.clone()
            },
            86,
        ),
        // `unique` is part of mongod's index signature (compareIndexOptions),
        // so the same name over another signature is 86; an option outside
        // the signature (a TTL) is 85.
        (
            IndexSpec {
                unique: true,
                ..base.clone()
            },
            86,
        ),
        (
            IndexSpec {
                expire_after_seconds: Some(5),
                ..base.clone()
            },
            85,
        ),
        (
            IndexSpec {
                name: "other".into(),
                ..base.clone()
            },
            85,
        ),
    ];
    for (spec, code) in cases {
        let e = storage
            .create_index("db", "x", spec)
            .err()
            .unwrap_or_else(|| panic!("conflict"));
        assert_eq!(e.code.code(), code, "{}", e.message);
    }
    let c = storage
        .collection("db", "x")
        .unwrap_or_else(|| panic!("coll"));
    let d = raw(doc! {"_id": 1, "a": 1});
    c.insert_many(&[d.as_ref()], true, Durability::Buffered);
    assert!(storage
        .drop_index("db", "x", "a_1")
        .unwrap_or_else(|e| panic!("{e}")));
    assert!(!storage
        .drop_index("db", "x", "a_1")
        .unwrap_or_else(|e| panic!("{e}")));
    let snap = c.snapshot().unwrap_or_else(|e| panic!("snapshot: {e}"));
    for (s, e) in secondary_ranges(&c) {
        let left = snap
            .scan(
                std::ops::Bound::Included(&s),
                std::ops::Bound::Excluded(&e),
                false,
                1,
            )
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(left.is_empty());
    }
}

#[test]
fn reopen_keeps_indexes_and_multikey() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    {
        let engine = LsmEngine::open(dir.path(), crate::store_lsm_options())
            .unwrap_or_else(|e| panic!("{e}"));
        let storage = Storage::open(Arc::new(engine)).unwrap_or_else(|e| panic!("{e}"));
        let spec = IndexSpec {
            sparse: true,
            expire_after_seconds: Some(30),
            ..unique("t_1", doc! {"t": 1})
        };
        storage
            .create_index("db", "r", spec)
            .unwrap_or_else(|e| panic!("{e}"));
        let c = storage
            .collection("db", "r")
            .unwrap_or_else(|| panic!("coll"));
        let d = raw(doc! {"_id": 1, "t": [1, 2]});
        assert_eq!(
            c.insert_many(&[d.as_ref()], true, Durability::Sync)
                .inserted,
            1
        );
        storage.sync().unwrap_or_else(|e| panic!("{e}"));
    }
    let engine = crate::testing::open_lsm(dir.path(), crate::store_lsm_options());
    let storage = Storage::open(Arc::new(engine)).unwrap_or_else(|e| panic!("{e}"));
    let c = storage
        .collection("db", "r")
        .unwrap_or_else(|| panic!("coll"));
    let ix = c.indexes();
    assert_eq!(ix.len(), 1);
    assert_eq!(ix[0].spec.name, "t_1");
    assert!(ix[0].spec.unique && ix[0].spec.sparse);
    assert_eq!(ix[0].spec.expire_after_seconds, Some(30));
    assert!(ix[0].multikey);
    check_consistent(&c);
    let dup = raw(doc! {"_id": 2, "t": 2});
    let out = c.insert_many(&[dup.as_ref()], true, Durability::Buffered);
    assert_eq!(
        out.inserted, 0,
        "the unique index is enforced after reopening"
    );
}

#[test]
fn hashed_index_refuses_arrays_and_unique_stays_off() {
    let storage = Storage::open(Arc::new(MemoryEngine::new())).unwrap_or_else(|e| panic!("{e}"));
    let spec = IndexSpec {
        name: "a_1_b_hashed".into(),
        key: doc! {"a": 1, "b": "hashed"},
        unique: false,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        background: None,
        collation: None,
        type_options: bson::Document::new(),
    };
    storage
        .create_index("db", "h", spec)
        .unwrap_or_else(|e| panic!("{e}"));
    let c = storage
        .collection("db", "h")
        .unwrap_or_else(|| panic!("coll"));
    // Numerically equal values are one hashed key: found through the hash
    // of any of them.
    let docs = [
        raw(doc! {"_id": 1, "a": 1, "b": 1}),
        raw(doc! {"_id": 2, "a": 1, "b": 1.0}),
        raw(doc! {"_id": 3, "a": 1, "b": 2i64}),
    ];
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    let out = c.insert_many(&refs, false, Durability::Buffered);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
    let m = Matcher::parse_doc(&doc! {"b": 1i64}).unwrap_or_else(|e| panic!("{e}"));
    let want: BTreeSet<String> = ["1", "2"].iter().map(|s| s.to_string()).collect();
    assert_eq!(by_index(&c, &m, "a_1_b_hashed", false), want);
    // Arrays in any field of a hashed index fail the write with 16766.
    for bad in [doc! {"_id": 4, "b": [1]}, doc! {"_id": 5, "a": [], "b": 1}] {
        let d = raw(bad);
        let out = c.insert_many(&[d.as_ref()], false, Durability::Buffered);
        let err = format!("{:?}", out.errors);
        assert!(err.contains("16766"), "{err}");
    }
    check_consistent(&c);
}

#[test]
fn hash_bounds_hash_points_and_drop_ranges() {
    let spec = IndexSpec {
        name: "a_1_b_hashed".into(),
        key: doc! {"a": 1, "b": "hashed"},
        unique: false,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        background: None,
        collation: None,
        type_options: bson::Document::new(),
    };
    let bounds = |f: Document| {
        let m = Matcher::parse_doc(&f).unwrap_or_else(|e| panic!("{e}"));
        let b = ["a", "b"].map(|p| field_bounds(&m, p, false)).to_vec();
        super::hash_bounds(&spec, b)
    };
    let h = |v: Bson| {
        let r = bson::RawBson::try_from(v).unwrap_or_else(|e| panic!("{e}"));
        Bson::Int64(crate::keycode::hashed_key(r.as_raw_bson_ref()))
    };
    // $in points become their hashes, numerically equal ones once, sorted.
    let b = bounds(doc! {"a": {"$gt": 1}, "b": {"$in": [1, 1.0, 2i64]}});
    let mut want = vec![h(Bson::Int32(1)), h(Bson::Int32(2))];
    want.sort_by_key(|v| v.as_i64());
    let got: Vec<Bson> = b[1].intervals.iter().map(|i| i.lo.clone()).collect();
    assert_eq!(got, want);
    assert!(b[1].is_points() && !b[1].exact);
    // The non-hashed field keeps its range as it was.
    assert!(!b[0].is_full() && !b[0].is_points());
    // A range on the hashed field bounds nothing.
    assert!(bounds(doc! {"b": {"$gte": 3}})[1].is_full());
}

/// A text index as `createIndexes` stores it.
fn text_spec(key: Document, weights: Document) -> IndexSpec {
    let mut full = doc! {"key": key};
    full.insert("weights", weights);
    let (key, options) = bisondb_query::text::fix_spec(&full).unwrap_or_else(|e| panic!("{e}"));
    IndexSpec {
        name: "text".into(),
        key,
        unique: false,
        sparse: false,
        partial_filter: None,
        expire_after_seconds: None,
        hidden: false,
        background: None,
        collation: None,
        type_options: options,
    }
}

#[test]
fn text_entries_follow_terms_through_writes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let lsm =
        LsmEngine::open(dir.path(), crate::store_lsm_options()).unwrap_or_else(|e| panic!("{e}"));
    for engine in [
        Arc::new(MemoryEngine::new()) as Arc<dyn Engine>,
        Arc::new(lsm) as Arc<dyn Engine>,
    ] {
        let storage = Storage::open(engine).unwrap_or_else(|e| panic!("{e}"));
        storage
            .create_index(
                "db",
                "t",
                text_spec(doc! {"k": 1, "t": "text", "u": "text"}, doc! {"t": 3}),
            )
            .unwrap_or_else(|e| panic!("{e}"));
        let c = storage
            .collection("db", "t")
            .unwrap_or_else(|| panic!("coll"));
        let docs = [
            raw(doc! {"_id": 1, "k": 1, "t": "Running dogs", "u": ["cats", "dogs"]}),
            raw(doc! {"_id": 2, "k": 2, "t": "the and of"}),
            raw(doc! {"_id": 3, "u": {"x": "nested is not indexed"}}),
        ];
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        let out = c.insert_many(&refs, false, Durability::Buffered);
        assert!(out.errors.is_empty(), "{:?}", out.errors);
        check_consistent(&c);
        // One entry per distinct term: run, dog, cat for _id 1; stop words
        // and non-indexed paths give none.
        let range = super::index_range(c.state().id, c.state().indexes.read()[0].id);
        let n = stored(
            c.snapshot()
                .unwrap_or_else(|e| panic!("snapshot: {e}"))
                .as_ref(),
            range,
        )
        .len();
        assert_eq!(n, 3);
        // Replacing and deleting keep the entries in step with the documents.
        c.modify(
            bson::RawBsonRef::Int32(1),
            Durability::Buffered,
            &mut |_| Ok(Modify::Replace(raw(doc! {"_id": 1, "k": 1, "t": "birds"}))),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        c.modify(
            bson::RawBsonRef::Int32(2),
            Durability::Buffered,
            &mut |_| Ok(Modify::Delete),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        check_consistent(&c);
        // Arrays in a prefix field and bad language fields fail the write.
        for (bad, code) in [
            (doc! {"_id": 9, "k": [1], "t": "x"}, "CannotBuildIndexKeys"),
            (doc! {"_id": 9, "t": "x", "language": 3}, "17261"),
            (doc! {"_id": 9, "t": "x", "language": "xx"}, "17262"),
        ] {
            let d = raw(bad);
            let out = c.insert_many(&[d.as_ref()], false, Durability::Buffered);
            let err = format!("{:?}", out.errors);
            assert!(err.contains(code), "{err}");
        }
        check_consistent(&c);
    }
}
