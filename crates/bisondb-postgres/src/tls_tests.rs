//! TLS to a PostgreSQL started with `ssl=on` (`testing::tls::TlsCluster`:
//! a certificate for `localhost` only, signed by a test CA, and a
//! `pg_hba.conf` taking TCP only over TLS, with certificate authentication
//! on `template1`).

use std::path::PathBuf;
use std::sync::Arc;

use bisondb_engine::{conformance, Engine};

use crate::testing::tls::TlsCluster;
use crate::testing::{TestCluster, USER};
use crate::{PostgresEngine, TlsSettings};

/// The cluster of [`TlsCluster`] and engines on it.
struct Fixture(TlsCluster);

impl Fixture {
    fn start() -> Option<Fixture> {
        TlsCluster::start().map(Fixture)
    }

    fn file(&self, name: &str) -> PathBuf {
        self.0.file(name)
    }

    fn uri(&self, host: &str, database: &str, params: &str) -> String {
        self.0.uri(host, database, params)
    }

    fn open(&self, uri: &str, tls: &TlsSettings) -> Result<PostgresEngine, String> {
        PostgresEngine::open_with_tls(uri, 2, tls).map_err(|e| e.to_string())
    }
}

fn settings(mode: &str, ca: Option<PathBuf>, pair: Option<PathBuf>) -> TlsSettings {
    TlsSettings {
        mode: Some(mode.into()),
        ca_file: ca,
        certificate_key_file: pair,
    }
}

fn ssl_of(engine: &PostgresEngine) -> String {
    engine
        .query_text("SELECT ssl::text FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn tls_to_a_postgres_with_ssl_on() {
    let Some(f) = Fixture::start() else {
        return;
    };
    let ca = || Some(f.file("ca.pem"));

    // verify-full through the name the certificate carries: TLS, and the
    // engine works over it (the contract's model run, which holds about 30
    // snapshots, each a connection).
    let full = PostgresEngine::open_with_tls(
        &f.uri("localhost", "postgres", "application_name=t"),
        64,
        &settings("verify-full", ca(), None),
    )
    .map_err(|e| e.to_string())
    .unwrap_or_else(|e| panic!("verify-full: {e}"));
    assert_eq!(ssl_of(&full), "true");
    let engine: Arc<dyn Engine> = Arc::new(full);
    conformance::check_against_model(&engine, &conformance::random_ops(7, 150));
    drop(engine);

    // The same from the URI's libpq parameters.
    let from_uri = f.uri(
        "localhost",
        "postgres",
        &format!(
            "sslmode=verify-full&sslrootcert={}",
            f.file("ca.pem").display()
        ),
    );
    let engine = f
        .open(&from_uri, &TlsSettings::default())
        .unwrap_or_else(|e| panic!("sslmode=verify-full: {e}"));
    assert_eq!(ssl_of(&engine), "true");

    // By IP the name does not match: verify-full refuses, verify-ca (the
    // chain only) and require (nothing) connect.
    let by_ip = f.uri("127.0.0.1", "postgres", "");
    let refused = f
        .open(&by_ip, &settings("verify-full", ca(), None))
        .err()
        .unwrap_or_else(|| panic!("verify-full accepted a certificate for another name"));
    assert!(
        refused.contains("certificate not valid for name \"127.0.0.1\""),
        "{refused}"
    );
    for (mode, ca) in [("verify-ca", ca()), ("require", None), ("prefer", None)] {
        let engine = f
            .open(&by_ip, &settings(mode, ca, None))
            .unwrap_or_else(|e| panic!("{mode}: {e}"));
        assert_eq!(ssl_of(&engine), "true", "{mode}");
    }

    // A CA that did not sign the server's certificate.
    let wrong = f
        .open(
            &f.uri("localhost", "postgres", ""),
            &settings("verify-full", Some(f.file("other-ca.pem")), None),
        )
        .err()
        .unwrap_or_else(|| panic!("verify-full accepted a certificate of an unknown CA"));
    assert!(wrong.contains("UnknownIssuer"), "{wrong}");
    let wrong = f
        .open(
            &by_ip,
            &settings("require", Some(f.file("other-ca.pem")), None),
        )
        .err()
        .unwrap_or_else(|| panic!("require with a CA file did not check the chain"));
    assert!(wrong.contains("UnknownIssuer"), "{wrong}");

    // hostssl only: a plaintext client is refused.
    let plain = f
        .open(&by_ip, &TlsSettings::default())
        .err()
        .unwrap_or_else(|| panic!("a plaintext connection was accepted by hostssl only"));
    assert!(plain.contains("no encryption"), "{plain}");

    // Certificate authentication (mutual TLS): with the client certificate,
    // from the configuration or the URI, it connects as its CN...
    let cert_db = f.uri("localhost", "template1", "");
    let mutual = f
        .open(
            &cert_db,
            &settings("verify-full", ca(), Some(f.file("client.pem"))),
        )
        .unwrap_or_else(|e| panic!("mutual TLS: {e}"));
    let dn = mutual
        .query_text("SELECT client_dn FROM pg_stat_ssl WHERE pid = pg_backend_pid()")
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(dn, format!("/CN={USER}"));
    let client = f.file("client.pem").display().to_string();
    let by_uri = f.uri(
        "localhost",
        "template1",
        &format!("sslmode=require&sslcert={client}&sslkey={client}"),
    );
    f.open(&by_uri, &TlsSettings::default())
        .unwrap_or_else(|e| panic!("sslcert/sslkey: {e}"));
    // ...and without it is refused.
    let anonymous = f
        .open(&cert_db, &settings("verify-full", ca(), None))
        .err()
        .unwrap_or_else(|| panic!("certificate authentication passed without a certificate"));
    assert!(anonymous.contains("certificate"), "{anonymous}");
}

/// Against a PostgreSQL without TLS (the shared test cluster): `prefer`
/// falls back to plaintext, as libpq's; `require` refuses to.
#[test]
fn prefer_falls_back_where_require_refuses() {
    let Some(cluster) = TestCluster::shared() else {
        return;
    };
    let uri = cluster.fresh_schema_uri();
    let prefer = PostgresEngine::open_with_tls(&uri, 2, &settings("prefer", None, None))
        .unwrap_or_else(|e| panic!("prefer: {e}"));
    assert_eq!(ssl_of(&prefer), "false");
    let Err(e) = PostgresEngine::open_with_tls(&uri, 2, &settings("require", None, None)) else {
        panic!("require connected without TLS")
    };
    assert!(e.to_string().contains("server does not support TLS"), "{e}");
}
