#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A stranger at a ddpc job's store, for tests/cli_run_store.sh: it knows the protocol but not the
token. Waits (at most 120 s) for the store to listen at 127.0.0.1:PORT, then checks it does not
answer on 127.0.0.2, opens 300 idle connections and 20 half-greetings, forges SETs of
"agent/abort" without a greeting, with the old greeting and with a guessed MAC, pushes 16 MiB
writes after a guessed MAC, then creates RES.ready and keeps forging until STOP exists (at most
200 rounds), holding the idle connections. Writes "name=result" lines to RES.
usage: store_abuser.py PORT RES STOP"""
import os
import socket
import struct
import sys
import time

port, res_path, stop_path = int(sys.argv[1]), sys.argv[2], sys.argv[3]
GREETING = b"DDPCKV2\n"
KEY, FORGED = b"agent/abort", b"forged by a stranger: stop the job"
results = {}


def connect(addr="127.0.0.1"):
    return socket.create_connection((addr, port), timeout=5)


def set_request(key, value):
    return struct.pack("<IIQ", 1, len(key), len(value)) + key + value


def closed(s, seconds=10.0):
    """Whether the server closes s (EOF or reset) within `seconds`, whatever it sent first."""
    end = time.time() + seconds
    try:
        while time.time() < end:
            s.settimeout(max(0.01, end - time.time()))
            if not s.recv(65536):
                return True
    except (ConnectionResetError, BrokenPipeError):
        return True
    except socket.timeout:
        return False
    return False


def forge(kind):
    s = connect()
    try:
        if kind == "forged_v1":
            s.sendall(b"DDPCKV1\n")
        elif kind in ("forged_mac", "big_writes"):
            s.sendall(GREETING + os.urandom(32))
            challenge = b""
            while len(challenge) < 72:
                part = s.recv(72 - len(challenge))
                if not part:
                    return "closed-before-challenge"
                challenge += part
            s.sendall(os.urandom(32))  # a guessed proof
        if kind == "big_writes":
            block = os.urandom(1 << 20)
            for _ in range(6 * 16):  # 6 SETs of 16 MiB
                s.sendall(block)
            return "open"
        s.sendall(set_request(KEY, FORGED))
        return "closed" if closed(s) else "open"
    except (ConnectionResetError, BrokenPipeError):
        return "closed"
    finally:
        s.close()




def listening():
    """Whether something listens on 127.0.0.1:PORT, read from /proc/net/tcp: probing by connect
    could connect the probe to itself (its ephemeral port may be PORT) and take the port."""
    want = "0100007F:%04X" % port
    with open("/proc/net/tcp") as f:
        rows = [line.split() for line in f.readlines()[1:]]
    return any(r[1] == want and r[3] == "0A" for r in rows)


deadline = time.time() + 120
while not listening():
    if time.time() > deadline:
        sys.exit("the store never opened")
    time.sleep(0.02)

try:
    socket.create_connection(("127.0.0.2", port), timeout=2).close()
    results["bind"] = "open"
except OSError:
    results["bind"] = "refused"
held = []
for _ in range(300):
    held.append(connect())
results["idle"] = len(held)
loris = 0
for _ in range(20):
    s = connect()
    s.sendall(GREETING[:5])
    held.append(s)
    loris += 1
results["loris"] = loris
for kind in ("forged_raw", "forged_v1", "forged_mac", "big_writes"):
    results[kind] = forge(kind)
open(res_path + ".ready", "w").close()  # the test starts node 1 now: the job runs beside us
for _ in range(200):
    if os.path.exists(stop_path):
        break
    try:
        if forge("forged_mac") != "closed":
            results["forged_mac"] = "open"
    except OSError:
        break  # the job ended and its store with it
    time.sleep(0.05)
for s in held:
    s.close()
with open(res_path, "w") as f:
    for k, v in results.items():
        f.write(f"{k}={v}\n")
