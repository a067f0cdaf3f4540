"""pymongo against BisonDB: the deprecated `mapReduce` command.

pymongo 4 has no mapReduce helper, so applications send the command with
`db.command("mapReduce", ...)`. The data and the expected totals are the
MongoDB manual's "Map-Reduce Examples" (orders per customer). Expected
replies are mongod 8.0's: `results`/`result` and `ok` only (no `counts`,
no `timeMillis`: `verbose` has been ignored since 4.4), reduce called even
for a key with one value, the output modes `replace`, `merge`, `reduce`, and
mongod's error codes. Every test runs over TCP and over the Unix socket.
"""

import time

import pytest
from bson.code import Code
from bson.son import SON
from pymongo.errors import ExecutionTimeout, OperationFailure

from conftest import bare

ORDERS = [
    (1, "Ant O. Knee", 25), (2, "Ant O. Knee", 70), (3, "Busby Bee", 50),
    (4, "Busby Bee", 25), (5, "Busby Bee", 50), (6, "Cam Elot", 35),
    (7, "Cam Elot", 25), (8, "Don Quis", 75), (9, "Don Quis", 55),
    (10, "Don Quis", 25),
]
TOTALS = [
    {"_id": "Ant O. Knee", "value": 95.0},
    {"_id": "Busby Bee", "value": 125.0},
    {"_id": "Cam Elot", "value": 60.0},
    {"_id": "Don Quis", "value": 155.0},
]
MAP = Code("function() { emit(this.cust_id, this.price); }")
REDUCE = Code("function(key, values) { return Array.sum(values); }")


@pytest.fixture
def orders(db):
    db.orders.insert_many(
        [{"_id": i, "cust_id": c, "price": p, "status": "A"} for i, c, p in ORDERS]
    )
    return db


def map_reduce(db, out, **kw):
    return db.command(SON([("mapReduce", "orders"), ("map", MAP), ("reduce", REDUCE), ("out", out)]), **kw)


def by_id(docs):
    return sorted(docs, key=lambda d: d["_id"])


def test_inline(orders):
    reply = map_reduce(orders, {"inline": 1})
    assert sorted(bare(reply)) == ["ok", "results"]
    assert by_id(reply["results"]) == TOTALS
    # verbose and jsMode change nothing.
    reply = map_reduce(orders, {"inline": 1}, verbose=True, jsMode=True)
    assert sorted(bare(reply)) == ["ok", "results"]
    assert by_id(reply["results"]) == TOTALS


def test_finalize_scope_query_sort_limit(orders):
    reply = orders.command(
        SON([
            ("mapReduce", "orders"),
            ("map", "function() { emit(this.cust_id, {n: 1, total: this.price}); }"),
            ("reduce", "function(k, vals) { var r = {n: 0, total: 0}; vals.forEach(function(v) { r.n += v.n; r.total += v.total; }); return r; }"),
            ("finalize", Code("function(k, v) { return Math.round(v.total / v.n) + unit; }")),
            ("scope", {"unit": " USD"}),
            ("query", {"price": {"$gte": 30}}),
            ("sort", {"_id": -1}),
            ("limit", 3),
            ("out", {"inline": 1}),
        ])
    )
    # price >= 30, highest _id first, three orders: 9, 8, 6.
    assert by_id(reply["results"]) == [
        {"_id": "Cam Elot", "value": "35 USD"},
        {"_id": "Don Quis", "value": "65 USD"},
    ]


def test_reduce_runs_on_a_single_value(db):
    # mongod 8 runs reduce for every key (mrEnableSingleReduceOptimization
    # is off by default).
    db.bar.insert_one({"x": 1})
    reply = db.command(
        SON([
            ("mapReduce", "bar"),
            ("map", "function() { emit(0, 'mapped value'); }"),
            ("reduce", "function(key, values) { return 'reduced value'; }"),
            ("out", {"inline": 1}),
        ])
    )
    assert reply["results"] == [{"_id": 0.0, "value": "reduced value"}]


def test_output_collections(orders, client):
    assert bare(map_reduce(orders, "totals")) == {"result": "totals", "ok": 1.0}
    assert list(orders.totals.find().sort("_id")) == TOTALS

    # Incremental map-reduce: reduce the later orders into the earlier totals.
    orders.command(SON([("mapReduce", "orders"), ("map", MAP), ("reduce", REDUCE),
                        ("query", {"_id": {"$lte": 5}}), ("out", {"replace": "inc"})]))
    orders.command(SON([("mapReduce", "orders"), ("map", MAP), ("reduce", REDUCE),
                        ("query", {"_id": {"$gt": 5}}), ("out", {"reduce": "inc"})]))
    assert list(orders.inc.find().sort("_id")) == TOTALS

    orders.merged.insert_many([{"_id": "Ant O. Knee", "value": 0}, {"_id": "Zed", "value": 7}])
    map_reduce(orders, {"merge": "merged"}, query={"cust_id": "Ant O. Knee"})
    assert list(orders.merged.find().sort("_id")) == [
        {"_id": "Ant O. Knee", "value": 95.0},
        {"_id": "Zed", "value": 7},
    ]

    other = orders.name + "_out"
    client.drop_database(other)
    try:
        reply = map_reduce(orders, {"replace": "t", "db": other})
        assert bare(reply) == {"result": {"db": other, "collection": "t"}, "ok": 1.0}
        assert list(client[other].t.find().sort("_id")) == TOTALS
    finally:
        client.drop_database(other)


@pytest.mark.parametrize(
    "change, code",
    [
        ({"out": None}, 40414),
        ({"map": 1}, 2),
        ({"out": {"inline": 1, "db": "x"}}, 72),
        ({"out": {"merge": "x", "db": "admin"}}, 115),
        ({"out": "system.x"}, 17385),
        ({"out": {"merge": "x", "nonAtomic": False}}, 2),
        ({"limit": 0}, 15958),
        ({"sort": {}}, 15976),
        ({"bogus": 1}, 40415),
        ({"map": "function() { emit(1); }"}, 31220),
        ({"reduce": "function(k, v) { throw new Error('boom'); }"}, 139),
    ],
)
def test_errors(orders, change, code):
    cmd = SON([("mapReduce", "orders"), ("map", MAP), ("reduce", REDUCE), ("out", {"inline": 1})])
    for k, v in change.items():
        if v is None:
            del cmd[k]
        else:
            cmd[k] = v
    with pytest.raises(OperationFailure) as e:
        orders.command(cmd)
    assert e.value.code == code


def test_view_is_refused(orders):
    orders.command("create", "v", viewOn="orders", pipeline=[])
    with pytest.raises(OperationFailure) as e:
        orders.command(SON([("mapReduce", "v"), ("map", MAP), ("reduce", REDUCE), ("out", {"inline": 1})]))
    assert e.value.code == 166
    assert "mapReduce on a view is not supported" in str(e.value)


def test_max_time_ms(orders):
    started = time.monotonic()
    with pytest.raises(ExecutionTimeout) as e:
        orders.command(
            SON([("mapReduce", "orders"), ("map", "function() { sleep(10000); }"),
                 ("reduce", REDUCE), ("out", {"inline": 1}), ("maxTimeMS", 200)])
        )
    assert e.value.code == 50
    assert time.monotonic() - started < 5
