//! The server on `--storageEngine postgres` over a private PostgreSQL cluster
//! (skipped with a loud message when PostgreSQL's binaries are missing, failed
//! in CI): it serves through the driver, names its engine in `buildInfo` and
//! `serverStatus`, keeps unique indexes, hands the store to the next server
//! once stopped (a collection and index created by one are used by the next),
//! and refuses a second server on the same store while the first runs.

use bisondb_postgres::testing::TestCluster;
use bisondb_server::{PostgresConfig, RunningServer, Server, ServerConfig};
use bson::doc;
use mongodb::Client;

use crate::common::{error_code, tcp_uri};

fn postgres_config(dir: &std::path::Path, uri: &str) -> ServerConfig {
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

async fn start(dir: &std::path::Path, uri: &str) -> (RunningServer, Client) {
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
    coll.create_index(
        mongodb::IndexModel::builder()
            .keys(doc! {"sku": 1})
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(true)
                    .build(),
            )
            .build(),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
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

    // A second server on the same store is refused while this one runs.
    let other = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    match Server::start(postgres_config(other.path(), &uri)).await {
        Ok(_) => panic!("two servers took one store"),
        Err(e) => assert!(
            e.message.contains("another BisonDB server"),
            "{}",
            e.message
        ),
    }

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
