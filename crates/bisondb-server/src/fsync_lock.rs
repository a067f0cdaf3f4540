//! The write gate of `fsync: 1, lock: true` and `fsyncUnlock`, as mongod's
//! fsyncLock: while the lock count is above zero, every write waits (it does
//! not fail) before it touches storage, so the data files flushed by the
//! locking `fsync` stay as they are and a filesystem snapshot or copy of the
//! dbpath is consistent. Reads go on.
//!
//! Writes pass the gate with two atomic operations when it is open (the
//! insert path is hot): a writer announces itself in `in_flight`, then looks
//! at `locked`; the locker sets `locked`, then waits for `in_flight` to drain.
//! Both sides use sequentially consistent order, so either the writer sees
//! the lock (and steps back to wait) or the locker sees the writer (and waits
//! for it to finish). A waiting writer blocks its thread on a condition
//! variable; the connection moves such a write off the async runtime's worker
//! first (`connection::dispatch_command`), and the wait gives up with
//! InterruptedAtShutdown when the server shuts down, so a lock left held never
//! keeps the server from stopping.

use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use bson::RawDocument;
use parking_lot::{Condvar, Mutex};

use crate::registry::CommandSpec;

/// How often a waiter looks at the shutdown flag (the condition variable is
/// also signalled on unlock, so this bounds only the shutdown latency).
const RECHECK: Duration = Duration::from_millis(100);

/// The gate; one per server, in [`crate::state::ServerState`].
#[derive(Default)]
pub struct FsyncLock {
    /// mongod's `lockCount`: `fsync` with `lock: true` adds one, `fsyncUnlock`
    /// takes one away; writes wait while it is above zero.
    count: AtomicU32,
    /// Writes past the gate and not finished yet.
    in_flight: AtomicU64,
    /// Serializes lock changes and carries the wake-ups.
    mutex: Mutex<()>,
    changed: Condvar,
}

/// A write's pass through the gate; the lock waits for it to be dropped.
pub struct WritePass<'a> {
    gate: &'a FsyncLock,
}

impl Drop for WritePass<'_> {
    fn drop(&mut self) {
        if self.gate.in_flight.fetch_sub(1, Ordering::SeqCst) == 1
            && self.gate.count.load(Ordering::SeqCst) > 0
        {
            // The last write a locker may be waiting for.
            let _g = self.gate.mutex.lock();
            self.gate.changed.notify_all();
        }
    }
}

impl FsyncLock {
    /// The current lock count.
    pub fn lock_count(&self) -> u32 {
        self.count.load(Ordering::SeqCst)
    }

    pub fn is_locked(&self) -> bool {
        self.lock_count() > 0
    }

    /// Lets a write through, waiting while the lock is held; fails with
    /// InterruptedAtShutdown when `shutting_down` turns true while waiting.
    pub fn enter(&self, shutting_down: impl Fn() -> bool) -> MongoResult<WritePass<'_>> {
        loop {
            self.in_flight.fetch_add(1, Ordering::SeqCst);
            if self.count.load(Ordering::SeqCst) == 0 {
                return Ok(WritePass { gate: self });
            }
            // Step back so the locker does not wait for this write, then wait.
            drop(WritePass { gate: self });
            let mut g = self.mutex.lock();
            while self.count.load(Ordering::SeqCst) > 0 {
                if shutting_down() {
                    return Err(MongoError::new(
                        ErrorCode::InterruptedAtShutdown,
                        "interrupted at shutdown",
                    ));
                }
                self.changed.wait_for(&mut g, RECHECK);
            }
        }
    }

    /// A pass only if the gate is open now (`None` while locked): for work
    /// that may change the files but can be skipped rather than wait (the
    /// flush before a size report, see `ServerState::flush_for_sizes`).
    pub fn try_enter(&self) -> Option<WritePass<'_>> {
        self.in_flight.fetch_add(1, Ordering::SeqCst);
        let pass = WritePass { gate: self };
        (self.count.load(Ordering::SeqCst) == 0).then_some(pass)
    }

    /// Adds one to the lock count and waits until every write already past
    /// the gate has finished; returns the new count. The caller then flushes
    /// the data files.
    pub fn lock(&self) -> u32 {
        let mut g = self.mutex.lock();
        let n = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        while self.in_flight.load(Ordering::SeqCst) > 0 {
            self.changed.wait_for(&mut g, RECHECK);
        }
        n
    }

    /// Takes one away from the lock count (None: it was not locked) and wakes
    /// the waiting writes when it reaches zero.
    pub fn unlock(&self) -> Option<u32> {
        let _g = self.mutex.lock();
        let n = self.count.load(Ordering::SeqCst);
        if n == 0 {
            return None;
        }
        self.count.store(n - 1, Ordering::SeqCst);
        if n == 1 {
            self.changed.notify_all();
        }
        Some(n - 1)
    }
}

/// Whether a command writes, and so waits at the gate: the commands whose
/// spec says they take a write concern (a served `commitTransaction` will say
/// so too), an aggregation ending in `$out` or `$merge`, and a `mapReduce`
/// into a collection.
pub fn is_write(spec: &CommandSpec, name: &str, body: &RawDocument) -> bool {
    use crate::fail_points::{ends_in_out_or_merge, is_map_reduce, map_reduce_writes};
    spec.write_concern
        || (name == "aggregate" && ends_in_out_or_merge(body))
        || (is_map_reduce(name) && map_reduce_writes(body))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::Arc;

    #[test]
    fn writes_wait_while_locked_and_the_lock_waits_for_writes() {
        let gate = Arc::new(FsyncLock::default());
        let pass = gate.enter(|| false).unwrap();
        let locker = {
            let gate = gate.clone();
            std::thread::spawn(move || gate.lock())
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !locker.is_finished(),
            "the lock waits for the write in flight"
        );
        drop(pass);
        assert_eq!(locker.join().unwrap(), 1);
        let done = Arc::new(AtomicBool::new(false));
        let writer = {
            let (gate, done) = (gate.clone(), done.clone());
            std::thread::spawn(move || {
                let _p = gate.enter(|| false).unwrap();
                done.store(true, Ordering::SeqCst);
            })
        };
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "the write waits");
        assert_eq!(gate.lock(), 2);
        assert_eq!(gate.unlock(), Some(1));
        std::thread::sleep(Duration::from_millis(50));
        assert!(!done.load(Ordering::SeqCst), "still locked once");
        assert_eq!(gate.unlock(), Some(0));
        writer.join().unwrap();
        assert!(done.load(Ordering::SeqCst));
        assert_eq!(gate.unlock(), None);
    }

    #[test]
    fn a_waiting_write_ends_at_shutdown() {
        let gate = FsyncLock::default();
        gate.lock();
        let e = gate.enter(|| true).err().unwrap();
        assert_eq!(e.code, ErrorCode::InterruptedAtShutdown);
    }
}
