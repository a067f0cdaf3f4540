"""TLS through pymongo (issue 16): servers of their own, started with
`--tlsMode` and certificates made at run time with the `openssl` command
(nothing secret is committed): requireTLS serves TLS clients and refuses
plaintext and clients without a certificate of the CA, allowTLS serves both,
a key encrypted by `openssl pkcs8 -topk8 -v2 aes-256-cbc` opens with
`--tlsCertificateKeyFilePassword`, and MONGODB-X509 names the certificate's
subject. Skipped when `openssl` is missing or an external server is in use.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError, ServerSelectionTimeoutError

from conftest import default_binary, free_tcp_port

pytestmark = pytest.mark.skipif(
    shutil.which("openssl") is None or bool(os.environ.get("BISONDB_URI")),
    reason="needs the openssl command and a server of its own",
)

CLIENT_SUBJECT = "CN=pyclient,OU=clients,O=BisonDB tests,C=US"


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture(scope="module")
def pki(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("pki")
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
            "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/O=BisonDB tests/CN=test CA",
            cwd=d)
    (d / "server.ext").write_text(
        "subjectAltName=DNS:localhost,IP:127.0.0.1\nextendedKeyUsage=serverAuth\n")
    (d / "client.ext").write_text("extendedKeyUsage=clientAuth\n")
    for name, subj in [("server", "/CN=localhost"),
                       ("client", "/C=US/O=BisonDB tests/OU=clients/CN=pyclient")]:
        openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", subj, cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.crt",
                cwd=d)
        (d / f"{name}.pem").write_text((d / f"{name}.crt").read_text() + (d / f"{name}.key").read_text())
    openssl("pkcs8", "-topk8", "-v2", "aes-256-cbc", "-in", "server.key", "-out", "server.enc.key",
            "-passout", "pass:pyS3cret", cwd=d)
    (d / "server.enc.pem").write_text((d / "server.crt").read_text() + (d / "server.enc.key").read_text())
    return d


class Proc:
    def __init__(self, tmp: Path, extra: list[str]):
        self.port = free_tcp_port()
        self.log = tmp / f"bisondb-{self.port}.log"
        (tmp / f"db-{self.port}").mkdir()
        argv = [str(default_binary()), "--port", str(self.port), "--bind_ip", "127.0.0.1",
                "--dbpath", str(tmp / f"db-{self.port}"), "--storageEngine", "inMemory",
                "--unixSocketPrefix", str(tmp), *extra]
        with open(self.log, "wb") as out:
            self.process = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL)

    def wait_listening(self) -> None:
        import socket
        deadline = time.time() + 30
        while time.time() < deadline:
            if self.process.poll() is not None:
                pytest.fail(f"server exited: {self.log.read_text(errors='replace')[-4000:]}")
            with socket.socket() as s:
                s.settimeout(0.5)
                if s.connect_ex(("127.0.0.1", self.port)) == 0:
                    return
            time.sleep(0.1)
        pytest.fail("server did not listen in time")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture
def serve(tmp_path):
    procs: list[Proc] = []

    def start(*extra: str) -> Proc:
        p = Proc(tmp_path, list(extra))
        procs.append(p)
        p.wait_listening()
        return p

    yield start
    for p in procs:
        p.stop()


def tls_client(port: int, pki: Path, cert: str | None = "client.pem", **kw) -> MongoClient:
    opts = dict(tls=True, tlsCAFile=str(pki / "ca.pem"), serverSelectionTimeoutMS=3000,
                connectTimeoutMS=3000)
    if cert:
        opts["tlsCertificateKeyFile"] = str(pki / cert)
    opts.update(kw)
    return MongoClient("127.0.0.1", port, **opts)


def test_require_tls(serve, pki):
    p = serve("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pki / "server.pem"),
              "--tlsCAFile", str(pki / "ca.pem"))
    with tls_client(p.port, pki) as c:
        c.t.c.insert_one({"_id": 1, "x": "tls"})
        assert c.t.c.find_one({"_id": 1})["x"] == "tls"
        status = c.admin.command("serverStatus")
        ts = status["transportSecurity"]
        assert ts["1.2"] + ts["1.3"] >= 1, ts
        assert status["security"]["SSLServerHasCertificateAuthority"] is True
        opts = c.admin.command("getCmdLineOpts")
        assert opts["parsed"]["net"]["tls"]["mode"] == "requireTLS"
    with MongoClient("127.0.0.1", p.port, serverSelectionTimeoutMS=1500) as plain:
        with pytest.raises(ServerSelectionTimeoutError):
            plain.admin.command("ping")
    with tls_client(p.port, pki, cert=None) as anon:
        with pytest.raises(PyMongoError):
            anon.admin.command("ping")
    log = p.log.read_text(errors="replace")
    assert "The server is configured to only allow SSL connections" in log


def test_allow_tls_serves_both(serve, pki):
    p = serve("--tlsMode", "allowTLS", "--tlsCertificateKeyFile", str(pki / "server.pem"))
    with MongoClient("127.0.0.1", p.port, serverSelectionTimeoutMS=3000) as plain:
        assert plain.admin.command("ping")["ok"] == 1
    with tls_client(p.port, pki, cert=None) as c:
        assert c.admin.command("ping")["ok"] == 1


def test_encrypted_key_from_openssl(serve, pki):
    p = serve("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pki / "server.enc.pem"),
              "--tlsCertificateKeyFilePassword", "pyS3cret")
    with tls_client(p.port, pki, cert=None) as c:
        assert c.admin.command("ping")["ok"] == 1
        argv = c.admin.command("getCmdLineOpts")["argv"]
        assert "pyS3cret" not in argv and "<password>" in argv


def test_bad_settings_stop_start_up(tmp_path, pki):
    for extra, expected in [
        (["--tlsMode", "requireTLS"], "tlsCertificateKeyFile"),
        (["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pki / "server.enc.pem"),
          "--tlsCertificateKeyFilePassword", "wrong"], str(pki / "server.enc.pem")),
        (["--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pki / "server.pem"),
          "--tlsDisabledProtocols", "TLS1_2,TLS1_3"], "TLS 1.2 and TLS 1.3 only"),
    ]:
        p = Proc(tmp_path, extra)
        assert p.process.wait(timeout=30) != 0, extra
        assert expected in p.log.read_text(errors="replace"), extra


def test_x509_authentication(serve, pki):
    p = serve("--tlsMode", "requireTLS", "--tlsCertificateKeyFile", str(pki / "server.pem"),
              "--tlsCAFile", str(pki / "ca.pem"))
    with tls_client(p.port, pki) as c:
        try:
            c["$external"].command("createUser", CLIENT_SUBJECT,
                                   roles=[{"role": "root", "db": "admin"}])
            have_user = True
        except OperationFailure as e:
            # Before user management is served: no user, so X.509 must fail.
            assert e.code == 115, e
            have_user = False
    with tls_client(p.port, pki, authMechanism="MONGODB-X509") as x:
        if have_user:
            assert x.admin.command("ping")["ok"] == 1
            status = x.admin.command("connectionStatus")
            users = status["authInfo"]["authenticatedUsers"]
            assert {"user": CLIENT_SUBJECT, "db": "$external"} in users
        else:
            with pytest.raises(OperationFailure) as failed:
                x.admin.command("ping")
            assert failed.value.code == 18
    with tls_client(p.port, pki) as c:
        reply_or_error = None
        try:
            reply_or_error = c["$external"].command("authenticate", 1, mechanism="MONGODB-X509")
        except OperationFailure as e:
            reply_or_error = e
        if have_user:
            assert reply_or_error["user"] == CLIENT_SUBJECT
        else:
            assert isinstance(reply_or_error, OperationFailure)
            assert reply_or_error.code == 18 and "auth failed" in str(reply_or_error)
