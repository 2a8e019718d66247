#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Task sharding (data.task_sharding, the PI0-RIPT seed's rule) through
# `ddpc run --nproc-per-node 2 -- ddpc train` on a three-task config: the assignment printed at
# start; each rank trains only its own tasks (data.log_indices shows which) over a whole epoch of
# each, the ranks agreeing on the steps; the run is deterministic; refusals state the numbers when
# the tasks are too few; data.task_names_to_use selects and orders tasks; data.replicate_tasks
# splits a shared task over its ranks; in min_size mode the ranks agree on the shortest epoch.
# usage: cli_train_task_shard.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cat >"$tmp/mt.yaml" <<'YAML'
seed: 3
epochs: 2
log_every: 20
num_threads: 1
model:
  type: mlp
  hidden: [32]
data:
  batch_size: 16
  eval_batch_size: 50
  num_workers: 0
  log_indices: true
  task_sharding: true
optim:
  type: sgd
  lr: 0.05
  momentum: 0.9
tasks:
  - name: fine
    data:
      type: synthetic_images
      size: 320
  - name: coarse
    batch_size: 8
    loss_weight: 0.5
    data:
      type: synthetic_images
      size: 320
      label_map: [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
  - name: parity
    data:
      type: synthetic_images
      size: 160
      label_map: [0, 1, 0, 1, 0, 1, 0, 1, 0, 1]
YAML
run2() {
    local n=$1; shift
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/$n" "$@" >"$tmp/$n.log" 2>&1
}
# tasks_of DIR RANK: the distinct tasks rank RANK trained, sorted.
tasks_of() { cut -d' ' -f3 "$1/indices_rank$2.txt" | sort -u | tr '\n' ' ' | sed 's/ *$//'; }
# epoch_samples DIR RANK TASK FIRST LAST: TASK's indices in steps FIRST..LAST, sorted, unique count.
epoch_samples() {
    awk -v t="$3" -v a="$4" -v b="$5" '$3 == t && $1 >= a && $1 <= b { for (i = 4; i <= NF; i++) print $i }' \
        "$1/indices_rank$2.txt" | sort -n | uniq | wc -l
}
test_loss() { grep '"split": "test", "task": "'"$2"'"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi; }

run2 a
check_status "2 ranks train 3 sharded tasks" $? "$tmp/a.log"
check "assignment header" grep -q "^task sharding over 2 ranks (task i on rank i mod 2, at least 1 per rank):" "$tmp/a.log"
check "rank 0 gets tasks 0 and 2" grep -q "^  rank 0: fine, parity$" "$tmp/a.log"
check "rank 1 gets task 1" grep -q "^  rank 1: coarse$" "$tmp/a.log"
check "global batch counts each rank's own tasks" grep -q "^global batch 40 = every rank's own tasks' batches" "$tmp/a.log"
same "rank 0 trains only its tasks" "$(tasks_of "$tmp/a" 0)" "fine parity"
same "rank 1 trains only its task" "$(tasks_of "$tmp/a" 1)" "coarse"
# Rank 1's epoch: coarse, 320 / 8 = 40 steps; rank 0's local epoch (fine 20 steps) is shorter,
# so rank 0 starts its loaders over and both take 40 steps per epoch, 80 in all.
check "80 steps" grep -q "training mlp with 3 task heads: [0-9]* parameters, 80 steps" "$tmp/a.log"
same "rank 1: one coarse batch per step" "$(wc -l <"$tmp/a/indices_rank1.txt")" 80
same "rank 0: a fine and a parity batch per step" "$(wc -l <"$tmp/a/indices_rank0.txt")" 160
same "rank 1 sees all of coarse in epoch 0" "$(epoch_samples "$tmp/a" 1 coarse 1 40)" 320
same "rank 0 sees all of fine in epoch 0" "$(epoch_samples "$tmp/a" 0 fine 1 40)" 320
same "rank 0 sees all of parity in epoch 0" "$(epoch_samples "$tmp/a" 0 parity 1 40)" 160
for task in fine coarse parity; do
    check "test line for $task (every rank evaluates every task)" grep -q "^eval test step     80 | task $task " "$tmp/a.log"
done
# It learns: each task's training loss falls to under half its first value, and its test
# accuracy is above chance (10%, 20%, 50%).
for tc in fine:0.1 coarse:0.2 parity:0.5; do
    task=${tc%:*}
    first=$(grep '"task_loss"' "$tmp/a/metrics.jsonl" | head -1 | sed 's/.*"'$task'": \([0-9.]*\).*/\1/')
    last=$(grep '"task_loss"' "$tmp/a/metrics.jsonl" | tail -1 | sed 's/.*"'$task'": \([0-9.]*\).*/\1/')
    acc=$(grep '"split": "test", "task": "'$task'"' "$tmp/a/metrics.jsonl" | sed 's/.*"eval_accuracy": \([0-9.]*\).*/\1/')
    awk -v a="$last" -v b="$first" -v c="$acc" -v chance="${tc#*:}" \
        'BEGIN { exit !(a != "" && b != "" && a < 0.5 * b && c > chance) }'
    check_status "$task learns (training loss $first -> $last, test accuracy $acc)" $?
done

run2 b
for task in fine coarse parity; do
    same "deterministic: $task test loss" "$(test_loss "$tmp/b" $task)" "$(test_loss "$tmp/a" $task)"
done
check "deterministic: the same samples in the same order" cmp -s "$tmp/a/indices_rank0.txt" "$tmp/b/indices_rank0.txt"

# Resume is exact: killed in epoch 1 after rank 0 restarted its shorter local epoch (step 67 =
# position 26 of 40; rank 0's own epoch is 20 steps), the group restarts from the step-65
# checkpoint, rank 0 fast-forwards through its restart, and the run ends where run a did.
"$ddpc" run --nproc-per-node 2 --max-restarts 1 -- "$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/kill" \
    data.log_indices=false checkpoint.every_steps=5 fault.kill_at_step=67 >"$tmp/kill.log" 2>&1
check_status "killed at step 67, restarted and resumed" $? "$tmp/kill.log"
check "it resumed from step 65" grep -q "resum.*step 65\|step 65.*resum" "$tmp/kill.log"
for task in fine coarse parity; do
    same "resumed: $task test loss as uninterrupted" "$(test_loss "$tmp/kill" $task)" "$(test_loss "$tmp/a" $task)"
done

# The update is the mean over ranks of each rank's own weighted task losses: 2 ranks training one
# task each match 1 rank training both at half the loss weights (same samples in the same order:
# each task's sampler is seeded by its position and, unshared, spans its whole dataset).
close() { awk -v a="$1" -v b="$2" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * a) }'; }
two=('data.task_names_to_use=[fine, coarse]' tasks.1.batch_size=16 epochs=1)
run2 eq2 "${two[@]}"
"$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/eq1" "${two[@]}" data.task_sharding=false \
    tasks.0.loss_weight=0.5 tasks.1.loss_weight=0.25 >"$tmp/eq1.log" 2>&1
for task in fine coarse; do
    a=$(test_loss "$tmp/eq1" $task)
    b=$(test_loss "$tmp/eq2" $task)
    check "$task: 2 sharded ranks = 1 rank at half weights (test loss $a vs $b)" close "$a" "$b"
done

# Refusals with numbers.
run2 r1 'data.task_names_to_use=[coarse]'
check "too few tasks for the ranks is refused" test $? -ne 0
check "the refusal states the numbers" grep -q "data.task_sharding (data.task_names_to_use keeps 1 of 3): 1 task cannot give each of 2 ranks 1 task of its own: that needs 2 tasks (2 ranks x min_tasks_per_rank 1)" "$tmp/r1.log"
run2 r2 data.min_tasks_per_rank=2
check "min_tasks_per_rank 2 with 3 tasks on 2 ranks is refused" grep -q "3 tasks cannot give each of 2 ranks 2 tasks of its own: that needs 4 tasks (2 ranks x min_tasks_per_rank 2)" "$tmp/r2.log"

# task_names_to_use selects and orders: parity on rank 0, fine on rank 1, coarse not trained.
run2 sel 'data.task_names_to_use=[parity, fine]' max_steps=6
check_status "task_names_to_use trains" $? "$tmp/sel.log"
check "two heads" grep -q "training mlp with 2 task heads" "$tmp/sel.log"
check "selected rank 0" grep -q "^  rank 0: parity$" "$tmp/sel.log"
check "selected rank 1" grep -q "^  rank 1: fine$" "$tmp/sel.log"
check "no coarse evaluation" test "$(grep -c '^eval test.*task coarse' "$tmp/sel.log")" -eq 0

sed 's/^    loss_weight: 0.5/    loss_wieght: 0.5/' "$tmp/mt.yaml" >"$tmp/typo.yaml"
"$ddpc" train "$tmp/typo.yaml" run_dir="$tmp/typo" 'data.task_names_to_use=[fine]' >"$tmp/typo.log" 2>&1
check "keys of tasks left out are still checked" grep -q "unknown key 'tasks.1.loss_wieght'" "$tmp/typo.log"

# replicate_tasks: one task on both ranks, each a half of it.
run2 rep 'data.task_names_to_use=[coarse]' data.replicate_tasks=true epochs=1
check_status "a shared task trains" $? "$tmp/rep.log"
check "shared task printed" grep -q "^  rank 1: coarse (shared by 2 ranks)$" "$tmp/rep.log"
same "the ranks split it: all 320 samples once" \
    "$(cat "$tmp/rep/indices_rank0.txt" "$tmp/rep/indices_rank1.txt" | cut -d' ' -f4- | tr ' ' '\n' | sort -n | uniq | wc -l)" 320
same "... in 20 steps each" "$(wc -l <"$tmp/rep/indices_rank1.txt")" 20

"$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/one" max_steps=2 >"$tmp/one.log" 2>&1
check_status "1 rank: every task on rank 0" $? "$tmp/one.log"
check "1 rank assignment" grep -q "^  rank 0: fine, coarse, parity$" "$tmp/one.log"
"$ddpc" train "$tmp/sel/config.yaml" run_dir="$tmp/again" max_steps=2 >"$tmp/again.log" 2>&1
check_status "a sharded run's config.yaml runs again" $? "$tmp/again.log"
check "... with its selected tasks" grep -q "^  rank 0: parity, fine$" "$tmp/again.log"
"$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/k" data.task_sharding=false data.min_tasks_per_rank=2 >"$tmp/k.log" 2>&1
check "min_tasks_per_rank without task_sharding is refused" grep -q "need data.task_sharding: true" "$tmp/k.log"
"$ddpc" train "$tmp/mt.yaml" run_dir="$tmp/k2" data.task_sharding=false data.replicate_tasks=true >"$tmp/k2.log" 2>&1
check "replicate_tasks without task_sharding is refused" grep -q \
    "keys 'data.min_tasks_per_rank' and 'data.replicate_tasks' need data.task_sharding: true" "$tmp/k2.log"
# min_size: rank 0's own epoch is parity's 10 steps (fine has 20), rank 1's coarse 40: the ranks
# agree on the shortest, 10 steps per epoch.
run2 ms data.combined_mode=min_size
check_status "min_size with task sharding trains" $? "$tmp/ms.log"
check "the ranks agree on the shortest epoch: 2 x 10 steps" grep -q "3 task heads: [0-9]* parameters, 20 steps" "$tmp/ms.log"
same "rank 1 runs 10 of coarse's 40 batches per epoch, 20 in all" "$(wc -l <"$tmp/ms/indices_rank1.txt")" 20
summary
