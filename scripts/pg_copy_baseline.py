"""The `COPY` baseline of issue 18's batch-load goal: seed 003's documents ({_id,
created_on, value}, as BSON) loaded with psycopg's binary COPY into a table
(k bytea PRIMARY KEY, v bytea) keyed by the ObjectId, one batch of BATCH documents a
transaction; the documents are made before the clock starts. Prints docs/s.
Usage: pg_copy_baseline.py DSN DOCS [BATCH]   (needs psycopg 3 and pymongo's bson)"""
import sys, time, random, datetime
import psycopg, bson
from bson import ObjectId

dsn, docs = sys.argv[1], int(sys.argv[2])
batch = int(sys.argv[3]) if len(sys.argv) > 3 else 5000
start = datetime.datetime(2012, 1, 1, tzinfo=datetime.timezone.utc)
rows = []
for i in range(docs):
    oid = ObjectId()
    d = {"_id": oid, "created_on": start + datetime.timedelta(seconds=i * 3),
         "value": random.random() * 100}
    rows.append((oid.binary, bson.encode(d)))
with psycopg.connect(dsn) as conn:
    conn.execute("DROP TABLE IF EXISTS copy_kv")
    conn.execute("CREATE TABLE copy_kv (k BYTEA PRIMARY KEY, v BYTEA)")
    conn.commit()
    t0 = time.perf_counter()
    for s in range(0, docs, batch):
        with conn.cursor() as cur:
            with cur.copy("COPY copy_kv (k, v) FROM STDIN (FORMAT BINARY)") as cp:
                cp.set_types(["bytea", "bytea"])
                for r in rows[s:s + batch]:
                    cp.write_row(r)
        conn.commit()
    dt = time.perf_counter() - t0
    print(f"copy {docs} docs in {dt:.3f}s: {docs/dt:.0f} docs/s")
    conn.execute("DROP TABLE copy_kv")
    conn.commit()
