#!/usr/bin/env python3
"""Where a bench load's server CPU goes, thread by thread, per document.

Starts `BIN` as a server on a fresh dbpath, runs one `bisondb bench` load against
its Unix socket, and prints the docs/s the bench reported beside the CPU time each
group of server threads used per document (tokio request workers, fjall's
flush/compaction worker, the journal syncer), the bytes the server wrote and its
resident memory after the load. CPU per document, unlike docs/s, hardly moves
when other work shares the machine, so it tells two builds apart on a busy VM.

usage: server_cpu_per_doc.py BIN DOCS [bench args...]
  e.g. server_cpu_per_doc.py target/release/bisondb 3000000 timeseries-batch --processes 2
Environment: SERVER_ENV="K=V K2=V2" is added to the server's environment.
"""
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time


def thread_cpu(pid):
    """CPU seconds (user + system) per thread name."""
    out = {}
    tick = os.sysconf("SC_CLK_TCK")
    for stat in glob.glob(f"/proc/{pid}/task/*/stat"):
        try:
            text = open(stat).read()
        except OSError:
            continue
        name = text[text.index("(") + 1 : text.rindex(")")]
        fields = text[text.rindex(")") + 2 :].split()
        out[name] = out.get(name, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    binary, docs, bench = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    tmp = tempfile.mkdtemp(prefix="bisondb-cpu-")
    env = dict(os.environ)
    for kv in os.environ.get("SERVER_ENV", "").split():
        k, _, v = kv.partition("=")
        env[k] = v
    port = 28000 + os.getpid() % 1000
    server = subprocess.Popen(
        [binary, "--port", str(port), "--dbpath", f"{tmp}/db", "--unixSocketPrefix", tmp, "--quiet"],
        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    os.makedirs(f"{tmp}/db", exist_ok=True)
    sock = f"{tmp}/bisondb-{port}.sock"
    for _ in range(200):
        if os.path.exists(sock):
            break
        time.sleep(0.05)
    uri = "mongodb://" + sock.replace("/", "%2F")
    try:
        before = thread_cpu(server.pid)
        run = subprocess.run(
            [binary, "bench", *bench, "--uri", uri, "--docs", str(docs), "--json"],
            capture_output=True, text=True, check=True,
        )
        # Let the background worker finish flushing what the load left.
        time.sleep(5)
        after = thread_cpu(server.pid)
        rate = json.loads(run.stdout)["results"][0]["docs_per_sec"]
        per_doc = {
            k: round((after[k] - before.get(k, 0.0)) * 1e6 / docs, 3)
            for k in after
            if after[k] - before.get(k, 0.0) > 0
        }
        io = dict(l.split(":") for l in open(f"/proc/{server.pid}/io").read().splitlines())
        rss = [l for l in open(f"/proc/{server.pid}/status") if l.startswith("VmRSS")][0]
        print(
            f"{rate:,.0f} docs/s; server CPU us/doc {per_doc}; "
            f"written {int(io['write_bytes']) / 1e6:.0f} MB; {rss.split()[1]} kB resident"
        )
    finally:
        server.terminate()
        server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
