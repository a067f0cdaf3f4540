//! Table tests for update parsing and every operator.

use super::*;
use bson::doc;

fn run(start: Document, update: Document) -> MongoResult<(Document, bool)> {
    let spec = UpdateSpec::parse(&update)?;
    let mut d = start;
    let changed = spec.apply(&mut d, false)?;
    Ok((d, changed))
}

fn ok_cases(cases: Vec<(Document, Document, Document)>) {
    for (start, update, want) in cases {
        let got = run(start.clone(), update.clone()).unwrap_or_else(|e| panic!("{update}: {e}"));
        assert_eq!(got.0, want, "start {start} update {update}");
        // Field order matters as much as values.
        assert_eq!(
            got.0.keys().collect::<Vec<_>>(),
            want.keys().collect::<Vec<_>>(),
            "{update}"
        );
    }
}

fn err_cases(cases: Vec<(Document, Document, ErrorCode, &str)>) {
    for (start, update, code, msg) in cases {
        let e = run(start, update.clone()).expect_err(&update.to_string());
        assert_eq!(e.code, code, "{update}: {e}");
        assert!(
            e.message.contains(msg),
            "{update}: got {:?}, want {msg:?}",
            e.message
        );
    }
}

#[test]
fn set_unset_and_field_order() {
    ok_cases(vec![
        (
            doc! {"_id": 1},
            doc! {"$set": {"b": 1, "a": 2}},
            doc! {"_id": 1, "a": 2, "b": 1},
        ),
        (
            doc! {"_id": 1, "z": 0},
            doc! {"$set": {"a.b": 1}},
            doc! {"_id": 1, "z": 0, "a": {"b": 1}},
        ),
        (
            doc! {"_id": 1, "a": [1]},
            doc! {"$set": {"a.2": 5}},
            doc! {"_id": 1, "a": [1, null, 5]},
        ),
        (
            doc! {"_id": 1, "a": 1},
            doc! {"$set": {"a": "x"}},
            doc! {"_id": 1, "a": "x"},
        ),
        (
            doc! {"_id": 1},
            doc! {"$set": {"10": 1, "9": 2}},
            doc! {"_id": 1, "9": 2, "10": 1},
        ),
        (
            doc! {"_id": 1, "a": 1, "b": 2},
            doc! {"$unset": {"a": "", "zz": 1}},
            doc! {"_id": 1, "b": 2},
        ),
        (
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"$unset": {"a.0": 1}},
            doc! {"_id": 1, "a": [null, 2]},
        ),
        (doc! {"_id": 1}, doc! {"$set": {}}, doc! {"_id": 1}),
        (doc! {"_id": 1}, doc! {"$set": {"_id": 1}}, doc! {"_id": 1}),
        (
            doc! {"_id": 1},
            doc! {"$setOnInsert": {"a": 1}},
            doc! {"_id": 1},
        ),
    ]);
}

#[test]
fn changed_flag() {
    let (_, changed) = run(doc! {"_id": 1, "a": 1}, doc! {"$set": {"a": 1}}).unwrap();
    assert!(!changed);
    let (_, changed) = run(doc! {"_id": 1, "a": 1}, doc! {"$inc": {"a": 1}}).unwrap();
    assert!(changed);
}

#[test]
fn set_on_insert_when_inserting() {
    let spec = UpdateSpec::parse(&doc! {"$setOnInsert": {"a": 1}, "$set": {"b": 2}}).unwrap();
    let mut d = doc! {"_id": 7};
    assert!(spec.apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 7, "a": 1, "b": 2});
}

#[test]
fn arithmetic_operators() {
    ok_cases(vec![
        (
            doc! {"_id": 1, "a": 1},
            doc! {"$inc": {"a": 2}},
            doc! {"_id": 1, "a": 3},
        ),
        (
            doc! {"_id": 1, "a": i32::MAX},
            doc! {"$inc": {"a": 1}},
            doc! {"_id": 1, "a": i64::from(i32::MAX) + 1},
        ),
        (
            doc! {"_id": 1, "a": 1},
            doc! {"$inc": {"a": 0.5}},
            doc! {"_id": 1, "a": 1.5},
        ),
        (
            doc! {"_id": 1},
            doc! {"$inc": {"n.c": 5_i64}},
            doc! {"_id": 1, "n": {"c": 5_i64}},
        ),
        (
            doc! {"_id": 1, "a": 3},
            doc! {"$mul": {"a": 2}},
            doc! {"_id": 1, "a": 6},
        ),
        (
            doc! {"_id": 1},
            doc! {"$mul": {"a": 2.5}},
            doc! {"_id": 1, "a": 0.0},
        ),
        (
            doc! {"_id": 1, "a": 5},
            doc! {"$min": {"a": 3}},
            doc! {"_id": 1, "a": 3},
        ),
        (
            doc! {"_id": 1, "a": 5},
            doc! {"$min": {"a": 9}},
            doc! {"_id": 1, "a": 5},
        ),
        (
            doc! {"_id": 1, "a": 5},
            doc! {"$max": {"a": 9}},
            doc! {"_id": 1, "a": 9},
        ),
        (
            doc! {"_id": 1, "a": 5},
            doc! {"$max": {"a": "s"}},
            doc! {"_id": 1, "a": "s"},
        ),
        (
            doc! {"_id": 1},
            doc! {"$max": {"a": 1}},
            doc! {"_id": 1, "a": 1},
        ),
        (
            doc! {"_id": 1, "a": 13},
            doc! {"$bit": {"a": {"and": 10}}},
            doc! {"_id": 1, "a": 8},
        ),
        (
            doc! {"_id": 1, "a": 3},
            doc! {"$bit": {"a": {"or": 4_i64, "xor": 1}}},
            doc! {"_id": 1, "a": 6_i64},
        ),
    ]);
}

#[test]
fn array_operators() {
    ok_cases(vec![
        (
            doc! {"_id": 1},
            doc! {"$push": {"a": 1}},
            doc! {"_id": 1, "a": [1]},
        ),
        (
            doc! {"_id": 1, "a": [1]},
            doc! {"$push": {"a": [2]}},
            doc! {"_id": 1, "a": [1, [2]]},
        ),
        (
            doc! {"_id": 1, "a": [1]},
            doc! {"$push": {"a": {"$each": [2, 3]}}},
            doc! {"_id": 1, "a": [1, 2, 3]},
        ),
        (
            doc! {"_id": 1, "a": [1, 5]},
            doc! {"$push": {"a": {"$each": [3], "$position": 1}}},
            doc! {"_id": 1, "a": [1, 3, 5]},
        ),
        (
            doc! {"_id": 1, "a": [1, 5]},
            doc! {"$push": {"a": {"$each": [3], "$position": -1}}},
            doc! {"_id": 1, "a": [1, 3, 5]},
        ),
        (
            doc! {"_id": 1, "a": [4, 1]},
            doc! {"$push": {"a": {"$each": [3, 2], "$sort": -1, "$slice": 3}}},
            doc! {"_id": 1, "a": [4, 3, 2]},
        ),
        (
            doc! {"_id": 1, "a": [1, 2, 3]},
            doc! {"$push": {"a": {"$each": [4], "$slice": -2}}},
            doc! {"_id": 1, "a": [3, 4]},
        ),
        (
            doc! {"_id": 1, "a": [{"s": 2}, {"s": 1}]},
            doc! {"$push": {"a": {"$each": [{"s": 0}], "$sort": {"s": 1}}}},
            doc! {"_id": 1, "a": [{"s": 0}, {"s": 1}, {"s": 2}]},
        ),
        (
            doc! {"_id": 1, "a": {"x": 1}},
            doc! {"$push": {"a.y": {"k": 1}}},
            doc! {"_id": 1, "a": {"x": 1, "y": [{"k": 1}]}},
        ),
        (
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"$addToSet": {"a": 2.0}},
            doc! {"_id": 1, "a": [1, 2]},
        ),
        (
            doc! {"_id": 1, "a": [1]},
            doc! {"$addToSet": {"a": {"$each": [1, 3, 3]}}},
            doc! {"_id": 1, "a": [1, 3]},
        ),
        (
            doc! {"_id": 1},
            doc! {"$addToSet": {"a": 1}},
            doc! {"_id": 1, "a": [1]},
        ),
        (
            doc! {"_id": 1, "a": [1, 2, 3]},
            doc! {"$pop": {"a": 1}},
            doc! {"_id": 1, "a": [1, 2]},
        ),
        (
            doc! {"_id": 1, "a": [1, 2, 3]},
            doc! {"$pop": {"a": -1}},
            doc! {"_id": 1, "a": [2, 3]},
        ),
        (doc! {"_id": 1}, doc! {"$pop": {"a": 1}}, doc! {"_id": 1}),
        (
            doc! {"_id": 1, "a": [1, 2, 1, 3]},
            doc! {"$pull": {"a": 1}},
            doc! {"_id": 1, "a": [2, 3]},
        ),
        (
            doc! {"_id": 1, "a": [1, 6, 7, 3]},
            doc! {"$pull": {"a": {"$gte": 6}}},
            doc! {"_id": 1, "a": [1, 3]},
        ),
        (
            doc! {"_id": 1, "a": [{"x": 1, "y": 1}, {"x": 2}, 5]},
            doc! {"$pull": {"a": {"x": 1}}},
            doc! {"_id": 1, "a": [{"x": 2}, 5]},
        ),
        (
            doc! {"_id": 1, "a": [1, 2, 3, 2]},
            doc! {"$pullAll": {"a": [2, 3]}},
            doc! {"_id": 1, "a": [1]},
        ),
    ]);
}

#[test]
fn rename_and_current_date() {
    ok_cases(vec![
        (
            doc! {"_id": 1, "a": 1, "b": 2},
            doc! {"$rename": {"a": "c"}},
            doc! {"_id": 1, "b": 2, "c": 1},
        ),
        (
            doc! {"_id": 1, "a": {"b": 1}},
            doc! {"$rename": {"a.b": "x.y"}},
            doc! {"_id": 1, "a": {}, "x": {"y": 1}},
        ),
        (
            doc! {"_id": 1},
            doc! {"$rename": {"a": "c"}},
            doc! {"_id": 1},
        ),
    ]);
    let (d, _) = run(
        doc! {"_id": 1},
        doc! {"$currentDate": {"d": true, "t": {"$type": "timestamp"}}},
    )
    .unwrap();
    assert!(matches!(d.get("d"), Some(Bson::DateTime(_))));
    assert!(matches!(d.get("t"), Some(Bson::Timestamp(_))));
}

#[test]
fn replacement_keeps_id_first() {
    ok_cases(vec![
        (
            doc! {"_id": 1, "a": 1},
            doc! {"b": 2},
            doc! {"_id": 1, "b": 2},
        ),
        (
            doc! {"_id": 1, "a": 1},
            doc! {"b": 2, "_id": 1},
            doc! {"_id": 1, "b": 2},
        ),
        (doc! {"_id": 1, "a": 1}, doc! {}, doc! {"_id": 1}),
    ]);
    assert!(UpdateSpec::parse(&doc! {"a": 1}).unwrap().is_replacement());
    assert!(!UpdateSpec::parse(&doc! {"$set": {"a": 1}})
        .unwrap()
        .is_replacement());
}

#[test]
fn errors() {
    err_cases(vec![
        (doc! {"_id": 1}, doc! {"$foo": {"a": 1}}, ErrorCode::FailedToParse, "Unknown modifier: $foo. Expected a valid update modifier"),
        (doc! {"_id": 1}, doc! {"$set": {"a": 1}, "b": 1}, ErrorCode::FailedToParse, "Unknown modifier: b"),
        (doc! {"_id": 1}, doc! {"$set": 1}, ErrorCode::FailedToParse, "Modifiers operate on fields but we found type int instead"),
        (
            doc! {"_id": 1},
            doc! {"$set": {"a": 1}, "$inc": {"a": 1}},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a' would create a conflict at 'a'",
        ),
        (
            doc! {"_id": 1},
            doc! {"$set": {"a": 1, "a.b": 1}},
            ErrorCode::ConflictingUpdateOperators,
            "Updating the path 'a.b' would create a conflict at 'a'",
        ),
        (doc! {"_id": 1}, doc! {"$set": {"_id": 2}}, ErrorCode::ImmutableField, "Performing an update on the path '_id' would modify the immutable field '_id'"),
        (doc! {"_id": 1}, doc! {"$unset": {"_id": 1}}, ErrorCode::ImmutableField, "immutable field '_id'"),
        (doc! {"_id": 1}, doc! {"_id": 2}, ErrorCode::ImmutableField, "was found to have been altered to _id: 2"),
        (
            doc! {"_id": 1, "a": "x"},
            doc! {"$inc": {"a": 1}},
            ErrorCode::TypeMismatch,
            "Cannot apply $inc to a value of non-numeric type. {_id: 1} has the field 'a' of non-numeric type string",
        ),
        (doc! {"_id": 1}, doc! {"$inc": {"a": "x"}}, ErrorCode::TypeMismatch, "Cannot increment with non-numeric argument: {a: \"x\"}"),
        (doc! {"_id": 1}, doc! {"$mul": {"a": "x"}}, ErrorCode::TypeMismatch, "Cannot multiply with non-numeric argument"),
        (
            doc! {"_id": 1, "a": i64::MAX},
            doc! {"$inc": {"a": 1}},
            ErrorCode::BadValue,
            "Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}",
        ),
        (
            doc! {"_id": 1, "a": 5},
            doc! {"$push": {"a": 1}},
            ErrorCode::BadValue,
            "The field 'a' must be an array but is of type int in document {_id: 1}",
        ),
        (doc! {"_id": 1}, doc! {"$push": {"a": {"$each": 1}}}, ErrorCode::BadValue, "The argument to $each in $push must be an array"),
        (doc! {"_id": 1}, doc! {"$push": {"a": {"$each": [], "$foo": 1}}}, ErrorCode::BadValue, "Unrecognized clause in $push: $foo"),
        (doc! {"_id": 1, "a": 1}, doc! {"$addToSet": {"a": 1}}, ErrorCode::BadValue, "Cannot apply $addToSet to non-array field"),
        (doc! {"_id": 1}, doc! {"$pop": {"a": 2}}, ErrorCode::FailedToParse, "$pop expects 1 or -1, found: 2"),
        (doc! {"_id": 1, "a": 1}, doc! {"$pop": {"a": 1}}, ErrorCode::TypeMismatch, "Path 'a' contains an element of non-array type 'int'"),
        (doc! {"_id": 1, "a": 1}, doc! {"$pull": {"a": 1}}, ErrorCode::BadValue, "Cannot apply $pull to a non-array value"),
        (doc! {"_id": 1}, doc! {"$pullAll": {"a": 1}}, ErrorCode::BadValue, "$pullAll requires an array argument but was given a int"),
        (doc! {"_id": 1}, doc! {"$rename": {"a": "a"}}, ErrorCode::BadValue, "The source and target field for $rename must differ"),
        (doc! {"_id": 1}, doc! {"$rename": {"a": "a.b"}}, ErrorCode::BadValue, "must not be on the same path"),
        (doc! {"_id": 1}, doc! {"$rename": {"a": 1}}, ErrorCode::BadValue, "The 'to' field for $rename must be a string"),
        (doc! {"_id": 1, "a": 5}, doc! {"$set": {"a.b": 1}}, ErrorCode::PathNotViable, "Cannot create field 'b' in element {a: 5}"),
        (doc! {"_id": 1}, doc! {"$set": {"a..b": 1}}, ErrorCode::EmptyFieldName, "contains an empty field name"),
        (doc! {"_id": 1}, doc! {"$set": {"a.$": 1}}, ErrorCode::BadValue, "The positional operator did not find the match needed from the query."),
        (doc! {"_id": 1}, doc! {"$set": {"$[].a": 1}}, ErrorCode::BadValue, "Cannot have positional (i.e. '$') element in the first position"),
        (doc! {"_id": 1, "a": 1}, doc! {"$set": {"a.$[]": 1}}, ErrorCode::BadValue, "Cannot apply array updates to non-array element a: 1"),
        (doc! {"_id": 1}, doc! {"$bit": {"a": {"and": 1.5}}}, ErrorCode::BadValue, "The $bit modifier field must be an Integer"),
        (doc! {"_id": 1}, doc! {"$bit": {"a": {"nand": 1}}}, ErrorCode::BadValue, "only supports 'and', 'or', and 'xor'"),
        (doc! {"_id": 1, "a": "s"}, doc! {"$bit": {"a": {"and": 1}}}, ErrorCode::BadValue, "Cannot apply $bit to a value of non-integral type"),
        (doc! {"_id": 1}, doc! {"$currentDate": {"a": {"$type": "x"}}}, ErrorCode::BadValue, "required to be 'date' or 'timestamp'"),
    ]);
}

#[test]
fn failed_update_leaves_document_untouched() {
    let spec = UpdateSpec::parse(&doc! {"$set": {"a": 1}, "$inc": {"b": 1}}).unwrap();
    let mut d = doc! {"_id": 1, "b": "x"};
    assert!(spec.apply(&mut d, false).is_err());
    assert_eq!(d, doc! {"_id": 1, "b": "x"});
}

#[test]
fn upsert_seed_from_equalities() {
    let seed = upsert_seed(&[
        ("a.b".into(), Bson::Int32(1)),
        ("_id".into(), Bson::Int32(5)),
        ("c".into(), Bson::Null),
    ])
    .unwrap();
    assert_eq!(seed, doc! {"_id": 5, "a": {"b": 1}, "c": null});
    assert_eq!(seed.keys().next().map(String::as_str), Some("_id"));
    let e =
        upsert_seed(&[("a".into(), Bson::Int32(1)), ("a.b".into(), Bson::Int32(1))]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotSingleValueField);
    let e = upsert_seed(&[("a".into(), Bson::Int32(1)), ("a".into(), Bson::Int32(2))]).unwrap_err();
    assert_eq!(e.code, ErrorCode::NotSingleValueField);
}

#[test]
fn pipeline_updates() {
    let spec = UpdateSpec::parse_pipeline(&[
        doc! {"$set": {"total": {"$add": ["$a", "$b"]}}},
        doc! {"$unset": "b"},
    ])
    .unwrap();
    assert!(!spec.is_replacement());
    let mut d = doc! {"_id": 1, "a": 2, "b": 3};
    assert!(spec.apply(&mut d, false).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": 2, "total": 5});

    let spec = UpdateSpec::parse_pipeline(&[doc! {"$replaceWith": {"x": "$a"}}]).unwrap();
    let mut d = doc! {"_id": 1, "a": 2};
    spec.apply(&mut d, false).unwrap();
    assert_eq!(d, doc! {"_id": 1, "x": 2});

    let spec = UpdateSpec::parse_pipeline(&[doc! {"$set": {"_id": 9}}]).unwrap();
    let e = spec.apply(&mut doc! {"_id": 1}, false).unwrap_err();
    assert_eq!(e.code, ErrorCode::ImmutableField);

    let e = UpdateSpec::parse_pipeline(&[doc! {"$match": {}}]).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidOptions);
    assert_eq!(
        e.message,
        "$match is not allowed to be used within an update"
    );
}

#[test]
fn positional_paths() {
    use crate::matcher::Matcher;
    // `$`: the element the query matched.
    let spec = UpdateSpec::parse(&doc! {"$set": {"items.$.qty": 9}}).unwrap();
    let query = Matcher::parse_doc(&doc! {"items.id": 2}).unwrap();
    let mut d = doc! {"_id": 1, "items": [{"id": 1, "qty": 1}, {"id": 2, "qty": 1}]};
    assert!(spec.apply_with_query(&mut d, false, Some(&query)).unwrap());
    assert_eq!(
        d,
        doc! {"_id": 1, "items": [{"id": 1, "qty": 1}, {"id": 2, "qty": 9}]}
    );
    let e = spec.apply(&mut d, false).unwrap_err();
    assert_eq!(
        e.message,
        "The positional operator did not find the match needed from the query."
    );
    let unrelated = Matcher::parse_doc(&doc! {"_id": 1}).unwrap();
    assert!(spec
        .apply_with_query(&mut d, false, Some(&unrelated))
        .is_err());

    // `$[]`: every element.
    ok_cases(vec![
        (
            doc! {"_id": 1, "a": [1, 2]},
            doc! {"$inc": {"a.$[]": 10}},
            doc! {"_id": 1, "a": [11, 12]},
        ),
        (
            doc! {"_id": 1, "a": [{"b": 1}, {}]},
            doc! {"$set": {"a.$[].c": 0}},
            doc! {"_id": 1, "a": [{"b": 1, "c": 0}, {"c": 0}]},
        ),
    ]);

    // `$[id]` with arrayFilters.
    let spec = UpdateSpec::parse_with_array_filters(
        &doc! {"$set": {"grades.$[g].ok": true}},
        &[doc! {"g.score": {"$gte": 80}}],
    )
    .unwrap();
    let mut d = doc! {"_id": 1, "grades": [{"score": 90}, {"score": 50}, {"score": 85}]};
    spec.apply(&mut d, false).unwrap();
    assert_eq!(
        d,
        doc! {"_id": 1, "grades": [{"score": 90, "ok": true}, {"score": 50}, {"score": 85, "ok": true}]}
    );
    let spec = UpdateSpec::parse_with_array_filters(
        &doc! {"$mul": {"v.$[x]": 2}},
        &[doc! {"x": {"$lt": 3}}],
    )
    .unwrap();
    let mut d = doc! {"_id": 1, "v": [1, 5, 2]};
    spec.apply(&mut d, false).unwrap();
    assert_eq!(d, doc! {"_id": 1, "v": [2, 5, 4]});

    let e = UpdateSpec::parse_with_array_filters(&doc! {"$set": {"a.$[y]": 1}}, &[]).unwrap_err();
    assert_eq!(
        e.message,
        "No array filter found for identifier 'y' in path 'a.$[y]'"
    );
    let e = UpdateSpec::parse_with_array_filters(&doc! {"$set": {"a": 1}}, &[doc! {"x": 1}])
        .unwrap_err();
    assert_eq!(e.code, ErrorCode::FailedToParse);
    assert!(e
        .message
        .starts_with("The array filter for identifier 'x' was not used in the update"));
    let e = UpdateSpec::parse(&doc! {"$set": {"a.$[]": 1}})
        .unwrap()
        .apply(&mut doc! {"_id": 1}, false)
        .unwrap_err();
    assert_eq!(
        e.message,
        "The path 'a' must exist in the document in order to apply array updates."
    );
}

#[test]
fn long_paths_and_date_overflow_fail_cleanly() {
    let deep = vec!["a"; 5000].join(".");
    let e = UpdateSpec::parse(&doc! {"$set": {deep: 1}}).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadValue);
    // Extreme dates from clients must error, not overflow.
    let expr = crate::expr::Expr::parse(&Bson::from(
        doc! {"$dateAdd": {"startDate": "$d", "unit": "year", "amount": i64::MAX}},
    ))
    .unwrap();
    let d = doc! {"d": bson::DateTime::from_millis(i64::MAX)};
    assert!(expr.eval(&d, &crate::expr::Vars::new()).is_err());
    let trunc = crate::expr::Expr::parse(&Bson::from(
        doc! {"$dateTrunc": {"date": "$d", "unit": "week", "binSize": i64::MAX}},
    ))
    .unwrap();
    let _ = trunc.eval(
        &doc! {"d": bson::DateTime::from_millis(i64::MIN)},
        &crate::expr::Vars::new(),
    );
    let diff = crate::expr::Expr::parse(&Bson::from(doc! {"$dateDiff": {"startDate": "$a", "endDate": "$b", "unit": "day", "timezone": "+10:00"}})).unwrap();
    let r = diff.eval(&doc! {"a": bson::DateTime::from_millis(i64::MIN), "b": bson::DateTime::from_millis(i64::MAX)}, &crate::expr::Vars::new());
    assert!(r.is_ok());
}

/// mongod 5.0+ (manual, "Dollar-Prefixed Field Names"): an upsert that
/// inserts is validated as an insert, so `$set` of a `$`-prefixed field is
/// accepted there; the same update of an existing document is refused with
/// 52 DollarPrefixedFieldName; `$unset` through a missing `$`-named field
/// does nothing.
#[test]
fn dollar_prefixed_fields_follow_insert_rules_in_upserts() {
    let spec = UpdateSpec::parse(&doc! {"$set": {"$myKey": "v", "a.$b": 1}}).unwrap();
    let mut d = doc! {"_id": 1};
    assert!(spec.apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 1, "$myKey": "v", "a": {"$b": 1}});

    let mut existing = doc! {"_id": 1};
    let e = spec.apply(&mut existing, false).unwrap_err();
    assert_eq!(e.code, ErrorCode::DollarPrefixedFieldName);
    assert_eq!(
        e.message,
        "The dollar ($) prefixed field '$myKey' in '$myKey' is not valid for storage."
    );
    assert_eq!(existing, doc! {"_id": 1});

    let on_insert = UpdateSpec::parse(&doc! {"$setOnInsert": {"$k": 1}}).unwrap();
    let mut d = doc! {"_id": 1};
    assert!(!on_insert.apply(&mut d, false).unwrap());
    assert!(on_insert.apply(&mut d, true).unwrap());
    assert_eq!(d, doc! {"_id": 1, "$k": 1});

    let unset = UpdateSpec::parse(&doc! {"$unset": {"$missing.x": 1}}).unwrap();
    let mut d = doc! {"_id": 1, "a": 1};
    assert!(!unset.apply(&mut d, false).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": 1});
}

/// mongod resolves `$` once, from the query's match, for every path of the
/// update (manual, "$ (update)": "the positional $ operator acts as a
/// placeholder for the first element that matches the query document"), so
/// two `children.$` paths both reach the element matched on `children.name`
/// even when the first one changes that field. Array filters likewise test
/// each element once, before any path below it is applied.
#[test]
fn positional_paths_resolve_against_the_matched_document() {
    use crate::matcher::Matcher;
    let spec =
        UpdateSpec::parse(&doc! {"$set": {"children.$.name": "Luke", "children.$.updatedAt": 1}})
            .unwrap();
    let query = Matcher::parse_doc(&doc! {"children.name": "bar"}).unwrap();
    let mut d = doc! {"_id": 1, "children": [{"name": "foo"}, {"name": "bar"}]};
    assert!(spec.apply_with_query(&mut d, false, Some(&query)).unwrap());
    assert_eq!(
        d,
        doc! {"_id": 1, "children": [{"name": "foo"}, {"name": "Luke", "updatedAt": 1}]}
    );

    let spec = UpdateSpec::parse_with_array_filters(
        &doc! {"$set": {"a.$[x].b": 1, "a.$[x].c": 2}},
        &[doc! {"x.b": 0}],
    )
    .unwrap();
    let mut d = doc! {"_id": 1, "a": [{"b": 0}, {"b": 5}]};
    assert!(spec.apply(&mut d, false).unwrap());
    assert_eq!(d, doc! {"_id": 1, "a": [{"b": 1, "c": 2}, {"b": 5}]});
}
