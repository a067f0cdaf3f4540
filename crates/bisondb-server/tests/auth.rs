//! Authentication with `--auth`: the localhost exception, SCRAM-SHA-256 and
//! SCRAM-SHA-1 through the official driver (with and without speculative
//! authentication), wrong passwords, refusals before authentication, the
//! user commands, users surviving a restart, and attacks on the SCRAM
//! conversation spoken by hand on a raw connection.

use base64::engine::general_purpose::STANDARD as B64;
use base64::Engine as _;
use bson::{doc, Bson, Document};
use hmac::{Hmac, KeyInit, Mac};
use mongodb::Client;
use sha2::Digest as _;
use tokio::net::TcpStream;

use crate::common::{self, error_code, error_message, raw_command};

/// A server with `--auth` and a `root` user (made through the localhost
/// exception by the unauthenticated client).
async fn with_root() -> common::TestServer {
    common::start_with_root().await
}

fn uri(port: u16, user: &str, pwd: &str, db: &str, mech: Option<&str>) -> String {
    let mut u = format!(
        "mongodb://{user}:{pwd}@127.0.0.1:{port}/?authSource={db}&serverSelectionTimeoutMS=5000"
    );
    if let Some(m) = mech {
        u.push_str(&format!("&authMechanism={m}"));
    }
    u
}

async fn client(port: u16, user: &str, pwd: &str, db: &str, mech: Option<&str>) -> Client {
    Client::with_uri_str(uri(port, user, pwd, db, mech))
        .await
        .unwrap_or_else(|e| panic!("{e}"))
}

#[tokio::test]
async fn unauthenticated_commands_are_refused_and_the_localhost_exception_creates_one_user() {
    let s = common::start_with(|c| c.auth = true).await;
    let db = s.tcp.database("test");
    // The handshake commands run; a find does not.
    for cmd in [
        doc! {"ping": 1},
        doc! {"buildInfo": 1},
        doc! {"hello": 1},
        doc! {"connectionStatus": 1},
    ] {
        db.run_command(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
    }
    let e = db
        .run_command(doc! {"find": "c"})
        .await
        .expect_err("find before authentication");
    assert_eq!(error_code(&e), Some(13));
    assert!(
        error_message(&e).contains("Command find requires authentication"),
        "{e}"
    );
    let e = db
        .collection::<Document>("c")
        .insert_one(doc! {"a": 1})
        .await
        .expect_err("insert before authentication");
    assert_eq!(error_code(&e), Some(13), "{e}");
    // Over the Unix socket too (it counts as local).
    let e = s
        .unix
        .list_database_names()
        .await
        .expect_err("listDatabases");
    assert_eq!(error_code(&e), Some(13), "{e}");
    // The localhost exception: the first user, then nothing more.
    s.unix
        .database("admin")
        .run_command(doc! {"createUser": "first", "pwd": "pw", "roles": ["root"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = s
        .tcp
        .database("admin")
        .run_command(doc! {"createUser": "second", "pwd": "pw", "roles": ["root"]})
        .await
        .expect_err("a second user through the exception");
    assert_eq!(error_code(&e), Some(13), "{e}");
}

#[tokio::test]
async fn scram_sha_256_and_sha_1_authenticate_through_the_driver() {
    let s = with_root().await;
    let port = s.server.port();
    for mech in [Some("SCRAM-SHA-256"), Some("SCRAM-SHA-1"), None] {
        let c = client(port, "root", "rootpw", "admin", mech).await;
        c.database("t")
            .collection::<Document>("c")
            .insert_one(doc! {"m": format!("{mech:?}")})
            .await
            .unwrap_or_else(|e| panic!("{mech:?}: {e}"));
        let status = c
            .database("admin")
            .run_command(doc! {"connectionStatus": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let auth = status
            .get_document("authInfo")
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            auth.get_array("authenticatedUsers").ok(),
            Some(&vec![Bson::Document(doc! {"user": "root", "db": "admin"})])
        );
        assert_eq!(
            auth.get_array("authenticatedUserRoles").ok(),
            Some(&vec![Bson::Document(doc! {"role": "root", "db": "admin"})])
        );
    }
    // A user with only SCRAM-SHA-1 credentials; a SASLprep'd SHA-256 password.
    let admin = client(port, "root", "rootpw", "admin", None).await;
    admin
        .database("app")
        .run_command(doc! {"createUser": "old", "pwd": "pw1", "roles": ["readWrite"], "mechanisms": ["SCRAM-SHA-1"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    admin
        .database("app")
        .run_command(doc! {"createUser": "roman", "pwd": "I\u{00AD}X", "roles": ["read"], "mechanisms": ["SCRAM-SHA-256"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let hello = admin
        .database("admin")
        .run_command(doc! {"hello": 1, "saslSupportedMechs": "app.old"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        hello.get_array("saslSupportedMechs").ok(),
        Some(&vec![Bson::String("SCRAM-SHA-1".into())])
    );
    let old = client(port, "old", "pw1", "app", None).await;
    old.database("app")
        .list_collection_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = client(port, "old", "pw1", "app", Some("SCRAM-SHA-256"))
        .await
        .database("app")
        .list_collection_names()
        .await
        .expect_err("SHA-256 without SHA-256 credentials");
    assert!(format!("{e}").contains("SCRAM-SHA-256"), "{e}");
    // "IX" and "I\u{AD}X" are the same password after SASLprep.
    for pwd in ["IX", "I%C2%ADX"] {
        client(port, "roman", pwd, "app", Some("SCRAM-SHA-256"))
            .await
            .database("app")
            .list_collection_names()
            .await
            .unwrap_or_else(|e| panic!("{pwd}: {e}"));
    }
}

#[tokio::test]
async fn a_wrong_password_and_an_unknown_user_fail_alike() {
    let s = with_root().await;
    let port = s.server.port();
    for (user, pwd) in [("root", "wrong"), ("nobody", "rootpw")] {
        for mech in ["SCRAM-SHA-256", "SCRAM-SHA-1"] {
            let e = client(port, user, pwd, "admin", Some(mech))
                .await
                .database("admin")
                .run_command(doc! {"ping": 1})
                .await
                .expect_err("bad credentials");
            let text = format!("{e}");
            assert!(
                text.contains("Authentication failed."),
                "{user} {mech}: {text}"
            );
            assert!(!text.contains(pwd), "the password is never echoed: {text}");
        }
    }
}

#[tokio::test]
async fn user_commands_manage_the_store_as_mongod() {
    let s = with_root().await;
    let port = s.server.port();
    let root = client(port, "root", "rootpw", "admin", None).await;
    let db = root.database("app");
    db.run_command(doc! {"createUser": "ann", "pwd": "a", "roles": ["read", {"role": "readWrite", "db": "other"}], "customData": {"team": 7}})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = db
        .run_command(doc! {"createUser": "ann", "pwd": "a", "roles": []})
        .await
        .expect_err("duplicate");
    assert_eq!(error_code(&e), Some(51003), "{e}");
    assert!(
        error_message(&e).contains("User \"ann@app\" already exists"),
        "{e}"
    );
    let e = db
        .run_command(doc! {"createUser": "bob", "pwd": "b", "roles": ["nosuchrole"]})
        .await
        .expect_err("unknown role");
    assert_eq!(error_code(&e), Some(31), "{e}");
    let e = db
        .run_command(doc! {"createUser": "bob", "roles": []})
        .await
        .expect_err("no password");
    assert_eq!(error_code(&e), Some(2), "{e}");
    let e = db
        .run_command(doc! {"createUser": "bob", "pwd": "b"})
        .await
        .expect_err("no roles");
    assert_eq!(error_code(&e), Some(40414), "{e}");
    root.database("$external")
        .run_command(
            doc! {"createUser": "CN=client,O=Test", "roles": [{"role": "read", "db": "app"}]},
        )
        .await
        .unwrap_or_else(|e| panic!("an $external user: {e}"));
    // usersInfo, in each of its forms.
    let info = db
        .run_command(doc! {"usersInfo": "ann"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let users = info.get_array("users").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(users.len(), 1);
    let ann = users[0].as_document().unwrap_or_else(|| panic!("doc"));
    assert_eq!(ann.get_str("_id").ok(), Some("app.ann"));
    assert!(matches!(ann.get("userId"), Some(Bson::Binary(b)) if b.bytes.len() == 16));
    assert_eq!(ann.get_document("customData").ok(), Some(&doc! {"team": 7}));
    assert_eq!(
        ann.get_array("mechanisms").ok(),
        Some(&vec![
            Bson::String("SCRAM-SHA-1".into()),
            Bson::String("SCRAM-SHA-256".into())
        ])
    );
    assert!(
        ann.get("credentials").is_none(),
        "credentials only when asked"
    );
    for (cmd, on, n) in [
        (doc! {"usersInfo": 1}, "app", 1),
        (doc! {"usersInfo": 1}, "admin", 1),
        (doc! {"usersInfo": {"forAllDBs": true}}, "admin", 3),
        (doc! {"usersInfo": {"user": "ann", "db": "app"}}, "admin", 1),
        (
            doc! {"usersInfo": ["ann", {"user": "root", "db": "admin"}, "ghost"]},
            "app",
            2,
        ),
        (
            doc! {"usersInfo": 1, "filter": {"customData.team": 7}},
            "app",
            1,
        ),
        (
            doc! {"usersInfo": 1, "filter": {"customData.team": 8}},
            "app",
            0,
        ),
    ] {
        let r = root
            .database(on)
            .run_command(cmd.clone())
            .await
            .unwrap_or_else(|e| panic!("{cmd}: {e}"));
        assert_eq!(
            r.get_array("users").map(Vec::len).ok(),
            Some(n),
            "{cmd} on {on}: {r}"
        );
    }
    let r = db
        .run_command(doc! {"usersInfo": "ann", "showCredentials": true, "showPrivileges": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let ann = r
        .get_array("users")
        .ok()
        .and_then(|u| u.first())
        .and_then(Bson::as_document)
        .cloned()
        .unwrap_or_default();
    let creds = ann
        .get_document("credentials")
        .unwrap_or_else(|e| panic!("{e}: {ann}"));
    let sha256 = creds
        .get_document("SCRAM-SHA-256")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(sha256.get_i32("iterationCount").ok(), Some(15000));
    assert_eq!(
        creds
            .get_document("SCRAM-SHA-1")
            .and_then(|d| d.get_i32("iterationCount"))
            .ok(),
        Some(10000)
    );
    assert!(!format!("{ann}").contains("\"a\""), "no password in {ann}");
    assert!(ann.get_array("inheritedRoles").is_ok(), "{ann}");
    // updateUser: a new password works and the old one no longer does.
    db.run_command(doc! {"updateUser": "ann", "pwd": "a2"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    client(port, "ann", "a2", "app", None)
        .await
        .database("app")
        .list_collection_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = client(port, "ann", "a", "app", None)
        .await
        .database("app")
        .list_collection_names()
        .await
        .expect_err("old password");
    assert!(format!("{e}").contains("Authentication failed."), "{e}");
    let e = db
        .run_command(doc! {"updateUser": "ghost", "pwd": "x"})
        .await
        .expect_err("no such user");
    assert_eq!(error_code(&e), Some(11), "{e}");
    // dropUser and dropAllUsersFromDatabase.
    db.run_command(doc! {"createUser": "carl", "pwd": "c", "roles": []})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    db.run_command(doc! {"dropUser": "ann"})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let e = db
        .run_command(doc! {"dropUser": "ann"})
        .await
        .expect_err("dropped twice");
    assert_eq!(error_code(&e), Some(11), "{e}");
    let r = db
        .run_command(doc! {"dropAllUsersFromDatabase": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        common::is_num(r.get("n").unwrap_or(&Bson::Null), 1.0),
        "{r}"
    );
    // The iteration counts follow the parameters.
    let s2 = common::start_with(|c| {
        c.scram_iteration_count = 5000;
        c.scram_sha256_iteration_count = 6000;
    })
    .await;
    s2.tcp
        .database("a")
        .run_command(doc! {"createUser": "u", "pwd": "p", "roles": []})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = s2
        .tcp
        .database("a")
        .run_command(doc! {"usersInfo": "u", "showCredentials": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let text = format!("{r}");
    assert!(
        text.contains("\"iterationCount\": 5000") && text.contains("\"iterationCount\": 6000"),
        "{text}"
    );
    client(s2.server.port(), "u", "p", "a", Some("SCRAM-SHA-1"))
        .await
        .database("a")
        .list_collection_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn users_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let dbpath = dir.path().join("data");
    let (server, c) = common::restart_lsm(dir.path(), &dbpath).await;
    c.database("admin")
        .run_command(doc! {"createUser": "keep", "pwd": "kp", "roles": ["root"]})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    common::shutdown_by_command(server, c).await;
    let mut cfg = common::lsm_config(dir.path(), &dbpath);
    cfg.auth = true;
    let server = loop {
        match bisondb_server::Server::start(cfg.clone()).await {
            Ok(s) => break s,
            Err(e) if e.code.code() == 98 => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            Err(e) => panic!("{}", e.message),
        }
    };
    let c = client(server.port(), "keep", "kp", "admin", None).await;
    c.database("x")
        .list_collection_names()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

// ---- SCRAM by hand ---------------------------------------------------------

fn hmac256(key: &[u8], data: &[u8]) -> Vec<u8> {
    let mut m = Hmac::<sha2::Sha256>::new_from_slice(key).unwrap_or_else(|e| panic!("{e}"));
    m.update(data);
    m.finalize().into_bytes().to_vec()
}

fn payload(d: &Document) -> Vec<u8> {
    match d.get("payload") {
        Some(Bson::Binary(b)) => b.bytes.clone(),
        other => panic!("no payload: {other:?} in {d}"),
    }
}

fn bin(s: &str) -> Bson {
    Bson::Binary(bson::Binary {
        subtype: bson::spec::BinarySubtype::Generic,
        bytes: s.as_bytes().to_vec(),
    })
}

/// The client-final message for SCRAM-SHA-256 after `server_first`.
fn client_final(pwd: &str, first_bare: &str, server_first: &str) -> String {
    let attr = |k: &str| {
        server_first
            .split(',')
            .find_map(|a| a.strip_prefix(k))
            .unwrap_or_else(|| panic!("{k} in {server_first}"))
            .to_string()
    };
    let salt = B64.decode(attr("s=")).unwrap_or_else(|e| panic!("{e}"));
    let iterations: u32 = attr("i=").parse().unwrap_or_else(|e| panic!("{e}"));
    let mut salted = [0u8; 32];
    pbkdf2::pbkdf2_hmac::<sha2::Sha256>(pwd.as_bytes(), &salt, iterations, &mut salted);
    let client_key = hmac256(&salted, b"Client Key");
    let stored = sha2::Sha256::digest(&client_key).to_vec();
    let without = format!("c=biws,r={}", attr("r="));
    let auth = format!("{first_bare},{server_first},{without}");
    let sig = hmac256(&stored, auth.as_bytes());
    let proof: Vec<u8> = client_key.iter().zip(&sig).map(|(a, b)| a ^ b).collect();
    format!("{without},p={}", B64.encode(proof))
}

async fn sasl_start(
    stream: &mut TcpStream,
    user: &str,
    nonce: &str,
    skip: bool,
) -> (String, Document) {
    let bare = format!("n={user},r={nonce}");
    let mut cmd = doc! {"saslStart": 1, "mechanism": "SCRAM-SHA-256", "payload": bin(&format!("n,,{bare}")), "$db": "admin"};
    if skip {
        cmd.insert("options", doc! {"skipEmptyExchange": true});
    }
    let r = raw_command(stream, cmd).await;
    (bare, r)
}

async fn sasl_continue(stream: &mut TcpStream, msg: &str) -> Document {
    raw_command(
        stream,
        doc! {"saslContinue": 1, "conversationId": 1, "payload": bin(msg), "$db": "admin"},
    )
    .await
}

#[tokio::test]
async fn the_scram_conversation_by_hand_with_and_without_the_empty_exchange() {
    let s = with_root().await;
    for skip in [false, true] {
        let mut c = s.raw_tcp().await;
        let (bare, r) = sasl_start(&mut c, "root", "fyko+d2lbbFgONRv9qkxdawL", skip).await;
        assert_eq!(r.get_bool("done").ok(), Some(false), "{r}");
        assert_eq!(r.get_i32("conversationId").ok(), Some(1), "{r}");
        let server_first = String::from_utf8(payload(&r)).unwrap_or_default();
        assert!(server_first.contains(",i=15000"), "{server_first}");
        let r = sasl_continue(&mut c, &client_final("rootpw", &bare, &server_first)).await;
        assert!(
            String::from_utf8(payload(&r))
                .unwrap_or_default()
                .starts_with("v="),
            "{r}"
        );
        assert_eq!(r.get_bool("done").ok(), Some(skip), "{r}");
        if !skip {
            let r = sasl_continue(&mut c, "").await;
            assert_eq!(r.get_bool("done").ok(), Some(true), "{r}");
        }
        let r = raw_command(&mut c, doc! {"find": "c", "$db": "t"}).await;
        assert!(
            common::is_num(r.get("ok").unwrap_or(&Bson::Null), 1.0),
            "authenticated: {r}"
        );
        // logout: the connection is unauthenticated again.
        raw_command(&mut c, doc! {"logout": 1, "$db": "admin"}).await;
        let r = raw_command(&mut c, doc! {"find": "c", "$db": "t"}).await;
        assert_eq!(r.get_i32("code").ok(), Some(13), "{r}");
    }
}

#[tokio::test]
async fn tampered_replayed_and_abandoned_conversations_fail() {
    let s = with_root().await;
    // Tampered proof.
    let mut c = s.raw_tcp().await;
    let (bare, r) = sasl_start(&mut c, "root", "abcdefghijklmnop", true).await;
    let server_first = String::from_utf8(payload(&r)).unwrap_or_default();
    let good = client_final("rootpw", &bare, &server_first);
    let (head, proof) = good.rsplit_once(",p=").unwrap_or_else(|| panic!("{good}"));
    let mut bytes = B64.decode(proof).unwrap_or_default();
    bytes[0] ^= 1;
    let r = sasl_continue(&mut c, &format!("{head},p={}", B64.encode(&bytes))).await;
    assert_eq!(r.get_i32("code").ok(), Some(18), "{r}");
    assert_eq!(
        r.get_str("errmsg").ok(),
        Some("Authentication failed."),
        "{r}"
    );
    // The conversation is over: the good message no longer helps.
    let r = sasl_continue(&mut c, &good).await;
    assert_eq!(r.get_i32("code").ok(), Some(17), "{r}");
    // Tampered nonce.
    let (bare, r) = sasl_start(&mut c, "root", "abcdefghijklmnop", true).await;
    let server_first = String::from_utf8(payload(&r)).unwrap_or_default();
    let good = client_final("rootpw", &bare, &server_first);
    let r = sasl_continue(&mut c, &good.replacen("r=a", "r=b", 1)).await;
    assert_eq!(r.get_i32("code").ok(), Some(18), "{r}");
    // A replayed client-final: valid for its own conversation, not another.
    let mut c1 = s.raw_tcp().await;
    let (bare, r) = sasl_start(&mut c1, "root", "replayreplayreplay", true).await;
    let server_first = String::from_utf8(payload(&r)).unwrap_or_default();
    let recorded = client_final("rootpw", &bare, &server_first);
    let r = sasl_continue(&mut c1, &recorded).await;
    assert_eq!(r.get_bool("done").ok(), Some(true), "{r}");
    let mut c2 = s.raw_tcp().await;
    sasl_start(&mut c2, "root", "replayreplayreplay", true).await;
    let r = sasl_continue(&mut c2, &recorded).await;
    assert_eq!(r.get_i32("code").ok(), Some(18), "replay: {r}");
    let r = raw_command(&mut c2, doc! {"find": "c", "$db": "t"}).await;
    assert_eq!(r.get_i32("code").ok(), Some(13), "{r}");
    // A client that stops mid-conversation holds nothing: others authenticate.
    let mut quitter = s.raw_tcp().await;
    sasl_start(&mut quitter, "root", "quitterquitter", false).await;
    drop(quitter);
    let mut c3 = s.raw_tcp().await;
    let r = raw_command(
        &mut c3,
        doc! {"saslContinue": 1, "conversationId": 1, "payload": bin("x"), "$db": "admin"},
    )
    .await;
    assert_eq!(
        r.get_i32("code").ok(),
        Some(17),
        "no conversation on a new connection: {r}"
    );
    client(s.server.port(), "root", "rootpw", "admin", None)
        .await
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}

#[tokio::test]
async fn many_failed_logins_leave_the_server_responsive() {
    let s = with_root().await;
    let root = client(s.server.port(), "root", "rootpw", "admin", None).await;
    root.database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let port = s.server.port();
    let attackers: Vec<_> = (0..8)
        .map(|i| {
            tokio::spawn(async move {
                let mut c = TcpStream::connect(("127.0.0.1", port))
                    .await
                    .unwrap_or_else(|e| panic!("{e}"));
                for j in 0..250 {
                    let (_, r) =
                        sasl_start(&mut c, "root", &format!("n{i}x{j}abcdefgh"), true).await;
                    let fin = format!(
                        "c=biws,r={},p={}",
                        String::from_utf8(payload(&r))
                            .unwrap_or_default()
                            .split(',')
                            .next()
                            .unwrap_or("")
                            .trim_start_matches("r="),
                        B64.encode([7u8; 32])
                    );
                    let r = sasl_continue(&mut c, &fin).await;
                    assert_eq!(r.get_i32("code").ok(), Some(18), "{r}");
                }
            })
        })
        .collect();
    // Meanwhile the authenticated client's commands answer promptly.
    for _ in 0..20 {
        let t = std::time::Instant::now();
        root.database("admin")
            .run_command(doc! {"ping": 1})
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            t.elapsed() < std::time::Duration::from_secs(2),
            "ping took {:?}",
            t.elapsed()
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    for a in attackers {
        a.await.unwrap_or_else(|e| panic!("{e}"));
    }
}

#[tokio::test]
async fn iteration_counts_are_server_parameters() {
    let s = with_root().await;
    let root = client(s.server.port(), "root", "rootpw", "admin", None).await;
    let admin = root.database("admin");
    let r = admin
        .run_command(doc! {"getParameter": 1, "scramIterationCount": 1, "scramSHA256IterationCount": 1, "authenticationMechanisms": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.get_i32("scramIterationCount").ok(), Some(10000), "{r}");
    assert_eq!(
        r.get_i32("scramSHA256IterationCount").ok(),
        Some(15000),
        "{r}"
    );
    assert_eq!(
        r.get_array("authenticationMechanisms").ok(),
        Some(&vec![
            Bson::String("SCRAM-SHA-1".into()),
            Bson::String("SCRAM-SHA-256".into())
        ])
    );
    let r = admin
        .run_command(doc! {"setParameter": 1, "scramSHA256IterationCount": 7000})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.get_i32("was").ok(), Some(15000), "{r}");
    let e = admin
        .run_command(doc! {"setParameter": 1, "scramIterationCount": 100})
        .await
        .expect_err("below 5000");
    assert_eq!(error_code(&e), Some(2), "{e}");
    admin
        .run_command(doc! {"createUser": "n", "pwd": "p", "roles": []})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let r = admin
        .run_command(doc! {"usersInfo": "n", "showCredentials": true})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(format!("{r}").contains("\"iterationCount\": 7000"), "{r}");
    client(s.server.port(), "n", "p", "admin", None)
        .await
        .database("admin")
        .run_command(doc! {"connectionStatus": 1})
        .await
        .unwrap_or_else(|e| panic!("{e}"));
}
