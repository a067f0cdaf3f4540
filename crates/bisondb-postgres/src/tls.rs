//! TLS from the engine to the store, with libpq's `sslmode` semantics:
//!
//! | mode | TLS | the server's certificate |
//! |---|---|---|
//! | `disable` | never | - |
//! | `prefer` | if the server offers it, else plaintext | as `require` |
//! | `require` | always | not checked; with a CA file, its chain is (as libpq) |
//! | `verify-ca` | always | chain to the CA file |
//! | `verify-full` | always | chain to the CA file, and the host name (or IP) it was reached by |
//!
//! The settings come from the URI (`sslmode`, `sslrootcert`, `sslcert`,
//! `sslkey`: libpq's names, which `tokio-postgres`'s parser mostly does not
//! know, so [`resolve`] takes them off the URI before handing it over) or
//! from the configuration (`storage.postgres.tlsMode`, `tlsCAFile`,
//! `tlsCertificateKeyFile`, [`TlsSettings`]); the same setting given both
//! ways differently is refused, so a server never runs with a setting its
//! operator did not mean. Unlike libpq nothing is read from `~/.postgresql`
//! or `PG*` variables: what is not configured is not used, and the default
//! is `disable`, the engine's behaviour before TLS.
//!
//! The TLS is `rustls` with the `ring` provider (the listeners' own, no C
//! toolchain), through `tokio-postgres-rustls` (MIT), which also gives
//! SCRAM's `tls-server-end-point` channel binding.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use bisondb_engine::EngineError;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use tokio_postgres::config::SslMode;
use tokio_postgres_rustls::MakeRustlsConnect;

/// libpq's `sslmode` values (`allow`, which tries plaintext first, is not
/// offered: it only ever downgrades).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl TlsMode {
    /// Every mode, by its name.
    pub const ALL: [TlsMode; 5] = [
        TlsMode::Disable,
        TlsMode::Prefer,
        TlsMode::Require,
        TlsMode::VerifyCa,
        TlsMode::VerifyFull,
    ];

    /// The mode `name` (libpq's spelling), or a message naming the modes.
    pub fn parse(name: &str) -> Result<TlsMode, String> {
        TlsMode::ALL
            .into_iter()
            .find(|m| m.name() == name)
            .ok_or_else(|| {
                format!(
                    "'{name}' is not a TLS mode of the postgres engine (one of disable, prefer, \
                     require, verify-ca, verify-full)"
                )
            })
    }

    /// libpq's name of the mode.
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disable => "disable",
            TlsMode::Prefer => "prefer",
            TlsMode::Require => "require",
            TlsMode::VerifyCa => "verify-ca",
            TlsMode::VerifyFull => "verify-full",
        }
    }
}

/// The TLS settings given beside the URI (`storage.postgres.tls*`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `storage.postgres.tlsMode`, a libpq `sslmode` value.
    pub mode: Option<String>,
    /// `storage.postgres.tlsCAFile`: the PEM certificates the store's
    /// certificate must chain to (libpq's `sslrootcert`).
    pub ca_file: Option<PathBuf>,
    /// `storage.postgres.tlsCertificateKeyFile`: one PEM file with the
    /// engine's client certificate (chain) and its private key, for stores
    /// that ask for one (`hostssl ... cert` in `pg_hba.conf`).
    pub certificate_key_file: Option<PathBuf>,
}

/// What [`resolve`] made of a URI and the settings: the connection
/// configuration for `tokio-postgres` and how to secure it.
#[derive(Debug, Clone)]
pub struct Resolved {
    pub config: tokio_postgres::Config,
    pub mode: TlsMode,
    pub ca_file: Option<PathBuf>,
    /// The client certificate's file and its key's (often the same file).
    pub client_cert: Option<(PathBuf, PathBuf)>,
}

/// The connector for a [`Resolved`] configuration: `None` for `disable`.
pub type Connector = Option<MakeRustlsConnect>;

fn invalid(message: impl Into<String>) -> EngineError {
    EngineError::InvalidArgument(message.into())
}

/// libpq's TLS parameters that this engine does not implement: refused by
/// name rather than as `tokio-postgres`'s "unknown option".
const UNIMPLEMENTED: &[&str] = &[
    "sslcrl",
    "sslcrldir",
    "sslpassword",
    "sslcertmode",
    "sslcompression",
    "sslsni",
    "ssl_min_protocol_version",
    "ssl_max_protocol_version",
    "requiressl",
];

/// The URI's TLS parameters, taken off it.
#[derive(Debug, Default)]
struct UriTls {
    mode: Option<String>,
    root_cert: Option<String>,
    cert: Option<String>,
    key: Option<String>,
}

/// Takes libpq's TLS parameters off a `postgresql://` URI, returning the
/// rest (for `tokio-postgres`) and the parameters, decoded.
fn split_uri(uri: &str) -> Result<(String, UriTls), EngineError> {
    let mut tls = UriTls::default();
    let is_url = uri.starts_with("postgresql://") || uri.starts_with("postgres://");
    if !is_url {
        // The `key=value` form: its quoting rules are not worth a second
        // parser; the URI form or the configuration keys carry TLS.
        let names = ["sslmode", "sslrootcert", "sslcert", "sslkey"];
        if uri
            .split_whitespace()
            .filter_map(|t| t.split('=').next())
            .any(|k| names.contains(&k) || UNIMPLEMENTED.contains(&k))
        {
            return Err(invalid(
                "--postgresUri: TLS parameters are read from the postgresql://... URI form \
                 only; use it, or storage.postgres.tlsMode / tlsCAFile / \
                 tlsCertificateKeyFile",
            ));
        }
        return Ok((uri.to_string(), tls));
    }
    // tokio-postgres reads the credentials up to the first '@', then the
    // host up to '/' or '?': the query starts at the first '?' after that.
    let after_scheme = uri.find("://").map_or(0, |i| i + 3);
    let start = uri[after_scheme..]
        .find('@')
        .map_or(after_scheme, |i| after_scheme + i + 1);
    let Some(q) = uri[start..].find('?').map(|i| start + i) else {
        return Ok((uri.to_string(), tls));
    };
    let mut kept = Vec::new();
    for pair in uri[q + 1..].split('&') {
        let (raw_key, raw_value) = pair.split_once('=').unwrap_or((pair, ""));
        let key = decode(raw_key)?;
        let slot = match key.as_str() {
            "sslmode" => &mut tls.mode,
            "sslrootcert" => &mut tls.root_cert,
            "sslcert" => &mut tls.cert,
            "sslkey" => &mut tls.key,
            k if UNIMPLEMENTED.contains(&k) => {
                return Err(invalid(format!(
                    "--postgresUri: '{k}' is not implemented by the postgres engine's TLS \
                     (sslmode, sslrootcert, sslcert and sslkey are)"
                )))
            }
            _ => {
                kept.push(pair);
                continue;
            }
        };
        if slot.is_some() {
            return Err(invalid(format!("--postgresUri gives '{key}' twice")));
        }
        *slot = Some(decode(raw_value)?);
    }
    let mut rest = uri[..q].to_string();
    if !kept.is_empty() {
        rest.push('?');
        rest.push_str(&kept.join("&"));
    }
    Ok((rest, tls))
}

fn decode(s: &str) -> Result<String, EngineError> {
    percent_encoding::percent_decode_str(s)
        .decode_utf8()
        .map(|c| c.into_owned())
        .map_err(|_| invalid("--postgresUri: a parameter is not UTF-8 once decoded"))
}

/// One setting given by the URI, the configuration, both (equal) or none.
fn merge<T: PartialEq + std::fmt::Debug>(
    uri: Option<T>,
    config: Option<T>,
    uri_name: &str,
    config_name: &str,
    shown: impl Fn(&T) -> String,
) -> Result<Option<T>, EngineError> {
    match (uri, config) {
        (Some(u), Some(c)) if u != c => Err(invalid(format!(
            "the TLS settings to PostgreSQL conflict: --postgresUri says {uri_name}={} but \
             storage.postgres.{config_name} is '{}'; give it in one place",
            shown(&u),
            shown(&c)
        ))),
        (u, c) => Ok(u.or(c)),
    }
}

/// Parses `uri` and merges its TLS parameters with `settings`, refusing
/// unknown modes, conflicts and files a mode cannot use. Reads no file.
pub fn resolve(uri: &str, settings: &TlsSettings) -> Result<Resolved, EngineError> {
    let (rest, from_uri) = split_uri(uri)?;
    let mut config: tokio_postgres::Config = rest.parse().map_err(|e| {
        invalid(format!(
            "--postgresUri is not a PostgreSQL connection URI: {e}"
        ))
    })?;
    let mode = merge(
        from_uri.mode,
        settings.mode.clone(),
        "sslmode",
        "tlsMode",
        |s| s.clone(),
    )?;
    let mode = match mode {
        Some(name) => {
            TlsMode::parse(&name).map_err(|e| invalid(format!("sslmode / tlsMode: {e}")))?
        }
        None => TlsMode::Disable,
    };
    let ca_file = merge(
        from_uri.root_cert.map(PathBuf::from),
        settings.ca_file.clone(),
        "sslrootcert",
        "tlsCAFile",
        |p| p.display().to_string(),
    )?;
    if ca_file.as_deref() == Some(Path::new("system")) {
        return Err(invalid(
            "sslrootcert=system (the system's trust store) is not implemented by the postgres \
             engine: give the CA's PEM file",
        ));
    }
    let client_cert = match (from_uri.cert, from_uri.key, &settings.certificate_key_file) {
        (None, None, None) => None,
        (None, None, Some(both)) => Some((both.clone(), both.clone())),
        (None, Some(_), _) => {
            return Err(invalid(
                "--postgresUri gives sslkey without sslcert: give the client certificate too",
            ))
        }
        (Some(cert), key, file) => {
            let cert = PathBuf::from(cert);
            let key = key.map_or_else(|| cert.clone(), PathBuf::from);
            if let Some(file) = file {
                if *file != cert || *file != key {
                    return Err(invalid(format!(
                        "the TLS settings to PostgreSQL conflict: --postgresUri gives the client \
                         certificate {} (key {}) but storage.postgres.tlsCertificateKeyFile is \
                         '{}'; give it in one place",
                        cert.display(),
                        key.display(),
                        file.display()
                    )));
                }
            }
            Some((cert, key))
        }
    };
    match mode {
        TlsMode::Disable if ca_file.is_some() || client_cert.is_some() => {
            return Err(invalid(
                "a CA file or client certificate for PostgreSQL is given but TLS is disabled: \
                 set storage.postgres.tlsMode (or sslmode in --postgresUri) to verify-full, \
                 verify-ca, require or prefer, or remove the files",
            ))
        }
        TlsMode::VerifyCa | TlsMode::VerifyFull if ca_file.is_none() => {
            return Err(invalid(format!(
                "TLS mode {} checks the PostgreSQL server's certificate against a CA: give \
                 storage.postgres.tlsCAFile (or sslrootcert in --postgresUri)",
                mode.name()
            )))
        }
        _ => {}
    }
    config.ssl_mode(match mode {
        TlsMode::Disable => SslMode::Disable,
        TlsMode::Prefer => SslMode::Prefer,
        TlsMode::Require | TlsMode::VerifyCa | TlsMode::VerifyFull => SslMode::Require,
    });
    Ok(Resolved {
        config,
        mode,
        ca_file,
        client_cert,
    })
}

/// The rustls connector for `resolved` (reading its files), or `None`
/// for `disable`.
pub fn connector(resolved: &Resolved) -> Result<Connector, EngineError> {
    if resolved.mode == TlsMode::Disable {
        return Ok(None);
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| invalid(format!("TLS to PostgreSQL: {e}")))?;
    let roots = resolved.ca_file.as_deref().map(load_roots).transpose()?;
    let builder = match (resolved.mode, roots) {
        (TlsMode::VerifyFull, Some(roots)) => builder.with_root_certificates(roots),
        (_, Some(roots)) => {
            let chain = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| invalid(format!("TLS to PostgreSQL: the CA file: {e}")))?;
            builder
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(ChainOnly(chain)))
        }
        // `resolve` refused verify-* without a CA.
        (_, None) => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(EncryptOnly(provider))),
    };
    let mut config = match &resolved.client_cert {
        None => builder.with_no_client_auth(),
        Some((cert, key)) => {
            let chain = load_certs(cert, "the client certificate")?;
            let key = PrivateKeyDer::from_pem_file(key).map_err(|e| {
                invalid(format!(
                    "TLS to PostgreSQL: no private key read from {}: {e}",
                    key.display()
                ))
            })?;
            builder
                .with_client_auth_cert(chain, key)
                .map_err(|e| invalid(format!("TLS to PostgreSQL: the client certificate: {e}")))?
        }
    };
    // PostgreSQL 17's direct TLS (`sslnegotiation=direct`) requires this
    // ALPN, as libpq 17 sends it; older servers ignore it.
    config.alpn_protocols = vec![b"postgresql".to_vec()];
    Ok(Some(MakeRustlsConnect::new(config)))
}

fn load_certs(path: &Path, what: &str) -> Result<Vec<CertificateDer<'static>>, EngineError> {
    let shown = path.display();
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|i| i.collect::<Result<Vec<_>, _>>())
        .map_err(|e| invalid(format!("TLS to PostgreSQL: reading {what} {shown}: {e}")))?;
    if certs.is_empty() {
        return Err(invalid(format!(
            "TLS to PostgreSQL: {what} {shown} holds no PEM certificate"
        )));
    }
    Ok(certs)
}

fn load_roots(path: &Path) -> Result<RootCertStore, EngineError> {
    let mut roots = RootCertStore::empty();
    for cert in load_certs(path, "the CA file")? {
        roots.add(cert).map_err(|e| {
            invalid(format!(
                "TLS to PostgreSQL: the CA file {}: {e}",
                path.display()
            ))
        })?;
    }
    Ok(roots)
}

/// `verify-ca` (and `prefer`/`require` with a CA): the chain is checked,
/// the name is not. rustls checks the name after the chain, so a name
/// mismatch means the chain passed.
#[derive(Debug)]
struct ChainOnly(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// `require`/`prefer` without a CA (libpq's meaning): encrypted, the
/// certificate taken as it comes; the handshake's signatures are still
/// checked against it, so the session is with the certificate's holder.
#[derive(Debug)]
struct EncryptOnly(Arc<CryptoProvider>);

impl ServerCertVerifier for EncryptOnly {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod unit {
    use super::*;

    fn settings(mode: Option<&str>, ca: Option<&str>, pair: Option<&str>) -> TlsSettings {
        TlsSettings {
            mode: mode.map(str::to_string),
            ca_file: ca.map(PathBuf::from),
            certificate_key_file: pair.map(PathBuf::from),
        }
    }

    fn message(uri: &str, s: &TlsSettings) -> String {
        match resolve(uri, s) {
            Ok(r) => panic!("{uri} with {s:?} resolved to {:?}", r.mode),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn splits_libpq_parameters_off_the_uri() {
        let r = resolve(
            "postgresql://u:p%3F@h:5/db?application_name=x&sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.pem&sslcert=/c.pem&sslkey=/k.pem&connect_timeout=5",
            &TlsSettings::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(r.mode, TlsMode::VerifyFull);
        assert_eq!(r.ca_file, Some(PathBuf::from("/tmp/ca.pem")));
        assert_eq!(
            r.client_cert,
            Some((PathBuf::from("/c.pem"), PathBuf::from("/k.pem")))
        );
        assert_eq!(r.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(r.config.get_application_name(), Some("x"));
        assert_eq!(r.config.get_dbname(), Some("db"));
        assert_eq!(r.config.get_password(), Some(&b"p?"[..]));
        // No TLS parameter: disable, as before TLS existed.
        let plain = resolve("postgresql://u@h/db", &TlsSettings::default())
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plain.mode, TlsMode::Disable);
        assert_eq!(plain.config.get_ssl_mode(), SslMode::Disable);
        // The configuration alone; the URI's and the configuration's equal.
        for uri in ["postgresql://u@h/db", "postgresql://u@h/db?sslmode=require"] {
            let r = resolve(uri, &settings(Some("require"), None, None))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(r.mode, TlsMode::Require);
        }
        let pair = resolve(
            "postgresql://u@h/db?sslmode=prefer",
            &settings(None, None, Some("/both.pem")),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(pair.config.get_ssl_mode(), SslMode::Prefer);
        assert_eq!(
            pair.client_cert,
            Some((PathBuf::from("/both.pem"), PathBuf::from("/both.pem")))
        );
    }

    #[test]
    fn refuses_unknown_conflicting_and_useless_settings() {
        let none = TlsSettings::default();
        let cases: &[(&str, TlsSettings, &str)] = &[
            ("postgresql://h/db?sslmode=allow", none.clone(), "not a TLS mode"),
            ("postgresql://h/db", settings(Some("on"), None, None), "'on' is not a TLS mode"),
            (
                "postgresql://h/db?sslmode=require",
                settings(Some("verify-full"), Some("/ca"), None),
                "conflict: --postgresUri says sslmode=require but storage.postgres.tlsMode is 'verify-full'",
            ),
            (
                "postgresql://h/db?sslrootcert=/a",
                settings(Some("verify-ca"), Some("/b"), None),
                "sslrootcert=/a but storage.postgres.tlsCAFile is '/b'",
            ),
            (
                "postgresql://h/db?sslcert=/a",
                settings(Some("require"), None, Some("/b")),
                "tlsCertificateKeyFile is '/b'",
            ),
            ("postgresql://h/db?sslmode=verify-full", none.clone(), "give storage.postgres.tlsCAFile"),
            ("postgresql://h/db", settings(None, Some("/ca"), None), "TLS is disabled"),
            ("postgresql://h/db?sslkey=/k&sslmode=require", none.clone(), "sslkey without sslcert"),
            ("postgresql://h/db?sslcrl=/crl", none.clone(), "'sslcrl' is not implemented"),
            ("postgresql://h/db?sslmode=require&sslmode=disable", none.clone(), "twice"),
            (
                "postgresql://h/db?sslmode=verify-ca&sslrootcert=system",
                none.clone(),
                "sslrootcert=system",
            ),
            ("host=h sslmode=require", none.clone(), "URI form only"),
        ];
        for (uri, s, expected) in cases {
            let got = message(uri, s);
            assert!(got.contains(expected), "{uri} {s:?}: {got}");
        }
    }

    #[test]
    fn reports_missing_files() {
        let r = resolve(
            "postgresql://h/db?sslmode=verify-full&sslrootcert=/nonexistent/ca.pem",
            &TlsSettings::default(),
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let Err(e) = connector(&r) else {
            panic!("a missing CA file was accepted")
        };
        assert!(
            e.to_string()
                .contains("reading the CA file /nonexistent/ca.pem"),
            "{e}"
        );
    }
}
