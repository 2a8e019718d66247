#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""PyTorch peer for ddpc's GPU benchmark: GPT-2 124M (12 layers, 12 heads, 768 wide, T 1024,
vocabulary 50257, tied embeddings, tanh GELU, LayerNorm) trained as nanoGPT trains it: bf16
autocast, F.scaled_dot_product_attention(is_causal=True), fused AdamW (lr 6e-4, betas 0.9/0.95,
weight decay 0.1 on matrices only), gradient clipping at 1.0, batch 16, TF32 allowed. Modes:
`eager`, and `compile` (torch.compile of the model). Batches come in order from an llm.c token
shard (256 x int32 header, then uint16 ids), the same shard ddpc and llm.c read.

Times warm-up steps, then timed steps with CUDA events (median), and prints ONE JSON line:
{"name", "mode", "tokens_per_s", "ms_per_step", "mfu", "peak_tflops", "flops_per_token", ...}.
MFU counts model FLOPs as llm.c's gpt2_estimate_mfu does, 6 N + 6 L C T per token with N every
parameter of the (unpadded, tied) model, over the GPU's dense bf16 peak (--peak-tflops, 989 for
the H100 SXM and the H200): tests/gpu/run.sh uses the same formula for every row.

Runs on PyTorch 1.13 (the CPU check: --device cpu, a tiny model, 2 steps) and 2.x; the APIs that
1.13 lacks (scaled_dot_product_attention, torch.compile, fused AdamW) are used only where present.

    python3 bench/gpu_gpt2_torch.py --mode eager --train 'shards/*_train_*.bin'
    /usr/bin/python3 bench/gpu_gpt2_torch.py --device cpu --n-layer 2 --n-head 2 --n-embd 64 \\
        --block-size 32 --batch 2 --warmup 1 --steps 2 --train FILE
"""
import argparse
import glob
import json
import math
import statistics
import struct
import sys
import time

try:
    import numpy as np
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    sys.exit(f"gpu_gpt2_torch.py: cannot import torch and numpy ({e})")

SHARD_MAGIC = 20240520
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")


class Attention(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.n_head = n_head
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)                        # (B, T, C) each
        q = q.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)  # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        v = v.view(B, T, self.n_head, C // self.n_head).transpose(1, 2)
        if HAVE_SDPA:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)  # (B, nh, T, hs)
        else:  # PyTorch 1.13 (the CPU check only)
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            y = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1) @ v
        return self.c_proj(y.transpose(1, 2).contiguous().view(B, T, C))


class Block(nn.Module):
    def __init__(self, C, n_head):
        super().__init__()
        self.ln_1 = nn.LayerNorm(C)
        self.attn = Attention(C, n_head)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.c_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.c_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT(nn.Module):
    def __init__(self, L, n_head, C, T, V):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.h = nn.ModuleList(Block(C, n_head) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        self.lm_head.weight = self.wte.weight  # tied, as GPT-2
        for name, p in self.named_parameters():  # GPT-2's initialisation, as nanoGPT's
            if name.endswith("c_proj.weight"):
                nn.init.normal_(p, 0.0, 0.02 / math.sqrt(2 * L))
            elif p.dim() == 2:
                nn.init.normal_(p, 0.0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        B, T = idx.shape
        x = self.wte(idx) + self.wpe(torch.arange(T, device=idx.device))  # (B, T, C)
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))                                # (B, T, V)
        return F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))


def model_params(L, C, T, V):
    """Every parameter of the tied GPT-2 (llm.c's N, without its vocabulary padding)."""
    per_layer = 2 * C + (C * 3 * C + 3 * C) + (C * C + C) + 2 * C + (C * 4 * C + 4 * C) + \
        (4 * C * C + C)
    return V * C + T * C + L * per_layer + 2 * C


def flops_per_token(L, C, T, V):
    """llm.c's gpt2_estimate_mfu: 6 N (the weight products, forward and backward) plus 6 L C T
    (attention's two products)."""
    return 6 * model_params(L, C, T, V) + 6 * L * C * T


def read_tokens(pattern):
    """All shards matching the pattern, in name order, as one uint16 array."""
    names = sorted(glob.glob(pattern))
    if not names:
        sys.exit(f"gpu_gpt2_torch.py: no token shard matches '{pattern}'")
    parts = []
    for name in names:
        with open(name, "rb") as f:
            head = f.read(1024)
            if len(head) < 1024:
                sys.exit(f"gpu_gpt2_torch.py: '{name}' is shorter than a shard header")
            magic, version, count = struct.unpack("<3i", head[:12])
            if magic != SHARD_MAGIC or version != 1:
                sys.exit(f"gpu_gpt2_torch.py: '{name}' is not an llm.c version-1 shard "
                         f"(magic {magic}, version {version})")
            ids = np.fromfile(f, dtype="<u2", count=count)
            if ids.size != count:
                sys.exit(f"gpu_gpt2_torch.py: '{name}' holds {ids.size} of its {count} tokens")
            parts.append(ids)
    return np.concatenate(parts)


class Batches:
    """Consecutive (B, T) windows and their next-token targets, wrapping at the end; pinned
    host copies moved without blocking, as nanoGPT does."""

    def __init__(self, tokens, B, T, V, device):
        if tokens.size < B * T + 1:
            sys.exit(f"gpu_gpt2_torch.py: the shards hold {tokens.size} tokens, fewer than one "
                     f"batch of {B} x {T} + 1")
        if int(tokens.max()) >= V:
            sys.exit(f"gpu_gpt2_torch.py: token id {int(tokens.max())} >= vocabulary {V}")
        self.tokens, self.B, self.T, self.device, self.pos = tokens, B, T, device, 0

    def next(self):
        n = self.B * self.T
        if self.pos + n + 1 > self.tokens.size:
            self.pos = 0
        buf = torch.from_numpy(self.tokens[self.pos:self.pos + n + 1].astype(np.int64))
        self.pos += n
        if self.device.type == "cuda":
            buf = buf.pin_memory().to(self.device, non_blocking=True)
        return buf[:-1].view(self.B, self.T), buf[1:].view(self.B, self.T)


def make_optimizer(model, device, lr, wd):
    """nanoGPT's configure_optimizers: decay the matrices (and embeddings), not biases or
    LayerNorm; the fused CUDA kernel where this PyTorch has one."""
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    groups = [{"params": decay, "weight_decay": wd}, {"params": no_decay, "weight_decay": 0.0}]
    kwargs = {"lr": lr, "betas": (0.9, 0.95), "eps": 1e-8}
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kwargs), True
        except (TypeError, RuntimeError):
            pass
    return torch.optim.AdamW(groups, **kwargs), False


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--mode", choices=["eager", "compile"], default="eager")
    p.add_argument("--device", default="cuda", help="cuda (default), cpu, or cuda:N")
    p.add_argument("--train", required=True, help="token shard file or glob")
    p.add_argument("--n-layer", type=int, default=12)
    p.add_argument("--n-head", type=int, default=12)
    p.add_argument("--n-embd", type=int, default=768)
    p.add_argument("--block-size", type=int, default=1024)
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--padded-vocab", type=int, default=0,
                   help="embedding rows (nanoGPT's 50304 trick; MFU still counts --vocab)")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--lr", type=float, default=6e-4)
    p.add_argument("--weight-decay", type=float, default=0.1)
    p.add_argument("--grad-clip", type=float, default=1.0)
    p.add_argument("--precision", choices=["bf16", "fp32"], default="bf16")
    p.add_argument("--peak-tflops", type=float, default=989.0,
                   help="dense bf16 peak of the GPU (989: H100 SXM, H200)")
    p.add_argument("--seed", type=int, default=1337)
    a = p.parse_args()
    if a.warmup < 0 or a.steps < 1:
        sys.exit("gpu_gpt2_torch.py: --warmup must be >= 0 and --steps >= 1")
    device = torch.device(a.device)
    if device.type == "cuda" and not torch.cuda.is_available():
        sys.exit("gpu_gpt2_torch.py: --device cuda but torch sees no GPU")
    if a.mode == "compile" and not hasattr(torch, "compile"):
        sys.exit(f"gpu_gpt2_torch.py: torch {torch.__version__} has no torch.compile")
    torch.manual_seed(a.seed)
    # TF32 for the fp32 products left outside autocast, as nanoGPT and llm.c (its -f 1 default).
    # This call exists from 1.12 on; the allow_tf32 flags are deprecated in newer PyTorch.
    torch.set_float32_matmul_precision("high")

    L, H, C, T, V = a.n_layer, a.n_head, a.n_embd, a.block_size, a.vocab
    model = GPT(L, H, C, T, max(V, a.padded_vocab)).to(device)
    model.train()
    opt, fused = make_optimizer(model, device, a.lr, a.weight_decay)
    step_model = torch.compile(model) if a.mode == "compile" else model
    batches = Batches(read_tokens(a.train), a.batch, T, V, device)
    autocast = torch.autocast(device_type=device.type, dtype=torch.bfloat16,
                              enabled=a.precision == "bf16")

    def step():
        x, y = batches.next()
        opt.zero_grad(set_to_none=True)
        with autocast:
            loss = step_model(x, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), a.grad_clip)
        opt.step()
        return loss

    cuda = device.type == "cuda"
    t_compile = time.perf_counter()
    losses = [step().item() for _ in range(a.warmup)]  # .item(): each warm-up step completes
    warmup_s = time.perf_counter() - t_compile
    ms, timed = [], []
    if cuda:
        torch.cuda.synchronize(device)
        events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                  for _ in range(a.steps)]
    t0 = time.perf_counter()
    for i in range(a.steps):
        if cuda:
            events[i][0].record()
        timed.append(step().detach())
        if cuda:
            events[i][1].record()
        else:
            ms.append((time.perf_counter() - t0) * 1e3 - sum(ms))
    if cuda:
        torch.cuda.synchronize(device)
        ms = [s.elapsed_time(e) for s, e in events]
    wall_s = time.perf_counter() - t0
    losses += [float(v) for v in timed]
    if not all(math.isfinite(v) for v in losses):
        sys.exit(f"gpu_gpt2_torch.py: a loss is not finite: {losses}")

    tokens = a.batch * T
    med = statistics.median(ms)
    fpt = flops_per_token(L, C, T, V)
    tok_s = tokens / (med / 1e3)
    out = {
        "name": f"pytorch-{a.mode}", "mode": a.mode, "tokens_per_s": round(tok_s, 1),
        "ms_per_step": round(med, 3), "mfu": round(fpt * tok_s / (a.peak_tflops * 1e12), 4),
        "peak_tflops": a.peak_tflops, "flops_per_token": fpt,
        "params": model_params(L, C, T, V),
        "tokens_per_s_wall": round(tokens * a.steps / wall_s, 1),
        "ms_min": round(min(ms), 3), "ms_max": round(max(ms), 3), "warmup_steps": a.warmup,
        "timed_steps": a.steps, "warmup_s": round(warmup_s, 2), "batch": a.batch, "seq": T,
        "layers": L, "heads": H, "width": C, "vocab": V, "embedding_rows": max(V, a.padded_vocab),
        "precision": a.precision, "sdpa": HAVE_SDPA, "fused_adamw": fused,
        "loss_first": round(losses[0], 4), "loss_last": round(losses[-1], 4),
        "max_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2) if cuda
        else None,
        "device": torch.cuda.get_device_name(device) if cuda else "cpu",
        "torch": torch.__version__,
    }
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
