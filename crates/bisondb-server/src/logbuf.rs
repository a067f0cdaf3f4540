//! A ring buffer of recent log lines for `getLog: "global"`, fed by a tracing layer
//! that the binary installs next to its normal output.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;
use tracing::field::{Field, Visit};
use tracing::{Event, Subscriber};
use tracing_subscriber::layer::Context;
use tracing_subscriber::Layer;

/// mongod keeps the last 1024 lines in RAM.
const CAPACITY: usize = 1024;

static LINES: Mutex<VecDeque<String>> = Mutex::new(VecDeque::new());
static TOTAL: AtomicU64 = AtomicU64::new(0);

pub fn recent() -> Vec<String> {
    LINES.lock().iter().cloned().collect()
}

pub fn total_written() -> u64 {
    TOTAL.load(Ordering::Relaxed)
}

fn push(line: String) {
    let mut l = LINES.lock();
    if l.len() == CAPACITY {
        l.pop_front();
    }
    l.push_back(line);
    TOTAL.fetch_add(1, Ordering::Relaxed);
}

/// The tracing layer that records lines.
pub struct LogBufferLayer;

struct LineVisitor(String);

impl Visit for LineVisitor {
    fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            let _ = write!(self.0, " {value:?}");
        } else {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
    }
}

impl<S: Subscriber> Layer<S> for LogBufferLayer {
    fn on_event(&self, event: &Event<'_>, _ctx: Context<'_, S>) {
        let meta = event.metadata();
        let mut v = LineVisitor(format!("{} {}", meta.level(), meta.target()));
        event.record(&mut v);
        push(v.0);
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn ring_is_bounded() {
        for i in 0..(super::CAPACITY + 10) {
            super::push(format!("line {i}"));
        }
        let r = super::recent();
        assert_eq!(r.len(), super::CAPACITY);
        assert!(super::total_written() >= (super::CAPACITY + 10) as u64);
        assert_eq!(
            r.last().map(String::as_str),
            Some(format!("line {}", super::CAPACITY + 9).as_str())
        );
    }
}
