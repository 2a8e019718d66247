#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# dp_vs_ddp.sh DDPC_BIN: DataParallel (parallel.mode: dp, one process, one thread per replica) vs
# DDP (`ddpc run --nproc-per-node N`, one process per rank) on the same models and machine, at 1,
# 2 and 4 replicas/ranks (4 oversubscribes a 2-core machine), every replica/rank computing on one
# kernel thread. Prints the CPU, then Markdown tables on stdout: throughput, scaling vs 1
# replica, the dp/ddp ratio, and where each side's step goes (bench/README.md, "DataParallel vs
# DDP", explains the columns); the raw JSON lines go to stderr. Each cell is the median over
# REPEAT interleaved runs; other_cpu (bench/ddp_measure.py) says how busy the rest of the machine
# was meanwhile.
# Environment: MODELS (default "cnn mlp": bench/configs/*.yaml), REPLICAS ("1 2 4"), STEPS (20),
# WARMUP (3), REPEAT (3), PYTHON (/usr/bin/python3, for the table).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
MODELS=${MODELS:-"cnn mlp"}
REPLICAS=${REPLICAS:-"1 2 4"}
STEPS=${STEPS:-20}
WARMUP=${WARMUP:-3}
REPEAT=${REPEAT:-3}
[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc --all) cores;" \
    "$("$DDPC" env | sed -n 's/^ *Kernels ISA: */kernels: /p')"
echo

# One kernel thread per replica and per rank: dp gets num_threads=1 (its N replica threads each
# run their kernels on max(1, 1/N) = 1 thread), DDP ranks OMP_NUM_THREADS=1.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1 MKL_NUM_THREADS=1
unset OMP_WAIT_POLICY

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
MEASURE=("$PY" "$HERE/ddp_measure.py")

step=("$DDPC" bench step)
opts=(num_threads=1 bench.steps="$STEPS" bench.warmup="$WARMUP")

# run_dp MODEL N OUT / run_ddp MODEL N OUT: append the run's JSON line to OUT.
run_dp() {
    local cmd=("${step[@]}" "$HERE/configs/$1.yaml" "${opts[@]}" parallel.mode=dp
               parallel.replicas="$2")
    "${MEASURE[@]}" "$3" -- "${cmd[@]}" || { echo "$0: failed: ${cmd[*]}" >&2; return 1; }
}
run_ddp() {
    local cmd=("${step[@]}" "$HERE/configs/$1.yaml" "${opts[@]}")
    if [[ $2 -gt 1 ]]; then cmd=("$DDPC" run --nproc-per-node "$2" -- "${cmd[@]}"); fi
    "${MEASURE[@]}" "$3" -- "${cmd[@]}" || { echo "$0: failed: ${cmd[*]}" >&2; return 1; }
}

echo "load before: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
failed=0
for ((i = 1; i <= REPEAT; i++)); do
    for m in $MODELS; do
        for n in $REPLICAS; do
            # alternate which side runs first, so a slow spell hits both alike
            if (( (i + n) % 2 )); then
                run_dp "$m" "$n" "$TMP/dp_${m}_$n.jsonl" || failed=1
                run_ddp "$m" "$n" "$TMP/ddp_${m}_$n.jsonl" || failed=1
            else
                run_ddp "$m" "$n" "$TMP/ddp_${m}_$n.jsonl" || failed=1
                run_dp "$m" "$n" "$TMP/dp_${m}_$n.jsonl" || failed=1
            fi
        done
    done
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg) (1, 5, 15 min)" >&2
"$PY" "$HERE/dp_table.py" "$TMP" "$REPLICAS" $MODELS || failed=1
exit "$failed"
