"""pymongo against BisonDB: time-series collections.

pymongo's create_collection(timeseries=...) and the operations applications
run on them: inserts of measurements (duplicate _ids allowed, the time field
checked), reads through find/aggregate/count/distinct in mongod's field order,
the bucket collection beside them, deletes and updates, index helpers, and the
errors mongod gives. Every test runs over TCP and over the Unix socket on a
fresh database. Expected values are mongod 8.0's.
"""

from datetime import datetime, timedelta, timezone

import pytest
from pymongo.errors import BulkWriteError, CollectionInvalid, OperationFailure

T0 = datetime(2024, 5, 1, 12, 0, tzinfo=timezone.utc)


def weather(db):
    return db.create_collection(
        "weather",
        timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "minutes"},
        expireAfterSeconds=86400,
    )


def test_create_lists_the_collection_and_its_buckets(db):
    weather(db)
    infos = {c["name"]: c for c in db.list_collections()}
    assert infos["weather"]["type"] == "timeseries"
    assert infos["weather"]["options"] == {
        "timeseries": {
            "timeField": "ts",
            "metaField": "sensor",
            "granularity": "minutes",
            "bucketMaxSpanSeconds": 86400,
        },
        "expireAfterSeconds": 86400,
    }
    assert infos["weather"]["info"] == {"readOnly": False}
    assert infos["system.buckets.weather"]["type"] == "collection"
    # The same options again are accepted, as by mongod; other ones are not.
    db.command(
        "create",
        "weather",
        timeseries={"timeField": "ts", "metaField": "sensor", "granularity": "minutes"},
        expireAfterSeconds=86400,
    )
    with pytest.raises(CollectionInvalid):
        db.create_collection("weather", timeseries={"timeField": "other"})


@pytest.mark.parametrize(
    "options, code",
    [
        ({"timeseries": {}}, 40414),
        ({"timeseries": {"timeField": "t", "metaField": "t"}}, 72),
        ({"timeseries": {"timeField": "t", "metaField": "_id"}}, 72),
        ({"timeseries": {"timeField": "t", "granularity": "days"}}, 2),
        ({"timeseries": {"timeField": "t", "bucketMaxSpanSeconds": 10}}, 72),
        ({"timeseries": {"timeField": "t"}, "capped": True, "size": 1000}, 72),
        ({"expireAfterSeconds": 10}, 72),
    ],
)
def test_create_errors(db, options, code):
    with pytest.raises(OperationFailure) as e:
        db.command("create", "bad", **options)
    assert e.value.code == code
    assert "bad" not in db.list_collection_names()


def test_measurements_round_trip(db):
    coll = weather(db)
    coll.insert_many(
        [
            {"_id": 1, "ts": T0, "sensor": {"id": 5}, "temp": 12},
            {"_id": 1, "ts": T0 + timedelta(seconds=1), "sensor": {"id": 5}, "temp": 13},
            {"ts": T0 + timedelta(seconds=2), "sensor": {"id": 6}, "temp": 20},
        ]
    )
    docs = list(coll.find({}, sort=[("ts", 1)]))
    assert list(docs[0].keys()) == ["ts", "sensor", "_id", "temp"]
    assert [d["temp"] for d in docs] == [12, 13, 20]
    assert coll.count_documents({"sensor.id": 5}) == 2
    assert sorted(coll.distinct("sensor.id")) == [5, 6]
    groups = list(
        coll.aggregate(
            [{"$group": {"_id": "$sensor.id", "n": {"$sum": 1}}}, {"$sort": {"_id": 1}}]
        )
    )
    assert groups == [{"_id": 5, "n": 2}, {"_id": 6, "n": 1}]
    buckets = list(db["system.buckets.weather"].find())
    assert len(buckets) == 2
    # mongod 8 keeps buckets compressed: control.version 2 (rows in time
    # order), control.count, and every data field a BSONColumn (BinData 7).
    assert all(b["control"]["version"] == 2 for b in buckets)
    assert sorted(b["control"]["count"] for b in buckets) == [1, 2]
    for b in buckets:
        for column in b["data"].values():
            assert isinstance(column, bytes) and column.subtype == 7


def test_time_field_is_checked_per_document(db):
    coll = db.create_collection("m", timeseries={"timeField": "time"})
    with pytest.raises(BulkWriteError) as e:
        coll.insert_many([{"time": T0}, {"time": "soon"}, {"time": T0}], ordered=False)
    details = e.value.details
    assert details["nInserted"] == 2
    [err] = details["writeErrors"]
    assert err["index"] == 1 and err["code"] == 2
    assert err["errmsg"] == "'time' must be present and contain a valid BSON UTC datetime value"


def test_deletes_updates_and_indexes(db):
    coll = weather(db)
    coll.insert_many(
        [{"ts": T0 + timedelta(seconds=i), "sensor": i % 2, "v": i} for i in range(6)]
    )
    assert coll.delete_many({"sensor": 0}).deleted_count == 3
    assert coll.update_many({"v": {"$gte": 3}}, {"$set": {"big": True}}).modified_count == 2
    assert coll.count_documents({"big": True}) == 2
    assert [i["key"] for i in coll.list_indexes()] == [{"sensor": 1, "ts": 1}]
    coll.create_index([("v", -1)])
    assert "v_-1" in coll.index_information()
    coll.drop()
    assert db.list_collection_names() == []
