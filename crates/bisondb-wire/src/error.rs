//! The single error type of the wire layer.
//!
//! Every variant describes why bytes from the network could not be turned into a
//! request (or why a reply could not be encoded). Errors from the codec leave the
//! stream position unknown, so the caller must drop the connection. Errors from
//! [`crate::decode_frame`] concern one complete message: the stream is still in
//! sync, and the caller may either drop the connection or answer with an error
//! (for example `InvalidBSON` for [`WireError::InvalidBson`]).

/// Why a message could not be framed, decoded or encoded.
#[derive(Debug, thiserror::Error)]
pub enum WireError {
    /// `messageLength` (or an encoded reply) exceeds [`crate::MAX_MESSAGE_SIZE`].
    #[error("message length {len} exceeds the maximum of {max} bytes", max = crate::MAX_MESSAGE_SIZE)]
    MessageTooLarge {
        /// The declared or computed length.
        len: i64,
    },
    /// `messageLength` is smaller than the 16-byte header (negative included).
    #[error("message length {len} is smaller than the {min}-byte header", min = crate::HEADER_LEN)]
    MessageTooSmall {
        /// The declared length.
        len: i64,
    },
    /// The opcode is neither OP_MSG, OP_QUERY nor OP_COMPRESSED (or OP_COMPRESSED
    /// wraps another OP_COMPRESSED).
    #[error("unsupported opcode {0}")]
    UnsupportedOpCode(i32),
    /// OP_MSG has a required flag bit (0-15) that this server does not know.
    #[error("unrecognized OP_MSG flag bits {0:#x}")]
    UnknownRequiredFlags(u32),
    /// The CRC-32C at the end of an OP_MSG does not match its content.
    #[error("OP_MSG checksum mismatch: message says {expected:#010x}, computed {actual:#010x}")]
    ChecksumMismatch {
        /// The checksum carried by the message.
        expected: u32,
        /// The checksum computed over the received bytes.
        actual: u32,
    },
    /// OP_COMPRESSED names a compressor id that does not exist.
    #[error("unknown compressor id {0}")]
    UnknownCompressor(u8),
    /// The message structure is inconsistent (lengths, sections, strings).
    #[error("malformed message: {0}")]
    Malformed(String),
    /// A BSON document is structurally invalid.
    #[error("invalid BSON: {0}")]
    InvalidBson(String),
    /// Compressed data could not be decompressed to exactly the declared size.
    #[error("decompression failed: {0}")]
    Decompression(String),
    /// Data could not be compressed.
    #[error("compression failed: {0}")]
    Compression(String),
    /// The underlying stream failed.
    #[error("I/O error: {0}")]
    Io(#[from] std::io::Error),
}

impl WireError {
    pub(crate) fn malformed(msg: impl Into<String>) -> Self {
        WireError::Malformed(msg.into())
    }

    pub(crate) fn bson(msg: impl Into<String>) -> Self {
        WireError::InvalidBson(msg.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_numbers() {
        let cases: Vec<(WireError, &str)> = vec![
            (WireError::MessageTooLarge { len: 50_000_000 }, "50000000"),
            (WireError::MessageTooSmall { len: -3 }, "-3"),
            (WireError::UnsupportedOpCode(2010), "2010"),
            (WireError::UnknownRequiredFlags(4), "0x4"),
            (
                WireError::ChecksumMismatch {
                    expected: 1,
                    actual: 2,
                },
                "0x00000001",
            ),
            (WireError::UnknownCompressor(9), "9"),
        ];
        for (err, needle) in cases {
            let text = err.to_string();
            assert!(text.contains(needle), "{text:?} should mention {needle:?}");
        }
    }

    #[test]
    fn io_errors_convert() {
        let err: WireError = std::io::Error::other("boom").into();
        assert!(matches!(err, WireError::Io(_)));
    }
}
