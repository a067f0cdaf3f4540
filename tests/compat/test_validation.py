"""pymongo against BisonDB: document validation and collMod.

Validators on create_collection and through collMod, the 121 error with its
errInfo, validationLevel/validationAction, bypass_document_validation on every
write helper, and collMod of index options. Every test runs over TCP and over
the Unix socket (the `db` fixture is a fresh database per test and transport).
Expected values are mongod 8.0's.
"""

import pytest
from pymongo import InsertOne, ReplaceOne, UpdateOne
from pymongo.errors import BulkWriteError, OperationFailure, WriteError


def validated(db, **extra):
    return db.create_collection("c", validator={"a": {"$gte": 0}}, **extra)


def test_create_shows_options_in_list_collections(db):
    validated(db, validationLevel="moderate", validationAction="warn")
    (info,) = list(db.list_collections(filter={"name": "c"}))
    assert info["options"] == {
        "validator": {"a": {"$gte": 0}},
        "validationLevel": "moderate",
        "validationAction": "warn",
    }


def test_failing_insert_carries_err_info(db):
    c = validated(db)
    with pytest.raises(WriteError) as info:
        c.insert_one({"_id": 5, "a": -1})
    err = info.value
    assert err.code == 121
    assert err.details["codeName"] == "DocumentValidationFailure"
    assert err.details["errmsg"] == "Document failed validation"
    assert err.details["errInfo"]["failingDocumentId"] == 5
    assert err.details["errInfo"]["details"] == {
        "operatorName": "$gte",
        "specifiedAs": {"a": {"$gte": 0}},
        "reason": "comparison failed",
        "consideredValue": -1,
    }
    assert c.count_documents({}) == 0


def test_insert_many_ordered_stops_at_the_invalid_document(db):
    c = validated(db)
    with pytest.raises(BulkWriteError) as info:
        c.insert_many([{"_id": 1, "a": 1}, {"_id": 2, "a": -2}, {"_id": 3, "a": 3}])
    details = info.value.details
    assert details["nInserted"] == 1
    assert details["writeErrors"][0]["index"] == 1
    assert details["writeErrors"][0]["code"] == 121


def test_updates_are_checked_and_can_bypass(db):
    c = validated(db)
    c.insert_one({"_id": 1, "a": 1})
    for attempt in (
        lambda **kw: c.update_one({"_id": 1}, {"$inc": {"a": -5}}, **kw),
        lambda **kw: c.replace_one({"_id": 1}, {"b": 1}, **kw),
        lambda **kw: c.update_one({"_id": 1}, [{"$set": {"a": -1}}], **kw),
        lambda **kw: c.find_one_and_update({"_id": 1}, {"$set": {"a": -2}}, **kw),
    ):
        with pytest.raises(OperationFailure) as info:
            attempt()
        assert info.value.code == 121
        assert c.find_one({"_id": 1}) == {"_id": 1, "a": 1}
    with pytest.raises(OperationFailure) as info:
        c.update_one({"_id": 2}, {"$set": {"a": -2}}, upsert=True)
    assert info.value.code == 121
    c.update_one({"_id": 1}, {"$set": {"a": -1}}, bypass_document_validation=True)
    assert c.find_one({"_id": 1}) == {"_id": 1, "a": -1}
    c.insert_one({"_id": 3, "a": -3}, bypass_document_validation=True)
    assert c.count_documents({"a": {"$lt": 0}}) == 2


def test_bulk_write_bypass(db):
    c = validated(db)
    ops = [InsertOne({"_id": 1, "a": -1}), UpdateOne({"_id": 1}, {"$inc": {"a": -1}})]
    with pytest.raises(BulkWriteError):
        c.bulk_write(ops)
    c.bulk_write(ops, bypass_document_validation=True)
    c.bulk_write([ReplaceOne({"_id": 1}, {"a": -5})], bypass_document_validation=True)
    assert c.find_one({"_id": 1}) == {"_id": 1, "a": -5}


def test_levels_and_actions(db):
    c = validated(db, validationLevel="moderate")
    c.insert_one({"_id": 1, "a": -1}, bypass_document_validation=True)
    c.insert_one({"_id": 2, "a": 2})
    # Moderate: documents that already fail may still be updated.
    c.update_one({"_id": 1}, {"$set": {"a": -10}})
    with pytest.raises(OperationFailure):
        c.update_one({"_id": 2}, {"$set": {"a": -2}})
    db.command("collMod", "c", validationLevel="strict", validationAction="warn")
    c.insert_one({"_id": 3, "a": -3})
    # The write went through; the failure is in the server log.
    log = db.client.admin.command("getLog", "global")["log"]
    assert any("Document would fail validation" in line for line in log)
    db.command("collMod", "c", validationLevel="off", validationAction="error")
    c.insert_one({"_id": 4, "a": -4})
    assert c.count_documents({"a": {"$lt": 0}}) == 3


def test_coll_mod_validator_and_errors(db):
    db.c.insert_one({"z": 5})
    db.command("collMod", "c", validator={"z": {"$gte": 0}})
    with pytest.raises(OperationFailure) as info:
        db.c.update_one({"z": 5}, {"$inc": {"z": -10}})
    assert info.value.code == 121
    with pytest.raises(OperationFailure) as info:
        db.command("collMod", "nope", validator={})
    assert info.value.code == 26
    with pytest.raises(OperationFailure) as info:
        db.command("collMod", "c", validationAction="errorAndLog")
    assert info.value.code == 2
    with pytest.raises(OperationFailure) as info:
        db.command("collMod", "c", validator={"$where": "true"})
    assert info.value.code == 224


def test_coll_mod_index_options(db):
    db.c.create_index("a", name="a_1")
    db.c.create_index("t", name="t_1", expireAfterSeconds=100)
    reply = db.command("collMod", "c", index={"keyPattern": {"a": 1}, "hidden": True})
    assert (reply["hidden_old"], reply["hidden_new"]) == (False, True)
    reply = db.command("collMod", "c", index={"name": "t_1", "expireAfterSeconds": 7})
    assert (reply["expireAfterSeconds_old"], reply["expireAfterSeconds_new"]) == (100, 7)
    info = db.c.index_information()
    assert info["a_1"]["hidden"] is True
    assert info["t_1"]["expireAfterSeconds"] == 7
    with pytest.raises(OperationFailure) as err:
        db.command("collMod", "c", index={"name": "nope", "hidden": True})
    assert err.value.code == 27
