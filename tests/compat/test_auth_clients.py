"""mongosh and the Node.js driver authenticating against `bisondb --auth`.

One server with `--auth`, reached over TCP and its Unix socket. The localhost
exception creates the root user `admin` over the socket; pymongo (as that
user) then seeds `app.c` and creates `reader` (`read` on `app`, its password
needing URI escaping) and `sha1only` (SCRAM-SHA-1 only, `read` on `app`).

- mongosh: `-u/-p` with `--authenticationDatabase`, a wrong password refused
  (mongosh exits non-zero, the server logs id 20249 AuthenticationFailed),
  and `db.auth()` inside a shell started without credentials (code 18 for a
  wrong password, 13 before authenticating and for what `read` lacks, the
  seeded documents once authenticated).
- The Node.js driver (node/auth.mjs): SCRAM-SHA-256 and SCRAM-SHA-1 chosen
  with `authMechanism`, the handshake's negotiation for a SHA-1-only user,
  18 for a wrong password or unknown user, 13 for unauthorized commands.
Every check runs over both transports.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.parse
from pathlib import Path

import pytest
from bson import json_util
from pymongo import MongoClient
from pymongo.errors import PyMongoError

from conftest import NODE_DIR, _stop, client_env, default_binary, engine_args, free_tcp_port, require_client
from test_mongosh import require_mongosh

ADMIN_PW = "s3cret-Admin!"
READER_PW = "r3ad:only@"
APP_DOCS = [{"_id": 1, "v": "one"}, {"_id": 2, "v": "two"}]
TIMEOUT_S = 120


@pytest.fixture(scope="module")
def auth_server():
    engine = os.environ.get("BISONDB_ENGINE", "inMemory")
    workdir = Path(tempfile.mkdtemp(prefix="bisondb-authc-"))
    # Socket paths are limited to ~107 bytes: a short directory under /tmp.
    sockdir = Path(tempfile.mkdtemp(prefix="bdba", dir="/tmp"))
    port = free_tcp_port()
    log_path = workdir / "server.log"
    argv = [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
            "--dbpath", str(workdir / "db"), *engine_args(engine),
            "--unixSocketPrefix", str(sockdir), "--auth", "--logpath", str(log_path)]
    (workdir / "db").mkdir()
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    sock_host = urllib.parse.quote_plus(str(sockdir / f"bisondb-{port}.sock"))
    try:
        deadline = time.monotonic() + 20
        while True:
            try:
                with MongoClient(f"mongodb://{sock_host}/?serverSelectionTimeoutMS=2000") as local:
                    local.admin.command("ping")
                    # The localhost exception: the first user, over the socket.
                    local.admin.command("createUser", "admin", pwd=ADMIN_PW, roles=["root"])
                break
            except PyMongoError:
                if time.monotonic() > deadline or process.poll() is not None:
                    raise
                time.sleep(0.1)
        with MongoClient(f"mongodb://127.0.0.1:{port}/", username="admin", password=ADMIN_PW,
                         authSource="admin", serverSelectionTimeoutMS=5000) as root:
            root.app.c.insert_many(APP_DOCS)
            root.other.c.insert_one({"_id": "secret"})
            root.app.command("createUser", "reader", pwd=READER_PW, roles=["read"])
            root.admin.command("createUser", "sha1only", pwd="legacy-pw",
                               roles=[{"role": "read", "db": "app"}], mechanisms=["SCRAM-SHA-1"])
        yield {"hosts": {"tcp": f"127.0.0.1:{port}", "unix": sock_host}, "log": log_path}
    finally:
        _stop(process)
        shutil.rmtree(workdir, ignore_errors=True)
        shutil.rmtree(sockdir, ignore_errors=True)


@pytest.fixture(params=["tcp", "unix"])
def host(request, auth_server):
    return auth_server["hosts"][request.param]


def auth_failures(log_path: Path) -> list[dict]:
    """The server log's "Authentication failed" entries (mongod's id 20249)."""
    lines = [json.loads(line) for line in log_path.read_text().splitlines() if line.startswith("{")]
    return [line for line in lines if line.get("id") == 20249]


def run_mongosh(argv: list[str]) -> subprocess.CompletedProcess:
    mongosh = require_mongosh()
    return subprocess.run([str(mongosh), "--quiet", *argv], env=client_env(), stdin=subprocess.DEVNULL,
                          capture_output=True, text=True, timeout=TIMEOUT_S)


def mongosh_result(result: subprocess.CompletedProcess):
    """The EJSON value the script printed after `RESULT `."""
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, output[-4000:]
    return json_util.loads(lines[0][len("RESULT "):])


# Runs each step in the shell and records its value or its error's code, so
# one mongosh process reports every outcome at once.
STEPS_PRELUDE = """
const out = {};
function step(name, fn) {
  try { out[name] = { ok: fn() }; }
  catch (e) { out[name] = { code: e.code, codeName: e.codeName, message: String(e.message) }; }
}
"""


def test_mongosh_user_password_flags(auth_server, host):
    script = STEPS_PRELUDE + """
step('users', () => db.runCommand({ connectionStatus: 1 }).authInfo.authenticatedUsers);
step('find', () => db.getSiblingDB('app').c.find().sort({ _id: 1 }).toArray());
step('other', () => db.getSiblingDB('other').c.find().toArray());
print('RESULT ' + EJSON.stringify(out));
"""
    # The root user on admin.
    out = mongosh_result(run_mongosh([f"mongodb://{host}/test", "-u", "admin", "-p", ADMIN_PW,
                                      "--authenticationDatabase", "admin", "--eval", script]))
    assert out["users"] == {"ok": [{"user": "admin", "db": "admin"}]}
    assert out["find"] == {"ok": APP_DOCS}
    assert out["other"] == {"ok": [{"_id": "secret"}]}

    # A `read` user of app, authenticated on app: reads app, nothing else.
    out = mongosh_result(run_mongosh([f"mongodb://{host}/app", "-u", "reader", "-p", READER_PW,
                                      "--authenticationDatabase", "app",
                                      "--authenticationMechanism", "SCRAM-SHA-1", "--eval", script]))
    assert out["users"] == {"ok": [{"user": "reader", "db": "app"}]}
    assert out["find"] == {"ok": APP_DOCS}
    assert out["other"]["code"] == 13, out
    assert out["other"]["codeName"] == "Unauthorized", out

    # A wrong password: mongosh cannot connect, the server logs the failure
    # (AuthenticationFailed, code 18) without the password.
    before = len(auth_failures(auth_server["log"]))
    result = run_mongosh([f"mongodb://{host}/test", "-u", "admin", "-p", "wrong-pw-42",
                          "--authenticationDatabase", "admin", "--eval", "print('RESULT connected')"])
    output = result.stdout + result.stderr
    assert result.returncode != 0, output[-4000:]
    assert "Authentication failed." in output, output[-4000:]
    assert "RESULT connected" not in result.stdout
    time.sleep(0.2)
    failures = auth_failures(auth_server["log"])[before:]
    assert failures, "no id 20249 entry for the wrong password"
    assert any("AuthenticationFailed" in json.dumps(f) and "admin" in json.dumps(f) for f in failures), failures
    assert "wrong-pw-42" not in auth_server["log"].read_text()


def test_mongosh_db_auth(host):
    script = STEPS_PRELUDE + f"""
const app = db.getSiblingDB('app');
step('before', () => app.c.find().toArray());
step('wrong', () => db.getSiblingDB('admin').auth('admin', 'wrong-pw-43'));
step('stillAnonymous', () => db.runCommand({{ connectionStatus: 1 }}).authInfo.authenticatedUsers);
step('auth', () => app.auth('reader', {json.dumps(READER_PW)}).ok);
step('users', () => db.runCommand({{ connectionStatus: 1 }}).authInfo.authenticatedUsers);
step('find', () => app.c.find().sort({{ _id: 1 }}).toArray());
step('insert', () => app.c.insertOne({{ _id: 3 }}));
step('other', () => db.getSiblingDB('other').c.find().toArray());
step('rootAuth', () => db.getSiblingDB('admin').auth({{ user: 'admin', pwd: {json.dumps(ADMIN_PW)},
                                                      mechanism: 'SCRAM-SHA-256' }}).ok);
step('rootOther', () => db.getSiblingDB('other').c.find().toArray());
print('RESULT ' + EJSON.stringify(out));
"""
    out = mongosh_result(run_mongosh([f"mongodb://{host}/test", "--eval", script]))
    assert out["before"]["code"] == 13, out
    assert "requires authentication" in out["before"]["message"], out
    assert out["wrong"]["code"] == 18, out
    assert out["wrong"]["codeName"] == "AuthenticationFailed", out
    assert out["stillAnonymous"] == {"ok": []}, out
    assert out["auth"] == {"ok": 1}, out
    assert out["users"] == {"ok": [{"user": "reader", "db": "app"}]}, out
    assert out["find"] == {"ok": APP_DOCS}, out
    assert out["insert"]["code"] == 13, out
    assert out["other"]["code"] == 13, out
    assert out["rootAuth"] == {"ok": 1}, out
    assert out["rootOther"] == {"ok": [{"_id": "secret"}]}, out


def test_node_driver_scram(host):
    require_client(
        NODE_DIR / "node_modules" / "mongodb" / "package.json",
        "the Node.js driver (npm package mongodb)",
        "not in tests/compat/node/node_modules (run `npm ci` there or `bash scripts/test.sh`)",
    )
    node = require_client(Path(shutil.which("node") or "/nonexistent/node"), "node", "node is not on PATH")
    result = subprocess.run([str(node), str(NODE_DIR / "auth.mjs"), host, ADMIN_PW], cwd=NODE_DIR,
                            env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True,
                            timeout=TIMEOUT_S)
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"auth.mjs exited {result.returncode}:\n{output[-4000:]}"
    assert "auth.mjs: all checks passed" in result.stdout, output[-4000:]
