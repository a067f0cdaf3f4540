//! Transaction numbers of server sessions (replica-set mode): retryable
//! writes (`retryable.rs`), multi-document transactions (`transaction.rs`)
//! and how each command meets a `txnNumber` ([`Txn`], a fact of every
//! registry entry).
//!
//! A session's state ([`Session`]) is checked out by one command at a time,
//! as mongod checks a session out to an operation: a second command on the
//! same session waits for the first to finish, so a retry never races with
//! the attempt it retries.

pub mod retryable;
pub mod transaction;

use std::collections::HashMap;
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, RawBsonRef, RawDocumentBuf};
use parking_lot::Mutex;

use crate::commands::Context;
use crate::fields::SessionArgs;
use crate::request::CommandRequest;
use crate::sessions::SessionId;

/// How a command meets a session's transaction number (`txnNumber`), in
/// replica-set mode (a standalone refuses every `txnNumber`, as mongod).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Txn {
    /// Refused inside a multi-document transaction (50811
    /// OperationNotSupportedInTransaction); a `txnNumber` outside one is
    /// 50768.
    Refused,
    /// Runs inside a transaction (mongod 8's list: reads, cursors, `create`
    /// and `createIndexes`); a `txnNumber` outside one is 50768.
    Allowed,
    /// A retryable write: runs inside a transaction, and outside one with a
    /// `txnNumber` executes each of its statements once.
    RetryableWrite,
    /// Ends a transaction: `commitTransaction`, `abortTransaction`.
    Ends,
}

/// What a statement of a retryable write did, kept to answer its retry.
#[derive(Clone, Debug, PartialEq)]
pub enum StmtOutcome {
    /// An insert statement inserted its document.
    Inserted,
    /// An update statement.
    Updated {
        matched: u64,
        modified: u64,
        upserted: Option<Bson>,
    },
    /// A delete statement removed `n` documents.
    Deleted { n: u64 },
    /// A `findAndModify`: its whole reply, the same document included.
    Reply(RawDocumentBuf),
}

/// A session's transaction state.
#[derive(Default)]
struct SessionState {
    /// The highest transaction number the session has used.
    txn_number: Option<i64>,
    /// Whether `config.transactions` was read for this session yet.
    loaded: bool,
    /// The statements of `txn_number` executed so far, by statement id.
    executed: HashMap<i32, StmtOutcome>,
    /// `txn_number` was read back from `config.transactions` after a
    /// restart: what its statements did is not known until its oplog
    /// entries are read back (`retryable::rebuild`).
    history_lost: bool,
    /// The optime of the last oplog entry `txn_number`'s retryable writes
    /// wrote (the next entry's `prevOpTime`).
    last_op: Option<crate::repl::oplog::OpTime>,
    /// When `txn_number` is a multi-document transaction: where it stands.
    txn: Option<transaction::Phase>,
}

/// One server session's transaction state; see the module documentation.
#[derive(Default)]
pub struct Session {
    /// Held by the command running on the session.
    checkout: Mutex<()>,
    state: Mutex<SessionState>,
}

/// The sessions that used a transaction number, by session id.
#[derive(Default)]
pub struct Transactions {
    sessions: Mutex<HashMap<SessionId, Arc<Session>>>,
}

impl Transactions {
    fn session(&self, id: SessionId) -> Arc<Session> {
        self.sessions.lock().entry(id).or_default().clone()
    }
}

/// The statement-level view of a retryable write that its command consults
/// (`ConnectionInfo::txn`): which statements already ran, and recording the
/// ones it runs now.
#[derive(Clone)]
pub struct OpTxn {
    session: Arc<Session>,
    /// The `onPrimaryTransactionalWrite` fail point asked to close the
    /// connection once the command is done (its reply unsent).
    hang_up: Arc<std::sync::atomic::AtomicBool>,
}

impl std::fmt::Debug for OpTxn {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("OpTxn")
    }
}

/// A statement's id: its position in the command's batch, as drivers number
/// the statements of a retryable write.
fn stmt_id(i: usize) -> i32 {
    i32::try_from(i).unwrap_or(i32::MAX)
}

impl OpTxn {
    fn new(session: Arc<Session>) -> OpTxn {
        OpTxn {
            session,
            hang_up: Arc::default(),
        }
    }

    /// Asked before a statement that has not run yet executes: the test-only
    /// `onPrimaryTransactionalWrite` fail point may fail the statement
    /// (unwritten) and hang up after the command, as mongod's fails the
    /// statement's write unit and ends the client's session. One atomic
    /// load when no fail point is on.
    pub fn write_fault(&self, fail_points: &crate::fail_points::FailPoints) -> MongoResult<()> {
        let Some(fault) = fail_points.on_transactional_write() else {
            return Ok(());
        };
        if fault.close_connection {
            self.hang_up
                .store(true, std::sync::atomic::Ordering::Relaxed);
        }
        match fault.fail {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Whether a fail point asked to hang up after this command.
    pub fn hangs_up(&self) -> bool {
        self.hang_up.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// What statement `i` did when an earlier attempt ran it.
    pub fn executed(&self, i: usize) -> Option<StmtOutcome> {
        self.session.state.lock().executed.get(&stmt_id(i)).cloned()
    }

    /// Records what statement `i` did.
    pub fn record(&self, i: usize, outcome: StmtOutcome) {
        self.session
            .state
            .lock()
            .executed
            .insert(stmt_id(i), outcome);
    }
}

/// The `lsid.id` of a command body.
fn session_id(req: &CommandRequest<'_>) -> MongoResult<SessionId> {
    let Some(RawBsonRef::Document(lsid)) = req.body.get("lsid").ok().flatten() else {
        return Err(MongoError::new(
            ErrorCode::InvalidOptions,
            "Transaction number requires a session ID to also be specified",
        ));
    };
    crate::sessions::parse_lsid(req.name, "lsid", RawBsonRef::Document(lsid))
}

/// Runs a command that carries a `txnNumber` (replica-set or mongos mode): a
/// retryable write executes each statement once; a statement of a
/// transaction runs in it; anything else is refused as mongod refuses it.
pub fn dispatch(
    kind: Txn,
    args: SessionArgs,
    req: &CommandRequest<'_>,
    ctx: &mut Context<'_>,
    run: impl FnOnce(&CommandRequest<'_>, &mut Context<'_>) -> MongoResult<RawDocumentBuf>,
) -> MongoResult<RawDocumentBuf> {
    let txn_number = args.txn_number.unwrap_or_default();
    if args.in_transaction() {
        return transaction::run(kind, txn_number, args, req, ctx, run);
    }
    match kind {
        Txn::RetryableWrite => retryable::run(txn_number, req, ctx, run),
        Txn::Ends => Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("{} must be run within a transaction", req.name),
        )),
        Txn::Refused | Txn::Allowed => Err(MongoError::location(
            50768,
            format!(
                "txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and {} is not a retryable write command.",
                req.name
            ),
        )),
    }
}

/// The error codes after which a driver retries a write (the retryable
/// writes specification's list): the reply of a retryable write failing
/// with one carries the `RetryableWriteError` label, as mongod's does.
const RETRYABLE_CODES: &[i32] = &[
    6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436,
];

/// Whether a driver retries a write that failed with `code` (the retryable
/// writes specification's list).
pub fn retries_on(code: i32) -> bool {
    RETRYABLE_CODES.contains(&code)
}

/// Adds `RetryableWriteError` to the reply of a retryable write (a command
/// with a `txnNumber` and no `autocommit`, in replica-set or mongos mode) that failed,
/// or got a write concern error, with a code drivers retry on; a reply that
/// already has labels (a fail point's) keeps them.
pub fn label_reply(
    state: &crate::state::ServerState,
    req: &crate::request::CommandRequest<'_>,
    reply: &mut RawDocumentBuf,
) {
    if !state.repl().takes_txn_numbers() {
        return;
    }
    add_topology_version(state, reply);
    // The one pass over the body the request's other generic arguments
    // share, not two more lookups per command.
    let args = req.generic();
    if !args.has_txn_number {
        return;
    }
    if args.has_autocommit {
        transaction::label_reply(req.body, reply);
        return;
    }
    if matches!(reply.get("errorLabels"), Ok(Some(_))) {
        return;
    }
    let failed = failed(reply);
    let code = if failed {
        code_of(reply)
    } else {
        match reply.get("writeConcernError") {
            Ok(Some(RawBsonRef::Document(w))) => code_of(w),
            _ => None,
        }
    };
    if code.is_some_and(|c| RETRYABLE_CODES.contains(&c)) {
        add_label(reply, "RetryableWriteError");
    }
}

/// The `code` of an error reply or of a `writeConcernError`.
fn code_of(d: &bson::RawDocument) -> Option<i32> {
    match d.get("code") {
        Ok(Some(RawBsonRef::Int32(c))) => Some(c),
        _ => None,
    }
}

/// Whether a reply is an error reply (`ok: 0`).
fn failed(reply: &bson::RawDocument) -> bool {
    matches!(reply.get("ok"), Ok(Some(RawBsonRef::Double(d))) if d == 0.0)
}

impl SessionState {
    /// Reads the session's `config.transactions` record the first time the
    /// session is used since start-up: its number is the latest, and what
    /// its statements did is unknown.
    ///
    /// A mongos reads it before every command: another server over the
    /// store may have run a newer number (or this one's first attempt)
    /// since, and only the store knows.
    fn load(&mut self, ctx: &Context<'_>, id: &SessionId) -> MongoResult<()> {
        let mongos = ctx.state.repl().is_mongos();
        if self.loaded && !mongos {
            return Ok(());
        }
        self.loaded = true;
        if let Some(stored) = retryable::stored_txn_number(ctx, id)? {
            if self.txn_number.is_none_or(|cur| stored.txn_number > cur) {
                self.txn_number = Some(stored.txn_number);
                self.last_op = stored.last_op;
                self.history_lost = true;
                self.executed.clear();
                if let Some(transaction::Phase::InProgress { store, .. }) = self.txn.take() {
                    store.abort();
                }
                if stored.committed {
                    self.txn = Some(transaction::Phase::Committed);
                }
            }
        }
        Ok(())
    }
}

/// Appends `errorLabels: [label]` to a reply.
/// mongod's NotPrimaryError category.
const NOT_PRIMARY_CODES: &[i32] = &[189, 10058, 10107, 11602, 13435, 13436];

/// mongod's ShutdownError category.
const SHUTDOWN_CODES: &[i32] = &[91, 11600];

/// A failed reply whose code says the member is not primary (or, while it
/// really shuts down, that it is shutting down) carries the member's
/// `topologyVersion`, as mongod's does: a driver that already saw that
/// version takes the error as stale and keeps the server, rather than
/// dropping it and waiting for its next hello before it retries. A shutdown
/// error at any other time (a fail point's) carries none, so the driver
/// drops the server and clears its pool, as against mongod.
fn add_topology_version(state: &crate::state::ServerState, reply: &mut RawDocumentBuf) {
    if !failed(reply) || matches!(reply.get("topologyVersion"), Ok(Some(_))) {
        return;
    }
    let code = code_of(reply);
    let not_primary = code.is_some_and(|c| NOT_PRIMARY_CODES.contains(&c));
    let shutting_down =
        state.is_shutting_down() && code.is_some_and(|c| SHUTDOWN_CODES.contains(&c));
    if !not_primary && !shutting_down {
        return;
    }
    let tv = state.repl().topology_version();
    if let (Ok(key), Ok(raw)) = (
        crate::reply::key("topologyVersion"),
        RawDocumentBuf::try_from(&tv),
    ) {
        reply.append(key, raw);
    }
}

fn add_label(reply: &mut RawDocumentBuf, label: &str) {
    let mut labels = bson::RawArrayBuf::new();
    labels.push(label);
    if let Ok(key) = crate::reply::key("errorLabels") {
        reply.append(key, labels);
    }
}

/// `{_id: {id, uid}}` of a session's `config.transactions` record.
fn record_key(id: &SessionId) -> bson::Document {
    doc! {"id": bson::Binary { subtype: bson::spec::BinarySubtype::Uuid, bytes: id.to_vec() },
    "uid": bson::Binary { subtype: bson::spec::BinarySubtype::Generic, bytes: crate::sessions::no_auth_uid().to_vec() }}
}
