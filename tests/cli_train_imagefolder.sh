#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# data.type imagefolder through `ddpc train` and `ddpc run`: a folder of 3-channel 32x32 PNGs of
# 4 classes (written by tests/lib/write_images.py, also in 16-bit, RGBA, palette and grey forms)
# trains a CNN on 2 ranks as on 1 (N x b == 1 x N*b); the same pixels as .npy train the same
# weights bit for bit, as grey (data.channels 1, Pillow's luma) and resized (data.image_size, the
# bilinear rule of docs/data.md); Fashion-MNIST written as PNG folders trains the IDX reader's
# weights bit for bit; JPEGs decode; bad folders and files each give one line and change nothing.
# usage: cli_train_imagefolder.sh DDPC_BIN SOURCE_DIR
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
fm=/usr/share/datasets/fashion-mnist
if [ ! -f "$fm/train-images-idx3-ubyte.gz" ]; then
    echo "SKIP: Debian's dataset-fashion-mnist is not installed (scripts/setup installs it)"
    exit 77
fi
d=$tmp/d
"$py" "$src/tests/lib/write_images.py" "$d" "$fm" >"$tmp/write.log" 2>&1
check_status "the test images are written" $? "$tmp/write.log"
check "the resize rule is torch's bilinear interpolate (align_corners=False), rounded" \
    grep -qx "torch_resize_maxdiff 0" "$tmp/write.log"
# Entries that are not images: counted once in the log; hidden ones are not counted.
echo "not an image" >"$d/train/bird/notes.txt"
mkdir "$d/train/cat/extra"
echo "hidden" >"$d/train/deer/.DS_Store"
mkdir "$d/train/.cache"

cat >"$tmp/if.yaml" <<YAML
seed: 3
epochs: 2
log_every: 8
num_threads: 1
model:
  type: cnn
  channels: [8, 16]
  hidden: [32]
data:
  type: imagefolder
  train: $d/train
  val: $d/val
  batch_size: 16
optim:
  type: adamw
  lr: 0.001
YAML
sed -e 's/type: imagefolder/type: npy/' -e '/^  train: /d' -e '/^  val: /d' "$tmp/if.yaml" \
    >"$tmp/npy.yaml"

# run NAME CONFIG OVERRIDES...: trains into $tmp/NAME (weights NAME.st); passes when it exits 0.
run() {
    local name=$1 cfg=$2
    shift 2
    "$ddpc" train "$tmp/$cfg.yaml" run_dir="$tmp/$name" weights_out="$tmp/$name.st" "$@" \
        >"$tmp/$name.log" 2>&1
    check_status "$name trains" $? "$tmp/$name.log"
}
npy() { # npy X_SUFFIX: the npy keys for train_X / val_X
    echo "data.train_x=$d/train_$1.npy" "data.train_y=$d/train_y.npy" "data.val_x=$d/val_$1.npy" \
        "data.val_y=$d/val_y.npy"
}
acc() { sed -n 's/.*"split": "test".*"eval_accuracy": \([0-9.]*\).*/\1/p' "$1/metrics.jsonl" | tail -n 1; }
test_loss() { grep '"split": "test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }

run folder if
a=$(acc "$tmp/folder")
check "the CNN learns the quadrants (test accuracy ${a:-none} > 0.9)" awk -v a="${a:-0}" 'BEGIN { exit !(a > 0.9) }'
check "the log gives classes, shape and decoded bytes" \
    grep -q "^data: $d/train: 256 images of 4 classes, 3x32x32, 0.8 MB decoded in memory; 2 other entries skipped" "$tmp/folder.log"
check "validation reads data.val" grep -q "eval val  step .* 64 samples" "$tmp/folder.log"
# The CNN's input is the data's 3x32x32: two 2x2 pools leave 16 x 8 x 8 for the first fc layer.
"$py" - "$tmp/folder.st" >"$tmp/shapes.txt" <<'PY'
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
print(" ".join(f"{k}={h[k]['shape']}" for k in sorted(h) if k != "__metadata__").replace(" ", ""))
PY
check "the CNN's tensors follow the 3x32x32 input and 4 classes" grep -qF \
    "conv.0.weight=[8,3,3,3]conv.1.bias=[16]conv.1.weight=[16,8,3,3]" "$tmp/shapes.txt"
check "the first fc layer takes 16 x 8 x 8 features, the last gives 4 classes" grep -qF \
    "fc.0.weight=[32,1024]fc.1.bias=[4]fc.1.weight=[4,32]" "$tmp/shapes.txt"
"$ddpc" plan "$tmp/if.yaml" >"$tmp/plan.log" 2>&1
check_status "ddpc plan reads the folder" $? "$tmp/plan.log"
# 216+8, 1152+16, 32768+32, 128+4 floats, each tensor padded to 16 floats: 34352.
check "ddpc plan counts the 3x32x32 CNN's parameters" grep -q "(34352 parameters" "$tmp/plan.log"
# shellcheck disable=SC2046
run arrays npy $(npy x)
check "the same pixels as .npy (uint8) train the same weights, bit for bit" cmp "$tmp/folder.st" "$tmp/arrays.st"
run grey if data.channels=1
# shellcheck disable=SC2046
run grey_arrays npy $(npy grey)
check "data.channels 1 is Pillow's convert('L'): the weights of its luma as .npy" \
    cmp "$tmp/grey.st" "$tmp/grey_arrays.st"
run small if "data.image_size=[20, 12]"
# shellcheck disable=SC2046
run small_arrays npy $(npy small)
check "data.image_size [20, 12] resizes as docs/data.md says: the weights of the resized .npy" \
    cmp "$tmp/small.st" "$tmp/small_arrays.st"
run norm if "data.mean=[0.5, 0.4, 0.3]" "data.std=0.25"
check "data.mean and data.std change the inputs" sh -c "! cmp -s '$tmp/norm.st' '$tmp/folder.st'"

"$ddpc" train "$tmp/if.yaml" data.batch_size=16 run_dir="$tmp/one" >"$tmp/one.log" 2>&1
check_status "1 rank x 16 trains" $? "$tmp/one.log"
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/if.yaml" data.batch_size=8 \
    run_dir="$tmp/two" >"$tmp/two.log" 2>&1
check_status "2 ranks x 8 train" $? "$tmp/two.log"
a=$(test_loss "$tmp/one")
b=$(test_loss "$tmp/two")
check "2 x 8 matches 1 x 16 (test loss $a vs $b)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a != "" && d <= 1e-4 * a + 1e-6) }'

# Fashion-MNIST's first 2000 train and 500 test images, stably sorted by label in both forms so
# that sample i is the same image: the folder order (class, file name) is then the IDX order, and
# the sampler draws the same sequence from both. Same seed, same normalisation constants.
fmnist=(epochs=1 model.type=mlp "model.hidden=[64]" data.batch_size=64 num_threads=1)
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${fmnist[@]}" data.path="$d/fm" \
    run_dir="$tmp/fm_idx" weights_out="$tmp/fm_idx.st" >"$tmp/fm_idx.log" 2>&1
check_status "Fashion-MNIST (IDX) trains" $? "$tmp/fm_idx.log"
"$ddpc" train "$src/configs/fmnist_mlp.yaml" "${fmnist[@]}" data.type=imagefolder \
    data.train="$d/fmpng/train" data.test="$d/fmpng/test" data.mean=0.2860 data.std=0.3530 \
    run_dir="$tmp/fm_png" weights_out="$tmp/fm_png.st" >"$tmp/fm_png.log" 2>&1
check_status "Fashion-MNIST as PNG folders trains" $? "$tmp/fm_png.log"
check "grey images give 1 channel (1x28x28)" grep -q "2000 images of 10 classes, 1x28x28" "$tmp/fm_png.log"
check "PNG folders with FMNIST's mean and std train the IDX reader's weights, bit for bit" \
    cmp "$tmp/fm_idx.st" "$tmp/fm_png.st"

# JPEG: an RGB and a grey JPEG (tests/fuzz/seeds/fuzz_image) decode, resized to one size.
j=$tmp/jpeg
mkdir -p "$j/train/a" "$j/train/b" "$j/val/a" "$j/val/b"
cp "$src/tests/fuzz/seeds/fuzz_image/rgb32.jpg" "$j/train/a/1.jpg"
cp "$src/tests/fuzz/seeds/fuzz_image/grey16.jpg" "$j/train/b/2.JPEG"
cp "$d/train/airplane/0005.png" "$j/train/a/3.png"
cp "$d/train/airplane/0006.png" "$j/train/b/4.jpg" # a PNG by its bytes, whatever its name
cp "$j/train/a/1.jpg" "$j/val/a/1.jpeg"
cp "$j/train/b/2.JPEG" "$j/val/b/2.jpg"
"$ddpc" train "$tmp/if.yaml" data.train="$j/train" data.val="$j/val" data.image_size=16 \
    data.batch_size=2 run_dir="$tmp/jpeg_run" >"$tmp/jpeg.log" 2>&1
check_status "JPEG and PNG of mixed sizes train with data.image_size" $? "$tmp/jpeg.log"
check "an RGB JPEG among them makes the folder 3-channel" grep -q "4 images of 2 classes, 3x16x16" "$tmp/jpeg.log"
run augment if data.hflip=true data.random_shift=2
check "data.hflip and data.random_shift augment folder images" \
    sh -c "! cmp -s '$tmp/augment.st' '$tmp/folder.st'"
# README's line, with this test's folders as photos/.
"$ddpc" train "$src/configs/fmnist_cnn.yaml" data.type=imagefolder data.train="$d/train" \
    data.val="$d/val" data.image_size=32 epochs=1 run_dir="$tmp/readme" >"$tmp/readme.log" 2>&1
check_status "README's imagefolder command line trains configs/fmnist_cnn.yaml on a folder" $? \
    "$tmp/readme.log"

# refuse NAME WANT OVERRIDES...: exits non-zero, one line on stderr matching WANT, no run_dir.
refuse() {
    local name=$1 want=$2
    shift 2
    "$ddpc" train "$tmp/if.yaml" run_dir="$tmp/bad" "$@" >"$tmp/bad.out" 2>"$tmp/bad.err"
    local got=$?
    if [ $got -ne 0 ] && [ "$(wc -l <"$tmp/bad.err")" -eq 1 ] && grep -q -- "$want" "$tmp/bad.err" &&
        [ ! -e "$tmp/bad" ]
    then ok "$name"; else fail "$name (exit $got)" "$tmp/bad.err"; fi
}
# badroot NAME: a copy of the val folder to break ($tmp/NAME), kept small.
badroot() { cp -r "$d/val" "$tmp/$1"; echo "$tmp/$1"; }
cat1=$(ls "$d/val/cat" | head -n 1)
bird1=$(ls "$d/val/bird" | head -n 1)
r=$(badroot corrupt)
head -c 200 "$d/val/cat/$cat1" >"$r/cat/$cat1"
printf 'junk' | dd of="$r/bird/$bird1" bs=1 seek=60 conv=notrunc 2>/dev/null
refuse "a corrupt PNG (bad CRC), named" "corrupt/bird/$bird1: not a readable PNG image" data.val="$r"
rm "$r/bird/$bird1"
refuse "a truncated PNG, named" "corrupt/cat/$cat1: not a readable PNG image: .*truncated" data.val="$r"
r=$(badroot trunc_jpeg)
head -c 700 "$src/tests/fuzz/seeds/fuzz_image/rgb32.jpg" >"$r/cat/cut.jpg"
refuse "a truncated JPEG (libjpeg's warning is an error)" \
    "trunc_jpeg/cat/cut.jpg: not a readable JPEG image: Premature end of JPEG file" \
    data.val="$r" data.image_size=32
r=$(badroot text_png)
echo "hello" >"$r/deer/fake.png"
refuse "a .png that is not an image" "text_png/deer/fake.png: neither a PNG nor a JPEG image" data.val="$r"
mkdir -p "$tmp/noimages/a" "$tmp/noimages/b"
touch "$tmp/noimages/a/readme.txt"
refuse "a folder with no images" "noimages/a: a class folder without images" data.val="$tmp/noimages"
mkdir -p "$tmp/noclasses"
touch "$tmp/noclasses/x.png"
refuse "a root without class folders" "noclasses: no class folders" data.val="$tmp/noclasses"
r=$(badroot missing_class)
rm -r "$r/deer"
refuse "a held-out split without one of the classes" "missing_class: no class folder 'deer'" \
    data.val="$r"
r=$(badroot extra_class)
mkdir "$r/emu" && cp "$d/val/deer/"*.png "$r/emu/"
refuse "a held-out split with a class the train split lacks" \
    "extra_class: class folder 'emu' is not a class of the train split" data.val="$r"
r=$(badroot mixed)
cp "$src/tests/fuzz/seeds/fuzz_image/grey16.jpg" "$r/bird/zz.jpg"
refuse "mixed sizes without data.image_size: both sizes and data.image_size named" \
    "mixed/bird/zz.jpg is 16x16 (height x width) but the train split's images are 32x32: .*data.image_size" \
    data.val="$r"
mkdir -p "$tmp/mixed_train/a" "$tmp/mixed_train/b"
cp "$d/val/cat/$cat1" "$tmp/mixed_train/a/1.png"
cp "$src/tests/fuzz/seeds/fuzz_image/grey16.jpg" "$tmp/mixed_train/b/2.jpg"
refuse "mixed sizes in the train split: two files named" \
    "mixed_train/b/2.jpg is 16x16 (height x width) but .*mixed_train/a/1.png are 32x32" \
    data.train="$tmp/mixed_train" data.val=null data.test="$tmp/mixed_train"
mkdir -p "$tmp/many"
for k in $(seq 100 356); do mkdir "$tmp/many/c$k"; done
refuse "more than 256 classes" "many: 257 class folders; at most 256" data.train="$tmp/many"
refuse "a missing root" "cannot read image folder '$tmp/nowhere'" data.train="$tmp/nowhere"
refuse "no held-out split" "needs key 'data.val'" data.val=null
refuse "data.channels 2" "key 'data.channels' must be 1 (grey) or 3 (RGB), got 2" data.channels=2
refuse "two means" "key 'data.mean' must be one number or one per channel (1 or 3), got 2" \
    "data.mean=[0.5, 0.5]"
refuse "three means for grey images" "3 means and 1 stds for 1-channel images" data.channels=1 \
    "data.mean=[0.5, 0.5, 0.5]" data.std=0.5
refuse "a zero std" "key 'data.std'" data.std=0
summary
