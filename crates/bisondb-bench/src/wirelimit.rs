//! The `wire-limit` target: an in-process responder that speaks just enough of the
//! MongoDB wire protocol (OP_MSG) to satisfy the official driver, acknowledges every
//! command and stores nothing. Its throughput is what the client, the driver and the
//! transport alone allow on this machine, so a real server's figure divided by it is
//! the server's efficiency.
//!
//! The framing is written here on purpose: the bench must not depend on the server
//! crates, so that it measures any MongoDB-compatible URI the same way.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use bson::{doc, Document, RawDocument};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener};
use tokio::task::JoinHandle;

/// OP_MSG, the only opcode the modern drivers send.
const OP_MSG: i32 = 2013;
/// mongod's limit; also the bound checked before allocating a message buffer.
pub const MAX_MESSAGE_SIZE: usize = 48_000_000;
/// flagBits: a CRC-32C trails the sections.
const FLAG_CHECKSUM: u32 = 1;
/// flagBits: the client expects no reply (w: 0 writes).
const FLAG_MORE_TO_COME: u32 = 1 << 1;
const HEADER_LEN: usize = 16;

/// Documents "inserted" per namespace: counted, never kept, so `count` and `dbStats`
/// after a run agree with what the client sent.
#[derive(Default)]
struct Counters {
    by_ns: Mutex<HashMap<String, u64>>,
    connections: AtomicI32,
    requests: AtomicU64,
}

impl Counters {
    fn add(&self, ns: String, n: u64) {
        if let Ok(mut m) = self.by_ns.lock() {
            *m.entry(ns).or_insert(0) += n;
        }
    }
    fn get(&self, ns: &str) -> u64 {
        self.by_ns
            .lock()
            .map(|m| m.get(ns).copied().unwrap_or(0))
            .unwrap_or(0)
    }
    fn drop_ns(&self, ns: &str) {
        if let Ok(mut m) = self.by_ns.lock() {
            m.remove(ns);
        }
    }
    fn drop_db(&self, db: &str) {
        let prefix = format!("{db}.");
        if let Ok(mut m) = self.by_ns.lock() {
            m.retain(|k, _| !k.starts_with(&prefix));
        }
    }
    fn db_totals(&self, db: &str) -> (u64, i64) {
        let prefix = format!("{db}.");
        self.by_ns
            .lock()
            .map(|m| {
                m.iter()
                    .filter(|(k, _)| k.starts_with(&prefix))
                    .fold((0u64, 0i64), |(n, c), (_, v)| {
                        (n.saturating_add(*v), c.saturating_add(1))
                    })
            })
            .unwrap_or((0, 0))
    }
}

/// A running responder; dropping it stops the listeners and removes the socket file.
pub struct WireLimit {
    /// `mongodb://127.0.0.1:PORT`.
    pub tcp_uri: String,
    /// `mongodb://%2Ftmp%2F...sock`.
    pub socket_uri: String,
    socket_path: PathBuf,
    tasks: Vec<JoinHandle<()>>,
    counters: Arc<Counters>,
}

impl WireLimit {
    /// Binds 127.0.0.1 on an ephemeral port and a Unix socket in the temp directory.
    /// Must be called inside a tokio runtime.
    pub async fn start() -> std::io::Result<Self> {
        Self::start_on(0).await
    }

    /// As [`WireLimit::start`], on a chosen TCP port (0: any free port).
    pub async fn start_on(port: u16) -> std::io::Result<Self> {
        static SEQ: AtomicU64 = AtomicU64::new(0);
        let counters = Arc::new(Counters::default());
        let tcp = TcpListener::bind(("127.0.0.1", port)).await?;
        let port = tcp.local_addr()?.port();
        let socket_path = std::env::temp_dir().join(format!(
            "bisondb-bench-wire-limit-{}-{}.sock",
            std::process::id(),
            SEQ.fetch_add(1, Ordering::Relaxed)
        ));
        // A stale file from a killed run would make bind fail.
        let _ = std::fs::remove_file(&socket_path);
        let unix = UnixListener::bind(&socket_path)?;
        let socket_uri = format!(
            "mongodb://{}",
            percent_encode_path(&socket_path.to_string_lossy())
        );
        let c1 = counters.clone();
        let t1 = tokio::spawn(async move {
            while let Ok((s, _)) = tcp.accept().await {
                let _ = s.set_nodelay(true);
                tokio::spawn(serve_conn(s, c1.clone()));
            }
        });
        let c2 = counters.clone();
        let t2 = tokio::spawn(async move {
            while let Ok((s, _)) = unix.accept().await {
                tokio::spawn(serve_conn(s, c2.clone()));
            }
        });
        Ok(WireLimit {
            tcp_uri: format!("mongodb://127.0.0.1:{port}"),
            socket_uri,
            socket_path,
            tasks: vec![t1, t2],
            counters,
        })
    }

    /// The Unix socket's file.
    pub fn socket_path(&self) -> &std::path::Path {
        &self.socket_path
    }

    /// Documents acknowledged so far for `db.coll`.
    pub fn count(&self, ns: &str) -> u64 {
        self.counters.get(ns)
    }

    /// Commands answered so far (all connections).
    pub fn requests(&self) -> u64 {
        self.counters.requests.load(Ordering::Relaxed)
    }
}

impl Drop for WireLimit {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
        let _ = std::fs::remove_file(&self.socket_path);
    }
}

/// The driver wants the socket path percent-encoded in the host part.
fn percent_encode_path(p: &str) -> String {
    let mut out = String::with_capacity(p.len() + 8);
    for b in p.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(b))
            }
            _ => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

async fn serve_conn<S: AsyncRead + AsyncWrite + Unpin>(mut s: S, counters: Arc<Counters>) {
    let conn_id = counters.connections.fetch_add(1, Ordering::Relaxed) + 1;
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let mut reply_id: i32 = 0;
    loop {
        let mut header = [0u8; HEADER_LEN];
        if s.read_exact(&mut header).await.is_err() {
            return;
        }
        let Some(h) = Header::parse(&header) else {
            return;
        };
        let Some(body_len) = (h.length as usize).checked_sub(HEADER_LEN) else {
            return;
        };
        buf.resize(body_len, 0);
        if s.read_exact(&mut buf).await.is_err() {
            return;
        }
        if h.op_code != OP_MSG {
            // Legacy opcodes are not sent by current drivers; closing is what mongod 6+ does.
            return;
        }
        counters.requests.fetch_add(1, Ordering::Relaxed);
        let Some(msg) = OpMsg::parse(&buf) else {
            return;
        };
        let reply = respond(&msg, &counters, conn_id);
        if msg.flags & FLAG_MORE_TO_COME != 0 {
            continue;
        }
        reply_id = reply_id.wrapping_add(1);
        out.clear();
        if encode_reply(&mut out, reply_id, h.request_id, &reply).is_none() {
            return;
        }
        if s.write_all(&out).await.is_err() {
            return;
        }
    }
}

/// The 16-byte message header.
#[derive(Debug, PartialEq)]
struct Header {
    length: i32,
    request_id: i32,
    op_code: i32,
}

impl Header {
    fn parse(b: &[u8; HEADER_LEN]) -> Option<Header> {
        let length = i32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let request_id = i32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        let op_code = i32::from_le_bytes([b[12], b[13], b[14], b[15]]);
        let len = usize::try_from(length).ok()?;
        if !(HEADER_LEN..=MAX_MESSAGE_SIZE).contains(&len) {
            return None;
        }
        Some(Header {
            length,
            request_id,
            op_code,
        })
    }
}

/// An OP_MSG split into its body and document-sequence counts (the responder never
/// needs the sequence documents themselves, only how many there are).
#[derive(Debug)]
struct OpMsg<'a> {
    flags: u32,
    body: &'a RawDocument,
    /// (identifier, number of documents) per kind-1 section.
    sequences: Vec<(&'a str, u64)>,
}

fn read_i32(b: &[u8], at: usize) -> Option<i32> {
    let s = b.get(at..at.checked_add(4)?)?;
    Some(i32::from_le_bytes([s[0], s[1], s[2], s[3]]))
}

/// Length of the BSON document starting at `at`, checked against the buffer.
fn doc_len(b: &[u8], at: usize) -> Option<usize> {
    let n = usize::try_from(read_i32(b, at)?).ok()?;
    if n < 5 || at.checked_add(n)? > b.len() {
        return None;
    }
    Some(n)
}

impl<'a> OpMsg<'a> {
    /// `b` is the message after the header.
    fn parse(b: &'a [u8]) -> Option<OpMsg<'a>> {
        let flags = u32::from_le_bytes(b.get(0..4)?.try_into().ok()?);
        let end = if flags & FLAG_CHECKSUM != 0 {
            b.len().checked_sub(4)?
        } else {
            b.len()
        };
        let b = b.get(..end)?;
        let mut at = 4usize;
        let mut body = None;
        let mut sequences = Vec::new();
        while at < b.len() {
            let kind = *b.get(at)?;
            at += 1;
            match kind {
                0 => {
                    let n = doc_len(b, at)?;
                    body = Some(RawDocument::from_bytes(b.get(at..at + n)?).ok()?);
                    at += n;
                }
                1 => {
                    let size = usize::try_from(read_i32(b, at)?).ok()?;
                    let sec_end = at.checked_add(size)?;
                    let sec = b.get(..sec_end)?;
                    let mut p = at.checked_add(4)?;
                    let nul = sec.get(p..)?.iter().position(|&c| c == 0)?;
                    let ident = std::str::from_utf8(sec.get(p..p + nul)?).ok()?;
                    p += nul + 1;
                    let mut count = 0u64;
                    while p < sec_end {
                        p += doc_len(sec, p)?;
                        count += 1;
                    }
                    sequences.push((ident, count));
                    at = sec_end;
                }
                _ => return None,
            }
        }
        Some(OpMsg {
            flags,
            body: body?,
            sequences,
        })
    }

    fn command_name(&self) -> Option<&'a str> {
        let (k, _) = self.body.iter().next()?.ok()?;
        Some(k.as_str())
    }

    fn str_field(&self, key: &str) -> Option<&'a str> {
        self.body.get_str(key).ok()
    }
}

/// The minimal reply for each command a benchmark run sends; anything else is `ok: 1`.
fn respond(msg: &OpMsg<'_>, counters: &Counters, conn_id: i32) -> Document {
    let name = msg.command_name().unwrap_or("");
    let db = msg.str_field("$db").unwrap_or("test");
    let ns = |coll: Option<&str>| format!("{db}.{}", coll.unwrap_or(""));
    match name.to_ascii_lowercase().as_str() {
        "hello" | "ismaster" => doc! {
            "helloOk": true,
            "ismaster": true,
            "isWritablePrimary": true,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "maxMessageSizeBytes": MAX_MESSAGE_SIZE as i32,
            "maxWriteBatchSize": 100_000,
            "localTime": bson::DateTime::now(),
            "logicalSessionTimeoutMinutes": 30,
            "connectionId": conn_id,
            "minWireVersion": 0,
            "maxWireVersion": 21,
            "readOnly": false,
            "ok": 1.0,
        },
        "buildinfo" => doc! {
            "version": "7.0.0-wire-limit",
            "versionArray": [7, 0, 0, 0],
            "bits": 64,
            "maxBsonObjectSize": 16 * 1024 * 1024,
            "ok": 1.0,
        },
        "insert" => {
            let from_seq: u64 = msg
                .sequences
                .iter()
                .filter(|(id, _)| *id == "documents")
                .map(|(_, n)| *n)
                .sum();
            let from_body = msg
                .body
                .get_array("documents")
                .map(|a| a.into_iter().count() as u64)
                .unwrap_or(0);
            let n = from_seq.saturating_add(from_body);
            counters.add(ns(msg.str_field("insert")), n);
            doc! { "n": i64::try_from(n).unwrap_or(i64::MAX), "ok": 1.0 }
        }
        "count" => {
            let n = counters.get(&ns(msg.str_field("count")));
            doc! { "n": i64::try_from(n).unwrap_or(i64::MAX), "ok": 1.0 }
        }
        "drop" => {
            counters.drop_ns(&ns(msg.str_field("drop")));
            doc! { "ok": 1.0 }
        }
        "dropdatabase" => {
            counters.drop_db(db);
            doc! { "ok": 1.0 }
        }
        // No storageSize: nothing is on disk, and the report shows "-" rather than 0.
        "dbstats" => {
            let (objects, collections) = counters.db_totals(db);
            doc! {
                "db": db,
                "collections": collections,
                "objects": i64::try_from(objects).unwrap_or(i64::MAX),
                "ok": 1.0,
            }
        }
        "aggregate" | "find" => {
            let coll = msg.str_field(name).unwrap_or("");
            doc! { "cursor": { "id": 0i64, "ns": format!("{db}.{coll}"), "firstBatch": [] }, "ok": 1.0 }
        }
        "getmore" => {
            let coll = msg.str_field("collection").unwrap_or("");
            doc! { "cursor": { "id": 0i64, "ns": format!("{db}.{coll}"), "nextBatch": [] }, "ok": 1.0 }
        }
        _ => doc! { "ok": 1.0 },
    }
}

/// Header + flagBits 0 + one kind-0 section.
fn encode_reply(
    out: &mut Vec<u8>,
    request_id: i32,
    response_to: i32,
    body: &Document,
) -> Option<()> {
    let bytes = body.to_vec().ok()?;
    let total = HEADER_LEN
        .checked_add(4)?
        .checked_add(1)?
        .checked_add(bytes.len())?;
    out.extend_from_slice(&i32::try_from(total).ok()?.to_le_bytes());
    out.extend_from_slice(&request_id.to_le_bytes());
    out.extend_from_slice(&response_to.to_le_bytes());
    out.extend_from_slice(&OP_MSG.to_le_bytes());
    out.extend_from_slice(&0u32.to_le_bytes());
    out.push(0);
    out.extend_from_slice(&bytes);
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg_bytes(flags: u32, body: &Document, seq: Option<(&str, &[Document])>) -> Vec<u8> {
        let mut b = flags.to_le_bytes().to_vec();
        b.push(0);
        b.extend(body.to_vec().unwrap());
        if let Some((id, docs)) = seq {
            let mut s = Vec::new();
            s.extend(id.as_bytes());
            s.push(0);
            for d in docs {
                s.extend(d.to_vec().unwrap());
            }
            b.push(1);
            b.extend(((s.len() + 4) as i32).to_le_bytes());
            b.extend(s);
        }
        b
    }

    #[test]
    fn header_bounds() {
        let mk = |len: i32| {
            let mut h = [0u8; 16];
            h[0..4].copy_from_slice(&len.to_le_bytes());
            h[12..16].copy_from_slice(&OP_MSG.to_le_bytes());
            h
        };
        for (len, ok) in [
            (15, false),
            (16, true),
            (-1, false),
            (48_000_001, false),
            (1000, true),
        ] {
            assert_eq!(Header::parse(&mk(len)).is_some(), ok, "len {len}");
        }
    }

    #[test]
    fn parses_body_and_sequences() {
        let docs = vec![doc! {"a": 1}, doc! {"b": "x"}, doc! {}];
        let b = msg_bytes(
            0,
            &doc! {"insert": "c", "$db": "d"},
            Some(("documents", &docs)),
        );
        let m = OpMsg::parse(&b).unwrap();
        assert_eq!(m.command_name(), Some("insert"));
        assert_eq!(m.sequences, vec![("documents", 3)]);
        let c = Counters::default();
        let r = respond(&m, &c, 1);
        assert_eq!(r.get_i64("n").unwrap(), 3);
        assert_eq!(c.get("d.c"), 3);
        assert_eq!(c.db_totals("d"), (3, 1));
    }

    #[test]
    fn rejects_malformed() {
        let good = msg_bytes(0, &doc! {"ping": 1}, None);
        assert!(OpMsg::parse(&good).is_some());
        // Truncations at every length must fail cleanly, never panic.
        for n in 0..good.len() {
            assert!(OpMsg::parse(&good[..n]).is_none(), "prefix {n}");
        }
        let mut bad_kind = good.clone();
        bad_kind[4] = 7;
        assert!(OpMsg::parse(&bad_kind).is_none());
        let mut bad_seq = msg_bytes(0, &doc! {"insert": "c"}, Some(("documents", &[doc! {}])));
        let l = bad_seq.len();
        bad_seq[l - 5] = 200; // inner document claims more bytes than exist
        assert!(OpMsg::parse(&bad_seq).is_none());
    }

    #[test]
    fn reply_frame() {
        let mut out = Vec::new();
        encode_reply(&mut out, 7, 42, &doc! {"ok": 1.0}).unwrap();
        assert_eq!(read_i32(&out, 0).unwrap() as usize, out.len());
        assert_eq!(read_i32(&out, 8), Some(42));
        assert_eq!(read_i32(&out, 12), Some(OP_MSG));
        let m = OpMsg::parse(&out[16..]).unwrap();
        assert_eq!(m.body.get_f64("ok").unwrap(), 1.0);
    }

    #[test]
    fn encodes_socket_path() {
        assert_eq!(
            percent_encode_path("/tmp/bisondb-27017.sock"),
            "%2Ftmp%2Fbisondb-27017.sock"
        );
    }
}
