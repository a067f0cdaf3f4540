"""Authentication and authorization through pymongo against `bisondb --auth`.

The localhost exception creates the first user over the Unix socket; pymongo
then authenticates with SCRAM-SHA-256 and SCRAM-SHA-1 over TCP and the
socket; a wrong password and an unknown user fail alike (18, logged as
mongod's id 20249 without the password); commands before authentication get
13; user and role commands and a `read` user's limits behave as on mongod.
"""

from __future__ import annotations

import json
import subprocess
import time
import urllib.parse
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

from conftest import default_binary, free_tcp_port


def wait_for_ping(client: MongoClient, process: subprocess.Popen, seconds: float = 20) -> None:
    """Waits until the server `process` answers `client`'s ping (raising the
    last error once it has exited or `seconds` have passed)."""
    deadline = time.monotonic() + seconds
    while True:
        try:
            client.admin.command("ping")
            return
        except PyMongoError:
            if time.monotonic() > deadline or process.poll() is not None:
                raise
            time.sleep(0.1)


@pytest.fixture(scope="module")
def auth_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("auth")
    sockdir = workdir
    port = free_tcp_port()
    log_path = workdir / "server.log"
    argv = [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
            "--dbpath", str(workdir / "db"), "--storageEngine", "inMemory",
            "--unixSocketPrefix", str(sockdir), "--auth", "--logpath", str(log_path)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    sock = urllib.parse.quote_plus(str(sockdir / f"bisondb-{port}.sock"))
    anon = MongoClient(f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=5000")
    try:
        wait_for_ping(anon, process)
    except PyMongoError:
        process.kill()
        raise
    try:
        yield {"port": port, "sock": sock, "anon": anon, "log": log_path}
    finally:
        anon.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()


def connect(host: str, user: str, pwd: str, source: str = "admin", mech: str | None = None) -> MongoClient:
    opts = {"username": user, "password": pwd, "authSource": source,
            "serverSelectionTimeoutMS": 5000}
    if mech:
        opts["authMechanism"] = mech
    return MongoClient(f"mongodb://{host}/", **opts)


def test_scram_users_roles_and_refusals(auth_server):
    port, sock, anon = auth_server["port"], auth_server["sock"], auth_server["anon"]
    tcp = f"127.0.0.1:{port}"
    # Before any user: the handshake runs, a find does not.
    with pytest.raises(OperationFailure) as e:
        anon.test.command("find", "c")
    assert e.value.code == 13
    assert "Command find requires authentication" in str(e.value)
    # The localhost exception, over the Unix socket: the first user only.
    with MongoClient(f"mongodb://{sock}/?serverSelectionTimeoutMS=5000") as local:
        local.admin.command("createUser", "admin", pwd="s3cret!", roles=["root"])
        with pytest.raises(OperationFailure) as e:
            local.admin.command("createUser", "second", pwd="x", roles=["root"])
        assert e.value.code == 13

    for host in (tcp, sock):
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-1", None):
            with connect(host, "admin", "s3cret!", mech=mech) as c:
                c.t.c.insert_one({"via": host, "mech": mech})
                info = c.admin.command("connectionStatus")["authInfo"]
                assert info["authenticatedUsers"] == [{"user": "admin", "db": "admin"}]

    # Wrong password and unknown user: the same 18, never the password in the log.
    for user, pwd in (("admin", "wrong-pw-123"), ("ghost", "s3cret!")):
        with connect(tcp, user, pwd) as c:
            with pytest.raises(OperationFailure) as e:
                c.admin.command("ping")
            assert e.value.code == 18
            assert "Authentication failed." in str(e.value)
    time.sleep(0.2)
    lines = [json.loads(line) for line in auth_server["log"].read_text().splitlines() if line.startswith("{")]
    failures = [line for line in lines if line.get("id") == 20249]
    assert len(failures) >= 2, failures
    assert "wrong-pw-123" not in auth_server["log"].read_text()

    with connect(tcp, "admin", "s3cret!") as root:
        app = root.app
        app.c.insert_one({"_id": 1})
        root.other.c.insert_one({"_id": 1})
        app.command("createRole", "cReader",
                    privileges=[{"resource": {"db": "app", "collection": "c"}, "actions": ["find"]}],
                    roles=[])
        app.command("createUser", "reader", pwd="r", roles=["cReader"])
        users = app.command("usersInfo", "reader", showPrivileges=True)["users"]
        assert users[0]["roles"] == [{"role": "cReader", "db": "app"}]
        assert users[0]["mechanisms"] == ["SCRAM-SHA-1", "SCRAM-SHA-256"]
        assert "credentials" not in users[0]
        roles = app.command("rolesInfo", "cReader", showPrivileges=True)["roles"]
        assert roles[0]["privileges"][0]["actions"] == ["find"]

        with connect(tcp, "reader", "r", source="app") as reader:
            assert reader.app.c.find_one() == {"_id": 1}
            for action in (lambda: reader.other.c.find_one(),
                           lambda: reader.app.c.insert_one({}),
                           lambda: reader.app.d.find_one(),
                           lambda: reader.admin.command("serverStatus")):
                with pytest.raises(OperationFailure) as e:
                    action()
                assert e.value.code == 13
            assert reader.list_database_names() == ["app"]
            # A grant is seen at the next command, without re-authenticating.
            app.command("grantRolesToUser", "reader", roles=["readWrite"])
            reader.app.d.insert_one({"n": 1})
            app.command("revokeRolesFromUser", "reader", roles=["readWrite"])
            with pytest.raises(OperationFailure):
                reader.app.d.insert_one({"n": 2})

        app.command("updateUser", "reader", pwd="r2")
        with connect(tcp, "reader", "r2", source="app") as reader:
            assert reader.app.c.find_one() == {"_id": 1}
        app.command("dropUser", "reader")
        app.command("dropRole", "cReader")
        assert app.command("usersInfo", 1)["users"] == []


def test_signed_cluster_time_with_a_key_file(tmp_path):
    """A one-member set with `--auth --keyFile`: initiated and given its first
    user through the localhost exception, it signs every `$clusterTime` with
    a key of `admin.system.keys`; pymongo gossips the signed time between
    clients, and a tampered one is refused with 204 (211 for an unknown key)."""
    from bson import Timestamp

    key = tmp_path / "key"
    key.write_text("cHltb25nbyBzaWduZWQgY2x1c3RlciB0aW1l\n")
    key.chmod(0o400)
    port = free_tcp_port()
    log_path = tmp_path / "server.log"
    argv = [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
            "--dbpath", str(tmp_path / "db"), "--storageEngine", "inMemory", "--nounixsocket",
            "--replSet", "rs0", "--oplogSize", "16", "--keyFile", str(key), "--logpath", str(log_path)]
    process = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT,
                               stdin=subprocess.DEVNULL)
    try:
        anon = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=5000")
        wait_for_ping(anon, process)
        deadline = time.monotonic() + 20
        anon.admin.command("replSetInitiate", {"_id": "rs0", "members": [{"_id": 0, "host": f"127.0.0.1:{port}"}]})
        while not anon.admin.command("hello").get("isWritablePrimary"):
            assert time.monotonic() < deadline + 20, "never became primary"
            time.sleep(0.05)
        anon.admin.command("createUser", "root", pwd="rootpw", roles=["root"])
        anon.close()

        def root():
            return MongoClient(f"mongodb://root:rootpw@127.0.0.1:{port}/?directConnection=true"
                               "&retryWrites=false&serverSelectionTimeoutMS=5000")

        with root() as a, root() as b:
            reply = a.admin.command("ping")
            signature = reply["$clusterTime"]["signature"]
            assert signature["keyId"] != 0 and bytes(signature["hash"]) != bytes(20)
            keys = list(a.admin["system.keys"].find().sort("expiresAt", 1))
            assert [k["purpose"] for k in keys] == ["HMAC", "HMAC"], keys
            assert keys[0]["_id"] == signature["keyId"]

            # Client B reads after client A's write, at A's signed time.
            with a.start_session() as sa:
                a.app.c.insert_one({"_id": 1}, session=sa)
                signed = sa.cluster_time
            with b.start_session(causal_consistency=True) as sb:
                sb.advance_cluster_time(signed)
                sb.advance_operation_time(signed["clusterTime"])
                assert b.app.c.find_one({"_id": 1}, session=sb) == {"_id": 1}

            now = reply["$clusterTime"]["clusterTime"]
            ahead = Timestamp(now.time + 3600, 1)
            for key_id, code in ((signature["keyId"], 204), (12345, 211)):
                with a.start_session() as s:
                    s.advance_cluster_time({"clusterTime": ahead,
                                            "signature": {"hash": b"\x07" * 20, "keyId": key_id}})
                    with pytest.raises(OperationFailure) as e:
                        a.app.c.find_one({}, session=s)
                    assert e.value.code == code, e.value.details
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
