#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Multi-task training end to end on synthetic data: two tasks (a 10-class label and a 5-group
# label_map over the same images, different batch sizes and loss weights) train on 1 rank and on
# 2 ranks through `ddpc run` with the same global batches and reach the same per-task test losses;
# both tasks' eval lines and metrics records are present; both training losses fall; one task per
# step (sequential mode) needs no find_unused_parameters, and a task that ran no batch in a logging
# window has no loss in its line or record; grad accumulation, state test and predict
# work per task, eval_batches and test_batches limit each task; a typo inside a task is reported
# with its file and line.
# usage: cli_train_multitask.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cat >"$tmp/mt.yaml" <<'YAML'
seed: 3
epochs: 2
log_every: 10
num_threads: 1
model:
  type: mlp
  hidden: [32]
data:
  batch_size: 16
  eval_batch_size: 50
optim:
  type: sgd
  lr: 0.02
  momentum: 0.9
tasks:
  - name: fine
    data:
      type: synthetic_images
      size: 640
  - name: coarse
    batch_size: 8
    loss_weight: 0.5
    data:
      type: synthetic_images
      size: 640
      label_map: [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
YAML
# task_value FILE TASK: the last test record's eval_loss of TASK.
test_loss() { grep '"split": "test", "task": "'"$2"'"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }
# train_loss FILE TASK first|last: a task's training loss in the first or last progress record.
train_loss() {
    grep '"task_loss"' "$1/metrics.jsonl" | { if [ "$3" = first ]; then head -1; else tail -1; fi; } |
        sed 's/.*"'"$2"'": \([0-9.]*\).*/\1/'
}
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * a) }'; }
less() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a != "" && b != "" && a < 0.5 * b) }'; }

"$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/one" weights_out="$tmp/one.safetensors" >"$tmp/one.log" 2>&1
check "1 rank trains two tasks" test $? -eq 0
check "start lines name both tasks" grep -q "task coarse: synthetic_images, 5 classes, 640 samples, batch 8 per rank, loss weight 0.5" "$tmp/one.log"
check "global batch is the tasks' sum" grep -q "global batch 24 = 24 per rank (fine 16 + coarse 8) x 1 rank x 1 accumulation step (combined max_size_cycle" "$tmp/one.log"
for task in fine coarse; do
    check "eval line for $task" grep -q "^eval test step    160 | task $task  *| loss" "$tmp/one.log"
    check "test record for $task counts every sample" grep -q '"split": "test", "task": "'$task'", .*"eval_samples": 161' "$tmp/one/metrics.jsonl"
    a=$(train_loss "$tmp/one" $task last)
    b=$(train_loss "$tmp/one" $task first)
    check "$task training loss falls ($b -> $a)" less "$a" "$b"
done
check "validation after each epoch, per task" test "$(grep -c '"split": "val", "task"' "$tmp/one/metrics.jsonl")" -eq 2

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/mt.yaml" data.batch_size=8 tasks.1.batch_size=4 \
    run_dir="$tmp/two" >"$tmp/two.log" 2>&1
check "2 ranks train two tasks" test $? -eq 0
check "2-rank global batch" grep -q "global batch 24 = 12 per rank (fine 8 + coarse 4) x 2 ranks" "$tmp/two.log"
check "only rank 0 prints: one final eval line per task" test "$(grep -c '^eval test' "$tmp/two.log")" -eq 2
for task in fine coarse; do
    a=$(test_loss "$tmp/one" $task)
    b=$(test_loss "$tmp/two" $task)
    check "$task: 2 x b matches 1 x 2b (test loss $a vs $b)" close "$a" "$b"
done

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/mt.yaml" data.batch_size=8 tasks.1.batch_size=4 \
    data.combined_mode=sequential optim.grad_accum_steps=2 max_steps=30 run_dir="$tmp/seq" >"$tmp/seq.log" 2>&1
check "one task per step on 2 ranks, accumulated, without find_unused_parameters" test $? -eq 0
check "sequential mode reported" grep -q "x 2 ranks x 2 accumulation steps (combined sequential" "$tmp/seq.log"
# fine's 40 batches per rank are steps 1-20, then coarse's: a task that ran no batch in a logging
# window has no loss, '-' in the line and no key in the record (not 0).
check "step 20's line: fine's loss, coarse '-'" grep -Eq '^step +20/30 .*\(fine [0-9]+\.[0-9]{4}, coarse -\)' "$tmp/seq.log"
check "step 30's line: fine '-', coarse's loss" grep -Eq '^step +30/30 .*\(fine -, coarse [0-9]+\.[0-9]{4}\)' "$tmp/seq.log"
check "step 20's record: task_loss of fine only" grep -Eq '"step": 20, .*"task_loss": \{"fine": [0-9.]+\}' "$tmp/seq/metrics.jsonl"
check "step 30's record: task_loss of coarse only" grep -Eq '"step": 30, .*"task_loss": \{"coarse": [0-9.]+\}' "$tmp/seq/metrics.jsonl"
check "no task's loss is written as 0" test "$(grep -Ec '"task_loss": \{[^}]*: 0(\.0*)?[,}]' "$tmp/seq/metrics.jsonl")" -eq 0

"$ddpc" train "$tmp/mt.yaml" state=test init_from="$tmp/one.safetensors" run_dir="$tmp/test" >"$tmp/test.log" 2>&1
for task in fine coarse; do
    a=$(test_loss "$tmp/one" $task)
    b=$(test_loss "$tmp/test" $task)
    check "state test from the saved weights: $task ($a vs $b)" test "$a" = "$b"
done
"$ddpc" train "$tmp/mt.yaml" state=predict predict.samples=7 init_from="$tmp/one.safetensors" \
    run_dir="$tmp/pred" >"$tmp/pred.log" 2>&1
check "predict writes one file per task" test "$(cat "$tmp/pred/predictions_fine.csv" "$tmp/pred/predictions_coarse.csv" | wc -l)" -eq 16

# eval_batches (validation) and test_batches (the final test) limit each task's batches per rank.
"$ddpc" train "$tmp/mt.yaml" max_steps=2 eval_every=1 eval_batches=1 test_batches=2 \
    tasks.1.eval_batch_size=20 run_dir="$tmp/lim" >"$tmp/lim.log" 2>&1
check_status "a run with eval_batches and test_batches" $? "$tmp/lim.log"
check "per task: 1 validation batch (fine 50, coarse 20) at steps 1 and 2, then 2 test batches (100, 40)" test \
    "$(grep -o '"step": [0-9]*, "split": "[a-z]*", "task": "[a-z]*"\|"eval_samples": [0-9]*' "$tmp/lim/metrics.jsonl" | paste -d' ' - - | tr -d '"' | tr '\n' ';')" = \
    "step: 1, split: val, task: fine eval_samples: 50;step: 1, split: val, task: coarse eval_samples: 20;step: 2, split: val, task: fine eval_samples: 50;step: 2, split: val, task: coarse eval_samples: 20;step: 2, split: test, task: fine eval_samples: 100;step: 2, split: test, task: coarse eval_samples: 40;"

sed 's/    loss_weight: 0.5/    loss_wieght: 0.5/' "$tmp/mt.yaml" >"$tmp/typo.yaml"
line=$(grep -n loss_wieght "$tmp/typo.yaml" | cut -d: -f1)
"$ddpc" train "$tmp/typo.yaml" run_dir="$tmp/typo" >"$tmp/typo.log" 2>&1
check "a task key typo fails" test $? -ne 0
check "the typo is named with its line" grep -q "typo.yaml:$line: unknown key 'tasks.1.loss_wieght' (did you mean 'tasks.1.loss_weight'?)" "$tmp/typo.log"
"$ddpc" train "$tmp/mt.yaml" tasks.1.name=fine run_dir="$tmp/dup" >"$tmp/dup.log" 2>&1
check "duplicate task names are refused" grep -q "key 'tasks.1.name': 'fine' is already the name of tasks.0" "$tmp/dup.log"
"$ddpc" train "$tmp/mt.yaml" 'tasks.1.data.label_map=[0,1,1]' run_dir="$tmp/map" >"$tmp/map.log" 2>&1
check "a short label_map is refused" grep -q "label_map has 3 entries; it needs one per class of the dataset (10)" "$tmp/map.log"

summary
