//! Server lifecycle and load: the shutdown command, stale and live socket files,
//! port conflicts, and concurrent inserters.

use std::time::Duration;

use crate::common::*;
use bisondb_server::Server;
use bson::{doc, Document};
use mongodb::Client;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_command_stops_server_and_removes_socket() {
    let ts = start().await;
    let sock = ts.socket_path();
    assert!(sock.exists());
    // Non-admin databases may not shut the server down.
    expect_code(
        ts.tcp
            .database("test")
            .run_command(doc! {"shutdown": 1})
            .await,
        13,
    );
    assert!(!ts.server.state.is_shutting_down());

    // mongod closes the connection instead of answering; either outcome is fine here.
    let _ = ts
        .unix
        .database("admin")
        .run_command(doc! {"shutdown": 1})
        .await;
    let TestServer { server, dir, .. } = ts;
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("server.wait() returns after shutdown");
    assert!(!sock.exists(), "socket file removed on shutdown");

    // Nothing listens any more.
    let client = Client::with_uri_str(socket_uri(&sock).replace(
        "serverSelectionTimeoutMS=5000",
        "serverSelectionTimeoutMS=500",
    ))
    .await
    .unwrap();
    assert!(client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .is_err());
    drop(dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn programmatic_shutdown_closes_connections() {
    let ts = start().await;
    let mut raw = ts.raw_tcp().await;
    let r = raw_command(&mut raw, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0));
    let port = ts.server.port();
    ts.server.shutdown();
    let TestServer { server, .. } = ts;
    tokio::time::timeout(Duration::from_secs(10), server.wait())
        .await
        .expect("wait returns");
    assert!(
        closed_by_server(&mut raw).await,
        "open connections are closed on shutdown"
    );
    assert!(
        tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_err(),
        "listener closed"
    );
}

/// A port that was free a moment ago (the socket name depends on the port).
fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stale_socket_file_is_replaced() {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let mut cfg = config(dir.path());
    cfg.port = port;
    let path = cfg.socket_path(port);
    // A socket file nobody listens on, as a killed server leaves behind.
    drop(std::os::unix::net::UnixListener::bind(&path).unwrap());
    assert!(path.exists());

    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("start over a stale socket failed: {}", e.message),
    };
    assert_eq!(server.socket_path.as_deref(), Some(path.as_path()));
    let client = Client::with_uri_str(socket_uri(&path)).await.unwrap();
    let r = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert!(is_num(r.get("ok").unwrap(), 1.0));
    server.shutdown();
    server.wait().await;
    assert!(!path.exists());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn second_server_on_same_port_or_socket_fails() {
    let ts = start().await;
    let port = ts.server.port();

    // Same TCP port.
    let dir2 = tempfile::tempdir().unwrap();
    let mut cfg = config(dir2.path());
    cfg.port = port;
    match Server::start(cfg).await {
        Ok(_) => panic!("a second server bound port {port}"),
        Err(e) => assert!(
            e.message.contains(&port.to_string()) && e.message.contains("listen"),
            "unclear error: {}",
            e.message
        ),
    }

    // Same socket path, no TCP listener: must not steal the live socket.
    let mut cfg = config(ts.dir.path());
    cfg.port = port;
    cfg.bind_ip = vec![];
    match Server::start(cfg).await {
        Ok(_) => panic!("a second server took over the live socket"),
        Err(e) => assert!(
            e.message.contains("already"),
            "unclear error: {}",
            e.message
        ),
    }
    // The first server is unharmed.
    assert!(ts.socket_path().exists());
    for (t, client) in ts.clients() {
        let r = client
            .database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap();
        assert!(is_num(r.get("ok").unwrap(), 1.0), "{t}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_without_unix_socket() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.unix_socket = false;
    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("{}", e.message),
    };
    assert!(server.socket_path.is_none());
    // The dbpath lives in `dir` too (the lsm engine creates it), so look for
    // sockets rather than expecting an empty directory.
    let sockets: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap()
        .filter_map(Result::ok)
        .filter(|e| {
            use std::os::unix::fs::FileTypeExt;
            e.file_type().is_ok_and(|t| t.is_socket())
                || e.file_name().to_string_lossy().ends_with(".sock")
        })
        .map(|e| e.path())
        .collect();
    assert!(sockets.is_empty(), "socket files created: {sockets:?}");
    let client = Client::with_uri_str(tcp_uri(server.port())).await.unwrap();
    let r = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert!(is_num(r.get("ok").unwrap(), 1.0));
    server.shutdown();
    server.wait().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn eight_concurrent_inserters() {
    let ts = start().await;
    let mut tasks = Vec::new();
    for task in 0..8i32 {
        // Half the tasks use each transport, sharing the two clients' pools.
        let client = if task % 2 == 0 {
            ts.tcp.clone()
        } else {
            ts.unix.clone()
        };
        tasks.push(tokio::spawn(async move {
            let coll = client.database("conc").collection::<Document>("c");
            // 500 single inserts and 500 in batches of 50, so both paths race.
            for i in 0..500 {
                coll.insert_one(doc! {"task": task, "i": i}).await.unwrap();
            }
            for chunk in 0..10 {
                let docs: Vec<Document> = (0..50)
                    .map(|j| doc! {"task": task, "i": 500 + chunk * 50 + j})
                    .collect();
                coll.insert_many(docs).await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let coll = ts.tcp.database("conc").collection::<Document>("c");
    assert_eq!(count(&coll, doc! {}).await, 8000);
    assert_eq!(coll.estimated_document_count().await.unwrap(), 8000);
    for task in 0..8 {
        assert_eq!(count(&coll, doc! {"task": task}).await, 1000, "task {task}");
    }
    let ids = coll.distinct("_id", doc! {}).await.unwrap();
    assert_eq!(ids.len(), 8000, "every generated _id is unique");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn socket_file_has_mongod_default_permissions() {
    use std::os::unix::fs::{FileTypeExt, PermissionsExt};
    let ts = start().await;
    let meta = std::fs::metadata(ts.socket_path()).unwrap();
    assert!(meta.file_type().is_socket());
    assert_eq!(meta.permissions().mode() & 0o777, 0o700);
    let name = ts
        .socket_path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .to_string();
    assert_eq!(name, format!("bisondb-{}.sock", ts.server.port()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_max_conns_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = config(dir.path());
    cfg.max_conns = 2;
    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("{}", e.message),
    };
    let port = server.port();
    let mut a = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    let mut b = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    for s in [&mut a, &mut b] {
        let r = raw_command(s, doc! {"ping": 1, "$db": "admin"}).await;
        assert!(is_num(r.get("ok").unwrap(), 1.0));
    }
    let mut c = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .unwrap();
    assert!(
        closed_by_server(&mut c).await,
        "the third connection is refused"
    );
    // Freeing a slot lets a new connection in.
    drop(a);
    let mut ok = false;
    for _ in 0..50 {
        let mut d = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        send_msg(&mut d, 1, &doc! {"ping": 1, "$db": "admin"}).await;
        let mut buf = [0u8; 4];
        use tokio::io::AsyncReadExt;
        if let Ok(Ok(4)) = tokio::time::timeout(Duration::from_secs(2), d.read(&mut buf)).await {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "a slot freed by a closed connection is reused");
    let r = raw_command(&mut b, doc! {"ping": 1, "$db": "admin"}).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0));
}
