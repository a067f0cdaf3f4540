//! The database profiler: mongod's per-database profiling level and filter,
//! the server-wide `slowms` and `sampleRate`, and the entries written to
//! `<db>.system.profile`.
//!
//! Settings live in memory only, as in mongod (a restart starts from the
//! `--profile`/`--slowms` options). The connection loop asks
//! [`Profiler::is_active`] once per command, one relaxed atomic load, so a
//! server with profiling off pays nothing more; only when some database
//! profiles does it look up that database's level, time the command and
//! collect what the command reports into [`OpDebug`].
//!
//! Entries follow mongod 8's shape: `op` (`query` for find, `getmore`,
//! `insert`, `update`, `remove`, else `command`), `ns`, `command` as received,
//! the counters the command knows (`keysExamined`, `docsExamined`,
//! `nreturned`, `ninserted`, `nMatched`, `nModified`, `ndeleted`...),
//! `responseLength`, `millis`, `planSummary`, `ts`, `client`, `appName`,
//! `allUsers`, `user`; a failed operation adds `ok: 0`, `errMsg`, `errName`
//! and `errCode`. Updates and deletes write one entry per statement, with
//! the statement as `command`, as mongod does. Unlike mongod's, entries carry
//! an `_id` (BisonDB clusters every collection by `_id`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicI64, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use bisondb_error::{MongoError, MongoResult};
use bisondb_query::matcher::Matcher;
use bisondb_storage::Durability;
use bson::{doc, Bson, Document, RawBsonRef, RawDocument, RawDocumentBuf};
use parking_lot::RwLock;

use crate::context::ConnectionInfo;
use crate::plan;
use crate::request::CommandRequest;
use crate::state::ServerState;

/// The collection each database profiles into.
pub const COLLECTION: &str = "system.profile";
/// mongod creates `system.profile` as a capped collection of 1 MiB.
pub const COLLECTION_SIZE: i64 = 1 << 20;
/// mongod's default `slowms`.
pub const DEFAULT_SLOWMS: i32 = 100;
/// A command document larger than this is recorded truncated (mongod keeps
/// profile entries well below the 16 MB document limit the same way).
const MAX_COMMAND_BYTES: usize = 50 * 1024;

/// A profile filter: the match expression as given and its parsed form.
#[derive(Debug)]
pub struct Filter {
    pub doc: Document,
    matcher: Matcher,
}

impl Filter {
    pub fn parse(doc: Document) -> MongoResult<Filter> {
        let matcher = Matcher::parse_doc(&doc)?;
        Ok(Filter { doc, matcher })
    }
}

/// One database's settings: its level and filter.
#[derive(Debug, Clone, Default)]
pub struct DbSettings {
    pub level: i32,
    pub filter: Option<Arc<Filter>>,
}

pub struct Profiler {
    /// Some database profiles (or the default level does): the one check
    /// every command pays.
    active: AtomicBool,
    /// `--profile`: the level of every database not set by the command.
    default_level: AtomicI32,
    slowms: AtomicI32,
    /// `sampleRate` as f64 bits.
    sample_rate: AtomicU64,
    dbs: RwLock<HashMap<String, DbSettings>>,
    /// Entries written, for tests and diagnostics.
    written: AtomicI64,
}

impl Default for Profiler {
    fn default() -> Self {
        Profiler::new(0, DEFAULT_SLOWMS, 1.0)
    }
}

impl Profiler {
    pub fn new(default_level: i32, slowms: i32, sample_rate: f64) -> Profiler {
        Profiler {
            active: AtomicBool::new(default_level > 0),
            default_level: AtomicI32::new(default_level),
            slowms: AtomicI32::new(slowms),
            sample_rate: AtomicU64::new(sample_rate.to_bits()),
            dbs: RwLock::new(HashMap::new()),
            written: AtomicI64::new(0),
        }
    }

    /// Whether any database may profile. Relaxed: a command that races a
    /// `profile` change may or may not be profiled, as in mongod.
    #[inline]
    pub fn is_active(&self) -> bool {
        self.active.load(Ordering::Relaxed)
    }

    pub fn settings(&self, db: &str) -> DbSettings {
        match self.dbs.read().get(db) {
            Some(s) => s.clone(),
            None => DbSettings {
                level: self.default_level.load(Ordering::Relaxed),
                filter: None,
            },
        }
    }

    /// Replaces `db`'s settings; returns the previous ones.
    pub fn set(&self, db: &str, settings: DbSettings) -> DbSettings {
        let mut dbs = self.dbs.write();
        let default_level = self.default_level.load(Ordering::Relaxed);
        let old = dbs.insert(db.to_string(), settings).unwrap_or(DbSettings {
            level: default_level,
            filter: None,
        });
        let active = default_level > 0 || dbs.values().any(|s| s.level > 0);
        self.active.store(active, Ordering::Relaxed);
        old
    }

    /// Forgets `db`'s settings (the database was dropped: mongod's settings
    /// go with the database).
    pub fn forget(&self, db: &str) {
        let mut dbs = self.dbs.write();
        if dbs.remove(db).is_some() {
            let active =
                self.default_level.load(Ordering::Relaxed) > 0 || dbs.values().any(|s| s.level > 0);
            self.active.store(active, Ordering::Relaxed);
        }
    }

    pub fn slowms(&self) -> i32 {
        self.slowms.load(Ordering::Relaxed)
    }

    pub fn set_slowms(&self, ms: i32) {
        self.slowms.store(ms, Ordering::Relaxed);
    }

    pub fn sample_rate(&self) -> f64 {
        f64::from_bits(self.sample_rate.load(Ordering::Relaxed))
    }

    pub fn set_sample_rate(&self, rate: f64) {
        self.sample_rate.store(rate.to_bits(), Ordering::Relaxed);
    }

    pub fn entries_written(&self) -> i64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Whether an operation of `millis` that produced `entry` is profiled at
    /// `settings`: level 2 takes everything; level 1 takes what the filter
    /// selects or, without a filter, what ran at least `slowms`, sampled at
    /// `sampleRate`.
    fn selects(&self, settings: &DbSettings, entry: &Document, millis: u64) -> bool {
        match settings.level {
            2 => true,
            1 => match &settings.filter {
                Some(f) => f.matcher.matches_doc(entry),
                None => {
                    let slow =
                        i64::try_from(millis).unwrap_or(i64::MAX) >= i64::from(self.slowms());
                    let rate = self.sample_rate();
                    slow && (rate >= 1.0 || rand::random::<f64>() < rate)
                }
            },
            _ => false,
        }
    }
}

/// What one command reports about its execution, for its profile entry.
/// Reset before each profiled command; commands fill it only when
/// `enabled`, so an unprofiled command does no extra work.
#[derive(Debug, Default, Clone)]
pub struct OpDebug {
    pub enabled: bool,
    /// The command as recorded (shared with a cursor it opens, whose
    /// getMores show it as `originatingCommand`).
    command: Option<Arc<Document>>,
    /// A getMore's: the command that opened its cursor.
    originating: Option<Arc<Document>>,
    examined: Option<Examined>,
    plan_summary: Option<Arc<str>>,
    writes: Vec<WriteOutcome>,
    /// The running operation's `planSummary` as `currentOp` and the slow
    /// query line show it, set by the first plan a command reports, profiled
    /// or not (the connection hands each command its slot, `op_ctx.rs`).
    pub plan_slot: Option<Arc<std::sync::OnceLock<Arc<str>>>>,
}

impl OpDebug {
    /// The plan summary and the keys and documents examined so far, for the
    /// slow-query log line (`crate::log::slow`); known only when `enabled`.
    pub fn plan_figures(&self) -> (Option<&str>, Option<(u64, u64)>) {
        let examined = self.examined.as_ref().map(|e| {
            (
                e.stats.keys().saturating_sub(e.keys_before),
                e.stats.docs().saturating_sub(e.docs_before),
            )
        });
        let summary = self
            .plan_summary
            .as_deref()
            .or_else(|| self.plan_slot.as_ref().and_then(|s| s.get()).map(|s| &**s));
        (summary, examined)
    }

    /// Shows `summary` as the running operation's plan (the first one only).
    fn publish(&self, summary: &Arc<str>) {
        if let Some(slot) = &self.plan_slot {
            let _ = slot.set(summary.clone());
        }
    }
}

/// A plan's counters, and their values when this operation started (a
/// getMore continues counting into its find's counters).
#[derive(Debug, Clone)]
struct Examined {
    stats: Arc<plan::Stats>,
    keys_before: u64,
    docs_before: u64,
}

/// What one update or delete statement did.
#[derive(Debug, Clone, Default)]
pub struct WriteOutcome {
    pub matched: u64,
    pub modified: u64,
    pub upserted: bool,
    pub deleted: u64,
    pub error: Option<MongoError>,
    /// Keys and documents examined, and the plan summary, when known.
    pub examined: Option<(u64, u64, String)>,
}

impl WriteOutcome {
    pub fn failed(e: &MongoError) -> WriteOutcome {
        WriteOutcome {
            error: Some(e.clone()),
            ..Default::default()
        }
    }
}

/// A cursor's plan counters and summary, kept for its getMores' entries.
#[derive(Debug, Clone)]
pub struct CursorProfile {
    pub stats: Arc<plan::Stats>,
    pub plan_summary: Arc<str>,
    pub command: Option<Arc<Document>>,
}

impl OpDebug {
    /// Records the plan a read chose and the counters it runs with.
    pub fn plan(&mut self, stats: &Arc<plan::Stats>, chosen: &plan::Plan) {
        if self.enabled || self.plan_slot.as_ref().is_some_and(|s| s.get().is_none()) {
            let s: Arc<str> = summary(chosen).into();
            self.publish(&s);
            if self.enabled {
                self.plan_with(stats, s);
            }
        }
    }

    /// Records a plan that has already run with fresh `stats` (a count;
    /// `keys_only`: it read index keys only, mongod's COUNT_SCAN).
    pub fn ran(&mut self, stats: &Arc<plan::Stats>, chosen: &plan::Plan, keys_only: bool) {
        if self.enabled || self.plan_slot.as_ref().is_some_and(|s| s.get().is_none()) {
            let mut s = summary(chosen);
            if keys_only {
                s = s.replacen("IXSCAN", "COUNT_SCAN", 1);
            }
            let s: Arc<str> = s.into();
            self.publish(&s);
            if self.enabled {
                self.examined = Some(Examined {
                    stats: stats.clone(),
                    keys_before: 0,
                    docs_before: 0,
                });
                self.plan_summary = Some(s);
            }
        }
    }

    fn plan_with(&mut self, stats: &Arc<plan::Stats>, summary: Arc<str>) {
        self.publish(&summary);
        self.examined = Some(Examined {
            stats: stats.clone(),
            keys_before: stats.keys(),
            docs_before: stats.docs(),
        });
        self.plan_summary = Some(summary);
    }

    /// What a cursor opened by this operation keeps for its getMores.
    pub fn cursor_profile(&self) -> Option<CursorProfile> {
        let e = self.examined.as_ref()?;
        Some(CursorProfile {
            stats: e.stats.clone(),
            plan_summary: self.plan_summary.clone()?,
            command: self.command.clone(),
        })
    }

    /// A getMore continues its cursor's counters.
    pub fn resume(&mut self, cursor: Option<&CursorProfile>) {
        if let (true, Some(c)) = (self.enabled, cursor) {
            self.plan_with(&c.stats, c.plan_summary.clone());
            self.originating = c.command.clone();
        }
    }

    /// Records a statement that failed.
    pub fn write_failed(&mut self, e: &MongoError) {
        self.write(WriteOutcome::failed(e), None);
    }

    /// Records the outcome of one update or delete statement and the plan
    /// that found its targets.
    pub fn write(&mut self, mut outcome: WriteOutcome, run: Option<&crate::write::PlanRun>) {
        if let Some(r) = run.filter(|_| self.plan_slot.as_ref().is_some_and(|s| s.get().is_none()))
        {
            self.publish(&summary(&r.plan).into());
        }
        if self.enabled {
            if let Some(r) = run {
                outcome.examined = Some((r.stats.keys(), r.stats.docs(), summary(&r.plan)));
            }
            self.writes.push(outcome);
        }
    }
}

/// mongod's `planSummary` of a plan: `COLLSCAN`, `IDHACK`, `EOF`, or
/// `IXSCAN { a: 1 }` with the index's key pattern.
pub fn summary(chosen: &plan::Plan) -> String {
    match &chosen.access {
        plan::Access::Empty => "EOF".to_string(),
        plan::Access::IdLookup(_) => "IDHACK".to_string(),
        plan::Access::Collscan {
            id_index: false, ..
        } => "COLLSCAN".to_string(),
        plan::Access::Collscan { id_index: true, .. }
        | plan::Access::KeyRange { index: None, .. } => "IXSCAN { _id: 1 }".to_string(),
        plan::Access::Ixscan { index, .. } => format!("IXSCAN {}", key_pattern(&index.spec.key)),
        plan::Access::KeyRange {
            index: Some(index), ..
        } => format!("IXSCAN {}", key_pattern(&index.spec.key)),
    }
}

/// A key pattern as mongod prints it in a plan summary: `{ a: 1, b: -1 }`.
fn key_pattern(key: &Document) -> String {
    let fields: Vec<String> = key.iter().map(|(k, v)| format!("{k}: {v}")).collect();
    if fields.is_empty() {
        "{}".to_string()
    } else {
        format!("{{ {} }}", fields.join(", "))
    }
}

/// A command being profiled: its database's settings when it started.
pub struct Pending {
    started: Instant,
    settings: DbSettings,
}

impl Pending {
    /// Starts profiling `req` if its database profiles. Operations on
    /// `system.profile` itself are profiled too, as in mongod (its
    /// `profile()` makes no exception for the collection; a tool reading the
    /// profile at level 2 sees its own queries). Call only when
    /// [`Profiler::is_active`].
    pub fn start(
        state: &ServerState,
        req: &CommandRequest<'_>,
        conn: &mut ConnectionInfo,
    ) -> Option<Pending> {
        let settings = state.profiler.settings(&req.db);
        // `dropDatabase` is left out: its entry would bring back the
        // database it removed (mongod skips a database that disappeared).
        if settings.level <= 0 || req.name == "dropDatabase" {
            return None;
        }
        conn.op = OpDebug {
            enabled: true,
            command: Some(Arc::new(recorded_command(req.body))),
            ..OpDebug::default()
        };
        Some(Pending {
            started: Instant::now(),
            settings,
        })
    }

    /// Builds the entries of the finished command and writes those the
    /// settings select. Failures are logged, never returned: profiling must
    /// not fail the command it describes.
    pub fn finish(
        self,
        state: &ServerState,
        req: &CommandRequest<'_>,
        conn: &mut ConnectionInfo,
        reply: &RawDocument,
    ) {
        let millis = u64::try_from(self.started.elapsed().as_millis()).unwrap_or(u64::MAX);
        let op = std::mem::take(&mut conn.op);
        let entries = build_entries(req, conn, &op, reply, millis);
        let selected: Vec<RawDocumentBuf> = entries
            .iter()
            .filter(|e| state.profiler.selects(&self.settings, e, millis))
            .filter_map(|e| RawDocumentBuf::try_from(e).ok())
            .collect();
        if selected.is_empty() {
            return;
        }
        if let Err(e) = write_entries(state, &req.db, &selected) {
            tracing::warn!(db = %req.db, error = %e, "could not write profile entry");
        }
    }
}

/// The collection a command names as its first value (`find: "c"`), or
/// `getMore`'s `collection`.
fn target_collection<'a>(req: &CommandRequest<'a>) -> Option<&'a str> {
    let key = if req.name == "getMore" {
        "collection"
    } else {
        req.name
    };
    match req.body.get(key) {
        Ok(Some(RawBsonRef::String(s))) if !s.is_empty() => Some(s),
        _ => None,
    }
}

/// The namespace mongod records: `db.coll` for a command on a collection,
/// `db.$cmd.aggregate` for a database aggregation, else the database name.
pub fn namespace(req: &CommandRequest<'_>) -> String {
    match target_collection(req) {
        Some(c) => format!("{}.{c}", req.db),
        None if req.name == "aggregate" => format!("{}.$cmd.aggregate", req.db),
        None => req.db.clone(),
    }
}

/// mongod's `op` for a command.
pub fn op_name(cmd: &str) -> &'static str {
    match cmd {
        "find" => "query",
        "getMore" => "getmore",
        "insert" => "insert",
        "update" => "update",
        "delete" => "remove",
        _ => "command",
    }
}

/// The command as recorded: as received, or, when too large, a truncated
/// rendering that keeps its comment (mongod's `$truncated`).
fn recorded_command(body: &RawDocument) -> Document {
    let full = || Document::try_from(body).ok();
    if body.as_bytes().len() <= MAX_COMMAND_BYTES {
        if let Some(d) = full() {
            return d;
        }
    }
    let text = full().map(|d| d.to_string()).unwrap_or_default();
    let cut: String = text.chars().take(1024).collect();
    let mut d = doc! {"$truncated": cut};
    if let Ok(Some(c)) = body.get("comment") {
        if let Ok(c) = crate::fields::to_bson(c) {
            d.insert("comment", c);
        }
    }
    d
}

fn i64_of(v: Option<RawBsonRef<'_>>) -> Option<i64> {
    match v? {
        RawBsonRef::Int32(i) => Some(i64::from(i)),
        RawBsonRef::Int64(i) => Some(i),
        RawBsonRef::Double(d) => Some(d as i64),
        _ => None,
    }
}

fn count(n: u64) -> Bson {
    crate::reply::count(n)
}

/// The statements of an update or delete command, from its body or its
/// document sequence.
fn statements<'a>(req: &CommandRequest<'a>, field: &str) -> Vec<&'a RawDocument> {
    if let Some(seq) = req.sequences.iter().find(|s| s.identifier == field) {
        return seq.documents.clone();
    }
    match req.body.get(field) {
        Ok(Some(RawBsonRef::Array(a))) => a
            .into_iter()
            .filter_map(|v| match v {
                Ok(RawBsonRef::Document(d)) => Some(d),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

fn error_fields(entry: &mut Document, e: &MongoError) {
    entry.insert("ok", 0.0);
    entry.insert("errMsg", e.message.clone());
    entry.insert("errName", e.code.name().into_owned());
    entry.insert("errCode", e.code.code());
}

/// The entries of one finished command (several for updates and deletes).
fn build_entries(
    req: &CommandRequest<'_>,
    conn: &ConnectionInfo,
    op: &OpDebug,
    reply: &RawDocument,
    millis: u64,
) -> Vec<Document> {
    let ns = namespace(req);
    let get = |k: &str| reply.get(k).ok().flatten();
    let ok = matches!(get("ok"), Some(RawBsonRef::Double(d)) if d == 1.0)
        || matches!(get("ok"), Some(RawBsonRef::Int32(1)));
    let command_error = (!ok).then(|| {
        let code = i64_of(get("code")).unwrap_or(1) as i32;
        let msg = match get("errmsg") {
            Some(RawBsonRef::String(s)) => s.to_string(),
            _ => String::new(),
        };
        MongoError::new(bisondb_error::ErrorCode::from_code(code), msg)
    });
    let tail = |entry: &mut Document, plan_summary: Option<&str>| {
        entry.insert("millis", count(millis));
        if let Some(s) = plan_summary {
            entry.insert("planSummary", s);
        }
        entry.insert("ts", bson::DateTime::now());
        entry.insert("client", client_address(&conn.peer));
        if let Some(app) = app_name(conn) {
            entry.insert("appName", app);
        }
        entry.insert("allUsers", Bson::Array(Vec::new()));
        entry.insert("user", "");
    };
    let examined = |entry: &mut Document| {
        if let Some(e) = &op.examined {
            entry.insert(
                "keysExamined",
                count(e.stats.keys().saturating_sub(e.keys_before)),
            );
            entry.insert(
                "docsExamined",
                count(e.stats.docs().saturating_sub(e.docs_before)),
            );
        }
    };
    // Updates and deletes: one entry per statement that ran.
    let per_statement = match req.name {
        "update" => Some("updates"),
        "delete" => Some("deletes"),
        _ => None,
    };
    if let (Some(field), false) = (per_statement, op.writes.is_empty()) {
        let stmts = statements(req, field);
        // mongod's `appendCommentField`: a statement's entry records the
        // statement, with the command's `comment` added when it has none.
        let comment = req
            .body
            .get("comment")
            .ok()
            .flatten()
            .and_then(|c| crate::fields::to_bson(c).ok());
        return op
            .writes
            .iter()
            .zip(stmts)
            .map(|(w, stmt)| {
                let mut command = recorded_command(stmt);
                if let Some(c) = &comment {
                    if !command.contains_key("comment") {
                        command.insert("comment", c.clone());
                    }
                }
                let mut e = doc! {
                    "op": op_name(req.name),
                    "ns": ns.clone(),
                    "command": command,
                };
                if let Some((keys, docs, _)) = &w.examined {
                    e.insert("keysExamined", count(*keys));
                    e.insert("docsExamined", count(*docs));
                }
                if req.name == "update" {
                    e.insert("nMatched", count(w.matched));
                    e.insert("nModified", count(w.modified));
                    e.insert("nUpserted", count(u64::from(w.upserted)));
                } else {
                    e.insert("ndeleted", count(w.deleted));
                }
                e.insert("numYield", 0i32);
                e.insert("locks", Document::new());
                e.insert("flowControl", Document::new());
                if let Some(err) = &w.error {
                    error_fields(&mut e, err);
                }
                tail(&mut e, w.examined.as_ref().map(|(_, _, s)| s.as_str()));
                e
            })
            .collect();
    }
    let mut e = doc! {
        "op": op_name(req.name),
        "ns": ns,
        "command": op.command.as_deref().cloned().unwrap_or_else(|| recorded_command(req.body)),
    };
    if let Some(orig) = &op.originating {
        e.insert("originatingCommand", orig.as_ref().clone());
    }
    let cursor = match get("cursor") {
        Some(RawBsonRef::Document(c)) => Some(c),
        _ => None,
    };
    let cursor_id = cursor.and_then(|c| i64_of(c.get("id").ok().flatten()));
    if req.name == "getMore" {
        if let Some(id) = i64_of(req.body.get("getMore").ok().flatten()) {
            e.insert("cursorid", id);
        }
    } else if let Some(id) = cursor_id.filter(|id| *id != 0) {
        e.insert("cursorid", id);
    }
    examined(&mut e);
    if cursor_id == Some(0) && matches!(req.name, "find" | "getMore") {
        e.insert("cursorExhausted", true);
    }
    if ok && req.name == "insert" {
        e.insert(
            "ninserted",
            count(i64_of(get("n")).unwrap_or(0).max(0) as u64),
        );
    }
    e.insert("numYield", 0i32);
    if let Some(c) = cursor {
        let batch = ["firstBatch", "nextBatch"]
            .iter()
            .find_map(|k| match c.get(k) {
                Ok(Some(RawBsonRef::Array(a))) => Some(a.into_iter().count() as u64),
                _ => None,
            });
        if let Some(n) = batch {
            e.insert("nreturned", count(n));
        }
    } else if ok
        && matches!(
            req.name,
            "count" | "distinct" | "findAndModify" | "findandmodify"
        )
    {
        e.insert("nreturned", 1i32);
    }
    e.insert("locks", Document::new());
    e.insert("flowControl", Document::new());
    if let Some(err) = &command_error {
        error_fields(&mut e, err);
    }
    e.insert("responseLength", count(reply.as_bytes().len() as u64));
    e.insert("protocol", "op_msg");
    tail(&mut e, op.plan_summary.as_deref());
    vec![e]
}

/// The client's address without its port, as mongod records it.
fn client_address(peer: &str) -> String {
    match peer.rsplit_once(':') {
        Some((host, port)) if port.chars().all(|c| c.is_ascii_digit()) => host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string(),
        _ => peer.to_string(),
    }
}

pub fn app_name(conn: &ConnectionInfo) -> Option<String> {
    let app = conn
        .client_metadata
        .as_ref()?
        .get_document("application")
        .ok()?;
    app.get_str("name").ok().map(str::to_string)
}

/// The options `system.profile` is created with.
pub fn collection_options() -> Document {
    doc! {"capped": true, "size": COLLECTION_SIZE}
}

/// `db.system.profile`, created (capped, 1 MiB) when missing.
pub fn ensure_collection(
    state: &ServerState,
    db: &str,
) -> MongoResult<bisondb_storage::Collection> {
    if let Some(c) = state.storage.collection(db, COLLECTION) {
        return Ok(c);
    }
    match state
        .storage
        .create_collection(db, COLLECTION, collection_options())
    {
        Ok(c) => Ok(c),
        // Another connection created it first.
        Err(bisondb_storage::StorageError::NamespaceExists(_)) => state
            .storage
            .collection(db, COLLECTION)
            .ok_or_else(|| MongoError::internal("system.profile vanished after creation")),
        Err(e) => Err(MongoError::from(e)),
    }
}

fn write_entries(state: &ServerState, db: &str, entries: &[RawDocumentBuf]) -> MongoResult<()> {
    let coll = ensure_collection(state, db)?;
    let prepared: Vec<_> = entries
        .iter()
        .map(|e| crate::storable::prepare_for_insert(e))
        .collect::<MongoResult<_>>()?;
    let refs: Vec<&RawDocument> = prepared.iter().map(|c| c.as_ref()).collect();
    let outcome = coll.insert_many(&refs, false, Durability::Buffered);
    state
        .profiler
        .written
        .fetch_add(outcome.inserted as i64, Ordering::Relaxed);
    match outcome.errors.into_iter().next() {
        Some((_, e)) => Err(MongoError::from(e)),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn activity_follows_the_levels() {
        let p = Profiler::default();
        assert!(!p.is_active());
        let old = p.set(
            "a",
            DbSettings {
                level: 2,
                filter: None,
            },
        );
        assert_eq!(old.level, 0);
        assert!(p.is_active());
        p.set(
            "b",
            DbSettings {
                level: 1,
                filter: None,
            },
        );
        p.set("a", DbSettings::default());
        assert!(p.is_active(), "b still profiles");
        p.forget("b");
        assert!(!p.is_active());
        assert_eq!(p.settings("b").level, 0);
        let with_default = Profiler::new(1, 100, 1.0);
        assert!(with_default.is_active());
        assert_eq!(with_default.settings("x").level, 1);
    }

    #[test]
    fn level_one_uses_slowms_or_the_filter() {
        let p = Profiler::new(0, 50, 1.0);
        let entry = doc! {"op": "query", "millis": 10};
        let l1 = DbSettings {
            level: 1,
            filter: None,
        };
        assert!(!p.selects(&l1, &entry, 10));
        assert!(p.selects(&l1, &entry, 50));
        p.set_sample_rate(0.0);
        assert!(!p.selects(&l1, &entry, 50), "sampleRate 0 samples nothing");
        let f = Arc::new(Filter::parse(doc! {"op": "query"}).unwrap());
        let l1f = DbSettings {
            level: 1,
            filter: Some(f),
        };
        assert!(
            p.selects(&l1f, &entry, 0),
            "a filter replaces slowms and sampleRate"
        );
        assert!(!p.selects(&l1f, &doc! {"op": "insert"}, 1000));
        assert!(p.selects(
            &DbSettings {
                level: 2,
                filter: None
            },
            &entry,
            0
        ));
        assert!(!p.selects(&DbSettings::default(), &entry, 1000));
    }

    #[test]
    fn startup_options_from_yaml() {
        let mut c = crate::config::ServerConfig::default();
        assert_eq!((c.profile, c.slowms, c.slow_op_sample_rate), (0, 100, 1.0));
        c.apply_yaml(
            "operationProfiling:\n  mode: all\n  slowOpThresholdMs: 5\n  slowOpSampleRate: 0.5\n",
        )
        .unwrap();
        assert_eq!((c.profile, c.slowms, c.slow_op_sample_rate), (2, 5, 0.5));
        assert!(c.validate().is_ok());
        assert!(c
            .apply_yaml("operationProfiling:\n  mode: sometimes\n")
            .is_err());
        c.profile = 3;
        assert!(c.validate().is_err());
        c.profile = 1;
        c.slow_op_sample_rate = 1.5;
        assert!(c.validate().is_err());
    }

    #[test]
    fn ops_namespaces_and_addresses() {
        assert_eq!(op_name("find"), "query");
        assert_eq!(op_name("getMore"), "getmore");
        assert_eq!(op_name("delete"), "remove");
        assert_eq!(op_name("distinct"), "command");
        assert_eq!(client_address("127.0.0.1:5000"), "127.0.0.1");
        assert_eq!(client_address("[::1]:5000"), "::1");
        assert_eq!(
            client_address("anonymous unix socket"),
            "anonymous unix socket"
        );
        assert_eq!(key_pattern(&doc! {"a": 1, "b": -1}), "{ a: 1, b: -1 }");
    }

    #[test]
    fn large_commands_are_truncated_with_their_comment() {
        let big = "x".repeat(MAX_COMMAND_BYTES + 10);
        let body = bson::rawdoc! {"insert": "c", "documents": [{"s": big}], "comment": "why"};
        let d = recorded_command(&body);
        assert!(d.contains_key("$truncated"));
        assert_eq!(d.get_str("comment").unwrap(), "why");
        let small = bson::rawdoc! {"find": "c", "comment": "hi"};
        assert_eq!(
            recorded_command(&small),
            doc! {"find": "c", "comment": "hi"}
        );
    }
}
