"""Seed 003's JavaScript loader, run unchanged by mongosh.

`mongosh/create_random.js` is the seed's script byte for byte (only the
blog's HTML escaping and CRLF line ends undone). It relies on the legacy
`db.collection.insert(array)`, which mongosh still supports with a
deprecation warning, and on `arg1`/`arg2` being defined by --eval before the
file runs, exactly as the seed ran it with the old `mongo` shell:
    mongo random --eval "var arg1=50000000;arg2=1" create_random.js
"""

import os
import shutil
import subprocess
from datetime import datetime
from pathlib import Path

from conftest import NODE_DIR, client_env, require_client, with_database

SCRIPT = Path(__file__).resolve().parent / "mongosh" / "create_random.js"
DOCUMENTS = 200_000
TIMEOUT_S = 600


def mongosh_path():
    override = os.environ.get("MONGOSH")
    if override:
        return Path(override)
    local = NODE_DIR / "node_modules" / ".bin" / "mongosh"
    if local.exists():
        return local
    found = shutil.which("mongosh")
    return Path(found) if found else None


def test_create_random_js(client, uri):
    mongosh = require_client(
        mongosh_path(),
        "mongosh",
        "not in tests/compat/node/node_modules (run `npm ci` there or `bash scripts/test.sh`), "
        "not on PATH, and MONGOSH is not set",
    )
    client.drop_database("random")

    argv = [
        str(mongosh),
        with_database(uri, "random"),
        "--quiet",
        "--eval", f"var arg1={DOCUMENTS};arg2=1",
        str(SCRIPT),
    ]
    result = subprocess.run(
        argv, env=client_env(), stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT_S
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, f"mongosh exited {result.returncode}:\n{output[-4000:]}"
    assert "Job#1 inserted 100000 documents." in output, output[-4000:]
    assert f"Job#1 inserted {DOCUMENTS} in " in output, output[-4000:]

    collection = client.random.randomData
    # The script inserts only full batches of 5,000; 200,000 is 40 of them.
    assert collection.count_documents({}) == DOCUMENTS
    assert collection.estimated_document_count() == DOCUMENTS
    doc = collection.find_one()
    assert sorted(doc) == ["_id", "created_on", "value"]
    assert isinstance(doc["created_on"], datetime)
    assert 0.0 <= doc["value"] < 1.0
    # minDate..maxDate is 2012 in the shell's local time zone.
    oldest = collection.find_one(sort=[("created_on", 1)])["created_on"]
    newest = collection.find_one(sort=[("created_on", -1)])["created_on"]
    assert datetime(2011, 12, 31) <= oldest <= newest <= datetime(2013, 1, 2)
    client.drop_database("random")
