#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""safetensors interop for tests/test_safetensors.c and tests/test_train_checkpoint.c, parsing by
hand with struct + json + numpy (the `safetensors` package is not installed).

  check FILE     verify a file written by ddpc (tensors w, b, empty, scalar; metadata epoch, note)
  make FILE      write a file for ddpc to read (F32, I64, F16 tensors; unicode metadata; padding)
  ckpt DIR OUT   check a ddpc checkpoint directory (state.json checksums, sizes), load its
                 model.safetensors into an equivalent torch mlp (strict load_state_dict) and its
                 optimizer.safetensors into torch.optim.AdamW's state, then write the module's
                 state_dict and the optimizer state ("<param>.<state>") back to OUT for ddpc to
                 compare bit for bit (without torch: the numpy arrays themselves)
Exit status 0 on success; any mismatch raises with a message.
"""
import json
import os
import struct
import sys
import zlib

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


def write(path, named, meta):
    header = {"__metadata__": meta}
    data = b""
    for name, arr in named:
        b = np.ascontiguousarray(arr, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(arr.shape),
                        "data_offsets": [len(data), len(data) + len(b)]}
        data += b
    text = json.dumps(header).encode("utf-8")
    text += b" " * ((8 - (8 + len(text)) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def check_state(d):
    raw = open(os.path.join(d, "state.json"), "rb").read()
    key = b'"state_crc32": "'
    at = raw.rindex(key) + len(key)
    zeroed = raw[:at] + b"00000000" + raw[at + 8:]
    assert "%08x" % zlib.crc32(zeroed) == raw[at:at + 8].decode(), "state.json self checksum"
    state = json.loads(raw)
    assert state["format"] == "ddpc-checkpoint" and state["format_version"] == 1, state
    for name, f in state["files"].items():
        data = open(os.path.join(d, name), "rb").read()
        assert len(data) == f["bytes"], (name, len(data), f["bytes"])
        assert zlib.crc32(data) == f["crc32"], name
    return state


def ckpt(d, out):
    state = check_state(d)
    _, params, meta, order = read(os.path.join(d, "model.safetensors"))
    assert meta["format"] == "pt" and meta["model"] == state["model"]["type"], meta
    _, opt, ometa, _ = read(os.path.join(d, "optimizer.safetensors"))
    assert ometa["optimizer"] == state["optimizer"]["type"] == "adamw", ometa
    assert int(ometa["step_count"]) == state["optimizer"]["step_count"], ometa
    states = ("exp_avg", "exp_avg_sq")
    assert sorted(opt) == sorted(f"{p}.{s}" for s in states for p in order), sorted(opt)
    for p in order:
        for s in states:
            assert opt[f"{p}.{s}"].shape == params[p].shape, (p, s)
    try:
        import torch
    except ImportError:
        print("torch not installed: checked with numpy only")
        write(out, [(p, params[p]) for p in order] +
              [(f"{p}.{s}", opt[f"{p}.{s}"]) for s in states for p in order], {"format": "pt"})
        return
    # An mlp whose fc.<i> are Linear(in, out): the names ddpc gives its layers.
    layers = sorted({int(p.split(".")[1]) for p in order})
    model = torch.nn.Module()
    model.fc = torch.nn.ModuleList(
        torch.nn.Linear(params[f"fc.{i}.weight"].shape[1], params[f"fc.{i}.weight"].shape[0])
        for i in layers)
    model.load_state_dict({p: torch.from_numpy(params[p].copy()) for p in order}, strict=True)
    optim = torch.optim.AdamW(model.parameters())
    named = dict(model.named_parameters())
    for p in order:
        optim.state[named[p]] = {"step": torch.tensor(float(ometa["step_count"])),
                                 **{s: torch.from_numpy(opt[f"{p}.{s}"].copy()) for s in states}}
    sd = model.state_dict()
    write(out, [(p, sd[p].numpy()) for p in order] +
          [(f"{p}.{s}", optim.state[named[p]][s].numpy()) for s in states for p in order],
          {"format": "pt"})
    print("torch loaded the checkpoint:", len(order), "parameters, step",
          ometa["step_count"])


if __name__ == "__main__":
    {"check": check, "make": make, "ckpt": ckpt}[sys.argv[1]](*sys.argv[2:])
