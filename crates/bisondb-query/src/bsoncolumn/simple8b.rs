//! Simple-8b words as BSONColumn uses them: 64-bit little-endian words whose
//! low 4 bits select how the other 60 hold slots, first slot lowest. A slot
//! of all ones is a missing value (a skip). Selectors 7 and 8 carry a second
//! nibble: 0 for the plain layout (8 slots of 7 bits, 7 of 8 bits, after the
//! nibble), else an extended layout where each slot is a value and a count of
//! trailing zeros (count in the low bits, scaled by 1 or 4). Selector 15 is a
//! run: (nibble + 1) * 120 repeats of the previous block's last slot.
//!
//! Slots are zigzag-encoded deltas; they are handled as `u128` so one decoder
//! serves 64-bit and 128-bit streams. The encoder writes the plain selectors
//! (1-14) and runs only, which every reader of the format decodes.

use bisondb_error::{MongoError, MongoResult};

/// Slots per word and bits per slot of selectors 1..=14 (index = selector).
const COUNT: [u8; 15] = [0, 60, 30, 20, 15, 12, 10, 8, 7, 6, 5, 4, 3, 2, 1];
const BITS: [u8; 15] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 15, 20, 30, 60];

/// Extended layouts of selector 7 (nibble 1..=9) and 8 (nibble 1..=13):
/// (value bits, count bits, zeros per count unit).
const EXT7: [(u8, u8, u8); 9] = [
    (2, 4, 1),
    (3, 4, 1),
    (4, 4, 1),
    (5, 4, 1),
    (7, 4, 1),
    (10, 4, 1),
    (14, 4, 1),
    (24, 4, 1),
    (52, 4, 1),
];
const EXT8: [(u8, u8, u8); 13] = [
    (4, 4, 4),
    (5, 4, 4),
    (7, 4, 4),
    (10, 4, 4),
    (14, 4, 4),
    (24, 4, 4),
    (52, 4, 4),
    (4, 5, 4),
    (6, 5, 4),
    (9, 5, 4),
    (13, 5, 4),
    (23, 5, 4),
    (51, 5, 4),
];

/// Largest slot value the widest plain selector holds (all ones is "missing").
pub const MAX_SLOT: u128 = (1u128 << 60) - 2;

/// Run blocks repeat this many slots per unit of their nibble.
const RLE_UNIT: usize = 120;

fn invalid(what: &str) -> MongoError {
    MongoError::new(
        bisondb_error::ErrorCode::InvalidBSON,
        format!("Invalid BSONColumn encoding: {what}"),
    )
}

/// Decodes one word into `out`. `prev` is the last slot decoded in this
/// stream (what a run repeats); `wide` says the stream holds 128-bit values
/// (extended layouts may then shift past bit 63).
pub fn decode_word(
    word: u64,
    wide: bool,
    prev: &mut Option<u128>,
    out: &mut Vec<Option<u128>>,
) -> MongoResult<()> {
    let selector = (word & 0xF) as usize;
    let nibble = ((word >> 4) & 0xF) as usize;
    let ext = match (selector, nibble) {
        (0, _) => return Err(invalid("selector 0")),
        (15, n) => {
            let n = (n + 1) * RLE_UNIT;
            out.extend(std::iter::repeat_n(*prev, n));
            return Ok(());
        }
        (7, n) if n > 0 => Some(*EXT7.get(n - 1).ok_or_else(|| invalid("selector 7"))?),
        (8, n) if n > 0 => Some(*EXT8.get(n - 1).ok_or_else(|| invalid("selector 8"))?),
        _ => None,
    };
    match ext {
        None => {
            let bits = u32::from(BITS[selector]);
            let count = COUNT[selector];
            let mut rest = if selector == 7 || selector == 8 {
                word >> 8
            } else {
                word >> 4
            };
            let mask = (1u64 << bits) - 1;
            for _ in 0..count {
                let slot = rest & mask;
                let v = (slot != mask).then_some(u128::from(slot));
                out.push(v);
                *prev = v;
                rest = rest.checked_shr(bits).unwrap_or(0);
            }
        }
        Some((value_bits, count_bits, scale)) => {
            let bits = u32::from(value_bits + count_bits);
            let count = 56 / bits;
            let mask = (1u64 << bits) - 1;
            let count_mask = (1u64 << count_bits) - 1;
            let value_mask = (1u64 << value_bits) - 1;
            let mut rest = word >> 8;
            for _ in 0..count {
                let slot = rest & mask;
                let v = if slot == mask {
                    None
                } else {
                    let zeros = (slot & count_mask) as u32 * u32::from(scale);
                    let value = u128::from((slot >> count_bits) & value_mask);
                    Some(if wide {
                        value.checked_shl(zeros).unwrap_or(0)
                    } else {
                        u128::from((value as u64) << (zeros % 64))
                    })
                };
                out.push(v);
                *prev = v;
                rest >>= bits;
            }
        }
    }
    Ok(())
}

/// Packs `slots` (each `None` or at most [`MAX_SLOT`]) into words: a run
/// where at least 120 slots repeat `prev`, else the plain selector holding
/// the most of the next slots.
pub fn encode_slots(slots: &[Option<u128>], prev: &mut Option<u128>, words: &mut Vec<u64>) {
    let mut i = 0;
    while i < slots.len() {
        let same = slots[i..]
            .iter()
            .take(16 * RLE_UNIT)
            .take_while(|s| **s == *prev)
            .count();
        if same >= RLE_UNIT {
            let units = same / RLE_UNIT;
            words.push(15 | (((units - 1) as u64) << 4));
            i += units * RLE_UNIT;
            continue;
        }
        let left = slots.len() - i;
        for selector in 1..=14usize {
            let count = usize::from(COUNT[selector]);
            if count > left {
                continue;
            }
            let bits = u32::from(BITS[selector]);
            let mask = (1u64 << bits) - 1;
            let fits = slots[i..i + count]
                .iter()
                .all(|s| s.is_none_or(|v| v < u128::from(mask)));
            if !fits {
                continue;
            }
            let start = if selector == 7 || selector == 8 { 8 } else { 4 };
            let mut word = selector as u64;
            for (k, s) in slots[i..i + count].iter().enumerate() {
                let v = s.map_or(mask, |v| v as u64);
                word |= v << (start + k as u32 * bits);
            }
            words.push(word);
            *prev = slots[i + count - 1];
            i += count;
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn roundtrip(slots: &[Option<u128>]) {
        let mut words = Vec::new();
        let mut prev = Some(0);
        encode_slots(slots, &mut prev, &mut words);
        let mut out = Vec::new();
        let mut prev = Some(0);
        for w in words {
            decode_word(w, false, &mut prev, &mut out).unwrap();
        }
        assert_eq!(out, slots);
    }

    #[test]
    fn plain_selectors_and_runs_round_trip() {
        roundtrip(&[Some(0), None, Some(5), Some(MAX_SLOT)]);
        roundtrip(&vec![Some(0); 1000]);
        roundtrip(&vec![Some(2); 2000]);
        roundtrip(&vec![None; 250]);
        let mixed: Vec<_> = (0..500u128)
            .map(|i| (i % 7 != 0).then_some(i * i))
            .collect();
        roundtrip(&mixed);
    }

    #[test]
    fn known_words_decode() {
        // Selector 1: sixty 1-bit slots, all zero but the second (missing).
        let mut out = Vec::new();
        let mut prev = Some(0);
        decode_word(1 | (1 << 5), false, &mut prev, &mut out).unwrap();
        assert_eq!(out.len(), 60);
        assert_eq!(out[0], Some(0));
        assert_eq!(out[1], None);
        // Selector 14: one 60-bit slot.
        out.clear();
        decode_word(14 | (6 << 4), false, &mut prev, &mut out).unwrap();
        assert_eq!(out, vec![Some(6)]);
        // A run of 120 repeats the last slot (6).
        out.clear();
        decode_word(15, false, &mut prev, &mut out).unwrap();
        assert_eq!(out, vec![Some(6); 120]);
        // Selector 7 extension 1: 9 slots of 2 value bits and 4 zero-count bits;
        // value 1 shifted by 3 zeros = 8, then eight missing slots.
        let slot: u64 = (1 << 4) | 3;
        let mut word: u64 = 7 | (1 << 4);
        word |= slot << 8;
        for k in 1..9u64 {
            word |= 0x3F << (8 + 6 * k);
        }
        out.clear();
        decode_word(word, false, &mut prev, &mut out).unwrap();
        assert_eq!(out[0], Some(8));
        assert_eq!(out[1..], [None; 8]);
        assert!(decode_word(0, false, &mut prev, &mut out).is_err());
    }
}
