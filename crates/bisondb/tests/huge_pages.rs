//! The binary turns transparent huge pages off for its own process (Linux), and
//! leaves them on when `MIMALLOC_ALLOW_THP` is set: seen in /proc/PID/status.

#![cfg(target_os = "linux")]

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

/// `THP_enabled` of a running `bisondb` process (the bench's responder mode goes
/// through the same `main`), or None on kernels that do not report it.
fn thp_enabled(allow_env: Option<&str>) -> Option<String> {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_bisondb"));
    cmd.args(["bench", "profile-single", "--serve-wire-limit", "0"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .env_remove("MIMALLOC_ALLOW_THP");
    if let Some(v) = allow_env {
        cmd.env("MIMALLOC_ALLOW_THP", v);
    }
    let mut child = cmd.spawn().expect("start bisondb");
    let stdout = child.stdout.take().expect("stdout");
    // Once it listens, main has long run.
    let mut out = BufReader::new(stdout);
    let (mut listening, mut socket) = (String::new(), String::new());
    out.read_line(&mut listening).expect("read");
    out.read_line(&mut socket).expect("read");
    assert!(listening.starts_with("wire-limit listening"), "{listening}");
    let status = std::fs::read_to_string(format!("/proc/{}/status", child.id())).expect("status");
    let _ = child.kill();
    let _ = child.wait();
    // Killed, it leaves its socket file behind.
    if let Some(path) = socket.trim().strip_prefix("wire-limit socket file: ") {
        let _ = std::fs::remove_file(path);
    }
    status
        .lines()
        .find_map(|l| l.strip_prefix("THP_enabled:"))
        .map(|v| v.trim().to_string())
}

#[test]
fn huge_pages_are_off_unless_mimalloc_is_told_otherwise() {
    let Some(default) = thp_enabled(None) else {
        eprintln!("this kernel does not report THP_enabled; nothing to check");
        return;
    };
    assert_eq!(default, "0");
    assert_eq!(thp_enabled(Some("1")).as_deref(), Some("1"));
}
