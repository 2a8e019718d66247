#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# zero_bench.sh DDPC_BIN: ZeRO stages 0-3 of ddpc on the GPT step (bench/configs/gpt.yaml) at 2
# ranks of 1 thread each (`ddpc run` + `ddpc bench step`, shm backend), in one run. Prints a
# Markdown table on stdout: the median step time and throughput of each stage, its ratio to stage
# 0 (the issue's targets: stages 1 and 2 within 5%, stage 3 within 15%), and the bytes each rank
# communicates per step next to the ZeRO paper's volume (all-reduce 2Ψ(W-1)/W; stages 1 and 2
# reduce-scatter + all-gather, the same; stage 3 adds the gathers of backward, 3Ψ(W-1)/W, i.e.
# 1.5x), counted as a ring would send them (ddpc_pg_ring_bytes). The raw JSON lines go to stderr.
# Environment: STEPS (10), WARMUP (2), REPEAT (3: interleaved, the median step time kept), RANKS
# (2), BUCKET_MB (2: ddp.bucket_cap_mb and first_bucket_mb for every stage; stage 3 gathers one
# bucket at a time, so this is its granularity), PYTHON (/usr/bin/python3, reads the JSON).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PYTHON:-/usr/bin/python3}
STEPS=${STEPS:-10}
WARMUP=${WARMUP:-2}
REPEAT=${REPEAT:-3}
RANKS=${RANKS:-2}
BUCKET_MB=${BUCKET_MB:-2}
[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }
. "$HERE/lib.sh"
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
unset OMP_WAIT_POLICY

TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

# run STAGE: appends rank 0's JSON line of one `ddpc bench step` at that stage to $TMP/STAGE.
run() {
    "$DDPC" run --nproc-per-node "$RANKS" -- "$DDPC" bench step "$HERE/configs/gpt.yaml" \
        num_threads=1 bench.steps="$STEPS" bench.warmup="$WARMUP" zero.stage="$1" \
        ddp.bucket_cap_mb="$BUCKET_MB" ddp.first_bucket_mb="$BUCKET_MB" 2>"$TMP/err" |
        grep '^{' | tee -a "$TMP/$1" >&2 ||
        { echo "$0: ddpc failed at zero.stage $1:" >&2; tail -n 5 "$TMP/err" >&2; exit 1; }
}

for ((r = 0; r < REPEAT; r++)); do
    for stage in 0 1 2 3; do run $stage; done
done

params=$(json params <"$TMP/0")
"$DDPC" env | sed -n 's/^ *\(CPU\|SIMD (CPU)\): *\(.*\)$/\1: \2/p'
echo "GPT of bench/configs/gpt.yaml (${params:-?} parameters = Ψ), $RANKS ranks x 1 thread," \
    "ddp.bucket_cap_mb $BUCKET_MB, median of $REPEAT runs of $STEPS steps"
echo
"$PY" - "$TMP" "$RANKS" "${params:-0}" <<'EOF'
import json, statistics, sys
tmp, w, psi = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
rows = {}
for stage in range(4):
    lines = [json.loads(l) for l in open(f"{tmp}/{stage}")]
    rows[stage] = (statistics.median(l["median_step_ms"] for l in lines),
                   statistics.median(l["global_tokens_per_s"] for l in lines),
                   statistics.median(l["comm_bytes"] for l in lines))
print("| zero.stage | step ms | tokens/s | x stage 0 | target | comm bytes/step/rank | "
      "ZeRO paper | measured / paper |")
print("|---|---|---|---|---|---|---|---|")
base = rows[0][1]
for stage, (ms, tps, b) in rows.items():
    theory = (3 if stage == 3 else 2) * psi * 4 * (w - 1) / w
    target = "1" if stage == 0 else ">= 0.95" if stage < 3 else ">= 0.85"
    print(f"| {stage} | {ms:.1f} | {tps:.0f} | {tps / base:.3f} | {target} | {b / 1e6:.2f} MB | "
          f"{theory / 1e6:.2f} MB | {b / theory:.3f} |" if theory else
          f"| {stage} | {ms:.1f} | {tps:.0f} | {tps / base:.3f} | {target} | {b:.0f} | n/a | n/a |")
EOF
