//! `--client pymongo`: one run of a workload through pymongo, as the seeds ran
//! them, by the script `scripts/pymongo_bench.py` (a pool of threads sharing
//! one `MongoClient`, one thread, large documents written and read back). The
//! bench starts the script once per run and reads the one JSON line it
//! prints; given the server's pid, the script also reads the server's CPU
//! time around its timed part.

use serde::Deserialize;

use crate::args::{Plan, Workload};

/// What the script reports for one run.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ScriptResult {
    pub workload: String,
    pub docs: u64,
    pub threads: usize,
    pub doc_size: usize,
    /// Wall time of the timed part.
    pub secs: f64,
    /// The script's CPU time over the timed part.
    pub client_cpu_secs: f64,
    /// The server's CPU time over the timed part, when its pid was given.
    #[serde(default)]
    pub server_cpu_secs: Option<f64>,
    /// pymongo's version.
    pub pymongo: String,
}

/// The script's arguments for one run of `plan` against `uri`.
pub fn script_args(plan: &Plan, uri: &str, server_pid: Option<u32>) -> Vec<String> {
    let mut a = vec![
        plan.pymongo_script.display().to_string(),
        uri.to_string(),
        plan.workload.name().to_string(),
        plan.docs.to_string(),
        "--threads".into(),
        plan.clients.to_string(),
        "--doc-size".into(),
        plan.doc_size.to_string(),
        "--db".into(),
        plan.db.clone(),
        "--collection".into(),
        plan.collection.clone(),
    ];
    if plan.drop {
        a.push("--drop".into());
    }
    if let Some(pid) = server_pid {
        a.extend(["--server-pid".into(), pid.to_string()]);
    }
    a
}

/// Picks the script's JSON line out of its output (pymongo may warn first).
pub fn parse_output(stdout: &str, plan: &Plan) -> Result<ScriptResult, String> {
    let line = stdout
        .lines()
        .rev()
        .find(|l| l.trim_start().starts_with('{'))
        .ok_or_else(|| format!("the pymongo script printed no result: {stdout:?}"))?;
    let r: ScriptResult = serde_json::from_str(line)
        .map_err(|e| format!("the pymongo script's result {line:?}: {e}"))?;
    if r.workload != plan.workload.name() || r.docs != plan.docs {
        return Err(format!(
            "the pymongo script ran {} of {} documents, not {} of {}",
            r.workload,
            r.docs,
            plan.workload.name(),
            plan.docs
        ));
    }
    if r.secs.is_nan() || r.secs <= 0.0 {
        return Err(format!("the pymongo script timed {} s", r.secs));
    }
    Ok(r)
}

/// Runs the script once; its stderr goes to ours.
pub async fn run(plan: &Plan, uri: &str, server_pid: Option<u32>) -> Result<ScriptResult, String> {
    debug_assert!(!matches!(
        plan.workload,
        Workload::TimeseriesBatch | Workload::TimeseriesAggregate
    ));
    let out = tokio::process::Command::new(&plan.python)
        .args(script_args(plan, uri, server_pid))
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::inherit())
        .output()
        .await
        .map_err(|e| format!("cannot run {}: {e}", plan.python))?;
    if !out.status.success() {
        return Err(format!(
            "{} {} failed ({})",
            plan.python,
            plan.pymongo_script.display(),
            out.status
        ));
    }
    parse_output(&String::from_utf8_lossy(&out.stdout), plan)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(args: &[&str]) -> Plan {
        crate::args::test_plan(args).unwrap()
    }

    #[test]
    fn arguments_of_the_script() {
        let p = plan(&[
            "profile-pool",
            "--client",
            "pymongo",
            "--docs",
            "20000",
            "--drop",
            "--pymongo-script",
            "/x/s.py",
        ]);
        assert_eq!(
            script_args(&p, "mongodb://h:1", Some(42)),
            [
                "/x/s.py",
                "mongodb://h:1",
                "profile-pool",
                "20000",
                "--threads",
                "8",
                "--doc-size",
                "0",
                "--db",
                "bench",
                "--collection",
                "multiple",
                "--drop",
                "--server-pid",
                "42"
            ]
        );
        let p = plan(&["large-read", "--client", "pymongo"]);
        let a = script_args(&p, "u", None);
        assert_eq!(a[1..4], ["u", "large-read", "300"]);
        assert_eq!(a[6..8], ["--doc-size", "262144"]);
        assert!(!a.contains(&"--drop".to_string()));
        assert!(!a.contains(&"--server-pid".to_string()));
    }

    #[test]
    fn reads_the_result_line() {
        let p = plan(&["profile-single", "--client", "pymongo", "--docs", "10"]);
        let out = "a warning\n{\"client\": \"pymongo\", \"workload\": \"profile-single\", \
                   \"docs\": 10, \"threads\": 1, \"doc_size\": 0, \"secs\": 0.5, \
                   \"client_cpu_secs\": 0.25, \"pymongo\": \"4.20.1\"}\n";
        let r = parse_output(out, &p).unwrap();
        assert_eq!((r.docs, r.threads, r.secs), (10, 1, 0.5));
        assert_eq!((r.client_cpu_secs, r.pymongo.as_str()), (0.25, "4.20.1"));
        assert_eq!(r.server_cpu_secs, None, "no server pid given");
        let with = out.replace("\"pymongo\": ", "\"server_cpu_secs\": 0.125, \"pymongo\": ");
        assert_eq!(
            parse_output(&with, &p).unwrap().server_cpu_secs,
            Some(0.125)
        );
        for (bad, why) in [
            ("", "no result"),
            ("{\"workload\": 1}", "result"),
            (
                &out.replace("\"docs\": 10", "\"docs\": 11") as &str,
                "not profile-single of 10",
            ),
            (&out.replace("0.5", "0.0") as &str, "timed 0"),
        ] {
            let e = parse_output(bad, &p).unwrap_err();
            assert!(e.contains(why), "{bad:?}: {e}");
        }
    }
}
