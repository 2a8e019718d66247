#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Reads the benchmark logs of tests/gpu/run.sh into one JSON row each, and prints the table.

    bench_parse.py ddpc NAME METRICS_JSONL [--skip-steps S] [--tokens-per-step N]
    bench_parse.py llmc NAME LOG [--skip-steps S] [--tokens-per-step N]
    bench_parse.py torch NAME LOG
    bench_parse.py failed NAME WHY
    bench_parse.py table ROWS_JSONL [--peak-tflops P] [--flops-per-token F]

A row is {"name", "status": "ok", "tokens_per_s", "ms_per_step", "steps", "source"} or
{"name", "status": "FAILED", "why"}. A log that cannot be read becomes a FAILED row with the
reason and the parser exits 0: the table must still be printed. Throughput is a median over the
steps after warm-up (the first S steps); every row's MFU is computed the same way in the table:
FLOPs per token (llm.c's 6 N + 6 L C T for GPT-2 124M: 803,261,952) x tokens/s over the peak.
"""
import argparse
import json
import re
import statistics
import sys

GPT2_FLOPS_PER_TOKEN = 6 * 124439808 + 6 * 12 * 768 * 1024  # llm.c's formula, vocabulary 50257
# llm.c: "step   12/30 | loss 10.9 (+0.00z)| norm ... | lr 6.00e-04 | 101.23 ms | 40.1% bf16 MFU |
# 161838 tok/s"
LLMC_STEP = re.compile(r"^step\s+(\d+)/\d+\s*\|.*?\|\s*([0-9.]+)\s+ms\s*\|.*?([0-9.]+)\s+tok/s")


def failed(name, why):
    return {"name": name, "status": "FAILED", "why": why}


def row(name, ms, steps, source, **extra):
    out = {"name": name, "status": "ok", "ms_per_step": round(ms, 3), "steps": steps,
           "source": source}
    out.update(extra)
    return out


def parse_ddpc(path, name, skip, tokens_per_step):
    """metrics.jsonl: one record per log_every steps. Each window's rate is its steps' tokens over
    the wall clock between its record and the previous one (time_s), so that the row does not
    rest on the trainer's own accounting; the trainer's tokens_per_s for the same windows comes
    beside it (trainer_vs_wall: their medians' ratio; 1 where the two agree). Windows that end
    after the warm-up steps count."""
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        return failed(name, f"no metrics file: {e.strerror}")
    recs, last_loss = [], None
    for line in lines:
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not isinstance(rec, dict) or "tokens_per_s" not in rec or "step" not in rec:
            continue
        if isinstance(rec.get("loss"), (int, float)):
            last_loss = rec["loss"]
        if isinstance(rec["tokens_per_s"], (int, float)) and isinstance(
                rec.get("time_s"), (int, float)):
            recs.append(rec)
    wall, own = [], []
    for prev, rec in zip(recs, recs[1:]):
        dt = rec["time_s"] - prev["time_s"]
        if rec["step"] > skip and dt > 0:
            wall.append((rec["step"] - prev["step"]) * tokens_per_step / dt)
            own.append(float(rec["tokens_per_s"]))
    if not wall:
        return failed(name, f"no two records with time_s after step {skip} in {path}")
    tok_s = statistics.median(wall)
    return row(name, tokens_per_step / tok_s * 1e3, len(wall), "metrics.jsonl windows, wall clock",
               tokens_per_s=round(tok_s, 1), trainer_tokens_per_s=round(statistics.median(own), 1),
               trainer_vs_wall=round(statistics.median(own) / tok_s, 4), loss_last=last_loss)


def parse_llmc(path, name, skip, tokens_per_step):
    """llm.c prints one line per step with its time in ms; its tok/s is a running average, so the
    median of the per-step times after the warm-up is used instead."""
    try:
        text = open(path, encoding="utf-8", errors="replace").read()
    except OSError as e:
        return failed(name, f"no log: {e.strerror}")
    ms, own = [], None
    for line in text.splitlines():
        m = LLMC_STEP.match(line.strip())
        if m:
            own = float(m.group(3))
            if int(m.group(1)) > skip:
                ms.append(float(m.group(2)))
    if not ms:
        return failed(name, f"no step line after step {skip} in {path}")
    med = statistics.median(ms)
    return row(name, med, len(ms), "per-step ms",
               tokens_per_s=round(tokens_per_step / med * 1e3, 1), llmc_reported_tok_s=own)


def parse_torch(path, name):
    """gpu_gpt2_torch.py prints one JSON line; the last such line counts."""
    try:
        lines = open(path, encoding="utf-8", errors="replace").read().splitlines()
    except OSError as e:
        return failed(name, f"no log: {e.strerror}")
    for line in reversed(lines):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("tokens_per_s"), (int, float)):
            return row(name, rec["ms_per_step"], rec.get("timed_steps"), "CUDA events",
                       tokens_per_s=rec["tokens_per_s"], torch=rec.get("torch"),
                       device=rec.get("device"), loss_last=rec.get("loss_last"))
    tail = next((l for l in reversed(lines) if l.strip()), "empty log")
    return failed(name, tail[-120:])


def fmt_ratio(a, b):
    return f"{a / b:.2f}" if a and b else "-"


def table(path, peak_tflops, flops_per_token):
    rows = []
    try:
        for line in open(path, encoding="utf-8", errors="replace"):
            try:
                rows.append(json.loads(line))
            except ValueError:
                pass
    except OSError:
        pass
    ok = {r["name"]: r for r in rows if r.get("status") == "ok"}
    eager = ok.get("pytorch-eager", {}).get("tokens_per_s")
    llmc = ok.get("llm.c", {}).get("tokens_per_s")
    print(f"GPT-2 124M, bf16, batch 16 x 1024 tokens; MFU = {flops_per_token:,} FLOP/token "
          f"(llm.c's 6N + 6LCT) x tokens/s / {peak_tflops:g} TFLOP/s (dense bf16 peak)")
    head = ["name", "tokens/s", "ms/step", "MFU", "vs eager", "vs llm.c"]
    out = [head]
    for r in rows:
        if r.get("status") != "ok":
            out.append([r.get("name", "?"), "FAILED", "-", "-", "-", "-"])
            continue
        t = r["tokens_per_s"]
        mfu = flops_per_token * t / (peak_tflops * 1e12)
        out.append([r["name"], f"{t:,.0f}", f"{r['ms_per_step']:.1f}", f"{100 * mfu:.1f}%",
                    fmt_ratio(t, eager), fmt_ratio(t, llmc)])
    widths = [max(len(x[i]) for x in out) for i in range(len(head))]
    for i, x in enumerate(out):
        print("| " + " | ".join(c.ljust(w) for c, w in zip(x, widths)) + " |")
        if i == 0:
            print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        if r.get("status") != "ok":
            print(f"{r.get('name', '?')} FAILED: {r.get('why', '')}")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("kind", choices=["ddpc", "llmc", "torch", "failed", "table"])
    p.add_argument("args", nargs="+", help="NAME FILE, NAME WHY (failed) or ROWS_JSONL (table)")
    p.add_argument("--skip-steps", type=int, default=10)
    p.add_argument("--tokens-per-step", type=int, default=16 * 1024)
    p.add_argument("--peak-tflops", type=float, default=989.0)
    p.add_argument("--flops-per-token", type=int, default=GPT2_FLOPS_PER_TOKEN)
    a = p.parse_args()
    if a.kind == "table":
        table(a.args[0], a.peak_tflops, a.flops_per_token)
        return
    if len(a.args) != 2:
        what = "WHY" if a.kind == "failed" else "FILE"
        sys.exit(f"bench_parse.py {a.kind}: give NAME and {what}")
    name, arg = a.args
    if a.kind == "failed":
        r = failed(name, arg)
    elif a.kind == "ddpc":
        r = parse_ddpc(arg, name, a.skip_steps, a.tokens_per_step)
    elif a.kind == "llmc":
        r = parse_llmc(arg, name, a.skip_steps, a.tokens_per_step)
    else:
        r = parse_torch(arg, name)
    print(json.dumps(r))


if __name__ == "__main__":
    main()
