//! The run encoding, merging and grouping, without fjall.

use super::*;

fn run(ops: &[(&[u8], Option<&[u8]>)], seq: u64) -> Arc<Run> {
    let mut b = RunBuilder::default();
    for (k, v) in ops {
        b.push(k, *v).unwrap_or_else(|e| panic!("push: {e}"));
    }
    Arc::new(b.finish(seq, 0))
}

fn collect(m: Merged<'_>) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    m.map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
        .collect()
}

#[test]
fn batch_ops_round_trip_through_the_blob_encoding() {
    let ops = vec![
        BatchOp::Put(vec![3, 1], vec![9, 9]),
        BatchOp::Delete(vec![3, 2]),
        BatchOp::Put(vec![3, 3], vec![]),
    ];
    let r = run_of_ops(&ops).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.len(), 3);
    assert_eq!(r.entry(0), (&[3u8, 1][..], Some(&[9u8, 9][..])));
    assert_eq!(r.entry(1), (&[3u8, 2][..], None));
    assert_eq!(r.entry(2), (&[3u8, 3][..], Some(&[][..])));
    let parts = r.parts();
    assert_eq!(parts.len(), 1);
    let back = decode_run(&parts, 7).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.data, r.data);
    assert_eq!(back.starts, r.starts);
    assert_eq!(r.get(&[3, 2]), Some(None));
    assert_eq!(r.get(&[3, 1]), Some(Some(&[9u8, 9][..])));
    assert_eq!(r.get(&[3, 0]), None);
    assert_eq!(r.get(&[3, 4]), None);
}

#[test]
fn big_runs_split_into_parts_at_entry_boundaries() {
    let value = vec![7u8; PART_BYTES / 3];
    let keys: Vec<[u8; 2]> = (0..7u8).map(|i| [3, i]).collect();
    let ops: Vec<(&[u8], Option<&[u8]>)> =
        keys.iter().map(|k| (&k[..], Some(&value[..]))).collect();
    let r = run(&ops, 1);
    let parts = r.parts();
    assert!(parts.len() >= 2, "{} parts", parts.len());
    assert!(parts.iter().all(|p| p.len() <= PART_BYTES + 32));
    let back = decode_run(&parts, 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(back.len(), 7);
    assert_eq!(back.data, r.data);
}

#[test]
fn damaged_or_unsorted_blobs_are_refused() {
    let r = run(&[(b"a", Some(b"1")), (b"b", None)], 3);
    let data = r.parts().concat();
    // Cutting at the second entry's start leaves a whole (shorter) blob.
    let boundary = r.starts[1];
    for cut in (1..data.len()).filter(|&c| c != boundary) {
        let got = decode_run(&[&data[..cut]], 3);
        assert!(
            matches!(got, Err(EngineError::Corrupt(_))),
            "cut at {cut} accepted"
        );
    }
    let mut bad_tag = data.clone();
    bad_tag[0] = 9;
    assert!(decode_run(&[&bad_tag], 3).is_err());
    let unsorted = run(&[(b"b", None)], 0).parts().concat();
    let twice = [unsorted.clone(), unsorted].concat();
    assert!(decode_run(&[&twice], 3).is_err(), "keys must ascend");
}

#[test]
fn merged_runs_newest_wins_in_both_directions_within_bounds() {
    let old = run(
        &[
            (b"a", Some(b"old")),
            (b"b", Some(b"old")),
            (b"d", Some(b"old")),
        ],
        1,
    );
    let new = run(
        &[(b"b", None), (b"c", Some(b"new")), (b"d", Some(b"new"))],
        2,
    );
    let runs = vec![old, new];
    let fwd = collect(Merged::new(
        &runs,
        Bound::Unbounded,
        Bound::Unbounded,
        false,
    ));
    let want: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
        (b"a".to_vec(), Some(b"old".to_vec())),
        (b"b".to_vec(), None),
        (b"c".to_vec(), Some(b"new".to_vec())),
        (b"d".to_vec(), Some(b"new".to_vec())),
    ];
    assert_eq!(fwd, want);
    let rev = collect(Merged::new(&runs, Bound::Unbounded, Bound::Unbounded, true));
    assert_eq!(rev, want.iter().rev().cloned().collect::<Vec<_>>());
    let mid = collect(Merged::new(
        &runs,
        Bound::Excluded(b"a"),
        Bound::Included(b"c"),
        false,
    ));
    assert_eq!(mid, want[1..3].to_vec());
    let empty = collect(Merged::new(
        &runs,
        Bound::Included(b"c"),
        Bound::Excluded(b"b"),
        true,
    ));
    assert!(empty.is_empty());
}

#[test]
fn merge_keeps_deletions_and_the_newest_sequence() {
    let a = run(&[(b"x", Some(b"1"))], 4);
    let b = run(&[(b"x", None), (b"y", Some(b"2"))], 9);
    let m = merge(&[a, b], 1).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(m.max_seq, 9);
    assert_eq!(m.level, 1);
    assert_eq!(m.len(), 2);
    assert_eq!(m.get(b"x"), Some(None));
    assert_eq!(m.get(b"y"), Some(Some(&b"2"[..])));
}

#[test]
fn groups_of_one_class_are_found_oldest_first() {
    let at = |level: u8| {
        let mut r = RunBuilder::default();
        r.push(b"k", None).unwrap_or_else(|e| panic!("{e}"));
        Arc::new(r.finish(0, level))
    };
    let list = |levels: &[u8]| levels.iter().map(|&l| at(l)).collect::<Vec<_>>();
    assert_eq!(mergeable(&list(&[0; FAN_IN - 1])), None);
    assert_eq!(mergeable(&list(&[0; FAN_IN])), Some(0..FAN_IN));
    let mut levels = vec![2u8, 1];
    levels.extend([0; FAN_IN + 2]);
    assert_eq!(mergeable(&list(&levels)), Some(2..2 + FAN_IN));
    let mut levels = vec![1u8; FAN_IN];
    levels.extend([0; 3]);
    assert_eq!(mergeable(&list(&levels)), Some(0..FAN_IN));
}

#[test]
fn merging_disjoint_runs_concatenates_them_in_key_order() {
    // Newest first in the list but lowest keys: the order is the keys'.
    let high = run(&[(b"d", Some(b"4")), (b"e", None)], 1);
    let low = run(&[(b"a", Some(b"1")), (b"b", Some(b"2"))], 2);
    let m = merge(&[high.clone(), low.clone()], 1).unwrap_or_else(|e| panic!("{e}"));
    let all = [high, low];
    let want = collect(Merged::new(&all, Bound::Unbounded, Bound::Unbounded, false));
    let m = Arc::new(m);
    let got = collect(Merged::new(
        std::slice::from_ref(&m),
        Bound::Unbounded,
        Bound::Unbounded,
        false,
    ));
    assert_eq!(got, want);
    assert_eq!(m.max_seq, 2);
    // Runs that share a key still merge with the newest winning.
    let a = run(&[(b"a", Some(b"old")), (b"c", Some(b"3"))], 3);
    let b = run(&[(b"c", Some(b"new"))], 4);
    let m = Arc::new(merge(&[a, b], 1).unwrap_or_else(|e| panic!("{e}")));
    let got = collect(Merged::new(
        std::slice::from_ref(&m),
        Bound::Unbounded,
        Bound::Unbounded,
        false,
    ));
    assert_eq!(
        got,
        vec![
            (b"a".to_vec(), Some(b"old".to_vec())),
            (b"c".to_vec(), Some(b"new".to_vec()))
        ]
    );
}

#[test]
fn ingestion_order_is_the_merged_order() {
    let own = |it: Box<dyn Iterator<Item = Op<'_>> + '_>| -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
        it.map(|(k, v)| (k.to_vec(), v.map(<[u8]>::to_vec)))
            .collect()
    };
    // Disjoint runs, listed newest first with the lowest keys, and an
    // empty run among them.
    let disjoint = [
        run(&[(b"d", Some(b"4")), (b"e", None)], 1),
        run(&[], 2),
        run(&[(b"a", Some(b"1")), (b"b", Some(b"2"))], 3),
    ];
    // Overlapping runs: the newest operation on `c` wins.
    let overlapping = [
        run(&[(b"a", Some(b"old")), (b"c", Some(b"3"))], 4),
        run(&[(b"c", None), (b"f", Some(b"6"))], 5),
    ];
    for runs in [&disjoint[..], &overlapping[..]] {
        let want = collect(Merged::new(runs, Bound::Unbounded, Bound::Unbounded, false));
        assert_eq!(own(all_in_key_order(runs)), want);
    }
    assert_eq!(own(all_in_key_order(&disjoint)).len(), 4);
    assert_eq!(
        own(all_in_key_order(&overlapping)),
        vec![
            (b"a".to_vec(), Some(b"old".to_vec())),
            (b"c".to_vec(), None),
            (b"f".to_vec(), Some(b"6".to_vec()))
        ]
    );
}
