#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""resmlp's twin in PyTorch: the same architecture as resmlp_model.c, whose parameter names are
this module's state_dict keys. `resmlp_torch.py WEIGHTS OUT` loads an exported checkpoint
(`ddpc ckpt export DIR WEIGHTS`) with load_state_dict(strict=True), runs it on OUT.x.npy (written
by `resmlp_train --outputs`) and checks its softmax against OUT.probs.npy within 1e-5. The
safetensors file is parsed with struct + json + numpy (the package may not be installed)."""
import json
import struct
import sys

import numpy as np
import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d)

    def forward(self, x):
        return x + self.fc2(torch.relu(self.fc1(x)))


class ResMLP(nn.Module):
    def __init__(self, d, h, c):
        super().__init__()
        self.block = Block(d, h)
        self.head = nn.Linear(d, c)

    def forward(self, x):
        return self.head(self.block(x))


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, e in header.items():
        assert e["dtype"] == "F32", (name, e["dtype"])
        b, end = e["data_offsets"]
        a = np.frombuffer(raw[8 + n + b:8 + n + end], dtype="<f4").reshape(e["shape"])
        out[name] = torch.from_numpy(a.copy())
    return out


def main():
    weights, out = sys.argv[1], sys.argv[2]
    state = read_safetensors(weights)
    h, d = state["block.fc1.weight"].shape
    c = state["head.weight"].shape[0]
    model = ResMLP(d, h, c)
    model.load_state_dict(state, strict=True)
    x = torch.from_numpy(np.load(out + ".x.npy"))
    want = np.load(out + ".probs.npy")
    with torch.no_grad():
        got = torch.softmax(model(x), dim=1).numpy()
    err = float(np.abs(got - want).max())
    print(f"torch ResMLP({d}, {h}, {c}) loaded strict; max |probs difference| {err:.2e}")
    assert err <= 1e-5, err


if __name__ == "__main__":
    main()
