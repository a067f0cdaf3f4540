//! Collation parsing (mongod's codes) and comparison under each option.

use super::*;
use crate::compare::{compare_bson_in, has_string};
use bson::doc;
use std::cmp::Ordering::{Equal, Greater, Less};

fn coll(spec: Document) -> Arc<Collation> {
    match Collation::parse(&spec) {
        Ok(Some(c)) => c,
        other => panic!("{spec}: {other:?}"),
    }
}

#[test]
fn simple_is_none_and_rejects_other_fields() {
    assert!(matches!(
        Collation::parse(&doc! {"locale": "simple"}),
        Ok(None)
    ));
    let e = Collation::parse(&doc! {"locale": "simple", "strength": 1}).unwrap_err();
    assert_eq!(e.code, ErrorCode::FailedToParse);
}

#[test]
fn parse_errors_carry_mongod_codes() {
    let cases: &[(Document, ErrorCode)] = &[
        (doc! {}, ErrorCode::NoSuchKey),
        (doc! {"strength": 1}, ErrorCode::NoSuchKey),
        (doc! {"locale": 1}, ErrorCode::TypeMismatch),
        (doc! {"locale": ""}, ErrorCode::BadValue),
        (doc! {"locale": "xx"}, ErrorCode::BadValue),
        (doc! {"locale": "en-US"}, ErrorCode::BadValue),
        (doc! {"locale": "en_us"}, ErrorCode::BadValue),
        (doc! {"locale": "root"}, ErrorCode::BadValue),
        (
            doc! {"locale": "en@collation=phonebook"},
            ErrorCode::BadValue,
        ),
        (doc! {"locale": "en", "foo": 1}, ErrorCode::FailedToParse),
        (
            doc! {"locale": "en", "strength": 0},
            ErrorCode::FailedToParse,
        ),
        (
            doc! {"locale": "en", "strength": 6},
            ErrorCode::FailedToParse,
        ),
        (doc! {"locale": "en", "strength": 1.5}, ErrorCode::BadValue),
        (
            doc! {"locale": "en", "strength": "1"},
            ErrorCode::TypeMismatch,
        ),
        (
            doc! {"locale": "en", "caseLevel": 1},
            ErrorCode::TypeMismatch,
        ),
        (
            doc! {"locale": "en", "caseFirst": "up"},
            ErrorCode::FailedToParse,
        ),
        (
            doc! {"locale": "en", "alternate": "blanked"},
            ErrorCode::FailedToParse,
        ),
        (
            doc! {"locale": "en", "maxVariable": "symbol"},
            ErrorCode::FailedToParse,
        ),
        (
            doc! {"locale": "en", "numericOrdering": "yes"},
            ErrorCode::TypeMismatch,
        ),
        (
            doc! {"locale": "en", "normalization": 0},
            ErrorCode::TypeMismatch,
        ),
        (
            doc! {"locale": "en", "version": "1.0"},
            ErrorCode::IncompatibleCollationVersion,
        ),
        (
            doc! {"locale": "en", "strength": 1, "caseFirst": "upper"},
            ErrorCode::BadValue,
        ),
        (
            doc! {"locale": "en", "backwards": true},
            ErrorCode::NotImplemented,
        ),
    ];
    for (spec, code) in cases {
        match Collation::parse(spec) {
            Err(e) => assert_eq!(&e.code, code, "{spec}: {}", e.message),
            Ok(c) => panic!("{spec} parsed: {c:?}"),
        }
    }
}

#[test]
fn resolved_spec_fills_every_option() {
    let c = coll(doc! {"locale": "fr", "strength": 2});
    assert_eq!(
        c.spec(),
        &doc! {
            "locale": "fr", "caseLevel": false, "caseFirst": "off", "strength": 2,
            "numericOrdering": false, "alternate": "non-ignorable", "maxVariable": "punct",
            "normalization": false, "backwards": false, "version": "57.1",
        }
    );
    assert_eq!(
        coll(doc! {"locale": "fr_CA"})
            .spec()
            .get_bool("backwards")
            .ok(),
        Some(true)
    );
    // The locale's own backwards value is accepted when given.
    coll(doc! {"locale": "fr_CA", "backwards": true});
    coll(doc! {"locale": "en", "backwards": false});
    coll(doc! {"locale": "de@collation=phonebook"});
    coll(doc! {"locale": "zh_Hant"});
    coll(doc! {"locale": "en_US_POSIX"});
}

#[test]
fn comparisons_by_option() {
    // (collation, a, b, expected order of a vs b)
    let cases: &[(Document, &str, &str, std::cmp::Ordering)] = &[
        // Strength 1: base letters only.
        (doc! {"locale": "en", "strength": 1}, "a", "A", Equal),
        (doc! {"locale": "en", "strength": 1}, "e", "é", Equal),
        (doc! {"locale": "en", "strength": 1}, "a", "b", Less),
        // Strength 2: accents count, case does not.
        (doc! {"locale": "en", "strength": 2}, "a", "A", Equal),
        (doc! {"locale": "en", "strength": 2}, "e", "é", Less),
        // Strength 3 (default): case counts, lower first.
        (doc! {"locale": "en"}, "a", "A", Less),
        (doc! {"locale": "en", "strength": 3}, "a", "B", Less),
        // Byte order would put "B" before "a"; the collation does not.
        (doc! {"locale": "en"}, "B", "a", Greater),
        // caseFirst.
        (doc! {"locale": "en", "caseFirst": "upper"}, "A", "a", Less),
        (doc! {"locale": "en", "caseFirst": "lower"}, "a", "A", Less),
        // caseLevel with strength 1: case distinguished, accents not.
        (
            doc! {"locale": "en", "strength": 1, "caseLevel": true},
            "a",
            "A",
            Less,
        ),
        (
            doc! {"locale": "en", "strength": 1, "caseLevel": true},
            "e",
            "é",
            Equal,
        ),
        // numericOrdering.
        (doc! {"locale": "en"}, "10", "9", Less),
        (
            doc! {"locale": "en", "numericOrdering": true},
            "10",
            "9",
            Greater,
        ),
        (
            doc! {"locale": "en", "numericOrdering": true},
            "a2",
            "a10",
            Less,
        ),
        // alternate: shifted ignores spaces and punctuation (below strength 4).
        (doc! {"locale": "en"}, "a b", "ab", Less),
        (
            doc! {"locale": "en", "alternate": "shifted"},
            "a b",
            "ab",
            Equal,
        ),
        (
            doc! {"locale": "en", "alternate": "shifted"},
            "a-b",
            "ab",
            Equal,
        ),
        (
            doc! {"locale": "en", "alternate": "shifted", "maxVariable": "space"},
            "a-b",
            "ab",
            Less,
        ),
        (
            doc! {"locale": "en", "alternate": "shifted", "strength": 4},
            "a b",
            "ab",
            Less,
        ),
        // German: ä sorts with a; phonebook sorts it as ae.
        (doc! {"locale": "de"}, "ä", "af", Less),
        (doc! {"locale": "de"}, "äz", "af", Greater),
        (doc! {"locale": "de@collation=phonebook"}, "äz", "af", Less),
        (
            doc! {"locale": "de@collation=phonebook", "strength": 1},
            "ä",
            "ae",
            Equal,
        ),
        // Swedish: ä is a letter after z.
        (doc! {"locale": "sv"}, "ä", "z", Greater),
        (doc! {"locale": "en"}, "ä", "z", Less),
        // French Canadian: accents compared from the end of the string.
        (doc! {"locale": "fr"}, "cote", "côté", Less),
        (
            doc! {"locale": "fr", "strength": 2},
            "côte",
            "coté",
            Greater,
        ),
        (
            doc! {"locale": "fr_CA", "strength": 2},
            "côte",
            "coté",
            Less,
        ),
        // Identical strength separates canonically different spellings only
        // when they differ after normalization.
        (doc! {"locale": "en", "strength": 5}, "a", "A", Less),
    ];
    for (spec, a, b, want) in cases {
        let c = coll(spec.clone());
        assert_eq!(c.compare_str(a, b), *want, "{spec}: {a:?} vs {b:?}");
        assert_eq!(
            c.compare_str(b, a),
            want.reverse(),
            "{spec}: {b:?} vs {a:?}"
        );
    }
}

#[test]
fn sort_keys_agree_with_equality() {
    let c = coll(doc! {"locale": "en", "strength": 2});
    let key = |s: &str| {
        let mut v = Vec::new();
        c.write_key(s, &mut v);
        v
    };
    assert_eq!(key("abc"), key("ABC"));
    assert_ne!(key("abc"), key("abd"));
    assert_ne!(key("e"), key("é"));
}

#[test]
fn bson_comparison_applies_collation_to_strings_only() {
    let c = coll(doc! {"locale": "en", "strength": 2});
    let c = Some(c.as_ref());
    let eq = |a: Bson, b: Bson| compare_bson_in(&a, &b, c);
    assert_eq!(eq(Bson::from("a"), Bson::from("A")), Equal);
    assert_eq!(
        eq(bson::bson!({"x": ["A"]}), bson::bson!({"x": ["a"]})),
        Equal
    );
    // Field names stay binary.
    assert_eq!(eq(bson::bson!({"X": 1}), bson::bson!({"x": 1})), Less);
    // Other types are unchanged.
    assert_eq!(eq(Bson::Int32(1), Bson::from("a")), Less);
    assert!(has_string(&bson::bson!([1, {"a": "x"}])));
    assert!(!has_string(&bson::bson!([1, {"a": 2}])));
}

fn matches(filter: Document, c: Option<Arc<Collation>>, d: Document) -> bool {
    crate::matcher::Matcher::parse_doc(&filter)
        .unwrap()
        .with_collation(c)
        .matches_doc(&d)
}

#[test]
fn matcher_uses_the_collation_for_strings() {
    let s2 = || Some(coll(doc! {"locale": "en", "strength": 2}));
    // (filter, document, matches without collation, matches with strength 2)
    let cases: Vec<(Document, Document, bool, bool)> = vec![
        (doc! {"a": "abc"}, doc! {"a": "ABC"}, false, true),
        (
            doc! {"a": {"$eq": "abc"}},
            doc! {"a": ["x", "ABC"]},
            false,
            true,
        ),
        (doc! {"a": {"$ne": "abc"}}, doc! {"a": "ABC"}, true, false),
        (
            doc! {"a": {"$in": ["x", "abc"]}},
            doc! {"a": "ABC"},
            false,
            true,
        ),
        (
            doc! {"a": {"$nin": ["x", "abc"]}},
            doc! {"a": "ABC"},
            true,
            false,
        ),
        (doc! {"a": {"$gt": "B"}}, doc! {"a": "a"}, true, false),
        (doc! {"a": {"$lt": "b"}}, doc! {"a": "B"}, true, false),
        (doc! {"a": {"$gte": "b"}}, doc! {"a": "B"}, false, true),
        (doc! {"a": {"b": "x"}}, doc! {"a": {"b": "X"}}, false, true),
        (doc! {"a": ["x", "y"]}, doc! {"a": ["X", "Y"]}, false, true),
        (doc! {"a": {"$all": ["x"]}}, doc! {"a": ["X"]}, false, true),
        (
            doc! {"a": {"$elemMatch": {"$eq": "x"}}},
            doc! {"a": ["X"]},
            false,
            true,
        ),
        (
            doc! {"a": {"$elemMatch": {"b": "x"}}},
            doc! {"a": [{"b": "X"}]},
            false,
            true,
        ),
        (doc! {"$or": [{"a": "x"}]}, doc! {"a": "X"}, false, true),
        (
            doc! {"a": {"$not": {"$eq": "x"}}},
            doc! {"a": "X"},
            true,
            false,
        ),
        (
            doc! {"$expr": {"$eq": ["$a", "x"]}},
            doc! {"a": "X"},
            false,
            true,
        ),
        // Regexes and numbers ignore the collation.
        (doc! {"a": {"$regex": "^x"}}, doc! {"a": "X"}, false, false),
        (doc! {"a": 1}, doc! {"a": 1.0}, true, true),
        (doc! {"a": {"$gt": 1}}, doc! {"a": "a"}, false, false),
    ];
    for (f, d, simple, collated) in cases {
        assert_eq!(
            matches(f.clone(), None, d.clone()),
            simple,
            "{f} on {d}, simple"
        );
        assert_eq!(
            matches(f.clone(), s2(), d.clone()),
            collated,
            "{f} on {d}, strength 2"
        );
    }
    // numericOrdering in a range query.
    let num = Some(coll(doc! {"locale": "en", "numericOrdering": true}));
    assert!(matches(doc! {"a": {"$gt": "9"}}, num, doc! {"a": "10"}));
    assert!(!matches(doc! {"a": {"$gt": "9"}}, None, doc! {"a": "10"}));
}

#[test]
fn sort_spec_uses_the_collation() {
    let spec = crate::sort::SortSpec::parse(&doc! {"a": 1}).unwrap();
    let docs = [
        doc! {"a": "b"},
        doc! {"a": "B"},
        doc! {"a": "a"},
        doc! {"a": "A"},
    ];
    let order = |s: &crate::sort::SortSpec| {
        let mut v = docs.to_vec();
        v.sort_by(|x, y| s.compare_doc(x, y));
        v.iter()
            .map(|d| d.get_str("a").unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    assert_eq!(order(&spec), ["A", "B", "a", "b"]);
    let en = spec
        .clone()
        .with_collation(Some(coll(doc! {"locale": "en"})));
    assert_eq!(order(&en), ["a", "A", "b", "B"]);
    let upper = spec.with_collation(Some(coll(doc! {"locale": "en", "caseFirst": "upper"})));
    assert_eq!(order(&upper), ["A", "a", "B", "b"]);
}

#[test]
fn pipeline_groups_sorts_and_compares_with_the_collation() {
    let pipeline = vec![
        doc! {"$match": {"k": {"$in": ["x", "y"]}}},
        doc! {"$group": {"_id": "$k", "n": {"$sum": 1}, "m": {"$max": "$v"}, "s": {"$addToSet": "$v"}}},
        doc! {"$sort": {"_id": 1}},
        doc! {"$project": {"n": 1, "m": 1, "s": {"$size": "$s"}, "eq": {"$eq": ["$_id", "X"]}}},
    ];
    let input = vec![
        doc! {"k": "x", "v": "b"},
        doc! {"k": "X", "v": "B"},
        doc! {"k": "y", "v": "a"},
        doc! {"k": "z", "v": "a"},
    ];
    let run = |c: Option<Arc<Collation>>| -> Vec<Document> {
        let p = crate::agg::Pipeline::parse(&pipeline)
            .unwrap()
            .with_collation(c);
        let stream: crate::agg::DocStream = Box::new(input.clone().into_iter().map(Ok));
        p.run(stream).collect::<MongoResult<Vec<_>>>().unwrap()
    };
    let simple = run(None);
    assert_eq!(simple.len(), 2, "{simple:?}");
    let out = run(Some(coll(doc! {"locale": "en", "strength": 1})));
    assert_eq!(out.len(), 2, "{out:?}");
    let first = &out[0];
    assert_eq!(first.get_i32("n").ok(), Some(2), "{first}");
    assert_eq!(first.get_i32("s").ok(), Some(1), "{first}");
    assert_eq!(first.get_bool("eq").ok(), Some(true), "{first}");
}

#[test]
fn update_operators_use_the_query_collation() {
    use crate::update::UpdateSpec;
    let q = crate::matcher::Matcher::parse_doc(&doc! {})
        .unwrap()
        .with_collation(Some(coll(doc! {"locale": "en", "strength": 2})));
    let plain = crate::matcher::Matcher::parse_doc(&doc! {}).unwrap();
    // (update, document, result without collation, result with strength 2)
    let cases: Vec<(Document, Document, Document, Document)> = vec![
        (
            doc! {"$addToSet": {"a": "X"}},
            doc! {"a": ["x"]},
            doc! {"a": ["x", "X"]},
            doc! {"a": ["x"]},
        ),
        (
            doc! {"$pull": {"a": "X"}},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["y"]},
        ),
        (
            doc! {"$pull": {"a": {"$in": ["Y"]}}},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["x"]},
        ),
        (
            doc! {"$pullAll": {"a": ["X"]}},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["y"]},
        ),
        (
            doc! {"$set": {"a.$[e]": "z"}},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["x", "y"]},
            doc! {"a": ["z", "y"]},
        ),
        (
            doc! {"$max": {"a": "B"}},
            doc! {"a": "a"},
            doc! {"a": "a"},
            doc! {"a": "B"},
        ),
        (
            doc! {"$push": {"a": {"$each": ["B"], "$sort": 1}}},
            doc! {"a": ["a", "c"]},
            doc! {"a": ["B", "a", "c"]},
            doc! {"a": ["a", "B", "c"]},
        ),
    ];
    for (u, d, want_plain, want_coll) in cases {
        let spec = if u.contains_key("$set") {
            UpdateSpec::parse_with_array_filters(&u, &[doc! {"e": "X"}]).unwrap()
        } else {
            UpdateSpec::parse(&u).unwrap()
        };
        let mut x = d.clone();
        spec.apply_with_query(&mut x, false, Some(&plain)).unwrap();
        assert_eq!(x, want_plain, "{u} on {d}, simple");
        let mut y = d.clone();
        spec.apply_with_query(&mut y, false, Some(&q)).unwrap();
        assert_eq!(y, want_coll, "{u} on {d}, strength 2");
    }
}

/// One foreign collection for `$lookup`.
struct OneCollection(Vec<Document>);

impl crate::agg::CollectionReader for OneCollection {
    fn read(&self, _collection: &str) -> MongoResult<crate::agg::DocStream> {
        Ok(Box::new(self.0.clone().into_iter().map(Ok)))
    }
}

#[test]
fn lookup_joins_strings_under_the_collation() {
    let pipeline = vec![doc! {"$lookup": {
        "from": "f", "localField": "k", "foreignField": "k", "as": "j"
    }}];
    let run = |c: Option<Arc<Collation>>| -> usize {
        let p = crate::agg::Pipeline::parse(&pipeline)
            .unwrap()
            .with_collation(c);
        let reader: Arc<dyn crate::agg::CollectionReader> = Arc::new(OneCollection(vec![
            doc! {"k": "X"},
            doc! {"k": "x"},
            doc! {"k": "y"},
        ]));
        let input: crate::agg::DocStream = Box::new(std::iter::once(Ok(doc! {"k": "x"})));
        let out = p
            .run_with_reader(input, Some(reader))
            .collect::<MongoResult<Vec<_>>>()
            .unwrap();
        out[0].get_array("j").map(Vec::len).unwrap_or(0)
    };
    assert_eq!(run(None), 1);
    assert_eq!(run(Some(coll(doc! {"locale": "en", "strength": 1}))), 2);
}

#[test]
fn window_sort_by_uses_the_collation() {
    let pipeline = vec![
        doc! {"$setWindowFields": {"sortBy": {"s": 1}, "output": {"n": {"$documentNumber": {}}}}},
        doc! {"$sort": {"n": 1}},
    ];
    let run = |c: Option<Arc<Collation>>| -> Vec<String> {
        let p = crate::agg::Pipeline::parse(&pipeline)
            .unwrap()
            .with_collation(c);
        let input: crate::agg::DocStream = Box::new(
            vec![doc! {"s": "b"}, doc! {"s": "B"}, doc! {"s": "a"}]
                .into_iter()
                .map(Ok),
        );
        p.run(input)
            .map(|d| d.unwrap().get_str("s").unwrap_or("").to_string())
            .collect()
    };
    assert_eq!(run(None), ["B", "a", "b"]);
    assert_eq!(run(Some(coll(doc! {"locale": "en"}))), ["a", "b", "B"]);
}

#[test]
fn buckets_and_top_n_use_the_collation() {
    let en = || Some(coll(doc! {"locale": "en"}));
    let run = |pipeline: Vec<Document>, c: Option<Arc<Collation>>| -> Vec<Document> {
        let p = crate::agg::Pipeline::parse(&pipeline)
            .unwrap()
            .with_collation(c);
        let input: crate::agg::DocStream = Box::new(
            vec![doc! {"s": "b"}, doc! {"s": "B"}, doc! {"s": "a"}]
                .into_iter()
                .map(Ok),
        );
        p.run(input).collect::<MongoResult<Vec<_>>>().unwrap()
    };
    // $bucket: "B" is below "a" bytewise but between "a" and "c" under "en".
    let bucket =
        vec![doc! {"$bucket": {"groupBy": "$s", "boundaries": ["a", "c"], "default": "other"}}];
    let n = |out: &[Document]| {
        out.iter()
            .find(|d| d.get_str("_id").ok() == Some("a"))
            .map(|d| num_of(d, "count"))
    };
    assert_eq!(n(&run(bucket.clone(), None)), Some(2));
    assert_eq!(n(&run(bucket, en())), Some(3));
    // $topN's sortBy.
    let top = vec![
        doc! {"$group": {"_id": null, "t": {"$topN": {"n": 2, "sortBy": {"s": 1}, "output": "$s"}}}},
    ];
    let t = |out: &[Document]| out[0].get_array("t").cloned().unwrap_or_default();
    assert_eq!(
        t(&run(top.clone(), None)),
        vec![Bson::from("B"), Bson::from("a")]
    );
    assert_eq!(t(&run(top, en())), vec![Bson::from("a"), Bson::from("b")]);
}

fn num_of(d: &Document, k: &str) -> i64 {
    match d.get(k) {
        Some(Bson::Int32(i)) => i64::from(*i),
        Some(Bson::Int64(i)) => *i,
        _ => -1,
    }
}

#[test]
fn index_keys_and_bounds_under_a_collation() {
    use crate::index_keys::{KeyField, KeyGenerator};
    use crate::matcher::bounds::field_bounds_in;
    let c = coll(doc! {"locale": "en", "strength": 2});
    let field = KeyField {
        path: "a".into(),
        descending: false,
    };
    let gen = KeyGenerator::new(vec![field], false, None)
        .unwrap()
        .with_collation(Some(c.clone()));
    let key = |d: Document| {
        let raw = bson::RawDocumentBuf::try_from(&d).unwrap();
        gen.keys(&raw).unwrap().keys
    };
    // Equal under the collation: one key, whatever the case; numbers unchanged.
    assert_eq!(key(doc! {"a": "abc"}), key(doc! {"a": "ABC"}));
    assert_ne!(key(doc! {"a": "abc"}), key(doc! {"a": "abd"}));
    assert_eq!(key(doc! {"a": ["x", "X"]}).len(), 1);
    assert_eq!(key(doc! {"a": 5}), vec![vec![bson::RawBson::Int32(5)]]);
    // Key strings keep the collation's order bytewise.
    let (ka, kb) = (c.index_key("a"), c.index_key("B"));
    assert!(ka.as_bytes() < kb.as_bytes());
    // Bounds: collated predicates bound a same-collation index only; simple
    // string predicates never bound a collated index.
    let m = |f: Document, with: Option<Arc<Collation>>| {
        crate::matcher::Matcher::parse_doc(&f)
            .unwrap()
            .with_collation(with)
    };
    let same = field_bounds_in(&m(doc! {"a": "ABC"}, Some(c.clone())), "a", false, Some(&c));
    assert!(same.is_points() && !same.exact, "{same:?}");
    let other = coll(doc! {"locale": "fr"});
    let diff = field_bounds_in(&m(doc! {"a": "ABC"}, Some(other)), "a", false, Some(&c));
    assert!(diff.is_full());
    let simple = field_bounds_in(&m(doc! {"a": "ABC"}, None), "a", false, Some(&c));
    assert!(simple.is_full());
    let on_simple_index = field_bounds_in(&m(doc! {"a": "ABC"}, Some(c.clone())), "a", false, None);
    assert!(on_simple_index.is_full());
    let num = field_bounds_in(&m(doc! {"a": 5}, None), "a", false, Some(&c));
    assert!(num.is_points() && num.exact);
}
