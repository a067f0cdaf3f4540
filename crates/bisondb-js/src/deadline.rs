//! The running operation's time limit (`maxTimeMS`), per thread.
//!
//! A command runs synchronously on one thread (under `block_in_place` when it
//! may scan), so the server sets the deadline around the command with
//! [`scope`] and everything below it can ask [`check`] without the deadline
//! being threaded through every call. The JavaScript engine's interrupt handler
//! and `sleep()` read it too, which is what ends a long `$where`.

use std::cell::Cell;
use std::time::{Duration, Instant};

use bisondb_error::{ErrorCode, MongoError, MongoResult};

thread_local! {
    static DEADLINE: Cell<Option<Instant>> = const { Cell::new(None) };
}

/// Restores the previous deadline when dropped (scopes nest).
#[must_use = "the deadline lasts as long as the guard"]
pub struct Guard {
    previous: Option<Instant>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        DEADLINE.with(|d| d.set(self.previous));
    }
}

/// Sets this thread's deadline until the guard drops; `None` lifts it. A
/// nested scope never extends an outer deadline.
pub fn scope(deadline: Option<Instant>) -> Guard {
    DEADLINE.with(|d| {
        let previous = d.get();
        let next = match (previous, deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => b.or(a),
        };
        d.set(next);
        Guard { previous }
    })
}

/// A deadline `max_time_ms` milliseconds from now (`0`: none, as in mongod).
pub fn scope_ms(max_time_ms: u64) -> Guard {
    let deadline = match max_time_ms {
        0 => None,
        ms => Instant::now().checked_add(Duration::from_millis(ms)),
    };
    scope(deadline)
}

/// This thread's deadline, if any.
pub fn current() -> Option<Instant> {
    DEADLINE.with(|d| d.get())
}

/// Whether the deadline has passed.
pub fn expired() -> bool {
    current().is_some_and(|d| Instant::now() >= d)
}

/// 50 MaxTimeMSExpired once the deadline has passed.
pub fn check() -> MongoResult<()> {
    if expired() {
        Err(error())
    } else {
        Ok(())
    }
}

/// mongod's error for an operation that ran past its `maxTimeMS`.
pub fn error() -> MongoError {
    MongoError::new(ErrorCode::MaxTimeMSExpired, "operation exceeded time limit")
}
