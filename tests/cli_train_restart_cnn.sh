#!/usr/bin/env bash
# The issue's acceptance run: `ddpc run --nproc-per-node 2 --max-restarts 3 -- ddpc train
# configs/fmnist_cnn.yaml checkpoint.every_steps=100` (300 steps of the real CNN on Fashion-MNIST)
# with a worker SIGKILLed twice at random moments reaches the same final weights as an undisturbed
# run, resuming from the latest checkpoint after each restart.
# usage: cli_train_restart_cnn.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
job=(--nproc-per-node 2 --max-restarts 3 -- "$ddpc" train "$src/configs/fmnist_cnn.yaml"
     checkpoint.every_steps=100 max_steps=300 log_every=50 num_threads=1 eval_batches=2)
"$ddpc" run "${job[@]}" run_dir="$tmp/ref" weights_out="$tmp/ref.st" >"$tmp/ref.log" 2>&1
check "the undisturbed run exits 0" test $? -eq 0
"$ddpc" run "${job[@]}" run_dir="$tmp/run" weights_out="$tmp/run.st" >"$tmp/run.log" 2>&1 &
launcher=$!
RANDOM=$$
killed=0
for k in 1 2; do
    sleep "$((RANDOM % 6 + 2)).$((RANDOM % 10))"
    workers=($(pgrep -P "$launcher"))
    [ ${#workers[@]} -gt 0 ] || break
    victim=${workers[$((RANDOM % ${#workers[@]}))]}
    kill -9 "$victim" 2>/dev/null && killed=$((killed + 1))
    echo "kill $k: worker pid $victim" >>"$tmp/kills.log"
done
wait "$launcher"
check "the disturbed job exits 0 after its restarts" test $? -eq 0
check "two workers were killed ($killed)" test "$killed" -eq 2
check "the launcher restarted the group twice" test "$(grep -c 'restarting' "$tmp/run.log")" -ge 2
check "final weights equal the undisturbed run's" cmp "$tmp/ref.st" "$tmp/run.st"
[ $failed -eq 0 ] || { cat "$tmp/kills.log"; grep -E 'resum|restart|fail|kill' "$tmp/run.log" | head -20; }
summary
