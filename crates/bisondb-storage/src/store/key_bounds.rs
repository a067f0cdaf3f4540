//! Which new document keys cannot be stored yet, known without reading the engine.
//!
//! An insert must refuse an `_id` that exists, and looking every key up costs
//! bloom-filter probes over every table. Drivers make ObjectIds that increase
//! within one client process: a timestamp, a 5-byte value fixed per process, and
//! a counter. One upper bound of the whole collection therefore proves most keys
//! new while a single process inserts, but not when two processes interleave:
//! the one whose process bytes sort lower writes below the other's keys for the
//! rest of each second, and every one of its documents fell back to a lookup
//! (8% of the server's samples with two `timeseries-batch` processes were bloom
//! probes). So the bounds are kept per process part.
//!
//! Invariant: every stored document key is at most `base`, or is an ObjectId
//! key whose process part is `p` and is at most `streams[p]`. A key above `base`
//! and above its own stream's bound is not stored, since a stored key equal to it
//! would have the same type and process part.

use std::collections::HashMap;

use crate::keycode;

/// The hasher of [`Stream`]s: their five bytes as a number, mixed once.
/// The default SipHash took 185 instructions of every insert's
/// [`DocKeyBounds::proves_absent`]; the map holds at most [`MAX_STREAMS`]
/// entries, so keys chosen to collide cost a few comparisons at worst.
#[derive(Default)]
struct StreamHasher(u64);

impl std::hash::Hasher for StreamHasher {
    fn finish(&self) -> u64 {
        // The product's high bits are its best mixed; hashbrown picks the
        // bucket from the low ones.
        self.0 ^ (self.0 >> 29)
    }

    fn write_usize(&mut self, n: usize) {
        self.0 = (self.0 ^ n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15);
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        }
    }
}

type StreamMap = HashMap<Stream, Vec<u8>, std::hash::BuildHasherDefault<StreamHasher>>;

/// Process parts tracked before they are folded into `base`: one per client
/// process that inserted since the bounds were read.
const MAX_STREAMS: usize = 64;

/// `[region][collection u64][tag][12 ObjectId bytes]`: the length of a document
/// key whose `_id` is an ObjectId.
const OID_KEY_LEN: usize = 1 + 8 + 1 + 12;

/// The ObjectId's process part (bytes 4..9 of the id) inside a document key.
type Stream = [u8; 5];

/// The process part of an ObjectId key: a document key, or the `_id` entry
/// of a record-id collection (`store/records.rs`), whose prefix is 8 bytes
/// longer. Any function of the key's bytes keeps the invariant (a stored key
/// equal to a new one has the same part), so the shape is only a heuristic.
fn stream_of(key: &[u8]) -> Option<Stream> {
    let at = match key.len() {
        OID_KEY_LEN => 9,
        n if n == OID_KEY_LEN + 8 => 17,
        _ => return None,
    };
    if key.get(at) != Some(&keycode::tag::OBJECT_ID) {
        return None;
    }
    key.get(at + 5..at + 10).and_then(|s| s.try_into().ok())
}

/// Upper bounds of a collection's document keys (see the module docs), valid for
/// one engine generation.
#[derive(Clone, Debug)]
pub(crate) struct DocKeyBounds {
    generation: u64,
    base: Vec<u8>,
    streams: StreamMap,
}

impl DocKeyBounds {
    /// Bounds from the greatest stored key (empty when there is none).
    pub(crate) fn new(generation: u64, greatest: Vec<u8>) -> Self {
        DocKeyBounds {
            generation,
            base: greatest,
            streams: StreamMap::default(),
        }
    }

    pub(crate) fn generation(&self) -> u64 {
        self.generation
    }

    /// True when `key` is certainly not stored; false means "look it up".
    pub(crate) fn proves_absent(&self, key: &[u8]) -> bool {
        if key <= self.base.as_slice() {
            return false;
        }
        match stream_of(key) {
            Some(s) => self.streams.get(&s).is_none_or(|m| key > m.as_slice()),
            None => true,
        }
    }

    /// Records that `key` is now stored.
    pub(crate) fn raise(&mut self, key: &[u8]) {
        let Some(s) = stream_of(key) else {
            if key > self.base.as_slice() {
                self.base = key.to_vec();
            }
            return;
        };
        if let Some(m) = self.streams.get_mut(&s) {
            if key > m.as_slice() {
                m.clear();
                m.extend_from_slice(key);
            }
            return;
        }
        if self.streams.len() >= MAX_STREAMS {
            self.fold();
        }
        self.streams.insert(s, key.to_vec());
    }

    /// Moves every stream's bound into `base`, keeping the invariant with less
    /// precision, so the map stays small however many processes come and go.
    fn fold(&mut self) {
        for (_, m) in self.streams.drain() {
            if m > self.base {
                self.base = m;
            }
        }
    }
}

/// The greatest key of each stream among the keys one batch queued, gathered
/// while the batch is prepared and applied once it is committed.
#[derive(Default)]
pub(crate) struct BatchHighs {
    highs: Vec<(Option<Stream>, Vec<u8>)>,
}

impl BatchHighs {
    pub(crate) fn note(&mut self, key: &[u8]) {
        let s = stream_of(key);
        match self.highs.iter_mut().find(|(t, _)| *t == s) {
            Some((_, h)) => {
                if key > h.as_slice() {
                    h.clear();
                    h.extend_from_slice(key);
                }
            }
            None => self.highs.push((s, key.to_vec())),
        }
    }

    pub(crate) fn apply(self, bounds: &mut DocKeyBounds) {
        for (_, h) in self.highs {
            bounds.raise(&h);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn oid_key(ts: u32, process: [u8; 5], counter: u32) -> Vec<u8> {
        let mut k = vec![0x01];
        k.extend_from_slice(&7u64.to_be_bytes());
        k.push(keycode::tag::OBJECT_ID);
        k.extend_from_slice(&ts.to_be_bytes());
        k.extend_from_slice(&process);
        k.extend_from_slice(&counter.to_be_bytes()[1..]);
        k
    }

    fn int_key(v: u8) -> Vec<u8> {
        let mut k = vec![0x01];
        k.extend_from_slice(&7u64.to_be_bytes());
        k.extend_from_slice(&[0x10, v]);
        k
    }

    const A: [u8; 5] = [9, 9, 9, 9, 9];
    const B: [u8; 5] = [1, 1, 1, 1, 1];

    #[test]
    fn two_interleaved_processes_both_skip_lookups() {
        let mut b = DocKeyBounds::new(0, oid_key(100, A, 5));
        let mut highs = BatchHighs::default();
        highs.note(&oid_key(101, A, 1));
        highs.note(&oid_key(101, A, 2));
        highs.apply(&mut b);
        // B's keys of the same second sort below A's, yet are new.
        assert!(b.proves_absent(&oid_key(101, B, 1)));
        b.raise(&oid_key(101, B, 1));
        assert!(b.proves_absent(&oid_key(101, B, 2)));
        // What was inserted is never proven absent.
        assert!(!b.proves_absent(&oid_key(101, B, 1)));
        assert!(!b.proves_absent(&oid_key(101, A, 2)));
        assert!(!b.proves_absent(&oid_key(101, A, 1)));
        // Nor anything at or below the base read from the engine.
        assert!(!b.proves_absent(&oid_key(100, B, 9)));
        assert!(!b.proves_absent(&oid_key(100, A, 5)));
        assert!(b.proves_absent(&oid_key(101, A, 3)));
    }

    #[test]
    fn other_id_types_use_the_base() {
        let mut b = DocKeyBounds::new(0, Vec::new());
        assert!(b.proves_absent(&int_key(3)));
        b.raise(&int_key(3));
        assert!(!b.proves_absent(&int_key(3)));
        assert!(!b.proves_absent(&int_key(2)));
        assert!(b.proves_absent(&int_key(4)));
        // An ObjectId key sorts after ints (its tag is greater) and is new.
        assert!(b.proves_absent(&oid_key(1, A, 1)));
    }

    #[test]
    fn folding_many_processes_keeps_every_key_covered() {
        let mut b = DocKeyBounds::new(0, Vec::new());
        let mut inserted = Vec::new();
        for p in 0..(MAX_STREAMS as u8 + 10) {
            let k = oid_key(50, [p, 0, 0, 0, 0], 1);
            assert!(b.proves_absent(&k));
            b.raise(&k);
            inserted.push(k);
        }
        assert!(b.streams.len() <= MAX_STREAMS);
        for k in &inserted {
            assert!(!b.proves_absent(k));
        }
    }

    #[test]
    fn model_random_inserts_never_prove_a_stored_key_absent() {
        // A small deterministic generator over few seconds, processes and
        // counters, so keys collide and interleave often.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let mut next = || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        let mut stored = std::collections::BTreeSet::new();
        for i in 0..40u8 {
            stored.insert(oid_key(10, [i % 3, 0, 0, 0, 0], u32::from(i)));
        }
        let greatest = stored.iter().next_back().cloned().unwrap_or_default();
        let mut b = DocKeyBounds::new(0, greatest);
        let mut skipped = 0;
        let mut counters = [0u32; 5];
        for _ in 0..5000 {
            let r = next();
            let key = if r % 7 == 0 {
                int_key((r >> 8) as u8 % 16)
            } else if r % 2 == 0 {
                // A driver's next ObjectId: one process counting up.
                let p = (r >> 8) as usize % 5;
                counters[p] += 1;
                oid_key(13, [p as u8, 0, 0, 0, 0], counters[p])
            } else {
                let ts = 9 + (r >> 8) as u32 % 4;
                let p = [(r >> 16) as u8 % 5, 0, 0, 0, 0];
                oid_key(ts, p, (r >> 24) as u32 % 64)
            };
            if b.proves_absent(&key) {
                assert!(!stored.contains(&key), "stored key proven absent: {key:?}");
                skipped += 1;
            }
            if stored.insert(key.clone()) {
                b.raise(&key);
            }
        }
        // The bounds are of use, not only safe: many lookups were skipped.
        assert!(skipped > 1000, "only {skipped} lookups skipped");
    }
}
