//! Table tests for expression parsing and every operator group.

use super::*;
use bson::{doc, oid::ObjectId};

fn input() -> Document {
    doc! {
        "_id": 1,
        "a": 5,
        "b": 2.5,
        "s": "Hello World",
        "n": null,
        "arr": [1, 2, 3],
        "docs": [{"x": 1}, {"x": 2}, {"y": 3}],
        "o": {"p": {"q": 7}},
        // 2012-04-22T01:09:53.123Z, a Sunday.
        "d": DateTime::from_millis(1_335_056_993_123),
        "big": i64::MAX,
        "i32max": i32::MAX,
    }
}

fn eval_doc(e: Bson) -> MongoResult<Value> {
    let expr = Expr::parse(&e)?;
    expr.eval(&input(), &Vars::new())
}

fn check(cases: Vec<(Bson, Option<Bson>)>) {
    for (e, want) in cases {
        let got = eval_doc(e.clone()).unwrap_or_else(|err| panic!("{e}: {err}"));
        assert_eq!(got, want, "{e}");
    }
}

fn check_err(cases: Vec<(Bson, i32, &str)>) {
    for (e, code, msg) in cases {
        let err = eval_doc(e.clone()).expect_err(&e.to_string());
        assert_eq!(err.code.code(), code, "{e}: {err}");
        assert!(
            err.message.contains(msg),
            "{e}: got {:?}, want {msg:?}",
            err.message
        );
    }
}

fn b(v: impl Into<Bson>) -> Option<Bson> {
    Some(v.into())
}

#[test]
fn paths_variables_and_literals() {
    check(vec![
        (Bson::from("$a"), b(5)),
        (Bson::from("$o.p.q"), b(7)),
        (
            Bson::from("$docs.x"),
            b(vec![Bson::Int32(1), Bson::Int32(2)]),
        ),
        (Bson::from("$nope"), None),
        (Bson::from("$$ROOT.a"), b(5)),
        (Bson::from("$$CURRENT.o.p"), b(doc! {"q": 7})),
        (Bson::from("$$REMOVE"), None),
        (Bson::Int32(3), b(3)),
        (Bson::from(doc! {"$literal": "$a"}), b("$a")),
        (
            Bson::from(doc! {"x": "$a", "y": "$nope", "z": [1, "$nope"]}),
            b(doc! {"x": 5, "z": [1, null]}),
        ),
        (
            Bson::from(doc! {"$let": {"vars": {"v": "$a"}, "in": {"$multiply": ["$$v", 2]}}}),
            b(10),
        ),
    ]);
    let now = DateTime::from_millis(42);
    let v = Expr::parse(&Bson::from("$$NOW"))
        .unwrap()
        .eval(&doc! {}, &Vars::with_now(now))
        .unwrap();
    assert_eq!(v, b(now));
}

#[test]
fn arithmetic() {
    check(vec![
        (Bson::from(doc! {"$add": [1, 2]}), b(3)),
        (
            Bson::from(doc! {"$add": ["$i32max", 1]}),
            b(i64::from(i32::MAX) + 1),
        ),
        (
            Bson::from(doc! {"$add": ["$big", 1]}),
            b(i64::MAX as f64 + 1.0),
        ),
        (Bson::from(doc! {"$add": ["$a", "$b"]}), b(7.5)),
        (Bson::from(doc! {"$add": ["$a", "$n"]}), b(Bson::Null)),
        (
            Bson::from(doc! {"$add": ["$d", 1000]}),
            b(DateTime::from_millis(1_335_056_994_123)),
        ),
        (Bson::from(doc! {"$subtract": ["$a", 7]}), b(-2)),
        (Bson::from(doc! {"$subtract": ["$d", "$d"]}), b(0_i64)),
        (Bson::from(doc! {"$multiply": [2, 3, 0.5]}), b(3.0)),
        (Bson::from(doc! {"$divide": [5, 2]}), b(2.5)),
        (Bson::from(doc! {"$divide": [4, 2]}), b(2.0)),
        (Bson::from(doc! {"$mod": [7, 3]}), b(1)),
        (Bson::from(doc! {"$mod": [7.5, 2]}), b(1.5)),
        (Bson::from(doc! {"$abs": -3}), b(3)),
        (Bson::from(doc! {"$abs": i32::MIN}), b(-i64::from(i32::MIN))),
        (Bson::from(doc! {"$ceil": 1.2}), b(2.0)),
        (Bson::from(doc! {"$floor": -1.2}), b(-2.0)),
        (Bson::from(doc! {"$ceil": 4}), b(4)),
        (Bson::from(doc! {"$round": [2.5, 0]}), b(2.0)),
        (Bson::from(doc! {"$round": [3.5]}), b(4.0)),
        (Bson::from(doc! {"$round": [1.2345, 2]}), b(1.23)),
        (Bson::from(doc! {"$round": [1250, -2]}), b(1200)),
        (Bson::from(doc! {"$trunc": [-1.7]}), b(-1.0)),
        (Bson::from(doc! {"$sqrt": 16}), b(4.0)),
        (Bson::from(doc! {"$pow": [2, 10]}), b(1024)),
        (Bson::from(doc! {"$pow": [2, -1]}), b(0.5)),
        (Bson::from(doc! {"$exp": 0}), b(1.0)),
        (Bson::from(doc! {"$ln": 1}), b(0.0)),
        (Bson::from(doc! {"$log": [8, 2]}), b(3.0)),
        (Bson::from(doc! {"$log10": 1000}), b(3.0)),
        (Bson::from(doc! {"$sum": ["$arr"]}), b(6)),
        (Bson::from(doc! {"$avg": [1, 2, "x"]}), b(1.5)),
        (Bson::from(doc! {"$max": "$arr"}), b(3)),
        (Bson::from(doc! {"$min": [4, null, 2]}), b(2)),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$divide": [1, 0]}),
            16608,
            "can't $divide by zero",
        ),
        (
            Bson::from(doc! {"$mod": [1, 0]}),
            16610,
            "can't $mod by zero",
        ),
        (
            Bson::from(doc! {"$add": [1, "x"]}),
            16554,
            "$add only supports numeric or date types, not string",
        ),
        (
            Bson::from(doc! {"$subtract": ["x", 1]}),
            16556,
            "can't $subtract int from string",
        ),
        (
            Bson::from(doc! {"$multiply": [1, "x"]}),
            16555,
            "$multiply only supports numeric types, not string",
        ),
        (
            Bson::from(doc! {"$divide": ["x", 1]}),
            16609,
            "$divide only supports numeric types, not string and int",
        ),
        (
            Bson::from(doc! {"$sqrt": -1}),
            28714,
            "greater than or equal to 0",
        ),
        (
            Bson::from(doc! {"$ln": 0}),
            28766,
            "$ln's argument must be a positive number",
        ),
        (
            Bson::from(doc! {"$pow": [0, -1]}),
            28764,
            "base of 0 and a negative exponent",
        ),
        (
            Bson::from(doc! {"$abs": "x"}),
            28765,
            "$abs only supports numeric types, not string",
        ),
        (
            Bson::from(doc! {"$add": ["$d", "$d"]}),
            16612,
            "only one date allowed",
        ),
    ]);
}

#[test]
fn comparison_boolean_conditional() {
    check(vec![
        (Bson::from(doc! {"$cmp": [1, 2]}), b(-1)),
        (Bson::from(doc! {"$cmp": ["b", "a"]}), b(1)),
        (Bson::from(doc! {"$eq": [1, 1.0]}), b(true)),
        (Bson::from(doc! {"$eq": ["$nope", null]}), b(false)),
        (Bson::from(doc! {"$ne": ["$a", 5]}), b(false)),
        (Bson::from(doc! {"$gt": ["$a", 4]}), b(true)),
        (Bson::from(doc! {"$gte": ["$a", 5]}), b(true)),
        (Bson::from(doc! {"$lt": ["$a", "x"]}), b(true)),
        (Bson::from(doc! {"$lte": [null, 0]}), b(true)),
        (Bson::from(doc! {"$and": [1, "$a", true]}), b(true)),
        (Bson::from(doc! {"$and": [1, 0]}), b(false)),
        (Bson::from(doc! {"$and": []}), b(true)),
        (Bson::from(doc! {"$or": [0, "$n", "$nope"]}), b(false)),
        (Bson::from(doc! {"$or": [0, []]}), b(true)),
        (Bson::from(doc! {"$not": [0]}), b(true)),
        (
            Bson::from(doc! {"$cond": [{"$gt": ["$a", 1]}, "big", "small"]}),
            b("big"),
        ),
        (
            Bson::from(doc! {"$cond": {"if": "$n", "then": 1, "else": 2}}),
            b(2),
        ),
        (
            Bson::from(doc! {"$ifNull": ["$nope", "$n", "dflt"]}),
            b("dflt"),
        ),
        (Bson::from(doc! {"$ifNull": ["$a", 0]}), b(5)),
        (
            Bson::from(
                doc! {"$switch": {"branches": [{"case": {"$eq": ["$a", 1]}, "then": "one"}, {"case": {"$eq": ["$a", 5]}, "then": "five"}], "default": "other"}},
            ),
            b("five"),
        ),
        (
            Bson::from(
                doc! {"$switch": {"branches": [{"case": false, "then": 1}], "default": "d"}},
            ),
            b("d"),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$switch": {"branches": [{"case": false, "then": 1}]}}),
            40066,
            "could not find a matching branch",
        ),
        (
            Bson::from(doc! {"$cond": [1, 2]}),
            16020,
            "Expression $cond takes exactly 3 arguments. 2 were passed in.",
        ),
        (
            Bson::from(doc! {"$cond": {"then": 1, "else": 2}}),
            17080,
            "Missing 'if' parameter to $cond",
        ),
        (
            Bson::from(doc! {"$eq": [1]}),
            16020,
            "Expression $eq takes exactly 2 arguments. 1 were passed in.",
        ),
        (
            Bson::from(doc! {"$ifNull": [1]}),
            1257300,
            "$ifNull needs at least two arguments",
        ),
    ]);
}

#[test]
fn strings() {
    check(vec![
        (
            Bson::from(doc! {"$concat": ["a", "-", "$s"]}),
            b("a-Hello World"),
        ),
        (Bson::from(doc! {"$concat": ["a", "$nope"]}), b(Bson::Null)),
        (Bson::from(doc! {"$toLower": "$s"}), b("hello world")),
        (Bson::from(doc! {"$toUpper": "$a"}), b("5")),
        (Bson::from(doc! {"$toUpper": "$nope"}), b("")),
        (Bson::from(doc! {"$substr": ["$s", 0, 5]}), b("Hello")),
        (Bson::from(doc! {"$substrBytes": ["$s", 6, -1]}), b("World")),
        (Bson::from(doc! {"$substrCP": ["héllo", 1, 3]}), b("éll")),
        (Bson::from(doc! {"$strLenBytes": "héllo"}), b(6)),
        (Bson::from(doc! {"$strLenCP": "héllo"}), b(5)),
        (
            Bson::from(doc! {"$split": ["a,b,,c", ","]}),
            b(vec!["a", "b", "", "c"]),
        ),
        (Bson::from(doc! {"$trim": {"input": "  x  "}}), b("x")),
        (
            Bson::from(doc! {"$ltrim": {"input": "xxaxx", "chars": "x"}}),
            b("axx"),
        ),
        (
            Bson::from(doc! {"$rtrim": {"input": "xxaxx", "chars": "x"}}),
            b("xxa"),
        ),
        (Bson::from(doc! {"$indexOfBytes": ["$s", "o"]}), b(4)),
        (Bson::from(doc! {"$indexOfBytes": ["$s", "o", 5]}), b(7)),
        (Bson::from(doc! {"$indexOfBytes": ["$s", "z"]}), b(-1)),
        (
            Bson::from(doc! {"$indexOfBytes": ["$n", "z"]}),
            b(Bson::Null),
        ),
        (Bson::from(doc! {"$strcasecmp": ["abc", "ABC"]}), b(0)),
        (Bson::from(doc! {"$strcasecmp": ["abd", "ABC"]}), b(1)),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$concat": ["a", 1]}),
            16702,
            "$concat only supports strings, not int",
        ),
        (
            Bson::from(doc! {"$strLenBytes": 1}),
            34473,
            "$strLenBytes requires a string argument, found: int",
        ),
        (
            Bson::from(doc! {"$split": ["a", ""]}),
            40087,
            "$split requires a non-empty separator",
        ),
        (Bson::from(doc! {"$split": [1, ","]}), 40085, "found: int"),
        (
            Bson::from(doc! {"$trim": {"input": 1}}),
            50699,
            "$trim requires its input to be a string",
        ),
        (
            Bson::from(doc! {"$trim": {"chars": "x"}}),
            50695,
            "$trim requires an 'input' field",
        ),
        (
            Bson::from(doc! {"$substrBytes": ["é", 1, 1]}),
            28656,
            "continuation byte",
        ),
        (
            Bson::from(doc! {"$toLower": [[1]]}),
            16007,
            "can't convert from BSON type array to String",
        ),
    ]);
}

#[test]
fn arrays() {
    check(vec![
        (Bson::from(doc! {"$size": "$arr"}), b(3)),
        (Bson::from(doc! {"$arrayElemAt": ["$arr", 1]}), b(2)),
        (Bson::from(doc! {"$arrayElemAt": ["$arr", -1]}), b(3)),
        (Bson::from(doc! {"$arrayElemAt": ["$arr", 9]}), None),
        (Bson::from(doc! {"$first": "$arr"}), b(1)),
        (Bson::from(doc! {"$last": "$arr"}), b(3)),
        (Bson::from(doc! {"$first": [[]]}), None),
        (Bson::from(doc! {"$in": [2, "$arr"]}), b(true)),
        (Bson::from(doc! {"$in": [2.0, "$arr"]}), b(true)),
        (Bson::from(doc! {"$isArray": "$arr"}), b(true)),
        (Bson::from(doc! {"$isArray": ["$a"]}), b(false)),
        (
            Bson::from(doc! {"$concatArrays": ["$arr", [4]]}),
            b(vec![1, 2, 3, 4]),
        ),
        (
            Bson::from(doc! {"$concatArrays": ["$arr", "$nope"]}),
            b(Bson::Null),
        ),
        (Bson::from(doc! {"$slice": ["$arr", 2]}), b(vec![1, 2])),
        (Bson::from(doc! {"$slice": ["$arr", -2]}), b(vec![2, 3])),
        (Bson::from(doc! {"$slice": ["$arr", 1, 5]}), b(vec![2, 3])),
        (Bson::from(doc! {"$slice": ["$arr", -1, 1]}), b(vec![3])),
        (Bson::from(doc! {"$range": [0, 5, 2]}), b(vec![0, 2, 4])),
        (Bson::from(doc! {"$range": [5, 0, -2]}), b(vec![5, 3, 1])),
        (Bson::from(doc! {"$range": [0, 0]}), b(Vec::<Bson>::new())),
        (Bson::from(doc! {"$reverseArray": "$arr"}), b(vec![3, 2, 1])),
        (
            Bson::from(doc! {"$filter": {"input": "$arr", "cond": {"$gte": ["$$this", 2]}}}),
            b(vec![2, 3]),
        ),
        (
            Bson::from(
                doc! {"$filter": {"input": "$arr", "as": "x", "cond": {"$gte": ["$$x", 2]}, "limit": 1}},
            ),
            b(vec![2]),
        ),
        (
            Bson::from(
                doc! {"$map": {"input": "$arr", "as": "x", "in": {"$multiply": ["$$x", "$a"]}}},
            ),
            b(vec![5, 10, 15]),
        ),
        (
            Bson::from(doc! {"$map": {"input": "$docs", "in": "$$this.x"}}),
            b(vec![Bson::Int32(1), Bson::Int32(2), Bson::Null]),
        ),
        (
            Bson::from(
                doc! {"$reduce": {"input": "$arr", "initialValue": 0, "in": {"$add": ["$$value", "$$this"]}}},
            ),
            b(6),
        ),
        (
            Bson::from(doc! {"$map": {"input": "$nope", "in": 1}}),
            b(Bson::Null),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$size": "$a"}),
            17124,
            "The argument to $size must be an array, but was of type: int",
        ),
        (
            Bson::from(doc! {"$size": "$nope"}),
            17124,
            "but was of type: missing",
        ),
        (
            Bson::from(doc! {"$arrayElemAt": ["$a", 0]}),
            28689,
            "$arrayElemAt's first argument must be an array",
        ),
        (
            Bson::from(doc! {"$in": [1, "$a"]}),
            40081,
            "$in requires an array as a second argument, found: int",
        ),
        (
            Bson::from(doc! {"$range": [0, 1, 0]}),
            34449,
            "$range requires a non-zero step value",
        ),
        (
            Bson::from(doc! {"$filter": {"input": "$a", "cond": true}}),
            28651,
            "input to $filter must be an array not int",
        ),
        (
            Bson::from(doc! {"$map": {"input": "$arr", "in": "$$y"}}),
            17276,
            "Use of undefined variable: y",
        ),
        (
            Bson::from(doc! {"$slice": ["$a", 1]}),
            28724,
            "First argument to $slice must be an array",
        ),
    ]);
}

#[test]
fn types_and_conversions() {
    let oid = ObjectId::parse_str("5298a5a03b3f4220588fe57c").unwrap();
    check(vec![
        (Bson::from(doc! {"$type": "$a"}), b("int")),
        (Bson::from(doc! {"$type": "$nope"}), b("missing")),
        (Bson::from(doc! {"$type": "$o"}), b("object")),
        (Bson::from(doc! {"$toString": 1.5}), b("1.5")),
        (Bson::from(doc! {"$toString": 2.0}), b("2")),
        (
            Bson::from(doc! {"$toString": "$d"}),
            b("2012-04-22T01:09:53.123Z"),
        ),
        (
            Bson::from(doc! {"$toString": oid}),
            b("5298a5a03b3f4220588fe57c"),
        ),
        (Bson::from(doc! {"$toString": "$nope"}), b(Bson::Null)),
        (Bson::from(doc! {"$toInt": "42"}), b(42)),
        (Bson::from(doc! {"$toInt": 4.9}), b(4)),
        (Bson::from(doc! {"$toInt": true}), b(1)),
        (Bson::from(doc! {"$toLong": "$d"}), b(1_335_056_993_123_i64)),
        (Bson::from(doc! {"$toDouble": "2.5"}), b(2.5)),
        (Bson::from(doc! {"$toBool": 0}), b(false)),
        (Bson::from(doc! {"$toBool": "false"}), b(true)),
        (
            Bson::from(doc! {"$convert": {"input": "x", "to": "int", "onError": -1}}),
            b(-1),
        ),
        (
            Bson::from(doc! {"$convert": {"input": "$nope", "to": "int", "onNull": 0}}),
            b(0),
        ),
        (
            Bson::from(doc! {"$convert": {"input": "7", "to": 16}}),
            b(7),
        ),
        (Bson::from(doc! {"$isNumber": "$b"}), b(true)),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$toInt": "x"}),
            241,
            "Failed to parse number 'x'",
        ),
        (
            Bson::from(doc! {"$toInt": "$big"}),
            241,
            "Conversion would overflow target type",
        ),
        (
            Bson::from(doc! {"$toInt": [[1]]}),
            241,
            "Unsupported conversion from array to int",
        ),
        (
            Bson::from(doc! {"$convert": {"input": 1, "to": "binData"}}),
            238,
            "not supported by BisonDB yet",
        ),
    ]);
}

#[test]
fn dates() {
    check(vec![
        (Bson::from(doc! {"$year": "$d"}), b(2012)),
        (Bson::from(doc! {"$month": "$d"}), b(4)),
        (Bson::from(doc! {"$dayOfMonth": "$d"}), b(22)),
        (Bson::from(doc! {"$hour": "$d"}), b(1)),
        (Bson::from(doc! {"$minute": "$d"}), b(9)),
        (Bson::from(doc! {"$second": "$d"}), b(53)),
        (Bson::from(doc! {"$millisecond": "$d"}), b(123)),
        (Bson::from(doc! {"$dayOfWeek": "$d"}), b(1)),
        (Bson::from(doc! {"$dayOfYear": "$d"}), b(113)),
        (Bson::from(doc! {"$week": "$d"}), b(17)),
        (Bson::from(doc! {"$year": ["$d"]}), b(2012)),
        (
            Bson::from(doc! {"$hour": {"date": "$d", "timezone": "+05:30"}}),
            b(6),
        ),
        (
            Bson::from(doc! {"$hour": {"date": "$d", "timezone": "UTC"}}),
            b(1),
        ),
        (Bson::from(doc! {"$year": "$nope"}), b(Bson::Null)),
        (
            Bson::from(doc! {"$week": DateTime::from_millis(1_325_376_000_000)}),
            b(1),
        ),
        (
            Bson::from(doc! {"$week": DateTime::from_millis(1_293_840_000_000)}),
            b(0),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$year": "$s"}),
            16006,
            "can't convert from BSON type string to Date",
        ),
        (
            Bson::from(doc! {"$hour": {"date": "$d", "timezone": "Mars/Olympus"}}),
            40485,
            "unrecognized time zone identifier: \"Mars/Olympus\"",
        ),
    ]);
}

/// Extreme dates and amounts in named zones give a value or an error, never
/// a panic (overflow in debug builds included).
#[test]
fn named_time_zones_at_the_edges() {
    let d = |ms: i64| Bson::DateTime(DateTime::from_millis(ms));
    let edges = [
        i64::MIN,
        i64::MIN + 1,
        -62_135_596_800_000,
        0,
        253_402_300_799_999,
        i64::MAX,
    ];
    for zone in [
        "America/New_York",
        "Australia/Lord_Howe",
        "Asia/Kolkata",
        "-12:00",
    ] {
        for &x in &edges {
            for &y in &edges {
                let mut exprs = vec![
                    doc! {"$dateDiff": {"startDate": d(x), "endDate": d(y), "unit": "hour", "timezone": zone}},
                    doc! {"$dateDiff": {"startDate": d(x), "endDate": d(y), "unit": "week", "timezone": zone}},
                    doc! {"$dateDiff": {"startDate": d(x), "endDate": d(y), "unit": "millisecond", "timezone": zone}},
                ];
                for unit in ["second", "hour", "day", "week", "month", "year"] {
                    exprs.push(doc! {"$dateTrunc": {"date": d(x), "unit": unit, "binSize": 3, "timezone": zone}});
                    for amount in [Bson::Int64(y), Bson::Int32(i32::MAX), Bson::Int32(-1)] {
                        exprs.push(doc! {"$dateAdd": {"startDate": d(x), "unit": unit, "amount": amount, "timezone": zone}});
                    }
                }
                for op in ["$year", "$isoWeek", "$week"] {
                    exprs.push(doc! {op: {"date": d(x), "timezone": zone}});
                }
                exprs.push(
                    doc! {"$dateToString": {"date": d(x), "format": "%Y %z %Z", "timezone": zone}},
                );
                exprs
                    .push(doc! {"$dateToParts": {"date": d(x), "timezone": zone, "iso8601": true}});
                for e in exprs {
                    let _ = eval_doc(Bson::from(e));
                }
            }
        }
    }
}

/// Named (Olson) zones, checked against known instants around the 2021 DST
/// changes: New York springs forward 2021-03-14 07:00Z (EST -5 -> EDT -4)
/// and falls back 2021-11-07 06:00Z; Paris falls back 2021-10-31 01:00Z
/// (CEST +2 -> CET +1); Kolkata is +05:30 all year.
#[test]
fn named_time_zones() {
    const NY: &str = "America/New_York";
    let d = |ms: i64| Bson::DateTime(DateTime::from_millis(ms));
    let tz =
        |op: &str, ms: i64, zone: &str| Bson::from(doc! {op: {"date": d(ms), "timezone": zone}});
    let to_string = |ms: i64, format: &str, zone: &str| {
        Bson::from(doc! {"$dateToString": {"date": d(ms), "format": format, "timezone": zone}})
    };
    let trunc = |ms: i64, unit: &str, zone: &str| {
        Bson::from(doc! {"$dateTrunc": {"date": d(ms), "unit": unit, "timezone": zone}})
    };
    let add = |op: &str, ms: i64, unit: &str, amount: i32, zone: &str| {
        Bson::from(
            doc! {op: {"startDate": d(ms), "unit": unit, "amount": amount, "timezone": zone}},
        )
    };
    let diff = |a: i64, b: i64, unit: &str, zone: &str| {
        Bson::from(
            doc! {"$dateDiff": {"startDate": d(a), "endDate": d(b), "unit": unit, "timezone": zone}},
        )
    };
    let from_parts = |y: i32, m: i32, day: i32, h: i32, mi: i32, zone: &str| {
        Bson::from(
            doc! {"$dateFromParts": {"year": y, "month": m, "day": day, "hour": h, "minute": mi, "timezone": zone}},
        )
    };
    check(vec![
        // Date parts on both sides of the spring-forward gap.
        (tz("$hour", 1_615_703_400_000, NY), b(1)),
        (tz("$hour", 1_615_707_000_000, NY), b(3)),
        (tz("$minute", 1_615_707_000_000, NY), b(30)),
        (tz("$dayOfMonth", 1_615_707_000_000, NY), b(14)),
        // 2021-01-04T03:00Z is Sunday 2021-01-03 22:00 in New York.
        (tz("$dayOfWeek", 1_609_729_200_000, NY), b(1)),
        (tz("$dayOfYear", 1_609_729_200_000, NY), b(3)),
        (tz("$week", 1_609_729_200_000, NY), b(1)),
        (tz("$isoDayOfWeek", 1_609_729_200_000, NY), b(7)),
        (tz("$isoWeek", 1_609_729_200_000, NY), b(53)),
        (tz("$isoWeekYear", 1_609_729_200_000, NY), b(2020)),
        (tz("$isoDayOfWeek", 1_609_729_200_000, "UTC"), b(1)),
        (tz("$year", 1_609_729_200_000, "Asia/Tokyo"), b(2021)),
        (
            to_string(1_335_056_993_123, "%H:%M %z %Z", "Asia/Kolkata"),
            b("06:39 +0530 330"),
        ),
        (
            to_string(1_615_707_000_000, "%Y-%m-%d %H:%M %z %Z", NY),
            b("2021-03-14 03:30 -0400 -240"),
        ),
        (
            to_string(1_615_703_400_000, "%Y-%m-%d %H:%M %z %Z", NY),
            b("2021-03-14 01:30 -0500 -300"),
        ),
        // The repeated 02:30 in Paris, first in CEST, then in CET.
        (
            to_string(1_635_640_200_000, "%H:%M %z", "Europe/Paris"),
            b("02:30 +0200"),
        ),
        (
            to_string(1_635_643_800_000, "%H:%M %z", "Europe/Paris"),
            b("02:30 +0100"),
        ),
        // Without a format mongod drops the Z suffix for a zone other than UTC.
        (
            Bson::from(doc! {"$dateToString": {"date": d(1_615_707_000_000), "timezone": NY}}),
            b("2021-03-14T03:30:00.000"),
        ),
        (
            Bson::from(doc! {"$dateToParts": {"date": d(1_615_707_000_000), "timezone": NY}}),
            b(
                doc! {"year": 2021, "month": 3, "day": 14, "hour": 3, "minute": 30, "second": 0, "millisecond": 0},
            ),
        ),
        // Local midnight before and after each change.
        (trunc(1_615_734_000_000, "day", NY), b(d(1_615_698_000_000))),
        (trunc(1_636_286_400_000, "day", NY), b(d(1_636_257_600_000))),
        // Wednesday 2021-03-17 -> Sunday 2021-03-14 00:00 EST.
        (
            trunc(1_615_982_400_000, "week", NY),
            b(d(1_615_698_000_000)),
        ),
        // 2021-04-15 -> 2021-04-01 00:00 CEST.
        (
            trunc(1_618_488_000_000, "month", "Europe/Paris"),
            b(d(1_617_228_000_000)),
        ),
        // 16:15 IST -> 16:00 IST.
        (
            trunc(1_609_497_900_000, "hour", "Asia/Kolkata"),
            b(d(1_609_497_000_000)),
        ),
        // A day is 23 hours across spring-forward and 25 across fall-back.
        (
            add("$dateAdd", 1_615_654_800_000, "day", 1, NY),
            b(d(1_615_737_600_000)),
        ),
        (
            add("$dateAdd", 1_636_214_400_000, "day", 1, NY),
            b(d(1_636_304_400_000)),
        ),
        (
            add("$dateSubtract", 1_615_737_600_000, "day", 1, NY),
            b(d(1_615_654_800_000)),
        ),
        // Hours are elapsed time: 01:30 EDT + 1 hour is 01:30 EST.
        (
            add("$dateAdd", 1_636_263_000_000, "hour", 1, NY),
            b(d(1_636_266_600_000)),
        ),
        // Landing in the gap (02:30 on 2021-03-14) moves forward to 03:30 EDT.
        (
            add("$dateAdd", 1_615_620_600_000, "day", 1, NY),
            b(d(1_615_707_000_000)),
        ),
        // Landing in the overlap keeps the start's DST flag.
        (
            add("$dateAdd", 1_636_176_600_000, "day", 1, NY),
            b(d(1_636_263_000_000)),
        ),
        (
            add("$dateSubtract", 1_636_353_000_000, "day", 1, NY),
            b(d(1_636_266_600_000)),
        ),
        // 01:00 EST to 03:00 EDT is one hour.
        (
            diff(1_615_701_600_000, 1_615_705_200_000, "hour", NY),
            b(1_i64),
        ),
        (
            diff(1_615_701_600_000, 1_615_705_200_000, "minute", NY),
            b(60_i64),
        ),
        // 2021-03-14 00:00 EST to 23:59 EDT is the same day; 00:00 on the
        // 15th is the next one.
        (
            diff(1_615_698_000_000, 1_615_780_740_000, "day", NY),
            b(0_i64),
        ),
        (
            diff(1_615_698_000_000, 1_615_780_800_000, "day", NY),
            b(1_i64),
        ),
        (
            diff(1_615_698_000_000, 1_615_780_800_000, "millisecond", NY),
            b(82_800_000_i64),
        ),
        // Both ends on January 31st in New York.
        (
            diff(1_612_135_800_000, 1_612_153_800_000, "month", NY),
            b(0_i64),
        ),
        (
            diff(1_612_135_800_000, 1_612_153_800_000, "month", "UTC"),
            b(1_i64),
        ),
        (from_parts(2021, 3, 14, 12, 0, NY), b(d(1_615_737_600_000))),
        // 02:30 does not exist on 2021-03-14: read with EST, i.e. 03:30 EDT.
        (from_parts(2021, 3, 14, 2, 30, NY), b(d(1_615_707_000_000))),
        // 01:30 on 2021-11-07 happens twice: standard time, as timelib picks.
        (from_parts(2021, 11, 7, 1, 30, NY), b(d(1_636_266_600_000))),
        (
            from_parts(2021, 10, 31, 2, 30, "Europe/Paris"),
            b(d(1_635_643_800_000)),
        ),
        (
            Bson::from(
                doc! {"$dateFromString": {"dateString": "2021-07-01T12:00:00", "timezone": "Europe/Paris"}},
            ),
            b(d(1_625_133_600_000)),
        ),
        // Fixed offsets in all three spellings; link names resolve too.
        (tz("$hour", 1_335_056_993_123, "+0530"), b(6)),
        (tz("$hour", 1_335_056_993_123, "-03"), b(22)),
        (tz("$hour", 1_615_707_000_000, "US/Eastern"), b(3)),
        (tz("$hour", 1_615_707_000_000, "Etc/UTC"), b(7)),
    ]);
    check_err(vec![
        (
            to_string(1_615_707_000_000, "%H", "Mars/Olympus"),
            40485,
            "unrecognized time zone identifier: \"Mars/Olympus\"",
        ),
        (
            trunc(1_615_707_000_000, "day", "america/new_york"),
            40485,
            "unrecognized time zone identifier",
        ),
        (
            tz("$hour", 1_615_707_000_000, "+5"),
            40485,
            "unrecognized time zone identifier: \"+5\"",
        ),
        (
            tz("$hour", 1_615_707_000_000, "+05:3"),
            40485,
            "unrecognized time zone identifier",
        ),
    ]);
}

#[test]
fn objects() {
    check(vec![
        (
            Bson::from(doc! {"$mergeObjects": [{"a": 1, "b": 1}, "$nope", {"b": 2, "c": 3}]}),
            b(doc! {"a": 1, "b": 2, "c": 3}),
        ),
        (Bson::from(doc! {"$getField": "a"}), b(5)),
        (
            Bson::from(doc! {"$getField": {"field": "q", "input": "$o.p"}}),
            b(7),
        ),
        (
            Bson::from(doc! {"$getField": {"field": "zz", "input": "$o"}}),
            None,
        ),
        (
            Bson::from(doc! {"$objectToArray": "$o.p"}),
            b(vec![doc! {"k": "q", "v": 7}]),
        ),
        (
            Bson::from(doc! {"$arrayToObject": [[["a", 1], ["b", 2]]]}),
            b(doc! {"a": 1, "b": 2}),
        ),
        (
            Bson::from(doc! {"$arrayToObject": [[{"k": "a", "v": 1}]]}),
            b(doc! {"a": 1}),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$mergeObjects": [1]}),
            40400,
            "$mergeObjects requires object inputs",
        ),
        (
            Bson::from(doc! {"$objectToArray": 1}),
            40390,
            "$objectToArray requires a document input, found: int",
        ),
        (
            Bson::from(doc! {"$arrayToObject": [[["a", 1, 2]]]}),
            40397,
            "array of size 2 arrays",
        ),
    ]);
}

#[test]
fn parse_errors() {
    check_err(vec![
        (
            Bson::from(doc! {"$foo": 1}),
            168,
            "Unrecognized expression '$foo'",
        ),
        (
            Bson::from(doc! {"$meta": "sortKey"}),
            238,
            "$meta \"sortKey\" is not supported by BisonDB yet",
        ),
        (
            Bson::from(doc! {"$meta": "bogus"}),
            17308,
            "Unsupported argument to $meta: bogus",
        ),
        (
            Bson::from(doc! {"$add": [1], "x": 1}),
            15983,
            "an expression specification must contain exactly one field",
        ),
        (
            Bson::from("$"),
            16872,
            "'$' by itself is not a valid FieldPath",
        ),
        (
            Bson::from("$a..b"),
            15998,
            "FieldPath field names may not be empty strings.",
        ),
        (
            Bson::from("$$undefinedVar"),
            17276,
            "Use of undefined variable: undefinedVar",
        ),
        (
            Bson::from(doc! {"$let": {"vars": {"Bad": 1}, "in": 1}}),
            16867,
            "starts with an invalid character",
        ),
    ]);
}

#[test]
fn operator_tables_are_sorted_and_disjoint() {
    assert!(OPERATORS.windows(2).all(|w| w[0].0 < w[1].0));
    assert!(NOT_IMPLEMENTED.windows(2).all(|w| w[0] < w[1]));
    for n in NOT_IMPLEMENTED {
        assert!(lookup_op(n).is_none(), "{n} is in both tables");
    }
}

#[test]
fn more_dates() {
    check(vec![
        (
            Bson::from(doc! {"$dateToString": {"date": "$d"}}),
            b("2012-04-22T01:09:53.123Z"),
        ),
        (
            Bson::from(
                doc! {"$dateToString": {"date": "$d", "format": "%Y/%m/%d %H:%M:%S %j %w %U %u %V %G %%"}},
            ),
            b("2012/04/22 01:09:53 113 1 17 7 16 2012 %"),
        ),
        (
            Bson::from(
                doc! {"$dateToString": {"date": "$d", "format": "%H:%M %z", "timezone": "-02:00"}},
            ),
            b("23:09 -0200"),
        ),
        (
            Bson::from(doc! {"$dateToString": {"date": "$nope", "onNull": "none"}}),
            b("none"),
        ),
        (Bson::from(doc! {"$isoWeek": "$d"}), b(16)),
        (Bson::from(doc! {"$isoDayOfWeek": "$d"}), b(7)),
        (
            Bson::from(doc! {"$isoWeekYear": DateTime::from_millis(1_325_376_000_000)}),
            b(2011),
        ),
        (
            Bson::from(doc! {"$dateFromParts": {"year": 2012, "month": 4, "day": 22, "hour": 1}}),
            b(DateTime::from_millis(1_335_056_400_000)),
        ),
        (
            Bson::from(doc! {"$dateFromParts": {"year": 2011, "month": 13, "day": 1}}),
            b(DateTime::from_millis(1_325_376_000_000)),
        ),
        (
            Bson::from(
                doc! {"$dateFromParts": {"isoWeekYear": 2012, "isoWeek": 16, "isoDayOfWeek": 7}},
            ),
            b(DateTime::from_millis(1_335_052_800_000)),
        ),
        (
            Bson::from(doc! {"$dateAdd": {"startDate": "$d", "unit": "hour", "amount": 2}}),
            b(DateTime::from_millis(1_335_056_993_123 + 7_200_000)),
        ),
        (
            Bson::from(
                doc! {"$dateAdd": {"startDate": DateTime::from_millis(1_327_968_000_000), "unit": "month", "amount": 1}},
            ),
            b(DateTime::from_millis(1_330_473_600_000)),
        ),
        (
            Bson::from(doc! {"$dateSubtract": {"startDate": "$d", "unit": "day", "amount": 1}}),
            b(DateTime::from_millis(1_335_056_993_123 - 86_400_000)),
        ),
        (
            Bson::from(
                doc! {"$dateDiff": {"startDate": DateTime::from_millis(1_325_376_000_000), "endDate": "$d", "unit": "month"}},
            ),
            b(3_i64),
        ),
        (
            Bson::from(doc! {"$dateDiff": {"startDate": "$d", "endDate": "$d", "unit": "day"}}),
            b(0_i64),
        ),
        (
            Bson::from(doc! {"$dateTrunc": {"date": "$d", "unit": "hour"}}),
            b(DateTime::from_millis(1_335_056_400_000)),
        ),
        (
            Bson::from(doc! {"$dateTrunc": {"date": "$d", "unit": "month"}}),
            b(DateTime::from_millis(1_333_238_400_000)),
        ),
        (
            Bson::from(doc! {"$dateTrunc": {"date": "$d", "unit": "week"}}),
            b(DateTime::from_millis(1_335_052_800_000)),
        ),
        (
            Bson::from(doc! {"$toDate": "2012-04-22T01:09:53.123Z"}),
            b(DateTime::from_millis(1_335_056_993_123)),
        ),
        (
            Bson::from(doc! {"$toDate": "2012-04-22T03:09:53+02:00"}),
            b(DateTime::from_millis(1_335_056_993_000)),
        ),
        (
            Bson::from(doc! {"$toDate": 1_335_056_993_123_i64}),
            b(DateTime::from_millis(1_335_056_993_123)),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$dateToString": {"date": "$d", "format": "%Q"}}),
            18536,
            "Invalid format character '%Q' in format string",
        ),
        (
            Bson::from(doc! {"$dateToString": {"format": "%Y"}}),
            9,
            "Missing 'date' parameter to $dateToString",
        ),
        (
            Bson::from(doc! {"$dateFromParts": {"month": 1}}),
            40516,
            "requires either 'year' or 'isoWeekYear'",
        ),
        (
            Bson::from(doc! {"$toDate": "junk"}),
            241,
            "Error parsing date string 'junk'",
        ),
    ]);
}

#[test]
fn more_strings_and_regex() {
    check(vec![
        (Bson::from(doc! {"$indexOfCP": ["héllo", "l"]}), b(2)),
        (
            Bson::from(doc! {"$replaceOne": {"input": "a-b-c", "find": "-", "replacement": "+"}}),
            b("a+b-c"),
        ),
        (
            Bson::from(doc! {"$replaceAll": {"input": "a-b-c", "find": "-", "replacement": "+"}}),
            b("a+b+c"),
        ),
        (
            Bson::from(doc! {"$replaceAll": {"input": "$nope", "find": "-", "replacement": "+"}}),
            b(Bson::Null),
        ),
        (
            Bson::from(doc! {"$regexMatch": {"input": "$s", "regex": "^hello", "options": "i"}}),
            b(true),
        ),
        (
            Bson::from(doc! {"$regexMatch": {"input": "$s", "regex": "^hello"}}),
            b(false),
        ),
        (
            Bson::from(doc! {"$regexMatch": {"input": "$nope", "regex": "x"}}),
            b(false),
        ),
        (
            Bson::from(doc! {"$regexFind": {"input": "$s", "regex": "(o)(x)?"}}),
            b(doc! {"match": "o", "idx": 4, "captures": ["o", null]}),
        ),
        (
            Bson::from(doc! {"$size": {"$regexFindAll": {"input": "$s", "regex": "o"}}}),
            b(2),
        ),
        (
            Bson::from(doc! {"$regexFind": {"input": "$s", "regex": "zzz"}}),
            b(Bson::Null),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$regexMatch": {"input": 1, "regex": "x"}}),
            51104,
            "$regexMatch needs 'input' to be of type string",
        ),
        (
            Bson::from(doc! {"$regexMatch": {"input": "x", "regex": "("}}),
            51111,
            "Invalid Regex in $regexMatch",
        ),
        (
            Bson::from(doc! {"$regexMatch": {"input": "x", "regex": "a", "options": "q"}}),
            51108,
            "invalid flag in regex options: q",
        ),
        (
            Bson::from(doc! {"$replaceAll": {"input": "x", "find": 1, "replacement": "y"}}),
            51746,
            "requires that 'find' be a string",
        ),
    ]);
}

#[test]
fn more_arrays_sets_math_objects() {
    check(vec![
        (Bson::from(doc! {"$indexOfArray": ["$arr", 2]}), b(1)),
        (Bson::from(doc! {"$indexOfArray": ["$arr", 9]}), b(-1)),
        (
            Bson::from(doc! {"$setUnion": [[1, 2], [2, 3]]}),
            b(vec![1, 2, 3]),
        ),
        (
            Bson::from(doc! {"$setIntersection": [[1, 2, 2], [2, 3]]}),
            b(vec![2]),
        ),
        (
            Bson::from(doc! {"$setDifference": [[1, 2, 3], [2]]}),
            b(vec![1, 3]),
        ),
        (
            Bson::from(doc! {"$setEquals": [[1, 2, 2], [2, 1]]}),
            b(true),
        ),
        (Bson::from(doc! {"$setIsSubset": [[1], [2, 1]]}), b(true)),
        (
            Bson::from(doc! {"$allElementsTrue": [[1, true, "x"]]}),
            b(true),
        ),
        (
            Bson::from(doc! {"$anyElementTrue": [[0, false, null]]}),
            b(false),
        ),
        (
            Bson::from(doc! {"$zip": {"inputs": [[1, 2], ["a"]]}}),
            b(vec![Bson::Array(vec![Bson::Int32(1), Bson::from("a")])]),
        ),
        (
            Bson::from(
                doc! {"$zip": {"inputs": [[1, 2], ["a"]], "useLongestLength": true, "defaults": [0, "z"]}},
            ),
            b(vec![
                Bson::Array(vec![Bson::Int32(1), Bson::from("a")]),
                Bson::Array(vec![Bson::Int32(2), Bson::from("z")]),
            ]),
        ),
        (
            Bson::from(doc! {"$sortArray": {"input": [3, 1, 2], "sortBy": -1}}),
            b(vec![3, 2, 1]),
        ),
        (
            Bson::from(doc! {"$sortArray": {"input": "$docs", "sortBy": {"x": -1}}}),
            b(vec![doc! {"x": 2}, doc! {"x": 1}, doc! {"y": 3}]),
        ),
        (
            Bson::from(doc! {"$firstN": {"input": "$arr", "n": 2}}),
            b(vec![1, 2]),
        ),
        (
            Bson::from(doc! {"$lastN": {"input": "$arr", "n": 2}}),
            b(vec![2, 3]),
        ),
        (
            Bson::from(doc! {"$maxN": {"input": [1, null, 5, 3], "n": 2}}),
            b(vec![5, 3]),
        ),
        (
            Bson::from(doc! {"$minN": {"input": [4, 1, 5], "n": 1}}),
            b(vec![1]),
        ),
        (
            Bson::from(doc! {"$stdDevPop": [[2, 4, 4, 4, 5, 5, 7, 9]]}),
            b(2.0),
        ),
        (Bson::from(doc! {"$bitAnd": [12, 10]}), b(8)),
        (Bson::from(doc! {"$bitOr": [12, 10_i64]}), b(14_i64)),
        (Bson::from(doc! {"$bitNot": 0}), b(-1)),
        (Bson::from(doc! {"$cos": 0}), b(1.0)),
        (
            Bson::from(doc! {"$radiansToDegrees": std::f64::consts::PI}),
            b(180.0),
        ),
        (
            Bson::from(doc! {"$setField": {"field": "n", "input": "$o.p", "value": 1}}),
            b(doc! {"q": 7, "n": 1}),
        ),
        (
            Bson::from(doc! {"$unsetField": {"field": "q", "input": "$o.p"}}),
            b(doc! {}),
        ),
        (Bson::from(doc! {"$bsonSize": {"$literal": {}}}), b(5)),
        (Bson::from(doc! {"$binarySize": "abc"}), b(3)),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$setUnion": [[1], 2]}),
            17043,
            "All operands of $setUnion must be arrays",
        ),
        (
            Bson::from(doc! {"$indexOfArray": [1, 2]}),
            40090,
            "$indexOfArray requires an array as a first argument",
        ),
        (
            Bson::from(doc! {"$firstN": {"input": "$arr", "n": 0}}),
            5787908,
            "Value for 'n' must be a positive integral value",
        ),
        (
            Bson::from(doc! {"$asin": 2}),
            50989,
            "cannot apply $asin to 2",
        ),
        (
            Bson::from(doc! {"$sortArray": {"input": [1], "sortBy": 2}}),
            2942505,
            "requires 'sortBy'",
        ),
    ]);
}

#[test]
fn date_parts_and_parsing() {
    check(vec![
        (
            Bson::from(doc! {"$dateToParts": {"date": "$d"}}),
            b(
                doc! {"year": 2012, "month": 4, "day": 22, "hour": 1, "minute": 9, "second": 53, "millisecond": 123},
            ),
        ),
        (
            Bson::from(doc! {"$dateToParts": {"date": "$d", "iso8601": true}}),
            b(
                doc! {"isoWeekYear": 2012, "isoWeek": 16, "isoDayOfWeek": 7, "hour": 1, "minute": 9, "second": 53, "millisecond": 123},
            ),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": "2012-04-22T01:09:53.123Z"}}),
            b(DateTime::from_millis(1_335_056_993_123)),
        ),
        (
            Bson::from(
                doc! {"$dateFromString": {"dateString": "2012-04-22T03:09:53", "timezone": "+02:00"}},
            ),
            b(DateTime::from_millis(1_335_056_993_000)),
        ),
        (
            Bson::from(
                doc! {"$dateFromString": {"dateString": "22/04/2012 01:09", "format": "%d/%m/%Y %H:%M"}},
            ),
            b(DateTime::from_millis(1_335_056_940_000)),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": "nope", "onError": "bad"}}),
            b("bad"),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": "$nothing", "onNull": "none"}}),
            b("none"),
        ),
    ]);
    check_err(vec![(
        Bson::from(doc! {"$dateFromString": {"dateString": "nope"}}),
        241,
        "Error parsing date string 'nope'",
    )]);
    let r = eval_doc(Bson::from(doc! {"$rand": {}})).unwrap();
    assert!(matches!(r, Some(Bson::Double(x)) if (0.0..1.0).contains(&x)));
    assert_ne!(
        eval_doc(Bson::from(doc! {"$rand": {}})).unwrap(),
        eval_doc(Bson::from(doc! {"$rand": {}})).unwrap()
    );
}

#[test]
fn deep_nesting_is_rejected_not_overflowed() {
    let mut v = Bson::Int32(1);
    for _ in 0..1_000 {
        v = Bson::Document(doc! {"$abs": v});
    }
    let e = Expr::parse(&v).unwrap_err();
    assert_eq!(e.code, ErrorCode::Overflow);
    let mut ok = Bson::Int32(-1);
    for _ in 0..50 {
        ok = Bson::Document(doc! {"$abs": ok});
    }
    assert!(Expr::parse(&ok).is_ok());
}

#[test]
fn oversized_strings_are_refused() {
    let big = "x".repeat(9 * 1024 * 1024);
    check_err(vec![
        (
            Bson::from(doc! {"$concat": [big.clone(), big]}),
            16493,
            "string from $concat is too long",
        ),
        (
            Bson::from(
                doc! {"$replaceAll": {"input": "y".repeat(1000), "find": "", "replacement": "z".repeat(20_000)}},
            ),
            16493,
            "string from $replaceAll is too long",
        ),
    ]);
}

#[test]
fn function_runs_javascript() {
    check(vec![
        (
            bson::bson!({"$function": {"body": "function(a, s) { return a * 2 + s.length }", "args": ["$a", "$s"], "lang": "js"}}),
            Some(Bson::Double(21.0)),
        ),
        (
            bson::bson!({"$function": {"body": Bson::JavaScriptCode("function() { return NumberInt(3) }".into()), "args": [], "lang": "js"}}),
            Some(Bson::Int32(3)),
        ),
        (
            bson::bson!({"$function": {"body": "(o) => o.p.q", "args": ["$o"], "lang": "js"}}),
            Some(Bson::Double(7.0)),
        ),
    ]);
    let code = |e: Bson| eval_doc(e).unwrap_err().code.code();
    assert_eq!(code(bson::bson!({"$function": 1})), 31260);
    assert_eq!(
        code(bson::bson!({"$function": {"args": [], "lang": "js"}})),
        31261
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": 1, "args": [], "lang": "js"}})),
        31262
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "$s", "args": [], "lang": "js"}})),
        31432
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "function() {}", "lang": "js"}})),
        31263
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "function() {}", "args": []}})),
        31418
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "function() {}", "args": [], "lang": "py"}})),
        31419
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "function() {}", "args": "$a", "lang": "js"}})),
        31266
    );
    assert_eq!(
        code(bson::bson!({"$function": {"body": "function( {", "args": [], "lang": "js"}})),
        139
    );
    assert_eq!(
        code(
            bson::bson!({"$function": {"body": "function() { throw 1 }", "args": [], "lang": "js"}})
        ),
        139
    );
}

#[test]
fn median_and_percentile_expressions() {
    let pct = |input: Bson, p: Vec<f64>| -> Bson {
        Bson::from(doc! {"$percentile": {"input": input, "p": p, "method": "approximate"}})
    };
    let med = |input: Bson| -> Bson {
        Bson::from(doc! {"$median": {"input": input, "method": "approximate"}})
    };
    check(vec![
        // An array's numbers, the accumulators' discrete percentiles.
        (med(Bson::from("$arr")), b(2.0)),
        (
            pct(Bson::from("$arr"), vec![0.0, 0.5, 0.9, 1.0]),
            b(vec![1.0, 2.0, 3.0, 3.0]),
        ),
        (
            med(Bson::from(vec![
                Bson::Int32(4),
                Bson::Int32(1),
                Bson::Int32(3),
                Bson::Int32(2),
            ])),
            b(2.0),
        ),
        // Non-numbers are ignored; decimals count as doubles.
        (
            med(Bson::from(vec![
                Bson::from("x"),
                Bson::Null,
                Bson::Int64(7),
            ])),
            b(7.0),
        ),
        (
            med(Bson::from(vec![Bson::Decimal128(
                "2.5".parse().unwrap_or_else(|_| unreachable!()),
            )])),
            b(2.5),
        ),
        // A single number is its own percentile; nothing numeric gives null.
        (med(Bson::from("$a")), b(5.0)),
        (pct(Bson::from("$b"), vec![0.1, 0.9]), b(vec![2.5, 2.5])),
        (med(Bson::from("$s")), b(Bson::Null)),
        (med(Bson::from("$missing")), b(Bson::Null)),
        (
            pct(Bson::from("$n"), vec![0.5, 1.0]),
            b(vec![Bson::Null, Bson::Null]),
        ),
        (
            pct(Bson::from(Vec::<Bson>::new()), vec![0.5]),
            b(vec![Bson::Null]),
        ),
        // The input is an expression.
        (
            med(Bson::from(
                doc! {"$map": {"input": "$arr", "in": {"$multiply": ["$$this", 10]}}},
            )),
            b(20.0),
        ),
    ]);
    check_err(vec![
        (
            Bson::from(doc! {"$median": {"input": "$arr"}}),
            40414,
            "BSON field '$median.method' is missing but a required field",
        ),
        (
            Bson::from(doc! {"$percentile": {"input": "$arr", "method": "approximate"}}),
            40414,
            "BSON field '$percentile.p' is missing",
        ),
        (
            Bson::from(doc! {"$median": {"input": "$arr", "method": "continuous"}}),
            2,
            "Currently only 'approximate' can be used as percentile 'method'",
        ),
        (
            Bson::from(
                doc! {"$percentile": {"input": "$arr", "p": [1.5], "method": "approximate"}},
            ),
            7750301,
            "must be an array of numbers from [0.0, 1.0]",
        ),
        (
            Bson::from(doc! {"$percentile": {"input": "$arr", "p": 0.5, "method": "approximate"}}),
            7750301,
            "must be an array of numbers from [0.0, 1.0]",
        ),
        (
            Bson::from(doc! {"$median": {"input": "$arr", "method": "approximate", "x": 1}}),
            5787901,
            "Unknown argument to $median 'x'",
        ),
        (
            Bson::from(doc! {"$median": "$arr"}),
            5787801,
            "specification must be an object",
        ),
        (
            Bson::from(doc! {"$sampleRate": 0.5}),
            168,
            "Unrecognized expression '$sampleRate'",
        ),
    ]);
}

#[test]
fn to_hashed_index_key() {
    check(vec![
        (
            Bson::from(doc! {"$toHashedIndexKey": "string to hash"}),
            b(763_543_691_661_428_748_i64),
        ),
        // Missing hashes as null; 5 and 5.5 as the integer 5.
        (
            Bson::from(doc! {"$toHashedIndexKey": "$nope"}),
            b(hashed::hash64(&Bson::Null)),
        ),
        (
            Bson::from(doc! {"$toHashedIndexKey": 5.5}),
            b(hashed::hash64(&Bson::Int32(5))),
        ),
        (
            Bson::from(doc! {"$toHashedIndexKey": "$a"}),
            b(hashed::hash64(&Bson::Int64(5))),
        ),
        // The operand as a whole: an array is hashed, not unwrapped.
        (
            Bson::from(doc! {"$toHashedIndexKey": [1, 2]}),
            b(hashed::hash64(&Bson::from(vec![
                Bson::Int32(1),
                Bson::Int32(2),
            ]))),
        ),
        (
            Bson::from(doc! {"$toHashedIndexKey": ["$a"]}),
            b(hashed::hash64(&Bson::from(vec![Bson::Int32(5)]))),
        ),
    ]);
}

#[test]
fn meta_without_metadata_is_missing() {
    for m in [
        "randVal",
        "searchScore",
        "searchHighlights",
        "searchScoreDetails",
        "searchSequenceToken",
        "vectorSearchScore",
    ] {
        assert_eq!(
            eval_doc(Bson::from(doc! {"$meta": m})).unwrap(),
            None,
            "{m}"
        );
    }
    for m in ["indexKey", "recordId", "geoNearDistance", "geoNearPoint"] {
        let e = eval_doc(Bson::from(doc! {"$meta": m})).unwrap_err();
        assert_eq!(e.code.code(), 238, "{m}");
    }
}

/// The errors and null results the date, string and arithmetic operators
/// share helpers for keep each operator's code and wording.
#[test]
fn shared_operator_helpers() {
    check_err(vec![
        (
            Bson::from(doc! {"$dateToString": {"date": "$$NOW", "format": 1}}),
            18533,
            "$dateToString requires that 'format' be a string, found: int with value 1",
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": "2020-01-01", "format": 1}}),
            40684,
            "$dateFromString requires that 'format' be a string, found: int with value 1",
        ),
        (
            Bson::from(doc! {"$dateToString": {"date": "x"}}),
            16006,
            "can't convert from BSON type string to Date",
        ),
        (
            Bson::from(doc! {"$dateToParts": {"date": 1}}),
            16006,
            "can't convert from BSON type int to Date",
        ),
        (
            Bson::from(doc! {"$dateFromParts": {"year": 2020, "hour": "x"}}),
            40515,
            "'hour' must evaluate to an integer, found string with value \"x\"",
        ),
        (
            Bson::from(doc! {"$dateFromParts": {"isoWeekYear": 2020, "isoDayOfWeek": 1.5}}),
            40515,
            "'isoDayOfWeek' must evaluate to an integer",
        ),
        (
            Bson::from(doc! {"$indexOfBytes": [1, "a"]}),
            40091,
            "$indexOfBytes requires a string as the first argument, found: int",
        ),
        (
            Bson::from(doc! {"$indexOfBytes": ["a", 1]}),
            40092,
            "$indexOfBytes requires a string as the second argument, found: int",
        ),
        (
            Bson::from(doc! {"$indexOfCP": [1, "a"]}),
            40093,
            "$indexOfCP requires a string as the first argument, found: int",
        ),
        (
            Bson::from(doc! {"$indexOfCP": ["a", null]}),
            40094,
            "$indexOfCP requires a string as the second argument, found: null",
        ),
        (
            Bson::from(doc! {"$log10": 0}),
            28761,
            "$log10's argument must be a positive number, but is 0",
        ),
        (
            Bson::from(doc! {"$ln": -1.5}),
            28766,
            "$ln's argument must be a positive number, but is -1.5",
        ),
        (
            Bson::from(doc! {"$mod": [Bson::Decimal128("1".parse().unwrap()), 0]}),
            16610,
            "can't $mod by zero",
        ),
        (
            Bson::from(doc! {"$divide": [1, Bson::Decimal128("0".parse().unwrap())]}),
            16608,
            "can't $divide by zero",
        ),
    ]);
    check(vec![
        (
            Bson::from(doc! {"$dateToString": {"date": "$$NOW", "format": null}}),
            b(Bson::Null),
        ),
        (
            Bson::from(doc! {"$dateToString": {"date": null, "onNull": "none"}}),
            b("none"),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": null, "onNull": "none"}}),
            b("none"),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": 1, "onError": "bad"}}),
            b("bad"),
        ),
        (
            Bson::from(doc! {"$dateFromString": {"dateString": "x", "onError": "bad"}}),
            b("bad"),
        ),
        (
            Bson::from(doc! {"$indexOfBytes": [null, "a"]}),
            b(Bson::Null),
        ),
        (Bson::from(doc! {"$indexOfCP": ["héllo", "l", 3]}), b(3)),
        (Bson::from(doc! {"$indexOfBytes": ["héllo", "l", 4]}), b(4)),
        (Bson::from(doc! {"$indexOfCP": ["abc", "", 5]}), b(-1)),
        (Bson::from(doc! {"$sqrt": null}), b(Bson::Null)),
        (Bson::from(doc! {"$sin": "$missing"}), b(Bson::Null)),
        (Bson::from(doc! {"$mod": [7, 4]}), b(3)),
        (Bson::from(doc! {"$divide": [7, 2]}), b(3.5)),
    ]);
}
