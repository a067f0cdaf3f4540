//! Shared by the tests that drive the real binary as a replica-set member:
//! start `bisondb --replSet rs0` on a fixed port (the set's configuration
//! names the member by address, so a restart must reuse it), initiate the
//! one-member set, and wait until it answers as writable primary.

#![allow(dead_code)]

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use mongodb::bson::doc;
use mongodb::Client;

/// The server process; killed (SIGKILL) when dropped.
pub struct Bison(pub Child);

impl Drop for Bison {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

pub fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    l.local_addr().expect("addr").port()
}

/// `bisondb --replSet rs0` on `port` with `engine` and its data in `dbpath`,
/// with an oplog (`--oplogSize` MB) large enough that no test's history is
/// truncated.
pub fn start_member(dbpath: &Path, port: u16, engine: &str) -> Bison {
    start_bisondb(
        dbpath,
        port,
        &[
            "--storageEngine",
            engine,
            "--replSet",
            "rs0",
            "--oplogSize",
            "512",
        ],
    )
}

/// `bisondb --port PORT --nounixsocket --dbpath DBPATH` with `args`, its
/// output discarded.
pub fn start_bisondb(dbpath: &Path, port: u16, args: &[&str]) -> Bison {
    let child = Command::new(env!("CARGO_BIN_EXE_bisondb"))
        .args(["--port", &port.to_string(), "--nounixsocket"])
        .args(args)
        .arg("--dbpath")
        .arg(dbpath)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start bisondb");
    Bison(child)
}

/// A URI of the member alone (`directConnection`).
pub fn uri(port: u16, selection_ms: u32) -> String {
    format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS={selection_ms}"
    )
}

/// `replSetInitiate` with this member alone (`rs.initiate()`), then waits
/// until it is primary.
pub async fn initiate(port: u16) -> Client {
    let setup = Client::with_uri_str(uri(port, 30_000))
        .await
        .expect("client");
    setup
        .database("admin")
        .run_command(doc! {"replSetInitiate": {
            "_id": "rs0",
            "members": [{"_id": 0, "host": format!("127.0.0.1:{port}")}],
        }})
        .await
        .expect("replSetInitiate");
    primary(port).await
}

/// A client once the member answers as writable primary (at most 60 s).
pub async fn primary(port: u16) -> Client {
    let client = Client::with_uri_str(uri(port, 30_000))
        .await
        .expect("client");
    let started = Instant::now();
    loop {
        let hello = client
            .database("admin")
            .run_command(doc! {"hello": 1})
            .await
            .expect("server up");
        if hello.get_bool("isWritablePrimary").ok() == Some(true) {
            return client;
        }
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "never primary: {hello}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
