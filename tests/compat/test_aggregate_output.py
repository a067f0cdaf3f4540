"""pymongo against BisonDB: $merge and $out targets, $bucketAuto granularity.

$merge on fields other than _id (a unique index on exactly them is required),
$merge's `let` for a whenMatched pipeline, $out keeping the target's indexes
and validator, and $bucketAuto boundaries rounded to a preferred number
series. Every test runs over TCP and over the Unix socket (the `db` fixture is
a fresh database per test and transport). Expected values are mongod 8.0's.
"""

import pytest
from pymongo.errors import OperationFailure


def test_merge_on_needs_a_unique_index(db):
    db.src.insert_many([{"k": "a", "n": 5}, {"k": "b", "n": 2}])
    merge = {
        "$merge": {
            "into": "t",
            "on": "k",
            "let": {"inc": "$n"},
            "whenMatched": [{"$set": {"n": {"$add": ["$n", "$$inc"]}}}],
        }
    }
    project = {"$project": {"_id": 0, "k": 1, "n": 1}}
    with pytest.raises(OperationFailure) as info:
        list(db.src.aggregate([project, merge]))
    assert info.value.code == 51183
    assert "t" not in db.list_collection_names()

    db.t.insert_one({"_id": 1, "k": "a", "n": 1})
    db.t.create_index("k", unique=True)
    list(db.src.aggregate([project, merge]))
    docs = {d["k"]: d["n"] for d in db.t.find()}
    assert docs == {"a": 6, "b": 2}

    with pytest.raises(OperationFailure) as info:
        list(db.src.aggregate([{"$project": {"_id": 0, "k": ["$k"]}}, merge]))
    assert info.value.code == 51185


def test_out_keeps_indexes_and_validator(db):
    db.create_collection("t", validator={"k": {"$type": "number"}})
    db.t.create_index("k", unique=True)
    db.t.insert_one({"_id": "old", "k": 0})
    db.src.insert_many([{"_id": 1, "k": 1}, {"_id": 2, "k": 2}, {"_id": 3, "k": 2}])

    list(db.src.aggregate([{"$match": {"_id": {"$lt": 3}}}, {"$out": "t"}]))
    assert sorted(db.t.index_information()) == ["_id_", "k_1"]
    (info,) = list(db.list_collections(filter={"name": "t"}))
    assert info["options"]["validator"] == {"k": {"$type": "number"}}

    with pytest.raises(OperationFailure) as err:
        list(db.src.aggregate([{"$out": "t"}]))
    assert err.value.code == 11000
    assert list(db.t.find().sort("_id", 1)) == [{"_id": 1, "k": 1}, {"_id": 2, "k": 2}]


def test_bucket_auto_granularity(db):
    db.c.insert_many([{"v": v} for v in (110, 120, 150, 155, 170)])
    got = list(
        db.c.aggregate(
            [{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R20"}}]
        )
    )
    assert got == [
        {"_id": {"min": 100.0, "max": 160.0}, "count": 4},
        {"_id": {"min": 160.0, "max": 180.0}, "count": 1},
    ]
    with pytest.raises(OperationFailure) as info:
        list(
            db.c.aggregate(
                [{"$bucketAuto": {"groupBy": "$v", "buckets": 2, "granularity": "R7"}}]
            )
        )
    assert info.value.code == 40257
