//! Transport security: TLS on the TCP listeners (rustls), the key file, and the
//! client certificate MONGODB-X509 authenticates with.
//!
//! [`settings`] owns the options as mongod spells them; [`Security::load`]
//! reads the files they name once at start-up (every refusal names the file);
//! [`accept`] takes one accepted TCP connection: under `allowTLS` and
//! `preferTLS` it tells a TLS ClientHello (first byte 0x16, a handshake record)
//! from a plain MongoDB message as mongod does, under `requireTLS` it closes a
//! plaintext connection with mongod's error; `server.rs` then serves the
//! (decrypted) stream. The Unix socket stays plaintext, as in mongod.

pub mod key_file;
pub mod settings;
pub mod subject;

use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bisondb_error::{ErrorCode, MongoError, MongoResult};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::server::WebPkiClientVerifier;
use tokio::net::TcpStream;

use crate::config::ServerConfig;
use crate::state::ServerState;
pub use key_file::KeyFile;
pub use settings::{ClusterAuthMode, TlsMode, TlsProtocol, TlsSettings};

/// mongod's log id for "Error receiving request from client. Ending connection
/// from remote" (a plaintext client on a `requireTLS` port, a failed handshake).
const LOG_RECEIVE_ERROR: u64 = 22988;
/// mongod's code for a failed TLS handshake.
const SSL_HANDSHAKE_FAILED: i32 = 141;
/// mongod's code for a TLS configuration it cannot start with.
const INVALID_SSL_CONFIGURATION: i32 = 140;

/// What start-up loaded for transport security, kept in the server state.
#[derive(Default)]
pub struct Security {
    /// The TLS acceptor, when `tlsMode` is not `disabled`.
    pub tls: Option<Arc<TlsServer>>,
    /// The validated `--keyFile`: the replica-set code signs `$clusterTime`
    /// with [`KeyFile::key`].
    pub key_file: Option<KeyFile>,
    /// Connections by negotiated TLS version (serverStatus `transportSecurity`).
    pub counters: TransportCounters,
}

/// serverStatus `transportSecurity`: TLS connections by protocol version.
#[derive(Default)]
pub struct TransportCounters {
    pub tls12: AtomicU64,
    pub tls13: AtomicU64,
    pub unknown: AtomicU64,
}

impl TransportCounters {
    /// The serverStatus section, in mongod's shape.
    pub fn to_document(&self) -> bson::Document {
        let n = |c: &AtomicU64| i64::try_from(c.load(Ordering::Relaxed)).unwrap_or(i64::MAX);
        bson::doc! {
            "1.0": 0_i64,
            "1.1": 0_i64,
            "1.2": n(&self.tls12),
            "1.3": n(&self.tls13),
            "unknown": n(&self.unknown),
        }
    }
}

impl Security {
    /// Reads the key file and the TLS files the configuration names; any
    /// problem stops start-up with a message naming the file.
    pub fn load(config: &ServerConfig) -> MongoResult<Security> {
        let key_file = config.key_file.as_deref().map(KeyFile::load).transpose()?;
        let tls = if config.tls.mode == TlsMode::Disabled {
            None
        } else {
            Some(Arc::new(TlsServer::load(&config.tls)?))
        };
        if config.tls.used_ssl_aliases {
            tracing::warn!(target: "CONTROL", id = 23322u64,
                "Option: The sslMode and net.ssl options are deprecated. Use tlsMode and net.tls instead.");
        }
        Ok(Security {
            tls,
            key_file,
            counters: TransportCounters::default(),
        })
    }
}

/// The listeners' TLS: the acceptor and what a connection needs to judge its
/// client's certificate.
pub struct TlsServer {
    pub mode: TlsMode,
    acceptor: tokio_rustls::TlsAcceptor,
    /// The strict verifier (with a CA file): under
    /// `tlsAllowInvalidCertificates` the handshake accepts any certificate,
    /// and this tells afterwards whether the one presented was valid.
    verifier: Option<Arc<dyn ClientCertVerifier>>,
    allow_invalid: bool,
    /// The server certificate's subject (serverStatus `security`).
    pub server_subject: String,
    pub has_ca: bool,
    /// The server certificate's `notAfter`, milliseconds since the epoch.
    pub server_not_after_ms: i64,
}

/// What a connection learned in its TLS handshake.
#[derive(Debug, Clone, Default)]
pub struct PeerTls {
    /// `"1.2"` or `"1.3"`.
    pub version: &'static str,
    /// The client certificate's subject in RFC 2253 form, when the client
    /// presented a certificate that was verified against `tlsCAFile`.
    pub client_subject: Option<String>,
}

fn tls_error(msg: String) -> MongoError {
    MongoError::new(ErrorCode::Other(INVALID_SSL_CONFIGURATION), msg)
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

impl TlsServer {
    /// Builds the acceptor from the settings' files.
    pub fn load(s: &TlsSettings) -> MongoResult<TlsServer> {
        let Some(pem_path) = s.certificate_key_file.as_deref() else {
            return Err(tls_error(
                "need tlsCertificateKeyFile or certificateSelector when TLS is enabled".into(),
            ));
        };
        let (chain, key) =
            read_certificate_key_file(pem_path, s.certificate_key_file_password.as_deref())?;
        let (server_subject, server_not_after_ms) = certificate_facts(&chain[0]);
        let (verifier, has_ca) = match s.ca_file.as_deref() {
            None => (None, false),
            Some(ca) => {
                let roots = read_ca_file(ca)?;
                let builder =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider());
                let builder = if s.allow_connections_without_certificates {
                    builder.allow_unauthenticated()
                } else {
                    builder
                };
                let v = builder.build().map_err(|e| {
                    tls_error(format!("cannot use the CA file {}: {e}", ca.display()))
                })?;
                (Some(v), true)
            }
        };
        let versions: Vec<&'static rustls::SupportedProtocolVersion> = [
            (TlsProtocol::Tls12, &rustls::version::TLS12),
            (TlsProtocol::Tls13, &rustls::version::TLS13),
        ]
        .into_iter()
        .filter(|(p, _)| !s.disabled_protocols.contains(p))
        .map(|(_, v)| v)
        .collect();
        if versions.is_empty() {
            return Err(tls_error(
                "tlsDisabledProtocols leaves no protocol to offer: BisonDB's TLS (rustls) supports TLS 1.2 and TLS 1.3 only".into(),
            ));
        }
        let builder = rustls::ServerConfig::builder_with_provider(provider())
            .with_protocol_versions(&versions)
            .map_err(|e| tls_error(format!("TLS protocol versions: {e}")))?;
        let builder = match &verifier {
            None => builder.with_no_client_auth(),
            Some(v) if s.allow_invalid_certificates => {
                builder.with_client_cert_verifier(Arc::new(AcceptInvalid(v.clone())))
            }
            Some(v) => builder.with_client_cert_verifier(v.clone()),
        };
        let config = builder.with_single_cert(chain, key).map_err(|e| {
            tls_error(format!(
                "the certificate and key in {} cannot be used: {e}",
                pem_path.display()
            ))
        })?;
        Ok(TlsServer {
            mode: s.mode,
            acceptor: tokio_rustls::TlsAcceptor::from(Arc::new(config)),
            verifier,
            allow_invalid: s.allow_invalid_certificates,
            server_subject,
            has_ca,
            server_not_after_ms,
        })
    }

    /// The serverStatus `security` fields mongod shows for TLS.
    pub fn status_fields(&self) -> bson::Document {
        bson::doc! {
            "SSLServerSubjectName": &self.server_subject,
            "SSLServerHasCertificateAuthority": self.has_ca,
            "SSLServerCertificateExpirationDate": bson::DateTime::from_millis(self.server_not_after_ms),
        }
    }

    /// What the handshake established about the client.
    fn peer_info(&self, conn: &rustls::ServerConnection, peer: &str) -> PeerTls {
        let version = match conn.protocol_version() {
            Some(rustls::ProtocolVersion::TLSv1_3) => "1.3",
            Some(rustls::ProtocolVersion::TLSv1_2) => "1.2",
            _ => "unknown",
        };
        let mut client_subject = None;
        if let (Some(chain), Some(verifier)) = (conn.peer_certificates(), &self.verifier) {
            if let Some((end, intermediates)) = chain.split_first() {
                // Under tlsAllowInvalidCertificates the handshake let any
                // certificate through: as mongod, an invalid one is logged
                // and gives the connection no subject (so no X.509 user).
                let valid = !self.allow_invalid
                    || match verifier.verify_client_cert(end, intermediates, UnixTime::now()) {
                        Ok(_) => true,
                        Err(e) => {
                            tracing::warn!(target: "NETWORK", id = 22990u64, remote = %peer, error = %e,
                                "SSL peer certificate validation failed");
                            false
                        }
                    };
                if valid {
                    client_subject = subject::subject_rfc2253(end);
                }
            }
        }
        PeerTls {
            version,
            client_subject,
        }
    }
}

/// The client verifier under `tlsAllowInvalidCertificates`: asks for a
/// certificate as the strict one does, accepts any (the handshake's own
/// signatures are still checked, so the client holds the key).
#[derive(Debug)]
struct AcceptInvalid(Arc<dyn ClientCertVerifier>);

impl ClientCertVerifier for AcceptInvalid {
    fn offer_client_auth(&self) -> bool {
        self.0.offer_client_auth()
    }

    fn client_auth_mandatory(&self) -> bool {
        self.0.client_auth_mandatory()
    }

    fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
        self.0.root_hint_subjects()
    }

    fn verify_client_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

/// The subject and `notAfter` of the server's own certificate.
fn certificate_facts(der: &CertificateDer<'_>) -> (String, i64) {
    use x509_cert::der::Decode;
    match x509_cert::Certificate::from_der(der) {
        Ok(cert) => {
            let not_after = cert.tbs_certificate.validity.not_after.to_unix_duration();
            (
                subject::name_rfc2253(&cert.tbs_certificate.subject),
                i64::try_from(not_after.as_millis()).unwrap_or(i64::MAX),
            )
        }
        Err(_) => (String::new(), 0),
    }
}

fn read_file(path: &Path, what: &str) -> MongoResult<Vec<u8>> {
    std::fs::read(path)
        .map_err(|e| tls_error(format!("cannot read {what} file: {}: {e}", path.display())))
}

/// Reads `--tlsCertificateKeyFile`: the certificate chain (server first) and
/// its key, decrypting an `ENCRYPTED PRIVATE KEY` with `password`.
fn read_certificate_key_file(
    path: &Path,
    password: Option<&str>,
) -> MongoResult<(Vec<CertificateDer<'static>>, PrivateKeyDer<'static>)> {
    let shown = path.display();
    let bytes = read_file(path, "certificate key")?;
    let chain = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(format!("cannot read certificate file: {shown}: {e}")))?;
    if chain.is_empty() {
        return Err(tls_error(format!(
            "cannot read certificate file: {shown}: no CERTIFICATE section"
        )));
    }
    let text = String::from_utf8_lossy(&bytes);
    if text.contains("Proc-Type: 4,ENCRYPTED") {
        return Err(tls_error(format!(
            "Could not read private key attached to {shown}: legacy OpenSSL-encrypted PEM keys are not supported; convert the key to encrypted PKCS#8 (openssl pkcs8 -topk8 -v2 aes-256-cbc)"
        )));
    }
    let key = if let Some(block) = pem_block(&text, "ENCRYPTED PRIVATE KEY") {
        let Some(password) = password else {
            return Err(tls_error(format!(
                "Could not read private key attached to {shown}: the key is encrypted and no tlsCertificateKeyFilePassword was given"
            )));
        };
        decrypt_pkcs8(block, password).map_err(|e| {
            tls_error(format!(
                "Could not read private key attached to {shown}: {e}"
            ))
        })?
    } else {
        PrivateKeyDer::from_pem_slice(&bytes).map_err(|e| {
            tls_error(format!(
                "Could not read private key attached to {shown}: {e}"
            ))
        })?
    };
    Ok((chain, key))
}

/// The first PEM block labelled `label`, armour included.
fn pem_block<'a>(text: &'a str, label: &str) -> Option<&'a str> {
    let begin = format!("-----BEGIN {label}-----");
    let end = format!("-----END {label}-----");
    let start = text.find(&begin)?;
    let stop = text[start..].find(&end)? + start + end.len();
    Some(&text[start..stop])
}

fn decrypt_pkcs8(pem: &str, password: &str) -> Result<PrivateKeyDer<'static>, String> {
    use pkcs8::der::Decode;
    let (_, doc) = pkcs8::der::Document::from_pem(pem).map_err(|e| e.to_string())?;
    let info =
        pkcs8::EncryptedPrivateKeyInfo::from_der(doc.as_bytes()).map_err(|e| e.to_string())?;
    let plain = info.decrypt(password).map_err(|_| {
        "the key cannot be decrypted with tlsCertificateKeyFilePassword".to_string()
    })?;
    Ok(PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(
        plain.as_bytes().to_vec(),
    )))
}

/// Reads `--tlsCAFile` into a root store.
fn read_ca_file(path: &Path) -> MongoResult<rustls::RootCertStore> {
    let shown = path.display();
    let bytes = read_file(path, "CA")?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| tls_error(format!("cannot read CA file: {shown}: {e}")))?;
    if certs.is_empty() {
        return Err(tls_error(format!(
            "cannot read CA file: {shown}: no CERTIFICATE section"
        )));
    }
    let mut roots = rustls::RootCertStore::empty();
    for c in certs {
        roots
            .add(c)
            .map_err(|e| tls_error(format!("cannot use CA file {shown}: {e}")))?;
    }
    Ok(roots)
}

/// A TCP connection of a listener with TLS, once [`accept`] has told what
/// it speaks.
pub enum Accepted {
    /// A plain MongoDB client (`allowTLS`, `preferTLS`).
    Plain(TcpStream),
    /// A completed TLS handshake.
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>, PeerTls),
}

/// Tells a TLS ClientHello from a plain MongoDB message on a listener with TLS
/// and runs the handshake; `None` when the connection is to be closed (a
/// plaintext client under `requireTLS`, a failed or stalled handshake), with
/// mongod's log line.
pub async fn accept(
    stream: TcpStream,
    state: &ServerState,
    peer: &str,
    tls: &TlsServer,
) -> Option<Accepted> {
    let limit = match state.config.incomplete_message_timeout_ms {
        0 => None,
        ms => Some(Duration::from_millis(ms)),
    };
    // Closed, failed or silent past the limit before sending anything: drop it.
    let first = bounded(limit, peek_first_byte(&stream)).await.flatten()?;
    // A TLS record of type handshake (22) starts every ClientHello; a MongoDB
    // message starts with its little-endian length.
    if first != 0x16 {
        if tls.mode == TlsMode::Require {
            log_receive_error(
                peer,
                "The server is configured to only allow SSL connections",
            );
            return None;
        }
        return Some(Accepted::Plain(stream));
    }
    let accepted = match bounded(limit, tls.acceptor.accept(stream)).await {
        Some(Ok(s)) => s,
        Some(Err(e)) => {
            log_receive_error(peer, &format!("SSL handshake failed: {e}"));
            return None;
        }
        None => {
            log_receive_error(peer, "SSL handshake timed out");
            return None;
        }
    };
    let info = tls.peer_info(accepted.get_ref().1, peer);
    if let Some(security) = state.security.get() {
        let c = &security.counters;
        let counter = match info.version {
            "1.3" => &c.tls13,
            "1.2" => &c.tls12,
            _ => &c.unknown,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }
    Some(Accepted::Tls(Box::new(accepted), info))
}

async fn bounded<T>(limit: Option<Duration>, f: impl std::future::Future<Output = T>) -> Option<T> {
    match limit {
        Some(d) => tokio::time::timeout(d, f).await.ok(),
        None => Some(f.await),
    }
}

async fn peek_first_byte(stream: &TcpStream) -> Option<u8> {
    let mut b = [0u8; 1];
    match stream.peek(&mut b).await {
        Ok(1) => Some(b[0]),
        _ => None,
    }
}

fn log_receive_error(peer: &str, errmsg: &str) {
    tracing::error!(target: "NETWORK", id = LOG_RECEIVE_ERROR, remote = %peer,
        error = ?crate::log::Json(serde_json::json!({
            "code": SSL_HANDSHAKE_FAILED, "codeName": "SSLHandshakeFailed", "errmsg": errmsg,
        })),
        "Error receiving request from client. Ending connection from remote");
}

/// `net.tls` of getCmdLineOpts' `parsed` (and the start-up options line), the
/// password shown as mongod shows it; `None` with TLS disabled and no option.
pub fn parsed_tls_options(c: &ServerConfig) -> Option<bson::Document> {
    let t = &c.tls;
    if t.mode == TlsMode::Disabled && !t.options_given {
        return None;
    }
    let mut d = bson::doc! {"mode": t.mode.name()};
    if let Some(p) = &t.certificate_key_file {
        d.insert("certificateKeyFile", p.display().to_string());
    }
    if t.certificate_key_file_password.is_some() {
        d.insert("certificateKeyFilePassword", "<password>");
    }
    if let Some(p) = &t.ca_file {
        d.insert("CAFile", p.display().to_string());
    }
    for (name, on) in [
        (
            "allowConnectionsWithoutCertificates",
            t.allow_connections_without_certificates,
        ),
        ("allowInvalidCertificates", t.allow_invalid_certificates),
        ("allowInvalidHostnames", t.allow_invalid_hostnames),
    ] {
        if on {
            d.insert(name, true);
        }
    }
    if !t.disabled_protocols.is_empty() {
        let names: Vec<&str> = t
            .disabled_protocols
            .iter()
            .map(|p| match p {
                TlsProtocol::Tls10 => "TLS1_0",
                TlsProtocol::Tls11 => "TLS1_1",
                TlsProtocol::Tls12 => "TLS1_2",
                TlsProtocol::Tls13 => "TLS1_3",
            })
            .collect();
        d.insert("disabledProtocols", names.join(","));
    }
    Some(d)
}

/// `security.keyFile` and `security.clusterAuthMode` of getCmdLineOpts' `parsed`.
pub fn parsed_security_options(c: &ServerConfig) -> bson::Document {
    let mut d = bson::Document::new();
    if let Some(k) = &c.key_file {
        d.insert("keyFile", k.display().to_string());
    }
    if let Some(m) = c.cluster_auth_mode {
        d.insert("clusterAuthMode", m.name());
    }
    d
}

/// The command line with the values of password options replaced by
/// `<password>`, as mongod's getCmdLineOpts shows it.
pub fn redact_argv(argv: &[String]) -> Vec<String> {
    const SECRET: [&str; 2] = ["--tlsCertificateKeyFilePassword", "--sslPEMKeyPassword"];
    let mut out = Vec::with_capacity(argv.len());
    let mut hide_next = false;
    for a in argv {
        if hide_next {
            out.push("<password>".to_string());
            hide_next = false;
            continue;
        }
        match a.split_once('=') {
            Some((flag, _)) if SECRET.contains(&flag) => out.push(format!("{flag}=<password>")),
            _ => {
                hide_next = SECRET.contains(&a.as_str());
                out.push(a.clone());
            }
        }
    }
    out
}

/// serverStatus' TLS sections, as mongod shows them: `transportSecurity`
/// (connections by TLS version) always, `security`'s certificate fields with
/// TLS on.
pub fn add_server_status(state: &ServerState, status: &mut bson::Document) {
    let Some(security) = state.security.get() else {
        return;
    };
    status.insert("transportSecurity", security.counters.to_document());
    if let Some(tls) = &security.tls {
        match status.get_document_mut("security") {
            Ok(d) => d.extend(tls.status_fields()),
            Err(_) => {
                status.insert("security", tls.status_fields());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn argv_passwords_are_hidden() {
        let argv: Vec<String> = [
            "bisondb",
            "--tlsCertificateKeyFilePassword",
            "s3cret",
            "--sslPEMKeyPassword=x",
            "--port",
            "1",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(
            redact_argv(&argv),
            [
                "bisondb",
                "--tlsCertificateKeyFilePassword",
                "<password>",
                "--sslPEMKeyPassword=<password>",
                "--port",
                "1"
            ]
        );
    }

    #[test]
    fn yaml_tls_and_security_keys() {
        let mut c = ServerConfig::default();
        c.apply_yaml(
            "net:\n  tls:\n    mode: preferTLS\n    certificateKeyFile: /s.pem\n    certificateKeyFilePassword: pw\n    CAFile: /ca.pem\n    allowConnectionsWithoutCertificates: true\n    allowInvalidHostnames: true\n    disabledProtocols: TLS1_0,TLS1_1\nsecurity:\n  keyFile: /k\n  clusterAuthMode: keyFile\n",
        )
        .unwrap();
        assert_eq!(c.tls.mode, TlsMode::Prefer);
        assert_eq!(
            c.tls.certificate_key_file.as_deref(),
            Some(Path::new("/s.pem"))
        );
        assert_eq!(c.tls.certificate_key_file_password.as_deref(), Some("pw"));
        assert!(c.tls.allow_connections_without_certificates && c.tls.allow_invalid_hostnames);
        assert!(!c.tls.allow_invalid_certificates);
        assert_eq!(
            c.tls.disabled_protocols,
            [TlsProtocol::Tls10, TlsProtocol::Tls11]
        );
        assert_eq!(c.key_file.as_deref(), Some(Path::new("/k")));
        assert_eq!(c.cluster_auth_mode, Some(ClusterAuthMode::KeyFile));
        c.validate().unwrap();
        let parsed = parsed_tls_options(&c).unwrap();
        assert_eq!(
            parsed.get_str("certificateKeyFilePassword").unwrap(),
            "<password>"
        );

        let mut c = ServerConfig::default();
        c.apply_yaml("net:\n  ssl:\n    mode: requireSSL\n    PEMKeyFile: /s.pem\n")
            .unwrap();
        assert_eq!(c.tls.mode, TlsMode::Require);
        assert!(c.tls.used_ssl_aliases);
        for bad in [
            "net:\n  tls:\n    mode: requireSSL\n",
            "net:\n  tls:\n    allowInvalidCertificates: yes please\n",
            "net:\n  tls:\n    disabledProtocols: SSL3\n",
            "security:\n  clusterAuthMode: everything\n",
        ] {
            assert!(ServerConfig::default().apply_yaml(bad).is_err(), "{bad}");
        }
        // Options without a mode, and a mode without its certificate, stop start-up.
        let mut c = ServerConfig::default();
        c.apply_yaml("net:\n  tls:\n    CAFile: /ca.pem\n").unwrap();
        assert!(c.validate().is_err());
        let mut c = ServerConfig::default();
        c.apply_yaml("security:\n  clusterAuthMode: x509\n")
            .unwrap();
        assert!(c.validate().is_err());
    }
}
