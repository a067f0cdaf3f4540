//! The server on `--storageEngine postgres` over a private PostgreSQL cluster
//! (skipped with a loud message when PostgreSQL's binaries are missing, failed
//! in CI): it serves through the driver, names its engine in `buildInfo` and
//! `serverStatus`, keeps unique indexes, hands the store to the next server
//! once stopped (a collection and index created by one are used by the next),
//! and lets a second server serve the same store while the first runs.

use bisondb_postgres::testing::tls::TlsCluster;
use bisondb_postgres::testing::TestCluster;
use bisondb_server::{PostgresConfig, RunningServer, Server, ServerConfig};
use bson::doc;
use mongodb::Client;

use crate::common::{error_code, tcp_uri};

pub(crate) fn postgres_config(dir: &std::path::Path, uri: &str) -> ServerConfig {
    ServerConfig {
        port: 0,
        bind_ip: vec!["127.0.0.1".into()],
        unix_socket: false,
        dbpath: dir.join("db"),
        storage_engine: "postgres".into(),
        postgres: PostgresConfig {
            uri: Some(uri.to_string()),
            pool_size: 16,
            ..Default::default()
        },
        ..Default::default()
    }
}

pub(crate) async fn start(dir: &std::path::Path, uri: &str) -> (RunningServer, Client) {
    let server = Server::start(postgres_config(dir, uri))
        .await
        .unwrap_or_else(|e| panic!("postgres server: {} ({:?})", e.message, e.code));
    let client = Client::with_uri_str(tcp_uri(server.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    (server, client)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_on_postgres_serves_and_hands_its_store_on() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (server, client) = start(dir.path(), &uri).await;
    let admin = client.database("admin");
    let info = admin
        .run_command(doc! {"buildInfo": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let engines = info
        .get_array("storageEngines")
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        engines.iter().any(|e| e.as_str() == Some("postgres")),
        "{info}"
    );
    let status = admin
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let engine = status
        .get_document("storageEngine")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(engine.get_str("name").ok(), Some("postgres"));
    assert_eq!(engine.get_bool("persistent").ok(), Some(true));

    let coll = client
        .database("shop")
        .collection::<bson::Document>("items");
    create_unique(&coll, "sku").await;
    let docs: Vec<_> = (0..300)
        .map(|i| doc! {"_id": i, "sku": format!("s{i}")})
        .collect();
    coll.insert_many(docs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let dup = coll.insert_one(doc! {"_id": 1000, "sku": "s7"}).await;
    assert_eq!(dup.err().as_ref().and_then(error_code), Some(11000));
    // More than one batch of a cursor, in both directions of the index.
    let mut cursor = coll
        .find(doc! {"sku": {"$gte": "s1"}})
        .sort(doc! {"sku": -1})
        .batch_size(7)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut seen = 0;
    while cursor.advance().await.unwrap_or_else(|e| panic!("{e}")) {
        seen += 1;
    }
    assert_eq!(seen, 300 - 1, "every sku but s0");
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(300));

    // A second server on the same store serves it while this one runs
    // (`shared_store.rs` tests what they share).
    let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let (second, second_client) = start(other.path(), &uri).await;
    let seen = second_client
        .database("shop")
        .collection::<bson::Document>("items");
    assert_eq!(seen.count_documents(doc! {}).await.ok(), Some(300));
    second.shutdown();
    drop(second_client);
    second.wait().await;

    server.shutdown();
    drop(client);
    server.wait().await;
    // The next server finds the collection, its data and its unique index.
    let mut next = None;
    for _ in 0..50 {
        match Server::start(postgres_config(other.path(), &uri)).await {
            Ok(s) => {
                next = Some(s);
                break;
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(100)).await,
        }
    }
    let next = next.unwrap_or_else(|| panic!("the store stayed taken after its server stopped"));
    let client = Client::with_uri_str(tcp_uri(next.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let coll = client
        .database("shop")
        .collection::<bson::Document>("items");
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(300));
    let dup = coll.insert_one(doc! {"_id": 1001, "sku": "s9"}).await;
    assert_eq!(dup.err().as_ref().and_then(error_code), Some(11000));
    coll.insert_one(doc! {"_id": 1001, "sku": "new"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    next.shutdown();
    drop(client);
    next.wait().await;
}

/// Creates a unique index on `field` of `coll`.
pub(crate) async fn create_unique(coll: &mongodb::Collection<bson::Document>, field: &str) {
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {field: 1})
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(true)
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
}

/// Ends every other backend of `cluster`, as a failover or an administrator's
/// `pg_terminate_backend` does, and waits a moment for the clients to see
/// their connections closed.
async fn end_every_backend(cluster: &TestCluster) {
    cluster.execute(
        "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
         WHERE pid <> pg_backend_pid() AND backend_type = 'client backend'",
    );
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
}

fn labels(e: &mongodb::error::Error) -> Vec<String> {
    e.labels().iter().cloned().collect()
}

/// The store's failures reach the client as mongod's retryable errors, with
/// the labels drivers retry on (a replica-set-mode server, where drivers
/// send retryable writes): a read-only PostgreSQL (a standby, or a primary
/// being demoted: 25006) fails writes as NotWritablePrimary with
/// `RetryableWriteError` (the driver retries once, then gives up with that
/// error), and `TransientTransactionError` inside a transaction; reads go
/// on. Backends ended under the server (pg_terminate_backend) cost a client
/// nothing: a write after them succeeds (retried by the driver when it met a
/// dead connection) and applies once. Its own cluster: it makes the whole
/// database read-only and ends every backend.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_failures_are_retryable_errors() {
    let Some(cluster) = TestCluster::start() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let mut cfg = postgres_config(dir.path(), &uri);
    cfg.repl_set_name = Some(crate::common::SET_NAME.into());
    cfg.oplog_size_mb = Some(16);
    let server = Server::start(cfg)
        .await
        .unwrap_or_else(|e| panic!("postgres server: {} ({:?})", e.message, e.code));
    crate::common::initiate(server.port()).await;
    let client = Client::with_uri_str(format!(
        "mongodb://127.0.0.1:{}/?directConnection=true&serverSelectionTimeoutMS=5000",
        server.port()
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let db = client.database("rw");
    let coll = db.collection::<bson::Document>("c");
    coll.insert_many((0..10).map(|i| doc! {"_id": i}))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // Every pooled connection ended: the next write still lands, once.
    end_every_backend(&cluster).await;
    coll.insert_one(doc! {"_id": 10})
        .await
        .unwrap_or_else(|e| panic!("a write after the backends ended: {e}"));
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(11));

    // PostgreSQL turns read-only (new sessions), and the old sessions end.
    cluster.execute("ALTER DATABASE postgres SET default_transaction_read_only = on");
    end_every_backend(&cluster).await;
    let mut session = client
        .start_session()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A retryable write by hand: the first attempt may meet a connection
    // the server has not yet seen closed (HostUnreachable); then the
    // store's answer, NotWritablePrimary. Both are labelled.
    // (Numbers above the driver's own: the session may be a pooled one its
    // earlier retryable writes numbered.)
    let mut codes = Vec::new();
    for n in 1..=5i64 {
        let e = db
            .run_command(
                doc! {"insert": "c", "documents": [{"_id": 100 + n}], "txnNumber": 1000 + n},
            )
            .session(&mut session)
            .await
            .expect_err("an insert into a read-only store");
        let code = error_code(&e);
        assert!(
            labels(&e).contains(&"RetryableWriteError".to_string()),
            "{e}"
        );
        codes.push(code);
        if code == Some(10107) {
            assert!(e.to_string().contains("read-only"), "{e}");
            break;
        }
        assert_eq!(code, Some(6), "{e}");
    }
    assert_eq!(codes.last(), Some(&Some(10107)), "{codes:?}");
    // The driver's own retryable write: retried once, then this error.
    let e = coll
        .insert_one(doc! {"_id": 200})
        .await
        .expect_err("an insert into a read-only store");
    assert_eq!(error_code(&e), Some(10107), "{e}");
    assert!(e.contains_label("RetryableWriteError"), "{e}");
    // Reads go on.
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(11));
    // In a transaction: the whole transaction may be retried (or, when the
    // failure waits for the commit, its outcome is unknown). A session of
    // its own: the one above holds numbers the driver does not know.
    let by_hand = session;
    let mut session = client
        .start_session()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    session
        .start_transaction()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let labelled = match coll
        .insert_one(doc! {"_id": 300})
        .session(&mut session)
        .await
    {
        Err(e) => {
            assert_eq!(error_code(&e), Some(10107), "{e}");
            e.contains_label("TransientTransactionError")
        }
        Ok(_) => {
            let e = session
                .commit_transaction()
                .await
                .expect_err("a commit into a read-only store");
            e.contains_label("UnknownTransactionCommitResult")
                || e.contains_label("TransientTransactionError")
        }
    };
    assert!(
        labelled,
        "a transaction's write to a read-only store is retryable"
    );
    let _ = session.abort_transaction().await;

    // Writable again: the same write goes through, once.
    cluster.execute(
        "BEGIN READ WRITE; ALTER DATABASE postgres RESET default_transaction_read_only; COMMIT",
    );
    end_every_backend(&cluster).await;
    coll.insert_one(doc! {"_id": 200})
        .await
        .unwrap_or_else(|e| panic!("a write once writable again: {e}"));
    assert_eq!(coll.count_documents(doc! {}).await.ok(), Some(12));
    // Kept out of the driver's pool until here, so no implicit session
    // reuses the numbers given by hand.
    drop(by_hand);
    server.shutdown();
    drop(client);
    server.wait().await;
}

/// Two servers racing the same insert batches (large enough that the engine
/// copies their new keys in, with a unique index whose keys the batch reads
/// at once): per document exactly one insert wins, whether the loser
/// collides on `_id` (server 1) or on the unique `sku` alone (server 2); the
/// losers get 11000 and nothing else; a batch that collides within itself
/// stops at the right document; the counts and indexes validate.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_insert_batches_let_one_insert_win_per_key() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut servers = Vec::new();
    let mut clients = Vec::new();
    for dir in &dirs {
        let (server, client) = start(dir.path(), &uri).await;
        servers.push(server);
        clients.push(client);
    }
    let coll = |c: &Client| c.database("race").collection::<bson::Document>("batches");
    create_unique(&coll(&clients[0]), "sku").await;
    const CHUNKS: i32 = 6;
    const PER: i32 = 150;
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        let c = coll(client);
        tasks.push(tokio::spawn(async move {
            let mut inserted = 0u64;
            for chunk in 0..CHUNKS {
                let docs: Vec<_> = (0..PER)
                    .map(|j| {
                        let k = chunk * PER + j;
                        // Servers 0 and 1 share `_id`s; server 2 only the skus.
                        let id = if s == 2 { 1_000_000 + k } else { k };
                        doc! {"_id": id, "sku": format!("s{k}"), "by": s as i32}
                    })
                    .collect();
                match c.insert_many(docs).ordered(false).await {
                    Ok(r) => inserted += r.inserted_ids.len() as u64,
                    Err(e) => match *e.kind {
                        mongodb::error::ErrorKind::InsertMany(ref failure) => {
                            let errors = failure.write_errors.as_deref().unwrap_or_default();
                            assert!(errors.iter().all(|w| w.code == 11000), "server {s}: {e}");
                            assert!(failure.write_concern_error.is_none(), "{e}");
                            // Unordered: every document but the failed ones.
                            inserted += (PER as usize - errors.len()) as u64;
                        }
                        _ => panic!("server {s}: {e}"),
                    },
                }
            }
            inserted
        }));
    }
    let mut total = 0;
    for t in tasks {
        total += t.await.unwrap_or_else(|e| panic!("{e}"));
    }
    let keys = (CHUNKS * PER) as u64;
    assert_eq!(total, keys, "each key inserted exactly once");
    for client in &clients {
        assert_eq!(coll(client).count_documents(doc! {}).await.ok(), Some(keys));
        assert_eq!(
            coll(client).estimated_document_count().await.ok(),
            Some(keys)
        );
    }
    // An ordered batch that collides within itself (unique `sku`) and with
    // the store (`_id`): it stops at the first, keeping what came before.
    let docs: Vec<_> = (0..100)
        .map(|j| doc! {"_id": 5_000_000 + j, "sku": format!("new{}", j.min(70))})
        .collect();
    let err = coll(&clients[1])
        .insert_many(docs)
        .await
        .err()
        .unwrap_or_else(|| panic!("a duplicate sku must fail the batch"));
    match *err.kind {
        mongodb::error::ErrorKind::InsertMany(ref failure) => {
            let errors = failure.write_errors.as_deref().unwrap_or_default();
            assert_eq!(errors.len(), 1, "{err}");
            assert_eq!((errors[0].index, errors[0].code), (71, 11000), "{err}");
        }
        _ => panic!("{err}"),
    }
    let valid = clients[2]
        .database("race")
        .run_command(doc! {"validate": "batches"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(valid.get_bool("valid").ok(), Some(true), "{valid}");
    assert_eq!(
        coll(&clients[0]).count_documents(doc! {}).await.ok(),
        Some(keys + 71)
    );
    drop(servers);
}

/// The server reaches its store over TLS (`storage.postgres.tls*`): with
/// `verify-full` it serves through the driver from a PostgreSQL that takes
/// TCP only over TLS; with a CA that did not sign the store's certificate, or
/// settings that contradict the URI, it does not start and says why.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_reaches_its_store_over_tls() {
    let Some(tls) = TlsCluster::start() else {
        return;
    };
    let uri = tls.uri("localhost", "postgres", "");
    let config = |dir: &std::path::Path, uri: &str, mode: &str, ca: &str| {
        let mut c = postgres_config(dir, uri);
        c.postgres.tls_mode = Some(mode.into());
        c.postgres.tls_ca_file = Some(tls.file(ca));
        c
    };
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let server = Server::start(config(dir.path(), &uri, "verify-full", "ca.pem"))
        .await
        .unwrap_or_else(|e| panic!("postgres server over TLS: {} ({:?})", e.message, e.code));
    let client = Client::with_uri_str(tcp_uri(server.port()))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let coll = client.database("db").collection::<bson::Document>("c");
    coll.insert_one(doc! {"_id": 1, "over": "tls"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let found = coll
        .find_one(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(found, Some(doc! {"_id": 1, "over": "tls"}));
    server.shutdown();
    drop(client);
    server.wait().await;

    let refused = |cfg: ServerConfig| async move {
        match Server::start(cfg).await {
            Ok(s) => {
                s.shutdown();
                s.wait().await;
                panic!("the server started")
            }
            Err(e) => e.message,
        }
    };
    let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let wrong_ca = refused(config(other.path(), &uri, "verify-full", "other-ca.pem")).await;
    assert!(wrong_ca.contains("UnknownIssuer"), "{wrong_ca}");
    let conflict = refused(config(
        other.path(),
        &format!("{uri}sslmode=disable"),
        "verify-full",
        "ca.pem",
    ))
    .await;
    assert!(
        conflict.contains("conflict: --postgresUri says sslmode=disable"),
        "{conflict}"
    );
}
