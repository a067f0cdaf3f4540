#!/usr/bin/env python3
"""Point-read latency while another process loads indexed time-series batches.

Usage: read_latency_under_load.py URI N [SECONDS]

Creates `lat.docs` with an index on `created_on` and one document `_id: 0`,
starts a second process that inserts N seed-003 documents in batches of 5000
(generated before it starts timing), and meanwhile runs `find_one({_id: 0})`
once a millisecond for SECONDS (default 8) from this process. Prints the
load's time and the reads' p50/p99/p99.9/max. Two processes, so the reader
never waits for the loader's Python interpreter.
"""

import datetime
import multiprocessing
import random
import sys
import time

import pymongo


def load(uri, n, ready):
    db = pymongo.MongoClient(uri).lat
    rng = random.Random(3)
    base = datetime.datetime(2012, 1, 1)
    batches = [
        [
            {
                "created_on": base + datetime.timedelta(seconds=rng.randrange(366 * 86400)),
                "value": rng.random(),
            }
            for _ in range(5000)
        ]
        for _ in range(n // 5000)
    ]
    ready.set()
    t = time.perf_counter()
    for b in batches:
        db.docs.insert_many(b)
    print(f"load: {n} docs in {time.perf_counter() - t:.1f} s", flush=True)


def main():
    uri, n = sys.argv[1], int(sys.argv[2])
    secs = float(sys.argv[3]) if len(sys.argv) > 3 else 8.0
    coll = pymongo.MongoClient(uri).lat.docs
    coll.drop()
    coll.create_index("created_on")
    coll.insert_one({"_id": 0, "created_on": datetime.datetime(2012, 1, 1)})
    ready = multiprocessing.Event()
    loader = multiprocessing.Process(target=load, args=(uri, n, ready))
    loader.start()
    ready.wait()
    lat = []
    end = time.time() + secs
    while time.time() < end:
        t = time.perf_counter()
        coll.find_one({"_id": 0})
        lat.append(time.perf_counter() - t)
        time.sleep(0.001)
    loader.join()
    lat.sort()

    def q(p):
        return lat[min(len(lat) - 1, int(p * len(lat)))] * 1e3

    print(
        f"reads {len(lat)}: p50 {q(0.5):.2f} ms, p99 {q(0.99):.2f} ms, "
        f"p99.9 {q(0.999):.2f} ms, max {lat[-1] * 1e3:.2f} ms"
    )


if __name__ == "__main__":
    main()
