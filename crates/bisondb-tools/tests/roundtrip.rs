//! Dump and restore through the real commands between BisonDB servers started
//! in this process: every BSON type comes back byte for byte, indexes
//! (unique, partial, TTL, text, 2dsphere, compound with a collation) and
//! collection options (capped, validator, collation, clustered) as
//! `listIndexes` and `listCollections` showed them, views as definitions and
//! a time-series collection's measurements; the files are in mongodump's
//! layout, plain and gzipped; `--db`/`--collection` filter and `--drop`
//! replaces.

use std::path::Path;

use bisondb_server::{RunningServer, Server, ServerConfig};
use bisondb_tools::{dump, restore, DumpOptions, RestoreOptions};
use bson::oid::ObjectId;
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, DateTime, Decimal128, Document, JavaScriptCodeWithScope};
use bson::{RawDocumentBuf, Regex, Timestamp};
use futures::TryStreamExt;
use mongodb::{Client, Database};

struct Srv {
    _server: RunningServer,
    _dir: tempfile::TempDir,
    uri: String,
    client: Client,
}

async fn start() -> Srv {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let cfg = ServerConfig {
        port: 0,
        bind_ip: vec!["127.0.0.1".into()],
        unix_socket: false,
        dbpath: dir.path().join("db"),
        storage_engine: "inMemory".into(),
        ..Default::default()
    };
    let server = match Server::start(cfg).await {
        Ok(s) => s,
        Err(e) => panic!("server failed to start: {}", e.message),
    };
    let uri = format!(
        "mongodb://127.0.0.1:{}/?serverSelectionTimeoutMS=5000",
        server.port()
    );
    let client = Client::with_uri_str(&uri)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    Srv {
        _server: server,
        _dir: dir,
        uri,
        client,
    }
}

async fn run(db: &Database, cmd: Document) -> Document {
    let text = cmd.to_string();
    db.run_command(cmd)
        .await
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

/// `{_id, p: DBPointer("rt.types", oid)}`, built by hand: the bson crate has
/// no public constructor for the deprecated type.
fn db_pointer_document() -> RawDocumentBuf {
    let mut body = Vec::new();
    body.push(0x02);
    body.extend_from_slice(b"_id\0");
    let id = b"dbpointer\0";
    body.extend_from_slice(&(id.len() as i32).to_le_bytes());
    body.extend_from_slice(id);
    body.push(0x0C);
    body.extend_from_slice(b"p\0");
    let ns = b"rt.types\0";
    body.extend_from_slice(&(ns.len() as i32).to_le_bytes());
    body.extend_from_slice(ns);
    body.extend_from_slice(
        &ObjectId::parse_str("5f0c6e1b9b1e8a3d4c2b1a09")
            .unwrap()
            .bytes(),
    );
    let mut bytes = ((body.len() + 5) as i32).to_le_bytes().to_vec();
    bytes.extend_from_slice(&body);
    bytes.push(0);
    RawDocumentBuf::from_bytes(bytes).unwrap_or_else(|e| panic!("{e}"))
}

fn every_type(i: i32) -> Document {
    let bin = |subtype, bytes: &[u8]| {
        Bson::Binary(Binary {
            subtype,
            bytes: bytes.to_vec(),
        })
    };
    doc! {
        "_id": i,
        "double": 1.5 + f64::from(i),
        "negzero": -0.0_f64,
        "nan": f64::NAN,
        "string": format!("héllo {i} \u{1F980}"),
        "doc": {"a": {"b": [1, {"c": null}]}, "": "empty key"},
        "array": [1, "two", 3.0, [4], {"five": 5}],
        "bin_generic": bin(BinarySubtype::Generic, b"\x00\x01\x02"),
        "bin_function": bin(BinarySubtype::Function, b"fn"),
        "bin_old": bin(BinarySubtype::BinaryOld, b"\x04\x00\x00\x00abcd"),
        "bin_uuid": bin(BinarySubtype::Uuid, &[7u8; 16]),
        "bin_md5": bin(BinarySubtype::Md5, &[9u8; 16]),
        "bin_user": bin(BinarySubtype::UserDefined(0x80), b"user"),
        "oid": ObjectId::parse_str("64b7f0c2a1b2c3d4e5f60718").unwrap(),
        "bool": i % 2 == 0,
        "date": DateTime::from_millis(1_700_000_000_000 + i64::from(i)),
        "old_date": DateTime::from_millis(-62_135_596_800_000),
        "null": null,
        "regex": Regex { pattern: "^a.*b$".try_into().unwrap(), options: "imsx".try_into().unwrap() },
        "code": Bson::JavaScriptCode("function() { return 1; }".into()),
        "symbol": Bson::Symbol("sym".into()),
        "code_scope": Bson::JavaScriptCodeWithScope(JavaScriptCodeWithScope {
            code: "function() { return x; }".into(),
            scope: doc! {"x": 1},
        }),
        "int32": i32::MIN + i,
        "timestamp": Timestamp { time: 1_700_000_000, increment: 7 },
        "int64": i64::MAX - i64::from(i),
        "decimal": Decimal128::from_bytes([
            0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x40, 0x30,
        ]),
        "minkey": Bson::MinKey,
        "maxkey": Bson::MaxKey,
        "undefined": Bson::Undefined,
    }
}

/// The source: one database with every kind of collection.
async fn fill(db: &Database) {
    let types = db.collection::<Document>("types");
    // Enough documents for several cursor batches and insert batches.
    let docs: Vec<Document> = (0..2500).map(every_type).collect();
    types
        .insert_many(docs)
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.collection::<RawDocumentBuf>("types")
        .insert_one(db_pointer_document())
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    // A document close to the 16 MiB limit, alone in its insert.
    types
        .insert_one(doc! {"_id": "big", "s": "x".repeat(15 * 1024 * 1024)})
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    run(
        db,
        doc! {"createIndexes": "ix", "indexes": [
            {"key": {"a": 1}, "name": "a_unique", "unique": true},
            {"key": {"b": 1}, "name": "b_partial", "partialFilterExpression": {"b": {"$gt": 5}}},
            {"key": {"d": 1}, "name": "d_ttl", "expireAfterSeconds": 3600},
            {"key": {"t": "text", "u": "text"}, "name": "t_text", "weights": {"t": 3}, "default_language": "french"},
            {"key": {"loc": "2dsphere"}, "name": "loc_2dsphere"},
            {"key": {"a": 1, "c": -1}, "name": "a_c_fr", "collation": {"locale": "fr", "strength": 2}},
        ]},
    )
    .await;
    let ix = db.collection::<Document>("ix");
    for i in 0..20 {
        ix.insert_one(doc! {
            "a": i, "b": i, "c": format!("c{i}"), "d": DateTime::now(),
            "t": "le chat", "u": "noir",
            "loc": {"type": "Point", "coordinates": [f64::from(i), 1.0]},
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    }

    run(
        db,
        doc! {"create": "cap", "capped": true, "size": 65536, "max": 100},
    )
    .await;
    let cap = db.collection::<Document>("cap");
    for i in 0..150 {
        cap.insert_one(doc! {"_id": i, "n": i})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
    }
    run(
        db,
        doc! {"create": "val",
        "validator": {"$jsonSchema": {"bsonType": "object", "required": ["name"],
            "properties": {"name": {"bsonType": "string"}}}},
        "validationLevel": "moderate", "validationAction": "error"},
    )
    .await;
    db.collection::<Document>("val")
        .insert_one(doc! {"_id": 1, "name": "ok"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    run(
        db,
        doc! {"create": "fr", "collation": {"locale": "fr", "strength": 1}},
    )
    .await;
    db.collection::<Document>("fr")
        .insert_one(doc! {"_id": 1, "w": "côte"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    run(
        db,
        doc! {"create": "clu", "clusteredIndex": {"key": {"_id": 1}, "unique": true, "name": "clu_key"},
            "expireAfterSeconds": 86400},
    )
    .await;
    db.collection::<Document>("clu")
        .insert_one(doc! {"_id": DateTime::now(), "v": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    run(
        db,
        doc! {"create": "v", "viewOn": "types",
        "pipeline": [{"$match": {"bool": true}}, {"$project": {"string": 1, "int64": 1}}],
        "collation": {"locale": "de"}},
    )
    .await;
    run(
        db,
        doc! {"create": "vv", "viewOn": "v", "pipeline": [{"$limit": 5}], "collation": {"locale": "de"}},
    )
    .await;
    run(
        db,
        doc! {"create": "ts",
        "timeseries": {"timeField": "t", "metaField": "m", "granularity": "minutes"},
        "expireAfterSeconds": 31_536_000},
    )
    .await;
    let now = DateTime::now().timestamp_millis();
    let ts = db.collection::<Document>("ts");
    let rows: Vec<Document> = (0..300)
        .map(|i| {
            doc! {"t": DateTime::from_millis(now - 3_600_000 + i64::from(i) * 1000),
            "m": {"sensor": i % 3}, "_id": i, "temp": f64::from(i) / 10.0}
        })
        .collect();
    ts.insert_many(rows).await.unwrap_or_else(|e| panic!("{e}"));
    run(
        db,
        doc! {"createIndexes": "ts", "indexes": [{"key": {"m.sensor": 1, "t": -1}, "name": "sensor_t"}]},
    )
    .await;
}

/// Every document of `coll` in natural order, as bytes.
async fn raw_documents(db: &Database, coll: &str, sort: Option<Document>) -> Vec<Vec<u8>> {
    let mut cursor = db
        .collection::<RawDocumentBuf>(coll)
        .find(doc! {})
        .sort(sort.unwrap_or_default())
        .await
        .unwrap_or_else(|e| panic!("{coll}: {e}"));
    let mut out = Vec::new();
    while cursor.advance().await.unwrap_or_else(|e| panic!("{e}")) {
        out.push(cursor.current().as_bytes().to_vec());
    }
    out
}

/// `listCollections` less what differs between servers (UUIDs).
async fn collections(db: &Database) -> Vec<Document> {
    let mut infos: Vec<Document> = db
        .run_cursor_command(doc! {"listCollections": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    for i in &mut infos {
        if let Ok(info) = i.get_document_mut("info") {
            info.remove("uuid");
        }
    }
    infos.sort_by(|a, b| a.get_str("name").ok().cmp(&b.get_str("name").ok()));
    infos
}

async fn indexes(db: &Database, coll: &str) -> Vec<Document> {
    let mut specs: Vec<Document> = db
        .run_cursor_command(doc! {"listIndexes": coll})
        .await
        .unwrap_or_else(|e| panic!("{coll}: {e}"))
        .try_collect()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    specs.sort_by(|a, b| a.get_str("name").ok().cmp(&b.get_str("name").ok()));
    specs
}

/// The restored database is the source's: same collections and options, same
/// indexes, same documents byte for byte.
async fn assert_same(src: &Database, dst: &Database) {
    let a = collections(src).await;
    let b = collections(dst).await;
    assert_eq!(a, b, "listCollections");
    for info in &a {
        let name = info.get_str("name").unwrap_or_default();
        let kind = info.get_str("type").unwrap_or_default();
        if name.starts_with("system.") {
            continue;
        }
        match kind {
            "view" => {}
            _ => assert_eq!(indexes(src, name).await, indexes(dst, name).await, "{name}"),
        }
        let sort = match kind {
            // Measurements come back re-bucketed: compare them in one order.
            "timeseries" => Some(doc! {"t": 1, "_id": 1}),
            _ => None,
        };
        let x = raw_documents(src, name, sort.clone()).await;
        let y = raw_documents(dst, name, sort).await;
        assert!(!x.is_empty() || name == "vv", "{name} has documents");
        assert_eq!(x.len(), y.len(), "{name}: document count");
        for (i, (p, q)) in x.iter().zip(&y).enumerate() {
            assert!(p == q, "{name}: document {i} differs");
        }
    }
}

fn files(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| {
            e.unwrap_or_else(|e| panic!("{e}"))
                .file_name()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    v.sort();
    v
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dump_restores_exactly() {
    let src = start().await;
    let sdb = src.client.database("rt");
    fill(&sdb).await;
    let out = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let plain = out.path().join("plain");
    let gz = out.path().join("gz");
    let opts = |out: &Path, gzip: bool| DumpOptions {
        uri: src.uri.clone(),
        out: out.to_path_buf(),
        db: None,
        collection: None,
        gzip,
        views_as_collections: false,
    };
    let s = dump(opts(&plain, false))
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(s.views, 2, "{s:?}");
    // types (2502), ix (20), cap (100), val, fr, clu (1 each), ts's buckets.
    assert!(s.documents > 2502 + 20 + 100 + 3, "{s:?}");
    dump(opts(&gz, true))
        .await
        .unwrap_or_else(|e| panic!("{e}"));

    // mongodump's layout: views and time-series as mongodump writes them.
    let names = files(&plain.join("rt"));
    for f in [
        "types.bson",
        "types.metadata.json",
        "v.metadata.json",
        "vv.metadata.json",
        "system.buckets.ts.bson",
        "ts.metadata.json",
        "clu.bson",
    ] {
        assert!(names.contains(&f.to_string()), "{f} in {names:?}");
    }
    assert!(
        !names.iter().any(|n| n == "v.bson" || n == "ts.bson"),
        "{names:?}"
    );
    let gz_names = files(&gz.join("rt"));
    assert!(
        gz_names.contains(&"types.bson.gz".to_string()),
        "{gz_names:?}"
    );
    assert!(
        gz_names.contains(&"ts.metadata.json.gz".to_string()),
        "{gz_names:?}"
    );
    let ts_meta = std::fs::read_to_string(plain.join("rt/ts.metadata.json"))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        ts_meta.contains(r#""collectionName":"ts","type":"timeseries"}"#),
        "{ts_meta}"
    );
    assert!(
        ts_meta.starts_with(r#"{"options":{"timeseries":{"timeField":"t""#),
        "{ts_meta}"
    );
    let v_meta =
        std::fs::read_to_string(plain.join("rt/v.metadata.json")).unwrap_or_else(|e| panic!("{e}"));
    assert!(
        v_meta.contains(r#""viewOn":"types""#) && v_meta.contains(r#""type":"view""#),
        "{v_meta}"
    );
    assert!(v_meta.contains(r#""indexes":[]"#), "{v_meta}");

    for dir in [&plain, &gz] {
        let dst = start().await;
        let r = restore(RestoreOptions::new(dst.uri.clone(), dir.clone()))
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((r.views, r.failed), (2, 0), "{r:?}");
        assert_same(&sdb, &dst.client.database("rt")).await;

        // Again without --drop: every document is a duplicate, counted and skipped.
        let again = restore(RestoreOptions {
            db: Some("rt".into()),
            collection: Some("types".into()),
            ..RestoreOptions::new(dst.uri.clone(), dir.clone())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((again.documents, again.failed), (0, 2502), "{again:?}");
        // With --drop: replaced, the same again.
        restore(RestoreOptions {
            drop: true,
            ..RestoreOptions::new(dst.uri.clone(), dir.clone())
        })
        .await
        .unwrap_or_else(|e| panic!("{e}"));
        assert_same(&sdb, &dst.client.database("rt")).await;
    }

    // --db with the folder of that database restores it under the new name.
    let dst = start().await;
    let r = restore(RestoreOptions {
        db: Some("copy".into()),
        ..RestoreOptions::new(dst.uri.clone(), plain.join("rt"))
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.views, 2, "{r:?}");
    assert_same(&sdb, &dst.client.database("copy")).await;

    // --db and --collection dump one collection.
    let one = out.path().join("one");
    dump(DumpOptions {
        db: Some("rt".into()),
        collection: Some("cap".into()),
        ..opts(&one, false)
    })
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(files(&one), vec!["rt".to_string()]);
    assert_eq!(
        files(&one.join("rt")),
        vec!["cap.bson".to_string(), "cap.metadata.json".to_string()]
    );
}
