//! Encoding of outgoing messages: OP_MSG (optionally checksummed and/or wrapped
//! in OP_COMPRESSED) and the legacy OP_REPLY.
//!
//! Each function writes one contiguous buffer, patching lengths once the content
//! is known, and refuses to produce a message larger than [`MAX_MESSAGE_SIZE`],
//! which no client would accept.

use bson::{RawDocument, RawDocumentBuf};
use bytes::Bytes;

use crate::{compress, msg_flags, op, Compressor, Header, WireError, HEADER_LEN, MAX_MESSAGE_SIZE};

/// Bytes of OP_COMPRESSED between the header and the compressed data.
const COMPRESSED_PREFIX_LEN: usize = 4 + 4 + 1;

fn too_large(len: usize) -> WireError {
    WireError::MessageTooLarge {
        len: i64::try_from(len).unwrap_or(i64::MAX),
    }
}

/// Checks `len` against the protocol maximum and converts it for a length field.
fn wire_len(len: usize) -> Result<i32, WireError> {
    if len > MAX_MESSAGE_SIZE {
        return Err(too_large(len));
    }
    i32::try_from(len).map_err(|_| too_large(len))
}

fn patch_i32(buf: &mut [u8], at: usize, value: i32) {
    if let Some(slot) = buf.get_mut(at..at.saturating_add(4)) {
        slot.copy_from_slice(&value.to_le_bytes());
    }
}

fn start_message(capacity: usize, request_id: i32, response_to: i32, op_code: i32) -> Vec<u8> {
    let mut buf = Vec::with_capacity(capacity);
    buf.extend_from_slice(
        &Header {
            message_length: 0,
            request_id,
            response_to,
            op_code,
        }
        .to_bytes(),
    );
    buf
}

/// Encodes an OP_MSG with only a kind-0 body. When `flags` contains
/// [`msg_flags::CHECKSUM_PRESENT`] a CRC-32C is appended. With a compressor other
/// than [`Compressor::Noop`] the message is wrapped in OP_COMPRESSED.
pub fn encode_op_msg(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: &RawDocument,
    compressor: Option<Compressor>,
) -> Result<Bytes, WireError> {
    encode_op_msg_with_sequences(request_id, response_to, flags, body, &[], compressor)
}

/// Bytes of an OP_MSG before its kind-0 body: the header, the flags and the
/// section kind.
pub const OP_MSG_PREFIX_LEN: usize = HEADER_LEN + 4 + 1;

/// Bodies from this size on are not copied behind their header by
/// [`encode_op_msg_reply`]: below it a copy costs less than a second buffer
/// to write.
pub const SPLIT_BODY_AT: usize = 64 * 1024;

/// An encoded message, ready to write: one buffer, or (a large uncompressed
/// OP_MSG) its prefix and its body apart, to be written together with one
/// vectored write.
#[derive(Debug)]
pub enum Encoded {
    Whole(Bytes),
    Parts {
        prefix: [u8; OP_MSG_PREFIX_LEN],
        body: RawDocumentBuf,
    },
}

impl Encoded {
    /// The message's length on the wire.
    pub fn len(&self) -> usize {
        match self {
            Encoded::Whole(b) => b.len(),
            Encoded::Parts { body, .. } => OP_MSG_PREFIX_LEN + body.as_bytes().len(),
        }
    }

    /// Never true: a message has at least its header.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The message as one buffer (copies a split one).
    pub fn to_vec(&self) -> Vec<u8> {
        match self {
            Encoded::Whole(b) => b.to_vec(),
            Encoded::Parts { prefix, body } => [&prefix[..], body.as_bytes()].concat(),
        }
    }
}

/// [`encode_op_msg`] of a reply the caller owns. A body of
/// [`SPLIT_BODY_AT`] bytes or more, sent without compression or checksum,
/// is kept where it is and only its prefix is encoded: a 16 MiB batch of
/// documents is then not copied once more into fresh memory (and its pages
/// faulted in) just to put 21 bytes in front of it.
pub fn encode_op_msg_reply(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: RawDocumentBuf,
    compressor: Option<Compressor>,
) -> Result<Encoded, WireError> {
    let plain = compressor.is_none_or(|c| c == Compressor::Noop)
        && flags & msg_flags::CHECKSUM_PRESENT == 0;
    if !plain || body.as_bytes().len() < SPLIT_BODY_AT {
        return encode_op_msg(request_id, response_to, flags, &body, compressor)
            .map(Encoded::Whole);
    }
    let total = wire_len(OP_MSG_PREFIX_LEN + body.as_bytes().len())?;
    let mut prefix = [0u8; OP_MSG_PREFIX_LEN];
    prefix[..HEADER_LEN].copy_from_slice(
        &Header {
            message_length: total,
            request_id,
            response_to,
            op_code: op::OP_MSG,
        }
        .to_bytes(),
    );
    prefix[HEADER_LEN..HEADER_LEN + 4].copy_from_slice(&flags.to_le_bytes());
    // prefix[HEADER_LEN + 4] stays 0: a kind-0 section, the body.
    Ok(Encoded::Parts { prefix, body })
}

/// Encodes an OP_MSG with a kind-0 body followed by kind-1 document sequences
/// given as `(identifier, documents)`; otherwise as [`encode_op_msg`].
pub fn encode_op_msg_with_sequences(
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: &RawDocument,
    sequences: &[(&str, &[&RawDocument])],
    compressor: Option<Compressor>,
) -> Result<Bytes, WireError> {
    let body = body.as_bytes();
    let mut buf = start_message(
        HEADER_LEN + 4 + 1 + body.len() + 4,
        request_id,
        response_to,
        op::OP_MSG,
    );
    buf.extend_from_slice(&flags.to_le_bytes());
    buf.push(0);
    buf.extend_from_slice(body);
    for (identifier, docs) in sequences {
        if identifier.as_bytes().contains(&0) {
            return Err(WireError::malformed(
                "document sequence identifier contains a NUL byte",
            ));
        }
        buf.push(1);
        let size_at = buf.len();
        buf.extend_from_slice(&[0; 4]);
        buf.extend_from_slice(identifier.as_bytes());
        buf.push(0);
        for doc in *docs {
            buf.extend_from_slice(doc.as_bytes());
            if buf.len() > MAX_MESSAGE_SIZE {
                return Err(too_large(buf.len()));
            }
        }
        let size = wire_len(buf.len() - size_at)?;
        patch_i32(&mut buf, size_at, size);
    }
    let checksum = flags & msg_flags::CHECKSUM_PRESENT != 0;
    let total = if checksum { buf.len() + 4 } else { buf.len() };
    patch_i32(&mut buf, 0, wire_len(total)?);
    if checksum {
        let crc = crc32c::crc32c(&buf);
        buf.extend_from_slice(&crc.to_le_bytes());
    }
    match compressor {
        Some(c) if c != Compressor::Noop => encode_op_compressed(&buf, c),
        _ => Ok(Bytes::from(buf)),
    }
}

/// Wraps a complete encoded message (header included) in OP_COMPRESSED, keeping
/// its request id, response id and opcode. [`Compressor::Noop`] is allowed and
/// produces an uncompressed OP_COMPRESSED.
pub fn encode_op_compressed(message: &[u8], compressor: Compressor) -> Result<Bytes, WireError> {
    let header = Header::parse(message)?;
    if header.op_code == op::OP_COMPRESSED {
        return Err(WireError::UnsupportedOpCode(header.op_code));
    }
    let original = message.get(HEADER_LEN..).unwrap_or_default();
    let uncompressed_size = wire_len(original.len())?;
    let compressed = compress(compressor, original)?;
    let total = HEADER_LEN
        .checked_add(COMPRESSED_PREFIX_LEN)
        .and_then(|l| l.checked_add(compressed.len()))
        .ok_or_else(|| too_large(usize::MAX))?;
    let mut buf = start_message(
        total,
        header.request_id,
        header.response_to,
        op::OP_COMPRESSED,
    );
    patch_i32(&mut buf, 0, wire_len(total)?);
    buf.extend_from_slice(&header.op_code.to_le_bytes());
    buf.extend_from_slice(&uncompressed_size.to_le_bytes());
    buf.push(compressor.id());
    buf.extend_from_slice(&compressed);
    Ok(Bytes::from(buf))
}

/// Encodes a legacy OP_REPLY (the answer to an OP_QUERY `hello`/`isMaster`).
pub fn encode_op_reply(
    request_id: i32,
    response_to: i32,
    response_flags: i32,
    cursor_id: i64,
    starting_from: i32,
    documents: &[&RawDocument],
) -> Result<Bytes, WireError> {
    let docs_len: usize = documents.iter().map(|d| d.as_bytes().len()).sum();
    let mut buf = start_message(
        (HEADER_LEN + 20).saturating_add(docs_len),
        request_id,
        response_to,
        op::OP_REPLY,
    );
    buf.extend_from_slice(&response_flags.to_le_bytes());
    buf.extend_from_slice(&cursor_id.to_le_bytes());
    buf.extend_from_slice(&starting_from.to_le_bytes());
    let number_returned = i32::try_from(documents.len()).map_err(|_| too_large(documents.len()))?;
    buf.extend_from_slice(&number_returned.to_le_bytes());
    for doc in documents {
        buf.extend_from_slice(doc.as_bytes());
        if buf.len() > MAX_MESSAGE_SIZE {
            return Err(too_large(buf.len()));
        }
    }
    let total = wire_len(buf.len())?;
    patch_i32(&mut buf, 0, total);
    Ok(Bytes::from(buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::rawdoc;

    fn i32_at(b: &[u8], at: usize) -> i32 {
        i32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }

    #[test]
    fn op_reply_layout() {
        let a = rawdoc! { "ismaster": true, "ok": 1.0 };
        let b = rawdoc! { "x": "y" };
        let bytes = encode_op_reply(5, 11, 8, 1234567890123, 3, &[&a, &b]).unwrap();
        let header = Header::parse(&bytes).unwrap();
        assert_eq!(header.message_length as usize, bytes.len());
        assert_eq!(
            (header.request_id, header.response_to, header.op_code),
            (5, 11, op::OP_REPLY)
        );
        assert_eq!(i32_at(&bytes, 16), 8);
        assert_eq!(
            i64::from_le_bytes(bytes[20..28].try_into().unwrap()),
            1234567890123
        );
        assert_eq!(i32_at(&bytes, 28), 3);
        assert_eq!(i32_at(&bytes, 32), 2);
        let docs = &bytes[36..];
        assert_eq!(&docs[..a.as_bytes().len()], a.as_bytes());
        assert_eq!(&docs[a.as_bytes().len()..], b.as_bytes());
    }

    #[test]
    fn op_msg_layout_and_checksum() {
        let body = rawdoc! { "ok": 1.0 };
        let plain = encode_op_msg(1, 2, 0, &body, None).unwrap();
        assert_eq!(plain.len(), HEADER_LEN + 4 + 1 + body.as_bytes().len());
        assert_eq!(plain[20], 0, "kind-0 section");
        let summed = encode_op_msg(1, 2, msg_flags::CHECKSUM_PRESENT, &body, None).unwrap();
        assert_eq!(summed.len(), plain.len() + 4);
        assert_eq!(i32_at(&summed, 0) as usize, summed.len());
        let (covered, crc) = summed.split_at(summed.len() - 4);
        assert_eq!(crc32c::crc32c(covered).to_le_bytes(), crc);
    }

    #[test]
    fn large_plain_replies_are_split_into_the_same_bytes() {
        let small = rawdoc! { "ok": 1.0 };
        let large = rawdoc! { "v": "x".repeat(SPLIT_BODY_AT), "ok": 1.0 };
        for (body, flags, compressor, split) in [
            (&small, 0, None, false),
            (&large, 0, None, true),
            (
                &large,
                msg_flags::MORE_TO_COME,
                Some(Compressor::Noop),
                true,
            ),
            (&large, msg_flags::CHECKSUM_PRESENT, None, false),
            (&large, 0, Some(Compressor::Zlib), false),
        ] {
            let e = encode_op_msg_reply(7, 9, flags, body.clone(), compressor).unwrap();
            assert_eq!(
                matches!(e, Encoded::Parts { .. }),
                split,
                "{flags} {compressor:?}"
            );
            let whole = encode_op_msg(7, 9, flags, body, compressor).unwrap();
            assert_eq!(e.to_vec(), whole.to_vec());
            assert_eq!(e.len(), whole.len());
        }
    }

    #[test]
    fn op_compressed_layout() {
        let body = rawdoc! { "data": "a".repeat(1000) };
        let plain = encode_op_msg(7, 8, 0, &body, None).unwrap();
        let packed = encode_op_msg(7, 8, 0, &body, Some(Compressor::Zlib)).unwrap();
        assert!(packed.len() < plain.len());
        let header = Header::parse(&packed).unwrap();
        assert_eq!(
            (header.request_id, header.response_to, header.op_code),
            (7, 8, op::OP_COMPRESSED)
        );
        assert_eq!(header.message_length as usize, packed.len());
        assert_eq!(i32_at(&packed, 16), op::OP_MSG);
        assert_eq!(i32_at(&packed, 20) as usize, plain.len() - HEADER_LEN);
        assert_eq!(packed[24], Compressor::Zlib.id());
        let inner =
            crate::decompress(Compressor::Zlib, &packed[25..], plain.len() - HEADER_LEN).unwrap();
        assert_eq!(&inner[..], &plain[HEADER_LEN..]);
        // Noop in encode_op_msg means "do not wrap".
        assert_eq!(
            encode_op_msg(7, 8, 0, &body, Some(Compressor::Noop)).unwrap(),
            plain
        );
        // Wrapping twice is refused.
        assert!(encode_op_compressed(&packed, Compressor::Zstd).is_err());
    }

    #[test]
    fn oversized_messages_are_refused() {
        let big = rawdoc! { "s": "x".repeat(20_000_000) };
        let docs = [&*big, &*big, &*big];
        let err = encode_op_msg_with_sequences(1, 0, 0, &rawdoc! {}, &[("documents", &docs)], None)
            .unwrap_err();
        assert!(matches!(err, WireError::MessageTooLarge { .. }));
        let err = encode_op_reply(1, 0, 0, 0, 0, &docs).unwrap_err();
        assert!(matches!(err, WireError::MessageTooLarge { .. }));
    }
}
