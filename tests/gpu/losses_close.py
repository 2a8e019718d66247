# SPDX-License-Identifier: MIT
"""losses_close.py A.jsonl B.jsonl TOL FROM [--common]: the training losses two runs logged in
their metrics.jsonl, from step FROM on, A's against B's: exit 0 when every relative difference is
<= TOL (0: identical), else 1. Both runs must have logged the same steps, unless --common (the
steps both logged). Prints the worst difference and the last losses; per step when not equal."""
import json
import sys


def losses(path, first):
    out = {}
    for line in open(path):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "loss" in r and "epoch" in r and "event" not in r and r["step"] >= first:
            out[r["step"]] = r["loss"]
    return out


def main(argv):
    first, tol, common = int(argv[4]), float(argv[3]), "--common" in argv[5:]
    a, b = losses(argv[1], first), losses(argv[2], first)
    steps = sorted(set(a) & set(b)) if common else sorted(a)
    if not steps or (not common and sorted(a) != sorted(b)):
        print("  logged steps differ from step %d: %s vs %s" % (first, sorted(a), sorted(b)))
        return 1
    rel = {s: abs(a[s] - b[s]) / max(abs(b[s]), 1e-12) for s in steps}
    worst = max(rel.values())
    last = steps[-1]
    print("  %d logged steps, worst relative difference %.3g (limit %g); last losses %.7f / %.7f"
          % (len(steps), worst, tol, a[last], b[last]))
    if worst > 0:
        print("  per step: " + " ".join("%d:%.1e" % (s, rel[s]) for s in steps))
    return 0 if worst <= tol else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
