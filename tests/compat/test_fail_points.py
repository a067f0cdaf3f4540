"""Test commands and fail points through pymongo, as drivers' own test suites use them.

The session's server runs without test commands, so `configureFailPoint` does not
exist there; the other tests start a server of their own with
`--setParameter enableTestCommands=1`, as drivers start mongod for their suites.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest
from pymongo import MongoClient
from pymongo.errors import AutoReconnect, OperationFailure, PyMongoError

from conftest import default_binary, free_tcp_port


def test_no_configure_fail_point_without_test_commands(client):
    with pytest.raises(OperationFailure) as e:
        client.admin.command("configureFailPoint", "failCommand", mode="off")
    assert e.value.code == 59
    assert client.admin.command("getParameter", 1, enableTestCommands=1)["enableTestCommands"] is False


def test_unknown_set_parameter_stops_the_server(tmp_path: Path):
    argv = [str(default_binary()), "--port", str(free_tcp_port()), "--nounixsocket",
            "--dbpath", str(tmp_path / "db"), "--storageEngine", "inMemory",
            "--setParameter", "foo=bar"]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=20)
    assert done.returncode == 2
    assert "Unknown --setParameter 'foo'" in done.stderr


@pytest.fixture(scope="module")
def test_server(tmp_path_factory):
    workdir = tmp_path_factory.mktemp("failpoints")
    port = free_tcp_port()
    argv = [str(default_binary()), "--port", str(port), "--bind_ip", "127.0.0.1",
            "--nounixsocket", "--dbpath", str(workdir / "db"), "--storageEngine", "inMemory",
            "--setParameter", "enableTestCommands=1"]
    log = open(workdir / "server.log", "wb")
    process = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    # No retries: a closed connection must surface, not be retried away.
    client = MongoClient(f"mongodb://127.0.0.1:{port}/?serverSelectionTimeoutMS=5000",
                         retryReads=False, retryWrites=False)
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
    try:
        yield client
    finally:
        client.close()
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
        log.close()


def test_parameters_say_test_commands_are_on(test_server):
    assert test_server.admin.command("getParameter", "*")["enableTestCommands"] is True
    parsed = test_server.admin.command("getCmdLineOpts")["parsed"]
    assert parsed["setParameter"] == {"enableTestCommands": "1"}


def test_fail_command_times_and_close_connection(test_server):
    coll = test_server.fp.c
    coll.drop()
    reply = test_server.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 1},
        data={"failCommands": ["insert"], "errorCode": 8, "errorLabels": ["Mine"]})
    assert reply["ok"] == 1.0 and "count" in reply
    with pytest.raises(OperationFailure) as e:
        coll.insert_one({"_id": 1})
    assert e.value.code == 8
    assert e.value.details["errmsg"] == "Failing command via 'failCommand' failpoint"
    assert e.value.has_error_label("Mine")
    coll.insert_one({"_id": 1})  # times: 1 is used up

    test_server.admin.command(
        "configureFailPoint", "failCommand", mode={"times": 1},
        data={"failCommands": ["find"], "closeConnection": True})
    with pytest.raises(AutoReconnect):
        coll.find_one({})
    assert coll.find_one({}) == {"_id": 1}
    off = test_server.admin.command("configureFailPoint", "failCommand", mode="off")
    assert off["count"] >= 2


def test_max_time_always_time_out(test_server):
    from pymongo.errors import ExecutionTimeout

    test_server.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="alwaysOn")
    try:
        test_server.fp.command("count", "c")
        with pytest.raises(ExecutionTimeout):
            test_server.fp.command("count", "c", maxTimeMS=1)
    finally:
        test_server.admin.command("configureFailPoint", "maxTimeAlwaysTimeOut", mode="off")
