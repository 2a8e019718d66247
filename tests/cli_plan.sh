#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The memory plan through the real CLI (docs/memory.md, "Memory plan"): `ddpc plan --bytes` for
# configs/fmnist_mlp.yaml at 1, 2 and 4 ranks equals the formulas, computed here from the layer
# sizes alone, at every zero.stage (SGD and AdamW, f32 and bf16 communication); the default limit
# is MemAvailable over the ranks; a config over memory.limit_gb is refused by `ddpc plan` and by
# `ddpc train` (1 and 2 ranks) before anything is trained or written, naming the largest item and
# a fix; a normal run logs the plan and the measured peak (at least parameters + gradients +
# optimizer state of the plan) and writes the memory keys to metrics.jsonl once.
# usage: cli_plan.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg="$src/configs/fmnist_mlp.yaml"
small=(data.type=synthetic_images data.size=512 data.eval_batch_size=64 num_threads=1)

check "ddpc --help lists plan" sh -c "'$ddpc' --help | grep -q '^  plan CONFIG \[--nproc N\]'"

# The model, independently: fc 784-256-128-10; each tensor starts on a 16-float boundary.
sizes="200704 256 32768 128 1280 10" # fc.0.weight, fc.0.bias, fc.1.*, fc.2.* (out x in, out)
n=$(echo $sizes | awk '{ for (i = 1; i <= NF; i++) s += int(($i + 15) / 16) * 16; print s }')
# With the default 1 MB first bucket every tensor lands in one bucket, from fc.0.weight to the end
# of fc.2.bias: all but the last tensor's padding.
L=$((n - 6))
check "the model fits one 1 MB bucket ($L floats)" test $((4 * L)) -le 1048576
# The mlp's arena at batch 128: 3 (n, widest) + (n, classes) (cross-entropy writes its gradient
# over the outputs) + (n) + the hidden activations.
r16() { echo $(((($1) + 15) / 16 * 16)); }
B=128
act=$((4 * (3 * $(r16 $((B * 784))) + $(r16 $((B * 10))) + $(r16 $B) +
            $(r16 $((B * 256))) + $(r16 $((B * 128))))))

# expect W K STAGE COMM_HALF: "params grads optim activations comm total" per the formulas.
expect() {
    local w=$1 k=$2 s=$3 half=$4 p g o c
    local own=$(((L + w - 1) / w)) pad=$((((L + w - 1) / w) * w))
    [ "$w" -eq 1 ] && s=0
    p=$((4 * n)) g=$((4 * n)) o=$((4 * k * n)) c=0
    [ "$s" -eq 0 ] && [ "$w" -gt 1 ] && [ "$half" -eq 1 ] && c=$((2 * L))
    [ "$s" -ge 1 ] && o=$((4 * k * own)) c=$((8 * pad))
    [ "$s" -ge 2 ] && g=$((4 * own))
    [ "$s" -ge 2 ] && [ "$half" -eq 0 ] && c=$((24 * pad)) # + the gradient pool of 4 (f32)
    [ "$s" -eq 3 ] && p=$((4 * own)) c=$((c + 12 * pad))   # + 3 parameter slots
    echo "$p $g $o $act $c $((p + g + o + act + c))"
}

# rows FILE: "stage params grads optim activations comm total" of each table row.
rows() { sed -n 's/^[* ] *\([0-3]\) *- \(.*\)$/\1 \2/p' "$1" | awk '{ $1 = $1; print }'; }

# plan_ok NAME W K HALF ARGS...: every stage's row equals the formulas.
plan_ok() {
    local name=$1 w=$2 k=$3 half=$4
    shift 4
    "$ddpc" plan "$cfg" --nproc "$w" --bytes "$@" >"$tmp/$name.out" 2>&1
    check "$name: ddpc plan exits 0" test $? -eq 0
    rows "$tmp/$name.out" >"$tmp/$name.rows"
    : >"$tmp/$name.want"
    for s in 0 1 2 3; do echo "$s $(expect "$w" "$k" "$s" "$half")" >>"$tmp/$name.want"; done
    check "$name: stages 0-3 equal the formulas" diff "$tmp/$name.want" "$tmp/$name.rows" ||
        cat "$tmp/$name.out"
}
for w in 1 2 4; do
    plan_ok "sgd$w" "$w" 1 0
    plan_ok "adamw$w" "$w" 2 0 optim.type=adamw optim.nesterov=false optim.momentum=0
done
plan_ok bf16_4 4 1 1 ddp.comm_dtype=bf16
check "the configured row is starred" grep -q '^\*     0     - ' "$tmp/sgd2.out"
check "one rank says every stage runs as stage 0" grep -q '^(one rank: every zero.stage' "$tmp/sgd1.out"
check "the default limit is MemAvailable over the ranks" \
    grep -q '^limit: .* per rank: this machine.s available memory (MemAvailable, as memory.limit_gb is unset) is .*, .* for each of its 4 ranks$' \
    "$tmp/sgd4.out"
check "a plan that fits says so" sh -c "tail -n 1 '$tmp/sgd1.out' | grep -qx fits"
check "the gpt table has rows with and without checkpointing" sh -c \
    "'$ddpc' plan '$src/configs/gpt_fortunes.yaml' --nproc 2 | grep -c '^[* ] *[0-3] *o[nf]' | grep -qx 8"

"$ddpc" plan "$cfg" memory.limit_gb=0.001 >"$tmp/tiny.out" 2>"$tmp/tiny.err"
check "ddpc plan over the limit exits 1" test $? -eq 1
check "... after printing the table" grep -q '^limit: 1.02 MiB per rank: memory.limit_gb is 0.001$' "$tmp/tiny.out"
check "... with the refusal" grep -q '^ddpc plan: the plan needs .* per rank (largest: .*) but memory.limit_gb is 0.001' "$tmp/tiny.err"
"$ddpc" plan "$cfg" --nproc 0 >/dev/null 2>&1
check "--nproc 0 is a usage error" test $? -eq 2
"$ddpc" plan "$cfg" model.hiden=3 >/dev/null 2>"$tmp/typo.err"
check "an unknown key is an error" grep -q "model.hiden" "$tmp/typo.err"

# Refusals before training. The mlp with AdamW needs 16 bytes per parameter at stage 0.
refuse=("$cfg" "${small[@]}" optim.type=adamw optim.nesterov=false optim.momentum=0
        'model.hidden=[128, 128, 128, 128]' ddp.bucket_cap_mb=0.05 ddp.first_bucket_mb=0.05
        max_steps=2 checkpoint.every_steps=1)
# 3.71 MiB at stage 0; stage 1 on 4 ranks needs 3.61 MiB (its optimizer state shrinks by more
# than its two staging buffers cost).
"$ddpc" train "${refuse[@]}" memory.limit_gb=0.00355 run_dir="$tmp/r1" >"$tmp/r1.log" 2>&1
check "train over memory.limit_gb exits 1" test $? -eq 1
check "... naming the total, the limit and the largest item" grep -q \
    '^ddpc train: the plan needs [0-9.]* MiB per rank (largest: activations 1.40 MiB) but memory.limit_gb is 0.00355; ' \
    "$tmp/r1.log" || cat "$tmp/r1.log"
check "... and a fix (one rank: more ranks, sharded)" \
    grep -q '; zero.stage [1-3] on [0-9]* ranks would need .* per rank$' "$tmp/r1.log"
check "... before training: no step logged" sh -c "! grep -q '^step' '$tmp/r1.log'"
check "... nothing written to the run directory" test ! -e "$tmp/r1"

# The GPT: the cheapest fix is checkpointing when it is enough, else a stage. Limits between two
# rows of its table (in bytes, as memory.limit_gb in GiB).
gpt=("$src/configs/gpt_fortunes.yaml" model.n_layer=2 data.batch_size=2 optim.type=adamw
     ddp.bucket_cap_mb=1 max_steps=2 eval_batches=1 num_threads=1)
total() { sed -n "s/^[* ] *$2 *$3 .* \([0-9]*\)$/\1/p" "$1"; }
gb() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.12f", (a + b) / 2 / 1073741824 }'; }
"$ddpc" plan "${gpt[@]}" --nproc 1 --bytes >"$tmp/g1.out" 2>&1
lim=$(gb "$(total "$tmp/g1.out" 0 on)" "$(total "$tmp/g1.out" 0 off)")
"$ddpc" train "${gpt[@]}" memory.limit_gb="$lim" run_dir="$tmp/g1" >"$tmp/g1.log" 2>&1
check "gpt over the limit exits 1" test $? -eq 1
check "... suggesting activation checkpointing" \
    grep -q "but memory.limit_gb is .*; model.activation_checkpointing true would need .* per rank$" \
    "$tmp/g1.log" || cat "$tmp/g1.log"
"$ddpc" plan "${gpt[@]}" --nproc 2 --bytes >"$tmp/g2.out" 2>&1
t0c=$(total "$tmp/g2.out" 0 on) t1=$(total "$tmp/g2.out" 1 off)
check "at 2 ranks stage 1 needs less than checkpointing ($t1 < $t0c)" test "$t1" -lt "$t0c"
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" memory.limit_gb="$(gb "$t1" "$t0c")" \
    run_dir="$tmp/g2" >"$tmp/g2.log" 2>&1
check "2 ranks over the limit exit non-zero" test $? -ne 0
check "... refusing, suggesting zero.stage 1 (the launcher stops the other rank)" \
    grep -q '^ddpc train: the plan needs .* but memory.limit_gb is .*; zero.stage 1 would need' "$tmp/g2.log"
check "... nothing written" test ! -e "$tmp/g2"

# A normal run: the plan line, the limit, the measured peak after step 1, the metrics keys.
"$ddpc" plan "$cfg" --bytes "${small[@]}" data.batch_size=32 >"$tmp/p1.out" 2>&1
"$ddpc" train "$cfg" "${small[@]}" data.batch_size=32 max_steps=3 log_every=1 \
    memory.limit_gb=1 run_dir="$tmp/ok" >"$tmp/ok.log" 2>&1
check "a normal run exits 0" test $? -eq 0
check "it logs the plan" grep -q '^memory plan per rank (zero.stage 0, 1 rank): parameters 919 KiB, gradients 919 KiB, optimizer state 919 KiB, activations .*; total .*' "$tmp/ok.log"
check "and the limit" grep -q '^memory limit 1.00 GiB per rank: memory.limit_gb is 1$' "$tmp/ok.log"
check "and the measured peak once" test "$(grep -c '^memory after step 1: plan .*, allocator peak .* (live .*), RSS .* (peak .*)$' "$tmp/ok.log")" -eq 1
m="$tmp/ok/metrics.jsonl"
check "metrics.jsonl has the memory keys once" test "$(grep -c '"mem_plan_bytes": [0-9]*, "mem_alloc_peak_bytes": [0-9]*, "mem_alloc_live_bytes": [0-9]*, "mem_rss_bytes": [0-9]*, "mem_rss_peak_bytes": [0-9]*, "mem_params_bytes": [0-9]*, "mem_grads_bytes": [0-9]*, "mem_optim_bytes": [0-9]*, "mem_comm_bytes": [0-9]*, "mem_plan_params_bytes": [0-9]*, "mem_plan_grads_bytes": [0-9]*, "mem_plan_optim_bytes": [0-9]*, "mem_plan_activations_bytes": [0-9]*, "mem_plan_comm_bytes": [0-9]*}' "$m")" -eq 1
key() { sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p" "$m" | head -n 1; }
read -r pp pg po pa pc pt < <(rows "$tmp/p1.out" | awk '$1 == 0 { print $2, $3, $4, $5, $6, $7 }')
check "mem_plan_bytes is ddpc plan's total ($pt)" test "$(key mem_plan_bytes)" = "$pt"
check "the allocator peak holds parameters + gradients + optimizer state" \
    test "$(key mem_alloc_peak_bytes)" -ge $((pp + pg + po))
check "the peak RSS holds the allocator's live bytes" \
    test "$(key mem_rss_peak_bytes)" -ge "$(key mem_alloc_live_bytes)"

# Two ranks: the plan of the job (zero.stage 1 shards the optimizer state) equals ddpc plan's.
"$ddpc" plan "$cfg" --nproc 2 --bytes "${small[@]}" data.batch_size=16 zero.stage=1 >"$tmp/p2.out" 2>&1
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${small[@]}" data.batch_size=16 \
    zero.stage=1 max_steps=2 run_dir="$tmp/ok2" >"$tmp/ok2.log" 2>&1
check "a 2-rank stage-1 run exits 0" test $? -eq 0
m="$tmp/ok2/metrics.jsonl"
pt2=$(rows "$tmp/p2.out" | awk '$1 == 1 { print $7 }')
check "its mem_plan_bytes is ddpc plan --nproc 2's stage-1 total ($pt2)" test "$(key mem_plan_bytes)" = "$pt2"
check "its plan line says 2 ranks" grep -q '^memory plan per rank (zero.stage 1, 2 ranks)' "$tmp/ok2.log"
check "its default limit is MemAvailable over the 2 local ranks" grep -q \
    "^memory limit .* per rank: this machine's available memory (MemAvailable, as memory.limit_gb is unset) is .*, .* for each of its 2 ranks$" \
    "$tmp/ok2.log"
"$ddpc" plan --help >"$tmp/help.log" 2>&1
check "ddpc plan --help exits 0 with its usage" grep -q "^usage: ddpc plan CONFIG" "$tmp/help.log"
"$ddpc" plan "$cfg" --batch_size 64 --nproc 2 >"$tmp/flag.log" 2>&1
check "ddpc plan takes seed-style flags (--batch_size 64)" grep -q "batch 64 per rank" "$tmp/flag.log"
# docs/memory.md's gpt_fortunes example: the logits' gradient is written over them, so the arena
# holds one (B, T, V) buffer (172 MiB without checkpointing, 70.2 MiB with; 174 and 72.2 when a
# separate gradient buffer was carved), and the rows are the page's.
"$ddpc" plan "$src/configs/gpt_fortunes.yaml" --nproc 4 optim.type=adamw >"$tmp/gpt.out" 2>&1
check "ddpc plan of gpt_fortunes exits 0" test $? -eq 0
check "... stage 0 without checkpointing as docs/memory.md shows" grep -Eq \
    '^\*     0   off +12.4 MiB +12.4 MiB +24.9 MiB +172 MiB +0 B +222 MiB$' "$tmp/gpt.out"
check "... and with checkpointing" grep -Eq \
    '^      0    on +12.4 MiB +12.4 MiB +24.9 MiB +70.2 MiB +0 B +120 MiB$' "$tmp/gpt.out"
summary
