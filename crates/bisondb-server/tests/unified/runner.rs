//! Runs one unified-format file against a server: requirements, entities,
//! initial data, operations through the official driver, expected results,
//! errors, command events and final collection contents.
//!
//! The Rust driver has no collection-level `bulkWrite`, so the runner sends the
//! `insert`/`update`/`delete` batches itself, grouping consecutive requests of one
//! kind the way drivers do. The server runs with test commands enabled, so the
//! `failPoint` operation configures fail points as against mongod (and
//! `targetedFailPoint` too: there is one server). Session entities carry
//! operations' `session` argument, transactions (`withTransaction` as the
//! convenient API specifies it) and `$$sessionLsid`; change streams are the
//! driver's. Features the runner does not model (non-command events, some
//! session assertions the driver keeps private) make a test *skipped* with
//! the reason, never silently passed.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bson::{doc, Bson, Document};
use futures::TryStreamExt;
use mongodb::change_stream::ChangeStream;
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::event::command::CommandEvent;
use mongodb::event::EventHandler;
use mongodb::options::{
    ClientOptions, CollectionOptions, CountOptions, CreateCollectionOptions, DatabaseOptions,
    DeleteOptions, DistinctOptions, EstimatedDocumentCountOptions, FindOneAndDeleteOptions,
    FindOneAndReplaceOptions, FindOneAndUpdateOptions, FindOneOptions, FindOptions, IndexOptions,
    InsertManyOptions, InsertOneOptions, ReplaceOptions, RunCursorCommandOptions, ServerApi,
    ServerApiVersion, UpdateModifications, UpdateOptions,
};
use mongodb::{Client, ClientSession, Collection, Cursor, Database, IndexModel};
use serde::de::DeserializeOwned;

use super::extjson;
use super::matching::matches;

/// The version the runner compares `minServerVersion`/`maxServerVersion` against.
const SERVER_VERSION: [u64; 3] = [8, 0, 0];

/// Operations whose presence makes a test skipped, with the reason.
const UNSUPPORTED_OPS: &[(&str, &str)] = &[
    (
        "assertNumberConnectionsCheckedOut",
        "connection-pool assertions are not modelled",
    ),
    (
        "assertSessionTransactionState",
        "the Rust driver does not expose a session's transaction state",
    ),
    (
        "assertSessionDirty",
        "the Rust driver does not expose whether a session is dirty",
    ),
    (
        "assertSessionNotDirty",
        "the Rust driver does not expose whether a session is dirty",
    ),
    (
        "assertSessionPinned",
        "sessions are pinned to a mongos only (sharded clusters)",
    ),
    (
        "getSnapshotTime",
        "the Rust driver does not expose a snapshot session's time",
    ),
    ("mapReduce", "the Rust driver has no mapReduce helper"),
];

/// The deployment the runner runs a pass against, as `runOnRequirements`
/// names topologies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    Single,
    ReplicaSet,
}

impl Topology {
    fn name(self) -> &'static str {
        match self {
            Topology::Single => "single",
            Topology::ReplicaSet => "replicaset",
        }
    }
}

/// Tests of client-side checks that the Rust driver makes differently, by
/// description, with the reason. They send nothing to the server: the Rust
/// driver refuses every unacknowledged client `bulkWrite` before these checks,
/// with its own message, so the expected wording can never appear.
const DRIVER_SPECIFIC_TESTS: &[(&str, &str)] = &[
    (
        "Requesting unacknowledged write with verboseResults is a client-side error",
        "the Rust driver refuses all unacknowledged client bulkWrites (its own message)",
    ),
    (
        "Requesting unacknowledged write with ordered is a client-side error",
        "the Rust driver refuses all unacknowledged client bulkWrites (its own message)",
    ),
];

/// What happened to one test.
pub enum Outcome {
    Passed,
    Failed(String),
    Skipped(String),
}

/// The outcome of every test of a file, by description.
pub struct FileReport {
    pub tests: Vec<(String, Outcome)>,
}

/// An operation's failure as the expectations see it.
#[derive(Debug)]
struct OpError {
    client: bool,
    code: Option<i32>,
    code_name: Option<String>,
    message: String,
    /// The server's reply (or the failing write error), for `errorResponse`.
    response: Option<Document>,
    /// A client `bulkWrite` failure's per-op errors (by index), write concern
    /// errors and partial result, for `writeErrors`/`writeConcernErrors`/`expectResult`.
    bulk: Option<(Document, Vec<Bson>, Option<Bson>)>,
    /// The error's labels (`errorLabelsContain`/`errorLabelsOmit`).
    labels: Vec<String>,
}

impl From<Error> for OpError {
    fn from(e: Error) -> Self {
        let message = e.to_string();
        let response = e
            .server_response()
            .and_then(|r| Document::try_from(r.as_ref()).ok());
        let (client, code, code_name) = match &*e.kind {
            ErrorKind::Command(c) => (false, Some(c.code), Some(c.code_name.clone())),
            ErrorKind::Write(WriteFailure::WriteError(w)) => {
                (false, Some(w.code), w.code_name.clone())
            }
            ErrorKind::Write(WriteFailure::WriteConcernError(w)) => {
                (false, Some(w.code), Some(w.code_name.clone()))
            }
            ErrorKind::InsertMany(m) => {
                let first = m.write_errors.as_ref().and_then(|w| w.first());
                (
                    false,
                    first.map(|w| w.code),
                    first.and_then(|w| w.code_name.clone()),
                )
            }
            ErrorKind::BulkWrite(_) => (false, None, None),
            // The format counts network errors (a closed connection) as client errors.
            ErrorKind::Io(_) | ErrorKind::ConnectionPoolCleared { .. } => (true, None, None),
            ErrorKind::InvalidResponse { .. } => (false, None, None),
            _ => (true, None, None),
        };
        let bulk = match &*e.kind {
            ErrorKind::BulkWrite(b) => Some(client_bulk_failure(b)),
            _ => None,
        };
        let mut labels: Vec<String> = e.labels().iter().cloned().collect();
        labels.sort();
        OpError {
            client,
            code,
            code_name,
            message,
            response,
            bulk,
            labels,
        }
    }
}

/// A client `bulkWrite` error's parts, as the unified format's `expectError` names them.
fn client_bulk_failure(b: &mongodb::error::BulkWriteError) -> (Document, Vec<Bson>, Option<Bson>) {
    let mut errors = Document::new();
    for (i, w) in &b.write_errors {
        let mut d = doc! {"code": w.code, "message": w.message.clone()};
        if let Some(n) = &w.code_name {
            d.insert("codeName", n.clone());
        }
        errors.insert(i.to_string(), d);
    }
    let wc = b
        .write_concern_errors
        .iter()
        .map(|w| {
            Bson::Document(doc! {"code": w.code, "codeName": w.code_name.clone(), "message": w.message.clone()})
        })
        .collect();
    let partial = b.partial_result.as_ref().map(|p| match p {
        mongodb::error::PartialBulkWriteResult::Summary(s) => Bson::Document(summary_doc(s)),
        mongodb::error::PartialBulkWriteResult::Verbose(v) => Bson::Document(verbose_doc(v)),
    });
    (errors, wc, partial)
}

fn summary_doc(s: &mongodb::results::SummaryBulkWriteResult) -> Document {
    doc! {
        "insertedCount": s.inserted_count,
        "upsertedCount": s.upserted_count,
        "matchedCount": s.matched_count,
        "modifiedCount": s.modified_count,
        "deletedCount": s.deleted_count,
    }
}

fn verbose_doc(v: &mongodb::results::VerboseBulkWriteResult) -> Document {
    let mut d = summary_doc(&v.summary);
    let mut inserts = Document::new();
    for (i, r) in &v.insert_results {
        inserts.insert(i.to_string(), doc! {"insertedId": r.inserted_id.clone()});
    }
    let mut updates = Document::new();
    for (i, r) in &v.update_results {
        let mut u = doc! {
            "matchedCount": r.matched_count as i64,
            "modifiedCount": r.modified_count as i64,
        };
        if let Some(id) = &r.upserted_id {
            u.insert("upsertedId", id.clone());
        }
        updates.insert(i.to_string(), u);
    }
    let mut deletes = Document::new();
    for (i, r) in &v.delete_results {
        deletes.insert(i.to_string(), doc! {"deletedCount": r.deleted_count as i64});
    }
    d.insert("insertResults", inserts);
    d.insert("updateResults", updates);
    d.insert("deleteResults", deletes);
    d
}

fn client_err(message: impl Into<String>) -> OpError {
    OpError {
        client: true,
        code: None,
        code_name: None,
        message: message.into(),
        response: None,
        bulk: None,
        labels: Vec::new(),
    }
}

/// One observed command-monitoring event.
#[derive(Clone, Debug)]
struct Event {
    kind: &'static str,
    name: String,
    db: String,
    body: Document,
}

struct ClientEntity {
    client: Client,
    events: Arc<Mutex<Vec<Event>>>,
}

struct CollEntity {
    coll: Collection<Document>,
    unacknowledged: bool,
}

/// Everything `createEntities` and `saveResultAsEntity` produce for one test.
#[derive(Default)]
struct Entities {
    clients: HashMap<String, ClientEntity>,
    dbs: HashMap<String, Database>,
    colls: HashMap<String, CollEntity>,
    cursors: HashMap<String, Cursor<Document>>,
    /// Tailable cursors of `createCommandCursor`, iterated by the runner itself.
    tailable: HashMap<String, TailableCursor>,
    values: HashMap<String, Bson>,
    /// The runner's own client, which no test observes (test-runner
    /// assertions such as `assertCollectionExists` go through it).
    internal: Option<Client>,
    /// Fail points a `failPoint` operation turned on (client id, name), to
    /// turn off when the test ends, whatever its outcome.
    fail_points: Vec<(String, String)>,
    /// Session entities (their lsids are values `lsid:<id>`, kept after
    /// `endSession`).
    sessions: HashMap<String, ClientSession>,
    /// Change streams of `createChangeStream`.
    streams: HashMap<String, ChangeStream<Document>>,
    /// The URI clients of `createEntities` connect to.
    uri: String,
    /// Sessions whose transaction the test started and has not ended (the
    /// driver keeps its own transaction state private).
    open_txns: HashSet<String>,
}

/// Runs every test of `file` against the server at `uri`.
/// `skips` are tests of this file skipped by description, with the reason
/// (tests that cannot pass here, listed in one place by `unified.rs`).
pub async fn run_file(
    file: &serde_json::Value,
    uri: &str,
    topology: Topology,
    skips: &[(&str, &str)],
) -> FileReport {
    let mut tests = Vec::new();
    let Some(top) = file.as_object() else {
        return FileReport { tests };
    };
    let file_doc = match extjson::to_document(top) {
        Ok(d) => d,
        Err(e) => {
            tests.push((
                "<file>".to_owned(),
                Outcome::Failed(format!("bad extended JSON: {e}")),
            ));
            return FileReport { tests };
        }
    };
    let file_skip = requirements_unmet(&file_doc, topology);
    let internal = match Client::with_uri_str(uri).await {
        Ok(c) => c,
        Err(e) => {
            tests.push((
                "<file>".to_owned(),
                Outcome::Failed(format!("connect: {e}")),
            ));
            return FileReport { tests };
        }
    };
    for test in file_doc.get_array("tests").cloned().unwrap_or_default() {
        let Bson::Document(test) = test else { continue };
        let desc = test.get_str("description").unwrap_or("?").to_owned();
        let outcome = if let Some(reason) = &file_skip {
            Outcome::Skipped(reason.clone())
        } else if let Some((_, reason)) = skips.iter().find(|(d, _)| *d == desc) {
            Outcome::Skipped((*reason).to_owned())
        } else if let Some(reason) = skip_reason(&file_doc, &test, topology) {
            Outcome::Skipped(reason)
        } else {
            match run_test(&file_doc, &test, uri, &internal).await {
                Ok(()) => Outcome::Passed,
                Err(e) => Outcome::Failed(e),
            }
        };
        tests.push((desc, outcome));
    }
    FileReport { tests }
}

fn parse_version(s: &str) -> [u64; 3] {
    let mut out = [0; 3];
    for (slot, part) in out.iter_mut().zip(s.split('.')) {
        *slot = part.parse().unwrap_or(0);
    }
    out
}

/// `None` when some entry of `runOnRequirements` fits a standalone 8.0 server.
fn requirements_unmet(d: &Document, topology: Topology) -> Option<String> {
    let Ok(reqs) = d.get_array("runOnRequirements") else {
        return None;
    };
    let mut reasons = Vec::new();
    for r in reqs {
        let Bson::Document(r) = r else { continue };
        match requirement_unmet(r, topology) {
            None => return None,
            Some(why) => reasons.push(why),
        }
    }
    if reasons.is_empty() {
        None
    } else {
        Some(reasons.join("; "))
    }
}

fn requirement_unmet(r: &Document, topology: Topology) -> Option<String> {
    if let Ok(min) = r.get_str("minServerVersion") {
        if parse_version(min) > SERVER_VERSION {
            return Some(format!("needs server {min}"));
        }
    }
    if let Ok(max) = r.get_str("maxServerVersion") {
        if parse_version(max) < SERVER_VERSION {
            return Some(format!("needs server <= {max}"));
        }
    }
    if let Ok(tops) = r.get_array("topologies") {
        if !tops.iter().any(|t| t.as_str() == Some(topology.name())) {
            return Some(format!("needs topology {}", Bson::Array(tops.clone())));
        }
    }
    if r.get_str("serverless").ok() == Some("require") {
        return Some("needs serverless".into());
    }
    if r.get_bool("auth").unwrap_or(false) {
        return Some("needs auth".into());
    }
    if r.get_bool("csfle").unwrap_or(false) {
        return Some("needs csfle".into());
    }
    if r.contains_key("serverParameters") {
        return Some("needs server parameters".into());
    }
    None
}

/// Why a test cannot be run here, checked before any operation runs.
fn skip_reason(file: &Document, test: &Document, topology: Topology) -> Option<String> {
    if let Ok(reason) = test.get_str("skipReason") {
        return Some(reason.to_owned());
    }
    if let Some(r) = requirements_unmet(test, topology) {
        return Some(r);
    }
    let desc = test.get_str("description").unwrap_or_default();
    if let Some((_, why)) = DRIVER_SPECIFIC_TESTS.iter().find(|(d, _)| *d == desc) {
        return Some((*why).to_owned());
    }
    let entities = file
        .get_array("createEntities")
        .cloned()
        .unwrap_or_default();
    for e in &entities {
        if let Some(d) = e.as_document() {
            for kind in ["thread", "clientEncryption", "bucket"] {
                if d.contains_key(kind) {
                    return Some(format!("{kind} entities are not supported"));
                }
            }
        }
    }
    let mut ops = test.get_array("operations").cloned().unwrap_or_default();
    // withTransaction's callback is operations too.
    let mut i = 0;
    while i < ops.len() {
        let callback = ops[i]
            .as_document()
            .and_then(|o| o.get_document("arguments").ok())
            .and_then(|a| a.get_array("callback").ok())
            .cloned();
        if let Some(cb) = callback {
            ops.extend(cb);
        }
        i += 1;
    }
    for op in &ops {
        let Some(op) = op.as_document() else { continue };
        let name = op.get_str("name").unwrap_or_default();
        if let Some((_, why)) = UNSUPPORTED_OPS.iter().find(|(n, _)| *n == name) {
            return Some(format!("{name}: {why}"));
        }
    }
    for exp in test.get_array("expectEvents").cloned().unwrap_or_default() {
        let t = exp
            .as_document()
            .and_then(|d| d.get_str("eventType").ok())
            .unwrap_or("command");
        if t != "command" {
            return Some(format!("{t} events are not observed"));
        }
    }
    None
}

async fn run_test(
    file: &Document,
    test: &Document,
    uri: &str,
    internal: &Client,
) -> Result<(), String> {
    load_initial_data(file, internal).await?;
    let mut ents = Entities {
        uri: uri.to_owned(),
        ..Entities::default()
    };
    create_entities(
        &file
            .get_array("createEntities")
            .cloned()
            .unwrap_or_default(),
        &mut ents,
    )
    .await?;
    ents.internal = Some(internal.clone());
    let ran = run_operations(test, &mut ents).await;
    // Fail points are server-wide: turn them off before anything else runs.
    for (client, name) in std::mem::take(&mut ents.fail_points) {
        let off = doc! {"configureFailPoint": name.as_str(), "mode": "off"};
        if let Err(e) = internal.database("admin").run_command(off).await {
            return Err(format!("turning off fail point {name} of {client}: {e}"));
        }
    }
    ran?;
    if let Ok(expected) = test.get_array("expectEvents") {
        check_events(expected, &ents)?;
    }
    if let Ok(outcome) = test.get_array("outcome") {
        check_outcome(outcome, internal).await?;
    }
    Ok(())
}

async fn run_operations(test: &Document, ents: &mut Entities) -> Result<(), String> {
    for (i, op) in test
        .get_array("operations")
        .cloned()
        .unwrap_or_default()
        .iter()
        .enumerate()
    {
        let Some(op) = op.as_document() else { continue };
        run_operation(op, ents)
            .await
            .map_err(|e| format!("operation {i} ({}): {e}", op.get_str("name").unwrap_or("?")))?;
    }
    Ok(())
}

async fn load_initial_data(file: &Document, internal: &Client) -> Result<(), String> {
    for data in file.get_array("initialData").cloned().unwrap_or_default() {
        let Bson::Document(data) = data else { continue };
        let db = internal.database(data.get_str("databaseName").unwrap_or_default());
        let name = data.get_str("collectionName").unwrap_or_default();
        let coll = db.collection::<Document>(name);
        coll.drop()
            .await
            .map_err(|e| format!("initialData drop: {e}"))?;
        let docs: Vec<Document> = data
            .get_array("documents")
            .cloned()
            .unwrap_or_default()
            .into_iter()
            .filter_map(|d| d.as_document().cloned())
            .collect();
        let create_opts: Option<CreateCollectionOptions> = options_from(
            data.get_document("createOptions")
                .cloned()
                .unwrap_or_default(),
            &[],
        )
        .map_err(|e| format!("initialData createOptions: {e}"))?;
        if docs.is_empty() || create_opts.is_some() {
            db.create_collection(name)
                .with_options(create_opts)
                .await
                .map_err(|e| format!("initialData create: {e}"))?;
        }
        if !docs.is_empty() {
            coll.insert_many(docs)
                .await
                .map_err(|e| format!("initialData insert: {e}"))?;
        }
    }
    Ok(())
}

async fn create_entities(list: &[Bson], ents: &mut Entities) -> Result<(), String> {
    let uri = ents.uri.clone();
    for e in list {
        let Bson::Document(e) = e else { continue };
        if let Ok(c) = e.get_document("client") {
            let id = c.get_str("id").unwrap_or_default().to_owned();
            let mut full_uri = uri.clone();
            if let Ok(u) = c.get_document("uriOptions") {
                for (k, v) in u {
                    let v = match v {
                        Bson::String(s) => s.clone(),
                        other => other.to_string(),
                    };
                    full_uri.push_str(&format!("&{k}={v}"));
                }
            }
            let mut opts = ClientOptions::parse(&full_uri)
                .await
                .map_err(|e| format!("client uri: {e}"))?;
            if let Ok(api) = c.get_document("serverApi") {
                let mut server_api = ServerApi::builder().version(ServerApiVersion::V1).build();
                server_api.strict = api.get_bool("strict").ok();
                server_api.deprecation_errors = api.get_bool("deprecationErrors").ok();
                opts.server_api = Some(server_api);
            }
            let events = Arc::new(Mutex::new(Vec::new()));
            let observe: HashSet<String> = c
                .get_array("observeEvents")
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|b| b.as_str().map(str::to_owned))
                .collect();
            let mut ignore: HashSet<String> = c
                .get_array("ignoreCommandMonitoringEvents")
                .cloned()
                .unwrap_or_default()
                .iter()
                .filter_map(|b| b.as_str().map(str::to_owned))
                .collect();
            // The format says these are never observed unless a test asks for sensitive commands.
            for n in [
                "configureFailPoint",
                "hello",
                "isMaster",
                "ismaster",
                "saslStart",
                "saslContinue",
                "authenticate",
                "getnonce",
            ] {
                ignore.insert(n.to_owned());
            }
            if !observe.is_empty() {
                let sink = Arc::clone(&events);
                opts.command_event_handler =
                    Some(EventHandler::callback(move |ev: CommandEvent| {
                        let (kind, name, db, body) = match ev {
                            CommandEvent::Started(s) => {
                                ("commandStartedEvent", s.command_name, s.db, s.command)
                            }
                            CommandEvent::Succeeded(s) => (
                                "commandSucceededEvent",
                                s.command_name,
                                String::new(),
                                s.reply,
                            ),
                            CommandEvent::Failed(f) => (
                                "commandFailedEvent",
                                f.command_name,
                                String::new(),
                                Document::new(),
                            ),
                            _ => return,
                        };
                        if observe.contains(kind) && !ignore.contains(&name) {
                            if let Ok(mut v) = sink.lock() {
                                v.push(Event {
                                    kind,
                                    name,
                                    db,
                                    body,
                                });
                            }
                        }
                    }));
            }
            let client = Client::with_options(opts).map_err(|e| format!("client: {e}"))?;
            ents.clients.insert(id, ClientEntity { client, events });
        } else if let Ok(d) = e.get_document("database") {
            let client = ents
                .clients
                .get(d.get_str("client").unwrap_or_default())
                .ok_or("database entity names an unknown client")?;
            let opts: Option<DatabaseOptions> = options_from(
                d.get_document("databaseOptions")
                    .cloned()
                    .unwrap_or_default(),
                &[],
            )?;
            let db = client.client.database_with_options(
                d.get_str("databaseName").unwrap_or_default(),
                opts.unwrap_or_default(),
            );
            ents.dbs
                .insert(d.get_str("id").unwrap_or_default().to_owned(), db);
        } else if let Ok(c) = e.get_document("collection") {
            let db = ents
                .dbs
                .get(c.get_str("database").unwrap_or_default())
                .ok_or("collection entity names an unknown database")?;
            let raw_opts = c
                .get_document("collectionOptions")
                .cloned()
                .unwrap_or_default();
            let unacknowledged = raw_opts
                .get_document("writeConcern")
                .is_ok_and(|w| matches!(w.get("w"), Some(Bson::Int32(0) | Bson::Int64(0))));
            let opts: Option<CollectionOptions> = options_from(raw_opts, &[])?;
            let coll = db.collection_with_options(
                c.get_str("collectionName").unwrap_or_default(),
                opts.unwrap_or_default(),
            );
            ents.colls.insert(
                c.get_str("id").unwrap_or_default().to_owned(),
                CollEntity {
                    coll,
                    unacknowledged,
                },
            );
        } else if let Ok(d) = e.get_document("session") {
            let client = ents
                .clients
                .get(d.get_str("client").unwrap_or_default())
                .ok_or("session entity names an unknown client")?;
            let opts: Option<mongodb::options::SessionOptions> = options_from(
                d.get_document("sessionOptions")
                    .cloned()
                    .unwrap_or_default(),
                &[],
            )?;
            let session = client
                .client
                .start_session()
                .with_options(opts)
                .await
                .map_err(|e| format!("startSession: {e}"))?;
            let id = d.get_str("id").unwrap_or_default().to_owned();
            ents.values
                .insert(format!("lsid:{id}"), Bson::Document(session.id().clone()));
            ents.sessions.insert(id, session);
        } else {
            return Err(format!("unsupported entity {e}"));
        }
    }
    Ok(())
}

/// Deserializes driver options from the arguments that are not positional.
fn options_from<T: DeserializeOwned>(
    mut args: Document,
    positional: &[&str],
) -> Result<Option<T>, String> {
    for p in positional {
        args.remove(*p);
    }
    if args.is_empty() {
        return Ok(None);
    }
    bson::deserialize_from_document(args)
        .map(Some)
        .map_err(|e| format!("options: {e}"))
}

async fn run_operation(op: &Document, ents: &mut Entities) -> Result<(), String> {
    run_operation_keeping_error(op, ents).await.map(|_| ())
}

/// Runs one operation and checks its expectations; the operation's error,
/// when it failed as expected (or its outcome is ignored), is returned for
/// `withTransaction`, whose callback's errors end the callback.
async fn run_operation_keeping_error(
    op: &Document,
    ents: &mut Entities,
) -> Result<Option<OpError>, String> {
    let name = op.get_str("name").unwrap_or_default();
    let object = op.get_str("object").unwrap_or_default();
    let args = op.get_document("arguments").cloned().unwrap_or_default();
    let save_as = op.get_str("saveResultAsEntity").ok();
    let result = Box::pin(execute(name, object, args, save_as, ents)).await?;
    if op.get_bool("ignoreResultAndError").unwrap_or(false) {
        return Ok(result.err());
    }
    if let Ok(expect) = op.get_document("expectError") {
        return match result {
            Ok(v) => Err(format!("expected an error, got {v:?}")),
            Err(e) => check_error(expect, &e).map(|()| Some(e)),
        };
    }
    let value = result.map_err(|e| format!("unexpected error: {}", e.message))?;
    if let Some(expected) = op.get("expectResult") {
        matches(expected, value.as_ref(), true, &ents.values, "result")?;
    }
    if let (Ok(id), Some(v)) = (op.get_str("saveResultAsEntity"), value) {
        ents.values.insert(id.to_owned(), v);
    }
    Ok(None)
}

fn check_error(expect: &Document, e: &OpError) -> Result<(), String> {
    if let Ok(client) = expect.get_bool("isClientError") {
        if client != e.client {
            return Err(format!("isClientError {client}, got {e:?}"));
        }
    }
    if let Some(code) = expect.get("errorCode") {
        let want = match code {
            Bson::Int32(c) => Some(*c),
            Bson::Int64(c) => i32::try_from(*c).ok(),
            _ => None,
        };
        if want != e.code {
            return Err(format!("errorCode {code}, got {e:?}"));
        }
    }
    if let Ok(name) = expect.get_str("errorCodeName") {
        if e.code_name.as_deref() != Some(name) {
            return Err(format!("errorCodeName {name}, got {e:?}"));
        }
    }
    if let Ok(want) = expect.get_document("errorResponse") {
        let got = e.response.clone().map(Bson::Document);
        let want = Bson::Document(want.clone());
        matches(&want, got.as_ref(), true, &HashMap::new(), "errorResponse")?;
    }
    if let Some(want) = expect.get("writeErrors") {
        let got = e
            .bulk
            .as_ref()
            .map(|(w, _, _)| w.clone())
            .unwrap_or_default();
        let n = want.as_document().map_or(0, Document::len);
        if n != got.len() {
            return Err(format!("writeErrors {want}, got {got}"));
        }
        for (i, w) in want.as_document().into_iter().flatten() {
            // Each error is matched as a root document: extra fields are allowed.
            matches(
                w,
                got.get(i),
                true,
                &HashMap::new(),
                &format!("writeErrors.{i}"),
            )?;
        }
    }
    if let Some(want) = expect.get("writeConcernErrors") {
        let got = e
            .bulk
            .as_ref()
            .map(|(_, w, _)| w.clone())
            .unwrap_or_default();
        let want = want.as_array().cloned().unwrap_or_default();
        if want.len() != got.len() {
            return Err(format!(
                "writeConcernErrors {}, got {}",
                Bson::Array(want),
                Bson::Array(got)
            ));
        }
        // Each is matched as a root document (the driver adds `codeName`).
        for (i, (w, g)) in want.iter().zip(&got).enumerate() {
            matches(
                w,
                Some(g),
                true,
                &HashMap::new(),
                &format!("writeConcernErrors.{i}"),
            )?;
        }
    }
    // Only client bulkWrite errors carry a partial result the runner reads.
    if let (Some(want), Some((_, _, got))) = (expect.get("expectResult"), &e.bulk) {
        matches(want, got.as_ref(), true, &HashMap::new(), "expectResult")?;
    }
    for (key, want) in [("errorLabelsContain", true), ("errorLabelsOmit", false)] {
        for label in expect.get_array(key).cloned().unwrap_or_default() {
            let label = label.as_str().unwrap_or_default();
            if e.labels.iter().any(|l| l == label) != want {
                return Err(format!("{key} {label}, got {:?}", e.labels));
            }
        }
    }
    if let Ok(sub) = expect.get_str("errorContains") {
        if !e.message.to_lowercase().contains(&sub.to_lowercase()) {
            return Err(format!("errorContains {sub:?}, got {e:?}"));
        }
    }
    Ok(())
}

type OpResult = Result<Result<Option<Bson>, OpError>, String>;

fn coll<'a>(ents: &'a Entities, id: &str) -> Result<&'a CollEntity, String> {
    ents.colls
        .get(id)
        .ok_or_else(|| format!("no collection entity {id}"))
}

fn db<'a>(ents: &'a Entities, id: &str) -> Result<&'a Database, String> {
    ents.dbs
        .get(id)
        .ok_or_else(|| format!("no database entity {id}"))
}

fn doc_arg(args: &Document, key: &str) -> Document {
    args.get_document(key).cloned().unwrap_or_default()
}

fn docs_arg(args: &Document, key: &str) -> Vec<Document> {
    args.get_array(key)
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter_map(|b| b.as_document().cloned())
        .collect()
}

fn update_arg(args: &Document) -> UpdateModifications {
    match args.get("update") {
        Some(Bson::Array(_)) => UpdateModifications::Pipeline(docs_arg(args, "update")),
        _ => UpdateModifications::Document(doc_arg(args, "update")),
    }
}

fn update_result(r: mongodb::results::UpdateResult) -> Bson {
    let mut d = doc! {
        "matchedCount": r.matched_count as i64,
        "modifiedCount": r.modified_count as i64,
        "upsertedCount": i64::from(r.upserted_id.is_some()),
    };
    if let Some(id) = r.upserted_id {
        d.insert("upsertedId", id);
    }
    Bson::Document(d)
}

fn opt_doc(d: Option<Document>) -> Option<Bson> {
    Some(d.map_or(Bson::Null, Bson::Document))
}

/// Runs one operation: `Err` is a runner problem, `Ok(Err)` the operation's
/// error. An operation with a `session` argument runs in that session.
async fn execute(
    name: &str,
    object: &str,
    mut args: Document,
    save_as: Option<&str>,
    ents: &mut Entities,
) -> OpResult {
    if ents.sessions.contains_key(object) {
        return session_op(name, object, args, ents).await;
    }
    if ents.streams.contains_key(object) {
        return stream_op(name, object, ents).await;
    }
    if name == "createChangeStream" {
        return create_change_stream(object, args, save_as, ents).await;
    }
    if name == "createEntities" && object == "testRunner" {
        create_entities(
            &args.get_array("entities").cloned().unwrap_or_default(),
            ents,
        )
        .await?;
        return Ok(Ok(None));
    }
    if name == "targetedFailPoint" && object == "testRunner" {
        // One server: the session's server is the server.
        let internal = ents.internal.clone().ok_or("no internal client")?;
        let fp = args
            .get_document("failPoint")
            .map_err(|_| "targetedFailPoint needs a failPoint document")?;
        let fp_name = fp
            .get_str("configureFailPoint")
            .unwrap_or_default()
            .to_owned();
        internal
            .database("admin")
            .run_command(fp.clone())
            .await
            .map_err(|e| format!("configureFailPoint {fp_name}: {e}"))?;
        ents.fail_points.push(("internal".into(), fp_name));
        return Ok(Ok(None));
    }
    if let Some(kind) = name.strip_prefix("assert") {
        match kind {
            "SessionUnpinned" => return Ok(Ok(None)),
            "SameLsidOnLastTwoCommands" | "DifferentLsidOnLastTwoCommands" => {
                let client = args.get_str("client").unwrap_or_default();
                let events = ents
                    .clients
                    .get(client)
                    .ok_or_else(|| format!("no client {client}"))?
                    .events
                    .lock()
                    .map(|v| v.clone())
                    .unwrap_or_default();
                let started: Vec<&Event> = events
                    .iter()
                    .filter(|e| e.kind == "commandStartedEvent")
                    .collect();
                let [.., a, b] = started.as_slice() else {
                    return Err(format!("{name}: fewer than two commands"));
                };
                let same = a.body.get("lsid") == b.body.get("lsid");
                if same != (kind == "SameLsidOnLastTwoCommands") {
                    return Err(format!(
                        "{name} failed: {:?} / {:?}",
                        a.body.get("lsid"),
                        b.body.get("lsid")
                    ));
                }
                return Ok(Ok(None));
            }
            _ => {}
        }
    }
    let session_id = args.get_str("session").ok().map(str::to_owned);
    args.remove("session");
    let mut session = match &session_id {
        Some(id) => Some(
            ents.sessions
                .remove(id)
                .ok_or_else(|| format!("no session {id}"))?,
        ),
        None => None,
    };
    let out = execute_op(name, object, args, save_as, ents, session.as_mut()).await;
    if let (Some(id), Some(s)) = (session_id, session) {
        ents.sessions.insert(id, s);
    }
    out
}

async fn execute_op(
    name: &str,
    object: &str,
    args: Document,
    save_as: Option<&str>,
    ents: &mut Entities,
    mut session: Option<&mut ClientSession>,
) -> OpResult {
    // An action in the operation's session, if it has one.
    macro_rules! sess {
        ($action:expr) => {
            match session.as_deref_mut() {
                Some(s) => $action.session(s).await,
                None => $action.await,
            }
        };
    }
    macro_rules! drv {
        ($e:expr) => {
            match $e {
                Ok(v) => v,
                Err(e) => return Ok(Err(OpError::from(e))),
            }
        };
    }
    if let Some(c) = ents
        .colls
        .get(object)
        .filter(|c| c.unacknowledged && name != "bulkWrite")
    {
        return unacknowledged(name, c, args).await;
    }
    if name == "failPoint" && object == "testRunner" {
        return configure_fail_point(&args, ents).await;
    }
    let filter = doc_arg(&args, "filter");
    Ok(Ok(match name {
        "insertOne" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<InsertOneOptions> = options_from(args.clone(), &["document"])?;
            let r = drv!(sess!(c
                .insert_one(doc_arg(&args, "document"))
                .with_options(o)));
            Some(Bson::Document(doc! {"insertedId": r.inserted_id}))
        }
        "insertMany" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<InsertManyOptions> = options_from(args.clone(), &["documents"])?;
            let r = drv!(sess!(c
                .insert_many(docs_arg(&args, "documents"))
                .with_options(o)));
            let mut ids = Document::new();
            let mut keys: Vec<_> = r.inserted_ids.into_iter().collect();
            keys.sort_by_key(|(k, _)| *k);
            for (k, v) in keys {
                ids.insert(k.to_string(), v);
            }
            Some(Bson::Document(doc! {"insertedIds": ids}))
        }
        "find" | "createFindCursor" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<FindOptions> = options_from(args.clone(), &["filter"])?;
            if let Some(s) = session.as_deref_mut() {
                let mut cursor = drv!(c.find(filter).with_options(o).session(&mut *s).await);
                let docs: Vec<Document> = drv!(cursor.stream(s).try_collect().await);
                return Ok(Ok(Some(Bson::Array(
                    docs.into_iter().map(Bson::Document).collect(),
                ))));
            }
            let cursor = drv!(c.find(filter).with_options(o).await);
            if name == "createFindCursor" {
                if let Some(id) = save_as {
                    ents.cursors.insert(id.to_owned(), cursor);
                }
                return Ok(Ok(None));
            }
            let docs: Vec<Document> = drv!(cursor.try_collect().await);
            Some(Bson::Array(docs.into_iter().map(Bson::Document).collect()))
        }
        "findOne" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<FindOneOptions> = options_from(args.clone(), &["filter"])?;
            opt_doc(drv!(sess!(c.find_one(filter).with_options(o))))
        }
        "aggregate" => {
            let pipeline = docs_arg(&args, "pipeline");
            let o: Option<mongodb::options::AggregateOptions> =
                options_from(args.clone(), &["pipeline"])?;
            if let Some(s) = session.as_deref_mut() {
                let mut cursor = if let Some(c) = ents.colls.get(object) {
                    drv!(
                        c.coll
                            .aggregate(pipeline)
                            .with_options(o)
                            .session(&mut *s)
                            .await
                    )
                } else {
                    drv!(
                        db(ents, object)?
                            .aggregate(pipeline)
                            .with_options(o)
                            .session(&mut *s)
                            .await
                    )
                };
                let docs: Vec<Document> = drv!(cursor.stream(s).try_collect().await);
                return Ok(Ok(Some(Bson::Array(
                    docs.into_iter().map(Bson::Document).collect(),
                ))));
            }
            let cursor = if let Some(c) = ents.colls.get(object) {
                drv!(c.coll.aggregate(pipeline).with_options(o).await)
            } else {
                drv!(db(ents, object)?.aggregate(pipeline).with_options(o).await)
            };
            let docs: Vec<Document> = drv!(cursor.try_collect().await);
            Some(Bson::Array(docs.into_iter().map(Bson::Document).collect()))
        }
        "countDocuments" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<CountOptions> = options_from(args.clone(), &["filter"])?;
            Some(Bson::Int64(
                drv!(sess!(c.count_documents(filter).with_options(o))) as i64,
            ))
        }
        "estimatedDocumentCount" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<EstimatedDocumentCountOptions> = options_from(args.clone(), &[])?;
            Some(Bson::Int64(
                drv!(c.estimated_document_count().with_options(o).await) as i64,
            ))
        }
        "count" => {
            let c = &coll(ents, object)?.coll;
            let mut cmd = doc! {"count": c.name(), "query": filter};
            for k in ["limit", "skip", "collation", "hint", "comment"] {
                if let Some(v) = args.get(k) {
                    cmd.insert(k, v.clone());
                }
            }
            let reply = drv!(sess!(c
                .client()
                .database(c.namespace().db.as_str())
                .run_command(cmd)));
            reply.get("n").cloned()
        }
        "distinct" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<DistinctOptions> = options_from(args.clone(), &["filter", "fieldName"])?;
            let field = args.get_str("fieldName").unwrap_or_default();
            Some(Bson::Array(drv!(sess!(c
                .distinct(field, filter)
                .with_options(o)))))
        }
        "updateOne" | "updateMany" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<UpdateOptions> = options_from(args.clone(), &["filter", "update"])?;
            let r = if name == "updateOne" {
                drv!(sess!(c
                    .update_one(filter, update_arg(&args))
                    .with_options(o)))
            } else {
                drv!(sess!(c
                    .update_many(filter, update_arg(&args))
                    .with_options(o)))
            };
            Some(update_result(r))
        }
        "replaceOne" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<ReplaceOptions> = options_from(args.clone(), &["filter", "replacement"])?;
            let r = drv!(sess!(c
                .replace_one(filter, doc_arg(&args, "replacement"))
                .with_options(o)));
            Some(update_result(r))
        }
        "deleteOne" | "deleteMany" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<DeleteOptions> = options_from(args.clone(), &["filter"])?;
            let r = if name == "deleteOne" {
                drv!(sess!(c.delete_one(filter).with_options(o)))
            } else {
                drv!(sess!(c.delete_many(filter).with_options(o)))
            };
            Some(Bson::Document(
                doc! {"deletedCount": r.deleted_count as i64},
            ))
        }
        "findOneAndUpdate" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<FindOneAndUpdateOptions> =
                options_from(args.clone(), &["filter", "update"])?;
            opt_doc(drv!(sess!(c
                .find_one_and_update(filter, update_arg(&args))
                .with_options(o))))
        }
        "findOneAndReplace" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<FindOneAndReplaceOptions> =
                options_from(args.clone(), &["filter", "replacement"])?;
            opt_doc(drv!(sess!(c
                .find_one_and_replace(filter, doc_arg(&args, "replacement"))
                .with_options(o))))
        }
        "findOneAndDelete" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<FindOneAndDeleteOptions> = options_from(args.clone(), &["filter"])?;
            opt_doc(drv!(sess!(c.find_one_and_delete(filter).with_options(o))))
        }
        "bulkWrite" => {
            let c = coll(ents, object)?;
            return bulk_write(c, &args, session).await;
        }
        "clientBulkWrite" => {
            let c = &ents.clients.get(object).ok_or("no client entity")?.client;
            return client_bulk_write(c, &args).await;
        }
        "createCollection" => {
            let d = db(ents, object)?;
            let o: Option<CreateCollectionOptions> = options_from(args.clone(), &["collection"])?;
            let name = args.get_str("collection").unwrap_or_default();
            drv!(sess!(d.create_collection(name).with_options(o)));
            // The result is the collection itself, usable as an entity.
            if let Some(id) = save_as {
                let coll = CollEntity {
                    coll: d.collection::<Document>(name),
                    unacknowledged: false,
                };
                ents.colls.insert(id.to_owned(), coll);
            }
            None
        }
        "dropCollection" => {
            let d = db(ents, object)?;
            drv!(sess!(d
                .collection::<Document>(args.get_str("collection").unwrap_or_default())
                .drop()));
            None
        }
        "modifyCollection" => {
            let d = db(ents, object)?;
            let mut cmd = doc! {"collMod": args.get_str("collection").unwrap_or_default()};
            for (k, v) in &args {
                if k != "collection" {
                    cmd.insert(k.clone(), v.clone());
                }
            }
            Some(Bson::Document(drv!(d.run_command(cmd).await)))
        }
        "listCollectionNames" => {
            let d = db(ents, object)?;
            let names = drv!(d.list_collection_names().filter(filter).await);
            Some(Bson::Array(names.into_iter().map(Bson::String).collect()))
        }
        "listCollections" => {
            let d = db(ents, object)?;
            let cmd = doc! {"listCollections": 1, "filter": filter};
            if let Some(s) = session.as_deref_mut() {
                let mut cursor = drv!(d.run_cursor_command(cmd).session(&mut *s).await);
                let docs: Vec<Document> = drv!(cursor.stream(s).try_collect().await);
                return Ok(Ok(Some(Bson::Array(
                    docs.into_iter().map(Bson::Document).collect(),
                ))));
            }
            let docs: Vec<Document> =
                drv!(drv!(d.run_cursor_command(cmd).await).try_collect().await);
            if name == "listCollectionNames" {
                Some(Bson::Array(
                    docs.iter().filter_map(|d| d.get("name").cloned()).collect(),
                ))
            } else {
                Some(Bson::Array(docs.into_iter().map(Bson::Document).collect()))
            }
        }
        "listDatabases" | "listDatabaseObjects" => {
            // The driver's helper, which retries a read as drivers do.
            let c = &ents.clients.get(object).ok_or("no client entity")?.client;
            let specs = drv!(sess!(c.list_databases().filter(filter)));
            Some(serialized(&specs)?)
        }
        "listDatabaseNames" => {
            let c = &ents.clients.get(object).ok_or("no client entity")?.client;
            let names = drv!(c.list_database_names().filter(filter).await);
            Some(Bson::Array(names.into_iter().map(Bson::String).collect()))
        }
        "listCollectionObjects" => {
            let d = db(ents, object)?;
            let specs: Vec<mongodb::results::CollectionSpecification> = drv!(
                drv!(d.list_collections().filter(filter).await)
                    .try_collect()
                    .await
            );
            Some(serialized(&specs)?)
        }
        "listIndexNames" => {
            let c = &coll(ents, object)?.coll;
            let names = drv!(c.list_index_names().await);
            Some(Bson::Array(names.into_iter().map(Bson::String).collect()))
        }
        "dropDatabase" => {
            let d = match ents.clients.get(object) {
                Some(c) => c
                    .client
                    .database(args.get_str("database").unwrap_or_default()),
                None => db(ents, object)?.clone(),
            };
            drv!(sess!(d.drop()));
            None
        }
        "dropIndexes" => {
            let c = &coll(ents, object)?.coll;
            drv!(sess!(c.drop_indexes()));
            None
        }
        "rename" => {
            let c = &coll(ents, object)?.coll;
            let ns = c.namespace();
            let mut cmd = doc! {
                "renameCollection": format!("{}.{}", ns.db, ns.coll),
                "to": format!("{}.{}", ns.db, args.get_str("to").unwrap_or_default()),
            };
            if let Some(v) = args.get("dropTarget") {
                cmd.insert("dropTarget", v.clone());
            }
            drv!(sess!(c.client().database("admin").run_command(cmd)));
            None
        }
        "assertCollectionExists" | "assertCollectionNotExists" => {
            let client = ents.internal.as_ref().ok_or("no internal client")?;
            let names = drv!(
                client
                    .database(args.get_str("databaseName").unwrap_or_default())
                    .list_collection_names()
                    .await
            );
            let present = names
                .iter()
                .any(|n| Some(n.as_str()) == args.get_str("collectionName").ok());
            if present != (name == "assertCollectionExists") {
                return Err(format!("{name} failed: {names:?}"));
            }
            None
        }
        "assertIndexExists" | "assertIndexNotExists" => {
            let client = ents.internal.as_ref().ok_or("no internal client")?;
            let c = client
                .database(args.get_str("databaseName").unwrap_or_default())
                .collection::<Document>(args.get_str("collectionName").unwrap_or_default());
            let names = c.list_index_names().await.unwrap_or_default();
            let present = names
                .iter()
                .any(|n| Some(n.as_str()) == args.get_str("indexName").ok());
            if present != (name == "assertIndexExists") {
                return Err(format!("{name} failed: {names:?}"));
            }
            None
        }
        "createIndex" => {
            let c = &coll(ents, object)?.coll;
            let o: Option<IndexOptions> = options_from(args.clone(), &["keys"])?;
            let model = IndexModel::builder()
                .keys(doc_arg(&args, "keys"))
                .options(o)
                .build();
            Some(Bson::String(drv!(sess!(c.create_index(model))).index_name))
        }
        "dropIndex" => {
            let c = &coll(ents, object)?.coll;
            drv!(sess!(c.drop_index(args.get_str("name").unwrap_or_default())));
            None
        }
        "listIndexes" => {
            let c = &coll(ents, object)?.coll;
            let d = c.client().database(c.namespace().db.as_str());
            if let Some(s) = session.as_deref_mut() {
                let mut cursor = drv!(
                    d.run_cursor_command(doc! {"listIndexes": c.name()})
                        .session(&mut *s)
                        .await
                );
                let docs: Vec<Document> = drv!(cursor.stream(s).try_collect().await);
                return Ok(Ok(Some(Bson::Array(
                    docs.into_iter().map(Bson::Document).collect(),
                ))));
            }
            let cursor = drv!(d.run_cursor_command(doc! {"listIndexes": c.name()}).await);
            let docs: Vec<Document> = drv!(cursor.try_collect().await);
            Some(Bson::Array(docs.into_iter().map(Bson::Document).collect()))
        }
        "runCommand" => {
            let d = db(ents, object)?;
            Some(Bson::Document(drv!(sess!(
                d.run_command(doc_arg(&args, "command"))
            ))))
        }
        "createCommandCursor" if args.get_str("cursorType").ok() == Some("tailable") => {
            let d = db(ents, object)?.clone();
            let cursor = drv!(TailableCursor::open(d, &args).await);
            if let Some(id) = save_as {
                ents.tailable.insert(id.to_owned(), cursor);
            }
            return Ok(Ok(None));
        }
        "runCursorCommand" | "createCommandCursor" => {
            let d = db(ents, object)?;
            let o: Option<RunCursorCommandOptions> =
                options_from(args.clone(), &["command", "commandName", "cursorType"])?;
            let cursor = drv!(
                d.run_cursor_command(doc_arg(&args, "command"))
                    .with_options(o)
                    .await
            );
            if name == "createCommandCursor" {
                if let Some(id) = save_as {
                    ents.cursors.insert(id.to_owned(), cursor);
                }
                return Ok(Ok(None));
            }
            let docs: Vec<Document> = drv!(cursor.try_collect().await);
            Some(Bson::Array(docs.into_iter().map(Bson::Document).collect()))
        }
        "iterateUntilDocumentOrError" | "iterateOnce" if ents.tailable.contains_key(object) => {
            let cursor = ents
                .tailable
                .get_mut(object)
                .ok_or_else(|| format!("no cursor {object}"))?;
            let mut next = drv!(cursor.next_once().await);
            while next.is_none() && name == "iterateUntilDocumentOrError" && cursor.id != 0 {
                next = drv!(cursor.next_once().await);
            }
            match next {
                Some(d) => Some(Bson::Document(d)),
                None if name == "iterateOnce" => None,
                None => return Err("cursor exhausted".into()),
            }
        }
        "iterateUntilDocumentOrError" | "iterateOnce" => {
            let cursor = ents
                .cursors
                .get_mut(object)
                .ok_or_else(|| format!("no cursor {object}"))?;
            // The driver's `try_next` sends getMore after getMore on a tailable
            // cursor until a document comes; `iterateOnce` must return after one
            // round, which the driver does not expose: bound the wait instead.
            let next = if name == "iterateOnce" {
                match tokio::time::timeout(Duration::from_secs(1), cursor.try_next()).await {
                    Ok(r) => drv!(r),
                    Err(_) => None,
                }
            } else {
                drv!(cursor.try_next().await)
            };
            match next {
                Some(d) => Some(Bson::Document(d)),
                None if name == "iterateOnce" => None,
                None => return Err("cursor exhausted".into()),
            }
        }
        "close" => {
            ents.cursors.remove(object);
            if let Some(c) = ents.tailable.remove(object) {
                drv!(c.close().await);
            }
            None
        }
        other => {
            return Err(format!(
                "operation {other} is not implemented by the runner"
            ))
        }
    }))
}

/// An operation without a result, as the runner reports it.
fn unit(r: mongodb::error::Result<()>) -> OpResult {
    Ok(r.map(|()| None).map_err(OpError::from))
}

/// Driver results (database or collection specifications) as documents.
fn serialized<T: serde::Serialize>(items: &[T]) -> Result<Bson, String> {
    items
        .iter()
        .map(|d| {
            bson::serialize_to_document(d)
                .map(Bson::Document)
                .map_err(|e| e.to_string())
        })
        .collect::<Result<Vec<Bson>, String>>()
        .map(Bson::Array)
}

/// Operations on a session entity: transactions and `endSession`.
async fn session_op(name: &str, object: &str, args: Document, ents: &mut Entities) -> OpResult {
    use mongodb::options::TransactionOptions;
    let mut s = ents
        .sessions
        .remove(object)
        .ok_or_else(|| format!("no session {object}"))?;
    let out = match name {
        "startTransaction" => {
            let o: Option<TransactionOptions> = options_from(args, &[])?;
            ents.open_txns.insert(object.to_owned());
            unit(s.start_transaction().with_options(o).await)
        }
        "commitTransaction" => {
            ents.open_txns.remove(object);
            unit(s.commit_transaction().await)
        }
        "abortTransaction" => {
            ents.open_txns.remove(object);
            unit(s.abort_transaction().await)
        }
        "endSession" => {
            // Ending a session aborts its open transaction (the driver would
            // do so in the background when it is dropped; here before the
            // events are checked). Dropping it returns it to the pool.
            if ents.open_txns.remove(object) {
                let _ = s.abort_transaction().await;
            }
            return Ok(Ok(None));
        }
        "withTransaction" => {
            let o: Option<TransactionOptions> = options_from(args.clone(), &["callback"])?;
            let callback = args.get_array("callback").cloned().unwrap_or_default();
            ents.sessions.insert(object.to_owned(), s);
            return with_transaction(object, o, &callback, ents).await;
        }
        other => Err(format!(
            "session operation {other} is not implemented by the runner"
        )),
    };
    ents.sessions.insert(object.to_owned(), s);
    out
}

/// The convenient transaction API as the specification words it: retry the
/// whole transaction on TransientTransactionError and the commit on
/// UnknownTransactionCommitResult, for up to 120 seconds.
async fn with_transaction(
    object: &str,
    opts: Option<mongodb::options::TransactionOptions>,
    callback: &[Bson],
    ents: &mut Entities,
) -> OpResult {
    const LIMIT: Duration = Duration::from_secs(120);
    let started = std::time::Instant::now();
    'attempt: loop {
        {
            let s = ents.sessions.get_mut(object).ok_or("session vanished")?;
            if let Err(e) = s.start_transaction().with_options(opts.clone()).await {
                return Ok(Err(OpError::from(e)));
            }
            ents.open_txns.insert(object.to_owned());
        }
        let mut failed = None;
        for op in callback {
            let Some(op) = op.as_document() else { continue };
            if let Some(e) = run_operation_keeping_error(op, ents).await? {
                failed = Some(e);
                break;
            }
        }
        let open = ents.open_txns.remove(object);
        let s = ents.sessions.get_mut(object).ok_or("session vanished")?;
        if let Some(e) = failed {
            if open {
                let _ = s.abort_transaction().await;
            }
            if e.labels.iter().any(|l| l == "TransientTransactionError")
                && started.elapsed() < LIMIT
            {
                continue 'attempt;
            }
            return Ok(Err(e));
        }
        if !open {
            // The callback ended the transaction itself.
            return Ok(Ok(None));
        }
        loop {
            match s.commit_transaction().await {
                Ok(()) => return Ok(Ok(None)),
                Err(e) => {
                    let e = OpError::from(e);
                    let has = |l: &str| e.labels.iter().any(|x| x == l);
                    if has("UnknownTransactionCommitResult")
                        && e.code != Some(50)
                        && started.elapsed() < LIMIT
                    {
                        continue;
                    }
                    if has("TransientTransactionError") && started.elapsed() < LIMIT {
                        continue 'attempt;
                    }
                    return Ok(Err(e));
                }
            }
        }
    }
}

/// `createChangeStream` on a client, database or collection entity.
async fn create_change_stream(
    object: &str,
    args: Document,
    save_as: Option<&str>,
    ents: &mut Entities,
) -> OpResult {
    let pipeline = docs_arg(&args, "pipeline");
    let o: Option<mongodb::options::ChangeStreamOptions> = options_from(args, &["pipeline"])?;
    let opened = if let Some(c) = ents.colls.get(object) {
        c.coll.watch().pipeline(pipeline).with_options(o).await
    } else if let Some(d) = ents.dbs.get(object) {
        d.watch().pipeline(pipeline).with_options(o).await
    } else if let Some(c) = ents.clients.get(object) {
        c.client.watch().pipeline(pipeline).with_options(o).await
    } else {
        return Err(format!("no entity {object} to watch"));
    };
    let stream = match opened {
        Ok(s) => s.with_type::<Document>(),
        Err(e) => return Ok(Err(OpError::from(e))),
    };
    if let Some(id) = save_as {
        ents.streams.insert(id.to_owned(), stream);
    }
    Ok(Ok(None))
}

/// Iterating or closing a change stream entity.
async fn stream_op(name: &str, object: &str, ents: &mut Entities) -> OpResult {
    let stream = ents
        .streams
        .get_mut(object)
        .ok_or_else(|| format!("no change stream {object}"))?;
    match name {
        "iterateUntilDocumentOrError" => {
            match tokio::time::timeout(Duration::from_secs(10), stream.next_if_any()).await {
                Err(_) => Err("no change event within 10 s".into()),
                Ok(Ok(Some(d))) => Ok(Ok(Some(Bson::Document(d)))),
                Ok(Ok(None)) => {
                    // next_if_any returns after one empty getMore: keep going.
                    let next = tokio::time::timeout(Duration::from_secs(10), async {
                        loop {
                            match stream.next_if_any().await {
                                Ok(None) if stream.is_alive() => continue,
                                other => return other,
                            }
                        }
                    })
                    .await
                    .map_err(|_| "no change event within 10 s".to_string())?;
                    match next {
                        Ok(Some(d)) => Ok(Ok(Some(Bson::Document(d)))),
                        Ok(None) => Err("change stream closed".into()),
                        Err(e) => Ok(Err(OpError::from(e))),
                    }
                }
                Ok(Err(e)) => Ok(Err(OpError::from(e))),
            }
        }
        "iterateOnce" => match stream.next_if_any().await {
            Ok(d) => Ok(Ok(d.map(Bson::Document))),
            Err(e) => Ok(Err(OpError::from(e))),
        },
        "close" => {
            ents.streams.remove(object);
            Ok(Ok(None))
        }
        other => Err(format!(
            "change stream operation {other} is not implemented by the runner"
        )),
    }
}

/// Writes with `{w: 0}`: the Rust driver refuses unacknowledged write concerns, so
/// the runner sends the command a driver would, and reports no result.
/// The `failPoint` test-runner operation: `configureFailPoint` through the
/// named client, remembered so the test's end turns it off.
async fn configure_fail_point(args: &Document, ents: &mut Entities) -> OpResult {
    let client_id = args
        .get_str("client")
        .map_err(|_| "failPoint needs a client")?;
    let fp = args
        .get_document("failPoint")
        .map_err(|_| "failPoint needs a failPoint document")?;
    let name = fp
        .get_str("configureFailPoint")
        .map_err(|_| "failPoint.configureFailPoint must name the fail point")?;
    let client = &ents
        .clients
        .get(client_id)
        .ok_or_else(|| format!("unknown client {client_id}"))?
        .client;
    client
        .database("admin")
        .run_command(fp.clone())
        .await
        .map_err(|e| format!("configureFailPoint {name}: {e}"))?;
    ents.fail_points
        .push((client_id.to_owned(), name.to_owned()));
    Ok(Ok(None))
}

async fn unacknowledged(name: &str, c: &CollEntity, args: Document) -> OpResult {
    let request = match name {
        "updateOne" | "updateMany" | "replaceOne" | "deleteOne" | "deleteMany" | "insertOne" => {
            doc! {name: args}
        }
        "findOneAndUpdate" | "findOneAndReplace" | "findOneAndDelete" => {
            let mut cmd = doc! {"findAndModify": c.coll.name(), "query": doc_arg(&args, "filter")};
            match name {
                "findOneAndUpdate" => {
                    cmd.insert("update", args.get("update").cloned().unwrap_or(Bson::Null))
                }
                "findOneAndReplace" => cmd.insert(
                    "update",
                    args.get("replacement").cloned().unwrap_or(Bson::Null),
                ),
                _ => cmd.insert("remove", true),
            };
            for (k, v) in &args {
                if !matches!(k.as_str(), "filter" | "update" | "replacement") {
                    cmd.insert(k.clone(), v.clone());
                }
            }
            cmd.insert("writeConcern", doc! {"w": 0});
            let db = c.coll.client().database(c.coll.namespace().db.as_str());
            return Ok(db
                .run_command(cmd)
                .await
                .map(|_| None)
                .map_err(OpError::from));
        }
        other => {
            return Err(format!(
                "{other} with an unacknowledged write concern is not implemented by the runner"
            ))
        }
    };
    let bulk = doc! {"requests": [request]};
    Ok(bulk_write(c, &bulk, None).await?.map(|_| None))
}

/// The 8.0 client `bulkWrite`, through the driver's `Client::bulk_write`.
async fn client_bulk_write(client: &Client, args: &Document) -> OpResult {
    use mongodb::options::{
        BulkWriteOptions, DeleteManyModel, DeleteOneModel, InsertOneModel, ReplaceOneModel,
        UpdateManyModel, UpdateOneModel, WriteModel,
    };
    let mut models: Vec<WriteModel> = Vec::new();
    for m in docs_arg(args, "models") {
        let Some((kind, body)) = m.iter().next() else {
            return Err("empty clientBulkWrite model".into());
        };
        let b = body.as_document().cloned().unwrap_or_default();
        let ns_str = b.get_str("namespace").unwrap_or_default();
        let (db, coll) = ns_str.split_once('.').unwrap_or((ns_str, ""));
        let ns = mongodb::Namespace::new(db, coll);
        let filter = doc_arg(&b, "filter");
        let collation = b.get_document("collation").ok().cloned();
        let hint = b.get("hint").cloned();
        let upsert = b.get_bool("upsert").ok();
        let sort = b.get_document("sort").ok().cloned();
        let array_filters = b.get_array("arrayFilters").ok().cloned();
        models.push(match kind.as_str() {
            "insertOne" => InsertOneModel::builder()
                .namespace(ns)
                .document(doc_arg(&b, "document"))
                .build()
                .into(),
            "updateOne" => UpdateOneModel::builder()
                .namespace(ns)
                .filter(filter)
                .update(update_arg(&b))
                .array_filters(array_filters)
                .collation(collation)
                .hint(hint)
                .upsert(upsert)
                .sort(sort)
                .build()
                .into(),
            "updateMany" => UpdateManyModel::builder()
                .namespace(ns)
                .filter(filter)
                .update(update_arg(&b))
                .array_filters(array_filters)
                .collation(collation)
                .hint(hint)
                .upsert(upsert)
                .build()
                .into(),
            "replaceOne" => ReplaceOneModel::builder()
                .namespace(ns)
                .filter(filter)
                .replacement(doc_arg(&b, "replacement"))
                .collation(collation)
                .hint(hint)
                .upsert(upsert)
                .sort(sort)
                .build()
                .into(),
            "deleteOne" => DeleteOneModel::builder()
                .namespace(ns)
                .filter(filter)
                .collation(collation)
                .hint(hint)
                .build()
                .into(),
            "deleteMany" => DeleteManyModel::builder()
                .namespace(ns)
                .filter(filter)
                .collation(collation)
                .hint(hint)
                .build()
                .into(),
            other => return Err(format!("clientBulkWrite model {other} is not implemented")),
        });
    }
    // `rawData` is for servers from 8.2; the runner reports 8.0, where it is ignored.
    let options: Option<BulkWriteOptions> =
        options_from(args.clone(), &["models", "verboseResults", "rawData"])?;
    let action = client.bulk_write(models).with_options(options);
    let result = if args.get_bool("verboseResults").unwrap_or(false) {
        action.verbose_results().await.map(|v| verbose_doc(&v))
    } else {
        action.await.map(|s| summary_doc(&s))
    };
    Ok(match result {
        Ok(d) => Ok(Some(Bson::Document(d))),
        Err(e) => Err(OpError::from(e)),
    })
}

/// The collection-level bulkWrite, sent as the write commands a driver would send.
async fn bulk_write(
    c: &CollEntity,
    args: &Document,
    mut session: Option<&mut ClientSession>,
) -> OpResult {
    let requests = docs_arg(args, "requests");
    let ordered = args.get_bool("ordered").unwrap_or(true);
    if requests.is_empty() {
        return Ok(Err(client_err("bulkWrite requires at least one request")));
    }
    // Group consecutive requests of one command kind, remembering global indexes.
    let mut batches: Vec<(&'static str, Vec<(usize, Document)>)> = Vec::new();
    let mut inserted_ids = Document::new();
    for (i, req) in requests.iter().enumerate() {
        let Some((kind, body)) = req.iter().next() else {
            return Ok(Err(client_err("empty bulkWrite request")));
        };
        let body = body.as_document().cloned().unwrap_or_default();
        let (cmd, entry) = match kind.as_str() {
            "insertOne" => {
                let mut d = doc_arg(&body, "document");
                if !d.contains_key("_id") {
                    let mut with_id = doc! {"_id": bson::oid::ObjectId::new()};
                    with_id.extend(d);
                    d = with_id;
                }
                inserted_ids.insert(i.to_string(), d.get("_id").cloned().unwrap_or(Bson::Null));
                ("insert", d)
            }
            "updateOne" | "updateMany" | "replaceOne" => {
                let (u, check) = if kind == "replaceOne" {
                    (
                        body.get("replacement").cloned().unwrap_or(Bson::Null),
                        false,
                    )
                } else {
                    (body.get("update").cloned().unwrap_or(Bson::Null), true)
                };
                match &u {
                    Bson::Document(d) => {
                        let dollar = d.keys().next().is_some_and(|k| k.starts_with('$'));
                        if check && !dollar {
                            return Ok(Err(client_err(
                                "update document must contain only atomic modifiers",
                            )));
                        }
                        if !check && d.keys().any(|k| k.starts_with('$')) {
                            return Ok(Err(client_err(
                                "replacement document must not contain atomic modifiers",
                            )));
                        }
                        if check && d.is_empty() {
                            return Ok(Err(client_err("update document must not be empty")));
                        }
                    }
                    Bson::Array(_) if check => {}
                    _ => return Ok(Err(client_err("invalid update"))),
                }
                let mut e = doc! {"q": doc_arg(&body, "filter"), "u": u};
                for k in ["upsert", "arrayFilters", "collation", "hint", "sort"] {
                    if let Some(v) = body.get(k) {
                        e.insert(k, v.clone());
                    }
                }
                e.insert("multi", kind == "updateMany");
                ("update", e)
            }
            "deleteOne" | "deleteMany" => {
                let mut e =
                    doc! {"q": doc_arg(&body, "filter"), "limit": i32::from(kind == "deleteOne")};
                for k in ["collation", "hint"] {
                    if let Some(v) = body.get(k) {
                        e.insert(k, v.clone());
                    }
                }
                ("delete", e)
            }
            other => {
                return Err(format!(
                    "bulkWrite request {other} is not implemented by the runner"
                ))
            }
        };
        match batches.last_mut() {
            Some((k, items)) if *k == cmd => items.push((i, entry)),
            _ => batches.push((cmd, vec![(i, entry)])),
        }
    }
    let database = c.coll.client().database(c.coll.namespace().db.as_str());
    let (mut inserted, mut matched, mut modified, mut deleted, mut upserted) =
        (0i64, 0i64, 0i64, 0i64, 0i64);
    let mut upserted_ids = Document::new();
    for (kind, items) in batches {
        let list_key = match kind {
            "insert" => "documents",
            "update" => "updates",
            _ => "deletes",
        };
        let mut cmd = doc! {kind: c.coll.name(), "ordered": ordered};
        cmd.insert(
            list_key,
            items
                .iter()
                .map(|(_, d)| Bson::Document(d.clone()))
                .collect::<Vec<_>>(),
        );
        for k in ["bypassDocumentValidation", "comment", "let"] {
            if let Some(v) = args.get(k) {
                if !(k == "let" && kind == "insert") {
                    cmd.insert(k, v.clone());
                }
            }
        }
        if c.unacknowledged {
            cmd.insert("writeConcern", doc! {"w": 0});
        }
        let sent = match session.as_deref_mut() {
            Some(s) => database.run_command(cmd).session(s).await,
            None => database.run_command(cmd).await,
        };
        let reply = match sent {
            Ok(_) if c.unacknowledged => continue,
            Ok(r) => r,
            Err(e) => return Ok(Err(OpError::from(e))),
        };
        let n = reply.get("n").and_then(as_i64).unwrap_or(0);
        match kind {
            "insert" => inserted += n,
            "delete" => deleted += n,
            _ => {
                let ups = reply.get_array("upserted").cloned().unwrap_or_default();
                upserted += ups.len() as i64;
                matched += n - ups.len() as i64;
                modified += reply.get("nModified").and_then(as_i64).unwrap_or(0);
                for u in ups {
                    let Some(u) = u.as_document() else { continue };
                    let local = u.get("index").and_then(as_i64).unwrap_or(0);
                    let global = usize::try_from(local)
                        .ok()
                        .and_then(|l| items.get(l))
                        .map(|(g, _)| *g);
                    if let Some(g) = global {
                        upserted_ids
                            .insert(g.to_string(), u.get("_id").cloned().unwrap_or(Bson::Null));
                    }
                }
            }
        }
        if let Ok(errs) = reply.get_array("writeErrors") {
            let first = errs.first().and_then(Bson::as_document);
            return Ok(Err(OpError {
                labels: Vec::new(),
                client: false,
                code: first
                    .and_then(|d| d.get("code"))
                    .and_then(as_i64)
                    .and_then(|c| i32::try_from(c).ok()),
                code_name: first
                    .and_then(|d| d.get_str("codeName").ok())
                    .map(str::to_owned),
                message: first
                    .and_then(|d| d.get_str("errmsg").ok())
                    .unwrap_or("write error")
                    .to_owned(),
                response: first.cloned(),
                bulk: None,
            }));
        }
    }
    Ok(Ok(Some(Bson::Document(doc! {
        "insertedCount": inserted,
        "matchedCount": matched,
        "modifiedCount": modified,
        "deletedCount": deleted,
        "upsertedCount": upserted,
        "insertedIds": inserted_ids,
        "upsertedIds": upserted_ids,
    }))))
}

fn as_i64(b: &Bson) -> Option<i64> {
    match b {
        Bson::Int32(i) => Some(i64::from(*i)),
        Bson::Int64(i) => Some(*i),
        Bson::Double(d) => Some(*d as i64),
        _ => None,
    }
}

fn check_events(expected: &[Bson], ents: &Entities) -> Result<(), String> {
    for exp in expected {
        let Some(exp) = exp.as_document() else {
            continue;
        };
        let id = exp.get_str("client").unwrap_or_default();
        let client = ents
            .clients
            .get(id)
            .ok_or_else(|| format!("no client {id}"))?;
        let actual = client.events.lock().map(|v| v.clone()).unwrap_or_default();
        let want = exp.get_array("events").cloned().unwrap_or_default();
        let extra_ok = exp.get_bool("ignoreExtraEvents").unwrap_or(false);
        if actual.len() < want.len() || (!extra_ok && actual.len() != want.len()) {
            let names: Vec<_> = actual
                .iter()
                .map(|e| format!("{}:{}", e.kind, e.name))
                .collect();
            return Err(format!(
                "expected {} events, got {}: {names:?}",
                want.len(),
                actual.len()
            ));
        }
        for (i, (w, a)) in want.iter().zip(&actual).enumerate() {
            let Some(w) = w.as_document() else { continue };
            let Some((kind, spec)) = w.iter().next() else {
                continue;
            };
            if kind != a.kind {
                return Err(format!(
                    "event {i}: expected {kind}, got {}:{}",
                    a.kind, a.name
                ));
            }
            let spec = spec.as_document().cloned().unwrap_or_default();
            if let Ok(n) = spec.get_str("commandName") {
                if n != a.name {
                    return Err(format!("event {i}: expected command {n}, got {}", a.name));
                }
            }
            if let Ok(n) = spec.get_str("databaseName") {
                if n != a.db {
                    return Err(format!("event {i}: expected database {n}, got {}", a.db));
                }
            }
            let body_key = if kind == "commandStartedEvent" {
                "command"
            } else {
                "reply"
            };
            if let Some(body) = spec.get(body_key) {
                matches(
                    body,
                    Some(&Bson::Document(a.body.clone())),
                    true,
                    &ents.values,
                    &format!("event[{i}].{body_key}"),
                )?;
            }
        }
    }
    Ok(())
}

async fn check_outcome(outcome: &[Bson], internal: &Client) -> Result<(), String> {
    for o in outcome {
        let Some(o) = o.as_document() else { continue };
        let coll = internal
            .database(o.get_str("databaseName").unwrap_or_default())
            .collection::<Document>(o.get_str("collectionName").unwrap_or_default());
        let cursor = coll
            .find(Document::new())
            .sort(doc! {"_id": 1})
            .await
            .map_err(|e| format!("outcome find: {e}"))?;
        let docs: Vec<Document> = cursor
            .try_collect()
            .await
            .map_err(|e| format!("outcome find: {e}"))?;
        let actual = Bson::Array(docs.into_iter().map(Bson::Document).collect());
        let expected = Bson::Array(o.get_array("documents").cloned().unwrap_or_default());
        matches(&expected, Some(&actual), false, &HashMap::new(), "outcome")?;
    }
    Ok(())
}

/// A tailable cursor the runner iterates with its own `getMore`s. The driver's
/// `try_next` sends `getMore` after `getMore` until a document comes, while
/// `iterateOnce` must make at most one round trip; a driver's `tryNext` does
/// exactly what this does: one `getMore` when the batch is used up.
struct TailableCursor {
    db: Database,
    coll: String,
    id: i64,
    batch: std::collections::VecDeque<Document>,
    batch_size: Option<i32>,
}

impl TailableCursor {
    async fn open(db: Database, args: &Document) -> Result<Self, Error> {
        // As in the driver's runCursorCommand, `batchSize` is for the getMores.
        let cmd = args.get_document("command").cloned().unwrap_or_default();
        let batch_size = args.get_i32("batchSize").ok();
        let reply = db.run_command(cmd).await?;
        let mut c = TailableCursor {
            db,
            coll: String::new(),
            id: 0,
            batch: Default::default(),
            batch_size,
        };
        c.take(&reply, "firstBatch");
        Ok(c)
    }

    /// Reads a cursor reply's id, namespace and batch.
    fn take(&mut self, reply: &Document, field: &str) {
        let Ok(cursor) = reply.get_document("cursor") else {
            return;
        };
        self.id = cursor.get_i64("id").unwrap_or(0);
        if let Ok(ns) = cursor.get_str("ns") {
            self.coll = ns.split_once('.').map_or(ns, |(_, c)| c).to_owned();
        }
        if let Ok(docs) = cursor.get_array(field) {
            self.batch
                .extend(docs.iter().filter_map(|d| d.as_document().cloned()));
        }
    }

    /// The next document, sending at most one `getMore`.
    async fn next_once(&mut self) -> Result<Option<Document>, Error> {
        if self.batch.is_empty() && self.id != 0 {
            let mut cmd = doc! {"getMore": self.id, "collection": self.coll.clone()};
            if let Some(n) = self.batch_size {
                cmd.insert("batchSize", n);
            }
            let reply = self.db.run_command(cmd).await?;
            self.take(&reply, "nextBatch");
        }
        Ok(self.batch.pop_front())
    }

    async fn close(self) -> Result<(), Error> {
        if self.id != 0 {
            let cmd = doc! {"killCursors": self.coll, "cursors": [self.id]};
            self.db.run_command(cmd).await?;
        }
        Ok(())
    }
}
