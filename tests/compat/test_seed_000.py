"""Seed 000: one pymongo client inserting single-threaded, then from Pool(8).

The body of `seed_000` is the seed's script ported to Python 3 and changed
only where it must be: `insert` -> `insert_one`, `print` -> function, the
MongoClient URI comes from the fixture, and the document count is a parameter
(20,000 here instead of 1,000,000, so CI stays fast; BISONDB_SEED000_N
overrides it). The assertions after it check what the seed only assumed.
"""

import contextlib
import io
import os

from bson import ObjectId

N = int(os.environ.get("BISONDB_SEED000_N", "20000"))


def seed_000(uri, N):
    # -*- coding: utf-8 -*-

    import re, sys, os, time
    from pymongo import MongoClient
    from multiprocessing.dummy import Pool

    ##connect to default MongoClient
    client = MongoClient(uri)
    db = client['MM']

    IDs = range(N)

    def writeSample(i):
        item = {"name": "Huidong Tian",
                "title": "PhD",
                "id": i,
                "des": "I am a data scientist focusing on Python and R", 
                "other": "As for why the book was created, a theory which has gained considerable interest, although still controversial is Persian imperial authorisation. "}
        collection.insert_one(item)
        msg = "\rwrite " + str(i) + " documents!"
        sys.stdout.write(msg); sys.stdout.flush()

    collection = db['single']
    t1 = time.time()
    for i in IDs:
        writeSample(i)

    print("\nImporting used " + str(int(time.time() - t1)) + " seconds in total!\n")

    collection = db['multiple']
    t1 = time.time()
    pool = Pool(8)
    pool.map(writeSample, IDs) 
    pool.close()  
    pool.join()
    print("\nImporting used " + str(int(time.time() - t1)) + " seconds in total!\n")

    client.close()


def expected_item(i):
    return {"name": "Huidong Tian",
            "title": "PhD",
            "id": i,
            "des": "I am a data scientist focusing on Python and R",
            "other": "As for why the book was created, a theory which has gained considerable interest, although still controversial is Persian imperial authorisation. "}


def test_seed_000_single_then_pool8(client, uri):
    client.drop_database("MM")

    # The script reports every document on stdout; keep only its tail so a
    # failure report stays readable.
    progress = io.StringIO()
    with contextlib.redirect_stdout(progress):
        seed_000(uri, N)
    print(progress.getvalue()[-400:])

    db = client["MM"]
    assert sorted(db.list_collection_names()) == ["multiple", "single"]
    for name in ("single", "multiple"):
        collection = db[name]
        assert collection.count_documents({}) == N, name
        assert collection.estimated_document_count() == N, name
        # Every id exactly once: the pool neither lost nor repeated an insert.
        assert sorted(collection.distinct("id")) == list(range(N)), name
        for i in (0, N // 2, N - 1):
            doc = collection.find_one({"id": i})
            assert doc is not None, (name, i)
            assert isinstance(doc.pop("_id"), ObjectId)
            assert doc == expected_item(i), (name, i)
            # Field order is kept as inserted (BSON documents are ordered).
            assert list(doc) == ["name", "title", "id", "des", "other"]
        assert len({d["_id"] for d in collection.find({}, {"_id": 1})}) == N, name

    client.drop_database("MM")
