#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Checks decoded TensorBoard events (decode_events.py's output on stdin) against metrics.jsonl:
record for record, in order, every numeric value of every record is the scalar of the same tag
at the same step (null is NaN; TensorBoard holds float32 of the full value, metrics.jsonl the value
printed to some digits, so they agree to half a unit of the last printed digit plus float32's
rounding), an evaluation record's tags are "<split>/[<task>/]key",
an event record's "<event>/key", a resume or restart record (at the checkpoint's step S) is a session_log START at S + 1,
a rerun record (a run that continues nothing appending to earlier metrics) a START at its own step,
and every file begins with file_version "brain.Event:2".
usage: compare.py METRICS_JSONL < decoded   Prints "ok N events" or the first difference; exit 1."""
import json
import math
import struct
import sys


def f32(v):
    return struct.unpack("f", struct.pack("f", v))[0]


def tolerance(text):
    """Half a unit of the last digit printed in the JSON number `text`."""
    mant, _, exp = text.lower().partition("e")
    decimals = len(mant.partition(".")[2])
    return 0.5 * 10.0 ** (-decimals + (int(exp) if exp else 0))


class Num:
    def __init__(self, text):
        self.value = float(text)
        self.tol = tolerance(text)


def flatten(obj, prefix=""):
    for k, v in obj.items():
        if isinstance(v, dict):
            yield from flatten(v, prefix + k + "/")
        else:
            yield prefix + k, v


def expected(rec):
    """The event a metrics.jsonl record becomes: ("start", step), ("scalars", step, {...}) or None."""
    step = rec["step"]
    event = rec.get("event")
    if event in ("resume", "restart"):
        return ("start", step + 1)  # TensorBoard drops points at or after START's step
    if event == "rerun":
        return ("start", step)  # none of the earlier run's points stays
    prefix = ""
    if "split" in rec:
        prefix = rec["split"] + "/" + (rec["task"] + "/" if "task" in rec else "")
    elif event:
        prefix = event + "/"
    scalars = {}
    for k, v in flatten(rec):
        if k == "step" or isinstance(v, str):
            continue
        scalars[prefix + k] = v  # a Num, an int, or None
    return ("scalars", step, scalars) if scalars else None


def same(got, want):
    if want is None:
        return math.isnan(got)
    if isinstance(want, int):
        return got == f32(want)
    return abs(got - want.value) <= want.tol + abs(want.value) * 2.0**-23


def main():
    events = [json.loads(line) for line in sys.stdin if line.strip()]
    files = []
    for e in events:
        if "torn" in e:
            sys.exit(f"FAIL {e['file']} is torn")
        if not files or files[-1][0] != e["file"]:
            files.append((e["file"], []))
        files[-1][1].append(e)
    files.sort(key=lambda f: f[1][0]["wall_time"])
    got = []
    for name, evs in files:
        if evs[0].get("version") != "brain.Event:2":
            sys.exit(f"FAIL {name} does not begin with file_version brain.Event:2")
        got.extend(evs[1:])
    want = []
    with open(sys.argv[1]) as f:
        for line in f:
            e = expected(json.loads(line, parse_float=Num))
            if e:
                want.append(e)
    if len(got) != len(want):
        sys.exit(f"FAIL {len(got)} events, {len(want)} expected from {sys.argv[1]}")
    for i, (g, w) in enumerate(zip(got, want)):
        if g["step"] != w[1]:
            sys.exit(f"FAIL event {i}: step {g['step']}, expected {w[1]}")
        if w[0] == "start":
            if not g.get("start"):
                sys.exit(f"FAIL event {i} (step {w[1]}) should be session_log START: {g}")
            continue
        s = g.get("scalars")
        if s is None or sorted(s) != sorted(w[2]):
            sys.exit(f"FAIL event {i} (step {w[1]}): tags {sorted(s or [])} != {sorted(w[2])}")
        for tag, v in w[2].items():
            if not same(s[tag], v):
                shown = v.value if isinstance(v, Num) else v
                sys.exit(f"FAIL event {i} (step {w[1]}) {tag}: {s[tag]} != {shown}")
    starts = sum(1 for w in want if w[0] == "start")
    print(f"ok {len(got)} events ({starts} session_log START) in {len(files)} file(s)")


main()
