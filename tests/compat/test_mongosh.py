"""Seed 003's JavaScript loader, run unchanged by mongosh.

`mongosh/create_random.js` is the seed's script byte for byte (only the
blog's HTML escaping and CRLF line ends undone). It relies on the legacy
`db.collection.insert(array)`, which mongosh still supports with a
deprecation warning, and on `arg1`/`arg2` being defined by --eval before the
file runs, exactly as the seed ran it with the old `mongo` shell:
    mongo random --eval "var arg1=50000000;arg2=1" create_random.js

`db.collection.mapReduce()` (test_mongosh_map_reduce_helper) runs the
mapReduce command through mongosh's own helper.

`mongosh/indexes.js` drives secondary indexes through mongosh's helpers
(createIndex, getIndexes, explain("executionStats"), a unique index, hint,
dropIndex) and prints what it saw as one extended-JSON line, checked here and
then against the collection with pymongo.
"""

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

import pytest
from bson import json_util

from conftest import NODE_DIR, bare, client_env, require_client, with_database

SCRIPT = Path(__file__).resolve().parent / "mongosh" / "create_random.js"
INDEXES_SCRIPT = Path(__file__).resolve().parent / "mongosh" / "indexes.js"
DOCUMENTS = 200_000
TIMEOUT_S = 600


def mongosh_path():
    override = os.environ.get("MONGOSH")
    if override:
        return Path(override)
    local = NODE_DIR / "node_modules" / ".bin" / "mongosh"
    if local.exists():
        return local
    found = shutil.which("mongosh")
    return Path(found) if found else None


def require_mongosh():
    return require_client(
        mongosh_path(),
        "mongosh",
        "not in tests/compat/node/node_modules (run `npm ci` there or `bash scripts/test.sh`), "
        "not on PATH, and MONGOSH is not set",
    )


def test_create_random_js(client, uri):
    mongosh = require_mongosh()
    client.drop_database("random")

    argv = [
        str(mongosh),
        with_database(uri, "random"),
        "--quiet",
        "--eval", f"var arg1={DOCUMENTS};arg2=1",
        str(SCRIPT),
    ]
    result = subprocess.run(
        argv, env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    assert "Job#1 inserted 100000 documents." in output, output[-4000:]
    assert f"Job#1 inserted {DOCUMENTS} in " in output, output[-4000:]

    collection = client.random.randomData
    # The script inserts only full batches of 5,000; 200,000 is 40 of them.
    assert collection.count_documents({}) == DOCUMENTS
    assert collection.estimated_document_count() == DOCUMENTS
    doc = collection.find_one()
    assert sorted(doc) == ["_id", "created_on", "value"]
    assert isinstance(doc["created_on"], datetime)
    assert 0.0 <= doc["value"] < 1.0
    # minDate..maxDate is 2012 in the shell's local time zone.
    oldest = collection.find_one(sort=[("created_on", 1)])["created_on"]
    newest = collection.find_one(sort=[("created_on", -1)])["created_on"]
    assert datetime(2011, 12, 31) <= oldest <= newest <= datetime(2013, 1, 2)
    client.drop_database("random")


def test_indexes_js(db, uri):
    mongosh = require_mongosh()
    argv = [str(mongosh), with_database(uri, db.name), "--quiet", str(INDEXES_SCRIPT)]
    result = subprocess.run(
        argv, env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("INDEXES_RESULT ")]
    assert len(lines) == 1, output[-4000:]
    r = json_util.loads(lines[0][len("INDEXES_RESULT "):])

    def ixscan(name, key, bounds, direction="forward"):
        return [
            {"stage": "FETCH"},
            {"stage": "IXSCAN", "indexName": name, "keyPattern": key, "direction": direction, "indexBounds": bounds},
        ]

    def plan(summary):
        # Absent fields come back as null from EJSON.stringify: leave them out.
        return [{k: v for k, v in s.items() if v is not None} for s in summary["winningPlan"]]

    def counters(summary):
        return summary["nReturned"], summary["totalKeysExamined"], summary["totalDocsExamined"]

    # ages are 20 + i % 50: age 30 is _id 10 and 60; ages >= 65 are 10 documents.
    assert plan(r["before"]) == [{"stage": "COLLSCAN", "direction": "forward"}]
    assert counters(r["before"]) == (2, 0, 100)
    assert r["beforeIds"] == r["ageEqIds"] == [10, 60]

    assert (r["createAge"], r["createCompound"], r["createUnique"]) == ("age_1", "city_age", "name_1")
    assert r["getIndexes"] == [
        {"v": 2, "key": {"_id": 1}, "name": "_id_"},
        {"v": 2, "key": {"age": 1}, "name": "age_1"},
        {"v": 2, "key": {"city": 1, "age": -1}, "name": "city_age"},
        {"v": 2, "key": {"name": 1}, "name": "name_1", "unique": True},
    ]

    assert plan(r["ageEq"]) == ixscan("age_1", {"age": 1}, {"age": ["[30, 30]"]})
    assert counters(r["ageEq"]) == (2, 2, 2)
    assert r["ageEq"]["hasExecutionTimeMillis"] is True
    assert plan(r["ageRange"]) == ixscan("age_1", {"age": 1}, {"age": ["[65, inf.0]"]})
    assert counters(r["ageRange"]) == (10, 10, 10)
    # sort({age: -1}) reads the ascending index backward: no SORT stage.
    assert plan(r["sortDesc"]) == ixscan("age_1", {"age": 1}, {"age": ["[inf.0, 65]"]}, "backward")
    assert r["sortDescAges"] == [69, 69, 68, 68, 67, 67, 66, 66, 65, 65]
    hinted = plan(r["hinted"])
    assert [s["stage"] for s in hinted] == ["FETCH", "IXSCAN"]
    assert hinted[1]["indexName"] == "city_age"
    assert r["hinted"]["nReturned"] == 2
    assert r["badHint"]["code"] == 2
    assert r["badHint"]["codeName"] == "BadValue"
    assert r["countDocuments"] == 2

    dup = r["duplicate"]
    assert dup["name"] == "MongoServerError"
    assert dup["code"] == 11000
    assert dup["message"] == (
        f'E11000 duplicate key error collection: {db.name}.people index: name_1 dup key: {{ name: "user7" }}'
    )
    assert r["countAfterDuplicate"] == 100

    assert bare(r["dropAge"]) == {"nIndexesWas": 4, "ok": 1}
    assert r["afterDropAge"] == ["_id_", "city_age", "name_1"]
    assert plan(r["afterDropPlan"]) == [{"stage": "COLLSCAN", "direction": "forward"}]
    assert counters(r["afterDropPlan"]) == (2, 0, 100)
    assert (r["dropId"]["code"], r["dropId"]["message"]) == (72, "cannot drop _id index")
    assert (r["dropMissing"]["code"], r["dropMissing"]["codeName"]) == (27, "IndexNotFound")
    assert bare(r["dropByKey"]) == {"nIndexesWas": 3, "ok": 1}
    assert r["afterDropByKey"] == ["_id_", "name_1"]

    # What the script left behind, seen through pymongo.
    people = db.people
    assert people.index_information() == {
        "_id_": {"v": 2, "key": [("_id", 1)]},
        "name_1": {"v": 2, "key": [("name", 1)], "unique": True},
        "city_sparse": {"v": 2, "key": [("city", 1)], "sparse": True},
    }
    assert people.count_documents({}) == 100
    assert people.find_one({"name": "user7"})["_id"] == 7
    assert people.find({"name": "user7"}).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexName"] == "name_1"



# What a mongosh user sees of explain's counters: mongod sends them as 32-bit
# ints (BSONObjBuilder::appendNumber), plain numbers in mongosh.
COUNTERS_JS = """
db.t.drop();
db.t.insertMany([{ a: 1 }, { a: 1 }, { a: 2 }]);
db.t.createIndex({ a: 1 });
const st = db.t.find({ a: 1 }).explain("executionStats").executionStats;
print("COUNTERS " + JSON.stringify(
  [st.nReturned, st.totalKeysExamined, st.totalDocsExamined, st.executionTimeMillis].map((v) => typeof v)));
print("SHOWN " + util.inspect(st.nReturned));
"""


def test_mongosh_explain_counters_are_numbers(db, uri):
    mongosh = require_mongosh()
    argv = [str(mongosh), with_database(uri, db.name), "--quiet", "--eval", COUNTERS_JS]
    result = subprocess.run(
        argv, env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    kinds = next(line for line in result.stdout.splitlines() if line.startswith("COUNTERS "))
    shown = next(line for line in result.stdout.splitlines() if line.startswith("SHOWN "))
    assert db.t.count_documents({"a": 1}) == 2
    if kinds != 'COUNTERS ["number","number","number","number"]':
        pytest.xfail(f"differs from mongod: explain executionStats counters reach mongosh as 64-bit "
                     f"Longs ({kinds}; nReturned shows as {shown[len('SHOWN '):]}), mongod sends int32: "
                     "nReturned shows as 2")


MAP_REDUCE_JS = """
const map = function () { emit(this.cust_id, this.price); };
const reduce = function (key, values) { return Array.sum(values); };
const inline = db.orders.mapReduce(map, reduce, { out: { inline: 1 } });
const out = db.orders.mapReduce(map, reduce, { out: { replace: "totals" }, query: { price: { $gte: 50 } } });
print("MAP_REDUCE_RESULT " + EJSON.stringify({ inline: inline, out: out }));
"""


def test_mongosh_map_reduce_helper(db, uri):
    # mongosh's deprecated db.collection.mapReduce() sends the mapReduce
    # command; mongod 8 answers {results, ok} inline and {result, ok} into a
    # collection (the manual's orders example: 95, 125, 60, 155).
    mongosh = require_mongosh()
    db.orders.insert_many(
        [
            {"_id": 1, "cust_id": "Ant O. Knee", "price": 25},
            {"_id": 2, "cust_id": "Ant O. Knee", "price": 70},
            {"_id": 3, "cust_id": "Busby Bee", "price": 50},
            {"_id": 4, "cust_id": "Busby Bee", "price": 25},
            {"_id": 5, "cust_id": "Busby Bee", "price": 50},
            {"_id": 6, "cust_id": "Cam Elot", "price": 35},
            {"_id": 7, "cust_id": "Cam Elot", "price": 25},
            {"_id": 8, "cust_id": "Don Quis", "price": 75},
            {"_id": 9, "cust_id": "Don Quis", "price": 55},
            {"_id": 10, "cust_id": "Don Quis", "price": 25},
        ]
    )
    argv = [str(mongosh), with_database(uri, db.name), "--quiet", "--eval", MAP_REDUCE_JS]
    result = subprocess.run(
        argv, env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    lines = [line for line in result.stdout.splitlines() if line.startswith("MAP_REDUCE_RESULT ")]
    assert len(lines) == 1, output[-4000:]
    r = json_util.loads(lines[0][len("MAP_REDUCE_RESULT "):])
    assert sorted(bare(r["inline"])) == ["ok", "results"]
    assert sorted(r["inline"]["results"], key=lambda d: d["_id"]) == [
        {"_id": "Ant O. Knee", "value": 95},
        {"_id": "Busby Bee", "value": 125},
        {"_id": "Cam Elot", "value": 60},
        {"_id": "Don Quis", "value": 155},
    ]
    assert r["out"]["result"] == "totals"
    assert list(db.totals.find().sort("_id")) == [
        {"_id": "Ant O. Knee", "value": 70.0},
        {"_id": "Busby Bee", "value": 100.0},
        {"_id": "Don Quis", "value": 130.0},
    ]
