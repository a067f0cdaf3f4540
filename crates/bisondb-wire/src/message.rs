//! Step two of decoding: turning one framed message into a request.
//!
//! [`decode_frame`] checks every length against its parent before using it and
//! validates every BSON document it hands out with [`crate::validate_bson`], so
//! code above this crate can read bodies and document sequences with the bson
//! crate's raw API without meeting malformed data. OP_MSG stays zero-copy: an
//! [`OpMsg`] keeps the frame's [`Bytes`] and offsets into it.
//!
//! A `decode_frame` error leaves the stream in sync (the frame was complete), so
//! the server may answer it; a codec error cannot be answered.

use std::collections::HashSet;
use std::ops::Range;

use bson::{RawDocument, RawDocumentBuf};
use bytes::Bytes;

use crate::reader::Reader;
use crate::{
    decompress, msg_flags, op, validate_bson, Compressor, Frame, Header, WireError, HEADER_LEN,
    MAX_MESSAGE_SIZE,
};

/// OP_MSG flag bits 0-15 are "required": a receiver must reject unknown ones.
const REQUIRED_FLAGS_MASK: u32 = 0xFFFF;
const KNOWN_REQUIRED_FLAGS: u32 = msg_flags::CHECKSUM_PRESENT | msg_flags::MORE_TO_COME;
const CHECKSUM_LEN: usize = 4;

/// A decoded client request.
#[derive(Debug, Clone)]
pub enum Request {
    /// OP_MSG, the protocol of every modern command.
    Msg(OpMsg),
    /// Legacy OP_QUERY, still used by drivers for the first `hello`/`isMaster`.
    Query(OpQuery),
}

/// A request together with how it arrived.
#[derive(Debug, Clone)]
pub struct Incoming {
    /// The header as received on the wire (for a compressed request its `op_code` is
    /// OP_COMPRESSED; `request_id` is what the reply's `response_to` must carry).
    pub header: Header,
    /// The decoded request.
    pub request: Request,
    /// Some when the request arrived in OP_COMPRESSED: the reply should use the same.
    pub compressor: Option<Compressor>,
}

/// One kind-1 section of an OP_MSG: a named run of documents.
#[derive(Debug, Clone)]
pub struct DocumentSequence {
    payload: Bytes,
    identifier: String,
    documents: Range<usize>,
    count: usize,
}

impl DocumentSequence {
    /// The sequence identifier (the command field it stands for, e.g. for inserts
    /// the name of the documents array).
    pub fn identifier(&self) -> &str {
        &self.identifier
    }

    /// Number of documents in the sequence.
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether the sequence holds no documents.
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The documents, in order, borrowed from the message buffer.
    pub fn documents(&self) -> impl Iterator<Item = &RawDocument> + '_ {
        DocIter {
            rest: self.payload.get(self.documents.clone()).unwrap_or_default(),
        }
    }
}

/// Walks back-to-back documents already checked by [`decode_frame`]; it stops
/// rather than panics should the bytes ever disagree.
struct DocIter<'a> {
    rest: &'a [u8],
}

impl<'a> Iterator for DocIter<'a> {
    type Item = &'a RawDocument;

    fn next(&mut self) -> Option<&'a RawDocument> {
        let mut r = Reader::new(self.rest, "document sequence");
        let doc = r.bson_extent("document").ok()?;
        self.rest = self.rest.get(doc.len()..).unwrap_or_default();
        RawDocument::from_bytes(doc).ok()
    }
}

/// A decoded OP_MSG. Holds the message bytes; body and sequences borrow from them.
#[derive(Debug, Clone)]
pub struct OpMsg {
    payload: Bytes,
    flags: u32,
    body: Range<usize>,
    sequences: Vec<DocumentSequence>,
}

impl OpMsg {
    /// The raw `flagBits`.
    pub fn flags(&self) -> u32 {
        self.flags
    }

    /// The sender will send another message without waiting for a reply (for a
    /// request: send no reply at all).
    pub fn more_to_come(&self) -> bool {
        self.flags & msg_flags::MORE_TO_COME != 0
    }

    /// The client accepts several replies to this request (exhaust cursors).
    pub fn exhaust_allowed(&self) -> bool {
        self.flags & msg_flags::EXHAUST_ALLOWED != 0
    }

    /// Whether the message carried a (verified) CRC-32C checksum.
    pub fn checksum_present(&self) -> bool {
        self.flags & msg_flags::CHECKSUM_PRESENT != 0
    }

    /// The kind-0 section: the command document.
    pub fn body(&self) -> &RawDocument {
        self.payload
            .get(self.body.clone())
            .and_then(|b| RawDocument::from_bytes(b).ok())
            .unwrap_or_else(|| empty_document())
    }

    /// The kind-1 sections, in message order.
    pub fn sequences(&self) -> &[DocumentSequence] {
        &self.sequences
    }

    /// The kind-1 section with this identifier, if any.
    pub fn sequence(&self, identifier: &str) -> Option<&DocumentSequence> {
        self.sequences.iter().find(|s| s.identifier == identifier)
    }

    /// Parses an OP_MSG whose header is `header` and whose following bytes are
    /// `payload` (the checksum covers both).
    fn parse(header: &Header, payload: Bytes) -> Result<OpMsg, WireError> {
        let data: &[u8] = &payload;
        let mut r = Reader::new(data, "OP_MSG");
        let flags = r.u32("flagBits")?;
        let unknown = flags & REQUIRED_FLAGS_MASK & !KNOWN_REQUIRED_FLAGS;
        if unknown != 0 {
            return Err(WireError::UnknownRequiredFlags(unknown));
        }
        let sections_end = if flags & msg_flags::CHECKSUM_PRESENT != 0 {
            verify_checksum(header, data)?
        } else {
            data.len()
        };
        let sections = data
            .get(..sections_end)
            .ok_or_else(|| WireError::malformed("OP_MSG is too short"))?;
        let mut r = Reader::new(sections, "OP_MSG");
        r.u32("flagBits")?;

        let mut body: Option<Range<usize>> = None;
        let mut sequences = Vec::new();
        while !r.is_empty() {
            match r.u8("section kind")? {
                0 => {
                    let start = r.position();
                    let doc = r.bson_extent("OP_MSG body")?;
                    if body.is_some() {
                        return Err(WireError::malformed(
                            "OP_MSG contains more than one kind-0 (body) section",
                        ));
                    }
                    validate_bson(doc)?;
                    body = Some(start..r.position());
                }
                1 => sequences.push(parse_sequence(&mut r, &payload)?),
                kind => {
                    return Err(WireError::malformed(format!(
                        "unknown OP_MSG section kind {kind}"
                    )))
                }
            }
        }
        let body = body.ok_or_else(|| WireError::malformed("OP_MSG has no body section"))?;
        check_unique_identifiers(&sequences)?;
        Ok(OpMsg {
            payload,
            flags,
            body,
            sequences,
        })
    }
}

fn empty_document() -> &'static RawDocument {
    static EMPTY: std::sync::LazyLock<RawDocumentBuf> =
        std::sync::LazyLock::new(RawDocumentBuf::new);
    &EMPTY
}

/// Checks the trailing CRC-32C and returns where the sections end.
fn verify_checksum(header: &Header, data: &[u8]) -> Result<usize, WireError> {
    let end = data
        .len()
        .checked_sub(CHECKSUM_LEN)
        .filter(|&e| e >= 4)
        .ok_or_else(|| WireError::malformed("OP_MSG too short for its checksum"))?;
    let (covered, tail) = data.split_at(end);
    let mut a = [0u8; CHECKSUM_LEN];
    a.copy_from_slice(tail);
    let expected = u32::from_le_bytes(a);
    let actual = crc32c::crc32c_append(crc32c::crc32c(&header.to_bytes()), covered);
    if expected != actual {
        return Err(WireError::ChecksumMismatch { expected, actual });
    }
    Ok(end)
}

/// Parses a kind-1 section body (after its kind byte).
fn parse_sequence(r: &mut Reader<'_>, payload: &Bytes) -> Result<DocumentSequence, WireError> {
    let start = r.position();
    let size = r.i32("document sequence size")?;
    let body_len = usize::try_from(size)
        .ok()
        .and_then(|s| s.checked_sub(4))
        .filter(|&n| n >= 1)
        .ok_or_else(|| WireError::malformed(format!("document sequence size {size} is invalid")))?;
    if body_len > r.remaining() {
        return Err(WireError::malformed(format!(
            "document sequence size {size} overruns the message"
        )));
    }
    let section = r.take(body_len, "document sequence")?;
    let mut s = Reader::new(section, "document sequence");
    let identifier = s.cstr("document sequence identifier")?.to_owned();
    let docs_start = start
        .checked_add(4)
        .and_then(|p| p.checked_add(s.position()))
        .ok_or_else(|| WireError::malformed("document sequence offset overflow"))?;
    let mut count = 0usize;
    while !s.is_empty() {
        let doc = s.bson_extent("document sequence")?;
        validate_bson(doc)?;
        count += 1;
    }
    Ok(DocumentSequence {
        payload: payload.clone(),
        identifier,
        documents: docs_start..r.position(),
        count,
    })
}

fn check_unique_identifiers(sequences: &[DocumentSequence]) -> Result<(), WireError> {
    if sequences.len() < 2 {
        return Ok(());
    }
    let mut seen = HashSet::with_capacity(sequences.len());
    for s in sequences {
        if !seen.insert(s.identifier.as_str()) {
            return Err(WireError::malformed(format!(
                "duplicate document sequence: {}",
                s.identifier
            )));
        }
    }
    Ok(())
}

/// A decoded legacy OP_QUERY.
#[derive(Debug, Clone)]
pub struct OpQuery {
    /// The query flags.
    pub flags: u32,
    /// `db.collection` (for commands, `db.$cmd`).
    pub full_collection_name: String,
    /// Documents to skip.
    pub number_to_skip: i32,
    /// Batch size requested.
    pub number_to_return: i32,
    /// The query (for commands, the command document).
    pub query: RawDocumentBuf,
    /// Optional projection.
    pub return_fields_selector: Option<RawDocumentBuf>,
}

impl OpQuery {
    fn parse(payload: &[u8]) -> Result<OpQuery, WireError> {
        let mut r = Reader::new(payload, "OP_QUERY");
        let flags = r.u32("flags")?;
        let full_collection_name = r.cstr("fullCollectionName")?.to_owned();
        let number_to_skip = r.i32("numberToSkip")?;
        let number_to_return = r.i32("numberToReturn")?;
        let query = owned_document(r.bson_extent("OP_QUERY query")?)?;
        let return_fields_selector = if r.is_empty() {
            None
        } else {
            Some(owned_document(
                r.bson_extent("OP_QUERY returnFieldsSelector")?,
            )?)
        };
        if !r.is_empty() {
            return Err(WireError::malformed(format!(
                "{} unexpected bytes after OP_QUERY documents",
                r.remaining()
            )));
        }
        Ok(OpQuery {
            flags,
            full_collection_name,
            number_to_skip,
            number_to_return,
            query,
            return_fields_selector,
        })
    }
}

fn owned_document(bytes: &[u8]) -> Result<RawDocumentBuf, WireError> {
    validate_bson(bytes)?;
    RawDocumentBuf::from_bytes(bytes.to_vec()).map_err(|e| WireError::bson(e.to_string()))
}

/// Decodes a complete message into a request.
///
/// Accepts OP_MSG, OP_QUERY and OP_COMPRESSED wrapping either of them; any other
/// opcode, including OP_COMPRESSED inside OP_COMPRESSED, is
/// [`WireError::UnsupportedOpCode`].
pub fn decode_frame(frame: Frame) -> Result<Incoming, WireError> {
    let Frame { header, payload } = frame;
    let expected = HEADER_LEN
        .checked_add(payload.len())
        .and_then(|l| i32::try_from(l).ok());
    if expected != Some(header.message_length) {
        return Err(WireError::malformed(format!(
            "header declares {} bytes but the frame has {}",
            header.message_length,
            HEADER_LEN.saturating_add(payload.len())
        )));
    }
    match header.op_code {
        op::OP_COMPRESSED => {
            let (inner, compressor) = decompress_message(&header, &payload)?;
            let request = decode_uncompressed(inner)?;
            Ok(Incoming {
                header,
                request,
                compressor: Some(compressor),
            })
        }
        _ => Ok(Incoming {
            header,
            request: decode_uncompressed(Frame { header, payload })?,
            compressor: None,
        }),
    }
}

fn decode_uncompressed(frame: Frame) -> Result<Request, WireError> {
    match frame.header.op_code {
        op::OP_MSG => Ok(Request::Msg(OpMsg::parse(&frame.header, frame.payload)?)),
        op::OP_QUERY => Ok(Request::Query(OpQuery::parse(&frame.payload)?)),
        other => Err(WireError::UnsupportedOpCode(other)),
    }
}

/// Unwraps OP_COMPRESSED into the original message, with the header the original
/// would have had (so an inner OP_MSG checksum verifies as sent).
fn decompress_message(header: &Header, payload: &[u8]) -> Result<(Frame, Compressor), WireError> {
    let mut r = Reader::new(payload, "OP_COMPRESSED");
    let original_opcode = r.i32("originalOpcode")?;
    let declared = r.i32("uncompressedSize")?;
    let id = r.u8("compressorId")?;
    if original_opcode == op::OP_COMPRESSED {
        return Err(WireError::UnsupportedOpCode(original_opcode));
    }
    let size = usize::try_from(declared).map_err(|_| {
        WireError::malformed(format!(
            "OP_COMPRESSED uncompressedSize {declared} is negative"
        ))
    })?;
    let total = size
        .checked_add(HEADER_LEN)
        .filter(|&t| t <= MAX_MESSAGE_SIZE);
    let Some(total) = total else {
        return Err(WireError::MessageTooLarge {
            len: i64::from(declared).saturating_add(HEADER_LEN as i64),
        });
    };
    let compressor = Compressor::from_id(id).ok_or(WireError::UnknownCompressor(id))?;
    let compressed = r.take(r.remaining(), "compressedMessage")?;
    let inner = decompress(compressor, compressed, size)?;
    let inner_header = Header {
        message_length: i32::try_from(total)
            .map_err(|_| WireError::MessageTooLarge { len: i64::MAX })?,
        request_id: header.request_id,
        response_to: header.response_to,
        op_code: original_opcode,
    };
    Ok((
        Frame {
            header: inner_header,
            payload: Bytes::from(inner),
        },
        compressor,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{encode_op_compressed, encode_op_msg, encode_op_msg_with_sequences};
    use bson::rawdoc;
    use proptest::prelude::*;

    fn decode(bytes: impl Into<Bytes>) -> Result<Incoming, WireError> {
        decode_frame(Frame::parse(bytes.into())?)
    }

    fn msg(incoming: &Incoming) -> &OpMsg {
        match &incoming.request {
            Request::Msg(m) => m,
            Request::Query(_) => panic!("expected OP_MSG"),
        }
    }

    /// Builds an OP_MSG from raw section bytes, optionally with a correct checksum.
    fn raw_msg(flags: u32, sections: &[u8], checksum: bool) -> Vec<u8> {
        let len = HEADER_LEN + 4 + sections.len() + if checksum { 4 } else { 0 };
        let mut out = Header {
            message_length: len as i32,
            request_id: 1,
            response_to: 0,
            op_code: op::OP_MSG,
        }
        .to_bytes()
        .to_vec();
        let flags = if checksum {
            flags | msg_flags::CHECKSUM_PRESENT
        } else {
            flags
        };
        out.extend_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(sections);
        if checksum {
            let crc = crc32c::crc32c(&out);
            out.extend_from_slice(&crc.to_le_bytes());
        }
        out
    }

    fn body_section(doc: &RawDocument) -> Vec<u8> {
        let mut s = vec![0u8];
        s.extend_from_slice(doc.as_bytes());
        s
    }

    fn seq_section(id: &str, docs: &[&RawDocument]) -> Vec<u8> {
        let mut inner = id.as_bytes().to_vec();
        inner.push(0);
        for d in docs {
            inner.extend_from_slice(d.as_bytes());
        }
        let mut s = vec![1u8];
        s.extend_from_slice(&((inner.len() + 4) as i32).to_le_bytes());
        s.extend_from_slice(&inner);
        s
    }

    fn raw_compressed(original_opcode: i32, size: i32, id: u8, data: &[u8]) -> Vec<u8> {
        let mut out = Header {
            message_length: (HEADER_LEN + 9 + data.len()) as i32,
            request_id: 3,
            response_to: 0,
            op_code: op::OP_COMPRESSED,
        }
        .to_bytes()
        .to_vec();
        out.extend_from_slice(&original_opcode.to_le_bytes());
        out.extend_from_slice(&size.to_le_bytes());
        out.push(id);
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn op_msg_round_trips() {
        let body = rawdoc! { "insert": "c", "$db": "test", "ordered": true, "n": 1.5 };
        let compressors = [
            None,
            Some(Compressor::Noop),
            Some(Compressor::Snappy),
            Some(Compressor::Zlib),
            Some(Compressor::Zstd),
        ];
        for compressor in compressors {
            for flags in [
                0,
                msg_flags::CHECKSUM_PRESENT,
                msg_flags::EXHAUST_ALLOWED | msg_flags::MORE_TO_COME,
            ] {
                let bytes = encode_op_msg(42, 17, flags, &body, compressor).unwrap();
                let incoming = decode(bytes).unwrap();
                let m = msg(&incoming);
                assert_eq!(m.body(), &*body, "{compressor:?} {flags}");
                assert_eq!(m.flags(), flags);
                assert_eq!(
                    m.checksum_present(),
                    flags & msg_flags::CHECKSUM_PRESENT != 0
                );
                assert_eq!(m.more_to_come(), flags & msg_flags::MORE_TO_COME != 0);
                assert_eq!(m.exhaust_allowed(), flags & msg_flags::EXHAUST_ALLOWED != 0);
                assert!(m.sequences().is_empty());
                assert_eq!(incoming.header.request_id, 42);
                assert_eq!(incoming.header.response_to, 17);
                let wrapped = compressor.filter(|c| *c != Compressor::Noop);
                assert_eq!(incoming.compressor, wrapped);
                let expected_op = if wrapped.is_some() {
                    op::OP_COMPRESSED
                } else {
                    op::OP_MSG
                };
                assert_eq!(incoming.header.op_code, expected_op);
            }
        }
    }

    #[test]
    fn noop_compressed_message_reports_its_compressor() {
        let body = rawdoc! { "ping": 1 };
        let plain = encode_op_msg(1, 0, 0, &body, None).unwrap();
        let wrapped = encode_op_compressed(&plain, Compressor::Noop).unwrap();
        let incoming = decode(wrapped).unwrap();
        assert_eq!(incoming.compressor, Some(Compressor::Noop));
        assert_eq!(msg(&incoming).body(), &*body);
    }

    #[test]
    fn document_sequences_round_trip() {
        let body = rawdoc! { "insert": "coll", "$db": "db" };
        let docs: Vec<_> = (0..3)
            .map(|i| rawdoc! { "_id": i, "s": "x".repeat(i as usize) })
            .collect();
        let refs: Vec<&RawDocument> = docs.iter().map(|d| &**d).collect();
        let updates = [&*rawdoc! { "q": {}, "u": { "$set": { "a": 1 } } }];
        for compressor in [None, Some(Compressor::Zstd)] {
            let bytes = encode_op_msg_with_sequences(
                9,
                0,
                msg_flags::CHECKSUM_PRESENT,
                &body,
                &[("documents", &refs), ("updates", &updates), ("empty", &[])],
                compressor,
            )
            .unwrap();
            let incoming = decode(bytes).unwrap();
            let m = msg(&incoming);
            assert_eq!(m.body(), &*body);
            let ids: Vec<&str> = m.sequences().iter().map(|s| s.identifier()).collect();
            assert_eq!(ids, ["documents", "updates", "empty"]);
            let seq = m.sequence("documents").unwrap();
            assert_eq!(seq.len(), 3);
            assert!(!seq.is_empty());
            let got: Vec<&RawDocument> = seq.documents().collect();
            assert_eq!(got, refs);
            assert_eq!(m.sequence("updates").unwrap().documents().count(), 1);
            let empty = m.sequence("empty").unwrap();
            assert!(empty.is_empty());
            assert_eq!(empty.documents().count(), 0);
            assert!(m.sequence("deletes").is_none());
        }
    }

    #[test]
    fn sequence_identifier_with_nul_is_refused_on_encode() {
        let body = rawdoc! {};
        let err = encode_op_msg_with_sequences(1, 0, 0, &body, &[("a\0b", &[])], None).unwrap_err();
        assert!(matches!(err, WireError::Malformed(_)));
    }

    fn op_query(name: &[u8], docs: &[&[u8]], trailing: &[u8]) -> Vec<u8> {
        let mut payload = 4u32.to_le_bytes().to_vec();
        payload.extend_from_slice(name);
        payload.extend_from_slice(&0i32.to_le_bytes());
        payload.extend_from_slice(&(-1i32).to_le_bytes());
        for d in docs {
            payload.extend_from_slice(d);
        }
        payload.extend_from_slice(trailing);
        let mut out = Header {
            message_length: (HEADER_LEN + payload.len()) as i32,
            request_id: 11,
            response_to: 0,
            op_code: op::OP_QUERY,
        }
        .to_bytes()
        .to_vec();
        out.extend_from_slice(&payload);
        out
    }

    #[test]
    fn op_query_decodes() {
        let query = rawdoc! { "isMaster": 1, "client": { "driver": { "name": "x" } } };
        let fields = rawdoc! { "a": 1 };
        for with_fields in [false, true] {
            let mut docs: Vec<&[u8]> = vec![query.as_bytes()];
            if with_fields {
                docs.push(fields.as_bytes());
            }
            let incoming = decode(op_query(b"admin.$cmd\0", &docs, b"")).unwrap();
            let Request::Query(q) = incoming.request else {
                panic!("expected OP_QUERY");
            };
            assert_eq!(incoming.compressor, None);
            assert_eq!(incoming.header.request_id, 11);
            assert_eq!(q.flags, 4);
            assert_eq!(q.full_collection_name, "admin.$cmd");
            assert_eq!(q.number_to_skip, 0);
            assert_eq!(q.number_to_return, -1);
            assert_eq!(q.query, query);
            assert_eq!(q.return_fields_selector.is_some(), with_fields);
        }
    }

    #[test]
    fn op_query_errors() {
        let query = rawdoc! { "isMaster": 1 };
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("name without NUL", op_query(b"admin.$cmd", &[], b"")),
            ("missing query", op_query(b"admin.$cmd\0", &[], b"")),
            (
                "trailing bytes",
                op_query(b"admin.$cmd\0", &[query.as_bytes()], b"\x01"),
            ),
            (
                "bad selector",
                op_query(b"admin.$cmd\0", &[query.as_bytes(), b"\x06\0\0\0\0\0"], b""),
            ),
            (
                "name not UTF-8",
                op_query(b"\xff\0", &[query.as_bytes()], b""),
            ),
        ];
        for (desc, bytes) in cases {
            assert!(decode(bytes).is_err(), "{desc}");
        }
    }

    #[test]
    fn malformed_messages_are_errors() {
        let body = rawdoc! { "ping": 1 };
        let good = encode_op_msg(1, 0, 0, &body, None).unwrap().to_vec();
        let bad_bson: &[u8] = b"\x0c\0\0\0\x08b\0\x02\0\0\0\0";
        let mut bad_checksum = raw_msg(0, &body_section(&body), true);
        let last = bad_checksum.len() - 1;
        bad_checksum[last] ^= 0xff;
        let mut flipped_body = raw_msg(0, &body_section(&body), true);
        flipped_body[HEADER_LEN + 6] ^= 1;
        let two_bodies = [body_section(&body), body_section(&body)].concat();
        let mut overrun = seq_section("documents", &[&body]);
        overrun[1..5].copy_from_slice(&1000i32.to_le_bytes());
        let mut negative_seq = seq_section("documents", &[&body]);
        negative_seq[1..5].copy_from_slice(&(-5i32).to_le_bytes());
        let mut tiny_seq = seq_section("documents", &[&body]);
        tiny_seq[1..5].copy_from_slice(&3i32.to_le_bytes());
        let mut body_overrun = body_section(&body);
        body_overrun[1..5].copy_from_slice(&200i32.to_le_bytes());
        let dup_seq = [
            body_section(&body),
            seq_section("documents", &[&body]),
            seq_section("documents", &[&body]),
        ]
        .concat();
        let bad_seq_doc = {
            let mut s = vec![1u8];
            s.extend_from_slice(&((4 + 2 + bad_bson.len()) as i32).to_le_bytes());
            s.extend_from_slice(b"d\0");
            s.extend_from_slice(bad_bson);
            [body_section(&body), s].concat()
        };
        let seq_garbage_tail = {
            let mut s = seq_section("documents", &[&body]);
            s.extend_from_slice(b"\x01\x02");
            let size = (s.len() - 1) as i32;
            s[1..5].copy_from_slice(&size.to_le_bytes());
            [body_section(&body), s].concat()
        };
        let bomb = crate::compress(Compressor::Zlib, &vec![0u8; 1_000_000]).unwrap();
        let inner = &good[HEADER_LEN..];
        let zstd_inner = crate::compress(Compressor::Zstd, inner).unwrap();
        let nested = raw_compressed(op::OP_COMPRESSED, inner.len() as i32, 0, inner);
        let mut header_only = good[..HEADER_LEN].to_vec();
        header_only[..4].copy_from_slice(&16i32.to_le_bytes());

        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("truncated header", good[..10].to_vec()),
            ("truncated message", good[..good.len() - 1].to_vec()),
            ("header only", header_only),
            ("bad checksum", bad_checksum),
            ("corrupted checksummed content", flipped_body),
            (
                "checksum flag without room",
                raw_msg(msg_flags::CHECKSUM_PRESENT, b"", false),
            ),
            ("no sections", raw_msg(0, b"", false)),
            (
                "no body, only a sequence",
                raw_msg(0, &seq_section("documents", &[&body]), false),
            ),
            ("two kind-0 sections", raw_msg(0, &two_bodies, false)),
            (
                "bad kind byte",
                raw_msg(
                    0,
                    &[body_section(&body), vec![2, 0, 0, 0, 0]].concat(),
                    false,
                ),
            ),
            (
                "unknown required flag",
                raw_msg(1 << 5, &body_section(&body), false),
            ),
            ("body overruns message", raw_msg(0, &body_overrun, false)),
            (
                "section overrun",
                raw_msg(0, &[body_section(&body), overrun].concat(), false),
            ),
            (
                "negative sequence size",
                raw_msg(0, &[body_section(&body), negative_seq].concat(), false),
            ),
            (
                "sequence size below minimum",
                raw_msg(0, &[body_section(&body), tiny_seq].concat(), false),
            ),
            (
                "sequence with trailing garbage",
                raw_msg(0, &seq_garbage_tail, false),
            ),
            (
                "duplicate sequence identifiers",
                raw_msg(0, &dup_seq, false),
            ),
            (
                "invalid BSON body",
                raw_msg(0, &[&[0u8][..], bad_bson].concat(), false),
            ),
            ("invalid BSON in sequence", raw_msg(0, &bad_seq_doc, false)),
            (
                "bad compressor id",
                raw_compressed(op::OP_MSG, inner.len() as i32, 9, inner),
            ),
            (
                "decompression bomb",
                raw_compressed(op::OP_MSG, 100, 2, &bomb),
            ),
            (
                "size smaller than data",
                raw_compressed(op::OP_MSG, inner.len() as i32 - 1, 3, &zstd_inner),
            ),
            (
                "size larger than data",
                raw_compressed(op::OP_MSG, inner.len() as i32 + 1, 3, &zstd_inner),
            ),
            (
                "negative uncompressed size",
                raw_compressed(op::OP_MSG, -1, 0, inner),
            ),
            (
                "uncompressed size over max",
                raw_compressed(op::OP_MSG, MAX_MESSAGE_SIZE as i32, 1, b"x"),
            ),
            ("compressed in compressed", nested),
            (
                "compressed unknown opcode",
                raw_compressed(2010, inner.len() as i32, 0, inner),
            ),
            (
                "compressed header truncated",
                raw_compressed(op::OP_MSG, 0, 0, b"")[..HEADER_LEN + 6].to_vec(),
            ),
        ];
        for (desc, bytes) in cases {
            let mut fixed = bytes.clone();
            // Keep messageLength honest unless the case is about framing itself.
            if fixed.len() >= HEADER_LEN && !desc.starts_with("truncated") && desc != "header only"
            {
                let len = fixed.len() as i32;
                fixed[..4].copy_from_slice(&len.to_le_bytes());
            }
            assert!(decode(fixed).is_err(), "{desc} should be rejected");
        }
    }

    #[test]
    fn errors_are_precise() {
        let body = rawdoc! { "ping": 1 };
        let mut bad_checksum = raw_msg(0, &body_section(&body), true);
        let last = bad_checksum.len() - 1;
        bad_checksum[last] ^= 0xff;
        assert!(matches!(
            decode(bad_checksum),
            Err(WireError::ChecksumMismatch { .. })
        ));
        assert!(matches!(
            decode(raw_msg(1 << 3, &body_section(&body), false)),
            Err(WireError::UnknownRequiredFlags(8))
        ));
        let inner = encode_op_msg(1, 0, 0, &body, None).unwrap();
        assert!(matches!(
            decode(raw_compressed(op::OP_MSG, 10, 7, &inner[HEADER_LEN..])),
            Err(WireError::UnknownCompressor(7))
        ));
        let mut reply = inner.to_vec();
        reply[12..16].copy_from_slice(&op::OP_REPLY.to_le_bytes());
        assert!(matches!(
            decode(reply),
            Err(WireError::UnsupportedOpCode(op::OP_REPLY))
        ));
        assert!(matches!(
            decode(raw_compressed(
                op::OP_MSG,
                100,
                2,
                &crate::compress(Compressor::Zlib, &[0; 5000]).unwrap()
            )),
            Err(WireError::Decompression(_))
        ));
        assert!(matches!(
            decode(raw_msg(
                0,
                &[&[0u8][..], b"\x0c\0\0\0\x08b\0\x02\0\0\0\0"].concat(),
                false
            )),
            Err(WireError::InvalidBson(_))
        ));
    }

    #[test]
    fn optional_flag_bits_are_accepted() {
        let body = rawdoc! { "ping": 1 };
        let flags = msg_flags::EXHAUST_ALLOWED | (1 << 20);
        let incoming = decode(raw_msg(flags, &body_section(&body), false)).unwrap();
        assert_eq!(msg(&incoming).flags(), flags);
    }

    #[test]
    fn frame_length_must_match_header() {
        let body = rawdoc! { "ping": 1 };
        let frame = Frame::parse(encode_op_msg(1, 0, 0, &body, None).unwrap()).unwrap();
        let lying = Frame {
            header: Header {
                message_length: frame.header.message_length + 1,
                ..frame.header
            },
            payload: frame.payload.clone(),
        };
        assert!(matches!(decode_frame(lying), Err(WireError::Malformed(_))));
        assert!(decode_frame(frame).is_ok());
    }

    proptest! {
        #[test]
        fn arbitrary_frames_never_panic(
            op_code in prop_oneof![Just(op::OP_MSG), Just(op::OP_QUERY), Just(op::OP_COMPRESSED), any::<i32>()],
            payload in proptest::collection::vec(any::<u8>(), 0..300),
        ) {
            let header = Header {
                message_length: (HEADER_LEN + payload.len()) as i32,
                request_id: 0,
                response_to: 0,
                op_code,
            };
            let _ = decode_frame(Frame { header, payload: Bytes::from(payload) });
        }

        /// Corrupting valid messages never panics, and whatever still decodes only
        /// exposes valid documents.
        #[test]
        fn mutated_messages_never_panic(
            compressor in prop_oneof![Just(None), Just(Some(Compressor::Snappy)), Just(Some(Compressor::Zlib)), Just(Some(Compressor::Zstd))],
            checksum in any::<bool>(),
            edits in proptest::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4),
        ) {
            let body = rawdoc! { "insert": "c", "$db": "d", "x": [1, "two", { "three": 3.0 }] };
            let docs = [&*rawdoc! { "_id": 1 }, &*rawdoc! { "_id": "two", "s": "str" }];
            let flags = if checksum { msg_flags::CHECKSUM_PRESENT } else { 0 };
            let mut bytes = encode_op_msg_with_sequences(1, 0, flags, &body, &[("documents", &docs)], compressor)
                .unwrap()
                .to_vec();
            for (idx, val) in edits {
                // Leave messageLength alone so the frame reaches decode_frame.
                let i = 4 + idx.index(bytes.len() - 4);
                bytes[i] = val;
            }
            if let Ok(Ok(incoming)) = Frame::parse(Bytes::from(bytes)).map(decode_frame) {
                if let Request::Msg(m) = incoming.request {
                    prop_assert!(validate_bson(m.body().as_bytes()).is_ok());
                    for s in m.sequences() {
                        prop_assert_eq!(s.documents().count(), s.len());
                    }
                }
            }
        }
    }
}
