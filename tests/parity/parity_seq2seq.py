#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch half of the seq2seq parity test: torch.nn.Transformer (batch_first, post-LN, ReLU,
dropout 0) with ddpc's embeddings (scaled by sqrt(d_model), plus sinusoidal positions) and output
projection, loaded with the initial weights ddpc saved (ddpc's names are the state_dict's, the
Transformer's under "transformer."), replays ddpc's AdamW steps on the same padded batches with
src/tgt/memory key padding masks, the causal target mask and
CrossEntropyLoss(ignore_index=0, label_smoothing=0.1).

usage: parity_seq2seq.py PARITY_SEQ2SEQ_RUN_EXE [fp32|bf16]
fp32, 5 steps: rel = ||a - b|| / max(||b||, 1e-12) <= 1e-4 for step 1's output probabilities
(softmax of the logits, every position, pads included) and for every gradient tensor;
|la - lb| / |lb| <= 1e-4 for the loss of every step. Both sides compute in fp32 with different
summation orders (~1e-6).
bf16, 5 steps: PyTorch replays under torch.autocast("cpu", dtype=torch.bfloat16) and in fp32.
Autocast also stores products' outputs in bf16 where ddpc keeps fp32, so its distance to the fp32
run is the format's noise: ddpc's losses must be within 1e-2 relative of autocast's plus that
noise and within 1e-2 of the fp32 run; step-1 probabilities within 2e-2 of autocast's; every
gradient within 1e-1 of the fp32 gradient and not equal to it (the rounding happened), and the
worst gradient's distance to fp32 no larger than autocast's worst (per tensor the two round
different things: autocast also the products' outputs, ddpc also the incoming gradients).
"""
import os
import subprocess
import sys
import tempfile

try:
    import torch
    import torch.nn.functional as F
except ImportError as e:  # a missing peer is a failure, never a silent skip
    sys.exit(f"parity: PyTorch/numpy are required (Debian's python3-torch, python3-numpy): {e}")

STEPS = 5
C, H, LAYERS, FF, VS, VT, SMOOTHING = 32, 4, 2, 64, 23, 19, 0.1
TOL_FP32 = 1e-4
TOL_BF16_LOSS, TOL_BF16_PROBS, TOL_BF16_GRAD = 1e-2, 2e-2, 1e-1

# The file reader, the relative error and the loss comparison of the cnn/gpt parity test; the
# model is the step benchmark's peer (bench/torch_step.py), at this test's sizes.
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "..", "bench"))
from parity import compare_losses, read_safetensors, rel  # noqa: E402
from torch_step import Seq2Seq as PeerSeq2Seq  # noqa: E402

MAX_LEN = 64  # at least the batches' widths (parity_seq2seq_run.c's)


def Seq2Seq():
    return PeerSeq2Seq(C, H, LAYERS, FF, VS, VT, MAX_LEN)


def torch_name(ddpc_name):
    return "transformer." + ddpc_name if ddpc_name.startswith(("encoder.", "decoder.")) else ddpc_name


def replay(init, batches, autocast):
    """PyTorch's run: step-1 probabilities and gradients (by ddpc name), every step's loss."""
    model = Seq2Seq()
    state = {torch_name(k): v for k, v in init.items()}
    missing = set(model.state_dict()) ^ set(state)
    if missing:
        sys.exit(f"parity: tensor names differ between ddpc and torch: {sorted(missing)}")
    model.load_state_dict(state, strict=True)
    decay = [p for n, p in model.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in model.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3)
    losses, probs, grads = [], None, None
    for i in range(STEPS):
        src, tok, tgt = (batches[f"{w}.{i}"].long() for w in ("src", "tok", "tgt"))
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            logits = model(src, tok)
        logits = logits.float().reshape(-1, VT)
        loss = F.cross_entropy(logits, tgt.reshape(-1), ignore_index=0, label_smoothing=SMOOTHING)
        opt.zero_grad()
        loss.backward()
        if i == 0:
            probs = logits.detach().softmax(dim=-1)
            byname = dict(model.named_parameters())
            grads = {k: byname[torch_name(k)].grad.clone() for k in init}
        losses.append(loss.item())
        opt.step()
    return probs, grads, losses


def check_fp32(probs, grads, losses, ref):
    failures = []
    r = rel(probs, ref[0])
    print(f"seq2seq: step-1 output probabilities relative error {r:.3g}")
    if r > TOL_FP32:
        failures.append(f"step-1 probabilities: relative error {r:.3g}")
    worst, worst_name = 0.0, ""
    for name, g in ref[1].items():
        r = rel(grads[name], g)
        if r > worst:
            worst, worst_name = r, name
        if r > TOL_FP32:
            failures.append(f"gradient of {name}: relative error {r:.3g}")
    print(f"seq2seq: worst step-1 gradient relative error {worst:.3g} ({worst_name}) over "
          f"{len(grads)} tensors")
    failures += compare_losses("seq2seq", losses, ref[2], "torch", TOL_FP32, "")
    return failures


def check_bf16(probs, grads, losses, amp, f32):
    failures = []
    r = rel(probs, amp[0])
    print(f"seq2seq bf16: step-1 probabilities, relative error to autocast {r:.3g}")
    if r > TOL_BF16_PROBS:
        failures.append(f"step-1 probabilities: relative error {r:.3g} to autocast's")
    worst, worst_amp = 0.0, 0.0
    for name, g in f32[1].items():
        ours, theirs = rel(grads[name], g), rel(amp[1][name], g)
        worst, worst_amp = max(worst, ours), max(worst_amp, theirs)
        if ours > TOL_BF16_GRAD or ours < 1e-6:
            failures.append(f"gradient of {name}: distance to the fp32 gradient {ours:.3g} "
                            f"(autocast's {theirs:.3g})")
    print(f"seq2seq bf16: worst gradient distance to fp32 {worst:.3g} (autocast's {worst_amp:.3g})")
    if worst > worst_amp:
        failures.append(f"worst gradient distance to fp32 {worst:.3g} exceeds autocast's "
                        f"{worst_amp:.3g}")
    for i, (a, b, c) in enumerate(zip(losses, amp[2], f32[2])):
        r_amp, r_f32, noise = abs(a - b) / abs(b), abs(a - c) / abs(c), abs(b - c) / abs(c)
        print(f"seq2seq bf16: step {i + 1} loss ddpc {a:.7f} autocast {b:.7f} fp32 {c:.7f}: "
              f"rel to autocast {r_amp:.2g} (autocast to fp32 {noise:.2g}), to fp32 {r_f32:.2g}")
        if r_amp > TOL_BF16_LOSS + noise or r_f32 > TOL_BF16_LOSS:
            failures.append(f"loss at step {i + 1}: relative error {r_amp:.3g} to autocast, "
                            f"{r_f32:.3g} to fp32")
    return failures


def main():
    exe = sys.argv[1]
    precision = sys.argv[2] if len(sys.argv) > 2 else "fp32"
    torch.set_num_threads(1)
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([exe, d, precision, str(STEPS)], check=True)
        init = read_safetensors(os.path.join(d, "init.safetensors"))
        grads = read_safetensors(os.path.join(d, "grads1.safetensors"))
        probs = read_safetensors(os.path.join(d, "probs1.safetensors"))["probs"]
        batches = read_safetensors(os.path.join(d, "batches.safetensors"))
        with open(os.path.join(d, "losses.txt")) as f:
            losses = [float(line) for line in f]
    f32 = replay(init, batches, autocast=False)
    if precision == "fp32":
        failures = check_fp32(probs, grads, losses, f32)
    else:
        failures = check_bf16(probs, grads, losses, replay(init, batches, autocast=True), f32)
    for f in failures:
        print("FAIL", f)
    print(f"{0 if failures else 1} passed, {1 if failures else 0} failed")
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
