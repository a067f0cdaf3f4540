//! Shared helpers for the integration tests: start a server (in memory unless
//! `BISONDB_TEST_ENGINE` says otherwise) on a free TCP port and a private Unix
//! socket, connect official-driver clients over both transports, read error codes
//! out of driver errors, and speak raw OP_MSG for the tests that must control the
//! bytes on the wire.
//!
//! Each test starts its own server so tests can run in parallel without sharing
//! counters, cursors or collections.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bisondb_server::{RunningServer, Server, ServerConfig};
use bson::{Bson, Document, RawDocumentBuf};
use mongodb::error::{Error, ErrorKind, WriteFailure};
use mongodb::Client;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// How long a raw-socket read may wait before the test calls the server hung.
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// A running server with a driver client per transport. Keep it alive for the
/// whole test: dropping the temp dir removes the socket directory.
pub struct TestServer {
    pub server: RunningServer,
    pub dir: tempfile::TempDir,
    pub tcp: Client,
    pub unix: Client,
    pub tcp_uri: String,
    pub unix_uri: String,
}

impl TestServer {
    /// Both clients, labelled, for tests that run the same checks on each transport.
    pub fn clients(&self) -> [(&'static str, &Client); 2] {
        [("tcp", &self.tcp), ("unix", &self.unix)]
    }

    pub fn socket_path(&self) -> PathBuf {
        self.server
            .socket_path
            .clone()
            .expect("test servers always have a Unix socket")
    }

    /// A fresh TCP client with extra URI options (e.g. `compressors=zstd`).
    pub async fn tcp_client_with(&self, options: &str) -> Client {
        let uri = format!("{}&{options}", self.tcp_uri);
        Client::with_uri_str(&uri)
            .await
            .expect("client options parse")
    }

    /// A fresh Unix-socket client with extra URI options.
    pub async fn unix_client_with(&self, options: &str) -> Client {
        let uri = format!("{}&{options}", self.unix_uri);
        Client::with_uri_str(&uri)
            .await
            .expect("client options parse")
    }

    /// A raw TCP connection to the server, for hand-built messages.
    pub async fn raw_tcp(&self) -> TcpStream {
        TcpStream::connect(("127.0.0.1", self.server.port()))
            .await
            .expect("connect")
    }
}

/// The engine test servers use: `$BISONDB_TEST_ENGINE`, or `inMemory` (fast, no
/// files). Running the suite with `BISONDB_TEST_ENGINE=lsm` checks that every
/// command behaves the same on the persistent engine.
pub fn test_engine() -> String {
    std::env::var("BISONDB_TEST_ENGINE").unwrap_or_else(|_| "inMemory".into())
}

/// The configuration every test server uses: [`test_engine`], port 0, socket and
/// dbpath (`dir/db`) in `dir`.
pub fn config(dir: &Path) -> ServerConfig {
    ServerConfig {
        port: 0,
        bind_ip: vec!["127.0.0.1".into()],
        unix_socket_prefix: dir.to_path_buf(),
        dbpath: dir.join("db"),
        storage_engine: test_engine(),
        postgres: postgres_config(),
        ..Default::default()
    }
}

/// With `BISONDB_TEST_ENGINE=postgres`, an empty schema of the test
/// process's private PostgreSQL cluster per server (a missing PostgreSQL
/// fails in CI and panics elsewhere: the suite was asked to run on it).
fn postgres_config() -> bisondb_server::PostgresConfig {
    let mut pg = bisondb_server::PostgresConfig::default();
    if test_engine() == "postgres" {
        let cluster = bisondb_postgres::testing::TestCluster::for_process()
            .expect("BISONDB_TEST_ENGINE=postgres needs PostgreSQL's server binaries");
        pg.uri = Some(cluster.fresh_schema_uri());
        // Each open cursor holds a connection; a test server opens few.
        pg.pool_size = 32;
    }
    pg
}

/// [`config`] on the persistent `lsm` engine with its data in `dbpath`, for the
/// tests that restart a server on the same data.
pub fn lsm_config(dir: &Path, dbpath: &Path) -> ServerConfig {
    let mut cfg = config(dir);
    cfg.storage_engine = "lsm".into();
    cfg.dbpath = dbpath.to_path_buf();
    // Under BISONDB_TEST_ENGINE=postgres `config` names a store, which an
    // lsm server refuses (`--postgresUri` is for the postgres engine).
    cfg.postgres = Default::default();
    cfg
}

/// Starts an lsm server on `dbpath` with a driver client over TCP, retrying
/// while a previous in-process server still holds the dbpath lock (98): its
/// connection tasks may release the engine a moment after it stopped.
pub async fn restart_lsm(dir: &Path, dbpath: &Path) -> (RunningServer, Client) {
    for _ in 0..100 {
        match Server::start(lsm_config(dir, dbpath)).await {
            Ok(server) => {
                let client = Client::with_uri_str(tcp_uri(server.port()))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                return (server, client);
            }
            Err(e) if e.code.code() == 98 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("lsm server failed to start: {} ({:?})", e.message, e.code),
        }
    }
    panic!("the dbpath lock was never released");
}

/// Stops a server as a client does, with the `shutdown` command (mongod closes
/// the connection instead of answering, so the reply is ignored), and waits
/// for it to stop (at most 20 s), for the tests that restart on its dbpath.
pub async fn shutdown_by_command(server: RunningServer, client: Client) {
    let _ = client
        .database("admin")
        .run_command(bson::doc! {"shutdown": 1})
        .await;
    drop(client);
    tokio::time::timeout(Duration::from_secs(20), server.wait())
        .await
        .unwrap_or_else(|e| panic!("shutdown did not complete: {e}"));
}

/// The driver URI for a Unix socket: the path percent-encoded as the host.
pub fn socket_uri(path: &Path) -> String {
    let encoded: String = path
        .to_string_lossy()
        .bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            other => format!("%{other:02X}"),
        })
        .collect();
    format!("mongodb://{encoded}/?serverSelectionTimeoutMS=5000")
}

pub fn tcp_uri(port: u16) -> String {
    format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=5000")
}

/// Starts a server and connects a client over each transport.
pub async fn start() -> TestServer {
    start_with(|_| {}).await
}

/// Starts a standalone server: on the suite's engine, unless that is
/// `postgres`, whose server answers as a mongos (`mongos.rs`); then in
/// memory. For the tests of what only a standalone does.
pub async fn start_standalone() -> TestServer {
    start_with(|c| {
        if c.storage_engine == "postgres" {
            c.storage_engine = "inMemory".into();
        }
    })
    .await
}

/// `reply` without the `$clusterTime` and `operationTime` every reply of a
/// mongos (the `postgres` engine) or replica-set member carries, for tests
/// that compare a command's whole reply on any engine.
pub fn without_cluster_time(mut reply: Document) -> Document {
    reply.remove("$clusterTime");
    reply.remove("operationTime");
    reply
}

/// [`start`] with the test configuration changed by `edit` first (e.g.
/// `|c| c.enable_test_commands = true`).
pub async fn start_with(edit: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut cfg = config(dir.path());
    edit(&mut cfg);
    if cfg.storage_engine != "postgres" {
        // A test that picks its engine does not get the suite's store.
        cfg.postgres = Default::default();
    }
    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("server failed to start: {} ({:?})", e.message, e.code),
    };
    let tcp_uri = tcp_uri(server.port());
    let socket = server
        .socket_path
        .clone()
        .expect("unix socket enabled by default");
    let unix_uri = socket_uri(&socket);
    let tcp = Client::with_uri_str(&tcp_uri).await.expect("tcp client");
    let unix = Client::with_uri_str(&unix_uri).await.expect("unix client");
    TestServer {
        server,
        dir,
        tcp,
        unix,
        tcp_uri,
        unix_uri,
    }
}

/// A server with `--auth` whose first user, `root` (password `rootpw`, role
/// `root`), was made through the localhost exception by the unauthenticated
/// client.
pub async fn start_with_root() -> TestServer {
    let s = start_with(|c| c.auth = true).await;
    s.tcp
        .database("admin")
        .run_command(bson::doc! {"createUser": "root", "pwd": "rootpw", "roles": ["root"]})
        .await
        .unwrap_or_else(|e| panic!("createUser through the localhost exception: {e}"));
    s
}

/// The replica set test servers run as (`--replSet`).
pub const SET_NAME: &str = "rs0";

/// Starts a server in replica-set mode (`--replSet rs0`, a 16 MB oplog) and
/// initiates it as `rs.initiate()` with this node, `127.0.0.1:port`, its
/// one member; returns once it answers as primary. The clients discover it
/// as a replica set (their seed is its only member). Until sessions and
/// retryable writes exist (issue 17's second part), clients that write
/// must say `retryWrites=false`: use [`TestServer::tcp_client_with`].
pub async fn start_repl_set() -> TestServer {
    start_repl_set_with(|_| {}).await
}

/// [`start_repl_set`] with the configuration changed by `edit` first.
pub async fn start_repl_set_with(edit: impl FnOnce(&mut ServerConfig)) -> TestServer {
    let ts = start_with(|c| {
        c.repl_set_name = Some(SET_NAME.into());
        c.oplog_size_mb = Some(16);
        edit(c)
    })
    .await;
    initiate(ts.server.port()).await;
    ts
}

/// `replSetInitiate` with the one-member configuration of the server on
/// `port`, through a direct connection; waits until hello says primary.
pub async fn initiate(port: u16) {
    let direct = direct_client(port).await;
    let admin = direct.database("admin");
    admin
        .run_command(bson::doc! {"replSetInitiate": {
            "_id": SET_NAME,
            "members": [{"_id": 0, "host": format!("127.0.0.1:{port}")}],
        }})
        .await
        .unwrap_or_else(|e| panic!("replSetInitiate: {e}"));
    for _ in 0..100 {
        let hello = admin
            .run_command(bson::doc! {"hello": 1})
            .await
            .unwrap_or_else(|e| panic!("hello: {e}"));
        if hello.get_bool("isWritablePrimary").ok() == Some(true) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    panic!("the initiated server never became primary");
}

/// A client that talks to the server on `port` alone (`directConnection`),
/// whatever it answers to hello: for a replica-set member before initiate.
pub async fn direct_client(port: u16) -> Client {
    Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{port}/?directConnection=true&retryWrites=false&serverSelectionTimeoutMS=5000"
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

/// The server error code carried by a driver error: a command error, a single
/// write error, or the first write error of an insert_many.
pub fn error_code(e: &Error) -> Option<i32> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code),
        ErrorKind::Write(WriteFailure::WriteError(w)) => Some(w.code),
        ErrorKind::InsertMany(im) => im
            .write_errors
            .as_ref()
            .and_then(|v| v.first())
            .map(|w| w.code),
        _ => None,
    }
}

/// The server's error message carried by a driver error, as [`error_code`].
pub fn error_message(e: &Error) -> String {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => c.message.clone(),
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.message.clone(),
        ErrorKind::InsertMany(im) => im
            .write_errors
            .as_ref()
            .and_then(|v| v.first())
            .map(|w| w.message.clone())
            .unwrap_or_default(),
        other => format!("{other}"),
    }
}

/// The codeName of a command error.
pub fn error_code_name(e: &Error) -> Option<String> {
    match e.kind.as_ref() {
        ErrorKind::Command(c) => Some(c.code_name.clone()),
        ErrorKind::Write(WriteFailure::WriteError(w)) => w.code_name.clone(),
        _ => None,
    }
}

/// Asserts `result` failed with server code `code` and returns the error.
#[track_caller]
pub fn expect_code<T: std::fmt::Debug>(result: mongodb::error::Result<T>, code: i32) -> Error {
    match result {
        Ok(v) => panic!("expected error code {code}, got success: {v:?}"),
        Err(e) => {
            assert_eq!(error_code(&e), Some(code), "wrong error: {e}");
            e
        }
    }
}

/// A numeric field of a reply as i64 (mongod mixes int32, int64 and double).
#[track_caller]
pub fn num(doc: &Document, key: &str) -> i64 {
    match doc.get(key) {
        Some(Bson::Int32(n)) => i64::from(*n),
        Some(Bson::Int64(n)) => *n,
        Some(Bson::Double(f)) => *f as i64,
        other => panic!("field {key} is not a number: {other:?} in {doc}"),
    }
}

/// A numeric field of a reply as f64.
#[track_caller]
pub fn float(doc: &Document, key: &str) -> f64 {
    match doc.get(key) {
        Some(Bson::Int32(n)) => f64::from(*n),
        Some(Bson::Int64(n)) => *n as f64,
        Some(Bson::Double(f)) => *f,
        other => panic!("field {key} is not a number: {other:?} in {doc}"),
    }
}

/// Whether a Bson value is the number `n`, whatever its numeric type.
pub fn is_num(v: &Bson, n: f64) -> bool {
    match v {
        Bson::Int32(i) => f64::from(*i) == n,
        Bson::Int64(i) => *i as f64 == n,
        Bson::Double(f) => *f == n,
        _ => false,
    }
}

/// Collects a driver cursor into a vector.
pub async fn collect(cursor: mongodb::Cursor<Document>) -> Vec<Document> {
    use futures::TryStreamExt;
    cursor.try_collect().await.expect("cursor iteration")
}

/// Values of field `key` of each document, in order.
pub fn field(docs: &[Document], key: &str) -> Vec<Bson> {
    docs.iter()
        .map(|d| d.get(key).cloned().unwrap_or(Bson::Null))
        .collect()
}

/// Runs a command that must succeed and returns its reply.
pub async fn run(db: &mongodb::Database, cmd: Document) -> Document {
    db.run_command(cmd.clone())
        .await
        .unwrap_or_else(|e| panic!("{cmd} failed: {e}"))
}

/// The documents of a command reply's `cursor.firstBatch`.
#[track_caller]
pub fn first_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("firstBatch"))
        .map(|a| a.iter().filter_map(|b| b.as_document().cloned()).collect())
        .unwrap_or_else(|e| panic!("no firstBatch in {reply}: {e}"))
}

/// The documents of a `getMore` reply's `cursor.nextBatch`.
#[track_caller]
pub fn next_batch(reply: &Document) -> Vec<Document> {
    reply
        .get_document("cursor")
        .and_then(|c| c.get_array("nextBatch"))
        .map(|a| a.iter().filter_map(|b| b.as_document().cloned()).collect())
        .unwrap_or_else(|e| panic!("no nextBatch in {reply}: {e}"))
}

/// A free TCP port and the configuration of a replica-set member on it
/// (`--replSet rs0`, a 16 MB oplog) with its data in `dbpath` on the lsm
/// engine, for the tests that restart a member (its set's configuration
/// names it by address, so the port stays fixed).
pub fn lsm_member(dir: &Path, dbpath: &Path) -> (u16, impl Fn() -> ServerConfig) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port: {e}"));
    let (dir, dbpath) = (dir.to_path_buf(), dbpath.to_path_buf());
    let cfg = move || {
        let mut c = lsm_config(&dir, &dbpath);
        c.port = port;
        c.repl_set_name = Some(SET_NAME.into());
        c.oplog_size_mb = Some(16);
        c
    };
    (port, cfg)
}

/// Starts a server on `cfg()`, retrying while a previous in-process server
/// on the same dbpath still holds its lock (98), for restart tests.
pub async fn start_retrying(cfg: impl Fn() -> ServerConfig) -> RunningServer {
    for _ in 0..100 {
        match Server::start(cfg()).await {
            Ok(s) => return s,
            Err(e) if e.code.code() == 98 => tokio::time::sleep(Duration::from_millis(50)).await,
            Err(e) => panic!("server failed to start: {} ({:?})", e.message, e.code),
        }
    }
    panic!("the dbpath lock was never released");
}

/// Collection `name`'s entry in the reply of a raw `listCollections` command
/// (its `options`, `info`, `type` as the server reports them); panics if it is
/// not listed.
pub async fn collection_entry(db: &mongodb::Database, name: &str) -> Document {
    let r = db
        .run_command(bson::doc! {"listCollections": 1, "filter": {"name": name}})
        .await
        .unwrap_or_else(|e| panic!("listCollections: {e}"));
    first_batch(&r)
        .into_iter()
        .next()
        .unwrap_or_else(|| panic!("{name} not listed: {r}"))
}

/// The values of `key` in `coll`, sorted by it, once the TTL monitor has left
/// `n` documents (or as they are after 10 s of polling, for the caller's
/// assertion to show).
pub async fn left_after_ttl(
    coll: &mongodb::Collection<Document>,
    key: &str,
    n: usize,
) -> Vec<Bson> {
    let mut left = Vec::new();
    for _ in 0..50 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let docs = collect(
            coll.find(bson::doc! {})
                .sort(bson::doc! {key: 1})
                .await
                .unwrap_or_else(|e| panic!("{e}")),
        )
        .await;
        left = field(&docs, key);
        if left.len() == n {
            break;
        }
    }
    left
}

// ---- raw wire protocol -----------------------------------------------------

/// Sends one OP_MSG built from `body` (which must carry `$db`).
pub async fn send_msg(stream: &mut TcpStream, request_id: i32, body: &Document) {
    let raw = RawDocumentBuf::try_from(body).expect("body to raw");
    let bytes = bisondb_wire::encode_op_msg(request_id, 0, 0, &raw, None).expect("encode");
    stream.write_all(&bytes).await.expect("write");
}

/// Reads one reply (OP_MSG, possibly inside OP_COMPRESSED) and returns its body
/// and the compressor it came in; panics on EOF or timeout.
pub async fn read_reply_with_compressor(
    stream: &mut TcpStream,
) -> (Document, Option<bisondb_wire::Compressor>) {
    tokio::time::timeout(IO_TIMEOUT, async {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await.expect("reply header");
        let len = i32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let len = usize::try_from(len).expect("positive length");
        assert!(len > 21, "reply too short: {len}");
        let mut message = header.to_vec();
        message.resize(len, 0);
        stream
            .read_exact(&mut message[16..])
            .await
            .expect("reply body");
        let frame = bisondb_wire::Frame::parse(bytes::Bytes::from(message)).expect("reply frame");
        let incoming = bisondb_wire::decode_frame(frame).expect("reply decodes");
        match incoming.request {
            bisondb_wire::Request::Msg(m) => (
                Document::try_from(m.body()).expect("reply document"),
                incoming.compressor,
            ),
            other => panic!("expected an OP_MSG reply, got {other:?}"),
        }
    })
    .await
    .expect("reply within timeout")
}

/// Reads one reply and returns its body.
pub async fn read_reply(stream: &mut TcpStream) -> Document {
    read_reply_with_compressor(stream).await.0
}

/// Sends a command on a raw connection and reads its reply.
pub async fn raw_command(stream: &mut TcpStream, body: Document) -> Document {
    send_msg(stream, 1, &body).await;
    read_reply(stream).await
}

/// Waits until the server closes `stream` (EOF or reset). Returns false if the
/// connection is still open after the timeout or the server sent data instead.
pub async fn closed_by_server(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match tokio::time::timeout(IO_TIMEOUT, stream.read(&mut buf)).await {
        Ok(Ok(0)) => true,
        Ok(Ok(_)) => false,
        Ok(Err(_)) => true,
        Err(_) => false,
    }
}

/// A message header as bytes.
pub fn header(len: i32, request_id: i32, op: i32) -> Vec<u8> {
    let mut h = Vec::with_capacity(16);
    h.extend_from_slice(&len.to_le_bytes());
    h.extend_from_slice(&request_id.to_le_bytes());
    h.extend_from_slice(&0i32.to_le_bytes());
    h.extend_from_slice(&op.to_le_bytes());
    h
}

/// Counts with the `count` command rather than the driver's `count_documents`
/// (an aggregation), so tests outside aggregate.rs do not depend on `aggregate`.
pub async fn count(coll: &mongodb::Collection<Document>, filter: Document) -> u64 {
    let ns = coll.namespace();
    let r = coll
        .client()
        .database(&ns.db)
        .run_command(bson::doc! {"count": ns.coll.as_str(), "query": filter})
        .await
        .expect("count command");
    u64::try_from(num(&r, "n")).expect("non-negative count")
}
