//! Server-side cursors: the rest of a result after the first batch.
//!
//! A cursor owns a `'static` iterator (a storage scan owns its snapshot), so a getMore
//! continues where the last batch stopped without re-running the query. Batches follow
//! mongod: 101 documents by default in the first batch, otherwise as many as fit in
//! 16 MiB; idle cursors are reaped after 10 minutes.

use std::collections::HashMap;
use std::iter::Peekable;
use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::{RawArrayBuf, RawDocumentBuf};
use parking_lot::Mutex;

/// The documents a cursor will still produce.
pub type DocSource = Box<dyn Iterator<Item = MongoResult<RawDocumentBuf>> + Send>;

/// mongod's default size of a first batch when the client sets none.
pub const DEFAULT_FIRST_BATCH: usize = 101;
/// A batch stops growing once it holds this many bytes of documents.
pub const MAX_BATCH_BYTES: usize = 16 * 1024 * 1024;
/// What the `n`th document adds to its batch's array beyond its own bytes:
/// the element's type byte and its index as a NUL-terminated decimal key.
/// mongod counts the bytes of the reply it builds (its cursor response
/// builder's `bytesUsed`), keys included, so a batch of many small documents
/// (a `bulkWrite` of 100,001 duplicate inserts: 100,000 write errors of ~166
/// bytes) stays within the reply's limit; counted by the documents alone that
/// first batch made a 17.3 MB reply, refused with 10334 BSONObjectTooLarge.
fn element_overhead(n: usize) -> usize {
    let digits = n.checked_ilog10().map_or(1, |d| d as usize + 1);
    digits + 2
}

/// mongod's `cursorTimeoutMillis` default.
pub const IDLE_TIMEOUT: Duration = Duration::from_secs(600);

pub struct Cursor {
    pub ns: String,
    source: Peekable<DocSource>,
    /// Documents still allowed by the query's `limit`, if any.
    remaining: Option<u64>,
    last_used: Instant,
    pub no_timeout: bool,
    /// The connection that owns it, for killing cursors when the session ends.
    pub lsid: Option<bson::Document>,
    /// Set for a tailable cursor: its source ending means "nothing yet", never
    /// "exhausted" (see `crate::tailable`).
    pub tail: Option<crate::tailable::Tail>,
    /// The source knows its end before it is asked for one more document
    /// (a blocking sort, an `_id` lookup, a listing held in memory): a batch
    /// that reaches its size still closes the cursor when nothing is left,
    /// as mongod's plan stages report `isEOF` there.
    pub knows_end: bool,
    /// The plan counters and summary its getMores report to the profiler
    /// (set only when the opening command was profiled).
    pub profile: Option<crate::profiler::CursorProfile>,
    /// What is left of the opening command's `maxTimeMS` (set by
    /// [`CursorManager::register`], not for tailable cursors): its getMores
    /// run under it, as mongod counts a cursor's active time, not its idle
    /// time, against the limit.
    pub time_left: Option<Duration>,
    /// Set for a change stream's cursor (`crate::stages::change_stream`).
    pub stream: Option<std::sync::Arc<dyn StreamCursor>>,
    /// The user authenticated when the cursor was opened (set by
    /// [`CursorManager::register`] under `--auth`): only that user's
    /// connections may `getMore` or kill it.
    pub owner: Option<std::sync::Arc<crate::auth::Name>>,
}

/// What a change stream's cursor adds to a tailable one: every batch
/// carries a `postBatchResumeToken`, the cursor closes after an
/// `invalidate`, and it outlives the drop of the collection it watches
/// (it reports that drop).
pub trait StreamCursor: Send + Sync {
    /// The stream has returned its last event (an `invalidate`).
    fn ended(&self) -> bool;
    /// The `postBatchResumeToken` of a batch just filled.
    fn post_batch_token(&self, batch: &RawArrayBuf) -> MongoResult<bson::Document>;
}

impl std::fmt::Debug for Cursor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cursor")
            .field("ns", &self.ns)
            .field("remaining", &self.remaining)
            .finish_non_exhaustive()
    }
}

/// One batch of results and whether the source is exhausted.
pub struct Batch {
    pub docs: RawArrayBuf,
    pub exhausted: bool,
}

/// The time left before this thread's operation deadline, if it has one.
pub fn time_left() -> Option<Duration> {
    bisondb_js::deadline::current().map(|d| d.saturating_duration_since(Instant::now()))
}

impl Cursor {
    pub fn new(ns: String, source: DocSource, limit: Option<u64>) -> Cursor {
        Cursor {
            ns,
            source: source.peekable(),
            remaining: limit,
            last_used: Instant::now(),
            no_timeout: false,
            lsid: None,
            tail: None,
            knows_end: false,
            profile: None,
            time_left: None,
            stream: None,
            owner: None,
        }
    }

    /// Whether this is a tailable `awaitData` cursor.
    pub fn is_await_data(&self) -> bool {
        self.tail.as_ref().is_some_and(|t| t.await_data)
    }

    /// For an `awaitData` cursor: a receiver of the collection's inserts with
    /// the current value marked seen, and whether a document (or an error) is
    /// ready to be returned now.
    fn tail_ready(&mut self) -> Option<(tokio::sync::watch::Receiver<u64>, bool)> {
        let tail = self.tail.as_ref().filter(|t| t.await_data)?;
        let mut inserts = tail.inserts.clone();
        inserts.borrow_and_update();
        if self.remaining == Some(0) {
            return Some((inserts, true));
        }
        let ready = self.source.peek().is_some();
        if !ready {
            // Drop the remembered end so the next look asks the source again.
            self.source.next();
        }
        Some((inserts, ready))
    }

    /// Fills a batch of at most `max_docs` documents (None = as many as fit).
    pub fn next_batch(&mut self, max_docs: Option<usize>) -> MongoResult<Batch> {
        let (batch, n) = self.fill_batch(max_docs)?;
        crate::metrics::add(&crate::metrics::DOCUMENTS_RETURNED, n as u64);
        Ok(batch)
    }

    /// [`Cursor::next_batch`] and the number of documents in it.
    fn fill_batch(&mut self, max_docs: Option<usize>) -> MongoResult<(Batch, usize)> {
        self.last_used = Instant::now();
        let mut docs = RawArrayBuf::new();
        let mut n = 0usize;
        let mut bytes = 0usize;
        let mut charged = 0usize;
        let mut full = false;
        loop {
            if self.remaining == Some(0) {
                return Ok((
                    Batch {
                        docs,
                        exhausted: true,
                    },
                    n,
                ));
            }
            if max_docs.is_some_and(|m| n >= m) {
                full = true;
                break;
            }
            let size = match self.source.peek() {
                None if self.tail.is_some() && !self.stream.as_ref().is_some_and(|s| s.ended()) => {
                    // Nothing more yet; forget the end so the next batch looks again.
                    self.source.next();
                    return Ok((
                        Batch {
                            docs,
                            exhausted: false,
                        },
                        n,
                    ));
                }
                None => {
                    return Ok((
                        Batch {
                            docs,
                            exhausted: true,
                        },
                        n,
                    ))
                }
                Some(Err(_)) => {
                    // Surface the error; the cursor is dropped by the caller.
                    return match self.source.next() {
                        Some(Err(e)) => Err(e),
                        _ => Err(MongoError::internal("cursor error vanished")),
                    };
                }
                Some(Ok(d)) => d.as_bytes().len().saturating_add(element_overhead(n)),
            };
            if n > 0 && bytes.saturating_add(size) > MAX_BATCH_BYTES {
                break;
            }
            if let Some(Ok(doc)) = self.source.next() {
                docs.push(doc);
                n += 1;
                bytes = bytes.saturating_add(size);
                // A big batch counts against the operation's memory, a
                // chunk at a time (a batch under 1 MiB never looks).
                while bytes >= charged.saturating_add(bisondb_error::memory::CHUNK) {
                    bisondb_error::memory::charge(bisondb_error::memory::CHUNK)?;
                    charged += bisondb_error::memory::CHUNK;
                }
                if let Some(r) = self.remaining.as_mut() {
                    *r -= 1;
                }
            }
        }
        // A tailable cursor is never done with its source: don't look ahead.
        // Nor does a batch that reached its `batchSize`: mongod stops asking
        // its plan there and learns of the end only on the next getMore
        // (which then returns an empty batch and cursor id 0); drivers count
        // on that (pymongo's exhaust test expects find + 3 getMores for 3
        // documents in batches of 1).
        let exhausted = self.remaining == Some(0)
            || self.stream.as_ref().is_some_and(|s| s.ended())
            || (self.tail.is_none() && (!full || self.knows_end) && self.source.peek().is_none());
        Ok((Batch { docs, exhausted }, n))
    }
}

/// All open cursors of the server.
#[derive(Default)]
pub struct CursorManager {
    cursors: Mutex<HashMap<i64, Cursor>>,
    /// getMores running now, each holding its cursor out of the table.
    pinned: std::sync::atomic::AtomicU64,
}

/// serverStatus `metrics.cursor.open`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct OpenCursors {
    pub total: u64,
    pub no_timeout: u64,
    pub pinned: u64,
}

/// A getMore's hold on its cursor, counted as pinned until dropped.
pub struct Pin<'a>(&'a std::sync::atomic::AtomicU64);

impl Drop for Pin<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::Relaxed);
    }
}

impl CursorManager {
    /// Counts a cursor as pinned (a getMore runs on it) until the guard drops.
    pub fn pin(&self) -> Pin<'_> {
        self.pinned
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Pin(&self.pinned)
    }

    /// Stores a cursor and returns its new id (positive, never 0).
    pub fn register(&self, mut cursor: Cursor) -> i64 {
        if cursor.tail.is_none() {
            cursor.time_left = time_left();
        }
        cursor.owner = crate::auth::running_as();
        let mut map = self.cursors.lock();
        loop {
            let id = (rand::random::<u64>() >> 2) as i64;
            if id != 0 && !map.contains_key(&id) {
                map.insert(id, cursor);
                return id;
            }
        }
    }

    /// `$currentOp`'s `idleCursors` documents: the open cursors no getMore
    /// is using (a getMore takes its cursor out of the map while it runs).
    pub fn idle_report(&self, host: &str, whose: &crate::op_ctx::Whose) -> Vec<bson::Document> {
        let now = bson::DateTime::now();
        let map = self.cursors.lock();
        map.iter()
            .filter(|(_, c)| whose.includes_user(c.owner.as_deref()))
            .map(|(id, c)| {
                let idle = i64::try_from(c.last_used.elapsed().as_millis()).unwrap_or(i64::MAX);
                let last = bson::DateTime::from_millis(now.timestamp_millis().saturating_sub(idle));
                let mut d = bson::doc! {"type": "idleCursor", "host": host, "ns": c.ns.clone()};
                if let Some(lsid) = &c.lsid {
                    d.insert("lsid", lsid.clone());
                }
                d.insert(
                    "cursor",
                    bson::doc! {
                        "cursorId": *id,
                        "lastAccessDate": last,
                        "noCursorTimeout": c.no_timeout,
                        "tailable": c.tail.is_some(),
                        "awaitData": c.is_await_data(),
                    },
                );
                d
            })
            .collect()
    }

    /// Takes a cursor out for a getMore; it must be put back with [`Self::restore`] if not exhausted.
    pub fn take(&self, id: i64, ns: &str) -> MongoResult<Cursor> {
        let mut map = self.cursors.lock();
        match map.get(&id) {
            None => Err(MongoError::new(ErrorCode::CursorNotFound, format!("cursor id {id} not found"))),
            Some(c) if c.ns != ns => Err(MongoError::new(
                ErrorCode::Unauthorized,
                format!("Requested getMore on namespace '{ns}', but cursor belongs to a different namespace {}", c.ns),
            )),
            Some(_) => map.remove(&id).ok_or_else(|| MongoError::internal("cursor vanished under lock")),
        }
    }

    /// Who opened cursor `id` on `ns`: `None` when there is no such cursor,
    /// `Some(None)` for a cursor opened without authentication.
    pub fn owner_of(&self, id: i64, ns: &str) -> Option<Option<std::sync::Arc<crate::auth::Name>>> {
        self.cursors
            .lock()
            .get(&id)
            .filter(|c| c.ns == ns)
            .map(|c| c.owner.clone())
    }

    /// Whether `id` is an open `awaitData` cursor on `ns`.
    pub fn is_awaiting(&self, id: i64, ns: &str) -> bool {
        self.cursors
            .lock()
            .get(&id)
            .is_some_and(|c| c.ns == ns && c.is_await_data())
    }

    /// See [`Cursor::tail_ready`]; `None` when the cursor is gone.
    pub fn tail_ready(
        &self,
        id: i64,
        ns: &str,
    ) -> Option<(tokio::sync::watch::Receiver<u64>, bool)> {
        // Out of the map while it reads storage, so other cursors' commands
        // never wait for this scan.
        let mut cursor = self.take(id, ns).ok()?;
        let ready = cursor.tail_ready();
        self.restore(id, cursor);
        ready
    }

    pub fn restore(&self, id: i64, cursor: Cursor) {
        self.cursors.lock().insert(id, cursor);
    }

    /// Kills the given ids; returns (killed, not found).
    pub fn kill(&self, ids: &[i64]) -> (Vec<i64>, Vec<i64>) {
        let mut map = self.cursors.lock();
        let mut killed = Vec::new();
        let mut missing = Vec::new();
        for id in ids {
            if map.remove(id).is_some() {
                killed.push(*id);
            } else {
                missing.push(*id);
            }
        }
        (killed, missing)
    }

    /// Kills every cursor on a namespace (drop, rename).
    pub fn kill_namespace(&self, ns: &str) {
        self.cursors
            .lock()
            .retain(|_, c| c.ns != ns || c.stream.is_some());
    }

    /// Kills every cursor of a database.
    pub fn kill_database(&self, db: &str) {
        self.cursors
            .lock()
            .retain(|_, c| c.stream.is_some() || c.ns.split_once('.').map(|(d, _)| d) != Some(db));
    }

    /// Kills cursors opened under any of the given logical sessions (endSessions).
    pub fn kill_sessions(&self, lsids: &[bson::Document]) {
        self.cursors
            .lock()
            .retain(|_, c| c.lsid.as_ref().is_none_or(|l| !lsids.contains(l)));
    }

    /// Removes the cursors whose session `lsid` satisfies `f` (the session
    /// kill commands).
    pub fn kill_matching(&self, f: impl Fn(&bson::Document) -> bool) {
        self.cursors
            .lock()
            .retain(|_, c| c.lsid.as_ref().is_none_or(|l| !f(l)));
    }

    /// Removes cursors idle longer than `timeout`; returns how many.
    pub fn reap(&self, timeout: Duration) -> usize {
        let now = Instant::now();
        let mut map = self.cursors.lock();
        let before = map.len();
        map.retain(|_, c| c.no_timeout || now.duration_since(c.last_used) < timeout);
        before - map.len()
    }

    pub fn len(&self) -> usize {
        self.cursors.lock().len()
    }

    /// serverStatus `metrics.cursor.open`: every cursor, those opened with
    /// `noCursorTimeout`, and those pinned (in use by a getMore now: a
    /// getMore takes its cursor out of the table while it runs).
    pub fn open_counts(&self) -> OpenCursors {
        let map = self.cursors.lock();
        let pinned = self.pinned.load(std::sync::atomic::Ordering::Relaxed);
        OpenCursors {
            total: (map.len() as u64).saturating_add(pinned),
            no_timeout: map.values().filter(|c| c.no_timeout).count() as u64,
            pinned,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The collection a `getMore` or `killCursors` names: a collection, or
/// `$cmd.aggregate` for the cursor of a collection-less aggregate (a
/// database or cluster change stream), or `$cmd.bulkWrite` for the results
/// of a `bulkWrite`, as in mongod.
pub fn cursor_collection<'a>(cmd: &str, v: bson::RawBsonRef<'a>) -> MongoResult<&'a str> {
    match v {
        bson::RawBsonRef::String(c @ ("$cmd.aggregate" | "$cmd.bulkWrite")) => Ok(c),
        _ => crate::fields::collection_name(cmd, v),
    }
}

/// `{cursor: {firstBatch|nextBatch: [...], id, ns}, ok: 1}`, built raw so result
/// documents are copied once, never re-parsed.
pub fn cursor_reply(
    ns: &str,
    id: i64,
    batch: RawArrayBuf,
    first: bool,
) -> MongoResult<RawDocumentBuf> {
    reply_with(ns, id, batch, first, None)
}

/// [`cursor_reply`] with a change stream's `postBatchResumeToken` after the
/// batch, where mongod puts it.
pub fn stream_reply(
    ns: &str,
    id: i64,
    batch: RawArrayBuf,
    first: bool,
    token: bson::Document,
) -> MongoResult<RawDocumentBuf> {
    reply_with(ns, id, batch, first, Some(crate::reply::to_raw(&token)?))
}

fn reply_with(
    ns: &str,
    id: i64,
    batch: RawArrayBuf,
    first: bool,
    token: Option<RawDocumentBuf>,
) -> MongoResult<RawDocumentBuf> {
    let batch_key: &[u8] = if first { b"firstBatch" } else { b"nextBatch" };
    let token = token.as_ref().map(|t| t.as_bytes());
    let batch = batch.as_bytes();
    // Sizes of the elements (type byte, key, NUL, value) of `cursor`, then
    // of the reply: the buffer is allocated once at its final size, so a
    // 16 MiB batch is copied once. Appending it with `RawDocumentBuf::append`
    // copied it twice more per level (into `cursor`, then into the reply),
    // and each time the closing NUL byte overflowed the exact-size buffer
    // and reallocated it, copying the batch again into fresh pages.
    let cursor_len = 4
        + (1 + batch_key.len() + 1 + batch.len())
        + token.map_or(0, |t| 1 + "postBatchResumeToken".len() + 1 + t.len())
        + (1 + "id".len() + 1 + 8)
        + (1 + "ns".len() + 1 + 4 + ns.len() + 1)
        + 1;
    let reply_len = 4 + (1 + "cursor".len() + 1 + cursor_len) + (1 + "ok".len() + 1 + 8) + 1;
    let too_large = |len: usize| {
        MongoError::new(
            ErrorCode::BSONObjectTooLarge,
            format!("cursor reply of {len} bytes is too large"),
        )
    };
    let as_len = |len: usize| i32::try_from(len).map_err(|_| too_large(len));
    let ns_len = as_len(ns.len() + 1)?;
    let mut out = Vec::with_capacity(reply_len);
    out.extend_from_slice(&as_len(reply_len)?.to_le_bytes());
    out.push(0x03); // embedded document
    out.extend_from_slice(b"cursor\0");
    out.extend_from_slice(&as_len(cursor_len)?.to_le_bytes());
    out.push(0x04); // array
    out.extend_from_slice(batch_key);
    out.push(0);
    out.extend_from_slice(batch);
    if let Some(t) = token {
        out.push(0x03);
        out.extend_from_slice(b"postBatchResumeToken\0");
        out.extend_from_slice(t);
    }
    out.push(0x12); // int64
    out.extend_from_slice(b"id\0");
    out.extend_from_slice(&id.to_le_bytes());
    out.push(0x02); // string
    out.extend_from_slice(b"ns\0");
    out.extend_from_slice(&ns_len.to_le_bytes());
    out.extend_from_slice(ns.as_bytes());
    out.push(0);
    out.push(0); // end of cursor
    out.push(0x01); // double
    out.extend_from_slice(b"ok\0");
    out.extend_from_slice(&1.0f64.to_le_bytes());
    out.push(0); // end of reply
    debug_assert_eq!(out.len(), reply_len);
    RawDocumentBuf::from_bytes(out)
        .map_err(|e| MongoError::internal(format!("building a cursor reply: {e}")))
}

/// Registers the rest of a batch as a cursor (if any) and builds the reply.
pub fn finish_first_batch(
    state: &crate::state::ServerState,
    ns: &str,
    mut cursor: Cursor,
    batch: Batch,
    single_batch: bool,
) -> MongoResult<RawDocumentBuf> {
    let id = if batch.exhausted || single_batch {
        0
    } else {
        cursor.ns = ns.to_string();
        state.cursors.register(cursor)
    };
    cursor_reply(ns, id, batch.docs, true)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn source(n: i32) -> DocSource {
        Box::new((0..n).map(|i| Ok(rawdoc! {"_id": i})))
    }

    #[test]
    fn a_batch_of_small_documents_keeps_its_array_within_the_limit() {
        // 100,000 documents of 166 bytes: 16.6 MB of documents, under the
        // limit, but their array's keys and type bytes take it past.
        let pad = "x".repeat(166 - 25);
        let docs: DocSource =
            Box::new((0..100_000).map(move |i| Ok(rawdoc! {"_id": i, "p": pad.clone()})));
        let mut cursor = Cursor::new("d.c".to_string(), docs, None);
        let first = cursor.next_batch(None).unwrap();
        assert!(!first.exhausted);
        assert!(first.docs.as_bytes().len() <= MAX_BATCH_BYTES);
        let rest = cursor.next_batch(None).unwrap();
        assert_eq!(
            first.docs.into_iter().count() + rest.docs.into_iter().count(),
            100_000
        );
        assert_eq!(element_overhead(0), 3);
        assert_eq!(element_overhead(9), 3);
        assert_eq!(element_overhead(10), 4);
        assert_eq!(element_overhead(99_999), 7);
    }

    #[test]
    fn cursor_replies_are_the_documents_append_builds() {
        fn key(k: &'static str) -> &'static bson::raw::CStr {
            crate::reply::key(k).unwrap()
        }
        // What `RawDocumentBuf::append` builds, field by field: the reply
        // written in one buffer must be the same bytes.
        fn appended(
            ns: &str,
            id: i64,
            batch: &RawArrayBuf,
            first: bool,
            token: Option<&RawDocumentBuf>,
        ) -> RawDocumentBuf {
            let mut cursor = RawDocumentBuf::new();
            cursor.append(
                key(if first { "firstBatch" } else { "nextBatch" }),
                batch.clone(),
            );
            if let Some(t) = token {
                cursor.append(key("postBatchResumeToken"), t.clone());
            }
            cursor.append(key("id"), id);
            cursor.append(key("ns"), ns);
            let mut reply = RawDocumentBuf::new();
            reply.append(key("cursor"), cursor);
            reply.append(key("ok"), 1.0);
            reply
        }
        let mut big = RawArrayBuf::new();
        big.push(rawdoc! {"_id": 1, "v": "x".repeat(300_000)});
        big.push(rawdoc! {"_id": 2});
        let token = rawdoc! {"_data": "8263"};
        for batch in [RawArrayBuf::new(), big] {
            for (ns, id) in [("d.c", 0_i64), ("db.$cmd.aggregate", 42), ("", i64::MAX)] {
                for first in [true, false] {
                    let built = cursor_reply(ns, id, batch.clone(), first).unwrap();
                    assert_eq!(
                        built.as_bytes(),
                        appended(ns, id, &batch, first, None).as_bytes()
                    );
                    let built =
                        stream_reply(ns, id, batch.clone(), first, bson::doc! {"_data": "8263"})
                            .unwrap();
                    assert_eq!(
                        built.as_bytes(),
                        appended(ns, id, &batch, first, Some(&token)).as_bytes()
                    );
                }
            }
        }
    }

    #[test]
    fn batches_respect_size_and_limit() {
        let mut c = Cursor::new("d.c".into(), source(250), None);
        let b = c.next_batch(Some(101)).unwrap();
        assert_eq!(b.docs.into_iter().count(), 101);
        assert!(!b.exhausted);
        let b = c.next_batch(None).unwrap();
        assert_eq!(b.docs.into_iter().count(), 149);
        assert!(b.exhausted);

        let mut c = Cursor::new("d.c".into(), source(250), Some(10));
        let b = c.next_batch(Some(4)).unwrap();
        assert!(!b.exhausted);
        let b = c.next_batch(None).unwrap();
        assert_eq!(b.docs.into_iter().count(), 6);
        assert!(b.exhausted);
    }

    #[test]
    fn a_full_batch_looks_ahead_only_when_the_plan_knows_its_end() {
        // As mongod: a batch that fills up does not look for more, so the
        // cursor stays open and the next getMore finds nothing and closes it.
        let mut c = Cursor::new("d.c".into(), source(5), None);
        let b = c.next_batch(Some(5)).unwrap();
        assert_eq!(b.docs.into_iter().count(), 5);
        assert!(!b.exhausted, "a full batch leaves the cursor open");
        let b = c.next_batch(Some(5)).unwrap();
        assert_eq!(b.docs.into_iter().count(), 0);
        assert!(b.exhausted);
        // A plan that knows its end (a blocking sort, a listing) closes at once.
        let mut c = Cursor::new("d.c".into(), source(5), None);
        c.knows_end = true;
        let b = c.next_batch(Some(5)).unwrap();
        assert!(
            b.exhausted,
            "a batch that drains a known end closes the cursor"
        );
        // A batch that is not full and drains the source closes the cursor.
        let mut c = Cursor::new("d.c".into(), source(5), None);
        let b = c.next_batch(Some(6)).unwrap();
        assert!(b.exhausted);
    }

    #[test]
    fn manager_lifecycle() {
        let m = CursorManager::default();
        let id = m.register(Cursor::new("d.c".into(), source(3), None));
        assert!(id > 0);
        assert!(m.take(id, "d.other").is_err());
        let c = m.take(id, "d.c").unwrap();
        assert_eq!(
            m.take(id, "d.c").unwrap_err().code,
            ErrorCode::CursorNotFound
        );
        m.restore(id, c);
        assert_eq!(m.kill(&[id, 42]), (vec![id], vec![42]));
        assert!(m.is_empty());
    }

    #[test]
    fn reaper_spares_no_timeout() {
        let m = CursorManager::default();
        m.register(Cursor::new("d.c".into(), source(3), None));
        let mut keep = Cursor::new("d.c".into(), source(3), None);
        keep.no_timeout = true;
        m.register(keep);
        assert_eq!(m.reap(Duration::ZERO), 1);
        assert_eq!(m.len(), 1);
    }
}
