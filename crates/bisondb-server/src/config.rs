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
    /// `--postgresUri` and `storage.postgres.*`: the postgres engine's store.
    pub postgres: PostgresConfig,
    pub unix_socket: bool,
    pub unix_socket_prefix: PathBuf,
    pub file_permissions: u32,
    pub max_conns: usize,
    /// `--metricsAddr host:port` / `net.metricsAddr`: where the Prometheus
    /// endpoint listens (`metrics/prometheus.rs`); none by default.
    pub metrics_addr: Option<String>,
    pub quiet: bool,
    pub logpath: Option<PathBuf>,
    /// `systemLog.destination` (`file` with a path, else standard output).
    pub log_destination: crate::log::Destination,
    /// `--logappend` / `systemLog.logAppend`: keep the old file's lines
    /// instead of renaming it at start-up.
    pub log_append: bool,
    /// `--logRotate` / `systemLog.logRotate`: `rename` or `reopen`.
    pub log_rotate: crate::log::RotateMode,
    /// `-v`.. / `systemLog.verbosity`: the global log verbosity, 0 to 5.
    pub verbosity: i8,
    /// `systemLog.component.<name>.verbosity`, by mongod's component name.
    pub component_verbosity: Vec<(String, i8)>,
    /// `--redactClientLogData` / `security.redactClientLogData`.
    pub redact_client_log_data: bool,
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
    /// mongod's `internalQueryMaxMemoryUsageBytesPerOperation`: what one
    /// operation's tracked buffers may hold together (146 past it).
    pub operation_memory_bytes: usize,
    /// `bisondbMaxServerMemoryUsageBytes`: what all operations' tracked
    /// buffers may hold together (`None`: half the machine's memory).
    pub server_memory_bytes: Option<usize>,
    /// mongod's `allowDiskUseByDefault`: `allowDiskUse` when a command
    /// leaves it out.
    pub allow_disk_use_by_default: bool,
    /// mongod's `honorSystemUmask`: files are created under the process's
    /// own umask instead of owner-only (see [`Self::process_umask_to_set`]).
    pub honor_system_umask: bool,
    /// mongod's `processUmask`: the group and other bits of the umask when
    /// the system umask is not honoured (`None`: 077, owner-only files).
    pub process_umask: Option<u32>,
    /// `--setParameter incompleteMessageTimeoutMS`: how long a connection may
    /// hold a partly received message, or go without its first message
    /// (the handshake), before it is closed; 0 turns the check off.
    pub incomplete_message_timeout_ms: u64,
    /// mongod's `localLogicalSessionTimeoutMinutes`: a session unused this
    /// long expires (`sessions.rs`).
    pub local_logical_session_timeout_minutes: u32,
    /// mongod's `logicalSessionRefreshMillis`: how often the session cache
    /// writes `config.system.sessions` and drops expired sessions.
    pub logical_session_refresh_millis: u64,
    /// mongod's `transactionLifetimeLimitSeconds`: an open transaction
    /// older than this is aborted (`txn/transaction.rs`).
    pub transaction_lifetime_limit_seconds: u64,
    /// mongod's `maxTransactionLockRequestTimeoutMillis`, accepted: a
    /// conflicting write in a transaction fails at once (WriteConflict)
    /// rather than waiting, so there is no lock wait to bound.
    pub max_transaction_lock_request_timeout_millis: i64,
    /// mongod's `minSnapshotHistoryWindowInSeconds`: how far back reads at
    /// a point in time reach (`repl/snapshots.rs`).
    pub min_snapshot_history_window_seconds: u64,
    /// `--replSet` / `replication.replSetName`: run as a member of this
    /// replica set (see `crate::repl`); `None` is a standalone.
    pub repl_set_name: Option<String>,
    /// `--oplogSize` / `replication.oplogSizeMB`: the oplog's size in
    /// megabytes; `None` sizes it as mongod does (`crate::repl::oplog_size_bytes`).
    pub oplog_size_mb: Option<u64>,
    /// `--tls*` / `net.tls.*`: TLS on the TCP listeners.
    pub tls: crate::tls::TlsSettings,
    /// `--keyFile` / `security.keyFile`.
    pub key_file: Option<PathBuf>,
    /// `--clusterAuthMode` / `security.clusterAuthMode`.
    pub cluster_auth_mode: Option<crate::tls::ClusterAuthMode>,
    /// `--auth` / `security.authorization: enabled`: every command but the
    /// handshake and authentication ones needs an authenticated user with
    /// the privileges it requires (`auth/`).
    pub auth: bool,
    /// mongod's `scramIterationCount`: PBKDF2 rounds of new SCRAM-SHA-1
    /// credentials (10000, at least 5000).
    pub scram_iteration_count: i32,
    /// mongod's `scramSHA256IterationCount` (15000, at least 5000).
    pub scram_sha256_iteration_count: i32,
}

/// Where the `postgres` engine's store is and how it is reached.
#[derive(Debug, Clone, PartialEq)]
pub struct PostgresConfig {
    /// `--postgresUri` / `storage.postgres.uri`: required by, and only
    /// allowed with, `--storageEngine postgres`.
    pub uri: Option<String>,
    /// `storage.postgres.poolSize`: the most connections a server opens
    /// (each open cursor's snapshot and each transaction holds one).
    pub pool_size: usize,
    /// `storage.postgres.tlsMode`: libpq's `sslmode` (disable, prefer,
    /// require, verify-ca, verify-full); unset, the URI's `sslmode` or
    /// `disable`.
    pub tls_mode: Option<String>,
    /// `storage.postgres.tlsCAFile`: the CA file (PEM) the store's
    /// certificate must chain to (the URI's `sslrootcert`).
    pub tls_ca_file: Option<PathBuf>,
    /// `storage.postgres.tlsCertificateKeyFile`: the client certificate and
    /// its key in one PEM file (the URI's `sslcert`/`sslkey`).
    pub tls_certificate_key_file: Option<PathBuf>,
}

impl Default for PostgresConfig {
    fn default() -> Self {
        PostgresConfig {
            uri: None,
            pool_size: 64,
            tls_mode: None,
            tls_ca_file: None,
            tls_certificate_key_file: None,
        }
    }
}

impl PostgresConfig {
    /// Refuses what the postgres engine does not implement, and a store
    /// given to another engine.
    fn validate(&self, engine: &str) -> MongoResult<()> {
        let is_postgres = engine == bisondb_storage::POSTGRES_ENGINE;
        match (&self.uri, is_postgres) {
            (None, true) => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    "--storageEngine postgres needs --postgresUri postgresql://... \
                     (or storage.postgres.uri)",
                ))
            }
            (Some(_), false) => {
                return Err(MongoError::new(
                    ErrorCode::InvalidOptions,
                    format!("--postgresUri is for --storageEngine postgres, not '{engine}'"),
                ))
            }
            _ => {}
        }
        let tls = bisondb_postgres::TlsSettings {
            mode: self.tls_mode.clone(),
            ca_file: self.tls_ca_file.clone(),
            certificate_key_file: self.tls_certificate_key_file.clone(),
        };
        if !is_postgres && tls != bisondb_postgres::TlsSettings::default() {
            return Err(MongoError::new(
                ErrorCode::InvalidOptions,
                format!(
                    "storage.postgres.tlsMode, tlsCAFile and tlsCertificateKeyFile are for \
                     --storageEngine postgres, not '{engine}'"
                ),
            ));
        }
        // The URI and these settings together, and the files they name, are
        // checked now: a mistake stops the start, not the first connection.
        if let Some(uri) = &self.uri {
            bisondb_postgres::tls::resolve(uri, &tls)
                .and_then(|resolved| bisondb_postgres::tls::connector(&resolved))
                .map_err(|e| MongoError::new(ErrorCode::InvalidOptions, e.to_string()))?;
        }
        if !(1..=10_000).contains(&self.pool_size) {
            return Err(MongoError::bad_value(format!(
                "storage.postgres.poolSize must be between 1 and 10000, got {}",
                self.pool_size
            )));
        }
        Ok(())
    }
}

/// [`ServerConfig::incomplete_message_timeout_ms`]'s default: 30 seconds.
pub const DEFAULT_INCOMPLETE_MESSAGE_TIMEOUT_MS: u64 = 30_000;

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            port: 27017,
            bind_ip: vec!["127.0.0.1".to_string()],
            dbpath: PathBuf::from("./data"),
            storage_engine: "lsm".to_string(),
            journal_commit_interval_ms: 100,
            postgres: PostgresConfig::default(),
            unix_socket: true,
            unix_socket_prefix: PathBuf::from("/tmp"),
            file_permissions: 0o700,
            max_conns: 1_000_000,
            metrics_addr: None,
            quiet: false,
            logpath: None,
            log_destination: crate::log::Destination::Stdout,
            log_append: false,
            log_rotate: crate::log::RotateMode::Rename,
            verbosity: 0,
            component_verbosity: Vec::new(),
            redact_client_log_data: false,
            argv: Vec::new(),
            ttl_monitor_sleep_secs: 60,
            profile: 0,
            slowms: crate::profiler::DEFAULT_SLOWMS,
            slow_op_sample_rate: 1.0,
            enable_test_commands: false,
            set_parameters: Vec::new(),
            sort_memory_bytes: bisondb_query::agg::spill::DEFAULT_LIMIT_BYTES,
            group_memory_bytes: bisondb_query::agg::spill::DEFAULT_LIMIT_BYTES,
            operation_memory_bytes: bisondb_error::memory::DEFAULT_OPERATION_LIMIT,
            server_memory_bytes: None,
            allow_disk_use_by_default: true,
            honor_system_umask: false,
            process_umask: None,
            incomplete_message_timeout_ms: DEFAULT_INCOMPLETE_MESSAGE_TIMEOUT_MS,
            local_logical_session_timeout_minutes: crate::sessions::DEFAULT_TIMEOUT_MINUTES,
            logical_session_refresh_millis: crate::sessions::DEFAULT_REFRESH_MILLIS,
            transaction_lifetime_limit_seconds: crate::txn::transaction::DEFAULT_LIFETIME_SECONDS,
            min_snapshot_history_window_seconds: crate::repl::snapshots::DEFAULT_WINDOW_SECONDS,
            max_transaction_lock_request_timeout_millis: 5,
            repl_set_name: None,
            oplog_size_mb: None,
            tls: Default::default(),
            key_file: None,
            cluster_auth_mode: None,
            auth: false,
            scram_iteration_count: crate::auth::DEFAULT_SHA1_ITERATIONS,
            scram_sha256_iteration_count: crate::auth::DEFAULT_SHA256_ITERATIONS,
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

    /// The umask the binary sets at start-up, before any file is created
    /// (fjall's files included, which no per-file mode could reach): owner-only
    /// (077) as mongod, or `processUmask`'s group and other bits; `None` with
    /// `honorSystemUmask`, which keeps the umask the process was started with.
    /// The Unix socket's mode is `--filePermissions`, set on the socket itself.
    pub fn process_umask_to_set(&self) -> Option<u32> {
        if self.honor_system_umask {
            return None;
        }
        Some(self.process_umask.map_or(0o077, |m| m & 0o077))
    }

    /// Checks settings that can be wrong independently of the machine.
    pub fn validate(&self) -> MongoResult<()> {
        if self.honor_system_umask && self.process_umask.is_some() {
            return Err(MongoError::bad_value(
                "processUmask cannot be used together with honorSystemUmask",
            ));
        }
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
        self.postgres.validate(self.resolved_storage_engine())?;
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
        if self.log_rotate == crate::log::RotateMode::Reopen && !self.log_append {
            return Err(MongoError::bad_value(
                "logRotate: reopen needs logAppend (--logappend), as in mongod",
            ));
        }
        crate::repl::validate_config(self)?;
        if self.file_permissions > 0o777 {
            return Err(MongoError::bad_value(format!(
                "--filePermissions {:o} is not a valid octal permission mode",
                self.file_permissions
            )));
        }
        self.tls.validate()?;
        crate::tls::settings::validate_cluster_auth_mode(
            self.cluster_auth_mode,
            self.key_file.is_some(),
            &self.tls,
        )?;
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
        let flag = || match value {
            "1" | "true" => Ok(true),
            "0" | "false" => Ok(false),
            _ => Err(bad("a boolean (1, 0, true or false)")),
        };
        match name {
            "enableTestCommands" => self.enable_test_commands = flag()?,
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
            OPERATION_MEMORY_PARAMETER | SERVER_MEMORY_PARAMETER => {
                let n =
                    parse_memory_bytes(value).ok_or_else(|| bad("a whole number of bytes >= 1"))?;
                if name == OPERATION_MEMORY_PARAMETER {
                    self.operation_memory_bytes = n;
                } else {
                    self.server_memory_bytes = Some(n);
                }
            }
            "allowDiskUseByDefault" => self.allow_disk_use_by_default = flag()?,
            "honorSystemUmask" => self.honor_system_umask = flag()?,
            "processUmask" => {
                self.process_umask = Some(parse_octal(value).ok_or_else(|| bad("an octal umask"))?);
            }
            "incompleteMessageTimeoutMS" => {
                self.incomplete_message_timeout_ms = value
                    .parse::<u64>()
                    .map_err(|_| bad("a whole number of milliseconds (0: no limit)"))?;
            }
            // mongod's bounds: 1 minute to 24 hours.
            "localLogicalSessionTimeoutMinutes" => {
                self.local_logical_session_timeout_minutes = value
                    .parse::<u32>()
                    .ok()
                    .filter(|m| (1..=24 * 60).contains(m))
                    .ok_or_else(|| bad("a whole number of minutes from 1 to 1440"))?;
            }
            "transactionLifetimeLimitSeconds" => {
                self.transaction_lifetime_limit_seconds = value
                    .parse::<u64>()
                    .ok()
                    .filter(|m| (1..=i32::MAX as u64).contains(m))
                    .ok_or_else(|| bad("a whole number of seconds >= 1"))?;
            }
            "minSnapshotHistoryWindowInSeconds" => {
                self.min_snapshot_history_window_seconds = value
                    .parse::<u64>()
                    .ok()
                    .filter(|s| *s <= i32::MAX as u64)
                    .ok_or_else(|| bad("a whole number of seconds >= 0"))?;
            }
            "maxTransactionLockRequestTimeoutMillis" => {
                self.max_transaction_lock_request_timeout_millis = value
                    .parse::<i64>()
                    .map_err(|_| bad("a whole number of milliseconds"))?;
            }
            "logicalSessionRefreshMillis" => {
                self.logical_session_refresh_millis = value
                    .parse::<u64>()
                    .ok()
                    .filter(|m| (1..=i32::MAX as u64).contains(m))
                    .ok_or_else(|| bad("a whole number of milliseconds >= 1"))?;
            }
            "scramIterationCount" | "scramSHA256IterationCount" => {
                let n = crate::auth::parse_iteration_count(name, value)?;
                if name == "scramIterationCount" {
                    self.scram_iteration_count = n;
                } else {
                    self.scram_sha256_iteration_count = n;
                }
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
    /// A key BisonDB does not honour ([`YAML_KEYS`]) stops start-up: a
    /// setting silently ignored (`security.authorization`, `net.tls.mode`)
    /// would leave the server running other than its operator asked.
    pub fn apply_yaml(&mut self, text: &str) -> MongoResult<()> {
        let root: serde_yaml::Value = serde_yaml::from_str(text)
            .map_err(|e| MongoError::failed_to_parse(format!("invalid YAML config file: {e}")))?;
        check_yaml_keys(&root)?;
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
        if let Some(v) = get("net.metricsAddr") {
            let addr = v
                .as_str()
                .ok_or_else(|| bad("net.metricsAddr", "a host:port string"))?;
            self.metrics_addr = Some(addr.to_string());
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
        if let Some(v) = get("storage.postgres.uri") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("storage.postgres.uri", "a postgresql:// URI"))?;
            self.postgres.uri = Some(s.to_string());
        }
        if let Some(v) = get("storage.postgres.poolSize") {
            self.postgres.pool_size = v
                .as_u64()
                .and_then(|n| usize::try_from(n).ok())
                .ok_or_else(|| bad("storage.postgres.poolSize", "a positive integer"))?;
        }
        if let Some(v) = get("storage.postgres.tlsMode") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("storage.postgres.tlsMode", "a string"))?;
            self.postgres.tls_mode = Some(s.to_string());
        }
        if let Some(v) = get("storage.postgres.tlsCAFile") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("storage.postgres.tlsCAFile", "a path"))?;
            self.postgres.tls_ca_file = Some(PathBuf::from(s));
        }
        if let Some(v) = get("storage.postgres.tlsCertificateKeyFile") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("storage.postgres.tlsCertificateKeyFile", "a path"))?;
            self.postgres.tls_certificate_key_file = Some(PathBuf::from(s));
        }
        if let Some(v) = get("systemLog") {
            self.apply_system_log(v)?;
        }
        if let Some(v) = get("security.authorization") {
            self.auth = match v.as_str() {
                Some("enabled") => true,
                Some("disabled") => false,
                _ => return Err(bad("security.authorization", "enabled or disabled")),
            };
        }
        if let Some(v) = get("security.redactClientLogData") {
            self.redact_client_log_data = v
                .as_bool()
                .ok_or_else(|| bad("security.redactClientLogData", "a boolean"))?;
        }
        self.apply_security_yaml(&root)?;
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
        if let Some(v) = get("replication.replSetName") {
            let s = v
                .as_str()
                .ok_or_else(|| bad("replication.replSetName", "a replica set name"))?;
            self.repl_set_name = Some(s.to_string());
        }
        if let Some(v) = get("replication.oplogSizeMB") {
            self.oplog_size_mb = Some(
                v.as_u64()
                    .ok_or_else(|| bad("replication.oplogSizeMB", "a number of megabytes"))?,
            );
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
        Ok(())
    }

    /// The `net.tls` / `net.ssl` sections and `security.keyFile` /
    /// `security.clusterAuthMode`.
    fn apply_security_yaml(&mut self, root: &serde_yaml::Value) -> MongoResult<()> {
        for (section, ssl) in [("tls", false), ("ssl", true)] {
            let Some(map) = root.get("net").and_then(|n| n.get(section)) else {
                continue;
            };
            let map = map.as_mapping().ok_or_else(|| {
                MongoError::bad_value(format!("config file: 'net.{section}' must be a mapping"))
            })?;
            for (k, v) in map {
                // Keys it does not implement were refused by `check_yaml_keys`.
                self.tls
                    .apply_yaml_key(k.as_str().unwrap_or_default(), v, ssl)?;
            }
        }
        let security = root.get("security");
        if let Some(v) = security.and_then(|s| s.get("keyFile")) {
            let s = v.as_str().ok_or_else(|| {
                MongoError::bad_value("config file: 'security.keyFile' must be a path")
            })?;
            self.key_file = Some(PathBuf::from(s));
        }
        if let Some(v) = security.and_then(|s| s.get("clusterAuthMode")) {
            let s = v.as_str().ok_or_else(|| {
                MongoError::bad_value("config file: 'security.clusterAuthMode' must be a string")
            })?;
            self.cluster_auth_mode = Some(crate::tls::ClusterAuthMode::parse(s)?);
        }
        Ok(())
    }

    /// The `systemLog` section. A key BisonDB does not implement is an error,
    /// never ignored: a log that silently goes elsewhere is worse than none.
    fn apply_system_log(&mut self, section: &serde_yaml::Value) -> MongoResult<()> {
        let bad = |key: &str, want: &str| {
            MongoError::bad_value(format!("config file: 'systemLog.{key}' must be {want}"))
        };
        let map = section
            .as_mapping()
            .ok_or_else(|| MongoError::bad_value("config file: 'systemLog' must be a mapping"))?;
        let mut destination = None;
        for (k, v) in map {
            let key = k.as_str().unwrap_or_default();
            match key {
                "quiet" => self.quiet = v.as_bool().ok_or_else(|| bad(key, "a boolean"))?,
                "path" => {
                    let s = v.as_str().ok_or_else(|| bad(key, "a path"))?;
                    self.logpath = Some(PathBuf::from(s));
                }
                "destination" => {
                    destination = Some(match v.as_str() {
                        Some("file") => crate::log::Destination::File,
                        Some("syslog") => {
                            return Err(MongoError::bad_value(
                                "config file: systemLog.destination 'syslog' is not supported by BisonDB (use file, or leave it out for standard output)",
                            ))
                        }
                        _ => return Err(bad(key, "file")),
                    })
                }
                "logAppend" => {
                    self.log_append = v.as_bool().ok_or_else(|| bad(key, "a boolean"))?
                }
                "logRotate" => {
                    self.log_rotate = parse_log_rotate(v.as_str().unwrap_or_default())
                        .ok_or_else(|| bad(key, "rename or reopen"))?
                }
                "verbosity" => self.verbosity = yaml_verbosity(v).ok_or_else(|| bad(key, "0 to 5"))?,
                "component" => {
                    let comps = v
                        .as_mapping()
                        .ok_or_else(|| bad(key, "a mapping of component names"))?;
                    for (name, c) in comps {
                        let name = name.as_str().unwrap_or_default();
                        if !crate::log::COMPONENTS.iter().any(|(n, _)| *n == name) {
                            return Err(MongoError::bad_value(format!(
                                "config file: unknown log component 'systemLog.component.{name}'"
                            )));
                        }
                        let level = c
                            .get("verbosity")
                            .filter(|_| c.as_mapping().is_some_and(|m| m.len() == 1))
                            .and_then(yaml_verbosity)
                            .ok_or_else(|| {
                                bad(&format!("component.{name}"), "{verbosity: 0 to 5}")
                            })?;
                        self.component_verbosity.retain(|(n, _)| n != name);
                        self.component_verbosity.push((name.to_string(), level));
                    }
                }
                "timeStampFormat" => {
                    if v.as_str() != Some("iso8601-utc") {
                        return Err(bad(key, "iso8601-utc (the only format BisonDB writes)"));
                    }
                }
                other => {
                    return Err(MongoError::bad_value(format!(
                        "config file: unknown or unsupported option 'systemLog.{other}'"
                    )))
                }
            }
        }
        match (destination, &self.logpath) {
            (Some(crate::log::Destination::File), None) => {
                return Err(MongoError::bad_value(
                    "config file: systemLog.destination: file needs systemLog.path",
                ))
            }
            (None, Some(_)) => {
                return Err(MongoError::bad_value(
                    "config file: systemLog.path needs systemLog.destination: file",
                ))
            }
            (Some(d), _) => self.log_destination = d,
            (None, None) => {}
        }
        Ok(())
    }
}

/// mongod's name for the limit of one operation's tracked memory.
pub const OPERATION_MEMORY_PARAMETER: &str = "internalQueryMaxMemoryUsageBytesPerOperation";
/// BisonDB's name for the limit of all operations' tracked memory (mongod
/// has none).
pub const SERVER_MEMORY_PARAMETER: &str = "bisondbMaxServerMemoryUsageBytes";

/// A memory limit's value: whole bytes, at least 1.
pub fn parse_memory_bytes(value: &str) -> Option<usize> {
    value.parse::<usize>().ok().filter(|n| *n >= 1)
}

impl ServerConfig {
    /// The server-wide memory limit: as set, else half the machine's
    /// physical memory (read once, at start), else unbounded.
    pub fn server_memory_limit(&self) -> usize {
        self.server_memory_bytes.unwrap_or_else(|| {
            crate::repl::physical_memory_bytes()
                .and_then(|b| usize::try_from(b / 2).ok())
                .unwrap_or(usize::MAX)
        })
    }
}

/// The server parameters `--setParameter` (and a config file's `setParameter`
/// section) may set at startup.
pub const STARTUP_PARAMETERS: &[&str] = &[
    "allowDiskUseByDefault",
    "bisondbMaxServerMemoryUsageBytes",
    "enableTestCommands",
    "honorSystemUmask",
    "incompleteMessageTimeoutMS",
    "internalDocumentSourceGroupMaxMemoryBytes",
    "internalQueryMaxBlockingSortMemoryUsageBytes",
    "internalQueryMaxMemoryUsageBytesPerOperation",
    "localLogicalSessionTimeoutMinutes",
    "logicalSessionRefreshMillis",
    "maxTransactionLockRequestTimeoutMillis",
    "minSnapshotHistoryWindowInSeconds",
    "processUmask",
    "scramIterationCount",
    "scramSHA256IterationCount",
    "transactionLifetimeLimitSeconds",
    "ttlMonitorSleepSecs",
];

/// `systemLog.logRotate` / `--logRotate`.
pub fn parse_log_rotate(s: &str) -> Option<crate::log::RotateMode> {
    match s {
        "rename" => Some(crate::log::RotateMode::Rename),
        "reopen" => Some(crate::log::RotateMode::Reopen),
        _ => None,
    }
}

fn yaml_verbosity(v: &serde_yaml::Value) -> Option<i8> {
    v.as_i64()
        .filter(|n| (0..=5).contains(n))
        .and_then(|n| i8::try_from(n).ok())
}

/// The YAML configuration keys BisonDB reads and honours, with mongod's
/// names; `setParameter`'s own keys are [`STARTUP_PARAMETERS`], and
/// `systemLog`'s are checked key by key where they are read (`apply_system_log`,
/// which refuses the ones BisonDB does not implement). Any other key stops
/// start-up ([`check_yaml_keys`]).
pub const YAML_KEYS: &[&str] = &[
    "net.bindIp",
    "net.bindIpAll",
    "net.maxIncomingConnections",
    "net.metricsAddr",
    "net.port",
    "net.ssl.CAFile",
    "net.ssl.PEMKeyFile",
    "net.ssl.PEMKeyPassword",
    "net.ssl.allowConnectionsWithoutCertificates",
    "net.ssl.allowInvalidCertificates",
    "net.ssl.allowInvalidHostnames",
    "net.ssl.disabledProtocols",
    "net.ssl.mode",
    "net.tls.CAFile",
    "net.tls.allowConnectionsWithoutCertificates",
    "net.tls.allowInvalidCertificates",
    "net.tls.allowInvalidHostnames",
    "net.tls.certificateKeyFile",
    "net.tls.certificateKeyFilePassword",
    "net.tls.disabledProtocols",
    "net.tls.mode",
    "net.unixDomainSocket.enabled",
    "net.unixDomainSocket.filePermissions",
    "net.unixDomainSocket.pathPrefix",
    "operationProfiling.mode",
    "operationProfiling.slowOpSampleRate",
    "operationProfiling.slowOpThresholdMs",
    "replication.oplogSizeMB",
    "replication.replSetName",
    "setParameter",
    "storage.dbPath",
    "storage.engine",
    "security.authorization",
    "security.clusterAuthMode",
    "security.keyFile",
    "security.redactClientLogData",
    "storage.journal.commitIntervalMs",
    "storage.postgres.poolSize",
    "storage.postgres.tlsCAFile",
    "storage.postgres.tlsCertificateKeyFile",
    "storage.postgres.tlsMode",
    "storage.postgres.uri",
    "systemLog",
];

/// Refuses a configuration that names any key outside [`YAML_KEYS`], listing
/// every such key; the security and TLS sections get their reason, since
/// ignoring them would run the server open and in plaintext.
pub fn check_yaml_keys(root: &serde_yaml::Value) -> MongoResult<()> {
    fn walk(v: &serde_yaml::Value, prefix: &str, out: &mut Vec<String>) {
        let Some(map) = v.as_mapping() else {
            if !prefix.is_empty() && !YAML_KEYS.contains(&prefix) {
                out.push(prefix.to_string());
            }
            return;
        };
        // `setParameter`'s values are checked one by one by `set_parameter`,
        // `systemLog`'s by `apply_system_log`.
        if prefix == "setParameter" || prefix == "systemLog" {
            return;
        }
        for (k, child) in map {
            let key = match k {
                serde_yaml::Value::String(s) => s.clone(),
                other => serde_yaml::to_string(other)
                    .unwrap_or_default()
                    .trim()
                    .to_string(),
            };
            let path = if prefix.is_empty() {
                key
            } else {
                format!("{prefix}.{key}")
            };
            walk(child, &path, out);
        }
    }
    let mut refused = Vec::new();
    if !matches!(root, serde_yaml::Value::Null) {
        walk(root, "", &mut refused);
    }
    if refused.is_empty() {
        return Ok(());
    }
    let security = refused.iter().any(|k| {
        k.starts_with("security.") || k.starts_with("net.tls.") || k.starts_with("net.ssl.")
    });
    let why = if security {
        " These security and TLS settings are not implemented by BisonDB: \
         running without them could leave the server open and in plaintext."
    } else {
        ""
    };
    Err(MongoError::new(
        ErrorCode::InvalidOptions,
        format!(
            "config file: settings BisonDB does not implement: {}.{why} Remove them \
             (see docs/COMPATIBILITY.md); the settings BisonDB honours are: {}",
            refused.join(", "),
            YAML_KEYS.join(", ")
        ),
    ))
}

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
    fn postgres_block_is_checked() {
        let with = |engine: &str, uri: Option<&str>| ServerConfig {
            storage_engine: engine.to_string(),
            postgres: PostgresConfig {
                uri: uri.map(str::to_string),
                ..Default::default()
            },
            ..Default::default()
        };
        let uri = "postgresql://u@127.0.0.1:5432/db";
        assert!(with("postgres", Some(uri)).validate().is_ok());
        let missing = with("postgres", None).validate().unwrap_err();
        assert!(
            missing.message.contains("--postgresUri"),
            "{}",
            missing.message
        );
        let stray = with("lsm", Some(uri)).validate().unwrap_err();
        assert!(stray.message.contains("not 'lsm'"), "{}", stray.message);
        let mut c = ServerConfig::default();
        c.apply_yaml(
            "storage:\n  engine: postgres\n  postgres:\n    uri: postgresql://u@h/db\n    poolSize: 7\n    tlsMode: disable\n",
        )
        .unwrap();
        assert_eq!(c.postgres.uri.as_deref(), Some("postgresql://u@h/db"));
        assert_eq!(c.postgres.pool_size, 7);
        assert!(c.validate().is_ok());
        assert_eq!(c.postgres.tls_mode.as_deref(), Some("disable"));
        // TLS: the keys, then what validate refuses before the engine opens.
        c.apply_yaml(
            "storage:\n  postgres:\n    tlsMode: verify-full\n    tlsCAFile: /nonexistent/ca.pem\n    tlsCertificateKeyFile: /nonexistent/client.pem\n",
        )
        .unwrap();
        assert_eq!(c.postgres.tls_mode.as_deref(), Some("verify-full"));
        assert_eq!(
            c.postgres.tls_ca_file.as_deref(),
            Some(std::path::Path::new("/nonexistent/ca.pem"))
        );
        assert_eq!(
            c.postgres.tls_certificate_key_file.as_deref(),
            Some(std::path::Path::new("/nonexistent/client.pem"))
        );
        let missing = c.validate().unwrap_err();
        assert!(
            missing
                .message
                .contains("reading the CA file /nonexistent/ca.pem"),
            "{}",
            missing.message
        );
        c.postgres.tls_ca_file = None;
        c.postgres.tls_certificate_key_file = None;
        let no_ca = c.validate().unwrap_err();
        assert!(no_ca.message.contains("tlsCAFile"), "{}", no_ca.message);
        c.postgres.tls_mode = Some("bogus".into());
        let unknown = c.validate().unwrap_err();
        assert!(
            unknown.message.contains("'bogus' is not a TLS mode"),
            "{}",
            unknown.message
        );
        c.postgres.tls_mode = Some("require".into());
        assert!(c.validate().is_ok(), "require without a CA encrypts only");
        c.postgres.uri = Some("postgresql://u@h/db?sslmode=disable".into());
        let conflict = c.validate().unwrap_err();
        assert!(
            conflict
                .message
                .contains("sslmode=disable but storage.postgres.tlsMode is 'require'"),
            "{}",
            conflict.message
        );
        c.postgres.uri = Some("postgresql://u@h/db".into());
        let mut lsm = c.clone();
        lsm.storage_engine = "lsm".into();
        lsm.postgres.uri = None;
        let stray = lsm.validate().unwrap_err();
        assert!(stray.message.contains("not 'lsm'"), "{}", stray.message);
        c.postgres.tls_mode = None;
        c.postgres.pool_size = 0;
        assert!(c.validate().is_err());
        assert!(ServerConfig::default()
            .apply_yaml("storage:\n  postgres:\n    sslRootCert: x\n")
            .is_err());
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
    fn system_log_keys_as_mongod() {
        let mut c = ServerConfig::default();
        c.apply_yaml(
            "systemLog:\n  destination: file\n  path: /var/log/b.log\n  logAppend: true\n  logRotate: reopen\n  verbosity: 2\n  quiet: false\n  timeStampFormat: iso8601-utc\n  component:\n    query:\n      verbosity: 1\nsecurity:\n  redactClientLogData: true\n",
        )
        .unwrap();
        assert_eq!(c.logpath, Some(PathBuf::from("/var/log/b.log")));
        assert_eq!(c.log_destination, crate::log::Destination::File);
        assert!(c.log_append && c.redact_client_log_data);
        assert_eq!(c.log_rotate, crate::log::RotateMode::Reopen);
        assert_eq!(c.verbosity, 2);
        assert_eq!(c.component_verbosity, vec![("query".to_string(), 1)]);
        c.validate().unwrap();

        for refused in [
            "systemLog:\n  syslogFacility: user\n",
            "systemLog:\n  destination: syslog\n",
            "systemLog:\n  path: /x.log\n",
            "systemLog:\n  destination: file\n",
            "systemLog:\n  verbosity: 9\n",
            "systemLog:\n  component:\n    nosuch:\n      verbosity: 1\n",
            "systemLog:\n  timeStampFormat: ctime\n",
        ] {
            assert!(
                ServerConfig::default().apply_yaml(refused).is_err(),
                "{refused}"
            );
        }
        let reopen_without_append = ServerConfig {
            log_rotate: crate::log::RotateMode::Reopen,
            ..Default::default()
        };
        assert!(reopen_without_append.validate().is_err());
    }

    #[test]
    fn authorization_and_scram_parameters() {
        let mut c = ServerConfig::default();
        assert!(!c.auth);
        assert_eq!(
            (c.scram_iteration_count, c.scram_sha256_iteration_count),
            (10000, 15000)
        );
        c.apply_yaml(
            "security:\n  authorization: enabled\nsetParameter:\n  scramIterationCount: 6000\n",
        )
        .unwrap_or_else(|e| panic!("{e:?}"));
        assert!(c.auth);
        assert_eq!(c.scram_iteration_count, 6000);
        assert!(c.apply_yaml("security:\n  authorization: yes\n").is_err());
        assert!(c
            .apply_set_parameter_arg("scramSHA256IterationCount=4999")
            .is_err());
        c.apply_set_parameter_arg("scramSHA256IterationCount=20000")
            .unwrap_or_else(|e| panic!("{e:?}"));
        assert_eq!(c.scram_sha256_iteration_count, 20000);
    }

    #[test]
    fn unimplemented_yaml_keys_stop_start_up() {
        let mut c = ServerConfig::default();
        let e = c
            .apply_yaml(
                "security:\n  enableEncryption: true\n  keyFile: /k\nnet:\n  port: 1\n  tls:\n    mode: requireTLS\n    CRLFile: /crl.pem\n    certificateSelector: subject=x\n",
            )
            .unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidOptions);
        assert!(
            e.message.starts_with(
                "config file: settings BisonDB does not implement: security.enableEncryption, net.tls.CRLFile, net.tls.certificateSelector."
            ),
            "{}",
            e.message
        );
        assert!(e.message.contains("open and in plaintext"), "{}", e.message);
        assert_eq!(c.port, 27017, "nothing applied from a refused file");
        let e = c
            .apply_yaml("storage:\n  wiredTiger:\n    engineConfig:\n      cacheSizeGB: 1\n")
            .unwrap_err();
        assert!(
            e.message
                .contains(": storage.wiredTiger.engineConfig.cacheSizeGB."),
            "{}",
            e.message
        );
        // `systemLog`'s keys are the log settings' to refuse.
        let e = c
            .apply_yaml("systemLog:\n  syslogFacility: user\n")
            .unwrap_err();
        assert!(e.message.contains("syslogFacility"), "{}", e.message);
        assert!(!e.message.contains("plaintext"), "{}", e.message);
        // A section given with no keys names nothing, and an empty file is fine.
        c.apply_yaml("").unwrap();
        c.apply_yaml("net:\n  port: 28001\nsetParameter:\n  honorSystemUmask: true\n")
            .unwrap();
        assert_eq!(c.port, 28001);
        assert!(c.honor_system_umask);
    }

    #[test]
    fn umask_and_timeout_parameters() {
        let mut c = ServerConfig::default();
        assert_eq!(c.process_umask_to_set(), Some(0o077));
        assert_eq!(c.incomplete_message_timeout_ms, 30_000);
        c.apply_set_parameter_arg("processUmask=027").unwrap();
        assert_eq!(c.process_umask_to_set(), Some(0o027));
        c.apply_set_parameter_arg("honorSystemUmask=true").unwrap();
        assert!(c.validate().is_err(), "both umask settings at once");
        c.process_umask = None;
        assert_eq!(c.process_umask_to_set(), None);
        c.validate().unwrap();
        c.apply_set_parameter_arg("incompleteMessageTimeoutMS=0")
            .unwrap();
        assert_eq!(c.incomplete_message_timeout_ms, 0);
        assert!(c
            .apply_set_parameter_arg("incompleteMessageTimeoutMS=-1")
            .is_err());
        assert!(c.apply_set_parameter_arg("processUmask=9").is_err());
    }

    #[test]
    fn octal() {
        assert_eq!(parse_octal("0700"), Some(0o700));
        assert_eq!(parse_octal("666"), Some(0o666));
        assert_eq!(parse_octal("8"), None);
        assert_eq!(parse_octal("07777"), None);
    }
}
