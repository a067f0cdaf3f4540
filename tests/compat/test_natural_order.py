"""pymongo against BisonDB: natural order (issue 21).

mongod stores an ordinary collection's documents under a record id that
grows with every insert ("Natural order" in the manual's glossary: "the
order in which the database refers to documents on disk"; for WiredTiger
collections that is record-id order), with `_id` as a separate unique index.
A clustered collection (`clusteredIndex`) is stored by its cluster key, so
its natural order is `_id` order. Every test runs over TCP and over the Unix
socket on a fresh database.
"""

from pymongo import ASCENDING, DESCENDING


def ids(cursor):
    return [d["_id"] for d in cursor]


def test_find_without_sort_returns_insertion_order(db):
    """mongod 8: insert `_id` "b", "a", "c", then `find()` gives b, a, c;
    `sort({$natural: -1})` gives c, a, b; `sort({_id: 1})` gives a, b, c
    (through the `_id` index, no blocking SORT)."""
    for i in ["b", "a", "c"]:
        db.c.insert_one({"_id": i})
    assert ids(db.c.find()) == ["b", "a", "c"]
    assert ids(db.c.find().sort("$natural", DESCENDING)) == ["c", "a", "b"]
    assert ids(db.c.find().hint([("$natural", ASCENDING)])) == ["b", "a", "c"]
    assert ids(db.c.find().sort("_id", ASCENDING)) == ["a", "b", "c"]
    plan = db.c.find().sort("_id", ASCENDING).explain()["queryPlanner"]["winningPlan"]
    assert "SORT" not in str(plan)
    assert "_id_" in str(plan)


def test_updates_keep_their_place_and_upserts_come_last(db):
    """mongod 8: an update in place keeps the document's record id; an
    upsert that inserts (server-generated ObjectId) comes after every earlier
    insert, whatever the client's ObjectIds."""
    db.c.insert_many([{"_id": 2, "n": 1}, {"_id": 1, "n": 2}])
    db.c.update_one({"_id": 2}, {"$set": {"x": 1}})
    db.c.update_one({"n": 3}, {"$set": {"y": 1}}, upsert=True)
    db.c.insert_one({"_id": 0, "n": 4})
    assert [d["n"] for d in db.c.find()] == [1, 2, 3, 4]


def test_clustered_collection_keeps_id_order(db):
    """mongod 8: a collection created with `clusteredIndex` returns its
    documents in cluster-key order: insert "b", "a", "c", find gives a, b, c."""
    db.create_collection("cl", clusteredIndex={"key": {"_id": 1}, "unique": True})
    for i in ["b", "a", "c"]:
        db.cl.insert_one({"_id": i})
    assert ids(db.cl.find()) == ["a", "b", "c"]
