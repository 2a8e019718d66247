#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Bad input through the command line: each case must print exactly one error line on stderr,
# exit non-zero (not by a signal), and leave no crash behind. And --help / -h of every command is
# its usage on stdout with exit 0, never a path.
# usage: cli_errors.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

expect_error() { # name, expected substring, command...
    local name=$1 want=$2
    shift 2
    "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    local lines
    lines=$(wc -l <"$tmp/err")
    if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ "$lines" -eq 1 ] && grep -qF -- "$want" "$tmp/err"; then
        ok "$name: $(cat "$tmp/err")"
    else
        fail "$name (exit $rc, $lines stderr lines, wanted '$want'):" "$tmp/err"
    fi
}

cat >"$tmp/typo.yaml" <<'YAML'
model:
  type: mlp
optim:
  learning_rate: 0.1
YAML
expect_error "unknown key names file, line and key" "typo.yaml:4" \
    "$ddpc" train "$tmp/typo.yaml" data.type=synthetic_images
expect_error "unknown key suggests the closest" "did you mean 'optim.lr'" \
    "$ddpc" train "$tmp/typo.yaml" data.type=synthetic_images
printf 'epochs: two\n' >"$tmp/type.yaml"
expect_error "wrong type names key" "epochs" "$ddpc" train "$tmp/type.yaml"
printf 'data:\n  batch_size: 0\n' >"$tmp/range.yaml"
expect_error "out of range names key" "data.batch_size" "$ddpc" train "$tmp/range.yaml"
printf 'model: [unclosed\n' >"$tmp/syntax.yaml"
expect_error "YAML syntax error names the file" "syntax.yaml" "$ddpc" train "$tmp/syntax.yaml"
expect_error "a mistyped command suggests the command" "unknown command 'trian' (did you mean 'train'?" \
    "$ddpc" trian "$src/configs/fmnist_mlp.yaml"
expect_error "a far-off command suggests nothing" "unknown command 'frobnicate' (try 'ddpc --help')" \
    "$ddpc" frobnicate
expect_error "missing config names the path" "$tmp/nope.yaml" "$ddpc" train "$tmp/nope.yaml"
expect_error "bad override" "optim.lr" "$ddpc" train "$src/configs/fmnist_mlp.yaml" optim.lr=abc
expect_error "missing dataset directory names the path" "$tmp/no-such-dir" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" data.path="$tmp/no-such-dir"

mkdir -p "$tmp/fm"
for f in /usr/share/datasets/fashion-mnist/*.gz; do cp "$f" "$tmp/fm/"; done
head -c 100000 /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz >"$tmp/fm/train-images-idx3-ubyte.gz"
expect_error "truncated .gz names the file" "train-images-idx3-ubyte.gz" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" data.path="$tmp/fm"
rm "$tmp/fm/train-labels-idx1-ubyte.gz"
cp /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz "$tmp/fm/"
expect_error "missing dataset file names the path" "$tmp/fm/train-labels-idx1-ubyte.gz" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" data.path="$tmp/fm"
expect_error "gpt on images is refused" "needs a token dataset" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" model.type=gpt data.type=synthetic_images
expect_error "activation checkpointing on an mlp names the key" \
    "model.activation_checkpointing: model.type 'mlp' has no blocks to recompute" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" model.activation_checkpointing=true \
    data.type=synthetic_images
expect_error "init_from a missing file names it" "$tmp/none.safetensors" \
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images init_from="$tmp/none.safetensors"

# --help and -h of every command: its usage on stdout, nothing on stderr, exit 0 — never taken for
# a config, a directory or a run directory, wherever a path would stand.
cd "$tmp" || exit 1
help_case() { # NAME USAGE_PREFIX ARGS...
    local name=$1 want=$2
    shift 2
    "$ddpc" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -eq 0 ] && [ ! -s "$tmp/err" ] && head -1 "$tmp/out" | grep -qF -- "$want"; then
        ok "ddpc $name: usage on stdout, exit 0"
    else
        fail "ddpc $name (exit $rc, wanted '$want' on stdout)" "$tmp/out" "$tmp/err"
    fi
}
for h in --help -h; do
    help_case "$h" "usage: ddpc <command>" "$h"
    help_case "train $h" "usage: ddpc train CONFIG" train "$h"
    help_case "train CONFIG $h" "usage: ddpc train CONFIG" train "$src/configs/fmnist_mlp.yaml" epochs=1 "$h"
    help_case "plan $h" "usage: ddpc plan CONFIG" plan "$h"
    help_case "plan CONFIG $h" "usage: ddpc plan CONFIG" plan "$src/configs/fmnist_mlp.yaml" "$h"
    help_case "run $h" "usage: ddpc run [options]" run "$h"
    help_case "env $h" "usage: ddpc env" env "$h"
    help_case "report $h" "usage: ddpc report RUN_DIR" report "$h"
    help_case "report RUN_DIR $h" "usage: ddpc report RUN_DIR" report "$tmp" "$h"
    help_case "bench $h" "usage: ddpc bench step CONFIG" bench "$h"
    help_case "bench step $h" "usage: ddpc bench step CONFIG" bench step "$h"
    help_case "bench step CONFIG $h" "usage: ddpc bench step CONFIG" bench step "$src/configs/fmnist_mlp.yaml" "$h"
    for c in allreduce broadcast all_gather reduce_scatter; do
        help_case "bench $c $h" "usage: ddpc bench allreduce|broadcast" bench "$c" "$h"
    done
    help_case "ckpt $h" "usage: ddpc ckpt ls DIR" ckpt "$h"
    for c in ls show verify export; do
        help_case "ckpt $c $h" "usage: ddpc ckpt ls DIR" ckpt "$c" "$h"
    done
    help_case "ckpt export DIR $h" "usage: ddpc ckpt ls DIR" ckpt export "$tmp" "$h"
done
check "no help flag was taken for a path (nothing written)" test ! -e "$tmp/runs" -a ! -e "$tmp/-h" -a ! -e "$tmp/--help" -a ! -e "$tmp/report.html"
# A flag's value is not a help flag: `--run_dir -h` names a directory (here the config is missing).
expect_error "a flag's value '-h' is a value" "cannot open config" "$ddpc" train "$tmp/nope.yaml" --run_dir -h

summary
