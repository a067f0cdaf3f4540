//! Retryable writes: a write command with `lsid` and `txnNumber` (outside a
//! transaction) executes each of its statements once. A retry with the same
//! number (a driver reconnecting after a network error) gets the outcome of
//! the statements that already ran, and runs only the others; a number
//! older than the session's latest is 225 TransactionTooOld.
//!
//! The session's latest number is kept in `config.transactions` as mongod
//! keeps it (`{_id: {id, uid}, txnNum, lastWriteOpTime, lastWriteDate}`), so
//! an older number is refused after a restart too. What each statement did
//! is kept in memory: mongod rebuilds it from the oplog, which BisonDB does
//! not read back yet, so a retry of the latest number after a restart is
//! 217 IncompleteTransactionHistory (mongod's answer when that history is
//! gone). The record is written after the write's own batch, not in it.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::{Durability, Modify};
use bson::{doc, RawBsonRef, RawDocumentBuf};

use super::{record_key, session_id, OpTxn, StmtOutcome};
use crate::commands::Context;
use crate::request::CommandRequest;

/// Where mongod keeps the sessions' transaction records.
pub const TXN_DB: &str = "config";
pub const TXN_COLL: &str = "transactions";

/// The session id as mongod prints it in messages (a UUID's text form).
fn uuid_text(id: &[u8; 16]) -> String {
    bson::Uuid::from_bytes(*id).to_string()
}

/// Runs a retryable write; see the module documentation.
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
    {
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
            }
        }
    }
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
    // The oplog entries of its writes carry the session and number.
    let fields = doc! {"lsid": record_key(&id), "txnNumber": txn_number};
    let result = crate::repl::oplog::with_entry_fields(fields, || {
        if find_and_modify {
            op.write_fault(&ctx.state.fail_points)?;
        }
        run(req, ctx)
    });
    ctx.conn.txn = None;
    ctx.conn.hang_up |= op.hangs_up();
    let reply = result?;
    if find_and_modify && wrote(&reply) {
        op.record(0, StmtOutcome::Reply(reply.clone()));
    }
    if session.state.lock().executed.len() > before {
        write_record(ctx, &id, txn_number)?;
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

/// The `txnNum` of the session's `config.transactions` record, if any.
pub(super) fn stored_txn_number(ctx: &Context<'_>, id: &[u8; 16]) -> MongoResult<Option<i64>> {
    let Some(coll) = ctx.state.storage.collection(TXN_DB, TXN_COLL) else {
        return Ok(None);
    };
    let key = RawDocumentBuf::try_from(&record_key(id)).map_err(crate::request::invalid_bson)?;
    let Some(d) = coll
        .get(RawBsonRef::Document(&key))
        .map_err(MongoError::from)?
    else {
        return Ok(None);
    };
    Ok(match d.get("txnNum") {
        Ok(Some(RawBsonRef::Int64(n))) => Some(n),
        Ok(Some(RawBsonRef::Int32(n))) => Some(i64::from(n)),
        _ => None,
    })
}

/// Writes the session's `config.transactions` record for `txn_number`.
pub(super) fn write_record(ctx: &Context<'_>, id: &[u8; 16], txn_number: i64) -> MongoResult<()> {
    let coll = ctx
        .state
        .storage
        .get_or_create_collection(TXN_DB, TXN_COLL)
        .map_err(MongoError::from)?;
    let repl = ctx.state.repl();
    let record = doc! {
        "_id": record_key(id),
        "txnNum": txn_number,
        "lastWriteOpTime": {"ts": repl.clock().now(), "t": repl.term()},
        "lastWriteDate": bson::DateTime::now(),
    };
    let raw = RawDocumentBuf::try_from(&record).map_err(crate::request::invalid_bson)?;
    let key = RawDocumentBuf::try_from(&record_key(id)).map_err(crate::request::invalid_bson)?;
    coll.modify(
        RawBsonRef::Document(&key),
        Durability::Buffered,
        &mut |cur| {
            Ok(match cur {
                Some(_) => Modify::Replace(raw.clone()),
                None => Modify::Insert(raw.clone()),
            })
        },
    )?;
    Ok(())
}
