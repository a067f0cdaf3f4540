//! `$bucketAuto`'s `granularity`: rounds bucket boundaries up and down to a
//! preferred number series (Renard R5..R80, the E series E6..E192 of IEC 60063,
//! 1-2-5) or to powers of two, as mongod's granularity rounders do. Rounding
//! is strict both ways: a value already in the series rounds to its
//! neighbour, so a bucket's exclusive `max` is always above its last value.

use crate::value::type_name;
use bisondb_error::{MongoError, MongoResult};
use bson::Bson;

/// One decade of each series, scaled to whole numbers so that boundaries in
/// the common ranges (tens, hundreds) come out as exact doubles.
const R5: &[f64] = &[10.0, 16.0, 25.0, 40.0, 63.0];
const R10: &[f64] = &[
    100.0, 125.0, 160.0, 200.0, 250.0, 315.0, 400.0, 500.0, 630.0, 800.0,
];
const R20: &[f64] = &[
    100.0, 112.0, 125.0, 140.0, 160.0, 180.0, 200.0, 224.0, 250.0, 280.0, 315.0, 355.0, 400.0,
    450.0, 500.0, 560.0, 630.0, 710.0, 800.0, 900.0,
];
const R40: &[f64] = &[
    100.0, 106.0, 112.0, 118.0, 125.0, 132.0, 140.0, 150.0, 160.0, 170.0, 180.0, 190.0, 200.0,
    212.0, 224.0, 236.0, 250.0, 265.0, 280.0, 300.0, 315.0, 335.0, 355.0, 375.0, 400.0, 425.0,
    450.0, 475.0, 500.0, 530.0, 560.0, 600.0, 630.0, 670.0, 710.0, 750.0, 800.0, 850.0, 900.0,
    950.0,
];
const R80: &[f64] = &[
    100.0, 103.0, 106.0, 109.0, 112.0, 115.0, 118.0, 122.0, 125.0, 128.0, 132.0, 136.0, 140.0,
    145.0, 150.0, 155.0, 160.0, 165.0, 170.0, 175.0, 180.0, 185.0, 190.0, 195.0, 200.0, 206.0,
    212.0, 218.0, 224.0, 230.0, 236.0, 243.0, 250.0, 258.0, 265.0, 272.0, 280.0, 290.0, 300.0,
    307.0, 315.0, 325.0, 335.0, 345.0, 355.0, 365.0, 375.0, 387.0, 400.0, 412.0, 425.0, 437.0,
    450.0, 462.0, 475.0, 487.0, 500.0, 515.0, 530.0, 545.0, 560.0, 580.0, 600.0, 615.0, 630.0,
    650.0, 670.0, 690.0, 710.0, 730.0, 750.0, 775.0, 800.0, 825.0, 850.0, 875.0, 900.0, 925.0,
    950.0, 975.0,
];
const ONE_TWO_FIVE: &[f64] = &[10.0, 20.0, 50.0];
const E6: &[f64] = &[10.0, 15.0, 22.0, 33.0, 47.0, 68.0];
const E12: &[f64] = &[
    10.0, 12.0, 15.0, 18.0, 22.0, 27.0, 33.0, 39.0, 47.0, 56.0, 68.0, 82.0,
];
const E24: &[f64] = &[
    10.0, 11.0, 12.0, 13.0, 15.0, 16.0, 18.0, 20.0, 22.0, 24.0, 27.0, 30.0, 33.0, 36.0, 39.0, 43.0,
    47.0, 51.0, 56.0, 62.0, 68.0, 75.0, 82.0, 91.0,
];
const E48: &[f64] = &[
    100.0, 105.0, 110.0, 115.0, 121.0, 127.0, 133.0, 140.0, 147.0, 154.0, 162.0, 169.0, 178.0,
    187.0, 196.0, 205.0, 215.0, 226.0, 237.0, 249.0, 261.0, 274.0, 287.0, 301.0, 316.0, 332.0,
    348.0, 365.0, 383.0, 402.0, 422.0, 442.0, 464.0, 487.0, 511.0, 536.0, 562.0, 590.0, 619.0,
    649.0, 681.0, 715.0, 750.0, 787.0, 825.0, 866.0, 909.0, 953.0,
];
const E96: &[f64] = &[
    100.0, 102.0, 105.0, 107.0, 110.0, 113.0, 115.0, 118.0, 121.0, 124.0, 127.0, 130.0, 133.0,
    137.0, 140.0, 143.0, 147.0, 150.0, 154.0, 158.0, 162.0, 165.0, 169.0, 174.0, 178.0, 182.0,
    187.0, 191.0, 196.0, 200.0, 205.0, 210.0, 215.0, 221.0, 226.0, 232.0, 237.0, 243.0, 249.0,
    255.0, 261.0, 267.0, 274.0, 280.0, 287.0, 294.0, 301.0, 309.0, 316.0, 324.0, 332.0, 340.0,
    348.0, 357.0, 365.0, 374.0, 383.0, 392.0, 402.0, 412.0, 422.0, 432.0, 442.0, 453.0, 464.0,
    475.0, 487.0, 499.0, 511.0, 523.0, 536.0, 549.0, 562.0, 576.0, 590.0, 604.0, 619.0, 634.0,
    649.0, 665.0, 681.0, 698.0, 715.0, 732.0, 750.0, 768.0, 787.0, 806.0, 825.0, 845.0, 866.0,
    887.0, 909.0, 931.0, 953.0, 976.0,
];
const E192: &[f64] = &[
    100.0, 101.0, 102.0, 104.0, 105.0, 106.0, 107.0, 109.0, 110.0, 111.0, 113.0, 114.0, 115.0,
    117.0, 118.0, 120.0, 121.0, 123.0, 124.0, 126.0, 127.0, 129.0, 130.0, 132.0, 133.0, 135.0,
    137.0, 138.0, 140.0, 142.0, 143.0, 145.0, 147.0, 149.0, 150.0, 152.0, 154.0, 156.0, 158.0,
    160.0, 162.0, 164.0, 165.0, 167.0, 169.0, 172.0, 174.0, 176.0, 178.0, 180.0, 182.0, 184.0,
    187.0, 189.0, 191.0, 193.0, 196.0, 198.0, 200.0, 203.0, 205.0, 208.0, 210.0, 213.0, 215.0,
    218.0, 221.0, 223.0, 226.0, 229.0, 232.0, 234.0, 237.0, 240.0, 243.0, 246.0, 249.0, 252.0,
    255.0, 258.0, 261.0, 264.0, 267.0, 271.0, 274.0, 277.0, 280.0, 284.0, 287.0, 291.0, 294.0,
    298.0, 301.0, 305.0, 309.0, 312.0, 316.0, 320.0, 324.0, 328.0, 332.0, 336.0, 340.0, 344.0,
    348.0, 352.0, 357.0, 361.0, 365.0, 370.0, 374.0, 379.0, 383.0, 388.0, 392.0, 397.0, 402.0,
    407.0, 412.0, 417.0, 422.0, 427.0, 432.0, 437.0, 442.0, 448.0, 453.0, 459.0, 464.0, 470.0,
    475.0, 481.0, 487.0, 493.0, 499.0, 505.0, 511.0, 517.0, 523.0, 530.0, 536.0, 542.0, 549.0,
    556.0, 562.0, 569.0, 576.0, 583.0, 590.0, 597.0, 604.0, 612.0, 619.0, 626.0, 634.0, 642.0,
    649.0, 657.0, 665.0, 673.0, 681.0, 690.0, 698.0, 706.0, 715.0, 723.0, 732.0, 741.0, 750.0,
    759.0, 768.0, 777.0, 787.0, 796.0, 806.0, 816.0, 825.0, 835.0, 845.0, 856.0, 866.0, 876.0,
    887.0, 898.0, 909.0, 920.0, 931.0, 942.0, 953.0, 965.0, 976.0, 988.0,
];

/// A parsed `granularity`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Granularity {
    /// A preferred number series: one decade, ascending.
    Series(&'static [f64]),
    PowersOf2,
}

impl Granularity {
    pub(crate) fn parse(v: &Bson) -> MongoResult<Granularity> {
        let Bson::String(name) = v else {
            return Err(MongoError::location(
                40261,
                format!(
                    "The $bucketAuto 'granularity' field must be a string, but found type: {}",
                    type_name(v)
                ),
            ));
        };
        Ok(match name.as_str() {
            "R5" => Granularity::Series(R5),
            "R10" => Granularity::Series(R10),
            "R20" => Granularity::Series(R20),
            "R40" => Granularity::Series(R40),
            "R80" => Granularity::Series(R80),
            "1-2-5" => Granularity::Series(ONE_TWO_FIVE),
            "E6" => Granularity::Series(E6),
            "E12" => Granularity::Series(E12),
            "E24" => Granularity::Series(E24),
            "E48" => Granularity::Series(E48),
            "E96" => Granularity::Series(E96),
            "E192" => Granularity::Series(E192),
            "POWERSOF2" => Granularity::PowersOf2,
            other => {
                return Err(MongoError::location(
                    40257,
                    format!("Unknown rounding granularity '{other}'"),
                ))
            }
        })
    }

    /// The smallest boundary strictly above `v` (0 stays 0).
    pub(crate) fn round_up(&self, v: &Bson) -> Bson {
        match self {
            // Zero is its own boundary, of its own type.
            Granularity::Series(_) if number(v) == 0.0 => v.clone(),
            Granularity::Series(s) => Bson::Double(series_up(number(v), s)),
            Granularity::PowersOf2 => pow2(v, true),
        }
    }

    /// The largest boundary strictly below `v` (0 stays 0).
    pub(crate) fn round_down(&self, v: &Bson) -> Bson {
        match self {
            Granularity::Series(_) if number(v) == 0.0 => v.clone(),
            Granularity::Series(s) => Bson::Double(series_down(number(v), s)),
            Granularity::PowersOf2 => pow2(v, false),
        }
    }
}

/// Checks a `groupBy` value before it is bucketed: only non-negative,
/// non-NaN numbers can be rounded.
pub(crate) fn check_value(v: &Bson) -> MongoResult<()> {
    if !matches!(
        v,
        Bson::Int32(_) | Bson::Int64(_) | Bson::Double(_) | Bson::Decimal128(_)
    ) {
        return Err(MongoError::location(
            40258,
            format!(
                "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a value with type: {}",
                type_name(v)
            ),
        ));
    }
    let x = number(v);
    if x.is_nan() {
        return Err(MongoError::location(
            40259,
            "$bucketAuto can specify a 'granularity' with numeric boundaries only, but found a NaN",
        ));
    }
    if x < 0.0 {
        return Err(MongoError::location(
            40260,
            "$bucketAuto can specify a 'granularity' with non-negative numbers only, but found a negative number",
        ));
    }
    Ok(())
}

fn number(v: &Bson) -> f64 {
    match v {
        Bson::Int32(i) => f64::from(*i),
        Bson::Int64(i) => *i as f64,
        Bson::Double(d) => *d,
        Bson::Decimal128(d) => d.to_string().parse().unwrap_or(f64::NAN),
        _ => f64::NAN,
    }
}

/// Scales the decade until `x` falls in it, then takes the first element
/// above `x`; a value between one decade's last element and the next's
/// first rounds to that first element.
fn series_up(x: f64, s: &[f64]) -> f64 {
    let (Some(&first), Some(&last)) = (s.first(), s.last()) else {
        return x;
    };
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let mut m = 1.0;
    while x >= last * m {
        m *= 10.0;
    }
    while x < first * m {
        let previous_min = first * m;
        m /= 10.0;
        if x >= last * m {
            return previous_min;
        }
    }
    s.iter()
        .map(|e| e * m)
        .find(|e| x < *e)
        .unwrap_or(first * m * 10.0)
}

/// The mirror of [`series_up`]: the last element strictly below `x`.
fn series_down(x: f64, s: &[f64]) -> f64 {
    let (Some(&first), Some(&last)) = (s.first(), s.last()) else {
        return x;
    };
    if x == 0.0 || !x.is_finite() {
        return x;
    }
    let mut m = 1.0;
    while x <= first * m {
        m /= 10.0;
        if m == 0.0 {
            return 0.0;
        }
    }
    while x > last * m {
        let previous_max = last * m;
        m *= 10.0;
        if x <= first * m {
            return previous_max;
        }
    }
    s.iter()
        .map(|e| e * m)
        .take_while(|e| *e < x)
        .last()
        .unwrap_or(first * m)
}

/// Powers of two keep an integer's type (a long once an int would
/// overflow); doubles stay doubles.
fn pow2(v: &Bson, up: bool) -> Bson {
    let int = match v {
        Bson::Int32(i) => Some((i64::from(*i), true)),
        Bson::Int64(i) => Some((*i, false)),
        _ => None,
    };
    if let Some((i, was_int)) = int {
        if i <= 0 {
            return v.clone();
        }
        // i > 0, so the casts below are lossless.
        let u = i as u64;
        let r = if up {
            1u64.checked_shl(64 - u.leading_zeros()).unwrap_or(0)
        } else if u == 1 {
            0
        } else {
            1u64 << (63 - (u - 1).leading_zeros())
        };
        return match (i32::try_from(r), i64::try_from(r)) {
            (Ok(r), _) if was_int => Bson::Int32(r),
            (_, Ok(r)) => Bson::Int64(r),
            _ => Bson::Double(r as f64),
        };
    }
    let x = number(v);
    if x == 0.0 || !x.is_finite() {
        return Bson::Double(x);
    }
    let e = x.log2();
    let p = if up { e.floor() + 1.0 } else { e.ceil() - 1.0 };
    Bson::Double(2f64.powf(p))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn g(name: &str) -> Granularity {
        Granularity::parse(&Bson::String(name.into())).unwrap()
    }

    #[test]
    fn series_have_their_sizes() {
        for (s, n) in [
            (R5, 5),
            (R10, 10),
            (R20, 20),
            (R40, 40),
            (R80, 80),
            (E6, 6),
            (E12, 12),
            (E24, 24),
            (E48, 48),
            (E96, 96),
            (E192, 192),
        ] {
            assert_eq!(s.len(), n);
            assert!(s.windows(2).all(|w| w[0] < w[1]));
        }
    }

    #[test]
    fn rounds_strictly() {
        let cases: &[(&str, Bson, Bson, Bson)] = &[
            // (granularity, value, round_up, round_down)
            ("R5", Bson::Int32(3), Bson::Double(4.0), Bson::Double(2.5)),
            ("R5", Bson::Int32(4), Bson::Double(6.3), Bson::Double(2.5)),
            ("R5", Bson::Int32(7), Bson::Double(10.0), Bson::Double(6.3)),
            (
                "R20",
                Bson::Int32(150),
                Bson::Double(160.0),
                Bson::Double(140.0),
            ),
            (
                "E6",
                Bson::Double(0.8),
                Bson::Double(1.0),
                Bson::Double(0.68),
            ),
            (
                "1-2-5",
                Bson::Int32(30),
                Bson::Double(50.0),
                Bson::Double(20.0),
            ),
            ("1-2-5", Bson::Int32(0), Bson::Int32(0), Bson::Int32(0)),
            (
                "E12",
                Bson::Int32(1000),
                Bson::Double(1200.0),
                Bson::Double(820.0),
            ),
            ("POWERSOF2", Bson::Int32(8), Bson::Int32(16), Bson::Int32(4)),
            ("POWERSOF2", Bson::Int32(5), Bson::Int32(8), Bson::Int32(4)),
            ("POWERSOF2", Bson::Int64(1), Bson::Int64(2), Bson::Int64(0)),
            (
                "POWERSOF2",
                Bson::Double(0.3),
                Bson::Double(0.5),
                Bson::Double(0.25),
            ),
            (
                "POWERSOF2",
                Bson::Int32(i32::MAX),
                Bson::Int64(1 << 31),
                Bson::Int32(1 << 30),
            ),
        ];
        for (name, v, up, down) in cases {
            let r = g(name);
            let (u, d) = (r.round_up(v), r.round_down(v));
            let close = |a: &Bson, b: &Bson| match (a, b) {
                (Bson::Double(x), Bson::Double(y)) => (x - y).abs() < 1e-9,
                _ => a == b,
            };
            assert!(close(&u, up), "{name} up {v}: {u}");
            assert!(close(&d, down), "{name} down {v}: {d}");
        }
    }

    #[test]
    fn errors() {
        assert_eq!(
            Granularity::parse(&Bson::String("R7".into()))
                .unwrap_err()
                .code
                .code(),
            40257
        );
        assert_eq!(
            Granularity::parse(&Bson::Int32(5)).unwrap_err().code.code(),
            40261
        );
        for (v, code) in [
            (Bson::String("a".into()), 40258),
            (Bson::Null, 40258),
            (Bson::Double(f64::NAN), 40259),
            (Bson::Int32(-1), 40260),
        ] {
            assert_eq!(check_value(&v).unwrap_err().code.code(), code, "{v}");
        }
        assert!(check_value(&Bson::Int32(0)).is_ok());
    }
}
