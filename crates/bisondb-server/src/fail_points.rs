//! Fail points: mongod's test-only hooks that make commands misbehave on demand.
//!
//! Drivers' test suites start mongod with `--setParameter enableTestCommands=1`
//! and configure fail points with `configureFailPoint` to provoke errors that are
//! hard to cause otherwise. BisonDB models the two they use against a standalone:
//!
//! - `failCommand`: the commands named in `data.failCommands` fail with
//!   `errorCode` (and `errorLabels`), close the connection without a reply
//!   (`closeConnection`), wait `blockTimeMS` first (`blockConnection`), or
//!   succeed with a `writeConcernError` added to the reply; `appName`,
//!   `threadName` and `namespace` narrow which requests it applies to.
//! - `maxTimeAlwaysTimeOut`: every command with a time limit (`maxTimeMS`, or
//!   a `getMore` on a cursor opened with one) fails with MaxTimeMSExpired.
//! - `failGetMoreAfterCursorCheckout`: a `getMore` fails with `data.errorCode`
//!   once it holds its cursor (which the failure kills, as mongod's does); on
//!   a change stream's cursor a resumable code gets the
//!   `ResumableChangeStreamError` label, as mongod labels it.
//! - `onPrimaryTransactionalWrite`: each statement of a retryable write, as
//!   it is about to run, closes the connection once the command is done
//!   (`data.closeConnection`, true unless false) and, with
//!   `data.failBeforeCommitExceptionCode`, fails unwritten with that code.
//!
//! A fail point's mode says when it fires: `"alwaysOn"`, `"off"`, `{times: n}`
//! (the next n matching commands, then off), `{skip: n}` (all but the first n)
//! or `{activationProbability: p}`. Only a command the fail point applies to
//! counts: a `{times: 1}` failCommand on `insert` survives any number of
//! `find`s. `count` in `configureFailPoint`'s reply is how many times the fail
//! point fired since the server started, as mongod's `timesEntered`.
//!
//! The connection loop asks [`FailPoints::before_command`] before running a
//! command and [`FailPoints::after_command`] after it; with every fail point off
//! (always, unless a test configured one) each is a single atomic load.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use parking_lot::Mutex;

use crate::context::ConnectionInfo;

/// The fail points BisonDB implements.
pub const FAIL_COMMAND: &str = "failCommand";
pub const MAX_TIME_ALWAYS_TIME_OUT: &str = "maxTimeAlwaysTimeOut";
pub const FAIL_GET_MORE: &str = "failGetMoreAfterCursorCheckout";
pub const ON_PRIMARY_TRANSACTIONAL_WRITE: &str = "onPrimaryTransactionalWrite";

/// mongod fail points that drivers' test suites configure but BisonDB does not
/// model (they depend on replication, transactions or cursor internals it
/// lacks): refused with NotImplemented rather than "not found", so a test
/// that needs one says why it cannot run. Sorted.
const NOT_MODELLED: &[&str] = &["maxTimeNeverTimeOut", "stopReplProducer"];

/// The message mongod puts in a failCommand error.
pub const FAIL_MESSAGE: &str = "Failing command via 'failCommand' failpoint";

/// At most this many time-limited cursor ids are remembered for
/// `maxTimeAlwaysTimeOut` (a test opens a handful; this only bounds memory).
const MAX_TIMED_CURSORS: usize = 10_000;

/// When a fail point fires.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    Off,
    AlwaysOn,
    /// Fires this many more times, then turns off.
    Times(i64),
    /// Lets this many more matching commands through, then always fires.
    Skip(i64),
    /// Fires with this probability, 0 to 1.
    Probability(f64),
}

impl Mode {
    /// Parses `configureFailPoint`'s `mode` with mongod's errors.
    pub fn parse(v: Option<RawBsonRef<'_>>) -> MongoResult<Mode> {
        let count = |spec: &RawDocument, key: &str| -> MongoResult<i64> {
            let n = match spec.get(key) {
                Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
                Ok(Some(RawBsonRef::Int64(i))) => i,
                Ok(Some(RawBsonRef::Double(d))) if d.fract() == 0.0 && d.is_finite() => {
                    if d.abs() < 9.2e18 {
                        d as i64
                    } else {
                        i64::MAX
                    }
                }
                _ => {
                    return Err(MongoError::type_mismatch(format!(
                        "'{key}' option to 'mode' must be a whole number"
                    )))
                }
            };
            if n < 0 {
                return Err(MongoError::bad_value(format!(
                    "'{key}' option to 'mode' must be positive"
                )));
            }
            if n > i64::from(i32::MAX) {
                return Err(MongoError::bad_value(format!(
                    "'{key}' option to 'mode' is too large"
                )));
            }
            Ok(n)
        };
        match v {
            None => Err(MongoError::new(
                ErrorCode::IllegalOperation,
                "When setting a failpoint, you must supply a 'mode'",
            )),
            Some(RawBsonRef::String("off")) => Ok(Mode::Off),
            Some(RawBsonRef::String("alwaysOn")) => Ok(Mode::AlwaysOn),
            Some(RawBsonRef::String(other)) => {
                Err(MongoError::bad_value(format!("unknown mode: {other}")))
            }
            Some(RawBsonRef::Document(spec)) => {
                let has = |k: &str| matches!(spec.get(k), Ok(Some(_)));
                if has("times") {
                    Ok(Mode::Times(count(spec, "times")?))
                } else if has("skip") {
                    Ok(Mode::Skip(count(spec, "skip")?))
                } else if has("activationProbability") {
                    let p = match spec.get("activationProbability") {
                        Ok(Some(RawBsonRef::Double(d))) => d,
                        Ok(Some(RawBsonRef::Int32(i))) => f64::from(i),
                        Ok(Some(RawBsonRef::Int64(i))) => i as f64,
                        _ => {
                            return Err(MongoError::type_mismatch(
                                "the 'activationProbability' option to 'mode' must be a double between 0 and 1",
                            ))
                        }
                    };
                    if !(0.0..=1.0).contains(&p) {
                        return Err(MongoError::bad_value(format!(
                            "activationProbability must be between 0.0 and 1.0; found {p}"
                        )));
                    }
                    Ok(Mode::Probability(p))
                } else {
                    Err(MongoError::bad_value(
                        "mode must be one of \"off\", \"alwaysOn\", \"activationProbability\", {\"times\":n} or {\"skip\":n}",
                    ))
                }
            }
            Some(_) => Err(MongoError::type_mismatch(
                "'mode' must be a string or JSON object",
            )),
        }
    }

    /// One evaluation by a command the fail point applies to: whether it
    /// fires. `Times` counts down and turns itself off at zero.
    fn fire(&mut self) -> bool {
        match self {
            Mode::Off => false,
            Mode::AlwaysOn => true,
            Mode::Times(n) => {
                if *n <= 0 {
                    *self = Mode::Off;
                    return false;
                }
                *n -= 1;
                if *n == 0 {
                    *self = Mode::Off;
                }
                true
            }
            Mode::Skip(n) => {
                if *n > 0 {
                    *n -= 1;
                    false
                } else {
                    true
                }
            }
            Mode::Probability(p) => rand::random::<f64>() < *p,
        }
    }
}

/// `failCommand`'s `data`, read once when the fail point is configured.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct FailCommand {
    pub commands: Vec<String>,
    /// `failAllCommands`: every command but configureFailPoint.
    pub all_commands: bool,
    pub error_code: Option<i32>,
    /// `errorLabels`: replace the labels of the error (or of the reply
    /// carrying `writeConcernError`).
    pub error_labels: Option<Vec<Bson>>,
    /// `errorExtraInfo`: extra fields of the error reply.
    pub error_extra_info: Option<Document>,
    pub close_connection: bool,
    /// `blockConnection`: how long to wait first; an error when `blockTimeMS`
    /// is missing or negative, reported when the fail point fires, as mongod.
    pub block: Option<Result<u64, MongoError>>,
    pub write_concern_error: Option<Document>,
    pub app_name: Option<String>,
    pub thread_name: Option<String>,
    pub namespace: Option<String>,
}

impl FailCommand {
    /// Reads `data`; fields of the wrong type count as absent, as in mongod.
    pub fn parse(data: &Document) -> FailCommand {
        let whole = |b: &Bson| -> Option<i64> {
            match b {
                Bson::Int32(i) => Some(i64::from(*i)),
                Bson::Int64(i) => Some(*i),
                Bson::Double(d) if d.fract() == 0.0 && d.is_finite() && d.abs() < 9.2e18 => {
                    Some(*d as i64)
                }
                _ => None,
            }
        };
        let flag = |k: &str| matches!(data.get(k), Some(Bson::Boolean(true)));
        let string = |k: &str| data.get_str(k).ok().map(str::to_string);
        let block =
            flag("blockConnection").then(|| match data.get("blockTimeMS").and_then(whole) {
                None => Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "must specify 'blockTimeMS' when 'blockConnection' is true",
                )),
                Some(ms) if ms < 0 => Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "'blockTimeMS' must be non-negative",
                )),
                Some(ms) => Ok(ms as u64),
            });
        FailCommand {
            commands: data
                .get_array("failCommands")
                .map(|a| {
                    a.iter()
                        .filter_map(|c| c.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
            all_commands: data.contains_key("failAllCommands"),
            error_code: data
                .get("errorCode")
                .and_then(whole)
                .and_then(|c| i32::try_from(c).ok()),
            error_labels: data.get_array("errorLabels").ok().cloned(),
            error_extra_info: data.get_document("errorExtraInfo").ok().cloned(),
            close_connection: flag("closeConnection"),
            block,
            write_concern_error: data.get_document("writeConcernError").ok().cloned(),
            app_name: string("appName"),
            thread_name: string("threadName"),
            namespace: string("namespace"),
        }
    }

    /// Whether the fail point applies to this command on this connection.
    fn applies_to(&self, cmd: &CommandInfo<'_>, conn: &ConnectionInfo) -> bool {
        if cmd.name == "configureFailPoint" {
            return false;
        }
        if let Some(thread) = &self.thread_name {
            if *thread != format!("conn{}", conn.id) {
                return false;
            }
        }
        if let Some(app) = &self.app_name {
            // The first hello carries the metadata the connection records
            // only when it runs: mongod reads it before the fail point, so a
            // failCommand on `hello` with `appName` fails the very handshake
            // that names the application (drivers' CMAP tests rely on it).
            let first_hello = || match cmd.body.get("client") {
                Ok(Some(RawBsonRef::Document(c))) => match c.get("application") {
                    Ok(Some(RawBsonRef::Document(a))) => match a.get("name") {
                        Ok(Some(RawBsonRef::String(name))) => Some(name),
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            let ours = match conn.client_metadata.as_ref() {
                Some(m) => m
                    .get_document("application")
                    .ok()
                    .and_then(|a| a.get_str("name").ok()),
                None => first_hello(),
            }
            .unwrap_or("");
            if app != ours {
                return false;
            }
        }
        if let Some(ns) = &self.namespace {
            if *ns != cmd.namespace() {
                return false;
            }
        }
        self.all_commands
            || self
                .commands
                .iter()
                .any(|c| cmd.names.contains(&c.as_str()))
    }

    /// The reply fields `errorLabels` adds.
    fn labels(&self) -> Option<Document> {
        self.error_labels
            .as_ref()
            .map(|l| doc! {"errorLabels": l.clone()})
    }
}

/// Fails unless `name` is a fail point BisonDB implements: mongod's error for
/// names it does not know, NotImplemented for mongod's that BisonDB lacks.
pub fn check_name(name: &str) -> MongoResult<()> {
    if [
        FAIL_COMMAND,
        MAX_TIME_ALWAYS_TIME_OUT,
        FAIL_GET_MORE,
        ON_PRIMARY_TRANSACTIONAL_WRITE,
    ]
    .contains(&name)
    {
        Ok(())
    } else if NOT_MODELLED.binary_search(&name).is_ok() {
        Err(MongoError::new(
            ErrorCode::NotImplemented,
            format!(
                "BisonDB does not implement the fail point '{name}'; it has {FAIL_COMMAND}, {MAX_TIME_ALWAYS_TIME_OUT}, {FAIL_GET_MORE} and {ON_PRIMARY_TRANSACTIONAL_WRITE} (see docs/COMPATIBILITY.md)"
            ),
        ))
    } else {
        Err(MongoError::new(
            ErrorCode::FailPointSetFailed,
            format!("{name} not found"),
        ))
    }
}

/// What a fail point needs to know of a command.
pub struct CommandInfo<'a> {
    pub name: &'a str,
    pub db: &'a str,
    pub body: &'a RawDocument,
    /// Every name the command answers to (`hello`, `isMaster`, `ismaster`):
    /// `failCommands: ["isMaster"]` fails `hello` too, as mongod matches a
    /// command's aliases.
    pub names: &'a [&'a str],
    /// The command takes a write concern (its registry spec says so).
    pub takes_write_concern: bool,
}

impl CommandInfo<'_> {
    /// The namespace the command targets: `db.collection` when its first
    /// field names a collection, else the database.
    fn namespace(&self) -> String {
        match self.body.iter().next() {
            Some(Ok((_, RawBsonRef::String(coll)))) => format!("{}.{coll}", self.db),
            _ => self.db.to_string(),
        }
    }

    /// `maxTimeMS` set to a positive number.
    fn has_time_limit(&self) -> bool {
        match self.body.get("maxTimeMS") {
            Ok(Some(RawBsonRef::Int32(i))) => i > 0,
            Ok(Some(RawBsonRef::Int64(i))) => i > 0,
            Ok(Some(RawBsonRef::Double(d))) => d > 0.0,
            _ => false,
        }
    }

    fn supports_write_concern(&self) -> bool {
        if self.takes_write_concern {
            return true;
        }
        // An aggregation writes only through a final $out or $merge.
        (self.name == "aggregate" && ends_in_out_or_merge(self.body))
            || (is_map_reduce(self.name) && map_reduce_writes(self.body))
    }
}

/// The names `mapReduce` answers to.
pub fn is_map_reduce(name: &str) -> bool {
    matches!(name, "mapReduce" | "mapreduce")
}

/// Whether a `mapReduce` body writes to a collection (its `out` is not
/// inline): only then does it take a write concern (mongod's
/// `mrSupportsWriteConcern`).
pub fn map_reduce_writes(body: &RawDocument) -> bool {
    match body.get("out") {
        Ok(Some(RawBsonRef::Document(d))) => !matches!(d.get("inline"), Ok(Some(_))),
        Ok(Some(_)) => true,
        _ => false,
    }
}

/// Whether an aggregate command's pipeline ends in `$out` or `$merge`, the
/// stages through which an aggregation writes.
pub fn ends_in_out_or_merge(body: &RawDocument) -> bool {
    matches!(body.get("pipeline"), Ok(Some(RawBsonRef::Array(stages)))
        if stages.into_iter().last().is_some_and(|s| matches!(s,
            Ok(RawBsonRef::Document(d)) if matches!(d.iter().next(),
                Some(Ok((k, _))) if k.as_str() == "$out" || k.as_str() == "$merge")))
    )
}

/// What a fired fail point does to a command, in mongod's order: wait, then
/// hang up or fail, or else run it.
#[derive(Debug)]
pub struct Injection {
    pub block: Option<Duration>,
    pub then: Then,
}

#[derive(Debug)]
pub enum Then {
    Run,
    /// Close the connection without replying.
    Close,
    /// Reply with this error instead of running the command.
    Fail(MongoError),
}

/// One fail point's state.
#[derive(Debug)]
struct Slot<T> {
    mode: Mode,
    data: T,
    /// Times it fired since the server started (mongod's `timesEntered`).
    entered: i64,
}

impl<T: Default> Default for Slot<T> {
    fn default() -> Self {
        Slot {
            mode: Mode::Off,
            data: T::default(),
            entered: 0,
        }
    }
}

impl<T> Slot<T> {
    fn fire(&mut self) -> bool {
        let fired = self.mode.fire();
        if fired {
            self.entered += 1;
        }
        fired
    }
}

#[derive(Debug, Default)]
struct Points {
    fail_command: Slot<FailCommand>,
    max_time: Slot<()>,
    /// `failGetMoreAfterCursorCheckout`'s `errorCode`.
    fail_get_more: Slot<Option<i32>>,
    transactional_write: Slot<TransactionalWrite>,
}

/// `onPrimaryTransactionalWrite`'s data.
#[derive(Debug, Default, Clone, Copy)]
struct TransactionalWrite {
    /// `closeConnection` is false (mongod hangs up unless told not to).
    keep_connection: bool,
    /// `failBeforeCommitExceptionCode`.
    fail_code: Option<i32>,
}

/// What `onPrimaryTransactionalWrite` does to one statement when it fires.
#[derive(Debug)]
pub struct WriteFault {
    /// Close the connection once the command is done, its reply unsent.
    pub close_connection: bool,
    /// Fail the statement, unwritten, with this error.
    pub fail: Option<MongoError>,
}

impl Points {
    fn any_on(&self) -> bool {
        self.fail_command.mode != Mode::Off
            || self.max_time.mode != Mode::Off
            || self.fail_get_more.mode != Mode::Off
            || self.transactional_write.mode != Mode::Off
    }
}

/// Codes after which a change stream may resume, as mongod's
/// `isResumableChangeStreamError`: the retriable and network errors
/// (`isRetriableError`, `isNetworkError`), the stale-routing ones
/// (`isNeedRetargettingError`), RetryChangeStream and
/// FailedToSatisfyReadPreference.
const RESUMABLE_CHANGE_STREAM_CODES: &[i32] = &[
    6, 7, 89, 91, 133, 150, 189, 234, 262, 9001, 10107, 11600, 11602, 13388, 13435, 13436, 63, 249,
];

/// A failed change-stream `getMore`'s error with mongod's
/// `ResumableChangeStreamError` label when its code is resumable (a driver
/// resumes only on that label).
pub fn label_change_stream_error(e: MongoError) -> MongoError {
    if e.details.is_some() || !RESUMABLE_CHANGE_STREAM_CODES.contains(&e.code.code()) {
        return e;
    }
    match RawDocumentBuf::try_from(&doc! {"errorLabels": ["ResumableChangeStreamError"]}) {
        Ok(raw) => e.with_details(raw.into_bytes()),
        Err(_) => e,
    }
}

/// The server's fail points (part of `ServerState`).
#[derive(Debug, Default)]
pub struct FailPoints {
    /// True while any fail point is on: the one check every command pays.
    any_on: AtomicBool,
    points: Mutex<Points>,
    /// Cursors opened by a command with `maxTimeMS`: their getMores carry the
    /// time limit too, so `maxTimeAlwaysTimeOut` fails them (recorded only
    /// when test commands are enabled).
    timed_cursors: Mutex<HashSet<i64>>,
}

impl FailPoints {
    /// Whether any fail point is on; one atomic load.
    #[inline]
    pub fn any_on(&self) -> bool {
        self.any_on.load(Ordering::Acquire)
    }

    /// Sets a fail point's mode (and data); returns how many times it fired
    /// before, mongod's `count`. Unknown names fail as in mongod.
    pub fn configure(&self, name: &str, mode: Mode, data: &Document) -> MongoResult<i64> {
        check_name(name)?;
        let mut points = self.points.lock();
        let entered = match name {
            FAIL_COMMAND => {
                let slot = &mut points.fail_command;
                slot.mode = mode;
                slot.data = FailCommand::parse(data);
                slot.entered
            }
            MAX_TIME_ALWAYS_TIME_OUT => {
                points.max_time.mode = mode;
                points.max_time.entered
            }
            FAIL_GET_MORE => {
                let slot = &mut points.fail_get_more;
                slot.mode = mode;
                slot.data = FailCommand::parse(data).error_code;
                slot.entered
            }
            ON_PRIMARY_TRANSACTIONAL_WRITE => {
                let slot = &mut points.transactional_write;
                slot.mode = mode;
                slot.data = TransactionalWrite {
                    keep_connection: matches!(data.get("closeConnection"), Some(Bson::Boolean(false))),
                    fail_code: FailCommand::parse(&doc! {"errorCode": data.get("failBeforeCommitExceptionCode").cloned().unwrap_or(Bson::Null)}).error_code,
                };
                slot.entered
            }
            _ => {
                return Err(MongoError::internal(format!(
                    "fail point {name} has no slot"
                )))
            }
        };
        self.any_on.store(points.any_on(), Ordering::Release);
        Ok(entered)
    }

    /// What the fail points do to a command about to run, if anything.
    pub fn before_command(
        &self,
        cmd: &CommandInfo<'_>,
        conn: &ConnectionInfo,
    ) -> Option<Injection> {
        if !self.any_on() {
            return None;
        }
        let mut points = self.points.lock();
        let injection = Self::fail_command(&mut points.fail_command, cmd, conn)
            .or_else(|| self.max_time(&mut points.max_time, cmd));
        self.any_on.store(points.any_on(), Ordering::Release);
        injection
    }

    fn fail_command(
        slot: &mut Slot<FailCommand>,
        cmd: &CommandInfo<'_>,
        conn: &ConnectionInfo,
    ) -> Option<Injection> {
        let d = &slot.data;
        // Only these make failCommand act before the command; a fail point
        // with nothing but writeConcernError acts after it (and is not
        // counted here).
        let acts = d.close_connection || d.block.is_some() || d.error_code.is_some();
        if slot.mode == Mode::Off || !acts || !d.applies_to(cmd, conn) || !slot.fire() {
            return None;
        }
        let d = &slot.data;
        tracing::info!(command = cmd.name, "failCommand fail point fired");
        let block = match &d.block {
            Some(Err(e)) => {
                return Some(Injection {
                    block: None,
                    then: Then::Fail(e.clone()),
                })
            }
            Some(Ok(ms)) => Some(Duration::from_millis(*ms)),
            None => None,
        };
        let then = if d.close_connection {
            Then::Close
        } else if let Some(code) = d.error_code {
            let mut extra = d.error_extra_info.clone().unwrap_or_default();
            if let Some(labels) = d.labels() {
                extra.extend(labels);
            }
            let mut e = MongoError::new(ErrorCode::from_code(code), FAIL_MESSAGE);
            if !extra.is_empty() {
                if let Ok(raw) = RawDocumentBuf::try_from(&extra) {
                    e = e.with_details(raw.into_bytes());
                }
            }
            Then::Fail(e)
        } else {
            Then::Run
        };
        Some(Injection { block, then })
    }

    fn max_time(&self, slot: &mut Slot<()>, cmd: &CommandInfo<'_>) -> Option<Injection> {
        if slot.mode == Mode::Off {
            return None;
        }
        let limited = cmd.has_time_limit()
            || (cmd.name == "getMore"
                && matches!(cmd.body.get("getMore"), Ok(Some(RawBsonRef::Int64(id)))
                    if self.timed_cursors.lock().contains(&id)));
        if !limited || !slot.fire() {
            return None;
        }
        Some(Injection {
            block: None,
            then: Then::Fail(MongoError::new(
                ErrorCode::MaxTimeMSExpired,
                "operation exceeded time limit",
            )),
        })
    }

    /// The data of the fail point `pick` names when it is on and fires (one
    /// atomic load when every fail point is off).
    fn fire_slot<T: Copy>(&self, pick: impl Fn(&mut Points) -> &mut Slot<T>) -> Option<T> {
        if !self.any_on() {
            return None;
        }
        let mut points = self.points.lock();
        let slot = pick(&mut points);
        if slot.mode == Mode::Off || !slot.fire() {
            return None;
        }
        let data = slot.data;
        self.any_on.store(points.any_on(), Ordering::Release);
        Some(data)
    }

    /// `failGetMoreAfterCursorCheckout`, asked by a `getMore` holding its
    /// cursor (`change_stream`: a change stream's): the error to fail with,
    /// when the fail point fires. Without an `errorCode` it fires and the
    /// `getMore` runs (mongod's default code is 0, no error).
    pub fn fail_get_more(&self, change_stream: bool) -> Option<MongoError> {
        let code = self.fire_slot(|p| &mut p.fail_get_more)?;
        let e = MongoError::new(
            ErrorCode::from_code(code?),
            format!("Hit the '{FAIL_GET_MORE}' failpoint"),
        );
        Some(if change_stream {
            label_change_stream_error(e)
        } else {
            e
        })
    }

    /// `onPrimaryTransactionalWrite`, asked by each statement of a
    /// retryable write before it runs (see the module documentation).
    pub fn on_transactional_write(&self) -> Option<WriteFault> {
        let data = self.fire_slot(|p| &mut p.transactional_write)?;
        tracing::info!("onPrimaryTransactionalWrite fail point fired");
        Some(WriteFault {
            close_connection: !data.keep_connection,
            fail: data.fail_code.map(|code| {
                MongoError::new(
                    ErrorCode::from_code(code),
                    "Failing write due to the onPrimaryTransactionalWrite failpoint",
                )
            }),
        })
    }

    /// After a command ran: a failCommand `writeConcernError` joins the reply
    /// of a successful command that takes a write concern.
    pub fn after_command(
        &self,
        cmd: &CommandInfo<'_>,
        conn: &ConnectionInfo,
        reply: &mut RawDocumentBuf,
    ) {
        if !self.any_on() {
            return;
        }
        let ok = matches!(reply.get("ok"), Ok(Some(RawBsonRef::Double(d))) if d == 1.0)
            || matches!(reply.get("ok"), Ok(Some(RawBsonRef::Int32(1))));
        if !ok || !cmd.supports_write_concern() {
            return;
        }
        let mut points = self.points.lock();
        let slot = &mut points.fail_command;
        let Some(wce) = slot.data.write_concern_error.clone() else {
            return;
        };
        if slot.mode == Mode::Off || !slot.data.applies_to(cmd, conn) || !slot.fire() {
            return;
        }
        let labels = slot.data.labels();
        self.any_on.store(points.any_on(), Ordering::Release);
        drop(points);
        let Ok(mut d) = Document::try_from(reply.as_ref()) else {
            return;
        };
        d.insert("writeConcernError", wce);
        if let Some(labels) = labels {
            d.extend(labels);
        }
        if let Ok(raw) = RawDocumentBuf::try_from(&d) {
            *reply = raw;
        }
    }

    /// Remembers a cursor opened by a command with `maxTimeMS`, whose
    /// getMores `maxTimeAlwaysTimeOut` must fail too. Called only when test
    /// commands are enabled.
    pub fn note_cursor(&self, cmd: &CommandInfo<'_>, reply: &RawDocument) {
        if cmd.name == "getMore" || !cmd.has_time_limit() {
            return;
        }
        let Ok(Some(RawBsonRef::Document(cursor))) = reply.get("cursor") else {
            return;
        };
        let Ok(Some(RawBsonRef::Int64(id))) = cursor.get("id") else {
            return;
        };
        if id == 0 {
            return;
        }
        let mut timed = self.timed_cursors.lock();
        if timed.len() >= MAX_TIMED_CURSORS {
            timed.clear();
        }
        timed.insert(id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn mode(v: Bson) -> MongoResult<Mode> {
        let d = doc! {"mode": v};
        let raw = RawDocumentBuf::try_from(&d).unwrap();
        Mode::parse(raw.get("mode").unwrap())
    }

    #[test]
    fn map_reduce_writes_unless_inline() {
        assert!(!map_reduce_writes(&rawdoc! {"out": {"inline": 1}}));
        assert!(map_reduce_writes(&rawdoc! {"out": "c"}));
        assert!(map_reduce_writes(
            &rawdoc! {"out": {"merge": "c", "db": "d"}}
        ));
        assert!(!map_reduce_writes(&rawdoc! {}));
        assert!(is_map_reduce("mapreduce") && !is_map_reduce("mapReduceX"));
    }

    #[test]
    fn modes_parse_as_mongod() {
        assert_eq!(mode(Bson::from("alwaysOn")).unwrap(), Mode::AlwaysOn);
        assert_eq!(mode(Bson::from("off")).unwrap(), Mode::Off);
        assert_eq!(mode(Bson::from(doc! {"times": 3})).unwrap(), Mode::Times(3));
        assert_eq!(
            mode(Bson::from(doc! {"times": 2_i64})).unwrap(),
            Mode::Times(2)
        );
        assert_eq!(mode(Bson::from(doc! {"skip": 1.0})).unwrap(), Mode::Skip(1));
        assert_eq!(
            mode(Bson::from(doc! {"activationProbability": 0.5})).unwrap(),
            Mode::Probability(0.5)
        );
        let code = |v: Bson| mode(v).unwrap_err().code;
        assert_eq!(code(Bson::from("sometimes")), ErrorCode::BadValue);
        assert_eq!(code(Bson::Int32(1)), ErrorCode::TypeMismatch);
        assert_eq!(code(Bson::from(doc! {"times": -1})), ErrorCode::BadValue);
        assert_eq!(
            code(Bson::from(doc! {"times": 3_000_000_000_i64})),
            ErrorCode::BadValue
        );
        assert_eq!(
            code(Bson::from(doc! {"times": "x"})),
            ErrorCode::TypeMismatch
        );
        assert_eq!(
            code(Bson::from(doc! {"activationProbability": 2.0})),
            ErrorCode::BadValue
        );
        assert_eq!(
            code(Bson::from(doc! {"activationProbability": "x"})),
            ErrorCode::TypeMismatch
        );
        assert_eq!(code(Bson::from(doc! {"often": 1})), ErrorCode::BadValue);
        assert_eq!(
            Mode::parse(None).unwrap_err().code,
            ErrorCode::IllegalOperation
        );
    }

    #[test]
    fn modes_fire_as_mongod() {
        let mut m = Mode::Times(2);
        assert!(m.fire());
        assert!(m.fire());
        assert_eq!(m, Mode::Off);
        assert!(!m.fire());
        let mut m = Mode::Times(0);
        assert!(!m.fire());
        let mut m = Mode::Skip(2);
        assert_eq!(
            [m.fire(), m.fire(), m.fire(), m.fire()],
            [false, false, true, true]
        );
        let mut never = Mode::Probability(0.0);
        let mut always = Mode::Probability(1.0);
        assert!((0..100).all(|_| !never.fire() && always.fire()));
    }

    #[test]
    fn fail_command_data() {
        let f = FailCommand::parse(&doc! {
            "failCommands": ["insert", 3, "find"],
            "errorCode": 8.0,
            "errorLabels": ["A"],
            "closeConnection": false,
            "blockConnection": true,
            "blockTimeMS": 20,
            "appName": "app",
            "writeConcernError": {"code": 91, "errmsg": "x"},
        });
        assert_eq!(f.commands, vec!["insert", "find"]);
        assert_eq!(f.error_code, Some(8));
        assert_eq!(f.error_labels, Some(vec![Bson::from("A")]));
        assert!(!f.close_connection);
        assert_eq!(f.block, Some(Ok(20)));
        assert_eq!(f.app_name.as_deref(), Some("app"));
        assert!(f.write_concern_error.is_some());
        let f = FailCommand::parse(&doc! {"blockConnection": true});
        assert!(matches!(f.block, Some(Err(ref e)) if e.code == ErrorCode::InvalidOptions));
        let f = FailCommand::parse(&doc! {"blockConnection": true, "blockTimeMS": -1});
        assert!(matches!(f.block, Some(Err(_))));
    }

    fn conn(app: Option<&str>) -> ConnectionInfo {
        ConnectionInfo {
            id: 7,
            client_metadata: app.map(|a| doc! {"application": {"name": a}}),
            ..Default::default()
        }
    }

    #[test]
    fn fail_command_counts_only_matching_commands() {
        let fps = FailPoints::default();
        assert!(!fps.any_on());
        let data = doc! {"failCommands": ["insert"], "errorCode": 8, "appName": "a"};
        assert_eq!(
            fps.configure(FAIL_COMMAND, Mode::Times(1), &data).unwrap(),
            0
        );
        assert!(fps.any_on());
        let insert = rawdoc! {"insert": "c", "$db": "d"};
        let find = rawdoc! {"find": "c", "$db": "d"};
        let cmd = |name, body| CommandInfo {
            name,
            db: "d",
            body,
            names: if name == "find" {
                &["find"]
            } else {
                &["insert"]
            },
            takes_write_concern: name == "insert",
        };
        assert!(fps
            .before_command(&cmd("find", &find), &conn(Some("a")))
            .is_none());
        assert!(fps
            .before_command(&cmd("insert", &insert), &conn(Some("b")))
            .is_none());
        assert!(fps
            .before_command(&cmd("insert", &insert), &conn(None))
            .is_none());
        let inj = fps
            .before_command(&cmd("insert", &insert), &conn(Some("a")))
            .unwrap();
        assert!(
            matches!(inj.then, Then::Fail(ref e) if e.code.code() == 8 && e.message == FAIL_MESSAGE)
        );
        assert!(!fps.any_on(), "{{times: 1}} turned itself off");
        assert!(fps
            .before_command(&cmd("insert", &insert), &conn(Some("a")))
            .is_none());
        assert_eq!(
            fps.configure(FAIL_COMMAND, Mode::Off, &Document::new())
                .unwrap(),
            1
        );
    }

    #[test]
    fn names() {
        let fps = FailPoints::default();
        let e = fps
            .configure("noSuchFailPoint", Mode::AlwaysOn, &Document::new())
            .unwrap_err();
        assert_eq!(e.code.code(), 266);
        assert_eq!(e.message, "noSuchFailPoint not found");
        let e = fps
            .configure("stopReplProducer", Mode::AlwaysOn, &Document::new())
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::NotImplemented);
        assert!(NOT_MODELLED.windows(2).all(|w| w[0] < w[1]));
    }

    #[test]
    fn max_time_always_time_out() {
        let fps = FailPoints::default();
        fps.configure(MAX_TIME_ALWAYS_TIME_OUT, Mode::AlwaysOn, &Document::new())
            .unwrap();
        let plain = rawdoc! {"count": "c", "$db": "d"};
        let timed = rawdoc! {"count": "c", "maxTimeMS": 1, "$db": "d"};
        let c = conn(None);
        let info = |body| CommandInfo {
            name: "count",
            db: "d",
            body,
            names: &["count"],
            takes_write_concern: false,
        };
        assert!(fps.before_command(&info(&plain), &c).is_none());
        let inj = fps.before_command(&info(&timed), &c).unwrap();
        assert!(matches!(inj.then, Then::Fail(ref e) if e.code == ErrorCode::MaxTimeMSExpired));
        // A cursor opened with maxTimeMS carries its limit into getMore.
        let find = rawdoc! {"find": "c", "maxTimeMS": 100, "$db": "d"};
        let reply = rawdoc! {"cursor": {"id": 42_i64, "ns": "d.c", "firstBatch": []}, "ok": 1.0};
        fps.note_cursor(
            &CommandInfo {
                name: "find",
                db: "d",
                body: &find,
                names: &["find"],
                takes_write_concern: false,
            },
            &reply,
        );
        let get_more = rawdoc! {"getMore": 42_i64, "collection": "c", "$db": "d"};
        let other = rawdoc! {"getMore": 43_i64, "collection": "c", "$db": "d"};
        let gm = |body| CommandInfo {
            name: "getMore",
            db: "d",
            body,
            names: &["getMore"],
            takes_write_concern: false,
        };
        assert!(fps.before_command(&gm(&get_more), &c).is_some());
        assert!(fps.before_command(&gm(&other), &c).is_none());
    }

    #[test]
    fn write_concern_error_joins_write_replies() {
        let fps = FailPoints::default();
        let data = doc! {"failCommands": ["insert", "find"], "writeConcernError": {"code": 91, "errmsg": "x"}, "errorLabels": ["L"]};
        fps.configure(FAIL_COMMAND, Mode::Times(1), &data).unwrap();
        let c = conn(None);
        let insert = rawdoc! {"insert": "c", "$db": "d"};
        let find = rawdoc! {"find": "c", "$db": "d"};
        let info = |name, body| CommandInfo {
            name,
            db: "d",
            body,
            names: if name == "find" {
                &["find"]
            } else {
                &["insert"]
            },
            takes_write_concern: name == "insert",
        };
        // writeConcernError alone does nothing before the command.
        assert!(fps.before_command(&info("insert", &insert), &c).is_none());
        let mut reply = rawdoc! {"cursor": {}, "ok": 1.0};
        fps.after_command(&info("find", &find), &c, &mut reply);
        assert!(
            reply.get("writeConcernError").unwrap().is_none(),
            "find takes no write concern"
        );
        let mut reply = rawdoc! {"n": 1, "ok": 1.0};
        fps.after_command(&info("insert", &insert), &c, &mut reply);
        let d = Document::try_from(reply.as_ref()).unwrap();
        assert_eq!(
            d.get_document("writeConcernError")
                .unwrap()
                .get_i32("code")
                .unwrap(),
            91
        );
        assert_eq!(d.get_array("errorLabels").unwrap(), &vec![Bson::from("L")]);
        assert!(!fps.any_on());
    }
}
