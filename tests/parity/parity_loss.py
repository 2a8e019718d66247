#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch half of the loss parity test: for each case parity_loss_run wrote (mse, l1, smooth_l1
at beta 1, 0.3 and 0, bce_logits on {0, 1} and on probability targets), recomputes in PyTorch
1.13, in fp32, with reduction='mean':
- the loss of the predictions against the targets and its gradient w.r.t. the predictions
  (torch.nn.functional's mse_loss, l1_loss, smooth_l1_loss(beta=),
  binary_cross_entropy_with_logits);
- the same loss at the end of the same mlp (Linear 5->6, ReLU, Linear 6->3, ddpc's initial
  weights): the loss and every parameter's gradient.
Tolerance 1e-6 relative: |a - b| <= 1e-6 |b| for a value, ||a - b|| / ||b|| <= 1e-6 for a
gradient tensor. ddpc sums in double and torch in fp32, which differ by ~1e-7 here.

usage: parity_loss.py PARITY_LOSS_RUN_EXE
"""
import json
import struct
import subprocess
import sys
import tempfile

try:
    import numpy as np
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a missing peer is a failure, never a silent skip
    sys.exit(f"parity_loss: PyTorch/numpy are required (python3-torch, python3-numpy): {e}")

TOL = 1e-6
CASES = ["mse", "l1", "smooth_l1", "smooth_l1_beta0.3", "smooth_l1_beta0", "bce_logits",
         "bce_logits_probs"]


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        b, e = info["data_offsets"]
        arr = np.frombuffer(data[8 + n + b:8 + n + e], dtype="<f4").reshape(info["shape"])
        out[name] = torch.from_numpy(arr.copy())
    return out


def loss_fn(case, beta):
    if case == "mse":
        return F.mse_loss
    if case == "l1":
        return F.l1_loss
    if case.startswith("smooth_l1"):
        return lambda p, y: F.smooth_l1_loss(p, y, beta=beta)
    return F.binary_cross_entropy_with_logits


failures = []


def check_value(what, a, b):
    rel = abs(a - b) / max(abs(b), 1e-30)
    ok = rel <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {what}: ddpc {a:.9g} torch {b:.9g} rel {rel:.3g}")
    if not ok:
        failures.append(what)


def check_tensor(what, a, b):
    rel = ((a.double() - b.double()).norm() / max(b.double().norm().item(), 1e-30)).item()
    ok = rel <= TOL
    print(f"{'ok  ' if ok else 'FAIL'} {what}: rel {rel:.3g}")
    if not ok:
        failures.append(what)


def main():
    exe = sys.argv[1]
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, d], check=True)
        for case in CASES:
            t = read_safetensors(f"{d}/{case}.safetensors")
            init = read_safetensors(f"{d}/{case}.init.safetensors")
            beta = float(t["beta"])
            fn = loss_fn(case, beta)
            # The loss on the predictions alone.
            p = t["pred"].clone().requires_grad_(True)
            v = fn(p, t["target"])
            v.backward()
            check_value(f"{case} value", float(t["value"]), v.item())
            check_tensor(f"{case} grad", t["grad"], p.grad)
            # The loss at the end of the mlp.
            params = {k: w.clone().requires_grad_(True) for k, w in init.items()}
            h = F.relu(F.linear(t["x"], params["fc.0.weight"], params["fc.0.bias"]))
            out = F.linear(h, params["fc.1.weight"], params["fc.1.bias"])
            lm = fn(out, t["target"])
            lm.backward()
            check_value(f"{case} mlp loss", float(t["model_loss"]), lm.item())
            for name, w in params.items():
                check_tensor(f"{case} mlp grad {name}", t[f"grad.{name}"], w.grad)
    if failures:
        sys.exit(f"parity_loss: {len(failures)} checks failed: {', '.join(failures)}")
    print("parity_loss: every loss matches PyTorch within 1e-6")


if __name__ == "__main__":
    main()
