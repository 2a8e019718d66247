#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A user's model and data types reached from the ddpc program through a plugin (issue 21's
# follow-up): examples/resmlp's types built as resmlp_plugin.so against the installed headers
# (find_package), named by a config's `plugins:` list relative to the config's directory. Under
# `ddpc run --nproc-per-node 2 ddpc train` they train to the example program's own weights,
# exactly, and 2 ranks x 8 equal 1 rank x 16; `ddpc plan` prints the type's plan; `ddpc bench
# step` runs it; a rank killed at step 12 and the job again, with the plugin now named by
# DDPC_PLUGINS from another directory, ends byte-identical to the uninterrupted run (the changed
# `plugins` is accepted as cosmetic); config.yaml records the absolute path and runs from another
# directory; one file named three ways is loaded once; each broken plugin (not found, not a
# library, no init, another ABI, a failing init, a type name taken by another plugin or a
# built-in) is one line naming the file, exit 1, nothing written.
# usage: cli_train_plugin.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
build=$(cd "$(dirname "$ddpc")" && pwd)
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset DDPC_PLUGINS
. "$(dirname "${BASH_SOURCE[0]}")/lib/resmlp.sh"
resmlp_install "$build"
resmlp_cmake "$src" "the example and its plugin" -DCMAKE_C_FLAGS="-Wall -Wextra -Werror"
plugin=$tmp/cm/resmlp_plugin.so
check "the plugin does not link libddpc (it calls the loading program's)" \
    bash -c "! readelf -d '$plugin' | grep -q 'NEEDED.*libddpc'"

# The config: the example's, with its plugin named relative to the config's directory.
mkdir -p "$tmp/cfg"
cp "$src/examples/resmlp/resmlp.yaml" "$tmp/cfg/plain.yaml"
{ cat "$tmp/cfg/plain.yaml"; echo "plugins: [../cm/resmlp_plugin.so]"; } >"$tmp/cfg/plug.yaml"
cfg=$tmp/cfg/plug.yaml
common=("${resmlp_common[@]}")

# job NAME WANT NPROC PROGRAM... -- ARGS...: PROGRAM (the example, or ddpc train) on NPROC ranks
# under `ddpc run`, into $tmp/NAME (+ .st, .log, appended); WANT 0: must exit 0, else must fail.
job() {
    local name=$1 want=$2 n=$3
    shift 3
    "$ddpc" run --nproc-per-node "$n" -- "$@" "${common[@]}" run_dir="$tmp/$name" \
        weights_out="$tmp/$name.st" >>"$tmp/$name.log" 2>&1
    local got=$?
    if [ "$want" = 0 ]; then
        check_status "$name exits 0" "$got" "$tmp/$name.log"
    else
        check "$name is killed (status $got)" test "$got" -ne 0
    fi
}

LD_LIBRARY_PATH=$libdir job example 0 2 "$tmp/cm/resmlp_train" "$tmp/cfg/plain.yaml" \
    data.batch_size=8
job plug 0 2 "$ddpc" train "$cfg" data.batch_size=8
check "ddpc train with the plugin ends at the example program's weights, exactly" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/plug.st" "$tmp/example.st" 0
check "the run learns the rule (test accuracy > 0.6, chance 0.25)" /usr/bin/python3 -c "
import json, sys
acc = [json.loads(l)['eval_accuracy'] for l in open('$tmp/plug/metrics.jsonl')
       if '\"split\": \"test\"' in l]
print('test accuracy', acc[-1]); sys.exit(0 if acc[-1] > 0.6 else 1)"
# README's spelling: --plugin, relative to the working directory.
cd "$tmp/cm" || exit 1
job one 0 1 "$ddpc" train "$tmp/cfg/plain.yaml" --plugin ./resmlp_plugin.so data.batch_size=16
cd - >/dev/null || exit 1
check "1 rank x 16 ends at 2 ranks x 8's weights (1e-6)" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/one.st" "$tmp/plug.st" 1e-6
check "config.yaml records the plugin's absolute path" \
    grep -qx "plugins: \[$plugin\]" "$tmp/plug/config.yaml"

# Resume: killed at step 12 (checkpoint at 10), then the same job with the plugin named by
# DDPC_PLUGINS from another directory and the config without `plugins`.
mkdir -p "$tmp/elsewhere"
cp "$plugin" "$tmp/elsewhere/"
job kill 137 2 "$ddpc" train "$cfg" data.batch_size=8 zero.stage=2 fault.kill_at_step=12 \
    fault.kill_rank=1
DDPC_PLUGINS=$tmp/elsewhere/resmlp_plugin.so job kill 0 2 "$ddpc" train "$tmp/cfg/plain.yaml" \
    data.batch_size=8 zero.stage=2 fault.kill_at_step=12 fault.kill_rank=1
check "the rerun resumes from step 10" \
    grep -q "resuming from .*step-00000010: step 10" "$tmp/kill.log"
check "the plugin's new path is accepted as a change that does not affect training" \
    grep -q "accepted changes that do not affect training: plugins .*elsewhere" "$tmp/kill.log"
job ref2 0 2 "$ddpc" train "$cfg" data.batch_size=8 zero.stage=2
check "killed and resumed (ZeRO-2) equals the uninterrupted run, bitwise" \
    cmp "$tmp/kill.st" "$tmp/ref2.st"

"$ddpc" ckpt export "$tmp/ref2/checkpoints/step-00000030" "$tmp/export.st" >"$tmp/export.log" 2>&1
check_status "ddpc ckpt export needs no plugin" $? "$tmp/export.log"
check "the export holds the run's final weights, exactly" \
    /usr/bin/python3 "$src/tests/weights_close.py" "$tmp/export.st" "$tmp/ref2.st" 0

# ddpc plan: the type's parameters and arena, as the example's own --plan prints them
# (tests/cli_example_resmlp.sh derives both numbers).
"$ddpc" plan "$cfg" --nproc 2 model.hidden=4096 data.features=1024 >"$tmp/plan.log" 2>&1
check_status "ddpc plan loads the plugin" $? "$tmp/plan.log"
check "the plan counts the type's 8397840 parameters" \
    grep -q "^memory plan per rank at 2 ranks (8397840 parameters" "$tmp/plan.log"
check "and its activation arena (1.25 MiB)" \
    grep -Eq '^\* +0 +- +32.0 MiB +32.0 MiB +32.0 MiB +1.25 MiB' "$tmp/plan.log"
# config.yaml runs again from another directory: its absolute path finds the plugin.
(cd / && "$ddpc" plan "$tmp/plug/config.yaml" --nproc 2) >"$tmp/plan2.log" 2>&1
check_status "ddpc plan of the run's config.yaml, from /, finds the plugin" $? "$tmp/plan2.log"
# One file named by the config, a --plugin through a symlink and DDPC_PLUGINS (an empty entry
# skipped), the last two relative to the working directory: loaded once (a second init would
# register resmlp again, which is refused).
ln -s "$tmp/cm" "$tmp/link"
(cd "$tmp/cm" && DDPC_PLUGINS=resmlp_plugin.so::$tmp/cm/./resmlp_plugin.so "$ddpc" plan "$cfg" \
    --plugin ../link/resmlp_plugin.so) >"$tmp/once.log" 2>&1
check_status "one plugin named three ways is loaded once" $? "$tmp/once.log"

DDPC_PLUGINS=$plugin "$ddpc" bench step "$tmp/cfg/plain.yaml" bench.warmup=2 bench.steps=3 \
    >"$tmp/bench.log" 2>"$tmp/bench.err"
check_status "ddpc bench step runs the plugin's types" $? "$tmp/bench.err"
check "and prints its JSON line" /usr/bin/python3 -c "
import json, sys
r = json.loads(open('$tmp/bench.log').read().strip().splitlines()[-1])
print(r['steps'], 'steps', r['params'], 'parameters'); sys.exit(0 if r['steps'] == 3 else 1)"

# Broken plugins, each built or written here.
inc=$prefix/include
head -c 4096 /dev/zero | tr '\0' 'x' >"$tmp/text.so" # no ELF header
printf 'int ddpc_plugin_other(void);\nint ddpc_plugin_other(void) { return 0; }\n' >"$tmp/noinit.c"
cat >"$tmp/abi.c" <<'EOF'
#include <ddpc/plugin.h>
DDPC_PLUGIN_EXPORT const uint32_t ddpc_plugin_abi = DDPC_PLUGIN_ABI + 7;
DDPC_PLUGIN_EXPORT ddpc_status ddpc_plugin_init(void) { return DDPC_OK; }
EOF
cat >"$tmp/fails.c" <<'EOF'
#include <ddpc/plugin.h>
DDPC_PLUGIN_DECLARE_ABI;
DDPC_PLUGIN_EXPORT ddpc_status ddpc_plugin_init(void)
{
    return ddpc_errorf(DDPC_EIO, "cannot open its weights table 'table.bin'");
}
EOF
cat >"$tmp/builtin.c" <<'EOF'
#include <ddpc/model_ops.h>
#include <ddpc/plugin.h>
static ddpc_status build(ddpc_model *m) { (void)m; return DDPC_OK; }
static void init(ddpc_model *m) { (void)m; }
static ddpc_status forward(ddpc_model *m, const ddpc_model_input *in, bool training,
                           ddpc_model_output *out)
{
    (void)m, (void)in, (void)training, (void)out;
    return DDPC_OK;
}
static void backward(ddpc_model *m, float dloss) { (void)m, (void)dloss; }
static const ddpc_model_ops mlp = {
    .name = "mlp", .build = build, .init = init, .forward = forward, .backward = backward};
DDPC_PLUGIN_DECLARE_ABI;
DDPC_PLUGIN_EXPORT ddpc_status ddpc_plugin_init(void) { return ddpc_model_register(&mlp); }
EOF
for p in noinit abi fails builtin; do
    cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$inc" -o "$tmp/$p.so" "$tmp/$p.c" \
        >"$tmp/cc.log" 2>&1
    check_status "the broken plugin $p.so builds" $? "$tmp/cc.log"
done

# bad NAME PATTERN ARGS...: `ddpc train CONFIG ARGS` refuses with one line matching PATTERN,
# exit 1, and writes no run directory.
bad() {
    local name=$1 pattern=$2
    shift 2
    "$ddpc" train "$@" "${common[@]}" run_dir="$tmp/bad" >"$tmp/bad.log" 2>&1
    local got=$?
    if [ $got -eq 1 ] && [ "$(wc -l <"$tmp/bad.log")" -eq 1 ] &&
        grep -q "$pattern" "$tmp/bad.log" && [ ! -e "$tmp/bad" ]
    then ok "$name"; else fail "$name (exit $got)" "$tmp/bad.log"; fi
}
bad "a missing plugin is named, with where it was named" \
    "plugin '$tmp/nope.so': No such file or directory (from --plugin)" \
    "$tmp/cfg/plain.yaml" --plugin "$tmp/nope.so"
bad "a config's missing plugin is named against the config's directory" \
    "plugin '$tmp/cfg/gone.so': No such file or directory (from 'plugins' in $tmp/cfg/plain.yaml)" \
    "$tmp/cfg/plain.yaml" "plugins=[gone.so]"
bad "a file that is not a shared library gets dlerror's reason" \
    "plugin '$tmp/text.so' cannot be loaded: invalid ELF header" \
    "$tmp/cfg/plain.yaml" --plugin "$tmp/text.so"
bad "a library without ddpc_plugin_init is refused" \
    "plugin '$tmp/noinit.so' is not a ddpc plugin: it exports no ddpc_plugin_init" \
    "$tmp/cfg/plain.yaml" --plugin="$tmp/noinit.so"
bad "a plugin built for another ABI is refused before it runs" \
    "plugin '$tmp/abi.so' was built for plugin ABI 8, this ddpc has ABI 1" \
    "$tmp/cfg/plain.yaml" --plugin "$tmp/abi.so"
DDPC_PLUGINS=$tmp/fails.so bad "a failing init gives its own message" \
    "plugin '$tmp/fails.so': ddpc_plugin_init failed (DDPC_EIO): cannot open its weights table" \
    "$tmp/cfg/plain.yaml"
bad "a second plugin registering a taken type name is refused" \
    "plugin '$tmp/elsewhere/resmlp_plugin.so': ddpc_plugin_init failed.*resmlp.* (from --plugin)" \
    "$cfg" --plugin "$tmp/elsewhere/resmlp_plugin.so"
bad "a plugin registering a built-in's name is refused" \
    "plugin '$tmp/builtin.so': ddpc_plugin_init failed .*model type 'mlp' is already registered" \
    "$tmp/cfg/plain.yaml" --plugin "$tmp/builtin.so"
bad "without the plugin, its type is unknown" "key 'data.type' must be one of .*got 'arrays'" \
    "$tmp/cfg/plain.yaml"
"$ddpc" train "$tmp/cfg/plain.yaml" --plugin >"$tmp/bad.log" 2>&1
got=$?
check "--plugin without a PATH is a usage error (exit 2)" test $got -eq 2
check "... saying so in one line" grep -qx "ddpc: flag '--plugin' needs a PATH.*" "$tmp/bad.log"
summary
