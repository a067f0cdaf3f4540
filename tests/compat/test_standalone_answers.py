"""What a standalone mongod 8 answers where pymongo's own suite looks, through pymongo.

Each test states mongod's answer (from its source or manual, quoted in the test)
for a behaviour pymongo's whole suite found different: read concerns a standalone
cannot serve, the Stable API's strict mode, a failCommand fail point aimed at the
first `hello` of an application, an update pipeline naming an unknown stage,
`showRecordId`, bulkWrite's result cursor and the ingress connection rate limiter.
The server runs with `--setParameter enableTestCommands=1`, as drivers start
mongod for their suites.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure
from pymongo.server_api import ServerApi

from conftest import _stop, default_binary, start_server


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("standalone")
    # A short directory: a Unix socket's path is limited to ~100 bytes.
    sockdir = Path(tempfile.mkdtemp(prefix="bsa-"))
    started = start_server(default_binary(), "inMemory", workdir, sockdir,
                           ("--setParameter", "enableTestCommands=1"))
    uri = started.tcp_uri + "?serverSelectionTimeoutMS=5000"
    client = MongoClient(uri)
    try:
        yield uri, client
    finally:
        client.close()
        if started.process is not None:
            _stop(started.process)
        shutil.rmtree(sockdir, ignore_errors=True)


def failure(run) -> OperationFailure:
    with pytest.raises(OperationFailure) as e:
        run()
    return e.value


def test_read_concerns_a_standalone_cannot_serve(server):
    _, client = server
    db = client.rc
    db.c.insert_one({"_id": 1})

    def find(rc):
        return db.command("find", "c", readConcern=rc)

    # mongod's waitForReadConcernImpl without replication:
    #   linearizable -> NotAReplicaSet "node needs to be a replica set member to use read concern"
    #   snapshot     -> NotAReplicaSet "node needs to be a replica set member to use readConcern: snapshot"
    #   afterClusterTime/atClusterTime -> IllegalOperation
    #     "Cannot specify afterClusterTime readConcern without replication enabled"
    e = failure(lambda: find({"level": "snapshot"}))
    assert (e.code, e.details["codeName"]) == (123, "NotAReplicaSet")
    assert e.details["errmsg"] == "node needs to be a replica set member to use readConcern: snapshot"
    e = failure(lambda: find({"level": "linearizable"}))
    assert (e.code, e.details["errmsg"]) == (
        123, "node needs to be a replica set member to use read concern")
    from bson import Timestamp
    e = failure(lambda: find({"afterClusterTime": Timestamp(1, 1)}))
    assert (e.code, e.details["errmsg"]) == (
        20, "Cannot specify afterClusterTime readConcern without replication enabled")
    # An unknown level fails to parse (the IDL enumeration), as in replica-set mode.
    e = failure(lambda: find({"level": "unknown"}))
    assert e.code == 9
    assert "readConcern.level" in e.details["errmsg"]
    # local, available and majority read the latest data on a standalone.
    for level in ("local", "available", "majority"):
        assert find({"level": level})["cursor"]["firstBatch"] == [{"_id": 1}]


def test_snapshot_session_reads_fail_on_a_standalone(server):
    # The sessions specification's "snapshot-sessions-not-supported-server-error":
    # on a single server a snapshot session's find/aggregate/distinct get a server error.
    _, client = server
    coll = client.rc.c
    with client.start_session(snapshot=True) as s:
        e = failure(lambda: coll.find_one({}, session=s))
        assert e.code == 123
        e = failure(lambda: coll.distinct("_id", session=s))
        assert e.code == 123


def test_api_strict_refuses_commands_outside_version_1(server):
    uri, _ = server
    strict = MongoClient(uri, server_api=ServerApi("1", strict=True))
    try:
        db = strict.api
        db.c.insert_many([{"_id": i, "x": i} for i in range(3)])
        assert db.c.count_documents({}) == 3  # count is in version 1 (6.0, 5.0.9)
        # initializeAPIParameters: "Provided apiStrict:true, but the command distinct is
        # not in API Version 1", 323 APIStrictError.
        e = failure(lambda: db.c.distinct("x"))
        assert (e.code, e.details["codeName"]) == (323, "APIStrictError")
        assert e.details["errmsg"] == (
            "Provided apiStrict:true, but the command distinct is not in API Version 1")
        e = failure(lambda: db.command("testVersion2"))
        assert e.code == 323
        assert "command testVersion2 is not in API Version 1" in e.details["errmsg"]
        # The legacy name of hello is outside the Stable API; hello is in it.
        assert failure(lambda: db.command("isMaster")).code == 323
        assert db.command("hello")["isWritablePrimary"] is True
        # $listLocalSessions is registered kNeverInVersion1.
        e = failure(lambda: strict.admin.aggregate([{"$listLocalSessions": {}}]).to_list())
        assert e.code == 323
        assert "$listLocalSessions is not allowed with 'apiStrict: true'" in e.details["errmsg"]
    finally:
        strict.close()
    plain = MongoClient(uri)
    try:
        # apiStrict without apiVersion: 4886600.
        e = failure(lambda: plain.api.command({"ping": 1, "apiStrict": True}))
        assert e.code == 4886600
        # Without apiStrict the test command runs.
        assert plain.api.command("testVersion2")["ok"] == 1.0
        # apiVersion outside the supported ones: 322 APIVersionError.
        e = failure(lambda: plain.api.command({"ping": 1, "apiVersion": "2"}))
        assert (e.code, e.details["codeName"]) == (322, "APIVersionError")
    finally:
        plain.close()


def test_fail_command_on_hello_applies_to_the_first_hello(server):
    # Drivers' CMAP and CSOT tests put failCommand on hello with appName; mongod
    # reads the handshake's client metadata before the fail point, so the first
    # hello of a connection of that application is the one that fails.
    uri, client = server
    before = client.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 1},
        data={"failCommands": ["hello", "isMaster"], "errorCode": 91,
              "appName": "firstHelloApp"})["count"]
    app = MongoClient(uri, appname="firstHelloApp", serverMonitoringMode="poll",
                      heartbeatFrequencyMS=500000)
    try:
        # The monitor's first hello fails, its next check succeeds.
        assert app.admin.command("ping")["ok"] == 1.0
    finally:
        app.close()
        after = client.admin.command("configureFailPoint", "failCommand", mode="off")["count"]
    assert after - before == 1


def test_update_pipeline_with_an_unknown_stage_fails_the_command(server):
    # mongod lite-parses every statement's pipeline before running any, so an
    # unknown stage fails the update command itself (40324), while a known stage
    # an update may not use is that statement's write error (72).
    _, client = server
    db = client.upd
    db.c.insert_one({"x": 1})
    e = failure(lambda: db.command(
        "update", "c", updates=[{"q": {"x": 1}, "u": [{"$invalidOperator": True}]}]))
    assert e.code == 40324
    assert e.details["errmsg"] == "Unrecognized pipeline stage name: '$invalidOperator'"
    reply = db.command("update", "c", updates=[{"q": {"x": 1}, "u": [{"$match": {}}]}])
    assert reply["ok"] == 1.0
    assert reply["writeErrors"][0]["code"] == 72


def test_show_record_id(server):
    # mongod appends each result's record id as `$recordId` after the projection;
    # with returnKey the result is the key alone (the command-monitoring spec's
    # "A successful find with showRecordId and returnKey" expects `{_id: 1}`,
    # no extra field). An ordinary collection's record id is a
    # NumberLong that grows with insertion; a collection clustered by `_id`
    # (mongod's clustered collections) has the `_id`'s key as its record id,
    # serialized as BinData (RecordId::serializeToken). The same document
    # keeps the same id.
    _, client = server
    db = client.rid
    db.c.drop()
    db.c.insert_many([{"_id": i, "x": i} for i in range(3)])
    first = db.command("find", "c", showRecordId=True, projection={"x": 1, "_id": 0})
    batch = first["cursor"]["firstBatch"]
    assert [d["x"] for d in batch] == [0, 1, 2]
    ids = [d["$recordId"] for d in batch]
    assert all(isinstance(r, int) for r in ids) and ids == sorted(set(ids))
    again = db.command("find", "c", filter={"x": 1}, showRecordId=True)["cursor"]["firstBatch"]
    assert again == [{"_id": 1, "x": 1, "$recordId": ids[1]}]
    keys = db.command("find", "c", showRecordId=True, returnKey=True,
                      hint={"_id": 1})["cursor"]["firstBatch"]
    assert keys == [{"_id": i} for i in range(3)]
    db.cl.drop()
    db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
    db.cl.insert_one({"_id": 5})
    cl = db.command("find", "cl", showRecordId=True)["cursor"]["firstBatch"]
    assert isinstance(cl[0]["$recordId"], bytes) and cl[0]["$recordId"]


def test_ingress_connection_rate_limiter(server):
    # mongod's ingressConnectionEstablishmentRateLimiter (8.0.x, 8.2): with the
    # bucket empty and no queue, a new connection is closed before its handshake.
    import socket

    uri, client = server
    port = int(uri.split(":")[2].split("/")[0])
    names = ["ingressConnectionEstablishmentRateLimiterEnabled",
             "ingressConnectionEstablishmentRatePerSec",
             "ingressConnectionEstablishmentBurstCapacitySecs",
             "ingressConnectionEstablishmentMaxQueueDepth"]
    defaults = client.admin.command("getParameter", "*")
    assert defaults[names[0]] is False and defaults[names[3]] == 0
    client.admin.command("setParameter", 1, **{names[1]: 1})
    client.admin.command("setParameter", 1, **{names[2]: 1})
    was = client.admin.command("setParameter", 1, **{names[0]: True})["was"]
    assert was is False
    try:
        assert client.admin.command("getParameter", 1, **{names[1]: 1})[names[1]] == 1
        socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(4)]
        closed = 0
        for s in socks:
            s.settimeout(1.0)
            try:
                closed += s.recv(1) == b""
            except socket.timeout:
                pass  # served: the server waits for this connection's request
            finally:
                s.close()
        # One token (1/s for a 1 s burst): one is served, the others closed.
        assert closed == 3
    finally:
        client.admin.command("setParameter", 1, **{names[0]: False})
    # Off again: every connection is served.
    s = socket.create_connection(("127.0.0.1", port))
    s.settimeout(0.5)
    with pytest.raises(socket.timeout):
        s.recv(1)
    s.close()


def test_bulk_write_results_are_a_cursor(server):
    # mongod's bulkWrite answers its per-op results as a cursor on
    # admin.$cmd.bulkWrite: the first batch stops at cursor.batchSize (or 16 MiB)
    # and getMore on "$cmd.bulkWrite" returns the rest.
    _, client = server
    client.bw.c.drop()
    reply = client.admin.command({
        "bulkWrite": 1,
        "ops": [{"insert": 0, "document": {"_id": i}} for i in range(3)],
        "nsInfo": [{"ns": "bw.c"}],
        "cursor": {"batchSize": 1},
    })
    assert reply["nInserted"] == 3
    cursor = reply["cursor"]
    assert cursor["ns"] == "admin.$cmd.bulkWrite"
    assert [r["idx"] for r in cursor["firstBatch"]] == [0]
    assert cursor["id"] != 0
    more = client.admin.command("getMore", cursor["id"], collection="$cmd.bulkWrite")
    assert [r["idx"] for r in more["cursor"]["nextBatch"]] == [1, 2]
    assert more["cursor"]["id"] == 0
    # Without a batchSize every result fits in the first batch.
    client.bw.c.drop()
    reply = client.admin.command({
        "bulkWrite": 1,
        "ops": [{"insert": 0, "document": {"_id": i}} for i in range(3)],
        "nsInfo": [{"ns": "bw.c"}],
    })
    assert reply["cursor"]["id"] == 0 and len(reply["cursor"]["firstBatch"]) == 3
