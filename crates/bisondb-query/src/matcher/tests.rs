//! Table-driven tests of filter semantics and parse errors.

use super::*;
use bson::{bson, doc, Decimal128};
use std::str::FromStr;

fn check(cases: &[(Document, Document, bool)]) {
    for (filter, d, want) in cases {
        let m = Matcher::parse_doc(filter).unwrap_or_else(|e| panic!("{filter}: {e}"));
        assert_eq!(m.matches_doc(d), *want, "filter {filter} on {d}");
        let raw_filter = RawDocumentBuf::try_from(filter).unwrap();
        let m2 = Matcher::parse(&raw_filter).unwrap();
        assert_eq!(m2.matches_doc(d), *want, "raw filter {filter} on {d}");
    }
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(Decimal128::from_str(s).unwrap())
}

#[test]
fn equality_and_null() {
    check(&[
        (doc! {"a": 1}, doc! {"a": 1}, true),
        (doc! {"a": 1}, doc! {"a": 1.0}, true),
        (doc! {"a": 1}, doc! {"a": dec("1.0")}, true),
        (doc! {"a": 1}, doc! {"a": 2}, false),
        (doc! {"a": 1}, doc! {"a": "1"}, false),
        (doc! {"a": 1}, doc! {"a": [3, 1]}, true),
        (doc! {"a": 1}, doc! {"a": [[1]]}, false),
        (doc! {"a": [1, 2]}, doc! {"a": [1, 2]}, true),
        (doc! {"a": [1, 2]}, doc! {"a": [2, 1]}, false),
        (doc! {"a": [1, 2]}, doc! {"a": [[1, 2], 3]}, true),
        (doc! {"a": {"b": 1}}, doc! {"a": {"b": 1}}, true),
        (doc! {"a": {"b": 1}}, doc! {"a": {"b": 1, "c": 2}}, false),
        (doc! {"a.b": 1}, doc! {"a": {"b": 1}}, true),
        (doc! {"a.b": 1}, doc! {"a": [{"b": 2}, {"b": 1}]}, true),
        (doc! {"a.b": 3}, doc! {"a": [{"b": 2}, {"b": [3]}]}, true),
        (doc! {"a.1": 5}, doc! {"a": [4, 5]}, true),
        (doc! {"a.1.b": 5}, doc! {"a": [{"b": 4}, {"b": 5}]}, true),
        (doc! {"a.0.b": 5}, doc! {"a": [{"b": 4}, {"b": 5}]}, false),
        (doc! {"a": null}, doc! {}, true),
        (doc! {"a": null}, doc! {"a": null}, true),
        (doc! {"a": null}, doc! {"a": [1, null]}, true),
        (doc! {"a": null}, doc! {"a": [1]}, false),
        (doc! {"a": null}, doc! {"a": 0}, false),
        (doc! {"a": null}, doc! {"a": Bson::Undefined}, false),
        (doc! {"a.b": null}, doc! {"a": [{"b": 1}, {"c": 1}]}, true),
        (doc! {"a.b": null}, doc! {"a": [{"b": 1}]}, false),
        (doc! {"a.b": null}, doc! {"a": 5}, true),
        (doc! {"a": {"$eq": null}}, doc! {"b": 1}, true),
        (
            doc! {"a": {"$eq": {"$gt": 1}}},
            doc! {"a": {"$gt": 1}},
            true,
        ),
        (
            doc! {"a": {"$ref": "c", "$id": 1}},
            doc! {"a": {"$ref": "c", "$id": 1}},
            true,
        ),
        (doc! {}, doc! {"x": 1}, true),
        (doc! {"$comment": "hi"}, doc! {"x": 1}, true),
        (doc! {"a": 1, "b": 2}, doc! {"a": 1, "b": 3}, false),
    ]);
}

#[test]
fn negations() {
    check(&[
        (doc! {"a": {"$ne": 1}}, doc! {"a": 2}, true),
        (doc! {"a": {"$ne": 1}}, doc! {"a": [2, 1]}, false),
        (doc! {"a": {"$ne": 1}}, doc! {}, true),
        (doc! {"a": {"$ne": null}}, doc! {}, false),
        (doc! {"a": {"$ne": null}}, doc! {"a": [1, null]}, false),
        (doc! {"a": {"$ne": null}}, doc! {"a": 1}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": 3}, true),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {"a": [3, 2]}, false),
        (doc! {"a": {"$nin": [1, 2]}}, doc! {}, true),
        (doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": 3}, true),
        (doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$not": {"$gt": 5}}}, doc! {"a": 7}, false),
        (
            doc! {"a": {"$not": {"$gt": 1, "$lt": 5}}},
            doc! {"a": 3},
            false,
        ),
        (
            doc! {"a": {"$not": {"$gt": 1, "$lt": 5}}},
            doc! {"a": 6},
            true,
        ),
        (
            doc! {"a": {"$not": Bson::RegularExpression(bson::Regex { pattern: bson::raw::CString::try_from("^x").unwrap(), options: bson::raw::CString::try_from("").unwrap() })}},
            doc! {"a": "xy"},
            false,
        ),
        (
            doc! {"a": {"$not": {"$regex": "^x"}}},
            doc! {"a": "yx"},
            true,
        ),
        (doc! {"$nor": [{"a": 1}, {"b": 1}]}, doc! {"a": 2}, true),
        (doc! {"$nor": [{"a": 1}, {"b": 1}]}, doc! {"b": 1}, false),
    ]);
}

#[test]
fn comparisons() {
    check(&[
        (doc! {"a": {"$gt": 1}}, doc! {"a": 2}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": 1.5}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": dec("1.01")}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gt": 1}}, doc! {"a": "z"}, false),
        (doc! {"a": {"$gt": 1}}, doc! {"a": true}, false),
        (doc! {"a": {"$gt": 1}}, doc! {"a": [0, 5]}, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": [0, "z"]}, false),
        (doc! {"a": {"$gt": 1}}, doc! {}, false),
        (doc! {"a": {"$gte": 1}}, doc! {"a": 1.0}, true),
        (doc! {"a": {"$lt": 1}}, doc! {"a": null}, false),
        (doc! {"a": {"$lt": 1}}, doc! {"a": f64::NAN}, true),
        (doc! {"a": {"$lte": "b"}}, doc! {"a": "abc"}, true),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gte": null}}, doc! {}, true),
        (doc! {"a": {"$lte": null}}, doc! {"a": null}, true),
        (doc! {"a": {"$gt": null}}, doc! {"a": 1}, false),
        (doc! {"a": {"$gt": Bson::MinKey}}, doc! {"a": "s"}, true),
        (doc! {"a": {"$gt": Bson::MinKey}}, doc! {}, true),
        (
            doc! {"a": {"$lt": Bson::MaxKey}},
            doc! {"a": {"x": 1}},
            true,
        ),
        (doc! {"a": {"$gt": [1]}}, doc! {"a": [2]}, true),
        (doc! {"a": {"$gt": [1]}}, doc! {"a": [[2]]}, true),
        (doc! {"a": {"$gt": {"x": 1}}}, doc! {"a": {"x": 2}}, true),
        (doc! {"a": {"$gt": {"x": 1}}}, doc! {"a": 5}, false),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": 2}, true),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": [0, 4]}, true),
        (doc! {"a": {"$gt": 1, "$lt": 3}}, doc! {"a": 4}, false),
        (
            doc! {"a.b": {"$gt": 1}},
            doc! {"a": [{"b": 0}, {"b": 2}]},
            true,
        ),
        (doc! {"a": {"$gt": i64::MAX}}, doc! {"a": 9.3e18}, true),
    ]);
}

#[test]
fn in_and_all() {
    let re = |p: &str, o: &str| {
        Bson::RegularExpression(bson::Regex {
            pattern: bson::raw::CString::try_from(p).unwrap(),
            options: bson::raw::CString::try_from(o).unwrap(),
        })
    };
    check(&[
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": 2.0}, true),
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": [5, 1]}, true),
        (doc! {"a": {"$in": [1, 2]}}, doc! {"a": 3}, false),
        (doc! {"a": {"$in": []}}, doc! {"a": 3}, false),
        (doc! {"a": {"$in": [null]}}, doc! {}, true),
        (doc! {"a": {"$in": [[1, 2]]}}, doc! {"a": [1, 2]}, true),
        (
            doc! {"a": {"$in": [re("^ab", "")]}},
            doc! {"a": "abc"},
            true,
        ),
        (
            doc! {"a": {"$in": [re("^AB", "i"), 5]}},
            doc! {"a": "abc"},
            true,
        ),
        (
            doc! {"a": {"$in": [re("^x", "")]}},
            doc! {"a": "abc"},
            false,
        ),
        (
            doc! {"a": {"$in": ["b", 1, "a", null, 1.0]}},
            doc! {"a": "a"},
            true,
        ),
        (doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3, 1]}, true),
        (doc! {"a": {"$all": [1, 2]}}, doc! {"a": [2, 3]}, false),
        (doc! {"a": {"$all": [1]}}, doc! {"a": 1}, true),
        (doc! {"a": {"$all": []}}, doc! {"a": [1]}, false),
        (doc! {"a": {"$all": [[1, 2]]}}, doc! {"a": [1, 2]}, true),
        (
            doc! {"a": {"$all": [re("^a", "")]}},
            doc! {"a": ["b", "ab"]},
            true,
        ),
        (
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
            doc! {"a": [{"b": 1}, {"c": 2}]},
            true,
        ),
        (
            doc! {"a": {"$all": [{"$elemMatch": {"b": 1}}, {"$elemMatch": {"c": 2}}]}},
            doc! {"a": [{"b": 1}]},
            false,
        ),
    ]);
}

#[test]
fn exists_type_size_mod() {
    check(&[
        (doc! {"a": {"$exists": true}}, doc! {"a": null}, true),
        (doc! {"a": {"$exists": true}}, doc! {}, false),
        (doc! {"a": {"$exists": false}}, doc! {}, true),
        (doc! {"a": {"$exists": 0}}, doc! {"a": 1}, false),
        (
            doc! {"a.b": {"$exists": true}},
            doc! {"a": [{"c": 1}, {"b": 1}]},
            true,
        ),
        (doc! {"a.b": {"$exists": false}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$type": "string"}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$type": 2}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$type": 2.0}}, doc! {"a": "x"}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": dec("1")}, true),
        (doc! {"a": {"$type": "number"}}, doc! {"a": "1"}, false),
        (doc! {"a": {"$type": "array"}}, doc! {"a": [1]}, true),
        (doc! {"a": {"$type": "array"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$type": "int"}}, doc! {"a": [1.5, 2]}, true),
        (
            doc! {"a": {"$type": ["string", "null"]}},
            doc! {"a": null},
            true,
        ),
        (doc! {"a": {"$type": "null"}}, doc! {}, false),
        (doc! {"a": {"$type": -1}}, doc! {"a": Bson::MinKey}, true),
        (doc! {"a": {"$type": "long"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$size": 2}}, doc! {"a": [1, 2]}, true),
        (doc! {"a": {"$size": 2}}, doc! {"a": [[1, 2]]}, false),
        (doc! {"a": {"$size": 0}}, doc! {"a": []}, true),
        (doc! {"a": {"$size": 0}}, doc! {}, false),
        (doc! {"a": {"$size": 1.0}}, doc! {"a": ["x"]}, true),
        (
            doc! {"a.b": {"$size": 1}},
            doc! {"a": [{"b": [1]}, {"b": 2}]},
            true,
        ),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9}, true),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 9.9}, true),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": 10}, false),
        (doc! {"a": {"$mod": [4, -1]}}, doc! {"a": -5}, true),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": [2, 5]}, true),
        (doc! {"a": {"$mod": [4, 1]}}, doc! {"a": "9"}, false),
        (doc! {"a": {"$mod": [-1, 0]}}, doc! {"a": i64::MIN}, true),
    ]);
}

#[test]
fn regex_and_elem_match() {
    check(&[
        (doc! {"a": {"$regex": "^ab"}}, doc! {"a": "abc"}, true),
        (
            doc! {"a": {"$regex": "^AB", "$options": "i"}},
            doc! {"a": "abc"},
            true,
        ),
        (
            doc! {"a": {"$regex": "^b", "$options": "m"}},
            doc! {"a": "a\nb"},
            true,
        ),
        (doc! {"a": {"$regex": "^b"}}, doc! {"a": "a\nb"}, false),
        (
            doc! {"a": {"$regex": "a.b", "$options": "s"}},
            doc! {"a": "a\nb"},
            true,
        ),
        (
            doc! {"a": {"$regex": "a b # c", "$options": "x"}},
            doc! {"a": "ab"},
            true,
        ),
        (doc! {"a": {"$regex": "1"}}, doc! {"a": 1}, false),
        (doc! {"a": {"$regex": "b"}}, doc! {"a": ["x", "abc"]}, true),
        (
            doc! {"a": {"$regex": "b"}},
            doc! {"a": Bson::Symbol("abc".into())},
            true,
        ),
        (
            doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
            doc! {"a": [0, 4]},
            false,
        ),
        (
            doc! {"a": {"$elemMatch": {"$gt": 1, "$lt": 3}}},
            doc! {"a": [0, 2]},
            true,
        ),
        (doc! {"a": {"$elemMatch": {"$gt": 1}}}, doc! {"a": 5}, false),
        (
            doc! {"a": {"$elemMatch": {"$gt": 1}}},
            doc! {"a": [[5]]},
            false,
        ),
        (
            doc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
            doc! {"a": [{"b": 1}, {"c": 2}]},
            false,
        ),
        (
            doc! {"a": {"$elemMatch": {"b": 1, "c": 2}}},
            doc! {"a": [{"b": 1, "c": 2}]},
            true,
        ),
        (
            doc! {"a": {"$elemMatch": {"b": {"$gt": 1}}}},
            doc! {"a": [{"b": [0, 3]}]},
            true,
        ),
        (
            doc! {"a": {"$elemMatch": {"$or": [{"b": 1}, {"c": 1}]}}},
            doc! {"a": [{"c": 1}]},
            true,
        ),
        (
            doc! {"a.b": {"$elemMatch": {"$eq": 2}}},
            doc! {"a": [{"b": [1, 2]}]},
            true,
        ),
    ]);
}

#[test]
fn logical() {
    check(&[
        (
            doc! {"$and": [{"a": 1}, {"b": 2}]},
            doc! {"a": 1, "b": 2},
            true,
        ),
        (doc! {"$and": [{"a": 1}, {"b": 2}]}, doc! {"a": 1}, false),
        (doc! {"$or": [{"a": 1}, {"b": 2}]}, doc! {"b": 2}, true),
        (doc! {"$or": [{"a": 1}, {"b": 2}]}, doc! {"b": 3}, false),
        (
            doc! {"$or": [{"a": 1}], "b": 1},
            doc! {"a": 1, "b": 2},
            false,
        ),
        (
            doc! {"$and": [{"$or": [{"a": 1}, {"a": 2}]}, {"$nor": [{"a": 2}]}]},
            doc! {"a": 1},
            true,
        ),
    ]);
}

#[test]
fn parse_errors() {
    let cases: Vec<(Document, i32, &str)> = vec![
        (doc! {"a": {"$foo": 1}}, 2, "unknown operator: $foo"),
        (doc! {"$foo": 1}, 2, "unknown top level operator: $foo"),
        (
            doc! {"$jsonSchema": {}},
            238,
            "$jsonSchema is not supported by BisonDB yet",
        ),
        (
            doc! {"a": {"$elemMatch": {"$expr": {"$eq": ["$b", 1]}}}},
            2,
            "$expr can only be applied to the top-level document",
        ),
        (doc! {"$expr": {"$noSuchOp": 1}}, 168, ""),
        (doc! {"$where": "true"}, 238, "$where is not supported"),
        (
            doc! {"$text": {"$search": "x"}},
            238,
            "$text is not supported",
        ),
        (
            doc! {"a": {"$geoWithin": {}}},
            238,
            "$geoWithin is not supported",
        ),
        (doc! {"a": {"$bitsAllSet": -1}}, 2, "non-negative"),
        (
            doc! {"a": {"$bitsAnySet": [-1]}},
            2,
            "bit positions must be >= 0",
        ),
        (
            doc! {"a": {"$bitsAnySet": [1.5]}},
            2,
            "bit positions must be an integer",
        ),
        (
            doc! {"a": {"$bitsAllClear": "x"}},
            2,
            "takes an Array, a number, or a BinData",
        ),
        (doc! {"a": {"$near": [0, 0]}}, 238, "$near is not supported"),
        (doc! {"a": {"$in": 1}}, 2, "$in needs an array"),
        (doc! {"a": {"$nin": {}}}, 2, "$nin needs an array"),
        (
            doc! {"a": {"$in": [{"$gt": 1}]}},
            2,
            "cannot nest $ under $in",
        ),
        (
            doc! {"$and": []},
            2,
            "$and/$or/$nor must be a nonempty array",
        ),
        (
            doc! {"$or": []},
            2,
            "$and/$or/$nor must be a nonempty array",
        ),
        (doc! {"$nor": 1}, 2, "$nor must be an array"),
        (
            doc! {"$or": [1]},
            2,
            "$or/$and/$nor entries need to be full objects",
        ),
        (
            doc! {"a": {"$not": 1}},
            2,
            "$not needs a regex or a document",
        ),
        (doc! {"a": {"$not": {}}}, 2, "$not cannot be empty"),
        (doc! {"a": {"$size": -1}}, 2, "$size may not be negative"),
        (
            doc! {"a": {"$size": 1.5}},
            2,
            "$size must be a whole number",
        ),
        (doc! {"a": {"$size": "1"}}, 2, "$size needs a number"),
        (doc! {"a": {"$mod": [0, 1]}}, 2, "divisor cannot be 0"),
        (
            doc! {"a": {"$mod": [1]}},
            2,
            "malformed mod, not enough elements",
        ),
        (
            doc! {"a": {"$mod": [1, 2, 3]}},
            2,
            "malformed mod, too many elements",
        ),
        (
            doc! {"a": {"$mod": 1}},
            2,
            "malformed mod, needs to be an array",
        ),
        (doc! {"a": {"$all": 1}}, 2, "$all needs an array"),
        (
            doc! {"a": {"$elemMatch": 1}},
            2,
            "$elemMatch needs an Object",
        ),
        (
            doc! {"a": {"$type": "foo"}},
            2,
            "Unknown type name alias: foo",
        ),
        (
            doc! {"a": {"$type": 99}},
            2,
            "Invalid numerical type code: 99",
        ),
        (
            doc! {"a": {"$type": 255}},
            2,
            "Invalid numerical type code: 255",
        ),
        (
            doc! {"a": {"$type": {}}},
            14,
            "type must be represented as a number or a string",
        ),
        (doc! {"a": {"$options": "i"}}, 2, "$options needs a $regex"),
        (doc! {"a": {"$regex": 1}}, 2, "$regex has to be a string"),
        (
            doc! {"a": {"$regex": "a", "$options": "z"}},
            51108,
            "invalid flag in regex options: z",
        ),
        (
            doc! {"a": {"$regex": "("}},
            51091,
            "Regular expression is invalid",
        ),
        (
            doc! {"a": {"$ne": bson::Regex { pattern: bson::raw::CString::try_from("x").unwrap(), options: bson::raw::CString::try_from("").unwrap() }}},
            2,
            "Can't have regex as arg to $ne.",
        ),
        (doc! {"a": {"$gt": 1, "b": 1}}, 2, "unknown operator: b"),
    ];
    for (filter, code, msg) in cases {
        let err = Matcher::parse_doc(&filter).expect_err(&filter.to_string());
        assert_eq!(err.code.code(), code, "{filter}: {err}");
        assert!(err.message.contains(msg), "{filter}: {}", err.message);
    }
}

#[test]
fn not_implemented_table_is_sorted() {
    assert!(NOT_IMPLEMENTED_OPERATORS.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn deep_nesting_is_rejected() {
    let mut f = doc! {"a": 1};
    for _ in 0..200 {
        f = doc! {"$and": [f]};
    }
    let err = Matcher::parse_doc(&f).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);
}

#[test]
fn helpers() {
    let m = Matcher::parse_doc(&doc! {"_id": 5}).unwrap();
    assert_eq!(m.id_equality(), Some(bson!(5)));
    let m = Matcher::parse_doc(&doc! {"_id": {"$eq": "x"}, "$comment": "c"}).unwrap();
    assert_eq!(m.id_equality(), Some(bson!("x")));
    for f in [
        doc! {"_id": 5, "a": 1},
        doc! {"_id": {"$gt": 5}},
        doc! {"_id": {"$in": [5]}},
        doc! {"a": 5},
        doc! {},
    ] {
        assert_eq!(Matcher::parse_doc(&f).unwrap().id_equality(), None, "{f}");
    }

    let m = Matcher::parse_doc(&doc! {
        "a": 1, "b.c": {"$eq": 2}, "d": {"$gt": 1}, "$and": [{"e": 3}], "$or": [{"f": 1}],
        "g": {"$eq": 4, "$lt": 9}
    })
    .unwrap();
    assert_eq!(
        m.equality_fields(),
        vec![
            ("a".to_string(), bson!(1)),
            ("b.c".to_string(), bson!(2)),
            ("e".to_string(), bson!(3)),
            ("g".to_string(), bson!(4)),
        ]
    );
    assert!(Matcher::parse_doc(&doc! {}).unwrap().is_empty());
    assert!(Matcher::parse_doc(&doc! {"$comment": "x"})
        .unwrap()
        .is_empty());
    assert!(!Matcher::parse_doc(&doc! {"a": 1}).unwrap().is_empty());
}

#[test]
fn matcher_is_send_sync_clone() {
    fn assert_traits<T: Send + Sync + Clone>() {}
    assert_traits::<Matcher>();
}

#[test]
fn elem_match_key_table() {
    let cases: Vec<(Document, Document, Option<usize>)> = vec![
        (doc! {"a.b": 2}, doc! {"a": [{"b": 1}, {"b": 2}]}, Some(1)),
        (doc! {"a": {"$gt": 4}}, doc! {"a": [1, 5, 6]}, Some(1)),
        (
            doc! {"a": {"$elemMatch": {"b": 1}}},
            doc! {"a": [{"b": 0}, {"b": 1}]},
            Some(1),
        ),
        (
            doc! {"x": 1, "a": 6},
            doc! {"x": 1, "a": [1, 5, 6]},
            Some(2),
        ),
        (doc! {"x": 1}, doc! {"x": 1}, None),
        (doc! {"a": 9}, doc! {"a": [1]}, None),
    ];
    for (filter, d, want) in cases {
        let m = Matcher::parse_doc(&filter).unwrap();
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        assert_eq!(m.elem_match_key(&raw), want, "{filter} on {d}");
    }
}

mod props {
    use super::*;
    use proptest::prelude::*;

    fn arb_scalar() -> impl Strategy<Value = Bson> {
        prop_oneof![
            Just(Bson::Null),
            Just(Bson::MinKey),
            Just(Bson::MaxKey),
            (-3i32..3).prop_map(Bson::Int32),
            (-3i64..3).prop_map(Bson::Int64),
            (-6i32..6).prop_map(|i| Bson::Double(f64::from(i) / 2.0)),
            Just(Bson::Double(f64::NAN)),
            "[ab]{0,2}".prop_map(Bson::String),
            any::<bool>().prop_map(Bson::Boolean),
        ]
    }

    fn arb_value() -> impl Strategy<Value = Bson> {
        arb_scalar().prop_recursive(2, 6, 3, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..3).prop_map(Bson::Array),
                prop::collection::vec(("[bc]", inner), 0..2).prop_map(|kv| {
                    let mut d = Document::new();
                    for (k, v) in kv {
                        d.insert(k, v);
                    }
                    Bson::Document(d)
                }),
            ]
        })
    }

    fn arb_doc() -> impl Strategy<Value = Document> {
        prop::option::of(arb_value()).prop_map(|v| match v {
            Some(v) => doc! {"a": v},
            None => doc! {"z": 1},
        })
    }

    fn m(f: Document) -> Matcher {
        Matcher::parse_doc(&f).unwrap()
    }

    const OPS: &[&str] = &[
        "$eq",
        "$ne",
        "$gt",
        "$gte",
        "$lt",
        "$lte",
        "$in",
        "$nin",
        "$all",
        "$exists",
        "$type",
        "$size",
        "$mod",
        "$elemMatch",
        "$not",
        "$regex",
        "$options",
        "$and",
        "$or",
        "$nor",
        "$foo",
        "$expr",
        "$comment",
    ];

    proptest! {
        #[test]
        fn negations_are_complements(d in arb_doc(), x in arb_value()) {
            prop_assume!(!matches!(&x, Bson::Document(inner) if inner.keys().next().is_some_and(|k| k.starts_with('$'))));
            let eq = m(doc! {"a": {"$eq": x.clone()}}).matches_doc(&d);
            let ne = m(doc! {"a": {"$ne": x.clone()}}).matches_doc(&d);
            prop_assert_eq!(eq, !ne);
            let list = Bson::Array(vec![x.clone(), Bson::Int32(7)]);
            let inn = m(doc! {"a": {"$in": list.clone()}}).matches_doc(&d);
            let nin = m(doc! {"a": {"$nin": list}}).matches_doc(&d);
            prop_assert_eq!(inn, !nin);
            let gt = m(doc! {"a": {"$gt": x.clone()}}).matches_doc(&d);
            let not_gt = m(doc! {"a": {"$not": {"$gt": x.clone()}}}).matches_doc(&d);
            prop_assert_eq!(gt, !not_gt);
        }

        #[test]
        fn gte_is_gt_or_eq_on_scalars(v in arb_scalar(), x in arb_scalar()) {
            prop_assume!(!matches!(x, Bson::Null | Bson::MinKey | Bson::MaxKey));
            let d = doc! {"a": v};
            let gte = m(doc! {"a": {"$gte": x.clone()}}).matches_doc(&d);
            let gt = m(doc! {"a": {"$gt": x.clone()}}).matches_doc(&d);
            let eq = m(doc! {"a": x.clone()}).matches_doc(&d);
            prop_assert_eq!(gte, gt || eq);
        }

        #[test]
        fn random_filters_never_panic(
            op in prop::sample::select(OPS),
            arg in arb_value(),
            d in arb_doc(),
            top in any::<bool>(),
        ) {
            let f = if top { doc! {op: arg} } else { doc! {"a": {op: arg}} };
            if let Ok(matcher) = Matcher::parse_doc(&f) {
                let raw = RawDocumentBuf::try_from(&d).unwrap();
                let r = matcher.matches(&raw);
                prop_assert_eq!(r, matcher.matches_doc(&d));
                let _ = matcher.elem_match_key(&raw);
            }
        }
    }
}

#[test]
fn expr_filters() {
    check(&[
        (
            doc! {"$expr": {"$gt": ["$a", "$b"]}},
            doc! {"a": 3, "b": 2},
            true,
        ),
        (
            doc! {"$expr": {"$gt": ["$a", "$b"]}},
            doc! {"a": 1, "b": 2},
            false,
        ),
        (doc! {"$expr": "$flag"}, doc! {"flag": 0}, false),
        (doc! {"$expr": "$flag"}, doc! {"flag": "x"}, true),
        (doc! {"$expr": "$flag"}, doc! {}, false),
        (
            doc! {"$or": [{"a": 5}, {"$expr": {"$eq": ["$a", "$b"]}}]},
            doc! {"a": 2, "b": 2},
            true,
        ),
        (doc! {"x": 1, "$expr": true}, doc! {"x": 2}, false),
    ]);
    // Evaluation errors surface through try_matches and count as no match.
    let m = Matcher::parse_doc(&doc! {"$expr": {"$divide": [1, "$z"]}}).unwrap();
    let raw = RawDocumentBuf::try_from(&doc! {"z": 0}).unwrap();
    assert!(m.try_matches(&raw).is_err());
    assert!(!m.matches(&raw));
    let ok = RawDocumentBuf::try_from(&doc! {"z": 2}).unwrap();
    assert_eq!(m.try_matches(&ok), Ok(true));
}

#[test]
fn bit_operators() {
    let bin = |b: &[u8]| {
        Bson::Binary(bson::Binary {
            subtype: bson::spec::BinarySubtype::Generic,
            bytes: b.to_vec(),
        })
    };
    check(&[
        (doc! {"a": {"$bitsAllSet": [1, 5]}}, doc! {"a": 54}, true),
        (doc! {"a": {"$bitsAllSet": [1, 5]}}, doc! {"a": 20}, false),
        (doc! {"a": {"$bitsAllSet": 50}}, doc! {"a": 54}, true),
        (doc! {"a": {"$bitsAllSet": 50}}, doc! {"a": 54.0}, true),
        (doc! {"a": {"$bitsAllSet": 50}}, doc! {"a": 54.5}, false),
        (doc! {"a": {"$bitsAnySet": [1, 5]}}, doc! {"a": 20}, false),
        (doc! {"a": {"$bitsAnySet": [2]}}, doc! {"a": 20i64}, true),
        (doc! {"a": {"$bitsAllClear": [1, 5]}}, doc! {"a": 20}, true),
        (doc! {"a": {"$bitsAllClear": [1, 5]}}, doc! {"a": 54}, false),
        (doc! {"a": {"$bitsAnyClear": [1, 5]}}, doc! {"a": 54}, false),
        (doc! {"a": {"$bitsAnyClear": [0, 1]}}, doc! {"a": 54}, true),
        (doc! {"a": {"$bitsAllSet": [200]}}, doc! {"a": -1}, true),
        (doc! {"a": {"$bitsAllSet": [200]}}, doc! {"a": 1}, false),
        (
            doc! {"a": {"$bitsAllSet": [1, 2]}},
            doc! {"a": bin(&[0x66])},
            true,
        ),
        (
            doc! {"a": {"$bitsAllSet": [0]}},
            doc! {"a": bin(&[0x66])},
            false,
        ),
        (
            doc! {"a": {"$bitsAllClear": [100]}},
            doc! {"a": bin(&[0xff])},
            true,
        ),
        (
            doc! {"a": {"$bitsAllSet": bin(&[0x02])}},
            doc! {"a": 54},
            true,
        ),
        (
            doc! {"a": {"$bitsAllSet": bin(&[0x00, 0x01])}},
            doc! {"a": 256},
            true,
        ),
        (doc! {"a": {"$bitsAllClear": [0]}}, doc! {"a": "x"}, false),
        (doc! {"a": {"$bitsAnySet": [0]}}, doc! {"a": [2, 3]}, true),
        (doc! {"a": {"$bitsAllSet": []}}, doc! {"a": 0}, true),
        (doc! {"a": {"$bitsAnySet": []}}, doc! {"a": 7}, false),
    ]);
}

#[test]
fn repeated_top_level_fields_are_anded() {
    // An owned Document cannot hold a key twice, so build the raw bytes directly.
    let mut raw = RawDocumentBuf::new();
    raw.append(
        <&bson::raw::CStr>::try_from("a").unwrap(),
        RawDocumentBuf::try_from(&doc! {"$gt": 1}).unwrap(),
    );
    raw.append(
        <&bson::raw::CStr>::try_from("a").unwrap(),
        RawDocumentBuf::try_from(&doc! {"$lt": 5}).unwrap(),
    );
    let m = Matcher::parse(&raw).unwrap();
    assert!(m.matches_doc(&doc! {"a": 3}));
    assert!(!m.matches_doc(&doc! {"a": 7}));
    assert!(!m.matches_doc(&doc! {"a": 0}));
}

#[test]
fn pcre_escapes_are_translated() {
    check(&[
        (
            doc! {"a": {"$regex": r"^\Qa.b\E$"}},
            doc! {"a": "a.b"},
            true,
        ),
        (
            doc! {"a": {"$regex": r"^\Qa.b\E$"}},
            doc! {"a": "acb"},
            false,
        ),
        (doc! {"a": {"$regex": r"\Q(x"}}, doc! {"a": "1(x"}, true),
        (doc! {"a": {"$regex": r"b\Z"}}, doc! {"a": "ab\n"}, true),
        (doc! {"a": {"$regex": r"b\Z"}}, doc! {"a": "ab"}, true),
        (doc! {"a": {"$regex": r"b\Z"}}, doc! {"a": "abc"}, false),
        (doc! {"a": {"$regex": r"a\\Q"}}, doc! {"a": r"a\Q"}, true),
    ]);
}

#[test]
fn regex_lookaround_and_backreferences() {
    check(&[
        (
            doc! {"n": {"$regex": "^(?!system\\.)"}},
            doc! {"n": "users"},
            true,
        ),
        (
            doc! {"n": {"$regex": "^(?!system\\.)"}},
            doc! {"n": "system.views"},
            false,
        ),
        (
            doc! {"n": {"$regex": "foo(?=bar)"}},
            doc! {"n": "foobar"},
            true,
        ),
        (
            doc! {"n": {"$regex": "foo(?=bar)"}},
            doc! {"n": "foobaz"},
            false,
        ),
        (doc! {"n": {"$regex": "(?<!x)y"}}, doc! {"n": "xy"}, false),
        (doc! {"n": {"$regex": "(a)\\1"}}, doc! {"n": "caab"}, true),
        (doc! {"n": {"$regex": "(a)\\1"}}, doc! {"n": "ab"}, false),
        // Options still apply on the backtracking engine.
        (
            doc! {"n": {"$regex": "^(?!SYSTEM)", "$options": "i"}},
            doc! {"n": "system.x"},
            false,
        ),
        (
            doc! {"n": {"$in": [bson::Regex { pattern: bson::raw::CString::try_from("^(?!a)").unwrap(), options: bson::raw::CString::try_from("").unwrap() }]}},
            doc! {"n": "b"},
            true,
        ),
    ]);
}
