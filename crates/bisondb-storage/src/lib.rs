//! Storage for BisonDB: the persistent engine ([`LsmEngine`], on fjall), and
//! everything written once above the engine contract of `bisondb-engine`
//! (catalog, the `_id`-clustered document store, secondary indexes, the key
//! layout and its order-preserving encoding, per-collection counts and sizes,
//! dbpath ownership).
//!
//! This crate knows nothing about the wire protocol; it speaks raw BSON documents
//! and [`StorageError`] (convertible into `MongoError` with mongod's codes).
//! The contract's types are re-exported here, so the server can name them
//! through one crate.

mod bignum;
mod catalog;
pub mod dbpath;
mod engines;
pub mod error;
mod index;
pub mod keycode;
mod layout;
pub mod lsm;
pub mod observer;
mod store;
#[cfg(test)]
mod testing;

pub use bisondb_engine::error::write_conflicts;
pub use bisondb_engine::{
    BatchOp, Capabilities, Durability, Engine, EngineEntry, EngineError, EngineMetric, KeyValue,
    MemoryEngine, OpenOptions, RemoteOptions, Snapshot, WriteBatch,
};
pub use catalog::{CollectionInfo, DbStats, DiskShare, Storage};
pub use engines::{engine_names, find_engine, store_lsm_options, ENGINES, POSTGRES_ENGINE};
pub use error::{DuplicateKeyInfo, StorageError};
pub use index::{hash_bounds, GeoKind, IndexInfo, IndexScan, IndexSpec};

/// `$indexStats`' view of one index: its name, `accesses.ops` and `accesses.since`.
pub type IndexUsageInfo = (String, u64, bson::DateTime);
pub use keycode::{encode_id, encode_value, hashed_key};
pub use lsm::{KeyRegions, LsmEngine, LsmOptions};
pub use observer::{join_writes, Op, OpObserver, Target};
pub use store::capped::KeyedEntry;
pub use store::{
    id_of, in_transaction, write_plain, Collection, DocIter, IndexReport, InsertOutcome, Modify,
    ModifyResult, NaturalIter, Recorder, StoreTxn, TxnOp, ValidateOptions, ValidateReport,
};
