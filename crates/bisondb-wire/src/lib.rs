//! MongoDB wire protocol framing for BisonDB.
//!
//! This crate turns bytes from a client connection into requests and replies into
//! bytes. It knows message formats (OP_MSG, OP_QUERY, OP_REPLY, OP_COMPRESSED)
//! and BSON structure, but no command names: what a body means is the server's
//! business.
//!
//! # Two-step decoding
//!
//! 1. **Bounds check** — [`MessageCodec`] (a `tokio_util` codec) reads the
//!    4-byte `messageLength` and rejects anything below the 16-byte header or
//!    above [`MAX_MESSAGE_SIZE`] *before* reserving buffer space. Only then does it
//!    wait for the rest of the message and yield it whole as a [`Frame`] (header +
//!    payload `Bytes`). A codec error means the stream can no longer be trusted:
//!    the connection is dropped.
//! 2. **Parse** — [`decode_frame`] turns a frame into an [`Incoming`] request:
//!    OP_COMPRESSED is decompressed (bounded by the declared size and
//!    [`MAX_MESSAGE_SIZE`]), the OP_MSG checksum is verified, sections are split
//!    with every length checked against its parent, and every BSON document is
//!    fully validated with [`validate_bson`]. The result borrows from the frame's
//!    buffer (zero-copy [`OpMsg`]). An error here concerns one well-framed
//!    message, so the stream is still in sync.
//!
//! Replies are produced by [`encode_op_msg`] (optionally checksummed and
//! compressed) and, for the legacy handshake, [`encode_op_reply`]; the codec's
//! encoder writes them as they are.
//!
//! ```
//! use bisondb_wire::{decode_frame, encode_op_msg, Frame, Request};
//!
//! let body = bson::rawdoc! { "ping": 1, "$db": "admin" };
//! let bytes = encode_op_msg(7, 0, 0, &body, None)?;
//! let incoming = decode_frame(Frame::parse(bytes)?)?;
//! let Request::Msg(msg) = incoming.request else { unreachable!() };
//! assert_eq!(msg.body().get_i32("ping")?, 1);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod codec;
mod compression;
mod encode;
mod error;
mod header;
mod message;
mod reader;
mod validate;

pub use codec::{Frame, MessageCodec};
pub use compression::{compress, decompress, Compressor};
pub use encode::{
    encode_op_compressed, encode_op_msg, encode_op_msg_reply, encode_op_msg_with_sequences,
    encode_op_reply, Encoded, OP_MSG_PREFIX_LEN, SPLIT_BODY_AT,
};
pub use error::WireError;
pub use header::Header;
pub use message::{decode_frame, DocumentSequence, Incoming, OpMsg, OpQuery, Request};
pub use validate::{validate_bson, MAX_BSON_DEPTH};

/// Largest message accepted or produced (mongod's `maxMessageSizeBytes`).
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;
/// Largest user document (mongod's `maxBsonObjectSize`, 16 MiB).
pub const MAX_BSON_OBJECT_SIZE: usize = 16 * 1024 * 1024;
/// Size of the standard message header.
pub const HEADER_LEN: usize = 16;

/// Opcodes this crate reads or writes.
pub mod op {
    /// Legacy reply to OP_QUERY.
    pub const OP_REPLY: i32 = 1;
    /// Legacy query, still used for the initial handshake.
    pub const OP_QUERY: i32 = 2004;
    /// A compressed wrapper around another opcode.
    pub const OP_COMPRESSED: i32 = 2012;
    /// The extensible message format used for every command.
    pub const OP_MSG: i32 = 2013;
}

/// OP_MSG `flagBits`.
pub mod msg_flags {
    /// The message ends with a CRC-32C checksum.
    pub const CHECKSUM_PRESENT: u32 = 1;
    /// Another message follows without waiting for a reply.
    pub const MORE_TO_COME: u32 = 1 << 1;
    /// The client is prepared for multiple replies (exhaust).
    pub const EXHAUST_ALLOWED: u32 = 1 << 16;
}
