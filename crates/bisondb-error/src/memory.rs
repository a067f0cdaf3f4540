//! Memory accounting per operation and per server.
//!
//! Every running command's [`OpCtx`](crate::interrupt::OpCtx) carries a
//! [`Tracker`]: the bytes its blocking stages and large parsed arguments hold
//! (`$group` states, `$sort` buffers, join and `$facet` buffers, `$in` lists,
//! big replies). A charge past the operation's limit (mongod's
//! `internalQueryMaxMemoryUsageBytesPerOperation`) fails with 146
//! ExceededMemoryLimit; a stage that can spill spills instead. The trackers of
//! one server draw on one [`Pool`], whose limit bounds the sum of what all
//! operations hold; an operation that would pass it fails with 146 while the
//! others go on.
//!
//! Cheap by construction: a charge is one relaxed add on the operation's own
//! counter; the pool's shared counter is touched only when an operation's
//! bytes pass a whole [`CHUNK`] (1 MiB) reservation, and the first chunk of
//! every operation is free of the pool, so the small operations (an insert, a
//! point `find`) never touch it. Callers charge per buffer or per batch, never
//! per document of an insert. What an operation reserved goes back to the
//! pool when its tracker drops (the operation ended and every stage holding a
//! [`Charge`] for it is gone).

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use crate::interrupt::{self, OpCtx};
use crate::{ErrorCode, MongoError, MongoResult};

/// The pool is drawn on in reservations of this many bytes.
pub const CHUNK: usize = 1 << 20;

/// mongod's 100 MiB blocking-stage default, the per-operation default here.
pub const DEFAULT_OPERATION_LIMIT: usize = 100 * 1024 * 1024;

/// Charges smaller than this are not worth a look at the tracker when they
/// are one-offs of a parse (an `$in` of a few values).
pub const SMALL: usize = 64 * 1024;

/// One server's memory budget: the sum of every operation's reservations,
/// bounded by `limit`, and the per-operation limit its trackers apply.
#[derive(Debug)]
pub struct Pool {
    used: AtomicUsize,
    peak: AtomicUsize,
    limit: AtomicUsize,
    operation_limit: AtomicUsize,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new(usize::MAX, DEFAULT_OPERATION_LIMIT)
    }
}

impl Pool {
    /// A pool that lives as long as the process: a server makes one when it
    /// starts (a test process that starts hundreds of servers keeps a few
    /// KiB), so every command's tracker can refer to it without touching a
    /// shared reference count.
    pub fn leak(pool: Pool) -> &'static Pool {
        Box::leak(Box::new(pool))
    }

    /// A pool bounding all operations to `limit` bytes and each to
    /// `operation_limit`.
    pub fn new(limit: usize, operation_limit: usize) -> Pool {
        Pool {
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            limit: AtomicUsize::new(limit),
            operation_limit: AtomicUsize::new(operation_limit),
        }
    }

    /// The server-wide limit in bytes.
    pub fn limit(&self) -> usize {
        self.limit.load(Ordering::Relaxed)
    }

    pub fn set_limit(&self, bytes: usize) {
        self.limit.store(bytes, Ordering::Relaxed);
    }

    /// The per-operation limit in bytes.
    pub fn operation_limit(&self) -> usize {
        self.operation_limit.load(Ordering::Relaxed)
    }

    pub fn set_operation_limit(&self, bytes: usize) {
        self.operation_limit.store(bytes, Ordering::Relaxed);
    }

    /// Bytes all operations have reserved now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most ever reserved at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Takes `bytes` from the pool, or nothing when that passes its limit.
    fn reserve(&self, bytes: usize) -> bool {
        let before = self.used.fetch_add(bytes, Ordering::Relaxed);
        let after = before.saturating_add(bytes);
        if after > self.limit() {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return false;
        }
        self.peak.fetch_max(after, Ordering::Relaxed);
        true
    }

    fn give_back(&self, bytes: usize) {
        if bytes > 0 {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
        }
    }
}

/// One operation's account: what it holds and what it reserved from its
/// pool (none: the operation is not bounded, as for work outside a command).
#[derive(Debug, Default)]
pub struct Tracker {
    /// `'static`, not counted: a reference count on the pool would be one
    /// cache line every command on every core writes (see [`Pool::leak`]).
    pool: Option<&'static Pool>,
    used: AtomicUsize,
    peak: AtomicUsize,
    reserved: AtomicUsize,
}

impl Tracker {
    /// A tracker drawing on `pool`.
    pub fn new(pool: &'static Pool) -> Tracker {
        Tracker {
            pool: Some(pool),
            used: AtomicUsize::new(0),
            peak: AtomicUsize::new(0),
            reserved: AtomicUsize::new(0),
        }
    }

    /// Bytes the operation holds now.
    pub fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    /// The most the operation held at once.
    pub fn peak(&self) -> usize {
        self.peak.load(Ordering::Relaxed)
    }

    /// Counts `bytes` more, or fails with 146 (nothing counted) when that
    /// passes the operation's limit or the pool's.
    pub fn charge(&self, bytes: usize) -> MongoResult<()> {
        let Some(pool) = self.pool else {
            return Ok(());
        };
        let used = self
            .used
            .fetch_add(bytes, Ordering::Relaxed)
            .saturating_add(bytes);
        let limit = pool.operation_limit();
        if used > limit {
            self.used.fetch_sub(bytes, Ordering::Relaxed);
            return Err(operation_limit_error(used, limit));
        }
        // The first chunk is the operation's own; past it, whole chunks
        // are reserved from the pool.
        let need = used.saturating_sub(CHUNK);
        let reserved = self.reserved.load(Ordering::Relaxed);
        if need > reserved {
            let more = (need - reserved).div_ceil(CHUNK).saturating_mul(CHUNK);
            if !pool.reserve(more) {
                self.used.fetch_sub(bytes, Ordering::Relaxed);
                return Err(server_limit_error(pool.limit()));
            }
            self.reserved.fetch_add(more, Ordering::Relaxed);
        }
        self.peak.fetch_max(used, Ordering::Relaxed);
        Ok(())
    }

    /// Counts `bytes` fewer; whole chunks no longer needed (beyond one
    /// spare) go back to the pool.
    pub fn release(&self, bytes: usize) {
        let Some(pool) = self.pool else {
            return;
        };
        let before = self.used.fetch_sub(bytes, Ordering::Relaxed);
        if before < bytes {
            // More released than charged would be a caller's bug; count zero.
            self.used.store(0, Ordering::Relaxed);
        }
        let need = self.used().saturating_sub(CHUNK);
        let reserved = self.reserved.load(Ordering::Relaxed);
        let keep = need.div_ceil(CHUNK).saturating_add(1).saturating_mul(CHUNK);
        if reserved > keep {
            let spare = reserved - keep;
            if self
                .reserved
                .compare_exchange(reserved, keep, Ordering::Relaxed, Ordering::Relaxed)
                .is_ok()
            {
                pool.give_back(spare);
            }
        }
    }
}

impl Drop for Tracker {
    fn drop(&mut self) {
        if let Some(pool) = &self.pool {
            pool.give_back(*self.reserved.get_mut());
        }
    }
}

/// 146 for an operation past its own limit.
#[cold]
pub fn operation_limit_error(used: usize, limit: usize) -> MongoError {
    MongoError::new(
        ErrorCode::ExceededMemoryLimit,
        format!(
            "operation exceeded its memory limit: {used} bytes needed, the limit is {limit} bytes \
             (internalQueryMaxMemoryUsageBytesPerOperation)"
        ),
    )
}

/// 146 for an operation that would take the server past its limit.
#[cold]
pub fn server_limit_error(limit: usize) -> MongoError {
    MongoError::new(
        ErrorCode::ExceededMemoryLimit,
        format!(
            "operation refused: the server's running operations would pass its memory limit of \
             {limit} bytes (bisondbMaxServerMemoryUsageBytes)"
        ),
    )
}

/// Counts `bytes` against the current operation for as long as it runs (a
/// parsed argument the operation keeps to its end, such as an `$in` list);
/// nothing without a current operation.
pub fn charge(bytes: usize) -> MongoResult<()> {
    match interrupt::current() {
        Some(op) => op.memory().charge(bytes),
        None => Ok(()),
    }
}

/// Bytes a stage holds, counted against the operation that was current when
/// it was made and released when it drops (or as the stage releases them),
/// whichever thread that happens on.
#[derive(Debug, Default)]
pub struct Charge {
    op: Option<Arc<OpCtx>>,
    bytes: usize,
}

impl Charge {
    /// An empty charge on the current operation (none: counts nothing).
    pub fn new() -> Charge {
        Charge {
            op: interrupt::current(),
            bytes: 0,
        }
    }

    /// What it holds now.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Holds `bytes` more, or fails with 146 holding what it held.
    pub fn grow(&mut self, bytes: usize) -> MongoResult<()> {
        if let Some(op) = &self.op {
            op.memory().charge(bytes)?;
        }
        self.bytes = self.bytes.saturating_add(bytes);
        Ok(())
    }

    /// Holds `bytes` fewer.
    pub fn shrink(&mut self, bytes: usize) {
        let bytes = bytes.min(self.bytes);
        if let Some(op) = &self.op {
            op.memory().release(bytes);
        }
        self.bytes -= bytes;
    }

    /// Holds `total` bytes: grows or shrinks to it.
    pub fn set(&mut self, total: usize) -> MongoResult<()> {
        if total >= self.bytes {
            self.grow(total - self.bytes)
        } else {
            self.shrink(self.bytes - total);
            Ok(())
        }
    }

    /// Releases everything.
    pub fn clear(&mut self) {
        self.shrink(self.bytes);
    }
}

impl Drop for Charge {
    fn drop(&mut self) {
        self.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn op_on(pool: &'static Pool) -> Arc<OpCtx> {
        Arc::new(OpCtx::default().with_memory(pool))
    }

    #[test]
    fn small_operations_never_touch_the_pool() {
        let pool = Pool::leak(Pool::new(0, DEFAULT_OPERATION_LIMIT));
        let op = op_on(pool);
        // Within the first chunk: free of the pool, even a pool of 0 bytes.
        op.memory().charge(CHUNK).unwrap();
        assert_eq!(pool.used(), 0);
        assert_eq!(
            op.memory().charge(1).unwrap_err().code,
            ErrorCode::ExceededMemoryLimit
        );
        assert_eq!(op.memory().used(), CHUNK);
    }

    #[test]
    fn the_operation_limit_refuses_and_counts_nothing() {
        let pool = Pool::leak(Pool::new(usize::MAX, 10 * CHUNK));
        let op = op_on(pool);
        op.memory().charge(9 * CHUNK).unwrap();
        assert_eq!(pool.used(), 8 * CHUNK);
        let e = op.memory().charge(2 * CHUNK).unwrap_err();
        assert_eq!(e.code, ErrorCode::ExceededMemoryLimit);
        assert!(e
            .message
            .contains("internalQueryMaxMemoryUsageBytesPerOperation"));
        assert_eq!(op.memory().used(), 9 * CHUNK);
        op.memory().charge(CHUNK).unwrap();
        // Releasing gives whole chunks back, keeping one spare.
        op.memory().release(8 * CHUNK);
        assert_eq!(op.memory().used(), 2 * CHUNK);
        assert_eq!(pool.used(), 2 * CHUNK);
        drop(op);
        assert_eq!(pool.used(), 0);
        assert_eq!(pool.peak(), 9 * CHUNK);
    }

    #[test]
    fn the_server_limit_fails_one_operation_and_not_the_others() {
        let pool = Pool::leak(Pool::new(4 * CHUNK, usize::MAX));
        let big = op_on(pool);
        let small = op_on(pool);
        big.memory().charge(4 * CHUNK).unwrap();
        assert_eq!(pool.used(), 3 * CHUNK);
        let e = big.memory().charge(2 * CHUNK).unwrap_err();
        assert!(e.message.contains("bisondbMaxServerMemoryUsageBytes"));
        // The other operation still gets its free chunk and the last one.
        small.memory().charge(2 * CHUNK).unwrap();
        assert_eq!(pool.used(), 4 * CHUNK);
        assert!(small.memory().charge(CHUNK).is_err());
        drop(big);
        assert_eq!(pool.used(), CHUNK);
        small.memory().charge(CHUNK).unwrap();
        drop(small);
        assert_eq!(pool.used(), 0);
    }

    #[test]
    fn charges_follow_their_operation_and_release_on_drop() {
        let pool = Pool::leak(Pool::new(usize::MAX, 8 * CHUNK));
        let op = op_on(pool);
        let guard = interrupt::enter(op.clone());
        let mut c = Charge::new();
        c.grow(5 * CHUNK).unwrap();
        charge(2 * CHUNK).unwrap();
        assert!(c.grow(2 * CHUNK).is_err());
        assert_eq!(c.bytes(), 5 * CHUNK);
        c.set(CHUNK).unwrap();
        assert_eq!(op.memory().used(), 3 * CHUNK);
        drop(guard);
        // Released from another scope (the stage outlived its command).
        std::thread::spawn(move || drop(c)).join().unwrap();
        assert_eq!(op.memory().used(), 2 * CHUNK);
        // Without a current operation nothing is counted.
        assert!(charge(usize::MAX).is_ok());
        let mut none = Charge::new();
        none.grow(usize::MAX).unwrap();
    }
}
