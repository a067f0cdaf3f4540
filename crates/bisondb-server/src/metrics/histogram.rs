//! Latency histograms with mongod's buckets (`opLatencies` with
//! `histograms: true`, `$collStats` `latencyStats`): microseconds, powers of
//! two up to 1024, then steps of 2^k and 1.5 * 2^k up to 2^21, then powers of
//! two up to 2^40. A bucket is named by its lower bound; the metrics endpoint
//! exports the same buckets cumulatively, each `le` the next bucket's bound.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bson::{doc, Bson};

/// The lower bounds of mongod's latency buckets, in microseconds.
pub const LOWER_BOUNDS: [u64; 51] = [
    0,
    2,
    4,
    8,
    16,
    32,
    64,
    128,
    256,
    512,
    1024,
    2048,
    3072,
    4096,
    6144,
    8192,
    12288,
    16384,
    24576,
    32768,
    49152,
    65536,
    98304,
    131072,
    196608,
    262144,
    393216,
    524288,
    786432,
    1048576,
    1572864,
    2097152,
    4194304,
    8388608,
    16777216,
    33554432,
    67108864,
    134217728,
    268435456,
    536870912,
    1073741824,
    2147483648,
    4294967296,
    8589934592,
    17179869184,
    34359738368,
    68719476736,
    137438953472,
    274877906944,
    549755813888,
    1099511627776,
];

/// Counts per bucket, their number and the sum of the latencies.
pub struct Histogram {
    buckets: [AtomicU64; LOWER_BOUNDS.len()],
    count: AtomicU64,
    sum_micros: AtomicU64,
}

impl Default for Histogram {
    fn default() -> Self {
        Histogram {
            buckets: std::array::from_fn(|_| AtomicU64::new(0)),
            count: AtomicU64::new(0),
            sum_micros: AtomicU64::new(0),
        }
    }
}

/// The bucket of a latency: the last whose lower bound is at most `micros`.
fn bucket(micros: u64) -> usize {
    LOWER_BOUNDS
        .partition_point(|&b| b <= micros)
        .saturating_sub(1)
}

impl Histogram {
    /// Records one operation of `took`: three relaxed additions.
    #[inline]
    pub fn record(&self, took: Duration) {
        let micros = u64::try_from(took.as_micros()).unwrap_or(u64::MAX);
        if let Some(b) = self.buckets.get(bucket(micros)) {
            b.fetch_add(1, Ordering::Relaxed);
        }
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_micros.fetch_add(micros, Ordering::Relaxed);
    }

    /// Adds another histogram's counts to this one.
    pub fn merge(&self, other: &Histogram) {
        for (mine, theirs) in self.buckets.iter().zip(other.buckets.iter()) {
            mine.fetch_add(theirs.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.count
            .fetch_add(other.count.load(Ordering::Relaxed), Ordering::Relaxed);
        self.sum_micros
            .fetch_add(other.sum_micros.load(Ordering::Relaxed), Ordering::Relaxed);
    }

    pub fn count(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }

    pub fn sum_micros(&self) -> u64 {
        self.sum_micros.load(Ordering::Relaxed)
    }

    /// `(lower bound, count)` of every bucket, empty ones included.
    pub fn buckets(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        LOWER_BOUNDS
            .iter()
            .zip(self.buckets.iter())
            .map(|(&b, n)| (b, n.load(Ordering::Relaxed)))
    }

    /// mongod's `histogram` array: `{micros, count}` of each non-empty bucket.
    pub fn mongod_buckets(&self) -> Vec<Bson> {
        self.buckets()
            .filter(|(_, n)| *n > 0)
            .map(|(b, n)| Bson::Document(doc! {"micros": b as i64, "count": n as i64}))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latencies_land_in_mongods_buckets() {
        assert_eq!(bucket(0), 0);
        assert_eq!(bucket(1), 0);
        assert_eq!(bucket(2), 1);
        assert_eq!(bucket(1023), 9);
        assert_eq!(bucket(1024), 10);
        assert_eq!(bucket(3071), 11);
        assert_eq!(bucket(3072), 12);
        assert_eq!(bucket(u64::MAX), LOWER_BOUNDS.len() - 1);
        let h = Histogram::default();
        h.record(Duration::from_micros(100));
        h.record(Duration::from_micros(127));
        h.record(Duration::from_millis(5));
        assert_eq!(h.count(), 3);
        assert_eq!(h.sum_micros(), 5227);
        assert_eq!(
            h.mongod_buckets(),
            vec![
                Bson::Document(doc! {"micros": 64i64, "count": 2i64}),
                Bson::Document(doc! {"micros": 4096i64, "count": 1i64}),
            ]
        );
    }
}
