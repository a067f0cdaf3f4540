//! `$changeStreamSplitLargeEvent`: an event larger than a BSON document may
//! be is returned as fragments, as mongod 7+ splits it. Each fragment is
//! `{_id: <the fragment's token>, splitEvent: {fragment: n, of: total}, ...}`
//! followed by a run of the event's top-level fields, in order, as many as
//! fit; a client merges the fragments back into the event. A fragment's
//! token is the event's with the fragment's number (from 0), so a stream
//! resumed from it returns the fragments after it.

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::raw::cstr;
use bson::{RawDocument, RawDocumentBuf};

use super::token::ResumeToken;

/// The largest event (or fragment) a stream returns: mongod's
/// `BSONObjMaxInternalSize` (16 MiB + 16 KiB), the size of a document a
/// reply may hold.
pub const MAX_EVENT_SIZE: usize = 16 * 1024 * 1024 + 16 * 1024;

/// 10334 BSONObjectTooLarge, as mongod reports an event (or one field of
/// it) over [`MAX_EVENT_SIZE`].
pub fn too_large(size: usize, token: &ResumeToken) -> MongoError {
    MongoError::new(
        ErrorCode::BSONObjectTooLarge,
        format!(
            "BSONObj size: {size} (0x{size:X}) is invalid. Size must be between 0 and {MAX_EVENT_SIZE}(16MB) First element: _id: {{ _data: \"{}\" }}",
            token.to_hex()
        ),
    )
}

/// The fragments of `event` (whose `_id` is `token`), each at most `max`
/// bytes; one field that cannot fit in a fragment of its own is
/// BSONObjectTooLarge.
pub fn split(
    event: &RawDocument,
    token: &ResumeToken,
    max: usize,
) -> MongoResult<Vec<RawDocumentBuf>> {
    let bad = |e: bson::error::Error| MongoError::internal(format!("change event: {e}"));
    // The widest header a fragment can have: its token and `splitEvent`.
    let header = |n: u64, of: i32| -> MongoResult<RawDocumentBuf> {
        let mut d = RawDocumentBuf::new();
        let id = RawDocumentBuf::try_from(&token.fragment(n).to_document())
            .map_err(|e| MongoError::internal(format!("change event: {e}")))?;
        d.append(cstr!("_id"), id);
        let mut s = RawDocumentBuf::new();
        s.append(cstr!("fragment"), i32::try_from(n + 1).unwrap_or(i32::MAX));
        s.append(cstr!("of"), of);
        d.append(cstr!("splitEvent"), s);
        Ok(d)
    };
    let overhead = header(u64::from(u32::MAX), i32::MAX)?.as_bytes().len();
    // Runs of fields: (start, end) indexes into `fields`.
    let mut fields = Vec::new();
    for el in event.iter_elements() {
        let el = el.map_err(bad)?;
        if el.key().as_str() == "_id" {
            continue;
        }
        // The type byte, the key and its NUL, the value.
        let size = 1 + el.key().len() + 1 + el.size();
        fields.push((el, size));
    }
    let mut runs: Vec<(usize, usize)> = Vec::new();
    let mut used = overhead;
    for (i, (_, size)) in fields.iter().enumerate() {
        if overhead + size > max {
            return Err(too_large(event.as_bytes().len(), token));
        }
        match runs.last_mut() {
            Some((_, end)) if used + size <= max => {
                *end = i + 1;
                used += size;
            }
            _ => {
                runs.push((i, i + 1));
                used = overhead + size;
            }
        }
    }
    let of = i32::try_from(runs.len()).unwrap_or(i32::MAX);
    let mut out = Vec::with_capacity(runs.len());
    for (n, (start, end)) in runs.into_iter().enumerate() {
        let mut d = header(n as u64, of)?;
        for (el, _) in fields.get(start..end).unwrap_or_default() {
            let value = el.value().map_err(bad)?;
            d.append(el.key(), value);
        }
        out.push(d);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::{doc, Timestamp};

    #[test]
    fn splits_by_field_in_order() {
        let token = ResumeToken::event(
            Timestamp {
                time: 1,
                increment: 1,
            },
            0,
            None,
            &doc! {"operationType": "update", "documentKey": {"_id": 1}},
        );
        let big = "x".repeat(600);
        let event = doc! {"_id": token.to_document(), "operationType": "update", "fullDocument": {"a": big.clone()}, "ns": {"db": "d"}, "fullDocumentBeforeChange": {"a": big.clone()}};
        let raw = RawDocumentBuf::try_from(&event).unwrap();
        let parts = split(&raw, &token, 1000).unwrap();
        assert_eq!(parts.len(), 2);
        let first = bson::Document::try_from(parts[0].as_ref()).unwrap();
        assert_eq!(
            first.get_document("splitEvent").unwrap(),
            &doc! {"fragment": 1, "of": 2}
        );
        assert_eq!(
            ResumeToken::parse(first.get("_id").unwrap()).unwrap(),
            token.fragment(0)
        );
        assert!(first.contains_key("fullDocument") && first.contains_key("ns"));
        let second = bson::Document::try_from(parts[1].as_ref()).unwrap();
        assert_eq!(
            second.get_document("splitEvent").unwrap(),
            &doc! {"fragment": 2, "of": 2}
        );
        assert!(second.contains_key("fullDocumentBeforeChange"));
        assert!(parts.iter().all(|p| p.as_bytes().len() <= 1000));
        // One field larger than a fragment cannot be split.
        assert_eq!(split(&raw, &token, 700).unwrap_err().code.code(), 10334);
    }
}
