"""pymongo against BisonDB: change streams.

On the session's standalone server, watch() fails with 40573 as on a
standalone mongod (pymongo's own test_change_stream.py expects that). A
server of this module's own runs with --replSet rs0 and is initiated as
rs.initiate() does; there collection, database and client watch() follow
the oplog: events in order, resume_after / start_after / start_at_operation_time,
an invalidate after the watched collection's drop, full_document="updateLookup",
and a change stream pipeline. The oplog entries are written by hand in
mongod's shape, so these tests pin down the reader whatever writes them.
"""

import datetime
import shutil
import subprocess
import tempfile
import time
import uuid
from pathlib import Path

import pytest
from bson import Binary, Timestamp
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import _stop, default_binary, free_tcp_port, STARTUP_TIMEOUT_S

UI = Binary(uuid.UUID(int=7).bytes, 4)


def ts(n):
    # Far ahead of the clock: entries the server writes itself sort before.
    return Timestamp(4_000_000_000 + n, 1)


def entry(n, op, ns, o, o2=None):
    e = {"ts": ts(n), "t": 1, "v": 2, "op": op, "ns": ns, "ui": UI, "o": o,
         "wall": datetime.datetime.now(datetime.timezone.utc)}
    if o2 is not None:
        e["o2"] = o2
    return e


def test_a_standalone_refuses_watch(db):
    with pytest.raises(OperationFailure) as info:
        db.c.watch()
    assert info.value.code == 40573


@pytest.fixture(scope="module")
def rs_client():
    """A client of a server of this module's own in replica-set mode."""
    workdir = Path(tempfile.mkdtemp(prefix="bisondb-cs-"))
    (workdir / "db").mkdir()
    port = free_tcp_port()
    log = open(workdir / "bisondb.log", "wb")
    process = subprocess.Popen(
        [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
         "--dbpath", str(workdir / "db"), "--nounixsocket", "--replSet", "rs0",
         # Test commands let the tests insert hand-made oplog entries.
         "--setParameter", "enableTestCommands=1"],
        stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    log.close()
    client = MongoClient(f"mongodb://127.0.0.1:{port}/?directConnection=true",
                         serverSelectionTimeoutMS=int(STARTUP_TIMEOUT_S * 1000))
    try:
        client.admin.command("replSetInitiate", {
            "_id": "rs0", "members": [{"_id": 0, "host": f"127.0.0.1:{port}"}]})
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not client.admin.command("hello").get("isWritablePrimary"):
            assert time.monotonic() < deadline, "never became primary"
            time.sleep(0.05)
        yield client
    finally:
        client.close()
        _stop(process)
        shutil.rmtree(workdir, ignore_errors=True)


def write_oplog(client, *entries):
    client.local["oplog.rs"].insert_many(list(entries))


def test_watch_events_and_resume(rs_client):
    coll = rs_client.cs.c
    with coll.watch(max_await_time_ms=1000) as stream, \
            rs_client.cs.watch(max_await_time_ms=1000) as db_stream, \
            rs_client.watch(max_await_time_ms=1000) as all_stream:
        write_oplog(
            rs_client,
            entry(100, "i", "cs.c", {"_id": 1, "a": 1}, {"_id": 1}),
            entry(101, "i", "other.x", {"_id": 2}),
            entry(102, "u", "cs.c", {"$v": 2, "diff": {"u": {"a": 2}, "d": {"b": False}}}, {"_id": 1}),
            entry(103, "d", "cs.c", {"_id": 1}),
        )
        events = [stream.next() for _ in range(3)]
        assert [e["operationType"] for e in events] == ["insert", "update", "delete"]
        assert events[0]["fullDocument"] == {"_id": 1, "a": 1}
        assert events[0]["ns"] == {"db": "cs", "coll": "c"}
        assert events[0]["clusterTime"] == ts(100)
        assert events[1]["updateDescription"] == {
            "updatedFields": {"a": 2}, "removedFields": ["b"], "truncatedArrays": []}
        assert events[2]["documentKey"] == {"_id": 1}
        tokens = [e["_id"]["_data"] for e in events]
        assert tokens == sorted(tokens)
        assert [db_stream.next()["operationType"] for _ in range(3)] == ["insert", "update", "delete"]
        assert [all_stream.next()["ns"]["db"] for _ in range(4)] == ["cs", "other", "cs", "cs"]
        # Nothing more: an empty batch still moves the resume token on.
        assert stream.try_next() is None
        assert stream.resume_token["_data"] >= tokens[-1]

    with coll.watch(resume_after=events[0]["_id"], max_await_time_ms=500) as resumed:
        assert [resumed.next()["operationType"] for _ in range(2)] == ["update", "delete"]
    with coll.watch(start_at_operation_time=ts(102), max_await_time_ms=500) as at:
        assert at.next()["operationType"] == "update"
    with pytest.raises(OperationFailure) as info:
        with coll.watch(start_at_operation_time=Timestamp(1, 0)) as lost:
            lost.try_next()
    assert info.value.code == 286


def test_update_lookup_pipeline_and_invalidate(rs_client):
    coll = rs_client.cs2.c
    coll.insert_one({"_id": 1, "a": 9})
    write_oplog(
        rs_client,
        entry(200, "u", "cs2.c", {"$v": 2, "diff": {"u": {"a": 9}}}, {"_id": 1}),
        entry(201, "i", "cs2.c", {"_id": 2, "k": "x"}, {"_id": 2}),
    )
    with coll.watch(full_document="updateLookup", start_at_operation_time=ts(200)) as s:
        assert s.next()["fullDocument"] == {"_id": 1, "a": 9}
    pipeline = [{"$match": {"operationType": "insert"}}, {"$project": {"fullDocument.k": 1}}]
    with coll.watch(pipeline, start_at_operation_time=ts(200)) as s:
        e = s.next()
        assert set(e) == {"_id", "fullDocument"} and e["fullDocument"] == {"k": "x"}
    with coll.watch(max_await_time_ms=500) as s:
        write_oplog(rs_client, entry(202, "c", "cs2.$cmd", {"drop": "c"}))
        assert s.next()["operationType"] == "drop"
        invalidate = s.next()
        assert invalidate["operationType"] == "invalidate"
        assert not s.alive
    with coll.watch(start_after=invalidate["_id"], max_await_time_ms=200) as s:
        assert s.try_next() is None
    with pytest.raises(OperationFailure) as info:
        coll.watch(resume_after=invalidate["_id"])
    assert info.value.code == 260


def test_watch_real_writes(rs_client):
    coll = rs_client.cs3.c
    coll.insert_one({"_id": 0})
    pad = "x" * 200  # keeps an update's diff smaller than the document
    with coll.watch(max_await_time_ms=1000) as s, \
            rs_client.cs3.watch(show_expanded_events=True, max_await_time_ms=1000) as dbs:
        coll.insert_one({"_id": 1, "a": 1, "pad": pad})
        coll.update_one({"_id": 1}, {"$set": {"a": 2}, "$unset": {"nope": ""}})
        coll.replace_one({"_id": 1}, {"b": 1})
        coll.delete_one({"_id": 1})
        coll.create_index("b")
        coll.drop()
        events = [s.next() for _ in range(6)]
        assert [e["operationType"] for e in events] == [
            "insert", "update", "replace", "delete", "drop", "invalidate"]
        assert events[0]["fullDocument"] == {"_id": 1, "a": 1, "pad": pad}
        assert events[1]["updateDescription"]["updatedFields"] == {"a": 2}
        assert events[2]["fullDocument"] == {"_id": 1, "b": 1}
        expanded = [dbs.next() for _ in range(6)]
        assert [e["operationType"] for e in expanded] == [
            "insert", "update", "replace", "delete", "createIndexes", "drop"]
        assert "collectionUUID" in expanded[0]
        assert expanded[1]["updateDescription"]["disambiguatedPaths"] == {}
