//! The log as mongod 4.4+ writes it, through the real binary: `--logpath`
//! lines parsed as JSON (`t`, `s`, `c`, `id`, `ctx`, `msg`, `attr`), `getLog`,
//! `logRotate` and SIGUSR1, the start-up rename without `--logappend`, the
//! "Slow query" line, `--redactClientLogData`, `setParameter
//! logComponentVerbosity`, and the refusal of a `systemLog` key BisonDB does
//! not implement.
//!
//! These run the binary rather than an in-process server: the log is a
//! process-wide tracing subscriber, which the server's `it` test binary may
//! not install (its tests share one process).

#![cfg(unix)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mongodb::bson::{doc, Document};
use mongodb::Client;
use serde_json::Value;

struct Bison {
    child: Child,
    port: u16,
    log: PathBuf,
}

impl Drop for Bison {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// Starts the binary logging to `dir/bisondb.log` with `extra` flags, and
/// waits for its "Waiting for connections" line.
fn start(dir: &Path, extra: &[&str]) -> Bison {
    let port = free_port();
    let log = dir.join("bisondb.log");
    let child = Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args(["--port", &port.to_string(), "--nounixsocket"])
        .args(["--storageEngine", "inMemory"])
        .arg("--dbpath")
        .arg(dir.join("db"))
        .arg("--logpath")
        .arg(&log)
        .args(extra)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start bisondb");
    let b = Bison { child, port, log };
    wait_for(&b.log, |l| l["id"] == 23016);
    b
}

fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect()
}

/// Waits up to 10 s for a line of `path` that `want` accepts, and returns it.
fn wait_for(path: &Path, want: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(l) = lines(path).into_iter().find(|l| want(l)) {
            return l;
        }
        assert!(
            Instant::now() < deadline,
            "no such line in {}:\n{}",
            path.display(),
            std::fs::read_to_string(path).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

async fn client(b: &Bison) -> Client {
    Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?appName=logtest&directConnection=true",
        b.port
    ))
    .await
    .expect("client")
}

async fn admin(c: &Client, cmd: Document) -> Document {
    c.database("admin").run_command(cmd).await.expect("command")
}

/// Every line has mongod's fields, with their types.
fn check_shape(l: &Value) {
    let t = l["t"]["$date"].as_str().unwrap_or_else(|| panic!("t: {l}"));
    assert_eq!(t.len(), "2026-12-01T22:41:42.123+00:00".len(), "{l}");
    assert!(t.ends_with("+00:00"), "{l}");
    let s = l["s"].as_str().unwrap_or_default();
    assert!(
        ["F", "E", "W", "I", "D1", "D2", "D3", "D4", "D5"].contains(&s),
        "{l}"
    );
    assert!(l["c"].is_string() && l["id"].is_u64(), "{l}");
    assert!(l["ctx"].is_string() && l["msg"].is_string(), "{l}");
    assert!(l.get("attr").is_none_or(Value::is_object), "{l}");
}

#[tokio::test(flavor = "multi_thread")]
async fn json_lines_get_log_slow_query_and_verbosity() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = start(dir.path(), &["--slowms", "0"]);
    let c = client(&b).await;
    let db = c.database("test");
    db.collection::<Document>("c")
        .insert_one(doc! {"a": 1, "secret": "s3cr3t"})
        .await
        .expect("insert");
    let found = db
        .collection::<Document>("c")
        .find_one(doc! {"a": 1})
        .await
        .expect("find");
    assert!(found.is_some());

    let started = wait_for(&b.log, |l| l["id"] == 4615611);
    assert_eq!(
        (started["c"].as_str(), started["ctx"].as_str()),
        (Some("CONTROL"), Some("initandlisten"))
    );
    assert!(started["attr"]["host"].is_string(), "{started}");
    let build = wait_for(&b.log, |l| l["id"] == 23403);
    assert_eq!(build["attr"]["buildInfo"]["version"], "8.0.0");
    let options = wait_for(&b.log, |l| l["id"] == 21951);
    assert_eq!(
        options["attr"]["options"]["systemLog"]["destination"],
        "file"
    );
    assert_eq!(options["attr"]["options"]["net"]["port"], u64::from(b.port));
    let waiting = wait_for(&b.log, |l| l["id"] == 23016);
    assert_eq!(waiting["c"], "NETWORK");
    assert_eq!(waiting["attr"]["port"], u64::from(b.port));
    let accepted = wait_for(&b.log, |l| l["id"] == 22943);
    assert_eq!(accepted["msg"], "Connection accepted");
    assert_eq!(accepted["ctx"], "listener");
    assert!(accepted["attr"]["remote"]
        .as_str()
        .is_some_and(|r| r.starts_with("127.0.0.1:")));
    assert!(accepted["attr"]["connectionId"].is_u64());
    let meta = wait_for(&b.log, |l| l["id"] == 51800);
    assert!(meta["ctx"].as_str().is_some_and(|c| c.starts_with("conn")));
    assert_eq!(meta["attr"]["doc"]["application"]["name"], "logtest");

    // slowms 0: every command is slow; the find's line has mongod's attributes.
    let slow = wait_for(&b.log, |l| {
        l["id"] == 51803 && l["attr"]["command"].get("find").is_some()
    });
    assert_eq!(
        (slow["s"].as_str(), slow["c"].as_str()),
        (Some("I"), Some("COMMAND"))
    );
    assert_eq!(slow["msg"], "Slow query");
    let attr = &slow["attr"];
    assert_eq!(attr["type"], "command");
    assert_eq!(attr["ns"], "test.c");
    assert_eq!(attr["appName"], "logtest");
    assert_eq!(attr["command"]["filter"], serde_json::json!({"a": 1}));
    assert_eq!(attr["nreturned"], 1);
    assert!(
        attr["durationMillis"].is_u64() && attr["reslen"].is_u64(),
        "{slow}"
    );

    for l in lines(&b.log) {
        check_shape(&l);
    }

    // getLog returns the same JSON lines.
    let got = admin(&c, doc! {"getLog": "global"}).await;
    let log = got.get_array("log").expect("log");
    assert!(!log.is_empty());
    let parsed: Vec<Value> = log
        .iter()
        .map(|l| serde_json::from_str(l.as_str().expect("a string")).expect("JSON"))
        .collect();
    parsed.iter().for_each(check_shape);
    assert!(parsed.iter().any(|l| l["id"] == 23016));

    // A failed command is a debug line of COMMAND: absent at verbosity 0,
    // present once setParameter raises the component (mongosh's setLogLevel).
    let failed = |l: &Value| l["id"] == 1_000_000_004;
    let _ = db.run_command(doc! {"find": 1}).await;
    let r = admin(
        &c,
        doc! {"setParameter": 1, "logComponentVerbosity": {"command": {"verbosity": 1}}},
    )
    .await;
    assert_eq!(
        r.get_document("was")
            .expect("was")
            .get_i32("verbosity")
            .ok(),
        Some(0)
    );
    assert!(!lines(&b.log).iter().any(failed), "logged at verbosity 0");
    let _ = db.run_command(doc! {"find": 1}).await;
    let line = wait_for(&b.log, failed);
    assert_eq!(
        (line["s"].as_str(), line["c"].as_str()),
        (Some("D1"), Some("COMMAND"))
    );
    let p = admin(&c, doc! {"getParameter": 1, "logComponentVerbosity": 1}).await;
    let v = p.get_document("logComponentVerbosity").expect("doc");
    assert_eq!(
        v.get_document("command")
            .expect("command")
            .get_i32("verbosity")
            .ok(),
        Some(1)
    );
    assert_eq!(
        v.get_document("query")
            .expect("query")
            .get_i32("verbosity")
            .ok(),
        Some(-1)
    );
    let r = admin(&c, doc! {"setParameter": 1, "logLevel": 2}).await;
    assert_eq!(r.get_i32("was").ok(), Some(0));
    let p = admin(&c, doc! {"getParameter": 1, "logLevel": 1}).await;
    assert_eq!(p.get_i32("logLevel").ok(), Some(2));
    let e = c
        .database("admin")
        .run_command(doc! {"setParameter": 1, "noSuchParameter": 1})
        .await
        .expect_err("unknown parameter");
    assert!(e.to_string().contains("unrecognized parameter"), "{e}");
    let e = c
        .database("admin")
        .run_command(doc! {"setParameter": 1, "ttlMonitorSleepSecs": 5})
        .await
        .expect_err("a start-up parameter");
    assert!(
        e.to_string()
            .contains("not allowed to change [ttlMonitorSleepSecs] at runtime"),
        "{e}"
    );
}

fn rotated(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("bisondb.log."))
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread")]
async fn rotation_by_command_and_signal_and_at_start_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = start(dir.path(), &[]);
    let c = client(&b).await;
    admin(&c, doc! {"ping": 1}).await;
    assert!(rotated(dir.path()).is_empty());

    let r = admin(&c, doc! {"logRotate": 1}).await;
    assert_eq!(r.get_f64("ok").ok(), Some(1.0));
    let old = rotated(dir.path());
    assert_eq!(old.len(), 1, "{old:?}");
    // The old file has the start-up lines and the rotation line.
    let old_lines = lines(&old[0]);
    assert!(old_lines.iter().any(|l| l["id"] == 23016));
    assert!(old_lines.iter().any(|l| l["id"] == 23166));
    // The new file gets what follows.
    let _c2 = client(&b).await;
    admin(&_c2, doc! {"ping": 1}).await;
    wait_for(&b.log, |l| l["id"] == 22943);

    // SIGUSR1 does the same (a second later: the suffix is to the second,
    // and a taken name gets a counter anyway).
    let pid = i32::try_from(b.child.id()).expect("pid");
    // SAFETY: sends a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGUSR1) }, 0);
    let deadline = Instant::now() + Duration::from_secs(10);
    while rotated(dir.path()).len() < 2 {
        assert!(Instant::now() < deadline, "SIGUSR1 did not rotate");
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
    drop(b);

    // Without --logappend the old file is renamed at start-up; with it, kept.
    let before = rotated(dir.path()).len();
    let b = start(dir.path(), &[]);
    assert_eq!(rotated(dir.path()).len(), before + 1);
    assert!(lines(&b.log).iter().any(|l| l["id"] == 1_000_000_005));
    drop(b);
    let kept = lines(&dir.path().join("bisondb.log")).len();
    let b = start(dir.path(), &["--logappend"]);
    assert_eq!(rotated(dir.path()).len(), before + 1);
    // The second start's lines follow the first's in the same file.
    let deadline = Instant::now() + Duration::from_secs(10);
    while lines(&b.log).iter().filter(|l| l["id"] == 23016).count() < 2 {
        assert!(Instant::now() < deadline, "no second start in the file");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(lines(&b.log).len() > kept);
}

async fn admin_any(c: &Client, cmd: Document) -> mongodb::error::Result<Document> {
    c.database("admin").run_command(cmd).await
}

#[tokio::test(flavor = "multi_thread")]
async fn redacted_client_data() {
    let dir = tempfile::tempdir().expect("tempdir");
    let b = start(dir.path(), &["--slowms", "0", "--redactClientLogData"]);
    let c = client(&b).await;
    let coll = c.database("test").collection::<Document>("c");
    coll.insert_one(doc! {"secret": "s3cr3t"})
        .await
        .expect("insert");
    coll.find_one(doc! {"secret": "s3cr3t"})
        .await
        .expect("find");
    let slow = wait_for(&b.log, |l| {
        l["id"] == 51803 && l["attr"]["command"].get("find").is_some()
    });
    assert_eq!(slow["attr"]["command"]["filter"]["secret"], "###");
    assert_eq!(slow["attr"]["command"]["find"], "###");
    let text = std::fs::read_to_string(&b.log).expect("log");
    assert!(!text.contains("s3cr3t"), "client data in the log:\n{text}");
    let opts = admin_any(&c, doc! {"getCmdLineOpts": 1})
        .await
        .expect("getCmdLineOpts");
    let parsed = opts.get_document("parsed").expect("parsed");
    let system_log = parsed.get_document("systemLog").expect("systemLog");
    assert_eq!(system_log.get_str("destination").ok(), Some("file"));
    assert!(system_log
        .get_str("path")
        .is_ok_and(|p| p.ends_with("bisondb.log")));
    assert_eq!(
        parsed
            .get_document("security")
            .ok()
            .and_then(|s| s.get_bool("redactClientLogData").ok()),
        Some(true)
    );
    let p = admin_any(&c, doc! {"getParameter": 1, "redactClientLogData": 1})
        .await
        .expect("getParameter");
    assert_eq!(p.get_bool("redactClientLogData").ok(), Some(true));
}

#[test]
fn sigterm_is_logged_as_mongod_until_the_last_line() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut b = start(dir.path(), &[]);
    let pid = i32::try_from(b.child.id()).expect("pid");
    // SAFETY: sends a signal to the child this test started.
    assert_eq!(unsafe { libc::kill(pid, libc::SIGTERM) }, 0);
    let status = b.child.wait().expect("wait");
    assert!(status.success(), "{status:?}");
    let all = lines(&b.log);
    let got = all
        .iter()
        .find(|l| l["id"] == 23377)
        .expect("Received signal");
    assert_eq!(got["attr"]["signal"], 15);
    assert_eq!(got["attr"]["error"], "Terminated");
    assert_eq!(got["ctx"], "SignalHandler");
    let last = all.last().expect("lines");
    assert_eq!(
        (last["id"].as_u64(), last["msg"].as_str()),
        (Some(23138), Some("Shutting down"))
    );
    assert_eq!(last["attr"]["exitCode"], 0);
    assert!(all.iter().any(|l| l["id"] == 20565));
}

#[test]
fn unknown_system_log_keys_are_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let conf = dir.path().join("b.conf");
    std::fs::write(&conf, "systemLog:\n  syslogFacility: user\n").expect("write");
    let out = Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .arg("--config")
        .arg(&conf)
        .args(["--port", "0", "--nounixsocket"])
        .output()
        .expect("run bisondb");
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("systemLog.syslogFacility"), "{err}");
    let out = Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args(["--logRotate", "reopen", "--logpath"])
        .arg(dir.path().join("x.log"))
        .output()
        .expect("run bisondb");
    assert_eq!(out.status.code(), Some(2), "reopen needs --logappend");
}
