//! placeholder
pub mod compare;
pub mod path;
