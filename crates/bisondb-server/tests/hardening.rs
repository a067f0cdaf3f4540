//! Issue 20's bounded findings: arguments of the wrong type or range are
//! refused with mongod's errors rather than ignored, `$out`/`$merge` cannot
//! write into protected namespaces or onto views, namespaces are bounded to
//! 255 bytes, and connections that stall mid-message are closed.

use crate::common::*;
use bson::{doc, Bson, Document};
use mongodb::Database;

/// Runs `cmd` on `db` and returns the code and message of its error: the
/// command's, or its first write error's.
async fn fails(db: &Database, cmd: Document) -> (i32, String) {
    let name = cmd.keys().next().cloned().unwrap_or_default();
    match db.run_command(cmd).await {
        Ok(r) => match r.get_array("writeErrors").ok().and_then(|w| w.first()) {
            Some(Bson::Document(w)) => (
                w.get_i32("code").unwrap_or(-1),
                w.get_str("errmsg").unwrap_or_default().to_string(),
            ),
            _ => panic!("{name} should fail, answered {r}"),
        },
        Err(e) => (error_code(&e).unwrap_or(-1), error_message(&e)),
    }
}

/// Finding 6: `$out` and `$merge` into system collections, the internal
/// databases, and onto a view fail with mongod's codes and leave the target
/// as it was; the direct insert keeps its 73.
#[tokio::test]
async fn out_and_merge_refuse_protected_targets() {
    let ts = start().await;
    // Without retryable writes, which would create config.transactions on
    // a mongos (the postgres engine) before the check below.
    let client = ts.tcp_client_with("retryWrites=false").await;
    let db = client.database("h6");
    db.collection::<Document>("src")
        .insert_one(doc! {"_id": 1, "a": 1})
        .await
        .unwrap();
    let agg = |stage: Document| doc! {"aggregate": "src", "pipeline": [stage], "cursor": {}};
    for coll in [
        "system.users",
        "system.js",
        "system.views",
        "system.profile",
        "system.buckets.x",
    ] {
        let (code, msg) = fails(&db, agg(doc! {"$out": coll})).await;
        assert_eq!(code, 17385, "$out to {coll}: {msg}");
        assert_eq!(msg, format!("Can't $out to special collection: {coll}"));
        let (code, msg) = fails(&db, agg(doc! {"$merge": {"into": coll}})).await;
        assert_eq!(code, 31319, "$merge to {coll}: {msg}");
        assert_eq!(msg, format!("Cannot $merge to special collection: {coll}"));
    }
    for (target_db, coll) in [
        ("admin", "system.users"),
        ("local", "oplog.rs"),
        ("config", "system.sessions"),
        ("config", "transactions"),
        ("admin", "plain"),
    ] {
        let (code, msg) = fails(&db, agg(doc! {"$out": {"db": target_db, "coll": coll}})).await;
        let expected = if coll.starts_with("system.") {
            17385
        } else {
            31321
        };
        assert_eq!(code, expected, "$out to {target_db}.{coll}: {msg}");
        let (code, msg) = fails(
            &db,
            agg(doc! {"$merge": {"into": {"db": target_db, "coll": coll}}}),
        )
        .await;
        let expected = if coll.starts_with("system.") {
            31319
        } else {
            31320
        };
        assert_eq!(code, expected, "$merge to {target_db}.{coll}: {msg}");
    }
    // Nothing was created by the refused writes.
    for target_db in ["admin", "local", "config"] {
        let names = ts
            .tcp
            .database(target_db)
            .list_collection_names()
            .await
            .unwrap();
        assert!(
            !names
                .iter()
                .any(|n| n == "plain" || n == "oplog.rs" || n == "transactions"),
            "{target_db}: {names:?}"
        );
    }
    // A view stays a view.
    run(&db, doc! {"create": "v", "viewOn": "src", "pipeline": []}).await;
    let (code, _) = fails(&db, agg(doc! {"$out": "v"})).await;
    assert_eq!(code, 166);
    let (code, _) = fails(&db, agg(doc! {"$merge": {"into": "v"}})).await;
    assert_eq!(code, 166);
    let entry = collection_entry(&db, "v").await;
    assert_eq!(entry.get_str("type").unwrap(), "view", "{entry}");
    // The same names through insert: 73, unchanged.
    let (code, _) = fails(&db, doc! {"insert": "system.js", "documents": [{"_id": 1}]}).await;
    assert_eq!(code, 73);
    // Ordinary targets still work.
    run(&db, agg(doc! {"$out": "copy"})).await;
    run(&db, agg(doc! {"$merge": {"into": "merged"}})).await;
    assert_eq!(count(&db.collection("copy"), doc! {}).await, 1);
    assert_eq!(count(&db.collection("merged"), doc! {}).await, 1);
}

/// Finding 7 (names): a namespace longer than 255 bytes is refused with 73
/// wherever a collection would be made; 255 bytes exactly is accepted.
#[tokio::test]
async fn namespace_length_is_bounded() {
    let ts = start().await;
    let db = ts.tcp.database("h7");
    // "h7." is 3 bytes.
    let longest = "c".repeat(252);
    run(
        &db,
        doc! {"insert": longest.as_str(), "documents": [{"_id": 1}]},
    )
    .await;
    let long = "c".repeat(5000);
    for cmd in [
        doc! {"insert": long.as_str(), "documents": [{"_id": 1}]},
        doc! {"create": long.as_str()},
        doc! {"update": long.as_str(), "updates": [{"q": {}, "u": {"$set": {"a": 1}}, "upsert": true}]},
        doc! {"createIndexes": long.as_str(), "indexes": [{"key": {"a": 1}, "name": "a_1"}]},
        doc! {"aggregate": longest.as_str(), "pipeline": [{"$out": long.as_str()}], "cursor": {}},
    ] {
        let (code, msg) = fails(&db, cmd.clone()).await;
        let first = cmd.keys().next().cloned().unwrap_or_default();
        assert_eq!(code, 73, "{first}: {msg}");
    }
    let (code, msg) = fails(
        &db,
        doc! {"insert": "c".repeat(253), "documents": [{"_id": 1}]},
    )
    .await;
    assert_eq!(code, 73);
    assert_eq!(
        msg,
        format!(
            "Fully qualified namespace is too long. Namespace: h7.{} Max: 255",
            "c".repeat(253)
        )
    );
    let names = db.list_collection_names().await.unwrap();
    assert_eq!(names, vec![longest], "only the 255-byte namespace exists");
}

/// Finding 7 (arguments): generic and per-command fields of the wrong type
/// or range are refused with mongod's codes and messages instead of being
/// ignored; valid values still pass.
#[tokio::test]
async fn wrong_types_are_refused() {
    let ts = start().await;
    let db = ts.tcp.database("h7a");
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1})
        .await
        .unwrap();
    let cases: Vec<(Document, i32, &str)> = vec![
        (
            doc! {"find": "c", "maxTimeMS": "x"},
            2,
            "maxTimeMS must be a number",
        ),
        (
            doc! {"find": "c", "maxTimeMS": -5},
            2,
            "-5 value for maxTimeMS is out of range [0, 2147483647]",
        ),
        (
            doc! {"count": "c", "maxTimeMS": {}},
            2,
            "maxTimeMS must be a number",
        ),
        (
            doc! {"aggregate": "c", "pipeline": [], "cursor": {}, "maxTimeMS": 1.5},
            2,
            "maxTimeMS has non-integral value",
        ),
        (
            doc! {"find": "c", "readConcern": "x"},
            14,
            "BSON field 'find.readConcern' is the wrong type 'string', expected type 'object'",
        ),
        (
            doc! {"find": "c", "allowPartialResults": "x"},
            14,
            "BSON field 'find.allowPartialResults' is the wrong type 'string', expected types '[bool, long, int, decimal, double]'",
        ),
        (
            doc! {"ping": 1, "lsid": "x"},
            14,
            "BSON field 'ping.lsid' is the wrong type 'string', expected type 'object'",
        ),
        (
            doc! {"distinct": "c", "key": "a", "writeConcern": 1},
            14,
            "BSON field 'distinct.writeConcern' is the wrong type 'int', expected type 'object'",
        ),
        (
            doc! {"find": "c", "apiVersion": "2"},
            322,
            "API version must be \"1\"",
        ),
        (
            doc! {"insert": "c", "documents": [{"a": 1}], "let": 1},
            14,
            "BSON field 'insert.let' is the wrong type 'int', expected type 'object'",
        ),
        (
            doc! {"count": "c", "fields": 1},
            14,
            "BSON field 'count.fields' is the wrong type 'int', expected type 'object'",
        ),
    ];
    for (cmd, code, msg) in cases {
        let what = cmd.to_string();
        let e = expect_code(db.run_command(cmd).await, code);
        assert_eq!(error_message(&e), msg, "{what}");
    }
    // Nothing was inserted by the refused insert.
    assert_eq!(count(&db.collection("c"), doc! {}).await, 1);
    // Valid values, including the edges, still run.
    for cmd in [
        doc! {"find": "c", "maxTimeMS": 0},
        doc! {"find": "c", "maxTimeMS": 2147483647_i64},
        doc! {"find": "c", "maxTimeMS": 100.0},
        doc! {"find": "c", "readConcern": {"level": "local"}, "allowPartialResults": true},
        doc! {"ping": 1, "comment": {"any": ["thing"]}, "apiVersion": "1", "apiStrict": false},
    ] {
        run(&db, cmd).await;
    }
}

/// Finding 9: a connection holding half a message, or silent since it was
/// accepted, is closed after `incompleteMessageTimeoutMS`; one idle between
/// messages is kept; the others are unharmed.
#[tokio::test]
async fn stalled_connections_are_closed() {
    use tokio::io::AsyncWriteExt;
    let ts = start_with(|c| c.incomplete_message_timeout_ms = 300).await;
    let ping = doc! {"ping": 1, "$db": "admin"};
    // Half a header after a first command.
    let mut half_header = ts.raw_tcp().await;
    raw_command(&mut half_header, ping.clone()).await;
    half_header.write_all(&[64, 0, 0, 0, 1, 0]).await.unwrap();
    // A whole header and part of its body.
    let mut half_body = ts.raw_tcp().await;
    raw_command(&mut half_body, ping.clone()).await;
    let mut partial = header(100, 7, 2013);
    partial.extend_from_slice(&[0u8; 20]);
    half_body.write_all(&partial).await.unwrap();
    // Never a word.
    let mut silent = ts.raw_tcp().await;
    // Idle between messages, for several timeouts.
    let mut idle = ts.raw_tcp().await;
    raw_command(&mut idle, ping.clone()).await;
    let started = std::time::Instant::now();
    for (what, s) in [
        ("half a header", &mut half_header),
        ("half a body", &mut half_body),
        ("silent", &mut silent),
    ] {
        assert!(closed_by_server(s).await, "{what}: should be closed");
    }
    // Closed after one to two timeouts, far from the test's own limit.
    assert!(started.elapsed() < std::time::Duration::from_secs(5));
    tokio::time::sleep(std::time::Duration::from_millis(1000)).await;
    let r = raw_command(&mut idle, ping.clone()).await;
    assert!(is_num(r.get("ok").unwrap(), 1.0), "{r}");
    run(&ts.tcp.database("admin"), doc! {"ping": 1}).await;
}

/// Finding 9: a client that pipelines requests without reading the replies
/// is throttled: the server reads the next request only once it has written
/// the reply to the last, so the client's writes stop (TCP back-pressure)
/// long before the data could pile up in the server's memory.
#[tokio::test]
async fn pipelined_requests_are_throttled() {
    use tokio::io::AsyncWriteExt;
    let ts = start().await;
    let db = ts.tcp.database("h9");
    // Replies of about 1 MiB each fill the socket buffers in a few requests.
    let big = "x".repeat(1 << 20);
    db.collection::<Document>("c")
        .insert_one(doc! {"_id": 1, "big": big})
        .await
        .unwrap();
    let mut request = Vec::new();
    let find = bson::RawDocumentBuf::try_from(&doc! {"find": "c", "$db": "h9"}).unwrap();
    for i in 0..16_384 {
        request.extend_from_slice(&bisondb_wire::encode_op_msg(i, 0, 0, &find, None).unwrap());
    }
    let mut s = ts.raw_tcp().await;
    let limit = 256 << 20;
    let mut written = 0usize;
    let mut stalled = false;
    while written < limit {
        match tokio::time::timeout(std::time::Duration::from_secs(2), s.write_all(&request)).await {
            Ok(r) => {
                r.unwrap();
                written += request.len();
            }
            Err(_) => {
                stalled = true;
                break;
            }
        }
    }
    assert!(
        stalled,
        "the server took {written} bytes of requests without their replies being read"
    );
    // Everyone else is served meanwhile.
    run(&ts.tcp.database("admin"), doc! {"ping": 1}).await;
}

/// A small filesystem for the full-disk test: a tmpfs mounted for it when the
/// tests run as root (CI does), else the one `BISONDB_FULL_DISK_DIR` names;
/// `None`, with the reason, when there is neither.
enum SmallDisk {
    Mounted(tempfile::TempDir),
    Given(std::path::PathBuf),
}

impl SmallDisk {
    fn get() -> Result<SmallDisk, String> {
        if let Some(dir) = std::env::var_os("BISONDB_FULL_DISK_DIR") {
            return Ok(SmallDisk::Given(dir.into()));
        }
        let dir = tempfile::tempdir().map_err(|e| format!("tempdir: {e}"))?;
        let out = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=16m", "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "cannot mount a tmpfs (needs root; or set BISONDB_FULL_DISK_DIR to a small filesystem): {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(SmallDisk::Mounted(dir))
    }

    fn path(&self) -> &std::path::Path {
        match self {
            SmallDisk::Mounted(dir) => dir.path(),
            SmallDisk::Given(path) => path,
        }
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        if let SmallDisk::Mounted(dir) = self {
            let _ = std::process::Command::new("umount")
                .arg("-l")
                .arg(dir.path())
                .status();
        }
    }
}

/// Finding 10: on a full disk every write answers OutOfDiskSpace (14031),
/// the first time and every time after; reads go on; once space returns,
/// writes are accepted again by the running server (no restart), and
/// nothing acknowledged is lost. Runs on a 16 MiB tmpfs it mounts when the
/// tests run as root (CI), or on the small filesystem `BISONDB_FULL_DISK_DIR`
/// names; skips, saying why, when it has neither.
#[tokio::test]
async fn full_disk_answers_out_of_disk_space() {
    let disk = match SmallDisk::get() {
        Ok(disk) => disk,
        Err(why) => {
            eprintln!("skipping full_disk_answers_out_of_disk_space: {why}");
            return;
        }
    };
    let dir = tempfile::tempdir().unwrap();
    let dbpath = disk.path().join(format!("db-{}", std::process::id()));
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let coll = client.database("full").collection::<Document>("c");
    for i in 0..20 {
        coll.insert_one(doc! {"_id": format!("acked-{i}"), "v": i})
            .await
            .unwrap();
    }
    // Everything but a few hundred KiB goes to a filler file, which is
    // removed later to give the space back.
    let filler = disk.path().join(format!("filler-{}", std::process::id()));
    {
        use std::io::Write;
        let mut f = std::fs::File::create(&filler).unwrap();
        let chunk = vec![0xA5u8; 64 << 10];
        while f.write_all(&chunk).is_ok() {}
        let _ = f.sync_all();
        drop(f);
        let len = std::fs::metadata(&filler).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&filler)
            .unwrap()
            .set_len(len.saturating_sub(256 << 10))
            .unwrap();
    }
    // Incompressible, so the files grow as fast as the documents.
    let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
    let mut noise = || {
        (0..64 << 10)
            .map(|_| {
                seed ^= seed << 13;
                seed ^= seed >> 7;
                seed ^= seed << 17;
                char::from(b'!' + (seed % 90) as u8)
            })
            .collect::<String>()
    };
    let mut errors = Vec::new();
    for i in 0..400 {
        let r = coll.insert_one(doc! {"_id": i, "big": noise()}).await;
        if let Err(e) = r {
            errors.push((error_code(&e), error_message(&e)));
            if errors.len() == 5 {
                break;
            }
        }
    }
    eprintln!("errors on the full disk: {errors:#?}");
    assert_eq!(errors.len(), 5, "the disk never filled");
    for (code, msg) in &errors {
        assert_eq!(*code, Some(14031), "{msg}");
    }
    // Reads go on.
    let n = coll
        .count_documents(doc! {"_id": {"$regex": "^acked-"}})
        .await
        .unwrap();
    assert_eq!(n, 20, "acknowledged documents readable on the full disk");

    // Space returns: the running server accepts writes again by itself.
    std::fs::remove_file(&filler).unwrap();
    let freed = std::time::Instant::now();
    loop {
        match coll.insert_one(doc! {"_id": "after"}).await {
            Ok(_) => break,
            Err(e) => {
                assert_eq!(error_code(&e), Some(14031), "{}", error_message(&e));
                assert!(
                    freed.elapsed() < std::time::Duration::from_secs(30),
                    "writes did not resume within 30 s of space returning: {}",
                    error_message(&e)
                );
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        }
    }
    eprintln!("writes resumed {:?} after space returned", freed.elapsed());
    shutdown_by_command(server, client).await;

    // Nothing acknowledged was lost.
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let coll = client.database("full").collection::<Document>("c");
    for i in 0..20 {
        assert!(
            coll.find_one(doc! {"_id": format!("acked-{i}")})
                .await
                .unwrap()
                .is_some(),
            "acked-{i} lost"
        );
    }
    assert!(coll
        .find_one(doc! {"_id": "after"})
        .await
        .unwrap()
        .is_some());
    shutdown_by_command(server, client).await;
    let _ = std::fs::remove_dir_all(&dbpath);
}

/// Issue 21: a transaction's fields on a standalone server fail as on a
/// standalone mongod (its `retryable_writes_standalone_api.js`: an insert with
/// `txnNumber` is 20 IllegalOperation), so no statement of a transaction runs
/// outside one and nothing stays behind after `abortTransaction`.
#[tokio::test]
async fn transaction_fields_fail_on_a_standalone() {
    let ts = start_standalone().await;
    let db = ts.tcp.database("h_txn");
    let lsid = doc! {"id": bson::Uuid::new()};
    let txn_insert = doc! {
        "insert": "c", "documents": [{"_id": 1}], "lsid": lsid.clone(),
        "txnNumber": 1i64, "startTransaction": true, "autocommit": false,
    };
    let (code, msg) = fails(&db, txn_insert).await;
    assert_eq!(code, 20, "{msg}");
    // The retryable-writes specification has drivers replace exactly this
    // server message (code 20, "Transaction numbers...") with their own
    // advice, which the Rust driver does; pymongo's test reads the server's.
    assert!(
        msg.starts_with("This MongoDB deployment does not support retryable writes"),
        "{msg}"
    );
    let retryable =
        doc! {"insert": "c", "documents": [{"_id": 2}], "lsid": lsid.clone(), "txnNumber": 2i64};
    assert_eq!(fails(&db, retryable).await.0, 20);
    let (code, msg) = fails(&db, doc! {"find": "c", "autocommit": false}).await;
    assert_eq!(code, 72, "{msg}");
    assert!(
        msg.contains("'autocommit' field requires a transaction number"),
        "{msg}"
    );
    let (code, msg) = fails(&db, doc! {"find": "c", "startTransaction": true}).await;
    assert_eq!(code, 72, "{msg}");
    assert!(
        msg.contains("'startTransaction' field requires 'autocommit'"),
        "{msg}"
    );
    // Nothing was written by the refused statements.
    let n = db
        .collection::<Document>("c")
        .count_documents(doc! {})
        .await
        .unwrap();
    assert_eq!(n, 0);
}
