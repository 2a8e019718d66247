#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# data.type npy through `ddpc train`: NumPy arrays saved with numpy.save (Debian's python3-numpy)
# train the MLP and the CNN; float32, float64 and uint8 samples (uint8 scaled to [0, 1] as
# torchvision's ToTensor) and uint8, int32 and int64 labels train the same weights bit for bit;
# validation and test splits are picked as docs/config.md says; bad files each give one line
# naming the file and change nothing.
# usage: cli_train_npy.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
py=/usr/bin/python3
if ! "$py" -c 'import numpy' 2>/dev/null; then
    echo "SKIP: Debian's python3-numpy is not installed (scripts/setup installs it)"
    exit 77
fi

# Learnable images: 4 classes by which quadrant of an 8x8 image is brightest; pixels are k/255
# so that the uint8 form is exact.
"$py" - "$tmp" <<'PY'
import sys
import numpy as np
out = sys.argv[1]
rng = np.random.default_rng(5)
def split(n, name):
    y = rng.integers(0, 4, size=n)
    x = rng.integers(0, 120, size=(n, 1, 8, 8)).astype(np.uint8)
    for i, c in enumerate(y):
        r, q = divmod(int(c), 2)
        x[i, 0, 4 * r:4 * r + 4, 4 * q:4 * q + 4] += 100
    f32 = x.astype(np.float32) / np.float32(255)
    np.save(f"{out}/{name}_x_u8.npy", x)
    np.save(f"{out}/{name}_x.npy", f32)
    np.save(f"{out}/{name}_x_f64.npy", f32.astype(np.float64))
    np.save(f"{out}/{name}_x_flat.npy", f32.reshape(n, 64))
    np.save(f"{out}/{name}_x_hw.npy", f32.reshape(n, 8, 8))
    np.save(f"{out}/{name}_x_fortran.npy", np.asfortranarray(f32.reshape(n, 64)))
    np.save(f"{out}/{name}_x_be.npy", f32.astype(">f4"))
    np.save(f"{out}/{name}_y.npy", y.astype(np.int64))
    np.save(f"{out}/{name}_y_u8.npy", y.astype(np.uint8))
    np.save(f"{out}/{name}_y_i32.npy", y.astype(np.int32))
    np.save(f"{out}/{name}_y_float.npy", y.astype(np.float32))
    np.save(f"{out}/{name}_y_short.npy", y[:-1].astype(np.int64))
    bad = y.astype(np.int64).copy(); bad[3] = 300
    np.save(f"{out}/{name}_y_300.npy", bad)
    np.save(f"{out}/{name}_y_many.npy", np.full(n, 7, dtype=np.int64))
split(512, "train")
split(128, "val")
split(96, "test")
PY
d=$tmp
cat >"$tmp/npy.yaml" <<YAML
seed: 3
epochs: 3
log_every: 8
num_threads: 1
model:
  type: mlp
  hidden: [32]
data:
  type: npy
  train_x: $d/train_x.npy
  train_y: $d/train_y.npy
  val_x: $d/val_x.npy
  val_y: $d/val_y.npy
  batch_size: 32
optim:
  type: adamw
  lr: 0.01
YAML

# run NAME OVERRIDES...: trains into $tmp/NAME (weights NAME.st); passes when it exits 0.
run() {
    local name=$1
    shift
    "$ddpc" train "$tmp/npy.yaml" run_dir="$tmp/$name" weights_out="$tmp/$name.st" "$@" \
        >"$tmp/$name.log" 2>&1
    check_status "$name trains" $? "$tmp/$name.log"
}
acc() { sed -n 's/.*"split": "test".*"eval_accuracy": \([0-9.]*\).*/\1/p' "$1/metrics.jsonl" | tail -n 1; }

run f32
a=$(acc "$tmp/f32")
check "the MLP learns the quadrants (test accuracy ${a:-none} > 0.9)" awk -v a="${a:-0}" 'BEGIN { exit !(a > 0.9) }'
check "validation reads val_x/val_y" grep -q "eval val " "$tmp/f32.log"
check "without test_x the final test reads val_x" grep -q '"split": "test"' "$tmp/f32/metrics.jsonl"
run u8 "data.train_x=$d/train_x_u8.npy" "data.train_y=$d/train_y_u8.npy" "data.val_x=$d/val_x_u8.npy"
check "uint8 samples (scaled by 1/255) and uint8 labels train the float32 run's weights" \
    cmp "$tmp/f32.st" "$tmp/u8.st"
run f64 "data.train_x=$d/train_x_f64.npy" "data.train_y=$d/train_y_i32.npy"
check "float64 samples and int32 labels train the float32 run's weights" cmp "$tmp/f32.st" "$tmp/f64.st"
run flat "data.train_x=$d/train_x_flat.npy" "data.val_x=$d/val_x_flat.npy"
check "(N, D) feature vectors train the (N, 1, H, W) run's weights (the MLP flattens)" \
    cmp "$tmp/f32.st" "$tmp/flat.st"
run hw "data.train_x=$d/train_x_hw.npy" "data.val_x=$d/val_x_hw.npy"
check "(N, H, W) images train the same weights" cmp "$tmp/f32.st" "$tmp/hw.st"
run test_split "data.test_x=$d/test_x.npy" "data.test_y=$d/test_y.npy"
check "test_x/test_y are the final test split (96 samples)" \
    grep -q "eval test step .* 96 samples" "$tmp/test_split.log"
check "val_x/val_y stay the validation split (128 samples)" \
    grep -q "eval val  step .* 128 samples" "$tmp/test_split.log"
run cnn model.type=cnn 'model.channels=[8]' 'model.hidden=[16]' epochs=1
check "the CNN trains on 8x8 images" grep -q '"split": "test"' "$tmp/cnn/metrics.jsonl"
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/npy.yaml" data.batch_size=32 epochs=1 \
    data.shuffle=false run_dir="$tmp/two" weights_out="$tmp/two.st" >"$tmp/two.log" 2>&1
check_status "2 ranks train on npy data" $? "$tmp/two.log"

# README's line: configs/fmnist_mlp.yaml with the data swapped for arrays.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=npy "data.train_x=$d/train_x.npy" \
    "data.train_y=$d/train_y.npy" "data.test_x=$d/test_x.npy" "data.test_y=$d/test_y.npy" \
    epochs=1 run_dir="$tmp/readme" >"$tmp/readme.log" 2>&1
check_status "README's npy command line trains configs/fmnist_mlp.yaml on arrays" $? "$tmp/readme.log"

# refuse NAME WANT OVERRIDES...: exits non-zero, one line on stderr matching WANT, no run_dir.
refuse() {
    local name=$1 want=$2
    shift 2
    "$ddpc" train "$tmp/npy.yaml" run_dir="$tmp/bad" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local got=$?
    if [ $got -ne 0 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && grep -q -- "$want" "$tmp/bad.err" &&
        [ ! -e "$tmp/bad/checkpoints" ]
    then ok "$name"; else fail "$name (exit $got)" "$tmp/bad.err"; fi
}
printf 'not numpy' >"$tmp/junk.npy"
refuse "a file that is not .npy" "junk.npy: not a .npy file" "data.train_x=$tmp/junk.npy"
head -c 300 "$d/train_x.npy" >"$tmp/cut.npy"
refuse "a truncated array" "cut.npy: .*truncated" "data.train_x=$tmp/cut.npy"
refuse "Fortran order" "train_x_fortran.npy: a Fortran-order array" "data.train_x=$d/train_x_fortran.npy"
refuse "big-endian float32" "train_x_be.npy: dtype '>f4' is not read" "data.train_x=$d/train_x_be.npy"
refuse "float labels" "train_y_float.npy: float labels" "data.train_y=$d/train_y_float.npy"
refuse "labels of another length" "train_y_short.npy: labels of shape (511,), but the samples are 512" \
    "data.train_y=$d/train_y_short.npy"
refuse "a label over 255" "train_y_300.npy: label 3 is 300" "data.train_y=$d/train_y_300.npy"
refuse "held-out labels the train split lacks" "val_y_many.npy: label 7" "data.val_y=$d/val_y_many.npy"
refuse "x without y" "needs keys 'data.val_x' and 'data.val_y' together" "data.val_y="
refuse "a missing file" "nothing.npy" "data.train_x=$tmp/nothing.npy"
mkfifo "$tmp/fifo.npy"
timeout 60 "$ddpc" train "$tmp/npy.yaml" run_dir="$tmp/bad" "data.train_x=$tmp/fifo.npy" \
    >"$tmp/bad.out" 2>"$tmp/bad.err"
got=$?
if [ $got -ne 0 ] && [ $got -ne 124 ] && grep -q "fifo.npy': it is a FIFO" "$tmp/bad.err"; then
    ok "a FIFO is refused, not waited on"
else fail "a FIFO is refused, not waited on (exit $got)" "$tmp/bad.err"; fi
summary
