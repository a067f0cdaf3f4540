//! The metrics endpoint (`--metricsAddr host:port`, `net.metricsAddr`; off by
//! default): `GET /metrics` answers Prometheus's text exposition format
//! (version 0.0.4) with the serverStatus counters, per-command latency
//! histograms, connections, cursors, memory and the storage engine's figures.
//!
//! A scrape only reads counters (relaxed loads) and the engine's figures; it
//! takes no lock the command path takes, except the cursor table's for the
//! open-cursor counts, held for one pass over it. The listener is a minimal
//! HTTP/1.1 server on tokio (one request per connection, `Connection: close`),
//! enough for Prometheus, `curl` and the usual agents.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::histogram::LOWER_BOUNDS;
use crate::state::ServerState;

/// The `Content-Type` of the text exposition format.
pub const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

/// The longest request head read before answering 431.
const MAX_REQUEST_HEAD: usize = 8 * 1024;

/// How long a client may take to send its request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(10);

/// Binds `addr` and serves scrapes until the server shuts down; returns the
/// address bound (port 0 resolves) and the task.
pub async fn spawn(
    state: Arc<ServerState>,
    addr: &str,
) -> MongoResult<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind(addr).await.map_err(|e| {
        MongoError::new(
            ErrorCode::SocketException,
            format!("cannot listen for metrics on {addr}: {e}"),
        )
    })?;
    let bound = listener.local_addr().map_err(|e| {
        MongoError::new(
            ErrorCode::SocketException,
            format!("metrics listener on {addr}: {e}"),
        )
    })?;
    tracing::info!(target: "NETWORK", id = crate::log::ids::BISONDB_METRICS_LISTENING, ctx = "listener",
        address = %bound, "Serving metrics");
    let task = tokio::spawn(async move {
        loop {
            let accepted = tokio::select! {
                a = listener.accept() => a,
                _ = state.shutdown.notified() => break,
            };
            if state.is_shutting_down() {
                break;
            }
            match accepted {
                Ok((stream, _)) => {
                    let state = state.clone();
                    tokio::spawn(async move {
                        let _ = tokio::time::timeout(REQUEST_TIMEOUT, answer(stream, &state)).await;
                    });
                }
                Err(e) => {
                    tracing::debug!(error = %e, "metrics listener: accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
        }
    });
    Ok((bound, task))
}

/// Reads one request head and answers it.
async fn answer(mut stream: tokio::net::TcpStream, state: &ServerState) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buf = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        if head.len() > MAX_REQUEST_HEAD {
            return respond(&mut stream, "431 Request Header Fields Too Large", "").await;
        }
        let n = stream.read(&mut buf).await?;
        if n == 0 {
            return Ok(());
        }
        head.extend_from_slice(buf.get(..n).unwrap_or_default());
    }
    let line = head.split(|&b| b == b'\r').next().unwrap_or_default();
    let line = String::from_utf8_lossy(line);
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let path = target.split('?').next().unwrap_or("");
    match (method, path) {
        ("GET" | "HEAD", "/metrics") => {
            let body = render(state);
            let body = if method == "HEAD" {
                String::new()
            } else {
                body
            };
            respond(&mut stream, "200 OK", &body).await
        }
        (_, "/metrics") => respond(&mut stream, "405 Method Not Allowed", "").await,
        _ => respond(&mut stream, "404 Not Found", "see /metrics\n").await,
    }
}

async fn respond(
    stream: &mut tokio::net::TcpStream,
    status: &str,
    body: &str,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    stream.write_all(head.as_bytes()).await?;
    stream.write_all(body.as_bytes()).await?;
    stream.shutdown().await
}

/// The text exposition of everything the server counts.
pub fn render(state: &ServerState) -> String {
    let mut out = Exposition::default();
    let m = &state.metrics;
    let load = |c: &std::sync::atomic::AtomicU64| c.load(Ordering::Relaxed) as f64;
    out.single(
        "bisondb_uptime_seconds",
        "gauge",
        "seconds since the server started",
        state.started.elapsed().as_secs_f64(),
    );

    let current = state.connections_current.load(Ordering::Relaxed);
    let max = state.config.max_conns as u64;
    let active = state.active.readers() + state.active.writers();
    out.labelled(
        "bisondb_connections",
        "gauge",
        "client connections (serverStatus connections)",
        "state",
        [
            ("current", current as f64),
            ("available", max.saturating_sub(current) as f64),
            ("active", active as f64),
        ],
    );
    out.single(
        "bisondb_connections_created_total",
        "counter",
        "connections accepted since start",
        load(&state.connections_total),
    );
    let op = &state.opcounters;
    out.labelled(
        "bisondb_opcounters_total",
        "counter",
        "serverStatus opcounters",
        "type",
        [
            ("insert", load(&op.insert)),
            ("query", load(&op.query)),
            ("update", load(&op.update)),
            ("delete", load(&op.delete)),
            ("getmore", load(&op.getmore)),
            ("command", load(&op.command)),
        ],
    );
    for (name, help, counter) in [
        (
            "bisondb_network_bytes_in_total",
            "bytes received from clients",
            &m.network.bytes_in,
        ),
        (
            "bisondb_network_bytes_out_total",
            "bytes sent to clients",
            &m.network.bytes_out,
        ),
        (
            "bisondb_network_requests_total",
            "requests received",
            &m.network.num_requests,
        ),
        (
            "bisondb_cursors_timed_out_total",
            "cursors closed for idling",
            &m.cursors_timed_out,
        ),
        (
            "bisondb_query_executor_scanned_total",
            "index keys examined",
            &super::SCANNED,
        ),
        (
            "bisondb_query_executor_scanned_objects_total",
            "documents examined",
            &super::SCANNED_OBJECTS,
        ),
        (
            "bisondb_operation_scan_and_order_total",
            "operations that sorted in memory",
            &super::SCAN_AND_ORDER,
        ),
        (
            "bisondb_get_last_error_wtime_total",
            "writes that waited for their write concern",
            &m.get_last_error.wtime_num,
        ),
        (
            "bisondb_get_last_error_wtime_milliseconds_total",
            "time of the writes that waited for their write concern",
            &m.get_last_error.wtime_millis,
        ),
        (
            "bisondb_ttl_passes_total",
            "TTL monitor passes",
            &m.ttl.passes,
        ),
        (
            "bisondb_ttl_deleted_documents_total",
            "documents the TTL monitor deleted",
            &m.ttl.deleted_documents,
        ),
    ] {
        out.single(name, "counter", help, load(counter));
    }
    out.single(
        "bisondb_operation_write_conflicts_total",
        "counter",
        "write conflicts the storage engine raised",
        bisondb_storage::write_conflicts() as f64,
    );

    let by_command = m.by_command();
    let unknown = [("<UNKNOWN>", m.unknown_commands() as f64)];
    out.labelled(
        "bisondb_commands_total",
        "counter",
        "commands run, by command",
        "command",
        by_command.iter().map(|c| (c.0, c.2 as f64)).chain(unknown),
    );
    out.labelled(
        "bisondb_commands_failed_total",
        "counter",
        "commands that answered an error",
        "command",
        by_command.iter().map(|c| (c.0, c.3 as f64)),
    );
    out.family(
        "bisondb_command_latency_seconds",
        "histogram",
        "time from dispatch to reply, by command and by opLatencies class",
    );
    for (name, class, _, _, h) in &by_command {
        out.histogram(
            "bisondb_command_latency_seconds",
            &[("command", name), ("type", class.name())],
            h,
        );
    }

    let open = state.cursors.open_counts();
    out.labelled(
        "bisondb_cursors_open",
        "gauge",
        "open cursors",
        "kind",
        [
            ("total", open.total as f64),
            ("noTimeout", open.no_timeout as f64),
            ("pinned", open.pinned as f64),
        ],
    );
    out.labelled(
        "bisondb_documents_total",
        "counter",
        "documents returned, inserted, updated, deleted",
        "op",
        [
            ("returned", load(&super::DOCUMENTS_RETURNED)),
            ("inserted", load(&m.document.inserted)),
            ("updated", load(&m.document.updated)),
            ("deleted", load(&m.document.deleted)),
        ],
    );
    let (resident, virt) = super::memory_bytes();
    out.single(
        "bisondb_memory_resident_bytes",
        "gauge",
        "resident set size",
        resident as f64,
    );
    out.single(
        "bisondb_memory_virtual_bytes",
        "gauge",
        "virtual memory size",
        virt as f64,
    );

    for fig in state.storage.engine_metrics() {
        let mut name = format!("bisondb_engine_{}", snake(fig.name));
        if fig.counter {
            name.push_str("_total");
        }
        let kind = if fig.counter { "counter" } else { "gauge" };
        out.single(&name, kind, fig.help, fig.value as f64);
    }
    out.text
}

/// `indexBuffer.writeStalls` → `index_buffer_write_stalls`.
fn snake(name: &str) -> String {
    let mut s = String::with_capacity(name.len() + 4);
    for c in name.chars() {
        match c {
            '.' => s.push('_'),
            c if c.is_ascii_uppercase() => {
                if !s.is_empty() && !s.ends_with('_') {
                    s.push('_');
                }
                s.push(c.to_ascii_lowercase());
            }
            c if c.is_ascii_alphanumeric() || c == '_' => s.push(c),
            _ => s.push('_'),
        }
    }
    s
}

/// The text being written.
#[derive(Default)]
struct Exposition {
    text: String,
}

impl Exposition {
    fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.text, "# HELP {name} {}", escape_help(help));
        let _ = writeln!(self.text, "# TYPE {name} {kind}");
    }

    /// A family of one unlabelled sample.
    fn single(&mut self, name: &str, kind: &str, help: &str, value: f64) {
        self.family(name, kind, help);
        self.sample(name, &[], value);
    }

    /// A family of samples told apart by one label.
    fn labelled<'a>(
        &mut self,
        name: &str,
        kind: &str,
        help: &str,
        label: &str,
        values: impl IntoIterator<Item = (&'a str, f64)>,
    ) {
        self.family(name, kind, help);
        for (v, value) in values {
            self.sample(name, &[(label, v)], value);
        }
    }

    fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.text.push_str(name);
        if !labels.is_empty() {
            self.text.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.text.push(',');
                }
                let _ = write!(self.text, "{k}=\"{}\"", escape_label(v));
            }
            self.text.push('}');
        }
        let _ = writeln!(self.text, " {value}");
    }

    /// Cumulative buckets (`le`: each of mongod's buckets' upper bound, in
    /// seconds), `_sum` and `_count`.
    fn histogram(&mut self, name: &str, labels: &[(&str, &str)], h: &super::Histogram) {
        let bucket = format!("{name}_bucket");
        let mut cumulative = 0u64;
        let counts: Vec<u64> = h.buckets().map(|(_, n)| n).collect();
        for (i, n) in counts.iter().enumerate() {
            cumulative += n;
            let Some(upper) = LOWER_BOUNDS.get(i + 1) else {
                break;
            };
            let le = format!("{}", *upper as f64 / 1e6);
            let mut with_le = labels.to_vec();
            with_le.push(("le", &le));
            self.sample(&bucket, &with_le, cumulative as f64);
        }
        let mut with_le = labels.to_vec();
        with_le.push(("le", "+Inf"));
        self.sample(&bucket, &with_le, h.count() as f64);
        self.sample(&format!("{name}_sum"), labels, h.sum_micros() as f64 / 1e6);
        self.sample(&format!("{name}_count"), labels, h.count() as f64);
    }
}

fn escape_label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn escape_help(v: &str) -> String {
    v.replace('\\', "\\\\").replace('\n', "\\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_histograms_follow_the_text_format() {
        assert_eq!(
            snake("indexBuffer.writeStalls"),
            "index_buffer_write_stalls"
        );
        assert_eq!(snake("main.level0Tables"), "main_level0_tables");
        let h = super::super::Histogram::default();
        h.record(Duration::from_micros(3));
        h.record(Duration::from_micros(3000));
        let mut out = Exposition::default();
        out.histogram("x_seconds", &[("command", "fi\"nd")], &h);
        let lines: Vec<&str> = out.text.lines().collect();
        assert_eq!(
            lines.first(),
            Some(&"x_seconds_bucket{command=\"fi\\\"nd\",le=\"0.000002\"} 0")
        );
        assert!(lines.contains(&"x_seconds_bucket{command=\"fi\\\"nd\",le=\"0.000004\"} 1"));
        assert!(lines.contains(&"x_seconds_bucket{command=\"fi\\\"nd\",le=\"0.003072\"} 2"));
        assert!(lines.contains(&"x_seconds_bucket{command=\"fi\\\"nd\",le=\"+Inf\"} 2"));
        assert!(lines.contains(&"x_seconds_sum{command=\"fi\\\"nd\"} 0.003003"));
        assert!(lines.contains(&"x_seconds_count{command=\"fi\\\"nd\"} 2"));
        assert_eq!(lines.len(), LOWER_BOUNDS.len() + 2);
    }
}
