#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""Runs one benchmark command of bench/ddp_bench.sh and appends its JSON line to OUTFILE (and
stderr), adding how busy the rest of the machine was meanwhile:

    other_cpu = (CPU time the whole machine spent busy, from /proc/stat
                 - CPU time of this command and its descendants, from getrusage)
                / (wall time x CPUs)

so ddp_table.py can leave out runs that shared the cores with someone else (on a 2-core machine
any other busy process distorts a 2-rank run). Exits with the command's status; on failure the
command's last output lines go to stderr.

With --gemm-timer SO --steps N, the command runs with SO (bench/gemm_timer.c) preloaded, and the
line also gets the mean per process and per step (N = warm-up + timed steps) of the time spent in
sgemm (gemm_ms; gemm_small_ms of it in GEMMs under 2^24 multiply-adds, the attention's), the GEMM
calls per step (gemm_calls) and how many processes made GEMMs (gemm_procs: the ranks).

    ddp_measure.py OUTFILE [--gemm-timer SO --steps N] -- COMMAND [ARGS...]
"""
import json
import os
import resource
import subprocess
import sys
import tempfile


def cpu_jiffies():
    """(busy, total) jiffies of all CPUs since boot."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    user, nice, system, idle, iowait, irq, softirq, steal = v
    return user + nice + system + irq + softirq + steal, sum(v)


def children_cpu_s():
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def last_json(text):
    """The last JSON object on a line of text (torchrun may prefix lines), or None."""
    found = None
    for line in text.splitlines():
        i = line.find('{"')
        if i < 0:
            continue
        try:
            found = json.loads(line[i:])
        except ValueError:
            pass
    return found


def parse_args(argv):
    """(outfile, gemm timer .so or None, steps per process, command) from argv."""
    if len(argv) < 4 or "--" not in argv:
        sys.exit(__doc__)
    sep = argv.index("--")
    out, opts, cmd = argv[1], argv[2:sep], argv[sep + 1:]
    so, steps = None, 0
    while opts:
        if len(opts) < 2 or opts[0] not in ("--gemm-timer", "--steps"):
            sys.exit(__doc__)
        if opts[0] == "--gemm-timer":
            so = opts[1]
        else:
            steps = int(opts[1])
        opts = opts[2:]
    if not cmd or (so and steps < 1):
        sys.exit(__doc__)
    return out, so, steps, cmd


def gemm_fields(path, steps):
    """Per-process, per-step means of the gemm_timer lines in path ({} when there are none)."""
    if not os.path.exists(path):
        return {}
    with open(path) as f:
        procs = [json.loads(line) for line in f if line.startswith("{")]
    if not procs:
        return {}
    n = len(procs)
    return {
        "gemm_ms": round(1e3 * sum(p["gemm_s"] for p in procs) / n / steps, 3),
        "gemm_small_ms": round(1e3 * sum(p["small_s"] for p in procs) / n / steps, 3),
        "gemm_calls": round(sum(p["calls"] for p in procs) / n / steps, 1),
        "gemm_procs": n,
    }


def main():
    out, so, steps, cmd = parse_args(sys.argv)
    env = dict(os.environ)
    timer_out = None
    if so:
        fd, timer_out = tempfile.mkstemp(suffix=".jsonl")
        os.close(fd)
        env["LD_PRELOAD"] = " ".join(x for x in (so, env.get("LD_PRELOAD", "")) if x)
        env["GEMM_TIMER_OUT"] = timer_out
    hz = os.sysconf("SC_CLK_TCK")
    busy0, total0 = cpu_jiffies()
    own0 = children_cpu_s()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    busy1, total1 = cpu_jiffies()
    own = children_cpu_s() - own0
    result = last_json(p.stdout) if p.returncode == 0 else None
    if result is None:
        lines = (p.stdout + p.stderr).splitlines()
        # torchrun prefixes the workers' own lines [defaultN]; those say why.
        why = [l for l in lines if l.startswith("[default")] or lines
        print("\n".join(why[-20:]), file=sys.stderr)
        sys.exit(p.returncode or 1)
    total_s = (total1 - total0) / hz
    other = max(0.0, (busy1 - busy0) / hz - own) / total_s if total_s > 0 else 0.0
    result["other_cpu"] = round(other, 4)
    if timer_out:
        result.update(gemm_fields(timer_out, steps))
        os.unlink(timer_out)
    line = json.dumps(result)
    with open(out, "a") as f:
        f.write(line + "\n")
    print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
