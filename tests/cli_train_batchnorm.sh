#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# BatchNorm and SyncBatchNorm through `ddpc train` and `ddpc run`: 2 ranks x 16 with
# model.sync_batchnorm match 1 rank x 32 with plain BatchNorm (weights and running statistics
# within 1e-5; cnn's BatchNorm2d and mlp's BatchNorm1d), while without sync they do not; the running statistics are in weights_out and
# checkpoints; DDP's broadcast_buffers makes every rank evaluate with rank 0's statistics (the
# 2-rank test loss equals a 1-process `state=test` of the saved weights) and off it does not; a
# killed SyncBN run resumes bit for bit, with full (stage 0) and sharded (ZeRO 1) checkpoints, and
# an augmented one too; batch 1 with BatchNorm1d is refused (as torch) unless SyncBatchNorm spans
# more than one sample; the documented defaults and refusals (docs/config.md).
# usage: cli_train_batchnorm.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_cnn_bn.yaml
common=(data.type=synthetic_images data.size=256 epochs=2 log_every=4 num_threads=1
        'model.channels=[4,8]' 'model.hidden=[16]' model.dropout=0 optim.lr=0.01
        data.eval_batch_size=20 checkpoint.every_steps=3 data.hflip=false data.random_shift=0)

# train NAME RANKS ARGS...: trains into $tmp/NAME with weights $tmp/NAME.st; returns its status.
train() {
    local name=$1 ranks=$2
    shift 2
    local cmd=("$ddpc" train "$cfg" "${common[@]}" "$@" run_dir="$tmp/$name"
               weights_out="$tmp/$name.st")
    if [ "$ranks" -gt 1 ]; then
        "$ddpc" run --nproc-per-node "$ranks" -- "${cmd[@]}" >>"$tmp/$name.log" 2>&1
    else
        "${cmd[@]}" >>"$tmp/$name.log" 2>&1
    fi
}
# maxdiff A B: the largest over tensors of max|a - b| / max(max|b|, 1e-6), every tensor of both.
maxdiff() {
    /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
import numpy as np
def load(p):
    d = open(p, "rb").read()
    n = struct.unpack("<Q", d[:8])[0]
    h = json.loads(d[8:8 + n])
    return {k: np.frombuffer(d[8 + n + v["data_offsets"][0]:8 + n + v["data_offsets"][1]], "<f4")
            for k, v in h.items() if k != "__metadata__"}
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a.keys() == b.keys(), (sorted(a), sorted(b))
print(max(float(np.abs(a[k] - b[k]).max()) / max(float(np.abs(b[k]).max()), 1e-6) for k in a))
PY
}
names() {
    /usr/bin/python3 -c 'import json,struct,sys; d=open(sys.argv[1],"rb").read(); n=struct.unpack("<Q",d[:8])[0]; print(" ".join(sorted(k for k in json.loads(d[8:8+n]) if k != "__metadata__")))' "$1"
}
test_loss() { grep '"split": "test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }

train one 1 data.batch_size=32 model.sync_batchnorm=false
check "1 rank x 32 with BatchNorm trains" test $? -eq 0
check "weights_out holds the running statistics" \
    bash -c "[[ '$(names "$tmp/one.st")' == *'bn.0.running_mean bn.0.running_var'*'bn.1.running_var'* ]]"
check "the convolutions before BatchNorm have no bias" bash -c "[[ '$(names "$tmp/one.st")' != *conv.0.bias* ]]"
check "checkpoints hold the running statistics" \
    bash -c "[[ '$(names "$tmp/one/checkpoints/step-00000016/model.safetensors")' == *bn.1.running_mean* ]]"

train sync 2 data.batch_size=16 model.sync_batchnorm=true
check "2 ranks x 16 with SyncBatchNorm train" test $? -eq 0
d=$(maxdiff "$tmp/sync.st" "$tmp/one.st")
check "SyncBatchNorm 2 x 16 matches BatchNorm 1 x 32 (max relative difference $d)" \
    awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }'

# BatchNorm1d (mlp): the same equivalence, with the images flipped and shifted at random (a
# sample's transform depends on its index, not its rank). The cnn above runs without: the fill of
# shifted images makes max-pool near-ties, which rounding may route either way.
mlp=("$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=256 epochs=2
     num_threads=1 'model.hidden=[16,8]' model.batchnorm=true optim.lr=0.01 data.hflip=true
     data.random_shift=2)
"${mlp[@]}" data.batch_size=32 run_dir="$tmp/mlp1" weights_out="$tmp/mlp1.st" >"$tmp/mlp1.log" 2>&1
check "mlp with BatchNorm1d trains" test $? -eq 0
"$ddpc" run --nproc-per-node 2 -- "${mlp[@]}" data.batch_size=16 model.sync_batchnorm=true \
    run_dir="$tmp/mlp2" weights_out="$tmp/mlp2.st" >"$tmp/mlp2.log" 2>&1
check "BatchNorm1d buffers are saved" bash -c "[[ '$(names "$tmp/mlp2.st")' == *fc_bn.1.running_var* ]]"
d=$(maxdiff "$tmp/mlp2.st" "$tmp/mlp1.st")
# docs/data.md: evaluation never augments, so a test of the same weights gives the same loss.
for a in off on; do
    flags=(data.hflip=false data.random_shift=0)
    [ $a = on ] && flags=(data.hflip=true data.random_shift=2)
    "${mlp[@]}" "${flags[@]}" state=test init_from="$tmp/mlp1.st" run_dir="$tmp/test_aug_$a" \
        >"$tmp/test_aug_$a.log" 2>&1
done
check "evaluation images are not augmented (test loss $(test_loss "$tmp/test_aug_on"))" \
    test -n "$(test_loss "$tmp/test_aug_on")" -a \
         "$(test_loss "$tmp/test_aug_on")" = "$(test_loss "$tmp/test_aug_off")"
check "mlp SyncBatchNorm 2 x 16 matches BatchNorm1d 1 x 32, images augmented (max relative difference $d)" \
    awk -v d="$d" 'BEGIN { exit !(d <= 1e-5) }'

# One sample per batch in BatchNorm1d: refused as torch refuses it, unless SyncBatchNorm gathers
# more than one value per channel over the ranks.
"${mlp[@]}" data.batch_size=1 max_steps=2 run_dir="$tmp/b1" >"$tmp/b1.log" 2>&1
check "BatchNorm1d with batch 1 exits non-zero" test $? -ne 0
check "... saying one value per channel cannot be normalised" grep -q \
    "BatchNorm fc_bn.0: expected more than 1 value per channel when training, got 1" "$tmp/b1.log"
"$ddpc" run --nproc-per-node 2 -- "${mlp[@]}" data.batch_size=1 max_steps=2 \
    model.sync_batchnorm=true test_batches=1 run_dir="$tmp/b1s" >"$tmp/b1s.log" 2>&1
check "SyncBatchNorm over 2 ranks of batch 1 trains" test $? -eq 0 || tail -5 "$tmp/b1s.log"

train local 2 data.batch_size=16 model.sync_batchnorm=false
d=$(maxdiff "$tmp/local.st" "$tmp/one.st")
check "without sync the ranks normalise by their own halves (max relative difference $d)" \
    awk -v d="$d" 'BEGIN { exit !(d > 1e-3) }'

# broadcast_buffers: the 2-rank evaluation equals one process evaluating the saved weights (rank
# 0's). Batches of 4 and momentum 1 keep each rank's last batch statistics, far enough apart to
# move the test loss when rank 1 evaluates with its own.
bcast=(data.batch_size=4 model.bn_momentum=1.0 data.classes=2 model.sync_batchnorm=false epochs=3)
for mode in true false; do
    train "bcast_$mode" 2 "${bcast[@]}" ddp.broadcast_buffers=$mode
    "$ddpc" train "$cfg" "${common[@]}" "${bcast[@]}" state=test init_from="$tmp/bcast_$mode.st" \
        run_dir="$tmp/eval_$mode" >"$tmp/eval_$mode.log" 2>&1
    check "state=test of the saved weights runs" test $? -eq 0
done
a=$(test_loss "$tmp/bcast_true")
b=$(test_loss "$tmp/eval_true")
check "broadcast_buffers: ranks evaluate with rank 0's statistics (test loss $a vs $b)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= 1e-5 * b) }'
a=$(test_loss "$tmp/bcast_false")
b=$(test_loss "$tmp/eval_false")
check "broadcast_buffers false: rank 1 evaluates with its own statistics (test loss $a vs $b)" \
    awk -v a="$a" -v b="$b" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d > 1e-4 * b) }'

# A SyncBatchNorm run killed at step 11 resumes from checkpoint 9 bit for bit, full and sharded.
for zero in 0 1; do
    train "kill$zero" 2 data.batch_size=16 zero.stage=$zero fault.kill_at_step=11 fault.kill_rank=1
    check "zero $zero: the run is killed at step 11" test $? -ne 0
    train "kill$zero" 2 data.batch_size=16 zero.stage=$zero fault.kill_at_step=11 fault.kill_rank=1
    check "zero $zero: the rerun resumes from step 9" grep -q "resuming from .*step-00000009" "$tmp/kill$zero.log"
    train "ref$zero" 2 data.batch_size=16 zero.stage=$zero
    check "zero $zero: resumed SyncBatchNorm weights and statistics equal the uninterrupted run's" \
        cmp "$tmp/kill$zero.st" "$tmp/ref$zero.st"
done
check "a sharded checkpoint keeps the statistics in rank 0's shard" \
    bash -c "[[ '$(names "$tmp/ref1/checkpoints/step-00000016/shard-00000-of-00002.safetensors")' == *buffer.bn.0.running_mean* ]]"
"$ddpc" ckpt export "$tmp/ref1/checkpoints/step-00000016" "$tmp/export.st" >"$tmp/export.log" 2>&1
check "ckpt export of a sharded checkpoint writes the statistics under their names" \
    bash -c "[[ '$(names "$tmp/export.st")' == *'bn.0.running_mean bn.0.running_var'* ]]"
check "the export equals weights_out" test "$(maxdiff "$tmp/export.st" "$tmp/ref1.st")" = 0.0

# docs/data.md: a sample's flip and shift depend on (seed, epoch, index) only, so an augmented run
# killed mid-epoch (step 11 of 16, 8 per epoch) resumes from step 10 to the uninterrupted weights.
("${mlp[@]}" data.batch_size=32 checkpoint.every_steps=5 fault.kill_at_step=11 run_dir="$tmp/mlpk" \
    weights_out="$tmp/mlpk.st" >"$tmp/mlpk.log" 2>&1; exit $?) 2>/dev/null
check "an augmented run is killed at step 11" test $? -ne 0
"${mlp[@]}" data.batch_size=32 checkpoint.every_steps=5 fault.kill_at_step=11 run_dir="$tmp/mlpk" \
    weights_out="$tmp/mlpk.st" >>"$tmp/mlpk.log" 2>&1
check "... resumes from step 10" grep -q "resuming from .*step-00000010" "$tmp/mlpk.log"
check "... to the uninterrupted run's weights, bit for bit (the same images)" cmp "$tmp/mlpk.st" "$tmp/mlp1.st"

# docs/config.md's defaults, as the effective configuration writes them: BatchNorm and
# augmentation off, torch's momentum and eps, SyncBatchNorm off, broadcast_buffers on.
defaults=("$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=64
          data.batch_size=16 'model.hidden=[8]' epochs=0 num_threads=1)
"${defaults[@]}" run_dir="$tmp/dflt" >"$tmp/dflt.log" 2>&1
"${defaults[@]}" model.batchnorm=true run_dir="$tmp/dflt_bn" >"$tmp/dflt_bn.log" 2>&1
# key FILE SECTION KEY: the value of SECTION.KEY in an effective config.yaml (top level: SECTION -).
key() { awk -v s="$2" -v k="$3" '/^[^ ]/ { cur = $1 } (s == "-" && $1 == k ":") || (cur == s ":" && $1 == k ":") { print $2; exit }' "$1"; }
same() { if [ "$2" = "$3" ]; then ok "$1"; else fail "$1: got '$2', want '$3'"; fi; }
same "model.batchnorm defaults to false" "$(key "$tmp/dflt/config.yaml" model batchnorm)" false
same "data.hflip defaults to false" "$(key "$tmp/dflt/config.yaml" data hflip)" false
same "data.random_shift defaults to 0" "$(key "$tmp/dflt/config.yaml" data random_shift)" 0
same "ddp.broadcast_buffers defaults to true" "$(key "$tmp/dflt/config.yaml" ddp broadcast_buffers)" true
same "model.bn_momentum defaults to 0.1" "$(key "$tmp/dflt_bn/config.yaml" model bn_momentum)" 0.1
same "model.bn_eps defaults to 1e-5" "$(key "$tmp/dflt_bn/config.yaml" model bn_eps)" 1e-05
same "model.sync_batchnorm defaults to false" "$(key "$tmp/dflt_bn/config.yaml" model sync_batchnorm)" false

# Refusals, each naming the key.
"$ddpc" train "$cfg" "${common[@]}" model.activation_checkpointing=true run_dir="$tmp/ac" >"$tmp/ac.log" 2>&1
check "cnn BatchNorm with activation_checkpointing is refused" grep -q \
    "cnn batchnorm does not support activation checkpointing (a recomputed stage would update the running statistics twice)" "$tmp/ac.log"
"${defaults[@]}" data.random_shift=9 run_dir="$tmp/rs" >"$tmp/rs.log" 2>&1
check "data.random_shift past 8 is refused" grep -q "key 'data.random_shift' must be an integer in \[0, 8\], got '9'" "$tmp/rs.log"
"${defaults[@]}" model.batchnorm=true model.bn_momentum=1.5 run_dir="$tmp/mo" >"$tmp/mo.log" 2>&1
check "model.bn_momentum past 1 is refused" grep -q "key 'model.bn_momentum' must be a number in \[0, 1\]" "$tmp/mo.log"
"${defaults[@]}" model.sync_batchnorm=true run_dir="$tmp/sn" >"$tmp/sn.log" 2>&1
check "model.sync_batchnorm without model.batchnorm is refused, saying why" grep -q \
    "model.sync_batchnorm: true needs model.batchnorm: true" "$tmp/sn.log"
for k in data.hflip=true data.random_shift=1; do
    "$ddpc" train "$src/configs/fmnist_mlp.yaml" model.type=gpt model.n_layer=1 model.n_embd=16 \
        model.block_size=8 data.type=synthetic_tokens data.size=2000 epochs=0 "$k" \
        run_dir="$tmp/tok" >"$tmp/tok.log" 2>&1
    check "$k on a token dataset is refused, not ignored" grep -q \
        "key '${k%=*}' augments images; data.type synthetic_tokens has none" "$tmp/tok.log"
done
summary
