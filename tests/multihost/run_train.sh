#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Training through `ddpc run --nnodes 2` (one launcher per host, torchrun's way) across two
# network namespaces of the test bed: 2 hosts x 2 ranks train the MLP to weights byte-identical to
# `ddpc run --nproc-per-node 4` on one host (auto picks the gloo backend: shm within a host, gloo
# between hosts), a rerun is byte-identical, and with --max-restarts 1 a worker killed on host 1
# mid-training restarts the job on both hosts, which resumes from the latest checkpoint (shared
# file system) and still ends byte-identical. Needs root (CI is root); otherwise it says so and
# exits 77, which ctest reports as skipped, never as passed.
# usage: run_train.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
here=$(dirname "${BASH_SOURCE[0]}")
if [ "$(id -u)" -ne 0 ]; then
    echo "run_train.sh: the multi-host test bed needs root (network namespaces); not run" >&2
    exit 77
fi
. "$here/../lib/check.sh"
. "$here/testbed.sh"
trap 'bed_down; [ -n "${KEEP:-}" ] || rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
common=(data.type=synthetic_images data.size=640 data.batch_size=8 epochs=1 log_every=5
        optim.momentum=0.9 data.eval_batch_size=50)
cfg=$src/configs/fmnist_mlp.yaml

"$ddpc" run --nproc-per-node 4 -- "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/ref" \
    weights_out="$tmp/ref.st" >"$tmp/ref.log" 2>&1 ||
    fail "the one-host reference trains" "$tmp/ref.log"
bed_up 2 || exit 1

# nodes NAME [ddpc run options] -- [train keys]: both hosts' launchers, waited for; exit codes in
# rc0 and rc1, output in $tmp/NAME.{0,1}.log.
nodes() {
    local name=$1 port=$(bed_port) opts=() i
    shift
    while [ "$1" != -- ]; do opts+=("$1"); shift; done
    shift
    for i in 0 1; do
        bed_exec "$i" timeout 240 "$ddpc" run --nnodes 2 --node-rank "$i" \
            --master-addr "$(bed_addr 0)" --master-port "$port" --nproc-per-node 2 "${opts[@]}" \
            -- "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/$name" \
            weights_out="$tmp/$name.st" "$@" >"$tmp/$name.$i.log" 2>&1 &
        pids[$i]=$!
    done
    wait "${pids[0]}"
    rc0=$?
    wait "${pids[1]}"
    rc1=$?
}

for run in a b; do
    nodes "$run" --
    check "run $run: both launchers exit 0 ($rc0/$rc1)" test $rc0 -eq 0 -a $rc1 -eq 0 ||
        cat "$tmp/$run.0.log" "$tmp/$run.1.log"
    check "run $run: the workers chose the gloo backend" grep -q "backend gloo" "$tmp/$run.0.log"
    check "run $run: 2 hosts x 2 ranks = 1 host x 4 ranks, byte for byte" \
        cmp "$tmp/ref.st" "$tmp/$run.st"
done
check "a rerun across hosts is byte-identical" cmp "$tmp/a.st" "$tmp/b.st"

# Rank 3 (host 1) is SIGKILLed between the micro-batches of step 12 of the first attempt; the
# launchers restart every node, and `resume: auto` continues from checkpoint 10.
nodes restart --max-restarts 1 -- checkpoint.every_steps=5 fault.kill_at_step=12 \
    fault.kill_at_micro=0 fault.kill_rank=3
check "--max-restarts 1: both launchers exit 0 after the restart ($rc0/$rc1)" \
    test $rc0 -eq 0 -a $rc1 -eq 0
check "host 0's launcher names the killed rank on node 1" \
    grep -q "rank 3 (local rank 1, pid [0-9]*) on node 1 (host .*, 10.77.0.2) failed with \
signal SIGKILL" "$tmp/restart.0.log"
check "every node restarted" grep -q "restarting all workers on every node (restart 1 of 1)" \
    "$tmp/restart.1.log"
check "the restarted job resumed from the latest checkpoint" \
    grep -q "resuming from .*step-00000010: step 10" "$tmp/restart.0.log"
check "the restarted job ends byte-identical to the one-host run" \
    cmp "$tmp/ref.st" "$tmp/restart.st"
summary
