#!/bin/sh
# Issue 23's two tables, measured by `bisondb bench --client pymongo`:
#   seed 000: one pymongo thread against a multiprocessing.dummy.Pool(8) of
#             insert_one, BisonDB against a peer server, over TCP and over
#             BisonDB's Unix socket (`profile-pool --with-single --compare`);
#   seed 001: 300 documents of 256 KiB inserted and read back, BisonDB's Unix
#             socket against its TCP port, in several sets.
# Each run prints the load average first: on a shared machine throughput
# moves with it, CPU per document much less.
#
# usage: scripts/issue23_tables.sh BISONDB PORT PID SOCKET PEER_URI PEER_PID [SETS] [DOCS]
#   BISONDB   the bisondb binary that runs the bench (any build)
#   PORT PID  the BisonDB server under test: its TCP port and pid
#   SOCKET    its Unix socket file (e.g. /tmp/bisondb-27017.sock)
#   PEER_URI PEER_PID  the server to compare with (e.g. SecantusDB-rs over TCP)
#   SETS      sets of the large-document runs (default 3)
#   DOCS      profile documents per run (default 20000, as the issue)
# Environment: PYTHON (default python3) must have pymongo. CLIENT_CPUS (e.g. 0)
# runs the Python client under `taskset -c CLIENT_CPUS`: on a quiet 2-core
# machine pymongo's eight threads otherwise pass the GIL between the cores and
# double their CPU per insert (docs/PERFORMANCE.md, issue 23, 09:47 UTC).
set -eu
BIN=$1 PORT=$2 PID=$3 SOCK=$4 PEER=$5 PEER_PID=$6 SETS=${7:-3} DOCS=${8:-20000}
PY=${PYTHON:-python3}
HERE=$(dirname "$0")
if [ -n "${CLIENT_CPUS:-}" ]; then
    WRAP=$(mktemp)
    trap 'rm -f "$WRAP"' EXIT
    printf '#!/bin/sh\nexec taskset -c %s %s "$@"\n' "$CLIENT_CPUS" "$PY" > "$WRAP"
    chmod +x "$WRAP"
    PY=$WRAP
fi
TCP="mongodb://127.0.0.1:$PORT"
SOCKURI="mongodb://$(printf %s "$SOCK" | sed 's|/|%2F|g')"
bench() { "$BIN" bench "$@" --client pymongo --python "$PY" --pymongo-script "$HERE/pymongo_bench.py"; }

for uri in "$TCP" "$SOCKURI"; do
    echo "== seed 000, $uri against $PEER; $(uptime)"
    bench profile-pool --with-single --uri "$uri" --server-pid "$PID" \
        --compare "$PEER" --compare-server-pid "$PEER_PID" --docs "$DOCS" --runs 5 --drop
done
for i in $(seq 1 "$SETS"); do
    for w in large-insert large-read; do
        echo "== seed 001, set $i, $w: socket against TCP; $(uptime)"
        bench "$w" --uri "$TCP" --server-pid "$PID" --compare "$SOCKURI" \
            --compare-server-pid "$PID" --docs 300 --runs 5 --drop
    done
done
echo "== end; $(uptime)"
