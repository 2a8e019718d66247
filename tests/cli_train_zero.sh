#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# ZeRO stages 1, 2 and 3 through `ddpc run`. Stage 1: each rank keeps the optimizer state of its
# chunk of every gradient bucket and the updated chunks are all-gathered, so the weights are
# byte-identical to stage 0's. Stage 2: the buckets are reduce-scattered instead of all-reduced,
# and the global norm is the all-reduced sum of the shards' squares; stage 3: the parameters are
# gathered bucket by bucket when forward/backward read them (small buckets: many gathers and
# prefetches). Stages 2 and 3 equal stage 0's weights within 1e-6 relative; reruns are
# byte-identical. SGD with momentum and AdamW, with
# clipping, grad_accum_steps 2, bf16, fp16 with overflows, ddp.comm_dtype bf16, activation
# checkpointing and the multi-task trainer, at 2 and 4 ranks (the GPT at 2). The
# start line says what rank 0 holds; zero.stage 4 is out of range. Checkpoints under ZeRO:
# cli_train_zero_ckpt.sh.
# usage: cli_train_zero.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
mlp=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=640 max_steps=20 log_every=5
     data.eval_batch_size=50 num_threads=1 'model.hidden=[64, 32]' optim.grad_clip=0.5)
gpt=("$src/configs/gpt_fortunes.yaml" max_steps=8 eval_every=0 eval_batches=1 log_every=4
     model.n_layer=2 model.n_embd=64 model.block_size=32 model.dropout=0.1 data.eval_batch_size=8
     num_threads=1 optim.warmup_steps=2 data.batch_size=4)
sgd=(optim.type=sgd optim.lr=0.05 optim.momentum=0.9)
adamw=(optim.type=adamw optim.lr=0.003 optim.weight_decay=0.1 optim.nesterov=false optim.momentum=0)

# run NAME STAGE RANKS ARGS...: one run into $tmp/NAME.STAGE (+ .st, .log).
run() {
    local name=$1 stage=$2 n=$3
    shift 3
    "$ddpc" run --nproc-per-node "$n" -- "$ddpc" train "$@" zero.stage=$stage \
        run_dir="$tmp/$name.$stage" weights_out="$tmp/$name.$stage.st" >"$tmp/$name.$stage.log" 2>&1
    check "$name stage $stage exits 0" test $? -eq 0 || tail -n 5 "$tmp/$name.$stage.log"
}

# pair NAME RANKS ARGS...: stage 0 to 3 runs of the same job; stage 1's weights must be stage
# 0's bits, stage 2's and 3's within 1e-6 relative.
pair() {
    local name=$1 n=$2
    shift 2
    for stage in 0 1 2 3; do
        run "$name" $stage "$n" "$@"
    done
    check "$name: stage 1 weights equal stage 0's" cmp "$tmp/$name.0.st" "$tmp/$name.1.st"
    for stage in 2 3; do
        check "$name: stage $stage weights within 1e-6 of stage 0's" /usr/bin/python3 \
            "$src/tests/weights_close.py" "$tmp/$name.$stage.st" "$tmp/$name.0.st" 1e-6
    done
}
small=(ddp.bucket_cap_mb=0.05 ddp.first_bucket_mb=0.01) # several buckets: stage 3 gathers often

pair sgd2 2 "${mlp[@]}" "${sgd[@]}" data.batch_size=8
# shard_ok LOG RANKS WHAT: rank 0 holds ceil(P / RANKS) of the MLP's P = 784*64+64 + 64*32+32 +
# 32*10+10 parameters, all in one bucket (the flat buffer may be a few floats longer: alignment).
shard_ok() {
    sed -n "s/^zero stage [123]: rank 0 holds the $3 of \([0-9]*\) of \([0-9]*\) parameters (1\/\([0-9]*\) of each of 1 buckets)\$/\1 \2 \3/p" "$1" |
        awk -v w="$2" -v p=$((784 * 64 + 64 + 64 * 32 + 32 + 32 * 10 + 10)) \
            '{ ok = $3 == w && $2 >= p && $1 == int((p + w - 1) / w) } END { exit !ok }'
}
check "the start line says rank 0 holds half of the parameters' state" \
    shard_ok "$tmp/sgd2.1.log" 2 "optimizer state"
check "at stage 2, of their gradients too" \
    shard_ok "$tmp/sgd2.2.log" 2 "optimizer state and gradients"
run sgd2_again 2 2 "${mlp[@]}" "${sgd[@]}" data.batch_size=8
check "a stage 2 rerun is byte-identical" cmp "$tmp/sgd2.2.st" "$tmp/sgd2_again.2.st"
pair adamw2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=8 "${small[@]}"
check "at stage 3, of their parameters too" shard_ok "$tmp/sgd2.3.log" 2 \
    "optimizer state, gradients and parameters"
pair accum2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=4 optim.grad_accum_steps=2 "${small[@]}"
pair bf16_2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=8 precision=bf16
pair adamw4 4 "${mlp[@]}" "${adamw[@]}" data.batch_size=4
pair sgd4 4 "${mlp[@]}" "${sgd[@]}" data.batch_size=4 "${small[@]}"
check "4 ranks: a quarter each (rounded up)" shard_ok "$tmp/adamw4.2.log" 4 "optimizer state and gradients"
pair comm_bf16_2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=8 ddp.comm_dtype=bf16
pair gpt2 2 "${gpt[@]}" "${small[@]}"
run gpt2_again 3 2 "${gpt[@]}" "${small[@]}"
check "a GPT stage 3 rerun is byte-identical" cmp "$tmp/gpt2.3.st" "$tmp/gpt2_again.3.st"
# comm_bytes: ring bytes per rank and step, the ZeRO paper's volumes: stages 1 and 2 move what
# DDP's all-reduce moves (reduce-scatter + all-gather; within the chunk padding), stage 3 adds
# the parameter gathers of backward (the two buckets in use at the turn are not gathered again).
bytes_of() { sed -n 's/.*"step": 8,.*"comm_bytes": \([0-9]*\).*/\1/p' "$tmp/$1/metrics.jsonl"; }
b0=$(bytes_of gpt2.0) b1=$(bytes_of gpt2.1) b2=$(bytes_of gpt2.2) b3=$(bytes_of gpt2.3)
check "comm_bytes: stage 0 all-reduces 4 bytes x params ($b0)" \
    test "$b0" = "$(sed -n 's/^training gpt: \([0-9]*\) parameters.*/\1/p' "$tmp/gpt2.0.log" | awk '{print $1 * 4}')"
check "stages 1 and 2 move what stage 0 does, within 0.1% ($b1, $b2)" \
    awk -v a="$b0" -v b="$b1" -v c="$b2" 'BEGIN { exit !(b >= a && c >= a && b < a * 1.001 && c < a * 1.001) }'
check "stage 3 moves 1.3 to 1.5 times as much ($b3)" \
    awk -v a="$b0" -v b="$b3" 'BEGIN { exit !(b > a * 1.3 && b <= a * 1.5) }'
pair gpt_ckpt2 2 "${gpt[@]}" "${small[@]}" model.activation_checkpointing=true precision=bf16
# ddpc bench step reports the stage, the ring bytes per step and the parameter count.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" bench step "${gpt[@]}" "${small[@]}" zero.stage=3 \
    bench.steps=2 bench.warmup=1 >"$tmp/bench.json" 2>"$tmp/bench.err"
check "bench step runs at stage 3" test $? -eq 0
check "... and reports zero_stage 3, comm_bytes and params" \
    grep -Eq '"zero_stage": 3, "comm_bytes": [1-9][0-9]*, "params": [1-9][0-9]*[,}]' "$tmp/bench.json"
# Prediction runs on rank 0 alone: stage 3 gathers the parameters first, and samples what
# stage 0 samples from the same weights.
for stage in 0 3; do
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" "${small[@]}" state=predict \
        init_from="$tmp/gpt2.0.st" predict.samples=2 predict.max_new_tokens=20 zero.stage=$stage \
        run_dir="$tmp/predict.$stage" >"$tmp/predict.$stage.log" 2>&1
    check "predict at stage $stage exits 0" test $? -eq 0 || tail -n 3 "$tmp/predict.$stage.log"
done
check "stage 3 predicts what stage 0 predicts" cmp "$tmp/predict.0/samples.txt" "$tmp/predict.3/samples.txt"
# fp16 with loss scaling from 2^24: the first steps overflow and are skipped alike at every stage
# (the overflow check of a sharded stage is the all-reduced sum of the shards' squares).
pair fp16_2 2 "${gpt[@]}" "${small[@]}" precision=fp16 loss_scale.init_scale=16777216 log_every=1
for stage in 0 1 2 3; do
    check "fp16 stage $stage: 3 overflowing steps skipped, the scale backed off to 2^21" \
        grep -q '"step": 8,.*"skipped_steps": 3, "loss_scale": 2097152}' "$tmp/fp16_2.$stage/metrics.jsonl"
done
# The multi-task trainer: two tasks' backward passes feed one step, synchronised after both.
mt=("$src/configs/fmnist_multitask.yaml" tasks.0.data.type=synthetic_images
    tasks.1.data.type=synthetic_images tasks.0.data.size=256 tasks.1.data.size=256 max_steps=6
    epochs=1 log_every=3 eval_batches=1 data.eval_batch_size=32 'model.channels=[4, 8]'
    'model.hidden=[16]' data.batch_size=8 num_threads=1 ddp.bucket_cap_mb=0.01 ddp.first_bucket_mb=0.005)
pair multitask2 2 "${mt[@]}"

"$ddpc" train "${mlp[@]}" zero.stage=4 run_dir="$tmp/s4" >"$tmp/s4.log" 2>&1
check "zero.stage 4 is refused naming the key" grep -q "zero.stage" "$tmp/s4.log"

summary
