#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/observe_bench.sh: what the default observability costs per training step (issue #13): the
# defaults (phase timers, TensorBoard writer, hang recorder files; profile.steps off) against all
# three off (log.phases: false, log.tensorboard: false, flight.enabled: false; the recorder's ring
# itself is always kept), on the GPT step of bench/configs/gpt.yaml through `ddpc train`. Each round runs both settings,
# alternating which goes first so drifting load hits both alike; a run's step time is the mean of
# its progress windows after the first (warm-up), from samples_per_s (measured with or without the
# timers). Prints CPU/ISA, the medians over ROUNDS and on/off (1.00 = free; the timers add a dozen
# clock reads per step, far below this VM's run-to-run noise).
# usage: bench/observe_bench.sh DDPC_BIN   knobs: ROUNDS=5 STEPS=25 WINDOW=5 THREADS=1
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
PY=${PY:-/usr/bin/python3}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-25}
WINDOW=${WINDOW:-5}
THREADS=${THREADS:-1}
DDPC=${1:-$(dirname "$HERE")/build/ddpc}
. "$HERE/lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$("$DDPC" env | sed -n 's/^ *Kernels ISA: */kernels: /p')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
# step_ms RUN_DIR: mean ms per step over the progress windows after the first.
step_ms() {
    "$PY" - "$1/metrics.jsonl" <<'PY'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
win = [r for r in recs if "samples_per_s" in r][1:]
batch = 8  # bench/configs/gpt.yaml, one rank
print(f"{sum(1000.0 * batch / r['samples_per_s'] for r in win) / len(win):.2f}")
PY
}
: >"$TMP/on"
: >"$TMP/off"
for ((r = 0; r < ROUNDS; r++)); do
    order=(on off)
    ((r % 2)) && order=(off on)
    for which in "${order[@]}"; do
        on=true
        [[ $which == off ]] && on=false
        rm -rf "$TMP/run"
        thread_env "$THREADS" "$DDPC" train "$HERE/configs/gpt.yaml" num_threads="$THREADS" \
            max_steps="$STEPS" log_every="$WINDOW" eval_every=0 eval_batches=1 \
            data.eval_batch_size=64 log.phases=$on log.tensorboard=$on flight.enabled=$on \
            run_dir="$TMP/run" >/dev/null
        step_ms "$TMP/run" >>"$TMP/$which"
    done
done
on=$(median <"$TMP/on")
off=$(median <"$TMP/off")
echo
echo "| model | threads | defaults on: median step ms | all off | on / off |"
echo "|---|---|---|---|---|"
echo "| gpt | $THREADS | $on | $off | $("$PY" -c "import sys; print(f'{float(sys.argv[1]) / float(sys.argv[2]):.3f}')" "$on" "$off") |"
echo "per run (on): $(tr '\n' ' ' <"$TMP/on")"
echo "per run (off): $(tr '\n' ' ' <"$TMP/off")"
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
