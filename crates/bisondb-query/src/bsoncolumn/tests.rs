//! Round trips of random columns, and hand-built columns laid out as the
//! format's documentation describes them.

use super::*;
use bson::{doc, spec::BinarySubtype, DateTime};
use proptest::prelude::*;

fn rt(values: &[Option<Bson>]) -> Vec<u8> {
    let bytes = encode(values.iter().map(|v| v.as_ref())).unwrap();
    let back = decode(&bytes).unwrap();
    assert_eq!(back.len(), values.len());
    for (a, b) in back.iter().zip(values) {
        match (a, b) {
            (Some(Bson::Double(x)), Some(Bson::Double(y))) => {
                assert_eq!(x.to_bits(), y.to_bits(), "{x} vs {y}")
            }
            _ => assert_eq!(a, b),
        }
    }
    bytes
}

fn word(w: u64) -> [u8; 8] {
    w.to_le_bytes()
}

#[test]
fn int32_literal_then_deltas() {
    // 1, then deltas +1, +1 (zigzag 2) in one selector-13 word (2 x 30 bits).
    let mut b = vec![0x10, 0x00, 1, 0, 0, 0, 0x80];
    b.extend(word(13 | (2 << 4) | (2 << 34)));
    b.push(0);
    let v = decode(&b).unwrap();
    assert_eq!(
        v,
        vec![
            Some(Bson::Int32(1)),
            Some(Bson::Int32(2)),
            Some(Bson::Int32(3))
        ]
    );
}

#[test]
fn skips_before_any_literal_and_between_values() {
    // A block whose first slot is missing before the literal, then the literal.
    let mut b = vec![0x80];
    b.extend(word(14 | (((1u64 << 60) - 1) << 4)));
    b.extend([0x12, 0x00, 7, 0, 0, 0, 0, 0, 0, 0, 0x80]);
    // Selector 13: missing, then delta -2 (zigzag 3).
    b.extend(word(13 | (((1u64 << 30) - 1) << 4) | (3 << 34)));
    b.push(0);
    let v = decode(&b).unwrap();
    assert_eq!(
        v,
        vec![None, Some(Bson::Int64(7)), None, Some(Bson::Int64(5))]
    );
}

#[test]
fn scaled_doubles_and_scale_change() {
    // 1.5 then +0.1 at scale 10 (0xA0): 15 -> 16, zigzag(1) = 2.
    let mut b = vec![0x01, 0x00];
    b.extend(1.5f64.to_le_bytes());
    b.push(0xA0);
    b.extend(word(14 | (2 << 4)));
    // Then scale 100 (0xB0): 160 -> 161.
    b.push(0xB0);
    b.extend(word(14 | (2 << 4)));
    b.push(0);
    let v = decode(&b).unwrap();
    assert_eq!(
        v,
        vec![
            Some(Bson::Double(1.5)),
            Some(Bson::Double(1.6)),
            Some(Bson::Double(1.61))
        ]
    );
}

#[test]
fn dates_are_deltas_of_deltas_and_runs_repeat_the_last_slot() {
    // t, t+1000, t+2000, ...: delta of delta 1000 once, then 0s; the run
    // (selector 15, nibble 0) repeats the 0 of the word before it 120 times.
    let t = 1_700_000_000_000i64;
    let mut b = vec![0x09, 0x00];
    b.extend(t.to_le_bytes());
    b.push(0x81);
    b.extend(word(13 | (2000 << 4))); // zigzag(1000), then 0
    b.extend(word(15));
    b.push(0);
    let v = decode(&b).unwrap();
    assert_eq!(v.len(), 1 + 2 + 120);
    for (i, x) in v.iter().enumerate() {
        assert_eq!(
            x,
            &Some(Bson::DateTime(DateTime::from_millis(t + 1000 * i as i64)))
        );
    }
}

#[test]
fn strings_use_128_bit_deltas() {
    // "a1" then "a2": reversed "1a" / "2a" as little-endian integers differ by 1.
    let mut b = vec![0x02, 0x00, 3, 0, 0, 0, b'a', b'1', 0, 0x80];
    b.extend(word(14 | (2 << 4)));
    b.push(0);
    assert_eq!(
        decode(&b).unwrap(),
        vec![
            Some(Bson::String("a1".into())),
            Some(Bson::String("a2".into()))
        ]
    );
}

#[test]
fn interleaved_objects_rebuild_from_leaf_streams() {
    // Reference {a: 1, b: {c: 10}}; stream a: +1, missing; stream b.c: +2, +2.
    let reference = doc! {"a": 1, "b": {"c": 10}}.to_vec().unwrap();
    let mut b = vec![0xF1];
    b.extend(&reference);
    b.push(0x80);
    b.extend(word(13 | (2 << 4) | (((1u64 << 30) - 1) << 34)));
    b.push(0x80);
    b.extend(word(13 | (4 << 4) | (4 << 34)));
    b.push(0x00); // end of interleaving
                  // A zero delta after it repeats the last object.
    b.push(0x80);
    b.extend(word(14));
    b.push(0);
    let v = decode(&b).unwrap();
    assert_eq!(
        v,
        vec![
            Some(Bson::Document(doc! {"a": 2, "b": {"c": 12}})),
            Some(Bson::Document(doc! {"b": {"c": 14}})),
            Some(Bson::Document(doc! {"b": {"c": 14}})),
        ]
    );
}

#[test]
fn bad_columns_are_errors_not_panics() {
    for b in [
        &[][..],
        &[0x80, 1, 2][..],
        &[0x10, 0x00, 1][..],
        &[0x10, 0x00, 1, 0, 0, 0][..],
        &[0xE0, 0][..],
        &[0xF1, 5, 0, 0, 0, 0, 0][..],
        &[0x10, 0x00, 1, 0, 0, 0, 0, 9][..],
    ] {
        assert!(decode(b).is_err(), "{b:?}");
    }
}

#[test]
fn round_trips_of_typical_measurements() {
    let t = 1_700_000_000_000i64;
    let times: Vec<_> = (0..1000)
        .map(|i| Some(Bson::DateTime(DateTime::from_millis(t + i * 1000))))
        .collect();
    let bytes = rt(&times);
    // Regular times cost a few bytes, not 8 per value.
    assert!(bytes.len() < 64, "{}", bytes.len());
    let values: Vec<_> = (0..1000)
        .map(|i| Some(Bson::Double(f64::from(i % 97) / 10.0)))
        .collect();
    let bytes = rt(&values);
    assert!(bytes.len() < 2000, "{}", bytes.len());
    let ids: Vec<_> = (0..1000)
        .map(|_| Some(Bson::ObjectId(ObjectId::new())))
        .collect();
    let bytes = rt(&ids);
    assert!(bytes.len() < 2000, "{}", bytes.len());
    rt(&[
        Some(Bson::Int32(1)),
        Some(Bson::String("x".into())),
        None,
        Some(Bson::Document(doc! {"a": 1})),
        Some(Bson::Document(doc! {"a": 1})),
        Some(Bson::Double(f64::NAN)),
        Some(Bson::Double(0.1)),
        Some(Bson::Double(-0.0)),
        Some(Bson::Double(1e300)),
        Some(Bson::Null),
        Some(Bson::Null),
        Some(Bson::MinKey),
        Some(Bson::MaxKey),
        Some(Bson::Binary(bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 2],
        })),
        Some(Bson::Binary(bson::Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![1, 3],
        })),
        Some(Bson::Timestamp(Timestamp {
            time: 5,
            increment: 1,
        })),
        Some(Bson::Timestamp(Timestamp {
            time: 5,
            increment: 2,
        })),
        Some(Bson::Int64(i64::MIN)),
        Some(Bson::Int64(i64::MAX)),
        Some(Bson::Boolean(true)),
        Some(Bson::Boolean(false)),
        Some(Bson::Decimal128("1.5".parse().unwrap())),
        Some(Bson::Decimal128("1.6".parse().unwrap())),
        Some(Bson::String("a much longer string than sixteen".into())),
        Some(Bson::String("a much longer string than sixteen".into())),
    ]);
}

fn value() -> impl Strategy<Value = Option<Bson>> {
    prop_oneof![
        Just(None),
        (-3i32..3).prop_map(|i| Some(Bson::Int32(i))),
        any::<i32>().prop_map(|i| Some(Bson::Int32(i))),
        any::<i64>().prop_map(|i| Some(Bson::Int64(i))),
        (0i64..100).prop_map(|i| Some(Bson::Int64(1000 + i))),
        any::<f64>().prop_map(|d| Some(Bson::Double(d))),
        (-1000i64..1000).prop_map(|i| Some(Bson::Double(i as f64 / 100.0))),
        (0i64..5).prop_map(|i| Some(Bson::DateTime(DateTime::from_millis(1_000_000 + i * 1000)))),
        any::<i64>().prop_map(|i| Some(Bson::DateTime(DateTime::from_millis(i)))),
        "[a-c]{0,20}".prop_map(|s| Some(Bson::String(s))),
        any::<bool>().prop_map(|b| Some(Bson::Boolean(b))),
        Just(Some(Bson::Null)),
        (any::<u32>(), any::<u32>()).prop_map(|(t, i)| Some(Bson::Timestamp(Timestamp {
            time: t,
            increment: i
        }))),
        (0u8..3).prop_map(|i| Some(Bson::Document(doc! {"k": i32::from(i)}))),
    ]
}

proptest! {
    #[test]
    fn random_columns_round_trip(values in proptest::collection::vec(value(), 0..300)) {
        rt(&values);
    }

    #[test]
    fn random_runs_round_trip(
        runs in proptest::collection::vec((value(), 1usize..400), 0..6)
    ) {
        let values: Vec<_> = runs
            .into_iter()
            .flat_map(|(v, n)| std::iter::repeat_n(v, n))
            .collect();
        rt(&values);
    }

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let _ = decode(&bytes);
    }
}
