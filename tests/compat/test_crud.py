"""pymongo against BisonDB: CRUD, cursors, aggregation, catalog, errors.

Every test runs over TCP and over the Unix socket (the `db` fixture is a
fresh database per test and transport). Expected values are mongod 7/8's.
"""

import math

import bson
import pytest
from bson import Int64, ObjectId
from pymongo import (
    ASCENDING,
    DESCENDING,
    DeleteOne,
    MongoClient,
    ReturnDocument,
    UpdateOne,
    monitoring,
)
from pymongo.errors import (
    BulkWriteError,
    CollectionInvalid,
    DocumentTooLarge,
    DuplicateKeyError,
    OperationFailure,
)

from conftest import bare


MAX_BSON = 16 * 1024 * 1024


class Recorder(monitoring.CommandListener, monitoring.ConnectionPoolListener):
    """Command and connection-pool events of one client."""

    def __init__(self):
        self.commands = []
        self.replies = []
        self.connections_created = 0
        self.connections_closed = 0

    # CommandListener
    def started(self, event):
        self.commands.append((event.command_name, event.command))

    def succeeded(self, event):
        self.replies.append((event.command_name, event.reply))

    def failed(self, event):
        self.replies.append((event.command_name, event.failure))

    # ConnectionPoolListener
    def connection_created(self, event):
        self.connections_created += 1

    def connection_closed(self, event):
        self.connections_closed += 1

    def pool_created(self, event): pass
    def pool_ready(self, event): pass
    def pool_cleared(self, event): pass
    def pool_closed(self, event): pass
    def connection_ready(self, event): pass
    def connection_check_out_started(self, event): pass
    def connection_check_out_failed(self, event): pass
    def connection_checked_out(self, event): pass
    def connection_checked_in(self, event): pass

    def sent(self, name):
        return [cmd for n, cmd in self.commands if n == name]

    def replies_to(self, name):
        return [reply for n, reply in self.replies if n == name]


@pytest.fixture
def recorded(uri, db):
    """A second client on the same server whose traffic is recorded."""
    recorder = Recorder()
    c = MongoClient(uri, event_listeners=[recorder], maxPoolSize=1, serverSelectionTimeoutMS=10000)
    try:
        yield c[db.name], recorder
    finally:
        c.close()


# ---------------------------------------------------------------- inserts


def test_insert_one_generates_objectid_and_reads_back(db):
    doc = {"name": "a", "n": 1, "nested": {"x": [1, 2, {"y": None}]}, "f": 1.5, "b": True}
    result = db.c.insert_one(doc)
    assert result.acknowledged
    assert isinstance(result.inserted_id, ObjectId)
    got = db.c.find_one({"_id": result.inserted_id})
    assert got == doc
    assert list(got) == ["_id", "name", "n", "nested", "f", "b"]


@pytest.mark.parametrize("key", [7, "seven", {"a": 1, "b": 2}, 7.5, Int64(2**40), None])
def test_insert_one_with_explicit_id(db, key):
    assert db.c.insert_one({"_id": key, "v": 1}).inserted_id == key
    assert db.c.find_one({"_id": key}) == {"_id": key, "v": 1}
    assert db.c.count_documents({}) == 1


def test_insert_many_ordered_stops_at_duplicate(db):
    with pytest.raises(BulkWriteError) as info:
        db.c.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}], ordered=True)
    details = info.value.details
    assert details["nInserted"] == 2
    assert len(details["writeErrors"]) == 1
    error = details["writeErrors"][0]
    assert error["index"] == 2
    assert error["code"] == 11000
    assert "E11000 duplicate key error" in error["errmsg"]
    assert error["keyPattern"] == {"_id": 1}
    assert error["keyValue"] == {"_id": 2}
    assert sorted(d["_id"] for d in db.c.find()) == [1, 2]


def test_insert_many_unordered_continues_after_duplicate(db):
    with pytest.raises(BulkWriteError) as info:
        db.c.insert_many([{"_id": 1}, {"_id": 2}, {"_id": 2}, {"_id": 3}, {"_id": 1}], ordered=False)
    details = info.value.details
    assert details["nInserted"] == 3
    assert [(e["index"], e["code"]) for e in details["writeErrors"]] == [(2, 11000), (4, 11000)]
    assert sorted(d["_id"] for d in db.c.find()) == [1, 2, 3]


def test_insert_one_duplicate_key_error(db):
    db.c.insert_one({"_id": "k", "v": 1})
    with pytest.raises(DuplicateKeyError) as info:
        db.c.insert_one({"_id": "k", "v": 2})
    assert info.value.code == 11000
    assert info.value.details["keyPattern"] == {"_id": 1}
    assert info.value.details["keyValue"] == {"_id": "k"}
    assert db.c.find_one({"_id": "k"})["v"] == 1


def test_insert_many_large_batch_split_by_driver(db):
    # More than maxWriteBatchSize (100,000) would be split; 10,000 small docs
    # still arrive as one OP_MSG document sequence.
    result = db.c.insert_many([{"i": i} for i in range(10_000)])
    assert len(result.inserted_ids) == 10_000
    assert db.c.count_documents({}) == 10_000
    assert db.c.count_documents({"i": {"$gte": 9_000}}) == 1_000


# ---------------------------------------------------------------- find & cursors


@pytest.fixture
def numbers(db):
    db.numbers.insert_many([{"_id": i, "n": i, "mod7": i % 7, "s": f"s{i:04d}"} for i in range(1000)])
    return db.numbers


def test_find_filter_projection_sort_skip_limit(numbers):
    got = list(
        numbers.find({"n": {"$gte": 100}, "mod7": 3}, {"_id": 0, "n": 1, "s": 1})
        .sort("n", DESCENDING)
        .skip(5)
        .limit(10)
    )
    expected_ns = [n for n in range(999, 99, -1) if n % 7 == 3][5:15]
    assert got == [{"n": n, "s": f"s{n:04d}"} for n in expected_ns]


def test_find_exclusion_projection_and_compound_sort(numbers):
    got = list(numbers.find({"n": {"$lt": 20}}, {"s": 0}).sort([("mod7", ASCENDING), ("n", DESCENDING)]).limit(4))
    assert got == [
        {"_id": 14, "n": 14, "mod7": 0},
        {"_id": 7, "n": 7, "mod7": 0},
        {"_id": 0, "n": 0, "mod7": 0},
        {"_id": 15, "n": 15, "mod7": 1},
    ]


@pytest.mark.parametrize(
    "query, expected_ids",
    [
        ({"n": 5}, [5]),
        ({"n": {"$in": [1, 3, 2000]}}, [1, 3]),
        ({"n": {"$gt": 995}}, [996, 997, 998, 999]),
        ({"n": {"$lte": 2}}, [0, 1, 2]),
        ({"n": {"$ne": 0}, "_id": {"$lt": 3}}, [1, 2]),
        ({"$or": [{"n": 1}, {"s": "s0010"}]}, [1, 10]),
        ({"$and": [{"n": {"$gte": 10}}, {"n": {"$lt": 12}}]}, [10, 11]),
        ({"n": {"$nin": list(range(3, 1000))}}, [0, 1, 2]),
        ({"s": {"$regex": "^s099[0-2]$"}}, [990, 991, 992]),
        ({"missing": {"$exists": True}}, []),
        ({"n": {"$not": {"$gt": 1}}}, [0, 1]),
        ({"mod7": {"$eq": 6}, "n": {"$lt": 30}}, [6, 13, 20, 27]),
    ],
)
def test_find_filters(numbers, query, expected_ids):
    assert sorted(d["_id"] for d in numbers.find(query)) == expected_ids


def test_find_default_first_batch_is_101(recorded, numbers):
    rdb, recorder = recorded
    assert len(list(rdb.numbers.find())) == 1000
    first = recorder.replies_to("find")[0]
    assert len(first["cursor"]["firstBatch"]) == 101
    assert first["cursor"]["ns"] == f"{rdb.name}.numbers"
    assert first["cursor"]["id"] != 0
    more = recorder.replies_to("getMore")
    assert sum(len(r["cursor"]["nextBatch"]) for r in more) == 899
    assert more[-1]["cursor"]["id"] == 0


def test_batch_size_7_takes_142_getmores(recorded, numbers):
    rdb, recorder = recorded
    cursor = rdb.numbers.find({}, batch_size=7).sort("_id", ASCENDING)
    ids = [d["_id"] for d in cursor]
    assert ids == list(range(1000))
    assert not cursor.alive
    getmores = recorder.sent("getMore")
    # 7 in the first batch, then 142 batches of at most 7.
    assert len(getmores) == 142
    assert all(g["batchSize"] == 7 for g in getmores)
    assert len({g["getMore"] for g in getmores}) == 1
    replies = recorder.replies_to("getMore")
    assert [len(r["cursor"]["nextBatch"]) for r in replies] == [7] * 141 + [6]
    assert replies[-1]["cursor"]["id"] == 0


def test_limit_smaller_than_batch_closes_cursor(recorded, numbers):
    rdb, recorder = recorded
    cursor = rdb.numbers.find().sort("_id", DESCENDING).limit(5)
    assert [d["_id"] for d in cursor] == [999, 998, 997, 996, 995]
    assert recorder.sent("getMore") == []
    assert recorder.replies_to("find")[0]["cursor"]["id"] == 0


def test_cursor_close_kills_it_on_the_server(recorded, numbers):
    rdb, recorder = recorded
    cursor = rdb.numbers.find(batch_size=2)
    assert next(cursor)["_id"] == 0
    cursor_id = cursor.cursor_id
    assert cursor_id
    cursor.close()
    killed = recorder.replies_to("killCursors")
    assert len(killed) == 1
    assert killed[0]["cursorsKilled"] == [cursor_id]


def test_getmore_after_killcursors_is_cursor_not_found(db, numbers):
    reply = db.command("find", "numbers", batchSize=2)
    cursor_id = reply["cursor"]["id"]
    assert len(reply["cursor"]["firstBatch"]) == 2
    killed = db.command("killCursors", "numbers", cursors=[Int64(cursor_id)])
    assert killed["cursorsKilled"] == [cursor_id]
    assert killed["cursorsNotFound"] == []
    with pytest.raises(OperationFailure) as info:
        db.command("getMore", Int64(cursor_id), collection="numbers")
    assert info.value.code == 43
    assert info.value.details["codeName"] == "CursorNotFound"


def test_raw_getmore_pages_through(db, numbers):
    reply = db.command("find", "numbers", filter={"mod7": 0}, sort={"_id": 1}, batchSize=50)
    seen = [d["_id"] for d in reply["cursor"]["firstBatch"]]
    cursor_id = reply["cursor"]["id"]
    while cursor_id:
        more = db.command("getMore", Int64(cursor_id), collection="numbers", batchSize=50)
        seen += [d["_id"] for d in more["cursor"]["nextBatch"]]
        cursor_id = more["cursor"]["id"]
    assert seen == list(range(0, 1000, 7))


# ---------------------------------------------------------------- updates


def test_update_one_operators(db):
    db.c.insert_many([{"_id": 1, "a": 1, "tags": ["x"], "gone": True}, {"_id": 2, "a": 1}])
    result = db.c.update_one(
        {"a": 1},
        {"$set": {"b.c": "new"}, "$inc": {"a": 10}, "$push": {"tags": "y"}, "$unset": {"gone": ""}},
    )
    assert (result.matched_count, result.modified_count, result.upserted_id) == (1, 1, None)
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "a": 11, "tags": ["x", "y"], "b": {"c": "new"}}
    assert db.c.find_one({"_id": 2}) == {"_id": 2, "a": 1}


def test_update_one_noop_reports_not_modified(db):
    db.c.insert_one({"_id": 1, "a": 5})
    result = db.c.update_one({"_id": 1}, {"$set": {"a": 5}})
    assert (result.matched_count, result.modified_count) == (1, 0)
    missing = db.c.update_one({"_id": 99}, {"$set": {"a": 5}})
    assert (missing.matched_count, missing.modified_count, missing.upserted_id) == (0, 0, None)
    assert db.c.count_documents({}) == 1


def test_update_many(db):
    db.c.insert_many([{"_id": i, "even": i % 2 == 0, "v": i} for i in range(10)])
    result = db.c.update_many({"even": True}, {"$inc": {"v": 100}, "$set": {"touched": True}})
    assert (result.matched_count, result.modified_count) == (5, 5)
    assert sorted(d["v"] for d in db.c.find({"touched": True})) == [100, 102, 104, 106, 108]
    assert db.c.count_documents({"touched": {"$exists": False}}) == 5


def test_replace_one_keeps_id(db):
    db.c.insert_one({"_id": "r", "a": 1, "b": 2})
    result = db.c.replace_one({"_id": "r"}, {"c": 3})
    assert (result.matched_count, result.modified_count) == (1, 1)
    assert db.c.find_one({"_id": "r"}) == {"_id": "r", "c": 3}


def test_upsert_inserts_from_filter_and_update(db):
    result = db.c.update_one({"k": 5, "tag": "t"}, {"$set": {"v": 1}}, upsert=True)
    assert result.matched_count == 0
    assert isinstance(result.upserted_id, ObjectId)
    doc = db.c.find_one({"_id": result.upserted_id})
    assert doc == {"_id": result.upserted_id, "k": 5, "tag": "t", "v": 1}
    again = db.c.update_one({"k": 5, "tag": "t"}, {"$set": {"v": 2}}, upsert=True)
    assert (again.matched_count, again.modified_count, again.upserted_id) == (1, 1, None)
    assert db.c.count_documents({}) == 1

    replaced = db.c.replace_one({"_id": 42}, {"x": 1}, upsert=True)
    assert replaced.upserted_id == 42
    assert db.c.find_one({"_id": 42}) == {"_id": 42, "x": 1}


def test_update_with_unknown_operator_fails(db):
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as info:
        db.c.update_one({"_id": 1}, {"$bogus": {"a": 1}})
    assert info.value.code == 9  # FailedToParse: Unknown modifier: $bogus
    assert db.c.find_one({"_id": 1}) == {"_id": 1}


def test_update_of_id_is_rejected(db):
    db.c.insert_one({"_id": 1, "a": 1})
    with pytest.raises(OperationFailure) as info:
        db.c.update_one({"_id": 1}, {"$set": {"_id": 2}})
    assert info.value.code == 66  # ImmutableField
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "a": 1}


# ---------------------------------------------------------------- deletes, find-and-modify


def test_delete_one_and_many(db):
    db.c.insert_many([{"_id": i, "g": i % 3} for i in range(9)])
    assert db.c.delete_one({"g": 1}).deleted_count == 1
    assert db.c.count_documents({"g": 1}) == 2
    assert db.c.delete_many({"g": {"$in": [0, 1]}}).deleted_count == 5
    assert sorted(d["_id"] for d in db.c.find()) == [2, 5, 8]
    assert db.c.delete_many({"g": 7}).deleted_count == 0
    assert db.c.delete_many({}).deleted_count == 3
    assert db.c.count_documents({}) == 0


def test_find_one_and_update(db):
    db.c.insert_many([{"_id": i, "q": "job", "pri": i, "state": "new"} for i in range(3)])
    after = db.c.find_one_and_update(
        {"state": "new"},
        {"$set": {"state": "taken"}, "$inc": {"tries": 1}},
        sort=[("pri", DESCENDING)],
        return_document=ReturnDocument.AFTER,
    )
    assert after == {"_id": 2, "q": "job", "pri": 2, "state": "taken", "tries": 1}
    before = db.c.find_one_and_update(
        {"state": "new"}, {"$set": {"state": "taken"}}, sort=[("pri", ASCENDING)]
    )
    assert before == {"_id": 0, "q": "job", "pri": 0, "state": "new"}
    assert db.c.find_one({"_id": 0})["state"] == "taken"
    assert db.c.find_one_and_update({"state": "none"}, {"$set": {"x": 1}}) is None
    upserted = db.c.find_one_and_update(
        {"_id": "u"}, {"$set": {"x": 1}}, upsert=True, return_document=ReturnDocument.AFTER,
        projection={"_id": 0},
    )
    assert upserted == {"x": 1}


def test_find_one_and_delete_and_replace(db):
    db.c.insert_many([{"_id": i, "v": i} for i in range(3)])
    deleted = db.c.find_one_and_delete({"v": {"$gte": 1}}, sort=[("v", DESCENDING)])
    assert deleted == {"_id": 2, "v": 2}
    assert db.c.count_documents({}) == 2
    assert db.c.find_one_and_delete({"v": 99}) is None
    replaced = db.c.find_one_and_replace({"_id": 1}, {"w": 5}, return_document=ReturnDocument.AFTER)
    assert replaced == {"_id": 1, "w": 5}


def test_writes_and_distinct_follow_hint(db):
    # A sparse index holds only the documents that have the field: a write
    # hinted through it reaches those only, which shows the hint was used.
    db.c.insert_many([{"_id": i, "g": i % 3, **({"s": i} if i % 2 == 0 else {})} for i in range(6)])
    db.c.create_index("g", name="g_1")
    db.c.create_index("s", name="s_1", sparse=True)
    assert db.c.update_many({}, {"$set": {"u": 1}}, hint="s_1").matched_count == 3
    assert db.c.update_many({"g": 1}, {"$set": {"v": 1}}, hint=[("g", ASCENDING)]).matched_count == 2
    assert db.c.distinct("_id", hint="s_1") == [0, 2, 4]
    assert db.c.distinct("g", {"g": {"$gte": 1}}, hint={"g": 1}) == [1, 2]
    after = db.c.find_one_and_update(
        {"g": 0}, {"$set": {"f": 1}}, hint="g_1", sort=[("_id", DESCENDING)],
        return_document=ReturnDocument.AFTER,
    )
    assert after == {"_id": 3, "g": 0, "f": 1}
    with pytest.raises(BulkWriteError) as bulk:
        db.c.bulk_write([
            UpdateOne({"_id": 1}, {"$set": {"w": 1}}),
            UpdateOne({"_id": 2}, {"$set": {"w": 1}}, hint="nope"),
            DeleteOne({"_id": 5}, hint="g_1"),
        ], ordered=False)
    errors = bulk.value.details["writeErrors"]
    assert [(e["index"], e["code"]) for e in errors] == [(1, 2)]
    assert bulk.value.details["nModified"] == 1
    assert bulk.value.details["nRemoved"] == 1
    for op in (
        lambda: db.c.update_one({}, {"$set": {"x": 1}}, hint="nope"),
        lambda: db.c.delete_many({}, hint={"nope": 1}),
        lambda: db.c.find_one_and_delete({}, hint="nope"),
        lambda: db.c.distinct("g", hint="nope"),
    ):
        with pytest.raises(OperationFailure) as exc:
            op()
        assert exc.value.code == 2
    assert db.c.count_documents({}) == 5
    # On a collection that does not exist the hint is accepted and upsert creates it.
    r = db.missing.update_one({"k": 1}, {"$set": {"m": 1}}, upsert=True, hint="g_1")
    assert r.upserted_id is not None
    assert db.missing.count_documents({"k": 1, "m": 1}) == 1


# ---------------------------------------------------------------- counting & distinct


def test_count_documents_and_estimate(numbers):
    assert numbers.count_documents({}) == 1000
    assert numbers.count_documents({"mod7": 0}) == 143
    assert numbers.count_documents({"mod7": 0}, skip=100) == 43
    assert numbers.count_documents({}, limit=10) == 10
    assert numbers.count_documents({"nothing": 1}) == 0
    assert numbers.estimated_document_count() == 1000
    numbers.delete_many({"n": {"$lt": 100}})
    assert numbers.estimated_document_count() == 900


def test_estimated_count_of_missing_collection_is_zero(db):
    assert db.nothing_here.estimated_document_count() == 0
    assert db.nothing_here.count_documents({}) == 0


def test_distinct(db):
    db.c.insert_many([
        {"k": "a", "tags": ["x", "y"], "n": 1},
        {"k": "b", "tags": ["y", "z"], "n": 2},
        {"k": "a", "tags": [], "n": 3},
        {"k": None, "n": 4},
        {"n": 5},
    ])
    assert sorted(db.c.distinct("k", {"k": {"$type": "string"}})) == ["a", "b"]
    assert sorted(db.c.distinct("tags")) == ["x", "y", "z"]
    assert sorted(db.c.distinct("n", {"n": {"$gt": 2}})) == [3, 4, 5]
    assert db.c.distinct("missing") == []


# ---------------------------------------------------------------- aggregation


@pytest.fixture
def sales(db):
    db.sales.insert_many([
        {"_id": 1, "item": "apple", "qty": 5, "price": 1.5, "tags": ["fruit", "red"]},
        {"_id": 2, "item": "pear", "qty": 2, "price": 2.0, "tags": ["fruit"]},
        {"_id": 3, "item": "apple", "qty": 1, "price": 1.5, "tags": ["fruit", "red"]},
        {"_id": 4, "item": "bread", "qty": 3, "price": 3.0, "tags": []},
        {"_id": 5, "item": "wine", "qty": 2, "price": 10.0, "tags": ["red", "drink"]},
    ])
    return db.sales


def test_aggregate_match_project_addfields(sales):
    got = list(sales.aggregate([
        {"$match": {"qty": {"$gte": 2}}},
        {"$project": {"_id": 0, "item": 1, "total": {"$multiply": ["$qty", "$price"]}}},
        {"$addFields": {"big": {"$gt": ["$total", 7]}}},
        {"$sort": {"total": -1, "item": 1}},
    ]))
    assert got == [
        {"item": "wine", "total": 20.0, "big": True},
        {"item": "bread", "total": 9.0, "big": True},
        {"item": "apple", "total": 7.5, "big": True},
        {"item": "pear", "total": 4.0, "big": False},
    ]


def test_aggregate_group_accumulators(sales):
    got = list(sales.aggregate([
        {"$group": {
            "_id": "$item",
            "n": {"$sum": 1},
            "qty": {"$sum": "$qty"},
            "avg": {"$avg": "$qty"},
            "min": {"$min": "$qty"},
            "max": {"$max": "$qty"},
            "ids": {"$push": "$_id"},
        }},
        {"$sort": {"_id": 1}},
    ]))
    assert got == [
        {"_id": "apple", "n": 2, "qty": 6, "avg": 3.0, "min": 1, "max": 5, "ids": [1, 3]},
        {"_id": "bread", "n": 1, "qty": 3, "avg": 3.0, "min": 3, "max": 3, "ids": [4]},
        {"_id": "pear", "n": 1, "qty": 2, "avg": 2.0, "min": 2, "max": 2, "ids": [2]},
        {"_id": "wine", "n": 1, "qty": 2, "avg": 2.0, "min": 2, "max": 2, "ids": [5]},
    ]
    total = list(sales.aggregate([{"$group": {"_id": None, "revenue": {"$sum": {"$multiply": ["$qty", "$price"]}}}}]))
    assert len(total) == 1 and total[0]["_id"] is None
    assert math.isclose(total[0]["revenue"], 5 * 1.5 + 2 * 2.0 + 1 * 1.5 + 3 * 3.0 + 2 * 10.0)


def test_aggregate_unwind_sort_skip_limit_count(sales):
    tags = list(sales.aggregate([
        {"$unwind": "$tags"},
        {"$group": {"_id": "$tags", "n": {"$sum": 1}}},
        {"$sort": {"n": -1, "_id": 1}},
    ]))
    assert tags == [{"_id": "fruit", "n": 3}, {"_id": "red", "n": 3}, {"_id": "drink", "n": 1}]
    page = list(sales.aggregate([{"$sort": {"_id": -1}}, {"$skip": 1}, {"$limit": 2}, {"$project": {"_id": 1}}]))
    assert page == [{"_id": 4}, {"_id": 3}]
    counted = list(sales.aggregate([{"$match": {"tags": "red"}}, {"$count": "reds"}]))
    assert counted == [{"reds": 3}]
    assert list(sales.aggregate([{"$match": {"item": "none"}}, {"$count": "n"}])) == []


def test_aggregate_cursor_spans_getmores(numbers):
    got = list(numbers.aggregate([{"$match": {"mod7": {"$ne": 0}}}, {"$sort": {"_id": 1}}], batchSize=10))
    assert [d["_id"] for d in got] == [i for i in range(1000) if i % 7]


# ---------------------------------------------------------------- catalog


def test_list_database_and_collection_names(client, db):
    db.a.insert_one({})
    db.b.insert_one({})
    db.create_collection("empty")
    assert db.name in client.list_database_names()
    assert sorted(db.list_collection_names()) == ["a", "b", "empty"]
    assert db.list_collection_names(filter={"name": "a"}) == ["a"]
    assert db.list_collection_names(filter={"name": {"$in": ["b", "zz"]}}) == ["b"]
    infos = {c["name"]: c for c in db.list_collections()}
    assert infos["empty"]["type"] == "collection"
    client.drop_database(db.name)
    assert db.name not in client.list_database_names()


def test_create_collection_twice(db):
    created = db.create_collection("once")
    assert created.name == "once"
    with pytest.raises(CollectionInvalid):
        db.create_collection("once")
    # mongod 7+ (SERVER-60064): `create` of an existing collection with the
    # same options succeeds without changing anything (with different options
    # it is 48 NamespaceExists; not tested: every create option BisonDB lacks
    # answers 238 first).
    db.once.insert_one({"_id": 1})
    assert db.command("create", "once")["ok"] == 1
    assert db.list_collection_names() == ["once"]
    assert db.once.find_one() == {"_id": 1}


def test_drop_collection(db):
    db.c.insert_many([{"i": i} for i in range(5)])
    db.keep.insert_one({})
    db.c.drop()
    assert db.list_collection_names() == ["keep"]
    assert db.c.count_documents({}) == 0
    assert db.c.find_one() is None
    db.c.drop()  # dropping a missing collection is not an error for the driver
    assert db.drop_collection("keep")["ok"] == 1
    assert db.list_collection_names() == []


def test_rename_collection(db):
    db.src.insert_many([{"_id": i} for i in range(4)])
    db.taken.insert_one({"_id": "t"})
    db.src.rename("dst")
    assert sorted(db.list_collection_names()) == ["dst", "taken"]
    assert sorted(d["_id"] for d in db.dst.find()) == [0, 1, 2, 3]
    with pytest.raises(OperationFailure) as info:
        db.dst.rename("taken")
    assert info.value.code == 48  # NamespaceExists: target namespace exists
    db.dst.rename("taken", dropTarget=True)
    assert sorted(d["_id"] for d in db.taken.find()) == [0, 1, 2, 3]
    assert db.list_collection_names() == ["taken"]


def test_index_information_has_id_index(db):
    db.c.insert_one({"x": 1})
    info = db.c.index_information()
    assert list(info) == ["_id_"]
    assert info["_id_"]["key"] == [("_id", 1)]
    indexes = list(db.c.list_indexes())
    assert [(i["name"], dict(i["key"])) for i in indexes] == [("_id_", {"_id": 1})]


def test_unique_secondary_index(db):
    db.c.insert_one({"email": "a@example.com"})
    try:
        name = db.c.create_index("email", unique=True)
    except OperationFailure as exc:
        if exc.code == 238:
            # A gap listed in docs/COMPATIBILITY.md; this test takes effect as
            # soon as the server stops answering NotImplemented.
            pytest.xfail(f"secondary indexes not implemented: {exc.details.get('errmsg')}")
        raise
    assert name == "email_1"
    info = db.c.index_information()
    assert sorted(info) == ["_id_", "email_1"]
    assert info["email_1"]["key"] == [("email", 1)]
    assert info["email_1"]["unique"] is True
    with pytest.raises(DuplicateKeyError) as dup:
        db.c.insert_one({"email": "a@example.com"})
    assert dup.value.details["keyPattern"] == {"email": 1}
    assert dup.value.details["keyValue"] == {"email": "a@example.com"}
    assert "email_1" in dup.value.details["errmsg"]
    assert db.c.count_documents({}) == 1
    db.c.drop_index("email_1")
    assert sorted(db.c.index_information()) == ["_id_"]
    db.c.insert_one({"email": "a@example.com"})
    assert db.c.count_documents({"email": "a@example.com"}) == 2


def test_db_stats_and_coll_stats(db):
    docs = [{"_id": i, "payload": "x" * i} for i in range(10)]
    db.c.insert_many(docs)
    db.d.insert_many([{"_id": i} for i in range(3)])
    data_size = sum(len(bson.encode(d)) for d in docs)

    stats = db.command("dbStats")
    assert stats["ok"] == 1
    assert stats["db"] == db.name
    assert stats["collections"] == 2
    assert stats["objects"] == 13
    assert stats["indexes"] == 2
    assert stats["dataSize"] == data_size + sum(len(bson.encode({"_id": i})) for i in range(3))
    for field in ("storageSize", "indexSize", "totalSize", "avgObjSize", "scaleFactor"):
        assert field in stats, field

    coll = db.command("collStats", "c")
    assert coll["ok"] == 1
    assert coll["ns"] == f"{db.name}.c"
    assert coll["count"] == 10
    assert coll["size"] == data_size
    assert coll["nindexes"] == 1
    assert "_id_" in coll["indexSizes"]
    for field in ("storageSize", "totalIndexSize", "totalSize", "capped"):
        assert field in coll, field


# ---------------------------------------------------------------- server commands & errors


def test_ping_hello_server_info(client):
    assert bare(client.admin.command("ping")) == {"ok": 1.0}
    hello = client.admin.command("hello")
    assert hello["isWritablePrimary"] is True
    assert hello["maxBsonObjectSize"] == MAX_BSON
    assert hello["maxMessageSizeBytes"] == 48_000_000
    assert hello["maxWriteBatchSize"] == 100_000
    assert hello["maxWireVersion"] >= 17
    assert hello["minWireVersion"] == 0
    info = client.server_info()
    assert info["ok"] == 1
    major = int(info["version"].split(".")[0])
    assert major >= 6
    assert isinstance(info["versionArray"], list) and info["versionArray"][0] == major


def test_unknown_command_is_command_not_found(db):
    with pytest.raises(OperationFailure) as info:
        db.command("noSuchCommandAtAll")
    assert info.value.code == 59
    assert info.value.details["codeName"] == "CommandNotFound"
    assert "no such command" in info.value.details["errmsg"]
    assert "noSuchCommandAtAll" in info.value.details["errmsg"]


def test_unknown_query_operator_is_bad_value(db):
    db.c.insert_one({"a": 1})
    with pytest.raises(OperationFailure) as info:
        list(db.c.find({"a": {"$bogus": 1}}))
    assert info.value.code == 2
    assert info.value.details["codeName"] == "BadValue"
    assert "$bogus" in info.value.details["errmsg"]


def test_document_over_16mib_is_rejected(db):
    too_big = {"_id": 1, "blob": "x" * MAX_BSON}
    with pytest.raises((DocumentTooLarge, OperationFailure)) as info:
        db.c.insert_one(too_big)
    if isinstance(info.value, OperationFailure):
        assert info.value.code == 10334  # BSONObjectTooLarge
    assert db.c.count_documents({}) == 0


def test_document_just_under_16mib_round_trips(db):
    # 16 MiB minus room for the _id, field name and BSON framing.
    blob = "y" * (MAX_BSON - 100)
    db.c.insert_one({"_id": 1, "blob": blob})
    got = db.c.find_one({"_id": 1})
    assert len(got["blob"]) == len(blob)
    assert got["blob"] == blob


def test_connection_stays_usable_after_errors(recorded):
    rdb, recorder = recorded
    rdb.c.insert_one({"_id": 1})
    failures = 0
    for attempt in range(5):
        with pytest.raises(OperationFailure):
            rdb.command("noSuchCommandAtAll")
        with pytest.raises(DuplicateKeyError):
            rdb.c.insert_one({"_id": 1})
        with pytest.raises(OperationFailure):
            rdb.c.find_one({"a": {"$bogus": 1}})
        failures += 3
        assert rdb.c.find_one({"_id": 1}) == {"_id": 1}
    assert failures == 15
    assert rdb.command("ping")["ok"] == 1
    # Errors are replies, not dropped connections: the one pooled connection
    # (maxPoolSize=1) served everything.
    assert recorder.connections_closed == 0
    assert recorder.connections_created == 1
