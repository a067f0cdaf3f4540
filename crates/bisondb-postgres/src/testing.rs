//! A private PostgreSQL cluster for tests (the `testing` feature): `initdb`
//! into a temporary directory, `pg_ctl start` on a free port of 127.0.0.1,
//! stopped and removed when dropped. This crate's conformance tests and the
//! server's integration tests on `BISONDB_TEST_ENGINE=postgres` use it.
//!
//! The server binaries are looked for in `$BISONDB_PG_BIN`, else in the
//! newest `/usr/lib/postgresql/<version>/bin` (Debian's `postgresql`
//! package). When they are missing a test skips with a loud message, except
//! in CI (`CI=true`), where a missing PostgreSQL fails: CI installs it.
//! PostgreSQL refuses to run as root, so under root the cluster runs as the
//! `postgres` user (`runuser`), which the package creates.
//!
//! [`tls::TlsCluster`] is one started with `ssl=on`, certificates made by
//! rcgen and a `pg_hba.conf` taking TCP only over TLS, for the TLS tests.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// The PostgreSQL user the cluster is created with (trust authentication).
pub const USER: &str = "bisondb";

/// What [`TestCluster::start_with`] adds to a default cluster.
#[derive(Debug, Default, Clone)]
pub struct ClusterSetup {
    /// Files written into the data directory before the start, as
    /// (name, contents), private to the cluster's user (keys, certificates).
    pub files: Vec<(String, String)>,
    /// `name=value` settings passed with `-c` (`ssl=on`, `ssl_cert_file=...`).
    pub settings: Vec<String>,
    /// A `pg_hba.conf` replacing initdb's (trust for every user).
    pub hba: Option<String>,
}

/// A running private cluster.
pub struct TestCluster {
    dir: tempfile::TempDir,
    bin: PathBuf,
    port: u16,
    /// Run the binaries through `runuser -u postgres` (we are root).
    as_postgres: bool,
    next_schema: AtomicUsize,
}

/// The directory holding `initdb`, `pg_ctl` and `postgres`, if any.
pub fn find_binaries() -> Option<PathBuf> {
    if let Some(dir) = std::env::var_os("BISONDB_PG_BIN") {
        let dir = PathBuf::from(dir);
        return dir.join("initdb").is_file().then_some(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// True in CI, where a missing PostgreSQL is a failure, not a skip.
fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

fn is_root() -> bool {
    std::env::var("USER").is_ok_and(|u| u == "root")
        || Command::new("id")
            .arg("-u")
            .output()
            .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .unwrap_or_else(|e| panic!("no free port for PostgreSQL: {e}"))
}

/// The cluster [`TestCluster::shared`] hands out while someone holds it.
static SHARED: Mutex<Weak<TestCluster>> = Mutex::new(Weak::new());

impl TestCluster {
    /// The cluster the tests running now share, started when none runs.
    /// It stops when its last holder drops it: a test process never leaves
    /// one behind (a static would never be dropped).
    pub fn shared() -> Option<Arc<TestCluster>> {
        let mut shared = SHARED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(cluster) = shared.upgrade() {
            return Some(cluster);
        }
        let cluster = Arc::new(TestCluster::start()?);
        *shared = Arc::downgrade(&cluster);
        Some(cluster)
    }

    /// One cluster for the whole test process (`None`: skipped, see
    /// [`TestCluster::start`]), for callers that cannot hold it (a test
    /// server's configuration). A static is never dropped, so a watcher
    /// process stops the cluster and removes its files once this process
    /// has exited.
    pub fn for_process() -> Option<&'static TestCluster> {
        static CLUSTER: OnceLock<Option<TestCluster>> = OnceLock::new();
        CLUSTER
            .get_or_init(|| {
                let cluster = TestCluster::start()?;
                cluster.stop_after_exit();
                Some(cluster)
            })
            .as_ref()
    }

    fn stop_after_exit(&self) {
        let runuser = if self.as_postgres {
            "runuser -u postgres -- "
        } else {
            ""
        };
        let script = format!(
            "while kill -0 {pid} 2>/dev/null; do sleep 1; done; \
             {runuser}'{pg_ctl}' -D '{data}' -m immediate -w stop >/dev/null 2>&1; \
             rm -rf '{dir}'",
            pid = std::process::id(),
            pg_ctl = self.bin.join("pg_ctl").display(),
            data = self.data_dir(),
            dir = self.dir.path().display(),
        );
        let spawned = Command::new("sh")
            .args(["-c", &script])
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        if let Err(e) = spawned {
            panic!("starting the watcher that stops the test cluster: {e}");
        }
    }

    /// Starts a cluster, or returns `None` after a loud message when the
    /// binaries are missing outside CI. Panics on any other failure.
    pub fn start() -> Option<TestCluster> {
        TestCluster::start_with(ClusterSetup::default())
    }

    /// [`TestCluster::start`] with files, settings and a `pg_hba.conf` of
    /// the caller's (the TLS tests' certificates and `ssl=on`).
    pub fn start_with(setup: ClusterSetup) -> Option<TestCluster> {
        let Some(bin) = find_binaries() else {
            if in_ci() {
                panic!(
                    "PostgreSQL's server binaries are missing (looked in $BISONDB_PG_BIN and \
                     /usr/lib/postgresql/*/bin): CI must install the postgresql package"
                );
            }
            eprintln!(
                "\n*** SKIPPED: PostgreSQL's server binaries are missing (install the \
                 postgresql package, or set BISONDB_PG_BIN); the postgres engine was NOT \
                 tested ***\n"
            );
            return None;
        };
        let dir = tempfile::Builder::new()
            .prefix("bisondb-pg-")
            .tempdir()
            .unwrap_or_else(|e| panic!("temporary directory: {e}"));
        let as_postgres = is_root();
        if as_postgres {
            let status = Command::new("chown")
                .args(["-R", "postgres:postgres"])
                .arg(dir.path())
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chown of the cluster directory to postgres"
            );
        }
        let cluster = TestCluster {
            dir,
            bin,
            port: free_port(),
            as_postgres,
            next_schema: AtomicUsize::new(0),
        };
        let data = cluster.data_dir();
        cluster.run(
            "initdb",
            &[
                "-D",
                &data,
                "-U",
                USER,
                "--auth=trust",
                "-E",
                "UTF8",
                "--no-sync",
                "--no-instructions",
            ],
        );
        let data_path = cluster.dir.path().join("data");
        let mut files = setup.files;
        if let Some(hba) = setup.hba {
            files.push(("pg_hba.conf".to_string(), hba));
        }
        for (name, text) in &files {
            cluster.write_private(&data_path.join(name), text);
        }
        // Durability is not what these tests check: spare the shared disk.
        let mut options = format!(
            "-p {} -c listen_addresses=127.0.0.1 -c unix_socket_directories={} \
             -c max_connections=400 -c fsync=off -c synchronous_commit=off \
             -c full_page_writes=off",
            cluster.port,
            cluster.dir.path().display()
        );
        for setting in &setup.settings {
            options.push_str(" -c ");
            options.push_str(setting);
        }
        let log = cluster.dir.path().join("postgres.log");
        let log = log.display().to_string();
        cluster.run(
            "pg_ctl",
            &[
                "-D", &data, "-l", &log, "-o", &options, "-w", "-t", "60", "start",
            ],
        );
        Some(cluster)
    }

    /// Writes `text` to `path`, owned by the cluster's user with mode 0600:
    /// PostgreSQL refuses a private key anyone else can read.
    fn write_private(&self, path: &Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text)
            .and_then(|()| std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)))
            .unwrap_or_else(|e| panic!("writing {}: {e}", path.display()));
        if self.as_postgres {
            let status = Command::new("chown")
                .arg("postgres:postgres")
                .arg(path)
                .status();
            assert!(
                status.is_ok_and(|s| s.success()),
                "chown of {} to postgres",
                path.display()
            );
        }
    }

    fn data_dir(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, program: &str, args: &[&str]) {
        let path = self.bin.join(program);
        let mut command = if self.as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(&path);
            c
        } else {
            Command::new(&path)
        };
        command.args(args).current_dir(self.dir.path());
        let output = command
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", path.display()));
        assert!(
            output.status.success(),
            "{program} failed: {}{}\n{}",
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr),
            std::fs::read_to_string(self.dir.path().join("postgres.log")).unwrap_or_default()
        );
    }

    /// The cluster's port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The URI of the cluster's `postgres` database.
    pub fn uri(&self) -> String {
        format!("postgresql://{USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The URI of a new, empty schema of the `postgres` database: every
    /// engine opened on it starts empty, without a database of its own.
    pub fn fresh_schema_uri(&self) -> String {
        let name = format!("t{}", self.next_schema.fetch_add(1, Ordering::Relaxed));
        self.execute(&format!("CREATE SCHEMA {name}"));
        format!("{}?options=-csearch_path%3D{name}", self.uri())
    }

    /// Runs `sql` on the `postgres` database (a thread of its own, so any
    /// caller, an async test included, may call it).
    pub fn execute(&self, sql: &str) {
        let uri = self.uri();
        let statement = sql.to_string();
        let outcome = std::thread::spawn(move || -> Result<(), String> {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .map_err(|e| e.to_string())?;
            runtime.block_on(async move {
                let (client, connection) = tokio_postgres::connect(&uri, tokio_postgres::NoTls)
                    .await
                    .map_err(|e| e.to_string())?;
                let driver = tokio::spawn(connection);
                let done = client
                    .batch_execute(&statement)
                    .await
                    .map_err(|e| e.to_string());
                drop(client);
                let _ = driver.await;
                done
            })
        })
        .join();
        match outcome {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("{sql}: {e}"),
            Err(_) => panic!("{sql}: the thread running it panicked"),
        }
    }

    /// Where the cluster's files are.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for TestCluster {
    fn drop(&mut self) {
        let path = self.bin.join("pg_ctl");
        let data = self.data_dir();
        let args = ["-D", data.as_str(), "-m", "immediate", "-w", "stop"];
        let _ = if self.as_postgres {
            Command::new("runuser")
                .args(["-u", "postgres", "--"])
                .arg(&path)
                .args(args)
                .output()
        } else {
            Command::new(&path).args(args).output()
        };
    }
}

/// TLS fixtures: a cluster started with `ssl=on`, a server certificate made
/// by rcgen for `localhost` only (so `verify-full` by IP fails where
/// `verify-ca` passes), signed by a test CA that also signed a client
/// certificate, and a `pg_hba.conf` taking TCP only over TLS (`hostssl`),
/// with certificate authentication on `template1`.
pub mod tls {
    use std::path::PathBuf;

    use rcgen::{
        BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
        IsCa, KeyPair, KeyUsagePurpose,
    };

    use super::{ClusterSetup, TestCluster, USER};

    fn ca(name: &str) -> (rcgen::Certificate, KeyPair) {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap_or_else(|e| panic!("{e}"));
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, name);
        p.distinguished_name = dn;
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let cert = p.self_signed(&key).unwrap_or_else(|e| panic!("{e}"));
        (cert, key)
    }

    fn leaf(
        names: Vec<String>,
        cn: &str,
        usage: ExtendedKeyUsagePurpose,
        (ca, ca_key): &(rcgen::Certificate, KeyPair),
    ) -> (String, String) {
        let key = KeyPair::generate().unwrap_or_else(|e| panic!("{e}"));
        let mut p = CertificateParams::new(names).unwrap_or_else(|e| panic!("{e}"));
        p.distinguished_name.push(DnType::CommonName, cn);
        p.extended_key_usages = vec![usage];
        let cert = p
            .signed_by(&key, ca, ca_key)
            .unwrap_or_else(|e| panic!("{e}"));
        (cert.pem(), key.serialize_pem())
    }

    /// A cluster with `ssl=on` (see the module's documentation) and the
    /// client side's files: the CA, another CA, a client certificate.
    pub struct TlsCluster {
        pub cluster: TestCluster,
        dir: tempfile::TempDir,
    }

    impl TlsCluster {
        /// Starts it, or `None` as [`TestCluster::start`].
        pub fn start() -> Option<TlsCluster> {
            let ca_pair = ca("BisonDB test CA");
            let (server_cert, server_key) = leaf(
                vec!["localhost".into()],
                "localhost",
                ExtendedKeyUsagePurpose::ServerAuth,
                &ca_pair,
            );
            // `cert` authentication takes the user from the certificate's CN.
            let (client_cert, client_key) = leaf(
                Vec::new(),
                USER,
                ExtendedKeyUsagePurpose::ClientAuth,
                &ca_pair,
            );
            let other_ca = ca("Some other CA");
            let ca_pem = ca_pair.0.pem();
            let setup = ClusterSetup {
                files: vec![
                    ("server.crt".into(), server_cert),
                    ("server.key".into(), server_key),
                    ("ca.crt".into(), ca_pem.clone()),
                ],
                settings: [
                    "ssl=on",
                    "ssl_cert_file=server.crt",
                    "ssl_key_file=server.key",
                    "ssl_ca_file=ca.crt",
                ]
                .map(String::from)
                .to_vec(),
                hba: Some(
                    "local all all trust\n\
                     hostssl template1 all 127.0.0.1/32 cert\n\
                     hostssl all all 127.0.0.1/32 trust\n"
                        .into(),
                ),
            };
            let cluster = TestCluster::start_with(setup)?;
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let write = |name: &str, text: String| {
                std::fs::write(dir.path().join(name), text).unwrap_or_else(|e| panic!("{e}"))
            };
            write("ca.pem", ca_pem);
            write("other-ca.pem", other_ca.0.pem());
            write("client.pem", format!("{client_cert}{client_key}"));
            Some(TlsCluster { cluster, dir })
        }

        /// A client-side file: `ca.pem` (the CA that signed the server's and
        /// the client's certificates), `other-ca.pem` (one that signed neither),
        /// `client.pem` (a client certificate for [`USER`] and its key).
        pub fn file(&self, name: &str) -> PathBuf {
            self.dir.path().join(name)
        }

        /// The URI of `database` through `host` with `params`.
        pub fn uri(&self, host: &str, database: &str, params: &str) -> String {
            format!(
                "postgresql://{USER}@{host}:{}/{database}?{params}",
                self.cluster.port()
            )
        }
    }
}
