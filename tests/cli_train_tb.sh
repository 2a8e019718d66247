#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# TensorBoard event files, decoded independently of ddpc's writer (tests/tb/: Debian's protoc
# compiles tb_event.proto, python3-protobuf parses the events, crcmod checks both CRC-32Cs of
# every record): a 2-rank run with evaluation, and a run killed on rank 1 and restarted by
# `ddpc run --max-restarts` that resumes from its checkpoint (the second file starts with a
# session_log START at the first step after the checkpoint); every scalar equals metrics.jsonl's value. Also: a file
# cut inside a record keeps every earlier record, log.tensorboard_per_rank writes each rank's own
# file under tb/rank<k>/, and log.tensorboard=false writes none.
# usage: cli_train_tb.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

py=/usr/bin/python3
here=$src/tests/tb
if ! command -v protoc >/dev/null || ! $py -c 'import google.protobuf, crcmod' 2>/dev/null; then
    fail "needs protoc and python3-protobuf, python3-crcmod: run scripts/setup"
    summary
    exit 1
fi
protoc --proto_path="$here" --python_out="$tmp" "$here/tb_event.proto" ||
    { fail "protoc compiles tb_event.proto"; summary; exit 1; }

cfg=$src/configs/fmnist_mlp.yaml
common=(data.type=synthetic_images data.size=1024 data.batch_size=16 num_threads=1 log_every=4
    eval_every=8 eval_batches=4 epochs=1)

# decode DIR: every event file of DIR/tb, decoded, to stdout
decode() { $py "$here/decode_events.py" "$tmp" "$1"/tb/events.out.tfevents.*; }

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" max_steps=24 \
    run_dir="$tmp/a" >"$tmp/a.log" 2>&1
check "a 2-rank run with evaluation trains" test $? -eq 0
check "rank 0 wrote one event file in run_dir/tb" test "$(ls "$tmp/a/tb" | wc -l)" -eq 1
decode "$tmp/a" >"$tmp/a.events" 2>"$tmp/a.err"
check "its events decode, every CRC right" test $? -eq 0
$py "$here/compare.py" "$tmp/a/metrics.jsonl" <"$tmp/a.events" >"$tmp/a.cmp" 2>&1
check "every scalar equals metrics.jsonl's, record for record ($(cat "$tmp/a.cmp"))" \
    grep -q "^ok " "$tmp/a.cmp"
check "... loss, lr, samples/s, data wait and grad norm are among them" \
    grep -q '"loss": .*"lr": .*"samples_per_s": .*"data_wait_s": .*"grad_norm"' "$tmp/a.events"
check "... and the evaluation's loss and accuracy per split" \
    grep -q '"val/eval_loss": .*"val/eval_accuracy"' "$tmp/a.events"
check "... and the test split's at the end" grep -q '"test/eval_accuracy"' "$tmp/a.events"

# killed on rank 1 at step 14, restarted, resumed from checkpoint 10
"$ddpc" run --nproc-per-node 2 --max-restarts 1 -- "$ddpc" train "$cfg" "${common[@]}" \
    max_steps=24 checkpoint.every_steps=5 fault.kill_at_step=14 fault.kill_rank=1 \
    run_dir="$tmp/r" >"$tmp/r.log" 2>&1
check "a killed and restarted run ends with exit 0" test $? -eq 0
check "it resumed from checkpoint 10" grep -q '"step": 10, "event": "resume"' "$tmp/r/metrics.jsonl"
check "the restart wrote a second event file" test "$(ls "$tmp/r/tb" | wc -l)" -eq 2
decode "$tmp/r" >"$tmp/r.events" 2>"$tmp/r.err"
check "both decode, every CRC right" test $? -eq 0
$py "$here/compare.py" "$tmp/r/metrics.jsonl" <"$tmp/r.events" >"$tmp/r.cmp" 2>&1
check "every scalar of both attempts equals metrics.jsonl's ($(cat "$tmp/r.cmp"))" \
    grep -q "^ok .*(1 session_log START) in 2 file(s)" "$tmp/r.cmp"
check "the START is at step 11, the resumed run's first" grep -q '"step": 11, .*"start": true' \
    "$tmp/r.events"
# last_loss FILE: the step-24 loss event of a decoded file, without its wall time
last_loss() {
    grep -o '"step": 24, "wall_time": [0-9.]*, "scalars": {"epoch": [0-9.]*, "loss": [0-9.e-]*' \
        "$1" | sed 's/"wall_time": [0-9.]*, //'
}
want=$(last_loss "$tmp/a.events")
check "the resumed run logs the uninterrupted run's step-24 loss (${want##* })" \
    test -n "$want" -a "$(last_loss "$tmp/r.events")" = "$want"

# a file cut inside its last record: every earlier record decodes
f=$(ls "$tmp"/a/tb/events.out.tfevents.* | head -1)
mkdir -p "$tmp/cut/tb"
size=$(stat -c %s "$f")
head -c $((size - 7)) "$f" >"$tmp/cut/tb/events.out.tfevents.cut"
decode "$tmp/cut" >"$tmp/cut.events" 2>&1
check "a file cut mid-record decodes" test $? -eq 0
check "... keeping all records but the torn one" \
    test "$(grep -c '"step"' "$tmp/cut.events")" -eq $(($(grep -c '"step"' "$tmp/a.events") - 1))
check "... and saying where it was torn" grep -q '"torn": ' "$tmp/cut.events"

# log.tensorboard_per_rank: every rank also writes its own view under tb/rank<k>/
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" max_steps=8 \
    log.tensorboard_per_rank=true run_dir="$tmp/pr" >"$tmp/pr.log" 2>&1
check "log.tensorboard_per_rank=true trains on 2 ranks" test $? -eq 0
$py "$here/decode_events.py" "$tmp" "$tmp"/pr/tb/rank0/events.out.tfevents.* >"$tmp/pr0.events" &&
    $py "$here/compare.py" "$tmp/pr/metrics.jsonl" <"$tmp/pr0.events" >"$tmp/pr0.cmp" 2>&1
check "... rank 0's tb/rank0 holds metrics.jsonl's values ($(cat "$tmp/pr0.cmp"))" \
    grep -q "^ok " "$tmp/pr0.cmp"
$py "$here/decode_events.py" "$tmp" "$tmp"/pr/tb/rank1/events.out.tfevents.* >"$tmp/pr1.events"
check "... rank 1's tb/rank1 decodes, with its own loss and throughput at steps 4 and 8" \
    test "$(grep -c '"scalars": {"epoch": .*"loss": .*"samples_per_s"' "$tmp/pr1.events")" -eq 2

"$ddpc" train "$cfg" "${common[@]}" max_steps=2 log.tensorboard=false run_dir="$tmp/off" \
    >"$tmp/off.log" 2>&1
check "log.tensorboard=false trains" test $? -eq 0
check "... and writes no tb directory" test ! -e "$tmp/off/tb"
if [ $failed -ne 0 ]; then tail -n 5 "$tmp"/*.log "$tmp"/*.err; fi
summary
