//! Storage for BisonDB: the engine-neutral [`Engine`] trait, the engines
//! ([`MemoryEngine`], the reference model, and [`LsmEngine`], the persistent
//! default on fjall), and everything written once above it (catalog, the
//! `_id`-clustered document store, the order-preserving key encoding,
//! per-collection counts and sizes, dbpath ownership).
//!
//! This crate knows nothing about the wire protocol; it speaks raw BSON documents
//! and [`StorageError`] (convertible into `MongoError` with mongod's codes).

mod bignum;
mod catalog;
#[cfg(any(test, feature = "conformance"))]
pub mod conformance;
pub mod dbpath;
pub mod engine;
pub mod error;
mod index;
pub mod keycode;
mod layout;
pub mod lsm;
pub mod memory;
mod store;
#[cfg(test)]
mod testing;

pub use catalog::{CollectionInfo, DbStats, DiskShare, Storage};
pub use engine::{BatchOp, Durability, Engine, KeyValue, Snapshot, WriteBatch};
pub use error::{DuplicateKeyInfo, StorageError};
pub use index::{hash_bounds, GeoKind, IndexInfo, IndexScan, IndexSpec};

/// `$indexStats`' view of one index: its name, `accesses.ops` and `accesses.since`.
pub type IndexUsageInfo = (String, u64, bson::DateTime);
pub use keycode::{encode_id, encode_value, hashed_key};
pub use lsm::{LsmEngine, LsmOptions};
pub use memory::MemoryEngine;
pub use store::{
    id_of, Collection, DocIter, IndexReport, InsertOutcome, Modify, ModifyResult, NaturalIter,
    ValidateOptions, ValidateReport,
};
