use super::*;

fn arg(v: Bson) -> MongoResult<ClusteredArg> {
    let raw = crate::reply::to_raw(&doc! {"x": v}).unwrap_or_else(|e| panic!("{e}"));
    let value = raw
        .get("x")
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("no x"));
    parse_arg("create", value)
}

fn code<T: std::fmt::Debug>(r: MongoResult<T>) -> i32 {
    match r {
        Ok(v) => panic!("expected an error, got {v:?}"),
        Err(e) => e.code.code(),
    }
}

#[test]
fn spec_is_normalized_with_mongods_field_order_and_default_name() {
    let got = arg(Bson::Document(doc! {"unique": true, "key": {"_id": 1}}));
    assert_eq!(
        got.ok(),
        Some(ClusteredArg::Spec(
            doc! {"v": 2, "key": {"_id": 1}, "name": "_id_", "unique": true}
        ))
    );
    let named = arg(Bson::Document(
        doc! {"key": {"_id": 1}, "unique": true, "name": "c", "v": 2},
    ));
    assert_eq!(
        named.ok(),
        Some(ClusteredArg::Spec(
            doc! {"v": 2, "key": {"_id": 1}, "name": "c", "unique": true}
        ))
    );
    assert_eq!(
        arg(Bson::Boolean(true)).ok(),
        Some(ClusteredArg::Legacy(true))
    );
    assert!(!ClusteredArg::Legacy(false).clusters());
}

#[test]
fn idl_errors_are_mongods() {
    // Missing required fields, unknown fields, wrong types.
    assert_eq!(code(arg(Bson::Document(doc! {"key": {"_id": 1}}))), 40414);
    assert_eq!(code(arg(Bson::Document(doc! {"unique": true}))), 40414);
    assert_eq!(
        code(arg(Bson::Document(
            doc! {"key": {"_id": 1}, "unique": true, "randField": 1}
        ))),
        40415
    );
    assert_eq!(
        code(arg(Bson::Document(doc! {"key": 1, "unique": true}))),
        14
    );
    assert_eq!(code(arg(Bson::String("x".into()))), 14);
}

#[test]
fn spec_rules_in_mongods_order() {
    let check = |d: Document| match arg(Bson::Document(d)) {
        Ok(ClusteredArg::Spec(s)) => check_spec(&s, None).map_err(|e| e.code.code()),
        other => panic!("{other:?}"),
    };
    assert_eq!(check(doc! {"key": {"_id": 1}, "unique": true}), Ok(()));
    assert_eq!(check(doc! {"key": {"_id": 1.0}, "unique": true}), Ok(()));
    assert_eq!(
        check(doc! {"key": {"_id": 1}, "unique": false}),
        Err(5979700)
    );
    // unique is checked before the key.
    assert_eq!(check(doc! {"key": {"a": 1}, "unique": false}), Err(5979700));
    assert_eq!(check(doc! {"key": {"a": 1}, "unique": true}), Err(197));
    assert_eq!(check(doc! {"key": {"_id": -1}, "unique": true}), Err(197));
    assert_eq!(
        check(doc! {"key": {"_id": 1, "b": 1}, "unique": true}),
        Err(197)
    );
    assert_eq!(
        check(doc! {"key": {"_id": 1}, "unique": true, "v": 12345}),
        Err(5979704)
    );
    let spec = doc! {"v": 3, "key": {"_id": 1}, "name": "_id_", "unique": true};
    // A negative TTL is found before the version.
    assert_eq!(
        check_spec(&spec, Some(-10)).map_err(|e| e.code.code()),
        Err(72)
    );
    assert_eq!(
        check_spec(&spec, Some(10)).map_err(|e| e.code.code()),
        Err(5979704)
    );
}

#[test]
fn capped_rules() {
    let c = |capped, size, max| check_capped(capped, size, max).map_err(|e| e.code.code());
    assert_eq!(c(false, false, false), Ok(()));
    assert_eq!(c(true, true, true), Err(6049200));
    assert_eq!(c(true, false, true), Err(6049204));
    assert_eq!(c(true, false, false), Err(6127800));
}

#[test]
fn stored_options_give_list_indexes_entry_and_ttl() {
    let options = doc! {
        "collation": {"locale": "fr"},
        "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "c", "unique": true},
        "expireAfterSeconds": 5i64,
    };
    let c = Clustered::of_options(&options).unwrap_or_else(|| panic!("not clustered"));
    assert_eq!(c.name(), "c");
    assert_eq!(
        c.list_indexes_entry(&options),
        doc! {"v": 2, "key": {"_id": 1}, "name": "c", "unique": true,
        "collation": {"locale": "fr"}, "expireAfterSeconds": 5i64, "clustered": true}
    );
    assert_eq!(ttl_of(&options), Some(5));
    assert_eq!(ttl_of(&doc! {"expireAfterSeconds": 5i64}), None);
    let legacy = Clustered::of_options(&doc! {"clusteredIndex": true});
    assert_eq!(legacy.map(|c| c.name().to_string()), Some("_id_".into()));
    assert!(Clustered::of_options(&doc! {"clusteredIndex": false}).is_none());
    assert!(Clustered::matches_key(&doc! {"_id": -1}));
    assert!(!Clustered::matches_key(&doc! {"_id": "hashed"}));
    assert!(!Clustered::matches_key(&doc! {"_id": 1, "a": 1}));
}

#[test]
fn pre_and_post_images_struct() {
    let parse = |v: Bson| {
        let raw = crate::reply::to_raw(&doc! {"x": v}).unwrap_or_else(|e| panic!("{e}"));
        let value = raw
            .get("x")
            .unwrap_or_else(|e| panic!("{e}"))
            .unwrap_or_else(|| panic!("no x"));
        parse_pre_and_post_images("create", value).map_err(|e| e.code.code())
    };
    assert_eq!(parse(Bson::Document(doc! {"enabled": true})), Ok(true));
    assert_eq!(parse(Bson::Document(doc! {"enabled": false})), Ok(false));
    assert_eq!(parse(Bson::Document(doc! {})), Err(40414));
    assert_eq!(parse(Bson::Document(doc! {"enabled": 1})), Err(14));
    assert_eq!(
        parse(Bson::Document(doc! {"enabled": true, "x": 1})),
        Err(40415)
    );
    assert_eq!(parse(Bson::Boolean(true)), Err(14));
    assert_eq!(
        check_pre_images_db("admin").map_err(|e| e.code.code()),
        Err(72)
    );
    assert_eq!(
        check_pre_images_db("test").map_err(|e| e.code.code()),
        Ok(())
    );
}
