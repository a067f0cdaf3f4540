//! Exhaust cursors on the wire: a `getMore` sent with the OP_MSG flag
//! `exhaustAllowed` is answered by one reply per batch, each but the last
//! flagged `moreToCome` and answering the previous reply, until the cursor
//! is exhausted. The Rust driver has no exhaust cursors, so these tests speak
//! raw OP_MSG.

use crate::common::*;
use bisondb_wire::msg_flags;
use bson::{doc, Document, RawDocumentBuf};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// One reply: its header's requestId and responseTo, its flags and body.
struct Reply {
    request_id: i32,
    response_to: i32,
    flags: u32,
    body: Document,
}

async fn send(stream: &mut TcpStream, request_id: i32, flags: u32, body: &Document) {
    let raw = RawDocumentBuf::try_from(body).expect("body to raw");
    let bytes = bisondb_wire::encode_op_msg(request_id, 0, flags, &raw, None).expect("encode");
    stream.write_all(&bytes).await.expect("write");
}

async fn read(stream: &mut TcpStream) -> Reply {
    tokio::time::timeout(IO_TIMEOUT, async {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await.expect("reply header");
        let len = i32::from_le_bytes([header[0], header[1], header[2], header[3]]);
        let mut message = header.to_vec();
        message.resize(usize::try_from(len).expect("positive length"), 0);
        stream
            .read_exact(&mut message[16..])
            .await
            .expect("reply body");
        let frame = bisondb_wire::Frame::parse(bytes::Bytes::from(message)).expect("frame");
        let incoming = bisondb_wire::decode_frame(frame).expect("reply decodes");
        let bisondb_wire::Request::Msg(m) = &incoming.request else {
            panic!("expected an OP_MSG reply");
        };
        Reply {
            request_id: incoming.header.request_id,
            response_to: incoming.header.response_to,
            flags: m.flags(),
            body: Document::try_from(m.body()).expect("reply document"),
        }
    })
    .await
    .expect("reply within timeout")
}

fn cursor_of(body: &Document) -> (i64, Vec<i64>) {
    let c = body
        .get_document("cursor")
        .unwrap_or_else(|_| panic!("no cursor in {body}"));
    let batch = c
        .get_array("firstBatch")
        .or_else(|_| c.get_array("nextBatch"))
        .expect("batch");
    let ids = batch
        .iter()
        .map(|d| num(d.as_document().expect("doc"), "_id"))
        .collect();
    (c.get_i64("id").expect("cursor id"), ids)
}

async fn seed(ts: &TestServer, n: i32) {
    ts.tcp
        .database("ex")
        .collection::<Document>("c")
        .insert_many((0..n).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaust_get_more_streams_every_batch() {
    let ts = start().await;
    seed(&ts, 7).await;
    let mut s = ts.raw_tcp().await;
    send(
        &mut s,
        10,
        0,
        &doc! {"find": "c", "batchSize": 1, "$db": "ex"},
    )
    .await;
    let first = read(&mut s).await;
    assert_eq!(first.flags & msg_flags::MORE_TO_COME, 0);
    let (id, got) = cursor_of(&first.body);
    assert_ne!(id, 0);
    assert_eq!(got, vec![0]);

    send(
        &mut s,
        11,
        msg_flags::EXHAUST_ALLOWED,
        &doc! {"getMore": id, "collection": "c", "batchSize": 2, "$db": "ex"},
    )
    .await;
    // Batches of 2 over the 6 documents left: three full ones flagged
    // moreToCome, then the empty one that finds the end (as mongod, a full
    // batch does not look ahead).
    let mut response_to = 11;
    let mut seen = Vec::new();
    for round in 0..4 {
        let r = read(&mut s).await;
        assert_eq!(r.response_to, response_to, "round {round}");
        let (cid, ids) = cursor_of(&r.body);
        seen.extend(ids);
        if round < 3 {
            assert_ne!(r.flags & msg_flags::MORE_TO_COME, 0, "round {round}");
            assert_eq!(cid, id);
        } else {
            assert_eq!(r.flags & msg_flags::MORE_TO_COME, 0, "last reply");
            assert_eq!(cid, 0);
        }
        response_to = r.request_id;
    }
    assert_eq!(seen, vec![1, 2, 3, 4, 5, 6]);
    // The connection serves ordinary commands again.
    send(&mut s, 12, 0, &doc! {"ping": 1, "$db": "admin"}).await;
    let pong = read(&mut s).await;
    assert_eq!(pong.response_to, 12);
    assert_eq!(num(&pong.body, "ok"), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exhaust_ends_on_an_error_or_without_the_flag() {
    let ts = start().await;
    seed(&ts, 4).await;
    let mut s = ts.raw_tcp().await;
    // An unknown cursor: one error reply, no stream.
    send(
        &mut s,
        20,
        msg_flags::EXHAUST_ALLOWED,
        &doc! {"getMore": 12345_i64, "collection": "c", "$db": "ex"},
    )
    .await;
    let r = read(&mut s).await;
    assert_eq!(r.flags & msg_flags::MORE_TO_COME, 0);
    assert_eq!(r.response_to, 20);
    assert_eq!(num(&r.body, "code"), 43);

    // Without exhaustAllowed a getMore answers once.
    let first = raw_command(&mut s, doc! {"find": "c", "batchSize": 1, "$db": "ex"}).await;
    let (id, _) = cursor_of(&first);
    send(
        &mut s,
        21,
        0,
        &doc! {"getMore": id, "collection": "c", "batchSize": 1, "$db": "ex"},
    )
    .await;
    let r = read(&mut s).await;
    assert_eq!(r.flags & msg_flags::MORE_TO_COME, 0);
    assert_eq!(cursor_of(&r.body), (id, vec![1]));
    // Other commands ignore the flag.
    send(
        &mut s,
        22,
        msg_flags::EXHAUST_ALLOWED,
        &doc! {"ping": 1, "$db": "admin"},
    )
    .await;
    let r = read(&mut s).await;
    assert_eq!(r.flags & msg_flags::MORE_TO_COME, 0);
    assert_eq!(r.response_to, 22);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_batch_leaves_the_cursor_open() {
    let ts = start().await;
    seed(&ts, 3).await;
    let mut s = ts.raw_tcp().await;
    let first = raw_command(&mut s, doc! {"find": "c", "batchSize": 3, "$db": "ex"}).await;
    let (id, ids) = cursor_of(&first);
    assert_eq!(ids, vec![0, 1, 2]);
    assert_ne!(id, 0, "mongod learns of the end on the next getMore");
    let next = raw_command(&mut s, doc! {"getMore": id, "collection": "c", "$db": "ex"}).await;
    assert_eq!(cursor_of(&next), (0, vec![]));
    // A batch that stops short of its size, or a limit, closes it at once.
    let short = raw_command(&mut s, doc! {"find": "c", "batchSize": 5, "$db": "ex"}).await;
    assert_eq!(cursor_of(&short).0, 0);
    let limited = raw_command(
        &mut s,
        doc! {"find": "c", "batchSize": 2, "limit": 2, "$db": "ex"},
    )
    .await;
    assert_eq!(cursor_of(&limited).0, 0);
    // A blocking sort knows its end, as mongod's SORT stage does.
    let sorted = raw_command(
        &mut s,
        doc! {"find": "c", "sort": {"x": 1}, "batchSize": 3, "$db": "ex"},
    )
    .await;
    assert_eq!(cursor_of(&sorted).0, 0);
    // So does a listing held in memory.
    let listed = raw_command(
        &mut s,
        doc! {"listIndexes": "c", "cursor": {"batchSize": 1}, "$db": "ex"},
    )
    .await;
    assert_eq!(
        listed
            .get_document("cursor")
            .and_then(|c| c.get_i64("id"))
            .ok(),
        Some(0)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_more_takes_a_comment() {
    // mongod 4.4+ accepts `comment` (any type) on getMore; the driver sends
    // the find's comment with each getMore.
    let ts = start().await;
    seed(&ts, 5).await;
    let coll = ts.tcp.database("ex").collection::<Document>("c");
    let docs = collect(
        coll.find(doc! {})
            .batch_size(2)
            .comment(bson::Bson::String("why".into()))
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(docs.len(), 5);
    let mut s = ts.raw_tcp().await;
    let first = raw_command(&mut s, doc! {"find": "c", "batchSize": 1, "$db": "ex"}).await;
    let (id, _) = cursor_of(&first);
    let next = raw_command(
        &mut s,
        doc! {"getMore": id, "collection": "c", "comment": {"why": 1}, "$db": "ex"},
    )
    .await;
    assert_eq!(cursor_of(&next), (0, vec![1, 2, 3, 4]));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tailable_exhaust_stream_ends_on_an_empty_batch() {
    let ts = start().await;
    let db = ts.tcp.database("ex");
    db.run_command(doc! {"create": "capped", "capped": true, "size": 4096})
        .await
        .unwrap();
    db.collection::<Document>("capped")
        .insert_many((0..3).map(|i| doc! {"_id": i}))
        .await
        .unwrap();
    let mut s = ts.raw_tcp().await;
    let first = raw_command(
        &mut s,
        doc! {"find": "capped", "tailable": true, "awaitData": true, "batchSize": 1, "$db": "ex"},
    )
    .await;
    let (id, got) = cursor_of(&first);
    assert_eq!(got, vec![0]);
    send(
        &mut s,
        30,
        msg_flags::EXHAUST_ALLOWED,
        &doc! {"getMore": id, "collection": "capped", "maxTimeMS": 50, "$db": "ex"},
    )
    .await;
    let r = read(&mut s).await;
    assert_ne!(r.flags & msg_flags::MORE_TO_COME, 0);
    assert_eq!(cursor_of(&r.body), (id, vec![1, 2]));
    // Nothing new within maxTimeMS: an empty batch, the cursor still open,
    // and the stream ends so the client decides when to ask again.
    let r2 = read(&mut s).await;
    assert_eq!(r2.response_to, r.request_id);
    assert_eq!(r2.flags & msg_flags::MORE_TO_COME, 0);
    assert_eq!(cursor_of(&r2.body), (id, vec![]));
}
