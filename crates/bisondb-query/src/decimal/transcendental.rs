//! Decimal128 `exp`, `ln`, `log10`, `log` and `pow`, correctly rounded to 34
//! digits (half to even), for `$exp`, `$ln`, `$log10`, `$log` and `$pow`.
//!
//! Each function is computed in fixed point on big integers (a value `v` at
//! scale `p` stands for `v × 10^-p`) with argument reduction and a short
//! series, then rounded once. The computation is repeated with more digits
//! when its error interval straddles a rounding boundary (Ziv's strategy),
//! so the rounding is the correctly rounded one, not just usually right.
//!
//! Exponents: inexact results keep all 34 digits (the smallest exponent
//! IEEE 754-2008 allows). Exact results: `exp(0)`, `ln(1)`, `x^0` and `1^y`
//! are the integers 0 or 1 with exponent 0; `log10(10^k)` is the integer `k`
//! with exponent 0; `x^n` for an integral `n` is computed exactly and keeps
//! the exponent `n × exponent(x)` when it fits 34 digits (`1.1^2 = 1.21`),
//! or, for a negative `n`, the exponent nearest that one that holds the
//! exact quotient (`2^-1 = 0.5`). Other exact values found through the
//! logarithm (`log(8, 2)`, `4^0.5`) come out with 34 digits (`3.000…0`).

use super::{digits, finish, pow10, Dec, Rounding, EMIN};
use num_bigint::{BigInt, BigUint, Sign};

/// Extra digits carried inside a computation beyond the caller's scale.
pub(super) const GUARD: u64 = 20;
/// Error bound, in units of the last place of the caller's scale, that the
/// functions below stay within (their true error is a few dozen units).
const ERR: u32 = 1000;
/// The first working scale, and the scale past which the loop gives up
/// refining (then the last approximation is rounded as it is).
const START: u64 = 60;
const MAX_SCALE: u64 = 2000;

pub(super) fn p10(n: u64) -> BigInt {
    BigInt::from(pow10(n))
}

/// `floor(a / d)` for a positive `d`.
fn div_floor(a: &BigInt, d: &BigInt) -> BigInt {
    let q = a / d;
    if a.sign() == Sign::Minus && &q * d != *a {
        q - 1
    } else {
        q
    }
}

/// `ln(m)` at scale `q` for `m` (at scale `q`) in `[1, 10]`.
fn ln_mantissa(m: &BigInt, q: u64) -> BigInt {
    let w = q + GUARD;
    let one = p10(w);
    let mut x = m * p10(GUARD);
    // Eight square roots bring m within 1.01 of one, where the atanh series
    // gains almost five digits a term; the error grows 512-fold on the way
    // back, which the guard digits absorb.
    const HALVINGS: u32 = 8;
    for _ in 0..HALVINGS {
        x = (&x * &one).sqrt();
    }
    // ln(x) = 2 atanh(z), z = (x - 1) / (x + 1).
    let z = (&x - &one) * &one / (&x + &one);
    let z2 = &z * &z / &one;
    let mut power = z;
    let mut sum = BigInt::from(0u8);
    let mut k = 1u32;
    loop {
        let t = &power / k;
        if t.sign() == Sign::NoSign {
            break;
        }
        sum += t;
        power = &power * &z2 / &one;
        k += 2;
    }
    (sum << (HALVINGS + 1)) / p10(GUARD)
}

/// `ln(10)` at scale `q`.
fn ln10(q: u64) -> BigInt {
    ln_mantissa(&p10(q + 1), q)
}

/// `ln(c × 10^e)` at scale `p`, for `c > 0`.
pub(super) fn ln_fixed(c: &BigUint, e: i64, p: u64) -> BigInt {
    let q = p + GUARD;
    let d = digits(c);
    // c = m × 10^(d-1) with m in [1, 10).
    let m = BigInt::from(c * pow10(q)) / p10(d - 1);
    let k = e + d as i64 - 1;
    (ln_mantissa(&m, q) + ln10(q) * k) / p10(GUARD)
}

/// `exp(t)` for `t` at scale `p` (|t| below a few tens of thousands), as
/// `(m, k)`: the value is `m × 10^(k - p)` with `m` about in `[1, 10)`.
pub(super) fn exp_fixed(t: &BigInt, p: u64) -> (BigInt, i64) {
    let q = p + GUARD;
    let tq = t * p10(GUARD);
    let l10 = ln10(q);
    // t = k ln(10) + r, r in [0, ln 10): exp(t) = 10^k exp(r).
    let k = div_floor(&tq, &l10);
    let r = tq - &k * &l10;
    let k = i64::try_from(&k).unwrap_or(0);
    // exp(r) = exp(r / 2^10)^(2^10): the series on r / 1024 < 0.003 needs
    // few terms; ten squarings multiply the error by 1024.
    const HALVINGS: u32 = 10;
    let w = q + 5;
    let one = p10(w);
    let r = (r * p10(5)) >> HALVINGS;
    let mut sum = one.clone();
    let mut term = one.clone();
    let mut n = 1u32;
    loop {
        term = &term * &r / &one / n;
        if term.sign() == Sign::NoSign {
            break;
        }
        sum += &term;
        n += 1;
    }
    for _ in 0..HALVINGS {
        sum = &sum * &sum / &one;
    }
    (sum / p10(GUARD + 5), k)
}

/// Rounds `v × 10^exp`, known within `±err` units of `v`, when both ends of
/// that interval round to the same decimal; `None` asks for more digits.
fn settle(v: &BigInt, err: u32, exp: i64) -> Option<Dec> {
    let lo = v - err;
    let hi = v + err;
    if lo.sign() != hi.sign() || lo.sign() == Sign::NoSign {
        return None;
    }
    let neg = lo.sign() == Sign::Minus;
    let a = finish(neg, lo.magnitude().clone(), exp, Rounding::HalfEven);
    let b = finish(neg, hi.magnitude().clone(), exp, Rounding::HalfEven);
    (a == b).then_some(a)
}

/// Runs `f` at growing scales until its result rounds unambiguously. `f(p)`
/// returns `(v, exp)` meaning `v × 10^exp`, within [`ERR`] units of `v`.
pub(super) fn ziv(f: impl Fn(u64) -> (BigInt, i64)) -> Dec {
    let mut p = START;
    loop {
        let (v, exp) = f(p);
        if let Some(d) = settle(&v, ERR, exp) {
            return d;
        }
        if p >= MAX_SCALE {
            let neg = v.sign() == Sign::Minus;
            return finish(neg, v.magnitude().clone(), exp, Rounding::HalfEven);
        }
        p += p / 2;
    }
}

/// The coefficient with its trailing zeros removed, and the exponent that
/// keeps the value.
pub(super) fn strip(coef: u128, exp: i32) -> (u128, i64) {
    let (mut c, mut e) = (coef, i64::from(exp));
    while c != 0 && c % 10 == 0 {
        c /= 10;
        e += 1;
    }
    (c, e)
}

pub(super) const ONE: Dec = Dec::Finite {
    neg: false,
    coef: 1,
    exp: 0,
};

pub(super) fn zero(neg: bool) -> Dec {
    Dec::Finite {
        neg,
        coef: 0,
        exp: 0,
    }
}

/// Whether a finite positive value is exactly one (`1`, `1.00`, `10E-1`).
fn is_one(coef: u128, exp: i32) -> bool {
    strip(coef, exp) == (1, 0)
}

/// Whether a value is an integer, and if so whether it is odd.
fn integral(y: Dec) -> Option<bool> {
    match y {
        Dec::Finite { coef, exp, .. } => {
            let (c, e) = strip(coef, exp);
            if c == 0 || e > 0 {
                Some(false)
            } else if e == 0 {
                Some(c % 2 == 1)
            } else {
                None
            }
        }
        Dec::Inf(_) => Some(false),
        Dec::NaN => None,
    }
}

/// A big integer's approximate value as a double (for range estimates).
fn approx(v: &BigInt, scale: u64) -> f64 {
    let f: f64 = v.to_string().parse().unwrap_or(0.0);
    f / 10f64.powi(i32::try_from(scale).unwrap_or(i32::MAX))
}

impl Dec {
    /// `e^x`.
    pub fn exp(self) -> Dec {
        match self {
            Dec::NaN => Dec::NaN,
            Dec::Inf(false) => Dec::Inf(false),
            Dec::Inf(true) => zero(false),
            Dec::Finite { coef: 0, .. } => ONE,
            Dec::Finite { neg, coef, exp } => {
                // Beyond these bounds the result is past the largest finite
                // decimal (e^14160 > 10^6149) or below half the smallest.
                let x = self.to_f64();
                if x > 14200.0 {
                    return Dec::Inf(false);
                }
                if x < -14250.0 {
                    return Dec::Finite {
                        neg: false,
                        coef: 0,
                        exp: EMIN as i32,
                    };
                }
                let c = BigInt::from(coef);
                ziv(|p| {
                    let shift = i64::from(exp) + p as i64;
                    let mut t = if shift >= 0 {
                        c.clone() * p10(shift as u64)
                    } else {
                        c.clone() / p10(shift.unsigned_abs())
                    };
                    if neg {
                        t = -t;
                    }
                    let (m, k) = exp_fixed(&t, p);
                    (m, k - p as i64)
                })
            }
        }
    }

    /// The natural logarithm; zero gives -Infinity and negative values NaN
    /// (callers report mongod's errors first).
    pub fn ln(self) -> Dec {
        match self {
            Dec::NaN | Dec::Inf(true) => Dec::NaN,
            Dec::Inf(false) => Dec::Inf(false),
            Dec::Finite { coef: 0, .. } => Dec::Inf(true),
            Dec::Finite { neg: true, .. } => Dec::NaN,
            Dec::Finite { coef, exp, .. } => {
                if is_one(coef, exp) {
                    return zero(false);
                }
                let c = BigUint::from(coef);
                ziv(|p| (ln_fixed(&c, i64::from(exp), p), -(p as i64)))
            }
        }
    }

    /// The base-10 logarithm; powers of ten give their exact integer.
    pub fn log10(self) -> Dec {
        match self {
            Dec::Finite {
                neg: false,
                coef,
                exp,
            } if coef != 0 => {
                let (c, e) = strip(coef, exp);
                if c == 1 {
                    return Dec::from_i64(e);
                }
                let c = BigUint::from(coef);
                ziv(|p| {
                    let q = p + 5;
                    let v = ln_fixed(&c, i64::from(exp), q) * p10(p) / ln10(q);
                    (v, -(p as i64))
                })
            }
            other => other.ln(),
        }
    }

    /// The logarithm in base `base` (`ln(x) / ln(base)`).
    pub fn log(self, base: Dec) -> Dec {
        match (self, base) {
            (
                Dec::Finite {
                    neg: false,
                    coef: c1,
                    exp: e1,
                },
                Dec::Finite {
                    neg: false,
                    coef: c2,
                    exp: e2,
                },
            ) if c1 != 0 && c2 != 0 && !is_one(c2, e2) => {
                if is_one(c1, e1) {
                    return zero(false);
                }
                // Base ten is log10 (so powers of ten give exact integers).
                if strip(c2, e2) == (1, 1) {
                    return self.log10();
                }
                let (a, b) = (BigUint::from(c1), BigUint::from(c2));
                ziv(|p| {
                    // ln(base) may be as small as 1e-34: carry that many
                    // more digits in both logarithms.
                    let q = p + 40;
                    let v =
                        ln_fixed(&a, i64::from(e1), q) * p10(p) / ln_fixed(&b, i64::from(e2), q);
                    (v, -(p as i64))
                })
            }
            (x, b) => x.ln().quotient(b.ln()),
        }
    }

    /// `x^y` with IEEE 754's special cases (`x^0 = 1` and `1^y = 1`, even
    /// for NaN; a negative base to a non-integral power is NaN).
    pub fn pow(self, y: Dec) -> Dec {
        if y.cmp_zero() == Some(std::cmp::Ordering::Equal) {
            return ONE;
        }
        if let Dec::Finite {
            neg: false,
            coef,
            exp,
        } = self
        {
            if is_one(coef, exp) {
                return ONE;
            }
        }
        if matches!(self, Dec::NaN) || matches!(y, Dec::NaN) {
            return Dec::NaN;
        }
        let odd = integral(y);
        let y_pos = y.cmp_zero() == Some(std::cmp::Ordering::Greater);
        match (self, y) {
            (Dec::Inf(xneg), _) => {
                let neg = xneg && odd == Some(true);
                if y_pos {
                    Dec::Inf(neg)
                } else {
                    zero(neg)
                }
            }
            (Dec::Finite { coef, exp, .. }, Dec::Inf(_)) => {
                // |x| = 1 (x = -1 here) gives 1; otherwise it grows or vanishes.
                let (c, e) = strip(coef, exp);
                let mag = if c == 0 {
                    std::cmp::Ordering::Less
                } else {
                    (digits(&BigUint::from(c)) as i64 + e - 1)
                        .cmp(&0)
                        .then(if c == 1 {
                            std::cmp::Ordering::Equal
                        } else {
                            std::cmp::Ordering::Greater
                        })
                };
                match (mag, y_pos) {
                    (std::cmp::Ordering::Equal, _) => ONE,
                    (std::cmp::Ordering::Greater, true) | (std::cmp::Ordering::Less, false) => {
                        Dec::Inf(false)
                    }
                    _ => zero(false),
                }
            }
            (Dec::Finite { neg, coef: 0, .. }, _) => {
                let neg = neg && odd == Some(true);
                if y_pos {
                    zero(neg)
                } else {
                    Dec::Inf(neg)
                }
            }
            (Dec::Finite { neg, coef, exp }, Dec::Finite { .. }) => {
                if neg && odd.is_none() {
                    return Dec::NaN;
                }
                let sign = neg && odd == Some(true);
                if odd.is_some() {
                    if let Some(d) = pow_exact(coef, exp, y, sign) {
                        return d;
                    }
                }
                pow_general(coef, exp, y, sign)
            }
            _ => Dec::NaN,
        }
    }
}

/// `c × 10^e` to the integral power `y`, computed exactly and rounded once;
/// `None` when the exact power would be too long to be worth it.
fn pow_exact(coef: u128, exp: i32, y: Dec, neg: bool) -> Option<Dec> {
    let n = y.to_i64(Rounding::TowardZero)?;
    let m = u32::try_from(n.unsigned_abs()).ok()?;
    let c = BigUint::from(coef);
    if digits(&c).checked_mul(u64::from(m))? > 5000 {
        return None;
    }
    let cm = c.pow(m);
    let preferred = i64::from(exp) * n;
    if n > 0 {
        return Some(finish(neg, cm, preferred, Rounding::HalfEven));
    }
    // 1 / c^m: enough quotient digits to round from, plus a sticky digit
    // when the division is inexact so the rounding never sees a false tie.
    let k = digits(&cm) + 36;
    let mut q = pow10(k) / &cm;
    let r = pow10(k) % &cm;
    let mut e = preferred - k as i64;
    if r.bits() != 0 {
        q = q * 10u8 + 1u8;
        e -= 1;
    } else {
        let ten = BigUint::from(10u8);
        while e < preferred && (&q % &ten).bits() == 0 {
            q /= &ten;
            e += 1;
        }
    }
    Some(finish(neg, q, e, Rounding::HalfEven))
}

/// `|x|^y = exp(y ln|x|)`, with the sign already decided.
fn pow_general(coef: u128, exp: i32, y: Dec, neg: bool) -> Dec {
    let Dec::Finite {
        neg: yneg,
        coef: ycoef,
        exp: yexp,
    } = y
    else {
        return Dec::NaN;
    };
    let c = BigUint::from(coef);
    let e = i64::from(exp);
    // Range check from a cheap logarithm (|ln x| >= 1e-34 when x != 1, so
    // 60 digits give it to at least 26).
    let l_est = approx(&ln_fixed(&c, e, START), START);
    let t_est = l_est * y.to_f64();
    if t_est > 14200.0 {
        return Dec::Inf(neg);
    }
    if t_est < -14250.0 {
        return Dec::Finite {
            neg,
            coef: 0,
            exp: EMIN as i32,
        };
    }
    let cy = BigInt::from(ycoef);
    let mag_y = (i64::from(yexp) + digits(&BigUint::from(ycoef)) as i64).max(0) as u64;
    let d = ziv(|p| {
        // The logarithm needs as many more digits as y has integer digits.
        let q = p + mag_y + 5;
        let mut t = ln_fixed(&c, e, q) * &cy;
        if yexp >= 0 {
            t *= p10(u64::from(yexp.unsigned_abs()));
        } else {
            t /= p10(u64::from(yexp.unsigned_abs()));
        }
        t /= p10(q - p);
        if yneg {
            t = -t;
        }
        let (m, k) = exp_fixed(&t, p);
        (m, k - p as i64)
    });
    if neg {
        d.negated()
    } else {
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decimal::tests::{d, s};

    #[test]
    fn known_values() {
        let cases: &[(&str, Dec, &str)] = &[
            (
                "exp(1)",
                d("1").exp(),
                "2.718281828459045235360287471352662",
            ),
            ("exp(0)", d("0").exp(), "1"),
            (
                "exp(-1)",
                d("-1").exp(),
                "0.3678794411714423215955237701614609",
            ),
            (
                "exp(10)",
                d("10").exp(),
                "22026.46579480671651695790064528424",
            ),
            (
                "exp(1E-40)",
                d("1E-40").exp(),
                "1.000000000000000000000000000000000",
            ),
            ("exp(+Inf)", Dec::Inf(false).exp(), "Infinity"),
            ("exp(-Inf)", Dec::Inf(true).exp(), "0"),
            ("exp(NaN)", Dec::NaN.exp(), "NaN"),
            ("exp(20000)", d("20000").exp(), "Infinity"),
            ("exp(-20000)", d("-20000").exp(), "0E-6176"),
            (
                "ln(10)",
                d("10").ln(),
                "2.302585092994045684017991454684364",
            ),
            ("ln(2)", d("2").ln(), "0.6931471805599453094172321214581766"),
            ("ln(1)", d("1.00").ln(), "0"),
            (
                "ln(0.5)",
                d("0.5").ln(),
                "-0.6931471805599453094172321214581766",
            ),
            (
                "ln(1E+6000)",
                d("1E+6000").ln(),
                "13815.51055796427410410794872810619",
            ),
            ("ln(0)", d("0").ln(), "-Infinity"),
            ("ln(-1)", d("-1").ln(), "NaN"),
            ("ln(+Inf)", Dec::Inf(false).ln(), "Infinity"),
            ("log10(1000)", d("1000").log10(), "3"),
            ("log10(0.001)", d("0.0010").log10(), "-3"),
            (
                "log10(2)",
                d("2").log10(),
                "0.3010299956639811952137388947244930",
            ),
            (
                "log(8, 2)",
                d("8").log(d("2")),
                "3.000000000000000000000000000000000",
            ),
            ("log(1, 7)", d("1").log(d("7")), "0"),
            ("log(1000, 10)", d("1000").log(d("1.0E+1")), "3"),
            (
                "log(2, 1.0000000001)",
                d("2").log(d("1.0000000001")),
                "6931471805.946026684446517642786004",
            ),
            ("pow(1.1, 2)", d("1.1").pow(d("2")), "1.21"),
            ("pow(2, 10)", d("2").pow(d("10")), "1024"),
            ("pow(2, -1)", d("2").pow(d("-1")), "0.5"),
            ("pow(-2, 3)", d("-2").pow(d("3")), "-8"),
            (
                "pow(3, -1)",
                d("3").pow(d("-1")),
                "0.3333333333333333333333333333333333",
            ),
            (
                "pow(2, 0.5)",
                d("2").pow(d("0.5")),
                "1.414213562373095048801688724209698",
            ),
            ("pow(-8, 0.5)", d("-8").pow(d("0.5")), "NaN"),
            ("pow(NaN, 0)", Dec::NaN.pow(d("0")), "1"),
            ("pow(1, NaN)", d("1").pow(Dec::NaN), "1"),
            ("pow(0, 2)", d("0").pow(d("2")), "0"),
            ("pow(10, 7000)", d("10").pow(d("7000")), "Infinity"),
            ("pow(2, 1E+10)", d("2").pow(d("1E+10")), "Infinity"),
            ("pow(0.5, 1E+10)", d("0.5").pow(d("1E+10")), "0E-6176"),
            ("pow(-Inf, 3)", Dec::Inf(true).pow(d("3")), "-Infinity"),
            ("pow(0.5, +Inf)", d("0.5").pow(Dec::Inf(false)), "0"),
            ("pow(-1, -Inf)", d("-1").pow(Dec::Inf(true)), "1"),
            (
                "pow(2, 1.5)",
                d("2").pow(d("1.5")),
                "2.828427124746190097603377448419396",
            ),
        ];
        for (what, got, want) in cases {
            assert_eq!(s(*got), *want, "{what}");
        }
    }

    #[test]
    fn pow_half_matches_sqrt() {
        for x in ["2", "3", "10", "0.7", "123456.789"] {
            assert_eq!(s(d(x).pow(d("0.5"))), s(d(x).sqrt()), "{x}");
        }
    }
}
