#!/usr/bin/python3
"""Runs one benchmark command of bench/ddp_bench.sh and appends its JSON line to OUTFILE (and
stderr), adding how busy the rest of the machine was meanwhile:

    other_cpu = (CPU time the whole machine spent busy, from /proc/stat
                 - CPU time of this command and its descendants, from getrusage)
                / (wall time x CPUs)

so ddp_table.py can leave out runs that shared the cores with someone else (on a 2-core machine
any other busy process distorts a 2-rank run). Exits with the command's status; on failure the
command's last output lines go to stderr.

    ddp_measure.py OUTFILE -- COMMAND [ARGS...]
"""
import json
import os
import resource
import subprocess
import sys


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


def main():
    if len(sys.argv) < 4 or sys.argv[2] != "--":
        sys.exit(__doc__)
    out, cmd = sys.argv[1], sys.argv[3:]
    hz = os.sysconf("SC_CLK_TCK")
    busy0, total0 = cpu_jiffies()
    own0 = children_cpu_s()
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    line = json.dumps(result)
    with open(out, "a") as f:
        f.write(line + "\n")
    print(line, file=sys.stderr)


if __name__ == "__main__":
    main()
