#!/usr/bin/env python3
"""How many SCRAM logins one server core sustains.

Starts `BIN --auth` on a fresh dbpath, creates a root user through the
localhost exception (Unix socket), then measures over TCP:
- raw logins: a new connection speaking OP_MSG by hand as a modern driver
  logs in (`hello` carrying `speculativeAuthenticate` with the client-first
  message, then one `saslContinue` with the proof), `ping`, close. The
  client's PBKDF2 (15,000 iterations for SCRAM-SHA-256) runs once up front,
  so the client is cheap and the wall rate approaches the server's;
- raw plain connections: `hello` and `ping` without credentials (the same
  connection minus the SASL exchange);
- pymongo logins: a new `MongoClient` per login (its monitor connections and
  its own PBKDF2 included), as an application sees them.
The server's CPU (user + system from /proc/PID/stat) per login, unlike the
logins per wall second, hardly moves when other work shares the machine.

usage: scram_login_rate.py BIN [LOGINS] [MECHANISM]   (run with the venv's python: pymongo)
  e.g. scram_login_rate.py target/release/bisondb 2000 SCRAM-SHA-256
"""
import base64
import hashlib
import hmac
import os
import secrets
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time
import urllib.parse

import bson
from pymongo import MongoClient
from pymongo.errors import PyMongoError


def server_cpu(pid):
    """CPU seconds (user + system) the process used so far."""
    text = open(f"/proc/{pid}/stat").read()
    fields = text[text.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Raw:
    """One connection speaking OP_MSG (a single body section) by hand."""

    def __init__(self, port):
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.request_id = 0

    def command(self, doc):
        self.request_id += 1
        body = b"\x00\x00\x00\x00" + b"\x00" + bson.encode(doc)
        self.sock.sendall(struct.pack("<iiii", 16 + len(body), self.request_id, 0, 2013) + body)
        header = self._read(16)
        length = struct.unpack("<i", header[:4])[0]
        payload = self._read(length - 16)
        reply = bson.decode(payload[5:])
        if reply.get("ok") != 1:
            raise RuntimeError(f"{next(iter(doc))} failed: {reply}")
        return reply

    def _read(self, n):
        buf = bytearray()
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise RuntimeError("server closed the connection")
            buf += chunk
        return bytes(buf)

    def close(self):
        self.sock.close()


HASHES = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-1": hashlib.sha1}


def raw_login(port, user, salted_for, mech):
    """One login as a driver does it: speculative saslStart in hello, then one
    saslContinue with the proof (skipEmptyExchange); then ping and close."""
    digest = HASHES[mech]
    nonce = base64.b64encode(secrets.token_bytes(24)).decode()
    first_bare = f"n={user},r={nonce}"
    conn = Raw(port)
    try:
        hello = conn.command({
            "hello": 1, "$db": "admin", "client": {"driver": {"name": "scram_login_rate", "version": "1"}},
            "speculativeAuthenticate": {"saslStart": 1, "mechanism": mech, "db": "admin",
                                        "payload": bson.Binary(b"n,," + first_bare.encode()),
                                        "options": {"skipEmptyExchange": True}}})
        spec = hello["speculativeAuthenticate"]
        server_first = bytes(spec["payload"]).decode()
        fields = dict(kv.split("=", 1) for kv in server_first.split(","))
        salted = salted_for(base64.b64decode(fields["s"]), int(fields["i"]))
        client_key = hmac.new(salted, b"Client Key", digest).digest()
        stored_key = digest(client_key).digest()
        without_proof = f"c=biws,r={fields['r']}"
        auth_message = f"{first_bare},{server_first},{without_proof}".encode()
        signature = hmac.new(stored_key, auth_message, digest).digest()
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        final = f"{without_proof},p={base64.b64encode(proof).decode()}"
        reply = conn.command({"saslContinue": 1, "conversationId": spec["conversationId"],
                              "payload": bson.Binary(final.encode()), "$db": "admin"})
        server_key = hmac.new(salted, b"Server Key", digest).digest()
        expected = base64.b64encode(hmac.new(server_key, auth_message, digest).digest()).decode()
        if not reply.get("done") or bytes(reply["payload"]).decode() != f"v={expected}":
            raise RuntimeError(f"login not done or server signature wrong: {reply}")
        conn.command({"ping": 1, "$db": "admin"})
    finally:
        conn.close()


def raw_plain(port):
    conn = Raw(port)
    try:
        conn.command({"hello": 1, "$db": "admin", "client": {"driver": {"name": "scram_login_rate", "version": "1"}}})
        conn.command({"ping": 1, "$db": "admin"})
    finally:
        conn.close()


def measure_raw(pid, count, once):
    cpu0, t0 = server_cpu(pid), time.perf_counter()
    for _ in range(count):
        once()
    wall = time.perf_counter() - t0
    return (server_cpu(pid) - cpu0) / count, count / wall


def measure(pid, count, make_client):
    """(server CPU seconds per connection, connections per wall second)."""
    cpu0, t0 = server_cpu(pid), time.perf_counter()
    for _ in range(count):
        with make_client() as client:
            client.admin.command("ping")
    wall = time.perf_counter() - t0
    return (server_cpu(pid) - cpu0) / count, count / wall


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    binary = sys.argv[1]
    logins = int(sys.argv[2]) if len(sys.argv) > 2 else 1000
    mech = sys.argv[3] if len(sys.argv) > 3 else "SCRAM-SHA-256"
    tmp = tempfile.mkdtemp(prefix="bdbscram", dir="/tmp")
    port = 29000 + os.getpid() % 1000
    os.makedirs(f"{tmp}/db")
    server = subprocess.Popen(
        [binary, "--port", str(port), "--bind_ip", "127.0.0.1", "--dbpath", f"{tmp}/db",
         "--unixSocketPrefix", tmp, "--auth", "--logpath", f"{tmp}/server.log"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )
    try:
        sock = urllib.parse.quote_plus(f"{tmp}/bisondb-{port}.sock")
        deadline = time.monotonic() + 20
        while True:
            try:
                with MongoClient(f"mongodb://{sock}/?serverSelectionTimeoutMS=1000") as local:
                    local.admin.command("createUser", "bench", pwd="bench-pw", roles=["root"])
                break
            except PyMongoError:
                if time.monotonic() > deadline or server.poll() is not None:
                    raise
                time.sleep(0.1)
        tcp = f"mongodb://127.0.0.1:{port}/?directConnection=true&serverSelectionTimeoutMS=5000"
        cache = {}

        def salted_for(salt, iterations):
            # The client's PBKDF2, once per (salt, iterations).
            key = (salt, iterations)
            if key not in cache:
                pw = "bench-pw"
                if mech == "SCRAM-SHA-1":
                    pw = hashlib.md5(b"bench:mongo:" + pw.encode()).hexdigest()
                cache[key] = hashlib.pbkdf2_hmac(HASHES[mech]().name, pw.encode(), salt, iterations)
            return cache[key]

        def login():
            raw_login(port, "bench", salted_for, mech)

        def pymongo_login():
            return MongoClient(tcp, username="bench", password="bench-pw", authSource="admin",
                               authMechanism=mech)

        # Warm every path (the user cache, the allocator) before measuring.
        warm = max(20, logins // 20)
        measure_raw(server.pid, warm, login)
        measure_raw(server.pid, warm, lambda: raw_plain(port))
        print(f"{mech} over TCP, server {binary}")
        login_cpu, login_rate = measure_raw(server.pid, logins, login)
        plain_cpu, plain_rate = measure_raw(server.pid, logins, lambda: raw_plain(port))
        print(f"  raw login x{logins}:        {login_cpu * 1e6:7.1f} us server CPU -> "
              f"{1 / login_cpu:6.0f} logins per server CPU-second; {login_rate:6.0f} logins/s wall")
        print(f"  raw plain connection x{logins}: {plain_cpu * 1e6:7.1f} us server CPU -> "
              f"{1 / plain_cpu:6.0f} connections per server CPU-second; {plain_rate:6.0f}/s wall")
        print(f"  the SASL exchange itself:  {(login_cpu - plain_cpu) * 1e6:7.1f} us server CPU per login")
        count = max(20, logins // 10)
        measure(server.pid, 10, pymongo_login)
        py_cpu, py_rate = measure(server.pid, count, pymongo_login)
        print(f"  pymongo MongoClient per login x{count}: {py_cpu * 1e6:7.1f} us server CPU; "
              f"{py_rate:6.1f} logins/s wall (client PBKDF2 and monitor connections included)")
    finally:
        server.terminate()
        try:
            server.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
