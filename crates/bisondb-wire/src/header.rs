//! The 16-byte standard message header that starts every wire message.

use crate::{WireError, HEADER_LEN};

/// `MsgHeader`: four little-endian int32 fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    /// Total message size in bytes, header included.
    pub message_length: i32,
    /// Identifier chosen by the sender of this message.
    pub request_id: i32,
    /// For replies, the `request_id` of the request being answered.
    pub response_to: i32,
    /// Message type, see [`crate::op`].
    pub op_code: i32,
}

impl Header {
    /// Parses the first 16 bytes of `bytes`; nothing beyond them is inspected.
    pub fn parse(bytes: &[u8]) -> Result<Header, WireError> {
        let field = |i: usize| -> Result<i32, WireError> {
            let start = i * 4;
            let b = bytes
                .get(start..start + 4)
                .ok_or(WireError::MessageTooSmall {
                    len: bytes.len() as i64,
                })?;
            let mut a = [0u8; 4];
            a.copy_from_slice(b);
            Ok(i32::from_le_bytes(a))
        };
        Ok(Header {
            message_length: field(0)?,
            request_id: field(1)?,
            response_to: field(2)?,
            op_code: field(3)?,
        })
    }

    /// The header as it appears on the wire.
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0u8; HEADER_LEN];
        let fields = [
            self.message_length,
            self.request_id,
            self.response_to,
            self.op_code,
        ];
        for (chunk, v) in out.chunks_exact_mut(4).zip(fields) {
            chunk.copy_from_slice(&v.to_le_bytes());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips() {
        let h = Header {
            message_length: 1234,
            request_id: -7,
            response_to: i32::MAX,
            op_code: crate::op::OP_MSG,
        };
        let bytes = h.to_bytes();
        assert_eq!(&bytes[..4], &1234i32.to_le_bytes());
        assert_eq!(Header::parse(&bytes).ok(), Some(h));
    }

    #[test]
    fn short_input_is_an_error() {
        for len in 0..HEADER_LEN {
            assert!(Header::parse(&vec![0; len]).is_err(), "{len} bytes");
        }
    }
}
