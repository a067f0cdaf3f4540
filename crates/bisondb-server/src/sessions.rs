//! Server sessions: mongod's logical session cache. A session is named by the
//! `lsid` drivers attach to commands (`{id: UUID}`), owned by a user (`uid`,
//! the SHA-256 of `user@db`, or of the empty name when authentication is
//! off), and lives until it goes unused for `localLogicalSessionTimeoutMinutes`
//! (30 by default) or a client ends it.
//!
//! What the cache knows it also keeps, as mongod does, in
//! `config.system.sessions` (`{_id: {id, uid}, lastUse}`, with the TTL index
//! `lsidTTLIndex` on `lastUse` that deletes a record once its session would
//! have expired): every `logicalSessionRefreshMillis` (5 minutes) a refresh
//! writes the sessions used since the last one and removes the records of
//! sessions ended since. Sessions expired in memory lose their cursors at
//! that refresh. `$listLocalSessions` lists the cache.
//!
//! Killing sessions (`killSessions`, `killAllSessions`,
//! `killAllSessionsByPattern`) ends their cursors but keeps the sessions,
//! which clients may go on using, as mongod's manual says.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bisondb_error::{MongoError, MongoResult};
use bisondb_storage::{Durability, IndexSpec, Modify};
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Document, RawBsonRef, RawDocument};
use parking_lot::Mutex;
use sha2::{Digest, Sha256};

use crate::request::CommandRequest;
use crate::state::ServerState;

/// The most sessions kept; beyond it new ones are not recorded (after expired
/// ones are dropped), so a client inventing lsids cannot grow the map forever.
const MAX_SESSIONS: usize = 100_000;

/// mongod's default `localLogicalSessionTimeoutMinutes`.
pub const DEFAULT_TIMEOUT_MINUTES: u32 = 30;

/// mongod's default `logicalSessionRefreshMillis`: 5 minutes.
pub const DEFAULT_REFRESH_MILLIS: u64 = 300_000;

/// The database and collection mongod keeps sessions in.
pub const SESSIONS_DB: &str = "config";
pub const SESSIONS_COLL: &str = "system.sessions";

/// The name of the TTL index of `config.system.sessions`, as mongod names it.
pub const TTL_INDEX: &str = "lsidTTLIndex";

/// A session's id: the UUID of its `lsid`.
pub type SessionId = [u8; 16];

/// A session owner's id: SHA-256 of `user@db`.
pub type Uid = [u8; 32];

/// The `uid` of sessions started without authentication: SHA-256 of the
/// empty user name, as mongod computes it (once: every command with an
/// `lsid` asks).
pub fn no_auth_uid() -> Uid {
    static UID: std::sync::OnceLock<Uid> = std::sync::OnceLock::new();
    *UID.get_or_init(|| Sha256::digest(b"").into())
}

/// The `uid` of the user `user` of database `db`.
pub fn user_uid(user: &str, db: &str) -> Uid {
    Sha256::digest(format!("{user}@{db}").as_bytes()).into()
}

struct Entry {
    uid: Uid,
    last_use: DateTime,
    touched: Instant,
    /// Used since the last refresh wrote it to `config.system.sessions`.
    dirty: bool,
}

/// Which sessions a kill command names: each pattern's set fields must all
/// match; no patterns at all names no session.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Pattern {
    pub id: Option<SessionId>,
    pub uid: Option<Uid>,
    /// Matches no session at all (a role pattern: sessions carry no roles
    /// while authentication is off).
    pub nothing: bool,
}

impl Pattern {
    /// Every session.
    pub fn all() -> Pattern {
        Pattern::default()
    }

    /// Whether the pattern names the session `id` of the unauthenticated
    /// user (the owner of every session while authentication is off).
    pub fn matches_id(&self, id: &SessionId) -> bool {
        self.matches(id, &no_auth_uid())
    }

    fn matches(&self, id: &SessionId, uid: &Uid) -> bool {
        !self.nothing
            && self.id.as_ref().is_none_or(|p| p == id)
            && self.uid.as_ref().is_none_or(|p| p == uid)
    }
}

/// See the module documentation.
pub struct SessionCache {
    sessions: Mutex<HashMap<SessionId, Entry>>,
    /// Sessions ended since the last refresh, whose records it deletes.
    ended: Mutex<Vec<(SessionId, Uid)>>,
    timeout: Duration,
    timeout_minutes: u32,
}

impl Default for SessionCache {
    fn default() -> Self {
        SessionCache::new(DEFAULT_TIMEOUT_MINUTES)
    }
}

/// The 16 bytes of a UUID field.
fn uuid_bytes(v: Option<RawBsonRef<'_>>) -> Option<SessionId> {
    match v? {
        RawBsonRef::Binary(b) if b.subtype == BinarySubtype::Uuid => b.bytes.try_into().ok(),
        _ => None,
    }
}

/// The 16 bytes of `{id: UUID}` in a command's `lsid`, if it has one.
fn session_id(lsid: &RawDocument) -> Option<SessionId> {
    uuid_bytes(lsid.get("id").ok().flatten())
}

/// The id and owner named by an owned `lsid` document (a cursor's).
fn lsid_parts(lsid: &Document) -> Option<(SessionId, Uid)> {
    let Some(Bson::Binary(id)) = lsid.get("id") else {
        return None;
    };
    let id = <SessionId>::try_from(id.bytes.as_slice()).ok()?;
    let uid = match lsid.get("uid") {
        Some(Bson::Binary(u)) => <Uid>::try_from(u.bytes.as_slice()).ok()?,
        _ => no_auth_uid(),
    };
    Some((id, uid))
}

/// `{id: UUID}` for a session id.
pub fn lsid_doc(id: &SessionId) -> Document {
    doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() }}
}

/// `{id: UUID, uid: BinData}`: the `_id` of a session's record.
fn record_id(id: &SessionId, uid: &Uid) -> Document {
    doc! {
        "id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
        "uid": Binary { subtype: BinarySubtype::Generic, bytes: uid.to_vec() },
    }
}

impl SessionCache {
    /// A cache whose sessions expire after `timeout_minutes` without use.
    pub fn new(timeout_minutes: u32) -> SessionCache {
        SessionCache {
            sessions: Mutex::new(HashMap::new()),
            ended: Mutex::new(Vec::new()),
            timeout: Duration::from_secs(u64::from(timeout_minutes) * 60),
            timeout_minutes,
        }
    }

    /// `localLogicalSessionTimeoutMinutes`, for `startSession` and `hello`.
    pub fn timeout_minutes(&self) -> u32 {
        self.timeout_minutes
    }

    fn record(&self, id: SessionId, uid: Uid) {
        let now = Instant::now();
        let mut map = self.sessions.lock();
        if map.len() >= MAX_SESSIONS && !map.contains_key(&id) {
            let timeout = self.timeout;
            map.retain(|_, e| now.duration_since(e.touched) < timeout);
            if map.len() >= MAX_SESSIONS {
                return;
            }
        }
        map.insert(
            id,
            Entry {
                uid,
                last_use: DateTime::now(),
                touched: now,
                dirty: true,
            },
        );
    }

    /// Records a use of the session named by a command body's `lsid`.
    pub fn touch(&self, body: &RawDocument) {
        let Some(RawBsonRef::Document(lsid)) = body.get("lsid").ok().flatten() else {
            return;
        };
        if let Some(id) = session_id(lsid) {
            self.record(id, no_auth_uid());
        }
    }

    /// Starts a new session (`startSession`) and returns its id.
    pub fn start(&self) -> SessionId {
        let id: SessionId = bson::Uuid::new().bytes();
        self.record(id, no_auth_uid());
        id
    }

    /// Marks sessions as used now (`refreshSessions`), creating any the
    /// cache does not know, as mongod's vivifying refresh does.
    pub fn refresh(&self, ids: &[SessionId]) {
        for id in ids {
            self.record(*id, no_auth_uid());
        }
    }

    /// Forgets the sessions of an `endSessions` command; the next refresh
    /// deletes their records.
    pub fn end(&self, lsids: &[Document]) {
        let mut map = self.sessions.lock();
        let mut ended = self.ended.lock();
        for lsid in lsids {
            if let Some((id, _)) = lsid_parts(lsid) {
                if let Some(e) = map.remove(&id) {
                    ended.push((id, e.uid));
                }
            }
        }
    }

    /// Ends the cursors of the sessions `patterns` name (any of them), as
    /// the kill commands do; the sessions themselves stay.
    pub fn kill(&self, state: &ServerState, patterns: &[Pattern]) {
        if patterns.is_empty() {
            return;
        }
        state.cursors.kill_matching(|lsid| {
            lsid_parts(lsid).is_some_and(|(id, uid)| patterns.iter().any(|p| p.matches(&id, &uid)))
        });
    }

    /// Drops the sessions unused for longer than the timeout; returns their
    /// ids.
    fn expire(&self) -> Vec<SessionId> {
        let now = Instant::now();
        let mut expired = Vec::new();
        self.sessions.lock().retain(|id, e| {
            let keep = now.duration_since(e.touched) < self.timeout;
            if !keep {
                expired.push(*id);
            }
            keep
        });
        expired
    }

    /// The live sessions as `$listLocalSessions` returns them.
    pub fn list(&self) -> Vec<Document> {
        let now = Instant::now();
        let mut map = self.sessions.lock();
        map.retain(|_, e| now.duration_since(e.touched) < self.timeout);
        let mut out: Vec<(DateTime, Document)> = map
            .iter()
            .map(|(id, e)| (e.last_use, session_record(id, &e.uid, e.last_use)))
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, d)| d).collect()
    }
}

/// A session as `$listLocalSessions` shows it and `config.system.sessions`
/// stores it.
fn session_record(id: &SessionId, uid: &Uid, last_use: DateTime) -> Document {
    doc! {"_id": record_id(id, uid), "lastUse": last_use}
}

/// One refresh of the cache, as mongod's periodic one: expired sessions lose
/// their cursors, `config.system.sessions` (created with its TTL index when
/// missing) gets a record for each session used since the last refresh and
/// loses those of the sessions ended since.
pub fn refresh_now(state: &ServerState) -> MongoResult<()> {
    let cache = &state.sessions;
    let expired = cache.expire();
    if !expired.is_empty() {
        let lsids: Vec<Document> = expired.iter().map(lsid_doc).collect();
        state.cursors.kill_sessions(&lsids);
    }
    let used: Vec<Document> = {
        let mut map = cache.sessions.lock();
        map.iter_mut()
            .filter(|(_, e)| e.dirty)
            .map(|(id, e)| {
                e.dirty = false;
                session_record(id, &e.uid, e.last_use)
            })
            .collect()
    };
    let ended = std::mem::take(&mut *cache.ended.lock());
    if used.is_empty() && ended.is_empty() {
        return Ok(());
    }
    let coll = sessions_collection(state)?;
    for record in used {
        let raw = bson::RawDocumentBuf::try_from(&record).map_err(crate::request::invalid_bson)?;
        let Some(id) = raw.get("_id").ok().flatten() else {
            continue;
        };
        let id = bson::RawBson::from(id);
        coll.modify(id.as_raw_bson_ref(), Durability::Buffered, &mut |cur| {
            Ok(match cur {
                Some(_) => Modify::Replace(raw.clone()),
                None => Modify::Insert(raw.clone()),
            })
        })?;
    }
    for (id, uid) in ended {
        let key = bson::RawDocumentBuf::try_from(&record_id(&id, &uid))
            .map_err(crate::request::invalid_bson)?;
        coll.delete(RawBsonRef::Document(&key), Durability::Buffered)
            .map_err(MongoError::from)?;
    }
    Ok(())
}

/// `config.system.sessions`, created with its TTL index when missing (or
/// the index re-created when someone dropped it).
fn sessions_collection(state: &ServerState) -> MongoResult<bisondb_storage::Collection> {
    let storage = &state.storage;
    let coll = storage
        .get_or_create_collection(SESSIONS_DB, SESSIONS_COLL)
        .map_err(MongoError::from)?;
    if !coll.indexes().iter().any(|ix| ix.spec.name == TTL_INDEX) {
        let spec = IndexSpec {
            name: TTL_INDEX.to_string(),
            key: doc! {"lastUse": 1},
            unique: false,
            sparse: false,
            partial_filter: None,
            expire_after_seconds: Some(i64::from(state.sessions.timeout_minutes()) * 60),
            hidden: false,
            background: None,
            collation: None,
            type_options: Document::new(),
        };
        storage.create_index(SESSIONS_DB, SESSIONS_COLL, spec)?;
    }
    Ok(coll)
}

/// Refreshes the cache every `logicalSessionRefreshMillis` until shutdown
/// (the refresh writes, so it waits while `fsync` holds the lock).
pub fn spawn(state: Arc<ServerState>) -> tokio::task::JoinHandle<()> {
    let every = Duration::from_millis(state.config.logical_session_refresh_millis);
    crate::background::spawn_periodic_writes(state, every, refresh_now, |outcome| match outcome {
        Ok(Ok(())) => {}
        Ok(Err(e)) => tracing::warn!(error = %e, "logical session cache refresh failed"),
        Err(e) => tracing::warn!(error = %e, "logical session cache refresh task failed"),
    })
}

/// Refuses any field but the command's name and the generic arguments.
pub fn only_generic_args(req: &CommandRequest<'_>) -> MongoResult<()> {
    for el in req.body.iter() {
        let (k, _) = el.map_err(crate::request::invalid_bson)?;
        if k != req.name {
            crate::fields::check_known(req.name, k.as_str(), &[])?;
        }
    }
    Ok(())
}

/// The array a session command names itself with (`killSessions: [...]`),
/// refusing fields the command does not know.
pub fn array_arg<'a>(req: &CommandRequest<'a>) -> MongoResult<&'a bson::RawArray> {
    only_generic_args(req)?;
    match req
        .body
        .get(req.name)
        .map_err(crate::request::invalid_bson)?
    {
        Some(v) => crate::fields::as_array(req.name, req.name, v),
        None => Err(crate::fields::missing_field(req.name, req.name)),
    }
}

/// The session id of a `{id: UUID}` array element, for the commands that
/// take lists of sessions; `field` names the array in errors.
pub fn parse_lsid(cmd: &str, field: &str, v: RawBsonRef<'_>) -> MongoResult<SessionId> {
    let d = crate::fields::as_doc(cmd, field, v)?;
    let id = d.get("id").map_err(crate::request::invalid_bson)?;
    match id {
        None => Err(crate::fields::missing_field(cmd, &format!("{field}.id"))),
        Some(v) => uuid_bytes(Some(v))
            .ok_or_else(|| crate::fields::wrong_type(cmd, &format!("{field}.id"), v, "binData")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(id: u8) -> bson::RawDocumentBuf {
        let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![id; 16] }};
        bson::RawDocumentBuf::try_from(&doc! {"ping": 1, "lsid": lsid}).unwrap_or_default()
    }

    #[test]
    fn no_auth_uid_is_mongods() {
        // mongod's uid without authentication, as `$listLocalSessions` shows it.
        assert_eq!(
            no_auth_uid()[..4],
            [0xe3, 0xb0, 0xc4, 0x42],
            "SHA-256 of the empty string"
        );
    }

    #[test]
    fn sessions_are_recorded_listed_and_ended() {
        let cache = SessionCache::default();
        cache.touch(&body(1));
        cache.touch(&body(2));
        cache.touch(&body(1));
        // Bodies without an lsid, or with a malformed one, record nothing.
        cache.touch(&bson::RawDocumentBuf::try_from(&doc! {"ping": 1}).unwrap_or_default());
        cache.touch(
            &bson::RawDocumentBuf::try_from(&doc! {"ping": 1, "lsid": {"id": 5}})
                .unwrap_or_default(),
        );
        let listed = cache.list();
        assert_eq!(listed.len(), 2);
        for s in &listed {
            let id = s.get_document("_id").unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(id.get_binary_generic("uid").map(Vec::len).ok(), Some(32));
            assert!(s.get_datetime("lastUse").is_ok());
        }
        cache.end(&[doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![1; 16] }}]);
        assert_eq!(cache.list().len(), 1);
        assert_eq!(cache.ended.lock().len(), 1);
    }

    #[test]
    fn started_sessions_are_distinct_and_live() {
        let cache = SessionCache::new(5);
        let a = cache.start();
        let b = cache.start();
        assert_ne!(a, b);
        assert_eq!(cache.list().len(), 2);
        assert_eq!(cache.timeout_minutes(), 5);
    }

    #[test]
    fn sessions_expire_after_the_timeout() {
        let cache = SessionCache::new(0);
        cache.touch(&body(3));
        assert_eq!(cache.expire(), vec![[3u8; 16]]);
        assert!(cache.list().is_empty());
    }

    #[test]
    fn patterns_match_by_id_and_owner() {
        let me = no_auth_uid();
        let other = user_uid("app", "admin");
        assert!(Pattern::all().matches(&[1; 16], &me));
        let by_id = Pattern {
            id: Some([1; 16]),
            uid: Some(me),
            nothing: false,
        };
        assert!(by_id.matches(&[1; 16], &me));
        assert!(!by_id.matches(&[2; 16], &me));
        assert!(!by_id.matches(&[1; 16], &other));
        let none = Pattern {
            nothing: true,
            ..Pattern::all()
        };
        assert!(!none.matches(&[1; 16], &me));
    }
}
