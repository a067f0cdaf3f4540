//! mongod's ingress connection establishment rate limiter (8.0.x, 8.2): a
//! token bucket that new connections pass before their first message is read,
//! so a connection storm cannot swamp the server.
//!
//! Off by default. `setParameter` turns it on and tunes it with mongod's
//! parameters: `ingressConnectionEstablishmentRateLimiterEnabled`,
//! `...RatePerSec` (tokens added per second), `...BurstCapacitySecs` (the
//! bucket holds that many seconds' worth of tokens) and `...MaxQueueDepth`
//! (how many connections may wait for a token). A connection that finds no
//! token and a full queue is closed at once, before its handshake: drivers
//! see a network error while establishing it, which the backpressure
//! specification tells them not to treat as a server failure (no pool clear).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bisondb_error::{MongoError, MongoResult};
use bson::Bson;
use parking_lot::Mutex;

/// The parameters' names, as `setParameter` and `getParameter` spell them.
pub const ENABLED: &str = "ingressConnectionEstablishmentRateLimiterEnabled";
pub const RATE_PER_SEC: &str = "ingressConnectionEstablishmentRatePerSec";
pub const BURST_CAPACITY_SECS: &str = "ingressConnectionEstablishmentBurstCapacitySecs";
pub const MAX_QUEUE_DEPTH: &str = "ingressConnectionEstablishmentMaxQueueDepth";

/// The limiter's settings and its bucket.
#[derive(Debug)]
pub struct RateLimiter {
    enabled: AtomicBool,
    /// Connections waiting for a token now.
    queued: AtomicU64,
    /// Connections closed for want of a token (serverStatus-style counter).
    rejected: AtomicU64,
    bucket: Mutex<Bucket>,
}

#[derive(Debug)]
struct Bucket {
    rate_per_sec: i32,
    burst_capacity_secs: f64,
    max_queue_depth: i64,
    /// Below zero: tokens already promised to waiting connections.
    tokens: f64,
    refilled: Instant,
}

impl Default for RateLimiter {
    /// mongod's defaults: off, an unbounded rate and burst, no queue.
    fn default() -> Self {
        RateLimiter {
            enabled: AtomicBool::new(false),
            queued: AtomicU64::new(0),
            rejected: AtomicU64::new(0),
            bucket: Mutex::new(Bucket {
                rate_per_sec: i32::MAX,
                burst_capacity_secs: f64::MAX,
                max_queue_depth: 0,
                tokens: 0.0,
                refilled: Instant::now(),
            }),
        }
    }
}

impl Bucket {
    fn capacity(&self) -> f64 {
        (f64::from(self.rate_per_sec) * self.burst_capacity_secs).max(1.0)
    }

    fn refill(&mut self, now: Instant) {
        let elapsed = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + elapsed * f64::from(self.rate_per_sec)).min(self.capacity());
        self.refilled = now;
    }
}

impl RateLimiter {
    /// Waits for a token for a new connection: `true` to serve it, `false`
    /// to close it (no token and the queue full). One atomic load while the
    /// limiter is off.
    pub async fn admit(&self) -> bool {
        if !self.enabled.load(Ordering::Relaxed) {
            return true;
        }
        let wait = {
            let mut b = self.bucket.lock();
            b.refill(Instant::now());
            if b.tokens >= 1.0 {
                b.tokens -= 1.0;
                return true;
            }
            let queued = self.queued.load(Ordering::Relaxed);
            if i64::try_from(queued).unwrap_or(i64::MAX) >= b.max_queue_depth {
                self.rejected.fetch_add(1, Ordering::Relaxed);
                return false;
            }
            // Promise the next token to this connection: it waits until
            // the bucket has refilled past it.
            b.tokens -= 1.0;
            self.queued.fetch_add(1, Ordering::Relaxed);
            Duration::from_secs_f64((-b.tokens).max(0.0) / f64::from(b.rate_per_sec))
        };
        tokio::time::sleep(wait).await;
        self.queued.fetch_sub(1, Ordering::Relaxed);
        true
    }

    /// Connections closed because no token was left for them.
    pub fn rejected(&self) -> u64 {
        self.rejected.load(Ordering::Relaxed)
    }

    /// The value of one of the limiter's parameters, for `getParameter`.
    pub fn get(&self, name: &str) -> Option<Bson> {
        let b = self.bucket.lock();
        Some(match name {
            ENABLED => Bson::Boolean(self.enabled.load(Ordering::Relaxed)),
            RATE_PER_SEC => Bson::Int32(b.rate_per_sec),
            BURST_CAPACITY_SECS => Bson::Double(b.burst_capacity_secs),
            MAX_QUEUE_DEPTH => Bson::Int64(b.max_queue_depth),
            _ => return None,
        })
    }

    /// Sets one of the limiter's parameters (`setParameter`), validated as
    /// mongod's IDL does (a rate of at least 1, a burst above 0, a queue
    /// depth of 0 or more); returns the value it had.
    pub fn set(&self, name: &str, value: &Bson) -> MongoResult<Bson> {
        let old = self.get(name).unwrap_or(Bson::Null);
        let number = || match value {
            Bson::Int32(n) => Some(f64::from(*n)),
            Bson::Int64(n) => Some(*n as f64),
            Bson::Double(d) if d.is_finite() => Some(*d),
            _ => None,
        };
        let bad = || MongoError::bad_value(format!("Invalid value for parameter {name}: {value}"));
        let mut b = self.bucket.lock();
        b.refill(Instant::now());
        match name {
            ENABLED => {
                let Bson::Boolean(on) = value else {
                    return Err(bad());
                };
                // A limiter turned on starts with a full bucket.
                if *on && !self.enabled.load(Ordering::Relaxed) {
                    b.tokens = b.capacity();
                }
                self.enabled.store(*on, Ordering::Relaxed);
            }
            RATE_PER_SEC => match number() {
                Some(n) if n.fract() == 0.0 && (1.0..=f64::from(i32::MAX)).contains(&n) => {
                    b.rate_per_sec = n as i32;
                    b.tokens = b.tokens.min(b.capacity());
                }
                _ => return Err(bad()),
            },
            BURST_CAPACITY_SECS => match number() {
                Some(n) if n > 0.0 => {
                    b.burst_capacity_secs = n;
                    b.tokens = b.tokens.min(b.capacity());
                }
                _ => return Err(bad()),
            },
            MAX_QUEUE_DEPTH => match number() {
                Some(n) if n.fract() == 0.0 && (0.0..9.2e18).contains(&n) => {
                    b.max_queue_depth = n as i64;
                }
                _ => return Err(bad()),
            },
            _ => return Err(bad()),
        }
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_full_queue_rejects_and_tokens_refill() {
        let l = RateLimiter::default();
        assert!(l.admit().await, "off: everything passes");
        l.set(RATE_PER_SEC, &Bson::Int32(20)).unwrap();
        l.set(BURST_CAPACITY_SECS, &Bson::Double(0.1)).unwrap();
        l.set(MAX_QUEUE_DEPTH, &Bson::Int32(0)).unwrap();
        assert_eq!(
            l.set(ENABLED, &Bson::Boolean(true)).unwrap(),
            Bson::Boolean(false)
        );
        // A burst of 0.1 s at 20/s holds 2 tokens.
        assert!(l.admit().await);
        assert!(l.admit().await);
        assert!(!l.admit().await, "no token, no queue");
        assert_eq!(l.rejected(), 1);
        tokio::time::sleep(Duration::from_millis(120)).await;
        assert!(l.admit().await, "refilled");
        assert!(l.set(RATE_PER_SEC, &Bson::Int32(0)).is_err());
        assert!(l.set(MAX_QUEUE_DEPTH, &Bson::Int32(-1)).is_err());
        assert_eq!(l.get(RATE_PER_SEC), Some(Bson::Int32(20)));
    }

    #[tokio::test]
    async fn a_queued_connection_waits_for_its_token() {
        let l = RateLimiter::default();
        l.set(RATE_PER_SEC, &Bson::Int32(10)).unwrap();
        l.set(BURST_CAPACITY_SECS, &Bson::Double(0.1)).unwrap();
        l.set(MAX_QUEUE_DEPTH, &Bson::Int32(1)).unwrap();
        l.set(ENABLED, &Bson::Boolean(true)).unwrap();
        assert!(l.admit().await);
        let started = Instant::now();
        assert!(l.admit().await, "queued, then served");
        assert!(started.elapsed() >= Duration::from_millis(80));
    }
}
