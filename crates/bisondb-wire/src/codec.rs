//! Step one of decoding: cutting the byte stream into whole messages.
//!
//! The codec looks only at the header. It rejects an impossible `messageLength`
//! as soon as the first four bytes arrive, before reserving any buffer space, so
//! a peer can never make the server allocate more than one maximum-size message
//! per connection. Everything after the header is handed on untouched as a
//! [`Frame`] for [`crate::decode_frame`].
//!
//! Between messages the codec keeps [`READ_CHUNK`] bytes of room in the read
//! buffer, so the next small message arrives in one read: without it the room
//! left behind a message is often a few hundred bytes, and a request that does
//! not fit is read in two system calls (or, for a large one, its first bytes
//! alone before the codec can reserve its length).

use bytes::{Bytes, BytesMut};
use tokio_util::codec::{Decoder, Encoder};

use crate::{Header, WireError, HEADER_LEN, MAX_MESSAGE_SIZE};

/// The room kept in the read buffer while no message length is known: the
/// size of `tokio_util`'s first read buffer, so an idle connection holds no
/// more than before.
const READ_CHUNK: usize = 8 * 1024;

/// One complete message: its header and the bytes that follow it.
#[derive(Debug, Clone)]
pub struct Frame {
    /// The message header.
    pub header: Header,
    /// The bytes after the header (`message_length - 16` of them).
    pub payload: Bytes,
}

impl Frame {
    /// Splits a complete message (header included) into a frame, checking that its
    /// declared length matches and is within bounds.
    pub fn parse(message: Bytes) -> Result<Frame, WireError> {
        let header = Header::parse(&message)?;
        let len = check_length(header.message_length, MAX_MESSAGE_SIZE)?;
        if len != message.len() {
            return Err(WireError::malformed(format!(
                "header declares {len} bytes but the message has {}",
                message.len()
            )));
        }
        Ok(Frame {
            header,
            payload: message.slice(HEADER_LEN..),
        })
    }
}

/// Converts a declared `messageLength` into a usable size or the precise error.
fn check_length(declared: i32, max: usize) -> Result<usize, WireError> {
    let len = usize::try_from(declared)
        .ok()
        .filter(|&l| l >= HEADER_LEN)
        .ok_or(WireError::MessageTooSmall {
            len: i64::from(declared),
        })?;
    if len > max {
        return Err(WireError::MessageTooLarge {
            len: i64::from(declared),
        });
    }
    Ok(len)
}

/// Length-delimited framing of MongoDB messages for `tokio_util::codec::Framed`.
///
/// Decoding yields [`Frame`]s; encoding writes already encoded messages
/// (from [`crate::encode_op_msg`] and friends) as they are. After a decode error
/// the stream position is unknown: drop the connection.
#[derive(Debug, Clone, Copy)]
pub struct MessageCodec {
    max_message_size: usize,
}

impl MessageCodec {
    /// A codec accepting messages up to [`MAX_MESSAGE_SIZE`].
    pub fn new() -> Self {
        MessageCodec {
            max_message_size: MAX_MESSAGE_SIZE,
        }
    }

    /// A codec with a smaller bound (values above [`MAX_MESSAGE_SIZE`] are capped).
    pub fn with_max_message_size(max: usize) -> Self {
        MessageCodec {
            max_message_size: max.min(MAX_MESSAGE_SIZE),
        }
    }

    /// The largest message this codec accepts.
    pub fn max_message_size(&self) -> usize {
        self.max_message_size
    }
}

impl Default for MessageCodec {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder for MessageCodec {
    type Item = Frame;
    type Error = WireError;

    fn decode(&mut self, src: &mut BytesMut) -> Result<Option<Frame>, WireError> {
        let Some(len_bytes) = src.get(..4) else {
            // Room for a whole small message in the next read. A buffer whose
            // earlier messages are all dropped is reused in place by `reserve`.
            if src.capacity() - src.len() < READ_CHUNK {
                src.reserve(READ_CHUNK);
            }
            return Ok(None);
        };
        let mut a = [0u8; 4];
        a.copy_from_slice(len_bytes);
        let len = check_length(i32::from_le_bytes(a), self.max_message_size)?;
        if src.len() < len {
            // Bounded by the check above; sized for this message only, so one
            // read completes it without repeated regrowth.
            src.reserve(len - src.len());
            return Ok(None);
        }
        let message = src.split_to(len).freeze();
        let header = Header::parse(&message)?;
        Ok(Some(Frame {
            header,
            payload: message.slice(HEADER_LEN..),
        }))
    }
}

impl Encoder<Bytes> for MessageCodec {
    type Error = WireError;

    fn encode(&mut self, item: Bytes, dst: &mut BytesMut) -> Result<(), WireError> {
        dst.extend_from_slice(&item);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::op;
    use proptest::prelude::*;

    fn message(op_code: i32, payload: &[u8]) -> Vec<u8> {
        let header = Header {
            message_length: i32::try_from(HEADER_LEN + payload.len()).unwrap(),
            request_id: 5,
            response_to: 0,
            op_code,
        };
        let mut out = header.to_bytes().to_vec();
        out.extend_from_slice(payload);
        out
    }

    #[test]
    fn yields_whole_messages_from_partial_reads() {
        let mut stream = message(op::OP_MSG, b"first");
        stream.extend(message(op::OP_QUERY, b"second!"));
        let mut codec = MessageCodec::new();
        let mut buf = BytesMut::new();
        let mut frames = Vec::new();
        for byte in stream {
            buf.extend_from_slice(&[byte]);
            while let Some(frame) = codec.decode(&mut buf).unwrap() {
                frames.push(frame);
            }
        }
        assert!(buf.is_empty());
        assert_eq!(frames.len(), 2);
        assert_eq!(frames[0].header.op_code, op::OP_MSG);
        assert_eq!(&frames[0].payload[..], b"first");
        assert_eq!(frames[1].header.message_length, 23);
        assert_eq!(&frames[1].payload[..], b"second!");
    }

    #[test]
    fn reserves_only_the_current_message() {
        let mut codec = MessageCodec::new();
        let full = message(op::OP_MSG, &[0; 1000]);
        let mut buf = BytesMut::from(&full[..20]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() >= full.len());
        assert!(buf.capacity() < 4 * full.len());
    }

    #[test]
    fn keeps_room_for_the_next_message() {
        let mut codec = MessageCodec::new();
        // Two messages back to back in a buffer with no room to spare.
        let mut stream = message(op::OP_MSG, &[1; 300]);
        stream.extend(message(op::OP_MSG, &[2; 300]));
        let mut buf = BytesMut::with_capacity(stream.len());
        buf.extend_from_slice(&stream);
        let first = codec.decode(&mut buf).unwrap().unwrap();
        let second = codec.decode(&mut buf).unwrap().unwrap();
        assert_eq!(first.payload.len(), 300);
        assert_eq!(second.payload.len(), 300);
        assert!(buf.is_empty());
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() >= READ_CHUNK, "room for the next read");
        // With a partial length there is room too; with a length, only the message.
        let mut buf = BytesMut::from(&[0u8, 1][..]);
        assert!(codec.decode(&mut buf).unwrap().is_none());
        assert!(buf.capacity() - buf.len() >= READ_CHUNK);
    }

    #[test]
    fn rejects_bad_lengths_before_reserving() {
        let cases: [(i32, bool); 5] = [
            (-1, false),
            (0, false),
            (15, false),
            (MAX_MESSAGE_SIZE as i32 + 1, true),
            (i32::MAX, true),
        ];
        for (len, too_large) in cases {
            let mut buf = BytesMut::from(&len.to_le_bytes()[..]);
            let cap = buf.capacity();
            let err = MessageCodec::new().decode(&mut buf).unwrap_err();
            if too_large {
                assert!(
                    matches!(err, WireError::MessageTooLarge { len: l } if l == i64::from(len))
                );
            } else {
                assert!(
                    matches!(err, WireError::MessageTooSmall { len: l } if l == i64::from(len))
                );
            }
            assert_eq!(buf.capacity(), cap, "no reservation for length {len}");
        }
    }

    #[test]
    fn custom_bound_applies() {
        let mut codec = MessageCodec::with_max_message_size(100);
        assert_eq!(codec.max_message_size(), 100);
        let mut buf = BytesMut::from(&message(op::OP_MSG, &[0; 85])[..]);
        assert!(matches!(
            codec.decode(&mut buf),
            Err(WireError::MessageTooLarge { len: 101 })
        ));
        assert_eq!(
            MessageCodec::with_max_message_size(usize::MAX).max_message_size(),
            MAX_MESSAGE_SIZE
        );
    }

    #[test]
    fn truncated_stream_at_eof_is_an_error() {
        let mut buf = BytesMut::from(&message(op::OP_MSG, b"abc")[..10]);
        assert!(MessageCodec::new().decode_eof(&mut buf).is_err());
    }

    #[test]
    fn encoder_writes_bytes_verbatim() {
        let mut dst = BytesMut::new();
        MessageCodec::new()
            .encode(Bytes::from_static(b"\x01\x02"), &mut dst)
            .unwrap();
        assert_eq!(&dst[..], b"\x01\x02");
    }

    #[test]
    fn frame_parse_checks_length() {
        let good = message(op::OP_MSG, b"xyz");
        let frame = Frame::parse(Bytes::from(good.clone())).unwrap();
        assert_eq!(&frame.payload[..], b"xyz");
        let mut long = good.clone();
        long.push(0);
        assert!(Frame::parse(Bytes::from(long)).is_err());
        assert!(Frame::parse(Bytes::from(good[..15].to_vec())).is_err());
    }

    proptest! {
        #[test]
        fn arbitrary_chunks_never_panic(
            chunks in proptest::collection::vec(proptest::collection::vec(any::<u8>(), 0..64), 0..8)
        ) {
            let mut codec = MessageCodec::new();
            let mut buf = BytesMut::new();
            'outer: for chunk in chunks {
                buf.extend_from_slice(&chunk);
                loop {
                    match codec.decode(&mut buf) {
                        Ok(Some(frame)) => {
                            prop_assert_eq!(frame.payload.len() + HEADER_LEN, frame.header.message_length as usize);
                        }
                        Ok(None) => break,
                        Err(_) => break 'outer,
                    }
                }
            }
        }
    }
}
