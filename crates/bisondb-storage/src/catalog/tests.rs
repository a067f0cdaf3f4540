//! Catalog behaviour: names, conflicts, drops (including interrupted ones),
//! renames, stats and reopening over the same engine.

use super::*;
use bisondb_engine::memory::MemoryEngine;
use bisondb_engine::EngineError;
use bson::{doc, rawdoc, RawDocument};

/// Every key in the engine starting with `prefix`.
fn keys_with_prefix(engine: &Arc<dyn Engine>, prefix: &[u8]) -> Vec<Vec<u8>> {
    let all = engine
        .snapshot()
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
        .scan(Bound::Included(prefix), Bound::Unbounded, false, usize::MAX);
    all.unwrap_or_default()
        .into_iter()
        .map(|(k, _)| k)
        .take_while(|k| k.starts_with(prefix))
        .collect()
}

fn open_on(engine: &Arc<dyn Engine>) -> Storage {
    Storage::open(engine.clone()).unwrap_or_else(|e| panic!("open: {e}"))
}

fn names(s: &Storage, db: &str) -> Vec<String> {
    s.list_collections(db).into_iter().map(|c| c.name).collect()
}

fn insert_ids(c: &Collection, ids: std::ops::Range<i32>) {
    let docs: Vec<RawDocumentBuf> = ids.map(|i| rawdoc! {"_id": i, "v": "payload"}).collect();
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    let out = c.insert_many(&refs, true, Durability::Buffered);
    assert!(out.errors.is_empty(), "{:?}", out.errors);
}

#[test]
fn create_list_and_conflicts() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    assert!(s.list_databases().is_empty());
    let opts = doc! {"capped": false, "validator": {"a": 1}};
    let c = s
        .create_collection("b", "x", opts.clone())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(c.namespace(), "b.x");
    assert_eq!((c.db(), c.name()), ("b", "x"));
    assert!(s.create_collection("a", "y", Document::new()).is_ok());
    assert!(s.create_collection("a", "x", Document::new()).is_ok());
    assert_eq!(s.list_databases(), vec!["a".to_string(), "b".to_string()]);
    assert_eq!(names(&s, "a"), vec!["x", "y"]);
    assert!(names(&s, "c").is_empty());
    assert!(matches!(
        s.create_collection("b", "x", Document::new()),
        Err(StorageError::NamespaceExists(ns)) if ns == "b.x"
    ));
    let info = s
        .list_collections("b")
        .pop()
        .unwrap_or_else(|| panic!("missing"));
    assert_eq!(
        (info.name.as_str(), info.kind, &info.options, info.uuid),
        ("x", "collection", &opts, c.uuid())
    );
    // The same uuid and options survive a reopen.
    let again = open_on(&engine);
    assert_eq!(again.list_collections("b"), vec![info]);
    assert_eq!(again.engine_name(), "inMemory");
}

#[test]
fn rejects_names_the_key_layout_cannot_hold() {
    let s = open_on(&MemoryEngine::shared());
    for (db, name) in [
        ("", "c"),
        ("a.b", "c"),
        ("a\0", "c"),
        ("a", ""),
        ("a", "c\0d"),
    ] {
        assert!(
            matches!(
                s.get_or_create_collection(db, name),
                Err(StorageError::Engine(EngineError::InvalidArgument(_)))
            ),
            "{db:?}.{name:?}"
        );
    }
    assert!(s.list_databases().is_empty());
}

#[test]
fn drop_removes_keys_and_database_disappears_with_last_collection() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    let c = s
        .get_or_create_collection("d", "c")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&c, 0..5000);
    let other = s
        .get_or_create_collection("e", "keep")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&other, 0..3);
    assert_eq!(s.drop_collection("d", "nope").ok(), Some(false));
    assert_eq!(s.drop_collection("d", "c").ok(), Some(true));
    assert_eq!(s.list_databases(), vec!["e".to_string()]);
    assert!(s.collection("d", "c").is_none());
    // Only the surviving collection's documents remain in the engine.
    assert_eq!(keys_with_prefix(&engine, &[0x01]).len(), 3);
    assert!(keys_with_prefix(&engine, &layout::pending_drop_prefix()).is_empty());

    let a = s
        .get_or_create_collection("f", "a")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&a, 0..2);
    assert!(s.get_or_create_collection("f", "b").is_ok());
    assert!(s.drop_database("f").is_ok());
    assert!(s.drop_database("never-existed").is_ok());
    assert_eq!(s.list_databases(), vec!["e".to_string()]);
    assert_eq!(keys_with_prefix(&engine, &[0x01]).len(), 3);
}

#[test]
fn rename_cases() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    let src = s
        .get_or_create_collection("d", "src")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&src, 0..4);
    let target = s
        .get_or_create_collection("d2", "dst")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&target, 100..110);

    assert!(matches!(
        s.rename_collection("d", "missing", "d", "x", false),
        Err(StorageError::NamespaceNotFound(_))
    ));
    assert!(matches!(
        s.rename_collection("d", "src", "d", "src", true),
        Err(StorageError::IllegalOperation(_))
    ));
    assert!(matches!(
        s.rename_collection("d", "src", "d2", "dst", false),
        Err(StorageError::NamespaceExists(_))
    ));
    assert!(s.rename_collection("d", "src", "d2", "dst", true).is_ok());
    let moved = s
        .collection("d2", "dst")
        .unwrap_or_else(|| panic!("renamed collection missing"));
    assert_eq!(moved.uuid(), src.uuid(), "rename keeps the uuid");
    assert_eq!(moved.count(), 4, "the dropped target's documents are gone");
    assert_eq!(moved.scan(false).count(), 4);
    assert_eq!(
        keys_with_prefix(&engine, &[0x01]).len(),
        4,
        "target's documents purged"
    );
    assert!(keys_with_prefix(&engine, &layout::pending_drop_prefix()).is_empty());
    assert!(s.collection("d", "src").is_none());
    assert_eq!(s.list_databases(), vec!["d2".to_string()]);
    // Writes through the old handle land in the renamed collection (same id).
    insert_ids(&src, 4..5);
    assert_eq!(moved.count(), 5);
}

#[test]
fn stats_apportion_disk_size_by_logical_bytes() {
    struct Sized(MemoryEngine);
    impl Engine for Sized {
        fn name(&self) -> &'static str {
            "sized"
        }
        fn capabilities(&self) -> bisondb_engine::Capabilities {
            self.0.capabilities()
        }
        fn snapshot(&self) -> Result<Arc<dyn bisondb_engine::Snapshot>, EngineError> {
            self.0.snapshot()
        }
        fn write(&self, b: WriteBatch, d: Durability) -> Result<(), EngineError> {
            self.0.write(b, d)
        }
        fn begin(&self) -> Result<Box<dyn bisondb_engine::Transaction>, EngineError> {
            self.0.begin()
        }
        fn sync(&self) -> Result<(), EngineError> {
            Ok(())
        }
        fn size_on_disk(&self) -> u64 {
            9000
        }
    }
    let s = open_on(&(Arc::new(Sized(MemoryEngine::new())) as Arc<dyn Engine>));
    let a = s
        .get_or_create_collection("a", "x")
        .unwrap_or_else(|e| panic!("{e}"));
    let b = s
        .get_or_create_collection("b", "y")
        .unwrap_or_else(|e| panic!("{e}"));
    let b2 = s
        .get_or_create_collection("b", "z")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&a, 0..10);
    insert_ids(&b, 0..10);
    insert_ids(&b2, 10..20);
    let stats = s.database_stats("b");
    assert_eq!(
        (stats.collections, stats.objects, stats.indexes),
        (2, 20, 2)
    );
    assert_eq!(stats.data_size, b.data_size() + b2.data_size());
    // Documents and their keys (the `_id` indexes) share the disk by bytes.
    let logical = |c: &Collection| c.data_size() + c.id_index_bytes();
    let total = logical(&a) + logical(&b) + logical(&b2);
    assert_eq!(
        stats.storage_size,
        9000 * (b.data_size() + b2.data_size()) / total
    );
    assert_eq!(
        stats.index_size,
        9000 * (b.id_index_bytes() + b2.id_index_bytes()) / total
    );
    assert!(b.id_index_bytes() > 0);
    // The database's two collections hold about two thirds of the bytes.
    let whole = 9000 * (logical(&b) + logical(&b2)) / total;
    assert!(
        (whole - 1..=whole).contains(&(stats.storage_size + stats.index_size)),
        "{whole}: {stats:?}"
    );
    assert!((5900..6100).contains(&whole), "{whole}");
    assert_eq!(s.database_stats("none"), DbStats::default());
    assert!(s.sync().is_ok());
}

#[test]
fn reopen_sees_catalog_and_data_and_never_reuses_ids() {
    let engine = MemoryEngine::shared();
    let first = open_on(&engine);
    let c = first
        .create_collection("db", "c", doc! {"x": 1})
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&c, 0..50);
    let gone = first
        .get_or_create_collection("db", "gone")
        .unwrap_or_else(|e| panic!("{e}"));
    let gone_id = gone.debug_id();
    assert_eq!(first.drop_collection("db", "gone").ok(), Some(true));

    let second = open_on(&engine);
    assert_eq!(second.list_collections("db"), first.list_collections("db"));
    let c2 = second
        .collection("db", "c")
        .unwrap_or_else(|| panic!("missing after reopen"));
    assert_eq!((c2.count(), c2.data_size()), (c.count(), c.data_size()));
    assert_eq!(c2.scan(false).count(), 50);
    let newer = second
        .get_or_create_collection("db", "new")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        newer.debug_id() > gone_id,
        "collection ids are never reused"
    );
}

#[test]
fn open_finishes_an_interrupted_drop() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    let c = s
        .get_or_create_collection("db", "c")
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&c, 0..10);
    // Simulate a crash right after the catalog part of a drop: entry gone, marker
    // written, documents still there.
    let id = c.debug_id();
    let mut batch = WriteBatch::new();
    batch.delete(layout::entry_key("db", "c"));
    batch.put(layout::pending_drop_key(id), Vec::new());
    assert!(engine.write(batch, Durability::Sync).is_ok());
    let reopened = open_on(&engine);
    assert!(reopened.collection("db", "c").is_none());
    assert!(keys_with_prefix(&engine, &layout::doc_prefix(id)).is_empty());
    assert!(keys_with_prefix(&engine, &layout::pending_drop_prefix()).is_empty());
    assert!(keys_with_prefix(&engine, &layout::stats_key(id)).is_empty());
}

#[test]
fn corrupt_catalog_is_reported_not_panicked() {
    let cases: Vec<(Vec<u8>, Vec<u8>)> = vec![
        (layout::meta_key(), b"garbage".to_vec()),
        (
            layout::entry_key("a", "b"),
            rawdoc! {"db": "a"}.into_bytes(),
        ),
        (
            layout::meta_key(),
            rawdoc! {"version": 99, "nextId": 1i64}.into_bytes(),
        ),
    ];
    for (key, value) in cases {
        let engine = MemoryEngine::shared();
        let mut batch = WriteBatch::new();
        batch.put(key.clone(), value);
        assert!(engine.write(batch, Durability::Buffered).is_ok());
        assert!(
            matches!(
                Storage::open(engine),
                Err(StorageError::Engine(EngineError::Corrupt(_)))
            ),
            "{key:?}"
        );
    }
}

fn insert_docs(c: &Collection, docs: &[RawDocumentBuf]) -> Vec<(usize, StorageError)> {
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    c.insert_many(&refs, false, Durability::Buffered).errors
}

/// `collMod`'s index edits: options in place, `prepareUnique`, and the
/// conversions to and from unique, all kept across a reopen.
#[test]
fn index_edits_prepare_unique_and_conversions() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    let spec = IndexSpec::from_document(&doc! {"name": "x_1", "key": {"x": 1}}).unwrap();
    s.create_index("d", "c", spec).unwrap();
    let c = s.collection("d", "c").unwrap();
    assert!(insert_docs(
        &c,
        &[rawdoc! {"_id": 1, "x": 1}, rawdoc! {"_id": 2, "x": 1}]
    )
    .is_empty());

    let edited = s
        .modify_index("d", "c", "x_1", &|s: &mut IndexSpec| s.hidden = true)
        .unwrap()
        .unwrap();
    assert!(!edited.0.hidden && edited.1.hidden);
    assert!(s.modify_index("d", "c", "nope", &|_| {}).unwrap().is_none());

    assert_eq!(
        s.set_index_prepare_unique("d", "c", "x_1", true).unwrap(),
        Some(false)
    );
    // New duplicates are refused, in the engine and within one batch; other keys go in.
    let errors = insert_docs(
        &c,
        &[
            rawdoc! {"_id": 3, "x": 1},
            rawdoc! {"_id": 4, "x": 2},
            rawdoc! {"_id": 5, "x": 2},
        ],
    );
    let failed: Vec<usize> = errors.iter().map(|(i, _)| *i).collect();
    assert_eq!(failed, vec![0, 2]);
    assert!(matches!(errors[0].1, StorageError::DuplicateKey(_)));
    // Existing duplicates block the conversion and are named.
    let groups = s.convert_index("d", "c", "x_1", true).unwrap().unwrap_err();
    assert_eq!(groups, vec![vec![Bson::Int32(1), Bson::Int32(2)]]);
    assert!(c
        .delete(
            bson::RawBson::Int32(2).as_raw_bson_ref(),
            Durability::Buffered
        )
        .unwrap());
    assert_eq!(s.convert_index("d", "c", "x_1", true).unwrap(), Ok(true));
    let info = &c.indexes()[0];
    assert!(info.spec.unique && info.spec.hidden && !info.prepare_unique);
    // The rebuilt index's entries replace the old one's in the stats record.
    assert_eq!(info.entries, c.count());
    crate::testing::assert_validates_clean(&c);

    // Reopened: the unique index still refuses duplicates.
    drop(c);
    drop(s);
    let s = open_on(&engine);
    let c = s.collection("d", "c").unwrap();
    assert!(c.indexes()[0].spec.unique);
    assert_eq!(insert_docs(&c, &[rawdoc! {"_id": 9, "x": 2}]).len(), 1);
    // And back to non-unique.
    assert_eq!(s.convert_index("d", "c", "x_1", false).unwrap(), Ok(true));
    assert!(insert_docs(&c, &[rawdoc! {"_id": 9, "x": 2}]).is_empty());
    assert!(!c.indexes()[0].spec.unique);
    // prepareUnique is persisted too.
    s.set_index_prepare_unique("d", "c", "x_1", true).unwrap();
    drop(c);
    drop(s);
    let s = open_on(&engine);
    let c = s.collection("d", "c").unwrap();
    assert!(c.indexes()[0].prepare_unique);
    assert_eq!(c.indexes()[0].entries, c.count());
    crate::testing::assert_validates_clean(&c);
}

#[test]
fn index_sizes_are_measured_once_for_a_store_of_an_older_release() {
    let engine = MemoryEngine::shared();
    let s = open_on(&engine);
    let c = s
        .get_or_create_collection("db", "c")
        .unwrap_or_else(|e| panic!("{e}"));
    let spec = IndexSpec::from_document(&doc! {"name": "v_1", "key": {"v": 1}})
        .unwrap_or_else(|| panic!("spec"));
    s.create_index("db", "c", spec)
        .unwrap_or_else(|e| panic!("{e}"));
    insert_ids(&c, 0..50);
    let sizes = |c: &Collection| {
        let ix: Vec<(u64, u64)> = c.indexes().iter().map(|i| (i.entries, i.bytes)).collect();
        (c.count(), c.data_size(), c.id_index_bytes(), ix)
    };
    let want = sizes(&c);
    assert_eq!(want.3.first().map(|t| t.0), Some(50));
    assert!(want.2 > 0 && want.3.iter().all(|t| t.1 > 0), "{want:?}");
    // The record as an older BisonDB wrote it: count and data size only.
    let key = layout::stats_key(c.state().id);
    let mut old = c.count().to_be_bytes().to_vec();
    old.extend_from_slice(&c.data_size().to_be_bytes());
    let mut b = WriteBatch::new();
    b.put(key.clone(), old);
    engine
        .write(b, Durability::Buffered)
        .unwrap_or_else(|e| panic!("{e}"));
    drop((c, s));

    let s = open_on(&engine);
    let c = s.collection("db", "c").unwrap_or_else(|| panic!("coll"));
    assert_eq!(sizes(&c), want, "measured on open");
    let stored = engine
        .snapshot()
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
        .get(&key)
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_default();
    let (record, known) = layout::decode_stats(&stored).unwrap_or_else(|e| panic!("{e}"));
    assert!(known, "the measured record is stored");
    assert_eq!(record, c.tally_locked(&c.state().indexes.read()));
}
