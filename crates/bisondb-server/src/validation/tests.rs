use super::*;
use bson::{doc, RawBson};

fn raw(d: &Document) -> RawDocumentBuf {
    RawDocumentBuf::try_from(d).unwrap()
}

fn validator(options: Document) -> Option<Validator> {
    let storage =
        bisondb_storage::Storage::open(std::sync::Arc::new(bisondb_storage::MemoryEngine::new()))
            .unwrap();
    let coll = storage.create_collection("t", "c", options).unwrap();
    Validator::for_collection(Some(&coll), false).unwrap()
}

#[test]
fn levels_and_actions_are_mongod_8_0_enums() {
    for l in ["off", "strict", "moderate"] {
        assert_eq!(parse_level("create", RawBsonRef::String(l)).unwrap(), l);
    }
    for a in ["error", "warn"] {
        assert_eq!(parse_action("collMod", RawBsonRef::String(a)).unwrap(), a);
    }
    // errorAndLog is new in 8.1.
    let e = parse_action("create", RawBsonRef::String("errorAndLog")).unwrap_err();
    assert_eq!(e.code, ErrorCode::BadValue);
    assert_eq!(
        e.message,
        "Enumeration value 'errorAndLog' for field 'create.validationAction' is not a valid value."
    );
    let e = parse_level("create", RawBsonRef::Int32(1)).unwrap_err();
    assert_eq!(e.code, ErrorCode::TypeMismatch);
}

#[test]
fn validators_refuse_what_mongod_refuses() {
    let v = |d: Document| RawBson::Document(raw(&d));
    for (filter, msg) in [
        (
            doc! {"$where": "true"},
            "$where is not allowed in this context",
        ),
        (
            doc! {"$or": [{"a": 1}, {"$text": {"$search": "x"}}]},
            "$text is not allowed in this context",
        ),
        (
            doc! {"loc": {"$near": [0, 0]}},
            "$geoNear, $near, and $nearSphere are not allowed in this context",
        ),
    ] {
        let e = parse_validator("create", "t", "c", v(filter).as_raw_bson_ref()).unwrap_err();
        assert_eq!(e.code, ErrorCode::QueryFeatureNotAllowed);
        assert_eq!(e.message, msg);
    }
    let ok = doc! {"$jsonSchema": {"required": ["a"]}, "$expr": {"$gt": ["$a", 1]}};
    assert_eq!(
        parse_validator("create", "t", "c", v(ok.clone()).as_raw_bson_ref()).unwrap(),
        ok
    );
    let e =
        parse_validator("create", "admin", "c", v(doc! {"a": 1}).as_raw_bson_ref()).unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidOptions);
    let e = parse_validator(
        "create",
        "t",
        "system.x",
        v(doc! {"a": 1}).as_raw_bson_ref(),
    )
    .unwrap_err();
    assert_eq!(e.code, ErrorCode::InvalidOptions);
    // A malformed filter fails with the matcher's own error.
    assert!(parse_validator(
        "create",
        "t",
        "c",
        v(doc! {"a": {"$bogus": 1}}).as_raw_bson_ref()
    )
    .is_err());
    // An empty validator is no validator, anywhere.
    assert!(parse_validator("create", "admin", "c", v(doc! {}).as_raw_bson_ref()).is_ok());
}

#[test]
fn no_validator_means_nothing_to_check() {
    assert!(validator(doc! {}).is_none());
    assert!(validator(doc! {"validator": {}}).is_none());
    assert!(validator(doc! {"validator": {"a": 1}, "validationLevel": "off"}).is_none());
    assert!(validator(doc! {"validator": {"a": 1}}).is_some());
}

#[test]
fn failures_carry_the_document_id_and_details() {
    let v = validator(doc! {"validator": {"a": {"$gt": 5}}}).unwrap();
    assert!(v.check(&raw(&doc! {"_id": 1, "a": 6}), None).is_ok());
    let e = v.check(&raw(&doc! {"_id": 7, "a": 3}), None).unwrap_err();
    assert_eq!(e.code.code(), 121);
    assert_eq!(e.message, "Document failed validation");
    let d = crate::reply::details(&e);
    let info = d.get_document("errInfo").unwrap();
    assert_eq!(info.get("failingDocumentId"), Some(&Bson::Int32(7)));
    assert_eq!(
        info.get_document("details").unwrap(),
        &doc! {
            "operatorName": "$gt",
            "specifiedAs": {"a": {"$gt": 5}},
            "reason": "comparison failed",
            "consideredValue": 3,
        }
    );
}

#[test]
fn moderate_lets_already_invalid_documents_be_updated() {
    let v = validator(doc! {"validator": {"a": 1}, "validationLevel": "moderate"}).unwrap();
    let bad = raw(&doc! {"_id": 1, "a": 2});
    let good = raw(&doc! {"_id": 1, "a": 1});
    // An insert (no previous version) is always checked.
    assert!(v.check(&bad, None).is_err());
    assert!(v.check(&raw(&doc! {"_id": 1, "a": 3}), Some(&bad)).is_ok());
    assert!(v.check(&bad, Some(&good)).is_err());
}

#[test]
fn warn_lets_the_write_through() {
    let v = validator(doc! {"validator": {"a": 1}, "validationAction": "warn"}).unwrap();
    assert!(v.check(&raw(&doc! {"_id": 1, "a": 2}), None).is_ok());
}

#[test]
fn explain_names_the_failing_clauses() {
    let rules = doc! {"a": 1, "b": {"$type": "string"}, "c": {"$exists": true}};
    let d = explain(&rules, &doc! {"_id": 1, "a": 1, "b": 5});
    assert_eq!(
        d,
        doc! {"operatorName": "$and", "clausesNotSatisfied": [
            {"index": 1, "details": {
                "operatorName": "$type", "specifiedAs": {"b": {"$type": "string"}},
                "reason": "type did not match", "consideredType": "int", "consideredValue": 5}},
            {"index": 2, "details": {
                "operatorName": "$exists", "specifiedAs": {"c": {"$exists": true}},
                "reason": "path does not exist"}},
        ]}
    );
    let missing = explain(&doc! {"a": {"$gte": 1}}, &doc! {"_id": 1});
    assert_eq!(missing.get_str("reason").unwrap(), "field was missing");
}

#[test]
fn explain_walks_json_schema() {
    let rules = doc! {"$jsonSchema": {
        "bsonType": "object",
        "required": ["name", "age"],
        "properties": {"name": {"bsonType": "string"}, "age": {"minimum": 0}},
    }};
    let d = explain(&rules, &doc! {"_id": 1, "name": 5});
    assert_eq!(d.get_str("operatorName").unwrap(), "$jsonSchema");
    let rules = d.get_array("schemaRulesNotSatisfied").unwrap();
    assert_eq!(
        rules[0],
        Bson::Document(doc! {
        "operatorName": "required", "specifiedAs": {"required": ["name", "age"]},
        "missingProperties": ["age"]})
    );
    assert_eq!(
        rules[1],
        Bson::Document(
            doc! {"operatorName": "properties", "propertiesNotSatisfied": [
                {"propertyName": "name", "details": [{
                    "operatorName": "bsonType", "specifiedAs": {"bsonType": "string"},
                    "reason": "type did not match", "consideredValue": 5, "consideredType": "int"}]}
            ]}
        )
    );
    assert_eq!(rules.len(), 2);
}

#[test]
fn explain_keeps_a_regex_with_its_options() {
    let rules = doc! {"s": {"$regex": "^a", "$options": "i"}};
    let d = explain(&rules, &doc! {"_id": 1, "s": "b"});
    assert_eq!(
        d,
        doc! {"operatorName": "$regex", "specifiedAs": {"s": {"$regex": "^a", "$options": "i"}},
        "reason": "regular expression did not match", "consideredValue": "b"}
    );
}

#[test]
fn explain_rechecks_under_the_collections_collation() {
    let v = validator(doc! {
        "collation": {"locale": "en", "strength": 2},
        "validator": {"s": "abc", "n": {"$gt": 0}},
    })
    .unwrap();
    // "ABC" equals "abc" at strength 2: only the `n` clause fails.
    let e = v
        .check(&raw(&doc! {"_id": 1, "s": "ABC", "n": -1}), None)
        .unwrap_err();
    let info = crate::reply::details(&e);
    let details = info
        .get_document("errInfo")
        .unwrap()
        .get_document("details")
        .unwrap();
    assert_eq!(
        details,
        &doc! {"operatorName": "$and", "clausesNotSatisfied": [
            {"index": 1, "details": {
                "operatorName": "$gt", "specifiedAs": {"n": {"$gt": 0}},
                "reason": "comparison failed", "consideredValue": -1}},
        ]}
    );
}

#[test]
fn explain_gives_the_expr_result() {
    let rules = doc! {"$expr": {"$subtract": ["$a", "$b"]}};
    let d = explain(&rules, &doc! {"_id": 1, "a": 2, "b": 2});
    assert_eq!(
        d,
        doc! {"operatorName": "$expr", "specifiedAs": {"$expr": {"$subtract": ["$a", "$b"]}},
        "reason": "expression did not match", "expressionResult": 0}
    );
}
