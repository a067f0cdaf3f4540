//! `bisondb restore` and `bisondb dump` through the real binary against a
//! `bisondb` server process: a dump directory written by hand as mongodump
//! writes one (documents back to back, canonical Extended JSON metadata with
//! an extra unique index) restores, and dumping it again gives the same
//! documents byte for byte and the index; bad arguments fail.

use std::path::Path;
use std::process::{Child, Command};
use std::time::{Duration, Instant};

fn bisondb(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args(args)
        .output()
        .expect("run bisondb")
}

/// A server process, killed when dropped.
struct ServerProcess(Child);

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn start_server(dbpath: &Path) -> (ServerProcess, u16) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    let child = Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args([
            "--port",
            &port.to_string(),
            "--dbpath",
            dbpath.to_str().expect("utf-8 path"),
            "--storageEngine",
            "inMemory",
            "--nounixsocket",
            "--quiet",
        ])
        .spawn()
        .expect("start bisondb");
    let server = ServerProcess(child);
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the server never listened");
        std::thread::sleep(Duration::from_millis(50));
    }
    (server, port)
}

/// A BSON document `{_id: id, s: s}`.
fn document(id: i32, s: &str) -> Vec<u8> {
    let mut body = vec![0x10];
    body.extend_from_slice(b"_id\0");
    body.extend_from_slice(&id.to_le_bytes());
    body.push(0x02);
    body.extend_from_slice(b"s\0");
    body.extend_from_slice(&(s.len() as i32 + 1).to_le_bytes());
    body.extend_from_slice(s.as_bytes());
    body.push(0);
    let mut doc = (body.len() as i32 + 5).to_le_bytes().to_vec();
    doc.extend_from_slice(&body);
    doc.push(0);
    doc
}

const METADATA: &str = r#"{"indexes":[{"v":{"$numberInt":"2"},"key":{"_id":{"$numberInt":"1"}},"name":"_id_"},{"v":{"$numberInt":"2"},"key":{"s":{"$numberInt":"1"}},"name":"s_1","unique":true}],"uuid":"00112233445566778899aabbccddeeff","collectionName":"c","type":"collection"}"#;

#[test]
fn restore_then_dump_through_the_binary() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (_server, port) = start_server(&dir.path().join("db"));
    let uri = format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=5000");

    let input = dir.path().join("in");
    std::fs::create_dir_all(input.join("rt")).expect("mkdir");
    let mut bson = document(1, "one");
    bson.extend(document(2, "two"));
    std::fs::write(input.join("rt/c.bson"), &bson).expect("write");
    std::fs::write(input.join("rt/c.metadata.json"), METADATA).expect("write");

    let out = bisondb(&["restore", "--uri", &uri, "--dir", input.to_str().unwrap()]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("2 document(s) restored, 0 failed"),
        "{stderr}"
    );

    let output = dir.path().join("out");
    let out = bisondb(&["dump", "--uri", &uri, "--out", output.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read(output.join("rt/c.bson")).expect("c.bson"),
        bson,
        "the documents come back byte for byte"
    );
    let meta = std::fs::read_to_string(output.join("rt/c.metadata.json")).expect("metadata");
    let v: serde_json::Value = serde_json::from_str(&meta).expect("JSON");
    assert_eq!(v["collectionName"], "c", "{meta}");
    assert_eq!(v["type"], "collection", "{meta}");
    assert_eq!(v["indexes"][1]["name"], "s_1", "{meta}");
    assert_eq!(v["indexes"][1]["unique"], true, "{meta}");
    assert_eq!(v["uuid"].as_str().map(str::len), Some(32), "{meta}");

    // --collection needs --db, as mongodump says.
    let out = bisondb(&["dump", "--uri", &uri, "--collection", "c"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--collection needs --db"));
}
