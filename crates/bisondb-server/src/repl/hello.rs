//! hello's replica-set fields, as a one-member set's only member answers:
//! before `replSetInitiate` an uninitialized member (`isreplicaset: true`,
//! not writable), after it the primary of its set.

use bson::{doc, oid::ObjectId, Bson, DateTime, Document};

use super::ReplState;

/// mongod's electionId in protocol version 1: `7fffffff` then the term,
/// big-endian, so later terms compare greater.
pub fn election_id(term: i64) -> ObjectId {
    let mut bytes = [0u8; 12];
    bytes[..4].copy_from_slice(&[0x7f, 0xff, 0xff, 0xff]);
    bytes[4..].copy_from_slice(&term.to_be_bytes());
    ObjectId::from_bytes(bytes)
}

/// An optime as replies show it: `{ts, t}`.
pub fn op_time(ts: bson::Timestamp, term: i64) -> Document {
    doc! {"ts": ts, "t": term}
}

/// Adds the set's fields to a hello reply `d` (which already holds the
/// standalone's `isWritablePrimary`/`ismaster`, under `writable_key`).
pub fn add_fields(repl: &ReplState, d: &mut Document, writable_key: &str) {
    let Some(set) = repl.initiated() else {
        d.insert(writable_key, false);
        d.insert("secondary", false);
        d.insert("info", "Does not have a valid replica set config");
        d.insert("isreplicaset", true);
        return;
    };
    let host = super::set_config::member_host(&set.config);
    let writable = repl.is_writable_primary();
    d.insert("hosts", vec![Bson::String(host.clone())]);
    d.insert("setName", repl.set_name().unwrap_or_default());
    d.insert("setVersion", set.config.get_i32("version").unwrap_or(1));
    d.insert(writable_key, writable);
    d.insert("secondary", false);
    if writable {
        d.insert("primary", host.clone());
    }
    d.insert("me", host);
    d.insert("electionId", election_id(set.term));
    let (ts, wall) = repl.last_write();
    let date = DateTime::from_millis(wall);
    d.insert(
        "lastWrite",
        doc! {
            "opTime": op_time(ts, set.term),
            "lastWriteDate": date,
            "majorityOpTime": op_time(ts, set.term),
            "majorityWriteDate": date,
        },
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn election_ids_grow_with_the_term() {
        assert_eq!(election_id(1).to_hex(), "7fffffff0000000000000001");
        assert!(election_id(2) > election_id(1));
    }
}
