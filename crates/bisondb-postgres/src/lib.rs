//! The `postgres` storage engine: BisonDB's engine contract
//! (`bisondb_engine::{Engine, Snapshot, Transaction}`) over one table of a
//! PostgreSQL-wire database (PostgreSQL, and by design CockroachDB and
//! YugabyteDB), so several stateless BisonDB servers can share one store and
//! lean on its replication and failover.
//!
//! The mapping (see [`sql`] for the statements):
//! - every key and value of the store is one row of `bisondb_kv (k bytea
//!   primary key, v bytea)`: bytea compares as unsigned bytes, the order the
//!   contract asks for, so range scans are index range scans in either
//!   direction, read in bounded pages by keyset pagination;
//! - a write batch is one transaction of at most two statements, sent
//!   together: a `DELETE ... WHERE k = ANY($1)` and an `INSERT ... SELECT
//!   FROM unnest($1, $2) ON CONFLICT (k) DO UPDATE` carrying every key as
//!   arrays (never one statement per key); it is durable once it commits, so
//!   `Durability::Sync` costs nothing more. Inside a transaction (every
//!   plain write of a shared store is one) keys the writer found absent
//!   (`BatchOp::Insert`: a new document's record, `_id` and index entries)
//!   go in by a binary `COPY` when there are at least 64 of them, under a
//!   savepoint that falls back to the upsert if one exists after all;
//! - a snapshot is a read-only `REPEATABLE READ` transaction on a connection
//!   of the pool, held as long as the snapshot (a cursor's scan keeps one);
//! - a [`bisondb_engine::Transaction`] is a `REPEATABLE READ` transaction
//!   whose writes go to the store at once, each under a savepoint with a short
//!   `lock_timeout`: a key another open transaction wrote fails at once
//!   (lock not available), a key changed by a commit after the snapshot fails
//!   with the store's serialization failure; both are `WriteConflict`, and the
//!   transaction stays usable.
//!
//! The engine's calls are synchronous; the async client (`tokio-postgres`,
//! pooled by `deadpool-postgres`, statements prepared once per connection)
//! runs on the engine's own small runtime, and a call waits for its task. The
//! engine says `blocking_io`, so the server calls it off its async workers.

mod engine;
mod error;
pub mod sql;
pub mod tls;
mod txn;

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tls_tests;

pub use engine::{PostgresEngine, CAPABILITIES, ENGINE_NAME, FORMAT_VERSION};
pub use error::map_error;
pub use tls::{TlsMode, TlsSettings};
