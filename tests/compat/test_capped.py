"""pymongo against BisonDB: capped collections and tailable cursors.

create_collection(capped=True, size=..., max=...) and its errors, options()
and list_collections, collStats, eviction by max and by size in insertion
order, $natural sort, and TAILABLE / TAILABLE_AWAIT cursors following
inserts. Every test runs over TCP and over the Unix socket (the `db` fixture
is a fresh database per test and transport). Expected values are mongod 8.0's.
"""

import time

import pytest
from pymongo import CursorType
from pymongo.errors import OperationFailure


def test_options_list_collections_and_stats(db):
    c = db.create_collection("c", capped=True, size=1000, max=5)
    # The size is rounded up to a multiple of 256, as mongod does.
    assert c.options() == {"capped": True, "size": 1024, "max": 5}
    (info,) = list(db.list_collections(filter={"options.capped": True}))
    assert info["name"] == "c"
    stats = db.command("collStats", "c")
    assert stats["capped"] is True
    assert stats["maxSize"] == 1024
    assert stats["max"] == 5
    db.create_collection("plain")
    assert db.plain.options() == {}
    assert db.command("collStats", "plain")["capped"] is False


@pytest.mark.parametrize(
    "options, code",
    [
        ({"capped": True}, 72),
        ({"size": 4096}, 72),
        ({"capped": True, "size": 0}, 51024),
        ({"capped": True, "size": -1}, 51024),
        ({"capped": True, "size": "big"}, 14),
        ({"capped": True, "size": 4096, "max": 2**31}, 2),
    ],
)
def test_bad_options_fail_as_mongod(db, options, code):
    with pytest.raises(OperationFailure) as info:
        db.command("create", "bad", **options)
    assert info.value.code == code
    assert "bad" not in db.list_collection_names()


def test_max_keeps_the_newest_in_insertion_order(db):
    c = db.create_collection("c", capped=True, size=1 << 20, max=3)
    for i in (5, 1, 9, 3):
        c.insert_one({"_id": i})
    assert [d["_id"] for d in c.find()] == [1, 9, 3]
    assert [d["_id"] for d in c.find().sort("$natural", -1)] == [3, 9, 1]
    c.insert_many([{"_id": i} for i in range(10, 16)])
    assert [d["_id"] for d in c.find()] == [13, 14, 15]
    assert c.count_documents({}) == 3
    # Deletes and updates that grow a document are allowed in mongod 8.0.
    c.delete_one({"_id": 14})
    c.update_one({"_id": 13}, {"$set": {"pad": "x" * 300}})
    c.insert_one({"_id": 2})
    assert [d["_id"] for d in c.find()] == [13, 15, 2]


def test_size_keeps_the_collection_under_its_size(db):
    c = db.create_collection("c", capped=True, size=4096)
    for i in range(200):
        c.insert_one({"_id": i, "pad": "p" * 50})
    stats = db.command("collStats", "c")
    assert stats["size"] <= 4096
    ids = [d["_id"] for d in c.find()]
    assert ids == list(range(200 - len(ids), 200))


def test_tailable_cursor_follows_inserts_and_dies_on_rollover(db):
    c = db.create_collection("c", capped=True, size=4096, max=3)
    c.insert_one({"x": 1})
    cursor = c.find(cursor_type=CursorType.TAILABLE)
    assert [d["x"] for d in cursor] == [1]
    assert cursor.alive
    c.insert_one({"x": 2})
    assert [d["x"] for d in cursor] == [2]
    # The cursor's last document is evicted: the cursor is closed.
    c.insert_many([{"x": i} for i in range(3, 7)])
    assert cursor.to_list() == []
    assert not cursor.alive


def test_tailable_on_a_normal_collection_fails(db):
    db.plain.insert_one({})
    with pytest.raises(OperationFailure) as info:
        list(db.plain.find(cursor_type=CursorType.TAILABLE))
    assert info.value.code == 2


def test_await_data_waits_for_max_await_time(db):
    c = db.create_collection("c", capped=True, size=4096)
    c.insert_one({"x": 1})
    cursor = c.find(cursor_type=CursorType.TAILABLE_AWAIT).max_await_time_ms(300)
    assert cursor.next()["x"] == 1
    started = time.monotonic()
    assert next(cursor, None) is None
    assert time.monotonic() - started >= 0.25
    assert cursor.alive
    c.insert_one({"x": 2})
    assert next(cursor)["x"] == 2
    cursor.close()
