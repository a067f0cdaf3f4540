//! The server's log as mongod 4.4+ writes it: one JSON object per line
//! (`t`, `s`, `c`, `id`, `ctx`, `msg`, `attr`), built on `tracing`.
//!
//! Call sites are ordinary `tracing` macros. The event's *target* names the
//! component (`target: "NETWORK"`; a target that is a module path maps to the
//! component of its crate, see [`component_of`]), and its fields carry the rest:
//! `id` (mongod's message id, or one of BisonDB's own from [`ids`]), `ctx` (the
//! thread or connection name; `conn = n` stands for `ctx: "connN"`), and every
//! other field becomes an `attr` entry. A field wrapped in [`Json`] is written
//! as a JSON value (a document as relaxed extended JSON) instead of a string.
//!
//! Which events are emitted is decided per callsite from the verbosities here
//! ([`set_verbosity`]: `--verbose`, `systemLog.component.*.verbosity`,
//! `setParameter logComponentVerbosity`): tracing caches that answer in the
//! callsite, so a disabled line costs one load and nothing is formatted. A
//! change of verbosity rebuilds those caches.
//!
//! Severities: ERROR `E`, WARN `W`, INFO `I`, DEBUG `D1`, TRACE `D2` (tracing
//! has two debug levels where mongod has five: verbosity 2 to 5 show the same
//! lines). Libraries' own events (the storage library's INFO lines) need
//! verbosity 1 to show at INFO; their warnings and errors always show.

mod line;
mod output;
pub mod slow;

use std::sync::atomic::{AtomicBool, AtomicI8, Ordering};

use tracing::level_filters::LevelFilter;
use tracing::subscriber::Interest;
use tracing::{Event, Metadata, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

pub use line::{redact, Json, Line};
pub use output::{Destination, RotateMode};

/// mongod's log components: the name `logComponentVerbosity` and
/// `systemLog.component` use, and the tag in a line's `c`.
pub const COMPONENTS: &[(&str, &str)] = &[
    ("accessControl", "ACCESS"),
    ("command", "COMMAND"),
    ("control", "CONTROL"),
    ("geo", "GEO"),
    ("index", "INDEX"),
    ("network", "NETWORK"),
    ("query", "QUERY"),
    ("replication", "REPL"),
    ("sharding", "SHARDING"),
    ("storage", "STORAGE"),
    ("transaction", "TXN"),
    ("write", "WRITE"),
];

/// Message ids. mongod's where BisonDB writes the same message; BisonDB's own
/// messages use ids from 1_000_000_000 up, far above mongod's (7 digits).
pub mod ids {
    /// mongod's "Connection accepted".
    pub const CONNECTION_ACCEPTED: u64 = 22943;
    /// mongod's "Connection ended".
    pub const CONNECTION_ENDED: u64 = 22944;
    /// mongod's "client metadata".
    pub const CLIENT_METADATA: u64 = 51800;
    /// mongod's "Slow query".
    pub const SLOW_QUERY: u64 = 51803;
    /// mongod's "Waiting for connections".
    pub const WAITING_FOR_CONNECTIONS: u64 = 23016;
    /// mongod's "MongoDB starting".
    pub const STARTING: u64 = 4615611;
    /// mongod's "Build Info".
    pub const BUILD_INFO: u64 = 23403;
    /// mongod's "Options set by command line".
    pub const OPTIONS: u64 = 21951;
    /// mongod's "Log rotation initiated".
    pub const LOG_ROTATION: u64 = 23166;
    /// BisonDB's own: the first of its range.
    pub const OWN: u64 = 1_000_000_000;
    /// BisonDB's "Listening on a Unix socket".
    pub const UNIX_SOCKET: u64 = OWN + 1;
    /// mongod's "Received signal" (SIGTERM, SIGINT).
    pub const RECEIVED_SIGNAL: u64 = 23377;
    /// mongod's "Now exiting".
    pub const NOW_EXITING: u64 = 20565;
    /// mongod's "Shutting down" (with `exitCode`), the last line.
    pub const SHUTTING_DOWN: u64 = 23138;
    /// BisonDB's "Shutdown requested by command".
    pub const SHUTDOWN_REQUESTED: u64 = OWN + 2;
    /// BisonDB's "Shutdown complete".
    pub const SHUTDOWN_COMPLETE: u64 = OWN + 3;
    /// BisonDB's "Command failed" (debug).
    pub const COMMAND_FAILED: u64 = OWN + 4;
    /// BisonDB's "Log file renamed at start-up" (no `--logappend`).
    pub const LOG_RENAMED: u64 = OWN + 5;
    /// BisonDB's "Serving metrics" (`--metricsAddr`).
    pub const BISONDB_METRICS_LISTENING: u64 = OWN + 6;
}

/// `-1`: inherit the global level (index 0). Index i + 1 is `COMPONENTS[i]`.
static VERBOSITY: [AtomicI8; COMPONENTS.len() + 1] = {
    let mut v = [const { AtomicI8::new(-1) }; COMPONENTS.len() + 1];
    v[0] = AtomicI8::new(0);
    v
};
static QUIET: AtomicBool = AtomicBool::new(false);
static REDACT: AtomicBool = AtomicBool::new(false);

/// The verbosity of `component` (`None`: the global `logLevel`), -1 meaning
/// "inherit" for a component.
pub fn verbosity(component: Option<&str>) -> i8 {
    VERBOSITY[slot(component).unwrap_or(0)].load(Ordering::Relaxed)
}

/// Sets a verbosity (0 to 5; -1 for a component: inherit). Unknown component
/// names are an error naming it.
pub fn set_verbosity(component: Option<&str>, level: i8) -> Result<(), String> {
    let i = match component {
        None => 0,
        Some(c) => slot(Some(c)).ok_or_else(|| format!("unknown log component '{c}'"))?,
    };
    let level = level.clamp(if i == 0 { 0 } else { -1 }, 5);
    VERBOSITY[i].store(level, Ordering::Relaxed);
    tracing::callsite::rebuild_interest_cache();
    Ok(())
}

/// `systemLog.quiet`: only warnings and errors.
pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
    tracing::callsite::rebuild_interest_cache();
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// `--redactClientLogData`: client data in log lines becomes `"###"`.
pub fn set_redact(on: bool) {
    REDACT.store(on, Ordering::Relaxed);
}

pub fn redacting() -> bool {
    REDACT.load(Ordering::Relaxed)
}

/// A client's document for a log attribute: relaxed extended JSON, or every
/// value `"###"` under `--redactClientLogData`.
pub fn client_data(d: &bson::RawDocument) -> Json {
    let v = bson::Document::try_from(d)
        .map(|d| bson::Bson::Document(d).into_relaxed_extjson())
        .unwrap_or(serde_json::Value::Null);
    Json(if redacting() { redact(v) } else { v })
}

/// The verbosities as `getParameter logComponentVerbosity` reports them.
pub fn component_verbosity_doc() -> bson::Document {
    let mut d = bson::doc! {"verbosity": i32::from(verbosity(None))};
    for (name, _) in COMPONENTS {
        d.insert(
            *name,
            bson::doc! {"verbosity": i32::from(verbosity(Some(name)))},
        );
    }
    d
}

fn slot(component: Option<&str>) -> Option<usize> {
    match component {
        None => Some(0),
        Some(c) => COMPONENTS
            .iter()
            .position(|(name, tag)| *name == c || *tag == c)
            .map(|i| i + 1),
    }
}

/// The effective verbosity of the component tagged `tag`.
fn effective(tag: &str) -> i8 {
    let own = COMPONENTS
        .iter()
        .position(|(_, t)| *t == tag)
        .map_or(-1, |i| VERBOSITY[i + 1].load(Ordering::Relaxed));
    if own >= 0 {
        own
    } else {
        VERBOSITY[0].load(Ordering::Relaxed)
    }
}

/// The component tag of an event's target: a tag itself, or a module path
/// mapped by crate (a library outside BisonDB is `"-"` or `STORAGE`, with
/// `third_party` set).
pub fn component_of(target: &str) -> (&'static str, bool) {
    if let Some((_, tag)) = COMPONENTS.iter().find(|(_, t)| *t == target) {
        return (tag, false);
    }
    let krate = target.split("::").next().unwrap_or(target);
    match krate {
        "bisondb_storage" | "bisondb_engine" => ("STORAGE", false),
        "bisondb_query" => ("QUERY", false),
        "bisondb_server" => {
            let module = target.split("::").nth(1).unwrap_or("");
            let tag = match module {
                "server" | "connection" => "NETWORK",
                "ttl" => "INDEX",
                "commands" | "profiler" | "fail_points" => "COMMAND",
                "write" => "WRITE",
                // mongod's "Document would fail validation" (20294) is STORAGE's.
                "validation" => "STORAGE",
                _ => "-",
            };
            (tag, false)
        }
        "bisondb" | "bisondb_wire" | "bisondb_js" => ("-", false),
        "fjall" | "lsm_tree" | "value_log" => ("STORAGE", true),
        _ => ("-", true),
    }
}

/// Whether an event of this callsite is written now.
fn enabled(meta: &Metadata<'_>) -> bool {
    enabled_for(meta.target(), *meta.level())
}

fn enabled_for(target: &str, level: tracing::Level) -> bool {
    let (tag, third_party) = component_of(target);
    let v = effective(tag) - i8::from(third_party);
    if level <= tracing::Level::WARN {
        return true;
    }
    if QUIET.load(Ordering::Relaxed) && level == tracing::Level::INFO {
        return false;
    }
    match level {
        tracing::Level::INFO => v >= 0,
        tracing::Level::DEBUG => v >= 1,
        _ => v >= 2,
    }
}

/// The tracing layer that writes mongod's lines to the destination and to
/// `getLog`'s ring ([`crate::logbuf`]).
pub struct MongoLogLayer;

impl<S: Subscriber> Layer<S> for MongoLogLayer {
    fn register_callsite(&self, meta: &'static Metadata<'static>) -> Interest {
        if enabled(meta) {
            Interest::always()
        } else {
            Interest::never()
        }
    }

    fn enabled(&self, meta: &Metadata<'_>, _ctx: Context<'_, S>) -> bool {
        enabled(meta)
    }

    fn max_level_hint(&self) -> Option<LevelFilter> {
        let max = VERBOSITY
            .iter()
            .map(|v| v.load(Ordering::Relaxed))
            .max()
            .unwrap_or(0);
        Some(match max {
            i8::MIN..=0 => LevelFilter::INFO,
            1 => LevelFilter::DEBUG,
            _ => LevelFilter::TRACE,
        })
    }

    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let line = Line::from_event(event);
        let json = line.to_json();
        output::write(&line, &json);
        crate::logbuf::push(json);
    }
}

/// Sets the process's log up: destination, verbosities, redaction, and the
/// global tracing subscriber. Called once by the binary before the server
/// starts; the server's in-process tests never call it.
pub fn install(config: &crate::ServerConfig) -> Result<(), String> {
    use tracing_subscriber::layer::SubscriberExt;
    use tracing_subscriber::util::SubscriberInitExt;
    QUIET.store(config.quiet, Ordering::Relaxed);
    REDACT.store(config.redact_client_log_data, Ordering::Relaxed);
    VERBOSITY[0].store(config.verbosity.clamp(0, 5), Ordering::Relaxed);
    for (name, v) in &config.component_verbosity {
        let i = slot(Some(name)).ok_or_else(|| format!("unknown log component '{name}'"))?;
        VERBOSITY[i].store((*v).clamp(-1, 5), Ordering::Relaxed);
    }
    let renamed = output::open(config)?;
    tracing_subscriber::registry()
        .with(MongoLogLayer)
        .try_init()
        .map_err(|e| format!("cannot install the logger: {e}"))?;
    if let Some(old) = renamed {
        tracing::info!(target: "CONTROL", id = ids::LOG_RENAMED, ctx = "initandlisten",
            renamedTo = %old.display(), "Log file renamed at start-up");
    }
    Ok(())
}

/// `logRotate` / SIGUSR1: renames the log file with a time suffix and opens a
/// new one (`systemLog.logRotate: rename`), or reopens the file under its
/// name (`reopen`, after an outside tool moved it). Nothing to do when the
/// log goes to standard output.
pub fn rotate() -> Result<(), String> {
    tracing::info!(target: "CONTROL", id = ids::LOG_ROTATION, "Log rotation initiated");
    output::rotate()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tracing::Level;

    #[test]
    fn components_of_targets() {
        assert_eq!(component_of("NETWORK"), ("NETWORK", false));
        assert_eq!(component_of("bisondb_storage::lsm"), ("STORAGE", false));
        assert_eq!(
            component_of("bisondb_server::connection"),
            ("NETWORK", false)
        );
        assert_eq!(component_of("fjall::db"), ("STORAGE", true));
        assert_eq!(component_of("hyper::proto"), ("-", true));
    }

    /// The only test that changes the process's verbosities (others would
    /// race with it).
    #[test]
    fn verbosities_decide_what_is_written() {
        assert!(enabled_for("QUERY", Level::INFO));
        assert!(!enabled_for("QUERY", Level::DEBUG));
        assert!(
            !enabled_for("fjall::db", Level::INFO),
            "library INFO is noise"
        );
        assert!(enabled_for("fjall::db", Level::WARN));

        set_verbosity(Some("query"), 1).unwrap();
        assert!(enabled_for("QUERY", Level::DEBUG));
        assert!(!enabled_for("QUERY", Level::TRACE));
        assert!(
            !enabled_for("COMMAND", Level::DEBUG),
            "others keep the global level"
        );
        assert_eq!(verbosity(Some("query")), 1);
        let d = component_verbosity_doc();
        assert_eq!(
            d.get_document("query").unwrap().get_i32("verbosity").ok(),
            Some(1)
        );
        assert_eq!(d.get_i32("verbosity").ok(), Some(0));

        set_verbosity(None, 2).unwrap();
        assert!(enabled_for("COMMAND", Level::TRACE));
        assert!(enabled_for("fjall::db", Level::DEBUG));
        assert!(
            !enabled_for("QUERY", Level::TRACE),
            "the component's own level wins"
        );
        assert!(set_verbosity(Some("nosuch"), 1).is_err());

        set_quiet(true);
        assert!(!enabled_for("NETWORK", Level::INFO));
        assert!(enabled_for("NETWORK", Level::WARN));
        set_quiet(false);
        set_verbosity(Some("query"), -1).unwrap();
        set_verbosity(None, 0).unwrap();
        assert!(!enabled_for("QUERY", Level::DEBUG));
    }
}
