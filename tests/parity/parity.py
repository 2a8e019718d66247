#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch half of the parity test: replays ddpc's model (gpt or cnn) in PyTorch 1.13 from the
initial weights ddpc saved, on the same batches, and compares step 1's output probabilities and
gradients and the losses of every AdamW step.

usage: parity.py PARITY_RUN_EXE gpt|cnn|cnn_bn [fp32|bf16|fp16]
cnn_bn (fp32): the cnn with BatchNorm2d (training mode: batch statistics) after each convolution;
also the running statistics after the last step and an evaluation-mode forward with them, each
within 1e-4 relative.
fp32, 10 steps: rel = ||a - b|| / max(||b||, 1e-12) <= 1e-4 per gradient tensor and for the
probabilities; |la - lb| / |lb| <= 1e-4 per loss. Both sides compute in fp32 with different
summation orders, which costs ~1e-6.
bf16, 20 steps: PyTorch replays the run twice, in fp32 and under
torch.autocast("cpu", dtype=torch.bfloat16). Both round the products' inputs to bf16, but autocast
also stores every product's OUTPUT (and the gradients flowing back through it) in bf16, where ddpc
keeps them fp32; autocast's own distance from the fp32 run is therefore the format's noise, and
ddpc's loss must be within 1e-2 relative of autocast's plus that noise at every step, and within
1e-2 of the fp32 run. Step 1: the output probabilities within 2e-2 of autocast's (bf16 keeps 8
bits, 2^-8 = 4e-3 per rounding); every gradient at least as close to the fp32 gradient as
autocast's is (and not equal to it: the rounding happened).
bf16 and fp16, 20 steps: PyTorch also replays ddpc's rule written out (class Rounded: each
product rounds its inputs, and in backward the incoming gradient, to the format, multiplies in fp32;
CPU autocast in 1.13 has no fp16 at all). The two then differ only by fp32 summation order and the
roundings it flips: losses within 1e-4 relative at every step, step-1 probabilities within 1e-3,
every gradient within 1e-2, and ddpc's worst gradient closer to this reference than to the fp32 run.
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

STEPS = {"fp32": 10, "bf16": 20, "fp16": 20}
TOL_FP32 = 1e-4
TOL_BF16_LOSS, TOL_BF16_PROBS = 1e-2, 2e-2
TOL_ROUNDED_LOSS, TOL_ROUNDED_PROBS, TOL_ROUNDED_GRAD = 1e-4, 1e-3, 1e-2
DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16}


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


class Plain:
    """The models' matrix products as PyTorch computes them (in fp32, or under autocast)."""

    @staticmethod
    def linear(layer, x):
        return layer(x)

    @staticmethod
    def conv(layer, x):
        return layer(x)

    @staticmethod
    def mm(a, b):
        return a @ b


class _Round(torch.autograd.Function):
    """Forward: round to dt and widen back to fp32. Backward: the gradient passes unchanged (ddpc
    rounds a product's inputs, not the gradients flowing out of the product)."""

    @staticmethod
    def forward(ctx, x, dt):
        return x.to(dt).float()

    @staticmethod
    def backward(ctx, g):
        return g, None


class _RoundGrad(torch.autograd.Function):
    """Forward: identity. Backward: the incoming gradient rounded to dt, as ddpc's backward
    products round dy."""

    @staticmethod
    def forward(ctx, x, dt):
        ctx.dt = dt
        return x.view_as(x)

    @staticmethod
    def backward(ctx, g):
        return g.to(ctx.dt).float(), None


class Rounded:
    """ddpc's rule written out in PyTorch, an independent implementation of the same numerics:
    each product rounds its inputs (and, in backward, the incoming gradient) to dt, multiplies in
    fp32 and returns fp32; biases are added in fp32."""

    def __init__(self, dt):
        self.dt = dt

    def _r(self, x):
        return _Round.apply(x, self.dt)

    def _g(self, y):
        return _RoundGrad.apply(y, self.dt)

    def linear(self, layer, x):
        y = self._g(F.linear(self._r(x), self._r(layer.weight)))
        return y + layer.bias

    def conv(self, layer, x):
        y = self._g(F.conv2d(self._r(x), self._r(layer.weight), None, layer.stride, layer.padding))
        return y + layer.bias.view(1, -1, 1, 1)

    def mm(self, a, b):
        return self._g(self._r(a) @ self._r(b))


PRODUCTS = Plain()  # replay() sets it


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
        q, k, v = PRODUCTS.linear(self.attn["qkv"], x).split(c, dim=2)
        q, k, v = (z.view(b, t, self.nh, c // self.nh).transpose(1, 2) for z in (q, k, v))
        att = PRODUCTS.mm(q, k.transpose(-2, -1)) / math.sqrt(c // self.nh)
        mask = torch.tril(torch.ones(t, t, dtype=torch.bool))
        att = att.masked_fill(~mask, float("-inf")).softmax(dim=-1)
        y = PRODUCTS.mm(att, v).transpose(1, 2).contiguous().view(b, t, c)
        return PRODUCTS.linear(self.attn["proj"], y)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        h = F.gelu(PRODUCTS.linear(self.mlp["fc"], self.ln2(x)), approximate="tanh")
        return x + PRODUCTS.linear(self.mlp["proj"], h)


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
        return PRODUCTS.mm(self.lnf(x), self.wte.weight.t())


class CNN(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.ModuleList([nn.Conv2d(1, 32, 3, padding=1), nn.Conv2d(32, 64, 3, padding=1)])
        self.fc = nn.ModuleList([nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)])

    def forward(self, x):
        for conv in self.conv:
            x = F.max_pool2d(F.relu(PRODUCTS.conv(conv, x)), 2)
        h = F.relu(PRODUCTS.linear(self.fc[0], x.flatten(1)))
        return PRODUCTS.linear(self.fc[1], h)


class CNNBN(nn.Module):
    """conv -> BatchNorm2d -> ReLU -> pool twice, as torch users write it (convs without bias)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.ModuleList([nn.Conv2d(1, 32, 3, padding=1, bias=False),
                                   nn.Conv2d(32, 64, 3, padding=1, bias=False)])
        self.bn = nn.ModuleList([nn.BatchNorm2d(32), nn.BatchNorm2d(64)])
        self.fc = nn.ModuleList([nn.Linear(64 * 7 * 7, 128), nn.Linear(128, 10)])

    def forward(self, x):
        for conv, bn in zip(self.conv, self.bn):
            x = F.max_pool2d(F.relu(bn(PRODUCTS.conv(conv, x))), 2)
        h = F.relu(PRODUCTS.linear(self.fc[0], x.flatten(1)))
        return PRODUCTS.linear(self.fc[1], h)


def rel(a, b):
    return (a - b).norm().item() / max(b.norm().item(), 1e-12)


def replay(kind, init, batches, steps, autocast, products=Plain()):
    """PyTorch's run: step-1 probabilities and gradients, and the loss of every AdamW step."""
    global PRODUCTS
    PRODUCTS = products
    if kind == "gpt":
        model, batch = GPT(256, 32, 64, 4, 2), 4
    elif kind == "cnn_bn":
        model, batch = CNNBN(), 8
        # ddpc keeps no num_batches_tracked (only momentum=None would read it): start it at 0.
        init = dict(init, **{f"bn.{i}.num_batches_tracked": torch.tensor(0) for i in range(2)})
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
    losses, probs, grads = [], None, None
    for i in range(steps):
        x, y = batches[f"x.{i}"], batches[f"y.{i}"].long()
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            if kind == "gpt":
                logits = model(x.long().view(batch, -1)).reshape(-1, 256)
            else:
                logits = model(x.view(batch, 1, 28, 28))
        logits = logits.float()  # the loss outside autocast, in fp32, as its recipe says
        loss = F.cross_entropy(logits, y, ignore_index=-1)
        opt.zero_grad()
        loss.backward()
        if i == 0:
            probs = logits.detach().softmax(dim=-1)
            grads = {n: p.grad.clone() for n, p in model.named_parameters()}
        losses.append(loss.item())
        opt.step()
    if kind == "cnn_bn":
        model.eval()
        with torch.no_grad():
            replay.eval_probs = model(batches["x.0"].view(batch, 1, 28, 28)).softmax(dim=-1)
        replay.buffers = {n: b.clone() for n, b in model.named_buffers() if "running" in n}
    return probs, grads, losses


def check_fp32(kind, probs, grads, losses, ref):
    failures = []
    r = rel(probs, ref[0])
    print(f"{kind}: step-1 output probabilities relative error {r:.3g}")
    if r > TOL_FP32:
        failures.append(f"step-1 probabilities: relative error {r:.3g}")
    worst = 0.0
    for name, g in ref[1].items():
        r = rel(grads[name], g)
        worst = max(worst, r)
        if r > TOL_FP32:
            failures.append(f"gradient of {name}: relative error {r:.3g}")
    print(f"{kind}: worst step-1 gradient relative error {worst:.3g} over {len(grads)} tensors")
    failures += compare_losses(kind, losses, ref[2], "torch", TOL_FP32, "")
    return failures


def compare_losses(label, losses, ref, ref_name, tol, suffix):
    """Prints ddpc's loss of every step next to the reference's; the failures above tol."""
    failures = []
    for i, (a, b) in enumerate(zip(losses, ref)):
        r = abs(a - b) / abs(b)
        print(f"{label}: step {i + 1} loss ddpc {a:.7f} {ref_name} {b:.7f} rel {r:.2g}")
        if r > tol:
            failures.append(f"loss at step {i + 1}: relative error {r:.3g}{suffix}")
    return failures


def check_bf16(kind, probs, grads, losses, amp, f32):
    failures = []
    r = rel(probs, amp[0])
    print(f"{kind} bf16: step-1 output probabilities, relative error to autocast {r:.3g}")
    if r > TOL_BF16_PROBS:
        failures.append(f"step-1 probabilities: relative error {r:.3g} to autocast's")
    for name, g in f32[1].items():
        ours, theirs = rel(grads[name], g), rel(amp[1][name], g)
        print(f"{kind} bf16: gradient of {name}: distance to fp32 ddpc {ours:.3g}, autocast {theirs:.3g}")
        if ours > theirs or ours < 1e-6:
            failures.append(f"gradient of {name}: distance to the fp32 gradient {ours:.3g} "
                            f"(autocast's {theirs:.3g})")
    for i, (a, b, c) in enumerate(zip(losses, amp[2], f32[2])):
        r_amp, r_f32, noise = abs(a - b) / abs(b), abs(a - c) / abs(c), abs(b - c) / abs(c)
        print(f"{kind} bf16: step {i + 1} loss ddpc {a:.7f} autocast {b:.7f} fp32 {c:.7f}: "
              f"rel to autocast {r_amp:.2g} (autocast's own distance to fp32 {noise:.2g}), "
              f"to fp32 {r_f32:.2g}")
        if r_amp > TOL_BF16_LOSS + noise or r_f32 > TOL_BF16_LOSS:
            failures.append(f"loss at step {i + 1}: relative error {r_amp:.3g} to autocast, "
                            f"{r_f32:.3g} to fp32")
    return failures


def check_rounded(kind, precision, probs, grads, losses, rnd, f32):
    failures = []
    r, r32 = rel(probs, rnd[0]), rel(probs, f32[0])
    print(f"{kind} {precision}: step-1 probabilities, relative error to the rounded reference "
          f"{r:.3g} (to fp32 {r32:.3g})")
    if r > TOL_ROUNDED_PROBS:
        failures.append(f"step-1 probabilities: relative error {r:.3g} to the rounded reference")
    worst = worst32 = 0.0
    for name, g in rnd[1].items():
        r, r32 = rel(grads[name], g), rel(grads[name], f32[1][name])
        worst, worst32 = max(worst, r), max(worst32, r32)
        if r > TOL_ROUNDED_GRAD:
            failures.append(f"gradient of {name}: relative error {r:.3g} to the rounded reference")
    print(f"{kind} {precision}: worst step-1 gradient relative error to the rounded reference "
          f"{worst:.3g}, to fp32 {worst32:.3g}")
    if not worst < worst32:
        failures.append(f"gradients are not closer to the rounded reference ({worst:.3g}) than to "
                        f"fp32 ({worst32:.3g})")
    failures += compare_losses(f"{kind} {precision}", losses, rnd[2], "rounded reference",
                               TOL_ROUNDED_LOSS, " to the rounded reference")
    return failures


def check_buffers(final, probs_eval):
    """BatchNorm's running statistics after the run and an evaluation-mode forward with them."""
    failures = []
    for name, ref in replay.buffers.items():
        r = rel(final[name], ref)
        print(f"cnn_bn: {name} after the last step, relative error {r:.3g}")
        if r > TOL_FP32:
            failures.append(f"{name}: relative error {r:.3g}")
    r = rel(probs_eval, replay.eval_probs)
    print(f"cnn_bn: evaluation-mode probabilities relative error {r:.3g}")
    if r > TOL_FP32:
        failures.append(f"evaluation-mode probabilities: relative error {r:.3g}")
    return failures


def main():
    exe, kind = sys.argv[1], sys.argv[2]
    precision = sys.argv[3] if len(sys.argv) > 3 else "fp32"
    steps = STEPS[precision]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, kind, d, precision, str(steps)], check=True)
        init = read_safetensors(os.path.join(d, "init.safetensors"))
        grads = read_safetensors(os.path.join(d, "grads1.safetensors"))
        probs = read_safetensors(os.path.join(d, "probs1.safetensors"))["probs"]
        batches = read_safetensors(os.path.join(d, "batches.safetensors"))
        with open(os.path.join(d, "losses.txt")) as f:
            losses = [float(line) for line in f]
        if kind == "cnn_bn":
            final = read_safetensors(os.path.join(d, "final.safetensors"))
            probs_eval = read_safetensors(os.path.join(d, "probs_eval.safetensors"))["probs"]
    f32 = replay(kind, init, batches, steps, autocast=False)
    if precision == "fp32":
        failures = check_fp32(kind, probs, grads, losses, f32)
    else:
        rnd = replay(kind, init, batches, steps, autocast=False, products=Rounded(DTYPES[precision]))
        failures = check_rounded(kind, precision, probs, grads, losses, rnd, f32)
    if precision == "bf16":
        amp = replay(kind, init, batches, steps, autocast=True)
        failures += check_bf16(kind, probs, grads, losses, amp, f32)
    if kind == "cnn_bn":
        failures += check_buffers(final, probs_eval)
    for f in failures:
        print("FAIL", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
