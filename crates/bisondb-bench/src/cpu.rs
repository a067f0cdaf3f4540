//! CPU time of processes, from `/proc/PID/stat`: the server's, when its pid is
//! known, and the client's own, so a run reports CPU per document beside its
//! throughput. CPU per document hardly moves when other work shares the
//! machine, where documents per second do.

/// User + system CPU seconds of `pid` (its threads included), or `None` where
/// there is no `/proc` or no such process.
pub fn process_cpu_secs(pid: u32) -> Option<f64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text, false)
}

/// This process's CPU seconds, with those of its children that ended (worker
/// processes, the pymongo script).
pub fn own_cpu_secs() -> Option<f64> {
    let text = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat(&text, true)
}

/// utime + stime (+ cutime + cstime with `children`) of a `/proc/PID/stat`
/// line, in seconds. The command name may hold spaces and parentheses, so
/// fields are counted after its last `)`.
pub fn parse_stat(text: &str, children: bool) -> Option<f64> {
    let rest = text.get(text.rfind(')')? + 1..)?;
    // After the name: state (field 3), ... utime is field 14, stime 15,
    // cutime 16, cstime 17 (proc(5)); here 0 is the state.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let take = if children { 4 } else { 2 };
    let mut ticks = 0u64;
    for f in fields.get(11..11 + take)? {
        ticks = ticks.checked_add(f.parse::<i64>().ok()?.try_into().ok()?)?;
    }
    Some(ticks as f64 / clock_ticks_per_sec())
}

/// `/proc` counts CPU time in USER_HZ ticks, 100 a second on every Linux
/// architecture (`sysconf(_SC_CLK_TCK)`).
fn clock_ticks_per_sec() -> f64 {
    100.0
}

/// CPU microseconds per document from two readings, `None` when either is
/// missing or nothing was done.
pub fn per_doc_us(before: Option<f64>, after: Option<f64>, docs: u64) -> Option<f64> {
    match (before, after) {
        (Some(b), Some(a)) if docs > 0 && a >= b => Some((a - b) * 1e6 / docs as f64),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_lines() {
        let hz = clock_ticks_per_sec();
        // A name with a space and a parenthesis, as a thread may be named.
        let line = "4242 (tokio (rt) w) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 50 7 3 20 0 6 0 12345 1000000 200 18446744073709551615";
        assert_eq!(parse_stat(line, false), Some(300.0 / hz));
        assert_eq!(parse_stat(line, true), Some(310.0 / hz));
        assert_eq!(parse_stat("4242 (x) S 1 2", false), None, "too short");
        assert_eq!(parse_stat("no name here", false), None);
        assert_eq!(
            parse_stat("1 (x) S 1 1 1 0 -1 0 0 0 0 0 -5 1 0 0", false),
            None,
            "negative ticks"
        );
    }

    #[test]
    fn readings_of_this_process() {
        let me = own_cpu_secs().expect("/proc/self/stat on Linux");
        let by_pid = process_cpu_secs(std::process::id()).expect("own pid");
        assert!(me >= 0.0 && by_pid >= 0.0);
        assert_eq!(process_cpu_secs(u32::MAX), None);
    }

    #[test]
    fn per_doc() {
        assert_eq!(per_doc_us(Some(1.0), Some(1.5), 1000), Some(500.0));
        assert_eq!(per_doc_us(None, Some(1.5), 1000), None);
        assert_eq!(per_doc_us(Some(1.0), Some(1.5), 0), None);
        assert_eq!(per_doc_us(Some(2.0), Some(1.5), 10), None);
    }
}
