//! The logical sessions this server has seen (the `lsid` drivers attach to
//! commands), for the `$listLocalSessions` aggregation stage: mongod's
//! "logical session cache" without its replication to `config.system.sessions`.
//!
//! A session is recorded when a command carries its `lsid`, refreshed on every
//! later use, removed by `endSessions`, and forgotten after mongod's default
//! `localLogicalSessionTimeoutMinutes` (30) without use.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bson::spec::BinarySubtype;
use bson::{doc, Binary, DateTime, Document, RawBsonRef, RawDocument};
use parking_lot::Mutex;

/// Sessions unused for this long are gone, as in mongod.
const SESSION_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// The most sessions kept; beyond it new ones are not recorded (after expired
/// ones are dropped), so a client inventing lsids cannot grow the map forever.
const MAX_SESSIONS: usize = 100_000;

/// SHA-256 of the empty user name: the `uid` mongod gives sessions when
/// authentication is off.
const NO_AUTH_UID: [u8; 32] = [
    0xe3, 0xb0, 0xc4, 0x42, 0x98, 0xfc, 0x1c, 0x14, 0x9a, 0xfb, 0xf4, 0xc8, 0x99, 0x6f, 0xb9, 0x24,
    0x27, 0xae, 0x41, 0xe4, 0x64, 0x9b, 0x93, 0x4c, 0xa4, 0x95, 0x99, 0x1b, 0x78, 0x52, 0xb8, 0x55,
];

struct Entry {
    last_use: DateTime,
    touched: Instant,
}

/// See the module documentation.
#[derive(Default)]
pub struct SessionCache {
    sessions: Mutex<HashMap<[u8; 16], Entry>>,
}

/// The 16 bytes of `{id: UUID}` in a command's `lsid`, if it has one.
fn session_id(lsid: &RawDocument) -> Option<[u8; 16]> {
    match lsid.get("id").ok().flatten()? {
        RawBsonRef::Binary(b) if b.subtype == BinarySubtype::Uuid => b.bytes.try_into().ok(),
        _ => None,
    }
}

impl SessionCache {
    /// Records a use of the session named by a command body's `lsid`.
    pub fn touch(&self, body: &RawDocument) {
        let Some(RawBsonRef::Document(lsid)) = body.get("lsid").ok().flatten() else {
            return;
        };
        let Some(id) = session_id(lsid) else {
            return;
        };
        let now = Instant::now();
        let mut map = self.sessions.lock();
        if map.len() >= MAX_SESSIONS && !map.contains_key(&id) {
            map.retain(|_, e| now.duration_since(e.touched) < SESSION_TIMEOUT);
            if map.len() >= MAX_SESSIONS {
                return;
            }
        }
        map.insert(
            id,
            Entry {
                last_use: DateTime::now(),
                touched: now,
            },
        );
    }

    /// Forgets the sessions of an `endSessions` command.
    pub fn end(&self, lsids: &[Document]) {
        let mut map = self.sessions.lock();
        for lsid in lsids {
            if let Some(bson::Bson::Binary(bin)) = lsid.get("id") {
                if let Ok(id) = <[u8; 16]>::try_from(bin.bytes.as_slice()) {
                    map.remove(&id);
                }
            }
        }
    }

    /// The live sessions as `$listLocalSessions` returns them.
    pub fn list(&self) -> Vec<Document> {
        let now = Instant::now();
        let mut map = self.sessions.lock();
        map.retain(|_, e| now.duration_since(e.touched) < SESSION_TIMEOUT);
        let mut out: Vec<(DateTime, Document)> = map
            .iter()
            .map(|(id, e)| {
                let session = doc! {
                    "_id": {
                        "id": Binary { subtype: BinarySubtype::Uuid, bytes: id.to_vec() },
                        "uid": Binary { subtype: BinarySubtype::Generic, bytes: NO_AUTH_UID.to_vec() },
                    },
                    "lastUse": e.last_use,
                };
                (e.last_use, session)
            })
            .collect();
        out.sort_by_key(|(t, _)| *t);
        out.into_iter().map(|(_, d)| d).collect()
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
    }
}
