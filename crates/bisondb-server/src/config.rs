//! Server configuration: mongod-compatible settings, from flags and/or a YAML file.
//!
//! The binary crate parses flags; this module owns the meaning of every setting and
//! the YAML keys mongod uses (`net.port`, `storage.dbPath`, ...), so a mongod config
//! file for the supported settings works unchanged.

use std::path::{Path, PathBuf};

use bisondb_error::{ErrorCode, MongoError, MongoResult};

#[derive(Debug, Clone, PartialEq)]
pub struct ServerConfig {
    pub port: u16,
    /// Addresses to listen on; empty means no TCP listener.
    pub bind_ip: Vec<String>,
    pub dbpath: PathBuf,
    pub storage_engine: String,
    /// `storage.journal.commitIntervalMs`: the longest a buffered write waits
    /// for its journal sync (1 to 500, mongod's default 100).
    pub journal_commit_interval_ms: u64,
    pub unix_socket: bool,
    pub unix_socket_prefix: PathBuf,
    pub file_permissions: u32,
    pub max_conns: usize,
    pub quiet: bool,
    pub logpath: Option<PathBuf>,
    /// The command line as given, for `getCmdLineOpts`.
    pub argv: Vec<String>,
    /// Seconds between TTL monitor passes (mongod's `ttlMonitorSleepSecs`).
    pub ttl_monitor_sleep_secs: u64,
    /// `--profile` / `operationProfiling.mode`: the profiling level of every
    /// database the `profile` command has not set (0, 1 or 2).
    pub profile: i32,
    /// `--slowms` / `operationProfiling.slowOpThresholdMs` (mongod's 100).
    pub slowms: i32,
    /// `--slowOpSampleRate` / `operationProfiling.slowOpSampleRate`, 0 to 1.
    pub slow_op_sample_rate: f64,
    /// mongod's `enableTestCommands` server parameter: turns on
    /// `configureFailPoint` (off by default, as in mongod).
    pub enable_test_commands: bool,
    /// The `--setParameter name=value` pairs (and a config file's
    /// `setParameter` keys) as given, for `getCmdLineOpts`.
    pub set_parameters: Vec<(String, String)>,
    /// mongod's `internalQueryMaxBlockingSortMemoryUsageBytes`: what an
    /// aggregation `$sort` holds in memory before it spills (or fails, 292).
    pub sort_memory_bytes: usize,
    /// mongod's `internalDocumentSourceGroupMaxMemoryBytes`: the same for
    /// `$group` (and the blocking stages that cannot spill).
    pub group_memory_bytes: usize,
    /// mongod's `allowDiskUseByDefault`: `allowDiskUse` when a command
    /// leaves it out.
    pub allow_disk_use_by_default: bool,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            port: 27017,
            bind_ip: vec!["127.0.0.1".to_string()],
            dbpath: PathBuf::from("./data"),
            storage_engine: "lsm".to_string(),
            journal_commit_interval_ms: 100,
            unix_socket: true,
            unix_socket_prefix: PathBuf::from("/tmp"),
            file_permissions: 0o700,
            max_conns: 1_000_000,
            quiet: false,
            logpath: None,
            argv: Vec::new(),
            ttl_monitor_sleep_secs: 60,
            profile: 0,
            slowms: crate::profiler::DEFAULT_SLOWMS,
            slow_op_sample_rate: 1.0,
            enable_test_commands: false,
            set_parameters: Vec::new(),
            sort_memory_bytes: bisondb_query::agg::spill::DEFAULT_LIMIT_BYTES,
            group_memory_bytes: bisondb_query::agg::spill::DEFAULT_LIMIT_BYTES,
            allow_disk_use_by_default: true,
        }
    }
}

impl ServerConfig {
    /// Path of the Unix domain socket, mongod's naming with our product name.
    pub fn socket_path(&self, port: u16) -> PathBuf {
        self.unix_socket_prefix.join(format!("bisondb-{port}.sock"))
    }

    /// The engine `storage_engine` names, with aliases resolved (`wiredTiger` is
    /// `lsm`); the name as given when no engine answers to it.
    pub fn resolved_storage_engine(&self) -> &str {
        self.storage_engine_entry()
            .map_or(self.storage_engine.as_str(), |e| e.name)
    }

    /// The row of the engine table (`bisondb_storage::ENGINES`) that
    /// `storage_engine` names, if any.
    pub fn storage_engine_entry(&self) -> Option<&'static bisondb_storage::EngineEntry> {
        bisondb_storage::find_engine(&self.storage_engine)
    }

    /// Checks settings that can be wrong independently of the machine.
    pub fn validate(&self) -> MongoResult<()> {
        if !(1..=500).contains(&self.journal_commit_interval_ms) {
            return Err(MongoError::bad_value(format!(
                "storage.journal.commitIntervalMs must be between 1 and 500, got {}",
                self.journal_commit_interval_ms
            )));
        }
        if self.storage_engine_entry().is_none() {
            let known = bisondb_storage::engine_names().join(", ");
            let hint = match self.storage_engine.as_str() {
                "mmapv1" => {
                    " (MMAPv1 was removed from MongoDB in 4.2 and does not exist in BisonDB)"
                }
                _ => "",
            };
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "unknown storage engine '{}'{hint}; available engines: {known}",
                    self.storage_engine
                ),
            ));
        }
        if !(0..=2).contains(&self.profile) {
            return Err(MongoError::bad_value(format!(
                "--profile must be 0, 1 or 2, got {}",
                self.profile
            )));
        }
        if !(0.0..=1.0).contains(&self.slow_op_sample_rate) {
            return Err(MongoError::bad_value(format!(
                "--slowOpSampleRate must be between 0 and 1, got {}",
                self.slow_op_sample_rate
            )));
        }
        if self.file_permissions > 0o777 {
            return Err(MongoError::bad_value(format!(
                "--filePermissions {:o} is not a valid octal permission mode",
                self.file_permissions
            )));
        }
        Ok(())
    }

    /// Applies one `--setParameter` argument, `name=value`, as mongod does at
    /// startup: unknown names and bad values are errors that stop the server.
    pub fn apply_set_parameter_arg(&mut self, arg: &str) -> MongoResult<()> {
        let Some((name, value)) = arg.split_once('=') else {
            return Err(MongoError::bad_value(format!(
                "Illegal option assignment: '{arg}' (--setParameter takes name=value)"
            )));
        };
        self.set_parameter(name, value)
    }

    /// Sets the server parameter `name` from its startup text `value`. The
    /// parameters BisonDB can set at startup are [`STARTUP_PARAMETERS`].
    pub fn set_parameter(&mut self, name: &str, value: &str) -> MongoResult<()> {
        let bad = |want: &str| {
            MongoError::bad_value(format!(
                "Bad value for parameter \"{name}\": '{value}' is not {want}"
            ))
        };
        match name {
            "enableTestCommands" => {
                self.enable_test_commands = match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(bad("a boolean (1, 0, true or false)")),
                };
            }
            "ttlMonitorSleepSecs" => {
                self.ttl_monitor_sleep_secs = value
                    .parse::<u64>()
                    .ok()
                    .filter(|s| (1..=i32::MAX as u64).contains(s))
                    .ok_or_else(|| bad("a whole number of seconds >= 1"))?;
            }
            "internalQueryMaxBlockingSortMemoryUsageBytes"
            | "internalDocumentSourceGroupMaxMemoryBytes" => {
                let n = value
                    .parse::<usize>()
                    .ok()
                    .filter(|n| *n >= 1)
                    .ok_or_else(|| bad("a whole number of bytes >= 1"))?;
                if name == "internalDocumentSourceGroupMaxMemoryBytes" {
                    self.group_memory_bytes = n;
                } else {
                    self.sort_memory_bytes = n;
                }
            }
            "allowDiskUseByDefault" => {
                self.allow_disk_use_by_default = match value {
                    "1" | "true" => true,
                    "0" | "false" => false,
                    _ => return Err(bad("a boolean (1, 0, true or false)")),
                };
            }
            _ => {
                return Err(MongoError::bad_value(format!(
                    "Unknown --setParameter '{name}' (BisonDB accepts: {})",
                    STARTUP_PARAMETERS.join(", ")
                )))
            }
        }
        // A repeated name keeps its last value, as mongod's option map does.
        self.set_parameters.retain(|(n, _)| n != name);
        self.set_parameters
            .push((name.to_string(), value.to_string()));
        Ok(())
    }

    /// Applies the settings of a mongod-style YAML configuration file on top of `self`.
    pub fn apply_yaml_file(&mut self, path: &Path) -> MongoResult<()> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            MongoError::bad_value(format!("cannot read config file {}: {e}", path.display()))
        })?;
        self.apply_yaml(&text)
    }

    /// Applies the settings of a YAML document (see [`Self::apply_yaml_file`]).
    pub fn apply_yaml(&mut self, text: &str) -> MongoResult<()> {
        let root: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| MongoError::failed_to_parse(format!("invalid YAML config file: {e}")))?;
        let get = |path: &str| -> Option<&serde_yaml::Value> {
            let mut v = &root;
            for part in path.split('.') {
                v = v.get(part)?;
            }
            Some(v)
        };
        let bad = |key: &str, want: &str| {
            MongoError::bad_value(format!("config file: '{key}' must be {want}"))
        };
        if let Some(v) = get("net.port") {
            let p = v
                .as_u64()
                .and_then(|p| u16::try_from(p).ok())
                .ok_or_else(|| bad("net.port", "a port number"))?;
            self.port = p;
        }
        if let Some(v) = get("net.bindIp") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("net.bindIp", "a comma-separated string"))?;
            self.bind_ip = split_ips(s);
        }
        if let Some(v) = get("net.bindIpAll") {
            if v.as_bool()
                .ok_or_else(|| bad("net.bindIpAll", "a boolean"))?
            {
                self.bind_ip = vec!["0.0.0.0".to_string()];
            }
        }
        if let Some(v) = get("net.maxIncomingConnections") {
            self.max_conns = v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("net.maxIncomingConnections", "a positive integer"))?;
        }
        if let Some(v) = get("net.unixDomainSocket.enabled") {
            self.unix_socket = v
                .as_bool()
                .ok_or_else(|| bad("net.unixDomainSocket.enabled", "a boolean"))?;
        }
        if let Some(v) = get("net.unixDomainSocket.pathPrefix") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("net.unixDomainSocket.pathPrefix", "a path"))?;
            self.unix_socket_prefix = PathBuf::from(s);
        }
        if let Some(v) = get("net.unixDomainSocket.filePermissions") {
            // YAML reads 0700 as the decimal 700 or octal 448 depending on the writer;
            // mongod treats the value as octal digits, so read the digits as octal.
            let digits = match v {
                serde_yaml::Value::Number(n) => n.to_string(),
                serde_yaml::Value::String(s) => s.clone(),
                _ => return Err(bad("net.unixDomainSocket.filePermissions", "an octal mode")),
            };
            self.file_permissions = parse_octal(&digits)
                .ok_or_else(|| bad("net.unixDomainSocket.filePermissions", "an octal mode"))?;
        }
        if let Some(v) = get("storage.dbPath") {
            let s = v.as_str().ok_or_else(|| bad("storage.dbPath", "a path"))?;
            self.dbpath = PathBuf::from(s);
        }
        if let Some(v) = get("storage.engine") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("storage.engine", "an engine name"))?;
            self.storage_engine = s.to_string();
        }
        if let Some(v) = get("storage.journal.commitIntervalMs") {
            self.journal_commit_interval_ms = v.as_u64().ok_or_else(|| {
                bad(
                    "storage.journal.commitIntervalMs",
                    "a number of milliseconds",
                )
            })?;
        }
        if let Some(v) = get("systemLog.quiet") {
            self.quiet = v
                .as_bool()
                .ok_or_else(|| bad("systemLog.quiet", "a boolean"))?;
        }
        if let Some(v) = get("setParameter") {
            let map = v
                .as_mapping()
                .ok_or_else(|| bad("setParameter", "a mapping of parameter names to values"))?;
            for (k, v) in map {
                let name = k
                    .as_str()
                    .ok_or_else(|| bad("setParameter", "a mapping of parameter names to values"))?;
                let value = match v {
                    serde_yaml::Value::Bool(b) => b.to_string(),
                    serde_yaml::Value::Number(n) => n.to_string(),
                    serde_yaml::Value::String(s) => s.clone(),
                    _ => return Err(bad(&format!("setParameter.{name}"), "a scalar value")),
                };
                self.set_parameter(name, &value)?;
            }
        }
        if let Some(v) = get("operationProfiling.mode") {
            self.profile = match v.as_str() {
                Some("off") => 0,
                Some("slowOp") => 1,
                Some("all") => 2,
                _ => return Err(bad("operationProfiling.mode", "one of off, slowOp, all")),
            };
        }
        if let Some(v) = get("operationProfiling.slowOpThresholdMs") {
            self.slowms = v
                .as_i64()
                .and_then(|n| i32::try_from(n).ok())
                .ok_or_else(|| {
                    bad(
                        "operationProfiling.slowOpThresholdMs",
                        "a number of milliseconds",
                    )
                })?;
        }
        if let Some(v) = get("operationProfiling.slowOpSampleRate") {
            self.slow_op_sample_rate = v.as_f64().ok_or_else(|| {
                bad(
                    "operationProfiling.slowOpSampleRate",
                    "a number from 0 to 1",
                )
            })?;
        }
        if let Some(v) = get("systemLog.path") {
            let s = v.as_str().ok_or_else(|| bad("systemLog.path", "a path"))?;
            self.logpath = Some(PathBuf::from(s));
        }
        Ok(())
    }
}

/// The server parameters `--setParameter` (and a config file's `setParameter`
/// section) may set at startup.
pub const STARTUP_PARAMETERS: &[&str] = &[
    "allowDiskUseByDefault",
    "enableTestCommands",
    "internalDocumentSourceGroupMaxMemoryBytes",
    "internalQueryMaxBlockingSortMemoryUsageBytes",
    "ttlMonitorSleepSecs",
];

/// Splits mongod's comma-separated `bindIp` list.
pub fn split_ips(s: &str) -> Vec<String> {
    s.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// Parses a permission mode written as octal digits (`0700`, `700`).
pub fn parse_octal(s: &str) -> Option<u32> {
    let s = s.trim();
    if s.is_empty() || !s.bytes().all(|b| (b'0'..=b'7').contains(&b)) {
        return None;
    }
    u32::from_str_radix(s, 8).ok().filter(|m| *m <= 0o777)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn yaml_keys_as_mongod() {
        let mut c = ServerConfig::default();
        c.apply_yaml(
            "net:\n  port: 28000\n  bindIp: 127.0.0.1,::1\n  unixDomainSocket:\n    enabled: false\n    pathPrefix: /var/run\n    filePermissions: 0755\nstorage:\n  dbPath: /srv/db\n  engine: inMemory\n",
        )
        .unwrap();
        assert_eq!(c.port, 28000);
        assert_eq!(c.bind_ip, vec!["127.0.0.1", "::1"]);
        assert!(!c.unix_socket);
        assert_eq!(c.unix_socket_prefix, PathBuf::from("/var/run"));
        assert_eq!(c.file_permissions, 0o755);
        assert_eq!(c.dbpath, PathBuf::from("/srv/db"));
        assert_eq!(
            c.socket_path(28000),
            PathBuf::from("/var/run/bisondb-28000.sock")
        );
    }

    #[test]
    fn bad_yaml_is_an_error() {
        let mut c = ServerConfig::default();
        assert!(c.apply_yaml("net:\n  port: hello\n").is_err());
        assert!(c.apply_yaml("net: [\n").is_err());
    }

    #[test]
    fn mmapv1_is_refused_with_the_list() {
        let c = ServerConfig {
            storage_engine: "mmapv1".into(),
            ..Default::default()
        };
        let e = c.validate().unwrap_err();
        assert!(e.message.contains("mmapv1"), "{}", e.message);
        assert!(e.message.contains("inMemory"), "{}", e.message);
    }

    #[test]
    fn engines_aliases_and_journal_interval() {
        assert_eq!(
            ServerConfig::default().storage_engine,
            "lsm",
            "lsm is the default"
        );
        let cases: &[(&str, u64, Option<&str>)] = &[
            ("lsm", 100, Some("lsm")),
            ("wiredTiger", 100, Some("lsm")),
            ("inMemory", 1, Some("inMemory")),
            ("lsm", 500, Some("lsm")),
            ("lsm", 0, None),
            ("lsm", 501, None),
            ("rocksdb", 100, None),
        ];
        for (engine, ms, want) in cases {
            let c = ServerConfig {
                storage_engine: engine.to_string(),
                journal_commit_interval_ms: *ms,
                ..Default::default()
            };
            assert_eq!(c.validate().is_ok(), want.is_some(), "{engine} {ms}");
            if let Some(w) = want {
                assert_eq!(c.resolved_storage_engine(), *w);
            }
        }
        let mut c = ServerConfig::default();
        c.apply_yaml("storage:\n  engine: wiredTiger\n  journal:\n    commitIntervalMs: 50\n")
            .unwrap();
        assert_eq!(c.journal_commit_interval_ms, 50);
        assert_eq!(c.resolved_storage_engine(), "lsm");
    }

    #[test]
    fn set_parameter_as_mongod() {
        let mut c = ServerConfig::default();
        assert!(!c.enable_test_commands, "test commands are off by default");
        c.apply_set_parameter_arg("enableTestCommands=1").unwrap();
        assert!(c.enable_test_commands);
        c.apply_set_parameter_arg("ttlMonitorSleepSecs=5").unwrap();
        assert_eq!(c.ttl_monitor_sleep_secs, 5);
        c.apply_set_parameter_arg("enableTestCommands=true")
            .unwrap();
        assert_eq!(
            c.set_parameters,
            vec![
                ("ttlMonitorSleepSecs".to_string(), "5".to_string()),
                ("enableTestCommands".to_string(), "true".to_string()),
            ]
        );
        c.apply_set_parameter_arg("enableTestCommands=0").unwrap();
        assert!(!c.enable_test_commands);

        let e = c.apply_set_parameter_arg("foo=bar").unwrap_err();
        assert!(
            e.message.contains("Unknown --setParameter 'foo'"),
            "{}",
            e.message
        );
        assert!(c.apply_set_parameter_arg("enableTestCommands").is_err());
        assert!(c.apply_set_parameter_arg("enableTestCommands=yes").is_err());
        assert!(c.apply_set_parameter_arg("ttlMonitorSleepSecs=0").is_err());
        assert!(c.apply_set_parameter_arg("ttlMonitorSleepSecs=x").is_err());
        c.apply_set_parameter_arg("internalQueryMaxBlockingSortMemoryUsageBytes=1024")
            .unwrap();
        c.apply_set_parameter_arg("internalDocumentSourceGroupMaxMemoryBytes=2048")
            .unwrap();
        c.apply_set_parameter_arg("allowDiskUseByDefault=false")
            .unwrap();
        assert_eq!(
            (
                c.sort_memory_bytes,
                c.group_memory_bytes,
                c.allow_disk_use_by_default
            ),
            (1024, 2048, false)
        );
        assert!(c
            .apply_set_parameter_arg("internalDocumentSourceGroupMaxMemoryBytes=0")
            .is_err());

        let mut y = ServerConfig::default();
        y.apply_yaml("setParameter:\n  enableTestCommands: 1\n  ttlMonitorSleepSecs: 2\n")
            .unwrap();
        assert!(y.enable_test_commands);
        assert_eq!(y.ttl_monitor_sleep_secs, 2);
        assert!(y.apply_yaml("setParameter:\n  nope: 1\n").is_err());
        assert!(y.apply_yaml("setParameter: 3\n").is_err());
    }

    #[test]
    fn octal() {
        assert_eq!(parse_octal("0700"), Some(0o700));
        assert_eq!(parse_octal("666"), Some(0o666));
        assert_eq!(parse_octal("8"), None);
        assert_eq!(parse_octal("07777"), None);
    }
}
