"""pymongo against BisonDB: secondary indexes, the query planner and explain.

What a mongod 8.0 user sees through pymongo: create_index / createIndexes
replies, index_information with every option, drop_index and dropIndexes in
all their forms, unique indexes refusing duplicates, and explain output
(queryPlanner.winningPlan FETCH -> IXSCAN with its bounds, COUNT_SCAN,
COLLSCAN, index-ordered sorts, hints, aggregate) with exact counters on a
small known data set. Results must be the same with and without indexes.

Where BisonDB still differs from mongod, the test checks everything else
hard and ends in `deviations(...)`, which xfails naming each difference
(mongod's behaviour is the reference; the test passes once they are gone).
Every test runs over TCP and the Unix socket, on whichever engine the
session's server uses (scripts/test.sh runs lsm and inMemory).
"""

import pytest
from bson import Int64
from pymongo import ASCENDING, DESCENDING
from pymongo.errors import (
    BulkWriteError,
    ConfigurationError,
    DuplicateKeyError,
    OperationFailure,
)

from conftest import bare


N = 100


def people():
    """100 documents whose matches are easy to count by hand.

    a = i % 10 (10 per value), b = i (unique), name "n00".."n99",
    c.d = i % 5, tags [i % 3, 10 + i % 7] (multikey), s = i // 4 on every
    fourth document only (for sparse indexes).
    """
    docs = []
    for i in range(N):
        doc = {
            "_id": i,
            "a": i % 10,
            "b": i,
            "name": f"n{i:02d}",
            "c": {"d": i % 5},
            "tags": [i % 3, 10 + i % 7],
        }
        if i % 4 == 0:
            doc["s"] = i // 4
        docs.append(doc)
    return docs


def stages(plan):
    """Stage names from the root down, e.g. ["FETCH", "IXSCAN"]."""
    names = []
    while plan is not None:
        names.append(plan["stage"])
        plan = plan.get("inputStage")
    return names


def stage(plan, name):
    """The first stage called `name` on the way down from `plan`."""
    while plan is not None:
        if plan["stage"] == name:
            return plan
        plan = plan.get("inputStage")
    raise AssertionError(f"no {name} stage in the plan")


def ids(cursor):
    return [d["_id"] for d in cursor]


def deviations(problems):
    """xfail naming every way the reply differed from mongod's (if any)."""
    if problems:
        pytest.xfail("differs from mongod: " + " | ".join(problems))


def ixscan(key, name, bounds, direction="forward", multikey_paths=None, **flags):
    """An IXSCAN stage at queryPlanner verbosity, exactly as mongod 8.0 shows it."""
    return {
        "stage": "IXSCAN",
        "keyPattern": key,
        "indexName": name,
        "isMultiKey": bool(flags.get("isMultiKey", False)),
        "multiKeyPaths": multikey_paths if multikey_paths is not None else {f: [] for f in key},
        "isUnique": bool(flags.get("isUnique", False)),
        "isSparse": bool(flags.get("isSparse", False)),
        "isPartial": bool(flags.get("isPartial", False)),
        "indexVersion": 2,
        "direction": direction,
        "indexBounds": bounds,
    }


# -- createIndexes, listIndexes, index_information ------------------------------


def test_create_indexes_replies_and_index_information(db):
    db.c.insert_many(people())

    spec = [{"key": {"a": 1}, "name": "a_1"}]
    reply = db.command("createIndexes", "c", indexes=spec)
    assert bare(reply) == {
        "numIndexesBefore": 1,
        "numIndexesAfter": 2,
        "createdCollectionAutomatically": False,
        "ok": 1.0,
    }
    again = db.command("createIndexes", "c", indexes=spec)
    assert again["ok"] == 1.0
    assert again["numIndexesBefore"] == again["numIndexesAfter"] == 2
    assert again["note"] == "all indexes already exist"

    created = [
        db.c.create_index([("b", DESCENDING)]),
        db.c.create_index([("a", ASCENDING), ("b", DESCENDING)]),
        db.c.create_index("c.d"),
        db.c.create_index("s", unique=True, sparse=True, name="s_unique"),
        db.c.create_index("tags", partialFilterExpression={"a": {"$gt": 5}}),
        db.c.create_index("created", expireAfterSeconds=3600),
        db.c.create_index("name", hidden=True),
    ]
    assert created == ["b_-1", "a_1_b_-1", "c.d_1", "s_unique", "tags_1", "created_1", "name_1"]

    assert db.c.index_information() == {
        "_id_": {"v": 2, "key": [("_id", 1)]},
        "a_1": {"v": 2, "key": [("a", 1)]},
        "b_-1": {"v": 2, "key": [("b", -1)]},
        "a_1_b_-1": {"v": 2, "key": [("a", 1), ("b", -1)]},
        "c.d_1": {"v": 2, "key": [("c.d", 1)]},
        "s_unique": {"v": 2, "key": [("s", 1)], "unique": True, "sparse": True},
        "tags_1": {"v": 2, "key": [("tags", 1)], "partialFilterExpression": {"a": {"$gt": 5}}},
        "created_1": {"v": 2, "key": [("created", 1)], "expireAfterSeconds": 3600},
        "name_1": {"v": 2, "key": [("name", 1)], "hidden": True},
    }
    listed = list(db.c.list_indexes())
    assert [ix["name"] for ix in listed] == [
        "_id_", "a_1", "b_-1", "a_1_b_-1", "c.d_1", "s_unique", "tags_1", "created_1", "name_1",
    ]
    # Key patterns keep their field order (a SON from the server).
    assert list(listed[3]["key"].items()) == [("a", 1), ("b", -1)]

    # Conflicts: the same keys under another name, another key under a taken name.
    with pytest.raises(OperationFailure) as same_key:
        db.c.create_index("a", name="a_again")
    assert (same_key.value.code, same_key.value.details["codeName"]) == (85, "IndexOptionsConflict")
    with pytest.raises(OperationFailure) as same_name:
        db.c.create_index("zz", name="a_1")
    assert (same_name.value.code, same_name.value.details["codeName"]) == (86, "IndexKeySpecsConflict")

    # createIndexes on a missing collection creates it.
    fresh = db.command("createIndexes", "fresh", indexes=[{"key": {"x": 1}, "name": "x_1"}])
    assert bare(fresh) == {
        "numIndexesBefore": 1,
        "numIndexesAfter": 2,
        "createdCollectionAutomatically": True,
        "ok": 1.0,
    }
    assert "fresh" in db.list_collection_names()
    assert sorted(db.fresh.index_information()) == ["_id_", "x_1"]

    # mongod answers a no-op createIndexes from its "all indexes already
    # exist" early return, which does not set createdCollectionAutomatically.
    problems = []
    if "createdCollectionAutomatically" in again:
        problems.append(f"createIndexes of an existing index replied {dict(again)!r}: mongod's "
                        "'all indexes already exist' reply has no createdCollectionAutomatically")
    deviations(problems)


def test_geo_indexes_and_queries_like_mongod(db):
    # 2d and 2dsphere indexes as index_information shows them, writes checked
    # against them (16755), $within/$geoWithin, $near ordered by distance and
    # 291 without a geo index, $geoNear, and explain naming what ran.
    from pymongo import GEO2D, GEOSPHERE

    db.c.insert_many([
        {"_id": i, "geo": {"type": "Point", "coordinates": [i, 0]}, "loc": [i, 0]}
        for i in (3, 1, 2)
    ])
    with pytest.raises(OperationFailure) as exc:
        db.c.find_one({"geo": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}})
    assert exc.value.code == 291 and exc.value.details["codeName"] == "NoQueryExecutionPlans"
    assert db.c.create_index([("geo", GEOSPHERE)]) == "geo_2dsphere"
    assert db.c.create_index([("loc", GEO2D)], bits=20) == "loc_2d"
    info = db.c.index_information()
    assert info["geo_2dsphere"]["key"] == [("geo", "2dsphere")]
    assert info["geo_2dsphere"]["2dsphereIndexVersion"] == 3
    assert info["loc_2d"]["key"] == [("loc", "2d")] and info["loc_2d"]["bits"] == 20
    with pytest.raises(OperationFailure) as exc:
        db.c.insert_one({"geo": {"type": "Point", "coordinates": [0, 95]}})
    assert exc.value.code == 16755 and "Can't extract geo keys" in str(exc.value)
    poly = {"type": "Polygon", "coordinates": [[[0.5, -1], [2.5, -1], [2.5, 1], [0.5, 1], [0.5, -1]]]}
    assert sorted(d["_id"] for d in db.c.find({"geo": {"$within": {"$geometry": poly}}})) == [1, 2]
    assert [d["_id"] for d in db.c.find({"loc": {"$near": [0, 0]}})] == [1, 2, 3]
    near = {"$nearSphere": {"$geometry": {"type": "Point", "coordinates": [3, 0]}, "$maxDistance": 150000}}
    assert [d["_id"] for d in db.c.find({"geo": near})] == [3, 2]
    out = list(db.c.aggregate([{"$geoNear": {"near": [0, 0], "distanceField": "d", "key": "loc"}}]))
    assert [(d["_id"], d["d"]) for d in out] == [(1, 1.0), (2, 2.0), (3, 3.0)]
    plan = db.c.find({"geo": {"$near": {"$geometry": {"type": "Point", "coordinates": [0, 0]}}}}) \
        .explain()["queryPlanner"]["winningPlan"]
    assert plan["stage"] == "GEO_NEAR_2DSPHERE" and plan["indexName"] == "geo_2dsphere"
    assert plan["inputStage"]["stage"] == "COLLSCAN"


def test_text_index_and_text_search_like_mongod(db):
    # pymongo's TEXT index type: mongod's name and listed shape, $text with
    # stemming, phrases and negations, textScore in projection and sort
    # (mongod's scores), the text index in explain, 27 without one.
    from pymongo import TEXT

    db.c.insert_one({"_id": 0})
    with pytest.raises(OperationFailure) as exc:
        db.c.find_one({"$text": {"$search": "spam"}})
    assert exc.value.code == 27 and exc.value.details["codeName"] == "IndexNotFound"
    assert db.c.create_index([("t", TEXT)]) == "t_text"
    info = db.c.index_information()["t_text"]
    assert info["key"] == [("_fts", "text"), ("_ftsx", 1)]
    assert info["weights"] == {"t": 1} and info["textIndexVersion"] == 3
    assert info["default_language"] == "english" and info["language_override"] == "language"
    db.c.insert_many([
        {"_id": 1, "t": "spam eggs and spam"},
        {"_id": 2, "t": "spam"},
        {"_id": 3, "t": "egg sausage and bacon"},
    ])
    found = list(db.c.find({"$text": {"$search": "spam"}}, {"score": {"$meta": "textScore"}})
                 .sort([("score", {"$meta": "textScore"})]))
    assert [d["_id"] for d in found] == [1, 2]
    assert found[0]["score"] == pytest.approx(1.25)
    assert found[1]["score"] == pytest.approx(1.1)
    assert sorted(d["_id"] for d in db.c.find({"$text": {"$search": "eggs"}})) == [1, 3]
    assert [d["_id"] for d in db.c.find({"$text": {"$search": "spam -eggs"}})] == [2]
    assert [d["_id"] for d in db.c.find({"$text": {"$search": '"egg sausage"'}})] == [3]
    plan = db.c.find({"$text": {"$search": "spam"}}).explain()["queryPlanner"]["winningPlan"]
    assert "t_text" in str(plan)
    with pytest.raises(OperationFailure) as exc:
        db.c.create_index([("u", TEXT)])
    assert exc.value.code == 67
    db.c.drop_index([("t", TEXT)])
    assert list(db.c.index_information()) == ["_id_"]


def test_hashed_index_answers_equality_like_mongod(db):
    # pymongo's HASHED index type: created under mongod's default name, listed
    # with "hashed", used for equality (IXSCAN over hashed points), never for
    # ranges; arrays are refused (16766), as is a unique hashed index (16764).
    from pymongo import HASHED

    db.c.insert_many([{"_id": i, "h": i % 10} for i in range(100)])
    assert db.c.create_index([("h", HASHED)]) == "h_hashed"
    assert db.c.index_information()["h_hashed"]["key"] == [("h", "hashed")]
    assert sorted(d["_id"] for d in db.c.find({"h": 3.0})) == list(range(3, 100, 10))
    plan = db.c.find({"h": 3}).explain()["queryPlanner"]["winningPlan"]
    assert stages(plan) == ["FETCH", "IXSCAN"] and plan["inputStage"]["indexName"] == "h_hashed"
    assert db.c.count_documents({"h": {"$gte": 8}}) == 20
    ranged = db.c.find({"h": {"$gte": 8}}).explain()["queryPlanner"]["winningPlan"]
    assert stages(ranged) == ["COLLSCAN"]
    with pytest.raises(OperationFailure) as exc:
        db.c.insert_one({"_id": "arr", "h": [1, 2]})
    assert exc.value.code == 16766
    with pytest.raises(OperationFailure) as exc:
        db.c.create_index([("u", HASHED)], unique=True)
    assert exc.value.code == 16764


# -- dropIndexes ------------------------------------------------------------------


def test_drop_indexes_by_name_key_list_and_star(db):
    db.c.insert_many(people())
    for key in ("a", "b", "name", "c.d"):
        db.c.create_index(key)
    db.c.create_index([("a", 1), ("b", -1)])

    db.c.drop_index("a_1")
    assert "a_1" not in db.c.index_information()

    by_key = db.command("dropIndexes", "c", index={"a": 1, "b": -1})
    assert bare(by_key) == {"nIndexesWas": 5, "ok": 1.0}

    by_list = db.command("dropIndexes", "c", index=["b_1", "name_1"])
    assert bare(by_list) == {"nIndexesWas": 4, "ok": 1.0}
    assert list(db.c.index_information()) == ["_id_", "c.d_1"]

    db.c.create_index("b")
    star = db.command("dropIndexes", "c", index="*")
    assert bare(star) == {"nIndexesWas": 3, "msg": "non-_id indexes dropped for collection", "ok": 1.0}
    assert list(db.c.index_information()) == ["_id_"]

    db.c.create_index("b")
    db.c.drop_indexes()  # pymongo sends index: "*"
    assert list(db.c.index_information()) == ["_id_"]

    # The _id index stays, whichever way it is named.
    for index in ("_id_", {"_id": 1}, ["_id_"]):
        with pytest.raises(OperationFailure) as exc:
            db.command("dropIndexes", "c", index=index)
        assert exc.value.code == 72, index
        assert exc.value.details["codeName"] == "InvalidOptions"
        assert exc.value.details["errmsg"] == "cannot drop _id index"

    with pytest.raises(OperationFailure) as missing:
        db.c.drop_index("nope_1")
    assert (missing.value.code, missing.value.details["codeName"]) == (27, "IndexNotFound")
    assert missing.value.details["errmsg"] == "index not found with name [nope_1]"
    with pytest.raises(OperationFailure) as missing_key:
        db.command("dropIndexes", "c", index={"nope": 1})
    assert missing_key.value.code == 27
    with pytest.raises(OperationFailure) as no_coll:
        db.command("dropIndexes", "no_such_collection", index="*")
    assert (no_coll.value.code, no_coll.value.details["codeName"]) == (26, "NamespaceNotFound")

    # Dropping indexes never touches documents.
    assert db.c.count_documents({}) == N
    assert ids(db.c.find({"a": 3}).sort("_id", 1)) == list(range(3, N, 10))


# -- unique indexes -------------------------------------------------------------------


def test_unique_index_rejects_duplicates(db):
    db.c.create_index("email", unique=True)
    db.c.insert_one({"_id": 1, "email": "a@x"})

    with pytest.raises(DuplicateKeyError) as dup:
        db.c.insert_one({"_id": 2, "email": "a@x"})
    details = dup.value.details
    assert dup.value.code == 11000
    assert details["codeName"] == "DuplicateKey"
    assert details["keyPattern"] == {"email": 1}
    assert details["keyValue"] == {"email": "a@x"}
    assert details["errmsg"] == (
        f'E11000 duplicate key error collection: {db.name}.c index: email_1 dup key: {{ email: "a@x" }}'
    )

    # An ordered insert_many stops at the duplicate; the ones before it stay.
    with pytest.raises(BulkWriteError) as bulk:
        db.c.insert_many([{"_id": 3, "email": "b@x"}, {"_id": 4, "email": "a@x"}, {"_id": 5, "email": "c@x"}])
    assert bulk.value.details["nInserted"] == 1
    [error] = bulk.value.details["writeErrors"]
    assert (error["index"], error["code"]) == (1, 11000)
    assert error["keyValue"] == {"email": "a@x"}

    # A missing field is null in a non-sparse index: only one document may lack it.
    db.c.insert_one({"_id": 6})
    with pytest.raises(DuplicateKeyError) as null_dup:
        db.c.insert_one({"_id": 7})
    assert null_dup.value.details["keyValue"] == {"email": None}
    assert sorted(ids(db.c.find())) == [1, 3, 6]

    # Updates and upserts are checked too.
    with pytest.raises(DuplicateKeyError) as upd:
        db.c.update_one({"_id": 3}, {"$set": {"email": "a@x"}})
    assert upd.value.code == 11000
    with pytest.raises(DuplicateKeyError) as ups:
        db.c.update_one({"_id": 9}, {"$set": {"email": "a@x"}}, upsert=True)
    assert ups.value.code == 11000
    assert db.c.find_one({"_id": 3})["email"] == "b@x"
    assert db.c.find_one({"_id": 9}) is None

    # Unique + sparse: any number of documents without the field.
    db.other.create_index("nick", unique=True, sparse=True)
    db.other.insert_many([{"_id": 10}, {"_id": 11}, {"_id": 12, "nick": "x"}])
    with pytest.raises(DuplicateKeyError):
        db.other.insert_one({"_id": 13, "nick": "x"})
    # Compound unique: the combination must be unique, not each field.
    db.pairs.create_index([("p", 1), ("q", 1)], unique=True)
    db.pairs.insert_many([{"_id": 20, "p": 1, "q": 1}, {"_id": 21, "p": 1, "q": 2}])
    with pytest.raises(DuplicateKeyError) as compound:
        db.pairs.insert_one({"_id": 22, "p": 1, "q": 2})
    assert compound.value.details["keyPattern"] == {"p": 1, "q": 1}
    assert compound.value.details["keyValue"] == {"p": 1, "q": 2}

    # Building a unique index over duplicates fails and leaves no index behind.
    db.dups.insert_many([{"_id": i, "k": i % 2} for i in range(4)])
    with pytest.raises(OperationFailure) as build:
        db.dups.create_index("k", unique=True)
    assert build.value.code == 11000
    assert "E11000 duplicate key error" in build.value.details["errmsg"]
    assert list(db.dups.index_information()) == ["_id_"]

    # mongod attaches keyPattern/keyValue to every duplicate key error (the
    # DuplicateKeyErrorInfo travels with the status), not only to inserts.
    problems = []
    for what, exc in (("update", upd), ("upsert", ups), ("unique index build", build)):
        got = {k: exc.value.details.get(k) for k in ("keyPattern", "keyValue")}
        if what == "unique index build":
            want = {"keyPattern": {"k": 1}, "keyValue": {"k": 0}}
        else:
            want = {"keyPattern": {"email": 1}, "keyValue": {"email": "a@x"}}
        if got != want:
            problems.append(f"{what} duplicate: error has {got}, mongod sends {want}")
    deviations(problems)


# -- explain: find -----------------------------------------------------------------------


def test_explain_find_ixscan_and_collscan(db):
    db.c.insert_many(people())
    filter_ = {"a": 3}
    expected = list(range(3, N, 10))

    before = db.c.find(filter_).explain()
    assert before["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN"
    assert before["queryPlanner"]["winningPlan"]["direction"] == "forward"
    assert before["executionStats"]["nReturned"] == 10
    assert before["executionStats"]["totalKeysExamined"] == 0
    assert before["executionStats"]["totalDocsExamined"] == N
    unindexed = ids(db.c.find(filter_))

    assert db.c.create_index("a") == "a_1"
    # pymongo's default verbosity is allPlansExecution.
    explained = db.c.find(filter_).explain()
    assert explained["ok"] == 1.0
    assert explained["explainVersion"] == "1"
    planner = explained["queryPlanner"]
    assert planner["namespace"] == f"{db.name}.c"
    assert planner["indexFilterSet"] is False
    assert planner["rejectedPlans"] == []  # a_1 is the only candidate
    winning = planner["winningPlan"]
    assert stages(winning) == ["FETCH", "IXSCAN"]
    assert winning["inputStage"] == ixscan({"a": 1}, "a_1", {"a": ["[3, 3]"]})

    stats = explained["executionStats"]
    assert stats["executionSuccess"] is True
    assert stats["nReturned"] == 10
    assert stats["totalKeysExamined"] == 10
    assert stats["totalDocsExamined"] == 10
    assert stats["executionTimeMillis"] >= 0
    assert stages(stats["executionStages"]) == ["FETCH", "IXSCAN"]
    assert stats["executionStages"]["nReturned"] == 10
    assert stats["allPlansExecution"] == []

    # executionStats verbosity: no allPlansExecution; queryPlanner: no executionStats.
    exec_only = db.command("explain", {"find": "c", "filter": filter_}, verbosity="executionStats")
    assert "allPlansExecution" not in exec_only["executionStats"]
    assert exec_only["executionStats"]["nReturned"] == 10
    plan_only = db.command("explain", {"find": "c", "filter": filter_}, verbosity="queryPlanner")
    assert "executionStats" not in plan_only
    assert stages(plan_only["queryPlanner"]["winningPlan"]) == ["FETCH", "IXSCAN"]

    # The index changes the plan, never the answer.
    assert sorted(ids(db.c.find(filter_))) == sorted(unindexed) == expected
    assert sorted(ids(db.c.find(filter_).hint([("$natural", 1)]))) == expected

    # A field without an index is still a collection scan.
    collscan = db.c.find({"b": 7}).explain()
    assert collscan["queryPlanner"]["winningPlan"]["stage"] == "COLLSCAN"
    assert collscan["executionStats"]["nReturned"] == 1
    assert collscan["executionStats"]["totalKeysExamined"] == 0
    assert collscan["executionStats"]["totalDocsExamined"] == N


def test_explain_details_as_mongod_shows_them(db):
    """Finer points of mongod's explain for find({a: 3}) over index a_1."""
    db.c.insert_many(people())
    db.c.create_index("a")
    explained = db.c.find({"a": 3}).explain()
    winning = explained["queryPlanner"]["winningPlan"]
    stats = explained["executionStats"]
    assert stages(winning) == ["FETCH", "IXSCAN"]

    problems = []
    # The bounds [3, 3] answer the whole filter, so mongod's FETCH has no filter.
    if "filter" in winning:
        problems.append(f"FETCH repeats filter {winning['filter']!r} the index bounds already answer "
                        "(mongod: no filter on FETCH)")
    # parsedQuery is the parsed MatchExpression: {a: {$eq: 3}}.
    if explained["queryPlanner"]["parsedQuery"] != {"a": {"$eq": 3}}:
        problems.append(f"parsedQuery is {explained['queryPlanner']['parsedQuery']!r} "
                        "(mongod: {'a': {'$eq': 3}})")
    # Every stage in executionStages carries its own counters.
    fetch = stats["executionStages"]
    ix = fetch["inputStage"]
    missing = [f"FETCH.{k}" for k in ("nReturned", "works", "advanced", "isEOF", "docsExamined") if k not in fetch]
    missing += [f"IXSCAN.{k}" for k in ("nReturned", "works", "keysExamined", "seeks", "dupsTested") if k not in ix]
    assert missing == []
    assert (fetch["docsExamined"], ix["keysExamined"], ix["nReturned"]) == (10, 10, 10)
    # mongod: a scan works once per key examined plus once to find its end.
    assert (ix["works"], ix["advanced"], ix["needTime"], ix["isEOF"]) == (11, 10, 0, 1)
    assert (fetch["works"], fetch["advanced"], fetch["isEOF"], fetch["alreadyHasObj"]) == (11, 10, 1, 0)
    assert (ix["seeks"], ix["dupsTested"], ix["dupsDropped"]) == (1, 0, 0)
    assert ix["indexName"] == "a_1" and ix["indexBounds"] == {"a": ["[3, 3]"]}
    # mongod appends small counters as 32-bit ints (BSONObjBuilder::appendNumber);
    # 64-bit ones come out of pymongo as Int64 and show as Long('10') in mongosh.
    wide = [k for k in ("nReturned", "totalKeysExamined", "totalDocsExamined", "executionTimeMillis")
            if isinstance(stats[k], Int64)]
    if wide:
        problems.append("executionStats counters are int64, mongod sends int32: " + ", ".join(wide))
    deviations(problems)


@pytest.mark.parametrize(
    "key, filter_, name, bounds, n, extra",
    [
        ([("a", 1)], {"a": {"$gte": 3, "$lt": 5}}, "a_1", {"a": ["[3, 5)"]}, 20, {}),
        ([("b", -1)], {"b": {"$gt": 90}}, "b_-1", {"b": ["[inf.0, 90)"]}, 9, {}),
        ([("a", 1), ("b", -1)], {"a": 3, "b": {"$gt": 50}}, "a_1_b_-1",
         {"a": ["[3, 3]"], "b": ["[inf.0, 50)"]}, 5, {}),
        ([("c.d", 1)], {"c.d": 2}, "c.d_1", {"c.d": ["[2, 2]"]}, 20, {}),
        ([("name", 1)], {"name": {"$gte": "n90"}}, "name_1", {"name": ['["n90", {})']}, 10, {}),
        ([("name", 1)], {"name": {"$lt": "n05"}}, "name_1", {"name": ['["", "n05")']}, 5, {}),
        ([("b", 1)], {"b": {"$in": [7, 3, 5]}}, "b_1", {"b": ["[3, 3]", "[5, 5]", "[7, 7]"]}, 3,
         {"keys_unchecked": True}),
        ([("tags", 1)], {"tags": 12}, "tags_1", {"tags": ["[12, 12]"]}, 14,
         {"isMultiKey": True, "multikey_paths": {"tags": ["tags"]}}),
    ],
    ids=["range", "descending", "compound", "dotted", "string-gte", "string-lt", "in", "multikey"],
)
def test_explain_bounds_and_counters(db, key, filter_, name, bounds, n, extra):
    docs = people()
    db.c.insert_many(docs)
    unindexed = sorted(ids(db.c.find(filter_)))
    assert len(unindexed) == n

    db.c.create_index(key)
    explained = db.c.find(filter_).explain()
    winning = explained["queryPlanner"]["winningPlan"]
    assert stages(winning) == ["FETCH", "IXSCAN"]
    assert winning["inputStage"] == ixscan(
        dict(key), name, bounds,
        multikey_paths=extra.get("multikey_paths"),
        isMultiKey=extra.get("isMultiKey", False),
    )
    stats = explained["executionStats"]
    assert stats["nReturned"] == n
    assert stats["totalDocsExamined"] == n
    if not extra.get("keys_unchecked"):
        # One interval: the scan stops at its end, so keys examined == matches.
        assert stats["totalKeysExamined"] == n
    assert sorted(ids(db.c.find(filter_))) == unindexed


def test_nan_is_outside_numeric_ranges(db):
    """mongod: $lt/$gt never match NaN, and numeric range bounds start at -inf."""
    nan = float("nan")
    db.c.insert_many([{"_id": 1, "b": 1}, {"_id": 2, "b": nan}, {"_id": 3, "b": 10}, {"_id": 4, "b": float("-inf")}])
    unindexed = sorted(ids(db.c.find({"b": {"$lt": 5}})))
    db.c.create_index("b")
    indexed = sorted(ids(db.c.find({"b": {"$lt": 5}})))
    # Whatever the answer, the index must not change it.
    assert indexed == unindexed
    bounds = db.c.find({"b": {"$lt": 5}}).explain()["queryPlanner"]["winningPlan"]["inputStage"]["indexBounds"]

    problems = []
    if indexed != [1, 4]:
        problems.append(f"find({{b: {{$lt: 5}}}}) returned _ids {indexed}, mongod [1, 4] "
                        "(ComparisonMatchExpression: NaN only matches $eq/$lte/$gte NaN)")
    gt_nan = db.command("count", "c", query={"b": {"$gt": nan}})["n"]
    if gt_nan != 0:
        problems.append(f"count {{b: {{$gt: NaN}}}} is {gt_nan}, mongod 0")
    if bounds != {"b": ["[-inf.0, 5)"]}:
        problems.append(f"indexBounds {bounds}, mongod {{'b': ['[-inf.0, 5)']}}")
    deviations(problems)


# -- sorts served by an index -------------------------------------------------------------


def test_sort_served_by_index_without_sort_stage(db):
    db.c.insert_many(people())
    db.c.create_index("b")

    forward = db.c.find({}).sort("b", ASCENDING).explain()["queryPlanner"]["winningPlan"]
    assert stages(forward) == ["FETCH", "IXSCAN"]
    assert forward["inputStage"]["direction"] == "forward"
    assert forward["inputStage"]["indexBounds"] == {"b": ["[MinKey, MaxKey]"]}

    # A descending sort reads the ascending index backward.
    backward = db.c.find({"b": {"$gte": 90}}).sort("b", DESCENDING).explain()
    winning = backward["queryPlanner"]["winningPlan"]
    assert stages(winning) == ["FETCH", "IXSCAN"]
    assert winning["inputStage"] == ixscan({"b": 1}, "b_1", {"b": ["[inf.0, 90]"]}, direction="backward")
    assert backward["executionStats"]["nReturned"] == 10
    assert backward["executionStats"]["totalKeysExamined"] == 10
    assert [d["b"] for d in db.c.find({"b": {"$gte": 90}}).sort("b", DESCENDING)] == list(range(99, 89, -1))

    # sort + limit: LIMIT over the index scan, still no SORT.
    limited = db.c.find({}).sort("b", DESCENDING).limit(3)
    limited_plan = limited.explain()
    assert stages(limited_plan["queryPlanner"]["winningPlan"]) == ["LIMIT", "FETCH", "IXSCAN"]
    assert limited_plan["queryPlanner"]["winningPlan"]["limitAmount"] == 3
    assert limited_plan["executionStats"]["nReturned"] == 3
    assert [d["b"] for d in db.c.find({}).sort("b", DESCENDING).limit(3)] == [99, 98, 97]

    # A sort no index provides is a blocking SORT.
    blocking = db.c.find({"b": {"$lt": 10}}).sort("name", DESCENDING).explain()["queryPlanner"]["winningPlan"]
    assert stages(blocking) == ["SORT", "FETCH", "IXSCAN"]
    assert blocking["sortPattern"] == {"name": -1}

    # An equality on the leading field of a compound index leaves the next
    # field in index order: mongod sorts {a: 3} by b with index {a: 1, b: -1}
    # without a SORT stage (forward for b: -1, backward for b: 1).
    db.c.create_index([("a", 1), ("b", -1)])
    db.c.drop_index("b_1")
    by_b_desc = db.c.find({"a": 3}).sort("b", DESCENDING)
    assert [d["b"] for d in by_b_desc] == list(range(93, 2, -10))
    assert [d["b"] for d in db.c.find({"a": 3}).sort("b", ASCENDING)] == list(range(3, 94, 10))
    compound_desc = db.c.find({"a": 3}).sort("b", DESCENDING).explain()["queryPlanner"]["winningPlan"]
    compound_asc = db.c.find({"a": 3}).sort("b", ASCENDING).explain()["queryPlanner"]["winningPlan"]
    assert stage(compound_desc, "IXSCAN")["indexName"] == "a_1_b_-1"

    problems = []
    # LIMIT stops asking its input after the 3rd document (mongod: 3 keys / 3 docs).
    assert limited_plan["executionStats"]["totalKeysExamined"] == 3
    assert limited_plan["executionStats"]["totalDocsExamined"] == 3
    limit_stage = limited_plan["executionStats"]["executionStages"]
    assert (limit_stage["stage"], limit_stage["limitAmount"], limit_stage["nReturned"]) == ("LIMIT", 3, 3)
    assert limit_stage["isEOF"] == 1 and limit_stage["inputStage"]["isEOF"] == 0
    for sort, plan, direction in (("b: -1", compound_desc, "forward"), ("b: 1", compound_asc, "backward")):
        if stages(plan) != ["FETCH", "IXSCAN"] or stage(plan, "IXSCAN")["direction"] != direction:
            problems.append(f"find({{a: 3}}).sort({{{sort}}}) over {{a: 1, b: -1}} planned {stages(plan)}, "
                            f"mongod FETCH -> IXSCAN {direction} (equality prefix then sort field)")
    deviations(problems)


# -- count -------------------------------------------------------------------------------


def test_count_uses_count_scan(db):
    db.c.insert_many(people())
    before = (
        db.c.count_documents({"a": 3}),
        db.c.count_documents({"a": {"$gte": 3, "$lt": 5}}),
        db.command("count", "c", query={"a": 3})["n"],
    )
    assert before == (10, 20, 10)
    db.c.create_index("a")
    assert (
        db.c.count_documents({"a": 3}),
        db.c.count_documents({"a": {"$gte": 3, "$lt": 5}}),
        db.command("count", "c", query={"a": 3})["n"],
    ) == before

    explained = db.command("explain", {"count": "c", "query": {"a": 3}}, verbosity="executionStats")
    winning = explained["queryPlanner"]["winningPlan"]
    assert stages(winning) == ["COUNT", "COUNT_SCAN"]
    count_scan = winning["inputStage"]
    assert count_scan["indexName"] == "a_1"
    assert count_scan["keyPattern"] == {"a": 1}
    assert count_scan["isMultiKey"] is False
    assert count_scan["indexVersion"] == 2
    stats = explained["executionStats"]
    assert stats["nReturned"] == 0  # count returns a number, not documents
    assert stats["totalDocsExamined"] == 0
    assert stats["executionStages"]["stage"] == "COUNT"
    assert stats["executionStages"]["nCounted"] == 10

    # A filter the index does not fully answer needs the documents.
    fetched = db.command("explain", {"count": "c", "query": {"a": 3, "b": {"$lt": 50}}}, verbosity="executionStats")
    assert stages(fetched["queryPlanner"]["winningPlan"]) == ["COUNT", "FETCH", "IXSCAN"]
    assert fetched["executionStats"]["executionStages"]["nCounted"] == 5
    assert fetched["executionStats"]["totalDocsExamined"] == 10
    # No filter: the collection's own count.
    everything = db.command("explain", {"count": "c", "query": {}}, verbosity="executionStats")
    assert stages(everything["queryPlanner"]["winningPlan"]) == ["COUNT", "RECORD_STORE_FAST_COUNT"]
    assert everything["executionStats"]["executionStages"]["nCounted"] == N

    # mongod's COUNT_SCAN (plan_explainer_impl.cpp) shows its bounds as
    # startKey/endKey, has no direction, counts keysExamined (including the
    # final probe past the end: 11 for 10 keys) and COUNT reports nSkipped.
    problems = []
    want_bounds = {"startKey": {"a": 3}, "startKeyInclusive": True, "endKey": {"a": 3}, "endKeyInclusive": True}
    if count_scan.get("indexBounds") != want_bounds:
        problems.append(f"COUNT_SCAN indexBounds {count_scan.get('indexBounds')!r}, mongod {want_bounds!r}")
    if "direction" in count_scan:
        problems.append("COUNT_SCAN has a direction field (mongod's has none)")
    exec_scan = stats["executionStages"]["inputStage"]
    assert exec_scan["keysExamined"] == 11 and stats["totalKeysExamined"] == 11
    assert (exec_scan["nReturned"], exec_scan["works"], exec_scan["isEOF"]) == (10, 11, 1)
    assert stats["executionStages"]["nSkipped"] == 0
    deviations(problems)


# -- hint ----------------------------------------------------------------------------------


def test_hint_by_name_and_key_pattern(db):
    db.c.insert_many(people())
    db.c.create_index("a")
    db.c.create_index([("a", 1), ("b", -1)])
    db.c.create_index("h", hidden=True)
    expected = list(range(3, N, 10))

    for hint in ("a_1_b_-1", [("a", 1), ("b", -1)], {"a": 1, "b": -1}):
        cursor = db.c.find({"a": 3}).hint(hint)
        explained = cursor.explain()
        winning = explained["queryPlanner"]["winningPlan"]
        assert stages(winning) == ["FETCH", "IXSCAN"], hint
        assert winning["inputStage"] == ixscan(
            {"a": 1, "b": -1}, "a_1_b_-1", {"a": ["[3, 3]"], "b": ["[MaxKey, MinKey]"]}
        )
        assert explained["executionStats"]["nReturned"] == 10
        assert sorted(ids(db.c.find({"a": 3}).hint(hint))) == expected

    natural = db.c.find({"a": 3}).hint([("$natural", 1)]).explain()["queryPlanner"]["winningPlan"]
    assert natural["stage"] == "COLLSCAN"
    assert sorted(ids(db.c.find({"a": 3}).hint([("$natural", 1)]))) == expected
    # count and aggregate take hints as well.
    assert db.c.count_documents({"a": 3}, hint="a_1_b_-1") == 10
    assert [d["_id"] for d in db.c.aggregate([{"$match": {"a": 3}}, {"$sort": {"_id": 1}}], hint="a_1")] == expected

    # A hint naming no usable index: 2 BadValue (a hidden index cannot be hinted).
    for bad in ("no_such_index", [("zz", 1)], "h_1"):
        with pytest.raises(OperationFailure) as exc:
            list(db.c.find({"a": 3}).hint(bad))
        assert exc.value.code == 2, bad
        assert exc.value.details["codeName"] == "BadValue"
        assert "hint provided does not correspond to an existing index" in exc.value.details["errmsg"]

    # mongod answers hint("_id_") with an index scan of the _id index.
    for hint in ("_id_", [("_id", 1)]):
        by_id_explained = db.c.find({"a": 3}).hint(hint).explain()
        by_id = by_id_explained["queryPlanner"]["winningPlan"]
        assert stages(by_id) == ["FETCH", "IXSCAN"], hint
        assert by_id["inputStage"] == ixscan({"_id": 1}, "_id_", {"_id": ["[MinKey, MaxKey]"]}, isUnique=True)
        by_id_stats = by_id_explained["executionStats"]
        assert (by_id_stats["nReturned"], by_id_stats["totalKeysExamined"], by_id_stats["totalDocsExamined"]) == (
            10, N, N)
        assert by_id_stats["executionStages"]["inputStage"]["keysExamined"] == N
        assert sorted(ids(db.c.find({"a": 3}).hint(hint))) == expected


# -- sparse, partial, hidden -----------------------------------------------------------------


def test_sparse_partial_and_hidden_indexes_never_change_results(db):
    db.c.insert_many(people())
    queries = [
        {"s": None},  # a sparse index cannot answer this: most matches are not in it
        {"s": {"$lt": 3}},
        {"s": {"$exists": True}},
        {"tags": 1, "a": {"$gt": 5}},  # implies the partial filter
        {"tags": 1},  # does not
        {"name": "n42"},
    ]
    unindexed = [sorted(ids(db.c.find(q))) for q in queries]
    assert [len(r) for r in unindexed] == [75, 3, 25, 13, 33, 1]

    db.c.create_index("s", sparse=True)
    db.c.create_index("tags", partialFilterExpression={"a": {"$gt": 5}})
    db.c.create_index("name", hidden=True)
    assert [sorted(ids(db.c.find(q))) for q in queries] == unindexed
    assert [db.c.count_documents(q) for q in queries] == [len(r) for r in unindexed]

    def plan(q):
        return db.c.find(q).explain()["queryPlanner"]["winningPlan"]

    assert plan({"s": None})["stage"] == "COLLSCAN"
    sparse = plan({"s": {"$lt": 3}})
    assert stages(sparse) == ["FETCH", "IXSCAN"]
    assert sparse["inputStage"]["isSparse"] is True
    partial = plan({"tags": 1, "a": {"$gt": 5}})
    assert stages(partial) == ["FETCH", "IXSCAN"]
    assert partial["inputStage"]["isPartial"] is True
    assert partial["inputStage"]["isMultiKey"] is True
    assert plan({"tags": 1})["stage"] == "COLLSCAN"
    assert plan({"name": "n42"})["stage"] == "COLLSCAN"  # hidden from the planner


# -- aggregate ------------------------------------------------------------------------------


def test_aggregate_match_sort_served_by_index(db):
    db.c.insert_many(people())
    pipeline = [{"$match": {"b": {"$gte": 90}}}, {"$sort": {"b": -1}}]
    unindexed = list(db.c.aggregate(pipeline))
    db.c.create_index("b")
    indexed = list(db.c.aggregate(pipeline))
    assert indexed == unindexed
    assert [d["_id"] for d in indexed] == list(range(99, 89, -1))

    # pymongo 4 refuses aggregate(..., explain=True) client-side and points at
    # Database.command, which is how the explain option reaches the server.
    with pytest.raises(ConfigurationError):
        db.c.aggregate(pipeline, explain=True)
    explained = db.command("aggregate", "c", pipeline=pipeline, explain=True)
    assert explained["ok"] == 1.0
    winning = explained["queryPlanner"]["winningPlan"]
    assert stages(winning) == ["FETCH", "IXSCAN"]
    assert winning["inputStage"] == ixscan({"b": 1}, "b_1", {"b": ["[inf.0, 90]"]}, direction="backward")
    # The explain command wrapping aggregate says the same.
    wrapped = db.command("explain", {"aggregate": "c", "pipeline": pipeline, "cursor": {}}, verbosity="queryPlanner")
    assert stages(wrapped["queryPlanner"]["winningPlan"]) == ["FETCH", "IXSCAN"]

    # A sort the index does not give stays a SORT over the index scan.
    other = db.command("aggregate", "c", pipeline=[pipeline[0], {"$sort": {"name": 1}}], explain=True)
    assert stages(other["queryPlanner"]["winningPlan"]) == ["SORT", "FETCH", "IXSCAN"]


# -- writes keep the indexes right ------------------------------------------------------------


def test_indexes_follow_writes(db):
    db.c.insert_many(people())
    db.c.create_index("a")
    db.c.create_index([("tags", 1)])

    def via_index(q):
        cursor = db.c.find(q)
        explained = db.c.find(q).explain()
        assert stage(explained["queryPlanner"]["winningPlan"], "IXSCAN")
        return sorted(ids(cursor)), explained["executionStats"]["totalKeysExamined"]

    assert db.c.update_many({"a": 3}, {"$set": {"a": 33}}).modified_count == 10
    assert via_index({"a": 3}) == ([], 0)
    assert via_index({"a": 33}) == (list(range(3, N, 10)), 10)
    assert db.c.delete_many({"a": 33, "b": {"$gt": 50}}).deleted_count == 5
    assert via_index({"a": 33}) == ([3, 13, 23, 33, 43], 5)
    db.c.replace_one({"_id": 13}, {"a": 4, "tags": [99]})
    assert via_index({"a": 33}) == ([3, 23, 33, 43], 4)
    assert 13 in via_index({"a": 4})[0]
    assert via_index({"tags": 99}) == ([13], 1)
    # The array element 1 of tags went away with the replacement.
    assert 13 not in via_index({"tags": 1})[0]
    db.c.update_one({"_id": 14}, {"$push": {"tags": 99}})
    assert via_index({"tags": 99}) == ([13, 14], 2)
    assert db.c.count_documents({"a": 4}) == 11
    # Every match found through the index is found by a collection scan too.
    for q in ({"a": 4}, {"tags": 99}, {"tags": {"$in": [0, 12]}}, {"a": {"$gt": 30}}):
        assert sorted(ids(db.c.find(q))) == sorted(ids(db.c.find(q).hint([("$natural", 1)]))), q


def test_partial_index_used_when_the_filter_implies_it(db):
    """pymongo's own test_index_filter: comparisons imply the partial filter."""
    db.c.insert_many([{"x": 5, "a": 2}, {"x": 6, "a": 1}])
    db.c.create_index([("x", ASCENDING)], partialFilterExpression={"a": {"$lte": 1.5}})
    for used in ({"x": 6, "a": 1}, {"x": {"$gt": 1}, "a": 1}, {"x": 6, "a": {"$lte": 1}}):
        scan = stage(db.c.find(used).explain()["queryPlanner"]["winningPlan"], "IXSCAN")
        assert scan["indexName"] == "x_1" and scan["isPartial"] is True, used
        assert ids(db.c.find(used)) == ids(db.c.find(used).hint([("$natural", 1)]))
    for unused in ({"x": 6, "a": {"$lte": 1.6}}, {"x": 6}):
        plan = db.c.find(unused).explain()["queryPlanner"]["winningPlan"]
        assert stages(plan) == ["COLLSCAN"], unused


def test_background_is_kept_and_drop_dups_is_ignored(db):
    db.c.create_index([("keya", ASCENDING)])
    db.c.create_index([("keyb", ASCENDING)], background=False)
    db.c.create_index([("keyc", ASCENDING)], background=True)
    info = db.c.index_information()
    assert "background" not in info["keya_1"]
    assert info["keyb_1"]["background"] is False
    assert info["keyc_1"]["background"] is True
    db.d.insert_many([{"i": 1}, {"i": 1}])
    with pytest.raises(DuplicateKeyError):
        db.d.create_index([("i", ASCENDING)], unique=True, dropDups=False)
    assert db.d.count_documents({}) == 2
    assert list(db.d.index_information()) == ["_id_"]
