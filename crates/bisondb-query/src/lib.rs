//! The query language of BisonDB as mongod defines it, as pure logic over BSON
//! documents: what a filter matches, how values compare and sort, what an update
//! or a projection makes of a document, and what an aggregation pipeline yields.
//! The server parses a command's arguments into these types once and runs them
//! over the documents the storage layer reads; storage uses [`index_keys`] and
//! the matcher's index bounds to build and scan indexes.
//!
//! - [`compare`], [`collation`], [`sort`]: mongod's order of BSON values, with
//!   collations (ICU4X), and sort specifications.
//! - [`path`]: dotted paths through documents and arrays.
//! - [`matcher`]: query filters, parsed once, and the index bounds they imply.
//! - [`projection`], [`update`]: find projections and update documents.
//! - [`expr`], [`agg`]: aggregation expressions, accumulators and stages.
//! - [`decimal`], [`text`], [`geo`]: decimal128 arithmetic, text search and
//!   geospatial predicates, each with mongod's semantics.
//! - [`index_keys`]: the keys a document contributes to an index.
//! - [`bsoncolumn`]: the compressed column format of time-series buckets.
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
pub mod matcher;
pub mod path;
pub mod projection;
pub mod sort;
pub mod text;
pub mod update;
