//! The server's counters for `serverStatus` and the metrics endpoint
//! (`prometheus.rs`): per command (`metrics.commands.<name>`, `opLatencies`),
//! network, documents, the query executor, cursors and the TTL monitor.
//!
//! Every counter is a relaxed atomic. A command's own counters sit in a slice
//! laid out as `registry::COMMANDS` is, found by the position of the spec the
//! connection already looked up (`registry::position`): no map, no lock, no
//! allocation on the command path. The slice is the server's (one per
//! `ServerState`), not a static, so the servers of the in-process tests each
//! count their own commands. What is counted far from the server's state
//! (documents returned by a cursor, keys and documents a plan examined) goes
//! to process-wide counters ([`DOCUMENTS_RETURNED`], [`SCANNED`],
//! [`SCANNED_OBJECTS`], [`SCAN_AND_ORDER`], and the engines' write
//! conflicts, `bisondb_storage::write_conflicts`); one server runs per
//! process outside the tests.

pub mod histogram;
pub mod prometheus;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bson::{doc, Document};

use crate::registry::{self, CommandSpec, Latency};
pub use histogram::Histogram;

/// Documents returned in cursor batches (`metrics.document.returned`).
pub static DOCUMENTS_RETURNED: AtomicU64 = AtomicU64::new(0);
/// Index keys examined by finished plans (`metrics.queryExecutor.scanned`).
pub static SCANNED: AtomicU64 = AtomicU64::new(0);
/// Documents examined by finished plans (`metrics.queryExecutor.scannedObjects`).
pub static SCANNED_OBJECTS: AtomicU64 = AtomicU64::new(0);

/// Operations that sorted in memory: a blocking SORT under a read or write,
/// or an aggregation's leading `$sort` no index order gave
/// (`metrics.operation.scanAndOrder`).
pub static SCAN_AND_ORDER: AtomicU64 = AtomicU64::new(0);

/// Adds `n` to a counter.
#[inline]
pub fn add(counter: &AtomicU64, n: u64) {
    counter.fetch_add(n, Ordering::Relaxed);
}

/// `metrics.document` after one update statement: `modified` documents
/// updated, one inserted when it upserted.
pub fn note_update(state: &crate::state::ServerState, modified: u64, upserted: bool) {
    add(&state.metrics.document.updated, modified);
    if upserted {
        add(&state.metrics.document.inserted, 1);
    }
}

fn get(counter: &AtomicU64) -> u64 {
    counter.load(Ordering::Relaxed)
}

/// One command's counters.
#[derive(Default)]
pub struct CommandMetrics {
    pub total: AtomicU64,
    pub failed: AtomicU64,
    /// Time from dispatch to reply.
    pub latency: Histogram,
}

/// mongod's `network` section (bytes as they crossed the socket).
#[derive(Default)]
pub struct Network {
    pub bytes_in: AtomicU64,
    pub bytes_out: AtomicU64,
    pub num_requests: AtomicU64,
}

/// mongod's `metrics.document`, but `returned` ([`DOCUMENTS_RETURNED`]).
#[derive(Default)]
pub struct Documents {
    pub inserted: AtomicU64,
    pub updated: AtomicU64,
    pub deleted: AtomicU64,
}

/// The server's counters; one per `ServerState`.
pub struct Metrics {
    commands: Box<[CommandMetrics]>,
    /// Names the registry does not know (`metrics.commands.<UNKNOWN>`).
    unknown: AtomicU64,
    pub network: Network,
    pub document: Documents,
    /// Cursors closed for being idle past `cursorTimeoutMillis`.
    pub cursors_timed_out: AtomicU64,
    /// Commands that ended in an InternalError (serverStatus `asserts.regular`).
    pub internal_errors: AtomicU64,
    pub ttl: Ttl,
    pub get_last_error: GetLastError,
    /// Shared with the change streams' cursors, which count as they read.
    pub change_streams: Arc<ChangeStreams>,
}

/// Change events too large to return (`metrics.changeStreams`).
#[derive(Default)]
pub struct ChangeStreams {
    /// Events `$changeStreamSplitLargeEvent` split into fragments.
    pub large_events_split: AtomicU64,
    /// Events over the size limit in a stream without that stage, which
    /// failed it with BSONObjectTooLarge.
    pub large_events_failed: AtomicU64,
}

/// Writes that waited for their write concern (`metrics.getLastError`).
#[derive(Default)]
pub struct GetLastError {
    /// Acknowledged writes whose concern asked for more than the write
    /// itself: the journal sync (`j`, `fsync`, `w: "majority"`) or other
    /// members (`w` > 1).
    pub wtime_num: AtomicU64,
    /// Their time in milliseconds. BisonDB syncs the journal inside the
    /// write, so this is the whole command's time, not just the wait.
    pub wtime_millis: AtomicU64,
}

impl GetLastError {
    /// Counts a write command that ran for `took` if `body`'s write concern
    /// made it wait (see [`GetLastError::wtime_num`]).
    pub fn note_write(&self, body: &bson::RawDocument, took: Duration) {
        let wc = match body.get("writeConcern") {
            Ok(Some(bson::RawBsonRef::Document(wc))) => Some(wc),
            _ => None,
        };
        self.note_write_concern(wc, took);
    }

    /// [`GetLastError::note_write`] for a command whose `writeConcern` (the
    /// first field of that name, when a document) was already read.
    pub fn note_write_concern(&self, wc: Option<&bson::RawDocument>, took: Duration) {
        use bson::RawBsonRef as R;
        let Some(wc) = wc else {
            return;
        };
        let waits = wc.iter().flatten().any(|(k, v)| match (k.as_str(), v) {
            ("j" | "fsync", R::Boolean(b)) => b,
            ("w", R::String(_)) => true,
            ("w", R::Int32(n)) => n > 1,
            ("w", R::Int64(n)) => n > 1,
            ("w", R::Double(n)) => n > 1.0,
            _ => false,
        });
        if waits {
            add(&self.wtime_num, 1);
            add(&self.wtime_millis, took.as_millis() as u64);
        }
    }
}

/// The TTL monitor's work (`metrics.ttl`).
#[derive(Default)]
pub struct Ttl {
    /// Passes over the TTL indexes, each run counted whatever it found.
    pub passes: AtomicU64,
    /// Documents (time-series: buckets) the passes deleted.
    pub deleted_documents: AtomicU64,
}

impl Default for Metrics {
    fn default() -> Self {
        Metrics {
            commands: registry::COMMANDS
                .iter()
                .map(|_| CommandMetrics::default())
                .collect(),
            unknown: AtomicU64::new(0),
            network: Network::default(),
            document: Documents::default(),
            cursors_timed_out: AtomicU64::new(0),
            internal_errors: AtomicU64::new(0),
            ttl: Ttl::default(),
            get_last_error: GetLastError::default(),
            change_streams: Arc::default(),
        }
    }
}

impl Metrics {
    /// Counts one command that ran for `took` (`spec`: its registry entry,
    /// `None` for an unknown name); `failed`: it answered an error.
    #[inline]
    pub fn command_done(&self, spec: Option<&CommandSpec>, took: Duration, failed: bool) {
        let Some(m) = spec
            .and_then(registry::position)
            .and_then(|i| self.commands.get(i))
        else {
            add(&self.unknown, 1);
            return;
        };
        add(&m.total, 1);
        if failed {
            add(&m.failed, 1);
        }
        m.latency.record(took);
    }

    /// Every command that ran at least once, by canonical name (an alias
    /// counts as its command, as mongod's), with its counters summed.
    pub fn by_command(&self) -> Vec<(&'static str, Latency, u64, u64, Histogram)> {
        self.commands_counted(false)
    }

    /// [`Metrics::by_command`]; with `all`, every command BisonDB serves,
    /// those that never ran at 0 (serverStatus lists them all, as mongod).
    fn commands_counted(&self, all: bool) -> Vec<(&'static str, Latency, u64, u64, Histogram)> {
        let mut out: Vec<(&'static str, Latency, u64, u64, Histogram)> = Vec::new();
        for (spec, m) in registry::COMMANDS.iter().zip(self.commands.iter()) {
            let total = get(&m.total);
            if total == 0 && !(all && spec.handler().is_some()) {
                continue;
            }
            let name = spec.alias_of.unwrap_or(spec.name);
            let failed = get(&m.failed);
            match out.iter_mut().find(|(n, ..)| *n == name) {
                Some(entry) => {
                    entry.2 += total;
                    entry.3 += failed;
                    entry.4.merge(&m.latency);
                }
                None => {
                    let h = Histogram::default();
                    h.merge(&m.latency);
                    out.push((name, spec.latency, total, failed, h));
                }
            }
        }
        out.sort_by(|a, b| a.0.cmp(b.0));
        out
    }

    /// Commands that ended in an InternalError.
    pub fn internal_errors(&self) -> u64 {
        get(&self.internal_errors)
    }

    /// Commands whose name the registry does not know.
    pub fn unknown_commands(&self) -> u64 {
        get(&self.unknown)
    }

    /// The latency of reads, writes and other commands, each summed over
    /// its commands.
    pub fn op_latencies(&self) -> [(Latency, Histogram); 3] {
        let out = [
            (Latency::Read, Histogram::default()),
            (Latency::Write, Histogram::default()),
            (Latency::Command, Histogram::default()),
        ];
        for (spec, m) in registry::COMMANDS.iter().zip(self.commands.iter()) {
            if let Some((_, h)) = out.iter().find(|(l, _)| *l == spec.latency) {
                h.merge(&m.latency);
            }
        }
        out
    }

    /// serverStatus's `opLatencies` (`histograms`: with each class's
    /// non-empty buckets, as mongod's `opLatencies: {histograms: true}`).
    pub fn op_latencies_document(&self, histograms: bool) -> Document {
        let mut out = Document::new();
        for (class, h) in self.op_latencies() {
            let mut d = doc! {"latency": h.sum_micros() as i64, "ops": h.count() as i64};
            if histograms {
                d.insert("histogram", h.mongod_buckets());
            }
            out.insert(class.name(), d);
        }
        out
    }

    /// serverStatus's `metrics` section.
    pub fn metrics_document(&self, cursors: &crate::cursor::CursorManager) -> Document {
        let mut commands = Document::new();
        commands.insert("<UNKNOWN>", self.unknown_commands() as i64);
        for (name, _, total, failed, _) in self.commands_counted(true) {
            commands.insert(name, doc! {"failed": failed as i64, "total": total as i64});
        }
        let open = cursors.open_counts();
        doc! {
            "changeStreams": {
                "largeEventsFailed": get(&self.change_streams.large_events_failed) as i64,
                "largeEventsSplit": get(&self.change_streams.large_events_split) as i64,
            },
            "commands": commands,
            "cursor": {
                "timedOut": get(&self.cursors_timed_out) as i64,
                "open": {
                    "noTimeout": open.no_timeout as i64,
                    "pinned": open.pinned as i64,
                    "total": open.total as i64,
                },
            },
            "document": {
                "deleted": get(&self.document.deleted) as i64,
                "inserted": get(&self.document.inserted) as i64,
                "returned": get(&DOCUMENTS_RETURNED) as i64,
                "updated": get(&self.document.updated) as i64,
            },
            "getLastError": {
                "wtime": {
                    "num": get(&self.get_last_error.wtime_num) as i64,
                    "totalMillis": get(&self.get_last_error.wtime_millis) as i64,
                },
                // A single member never waits with a timeout: the journal
                // sync is part of the write, and a `w` it cannot satisfy
                // answers UnsatisfiableWriteConcern at once.
                "wtimeouts": 0i64,
            },
            "operation": {
                "scanAndOrder": get(&SCAN_AND_ORDER) as i64,
                "writeConflicts": bisondb_storage::write_conflicts() as i64,
            },
            "queryExecutor": {
                "scanned": get(&SCANNED) as i64,
                "scannedObjects": get(&SCANNED_OBJECTS) as i64,
            },
            "ttl": {
                "deletedDocuments": get(&self.ttl.deleted_documents) as i64,
                "passes": get(&self.ttl.passes) as i64,
            },
        }
    }

    /// serverStatus's `network` section.
    pub fn network_document(&self) -> Document {
        let (bytes_in, bytes_out) = (get(&self.network.bytes_in), get(&self.network.bytes_out));
        doc! {
            "bytesIn": bytes_in as i64,
            "bytesOut": bytes_out as i64,
            "physicalBytesIn": bytes_in as i64,
            "physicalBytesOut": bytes_out as i64,
            "numRequests": get(&self.network.num_requests) as i64,
        }
    }
}

/// Major page faults of this process (field 12 of /proc/self/stat, what
/// mongod's `extra_info.page_faults` reports on Linux; 0 where it is missing).
pub fn page_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count
    // fields after its closing one (field 3 onwards).
    stat.rsplit_once(')')
        .and_then(|(_, rest)| rest.split_whitespace().nth(9))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// Resident and virtual size in bytes, from /proc/self/statm (0 where it is
/// missing).
pub fn memory_bytes() -> (u64, u64) {
    // The page size of every Linux target BisonDB builds for.
    let page = 4096u64;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut it = statm
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap_or(0));
    let virt = it.next().unwrap_or(0).saturating_mul(page);
    let res = it.next().unwrap_or(0).saturating_mul(page);
    (res, virt)
}

/// serverStatus's `bisondb` section: the engine's figures, nested at the dots
/// of their names.
pub fn engine_document(engine: &str, figures: &[bisondb_storage::EngineMetric]) -> Document {
    let mut out = doc! {"engine": engine};
    for m in figures {
        let value = i64::try_from(m.value).unwrap_or(i64::MAX);
        insert_dotted(&mut out, m.name, value);
    }
    out
}

fn insert_dotted(doc: &mut Document, name: &str, value: i64) {
    match name.split_once('.') {
        None => {
            doc.insert(name, value);
        }
        Some((head, rest)) => {
            if !matches!(doc.get(head), Some(bson::Bson::Document(_))) {
                doc.insert(head, Document::new());
            }
            if let Some(bson::Bson::Document(inner)) = doc.get_mut(head) {
                insert_dotted(inner, rest, value);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_count_under_their_canonical_name() {
        let m = Metrics::default();
        let hello = registry::lookup("hello");
        let is_master = registry::lookup("isMaster");
        m.command_done(hello, Duration::from_micros(5), false);
        m.command_done(is_master, Duration::from_micros(3000), true);
        m.command_done(None, Duration::ZERO, true);
        let by = m.by_command();
        assert_eq!(by.len(), 1);
        let (name, class, total, failed, h) = &by[0];
        assert_eq!(
            (*name, *class, *total, *failed),
            ("hello", Latency::Command, 2, 1)
        );
        assert_eq!(h.count(), 2);
        assert_eq!(h.sum_micros(), 3005);
        assert_eq!(m.unknown_commands(), 1);
        let lat = m.op_latencies_document(true);
        let commands = lat.get_document("commands").unwrap();
        assert_eq!(commands.get_i64("ops").unwrap(), 2);
        assert_eq!(commands.get_array("histogram").unwrap().len(), 2);
        assert_eq!(
            lat.get_document("reads").unwrap().get_i64("ops").unwrap(),
            0
        );
    }

    #[test]
    fn writes_that_wait_for_their_concern_are_timed() {
        let g = GetLastError::default();
        let took = Duration::from_millis(7);
        for waits in [
            doc! {"writeConcern": {"w": 1, "j": true}},
            doc! {"writeConcern": {"w": "majority"}},
            doc! {"writeConcern": {"fsync": true}},
            doc! {"writeConcern": {"w": 2}},
        ] {
            g.note_write(&bson::RawDocumentBuf::try_from(&waits).unwrap(), took);
        }
        for not in [
            doc! {},
            doc! {"writeConcern": {"w": 1}},
            doc! {"writeConcern": {"w": 0}},
            doc! {"writeConcern": {"j": false}},
        ] {
            g.note_write(&bson::RawDocumentBuf::try_from(&not).unwrap(), took);
        }
        assert_eq!(get(&g.wtime_num), 4);
        assert_eq!(get(&g.wtime_millis), 28);
    }

    #[test]
    fn engine_figures_nest_at_dots() {
        let figs = [
            bisondb_storage::EngineMetric {
                name: "journal.bytes",
                value: 7,
                counter: false,
                help: "",
            },
            bisondb_storage::EngineMetric {
                name: "journal.syncs",
                value: 2,
                counter: true,
                help: "",
            },
            bisondb_storage::EngineMetric {
                name: "recoveries",
                value: 0,
                counter: true,
                help: "",
            },
        ];
        let d = engine_document("lsm", &figs);
        assert_eq!(
            d,
            doc! {"engine": "lsm", "journal": {"bytes": 7i64, "syncs": 2i64}, "recoveries": 0i64}
        );
    }
}
