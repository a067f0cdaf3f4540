"""Replica-set mode through pymongo: a server started with `--replSet rs0`
answers as an uninitialized member, `replSetInitiate` (what mongosh's
`rs.initiate()` sends) makes it the primary of a one-member set, and
pymongo's topology then sees a replica set with a primary; the oplog records
the writes, and a restart keeps the set.

This module starts servers of its own (lsm engine, TCP only), like
test_crash.py. Until sessions and retryable writes exist (issue 17, part 2)
clients say `retryWrites=False`.
"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import NotPrimaryError, OperationFailure, PyMongoError

from conftest import default_binary, free_tcp_port

pytestmark = pytest.mark.skipif(
    bool(os.environ.get("BISONDB_URI")),
    reason="starts servers of its own (an external server is in use)",
)

SET = "rs0"
STARTUP_TIMEOUT_S = 30.0


def log_tail(path: Path, limit: int = 6000) -> str:
    return path.read_text(errors="replace")[-limit:] if path.exists() else "(no server log)"


class Member:
    def __init__(self, dbpath: Path, port: int, log_path: Path):
        binary = default_binary()
        if not binary.exists():
            pytest.fail(f"server binary {binary} not found: run `cargo build --release -p bisondb`", pytrace=False)
        dbpath.mkdir(parents=True, exist_ok=True)
        self.port = port
        self.log_path = log_path
        argv = [
            str(binary), "--bind_ip", "127.0.0.1", "--port", str(port), "--dbpath", str(dbpath),
            "--nounixsocket", "--replSet", SET, "--oplogSize", "16",
        ]
        with open(log_path, "ab") as log:
            self.process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while True:
            if self.process.poll() is not None:
                pytest.fail(f"server exited with {self.process.returncode}\n{log_tail(log_path)}", pytrace=False)
            try:
                with self.direct(serverSelectionTimeoutMS=500) as c:
                    if c.admin.command("ping").get("ok") == 1:
                        return
            except PyMongoError:
                pass
            if time.monotonic() > deadline:
                self.process.kill()
                pytest.fail(f"server not ready\n{log_tail(log_path)}", pytrace=False)
            time.sleep(0.05)

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.port}"

    def direct(self, **kwargs) -> MongoClient:
        kwargs.setdefault("serverSelectionTimeoutMS", 5000)
        return MongoClient(self.host, directConnection=True, retryWrites=False, **kwargs)

    def set_client(self, **kwargs) -> MongoClient:
        kwargs.setdefault("serverSelectionTimeoutMS", 5000)
        return MongoClient(self.host, replicaSet=SET, retryWrites=False, **kwargs)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=10)


@pytest.fixture
def members():
    started: list[Member] = []
    yield started
    for m in started:
        m.stop()


def wait_primary(client: MongoClient) -> dict:
    deadline = time.monotonic() + 10
    while True:
        hello = client.admin.command("hello")
        if hello.get("isWritablePrimary"):
            return hello
        if time.monotonic() > deadline:
            pytest.fail(f"never became primary: {hello}")
        time.sleep(0.05)


def test_initiate_makes_a_primary_pymongo_discovers(tmp_path, members):
    m = Member(tmp_path / "db", free_tcp_port(), tmp_path / "log")
    members.append(m)
    with m.direct() as direct:
        hello = direct.admin.command("hello")
        assert hello["isWritablePrimary"] is False and hello["isreplicaset"] is True, hello
        with pytest.raises(NotPrimaryError):
            direct.app.c.insert_one({"x": 1})
        # rs.initiate() with a config naming this member.
        direct.admin.command("replSetInitiate", {"_id": SET, "members": [{"_id": 0, "host": m.host}]})
        hello = wait_primary(direct)
        assert hello["setName"] == SET and hello["primary"] == m.host, hello
        with pytest.raises(OperationFailure) as e:
            direct.admin.command("replSetInitiate", {})
        assert e.value.code == 23

    with m.set_client() as client:
        client.admin.command("ping")
        td = client.topology_description
        assert td.topology_type_name == "ReplicaSetWithPrimary", td
        servers = td.server_descriptions()
        assert [s.server_type_name for s in servers.values()] == ["RSPrimary"], td
        assert td.replica_set_name == SET
        client.app.c.insert_one({"_id": 1, "x": 1})
        client.app.c.update_one({"_id": 1}, {"$inc": {"x": 1}})
        assert client.app.c.find_one({"_id": 1}) == {"_id": 1, "x": 2}
        ops = [(e["op"], e["ns"]) for e in client.local["oplog.rs"].find({"ns": "app.c"}).sort("$natural", 1)]
        assert ops == [("i", "app.c"), ("u", "app.c")], ops
        update = client.local["oplog.rs"].find_one({"op": "u"})
        assert update["o"] == {"$v": 2, "diff": {"u": {"x": 2}}} or update["o"] == {"_id": 1, "x": 2}, update
        status = client.admin.command("replSetGetStatus")
        assert status["members"][0]["stateStr"] == "PRIMARY", status
        conf = client.admin.command("replSetGetConfig")["config"]
        assert conf["_id"] == SET and conf["members"][0]["host"] == m.host, conf
        reply = client.app.command("find", "c")
        assert "operationTime" in reply and "$clusterTime" in reply, reply


def test_a_restarted_member_is_primary_of_its_set(tmp_path, members):
    port = free_tcp_port()
    m = Member(tmp_path / "db", port, tmp_path / "log")
    members.append(m)
    with m.direct() as direct:
        direct.admin.command("replSetInitiate", {"_id": SET, "members": [{"_id": 0, "host": m.host}]})
        wait_primary(direct)
        direct.app.c.insert_one({"_id": 1})
    m.stop()
    m2 = Member(tmp_path / "db", port, tmp_path / "log")
    members.append(m2)
    with m2.set_client() as client:
        client.app.c.insert_one({"_id": 2})
        assert client.app.c.count_documents({}) == 2
        assert client.topology_description.topology_type_name == "ReplicaSetWithPrimary"
        hello = client.admin.command("hello")
        assert str(hello["electionId"]) == "7fffffff0000000000000002", hello
