//! Decimal128 trigonometric and hyperbolic functions (`$sin` ... `$atanh`,
//! `$atan2`, `$degreesToRadians`, `$radiansToDegrees`), correctly rounded to
//! 34 digits the same way as [`super::transcendental`]: big-integer fixed
//! point, argument reduction, series, recomputed with more digits until the
//! rounding is certain. The working scale grows with the argument's leading
//! zeros (so `sin(1E-30)` keeps 34 significant digits) and with its integer
//! digits (so `sin(1E+100)` reduces by π exactly enough).
//!
//! `$degreesToRadians` and `$radiansToDegrees` are mongod's: the argument
//! times its rounded constant (π/180 or 180/π from its 34-digit π), rounded
//! once.
//!
//! Exact results (`sin(0)`, `cos(0)`, `acos(1)`, `acosh(1)`, ...) are the
//! integers 0 or 1 with exponent 0 (a zero argument keeps its own exponent
//! and sign for the odd functions); everything else keeps 34 digits.
//! Domain checks (mongod's errors) are the caller's: out of domain gives NaN.

use super::transcendental::{exp_fixed, ln_fixed, p10, zero, ziv, GUARD, ONE};
use super::{digits, finish, Dec, Rounding};
use num_bigint::{BigInt, BigUint, Sign};
use std::cmp::Ordering;
use std::sync::Mutex;

/// The functions of one argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Trig {
    Sin,
    Cos,
    Tan,
    Asin,
    Acos,
    Atan,
    Sinh,
    Cosh,
    Tanh,
    Asinh,
    Acosh,
    Atanh,
    DegreesToRadians,
    RadiansToDegrees,
}

/// `c × 10^e` at scale `q`, truncated.
fn fixed(neg: bool, c: &BigUint, e: i64, q: u64) -> BigInt {
    let shift = e + q as i64;
    let v = if shift >= 0 {
        BigInt::from(c * super::pow10(shift as u64))
    } else {
        BigInt::from(c / super::pow10(shift.unsigned_abs()))
    };
    if neg {
        -v
    } else {
        v
    }
}

/// `atan(1/n)` at scale `w`.
fn atan_inv(n: u32, w: u64) -> BigInt {
    let n2 = BigInt::from(n) * n;
    let mut power = p10(w) / n;
    let mut sum = BigInt::from(0u8);
    let mut k = 1u32;
    let mut minus = false;
    loop {
        let t = &power / k;
        if t.sign() == Sign::NoSign {
            break;
        }
        if minus {
            sum -= t;
        } else {
            sum += t;
        }
        minus = !minus;
        power /= &n2;
        k += 2;
    }
    sum
}

/// π at scale `w`: Machin's formula once at the largest scale asked for so
/// far, then that value truncated. Reducing a huge argument (`sin(1E+6000)`)
/// needs π to as many digits as the argument has integer digits, on every
/// evaluation; recomputing it each time took ~0.2 s (a fuzzing finding).
fn pi(w: u64) -> BigInt {
    static CACHE: Mutex<Option<(u64, BigInt)>> = Mutex::new(None);
    let mut cache = CACHE.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((scale, v)) = cache.as_ref() {
        if *scale >= w {
            return v / p10(scale - w);
        }
    }
    let q = w + 5;
    let v = (atan_inv(5, q) * 16u8 - atan_inv(239, q) * 4u8) / p10(5);
    *cache = Some((w, v.clone()));
    v
}

/// mongod's π (`Decimal128::kPi`, a 50-digit literal rounded to 34 digits).
const MONGOD_PI: &str = "3.141592653589793238462643383279503";

/// `(sin r, cos r)` at scale `w` for `|r|` below one.
fn sin_cos(r: &BigInt, w: u64) -> (BigInt, BigInt) {
    let one = p10(w);
    let r2 = r * r / &one;
    let (mut s, mut ts) = (r.clone(), r.clone());
    let (mut c, mut tc) = (one.clone(), one.clone());
    let mut k = 1u32;
    loop {
        ts = -(&ts * &r2 / &one) / ((2 * k) * (2 * k + 1));
        tc = -(&tc * &r2 / &one) / ((2 * k - 1) * (2 * k));
        if ts.sign() == Sign::NoSign && tc.sign() == Sign::NoSign {
            break;
        }
        s += &ts;
        c += &tc;
        k += 1;
    }
    (s, c)
}

/// `atan(x)` at scale `w`, any `x` at scale `w`.
fn atan_fixed(x: &BigInt, w: u64) -> BigInt {
    let q = w + GUARD;
    let one = p10(q);
    let neg = x.sign() == Sign::Minus;
    let mut x = x.magnitude().clone();
    let mut x = BigInt::from(std::mem::take(&mut x)) * p10(GUARD);
    let inv = x > one;
    if inv {
        x = &one * &one / &x;
    }
    // atan(x) = 2 atan(x / (1 + sqrt(1 + x²))): four halvings bring x
    // below 0.05, where the series gains 2.6 digits a term.
    const HALVINGS: u32 = 4;
    for _ in 0..HALVINGS {
        let s = (&x * &x + &one * &one).sqrt();
        x = &x * &one / (&one + s);
    }
    let x2 = &x * &x / &one;
    let mut power = x;
    let mut sum = BigInt::from(0u8);
    let mut k = 1u32;
    let mut minus = false;
    loop {
        let t = &power / k;
        if t.sign() == Sign::NoSign {
            break;
        }
        if minus {
            sum -= t;
        } else {
            sum += t;
        }
        minus = !minus;
        power = &power * &x2 / &one;
        k += 2;
    }
    let mut r = sum << HALVINGS;
    if inv {
        r = pi(q) / 2u8 - r;
    }
    if neg {
        r = -r;
    }
    r / p10(GUARD)
}

/// `ln(v)` at scale `w` for a positive `v` at scale `w`.
fn ln_of_fixed(v: &BigInt, w: u64) -> BigInt {
    ln_fixed(v.magnitude(), -(w as i64), w)
}

/// `(m, k)` of [`exp_fixed`] turned into `(e^x, e^-x)` at scale `p` and a
/// common exponent `k - p`, for `x >= 0`.
fn exp_pair(x: &BigInt, p: u64) -> (BigInt, BigInt, i64) {
    let (m, k) = exp_fixed(x, p);
    // e^-x = 10^-k / m: at the same exponent that is 10^(2p) / m / 10^(2k).
    let shift = 2 * p as i64 - 2 * k;
    let inv = if shift >= 0 {
        p10(shift as u64) / &m
    } else {
        BigInt::from(0u8)
    };
    (m, inv, k - p as i64)
}

/// 34 digits of `x` (an odd function's value for a tiny argument, where
/// `f(x) = x (1 ± x²/6 ...)` rounds to `x` itself).
fn pad(neg: bool, c: &BigUint, e: i64) -> Dec {
    let k = 34u64.saturating_sub(digits(c));
    finish(neg, c * super::pow10(k), e - k as i64, Rounding::HalfEven)
}

/// `π × num / den`, correctly rounded.
fn pi_times(num: u8, den: u8) -> Dec {
    ziv(|p| (pi(p + 5) * num / den / p10(5), -(p as i64)))
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

fn one_34() -> Dec {
    pad(false, &BigUint::from(1u8), 0)
}

impl Dec {
    /// One of the one-argument functions.
    pub fn trig(self, f: Trig) -> Dec {
        use Trig::*;
        let (neg, coef, exp) = match self {
            Dec::NaN => return Dec::NaN,
            Dec::Inf(neg) => {
                return match f {
                    Sin | Cos | Tan | Asin | Acos | Acosh | Atanh => Dec::NaN,
                    Atan => {
                        let v = pi_times(1, 2);
                        if neg {
                            v.negated()
                        } else {
                            v
                        }
                    }
                    Sinh | Asinh | DegreesToRadians | RadiansToDegrees => Dec::Inf(neg),
                    Cosh => Dec::Inf(false),
                    Tanh => {
                        if neg {
                            Dec::from_i64(-1)
                        } else {
                            ONE
                        }
                    }
                };
            }
            Dec::Finite { neg, coef, exp } => (neg, coef, i64::from(exp)),
        };
        // mongod multiplies by its own rounded constants (`kPiOver180`, its
        // π divided by 180, and `k180OverPi`): one rounding of a product,
        // cheap at any exponent.
        if matches!(f, DegreesToRadians | RadiansToDegrees) {
            let (Some(pi), Some(d180)) = (Dec::parse(MONGOD_PI), Dec::parse("180")) else {
                return Dec::NaN;
            };
            let k = if f == DegreesToRadians {
                pi.quotient(d180)
            } else {
                d180.quotient(pi)
            };
            return self.times(k);
        }
        let c = BigUint::from(coef);
        if coef == 0 {
            return match f {
                Cos | Cosh => ONE,
                Acos => pi_times(1, 2),
                Acosh => Dec::NaN,
                _ => self,
            };
        }
        let top = exp + digits(&c) as i64; // |x| < 10^top
        let lead = (-top).max(0) as u64;
        let int_digits = top.max(0) as u64;
        // The odd functions of a tiny argument round to the argument.
        if top <= -40 {
            match f {
                Sin | Tan | Asin | Atan | Sinh | Tanh | Asinh | Atanh => return pad(neg, &c, exp),
                Cos | Cosh => return one_34(),
                _ => {}
            }
        }
        let x_is_one = super::transcendental::strip(coef, exp as i32) == (1, 0);
        match f {
            Acos if x_is_one && !neg => return zero(false),
            Acosh if x_is_one && !neg => return zero(false),
            Asin | Acos | Atanh if top > 1 || (top == 1 && !x_is_one) => return Dec::NaN,
            Atanh if x_is_one => return Dec::Inf(neg),
            Acosh if neg || top <= 0 => return Dec::NaN,
            Sinh | Cosh if top > 6 || self.abs().to_f64() > 14200.0 => {
                return if f == Cosh {
                    Dec::Inf(false)
                } else {
                    Dec::Inf(neg)
                };
            }
            Tanh if top > 2 => {
                let one = one_34();
                return if neg { one.negated() } else { one };
            }
            _ => {}
        }
        // Past 10^34, atan(x) is π/2 - 1/x with 1/x at most a tenth of the
        // last of the 34 digits, and π/2's digits past them (0.44 of that
        // last digit) stay under one half: ±π/2 rounded, without carrying
        // |x|'s integer digits.
        if top > 34 && f == Atan {
            let v = pi_times(1, 2);
            return if neg { v.negated() } else { v };
        }
        // Past 10^20, asinh(x) and acosh(x) are ln(2|x|) to within 10^-40 of
        // the result (the next term is 1/(4x²)), below the 34 digits kept;
        // the fixed-point path below would carry all of |x|'s integer digits
        // (up to 6144) through a square root and a logarithm, which took
        // seconds per value and never checked for interruption (a fuzzing
        // finding).
        if top > 20 && matches!(f, Asinh | Acosh) {
            let twice = &c * 2u8;
            let v = ziv(|p| (ln_fixed(&twice, exp, p), -(p as i64)));
            return if neg { v.negated() } else { v };
        }
        ziv(|p| {
            // Enough digits for the result's own leading zeros and for the
            // argument's integer part (argument reduction).
            let w = p + lead + GUARD;
            let q = w + int_digits;
            let x = fixed(neg, &c, exp, q);
            let one = p10(q);
            let v = match f {
                Sin | Cos | Tan => {
                    let half_pi = pi(q + 2) / 200u8;
                    // x = k π/2 + r, |r| <= π/4.
                    let k = div_floor(&(&x * 2u8 + &half_pi), &(&half_pi * 2u8));
                    let r = &x - &k * &half_pi;
                    let quad = (k % 4u8 + 4u8) % 4u8;
                    let quad = u8::try_from(&quad).unwrap_or(0);
                    // `r` is good to scale `w` only (π/2's error times `k`),
                    // so the series runs there, not over the argument's
                    // integer digits too.
                    let r = r / p10(int_digits);
                    let (s, co) = sin_cos(&r, w);
                    let (s, co) = match quad {
                        0 => (s, co),
                        1 => (co, -s),
                        2 => (-s, -co),
                        _ => (-co, s),
                    };
                    let v = match f {
                        Sin => s,
                        Cos => co,
                        _ => {
                            if co.sign() == Sign::NoSign {
                                return (BigInt::from(0u8), 0);
                            }
                            s * p10(w) / co
                        }
                    };
                    return (v / p10(w - p - lead), -((p + lead) as i64));
                }
                Atan => atan_fixed(&x, q),
                Asin | Acos => {
                    let s = (&one * &one - &x * &x).sqrt();
                    let a = if s.sign() == Sign::NoSign {
                        let hp = pi(q) / 2u8;
                        if neg {
                            -hp
                        } else {
                            hp
                        }
                    } else {
                        atan_fixed(&(&x * &one / s), q)
                    };
                    if f == Asin {
                        a
                    } else {
                        pi(q) / 2u8 - a
                    }
                }
                Sinh | Cosh | Tanh => {
                    let ax = BigInt::from(x.magnitude().clone());
                    let (m, inv, e) = exp_pair(&ax, q);
                    let v = match f {
                        Sinh => (&m - &inv) / 2u8,
                        Cosh => (&m + &inv) / 2u8,
                        _ => {
                            let t = (&m - &inv) * &one / (&m + &inv);
                            let t = if neg { -t } else { t };
                            return (t / p10(q - p - lead), -((p + lead) as i64));
                        }
                    };
                    let v = if neg && f == Sinh { -v } else { v };
                    return (v / p10(q - p - lead), e + (q - p - lead) as i64);
                }
                Asinh => {
                    let ax = BigInt::from(x.magnitude().clone());
                    let s = (&ax * &ax + &one * &one).sqrt();
                    let l = ln_of_fixed(&(ax + s), q);
                    if neg {
                        -l
                    } else {
                        l
                    }
                }
                Acosh => {
                    let s = (&x * &x - &one * &one).sqrt();
                    ln_of_fixed(&(&x + s), q)
                }
                Atanh => {
                    let ratio = (&one + &x) * &one / (&one - &x);
                    ln_of_fixed(&ratio, q) / 2u8
                }
                // Answered above.
                DegreesToRadians | RadiansToDegrees => return (BigInt::from(0u8), 0),
            };
            (v / p10(q - p - lead), -((p + lead) as i64))
        })
    }

    /// `atan2(self, x)`: the angle of the point `(x, self)`.
    pub fn atan2(self, x: Dec) -> Dec {
        let y = self;
        if y.is_nan() || x.is_nan() {
            return Dec::NaN;
        }
        let ysign = y.sign();
        let xs = x.cmp_zero();
        let ys = y.cmp_zero();
        let pi_dec = || pi_times(1, 1);
        let signed = |d: Dec| if ysign { d.negated() } else { d };
        match (y, x) {
            (Dec::Inf(_), Dec::Inf(xneg)) => {
                return signed(if xneg { pi_times(3, 4) } else { pi_times(1, 4) });
            }
            (Dec::Inf(_), _) => return signed(pi_times(1, 2)),
            (_, Dec::Inf(false)) => return signed(zero(false)),
            (_, Dec::Inf(true)) => return signed(pi_dec()),
            _ => {}
        }
        if ys == Some(Ordering::Equal) {
            return if x.sign() { signed(pi_dec()) } else { y };
        }
        if xs == Some(Ordering::Equal) {
            return signed(pi_times(1, 2));
        }
        // The ratio y / x is taken in fixed point (rounding it to a decimal
        // first would round twice).
        let (
            Dec::Finite {
                neg: yn,
                coef: yc,
                exp: ye,
            },
            Dec::Finite {
                neg: xn,
                coef: xc,
                exp: xe,
            },
        ) = (y, x)
        else {
            return Dec::NaN;
        };
        let (yc, xc) = (BigUint::from(yc), BigUint::from(xc));
        let top_y = i64::from(ye) + digits(&yc) as i64;
        let top_x = i64::from(xe) + digits(&xc) as i64;
        let spread = (top_y - top_x).unsigned_abs();
        ziv(|p| {
            let w = p + spread + GUARD;
            let q = w + spread;
            let one = p10(q);
            let num = fixed(yn, &yc, i64::from(ye) - top_x, q);
            let den = fixed(xn, &xc, i64::from(xe) - top_x, q);
            let t = num * &one / &den;
            let mut a = atan_fixed(&t, q);
            if xn {
                let pq = pi(q);
                a = if yn { a - pq } else { a + pq };
            }
            (a / p10(q - p - spread), -((p + spread) as i64))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::decimal::tests::d;

    /// Expected values: mpmath at 120 digits rounded half to even to 34.
    #[test]
    fn one_argument_functions() {
        let cases: &[(Trig, &str, &str)] = &[
            (Trig::Sin, "1", "0.8414709848078965066525023216302990"),
            (Trig::Sin, "-2.5", "-0.5984721441039564940518547021861623"),
            (Trig::Sin, "1E+20", "-0.6452512852657808442058117113125230"),
            (
                Trig::Sin,
                "0.001",
                "0.0009999998333333416666664682539710097",
            ),
            (
                Trig::Sin,
                "1E-20",
                "1.000000000000000000000000000000000E-20",
            ),
            (Trig::Cos, "1", "0.5403023058681397174009366074429766"),
            (
                Trig::Cos,
                "3.141592653589793238462643383279503",
                "-1.000000000000000000000000000000000",
            ),
            (Trig::Cos, "1E+10", "0.8731196226768560011761913453076952"),
            (Trig::Tan, "1", "1.557407724654902230506974807458360"),
            (Trig::Tan, "-0.5", "-0.5463024898437905132551794657802854"),
            (Trig::Asin, "0.5", "0.5235987755982988730771072305465838"),
            (Trig::Asin, "-1", "-1.570796326794896619231321691639751"),
            (
                Trig::Asin,
                "0.999999",
                "1.569382113114672367468249895867096",
            ),
            (Trig::Acos, "0.5", "1.047197551196597746154214461093168"),
            (Trig::Acos, "-1", "3.141592653589793238462643383279503"),
            (Trig::Acos, "0", "1.570796326794896619231321691639751"),
            (Trig::Atan, "1", "0.7853981633974483096156608458198757"),
            (Trig::Atan, "-1E+10", "-1.570796326694896619231321691640085"),
            (Trig::Atan, "0.3", "0.2914567944778670919956046214328912"),
            (Trig::Sinh, "1", "1.175201193643801456882381850595601"),
            (
                Trig::Sinh,
                "-0.001",
                "-0.001000000166666675000000198412701168",
            ),
            (Trig::Sinh, "100", "1.344058570908067724206312775790007E+43"),
            (Trig::Cosh, "1", "1.543080634815243778477905620757062"),
            (Trig::Cosh, "-20", "242582597.7048951400151302264900492"),
            (Trig::Tanh, "0.5", "0.4621171572600097585023184836436725"),
            (Trig::Tanh, "-3", "-0.9950547536867304513318801852554885"),
            (Trig::Tanh, "50", "1.000000000000000000000000000000000"),
            (Trig::Asinh, "1", "0.8813735870195430252326093249797923"),
            (
                Trig::Asinh,
                "-1E+30",
                "-69.77069997038131582995697576198910",
            ),
            (Trig::Asinh, "1E+50", "115.8224018302622295103168048556764"),
            // The largest arguments (once seconds each: the fuzz finding).
            (
                Trig::Asinh,
                "1E+6000",
                "13816.20370514483404941736596022764",
            ),
            (
                Trig::Asinh,
                "-9.999999999999999999999999999999999E+6144",
                "-14150.07854362897067359997472115688",
            ),
            (
                Trig::Asinh,
                "123456789E+30",
                "88.40210173654933386315090910995231",
            ),
            (
                Trig::Acosh,
                "1E+6000",
                "13816.20370514483404941736596022764",
            ),
            (
                Trig::Acosh,
                "9.999999999999999999999999999999999E+6144",
                "14150.07854362897067359997472115688",
            ),
            (Trig::Acosh, "2", "1.316957896924816708625046347307968"),
            (
                Trig::Acosh,
                "1.000000000000000000000000000000001",
                "4.472135954999579392818347337462552E-17",
            ),
            (Trig::Atanh, "0.5", "0.5493061443340548456976226184612629"),
            (
                Trig::Atanh,
                "-0.999",
                "-3.800201167250200031775967267809004",
            ),
            (
                Trig::DegreesToRadians,
                "180",
                "3.141592653589793238462643383279503",
            ),
            // mongod's product 45 × kPiOver180 (0.01745329251994329576923690768488613)
            // is 0.78539816339744830961566084581987585, a tie rounded to
            // even; π/4 correctly rounded would end in ...8757.
            (
                Trig::DegreesToRadians,
                "45",
                "0.7853981633974483096156608458198758",
            ),
            (
                Trig::RadiansToDegrees,
                "1",
                "57.29577951308232087679815481410517",
            ),
            // Huge arguments (mpmath at 6,300 digits): reduced modulo π/2
            // with every integer digit, the series then at the result's
            // scale; and mongod's products for the conversions.
            (
                Trig::Sin,
                "1E+6000",
                "-0.7249266534376325863453460198136025",
            ),
            (
                Trig::Cos,
                "1E+6000",
                "-0.6888260645008393834757008024508130",
            ),
            (Trig::Tan, "1E+6000", "1.052408860229401513505574301283600"),
            (
                Trig::Sin,
                "-9.999999999999999999999999999999999E+6144",
                "-0.5582907749092521238056875912416942",
            ),
            (
                Trig::Cos,
                "-9.999999999999999999999999999999999E+6144",
                "-0.8296453523350967216289114223081673",
            ),
            (
                Trig::Tan,
                "1234567890123456789012345678901234E+100",
                "3.503540340551003582540700396649458",
            ),
            (Trig::Atan, "1E+34", "1.570796326794896619231321691639751"),
            (Trig::Atan, "1E+35", "1.570796326794896619231321691639751"),
            (
                Trig::Atan,
                "-1E+6000",
                "-1.570796326794896619231321691639751",
            ),
            (
                Trig::DegreesToRadians,
                "1E+6000",
                "1.745329251994329576923690768488613E+5998",
            ),
            (
                Trig::RadiansToDegrees,
                "-2.5E+6100",
                "-1.432394487827058021919953870352629E+6102",
            ),
            // Exact and special values.
            (Trig::Sin, "0", "0"),
            (Trig::Sin, "-0.00", "-0.00"),
            (Trig::Cos, "0", "1"),
            (Trig::Acos, "1", "0"),
            (Trig::Acosh, "1", "0"),
            (Trig::Asin, "2", "NaN"),
            (Trig::Acosh, "0.5", "NaN"),
            (Trig::Atanh, "1", "Infinity"),
            (Trig::Atanh, "-1", "-Infinity"),
            (Trig::Sin, "Infinity", "NaN"),
            (Trig::Sinh, "-Infinity", "-Infinity"),
            (Trig::Cosh, "-Infinity", "Infinity"),
            (Trig::Tanh, "-Infinity", "-1"),
            (
                Trig::Atan,
                "Infinity",
                "1.570796326794896619231321691639751",
            ),
            (Trig::Sinh, "20000", "Infinity"),
            (Trig::Sin, "NaN", "NaN"),
        ];
        for (f, x, want) in cases {
            let got = d(x).trig(*f);
            assert_eq!(got, d(want), "{f:?}({x}) = {}", got.to_bson());
        }
    }

    #[test]
    fn atan2_table() {
        let cases: &[(&str, &str, &str)] = &[
            ("1", "1", "0.7853981633974483096156608458198757"),
            ("1", "-1", "2.356194490192344928846982537459627"),
            ("-1", "-1", "-2.356194490192344928846982537459627"),
            ("1E-10", "5", "1.999999999999999999999733333333333E-11"),
            ("3", "-4E+20", "3.141592653589793238455143383279503"),
            ("-2", "0.5", "-1.325817663668032465059239210428476"),
            ("0", "-1", "3.141592653589793238462643383279503"),
            ("-0", "1", "-0"),
            ("1", "0", "1.570796326794896619231321691639751"),
            (
                "Infinity",
                "-Infinity",
                "2.356194490192344928846982537459627",
            ),
            ("NaN", "1", "NaN"),
        ];
        for (y, x, want) in cases {
            let got = d(y).atan2(d(x));
            assert_eq!(got, d(want), "atan2({y}, {x}) = {}", got.to_bson());
        }
    }
}
