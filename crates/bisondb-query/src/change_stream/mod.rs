//! Change streams' pure part: the `$changeStream` stage's argument
//! ([`spec`]), resume tokens that sort in oplog order ([`token`]), and the
//! change events an oplog entry makes ([`event`], with updates'
//! `updateDescription` read from mongod's `$v: 2` diff in [`diff`]), and
//! the fragments of an event too large to return whole ([`split`]).
//!
//! The server reads `local.oplog.rs`, hands each entry to [`event::events`]
//! and adds what needs storage (`fullDocument` by lookup, pre-images); this
//! module does no I/O and is tested with hand-made oplog entries.

pub mod diff;
pub mod event;
pub mod spec;
pub mod split;
pub mod token;

pub use event::{events, Event, Filter, Scope};
pub use spec::{BeforeChange, ChangeStreamSpec, FullDocument, Start};
pub use token::{ResumeToken, TokenKind};
