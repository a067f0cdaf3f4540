use bson::{doc, rawdoc};

use super::*;

fn plain() -> TokenOptions {
    TokenOptions {
        filter_stop_words: true,
        ..TokenOptions::default()
    }
}

#[test]
fn tokenizer_splits_folds_stems_and_drops_stop_words() {
    let cases: Vec<(&str, Language, Vec<&str>)> = vec![
        (
            "Spam eggs and SPAM",
            Language::English,
            vec!["spam", "egg", "spam"],
        ),
        (
            "running runs ran",
            Language::English,
            vec!["run", "run", "ran"],
        ),
        // The apostrophe is part of an English word; quotes and dashes split.
        (
            "o'clock \"quoted\" well-known",
            Language::English,
            vec!["o'clock", "quot", "well", "known"],
        ),
        // Not in other languages.
        ("o'clock", Language::French, vec!["o", "clock"]),
        ("l'arbre Élevé", Language::French, vec!["arbre", "elev"]),
        // Diacritics go after stemming; stop words are checked before.
        ("Café résumé", Language::English, vec!["cafe", "resume"]),
        ("the a of", Language::English, vec![]),
        // "none": no stemming, no stop words.
        ("the Running", Language::None, vec!["the", "running"]),
        ("Kinder spielen", Language::German, vec!["kind", "spiel"]),
        (
            "İstanbul IRMAK",
            Language::Turkish,
            vec!["istanbul", "ırmak"],
        ),
        (
            "a.b,c;d:e!f?g",
            Language::English,
            vec!["b", "c", "e", "f", "g"],
        ),
    ];
    for (text, lang, want) in cases {
        assert_eq!(tokenize(text, lang, plain()), want, "{text:?} in {lang:?}");
    }
    let sensitive = TokenOptions {
        filter_stop_words: false,
        case_sensitive: true,
        diacritic_sensitive: true,
    };
    assert_eq!(
        tokenize("The Café", Language::English, sensitive),
        vec!["The", "Café"]
    );
}

#[test]
fn languages_parse_as_mongod_names_them() {
    assert_eq!(Language::parse("english"), Some(Language::English));
    assert_eq!(Language::parse("en"), Some(Language::English));
    assert_eq!(Language::parse("nb"), Some(Language::Norwegian));
    assert_eq!(Language::parse("none"), Some(Language::None));
    assert_eq!(Language::parse("English"), None);
    assert_eq!(Language::parse("klingon"), None);
    let e = Language::unsupported("xx");
    assert_eq!(e.code.code(), 2);
    assert_eq!(
        e.message,
        "unsupported language: \"xx\" for text index version 3"
    );
}

#[test]
fn score_follows_term_frequency_length_and_weight() {
    let mut s = BTreeMap::new();
    score_string("spam", Language::English, 1.0, &mut s);
    // The whole string is the term: 1 * 1 * (0.5 + 0.5) * 1.1.
    assert!((s["spam"] - 1.1).abs() < 1e-12, "{s:?}");
    let mut s = BTreeMap::new();
    score_string("spam eggs and spam", Language::English, 1.0, &mut s);
    // 3 words after the stop word: spam twice (1 + 1/2) * (0.5*2/3 + 0.5).
    assert!((s["spam"] - 1.5 * (1.0 / 3.0 + 0.5)).abs() < 1e-12, "{s:?}");
    assert!((s["egg"] - (0.5 / 3.0 + 0.5)).abs() < 1e-12, "{s:?}");
    let mut s = BTreeMap::new();
    score_string("spam", Language::English, 10.0, &mut s);
    assert!((s["spam"] - 11.0).abs() < 1e-9, "{s:?}");
}

fn spec(key: Document, extra: Document) -> TextSpec {
    let mut full = doc! {"key": key};
    full.extend(extra);
    let (key, options) = fix_spec(&full).unwrap_or_else(|e| panic!("{e}"));
    TextSpec::from_stored(&key, &options).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn fix_spec_normalizes_like_mongod() {
    let (key, opts) = fix_spec(&doc! {"key": {"a": 1, "t": "text", "u": "text", "z": -1}})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(key, doc! {"a": 1, "_fts": "text", "_ftsx": 1, "z": -1});
    assert_eq!(
        opts,
        doc! {"weights": {"t": 1, "u": 1}, "default_language": "english",
        "language_override": "language", "textIndexVersion": 3}
    );
    let (_, opts) = fix_spec(&doc! {"key": {"$**": "text"}, "weights": {"b": 5.7}})
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        opts.get_document("weights").ok(),
        Some(&doc! {"$**": 1, "b": 5})
    );
    let bad = [
        doc! {"key": {"a": "text", "b": 1, "c": "text"}},
        doc! {"key": {"a": "text"}, "weights": {"a": 0}},
        doc! {"key": {"a": "text"}, "weights": "x"},
        doc! {"key": {"a": "text"}, "default_language": "xx"},
        doc! {"key": {"a": "text"}, "language_override": "$x"},
        doc! {"key": {"a": "text"}, "textIndexVersion": 7},
        doc! {"key": {"a": "text", "b": 2}},
    ];
    for b in bad {
        assert_eq!(fix_spec(&b).map_err(|e| e.code.code()), Err(67), "{b}");
    }
}

#[test]
fn strings_walk_weights_arrays_and_language_override() {
    let s = spec(
        doc! {"t": "text", "a.b": "text"},
        doc! {"weights": {"t": 3}},
    );
    let doc = rawdoc! {"t": ["x", "y"], "a": {"b": "z", "c": "no"}, "o": "no",
    "language": "spanish"};
    let mut seen = Vec::new();
    s.for_each_string(&doc, &mut |t, l, w| seen.push((t.to_string(), l, w)))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        seen,
        vec![
            ("x".to_string(), Language::Spanish, 3.0),
            ("y".to_string(), Language::Spanish, 3.0),
            ("z".to_string(), Language::Spanish, 1.0),
        ]
    );
    let e = s
        .for_each_string(&rawdoc! {"t": "x", "language": 1}, &mut |_, _, _| {})
        .unwrap_err();
    assert_eq!(e.code.code(), 17261);
    let e = s
        .for_each_string(&rawdoc! {"t": "x", "language": "xx"}, &mut |_, _, _| {})
        .unwrap_err();
    assert_eq!(e.code.code(), 17262);
    // The wildcard takes every string but the language field.
    let w = spec(doc! {"$**": "text"}, doc! {});
    let mut n = 0;
    w.for_each_string(
        &rawdoc! {"a": "x", "b": {"c": ["y"]}, "language": "en"},
        &mut |_, _, _| n += 1,
    )
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(n, 2);
}

fn query(search: &str) -> TextQuery {
    let p = TextParams {
        search: search.to_string(),
        language: None,
        case_sensitive: false,
        diacritic_sensitive: false,
    };
    TextQuery::parse(&p, Language::English).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn search_strings_parse_terms_phrases_and_negations() {
    let q = query("coffee -tea \"green apple\" -\"black cat\" - milk a-b");
    let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
    assert_eq!(
        q.terms_for_bounds,
        set(&["appl", "b", "coffe", "green", "milk"])
    );
    assert_eq!(q.negated_terms, set(&["tea"]));
    assert_eq!(q.positive_phrases, vec!["green apple".to_string()]);
    assert_eq!(q.negated_phrases, vec!["black cat".to_string()]);
    // "-foo-bar" negates both words.
    assert_eq!(query("x -foo-bar").negated_terms, set(&["bar", "foo"]));
    let e = TextParams::parse(&Bson::Document(doc! {"$search": 1})).unwrap_err();
    assert_eq!(e.code.code(), 14);
    let e = TextParams::parse(&Bson::Document(doc! {})).unwrap_err();
    assert_eq!(e.code.code(), 4);
    let e = TextParams::parse(&Bson::Document(doc! {"$search": "a", "x": 1})).unwrap_err();
    assert_eq!(e.message, "extra fields in $text");
    let e = TextParams::parse(&Bson::Int32(1)).unwrap_err();
    assert_eq!(e.message, "$text expects an object");
}

#[test]
fn bound_queries_match_and_score_documents() {
    let s = spec(doc! {"t": "text"}, doc! {});
    let bound = |q: &str| BoundText {
        spec: s.clone(),
        query: query(q),
    };
    let d = rawdoc! {"t": "Spam eggs and spam"};
    assert!(bound("spam").matches(&d).unwrap_or(false));
    assert!(bound("EGG bacon").matches(&d).unwrap_or(false));
    assert!(!bound("bacon").matches(&d).unwrap_or(true));
    assert!(!bound("spam -eggs").matches(&d).unwrap_or(true));
    assert!(bound("\"eggs and\"").matches(&d).unwrap_or(false));
    assert!(!bound("spam \"and eggs\"").matches(&d).unwrap_or(true));
    assert!(!bound("spam -\"eggs and\"").matches(&d).unwrap_or(true));
    // Only negations: nothing matches.
    assert!(!bound("-bacon").matches(&d).unwrap_or(true));
    let score = bound("spam").score(&d);
    assert!((score - 1.5 * (1.0 / 3.0 + 0.5)).abs() < 1e-12, "{score}");
    // Case sensitivity applies to the document's words.
    let p = TextParams {
        search: "Spam".into(),
        language: None,
        case_sensitive: true,
        diacritic_sensitive: false,
    };
    let cs = BoundText {
        spec: s.clone(),
        query: TextQuery::parse(&p, Language::English).unwrap_or_else(|e| panic!("{e}")),
    };
    assert!(cs.matches(&d).unwrap_or(false));
    assert!(!cs.matches(&rawdoc! {"t": "spam"}).unwrap_or(true));
}
