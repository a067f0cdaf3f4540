//! Three servers over one PostgreSQL store (`--storageEngine postgres`), as
//! several stateless servers behind a driver's seed list: each sees the
//! others' collections and indexes at its next command, two servers racing
//! the same `_id` or unique key let exactly one insert win (the other gets
//! 11000), and counts stay exact under concurrent writers on every server.
//! A capped collection written through one server works as on one server;
//! a collection created in a transaction appears on the others at commit.
//! Gated on a private PostgreSQL cluster like `postgres.rs`.

use bisondb_postgres::testing::TestCluster;
use bisondb_server::RunningServer;
use bson::{doc, Document};
use mongodb::{Client, Collection};

use crate::common::error_code;
use crate::postgres::{create_unique, start};

const SERVERS: usize = 3;

fn items(client: &Client) -> Collection<Document> {
    client.database("shop").collection("items")
}

async fn names(client: &Client) -> Vec<String> {
    client
        .database("shop")
        .list_collection_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The count every way a client reads it: by scanning, from the stats
/// records (`estimatedDocumentCount`, `collStats`), on every server.
async fn assert_counts(clients: &[Client], want: u64) {
    for (i, client) in clients.iter().enumerate() {
        let coll = items(client);
        assert_eq!(
            coll.count_documents(doc! {}).await.ok(),
            Some(want),
            "scan on server {i}"
        );
        assert_eq!(
            coll.estimated_document_count().await.ok(),
            Some(want),
            "estimatedDocumentCount on server {i}"
        );
        let stats = client
            .database("shop")
            .run_command(doc! {"collStats": "items"})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let count = stats
            .get("count")
            .and_then(bson::Bson::as_i64)
            .or_else(|| stats.get_i32("count").ok().map(i64::from));
        assert_eq!(count, Some(want as i64), "collStats on server {i}: {stats}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn servers_over_one_store_share_the_catalog_unique_keys_and_counts() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let dirs: Vec<_> = (0..SERVERS)
        .map(|_| tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let mut servers: Vec<RunningServer> = Vec::new();
    let mut clients: Vec<Client> = Vec::new();
    for dir in &dirs {
        let (server, client) = start(dir.path(), &uri).await;
        servers.push(server);
        clients.push(client);
    }

    // A collection and a unique index made on one server are seen, and the
    // index enforced, on the others at their next command.
    items(&clients[0])
        .insert_one(doc! {"_id": -1, "sku": "first"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for client in &clients {
        assert_eq!(names(client).await, vec!["items".to_string()]);
    }
    create_unique(&items(&clients[1]), "sku").await;
    let dup = items(&clients[2])
        .insert_one(doc! {"_id": -2, "sku": "first"})
        .await;
    assert_eq!(dup.err().as_ref().and_then(error_code), Some(11000));

    // Every server races to insert the same keys: per key exactly one wins,
    // whether the loser collides on `_id` or on the unique `sku`.
    const KEYS: i32 = 150;
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        let coll = items(client);
        tasks.push(tokio::spawn(async move {
            let mut won = Vec::new();
            for k in 0..KEYS {
                // Servers 0 and 1 race on `_id`, server 2 on `sku` alone.
                let id = if s == 2 { 100_000 + k } else { k };
                match coll
                    .insert_one(doc! {"_id": id, "sku": format!("k{k}"), "by": s as i32})
                    .await
                {
                    Ok(_) => won.push(k),
                    Err(e) => assert_eq!(error_code(&e), Some(11000), "server {s}, key {k}: {e}"),
                }
            }
            won
        }));
    }
    let mut winners = vec![0u32; KEYS as usize];
    for t in tasks {
        for k in t.await.unwrap_or_else(|e| panic!("{e}")) {
            winners[k as usize] += 1;
        }
    }
    assert!(
        winners.iter().all(|&n| n == 1),
        "each key won exactly once: {winners:?}"
    );
    assert_counts(&clients, 1 + KEYS as u64).await;

    // Distinct documents from every server at once: the counts add up.
    const EACH: i32 = 200;
    let mut tasks = Vec::new();
    for (s, client) in clients.iter().enumerate() {
        let coll = items(client);
        tasks.push(tokio::spawn(async move {
            for chunk in 0..(EACH / 20) {
                let docs: Vec<_> = (0..20)
                    .map(|j| {
                        let n = 1_000_000 * (s as i32 + 1) + chunk * 20 + j;
                        doc! {"_id": n, "sku": format!("d{n}")}
                    })
                    .collect();
                coll.insert_many(docs)
                    .await
                    .unwrap_or_else(|e| panic!("server {s}: {e}"));
            }
            // And each deletes a few of its own.
            coll.delete_many(doc! {"_id": {"$gte": 1_000_000 * (s as i32 + 1), "$lt": 1_000_000 * (s as i32 + 1) + 10}})
                .await
                .unwrap_or_else(|e| panic!("server {s}: {e}"))
        }));
    }
    for t in tasks {
        let deleted = t.await.unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(deleted.deleted_count, 10);
    }
    let total = 1 + KEYS as u64 + SERVERS as u64 * (EACH as u64 - 10);
    assert_counts(&clients, total).await;
    let valid = clients[1]
        .database("shop")
        .run_command(doc! {"validate": "items"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(valid.get_bool("valid").ok(), Some(true), "{valid}");

    // Dropped on one server: gone on the others, and a new one in its name
    // starts empty everywhere.
    items(&clients[2])
        .drop()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for client in &clients {
        assert!(names(client).await.is_empty());
    }
    items(&clients[0])
        .insert_one(doc! {"_id": 1, "sku": "first"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // The unique index went with the collection: the same `sku` is fine now.
    items(&clients[1])
        .insert_one(doc! {"_id": 2, "sku": "first"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_counts(&clients, 2).await;

    // A capped collection keeps its sequence in the server that writes it:
    // written through one server, it keeps insertion order, and the others
    // see it.
    let shop = clients[0].database("shop");
    shop.create_collection("ring")
        .capped(true)
        .size(4096)
        .max(3)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ring = shop.collection::<Document>("ring");
    for i in [5, 1, 4, 2] {
        ring.insert_one(doc! {"_id": i})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let mut cursor = clients[1]
        .database("shop")
        .collection::<Document>("ring")
        .find(doc! {})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut order = Vec::new();
    while cursor.advance().await.unwrap_or_else(|e| panic!("{e}")) {
        let d = cursor
            .deserialize_current()
            .unwrap_or_else(|e| panic!("{e}"));
        order.push(d.get_i32("_id").unwrap_or_else(|e| panic!("{e}")));
    }
    assert_eq!(order, vec![1, 4, 2]);

    // A collection created inside a transaction on one server is unseen by
    // the others until the commit, then seen at their next command; its
    // catalog change moved the version like any other, so a collection
    // created next on another server does not take its id.
    let mut session = clients[1]
        .start_session()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    session
        .start_transaction()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    clients[1]
        .database("shop")
        .collection::<Document>("orders")
        .insert_one(doc! {"_id": 1})
        .session(&mut session)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(!names(&clients[0]).await.contains(&"orders".to_string()));
    session
        .commit_transaction()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    clients[2]
        .database("shop")
        .collection::<Document>("later")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for client in &clients {
        let all = names(client).await;
        assert!(all.contains(&"orders".to_string()) && all.contains(&"later".to_string()));
        let orders = client.database("shop").collection::<Document>("orders");
        assert_eq!(orders.count_documents(doc! {}).await.ok(), Some(1));
        let later = client.database("shop").collection::<Document>("later");
        assert_eq!(later.count_documents(doc! {}).await.ok(), Some(1));
    }

    drop(clients);
    for server in servers {
        server.shutdown();
        server.wait().await;
    }
}

/// `validate` on `client`: valid, and every index holds one key per document.
async fn assert_indexes_complete(client: &Client, coll: &str, names: &[&str], server: usize) {
    let db = client.database("shop");
    let count = db
        .collection::<Document>(coll)
        .count_documents(doc! {})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let v = db
        .run_command(doc! {"validate": coll})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let keys = v
        .get_document("keysPerIndex")
        .unwrap_or_else(|e| panic!("{e}: {v}"));
    let brief = format!(
        "keysPerIndex {keys}, warnings {:?}, errors {:?}",
        v.get_array("warnings").ok(),
        v.get_array("errors").ok()
    );
    assert_eq!(
        v.get_bool("valid").ok(),
        Some(true),
        "server {server}: {brief}"
    );
    for name in names {
        let n = keys
            .get(*name)
            .and_then(|b| b.as_i64().or_else(|| b.as_i32().map(i64::from)));
        assert_eq!(
            n,
            Some(count as i64),
            "server {server}: keys of {name} against {count} documents: {brief}"
        );
    }
}

/// One server writes the collection without pause while another builds a
/// unique and a non-unique index on it: no write of the first server may be
/// missing from the indexes (each write either committed before the build
/// read the documents, or maintains the new index), and the unique index
/// holds for writes through the first server at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_index_built_on_one_server_holds_the_writes_of_another() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let dirs: Vec<_> = (0..2)
        .map(|_| tempfile::tempdir().unwrap_or_else(|e| panic!("{e}")))
        .collect();
    let (_a, writer) = start(dirs[0].path(), &uri).await;
    let (_b, builder) = start(dirs[1].path(), &uri).await;
    let writes = writer.database("shop").collection::<Document>("load");
    // Enough documents that a build takes a while.
    for chunk in 0..10 {
        let docs: Vec<_> = (0..500)
            .map(|j| {
                let n = chunk * 500 + j;
                doc! {"_id": n, "u": n, "k": n % 7}
            })
            .collect();
        writes
            .insert_many(docs)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let load = {
        let stop = stop.clone();
        let writes = writes.clone();
        tokio::spawn(async move {
            let mut n = 5_000;
            // Single inserts and small batches, as fast as they go, until
            // both builds are done and a few more writes went through.
            let mut after = 0;
            while after < 20 {
                if stop.load(std::sync::atomic::Ordering::Acquire) {
                    after += 1;
                }
                if n % 2 == 0 {
                    writes
                        .insert_one(doc! {"_id": n, "u": n, "k": n % 7})
                        .await
                        .unwrap_or_else(|e| panic!("insert {n}: {e}"));
                    n += 1;
                } else {
                    let docs: Vec<_> = (n..n + 3)
                        .map(|m| doc! {"_id": m, "u": m, "k": m % 7})
                        .collect();
                    writes
                        .insert_many(docs)
                        .await
                        .unwrap_or_else(|e| panic!("insert {n}..: {e}"));
                    n += 3;
                }
            }
            n
        })
    };
    let built = builder.database("shop").collection::<Document>("load");
    for (keys, unique) in [(doc! {"u": 1}, true), (doc! {"k": 1}, false)] {
        let model = mongodb::IndexModel::builder()
            .keys(keys)
            .options(
                mongodb::options::IndexOptions::builder()
                    .unique(unique)
                    .build(),
            )
            .build();
        built
            .create_index(model)
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    stop.store(true, std::sync::atomic::Ordering::Release);
    let next = load.await.unwrap_or_else(|e| panic!("{e}"));
    assert!(next > 5_000);

    for (i, client) in [&writer, &builder].into_iter().enumerate() {
        assert_indexes_complete(client, "load", &["_id_", "u_1", "k_1"], i).await;
    }
    // The unique index, built on the other server, refuses a duplicate
    // written through the writer (of a document written during the build
    // too).
    for u in [0, next - 1] {
        let dup = writes.insert_one(doc! {"_id": -1 - u, "u": u}).await;
        assert_eq!(
            dup.err().as_ref().and_then(error_code),
            Some(11000),
            "u {u}"
        );
    }
}
