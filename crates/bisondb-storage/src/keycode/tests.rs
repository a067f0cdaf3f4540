//! The encoding is checked against an independent reference comparator: type
//! rank, then value, with numbers compared through their exact decimal
//! expansions (Rust prints any double exactly given enough digits; bson prints
//! Decimal128 exactly), so it shares no code with the binary placement above.

use super::*;
use bson::oid::ObjectId;
use bson::raw::CString;
use bson::spec::BinarySubtype;
use bson::{Binary, Bson, DateTime, Document, JavaScriptCodeWithScope, Regex, Timestamp};
use proptest::prelude::*;
use std::cmp::Ordering;
use std::str::FromStr;

fn enc(v: &Bson) -> Vec<u8> {
    let mut holder = Document::new();
    holder.insert("v", v.clone());
    let raw = bson::RawDocumentBuf::try_from(&holder).unwrap_or_default();
    let mut out = Vec::new();
    if let Ok(Some(value)) = raw.get("v") {
        encode_value(value, &mut out);
    }
    out
}

fn dec(s: &str) -> Bson {
    Bson::Decimal128(
        Decimal128::from_str(s).unwrap_or_else(|e| panic!("bad decimal literal {s}: {e}")),
    )
}

fn rank(b: &Bson) -> u8 {
    match b {
        Bson::MinKey => 0,
        Bson::Undefined => 1,
        Bson::Null => 2,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_) => 3,
        Bson::String(_) | Bson::Symbol(_) => 4,
        Bson::Document(_) => 5,
        Bson::Array(_) => 6,
        Bson::Binary(_) => 7,
        Bson::ObjectId(_) => 8,
        Bson::Boolean(_) => 9,
        Bson::DateTime(_) => 10,
        Bson::Timestamp(_) => 11,
        Bson::RegularExpression(_) => 12,
        Bson::DbPointer(_) => 13,
        Bson::JavaScriptCode(_) => 14,
        Bson::JavaScriptCodeWithScope(_) => 15,
        Bson::MaxKey => 16,
    }
}

/// A number as an exact decimal: `0.digits × 10^exp`, no leading or trailing
/// zero digits (zero has none).
#[derive(Debug, PartialEq, Eq)]
enum Exact {
    NaN,
    NegInf,
    Finite {
        negative: bool,
        digits: Vec<u8>,
        exp: i64,
    },
    PosInf,
}

fn parse_exact(s: &str) -> Exact {
    let (negative, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    match body {
        "NaN" => return Exact::NaN,
        "Infinity" | "inf" => {
            return if negative {
                Exact::NegInf
            } else {
                Exact::PosInf
            }
        }
        _ => {}
    }
    let (mantissa, exp10) = match body.find(['e', 'E']) {
        Some(p) => (
            &body[..p],
            body[p + 1..]
                .trim_start_matches('+')
                .parse::<i64>()
                .unwrap_or(0),
        ),
        None => (body, 0),
    };
    let (int_part, frac_part) = mantissa.split_once('.').unwrap_or((mantissa, ""));
    let mut digits: Vec<u8> = int_part
        .bytes()
        .chain(frac_part.bytes())
        .map(|b| b - b'0')
        .collect();
    // value = 0.digits × 10^(len(int_part) + exp10)
    let mut exp = int_part.len() as i64 + exp10;
    while digits.first() == Some(&0) {
        digits.remove(0);
        exp -= 1;
    }
    while digits.last() == Some(&0) {
        digits.pop();
    }
    if digits.is_empty() {
        return Exact::Finite {
            negative: false,
            digits,
            exp: 0,
        };
    }
    Exact::Finite {
        negative,
        digits,
        exp,
    }
}

fn exact(b: &Bson) -> Exact {
    match b {
        Bson::Int32(i) => parse_exact(&i.to_string()),
        Bson::Int64(i) => parse_exact(&i.to_string()),
        Bson::Double(d) if d.is_nan() => Exact::NaN,
        Bson::Double(d) if d.is_infinite() => parse_exact(&d.to_string()),
        Bson::Double(d) => parse_exact(&format!("{d:.800e}")),
        Bson::Decimal128(d) => parse_exact(&d.to_string()),
        other => panic!("not a number: {other:?}"),
    }
}

fn cmp_exact(a: &Exact, b: &Exact) -> Ordering {
    fn class(e: &Exact) -> u8 {
        match e {
            Exact::NaN => 0,
            Exact::NegInf => 1,
            Exact::Finite { negative: true, .. } => 2,
            Exact::Finite { digits, .. } if digits.is_empty() => 3,
            Exact::Finite { .. } => 4,
            Exact::PosInf => 5,
        }
    }
    match (a, b) {
        (
            Exact::Finite {
                negative: n1,
                digits: d1,
                exp: e1,
            },
            Exact::Finite {
                negative: n2,
                digits: d2,
                exp: e2,
            },
        ) if class(a) == class(b) && !d1.is_empty() => {
            let magnitude = e1.cmp(e2).then_with(|| d1.cmp(d2));
            if *n1 && *n2 {
                magnitude.reverse()
            } else {
                magnitude
            }
        }
        _ => class(a).cmp(&class(b)),
    }
}

fn cmp_doc(a: &Document, b: &Document) -> Ordering {
    for ((k1, v1), (k2, v2)) in a.iter().zip(b.iter()) {
        let o = rank(v1)
            .cmp(&rank(v2))
            .then_with(|| k1.as_bytes().cmp(k2.as_bytes()))
            .then_with(|| cmp_bson(v1, v2));
        if o != Ordering::Equal {
            return o;
        }
    }
    a.len().cmp(&b.len())
}

fn cmp_bson(a: &Bson, b: &Bson) -> Ordering {
    rank(a).cmp(&rank(b)).then_with(|| match (a, b) {
        (Bson::String(x) | Bson::Symbol(x), Bson::String(y) | Bson::Symbol(y)) => {
            x.as_bytes().cmp(y.as_bytes())
        }
        (Bson::Document(x), Bson::Document(y)) => cmp_doc(x, y),
        (Bson::Array(x), Bson::Array(y)) => {
            for (v1, v2) in x.iter().zip(y.iter()) {
                let o = cmp_bson(v1, v2);
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (Bson::Binary(x), Bson::Binary(y)) => x
            .bytes
            .len()
            .cmp(&y.bytes.len())
            .then_with(|| u8::from(x.subtype).cmp(&u8::from(y.subtype)))
            .then_with(|| x.bytes.cmp(&y.bytes)),
        (Bson::ObjectId(x), Bson::ObjectId(y)) => x.bytes().cmp(&y.bytes()),
        (Bson::Boolean(x), Bson::Boolean(y)) => x.cmp(y),
        (Bson::DateTime(x), Bson::DateTime(y)) => x.timestamp_millis().cmp(&y.timestamp_millis()),
        (Bson::Timestamp(x), Bson::Timestamp(y)) => {
            (x.time, x.increment).cmp(&(y.time, y.increment))
        }
        (Bson::RegularExpression(x), Bson::RegularExpression(y)) => x
            .pattern
            .as_str()
            .cmp(y.pattern.as_str())
            .then_with(|| x.options.as_str().cmp(y.options.as_str())),
        (Bson::JavaScriptCode(x), Bson::JavaScriptCode(y)) => x.as_bytes().cmp(y.as_bytes()),
        (Bson::JavaScriptCodeWithScope(x), Bson::JavaScriptCodeWithScope(y)) => x
            .code
            .as_bytes()
            .cmp(y.code.as_bytes())
            .then_with(|| cmp_doc(&x.scope, &y.scope)),
        _ if rank(a) == 3 => cmp_exact(&exact(a), &exact(b)),
        _ => Ordering::Equal,
    })
}

fn assert_consistent(a: &Bson, b: &Bson) {
    let want = cmp_bson(a, b);
    let (ea, eb) = (enc(a), enc(b));
    assert_eq!(
        ea.cmp(&eb),
        want,
        "a={a:?} b={b:?} ea={ea:02x?} eb={eb:02x?}"
    );
    if want == Ordering::Equal {
        assert_eq!(ea, eb, "equal values must encode identically: {a:?} {b:?}");
    }
}

/// Numbers that collide or nearly collide across types.
fn number_pool() -> Vec<Bson> {
    let two53 = 9_007_199_254_740_992i64;
    vec![
        Bson::Int32(0),
        Bson::Int64(0),
        Bson::Double(0.0),
        Bson::Double(-0.0),
        dec("0"),
        dec("-0"),
        dec("0E+10"),
        dec("-0E-30"),
        Bson::Int32(1),
        Bson::Int64(1),
        Bson::Double(1.0),
        dec("1"),
        dec("1.0"),
        dec("1.000"),
        dec("10E-1"),
        dec("1.000000000000000000000000000000001"),
        dec("0.9999999999999999999999999999999999"),
        Bson::Double(1.0 + f64::EPSILON),
        Bson::Double(1.0 - f64::EPSILON / 2.0),
        Bson::Int32(-1),
        Bson::Double(-1.0),
        dec("-1"),
        Bson::Double(0.5),
        dec("0.5"),
        dec("5E-1"),
        Bson::Double(0.1),
        dec("0.1"),
        dec("0.1000000000000000055511151231257827"),
        dec("0.1000000000000000055511151231257828"),
        Bson::Double(-0.1),
        dec("-0.1"),
        Bson::Int64(two53),
        Bson::Double(two53 as f64),
        Bson::Int64(two53 + 1),
        dec("9007199254740993"),
        Bson::Double((two53 + 2) as f64),
        Bson::Int64(i64::MAX),
        Bson::Int64(i64::MAX - 1),
        Bson::Double(9_223_372_036_854_775_808.0),
        dec("9223372036854775807"),
        dec("9223372036854775808"),
        Bson::Int64(i64::MIN),
        Bson::Double(-9_223_372_036_854_775_808.0),
        dec("-9223372036854775808"),
        dec("-9223372036854775809"),
        Bson::Int32(i32::MAX),
        Bson::Int32(i32::MIN),
        Bson::Double(f64::NAN),
        Bson::Double(-f64::NAN),
        dec("NaN"),
        Bson::Double(f64::INFINITY),
        Bson::Double(f64::NEG_INFINITY),
        dec("Infinity"),
        dec("-Infinity"),
        Bson::Double(f64::MAX),
        Bson::Double(f64::MIN),
        Bson::Double(f64::MIN_POSITIVE),
        Bson::Double(5e-324),
        Bson::Double(-5e-324),
        dec("1E+6144"),
        dec("9.999999999999999999999999999999999E+6144"),
        dec("-9.999999999999999999999999999999999E+6144"),
        dec("1E-6176"),
        dec("-1E-6176"),
        dec("4.9E-324"),
        dec("5E-324"),
        Bson::Double(1e300),
        dec("1E+300"),
        Bson::Double(1e-300),
        dec("1E-300"),
        Bson::Double(2f64.powi(100)),
        dec("1267650600228229401496703205376"),
        dec("1267650600228229401496703205377"),
        Bson::Double(3.0),
        dec("3.00000000000000000000000000000000"),
        dec("2.999999999999999999999999999999999"),
    ]
}

#[test]
fn number_pool_is_consistent_pairwise() {
    let pool = number_pool();
    for a in &pool {
        for b in &pool {
            assert_consistent(a, b);
        }
    }
}

#[test]
fn equal_numbers_share_one_encoding() {
    let groups: Vec<Vec<Bson>> = vec![
        vec![
            Bson::Int32(1),
            Bson::Int64(1),
            Bson::Double(1.0),
            dec("1"),
            dec("1.00"),
            dec("0.001E+3"),
        ],
        vec![
            Bson::Int32(0),
            Bson::Double(-0.0),
            dec("-0"),
            dec("0E-6176"),
        ],
        vec![Bson::Double(f64::NAN), dec("NaN"), dec("-NaN")],
        vec![
            Bson::Int64(i64::MIN),
            Bson::Double(-9_223_372_036_854_775_808.0),
            dec("-9223372036854775808"),
        ],
        vec![Bson::Double(0.5), dec("0.5000")],
        vec![Bson::Double(f64::INFINITY), dec("Infinity")],
    ];
    for group in groups {
        let first = enc(&group[0]);
        for v in &group {
            assert_eq!(enc(v), first, "{v:?} vs {:?}", group[0]);
        }
    }
}

#[test]
fn mixed_type_order_follows_the_manual() {
    let oid = ObjectId::from_bytes([1; 12]);
    let ascending = vec![
        Bson::MinKey,
        Bson::Undefined,
        Bson::Null,
        Bson::Double(f64::NAN),
        Bson::Double(f64::NEG_INFINITY),
        Bson::Int64(-5),
        Bson::Int32(0),
        dec("0.25"),
        Bson::Int32(7),
        Bson::String(String::new()),
        Bson::Symbol("a".into()),
        Bson::String("a\0".into()),
        Bson::String("b".into()),
        Bson::Document(Document::new()),
        Bson::Document(bson::doc! {"a": 1}),
        Bson::Document(bson::doc! {"b": 0}),
        // The element's type decides before its name does.
        Bson::Document(bson::doc! {"a": "x"}),
        Bson::Array(vec![]),
        Bson::Array(vec![Bson::Int32(1)]),
        Bson::Array(vec![Bson::Int32(1), Bson::Null]),
        Bson::Binary(Binary {
            subtype: BinarySubtype::UserDefined(0x80),
            bytes: vec![],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![9],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Function,
            bytes: vec![0],
        }),
        Bson::Binary(Binary {
            subtype: BinarySubtype::Generic,
            bytes: vec![0, 0],
        }),
        Bson::ObjectId(oid),
        Bson::Boolean(false),
        Bson::Boolean(true),
        Bson::DateTime(DateTime::from_millis(i64::MIN)),
        Bson::DateTime(DateTime::from_millis(-1)),
        Bson::DateTime(DateTime::from_millis(0)),
        Bson::Timestamp(Timestamp {
            time: 0,
            increment: 5,
        }),
        Bson::Timestamp(Timestamp {
            time: 1,
            increment: 0,
        }),
        regex("a", ""),
        regex("a", "i"),
        regex("ab", ""),
        Bson::JavaScriptCode("x".into()),
        Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "x".into(),
            scope: bson::doc! {"a": 1},
        }),
        Bson::MaxKey,
    ];
    for (i, a) in ascending.iter().enumerate() {
        for (j, b) in ascending.iter().enumerate() {
            assert_eq!(enc(a).cmp(&enc(b)), i.cmp(&j), "{a:?} vs {b:?}");
            assert_consistent(a, b);
        }
    }
}

fn regex(pattern: &str, options: &str) -> Bson {
    Bson::RegularExpression(Regex {
        pattern: CString::try_from(pattern).unwrap_or_else(|_| panic!("pattern")),
        options: CString::try_from(options).unwrap_or_else(|_| panic!("options")),
    })
}

/// A document holding one DBPointer value, built by hand (bson keeps its parts private).
fn db_pointer_doc(ns: &str, oid_byte: u8) -> bson::RawDocumentBuf {
    let mut body = vec![0x0C, b'v', 0];
    body.extend_from_slice(&((ns.len() + 1) as i32).to_le_bytes());
    body.extend_from_slice(ns.as_bytes());
    body.push(0);
    body.extend_from_slice(&[oid_byte; 12]);
    let mut bytes = ((body.len() + 5) as i32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes.push(0);
    bson::RawDocumentBuf::from_bytes(bytes).unwrap_or_else(|e| panic!("hand-built DBPointer: {e}"))
}

#[test]
fn db_pointers_order_by_size_then_bytes() {
    let ascending = [
        db_pointer_doc("zz", 9),
        db_pointer_doc("aaa", 0),
        db_pointer_doc("aaa", 1),
        db_pointer_doc("b.c", 0),
    ];
    let keys: Vec<Vec<u8>> = ascending
        .iter()
        .map(|d| match d.get("v") {
            Ok(Some(v)) => encode_id(v),
            other => panic!("no value: {other:?}"),
        })
        .collect();
    for w in keys.windows(2) {
        assert!(w[0] < w[1], "{:02x?} !< {:02x?}", w[0], w[1]);
    }
    assert!(
        keys[0]
            > enc(&Bson::RegularExpression(Regex {
                pattern: CString::try_from("zzz").unwrap_or_else(|_| panic!()),
                options: CString::try_from("").unwrap_or_else(|_| panic!()),
            }))
    );
    assert!(keys[3] < enc(&Bson::JavaScriptCode(String::new())));
}

#[test]
fn fraction_code_is_prefix_free_and_ordered() {
    let cases: &[(u128, bool)] = &[
        (0, false),
        (0, true),
        (1, false),
        (1 << 127, false),
        (1 << 127, true),
        (u128::MAX, false),
        (u128::MAX, true),
    ];
    for &(f1, s1) in cases {
        for &(f2, s2) in cases {
            let (mut a, mut b) = (Vec::new(), Vec::new());
            encode_fraction(f1, s1, &mut a);
            encode_fraction(f2, s2, &mut b);
            assert_eq!(
                a.cmp(&b),
                (f1, s1).cmp(&(f2, s2)),
                "{f1:x}/{s1} vs {f2:x}/{s2}"
            );
            if a != b {
                assert!(
                    !b.starts_with(&a) && !a.starts_with(&b),
                    "codes must be prefix-free"
                );
            }
        }
    }
}

#[test]
fn strings_with_nuls_and_prefixes_order_bytewise() {
    let ascending = [
        "", "\0", "\0\0", "\0a", "a", "a\0", "a\0\0", "a\u{1}", "ab", "b", "é",
    ];
    for w in ascending.windows(2) {
        assert!(
            enc(&Bson::String(w[0].into())) < enc(&Bson::String(w[1].into())),
            "{:?} < {:?}",
            w[0],
            w[1]
        );
    }
    assert_eq!(
        enc(&Bson::Symbol("x".into())),
        enc(&Bson::String("x".into()))
    );
}

#[test]
fn nested_values_stay_self_delimiting() {
    // A longer first element must not spill into the comparison of the second.
    let a = Bson::Array(vec![Bson::String("a".into()), Bson::Int32(9)]);
    let b = Bson::Array(vec![Bson::String("ab".into()), Bson::Int32(0)]);
    assert_consistent(&a, &b);
    let c = Bson::Array(vec![Bson::Int32(-1), Bson::Int32(5)]);
    let d = Bson::Array(vec![Bson::Double(-1.5), Bson::Int32(0)]);
    assert_consistent(&c, &d);
    assert!(enc(&d) < enc(&c));
}

#[test]
fn reference_parser_reads_exact_forms() {
    let cases = [
        (
            "0",
            Exact::Finite {
                negative: false,
                digits: vec![],
                exp: 0,
            },
        ),
        (
            "-0.0",
            Exact::Finite {
                negative: false,
                digits: vec![],
                exp: 0,
            },
        ),
        (
            "12.50",
            Exact::Finite {
                negative: false,
                digits: vec![1, 2, 5],
                exp: 2,
            },
        ),
        (
            "-1.5E-3",
            Exact::Finite {
                negative: true,
                digits: vec![1, 5],
                exp: -2,
            },
        ),
        (
            "0.001",
            Exact::Finite {
                negative: false,
                digits: vec![1],
                exp: -2,
            },
        ),
        (
            "1e+2",
            Exact::Finite {
                negative: false,
                digits: vec![1],
                exp: 3,
            },
        ),
        ("-Infinity", Exact::NegInf),
        ("NaN", Exact::NaN),
    ];
    for (s, want) in cases {
        assert_eq!(parse_exact(s), want, "{s}");
    }
}

fn arb_number() -> impl Strategy<Value = Bson> {
    let pool = number_pool();
    prop_oneof![
        3 => proptest::sample::select(pool),
        1 => any::<i32>().prop_map(Bson::Int32),
        1 => any::<i64>().prop_map(Bson::Int64),
        1 => (-3i64..3).prop_map(Bson::Int64),
        2 => any::<f64>().prop_map(Bson::Double),
        1 => (-8i32..8).prop_map(|i| Bson::Double(f64::from(i) / 4.0)),
        2 => (any::<i64>(), -40i32..40).prop_map(|(c, e)| dec(&format!("{c}E{e}"))),
        1 => (-20i64..20, -3i32..3).prop_map(|(c, e)| dec(&format!("{c}E{e}"))),
        1 => (1u64..u64::MAX, 1u64..u64::MAX, -6176i32..6111)
            .prop_map(|(h, l, e)| dec(&format!("{}E{e}", (u128::from(h) * u128::from(l)) % 10u128.pow(34)))),
    ]
}

fn arb_leaf() -> impl Strategy<Value = Bson> {
    let text = || {
        proptest::collection::vec(
            proptest::sample::select(vec!['a', 'b', '\0', 'é', '\u{1}']),
            0..4,
        )
        .prop_map(|cs| cs.into_iter().collect::<String>())
    };
    let cstring = || {
        proptest::collection::vec(proptest::sample::select(vec!['a', 'b', 'i']), 0..3).prop_map(
            |cs| {
                CString::try_from(cs.into_iter().collect::<String>())
                    .unwrap_or_else(|_| panic!("no NUL"))
            },
        )
    };
    prop_oneof![
        6 => arb_number(),
        2 => text().prop_map(Bson::String),
        1 => text().prop_map(Bson::Symbol),
        1 => Just(Bson::Null),
        1 => Just(Bson::Undefined),
        1 => Just(Bson::MinKey),
        1 => Just(Bson::MaxKey),
        1 => any::<bool>().prop_map(Bson::Boolean),
        1 => (0u8..3, proptest::collection::vec(0u8..3, 0..3)).prop_map(|(s, bytes)| Bson::Binary(Binary {
            subtype: BinarySubtype::from([0x00, 0x01, 0x80][usize::from(s)]),
            bytes,
        })),
        1 => (0u8..3).prop_map(|b| Bson::ObjectId(ObjectId::from_bytes([b; 12]))),
        1 => prop_oneof![any::<i64>(), -2i64..2].prop_map(|m| Bson::DateTime(DateTime::from_millis(m))),
        1 => (0u32..3, 0u32..3).prop_map(|(time, increment)| Bson::Timestamp(Timestamp { time, increment })),
        1 => (cstring(), cstring()).prop_map(|(pattern, options)| Bson::RegularExpression(Regex { pattern, options })),
        1 => text().prop_map(Bson::JavaScriptCode),
        1 => (text(), 0i32..2).prop_map(|(code, a)| Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code,
            scope: bson::doc! {"a": a},
        })),
    ]
}

fn arb_bson() -> impl Strategy<Value = Bson> {
    arb_leaf().prop_recursive(3, 24, 4, |inner| {
        let name = proptest::sample::select(vec!["", "a", "b", "ab"]);
        prop_oneof![
            proptest::collection::vec(inner.clone(), 0..4).prop_map(Bson::Array),
            proptest::collection::vec((name, inner), 0..4).prop_map(|fields| {
                let mut d = Document::new();
                for (k, v) in fields {
                    d.insert(k, v);
                }
                Bson::Document(d)
            }),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn byte_order_equals_bson_order(a in arb_bson(), b in arb_bson()) {
        assert_consistent(&a, &b);
    }

    #[test]
    fn numbers_order_exactly(a in arb_number(), b in arb_number()) {
        assert_consistent(&a, &b);
    }
}

#[test]
fn hashed_key_is_stable_and_numeric_equality_blind() {
    use super::hashed_key;
    let h = |b: Bson| {
        let r = bson::RawBson::try_from(b).unwrap_or_else(|e| panic!("{e}"));
        hashed_key(r.as_raw_bson_ref())
    };
    assert_eq!(h(Bson::Int32(1)), h(Bson::Double(1.0)));
    assert_eq!(h(Bson::Int32(1)), h(Bson::Int64(1)));
    assert_ne!(h(Bson::Int32(1)), h(Bson::Int32(2)));
    assert_ne!(h(Bson::Int32(1)), h(Bson::String("1".into())));
    assert_eq!(h(Bson::Double(0.0)), h(Bson::Double(-0.0)));
    // Persisted in index entries: these values must never change.
    assert_eq!(h(Bson::Int32(1)), PINNED_ONE, "{}", h(Bson::Int32(1)));
    assert_eq!(h(Bson::Null), PINNED_NULL, "{}", h(Bson::Null));
}

const PINNED_ONE: i64 = -1405488821869430594;
const PINNED_NULL: i64 = -6238471690400515145;
