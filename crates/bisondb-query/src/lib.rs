//! placeholder
pub mod agg;
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
