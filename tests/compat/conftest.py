"""Fixtures for BisonDB's compatibility suite.

The suite drives a real `bisondb` server with real MongoDB clients (pymongo,
mongosh, the Node.js driver). One server is started per pytest session and is
reached over both TCP and its Unix domain socket; every test that takes the
``uri`` or ``client`` fixture runs once per transport.

Environment:
  BISONDB_BIN         server binary (default: <repo>/target/release/bisondb,
                      or $CARGO_TARGET_DIR/release/bisondb)
  BISONDB_ENGINE      value of --storageEngine (default: inMemory). With
                      `postgres` a private PostgreSQL cluster is started
                      for the session (initdb/pg_ctl of
                      /usr/lib/postgresql/*/bin, as the `postgres` user when
                      run as root) and each server gets a database of its own
                      in it (--postgresUri); tests marked
                      `not_on_postgres(reason)` are skipped with that reason
  BISONDB_TEST_PORTS  LOW-HIGH: take the servers' (and PostgreSQL's) ports
                      from this range instead of asking the system for a free
                      one (for a machine shared with other test runs)
  BISONDB_URI         use an already running server at this URI instead of
                      starting one (TCP transport only, unless
                      BISONDB_SOCKET_URI is set too)
  BISONDB_SOCKET_URI  with BISONDB_URI: the running server's socket URI
  BISONDB_REQUIRE_CLIENTS=1
                      fail (instead of skip) when mongosh or the Node.js
                      driver is missing; scripts/test.sh sets it because it
                      installs them
"""

from __future__ import annotations

import glob
import itertools
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import PyMongoError

COMPAT_DIR = Path(__file__).resolve().parent
REPO_ROOT = COMPAT_DIR.parent.parent
NODE_DIR = COMPAT_DIR / "node"

STARTUP_TIMEOUT_S = 20.0
SHUTDOWN_TIMEOUT_S = 10.0
TRANSPORTS = ("tcp", "unix")


@dataclass
class Server:
    """Where the session's server can be reached."""

    tcp_uri: str
    socket_uri: str | None
    # None when the suite runs against a server it did not start.
    process: subprocess.Popen | None = None
    log_path: Path | None = None

    def uri(self, transport: str) -> str | None:
        return self.tcp_uri if transport == "tcp" else self.socket_uri

    def log_tail(self, limit: int = 8000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return "(no server log)"
        text = self.log_path.read_text(errors="replace")
        return text[-limit:]


def default_binary() -> Path:
    override = os.environ.get("BISONDB_BIN")
    if override:
        return Path(override)
    target = Path(os.environ.get("CARGO_TARGET_DIR", REPO_ROOT / "target"))
    if not target.is_absolute():
        target = REPO_ROOT / target
    return target / "release" / "bisondb"


def _port_range():
    spec = os.environ.get("BISONDB_TEST_PORTS", "")
    if not spec:
        return None
    low, _, high = spec.partition("-")
    return itertools.cycle(range(int(low), int(high or low) + 1))


_PORTS = _port_range()


def free_tcp_port() -> int:
    # The port is released before the server binds it; a collision is possible
    # but unlikely, and shows up as a clear startup failure with the log.
    if _PORTS is None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            s.bind(("127.0.0.1", 0))
            return s.getsockname()[1]
    # BISONDB_TEST_PORTS: the next port of the range that nothing listens on
    # (the range is walked round-robin, so a port just released by a stopped
    # server is not handed out again at once).
    for _ in range(1000):
        port = next(_PORTS)
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        return port
    raise RuntimeError("no free port in BISONDB_TEST_PORTS")


def engine() -> str:
    """The storage engine of the session's server (BISONDB_ENGINE)."""
    return os.environ.get("BISONDB_ENGINE", "inMemory")


def pg_bin_dir() -> Path | None:
    """The newest /usr/lib/postgresql/<version>/bin holding initdb."""
    found = []
    for d in glob.glob("/usr/lib/postgresql/*/bin"):
        version = Path(d).parent.name
        if os.path.isfile(os.path.join(d, "initdb")) and version.isdigit():
            found.append((int(version), Path(d)))
    return max(found)[1] if found else None


class PostgresCluster:
    """A private PostgreSQL cluster: the store of the servers of a
    `BISONDB_ENGINE=postgres` session, each in a database of its own."""

    def __init__(self):
        self.bin = pg_bin_dir()
        if self.bin is None:
            pytest.fail("BISONDB_ENGINE=postgres needs PostgreSQL's server binaries "
                        "(/usr/lib/postgresql/*/bin/initdb; on Debian: apt-get install postgresql)",
                        pytrace=False)
        # initdb refuses to run as root: the package's `postgres` user runs it.
        self.as_postgres = os.geteuid() == 0
        # Short and under /tmp: PostgreSQL's socket goes there too.
        self.dir = Path(tempfile.mkdtemp(prefix="bdbpg", dir="/tmp"))
        if self.as_postgres:
            shutil.chown(self.dir, "postgres", "postgres")
        self.data = self.dir / "data"
        self.log = self.dir / "postgres.log"
        self.port = free_tcp_port()
        self.databases = itertools.count()
        self.started = False

    def _run(self, program: str, *args: str) -> None:
        argv = [str(self.bin / program), *args]
        if self.as_postgres:
            argv = ["runuser", "-u", "postgres", "--", *argv]
        done = subprocess.run(argv, cwd=self.dir, stdin=subprocess.DEVNULL,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if done.returncode != 0:
            log = self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""
            pytest.fail(f"{' '.join(argv)} failed ({done.returncode}):\n"
                        f"{done.stdout.decode(errors='replace')}\n{log}", pytrace=False)

    def start(self) -> None:
        self._run("initdb", "-D", str(self.data), "-U", "postgres", "--auth=trust",
                  "-E", "UTF8", "--no-sync", "--no-instructions")
        # Durability is not what the suite checks: spare the disk.
        options = (f"-p {self.port} -c listen_addresses=127.0.0.1 "
                   f"-c unix_socket_directories={self.dir} -c max_connections=300 "
                   "-c fsync=off -c synchronous_commit=off -c full_page_writes=off")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-o", options,
                  "-w", "-t", "60", "start")
        self.started = True

    def new_database_uri(self) -> str:
        """A new empty database, as the --postgresUri of one server."""
        name = f"bisondb{next(self.databases)}"
        self._run("psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres",
                  "-d", "postgres", "-q", "-c", f"CREATE DATABASE {name}")
        return f"postgresql://postgres@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.started and (self.data / "postmaster.pid").exists():
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
        self.started = False
        shutil.rmtree(self.dir, ignore_errors=True)


_POSTGRES: PostgresCluster | None = None


def postgres_cluster() -> PostgresCluster:
    """The session's PostgreSQL cluster, started on first use (stopped by
    pytest_sessionfinish)."""
    global _POSTGRES
    if _POSTGRES is None:
        cluster = PostgresCluster()
        cluster.start()
        _POSTGRES = cluster
    return _POSTGRES


def engine_args(name: str) -> list[str]:
    """`--storageEngine name`, and a store of its own for a postgres server."""
    args = ["--storageEngine", name]
    if name == "postgres":
        args += ["--postgresUri", postgres_cluster().new_database_uri()]
    return args


def pytest_sessionfinish(session, exitstatus):
    global _POSTGRES
    if _POSTGRES is not None:
        _POSTGRES.stop()
        _POSTGRES = None


def pytest_collection_modifyitems(config, items):
    # `@pytest.mark.not_on_postgres("why")`: what the postgres engine cannot
    # do (it has no oplog, no local dbpath holding the data, no snapshot
    # history). Skipped with the reason on that engine, never silently.
    if engine() != "postgres" or os.environ.get("BISONDB_URI"):
        return
    for item in items:
        marker = item.get_closest_marker("not_on_postgres")
        if marker is None:
            continue
        reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
        if not reason:
            raise pytest.UsageError(f"{item.nodeid}: not_on_postgres needs a reason")
        item.add_marker(pytest.mark.skip(reason=f"not on the postgres engine: {reason}"))


def socket_uri_for(path: str) -> str:
    return "mongodb://" + urllib.parse.quote_plus(path) + "/"


def _can_connect(family: int, address) -> bool:
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.settimeout(0.5)
        try:
            s.connect(address)
            return True
        except OSError:
            return False


def _ping(uri: str) -> None:
    client = MongoClient(uri, serverSelectionTimeoutMS=2000, connectTimeoutMS=2000)
    try:
        reply = client.admin.command("ping")
        if reply.get("ok") != 1:
            raise RuntimeError(f"ping replied {reply!r}")
    finally:
        client.close()


def _stop(process: subprocess.Popen) -> int | None:
    if process.poll() is not None:
        return process.returncode
    process.send_signal(signal.SIGTERM)
    try:
        return process.wait(timeout=SHUTDOWN_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        return process.wait(timeout=SHUTDOWN_TIMEOUT_S)


def start_server(binary: Path, engine: str, workdir: Path, sockdir: Path,
                 extra_args: tuple[str, ...] = ()) -> Server:
    """Start `bisondb` (with `extra_args` after the usual flags) and return once
    it answers ping on both transports."""
    if not binary.exists():
        pytest.fail(
            f"server binary {binary} not found: run `cargo build --release -p bisondb` "
            "or set BISONDB_BIN (or BISONDB_URI to use a running server)",
            pytrace=False,
        )
    port = free_tcp_port()
    dbpath = workdir / "db"
    dbpath.mkdir()
    sock_path = str(sockdir / f"bisondb-{port}.sock")
    log_path = workdir / "bisondb.log"
    argv = [
        str(binary),
        "--port", str(port),
        "--bind_ip", "127.0.0.1",
        "--dbpath", str(dbpath),
        *engine_args(engine),
        "--unixSocketPrefix", str(sockdir),
        *extra_args,
    ]
    log = open(log_path, "wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    server = Server(
        tcp_uri=f"mongodb://127.0.0.1:{port}/",
        socket_uri=socket_uri_for(sock_path),
        process=process,
        log_path=log_path,
    )

    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    last_error = "never accepted a connection"
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"bisondb exited with status {process.returncode} during startup\n"
                f"command: {' '.join(argv)}\n--- server log ---\n{server.log_tail()}",
                pytrace=False,
            )
        if _can_connect(socket.AF_INET, ("127.0.0.1", port)) and _can_connect(socket.AF_UNIX, sock_path):
            try:
                _ping(server.tcp_uri)
                _ping(server.socket_uri)
                return server
            except (PyMongoError, RuntimeError) as exc:
                last_error = f"ping failed: {exc}"
        else:
            last_error = f"TCP port {port} or socket {sock_path} not accepting connections"
        if time.monotonic() > deadline:
            _stop(process)
            pytest.fail(
                f"bisondb not ready after {STARTUP_TIMEOUT_S:.0f}s ({last_error})\n"
                f"command: {' '.join(argv)}\n--- server log ---\n{server.log_tail()}",
                pytrace=False,
            )
        time.sleep(0.1)


@pytest.fixture(scope="session")
def bisondb_server():
    """The session's server: started here unless BISONDB_URI names one."""
    external = os.environ.get("BISONDB_URI")
    if external:
        yield Server(tcp_uri=external, socket_uri=os.environ.get("BISONDB_SOCKET_URI") or None)
        return

    workdir = Path(tempfile.mkdtemp(prefix="bisondb-compat-"))
    # Unix socket paths are limited to ~107 bytes, so the socket directory is
    # kept short and directly under /tmp whatever TMPDIR says.
    sockdir = Path(tempfile.mkdtemp(prefix="bdb", dir="/tmp"))
    server = None
    try:
        server = start_server(default_binary(), engine(), workdir, sockdir)
        yield server
    finally:
        if server is not None:
            status = _stop(server.process)
            # A crash during the run must not go unnoticed even if every test
            # that ran before it passed; SIGTERM is the shutdown we asked for.
            if status not in (0, -signal.SIGTERM):
                sys.stderr.write(
                    f"\nbisondb exited with status {status}\n--- server log ---\n{server.log_tail()}\n"
                )
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(sockdir, ignore_errors=True)


@pytest.fixture(params=TRANSPORTS)
def transport(request) -> str:
    return request.param


@pytest.fixture
def uri(bisondb_server: Server, transport: str) -> str:
    """The server's URI for this test's transport (TCP, then the Unix socket)."""
    value = bisondb_server.uri(transport)
    if value is None:
        pytest.skip(f"no {transport} URI for the external server (set BISONDB_SOCKET_URI)")
    return value


@pytest.fixture
def client(uri: str):
    c = MongoClient(uri, serverSelectionTimeoutMS=10000)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def db(client, request, transport):
    """A database of this test's own, empty at the start."""
    # Database names may not contain '.', ' ', '/', '\\', '"', '$' and must be
    # under 64 bytes.
    raw = f"compat_{transport}_{request.node.originalname}"
    name = re.sub(r"[^A-Za-z0-9_]", "_", raw)[:60]
    client.drop_database(name)
    yield client[name]
    client.drop_database(name)


def bare(reply: dict) -> dict:
    """A command's reply without `$clusterTime` and `operationTime`, which a
    mongos (the postgres engine) or a replica-set member adds to every reply
    as mongod does: for tests comparing a whole reply on any engine."""
    return {k: v for k, v in reply.items() if k not in ("$clusterTime", "operationTime")}


def with_database(uri: str, database: str) -> str:
    """`uri` with its path set to `database` (for clients that take one URI)."""
    parts = urllib.parse.urlsplit(uri)
    return urllib.parse.urlunsplit((parts.scheme, parts.netloc, "/" + database, parts.query, parts.fragment))


def require_client(executable: Path | None, what: str, why: str) -> Path:
    """Return the client's path, or skip (fail under BISONDB_REQUIRE_CLIENTS)."""
    if executable is not None and executable.exists():
        return executable
    message = f"{what} not available: {why}"
    if os.environ.get("BISONDB_REQUIRE_CLIENTS") == "1":
        pytest.fail(message + " (BISONDB_REQUIRE_CLIENTS=1)", pytrace=False)
    print(message)
    pytest.skip(message)


def client_env() -> dict:
    """Environment for mongosh/node children: no telemetry or update checks."""
    env = dict(os.environ)
    env.setdefault("DO_NOT_TRACK", "1")
    env.setdefault("MONGOSH_SKIP_NODE_VERSION_CHECK", "1")
    return env
