"""pymongo against BisonDB: clustered collections and changeStreamPreAndPostImages.

create_collection with clusteredIndex (and expireAfterSeconds), what
list_collections and list_indexes show, the clustered index refusing to be
dropped, collMod of the TTL and of pre- and post-images. Every test runs over
TCP and over the Unix socket (the `db` fixture is a fresh database per test
and transport). Expected values are mongod 8.0's.
"""

import pytest
from pymongo.errors import OperationFailure

from conftest import bare


def test_clustered_collection_as_mongod_shows_it(db):
    c = db.create_collection(
        "c", clusteredIndex={"key": {"_id": 1}, "unique": True, "name": "by id"}
    )
    (info,) = list(db.list_collections(filter={"name": "c"}))
    assert info["options"] == {
        "clusteredIndex": {"v": 2, "key": {"_id": 1}, "name": "by id", "unique": True}
    }
    assert "idIndex" not in info
    assert list(c.list_indexes()) == [
        {"v": 2, "key": {"_id": 1}, "name": "by id", "unique": True, "clustered": True}
    ]
    c.insert_many([{"_id": 2}, {"_id": 1}])
    assert [d["_id"] for d in c.find()] == [1, 2]
    # Creating the cluster key's index is a no-op; dropping it is refused.
    c.create_index("_id")
    for index in ("by id", {"_id": 1}):
        with pytest.raises(OperationFailure) as exc:
            db.command("dropIndexes", "c", index=index)
        assert exc.value.code == 5979800


def test_clustered_ttl_and_its_errors(db):
    db.create_collection(
        "t", clusteredIndex={"key": {"_id": 1}, "unique": True}, expireAfterSeconds=60
    )
    (info,) = list(db.list_collections(filter={"name": "t"}))
    assert info["options"]["expireAfterSeconds"] == 60
    assert bare(db.command("collMod", "t", expireAfterSeconds="off")) == {"ok": 1.0}
    (info,) = list(db.list_collections(filter={"name": "t"}))
    assert "expireAfterSeconds" not in info["options"]
    for options, code in [
        ({"expireAfterSeconds": 5}, 72),
        ({"clusteredIndex": {"key": {"_id": 1}, "unique": False}}, 5979700),
        ({"clusteredIndex": {"key": {"a": 1}, "unique": True}}, 197),
        ({"clusteredIndex": {"key": {"_id": 1}}}, 40414),
    ]:
        with pytest.raises(OperationFailure) as exc:
            db.create_collection("bad", **options)
        assert exc.value.code == code, options


def test_change_stream_pre_and_post_images(db):
    db.create_collection("p", changeStreamPreAndPostImages={"enabled": False})
    (info,) = list(db.list_collections(filter={"name": "p"}))
    assert info["options"] == {}
    db.command("collMod", "p", changeStreamPreAndPostImages={"enabled": True})
    (info,) = list(db.list_collections(filter={"name": "p"}))
    assert info["options"] == {"changeStreamPreAndPostImages": {"enabled": True}}
    with pytest.raises(OperationFailure) as exc:
        db.command("collMod", "p", changeStreamPreAndPostImages={"enabled": "yes"})
    assert exc.value.code == 14
