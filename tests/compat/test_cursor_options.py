"""pymongo against BisonDB: find's min/max and returnKey, and exhaust cursors.

min()/max() bound the hinted index (min inclusive, max exclusive) and fail as
mongod 8.0 does; return_key gives the index key; CursorType.EXHAUST streams
every batch over one connection (pymongo is the driver that speaks exhaust).
Every test runs over TCP and over the Unix socket (the `db` fixture is a
fresh database per test and transport).
"""

import pytest
from pymongo import ASCENDING, DESCENDING, CursorType
from pymongo.errors import OperationFailure


@pytest.fixture
def coll(db):
    c = db.c
    c.insert_many([{"_id": j, "j": j, "k": j} for j in range(10)])
    c.create_index("j")
    c.create_index([("j", ASCENDING), ("k", DESCENDING)])
    return c


def test_min_max_bound_the_hinted_index(coll):
    got = coll.find().min([("j", 3)]).max([("j", 6)]).hint([("j", 1)])
    assert [d["j"] for d in got] == [3, 4, 5]
    compound = coll.find().min([("j", 2), ("k", 2)]).max([("j", 4), ("k", 9)])
    assert [d["j"] for d in compound.hint("j_1_k_-1")] == [2, 3]
    keys = coll.find({"k": {"$gt": 6}}, return_key=True).min([("j", 5)]).hint("j_1")
    assert list(keys) == [{"j": 7}, {"j": 8}, {"j": 9}]


@pytest.mark.parametrize(
    "min_spec, max_spec, hint, code",
    [
        ([("k", 3), ("j", 3)], None, "j_1_k_-1", 51174),
        ([("j", 5)], [("j", 5)], "j_1", 51175),
        ([("j", 5)], [("k", 9)], "j_1", 51176),
    ],
)
def test_min_max_errors_are_mongods(coll, min_spec, max_spec, hint, code):
    cursor = coll.find().min(min_spec).hint(hint)
    if max_spec:
        cursor = cursor.max(max_spec)
    with pytest.raises(OperationFailure) as info:
        cursor.to_list()
    assert info.value.code == code


def test_exhaust_cursor_streams_every_batch(db):
    db.e.insert_many([{"_id": i} for i in range(250)])
    got = list(db.e.find(cursor_type=CursorType.EXHAUST, batch_size=7))
    assert [d["_id"] for d in got] == list(range(250))
    # The connection goes back to the pool and serves the next command.
    assert db.command("ping")["ok"] == 1.0
