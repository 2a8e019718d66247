#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Activation checkpointing through `ddpc train`: configs/gpt_fortunes.yaml (dropout on, a few
# steps of a small batch) writes bit-identical weights with model.activation_checkpointing true and
# false, at fp32 and bf16, on 1 rank and on 2 (DDP, whose bucket all-reduces start from the
# grad-ready hook while the recomputing backward runs); so does the cnn. The start-up line and
# `ddpc bench step` report the activation bytes both ways, the checkpointed figure the smaller.
# usage: cli_train_actckpt.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
# A 0.1% held-out split keeps the final evaluation short.
gpt=(max_steps=3 optim.warmup_steps=1 data.batch_size=2 data.val_fraction=0.001 eval_every=1000
     eval_batches=1 log_every=1 num_threads=1 model.dropout=0.1)
# train NAME LAUNCH... -- KEY=VALUE...: one run into $tmp/NAME (+ NAME.safetensors, NAME.log).
train() {
    local name=$1
    shift
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.safetensors" >"$tmp/$name.log" 2>&1 ||
        fail "$name exits 0" "$tmp/$name.log"
}
# pair NAME LAUNCH...: the run without and with checkpointing write the same weights.
pair() {
    local name=$1
    shift
    train "${name}_off" "$@" model.activation_checkpointing=false
    train "${name}_on" "$@" model.activation_checkpointing=true
    check "$name: same weights with and without checkpointing" \
        cmp "$tmp/${name}_off.safetensors" "$tmp/${name}_on.safetensors"
}
# smaller LOG: the start-up line's figure (MiB) is below the one in parentheses.
smaller() {
    local re='^activations: \([0-9.]*\) MiB per rank at batch 2 (checkpointing on; \([0-9.]*\) MiB'
    sed -n "s/$re without)\$/\\1 \\2/p" "$1" |
        awk 'NF == 2 && $1 > 0 && $1 < $2 { ok = 1 } END { exit !ok }'
}

one=("$ddpc" train "$src/configs/gpt_fortunes.yaml" "${gpt[@]}")
two=("$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/gpt_fortunes.yaml" "${gpt[@]}")
pair gpt_fp32 "${one[@]}"
check "start-up line reports the activations both ways" smaller "$tmp/gpt_fp32_on.log"
check "start-up line without checkpointing names the saving" grep -q \
    '^activations: .* MiB per rank at batch 2 (checkpointing off; .* MiB with)$' \
    "$tmp/gpt_fp32_off.log"
pair gpt_bf16 "${one[@]}" precision=bf16
pair gpt_ddp "${two[@]}"
check "2 ranks: the start-up line is printed once" \
    test "$(grep -c '^activations:' "$tmp/gpt_ddp_on.log")" -eq 1
check "2 ranks trained on different data than 1 rank" \
    bash -c "! cmp -s '$tmp/gpt_ddp_on.safetensors' '$tmp/gpt_fp32_on.safetensors'"
pair cnn "$ddpc" train "$src/configs/fmnist_cnn.yaml" data.type=synthetic_images data.size=256 \
    data.batch_size=16 max_steps=3 eval_batches=1 num_threads=1 model.dropout=0.2

"$ddpc" bench step "$src/configs/gpt_fortunes.yaml" data.batch_size=2 bench.steps=1 bench.warmup=0 \
    num_threads=1 model.activation_checkpointing=true >"$tmp/bench.json" 2>&1
check "bench step reports both activation figures, checkpointed the smaller" /usr/bin/python3 -c '
import json, sys
r = json.loads(open(sys.argv[1]).read())
sys.exit(not (r["activation_checkpointing"] is True and
              0 < r["activation_bytes"] < r["activation_bytes_no_ckpt"]))' "$tmp/bench.json"
summary
