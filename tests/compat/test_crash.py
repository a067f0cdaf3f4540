"""Crash and restart tests of the persistent engine, through pymongo.

Unlike the rest of the suite these tests start servers of their own, always on
the `lsm` engine (the default), each on a fresh dbpath, because they kill and
restart them:

* SIGKILL at a random moment while several threads insert with
  `WriteConcern(j=True)`: after a restart on the same dbpath every acknowledged
  document is present and readable, the counts equal what a full scan finds,
  and the server takes writes again. Repeated BISONDB_CRASH_RUNS times (default
  10) on one dbpath, so later runs also recover a database that was itself
  recovered; acknowledged documents accumulate and are all checked every run.
* The same with the default write concern (j: false): acknowledged writes may
  be lost, but the database opens consistent.
* A clean restart (SIGTERM) keeps data, collections, options, counts.
* dbpath ownership, engine names, and the size figures of dbStats/listDatabases.

BISONDB_CRASH_SEED fixes the random kill moments (the seed is printed, so a
failing run can be replayed). BISONDB_SKIP_CRASH=1 skips the module:
scripts/test.sh sets it on the suite's second pass (these tests do not depend
on BISONDB_ENGINE, so one pass is enough).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from pymongo import MongoClient, WriteConcern
from pymongo.errors import DuplicateKeyError, OperationFailure, PyMongoError

from conftest import default_binary, free_tcp_port

pytestmark = [
    pytest.mark.skipif(
        os.environ.get("BISONDB_SKIP_CRASH") == "1" or bool(os.environ.get("BISONDB_URI")),
        reason="crash tests skipped (BISONDB_SKIP_CRASH=1, or an external server is in use)",
    ),
    # The postgres engine keeps no data under --dbpath (PostgreSQL does, and
    # its durability is PostgreSQL's; scripts/multiserver_kill.py and
    # scripts/failover_patroni.py kill servers over it instead).
    pytest.mark.not_on_postgres(
        "kills and restarts lsm servers on a local dbpath; the store of the postgres "
        "engine is PostgreSQL (see scripts/multiserver_kill.py)"),
]

CRASH_RUNS = int(os.environ.get("BISONDB_CRASH_RUNS", "10"))
WRITER_THREADS = 4
STARTUP_TIMEOUT_S = 30.0
PAD = "p" * 64


def log_tail(path: Path, limit: int = 6000) -> str:
    if not path.exists():
        return "(no server log)"
    return path.read_text(errors="replace")[-limit:]


@dataclass
class Proc:
    """One server process on a dbpath, reachable over TCP only."""

    process: subprocess.Popen
    port: int
    log_path: Path
    argv: list[str] = field(default_factory=list)

    @property
    def uri(self) -> str:
        return f"mongodb://127.0.0.1:{self.port}/"

    def client(self, **kwargs) -> MongoClient:
        # No retries: a write in flight when the server dies must fail, not be
        # sent again to the restarted server and blur what was acknowledged.
        kwargs.setdefault("serverSelectionTimeoutMS", 3000)
        return MongoClient(self.uri, retryWrites=False, retryReads=False, **kwargs)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def terminate(self) -> int:
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=10)
            pytest.fail(f"server ignored SIGTERM for 15 s\n{log_tail(self.log_path)}", pytrace=False)


def run_server(dbpath: Path, log_path: Path, *extra: str) -> subprocess.Popen:
    """Start the server binary without waiting; the caller checks the outcome."""
    binary = default_binary()
    if not binary.exists():
        pytest.fail(f"server binary {binary} not found: run `cargo build --release -p bisondb`", pytrace=False)
    argv = [str(binary), "--bind_ip", "127.0.0.1", "--dbpath", str(dbpath), "--nounixsocket", *extra]
    log = open(log_path, "ab")
    try:
        return subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    finally:
        log.close()


def start(dbpath: Path, log_path: Path, engine: str | None = "lsm", *extra: str) -> Proc:
    """Start a server on `dbpath` and return once it answers ping."""
    dbpath.mkdir(parents=True, exist_ok=True)
    port = free_tcp_port()
    args = ["--port", str(port), *extra]
    if engine is not None:
        args += ["--storageEngine", engine]
    process = run_server(dbpath, log_path, *args)
    proc = Proc(process=process, port=port, log_path=log_path, argv=args)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while True:
        if process.poll() is not None:
            pytest.fail(
                f"server exited with status {process.returncode} during startup\n{log_tail(log_path)}",
                pytrace=False,
            )
        try:
            with proc.client(serverSelectionTimeoutMS=500, connectTimeoutMS=500) as c:
                if c.admin.command("ping").get("ok") == 1:
                    return proc
        except PyMongoError:
            pass
        if time.monotonic() > deadline:
            process.kill()
            process.wait(timeout=10)
            pytest.fail(f"server not ready after {STARTUP_TIMEOUT_S:.0f} s\n{log_tail(log_path)}", pytrace=False)
        time.sleep(0.05)


@pytest.fixture
def servers():
    """Tracks started servers so a failing test never leaves one running."""
    started: list[Proc] = []
    yield started
    for proc in started:
        if proc.process.poll() is None:
            proc.process.kill()
            proc.process.wait(timeout=10)


def doc_for(writer: str, i: int) -> dict:
    return {"_id": f"{writer}:{i:07d}", "w": writer, "i": i, "pad": PAD, "sq": i * i}


def writer_loop(coll, writer: str, acked: list, stop: threading.Event, errors: list) -> None:
    """Insert one document at a time until the server dies or `stop` is set.

    `acked` receives each acknowledged `_id` in order. The first failure ends
    the loop: the server has gone away (the kill), and whatever was in flight is
    neither acknowledged nor required.
    """
    i = 0
    while not stop.is_set():
        try:
            coll.insert_one(doc_for(writer, i))
        except PyMongoError as exc:
            errors.append(exc)
            return
        acked.append(f"{writer}:{i:07d}")
        i += 1


def insert_until_killed(proc: Proc, run: int, wc: WriteConcern, kill_after: float) -> dict[str, list[str]]:
    """Run the writers, SIGKILL the server after `kill_after` s; return acked ids per writer."""
    client = proc.client(socketTimeoutMS=10000, maxPoolSize=WRITER_THREADS + 2)
    try:
        coll = client.crash.get_collection("docs", write_concern=wc)
        acked = {f"r{run:02d}w{t}": [] for t in range(WRITER_THREADS)}
        errors: list = []
        stop = threading.Event()
        threads = [
            threading.Thread(target=writer_loop, args=(coll, w, ids, stop, errors), daemon=True)
            for w, ids in acked.items()
        ]
        for t in threads:
            t.start()
        time.sleep(kill_after)
        proc.kill()
        stop.set()
        for t in threads:
            t.join(timeout=30)
            assert not t.is_alive(), "a writer thread hung after the server was killed"
        return acked
    finally:
        client.close()


def scan(client: MongoClient) -> dict[str, dict]:
    """Every document of crash.docs by a full collection scan, keyed by _id."""
    found: dict[str, dict] = {}
    for doc in client.crash.docs.find({}, batch_size=5000):
        assert doc["_id"] not in found, f"full scan returned {doc['_id']!r} twice"
        found[doc["_id"]] = doc
    return found


def check_consistent(client: MongoClient) -> dict[str, dict]:
    """The checks every restart must pass, whatever the write concern was."""
    found = scan(client)
    coll = client.crash.docs
    assert coll.count_documents({}) == len(found)
    assert coll.estimated_document_count() == len(found)
    # A range over _id (the clustered key) agrees with the full scan, and so
    # does a range over i, which the secondary index on i answers once the
    # server has secondary indexes.
    by_range = {d["_id"] for d in coll.find({"_id": {"$gte": ""}}, {"_id": 1})}
    assert by_range == set(found), "an _id range scan disagrees with the collection scan"
    by_i = {d["_id"] for d in coll.find({"i": {"$gte": 0}}, {"_id": 1})}
    assert by_i == set(found), "a range over i disagrees with the collection scan"
    for _id, doc in found.items():
        writer, _, i = _id.partition(":")
        assert doc == doc_for(writer, int(i)), f"document {_id!r} damaged: {doc!r}"
    # One writer's inserts are sequential, so recovery can only keep a prefix
    # of them: a later insert without an earlier one would be a reordered log.
    for writer in {d["w"] for d in found.values()}:
        numbers = sorted(d["i"] for d in found.values() if d["w"] == writer)
        assert numbers == list(range(len(numbers))), f"writer {writer}: recovered a non-prefix {numbers[:5]}..."
    return found


def check_accepts_writes(client: MongoClient, run: int, before: int) -> None:
    coll = client.crash.get_collection("docs", write_concern=WriteConcern(j=True))
    coll.insert_one(doc_for(f"r{run:02d}after", 0))
    assert coll.count_documents({}) == before + 1
    assert coll.find_one({"_id": f"r{run:02d}after:0000000"}) == doc_for(f"r{run:02d}after", 0)


def crash_runs(tmp_path: Path, servers: list, wc: WriteConcern, runs: int, require_acked: bool) -> tuple[int, int]:
    seed = int(os.environ.get("BISONDB_CRASH_SEED", str(random.randrange(1 << 30))))
    print(f"crash test seed: BISONDB_CRASH_SEED={seed}")
    rng = random.Random(seed)
    dbpath = tmp_path / "db"
    log_path = tmp_path / "bisondb.log"

    proc = start(dbpath, log_path)
    servers.append(proc)
    with proc.client() as c:
        try:
            c.crash.docs.create_index("i")
            print("secondary index on i: created (its entries are crash-tested too)")
        except OperationFailure as exc:
            # 238 NotImplemented until the server builds secondary indexes.
            if exc.code != 238:
                raise

    required: set[str] = set()
    total_acked = 0
    for run in range(runs):
        kill_after = rng.uniform(0.3, 1.5)
        acked = insert_until_killed(proc, run, wc, kill_after)
        n_acked = sum(len(v) for v in acked.values())
        total_acked += n_acked

        proc = start(dbpath, log_path)
        servers.append(proc)
        with proc.client() as c:
            found = check_consistent(c)
            if require_acked:
                for ids in acked.values():
                    required.update(ids)
                missing = required - set(found)
                assert not missing, (
                    f"run {run} (killed after {kill_after:.2f} s, seed {seed}): "
                    f"{len(missing)} acknowledged j:true documents lost, e.g. {sorted(missing)[:5]}"
                )
            check_accepts_writes(c, run, len(found))
        print(f"run {run}: killed after {kill_after:.2f} s, {n_acked} acknowledged, {len(found)} present")

    with proc.client() as c:
        final = c.crash.docs.count_documents({})
    assert proc.terminate() == 0, log_tail(log_path)
    # A single run may be killed before its first acknowledgement on a loaded
    # machine; all of them together must have tested something.
    assert total_acked > 0, f"no insert acknowledged in {runs} runs\n{log_tail(log_path)}"
    return total_acked, final


def test_sigkill_loses_no_journaled_write(tmp_path, servers):
    total_acked, present = crash_runs(tmp_path, servers, WriteConcern(j=True), CRASH_RUNS, require_acked=True)
    print(f"{CRASH_RUNS} SIGKILL runs: {total_acked} j:true inserts acknowledged, all present ({present} documents)")
    assert present >= total_acked


def test_sigkill_without_journal_leaves_a_consistent_database(tmp_path, servers):
    # Acknowledged writes may be lost (up to a journal commit interval), but the
    # database must open with counts, index and documents agreeing.
    total_acked, present = crash_runs(tmp_path, servers, WriteConcern(w=1), 2, require_acked=False)
    assert present > 0
    print(f"j:false: {total_acked} acknowledged, {present} present after the last restart")


def test_clean_restart_keeps_everything(tmp_path, servers):
    dbpath = tmp_path / "db"
    log_path = tmp_path / "bisondb.log"
    proc = start(dbpath, log_path)
    servers.append(proc)
    with proc.client() as c:
        db = c.keep
        db.create_collection("plain")
        db.create_collection("withopts", capped=True, size=100000, max=50)
        db.plain.insert_many([{"_id": i, "v": f"value {i}", "n": i % 7} for i in range(3000)])
        db.plain.delete_many({"n": 3})
        db.plain.update_many({"n": 5}, {"$set": {"updated": True}})
        c.other.things.insert_one({"_id": "x", "nested": {"a": [1, 2, 3]}})
        before_colls = {ci["name"]: ci for ci in db.list_collections()}
        before_indexes = sorted(ix["name"] for ix in db.plain.list_indexes())
        before_count = db.plain.count_documents({})
        before_docs = list(db.plain.find({}).sort("_id", 1))
    assert before_count == 3000 - len([i for i in range(3000) if i % 7 == 3])
    assert proc.terminate() == 0, log_tail(log_path)

    proc = start(dbpath, log_path)
    servers.append(proc)
    with proc.client() as c:
        db = c.keep
        after_colls = {ci["name"]: ci for ci in db.list_collections()}
        assert after_colls == before_colls
        # mongod rounds a capped size up to a multiple of 256.
        assert after_colls["withopts"]["options"] == {"capped": True, "size": 100096, "max": 50}
        assert sorted(ix["name"] for ix in db.plain.list_indexes()) == before_indexes
        assert db.plain.count_documents({}) == before_count
        assert db.plain.estimated_document_count() == before_count
        assert list(db.plain.find({}).sort("_id", 1)) == before_docs
        assert db.plain.count_documents({"updated": True}) == len([i for i in range(3000) if i % 7 == 5])
        assert c.other.things.find_one({"_id": "x"}) == {"_id": "x", "nested": {"a": [1, 2, 3]}}
        assert {"keep", "other"} <= set(c.list_database_names())
        # The _id index still holds after the restart.
        with pytest.raises(DuplicateKeyError):
            db.plain.insert_one({"_id": 1, "v": "again"})
        db.plain.insert_one({"_id": "new", "v": "new value"})
        assert db.plain.count_documents({}) == before_count + 1
    assert proc.terminate() == 0, log_tail(log_path)


def test_second_server_on_same_dbpath_fails_clearly(tmp_path, servers):
    dbpath = tmp_path / "db"
    proc = start(dbpath, tmp_path / "first.log")
    servers.append(proc)
    second_log = tmp_path / "second.log"
    second = run_server(dbpath, second_log, "--port", str(free_tcp_port()), "--storageEngine", "lsm")
    try:
        status = second.wait(timeout=STARTUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        second.kill()
        second.wait(timeout=10)
        pytest.fail("a second server on a dbpath in use kept running")
    output = log_tail(second_log)
    assert status != 0, output
    assert "mongod.lock" in output and "already running" in output, output
    # The first server is unharmed.
    with proc.client() as c:
        c.t.c.insert_one({"ok": 1})
        assert c.t.c.count_documents({}) == 1


def test_opening_with_another_engine_fails_clearly(tmp_path, servers):
    dbpath = tmp_path / "db"
    proc = start(dbpath, tmp_path / "first.log")
    servers.append(proc)
    assert proc.terminate() == 0
    log = tmp_path / "second.log"
    second = run_server(dbpath, log, "--port", str(free_tcp_port()), "--storageEngine", "inMemory")
    try:
        status = second.wait(timeout=15)
    except subprocess.TimeoutExpired:
        second.kill()
        second.wait(timeout=10)
        pytest.fail("inMemory started on a dbpath holding lsm files", pytrace=False)
    output = log_tail(log)
    assert status != 0 and "lsm" in output, output


def test_unknown_engine_lists_the_engines(tmp_path):
    log = tmp_path / "bisondb.log"
    process = run_server(tmp_path / "db", log, "--port", str(free_tcp_port()), "--storageEngine", "mmapv1")
    try:
        status = process.wait(timeout=STARTUP_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)
        pytest.fail("the server started with --storageEngine mmapv1")
    output = log_tail(log)
    assert status != 0, output
    assert "mmapv1" in output and "lsm" in output and "inMemory" in output, output


def test_wiredtiger_is_an_alias_of_lsm(tmp_path, servers):
    dbpath = tmp_path / "db"
    log_path = tmp_path / "bisondb.log"
    proc = start(dbpath, log_path, "wiredTiger")
    servers.append(proc)
    with proc.client() as c:
        c.a.b.insert_one({"_id": 1})
        assert c.admin.command("serverStatus").get("storageEngine", {}).get("name") in ("lsm", "wiredTiger")
    assert proc.terminate() == 0
    # Same files: the lsm engine opens them (and vice versa the alias is not
    # recorded as a different engine).
    proc = start(dbpath, log_path, "lsm")
    servers.append(proc)
    with proc.client() as c:
        assert c.a.b.find_one({"_id": 1}) == {"_id": 1}
    assert proc.terminate() == 0
    # The first start said it took the alias; the whole log, since the JSON
    # lines of the second start (client metadata included) fill more than a tail.
    assert "is an alias of 'lsm'" in log_path.read_text(errors="replace")


def test_default_engine_is_lsm(tmp_path, servers):
    dbpath = tmp_path / "db"
    proc = start(dbpath, tmp_path / "bisondb.log", None)
    servers.append(proc)
    with proc.client() as c:
        c.a.b.insert_one({"_id": 1})
    assert proc.terminate() == 0
    proc = start(dbpath, tmp_path / "bisondb.log", None)
    servers.append(proc)
    with proc.client() as c:
        assert c.a.b.find_one({"_id": 1}) == {"_id": 1}


def profile_doc(i: int) -> dict:
    # Seed 000's document.
    return {
        "name": "Huidong Tian",
        "title": "PhD",
        "id": i,
        "des": "I am a data scientist focusing on Python and R",
        "other": "As for why the book was created, a theory which has gained considerable interest, "
        "although still controversial is Persian imperial authorisation. ",
    }


PROFILE_DOCS = 20000


def load_profiles(proc: Proc) -> None:
    with proc.client() as c:
        coll = c.MM.single
        for start_i in range(0, PROFILE_DOCS, 1000):
            coll.insert_many([profile_doc(i) for i in range(start_i, start_i + 1000)])
        c.admin.command("fsync")


def test_sizes_are_real(tmp_path, servers):
    proc = start(tmp_path / "db", tmp_path / "bisondb.log")
    servers.append(proc)
    load_profiles(proc)
    with proc.client() as c:
        stats = c.MM.command("dbStats")
        print(f"dbStats after {PROFILE_DOCS} profile documents: {stats}")
        assert stats["objects"] == PROFILE_DOCS
        assert stats["dataSize"] > 0
        assert stats["storageSize"] > 0
        assert stats["totalSize"] >= stats["storageSize"]
        coll_stats = c.MM.command("collStats", "single")
        assert coll_stats["count"] == PROFILE_DOCS
        assert coll_stats["storageSize"] > 0
        dbs = {d["name"]: d for d in c.admin.command("listDatabases")["databases"]}
        assert dbs["MM"]["sizeOnDisk"] > 0, dbs
        assert dbs["MM"]["empty"] is False


# `fsync` flushes the memtable into LZ4-compressed tables, so right after it
# storageSize shows the compression.
def test_storage_size_shows_compression_after_fsync(tmp_path, servers):
    proc = start(tmp_path / "db", tmp_path / "bisondb.log")
    servers.append(proc)
    load_profiles(proc)
    with proc.client() as c:
        stats = c.MM.command("dbStats")
        assert 0 < stats["storageSize"] < stats["dataSize"], f"no compression: {stats}"
        coll_stats = c.MM.command("collStats", "single")
        assert 0 < coll_stats["storageSize"] < coll_stats["size"], coll_stats
