//! Malformed traffic on raw TCP connections: each bad message must close only its
//! own connection, while a driver client and another raw connection keep working.

use crate::common::*;
use bson::{doc, Document, RawDocumentBuf};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// Asserts the bystanders are unharmed: a raw connection opened earlier and both
/// driver clients still answer.
async fn bystanders_ok(ts: &TestServer, raw: &mut TcpStream, what: &str) {
    let r = raw_command(raw, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(
        is_num(r.get("ok").unwrap(), 1.0),
        "{what}: bystander raw connection: {r}"
    );
    for (t, client) in ts.clients() {
        let n = count(&client.database("rb").collection::<Document>("c"), doc! {}).await;
        assert_eq!(n, 2, "{what}: {t} client");
    }
}

async fn send_and_expect_close(ts: &TestServer, bytes: &[u8], half_close: bool, what: &str) {
    let mut victim = ts.raw_tcp().await;
    // Prove the connection works before the bad bytes go out.
    let r = raw_command(&mut victim, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{what}");
    victim.write_all(bytes).await.unwrap();
    if half_close {
        victim.shutdown().await.unwrap();
    }
    assert!(
        closed_by_server(&mut victim).await,
        "{what}: the server should close the connection"
    );
}

async fn setup() -> (TestServer, TcpStream) {
    let ts = start().await;
    ts.tcp
        .database("rb")
        .collection::<Document>("c")
        .insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}])
        .await
        .unwrap();
    let bystander = ts.raw_tcp().await;
    (ts, bystander)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn garbage_bytes_close_only_that_connection() {
    let (ts, mut bystander) = setup().await;
    // An HTTP request reads as a ~542 MB message length: refused before allocating.
    send_and_expect_close(&ts, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n", false, "http").await;
    bystanders_ok(&ts, &mut bystander, "http").await;
    // All-ones: a negative length.
    send_and_expect_close(&ts, &[0xff; 64], false, "0xff").await;
    bystanders_ok(&ts, &mut bystander, "0xff").await;
    // A well-framed message with an unknown opcode.
    let mut unknown = header(32, 1, 9999);
    unknown.extend_from_slice(&[0u8; 16]);
    send_and_expect_close(&ts, &unknown, false, "unknown opcode").await;
    bystanders_ok(&ts, &mut bystander, "unknown opcode").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_lengths_close_the_connection() {
    let (ts, mut bystander) = setup().await;
    let mut five = header(5, 1, bisondb_wire::op::OP_MSG);
    five.extend_from_slice(&[0u8; 16]);
    send_and_expect_close(&ts, &five, false, "length 5").await;
    bystanders_ok(&ts, &mut bystander, "length 5").await;

    // 48,000,001 bytes announced: refused from the header alone, nothing else sent.
    let huge = header(48_000_001, 1, bisondb_wire::op::OP_MSG);
    send_and_expect_close(&ts, &huge, false, "length over max").await;
    bystanders_ok(&ts, &mut bystander, "length over max").await;

    let neg = header(i32::MIN, 1, bisondb_wire::op::OP_MSG);
    send_and_expect_close(&ts, &neg, false, "negative length").await;
    bystanders_ok(&ts, &mut bystander, "negative length").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncated_messages_close_the_connection() {
    let (ts, mut bystander) = setup().await;
    let body = RawDocumentBuf::try_from(&doc! {"ping": 1, "$db": "admin"}).unwrap();
    let full = bisondb_wire::encode_op_msg(1, 0, 0, &body, None).unwrap();

    // The header's length cuts the BSON body short: the frame is complete but its
    // section is not.
    let cut = full.len() - 6;
    let mut short = full[..cut].to_vec();
    short[..4].copy_from_slice(&(cut as i32).to_le_bytes());
    send_and_expect_close(&ts, &short, false, "inconsistent body").await;
    bystanders_ok(&ts, &mut bystander, "inconsistent body").await;

    // Half a message, then the client stops sending.
    send_and_expect_close(&ts, &full[..full.len() / 2], true, "half message then EOF").await;
    bystanders_ok(&ts, &mut bystander, "half message").await;

    // A BSON document whose own length disagrees with the section.
    let mut lying = full.to_vec();
    let doc_at = 16 + 4 + 1;
    let declared = i32::from_le_bytes(lying[doc_at..doc_at + 4].try_into().unwrap());
    lying[doc_at..doc_at + 4].copy_from_slice(&(declared + 40).to_le_bytes());
    send_and_expect_close(&ts, &lying, false, "bson length lies").await;
    bystanders_ok(&ts, &mut bystander, "bson length lies").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_checksum_closes_only_that_connection() {
    let (ts, mut bystander) = setup().await;
    let body = RawDocumentBuf::try_from(&doc! {"ping": 1, "$db": "admin"}).unwrap();
    let flags = bisondb_wire::msg_flags::CHECKSUM_PRESENT;

    // A correct checksum is accepted.
    let good = bisondb_wire::encode_op_msg(7, 0, flags, &body, None).unwrap();
    let mut conn = ts.raw_tcp().await;
    conn.write_all(&good).await.unwrap();
    let r = read_reply(&mut conn).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");

    let mut bad = good.to_vec();
    let last = bad.len() - 1;
    bad[last] ^= 0x5a;
    send_and_expect_close(&ts, &bad, false, "bad crc").await;
    bystanders_ok(&ts, &mut bystander, "bad crc").await;
    // The connection that sent the good checksum is still open too.
    let r = raw_command(&mut conn, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_to_come_gets_no_reply_but_runs() {
    let (ts, _bystander) = setup().await;
    let mut conn = ts.raw_tcp().await;
    let body =
        RawDocumentBuf::try_from(&doc! {"insert": "c", "documents": [{"_id": 3}], "$db": "rb"})
            .unwrap();
    let msg = bisondb_wire::encode_op_msg(1, 0, bisondb_wire::msg_flags::MORE_TO_COME, &body, None)
        .unwrap();
    conn.write_all(&msg).await.unwrap();
    // The next reply on this connection belongs to the ping, not the insert.
    send_msg(&mut conn, 2, &doc! {"ping": 1, "$db": "admin"}).await;
    let r = read_reply(&mut conn).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");
    assert!(!r.contains_key("n"), "the insert must not be answered: {r}");
    let n = count(&ts.unix.database("rb").collection::<Document>("c"), doc! {}).await;
    assert_eq!(n, 3, "the fire-and-forget insert ran");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn legacy_op_query_hello_is_answered() {
    let ts = start().await;
    let mut conn = ts.raw_tcp().await;
    let q = doc! {"isMaster": 1};
    let qb = q.to_vec().unwrap();
    let ns = b"admin.$cmd\0";
    let len = 16 + 4 + ns.len() + 4 + 4 + qb.len();
    let mut msg = header(len as i32, 11, bisondb_wire::op::OP_QUERY);
    msg.extend_from_slice(&0i32.to_le_bytes());
    msg.extend_from_slice(ns);
    msg.extend_from_slice(&0i32.to_le_bytes());
    msg.extend_from_slice(&(-1i32).to_le_bytes());
    msg.extend_from_slice(&qb);
    conn.write_all(&msg).await.unwrap();

    let reply = tokio::time::timeout(IO_TIMEOUT, async {
        use tokio::io::AsyncReadExt;
        let mut h = [0u8; 16];
        conn.read_exact(&mut h).await.unwrap();
        let len = i32::from_le_bytes(h[0..4].try_into().unwrap()) as usize;
        let response_to = i32::from_le_bytes(h[8..12].try_into().unwrap());
        let op = i32::from_le_bytes(h[12..16].try_into().unwrap());
        assert_eq!((response_to, op), (11, bisondb_wire::op::OP_REPLY));
        let mut rest = vec![0u8; len - 16];
        conn.read_exact(&mut rest).await.unwrap();
        let n_returned = i32::from_le_bytes(rest[16..20].try_into().unwrap());
        assert_eq!(n_returned, 1);
        Document::from_reader(&mut std::io::Cursor::new(&rest[20..])).unwrap()
    })
    .await
    .unwrap();
    assert_eq!(reply.get_bool("ismaster").ok(), Some(true), "{reply}");
    assert_eq!(num(&reply, "maxWireVersion"), 25);
}
