//! Issue 22, operating BisonDB: serverStatus's sections moving under load,
//! the Prometheus endpoint parsed and moving, sizes that agree with `du`
//! after a clean shutdown (which leaves no journal), and `planSummary` in
//! `currentOp`.

use std::collections::HashMap;
use std::path::Path;
use std::time::{Duration, Instant};

use bson::{doc, Bson, Document};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::*;

fn get<'a>(d: &'a Document, path: &str) -> &'a Bson {
    let mut cur = d;
    let mut parts = path.split('.').peekable();
    while let Some(p) = parts.next() {
        let v = cur
            .get(p)
            .unwrap_or_else(|| panic!("no {path} ({p} missing) in {cur}"));
        if parts.peek().is_none() {
            return v;
        }
        cur = v
            .as_document()
            .unwrap_or_else(|| panic!("{p} of {path} is not a document"));
    }
    unreachable!("an empty path")
}

fn n(d: &Document, path: &str) -> i64 {
    match get(d, path) {
        Bson::Int32(v) => i64::from(*v),
        Bson::Int64(v) => *v,
        Bson::Double(v) => *v as i64,
        other => panic!("{path} is {other:?}"),
    }
}

/// One number of a fresh serverStatus.
async fn status_n(admin: &mongodb::Database, path: &str) -> i64 {
    n(&run(admin, doc! {"serverStatus": 1}).await, path)
}

async fn fill(client: &mongodb::Client, db: &str, docs: usize) {
    let coll = client.database(db).collection::<Document>("c");
    let batch: Vec<Document> = (0..docs)
        .map(|i| doc! {"x": i as i64, "s": format!("value {i:08} of the load, with some text to store")})
        .collect();
    for chunk in batch.chunks(1000) {
        coll.insert_many(chunk.to_vec()).await.unwrap();
    }
}

/// The serverStatus sections mongod fills, moving as commands run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_status_sections_move_under_load() {
    let ts = start().await;
    let admin = ts.tcp.database("admin");
    let before = run(&admin, doc! {"serverStatus": 1}).await;
    fill(&ts.tcp, "obs_status", 300).await;
    let db = ts.tcp.database("obs_status");
    let found = run(
        &db,
        doc! {"find": "c", "filter": {"x": {"$gte": 100}}, "batchSize": 1000},
    )
    .await;
    assert_eq!(first_batch(&found).len(), 200);
    run(&db, doc! {"update": "c", "updates": [{"q": {"x": {"$lt": 10}}, "u": {"$set": {"y": 1}}, "multi": true}]}).await;
    run(
        &db,
        doc! {"delete": "c", "deletes": [{"q": {"x": {"$lt": 5}}, "limit": 0}]},
    )
    .await;
    // A failing command (a type error) and an unknown one.
    assert!(db
        .run_command(doc! {"insert": "c", "documents": 5})
        .await
        .is_err());
    assert!(db.run_command(doc! {"noSuchCommand": 1}).await.is_err());

    let s = run(
        &admin,
        doc! {"serverStatus": 1, "opLatencies": {"histograms": true}, "mem": 0},
    )
    .await;
    assert!(s.get("mem").is_none(), "mem: 0 leaves the section out");
    // opLatencies: reads, writes, commands, with histograms when asked.
    for class in ["reads", "writes", "commands"] {
        assert!(n(&s, &format!("opLatencies.{class}.ops")) >= 1, "{class}");
        assert!(n(&s, &format!("opLatencies.{class}.latency")) >= 0);
        let h = get(&s, &format!("opLatencies.{class}.histogram"))
            .as_array()
            .unwrap();
        let total: i64 = h
            .iter()
            .map(|b| b.as_document().unwrap().get_i64("count").unwrap())
            .sum();
        assert_eq!(
            total,
            n(&s, &format!("opLatencies.{class}.ops")),
            "{class}: {h:?}"
        );
        for b in h {
            let micros = b.as_document().unwrap().get_i64("micros").unwrap();
            assert!(micros == 0 || (micros as u64).is_power_of_two() || micros % 1024 == 0);
        }
    }
    // One insert of 300, the update, the delete, the failing insert.
    assert!(n(&s, "opLatencies.writes.ops") >= 4);
    let plain = run(&admin, doc! {"serverStatus": 1}).await;
    assert!(get(&plain, "opLatencies.reads")
        .as_document()
        .unwrap()
        .get("histogram")
        .is_none());
    // metrics.commands.<name>.{total,failed}
    assert!(n(&s, "metrics.commands.insert.total") >= 2);
    assert!(n(&s, "metrics.commands.insert.failed") >= 1);
    assert_eq!(n(&s, "metrics.commands.find.failed"), 0);
    // Every served command is listed, those never run at 0 (as mongod).
    assert_eq!(n(&s, "metrics.commands.validate.total"), 0);
    assert!(
        get(&s, "metrics.commands")
            .as_document()
            .unwrap()
            .get("isMaster")
            .is_none(),
        "aliases count as their command"
    );
    assert!(n(&s, "metrics.commands.find.total") >= 1);
    assert!(n(&s, "metrics.commands.<UNKNOWN>") >= 1);
    // metrics.document, metrics.queryExecutor, metrics.cursor
    assert!(n(&s, "metrics.document.inserted") >= 300);
    assert!(n(&s, "metrics.document.updated") >= 10);
    assert!(n(&s, "metrics.document.deleted") >= 5);
    assert!(n(&s, "metrics.document.returned") >= 200);
    assert!(n(&s, "metrics.queryExecutor.scannedObjects") >= 300);
    assert!(n(&s, "metrics.cursor.open.total") >= 0);
    assert!(n(&s, "metrics.cursor.timedOut") >= 0);
    // network, connections, asserts
    assert!(n(&s, "network.bytesIn") > n(&before, "network.bytesIn"));
    assert!(n(&s, "network.bytesOut") > n(&before, "network.bytesOut"));
    assert!(n(&s, "network.numRequests") > n(&before, "network.numRequests"));
    assert!(n(&s, "connections.current") >= 1);
    assert!(n(&s, "connections.active") >= 1, "this serverStatus runs");
    assert!(n(&s, "connections.totalCreated") >= n(&s, "connections.current"));
    assert!(n(&s, "asserts.user") >= 2);
    // $collStats's latencyStats: the collection's share of the same clocks.
    let cs = run(
        &db,
        doc! {"aggregate": "c", "pipeline": [{"$collStats": {"latencyStats": {}}}], "cursor": {}},
    )
    .await;
    let cs = first_batch(&cs).remove(0);
    assert!(n(&cs, "latencyStats.reads.ops") >= 1, "{cs}");
    assert!(n(&cs, "latencyStats.writes.ops") >= 4, "{cs}");
    assert!(n(&cs, "latencyStats.writes.latency") > 0, "{cs}");
    // metrics.getLastError: no write so far asked to wait for its concern.
    assert_eq!(n(&s, "metrics.getLastError.wtime.num"), 0);
    assert!(n(&s, "metrics.getLastError.wtime.totalMillis") >= 0);
    assert_eq!(n(&s, "metrics.getLastError.wtimeouts"), 0);
    for wc in [doc! {"w": 1, "j": true}, doc! {"w": "majority"}] {
        let before = status_n(&admin, "metrics.getLastError.wtime.num").await;
        run(
            &db,
            doc! {"insert": "c", "documents": [{"x": -1}], "writeConcern": wc.clone()},
        )
        .await;
        let after = status_n(&admin, "metrics.getLastError.wtime.num").await;
        assert_eq!(after, before + 1, "{wc}");
    }
    run(
        &db,
        doc! {"insert": "c", "documents": [{"x": -2}], "writeConcern": {"w": 1}},
    )
    .await;
    let after = run(&admin, doc! {"serverStatus": 1}).await;
    assert_eq!(
        n(&after, "metrics.getLastError.wtime.num"),
        2,
        "w: 1 waits for nothing"
    );
    // metrics.operation.scanAndOrder: a sort no index gives is done in
    // memory. The counter is the process's, shared with the tests running
    // beside this one, so an unchanged reading is looked for a few times.
    let sorted = |key: &str| {
        let mut sort = Document::new();
        sort.insert(key, 1);
        doc! {"find": "c", "filter": {"x": {"$lt": 3}}, "sort": sort}
    };
    let scan_and_order = "metrics.operation.scanAndOrder";
    let before = status_n(&admin, scan_and_order).await;
    run(&db, sorted("s")).await;
    assert!(
        status_n(&admin, scan_and_order).await > before,
        "an unindexed sort sorts in memory"
    );
    run(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
    )
    .await;
    let mut unchanged = false;
    for _ in 0..20 {
        let before = status_n(&admin, scan_and_order).await;
        run(&db, sorted("x")).await;
        if status_n(&admin, scan_and_order).await == before {
            unchanged = true;
            break;
        }
    }
    assert!(unchanged, "an indexed sort does not sort in memory");
    assert!(n(&after, "metrics.operation.writeConflicts") >= 0);
    // The engine's own figures.
    let b = get(&s, "bisondb").as_document().unwrap();
    assert_eq!(
        b.get_str("engine").unwrap(),
        get(&s, "storageEngine.name").as_str().unwrap()
    );
}

/// One `GET` of the metrics endpoint: status line and body.
async fn scrape(addr: std::net::SocketAddr, path: &str) -> (String, String) {
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = String::new();
    tokio::time::timeout(IO_TIMEOUT, s.read_to_string(&mut out))
        .await
        .unwrap()
        .unwrap();
    let (head, body) = out.split_once("\r\n\r\n").unwrap();
    let status = head.lines().next().unwrap().to_string();
    assert!(
        head.contains("Content-Type: text/plain; version=0.0.4"),
        "{head}"
    );
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("Content-Length: "))
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(length, body.len());
    (status, body.to_string())
}

/// Parses the text exposition format: every sample by `name{labels}`,
/// checking that each family is announced (HELP, TYPE) before its samples.
fn parse(body: &str) -> HashMap<String, f64> {
    let mut types: HashMap<String, String> = HashMap::new();
    let mut out = HashMap::new();
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').unwrap();
            assert!(["counter", "gauge", "histogram"].contains(&kind), "{line}");
            types.insert(name.to_string(), kind.to_string());
            continue;
        }
        if line.starts_with("# HELP ") || line.is_empty() {
            continue;
        }
        let (series, value) = line.rsplit_once(' ').unwrap();
        let name = series.split('{').next().unwrap();
        assert!(
            name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'),
            "bad name {name}"
        );
        let family = ["_bucket", "_sum", "_count"]
            .iter()
            .find_map(|s| {
                name.strip_suffix(s)
                    .filter(|f| types.get(*f).is_some_and(|k| k == "histogram"))
            })
            .unwrap_or(name);
        assert!(types.contains_key(family), "{name} sampled before its TYPE");
        if types[family] == "counter" {
            assert!(family.ends_with("_total"), "counter {family}");
        }
        let v: f64 = value.parse().unwrap_or_else(|_| panic!("value of {line}"));
        assert!(
            out.insert(series.to_string(), v).is_none(),
            "{series} twice"
        );
    }
    out
}

/// The metrics endpoint: off by default, parsed, and its counters moving
/// under load (commands, latency histograms, documents, network, the
/// engine's journal).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn metrics_endpoint_counters_move_under_load() {
    let off = start().await;
    assert!(
        off.server.state.metrics_addr.get().is_none(),
        "off by default"
    );
    drop(off);
    let ts = start_with(|c| {
        c.storage_engine = "lsm".into();
        c.metrics_addr = Some("127.0.0.1:0".into());
    })
    .await;
    let addr = *ts.server.state.metrics_addr.get().unwrap();
    let (status, body) = scrape(addr, "/metrics").await;
    assert_eq!(status, "HTTP/1.1 200 OK");
    let first = parse(&body);
    fill(&ts.tcp, "obs_prom", 2000).await;
    let db = ts.tcp.database("obs_prom");
    for i in 0..20 {
        run(&db, doc! {"find": "c", "filter": {"x": i}}).await;
    }
    run(
        &db,
        doc! {"find": "c", "filter": {"x": {"$lt": 3}}, "sort": {"s": -1}},
    )
    .await;
    run(
        &db,
        doc! {"insert": "c", "documents": [{"x": -1}], "writeConcern": {"j": true}},
    )
    .await;
    let (_, body) = scrape(addr, "/metrics").await;
    let second = parse(&body);
    let at = |m: &HashMap<String, f64>, k: &str| m.get(k).copied().unwrap_or(0.0);
    for key in [
        "bisondb_commands_total{command=\"insert\"}",
        "bisondb_commands_total{command=\"find\"}",
        "bisondb_opcounters_total{type=\"insert\"}",
        "bisondb_documents_total{op=\"inserted\"}",
        "bisondb_network_requests_total",
        "bisondb_network_bytes_in_total",
        "bisondb_engine_journal_commits_total",
        "bisondb_command_latency_seconds_count{command=\"find\",type=\"reads\"}",
        "bisondb_operation_scan_and_order_total",
        "bisondb_get_last_error_wtime_total",
    ] {
        assert!(at(&second, key) > at(&first, key), "{key} did not move");
    }
    assert_eq!(
        at(&second, "bisondb_documents_total{op=\"inserted\"}")
            - at(&first, "bisondb_documents_total{op=\"inserted\"}"),
        2001.0,
        "the load's 2000 and the one written with j: true"
    );
    assert!(at(&second, "bisondb_commands_total{command=\"find\"}") >= 20.0);
    for key in [
        "bisondb_get_last_error_wtime_milliseconds_total",
        "bisondb_operation_write_conflicts_total",
    ] {
        assert!(second.contains_key(key), "{key} is not exported");
    }
    // The find histogram: cumulative buckets, +Inf equal to the count.
    let count = at(
        &second,
        "bisondb_command_latency_seconds_count{command=\"find\",type=\"reads\"}",
    );
    let inf = at(
        &second,
        "bisondb_command_latency_seconds_bucket{command=\"find\",type=\"reads\",le=\"+Inf\"}",
    );
    assert_eq!(count, inf);
    let mut buckets: Vec<(f64, f64)> = second
        .iter()
        .filter_map(|(k, v)| {
            let le = k
                .strip_prefix(
                    "bisondb_command_latency_seconds_bucket{command=\"find\",type=\"reads\",le=\"",
                )?
                .strip_suffix("\"}")?;
            le.parse::<f64>().ok().map(|le| (le, *v))
        })
        .collect();
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    assert_eq!(buckets.len(), 51, "mongod's 50 finite bounds and +Inf");
    assert!(buckets.windows(2).all(|w| w[0].1 <= w[1].1), "cumulative");
    assert!(at(&second, "bisondb_connections{state=\"current\"}") >= 1.0);
    assert!(second.contains_key("bisondb_engine_memtables_bytes"));
    assert!(second.contains_key("bisondb_cursors_open{kind=\"total\"}"));
    // Every series the Grafana dashboard queries is exported.
    let dashboard = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/grafana-bisondb.json"),
    )
    .unwrap();
    let mut queried: Vec<&str> = dashboard
        .match_indices("bisondb_")
        .map(|(i, _)| {
            let rest = &dashboard[i..];
            let end = rest
                .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .unwrap_or(rest.len());
            &rest[..end]
        })
        .filter(|name| name.len() > "bisondb_".len() && *name != "bisondb_overview")
        .collect();
    queried.sort_unstable();
    queried.dedup();
    assert!(queried.len() > 20, "{queried:?}");
    for name in queried {
        assert!(
            second
                .keys()
                .any(|k| k == name || k.starts_with(&format!("{name}{{"))),
            "the dashboard queries {name}, which the endpoint does not export"
        );
    }
    let (status, _) = scrape(addr, "/other").await;
    assert_eq!(status, "HTTP/1.1 404 Not Found");
}

/// Bytes the files under `dir` occupy (what `du` counts).
fn du(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    let mut total = 0;
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        total += if m.is_dir() {
            du(&e.path())
        } else {
            m.blocks() * 512
        };
    }
    total
}

/// Journal files (`*.jnl`) under `dir` holding bytes.
fn journals(dir: &Path) -> Vec<(std::path::PathBuf, u64)> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap().flatten() {
        let m = e.metadata().unwrap();
        if m.is_dir() {
            out.extend(journals(&e.path()));
        } else if e.path().extension().is_some_and(|x| x == "jnl") && m.len() > 0 {
            out.push((e.path(), m.len()));
        }
    }
    out
}

/// Sizes reported right after a load (dbStats, collStats, listDatabases)
/// are within 10% of `du` of the dbpath after a clean shutdown, and that
/// shutdown leaves no journal behind.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sizes_after_a_load_agree_with_du_after_a_clean_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let dbpath = dir.path().join("db");
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    fill(&client, "obs_sizes", 60_000).await;
    let db = client.database("obs_sizes");
    run(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
    )
    .await;
    let stats = run(&db, doc! {"dbStats": 1}).await;
    let total = n(&stats, "totalSize");
    // One collection: collStats tells the same (the files may have moved
    // by a block meanwhile).
    let coll = run(&db, doc! {"collStats": "c"}).await;
    let coll_total = n(&coll, "storageSize") + n(&coll, "totalIndexSize");
    assert!(
        (coll_total - total).abs() * 100 <= total,
        "{coll_total} vs {total}"
    );
    let list = run(&client.database("admin"), doc! {"listDatabases": 1}).await;
    let listed: i64 = list
        .get_array("databases")
        .unwrap()
        .iter()
        .map(|d| n(d.as_document().unwrap(), "sizeOnDisk"))
        .sum();
    assert!(listed >= total);
    shutdown_by_command(server, client).await;
    // The engine closes (and empties its journal) when the last handle on the
    // server's state drops, which a task finishing its last command may do a
    // moment after `wait` returns: under load the check raced with it.
    let deadline = Instant::now() + Duration::from_secs(30);
    while !journals(&dbpath).is_empty() && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(
        journals(&dbpath),
        vec![],
        "a clean shutdown leaves no journal"
    );
    let disk = du(&dbpath) as f64;
    for (what, reported) in [
        ("dbStats totalSize", total as f64),
        ("listDatabases", listed as f64),
    ] {
        let ratio = reported / disk;
        println!("{what}: {reported} bytes reported after the load, du {disk} after shutdown: {ratio:.3}");
        assert!(
            (0.9..=1.1).contains(&ratio),
            "{what} {reported} vs du {disk} after shutdown: {ratio:.3}"
        );
    }
    // The data is all there after the restart.
    let (server, client) = restart_lsm(dir.path(), &dbpath).await;
    let count = run(&client.database("obs_sizes"), doc! {"count": "c"}).await;
    assert_eq!(n(&count, "n"), 60_000);
    shutdown_by_command(server, client).await;
}

/// `currentOp` shows the plan a running query chose, as mongod's
/// `planSummary`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn current_op_shows_the_plan_summary() {
    let ts = start().await;
    fill(&ts.tcp, "obs_plan", 50).await;
    let db = ts.tcp.database("obs_plan");
    run(
        &db,
        doc! {"createIndexes": "c", "indexes": [{"key": {"x": 1}, "name": "x_1"}]},
    )
    .await;
    let admin = ts.unix.database("admin");
    for (filter, plan) in [
        (doc! {"$where": "sleep(100); return true;"}, "COLLSCAN"),
        (
            doc! {"x": {"$gte": 0}, "$where": "sleep(100); return true;"},
            "IXSCAN { x: 1 }",
        ),
    ] {
        let runner = db.clone();
        let task = tokio::spawn(async move {
            runner
                .run_command(doc! {"find": "c", "filter": filter, "batchSize": 1000})
                .await
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let op = loop {
            let reply = run(&admin, doc! {"currentOp": 1, "ns": "obs_plan.c"}).await;
            let found = reply
                .get_array("inprog")
                .unwrap()
                .iter()
                .filter_map(|b| b.as_document().cloned())
                .find(|d| d.contains_key("planSummary"));
            if let Some(op) = found {
                break op;
            }
            assert!(
                Instant::now() < deadline,
                "no running find on obs_plan.c showed a plan"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        assert_eq!(op.get_str("planSummary").unwrap(), plan, "{op}");
        let opid = op.get("opid").cloned().unwrap();
        run(&admin, doc! {"killOp": 1, "op": opid}).await;
        let _ = task.await;
    }
}

/// Two transactions writing one document: the second's WriteConflict is
/// counted in `metrics.operation.writeConflicts` and on the endpoint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn write_conflicts_are_counted() {
    let ts = start_repl_set_with(|c| c.metrics_addr = Some("127.0.0.1:0".into())).await;
    let addr = *ts.server.state.metrics_addr.get().unwrap();
    let admin = ts.tcp.database("admin");
    let c = ts.tcp.database("obs_conflict").collection::<Document>("c");
    c.insert_one(doc! {"_id": 1, "x": 0}).await.unwrap();
    let conflicts = "metrics.operation.writeConflicts";
    let before = status_n(&admin, conflicts).await;
    let scraped_before =
        parse(&scrape(addr, "/metrics").await.1)["bisondb_operation_write_conflicts_total"];
    // Both open before either writes: the second writer of `_id` 1 loses.
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let mut s = ts.tcp.start_session().await.unwrap();
        s.start_transaction().await.unwrap();
        sessions.push(s);
    }
    let mut outcomes = Vec::new();
    for (x, s) in sessions.iter_mut().enumerate() {
        let set = doc! {"$set": {"x": x as i64 + 1}};
        outcomes.push(c.update_one(doc! {"_id": 1}, set).session(s).await);
    }
    assert!(outcomes[0].is_ok(), "{:?}", outcomes[0]);
    let lost = outcomes[1].as_ref().map(|_| ()).unwrap_err();
    assert_eq!(error_code(lost), Some(112), "{lost:?}");
    let _ = sessions[1].abort_transaction().await;
    sessions[0].commit_transaction().await.unwrap();
    assert!(status_n(&admin, conflicts).await > before);
    let scraped =
        parse(&scrape(addr, "/metrics").await.1)["bisondb_operation_write_conflicts_total"];
    assert!(scraped > scraped_before, "{scraped} after {scraped_before}");
}
