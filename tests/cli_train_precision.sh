#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# precision: bf16 and fp16 through `ddpc train` and `ddpc run`: the start line says what runs the
# products; a low-precision run differs from fp32 (the rounding happens) but stays close; data
# parallel equivalence (2 ranks x batch 8 = 1 rank x batch 16) holds at the tolerance of the
# precision for the MLP and the GPT, and ddp.comm_dtype compression still works; a repeat is byte-identical; a run killed mid-way and resumed
# ends with the uninterrupted run's weights bit for bit, at 1 and 2 ranks; dynamic loss scaling
# (on at fp16) grows, backs off on overflow, skips and counts, and resumes bit for bit; ddpc bench step reports
# the precision and the engine; a bad value names the key. matmul_precision (PyTorch's
# set_float32_matmul_precision): high is TF32 on GPUs and changes nothing on the CPU (its start
# line says so, its weights are highest's bit for bit); medium and unknown values are refused.
# usage: cli_train_precision.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
mlp=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=640 epochs=2 log_every=10
     optim.momentum=0.9 data.eval_batch_size=50 num_threads=1)
gpt=("$src/configs/gpt_fortunes.yaml" max_steps=12
     eval_every=0 eval_batches=2 log_every=4 model.n_layer=2 model.n_embd=64 model.block_size=32
     model.dropout=0.1 data.eval_batch_size=8 num_threads=1 optim.warmup_steps=2)
test_loss() { grep '"split": "test"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }
# close A B REL: |A - B| <= REL * |A|
differ() { ! cmp -s "$1" "$2"; }
close() { awk -v a="$1" -v b="$2" -v r="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= r * (a < 0 ? -a : a)) }'; }

# run NAME COMMAND...: runs into $tmp/NAME, weights to $tmp/NAME.st; checks exit 0.
run() {
    local name=$1
    shift
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.st" >>"$tmp/$name.log" 2>&1
    local got=$?
    check "$name exits 0" test "$got" -eq 0
    [ "$got" -eq 0 ] || tail -n 5 "$tmp/$name.log"
}

run mlp_fp32 "$ddpc" train "${mlp[@]}" data.batch_size=16
for p in bf16 fp16; do
    run "mlp_${p}_1" "$ddpc" train "${mlp[@]}" data.batch_size=16 precision=$p
    check "$p: the start line names the precision and its engine" \
        grep -Eq "^precision $p: matrix products in ($p-rounded inputs on OpenBLAS sgemm|bf16 oneDNN matmul)" \
        "$tmp/mlp_${p}_1.log"
    run "mlp_${p}_2" "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" data.batch_size=8 \
        precision=$p
    a=$(test_loss "$tmp/mlp_fp32") b=$(test_loss "$tmp/mlp_${p}_1") c=$(test_loss "$tmp/mlp_${p}_2")
    check "$p: rounding changes the weights" differ "$tmp/mlp_fp32.st" "$tmp/mlp_${p}_1.st"
    check "$p: test loss close to fp32's ($b vs $a)" close "$a" "$b" 2e-2
    check "$p: 2 ranks x 8 match 1 rank x 16 (test loss $c vs $b)" close "$b" "$c" 1e-3
    run "mlp_${p}_2b" "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" data.batch_size=8 \
        precision=$p
    check "$p: a repeat of the 2-rank job writes identical weights" \
        cmp -s "$tmp/mlp_${p}_2.st" "$tmp/mlp_${p}_2b.st"
done

# Gradient compression is independent of the products' precision: fp32 buckets sent as bf16.
run mlp_comm "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" data.batch_size=8 \
    precision=bf16 ddp.comm_dtype=bf16
c=$(test_loss "$tmp/mlp_comm") b=$(test_loss "$tmp/mlp_bf16_2")
check "bf16 products with bf16 gradient compression stay close (test loss $c vs $b)" close "$b" "$c" 2e-2

# The GPT (attention's products included), bf16: 1 x 8 vs 2 x 4.
run gpt_1 "$ddpc" train "${gpt[@]}" data.batch_size=8 precision=bf16
run gpt_2 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" data.batch_size=4 precision=bf16
a=$(test_loss "$tmp/gpt_1") b=$(test_loss "$tmp/gpt_2")
check "gpt bf16: 2 ranks x 4 match 1 rank x 8 (held-out loss $b vs $a)" close "$a" "$b" 1e-3

# The multi-task trainer takes the same key: two heads over one trunk at bf16, 1 x 16 = 2 x 8.
cat >"$tmp/mt.yaml" <<'YAML'
seed: 3
epochs: 2
log_every: 10
num_threads: 1
precision: bf16
model:
  type: mlp
  hidden: [32]
data:
  batch_size: 16
  eval_batch_size: 50
optim:
  type: sgd
  lr: 0.02
  momentum: 0.9
tasks:
  - name: fine
    data:
      type: synthetic_images
      size: 640
  - name: coarse
    batch_size: 8
    loss_weight: 0.5
    data:
      type: synthetic_images
      size: 640
      label_map: [0, 0, 1, 1, 2, 2, 3, 3, 4, 4]
YAML
task_loss() { grep '"split": "test", "task": "'"$2"'"' "$1/metrics.jsonl" | tail -1 | sed 's/.*"eval_loss": \([0-9.]*\).*/\1/'; }
run mt_1 "$ddpc" train "$tmp/mt.yaml"
run mt_2 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$tmp/mt.yaml" data.batch_size=8 tasks.1.batch_size=4
check "multi-task at bf16: the start line says so" grep -q "^precision bf16: " "$tmp/mt_1.log"
for k in fine coarse; do
    a=$(task_loss "$tmp/mt_1" $k) b=$(task_loss "$tmp/mt_2" $k)
    check "multi-task bf16, task $k: 2 ranks match 1 rank ($b vs $a)" close "$a" "$b" 1e-3
done

# The CNN (convolution's products) at fp16, as the README shows it: scaled, finite.
run cnn_fp16 "$ddpc" train "$src/configs/fmnist_cnn.yaml" data.type=synthetic_images data.size=256 \
    max_steps=6 log_every=3 data.eval_batch_size=64 num_threads=1 precision=fp16
check "cnn fp16: progress records carry the loss scale and a finite loss" \
    grep -Eq '"step": 6, "epoch": [0-9]+, "loss": [0-9.]+, .*"loss_scale": [0-9]+}' "$tmp/cnn_fp16/metrics.jsonl"

# Bit-exact resume in each precision: killed at step 7 (checkpoint at 5), run again.
for p in bf16 fp16; do
    ck=(checkpoint.every_steps=5 precision=$p)
    run "res_${p}_ref" "$ddpc" train "${gpt[@]}" data.batch_size=8 "${ck[@]}"
    ( "$ddpc" train "${gpt[@]}" data.batch_size=8 "${ck[@]}" fault.kill_at_step=7 \
        run_dir="$tmp/res_$p" weights_out="$tmp/res_$p.st" >"$tmp/res_$p.log" 2>&1 )
    check "$p: the fault kills the run" test $? -ne 0
    run "res_$p" "$ddpc" train "${gpt[@]}" data.batch_size=8 "${ck[@]}" fault.kill_at_step=7
    check "$p: the rerun resumes" grep -q "resuming from .*step-00000005" "$tmp/res_$p.log"
    check "$p: resumed weights equal the uninterrupted run's" cmp "$tmp/res_$p.st" "$tmp/res_${p}_ref.st"
done
run res2_ref "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" data.batch_size=4 \
    checkpoint.every_steps=5 precision=bf16
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" data.batch_size=4 checkpoint.every_steps=5 \
    precision=bf16 fault.kill_at_step=7 fault.kill_rank=1 run_dir="$tmp/res2" \
    weights_out="$tmp/res2.st" >"$tmp/res2.log" 2>&1
check "2 ranks bf16: the fault kills the job" test $? -ne 0
run res2 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" data.batch_size=4 \
    checkpoint.every_steps=5 precision=bf16 fault.kill_at_step=7 fault.kill_rank=1
check "2 ranks bf16: resumed weights equal the uninterrupted run's" cmp "$tmp/res2.st" "$tmp/res2_ref.st"

# Dynamic loss scaling (GradScaler's rules): on by default at fp16, its state in metrics.jsonl.
run ls_fp16 "$ddpc" train "${mlp[@]}" data.batch_size=16 precision=fp16 loss_scale.growth_interval=3 \
    log_every=1 max_steps=4
check "fp16 scales the loss: 65536 for steps 1-2, doubled after the third clean step" \
    grep -q '"step": 3, .*"skipped_steps": 0, "loss_scale": 131072}' "$tmp/ls_fp16/metrics.jsonl"
check "the first record has the initial scale" \
    grep -q '"step": 1, .*"loss_scale": 65536}' "$tmp/ls_fp16/metrics.jsonl"
run ls_fp32 "$ddpc" train "${mlp[@]}" data.batch_size=16 loss_scale.enabled=true max_steps=2 log_every=1
check "loss_scale.enabled=true scales at fp32 too" \
    grep -q '"step": 2, .*"loss_scale": 65536}' "$tmp/ls_fp32/metrics.jsonl"
run ls_off "$ddpc" train "${mlp[@]}" data.batch_size=16 precision=fp16 loss_scale.enabled=false \
    max_steps=2 log_every=1
check "loss_scale.enabled=false: no scale in the metrics" \
    bash -c "! grep -q loss_scale '$tmp/ls_off/metrics.jsonl'"
# fp16 with an initial scale of 2^24: the scaled output gradients overflow fp16 (65504) when the
# backward's products round them, so steps 1-4 are skipped and counted while the scale halves to
# 2^20, where they fit; training then goes on. Killed at step 7 and resumed from step 5, the scale
# comes back from the checkpoint (a fresh 2^24 would skip again) and the weights match.
ovf=(data.batch_size=16 precision=fp16 loss_scale.init_scale=16777216 log_every=1 max_steps=12
     checkpoint.every_steps=5)
run ovf_ref "$ddpc" train "${mlp[@]}" "${ovf[@]}"
check "overflowing steps are skipped, counted and back the scale off" \
    grep -q '"step": 4, .*"skipped_steps": 4, "loss_scale": 1048576}' "$tmp/ovf_ref/metrics.jsonl"
check "then training goes on at that scale" \
    grep -q '"step": 12, .*"skipped_steps": 4, "loss_scale": 1048576}' "$tmp/ovf_ref/metrics.jsonl"
( "$ddpc" train "${mlp[@]}" "${ovf[@]}" fault.kill_at_step=7 run_dir="$tmp/ovf" \
    weights_out="$tmp/ovf.st" >"$tmp/ovf.log" 2>&1 )
run ovf "$ddpc" train "${mlp[@]}" "${ovf[@]}" fault.kill_at_step=7
check "loss-scaled resume: weights equal the uninterrupted run's" cmp "$tmp/ovf.st" "$tmp/ovf_ref.st"
check "loss-scaled resume: the last record equals the uninterrupted run's" \
    test "$(grep '"step": 12, "epoch"' "$tmp/ovf/metrics.jsonl" | tail -1 | sed 's/"phase": {[^}]*}, "step_s[^,]*, "comm_s[^,]*,//; s/"time_s[^,]*,//; s/"samples_per_s[^,]*,//; s/"tokens_per_s[^,]*,//; s/"data_wait_s[^,]*,//')" = \
         "$(grep '"step": 12, "epoch"' "$tmp/ovf_ref/metrics.jsonl" | tail -1 | sed 's/"phase": {[^}]*}, "step_s[^,]*, "comm_s[^,]*,//; s/"time_s[^,]*,//; s/"samples_per_s[^,]*,//; s/"tokens_per_s[^,]*,//; s/"data_wait_s[^,]*,//')"
"$ddpc" ckpt show "$tmp/ovf/checkpoints/step-00000010" >"$tmp/show.txt" 2>&1
check "ddpc ckpt show prints the loss scale" grep -Eq '^loss scale: +[0-9.e+]+ \([0-9]+ finite steps' "$tmp/show.txt"
"$ddpc" train "${mlp[@]}" precision=fp16 loss_scale.backoff_factor=1 run_dir="$tmp/badls" >"$tmp/badls.log" 2>&1
check "a bad scaler setting exits 1 naming the key" grep -q "loss_scale.backoff_factor must be in (0, 1)" "$tmp/badls.log"

# ddpc bench step reports precision and engine.
"$ddpc" bench step "${gpt[@]}" data.batch_size=4 precision=bf16 bench.steps=2 bench.warmup=1 \
    >"$tmp/bench.json" 2>"$tmp/bench.err"
check "bench step runs at bf16" test $? -eq 0
check "bench step reports precision, engine, device and oneDNN" \
    grep -Eq '"precision": "bf16", "matmul": "[^"]+", "device": "cpu", "onednn": "oneDNN [0-9.]+ \(openmp\), ISA [a-z0-9_]+"' \
    "$tmp/bench.json"
"$ddpc" bench step "${mlp[@]}" data.batch_size=16 matmul_precision=high bench.steps=2 \
    bench.warmup=1 >"$tmp/bench32.json" 2>"$tmp/bench32.err"
check "bench step's matmul says what the start line says (matmul_precision high on the CPU)" \
    grep -q '"matmul": "fp32 OpenBLAS sgemm; matmul_precision high changes nothing on the CPU"' \
    "$tmp/bench32.json"

run mlp_tf32 "$ddpc" train "${mlp[@]}" data.batch_size=16 matmul_precision=high
check "matmul_precision high on the CPU: the start line says it changes nothing" \
    grep -q "^precision fp32: matrix products in .*; matmul_precision high changes nothing on the CPU" \
    "$tmp/mlp_tf32.log"
check "matmul_precision high on the CPU: the fp32 weights, bit for bit" \
    cmp -s "$tmp/mlp_fp32.st" "$tmp/mlp_tf32.st"
check "config.yaml records matmul_precision" grep -q "^matmul_precision: high" \
    "$tmp/mlp_tf32/config.yaml"
"$ddpc" train "${mlp[@]}" matmul_precision=medium run_dir="$tmp/bad" >"$tmp/badmm.log" 2>&1
check "matmul_precision medium exits 1 pointing at precision: bf16" \
    grep -q "key 'matmul_precision' cannot be 'medium': .*precision: bf16" "$tmp/badmm.log"
"$ddpc" train "${mlp[@]}" matmul_precision=low run_dir="$tmp/bad" >"$tmp/badmm2.log" 2>&1
check "an unknown matmul_precision exits 1 naming the choices" \
    grep -q "key 'matmul_precision' must be one of highest, high, got 'low'" "$tmp/badmm2.log"

"$ddpc" train "${mlp[@]}" precision=fp8 run_dir="$tmp/bad" >"$tmp/bad.log" 2>&1
check "an unknown precision exits 1" test $? -eq 1
check "and names the key and the choices" \
    grep -q "key 'precision' must be one of fp32, bf16, fp16, got 'fp8'" "$tmp/bad.log"

summary
