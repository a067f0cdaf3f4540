"""pymongo against BisonDB: server-side JavaScript.

`$where` through Cursor.where() and filters (string, Code, functions, with
other predicates), mongod's errors (Code with scope, a throwing script),
max_time_ms interrupting a sleeping script (ExecutionTimeout, code 50), and
the `$function` aggregation expression. Every test runs over TCP and over
the Unix socket. Expected values are mongod 8.0's.
"""

import time

import pytest
from bson.code import Code
from pymongo.errors import ExecutionTimeout, OperationFailure


@pytest.fixture
def coll(db):
    db.c.insert_many([{"_id": i, "x": i} for i in range(10)])
    return db.c


def xs(cursor):
    return sorted(d["x"] for d in cursor)


def test_where_forms(coll):
    assert xs(coll.find().where("this.x < 3")) == [0, 1, 2]
    assert xs(coll.find().where(Code("obj.x > 7"))) == [8, 9]
    assert xs(coll.find({"$where": "function() { return this.x % 3 == 0 }"})) == [0, 3, 6, 9]
    assert xs(coll.find({"x": {"$gt": 4}}).where("this.x < 7")) == [5, 6]
    assert coll.count_documents({"x": {"$lt": 5}}) == 5
    assert coll.delete_many({"$where": "this.x >= 8"}).deleted_count == 2


def test_where_errors(coll):
    with pytest.raises(OperationFailure) as e:
        coll.find().where(Code("this.x < i", {"i": 3})).to_list()
    assert e.value.code == 4649201
    with pytest.raises(OperationFailure) as e:
        coll.find({"$where": "throw new Error('boom')"}).to_list()
    assert e.value.code == 139
    assert "Error: boom" in str(e.value)
    # countDocuments is an aggregation, where mongod refuses $where.
    with pytest.raises(OperationFailure) as e:
        coll.count_documents({"$where": "true"})
    assert e.value.code == 2


def test_max_time_ms_interrupts_where(coll):
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout) as e:
        coll.find({"$where": "sleep(10000); return true"}).max_time_ms(200).to_list()
    assert e.value.code == 50
    assert time.monotonic() - started < 5


def test_function_expression(coll):
    out = coll.aggregate(
        [
            {"$match": {"x": {"$lt": 3}}},
            {
                "$project": {
                    "_id": 0,
                    "sq": {
                        "$function": {
                            "body": "function(x) { return x * x }",
                            "args": ["$x"],
                            "lang": "js",
                        }
                    },
                }
            },
            {"$sort": {"sq": 1}},
        ]
    ).to_list()
    assert out == [{"sq": 0.0}, {"sq": 1.0}, {"sq": 4.0}]
