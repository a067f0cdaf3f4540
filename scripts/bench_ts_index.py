#!/usr/bin/env python3
"""Time-series workload of seed 003 with and without an index on `created_on`.

Inserts N documents `{_id: ObjectId, created_on: <random date in 2012>, value:
<random float>}` in 5000-document batches into two collections, one with an
index on `created_on` created before the load and one without, then times a
one-day range `count` and a one-day `find` on each (median of several runs)
and reads `explain` executionStats for keys/docs examined.

Insert throughput counts only the time spent inside `insert_many` (documents
are generated and BSON-encoded beforehand, batch by batch), so the client's
Python cost does not hide the server's. The loads alternate (plain, indexed,
plain, indexed, ...) for ROUNDS rounds and the median is reported, and when the
server's PID is given its CPU time per document (user + system, from
/proc/PID/stat) is reported too: on a shared machine CPU time is steadier than
wall-clock time.

Usage: bench_ts_index.py URI N [RUNS] [ROUNDS] [SERVER_PID]
(environment: BENCH_TS_ONLY_INSERTS=1 skips the queries; BENCH_TS_LOADS=indexed
runs only the indexed load, to compare engine settings)
"""

import datetime as dt
import json
import os
import random
import statistics
import sys
import time

import bson
from bson.objectid import ObjectId
from bson.raw_bson import RawBSONDocument
from pymongo import MongoClient

BATCH = 5000
START = dt.datetime(2012, 1, 1, tzinfo=dt.timezone.utc)
END = dt.datetime(2013, 1, 1, tzinfo=dt.timezone.utc)
SPAN_MS = int((END - START).total_seconds() * 1000)


def batches(n, seed=3):
    rng = random.Random(seed)
    done = 0
    while done < n:
        k = min(BATCH, n - done)
        docs = []
        for _ in range(k):
            created = START + dt.timedelta(milliseconds=rng.randrange(SPAN_MS))
            docs.append(
                RawBSONDocument(
                    bson.encode({"_id": ObjectId(), "created_on": created, "value": rng.random()})
                )
            )
        done += k
        yield docs


def cpu_seconds(pid):
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    # utime and stime are fields 14 and 15 (1-based) of the whole line.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load(coll, n):
    spent = 0.0
    for docs in batches(n):
        t0 = time.perf_counter()
        coll.insert_many(docs, ordered=True)
        spent += time.perf_counter() - t0
    return n / spent, spent


def median_ms(f, runs):
    times = []
    out = None
    for _ in range(runs):
        t0 = time.perf_counter()
        out = f()
        times.append((time.perf_counter() - t0) * 1000)
    return statistics.median(times), out


def main():
    uri, n = sys.argv[1], int(sys.argv[2])
    runs = int(sys.argv[3]) if len(sys.argv) > 3 else 5
    rounds = int(sys.argv[4]) if len(sys.argv) > 4 else 1
    pid = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    client = MongoClient(uri)
    db = client["bench003"]
    result = {"n": n, "batch": BATCH, "rounds": rounds}
    rates = {"plain": [], "indexed": []}
    cpu_us = {"plain": [], "indexed": []}
    for r in range(rounds):
        for name, indexed in (("plain", False), ("indexed", True)):
            if name not in os.environ.get("BENCH_TS_LOADS", "plain,indexed").split(","):
                continue
            db.drop_collection(name)
            if indexed:
                db[name].create_index("created_on")
            c0 = cpu_seconds(pid)
            rate, secs = load(db[name], n)
            cpu = cpu_seconds(pid) - c0
            rates[name].append(rate)
            cpu_us[name].append(cpu * 1e6 / n)
            print(
                f"round {r} {name}: {n} docs in {secs:.1f} s of insert_many = {rate:,.0f} docs/s, "
                f"server CPU {cpu * 1e6 / n:.1f} us/doc",
                flush=True,
            )
    for name in [k for k in ("plain", "indexed") if rates[k]]:
        result[f"insert_{name}_docs_per_s_median"] = round(statistics.median(rates[name]))
        result[f"insert_{name}_docs_per_s_all"] = [round(x) for x in rates[name]]
        if pid:
            result[f"insert_{name}_server_cpu_us_per_doc_median"] = round(statistics.median(cpu_us[name]), 2)
    # BENCH_TS_ONLY_INSERTS=1 skips the queries (for comparing insert paths);
    # the queries run on the collections loaded.
    loaded = tuple(k for k in ("plain", "indexed") if rates[k])
    names = () if os.environ.get("BENCH_TS_ONLY_INSERTS") else loaded
    day = dt.datetime(2012, 6, 15, tzinfo=dt.timezone.utc)
    q = {"created_on": {"$gte": day, "$lt": day + dt.timedelta(days=1)}}
    for name in names:
        count_ms, count = median_ms(lambda: db.command("count", name, query=q)["n"], runs)
        find_ms, found = median_ms(lambda: len(list(db[name].find(q))), runs)
        ex_count = db.command("explain", {"count": name, "query": q}, verbosity="executionStats")
        ex_find = db.command("explain", {"find": name, "filter": q}, verbosity="executionStats")
        for label, ms, value, ex in (
            ("count", count_ms, count, ex_count),
            ("find", find_ms, found, ex_find),
        ):
            st = ex["executionStats"]
            row = {
                "ms_median": round(ms, 1),
                "result": value,
                "keysExamined": st["totalKeysExamined"],
                "docsExamined": st["totalDocsExamined"],
                "stage": ex["queryPlanner"]["winningPlan"].get("inputStage", ex["queryPlanner"]["winningPlan"]).get("stage"),
            }
            result[f"{label}_{name}"] = row
            print(f"{label} on {name}: {row}", flush=True)
    if not (rates["plain"] and rates["indexed"]):
        print(json.dumps(result, indent=2))
        return
    result["insert_ratio_indexed_vs_plain"] = round(
        result["insert_indexed_docs_per_s_median"] / result["insert_plain_docs_per_s_median"], 3
    )
    if pid:
        result["cpu_ratio_plain_vs_indexed"] = round(
            result["insert_plain_server_cpu_us_per_doc_median"]
            / result["insert_indexed_server_cpu_us_per_doc_median"],
            3,
        )
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
