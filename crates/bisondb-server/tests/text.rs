//! Text indexes and `$text` through the official driver: the index as
//! listIndexes shows it (`_fts`/`_ftsx`, weights, languages), one text index
//! per collection, dropping by name or by the pattern it was created with,
//! `$text` searches (stemming, stop words, phrases, negations, languages,
//! case sensitivity), `{$meta: "textScore"}` in projections and sorts with
//! mongod's scores, compound text indexes and their prefix equalities, the
//! errors (27 without a text index, 17261/17262 for bad language fields) and
//! the IXSCAN explain shows. Runs on the engine BISONDB_TEST_ENGINE names.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::{Collection, Database};

fn ids(docs: &[Document]) -> Vec<i32> {
    let mut v: Vec<i32> = docs
        .iter()
        .map(|d| d.get_i32("_id").unwrap_or_else(|_| panic!("no _id in {d}")))
        .collect();
    v.sort_unstable();
    v
}

async fn search(c: &Collection<Document>, filter: Document) -> mongodb::error::Result<Vec<i32>> {
    Ok(ids(&collect(c.find(filter).await?).await))
}

async fn text(c: &Collection<Document>, s: &str) -> Vec<i32> {
    search(c, doc! {"$text": {"$search": s}})
        .await
        .unwrap_or_else(|e| panic!("{s}: {e}"))
}

/// Creates an index with `createIndexes`, naming it as drivers do unless
/// `options` names it; returns the name.
async fn create(c: &Collection<Document>, key: Document, options: Document) -> String {
    let mut spec = doc! {"key": key.clone()};
    spec.extend(options);
    if !spec.contains_key("name") {
        let generated: Vec<String> = key
            .iter()
            .map(|(f, v)| match v {
                Bson::String(s) => format!("{f}_{s}"),
                other => format!("{f}_{other}"),
            })
            .collect();
        spec.insert("name", generated.join("_"));
    }
    let name = spec.get_str("name").unwrap_or_default().to_string();
    let db = c.client().database(&c.namespace().db);
    db.run_command(doc! {"createIndexes": c.name(), "indexes": [spec]})
        .await
        .unwrap_or_else(|e| panic!("createIndexes: {e}"));
    name
}

async fn list_indexes(db: &Database, coll: &str) -> Vec<Document> {
    let reply = db
        .run_command(doc! {"listIndexes": coll})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|a| a.iter().filter_map(|v| v.as_document().cloned()).collect())
        .unwrap_or_default()
}

#[tokio::test]
async fn text_index_specs_list_and_drop_like_mongod() {
    let t = start().await;
    let db = t.tcp.database("tx_spec");
    let c = db.collection::<Document>("c");
    assert_eq!(create(&c, doc! {"t": "text"}, doc! {}).await, "t_text");
    let listed = list_indexes(&db, "c").await;
    let ix = listed
        .iter()
        .find(|d| d.get_str("name").is_ok_and(|n| n == "t_text"))
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        ix,
        &doc! {"v": 2, "key": {"_fts": "text", "_ftsx": 1}, "name": "t_text",
        "weights": {"t": 1}, "default_language": "english",
        "language_override": "language", "textIndexVersion": 3}
    );
    // The same index again is a no-op.
    let r = db
        .run_command(
            doc! {"createIndexes": "c", "indexes": [{"key": {"t": "text"}, "name": "t_text"}]},
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.get_str("note").ok(),
        Some("all indexes already exist"),
        "{r}"
    );
    // A second, different text index is refused.
    let e = expect_code(
        db.run_command(
            doc! {"createIndexes": "c", "indexes": [{"key": {"u": "text"}, "name": "u_text"}]},
        )
        .await,
        67,
    );
    assert!(
        error_message(&e).contains(
            "only one text index per collection allowed, found existing text index \"t_text\""
        ),
        "{}",
        error_message(&e)
    );
    // Bad specifications fail as in mongod.
    for (spec, code) in [
        (
            doc! {"key": {"a": "text", "b": 1, "c": "text"}, "name": "x"},
            67,
        ),
        (
            doc! {"key": {"a": "text"}, "name": "x", "weights": {"a": 0}},
            67,
        ),
        (
            doc! {"key": {"a": "text"}, "name": "x", "default_language": "klingon"},
            67,
        ),
        (
            doc! {"key": {"a": 1}, "name": "x", "weights": {"a": 1}},
            197,
        ),
    ] {
        let other = db.collection::<Document>("bad");
        expect_code(
            other
                .client()
                .database("tx_spec")
                .run_command(doc! {"createIndexes": "bad", "indexes": [spec]})
                .await,
            code,
        );
    }
    // Drop by the pattern it was created with, then by name.
    db.run_command(doc! {"dropIndexes": "c", "index": {"t": "text"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(list_indexes(&db, "c").await.len(), 1);
    let name = create(
        &c,
        doc! {"a": 1, "t": "text", "s": "text"},
        doc! {"weights": {"t": 10}, "default_language": "spanish", "language_override": "idioma", "name": "mine"},
    )
    .await;
    let listed = list_indexes(&db, "c").await;
    let ix = listed
        .iter()
        .find(|d| d.get_str("name").is_ok_and(|n| n == "mine"))
        .unwrap_or_else(|| panic!("{listed:?}"));
    assert_eq!(
        ix.get_document("key").ok(),
        Some(&doc! {"a": 1, "_fts": "text", "_ftsx": 1})
    );
    assert_eq!(
        ix.get_document("weights").ok(),
        Some(&doc! {"s": 1, "t": 10})
    );
    assert_eq!(ix.get_str("default_language").ok(), Some("spanish"));
    assert_eq!(ix.get_str("language_override").ok(), Some("idioma"));
    db.run_command(doc! {"dropIndexes": "c", "index": name})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(list_indexes(&db, "c").await.len(), 1);
}

#[tokio::test]
async fn text_search_terms_phrases_negations_and_scores() {
    let t = start().await;
    let db = t.tcp.database("tx_search");
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "t": "spam eggs and spam", "n": 1},
        doc! {"_id": 2, "t": "spam", "n": 2},
        doc! {"_id": 3, "t": "egg sausage and bacon", "n": 1},
        doc! {"_id": 4, "t": "The Running Man", "n": 2},
        doc! {"_id": 5, "t": ["café au lait", "Crème brûlée"], "n": 1},
        doc! {"_id": 6, "other": "spam"},
        doc! {"_id": 7, "t": 42},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // Without a text index: 27.
    let e = expect_code(search(&c, doc! {"$text": {"$search": "x"}}).await, 27);
    assert_eq!(error_message(&e), "text index required for $text query");
    assert_eq!(create(&c, doc! {"t": "text"}, doc! {}).await, "t_text");
    // A document inserted after the build is indexed too.
    c.insert_one(doc! {"_id": 8, "t": "runner runs; spam!"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    assert_eq!(text(&c, "spam").await, vec![1, 2, 8]);
    // Terms are ORed, stemmed ("eggs" finds "egg"), case-folded.
    assert_eq!(text(&c, "EGGS bacon").await, vec![1, 3]);
    assert_eq!(text(&c, "run").await, vec![4, 8]);
    // Stop words find nothing; diacritics are ignored.
    assert_eq!(text(&c, "and the").await, Vec::<i32>::new());
    assert_eq!(text(&c, "cafe creme").await, vec![5]);
    // Phrases must appear; negations exclude.
    assert_eq!(text(&c, "spam \"eggs and\"").await, vec![1]);
    assert_eq!(text(&c, "spam -eggs").await, vec![2, 8]);
    assert_eq!(text(&c, "spam -\"spam eggs\"").await, vec![2, 8]);
    assert_eq!(text(&c, "-spam").await, Vec::<i32>::new());
    // Sensitivity options.
    let got = search(
        &c,
        doc! {"$text": {"$search": "Running", "$caseSensitive": true}},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, vec![4]);
    let got = search(
        &c,
        doc! {"$text": {"$search": "running", "$caseSensitive": true}},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    // "running" stems to "run": "runs" matches, "Running" keeps its case.
    assert_eq!(got, vec![8]);
    let got = search(
        &c,
        doc! {"$text": {"$search": "cafe", "$diacriticSensitive": true}},
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, Vec::<i32>::new());
    // With the rest of the filter, and inside an $or.
    assert_eq!(
        search(&c, doc! {"$text": {"$search": "spam"}, "n": 2})
            .await
            .unwrap_or_default(),
        vec![2]
    );
    assert_eq!(
        search(
            &c,
            doc! {"$or": [{"$text": {"$search": "bacon"}}, {"_id": 2}]}
        )
        .await
        .unwrap_or_default(),
        vec![2, 3]
    );

    // Scores as mongod computes them, in projections and sorts.
    let got = collect(
        c.find(doc! {"$text": {"$search": "spam"}})
            .projection(doc! {"score": {"$meta": "textScore"}, "t": 0})
            .sort(doc! {"score": {"$meta": "textScore"}})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    let scores: Vec<(i32, f64)> = got
        .iter()
        .map(|d| {
            (
                d.get_i32("_id").unwrap_or(0),
                d.get_f64("score").unwrap_or(-1.0),
            )
        })
        .collect();
    // "spam eggs and spam": spam twice in 3 words, 1.5 * (2/6 + 0.5) = 1.25;
    // "spam": the whole string, 1.1.
    assert_eq!(
        scores.iter().map(|(i, _)| *i).collect::<Vec<_>>(),
        vec![1, 2, 8]
    );
    assert!((scores[0].1 - 1.25).abs() < 1e-9, "{scores:?}");
    assert!((scores[1].1 - 1.1).abs() < 1e-9, "{scores:?}");
    // "runner runs spam": 3 words, spam once.
    assert!((scores[2].1 - (0.5 / 3.0 + 0.5)).abs() < 1e-9, "{scores:?}");
    assert!(got.iter().all(|d| !d.contains_key("t")), "{got:?}");
    // Without $text, textScore metadata is not available (40218).
    expect_code(
        c.find(doc! {})
            .projection(doc! {"s": {"$meta": "textScore"}})
            .await,
        40218,
    );
    expect_code(
        collect_result(
            c.find(doc! {})
                .sort(doc! {"s": {"$meta": "textScore"}})
                .await,
        )
        .await,
        40218,
    );

    // Explain: an index scan of the text index, one point per term.
    let e = db
        .run_command(doc! {"explain": {"find": "c", "filter": {"$text": {"$search": "spam eggs"}}}, "verbosity": "queryPlanner"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let s = e.to_string();
    assert!(s.contains("IXSCAN") && s.contains("t_text"), "{s}");
    let plan = e
        .get_document("queryPlanner")
        .and_then(|q| q.get_document("winningPlan"))
        .unwrap_or_else(|_| panic!("{e}"));
    assert_eq!(plan.get_str("stage").ok(), Some("TEXT_MATCH"), "{plan}");
    assert_eq!(
        plan.get_document("parsedTextQuery")
            .and_then(|q| q.get_array("terms"))
            .ok(),
        Some(&vec![Bson::from("egg"), Bson::from("spam")]),
        "{plan}"
    );
    assert!(s.contains("TEXT_OR") && s.contains("FETCH"), "{s}");
    // executionStats counts the keys of both terms.
    let e = db
        .run_command(doc! {"explain": {"find": "c", "filter": {"$text": {"$search": "spam eggs"}}}, "verbosity": "executionStats"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let stats = e
        .get_document("executionStats")
        .unwrap_or_else(|_| panic!("{e}"));
    assert_eq!(num(stats, "nReturned"), 4, "{stats}");

    // Only one $text; not under $nor; $search must be a string.
    expect_code(
        search(
            &c,
            doc! {"$text": {"$search": "a"}, "$and": [{"$text": {"$search": "b"}}]},
        )
        .await,
        2,
    );
    expect_code(
        search(&c, doc! {"$nor": [{"$text": {"$search": "a"}}]}).await,
        2,
    );
    expect_code(search(&c, doc! {"$text": {"$search": 1}}).await, 14);
    expect_code(
        search(&c, doc! {"$text": {"$search": "a", "$language": "klingon"}}).await,
        2,
    );
}

async fn collect_result(
    r: mongodb::error::Result<mongodb::Cursor<Document>>,
) -> mongodb::error::Result<Vec<Document>> {
    use futures::TryStreamExt;
    r?.try_collect().await
}

#[tokio::test]
async fn languages_weights_wildcards_and_compound_text_indexes() {
    let t = start().await;
    let db = t.tcp.database("tx_lang");
    let c = db.collection::<Document>("c");
    create(
        &c,
        doc! {"$**": "text"},
        doc! {"default_language": "german"},
    )
    .await;
    c.insert_many(vec![
        doc! {"_id": 1, "a": "Die Kinder spielen", "b": {"c": "Häuser"}},
        doc! {"_id": 2, "a": "the children are playing", "language": "english"},
        doc! {"_id": 3, "nested": {"x": ["spielen", 3]}},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(text(&c, "spiel").await, vec![1, 3]);
    // German stems "Häuser" to "haus".
    assert_eq!(text(&c, "haus").await, vec![1]);
    assert_eq!(text(&c, "häuser").await, vec![1]);
    assert_eq!(text(&c, "hause").await, vec![1]);
    let got = search(&c, doc! {"$text": {"$search": "plays", "$language": "en"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(got, vec![2]);
    // A language field that is no string, or names no language, fails the write.
    expect_code(
        c.insert_one(doc! {"_id": 9, "a": "x", "language": 5}).await,
        17261,
    );
    expect_code(
        c.insert_one(doc! {"_id": 9, "a": "x", "language": "klingon"})
            .await,
        17262,
    );

    // Weights: a title match outscores a body match.
    let w = db.collection::<Document>("w");
    create(
        &w,
        doc! {"title": "text", "body": "text"},
        doc! {"weights": {"title": 10}},
    )
    .await;
    w.insert_many(vec![
        doc! {"_id": 1, "title": "other", "body": "mongo"},
        doc! {"_id": 2, "title": "mongo", "body": "other"},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let got = collect(
        w.find(doc! {"$text": {"$search": "mongo"}})
            .projection(doc! {"s": {"$meta": "textScore"}})
            .sort(doc! {"s": {"$meta": "textScore"}})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    let order: Vec<i32> = got.iter().map(|d| d.get_i32("_id").unwrap_or(0)).collect();
    assert_eq!(order, vec![2, 1]);
    let s: Vec<f64> = got.iter().map(|d| d.get_f64("s").unwrap_or(0.0)).collect();
    assert!(
        (s[0] - 11.0).abs() < 1e-9 && (s[1] - 1.1).abs() < 1e-9,
        "{s:?}"
    );

    // Compound: equality on the prefix field is required (291 otherwise).
    let k = db.collection::<Document>("k");
    create(&k, doc! {"shop": 1, "d": "text", "p": -1}, doc! {}).await;
    k.insert_many(vec![
        doc! {"_id": 1, "shop": "a", "d": "red apple", "p": 1},
        doc! {"_id": 2, "shop": "b", "d": "red pear", "p": 2},
        doc! {"_id": 3, "shop": "a", "d": "green pear", "p": 3},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        search(&k, doc! {"shop": "a", "$text": {"$search": "pear red"}})
            .await
            .unwrap_or_default(),
        vec![1, 3]
    );
    expect_code(search(&k, doc! {"$text": {"$search": "pear"}}).await, 291);
    // Without $text the text index is not used: documents without words
    // are found too, and sorts by its fields sort them all.
    k.insert_one(doc! {"_id": 5, "shop": "a", "p": 9})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        search(&k, doc! {"shop": "a"}).await.unwrap_or_default(),
        vec![1, 3, 5]
    );
    let sorted = collect(
        k.find(doc! {})
            .sort(doc! {"shop": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(sorted.len(), 4);
    // ...nor when hinted: the collection is scanned.
    let hinted = collect(
        k.find(doc! {"shop": "a"})
            .hint(mongodb::options::Hint::Name("shop_1_d_text_p_-1".into()))
            .await
            .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(ids(&hinted), vec![1, 3, 5]);
    // Arrays in prefix or suffix fields are refused (CannotBuildIndexKeys).
    expect_code(
        k.insert_one(doc! {"_id": 4, "shop": ["a"], "d": "x"}).await,
        201,
    );
}

#[tokio::test]
async fn aggregation_runs_a_leading_text_match() {
    let t = start().await;
    let db = t.tcp.database("tx_agg");
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "t": "coffee shop", "k": 1},
        doc! {"_id": 2, "t": "tea house", "k": 1},
        doc! {"_id": 3, "t": "coffee and cake", "k": 2},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    create(&c, doc! {"t": "text"}, doc! {}).await;
    let got = collect(
        c.aggregate(vec![
            doc! {"$match": {"$text": {"$search": "coffee"}}},
            doc! {"$group": {"_id": "$k", "n": {"$sum": 1}}},
            doc! {"$sort": {"_id": 1}},
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    assert_eq!(
        got,
        vec![doc! {"_id": 1, "n": 1}, doc! {"_id": 2, "n": 1}],
        "{got:?}"
    );
    // $text only in the first stage (17313).
    let later = c
        .aggregate(vec![
            doc! {"$match": {"k": 1}},
            doc! {"$match": {"$text": {"$search": "coffee"}}},
        ])
        .await;
    expect_code(collect_result(later).await, 17313);

    // Scores through the pipeline: {$meta: "textScore"} in $sort, $project
    // and $addFields, also after the documents were reshaped.
    let s = db.collection::<Document>("s");
    s.insert_many(vec![
        doc! {"_id": 1, "t": "coffee shop near the coffee bar"},
        doc! {"_id": 2, "t": "coffee"},
        doc! {"_id": 3, "t": "tea"},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    create(&s, doc! {"t": "text"}, doc! {}).await;
    let got = collect(
        s.aggregate(vec![
            doc! {"$match": {"$text": {"$search": "coffee"}}},
            doc! {"$project": {"_id": 1}},
            doc! {"$sort": {"x": {"$meta": "textScore"}}},
            doc! {"$addFields": {"score": {"$meta": "textScore"}}},
        ])
        .await
        .unwrap_or_else(|e| panic!("{e}")),
    )
    .await;
    // "coffee shop near the coffee bar": coffee twice in 5 words, 1.5 * 0.7;
    // "coffee": 1.0 (its stem "coffe" is not the whole string: no boost).
    let ids: Vec<i32> = got.iter().map(|d| d.get_i32("_id").unwrap_or(0)).collect();
    assert_eq!(ids, vec![1, 2], "{got:?}");
    let scores: Vec<f64> = got
        .iter()
        .map(|d| d.get_f64("score").unwrap_or(0.0))
        .collect();
    assert!((scores[0] - 1.05).abs() < 1e-9, "{got:?}");
    assert!((scores[1] - 1.0).abs() < 1e-9, "{got:?}");
    assert!(got.iter().all(|d| d.len() == 2), "{got:?}");
    // Without a $text, a textScore sort fails (40218).
    let sorted = s
        .aggregate(vec![doc! {"$sort": {"x": {"$meta": "textScore"}}}])
        .await;
    expect_code(collect_result(sorted).await, 40218);
}

#[tokio::test]
async fn partial_text_indexes_hold_and_answer_their_subset() {
    let t = start().await;
    let db = t.tcp.database("tx_partial");
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "t": "red apple", "k": 1},
        doc! {"_id": 2, "t": "red pear", "k": -1},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    create(
        &c,
        doc! {"t": "text"},
        doc! {"partialFilterExpression": {"k": {"$gt": 0}}},
    )
    .await;
    // A query implying the partial filter uses it; another finds no index.
    assert_eq!(
        search(&c, doc! {"$text": {"$search": "red"}, "k": {"$gt": 0}})
            .await
            .unwrap_or_default(),
        vec![1]
    );
    expect_code(search(&c, doc! {"$text": {"$search": "red"}}).await, 27);
    let v = db
        .run_command(doc! {"validate": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
    let keys = v
        .get_document("keysPerIndex")
        .ok()
        .and_then(|k| k.get("t_text").cloned());
    assert!(
        keys.as_ref().is_some_and(|k| is_num(k, 2.0)),
        "only the matching document's two terms: {v}"
    );
}

#[tokio::test]
async fn writes_choose_by_text_and_score() {
    let t = start().await;
    let db = t.tcp.database("tx_write");
    let c = db.collection::<Document>("c");
    c.insert_many(vec![
        doc! {"_id": 1, "t": "spam"},
        doc! {"_id": 2, "t": "spam eggs and spam"},
        doc! {"_id": 3, "t": "bacon"},
    ])
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    create(&c, doc! {"t": "text"}, doc! {}).await;
    // findAndModify picks the best-scoring match (1.25 over 1.1).
    let r = db
        .run_command(
            doc! {"findAndModify": "c", "query": {"$text": {"$search": "spam"}},
            "sort": {"s": {"$meta": "textScore"}}, "update": {"$set": {"hit": true}}},
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.get_document("value")
            .ok()
            .and_then(|v| v.get_i32("_id").ok()),
        Some(2),
        "{r}"
    );
    // update, delete and count run their $text through the index.
    let u = c
        .update_many(
            doc! {"$text": {"$search": "bacon"}},
            doc! {"$set": {"b": 1}},
        )
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(u.modified_count, 1);
    assert_eq!(count(&c, doc! {"$text": {"$search": "spam"}}).await, 2);
    let d = c
        .delete_many(doc! {"$text": {"$search": "eggs"}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(d.deleted_count, 1);
    assert_eq!(text(&c, "spam").await, vec![1]);
    // validate finds the text index's entries consistent.
    let v = db
        .run_command(doc! {"validate": "c"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v.get_bool("valid").ok(), Some(true), "{v}");
}
