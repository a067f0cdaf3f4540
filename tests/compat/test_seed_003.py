"""Seed 003: the Python bulk loader, in one process and then in two.

`seed_003_create_random.py` is the seed's create_random.py (ported to Python 3
and pymongo 4); this test runs it as the seed did, as separate OS processes:
first 200,000 documents from one process, then 100,000 from each of two
processes at once (the seed's create_random_parallel.py, which polled the
count while its children were loading). Then it runs the seed's analysis, the
per-day average/min/max of `value`, as an aggregation and checks it against
the same numbers computed in Python from the documents read back.
"""

import math
import os
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parent / "seed_003_create_random.py"
TOTAL = 200_000
CHILD_TIMEOUT_S = 600


def loader(uri, documents_number, job_id=None):
    argv = [sys.executable, str(SCRIPT), str(documents_number)]
    if job_id is not None:
        argv.append(str(job_id))
    env = dict(os.environ, MONGODB_URI=uri)
    return subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def finish(process):
    try:
        out, _ = process.communicate(timeout=CHILD_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        process.kill()
        out, _ = process.communicate()
        pytest.fail(f"create_random.py did not finish in {CHILD_TIMEOUT_S}s:\n{out[-4000:]}")
    assert process.returncode == 0, f"create_random.py exited {process.returncode}:\n{out[-4000:]}"
    return out


def assert_counts(collection, expected):
    assert collection.count_documents({}) == expected
    assert collection.estimated_document_count() == expected


def test_seed_003_create_random_single_process(client, uri):
    client.drop_database("random")
    collection = client.random.randomData

    out = finish(loader(uri, TOTAL))

    # print(a, b, ...) joins with one space, hence the doubled spaces.
    assert "Job#1  inserted  100000  documents." in out
    assert f"Job#1  inserted  {TOTAL}  in " in out
    assert_counts(collection, TOTAL)
    doc = collection.find_one()
    assert sorted(doc) == ["_id", "created_on", "value"]
    assert isinstance(doc["created_on"], datetime)
    assert 0.0 <= doc["value"] < 1.0


def test_seed_003_create_random_parallel(client, uri):
    client.drop_database("random")
    collection = client.random.randomData
    processes = 2
    per_process = TOTAL // processes

    # As in create_random_parallel.py: one loader per "core", each inserting
    # its share, while this process polls the count.
    children = [loader(uri, per_process, i) for i in range(processes)]
    seen = []
    while any(c.poll() is None for c in children):
        inserted = collection.count_documents({})
        # Nothing is deleted, so a later count never sees fewer documents.
        # (No whole-batch assertion: mongod does not insert a batch atomically.)
        assert not seen or inserted >= seen[-1], (seen[-1], inserted)
        seen.append(inserted)
        time.sleep(0.2)
    outputs = [finish(c) for c in children]

    for i, out in enumerate(outputs):
        assert f"Job#{i}  inserted  {per_process}  in " in out
    assert_counts(collection, TOTAL)

    check_daily_statistics(collection)


def check_daily_statistics(collection):
    """The seed's analysis: per-day avg/min/max of value, server vs Python."""
    pipeline = [
        {"$group": {
            "_id": {
                "y": {"$year": "$created_on"},
                "m": {"$month": "$created_on"},
                "d": {"$dayOfMonth": "$created_on"},
            },
            "count": {"$sum": 1},
            "avg": {"$avg": "$value"},
            "min": {"$min": "$value"},
            "max": {"$max": "$value"},
        }},
        {"$sort": {"_id": 1}},
    ]
    server = list(collection.aggregate(pipeline, allowDiskUse=True))

    values = defaultdict(list)
    for doc in collection.find({}, {"_id": 0, "created_on": 1, "value": 1}, batch_size=10_000):
        day = doc["created_on"]
        values[(day.year, day.month, day.day)].append(doc["value"])
    assert sum(len(v) for v in values.values()) == TOTAL

    # Sorting on the embedded {y, m, d} documents is chronological.
    assert [(g["_id"]["y"], g["_id"]["m"], g["_id"]["d"]) for g in server] == sorted(values)
    # A year of random dates: every day of 2012 has documents.
    assert len(server) >= 366
    for group in server:
        key = (group["_id"]["y"], group["_id"]["m"], group["_id"]["d"])
        day_values = values[key]
        assert list(group["_id"]) == ["y", "m", "d"]
        assert group["count"] == len(day_values), key
        assert group["min"] == min(day_values), key
        assert group["max"] == max(day_values), key
        # Summation order differs between server and client.
        assert math.isclose(group["avg"], math.fsum(day_values) / len(day_values), rel_tol=1e-9), key
