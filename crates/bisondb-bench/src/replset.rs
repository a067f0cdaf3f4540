//! The workloads that need a replica set (`bisondb --replSet rs0` after
//! `rs.initiate()`): small multi-document transactions through the driver's
//! session API, and the latency of change events from an insert to its
//! delivery on an awaiting change stream.
//!
//! `transactions`: `--docs` transactions from `--clients` tasks over
//! [`ACCOUNTS`] account documents; each reads one account, moves one unit
//! between two others and commits, and is retried whole on
//! `TransientTransactionError` (its commit alone on
//! `UnknownTransactionCommitResult`), as the drivers' `with_transaction`
//! does. The latency is one transaction's, retries included; after the run
//! the balances must still sum to zero, so a lost or doubled transaction
//! fails the run.
//!
//! `change-events`: one task inserts `--docs` documents one at a time while
//! another waits on a change stream over the collection; an event's latency
//! runs from the start of its insert to its delivery to the stream's reader.
//! Each insert waits for its event before the next, so the figure is the
//! server's wake-up and delivery, not a queue behind a burst.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use futures::StreamExt;
use hdrhistogram::Histogram;
use mongodb::error::Error;
use mongodb::{Client, Collection};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::args::Plan;
use crate::report::{new_histogram, record};
use crate::workload::Phase;

/// Account documents the transactions work on.
pub const ACCOUNTS: u32 = 1000;
/// How long one event may take before the run is called stuck.
const EVENT_TIMEOUT: Duration = Duration::from_secs(30);

/// What a transaction does next after an error, as `with_transaction` decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AfterError {
    /// Abort (if still open) and run the whole transaction again.
    RetryTransaction,
    /// Send `commitTransaction` again.
    RetryCommit,
    /// Give up: the error is the run's.
    Fail,
}

/// The decision for an error with these labels, raised by the body
/// (`in_commit` false) or by `commitTransaction`.
pub fn after_error(transient: bool, unknown_commit: bool, in_commit: bool) -> AfterError {
    match (in_commit, transient, unknown_commit) {
        (true, _, true) => AfterError::RetryCommit,
        (_, true, _) => AfterError::RetryTransaction,
        _ => AfterError::Fail,
    }
}

fn decide(e: &Error, in_commit: bool) -> AfterError {
    after_error(
        e.contains_label("TransientTransactionError"),
        e.contains_label("UnknownTransactionCommitResult"),
        in_commit,
    )
}

/// One transaction's accounts: the one it reads, and the two it moves a unit
/// between (always two different ones).
pub fn pick_accounts(rng: &mut impl Rng, accounts: u32) -> (u32, u32, u32) {
    let read = rng.random_range(0..accounts);
    let from = rng.random_range(0..accounts);
    let to = (from + rng.random_range(1..accounts)) % accounts;
    (read, from, to)
}

/// Sum of the `bal` fields of `docs`; `None` if one is missing or not an
/// integer (the run wrote something else).
pub fn balance_sum(docs: &[Document]) -> Option<i64> {
    docs.iter()
        .map(|d| match d.get("bal") {
            Some(Bson::Int32(v)) => Some(i64::from(*v)),
            Some(Bson::Int64(v)) => Some(*v),
            _ => None,
        })
        .sum()
}

/// The untimed setup of `transactions`: the account documents, replaced.
pub async fn seed_accounts(coll: &Collection<Document>) -> Result<(), String> {
    coll.drop().await.map_err(|e| format!("drop: {e}"))?;
    coll.insert_many((0..ACCOUNTS).map(|i| doc! {"_id": i64::from(i), "bal": 0i64}))
        .await
        .map_err(|e| format!("insert accounts: {e}"))?;
    Ok(())
}

/// Runs one transaction to its commit, retrying as `with_transaction`
/// does; returns how many times it was retried.
async fn one_transaction(
    coll: &Collection<Document>,
    session: &mut mongodb::ClientSession,
    (read, from, to): (u32, u32, u32),
) -> Result<u64, String> {
    let mut retries = 0u64;
    loop {
        session
            .start_transaction()
            .await
            .map_err(|e| format!("startTransaction: {e}"))?;
        let body = async {
            coll.find_one(doc! {"_id": i64::from(read)})
                .session(&mut *session)
                .await?;
            coll.update_one(doc! {"_id": i64::from(from)}, doc! {"$inc": {"bal": -1i64}})
                .session(&mut *session)
                .await?;
            coll.update_one(doc! {"_id": i64::from(to)}, doc! {"$inc": {"bal": 1i64}})
                .session(&mut *session)
                .await?;
            Ok::<(), Error>(())
        }
        .await;
        if let Err(e) = body {
            // Aborting an already aborted transaction is an error the retry
            // does not care about.
            let _ = session.abort_transaction().await;
            match decide(&e, false) {
                AfterError::RetryTransaction => {
                    retries += 1;
                    continue;
                }
                _ => return Err(format!("transaction: {e}")),
            }
        }
        loop {
            match session.commit_transaction().await {
                Ok(()) => return Ok(retries),
                Err(e) => match decide(&e, true) {
                    AfterError::RetryCommit => retries += 1,
                    AfterError::RetryTransaction => {
                        retries += 1;
                        break;
                    }
                    AfterError::Fail => return Err(format!("commitTransaction: {e}")),
                },
            }
        }
    }
}

/// Refuses a target that cannot run these workloads: transactions and
/// change streams need a replica set member (or mongos).
pub async fn require_replica_set(client: &Client) -> Result<(), String> {
    let hello = client
        .database("admin")
        .run_command(doc! {"hello": 1})
        .await
        .map_err(|e| format!("hello: {e}"))?;
    if hello.contains_key("setName") || hello.get_str("msg").ok() == Some("isdbgrid") {
        Ok(())
    } else {
        Err(
            "the target is not a replica set: transactions and change streams need one \
             (start bisondb with --replSet rs0 and run rs.initiate())"
                .into(),
        )
    }
}

/// The timed loop of `transactions`; `retries` counts the retried
/// transactions and commits.
pub(crate) async fn transactions(
    plan: &Plan,
    client: &Client,
    coll: &Collection<Document>,
    done: &Arc<AtomicU64>,
    retries: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let next = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::with_capacity(plan.clients);
    for _ in 0..plan.clients {
        let (client, coll) = (client.clone(), coll.clone());
        let (next, done, retries, n) = (next.clone(), done.clone(), retries.clone(), plan.docs);
        tasks.push(tokio::spawn(async move {
            let mut h = new_histogram();
            let mut rng = StdRng::from_rng(&mut rand::rng());
            let mut session = client
                .start_session()
                .await
                .map_err(|e| format!("startSession: {e}"))?;
            while next.fetch_add(1, Ordering::Relaxed) < n {
                let accounts = pick_accounts(&mut rng, ACCOUNTS);
                let t = Instant::now();
                let r = one_transaction(&coll, &mut session, accounts).await?;
                record(&mut h, t.elapsed().as_micros() as u64);
                retries.fetch_add(r, Ordering::Relaxed);
                done.fetch_add(1, Ordering::Relaxed);
            }
            Ok::<_, String>(h)
        }));
    }
    crate::workload::client_phase(tasks, done).await
}

/// After `transactions`: every committed transfer moved one unit from one
/// account to another, so the balances still sum to zero.
pub async fn check_balances(coll: &Collection<Document>) -> Result<(), String> {
    let docs: Vec<Document> = futures::TryStreamExt::try_collect(
        coll.find(doc! {})
            .await
            .map_err(|e| format!("find accounts: {e}"))?,
    )
    .await
    .map_err(|e| format!("find accounts: {e}"))?;
    if docs.len() != ACCOUNTS as usize {
        return Err(format!(
            "{} account documents after the run, expected {ACCOUNTS}",
            docs.len()
        ));
    }
    match balance_sum(&docs) {
        Some(0) => Ok(()),
        other => Err(format!(
            "the balances sum to {other:?} after the run, expected 0: a transaction was \
             lost, doubled or applied in part"
        )),
    }
}

/// Whether `event` is the insert of the document with `_id` `id`: events
/// must come once each, in insert order.
pub fn check_event(event: &Document, id: i64) -> Result<(), String> {
    let op = event.get_str("operationType").unwrap_or_default();
    let key = event
        .get_document("documentKey")
        .ok()
        .and_then(|k| match k.get("_id") {
            Some(Bson::Int32(v)) => Some(i64::from(*v)),
            Some(Bson::Int64(v)) => Some(*v),
            _ => None,
        });
    if op == "insert" && key == Some(id) {
        Ok(())
    } else {
        Err(format!(
            "expected the insert event of _id {id}, got {op} of {key:?}: {event}"
        ))
    }
}

/// The timed loop of `change-events` (see the module doc).
pub(crate) async fn change_events(
    plan: &Plan,
    coll: &Collection<Document>,
    done: &Arc<AtomicU64>,
) -> Result<Phase, String> {
    let mut stream = coll
        .watch()
        .max_await_time(Duration::from_secs(1))
        .await
        .map_err(|e| format!("watch: {e}"))?
        .with_type::<Document>();
    // The reader hands each event and its arrival time to the writer.
    let (tx, mut rx) =
        tokio::sync::mpsc::unbounded_channel::<Result<(Document, Instant), String>>();
    let reader = tokio::spawn(async move {
        while let Some(e) = stream.next().await {
            let at = Instant::now();
            let item = e
                .map(|e| (e, at))
                .map_err(|e| format!("change stream: {e}"));
            let failed = item.is_err();
            if tx.send(item).is_err() || failed {
                break;
            }
        }
    });
    let mut hist: Histogram<u64> = new_histogram();
    let mut result = Ok(());
    for i in 0..plan.docs {
        let id = i64::try_from(i).unwrap_or(i64::MAX);
        let t = Instant::now();
        if let Err(e) = coll.insert_one(doc! {"_id": id, "v": id}).await {
            result = Err(format!("insert: {e}"));
            break;
        }
        let got = match tokio::time::timeout(EVENT_TIMEOUT, rx.recv()).await {
            Ok(Some(Ok(got))) => got,
            Ok(Some(Err(e))) => {
                result = Err(e);
                break;
            }
            Ok(None) => {
                result = Err("the change stream ended".into());
                break;
            }
            Err(_) => {
                result = Err(format!("no event for _id {id} in {EVENT_TIMEOUT:?}"));
                break;
            }
        };
        if let Err(e) = check_event(&got.0, id) {
            result = Err(e);
            break;
        }
        record(
            &mut hist,
            got.1.saturating_duration_since(t).as_micros() as u64,
        );
        done.fetch_add(1, Ordering::Relaxed);
    }
    reader.abort();
    result?;
    Ok(Phase {
        docs: done.load(Ordering::Relaxed),
        ops: hist.len(),
        hist,
        queries: vec![],
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_retried_as_with_transaction_does() {
        // A transient error in the body or at commit reruns the transaction.
        assert_eq!(
            after_error(true, false, false),
            AfterError::RetryTransaction
        );
        assert_eq!(after_error(true, false, true), AfterError::RetryTransaction);
        // An unknown commit outcome retries the commit alone.
        assert_eq!(after_error(false, true, true), AfterError::RetryCommit);
        assert_eq!(after_error(true, true, true), AfterError::RetryCommit);
        // The commit label means nothing outside a commit; no label: fail.
        assert_eq!(after_error(false, true, false), AfterError::Fail);
        assert_eq!(after_error(false, false, false), AfterError::Fail);
        assert_eq!(after_error(false, false, true), AfterError::Fail);
    }

    #[test]
    fn a_transfer_is_between_two_accounts_in_range() {
        let mut rng = StdRng::seed_from_u64(7);
        let mut reads = std::collections::HashSet::new();
        for _ in 0..10_000 {
            let (read, from, to) = pick_accounts(&mut rng, 5);
            assert!(read < 5 && from < 5 && to < 5);
            assert_ne!(from, to);
            reads.insert(read);
        }
        assert_eq!(reads.len(), 5, "every account gets read");
        // Two accounts: always the other one.
        for _ in 0..100 {
            let (_, from, to) = pick_accounts(&mut rng, 2);
            assert_eq!(from + to, 1);
        }
    }

    #[test]
    fn balances_sum_only_integers() {
        let docs = vec![
            doc! {"_id": 0, "bal": -3i64},
            doc! {"_id": 1, "bal": 2},
            doc! {"_id": 2, "bal": 1i64},
        ];
        assert_eq!(balance_sum(&docs), Some(0));
        assert_eq!(balance_sum(&[]), Some(0));
        assert_eq!(balance_sum(&[doc! {"_id": 0}]), None);
        assert_eq!(balance_sum(&[doc! {"_id": 0, "bal": 1.5}]), None);
    }

    #[test]
    fn events_must_be_the_expected_insert() {
        let event = |op: &str, id: Bson| doc! {"operationType": op, "documentKey": {"_id": id}};
        assert!(check_event(&event("insert", Bson::Int64(4)), 4).is_ok());
        assert!(check_event(&event("insert", Bson::Int32(4)), 4).is_ok());
        assert!(check_event(&event("insert", Bson::Int64(3)), 4).is_err());
        assert!(check_event(&event("delete", Bson::Int64(4)), 4).is_err());
        assert!(check_event(&doc! {"operationType": "insert"}, 4).is_err());
    }
}
