#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ddpc ckpt ls|show|verify|export` on three checkpoints made by tests/ckpt_make: the listing,
# the latest's state, verify passing and then naming the torn file with exit 1, the fallback of
# show to the previous checkpoint, export loading back, and usage errors (exit 2).
# usage: cli_ckpt.sh DDPC_BIN SOURCE_DIR CKPT_MAKE_BIN
set -u
ddpc=$1
make=$3
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

dir=$tmp/run/checkpoints
"$make" "$dir" >"$tmp/make.out" 2>&1 || { fail "ckpt_make" "$tmp/make.out"; summary; exit 1; }

run() { # runs ddpc with the given arguments; sets rc
    "$ddpc" "$@" >"$tmp/out" 2>"$tmp/err"
    rc=$?
}
# expect NAME STATUS REGEX...: exit STATUS, every regex matches a line of stdout+stderr
expect() {
    local name=$1 want=$2 good=1
    shift 2
    [ "$rc" -eq "$want" ] || good=0
    for re in "$@"; do
        cat "$tmp/out" "$tmp/err" | grep -Eq -- "$re" || { echo "    missing: $re"; good=0; }
    done
    if [ $good -eq 1 ]; then ok "$name"; else fail "$name (exit $rc)" "$tmp/out" "$tmp/err"; fi
}

run ckpt ls "$dir"
expect "ls lists three, the last is latest" 0 '^checkpoint +step +epoch +world +size +status$' \
    '^step-00000010 +10 +0 +2 +[0-9.]+ KiB +ok$' '^step-00000020 +20 +1 +2 .* ok$' \
    '^step-00000030 +30 +2 +2 .* ok \(latest\)$'

run ckpt show "$dir"
expect "show of a run dir shows its latest" 0 "^checkpoint: +$dir/step-00000030$" '^step: +30$' \
    '^epoch: +2 \(0 steps into it\)$' '^samples seen: +240$' '^world: +2$' '^seed: +7$' \
    '^written by: +ddpc [0-9]' '^  model:$' '^    hidden: \[8\]$'
run ckpt show "$dir/step-00000010"
expect "show of a step dir" 0 '^step: +10$'

run ckpt verify "$dir"
expect "verify passes" 0 "^ok $dir/step-00000010$" "^ok $dir/step-00000030$"

run ckpt export "$dir" "$tmp/w.safetensors"
expect "export" 0 "^exported $dir/step-00000030 to "
if [ -s "$tmp/w.safetensors" ] && cmp -s "$tmp/w.safetensors" "$dir/step-00000030/model.safetensors"; then
    fail "export rewrites the file with its own metadata"
else
    ok "export wrote a file"
fi
if /usr/bin/python3 "$2/tests/safetensors_interop.py" ckpt "$dir/step-00000030" "$tmp/py.safetensors" \
    >"$tmp/py.out" 2>&1; then ok "python reads the checkpoint"; else fail "python reads the checkpoint" "$tmp/py.out"; fi

# Tear the latest: verify names the file and fails; show and export fall back to step 20.
printf 'x' | dd of="$dir/step-00000030/optimizer.safetensors" bs=1 seek=100 conv=notrunc 2>/dev/null
run ckpt verify "$dir/step-00000030"
expect "verify of a torn checkpoint fails naming the file" 1 \
    '^ddpc ckpt verify: .*step-00000030/optimizer.safetensors: CRC-32 .* \(corrupt checkpoint\)$'
[ "$(wc -l <"$tmp/err")" -eq 1 ] && ok "one error line" || fail "one error line" "$tmp/err"
run ckpt verify "$dir"
expect "verify of the run dir fails" 1 "^ok $dir/step-00000020$" 'optimizer.safetensors: CRC-32'
run ckpt ls "$dir"
expect "ls marks it corrupt" 0 '^step-00000030 .* corrupt \(latest\)$'
run ckpt show "$dir"
expect "show falls back to the newest good one" 0 '^step: +20$'

run ckpt show "$tmp/nothing"
expect "show of a directory without checkpoints" 1 'no complete checkpoint found'
run ckpt
expect "no arguments: usage" 2 '^usage: ddpc ckpt ls DIR'
run ckpt frobnicate "$dir"
expect "unknown subcommand: usage" 2 '^usage: ddpc ckpt'
run ckpt export "$dir"
expect "export without OUT: usage" 2 '^usage: ddpc ckpt'
run --help
expect "ddpc --help mentions ckpt" 0 '^  ckpt ls\|show\|verify DIR'

summary
