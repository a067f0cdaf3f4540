//! The whole explain documents of a set of representative queries, compared
//! with the ones recorded in `explain_golden.txt` (field order and number
//! types included: each reply is written one field a line, every value
//! with its BSON type, see [`write_doc`]). The integration tests check what explain means; this
//! one keeps a change to how the planner and explain are built from changing
//! a byte of what they answer. Only `executionTimeMillis` varies between
//! runs; it is zeroed.
//!
//! After an intended change of explain's output, rewrite the record with
//! `BISONDB_BLESS_EXPLAIN=1 cargo test -p bisondb-server --lib explain_golden`
//! and review its diff.

use std::fmt::Write as _;
use std::sync::Arc;

use bson::{doc, Bson, Document, RawDocumentBuf};

use crate::context::{ConnectionInfo, Context};
use crate::request::CommandRequest;
use crate::state::ServerState;

const RECORD: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/plan/explain_golden.txt");

fn server() -> Arc<ServerState> {
    let storage = bisondb_storage::Storage::open(Arc::new(bisondb_storage::MemoryEngine::new()))
        .unwrap_or_else(|e| panic!("{e}"));
    ServerState::new(crate::ServerConfig::default(), storage)
}

/// Runs `cmd` on database `t` through the registry; the reply or the error document.
fn run(state: &Arc<ServerState>, cmd: Document) -> Document {
    let raw = RawDocumentBuf::try_from(&cmd).unwrap_or_else(|e| panic!("{e}"));
    let req = CommandRequest::from_body(&raw, "t").unwrap_or_else(|e| panic!("{e}"));
    let mut conn = ConnectionInfo::default();
    let mut ctx = Context {
        state,
        conn: &mut conn,
    };
    match crate::registry::dispatch(&req, &mut ctx) {
        Ok(r) => Document::try_from(r.as_ref()).unwrap_or_else(|e| panic!("{e}")),
        Err(e) => crate::reply::error_document(&e),
    }
}

/// Runs a setup command, which must succeed.
fn setup(state: &Arc<ServerState>, cmd: Document) {
    let r = run(state, cmd.clone());
    assert!(
        matches!(r.get("ok"), Some(Bson::Double(x)) if *x == 1.0),
        "{cmd}: {r}"
    );
    if let Ok(errors) = r.get_array("writeErrors") {
        panic!("{cmd}: {errors:?}");
    }
}

fn index(state: &Arc<ServerState>, coll: &str, specs: Vec<Document>) {
    setup(
        state,
        doc! {"createIndexes": coll, "indexes": specs.into_iter().map(Bson::Document).collect::<Vec<_>>()},
    );
}

fn populate(s: &Arc<ServerState>) {
    let docs: Vec<Bson> = (0..20)
        .map(|i: i32| {
            let mut d = doc! {
                "_id": i,
                "a": i % 5,
                "b": i,
                "c": format!("s{:02}", 19 - i),
                "tags": [i % 3, i % 3 + 1],
                "h": i % 4,
                "p": i % 10,
            };
            if i % 2 == 0 {
                d.insert("s", i % 3);
            }
            Bson::Document(d)
        })
        .collect();
    setup(s, doc! {"insert": "c", "documents": docs});
    index(
        s,
        "c",
        vec![
            doc! {"key": {"a": 1}, "name": "a_1"},
            doc! {"key": {"a": 1, "b": -1}, "name": "a_1_b_-1"},
            doc! {"key": {"tags": 1}, "name": "tags_1"},
            doc! {"key": {"h": "hashed"}, "name": "h_hashed"},
            doc! {"key": {"p": 1}, "name": "p_1", "partialFilterExpression": {"p": {"$gt": 5}}},
            doc! {"key": {"s": 1}, "name": "s_1", "sparse": true},
            doc! {"key": {"c": -1}, "name": "c_-1"},
        ],
    );

    let words = [
        "hot coffee in the morning",
        "tea or coffee",
        "a hot drink of tea",
        "cold water",
        "coffee coffee coffee",
    ];
    let texts: Vec<Bson> = words
        .iter()
        .enumerate()
        .map(|(i, w)| Bson::Document(doc! {"_id": i as i32, "k": (i % 2) as i32, "body": *w}))
        .collect();
    setup(s, doc! {"insert": "txt", "documents": texts.clone()});
    index(
        s,
        "txt",
        vec![doc! {"key": {"body": "text"}, "name": "body_text"}],
    );
    setup(s, doc! {"insert": "txt2", "documents": texts});
    index(
        s,
        "txt2",
        vec![doc! {"key": {"k": 1, "body": "text"}, "name": "k_1_body_text"}],
    );

    let flat: Vec<Bson> = (0..16)
        .map(|i: i32| {
            Bson::Document(doc! {"_id": i, "loc": [(i % 4) as f64, (i / 4) as f64], "g": i % 2})
        })
        .collect();
    setup(s, doc! {"insert": "geo", "documents": flat});
    index(
        s,
        "geo",
        vec![
            doc! {"key": {"loc": "2d"}, "name": "loc_2d"},
            doc! {"key": {"g": 1}, "name": "g_1"},
        ],
    );
    let sphere: Vec<Bson> = (0..9)
        .map(|i: i32| {
            Bson::Document(doc! {"_id": i, "loc": {"type": "Point", "coordinates": [(i % 3) as f64 * 0.01, (i / 3) as f64 * 0.01]}})
        })
        .collect();
    setup(s, doc! {"insert": "geos", "documents": sphere});
    index(
        s,
        "geos",
        vec![doc! {"key": {"loc": "2dsphere", "n": 1}, "name": "loc_2dsphere_n_1"}],
    );

    setup(
        s,
        doc! {"create": "coll", "collation": {"locale": "en", "strength": 2}},
    );
    let names: Vec<Bson> = ["abc", "ABC", "abd", "Abe", "b"]
        .iter()
        .enumerate()
        .map(|(i, n)| Bson::Document(doc! {"_id": i as i32, "name": *n}))
        .collect();
    setup(s, doc! {"insert": "coll", "documents": names});
    index(s, "coll", vec![doc! {"key": {"name": 1}, "name": "name_1"}]);

    setup(
        s,
        doc! {"create": "cl", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "by_id"}},
    );
    setup(
        s,
        doc! {"insert": "cl", "documents": [{"_id": 1, "x": 1}, {"_id": 2, "x": 2}, {"_id": 3, "x": 3}]},
    );

    setup(s, doc! {"create": "cap", "capped": true, "size": 100000});
    setup(
        s,
        doc! {"insert": "cap", "documents": [{"_id": 3, "x": 1}, {"_id": 1, "x": 2}, {"_id": 2, "x": 3}]},
    );
}

/// The queries, by name: each is explained at `executionStats` verbosity
/// unless its command is already a whole `explain` (or an `aggregate` with
/// `explain: true`).
fn cases() -> Vec<(&'static str, Document)> {
    let find = |filter: Document| doc! {"find": "c", "filter": filter};
    let with = |mut d: Document, more: Document| {
        d.extend(more);
        d
    };
    vec![
        ("id equality", find(doc! {"_id": 3})),
        ("id equality, missing", find(doc! {"_id": 99})),
        ("id equality, other field", find(doc! {"_id": 3, "b": 4})),
        ("index range", find(doc! {"a": {"$gte": 2, "$lt": 4}})),
        (
            "index range, backward for sort",
            with(find(doc! {"a": {"$gte": 1}}), doc! {"sort": {"a": -1}}),
        ),
        (
            "compound index gives the sort",
            with(find(doc! {"a": 2}), doc! {"sort": {"b": 1}}),
        ),
        (
            "compound index, sort and limit",
            with(find(doc! {"a": 2}), doc! {"sort": {"b": -1}, "limit": 2}),
        ),
        (
            "points and a range: several seeks",
            find(doc! {"a": {"$in": [1, 3]}, "b": {"$gt": 5}}),
        ),
        (
            "collscan with sort, skip, limit, projection",
            with(
                find(doc! {"b": {"$gt": 3}}),
                doc! {"sort": {"h": 1}, "skip": 2, "limit": 3, "projection": {"b": 1}},
            ),
        ),
        (
            "top-k sort over everything",
            with(find(doc! {}), doc! {"sort": {"b": -1}, "limit": 5}),
        ),
        (
            "index order saves the sort",
            with(find(doc! {}), doc! {"sort": {"c": 1}, "limit": 4}),
        ),
        (
            "_id order is the _id index's",
            with(find(doc! {}), doc! {"sort": {"_id": -1}, "skip": 15}),
        ),
        ("or", find(doc! {"$or": [{"a": 1}, {"b": 7}]})),
        (
            "multikey drops repeats",
            find(doc! {"tags": {"$in": [1, 2]}}),
        ),
        ("hashed", find(doc! {"h": 2})),
        ("partial index implied", find(doc! {"p": {"$gt": 7}})),
        ("partial index not implied", find(doc! {"p": 3})),
        ("sparse", find(doc! {"s": 1})),
        (
            "hint natural backward",
            with(find(doc! {"a": 1}), doc! {"hint": {"$natural": -1}}),
        ),
        (
            "hint _id index",
            with(find(doc! {"a": 1}), doc! {"hint": "_id_"}),
        ),
        (
            "hint by key pattern",
            with(find(doc! {"b": 3}), doc! {"hint": {"a": 1, "b": -1}}),
        ),
        (
            "hint that names no index",
            with(find(doc! {}), doc! {"hint": "nope"}),
        ),
        (
            "returnKey",
            with(
                find(doc! {"a": 1}),
                doc! {"hint": "a_1_b_-1", "returnKey": true},
            ),
        ),
        (
            "min and max",
            with(
                find(doc! {"b": {"$ne": 6}}),
                doc! {"hint": {"a": 1}, "min": {"a": 1}, "max": {"a": 3}},
            ),
        ),
        (
            "min and max on _id",
            with(
                find(doc! {}),
                doc! {"hint": {"_id": 1}, "min": {"_id": 4}, "max": {"_id": 8}},
            ),
        ),
        (
            "text",
            doc! {"find": "txt", "filter": {"$text": {"$search": "coffee -water \"hot drink\""}}, "projection": {"score": {"$meta": "textScore"}}, "sort": {"score": {"$meta": "textScore"}}},
        ),
        (
            "text, compound",
            doc! {"find": "txt2", "filter": {"k": 1, "$text": {"$search": "tea"}}},
        ),
        (
            "text in an or",
            doc! {"find": "txt", "filter": {"$or": [{"$text": {"$search": "tea"}}, {"_id": 3}]}},
        ),
        (
            "geo near 2d with max distance",
            doc! {"find": "geo", "filter": {"loc": {"$near": [0.0, 0.0], "$maxDistance": 1.5}}},
        ),
        (
            "geo near 2d without max distance",
            doc! {"find": "geo", "filter": {"loc": {"$near": [1.0, 1.0]}, "g": 1}, "limit": 3},
        ),
        (
            "geo within box",
            doc! {"find": "geo", "filter": {"loc": {"$geoWithin": {"$box": [[0.5, 0.5], [2.5, 2.5]]}}}},
        ),
        (
            "geo nearSphere 2dsphere",
            doc! {"find": "geos", "filter": {"loc": {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [0.0, 0.0]}, "$maxDistance": 2000.0}}}},
        ),
        (
            "collation index",
            doc! {"find": "coll", "filter": {"name": "ABC"}},
        ),
        (
            "collation other than the index's",
            doc! {"find": "coll", "filter": {"name": {"$gt": "abc"}}, "collation": {"locale": "simple"}},
        ),
        (
            "clustered index hint",
            doc! {"find": "cl", "filter": {"x": {"$gt": 1}}, "hint": "by_id"},
        ),
        ("capped natural order", doc! {"find": "cap", "filter": {}}),
        (
            "missing collection",
            doc! {"find": "nope", "filter": {"a": 1}},
        ),
        ("count scan", doc! {"count": "c", "query": {"a": 2}}),
        (
            "count scan, compound with a descending field",
            doc! {"count": "c", "query": {"a": 2, "b": {"$gt": 3, "$lte": 12}}},
        ),
        (
            "count scan of several points",
            doc! {"count": "c", "query": {"a": {"$in": [1, 2]}}},
        ),
        (
            "count, fast",
            doc! {"count": "c", "query": {}, "skip": 3, "limit": 10},
        ),
        (
            "count, collection scan",
            doc! {"count": "c", "query": {"b": {"$gt": 3}}, "skip": 2},
        ),
        (
            "count, multikey fetch",
            doc! {"count": "c", "query": {"tags": 1}},
        ),
        (
            "count, missing collection",
            doc! {"count": "nope", "query": {"a": 1}},
        ),
        (
            "distinct",
            doc! {"distinct": "c", "key": "b", "query": {"a": 2}},
        ),
        (
            "update",
            doc! {"update": "c", "updates": [{"q": {"a": 2}, "u": {"$set": {"x": 1}}}]},
        ),
        (
            "delete",
            doc! {"delete": "c", "deletes": [{"q": {"b": {"$lt": 3}}, "limit": 0}]},
        ),
        (
            "findAndModify with sort",
            doc! {"findAndModify": "c", "query": {"b": {"$gt": 2}}, "sort": {"h": -1}, "update": {"$set": {"y": 1}}},
        ),
        (
            "aggregate, match and sort",
            doc! {"aggregate": "c", "pipeline": [{"$match": {"a": 1}}, {"$sort": {"b": -1}}, {"$group": {"_id": null, "n": {"$sum": 1}}}], "cursor": {}},
        ),
        (
            "aggregate, match and sort by index",
            doc! {"aggregate": "c", "pipeline": [{"$match": {"c": {"$gt": "s05"}}}, {"$sort": {"c": -1}}], "cursor": {}},
        ),
        (
            "queryPlanner verbosity",
            doc! {"explain": {"find": "c", "filter": {"b": {"$gt": 3}}, "sort": {"h": 1}, "skip": 2, "limit": 3, "projection": {"b": 1}}, "verbosity": "queryPlanner"},
        ),
        (
            "allPlansExecution verbosity",
            doc! {"explain": {"find": "c", "filter": {"a": 2}, "sort": {"b": 1}}, "verbosity": "allPlansExecution"},
        ),
        (
            "default verbosity, count",
            doc! {"explain": {"count": "c", "query": {"a": 3}}},
        ),
        (
            "aggregate with explain true",
            doc! {"aggregate": "c", "pipeline": [{"$match": {"a": 4}}], "explain": true},
        ),
    ]
}

/// `executionTimeMillis` (the only field that varies) set to 0, wherever it is.
fn steady(d: &mut Document) {
    for (k, v) in d.iter_mut() {
        match v {
            Bson::Document(inner) => steady(inner),
            _ if k == "executionTimeMillis" => *v = Bson::Int32(0),
            _ => {}
        }
    }
}

/// `d` one field a line, nested documents and arrays indented below their
/// key, scalars as their `Debug` form (which names the type: `Int32(1)`).
fn write_doc(out: &mut String, d: &Document, depth: usize) {
    for (k, v) in d {
        write_value(out, k, v, depth);
    }
}

fn write_value(out: &mut String, key: &str, v: &Bson, depth: usize) {
    let pad = "  ".repeat(depth);
    match v {
        Bson::Document(d) if !d.is_empty() => {
            let _ = writeln!(out, "{pad}{key}:");
            write_doc(out, d, depth + 1);
        }
        Bson::Array(a) if !a.is_empty() => {
            let _ = writeln!(out, "{pad}{key}: [");
            for item in a {
                write_value(out, "-", item, depth + 1);
            }
            let _ = writeln!(out, "{pad}]");
        }
        Bson::Document(_) => {
            let _ = writeln!(out, "{pad}{key}: {{}}");
        }
        Bson::Array(_) => {
            let _ = writeln!(out, "{pad}{key}: []");
        }
        scalar => {
            let _ = writeln!(out, "{pad}{key}: {scalar:?}");
        }
    }
}

fn render() -> String {
    let s = server();
    populate(&s);
    let mut out = String::new();
    for (name, cmd) in cases() {
        let whole = cmd.contains_key("explain");
        let cmd = if whole {
            cmd
        } else {
            doc! {"explain": cmd, "verbosity": "executionStats"}
        };
        let mut reply = run(&s, cmd);
        steady(&mut reply);
        let _ = writeln!(out, "=== {name}");
        write_doc(&mut out, &reply, 0);
    }
    out
}

#[test]
fn explain_documents_are_unchanged() {
    let got = render();
    if std::env::var_os("BISONDB_BLESS_EXPLAIN").is_some() {
        std::fs::write(RECORD, &got).unwrap_or_else(|e| panic!("{RECORD}: {e}"));
        return;
    }
    let want = std::fs::read_to_string(RECORD).unwrap_or_else(|e| panic!("{RECORD}: {e}"));
    if got == want {
        return;
    }
    // Name the first query whose explain changed, with both versions.
    let split = |s: &str| -> Vec<(String, String)> {
        s.split("=== ")
            .filter(|c| !c.is_empty())
            .map(|c| {
                let (name, body) = c.split_once('\n').unwrap_or((c, ""));
                (name.to_string(), body.to_string())
            })
            .collect()
    };
    let (got, want) = (split(&got), split(&want));
    for (g, w) in got.iter().zip(&want) {
        assert_eq!(g.0, w.0, "the list of queries changed");
        assert!(
            g.1 == w.1,
            "explain of `{}` changed.\n--- recorded\n{}\n+++ now\n{}",
            g.0,
            w.1,
            g.1
        );
    }
    assert_eq!(got.len(), want.len(), "the number of queries changed");
}
