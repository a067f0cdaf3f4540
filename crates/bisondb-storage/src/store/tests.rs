//! Document store behaviour: `_id` order, duplicates across numeric types,
//! exact counts and sizes, concurrency, snapshots, failures and durability.

use super::*;
use crate::catalog::Storage;
use bisondb_engine::memory::MemoryEngine;
use bisondb_engine::EngineError;
use bson::oid::ObjectId;
use bson::{rawdoc, Decimal128};
use std::str::FromStr;
use std::sync::atomic::AtomicBool;

fn open() -> Storage {
    Storage::open(MemoryEngine::shared()).unwrap_or_else(|e| panic!("open: {e}"))
}

fn coll(s: &Storage) -> Collection {
    s.get_or_create_collection("db", "c")
        .unwrap_or_else(|e| panic!("create: {e}"))
}

fn doc_with_id(id: Bson) -> RawDocumentBuf {
    let mut d = bson::Document::new();
    d.insert("_id", id);
    d.insert("pad", "xyz");
    RawDocumentBuf::try_from(&d).unwrap_or_else(|e| panic!("doc: {e}"))
}

fn insert(c: &Collection, docs: &[RawDocumentBuf], ordered: bool) -> InsertOutcome {
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    c.insert_many(&refs, ordered, Durability::Buffered)
}

/// The `_id`s in `_id` order.
fn ids(c: &Collection, reverse: bool) -> Vec<Bson> {
    c.scan_ids(Bound::Unbounded, Bound::Unbounded, reverse)
        .map(|d| {
            let d = d.unwrap_or_else(|e| panic!("scan: {e}"));
            id_of(&d)
                .and_then(|v| Bson::try_from(v).ok())
                .unwrap_or(Bson::Undefined)
        })
        .collect()
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(Decimal128::from_str(s).unwrap_or_else(|e| panic!("{s}: {e}")))
}

fn total_size(docs: &[RawDocumentBuf]) -> u64 {
    docs.iter().map(|d| d.as_bytes().len() as u64).sum()
}

#[test]
fn id_of_prefers_first_field_and_falls_back_to_lookup() {
    let first = rawdoc! {"_id": 1, "a": 2};
    let later = rawdoc! {"a": 2, "_id": "x"};
    let none = rawdoc! {"a": 2};
    assert_eq!(id_of(&first), Some(RawBsonRef::Int32(1)));
    assert_eq!(id_of(&later), Some(RawBsonRef::String("x")));
    assert_eq!(id_of(&none), None);
}

#[test]
fn id_of_reads_a_leading_object_id_as_the_iterator_does() {
    let oid = ObjectId::from_bytes([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 0xff]);
    let docs = [
        rawdoc! {"_id": oid},
        rawdoc! {"_id": oid, "a": 1},
        rawdoc! {"a": 1, "_id": oid},
        rawdoc! {"_idx": oid, "_id": 5},
        rawdoc! {"_i": oid, "_id": 6},
        rawdoc! {"_id": "abcdefghijkl"},
        rawdoc! {"_id": {"a": 1}},
    ];
    for d in &docs {
        let by_iter = d
            .iter()
            .filter_map(Result::ok)
            .find(|(k, _)| k.as_str() == "_id")
            .map(|(_, v)| v);
        assert_eq!(id_of(d), by_iter, "{d:?}");
    }
    assert_eq!(id_of(&docs[0]), Some(RawBsonRef::ObjectId(oid)));
}

#[test]
fn scan_returns_documents_in_bson_order_of_id() {
    let s = open();
    let c = coll(&s);
    let oid = ObjectId::from_bytes([7; 12]);
    // Inserted shuffled; expected order is BSON order.
    let shuffled = vec![
        Bson::String("b".into()),
        Bson::Boolean(true),
        Bson::Int32(3),
        Bson::ObjectId(oid),
        Bson::Double(1.5),
        Bson::Document(bson::doc! {"a": 1}),
        Bson::Null,
        Bson::String("a".into()),
        Bson::MinKey,
        Bson::Int64(-10),
        Bson::MaxKey,
        dec("2.5"),
    ];
    let docs: Vec<RawDocumentBuf> = shuffled.iter().cloned().map(doc_with_id).collect();
    let out = insert(&c, &docs, true);
    assert_eq!(out.inserted, docs.len());
    assert!(out.errors.is_empty());
    let want = vec![
        Bson::MinKey,
        Bson::Null,
        Bson::Int64(-10),
        Bson::Double(1.5),
        dec("2.5"),
        Bson::Int32(3),
        Bson::String("a".into()),
        Bson::String("b".into()),
        Bson::Document(bson::doc! {"a": 1}),
        Bson::ObjectId(oid),
        Bson::Boolean(true),
        Bson::MaxKey,
    ];
    assert_eq!(ids(&c, false), want);
    // A scan without an order returns them as they were inserted.
    let natural: Vec<Bson> = c
        .scan(false)
        .filter_map(|d| {
            d.ok()
                .and_then(|d| id_of(&d).and_then(|v| Bson::try_from(v).ok()))
        })
        .collect();
    assert_eq!(natural, shuffled);
    let mut reversed = want.clone();
    reversed.reverse();
    assert_eq!(ids(&c, true), reversed);
    // get by an equal value of another numeric type finds the stored document.
    let got = c.get(RawBsonRef::Int64(3)).ok().flatten();
    assert_eq!(
        got.as_ref().and_then(|d| id_of(d)),
        Some(RawBsonRef::Int32(3))
    );
    assert_eq!(c.get(RawBsonRef::Int32(4)).ok(), Some(None));
}

#[test]
fn duplicate_ids_within_and_across_batches() {
    struct Case {
        name: &'static str,
        ids: Vec<Bson>,
        ordered: bool,
        inserted: usize,
        failed: Vec<usize>,
        count_after: u64,
    }
    let cases = vec![
        Case {
            name: "1 vs 1.0 in one ordered batch stops at the duplicate",
            ids: vec![Bson::Int32(1), Bson::Double(1.0), Bson::Int32(2)],
            ordered: true,
            inserted: 1,
            failed: vec![1],
            count_after: 1,
        },
        Case {
            name: "unordered keeps going",
            ids: vec![
                Bson::Int32(1),
                Bson::Int64(1),
                Bson::Int32(2),
                dec("1.00"),
                Bson::Int32(3),
            ],
            ordered: false,
            inserted: 3,
            failed: vec![1, 3],
            count_after: 3,
        },
        Case {
            name: "distinct strings and numbers do not collide",
            ids: vec![Bson::String("1".into()), Bson::Int32(1), Bson::Double(1.5)],
            ordered: true,
            inserted: 3,
            failed: vec![],
            count_after: 3,
        },
    ];
    for case in cases {
        let s = open();
        let c = coll(&s);
        let docs: Vec<RawDocumentBuf> = case.ids.iter().cloned().map(doc_with_id).collect();
        let out = insert(&c, &docs, case.ordered);
        assert_eq!(out.inserted, case.inserted, "{}", case.name);
        assert_eq!(
            out.errors.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
            case.failed,
            "{}",
            case.name
        );
        assert!(
            out.errors
                .iter()
                .all(|(_, e)| matches!(e, StorageError::DuplicateKey(_))),
            "{}: {:?}",
            case.name,
            out.errors
        );
        assert_eq!(c.count(), case.count_after, "{}", case.name);
    }

    // Across batches: the stored 1 blocks 1i64 / 1.0 / decimal 1 later.
    let s = open();
    let c = coll(&s);
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(1))], true).inserted, 1);
    for dup in [Bson::Int64(1), Bson::Double(1.0), dec("1")] {
        let out = insert(&c, &[doc_with_id(dup.clone())], true);
        assert_eq!(out.inserted, 0, "{dup:?}");
        match out.errors.first() {
            Some((0, StorageError::DuplicateKey(info))) => {
                assert_eq!(info.key_pattern, bson::doc! {"_id": 1});
                assert_eq!(
                    info.key_value.get("_id"),
                    Some(&dup),
                    "reports the value the client sent"
                );
                assert_eq!(info.namespace, "db.c");
            }
            other => panic!("expected duplicate key, got {other:?}"),
        }
    }
    let msg = MongoError::from(StorageError::duplicate_id("db.c", Bson::Int32(1))).message;
    assert_eq!(
        msg,
        "E11000 duplicate key error collection: db.c index: _id_ dup key: { _id: 1 }"
    );
    assert_eq!(c.count(), 1);
}

#[test]
fn documents_without_id_are_rejected_not_panicked() {
    let s = open();
    let c = coll(&s);
    let out = c.insert_many(&[rawdoc! {"a": 1}.as_ref()], true, Durability::Sync);
    assert_eq!(out.inserted, 0);
    assert!(matches!(
        out.errors.as_slice(),
        [(0, StorageError::Engine(EngineError::InvalidArgument(_)))]
    ));
    assert_eq!(c.count(), 0);
}

#[test]
fn counts_and_sizes_follow_every_write() {
    let s = open();
    let c = coll(&s);
    let docs: Vec<RawDocumentBuf> = (0..10).map(|i| doc_with_id(Bson::Int32(i))).collect();
    assert_eq!(insert(&c, &docs, true).inserted, 10);
    assert_eq!((c.count(), c.data_size()), (10, total_size(&docs)));

    // Replace with a bigger document.
    let bigger = rawdoc! {"_id": 3, "pad": "a much longer padding string"};
    let grow = (bigger.as_bytes().len() - docs[3].as_bytes().len()) as u64;
    let r = c.modify(RawBsonRef::Int32(3), Durability::Buffered, &mut |cur| {
        assert!(cur.is_some());
        Ok(Modify::Replace(bigger.clone()))
    });
    assert_eq!(r.ok(), Some(ModifyResult::Replaced));
    assert_eq!((c.count(), c.data_size()), (10, total_size(&docs) + grow));
    assert_eq!(
        c.get(RawBsonRef::Double(3.0)).ok().flatten().as_ref(),
        Some(&bigger)
    );

    // Delete through modify and through delete.
    let r = c.modify(RawBsonRef::Int32(0), Durability::Buffered, &mut |_| {
        Ok(Modify::Delete)
    });
    assert_eq!(r.ok(), Some(ModifyResult::Deleted));
    assert_eq!(
        c.delete(RawBsonRef::Int64(1), Durability::Sync).ok(),
        Some(true)
    );
    assert_eq!(
        c.delete(RawBsonRef::Int64(1), Durability::Sync).ok(),
        Some(false)
    );
    let removed = total_size(&docs[..2]);
    assert_eq!(
        (c.count(), c.data_size()),
        (8, total_size(&docs) + grow - removed)
    );

    // Upsert through modify.
    let new = rawdoc! {"_id": 100, "x": 1};
    let r = c.modify(RawBsonRef::Int32(100), Durability::Buffered, &mut |cur| {
        assert!(cur.is_none());
        Ok(Modify::Insert(new.clone()))
    });
    assert_eq!(r.ok(), Some(ModifyResult::Inserted));
    assert_eq!(c.count(), 9);
    let size_now = c.data_size();

    // The stats record is what a reopen sees.
    let reopened = Storage::open(s.engine().clone()).unwrap_or_else(|e| panic!("{e}"));
    let again = reopened
        .collection("db", "c")
        .unwrap_or_else(|| panic!("lost collection"));
    assert_eq!((again.count(), again.data_size()), (9, size_now));

    // Rename keeps them; drop removes everything.
    assert!(s.rename_collection("db", "c", "db2", "d", false).is_ok());
    let renamed = s
        .collection("db2", "d")
        .unwrap_or_else(|| panic!("rename lost it"));
    assert_eq!((renamed.count(), renamed.data_size()), (9, size_now));
    assert_eq!(s.drop_collection("db2", "d").ok(), Some(true));
    let fresh = s
        .get_or_create_collection("db2", "d")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!((fresh.count(), fresh.data_size()), (0, 0));
    assert_eq!(
        fresh.scan(false).count(),
        0,
        "a recreated collection never sees old documents"
    );
}

#[test]
fn modify_semantics() {
    let s = open();
    let c = coll(&s);
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(1))], true).inserted, 1);
    let keep_missing = c.modify(RawBsonRef::Int32(2), Durability::Buffered, &mut |_| {
        Ok(Modify::Keep)
    });
    assert_eq!(keep_missing.ok(), Some(ModifyResult::NotFound));
    let delete_missing = c.modify(RawBsonRef::Int32(2), Durability::Buffered, &mut |_| {
        Ok(Modify::Delete)
    });
    assert_eq!(delete_missing.ok(), Some(ModifyResult::NotFound));
    let keep = c.modify(RawBsonRef::Double(1.0), Durability::Buffered, &mut |_| {
        Ok(Modify::Keep)
    });
    assert_eq!(keep.ok(), Some(ModifyResult::Unchanged));

    // Errors from the callback pass through and nothing changes.
    let before = (c.count(), c.data_size());
    let err = c.modify(RawBsonRef::Int32(1), Durability::Buffered, &mut |_| {
        Err(MongoError::bad_value("no"))
    });
    assert_eq!(err.err().map(|e| e.code), Some(ErrorCode::BadValue));
    assert_eq!((c.count(), c.data_size()), before);

    // _id is immutable.
    let moved = c.modify(RawBsonRef::Int32(1), Durability::Buffered, &mut |_| {
        Ok(Modify::Replace(rawdoc! {"_id": 2}))
    });
    assert_eq!(moved.err().map(|e| e.code), Some(ErrorCode::ImmutableField));
    // but an equal _id of another numeric type is the same _id.
    let same = c.modify(RawBsonRef::Int32(1), Durability::Buffered, &mut |_| {
        Ok(Modify::Replace(rawdoc! {"_id": 1.0, "v": 2}))
    });
    assert_eq!(same.ok(), Some(ModifyResult::Replaced));

    // Insert over an existing document is a duplicate key.
    let dup = c.modify(RawBsonRef::Int32(1), Durability::Buffered, &mut |_| {
        Ok(Modify::Insert(rawdoc! {"_id": 1}))
    });
    assert_eq!(dup.err().map(|e| e.code), Some(ErrorCode::DuplicateKey));
    assert_eq!(c.count(), 1);
}

#[test]
fn concurrent_inserters_keep_exact_counts() {
    let s = open();
    let c = coll(&s);
    let threads: Vec<_> = (0..4)
        .map(|t| {
            let c = c.clone();
            std::thread::spawn(move || {
                let mut inserted = 0usize;
                for i in 0..200 {
                    // Unique ids plus a shared id every thread races for.
                    let docs = [
                        doc_with_id(Bson::Int32(t * 10_000 + i)),
                        doc_with_id(Bson::Int64(i64::from(i))),
                    ];
                    inserted += insert(&c, &docs, false).inserted;
                }
                inserted
            })
        })
        .collect();
    let total: usize = threads.into_iter().map(|h| h.join().unwrap_or(0)).sum();
    // 4 × 200 unique + 200 shared ids 0..200 (ids t*10000+i overlap shared ones only for t = 0).
    let expected_distinct = {
        let mut set = std::collections::BTreeSet::new();
        for t in 0..4 {
            for i in 0..200i64 {
                set.insert(t * 10_000 + i);
                set.insert(i);
            }
        }
        set.len()
    };
    assert_eq!(total, expected_distinct);
    assert_eq!(c.count(), expected_distinct as u64);
    assert_eq!(c.scan(false).count(), expected_distinct);
}

#[test]
fn concurrent_implicit_creation_yields_one_collection() {
    let s = open();
    let handles: Vec<_> = (0..4)
        .map(|_| {
            let s = s.clone();
            std::thread::spawn(move || {
                s.get_or_create_collection("db", "race")
                    .map(|c| c.uuid())
                    .ok()
            })
        })
        .collect();
    let uuids: Vec<_> = handles
        .into_iter()
        .map(|h| h.join().ok().flatten())
        .collect();
    assert!(
        uuids.iter().all(|u| u.is_some() && *u == uuids[0]),
        "{uuids:?}"
    );
    assert_eq!(s.list_collections("db").len(), 1);
}

#[test]
fn iterators_are_static_send_and_see_their_snapshot() {
    fn assert_static_send<T: Send + 'static>(_: &T) {}
    let s = open();
    let c = coll(&s);
    let docs: Vec<RawDocumentBuf> = (0..1000)
        .rev()
        .map(|i| doc_with_id(Bson::Int32(i)))
        .collect();
    assert_eq!(insert(&c, &docs, true).inserted, 1000);
    let iter = c.scan(false);
    assert_static_send(&iter);
    // Writes after the iterator was created are not visible through it.
    assert_eq!(
        insert(&c, &[doc_with_id(Bson::Int32(5000))], true).inserted,
        1
    );
    assert!(c.delete(RawBsonRef::Int32(0), Durability::Buffered).is_ok());
    let seen: Vec<i32> = std::thread::spawn(move || {
        iter.filter_map(|d| d.ok().and_then(|d| id_of(&d).and_then(|v| v.as_i32())))
            .collect()
    })
    .join()
    .unwrap_or_default();
    // Insertion order: they were inserted from 999 down.
    assert_eq!(seen, (0..1000).rev().collect::<Vec<_>>());
    let back: Vec<i32> = c
        .scan(true)
        .filter_map(|d| d.ok().and_then(|d| id_of(&d).and_then(|v| v.as_i32())))
        .take(3)
        .collect();
    assert_eq!(back, vec![5000, 1, 2]);
}

#[test]
fn id_range_scans() {
    let s = open();
    let c = coll(&s);
    let docs: Vec<RawDocumentBuf> = (0..10).map(|i| doc_with_id(Bson::Int32(i))).collect();
    assert_eq!(insert(&c, &docs, true).inserted, 10);
    let run =
        |start: Bound<RawBsonRef<'_>>, end: Bound<RawBsonRef<'_>>, reverse: bool| -> Vec<i32> {
            c.scan_ids(start, end, reverse)
                .filter_map(|d| d.ok().and_then(|d| id_of(&d).and_then(|v| v.as_i32())))
                .collect()
        };
    use Bound::*;
    assert_eq!(
        run(
            Included(RawBsonRef::Double(2.5)),
            Excluded(RawBsonRef::Int64(5)),
            false
        ),
        vec![3, 4]
    );
    assert_eq!(
        run(Excluded(RawBsonRef::Int32(7)), Unbounded, false),
        vec![8, 9]
    );
    assert_eq!(
        run(Unbounded, Included(RawBsonRef::Int32(2)), true),
        vec![2, 1, 0]
    );
    assert_eq!(
        run(
            Included(RawBsonRef::Int32(5)),
            Excluded(RawBsonRef::Int32(3)),
            false
        ),
        Vec::<i32>::new()
    );
    // A string bound sorts after every number.
    assert_eq!(
        run(Unbounded, Excluded(RawBsonRef::String("")), false).len(),
        10
    );
}

#[test]
fn stale_handle_after_drop_cannot_write() {
    let s = open();
    let c = coll(&s);
    assert_eq!(s.drop_collection("db", "c").ok(), Some(true));
    let out = insert(
        &c,
        &[doc_with_id(Bson::Int32(1)), doc_with_id(Bson::Int32(2))],
        false,
    );
    assert_eq!(out.inserted, 0);
    assert!(out
        .errors
        .iter()
        .all(|(_, e)| matches!(e, StorageError::NamespaceNotFound(_))));
    assert_eq!(out.errors.len(), 2);
    assert!(c
        .delete(RawBsonRef::Int32(1), Durability::Buffered)
        .is_err());
    let fresh = coll(&s);
    assert_eq!(fresh.count(), 0);
}

/// A memory engine whose writes can be made to fail.
#[derive(Default)]
struct Flaky {
    inner: MemoryEngine,
    fail: AtomicBool,
    fail_sync: AtomicBool,
    /// Snapshots fail, as a network engine's do when its connection is lost.
    fail_snapshot: AtomicBool,
    syncs: std::sync::atomic::AtomicUsize,
}

impl Engine for Flaky {
    fn name(&self) -> &'static str {
        "flaky"
    }
    fn capabilities(&self) -> bisondb_engine::Capabilities {
        self.inner.capabilities()
    }
    fn snapshot(&self) -> Result<Arc<dyn Snapshot>, EngineError> {
        if self.fail_snapshot.load(Ordering::SeqCst) {
            return Err(EngineError::Io("connection lost".into()));
        }
        self.inner.snapshot()
    }
    fn write(&self, batch: WriteBatch, durability: Durability) -> Result<(), EngineError> {
        if self.fail.load(Ordering::SeqCst) {
            return Err(EngineError::Io("disk on fire".into()));
        }
        self.inner.write(batch, durability)
    }
    fn begin(&self) -> Result<Box<dyn bisondb_engine::Transaction>, EngineError> {
        self.inner.begin()
    }
    fn sync(&self) -> Result<(), EngineError> {
        self.syncs.fetch_add(1, Ordering::SeqCst);
        if self.fail_sync.load(Ordering::SeqCst) {
            return Err(EngineError::Io("fsync failed".into()));
        }
        Ok(())
    }
    fn size_on_disk(&self) -> u64 {
        0
    }
}

/// A snapshot that cannot be taken fails the read, the scan and the write
/// that needed it, with the engine's error; nothing reads as empty.
#[test]
fn failed_snapshots_fail_reads_and_writes() {
    let engine = Arc::new(Flaky::default());
    let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
    let c = coll(&s);
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(1))], true).inserted, 1);
    engine.fail_snapshot.store(true, Ordering::SeqCst);
    let lost = |e: &StorageError| matches!(e, StorageError::Engine(EngineError::Io(m)) if m == "connection lost");
    assert!(c.snapshot().err().is_some_and(|e| lost(&e)));
    assert!(c.get(RawBsonRef::Int32(1)).err().is_some_and(|e| lost(&e)));
    let mut scan = c.scan(false);
    assert!(scan
        .next()
        .is_some_and(|r| r.err().is_some_and(|e| lost(&e))));
    assert!(scan.next().is_none());
    let out = insert(&c, &[doc_with_id(Bson::Int32(2))], true);
    assert_eq!(out.inserted, 0);
    assert!(out.errors.first().is_some_and(|(_, e)| lost(e)));
    engine.fail_snapshot.store(false, Ordering::SeqCst);
    assert_eq!(c.scan(false).count(), 1);
}

#[test]
fn failed_engine_write_inserts_nothing() {
    let engine = Arc::new(Flaky::default());
    let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
    let c = coll(&s);
    engine.fail.store(true, Ordering::SeqCst);
    let docs = [
        doc_with_id(Bson::Int32(1)),
        doc_with_id(Bson::Int32(1)),
        doc_with_id(Bson::Int32(2)),
    ];
    let unordered = insert(&c, &docs, false);
    assert_eq!(unordered.inserted, 0);
    let failed: Vec<(usize, bool)> = unordered
        .errors
        .iter()
        .map(|(i, e)| (*i, matches!(e, StorageError::Engine(EngineError::Io(_)))))
        .collect();
    assert_eq!(failed, vec![(0, true), (1, false), (2, true)]);
    let ordered = insert(&c, &docs, true);
    assert_eq!(
        ordered.errors.len(),
        1,
        "ordered reports only the first failure"
    );
    assert!(matches!(
        ordered.errors.first(),
        Some((0, StorageError::Engine(EngineError::Io(_))))
    ));
    assert_eq!(c.count(), 0);
    engine.fail.store(false, Ordering::SeqCst);
    assert_eq!(insert(&c, &docs, false).inserted, 2);
}

#[test]
fn sync_durability_syncs_after_the_write_and_only_when_something_changed() {
    let engine = Arc::new(Flaky::default());
    let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
    let c = coll(&s);
    let syncs = || engine.syncs.load(Ordering::SeqCst);
    let one = [doc_with_id(Bson::Int32(1))];
    let refs: Vec<&RawDocument> = one.iter().map(|d| d.as_ref()).collect();
    assert_eq!(c.insert_many(&refs, true, Durability::Buffered).inserted, 1);
    assert_eq!(syncs(), 0);
    let two = [doc_with_id(Bson::Int32(2))];
    let refs2: Vec<&RawDocument> = two.iter().map(|d| d.as_ref()).collect();
    assert_eq!(c.insert_many(&refs2, true, Durability::Sync).inserted, 1);
    assert_eq!(syncs(), 1);
    // A rejected duplicate writes nothing, so there is nothing to sync.
    assert_eq!(c.insert_many(&refs2, true, Durability::Sync).inserted, 0);
    assert_eq!(syncs(), 1);
    let keep = c.modify(RawBsonRef::Int32(1), Durability::Sync, &mut |_| {
        Ok(Modify::Keep)
    });
    assert_eq!(keep.ok(), Some(ModifyResult::Unchanged));
    assert_eq!(syncs(), 1);
    assert_eq!(
        c.delete(RawBsonRef::Int32(1), Durability::Sync).ok(),
        Some(true)
    );
    assert_eq!(syncs(), 2);

    // A failed sync after a successful write is reported separately.
    engine.fail_sync.store(true, Ordering::SeqCst);
    let three = [doc_with_id(Bson::Int32(3))];
    let refs3: Vec<&RawDocument> = three.iter().map(|d| d.as_ref()).collect();
    let out = c.insert_many(&refs3, true, Durability::Sync);
    assert_eq!(out.inserted, 1);
    assert!(out.errors.is_empty());
    assert!(matches!(
        out.durability_error,
        Some(StorageError::Engine(EngineError::Io(_)))
    ));
    assert_eq!(c.count(), 2);
}

#[test]
fn increasing_ids_skip_lookups_but_duplicates_are_still_caught() {
    let s = open();
    let c = coll(&s);
    // Increasing ids: each batch lies above the bound of the previous ones.
    let first: Vec<_> = (0..100).map(|i| doc_with_id(Bson::Int32(i))).collect();
    assert_eq!(insert(&c, &first, true).inserted, 100);
    let second: Vec<_> = (100..200).map(|i| doc_with_id(Bson::Int32(i))).collect();
    assert_eq!(insert(&c, &second, true).inserted, 100);
    // A duplicate at the top, one in the middle, and one below everything.
    for dup in [199, 150, 0] {
        let out = insert(&c, &[doc_with_id(Bson::Int64(dup))], true);
        assert_eq!(out.inserted, 0, "{dup} was inserted twice");
        assert!(matches!(
            out.errors.first(),
            Some((0, StorageError::DuplicateKey(_)))
        ));
    }
    // A delete keeps the bound valid; the freed key can be inserted again.
    assert!(c
        .delete(bson::RawBsonRef::Int32(199), Durability::Buffered)
        .unwrap_or(false));
    assert_eq!(
        insert(&c, &[doc_with_id(Bson::Int32(199))], true).inserted,
        1
    );
    assert_eq!(
        insert(&c, &[doc_with_id(Bson::Double(199.0))], true).inserted,
        0
    );
    // An upsert through modify clears the bound; later duplicates are still caught.
    let up = doc_with_id(Bson::Int32(1000));
    c.modify(
        bson::RawBsonRef::Int32(1000),
        Durability::Buffered,
        &mut |cur| {
            assert!(cur.is_none());
            Ok(Modify::Insert(up.clone()))
        },
    )
    .unwrap_or_else(|e| panic!("modify: {e}"));
    assert_eq!(
        insert(&c, &[doc_with_id(Bson::Int32(1000))], true).inserted,
        0
    );
    assert_eq!(c.count(), 201);
    // A fresh handle over the same engine reads the bound from storage.
    let reopened = Storage::open(s.engine().clone()).unwrap_or_else(|e| panic!("reopen: {e}"));
    let c2 = coll(&reopened);
    assert_eq!(
        insert(&c2, &[doc_with_id(Bson::Int32(1000))], true).inserted,
        0
    );
    assert_eq!(
        insert(&c2, &[doc_with_id(Bson::Int32(1001))], true).inserted,
        1
    );
}

/// Two driver processes' ObjectIds interleave (same second, different process
/// bytes): the per-process bounds let both skip lookups, and still every
/// re-insert of an earlier id, from either process or in another type's range,
/// is a duplicate.
#[test]
fn interleaved_process_object_ids_still_find_every_duplicate() {
    let s = open();
    let c = coll(&s);
    let oid = |process: u8, n: u8| {
        let mut b = [0u8; 12];
        b[..4].copy_from_slice(&1_700_000_000u32.to_be_bytes());
        b[4..9].copy_from_slice(&[process; 5]);
        b[11] = n;
        Bson::ObjectId(ObjectId::from_bytes(b))
    };
    let mut all = Vec::new();
    for n in 0..20u8 {
        // The higher process first, so the lower one writes below its keys.
        for p in [9u8, 1] {
            let d = doc_with_id(oid(p, n));
            assert_eq!(insert(&c, std::slice::from_ref(&d), true).inserted, 1);
            all.push(d);
        }
    }
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(5))], true).inserted, 1);
    for d in all.iter().chain([&doc_with_id(Bson::Int32(5))]) {
        let out = insert(&c, std::slice::from_ref(d), true);
        assert_eq!(out.inserted, 0, "re-insert of {d:?}");
        assert!(matches!(
            out.errors.first(),
            Some((0, StorageError::DuplicateKey(_)))
        ));
    }
    // A batch mixing new keys of both processes and one old key stops there.
    let batch = [
        doc_with_id(oid(1, 50)),
        doc_with_id(oid(9, 50)),
        doc_with_id(oid(1, 3)),
    ];
    let out = insert(&c, &batch, true);
    assert_eq!(out.inserted, 2);
    assert!(matches!(
        out.errors.first(),
        Some((2, StorageError::DuplicateKey(_)))
    ));
    assert_eq!(c.count(), 43);
}

/// The batch's own duplicate check: in order it needs no set, out of order it
/// builds one from what the batch holds; both find every repeat.
#[test]
fn duplicates_inside_one_batch_in_and_out_of_order() {
    let ids = |v: &[i32]| -> Vec<RawDocumentBuf> {
        v.iter().map(|i| doc_with_id(Bson::Int32(*i))).collect()
    };
    let cases: &[(&[i32], &[usize])] = &[
        (&[1, 2, 3, 3], &[3]),
        (&[1, 2, 3, 1], &[3]),
        (&[5, 1, 2, 1, 6, 5, 7], &[3, 5]),
        (&[3, 2, 1], &[]),
        (&[1, 2, 3, 4], &[]),
    ];
    for (batch, dup_at) in cases {
        let s = open();
        let c = coll(&s);
        let out = insert(&c, &ids(batch), false);
        let failed: Vec<usize> = out.errors.iter().map(|(i, _)| *i).collect();
        assert_eq!(&failed, dup_at, "{batch:?}");
        assert!(out
            .errors
            .iter()
            .all(|(_, e)| matches!(e, StorageError::DuplicateKey(_))));
        assert_eq!(out.inserted, batch.len() - dup_at.len(), "{batch:?}");
    }
}

/// An observer that records every observed operation into a capped
/// collection, as the server's oplog does.
struct Recorder {
    log: Collection,
    next: std::sync::atomic::AtomicI64,
}

impl crate::observer::OpObserver for Recorder {
    fn observes(&self, db: &str) -> bool {
        db != "local"
    }

    fn commit(
        &self,
        target: crate::observer::Target<'_>,
        ops: &[crate::observer::Op<'_>],
        batch: WriteBatch,
        write: &mut dyn FnMut(WriteBatch) -> Result<(), StorageError>,
    ) -> Result<(), StorageError> {
        let kinds: Vec<&'static str> = ops
            .iter()
            .map(|op| match op {
                crate::observer::Op::Insert { .. } => "i",
                crate::observer::Op::Update { .. } => "u",
                crate::observer::Op::Delete { .. } => "d",
                crate::observer::Op::Command { .. } => "c",
            })
            .collect();
        let coll = target.coll.to_string();
        let mut build = || {
            Ok(kinds
                .iter()
                .map(|k| {
                    let n = self.next.fetch_add(1, Ordering::SeqCst);
                    (Bson::Int64(n), rawdoc! {"op": *k, "coll": coll.clone()})
                })
                .collect())
        };
        self.log.append_capped_in(batch, &mut build, write)
    }
}

fn recorded(log: &Collection) -> Vec<(String, String)> {
    log.scan_natural(false)
        .map(|r| {
            let (_, d) = r.unwrap_or_else(|e| panic!("{e}"));
            (
                d.get_str("op").unwrap_or_default().to_string(),
                d.get_str("coll").unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// The observer's record goes in the write's own batch: a write the engine
/// refuses leaves neither the data nor its record, and every write that
/// commits has its record.
#[test]
fn observed_writes_and_their_records_commit_together() {
    let engine = Arc::new(Flaky::default());
    let s = Storage::open(engine.clone()).unwrap_or_else(|e| panic!("{e}"));
    let log = s
        .create_collection(
            "local",
            "log",
            bson::doc! {"capped": true, "size": 1_000_000i64},
        )
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(s.set_op_observer(Arc::new(Recorder {
        log: log.without_observer(),
        next: std::sync::atomic::AtomicI64::new(1),
    })));
    let c = s
        .get_or_create_collection("db", "c")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(1))], true).inserted, 1);
    c.modify(RawBsonRef::Int32(1), Durability::Buffered, &mut |_| {
        Ok(Modify::Replace(rawdoc! {"_id": 1, "x": 2}))
    })
    .unwrap_or_else(|e| panic!("{e}"));
    engine.fail.store(true, Ordering::SeqCst);
    assert_eq!(insert(&c, &[doc_with_id(Bson::Int32(2))], true).inserted, 0);
    assert!(c
        .delete(RawBsonRef::Int32(1), Durability::Buffered)
        .is_err());
    assert!(s.drop_collection("db", "c").is_err());
    engine.fail.store(false, Ordering::SeqCst);
    assert_eq!(c.count(), 1);
    assert_eq!(log.count(), 3);
    assert!(c
        .delete(RawBsonRef::Int32(1), Durability::Buffered)
        .unwrap_or(false));
    assert!(s.drop_collection("db", "c").unwrap_or(false));
    let expect: Vec<(String, String)> =
        [("c", "c"), ("i", "c"), ("u", "c"), ("d", "c"), ("c", "c")]
            .iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect();
    assert_eq!(recorded(&log), expect);
    // Writes to the unobserved database are not recorded.
    let other = s
        .get_or_create_collection("local", "other")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        insert(&other, &[doc_with_id(Bson::Int32(1))], true).inserted,
        1
    );
    assert_eq!(recorded(&log).len(), 5);
}

/// On a shared store a server's own stats record is read back from the
/// snapshot each write computes against: a batch whose outcome was unknown
/// (its primary died after the synchronous standby got the commit) is in the
/// stored record though this server never kept it, and the next write must
/// add to the stored record, not overwrite it with a stale one (a Patroni
/// failover left `estimatedDocumentCount` one short before this).
#[test]
fn a_shared_write_adds_to_its_stored_own_stats_record() {
    let engine = MemoryEngine::shared();
    let state = CollState {
        id: 42,
        options: parking_lot::RwLock::new(Arc::new(bson::Document::new())),
        uuid: Uuid::new(),
        write_lock: parking_lot::Mutex::new(()),
        count: std::sync::atomic::AtomicU64::new(0),
        data_size: std::sync::atomic::AtomicU64::new(0),
        id_bytes: std::sync::atomic::AtomicU64::new(0),
        dropped: AtomicBool::new(false),
        stats_generation: std::sync::atomic::AtomicU64::new(0),
        indexes: parking_lot::RwLock::new(Arc::new(Vec::new())),
        max_doc_key: parking_lot::Mutex::new(None),
        capped: None,
        records: None,
        id_usage: crate::index::IndexUsage::new(),
        server: 3,
        own_stats: parking_lot::Mutex::new(StatsRecord::default()),
        catalog_version: std::sync::atomic::AtomicU64::new(0),
    };
    let record = |docs: usize| {
        let mut r = StatsRecord::default();
        for _ in 0..docs {
            r.add_doc(10, 100);
        }
        r
    };
    // The base record, another server's two documents, and this server's
    // record holding five where this server last kept four.
    let mut batch = WriteBatch::new();
    batch.put(layout::stats_key(42), layout::encode_stats(&record(1)));
    batch.put(
        shared::own_stats_key(42, 2),
        layout::encode_stats(&record(2)),
    );
    batch.put(
        shared::own_stats_key(42, 3),
        layout::encode_stats(&record(5)),
    );
    engine
        .write(batch, Durability::Buffered)
        .unwrap_or_else(|e| panic!("{e}"));
    *state.own_stats.lock() = record(4);
    let snap = engine.snapshot().unwrap_or_else(|e| panic!("{e}"));
    load_stats(snap.as_ref(), &state).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(state.count.load(Ordering::Acquire), 8);
    assert_eq!(state.own_stats.lock().count, 5, "the stored own record");
    // One more insert by this server: its record goes to six, so the total
    // is nine.
    let mut own = state.own_stats.lock().clone();
    shared::add_change(&mut own, &record(8), &record(9));
    assert_eq!(own.count, 6);
}
