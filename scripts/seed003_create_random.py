#!/usr/bin/env python3
"""Seed 003's `create_random.py`, timed end to end as the seed times it.

The seed's program generates each time-series document in Python
(`{created_on: <random second of 2012>, value: <random float>}`), collects 5000
of them and inserts the batch, and reports the whole run's time: generation and
inserts together. This port keeps that loop and its arithmetic; only what
pymongo 4 removed changed (`insert_many` for `insert`, `MongoClient` for
`Connection`). The collection `random.randomData` is dropped first; `indexed`
creates the `created_on` index before the load.

scripts/bench_ts_index.py is the stricter measure of the server: it generates
and encodes every batch before its clock starts and times only `insert_many`.

usage: seed003_create_random.py URI N plain|indexed
"""
import random
import sys
import time
from datetime import datetime

import pymongo


def main():
    uri, n, mode = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    if mode not in ("plain", "indexed"):
        sys.exit("the third argument is plain or indexed")
    min_date = datetime(2012, 1, 1)
    max_date = datetime(2013, 1, 1)
    delta = (max_date - min_date).total_seconds()
    coll = pymongo.MongoClient(uri).random.randomData
    coll.drop()
    if mode == "indexed":
        coll.create_index("created_on")
    batch_number = 5000
    batch = list(range(batch_number))
    start = time.perf_counter()
    for index in range(n):
        seconds = time.mktime(min_date.timetuple()) + int(round(random.random() * delta))
        batch[index % batch_number] = {
            "created_on": datetime.fromtimestamp(seconds),
            "value": random.random(),
        }
        if (index + 1) % batch_number == 0:
            coll.insert_many(batch)
    secs = time.perf_counter() - start
    print(f"{mode}: {n} documents in {secs:.1f} s = {n / secs:,.0f} docs/s")


if __name__ == "__main__":
    main()
