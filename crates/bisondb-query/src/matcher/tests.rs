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
        // NaN sorts below numbers, but range operators never match it; it
        // only equals NaN (mongod's ComparisonMatchExpression).
        (doc! {"a": {"$lt": 1}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$gt": -1}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$lte": f64::NAN}}, doc! {"a": f64::NAN}, true),
        (doc! {"a": {"$gte": f64::NAN}}, doc! {"a": f64::NAN}, true),
        (doc! {"a": {"$lt": f64::NAN}}, doc! {"a": f64::NAN}, false),
        (doc! {"a": {"$gt": f64::NAN}}, doc! {"a": 5}, false),
        (
            doc! {"a": {"$lte": f64::NAN}},
            doc! {"a": f64::NEG_INFINITY},
            false,
        ),
        (doc! {"a": f64::NAN}, doc! {"a": f64::NAN}, true),
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
            doc! {"a": {"$elemMatch": {"$expr": {"$eq": ["$b", 1]}}}},
            2,
            "$expr can only be applied to the top-level document",
        ),
        (doc! {"$expr": {"$noSuchOp": 1}}, 168, ""),
        (doc! {"$where": 5}, 2, "$where got bad type"),
        (doc! {"$where": ""}, 2, "code for $where cannot be empty"),
        (
            doc! {"$where": bson::JavaScriptCodeWithScope { code: "true".into(), scope: doc! {} }},
            4649201,
            "$where no longer supports deprecated BSON type CodeWScope",
        ),
        (
            doc! {"a": {"$elemMatch": {"$where": "true"}}},
            2,
            "$where can only be applied to the top-level document",
        ),
        (doc! {"$where": "this.x <"}, 139, "SyntaxError"),
        (
            doc! {"$text": {"$search": "x"}, "$and": [{"$text": {"$search": "y"}}]},
            2,
            "Too many text expressions",
        ),
        (
            doc! {"$nor": [{"$text": {"$search": "x"}}]},
            2,
            "text expression not allowed in nor",
        ),
        (
            doc! {"a": {"$elemMatch": {"$text": {"$search": "x"}}}},
            2,
            "$text can only be applied to the top-level document",
        ),
        (
            doc! {"$text": {"$search": "x", "$foo": 1}},
            2,
            "extra fields in $text",
        ),
        (
            doc! {"a": {"$geoWithin": {}}},
            2,
            "$geoWithin must have exactly one shape",
        ),
        (
            doc! {"$or": [{"a": {"$near": [0, 0]}}, {"b": 1}]},
            2,
            "geoNear must be top-level expr",
        ),
        (
            doc! {"a": {"$near": [0, 0]}, "b": {"$nearSphere": [0, 0]}},
            2,
            "Too many geoNear expressions",
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
        (
            doc! {"a": {"$near": "x"}},
            2,
            "invalid argument in geo near query",
        ),
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

    const SCHEMA_KEYWORDS: &[&str] = &[
        "bsonType",
        "type",
        "enum",
        "required",
        "properties",
        "patternProperties",
        "additionalProperties",
        "minProperties",
        "maxProperties",
        "minimum",
        "maximum",
        "exclusiveMinimum",
        "exclusiveMaximum",
        "multipleOf",
        "minLength",
        "maxLength",
        "pattern",
        "items",
        "additionalItems",
        "minItems",
        "maxItems",
        "uniqueItems",
        "dependencies",
        "allOf",
        "anyOf",
        "oneOf",
        "not",
        "title",
        "foo",
    ];

    /// Keyword arguments: random values plus ones that parse for common keywords.
    fn arb_schema_arg() -> impl Strategy<Value = Bson> {
        prop_oneof![
            arb_value(),
            Just(bson!("number")),
            Just(bson!("object")),
            Just(bson!(["int", "string", "array"])),
            Just(bson!(["a", "b"])),
            Just(bson!(true)),
            Just(bson!(false)),
            Just(bson!(2)),
            Just(bson!(0.5)),
            Just(bson!("^a(")),
        ]
    }

    fn arb_schema() -> impl Strategy<Value = Document> {
        fn to_doc(kv: Vec<(&'static str, Bson)>) -> Document {
            let mut d = Document::new();
            for (k, v) in kv {
                d.insert(k, v);
            }
            d
        }
        let kw = || prop::sample::select(SCHEMA_KEYWORDS);
        prop::collection::vec((kw(), arb_schema_arg()), 0..3)
            .prop_map(to_doc)
            .prop_recursive(3, 16, 3, move |inner| {
                let arg = prop_oneof![
                    arb_schema_arg(),
                    inner.clone().prop_map(Bson::Document),
                    inner
                        .clone()
                        .prop_map(|s| Bson::Array(vec![Bson::Document(s)])),
                    inner.prop_map(|s| bson!({"a": s, "^b": {}})),
                ];
                prop::collection::vec((prop::sample::select(SCHEMA_KEYWORDS), arg), 0..3)
                    .prop_map(to_doc)
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
        fn random_json_schemas_never_panic(
            schema in arb_schema(),
            d in arb_doc(),
            nested in any::<bool>(),
        ) {
            let schema = if nested {
                doc! {"properties": {"a": schema}}
            } else {
                schema
            };
            if let Ok(matcher) = Matcher::parse_doc(&doc! {"$jsonSchema": schema}) {
                let raw = RawDocumentBuf::try_from(&d).unwrap();
                prop_assert_eq!(matcher.matches(&raw), matcher.matches_doc(&d));
            }
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

// ---------------------------------------------------------------------------
// $jsonSchema
// ---------------------------------------------------------------------------

/// (schema, document, expected match), with the schema as the whole filter.
fn check_schema(cases: &[(Document, Document, bool)]) {
    let wrapped: Vec<(Document, Document, bool)> = cases
        .iter()
        .map(|(s, d, want)| (doc! {"$jsonSchema": s.clone()}, d.clone(), *want))
        .collect();
    check(&wrapped);
}

/// (schema for property `a`, value of `a`, expected match).
fn check_property(cases: &[(Document, Bson, bool)]) {
    let wrapped: Vec<(Document, Document, bool)> = cases
        .iter()
        .map(|(s, v, want)| {
            (
                doc! {"$jsonSchema": {"properties": {"a": s.clone()}}},
                doc! {"a": v.clone()},
                *want,
            )
        })
        .collect();
    check(&wrapped);
}

fn regex(p: &str) -> Bson {
    Bson::RegularExpression(bson::Regex {
        pattern: bson::raw::CString::try_from(p).unwrap(),
        options: bson::raw::CString::try_from("").unwrap(),
    })
}

#[test]
fn json_schema_bson_type() {
    use bson::{oid::ObjectId, Binary, DateTime, Timestamp};
    let bin = Bson::Binary(Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![1],
    });
    let ts = Bson::Timestamp(Timestamp {
        time: 1,
        increment: 1,
    });
    let values: Vec<(&str, Bson)> = vec![
        ("double", Bson::Double(1.5)),
        ("string", bson!("s")),
        ("object", bson!({"x": 1})),
        ("array", bson!([1])),
        ("binData", bin),
        ("objectId", Bson::ObjectId(ObjectId::new())),
        ("bool", Bson::Boolean(true)),
        ("date", Bson::DateTime(DateTime::from_millis(0))),
        ("null", Bson::Null),
        ("regex", regex("^x")),
        ("javascript", Bson::JavaScriptCode("f()".to_string())),
        ("int", Bson::Int32(1)),
        ("timestamp", ts),
        ("long", Bson::Int64(1)),
        ("decimal", dec("1.5")),
        ("minKey", Bson::MinKey),
        ("maxKey", Bson::MaxKey),
    ];
    let mut cases = Vec::new();
    for (alias, _) in &values {
        for (other, v) in &values {
            cases.push((doc! {"bsonType": *alias}, v.clone(), alias == other));
        }
    }
    check_property(&cases);
    check_property(&[
        (doc! {"bsonType": "number"}, bson!(1), true),
        (doc! {"bsonType": "number"}, bson!(1i64), true),
        (doc! {"bsonType": "number"}, bson!(1.5), true),
        (doc! {"bsonType": "number"}, dec("2"), true),
        (doc! {"bsonType": "number"}, bson!("1"), false),
        (doc! {"bsonType": ["string", "null"]}, bson!("x"), true),
        (doc! {"bsonType": ["string", "null"]}, Bson::Null, true),
        (doc! {"bsonType": ["string", "null"]}, bson!(1), false),
        // The value itself is typed: arrays are not looked into.
        (doc! {"bsonType": "int"}, bson!([1, 2]), false),
        (doc! {"bsonType": "array"}, bson!([1, 2]), true),
    ]);
    check_schema(&[
        // A missing property satisfies its schema.
        (
            doc! {"properties": {"a": {"bsonType": "int"}}},
            doc! {},
            true,
        ),
        // The top-level schema describes the document.
        (doc! {"bsonType": "object"}, doc! {"a": 1}, true),
        (doc! {"bsonType": ["array", "object"]}, doc! {"a": 1}, true),
        (doc! {"bsonType": "array"}, doc! {"a": 1}, false),
        (doc! {"type": "string"}, doc! {}, false),
    ]);
}

#[test]
fn json_schema_type() {
    check_property(&[
        (doc! {"type": "number"}, bson!(1), true),
        (doc! {"type": "number"}, dec("1.5"), true),
        (doc! {"type": "number"}, bson!("1"), false),
        (doc! {"type": "boolean"}, bson!(false), true),
        (doc! {"type": "boolean"}, bson!(0), false),
        (doc! {"type": "string"}, bson!("x"), true),
        (doc! {"type": "null"}, Bson::Null, true),
        (doc! {"type": "null"}, bson!("null"), false),
        (doc! {"type": "object"}, bson!({}), true),
        (doc! {"type": "object"}, bson!([]), false),
        (doc! {"type": "array"}, bson!([]), true),
        (doc! {"type": ["string", "number"]}, bson!(3), true),
        (doc! {"type": ["string", "number"]}, bson!(true), false),
    ]);
    check_schema(&[
        (doc! {"type": "object"}, doc! {"a": 1}, true),
        (doc! {"type": ["null", "object"]}, doc! {}, true),
    ]);
}

#[test]
fn json_schema_enum() {
    let e = doc! {"enum": [1, "x", {"b": 1, "c": 2}, [1, 2], Bson::Null]};
    check_property(&[
        (e.clone(), bson!(1), true),
        (e.clone(), bson!(1.0), true),
        (e.clone(), bson!(1i64), true),
        (e.clone(), dec("1.00"), true),
        (e.clone(), bson!("x"), true),
        (e.clone(), bson!("y"), false),
        // Objects compare without regard to field order.
        (e.clone(), bson!({"c": 2, "b": 1}), true),
        (e.clone(), bson!({"b": 1}), false),
        (e.clone(), bson!([1, 2]), true),
        (e.clone(), bson!([2, 1]), false),
        // No array traversal: [1] is not 1.
        (e.clone(), bson!([1]), false),
        (e.clone(), Bson::Null, true),
    ]);
    check_schema(&[
        (doc! {"properties": {"a": e.clone()}}, doc! {}, true),
        // At the top level enum compares the whole document.
        (
            doc! {"enum": [{"a": 1, "b": 2}]},
            doc! {"b": 2, "a": 1},
            true,
        ),
        (doc! {"enum": [{"a": 1}]}, doc! {"a": 1, "b": 2}, false),
        (doc! {"enum": [1, "a"]}, doc! {"a": 1}, false),
    ]);
}

#[test]
fn json_schema_required_and_properties() {
    check_schema(&[
        (
            doc! {"required": ["a", "b"]},
            doc! {"a": 1, "b": Bson::Null},
            true,
        ),
        (doc! {"required": ["a", "b"]}, doc! {"a": 1}, false),
        (
            doc! {"required": ["a"], "properties": {"a": {"bsonType": "string"}}},
            doc! {"a": "x"},
            true,
        ),
        (
            doc! {"required": ["a"], "properties": {"a": {"bsonType": "string"}}},
            doc! {"a": 1},
            false,
        ),
        (
            doc! {"required": ["a"], "properties": {"a": {"bsonType": "string"}}},
            doc! {"b": "x"},
            false,
        ),
        // Nested objects: required applies to objects only.
        (
            doc! {"properties": {"o": {"required": ["x"]}}},
            doc! {"o": {"x": 1}},
            true,
        ),
        (
            doc! {"properties": {"o": {"required": ["x"]}}},
            doc! {"o": {"y": 1}},
            false,
        ),
        (
            doc! {"properties": {"o": {"required": ["x"]}}},
            doc! {"o": 5},
            true,
        ),
        (
            doc! {"properties": {"o": {"required": ["x"]}}},
            doc! {},
            true,
        ),
        (
            doc! {"properties": {"o": {"required": ["x"]}}},
            doc! {"o": [{"y": 1}]},
            true,
        ),
        // Three levels deep.
        (
            doc! {"properties": {"a": {
                "bsonType": "object", "required": ["b"],
                "properties": {"b": {"bsonType": "object", "properties": {"c": {"enum": [1]}}}}
            }}},
            doc! {"a": {"b": {"c": 1}}},
            true,
        ),
        (
            doc! {"properties": {"a": {
                "bsonType": "object", "required": ["b"],
                "properties": {"b": {"bsonType": "object", "properties": {"c": {"enum": [1]}}}}
            }}},
            doc! {"a": {"b": {"c": 2}}},
            false,
        ),
        (
            doc! {"properties": {"a": {
                "bsonType": "object", "required": ["b"],
                "properties": {"b": {"bsonType": "object", "properties": {"c": {"enum": [1]}}}}
            }}},
            doc! {"a": {"c": 1}},
            false,
        ),
        (
            doc! {"properties": {"a": {
                "bsonType": "object", "required": ["b"],
                "properties": {"b": {"bsonType": "object", "properties": {"c": {"enum": [1]}}}}
            }}},
            doc! {"a": "str"},
            false,
        ),
        // Annotations are accepted and ignored.
        (
            doc! {"title": "t", "description": "d",
            "properties": {"a": {"description": "an int", "bsonType": "int"}}},
            doc! {"a": 1},
            true,
        ),
        (doc! {}, doc! {"anything": 1}, true),
    ]);
}

#[test]
fn json_schema_allowed_properties() {
    let s = doc! {
        "properties": {"_id": {}, "a": {}},
        "patternProperties": {"^x": {"bsonType": "int"}},
        "additionalProperties": false,
    };
    check_schema(&[
        (s.clone(), doc! {"a": 1}, true),
        (s.clone(), doc! {"a": 1, "x1": 2}, true),
        (s.clone(), doc! {"x1": "s"}, false),
        (s.clone(), doc! {"b": 1}, false),
        (s.clone(), doc! {}, true),
        (
            doc! {"additionalProperties": {"bsonType": "string"}},
            doc! {"a": "x", "b": "y"},
            true,
        ),
        (
            doc! {"additionalProperties": {"bsonType": "string"}},
            doc! {"a": "x", "b": 1},
            false,
        ),
        (doc! {"additionalProperties": true}, doc! {"q": 1}, true),
        // A field named in properties that also matches a pattern must satisfy both.
        (
            doc! {"properties": {"xa": {"bsonType": "int"}},
            "patternProperties": {"^x": {"minimum": 5}}},
            doc! {"xa": 3},
            false,
        ),
        (
            doc! {"properties": {"xa": {"bsonType": "int"}},
            "patternProperties": {"^x": {"minimum": 5}}},
            doc! {"xa": 7},
            true,
        ),
        // Patterns are searched for, not anchored.
        (
            doc! {"patternProperties": {"b": {"bsonType": "string"}}},
            doc! {"abc": 1},
            false,
        ),
        // A pattern that does not compile matches no field name.
        (
            doc! {"patternProperties": {"(": {}}, "additionalProperties": false},
            doc! {"a": 1},
            false,
        ),
        (
            doc! {"patternProperties": {"(": {}}, "additionalProperties": false},
            doc! {},
            true,
        ),
        // Nested: only objects are constrained.
        (
            doc! {"properties": {"o": {"additionalProperties": false}}},
            doc! {"o": {"k": 1}},
            false,
        ),
        (
            doc! {"properties": {"o": {"additionalProperties": false}}},
            doc! {"o": {}},
            true,
        ),
        (
            doc! {"properties": {"o": {"additionalProperties": false}}},
            doc! {"o": 3},
            true,
        ),
    ]);
}

#[test]
fn json_schema_property_counts() {
    check_schema(&[
        (doc! {"minProperties": 2}, doc! {"a": 1}, false),
        (doc! {"minProperties": 2}, doc! {"a": 1, "b": 2}, true),
        (doc! {"maxProperties": 1}, doc! {"a": 1, "b": 2}, false),
        (doc! {"maxProperties": 1}, doc! {"a": 1}, true),
        (doc! {"maxProperties": 0}, doc! {}, true),
    ]);
    check_property(&[
        (doc! {"maxProperties": 1}, bson!({"x": 1, "y": 2}), false),
        (doc! {"maxProperties": 1}, bson!({"x": 1}), true),
        (doc! {"minProperties": 1}, bson!({}), false),
        (doc! {"minProperties": 1}, bson!(5), true),
        (doc! {"minProperties": 1}, bson!([1]), true),
    ]);
}

#[test]
fn json_schema_numeric_keywords() {
    check_property(&[
        (doc! {"minimum": 5}, bson!(5), true),
        (doc! {"minimum": 5}, bson!(4), false),
        (doc! {"minimum": 5}, bson!(4.9), false),
        (doc! {"minimum": 5}, dec("5.0"), true),
        (doc! {"minimum": 5}, bson!(5i64), true),
        // Other types are not constrained.
        (doc! {"minimum": 5}, bson!("a"), true),
        (doc! {"minimum": 5}, bson!([1]), true),
        (doc! {"minimum": 5}, Bson::Null, true),
        (
            doc! {"minimum": 5, "exclusiveMinimum": true},
            bson!(5),
            false,
        ),
        (
            doc! {"minimum": 5, "exclusiveMinimum": true},
            bson!(5.5),
            true,
        ),
        (
            doc! {"minimum": 5, "exclusiveMinimum": false},
            bson!(5),
            true,
        ),
        (doc! {"maximum": 10}, bson!(10), true),
        (doc! {"maximum": 10}, bson!(10.5), false),
        (
            doc! {"maximum": 10, "exclusiveMaximum": true},
            bson!(10),
            false,
        ),
        (
            doc! {"maximum": 10, "exclusiveMaximum": true},
            bson!(9.99),
            true,
        ),
        (doc! {"maximum": 1.5, "minimum": dec("0.5")}, bson!(1), true),
        (
            doc! {"maximum": 1.5, "minimum": dec("0.5")},
            bson!(0),
            false,
        ),
        (doc! {"bsonType": "string", "minimum": 5}, bson!("a"), true),
        (doc! {"bsonType": "int", "minimum": 5}, bson!(7), true),
        (doc! {"bsonType": "int", "minimum": 5}, bson!(7.0), false),
        (doc! {"multipleOf": 3}, bson!(9), true),
        (doc! {"multipleOf": 3}, bson!(10), false),
        (doc! {"multipleOf": 3}, bson!(9.0), true),
        (doc! {"multipleOf": 3}, bson!(-9), true),
        (doc! {"multipleOf": 3}, bson!(0), true),
        (doc! {"multipleOf": 3}, dec("9.00"), true),
        (doc! {"multipleOf": 3}, dec("9.01"), false),
        (doc! {"multipleOf": 3}, bson!("x"), true),
        (doc! {"multipleOf": 3}, Bson::Double(f64::NAN), false),
        (doc! {"multipleOf": 3}, Bson::Double(f64::INFINITY), false),
        // Doubles are rounded to 15 significant digits, as mongod's decimal conversion does.
        (doc! {"multipleOf": 0.1}, bson!(0.3), true),
        (doc! {"multipleOf": 0.1}, bson!(0.35), false),
        (doc! {"multipleOf": 0.1}, bson!(1e20), true),
        (doc! {"multipleOf": dec("0.01")}, dec("1.23"), true),
        (doc! {"multipleOf": dec("0.01")}, dec("1.234"), false),
        (doc! {"multipleOf": 7}, bson!(i64::MAX), true),
        (doc! {"multipleOf": 7}, bson!(i64::MIN), false),
        (doc! {"multipleOf": 2.5}, bson!(10), true),
        (doc! {"multipleOf": 2.5}, bson!(11), false),
        // Extreme exponents: no overflow, no long loops.
        (
            doc! {"multipleOf": dec("3E-6176")},
            dec("9999999999999999999999999999999999E+6111"),
            true,
        ),
        (
            doc! {"multipleOf": dec("7E-6176")},
            dec("9999999999999999999999999999999999E+6111"),
            false,
        ),
        (
            doc! {"multipleOf": dec("9999999999999999999999999999999999E+6111")},
            dec("1E-6176"),
            false,
        ),
        (
            doc! {"multipleOf": Bson::Double(f64::INFINITY)},
            bson!(0),
            true,
        ),
        (
            doc! {"multipleOf": Bson::Double(f64::INFINITY)},
            bson!(4),
            false,
        ),
    ]);
    // Top-level numeric keywords have no effect: the document is an object.
    check_schema(&[
        (doc! {"minimum": 5}, doc! {"a": 1}, true),
        (doc! {"multipleOf": 5}, doc! {"a": 1}, true),
    ]);
}

#[test]
fn json_schema_string_keywords() {
    check_property(&[
        // Lengths count code points, not bytes.
        (doc! {"maxLength": 5}, bson!("héllo"), true),
        (doc! {"maxLength": 4}, bson!("héllo"), false),
        (doc! {"minLength": 2}, bson!("日本"), true),
        (doc! {"minLength": 3}, bson!("日本"), false),
        (doc! {"minLength": 1}, bson!(""), false),
        (doc! {"maxLength": 2}, bson!(12345), true),
        (doc! {"minLength": 2.0}, bson!("ab"), true),
        (doc! {"minLength": dec("2")}, bson!("a"), false),
        (doc! {"pattern": "^a.c$"}, bson!("abc"), true),
        (doc! {"pattern": "^a.c$"}, bson!("abd"), false),
        (doc! {"pattern": "b"}, bson!("abc"), true),
        (doc! {"pattern": "^a"}, bson!(5), true),
        (doc! {"pattern": "^(?!x)"}, bson!("xy"), false),
        (
            doc! {"bsonType": "string", "pattern": "^a"},
            bson!("ab"),
            true,
        ),
    ]);
    // mongod does not compile a top-level pattern: it cannot apply to a document.
    check_schema(&[(doc! {"pattern": "("}, doc! {"a": "x"}, true)]);
}

#[test]
fn json_schema_array_keywords() {
    check_property(&[
        (doc! {"items": {"bsonType": "int"}}, bson!([1, 2]), true),
        (doc! {"items": {"bsonType": "int"}}, bson!([1, "x"]), false),
        (doc! {"items": {"bsonType": "int"}}, bson!([]), true),
        (doc! {"items": {"bsonType": "int"}}, bson!("notarray"), true),
        (
            doc! {"items": {"bsonType": "object", "required": ["k"]}},
            bson!([{"k": 1}, {"k": 2}]),
            true,
        ),
        (
            doc! {"items": {"bsonType": "object", "required": ["k"]}},
            bson!([{"k": 1}, {"j": 2}]),
            false,
        ),
        (
            doc! {"items": {"items": {"bsonType": "int"}}},
            bson!([[1], [2, 3]]),
            true,
        ),
        (
            doc! {"items": {"items": {"bsonType": "int"}}},
            bson!([[1], [2, "3"]]),
            false,
        ),
        (
            doc! {"items": [{"bsonType": "int"}, {"bsonType": "string"}]},
            bson!([1, "a"]),
            true,
        ),
        // Shorter arrays are fine; extra elements are unconstrained by default.
        (
            doc! {"items": [{"bsonType": "int"}, {"bsonType": "string"}]},
            bson!([1]),
            true,
        ),
        (
            doc! {"items": [{"bsonType": "int"}, {"bsonType": "string"}]},
            bson!(["a"]),
            false,
        ),
        (
            doc! {"items": [{"bsonType": "int"}, {"bsonType": "string"}]},
            bson!([1, "a", 3]),
            true,
        ),
        (
            doc! {"items": [{"bsonType": "int"}], "additionalItems": false},
            bson!([1, 2]),
            false,
        ),
        (
            doc! {"items": [{"bsonType": "int"}], "additionalItems": false},
            bson!([1]),
            true,
        ),
        (
            doc! {"items": [{"bsonType": "int"}], "additionalItems": {"bsonType": "bool"}},
            bson!([1, true, false]),
            true,
        ),
        (
            doc! {"items": [{"bsonType": "int"}], "additionalItems": {"bsonType": "bool"}},
            bson!([1, true, 3]),
            false,
        ),
        // additionalItems only follows an items tuple.
        (
            doc! {"items": {}, "additionalItems": false},
            bson!([1, 2]),
            true,
        ),
        (doc! {"additionalItems": false}, bson!([1, 2]), true),
        (doc! {"minItems": 2}, bson!([1]), false),
        (doc! {"minItems": 2}, bson!([1, 2]), true),
        (doc! {"minItems": 2}, bson!("xy"), true),
        (doc! {"maxItems": 1}, bson!([1, 2]), false),
        (doc! {"maxItems": 1}, bson!([[1, 2]]), true),
        (doc! {"minItems": i64::MAX}, bson!([1]), false),
        (doc! {"minItems": i64::MAX}, bson!(1), true),
        (doc! {"maxItems": i64::MAX}, bson!([1]), true),
        (doc! {"uniqueItems": true}, bson!([1, 2, 3]), true),
        (doc! {"uniqueItems": true}, bson!([1, 2, 1.0]), false),
        (
            doc! {"uniqueItems": true},
            bson!([{"a": 1, "b": 2}, {"b": 2, "a": 1}]),
            false,
        ),
        (doc! {"uniqueItems": true}, bson!([[1, 2], [2, 1]]), true),
        (doc! {"uniqueItems": true}, bson!(["a", "A"]), true),
        (doc! {"uniqueItems": true}, bson!([]), true),
        (doc! {"uniqueItems": true}, bson!("aa"), true),
        (doc! {"uniqueItems": false}, bson!([1, 1]), true),
    ]);
    check_schema(&[(
        doc! {"minItems": 5, "items": {"bsonType": "int"}},
        doc! {"a": 1},
        true,
    )]);
}

#[test]
fn json_schema_dependencies() {
    check_schema(&[
        (
            doc! {"dependencies": {"a": ["b", "c"]}},
            doc! {"a": 1, "b": 1, "c": 1},
            true,
        ),
        (
            doc! {"dependencies": {"a": ["b", "c"]}},
            doc! {"a": 1, "b": 1},
            false,
        ),
        (
            doc! {"dependencies": {"a": ["b", "c"]}},
            doc! {"b": 1},
            true,
        ),
        (
            doc! {"dependencies": {"a": {"required": ["z"]}}},
            doc! {"a": 1, "z": 1},
            true,
        ),
        (
            doc! {"dependencies": {"a": {"required": ["z"]}}},
            doc! {"a": 1},
            false,
        ),
        (
            doc! {"dependencies": {"a": {"required": ["z"]}}},
            doc! {"q": 1},
            true,
        ),
        (
            doc! {"dependencies": {"a": ["b"], "title": "annotations are allowed"}},
            doc! {"a": 1, "b": 1},
            true,
        ),
        (
            doc! {"properties": {"o": {"dependencies": {"a": ["b"]}}}},
            doc! {"o": {"a": 1}},
            false,
        ),
        (
            doc! {"properties": {"o": {"dependencies": {"a": ["b"]}}}},
            doc! {"o": {"a": 1, "b": 1}},
            true,
        ),
        (
            doc! {"properties": {"o": {"dependencies": {"a": ["b"]}}}},
            doc! {"o": "a"},
            true,
        ),
    ]);
}

#[test]
fn json_schema_logical_keywords() {
    check_property(&[
        (
            doc! {"anyOf": [{"bsonType": "string"}, {"minimum": 10}]},
            bson!("x"),
            true,
        ),
        (
            doc! {"anyOf": [{"bsonType": "string"}, {"minimum": 10}]},
            bson!(11),
            true,
        ),
        (
            doc! {"anyOf": [{"bsonType": "string"}, {"minimum": 10}]},
            bson!(5),
            false,
        ),
        (
            doc! {"allOf": [{"minimum": 1}, {"maximum": 3}]},
            bson!(2),
            true,
        ),
        (
            doc! {"allOf": [{"minimum": 1}, {"maximum": 3}]},
            bson!(4),
            false,
        ),
        (
            doc! {"oneOf": [{"minimum": 5}, {"maximum": 10}]},
            bson!(3),
            true,
        ),
        (
            doc! {"oneOf": [{"minimum": 5}, {"maximum": 10}]},
            bson!(7),
            false,
        ),
        (
            doc! {"oneOf": [{"minimum": 5}, {"maximum": 10}]},
            bson!(12),
            true,
        ),
        (doc! {"not": {"bsonType": "string"}}, bson!("x"), false),
        (doc! {"not": {"bsonType": "string"}}, bson!(1), true),
        (doc! {"not": {"not": {"enum": [1]}}}, bson!(1), true),
    ]);
    check_schema(&[
        (
            doc! {"properties": {"a": {"not": {"bsonType": "string"}}}},
            doc! {},
            true,
        ),
        (
            doc! {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
            doc! {"b": 1},
            true,
        ),
        (
            doc! {"anyOf": [{"required": ["a"]}, {"required": ["b"]}]},
            doc! {"c": 1},
            false,
        ),
        (doc! {"not": {"required": ["a"]}}, doc! {"a": 1}, false),
        (doc! {"not": {"required": ["a"]}}, doc! {"b": 1}, true),
        // A top-level subschema also describes the document: minimum never applies.
        (doc! {"not": {"minimum": 5}}, doc! {"a": 1}, false),
        (
            doc! {"oneOf": [{"required": ["a"]}, {"required": ["b"]}]},
            doc! {"a": 1, "b": 1},
            false,
        ),
    ]);
}

#[test]
fn json_schema_combines_with_other_predicates() {
    check(&[
        (
            doc! {"$jsonSchema": {"required": ["a"]}, "b": 2},
            doc! {"a": 1, "b": 2},
            true,
        ),
        (
            doc! {"$jsonSchema": {"required": ["a"]}, "b": 2},
            doc! {"a": 1, "b": 3},
            false,
        ),
        (
            doc! {"b": 2, "$jsonSchema": {"required": ["a"]}},
            doc! {"b": 2},
            false,
        ),
        (
            doc! {"$or": [{"$jsonSchema": {"required": ["a"]}}, {"b": 1}]},
            doc! {"b": 1},
            true,
        ),
        (
            doc! {"$or": [{"$jsonSchema": {"required": ["a"]}}, {"b": 1}]},
            doc! {"c": 1},
            false,
        ),
        (
            doc! {"$and": [{"$jsonSchema": {"required": ["a"]}}, {"$jsonSchema": {"required": ["b"]}}]},
            doc! {"a": 1, "b": 1},
            true,
        ),
        (
            doc! {"$nor": [{"$jsonSchema": {"required": ["a"]}}]},
            doc! {"a": 1},
            false,
        ),
        (
            doc! {"$nor": [{"$jsonSchema": {"required": ["a"]}}]},
            doc! {},
            true,
        ),
        // Inside an object $elemMatch the schema describes each element.
        (
            doc! {"arr": {"$elemMatch": {"$jsonSchema": {"required": ["k"]}}}},
            doc! {"arr": [{"x": 1}, {"k": 1}]},
            true,
        ),
        (
            doc! {"arr": {"$elemMatch": {"$jsonSchema": {"required": ["k"]}}}},
            doc! {"arr": [{"x": 1}]},
            false,
        ),
    ]);
}

#[test]
fn json_schema_parse_errors() {
    let cases: Vec<(Document, i32, &str)> = vec![
        (doc! {"$jsonSchema": 1}, 14, "$jsonSchema must be an object"),
        (
            doc! {"a": {"$jsonSchema": {}}},
            2,
            "unknown operator: $jsonSchema",
        ),
        (
            doc! {"a": {"$not": {"$jsonSchema": {}}}},
            2,
            "unknown operator: $jsonSchema",
        ),
        (
            doc! {"$jsonSchema": {"foo": 1}},
            9,
            "Unknown $jsonSchema keyword: foo",
        ),
        (
            doc! {"$jsonSchema": {"properties": {"a": {"minlength": 1}}}},
            9,
            "Unknown $jsonSchema keyword: minlength",
        ),
        (
            doc! {"$jsonSchema": {"items": [{"bogus": 1}]}},
            9,
            "Unknown $jsonSchema keyword: bogus",
        ),
        (
            doc! {"$jsonSchema": {"$ref": "#/definitions/x"}},
            9,
            "$jsonSchema keyword '$ref' is not currently supported",
        ),
        (
            doc! {"$jsonSchema": {"format": "email"}},
            9,
            "'format' is not currently supported",
        ),
        (
            doc! {"$jsonSchema": {"type": "integer"}},
            9,
            "type 'integer' is not currently supported",
        ),
        (
            doc! {"$jsonSchema": {"properties": {"a": {"type": ["string", "integer"]}}}},
            9,
            "type 'integer' is not currently supported",
        ),
        (
            doc! {"$jsonSchema": {"bsonType": "integer"}},
            9,
            "not currently supported",
        ),
        (
            doc! {"$jsonSchema": {"type": "double"}},
            2,
            "Unknown type name alias: double",
        ),
        (
            doc! {"$jsonSchema": {"bsonType": "boolean"}},
            2,
            "Unknown type name alias: boolean",
        ),
        (
            doc! {"$jsonSchema": {"type": 1}},
            14,
            "$jsonSchema keyword 'type' must be either a string or an array of strings",
        ),
        (
            doc! {"$jsonSchema": {"bsonType": [1]}},
            14,
            "array elements must be strings",
        ),
        (
            doc! {"$jsonSchema": {"type": ["string", "string"]}},
            9,
            "$jsonSchema keyword 'type' has duplicate value: string",
        ),
        (
            doc! {"$jsonSchema": {"type": []}},
            9,
            "must name at least one type",
        ),
        (
            doc! {"$jsonSchema": {"type": "object", "bsonType": "object"}},
            9,
            "Cannot specify both $jsonSchema keywords 'type' and 'bsonType'",
        ),
        (
            doc! {"$jsonSchema": {"required": "a"}},
            14,
            "$jsonSchema keyword 'required' must be an array",
        ),
        (
            doc! {"$jsonSchema": {"required": [1]}},
            14,
            "must be an array of strings",
        ),
        (
            doc! {"$jsonSchema": {"required": []}},
            9,
            "'required' cannot be an empty array",
        ),
        (
            doc! {"$jsonSchema": {"required": ["a", "a"]}},
            9,
            "cannot contain duplicate values",
        ),
        (
            doc! {"$jsonSchema": {"properties": 1}},
            14,
            "'properties' must be an object",
        ),
        (
            doc! {"$jsonSchema": {"properties": {"a": 1}}},
            14,
            "Nested schema for $jsonSchema property 'a' must be an object",
        ),
        (
            doc! {"$jsonSchema": {"minimum": "x"}},
            14,
            "'minimum' must be a number",
        ),
        (
            doc! {"$jsonSchema": {"maximum": true}},
            14,
            "'maximum' must be a number",
        ),
        (
            doc! {"$jsonSchema": {"exclusiveMinimum": true}},
            9,
            "'minimum' must be a present if exclusiveMinimum is present",
        ),
        (
            doc! {"$jsonSchema": {"maximum": 1, "exclusiveMaximum": 1}},
            14,
            "'exclusiveMaximum' must be a boolean",
        ),
        (
            doc! {"$jsonSchema": {"multipleOf": 0}},
            9,
            "must have a positive value",
        ),
        (
            doc! {"$jsonSchema": {"multipleOf": -1.5}},
            9,
            "must have a positive value",
        ),
        (
            doc! {"$jsonSchema": {"multipleOf": dec("-0")}},
            9,
            "must have a positive value",
        ),
        (
            doc! {"$jsonSchema": {"multipleOf": "x"}},
            14,
            "'multipleOf' must be a number",
        ),
        (
            doc! {"$jsonSchema": {"minLength": -1}},
            9,
            "Expected a non-negative number",
        ),
        (
            doc! {"$jsonSchema": {"maxLength": 1.5}},
            9,
            "Expected an integer",
        ),
        (
            doc! {"$jsonSchema": {"maxItems": "x"}},
            9,
            "Expected a number in: maxItems",
        ),
        (doc! {"$jsonSchema": {"minItems": f64::NAN}}, 9, "found NaN"),
        (
            doc! {"$jsonSchema": {"minItems": 1e19}},
            9,
            "Cannot represent as a 64-bit integer",
        ),
        (
            doc! {"$jsonSchema": {"minProperties": dec("1.5")}},
            9,
            "Cannot represent as a 64-bit integer",
        ),
        (
            doc! {"$jsonSchema": {"maxProperties": true}},
            9,
            "Expected a number",
        ),
        (
            doc! {"$jsonSchema": {"pattern": 1}},
            14,
            "'pattern' must be a string",
        ),
        (
            doc! {"$jsonSchema": {"properties": {"s": {"pattern": "("}}}},
            51091,
            "Regular expression is invalid",
        ),
        (
            doc! {"$jsonSchema": {"items": 1}},
            14,
            "'items' must be an array or an object",
        ),
        (
            doc! {"$jsonSchema": {"items": [1]}},
            14,
            "requires that each element of the array is an object",
        ),
        (
            doc! {"$jsonSchema": {"additionalItems": 1}},
            14,
            "'additionalItems' must be either an object or a boolean",
        ),
        (
            doc! {"$jsonSchema": {"uniqueItems": 1}},
            14,
            "'uniqueItems' must be a boolean",
        ),
        (
            doc! {"$jsonSchema": {"additionalProperties": "no"}},
            14,
            "'additionalProperties' must be an object or a boolean",
        ),
        (
            doc! {"$jsonSchema": {"patternProperties": 1}},
            14,
            "'patternProperties' must be an object",
        ),
        (
            doc! {"$jsonSchema": {"patternProperties": {"^a": true}}},
            14,
            "has property '^a' which is not an object",
        ),
        (
            doc! {"$jsonSchema": {"dependencies": 1}},
            14,
            "'dependencies' must be an object",
        ),
        (
            doc! {"$jsonSchema": {"dependencies": {"a": 1}}},
            14,
            "must be either an object or an array",
        ),
        (
            doc! {"$jsonSchema": {"dependencies": {"a": []}}},
            9,
            "property 'a' in $jsonSchema keyword 'dependencies' cannot be an empty array",
        ),
        (
            doc! {"$jsonSchema": {"dependencies": {"a": [1]}}},
            14,
            "can only contain strings",
        ),
        (
            doc! {"$jsonSchema": {"dependencies": {"a": ["b", "b"]}}},
            9,
            "contains duplicate element: b",
        ),
        (
            doc! {"$jsonSchema": {"allOf": {}}},
            14,
            "'allOf' must be an array",
        ),
        (
            doc! {"$jsonSchema": {"anyOf": []}},
            2,
            "'anyOf' must be a non-empty array",
        ),
        (
            doc! {"$jsonSchema": {"oneOf": [1]}},
            14,
            "must be an array of objects",
        ),
        (
            doc! {"$jsonSchema": {"not": []}},
            14,
            "'not' must be an object",
        ),
        (
            doc! {"$jsonSchema": {"enum": 1}},
            14,
            "'enum' must be an array",
        ),
        (
            doc! {"$jsonSchema": {"enum": []}},
            9,
            "'enum' cannot be an empty array",
        ),
        (
            doc! {"$jsonSchema": {"enum": [1, 1.0]}},
            9,
            "cannot contain duplicate values",
        ),
        (
            doc! {"$jsonSchema": {"enum": [{"a": 1, "b": 2}, {"b": 2, "a": 1}]}},
            9,
            "cannot contain duplicate values",
        ),
        (
            doc! {"$jsonSchema": {"title": 1}},
            14,
            "'title' must be of type string",
        ),
        (
            doc! {"$jsonSchema": {"description": {}}},
            14,
            "'description' must be of type string",
        ),
        (
            doc! {"$jsonSchema": {"encrypt": {}}},
            238,
            "not supported by BisonDB",
        ),
        // The first problem in keyword order wins: unknown keywords are found first.
        (
            doc! {"$jsonSchema": {"minimum": "x", "foo": 1}},
            9,
            "Unknown $jsonSchema keyword",
        ),
    ];
    for (filter, code, msg) in cases {
        let err = Matcher::parse_doc(&filter).expect_err(&filter.to_string());
        assert_eq!(err.code.code(), code, "{filter}: {err}");
        assert!(err.message.contains(msg), "{filter}: {}", err.message);
        let raw = RawDocumentBuf::try_from(&filter).unwrap();
        let err = Matcher::parse(&raw).expect_err(&filter.to_string());
        assert_eq!(err.code.code(), code, "raw {filter}: {err}");
    }
}

#[test]
fn json_schema_adversarial_inputs() {
    // Deep nesting within the limit parses and matches; beyond it fails cleanly.
    fn nested(levels: usize) -> (Document, Document) {
        let mut schema = doc! {"bsonType": "int"};
        let mut value = Bson::Int32(1);
        for _ in 0..levels {
            schema = doc! {"bsonType": "object", "required": ["n"], "properties": {"n": schema}};
            value = Bson::Document(doc! {"n": value});
        }
        let mut d = Document::new();
        d.insert("n", value);
        (doc! {"required": ["n"], "properties": {"n": schema}}, d)
    }
    let (schema, d) = nested(150);
    let m = Matcher::parse_doc(&doc! {"$jsonSchema": schema}).unwrap();
    assert!(m.matches_doc(&d));
    let (schema, _) = nested(300);
    let err = Matcher::parse_doc(&doc! {"$jsonSchema": schema}).unwrap_err();
    assert_eq!(err.code, ErrorCode::BadValue);

    let mut items = doc! {};
    for _ in 0..300 {
        items = doc! {"items": items};
    }
    assert!(Matcher::parse_doc(&doc! {"$jsonSchema": {"properties": {"a": items}}}).is_err());

    // Large enum and uniqueItems inputs stay fast (sorted, not compared pairwise).
    let big: Vec<Bson> = (0..20_000).map(Bson::Int32).collect();
    let m = Matcher::parse_doc(&doc! {"$jsonSchema": {
        "properties": {"a": {"enum": big.clone(), "uniqueItems": true}}
    }})
    .unwrap();
    assert!(m.matches_doc(&doc! {"a": 19_999}));
    assert!(!m.matches_doc(&doc! {"a": 20_000}));
    let m = Matcher::parse_doc(&doc! {"$jsonSchema": {
        "properties": {"a": {"uniqueItems": true}}
    }})
    .unwrap();
    assert!(m.matches_doc(&doc! {"a": big.clone()}));
    let mut dup = big;
    dup.push(Bson::Double(7.0));
    assert!(!m.matches_doc(&doc! {"a": dup}));

    // Huge counts and lengths are compared, never allocated.
    let m = Matcher::parse_doc(&doc! {"$jsonSchema": {
        "minProperties": 0,
        "properties": {"a": {"minItems": i64::MAX, "maxLength": i64::MAX}}
    }})
    .unwrap();
    assert!(!m.matches_doc(&doc! {"a": [1, 2]}));
    assert!(m.matches_doc(&doc! {"a": "long enough"}));
}

#[test]
fn where_runs_javascript_with_the_other_predicates() {
    let docs: Vec<Document> = (0..10).map(|i| doc! {"x": i}).collect();
    let count = |filter: Document| {
        let m = Matcher::parse_doc(&filter).unwrap();
        assert!(m.has_where(), "{filter}");
        docs.iter().filter(|d| m.matches_doc(d)).count()
    };
    assert_eq!(count(doc! {"$where": "this.x < 3"}), 3);
    assert_eq!(
        count(doc! {"$where": bson::Bson::JavaScriptCode("this.x < 3".into())}),
        3
    );
    assert_eq!(
        count(doc! {"$where": "function() { return obj.x >= 7 }"}),
        3
    );
    assert_eq!(
        count(doc! {"x": {"$gt": 5}, "$where": "this.x % 2 == 0"}),
        2
    );
    assert_eq!(
        count(doc! {"$or": [{"x": 0}, {"$where": "this.x == 9"}]}),
        2
    );
    assert!(!Matcher::parse_doc(&doc! {"x": 1}).unwrap().has_where());
}

#[test]
fn where_errors_fail_the_match() {
    let m = Matcher::parse_doc(&doc! {"$where": "throw new Error('boom')"}).unwrap();
    let raw = RawDocumentBuf::try_from(&doc! {"x": 1}).unwrap();
    let e = m.try_matches(&raw).unwrap_err();
    assert_eq!((e.code.code(), e.message.as_str()), (139, "Error: boom"));
}

#[test]
fn geo_operators_match_table() {
    let sq =
        doc! {"type": "Polygon", "coordinates": [[[40, 5], [40, 6], [41, 6], [41, 5], [40, 5]]]};
    let cases: Vec<(Document, Document, bool)> = vec![
        (
            doc! {"g": {"$within": {"$geometry": sq.clone()}}},
            doc! {"g": [40.5, 5.5]},
            true,
        ),
        (
            doc! {"g": {"$geoWithin": {"$geometry": sq.clone()}}},
            doc! {"g": {"type": "Point", "coordinates": [40.5, 5.5]}},
            true,
        ),
        (
            doc! {"g": {"$geoWithin": {"$geometry": sq.clone()}}},
            doc! {"g": [50, 5.5]},
            false,
        ),
        (
            doc! {"g": {"$geoWithin": {"$geometry": sq.clone()}}},
            doc! {"h": 1},
            false,
        ),
        (
            doc! {"g": {"$geoWithin": {"$geometry": sq.clone()}}},
            doc! {"g": "x"},
            false,
        ),
        // An array of points: any of them.
        (
            doc! {"g": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}},
            doc! {"g": [[5, 5], [0.5, 0.5]]},
            true,
        ),
        (
            doc! {"g.loc": {"$geoWithin": {"$center": [[0, 0], 1]}}},
            doc! {"g": [{"loc": [9, 9]}, {"loc": {"x": 0, "y": 0.5}}]},
            true,
        ),
        (
            doc! {"g": {"$geoIntersects": {"$geometry": sq.clone()}}},
            doc! {"g": {"type": "LineString", "coordinates": [[39, 5.5], [42, 5.5]]}},
            true,
        ),
        (
            doc! {"g": {"$near": [0, 0], "$maxDistance": 1}},
            doc! {"g": [0.5, 0.5]},
            true,
        ),
        (
            doc! {"g": {"$near": [0, 0], "$maxDistance": 1}},
            doc! {"g": [1, 1]},
            false,
        ),
        (
            doc! {"g": {"$near": [0, 0], "$minDistance": 1}},
            doc! {"g": [1, 1]},
            true,
        ),
        (
            doc! {"g": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 120000}}},
            doc! {"g": [1, 0]},
            true,
        ),
        (
            doc! {"g": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0, 0]}, "$maxDistance": 100000}}},
            doc! {"g": [1, 0]},
            false,
        ),
        (
            doc! {"g": {"$not": {"$geoWithin": {"$box": [[0, 0], [1, 1]]}}}},
            doc! {"g": [5, 5]},
            true,
        ),
    ];
    for (filter, d, want) in cases {
        let m = Matcher::parse_doc(&filter).unwrap();
        assert_eq!(m.matches_doc(&d), want, "{filter} on {d}");
    }
    let m = Matcher::parse_doc(&doc! {"x": 1, "g": {"$near": [1, 2]}}).unwrap();
    assert_eq!(m.near().map(|(p, n)| (p, n.point.x)), Some(("g", 1.0)));
}

#[test]
fn sample_rate() {
    // 0 and 1 are constants; both number types and decimals are accepted.
    let d = doc! {"a": 1};
    for (f, want) in [
        (doc! {"$sampleRate": 0}, false),
        (doc! {"$sampleRate": 0.0}, false),
        (doc! {"$sampleRate": 1}, true),
        (doc! {"$sampleRate": 1_i64}, true),
        (doc! {"$sampleRate": dec("1")}, true),
        (doc! {"$and": [{"a": 1}, {"$sampleRate": 1.0}]}, true),
        (doc! {"a": 2, "$sampleRate": 1.0}, false),
    ] {
        assert_eq!(Matcher::parse_doc(&f).unwrap().matches_doc(&d), want, "{f}");
    }
    // Between: each evaluation draws afresh, so about half of 2000 match.
    let m = Matcher::parse_doc(&doc! {"$sampleRate": 0.5}).unwrap();
    let hits = (0..2000).filter(|_| m.matches_doc(&d)).count();
    assert!((800..1200).contains(&hits), "{hits} of 2000");
    let m = Matcher::parse_doc(&doc! {"$sampleRate": 0.01}).unwrap();
    let hits = (0..2000).filter(|_| m.matches_doc(&d)).count();
    assert!(hits < 100, "{hits} of 2000");
    let cases: Vec<(Document, i32, &str)> = vec![
        (
            doc! {"$sampleRate": "0.5"},
            2,
            "argument to $sampleRate must be a numeric type",
        ),
        (
            doc! {"$sampleRate": null},
            2,
            "argument to $sampleRate must be a numeric type",
        ),
        (
            doc! {"$sampleRate": 1.5},
            2,
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            doc! {"$sampleRate": -0.1},
            2,
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            doc! {"$sampleRate": f64::NAN},
            2,
            "numeric argument to $sampleRate must be in [0, 1]",
        ),
        (
            doc! {"a": {"$sampleRate": 0.5}},
            2,
            "unknown operator: $sampleRate",
        ),
    ];
    for (f, code, msg) in cases {
        let e = Matcher::parse_doc(&f).expect_err(&f.to_string());
        assert_eq!(e.code.code(), code, "{f}: {e}");
        assert!(e.message.contains(msg), "{f}: {}", e.message);
    }
}

/// mongod's matcher (expression_parser.cpp, `isDBRefDocument`,
/// `parseDBRef`, `parseElemMatch`): `$ref`, `$id` and `$db` are field names,
/// not operators, at any level where a filter names fields (so
/// `{members: {$elemMatch: {$id: oid}}}` matches a DBRef in an array), and a
/// field's operand with both `$ref` and `$id` is a DBRef value; an operand
/// with only `$id` is an unknown operator, as there.
#[test]
fn dbref_fields() {
    let oid = bson::oid::ObjectId::new();
    let other = bson::oid::ObjectId::new();
    let d = doc! {"members": [{"$ref": "users", "$id": oid}, {"$ref": "users", "$id": other, "$db": "x"}]};
    check(&[
        (
            doc! {"members": {"$elemMatch": {"$id": oid}}},
            d.clone(),
            true,
        ),
        (
            doc! {"members": {"$elemMatch": {"$id": oid, "$db": "x"}}},
            d.clone(),
            false,
        ),
        (
            doc! {"members": {"$elemMatch": {"$ref": "users", "$db": "x"}}},
            d.clone(),
            true,
        ),
        (
            doc! {"members": {"$elemMatch": {"$ref": "groups"}}},
            d.clone(),
            false,
        ),
        (doc! {"$id": oid}, doc! {"$ref": "users", "$id": oid}, true),
        (
            doc! {"$or": [{"$ref": "x"}, {"$id": oid}]},
            doc! {"$id": oid},
            true,
        ),
        (doc! {"members.$id": other}, d.clone(), true),
        (
            doc! {"m": {"$ref": "users", "$id": oid}},
            doc! {"m": {"$ref": "users", "$id": oid}},
            true,
        ),
    ]);
    let e = Matcher::parse_doc(&doc! {"m": {"$id": oid}}).unwrap_err();
    assert_eq!(e.message, "unknown operator: $id");
}
