#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ckpt_bench.sh DDPC_BIN: what checkpointing costs a training run. Trains configs/gpt_fortunes.yaml
# (3.2M parameters + AdamW state, 38 MB per checkpoint) for STEPS steps without checkpoints and
# with checkpoint.every_steps=EVERY, alternating, REPEAT rounds (a 0.1% held-out split keeps the
# final evaluation every run ends with short), and prints the CPU, the time each
# save took (write + fsync of 3 files + renames, as the trainer measures it), the share of the
# checkpointing run's time spent saving, and the wall-time difference between the two runs; then
# the peer: PyTorch's torch.save of the same tensors, fsynced and renamed (bench/ckpt_torch.py).
# Environment: STEPS (default 200), EVERY (100), REPEAT (2), PYTHON (/usr/bin/python3).
set -euo pipefail
[[ $# -eq 1 && -x $1 ]] || { echo "usage: $0 DDPC_BIN" >&2; exit 2; }
DDPC=$1
HERE=$(cd "$(dirname "$0")/.." && pwd)
STEPS=${STEPS:-200}
EVERY=${EVERY:-100}
REPEAT=${REPEAT:-2}
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
cpu=$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')
isa=$(grep -m1 -ow 'avx512f\|avx512_bf16\|amx_tile\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "cpu: $cpu ($(getconf _NPROCESSORS_ONLN) cores; $isa)"
echo "config: configs/gpt_fortunes.yaml, $STEPS steps, checkpoint.every_steps=$EVERY, $REPEAT rounds"
warmup=$((STEPS < 100 ? STEPS : 100)) # the config's 100, or fewer for a short check
run() { # run NAME EVERY: prints the "done in" line
    if ! "$DDPC" train "$HERE/configs/gpt_fortunes.yaml" max_steps="$STEPS" eval_every=1000000 \
        eval_batches=1 log_every=1000000 resume=never checkpoint.every_steps="$2" \
        optim.warmup_steps="$warmup" data.val_fraction=0.001 run_dir="$TMP/$1" >"$TMP/$1.log" 2>&1; then
        echo "$0: ddpc train failed:" >&2
        tail -n 3 "$TMP/$1.log" >&2
        exit 1
    fi
    grep '^done in' "$TMP/$1.log"
}
printf '| round | without: wall s | with: wall s | saving s | saves | saving share | wall difference |\n'
printf '|---|---|---|---|---|---|---|\n'
for r in $(seq "$REPEAT"); do
    # Alternate which goes first, so a drift of the machine's speed does not favour one side.
    if [ $((r % 2)) -eq 1 ]; then
        a=$(run "a$r" 0 | sed 's/done in \([0-9.]*\) s.*/\1/')
        line=$(run "b$r" "$EVERY")
    else
        line=$(run "b$r" "$EVERY")
        a=$(run "a$r" 0 | sed 's/done in \([0-9.]*\) s.*/\1/')
    fi
    b=$(echo "$line" | sed 's/done in \([0-9.]*\) s.*/\1/')
    s=$(echo "$line" | sed 's/.*(\([0-9.]*\) s, .*/\1/')
    n=$(grep -c '^saved checkpoint' "$TMP/b$r.log")
    awk -v r="$r" -v a="$a" -v b="$b" -v s="$s" -v n="$n" 'BEGIN {
        printf "| %d | %.1f | %.1f | %.2f | %d | %.2f%% | %+.2f%% |\n", r, a, b, s, n, 100 * s / b,
            100 * (b - a) / a }'
    rm -rf "$TMP/a$r"
done
saves=$(grep -h 'saved checkpoint' "$TMP"/b*.log | sed 's/.* in \([0-9.]*\) s/\1/' | sort -n)
median=$(echo "$saves" | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }')
last=$(grep -h 'saved checkpoint' "$TMP/b1.log" | tail -1 | sed 's/saved checkpoint \(.*\) in.*/\1/')
bytes=$(du -sb "$last" | cut -f1)
echo "ddpc saves: $(echo $saves | tr '\n' ' ')s; median $median s for $bytes bytes"
peer=$("${PYTHON:-/usr/bin/python3}" "$(dirname "$0")/ckpt_torch.py" "$last" 5)
echo "PyTorch torch.save of the same tensors (fsync + rename): $peer"
echo "$peer" | awk -v d="$median" '{ match($0, /"torch_save_median_s": [0-9.e-]+/);
    t = substr($0, RSTART + 23, RLENGTH - 23); printf "ddpc save / torch.save: %.2f\n", d / t }'
