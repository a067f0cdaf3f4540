//! Just enough unsigned big-integer arithmetic to place a Decimal128 exactly on
//! the binary number line (`c × 10^q` can need ~20 000 bits).
//!
//! Kept private and minimal: multiply by a small factor, shift, compare,
//! subtract, and bit access. Limbs are little-endian `u32`s with no high zero limbs.

use std::cmp::Ordering;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Big(Vec<u32>);

impl Big {
    pub(crate) fn from_u128(mut v: u128) -> Big {
        let mut limbs = Vec::with_capacity(4);
        while v > 0 {
            limbs.push(v as u32);
            v >>= 32;
        }
        Big(limbs)
    }

    pub(crate) fn is_zero(&self) -> bool {
        self.0.is_empty()
    }

    fn trim(&mut self) {
        while self.0.last() == Some(&0) {
            self.0.pop();
        }
    }

    /// Number of significant bits (0 for zero).
    pub(crate) fn bit_len(&self) -> u64 {
        match self.0.last() {
            None => 0,
            Some(&top) => (self.0.len() as u64 - 1) * 32 + u64::from(32 - top.leading_zeros()),
        }
    }

    pub(crate) fn bit(&self, i: u64) -> bool {
        usize::try_from(i / 32)
            .ok()
            .and_then(|limb| self.0.get(limb))
            .is_some_and(|l| (l >> (i % 32)) & 1 == 1)
    }

    /// True when any bit with index below `n` is set.
    pub(crate) fn any_bit_below(&self, n: u64) -> bool {
        let full = usize::try_from(n / 32).unwrap_or(usize::MAX);
        if self.0.iter().take(full).any(|&l| l != 0) {
            return true;
        }
        let rem = n % 32;
        rem != 0
            && self
                .0
                .get(full)
                .is_some_and(|&l| l & ((1u32 << rem) - 1) != 0)
    }

    pub(crate) fn mul_small(&mut self, m: u32) {
        let mut carry = 0u64;
        for l in &mut self.0 {
            let p = u64::from(*l) * u64::from(m) + carry;
            *l = p as u32;
            carry = p >> 32;
        }
        if carry > 0 {
            self.0.push(carry as u32);
        }
        self.trim();
    }

    /// `self *= 5^k`.
    pub(crate) fn mul_pow5(&mut self, mut k: u32) {
        const FIVE_13: u32 = 1_220_703_125;
        while k >= 13 {
            self.mul_small(FIVE_13);
            k -= 13;
        }
        self.mul_small(5u32.pow(k));
    }

    /// `5^k`.
    pub(crate) fn pow5(k: u32) -> Big {
        let mut b = Big::from_u128(1);
        b.mul_pow5(k);
        b
    }

    /// `self << n`.
    pub(crate) fn shl(&self, n: u64) -> Big {
        if self.is_zero() {
            return Big(Vec::new());
        }
        let limbs = usize::try_from(n / 32).unwrap_or(0);
        let bits = (n % 32) as u32;
        let mut out = vec![0u32; limbs];
        out.reserve(self.0.len() + 1);
        if bits == 0 {
            out.extend_from_slice(&self.0);
        } else {
            let mut carry = 0u32;
            for &l in &self.0 {
                out.push((l << bits) | carry);
                carry = l >> (32 - bits);
            }
            out.push(carry);
        }
        let mut b = Big(out);
        b.trim();
        b
    }

    /// `self = 2 * self + bit`.
    pub(crate) fn shl1_or(&mut self, bit: bool) {
        let mut carry = u32::from(bit);
        for l in &mut self.0 {
            let next = *l >> 31;
            *l = (*l << 1) | carry;
            carry = next;
        }
        if carry != 0 {
            self.0.push(carry);
        }
    }

    /// `self -= other`; the caller guarantees `self >= other`.
    pub(crate) fn sub_assign(&mut self, other: &Big) {
        let mut borrow = 0i64;
        for (i, l) in self.0.iter_mut().enumerate() {
            let o = i64::from(other.0.get(i).copied().unwrap_or(0));
            let mut d = i64::from(*l) - o - borrow;
            borrow = 0;
            if d < 0 {
                d += 1 << 32;
                borrow = 1;
            }
            *l = d as u32;
        }
        self.trim();
    }
}

impl PartialOrd for Big {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Big {
    fn cmp(&self, other: &Self) -> Ordering {
        self.0
            .len()
            .cmp(&other.0.len())
            .then_with(|| self.0.iter().rev().cmp(other.0.iter().rev()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn to_u128(b: &Big) -> u128 {
        b.0.iter()
            .rev()
            .fold(0u128, |acc, &l| (acc << 32) | u128::from(l))
    }

    #[test]
    fn arithmetic_matches_u128() {
        let cases: &[u128] = &[
            0,
            1,
            5,
            u32::MAX as u128,
            u64::MAX as u128,
            12345678901234567890123,
        ];
        for &v in cases {
            let b = Big::from_u128(v);
            assert_eq!(to_u128(&b), v);
            assert_eq!(b.bit_len(), u64::from(128 - v.leading_zeros()));
            let mut m = b.clone();
            m.mul_small(7);
            assert_eq!(to_u128(&m), v * 7);
            assert_eq!(to_u128(&b.shl(5)), v << 5);
            let mut s = b.clone();
            s.shl1_or(true);
            assert_eq!(to_u128(&s), (v << 1) | 1);
            let mut d = m.clone();
            d.sub_assign(&b);
            assert_eq!(to_u128(&d), v * 6);
            assert_eq!(b.any_bit_below(3), v & 7 != 0);
            for i in 0..70 {
                assert_eq!(b.bit(i), (v >> i) & 1 == 1);
            }
        }
    }

    #[test]
    fn pow5_and_ordering() {
        assert_eq!(to_u128(&Big::pow5(0)), 1);
        assert_eq!(to_u128(&Big::pow5(27)), 5u128.pow(27));
        assert_eq!(to_u128(&Big::pow5(55)), 5u128.pow(55));
        assert!(Big::pow5(100) > Big::pow5(99));
        assert!(Big::from_u128(1 << 40) > Big::from_u128(3));
        assert_eq!(Big::from_u128(9).cmp(&Big::from_u128(9)), Ordering::Equal);
        assert_eq!(Big::pow5(1).shl(100).bit_len(), 103);
    }
}
