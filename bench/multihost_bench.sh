#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# multihost_bench.sh DDPC_BIN [--min-bytes A] [--max-bytes B] [--step-factor F] [--iters N]
#   [--warmup W] [--min-ms T] [--max-ms T]
# all_reduce (f32 sum) across 2 "hosts" x 2 ranks of the namespace test bed
# (tests/multihost/testbed.sh: veth pairs on a bridge), in one run: ddpc's gloo backend (`ddpc
# bench allreduce`, ranks started with the platform's variables), Open MPI over TCP (coll_mpi.c,
# `--mca btl tcp,self`, mpirun reaching host 1 through an rsh agent that runs `ip netns exec`) and
# PyTorch's gloo (coll_torch.py, same variables). Prints the CPU and load, a Markdown table of bus
# bandwidths with ratios, and the latency at the smallest size; raw JSON lines go to stderr.
# Needs root (namespaces), Open MPI and Debian's python3-torch. A missing peer is an error.
set -euo pipefail

die() { echo "$0: $*" >&2; exit 2; }
[[ $# -ge 1 ]] || die "usage: $0 DDPC_BIN [--min-bytes A] [--max-bytes B] [--step-factor F] ..."
DDPC=$(realpath "$1")
shift
MIN=4K MAX=256M FACTOR=2 ITERS=20 WARMUP=3 MIN_MS=200 MAX_MS=2000
while [[ $# -gt 0 ]]; do
    [[ $# -ge 2 ]] || die "option $1 needs a value"
    case $1 in
        --min-bytes) MIN=$2 ;;
        --max-bytes) MAX=$2 ;;
        --step-factor) FACTOR=$2 ;;
        --iters) ITERS=$2 ;;
        --warmup) WARMUP=$2 ;;
        --min-ms) MIN_MS=$2 ;;
        --max-ms) MAX_MS=$2 ;;
        *) die "unknown option $1" ;;
    esac
    shift 2
done
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
[[ $(id -u) -eq 0 ]] || die "needs root for the network namespaces"
[[ -x $DDPC ]] || die "$DDPC is not an executable (build ddpc first: make build)"
command -v mpicc >/dev/null && command -v mpirun >/dev/null ||
    die "Open MPI is missing (apt-get install libopenmpi-dev openmpi-bin)"
"$PY" -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null ||
    die "$PY cannot import torch with gloo (install Debian's python3-torch or set PYTHON)"
. "$HERE/../tests/multihost/testbed.sh"
. "$HERE/../tests/multihost/ranks.sh"

LOAD0=$(cut -d" " -f1-3 /proc/loadavg)
TMP=$(mktemp -d)
trap 'bed_down; rm -rf "$TMP"' EXIT
mpicc -std=c11 -O3 -march=native "$HERE/coll_mpi.c" -o "$TMP/coll_mpi" -lm
bed_up 2 || die "cannot create the test bed"
SWEEP=(--min-bytes "$MIN" --max-bytes "$MAX" --step-factor "$FACTOR")
TIMING=(--iters "$ITERS" --warmup "$WARMUP" --min-ms "$MIN_MS" --max-ms "$MAX_MS")
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1

# collect NAME: the JSON lines of rank 0's output, or the failure.
collect() {
    grep -ho '{"bench".*}' "$TMP/$1/rank.0" >"$TMP/$1.jsonl" 2>/dev/null ||
        grep -ho '{"bench".*}' "$TMP/$1.out" >"$TMP/$1.jsonl" 2>/dev/null || true
    [[ -s $TMP/$1.jsonl ]] || { echo "$0: $1 printed no results" >&2; tail -n 20 "$TMP/$1"* >&2; exit 1; }
    cat "$TMP/$1.jsonl" >&2
}

run_ranks() { # NAME CMD...: 2 x 2 ranks with the platform's variables
    local name=$1
    shift
    mkdir -p "$TMP/$name"
    echo "$0: running $name ..." >&2
    mh_start 2 2 "$TMP/$name" "$@"
    mh_wait || { echo "$0: $name failed" >&2; tail -n 20 "$TMP/$name"/rank.* >&2; exit 1; }
    collect "$name"
}

run_ranks ddpc env DDPC_COLLECTIVE_TIMEOUT=300 "$DDPC" bench allreduce --backend gloo --check \
    --json "${SWEEP[@]}" "${TIMING[@]}"
run_ranks gloo env GLOO_SOCKET_IFNAME=eth0 "$PY" "$HERE/coll_torch.py" allreduce --check --json \
    "${SWEEP[@]}" "${TIMING[@]}"

# Open MPI: mpirun runs on host 0 and reaches host 1 with an "rsh" that enters its namespace.
cat >"$TMP/netns_rsh" <<EOF
#!/bin/sh
# rsh agent for mpirun on the test bed: $0 HOST CMD... runs CMD in HOST's namespace
host=\$1
shift
case \$host in
    $(bed_addr 0)) ns=${bed}-h0 ;;
    $(bed_addr 1)) ns=${bed}-h1 ;;
    *) echo "netns_rsh: unknown host \$host" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" sh -c "\$*"
EOF
chmod +x "$TMP/netns_rsh"
printf '%s slots=2\n%s slots=2\n' "$(bed_addr 0)" "$(bed_addr 1)" >"$TMP/hosts"
echo "$0: running mpi ..." >&2
bed_exec 0 mpirun --allow-run-as-root -np 4 --hostfile "$TMP/hosts" --map-by slot \
    --mca plm_rsh_agent "$TMP/netns_rsh" --mca btl tcp,self --mca btl_tcp_if_include eth0 \
    --mca oob_tcp_if_include eth0 -x OMP_NUM_THREADS "$TMP/coll_mpi" allreduce --check --json \
    "${SWEEP[@]}" "${TIMING[@]}" >"$TMP/mpi.out" 2>&1 ||
    { echo "$0: mpi failed" >&2; tail -n 30 "$TMP/mpi.out" >&2; exit 1; }
collect mpi

echo "CPU: $(grep -m1 "model name" /proc/cpuinfo | cut -d: -f2 | sed "s/^ //"), $(nproc --all) cores;" \
     "load average before the run: $LOAD0, after: $(cut -d' ' -f1-3 /proc/loadavg)"
"$PY" - "$TMP" <<'PY'
import json, sys
tmp = sys.argv[1]
def load(name):
    return {r["size"]: r for r in map(json.loads, open(f"{tmp}/{name}.jsonl"))}
d, m, g = load("ddpc"), load("mpi"), load("gloo")
print("\nall_reduce f32 sum, 2 hosts x 2 ranks over veth; busbw in GB/s (nccl-tests' definition)\n")
print("| size (B) | ddpc gloo backend | Open MPI tcp | PyTorch gloo | ddpc/MPI | ddpc/PyTorch |")
print("|---:|---:|---:|---:|---:|---:|")
ratio = lambda a, b: f"{a / b:.2f}" if b > 0 else "n/a"
for s in sorted(d):
    mm, gg = m.get(s), g.get(s)
    print(f"| {s} | {d[s]['busbw']:.3f} | " + (f"{mm['busbw']:.3f}" if mm else "n/a") + " | "
          + (f"{gg['busbw']:.3f}" if gg else "n/a") + " | "
          + (ratio(d[s]["busbw"], mm["busbw"]) if mm else "n/a") + " | "
          + (ratio(d[s]["busbw"], gg["busbw"]) if gg else "n/a") + " |")
s = min(d)
print(f"\nlatency at {s} B: ddpc {d[s]['time_us']:.1f} us, Open MPI "
      + (f"{m[s]['time_us']:.1f} us" if s in m else "n/a")
      + (f", PyTorch gloo {g[s]['time_us']:.1f} us" if s in g else ""))
big = [s for s in sorted(d) if s >= 1 << 20 and s in m and s in g]
below = [s for s in big if d[s]["busbw"] < max(m[s]["busbw"], g[s]["busbw"])]
print("bar at >= 1 MiB, ddpc busbw >= both: " + ("yes" if not below else
      "NO (below at " + ", ".join(map(str, below)) + ")"))
if s in m:
    print(f"bar at {s} B, ddpc latency <= Open MPI's: "
          + ("yes" if d[s]["time_us"] <= m[s]["time_us"] else "NO"))
wrong = {n: sum(r.get("wrong") or 0 for r in t.values()) for n, t in (("ddpc", d), ("mpi", m), ("gloo", g))}
if any(wrong.values()):
    sys.exit("WRONG RESULTS: " + ", ".join(f"{k} {v}" for k, v in wrong.items() if v))
PY
