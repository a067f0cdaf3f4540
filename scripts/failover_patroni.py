#!/usr/bin/env python3
"""Failover test of the postgres engine: PostgreSQL under Patroni loses its
primary mid-load; BisonDB must resume writes by itself and lose nothing.

Usage (as root, or as a user who can run PostgreSQL; pymongo is needed):
    .venv/bin/python scripts/failover_patroni.py [--runs N] [--bin PATH] ...

Each run, under one temporary directory and on free private ports:
  1. one etcd; two PostgreSQL 15 nodes under Patroni (etcd3 DCS) with
     `synchronous_mode: true`; waits for a leader and a synchronous standby;
  2. one BisonDB server (`--servers 2`: two; that needs a build that lets
     several servers share one store) with
     `--storageEngine postgres --postgresUri
      postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/bisondb?target_session_attrs=read-write`;
  3. a load with pymongo: writers inserting with `w: 1, j: true` (one of them
     with `insert_many`) into a collection with a unique secondary index,
     recording every acknowledged `_id`; a failed write is retried by the
     writer itself until acknowledged, and a duplicate key on a retry counts
     as written (the failed attempt had committed); a reader keeps cursors
     open across the failover;
  4. after --before seconds, kills the Patroni leader's node: kill -9 of its
     Patroni and of its postmaster with all its backends (`--kill postmaster`:
     the postmaster and backends only, Patroni stays and may restart it);
  5. measures the time from the kill until writes are acknowledged again
     (first writer, and every writer), loads --after seconds more;
  6. checks every acknowledged `_id` is present, no document is there that
     was never acknowledged, and counts are exact: `count_documents`, the
     count record (`estimated_document_count`), an index-only count of the
     unique index, then again after restarting BisonDB on the store (the
     count record as stored, not as cached).
Everything started is stopped and the directory removed at the end, also on
failure or Ctrl-C (`--keep` keeps the directory for its logs).

Installs what is missing (as root, Debian): `apt-get update` once, then
`apt-get install patroni etcd-server` (and `postgresql` without initdb).
Exits non-zero when a run lost an acknowledged write, found a count that is
not exact, a duplicate, or took longer than --goal seconds (30) to resume.
Prints one JSON line per run (prefix `RESULT`) and a summary.
"""

import argparse
import collections
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

import pymongo
from pymongo.errors import BulkWriteError, DuplicateKeyError, OperationFailure, PyMongoError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PG_BIN_CANDIDATES = ["/usr/lib/postgresql/%d/bin" % v for v in range(20, 11, -1)]
SCOPE = "bisondb-failover"


def log(msg):
    print("[%s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# -- installation ---------------------------------------------------------------


def pg_bin_dir():
    for d in PG_BIN_CANDIDATES:
        if os.path.isfile(os.path.join(d, "initdb")):
            return d
    return None


def ensure_packages():
    missing = []
    if not shutil.which("patroni"):
        missing.append("patroni")
    if not shutil.which("etcd"):
        missing.append("etcd-server")
    if pg_bin_dir() is None:
        missing.append("postgresql")
    if not missing:
        return
    if os.geteuid() != 0:
        sys.exit("failover_patroni: missing %s; install them (apt-get install %s)"
                 % (", ".join(missing), " ".join(missing)))
    log("installing %s" % " ".join(missing))
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    subprocess.run(["apt-get", "update", "-q"], check=True, env=env, stdin=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", "--no-install-recommends"] + missing,
                   check=True, env=env, stdin=subprocess.DEVNULL)
    # The packages enable services; this machine may have no init to start
    # them, and the test wants none running anyway.
    for svc in ("patroni", "etcd"):
        subprocess.run(["sh", "-c", "command -v systemctl >/dev/null && systemctl stop %s "
                        ">/dev/null 2>&1; true" % svc])


# -- processes ------------------------------------------------------------------


def free_ports(n):
    socks, ports = [], []
    for _ in range(n):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        socks.append(s)
        ports.append(s.getsockname()[1])
    for s in socks:
        s.close()
    return ports


def children_of(pid):
    """Direct children of `pid` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % entry) as f:
                stat = f.read()
            ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        if ppid == pid:
            out.append(int(entry))
    return out


def kill9(pid):
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().split(")")[-1].split()[0] != "Z"
    except OSError:
        return False


class Cluster:
    """etcd, two Patroni nodes and the BisonDB servers of one run."""

    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.procs = {}  # name -> Popen (each in its own process group)
        self.pg_bin = pg_bin_dir()
        self.as_postgres = os.geteuid() == 0
        (self.etcd_client, self.etcd_peer, p1, p2, r1, r2, *bports) = free_ports(6 + args.servers)
        self.nodes = [
            {"name": "node1", "pg": p1, "api": r1},
            {"name": "node2", "pg": p2, "api": r2},
        ]
        self.bison_ports = bports
        self.uri = ("postgresql://postgres@127.0.0.1:%d,127.0.0.1:%d/bisondb"
                    "?target_session_attrs=read-write&connect_timeout=5" % (p1, p2))

    # etcd ----------------------------------------------------------------------

    def start_etcd(self):
        d = os.path.join(self.tmp, "etcd")
        os.makedirs(d)
        cmd = [
            "etcd", "--name", "etcd1", "--data-dir", d,
            "--listen-client-urls", "http://127.0.0.1:%d" % self.etcd_client,
            "--advertise-client-urls", "http://127.0.0.1:%d" % self.etcd_client,
            "--listen-peer-urls", "http://127.0.0.1:%d" % self.etcd_peer,
            "--initial-advertise-peer-urls", "http://127.0.0.1:%d" % self.etcd_peer,
            "--initial-cluster", "etcd1=http://127.0.0.1:%d" % self.etcd_peer,
            "--initial-cluster-state", "new",
        ]
        self.spawn("etcd", cmd, os.path.join(self.tmp, "etcd.log"))
        deadline = time.time() + 30
        while time.time() < deadline:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/health" % self.etcd_client,
                                            timeout=2) as r:
                    if json.load(r).get("health") == "true":
                        return
            except (OSError, ValueError):
                pass
            time.sleep(0.2)
        raise RuntimeError("etcd did not become healthy (see etcd.log)")

    # Patroni -------------------------------------------------------------------

    def patroni_config(self, node):
        d = os.path.join(self.tmp, node["name"])
        # JSON is YAML: no YAML library needed here.
        conf = {
            "scope": SCOPE,
            "name": node["name"],
            "restapi": {
                "listen": "127.0.0.1:%d" % node["api"],
                "connect_address": "127.0.0.1:%d" % node["api"],
            },
            "etcd3": {"hosts": ["127.0.0.1:%d" % self.etcd_client]},
            "bootstrap": {
                "dcs": {
                    # A dead leader's key expires after ttl: the main part
                    # of the failover time. Patroni asks
                    # loop_wait + 2 * retry_timeout <= ttl.
                    "ttl": self.args.ttl,
                    "loop_wait": 1,
                    "retry_timeout": max(1, (self.args.ttl - 1) // 2),
                    "maximum_lag_on_failover": 1048576,
                    "synchronous_mode": True,
                    "postgresql": {
                        "use_pg_rewind": False,
                        "parameters": {
                            "wal_level": "replica",
                            "hot_standby": "on",
                            "max_wal_senders": 5,
                            "max_replication_slots": 5,
                            "wal_keep_size": "128MB",
                            "max_connections": 200,
                        },
                    },
                },
                "initdb": [{"encoding": "UTF8"}, {"locale": "C"}],
                "pg_hba": [
                    "local all all trust",
                    "host replication replicator 127.0.0.1/32 trust",
                    "host all all 127.0.0.1/32 trust",
                ],
            },
            "postgresql": {
                "listen": "127.0.0.1:%d" % node["pg"],
                "connect_address": "127.0.0.1:%d" % node["pg"],
                "data_dir": os.path.join(d, "data"),
                "bin_dir": self.pg_bin,
                "pgpass": os.path.join(d, "pgpass"),
                "authentication": {
                    "replication": {"username": "replicator", "password": "replicator"},
                    "superuser": {"username": "postgres", "password": "postgres"},
                },
                "parameters": {"unix_socket_directories": d},
                "basebackup": [{"checkpoint": "fast"}],
            },
            "tags": {"nofailover": False, "noloadbalance": False, "clonefrom": False},
        }
        path = os.path.join(d, "patroni.yml")
        with open(path, "w") as f:
            json.dump(conf, f, indent=1)
        return path

    def start_node(self, node):
        d = os.path.join(self.tmp, node["name"])
        os.makedirs(d, exist_ok=True)
        conf = self.patroni_config(node)
        if self.as_postgres:
            shutil.chown(d, "postgres", "postgres")
            shutil.chown(conf, "postgres", "postgres")
            cmd = ["runuser", "-u", "postgres", "--", "patroni", conf]
        else:
            cmd = ["patroni", conf]
        self.spawn(node["name"], cmd, os.path.join(d, "patroni.log"))

    def members(self, node=None):
        """Patroni's view of the cluster, asked of `node` or of any node up."""
        for n in [node] if node else self.nodes:
            try:
                with urllib.request.urlopen("http://127.0.0.1:%d/cluster" % n["api"],
                                            timeout=2) as r:
                    return json.load(r).get("members", [])
            except (OSError, ValueError):
                continue
        return []

    def wait_leader_and_sync(self, timeout, exclude=None):
        deadline = time.time() + timeout
        while time.time() < deadline:
            ms = [m for m in self.members() if m["name"] != exclude]
            leader = [m for m in ms if m["role"] == "leader" and m["state"] == "running"]
            sync = [m for m in ms if m["role"] == "sync_standby"
                    and m["state"] in ("running", "streaming")]
            if leader and (sync or exclude):
                return leader[0]["name"], (sync[0]["name"] if sync else None)
            time.sleep(0.3)
        raise RuntimeError("no leader with a synchronous standby after %d s: %s"
                           % (timeout, self.members()))

    def node(self, name):
        return next(n for n in self.nodes if n["name"] == name)

    def postmaster_pid(self, node):
        try:
            with open(os.path.join(self.tmp, node["name"], "data", "postmaster.pid")) as f:
                return int(f.readline())
        except (OSError, ValueError):
            return None

    def kill_postmaster(self, node):
        pid = self.postmaster_pid(node)
        if pid is None:
            return
        kids = children_of(pid)
        kill9(pid)
        # Backends notice their postmaster's death by themselves, but a
        # machine's crash takes them at once, and so does this test.
        for k in kids:
            kill9(k)

    def kill_node(self, node, mode):
        if mode == "node":
            p = self.procs.get(node["name"])
            if p is not None:
                os.killpg(p.pid, signal.SIGKILL)
        self.kill_postmaster(node)

    def psql(self, port, sql):
        subprocess.run([os.path.join(self.pg_bin, "psql"), "-X", "-q", "-v", "ON_ERROR_STOP=1",
                        "-h", "127.0.0.1", "-p", str(port), "-U", "postgres", "-d", "postgres",
                        "-c", sql], check=True, stdout=subprocess.DEVNULL)

    # BisonDB ------------------------------------------------------------------

    def start_bison(self, i):
        port = self.bison_ports[i]
        d = os.path.join(self.tmp, "bisondb%d" % i)
        os.makedirs(d, exist_ok=True)
        cmd = [self.args.bin, "--port", str(port), "--bind_ip", "127.0.0.1", "--dbpath", d,
               "--nounixsocket", "--storageEngine", "postgres", "--postgresUri", self.uri]
        self.spawn("bisondb%d" % i, cmd, os.path.join(self.tmp, "bisondb%d.log" % i), append=True)
        client = pymongo.MongoClient("127.0.0.1", port, directConnection=True,
                                     serverSelectionTimeoutMS=500)
        deadline = time.time() + 60
        try:
            while time.time() < deadline:
                if self.procs["bisondb%d" % i].poll() is not None:
                    raise RuntimeError("bisondb%d exited at start-up: %s"
                                       % (i, tail(os.path.join(self.tmp, "bisondb%d.log" % i))))
                try:
                    client.admin.command("ping")
                    return
                except PyMongoError:
                    time.sleep(0.2)
            raise RuntimeError("bisondb%d did not answer within 60 s" % i)
        finally:
            client.close()

    def stop_bison(self, i):
        p = self.procs.pop("bisondb%d" % i, None)
        if p is None:
            return
        p.terminate()
        try:
            p.wait(20)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()

    # all -----------------------------------------------------------------------

    def spawn(self, name, cmd, logfile, append=False):
        out = open(logfile, "ab" if append else "wb")
        self.procs[name] = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL, start_new_session=True,
                                            cwd=self.tmp)
        out.close()

    def stop_all(self):
        for name in [n for n in self.procs if n.startswith("bisondb")]:
            try:
                self.stop_bison(int(name[len("bisondb"):]))
            except Exception as e:  # keep stopping the others
                log("stopping %s: %s" % (name, e))
        for name, p in list(self.procs.items()):
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait()
        self.procs.clear()
        # Patroni starts each postmaster in a session of its own.
        for n in self.nodes:
            self.kill_postmaster(n)
        for n in self.nodes:
            pid = self.postmaster_pid(n)
            deadline = time.time() + 10
            while pid and alive(pid) and time.time() < deadline:
                time.sleep(0.1)


def tail(path, n=30):
    try:
        with open(path, "rb") as f:
            lines = f.read().decode("utf-8", "replace").splitlines()
        return "\n".join(lines[-n:])
    except OSError:
        return "(no %s)" % path


# -- load -----------------------------------------------------------------------


def error_name(e):
    if isinstance(e, BulkWriteError):
        codes = sorted({we.get("code") for we in e.details.get("writeErrors", [])})
        return "BulkWriteError%s" % codes
    if isinstance(e, OperationFailure):
        return "%s(%s)" % (e.details.get("codeName", "") if e.details else "", e.code)
    return type(e).__name__


class Load:
    """Writers and a reader; every acknowledged `_id` is kept."""

    def __init__(self, ports, writers, batch):
        self.ports = ports
        self.nwriters = writers
        self.batch = batch
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked = set()
        self.ok_times = collections.defaultdict(list)  # writer -> [(start, end)]
        self.error_times = collections.defaultdict(list)  # writer -> [end]
        self.errors = collections.Counter()
        self.reader_errors = collections.Counter()
        self.dup_on_retry = 0
        self.dup_first_try = []
        self.gave_up = []
        self.reads = 0
        self.threads = []
        self.clients = []

    def client(self, i):
        c = pymongo.MongoClient("127.0.0.1", self.ports[i % len(self.ports)],
                                directConnection=True, w=1, journal=True,
                                serverSelectionTimeoutMS=2000, socketTimeoutMS=60000,
                                connectTimeoutMS=2000)
        self.clients.append(c)
        return c

    def start(self):
        for w in range(self.nwriters):
            many = w == self.nwriters - 1 and self.nwriters > 1
            t = threading.Thread(target=self.writer, args=(w, many), daemon=True)
            self.threads.append(t)
        self.threads.append(threading.Thread(target=self.reader, daemon=True))
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(120)
        for c in self.clients:
            c.close()

    def writer(self, w, many):
        coll = self.client(w).failover.docs
        pad = "x" * 200
        seq = 0
        while not self.stop.is_set():
            n = self.batch if many else 1
            docs = [{"_id": "w%d-%d" % (w, seq + k), "u": "u%d-%d" % (w, seq + k), "w": w,
                     "seq": seq + k, "pad": pad} for k in range(n)]
            seq += n
            attempt = 0
            # Retried until acknowledged, even after the stop: an
            # unacknowledged write left behind could still be committed.
            give_up_at = None
            while True:
                t0 = time.time()
                try:
                    if not many:
                        coll.insert_one(docs[0])
                    elif attempt == 0:
                        coll.insert_many(docs, ordered=True)
                    else:
                        coll.insert_many(docs, ordered=False)
                    self.record_ok(w, docs, t0)
                    break
                except DuplicateKeyError as e:
                    if attempt == 0:
                        self.dup_first_try.append(str(e))
                    self.record_ok(w, docs, t0, dup=True)
                    break
                except BulkWriteError as e:
                    wes = e.details.get("writeErrors", [])
                    if attempt > 0 and wes and all(we.get("code") == 11000 for we in wes):
                        # The rest were inserted by this retry.
                        self.record_ok(w, docs, t0, dup=True)
                        break
                    with self.lock:
                        self.errors[error_name(e)] += 1
                        self.error_times[w].append(time.time())
                except PyMongoError as e:
                    with self.lock:
                        self.errors[error_name(e)] += 1
                        self.error_times[w].append(time.time())
                attempt += 1
                now = time.time()
                if self.stop.is_set():
                    give_up_at = give_up_at or now + 60
                    if now > give_up_at:
                        with self.lock:
                            self.gave_up.extend(d["_id"] for d in docs)
                        break
                time.sleep(0.05)

    def record_ok(self, w, docs, t0, dup=False):
        t1 = time.time()
        with self.lock:
            self.acked.update(d["_id"] for d in docs)
            self.ok_times[w].append((t0, t1))
            if dup:
                self.dup_on_retry += 1

    def reader(self):
        coll = self.client(0).failover.docs
        while not self.stop.is_set():
            try:
                # Small batches: the cursor lives across getMores, so some
                # are open when the store fails over.
                for _ in coll.find({}, batch_size=50).limit(400):
                    pass
                self.reads += 1
            except PyMongoError as e:
                with self.lock:
                    self.reader_errors[error_name(e)] += 1
                time.sleep(0.05)
            time.sleep(0.02)


# -- one run ----------------------------------------------------------------------


def verify(ports, load):
    """Counts and presence, through server 0."""
    c = pymongo.MongoClient("127.0.0.1", ports[0], directConnection=True,
                            serverSelectionTimeoutMS=30000)
    try:
        coll = c.failover.docs
        present = [d["_id"] for d in coll.find({}, {"_id": 1}, batch_size=10000)]
        found = set(present)
        return {
            "docs": len(present),
            "duplicates": len(present) - len(found),
            "missing": len(load.acked - found),
            "missing_sample": sorted(load.acked - found)[:5],
            "unacknowledged_present": len(found - load.acked - set(load.gave_up)),
            "count_documents": coll.count_documents({}),
            "count_record": coll.estimated_document_count(),
            "count_unique_index": coll.count_documents({"u": {"$gte": ""}}, hint="u_1"),
            "validate": c.failover.command("validate", "docs").get("valid"),
        }
    finally:
        c.close()


def run_once(args, number):
    tmp = tempfile.mkdtemp(prefix="bisondb-patroni-")
    os.chmod(tmp, 0o755)
    cluster = Cluster(args, tmp)
    result = {"run": number, "ok": False}
    started = time.time()
    failed = True
    try:
        cluster.start_etcd()
        for n in cluster.nodes:
            cluster.start_node(n)
        leader, sync = cluster.wait_leader_and_sync(120)
        result["cluster_ready_s"] = round(time.time() - started, 1)
        log("run %d: leader %s, synchronous standby %s (%.1f s)"
            % (number, leader, sync, result["cluster_ready_s"]))
        cluster.psql(cluster.node(leader)["pg"], "CREATE DATABASE bisondb")
        for i in range(args.servers):
            cluster.start_bison(i)
        admin = pymongo.MongoClient("127.0.0.1", cluster.bison_ports[0], directConnection=True)
        admin.failover.docs.create_index("u", unique=True)
        admin.close()

        load = Load(cluster.bison_ports, args.writers, args.batch)
        load.start()
        time.sleep(args.before)
        with load.lock:
            before = len(load.acked)
        # Leadership may have moved since start-up: ask again.
        leader, _ = cluster.wait_leader_and_sync(30)
        t_kill = time.time()
        cluster.kill_node(cluster.node(leader), args.kill)
        log("run %d: killed %s (%s) with %d writes acknowledged" % (number, leader, args.kill,
                                                                     before))

        # A writer has resumed when a write it started after its first error
        # since the kill is acknowledged (a write on a backend not yet gone
        # may still be acknowledged just after the kill: not a resumption).
        # A writer that never failed is unaffected (0 s).
        first = None
        every = {}
        promoted = None
        last_poll = 0
        while time.time() - t_kill < args.wait:
            now = time.time()
            with load.lock:
                for w in range(args.writers):
                    if w in every:
                        continue
                    errs = [t for t in load.error_times[w] if t > t_kill]
                    oks = load.ok_times[w]
                    if errs:
                        after = [t1 for (t0, t1) in oks if t0 >= errs[0]]
                        if after:
                            every[w] = min(after) - t_kill
                    elif any(t0 > t_kill + 3 for (t0, _) in oks):
                        every[w] = 0.0
            if every and first is None and any(every.values()):
                first = min(v for v in every.values() if v)
                log("run %d: writes resumed %.1f s after the kill" % (number, first))
            if promoted is None and now - last_poll > 0.2:
                last_poll = now
                if any(m["role"] == "leader" and m["name"] != leader and m["state"] == "running"
                       for m in cluster.members()):
                    promoted = now - t_kill
            # With --kill postmaster Patroni may restart the same node
            # rather than promote the other: no promotion to wait for.
            if len(every) == args.writers:
                break
            time.sleep(0.1)
        if first is None and every:
            first = 0.0
        if first is not None:
            time.sleep(args.after)
        load.finish()
        new_leader = [m["name"] for m in cluster.members() if m["role"] == "leader"]
        result.update({
            "new_leader": new_leader[0] if new_leader else None,
            "old_leader": leader,
            "new_leader_seen_s": round(promoted, 1) if promoted is not None else None,
            "acknowledged_before_kill": before,
            "acknowledged": len(load.acked),
            "resume_first_s": round(first, 2) if first is not None else None,
            "resume_all_s": (round(max(every.values()), 2) if len(every) == args.writers
                             else None),
            "client_errors": dict(load.errors),
            "reader_errors": dict(load.reader_errors),
            "reads": load.reads,
            "duplicate_on_retry": load.dup_on_retry,
            "duplicate_first_try": len(load.dup_first_try),
            "gave_up": len(load.gave_up),
        })
        check = verify(cluster.bison_ports, load)
        result["check"] = check
        # The count record as stored, not as this server cached it.
        for i in range(args.servers):
            cluster.stop_bison(i)
        cluster.start_bison(0)
        c = pymongo.MongoClient("127.0.0.1", cluster.bison_ports[0], directConnection=True)
        result["count_record_after_restart"] = c.failover.docs.estimated_document_count()
        c.close()
        exact = check["docs"]
        problems = []
        if check["missing"]:
            problems.append("%d acknowledged writes lost" % check["missing"])
        if check["duplicates"] or load.dup_first_try:
            problems.append("duplicates")
        if check["unacknowledged_present"] and not load.gave_up:
            problems.append("%d documents never acknowledged" % check["unacknowledged_present"])
        for k in ("count_documents", "count_record", "count_unique_index"):
            if check[k] != exact:
                problems.append("%s %d != %d documents" % (k, check[k], exact))
        if result["count_record_after_restart"] != exact:
            problems.append("count record after restart %d != %d documents"
                            % (result["count_record_after_restart"], exact))
        if check["validate"] is not True:
            problems.append("validate: %s" % check["validate"])
        if first is None:
            problems.append("writes did not resume within %d s" % args.wait)
        if result["resume_all_s"] is None:
            problems.append("not every writer resumed within %d s" % args.wait)
        elif result["resume_all_s"] > args.goal:
            problems.append("writes resumed after %.1f s (goal %d s)"
                            % (result["resume_all_s"], args.goal))
        result["problems"] = problems
        result["ok"] = not problems
        failed = bool(problems)
    except BaseException as e:
        result["problems"] = ["%s: %s" % (type(e).__name__, e)]
        raise
    finally:
        result["run_s"] = round(time.time() - started, 1)
        if failed:
            for name in ("node1/patroni.log", "node2/patroni.log", "bisondb0.log"):
                log("---- tail of %s" % name)
                print(tail(os.path.join(tmp, name), 25), flush=True)
        cluster.stop_all()
        if args.keep:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
        print("RESULT " + json.dumps(result), flush=True)
    return result


def default_bin():
    env = os.environ.get("BISONDB_BIN")
    if env:
        return env
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "bisondb")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default=default_bin(),
                   help="the bisondb binary (default $BISONDB_BIN, else the release build)")
    p.add_argument("--runs", type=int, default=1)
    p.add_argument("--servers", type=int, default=1, choices=(1, 2))
    p.add_argument("--writers", type=int, default=4)
    p.add_argument("--batch", type=int, default=10, help="insert_many's batch (last writer)")
    p.add_argument("--before", type=float, default=5, help="seconds of load before the kill")
    p.add_argument("--after", type=float, default=5, help="seconds of load after resuming")
    p.add_argument("--ttl", type=int, default=10, help="Patroni's leader key ttl (seconds)")
    p.add_argument("--kill", choices=("node", "postmaster"), default="node")
    p.add_argument("--goal", type=float, default=30, help="longest acceptable resumption (s)")
    p.add_argument("--wait", type=float, default=90, help="longest wait for resumption (s)")
    p.add_argument("--keep", action="store_true", help="keep the temporary directory")
    args = p.parse_args()
    if not os.access(args.bin, os.X_OK):
        sys.exit("failover_patroni: no bisondb binary at %s (--bin or BISONDB_BIN)" % args.bin)
    if os.geteuid() == 0:
        try:
            pwd.getpwnam("postgres")
        except KeyError:
            sys.exit("failover_patroni: PostgreSQL refuses root and there is no postgres user")
    ensure_packages()

    def stop(signum, _frame):
        raise SystemExit("failover_patroni: signal %d" % signum)

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGHUP, stop)

    results = []
    for i in range(1, args.runs + 1):
        results.append(run_once(args, i))
    log("summary (%s, kill %s, %d writers, ttl %d s):" % (args.bin, args.kill, args.writers,
                                                           args.ttl))
    for r in results:
        log("  run %d: %s, resumed %s s (all writers %s s), %s acknowledged, lost %s, "
            "errors %s, %s s" % (r["run"], "ok" if r["ok"] else "FAILED %s" % r["problems"],
                                  r.get("resume_first_s"), r.get("resume_all_s"),
                                  r.get("acknowledged"), r.get("check", {}).get("missing"),
                                  r.get("client_errors"), r.get("run_s")))
    sys.exit(0 if all(r["ok"] for r in results) else 1)


if __name__ == "__main__":
    main()
