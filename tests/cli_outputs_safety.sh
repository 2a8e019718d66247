#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# What a job writes is its own, through `ddpc train`, `ddpc run`, `ddpc ckpt export` and
# `ddpc report`: a second job on the same checkpoint.dir or weights_out is refused at start with
# one line naming the path and the holder, and changes nothing; a killed holder leaves no lock
# that blocks a rerun or a restart (--max-restarts); the ranks of one job do not refuse each
# other. Outputs replace only regular files: a symlink's target is replaced (the link stays), a
# device node or FIFO is refused before training and left as it was.
# usage: cli_outputs_safety.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
small=(data.type=synthetic_images data.size=512 data.batch_size=32 log_every=2 num_threads=1
       'model.hidden=[32]')

# wait_for FILE: waits (up to 60 s) until FILE exists and is not empty.
wait_for() {
    for _ in $(seq 600); do [ -s "$1" ] && return 0; sleep 0.1; done
    return 1
}
# one_line LOG: the log holds exactly one line starting "ddpc train:" (the refusal).
one_line() { test "$(grep -c '^ddpc train: ' "$1")" -eq 1; }

# 1. A job holding checkpoint.dir and weights_out (long enough to be alive throughout).
mkdir -p "$tmp/shared"
hold=("${small[@]}" data.size=4096 'model.hidden=[512,512]')
"$ddpc" train "$cfg" "${hold[@]}" epochs=50 \
    checkpoint.every_steps=5 checkpoint.dir="$tmp/shared/ckpt" \
    weights_out="$tmp/shared/model.safetensors" run_dir="$tmp/holder" >"$tmp/holder.log" 2>&1 &
holder=$!
wait_for "$tmp/shared/ckpt/latest"
check "the holder has saved a checkpoint" test -s "$tmp/shared/ckpt/latest"

# beyond: a step count past the holder's latest checkpoint, so that a job resuming it would train
# (and save) on instead of finding itself done.
beyond() { echo $((10#$(sed 's/^step-//' "$tmp/shared/ckpt/latest") + 100)); }

# A second job on the same checkpoint.dir (its own run_dir, the same model): refused at once,
# before it resumes the holder's state or saves anything.
"$ddpc" train "$cfg" "${hold[@]}" max_steps="$(beyond)" checkpoint.every_steps=1 \
    checkpoint.dir="$tmp/shared/ckpt" run_dir="$tmp/second" >"$tmp/second.log" 2>&1
check "a second job on a busy checkpoint.dir fails" test $? -ne 0
check "it names the directory and the holder's pid" grep -q \
    "checkpoint directory '$tmp/shared/ckpt' is in use by another job (pid $holder); use another checkpoint.dir" \
    "$tmp/second.log"
check "in one line" one_line "$tmp/second.log"
check "it neither resumed nor saved" bash -c "! grep -q 'resuming\|saved' '$tmp/second.log'"
check "nor wrote metrics" test ! -e "$tmp/second/metrics.jsonl"

# A second job writing the same weights_out, through a symlink to it: refused at start.
ln -s "$tmp/shared/model.safetensors" "$tmp/link.safetensors"
"$ddpc" train "$cfg" "${small[@]}" max_steps=2 weights_out="$tmp/link.safetensors" \
    run_dir="$tmp/third" >"$tmp/third.log" 2>&1
check "a second job on a busy weights_out fails" test $? -ne 0
check "it names weights_out and the holder's pid" grep -q \
    "weights_out '$tmp/link.safetensors' is in use by another job (pid $holder); use another weights_out" \
    "$tmp/third.log"
check "in one line, before training" one_line "$tmp/third.log"
check "and trained nothing" bash -c "! grep -q '^step ' '$tmp/third.log'"

# The same refusal for a job of 2 ranks under `ddpc run`: rank 0 refuses, the launcher stops it.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${hold[@]}" max_steps="$(beyond)" \
    checkpoint.every_steps=1 checkpoint.dir="$tmp/shared/ckpt" run_dir="$tmp/fourth" \
    >"$tmp/fourth.log" 2>&1
check "2 ranks on a busy checkpoint.dir: refused" test $? -ne 0
check "naming the holder" grep -q "checkpoint directory '$tmp/shared/ckpt' is in use by another job (pid $holder)" \
    "$tmp/fourth.log"
check "saving nothing" bash -c "! grep -q 'saved' '$tmp/fourth.log'"

# Killed, the holder leaves lock files but no lock: the same job runs again and finishes.
kill -9 "$holder"
wait "$holder" 2>/dev/null
check "the killed holder left its weights_out lock file" test -e "$tmp/shared/model.safetensors.lock"
"$ddpc" train "$cfg" "${small[@]}" max_steps=4 checkpoint.every_steps=2 \
    checkpoint.dir="$tmp/shared/ckpt" resume=never weights_out="$tmp/shared/model.safetensors" \
    run_dir="$tmp/holder" >"$tmp/rerun.log" 2>&1
check_status "after the holder died, checkpoint.dir and weights_out are free" $? "$tmp/rerun.log"
check "a finished job removes its weights_out lock file" test ! -e "$tmp/shared/model.safetensors.lock"

# 2. One job of 2 ranks, rank 0 (the lock holder) killed at step 5 and restarted: the restart
# takes the locks again, resumes from step 4 and writes weights_out.
"$ddpc" run --nproc-per-node 2 --max-restarts 1 -- "$ddpc" train "$cfg" "${small[@]}" max_steps=8 \
    checkpoint.every_steps=2 checkpoint.dir="$tmp/r/ckpt" weights_out="$tmp/r/w.safetensors" \
    fault.kill_at_step=5 fault.kill_rank=0 run_dir="$tmp/r/run" >"$tmp/restart.log" 2>&1
check_status "2 ranks, rank 0 killed and restarted: the job finishes" $? "$tmp/restart.log"
check "the restart resumed from step 4" grep -q "resuming from .*step-0*4: step 4" "$tmp/restart.log"
check "and wrote weights_out" test -s "$tmp/r/w.safetensors"

# 3. Outputs that are not regular files. Each is refused before training, in one line, and left
# as it was (a rename would put a regular file in its place: as root, over /dev/null).
mkfifo "$tmp/fifo"
"$ddpc" train "$cfg" "${small[@]}" max_steps=2 weights_out="$tmp/fifo" run_dir="$tmp/f" \
    >"$tmp/fifo.log" 2>&1
check "weights_out on a FIFO is refused" test $? -ne 0
check "saying what it is" grep -q "weights_out '$tmp/fifo': it is a FIFO, not a regular file" \
    "$tmp/fifo.log"
check "before training, in one line" bash -c "! grep -q '^step ' '$tmp/fifo.log'" 
check "the FIFO is still a FIFO" test -p "$tmp/fifo"
if mknod "$tmp/null" c 1 3 2>/dev/null; then # root: a device node of our own, not /dev/null
    "$ddpc" train "$cfg" "${small[@]}" max_steps=2 weights_out="$tmp/null" run_dir="$tmp/n" \
        >"$tmp/null.log" 2>&1
    check "weights_out on a device node is refused" test $? -ne 0
    check "saying what it is" grep -q "it is a character device, not a regular file" "$tmp/null.log"
    check "the device node is still one" test -c "$tmp/null"
fi

# A symlink is followed: its target is replaced, the link stays a link.
"$ddpc" train "$cfg" "${small[@]}" max_steps=2 checkpoint.every_steps=2 run_dir="$tmp/s" \
    >"$tmp/s.log" 2>&1
check_status "a run to export and report" $? "$tmp/s.log"
echo old >"$tmp/real.safetensors"
ln -s real.safetensors "$tmp/out.safetensors" # relative: resolved from the link's directory
"$ddpc" ckpt export "$tmp/s/checkpoints" "$tmp/out.safetensors" >"$tmp/export.log" 2>&1
check_status "ckpt export through a symlink" $? "$tmp/export.log"
check "the link is still a link" test -L "$tmp/out.safetensors"
check "its target was replaced by the weights" bash -c "! grep -q '^old' '$tmp/real.safetensors'"
"$ddpc" ckpt export "$tmp/s/checkpoints" "$tmp/fifo" >"$tmp/export_fifo.log" 2>&1
check "ckpt export onto a FIFO is refused" test $? -ne 0
check "naming it" grep -q "'$tmp/fifo': it is a FIFO" "$tmp/export_fifo.log"
check "the FIFO is left alone" test -p "$tmp/fifo"
"$ddpc" report "$tmp/s" --out "$tmp/fifo" >"$tmp/report_fifo.log" 2>&1
check "report --out onto a FIFO is refused" test $? -ne 0
check "naming it" grep -q "'$tmp/fifo': it is a FIFO" "$tmp/report_fifo.log"
check "the FIFO is left alone" test -p "$tmp/fifo"
ln -s page.html "$tmp/s/link.html"
"$ddpc" report "$tmp/s" --out "$tmp/s/link.html" >"$tmp/report_link.log" 2>&1
check_status "report --out through a symlink" $? "$tmp/report_link.log"
check "writes the link's target, the link stays" bash -c "test -L '$tmp/s/link.html' && grep -q '<html' '$tmp/s/page.html'"

summary
