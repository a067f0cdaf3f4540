//! `serverStatus`: mongod's sections (uptime, asserts, connections, network,
//! global lock, opcounters, opLatencies, metrics, memory, storage engine)
//! and `bisondb`, the storage engine's own figures. Counters live in
//! `metrics/`; `opLatencies: {histograms: true}` adds the latency buckets and
//! `<section>: 0` leaves a section out, as mongod's.

use std::sync::atomic::Ordering;

use bisondb_error::MongoResult;
use bson::{doc, DateTime, RawBsonRef, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct ServerStatus {
    /// `opLatencies: {histograms: true}`.
    histograms: bool,
    /// Sections turned off with `<name>: 0` (or `false`).
    excluded: Vec<String>,
}

impl Command for ServerStatus {
    fn parse(req: &CommandRequest<'_>) -> MongoResult<Self> {
        let mut out = ServerStatus {
            histograms: false,
            excluded: Vec::new(),
        };
        for field in req.body.iter().skip(1) {
            let (name, value) = field.map_err(crate::request::invalid_bson)?;
            let name = name.as_str();
            if crate::fields::is_generic_arg(name) {
                continue;
            }
            if name == "opLatencies" {
                if let RawBsonRef::Document(d) = value {
                    out.histograms = matches!(d.get("histograms"), Ok(Some(v)) if super::validate::true_value(v));
                    continue;
                }
            }
            if !super::validate::true_value(value) {
                out.excluded.push(name.to_string());
            }
        }
        Ok(out)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let s = ctx.state;
        let up = s.started.elapsed();
        let current = s.connections_current.load(Ordering::Relaxed);
        let max = s.config.max_conns as u64;
        let op = &s.opcounters;
        let (resident, virt) = crate::metrics::memory_bytes();
        let (resident, virt) = (mib(resident), mib(virt));
        let (readers, writers) = (s.active.readers(), s.active.writers());
        let failed: u64 = s.metrics.by_command().iter().map(|c| c.3).sum();
        let mut status = doc! {
            "host": crate::state::hostname(),
            "version": super::build_info::COMPAT_VERSION,
            "process": "bisondb",
            "pid": i64::from(std::process::id()),
            "uptime": up.as_secs_f64(),
            "uptimeMillis": up.as_millis() as i64,
            "uptimeEstimate": up.as_secs() as i64,
            "localTime": DateTime::now(),
            // mongod counts its assertions; a BisonDB command error is a
            // user assertion there, an internal error a regular one.
            "asserts": {
                "regular": s.metrics.internal_errors() as i64,
                "warning": 0_i32,
                "msg": 0_i32,
                "user": failed.saturating_add(s.metrics.unknown_commands()) as i64,
                "tripwire": 0_i32,
                "rollovers": 0_i32,
            },
            "connections": {
                "current": current as i32,
                "available": max.saturating_sub(current).min(i32::MAX as u64) as i32,
                "totalCreated": s.connections_total.load(Ordering::Relaxed) as i64,
                // Connections running a command now (this one among them).
                "active": clamp_i32(readers + writers),
            },
            "network": s.metrics.network_document(),
            // mongod's global lock section. `totalTime` is the time since
            // startup in microseconds (mongod: since the global lock was
            // created at startup). BisonDB has no global lock, so nothing
            // ever waits in its queue: `currentQueue` is 0 by construction.
            // `activeClients` counts the commands running now, this one
            // among the readers.
            "globalLock": {
                "totalTime": i64::try_from(up.as_micros()).unwrap_or(i64::MAX),
                "currentQueue": {"total": 0_i32, "readers": 0_i32, "writers": 0_i32},
                "activeClients": {
                    "total": clamp_i32(readers + writers),
                    "readers": clamp_i32(readers),
                    "writers": clamp_i32(writers),
                },
            },
            "opcounters": {
                "insert": op.insert.load(Ordering::Relaxed) as i64,
                "query": op.query.load(Ordering::Relaxed) as i64,
                "update": op.update.load(Ordering::Relaxed) as i64,
                "delete": op.delete.load(Ordering::Relaxed) as i64,
                "getmore": op.getmore.load(Ordering::Relaxed) as i64,
                "command": op.command.load(Ordering::Relaxed) as i64,
            },
            // Operations a secondary applied from its sync source: BisonDB's
            // replica set has one member, which applies none.
            "opcountersRepl": {
                "insert": 0_i64, "query": 0_i64, "update": 0_i64,
                "delete": 0_i64, "getmore": 0_i64, "command": 0_i64,
            },
            "opLatencies": s.metrics.op_latencies_document(self.histograms),
            "mem": {"bits": 64, "resident": resident, "virtual": virt, "supported": true},
            "extra_info": {
                "note": "fields vary by platform",
                "page_faults": crate::metrics::page_faults() as i64,
            },
            "metrics": s.metrics.metrics_document(&s.cursors),
            "storageEngine": {"name": s.storage.engine_name(), "persistent": s.storage.capabilities().persistent},
            "bisondb": crate::metrics::engine_document(s.storage.engine_name(), &s.storage.engine_metrics()),
        };
        crate::tls::add_server_status(s, &mut status);
        for name in &self.excluded {
            status.remove(name);
        }
        reply::ok(status)
    }
}

fn clamp_i32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Bytes in whole MiB, as serverStatus `mem` reports them.
fn mib(bytes: u64) -> i32 {
    i32::try_from(bytes / (1024 * 1024)).unwrap_or(i32::MAX)
}
