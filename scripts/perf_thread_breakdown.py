#!/usr/bin/env python3
"""Splits one thread group's samples of a `perf script` dump by insert-path stage.

Each sample of the threads named COMM (e.g. `tokio-rt-worker`, the threads that
run commands) is charged to the first stage, in the order below, whose function
appears anywhere in its call stack; the rest are listed by their leaf frame.
Record with call graphs so the stacks are whole, for example:

    perf record -F 199 --call-graph dwarf,16384 -o perf.data -p PID -- sleep 20
    perf script -i perf.data | scripts/perf_thread_breakdown.py tokio-rt-worker

usage: perf_thread_breakdown.py COMM < perf-script-output
"""
import collections
import sys

# (stage, a function name in the stack), first match wins.
STAGES = [
    ("memtable inserts (fjall skiplist)", "Memtable::insert"),
    ("journal write", "journal::writer"),
    ("rest of fjall's batch commit", "WriteBatch::commit"),
    ("sorting the batch by key", "sorted_last_op_per_key"),
    ("building stored keys", "stored_key"),
    ("rest of the lsm commit (fjall batch items)", "lsm::Shared::commit"),
    ("index entries and unique checks", "index_writes"),
    ("document key and _id checks", "prepare_insert"),
    ("rest of Collection::insert_locked", "insert_locked"),
    ("rest of the insert command", "Insert::execute"),
    ("_id and size checks of the command", "prepare_for_insert"),
    ("wire protocol", "bisondb_wire"),
]


def main():
    comm = sys.argv[1]
    counts = collections.Counter()
    total = 0
    thread, stack = None, []

    def charge():
        nonlocal total
        if thread != comm:
            return
        total += 1
        frames = "\n".join(stack)
        for stage, marker in STAGES:
            if marker in frames:
                counts[stage] += 1
                return
        leaf = stack[0].split(None, 1)[1] if stack and " " in stack[0] else "?"
        counts["other: " + leaf[:60]] += 1

    for line in sys.stdin:
        if not line.strip():
            charge()
            thread, stack = None, []
        elif not line.startswith((" ", "\t")):
            thread, stack = line.split()[0], []
        else:
            stack.append(line.strip())
    charge()
    for stage, n in counts.most_common(25):
        print(f"{100 * n / max(total, 1):6.2f}%  {stage}")
    print(f"{total} samples of {comm}")


if __name__ == "__main__":
    main()
