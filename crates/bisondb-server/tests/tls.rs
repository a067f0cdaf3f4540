//! TLS on the listeners, through the official Rust driver (rustls): each
//! `tlsMode`, client certificates checked against `tlsCAFile` (valid, from an
//! unknown CA, expired), an encrypted key, disabled protocols, plaintext on a
//! `requireTLS` port, the Unix socket staying plaintext, and MONGODB-X509.
//! Every certificate is made here at run time with rcgen: nothing secret is
//! committed.

use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bisondb_server::tls::{TlsMode, TlsSettings};
use bisondb_server::{Server, ServerConfig};
use bson::{doc, Document};
use mongodb::Client;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, KeyUsagePurpose, SanType,
};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::common::{self, error_code, TestServer};

/// A CA and what it signed, as PEM files in a temp dir.
struct Pki {
    dir: tempfile::TempDir,
    /// The server's chain and key (`tlsCertificateKeyFile`).
    server_pem: PathBuf,
    /// The CA certificate (`tlsCAFile`, on both sides).
    ca_pem: PathBuf,
    /// A valid client certificate and key.
    client_pem: PathBuf,
    client_subject: String,
    /// A client certificate from a CA the server does not know.
    stranger_pem: PathBuf,
    /// A client certificate of the right CA that expired in 2021.
    expired_pem: PathBuf,
    /// The server's key alone, DER (PKCS#8), for the encrypted-key test.
    server_cert_pem: String,
    server_key_der: Vec<u8>,
}

fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::OrganizationName, "BisonDB tests");
    dn.push(DnType::CommonName, name);
    p.distinguished_name = dn;
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    (p.self_signed(&key).unwrap(), key)
}

fn client_params(cn: &str) -> CertificateParams {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CountryName, "US");
    dn.push(DnType::OrganizationName, "BisonDB tests");
    dn.push(DnType::OrganizationalUnitName, "clients");
    dn.push(DnType::CommonName, cn);
    p.distinguished_name = dn;
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    p
}

impl Pki {
    fn new() -> Pki {
        let dir = tempfile::tempdir().unwrap();
        let (ca_cert, ca_key) = ca("BisonDB test CA");
        let (other_ca, other_key) = ca("Unknown CA");

        let server_key = KeyPair::generate().unwrap();
        let mut sp = CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        sp.subject_alt_names
            .push(SanType::IpAddress(IpAddr::V4(Ipv4Addr::LOCALHOST)));
        sp.distinguished_name.push(DnType::CommonName, "localhost");
        sp.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let server = sp.signed_by(&server_key, &ca_cert, &ca_key).unwrap();

        let write = |name: &str, text: String| {
            let p = dir.path().join(name);
            std::fs::write(&p, text).unwrap();
            p
        };
        let client_key = KeyPair::generate().unwrap();
        let client = client_params("client one")
            .signed_by(&client_key, &ca_cert, &ca_key)
            .unwrap();
        let stranger_key = KeyPair::generate().unwrap();
        let stranger = client_params("stranger")
            .signed_by(&stranger_key, &other_ca, &other_key)
            .unwrap();
        let expired_key = KeyPair::generate().unwrap();
        let mut ep = client_params("expired");
        ep.not_before = rcgen::date_time_ymd(2020, 1, 1);
        ep.not_after = rcgen::date_time_ymd(2021, 1, 1);
        let expired = ep.signed_by(&expired_key, &ca_cert, &ca_key).unwrap();

        Pki {
            server_pem: write(
                "server.pem",
                format!("{}{}", server.pem(), server_key.serialize_pem()),
            ),
            ca_pem: write("ca.pem", ca_cert.pem()),
            client_pem: write(
                "client.pem",
                format!("{}{}", client.pem(), client_key.serialize_pem()),
            ),
            client_subject: "CN=client one,OU=clients,O=BisonDB tests,C=US".to_string(),
            stranger_pem: write(
                "stranger.pem",
                format!("{}{}", stranger.pem(), stranger_key.serialize_pem()),
            ),
            expired_pem: write(
                "expired.pem",
                format!("{}{}", expired.pem(), expired_key.serialize_pem()),
            ),
            server_cert_pem: server.pem(),
            server_key_der: server_key.serialize_der(),
            dir,
        }
    }

    fn settings(&self, mode: TlsMode, with_ca: bool) -> TlsSettings {
        TlsSettings {
            mode,
            certificate_key_file: Some(self.server_pem.clone()),
            ca_file: with_ca.then(|| self.ca_pem.clone()),
            ..Default::default()
        }
    }

    /// Creates the `$external` user of the valid client certificate (root), as
    /// mongod does it, over a connection presenting that certificate.
    async fn create_x509_user(&self, port: u16) -> Client {
        let client = Client::with_uri_str(self.uri(port, Some(&self.client_pem)))
            .await
            .unwrap();
        client
            .database("$external")
            .run_command(doc! {
                "createUser": self.client_subject.as_str(),
                "roles": [{"role": "root", "db": "admin"}],
            })
            .await
            .unwrap();
        client
    }

    /// A driver URI over TLS trusting the test CA, presenting `cert` if any.
    fn uri(&self, port: u16, cert: Option<&Path>) -> String {
        let mut uri = format!(
            "mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=3000&connectTimeoutMS=3000&tls=true&tlsCAFile={}",
            self.ca_pem.display()
        );
        if let Some(c) = cert {
            uri.push_str(&format!("&tlsCertificateKeyFile={}", c.display()));
        }
        uri
    }
}

async fn ping(uri: &str) -> mongodb::error::Result<Document> {
    let client = Client::with_uri_str(uri).await?;
    client.database("admin").run_command(doc! {"ping": 1}).await
}

async fn server_status(client: &Client) -> Document {
    client
        .database("admin")
        .run_command(doc! {"serverStatus": 1})
        .await
        .unwrap()
}

async fn start(settings: TlsSettings) -> TestServer {
    common::start_with(move |c| c.tls = settings).await
}

fn plain_uri(port: u16) -> String {
    format!("mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=2000&connectTimeoutMS=2000")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn require_tls_serves_tls_only() {
    let pki = Pki::new();
    let t = start(pki.settings(TlsMode::Require, false)).await;
    let port = t.server.port();
    let client = Client::with_uri_str(pki.uri(port, None)).await.unwrap();
    let coll = client.database("t").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1, "x": "over tls"})
        .await
        .unwrap();
    let found = coll.find_one(doc! {"_id": 1}).await.unwrap().unwrap();
    assert_eq!(found.get_str("x").unwrap(), "over tls");
    // serverStatus counts the connection by its TLS version and shows the certificate.
    let status = server_status(&client).await;
    let ts = status.get_document("transportSecurity").unwrap();
    assert!(common::num(ts, "1.3") >= 1, "{ts:?}");
    let sec = status.get_document("security").unwrap();
    assert_eq!(sec.get_str("SSLServerSubjectName").unwrap(), "CN=localhost");
    assert!(!sec.get_bool("SSLServerHasCertificateAuthority").unwrap());

    // A plaintext driver cannot talk to it.
    let e = ping(&plain_uri(port)).await.unwrap_err();
    assert!(error_code(&e).is_none(), "not a server reply: {e}");
    // A raw plaintext message: the server closes the connection without a reply.
    let mut raw = t.raw_tcp().await;
    common::send_msg(&mut raw, 1, &doc! {"ping": 1, "$db": "admin"}).await;
    let mut buf = [0u8; 16];
    let n = tokio::time::timeout(common::IO_TIMEOUT, raw.read(&mut buf))
        .await
        .expect("server closes, not hangs")
        .unwrap_or(0);
    assert_eq!(n, 0, "no reply to plaintext on a requireTLS port");
    // The Unix socket stays plaintext, as in mongod.
    t.unix
        .database("admin")
        .run_command(doc! {"ping": 1})
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allow_and_prefer_tls_serve_both() {
    let pki = Pki::new();
    for mode in [TlsMode::Allow, TlsMode::Prefer] {
        let t = start(pki.settings(mode, false)).await;
        let port = t.server.port();
        ping(&pki.uri(port, None))
            .await
            .unwrap_or_else(|e| panic!("{mode:?} over TLS: {e}"));
        ping(&plain_uri(port))
            .await
            .unwrap_or_else(|e| panic!("{mode:?} plaintext: {e}"));
        // getCmdLineOpts shows the mode as mongod names it.
        let opts = t
            .tcp
            .database("admin")
            .run_command(doc! {"getCmdLineOpts": 1})
            .await
            .unwrap();
        let tls = opts
            .get_document("parsed")
            .and_then(|p| p.get_document("net"))
            .and_then(|n| n.get_document("tls"))
            .unwrap();
        assert_eq!(tls.get_str("mode").unwrap(), mode.name());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn client_certificates_checked_against_the_ca_file() {
    let pki = Pki::new();
    let t = start(pki.settings(TlsMode::Require, true)).await;
    let port = t.server.port();
    ping(&pki.uri(port, Some(&pki.client_pem)))
        .await
        .expect("a certificate of the CA is accepted");
    for (what, cert) in [
        ("no certificate", None),
        ("unknown CA", Some(pki.stranger_pem.as_path())),
        ("expired", Some(pki.expired_pem.as_path())),
    ] {
        let e = ping(&pki.uri(port, cert))
            .await
            .expect_err(&format!("{what} must be refused"));
        assert!(
            error_code(&e).is_none(),
            "{what}: refused in the handshake: {e}"
        );
    }
    // The server still serves valid clients after refusing those.
    ping(&pki.uri(port, Some(&pki.client_pem))).await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn allowances_for_missing_and_invalid_certificates() {
    let pki = Pki::new();
    let mut s = pki.settings(TlsMode::Require, true);
    s.allow_connections_without_certificates = true;
    s.options_given = true;
    let t = start(s).await;
    let port = t.server.port();
    ping(&pki.uri(port, None))
        .await
        .expect("no certificate allowed");
    ping(&pki.uri(port, Some(&pki.client_pem))).await.unwrap();
    ping(&pki.uri(port, Some(&pki.expired_pem)))
        .await
        .expect_err("an expired certificate is still refused");

    let mut s = pki.settings(TlsMode::Require, true);
    s.allow_invalid_certificates = true;
    s.options_given = true;
    let t = start(s).await;
    let port = t.server.port();
    ping(&pki.uri(port, Some(&pki.expired_pem)))
        .await
        .expect("tlsAllowInvalidCertificates accepts an expired certificate");
    ping(&pki.uri(port, Some(&pki.stranger_pem)))
        .await
        .expect("and one of an unknown CA");
    ping(&pki.uri(port, None))
        .await
        .expect_err("a certificate is still required");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disabled_protocols_choose_the_version() {
    let pki = Pki::new();
    let mut s = pki.settings(TlsMode::Require, false);
    s.disabled_protocols =
        bisondb_server::tls::settings::parse_disabled_protocols("TLS1_0,TLS1_3").unwrap();
    s.options_given = true;
    let t = start(s).await;
    let client = Client::with_uri_str(pki.uri(t.server.port(), None))
        .await
        .unwrap();
    let status = server_status(&client).await;
    let ts = status.get_document("transportSecurity").unwrap();
    assert!(common::num(ts, "1.2") >= 1, "{ts:?}");
    assert_eq!(common::num(ts, "1.3"), 0, "{ts:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn encrypted_key_with_password() {
    use pkcs8::der::pem::LineEnding;
    let pki = Pki::new();
    let info = pkcs8::PrivateKeyInfo::try_from(pki.server_key_der.as_slice()).unwrap();
    let params =
        pkcs8::pkcs5::pbes2::Parameters::pbkdf2_sha256_aes256cbc(2048, b"saltsalt", &[7u8; 16])
            .unwrap();
    let encrypted = info.encrypt_with_params(params, "s3cret").unwrap();
    let key_pem = encrypted
        .to_pem("ENCRYPTED PRIVATE KEY", LineEnding::LF)
        .unwrap();
    let pem = pki.dir.path().join("encrypted.pem");
    std::fs::write(&pem, format!("{}{}", pki.server_cert_pem, key_pem.as_str())).unwrap();

    let mut s = pki.settings(TlsMode::Require, false);
    s.certificate_key_file = Some(pem.clone());
    s.certificate_key_file_password = Some("s3cret".into());
    let t = start(s.clone()).await;
    ping(&pki.uri(t.server.port(), None)).await.unwrap();

    // A wrong or missing password, or a missing file, stops start-up naming the file.
    for (password, file) in [
        (Some("wrong"), pem.clone()),
        (None, pem.clone()),
        (Some("s3cret"), pki.dir.path().join("missing.pem")),
    ] {
        let dir = tempfile::tempdir().unwrap();
        let mut cfg: ServerConfig = common::config(dir.path());
        cfg.tls = s.clone();
        cfg.tls.certificate_key_file = Some(file.clone());
        cfg.tls.certificate_key_file_password = password.map(str::to_string);
        let e = match Server::start(cfg).await {
            Ok(_) => panic!("started with {password:?} {}", file.display()),
            Err(e) => e,
        };
        assert!(
            e.message.contains(&file.display().to_string()),
            "{}",
            e.message
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_up_refuses_bad_tls_settings() {
    let pki = Pki::new();
    let dir = tempfile::tempdir().unwrap();
    let mut cfg = common::config(dir.path());
    cfg.tls = pki.settings(TlsMode::Require, true);
    cfg.tls.ca_file = Some(pki.server_pem.with_extension("nothere"));
    let e = Server::start(cfg)
        .await
        .err()
        .expect("a missing CA file stops start-up");
    assert!(e.message.contains("nothere"), "{}", e.message);

    let mut cfg = common::config(dir.path());
    cfg.tls.mode = TlsMode::Require;
    let e = Server::start(cfg).await.err().unwrap();
    assert!(e.message.contains("tlsCertificateKeyFile"), "{}", e.message);

    let mut cfg = common::config(dir.path());
    let key = dir.path().join("key");
    std::fs::write(&key, "abcdefghij").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o644)).unwrap();
    cfg.key_file = Some(key.clone());
    let e = Server::start(cfg).await.err().unwrap();
    assert_eq!(
        e.message,
        format!("permissions on {} are too open", key.display())
    );
}

/// X.509: the user is the certificate's subject and must exist in `$external`;
/// with `--auth`, it is what lets a TLS client in.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_authentication() {
    let pki = Pki::new();
    let t = start(pki.settings(TlsMode::Require, true)).await;
    let port = t.server.port();
    let x509_uri = format!(
        "{}&authMechanism=MONGODB-X509&authSource=%24external",
        pki.uri(port, Some(&pki.client_pem))
    );
    // No such user yet: refused with mongod's one answer.
    let e = ping(&x509_uri).await.unwrap_err();
    assert!(
        e.to_string().contains("auth failed")
            || matches!(*e.kind, mongodb::error::ErrorKind::Authentication { .. }),
        "{e}"
    );

    // The user, as mongod creates it: a `$external` user without a password.
    let plain = pki.create_x509_user(port).await;
    // The driver authenticates (speculatively, in its hello) and works.
    ping(&x509_uri).await.expect("X.509 authentication");
    let x509 = Client::with_uri_str(&x509_uri).await.unwrap();
    let status = x509
        .database("admin")
        .run_command(doc! {"connectionStatus": 1})
        .await
        .unwrap();
    let users = status
        .get_document("authInfo")
        .and_then(|a| a.get_array("authenticatedUsers"))
        .unwrap();
    assert_eq!(
        users,
        &vec![bson::Bson::Document(
            doc! {"user": pki.client_subject.as_str(), "db": "$external"}
        )]
    );

    // The command itself: the reply names the user; a wrong user or database fails.
    let ext = plain.database("$external");
    let ok = ext
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap();
    assert_eq!(ok.get_str("user").unwrap(), pki.client_subject);
    assert_eq!(ok.get_str("dbname").unwrap(), "$external");
    let e = ext
        .run_command(
            doc! {"authenticate": 1, "mechanism": "MONGODB-X509", "user": "CN=someone else"},
        )
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(18));
    assert_eq!(common::error_message(&e), "auth failed");
    let e = plain
        .database("admin")
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(17), "{e}");
    let e = ext.run_command(doc! {"authenticate": 1}).await.unwrap_err();
    assert_eq!(error_code(&e), Some(2), "{e}");

    // A connection that authenticated with the command is that user too.
    let status = plain
        .database("admin")
        .run_command(doc! {"connectionStatus": 1})
        .await
        .unwrap();
    assert_eq!(
        status
            .get_document("authInfo")
            .and_then(|a| a.get_array("authenticatedUsers"))
            .map(|u| u.len())
            .ok(),
        Some(1)
    );

    // Without a client certificate there is no subject: auth failed.
    let mut s = pki.settings(TlsMode::Require, true);
    s.allow_connections_without_certificates = true;
    s.options_given = true;
    let t2 = start(s).await;
    let anon = Client::with_uri_str(pki.uri(t2.server.port(), None))
        .await
        .unwrap();
    let e = anon
        .database("$external")
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(18));
    // Nor over the plaintext Unix socket.
    let e = t
        .unix
        .database("$external")
        .run_command(doc! {"authenticate": 1, "mechanism": "MONGODB-X509"})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(18));
    drop(t);
}

/// A TLS handshake that never comes is cut off at incompleteMessageTimeoutMS.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_tls_client_is_dropped() {
    let pki = Pki::new();
    let mut s = pki.settings(TlsMode::Require, false);
    s.options_given = true;
    let t = common::start_with(move |c| {
        c.tls = s;
        c.incomplete_message_timeout_ms = 300;
    })
    .await;
    let mut raw = t.raw_tcp().await;
    // The first byte of a ClientHello record, then nothing.
    raw.write_all(&[0x16]).await.unwrap();
    let mut buf = [0u8; 8];
    let n = tokio::time::timeout(Duration::from_secs(5), raw.read(&mut buf))
        .await
        .expect("closed within the timeout")
        .unwrap_or(0);
    assert_eq!(n, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn x509_with_auth_enabled() {
    let pki = Pki::new();
    let settings = pki.settings(TlsMode::Require, true);
    let t = common::start_with(move |c| {
        c.tls = settings;
        c.auth = true;
    })
    .await;
    let port = t.server.port();
    // The localhost exception creates the first user: the X.509 one.
    pki.create_x509_user(port).await;
    // Now a TLS connection without authentication may not read.
    let anon = Client::with_uri_str(pki.uri(port, Some(&pki.client_pem)))
        .await
        .unwrap();
    let e = anon
        .database("t")
        .collection::<Document>("c")
        .find_one(doc! {})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(13), "{e}");
    // Authenticated by its certificate, it may.
    let x509 = Client::with_uri_str(format!(
        "{}&authMechanism=MONGODB-X509&authSource=%24external",
        pki.uri(port, Some(&pki.client_pem))
    ))
    .await
    .unwrap();
    let coll = x509.database("t").collection::<Document>("c");
    coll.insert_one(doc! {"_id": 1}).await.unwrap();
    assert!(coll.find_one(doc! {"_id": 1}).await.unwrap().is_some());
}

/// A key file turns access control on, as in mongod.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn key_file_turns_access_control_on() {
    use std::os::unix::fs::PermissionsExt;
    let keys = tempfile::tempdir().unwrap();
    let key = keys.path().join("key");
    std::fs::write(&key, "c2VjcmV0IGtleSBmb3IgdGVzdHM=\n").unwrap();
    std::fs::set_permissions(&key, std::fs::Permissions::from_mode(0o400)).unwrap();
    let path = key.clone();
    let t = common::start_with(move |c| c.key_file = Some(path)).await;
    let stored = t
        .server
        .state
        .security
        .get()
        .and_then(|s| s.key_file.as_ref());
    assert_eq!(
        stored.map(|k| k.key()),
        Some("c2VjcmV0IGtleSBmb3IgdGVzdHM=")
    );
    let e = t
        .tcp
        .database("t")
        .collection::<Document>("c")
        .find_one(doc! {})
        .await
        .unwrap_err();
    assert_eq!(error_code(&e), Some(13), "{e}");
}
