#!/usr/bin/python3
"""PyTorch half of the parity test: replays ddpc's model (gpt or cnn) in PyTorch 1.13 from the
initial weights ddpc saved, on the same batches, and checks that the step-1 gradients of every
tensor and the losses of 10 AdamW steps agree within a relative error of 1e-4.

usage: parity.py PARITY_RUN_EXE gpt|cnn
Tolerance: rel = ||a - b|| / max(||b||, 1e-12) <= 1e-4 per gradient tensor; |la - lb| / |lb| <= 1e-4
per loss. Both sides compute in fp32 with different summation orders, which costs ~1e-6.
"""
import json
import math
import os
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # a missing peer is a failure, never a silent skip
    sys.exit(f"parity: PyTorch/numpy are required (Debian's python3-torch, python3-numpy): {e}")

TOL = 1e-4
STEPS = 10


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", (name, info["dtype"])
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[base + b:base + e], dtype="<f4").reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


class Block(nn.Module):
    def __init__(self, c, nh):
        super().__init__()
        self.nh = nh
        self.ln1 = nn.LayerNorm(c)
        self.attn = nn.ModuleDict({"qkv": nn.Linear(c, 3 * c), "proj": nn.Linear(c, c)})
        self.ln2 = nn.LayerNorm(c)
        self.mlp = nn.ModuleDict({"fc": nn.Linear(c, 4 * c), "proj": nn.Linear(4 * c, c)})

    def attention(self, x):
        b, t, c = x.shape
        q, k, v = self.attn["qkv"](x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        att = (q @ k.transpose(-2, -1)) / math.sqrt(c // self.nh)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(b, t, c)
        return self.attn["proj"](y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.mlp["proj"](F.gelu(self.mlp["fc"](self.ln2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, v, t, c, nh, nl):
        super().__init__()
        self.wte = nn.Embedding(v, c)
        self.wpe = nn.Embedding(t, c)
        self.blocks = nn.ModuleList([Block(c, nh) for _ in range(nl)])
        self.lnf = nn.LayerNorm(c)

    def forward(self, idx):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for blk in self.blocks:
            x = blk(x)
        return self.lnf(x) @ self.wte.weight.t()


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ModuleList([nn.Conv2d(1, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)])
        self.fc = nn.ModuleList([nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)])

    def forward(self, x):
        for conv in self.conv:
            x = F.max_pool2d(F.relu(conv(x)), 2)
        return self.fc[1](F.relu(self.fc[0](x.flatten(1))))


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-12)


def main():
    exe, kind = sys.argv[1], sys.argv[2]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, kind, d], check=True)
        init = read_safetensors(os.path.join(d, "init.safetensors"))
        grads = read_safetensors(os.path.join(d, "grads1.safetensors"))
        batches = read_safetensors(os.path.join(d, "batches.safetensors"))
        with open(os.path.join(d, "losses.txt")) as f:
            ddpc_losses = [float(line) for line in f]
    if kind == "gpt":
        model, batch = GPT(256, 32, 64, 4, 2), 4
    else:
        model, batch = CNN(), 8
    missing = set(model.state_dict()) ^ set(init)
    if missing:
        sys.exit(f"parity: tensor names differ between ddpc and the PyTorch model: {sorted(missing)}")
    model.load_state_dict(init, strict=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    failures = []
    for i in range(STEPS):
        x, y = batches[f"x.{i}"], batches[f"y.{i}"].long()
        if kind == "gpt":
            logits = model(x.long().view(batch, -1))
            loss = F.cross_entropy(logits.reshape(-1, 256), y, ignore_index=-1)
        else:
            loss = F.cross_entropy(model(x.view(batch, 1, 28, 28)), y)
        opt.zero_grad()
        loss.backward()
        if i == 0:
            worst = 0.0
            for name, p in model.named_parameters():
                r = rel(grads[name], p.grad)
                worst = max(worst, r)
                if r > TOL:
                    failures.append(f"gradient of {name}: relative error {r:.3g}")
            print(f"{kind}: worst step-1 gradient relative error {worst:.3g} over {len(grads)} tensors")
        r = abs(ddpc_losses[i] - loss.item()) / abs(loss.item())
        print(f"{kind}: step {i + 1} loss ddpc {ddpc_losses[i]:.7f} torch {loss.item():.7f} rel {r:.2g}")
        if r > TOL:
            failures.append(f"loss at step {i + 1}: relative error {r:.3g}")
        opt.step()
    for f in failures:
        print("FAIL", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
