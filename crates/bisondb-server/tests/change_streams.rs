//! Change streams through the official driver: `$changeStream` refused on a
//! standalone (40573), its argument and namespace errors, and a stream
//! reading `local.oplog.rs` in replica-set mode: events, the awaiting
//! `getMore` that wakes when an entry is written, `postBatchResumeToken`,
//! resuming, 286 when the history is gone, `updateLookup`, `invalidate` and
//! the stages after `$changeStream`.
//!
//! The oplog-reading tests write hand-made entries in mongod's shape into
//! the oplog, so they pin the reader down whatever writes the entries.

use std::time::{Duration, Instant};

use crate::common::*;
use bson::{doc, spec::BinarySubtype, Binary, Bson, DateTime, Document, Timestamp};
use mongodb::{Client, Database};

fn cursor_id(reply: &Document) -> i64 {
    reply.get_document("cursor").unwrap().get_i64("id").unwrap()
}

fn pbrt(reply: &Document) -> String {
    reply
        .get_document("cursor")
        .unwrap()
        .get_document("postBatchResumeToken")
        .unwrap()
        .get_str("_data")
        .unwrap()
        .to_string()
}

fn token(event: &Document) -> String {
    event
        .get_document("_id")
        .unwrap()
        .get_str("_data")
        .unwrap()
        .to_string()
}

/// Hand-made entries' timestamps lie far ahead of the clock, so entries the
/// server writes itself (when it writes an oplog) sort before them.
fn ts(time: u32) -> Timestamp {
    Timestamp {
        time: 4_000_000_000 + time,
        increment: 1,
    }
}

fn uuid() -> Binary {
    Binary {
        subtype: BinarySubtype::Uuid,
        bytes: vec![3; 16],
    }
}

fn entry(time: u32, op: &str, ns: &str, o: Document, o2: Option<Document>) -> Document {
    let mut e = doc! {"ts": ts(time), "t": 1_i64, "v": 2, "op": op, "ns": ns, "ui": uuid(), "o": o, "wall": DateTime::now()};
    if let Some(o2) = o2 {
        e.insert("o2", o2);
    }
    e
}

/// A replica-set server, a direct client, and its oplog (created as a
/// capped collection when the server has none).
async fn setup() -> (TestServer, Client) {
    // Test commands let the tests insert hand-made oplog entries.
    let ts = start_repl_set_with(|c| c.enable_test_commands = true).await;
    let client = direct_client(ts.server.port()).await;
    (ts, client)
}

/// A replica-set server and a client of it without retryable writes.
async fn rs_client() -> (TestServer, Client) {
    let server = start_repl_set().await;
    let rs = server.tcp_client_with("retryWrites=false").await;
    (server, rs)
}

/// [`rs_client`] and database `name` whose collection `c` keeps
/// pre-images.
async fn with_pre_images(name: &str) -> (TestServer, Client, Database) {
    let (server, rs) = rs_client().await;
    let db = rs.database(name);
    db.run_command(doc! {"create": "c", "changeStreamPreAndPostImages": {"enabled": true}})
        .await
        .unwrap();
    (server, rs, db)
}

async fn write_oplog(client: &Client, entries: Vec<Document>) {
    client
        .database("local")
        .collection::<Document>("oplog.rs")
        .insert_many(entries)
        .await
        .unwrap();
}

async fn aggregate(
    db: &Database,
    coll: Bson,
    pipeline: Vec<Document>,
) -> mongodb::error::Result<Document> {
    db.run_command(doc! {"aggregate": coll, "pipeline": pipeline, "cursor": {}})
        .await
}

/// Opens a change stream on `c` with the `$changeStream` argument `spec`.
async fn open_c(db: &Database, spec: Document) -> Document {
    aggregate(
        db,
        Bson::String("c".into()),
        vec![doc! {"$changeStream": spec}],
    )
    .await
    .unwrap()
}

async fn get_more(
    db: &Database,
    id: i64,
    coll: &str,
    wait_ms: i64,
) -> mongodb::error::Result<Document> {
    db.run_command(doc! {"getMore": id, "collection": coll, "maxTimeMS": wait_ms})
        .await
}

#[tokio::test]
async fn a_standalone_refuses_change_streams() {
    let ts = start().await;
    let coll = ts.tcp.database("d").collection::<Document>("c");
    expect_code(coll.watch().await, 40573);
    let db = ts.tcp.database("d");
    expect_code(
        aggregate(&db, Bson::Int32(1), vec![doc! {"$changeStream": {}}]).await,
        40573,
    );
}

#[tokio::test]
async fn argument_and_namespace_errors() {
    let (_ts, client) = setup().await;
    let db = client.database("d");
    let c = || Bson::String("c".into());
    for (pipeline, code) in [
        (vec![doc! {"$changeStream": 1}], 50808),
        (vec![doc! {"$changeStream": {"nope": 1}}], 40415),
        (vec![doc! {"$changeStream": {"fullDocument": "x"}}], 2),
        (vec![doc! {"$changeStream": {"fullDocument": true}}], 14),
        (
            vec![doc! {"$changeStream": {"resumeAfter": {"_data": "zz"}}}],
            50795,
        ),
        (
            vec![doc! {"$changeStream": {"allChangesForCluster": true}}],
            72,
        ),
        (vec![doc! {"$match": {}}, doc! {"$changeStream": {}}], 40602),
        (
            vec![doc! {"$changeStream": {}}, doc! {"$group": {"_id": 1}}],
            20,
        ),
        (
            vec![doc! {"$changeStream": {}}, doc! {"$unsupported": "foo"}],
            40324,
        ),
    ] {
        let e = aggregate(&db, c(), pipeline.clone()).await;
        expect_code(e, code);
    }
    for internal in ["admin", "config", "local"] {
        let db = client.database(internal);
        expect_code(
            aggregate(&db, Bson::Int32(1), vec![doc! {"$changeStream": {}}]).await,
            73,
        );
    }
    // A system collection is not watched, nor a view's output.
    db.run_command(doc! {"create": "v", "viewOn": "c", "pipeline": []})
        .await
        .unwrap();
    for (coll, code) in [("system.views", 73), ("v", 166)] {
        expect_code(
            aggregate(
                &db,
                Bson::String(coll.into()),
                vec![doc! {"$changeStream": {}}],
            )
            .await,
            code,
        );
    }
    // A whole-cluster stream opens on admin.
    let admin = client.database("admin");
    let r = aggregate(
        &admin,
        Bson::Int32(1),
        vec![doc! {"$changeStream": {"allChangesForCluster": true}}],
    )
    .await
    .unwrap();
    assert_ne!(cursor_id(&r), 0);
    // Its cursor lives on admin.$cmd.aggregate, which killCursors names.
    let killed = admin
        .run_command(doc! {"killCursors": "$cmd.aggregate", "cursors": [cursor_id(&r)]})
        .await
        .unwrap();
    assert_eq!(
        killed.get_array("cursorsKilled").unwrap(),
        &vec![Bson::Int64(cursor_id(&r))]
    );
}

#[tokio::test]
async fn events_resume_and_invalidate() {
    let (_ts, client) = setup().await;
    let db = client.database("d");
    let opened = open_c(&db, doc! {}).await;
    let id = cursor_id(&opened);
    assert_ne!(id, 0);
    assert!(first_batch(&opened).is_empty());
    let first_token = pbrt(&opened);
    // An empty getMore still carries a token, and it does not go back.
    let empty = get_more(&db, id, "c", 10).await.unwrap();
    assert!(next_batch(&empty).is_empty());
    assert!(pbrt(&empty) >= first_token);

    write_oplog(
        &client,
        vec![
            entry(
                200,
                "i",
                "d.c",
                doc! {"_id": 1, "a": 1},
                Some(doc! {"_id": 1}),
            ),
            entry(201, "i", "d.other", doc! {"_id": 1}, None),
            entry(
                202,
                "u",
                "d.c",
                doc! {"$v": 2, "diff": {"u": {"a": 2}, "sb": {"a": true, "l": 1}}},
                Some(doc! {"_id": 1}),
            ),
            entry(203, "d", "d.c", doc! {"_id": 1}, None),
        ],
    )
    .await;
    let r = get_more(&db, id, "c", 1000).await.unwrap();
    let events = next_batch(&r);
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.get_str("operationType").unwrap())
        .collect();
    assert_eq!(kinds, ["insert", "update", "delete"]);
    assert_eq!(
        events[0].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "a": 1}
    );
    assert_eq!(
        events[0].get_document("ns").unwrap(),
        &doc! {"db": "d", "coll": "c"}
    );
    assert_eq!(events[0].get_timestamp("clusterTime").unwrap(), ts(200));
    assert_eq!(
        events[1].get_document("updateDescription").unwrap(),
        &doc! {"updatedFields": {"a": 2}, "removedFields": [], "truncatedArrays": [{"field": "b", "newSize": 1}]}
    );
    assert_eq!(
        events[2].get_document("documentKey").unwrap(),
        &doc! {"_id": 1}
    );
    let tokens: Vec<String> = events.iter().map(token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert!(pbrt(&r) >= tokens[2]);

    // Resuming after the insert gives what followed it; startAtOperationTime
    // gives the insert again.
    let resumed = aggregate(
        &db,
        Bson::String("c".into()),
        vec![
            doc! {"$changeStream": {"resumeAfter": events[0].get_document("_id").unwrap().clone()}},
        ],
    )
    .await
    .unwrap();
    let again: Vec<String> = first_batch(&resumed).iter().map(token).collect();
    assert_eq!(again, tokens[1..]);
    let at = open_c(&db, doc! {"startAtOperationTime": ts(200)}).await;
    assert_eq!(first_batch(&at).len(), 3);
    // Before the oldest entry: the history is lost.
    expect_code(
        aggregate(
            &db,
            Bson::String("c".into()),
            vec![doc! {"$changeStream": {"startAtOperationTime": Timestamp { time: 1, increment: 0 }}}],
        )
        .await,
        286,
    );
    // A database stream sees both collections.
    let whole = aggregate(
        &db,
        Bson::Int32(1),
        vec![doc! {"$changeStream": {"startAtOperationTime": ts(200)}}],
    )
    .await
    .unwrap();
    assert_eq!(first_batch(&whole).len(), 4);

    // The drop of the watched collection, then invalidate; the cursor closes.
    write_oplog(
        &client,
        vec![entry(204, "c", "d.$cmd", doc! {"drop": "c"}, None)],
    )
    .await;
    let r = get_more(&db, id, "c", 1000).await.unwrap();
    let kinds: Vec<String> = next_batch(&r)
        .iter()
        .map(|e| e.get_str("operationType").unwrap().to_string())
        .collect();
    assert_eq!(kinds, ["drop", "invalidate"]);
    assert_eq!(cursor_id(&r), 0);
    let invalidate = next_batch(&r)[1].get_document("_id").unwrap().clone();
    expect_code(
        aggregate(
            &db,
            Bson::String("c".into()),
            vec![doc! {"$changeStream": {"resumeAfter": invalidate.clone()}}],
        )
        .await,
        260,
    );
    let after = open_c(&db, doc! {"startAfter": invalidate}).await;
    assert!(first_batch(&after).is_empty());
    assert_ne!(cursor_id(&after), 0);
}

#[tokio::test]
async fn later_stages_update_lookup_and_a_modified_id() {
    let (_ts, client) = setup().await;
    let db = client.database("d");
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1, "a": 5, "z": "now"})
        .await
        .unwrap();
    write_oplog(
        &client,
        vec![
            entry(
                300,
                "u",
                "d.c",
                doc! {"$v": 2, "diff": {"u": {"a": 5}}},
                Some(doc! {"_id": 1}),
            ),
            entry(
                301,
                "u",
                "d.c",
                doc! {"$v": 2, "diff": {"u": {"a": 6}}},
                Some(doc! {"_id": 2}),
            ),
            entry(302, "d", "d.c", doc! {"_id": 1}, None),
        ],
    )
    .await;
    let start = doc! {"startAtOperationTime": ts(300)};
    let mut lookup = start.clone();
    lookup.insert("fullDocument", "updateLookup");
    let r = open_c(&db, lookup).await;
    let events = first_batch(&r);
    assert_eq!(
        events[0].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "a": 5, "z": "now"}
    );
    // A document gone since: null, as mongod.
    assert_eq!(events[1].get("fullDocument"), Some(&Bson::Null));
    assert!(events[2].get("fullDocument").is_none());

    let r = aggregate(
        &db,
        Bson::String("c".into()),
        vec![
            doc! {"$changeStream": start.clone()},
            doc! {"$match": {"operationType": "delete"}},
            doc! {"$project": {"documentKey": 1}},
        ],
    )
    .await
    .unwrap();
    let events = first_batch(&r);
    assert_eq!(events.len(), 1);
    assert_eq!(events[0].keys().collect::<Vec<_>>(), ["_id", "documentKey"]);
    // Past the filtered-out events, the batch's token is past the last entry read.
    assert!(pbrt(&r) > token(&events[0]));

    expect_code(
        aggregate(
            &db,
            Bson::String("c".into()),
            vec![doc! {"$changeStream": start}, doc! {"$project": {"_id": 0}}],
        )
        .await,
        280,
    );
}

/// Also the latency figure: from the start of an insert to the delivery of
/// its event to a getMore already awaiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_awaiting_get_more_wakes_when_an_entry_is_written() {
    let (_ts, client) = setup().await;
    let db = client.database("d");
    let opened = open_c(&db, doc! {}).await;
    let id = cursor_id(&opened);
    let mut latencies = Vec::new();
    for i in 0..100u32 {
        let waiter = {
            let db = db.clone();
            tokio::spawn(async move {
                let r = get_more(&db, id, "c", 5000).await.unwrap();
                (Instant::now(), next_batch(&r))
            })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let written = Instant::now();
        db.collection::<Document>("c")
            .insert_one(doc! {"_id": i})
            .await
            .unwrap();
        let (delivered, events) = waiter.await.unwrap();
        assert_eq!(events.len(), 1, "round {i}");
        latencies.push(delivered.saturating_duration_since(written));
    }
    latencies.sort();
    // Well under the 5 s the getMore would wait: it was woken, not timed out.
    let worst = latencies[latencies.len() - 1];
    assert!(worst < Duration::from_secs(1), "{latencies:?}");
    let p99 = latencies[latencies.len() * 99 / 100 - 1];
    println!(
        "insert to event delivery on an awaiting getMore ({} rounds): median {:?}, p99 {:?}, max {:?}",
        latencies.len(),
        latencies[latencies.len() / 2],
        p99,
        worst
    );
}

#[tokio::test]
async fn the_drivers_watch_helpers() {
    use futures::StreamExt;
    let (server, client) = setup().await;
    let rs = server.tcp_client_with("retryWrites=false").await;
    let coll = rs.database("d").collection::<Document>("c");
    let mut coll_stream = coll.watch().await.unwrap();
    let mut db_stream = rs.database("d").watch().await.unwrap();
    let mut all_stream = rs.watch().await.unwrap();
    write_oplog(
        &client,
        vec![
            entry(500, "i", "d.c", doc! {"_id": 1}, None),
            entry(501, "i", "e.x", doc! {"_id": 2}, None),
            entry(502, "i", "d.y", doc! {"_id": 3}, None),
        ],
    )
    .await;
    let ev = coll_stream.next().await.unwrap().unwrap();
    assert_eq!(ev.full_document, Some(doc! {"_id": 1}));
    assert_eq!(ev.cluster_time, Some(ts(500)));
    let first = coll_stream.resume_token().unwrap();
    let mut seen = Vec::new();
    for _ in 0..2 {
        let ev = db_stream.next().await.unwrap().unwrap();
        seen.push(ev.ns.unwrap().coll.unwrap());
    }
    assert_eq!(seen, ["c", "y"]);
    let mut dbs = Vec::new();
    for _ in 0..3 {
        let ev = all_stream.next().await.unwrap().unwrap();
        dbs.push(ev.ns.unwrap().db);
    }
    assert_eq!(dbs, ["d", "e", "d"]);
    // A stream resumed from the first event's token sees what followed it.
    write_oplog(&client, vec![entry(503, "d", "d.c", doc! {"_id": 1}, None)]).await;
    let mut resumed = coll.watch().resume_after(first).await.unwrap();
    let ev = resumed.next().await.unwrap().unwrap();
    assert_eq!(ev.document_key, Some(doc! {"_id": 1}));
    assert_eq!(ev.cluster_time, Some(ts(503)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_resumes_after_a_restart_on_lsm() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("data");
    let (port, member) = lsm_member(dir.path(), &dbpath);
    let cfg = move || {
        let mut c = member();
        c.enable_test_commands = true;
        c
    };
    let server = start_retrying(&cfg).await;
    initiate(port).await;
    let client = direct_client(port).await;
    write_oplog(
        &client,
        vec![
            entry(600, "i", "d.c", doc! {"_id": 1}, None),
            entry(601, "i", "d.c", doc! {"_id": 2}, None),
        ],
    )
    .await;
    let db = client.database("d");
    let r = open_c(&db, doc! {"startAtOperationTime": ts(600)}).await;
    let first = first_batch(&r)[0].get_document("_id").unwrap().clone();
    shutdown_by_command(server, client).await;

    let server = start_retrying(cfg).await;
    let client = direct_client(port).await;
    let db = client.database("d");
    let r = open_c(&db, doc! {"resumeAfter": first}).await;
    let events = first_batch(&r);
    assert_eq!(events.len(), 1);
    assert_eq!(
        events[0].get_document("documentKey").unwrap(),
        &doc! {"_id": 2}
    );
    shutdown_by_command(server, client).await;
}

/// The next `n` events of a stream (read as plain documents, since the
/// driver's event type leaves out fields such as `collectionUUID`).
async fn next_events(
    stream: &mut mongodb::change_stream::ChangeStream<Document>,
    n: usize,
) -> Vec<Document> {
    use futures::StreamExt;
    let mut out = Vec::new();
    for _ in 0..n {
        let ev = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .expect("an event within 10 s")
            .unwrap()
            .unwrap();
        out.push(ev);
    }
    out
}

fn kinds(events: &[Document]) -> Vec<String> {
    events
        .iter()
        .map(|e| e.get_str("operationType").unwrap().to_string())
        .collect()
}

#[tokio::test]
async fn events_of_real_writes() {
    let (_server, rs) = rs_client().await;
    let db = rs.database("app");
    let coll = db.collection::<Document>("c");
    db.create_collection("c").await.unwrap();
    let mut stream = coll
        .watch()
        .full_document(mongodb::options::FullDocumentType::UpdateLookup)
        .await
        .unwrap()
        .with_type::<Document>();
    let mut db_stream = db
        .watch()
        .show_expanded_events(true)
        .await
        .unwrap()
        .with_type::<Document>();
    // Large enough that an update's diff is smaller than the document (else
    // the entry is a replacement, as mongod's).
    let pad = "x".repeat(200);
    coll.insert_one(doc! {"_id": 1, "a": 1, "arr": [1, 2, 3], "o": {"1": 0}, "pad": &pad})
        .await
        .unwrap();
    coll.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a": 2, "o.1": 5}, "$unset": {"gone": ""}, "$pop": {"arr": 1}},
    )
    .await
    .unwrap();
    coll.replace_one(doc! {"_id": 1}, doc! {"z": 1})
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": 1}).await.unwrap();
    coll.create_index(mongodb::IndexModel::builder().keys(doc! {"x": 1}).build())
        .await
        .unwrap();
    coll.drop().await.unwrap();

    let events = next_events(&mut stream, 6).await;
    assert_eq!(
        kinds(&events),
        [
            "insert",
            "update",
            "replace",
            "delete",
            "drop",
            "invalidate"
        ]
    );
    assert_eq!(
        events[0].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "a": 1, "arr": [1, 2, 3], "o": {"1": 0}, "pad": &pad}
    );
    let desc = events[1].get_document("updateDescription").unwrap();
    assert_eq!(
        desc.get_document("updatedFields").unwrap().get("a"),
        Some(&Bson::Int32(2))
    );
    assert_eq!(
        desc.get_document("updatedFields").unwrap().get("o.1"),
        Some(&Bson::Int32(5))
    );
    assert_eq!(
        desc.get_array("truncatedArrays").unwrap(),
        &vec![Bson::Document(doc! {"field": "arr", "newSize": 2})]
    );
    assert!(!desc.contains_key("disambiguatedPaths"));
    // updateLookup reads the document as it is when the event is returned:
    // deleted since, so null.
    assert!(matches!(
        events[1].get("fullDocument"),
        None | Some(Bson::Null)
    ));
    assert_eq!(
        events[2].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "z": 1}
    );
    let tokens: Vec<String> = events.iter().map(token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");

    let events = next_events(&mut db_stream, 6).await;
    assert_eq!(
        kinds(&events),
        [
            "insert",
            "update",
            "replace",
            "delete",
            "createIndexes",
            "drop"
        ]
    );
    let desc = events[1].get_document("updateDescription").unwrap();
    assert_eq!(
        desc.get_document("disambiguatedPaths").unwrap(),
        &doc! {"o.1": ["o", "1"]}
    );
    assert!(events[0].contains_key("collectionUUID"));
    assert_eq!(
        events[4]
            .get_document("operationDescription")
            .unwrap()
            .get_array("indexes")
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn rename_and_drop_database() {
    let (_server, rs) = rs_client().await;
    let db = rs.database("app2");
    db.collection::<Document>("a")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let mut stream = db
        .collection::<Document>("a")
        .watch()
        .await
        .unwrap()
        .with_type::<Document>();
    let mut db_stream = db.watch().await.unwrap().with_type::<Document>();
    rs.database("admin")
        .run_command(doc! {"renameCollection": "app2.a", "to": "app2.b"})
        .await
        .unwrap();
    let events = next_events(&mut stream, 2).await;
    assert_eq!(kinds(&events), ["rename", "invalidate"]);
    assert_eq!(
        events[0].get_document("to").unwrap(),
        &doc! {"db": "app2", "coll": "b"}
    );
    db.drop().await.unwrap();
    // As mongod: the database's collections' drops, then dropDatabase,
    // which ends a database stream.
    let events = next_events(&mut db_stream, 3).await;
    assert_eq!(kinds(&events), ["rename", "drop", "dropDatabase"]);
    let last = next_events(&mut db_stream, 1).await;
    assert_eq!(kinds(&last), ["invalidate"]);
}

/// What pymongo's change-stream suite needs beyond the events themselves: a
/// `collMod` that changes nothing is still a `modify` event, an operator
/// update of a small document is an `update` (its diff, never the whole
/// document), an explicit read concern other than majority is refused, and
/// the errors carry the labels drivers decide resuming by.
#[tokio::test]
async fn expanded_events_update_kinds_and_error_labels() {
    let (_ts, client) = setup().await;
    let db = client.database("labels");
    db.create_collection("c").await.unwrap();
    let coll = db.collection::<Document>("c");
    let r = open_c(&db, doc! {"showExpandedEvents": true}).await;
    let id = cursor_id(&r);
    db.run_command(doc! {"collMod": "c"}).await.unwrap();
    coll.insert_one(doc! {"_id": 1, "a": 1}).await.unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"a": 2}})
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 1}, vec![doc! {"$set": {"a": 3}}])
        .await
        .unwrap();
    let events = collect(&db, id, "c", 4).await;
    let kinds: Vec<&str> = events
        .iter()
        .map(|e| e.get_str("operationType").unwrap())
        .collect();
    // The pipeline update's diff is larger than the tiny document: mongod
    // logs it whole, a replacement.
    assert_eq!(kinds, ["modify", "insert", "update", "replace"]);
    assert_eq!(
        events[2]
            .get_document("updateDescription")
            .unwrap()
            .get_document("updatedFields")
            .unwrap(),
        &doc! {"a": 2}
    );

    let local = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}, "readConcern": {"level": "local"}})
        .await;
    expect_code(local, 72);
    db.run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}, "readConcern": {"level": "majority"}})
        .await
        .unwrap();

    // A modified _id is fatal: NonResumableChangeStreamError.
    let e = aggregate(
        &db,
        Bson::String("c".into()),
        vec![
            doc! {"$changeStream": {"startAtOperationTime": Timestamp {time: 1, increment: 0}}},
            doc! {"$project": {"_id": 0}},
        ],
    )
    .await
    .unwrap_err();
    assert!(e.contains_label("NonResumableChangeStreamError"), "{e:?}");

    // failGetMoreAfterCursorCheckout: a resumable code on a change stream's
    // getMore is labelled ResumableChangeStreamError, and the cursor is gone.
    let admin = client.database("admin");
    admin
        .run_command(doc! {"configureFailPoint": "failGetMoreAfterCursorCheckout", "mode": {"times": 1}, "data": {"errorCode": 6}})
        .await
        .unwrap();
    let e = get_more(&db, id, "c", 100).await.unwrap_err();
    assert!(e.contains_label("ResumableChangeStreamError"), "{e:?}");
    expect_code(get_more(&db, id, "c", 100).await, 43);
    // A code that is not resumable gets no label.
    let id = cursor_id(&open_c(&db, doc! {}).await);
    admin
        .run_command(doc! {"configureFailPoint": "failGetMoreAfterCursorCheckout", "mode": {"times": 1}, "data": {"errorCode": 2}})
        .await
        .unwrap();
    let e = get_more(&db, id, "c", 100).await.unwrap_err();
    assert!(!e.contains_label("ResumableChangeStreamError"), "{e:?}");
    // Spent ({times: 1}): the next getMore of another stream runs.
    let id = cursor_id(&open_c(&db, doc! {}).await);
    get_more(&db, id, "c", 100).await.unwrap();
}

/// Reads events from cursor `id` on `coll` until `n` came (or 10 s passed).
async fn collect(db: &Database, id: i64, coll: &str, n: usize) -> Vec<Document> {
    let mut events = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(10);
    while events.len() < n && Instant::now() < deadline {
        let r = get_more(db, id, coll, 500).await.unwrap();
        events.extend(
            r.get_document("cursor")
                .unwrap()
                .get_array("nextBatch")
                .unwrap()
                .iter()
                .map(|e| e.as_document().unwrap().clone()),
        );
    }
    events
}

/// The first batch's events of an `aggregate` reply.
fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .unwrap()
        .get_array("firstBatch")
        .unwrap()
        .iter()
        .map(|e| e.as_document().unwrap().clone())
        .collect()
}

#[tokio::test]
async fn pre_and_post_images() {
    let (_server, rs, db) = with_pre_images("images").await;
    db.create_collection("off").await.unwrap();
    let listed = db
        .run_command(doc! {"listCollections": 1, "filter": {"name": "c"}})
        .await
        .unwrap();
    let info = &first_batch(&listed)[0];
    assert_eq!(
        info.get_document("options").unwrap(),
        &doc! {"changeStreamPreAndPostImages": {"enabled": true}}
    );
    let coll = db.collection::<Document>("c");
    let off = db.collection::<Document>("off");
    let pad = "p".repeat(300);
    coll.insert_one(doc! {"_id": 1, "a": 1, "arr": [1, 2, 3], "pad": &pad})
        .await
        .unwrap();
    off.insert_one(doc! {"_id": 1, "a": 1}).await.unwrap();
    let start = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}})
        .await
        .unwrap();
    let start = pbrt(&start);

    coll.update_one(
        doc! {"_id": 1},
        doc! {"$set": {"a": 2, "b.c": 1}, "$pop": {"arr": 1}},
    )
    .await
    .unwrap();
    coll.replace_one(doc! {"_id": 1}, doc! {"r": 1, "pad": &pad})
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": 1}).await.unwrap();
    // A transaction: each operation's pre-image under its applyOps index.
    coll.insert_many([doc! {"_id": 2, "t": 0}, doc! {"_id": 3, "t": 0}])
        .await
        .unwrap();
    let mut session = rs.start_session().await.unwrap();
    session.start_transaction().await.unwrap();
    coll.update_one(doc! {"_id": 2}, doc! {"$set": {"t": 1}})
        .session(&mut session)
        .await
        .unwrap();
    coll.delete_one(doc! {"_id": 3})
        .session(&mut session)
        .await
        .unwrap();
    session.commit_transaction().await.unwrap();

    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {
            "fullDocument": "required",
            "fullDocumentBeforeChange": "required",
            "resumeAfter": {"_data": &start},
        }}, {"$match": {"operationType": {"$ne": "insert"}}}], "cursor": {}})
        .await
        .unwrap();
    let mut events = first_batch(&r);
    events.extend(collect(&db, cursor_id(&r), "c", 5 - events.len()).await);
    assert_eq!(
        kinds(&events),
        ["update", "replace", "delete", "replace", "delete"]
    );
    // The update's post-image is the update applied to its pre-image.
    assert_eq!(
        events[0].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "a": 2, "arr": [1, 2], "pad": &pad, "b": {"c": 1}}
    );
    assert_eq!(
        events[0].get_document("fullDocumentBeforeChange").unwrap(),
        &doc! {"_id": 1, "a": 1, "arr": [1, 2, 3], "pad": &pad}
    );
    assert_eq!(
        events[1].get_document("fullDocument").unwrap(),
        &doc! {"_id": 1, "r": 1, "pad": &pad}
    );
    assert_eq!(
        events[1].get_document("fullDocumentBeforeChange").unwrap(),
        &doc! {"_id": 1, "a": 2, "arr": [1, 2], "pad": &pad, "b": {"c": 1}}
    );
    assert_eq!(
        events[2].get_document("fullDocumentBeforeChange").unwrap(),
        &doc! {"_id": 1, "r": 1, "pad": &pad}
    );
    assert!(!events[2].contains_key("fullDocument"));
    assert_eq!(
        events[3].get_document("fullDocumentBeforeChange").unwrap(),
        &doc! {"_id": 2, "t": 0}
    );
    assert_eq!(
        events[4].get_document("fullDocumentBeforeChange").unwrap(),
        &doc! {"_id": 3, "t": 0}
    );
    assert!(events[3].contains_key("lsid"));

    // The pre-images as mongod 8 keeps them.
    let uuid = info
        .get_document("info")
        .unwrap()
        .get("uuid")
        .unwrap()
        .clone();
    let stored: Vec<Document> = {
        use futures::TryStreamExt;
        rs.database("config")
            .collection::<Document>("system.preimages")
            .find(doc! {"_id.nsUUID": &uuid})
            .await
            .unwrap()
            .try_collect()
            .await
            .unwrap()
    };
    assert_eq!(stored.len(), 5, "{stored:?}");
    let ids: Vec<&Document> = stored
        .iter()
        .map(|p| p.get_document("_id").unwrap())
        .collect();
    assert!(ids.iter().all(|id| id.get_timestamp("ts").is_ok()));
    let txn: Vec<i64> = ids
        .iter()
        .filter(|id| {
            id.get_timestamp("ts").unwrap() == events[3].get_timestamp("clusterTime").unwrap()
        })
        .map(|id| id.get_i64("applyOpsIndex").unwrap())
        .collect();
    assert_eq!(txn, [0, 1]);
    assert!(stored
        .iter()
        .all(|p| p.get_datetime("operationTime").is_ok() && p.get_document("preImage").is_ok()));

    // whenAvailable on a collection that keeps no pre-images: null.
    let r = db
        .run_command(doc! {"aggregate": "off", "pipeline": [{"$changeStream": {
            "fullDocument": "whenAvailable",
            "fullDocumentBeforeChange": "whenAvailable",
        }}], "cursor": {}})
        .await
        .unwrap();
    let id = cursor_id(&r);
    off.update_one(doc! {"_id": 1}, doc! {"$set": {"a": 2}})
        .await
        .unwrap();
    let events = collect(&db, id, "off", 1).await;
    assert_eq!(events[0].get("fullDocument"), Some(&Bson::Null));
    assert_eq!(events[0].get("fullDocumentBeforeChange"), Some(&Bson::Null));
    // required: 47 NoMatchingDocument, for either image.
    for spec in [
        doc! {"fullDocument": "required"},
        doc! {"fullDocumentBeforeChange": "required"},
    ] {
        let r = db
            .run_command(
                doc! {"aggregate": "off", "pipeline": [{"$changeStream": spec}], "cursor": {}},
            )
            .await
            .unwrap();
        let id = cursor_id(&r);
        off.update_one(doc! {"_id": 1}, doc! {"$inc": {"a": 1}})
            .await
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match get_more(&db, id, "off", 500).await {
                Err(e) => break e,
                Ok(_) if Instant::now() < deadline => continue,
                Ok(r) => panic!("no error: {r:?}"),
            }
        };
        assert_eq!(error_code(&err), Some(47), "{err:?}");
    }
    // Disabled again: updates keep no more pre-images.
    db.run_command(doc! {"collMod": "c", "changeStreamPreAndPostImages": {"enabled": false}})
        .await
        .unwrap();
    coll.update_one(doc! {"_id": 2}, doc! {"$set": {"t": 2}})
        .await
        .unwrap();
    let count = rs
        .database("config")
        .collection::<Document>("system.preimages")
        .count_documents(doc! {"_id.nsUUID": &uuid})
        .await
        .unwrap();
    assert_eq!(count, 5);
}

#[tokio::test]
async fn large_events_split_into_fragments() {
    let (_server, rs, db) = with_pre_images("split").await;
    let coll = db.collection::<Document>("c");
    // Each image is ~7 MiB, the event (update description, pre- and
    // post-image) over 16 MiB.
    let big = |c: &str| c.repeat(7 * 1024 * 1024);
    coll.insert_one(doc! {"_id": "aaa", "a": big("x")})
        .await
        .unwrap();
    let start = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {}}], "cursor": {}})
        .await
        .unwrap();
    let start = pbrt(&start);
    coll.update_one(doc! {"_id": "aaa"}, doc! {"$set": {"a": big("y")}})
        .await
        .unwrap();
    coll.insert_one(doc! {"_id": "small"}).await.unwrap();
    let images = doc! {
        "fullDocument": "required",
        "fullDocumentBeforeChange": "required",
        "resumeAfter": {"_data": &start},
    };

    let metric = |status: &Document, name: &str| {
        status
            .get_document("metrics")
            .unwrap()
            .get_document("changeStreams")
            .unwrap()
            .get_i64(name)
            .unwrap()
    };
    let admin = rs.database("admin");
    let before = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
    // Without the stage, the event is too large: 10334.
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": &images}], "cursor": {"batchSize": 0}})
        .await
        .unwrap();
    expect_code(get_more(&db, cursor_id(&r), "c", 500).await, 10334);
    // Without images it fits and is not split.
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {"resumeAfter": {"_data": &start}}}, {"$changeStreamSplitLargeEvent": {}}], "cursor": {"batchSize": 0}})
        .await
        .unwrap();
    let whole = collect(&db, cursor_id(&r), "c", 1).await;
    assert!(!whole[0].contains_key("splitEvent"));

    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": &images}, {"$changeStreamSplitLargeEvent": {}}], "cursor": {"batchSize": 0}})
        .await
        .unwrap();
    let events = collect(&db, cursor_id(&r), "c", 3).await;
    assert_eq!(events.len(), 3);
    let n = events
        .iter()
        .take_while(|e| e.contains_key("splitEvent"))
        .count();
    assert!(n >= 2, "{n} fragments");
    let mut merged = Document::new();
    for (i, f) in events.iter().take(n).enumerate() {
        assert_eq!(
            f.get_document("splitEvent").unwrap(),
            &doc! {"fragment": i as i32 + 1, "of": n as i32}
        );
        assert!(
            bson::RawDocumentBuf::try_from(f).unwrap().as_bytes().len()
                <= 16 * 1024 * 1024 + 16 * 1024
        );
        for (k, v) in f {
            if k != "_id" && k != "splitEvent" {
                merged.insert(k.clone(), v.clone());
            }
        }
    }
    assert_eq!(merged.get_str("operationType").unwrap(), "update");
    assert_eq!(
        merged
            .get_document("fullDocument")
            .unwrap()
            .get_str("a")
            .unwrap()
            .len(),
        7 * 1024 * 1024
    );
    assert!(merged
        .get_document("fullDocument")
        .unwrap()
        .get_str("a")
        .unwrap()
        .starts_with('y'));
    assert!(merged
        .get_document("fullDocumentBeforeChange")
        .unwrap()
        .get_str("a")
        .unwrap()
        .starts_with('x'));
    let after = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
    assert_eq!(
        metric(&after, "largeEventsFailed") - metric(&before, "largeEventsFailed"),
        1
    );
    assert_eq!(
        metric(&after, "largeEventsSplit") - metric(&before, "largeEventsSplit"),
        1
    );
    let tokens: Vec<String> = events.iter().map(token).collect();
    assert!(tokens.windows(2).all(|w| w[0] < w[1]), "{tokens:?}");
    assert_eq!(
        events[n].get_document("documentKey").unwrap(),
        &doc! {"_id": "small"}
    );

    // Resumed from the first fragment's token: the fragments after it.
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {
            "fullDocument": "required",
            "fullDocumentBeforeChange": "required",
            "resumeAfter": events[0].get_document("_id").unwrap(),
        }}, {"$changeStreamSplitLargeEvent": {}}], "cursor": {"batchSize": 0}})
        .await
        .unwrap();
    let resumed = collect(&db, cursor_id(&r), "c", n).await;
    assert_eq!(
        resumed[0].get_document("splitEvent").unwrap(),
        &doc! {"fragment": 2, "of": n as i32}
    );
    assert_eq!(token(&resumed[0]), tokens[1]);
    // A fragment's token without the stage, or where the event is not
    // split: 280 ChangeStreamFatalError.
    let e = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {"resumeAfter": events[0].get_document("_id").unwrap()}}], "cursor": {}})
        .await;
    expect_code(e, 280);
    let r = db
        .run_command(doc! {"aggregate": "c", "pipeline": [{"$changeStream": {"resumeAfter": events[0].get_document("_id").unwrap()}}, {"$changeStreamSplitLargeEvent": {}}], "cursor": {"batchSize": 0}})
        .await
        .unwrap();
    expect_code(get_more(&db, cursor_id(&r), "c", 500).await, 280);

    // Placement and argument errors.
    for (pipeline, code) in [
        (vec![doc! {"$changeStreamSplitLargeEvent": {}}], 20),
        (
            vec![
                doc! {"$changeStream": {}},
                doc! {"$changeStreamSplitLargeEvent": {}},
                doc! {"$changeStreamSplitLargeEvent": {}},
            ],
            7182802,
        ),
        (
            vec![
                doc! {"$changeStream": {}},
                doc! {"$changeStreamSplitLargeEvent": {}},
                doc! {"$project": {"fullDocument": 0}},
            ],
            7182802,
        ),
        (
            vec![
                doc! {"$changeStream": {}},
                doc! {"$changeStreamSplitLargeEvent": {"x": 1}},
            ],
            7182800,
        ),
    ] {
        expect_code(
            aggregate(&db, Bson::String("c".into()), pipeline).await,
            code,
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pre_images_expire_with_the_oplog() {
    // A 16 MB oplog (`start_repl_set`'s).
    let (server, rs, db) = with_pre_images("expiry").await;
    let coll = db.collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1, "a": 0}).await.unwrap();
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"a": 1}})
        .await
        .unwrap();
    let pre = rs
        .database("config")
        .collection::<Document>("system.preimages");
    assert_eq!(pre.count_documents(doc! {}).await.unwrap(), 1);
    let state = server.server.state.clone();
    let remove = || {
        let state = state.clone();
        tokio::task::spawn_blocking(move || {
            bisondb_server::repl::pre_images::remove_expired(&state).unwrap()
        })
    };
    // The entry is still in the oplog: the pre-image stays.
    assert_eq!(remove().await.unwrap(), 0);
    assert_eq!(pre.count_documents(doc! {}).await.unwrap(), 1);
    // 24 MB of entries push it out of the 16 MB oplog.
    let filler = db.collection::<Document>("filler");
    let mb = "f".repeat(1024 * 1024);
    for i in 0..24 {
        filler.insert_one(doc! {"_id": i, "s": &mb}).await.unwrap();
    }
    assert_eq!(remove().await.unwrap(), 1);
    assert_eq!(pre.count_documents(doc! {}).await.unwrap(), 0);
    // Nothing moved since: no scan, nothing removed.
    assert_eq!(remove().await.unwrap(), 0);
    // Later pre-images are kept.
    coll.update_one(doc! {"_id": 1}, doc! {"$set": {"a": 2}})
        .await
        .unwrap();
    assert_eq!(remove().await.unwrap(), 0);
    assert_eq!(pre.count_documents(doc! {}).await.unwrap(), 1);
}
