//! Handshake and diagnostic commands over both transports: hello/isMaster, ping,
//! buildInfo, getParameter, getCmdLineOpts, serverStatus, hostInfo, whatsmyuri,
//! connectionStatus, listCommands, getLog, endSessions, and wire compression.

use crate::common::*;
use bson::{doc, spec::BinarySubtype, Binary, Bson, Document};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_reports_mongod_limits_on_both_transports() {
    let ts = start().await;
    let mut ids = Vec::new();
    for (t, client) in ts.clients() {
        let r = client
            .database("admin")
            .run_command(doc! {"hello": 1})
            .await
            .unwrap();
        assert!(r.get_bool("isWritablePrimary").unwrap(), "{t}: {r}");
        assert_eq!(num(&r, "maxWireVersion"), 25, "{t}");
        assert_eq!(num(&r, "minWireVersion"), 0, "{t}");
        assert_eq!(num(&r, "maxBsonObjectSize"), 16_777_216, "{t}");
        assert_eq!(num(&r, "maxMessageSizeBytes"), 48_000_000, "{t}");
        assert_eq!(num(&r, "maxWriteBatchSize"), 100_000, "{t}");
        assert_eq!(num(&r, "logicalSessionTimeoutMinutes"), 30, "{t}");
        assert!(
            matches!(r.get("localTime"), Some(Bson::DateTime(_))),
            "{t}: {r}"
        );
        assert!(
            !r.contains_key("ismaster"),
            "hello must not use the legacy field: {r}"
        );
        let id = num(&r, "connectionId");
        assert!(id >= 1, "{t}: connectionId {id}");
        ids.push(id);
        assert!(is_num(r.get("ok").unwrap(), 1.0));
    }
    assert_ne!(ids[0], ids[1], "two clients share a connection id");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn is_master_has_the_legacy_shape() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        for name in ["isMaster", "ismaster"] {
            let r = client
                .database("admin")
                .run_command(doc! {name: 1})
                .await
                .unwrap();
            assert_eq!(r.get_bool("ismaster").ok(), Some(true), "{t} {name}: {r}");
            assert!(!r.contains_key("isWritablePrimary"), "{t} {name}: {r}");
            assert_eq!(num(&r, "maxWireVersion"), 25);
            assert_eq!(num(&r, "maxBsonObjectSize"), 16_777_216);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_and_build_info() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let r = client
            .database("anydb")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap();
        assert!(is_num(r.get("ok").unwrap(), 1.0), "{t}: {r}");

        let r = client
            .database("admin")
            .run_command(doc! {"buildInfo": 1})
            .await
            .unwrap();
        let version = r.get_str("version").unwrap();
        let arr = r.get_array("versionArray").unwrap();
        assert_eq!(arr.len(), 4, "{r}");
        let parts: Vec<i64> = arr
            .iter()
            .map(|v| match v {
                Bson::Int32(n) => i64::from(*n),
                Bson::Int64(n) => *n,
                other => panic!("versionArray element {other:?}"),
            })
            .collect();
        assert!(parts[0] >= 7, "should claim mongod 7 or 8: {version}");
        assert!(
            version.starts_with(&format!("{}.{}.{}", parts[0], parts[1], parts[2])),
            "version {version} disagrees with versionArray {parts:?}"
        );
        assert_eq!(num(&r, "maxBsonObjectSize"), 16_777_216);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_parameter_star_by_name_and_unknown() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let admin = client.database("admin");
        let all = admin.run_command(doc! {"getParameter": "*"}).await.unwrap();
        assert!(
            all.contains_key("featureCompatibilityVersion"),
            "{t}: {all}"
        );
        assert!(all.len() > 5, "{t}: '*' should list every parameter: {all}");

        let one = admin
            .run_command(doc! {"getParameter": 1, "maxBSONDepth": 1})
            .await
            .unwrap();
        assert_eq!(num(&one, "maxBSONDepth"), 200, "{t}: {one}");
        assert!(
            !one.contains_key("featureCompatibilityVersion"),
            "{t}: only the named one: {one}"
        );

        let e = expect_code(
            admin
                .run_command(doc! {"getParameter": 1, "noSuchParameterXyz": 1})
                .await,
            72,
        );
        assert_eq!(error_code_name(&e).as_deref(), Some("InvalidOptions"));
        // The same client keeps working after the error.
        let again = admin
            .run_command(doc! {"getParameter": 1, "maxBSONDepth": 1})
            .await
            .unwrap();
        assert_eq!(num(&again, "maxBSONDepth"), 200);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_cmd_line_opts_is_admin_only() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let r = client
            .database("admin")
            .run_command(doc! {"getCmdLineOpts": 1})
            .await
            .unwrap();
        assert!(r.get_array("argv").is_ok(), "{t}: {r}");
        let net = r
            .get_document("parsed")
            .unwrap()
            .get_document("net")
            .unwrap();
        assert_eq!(num(net, "port"), i64::from(ts.server.port()), "{t}: {r}");

        let e = expect_code(
            client
                .database("test")
                .run_command(doc! {"getCmdLineOpts": 1})
                .await,
            13,
        );
        assert_eq!(error_code_name(&e).as_deref(), Some("Unauthorized"));
        assert!(error_message(&e).contains("admin"), "{}", error_message(&e));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_status_counts_connections_and_inserts() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let admin = client.database("admin");
        let before = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
        assert!(float(&before, "uptime") >= 0.0, "{t}");
        let conns = before.get_document("connections").unwrap();
        assert!(num(conns, "current") >= 1, "{t}: {conns}");
        assert!(
            num(conns, "totalCreated") >= num(conns, "current"),
            "{t}: {conns}"
        );
        let ins_before = num(before.get_document("opcounters").unwrap(), "insert");

        let docs: Vec<Document> = (0..7).map(|i| doc! {"i": i}).collect();
        client
            .database("ss")
            .collection::<Document>(t)
            .insert_many(docs)
            .await
            .unwrap();

        let after = admin.run_command(doc! {"serverStatus": 1}).await.unwrap();
        let ins_after = num(after.get_document("opcounters").unwrap(), "insert");
        assert_eq!(ins_after - ins_before, 7, "{t}: opcounters.insert");
        assert!(float(&after, "uptime") >= float(&before, "uptime"));
        assert!(
            num(after.get_document("opcounters").unwrap(), "command")
                > num(before.get_document("opcounters").unwrap(), "command"),
            "{t}: opcounters.command should grow"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn host_info_whatsmyuri_connection_status() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let admin = client.database("admin");
        let h = admin.run_command(doc! {"hostInfo": 1}).await.unwrap();
        let system = h.get_document("system").unwrap();
        assert!(!system.get_str("hostname").unwrap().is_empty(), "{t}: {h}");
        assert!(num(system, "numCores") >= 1, "{t}: {h}");
        assert!(!h
            .get_document("os")
            .unwrap()
            .get_str("type")
            .unwrap()
            .is_empty());

        let c = admin
            .run_command(doc! {"connectionStatus": 1})
            .await
            .unwrap();
        let auth = c.get_document("authInfo").unwrap();
        assert!(
            auth.get_array("authenticatedUsers").unwrap().is_empty(),
            "{t}: {c}"
        );
        assert!(
            auth.get_array("authenticatedUserRoles").unwrap().is_empty(),
            "{t}: {c}"
        );
    }

    let me = ts
        .tcp
        .database("admin")
        .run_command(doc! {"whatsmyuri": 1})
        .await
        .unwrap();
    let you = me.get_str("you").unwrap();
    let (host, port) = you.rsplit_once(':').expect("host:port");
    assert_eq!(host, "127.0.0.1", "{you}");
    let port: u16 = port.parse().expect("numeric client port");
    assert_ne!(
        port,
        ts.server.port(),
        "the client's port, not the server's"
    );

    let me = ts
        .unix
        .database("admin")
        .run_command(doc! {"whatsmyuri": 1})
        .await
        .unwrap();
    assert!(!me.get_str("you").unwrap().is_empty(), "{me}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_commands_and_get_log() {
    let ts = start().await;
    for (t, client) in ts.clients() {
        let admin = client.database("admin");
        let r = admin.run_command(doc! {"listCommands": 1}).await.unwrap();
        let cmds = r.get_document("commands").unwrap();
        for name in [
            "find",
            "insert",
            "update",
            "delete",
            "aggregate",
            "getMore",
            "hello",
        ] {
            let c = cmds
                .get_document(name)
                .unwrap_or_else(|_| panic!("{t}: {name} missing"));
            assert!(c.get_str("help").is_ok(), "{t}: {name}: {c}");
        }
        assert!(
            !cmds.contains_key("compact"),
            "unsupported commands are not listed"
        );

        let logs = admin.run_command(doc! {"getLog": "*"}).await.unwrap();
        let names: Vec<&str> = logs
            .get_array("names")
            .unwrap()
            .iter()
            .filter_map(|b| b.as_str())
            .collect();
        assert!(names.contains(&"global"), "{t}: {names:?}");
        assert!(names.contains(&"startupWarnings"), "{t}: {names:?}");
        let global = admin.run_command(doc! {"getLog": "global"}).await.unwrap();
        assert!(global.get_array("log").is_ok(), "{t}: {global}");
        assert!(num(&global, "totalLinesWritten") >= 0);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn end_sessions_kills_the_sessions_cursors() {
    let ts = start().await;
    let coll = ts.tcp.database("es").collection::<Document>("c");
    coll.insert_many((0..10).map(|i| doc! {"_id": i}))
        .await
        .unwrap();

    let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![7u8; 16] }};
    let mut raw = ts.raw_tcp().await;
    let r = raw_command(
        &mut raw,
        doc! {"find": "c", "batchSize": 2, "lsid": lsid.clone(), "$db": "es"},
    )
    .await;
    let cursor = r.get_document("cursor").unwrap();
    let id = cursor.get_i64("id").unwrap();
    assert_ne!(id, 0, "{r}");
    assert_eq!(cursor.get_array("firstBatch").unwrap().len(), 2);

    let r = raw_command(
        &mut raw,
        doc! {"endSessions": [lsid.clone()], "$db": "admin"},
    )
    .await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");

    let r = raw_command(
        &mut raw,
        doc! {"getMore": id, "collection": "c", "lsid": lsid, "$db": "es"},
    )
    .await;
    assert!(
        is_num(r.get("ok").unwrap(), 0.0),
        "cursor should be gone: {r}"
    );
    assert_eq!(num(&r, "code"), 43, "{r}");

    // endSessions through the driver (sessions it never saw) is also fine.
    let other = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: vec![9u8; 16] }};
    let r = ts
        .unix
        .database("admin")
        .run_command(doc! {"endSessions": [other]})
        .await
        .unwrap();
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn compressed_clients_do_crud() {
    let ts = start().await;
    let big = "compressible ".repeat(200);
    for compressor in ["zstd", "snappy", "zlib"] {
        for transport in ["tcp", "unix"] {
            let opt = format!("compressors={compressor}");
            let client = if transport == "tcp" {
                ts.tcp_client_with(&opt).await
            } else {
                ts.unix_client_with(&opt).await
            };
            let coll = client
                .database("cmp")
                .collection::<Document>(&format!("{compressor}_{transport}"));
            let docs: Vec<Document> = (0..150)
                .map(|i| doc! {"_id": i, "s": big.clone(), "i": i})
                .collect();
            let r = coll.insert_many(docs).await.unwrap();
            assert_eq!(r.inserted_ids.len(), 150, "{compressor}/{transport}");

            // 150 documents span a first batch and a getMore, both compressed.
            let found = collect(
                coll.find(doc! {"i": {"$gte": 10}})
                    .sort(doc! {"_id": 1})
                    .await
                    .unwrap(),
            )
            .await;
            assert_eq!(found.len(), 140, "{compressor}/{transport}");
            assert_eq!(found[0].get_i32("_id").unwrap(), 10);
            assert_eq!(found[139].get_str("s").unwrap(), big);

            let u = coll
                .update_many(doc! {"i": {"$lt": 5}}, doc! {"$set": {"s": "short"}})
                .await
                .unwrap();
            assert_eq!(
                (u.matched_count, u.modified_count),
                (5, 5),
                "{compressor}/{transport}"
            );
            let d = coll.delete_many(doc! {"s": "short"}).await.unwrap();
            assert_eq!(d.deleted_count, 5);
            assert_eq!(count(&coll, doc! {}).await, 145, "{compressor}/{transport}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_handshake_negotiates_compression() {
    let ts = start().await;
    let mut raw = ts.raw_tcp().await;
    let hello = doc! {
        "hello": 1,
        "client": {"driver": {"name": "raw-test", "version": "0"}, "os": {"type": "linux"}},
        "compression": ["lz4", "zstd", "snappy"],
        "$db": "admin",
    };
    let r = raw_command(&mut raw, hello).await;
    let offered: Vec<&str> = r
        .get_array("compression")
        .unwrap()
        .iter()
        .filter_map(|b| b.as_str())
        .collect();
    assert_eq!(
        offered,
        vec!["zstd", "snappy"],
        "unknown compressors are dropped, order kept: {r}"
    );

    // A compressed request gets a reply compressed the same way.
    let body = bson::RawDocumentBuf::try_from(&doc! {"ping": 1, "$db": "admin"}).unwrap();
    let msg =
        bisondb_wire::encode_op_msg(5, 0, 0, &body, Some(bisondb_wire::Compressor::Zstd)).unwrap();
    tokio::io::AsyncWriteExt::write_all(&mut raw, &msg)
        .await
        .unwrap();
    let (reply, compressor) = read_reply_with_compressor(&mut raw).await;
    assert!(is_num(reply.get("ok").unwrap(), 1.0), "{reply}");
    assert_eq!(compressor, Some(bisondb_wire::Compressor::Zstd));

    // A second hello may not resend client metadata.
    let again =
        doc! {"hello": 1, "client": {"driver": {"name": "x", "version": "0"}}, "$db": "admin"};
    let r = raw_command(&mut raw, again).await;
    assert!(is_num(r.get("ok").unwrap(), 0.0), "{r}");
    assert_eq!(num(&r, "code"), 186, "{r}");
}

/// The drivers' streaming monitor sends awaitable hellos (topologyVersion +
/// maxAwaitTimeMS); the server must hold them rather than answer at once, or every
/// idle client spins in a hello loop (thousands per second before the fix).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_clients_do_not_spin_on_awaitable_hello() {
    let ts = start().await;
    let admin = ts.unix.database("admin");
    admin.run_command(doc! {"ping": 1}).await.unwrap();
    let commands = |s: &Document| num(s.get_document("opcounters").unwrap(), "command");
    let before = commands(&admin.run_command(doc! {"serverStatus": 1}).await.unwrap());
    tokio::time::sleep(std::time::Duration::from_millis(1500)).await;
    let after = commands(&admin.run_command(doc! {"serverStatus": 1}).await.unwrap());
    // Two clients' monitors plus the two commands above: a handful, not thousands.
    assert!(
        after - before < 50,
        "{} commands in 1.5 s of idling",
        after - before
    );

    // The raw protocol: an awaitable hello is held about maxAwaitTimeMS.
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    let tv = hello.get_document("topologyVersion").unwrap().clone();
    let started = std::time::Instant::now();
    let r = admin
        .run_command(doc! {"hello": 1, "topologyVersion": tv, "maxAwaitTimeMS": 300})
        .await
        .unwrap();
    assert!(r.get_bool("isWritablePrimary").unwrap(), "{r}");
    assert!(
        started.elapsed() >= std::time::Duration::from_millis(250),
        "answered at once"
    );
}
