//! Server sessions: `startSession`, `refreshSessions`, `endSessions`, the
//! kill commands (which end a session's cursors and leave it usable), the
//! `localLogicalSessionTimeoutMinutes` parameter, and the session records the
//! cache keeps in `config.system.sessions` with its TTL index.

use crate::common;

use std::time::Duration;

use crate::common::{expect_code, num};
use bson::spec::BinarySubtype;
use bson::{doc, Binary, Bson, Document};
use mongodb::{ClientSession, Database};

/// A cursor of two batches over `sess.c` opened in `session`; returns its id.
async fn open_cursor(db: &Database, session: &mut ClientSession) -> i64 {
    let coll = db.collection::<Document>("c");
    coll.insert_many(vec![doc! {"_id": 1}, doc! {"_id": 2}, doc! {"_id": 3}])
        .await
        .ok();
    let reply = db
        .run_command(doc! {"find": "c", "batchSize": 1})
        .session(&mut *session)
        .await
        .unwrap();
    let id = reply
        .get_document("cursor")
        .and_then(|c| c.get_i64("id"))
        .unwrap();
    assert_ne!(id, 0);
    id
}

async fn get_more(
    db: &Database,
    session: &mut ClientSession,
    id: i64,
) -> mongodb::error::Result<Document> {
    db.run_command(doc! {"getMore": id, "collection": "c", "batchSize": 1})
        .session(session)
        .await
}

fn uuid_of(lsid: &Document) -> Vec<u8> {
    match lsid.get("id") {
        Some(Bson::Binary(b)) if b.subtype == BinarySubtype::Uuid => b.bytes.clone(),
        other => panic!("lsid id {other:?}"),
    }
}

async fn listed_ids(db: &Database) -> Vec<Vec<u8>> {
    let listed = common::collect(
        db.aggregate(vec![doc! {"$listLocalSessions": {}}])
            .await
            .unwrap(),
    )
    .await;
    listed
        .iter()
        .map(|d| uuid_of(d.get_document("_id").unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_session_returns_a_new_id_and_the_timeout() {
    let ts = common::start().await;
    let admin = ts.tcp.database("admin");
    let a = admin.run_command(doc! {"startSession": 1}).await.unwrap();
    let b = admin.run_command(doc! {"startSession": 1}).await.unwrap();
    let a_id = uuid_of(a.get_document("id").unwrap());
    assert_eq!(a_id.len(), 16);
    assert_ne!(a_id, uuid_of(b.get_document("id").unwrap()));
    assert_eq!(num(&a, "timeoutMinutes"), 30);
    // The new session is live at once.
    assert!(listed_ids(&ts.tcp.database("x")).await.contains(&a_id));
    expect_code(
        admin
            .run_command(doc! {"startSession": 1, "bogus": 1})
            .await,
        40415,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refresh_sessions_keeps_sessions_and_checks_its_input() {
    let ts = common::start().await;
    let admin = ts.tcp.database("admin");
    let id = vec![7u8; 16];
    let lsid = doc! {"id": Binary { subtype: BinarySubtype::Uuid, bytes: id.clone() }};
    admin
        .run_command(doc! {"refreshSessions": [lsid.clone()]})
        .await
        .unwrap();
    assert!(listed_ids(&admin).await.contains(&id));
    expect_code(admin.run_command(doc! {"refreshSessions": 1}).await, 14);
    expect_code(
        admin.run_command(doc! {"refreshSessions": [{}]}).await,
        40414,
    );
    expect_code(
        admin
            .run_command(doc! {"refreshSessions": [{"id": 1}]})
            .await,
        14,
    );
    // endSessions forgets it.
    admin
        .run_command(doc! {"endSessions": [lsid]})
        .await
        .unwrap();
    assert!(!listed_ids(&admin).await.contains(&id));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_sessions_ends_the_sessions_cursors_only() {
    let ts = common::start().await;
    let db = ts.tcp.database("sess");
    let mut mine = ts.tcp.start_session().await.unwrap();
    let mut other = ts.tcp.start_session().await.unwrap();
    let killed = open_cursor(&db, &mut mine).await;
    let kept = open_cursor(&db, &mut other).await;
    let lsid = mine.id().clone();
    db.run_command(doc! {"killSessions": [lsid.clone()]})
        .await
        .unwrap();
    expect_code(get_more(&db, &mut mine, killed).await, 43);
    get_more(&db, &mut other, kept).await.unwrap();
    // The killed session is still there and usable.
    assert!(listed_ids(&db).await.contains(&uuid_of(&lsid)));
    open_cursor(&db, &mut mine).await;
    expect_code(db.run_command(doc! {"killSessions": [5]}).await, 14);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill_all_sessions_by_user_and_by_pattern() {
    let ts = common::start().await;
    let db = ts.tcp.database("sess");
    let admin = ts.tcp.database("admin");
    let mut s = ts.tcp.start_session().await.unwrap();
    // Another user's sessions, and a role pattern, name none of ours.
    let c = open_cursor(&db, &mut s).await;
    admin
        .run_command(doc! {"killAllSessions": [{"user": "app", "db": "admin"}]})
        .await
        .unwrap();
    admin
        .run_command(doc! {"killAllSessionsByPattern": [{"roles": []}]})
        .await
        .unwrap();
    get_more(&db, &mut s, c).await.unwrap();
    // The empty list names every session.
    admin
        .run_command(doc! {"killAllSessions": []})
        .await
        .unwrap();
    expect_code(get_more(&db, &mut s, c).await, 43);
    // A pattern by lsid, and one by the owner of unauthenticated sessions.
    let c = open_cursor(&db, &mut s).await;
    let lsid = s.id().clone();
    admin
        .run_command(doc! {"killAllSessionsByPattern": [{"lsid": lsid}]})
        .await
        .unwrap();
    expect_code(get_more(&db, &mut s, c).await, 43);
    let listed = common::collect(
        db.aggregate(vec![doc! {"$listLocalSessions": {}}])
            .await
            .unwrap(),
    )
    .await;
    let uid = listed[0]
        .get_document("_id")
        .unwrap()
        .get("uid")
        .cloned()
        .unwrap();
    let c = open_cursor(&db, &mut s).await;
    admin
        .run_command(doc! {"killAllSessionsByPattern": [{"uid": uid}]})
        .await
        .unwrap();
    expect_code(get_more(&db, &mut s, c).await, 43);
    // Malformed patterns.
    expect_code(
        admin
            .run_command(doc! {"killAllSessions": [{"user": "app"}]})
            .await,
        40414,
    );
    expect_code(
        admin
            .run_command(doc! {"killAllSessionsByPattern": [{"what": 1}]})
            .await,
        40415,
    );
    expect_code(
        admin
            .run_command(doc! {"killAllSessionsByPattern": [{"uid": Binary { subtype: BinarySubtype::Generic, bytes: vec![1, 2] }}]})
            .await,
        2,
    );
}

/// The records of `config.system.sessions`, by session id.
async fn records(ts: &common::TestServer) -> Vec<(Vec<u8>, Document)> {
    let coll = ts
        .tcp
        .database("config")
        .collection::<Document>("system.sessions");
    common::collect(coll.find(doc! {}).await.unwrap())
        .await
        .into_iter()
        .map(|d| (uuid_of(d.get_document("_id").unwrap()), d))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cache_keeps_config_system_sessions() {
    let ts = common::start_with(|c| {
        c.apply_set_parameter_arg("enableTestCommands=1").unwrap();
        c.apply_set_parameter_arg("localLogicalSessionTimeoutMinutes=7")
            .unwrap();
    })
    .await;
    let admin = ts.tcp.database("admin");
    let started = admin.run_command(doc! {"startSession": 1}).await.unwrap();
    assert_eq!(num(&started, "timeoutMinutes"), 7);
    let lsid = started.get_document("id").unwrap().clone();
    admin
        .run_command(doc! {"refreshLogicalSessionCacheNow": 1})
        .await
        .unwrap();
    let recs = records(&ts).await;
    let rec = recs
        .iter()
        .find(|(id, _)| *id == uuid_of(&lsid))
        .map(|(_, d)| d)
        .unwrap_or_else(|| panic!("no record of {lsid:?} in {recs:?}"));
    assert!(rec.get_datetime("lastUse").is_ok());
    assert_eq!(
        rec.get_document("_id")
            .unwrap()
            .get_binary_generic("uid")
            .map(Vec::len)
            .ok(),
        Some(32)
    );
    let indexes = common::first_batch(
        &common::run(
            &ts.tcp.database("config"),
            doc! {"listIndexes": "system.sessions"},
        )
        .await,
    );
    let ttl = indexes
        .iter()
        .find(|ix| ix.get_str("name").ok() == Some("lsidTTLIndex"))
        .unwrap_or_else(|| panic!("{indexes:?}"));
    assert_eq!(ttl.get_document("key").unwrap(), &doc! {"lastUse": 1});
    assert_eq!(num(ttl, "expireAfterSeconds"), 7 * 60);
    // An ended session's record goes at the next refresh.
    admin
        .run_command(doc! {"endSessions": [lsid.clone()]})
        .await
        .unwrap();
    admin
        .run_command(doc! {"refreshLogicalSessionCacheNow": 1})
        .await
        .unwrap();
    assert!(!records(&ts)
        .await
        .iter()
        .any(|(id, _)| *id == uuid_of(&lsid)));
    // The parameter shows in getParameter and hello.
    let p = admin
        .run_command(doc! {"getParameter": 1, "localLogicalSessionTimeoutMinutes": 1})
        .await
        .unwrap();
    assert_eq!(num(&p, "localLogicalSessionTimeoutMinutes"), 7);
    let hello = admin.run_command(doc! {"hello": 1}).await.unwrap();
    assert_eq!(num(&hello, "logicalSessionTimeoutMinutes"), 7);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_periodic_refresh_writes_sessions() {
    let ts = common::start_with(|c| {
        c.apply_set_parameter_arg("logicalSessionRefreshMillis=100")
            .unwrap();
    })
    .await;
    let started = ts
        .tcp
        .database("admin")
        .run_command(doc! {"startSession": 1})
        .await
        .unwrap();
    let id = uuid_of(started.get_document("id").unwrap());
    let mut found = false;
    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        if records(&ts).await.iter().any(|(i, _)| *i == id) {
            found = true;
            break;
        }
    }
    assert!(found, "the refresh never wrote the session");
}

#[test]
fn session_parameters_are_checked_at_startup() {
    let mut c = bisondb_server::ServerConfig::default();
    assert!(c
        .apply_set_parameter_arg("localLogicalSessionTimeoutMinutes=0")
        .is_err());
    assert!(c
        .apply_set_parameter_arg("localLogicalSessionTimeoutMinutes=x")
        .is_err());
    assert!(c
        .apply_set_parameter_arg("logicalSessionRefreshMillis=0")
        .is_err());
    c.apply_set_parameter_arg("localLogicalSessionTimeoutMinutes=60")
        .unwrap();
    assert_eq!(c.local_logical_session_timeout_minutes, 60);
}
