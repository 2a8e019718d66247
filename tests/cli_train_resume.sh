#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Checkpoints and bit-exact auto-resume through `ddpc train` and `ddpc run`: a worker SIGKILLed
# mid-epoch or between the micro-batches of an accumulation (fault.kill_at_*), then the same
# command again, ends with final weights byte-identical to an uninterrupted run — 1 and 2 ranks,
# shuffle and dropout on, 2 loader workers, grad_accum_steps 2, SGD with momentum and AdamW, the
# multi-task trainer, and `ddpc run --max-restarts`. Also: metrics.jsonl is appended to and
# records the resume, checkpoint.keep prunes, resume: never starts over, and a resume at another
# world size and global batch is refused by resume: auto, and with resume=force continues and
# says the data order differs. max_steps past `epochs` runs on into
# further epochs, and resumes there too.
# usage: cli_train_resume.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
common=(data.type=synthetic_images data.size=512 data.batch_size=16 optim.grad_accum_steps=2
        epochs=3 log_every=4 eval_every=20 eval_batches=1 num_threads=1 data.num_workers=2
        data.shuffle=true model.dropout=0.2 'model.hidden=[32]' checkpoint.every_steps=5)
adamw=(optim.type=adamw optim.lr=0.003 optim.weight_decay=0.1 optim.nesterov=false optim.momentum=0)

# run NAME EXPECTED_STATUS COMMAND...: runs into $tmp/NAME (+ NAME.st), checks the exit status.
run() {
    local name=$1 want=$2
    shift 2
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.st" >>"$tmp/$name.log" 2>&1
    local got=$?
    if [ "$want" = 0 ]; then
        check "$name exits 0" test "$got" -eq 0
    else
        check "$name is killed (status $got)" test "$got" -ne 0
    fi
    [ "$got" -eq 0 ] || [ "$want" != 0 ] || tail -n 5 "$tmp/$name.log"
}
# same NAME REF: NAME's final weights are byte-identical to REF's.
same() { check "$1: final weights equal the uninterrupted run's" cmp "$tmp/$1.st" "$tmp/$2.st"; }

one=("$ddpc" train "$cfg" "${common[@]}")
run ref 0 "${one[@]}"
check "checkpoints are written with a latest pointer" test -s "$tmp/ref/checkpoints/latest"
check "checkpoint.keep 3 (default) keeps three" test "$(ls -d "$tmp"/ref/checkpoints/step-* | wc -l)" -eq 3
check "the final step is saved" test -d "$tmp/ref/checkpoints/step-00000048"

# Killed between the micro-batches of step 12 (mid-epoch 0; last checkpoint at step 10).
run mid 137 "${one[@]}" fault.kill_at_step=12 fault.kill_at_micro=1
check "the killed run left checkpoint 10" test -d "$tmp/mid/checkpoints/step-00000010"
run mid 0 "${one[@]}" fault.kill_at_step=12 fault.kill_at_micro=1
check "the rerun says it resumes" grep -q "resuming from .*step-00000010: step 10" "$tmp/mid.log"
same mid ref
check "metrics.jsonl is appended to and records the resume" \
    grep -q '"step": 10, "event": "resume"' "$tmp/mid/metrics.jsonl"
check "metrics.jsonl keeps the killed run's records" grep -q '"step": 8, "epoch"' "$tmp/mid/metrics.jsonl"

# Killed at the first micro-batch of step 17, epoch 1's first (16 steps per epoch): the resumed run
# finishes epoch 0 from checkpoint 15, then crosses the epoch boundary.
run edge 137 "${one[@]}" fault.kill_at_step=17 fault.kill_at_micro=0
run edge 0 "${one[@]}" fault.kill_at_step=17 fault.kill_at_micro=0
same edge ref

run ref_adamw 0 "${one[@]}" "${adamw[@]}"
run adamw 137 "${one[@]}" "${adamw[@]}" fault.kill_at_step=23 fault.kill_at_micro=1
run adamw 0 "${one[@]}" "${adamw[@]}"
same adamw ref_adamw

if /usr/bin/python3 "$src/tests/safetensors_interop.py" ckpt "$tmp/adamw/checkpoints/step-00000048" \
    "$tmp/py.st" >"$tmp/py.log" 2>&1; then ok "PyTorch loads a checkpoint the trainer wrote"; else
    fail "PyTorch loads a checkpoint the trainer wrote" "$tmp/py.log"; fi

# init_from a checkpoint directory: state=test reproduces the final test loss.
test_loss() { grep '"split": "test"' "$1" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }
"$ddpc" train "$cfg" "${common[@]}" state=test init_from="$tmp/ref/checkpoints/step-00000048" \
    run_dir="$tmp/init" >"$tmp/init.log" 2>&1
check "init_from a checkpoint reproduces the test loss" \
    test "$(test_loss "$tmp/init/metrics.jsonl")" = "$(test_loss "$tmp/ref/metrics.jsonl")"
# init_from a run's checkpoint root follows `latest` (step 48 here), as resuming picks it.
"$ddpc" train "$cfg" "${common[@]}" state=test init_from="$tmp/ref/checkpoints" \
    run_dir="$tmp/init_root" >"$tmp/init_root.log" 2>&1
check "init_from a checkpoint root takes its latest checkpoint" \
    test "$(test_loss "$tmp/init_root/metrics.jsonl")" = "$(test_loss "$tmp/ref/metrics.jsonl")"
mkdir -p "$tmp/empty_root" && : >"$tmp/empty_root/latest"
"$ddpc" train "$cfg" "${common[@]}" state=test init_from="$tmp/empty_root" \
    run_dir="$tmp/init_empty" >"$tmp/init_empty.log" 2>&1
check "a root without a complete checkpoint is refused" test $? -ne 0
check "saying so" grep -q "empty_root: no complete checkpoint to initialise from" "$tmp/init_empty.log"
"$ddpc" train "$cfg" "${common[@]}" state=test 'model.hidden=[32,16]' run_dir="$tmp/strict" \
    init_from="$tmp/ref/checkpoints/step-00000048" >"$tmp/strict.log" 2>&1
check "init_strict (default) refuses another model" test $? -ne 0
check "listing what is missing and unexpected" grep -q "missing: .*fc.2.weight" "$tmp/strict.log"
"$ddpc" train "$cfg" "${common[@]}" state=test 'model.hidden=[32,16]' run_dir="$tmp/loose" \
    init_from="$tmp/ref/checkpoints/step-00000048" init_strict=false >"$tmp/loose.log" 2>&1
check "init_strict: false loads what matches" test $? -eq 0
check "and says what it left out" grep -q "left out .*missing: .*fc.2.weight" "$tmp/loose.log"

# resume: a path. From a step directory (checkpoint 45 of the reference run) the run ends with the
# reference weights; from a checkpoint directory it takes its latest (48, the end: nothing to do).
run from_step 0 "${one[@]}" resume="$tmp/ref/checkpoints/step-00000045"
check "resume from a named step says so" grep -q "resuming from .*step-00000045: step 45" "$tmp/from_step.log"
same from_step ref
run from_dir 0 "${one[@]}" resume="$tmp/ref/checkpoints"
check "resume from a checkpoint directory takes its latest" grep -q "resuming from .*step-00000048: step 48" "$tmp/from_dir.log"
same from_dir ref

# checkpoint.every_epochs (16 steps per epoch) with keep 0: one checkpoint per epoch end, all kept.
run epochs 0 "${one[@]}" checkpoint.every_steps=0 checkpoint.every_epochs=1 checkpoint.keep=0
check "every_epochs saves at each epoch's end and keep 0 keeps them all" \
    test "$(cd "$tmp/epochs/checkpoints" && ls -d step-* | tr '\n' ' ')" = "step-00000016 step-00000032 step-00000048 "
check "an epoch-end checkpoint starts the next epoch" \
    test "$(grep -oE '"epoch(_step)?": [0-9]+' "$tmp/epochs/checkpoints/step-00000016/state.json" | tr '\n' ' ')" = '"epoch": 1 "epoch_step": 0 '

run never 0 "${one[@]}" resume=never checkpoint.dir="$tmp/ref/checkpoints" max_steps=3
check "resume: never starts from step 0" grep -q '"step": 3, "epoch": 0' "$tmp/never/metrics.jsonl"

# max_steps past `epochs` (16 steps per epoch): epochs 1 with max_steps 40 runs 40 steps, into
# epoch 2, and says so; it trains the weights of epochs 3 with max_steps 40 (the same steps and
# schedule), and so does a run killed in epoch 2 and rerun (resumed from checkpoint 35).
run ext_ref 0 "${one[@]}" epochs=3 max_steps=40
run ext 0 "${one[@]}" epochs=1 max_steps=40
check "max_steps past epochs says so" \
    grep -q "^max_steps 40 is more than epochs 1 x 16 steps: training runs 40 steps, 2.50 epochs" "$tmp/ext.log"
check "and trains 40 steps, into epoch 2" grep -q '"step": 40, "epoch": 2,' "$tmp/ext/metrics.jsonl"
check "the test evaluation follows step 40" grep -q '"step": 40, "split": "test"' "$tmp/ext/metrics.jsonl"
same ext ext_ref
run ext_kill 137 "${one[@]}" epochs=1 max_steps=40 fault.kill_at_step=37 fault.kill_at_micro=1
run ext_kill 0 "${one[@]}" epochs=1 max_steps=40 fault.kill_at_step=37 fault.kill_at_micro=1
check "the rerun resumes in epoch 2" \
    grep -q "resuming from .*step-00000035: step 35, epoch 2, step 3 of the epoch" "$tmp/ext_kill.log"
same ext_kill ext_ref

two=("$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" epochs=2)
run ref2 0 "${two[@]}"
run two 137 "${two[@]}" fault.kill_at_step=7 fault.kill_at_micro=1 fault.kill_rank=1
run two 0 "${two[@]}"
same two ref2
run restarts 0 "$ddpc" run --nproc-per-node 2 --max-restarts 2 -- "$ddpc" train "$cfg" "${common[@]}" \
    epochs=2 fault.kill_at_step=9 fault.kill_at_micro=0 fault.kill_rank=0
same restarts ref2
check "the restarted workers resumed" grep -q '"step": 5, "event": "resume", "restart": 1' "$tmp/restarts/metrics.jsonl"

# At another world size and global batch: killed at 2 ranks, resumed at 1, which resume: auto
# refuses (another global batch is another experiment) and resume=force continues.
run resize 137 "${two[@]}" fault.kill_at_step=6
"${one[@]}" epochs=2 run_dir="$tmp/resize" weights_out="$tmp/resize.st" >"$tmp/resize_auto.log" 2>&1
check "another global batch: resume: auto refuses" grep -q "global batch 64 -> 32 (world 2 -> 1)" "$tmp/resize_auto.log"
run resize 0 "${one[@]}" epochs=2 resume=force
check "resume=force continues, warning of the global batch" \
    grep -q "^warning: resume=force continues .*: global batch 64 -> 32 (world 2 -> 1)" "$tmp/resize.log"
check "a resume at another world size says the data order differs" grep -q "data order from there on differs" "$tmp/resize.log"
# Checkpoint 5 of 2 ranks x 16 x 2 = 64 samples a step: sample 320, step 10 of 32 samples at 1 rank.
check "and continues from the same global sample" grep -q "continues from sample 320 of epoch 0" "$tmp/resize.log"
check "which is step 10 of the epoch at 1 rank" grep -q "resuming from .*step-00000005: step 5, epoch 0, step 10 of the epoch" "$tmp/resize.log"

cat >"$tmp/mt.yaml" <<'YAML'
seed: 3
epochs: 2
log_every: 5
num_threads: 1
model: {type: mlp, hidden: [32], dropout: 0.2}
data: {batch_size: 16, num_workers: 2}
optim: {type: sgd, lr: 0.02, momentum: 0.9, grad_accum_steps: 2}
checkpoint: {every_steps: 4}
tasks:
  - name: fine
    data: {type: synthetic_images, size: 320}
  - name: coarse
    batch_size: 8
    loss_weight: 0.5
    data: {type: synthetic_images, size: 320, label_map: [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]}
YAML
run mt_ref 0 "$ddpc" train "$tmp/mt.yaml"
run mt 137 "$ddpc" train "$tmp/mt.yaml" fault.kill_at_step=7 fault.kill_at_micro=1
run mt 0 "$ddpc" train "$tmp/mt.yaml" fault.kill_at_step=7 fault.kill_at_micro=1
same mt mt_ref
summary
