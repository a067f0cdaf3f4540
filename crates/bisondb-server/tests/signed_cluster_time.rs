//! Signed `$clusterTime` in replica-set mode with `--auth` and a `--keyFile`,
//! through the Rust driver: the keys mongod keeps in `admin.system.keys`,
//! signed replies, a client gossiping another client's time, tampered times
//! refused (204 TimeProofMismatch, 211 KeyNotFound), the dummy signature for
//! a user with `advanceClusterTime` and without access control.

use bson::spec::BinarySubtype;
use bson::{doc, Binary, Document, Timestamp};
use mongodb::{Client, ClusterTime};

use crate::common::{self, error_code, error_message};

/// A one-member set with `--auth` and a key file (initiated through the
/// localhost exception, as mongod's tutorial does), a `root` user and a
/// client logged in as it.
async fn signed_set() -> (common::TestServer, Client, tempfile::TempDir) {
    use std::os::unix::fs::PermissionsExt;
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("key");
    std::fs::write(&key, "c2lnbmVkIGNsdXN0ZXIgdGltZSBrZXk=\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let ts = common::start_repl_set_with(move |c| {
        c.auth = true;
        c.key_file = Some(key);
    })
    .await;
    common::direct_client(ts.server.port())
        .await
        .database("admin")
        .run_command(doc! {"createUser": "root", "pwd": "rootpw", "roles": ["root"]})
        .await
        .unwrap_or_else(|e| panic!("createUser through the localhost exception: {e}"));
    let root = login(ts.server.port(), "root", "rootpw").await;
    (ts, root, keys)
}

async fn login(port: u16, user: &str, pwd: &str) -> Client {
    Client::with_uri_str(format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{port}/?authSource=admin&retryWrites=false&serverSelectionTimeoutMS=5000"
    ))
    .await
    .unwrap_or_else(|e| panic!("{e}"))
}

fn signature(reply: &Document) -> (Vec<u8>, i64) {
    let sig = reply
        .get_document("$clusterTime")
        .and_then(|c| c.get_document("signature"))
        .unwrap_or_else(|e| panic!("{e}: {reply}"));
    let hash = sig.get_binary_generic("hash").unwrap().clone();
    (hash, sig.get_i64("keyId").unwrap())
}

/// The cluster time a `ping` by `client` answers with.
async fn pinged_time(client: &Client) -> (Timestamp, Document) {
    let reply = client
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    (time_of(&reply), reply)
}

fn time_of(reply: &Document) -> Timestamp {
    reply
        .get_document("$clusterTime")
        .and_then(|c| c.get_timestamp("clusterTime"))
        .unwrap_or_else(|e| panic!("{e}: {reply}"))
}

fn cluster_time(time: Timestamp, hash: Vec<u8>, key_id: i64) -> ClusterTime {
    bson::deserialize_from_document(doc! {
        "clusterTime": time,
        "signature": {
            "hash": Binary { subtype: BinarySubtype::Generic, bytes: hash },
            "keyId": key_id,
        },
    })
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_are_signed_with_the_keys_of_admin_system_keys() {
    let (_ts, root, _keys) = signed_set().await;
    let admin = root.database("admin");
    let reply = admin.run_command(doc! {"ping": 1}).await.unwrap();
    let (hash, key_id) = signature(&reply);
    assert_eq!(hash.len(), 20);
    assert_ne!(hash, vec![0u8; 20], "a real HMAC: {reply}");
    assert_ne!(key_id, 0, "{reply}");

    // mongod's document shape: two keys at a time, 90 days each.
    let keys: Vec<Document> = common::collect(
        admin
            .collection::<Document>("system.keys")
            .find(doc! {})
            .sort(doc! {"expiresAt": 1})
            .await
            .unwrap(),
    )
    .await;
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert_eq!(keys[0].get_i64("_id").unwrap(), key_id, "{keys:?}");
    assert_eq!(keys[1].get_i64("_id").unwrap(), key_id + 1, "{keys:?}");
    let now = u32::try_from(bson::DateTime::now().timestamp_millis() / 1000).unwrap();
    let day = 24 * 3600;
    for (i, k) in keys.iter().enumerate() {
        assert_eq!(k.get_str("purpose").unwrap(), "HMAC", "{k}");
        assert_eq!(k.get_binary_generic("key").unwrap().len(), 20, "{k}");
        let expires = k.get_timestamp("expiresAt").unwrap().time;
        let want = now + (i as u32 + 1) * 90 * day;
        assert!(
            expires.abs_diff(want) < 300,
            "{k}: expires {expires}, want about {want}"
        );
    }

    // Every reply is signed, and a later one by the same key.
    let coll = root.database("app").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    let reply = root
        .database("app")
        .run_command(doc! {"find": "c"})
        .await
        .unwrap();
    assert_eq!(signature(&reply).1, key_id, "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gossiping_signed_time_works_and_a_tampered_one_is_refused() {
    let (ts, root, _keys) = signed_set().await;
    let other = login(ts.server.port(), "root", "rootpw").await;
    let coll = root.database("app").collection::<Document>("c");

    // Client A writes; client B's causally consistent session takes A's
    // cluster time (signed by the server, ahead of anything B has seen) and
    // reads after it: the server checks the signature and serves it.
    let mut a = root.start_session().await.unwrap();
    coll.insert_one(doc! {"_id": 1, "v": "a"})
        .session(&mut a)
        .await
        .unwrap();
    let signed = a.cluster_time().cloned().expect("a signed cluster time");
    let mut b = other
        .start_session()
        .causal_consistency(true)
        .await
        .unwrap();
    b.advance_cluster_time(&signed);
    for _ in 0..3 {
        let got = other
            .database("app")
            .collection::<Document>("c")
            .find_one(doc! {"_id": 1})
            .session(&mut b)
            .await
            .unwrap_or_else(|e| panic!("gossiped signed time refused: {e}"));
        assert_eq!(
            got.and_then(|d| d.get_str("v").ok().map(str::to_string))
                .as_deref(),
            Some("a")
        );
    }

    // A time ahead of every signed one, with a made-up hash under the real
    // key: 204 TimeProofMismatch.
    let reply = root
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    let (_, key_id) = signature(&reply);
    let now = time_of(&reply);
    let ahead = Timestamp {
        time: now.time + 3600,
        increment: 1,
    };
    // A made-up hash under the real key (204), a key id the server never
    // made (211), and the dummy signature, which is no signature to a user
    // (211 for key id 0).
    for (hash, id, code, says) in [
        (
            vec![7u8; 20],
            key_id,
            204,
            "Proof does not match the cluster time",
        ),
        (
            vec![7u8; 20],
            12345,
            211,
            "No keys found for HMAC that is valid for time",
        ),
        (vec![0u8; 20], 0, 211, "with id: 0"),
    ] {
        let mut session = root.start_session().await.unwrap();
        session.advance_cluster_time(&cluster_time(ahead, hash, id));
        let e = coll
            .find_one(doc! {})
            .session(&mut session)
            .await
            .expect_err("a tampered cluster time");
        assert_eq!(error_code(&e), Some(code), "{e}");
        assert!(error_message(&e).contains(says), "{e}");
    }

    // None of them moved the clock.
    let (t, reply) = pinged_time(&root).await;
    assert!(t.time < ahead.time, "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn before_authentication_an_unsigned_time_is_ignored_and_a_forged_one_refused() {
    let (ts, _root, _keys) = signed_set().await;
    let mut raw = ts.raw_tcp().await;
    let ahead = Timestamp {
        time: u32::try_from(bson::DateTime::now().timestamp_millis() / 1000).unwrap() + 3600,
        increment: 1,
    };
    let hello = |sig: Document| {
        doc! {"hello": 1, "$db": "admin", "$clusterTime": {"clusterTime": ahead, "signature": sig}}
    };
    let zero = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![0u8; 20],
    };
    let forged = Binary {
        subtype: BinarySubtype::Generic,
        bytes: vec![1u8; 20],
    };
    let r = common::raw_command(&mut raw, hello(doc! {"hash": zero, "keyId": 0i64})).await;
    assert_eq!(r.get_f64("ok").ok(), Some(1.0), "{r}");
    let t = time_of(&r);
    assert!(t.time < ahead.time, "ignored, not gossiped: {r}");
    let r = common::raw_command(&mut raw, hello(doc! {"hash": forged, "keyId": 1i64})).await;
    assert_eq!(r.get_i32("code").ok(), Some(211), "{r}");
    assert_eq!(r.get_str("codeName").ok(), Some("KeyNotFound"), "{r}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn advance_cluster_time_skips_the_check_and_gets_the_dummy_signature() {
    let (ts, root, _keys) = signed_set().await;
    let admin = root.database("admin");
    admin
        .run_command(doc! {
            "createRole": "clock",
            "privileges": [{"resource": {"cluster": true}, "actions": ["advanceClusterTime"]}],
            "roles": [{"role": "readWrite", "db": "app"}],
        })
        .await
        .unwrap();
    admin
        .run_command(doc! {"createUser": "ticker", "pwd": "tp", "roles": ["clock"]})
        .await
        .unwrap();
    let ticker = login(ts.server.port(), "ticker", "tp").await;
    let reply = ticker
        .database("app")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert_eq!(signature(&reply), (vec![0u8; 20], 0), "{reply}");
    let now = time_of(&reply);
    let ahead = Timestamp {
        time: now.time + 60,
        increment: 5,
    };
    let mut s = ticker.start_session().await.unwrap();
    s.advance_cluster_time(&cluster_time(ahead, vec![0u8; 20], 0));
    ticker
        .database("app")
        .collection::<Document>("c")
        .find_one(doc! {})
        .session(&mut s)
        .await
        .unwrap_or_else(|e| panic!("advanceClusterTime may move the clock: {e}"));
    let (t, reply) = pinged_time(&root).await;
    assert!(
        (t.time, t.increment) >= (ahead.time, ahead.increment),
        "{reply}"
    );
    // Root has no advanceClusterTime: signed, as on mongod.
    assert_ne!(signature(&reply).1, 0, "{reply}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_access_control_the_signature_is_the_dummy_one() {
    let ts = common::start_repl_set().await;
    let reply = common::direct_client(ts.server.port())
        .await
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
    assert_eq!(signature(&reply), (vec![0u8; 20], 0), "{reply}");
    let names = ts
        .tcp
        .database("admin")
        .list_collection_names()
        .await
        .unwrap();
    assert!(!names.iter().any(|n| n == "system.keys"), "{names:?}");
}
