"""Operations helpers through mongosh, and what monitoring tools read.

mongosh's `db.currentOp()`, `db.killOp()`, `db.serverStatus()`,
`db.adminCommand({getLog})`, `db.setLogLevel()`/`db.getLogComponents()`,
`db.setProfilingLevel()`/`db.getProfilingStatus()`, `db.hostInfo()`,
`db.serverCmdLineOpts()`, `db.version()` and `rs.status()` are run by mongosh
itself (each script prints its findings as one extended-JSON line, checked
here). A long aggregation started from pymongo is found from mongosh with
`db.currentOp({"command.aggregate": ...})` and killed with `db.killOp()`; the
pymongo side must get 11601 Interrupted.

The serverStatus fields checked are the ones mongostat (mongo-tools'
`mongostat/status`), mongotop (`top`'s `totals`) and percona/mongodb_exporter's
serverStatus collector read: a tool that finds one missing shows a blank
column or drops the metric.
"""

import json
import subprocess
import threading
import time
import uuid

import pytest
from bson import json_util
from pymongo import MongoClient
from pymongo.errors import OperationFailure

from conftest import client_env, engine, with_database
from test_mongosh import require_mongosh

TIMEOUT_S = 120


def mongosh(uri: str, script: str, database: str = "admin"):
    """Run `script` in mongosh; return the value of its last `out(...)` line."""
    exe = require_mongosh()
    prelude = "function out(v) { print('@@' + EJSON.stringify(v, {relaxed: false})); }\n"
    result = subprocess.run(
        [str(exe), with_database(uri, database), "--quiet", "--norc", "--eval", prelude + script],
        env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    lines = [line[2:] for line in result.stdout.splitlines() if line.startswith("@@")]
    assert lines, f"mongosh printed no result:\n{output[-4000:]}"
    return json_util.loads(lines[-1])


@pytest.fixture
def tcp_uri(bisondb_server):
    return bisondb_server.tcp_uri


def test_current_op_forms(tcp_uri):
    r = mongosh(tcp_uri, """
        const all = db.currentOp();
        const own = db.currentOp({$ownOps: true});
        const idle = db.currentOp(true);
        out({all: all, own: own, idle: idle});
    """)
    for key in ("all", "own", "idle"):
        reply = r[key]
        assert reply["ok"] == 1, reply
        assert isinstance(reply["inprog"], list), reply
    # The currentOp command that produced the list is itself running.
    def is_current_op(op):
        # mongosh 2 sends {aggregate: 1, pipeline: [{$currentOp: ...}, ...]}.
        cmd = op.get("command", {})
        return "currentOp" in cmd or any("$currentOp" in st for st in cmd.get("pipeline", [])[:1])

    mine = [op for op in r["all"]["inprog"] if is_current_op(op)]
    assert mine, r["all"]
    op = mine[0]
    for field in ("opid", "active", "op", "ns", "command", "client", "desc", "connectionId",
                  "secs_running", "microsecs_running", "type"):
        assert field in op, (field, op)
    assert op["active"] is True
    assert op.get("appName", "").startswith("mongosh"), op
    assert any(is_current_op(o) for o in r["own"]["inprog"]), r["own"]
    # currentOp(true) adds idle connections (the pymongo monitor's at least
    # when the suite has clients open; mongosh's own monitoring connection).
    assert len(r["idle"]["inprog"]) >= len(r["all"]["inprog"]), r
    assert any(o.get("active") is False for o in r["idle"]["inprog"]), r["idle"]


def test_kill_long_aggregation_from_mongosh(tcp_uri):
    tag = "ops_kill_" + uuid.uuid4().hex[:8]
    runner = MongoClient(tcp_uri, appName=tag)
    try:
        coll = runner[tag].c
        coll.insert_many([{"x": i} for i in range(200)])
        outcome = {}

        def long_aggregation():
            try:
                # Each document sleeps 100 ms in JavaScript: ~20 s unless killed.
                list(coll.aggregate([
                    {"$match": {"$expr": {"$function": {
                        "body": "function() { sleep(100); return true; }", "args": [], "lang": "js"}}}},
                    {"$count": "n"},
                ]))
                outcome["result"] = "finished"
            except OperationFailure as exc:
                outcome["result"] = (exc.code, (exc.details or {}).get("codeName"))

        started = time.monotonic()
        thread = threading.Thread(target=long_aggregation)
        thread.start()
        r = mongosh(tcp_uri, f"""
            let ops = [];
            for (let i = 0; i < 100 && ops.length === 0; i++) {{
                ops = db.currentOp({{"command.aggregate": "c", ns: "{tag}.c"}}).inprog;
                if (ops.length === 0) sleep(100);
            }}
            if (ops.length === 0) {{ out({{found: false}}); }} else {{
                const killed = db.killOp(ops[0].opid);
                out({{found: true, op: ops[0], killed: killed}});
            }}
        """)
        thread.join(timeout=60)
        assert not thread.is_alive(), "killed aggregation did not end"
        assert r["found"], r
        assert r["op"]["appName"] == tag, r["op"]
        assert r["op"]["command"]["aggregate"] == "c", r["op"]
        assert r["killed"]["ok"] == 1, r["killed"]
        assert r["killed"]["info"] == "attempting to kill op", r["killed"]
        assert outcome.get("result") == (11601, "Interrupted"), outcome
        assert time.monotonic() - started < 19, "the aggregation ran to its end"
        runner.drop_database(tag)
    finally:
        runner.close()


# What mongostat (mongo-tools mongostat/status/readers.go and
# server_status.go) reads from serverStatus.
MONGOSTAT_FIELDS = [
    "host", "version", "process", "pid", "uptime", "uptimeMillis", "localTime",
    "opcounters.insert", "opcounters.query", "opcounters.update", "opcounters.delete",
    "opcounters.getmore", "opcounters.command",
    "mem.bits", "mem.resident", "mem.virtual", "mem.supported",
    "connections.current", "connections.available", "connections.totalCreated",
    "network.bytesIn", "network.bytesOut", "network.numRequests",
    "globalLock.activeClients.readers", "globalLock.activeClients.writers",
    "globalLock.activeClients.total",
    "globalLock.currentQueue.readers", "globalLock.currentQueue.writers",
    "globalLock.currentQueue.total", "globalLock.totalTime",
    "metrics.document.inserted", "metrics.document.returned",
    "metrics.document.updated", "metrics.document.deleted",
    "asserts.regular", "asserts.warning", "asserts.msg", "asserts.user", "asserts.rollovers",
]

# What percona/mongodb_exporter reads by name from serverStatus (its
# exporter/v1_compatibility.go: mongodb_op_counters_total,
# mongodb_connections, mongodb_memory, mongodb_mongod_metrics_*,
# mongodb_mongod_op_latencies_*, mongodb_asserts_total, uptime; the rest of
# serverStatus it walks generically, so any numeric field becomes a metric).
# Not reported by BisonDB (their metrics are absent): metrics.getLastError,
# metrics.operation (scanAndOrder, writeConflicts), wiredTiger; metrics.record
# is gone from mongod too (MMAPv1's).
EXPORTER_FIELDS = [
    "uptime", "asserts.regular", "asserts.user",
    "connections.current", "connections.available",
    "mem.resident", "mem.virtual",
    "opcounters.insert", "opcounters.command",
    "opcountersRepl.insert",
    "opLatencies.reads.latency", "opLatencies.reads.ops",
    "opLatencies.writes.latency", "opLatencies.writes.ops",
    "opLatencies.commands.latency", "opLatencies.commands.ops",
    "metrics.cursor.open.total", "metrics.cursor.open.noTimeout", "metrics.cursor.timedOut",
    "metrics.document.inserted",
    "metrics.queryExecutor.scanned", "metrics.queryExecutor.scannedObjects",
    "metrics.ttl.deletedDocuments", "metrics.ttl.passes",
    "network.bytesIn", "network.bytesOut", "network.numRequests",
    "globalLock.currentQueue.total", "globalLock.activeClients.total",
    "extra_info.page_faults",
]


def _lookup(doc, dotted):
    cur = doc
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return None
        cur = cur[part]
    return cur


def test_server_status_has_what_tools_read(tcp_uri):
    r = mongosh(tcp_uri, """
        db.getSiblingDB("ops_status").c.insertOne({a: 1});
        db.getSiblingDB("ops_status").c.find().toArray();
        const s = db.serverStatus();
        const t = db.adminCommand({top: 1});
        db.getSiblingDB("ops_status").dropDatabase();
        out({s: s, t: t});
    """)
    status = r["s"]
    assert status["ok"] == 1
    missing = [f for f in MONGOSTAT_FIELDS + EXPORTER_FIELDS if _lookup(status, f) is None]
    assert not missing, f"serverStatus lacks {missing}"
    # mongostat tells mongos from mongod by `process`; anything else is a mongod.
    assert status["process"] != "mongos"
    assert status["opcounters"]["insert"] >= 1
    assert status["opcounters"]["query"] >= 1
    assert status["connections"]["current"] >= 1
    assert status["mem"]["resident"] > 0
    assert status["network"]["bytesIn"] > 0
    # mongotop reads top's totals: per namespace, total/readLock/writeLock
    # each {time, count} (mongo-tools mongotop/command.go).
    top = r["t"]
    assert top["ok"] == 1
    ns = top["totals"].get("ops_status.c")
    assert ns is not None, sorted(top["totals"])
    for section in ("total", "readLock", "writeLock", "queries", "insert", "getmore",
                    "update", "remove", "commands"):
        assert set(ns[section]) >= {"time", "count"}, (section, ns)
    assert ns["insert"]["count"] >= 1 and ns["queries"]["count"] >= 1, ns


def test_get_log(tcp_uri):
    r = mongosh(tcp_uri, """
        // A helper taking a closure would not see the rejected promise:
        // each refusal is caught where it is awaited.
        let bad, notAdmin;
        try { bad = db.adminCommand({getLog: "nosuchlog"}); }
        catch (e) { bad = {ok: 0, code: e.code, codeName: e.codeName, errmsg: e.message}; }
        try { notAdmin = db.getSiblingDB("test").runCommand({getLog: "global"}); }
        catch (e) { notAdmin = {ok: 0, code: e.code, codeName: e.codeName, errmsg: e.message}; }
        out({
            global: db.adminCommand({getLog: "global"}),
            warnings: db.adminCommand({getLog: "startupWarnings"}),
            names: db.adminCommand({getLog: "*"}),
            bad: bad,
            notAdmin: notAdmin,
        });
    """)
    g = r["global"]
    assert g["ok"] == 1 and isinstance(g["totalLinesWritten"], int)
    assert g["log"] and g["totalLinesWritten"] >= len(g["log"])
    first = json.loads(g["log"][0])
    assert {"t", "s", "c", "id", "ctx", "msg"} <= set(first), first
    assert r["warnings"]["ok"] == 1 and isinstance(r["warnings"]["log"], list)
    assert r["warnings"]["totalLinesWritten"] == len(r["warnings"]["log"])
    assert r["names"]["ok"] == 1
    assert set(r["names"]["names"]) >= {"global", "startupWarnings"}
    assert r["bad"]["ok"] == 0 and "No log named 'nosuchlog'" in r["bad"]["errmsg"], r["bad"]
    # mongod: 13 Unauthorized "getLog may only be run against the admin database."
    assert r["notAdmin"]["ok"] == 0 and r["notAdmin"]["code"] == 13, r["notAdmin"]


def test_set_log_level_and_components(tcp_uri):
    marker_on = "opslogon_" + uuid.uuid4().hex[:8]
    marker_off = "opslogoff_" + uuid.uuid4().hex[:8]
    try:
        r = mongosh(tcp_uri, f"""
            const before = db.getLogComponents();
            const was1 = db.setLogLevel(1);
            db.getSiblingDB("{marker_on}").c.findOne();
            const logOn = db.adminCommand({{getLog: "global"}}).log;
            const was2 = db.setLogLevel(2, "query");
            const after = db.getLogComponents();
            db.setLogLevel(0);
            db.setLogLevel(-1, "query");
            db.getSiblingDB("{marker_off}").c.findOne();
            const logOff = db.adminCommand({{getLog: "global"}}).log;
            const reset = db.getLogComponents();
            out({{before, was1, was2, after, reset, logOn, logOff}});
        """)
    finally:
        # Never leave the server verbose for the rest of the suite.
        c = MongoClient(tcp_uri)
        c.admin.command({"setParameter": 1, "logLevel": 0,
                         "logComponentVerbosity": {"query": {"verbosity": -1}}})
        c.close()
    assert r["before"]["verbosity"] == 0, r["before"]
    assert r["before"]["query"]["verbosity"] == -1, r["before"]
    assert r["was1"]["ok"] == 1 and "was" in r["was1"], r["was1"]
    assert r["was2"]["ok"] == 1, r["was2"]
    assert r["after"]["verbosity"] == 1, r["after"]
    assert r["after"]["query"]["verbosity"] == 2, r["after"]
    assert r["reset"]["verbosity"] == 0 and r["reset"]["query"]["verbosity"] == -1, r["reset"]
    # At verbosity 1 a command writes a debug line ("s":"D1"); at 0 it does not.
    on = [json.loads(line) for line in r["logOn"] if marker_on in line]
    assert on, "no debug line for the command at verbosity 1"
    assert on[0]["s"] == "D1", on[0]
    assert not [line for line in r["logOff"] if marker_off in line]


def test_profiling_helpers(tcp_uri):
    name = "ops_prof_" + uuid.uuid4().hex[:8]
    r = mongosh(tcp_uri, """
        const was = db.setProfilingLevel(1, {slowms: 250});
        const st = db.getProfilingStatus();
        db.setProfilingLevel(0, {slowms: 100});
        const st0 = db.getProfilingStatus();
        out({was, st, st0});
    """, database=name)
    assert r["was"]["ok"] == 1 and r["was"]["was"] == 0, r["was"]
    assert r["st"]["was"] == 1 and r["st"]["slowms"] == 250, r["st"]
    assert r["st0"]["was"] == 0 and r["st0"]["slowms"] == 100, r["st0"]


def test_host_info_cmdline_version_rs_status(tcp_uri):
    r = mongosh(tcp_uri, """
        let rs_err = null;
        try { rs.status(); } catch (e) { rs_err = {code: e.code, codeName: e.codeName, msg: e.message}; }
        out({
            host: db.hostInfo(),
            opts: db.serverCmdLineOpts(),
            version: db.version(),
            build: db.adminCommand({buildInfo: 1}).version,
            rs: rs_err,
        });
    """)
    host = r["host"]
    assert host["ok"] == 1
    assert {"hostname", "cpuAddrSize", "memSizeMB", "numCores"} <= set(host["system"]), host
    assert {"type", "name"} <= set(host["os"]), host
    opts = r["opts"]
    assert opts["ok"] == 1
    assert isinstance(opts["argv"], list) and opts["argv"], opts
    assert "net" in opts["parsed"] and opts["parsed"]["net"]["port"], opts
    assert r["version"] == r["build"] and r["version"].split(".")[0].isdigit(), r
    # mongod standalone: 76 NoReplicationEnabled "not running with --replSet";
    # a mongos (the postgres engine answers as one) has no replSetGetStatus: 59.
    assert r["rs"] is not None, "rs.status() did not fail on a standalone"
    if engine() == "postgres":
        assert r["rs"]["code"] == 59 and r["rs"]["codeName"] == "CommandNotFound", r["rs"]
    else:
        assert r["rs"]["code"] == 76 and r["rs"]["codeName"] == "NoReplicationEnabled", r["rs"]
