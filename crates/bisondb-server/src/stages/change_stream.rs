//! `$changeStream`: an `aggregate` whose cursor follows the oplog.
//!
//! The stream reads `local.oplog.rs` (a capped collection) in natural order
//! after the last record it examined, turns each entry into change events
//! with `bisondb_query::change_stream`, keeps those after its resume point
//! and runs the user's stages after `$changeStream` over them. Its cursor is
//! a tailable `awaitData` cursor on the oplog, so a `getMore` with
//! `maxAwaitTimeMS` waits on the oplog's insert channel (`crate::tailable`)
//! and wakes when an entry is written; nothing polls.
//!
//! Every batch carries a `postBatchResumeToken`: the token of the last event
//! returned, or, when the batch read the oplog to its end, a high-water mark
//! at the last entry read (events that did not match were examined too), so
//! a stream resumed from it starts after everything already examined.
//!
//! Images: `fullDocumentBeforeChange` (`whenAvailable`/`required`) reads
//! the pre-image the oplog's observer stored with the write
//! (`config.system.preimages`, keyed by the collection's UUID, the entry's
//! `ts` and the operation's `applyOpsIndex`); `fullDocument`
//! `whenAvailable`/`required` gives an update's post-image, its diff applied
//! to that pre-image, as mongod computes it. A `required` image that is not
//! kept fails the stream with 47 NoMatchingDocument.
//!
//! Size: an event larger than a reply's document may be (mongod's
//! `BSONObjMaxInternalSize`) fails the stream with 10334 BSONObjectTooLarge,
//! unless the pipeline ends with `$changeStreamSplitLargeEvent`: then it is
//! returned as fragments (`Splitter`), and a stream resumed from a
//! fragment's token returns the fragments after it.

use std::sync::Arc;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_query::agg::{DocStream, Pipeline, ServerStages};
use bisondb_query::change_stream::{
    events, BeforeChange, ChangeStreamSpec, Event, Filter, FullDocument, ResumeToken, Scope, Start,
    TokenKind,
};
use bisondb_storage::{Collection, NaturalIter, Storage};
use bson::{Bson, Document, RawArrayBuf, RawDocumentBuf, Timestamp};
use parking_lot::Mutex;

use crate::cursor::{Cursor, DocSource, StreamCursor, DEFAULT_FIRST_BATCH};
use crate::state::ServerState;

/// The oplog's namespace.
const OPLOG_DB: &str = "local";
const OPLOG_COLL: &str = "oplog.rs";

/// A change stream reads at majority: an explicit read concern level other
/// than `majority` is refused (InvalidOptions), as mongod refuses it; no
/// level (the implicit default) is fine.
pub fn check_read_concern(body: &bson::RawDocument) -> MongoResult<()> {
    let Ok(Some(bson::RawBsonRef::Document(rc))) = body.get("readConcern") else {
        return Ok(());
    };
    match rc.get("level") {
        Ok(Some(bson::RawBsonRef::String(level))) if level != "majority" => Err(MongoError::new(
            ErrorCode::InvalidOptions,
            format!("Read concern level '{level}' is not supported for $changeStream; change streams read at 'majority'"),
        )),
        _ => Ok(()),
    }
}

/// Checks a leading `$changeStream` at parse time: its argument, the
/// namespace it may watch, and the stages after it. Returns the argument.
pub fn check(stages: &[Document], db: &str, coll: Option<&str>) -> MongoResult<ChangeStreamSpec> {
    let arg = stages
        .first()
        .and_then(|s| s.get("$changeStream"))
        .ok_or_else(|| MongoError::internal("no $changeStream stage"))?;
    let spec = ChangeStreamSpec::parse(arg)?;
    if spec.all_changes_for_cluster {
        if db != "admin" || coll.is_some() {
            let ns = match coll {
                Some(c) => format!("{db}.{c}"),
                None => format!("{db}.$cmd.aggregate"),
            };
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!("A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name; found {ns}"),
            ));
        }
    } else if ["admin", "config", "local"].contains(&db) {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("$changeStream may not be opened on the internal {db} database"),
        ));
    } else if let Some(c) = coll.filter(|c| c.starts_with("system.")) {
        return Err(MongoError::new(
            ErrorCode::InvalidNamespace,
            format!("$changeStream may not be opened on the internal {db}.{c} collection"),
        ));
    }
    bisondb_query::change_stream::spec::check_following(stages.get(1..).unwrap_or_default())?;
    let mut spec = spec;
    if let Some(arg) = stages
        .last()
        .and_then(|s| s.get(bisondb_query::agg::SPLIT_LARGE_EVENT))
    {
        if !matches!(arg, Bson::Document(d) if d.is_empty()) {
            return Err(MongoError::location(
                7182800,
                format!("The $changeStreamSplitLargeEvent stage specification must be an empty object, but found: {arg}"),
            ));
        }
        spec.split_large_events = true;
    }
    if let Start::ResumeAfter(t) | Start::StartAfter(t) = &spec.start {
        if t.fragment.is_some() && !spec.split_large_events {
            return Err(non_resumable(MongoError::new(
                ErrorCode::ChangeStreamFatalError,
                "Attempting to resume a change stream from a split event fragment requires the $changeStreamSplitLargeEvent stage in the pipeline",
            )));
        }
    }
    Ok(spec)
}

/// A change stream's `aggregate`: what it needs from the command.
pub struct Open {
    pub db: String,
    pub coll: Option<String>,
    pub spec: ChangeStreamSpec,
    /// The whole pipeline, `$changeStream` first.
    pub pipeline: Pipeline,
    pub batch_size: Option<usize>,
    pub lsid: Option<Document>,
}

/// Where the stream is, shared by its source and its cursor.
#[derive(Default)]
struct Progress {
    inner: Mutex<ProgressInner>,
}

#[derive(Default)]
struct ProgressInner {
    /// The last `postBatchResumeToken` given (never goes back).
    token: Option<ResumeToken>,
    /// Set when the source last reported the end of the oplog: a
    /// high-water mark after the last entry it read. Cleared when it yields.
    at_end: Option<ResumeToken>,
    /// An `invalidate` was produced: the stream ends after it.
    ended: bool,
}

impl StreamCursor for Progress {
    fn ended(&self) -> bool {
        self.inner.lock().ended
    }

    fn post_batch_token(&self, batch: &RawArrayBuf) -> MongoResult<Document> {
        let mut last = None;
        for doc in batch.into_iter() {
            let doc = doc.map_err(crate::request::invalid_bson)?;
            if let bson::RawBsonRef::Document(d) = doc {
                last = Some(d);
            }
        }
        let last = match last {
            Some(d) => {
                let id = match d.get("_id").map_err(crate::request::invalid_bson)? {
                    Some(v) => Some(crate::fields::to_bson(v)?),
                    None => None,
                };
                Some(token_of(id.as_ref())?)
            }
            None => None,
        };
        let mut p = self.inner.lock();
        let mut best = p.token.take();
        for t in [last, p.at_end.clone()].into_iter().flatten() {
            if best.as_ref().is_none_or(|b| t > *b) {
                best = Some(t);
            }
        }
        p.token = best;
        Ok(p.token
            .as_ref()
            .map(ResumeToken::to_document)
            .unwrap_or_default())
    }
}

/// An event's `_id` as its token; anything else means a later stage
/// changed it (280, as mongod).
fn token_of(id: Option<&Bson>) -> MongoResult<ResumeToken> {
    id.and_then(|v| ResumeToken::parse(v).ok()).ok_or_else(|| {
        non_resumable(MongoError::new(
            ErrorCode::ChangeStreamFatalError,
            "Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.",
        ))
    })
}

/// `e` with mongod's `NonResumableChangeStreamError` label, which tells a
/// driver not to resume (ChangeStreamFatalError, ChangeStreamHistoryLost).
fn non_resumable(e: MongoError) -> MongoError {
    match RawDocumentBuf::try_from(&bson::doc! {"errorLabels": ["NonResumableChangeStreamError"]}) {
        Ok(raw) => e.with_details(raw.into_bytes()),
        Err(_) => e,
    }
}

/// 47 NoMatchingDocument: an image `required` by the stream is not kept
/// (the collection did not keep pre-images then, or they expired), as
/// mongod's.
fn image_missing(image: &str, events: &str, ev: &Event) -> MongoError {
    let which = if image == "pre-image" {
        "fullDocumentBeforeChange"
    } else {
        "fullDocument"
    };
    let uuid = ev
        .uuid
        .as_ref()
        .and_then(|b| <[u8; 16]>::try_from(b.bytes.as_slice()).ok())
        .map(|b| bson::Uuid::from_bytes(b).to_string())
        .unwrap_or_default();
    MongoError::new(
        ErrorCode::NoMatchingDocument,
        format!(
            "Change stream was configured to require a {image} for all {events} events, but the {image} was not found for event: {{ {which}: required, nsUUID: {uuid}, ts: {{ t: {}, i: {} }}, applyOpsIndex: {} }}",
            ev.ts.time, ev.ts.increment, ev.token.txn_op_index
        ),
    )
}

fn history_lost() -> MongoError {
    non_resumable(MongoError::new(
        ErrorCode::ChangeStreamHistoryLost,
        "Resume of change stream was not possible, as the resume point may no longer be in the oplog.",
    ))
}

/// The events after the resume point, read from the oplog.
struct Source {
    oplog: Collection,
    storage: Storage,
    filter: Filter,
    full_document: FullDocument,
    before_change: BeforeChange,
    /// Events at or before this token were returned before.
    after: ResumeToken,
    /// The event a `resumeAfter`/`startAfter` token names: it must still be
    /// in the oplog (else the stream cannot know it resumes where it left).
    must_find: Option<ResumeToken>,
    /// The last record read (0: none).
    last_rid: u64,
    /// The timestamp of the last entry read.
    last_ts: Timestamp,
    scan: Option<NaturalIter>,
    pending: std::collections::VecDeque<Event>,
    progress: Arc<Progress>,
    done: bool,
}

impl Source {
    fn scan(&mut self) -> MongoResult<&mut NaturalIter> {
        if self.scan.is_none() {
            let scan = if self.last_rid == 0 {
                self.oplog.scan_natural(false)
            } else {
                if !self.oplog.has_record(self.last_rid)? {
                    return Err(history_lost());
                }
                self.oplog.scan_natural_after(self.last_rid)
            };
            self.scan = Some(scan);
        }
        self.scan
            .as_mut()
            .ok_or_else(|| MongoError::internal("oplog scan vanished"))
    }

    /// Reads one more entry; `false` at the end of the oplog.
    fn read_entry(&mut self) -> MongoResult<bool> {
        let Some(next) = self.scan()?.next() else {
            self.scan = None;
            return Ok(false);
        };
        let (rid, raw) = next?;
        self.last_rid = rid;
        let entry = crate::fields::to_document(&raw)?;
        let Some(Bson::Timestamp(ts)) = entry.get("ts") else {
            return Err(MongoError::internal("an oplog entry without ts"));
        };
        self.last_ts = *ts;
        if let Some(want) = &self.must_find {
            if bisondb_query::change_stream::token::ts_to_u64(*ts) > want.ts {
                return Err(non_resumable(MongoError::new(
                    ErrorCode::ChangeStreamFatalError,
                    format!(
                        "cannot resume stream; the resume token was not found. {{_data: \"{}\"}}",
                        want.to_hex()
                    ),
                )));
            }
        }
        for ev in events(&entry, &self.filter)? {
            if let Some(want) = &self.must_find {
                if ev.token.invalidate() == want.invalidate() {
                    self.must_find = None;
                }
            }
            // Resumed from a fragment: the event again, whose fragments
            // after that one the splitter returns.
            let resumed_event =
                self.after.fragment.is_some() && ev.token == self.after.whole_event();
            if ev.token > self.after || resumed_event {
                self.pending.push_back(ev);
            }
        }
        Ok(true)
    }

    /// The stored pre-image of `ev` (`config.system.preimages`, by the
    /// collection's UUID, the entry's `ts` and the operation's place in
    /// its `applyOps`), if it is kept.
    fn pre_image(&self, ev: &Event) -> MongoResult<Option<Document>> {
        let Some(uuid) = ev.uuid.as_ref().and_then(|b| {
            <[u8; 16]>::try_from(b.bytes.as_slice())
                .ok()
                .map(bson::Uuid::from_bytes)
        }) else {
            return Ok(None);
        };
        let Some(coll) = self.storage.collection(
            crate::repl::oplog::PRE_IMAGES_DB,
            crate::repl::oplog::PRE_IMAGES_COLL,
        ) else {
            return Ok(None);
        };
        let index = i64::try_from(ev.token.txn_op_index).unwrap_or(i64::MAX);
        let id = crate::repl::oplog::pre_image_id(uuid, ev.ts, index);
        let Some(stored) = coll.get(bson::RawBsonRef::Document(&id))? else {
            return Ok(None);
        };
        match stored
            .get("preImage")
            .map_err(crate::request::invalid_bson)?
        {
            Some(bson::RawBsonRef::Document(d)) => Ok(Some(crate::fields::to_document(d)?)),
            _ => Ok(None),
        }
    }

    /// Adds what the event needs from storage.
    fn complete(&self, ev: Event) -> MongoResult<Document> {
        let with_images = matches!(ev.operation_type, "update" | "replace" | "delete");
        let wants_post = ev.operation_type == "update"
            && matches!(
                self.full_document,
                FullDocument::WhenAvailable | FullDocument::Required
            );
        let wants_pre = with_images && self.before_change != BeforeChange::Off;
        let pre = if wants_post || wants_pre {
            self.pre_image(&ev)?
        } else {
            None
        };
        if wants_post {
            // mongod's post-image: the update applied to the pre-image.
            let post = match (&pre, &ev.update_diff) {
                (Some(before), Some(diff)) => {
                    Some(bisondb_query::change_stream::diff::apply(before, diff)?)
                }
                _ => None,
            };
            let mut doc = ev.doc.clone();
            match post {
                Some(p) => {
                    doc.insert("fullDocument", p);
                }
                None if self.full_document == FullDocument::Required => {
                    return Err(image_missing("post-image", "update", &ev));
                }
                None => {
                    doc.insert("fullDocument", Bson::Null);
                }
            }
            return self.add_pre_image(Event { doc, ..ev }, wants_pre, pre);
        }
        let doc = self.lookup(ev.clone())?;
        self.add_pre_image(Event { doc, ..ev }, wants_pre, pre)
    }

    /// Adds `fullDocumentBeforeChange` (last, as mongod's stage adds it)
    /// when the stream asks for it.
    fn add_pre_image(
        &self,
        ev: Event,
        wanted: bool,
        pre: Option<Document>,
    ) -> MongoResult<Document> {
        let mut doc = ev.doc.clone();
        if !wanted {
            return Ok(doc);
        }
        match pre {
            Some(p) => {
                doc.insert("fullDocumentBeforeChange", p);
            }
            None if self.before_change == BeforeChange::Required => {
                return Err(image_missing(
                    "pre-image",
                    "update, delete and replace",
                    &ev,
                ));
            }
            None => {
                doc.insert("fullDocumentBeforeChange", Bson::Null);
            }
        }
        Ok(doc)
    }

    /// `fullDocument: "updateLookup"`: the document as it is now.
    fn lookup(&self, ev: Event) -> MongoResult<Document> {
        let mut doc = ev.doc;
        if ev.operation_type == "update" && self.full_document == FullDocument::UpdateLookup {
            let (db, coll) = &ev.ns;
            let found = match (self.storage.collection(db, coll), &ev.document_key) {
                (Some(c), Some(key)) => match key.get("_id") {
                    Some(id) => {
                        let id = crate::reply::to_raw(&bson::doc! {"_id": id.clone()})?;
                        let id = id.get("_id").map_err(crate::request::invalid_bson)?;
                        match id {
                            Some(id) => c.get(id)?,
                            None => None,
                        }
                    }
                    None => None,
                },
                _ => None,
            };
            let full = match found {
                Some(d) => Bson::Document(crate::fields::to_document(&d)?),
                None => Bson::Null,
            };
            doc.insert("fullDocument", full);
        }
        Ok(doc)
    }

    fn next_event(&mut self) -> MongoResult<Option<Document>> {
        loop {
            if self.done {
                return Ok(None);
            }
            if let Some(ev) = self.pending.pop_front() {
                if ev.invalidates {
                    self.done = true;
                    self.progress.inner.lock().ended = true;
                }
                self.progress.inner.lock().at_end = None;
                return self.complete(ev).map(Some);
            }
            if !self.read_entry()? {
                self.progress.inner.lock().at_end = Some(
                    ResumeToken::position(self.last_ts, TokenKind::HighWaterMark)
                        .max(self.after.clone()),
                );
                return Ok(None);
            }
        }
    }
}

impl Iterator for Source {
    type Item = MongoResult<Document>;

    /// `None` means "nothing more for now".
    fn next(&mut self) -> Option<Self::Item> {
        match self.next_event() {
            Ok(Some(d)) => Some(Ok(d)),
            Ok(None) => None,
            Err(e) => {
                self.done = true;
                Some(Err(e))
            }
        }
    }
}

/// The events the pipeline returns, checked against the largest document a
/// reply may hold: with `$changeStreamSplitLargeEvent` a larger one is
/// returned as fragments, without it the stream fails with
/// BSONObjectTooLarge, as mongod's.
struct Splitter<I> {
    inner: I,
    split: bool,
    /// The fragment token the stream resumed from, until its event is
    /// seen again: the fragments up to it are skipped.
    resume: Option<ResumeToken>,
    queue: std::collections::VecDeque<RawDocumentBuf>,
    /// `serverStatus`' `metrics.changeStreams`.
    counters: Arc<crate::metrics::ChangeStreams>,
}

impl<I: Iterator<Item = MongoResult<RawDocumentBuf>>> Splitter<I> {
    fn handle(&mut self, raw: RawDocumentBuf) -> MongoResult<RawDocumentBuf> {
        use bisondb_query::change_stream::split;
        let resuming = self.resume.take();
        let small = raw.as_bytes().len() <= split::MAX_EVENT_SIZE;
        if small && resuming.is_none() {
            return Ok(raw);
        }
        let id = match raw.get("_id").map_err(crate::request::invalid_bson)? {
            Some(v) => Some(crate::fields::to_bson(v)?),
            None => None,
        };
        let token = token_of(id.as_ref())?;
        if !small && !self.split {
            self.counters
                .large_events_failed
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            return Err(split::too_large(raw.as_bytes().len(), &token));
        }
        let mut fragments = if small {
            vec![raw]
        } else {
            let fragments = split::split(&raw, &token, split::MAX_EVENT_SIZE)?;
            self.counters
                .large_events_split
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            fragments
        };
        if let Some(r) = resuming.filter(|r| r.whole_event() == token) {
            let skip = r.fragment.map_or(0, |n| n.saturating_add(1));
            if small || usize::try_from(skip).map_or(true, |s| s >= fragments.len()) {
                return Err(non_resumable(MongoError::new(
                    ErrorCode::ChangeStreamFatalError,
                    format!(
                        "cannot resume stream; the resume token was not found. {{_data: \"{}\"}}",
                        r.to_hex()
                    ),
                )));
            }
            fragments.drain(..usize::try_from(skip).unwrap_or(0));
        }
        let mut fragments = fragments.into_iter();
        let first = fragments
            .next()
            .ok_or_else(|| MongoError::internal("an event split into nothing"))?;
        self.queue.extend(fragments);
        Ok(first)
    }
}

impl<I: Iterator<Item = MongoResult<RawDocumentBuf>>> Iterator for Splitter<I> {
    type Item = MongoResult<RawDocumentBuf>;

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(f) = self.queue.pop_front() {
            return Some(Ok(f));
        }
        match self.inner.next()? {
            Ok(raw) => Some(self.handle(raw)),
            Err(e) => Some(Err(e)),
        }
    }
}

/// Hands the pipeline the stream's source as its `$changeStream` stage.
struct Handoff(Mutex<Option<DocStream>>);

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ChangeStreamSource")
    }
}

impl ServerStages for Handoff {
    fn run(&self, name: &str, _spec: &Bson) -> MongoResult<DocStream> {
        match (name, self.0.lock().take()) {
            ("$changeStream", Some(s)) => Ok(s),
            _ => Err(MongoError::internal(format!(
                "{name} ran twice or out of place"
            ))),
        }
    }
}

/// Runs a change stream's `aggregate`: the first batch and its cursor.
pub fn open(state: &Arc<ServerState>, mut open: Open) -> MongoResult<RawDocumentBuf> {
    if state.repl().is_mongos() {
        // A mongos over the postgres engine writes no oplog to read.
        return Err(MongoError::location(
            40573,
            "The $changeStream stage is not supported on the postgres storage engine yet (it keeps no oplog); run with --replSet for change streams on one server",
        ));
    }
    if !state.repl().enabled() {
        return Err(MongoError::location(
            40573,
            "The $changeStream stage is only supported on replica sets",
        ));
    }
    let spec = &open.spec;
    let Some(oplog) = state.storage.collection(OPLOG_DB, OPLOG_COLL) else {
        return Err(MongoError::new(
            ErrorCode::NotPrimaryOrSecondary,
            "node is not in primary or recovering state: the replica set is not initiated (no oplog)",
        ));
    };
    let Some(inserts) = oplog.subscribe_inserts() else {
        return Err(MongoError::internal("local.oplog.rs is not capped"));
    };
    let scope = match (&open.coll, spec.all_changes_for_cluster) {
        (_, true) => Scope::Cluster,
        (Some(c), false) => Scope::Collection {
            db: open.db.clone(),
            coll: c.clone(),
        },
        (None, false) => Scope::Database {
            db: open.db.clone(),
        },
    };
    let ns = match &open.coll {
        Some(c) => crate::namespaces::ns(&open.db, c),
        None => crate::namespaces::ns(&open.db, "$cmd.aggregate"),
    };
    let progress = Arc::new(Progress::default());
    let (after, must_find, last_rid, last_ts) = match &spec.start {
        Start::Now => {
            // Everything already in the oplog is before the stream.
            match oplog.scan_natural(true).next() {
                Some(r) => {
                    let (rid, raw) = r?;
                    let ts = match raw.get("ts").map_err(crate::request::invalid_bson)? {
                        Some(bson::RawBsonRef::Timestamp(t)) => t,
                        _ => return Err(MongoError::internal("an oplog entry without ts")),
                    };
                    (
                        ResumeToken::position(ts, TokenKind::HighWaterMark),
                        None,
                        rid,
                        ts,
                    )
                }
                None => {
                    let ts = Timestamp {
                        time: 0,
                        increment: 0,
                    };
                    (
                        ResumeToken::position(ts, TokenKind::HighWaterMark),
                        None,
                        0,
                        ts,
                    )
                }
            }
        }
        Start::ResumeAfter(t) | Start::StartAfter(t) => {
            check_history(&oplog, t.timestamp())?;
            let must = (t.kind == TokenKind::Event).then(|| t.whole_event());
            (t.clone(), must, 0, t.timestamp())
        }
        Start::AtOperationTime(ts) => {
            check_history(&oplog, *ts)?;
            (ResumeToken::position(*ts, TokenKind::Start), None, 0, *ts)
        }
    };
    progress.inner.lock().token = Some(after.clone());
    let source = Source {
        oplog,
        storage: state.storage.clone(),
        filter: Filter {
            scope,
            expanded: spec.show_expanded_events,
            system: spec.show_system_events,
        },
        full_document: spec.full_document,
        before_change: spec.before_change,
        after,
        must_find,
        last_rid,
        last_ts,
        scan: None,
        pending: Default::default(),
        progress: progress.clone(),
        done: false,
    };
    open.pipeline
        .set_server_stages(Arc::new(Handoff(Mutex::new(Some(Box::new(source))))));
    let output = open
        .pipeline
        .run_with_reader(Box::new(std::iter::empty()), None);
    let raw = output.map(|r| r.and_then(|d| crate::reply::to_raw(&d)));
    let resume_fragment = match &spec.start {
        Start::ResumeAfter(t) | Start::StartAfter(t) if t.fragment.is_some() => Some(t.clone()),
        _ => None,
    };
    let src: DocSource = Box::new(Splitter {
        inner: raw,
        split: spec.split_large_events,
        resume: resume_fragment,
        queue: Default::default(),
        counters: state.metrics.change_streams.clone(),
    });
    let mut cursor = Cursor::new(ns.clone(), src, None);
    cursor.lsid = open.lsid;
    cursor.tail = Some(crate::tailable::Tail {
        await_data: true,
        inserts,
    });
    cursor.stream = Some(progress.clone());
    let batch = cursor.next_batch(Some(open.batch_size.unwrap_or(DEFAULT_FIRST_BATCH)))?;
    let token = progress.post_batch_token(&batch.docs)?;
    let id = if batch.exhausted {
        0
    } else {
        state.cursors.register(cursor)
    };
    crate::cursor::stream_reply(&ns, id, batch.docs, true, token)
}

/// 286 when the oplog no longer holds `ts` (its oldest entry is later).
fn check_history(oplog: &Collection, ts: Timestamp) -> MongoResult<()> {
    let want = bisondb_query::change_stream::token::ts_to_u64(ts);
    if let Some(first) = oplog.scan_natural(false).next() {
        let (_, raw) = first?;
        if let Some(bson::RawBsonRef::Timestamp(t)) =
            raw.get("ts").map_err(crate::request::invalid_bson)?
        {
            if bisondb_query::change_stream::token::ts_to_u64(t) > want {
                return Err(history_lost());
            }
        }
    }
    Ok(())
}
