//! The one interruption mechanism: every operation's context (its deadline from
//! `maxTimeMS` and a kill flag) and the cheap check every long loop makes.
//!
//! A command runs synchronously on one thread (under `block_in_place` when it
//! may scan), so the server makes the command's [`OpCtx`] current on that
//! thread with [`enter`] and every loop below it (storage scans, aggregation
//! stages, sorts, update and delete loops, index builds, the matcher, scripts)
//! calls [`check`] without the context being threaded through every call. The
//! context lives here, in the crate every other crate depends on, so the query
//! layer, the storage layer and the JavaScript engine all read the same flag.
//!
//! Another thread (`killOp`, a connection whose client hung up, shutdown)
//! interrupts the operation with [`OpCtx::kill`]; the operation sees it at its
//! next check and unwinds with the error the killer chose, releasing what it
//! holds as its iterators drop.
//!
//! [`check`] costs one thread-local read and one relaxed atomic load; the clock
//! is read only every [`CLOCK_EVERY`] calls, so the deadline is noticed within
//! that many iterations (a check per document or per key).

use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use crate::{ErrorCode, MongoError, MongoResult};

/// How many [`check`] calls share one clock read.
pub const CLOCK_EVERY: u32 = 64;

/// No deadline (stored in [`OpCtx::deadline`]).
const NO_DEADLINE: u64 = u64::MAX;

/// The instant deadlines are counted from, so one fits an atomic.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

fn to_nanos(at: Instant) -> u64 {
    let nanos = at.saturating_duration_since(epoch()).as_nanos();
    u64::try_from(nanos).unwrap_or(NO_DEADLINE - 1)
}

/// One running operation's interruption state, shared between the thread that
/// runs it and whoever may stop it.
#[derive(Debug)]
pub struct OpCtx {
    /// 0 while the operation may run; else the error code it was killed with.
    killed: AtomicI32,
    /// Nanoseconds after [`epoch`], or [`NO_DEADLINE`].
    deadline: AtomicU64,
    /// The bytes the operation holds (`crate::memory`).
    memory: crate::memory::Tracker,
}

impl Default for OpCtx {
    fn default() -> Self {
        OpCtx::new(None)
    }
}

impl OpCtx {
    /// A context with an optional deadline.
    pub fn new(deadline: Option<Instant>) -> OpCtx {
        OpCtx {
            killed: AtomicI32::new(0),
            deadline: AtomicU64::new(deadline.map_or(NO_DEADLINE, to_nanos)),
            memory: crate::memory::Tracker::default(),
        }
    }

    /// The same context, its memory counted against `pool` (without one an
    /// operation's memory is not bounded).
    pub fn with_memory(mut self, pool: &'static crate::memory::Pool) -> OpCtx {
        self.memory = crate::memory::Tracker::new(pool);
        self
    }

    /// The operation's memory account.
    pub fn memory(&self) -> &crate::memory::Tracker {
        &self.memory
    }

    /// A context whose deadline is `max_time_ms` from now (`0`: none, as in mongod).
    pub fn with_max_time_ms(max_time_ms: u64) -> OpCtx {
        OpCtx::new(deadline_in_ms(max_time_ms))
    }

    /// Interrupts the operation: its next check fails with `code`
    /// (11601 Interrupted for `killOp`, 279 ClientDisconnect, 11600
    /// InterruptedAtShutdown). The first kill wins.
    pub fn kill(&self, code: ErrorCode) {
        let _ = self
            .killed
            .compare_exchange(0, code.code(), Ordering::Relaxed, Ordering::Relaxed);
    }

    /// The code the operation was killed with, if it was.
    pub fn killed(&self) -> Option<ErrorCode> {
        match self.killed.load(Ordering::Relaxed) {
            0 => None,
            c => Some(ErrorCode::from_code(c)),
        }
    }

    /// The operation's deadline, if it has one.
    pub fn deadline(&self) -> Option<Instant> {
        match self.deadline.load(Ordering::Relaxed) {
            NO_DEADLINE => None,
            n => epoch().checked_add(Duration::from_nanos(n)),
        }
    }

    /// Replaces the deadline (`None` lifts it).
    pub fn set_deadline(&self, deadline: Option<Instant>) {
        self.deadline
            .store(deadline.map_or(NO_DEADLINE, to_nanos), Ordering::Relaxed);
    }

    /// The kill flag, then the clock: the error that ends the operation now.
    pub fn check_now(&self) -> MongoResult<()> {
        if let Some(code) = self.killed() {
            return Err(killed_error(code));
        }
        let d = self.deadline.load(Ordering::Relaxed);
        if d != NO_DEADLINE && to_nanos(Instant::now()) >= d {
            return Err(time_limit_error());
        }
        Ok(())
    }
}

/// `max_time_ms` from now (`0`: none).
pub fn deadline_in_ms(max_time_ms: u64) -> Option<Instant> {
    match max_time_ms {
        0 => None,
        ms => Instant::now().checked_add(Duration::from_millis(ms)),
    }
}

/// The thread's operation (what keeps its context alive).
struct Local {
    current: RefCell<Option<Arc<OpCtx>>>,
}

/// What [`check`] reads, with its check counter: the address of the context `LOCAL.current` holds
/// (null: none). A plain pointer needs no destructor, so reading it is one
/// load with no lazy set-up (a thread-local with a destructor checks its
/// state on every access).
struct Fast {
    op: Cell<*const OpCtx>,
    tick: Cell<u32>,
}

thread_local! {
    static LOCAL: Local = const {
        Local {
            current: RefCell::new(None),
        }
    };
    static FAST: Fast = const {
        Fast {
            op: Cell::new(std::ptr::null()),
            tick: Cell::new(0),
        }
    };
}

/// Points [`FAST`] at what `LOCAL.current` now holds.
fn publish(current: &Option<Arc<OpCtx>>) {
    let ptr = current.as_ref().map_or(std::ptr::null(), Arc::as_ptr);
    FAST.with(|f| f.op.set(ptr));
}

/// Restores the thread's previous operation when dropped (scopes nest: a
/// command run inside another, such as `explain`, runs under the outer one).
#[must_use = "the operation is current as long as the guard lives"]
pub struct Guard {
    previous: Option<Arc<OpCtx>>,
}

impl Drop for Guard {
    fn drop(&mut self) {
        let previous = self.previous.take();
        LOCAL.with(|l| {
            let mut cur = l.current.borrow_mut();
            *cur = previous;
            publish(&cur);
        });
    }
}

/// Makes `op` this thread's current operation until the guard drops.
pub fn enter(op: Arc<OpCtx>) -> Guard {
    LOCAL.with(|l| {
        let mut cur = l.current.borrow_mut();
        let previous = cur.replace(op);
        publish(&cur);
        Guard { previous }
    })
}

/// This thread's current operation.
pub fn current() -> Option<Arc<OpCtx>> {
    LOCAL.with(|l| l.current.borrow().clone())
}

/// Restores a deadline changed by [`limit_deadline`] when dropped.
#[must_use = "the deadline lasts as long as the guard"]
pub struct DeadlineGuard {
    op: Arc<OpCtx>,
    previous: Option<Instant>,
    /// Set when [`limit_deadline`] had to make an operation current.
    entered: Option<Guard>,
}

impl Drop for DeadlineGuard {
    fn drop(&mut self) {
        if self.entered.take().is_none() {
            self.op.set_deadline(self.previous);
        }
    }
}

/// Tightens the current operation's deadline to `deadline` until the guard
/// drops (a nested limit never extends an outer one). With no current
/// operation, makes a fresh one current for that long.
pub fn limit_deadline(deadline: Option<Instant>) -> DeadlineGuard {
    match current() {
        Some(op) => {
            let previous = op.deadline();
            let next = match (previous, deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => b.or(a),
            };
            op.set_deadline(next);
            DeadlineGuard {
                op,
                previous,
                entered: None,
            }
        }
        None => {
            let op = Arc::new(OpCtx::new(deadline));
            let entered = Some(enter(op.clone()));
            DeadlineGuard {
                op,
                previous: None,
                entered,
            }
        }
    }
}

/// The current operation's deadline, if any.
pub fn deadline() -> Option<Instant> {
    LOCAL.with(|l| l.current.borrow().as_ref().and_then(|op| op.deadline()))
}

/// The cheap check every long loop makes: fails once the current operation
/// was killed, or (looking at the clock every [`CLOCK_EVERY`] calls) once its
/// deadline has passed. Nothing to do without a current operation.
#[inline]
pub fn check() -> MongoResult<()> {
    FAST.with(|f| {
        let ptr = f.op.get();
        if ptr.is_null() {
            return Ok(());
        }
        // SAFETY: `ptr` is the address of the `Arc<OpCtx>` this thread's
        // `LOCAL.current` holds; `publish` replaces it whenever that changes,
        // so the context is alive while the pointer is set.
        let op = unsafe { &*ptr };
        if let Some(code) = op.killed() {
            return Err(killed_error(code));
        }
        let tick = f.tick.get().wrapping_add(1);
        f.tick.set(tick);
        if tick.is_multiple_of(CLOCK_EVERY) {
            op.check_now()
        } else {
            Ok(())
        }
    })
}

/// Makes the next [`check`] read the clock: after an iteration that may have
/// been long (a backtracking regular expression), so the deadline is seen
/// within one document.
#[inline]
pub fn hurry() {
    FAST.with(|f| f.tick.set(CLOCK_EVERY - 1));
}

/// Like [`check`], reading the clock every time: for loops whose single
/// iteration may be long (a regular expression over a big string, a script).
pub fn check_now() -> MongoResult<()> {
    LOCAL.with(|l| {
        l.current
            .borrow()
            .as_ref()
            .map_or(Ok(()), |op| op.check_now())
    })
}

/// Whether the current operation must stop now (killed or past its deadline).
pub fn interrupted() -> bool {
    check_now().is_err()
}

/// The error the current operation ends with now: its kill's, else 50.
pub fn error() -> MongoError {
    match check_now() {
        Err(e) => e,
        Ok(()) => time_limit_error(),
    }
}

/// mongod's error for an operation that ran past its `maxTimeMS`.
pub fn time_limit_error() -> MongoError {
    MongoError::new(ErrorCode::MaxTimeMSExpired, "operation exceeded time limit")
}

/// mongod's error for an operation killed with `code`.
#[cold]
pub fn killed_error(code: ErrorCode) -> MongoError {
    let message = match code {
        ErrorCode::ClientDisconnect => "operation was interrupted because a client disconnected",
        ErrorCode::InterruptedAtShutdown => "interrupted at shutdown",
        ErrorCode::MaxTimeMSExpired => "operation exceeded time limit",
        _ => "operation was interrupted",
    };
    MongoError::new(code, message)
}

/// Wraps an iterator of results so every item pulled passes [`check`]: an
/// interruption ends the stream with its error.
pub struct Checked<I> {
    inner: I,
    done: bool,
}

impl<I> Checked<I> {
    pub fn new(inner: I) -> Checked<I> {
        Checked { inner, done: false }
    }
}

impl<T, I: Iterator<Item = MongoResult<T>>> Iterator for Checked<I> {
    type Item = MongoResult<T>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        if let Err(e) = check() {
            self.done = true;
            return Some(Err(e));
        }
        self.inner.next()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kill_is_seen_at_the_next_check() {
        let op = Arc::new(OpCtx::default());
        let _g = enter(op.clone());
        assert!(check().is_ok());
        op.kill(ErrorCode::Interrupted);
        assert_eq!(check().unwrap_err().code, ErrorCode::Interrupted);
        // The first kill wins.
        op.kill(ErrorCode::ClientDisconnect);
        assert_eq!(check().unwrap_err().code, ErrorCode::Interrupted);
    }

    #[test]
    fn deadline_is_seen_within_a_clock_interval() {
        let _g = enter(Arc::new(OpCtx::new(Some(Instant::now()))));
        let failed = (0..=CLOCK_EVERY).any(|_| check().is_err());
        assert!(failed);
        assert_eq!(check_now().unwrap_err().code, ErrorCode::MaxTimeMSExpired);
    }

    #[test]
    fn scopes_nest_and_limits_never_extend() {
        assert!(current().is_none());
        let outer = limit_deadline(deadline_in_ms(50));
        let first = deadline();
        {
            let _inner = limit_deadline(deadline_in_ms(60_000));
            assert_eq!(deadline(), first);
        }
        assert_eq!(deadline(), first);
        drop(outer);
        assert!(current().is_none());
        assert!(check().is_ok());
    }

    /// The cost of one check with an operation current (the figure in the
    /// report): `cargo test --release -p bisondb-error -- --ignored --nocapture`.
    #[test]
    #[ignore = "a measurement, not a check"]
    fn cost_of_a_check() {
        let _g = enter(Arc::new(OpCtx::new(deadline_in_ms(600_000))));
        let n = 100_000_000u32;
        let started = Instant::now();
        for _ in 0..n {
            assert!(std::hint::black_box(check()).is_ok());
        }
        let per = started.elapsed().as_secs_f64() * 1e9 / f64::from(n);
        let started = Instant::now();
        for i in 0..n {
            assert!(std::hint::black_box(i) != u32::MAX);
        }
        let empty = started.elapsed().as_secs_f64() * 1e9 / f64::from(n);
        let started = Instant::now();
        for _ in 0..n / 64 {
            std::hint::black_box(Instant::now());
        }
        let clock = started.elapsed().as_secs_f64() * 1e9 / f64::from(n / 64);
        eprintln!(
            "interrupt::check: {per:.2} ns per call (empty loop {empty:.2} ns, one clock read {clock:.0} ns)"
        );
    }
}
