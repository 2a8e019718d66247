#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoints under ZeRO through `ddpc run`: (a) at stages 1 to 3 every rank writes its shard
# (shard-<rank>-of-<world>.safetensors, state.json with zero_stage, world and the manifest), and a
# worker SIGKILLed mid-run then the same command again ends byte-identical to the uninterrupted
# run (SGD-momentum and AdamW, 2 ranks); (b) resharding: a stage-2 checkpoint of 4 ranks resumed at
# each (stage, ranks) of TARGETS with the same global batch continues to the weights of the
# uninterrupted 4-rank run within 1e-6, and the log says it reshards and that the steps take the
# same samples; (c) a stage-0 checkpoint resumed at stage 2 and a stage-2 one at stage 0; (d)
# `ddpc ckpt export` consolidates a sharded checkpoint into the weights a stage-0 run writes,
# `ddpc ckpt show` prints the layout, `verify` accepts it and rejects a corrupted shard naming the
# file, init_from takes the export (not the sharded directory); (e) a torn shard makes the resume
# fall back to the previous checkpoint, as for stage 0. Small buckets (ddp.bucket_cap_mb): several
# chunks per rank, and stage 3 gathers bucket by bucket.
# usage: cli_train_zero_ckpt.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
# 320 samples, a global batch of 16: 20 steps an epoch, so 30 steps cross an epoch boundary.
global=16
common=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=320 epochs=3
        data.shuffle=true log_every=5 eval_every=0 data.eval_batch_size=40 num_threads=1
        'model.hidden=[64, 32]' optim.schedule=constant checkpoint.every_steps=5 max_steps=30
        ddp.bucket_cap_mb=0.05 ddp.first_bucket_mb=0.01)
sgd=(optim.type=sgd optim.lr=0.05 optim.momentum=0.9)
adamw=(optim.type=adamw optim.lr=0.003 optim.weight_decay=0.1 optim.nesterov=false optim.momentum=0)
# (stage, ranks) a 4-rank stage-2 checkpoint is resumed at in (b): the issue's two, and stage 1.
TARGETS=("0 1" "3 2" "1 2")

# job NAME WANT STAGE RANKS ARGS...: ddpc train on RANKS ranks at zero.stage STAGE (per-rank batch
# global/RANKS) into $tmp/NAME (+ .st, .log, appended); WANT 0: must exit 0, else must fail.
job() {
    local name=$1 want=$2 stage=$3 n=$4
    shift 4
    "$ddpc" run --nproc-per-node "$n" -- "$ddpc" train "${common[@]}" "$@" zero.stage="$stage" \
        data.batch_size=$((global / n)) run_dir="$tmp/$name" weights_out="$tmp/$name.st" \
        >>"$tmp/$name.log" 2>&1
    local got=$?
    if [ "$want" = 0 ]; then
        check "$name exits 0" test "$got" -eq 0 || tail -n 5 "$tmp/$name.log"
    else
        check "$name is killed (status $got)" test "$got" -ne 0
    fi
}
close() { check "$1" /usr/bin/python3 "$src/tests/weights_close.py" "$2" "$3" "$4"; }

# (a) Kill and resume at the same world and stage: bitwise.
for opt in sgd adamw; do
    [ $opt = sgd ] && args=("${sgd[@]}") || args=("${adamw[@]}")
    for stage in 1 2 3; do
        job a_ref_${opt}_$stage 0 $stage 2 "${args[@]}"
        job a_${opt}_$stage 137 $stage 2 "${args[@]}" fault.kill_at_step=12 fault.kill_rank=1
        job a_${opt}_$stage 0 $stage 2 "${args[@]}" fault.kill_at_step=12 fault.kill_rank=1
        check "$opt stage $stage: the rerun resumes from step 10" \
            grep -q "resuming from .*step-00000010: step 10" "$tmp/a_${opt}_$stage.log"
        check "$opt stage $stage: killed and resumed equals the uninterrupted run" \
            cmp "$tmp/a_${opt}_$stage.st" "$tmp/a_ref_${opt}_$stage.st"
    done
done
ck=$tmp/a_ref_adamw_2/checkpoints/step-00000030
check "every rank wrote its shard" test -s "$ck/shard-00000-of-00002.safetensors" -a \
    -s "$ck/shard-00001-of-00002.safetensors" -a ! -e "$ck/model.safetensors"
check "state.json records the stage" grep -q '"zero_stage": 2,' "$ck/state.json"
check "and the world" grep -q '"world": 2,' "$ck/state.json"
check "and which ranges each file holds" \
    grep -q '{"file": "shard-00001-of-00002.safetensors", "ranges": \[\[[0-9]*, [0-9]*\]\(, \[[0-9]*, [0-9]*\]\)\{1,\}\]}' \
    "$ck/state.json"

# (b) Resharding: 15 steps at stage 2 on 4 ranks, then on to 30 at every target.
for opt in sgd adamw; do
    [ $opt = sgd ] && args=("${sgd[@]}") || args=("${adamw[@]}")
    job b_ref_$opt 0 2 4 "${args[@]}"
    job b_src_$opt 0 2 4 "${args[@]}" max_steps=15
    for target in "${TARGETS[@]}"; do
        read -r stage n <<<"$target"
        name=b_${opt}_${stage}_$n
        job "$name" 0 "$stage" "$n" "${args[@]}" resume="$tmp/b_src_$opt/checkpoints"
        s=s
        [ "$n" = 1 ] && s=
        check "$name: the log says it reshards" grep -q "resuming from .*step-00000015 (zero stage \
2, 4 ranks) at zero stage $stage on $n rank$s, resharding the optimizer state: step 15" \
            "$tmp/$name.log"
        check "$name: and that the steps take the same samples" \
            grep -q "with the same global batch of 16; at $n rank$s every step takes the same" \
            "$tmp/$name.log"
        close "$name: the weights of the uninterrupted 4-rank run within 1e-6" "$tmp/$name.st" \
            "$tmp/b_ref_$opt.st" 1e-6
    done
done

# (c) Across stages on 2 ranks: a stage-0 checkpoint resumed at stage 2, and back.
job c_ref 0 0 2 "${sgd[@]}"
job c_src0 0 0 2 "${sgd[@]}" max_steps=15
check "a stage-0 checkpoint keeps the full format" \
    test -s "$tmp/c_src0/checkpoints/step-00000015/model.safetensors"
job c_to2 0 2 2 "${sgd[@]}" resume="$tmp/c_src0/checkpoints"
check "stage 0 to 2: the log says so" \
    grep -q "(zero stage 0, 2 ranks) at zero stage 2 on 2 ranks, resharding" "$tmp/c_to2.log"
close "stage 0 to 2: the uninterrupted stage-0 weights within 1e-6" "$tmp/c_to2.st" \
    "$tmp/c_ref.st" 1e-6
job c_src2 0 2 2 "${sgd[@]}" max_steps=15
job c_to0 0 0 2 "${sgd[@]}" resume="$tmp/c_src2/checkpoints"
close "stage 2 to 0: the uninterrupted stage-0 weights within 1e-6" "$tmp/c_to0.st" \
    "$tmp/c_ref.st" 1e-6

# (d) Export, show and verify. Stage 1 gives stage 0's bits: the exports are the same file.
job d0 0 0 2 "${adamw[@]}"
job d1 0 1 2 "${adamw[@]}"
"$ddpc" ckpt export "$tmp/d0/checkpoints" "$tmp/d0.export.st" >"$tmp/d0.export.log" 2>&1
"$ddpc" ckpt export "$tmp/d1/checkpoints" "$tmp/d1.export.st" >"$tmp/d1.export.log" 2>&1
check "export consolidates the shards" test $? -eq 0
check "into the file a stage-0 checkpoint exports" cmp "$tmp/d0.export.st" "$tmp/d1.export.st"
close "holding the weights the stage-0 run wrote" "$tmp/d1.export.st" "$tmp/d0.st" 0
ck=$tmp/d1/checkpoints/step-00000030
"$ddpc" train "${common[@]}" state=test init_from="$ck" run_dir="$tmp/init_sharded" \
    >"$tmp/init_sharded.log" 2>&1
check "init_from a sharded checkpoint is refused naming model.safetensors" \
    grep -q "step-00000030/model.safetensors" "$tmp/init_sharded.log"
check "and the ddpc ckpt export command that consolidates it" \
    grep -q "ZeRO-sharded checkpoint; consolidate it first with .ddpc ckpt export $ck OUT.safetensors" \
    "$tmp/init_sharded.log"
"$ddpc" train "${common[@]}" state=test init_from="$tmp/d1.export.st" run_dir="$tmp/init_export" \
    >"$tmp/init_export.log" 2>&1
check "init_from its export works" test $? -eq 0
"$ddpc" ckpt show "$ck" >"$tmp/show.log" 2>&1
check "show prints the stage" grep -q "^zero stage: *1 (sharded: 2 files)" "$tmp/show.log"
check "and each shard file's size" \
    grep -q "^  shard-00001-of-00002.safetensors  [0-9]* floats in [0-9]* ranges$" "$tmp/show.log"
"$ddpc" ckpt show "$tmp/d0/checkpoints" >"$tmp/show0.log" 2>&1
check "show of a stage-0 checkpoint says full" grep -q "^zero stage: *0 (full" "$tmp/show0.log"
"$ddpc" ckpt ls "$tmp/d1/checkpoints" >"$tmp/ls.log" 2>&1
check "ls lists sharded checkpoints as ok" grep -q "^step-00000030 .* 2 .* ok (latest)" "$tmp/ls.log"
"$ddpc" ckpt verify "$ck" >"$tmp/verify.log" 2>&1
check "verify accepts a sharded checkpoint" test $? -eq 0
printf '\x55' | dd of="$ck/shard-00001-of-00002.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
"$ddpc" ckpt verify "$ck" >"$tmp/verify_bad.log" 2>&1
check "and rejects a corrupted shard" test $? -eq 1
check "naming the file" grep -q "shard-00001-of-00002.safetensors: CRC-32" "$tmp/verify_bad.log"

# (e) A torn (truncated) shard of the latest checkpoint: the resume falls back to the one before.
job e 0 2 2 "${sgd[@]}" max_steps=20
shard=$tmp/e/checkpoints/step-00000020/shard-00000-of-00002.safetensors
truncate -s $(($(stat -c %s "$shard") - 1)) "$shard"
job e 0 2 2 "${sgd[@]}"
check "a torn shard: the resume takes the checkpoint before" \
    grep -q "resuming from .*step-00000015: step 15" "$tmp/e.log"
close "and still reaches the uninterrupted weights" "$tmp/e.st" "$tmp/c_ref.st" 1e-6

summary
