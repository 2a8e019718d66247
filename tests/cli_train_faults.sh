#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Faults of a training job that must not pass silently, each tried through `ddpc train`:
# a second job on a locked run_dir is refused with the holder's pid; a loss that turns NaN stops
# the run (on_nonfinite: stop) or is skipped and counted (skip), and metrics.jsonl stays valid
# JSON; a metrics.jsonl that cannot be written (disk full) fails the run; an unwritable
# weights_out or checkpoint.dir is refused before training; config.yaml is written and runs the
# same training again.
# usage: cli_train_faults.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
small=(data.type=synthetic_images data.size=512 data.batch_size=32 log_every=2 num_threads=1
       'model.hidden=[32]')
# valid_json FILE: every line of FILE parses as JSON.
valid_json() { python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$1"; }

# A job holding the run directory; a second one is refused, naming the holder's pid.
"$ddpc" train "$cfg" "${small[@]}" data.size=4096 'model.hidden=[512,512]' epochs=50 \
    run_dir="$tmp/busy" >"$tmp/holder.log" 2>&1 &
holder=$!
# Until the holder has started training (it holds the directory by then): a bound for a stuck
# holder, not a timing, so a slow start on a loaded machine still waits.
for _ in $(seq 3000); do [ -s "$tmp/busy/metrics.jsonl" ] && break; sleep 0.1; done
"$ddpc" train "$cfg" "${small[@]}" max_steps=2 run_dir="$tmp/busy" >"$tmp/second.log" 2>&1
check "a second job on a busy run_dir fails" test $? -ne 0
check "it names the holder's pid" grep -q "run directory '$tmp/busy' is in use by another job (pid $holder)" "$tmp/second.log"
kill -9 "$holder"
wait "$holder" 2>/dev/null
check "the holder's metrics.jsonl is intact JSON" valid_json "$tmp/busy/metrics.jsonl"
"$ddpc" train "$cfg" "${small[@]}" max_steps=2 run_dir="$tmp/busy" >"$tmp/third.log" 2>&1
check "after the holder died the directory is free" test $? -eq 0

# A diverging run: SGD at lr 10 with momentum 0.99 reaches NaN within a few steps.
diverge=("${small[@]}" 'model.hidden=[256,128]' max_steps=40 optim.lr=10 optim.momentum=0.99 optim.nesterov=false
         optim.schedule=constant)
"$ddpc" train "$cfg" "${diverge[@]}" run_dir="$tmp/nan_stop" >"$tmp/nan_stop.log" 2>&1
check "a NaN loss stops the run with a non-zero exit" test $? -ne 0
check "the message names the step and the setting" grep -q "step [0-9]*: .*NaN.*on_nonfinite: stop" "$tmp/nan_stop.log"
check "metrics.jsonl is valid JSON after a NaN stop" valid_json "$tmp/nan_stop/metrics.jsonl"
"$ddpc" train "$cfg" "${diverge[@]}" on_nonfinite=skip run_dir="$tmp/nan_skip" >"$tmp/nan_skip.log" 2>&1
check "on_nonfinite: skip trains on and exits 0" test $? -eq 0
check "metrics.jsonl is valid JSON with NaN values (null)" valid_json "$tmp/nan_skip/metrics.jsonl"
check "skipped steps are counted" grep -q '"skipped_steps": [1-9]' "$tmp/nan_skip/metrics.jsonl"
check "NaN is written as null" grep -q '"loss": null' "$tmp/nan_skip/metrics.jsonl"

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${diverge[@]}" data.size=2048 max_steps=60 \
    optim.momentum=0.999 run_dir="$tmp/nan2" >"$tmp/nan2.log" 2>&1
check "2 ranks: a NaN stops the job with a non-zero exit" test $? -ne 0
check "every rank takes the same decision at the same step" \
    test "$(grep -o 'step [0-9]*: the loss on rank [01] is NaN' "$tmp/nan2.log" | sed 's/ on rank [01]//' | sort -u | wc -l)" -eq 1

# Disk full: metrics.jsonl is /dev/full.
mkdir -p "$tmp/full"
ln -s /dev/full "$tmp/full/metrics.jsonl"
"$ddpc" train "$cfg" "${small[@]}" max_steps=4 run_dir="$tmp/full" >"$tmp/full.log" 2>&1
check "a metrics write error fails the run" test $? -ne 0
check "it names the file and the reason" grep -q "cannot write '$tmp/full/metrics.jsonl': No space left on device" "$tmp/full.log"

# Outputs that cannot be written are found before training.
touch "$tmp/plain"
"$ddpc" train "$cfg" "${small[@]}" max_steps=4 run_dir="$tmp/w" weights_out="$tmp/plain/sub/w.st" >"$tmp/w.log" 2>&1
check "an unwritable weights_out fails at start" test $? -ne 0
check "it names weights_out" grep -q "cannot write '$tmp/plain/sub/w.st'" "$tmp/w.log"
check "nothing was trained" test -z "$(grep '^step' "$tmp/w.log")"
"$ddpc" train "$cfg" "${small[@]}" max_steps=4 run_dir="$tmp/c" checkpoint.every_steps=2 \
    checkpoint.dir="$tmp/plain/ckpt" >"$tmp/c.log" 2>&1
check "an unwritable checkpoint.dir fails at start" test $? -ne 0
check "it names the directory" grep -q "$tmp/plain/ckpt" "$tmp/c.log"
check "nothing was trained (checkpoint.dir)" test -z "$(grep '^step' "$tmp/c.log")"

# config.yaml: the effective configuration, loadable, and it trains the same weights again.
"$ddpc" train "$cfg" "${small[@]}" max_steps=6 model.dropout=0.1 run_dir="$tmp/cfg" weights_out="$tmp/cfg.st" >"$tmp/cfg.log" 2>&1
check "config.yaml is written" grep -q '^  hidden: \[32\]' "$tmp/cfg/config.yaml"
"$ddpc" train "$tmp/cfg/config.yaml" run_dir="$tmp/cfg2" weights_out="$tmp/cfg2.st" >"$tmp/cfg2.log" 2>&1
check "ddpc train run_dir/config.yaml runs" test $? -eq 0
check "and trains the same weights" cmp "$tmp/cfg.st" "$tmp/cfg2.st"
[ $failed -eq 0 ] || tail -n 3 "$tmp"/*.log
summary
