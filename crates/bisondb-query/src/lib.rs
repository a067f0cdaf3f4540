//! placeholder
pub mod compare;
