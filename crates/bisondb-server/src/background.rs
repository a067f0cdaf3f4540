//! Periodic background work: one loop that waits a full interval before its
//! first pass, as mongod's monitors do, and stops at shutdown
//! ([`spawn_periodic`]; the transaction reaper uses it as it is). The
//! writers (the TTL monitor, the session cache's refresh) run each pass off
//! the runtime behind the `fsync` write gate, so a pass waits while the files
//! are locked for a snapshot ([`spawn_periodic_writes`]).

use std::sync::Arc;
use std::time::Duration;

use bisondb_error::MongoResult;

use crate::state::ServerState;

/// Runs `pass` every `every` until shutdown, the first time after a full
/// interval; the runtime task that periodic work (the writers below, the
/// transaction reaper) shares.
pub fn spawn_periodic<F, Fut>(
    state: Arc<ServerState>,
    every: Duration,
    mut pass: F,
) -> tokio::task::JoinHandle<()>
where
    F: FnMut(Arc<ServerState>) -> Fut + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every.max(Duration::from_millis(1)));
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The first tick fires at once; wait a full interval first.
        tick.tick().await;
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = state.shutdown.notified() => break,
            }
            if state.is_shutting_down() {
                break;
            }
            pass(state.clone()).await;
        }
    })
}

/// Runs `pass` every `every` until shutdown; `report` logs each outcome (the
/// outer `Err` is a pass that panicked or was cancelled).
pub fn spawn_periodic_writes<T: Send + 'static>(
    state: Arc<ServerState>,
    every: Duration,
    pass: fn(&ServerState) -> MongoResult<T>,
    report: fn(Result<MongoResult<T>, tokio::task::JoinError>),
) -> tokio::task::JoinHandle<()> {
    spawn_periodic(state, every, move |st| async move {
        let task = move || {
            let _gate = st.fsync_lock.enter(|| st.is_shutting_down())?;
            pass(&st)
        };
        report(tokio::task::spawn_blocking(task).await);
    })
}
