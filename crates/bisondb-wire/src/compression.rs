//! Message compressors of OP_COMPRESSED: noop, snappy (raw format), zlib and zstd.
//!
//! Decompression is always bounded: the declared uncompressed size is checked
//! against [`MAX_MESSAGE_SIZE`] before anything is allocated, streaming decoders
//! stop one byte past the declared size, and any size mismatch is an error, so a
//! small "decompression bomb" cannot make the server produce large buffers.

use std::io::Read;

use crate::{WireError, MAX_MESSAGE_SIZE};

/// A wire compressor, identified on the wire by its id and in `hello` by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Compressor {
    /// Id 0: the payload is stored as is.
    Noop,
    /// Id 1: snappy raw (unframed) format.
    Snappy,
    /// Id 2: zlib (RFC 1950) stream.
    Zlib,
    /// Id 3: zstd frame.
    Zstd,
}

/// Growth buffers of streaming decoders start at most this big, so an unbacked
/// size claim costs little memory; legitimate large messages grow geometrically.
const INITIAL_STREAM_CAPACITY: usize = 1 << 20;

impl Compressor {
    /// Every compressor, in id order.
    pub const ALL: [Compressor; 4] = [
        Compressor::Noop,
        Compressor::Snappy,
        Compressor::Zlib,
        Compressor::Zstd,
    ];

    /// The `compressorId` byte of OP_COMPRESSED.
    pub const fn id(self) -> u8 {
        match self {
            Compressor::Noop => 0,
            Compressor::Snappy => 1,
            Compressor::Zlib => 2,
            Compressor::Zstd => 3,
        }
    }

    /// The compressor with this wire id.
    pub fn from_id(id: u8) -> Option<Compressor> {
        Self::ALL.into_iter().find(|c| c.id() == id)
    }

    /// The name used in the `compression` field of `hello`.
    pub const fn name(self) -> &'static str {
        match self {
            Compressor::Noop => "noop",
            Compressor::Snappy => "snappy",
            Compressor::Zlib => "zlib",
            Compressor::Zstd => "zstd",
        }
    }

    /// The compressor with this `hello` name (exact, lowercase, as drivers send it).
    pub fn from_name(name: &str) -> Option<Compressor> {
        Self::ALL.into_iter().find(|c| c.name() == name)
    }
}

/// Compresses `data` with `c` at the compressor's default level.
pub fn compress(c: Compressor, data: &[u8]) -> Result<Vec<u8>, WireError> {
    let fail = |e: &dyn std::fmt::Display| WireError::Compression(format!("{}: {e}", c.name()));
    match c {
        Compressor::Noop => Ok(data.to_vec()),
        Compressor::Snappy => snap::raw::Encoder::new()
            .compress_vec(data)
            .map_err(|e| fail(&e)),
        Compressor::Zlib => {
            use std::io::Write;
            let mut enc = flate2::write::ZlibEncoder::new(
                Vec::with_capacity(data.len() / 2),
                flate2::Compression::default(),
            );
            enc.write_all(data).map_err(|e| fail(&e))?;
            enc.finish().map_err(|e| fail(&e))
        }
        Compressor::Zstd => {
            zstd::bulk::compress(data, zstd::DEFAULT_COMPRESSION_LEVEL).map_err(|e| fail(&e))
        }
    }
}

/// Decompresses `data`, which must expand to exactly `uncompressed_size` bytes
/// (at most [`MAX_MESSAGE_SIZE`]).
pub fn decompress(
    c: Compressor,
    data: &[u8],
    uncompressed_size: usize,
) -> Result<Vec<u8>, WireError> {
    if uncompressed_size > MAX_MESSAGE_SIZE {
        return Err(WireError::MessageTooLarge {
            len: i64::try_from(uncompressed_size).unwrap_or(i64::MAX),
        });
    }
    let fail = |e: &dyn std::fmt::Display| WireError::Decompression(format!("{}: {e}", c.name()));
    let mismatch = |got: &dyn std::fmt::Display| {
        WireError::Decompression(format!(
            "{}: expected {uncompressed_size} bytes, got {got}",
            c.name()
        ))
    };
    match c {
        Compressor::Noop => {
            if data.len() != uncompressed_size {
                return Err(mismatch(&data.len()));
            }
            Ok(data.to_vec())
        }
        Compressor::Snappy => {
            // The raw format states its length up front: compare before allocating.
            let declared = snap::raw::decompress_len(data).map_err(|e| fail(&e))?;
            if declared != uncompressed_size {
                return Err(mismatch(&declared));
            }
            let mut out = vec![0u8; uncompressed_size];
            let n = snap::raw::Decoder::new()
                .decompress(data, &mut out)
                .map_err(|e| fail(&e))?;
            if n != uncompressed_size {
                return Err(mismatch(&n));
            }
            Ok(out)
        }
        Compressor::Zlib => {
            read_bounded(c, flate2::read::ZlibDecoder::new(data), uncompressed_size)
        }
        Compressor::Zstd => {
            let dec = zstd::stream::read::Decoder::with_buffer(data).map_err(|e| fail(&e))?;
            read_bounded(c, dec, uncompressed_size)
        }
    }
}

/// Reads at most `size + 1` bytes so that oversized output is detected without
/// being produced.
fn read_bounded(c: Compressor, reader: impl Read, size: usize) -> Result<Vec<u8>, WireError> {
    let limit = u64::try_from(size).unwrap_or(u64::MAX).saturating_add(1);
    let mut out = Vec::with_capacity(size.min(INITIAL_STREAM_CAPACITY));
    reader
        .take(limit)
        .read_to_end(&mut out)
        .map_err(|e| WireError::Decompression(format!("{}: {e}", c.name())))?;
    if out.len() != size {
        let got = if out.len() > size {
            "more".to_string()
        } else {
            out.len().to_string()
        };
        return Err(WireError::Decompression(format!(
            "{}: expected {size} bytes, got {got}",
            c.name()
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn ids_and_names_round_trip() {
        let table = [
            (Compressor::Noop, 0, "noop"),
            (Compressor::Snappy, 1, "snappy"),
            (Compressor::Zlib, 2, "zlib"),
            (Compressor::Zstd, 3, "zstd"),
        ];
        for (c, id, name) in table {
            assert_eq!(c.id(), id);
            assert_eq!(c.name(), name);
            assert_eq!(Compressor::from_id(id), Some(c));
            assert_eq!(Compressor::from_name(name), Some(c));
        }
        assert_eq!(Compressor::from_id(4), None);
        assert_eq!(Compressor::from_id(255), None);
        assert_eq!(Compressor::from_name("ZLIB"), None);
        assert_eq!(Compressor::from_name("lz4"), None);
    }

    #[test]
    fn round_trip_every_compressor() {
        let data: Vec<u8> = (0..50_000u32)
            .flat_map(|i| (i % 251).to_le_bytes())
            .collect();
        for c in Compressor::ALL {
            let packed = compress(c, &data).unwrap();
            if c != Compressor::Noop {
                assert!(
                    packed.len() < data.len(),
                    "{} should shrink repetitive data",
                    c.name()
                );
            }
            assert_eq!(
                decompress(c, &packed, data.len()).unwrap(),
                data,
                "{}",
                c.name()
            );
            // Empty input round-trips too.
            let empty = compress(c, &[]).unwrap();
            assert_eq!(decompress(c, &empty, 0).unwrap(), Vec::<u8>::new());
        }
    }

    #[test]
    fn size_mismatches_are_errors() {
        let data = vec![b'z'; 10_000];
        for c in Compressor::ALL {
            let packed = compress(c, &data).unwrap();
            for claimed in [0, 9_999, 10_001] {
                assert!(
                    matches!(
                        decompress(c, &packed, claimed),
                        Err(WireError::Decompression(_))
                    ),
                    "{} with claimed size {claimed}",
                    c.name()
                );
            }
        }
    }

    #[test]
    fn bombs_stop_at_declared_size() {
        // 8 MB of zeros shrinks at least tenfold with every real compressor; declare 1 KB.
        let bomb = vec![0u8; 8_000_000];
        for c in [Compressor::Zlib, Compressor::Zstd, Compressor::Snappy] {
            let packed = compress(c, &bomb).unwrap();
            assert!(packed.len() * 10 < bomb.len());
            let err = decompress(c, &packed, 1024).unwrap_err();
            assert!(
                matches!(err, WireError::Decompression(_)),
                "{}: {err}",
                c.name()
            );
        }
    }

    #[test]
    fn declared_size_over_max_is_rejected_first() {
        for c in Compressor::ALL {
            assert!(matches!(
                decompress(c, &[], MAX_MESSAGE_SIZE + 1),
                Err(WireError::MessageTooLarge { .. })
            ));
        }
    }

    #[test]
    fn garbage_is_an_error() {
        let garbage = [0xde, 0xad, 0xbe, 0xef, 0x01, 0x02];
        for c in [Compressor::Snappy, Compressor::Zlib, Compressor::Zstd] {
            assert!(decompress(c, &garbage, 100).is_err(), "{}", c.name());
        }
    }

    proptest! {
        #[test]
        fn arbitrary_input_never_panics(
            id in 0u8..4,
            data in proptest::collection::vec(any::<u8>(), 0..128),
            size in 0usize..4096,
        ) {
            let c = Compressor::from_id(id).unwrap();
            if let Ok(out) = decompress(c, &data, size) {
                prop_assert_eq!(out.len(), size);
            }
        }
    }
}
