#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Gradient accumulation through `ddpc train`: k = 2 micro-batches of b train like one batch of 2b
# (same samples, same losses and weights up to summation order) on 1 and 2 ranks with shuffle on
# and 0, 1 or 4 loader workers, and a rerun is bitwise identical. An earlier trainer kept pointers
# to micro-batches after asking the loader for the next one and trained on the wrong samples.
# usage: cli_train_accum.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
common=(data.type=synthetic_images data.size=1024 data.shuffle=true max_steps=4 log_every=1
        eval_every=1000 eval_batches=1 num_threads=1 optim.momentum=0.9 'model.hidden=[32]')
# losses DIR: the four training losses, one per line.
losses() { grep '"loss"' "$1/metrics.jsonl" | sed 's/.*"loss": \([0-9.]*\).*/\1/'; }
# close A B: every line of A within 2e-5 of the same line of B (summation order differs).
close() {
    paste "$1" "$2" | awk 'NF != 2 { bad = 1 } { d = $1 - $2; if (d < 0) d = -d; if (d > 2e-5) bad = 1 }
        END { exit bad || NR != 4 }'
}
# train NAME LAUNCH... -- KEY=VALUE...: one run into $tmp/NAME (+ NAME.safetensors).
train() {
    local name=$1
    shift
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.safetensors" >"$tmp/$name.log" 2>&1 ||
        fail "$name exits 0" "$tmp/$name.log"
    losses "$tmp/$name" >"$tmp/$name.losses"
}
one=("$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}")
two=("$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$src/configs/fmnist_mlp.yaml" "${common[@]}")
for nw in 0 1 4; do
    train "one_big_$nw" "${one[@]}" data.batch_size=64 data.num_workers=$nw
    train "one_acc_$nw" "${one[@]}" data.batch_size=32 optim.grad_accum_steps=2 data.num_workers=$nw
    check "1 rank, $nw workers: 2 x 32 trains like 1 x 64" close "$tmp/one_big_$nw.losses" "$tmp/one_acc_$nw.losses"
    train "two_big_$nw" "${two[@]}" data.batch_size=32 data.num_workers=$nw
    train "two_acc_$nw" "${two[@]}" data.batch_size=16 optim.grad_accum_steps=2 data.num_workers=$nw
    check "2 ranks, $nw workers: 2 x 16 trains like 1 x 32" close "$tmp/two_big_$nw.losses" "$tmp/two_acc_$nw.losses"
done
check "the worker count does not change the data (1 rank)" cmp "$tmp/one_acc_0.safetensors" "$tmp/one_acc_4.safetensors"
check "the worker count does not change the data (2 ranks)" cmp "$tmp/two_acc_0.safetensors" "$tmp/two_acc_4.safetensors"
train one_acc_again "${one[@]}" data.batch_size=32 optim.grad_accum_steps=2 data.num_workers=4
check "1 rank rerun is bitwise identical" cmp "$tmp/one_acc_4.safetensors" "$tmp/one_acc_again.safetensors"
train two_acc_again "${two[@]}" data.batch_size=16 optim.grad_accum_steps=2 data.num_workers=4
check "2 rank rerun is bitwise identical" cmp "$tmp/two_acc_4.safetensors" "$tmp/two_acc_again.safetensors"
summary
