//! placeholder
pub mod compare;
pub mod path;
pub mod matcher;
pub mod sort;
pub mod projection;
pub mod expr;
pub mod update;
pub mod agg;
