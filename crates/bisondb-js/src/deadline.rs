//! The running operation's time limit and kill flag, as scripts see them.
//!
//! The operation's context is `bisondb_error::interrupt`'s, shared with every
//! other loop of the server: the server makes it current on the thread that
//! runs the command, and the JavaScript engine's interrupt handler and
//! `sleep()` read it here, which is what ends a long `$where` on `maxTimeMS`,
//! `killOp`, a client that disconnected or shutdown.

use std::time::Instant;

use bisondb_error::interrupt;
use bisondb_error::{MongoError, MongoResult};

/// Restores the previous deadline when dropped (scopes nest).
pub type Guard = interrupt::DeadlineGuard;

/// Limits this thread's operation to `deadline` until the guard drops; `None`
/// keeps the current one. A nested scope never extends an outer deadline.
pub fn scope(deadline: Option<Instant>) -> Guard {
    interrupt::limit_deadline(deadline)
}

/// A deadline `max_time_ms` milliseconds from now (`0`: none, as in mongod).
pub fn scope_ms(max_time_ms: u64) -> Guard {
    scope(interrupt::deadline_in_ms(max_time_ms))
}

/// This thread's deadline, if any.
pub fn current() -> Option<Instant> {
    interrupt::deadline()
}

/// Whether the operation must stop: killed, or past its deadline.
pub fn expired() -> bool {
    interrupt::interrupted()
}

/// The operation's interruption as an error (50 MaxTimeMSExpired, 11601...).
pub fn check() -> MongoResult<()> {
    interrupt::check_now()
}

/// The error that ends the interrupted operation (50 MaxTimeMSExpired unless
/// it was killed).
pub fn error() -> MongoError {
    interrupt::error()
}
