#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""PyTorch peer for `ddpc bench step`: times full fp32 (or --amp bf16: autocast) training steps (zero_grad, forward,
cross-entropy, backward, optimizer step) of the same models ddpc benchmarks and prints one
JSON line. The models here must stay identical to ddpc's (src/nn/gpt.c, mlp.c, cnn.c, seq2seq*.c).

Run with the environment bench/step_bench.sh sets (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS,
MKL_NUM_THREADS = N, OMP_WAIT_POLICY=PASSIVE at N >= 2, ATEN_CPU_CAPABILITY): see
/work/shared/PEERS.md, "Running the peers fairly".

    /usr/bin/python3 bench/torch_step.py gpt --threads 1 [--steps 20 --warmup 3]

On a GPU (--device cuda; tests/gpu/run.sh's models part): the same models and steps, the GPT's
attention through F.scaled_dot_product_attention (PEERS.md's fair GPU peer), AdamW fused, each
step timed between torch.cuda.synchronize() calls; --tf32 sets allow_tf32 for matmuls and cuDNN
(ddpc's matmul_precision high), else both stay off (ddpc's fp32 products and im2col
convolutions are true fp32).
"""
import argparse
import json
import math
import os
import statistics
import sys
import time

try:
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
except ImportError as e:  # pragma: no cover
    sys.exit(f"torch_step.py: cannot import torch ({e}); run it with /usr/bin/python3 "
             "(Debian's python3-torch)")


# GPT: vocab 256, 4 layers, 4 heads, n_embd 256, block 128 (GPT-2 pre-LN, tied lm head).
class Block(nn.Module):
    def __init__(self, C, n_head, T):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(C)
        self.qkv = nn.Linear(C, 3 * C)
        self.proj = nn.Linear(C, C)
        self.ln2 = nn.LayerNorm(C)
        self.fc = nn.Linear(C, 4 * C)
        self.fcproj = nn.Linear(4 * C, C)
        mask = torch.tril(torch.ones(T, T, dtype=torch.bool)).view(1, 1, T, T)
        self.register_buffer("mask", mask, persistent=False)

    def attn(self, x):
        B, T, C = x.shape
        hs = C // self.n_head
        q, k, v = self.qkv(x).split(C, dim=2)                       # (B, T, C) each
        q = q.view(B, T, self.n_head, hs).transpose(1, 2)           # (B, nh, T, hs)
        k = k.view(B, T, self.n_head, hs).transpose(1, 2)
        v = v.view(B, T, self.n_head, hs).transpose(1, 2)
        if x.is_cuda:  # the fused kernel a GPU user calls
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.proj(y.transpose(1, 2).contiguous().view(B, T, C))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(hs))     # (B, nh, T, T)
        att = att.masked_fill(~self.mask[:, :, :T, :T], float("-inf"))
        att = F.softmax(att, dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)    # (B, T, C)
        return self.proj(y)

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        x = x + self.fcproj(F.gelu(self.fc(self.ln2(x)), approximate="tanh"))
        return x


class GPT(nn.Module):
    def __init__(self, V=256, n_layer=4, n_head=4, C=256, T=128):
        super().__init__()
        self.wte = nn.Embedding(V, C)
        self.wpe = nn.Embedding(T, C)
        self.blocks = nn.ModuleList([Block(C, n_head, T) for _ in range(n_layer)])
        self.lnf = nn.LayerNorm(C)

    def forward(self, idx):                                         # idx (B, T)
        T = idx.shape[1]
        pos = torch.arange(T, dtype=torch.long, device=idx.device)
        x = self.wte(idx) + self.wpe(pos)                           # (B, T, C)
        for b in self.blocks:
            x = b(x)
        return self.lnf(x) @ self.wte.weight.t()                    # (B, T, V)


def fused(dev):
    """AdamW's fused kernel on a GPU, as the GPU peers run it (Debian's CPU torch 1.13 has none)."""
    return {"fused": True} if dev != "cpu" else {}


def make_gpt(B, dev):
    V, T = 256, 128
    model = GPT(V=V, n_layer=4, n_head=4, C=256, T=T).to(dev)
    decay = [p for p in model.parameters() if p.dim() == 2]
    no_decay = [p for p in model.parameters() if p.dim() != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, **fused(dev))
    x = torch.randint(0, V, (B, T), device=dev)
    y = torch.randint(0, V, (B, T), device=dev)
    loss_fn = lambda logits: F.cross_entropy(logits.view(-1, V), y.view(-1))
    return model, opt, x, loss_fn, T


def make_mlp(B, dev):
    model = nn.Sequential(nn.Flatten(), nn.Linear(784, 1024), nn.ReLU(),
                          nn.Linear(1024, 1024), nn.ReLU(), nn.Linear(1024, 10)).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(B, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (B,), device=dev)
    return model, opt, x, lambda logits: F.cross_entropy(logits, y), 0


def make_cnn(B, dev):
    model = nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Dropout(0.25),
        nn.Linear(128, 10)).to(dev)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3, weight_decay=0.01, **fused(dev))
    x = torch.randn(B, 1, 28, 28, device=dev)
    y = torch.randint(0, 10, (B,), device=dev)
    return model, opt, x, lambda logits: F.cross_entropy(logits, y), 0


# seq2seq: ddpc's encoder-decoder (docs/seq2seq.md; the model of tests/parity/parity_seq2seq.py):
# torch.nn.Transformer (batch_first, post-LN, ReLU) with embeddings scaled by sqrt(d_model) plus
# sinusoidal positions, a generator Linear, CrossEntropyLoss(ignore_index=0, label_smoothing=0.1).
# bench/configs/seq2seq.yaml: 128 wide, 4 heads, 2 + 2 layers, d_ff 256, dropout 0, on
# bench/lib.sh's seq2seq_pairs (15 random letters reversed: 30 ids with the 4 specials, every
# source 16 wide with <eos>, every target 16 with <bos>/<eos>), batch 32, AdamW lr 1e-3.
S2S = dict(C=128, H=4, LAYERS=2, FF=256, VS=30, VT=30, L=16)


def sinusoidal(t, c, dev="cpu"):
    """The PyTorch tutorial's PositionalEncoding (t, c), in float64, rounded once to fp32."""
    pos = torch.arange(t, dtype=torch.float64).unsqueeze(1)
    div = torch.exp(torch.arange(0, c, 2, dtype=torch.float64) * (-math.log(10000.0) / c))
    pe = torch.zeros(t, c, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * div)
    pe[:, 1::2] = torch.cos(pos * div)
    return pe.float().to(dev)


class Seq2Seq(nn.Module):
    """ddpc's seq2seq, named as its state_dict (also tests/parity/parity_seq2seq.py's peer)."""

    def __init__(self, C, H, LAYERS, FF, VS, VT, L, dropout=0.0, dev="cpu"):
        super().__init__()
        self.C = C
        self.src_embed = nn.Embedding(VS, C)
        self.tgt_embed = nn.Embedding(VT, C)
        self.transformer = nn.Transformer(d_model=C, nhead=H, num_encoder_layers=LAYERS,
                                          num_decoder_layers=LAYERS, dim_feedforward=FF,
                                          dropout=dropout, batch_first=True)
        self.generator = nn.Linear(C, VT)
        self.register_buffer("pe", sinusoidal(L, C, dev), persistent=False)
        mask = self.transformer.generate_square_subsequent_mask(L)
        self.register_buffer("causal", mask, persistent=False)

    def forward(self, src, tgt=None):
        """src (B, S), tgt (B, T) of at most L, padded with 0; or src (2, B, L) holding both (one
        input, as torch_step.py passes it)."""
        if tgt is None:
            src, tgt = src[0], src[1]
        s, t, scale = src.shape[1], tgt.shape[1], math.sqrt(self.C)
        x = self.src_embed(src) * scale + self.pe[:s]
        y = self.tgt_embed(tgt) * scale + self.pe[:t]
        out = self.transformer(x, y, tgt_mask=self.causal[:t, :t], src_key_padding_mask=src == 0,
                               tgt_key_padding_mask=tgt == 0, memory_key_padding_mask=src == 0)
        return self.generator(out)                              # (B, T, VT)


def make_seq2seq(B, dev):
    c = S2S
    model = Seq2Seq(**c, dev=dev).to(dev)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": no_decay, "weight_decay": 0.0}], lr=1e-3, **fused(dev))
    L, V = c["L"], c["VT"]
    src = torch.randint(4, V, (B, L), device=dev)
    src[:, -1] = 2                                              # <eos>
    y = torch.randint(4, V, (B, L - 1), device=dev)
    bos = torch.ones(B, 1, dtype=torch.long, device=dev)
    tok = torch.cat([bos, y], dim=1)                            # <bos> y
    tgt = torch.cat([y, 2 * bos], dim=1)                        # y <eos>
    loss_fn = lambda logits: F.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1),
                                             ignore_index=0, label_smoothing=0.1)
    return model, opt, torch.stack([src, tok]), loss_fn, L


MODELS = {"gpt": (make_gpt, 8), "mlp": (make_mlp, 128), "cnn": (make_cnn, 64),
          "seq2seq": (make_seq2seq, 32)}


def forward(model, x, amp):
    """The model's output in fp32; amp "bf16" runs it under autocast on x's device (the loss
    stays outside, in fp32, as autocast's recipe says)."""
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=amp == "bf16"):
        out = model(x)
    return out.float()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", choices=sorted(MODELS))
    ap.add_argument("--threads", type=int, required=True)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--batch", type=int, default=None, help="override the model's batch size")
    ap.add_argument("--seed", type=int, default=1337)
    ap.add_argument("--amp", choices=["none", "bf16"], default="none",
                    help="bf16: torch.autocast(device, dtype=torch.bfloat16) around the forward")
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--tf32", action="store_true",
                    help="cuda: allow TF32 in matmuls and cuDNN (ddpc's matmul_precision high)")
    a = ap.parse_args()
    if a.threads < 1 or a.steps < 1 or a.warmup < 0:
        ap.error("--threads and --steps must be >= 1, --warmup >= 0")
    gpu = a.device == "cuda"
    if gpu:
        torch.backends.cuda.matmul.allow_tf32 = a.tf32
        torch.backends.cudnn.allow_tf32 = a.tf32  # torch's default is on; ddpc's fp32 is fp32

    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        if not gpu and os.environ.get(var) != str(a.threads):
            print(f"torch_step.py: warning: {var}={os.environ.get(var)!r} disagrees with "
                  f"--threads {a.threads}; PyTorch's thread settings will not hold "
                  "(see PEERS.md)", file=sys.stderr)
    torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)

    make, default_batch = MODELS[a.model]
    B = a.batch or default_batch
    model, opt, x, loss_fn, T = make(B, a.device)
    model.train()
    sync = torch.cuda.synchronize if gpu else (lambda: None)

    times = []
    for i in range(a.warmup + a.steps):
        sync()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(forward(model, x, a.amp))
        loss.backward()
        opt.step()
        sync()
        dt = time.perf_counter() - t0
        if not math.isfinite(loss.item()):
            sys.exit(f"torch_step.py: non-finite loss at step {i}")
        if i >= a.warmup:
            times.append(dt)

    med = statistics.median(times)
    print(json.dumps({
        "impl": "pytorch", "model": a.model, "threads": a.threads, "batch": B,
        "median_step_ms": round(1e3 * med, 3),
        "samples_per_s": round(B / med, 1),
        "tokens_per_s": round(B * T / med, 1),
        "amp": a.amp, "torch": torch.__version__,
        "cpu_capability": os.environ.get("ATEN_CPU_CAPABILITY", "default"),
        "device": torch.cuda.get_device_name(0) if gpu else "cpu", "tf32": gpu and a.tf32,
    }))


if __name__ == "__main__":
    main()
