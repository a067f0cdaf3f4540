"""pymongo against BisonDB: wildcard indexes as mongod 8 has them.

`{"$**": 1}`, `{"attrs.$**": 1}`, `wildcardProjection` and compound wildcard
indexes, created through pymongo's `create_index` and `createIndexes`: the same
results with and without the index for the queries schemaless applications
run (equality, ranges, `$in`, `$exists`, sorts), explain choosing an IXSCAN on
`{$_path: 1, <path>: 1}` where mongod does and a collection scan where a
wildcard index cannot answer, `index_information` showing the projection, and
mongod's error codes for the restrictions (unique, sparse, TTL, hashed,
2dsphere, a projection on a non-`$**` key). Every test runs over TCP and the
Unix socket, on the session's engine.
"""

import pytest
from pymongo.errors import OperationFailure


def products():
    """Documents whose attributes differ from one to the next."""
    return [
        {"_id": 1, "sku": "a", "attrs": {"color": "red", "size": 10}},
        {"_id": 2, "sku": "b", "attrs": {"color": "blue", "size": 12, "tags": ["x", "y"]}},
        {"_id": 3, "sku": "c", "attrs": {"weight": 1.5, "tags": []}},
        {"_id": 4, "sku": "d", "attrs": {"color": None, "dims": {"w": 3, "h": 4}}},
        {"_id": 5, "sku": "e", "attrs": {"size": 8, "dims": {}}},
        {"_id": 6, "sku": "f"},
    ]


def stage(plan, name):
    while plan is not None:
        if plan["stage"] == name:
            return plan
        plan = plan.get("inputStage")
    return None


def ids(cursor):
    return [d["_id"] for d in cursor]


QUERIES = [
    # (filter, sort, the path mongod's IXSCAN scans, or None for a COLLSCAN)
    ({"attrs.color": "red"}, None, "attrs.color"),
    ({"attrs.size": {"$gte": 10}}, None, "attrs.size"),
    ({"attrs.size": {"$gt": 5}}, [("attrs.size", -1)], "attrs.size"),
    ({"attrs.color": {"$in": ["red", "blue"]}}, None, "attrs.color"),
    ({"attrs.tags": "y"}, None, "attrs.tags"),
    ({"attrs.dims": {"$exists": True}}, None, "attrs.dims"),
    ({"attrs.dims.w": {"$lt": 5}}, None, "attrs.dims.w"),
    ({"attrs.dims": {}}, None, "attrs.dims"),
    ({"attrs.color": None}, None, None),
    ({"attrs.color": {"$ne": "red"}}, None, None),
    ({"attrs.size": {"$exists": False}}, None, None),
    ({"attrs.dims": {"w": 3, "h": 4}}, None, None),
    ({"attrs.tags": ["x", "y"]}, None, None),
]


def run(coll, filter_, sort):
    cursor = coll.find(filter_)
    cursor = cursor.sort(sort if sort else [("_id", 1)])
    return ids(cursor)


def test_same_results_and_explain_like_mongod(db):
    db.p.insert_many(products())
    before = [run(db.p, f, s) for f, s, _ in QUERIES]
    assert db.p.create_index([("$**", 1)]) == "$**_1"
    after = [run(db.p, f, s) for f, s, _ in QUERIES]
    assert after == before
    # mongod 8's answers for this data.
    assert before[0] == [1]
    assert before[2] == [2, 1, 5]
    assert before[5] == [4, 5]
    assert before[8] == [3, 4, 5, 6]
    for f, s, path in QUERIES:
        cursor = db.p.find(f)
        if s:
            cursor = cursor.sort(s)
        plan = cursor.explain()["queryPlanner"]["winningPlan"]
        ix = stage(plan, "IXSCAN")
        if path is None:
            assert ix is None, (f, plan)
            continue
        assert ix is not None, (f, plan)
        assert ix["indexName"] == "$**_1"
        assert ix["keyPattern"] == {"$_path": 1, path: 1}
        assert ix["indexBounds"]["$_path"][0] == f'["{path}", "{path}"]'
        if s:
            # A path without arrays gives the sort: no SORT stage.
            assert stage(plan, "SORT") is None, plan
            assert ix["direction"] == "backward"


def test_subtree_projection_and_compound(db):
    db.p.insert_many(products())
    db.p.create_index([("attrs.$**", 1)], name="attrs")
    plan = db.p.find({"attrs.size": 8}).explain()["queryPlanner"]["winningPlan"]
    assert stage(plan, "IXSCAN")["keyPattern"] == {"$_path": 1, "attrs.size": 1}
    plan = db.p.find({"sku": "a"}).explain()["queryPlanner"]["winningPlan"]
    assert stage(plan, "IXSCAN") is None

    db.q.insert_many(products())
    db.q.create_index([("$**", 1)], wildcardProjection={"attrs.color": 1}, name="colors")
    info = db.q.index_information()
    assert info["colors"]["wildcardProjection"] == {"attrs.color": 1}
    assert ids(db.q.find({"attrs.color": "blue"})) == [2]
    plan = db.q.find({"attrs.size": 8}).explain()["queryPlanner"]["winningPlan"]
    assert stage(plan, "IXSCAN") is None

    db.r.insert_many(products())
    db.r.create_index([("sku", 1), ("$**", 1)], wildcardProjection={"sku": 0}, name="cw")
    cursor = db.r.find({"sku": "b", "attrs.size": {"$gt": 1}})
    assert ids(cursor) == [2]
    plan = db.r.find({"sku": "b", "attrs.size": {"$gt": 1}}).explain()["queryPlanner"]["winningPlan"]
    assert stage(plan, "IXSCAN")["keyPattern"] == {"sku": 1, "$_path": 1, "attrs.size": 1}
    # Documents without a wildcard leaf are still found by the regular field.
    assert ids(db.r.find({"sku": "f"})) == [6]


@pytest.mark.parametrize(
    "key, options, code",
    [
        ([("$**", 1)], {"unique": True}, 67),
        ([("$**", 1)], {"sparse": True}, 67),
        ([("$**", 1)], {"expireAfterSeconds": 10}, 67),
        ([("$**", "hashed")], {}, 67),
        ([("$**", "2dsphere")], {}, 67),
        ([("a", 1)], {"wildcardProjection": {"a": 1}}, 2),
        ([("a.$**", 1)], {"wildcardProjection": {"a": 1}}, 9),
        ([("$**", 1)], {"wildcardProjection": {"a": 1, "b": 0}}, 31254),
        ([("a", 1), ("$**", 1)], {}, 67),
    ],
)
def test_restrictions_fail_with_mongods_codes(db, key, options, code):
    db.c.insert_one({"_id": 1})
    with pytest.raises(OperationFailure) as exc:
        db.c.create_index(key, **options)
    assert exc.value.code == code
    assert list(db.c.index_information()) == ["_id_"]
