//! A ring buffer of recent log lines for `getLog: "global"`: the JSON lines
//! [`crate::log`] writes, as mongod keeps them.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

use parking_lot::Mutex;

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

/// Keeps `line` (mongod's JSON form) among the last 1024.
pub fn push(line: String) {
    let mut l = LINES.lock();
    if l.len() == CAPACITY {
        l.pop_front();
    }
    l.push_back(line);
    TOTAL.fetch_add(1, Ordering::Relaxed);
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
