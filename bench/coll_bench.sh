#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# coll_bench.sh DDPC_BIN [options]: one collective at the same sizes and world size, in one run,
# by ddpc (`ddpc bench`, shm backend), Open MPI (coll_mpi.c, --mca btl self,vader), PyTorch gloo
# (coll_torch.py under torchrun) and a single-thread memcpy (memcpy_bw.c, the one-core copy
# ceiling). Prints a Markdown table of bus bandwidths and ratios on stdout, then the latency at
# the smallest size; every raw JSON line goes to stderr. A missing peer is an error, not a skip.
#   --nproc N (2)  --coll allreduce|broadcast|all_gather (allreduce)  --min-bytes A (4K)
#   --max-bytes B (256M)  --step-factor F (2)  --iters N (20)  --warmup W (5)
#   --min-ms T (200)  --max-ms T (2000): each size's timed calls are raised to last about
#   --min-ms (steadier small-message figures) and lowered to fit --max-ms (gloo's large sizes),
#   judged from the warm-up; the same values go to ddpc, MPI and gloo.
# Environment: PYTHON (default /usr/bin/python3, which has Debian's python3-torch).
set -euo pipefail

usage() {
    echo "usage: $0 DDPC_BIN [--nproc N] [--coll allreduce|broadcast|all_gather] [--min-bytes A]" \
         "[--max-bytes B] [--step-factor F] [--iters N] [--warmup W] [--min-ms T] [--max-ms T]" >&2
    exit 2
}
die() { echo "$0: $*" >&2; exit 2; }

[[ $# -ge 1 ]] || usage
DDPC=$1
shift
NPROC=2 COLL=allreduce MIN=4K MAX=256M FACTOR=2 ITERS=20 WARMUP=5 MIN_MS=200 MAX_MS=2000
while [[ $# -gt 0 ]]; do
    [[ $# -ge 2 ]] || usage
    case $1 in
        --nproc) NPROC=$2 ;;
        --coll) COLL=$2 ;;
        --min-bytes) MIN=$2 ;;
        --max-bytes) MAX=$2 ;;
        --step-factor) FACTOR=$2 ;;
        --iters) ITERS=$2 ;;
        --warmup) WARMUP=$2 ;;
        --min-ms) MIN_MS=$2 ;;
        --max-ms) MAX_MS=$2 ;;
        *) usage ;;
    esac
    shift 2
done
[[ $NPROC =~ ^[1-9][0-9]*$ ]] || die "--nproc '$NPROC' is not a positive integer"
case $COLL in
    allreduce|all_reduce|broadcast|all_gather|allgather) ;;
    *) die "--coll '$COLL': the comparison covers allreduce, broadcast and all_gather" \
           "(gloo in PyTorch 1.13 has no reduce_scatter)" ;;
esac

HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
[[ -x $DDPC ]] || die "$DDPC is not an executable (build ddpc first: make build)"
command -v cc >/dev/null || die "no C compiler 'cc' for memcpy_bw.c"
command -v mpicc >/dev/null || die "mpicc not found: Open MPI is missing (apt-get install libopenmpi-dev openmpi-bin)"
command -v mpirun >/dev/null || die "mpirun not found: Open MPI is missing (apt-get install openmpi-bin)"
"$PY" -c "import torch.distributed as d; assert d.is_gloo_available()" 2>/dev/null ||
    die "$PY cannot import torch with gloo (install Debian's python3-torch or set PYTHON)"

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
mpicc -std=c11 -O3 -march=native "$HERE/coll_mpi.c" -o "$TMP/coll_mpi" -lm
cc -std=c11 -O3 -march=native "$HERE/memcpy_bw.c" -o "$TMP/memcpy_bw"

SWEEP=(--min-bytes "$MIN" --max-bytes "$MAX" --step-factor "$FACTOR")
TIMING=(--iters "$ITERS" --warmup "$WARMUP" --min-ms "$MIN_MS" --max-ms "$MAX_MS")
# Every process single-threaded: NPROC ranks share the cores.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE GROUP_RANK MASTER_ADDR MASTER_PORT \
    TORCHELASTIC_RUN_ID DDPC_LAUNCHER

free_port() {
    "$PY" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# run_peer NAME CMD...: runs CMD with output in $TMP/NAME.out/.err; on failure shows the tail.
run_peer() {
    local name=$1
    shift
    echo "$0: running $name ..." >&2
    local t0=$SECONDS
    if ! "$@" >"$TMP/$name.out" 2>"$TMP/$name.err"; then
        echo "$0: $name failed: $*" >&2
        tail -n 20 "$TMP/$name.err" "$TMP/$name.out" >&2
        exit 1
    fi
    grep -o '{"bench".*}' "$TMP/$name.out" >"$TMP/$name.jsonl" || true
    cat "$TMP/$name.jsonl" >&2
    echo "$0: $name took $((SECONDS - t0)) s" >&2
    [[ -s $TMP/$name.jsonl ]] || { echo "$0: $name printed no results" >&2; exit 1; }
}

# ddpc with torchrun's variables, the way `ddpc run` starts its workers: through `ddpc run` when
# this build has the launcher, else one process per rank started here.
ddpc_job() {
    local cmd=("$DDPC" bench "$COLL" --backend shm --check --json "${SWEEP[@]}" "${TIMING[@]}")
    if "$DDPC" run --help >/dev/null 2>&1; then
        "$DDPC" run --nproc-per-node "$NPROC" -- "${cmd[@]}"
        return
    fi
    local port pids=() rc=0
    port=$(free_port)
    for ((r = 0; r < NPROC; r++)); do
        RANK=$r WORLD_SIZE=$NPROC LOCAL_RANK=$r LOCAL_WORLD_SIZE=$NPROC GROUP_RANK=0 \
            MASTER_ADDR=127.0.0.1 MASTER_PORT=$port DDPC_COLLECTIVE_TIMEOUT=120 "${cmd[@]}" &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    return "$rc"
}

gloo_job() {
    GLOO_SOCKET_IFNAME=lo "$PY" -m torch.distributed.run --nproc_per_node "$NPROC" \
        --master_port "$(free_port)" --redirects 1:2 --tee 1:2 \
        "$HERE/coll_torch.py" "$COLL" --check --json "${SWEEP[@]}" "${TIMING[@]}"
}

run_peer ddpc ddpc_job
run_peer mpi mpirun --allow-run-as-root --oversubscribe --mca btl self,vader -np "$NPROC" \
    "$TMP/coll_mpi" "$COLL" --check --json "${SWEEP[@]}" "${TIMING[@]}"
run_peer gloo gloo_job
run_peer memcpy "$TMP/memcpy_bw" --json "${SWEEP[@]}" --iters "$ITERS" --warmup "$WARMUP"

"$PY" - "$TMP" "$NPROC" "$COLL" <<'PY'
import json, sys
tmp, nproc, coll = sys.argv[1], int(sys.argv[2]), sys.argv[3]
def load(name):
    return {r["size"]: r for r in map(json.loads, open(f"{tmp}/{name}.jsonl"))}
d, m, g, c = (load(n) for n in ("ddpc", "mpi", "gloo", "memcpy"))
def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "n/a"
bad = {n: sum(r["wrong"] or 0 for r in t.values()) for n, t in (("ddpc", d), ("mpi", m), ("gloo", g))}
coll_name = d[min(d)]["bench"]
print(f"{coll_name}, world size {nproc}, {d[min(d)]['type']} {d[min(d)]['redop']}; busbw in GB/s "
      "(nccl-tests' definition); memcpy: one thread, bytes copied per second\n")
print("| size (B) | ddpc busbw | MPI busbw | gloo busbw | memcpy GB/s | ddpc/MPI | ddpc/gloo |")
print("|---:|---:|---:|---:|---:|---:|---:|")
for s in sorted(d):
    mm, gg, cc = m.get(s), g.get(s), c.get(s)
    row = [str(s), f"{d[s]['busbw']:.2f}",
           f"{mm['busbw']:.2f}" if mm else "n/a", f"{gg['busbw']:.2f}" if gg else "n/a",
           f"{cc['gbps']:.2f}" if cc else "n/a",
           ratio(d[s]["busbw"], mm["busbw"]) if mm else "n/a",
           ratio(d[s]["busbw"], gg["busbw"]) if gg else "n/a"]
    print("| " + " | ".join(row) + " |")
s = min(d)
lat = f"\nlatency at {s} B: ddpc {d[s]['time_us']:.2f} us, MPI "
lat += f"{m[s]['time_us']:.2f} us" if s in m else "n/a"
lat += f", gloo {g[s]['time_us']:.2f} us" if s in g else ", gloo n/a"
if s in m and d[s]["time_us"] > 0:
    lat += f" (MPI/ddpc time {m[s]['time_us'] / d[s]['time_us']:.2f})"
print(lat)
# Issue #3's bar, judged on this run: at >= 1 MiB, ddpc busbw >= MPI's and >= 2x gloo's; at the
# smallest size, ddpc's time <= MPI's.
big = [s for s in sorted(d) if s >= 1 << 20 and s in m and s in g]
if big:
    def verdict(ok):
        return "yes" if ok else "NO"
    vs_mpi = [s for s in big if d[s]["busbw"] < m[s]["busbw"]]
    vs_gloo = [s for s in big if d[s]["busbw"] < 2 * g[s]["busbw"]]
    print(f"\nbar at >= 1 MiB: ddpc >= MPI {verdict(not vs_mpi)}"
          + (f" (below at {', '.join(map(str, vs_mpi))})" if vs_mpi else "")
          + f"; ddpc >= 2x gloo {verdict(not vs_gloo)}"
          + (f" (below at {', '.join(map(str, vs_gloo))})" if vs_gloo else ""))
if s in m:
    print(f"bar at {s} B: ddpc time <= MPI time {'yes' if d[s]['time_us'] <= m[s]['time_us'] else 'NO'}")
if any(bad.values()):
    print("WRONG RESULTS: " + ", ".join(f"{k} {v}" for k, v in bad.items() if v), file=sys.stderr)
    sys.exit(1)
PY
