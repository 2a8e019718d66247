#!/usr/bin/env python3
"""safetensors interop for tests/test_safetensors.c, parsing by hand with struct + json + numpy
(the `safetensors` package is not installed).

  check FILE  verify a file written by ddpc (tensors w, b, empty, scalar; metadata epoch, note)
  make FILE   write a file for ddpc to read (F32, I64, F16 tensors; unicode metadata; padding)
Exit status 0 on success; any mismatch raises with a message.
"""
import json
import struct
import sys

import numpy as np

DTYPES = {"F32": np.float32, "F16": np.float16, "I64": np.int64, "F64": np.float64,
          "I32": np.int32}


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {})
    buf = raw[8 + n:]
    tensors = {}
    spans = []
    for name, e in header.items():
        b, end = e["data_offsets"]
        dt = np.dtype(DTYPES[e["dtype"]]).newbyteorder("<")
        arr = np.frombuffer(buf[b:end], dtype=dt).reshape(e["shape"])
        tensors[name] = arr
        spans.append((b, end))
    spans.sort()
    at = 0
    for b, end in spans:
        assert b == at, f"gap or overlap at {b} (expected {at})"
        at = end
    assert at == len(buf), f"tensors cover {at} of {len(buf)} bytes"
    return n, tensors, meta, list(header.keys())


def check(path):
    n, t, meta, order = read(path)
    assert (8 + n) % 8 == 0, f"header length {n} leaves the data unaligned"
    assert order == ["w", "b", "empty", "scalar"], order
    np.testing.assert_array_equal(t["w"], np.arange(6, dtype=np.float32).reshape(2, 3) * 0.5)
    np.testing.assert_array_equal(t["b"], -np.arange(3, dtype=np.float32))
    assert t["empty"].shape == (0, 4), t["empty"].shape
    assert t["scalar"].shape == () and t["scalar"][()] == np.float32(3.25), t["scalar"]
    assert meta == {"epoch": "3", "note": 'quote" backslash\\ tab\t é'}, meta
    print("python read ddpc file: ok")


def make(path):
    tensors = [
        ("layer.weight", "F32", np.arange(12, dtype=np.float32).reshape(3, 4) * 0.25),
        ("half", "F16", np.array([1.5, -2.0, 0.25], dtype=np.float16)),
        ("ids", "I64", np.arange(10, 15, dtype=np.int64)),
        ("bias", "F32", np.array([-1.0, 2.5], dtype=np.float32)),
    ]
    header = {"__metadata__": {"format": "pt", "note": "h\u00e9llo \U0001F600"}}
    data = b""
    for name, dtype, arr in tensors:
        b = arr.astype(arr.dtype.newbyteorder("<")).tobytes()
        header[name] = {"dtype": dtype, "shape": list(arr.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header).encode("utf-8")  # ensure_ascii: exercises \\u escapes
    text += b" " * ((8 - (8 + len(text)) % 8) % 8 + 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)
    print("python wrote", path)


if __name__ == "__main__":
    {"check": check, "make": make}[sys.argv[1]](sys.argv[2])
