#!/usr/bin/env python3
"""Start-up time and idle memory of the server (issue 5's goals: first accepted
TCP connection within 50 ms of starting on an empty dbpath, idle resident memory
at most 30 MB).

Starts BINARY on a fresh temporary dbpath RUNS times, times the first successful
TCP connect to port 27150, reads VmRSS two seconds later, stops the server, and
prints each run and the median.

Usage: startup_rss.py BINARY ENGINE [RUNS]   (ENGINE: lsm or inMemory)
"""
import shutil, socket, statistics, subprocess, sys, tempfile, time
binary, engine = sys.argv[1], sys.argv[2]
times = []
for i in range(int(sys.argv[3]) if len(sys.argv) > 3 else 5):
    d = tempfile.mkdtemp(prefix="su")
    t0 = time.perf_counter()
    p = subprocess.Popen([binary, "--port", "27150", "--dbpath", d, "--storageEngine", engine, "--quiet", "--nounixsocket"])
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", 27150), timeout=0.5); s.close(); break
        except OSError:
            time.sleep(0.0005)
    times.append((time.perf_counter() - t0) * 1000)
    time.sleep(2.0)
    rss = [l for l in open(f"/proc/{p.pid}/status") if l.startswith("VmRSS")][0].split()[1]
    p.terminate()
    p.wait()
    shutil.rmtree(d, ignore_errors=True)
    print(f"{engine}: {times[-1]:.1f} ms, VmRSS {int(rss)/1024:.1f} MiB", flush=True)
print(f"{engine} median {statistics.median(times):.1f} ms")
