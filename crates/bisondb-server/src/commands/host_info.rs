//! `hostInfo`: facts about the machine, read from the OS.

use bisondb_error::MongoResult;
use bson::{doc, DateTime, RawDocumentBuf};

use super::{Command, Context};
use crate::reply;
use crate::request::CommandRequest;

pub struct HostInfo;

impl Command for HostInfo {
    fn parse(_req: &CommandRequest<'_>) -> MongoResult<Self> {
        Ok(HostInfo)
    }

    fn execute(self, _ctx: &mut Context<'_>) -> MongoResult<RawDocumentBuf> {
        let cores = std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1) as i32;
        reply::ok(doc! {
            "system": {
                "currentTime": DateTime::now(),
                "hostname": crate::state::hostname(),
                "cpuAddrSize": 64,
                "memSizeMB": (mem_total_kb() / 1024) as i64,
                "memLimitMB": (mem_total_kb() / 1024) as i64,
                "numCores": cores,
                "numPhysicalCores": cores,
                "cpuArch": std::env::consts::ARCH,
                "numaEnabled": false,
            },
            "os": {"type": "Linux", "name": os_name(), "version": kernel_version()},
            "extra": {"pageSize": 4096i64},
        })
    }
}

fn mem_total_kb() -> u64 {
    std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("MemTotal:"))
                .and_then(|l| l.split_whitespace().nth(1).and_then(|n| n.parse().ok()))
        })
        .unwrap_or(0)
}

fn os_name() -> String {
    std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|s| {
            s.lines().find_map(|l| {
                l.strip_prefix("PRETTY_NAME=")
                    .map(|v| v.trim_matches('"').to_string())
            })
        })
        .unwrap_or_else(|| "Linux".to_string())
}

fn kernel_version() -> String {
    std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .map(|s| s.trim().to_string())
        .unwrap_or_default()
}
