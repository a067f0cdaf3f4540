#!/usr/bin/env python3
"""Three BisonDB servers over one PostgreSQL; two of them killed with -9 mid-load.

Usage (pymongo needed; as root PostgreSQL runs as the `postgres` user):
    .venv/bin/python scripts/multiserver_kill.py [--bin PATH] [--runs N]

Each run, under one temporary directory:
  1. a private PostgreSQL cluster (initdb/pg_ctl of /usr/lib/postgresql/*/bin,
     trust auth, its own port and socket directory);
  2. three `bisondb --storageEngine postgres --postgresUri ...` servers;
  3. one pymongo client with all three in its seed list: the servers answer
     `hello` as mongos (`msg: "isdbgrid"`), so pymongo spreads the load over
     them and moves to another when one dies; retryable writes on;
  4. a collection with a unique secondary index `u`; 4 writers (`w: 1,
     j: true`) inserting documents with unique `_id` and `u`, every fifth
     operation an `$inc` of one of their own earlier documents; 2 readers;
  5. kill -9 of one server after --before s, of a second --between s later,
     the load stays on the third for --after s, then the first is restarted
     and the load runs --tail s more;
  6. checks: every acknowledged insert present exactly once; nothing present
     that was never attempted; no duplicate `u`; count_documents ==
     estimated_document_count == documents found; `validate` valid; every
     `$inc` counter between its acknowledged and its attempted increments;
     every error the application saw (after pymongo's own retry) retryable:
     a network error or one labelled RetryableWriteError.
An insert whose error was retryable is retried by the application with the
same `_id`; an 11000 on that retry is its own earlier attempt when the stored
document is the one it sent (same `u` and writer), else a real duplicate (an
anomaly). Updates are not retried by the application (a new `txnNumber`
would apply the `$inc` twice): their outcome stays unknown, which the bounds
above allow for.
Prints one JSON line per run (prefix `RESULT`); exits non-zero on any anomaly.
"""

import argparse
import collections
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time

import pymongo
from pymongo.errors import ConnectionFailure, DuplicateKeyError, PyMongoError

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from failover_patroni import error_name, log, pg_bin_dir, tail  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def retryable(e):
    """What an application may retry: a network error or the label."""
    return isinstance(e, ConnectionFailure) or (
        hasattr(e, "has_error_label") and e.has_error_label("RetryableWriteError"))


class Run:
    def __init__(self, args, tmp):
        self.args = args
        self.tmp = tmp
        self.pg_port = args.base_port
        self.ports = [args.base_port + 1 + i for i in range(3)]
        self.procs = {}
        self.pg_bin = pg_bin_dir()
        self.pgdata = os.path.join(tmp, "pg")
        self.as_postgres = os.geteuid() == 0

    # PostgreSQL -----------------------------------------------------------------

    def pg(self, cmd, **kw):
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--"] + cmd
        return subprocess.run(cmd, check=True, stdin=subprocess.DEVNULL, **kw)

    def start_pg(self):
        if self.pg_bin is None:
            sys.exit("multiserver_kill: no PostgreSQL in /usr/lib/postgresql/*/bin")
        if self.as_postgres:
            shutil.chown(self.tmp, "postgres", "postgres")
        out = dict(stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        self.pg([os.path.join(self.pg_bin, "initdb"), "-D", self.pgdata, "-A", "trust",
                 "-U", "postgres", "--no-sync"], **out)
        self.pg([os.path.join(self.pg_bin, "pg_ctl"), "-D", self.pgdata, "-w", "-l",
                 os.path.join(self.tmp, "pg.log"), "-o",
                 "-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=300"
                 % (self.pg_port, self.tmp), "start"], **out)
        self.pg([os.path.join(self.pg_bin, "psql"), "-h", "127.0.0.1", "-p", str(self.pg_port),
                 "-U", "postgres", "-q", "-c", "CREATE DATABASE bisondb"], **out)

    def stop_pg(self):
        if os.path.exists(os.path.join(self.pgdata, "postmaster.pid")):
            self.pg([os.path.join(self.pg_bin, "pg_ctl"), "-D", self.pgdata, "-m", "immediate",
                     "-w", "stop"], stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)

    # BisonDB --------------------------------------------------------------------

    def start_bison(self, i):
        port = self.ports[i]
        d = os.path.join(self.tmp, "bisondb%d" % i)
        os.makedirs(d, exist_ok=True)
        uri = "postgresql://postgres@127.0.0.1:%d/bisondb" % self.pg_port
        logf = os.path.join(self.tmp, "bisondb%d.log" % i)
        with open(logf, "ab") as out:
            self.procs[i] = subprocess.Popen(
                [self.args.bin, "--port", str(port), "--bind_ip", "127.0.0.1", "--dbpath", d,
                 "--nounixsocket", "--storageEngine", "postgres", "--postgresUri", uri],
                stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                start_new_session=True)
        c = pymongo.MongoClient("127.0.0.1", port, directConnection=True,
                                serverSelectionTimeoutMS=500)
        try:
            deadline = time.time() + 60
            while time.time() < deadline:
                if self.procs[i].poll() is not None:
                    raise RuntimeError("bisondb%d exited: %s" % (i, tail(logf)))
                try:
                    hello = c.admin.command("hello")
                    if hello.get("msg") != "isdbgrid":
                        raise RuntimeError("bisondb%d does not answer as mongos" % i)
                    return
                except PyMongoError:
                    time.sleep(0.2)
            raise RuntimeError("bisondb%d did not answer within 60 s" % i)
        finally:
            c.close()

    def kill9(self, i):
        p = self.procs.pop(i)
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()

    def stop_all(self):
        for i, p in list(self.procs.items()):
            try:
                os.killpg(p.pid, signal.SIGTERM)
                p.wait(20)
            except (ProcessLookupError, subprocess.TimeoutExpired):
                try:
                    os.killpg(p.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                p.wait()
        self.procs.clear()
        self.stop_pg()

    def uri(self):
        return "mongodb://%s/?retryWrites=true&w=1&journal=true" % ",".join(
            "127.0.0.1:%d" % p for p in self.ports)


class Load:
    def __init__(self, uri, writers, readers):
        self.client = pymongo.MongoClient(uri, serverSelectionTimeoutMS=10000,
                                          connectTimeoutMS=2000, socketTimeoutMS=30000,
                                          maxPoolSize=50)
        self.coll = self.client.multikill.docs
        self.nwriters, self.nreaders = writers, readers
        self.stop = threading.Event()
        self.lock = threading.Lock()
        self.acked = {}  # _id -> u
        self.attempted = {}  # _id -> u (every insert sent, acknowledged or not)
        self.inc_acked = collections.Counter()
        self.inc_tried = collections.Counter()
        self.ack_times = []  # completion times of acknowledged writes
        self.app_errors = collections.Counter()  # errors the application saw
        self.non_retryable = []
        self.real_duplicates = []
        self.app_retries = 0
        self.retry_was_own = 0
        self.unknown_inserts = []
        self.reads = 0
        self.threads = []

    def start(self):
        for w in range(self.nwriters):
            self.threads.append(threading.Thread(target=self.writer, args=(w,), daemon=True))
        for r in range(self.nreaders):
            self.threads.append(threading.Thread(target=self.reader, daemon=True))
        for t in self.threads:
            t.start()

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(90)

    def saw(self, e, what):
        with self.lock:
            self.app_errors["%s %s" % (what, error_name(e))] += 1
            if not retryable(e):
                self.non_retryable.append("%s: %r" % (what, e))

    def writer(self, w):
        seq = 0
        mine = []
        pad = "x" * 100
        while not self.stop.is_set():
            seq += 1
            if seq % 5 == 0 and mine:
                _id = mine[seq % len(mine)]
                with self.lock:
                    self.inc_tried[_id] += 1
                try:
                    r = self.coll.update_one({"_id": _id}, {"$inc": {"n": 1}})
                    if r.matched_count != 1:
                        with self.lock:
                            self.non_retryable.append("update of %s matched %d"
                                                      % (_id, r.matched_count))
                    with self.lock:
                        self.inc_acked[_id] += 1
                        self.ack_times.append(time.time())
                except PyMongoError as e:
                    self.saw(e, "update")
                    time.sleep(0.05)
                continue
            _id, u = "w%d-%d" % (w, seq), "u%d-%d" % (w, seq)
            doc = {"_id": _id, "u": u, "w": w, "n": 0, "pad": pad}
            with self.lock:
                self.attempted[_id] = u
            give_up = time.time() + 30
            attempt = 0
            while True:
                try:
                    self.coll.insert_one(dict(doc))
                    self.acked_insert(_id, u, mine)
                    break
                except DuplicateKeyError as e:
                    if attempt == 0:
                        with self.lock:
                            self.real_duplicates.append("first try of %s: %s" % (_id, e))
                        break
                    # Our own earlier attempt, if the stored document is ours.
                    try:
                        stored = self.coll.find_one({"_id": _id})
                    except PyMongoError as e2:
                        self.saw(e2, "find-after-11000")
                        time.sleep(0.05)
                        continue
                    if stored is not None and stored.get("u") == u and stored.get("w") == w:
                        with self.lock:
                            self.retry_was_own += 1
                        self.acked_insert(_id, u, mine)
                    else:
                        with self.lock:
                            self.real_duplicates.append("retry of %s: %s (stored %r)"
                                                        % (_id, e, stored))
                    break
                except PyMongoError as e:
                    self.saw(e, "insert")
                    if not retryable(e) or time.time() > give_up:
                        with self.lock:
                            self.unknown_inserts.append(_id)
                        break
                    attempt += 1
                    with self.lock:
                        self.app_retries += 1
                    time.sleep(0.05)

    def acked_insert(self, _id, u, mine):
        with self.lock:
            self.acked[_id] = u
            self.ack_times.append(time.time())
        mine.append(_id)

    def reader(self):
        while not self.stop.is_set():
            try:
                for _ in self.coll.find({}, batch_size=50).sort("u", -1).limit(300):
                    pass
                self.coll.count_documents({"w": 1})
                with self.lock:
                    self.reads += 1
            except PyMongoError as e:
                self.saw(e, "read")
                time.sleep(0.05)
            time.sleep(0.01)

    def resume_after(self, t):
        with self.lock:
            later = [x for x in self.ack_times if x > t]
        return round(min(later) - t, 3) if later else None

    def longest_stall(self, t, window=5.0):
        """Longest time without any acknowledged write in the window after t."""
        with self.lock:
            xs = sorted(x for x in self.ack_times if t <= x <= t + window)
        if not xs:
            return None
        return round(max(b - a for a, b in zip([t] + xs, xs)), 3)


def verify(uri, load):
    c = pymongo.MongoClient(uri, serverSelectionTimeoutMS=30000)
    try:
        coll = c.multikill.docs
        docs = list(coll.find({}, {"_id": 1, "u": 1, "n": 1}, batch_size=10000))
        ids = collections.Counter(d["_id"] for d in docs)
        us = collections.Counter(d.get("u") for d in docs)
        found = {d["_id"]: d for d in docs}
        bad_n = [(i, d.get("n"), load.inc_acked[i], load.inc_tried[i]) for i, d in found.items()
                 if not (load.inc_acked[i] <= d.get("n", 0) <= load.inc_tried[i])]
        return {
            "docs": len(docs),
            "duplicate_ids": sum(n - 1 for n in ids.values() if n > 1),
            "duplicate_u": sum(n - 1 for n in us.values() if n > 1),
            "missing": sorted(set(load.acked) - set(found))[:5],
            "missing_count": len(set(load.acked) - set(found)),
            "never_attempted": sorted(set(found) - set(load.attempted))[:5],
            "wrong_u": [i for i, d in found.items() if load.attempted.get(i) != d.get("u")][:5],
            "bad_counters": bad_n[:5],
            "count_documents": coll.count_documents({}),
            "estimated": coll.estimated_document_count(),
            "unique_index": coll.count_documents({"u": {"$gte": ""}}, hint="u_1"),
            "validate": c.multikill.command("validate", "docs").get("valid"),
            "unknown_present": len(set(load.unknown_inserts) & set(found)),
        }
    finally:
        c.close()


def run_once(args, number):
    tmp = tempfile.mkdtemp(prefix="bisondb-multikill-")
    run = Run(args, tmp)
    anomalies = []
    result = {"run": number}
    try:
        t_start = time.time()
        run.start_pg()
        for i in range(3):
            run.start_bison(i)
        setup = pymongo.MongoClient(run.uri(), serverSelectionTimeoutMS=10000)
        setup.multikill.docs.create_index("u", unique=True)
        setup.close()
        load = Load(run.uri(), args.writers, args.readers)
        load.start()
        time.sleep(args.before)
        victims = [number % 3, (number + 1) % 3]
        kills = []
        for k, v in enumerate(victims):
            t = time.time()
            run.kill9(v)
            kills.append(t)
            log("killed bisondb%d (port %d)" % (v, run.ports[v]))
            time.sleep(args.between if k == 0 else args.after)
        restart_t = time.time()
        run.start_bison(victims[0])
        log("restarted bisondb%d" % victims[0])
        time.sleep(args.tail)
        load.finish()
        alive = [t for t in load.threads if t.is_alive()]
        if alive:
            anomalies.append("%d load threads did not stop" % len(alive))
        v = verify(run.uri(), load)
        load.client.close()
        result.update({
            "acked_inserts": len(load.acked),
            "acked_incs": sum(load.inc_acked.values()),
            "reads": load.reads,
            "app_retries": load.app_retries,
            "retry_was_own_write": load.retry_was_own,
            "app_errors": dict(load.app_errors),
            "resume_s": [load.resume_after(t) for t in kills],
            "resume_after_restart_s": load.resume_after(restart_t),
            "longest_stall_s": [load.longest_stall(t) for t in kills],
            "seconds": round(time.time() - t_start, 1),
            "verify": v,
        })
        if load.non_retryable:
            anomalies.append("non-retryable errors: %s" % load.non_retryable[:5])
        if load.real_duplicates:
            anomalies.append("duplicates: %s" % load.real_duplicates[:5])
        if v["missing_count"]:
            anomalies.append("acknowledged inserts missing: %s" % v["missing"])
        for key in ("duplicate_ids", "duplicate_u"):
            if v[key]:
                anomalies.append("%s: %d" % (key, v[key]))
        for key in ("never_attempted", "wrong_u", "bad_counters"):
            if v[key]:
                anomalies.append("%s: %s" % (key, v[key]))
        if not (v["count_documents"] == v["estimated"] == v["unique_index"] == v["docs"]):
            anomalies.append("counts differ: %s" % v)
        if v["validate"] is not True:
            anomalies.append("validate not valid")
        if any(r is None for r in result["resume_s"]):
            anomalies.append("writes never resumed after a kill")
    except Exception as e:  # report and clean up
        anomalies.append("run failed: %r" % e)
    finally:
        run.stop_all()
        if args.keep or anomalies:
            log("kept %s" % tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    result["anomalies"] = anomalies
    print("RESULT " + json.dumps(result, sort_keys=True), flush=True)
    return result


def default_bin():
    target = os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target"))
    return os.path.join(target, "release", "bisondb")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bin", default=default_bin())
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--base-port", type=int, default=28100,
                    help="PostgreSQL's port; the servers take the next three")
    ap.add_argument("--writers", type=int, default=4)
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--before", type=float, default=8)
    ap.add_argument("--between", type=float, default=8)
    ap.add_argument("--after", type=float, default=10)
    ap.add_argument("--tail", type=float, default=5)
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args()
    if not os.path.isfile(args.bin):
        sys.exit("multiserver_kill: no server binary at %s (cargo build --release -p bisondb)"
                 % args.bin)
    results = [run_once(args, n) for n in range(args.runs)]
    bad = [r for r in results if r["anomalies"]]
    for r in results:
        log("run %d: %d inserts + %s incs acknowledged, %d app retries (%d own 11000), "
            "resume after kills %s s (longest stall %s s), after restart %s s, %s s%s"
            % (r["run"], r.get("acked_inserts", 0), r.get("acked_incs", 0),
               r.get("app_retries", 0), r.get("retry_was_own_write", 0), r.get("resume_s"),
               r.get("longest_stall_s"), r.get("resume_after_restart_s"), r.get("seconds"),
               ": " + "; ".join(r["anomalies"]) if r["anomalies"] else ""))
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
