#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Crash-safety of checkpoints: a training run that saves every step is SIGKILLed at random moments
# (mostly while it writes a checkpoint) 20 times; after every kill `ddpc ckpt verify` accepts the
# checkpoint `latest` names, the next run resumes from exactly that one, and the run finally ends
# with weights byte-identical to an uninterrupted run's. Nothing is left in the temporary names.
# On a fast machine the runs may reach max_steps before the 20th kill; a run that ends by itself
# must then have finished cleanly, and most runs must still have been killed mid-training.
# The kill's moment is random from the start for even runs (so it may land while a run starts or
# resumes) and from the run's first new commit for odd ones: however slow the machine, checkpoints
# exist and the resumes are tested, whatever the start-up costs.
# usage: cli_train_resume_stress.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
# About 24 MB of parameters and AdamW state per checkpoint, so saving dominates a step.
args=(train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=2048 data.batch_size=8
      max_steps=300 log_every=1000 eval_batches=1 eval_every=100000 num_threads=1 data.num_workers=1
      'model.hidden=[1024,1024]' model.dropout=0.1 optim.type=adamw optim.lr=0.001 optim.nesterov=false
      checkpoint.every_steps=1 checkpoint.keep=2)
"$ddpc" "${args[@]}" run_dir="$tmp/ref" weights_out="$tmp/ref.st" >"$tmp/ref.log" 2>&1
check "the uninterrupted run exits 0" test $? -eq 0
latest() { cat "$tmp/run/checkpoints/latest" 2>/dev/null || echo none; }
# wait_commit PID BEFORE: until `latest` names another checkpoint than BEFORE or PID has ended
# (at most 10 minutes: a bound for a stuck run, not a timing).
wait_commit() {
    local n
    for n in $(seq 1 6000); do
        [ "$(latest)" != "$2" ] && return 0
        kill -0 "$1" 2>/dev/null || return 0
        sleep 0.1
    done
    echo "run $i: no new checkpoint after 10 minutes"
}
RANDOM=7
kills=0 ended=0 resumed_ok=0 verified=0
for i in $(seq 1 20); do
    before=$(latest)
    "$ddpc" "${args[@]}" run_dir="$tmp/run" weights_out="$tmp/run.st" >"$tmp/run.$i.log" 2>&1 &
    pid=$!
    [ $((i % 2)) -eq 1 ] && wait_commit "$pid" "$before"
    sleep "0.$((RANDOM % 9 + 1))$((RANDOM % 10))"
    if kill -9 "$pid" 2>/dev/null; then
        kills=$((kills + 1))
        wait "$pid" 2>/dev/null
    elif wait "$pid" && grep -q "^done in" "$tmp/run.$i.log"; then
        ended=$((ended + 1)) # it had already finished the training
    else
        echo "run $i ended by itself without finishing:"; tail -n 3 "$tmp/run.$i.log"
    fi
    # The run resumed from exactly the checkpoint `latest` named before it started (or was killed
    # while it was still starting, before it printed anything).
    if [ "$before" = none ] || grep -q "resuming from .*/$before:" "$tmp/run.$i.log" ||
        ! grep -q "^training\|resuming" "$tmp/run.$i.log"; then
        resumed_ok=$((resumed_ok + 1))
    else
        echo "run $i: latest was $before before it started"; head -n 3 "$tmp/run.$i.log"
    fi
    if [ -e "$tmp/run/checkpoints/latest" ]; then
        "$ddpc" ckpt verify "$tmp/run/checkpoints" >"$tmp/verify.$i.log" 2>&1 && verified=$((verified + 1)) ||
            cat "$tmp/verify.$i.log"
    else
        verified=$((verified + 1)) # killed before its first commit
    fi
done
check "every run was killed or finished the training ($kills killed, $ended finished)" \
    test $((kills + ended)) -eq 20
check "at least 12 of the 20 runs were killed mid-training ($kills)" test "$kills" -ge 12
check "every run resumed from the checkpoint latest named ($resumed_ok of 20)" test "$resumed_ok" -eq 20
check "after every kill the latest checkpoint verifies ($verified of 20)" test "$verified" -eq 20
before=$(latest)
"$ddpc" "${args[@]}" run_dir="$tmp/run" weights_out="$tmp/run.st" >"$tmp/run.last.log" 2>&1
check "the last run finishes" test $? -eq 0
check "it resumed from the checkpoint latest named ($before)" \
    grep -q "resuming from .*/$before:" "$tmp/run.last.log"
check "final weights equal the uninterrupted run's" cmp "$tmp/ref.st" "$tmp/run.st"
check "no temporary checkpoint is left" test -z "$(ls -A "$tmp/run/checkpoints" | grep -v '^step-\|^latest$')"
summary
