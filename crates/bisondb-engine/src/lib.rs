//! The storage engine contract of BisonDB, in the spirit of TiKV's
//! `engine_traits`: an engine is an ordered byte-key/byte-value store that
//! implements [`Engine`] (atomic write batches, a durability barrier) and
//! [`Snapshot`] (consistent point-in-time reads), and fails with
//! [`EngineError`].
//!
//! Beyond batches and snapshots every engine offers read-write
//! [`Transaction`]s with mongod's conflict rules (first writer wins), either
//! natively or through [`LocalTransactions`], the layer the engines in this
//! process share; and declares its [`Capabilities`]: whether it persists,
//! whether its calls may block (a network store, run off the async runtime),
//! and whether it can read again at a [`CommitPoint`]
//! ([`Engine::snapshot_at`]).
//!
//! Everything above (catalog, documents, indexes, the key layout) lives in
//! `bisondb-storage` and is written once against these traits; so are the
//! engines that need a file format (`lsm` on fjall), and the engine table
//! whose rows are [`EngineEntry`]s. This crate holds only what every engine
//! shares: the traits, [`MemoryEngine`] (the reference model), and, behind
//! the `conformance` feature, the tests every engine must pass. It depends on
//! no file format, async runtime or query code.

mod engine;
pub mod entry;
pub mod error;
pub mod memory;
pub mod txn;

#[cfg(any(test, feature = "conformance"))]
pub mod conformance;

pub use engine::{
    owned_bound, prefix_successor, range_is_empty, BatchOp, Capabilities, CommitPoint, Durability,
    Engine, EngineMetric, KeyValue, Snapshot, WriteBatch,
};
pub use entry::{EngineEntry, OpenOptions, RemoteOptions};
pub use error::EngineError;
pub use memory::MemoryEngine;
pub use txn::{CommitGuard, LocalTransactions, Transaction};
