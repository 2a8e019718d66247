#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
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
     checkpoint.every_steps=100 max_steps=300 log_every=10 num_threads=1 eval_batches=2)
"$ddpc" run "${job[@]}" run_dir="$tmp/ref" weights_out="$tmp/ref.st" >"$tmp/ref.log" 2>&1
check "the undisturbed run exits 0" test $? -eq 0
"$ddpc" run "${job[@]}" run_dir="$tmp/run" weights_out="$tmp/run.st" >"$tmp/run.log" 2>&1 &
launcher=$!
# The newest progress line's step, and how often the launcher restarted the group.
latest_step() { grep -o 'step *[0-9]*/300' "$tmp/run.log" | tail -1 | sed 's/step *\([0-9]*\)\/300/\1/'; }
restarts() { grep -c 'restarting all workers' "$tmp/run.log"; }
reached() { local s; s=$(latest_step); [ -n "$s" ] && [ "$s" -ge "$1" ] && [ "$(restarts)" -eq "$2" ]; }
restarted() { [ "$(restarts)" -ge "$1" ]; }
# wait_for CMD...: polls until CMD succeeds; false when the launcher ended first or after 120 s.
wait_for() {
    for _ in $(seq 1200); do
        "$@" && return 0
        kill -0 "$launcher" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}
RANDOM=$$
killed=0
# Kill 1 at a random step of the first attempt, kill 2 at a random later step of the second
# (each attempt's workers: a random one of them), waiting for the restart in between.
for k in 1 2; do
    if [ $k -eq 1 ]; then target=$((20 + RANDOM % 120)); else target=$((160 + RANDOM % 110)); fi
    wait_for reached "$target" $((k - 1)) || break
    workers=($(pgrep -P "$launcher" -f "^[^ ]+ train ")) # not the guard, a fork of "ddpc run"
    [ ${#workers[@]} -gt 0 ] || break
    victim=${workers[$((RANDOM % ${#workers[@]}))]}
    what=$(tr '\0' ' ' <"/proc/$victim/cmdline" 2>/dev/null | cut -c1-60)
    kill -9 "$victim" 2>/dev/null && killed=$((killed + 1))
    echo "kill $k: pid $victim ($what) after step $(latest_step)" >>"$tmp/kills.log"
    wait_for restarted $k || break
done
wait "$launcher"
check "the disturbed job exits 0 after its restarts" test $? -eq 0
check "two workers were killed ($killed)" test "$killed" -eq 2
check "the launcher restarted the group twice" test "$(grep -c 'restarting' "$tmp/run.log")" -ge 2
check "final weights equal the undisturbed run's" cmp "$tmp/ref.st" "$tmp/run.st"
[ $failed -eq 0 ] || { cat "$tmp/kills.log"; grep -E 'resum|restart|fail|kill' "$tmp/run.log" | head -20; }
summary
