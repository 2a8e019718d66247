#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A rerun into an existing run directory never silently continues a different experiment
# (issue 23), through `ddpc train` and `ddpc run`: resume: auto compares this run's effective
# configuration with the checkpoint's. A changed learning rate, seed or model size is refused in
# one line listing the keys (old -> new) and the way out (another checkpoint.dir when it is set
# apart), with the run directory byte-identical afterwards; several changes are all listed;
# resume=force, or a checkpoint named by resume, continues with a warning listing them;
# a longer max_steps extends the run and ends bit for bit where an uninterrupted run of that length
# does; 2 ranks -> 1 with the same global batch, or another ZeRO stage, is reported as a reshard,
# while 2 -> 1 with the same per-rank batch (another global batch) is refused; cosmetic changes
# (logging, cadences, workers, threads) are accepted and listed; a checkpoint that records no
# configuration is said once to be not compared, and a key only the checkpoint read is listed as
# accepted; resume: never still starts over. Without
# checkpoints, a rerun appends to metrics.jsonl, says so, and opens a TensorBoard session with a
# session_log START at step 0 (decoded by tests/tb/, independently of ddpc).
# usage: cli_train_resume_config.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
# A constant LR: the schedule does not depend on the run's length, so a run extended from 10 to 20
# steps takes the same steps as a 20-step run.
common=(data.type=synthetic_images data.size=256 data.batch_size=16 num_threads=1 log_every=5
    optim.schedule=constant seed=3 'model.hidden=[32]' checkpoint.every_steps=5)

# snapshot DIR: the names, sizes and checksums of everything under DIR, for "nothing changed".
snapshot() { (cd "$1" && find . -print0 | sort -z | xargs -0 -r md5sum 2>/dev/null; find . | sort); }
# train NAME ARGS...: one rank into $tmp/NAME, its output in $tmp/NAME.log; returns the status.
train() {
    local name=$1
    shift
    "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/$name" "$@" >"$tmp/$name.log" 2>&1
}
# base NAME: a finished 10-step run with checkpoints 5 and 10 in $tmp/NAME.
base() { train "$1" max_steps=10 || fail "base run $1" "$tmp/$1.log"; }

base a
ck=$tmp/a/checkpoints/step-00000010

# 1. Changes to the training are refused before anything is written.
refused() { # refused NAME WHAT EXPECTED_LIST ARGS...
    local name=$1 what=$2 list=$3
    shift 3
    local before
    before=$(snapshot "$tmp/a")
    "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/a" max_steps=10 "$@" >"$tmp/$name.log" 2>&1
    local st=$?
    check "$what: refused (exit $st)" test "$st" -ne 0
    check "$what: in one line" test "$(wc -l <"$tmp/$name.log")" -eq 1
    check "$what: naming the checkpoint and the keys, old -> new" grep -qF \
        "ddpc train: resume: checkpoint $ck was trained with another configuration: $list; nothing was changed: set resume=force to continue it with these changes, or use another run_dir to start a new run" \
        "$tmp/$name.log"
    check "$what: the run directory is byte-identical afterwards" test "$(snapshot "$tmp/a")" = "$before"
    [ "$(wc -l <"$tmp/$name.log")" -eq 1 ] || cat "$tmp/$name.log"
}
refused lr "another optim.lr" "optim.lr 0.05 -> 0.1" optim.lr=0.1
refused seed "another seed" "seed 3 -> 4" seed=4
refused size "another model size" "model.hidden [32] -> [64]" 'model.hidden=[64]'
refused several "three changes" "seed 3 -> 4, model.hidden [32] -> [64], optim.lr 0.05 -> 0.1" \
    seed=4 'model.hidden=[64]' optim.lr=0.1
check "an equal value spelled differently is no change" \
    train a max_steps=10 optim.lr=5e-2
check "... and says nothing about it" test "$(grep -c 'optim.lr' "$tmp/a.log")" -eq 0

# 2. resume=force continues with a warning listing the changes.
base f
train f max_steps=15 optim.lr=0.1 resume=force
check "resume=force continues (exit $?)" test $? -eq 0
check "resume=force: resumed from step 10" grep -q "resuming from $tmp/f/checkpoints/step-00000010: step 10" "$tmp/f.log"
check "resume=force: a warning lists the changes" grep -qF \
    "warning: resume=force continues $tmp/f/checkpoints/step-00000010 with changes to its training: optim.lr 0.05 -> 0.1" \
    "$tmp/f.log"
check "resume=force: it trained to step 15" grep -q '"step": 15, "epoch"' "$tmp/f/metrics.jsonl"
train pth max_steps=12 optim.lr=0.1 resume="$ck"
check "resume=PATH with another configuration continues (exit $?)" test $? -eq 0
check "resume=PATH: a warning lists the changes" grep -qF \
    "warning: resume continues the named checkpoint $ck with changes to its training: optim.lr 0.05 -> 0.1" \
    "$tmp/pth.log"
train cd max_steps=10 checkpoint.dir="$tmp/cd_ckpt"
train cd max_steps=10 checkpoint.dir="$tmp/cd_ckpt" seed=4
check "checkpoint.dir apart from run_dir: refused, naming checkpoint.dir as the way out" grep -qF \
    "seed 3 -> 4; nothing was changed: set resume=force to continue it with these changes, or use another checkpoint.dir to start a new run" \
    "$tmp/cd.log"

# 3. A longer max_steps extends the run, bit for bit equal to an uninterrupted 20-step run.
train ref20 max_steps=20 weights_out="$tmp/ref20.st"
check "the uninterrupted 20-step run trains" test $? -eq 0
base ext
train ext max_steps=20 weights_out="$tmp/ext.st"
check "max_steps 10 -> 20 resumes (exit $?)" test $? -eq 0
check "max_steps 10 -> 20: reported as the run's length" \
    grep -qx "resume: max_steps 10 -> 20 changes the run's length" "$tmp/ext.log"
check "max_steps 10 -> 20: the weights equal the uninterrupted 20-step run's" cmp "$tmp/ext.st" "$tmp/ref20.st"

# 4. Cosmetic keys are accepted and listed in one line.
base cos
train cos max_steps=10 log_every=2 eval_every=4 checkpoint.every_steps=2 data.num_workers=2 \
    num_threads=2 checkpoint.keep=0
check "cosmetic changes: accepted (exit $?)" test $? -eq 0
check "cosmetic changes: listed in one line" grep -qx \
    "resume: accepted changes that do not affect training: num_threads 1 -> 2, eval_every 0 -> 4, log_every 5 -> 2, data.num_workers 1 -> 2, stats_sync_every 5 -> 2, checkpoint.every_steps 5 -> 2, checkpoint.keep 3 -> 0" \
    "$tmp/cos.log"
check "cosmetic changes: no refusal, no warning" test "$(grep -c 'warning\|another configuration' "$tmp/cos.log")" -eq 0

# 5. Another world size: the same global batch is a reshard, another global batch is refused.
two() { # two NAME ARGS...: 2 ranks into $tmp/NAME
    local name=$1
    shift
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/$name" \
        "$@" >"$tmp/$name.log" 2>&1
}
two w2 max_steps=10
check "a 2-rank run with checkpoints trains" test $? -eq 0
cp -r "$tmp/w2" "$tmp/w2z"
before=$(snapshot "$tmp/w2")
"$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/w2" max_steps=12 >"$tmp/w1.log" 2>&1
check "2 ranks -> 1 with the per-rank batch kept: refused (global batch 32 -> 16)" grep -qF \
    "trained with another configuration: global batch 32 -> 16 (world 2 -> 1); nothing was changed" "$tmp/w1.log"
check "... and nothing changed" test "$(snapshot "$tmp/w2")" = "$before"
"$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/w2" max_steps=12 data.batch_size=32 \
    >"$tmp/w1b.log" 2>&1
check "2 ranks -> 1 with the global batch kept resumes (exit $?)" test $? -eq 0
check "... reported as a reshard" grep -qx \
    "resume: resharded to this run's layout: world 2 -> 1, data.batch_size 16 -> 32 (global batch 32 either way)" \
    "$tmp/w1b.log"
check "... and trains on to step 12" grep -q '"step": 12, "split": "test"' "$tmp/w2/metrics.jsonl"
two w2z max_steps=12 zero.stage=1
check "another ZeRO stage on 2 ranks resumes (exit $?)" test $? -eq 0
check "... reported as a reshard" grep -qx "resume: resharded to this run's layout: zero.stage 0 -> 1" "$tmp/w2z.log"

# 6. A checkpoint that records no configuration: said once, not compared. One that records a key
# this run does not read (another version's): listed among the accepted changes.
# edit_config STATE_JSON drop|add LINE: rewrites state.json's config, then its own CRC-32.
edit_config() {
    /usr/bin/python3 - "$@" <<'PY'
import json, re, sys, zlib
path, mode = sys.argv[1], sys.argv[2]
text = open(path).read()
config = json.loads(text)["config"]
config = "" if mode == "drop" else config + sys.argv[3] + "\n"
text = re.sub(r'"config": "(?:[^"\\]|\\.)*"', lambda m: '"config": ' + json.dumps(config), text)
text = re.sub(r'"state_crc32": "[0-9a-f]{8}"', '"state_crc32": "00000000"', text)
crc = zlib.crc32(text.encode()) & 0xFFFFFFFF
open(path, "w").write(text.replace('"state_crc32": "00000000"', '"state_crc32": "%08x"' % crc))
PY
}
base old
edit_config "$tmp/old/checkpoints/step-00000010/state.json" drop
train old max_steps=12 optim.lr=0.1
check "a checkpoint without its configuration resumes (exit $?)" test $? -eq 0
check "... saying once that its settings are not compared" test "$(grep -c \
    "resume: $tmp/old/checkpoints/step-00000010 records no configuration (an older ddpc wrote it): its settings are unknown and not compared with this run's" \
    "$tmp/old.log")" -eq 1
base one
edit_config "$tmp/one/checkpoints/step-00000010/state.json" add "model.retired_key: 7"
train one max_steps=10
check "a key only the checkpoint read resumes (exit $?)" test $? -eq 0
check "... listed among the accepted changes" grep -qx \
    "resume: accepted changes that do not affect training: model.retired_key 7 -> (none)" "$tmp/one.log"

# 7. resume: never still starts over, whatever the checkpoint's configuration.
base nev
train nev max_steps=3 resume=never optim.lr=0.1 checkpoint.dir="$tmp/nev/fresh"
check "resume=never with another configuration starts over (exit $?)" test $? -eq 0
check "... from step 0" grep -q '"step": 3, "epoch": 0' "$tmp/nev/metrics.jsonl"
check "... comparing nothing" test "$(grep -c 'resume' "$tmp/nev.log")" -eq 0
check "... and says it appends to the earlier run's metrics" \
    grep -q "^run_dir '$tmp/nev' holds an earlier run's metrics: appending" "$tmp/nev.log"

# 8. Without checkpoints a rerun appends to metrics.jsonl, says so, and starts a TensorBoard session.
train tb max_steps=4 checkpoint.every_steps=0
check "a run without checkpoints trains" test $? -eq 0
train tb max_steps=6 checkpoint.every_steps=0 optim.lr=0.1
check "its rerun trains (exit $?)" test $? -eq 0
check "the rerun says it appends" grep -qx \
    "run_dir '$tmp/tb' holds an earlier run's metrics: appending to its metrics.jsonl, and TensorBoard starts a new session at this step (use another run_dir to keep the runs apart)" \
    "$tmp/tb.log"
check "metrics.jsonl keeps the first run's records" grep -q '"step": 4, "split": "test"' "$tmp/tb/metrics.jsonl"
check "... then a rerun record and the rerun's" \
    test "$(grep -o '"step": [0-9]*, "\(event": "rerun\|split": "test\)' "$tmp/tb/metrics.jsonl" | tr '\n' ' ')" \
    = '"step": 4, "split": "test "step": 0, "event": "rerun "step": 6, "split": "test '
here=$src/tests/tb
if command -v protoc >/dev/null && /usr/bin/python3 -c 'import google.protobuf, crcmod' 2>/dev/null &&
    protoc --proto_path="$here" --python_out="$tmp" "$here/tb_event.proto"; then
    check "two event files" test "$(ls "$tmp/tb/tb" | wc -l)" -eq 2
    /usr/bin/python3 "$here/decode_events.py" "$tmp" "$tmp"/tb/tb/events.out.tfevents.* \
        >"$tmp/tb.events" 2>"$tmp/tb.err"
    check "they decode, every CRC right" test $? -eq 0
    check "the rerun's file has a session_log START at step 0" \
        grep -q '"step": 0, .*"start": true' "$tmp/tb.events"
    /usr/bin/python3 "$here/compare.py" "$tmp/tb/metrics.jsonl" <"$tmp/tb.events" >"$tmp/tb.cmp" 2>&1
    check "every event matches metrics.jsonl ($(cat "$tmp/tb.cmp"))" \
        grep -q "^ok .*(1 session_log START) in 2 file(s)" "$tmp/tb.cmp"
else
    fail "needs protoc and python3-protobuf, python3-crcmod: run scripts/setup"
fi
summary
