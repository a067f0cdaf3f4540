//! `Collection::validate` on both engines, over collections corrupted on
//! purpose through the engine (stray and deleted index entries, bad
//! documents, wrong stats, broken natural order).

use super::*;
use crate::catalog::Storage;
use crate::index::IndexSpec;
use bisondb_engine::Engine;
use bson::rawdoc;

/// A fresh store on each engine (the temporary directory lives as long as it).
fn stores() -> Vec<(&'static str, Storage, Option<tempfile::TempDir>)> {
    let memory = Storage::open(crate::MemoryEngine::shared()).unwrap_or_else(|e| panic!("{e}"));
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let engine = crate::LsmEngine::open_shared(dir.path(), crate::store_lsm_options())
        .unwrap_or_else(|e| panic!("open: {e}"));
    let lsm = Storage::open(engine).unwrap_or_else(|e| panic!("{e}"));
    vec![("inMemory", memory, None), ("lsm", lsm, Some(dir))]
}

/// `db.c` with an index on `a` and documents `{_id: i, a: [i, i + 100]}`
/// for `i` in `0..n` (multikey, two entries each).
fn populated(s: &Storage, coll: &str, n: i32) -> Collection {
    s.get_or_create_collection("db", coll)
        .unwrap_or_else(|e| panic!("create: {e}"));
    fill(s, coll, n)
}

/// A collection clustered by `_id` (its documents' keys hold their `_id`s,
/// which the tests below forge).
fn clustered(s: &Storage, coll: &str) {
    s.create_collection(
        "db",
        coll,
        bson::doc! {"clusteredIndex": {"key": {"_id": 1}, "unique": true}},
    )
    .unwrap_or_else(|e| panic!("create: {e}"));
}

fn fill(s: &Storage, coll: &str, n: i32) -> Collection {
    let c = s
        .collection("db", coll)
        .unwrap_or_else(|| panic!("no collection {coll}"));
    let spec = IndexSpec::from_document(&bson::doc! {"name": "a_1", "key": {"a": 1}})
        .unwrap_or_else(|| panic!("spec"));
    s.create_index("db", coll, spec)
        .unwrap_or_else(|e| panic!("index: {e}"));
    let docs: Vec<RawDocumentBuf> = (0..n)
        .map(|i| rawdoc! {"_id": i, "a": [i, i + 100]})
        .collect();
    let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
    let out = c.insert_many(&refs, true, Durability::Buffered);
    assert_eq!(out.inserted, n as usize, "{out:?}");
    c
}

fn validate(c: &Collection, repair: bool) -> ValidateReport {
    c.validate(ValidateOptions { repair })
        .unwrap_or_else(|e| panic!("validate: {e}"))
}

fn write(engine: &dyn Engine, put: Option<(Vec<u8>, Vec<u8>)>, delete: Option<Vec<u8>>) {
    let mut b = WriteBatch::new();
    if let Some((k, v)) = put {
        b.put(k, v);
    }
    if let Some(k) = delete {
        b.delete(k);
    }
    engine
        .write(b, Durability::Buffered)
        .unwrap_or_else(|e| panic!("write: {e}"));
}

fn index_state(c: &Collection) -> Arc<IndexState> {
    c.state()
        .indexes
        .read()
        .first()
        .cloned()
        .unwrap_or_else(|| panic!("no index"))
}

/// The stored entries of the collection's first index, in key order.
fn entries_of(c: &Collection) -> Vec<(Vec<u8>, Vec<u8>)> {
    let ix = index_state(c);
    let (start, end) = index::index_range(c.state().id, ix.id);
    c.snapshot()
        .unwrap_or_else(|e| panic!("snapshot: {e}"))
        .scan(
            Bound::Included(&start),
            Bound::Excluded(&end),
            false,
            10_000,
        )
        .unwrap_or_else(|e| panic!("{e}"))
}

fn keys(r: &ValidateReport) -> Vec<(String, u64, bool)> {
    r.indexes
        .iter()
        .map(|i| (i.name.clone(), i.keys, i.valid))
        .collect()
}

#[test]
fn a_consistent_collection_is_valid() {
    for (engine, s, _dir) in stores() {
        // More documents than one scan chunk, so chunked reads are covered.
        let c = populated(&s, "c", 700);
        let r = validate(&c, false);
        assert!(r.valid(), "{engine}: {r:?}");
        assert_eq!(r.nrecords, 700, "{engine}");
        assert_eq!(r.invalid_documents, 0);
        assert_eq!(
            keys(&r),
            vec![("_id_".into(), 700, true), ("a_1".into(), 1400, true)],
            "{engine}"
        );
        assert!(
            r.errors.is_empty() && r.warnings.is_empty(),
            "{engine}: {r:?}"
        );
        assert!(!r.repaired);
        // An empty collection without indexes.
        let e = s
            .get_or_create_collection("db", "empty")
            .unwrap_or_else(|e| panic!("{e}"));
        let r = validate(&e, false);
        assert!(r.valid() && r.nrecords == 0, "{engine}: {r:?}");
    }
}

#[test]
fn a_stray_index_entry_is_extra_and_repair_removes_it() {
    for (engine, s, _dir) in stores() {
        let c = populated(&s, "c", 5);
        let ix = index_state(&c);
        // An entry for `a: 7` naming the document `_id: 1`, which has no such key.
        let (entries, _) = index::entries(
            &ix,
            c.state().id,
            &rawdoc! {"_id": 1, "a": 7},
            &crate::keycode::encode_id(RawBsonRef::Int32(1)),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let (stray, _) = entries
            .into_iter()
            .next()
            .unwrap_or_else(|| panic!("entry"));
        write(s.engine().as_ref(), Some((stray.key, stray.value)), None);

        let r = validate(&c, false);
        assert!(!r.valid(), "{engine}: {r:?}");
        assert_eq!(r.extra_index_entries.len(), 1, "{engine}: {r:?}");
        assert!(r.missing_index_entries.is_empty(), "{engine}: {r:?}");
        let extra = &r.extra_index_entries[0];
        assert_eq!(extra.get_str("indexName").ok(), Some("a_1"));
        assert_eq!(extra.get("recordId"), Some(&Bson::Int32(1)));
        assert_eq!(
            keys(&r),
            vec![("_id_".into(), 5, true), ("a_1".into(), 11, false)],
            "{engine}"
        );
        assert!(r
            .errors
            .contains(&"Index with name 'a_1' has inconsistencies.".to_string()));
        assert!(r
            .warnings
            .contains(&"Detected 1 extra index entries.".to_string()));

        let fixed = validate(&c, true);
        assert!(fixed.valid() && fixed.repaired, "{engine}: {fixed:?}");
        assert_eq!(fixed.removed_extra_index_entries, 1);
        let again = validate(&c, false);
        assert!(again.valid() && !again.repaired, "{engine}: {again:?}");
        assert_eq!(entries_of(&c).len(), 10);
    }
}

#[test]
fn a_deleted_index_entry_is_missing_and_repair_restores_it() {
    for (engine, s, _dir) in stores() {
        let c = populated(&s, "c", 5);
        let before = entries_of(&c);
        let (gone, _) = before[3].clone();
        write(s.engine().as_ref(), None, Some(gone));

        let r = validate(&c, false);
        assert!(!r.valid(), "{engine}: {r:?}");
        assert!(r.extra_index_entries.is_empty());
        assert_eq!(r.missing_index_entries.len(), 1, "{engine}: {r:?}");
        let missing = &r.missing_index_entries[0];
        assert_eq!(missing.get_str("indexName").ok(), Some("a_1"));
        assert_eq!(
            missing.get("indexKey"),
            Some(&Bson::Document(bson::doc! {"a": 3}))
        );
        assert_eq!(
            missing.get("idKey"),
            Some(&Bson::Document(bson::doc! {"_id": 3}))
        );
        assert_eq!(keys(&r)[1], ("a_1".into(), 9, false), "{engine}");
        assert!(r
            .warnings
            .contains(&"Detected 1 missing index entries.".to_string()));

        let fixed = validate(&c, true);
        assert!(fixed.valid() && fixed.repaired, "{engine}: {fixed:?}");
        assert_eq!(fixed.inserted_missing_index_entries, 1);
        assert_eq!(entries_of(&c), before, "{engine}");
        assert!(validate(&c, false).valid());
    }
}

#[test]
fn invalid_documents_are_reported_and_repair_removes_them() {
    for (engine, s, _dir) in stores() {
        clustered(&s, "c");
        let c = fill(&s, "c", 3);
        let id = c.state().id;
        // Stored under `_id: 10` but holding `_id: 11`.
        let wrong = rawdoc! {"_id": 11, "a": 1};
        write(
            s.engine().as_ref(),
            Some((
                layout::doc_key_for(id, RawBsonRef::Int32(10)),
                wrong.as_bytes().to_vec(),
            )),
            None,
        );
        // Not BSON at all.
        write(
            s.engine().as_ref(),
            Some((
                layout::doc_key_for(id, RawBsonRef::Int32(12)),
                vec![9, 0, 0, 0, 0x10, 0xFF],
            )),
            None,
        );
        let r = validate(&c, false);
        assert!(!r.valid(), "{engine}: {r:?}");
        assert_eq!(r.nrecords, 5);
        assert_eq!(r.invalid_documents, 2);
        assert_eq!(r.corrupt_records.len(), 2);
        assert!(r
            .errors
            .contains(&"Detected one or more invalid documents. See logs.".to_string()));
        // The stored count (3) differs from the 5 records: corrected.
        assert_eq!(c.count(), 5, "{engine}");

        let fixed = validate(&c, true);
        assert_eq!(fixed.removed_corrupt_records, 2, "{engine}: {fixed:?}");
        assert!(fixed.repaired);
        let again = validate(&c, false);
        assert!(again.valid(), "{engine}: {again:?}");
        assert_eq!((again.nrecords, c.count()), (3, 3));
    }
}

#[test]
fn wrong_stats_are_corrected_with_a_warning() {
    for (engine, s, _dir) in stores() {
        let c = populated(&s, "c", 4);
        let indexes = c.state().indexes.read().clone();
        let right = c.tally_locked(&indexes);
        let size = c.data_size();
        // A wrong count, in the record format of an older BisonDB.
        let mut old = 40u64.to_be_bytes().to_vec();
        old.extend_from_slice(&1u64.to_be_bytes());
        write(
            s.engine().as_ref(),
            Some((layout::stats_key(c.state().id), old)),
            None,
        );
        let r = validate(&c, false);
        assert!(r.valid(), "{engine}: {r:?}");
        assert_eq!(r.warnings.len(), 1, "{engine}: {r:?}");
        assert!(r.warnings[0].contains("(40 documents, 1 bytes)"), "{r:?}");
        assert_eq!((c.count(), c.data_size()), (4, size));
        assert_eq!(c.tally_locked(&indexes), right, "{engine}");
        assert!(validate(&c, false).warnings.is_empty());

        // Right count and size, wrong bytes of an index's entries.
        let mut wrong = right.clone();
        wrong.indexes[0].bytes += 1;
        write(
            s.engine().as_ref(),
            Some((
                layout::stats_key(c.state().id),
                layout::encode_stats(&wrong),
            )),
            None,
        );
        let r = validate(&c, false);
        assert_eq!(r.warnings.len(), 1, "{engine}: {r:?}");
        assert!(r.warnings[0].contains("index sizes"), "{r:?}");
        assert!(validate(&c, false).warnings.is_empty());
    }
}

#[test]
fn a_unique_key_held_by_another_document_is_not_repaired_away() {
    for (engine, s, _dir) in stores() {
        clustered(&s, "u");
        let c = s
            .collection("db", "u")
            .unwrap_or_else(|| panic!("no collection"));
        let spec =
            IndexSpec::from_document(&bson::doc! {"name": "b_1", "key": {"b": 1}, "unique": true})
                .unwrap_or_else(|| panic!("spec"));
        s.create_index("db", "u", spec)
            .unwrap_or_else(|e| panic!("{e}"));
        let docs = [rawdoc! {"_id": 1, "b": 1}, rawdoc! {"_id": 2, "b": 2}];
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        c.insert_many(&refs, true, Durability::Buffered);
        // Document 2 is rewritten to `b: 1` behind the index's back.
        let id = c.state().id;
        let dup = rawdoc! {"_id": 2, "b": 1};
        write(
            s.engine().as_ref(),
            Some((
                layout::doc_key_for(id, RawBsonRef::Int32(2)),
                dup.as_bytes().to_vec(),
            )),
            None,
        );
        let r = validate(&c, true);
        assert!(!r.valid(), "{engine}: {r:?}");
        // The entry for `b: 2` is extra and removed; `b: 1` stays with `_id: 1`.
        assert_eq!(r.removed_extra_index_entries, 1);
        assert_eq!(r.inserted_missing_index_entries, 0);
        assert_eq!(r.missing_index_entries.len(), 1, "{engine}: {r:?}");
        assert!(c.get(RawBsonRef::Int32(1)).ok().flatten().is_some());
    }
}

#[test]
fn capped_natural_order_is_checked() {
    for (engine, s, _dir) in stores() {
        let options = bson::doc! {"capped": true, "size": 1 << 20};
        let c = s
            .create_collection("db", "cap", options)
            .unwrap_or_else(|e| panic!("{e}"));
        let docs: Vec<RawDocumentBuf> = (0..4).map(|i| rawdoc! {"_id": i}).collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| d.as_ref()).collect();
        c.insert_many(&refs, true, Durability::Buffered);
        let r = validate(&c, false);
        assert!(r.valid(), "{engine}: {r:?}");

        // A natural-order key without its document.
        let id = c.state().id;
        write(
            s.engine().as_ref(),
            Some((
                capped::natural_key(id, 1000),
                crate::keycode::encode_id(RawBsonRef::Int32(99)),
            )),
            None,
        );
        let r = validate(&c, false);
        assert!(!r.valid(), "{engine}: {r:?}");
        // A document whose record id is gone.
        let rid = capped::rid_key(id, &crate::keycode::encode_id(RawBsonRef::Int32(2)));
        write(s.engine().as_ref(), None, Some(rid));
        let r = validate(&c, false);
        assert!(
            r.errors
                .iter()
                .any(|e| e.starts_with("1 documents of capped collection")),
            "{engine}: {r:?}"
        );
    }
}
