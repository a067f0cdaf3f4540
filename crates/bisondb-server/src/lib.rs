//! The BisonDB server: listeners, the connection loop, the command registry and
//! one module per command, cursors, and the mapping of errors to mongod's replies.
//!
//! Request flow: [`server`] accepts a TCP or Unix-socket connection and hands it to
//! [`connection`], which frames messages with `bisondb-wire`, turns each into a
//! [`request::CommandRequest`], and looks its command up once in the [`registry`],
//! whose [`registry::CommandSpec`] holds all of the command's facts. A command
//! aimed at a view or a time-series collection goes through [`on_view`] first.
//! Handlers live in [`commands`], one file each, named after the command; they
//! parse, execute against [`state::ServerState`] (storage, cursors, counters), and
//! return a reply document.
//!
//! Below the commands, one way down: [`namespaces`] (collection kinds: views,
//! time series, capped, clustered; statistics), [`stages`] (the aggregation
//! stages the server supplies), [`plan`], [`write`], [`cursor`], and the helpers
//! every command shares: [`fields`] (command fields), [`let_vars`], [`storable`],
//! [`reply`], [`context`].

pub mod auth;
pub mod background;
pub mod collation;
pub mod commands;
pub mod config;
pub mod connection;
pub mod context;
pub mod cursor;
pub mod fail_points;
pub mod fields;
pub mod fsync_lock;
pub mod ingress;
pub mod let_vars;
pub mod log;
pub mod logbuf;
pub mod metrics;
pub mod namespaces;
pub mod on_view;
pub mod op_ctx;
pub mod plan;
pub mod profiler;
pub mod registry;
pub mod repl;
pub mod reply;
pub mod request;
pub mod server;
pub mod sessions;
pub mod stages;
pub mod state;
pub mod storable;
pub mod tailable;
pub mod tls;
pub mod ttl;
pub mod txn;
pub mod validation;
pub mod write;

pub use config::{PostgresConfig, ServerConfig};
pub use server::{RunningServer, Server};
