#!/usr/bin/env python3
"""One run of a seed measurement through pymongo, as the seeds ran them.

`bisondb bench --client pymongo` runs this script once per run and reads the
one JSON line it prints; it can also be run by hand.

Workloads (the bench's names):
  profile-single  seed 000: one thread calling `insert_one` per profile document
  profile-pool    seed 000: a `multiprocessing.dummy.Pool(THREADS)` of threads
                  sharing one `MongoClient`, each calling `insert_one`
  large-insert    seed 001: `insert_one` of documents carrying a DOC_SIZE-byte
                  string, one thread
  large-read      seed 001: the same documents inserted (untimed), then read
                  back with one `find()`, one thread

usage: pymongo_bench.py URI WORKLOAD DOCS [--threads N] [--doc-size BYTES]
                        [--db NAME] [--collection NAME] [--drop]
                        [--server-pid PID]

Prints one line: {"client": "pymongo", "workload", "docs", "threads",
"doc_size", "secs", "client_cpu_secs", "server_cpu_secs", "pymongo"}. The
CPU times are user + system time over the timed part only (connecting and
the untimed load of large-read are left out): this process's, and the
server's from /proc/PID/stat when --server-pid is given (else null).
"""
import argparse
import json
import os
import sys
import time

PROFILE = {
    "name": "Huidong Tian",
    "title": "PhD",
    "des": "I am a data scientist focusing on Python and R",
    "other": "As for why the book was created, a theory which has gained considerable "
    "interest, although still controversial is Persian imperial authorisation. ",
}


def document(i, doc_size):
    doc = dict(PROFILE)
    doc["id"] = i
    if doc_size:
        doc["value"] = "x" * doc_size
    return doc


def cpu_secs():
    t = os.times()
    return t.user + t.system


def server_cpu_secs(pid):
    """utime + stime of a process, all its threads, from /proc (Linux)."""
    if pid is None:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            text = f.read()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("uri")
    p.add_argument(
        "workload", choices=["profile-single", "profile-pool", "large-insert", "large-read"]
    )
    p.add_argument("docs", type=int)
    p.add_argument("--threads", type=int, default=8)
    p.add_argument("--doc-size", type=int, default=0)
    p.add_argument("--db", default="bench")
    p.add_argument("--collection", default=None)
    p.add_argument("--drop", action="store_true")
    p.add_argument("--server-pid", type=int, default=None)
    a = p.parse_args(argv)
    try:
        import pymongo
        from pymongo import MongoClient
    except ImportError:
        sys.exit("pymongo_bench.py: pymongo is not installed for " + sys.executable)
    from multiprocessing.dummy import Pool

    doc_size = a.doc_size
    if a.workload.startswith("large") and not doc_size:
        doc_size = 256 * 1024
    client = MongoClient(a.uri)
    coll = client[a.db][a.collection or a.workload.replace("-", "_")]
    if a.drop or a.workload == "large-read":
        coll.drop()
    client.admin.command("ping")

    def insert(i):
        coll.insert_one(document(i, doc_size))

    threads = a.threads if a.workload == "profile-pool" else 1
    if a.workload == "large-read":
        for i in range(a.docs):
            insert(i)
    server0 = server_cpu_secs(a.server_pid)
    started, cpu0 = time.perf_counter(), cpu_secs()
    if a.workload == "profile-pool":
        pool = Pool(threads)
        pool.map(insert, range(a.docs))
        pool.close()
        pool.join()
    elif a.workload == "large-read":
        seen = sum(1 for _ in coll.find())
        if seen != a.docs:
            sys.exit(f"pymongo_bench.py: read {seen} documents, expected {a.docs}")
    else:
        for i in range(a.docs):
            insert(i)
    secs = time.perf_counter() - started
    cpu = cpu_secs() - cpu0
    server1 = server_cpu_secs(a.server_pid)
    server = None if server0 is None or server1 is None else server1 - server0
    client.close()
    print(
        json.dumps(
            {
                "client": "pymongo",
                "workload": a.workload,
                "docs": a.docs,
                "threads": threads,
                "doc_size": doc_size,
                "secs": secs,
                "client_cpu_secs": cpu,
                "server_cpu_secs": server,
                "pymongo": pymongo.version,
            }
        )
    )


if __name__ == "__main__":
    main(sys.argv[1:])
