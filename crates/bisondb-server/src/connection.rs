//! The per-connection loop: frame, decode, dispatch, reply.
//!
//! A malformed message (bad framing, bad checksum, undecodable sections) closes only
//! this connection; a well-formed message carrying a bad command gets an error reply.
//! A panic inside a command is caught and answered as an InternalError, so a BisonDB
//! bug never takes a connection, or the server, down with it. A connection that
//! stalls mid-message, or never sends its first message, is closed after
//! `incompleteMessageTimeoutMS` ([`StallWatch`]); one request is read only after
//! the previous reply is written, so pipelining clients are held back by TCP.
//!
//! Replies are written straight from their encoded buffer ([`write_reply`]),
//! not through `Framed`'s write buffer: a 16 MiB batch is then neither copied
//! once more nor left behind as a 16 MiB buffer on an idle connection. A
//! large reply is not even copied behind its header: the header and the
//! reply document go out in one vectored write ([`Encoded::Parts`]).

use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_wire::{
    decode_frame, encode_op_msg_reply, encode_op_reply, msg_flags, Compressor, Encoded, Incoming,
    MessageCodec, Request,
};
use bson::{RawBsonRef, RawDocument, RawDocumentBuf};
use futures::StreamExt;
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio_util::codec::Framed;

use crate::context::{ConnectionInfo, Context};
use crate::fail_points::{CommandInfo, Injection, Then};
use crate::registry::{self, CommandSpec, Reply};
use crate::reply;
use crate::request::{CommandRequest, Sequence};
use crate::state::{OpCounters, ServerState};

static NEXT_REQUEST_ID: AtomicI32 = AtomicI32::new(1);

fn next_request_id() -> i32 {
    NEXT_REQUEST_ID.fetch_add(1, Ordering::Relaxed) & i32::MAX
}

/// Serves one client until it disconnects, sends garbage, or the server stops.
/// `fd` is the client's socket, watched for a hang-up while a command runs
/// (`op_ctx.rs`); `tls` is what the TLS handshake established (`None`: plaintext).
pub async fn serve<S>(
    stream: S,
    state: Arc<ServerState>,
    peer: String,
    fd: Option<i32>,
    tls: Option<crate::tls::PeerTls>,
) where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let mut conn = ConnectionInfo {
        id: state.next_connection_id(),
        peer,
        tls,
        ..Default::default()
    };
    let _listed = crate::op_ctx::Operations::connect(&state, &mut conn, fd);
    tracing::info!(target: "NETWORK", id = crate::log::ids::CONNECTION_ACCEPTED, ctx = "listener",
        remote = %conn.peer, connectionId = conn.id,
        connectionCount = state.connections_current.load(std::sync::atomic::Ordering::Relaxed),
        "Connection accepted");
    let mut framed = Framed::new(stream, MessageCodec::new());
    let mut stall = StallWatch::new(state.config.incomplete_message_timeout_ms);
    let tick = tokio::time::sleep(stall.period);
    tokio::pin!(tick);
    loop {
        if state.is_shutting_down() {
            break;
        }
        let frame = tokio::select! {
            f = framed.next() => f,
            () = &mut tick, if stall.on() => {
                match stall.check(!framed.read_buffer().is_empty()) {
                    Some(next) => {
                        tick.as_mut().reset(next);
                        continue;
                    }
                    None => {
                        tracing::info!(conn = conn.id, "closing connection: incomplete message or handshake past incompleteMessageTimeoutMS");
                        break;
                    }
                }
            }
            _ = state.shutdown.notified() => break,
        };
        let frame = match frame {
            None => break,
            Some(Ok(f)) => {
                crate::metrics::add(
                    &state.metrics.network.bytes_in,
                    (f.payload.len() + 16) as u64,
                );
                crate::metrics::add(&state.metrics.network.num_requests, 1);
                f
            }
            Some(Err(e)) => {
                tracing::info!(conn = conn.id, error = %e, "closing connection: malformed message");
                break;
            }
        };
        stall.completed();
        // A read buffer grown for one large message is not kept by an idle
        // connection: with thousands of connections that would be gigabytes.
        if framed.read_buffer().capacity() > KEEP_READ_BUFFER && framed.read_buffer().is_empty() {
            *framed.read_buffer_mut() = bytes::BytesMut::new();
        }
        let incoming = match decode_frame(frame) {
            Ok(m) => m,
            Err(e) => {
                tracing::info!(conn = conn.id, error = %e, "closing connection: malformed message");
                break;
            }
        };
        // Awaitable hello: hold the answer (the topology of a standalone server does
        // not change) unless the server is shutting down.
        if let Request::Msg(msg) = &incoming.request {
            if let Some((delay, mut topology)) =
                crate::commands::hello::awaitable_hello(msg.body(), &state)
            {
                tokio::select! {
                    _ = tokio::time::sleep(delay) => {}
                    _ = topology.changed() => {}
                    _ = state.shutdown.notified() => break,
                }
            }
            // A getMore on an `awaitData` cursor with nothing to return waits
            // here for an insert (see `tailable.rs`), then runs as usual.
            if let Some((id, ns, wait)) = crate::tailable::await_request(msg.body(), &state) {
                tokio::select! {
                    _ = crate::tailable::wait_for_data(&state, id, &ns, wait) => {}
                    _ = state.shutdown.notified() => break,
                }
            }
        }
        // Test-only fail points (off unless a test configured one: then this
        // is one atomic load) may delay the command, hang up, or fail it.
        let mut failure = None;
        if state.fail_points.any_on() {
            if let Some(injection) = fail_point_injection(&incoming, &state, &conn) {
                if let Some(delay) = injection.block {
                    tokio::select! {
                        _ = tokio::time::sleep(delay) => {}
                        _ = state.shutdown.notified() => break,
                    }
                }
                match injection.then {
                    Then::Run => {}
                    Then::Close => {
                        tracing::info!(
                            conn = conn.id,
                            "closing connection: failCommand fail point"
                        );
                        break;
                    }
                    Then::Fail(e) => failure = Some(e),
                }
            }
        }
        // A getMore that allows exhaust streams the rest of its cursor.
        if failure.is_none() {
            if let Some(exhaust) = ExhaustGetMore::of(&incoming) {
                if !exhaust.stream(&mut framed, &state, &mut conn).await {
                    break;
                }
                continue;
            }
        }
        let reply = handle(incoming, &state, &mut conn, failure);
        if std::mem::take(&mut conn.hang_up) {
            tracing::info!(conn = conn.id, "closing connection: fail point");
            break;
        }
        match reply {
            Ok(Some(bytes)) => {
                crate::metrics::add(&state.metrics.network.bytes_out, bytes.len() as u64);
                if let Err(e) = write_reply(&mut framed, &bytes).await {
                    tracing::debug!(conn = conn.id, error = %e, "write failed");
                    break;
                }
            }
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(conn = conn.id, error = %e, "closing connection: could not encode reply");
                break;
            }
        }
    }
    tracing::info!(target: "NETWORK", id = crate::log::ids::CONNECTION_ENDED, conn = conn.id,
        remote = %conn.peer, connectionId = conn.id,
        connectionCount = state.connections_current.load(std::sync::atomic::Ordering::Relaxed).saturating_sub(1),
        "Connection ended");
}

/// Writes one encoded reply to the connection's stream. `Framed`'s own write
/// buffer is never used (nothing is sent through it), so writing past it
/// keeps the order of replies.
async fn write_reply<S>(
    framed: &mut Framed<S, MessageCodec>,
    reply: &Encoded,
) -> std::io::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    use bytes::Buf;
    let stream = framed.get_mut();
    match reply {
        Encoded::Whole(bytes) => stream.write_all(bytes).await?,
        // One writev of both parts on a socket (tokio writes vectored where
        // the stream can).
        Encoded::Parts { prefix, body } => {
            let mut parts = (&prefix[..]).chain(body.as_bytes());
            stream.write_all_buf(&mut parts).await?
        }
    }
    stream.flush().await
}

/// The largest read buffer an idle connection keeps (see [`serve`]).
const KEEP_READ_BUFFER: usize = 1 << 20;

/// Closes a connection that stalls mid-message or never says hello.
///
/// A timer fires every `period` (the `incompleteMessageTimeoutMS`); per
/// request the loop only marks that a message completed ([`Self::completed`]:
/// two stores, no timer touched). When the timer fires, the connection is
/// closed if it has not completed its first message since it was accepted,
/// or if bytes of a message were already waiting at the previous firing and
/// no message has completed since. So a stalled message is closed between one
/// and two periods after it began, a silent new connection after one period,
/// and an idle connection between messages never.
struct StallWatch {
    period: std::time::Duration,
    /// A message has completed on this connection (its handshake, normally).
    greeted: bool,
    /// A message has completed since the timer last fired.
    progressed: bool,
    /// Bytes of an incomplete message were buffered when the timer last fired.
    partial: bool,
}

impl StallWatch {
    fn new(timeout_ms: u64) -> StallWatch {
        StallWatch {
            period: std::time::Duration::from_millis(timeout_ms),
            greeted: false,
            progressed: false,
            partial: false,
        }
    }

    fn on(&self) -> bool {
        !self.period.is_zero()
    }

    fn completed(&mut self) {
        self.greeted = true;
        self.progressed = true;
    }

    /// On the timer: when to look next, or `None` to close the connection.
    /// `buffered`: part of a message is waiting in the read buffer.
    fn check(&mut self, buffered: bool) -> Option<tokio::time::Instant> {
        let stalled = !self.greeted || (self.partial && buffered && !self.progressed);
        if stalled {
            return None;
        }
        self.partial = buffered;
        self.progressed = false;
        Some(tokio::time::Instant::now() + self.period)
    }
}

/// A `getMore` sent with the OP_MSG flag `exhaustAllowed` (what drivers send
/// for an exhaust cursor): the server answers with one reply per batch, each
/// but the last flagged `moreToCome` and answering the one before it (its
/// `responseTo` is the previous reply's `requestId`), as if the client had
/// sent the same getMore again, until the cursor is exhausted or fails
/// (DRIVERS-565, the OP_MSG specification's "exhaustAllowed").
struct ExhaustGetMore {
    body: RawDocumentBuf,
    request_id: i32,
    compressor: Option<Compressor>,
}

impl ExhaustGetMore {
    fn of(incoming: &Incoming) -> Option<ExhaustGetMore> {
        let Request::Msg(msg) = &incoming.request else {
            return None;
        };
        // A request that itself wants no reply cannot be answered by a stream;
        // document sequences belong to writes, never to a getMore.
        if !msg.exhaust_allowed() || msg.more_to_come() || !msg.sequences().is_empty() {
            return None;
        }
        let (name, _) = msg.body().iter().next()?.ok()?;
        if name.as_str() != "getMore" {
            return None;
        }
        Some(ExhaustGetMore {
            body: msg.body().to_owned(),
            request_id: incoming.header.request_id,
            compressor: incoming.compressor,
        })
    }

    /// Runs the getMore until its cursor is done. False when the connection
    /// must close (write failed, the server is stopping).
    async fn stream<S>(
        self,
        framed: &mut Framed<S, MessageCodec>,
        state: &Arc<ServerState>,
        conn: &mut ConnectionInfo,
    ) -> bool
    where
        S: AsyncRead + AsyncWrite + Unpin,
    {
        let mut response_to = self.request_id;
        loop {
            // An awaitData cursor waits for data between batches, as it would
            // between the client's own getMores.
            if let Some((id, ns, wait)) = crate::tailable::await_request(&self.body, state) {
                tokio::select! {
                    _ = crate::tailable::wait_for_data(state, id, &ns, wait) => {}
                    _ = state.shutdown.notified() => return false,
                }
            }
            if state.is_shutting_down() {
                return false;
            }
            let reply = match CommandRequest::from_msg(&self.body, Vec::new()) {
                Ok(req) => run_command(&req, registry::lookup(req.name), state, conn),
                Err(e) => error_reply(&e),
            };
            let more = more_to_stream(&reply);
            let id = next_request_id();
            let flags = if more { msg_flags::MORE_TO_COME } else { 0 };
            let bytes = match encode_op_msg_reply(id, response_to, flags, reply, self.compressor) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!(conn = conn.id, error = %e, "closing connection: could not encode reply");
                    return false;
                }
            };
            crate::metrics::add(&state.metrics.network.bytes_out, bytes.len() as u64);
            if let Err(e) = write_reply(framed, &bytes).await {
                tracing::debug!(conn = conn.id, error = %e, "write failed");
                return false;
            }
            if !more {
                return true;
            }
            response_to = id;
        }
    }
}

/// Whether an exhaust getMore goes on after this reply: it succeeded, its
/// cursor is still open, and it returned documents (an empty batch of a
/// tailable cursor ends the stream, so the client asks again rather than the
/// server spinning on an idle cursor).
fn more_to_stream(reply: &RawDocument) -> bool {
    let ok = match reply.get("ok") {
        Ok(Some(RawBsonRef::Double(d))) => d == 1.0,
        Ok(Some(RawBsonRef::Int32(i))) => i == 1,
        _ => false,
    };
    let Ok(Some(RawBsonRef::Document(cursor))) = reply.get("cursor") else {
        return false;
    };
    let open = matches!(cursor.get("id"), Ok(Some(RawBsonRef::Int64(id))) if id != 0);
    let has_docs = matches!(
        cursor.get("nextBatch"),
        Ok(Some(RawBsonRef::Array(batch))) if batch.into_iter().next().is_some()
    );
    ok && open && has_docs
}

/// What the fail points do to an OP_MSG command about to run; only asked
/// while one is on. Commands the registry does not know are never failed.
fn fail_point_injection(
    incoming: &Incoming,
    state: &Arc<ServerState>,
    conn: &ConnectionInfo,
) -> Option<Injection> {
    let Request::Msg(msg) = &incoming.request else {
        return None;
    };
    let req = CommandRequest::from_msg(msg.body(), Vec::new()).ok()?;
    let spec = registry::lookup(req.name)?;
    spec.handler()?;
    let names = registry::names_of(spec);
    state
        .fail_points
        .before_command(&fail_point_info(&req, spec, &names), conn)
}

/// What the fail points see of `req`; `names` are [`registry::names_of`]
/// its spec.
fn fail_point_info<'a>(
    req: &'a CommandRequest<'_>,
    spec: &CommandSpec,
    names: &'a [&'static str],
) -> CommandInfo<'a> {
    CommandInfo {
        name: req.name,
        db: &req.db,
        body: req.body,
        names,
        takes_write_concern: spec.write_concern,
    }
}

/// Handles one decoded message; `None` when no reply is due (moreToCome).
/// `failure` (from a fail point) replaces running the command.
fn handle(
    incoming: Incoming,
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
    failure: Option<MongoError>,
) -> Result<Option<Encoded>, bisondb_wire::WireError> {
    let request_id = incoming.header.request_id;
    match &incoming.request {
        Request::Msg(msg) => {
            let sequences: Vec<Sequence<'_>> = msg
                .sequences()
                .iter()
                .map(|s| Sequence {
                    identifier: s.identifier(),
                    documents: s.documents().collect(),
                })
                .collect();
            // The one lookup of the command: every fact below comes from its spec.
            let (spec, reply) = match CommandRequest::from_msg(msg.body(), sequences) {
                Ok(req) => {
                    let spec = registry::lookup(req.name);
                    let mut reply = match failure {
                        Some(e) => error_reply(&e),
                        None => run_command_with_fail_points(&req, spec, state, conn),
                    };
                    crate::txn::label_reply(state, &req, &mut reply);
                    (spec, reply)
                }
                Err(e) => (None, error_reply(&e)),
            };
            if msg.more_to_come() {
                return Ok(None);
            }
            let compressor = incoming
                .compressor
                .filter(|_| spec.is_none_or(|s| s.reply == Reply::Compressible));
            encode_op_msg_reply(next_request_id(), request_id, 0, reply, compressor).map(Some)
        }
        Request::Query(q) => {
            let reply = legacy_query(&q.full_collection_name, &q.query, state, conn);
            encode_op_reply(
                next_request_id(),
                request_id,
                8, /* AwaitCapable */
                0,
                0,
                &[&reply],
            )
            .map(|b| Some(Encoded::Whole(b)))
        }
    }
}

/// OP_QUERY survives only for the first handshake of old drivers: mongod 6+ answers
/// nothing but hello/isMaster this way.
fn legacy_query(
    ns: &str,
    query: &RawDocument,
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
) -> RawDocumentBuf {
    let Some(db) = ns.strip_suffix(".$cmd") else {
        return error_reply(&MongoError::location(
            5739101,
            format!("OP_QUERY is no longer supported for queries on '{ns}'. The client driver may require an upgrade."),
        ));
    };
    // Drivers may wrap the command as {$query: {...}, $readPreference: ...}.
    let body = match query.get("$query") {
        Ok(Some(RawBsonRef::Document(d))) => d,
        _ => query,
    };
    match CommandRequest::from_body(body, db) {
        Ok(req) if matches!(req.name, "hello" | "isMaster" | "ismaster") => {
            run_command(&req, registry::lookup(req.name), state, conn)
        }
        Ok(req) => error_reply(&MongoError::location(
            352,
            format!(
                "Unsupported OP_QUERY command: {}. The client driver may require an upgrade.",
                req.name
            ),
        )),
        Err(e) => error_reply(&e),
    }
}

/// [`run_command`], then what the fail points add to its reply; with test
/// commands enabled, remembers a cursor opened under `maxTimeMS`.
fn run_command_with_fail_points(
    req: &CommandRequest<'_>,
    spec: Option<&CommandSpec>,
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
) -> RawDocumentBuf {
    let mut reply = run_command(req, spec, state, conn);
    if state.repl().takes_txn_numbers() {
        let writes = spec.is_some_and(|s| crate::fsync_lock::is_write(s, req.name, req.body));
        let mut ctx = Context { state, conn };
        crate::repl::cluster_time::finish_reply(&mut ctx, req, writes, &mut reply);
    }
    // Commands the registry does not serve are never failed.
    if let Some(spec) = spec.filter(|s| state.config.enable_test_commands && s.handler().is_some())
    {
        // Only a fail point that is on matches names (`note_cursor` reads none).
        let names = if state.fail_points.any_on() {
            registry::names_of(spec)
        } else {
            Vec::new()
        };
        let info = fail_point_info(req, spec, &names);
        state.fail_points.note_cursor(&info, &reply);
        state.fail_points.after_command(&info, conn, &mut reply);
    }
    reply
}

/// Runs one command, `spec` its entry in the registry (`None`: unknown).
fn run_command(
    req: &CommandRequest<'_>,
    spec: Option<&CommandSpec>,
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
) -> RawDocumentBuf {
    OpCounters::add(&state.opcounters.command, 1);
    state.sessions.touch(req.body);
    // One relaxed load when no database profiles (see `profiler.rs`).
    let profiled = if state.profiler.is_active() {
        crate::profiler::Pending::start(state, req, conn)
    } else {
        None
    };
    // One clock read per command: slow commands are logged at any profiling
    // level (mongod's "Slow query"), and only those build a line.
    let started = std::time::Instant::now();
    // serverStatus `globalLock.activeClients` counts the command until here.
    let running = state.active.enter(spec.is_some_and(|s| s.write_concern));
    let (reply, failed) = dispatch_command(req, spec, state, conn);
    drop(running);
    let took = started.elapsed();
    state.metrics.command_done(spec, took, failed);
    if !failed && spec.is_some_and(|s| s.write_concern) {
        // From the request's one pass over its generic arguments: another
        // scan of the body per write was 1.4k instructions (2.5k with a
        // set's `$clusterTime` in it).
        let wc = req.generic().write_concern;
        state.metrics.get_last_error.note_write_concern(wc, took);
    }
    state.top.record(req, spec, took);
    crate::log::slow::log_if_slow(state, req, conn, &reply, started);
    if let Some(p) = profiled {
        p.finish(state, req, conn, &reply);
    }
    reply
}

/// The command's `maxTimeMS` as a time limit for the operation (0: none).
/// `getMore` is left out: there it is how long an awaitData cursor waits.
/// A value mongod refuses gives 0 here: the registry's dispatch refuses the
/// command with mongod's error ([`crate::fields::check_generic_args`])
/// before anything runs.
fn operation_max_time_ms(req: &CommandRequest<'_>) -> u64 {
    if req.name == "getMore" {
        return 0;
    }
    match req.body.get("maxTimeMS") {
        Ok(Some(v)) => crate::fields::max_time_ms(v).unwrap_or(0),
        _ => 0,
    }
}

/// Runs one command and turns its error, or its panic, into the error reply;
/// true with an error reply.
fn dispatch_command(
    req: &CommandRequest<'_>,
    spec: Option<&CommandSpec>,
    state: &Arc<ServerState>,
    conn: &mut ConnectionInfo,
) -> (RawDocumentBuf, bool) {
    let max_time_ms = operation_max_time_ms(req);
    // The thread that runs the command carries its operation context (its
    // deadline and kill flag), so every scan, stage and script checks it;
    // `block_in_place` runs the command on this same thread.
    let op = state.ops.begin(req, conn, max_time_ms);
    conn.op.plan_slot = op.plan_slot.clone();
    let mut ctx = Context { state, conn };
    let writes = spec.is_some_and(|s| crate::fsync_lock::is_write(s, req.name, req.body));
    let dispatch = || {
        std::panic::catch_unwind(AssertUnwindSafe(|| {
            // With `--auth`, who may run what (`auth/`); one branch without.
            if let Some(spec) = spec.filter(|_| state.auth.enabled) {
                registry::authorize(spec, req, &mut ctx)?;
            }
            if writes {
                crate::repl::check_write(state, &req.db, req.body)?;
            }
            // Other servers sharing the store may have changed the catalog
            // (a no-op unless the engine is shared).
            state.storage.refresh_catalog()?;
            crate::repl::cluster_time::before_command(&mut ctx, req)?;
            let _member = crate::repl::member_scope(state);
            // A write waits here while `fsync` holds the lock (`fsync_lock.rs`).
            let _pass = if writes {
                Some(state.fsync_lock.enter(|| state.is_shutting_down())?)
            } else {
                None
            };
            registry::dispatch_spec(spec, req, &mut ctx)
        }))
    };
    // An engine over a network store may block in any storage call, so every
    // command then leaves the runtime's worker, not only the long ones; so
    // does a write that will wait for the fsync lock.
    let may_run_long = spec.is_some_and(|s| s.may_run_long)
        || state.storage_may_block()
        || (writes && state.fsync_lock.is_locked());
    let result: MongoResult<RawDocumentBuf> = match off_the_runtime_if_long(may_run_long, dispatch)
    {
        Ok(r) => r,
        Err(panic) => {
            let what = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".to_string());
            tracing::error!(command = req.name, panic = %what, "command panicked");
            Err(MongoError::internal(format!(
                "command '{}' panicked: {what}",
                req.name
            )))
        }
    };
    let result = result.and_then(reply_within_limit);
    match result {
        Ok(doc) => {
            tracing::debug!(conn = conn.id, db = %req.db, command = req.name, "command ok");
            (doc, false)
        }
        Err(e) => {
            tracing::debug!(target: "COMMAND", id = crate::log::ids::COMMAND_FAILED, conn = conn.id,
                db = %req.db, command = req.name, code = e.code.code(), error = %e.message,
                body = ?crate::log::client_data(req.body), "Command failed");
            if e.code == ErrorCode::InternalError {
                crate::metrics::add(&state.metrics.internal_errors, 1);
                tracing::error!(command = req.name, error = %e, "internal error");
            }
            (error_reply(&e), true)
        }
    }
}

/// Runs `f`, a command's synchronous work, so that a long one does not hold
/// up the other connections: on the multi-threaded runtime a command that may
/// scan a collection runs under `block_in_place`, which hands this worker's
/// queued tasks (a driver's heartbeat among them: a monitor that waits 10 s
/// for its `hello` drops the connection pool) to another thread first.
/// Short commands (insert, hello, ping) skip that hand-off, which costs a
/// thread wake-up per call. Which commands may run long is a fact of their
/// [`registry::CommandSpec`].
fn off_the_runtime_if_long<T>(may_run_long: bool, f: impl FnOnce() -> T) -> T {
    if may_run_long
        && tokio::runtime::Handle::try_current()
            .is_ok_and(|h| h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread)
    {
        tokio::task::block_in_place(f)
    } else {
        f()
    }
}

/// mongod's largest reply: a document of 16 MiB plus the 16 KiB it allows
/// for what the server adds (`BSONObjMaxInternalSize`).
const MAX_REPLY_BYTES: usize = bisondb_wire::MAX_BSON_OBJECT_SIZE + 16 * 1024;

/// A reply past [`MAX_REPLY_BYTES`] fails as mongod's does when it builds
/// one: 10334 BSONObjectTooLarge (batches stop at 16 MiB before this; a
/// command that gathers a result in one document can reach it).
fn reply_within_limit(doc: RawDocumentBuf) -> MongoResult<RawDocumentBuf> {
    let n = doc.as_bytes().len();
    if n <= MAX_REPLY_BYTES {
        return Ok(doc);
    }
    let first = doc
        .iter()
        .next()
        .and_then(|e| e.ok())
        .map(|(k, _)| k.to_string())
        .unwrap_or_default();
    Err(MongoError::new(
        ErrorCode::BSONObjectTooLarge,
        format!(
            "BSONObj size: {n} (0x{n:X}) is invalid. Size must be between 0 and {MAX_REPLY_BYTES}(16MB) First element: {first}"
        ),
    ))
}

fn error_reply(e: &MongoError) -> RawDocumentBuf {
    let doc = reply::error_document(e);
    match RawDocumentBuf::try_from(&doc) {
        Ok(d) => d,
        // Only an error message with a NUL byte could fail; strip it rather than drop the reply.
        Err(_) => {
            let clean = MongoError::new(e.code, e.message.replace('\0', "\\0"));
            RawDocumentBuf::try_from(&reply::error_document(&clean)).unwrap_or_default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replies_past_the_document_limit_fail_with_10334() {
        let mut d = bson::doc! {"cursor": {"firstBatch": []}};
        let ok = RawDocumentBuf::try_from(&d).unwrap();
        assert!(reply_within_limit(ok).is_ok());
        d.insert("big", "x".repeat(MAX_REPLY_BYTES));
        let big = RawDocumentBuf::try_from(&d).unwrap();
        let e = reply_within_limit(big).unwrap_err();
        assert_eq!(e.code, ErrorCode::BSONObjectTooLarge);
        assert!(e.message.contains("First element: cursor"), "{}", e.message);
    }

    #[test]
    fn stall_watch_closes_only_stalled_connections() {
        // Never greeted: closed at the first firing.
        let mut w = StallWatch::new(100);
        assert!(w.on());
        assert!(w.check(false).is_none());
        // Greeted and idle: never closed.
        let mut w = StallWatch::new(100);
        w.completed();
        for _ in 0..5 {
            assert!(w.check(false).is_some());
        }
        // A partial message seen at one firing and still there, with no
        // message completed, at the next: closed.
        assert!(w.check(true).is_some());
        assert!(w.check(true).is_none());
        // Busy pipelining (bytes always buffered, messages completing): kept.
        let mut w = StallWatch::new(100);
        for _ in 0..5 {
            w.completed();
            assert!(w.check(true).is_some());
        }
        assert!(!StallWatch::new(0).on(), "0 turns the check off");
    }
}
