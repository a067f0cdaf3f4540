//! Signed cluster time under access control, as mongod's replica sets sign
//! it.
//!
//! With `--auth` (or a `--keyFile`, which turns it on) a set's primary keeps
//! HMAC-SHA1 keys in `admin.system.keys`, in mongod's shape
//! (`{_id: NumberLong, purpose: "HMAC", key: BinData(0, 20 bytes),
//! expiresAt: Timestamp}`), made on first need and rotated as mongod's
//! defaults do: two keys at a time, each valid for
//! [`KEY_VALID_FOR_SECS`] (mongod's `KeysRotationIntervalSec`, 90 days), the
//! next made when the current one has expired. Their ids are the cluster
//! time they were made at, as mongod's.
//!
//! A reply's `$clusterTime.signature` is `{hash, keyId}`: the HMAC of the
//! cluster time with its low 16 bits set (so one proof covers 65536
//! increments), its 8 bytes little-endian, under the earliest key that is
//! still valid at that time. A client without `advanceClusterTime` that
//! sends a time past the newest one this server has signed or checked must
//! sign it with a key this server holds: 211 KeyNotFound for a key id it
//! does not hold, 204 TimeProofMismatch for a wrong hash. A client with
//! `advanceClusterTime` (`__system`, or a custom role) skips the check and
//! gets the dummy signature (20 zero bytes, key id 0), as without `--auth`.
//! A command that runs before authentication ignores an unsigned (or
//! dummy-signed) time rather than failing.

use std::sync::atomic::{AtomicU64, Ordering};

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bisondb_storage::Storage;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, RawBsonRef, RawDocument, Timestamp};
use hmac::{Hmac, KeyInit, Mac};
use parking_lot::{Mutex, RwLock};
use subtle::ConstantTimeEq;

/// Where the keys live: `admin.system.keys`.
pub const KEYS_DB: &str = "admin";
pub const KEYS_COLL: &str = "system.keys";
/// mongod's `KeysRotationIntervalSec` default: how long a key signs.
pub const KEY_VALID_FOR_SECS: u32 = 90 * 24 * 3600;
/// The low bits of a time one proof covers (mongod's range mask).
const RANGE_MASK: u64 = 0xFFFF;

/// A 20-byte HMAC-SHA1 proof.
pub type Proof = [u8; 20];

/// One signing key.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Key {
    id: i64,
    secret: [u8; 20],
    expires_at: Timestamp,
}

fn packed(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The keys of this server and what it has signed and checked.
#[derive(Default)]
pub struct Keys {
    /// Loaded from `admin.system.keys` at first use (`None` before).
    keys: RwLock<Option<Vec<Key>>>,
    /// Serializes making new keys.
    making: Mutex<()>,
    /// The newest time this server signed or found validly signed (packed):
    /// a client may send any time up to it without a check, as mongod.
    last_valid: AtomicU64,
    /// The last proof computed: (time with the range mask, key id, proof).
    cache: Mutex<Option<(u64, i64, Proof)>>,
}

/// A `$clusterTime` as a client sent it.
pub struct Sent {
    pub time: Timestamp,
    /// `None`: no signature, or the dummy one (20 zero bytes).
    pub proof: Option<Proof>,
    pub key_id: i64,
}

impl Sent {
    /// Reads `{clusterTime, signature: {hash, keyId}}`; `None` without a
    /// `clusterTime` timestamp (nothing to gossip).
    pub fn parse(ct: &RawDocument) -> MongoResult<Option<Sent>> {
        let Ok(Some(RawBsonRef::Timestamp(time))) = ct.get("clusterTime") else {
            return Ok(None);
        };
        let Ok(Some(RawBsonRef::Document(sig))) = ct.get("signature") else {
            return Ok(Some(Sent {
                time,
                proof: None,
                key_id: 0,
            }));
        };
        let proof = match sig.get("hash") {
            Ok(Some(RawBsonRef::Binary(b))) => {
                let p: Proof = b.bytes.try_into().map_err(|_| {
                    MongoError::new(
                        ErrorCode::FailedToParse,
                        format!(
                            "$clusterTime.signature.hash must be 20 bytes, found {}",
                            b.bytes.len()
                        ),
                    )
                })?;
                (p != [0u8; 20]).then_some(p)
            }
            Ok(Some(other)) => {
                return Err(crate::fields::wrong_type(
                    "$clusterTime.signature",
                    "hash",
                    other,
                    "binData",
                ))
            }
            _ => None,
        };
        let key_id = match sig.get("keyId") {
            Ok(Some(RawBsonRef::Int64(i))) => i,
            Ok(Some(RawBsonRef::Int32(i))) => i64::from(i),
            Ok(Some(other)) => {
                return Err(crate::fields::wrong_type(
                    "$clusterTime.signature",
                    "keyId",
                    other,
                    "long",
                ))
            }
            _ => 0,
        };
        Ok(Some(Sent {
            time,
            proof,
            key_id,
        }))
    }
}

fn hmac(secret: &[u8; 20], time: u64) -> Proof {
    let ceil = time | RANGE_MASK;
    let mut mac = <Hmac<sha1::Sha1> as KeyInit>::new_from_slice(secret)
        .unwrap_or_else(|_| unreachable!("HMAC takes a key of any length"));
    mac.update(&ceil.to_le_bytes());
    let mut out = [0u8; 20];
    out.copy_from_slice(&mac.finalize().into_bytes());
    out
}

fn key_doc(k: &Key) -> bson::Document {
    doc! {
        "_id": k.id,
        "purpose": "HMAC",
        "key": Binary { subtype: BinarySubtype::Generic, bytes: k.secret.to_vec() },
        "expiresAt": k.expires_at,
    }
}

fn key_from_doc(d: &bson::Document) -> Option<Key> {
    if d.get_str("purpose").ok()? != "HMAC" {
        return None;
    }
    let id = match d.get("_id")? {
        Bson::Int64(i) => *i,
        Bson::Int32(i) => i64::from(*i),
        _ => return None,
    };
    let secret: [u8; 20] = d
        .get_binary_generic("key")
        .ok()?
        .as_slice()
        .try_into()
        .ok()?;
    let expires_at = d.get_timestamp("expiresAt").ok()?;
    Some(Key {
        id,
        secret,
        expires_at,
    })
}

fn random_secret() -> [u8; 20] {
    rand::random()
}

impl Keys {
    /// Reads the stored keys once.
    fn ensure_loaded(&self, storage: &Storage) -> MongoResult<()> {
        if self.keys.read().is_some() {
            return Ok(());
        }
        let mut keys = Vec::new();
        if let Some(c) = storage.collection(KEYS_DB, KEYS_COLL) {
            for d in c.scan(false) {
                let d = d.map_err(MongoError::from)?;
                if let Ok(d) = bson::Document::try_from(d.as_ref()) {
                    keys.extend(key_from_doc(&d));
                }
            }
        }
        keys.sort_by_key(|k| packed(k.expires_at));
        self.keys.write().get_or_insert(keys);
        Ok(())
    }

    /// The first key (earliest to expire) that `pick` accepts.
    fn find(&self, pick: impl Fn(&Key) -> bool) -> Option<Key> {
        self.keys
            .read()
            .as_deref()?
            .iter()
            .find(|k| pick(k))
            .copied()
    }

    /// The key that signs `time`: the earliest to expire of those still
    /// valid then, making the next pair first when none is (mongod's key
    /// generator: the current key and the one after it).
    fn signing_key(&self, storage: &Storage, now: Timestamp) -> MongoResult<Key> {
        let valid = |k: &Key| packed(k.expires_at) > packed(now);
        self.ensure_loaded(storage)?;
        if let Some(k) = self.find(valid) {
            return Ok(k);
        }
        let _making = self.making.lock();
        if let Some(k) = self.find(valid) {
            return Ok(k);
        }
        let first_id = i64::try_from(packed(now)).unwrap_or(i64::MAX);
        let current = Key {
            id: first_id,
            secret: random_secret(),
            expires_at: Timestamp {
                time: now.time.saturating_add(KEY_VALID_FOR_SECS),
                increment: now.increment,
            },
        };
        let next = Key {
            id: first_id.saturating_add(1),
            secret: random_secret(),
            expires_at: Timestamp {
                time: current.expires_at.time.saturating_add(KEY_VALID_FOR_SECS),
                increment: now.increment,
            },
        };
        let coll = storage.get_or_create_collection(KEYS_DB, KEYS_COLL)?;
        for k in [&current, &next] {
            let raw = bson::RawDocumentBuf::try_from(&key_doc(k))
                .map_err(|e| MongoError::internal(e.to_string()))?;
            let doc: &bson::RawDocument = &raw;
            let out = coll.insert_many(&[doc], true, bisondb_storage::Durability::Sync);
            if let Some((_, e)) = out.errors.into_iter().next() {
                return Err(e.into());
            }
        }
        tracing::info!(target: "REPL", keyId = current.id, "Generated new cluster-time signing keys");
        let mut keys = self.keys.write();
        let all = keys.get_or_insert_with(Vec::new);
        all.push(current);
        all.push(next);
        all.sort_by_key(|k| packed(k.expires_at));
        Ok(current)
    }

    fn proof(&self, key: &Key, time: u64) -> Proof {
        let ceil = time | RANGE_MASK;
        let mut cache = self.cache.lock();
        if let Some((t, id, p)) = *cache {
            if t == ceil && id == key.id {
                return p;
            }
        }
        let p = hmac(&key.secret, time);
        *cache = Some((ceil, key.id, p));
        p
    }

    /// The signature of `time`: `(hash, keyId)` under the current key.
    pub fn sign(&self, storage: &Storage, time: Timestamp) -> MongoResult<(Proof, i64)> {
        let key = self.signing_key(storage, time)?;
        let proof = self.proof(&key, packed(time));
        self.last_valid.fetch_max(packed(time), Ordering::AcqRel);
        Ok((proof, key.id))
    }

    /// Checks a client's signed time (mongod's `LogicalTimeValidator`): a
    /// time at or before the newest valid one passes as is.
    pub fn validate(&self, storage: &Storage, sent: &Sent) -> MongoResult<()> {
        let time = packed(sent.time);
        if time <= self.last_valid.load(Ordering::Acquire) {
            return Ok(());
        }
        self.ensure_loaded(storage)?;
        let Some(key) = self.find(|k| k.id == sent.key_id && packed(k.expires_at) > time) else {
            return Err(MongoError::new(
                ErrorCode::KeyNotFound,
                format!(
                    "Cache Reader No keys found for HMAC that is valid for time: {{ ts: Timestamp({}, {}) }} with id: {}",
                    sent.time.time, sent.time.increment, sent.key_id
                ),
            ));
        };
        let expected = self.proof(&key, time);
        let matches = sent
            .proof
            .is_some_and(|p| bool::from(p[..].ct_eq(&expected[..])));
        if !matches {
            return Err(MongoError::new(
                ErrorCode::TimeProofMismatch,
                "Proof does not match the cluster time",
            ));
        }
        self.last_valid.fetch_max(time, Ordering::AcqRel);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_proof_covers_a_range_of_increments() {
        let secret = [7u8; 20];
        let t = |time, increment| packed(Timestamp { time, increment });
        assert_eq!(hmac(&secret, t(100, 1)), hmac(&secret, t(100, 0xFFFF)));
        assert_ne!(hmac(&secret, t(100, 1)), hmac(&secret, t(100, 0x10000)));
        assert_ne!(hmac(&secret, t(100, 1)), hmac(&secret, t(101, 1)));
        assert_ne!(hmac(&secret, t(100, 1)), hmac(&[8u8; 20], t(100, 1)));
    }

    #[test]
    fn key_documents_round_trip() {
        let k = Key {
            id: 7_000_000_000_000_000_001,
            secret: [3u8; 20],
            expires_at: Timestamp {
                time: 1_800_000_000,
                increment: 2,
            },
        };
        let d = key_doc(&k);
        assert_eq!(d.get_str("purpose").unwrap(), "HMAC");
        assert_eq!(key_from_doc(&d), Some(k));
        let mut other = d.clone();
        other.insert("purpose", "SigningClusterTime");
        assert_eq!(key_from_doc(&other), None);
    }
}
