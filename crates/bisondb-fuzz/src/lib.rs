//! BisonDB's fuzzing: targets that stay in the repository.
//!
//! - [`targets`]: each target is a plain `fn(&[u8])` (message framing, BSON
//!   validation, command parsing, the matcher, expressions, pipelines, updates)
//!   that must return for every input; a panic is a finding.
//! - [`gen`]: bytes → valid BSON built from a target's vocabulary, so most
//!   inputs reach the parsers' semantics.
//! - [`seeds`]: real inputs each target starts from.
//! - [`driver`]: a mutational driver on stable Rust (`bisondb-fuzz run`, and the
//!   short run `cargo test -p bisondb-fuzz` makes in CI); `fuzz/` runs the same
//!   functions under cargo-fuzz/libFuzzer on nightly.
//! - `bisondb-fuzz-live` (`src/bin/live.rs`): random valid commands against a
//!   running server, checking its invariants.

#[cfg(feature = "server")]
pub mod command;
pub mod driver;
pub mod gen;
pub mod seeds;
pub mod targets;

pub use targets::{target, Target, TARGETS};
