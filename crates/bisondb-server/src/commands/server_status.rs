//! `serverStatus`: uptime, connections, global lock, operation counters, memory.

use std::sync::atomic::Ordering;

use bisondb_error::MongoResult;
use bson::{doc, DateTime, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct ServerStatus;

impl Command for ServerStatus {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(ServerStatus)
    }

    fn execute(self, ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let s = ctx.state;
        let up = s.started.elapsed();
        let current = s.connections_current.load(Ordering::Relaxed);
        let max = s.config.max_conns as u64;
        let op = &s.opcounters;
        let (resident, virt) = memory_mb();
        let (readers, writers) = (s.active.readers(), s.active.writers());
        let mut status = doc! {
            "host": crate::state::hostname(),
            "version": super::build_info::COMPAT_VERSION,
            "process": "bisondb",
            "pid": i64::from(std::process::id()),
            "uptime": up.as_secs_f64(),
            "uptimeMillis": up.as_millis() as i64,
            "uptimeEstimate": up.as_secs() as i64,
            "localTime": DateTime::now(),
            "connections": {
                "current": current as i32,
                "available": max.saturating_sub(current).min(i32::MAX as u64) as i32,
                "totalCreated": s.connections_total.load(Ordering::Relaxed) as i64,
                "active": current as i32,
            },
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
            "mem": {"bits": 64, "resident": resident, "virtual": virt, "supported": true},
            "metrics": {"cursor": {"open": {"total": s.cursors.len() as i64}}},
            "storageEngine": {"name": s.storage.engine_name(), "persistent": s.storage.capabilities().persistent},
        };
        crate::tls::add_server_status(s, &mut status);
        reply::ok(status)
    }
}

fn clamp_i32(n: u64) -> i32 {
    i32::try_from(n).unwrap_or(i32::MAX)
}

/// Resident and virtual size in MiB, from /proc/self/statm.
fn memory_mb() -> (i32, i32) {
    let page = 4096u64;
    let statm = std::fs::read_to_string("/proc/self/statm").unwrap_or_default();
    let mut it = statm
        .split_whitespace()
        .map(|n| n.parse::<u64>().unwrap_or(0));
    let virt = it.next().unwrap_or(0) * page / (1024 * 1024);
    let res = it.next().unwrap_or(0) * page / (1024 * 1024);
    (
        res.min(i32::MAX as u64) as i32,
        virt.min(i32::MAX as u64) as i32,
    )
}
