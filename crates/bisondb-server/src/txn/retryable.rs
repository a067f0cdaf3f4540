//! Retryable writes: a write command with `lsid` and `txnNumber` (outside a
//! transaction) executes each of its statements once. A retry with the same
//! number (a driver reconnecting after a network error) gets the outcome of
//! the statements that already ran, and runs only the others; a number
//! older than the session's latest is 225 TransactionTooOld.
//!
//! The session's latest number is kept in `config.transactions` as mongod
//! keeps it (`{_id: {id, uid}, txnNum, lastWriteOpTime, lastWriteDate}`),
//! written in the engine batch of the write it records (with its oplog
//! entries), so an older number is refused after a restart too. What each
//! statement did is kept in memory and, durably, in the write's oplog
//! entries: each carries its `stmtId` and the optime of the session's
//! previous entry (`prevOpTime`). After a restart a retry of the latest
//! number walks that chain back from the record's `lastWriteOpTime`, as
//! mongod does, and answers the statements found there without running
//! them again. Where the chain is gone (entries the capped oplog dropped)
//! or cannot give the answer (a findAndModify's document, which mongod
//! keeps in `config.image_collection`), the retry is 217
//! IncompleteTransactionHistory, mongod's answer when history is lost.

use std::collections::HashMap;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Durability, Modify};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf, Timestamp};

use super::{record_key, session_id, OpTxn, StmtOutcome};
use crate::commands::Context;
use crate::repl::oplog::{OpTime, Retryable};
use crate::request::CommandRequest;

/// Where mongod keeps the sessions' transaction records.
pub const TXN_DB: &str = "config";
pub const TXN_COLL: &str = "transactions";

/// The session id as mongod prints it in messages (a UUID's text form).
fn uuid_text(id: &[u8; 16]) -> String {
    bson::Uuid::from_bytes(*id).to_string()
}

/// Runs a retryable write; see the module documentation. (A mongos keeps
/// what each statement did in the session's record rather than in oplog
/// entries: `repl/oplog.rs`.)
pub fn run(
    txn_number: i64,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    run: impl FnOnce(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>,
) -> MongoResult<RawDocumentBuf> {
    ctx.state.repl().check_writable()?;
    let id = session_id(req)?;
    let session = ctx.state.txns.session(id);
    // One command at a time on a session (mongod's checkout).
    let _checkout = session.checkout.lock();
    // Created before the write takes any lock: its record is written inside
    // the write's batch.
    let records = ctx
        .state
        .storage
        .get_or_create_collection(TXN_DB, TXN_COLL)
        .map_err(MongoError::from)?;
    let last = {
        let mut s = session.state.lock();
        s.load(ctx, &id)?;
        match s.txn_number {
            Some(cur) if txn_number < cur => {
                return Err(MongoError::new(
                    ErrorCode::TransactionTooOld,
                    format!(
                        "Retryable write with txnNumber {txn_number} is prohibited on session {} because a newer retryable write with txnNumber {cur} has already started on this session.",
                        uuid_text(&id)
                    ),
                ));
            }
            Some(cur) if txn_number == cur => {
                if s.history_lost {
                    if let Some(executed) = rebuild(ctx, req, &id, txn_number, s.last_op)? {
                        s.executed = executed;
                        s.history_lost = false;
                    }
                }
                if s.history_lost {
                    return Err(MongoError::new(
                        ErrorCode::IncompleteTransactionHistory,
                        format!(
                            "Incomplete history detected for transaction {txn_number} on session {}",
                            uuid_text(&id)
                        ),
                    ));
                }
            }
            _ => {
                s.txn_number = Some(txn_number);
                s.executed.clear();
                s.history_lost = false;
                s.last_op = None;
            }
        }
        s.last_op
    };
    let op = OpTxn::new(session.clone());
    // findAndModify is one statement whose retry returns its first reply.
    let find_and_modify = req.name.eq_ignore_ascii_case("findAndModify");
    if find_and_modify {
        if let Some(StmtOutcome::Reply(r)) = op.executed(0) {
            return Ok(r);
        }
    }
    let before = session.state.lock().executed.len();
    ctx.conn.txn = Some(op.clone());
    // The oplog entries of its writes carry the session and number, and
    // the session's record goes into their batch.
    let lsid = RawDocumentBuf::try_from(&record_key(&id)).map_err(crate::request::invalid_bson)?;
    let scope = Retryable::new(lsid, txn_number, last, Some(records));
    let (result, scope) = crate::repl::oplog::with_retryable(scope, || {
        if find_and_modify {
            op.write_fault(&ctx.state.fail_points)?;
            crate::repl::oplog::with_stmt(0, || run(req, ctx))
        } else {
            run(req, ctx)
        }
    });
    ctx.conn.txn = None;
    ctx.conn.hang_up |= op.hangs_up();
    session.state.lock().last_op = scope.last;
    let reply = result?;
    if find_and_modify && wrote(&reply) {
        op.record(0, StmtOutcome::Reply(reply.clone()));
        if ctx.state.repl().is_mongos() {
            keep_reply(ctx, &id, txn_number, &reply);
        }
    }
    // A statement that ran without an oplog entry (an update that changed
    // nothing): the record is written on its own.
    if session.state.lock().executed.len() > before && !scope.recorded {
        write_record(ctx, &id, txn_number, false)?;
    }
    Ok(reply)
}

/// Whether a findAndModify reply reports a write (`lastErrorObject.n`).
fn wrote(reply: &RawDocumentBuf) -> bool {
    let Ok(Some(RawBsonRef::Document(leo))) = reply.get("lastErrorObject") else {
        return false;
    };
    match leo.get("n") {
        Ok(Some(RawBsonRef::Int32(n))) => n > 0,
        Ok(Some(RawBsonRef::Int64(n))) => n > 0,
        _ => false,
    }
}

/// Where a mongos's session record keeps a findAndModify's reply.
const REPLY_FIELD: &str = "findAndModifyReply";

/// A mongos keeps a findAndModify's reply in the session's record (which
/// its write's batch wrote), as mongod keeps the document in
/// `config.image_collection`, so a retry on another server returns it. It
/// is written after the reply is known, so a server that dies in between
/// leaves a retry 217 IncompleteTransactionHistory (never a second write);
/// a reply too large to keep beside the record is left out the same way.
fn keep_reply(ctx: &Context<'_>, id: &[u8; 16], txn_number: i64, reply: &RawDocumentBuf) {
    let Some(coll) = ctx.state.storage.collection(TXN_DB, TXN_COLL) else {
        return;
    };
    let Ok(key) = RawDocumentBuf::try_from(&record_key(id)) else {
        return;
    };
    let kept = coll.modify(
        RawBsonRef::Document(&key),
        Durability::Buffered,
        &mut |cur| {
            let Some(cur) =
                cur.filter(|c| crate::repl::oplog::record_txn_number(c) == Some(txn_number))
            else {
                return Ok(Modify::Keep);
            };
            let mut r = RawDocumentBuf::new();
            for el in cur.iter() {
                let (k, v) = el.map_err(crate::request::invalid_bson)?;
                if k.as_str() != REPLY_FIELD {
                    r.append(k, v);
                }
            }
            r.append(bson::raw::cstr!("findAndModifyReply"), reply.clone());
            Ok(Modify::Replace(r))
        },
    );
    if let Err(e) = kept {
        tracing::warn!(target: "COMMAND", error = %e.message, "the findAndModify reply was not kept for a retry");
    }
}

/// What a session's `config.transactions` record says of its latest
/// number.
pub(super) struct Stored {
    pub txn_number: i64,
    pub last_op: Option<OpTime>,
    /// The number was a transaction that committed (mongod's `state:
    /// "committed"`).
    pub committed: bool,
}

/// The session's `config.transactions` record's latest number, if any.
pub(super) fn stored_txn_number(ctx: &Context<'_>, id: &[u8; 16]) -> MongoResult<Option<Stored>> {
    let Some(d) = stored_record(ctx, id)? else {
        return Ok(None);
    };
    let Some(txn_number) = crate::repl::oplog::record_txn_number(&d) else {
        return Ok(None);
    };
    Ok(Some(Stored {
        txn_number,
        last_op: op_time(d.get("lastWriteOpTime").ok().flatten()),
        committed: matches!(d.get("state"), Ok(Some(RawBsonRef::String("committed")))),
    }))
}

/// The session's `config.transactions` record, if any.
fn stored_record(ctx: &Context<'_>, id: &[u8; 16]) -> MongoResult<Option<RawDocumentBuf>> {
    let Some(coll) = ctx.state.storage.collection(TXN_DB, TXN_COLL) else {
        return Ok(None);
    };
    let key = RawDocumentBuf::try_from(&record_key(id)).map_err(crate::request::invalid_bson)?;
    coll.get(RawBsonRef::Document(&key))
        .map_err(MongoError::from)
}

/// A mongos's [`rebuild`]: what the statements of `txn_number` did, from
/// the `stmts` its record lists (`[stmtId, op]`, plus an upsert's `_id`;
/// `[first, "I", n]` for a run of inserts; `repl/oplog.rs`) and, for a
/// findAndModify, the reply kept beside them ([`keep_reply`]); `None` when
/// the record is of another number or cannot answer this command.
fn rebuild_from_record(
    ctx: &Context<'_>,
    req: &CommandRequest<'_>,
    id: &[u8; 16],
    txn_number: i64,
) -> MongoResult<Option<HashMap<i32, StmtOutcome>>> {
    let Some(record) = stored_record(ctx, id)? else {
        return Ok(None);
    };
    if crate::repl::oplog::record_txn_number(&record) != Some(txn_number) {
        return Ok(None);
    }
    if req.name.eq_ignore_ascii_case("findAndModify") {
        return Ok(match record.get(REPLY_FIELD) {
            Ok(Some(RawBsonRef::Document(r))) => {
                Some(HashMap::from([(0, StmtOutcome::Reply(r.to_owned()))]))
            }
            _ => None,
        });
    }
    let mut stmts: HashMap<i32, Vec<(char, Option<Bson>)>> = HashMap::new();
    if let Ok(Some(RawBsonRef::Array(list))) = record.get("stmts") {
        for e in list.into_iter().flatten() {
            let RawBsonRef::Array(e) = e else {
                return Ok(None);
            };
            let mut parts = e.into_iter().flatten();
            let (Some(RawBsonRef::Int32(stmt)), Some(RawBsonRef::String(op))) =
                (parts.next(), parts.next())
            else {
                return Ok(None);
            };
            let kind = match op {
                "i" => 'i',
                "u" => 'u',
                "d" => 'd',
                // Inserts of statements `stmt..stmt + n`.
                "I" => {
                    let Some(RawBsonRef::Int32(n)) = parts.next() else {
                        return Ok(None);
                    };
                    for s in stmt..stmt.saturating_add(n) {
                        stmts.entry(s).or_default().push(('i', None));
                    }
                    continue;
                }
                _ => return Ok(None),
            };
            let upserted = parts.next().and_then(|v| Bson::try_from(v).ok());
            stmts.entry(stmt).or_default().push((kind, upserted));
        }
    }
    let mut out = HashMap::new();
    for (stmt, entries) in stmts {
        match outcome(req, stmt, &entries) {
            Some(o) => out.insert(stmt, o),
            None => return Ok(None),
        };
    }
    Ok(Some(out))
}

/// An optime document `{ts, t}`.
fn op_time(v: Option<RawBsonRef<'_>>) -> Option<OpTime> {
    let Some(RawBsonRef::Document(d)) = v else {
        return None;
    };
    let ts = d.get_timestamp("ts").ok()?;
    let t = match d.get("t") {
        Ok(Some(RawBsonRef::Int64(t))) => t,
        Ok(Some(RawBsonRef::Int32(t))) => i64::from(t),
        _ => return None,
    };
    Some((ts, t))
}

/// The longest chain of entries a retry walks back (a batch's statements).
const MAX_CHAIN: usize = 1_000_000;

/// What the statements of `txn_number` did, read back from its oplog
/// entries from `last` (the session record's `lastWriteOpTime`) through
/// their `prevOpTime`s, for the command `req` retries; `None` when that
/// history is incomplete or cannot answer this command.
/// A mongos reads them from the session's record instead
/// ([`rebuild_from_record`]).
fn rebuild(
    ctx: &Context<'_>,
    req: &CommandRequest<'_>,
    id: &[u8; 16],
    txn_number: i64,
    last: Option<OpTime>,
) -> MongoResult<Option<HashMap<i32, StmtOutcome>>> {
    if ctx.state.repl().is_mongos() {
        return rebuild_from_record(ctx, req, id, txn_number);
    }
    let Some(mut at) = last else {
        return Ok(None);
    };
    let oplog = ctx.state.repl().oplog();
    // Per statement: its entries' kinds and, for inserts, the `_id`.
    let mut stmts: HashMap<i32, Vec<(char, Option<Bson>)>> = HashMap::new();
    for _ in 0..MAX_CHAIN {
        if at.0
            == (Timestamp {
                time: 0,
                increment: 0,
            })
        {
            let mut out = HashMap::new();
            for (stmt, entries) in stmts {
                match outcome(req, stmt, &entries) {
                    Some(o) => out.insert(stmt, o),
                    None => return Ok(None),
                };
            }
            return Ok(Some(out));
        }
        let Some(e) = oplog.entry_at(at.0).map_err(MongoError::from)? else {
            return Ok(None);
        };
        let number = e.get_i64("txnNumber").ok();
        let (Some(stmt), true) = (e.get_i32("stmtId").ok(), number == Some(txn_number)) else {
            return Ok(None);
        };
        let kind = match e.get_str("op") {
            Ok("i") => 'i',
            Ok("u") => 'u',
            Ok("d") => 'd',
            _ => return Ok(None),
        };
        let id = match e.get_document("o") {
            Ok(o) if kind == 'i' => o
                .get("_id")
                .ok()
                .flatten()
                .and_then(|v| Bson::try_from(v).ok()),
            _ => None,
        };
        stmts.entry(stmt).or_default().push((kind, id));
        let Some(prev) = op_time(e.get("prevOpTime").ok().flatten()) else {
            return Ok(None);
        };
        at = prev;
    }
    Ok(None)
}

/// What statement `stmt` of the command `req` did, from its entries.
fn outcome(
    req: &CommandRequest<'_>,
    stmt: i32,
    entries: &[(char, Option<Bson>)],
) -> Option<StmtOutcome> {
    let kind = if req.name.eq_ignore_ascii_case("bulkWrite") {
        // The kind of the statement's op: its first field.
        let RawBsonRef::Array(ops) = req.body.get("ops").ok().flatten()? else {
            return None;
        };
        let RawBsonRef::Document(op) = ops.into_iter().nth(usize::try_from(stmt).ok()?)?.ok()?
        else {
            return None;
        };
        op.iter().next()?.ok()?.0.as_str().to_string()
    } else {
        req.name.to_string()
    };
    let count = |k: char| entries.iter().filter(|(e, _)| *e == k).count() as u64;
    match kind.as_str() {
        "insert" => Some(StmtOutcome::Inserted),
        "update" => match entries.iter().find(|(k, _)| *k == 'i') {
            Some((_, id)) => Some(StmtOutcome::Updated {
                matched: 0,
                modified: 0,
                upserted: Some(id.clone()?),
            }),
            None => Some(StmtOutcome::Updated {
                matched: count('u'),
                modified: count('u'),
                upserted: None,
            }),
        },
        "delete" => Some(StmtOutcome::Deleted { n: count('d') }),
        // findAndModify's document is not in its entries.
        _ => None,
    }
}

/// Writes the session's `config.transactions` record for `txn_number`
/// (with mongod's `state: "committed"` for a committed transaction, so a
/// retried `commitTransaction` succeeds after a restart or on another
/// server over the store).
pub(super) fn write_record(
    ctx: &Context<'_>,
    id: &[u8; 16],
    txn_number: i64,
    committed: bool,
) -> MongoResult<()> {
    let coll = ctx
        .state
        .storage
        .get_or_create_collection(TXN_DB, TXN_COLL)
        .map_err(MongoError::from)?;
    let repl = ctx.state.repl();
    let mut record = doc! {
        "_id": record_key(id),
        "txnNum": txn_number,
        "lastWriteOpTime": {"ts": repl.clock().now(), "t": repl.term()},
        "lastWriteDate": bson::DateTime::now(),
    };
    if committed {
        record.insert("state", "committed");
    }
    let raw = RawDocumentBuf::try_from(&record).map_err(crate::request::invalid_bson)?;
    let key = RawDocumentBuf::try_from(&record_key(id)).map_err(crate::request::invalid_bson)?;
    coll.modify(
        RawBsonRef::Document(&key),
        Durability::Buffered,
        &mut |cur| {
            // A mongos's record keeps the statements of its number
            // (`repl/oplog.rs`).
            let kept = crate::repl::oplog::stmts_with(cur, txn_number, &bson::RawArrayBuf::new());
            let mut raw = raw.clone();
            if !kept.is_empty() {
                raw.append(bson::raw::cstr!("stmts"), kept);
            }
            Ok(match cur {
                Some(_) => Modify::Replace(raw),
                None => Modify::Insert(raw),
            })
        },
    )?;
    Ok(())
}
