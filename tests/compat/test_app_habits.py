"""pymongo against BisonDB: habits of real applications (issue 21).

Each test states mongod 8's answer, from the manual or mongod's source, and
checks BisonDB gives the same: `$`-prefixed field names in upserts, two
positional `$` paths in one update, DBRef fields under `$elemMatch`, `$near`
with a bare GeoJSON point, `$unwind` of empty arrays, the `_id` index's
options, `listDatabases`' system databases, serverStatus' `globalLock`,
the profiler's entries for deletes with a comment and for reads of
`system.profile`, and explain's EXPRESS_IXSCAN for a find by `_id`. Every
test runs over TCP and over the Unix socket on a fresh database.
"""

import pytest
from bson import DBRef, ObjectId
from pymongo import ASCENDING, GEOSPHERE
from pymongo.errors import OperationFailure


def test_upsert_that_inserts_accepts_dollar_prefixed_fields(db):
    """Manual, "Dollar-Prefixed Field Names": an update which creates a new
    document during an upsert is validated as an insert, which accepts
    `$`-prefixed field names; the same update of an existing document fails
    (52 DollarPrefixedFieldName). `$unset` through a missing `$`-named field
    does nothing."""
    r = db.c.update_one({"_id": 1}, {"$set": {"$myKey": "v"}}, upsert=True)
    assert r.upserted_id == 1
    assert db.c.find_one({"_id": 1}) == {"_id": 1, "$myKey": "v"}
    with pytest.raises(OperationFailure) as e:
        db.c.update_one({"_id": 1}, {"$set": {"$myKey": "w"}})
    assert e.value.code == 52
    r = db.c.update_one({"_id": 1}, {"$unset": {"$missing.x": 1}})
    assert (r.matched_count, r.modified_count) == (1, 0)
    # The manual's example: phone and $hotel on a new document.
    db.c.update_one(
        {"date": "2021-07-07"},
        {"$set": {"phone": 25.17, "$hotel": 320.10}},
        upsert=True,
    )
    doc = db.c.find_one({"date": "2021-07-07"}, {"_id": 0})
    assert doc == {"date": "2021-07-07", "$hotel": 320.10, "phone": 25.17}


def test_two_positional_paths_in_one_update(db):
    """Manual, "$ (update)": `$` stands for the first element the query
    matched; mongod resolves it once for the whole update, so both paths
    reach the element even when the first changes the matched field."""
    db.c.insert_one({"_id": 1, "children": [{"name": "foo"}, {"name": "bar"}]})
    r = db.c.update_one(
        {"children.name": "bar"},
        {"$set": {"children.$.name": "Luke", "children.$.updatedAt": 1}},
    )
    assert r.modified_count == 1
    assert db.c.find_one({"_id": 1})["children"] == [
        {"name": "foo"},
        {"name": "Luke", "updatedAt": 1},
    ]


def test_dbref_fields_in_elem_match(db):
    """mongod's matcher (expression_parser.cpp, `isDBRefDocument` and
    `parseDBRef`): `$ref`, `$id` and `$db` are field names under
    `$elemMatch` and at any level where a filter names fields."""
    oid, other = ObjectId(), ObjectId()
    db.c.insert_many(
        [
            {"_id": 1, "members": [DBRef("users", oid), DBRef("users", other)]},
            {"_id": 2, "members": [DBRef("users", other)]},
        ]
    )
    found = db.c.find({"members": {"$elemMatch": {"$id": oid}}}).to_list()
    assert [d["_id"] for d in found] == [1]
    found = db.c.find({"members": {"$elemMatch": {"$ref": "users", "$id": other}}})
    assert sorted(d["_id"] for d in found) == [1, 2]
    assert db.c.count_documents({"members": DBRef("users", oid)}) == 1
    assert db.c.count_documents({"members.$id": oid}) == 1


def test_near_takes_a_bare_geojson_point(db):
    """mongod accepts `$near: {type: "Point", coordinates}` (its legacy
    syntax with a GeoJSON point, `GeoNearExpression::parseLegacyQuery`) and,
    as the manual's `$near` page says of GeoJSON points, measures
    `$maxDistance` in meters."""
    db.c.create_index([("loc", GEOSPHERE)])
    db.c.insert_many(
        [
            {"_id": "west", "loc": {"type": "Point", "coordinates": [-179, 0]}},
            {"_id": "across", "loc": {"type": "Point", "coordinates": [179, 0]}},
            {"_id": "far", "loc": {"type": "Point", "coordinates": [0, 0]}},
        ]
    )
    point = {"type": "Point", "coordinates": [-179.5, 0]}
    for op in ("$near", "$nearSphere"):
        found = db.c.find({"loc": {op: point}}).to_list()
        assert [d["_id"] for d in found] == ["west", "across", "far"], op
        # ~55.6 km to "west", ~166.8 km to "across" over the antimeridian.
        near = db.c.find({"loc": {op: point, "$maxDistance": 100_000}}).to_list()
        assert [d["_id"] for d in near] == ["west"], op
        near = db.c.find({"loc": {op: point, "$maxDistance": 200_000}}).to_list()
        assert [d["_id"] for d in near] == ["west", "across"], op


def test_unwind_preserving_empty_arrays_drops_the_field(db):
    """Manual, `$unwind`, "Preserve Null and Empty Arrays": with
    `preserveNullAndEmptyArrays: true`, `{_id: 2, item: "EFG", sizes: []}`
    comes out as `{_id: 2, item: "EFG"}`; a null `sizes` stays null and a
    missing one stays missing."""
    db.inventory2.insert_many(
        [
            {"_id": 1, "item": "ABC", "sizes": ["S", "M"]},
            {"_id": 2, "item": "EFG", "sizes": []},
            {"_id": 3, "item": "IJK", "sizes": "M"},
            {"_id": 4, "item": "LMN"},
            {"_id": 5, "item": "XYZ", "sizes": None},
        ]
    )
    out = db.inventory2.aggregate(
        [{"$unwind": {"path": "$sizes", "preserveNullAndEmptyArrays": True}}]
    ).to_list()
    assert out == [
        {"_id": 1, "item": "ABC", "sizes": "S"},
        {"_id": 1, "item": "ABC", "sizes": "M"},
        {"_id": 2, "item": "EFG"},
        {"_id": 3, "item": "IJK", "sizes": "M"},
        {"_id": 4, "item": "LMN"},
        {"_id": 5, "item": "XYZ", "sizes": None},
    ]


def test_unique_is_not_an_id_index_option(db):
    """mongod (index_key_validate.cpp, `validateIdIndexSpec`): an `_id` index
    specification takes only key, name, v, ns and collation; `unique` is 197
    InvalidIndexSpecificationOption."""
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("_id", ASCENDING)], unique=True)
    assert e.value.code == 197
    assert e.value.details["codeName"] == "InvalidIndexSpecificationOption"
    # mongod shows the specification as sent (pymongo puts the options
    # first) with the `v: 2` it added.
    assert e.value.details["errmsg"] == (
        "The field 'unique' is not valid for an _id index specification. "
        'Specification: { unique: true, name: "_id_1", key: { _id: 1 }, v: 2 }'
    )
    # Without options the other name is the conflict it always was.
    with pytest.raises(OperationFailure) as e:
        db.c.create_index([("_id", ASCENDING)])
    assert e.value.code == 85


def test_list_databases_shows_the_system_databases(client, db):
    """A fresh standalone mongod lists admin, config and local (created at
    startup); `nameOnly` and `filter` apply to them as to any database."""
    db.c.insert_one({})
    listed = client.admin.command("listDatabases")["databases"]
    names = [d["name"] for d in listed]
    assert {"admin", "config", "local", db.name} <= set(names)
    assert names == sorted(names)
    for d in listed:
        assert set(d) == {"name", "sizeOnDisk", "empty"}, d
    assert client.admin.command(
        "listDatabases", nameOnly=True, filter={"name": {"$in": ["admin", "local"]}}
    )["databases"] == [{"name": "admin"}, {"name": "local"}]


def test_server_status_global_lock(client):
    """serverStatus' `globalLock` (manual, serverStatus output): `totalTime`
    in microseconds since startup, `currentQueue` and `activeClients` with
    `total`, `readers` and `writers`."""
    status = client.admin.command("serverStatus")
    gl = status["globalLock"]
    assert gl["totalTime"] >= status["uptimeMillis"] * 1000 - 1000
    assert gl["currentQueue"] == {"total": 0, "readers": 0, "writers": 0}
    active = gl["activeClients"]
    assert set(active) == {"total", "readers", "writers"}
    assert active["total"] == active["readers"] + active["writers"]
    assert active["readers"] >= 1  # this serverStatus


def test_profiler_records_delete_comments_and_its_own_reads(db):
    """mongod's profiler adds the command's comment to each statement's
    entry (curop.cpp, `appendCommentField`) and records operations on
    `system.profile` itself at level 2."""
    db.c.insert_many([{"_id": i} for i in range(3)])
    db.command("profile", 2)
    try:
        db.c.delete_many({"_id": {"$lt": 2}}, comment="cleanup")
        db.system.profile.find_one({"op": "remove"})
    finally:
        db.command("profile", 0)
    (d,) = db.system.profile.find({"op": "remove"})
    assert d["command"]["comment"] == "cleanup"
    assert d["command"]["q"] == {"_id": {"$lt": 2}}
    assert d["ndeleted"] == 2
    reads = db.system.profile.find({"ns": f"{db.name}.system.profile"}).to_list()
    assert [r["op"] for r in reads] == ["query"], reads
    db.system.profile.drop()


@pytest.mark.not_on_postgres(
    "a mongos takes transaction numbers (the postgres engine answers as one and runs "
    "the transaction; crates/bisondb-server/tests/mongos.rs tests that)")
def test_transaction_fields_fail_on_a_standalone(db):
    """A standalone mongod refuses a transaction number (20 IllegalOperation,
    "Transaction numbers are only allowed on a replica set member or mongos":
    mongod's jstests/noPassthrough/retryable_writes_standalone_api.js), so a
    transaction's statements never run outside a transaction."""
    from bson import Int64
    from bson.binary import Binary, UUID_SUBTYPE
    import uuid

    lsid = {"id": Binary(uuid.uuid4().bytes, UUID_SUBTYPE)}
    db.txn_c.drop()
    with pytest.raises(OperationFailure) as e:
        db.command({"insert": "txn_c", "documents": [{"_id": 1}], "lsid": lsid,
                    "txnNumber": Int64(1), "startTransaction": True, "autocommit": False})
    assert e.value.code == 20
    assert "only allowed on a replica set member or mongos" in str(e.value)
    assert db.txn_c.count_documents({}) == 0


def test_explain_of_a_find_by_id_shows_the_express_path(db):
    """mongod 8 answers a find whose filter is only an `_id` equality on its
    express path (query/query_utils.h, `isExpressEligible`); explain shows
    one EXPRESS_IXSCAN node with the `_id` index's key pattern as a string
    (plan_explainer_express). A skip leaves the query to the classic IDHACK."""
    db.c.insert_many([{"_id": i, "x": i} for i in range(5)])
    e = db.c.find({"_id": 3}).explain()
    assert e["queryPlanner"]["winningPlan"] == {
        "isCached": False,
        "stage": "EXPRESS_IXSCAN",
        "keyPattern": "{ _id: 1 }",
        "indexName": "_id_",
    }
    stages = e["executionStats"]["executionStages"]
    assert stages["stage"] == "EXPRESS_IXSCAN"
    assert (stages["nReturned"], stages["keysExamined"], stages["docsExamined"]) == (1, 1, 1)
    skipped = db.c.find({"_id": 3}).skip(1).explain()["queryPlanner"]["winningPlan"]
    assert skipped["stage"] != "EXPRESS_IXSCAN"
