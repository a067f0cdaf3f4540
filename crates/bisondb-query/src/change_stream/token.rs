//! Resume tokens: `{_data: "<hex>"}` strings that sort in oplog order.
//!
//! Drivers treat the token as opaque, compare it for equality and hand it
//! back (`resumeAfter`, `startAfter`); tools compare `_data` strings to order
//! events, as they do mongod's keystring hex. The hex is therefore built so
//! that string order is event order: fixed-width fields first (uppercase hex
//! of big-endian integers), then the variable event identity, which only
//! tells apart tokens whose fixed part is equal.
//!
//! Layout (hex of bytes): `82` (a tag byte, as mongod's keystring of a
//! timestamp starts), the timestamp as `time << 32 | increment` (8 bytes), the
//! token version (`02`), the kind (1 byte), the event's index inside a
//! transaction's `applyOps` (8 bytes), `01` when the token is an invalidate's,
//! then `01` + the collection UUID (16 bytes) or `00`, then the BSON bytes of
//! the event identity (`{operationType, documentKey}` or the like), then,
//! for one fragment of an event `$changeStreamSplitLargeEvent` split, the
//! fragment's number (8 bytes, from 0): a fragment's token sorts after its
//! event's and before the next event's.

use bisondb_error::{MongoError, MongoResult};
use bson::{Binary, Bson, Document, Timestamp};

/// The kinds of token, in the order they sort at one timestamp.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TokenKind {
    /// A position before every event at its timestamp
    /// (`startAtOperationTime`).
    Start = 0x00,
    /// One event.
    Event = 0x80,
    /// A position after every event at its timestamp: the
    /// `postBatchResumeToken` of a batch that scanned past its last event.
    HighWaterMark = 0xFF,
}

/// A decoded resume token.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ResumeToken {
    pub ts: u64,
    pub kind: TokenKind,
    /// The event's position inside its transaction's `applyOps` (0 outside
    /// transactions).
    pub txn_op_index: u64,
    /// The `invalidate` event that follows a drop or rename at `ts`.
    pub from_invalidate: bool,
    /// The collection's UUID bytes, when the event has one.
    pub uuid: Option<Vec<u8>>,
    /// The BSON bytes of the event identity (empty for positions).
    pub event_id: Vec<u8>,
    /// The fragment of a split event (from 0).
    pub fragment: Option<u64>,
}

const TAG: u8 = 0x82;
const VERSION: u8 = 2;
/// Bytes before the UUID: tag, ts, version, kind, index, invalidate flag.
const FIXED: usize = 1 + 8 + 1 + 1 + 8 + 1;

/// A timestamp as one ordered integer.
pub fn ts_to_u64(ts: Timestamp) -> u64 {
    (u64::from(ts.time) << 32) | u64::from(ts.increment)
}

/// The inverse of [`ts_to_u64`].
pub fn u64_to_ts(v: u64) -> Timestamp {
    Timestamp {
        time: (v >> 32) as u32,
        increment: (v & 0xFFFF_FFFF) as u32,
    }
}

impl ResumeToken {
    /// The token of one event.
    pub fn event(
        ts: Timestamp,
        txn_op_index: u64,
        uuid: Option<&Binary>,
        event_id: &Document,
    ) -> ResumeToken {
        let mut bytes = Vec::new();
        // Writing a document into a Vec cannot fail.
        let _ = event_id.to_writer(&mut bytes);
        ResumeToken {
            ts: ts_to_u64(ts),
            kind: TokenKind::Event,
            txn_op_index,
            from_invalidate: false,
            uuid: uuid.map(|b| b.bytes.clone()),
            event_id: bytes,
            fragment: None,
        }
    }

    /// A position at `ts` of the given kind (no event).
    pub fn position(ts: Timestamp, kind: TokenKind) -> ResumeToken {
        ResumeToken {
            ts: ts_to_u64(ts),
            kind,
            txn_op_index: 0,
            from_invalidate: false,
            uuid: None,
            event_id: Vec::new(),
            fragment: None,
        }
    }

    /// The token of fragment `n` (from 0) of this event.
    pub fn fragment(&self, n: u64) -> ResumeToken {
        ResumeToken {
            fragment: Some(n),
            ..self.clone()
        }
    }

    /// The token of the whole event a fragment's token names.
    pub fn whole_event(&self) -> ResumeToken {
        ResumeToken {
            fragment: None,
            ..self.clone()
        }
    }

    /// The same event's invalidate token.
    pub fn invalidate(&self) -> ResumeToken {
        ResumeToken {
            from_invalidate: true,
            ..self.clone()
        }
    }

    pub fn timestamp(&self) -> Timestamp {
        u64_to_ts(self.ts)
    }

    /// The `_data` string.
    pub fn to_hex(&self) -> String {
        use std::fmt::Write;
        let mut bytes = Vec::with_capacity(FIXED + 17 + self.event_id.len());
        bytes.push(TAG);
        bytes.extend_from_slice(&self.ts.to_be_bytes());
        bytes.push(VERSION);
        bytes.push(self.kind as u8);
        bytes.extend_from_slice(&self.txn_op_index.to_be_bytes());
        bytes.push(u8::from(self.from_invalidate));
        match &self.uuid {
            Some(u) => {
                bytes.push(1);
                bytes.extend_from_slice(u);
            }
            None => bytes.push(0),
        }
        bytes.extend_from_slice(&self.event_id);
        if let Some(n) = self.fragment {
            bytes.extend_from_slice(&n.to_be_bytes());
        }
        let mut s = String::with_capacity(bytes.len() * 2);
        for b in bytes {
            let _ = write!(s, "{b:02X}");
        }
        s
    }

    /// The token as a change event's `_id` and a `postBatchResumeToken`.
    pub fn to_document(&self) -> Document {
        bson::doc! {"_data": self.to_hex()}
    }

    /// Reads a token a client handed back (`resumeAfter`, `startAfter`).
    pub fn parse(value: &Bson) -> MongoResult<ResumeToken> {
        let Bson::Document(doc) = value else {
            return Err(MongoError::type_mismatch(
                "Bad resume token: the token must be an object",
            ));
        };
        let data = match doc.get("_data") {
            Some(Bson::String(s)) => s,
            Some(other) => {
                return Err(MongoError::location(
                    40647,
                    format!(
                    "Bad resume token: _data of missing or of wrong type. Expected string, got {}",
                    crate::value::type_name(other)
                ),
                ))
            }
            None => return Err(MongoError::location(
                40647,
                "Bad resume token: _data of missing or of wrong type. Expected string, got missing",
            )),
        };
        if let Some(k) = doc.keys().find(|k| *k != "_data" && *k != "_typeBits") {
            return Err(MongoError::location(
                40649,
                format!("Bad resume token: unexpected field {k}"),
            ));
        }
        decode(data).ok_or_else(|| {
            MongoError::location(50795, format!("Bad resume token: cannot decode '{data}'"))
        })
    }
}

fn decode(hex: &str) -> Option<ResumeToken> {
    if !hex.len().is_multiple_of(2) || !hex.is_ascii() {
        return None;
    }
    let bytes = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(hex.get(i..i + 2)?, 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    if bytes.len() < FIXED + 1 || bytes[0] != TAG || bytes[9] != VERSION {
        return None;
    }
    let u64_at = |at: usize| -> Option<u64> {
        Some(u64::from_be_bytes(bytes.get(at..at + 8)?.try_into().ok()?))
    };
    let kind = match bytes[10] {
        0x00 => TokenKind::Start,
        0x80 => TokenKind::Event,
        0xFF => TokenKind::HighWaterMark,
        _ => return None,
    };
    let from_invalidate = match bytes[19] {
        0 => false,
        1 => true,
        _ => return None,
    };
    let (uuid, rest) = match bytes[FIXED] {
        0 => (None, &bytes[FIXED + 1..]),
        1 => {
            let u = bytes.get(FIXED + 1..FIXED + 17)?;
            (Some(u.to_vec()), &bytes[FIXED + 17..])
        }
        _ => return None,
    };
    let (rest, fragment) = if rest.is_empty() {
        (rest, None)
    } else {
        let len = usize::try_from(i32::from_le_bytes(rest.get(..4)?.try_into().ok()?)).ok()?;
        let (id, tail) = (rest.get(..len)?, rest.get(len..)?);
        bson::RawDocument::from_bytes(id).ok()?;
        let fragment = match tail.len() {
            0 => None,
            8 => Some(u64::from_be_bytes(tail.try_into().ok()?)),
            _ => return None,
        };
        (id, fragment)
    };
    Some(ResumeToken {
        ts: u64_at(1)?,
        kind,
        txn_op_index: u64_at(11)?,
        from_invalidate,
        uuid,
        event_id: rest.to_vec(),
        fragment,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn ts(time: u32, increment: u32) -> Timestamp {
        Timestamp { time, increment }
    }

    #[test]
    fn round_trips() {
        let uuid = Binary {
            subtype: bson::spec::BinarySubtype::Uuid,
            bytes: vec![7; 16],
        };
        let t = ResumeToken::event(
            ts(5, 9),
            3,
            Some(&uuid),
            &doc! {"operationType": "insert", "documentKey": {"_id": 1}},
        );
        let back = ResumeToken::parse(&Bson::Document(t.to_document())).unwrap();
        assert_eq!(back, t);
        let f = t.fragment(2);
        let back = ResumeToken::parse(&Bson::Document(f.to_document())).unwrap();
        assert_eq!(back, f);
        assert_eq!(back.whole_event(), t);
        assert!(t < f && f < t.fragment(3) && t.fragment(3) < t.invalidate());
        assert!(f.to_hex() > t.to_hex() && f.to_hex() < t.fragment(3).to_hex());
        let p = ResumeToken::position(ts(1, 2), TokenKind::HighWaterMark);
        assert_eq!(
            ResumeToken::parse(&Bson::Document(p.to_document())).unwrap(),
            p
        );
        assert_eq!(p.timestamp(), ts(1, 2));
    }

    #[test]
    fn hex_order_is_event_order() {
        let id = doc! {"operationType": "insert", "documentKey": {"_id": 1}};
        let tokens = [
            ResumeToken::position(ts(1, 1), TokenKind::Start),
            ResumeToken::event(ts(1, 1), 0, None, &id),
            ResumeToken::event(ts(1, 1), 0, None, &id).invalidate(),
            ResumeToken::event(ts(1, 1), 1, None, &id),
            ResumeToken::event(ts(1, 1), 256, None, &id),
            ResumeToken::position(ts(1, 1), TokenKind::HighWaterMark),
            ResumeToken::event(ts(1, 2), 0, None, &id),
            ResumeToken::event(ts(2, 0), 0, None, &id),
            ResumeToken::position(ts(u32::MAX, 0), TokenKind::Start),
        ];
        for w in tokens.windows(2) {
            assert!(w[0] < w[1], "{w:?}");
            assert!(w[0].to_hex() < w[1].to_hex(), "{w:?}");
        }
    }

    #[test]
    fn bad_tokens() {
        for (bad, code) in [
            (Bson::Int32(1), 14),
            (Bson::Document(doc! {}), 40647),
            (Bson::Document(doc! {"_data": 1}), 40647),
            (Bson::Document(doc! {"_data": "zz"}), 50795),
            (Bson::Document(doc! {"_data": "8200"}), 50795),
            (Bson::Document(doc! {"_data": "82", "x": 1}), 40649),
        ] {
            assert_eq!(
                ResumeToken::parse(&bad).unwrap_err().code.code(),
                code,
                "{bad:?}"
            );
        }
    }
}
