#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Table of bench/ddp_bench.sh: reads DIR/{ddpc,torch}_MODEL_{1,2}.jsonl (one JSON line per
repeat) and prints the Markdown table of bench/README.md, "Data-parallel training", then the
issue's two GPT targets. Each figure is the median over the repeats of its cell, leaving out runs
during which other processes used more than DISTURBED (environment, default 0.10) of the machine
(their other_cpu field, from ddp_measure.py) as long as the cell keeps at least one run.

    ddp_table.py DIR MODEL [MODEL ...]
"""
import json
import os
import statistics
import sys


def load(path):
    """The JSON objects of a .jsonl file ([] when it is missing)."""
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [json.loads(line) for line in f if line.startswith("{")]


def undisturbed(rows, limit):
    """The runs no other process disturbed beyond limit, or all of them if none is left."""
    kept = [r for r in rows if r.get("other_cpu", 0.0) <= limit]
    return kept or rows


def load_cells(d_dir, model, limit, notes):
    """{(impl, ranks): undisturbed runs} for one model; what was left out goes to notes."""
    rows = {}
    for impl in ("ddpc", "torch"):
        for n in (1, 2):
            got = load(os.path.join(d_dir, f"{impl}_{model}_{n}.jsonl"))
            rows[impl, n] = undisturbed(got, limit)
            dropped = len(got) - len(rows[impl, n])
            if dropped:
                notes.append(f"{impl} {model} {n} rank(s): {dropped} of {len(got)} runs left out "
                             f"(other processes used more than {limit:.0%} of the machine)")
            elif got and any(r.get("other_cpu", 0.0) > limit for r in got):
                notes.append(f"{impl} {model} {n} rank(s): every run was disturbed (other "
                             f"processes above {limit:.0%}); its figures are unreliable")
    return rows


def med(rows, key):
    vals = [r[key] for r in rows if key in r]
    return statistics.median(vals) if vals else None


def fmt(v, spec=".1f"):
    return "n/a" if v is None else format(v, spec)


def div(a, b):
    return None if a is None or b is None or b == 0 else a / b


def throughput(rows, model):
    return med(rows, "global_tokens_per_s" if model == "gpt" else "global_samples_per_s")


def gemm_cell(rows):
    """Median time per step and rank in sgemm (gemm_timer.c), the attention's small GEMMs in
    parentheses."""
    total, small = med(rows, "gemm_ms"), med(rows, "gemm_small_ms")
    return "n/a" if total is None else f"{total:.1f} ({small:.1f})"


def comm_cells(d, p):
    """Mean exposed communication per step over the communication it is compared with: ddpc's
    bucket all-reduces on the comm thread; a blocking gloo all-reduce of all gradients."""
    de, dc = med(d, "exposed_comm_mean_ms"), med(d, "comm_mean_ms")
    pe, pc = med(p, "exposed_comm_mean_ms"), med(p, "allreduce_ms")
    dcell = "n/a" if dc is None else f"{de:.1f} / {dc:.1f} ms ({100 * div(de, dc):.0f}%)"
    pcell = "n/a" if pc is None else f"{pe:.1f} / {pc:.1f} ms ({100 * div(pe, pc):.0f}%)"
    return dcell, pcell


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    d_dir, models = sys.argv[1], sys.argv[2:]
    print("| model | ranks | ddpc samples/s (tok/s for gpt) | PyTorch DDP | ddpc/PyTorch "
          "| ddpc step ms | PyTorch step ms | ddpc sgemm ms | PyTorch sgemm ms "
          "| ddpc scaling | PyTorch scaling "
          "| ddpc exposed / all-reduce per step | PyTorch exposed / all-reduce |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    verdicts, notes = [], []
    limit = float(os.environ.get("DISTURBED", "0.10"))
    for m in models:
        rows = load_cells(d_dir, m, limit, notes)
        thr = {k: throughput(v, m) for k, v in rows.items()}
        for n in (1, 2):
            d, p = thr["ddpc", n], thr["torch", n]
            eff_d = eff_p = "—"
            dcomm = pcomm = "—"
            if n == 2:
                eff_d = fmt(div(d, None if thr["ddpc", 1] is None else 2 * thr["ddpc", 1]), ".1%")
                eff_p = fmt(div(p, None if thr["torch", 1] is None else 2 * thr["torch", 1]),
                            ".1%")
                dcomm, pcomm = comm_cells(rows["ddpc", 2], rows["torch", 2])
            print(f"| {m} | {n} | {fmt(d)} | {fmt(p)} | {fmt(div(d, p), '.2f')} "
                  f"| {fmt(med(rows['ddpc', n], 'median_step_ms'))} "
                  f"| {fmt(med(rows['torch', n], 'median_step_ms'))} "
                  f"| {gemm_cell(rows['ddpc', n])} | {gemm_cell(rows['torch', n])} "
                  f"| {eff_d} | {eff_p} | {dcomm} | {pcomm} |")
        if m == "gpt":
            eff = div(thr["ddpc", 2], None if thr["ddpc", 1] is None else 2 * thr["ddpc", 1])
            ratio = div(thr["ddpc", 2], thr["torch", 2])
            verdicts.append(f"GPT weak scaling 1 -> 2 ranks: {fmt(eff, '.1%')} (target >= 90%: "
                            f"{'met' if eff is not None and eff >= 0.9 else 'NOT met'})")
            verdicts.append(f"GPT ddpc / PyTorch DDP at 2 ranks: {fmt(ratio, '.2f')}x (target >= "
                            f"1.5x: {'met' if ratio is not None and ratio >= 1.5 else 'NOT met'})")
            gemm = med(rows["ddpc", 2], "gemm_ms")
            ceiling = div(med(rows["torch", 2], "median_step_ms"), gemm)
            if ceiling is not None:
                verdicts.append(f"GPT ceiling: PyTorch DDP's 2-rank step / ddpc's sgemm time per "
                                f"step ({gemm:.1f} ms) = {ceiling:.2f}x, the ratio ddpc would "
                                f"reach if it spent no time outside sgemm")
    n_runs = len(load(os.path.join(d_dir, f"ddpc_{models[0]}_1.jsonl")))
    print(f"\nMedian of up to {n_runs} interleaved run(s) per cell.")
    for v in notes + verdicts:
        print(v)


if __name__ == "__main__":
    main()
