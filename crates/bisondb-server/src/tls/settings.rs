//! The TLS and keyFile settings as mongod spells them: `--tls*` flags (and the
//! deprecated `--ssl*` aliases mongod 8 still accepts), the `net.tls.*` /
//! `net.ssl.*` YAML keys, `security.keyFile` and `security.clusterAuthMode`,
//! with mongod's start-up checks. Reading the files they name is
//! [`super::Security::load`]'s job.

use std::path::PathBuf;

use bisondb_error::{ErrorCode, MongoError, MongoResult};

/// `--tlsMode` / `net.tls.mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum TlsMode {
    #[default]
    Disabled,
    /// Plaintext by default; TLS accepted.
    Allow,
    /// TLS by default; plaintext accepted.
    Prefer,
    /// TLS only: plaintext connections are closed.
    Require,
}

impl TlsMode {
    /// Parses a `tlsMode` (or, with `ssl`, an `sslMode`) value.
    pub fn parse(value: &str, ssl: bool) -> MongoResult<TlsMode> {
        let mode = match (value, ssl) {
            ("disabled", _) => TlsMode::Disabled,
            ("allowTLS", false) | ("allowSSL", true) => TlsMode::Allow,
            ("preferTLS", false) | ("preferSSL", true) => TlsMode::Prefer,
            ("requireTLS", false) | ("requireSSL", true) => TlsMode::Require,
            _ => {
                let (flag, list) = if ssl {
                    ("sslMode", "disabled, allowSSL, preferSSL, requireSSL")
                } else {
                    ("tlsMode", "disabled, allowTLS, preferTLS, requireTLS")
                };
                return Err(MongoError::bad_value(format!(
                    "unsupported value for {flag} {value} (expected one of {list})"
                )));
            }
        };
        Ok(mode)
    }

    /// mongod's name for the mode (`getCmdLineOpts`).
    pub fn name(self) -> &'static str {
        match self {
            TlsMode::Disabled => "disabled",
            TlsMode::Allow => "allowTLS",
            TlsMode::Prefer => "preferTLS",
            TlsMode::Require => "requireTLS",
        }
    }
}

/// One option's value: text, or a boolean switch.
#[derive(Debug, Clone, Copy)]
pub enum OptionValue<'a> {
    Text(&'a str),
    Flag(bool),
}

/// The protocol versions `--tlsDisabledProtocols` names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TlsProtocol {
    Tls10,
    Tls11,
    Tls12,
    Tls13,
}

/// The TLS settings of the listeners.
#[derive(Clone, PartialEq, Default)]
pub struct TlsSettings {
    pub mode: TlsMode,
    /// `--tlsCertificateKeyFile`: the server's certificate chain and key, PEM.
    pub certificate_key_file: Option<PathBuf>,
    /// `--tlsCertificateKeyFilePassword`: decrypts an encrypted PKCS#8 key.
    pub certificate_key_file_password: Option<String>,
    /// `--tlsCAFile`: the roots client certificates are checked against; with
    /// it clients must present a certificate, without it none is asked for.
    pub ca_file: Option<PathBuf>,
    pub allow_connections_without_certificates: bool,
    pub allow_invalid_certificates: bool,
    /// Accepted as mongod does; it concerns certificates of servers this one
    /// connects to, and a standalone BisonDB connects to none.
    pub allow_invalid_hostnames: bool,
    /// `--tlsDisabledProtocols`, parsed.
    pub disabled_protocols: Vec<TlsProtocol>,
    /// Set when any `--ssl*` alias was used (mongod logs a deprecation warning).
    pub used_ssl_aliases: bool,
    /// Set when any option other than the mode was given (mongod refuses them
    /// with TLS disabled).
    pub options_given: bool,
}

// The password never reaches a log line or a `{:?}`.
impl std::fmt::Debug for TlsSettings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsSettings")
            .field("mode", &self.mode)
            .field("certificate_key_file", &self.certificate_key_file)
            .field(
                "certificate_key_file_password",
                &self
                    .certificate_key_file_password
                    .as_ref()
                    .map(|_| "<password>"),
            )
            .field("ca_file", &self.ca_file)
            .field(
                "allow_connections_without_certificates",
                &self.allow_connections_without_certificates,
            )
            .field(
                "allow_invalid_certificates",
                &self.allow_invalid_certificates,
            )
            .field("allow_invalid_hostnames", &self.allow_invalid_hostnames)
            .field("disabled_protocols", &self.disabled_protocols)
            .finish()
    }
}

/// `security.clusterAuthMode` / `--clusterAuthMode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterAuthMode {
    KeyFile,
    SendKeyFile,
    SendX509,
    X509,
}

impl ClusterAuthMode {
    pub fn parse(value: &str) -> MongoResult<ClusterAuthMode> {
        Ok(match value {
            "keyFile" => ClusterAuthMode::KeyFile,
            "sendKeyFile" => ClusterAuthMode::SendKeyFile,
            "sendX509" => ClusterAuthMode::SendX509,
            "x509" => ClusterAuthMode::X509,
            _ => {
                return Err(MongoError::bad_value(format!(
                    "unsupported value for clusterAuthMode {value} (expected one of keyFile, sendKeyFile, sendX509, x509)"
                )))
            }
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            ClusterAuthMode::KeyFile => "keyFile",
            ClusterAuthMode::SendKeyFile => "sendKeyFile",
            ClusterAuthMode::SendX509 => "sendX509",
            ClusterAuthMode::X509 => "x509",
        }
    }
}

/// Parses `--tlsDisabledProtocols` (comma-separated `TLS1_0`..`TLS1_3`, or `none`).
pub fn parse_disabled_protocols(value: &str) -> MongoResult<Vec<TlsProtocol>> {
    let mut out = Vec::new();
    for name in value.split(',').map(str::trim) {
        let p = match name {
            "none" => continue,
            "TLS1_0" => TlsProtocol::Tls10,
            "TLS1_1" => TlsProtocol::Tls11,
            "TLS1_2" => TlsProtocol::Tls12,
            "TLS1_3" => TlsProtocol::Tls13,
            _ => {
                return Err(MongoError::bad_value(format!(
                    "Unrecognized disabledProtocols '{name}' (expected TLS1_0, TLS1_1, TLS1_2, TLS1_3 or none)"
                )))
            }
        };
        if !out.contains(&p) {
            out.push(p);
        }
    }
    Ok(out)
}

impl TlsSettings {
    /// Applies one `net.tls.<key>` (or, with `ssl`, `net.ssl.<key>`) YAML value.
    /// Returns `false` for a key BisonDB does not implement, which the caller
    /// then refuses by name.
    pub fn apply_yaml_key(
        &mut self,
        key: &str,
        value: &serde_yaml::Value,
        ssl: bool,
    ) -> MongoResult<bool> {
        let section = if ssl { "net.ssl" } else { "net.tls" };
        let bad = |want: &str| {
            MongoError::bad_value(format!("config file: '{section}.{key}' must be {want}"))
        };
        let value = match value {
            serde_yaml::Value::String(s) => OptionValue::Text(s),
            serde_yaml::Value::Bool(b) => OptionValue::Flag(*b),
            _ => return Err(bad("a string or a boolean")),
        };
        self.apply(key, value, ssl)
            .map_err(|want| want.map_or_else(|| bad("a string"), bad))
    }

    /// Applies one command-line option, named by its YAML key (`mode`,
    /// `certificateKeyFile`, ...; with `ssl`, the `net.ssl` names): the binary's
    /// `--tls*` / `--ssl*` flags land here.
    pub fn apply_flag(&mut self, key: &str, value: OptionValue<'_>, ssl: bool) -> MongoResult<()> {
        let prefix = if ssl { "ssl" } else { "tls" };
        // The flag is the key with its first letter capitalised: mode, --tlsMode.
        let mut chars = key.chars();
        let flag = match chars.next() {
            Some(c) => format!("--{prefix}{}{}", c.to_ascii_uppercase(), chars.as_str()),
            None => format!("--{prefix}"),
        };
        match self.apply(key, value, ssl) {
            Ok(true) => Ok(()),
            Ok(false) => Err(MongoError::bad_value(format!("unknown option {flag}"))),
            Err(e) => Err(e.map_or_else(
                || MongoError::bad_value(format!("{flag} takes a value")),
                |w| MongoError::bad_value(format!("{flag} must be {w}")),
            )),
        }
    }

    /// Sets one option: `Ok(false)` for a key BisonDB does not implement,
    /// `Err(None)` when text was expected, `Err(Some(want))` when the value
    /// is not `want`.
    fn apply(
        &mut self,
        key: &str,
        value: OptionValue<'_>,
        ssl: bool,
    ) -> Result<bool, Option<&'static str>> {
        let text = || match value {
            OptionValue::Text(s) => Ok(s),
            OptionValue::Flag(_) => Err(None),
        };
        let flag = || match value {
            OptionValue::Flag(b) => Ok(b),
            OptionValue::Text(_) => Err(Some("a boolean")),
        };
        if ssl {
            self.used_ssl_aliases = true;
        }
        match (key, ssl) {
            ("mode", _) => {
                self.mode = TlsMode::parse(text()?, ssl).map_err(|_| {
                    Some(if ssl {
                        "one of disabled, allowSSL, preferSSL, requireSSL"
                    } else {
                        "one of disabled, allowTLS, preferTLS, requireTLS"
                    })
                })?;
                return Ok(true);
            }
            ("certificateKeyFile", false) | ("PEMKeyFile", true) => {
                self.certificate_key_file = Some(PathBuf::from(text()?))
            }
            ("certificateKeyFilePassword", false) | ("PEMKeyPassword", true) => {
                self.certificate_key_file_password = Some(text()?.to_string())
            }
            ("CAFile", _) => self.ca_file = Some(PathBuf::from(text()?)),
            ("allowConnectionsWithoutCertificates", _) => {
                self.allow_connections_without_certificates = flag()?
            }
            ("allowInvalidCertificates", _) => self.allow_invalid_certificates = flag()?,
            ("allowInvalidHostnames", _) => self.allow_invalid_hostnames = flag()?,
            ("disabledProtocols", _) => {
                self.disabled_protocols = parse_disabled_protocols(text()?).map_err(|_| {
                    Some("a comma-separated list of TLS1_0, TLS1_1, TLS1_2, TLS1_3 (or none)")
                })?
            }
            _ => return Ok(false),
        }
        self.options_given = true;
        Ok(true)
    }

    /// mongod's start-up checks of the TLS settings that need no file.
    pub fn validate(&self) -> MongoResult<()> {
        if self.mode == TlsMode::Disabled {
            if self.options_given {
                return Err(invalid(
                    "need to enable TLS via the sslMode/tlsMode flag when using TLS configuration parameters",
                ));
            }
            return Ok(());
        }
        if self.certificate_key_file.is_none() {
            return Err(invalid(
                "need tlsCertificateKeyFile or certificateSelector when TLS is enabled",
            ));
        }
        if self.disabled_protocols.contains(&TlsProtocol::Tls12)
            && self.disabled_protocols.contains(&TlsProtocol::Tls13)
        {
            return Err(invalid(
                "tlsDisabledProtocols leaves no protocol to offer: BisonDB's TLS (rustls) supports TLS 1.2 and TLS 1.3 only (TLS 1.0 and 1.1 are never offered)",
            ));
        }
        Ok(())
    }
}

fn invalid(msg: &str) -> MongoError {
    MongoError::new(ErrorCode::InvalidOptions, msg)
}

/// Checks `--clusterAuthMode` against the keyFile and TLS settings, as mongod.
pub fn validate_cluster_auth_mode(
    mode: Option<ClusterAuthMode>,
    key_file: bool,
    tls: &TlsSettings,
) -> MongoResult<()> {
    let Some(mode) = mode else {
        return Ok(());
    };
    match mode {
        ClusterAuthMode::KeyFile | ClusterAuthMode::SendKeyFile if !key_file => Err(invalid(
            &format!("--clusterAuthMode {} requires --keyFile", mode.name()),
        )),
        ClusterAuthMode::SendKeyFile | ClusterAuthMode::SendX509 | ClusterAuthMode::X509
            if tls.mode == TlsMode::Disabled =>
        {
            Err(invalid(&format!(
                "--clusterAuthMode {} requires --tlsMode allowTLS, preferTLS or requireTLS",
                mode.name()
            )))
        }
        ClusterAuthMode::SendX509 if !key_file => Err(invalid(
            "--clusterAuthMode sendX509 requires --keyFile (members still accept keyFile authentication)",
        )),
        ClusterAuthMode::SendX509 | ClusterAuthMode::X509 if tls.ca_file.is_none() => Err(
            invalid("Cannot use x.509 cluster authentication without --tlsCAFile"),
        ),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_and_aliases() {
        assert_eq!(
            TlsMode::parse("requireTLS", false).unwrap(),
            TlsMode::Require
        );
        assert_eq!(TlsMode::parse("preferSSL", true).unwrap(), TlsMode::Prefer);
        assert!(TlsMode::parse("requireSSL", false).is_err());
        assert!(TlsMode::parse("on", false).is_err());
    }

    #[test]
    fn protocols() {
        assert_eq!(
            parse_disabled_protocols("TLS1_0,TLS1_1").unwrap(),
            vec![TlsProtocol::Tls10, TlsProtocol::Tls11]
        );
        assert!(parse_disabled_protocols("none").unwrap().is_empty());
        assert!(parse_disabled_protocols("SSL3").is_err());
        let s = TlsSettings {
            mode: TlsMode::Require,
            certificate_key_file: Some("/k.pem".into()),
            disabled_protocols: parse_disabled_protocols("TLS1_2,TLS1_3").unwrap(),
            ..Default::default()
        };
        assert!(s
            .validate()
            .unwrap_err()
            .message
            .contains("TLS 1.2 and TLS 1.3 only"));
    }

    #[test]
    fn needs_mode_and_file() {
        let s = TlsSettings {
            ca_file: Some("/ca.pem".into()),
            options_given: true,
            ..Default::default()
        };
        assert!(s
            .validate()
            .unwrap_err()
            .message
            .contains("need to enable TLS"));
        let s = TlsSettings {
            mode: TlsMode::Allow,
            ..Default::default()
        };
        assert!(s
            .validate()
            .unwrap_err()
            .message
            .contains("tlsCertificateKeyFile"));
    }

    #[test]
    fn cluster_auth_mode() {
        let none = TlsSettings::default();
        assert!(validate_cluster_auth_mode(Some(ClusterAuthMode::KeyFile), false, &none).is_err());
        assert!(validate_cluster_auth_mode(Some(ClusterAuthMode::KeyFile), true, &none).is_ok());
        assert!(validate_cluster_auth_mode(Some(ClusterAuthMode::X509), true, &none).is_err());
        let tls = TlsSettings {
            mode: TlsMode::Require,
            certificate_key_file: Some("/k".into()),
            ca_file: Some("/ca".into()),
            ..Default::default()
        };
        assert!(validate_cluster_auth_mode(Some(ClusterAuthMode::X509), false, &tls).is_ok());
    }

    #[test]
    fn password_not_in_debug() {
        let s = TlsSettings {
            certificate_key_file_password: Some("hunter2".into()),
            ..Default::default()
        };
        assert!(!format!("{s:?}").contains("hunter2"));
    }
}
