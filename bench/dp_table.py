#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Tables of bench/dp_vs_ddp.sh: reads DIR/{dp,ddp}_MODEL_N.jsonl (one `ddpc bench step` JSON line
per repeat, with other_cpu from ddp_measure.py) and prints, per model, the throughput table and
the step breakdown of bench/README.md, "DataParallel vs DDP". Every figure is the median over the
repeats of its cell (no run is left out: on a shared machine there may be no quiet one; the
other_cpu column says how disturbed the cell's runs were).

    dp_table.py DIR "1 2 4" MODEL [MODEL ...]
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


def med(rows, key):
    """Median of rows' key, or None without rows."""
    v = [r[key] for r in rows if key in r]
    return statistics.median(v) if v else None


def fmt(v, digits=1):
    return "n/a" if v is None else f"{v:.{digits}f}"


def ratio(a, b):
    return None if a is None or b is None or b == 0 else a / b


def throughput_table(d, model, replicas):
    print(f"**{model}** (`bench/configs/{model}.yaml`), one kernel thread per replica / rank:")
    print()
    print("| replicas | dp samples/s | ddp samples/s | dp/ddp | dp scaling | ddp scaling "
          "| dp step ms | ddp step ms | runs | other_cpu dp / ddp |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    base = {}
    for n in replicas:
        cells = {s: load(os.path.join(d, f"{s}_{model}_{n}.jsonl")) for s in ("dp", "ddp")}
        tput = {s: med(cells[s], "global_samples_per_s") for s in cells}
        step = {s: med(cells[s], "median_step_ms") for s in cells}
        other = {s: med(cells[s], "other_cpu") for s in cells}
        if n == replicas[0]:
            base = tput
        scale = {s: ratio(tput[s], base.get(s)) for s in cells}
        print(f"| {n} | {fmt(tput['dp'])} | {fmt(tput['ddp'])} | "
              f"{fmt(ratio(tput['dp'], tput['ddp']), 2)} | {fmt(scale['dp'], 2)}x | "
              f"{fmt(scale['ddp'], 2)}x | {fmt(step['dp'])} | {fmt(step['ddp'])} | "
              f"{len(cells['dp'])} / {len(cells['ddp'])} | "
              f"{fmt(None if other['dp'] is None else 100 * other['dp'], 0)}% / "
              f"{fmt(None if other['ddp'] is None else 100 * other['ddp'], 0)}% |")
    print()


def breakdown_table(d, model, replicas):
    print(f"Where the step goes, {model}, ms per step (medians; replica 0's forward and backward "
          "for dp, rank 0's for ddp):")
    print()
    print("| replicas | side | step | replicate | scatter | forward | backward | wait for "
          "replicas | reduce / exposed comm | optimizer | rest |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for n in replicas:
        for side in ("dp", "ddp"):
            rows = load(os.path.join(d, f"{side}_{model}_{n}.jsonl"))
            if not rows:
                continue
            step = med(rows, "median_step_ms")
            keys = ["replicate_ms", "scatter_ms", "forward_ms", "backward_ms", "replica_wait_ms",
                    "reduce_ms" if side == "dp" else "comm_wait_ms", "optimizer_ms"]
            parts = [med(rows, k) for k in keys]
            # The phases are means over the timed steps, the step a median: rest can be < 0.
            rest = None if step is None or None in parts else step - sum(parts)
            cells = [fmt(p, 2) if side == "dp" or k not in keys[:2] + keys[4:5] else "—"
                     for k, p in zip(keys, parts)]
            print(f"| {n} | {side} | {fmt(step)} | " + " | ".join(cells) + f" | {fmt(rest, 2)} |")
    print()


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    d, replicas, models = sys.argv[1], [int(x) for x in sys.argv[2].split()], sys.argv[3:]
    missing = 0
    for model in models:
        throughput_table(d, model, replicas)
        breakdown_table(d, model, replicas)
        for n in replicas:
            for side in ("dp", "ddp"):
                if not load(os.path.join(d, f"{side}_{model}_{n}.jsonl")):
                    print(f"no result for {side} {model} at {n}", file=sys.stderr)
                    missing += 1
    sys.exit(1 if missing else 0)


if __name__ == "__main__":
    main()
