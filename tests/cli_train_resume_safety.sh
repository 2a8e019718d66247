#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Resume never silently starts over, and never on disagreeing ranks (issue 22), through
# `ddpc train` and `ddpc run`: checkpoints that exist but none verifies (torn, unreadable) are
# refused, naming each and why, and nothing is changed; falling back past a corrupt newest
# checkpoint says so in the log and in metrics.jsonl; ranks that loaded different checkpoints
# (node-local checkpoint directories, simulated with a mount namespace per rank) refuse, and a
# checkpoint.dir that not every rank sees fails the first save; a FIFO or a device in place of a
# checkpoint or weights file is refused at once instead of hanging; a torn last line of
# metrics.jsonl does not swallow the next record.
# usage: cli_train_resume_safety.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
common=(data.type=synthetic_images data.size=256 data.batch_size=16 epochs=4 log_every=2
        eval_every=0 num_threads=1 'model.hidden=[16]' checkpoint.every_steps=5
        checkpoint.keep=0)
# Every refused or hanging case runs under this bound: a regression fails instead of hanging.
bound=(timeout 60)
# valid_json FILE: every line of FILE parses as JSON.
valid_json() { python3 -c 'import json, sys; [json.loads(l) for l in open(sys.argv[1])]' "$1"; }
# snapshot DIR: the names, sizes and checksums of everything under DIR, for "nothing changed".
snapshot() { (cd "$1" && find . -print0 | sort -z | xargs -0 -r md5sum 2>/dev/null; find . | sort); }
# train NAME ARGS...: one rank into run_dir $tmp/NAME, appending to $tmp/NAME.log; returns its status.
train() {
    local name=$1
    shift
    "${bound[@]}" "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/$name" "$@" \
        >>"$tmp/$name.log" 2>&1
}

# A good run with checkpoints at steps 5 and 10, copied for each case below.
train good max_steps=10
check "the good run exits 0" test $? -eq 0
ck=checkpoints
check "it saved steps 5 and 10" test -d "$tmp/good/$ck/step-00000005" -a -d "$tmp/good/$ck/step-00000010"
# copy NAME: a copy of the good run as $tmp/NAME.
copy() { cp -a "$tmp/good" "$tmp/$1"; }

# 1. Every checkpoint torn: refused, each named with its reason, nothing changed.
copy torn
for d in "$tmp/torn/$ck"/step-*; do truncate -s 100 "$d/model.safetensors"; done
before=$(snapshot "$tmp/torn")
train torn max_steps=20
st=$?
check "torn: resume auto refuses (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "torn: one line names both checkpoints and why" test "$(grep -c \
    "none of the 2 checkpoints in '$tmp/torn/$ck' can be resumed from (step-00000010: .*model.safetensors: .*corrupt checkpoint.*; step-00000005: .*corrupt checkpoint" "$tmp/torn.log")" -eq 1
check "torn: it says how to start over deliberately" grep -q "resume=never and a new checkpoint.dir" "$tmp/torn.log"
check "torn: nothing changed in the run directory" test "$(snapshot "$tmp/torn")" = "$before"
check "torn: no step was trained" test "$(grep -c '^step ' "$tmp/torn.log")" -eq 0
# The deliberate way to start over works.
train torn max_steps=5 resume=never checkpoint.dir="$tmp/torn/fresh"
check "torn: resume=never with a new checkpoint.dir starts over" test $? -eq 0

# 1. Unreadable checkpoints: permission denied (really: as an unprivileged user when run as
# root, who reads everything) and a directory in place of a file.
copy denied
chmod 000 "$tmp/denied/$ck"/step-*/model.safetensors
as=()
denied_ddpc=$ddpc denied_cfg=$cfg
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null && id nobody >/dev/null 2>&1; then
    chmod o+x "$tmp"
    chown -R nobody "$tmp/denied"
    as=(setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups --)
    # The build may sit in a folder only root enters (a clone under mktemp -d): nobody runs copies.
    cp "$ddpc" "$tmp/ddpc" && cp "$cfg" "$tmp/cfg.yaml" && chmod o+rx "$tmp/ddpc" "$tmp/cfg.yaml"
    denied_ddpc=$tmp/ddpc denied_cfg=$tmp/cfg.yaml
fi
if [ "$(id -u)" = 0 ] && [ ${#as[@]} = 0 ]; then
    echo "note: root without setpriv or user nobody: the permission-denied checks are left out"
else
    before=$(snapshot "$tmp/denied")
    "${bound[@]}" "${as[@]}" "$denied_ddpc" train "$denied_cfg" "${common[@]}" \
        run_dir="$tmp/denied" max_steps=20 >"$tmp/denied.log" 2>&1
    st=$?
    check "denied: resume auto refuses (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
    check "denied: the message says Permission denied for each" test \
        "$(grep -o 'step-000000[01][05]: cannot open [^;]*Permission denied' "$tmp/denied.log" | wc -l)" -eq 2
    check "denied: nothing changed" test "$(snapshot "$tmp/denied")" = "$before"
fi
copy isdir
for d in "$tmp/isdir/$ck"/step-*; do rm "$d/optimizer.safetensors" && mkdir "$d/optimizer.safetensors"; done
train isdir max_steps=20
st=$?
check "a directory in place of a file: refused (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... saying it is a directory" grep -q "optimizer.safetensors': it is a directory, not a regular file" "$tmp/isdir.log"

# 2. A corrupt newest checkpoint: resume falls back to the older one and says so.
copy fallback
printf 'X' | dd of="$tmp/fallback/$ck/step-00000010/model.safetensors" bs=1 seek=200 conv=notrunc 2>/dev/null
train fallback max_steps=15
check "fallback: resumes and exits 0" test $? -eq 0
check "fallback: the log names the skipped checkpoint and why" grep -q \
    "^skipped checkpoint $tmp/fallback/$ck/step-00000010: .*model.safetensors: CRC-32 .* (corrupt checkpoint)" "$tmp/fallback.log"
check "fallback: it resumes from step 5" grep -q "resuming from $tmp/fallback/$ck/step-00000005: step 5" "$tmp/fallback.log"
check "fallback: metrics.jsonl stays valid JSON" valid_json "$tmp/fallback/metrics.jsonl"
check "fallback: the resume record lists the skipped checkpoint" python3 - "$tmp/fallback/metrics.jsonl" "$tmp/fallback/$ck" <<'EOF'
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
res = [r for r in recs if r.get("event") == "resume"]
assert len(res) == 1, res
r = res[0]
assert r["step"] == 5 and r["checkpoint"] == sys.argv[2] + "/step-00000005", r
assert r["skipped"] == 1, r
sk = [r for r in recs if r.get("event") == "skipped_checkpoint"]
assert len(sk) == 1 and sk[0]["step"] == 5, sk
assert sk[0]["checkpoint"] == sys.argv[2] + "/step-00000010", sk
assert "corrupt checkpoint" in sk[0]["reason"], sk
EOF

# 5. FIFOs and devices in place of checkpoint and weights files: refused promptly, named.
copy fifo
rm "$tmp/fifo/$ck/step-00000010/model.safetensors"
mkfifo "$tmp/fifo/$ck/step-00000010/model.safetensors"
train fifo max_steps=15 resume="$tmp/fifo/$ck/step-00000010"
st=$?
check "a FIFO model.safetensors: refused, not hung (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming it" grep -q "cannot read '$tmp/fifo/$ck/step-00000010/model.safetensors': it is a FIFO, not a regular file" "$tmp/fifo.log"
copy zero
ln -sf /dev/zero "$tmp/zero/$ck/step-00000010/model.safetensors"
train zero max_steps=15 resume="$tmp/zero/$ck/step-00000010"
st=$?
check "/dev/zero as model.safetensors: refused, not hung (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming it" grep -q "model.safetensors': it is a character device, not a regular file" "$tmp/zero.log"
copy sfifo
for d in "$tmp/sfifo/$ck"/step-*; do rm "$d/state.json" && mkfifo "$d/state.json"; done
train sfifo max_steps=15
st=$?
check "FIFO state.json files: resume auto refuses, not hung (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming them" test "$(grep -o "state.json': it is a FIFO" "$tmp/sfifo.log" | wc -l)" -eq 2
copy lfifo
rm "$tmp/lfifo/$ck/latest" && mkfifo "$tmp/lfifo/$ck/latest"
train lfifo max_steps=15
check "a FIFO latest pointer: the newest checkpoint decides (exit 0)" test $? -eq 0
check "... step 10" grep -q "resuming from $tmp/lfifo/$ck/step-00000010: step 10" "$tmp/lfifo.log"
mkfifo "$tmp/weights.fifo"
train init max_steps=2 init_from="$tmp/weights.fifo"
st=$?
check "init_from a FIFO: refused, not hung (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming it" grep -q "cannot read '$tmp/weights.fifo': it is a FIFO, not a regular file" "$tmp/init.log"

# 6. A torn last line of metrics.jsonl: the resumed run's records start on lines of their own.
copy torn_metrics
m=$tmp/torn_metrics/metrics.jsonl
truncate -s $(($(stat -c %s "$m") - 9)) "$m"
tail -c 200 "$m" | tail -n 1 >"$tmp/torn_line"
train torn_metrics max_steps=15
check "torn metrics: the resumed run exits 0" test $? -eq 0
check "torn metrics: every line but the torn one parses, the resume record included" \
    python3 - "$m" "$tmp/torn_line" <<'EOF'
import json, sys
torn = open(sys.argv[2]).read().rstrip("\n")
bad, events = [], []
for line in open(sys.argv[1]).read().split("\n")[:-1]:
    try:
        events.append(json.loads(line).get("event"))
    except ValueError:
        bad.append(line)
assert bad == [torn], bad
assert "resume" in events, events
EOF

# 3. Ranks that do not see the same checkpoints. Rank 1 runs in its own mount namespace where
# another directory is bind-mounted over the checkpoint directory: node-local storage.
if ! unshare -m --propagation private true 2>/dev/null; then
    echo "note: no mount namespaces here (unshare -m failed): the node-local checks are left out"
    summary
    exit
fi
cat >"$tmp/local.sh" <<'EOF'
#!/bin/sh
# local.sh CKDIR OTHER CMD...: runs CMD, on rank 1 with OTHER mounted over CKDIR.
d=$1 o=$2
shift 2
[ "$RANK" = 1 ] || exec "$@"
exec unshare -m --propagation private sh -c 'mount --bind "$0" "$1" && shift && exec "$@"' "$o" "$d" "$@"
EOF
chmod +x "$tmp/local.sh"
# job NAME OTHER ARGS...: 2 ranks on run_dir $tmp/NAME, rank 1 seeing OTHER as its checkpoints.
job() {
    local name=$1 other=$2
    shift 2
    mkdir -p "$tmp/$name/$ck" "$other"
    "${bound[@]}" "$ddpc" run --nproc-per-node 2 -- "$tmp/local.sh" "$tmp/$name/$ck" "$other" \
        "$ddpc" train "$cfg" "${common[@]}" run_dir="$tmp/$name" "$@" >>"$tmp/$name.log" 2>&1
}
# A job with shared checkpoints to step 10, then restarted with rank 1 seeing none.
"${bound[@]}" "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" \
    run_dir="$tmp/two" max_steps=10 >"$tmp/two.log" 2>&1
check "2 ranks, shared checkpoints: exits 0" test $? -eq 0
cp -a "$tmp/two" "$tmp/nolocal"
before=$(snapshot "$tmp/nolocal/$ck")
job nolocal "$tmp/empty1" max_steps=20
st=$?
check "rank 1 sees no checkpoint: the job refuses (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming both ranks and steps" grep -q \
    "the ranks did not load the same state: rank 0 resumed step-00000010 at step 10 (digest [0-9a-f]*); rank 1 found no checkpoint (step 0); checkpoint.dir '$tmp/nolocal/$ck' must be on a file system every rank sees" "$tmp/nolocal.log"
check "... before training a step" test "$(grep -c '^step ' "$tmp/nolocal.log")" -eq 0
check "... changing nothing" test "$(snapshot "$tmp/nolocal/$ck")" = "$before" -a -z "$(ls -A "$tmp/empty1")"
# Under ZeRO, each rank loads its own shard: rank 1 sees an older copy, step 5 only.
"${bound[@]}" "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" zero.stage=1 \
    run_dir="$tmp/zero2" max_steps=10 >"$tmp/zero2.log" 2>&1
check "2 ranks, ZeRO-1: exits 0" test $? -eq 0
cp -a "$tmp/zero2/$ck" "$tmp/older"
rm -r "$tmp/older/step-00000010" && echo step-00000005 >"$tmp/older/latest"
job zero2 "$tmp/older" zero.stage=1 max_steps=20
st=$?
check "ZeRO-1, rank 1 sees step 5 and rank 0 step 10: the job refuses (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... naming both" grep -q \
    "rank 0 resumed step-00000010 at step 10 (digest [0-9a-f]*); rank 1 resumed step-00000005 at step 5" "$tmp/zero2.log"
# Node-local from the start: the first save fails, naming the rank that cannot see it.
job blind "$tmp/empty2" max_steps=20
st=$?
check "node-local checkpoint.dir: the first save fails the job (exit $st)" test "$st" -ne 0 -a "$st" -ne 124
check "... saying checkpoint.dir must be on a file system every rank sees" grep -q \
    "checkpoint.dir '$tmp/blind/$ck' must be on a file system every rank sees: rank 1 cannot see the checkpoint $tmp/blind/$ck/step-00000005 that rank 0 committed" "$tmp/blind.log"
check "... at the first save" test ! -e "$tmp/blind/$ck/step-00000010"
summary
