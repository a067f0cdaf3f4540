//! Multi-document transactions (replica-set mode): the statements of a
//! session's transaction (`autocommit: false`, the first with
//! `startTransaction: true`) run in one store transaction
//! (`bisondb_storage::StoreTxn`): they read one engine snapshot plus their
//! own writes, and `commitTransaction` applies every write in one engine
//! batch, so others see all of it or none. Conflicting writes fail at once
//! with 112 WriteConflict (first writer wins); a statement that fails
//! aborts the transaction, as in mongod, and the next one gets 251
//! NoSuchTransaction. Both carry the `TransientTransactionError` label;
//! a commit whose outcome a driver cannot know carries
//! `UnknownTransactionCommitResult`. A transaction older than
//! `transactionLifetimeLimitSeconds` is aborted by the next statement of
//! the session or by the periodic reaper ([`reap`]).
//!
//! The commit is one engine batch with one oplog `applyOps` entry holding
//! every write, and the collections and indexes the transaction created
//! (`c` operations, in statement order): those exist for the transaction
//! alone until then (`bisondb_storage`'s `catalog/txn_ddl.rs`).
//!
//! Gap: a plain write to a document a transaction wrote is not blocked:
//! the transaction's commit then fails with WriteConflict.

use crate::repl::oplog::PreImage;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::StoreTxn;
use bson::{RawBsonRef, RawDocumentBuf};

use super::{add_label, session_id, Txn};
use crate::commands::Context;
use crate::fields::SessionArgs;
use crate::request::CommandRequest;

/// mongod's default `transactionLifetimeLimitSeconds`.
pub const DEFAULT_LIFETIME_SECONDS: u64 = 60;

/// Where a session's transaction stands.
#[derive(Clone)]
pub enum Phase {
    InProgress {
        store: Arc<StoreTxn>,
        started: Instant,
    },
    Committed,
    Aborted,
}

fn no_such_transaction(msg: String) -> MongoError {
    MongoError::new(ErrorCode::NoSuchTransaction, msg)
}

/// Runs a statement of a transaction (or its commit or abort).
pub fn run(
    kind: Txn,
    txn_number: i64,
    args: SessionArgs,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    run: impl FnOnce(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>,
) -> MongoResult<RawDocumentBuf> {
    ctx.state.repl().check_writable()?;
    let id = session_id(req)?;
    let uuid = bson::Uuid::from_bytes(id);
    let session = ctx.state.txns.session(id);
    let _checkout = session.checkout.lock();
    let starting = args.start_transaction == Some(true);
    let read_concern = matches!(req.body.get("readConcern"), Ok(Some(_)));
    let store = {
        let mut s = session.state.lock();
        s.load(ctx, &id)?;
        let limit = Duration::from_secs(ctx.state.config.transaction_lifetime_limit_seconds);
        if let Some(Phase::InProgress { store, started }) = &s.txn {
            if started.elapsed() >= limit {
                store.abort();
                s.txn = Some(Phase::Aborted);
            }
        }
        let cur = s.txn_number;
        if let Some(cur) = cur.filter(|c| txn_number < *c) {
            return Err(MongoError::new(
                ErrorCode::TransactionTooOld,
                format!(
                    "Cannot start transaction {txn_number} on session {uuid} because a newer transaction {cur} has already started."
                ),
            ));
        }
        if starting {
            if cur == Some(txn_number) {
                return Err(MongoError::new(
                    ErrorCode::ConflictingOperationInProgress,
                    format!(
                        "Cannot start a transaction at given transaction number {txn_number} on session {uuid} because a transaction with the same number is in state {}",
                        match &s.txn {
                            Some(Phase::InProgress { .. }) => "TxnState::InProgress",
                            Some(Phase::Committed) => "TxnState::Committed",
                            Some(Phase::Aborted) => "TxnState::Aborted",
                            None => "TxnState::None",
                        }
                    ),
                ));
            }
            if kind == Txn::Ends {
                return Err(no_such_transaction(format!(
                    "Given transaction number {txn_number} does not match any in-progress transactions."
                )));
            }
            check_read_concern(req)?;
            // A new transaction ends any earlier one of the session.
            if let Some(Phase::InProgress { store, .. }) = &s.txn {
                store.abort();
            }
            let storage = &ctx.state.storage;
            // `readConcern: {level: "snapshot", atClusterTime}` reads that
            // point in time (`repl/snapshots.rs`).
            let store = match crate::repl::snapshots::requested(req) {
                Some(Some(at)) => {
                    let (_, snap) =
                        crate::repl::snapshots::snapshot_for(ctx.state.repl(), storage, Some(at))?;
                    storage.begin_transaction_on(snap)
                }
                _ => storage.begin_transaction(),
            }
            .map_err(MongoError::from)?;
            s.txn_number = Some(txn_number);
            s.executed.clear();
            s.history_lost = false;
            s.txn = Some(Phase::InProgress {
                store: store.clone(),
                started: Instant::now(),
            });
            store
        } else {
            if cur != Some(txn_number) || s.txn.is_none() {
                return Err(no_such_transaction(format!(
                    "Given transaction number {txn_number} does not match any in-progress transactions. The active transaction number is {}",
                    cur.unwrap_or(-1)
                )));
            }
            if read_concern && kind != Txn::Ends {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "Only the first command in a transaction may specify a readConcern",
                ));
            }
            match s.txn.clone() {
                Some(Phase::InProgress { store, .. }) => store,
                Some(Phase::Committed) => {
                    return match req.name {
                        // A retried commit of a committed transaction succeeds.
                        "commitTransaction" => crate::reply::ok(bson::doc! {}),
                        _ => Err(MongoError::new(
                            ErrorCode::TransactionCommitted,
                            format!("Transaction with {{ txnNumber: {txn_number} }} has been committed."),
                        )),
                    };
                }
                Some(Phase::Aborted) | None => {
                    return Err(no_such_transaction(format!(
                        "Transaction with {{ txnNumber: {txn_number} }} has been aborted."
                    )));
                }
            }
        }
    };
    match kind {
        Txn::Ends => {
            let committing = req.name == "commitTransaction";
            // The command parses its body (unknown fields are its errors).
            run(req, ctx)?;
            // Asked before the commit, which empties what it wrote.
            let wrote = store_wrote(&store);
            let outcome = if committing {
                let lsid = super::record_key(&id);
                let oplog = ctx.state.repl().oplog().clone();
                store
                    .commit(&mut |ops, batch, write| {
                        if ops.is_empty() || !oplog.is_active() {
                            return write(batch);
                        }
                        let entry = apply_ops_entry(ops, &lsid, txn_number);
                        // Each operation's pre-image is keyed by its place
                        // in the one `applyOps` entry.
                        let pre: Vec<PreImage<'_>> = ops
                            .iter()
                            .enumerate()
                            .filter_map(|(i, op)| {
                                op.before.as_deref().map(|before| PreImage {
                                    entry: 0,
                                    uuid: op.uuid,
                                    apply_ops_index: i64::try_from(i).unwrap_or(i64::MAX),
                                    before,
                                })
                            })
                            .collect();
                        oplog.append_with_pre_images(batch, &entry, &pre, write)?;
                        Ok(())
                    })
                    .map_err(MongoError::from)
            } else {
                store.abort();
                Ok(())
            };
            let mut s = session.state.lock();
            s.txn = Some(match outcome {
                Ok(()) if committing => Phase::Committed,
                _ => Phase::Aborted,
            });
            drop(s);
            outcome?;
            if committing && wrote {
                super::retryable::write_record(ctx, &id, txn_number, true)?;
            }
            crate::reply::ok(bson::doc! {})
        }
        Txn::Refused => {
            abort(&session, &store);
            Err(MongoError::new(
                ErrorCode::OperationNotSupportedInTransaction,
                format!("Cannot run '{}' in a multi-document transaction.", req.name),
            ))
        }
        Txn::Allowed | Txn::RetryableWrite => {
            if req.name == "aggregate" && crate::fail_points::ends_in_out_or_merge(req.body) {
                abort(&session, &store);
                return Err(MongoError::new(
                    ErrorCode::OperationNotSupportedInTransaction,
                    "Cannot run aggregate with $out or $merge in a multi-document transaction.",
                ));
            }
            let result = store.run(|| run(req, ctx)).and_then(conflict_as_error);
            // A statement that fails ends its transaction, as in mongod.
            let failed = match &result {
                Err(_) => true,
                Ok(r) => matches!(r.get("writeErrors"), Ok(Some(_))),
            };
            if failed {
                abort(&session, &store);
            }
            result
        }
    }
}

/// A write conflict inside a transaction fails the command, as mongod's
/// (the whole transaction is retried), rather than being one write error.
fn conflict_as_error(reply: RawDocumentBuf) -> MongoResult<RawDocumentBuf> {
    if let Ok(Some(RawBsonRef::Array(errors))) = reply.get("writeErrors") {
        for e in errors.into_iter().flatten() {
            if let RawBsonRef::Document(e) = e {
                if matches!(e.get("code"), Ok(Some(RawBsonRef::Int32(112)))) {
                    let msg = match e.get("errmsg") {
                        Ok(Some(RawBsonRef::String(m))) => m.to_string(),
                        _ => "WriteConflict".to_string(),
                    };
                    return Err(MongoError::new(ErrorCode::WriteConflict, msg));
                }
            }
        }
    }
    Ok(reply)
}

/// The oplog entry of a committed transaction, as mongod writes one that
/// fits in one entry: a command on `admin.$cmd` whose `applyOps` holds
/// every write, with the session's `lsid` and `txnNumber`.
fn apply_ops_entry(
    ops: &[bisondb_storage::TxnOp],
    lsid: &bson::Document,
    txn_number: i64,
) -> bson::Document {
    let inner: Vec<bson::Bson> = ops
        .iter()
        .map(|op| {
            let o = bson::Document::try_from(op.o.as_ref()).unwrap_or_default();
            let mut e =
                bson::doc! {"op": op.op, "ns": op.ns.as_str(), "ui": op.uuid, "o": o.clone()};
            if op.op == "u" {
                e.insert(
                    "o2",
                    bson::doc! {"_id": o.get("_id").cloned().unwrap_or(bson::Bson::Null)},
                );
            }
            bson::Bson::Document(e)
        })
        .collect();
    bson::doc! {
        "op": "c",
        "ns": "admin.$cmd",
        "o": {"applyOps": inner},
        "lsid": lsid.clone(),
        "txnNumber": txn_number,
        "stmtId": 0i32,
        "prevOpTime": {"ts": bson::Timestamp { time: 0, increment: 0 }, "t": -1i64},
    }
}

/// Whether a committed store transaction wrote (the session record is
/// written only then).
fn store_wrote(store: &StoreTxn) -> bool {
    store.wrote()
}

fn abort(session: &super::Session, store: &StoreTxn) {
    store.abort();
    session.state.lock().txn = Some(Phase::Aborted);
}

/// The read concerns a transaction may start with.
fn check_read_concern(req: &CommandRequest<'_>) -> MongoResult<()> {
    let Ok(Some(RawBsonRef::Document(rc))) = req.body.get("readConcern") else {
        return Ok(());
    };
    match rc.get("level") {
        Ok(None) | Ok(Some(RawBsonRef::String("local" | "majority" | "snapshot"))) => Ok(()),
        _ => Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "The readConcern level must be either 'local' (default), 'majority' or 'snapshot' in order to run in a transaction",
        )),
    }
}

/// Codes after which the whole transaction may be retried, as mongod's
/// `isTransientTransactionError`: WriteConflict, LockTimeout,
/// PreparedTransactionInProgress and the snapshot errors (SnapshotTooOld,
/// StaleChunkHistory, SnapshotUnavailable). NoSuchTransaction is one too,
/// except on a commit or abort that also got a write concern error.
const TRANSIENT_CODES: &[i32] = &[112, 24, 267, 239, 241, 246];

/// Write concern errors that say the commit's write concern can never be
/// satisfied (UnsatisfiableWriteConcern, UnknownReplWriteConcern): retrying
/// the commit cannot help, so mongod gives them no
/// `UnknownTransactionCommitResult`.
const UNSATISFIABLE_WRITE_CONCERN: &[i32] = &[100, 79];

/// The labels of a transaction statement's reply: `TransientTransactionError`
/// on the [`TRANSIENT_CODES`] and NoSuchTransaction (the whole transaction
/// may be retried), `UnknownTransactionCommitResult` on a commit whose
/// outcome is unknown (a write concern error that may yet be satisfied, a
/// retryable error, a time limit).
pub fn label_reply(body: &bson::RawDocument, reply: &mut RawDocumentBuf) {
    if matches!(reply.get("errorLabels"), Ok(Some(_))) {
        return;
    }
    let failed = super::failed(reply);
    let code_of = super::code_of;
    let first = body
        .iter()
        .next()
        .and_then(Result::ok)
        .map(|(k, _)| k.as_str());
    let committing = first == Some("commitTransaction");
    let ending = committing || first == Some("abortTransaction");
    let wce_code = match reply.get("writeConcernError") {
        Ok(Some(RawBsonRef::Document(w))) => Some(code_of(w)),
        _ => None,
    };
    if failed {
        let code = code_of(reply);
        let no_such = code == Some(251) && !(ending && wce_code.is_some());
        // A statement (not the commit or abort) failing with a retryable
        // error may be retried with the whole transaction, as mongod's
        // isTransientTransactionError says.
        let retryable_statement =
            !ending && code.is_some_and(|c| super::RETRYABLE_CODES.contains(&c));
        if no_such || retryable_statement || code.is_some_and(|c| TRANSIENT_CODES.contains(&c)) {
            add_label(reply, "TransientTransactionError");
        } else if committing && code.is_some_and(|c| c == 50 || super::RETRYABLE_CODES.contains(&c))
        {
            add_label(reply, "UnknownTransactionCommitResult");
        }
    } else if committing
        && wce_code.is_some_and(|c| !c.is_some_and(|c| UNSATISFIABLE_WRITE_CONCERN.contains(&c)))
    {
        add_label(reply, "UnknownTransactionCommitResult");
    }
}

/// Aborts the transactions older than `transactionLifetimeLimitSeconds`
/// (and the writes they hold); run periodically.
pub fn reap(state: &crate::state::ServerState) {
    let limit = Duration::from_secs(state.config.transaction_lifetime_limit_seconds);
    let sessions: Vec<Arc<super::Session>> = state.txns.sessions.lock().values().cloned().collect();
    for session in sessions {
        let mut s = session.state.lock();
        if let Some(Phase::InProgress { store, started }) = &s.txn {
            if started.elapsed() >= limit {
                store.abort();
                s.txn = Some(Phase::Aborted);
            }
        }
    }
}

/// Aborts the open transactions of the sessions `ids` names (the session
/// kill commands, and a session's end).
pub fn abort_sessions(state: &crate::state::ServerState, matches: impl Fn(&[u8; 16]) -> bool) {
    let sessions: Vec<Arc<super::Session>> = state
        .txns
        .sessions
        .lock()
        .iter()
        .filter(|(id, _)| matches(id))
        .map(|(_, s)| s.clone())
        .collect();
    for session in sessions {
        let mut s = session.state.lock();
        if let Some(Phase::InProgress { store, .. }) = &s.txn {
            store.abort();
            s.txn = Some(Phase::Aborted);
        }
    }
}

/// Runs [`reap`] every second until shutdown.
pub fn spawn_reaper(state: Arc<crate::state::ServerState>) -> tokio::task::JoinHandle<()> {
    crate::background::spawn_periodic(state, Duration::from_secs(1), |st| async move { reap(&st) })
}
