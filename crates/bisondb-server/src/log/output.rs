//! Where log lines go: a file (`--logpath`, renamed or reopened by
//! `logRotate` and SIGUSR1) or standard output (human-readable on a terminal,
//! JSON otherwise).

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

use parking_lot::Mutex;

use super::Line;

/// `systemLog.destination`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Destination {
    /// Standard output (no `--logpath`).
    #[default]
    Stdout,
    /// `systemLog.path`.
    File,
}

/// `systemLog.logRotate`: what `logRotate` does to the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RotateMode {
    /// Rename it with a time suffix, then open a new one (mongod's default).
    #[default]
    Rename,
    /// Close and reopen it under its name (an outside tool renamed it).
    Reopen,
}

enum Sink {
    Stdout {
        human: bool,
    },
    File {
        path: PathBuf,
        file: File,
        mode: RotateMode,
    },
}

static SINK: Mutex<Option<Sink>> = Mutex::new(None);

fn open_append(path: &Path) -> Result<File, String> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map_err(|e| format!("cannot open log file {}: {e}", path.display()))
}

/// The name mongod gives a rotated file: `<path>.<UTC time to the second>`,
/// with `-` for `:` (`mongod.log.2026-12-01T22-41-42`); a file of that name
/// already there gets a counter.
fn rotated_name(path: &Path) -> PathBuf {
    let stamp = chrono::DateTime::from_timestamp_millis(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX)),
    )
    .unwrap_or_default()
    .format("%Y-%m-%dT%H-%M-%S")
    .to_string();
    let base = format!("{}.{stamp}", path.display());
    let mut candidate = PathBuf::from(&base);
    let mut n = 1;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{base}.{n}"));
        n += 1;
    }
    candidate
}

/// Opens the destination the configuration names. Without `logAppend` an
/// existing file is first renamed as mongod does; its new name is returned.
pub(super) fn open(config: &crate::ServerConfig) -> Result<Option<PathBuf>, String> {
    let mut renamed = None;
    let sink = match (&config.logpath, config.log_destination) {
        (Some(path), Destination::File) => {
            if !config.log_append && path.exists() {
                let to = rotated_name(path);
                std::fs::rename(path, &to).map_err(|e| {
                    format!("cannot rename the old log file {}: {e}", path.display())
                })?;
                renamed = Some(to);
            }
            Sink::File {
                path: path.clone(),
                file: open_append(path)?,
                mode: config.log_rotate,
            }
        }
        _ => {
            use std::io::IsTerminal;
            Sink::Stdout {
                human: std::io::stdout().is_terminal(),
            }
        }
    };
    *SINK.lock() = Some(sink);
    Ok(renamed)
}

/// Writes one line. Errors are dropped: a full disk must not stop commands.
pub(super) fn write(line: &Line, json: &str) {
    let mut sink = SINK.lock();
    match sink.as_mut() {
        Some(Sink::File { file, .. }) => {
            let mut buf = String::with_capacity(json.len() + 1);
            buf.push_str(json);
            buf.push('\n');
            let _ = file.write_all(buf.as_bytes());
        }
        Some(Sink::Stdout { human }) => {
            let text = if *human {
                line.to_human()
            } else {
                json.to_string()
            };
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{text}");
        }
        None => {}
    }
}

pub(super) fn rotate() -> Result<(), String> {
    let mut sink = SINK.lock();
    let Some(Sink::File { path, file, mode }) = sink.as_mut() else {
        return Ok(());
    };
    if *mode == RotateMode::Rename {
        let to = rotated_name(path);
        std::fs::rename(&*path, &to).map_err(|e| {
            format!(
                "could not rename {} to {}: {e}",
                path.display(),
                to.display()
            )
        })?;
    }
    *file = open_append(path)?;
    Ok(())
}
