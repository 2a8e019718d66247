#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Compares two safetensors weight files written by ddpc, tensor by tensor, parsing by hand
(struct + json + numpy).

  weights_close.py A B REL   exit 0 when both files hold the same tensor names and shapes and for
                             every tensor max|a - b| <= REL * max|b| (relative to the tensor's
                             largest magnitude); prints the worst tensor either way
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "BF16": None, "F64": np.float64}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    data = raw[8 + n:]
    out = {}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        lo, hi = t["data_offsets"]
        out[name] = np.frombuffer(data[lo:hi], dtype=DTYPES[t["dtype"]]).reshape(t["shape"])
    return out


def main():
    a, b, rel = read(sys.argv[1]), read(sys.argv[2]), float(sys.argv[3])
    if sorted(a) != sorted(b):
        sys.exit("tensor names differ: %s vs %s" % (sorted(a), sorted(b)))
    worst, worst_name = 0.0, None
    for name in a:
        if a[name].shape != b[name].shape:
            sys.exit("%s: shape %s vs %s" % (name, a[name].shape, b[name].shape))
        x, y = a[name].astype(np.float64), b[name].astype(np.float64)
        scale = np.max(np.abs(y)) if y.size else 0.0
        d = np.max(np.abs(x - y)) / scale if scale > 0 else float(np.max(np.abs(x - y), initial=0))
        if not np.isfinite(d) or d > worst or worst_name is None:
            worst, worst_name = d, name
    print("worst relative difference %.3g in %s (limit %g)" % (worst, worst_name, rel))
    sys.exit(0 if worst <= rel else 1)


main()
