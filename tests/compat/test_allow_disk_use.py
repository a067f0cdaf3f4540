"""Blocking aggregation stages past their memory limit, through pymongo.

A server of its own runs with the limits lowered through `--setParameter`
(`internalQueryMaxBlockingSortMemoryUsageBytes`,
`internalDocumentSourceGroupMaxMemoryBytes`): `$sort` and `$group` spill to
`<dbpath>/_tmp` and give the whole result; `allowDiskUse=False` fails with 292
QueryExceededMemoryLimitNoDiskUseAllowed, as mongod 8.0.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import OperationFailure, PyMongoError

from conftest import default_binary, free_tcp_port

N = 3000


@pytest.fixture(scope="module")
def low_limit_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("spill")
    dbpath = workdir / "db"
    dbpath.mkdir()  # inMemory spills under an existing dbpath, as mongod
    port = free_tcp_port()
    argv = [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
            "--nounixsocket", "--dbpath", str(dbpath), "--storageEngine", "inMemory",
            "--setParameter", "internalQueryMaxBlockingSortMemoryUsageBytes=8192",
            "--setParameter", "internalDocumentSourceGroupMaxMemoryBytes=8192"]
    log = open(workdir / "server.log", "wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    client = MongoClient(f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=5000")
    deadline = time.monotonic() + 20
    while True:
        try:
            client.admin.command("ping")
            break
        except PyMongoError:
            if time.monotonic() > deadline or process.poll() is not None:
                process.kill()
                raise
            time.sleep(0.1)
    coll = client.spill.c
    coll.insert_many([{"_id": i, "a": (i * 7919) % 257, "pad": "x" * (i % 30)} for i in range(N)])
    try:
        yield coll, dbpath / "_tmp"
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def spill_files(tmp: Path) -> int:
    return len(list(tmp.iterdir())) if tmp.is_dir() else 0


def test_sort_spills_and_keeps_the_order(low_limit_server):
    coll, tmp = low_limit_server
    cursor = coll.aggregate([{"$sort": {"a": 1, "_id": 1}}], batchSize=50)
    first = next(cursor)
    assert spill_files(tmp) > 0  # the runs wait on disk while the cursor is open
    got = [(first["a"], first["_id"])] + [(d["a"], d["_id"]) for d in cursor]
    assert got == sorted(((i * 7919) % 257, i) for i in range(N))
    assert spill_files(tmp) == 0


def test_group_spills_and_finds_every_group(low_limit_server):
    coll, tmp = low_limit_server
    groups = list(coll.aggregate([{"$group": {"_id": "$a", "n": {"$sum": 1}}}]))
    want: dict[int, int] = {}
    for i in range(N):
        want[(i * 7919) % 257] = want.get((i * 7919) % 257, 0) + 1
    assert {g["_id"]: g["n"] for g in groups} == want
    assert len(groups) == len(want)
    assert spill_files(tmp) == 0


@pytest.mark.parametrize("stage", [{"$sort": {"a": 1}}, {"$group": {"_id": "$_id"}}])
def test_no_disk_use_fails_with_292(low_limit_server, stage):
    coll, _ = low_limit_server
    with pytest.raises(OperationFailure) as e:
        list(coll.aggregate([stage], allowDiskUse=False))
    assert e.value.code == 292
    assert e.value.details["codeName"] == "QueryExceededMemoryLimitNoDiskUseAllowed"
