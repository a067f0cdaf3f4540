//! Crash tests of replica-set mode through the real binary (issue 17, "How
//! it is shown"): `bisondb --replSet rs0` on the lsm engine is killed with
//! SIGKILL while several clients run multi-document transactions (some
//! conflicting, some aborted, one left open) and retryable writes, then
//! restarted on the same dbpath, several rounds. After each restart:
//!
//! - every acknowledged transaction is there whole, nothing of an aborted or
//!   uncommitted one is visible, and the balance the transfers move keeps
//!   its sum;
//! - a retryable write resent with its `lsid`/`txnNumber` after the restart
//!   runs exactly once, whether or not its first attempt got in;
//! - `validate` is clean and its counts and index keys match the documents;
//! - replaying the oplog's entries for the collection from its creation gives
//!   exactly the stored documents;
//! - a change stream resumed from a token taken before the kill delivers
//!   every event after it exactly once, in oplog order.
//!
//! `BISONDB_CRASH_ROUNDS` sets the number of rounds (3 by default).

#![cfg(unix)]

mod support;

use std::collections::{BTreeMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::TryStreamExt;
use mongodb::bson::{doc, Bson, Document, Timestamp};
use mongodb::change_stream::event::{ChangeStreamEvent, OperationType, ResumeToken};
use mongodb::{Client, Collection};
use support::{free_port, initiate, primary, start_member, uri, Bison};

const DB: &str = "crash";
const COLL: &str = "c";
/// The accounts the transactions move balance between (a sum invariant).
const ACCOUNTS: usize = 5;
const BALANCE: i64 = 1000;
const TXN_WRITERS: usize = 3;
const RETRY_WRITERS: usize = 2;

/// Set just before the server is killed: client errors are expected after.
static KILLED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// A client task stops at an error, which must come from the kill.
fn gone(what: &str, e: &mongodb::error::Error) {
    assert!(
        KILLED.load(Ordering::SeqCst),
        "{what} failed before the kill: {e}"
    );
}

fn has_label(e: &mongodb::error::Error, label: &str) -> bool {
    e.contains_label(label)
}

/// What one transaction writer got acknowledged: `acked` transactions
/// committed, `attempted` whose commit was at least sent.
#[derive(Default)]
struct TxnProgress {
    acked: AtomicU64,
    attempted: AtomicU64,
}

/// One transaction writer: transaction `i` reads an account, inserts three
/// documents `t-<tag>-<i>-<k>`, sets its counter to `i + 1` and moves one
/// unit between two shared accounts (so writers conflict and retry, as
/// `with_transaction` does on TransientTransactionError). Every fourth one
/// writes marked documents and an unbalanced transfer, then aborts.
async fn txn_writer(client: Client, tag: String, progress: Arc<TxnProgress>) {
    let coll = client.database(DB).collection::<Document>(COLL);
    let mut s = match client.start_session().await {
        Ok(s) => s,
        Err(e) => return gone("startSession", &e),
    };
    let mut i: u64 = 0;
    let mut aborts: u64 = 0;
    loop {
        let abort = (i + aborts) % 4 == 3;
        if let Err(e) = s.start_transaction().await {
            return gone("startTransaction", &e);
        }
        let from = format!("a{}", (i as usize) % ACCOUNTS);
        let to = format!("a{}", (i as usize + 1) % ACCOUNTS);
        let body = async {
            coll.find_one(doc! {"_id": &from}).session(&mut s).await?;
            if abort {
                coll.insert_one(doc! {"_id": format!("x-{tag}-{aborts}"), "aborted": true})
                    .session(&mut s)
                    .await?;
                coll.update_one(doc! {"_id": &from}, doc! {"$inc": {"bal": 1000}})
                    .session(&mut s)
                    .await?;
                return Ok(());
            }
            let docs: Vec<Document> = (0..3)
                .map(
                    |k| doc! {"_id": format!("t-{tag}-{i}-{k}"), "tw": &tag, "i": i as i64, "k": k},
                )
                .collect();
            coll.insert_many(docs).session(&mut s).await?;
            coll.update_one(
                doc! {"_id": format!("tc-{tag}")},
                doc! {"$set": {"n": (i + 1) as i64}},
            )
            .upsert(true)
            .session(&mut s)
            .await?;
            coll.update_one(doc! {"_id": &from}, doc! {"$inc": {"bal": -1}})
                .session(&mut s)
                .await?;
            coll.update_one(doc! {"_id": &to}, doc! {"$inc": {"bal": 1}})
                .session(&mut s)
                .await?;
            Ok::<(), mongodb::error::Error>(())
        }
        .await;
        match body {
            Ok(()) if abort => {
                if let Err(e) = s.abort_transaction().await {
                    return gone("abortTransaction", &e);
                }
                aborts += 1;
            }
            Ok(()) => {
                progress.attempted.store(i + 1, Ordering::SeqCst);
                let committed = loop {
                    match s.commit_transaction().await {
                        Ok(()) => break true,
                        // The server is gone: the check after the restart
                        // allows either outcome of this commit.
                        Err(e) if KILLED.load(Ordering::SeqCst) => {
                            return gone("commitTransaction", &e)
                        }
                        Err(e) if has_label(&e, "UnknownTransactionCommitResult") => {}
                        Err(e) if has_label(&e, "TransientTransactionError") => break false,
                        Err(e) => return gone("commitTransaction", &e),
                    }
                };
                if committed {
                    i += 1;
                    progress.acked.store(i, Ordering::SeqCst);
                }
            }
            Err(e) if has_label(&e, "TransientTransactionError") => {
                let _ = s.abort_transaction().await;
                if KILLED.load(Ordering::SeqCst) {
                    return gone("a transaction", &e);
                }
            }
            Err(e) => return gone("a transaction", &e),
        }
    }
}

/// The statement retryable writer `id` sends as `txnNumber` `t`: odd numbers
/// insert `r-<id>-<t>`, even ones increment the counter `rc-<id>`.
fn retryable_statement(id: &str, lsid: &Document, t: i64) -> Document {
    if t % 2 == 1 {
        doc! {"insert": COLL, "documents": [{"_id": format!("r-{id}-{t}"), "rw": id}],
        "lsid": lsid.clone(), "txnNumber": t}
    } else {
        doc! {"update": COLL, "updates": [{"q": {"_id": format!("rc-{id}")}, "u": {"$inc": {"n": 1}}, "upsert": true}],
        "lsid": lsid.clone(), "txnNumber": t}
    }
}

/// One retryable writer: statements 1, 2, ... on its own session; `sent`
/// is the last number sent (before it is sent).
async fn retry_writer(client: Client, id: String, lsid: Document, sent: Arc<AtomicU64>) {
    let db = client.database(DB);
    let mut t: i64 = 1;
    loop {
        sent.store(t as u64, Ordering::SeqCst);
        match db.run_command(retryable_statement(&id, &lsid, t)).await {
            Ok(r) => assert!(
                !r.contains_key("writeErrors"),
                "retryable write {t} of {id}: {r}"
            ),
            Err(e) => return gone("a retryable write", &e),
        }
        t += 1;
    }
}

/// The operations the oplog records on `crash.c`, in order, with the
/// timestamp of their entry: plain entries and the inner operations of a
/// transaction's `applyOps` (each inner op carries its entry's `ts`).
async fn oplog_ops(client: &Client) -> Vec<(Timestamp, Document)> {
    let ns = format!("{DB}.{COLL}");
    let oplog = client.database("local").collection::<Document>("oplog.rs");
    let entries: Vec<Document> = oplog
        .find(doc! {})
        .sort(doc! {"$natural": 1})
        .await
        .expect("oplog")
        .try_collect()
        .await
        .expect("oplog read");
    let mut ops = Vec::new();
    let mut created = false;
    for e in entries {
        let ts = e.get_timestamp("ts").expect("ts");
        let op = e.get_str("op").unwrap_or_default();
        if op == "c" {
            if let Ok(apply) = e.get_document("o").and_then(|o| o.get_array("applyOps")) {
                for inner in apply {
                    let inner = inner.as_document().expect("applyOps op");
                    if inner.get_str("ns").ok() == Some(ns.as_str()) {
                        ops.push((ts, inner.clone()));
                    }
                }
            } else if e.get_str("ns").ok() == Some(&format!("{DB}.$cmd"))
                && e.get_document("o")
                    .ok()
                    .and_then(|o| o.get_str("create").ok())
                    == Some(COLL)
            {
                created = true;
            }
        } else if e.get_str("ns").ok() == Some(ns.as_str()) {
            ops.push((ts, e));
        }
    }
    assert!(created, "the oplog lost the collection's create entry");
    ops
}

fn id_of(op: &Document) -> String {
    let key = match op.get_str("op").expect("op") {
        "u" => op.get_document("o2").expect("o2"),
        _ => op.get_document("o").expect("o"),
    };
    key.get_str("_id").expect("string _id").to_string()
}

/// Applies a `$v: 2` update diff; the workload only changes top-level
/// fields, so a nested diff means the oplog is not what the test wrote.
fn apply_diff(doc: &mut Document, diff: &Document) {
    for (k, v) in diff {
        match (k.as_str(), v) {
            ("u" | "i", Bson::Document(fields)) => {
                for (f, v) in fields {
                    doc.insert(f.clone(), v.clone());
                }
            }
            ("d", Bson::Document(fields)) => {
                for f in fields.keys() {
                    doc.remove(f);
                }
            }
            _ => panic!("unexpected diff section {k}: {diff}"),
        }
    }
}

/// The documents replaying `ops` gives.
fn replay(ops: &[(Timestamp, Document)]) -> BTreeMap<String, Document> {
    let mut docs = BTreeMap::new();
    for (_, op) in ops {
        let id = id_of(op);
        let o = op.get_document("o").expect("o");
        match op.get_str("op").expect("op") {
            "i" => {
                assert!(docs.insert(id, o.clone()).is_none(), "insert twice: {op}");
            }
            "d" => {
                assert!(docs.remove(&id).is_some(), "delete of a missing doc: {op}");
            }
            "u" => {
                let d = docs
                    .get_mut(&id)
                    .unwrap_or_else(|| panic!("update of a missing doc: {op}"));
                if o.get("$v").is_some() {
                    apply_diff(d, o.get_document("diff").expect("diff"));
                } else {
                    *d = o.clone();
                }
            }
            other => panic!("unexpected op {other}: {op}"),
        }
    }
    docs
}

/// The oplog kind an event stands for (update and replace are both `u`).
fn event_kind(e: &ChangeStreamEvent<Document>) -> &'static str {
    match e.operation_type {
        OperationType::Insert => "i",
        OperationType::Update | OperationType::Replace => "u",
        OperationType::Delete => "d",
        ref other => panic!("unexpected event {other:?}"),
    }
}

fn event_id(e: &ChangeStreamEvent<Document>) -> String {
    e.document_key
        .as_ref()
        .and_then(|k| k.get_str("_id").ok())
        .expect("documentKey._id")
        .to_string()
}

/// A token taken before the kill: the event's cluster time and how many
/// events at that time the stream had delivered up to it (a transaction's
/// events share one).
struct Taken {
    token: ResumeToken,
    time: Timestamp,
    at_time: usize,
}

/// Reads events until it has `n` of them (at most 60 s); returns the token
/// of the last.
async fn take_token(
    stream: &mut mongodb::change_stream::ChangeStream<ChangeStreamEvent<Document>>,
    n: usize,
) -> Taken {
    let started = Instant::now();
    let mut seen: Vec<ChangeStreamEvent<Document>> = Vec::new();
    while seen.len() < n {
        assert!(started.elapsed() < Duration::from_secs(60), "no events");
        if let Some(e) = stream.next_if_any().await.expect("change stream") {
            seen.push(e);
        }
    }
    let last = seen.last().expect("events");
    let time = last.cluster_time.expect("clusterTime");
    Taken {
        token: last.id.clone(),
        time,
        at_time: seen.iter().filter(|e| e.cluster_time == Some(time)).count(),
    }
}

/// Every check after a restart (see the module doc); `marker` is this
/// round's marker document, inserted so the resumed stream has an end.
#[allow(clippy::too_many_arguments)]
async fn verify(
    client: &Client,
    round: usize,
    txns: &[(String, Arc<TxnProgress>)],
    retries: &[(String, Document, Arc<AtomicU64>)],
    taken: Option<&Taken>,
) {
    let db = client.database(DB);
    let coll: Collection<Document> = db.collection(COLL);

    // Retryable writes: resend the last statement of each writer; it must
    // run exactly once in all.
    for (id, lsid, sent) in retries {
        let t = sent.load(Ordering::SeqCst) as i64;
        if t == 0 {
            continue;
        }
        let r = db
            .run_command(retryable_statement(id, lsid, t))
            .await
            .unwrap_or_else(|e| panic!("round {round}: resent {t} of {id}: {e}"));
        assert!(!r.contains_key("writeErrors"), "resent {t} of {id}: {r}");
        let inserted = coll.count_documents(doc! {"rw": id}).await.expect("count");
        assert_eq!(
            inserted,
            (t as u64).div_ceil(2),
            "round {round}: inserts of {id}"
        );
        let n = coll
            .find_one(doc! {"_id": format!("rc-{id}")})
            .await
            .expect("find")
            .map(|d| {
                d.get_i32("n")
                    .map(i64::from)
                    .or_else(|_| d.get_i64("n"))
                    .expect("n")
            })
            .unwrap_or(0);
        assert_eq!(n, t / 2, "round {round}: increments of {id}");
    }

    // Transactions: whole or absent.
    for (tag, p) in txns {
        let acked = p.acked.load(Ordering::SeqCst);
        let attempted = p.attempted.load(Ordering::SeqCst);
        let n = coll
            .find_one(doc! {"_id": format!("tc-{tag}")})
            .await
            .expect("find")
            .map(|d| d.get_i64("n").expect("n") as u64)
            .unwrap_or(0);
        assert!(
            acked <= n && n <= attempted.max(acked),
            "round {round}, writer {tag}: counter {n}, acknowledged {acked}, attempted {attempted}"
        );
        let docs: Vec<Document> = coll
            .find(doc! {"tw": tag})
            .await
            .expect("find")
            .try_collect()
            .await
            .expect("read");
        let mut per_txn: BTreeMap<i64, usize> = BTreeMap::new();
        for d in &docs {
            *per_txn.entry(d.get_i64("i").expect("i")).or_default() += 1;
        }
        let expected: BTreeMap<i64, usize> = (0..n as i64).map(|i| (i, 3)).collect();
        assert_eq!(
            per_txn, expected,
            "round {round}, writer {tag}: counter {n}"
        );
    }
    let aborted = coll
        .count_documents(doc! {"$or": [{"aborted": true}, {"open": true}]})
        .await
        .expect("count");
    assert_eq!(aborted, 0, "round {round}: aborted or open writes visible");
    let accounts: Vec<Document> = coll
        .find(doc! {"_id": {"$regex": "^a[0-9]$"}})
        .await
        .expect("find")
        .try_collect()
        .await
        .expect("read");
    assert_eq!(accounts.len(), ACCOUNTS);
    let sum: i64 = accounts
        .iter()
        .map(|d| d.get_i64("bal").expect("bal"))
        .sum();
    assert_eq!(
        sum,
        ACCOUNTS as i64 * BALANCE,
        "round {round}: {accounts:?}"
    );

    // validate: clean, and its counts agree with the documents.
    let v = db
        .run_command(doc! {"validate": COLL, "full": true})
        .await
        .expect("validate");
    assert_eq!(v.get_bool("valid").ok(), Some(true), "round {round}: {v}");
    let count = coll.count_documents(doc! {}).await.expect("count");
    let nrecords = v
        .get("nrecords")
        .and_then(Bson::as_i64)
        .or_else(|| v.get_i32("nrecords").ok().map(i64::from))
        .expect("nrecords");
    assert_eq!(nrecords as u64, count, "round {round}: {v}");
    let keys = v.get_document("keysPerIndex").expect("keysPerIndex");
    assert_eq!(keys.len(), 3, "{v}");
    for (name, n) in keys {
        let n = n
            .as_i64()
            .or_else(|| n.as_i32().map(i64::from))
            .expect("keys");
        assert_eq!(n as u64, count, "round {round}: index {name}: {v}");
    }

    // The resumed change stream: every event after the token, once.
    let marker = format!("m-{round}");
    if let Some(taken) = taken {
        let mut stream = coll
            .watch()
            .resume_after(taken.token.clone())
            .await
            .expect("resume");
        coll.insert_one(doc! {"_id": &marker})
            .await
            .expect("marker");
        let mut events = Vec::new();
        let started = Instant::now();
        loop {
            assert!(
                started.elapsed() < Duration::from_secs(120),
                "round {round}: the marker never came ({} events)",
                events.len()
            );
            let Some(e) = stream.next_if_any().await.expect("resumed stream") else {
                continue;
            };
            if event_id(&e) == marker {
                break;
            }
            events.push(e);
        }
        let tokens: HashSet<String> = events.iter().map(|e| format!("{:?}", e.id)).collect();
        assert_eq!(tokens.len(), events.len(), "round {round}: an event twice");
        let ops = oplog_ops(client).await;
        let mut skip = taken.at_time;
        let expected: Vec<(String, &'static str)> = ops
            .iter()
            .filter(|(ts, _)| {
                if *ts == taken.time && skip > 0 {
                    skip -= 1;
                    return false;
                }
                *ts >= taken.time
            })
            .map(|(_, op)| {
                let kind = match op.get_str("op").expect("op") {
                    "i" => "i",
                    "u" => "u",
                    _ => "d",
                };
                (id_of(op), kind)
            })
            .filter(|(id, _)| *id != marker)
            .collect();
        let got: Vec<(String, &'static str)> = events
            .iter()
            .map(|e| (event_id(e), event_kind(e)))
            .collect();
        assert_eq!(
            got.len(),
            expected.len(),
            "round {round}: events after the token"
        );
        assert!(
            got == expected,
            "round {round}: events differ from the oplog"
        );
        eprintln!(
            "round {round}: {} events after the token, as the oplog",
            got.len()
        );
    }

    // The oplog replayed gives the stored documents.
    let ops = oplog_ops(client).await;
    let replayed = replay(&ops);
    let stored: BTreeMap<String, Document> = coll
        .find(doc! {})
        .await
        .expect("find")
        .try_collect::<Vec<Document>>()
        .await
        .expect("read")
        .into_iter()
        .map(|d| (d.get_str("_id").expect("_id").to_string(), d))
        .collect();
    assert_eq!(
        replayed.len(),
        stored.len(),
        "round {round}: replayed count"
    );
    for (id, d) in &stored {
        assert_eq!(replayed.get(id), Some(d), "round {round}: document {id}");
    }
    eprintln!(
        "round {round}: {} documents, {} oplog operations replayed",
        stored.len(),
        ops.len()
    );
}

fn start(dbpath: &std::path::Path, port: u16) -> Bison {
    start_member(dbpath, port, "lsm")
}

#[tokio::test(flavor = "multi_thread")]
async fn kill_9_under_transactions_and_retryable_writes() {
    let dir = tempfile::tempdir().expect("tempdir");
    let dbpath = dir.path().join("db");
    std::fs::create_dir_all(&dbpath).expect("dbpath");
    let rounds: usize = std::env::var("BISONDB_CRASH_ROUNDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3);
    let port = free_port();
    let mut server = start(&dbpath, port);
    // Initiate the set and lay out the collection and its indexes.
    let client = initiate(port).await;
    let db = client.database(DB);
    db.create_collection(COLL).await.expect("create");
    let coll = db.collection::<Document>(COLL);
    for keys in [doc! {"tw": 1, "i": 1}, doc! {"rw": 1}] {
        coll.create_index(mongodb::IndexModel::builder().keys(keys).build())
            .await
            .expect("index");
    }
    coll.insert_many((0..ACCOUNTS).map(|a| doc! {"_id": format!("a{a}"), "bal": BALANCE}))
        .await
        .expect("accounts");
    drop(client);

    let mut txns: Vec<(String, Arc<TxnProgress>)> = Vec::new();
    let mut retries: Vec<(String, Document, Arc<AtomicU64>)> = Vec::new();
    for round in 0..rounds {
        let load = Client::with_uri_str(uri(port, 2_000))
            .await
            .expect("client");
        let coll = load.database(DB).collection::<Document>(COLL);
        let mut stream = coll.watch().await.expect("watch");
        let mut tasks = Vec::new();
        for w in 0..TXN_WRITERS {
            let tag = format!("{round}-{w}");
            let p = Arc::new(TxnProgress::default());
            txns.push((tag.clone(), p.clone()));
            tasks.push(tokio::spawn(txn_writer(load.clone(), tag, p)));
        }
        for w in 0..RETRY_WRITERS {
            let id = format!("{round}-{w}");
            let lsid = doc! {"id": mongodb::bson::Uuid::new()};
            let sent = Arc::new(AtomicU64::new(0));
            retries.push((id.clone(), lsid.clone(), sent.clone()));
            tasks.push(tokio::spawn(retry_writer(load.clone(), id, lsid, sent)));
        }
        // A transaction that is never committed.
        let open = load.clone();
        tasks.push(tokio::spawn(async move {
            let c = open.database(DB).collection::<Document>(COLL);
            let Ok(mut s) = open.start_session().await else {
                return;
            };
            if s.start_transaction().await.is_err() {
                return;
            }
            let mut k = 0;
            while c
                .insert_one(doc! {"_id": format!("open-{round}-{k}"), "open": true})
                .session(&mut s)
                .await
                .is_ok()
            {
                k += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }));

        let taken = take_token(&mut stream, 20 + 10 * round).await;
        // Vary where in the load the kill lands.
        tokio::time::sleep(Duration::from_millis(700 + 900 * round as u64)).await;
        KILLED.store(true, Ordering::SeqCst);
        server.0.kill().expect("SIGKILL");
        server.0.wait().expect("wait");
        for t in tasks {
            tokio::time::timeout(Duration::from_secs(60), t)
                .await
                .expect("a client task hung after the kill")
                .expect("client task");
        }
        drop((stream, coll, load));
        let acked: u64 = txns
            .iter()
            .map(|(_, p)| p.acked.load(Ordering::SeqCst))
            .sum();
        eprintln!("round {round}: killed; {acked} transactions acknowledged so far");

        server = start(&dbpath, port);
        let client = primary(port).await;
        KILLED.store(false, Ordering::SeqCst);
        verify(&client, round, &txns, &retries, Some(&taken)).await;
    }
    server.0.kill().expect("kill");
}
