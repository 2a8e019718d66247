#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The model and dataset seams as a user outside the tree meets them (issue 21's acceptance):
# examples/resmlp, built against the installed library through pkg-config and find_package,
# registers its own residual MLP (its own forward and backward over the public kernel table) and
# its own dataset from arrays, then trains through ddpc's trainer on 2 ranks under `ddpc run`: with
# DDP and with ZeRO stage 2, checkpoints every 5 steps, a rank SIGKILLed at step 12 and the same
# command again ending byte-identical to the uninterrupted run; 2 ranks x 8 equal 1 rank x 16;
# `ddpc ckpt export` of its checkpoint loads into the same architecture written as a torch
# nn.Module (strict) whose outputs match the C model's within 1e-5; its backward matches finite
# differences; its memory plan counts its parameters and arena; bad config keys of the user's
# types get one line naming the key.
# usage: cli_example_resmlp.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
build=$(cd "$(dirname "$ddpc")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
. "$(dirname "${BASH_SOURCE[0]}")/lib/resmlp.sh"
resmlp_install "$build"
export PKG_CONFIG_PATH=$libdir/pkgconfig LD_LIBRARY_PATH=$libdir
iddpc=$prefix/bin/ddpc

cp -r "$src/examples/resmlp" "$tmp/ex"
make -C "$tmp/ex" CFLAGS="-O2 -Wall -Wextra -Werror" >"$tmp/make.log" 2>&1
check_status "make (pkg-config ddpc) builds the example" $? "$tmp/make.log"
resmlp_cmake "$src" "the example"
bin=$tmp/ex/resmlp_train

"$bin" --gradcheck >"$tmp/gradcheck.log" 2>&1
check_status "the example's backward matches finite differences" $? "$tmp/gradcheck.log"
grep -q "^gradcheck: 0 of [1-9][0-9]* entries off" "$tmp/gradcheck.log" ||
    fail "gradcheck checked every entry" "$tmp/gradcheck.log"

cfg=$tmp/ex/resmlp.yaml
common=("${resmlp_common[@]}")

# job NAME WANT NPROC ARGS...: the example on NPROC ranks under the installed `ddpc run`, into
# $tmp/NAME (+ .st, .log, appended); WANT 0: must exit 0, else must fail.
job() {
    local name=$1 want=$2 n=$3
    shift 3
    "$iddpc" run --nproc-per-node "$n" -- "$bin" "$cfg" "${common[@]}" "$@" \
        run_dir="$tmp/$name" weights_out="$tmp/$name.st" >>"$tmp/$name.log" 2>&1
    local got=$?
    if [ "$want" = 0 ]; then
        check_status "$name exits 0" "$got" "$tmp/$name.log"
    else
        check "$name is killed (status $got)" test "$got" -ne 0
    fi
}

for stage in 0 2; do
    job ref$stage 0 2 zero.stage=$stage data.batch_size=8
    job kill$stage 137 2 zero.stage=$stage data.batch_size=8 fault.kill_at_step=12 fault.kill_rank=1
    job kill$stage 0 2 zero.stage=$stage data.batch_size=8 fault.kill_at_step=12 fault.kill_rank=1
    check "stage $stage: the rerun resumes from step 10" \
        grep -q "resuming from .*step-00000010: step 10" "$tmp/kill$stage.log"
    check "stage $stage: killed and resumed equals the uninterrupted run, bitwise" \
        cmp "$tmp/kill$stage.st" "$tmp/ref$stage.st"
done
check "the DDP run learns the rule (test accuracy > 0.6, chance 0.25)" /usr/bin/python3 -c "
import json, sys
acc = [json.loads(l)['eval_accuracy'] for l in open('$tmp/ref0/metrics.jsonl')
       if '\"split\": \"test\"' in l]
print('test accuracy', acc[-1]); sys.exit(0 if acc[-1] > 0.6 else 1)"
check "ZeRO stage 2 ends at DDP's weights (1e-6)" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/ref2.st" "$tmp/ref0.st" 1e-6
job one 0 1 data.batch_size=16
check "1 rank x 16 ends at 2 ranks x 8's weights (1e-6)" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/one.st" "$tmp/ref0.st" 1e-6

"$iddpc" ckpt export "$tmp/ref2/checkpoints/step-00000030" "$tmp/export.st" >"$tmp/export.log" 2>&1
check_status "ddpc ckpt export consolidates the ZeRO-2 checkpoint" $? "$tmp/export.log"
check "the export holds the run's final weights, exactly" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/export.st" "$tmp/ref2.st" 0
"$bin" --outputs "$tmp/export.st" "$tmp/out" "$cfg" "${common[@]}" >"$tmp/outputs.log" 2>&1
check_status "the example runs the exported weights" $? "$tmp/outputs.log"
/usr/bin/python3 "$tmp/ex/resmlp_torch.py" "$tmp/export.st" "$tmp/out" >"$tmp/torch.log" 2>&1
check_status "PyTorch loads the export strictly and its outputs match (1e-5)" $? "$tmp/torch.log"
cat "$tmp/torch.log"

# The memory plan (ddpc_trainer_create_plan, as `ddpc plan`) counts the type's registered
# parameters, each view padded to 16 floats: 4096x1024 + 4096 + 1024x4096 + 1024 + 4x1024 + 16,
# and its arena_floats at batch 32: 2 (32x4096) + 2 (32x1024) + 2x(32x4 padded) + 32 floats.
"$bin" --plan 2 "$cfg" model.hidden=4096 data.features=1024 >"$tmp/plan.log" 2>&1
check_status "the example prints its memory plan" $? "$tmp/plan.log"
check "the plan counts the type's 8397840 parameters" \
    grep -q "^memory plan per rank at 2 ranks (8397840 parameters" "$tmp/plan.log"
check "and its activation arena (327968 floats, 1.25 MiB)" \
    grep -Eq '^\* +0 +- +32.0 MiB +32.0 MiB +32.0 MiB +1.25 MiB' "$tmp/plan.log"

# bad NAME PATTERN ARGS...: the example refuses ARGS with one line matching PATTERN, exit != 0.
bad() {
    local name=$1 pattern=$2
    shift 2
    "$bin" "$cfg" "${common[@]}" run_dir="$tmp/bad" "$@" >"$tmp/bad.log" 2>&1
    local got=$?
    if [ $got -ne 0 ] && [ "$(wc -l <"$tmp/bad.log")" -eq 1 ] && grep -q "$pattern" "$tmp/bad.log"
    then ok "$name"; else fail "$name (exit $got)" "$tmp/bad.log"; fi
}
bad "a misspelt user model type gets a suggestion" "model.type.*did you mean 'resmlp'" \
    model.type=resmpl
bad "the user model's own key is range-checked by its reader" "key 'model.hidden'" model.hidden=0
bad "a key nobody reads is refused" "unknown key 'model.hiden'" model.hiden=3
bad "the user data type's key is range-checked by its factory" "key 'data.classes'" \
    data.classes=1
bad "the user's model refuses what it lacks" "resmlp has no dropout" model.dropout=0.1
check "no run directory was left by the refusals" test ! -e "$tmp/bad/checkpoints"
summary
