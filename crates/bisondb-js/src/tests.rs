//! Unit tests: conversion, truthiness, the accepted source forms, errors, and
//! the deadline interrupting a busy loop and `sleep`.

use std::time::{Duration, Instant};

use bson::{doc, rawdoc, DateTime, RawDocumentBuf};

use crate::{deadline, Predicate};

fn run(code: &str, doc: &RawDocumentBuf) -> bool {
    Predicate::compile(code)
        .and_then(|p| p.matches(doc))
        .unwrap_or_else(|e| panic!("{code}: {e:?}"))
}

fn err(code: &str, doc: &RawDocumentBuf) -> (i32, String) {
    match Predicate::compile(code).and_then(|p| p.matches(doc)) {
        Ok(b) => panic!("{code}: expected an error, got {b}"),
        Err(e) => (e.code.code(), e.message),
    }
}

#[test]
fn source_forms() {
    let d = rawdoc! {"x": 2};
    assert!(run("this.x < 3", &d));
    assert!(run("this.x < 3;", &d));
    assert!(run("return this.x == 2;", &d));
    assert!(run("function() { return this.x < 3 }", &d));
    assert!(run("  function () { return obj.x === 2; }  ", &d));
    assert!(run("var y = this.x * 2;\nreturn y == 4", &d));
    assert!(!run("this.x > 3", &d));
}

#[test]
fn truthiness_decides() {
    let d = rawdoc! {"x": 0, "s": "", "t": "a"};
    assert!(!run("this.x", &d));
    assert!(!run("this.s", &d));
    assert!(run("this.t", &d));
    assert!(!run("this.missing", &d));
    assert!(!run("null", &d));
    assert!(run("({})", &d));
    assert!(run("[]", &d));
    assert!(!run("NaN", &d));
    assert!(!run("function() {}", &d));
}

#[test]
fn conversion() {
    let oid = bson::oid::ObjectId::parse_str("5f1d7a3e9b1e8a1c2d3e4f50").unwrap();
    let d = RawDocumentBuf::try_from(&doc! {
        "i": 7, "l": 1i64 << 40, "d": 2.5, "s": "héllo", "b": true, "n": null,
        "arr": [1, "two", {"three": 3}], "o": {"p": {"q": 1}},
        "_id": oid, "when": DateTime::from_millis(86_400_000),
        "re": bson::Regex { pattern: bson::raw::CString::try_from("^a.c$").unwrap(), options: bson::raw::CString::try_from("i").unwrap() },
        "bin": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: b"foo".to_vec() },
        "ts": bson::Timestamp { time: 5, increment: 6 },
        "dec": "1.5".parse::<bson::Decimal128>().unwrap(),
        "min": bson::Bson::MinKey,
    })
    .unwrap();
    assert!(run("this.i === 7 && typeof this.i == 'number'", &d));
    assert!(run(
        "this.l == 1099511627776 && this.l > 5 && this.l instanceof NumberLong",
        &d
    ));
    assert!(run("this.l.toString() == 'NumberLong(1099511627776)'", &d));
    assert!(run(
        "this.d === 2.5 && this.s === 'héllo' && this.b === true && this.n === null",
        &d
    ));
    assert!(run(
        "Array.isArray(this.arr) && this.arr.length == 3 && this.arr[2].three == 3",
        &d
    ));
    assert!(run("this.o.p.q == 1", &d));
    assert!(run("this._id.str == '5f1d7a3e9b1e8a1c2d3e4f50'", &d));
    assert!(run(
        "this._id.toString() == 'ObjectId(\"5f1d7a3e9b1e8a1c2d3e4f50\")'",
        &d
    ));
    assert!(run(
        "this._id.equals(ObjectId('5f1d7a3e9b1e8a1c2d3e4f50'))",
        &d
    ));
    assert!(run(
        "this.when instanceof Date && this.when.getTime() == 86400000",
        &d
    ));
    assert!(run("this.re instanceof RegExp && this.re.test('ABC')", &d));
    assert!(run("this.bin.base64() == 'Zm9v' && this.bin.type == 0", &d));
    assert!(run("this.ts.t == 5 && this.ts.i == 6", &d));
    assert!(run("this.dec.toString() == 'NumberDecimal(\"1.5\")'", &d));
    assert!(run("this.min === MinKey", &d));
}

#[test]
fn errors_are_js_interpreter_failure() {
    let d = rawdoc! {"x": 1};
    let (code, msg) = err("throw new Error('boom')", &d);
    assert_eq!(code, 139);
    assert_eq!(msg, "Error: boom");
    let (code, msg) = err("return nosuch.y", &d);
    assert_eq!(code, 139);
    assert!(msg.starts_with("ReferenceError"), "{msg}");
    let (code, msg) = err("this.x <", &d);
    assert_eq!(code, 139);
    assert!(msg.starts_with("SyntaxError"), "{msg}");
    let (code, msg) = err("throw 3", &d);
    assert_eq!((code, msg.as_str()), (139, "uncaught exception: 3"));
}

#[test]
fn a_predicate_runs_on_another_thread() {
    let p = Predicate::compile("this.x == 1").unwrap();
    let d = rawdoc! {"x": 1};
    let handle = std::thread::spawn(move || p.matches(&d));
    assert!(handle.join().unwrap().unwrap());
}

#[test]
fn deadline_interrupts_a_busy_loop() {
    let d = rawdoc! {"x": 1};
    let p = Predicate::compile("while (true) {}").unwrap();
    let started = Instant::now();
    let _guard = deadline::scope(Some(Instant::now() + Duration::from_millis(100)));
    let e = p.matches(&d).unwrap_err();
    assert_eq!(e.code.code(), 50);
    assert!(started.elapsed() < Duration::from_secs(5));
}

#[test]
fn deadline_wakes_sleep_even_when_caught() {
    let d = rawdoc! {"x": 1};
    let p = Predicate::compile("try { sleep(10000) } catch (e) {} return true").unwrap();
    let started = Instant::now();
    let e = {
        let _guard = deadline::scope_ms(100);
        p.matches(&d).unwrap_err()
    };
    assert_eq!(e.code.code(), 50);
    assert!(started.elapsed() < Duration::from_secs(2));
    // The guard lifted the deadline again.
    assert!(deadline::current().is_none());
    let quick = Predicate::compile("sleep(5); return true").unwrap();
    assert!(quick.matches(&d).unwrap());
}

#[test]
fn nested_scopes_keep_the_earlier_deadline() {
    let outer = deadline::scope_ms(50);
    let first = deadline::current();
    {
        let _inner = deadline::scope_ms(60_000);
        assert_eq!(deadline::current(), first);
    }
    drop(outer);
    assert_eq!(deadline::current(), None);
}

#[test]
fn function_bodies_take_arguments_and_return_bson() {
    use bson::Bson;
    let call = |body: &str, args: Vec<Bson>| {
        crate::call_function(body, &args).unwrap_or_else(|e| panic!("{body}: {e:?}"))
    };
    assert_eq!(
        call(
            "function(a, b) { return a + b }",
            vec![Bson::Int32(2), Bson::Double(0.5)]
        ),
        Bson::Double(2.5)
    );
    assert_eq!(
        call("(s) => s.toUpperCase()", vec![Bson::String("abc".into())]),
        Bson::String("ABC".into())
    );
    assert_eq!(
        call("function() { return NumberInt(7) }", vec![]),
        Bson::Int32(7)
    );
    assert_eq!(
        call("function(n) { return n }", vec![Bson::Int64(1 << 40)]),
        Bson::Int64(1 << 40)
    );
    assert_eq!(call("function() {}", vec![]), Bson::Null);
    assert_eq!(
        call("function() { return true }", vec![]),
        Bson::Boolean(true)
    );
    let oid = bson::oid::ObjectId::new();
    assert_eq!(
        call("function(o) { return o }", vec![Bson::ObjectId(oid)]),
        Bson::ObjectId(oid)
    );
    let when = DateTime::from_millis(1_600_000_000_123);
    assert_eq!(
        call(
            "function(d) { return new Date(d.getTime()) }",
            vec![Bson::DateTime(when)]
        ),
        Bson::DateTime(when)
    );
    assert_eq!(
        call("function(d) { return {n: d.x * 2, list: [1, 'a', null], nested: {ok: true}, f: function() {}} }", vec![Bson::Document(doc! {"x": 4})]),
        Bson::Document(doc! {"n": 8.0, "list": [1.0, "a", Bson::Null], "nested": {"ok": true}})
    );
    let bin = Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: vec![0, 1, 2, 250],
    });
    assert_eq!(call("function(b) { return b }", vec![bin.clone()]), bin);
    let dec = Bson::Decimal128("12.50".parse().unwrap());
    assert_eq!(call("function(d) { return d }", vec![dec.clone()]), dec);
    let re = call("function() { return /a+b/i }", vec![]);
    assert!(
        matches!(&re, Bson::RegularExpression(r) if r.pattern.as_str() == "a+b" && r.options.as_str() == "i"),
        "{re:?}"
    );
}

#[test]
fn function_errors() {
    let e = crate::call_function("function() { throw new TypeError('nope') }", &[]).unwrap_err();
    assert_eq!(
        (e.code.code(), e.message.as_str()),
        (139, "TypeError: nope")
    );
    let e = crate::check_function("function( {").unwrap_err();
    assert_eq!(e.code.code(), 139);
    let e = crate::call_function("42", &[]).unwrap_err();
    assert_eq!(e.code.code(), 139);
    let e =
        crate::call_function("function() { var o = {}; o.self = o; return o }", &[]).unwrap_err();
    assert_eq!(e.code.code(), 139);
    let e = {
        let _guard = deadline::scope_ms(50);
        crate::call_function("function() { for (;;) {} }", &[]).unwrap_err()
    };
    assert_eq!(e.code.code(), 50);
}

#[test]
fn runaway_recursion_is_an_error_not_a_crash() {
    // Server threads have 2 MiB stacks; the engine's limit must trip first.
    let handle = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(|| {
            let p = Predicate::compile("var f = function(n) { return f(n + 1) + 1 }; return f(0)")?;
            p.matches(&rawdoc! {"x": 1})
        })
        .unwrap();
    let e = handle.join().unwrap().unwrap_err();
    assert_eq!(e.code.code(), 139);
    assert!(e.message.contains("stack"), "{}", e.message);
}

mod map_reduce {
    use bson::{doc, rawdoc, Bson};

    use crate::mapreduce::MapReduce;

    #[test]
    fn map_reduce_finalize_and_scope() {
        let scope = rawdoc! {
            "factor": 10,
            "twice": bson::RawBson::JavaScriptCode("function (x) { return 2 * x; }".into()),
        };
        let mr = MapReduce::new(
            "function () { for (var i = 0; i < this.tags.length; i++) emit(this.tags[i], twice(this.n)); }",
            "function (k, vals) { return Array.sum(vals) * factor; }",
            Some("(k, v) => ({k: k, v: v})"),
            Some(&scope),
        )
        .unwrap();
        let emitted = mr.map(&rawdoc! {"tags": ["a", "b"], "n": 3}).unwrap();
        assert_eq!(
            emitted,
            vec![
                (Bson::String("a".into()), Bson::Double(6.0)),
                (Bson::String("b".into()), Bson::Double(6.0))
            ]
        );
        let key = Bson::String("a".into());
        let reduced = mr
            .reduce(&key, vec![Bson::Double(1.0), Bson::Int32(2)])
            .unwrap();
        assert_eq!(reduced, Bson::Double(30.0));
        assert_eq!(
            mr.finalize(&key, reduced).unwrap(),
            Bson::Document(doc! {"k": "a", "v": 30.0})
        );
        // An undefined key is null; emit from reduce is ignored (as mongod).
        let mr = MapReduce::new(
            "function () { emit(this.missing, 1); }",
            "function (k, v) { emit(k, 2); return v.length; }",
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            mr.map(&rawdoc! {}).unwrap(),
            vec![(Bson::Null, Bson::Double(1.0))]
        );
        assert_eq!(
            mr.reduce(&Bson::Null, vec![Bson::Null]).unwrap(),
            Bson::Double(1.0)
        );
        // Globals stay in the command's own context.
        assert!(crate::Predicate::compile("typeof factor === 'undefined'")
            .and_then(|p| p.matches(&rawdoc! {}))
            .unwrap());
    }

    #[test]
    fn a_scope_field_named_emit_leaves_emit_alone() {
        let scope = rawdoc! {"emit": 1};
        let mr = MapReduce::new(
            "function () { emit(1, 2); }",
            "function () {}",
            None,
            Some(&scope),
        )
        .unwrap();
        assert_eq!(
            mr.map(&rawdoc! {}).unwrap(),
            vec![(Bson::Double(1.0), Bson::Double(2.0))]
        );
    }

    #[test]
    fn errors_keep_mongod_codes() {
        let mr = MapReduce::new("function () { emit(1); }", "function () {}", None, None).unwrap();
        let e = mr.map(&rawdoc! {}).unwrap_err();
        assert_eq!(
            (e.code.code(), e.message.as_str()),
            (31220, "emit takes 2 args")
        );
        let mr = MapReduce::new(
            "function () { throw new Error('boom'); }",
            "function () {}",
            None,
            None,
        )
        .unwrap();
        let e = mr.map(&rawdoc! {}).unwrap_err();
        assert_eq!((e.code.code(), e.message.as_str()), (139, "Error: boom"));
        let e = MapReduce::new("function ( {", "function () {}", None, None)
            .err()
            .unwrap();
        assert_eq!(e.code.code(), 139);
    }

    #[test]
    fn deadline_stops_map() {
        let mr = MapReduce::new(
            "function () { while (true) {} }",
            "function () {}",
            None,
            None,
        )
        .unwrap();
        let _g = crate::deadline::scope_ms(50);
        let e = mr.map(&rawdoc! {}).unwrap_err();
        assert_eq!(e.code.code(), 50);
    }
}
