#!/usr/bin/env bash
# Bad input through the command line: each case must print exactly one error line on stderr,
# exit non-zero (not by a signal), and leave no crash behind.
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

summary
