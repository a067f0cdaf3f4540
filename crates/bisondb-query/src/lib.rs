//! The query language of BisonDB as mongod defines it, as pure logic over BSON
//! documents: what a filter matches, how values compare and sort, what an update
//! or a projection makes of a document, and what an aggregation pipeline yields.
//! The server parses a command's arguments into these types once and runs them
//! over the documents the storage layer reads; storage uses [`index_keys`] and
//! the matcher's index bounds to build and scan indexes.
//!
//! The modules form layers, each using only the layers below it (the test
//! `tests/layers.rs` fails on a use that points up or sideways), bottom first:
//!
//! - [`decimal`], [`bsoncolumn`], `js`: decimal128 arithmetic, the compressed
//!   column format of time-series buckets, the bridge to `bisondb-js`.
//! - [`value`]: type names, rendering for messages, truthiness, numeric
//!   promotion, memory estimates.
//! - [`collation`], [`path`], `stats`: collations (ICU4X), dotted paths through
//!   documents and arrays, percentiles.
//! - [`compare`], `key`: mongod's order of BSON values, and the canonical key
//!   of a value for grouping and set membership.
//! - [`text`], [`geo`]: text search (and the text scores later stages read)
//!   and geospatial predicates, each with mongod's semantics.
//! - [`expr`]: aggregation expressions.
//! - [`matcher`]: query filters, parsed once, and the index bounds they imply.
//! - [`sort`], [`projection`], [`index_keys`]: sort specifications, find
//!   projections, the keys a document contributes to an index.
//! - [`agg`]: pipeline stages and accumulators (and pipeline-style updates,
//!   which are pipelines).
//! - [`update`]: update documents.
//! - [`change_stream`]: change events.
//!
//! Nothing here does I/O, except the spill files of blocking aggregation
//! stages; `$where` and `$function` run JavaScript through `bisondb-js`.
pub mod agg;
pub mod bsoncolumn;
pub mod change_stream;
pub mod collation;
pub mod compare;
pub mod decimal;
pub mod expr;
pub mod geo;
pub mod index_keys;
mod js;
pub(crate) mod key;
pub mod matcher;
pub mod path;
pub mod projection;
pub mod sort;
mod stats;
pub mod text;
pub mod update;
pub mod value;
