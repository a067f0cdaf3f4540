//! Long keys: how the lsm engine stores keys longer than fjall takes.
//!
//! fjall keys are at most 65,535 bytes and every stored key carries the
//! engine's one-byte prefix, so a key of up to [`MAX_KEY_LEN`](super::MAX_KEY_LEN)
//! bytes is stored as `0x00 key`, as it always was. A longer one (an 8 MB
//! string `_id`, an indexed value over 64 KiB: mongod 4.2+ has no index key
//! limit) is stored in the same keyspace as
//!
//! ```text
//! key:   0x01  key[..HEAD_LEN]  sha256(key)
//! value: tail_len:u32le  key[HEAD_LEN..]  value
//! ```
//!
//! so it is found again by computing its stored key (a point read, a delete,
//! an overwrite, the duplicate check of a unique index), and its whole key is in
//! its value. The prefix puts every long key after every short one, where
//! the byte order of stored keys no longer is the order of keys; reads put it
//! back: a scan reads the short keys' range and the long keys' range and merges
//! them by whole key, and the long keys sharing their first `HEAD_LEN` bytes
//! (whose stored order is their digests') are sorted by whole key before they
//! are returned. Keys that share 65,502 bytes are expected to be few, and only
//! such a group is held in memory at once.
//!
//! The prefix byte `0x01` appears in no dbpath written before long keys, so
//! those open unchanged; the engine looks for long keys only once a dbpath
//! holds one (`Open::has_long`), so short keys' reads cost what they did.

use std::cmp::Ordering;
use std::collections::VecDeque;
use std::iter::Peekable;
use std::ops::Bound;

use bisondb_engine::{EngineError, KeyValue};
use sha2::{Digest, Sha256};

use super::MAX_KEY_LEN;

/// First byte of a long key's stored key (short keys have `KEY_PREFIX`, 0).
pub(super) const LONG_PREFIX: u8 = 1;

/// Bytes of the digest that ends a long key's stored key.
const DIGEST_LEN: usize = 32;

/// Bytes of a long key kept at the front of its stored key: as many as fit
/// beside the prefix and the digest, so that few long keys share them.
pub(super) const HEAD_LEN: usize = u16::MAX as usize - 1 - DIGEST_LEN;

/// Bytes of a long key's stored key.
const STORED_LEN: usize = 1 + HEAD_LEN + DIGEST_LEN;

/// Whether `key` is too long to be stored as itself.
#[inline]
pub(super) fn is_long(key: &[u8]) -> bool {
    key.len() > MAX_KEY_LEN
}

/// The stored key of a long key.
pub(super) fn stored_key(key: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(STORED_LEN);
    out.push(LONG_PREFIX);
    out.extend_from_slice(key.get(..HEAD_LEN).unwrap_or(key));
    out.extend_from_slice(&Sha256::digest(key));
    out
}

/// The stored value of a long key holding `value`.
pub(super) fn stored_value(key: &[u8], value: &[u8]) -> Result<Vec<u8>, EngineError> {
    let tail = key.get(HEAD_LEN..).unwrap_or_default();
    let len = u32::try_from(tail.len())
        .map_err(|_| EngineError::InvalidArgument("a key over 4 GiB".into()))?;
    let mut out = Vec::with_capacity(4 + tail.len() + value.len());
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(tail);
    out.extend_from_slice(value);
    Ok(out)
}

/// The whole key and the value of a stored long key.
pub(super) fn decode(stored: &[u8], stored_value: &[u8]) -> Result<KeyValue, EngineError> {
    let bad = || EngineError::Corrupt(format!("bad long key entry of {} bytes", stored.len()));
    if stored.len() != STORED_LEN || stored.first() != Some(&LONG_PREFIX) {
        return Err(bad());
    }
    let head = stored.get(1..=HEAD_LEN).ok_or_else(bad)?;
    let len = stored_value
        .get(..4)
        .and_then(|b| <[u8; 4]>::try_from(b).ok())
        .map(u32::from_le_bytes)
        .ok_or_else(bad)? as usize;
    let tail = stored_value.get(4..4 + len).ok_or_else(bad)?;
    let value = stored_value.get(4 + len..).ok_or_else(bad)?;
    let mut key = Vec::with_capacity(HEAD_LEN + tail.len());
    key.extend_from_slice(head);
    key.extend_from_slice(tail);
    Ok((key, value.to_vec()))
}

/// The value stored under long key `key`, read as `stored_value`; an error if
/// the entry holds another key (a digest collision, never expected).
pub(super) fn value_of(key: &[u8], stored_value: &[u8]) -> Result<Vec<u8>, EngineError> {
    let (whole, value) = decode(&stored_key(key), stored_value)?;
    if whole != key {
        return Err(EngineError::Corrupt(
            "two long keys share their stored key".into(),
        ));
    }
    Ok(value)
}

/// The stored-key range holding every long key within `[lo, hi]` (and
/// perhaps others sharing the bounds' first `HEAD_LEN` bytes, which
/// [`Entries`] filters out).
pub(super) fn stored_range(lo: Bound<&[u8]>, hi: Bound<&[u8]>) -> (Bound<Vec<u8>>, Bound<Vec<u8>>) {
    let head = |k: &[u8]| {
        let mut out = Vec::with_capacity(1 + HEAD_LEN.min(k.len()) + DIGEST_LEN);
        out.push(LONG_PREFIX);
        out.extend_from_slice(k.get(..HEAD_LEN).unwrap_or(k));
        out
    };
    // A long key at or above `k` has a head at or above `k`'s first HEAD_LEN bytes.
    let lo = match lo {
        Bound::Included(k) | Bound::Excluded(k) => Bound::Included(head(k)),
        Bound::Unbounded => Bound::Included(vec![LONG_PREFIX]),
    };
    let hi = match hi {
        // Shorter than a head: a long key below `k` differs from it within
        // `k`'s length (it is longer, so `k` is no prefix of it), so its
        // stored key is below `0x01 k` too.
        Bound::Included(k) | Bound::Excluded(k) if k.len() < HEAD_LEN => Bound::Excluded(head(k)),
        // Otherwise every long key whose head is `k`'s might be below it.
        Bound::Included(k) | Bound::Excluded(k) => {
            let mut h = head(k);
            h.extend_from_slice(&[0xff; DIGEST_LEN]);
            Bound::Included(h)
        }
        Bound::Unbounded => Bound::Excluded(vec![LONG_PREFIX + 1]),
    };
    (lo, hi)
}

fn within(key: &[u8], lo: &Bound<Vec<u8>>, hi: &Bound<Vec<u8>>) -> bool {
    let above = match lo {
        Bound::Included(b) => key >= b.as_slice(),
        Bound::Excluded(b) => key > b.as_slice(),
        Bound::Unbounded => true,
    };
    let below = match hi {
        Bound::Included(b) => key <= b.as_slice(),
        Bound::Excluded(b) => key < b.as_slice(),
        Bound::Unbounded => true,
    };
    above && below
}

/// A raw entry of the long keys' stored range: stored key and stored value.
pub(super) type RawEntry = Result<(fjall::Slice, fjall::Slice), EngineError>;

/// The long keys within `[lo, hi]` in key order (descending when `reverse`),
/// from their stored range read in stored order in the same direction.
pub(super) struct Entries<I: Iterator<Item = RawEntry>> {
    stored: Peekable<I>,
    group: VecDeque<KeyValue>,
    lo: Bound<Vec<u8>>,
    hi: Bound<Vec<u8>>,
    reverse: bool,
}

impl<I: Iterator<Item = RawEntry>> Entries<I> {
    pub(super) fn new(stored: I, lo: Bound<&[u8]>, hi: Bound<&[u8]>, reverse: bool) -> Entries<I> {
        Entries {
            stored: stored.peekable(),
            group: VecDeque::new(),
            lo: lo.map(<[u8]>::to_vec),
            hi: hi.map(<[u8]>::to_vec),
            reverse,
        }
    }

    /// Reads the next group of stored keys sharing their head, sorted by whole key.
    fn fill(&mut self) -> Result<(), EngineError> {
        let Some(first) = self.stored.next() else {
            return Ok(());
        };
        let (k, v) = first?;
        let head: Vec<u8> = k.get(..=HEAD_LEN).unwrap_or(&k[..]).to_vec();
        let mut group = vec![decode(&k, &v)?];
        while let Some(Ok((k, _))) = self.stored.peek() {
            if k.get(..=HEAD_LEN) != Some(&head[..]) {
                break;
            }
            if let Some(Ok((k, v))) = self.stored.next() {
                group.push(decode(&k, &v)?);
            }
        }
        group.retain(|(k, _)| within(k, &self.lo, &self.hi));
        group.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if self.reverse {
            group.reverse();
        }
        self.group = group.into();
        Ok(())
    }
}

impl<I: Iterator<Item = RawEntry>> Iterator for Entries<I> {
    type Item = Result<KeyValue, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        while self.group.is_empty() {
            self.stored.peek()?;
            if let Err(e) = self.fill() {
                return Some(Err(e));
            }
        }
        self.group.pop_front().map(Ok)
    }
}

/// Two streams of entries in key order (descending when `reverse`), merged;
/// no key is in both (a key is either short or long).
pub(super) struct MergeTwo<A: Iterator, B: Iterator> {
    a: Peekable<A>,
    b: Peekable<B>,
    first: Ordering,
}

impl<A, B> MergeTwo<A, B>
where
    A: Iterator<Item = Result<KeyValue, EngineError>>,
    B: Iterator<Item = Result<KeyValue, EngineError>>,
{
    pub(super) fn new(a: A, b: B, reverse: bool) -> MergeTwo<A, B> {
        MergeTwo {
            a: a.peekable(),
            b: b.peekable(),
            first: if reverse {
                Ordering::Greater
            } else {
                Ordering::Less
            },
        }
    }
}

impl<A, B> Iterator for MergeTwo<A, B>
where
    A: Iterator<Item = Result<KeyValue, EngineError>>,
    B: Iterator<Item = Result<KeyValue, EngineError>>,
{
    type Item = Result<KeyValue, EngineError>;

    fn next(&mut self) -> Option<Self::Item> {
        let take_a = match (self.a.peek(), self.b.peek()) {
            (None, None) => return None,
            (Some(_), None) | (Some(Err(_)), _) => true,
            (None, Some(_)) | (_, Some(Err(_))) => false,
            (Some(Ok((ka, _))), Some(Ok((kb, _)))) => ka.cmp(kb) == self.first,
        };
        if take_a {
            self.a.next()
        } else {
            self.b.next()
        }
    }
}

#[cfg(test)]
mod tests;
