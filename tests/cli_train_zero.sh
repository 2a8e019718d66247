#!/usr/bin/env bash
# ZeRO stage 1 through `ddpc run`: each rank keeps the optimizer state of its 1/N slice of the
# parameters and the updated slices are all-gathered, so the weights are byte-identical to
# stage 0's — SGD with momentum and AdamW, with clipping, grad_accum_steps 2 and bf16, at 2 and
# 4 ranks (the GPT at 2). The start line says what rank 0 holds; checkpoints are refused at stage 1
# (no sharded format yet) with one clear error; zero.stage 2 is out of range.
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

# pair NAME RANKS ARGS...: stage 0 and stage 1 runs of the same job; their weights must be equal.
pair() {
    local name=$1 n=$2
    shift 2
    for stage in 0 1; do
        "$ddpc" run --nproc-per-node "$n" -- "$ddpc" train "$@" zero.stage=$stage \
            run_dir="$tmp/$name.$stage" weights_out="$tmp/$name.$stage.st" >"$tmp/$name.$stage.log" 2>&1
        check "$name stage $stage exits 0" test $? -eq 0 || tail -n 5 "$tmp/$name.$stage.log"
    done
    check "$name: stage 1 weights equal stage 0's" cmp "$tmp/$name.0.st" "$tmp/$name.1.st"
}

pair sgd2 2 "${mlp[@]}" "${sgd[@]}" data.batch_size=8
# shard_ok LOG RANKS: rank 0's range is [0, ceil(N / RANKS)) of the N parameters.
shard_ok() {
    sed -n 's/^zero stage 1: rank 0 holds the optimizer state of parameters \[0, \([0-9]*\)) of \([0-9]*\) (1\/\([0-9]*\) per rank)$/\1 \2 \3/p' "$1" |
        awk -v w="$2" '{ ok = $3 == w && $2 > 0 && $1 == int(($2 + w - 1) / w) } END { exit !ok }'
}
check "the start line says rank 0 holds the first half of the parameters' state" shard_ok "$tmp/sgd2.1.log" 2
pair adamw2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=8
pair accum2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=4 optim.grad_accum_steps=2
pair bf16_2 2 "${mlp[@]}" "${adamw[@]}" data.batch_size=8 precision=bf16
pair adamw4 4 "${mlp[@]}" "${adamw[@]}" data.batch_size=4
pair sgd4 4 "${mlp[@]}" "${sgd[@]}" data.batch_size=4
check "4 ranks: a quarter each (rounded up)" shard_ok "$tmp/sgd4.1.log" 4
pair gpt2 2 "${gpt[@]}"

"$ddpc" train "${mlp[@]}" zero.stage=1 checkpoint.every_steps=5 run_dir="$tmp/ck" >"$tmp/ck.log" 2>&1
check "checkpoints at stage 1 exit 1" test $? -eq 1
check "with one line that says why" grep -q "zero.stage 1 cannot write checkpoints yet" "$tmp/ck.log"
"$ddpc" train "${mlp[@]}" checkpoint.every_steps=5 run_dir="$tmp/old" >"$tmp/old.log" 2>&1
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" zero.stage=1 run_dir="$tmp/old" \
    >"$tmp/old1.log" 2>&1
check "a stage-1 job over a run dir with checkpoints exits 1" test $? -eq 1
check "saying it cannot resume from them yet" \
    grep -q "zero.stage 1 cannot resume from checkpoints yet (found .*step-00000020)" "$tmp/old1.log"
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" zero.stage=1 run_dir="$tmp/old" \
    resume=never >"$tmp/old2.log" 2>&1
check "resume: never starts over at stage 1" test $? -eq 0
"$ddpc" train "${mlp[@]}" zero.stage=2 run_dir="$tmp/s2" >"$tmp/s2.log" 2>&1
check "zero.stage 2 is refused naming the key" grep -q "zero.stage" "$tmp/s2.log"

summary
