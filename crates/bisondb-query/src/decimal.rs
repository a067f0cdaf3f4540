//! IEEE 754-2008 decimal128 arithmetic for aggregation expressions,
//! accumulators and update operators, with mongod's semantics.
//!
//! `bson::Decimal128` only stores the 16 BID-encoded bytes, so this module
//! decodes them into [`Dec`] (sign, coefficient, exponent, or a special value),
//! computes the exact result with big integers (`num_bigint`) and rounds it
//! once to 34 significant digits, half to even, within the exponent range
//! -6176..=6111, as the Intel library behind mongod does. Results keep their
//! exponent (they are not normalised), so `1.0 + 1.00 = 2.00`; encoding back
//! always produces the canonical bytes (coefficient below 10^34, the
//! "small coefficient" BID form, mongod's NaN/Infinity patterns).

use bson::{Bson, Decimal128};
use num_bigint::BigUint;
use std::cmp::Ordering;

mod transcendental;
mod trig;
pub use trig::Trig;

/// Significant digits of a decimal128 coefficient.
const DIGITS: u64 = 34;
/// Smallest and largest exponent of the coefficient (`c × 10^exp`).
const EMIN: i64 = -6176;
const EMAX: i64 = 6111;
const BIAS: i64 = 6176;
/// 10^34: every canonical coefficient is below it.
const TEN_34: u128 = 10_000_000_000_000_000_000_000_000_000_000_000;

/// A decoded Decimal128.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dec {
    /// `(-1)^neg × coef × 10^exp`, `coef < 10^34`, `exp` in EMIN..=EMAX.
    Finite {
        neg: bool,
        coef: u128,
        exp: i32,
    },
    Inf(bool),
    NaN,
}

/// How to round a result that has more digits than it may keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rounding {
    HalfEven,
    TowardZero,
    Floor,
    Ceiling,
}

fn pow10(n: u64) -> BigUint {
    BigUint::from(10u32).pow(u32::try_from(n).unwrap_or(u32::MAX))
}

/// Number of decimal digits of `c` (1 for zero).
fn digits(c: &BigUint) -> u64 {
    if let Ok(v) = u128::try_from(c) {
        return v.checked_ilog10().map_or(1, |l| u64::from(l) + 1);
    }
    // Estimate from the bit length (the true count is the estimate or one
    // more), then settle it by comparison; the estimate is lowered by one
    // first so float error in it can never make it too large.
    let bits = c.bits();
    let est = (((bits - 1) as f64 * std::f64::consts::LOG10_2) as u64).max(1);
    let mut n = est;
    while *c >= pow10(n) {
        n += 1;
    }
    n
}

/// Whether the dropped part `r` of a division by `10^n` (or a general
/// divisor `d`) rounds the kept quotient `q` away from zero.
fn round_up(mode: Rounding, neg: bool, q_odd: bool, r: &BigUint, d: &BigUint) -> bool {
    if r.bits() == 0 {
        return false;
    }
    match mode {
        Rounding::TowardZero => false,
        Rounding::Floor => neg,
        Rounding::Ceiling => !neg,
        Rounding::HalfEven => {
            let twice: BigUint = r << 1u8;
            match twice.cmp(d) {
                Ordering::Greater => true,
                Ordering::Equal => q_odd,
                Ordering::Less => false,
            }
        }
    }
}

/// Divides `c` by `10^n` and rounds the quotient with `mode`.
fn shift_right(c: &BigUint, n: u64, neg: bool, mode: Rounding) -> BigUint {
    if n == 0 {
        return c.clone();
    }
    let nd = digits(c);
    if n > nd {
        // The whole value lies below half a unit of the kept place: only the
        // directed modes can turn it into a one.
        let nonzero = c.bits() != 0;
        let up = nonzero
            && match mode {
                Rounding::Floor => neg,
                Rounding::Ceiling => !neg,
                _ => false,
            };
        return BigUint::from(u8::from(up));
    }
    let d = pow10(n);
    let q = c / &d;
    let r = c % &d;
    if round_up(mode, neg, q.bit(0), &r, &d) {
        q + 1u8
    } else {
        q
    }
}

impl Dec {
    pub const ZERO: Dec = Dec::Finite {
        neg: false,
        coef: 0,
        exp: 0,
    };

    /// Decodes the BID bytes; non-canonical coefficients read as zero, as
    /// the standard requires.
    pub fn from_bson(d: Decimal128) -> Dec {
        let v = u128::from_le_bytes(d.bytes());
        let neg = v >> 127 == 1;
        let comb = (v >> 122) & 0x1f;
        if comb == 0x1f {
            return Dec::NaN;
        }
        if comb == 0x1e {
            return Dec::Inf(neg);
        }
        let (exp_bits, coef) = if (v >> 125) & 0b11 == 0b11 {
            // "Large coefficient" form: its coefficient is at least 2^113 >
            // 10^34, so never canonical: the value is a zero.
            ((v >> 111) & 0x3fff, 0)
        } else {
            let c = v & ((1u128 << 113) - 1);
            ((v >> 113) & 0x3fff, if c >= TEN_34 { 0 } else { c })
        };
        Dec::Finite {
            neg,
            coef,
            exp: (exp_bits as i64 - BIAS) as i32,
        }
    }

    /// Encodes canonically (mongod's patterns for NaN and the infinities).
    pub fn to_bson(self) -> Decimal128 {
        let v: u128 = match self {
            Dec::NaN => 0x7c00u128 << 112,
            Dec::Inf(neg) => (0x7800u128 << 112) | (u128::from(neg) << 127),
            Dec::Finite { neg, coef, exp } => {
                let e = (i64::from(exp) + BIAS).clamp(0, 0x2fff) as u128;
                (u128::from(neg) << 127) | (e << 113) | coef
            }
        };
        Decimal128::from_bytes(v.to_le_bytes())
    }

    pub fn from_i64(i: i64) -> Dec {
        Dec::Finite {
            neg: i < 0,
            coef: u128::from(i.unsigned_abs()),
            exp: 0,
        }
    }

    /// mongod's default double → decimal conversion (`Decimal128(double)`,
    /// used by arithmetic, `$toDecimal` and `$convert`): the double rounded to
    /// 15 significant digits, trailing zeros kept (`2.5` → `2.50000000000000`).
    pub fn from_f64(d: f64) -> Dec {
        Self::from_f64_digits(d, 15)
    }

    /// The double's exact binary value rounded to 34 significant digits, with
    /// trailing zeros dropped when it is exact (mongod's `kRoundTo34Digits`,
    /// used when a `$sum` of doubles meets a decimal).
    pub fn from_f64_34(d: f64) -> Dec {
        match Self::from_f64_digits(d, 34) {
            Dec::Finite { neg, coef, exp } => {
                let (mut c, mut e) = (coef, exp);
                while c != 0 && c % 10 == 0 && e < 0 {
                    c /= 10;
                    e += 1;
                }
                Dec::Finite {
                    neg,
                    coef: c,
                    exp: e,
                }
            }
            other => other,
        }
    }

    fn from_f64_digits(d: f64, n: usize) -> Dec {
        if d.is_nan() {
            return Dec::NaN;
        }
        if d.is_infinite() {
            return Dec::Inf(d < 0.0);
        }
        if d == 0.0 {
            return Dec::Finite {
                neg: d.is_sign_negative(),
                coef: 0,
                exp: 0,
            };
        }
        // Rust formats the exact binary value correctly rounded (ties to
        // even), which is the conversion mongod's library performs.
        let s = format!("{:.*e}", n - 1, d);
        Dec::parse(&s).unwrap_or(Dec::NaN)
    }

    /// Parses a decimal string the way `$convert` does ("1.50", "-1e3",
    /// "Infinity", "NaN"), rounding to 34 digits. `None` when malformed.
    pub fn parse(s: &str) -> Option<Dec> {
        let (neg, body) = match s.as_bytes().first() {
            Some(b'-') => (true, &s[1..]),
            Some(b'+') => (false, &s[1..]),
            _ => (false, s),
        };
        if !body.is_ascii() {
            return None;
        }
        let lower = body.to_ascii_lowercase();
        match lower.as_str() {
            "inf" | "infinity" => return Some(Dec::Inf(neg)),
            "nan" => return Some(Dec::NaN),
            _ => {}
        }
        let (mant, exp_part) = match lower.split_once('e') {
            Some((m, e)) => (m, Some(e)),
            None => (lower.as_str(), None),
        };
        let mut exp: i64 = match exp_part {
            Some(e) => {
                let digits = e.strip_prefix(['+', '-']).unwrap_or(e);
                if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
                    return None;
                }
                // Far beyond any representable value; saturate rather than
                // overflow (finish() then rounds or clamps).
                e.parse::<i64>()
                    .unwrap_or(if e.starts_with('-') {
                        -100_000
                    } else {
                        100_000
                    })
                    .clamp(-100_000, 100_000)
            }
            None => 0,
        };
        let (int, frac) = mant.split_once('.').unwrap_or((mant, ""));
        if int.is_empty() && frac.is_empty() {
            return None;
        }
        if !int.bytes().chain(frac.bytes()).all(|b| b.is_ascii_digit()) {
            return None;
        }
        exp -= frac.len() as i64;
        let all = format!("{int}{frac}");
        let mut trimmed = all.trim_start_matches('0');
        // Digits past the 40th only matter as "something non-zero follows"
        // for rounding: keep 40 and a sticky 1, so a huge string costs no
        // big-number work.
        let sticky;
        if trimmed.len() > 40 {
            let (head, tail) = trimmed.split_at(40);
            exp += tail.len() as i64 - 1;
            sticky = format!("{head}{}", u8::from(tail.bytes().any(|b| b != b'0')));
            trimmed = &sticky;
        }
        let coef = if trimmed.is_empty() {
            BigUint::default()
        } else {
            BigUint::parse_bytes(trimmed.as_bytes(), 10)?
        };
        Some(finish(neg, coef, exp, Rounding::HalfEven))
    }

    /// Any BSON number as a decimal, the way mongod's arithmetic promotes
    /// an operand when another one is a decimal (`coerceToDecimal`): ints and
    /// longs exactly, doubles to 15 digits. `None` for non-numbers.
    pub fn from_number(v: &Bson) -> Option<Dec> {
        match v {
            Bson::Int32(i) => Some(Dec::from_i64(i64::from(*i))),
            Bson::Int64(i) => Some(Dec::from_i64(*i)),
            Bson::Double(d) => Some(Dec::from_f64(*d)),
            Bson::Decimal128(d) => Some(Dec::from_bson(*d)),
            _ => None,
        }
    }

    /// An exact 128-bit integer (a sum of many longs).
    pub fn from_i128(i: i128) -> Dec {
        finish(
            i < 0,
            BigUint::from(i.unsigned_abs()),
            0,
            Rounding::HalfEven,
        )
    }

    /// The value as BSON.
    pub fn into_bson(self) -> Bson {
        Bson::Decimal128(self.to_bson())
    }

    pub fn is_zero(self) -> bool {
        matches!(self, Dec::Finite { coef: 0, .. })
    }

    pub fn is_nan(self) -> bool {
        self == Dec::NaN
    }

    pub fn negated(self) -> Dec {
        match self {
            Dec::Finite { neg, coef, exp } => Dec::Finite {
                neg: !neg,
                coef,
                exp,
            },
            Dec::Inf(n) => Dec::Inf(!n),
            Dec::NaN => Dec::NaN,
        }
    }

    pub fn abs(self) -> Dec {
        match self {
            Dec::Finite { coef, exp, .. } => Dec::Finite {
                neg: false,
                coef,
                exp,
            },
            Dec::Inf(_) => Dec::Inf(false),
            Dec::NaN => Dec::NaN,
        }
    }

    pub fn plus(self, other: Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf(a), Dec::Inf(b)) => {
                if a == b {
                    Dec::Inf(a)
                } else {
                    Dec::NaN
                }
            }
            (Dec::Inf(a), _) | (_, Dec::Inf(a)) => Dec::Inf(a),
            (
                Dec::Finite {
                    neg: n1,
                    coef: c1,
                    exp: e1,
                },
                Dec::Finite {
                    neg: n2,
                    coef: c2,
                    exp: e2,
                },
            ) => {
                // The exact sum has the smaller exponent (the ideal exponent
                // of IEEE addition); finish() rounds it once.
                let e = e1.min(e2);
                if let Some(r) = add_small(n1, c1, e1, n2, c2, e2, e) {
                    return r;
                }
                let a = BigUint::from(c1) * pow10((e1 - e) as u64);
                let b = BigUint::from(c2) * pow10((e2 - e) as u64);
                let (neg, c) = if n1 == n2 {
                    (n1, a + b)
                } else {
                    match a.cmp(&b) {
                        Ordering::Greater => (n1, a - b),
                        Ordering::Less => (n2, b - a),
                        // x + (-x) is +0 when rounding to nearest.
                        Ordering::Equal => (false, BigUint::default()),
                    }
                };
                finish(neg, c, i64::from(e), Rounding::HalfEven)
            }
        }
    }

    pub fn minus(self, other: Dec) -> Dec {
        self.plus(other.negated())
    }

    pub fn times(self, other: Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) => Dec::NaN,
            (Dec::Inf(a), Dec::Inf(b)) => Dec::Inf(a != b),
            (Dec::Inf(a), f) | (f, Dec::Inf(a)) => {
                if f.is_zero() {
                    Dec::NaN
                } else {
                    Dec::Inf(a != f.sign())
                }
            }
            (
                Dec::Finite {
                    neg: n1,
                    coef: c1,
                    exp: e1,
                },
                Dec::Finite {
                    neg: n2,
                    coef: c2,
                    exp: e2,
                },
            ) => finish(
                n1 != n2,
                BigUint::from(c1) * BigUint::from(c2),
                i64::from(e1) + i64::from(e2),
                Rounding::HalfEven,
            ),
        }
    }

    fn sign(self) -> bool {
        match self {
            Dec::Finite { neg, .. } | Dec::Inf(neg) => neg,
            Dec::NaN => false,
        }
    }

    /// IEEE division: exact quotients take the exponent closest to
    /// `e1 - e2`; others are rounded to 34 digits. Division by zero gives
    /// an infinity (callers report mongod's error before getting here).
    pub fn quotient(self, other: Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) | (Dec::Inf(_), Dec::Inf(_)) => Dec::NaN,
            (Dec::Inf(a), b) => Dec::Inf(a != b.sign()),
            (a, Dec::Inf(b)) => Dec::Finite {
                neg: a.sign() != b,
                coef: 0,
                exp: EMIN as i32,
            },
            (
                Dec::Finite {
                    neg: n1,
                    coef: c1,
                    exp: e1,
                },
                Dec::Finite {
                    neg: n2,
                    coef: c2,
                    exp: e2,
                },
            ) => {
                let neg = n1 != n2;
                let ideal = i64::from(e1) - i64::from(e2);
                if c2 == 0 {
                    return if c1 == 0 { Dec::NaN } else { Dec::Inf(neg) };
                }
                if c1 == 0 {
                    return finish(neg, BigUint::default(), ideal, Rounding::HalfEven);
                }
                let (a, b) = (BigUint::from(c1), BigUint::from(c2));
                // Scale the dividend so the quotient has at least 35 digits:
                // enough to round to 34 with the remainder as sticky digit.
                let k = (DIGITS + 1 + digits(&b)).saturating_sub(digits(&a));
                let scaled = a * pow10(k);
                let mut q = &scaled / &b;
                let r = &scaled % &b;
                let mut exp = ideal - k as i64;
                if r.bits() == 0 {
                    // Exact: drop trailing zeros back towards the ideal exponent.
                    let ten = BigUint::from(10u8);
                    while exp < ideal && (&q % &ten).bits() == 0 {
                        q /= &ten;
                        exp += 1;
                    }
                } else {
                    // Append a non-zero digit: the quotient is not a tie.
                    q = q * 10u8 + 1u8;
                    exp -= 1;
                }
                finish(neg, q, exp, Rounding::HalfEven)
            }
        }
    }

    /// IEEE square root, correctly rounded: exact roots take the exponent
    /// nearest `floor(exp / 2)` (`sqrt(4.00)` is `2.0`); negative values
    /// give NaN (callers report mongod's error first).
    pub fn sqrt(self) -> Dec {
        match self {
            Dec::NaN | Dec::Inf(true) => Dec::NaN,
            Dec::Inf(false) => Dec::Inf(false),
            Dec::Finite { neg, coef: 0, exp } => Dec::Finite {
                neg,
                coef: 0,
                exp: i64::from(exp).div_euclid(2) as i32,
            },
            Dec::Finite { neg: true, .. } => Dec::NaN,
            Dec::Finite { coef, exp, .. } => {
                let ideal = i64::from(exp).div_euclid(2);
                // An even exponent, and at least 70 digits under the root so
                // the root has 35: 34 to keep and one to round with.
                let mut c = BigUint::from(coef);
                let mut e = i64::from(exp);
                if e.rem_euclid(2) == 1 {
                    c *= 10u8;
                    e -= 1;
                }
                let k = 70u64.saturating_sub(digits(&c)).div_ceil(2);
                c *= pow10(2 * k);
                e -= 2 * k as i64;
                let mut root = c.sqrt();
                let exact = &root * &root == c;
                let mut re = e / 2;
                if exact {
                    let ten = BigUint::from(10u8);
                    while re < ideal && (&root % &ten).bits() == 0 {
                        root /= &ten;
                        re += 1;
                    }
                } else {
                    // Not exact: a trailing 1 keeps the rounding off a tie.
                    root = root * 10u8 + 1u8;
                    re -= 1;
                }
                finish(false, root, re, Rounding::HalfEven)
            }
        }
    }

    /// `fmod`: `a - trunc(a / b) × b`, exact, with the dividend's sign.
    pub fn fmod(self, other: Dec) -> Dec {
        match (self, other) {
            (Dec::NaN, _) | (_, Dec::NaN) | (Dec::Inf(_), _) => Dec::NaN,
            (a, Dec::Inf(_)) => a,
            (
                Dec::Finite {
                    neg: n1,
                    coef: c1,
                    exp: e1,
                },
                Dec::Finite {
                    coef: c2, exp: e2, ..
                },
            ) => {
                if c2 == 0 {
                    return Dec::NaN;
                }
                let e = e1.min(e2);
                let a = BigUint::from(c1) * pow10((e1 - e) as u64);
                let b = BigUint::from(c2) * pow10((e2 - e) as u64);
                finish(n1, a % b, i64::from(e), Rounding::HalfEven)
            }
        }
    }

    /// IEEE `quantize`: the value with exponent `exp`, rounded with `mode`;
    /// NaN when it would need more than 34 digits.
    pub fn quantize(self, exp: i64, mode: Rounding) -> Dec {
        let Dec::Finite { neg, coef, exp: e } = self else {
            return self;
        };
        let e = i64::from(e);
        let c = BigUint::from(coef);
        let out = match e.cmp(&exp) {
            Ordering::Less => shift_right(&c, (exp - e) as u64, neg, mode),
            Ordering::Equal => c,
            Ordering::Greater => {
                let n = (e - exp) as u64;
                if n > DIGITS {
                    if coef == 0 {
                        BigUint::default()
                    } else {
                        return Dec::NaN;
                    }
                } else {
                    c * pow10(n)
                }
            }
        };
        if !(EMIN..=EMAX).contains(&exp) {
            return Dec::NaN;
        }
        match u128::try_from(&out) {
            Ok(v) if v < TEN_34 => Dec::Finite {
                neg,
                coef: v,
                exp: exp as i32,
            },
            _ => Dec::NaN,
        }
    }

    /// `$round`/`$trunc` to `place` decimal places: the value quantized to
    /// exponent `-place`; when that needs more than 34 digits, mongod keeps
    /// all 34 (`$trunc: [1.298, 100]` is `1.298000000000000000000000000000000`).
    pub fn round_to_place(self, place: i64, mode: Rounding) -> Dec {
        let q = self.quantize(-place, mode);
        match self {
            Dec::Finite { coef, exp, .. } if q.is_nan() => {
                let nd = coef.checked_ilog10().map_or(1, |l| i64::from(l) + 1);
                self.quantize(i64::from(exp) + nd - DIGITS as i64, mode)
            }
            _ => q,
        }
    }

    /// Rounds to an integer with `mode` (`$ceil`, `$floor`): values already
    /// integral (exponent ≥ 0) stay as they are.
    pub fn to_integral(self, mode: Rounding) -> Dec {
        match self {
            Dec::Finite { exp, .. } if exp < 0 => self.quantize(0, mode),
            _ => self,
        }
    }

    /// The integer part (rounded with `mode`) when it fits an `i64`.
    pub fn to_i64(self, mode: Rounding) -> Option<i64> {
        let Dec::Finite { neg, coef, exp } = self.to_integral(mode) else {
            return None;
        };
        let mut m = coef;
        for _ in 0..exp.max(0) {
            m = m.checked_mul(10)?;
            if m > u128::from(u64::MAX) {
                return None;
            }
        }
        let m = i128::try_from(m).ok()?;
        i64::try_from(if neg { -m } else { m }).ok()
    }

    /// The nearest double (correctly rounded, through the decimal string).
    pub fn to_f64(self) -> f64 {
        match self {
            Dec::NaN => f64::NAN,
            Dec::Inf(neg) => {
                if neg {
                    f64::NEG_INFINITY
                } else {
                    f64::INFINITY
                }
            }
            Dec::Finite { neg, coef, exp } => {
                let v = format!("{coef}e{exp}").parse::<f64>().unwrap_or(f64::NAN);
                if neg {
                    -v
                } else {
                    v
                }
            }
        }
    }

    /// Numeric comparison (NaN sorts first, as in BSON order); used where
    /// only a sign test is needed.
    pub fn cmp_zero(self) -> Option<Ordering> {
        match self {
            Dec::NaN => None,
            Dec::Inf(neg) => Some(if neg {
                Ordering::Less
            } else {
                Ordering::Greater
            }),
            Dec::Finite { coef: 0, .. } => Some(Ordering::Equal),
            Dec::Finite { neg, .. } => Some(if neg {
                Ordering::Less
            } else {
                Ordering::Greater
            }),
        }
    }
}

/// The common case of [`Dec::plus`] without big integers: both coefficients
/// aligned to exponent `e` fit a `u128` and the exact result needs no
/// rounding. `None` sends the caller to the general path.
fn add_small(n1: bool, c1: u128, e1: i32, n2: bool, c2: u128, e2: i32, e: i32) -> Option<Dec> {
    let scale = |c: u128, by: i32| {
        10u128
            .checked_pow(u32::try_from(by).ok()?)
            .and_then(|p| c.checked_mul(p))
    };
    let (a, b) = (scale(c1, e1 - e)?, scale(c2, e2 - e)?);
    let (neg, c) = if n1 == n2 {
        (n1, a.checked_add(b)?)
    } else if a >= b {
        // x + (-x) is +0 when rounding to nearest.
        (n1 && a != b, a - b)
    } else {
        (n2, b - a)
    };
    (c < TEN_34).then_some(Dec::Finite {
        neg,
        coef: c,
        exp: e,
    })
}

/// Rounds the exact value `(-1)^neg × c × 10^exp` into a decimal128: to 34
/// digits with `mode`, up to the smallest exponent (gradual underflow), and
/// overflowing to infinity past the largest one (after trying to pad the
/// coefficient with zeros, which IEEE calls clamping).
fn finish(neg: bool, c: BigUint, exp: i64, mode: Rounding) -> Dec {
    let nd = digits(&c);
    let mut drop = nd.saturating_sub(DIGITS);
    if exp + (drop as i64) < EMIN {
        drop = (EMIN - exp) as u64;
    }
    let (mut c, mut exp) = if drop > 0 {
        (shift_right(&c, drop, neg, mode), exp + drop as i64)
    } else {
        (c, exp)
    };
    if digits(&c) > DIGITS {
        // Rounding carried into a 35th digit (999...9 → 1000...0).
        c /= 10u8;
        exp += 1;
    }
    if c.bits() == 0 {
        return Dec::Finite {
            neg,
            coef: 0,
            exp: exp.clamp(EMIN, EMAX) as i32,
        };
    }
    if exp > EMAX {
        let pad = (exp - EMAX) as u64;
        if digits(&c) + pad > DIGITS {
            return Dec::Inf(neg);
        }
        c *= pow10(pad);
        exp = EMAX;
    }
    match u128::try_from(&c) {
        Ok(coef) => Dec::Finite {
            neg,
            coef,
            exp: exp as i32,
        },
        Err(_) => Dec::NaN,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    /// A decimal from its string form (the tests of `transcendental` and
    /// `trig` use it too).
    pub(super) fn d(s: &str) -> Dec {
        Dec::from_bson(Decimal128::from_str(s).unwrap())
    }

    /// A decimal's string form, as mongod prints it.
    pub(super) fn s(x: Dec) -> String {
        x.to_bson().to_string()
    }

    #[test]
    fn arithmetic_table() {
        let cases: &[(&str, &str, &str, &str)] = &[
            // op, a, b, result
            ("add", "1.0", "1.00", "2.00"),
            ("add", "1", "-1", "0"),
            ("add", "-0", "-0", "-0"),
            ("add", "-0", "0", "0"),
            ("add", "1.5", "-1.50", "0.00"),
            ("add", "1E+2", "1", "101"),
            ("add", "Infinity", "-Infinity", "NaN"),
            ("add", "Infinity", "1", "Infinity"),
            ("add", "NaN", "1", "NaN"),
            // 35 digits round half to even.
            (
                "add",
                "9999999999999999999999999999999999",
                "1",
                "1.000000000000000000000000000000000E+34",
            ),
            (
                "add",
                "1000000000000000000000000000000000",
                "0.5",
                "1000000000000000000000000000000000",
            ),
            (
                "add",
                "1000000000000000000000000000000001",
                "0.5",
                "1000000000000000000000000000000002",
            ),
            (
                "add",
                "9.999999999999999999999999999999999E+6144",
                "1E+6144",
                "Infinity",
            ),
            ("sub", "3.30", "1.1", "2.20"),
            ("sub", "1", "1", "0"),
            ("mul", "1.5", "2", "3.0"),
            ("mul", "-0", "5", "-0"),
            ("mul", "Infinity", "0", "NaN"),
            ("mul", "-Infinity", "2", "-Infinity"),
            ("mul", "1E+6111", "10", "1.0E+6112"),
            ("mul", "9E+6144", "10", "Infinity"),
            ("mul", "1E-6176", "0.1", "0E-6176"),
            ("mul", "1E-6176", "0.5", "0E-6176"),
            ("mul", "3E-6176", "0.5", "2E-6176"),
            ("div", "1", "3", "0.3333333333333333333333333333333333"),
            ("div", "2", "3", "0.6666666666666666666666666666666667"),
            ("div", "6", "2", "3"),
            ("div", "1", "4", "0.25"),
            ("div", "1.00", "2", "0.50"),
            ("div", "100", "1E+2", "1.00"),
            ("div", "1E+2", "1E+2", "1"),
            ("div", "1E+3", "1", "1E+3"),
            ("div", "1", "Infinity", "0E-6176"),
            ("div", "Infinity", "-2", "-Infinity"),
            ("div", "0", "5", "0"),
            ("div", "0.00", "5", "0.00"),
            ("sqrt", "4", "", "2"),
            ("sqrt", "4.00", "", "2.0"),
            ("sqrt", "0.04", "", "0.2"),
            ("sqrt", "1E+3", "", "31.62277660168379331998893544432719"),
            ("sqrt", "2", "", "1.414213562373095048801688724209698"),
            ("sqrt", "1E-6176", "", "1E-3088"),
            (
                "sqrt",
                "1E-6175",
                "",
                "3.162277660168379331998893544432719E-3088",
            ),
            ("sqrt", "-0.00", "", "-0.0"),
            ("sqrt", "-1", "", "NaN"),
            ("sqrt", "Infinity", "", "Infinity"),
            ("rem", "10", "3", "1"),
            ("rem", "-10", "3", "-1"),
            ("rem", "10.5", "3", "1.5"),
            ("rem", "6", "3", "0"),
            ("rem", "1", "Infinity", "1"),
        ];
        for (op, a, b, want) in cases {
            let (a2, b2) = (d(a), if b.is_empty() { Dec::NaN } else { d(b) });
            let got = match *op {
                "add" => a2.plus(b2),
                "sub" => a2.minus(b2),
                "mul" => a2.times(b2),
                "div" => a2.quotient(b2),
                "sqrt" => a2.sqrt(),
                _ => a2.fmod(b2),
            };
            assert_eq!(s(got), *want, "{op} {a} {b}");
        }
    }

    #[test]
    fn conversions_from_numbers() {
        assert_eq!(s(Dec::from_f64(2.5)), "2.50000000000000");
        assert_eq!(s(Dec::from_f64(0.1)), "0.100000000000000");
        assert_eq!(s(Dec::from_f64(0.1 / 3.0)), "0.0333333333333333");
        assert_eq!(s(Dec::from_f64(1234567890.12345)), "1234567890.12345");
        assert_eq!(s(Dec::from_f64(2f64.powi(1000))), "1.07150860718627E+301");
        assert_eq!(s(Dec::from_f64(-0.0)), "-0");
        assert_eq!(s(Dec::from_f64(f64::NAN)), "NaN");
        assert_eq!(s(Dec::from_f64(f64::NEG_INFINITY)), "-Infinity");
        assert_eq!(s(Dec::from_f64_34(2.5)), "2.5");
        assert_eq!(
            s(Dec::from_f64_34(0.1)),
            "0.1000000000000000055511151231257827"
        );
        assert_eq!(s(Dec::from_i64(i64::MIN)), "-9223372036854775808");
        assert_eq!(s(Dec::from_i64(7)), "7");
    }

    #[test]
    fn parse_and_to_numbers() {
        assert_eq!(Dec::parse("1.50").map(s).as_deref(), Some("1.50"));
        assert_eq!(Dec::parse("-1e3").map(s).as_deref(), Some("-1E+3"));
        assert_eq!(Dec::parse(".5").map(s).as_deref(), Some("0.5"));
        assert_eq!(Dec::parse("-Infinity").map(s).as_deref(), Some("-Infinity"));
        assert_eq!(Dec::parse("nan").map(s).as_deref(), Some("NaN"));
        assert_eq!(
            Dec::parse("1234567890123456789012345678901234.5")
                .map(s)
                .as_deref(),
            Some("1234567890123456789012345678901234")
        );
        assert_eq!(
            Dec::parse("1e99999999999").map(s).as_deref(),
            Some("Infinity")
        );
        let long = format!("1{}5{}", "0".repeat(33), "0".repeat(60));
        assert_eq!(
            Dec::parse(&long).map(s).as_deref(),
            Some("1.000000000000000000000000000000000E+94")
        );
        let long = format!("1{}5{}1", "0".repeat(33), "0".repeat(60));
        assert_eq!(
            Dec::parse(&long).map(s).as_deref(),
            Some("1.000000000000000000000000000000001E+95")
        );
        let long = format!("0.{}", "3".repeat(100_000));
        assert_eq!(
            Dec::parse(&long).map(s).as_deref(),
            Some("0.3333333333333333333333333333333333")
        );
        for bad in ["", "abc", "1.2.3", "1e", "--1", ".", "1e+", " 1", "1é"] {
            assert_eq!(Dec::parse(bad), None, "{bad:?}");
        }
        assert_eq!(d("2.9").to_i64(Rounding::TowardZero), Some(2));
        assert_eq!(d("-2.9").to_i64(Rounding::TowardZero), Some(-2));
        assert_eq!(d("1E+3").to_i64(Rounding::TowardZero), Some(1000));
        assert_eq!(d("9223372036854775808").to_i64(Rounding::TowardZero), None);
        assert_eq!(
            d("-9223372036854775808").to_i64(Rounding::TowardZero),
            Some(i64::MIN)
        );
        assert_eq!(d("NaN").to_i64(Rounding::TowardZero), None);
        assert_eq!(d("1E+6000").to_i64(Rounding::TowardZero), None);
        assert_eq!(d("0.1").to_f64(), 0.1);
        assert_eq!(d("-1E+400").to_f64(), f64::NEG_INFINITY);
    }

    #[test]
    fn rounding_to_a_place() {
        let cases: &[(&str, i64, Rounding, &str)] = &[
            ("19.25", -1, Rounding::HalfEven, "19.2"),
            ("19.35", -1, Rounding::HalfEven, "19.4"),
            ("19.25", 1, Rounding::HalfEven, "2E+1"),
            ("19.25", 1, Rounding::TowardZero, "1E+1"),
            ("19.25", 0, Rounding::TowardZero, "19"),
            ("-2.5", 0, Rounding::HalfEven, "-2"),
            ("1", -2, Rounding::HalfEven, "1.00"),
            ("NaN", 0, Rounding::HalfEven, "NaN"),
        ];
        for (v, e, m, want) in cases {
            assert_eq!(s(d(v).quantize(*e, *m)), *want, "{v} {e}");
        }
        assert_eq!(s(d("1.5").to_integral(Rounding::Ceiling)), "2");
        assert_eq!(s(d("-1.5").to_integral(Rounding::Floor)), "-2");
        assert_eq!(s(d("-0.5").to_integral(Rounding::Ceiling)), "-0");
        assert_eq!(s(d("1E+2").to_integral(Rounding::Floor)), "1E+2");
    }

    /// The texts of the BSON corpus's decimal128 files, from `$BISONDB_SPECS`
    /// or `../shared/specs` beside the project (none when it is absent: the
    /// corpus is never committed, and the tests must pass without it).
    pub(super) fn corpus_decimal_files() -> Vec<(String, String)> {
        let root = std::env::var_os("BISONDB_SPECS")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| {
                std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/specs")
            });
        let Ok(entries) = std::fs::read_dir(root.join("bson-corpus")) else {
            return Vec::new();
        };
        entries
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with("decimal128"))
            .map(|e| {
                let name = e.file_name().to_string_lossy().into_owned();
                (name, std::fs::read_to_string(e.path()).unwrap())
            })
            .collect()
    }

    /// Every canonical decimal128 of the BSON corpus decodes and re-encodes
    /// to the same bytes (skipped when the corpus is not there).
    #[test]
    fn bson_corpus_round_trips() {
        let files = super::tests::corpus_decimal_files();
        if files.is_empty() {
            return; // no corpus here: nothing to check against
        }
        let mut checked = 0;
        for (name, text) in files {
            // Each valid case has a canonical_bson hex string of the document
            // {d: <decimal>}: 4 length bytes, 0x13, "d\0", 16 value bytes, 0.
            for part in text.split("\"canonical_bson\"").skip(1) {
                let hex: String = part
                    .chars()
                    .skip_while(|c| *c != '"')
                    .skip(1)
                    .take_while(|c| *c != '"')
                    .collect();
                if hex.len() != 48 {
                    continue;
                }
                let bytes: Vec<u8> = (0..24)
                    .map(|i| u8::from_str_radix(&hex[2 * i..2 * i + 2], 16).unwrap())
                    .collect();
                let mut v = [0u8; 16];
                v.copy_from_slice(&bytes[7..23]);
                let dec = Dec::from_bson(Decimal128::from_bytes(v));
                // Only canonical finite values re-encode identically (NaN
                // payloads and non-canonical zeros are normalised).
                // Zeros may come in the non-canonical large-coefficient form:
                // they re-encode to the small form, same value.
                if dec != Dec::NaN && !dec.is_zero() {
                    assert_eq!(dec.to_bson().bytes(), v, "{name}: {hex}");
                    checked += 1;
                }
                assert_eq!(Dec::from_bson(dec.to_bson()), dec, "{name}: {hex}");
                // Parsing our own string form gives the value back.
                let text = dec.to_bson().to_string();
                let back = Dec::parse(&text).unwrap();
                if dec != Dec::NaN {
                    assert_eq!(back, dec, "{name}: {text}");
                }
            }
        }
        assert!(checked > 0);
    }
}

/// The BSON corpus's valid decimal strings (canonical and degenerate forms:
/// clamping, rounding of zeros, exponents far out of range) parse to its
/// canonical bytes (skipped when the corpus is not there).
#[cfg(test)]
mod corpus_strings {
    use super::*;

    fn field<'a>(obj: &'a str, key: &str) -> Option<&'a str> {
        let at = obj.find(&format!("\"{key}\""))?;
        let rest = &obj[at + key.len() + 2..];
        let start = rest.find('"')? + 1;
        let end = start + rest[start..].find(['"', '\\'])?;
        Some(&rest[start..end])
    }

    fn number_decimal(obj: &str, key: &str) -> Option<String> {
        let at = obj.find(&format!("\"{key}\""))?;
        let rest = &obj[at..];
        let marker = "$numberDecimal\\\" : \\\"";
        let start = rest.find(marker)? + marker.len();
        let end = start + rest[start..].find('\\')?;
        Some(rest[start..end].to_string())
    }

    #[test]
    fn valid_strings_parse_to_canonical_bytes() {
        let files = super::tests::corpus_decimal_files();
        if files.is_empty() {
            return; // no corpus here: nothing to check against
        }
        let mut checked = 0;
        for (name, text) in files {
            let valid = match (text.find("\"valid\""), text.find("\"parseErrors\"")) {
                (Some(v), Some(p)) if v < p => &text[v..p],
                (Some(v), _) => &text[v..],
                _ => continue,
            };
            for obj in valid.split("\"description\"").skip(1) {
                let Some(hex) = field(obj, "canonical_bson").filter(|h| h.len() == 48) else {
                    continue;
                };
                let mut v = [0u8; 16];
                for (i, b) in v.iter_mut().enumerate() {
                    let at = 14 + 2 * i;
                    *b = u8::from_str_radix(&hex[at..at + 2], 16).unwrap();
                }
                let want = Dec::from_bson(Decimal128::from_bytes(v));
                if want == Dec::NaN || want.to_bson().bytes() != v {
                    continue;
                }
                for key in ["canonical_extjson", "degenerate_extjson"] {
                    if let Some(s) = number_decimal(obj, key) {
                        let got = Dec::parse(&s);
                        assert_eq!(got, Some(want), "{name}: {key} {s}");
                        checked += 1;
                    }
                }
            }
        }
        // 907 strings in the corpus copied for this project.
        assert!(checked > 500, "{checked}");
    }
}

/// The operators that use this module, evaluated as expressions and
/// accumulators (promotion rules, errors, what stays NotImplemented).
#[cfg(test)]
mod expr_tests {
    use crate::agg::accumulators::Accumulator;
    use crate::expr::{Expr, Vars};
    use bson::{doc, Bson, DateTime, Decimal128, Document};
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    fn input() -> Document {
        doc! {
            "d": dec("1.50"),
            "i": 2,
            "l": 3i64,
            "f": 0.1,
            "z": dec("0"),
            "n": null,
            "date": DateTime::from_millis(1000),
            "arr": [dec("1.0"), 2, 0.5],
        }
    }

    fn eval(e: Bson) -> crate::value::Value {
        let expr = Expr::parse(&e).unwrap_or_else(|err| panic!("{e}: {err}"));
        expr.eval(&input(), &Vars::new())
            .unwrap_or_else(|err| panic!("{e}: {err}"))
    }

    fn eval_err(e: Bson) -> (i32, String) {
        let expr = Expr::parse(&e).unwrap_or_else(|err| panic!("{e}: {err}"));
        let err = expr.eval(&input(), &Vars::new()).expect_err(&e.to_string());
        (err.code.code(), err.message)
    }

    #[test]
    fn operators() {
        let cases: Vec<(Bson, Bson)> = vec![
            (bson::bson!({"$add": ["$d", "$i"]}), dec("3.50")),
            (
                bson::bson!({"$add": [dec("1.0"), dec("1.00")]}),
                dec("2.00"),
            ),
            // A double converts to 15 digits once the sum is decimal.
            (
                bson::bson!({"$add": ["$d", "$f"]}),
                dec("1.600000000000000"),
            ),
            (bson::bson!({"$add": ["$i", "$l", "$d"]}), dec("6.50")),
            (bson::bson!({"$add": ["$d", "$n"]}), Bson::Null),
            (
                bson::bson!({"$add": ["$date", dec("1.5")]}),
                Bson::DateTime(DateTime::from_millis(1002)),
            ),
            (
                bson::bson!({"$subtract": ["$date", dec("2.5")]}),
                Bson::DateTime(DateTime::from_millis(998)),
            ),
            (bson::bson!({"$subtract": ["$d", 1]}), dec("0.50")),
            (bson::bson!({"$subtract": [5i64, "$d"]}), dec("3.50")),
            (bson::bson!({"$multiply": ["$d", "$i"]}), dec("3.00")),
            (bson::bson!({"$multiply": [2, 3, "$d"]}), dec("9.00")),
            (
                bson::bson!({"$divide": [1, dec("3")]}),
                dec("0.3333333333333333333333333333333333"),
            ),
            (bson::bson!({"$divide": ["$d", 2]}), dec("0.75")),
            (bson::bson!({"$mod": [dec("10.5"), 3]}), dec("1.5")),
            (bson::bson!({"$abs": dec("-1.50")}), dec("1.50")),
            (bson::bson!({"$sqrt": dec("2.25")}), dec("1.5")),
            // Standard deviations compute in doubles, decimals included.
            (
                bson::bson!({"$stdDevPop": [dec("2"), 4]}),
                Bson::Double(1.0),
            ),
            (bson::bson!({"$ceil": dec("1.2")}), dec("2")),
            (bson::bson!({"$floor": dec("-1.2")}), dec("-2")),
            (bson::bson!({"$round": [dec("19.25"), 1]}), dec("19.2")),
            (bson::bson!({"$round": [dec("19.25"), -1]}), dec("2E+1")),
            (bson::bson!({"$trunc": [dec("19.25"), 0]}), dec("19")),
            (bson::bson!({"$round": [dec("1.5"), null]}), Bson::Null),
            (bson::bson!({"$round": dec("-1.6")}), dec("-2")),
            (bson::bson!({"$trunc": dec("-1.6")}), dec("-1")),
            (bson::bson!({"$round": [dec("1.298"), 1]}), dec("1.3")),
            (bson::bson!({"$trunc": [dec("23.298"), -1]}), dec("2E+1")),
            (
                bson::bson!({"$trunc": [dec("1.298912343250054252245154325"), 20i64]}),
                dec("1.29891234325005425224"),
            ),
            (
                bson::bson!({"$round": [dec("1.298912343250054252245154325"), 20i64]}),
                dec("1.29891234325005425225"),
            ),
            // Past 34 digits the value keeps the 34 the format allows.
            (
                bson::bson!({"$trunc": [dec("1.298"), dec("100")]}),
                dec("1.298000000000000000000000000000000"),
            ),
            (bson::bson!({"$round": [dec("1"), 2]}), dec("1.00")),
            (
                bson::bson!({"$round": [dec("-Infinity"), 0]}),
                dec("-Infinity"),
            ),
            (bson::bson!({"$trunc": [dec("NaN"), 0]}), dec("NaN")),
            (bson::bson!({"$round": [2.5, dec("0")]}), Bson::Double(2.0)),
            (bson::bson!({"$sum": "$arr"}), dec("3.5")),
            (bson::bson!({"$sum": [1, "$d"]}), dec("2.50")),
            (
                bson::bson!({"$avg": "$arr"}),
                dec("1.166666666666666666666666666666667"),
            ),
            (bson::bson!({"$toDecimal": 2.5}), dec("2.50000000000000")),
            (bson::bson!({"$toDecimal": "1.50"}), dec("1.50")),
            (bson::bson!({"$toDecimal": 7}), dec("7")),
            (bson::bson!({"$toDecimal": 7i64}), dec("7")),
            (bson::bson!({"$toDecimal": true}), dec("1")),
            (bson::bson!({"$toDecimal": "$date"}), dec("1000")),
            (bson::bson!({"$toDecimal": null}), Bson::Null),
            (
                bson::bson!({"$convert": {"input": "1e3", "to": "decimal"}}),
                dec("1E+3"),
            ),
            (bson::bson!({"$convert": {"input": 5, "to": 19}}), dec("5")),
            (
                bson::bson!({"$convert": {"input": "x", "to": "decimal", "onError": "bad"}}),
                Bson::String("bad".into()),
            ),
            (bson::bson!({"$toInt": dec("-5.9")}), Bson::Int32(-5)),
            (bson::bson!({"$toLong": dec("1E+3")}), Bson::Int64(1000)),
            (bson::bson!({"$toDouble": dec("0.1")}), Bson::Double(0.1)),
            (
                bson::bson!({"$toString": dec("1.50")}),
                Bson::String("1.50".into()),
            ),
            (bson::bson!({"$toBool": dec("0.00")}), Bson::Boolean(false)),
            (
                bson::bson!({"$toDate": dec("1.9")}),
                Bson::DateTime(DateTime::from_millis(1)),
            ),
            // mongod's divide.js: exact quotients take the exponent nearest
            // the ideal one, a double operand converts to 15 digits first.
            (bson::bson!({"$divide": [10, dec("2.5")]}), dec("4")),
            (
                bson::bson!({"$divide": [12.5, dec("2.5")]}),
                dec("5.000000000000"),
            ),
            (bson::bson!({"$divide": [dec("12.5"), 2.5]}), dec("5")),
            (bson::bson!({"$divide": [dec("12.5"), 5i64]}), dec("2.5")),
            (
                bson::bson!({"$divide": [dec("9223372036854775807"), 1]}),
                dec("9223372036854775807"),
            ),
            (bson::bson!({"$toBool": dec("NaN")}), Bson::Boolean(true)),
            // Logarithms and powers computed in decimal128 (34 digits).
            (
                bson::bson!({"$exp": dec("1")}),
                dec("2.718281828459045235360287471352662"),
            ),
            (bson::bson!({"$exp": dec("NaN")}), dec("NaN")),
            (
                bson::bson!({"$ln": dec("10")}),
                dec("2.302585092994045684017991454684364"),
            ),
            (bson::bson!({"$ln": dec("NaN")}), dec("NaN")),
            (bson::bson!({"$log10": dec("1000")}), dec("3")),
            (bson::bson!({"$log": [dec("1000"), 10]}), dec("3")),
            (
                bson::bson!({"$log": [dec("100"), dec("0.1")]}),
                dec("-2.000000000000000000000000000000000"),
            ),
            (bson::bson!({"$pow": [dec("1.1"), 2]}), dec("1.21")),
            (
                bson::bson!({"$pow": [2, dec("0.5")]}),
                dec("1.414213562373095048801688724209698"),
            ),
            // A double operand converts to 15 digits first: 2.5 is 2.50000000000000.
            (
                bson::bson!({"$pow": [2.5, dec("2")]}),
                dec("6.2500000000000000000000000000"),
            ),
            (bson::bson!({"$pow": [dec("2"), null]}), Bson::Null),
            (bson::bson!({"$ln": null}), Bson::Null),
            (
                bson::bson!({"$sin": dec("1")}),
                dec("0.8414709848078965066525023216302990"),
            ),
            (
                bson::bson!({"$atan2": [dec("1"), 1]}),
                dec("0.7853981633974483096156608458198757"),
            ),
            (
                bson::bson!({"$degreesToRadians": dec("180")}),
                dec("3.141592653589793238462643383279503"),
            ),
            (bson::bson!({"$acos": dec("NaN")}), dec("NaN")),
            (bson::bson!({"$cosh": null}), Bson::Null),
            // Non-decimal fast paths are unchanged.
            (bson::bson!({"$add": [1, 2]}), Bson::Int32(3)),
            (bson::bson!({"$divide": [1, 4]}), Bson::Double(0.25)),
            (bson::bson!({"$sum": [1, 2.5]}), Bson::Double(3.5)),
        ];
        for (e, want) in cases {
            assert_eq!(eval(e.clone()), Some(want), "{e}");
        }
    }

    #[test]
    fn errors() {
        let cases: Vec<(Bson, i32, &str)> = vec![
            (bson::bson!({"$divide": ["$d", "$z"]}), 16608, "can't $divide by zero"),
            (bson::bson!({"$divide": ["$d", 0]}), 16608, "can't $divide by zero"),
            (bson::bson!({"$mod": ["$d", "$z"]}), 16610, "can't $mod by zero"),
            (bson::bson!({"$divide": ["$d", "x"]}), 16609, "only supports numeric types, not decimal and string"),
            (bson::bson!({"$add": ["$d", "x"]}), 16554, "not string"),
            (bson::bson!({"$subtract": ["$d", "$date"]}), 16556, "can't $subtract date from decimal"),
            (bson::bson!({"$add": ["$date", "$date", "$d"]}), 16612, "only one date"),
            (bson::bson!({"$toInt": dec("3000000000")}), 241, "Conversion would overflow target type in $convert with no onError value: 3000000000"),
            (bson::bson!({"$toLong": dec("NaN")}), 241, "Attempt to convert NaN value"),
            (bson::bson!({"$toLong": dec("-Infinity")}), 241, "infinity value"),
            (bson::bson!({"$toDouble": dec("1E+400")}), 241, "Conversion would overflow target type"),
            (bson::bson!({"$toDecimal": "1.5x"}), 241, "Failed to parse number '1.5x'"),
            (bson::bson!({"$toDecimal": [[1]]}), 241, "Unsupported conversion from array to decimal"),
            // Still not implemented for decimals: clear 238 naming the operator.
            (bson::bson!({"$round": [1, dec("101")]}), 51083, "precision value 101"),
            (bson::bson!({"$trunc": [dec("1"), dec("-21")]}), 51083, "precision value -21"),
            (bson::bson!({"$round": [1, dec("1.4")]}), 51082, "integral"),
            (bson::bson!({"$sqrt": dec("-4")}), 28714, "greater than or equal to 0"),
            (bson::bson!({"$ln": dec("0")}), 28766, "$ln's argument must be a positive number, but is 0"),
            (bson::bson!({"$ln": dec("-1")}), 28766, "positive number"),
            (bson::bson!({"$log10": dec("-0.5")}), 28761, "$log10's argument must be a positive number"),
            (bson::bson!({"$log": [dec("0"), 10]}), 28758, "$log's argument must be a positive number"),
            (bson::bson!({"$log": [dec("2"), dec("1.00")]}), 28759, "$log's base must be a positive number not equal to 1"),
            (bson::bson!({"$log": [dec("2"), -3]}), 28759, "base"),
            (bson::bson!({"$log": [dec("2"), "x"]}), 28756, "$log's argument must be numeric"),
            (bson::bson!({"$pow": [dec("0"), -1]}), 28764, "base of 0 and a negative exponent"),
            (bson::bson!({"$pow": [0, dec("-0.5")]}), 28764, "base of 0 and a negative exponent"),
            (bson::bson!({"$pow": [dec("2"), "x"]}), 28763, "exponent must be numeric"),
            (bson::bson!({"$pow": ["x", dec("2")]}), 28762, "base must be numeric"),
            (bson::bson!({"$exp": "x"}), 28765, "$exp only supports numeric types"),
            (bson::bson!({"$sin": dec("Infinity")}), 50989, "cannot apply $sin to Infinity, value must be in (-inf,inf)"),
            (bson::bson!({"$asin": dec("1.5")}), 50989, "cannot apply $asin to 1.5, value must be in [-1,1]"),
            (bson::bson!({"$acosh": dec("0")}), 50989, "[1,inf]"),
            (bson::bson!({"$atanh": dec("-2")}), 50989, "[-1,1]"),
            (bson::bson!({"$atan2": [dec("1"), "x"]}), 51044, "$atan2 only supports numeric types"),
            (bson::bson!({"$convert": {"input": 1, "to": "binData"}}), 238, "binData"),
        ];
        for (e, code, msg) in cases {
            let (c, m) = eval_err(e.clone());
            assert_eq!(c, code, "{e}: {m}");
            assert!(m.contains(msg), "{e}: {m}");
        }
    }

    #[test]
    fn accumulators() {
        let run = |spec: Bson, inputs: Vec<Bson>| {
            let acc = Accumulator::parse("x", &spec).unwrap();
            let mut st = acc.new_state();
            for v in inputs {
                st.add(acc.op, Some(v)).unwrap();
            }
            st.finish(acc.op)
        };
        let sum = bson::bson!({"$sum": "$v"});
        let avg = bson::bson!({"$avg": "$v"});
        assert_eq!(run(sum.clone(), vec![dec("1.10"), dec("2.2")]), dec("3.30"));
        assert_eq!(
            run(
                sum.clone(),
                vec![Bson::Int32(1), dec("0.5"), Bson::Int64(2)]
            ),
            dec("3.5")
        );
        // Doubles summed before the decimal keep their full precision.
        assert_eq!(
            run(sum.clone(), vec![Bson::Double(0.5), dec("1")]),
            dec("1.5")
        );
        assert_eq!(
            run(sum.clone(), vec![dec("Infinity"), dec("-Infinity")]),
            dec("NaN")
        );
        assert_eq!(
            run(sum.clone(), vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Int32(3)
        );
        assert_eq!(run(avg.clone(), vec![dec("1"), dec("2")]), dec("1.5"));
        assert_eq!(
            run(
                avg.clone(),
                vec![dec("1"), Bson::Int32(2), Bson::String("x".into())]
            ),
            dec("1.5")
        );
        assert_eq!(
            run(avg, vec![Bson::Int32(1), Bson::Int32(2)]),
            Bson::Double(1.5)
        );
        assert_eq!(
            run(
                bson::bson!({"$stdDevSamp": "$v"}),
                vec![dec("1"), Bson::Int32(3)]
            ),
            Bson::Double(std::f64::consts::SQRT_2)
        );
    }
}

/// `$inc` and `$mul` with decimals (mongod's SafeNum promotion).
#[cfg(test)]
mod update_tests {
    use crate::update::UpdateSpec;
    use bson::{doc, Bson, Decimal128, Document};
    use std::str::FromStr;

    fn dec(s: &str) -> Bson {
        Bson::Decimal128(Decimal128::from_str(s).unwrap())
    }

    fn run(start: Document, update: Document) -> Document {
        let spec = UpdateSpec::parse(&update).unwrap_or_else(|e| panic!("{update}: {e}"));
        let mut d = start;
        spec.apply(&mut d, false)
            .unwrap_or_else(|e| panic!("{update}: {e}"));
        d
    }

    #[test]
    fn inc_and_mul() {
        let cases: Vec<(Document, Document, Bson)> = vec![
            (
                doc! {"x": dec("1.50")},
                doc! {"$inc": {"x": 1}},
                dec("2.50"),
            ),
            (
                doc! {"x": 1},
                doc! {"$inc": {"x": dec("0.25")}},
                dec("1.25"),
            ),
            (
                doc! {"x": i64::MAX},
                doc! {"$inc": {"x": dec("1")}},
                dec("9223372036854775808"),
            ),
            (
                doc! {"x": 0.1},
                doc! {"$inc": {"x": dec("1")}},
                dec("1.100000000000000"),
            ),
            (
                doc! {"x": dec("1.0")},
                doc! {"$inc": {"x": dec("1.00")}},
                dec("2.00"),
            ),
            (doc! {}, doc! {"$inc": {"x": dec("1.5")}}, dec("1.5")),
            (doc! {"x": dec("1.5")}, doc! {"$mul": {"x": 2}}, dec("3.0")),
            (doc! {"x": 3}, doc! {"$mul": {"x": dec("0.5")}}, dec("1.5")),
            (
                doc! {"x": dec("9E+6144")},
                doc! {"$mul": {"x": 10}},
                dec("Infinity"),
            ),
            (doc! {}, doc! {"$mul": {"x": dec("1.50")}}, dec("0.00")),
            // Non-decimal SafeNum rules unchanged.
            (doc! {"x": 1}, doc! {"$inc": {"x": 2}}, Bson::Int32(3)),
            (doc! {}, doc! {"$mul": {"x": 2.5}}, Bson::Double(0.0)),
        ];
        for (start, update, want) in cases {
            let got = run(start.clone(), update.clone());
            assert_eq!(got.get("x"), Some(&want), "{start} {update}");
        }
        let spec = UpdateSpec::parse(&doc! {"$inc": {"x": dec("1")}}).unwrap();
        let mut d = doc! {"_id": 1, "x": "a"};
        let err = spec.apply(&mut d, false).unwrap_err();
        assert_eq!(err.code.code(), 14, "{err}");
        assert!(err.message.contains("non-numeric type"), "{err}");
    }
}

/// Random decimals: encoding round trips, no operation panics, and results
/// agree with double arithmetic where doubles are precise enough to tell.
#[cfg(test)]
mod prop_tests {
    use super::*;
    use proptest::prelude::*;

    fn any_dec() -> impl Strategy<Value = Dec> {
        prop_oneof![
            8 => (any::<bool>(), 0u128..TEN_34, EMIN..=EMAX)
                .prop_map(|(neg, coef, exp)| Dec::Finite { neg, coef, exp: exp as i32 }),
            8 => (any::<bool>(), 0u128..1_000_000, -8i64..8)
                .prop_map(|(neg, coef, exp)| Dec::Finite { neg, coef, exp: exp as i32 }),
            1 => Just(Dec::NaN),
            1 => any::<bool>().prop_map(Dec::Inf),
        ]
    }

    fn close(got: Dec, want: f64) -> bool {
        let g = got.to_f64();
        if want.is_nan() {
            return g.is_nan();
        }
        if want == 0.0 || !want.is_finite() {
            return g == want || (g.abs() < 1e-300 && want.abs() < 1e-300);
        }
        ((g - want) / want).abs() < 1e-12
    }

    proptest! {
        #[test]
        fn round_trips_and_never_panics(a in any_dec(), b in any_dec()) {
            prop_assert_eq!(Dec::from_bson(a.to_bson()), a);
            let text = a.to_bson().to_string();
            prop_assert_eq!(Dec::parse(&text), Some(a));
            for r in [a.plus(b), a.minus(b), a.times(b), a.quotient(b), a.fmod(b), a.sqrt()] {
                // Whatever comes out is canonical.
                prop_assert_eq!(Dec::from_bson(r.to_bson()), r);
            }
            let _ = a.to_i64(Rounding::TowardZero);
            let _ = a.round_to_place(3, Rounding::HalfEven);
        }

        #[test]
        fn small_values_agree_with_doubles(
            (n1, c1, e1) in (any::<bool>(), 0u128..1_000_000, -6i32..6),
            (n2, c2, e2) in (any::<bool>(), 1u128..1_000_000, -6i32..6),
        ) {
            let a = Dec::Finite { neg: n1, coef: c1, exp: e1 };
            let b = Dec::Finite { neg: n2, coef: c2, exp: e2 };
            let (x, y) = (a.to_f64(), b.to_f64());
            prop_assert!(close(a.plus(b), x + y) || (x + y).abs() < 1e-9 * x.abs().max(y.abs()));
            prop_assert!(close(a.times(b), x * y));
            prop_assert!(close(a.quotient(b), x / y));
            if !n1 {
                prop_assert!(close(a.sqrt(), x.sqrt()));
            }
        }
    }
}
