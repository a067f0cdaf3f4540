"""pymongo against BisonDB: the database profiler.

The `profile` command as pymongo's helpers send it (level, slowms, sampleRate,
filter) and the entries in system.profile that tools read: comments of finds
and distincts (pymongo's own test_comment), the op names, counters and plan
summaries, errors, and the system.profile rules (capped, not droppable while
profiling). Every test runs over TCP and over the Unix socket on a fresh
database. Expected values are mongod 8.0's.
"""

import pytest
from pymongo.errors import OperationFailure

from conftest import bare


def test_comments_are_recorded(db):
    db.command("profile", 2)
    try:
        db.coll.find().comment("foo").to_list()
        assert (
            db.system.profile.count_documents(
                {"ns": f"{db.name}.coll", "op": "query", "command.comment": "foo"}
            )
            == 1
        )
        db.coll.find().comment("foo").distinct("type")
        assert (
            db.system.profile.count_documents(
                {
                    "ns": f"{db.name}.coll",
                    "op": "command",
                    "command.distinct": "coll",
                    "command.comment": "foo",
                }
            )
            == 1
        )
    finally:
        db.command("profile", 0)
        db.system.profile.drop()
    assert "system.profile" not in db.list_collection_names()


def test_settings_and_errors(db):
    assert bare(db.command("profile", -1)) == {
        "was": 0,
        "slowms": 100,
        "sampleRate": 1.0,
        "ok": 1.0,
    }
    r = db.command("profile", 1, filter={"millis": {"$gt": 5}})
    assert r["was"] == 0 and "note" in r
    r = db.command("profile", -1)
    assert r["was"] == 1 and r["filter"] == {"millis": {"$gt": 5}}
    with pytest.raises(OperationFailure) as e:
        db.command("profile", 1, sampleRate=2.0)
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.command("profile", 1, filter=None)
    assert e.value.code == 2
    with pytest.raises(OperationFailure) as e:
        db.drop_collection("system.profile")
    assert e.value.code == 20
    db.command("profile", 0, filter="unset")
    assert "filter" not in db.command("profile", -1)
    info = next(db.list_collections(filter={"name": "system.profile"}))
    assert info["options"] == {"capped": True, "size": 1024 * 1024}


def test_entries(db):
    db.c.insert_many([{"_id": i, "a": i} for i in range(10)])
    db.c.create_index("a")
    db.command("profile", 2)
    try:
        assert len(db.c.find({"a": {"$gte": 5}}).comment("ix").to_list()) == 5
        db.c.update_one({"_id": 1}, {"$set": {"b": 1}})
        db.c.delete_many({"a": {"$lt": 3}})
        with pytest.raises(OperationFailure):
            db.c.find({"$bogus": 1}).comment("bad").to_list()
    finally:
        db.command("profile", 0)
    (q,) = db.system.profile.find({"command.comment": "ix", "op": "query"})
    assert q["planSummary"] == "IXSCAN { a: 1 }"
    assert q["nreturned"] == 5 and q["keysExamined"] >= 5
    assert q["docsExamined"] == 5
    assert q["allUsers"] == [] and q["user"] == ""
    (u,) = db.system.profile.find({"op": "update"})
    assert u["command"]["q"] == {"_id": 1}
    assert (u["nMatched"], u["nModified"]) == (1, 1)
    (d,) = db.system.profile.find({"op": "remove"})
    assert d["ndeleted"] == 3
    (err,) = db.system.profile.find({"command.comment": "bad"})
    assert err["ok"] == 0 and err["errCode"] == 2 and err["errName"] == "BadValue"
