//! The BisonDB server: listeners, the connection loop, the command registry and
//! one module per command, cursors, and the mapping of errors to mongod's replies.
//!
//! Request flow: [`server`] accepts a TCP or Unix-socket connection and hands it to
//! [`connection`], which frames messages with `bisondb-wire`, turns each into a
//! [`request::CommandRequest`], and asks the [`registry`] for the command's handler.
//! Handlers live in [`commands`], one file each; they parse, execute against
//! [`state::ServerState`] (storage, cursors, counters), and return a reply document.

pub mod collation;
pub mod commands;
pub mod config;
pub mod connection;
pub mod context;
pub mod cursor;
pub mod fail_points;
pub mod fields;
pub mod let_vars;
pub mod logbuf;
pub mod namespaces;
pub mod on_view;
pub mod plan;
pub mod profiler;
pub mod registry;
pub mod reply;
pub mod request;
pub mod server;
pub mod sessions;
pub mod stages;
pub mod state;
pub mod storable;
pub mod tailable;
pub mod ttl;
pub mod validation;
pub mod write;

pub use config::ServerConfig;
pub use server::{RunningServer, Server};
