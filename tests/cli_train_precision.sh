#!/usr/bin/env bash
# precision: bf16 and fp16 through `ddpc train` and `ddpc run`: the start line says what runs the
# products; a low-precision run differs from fp32 (the rounding happens) but stays close; data
# parallel equivalence (2 ranks x batch 8 = 1 rank x batch 16) holds at the tolerance of the
# precision for the MLP and the GPT, and ddp.comm_dtype compression still works; a repeat is byte-identical; a run killed mid-way and resumed
# ends with the uninterrupted run's weights bit for bit, at 1 and 2 ranks; ddpc bench step reports
# the precision and the engine; a bad value names the key.
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

# ddpc bench step reports precision and engine.
"$ddpc" bench step "${gpt[@]}" data.batch_size=4 precision=bf16 bench.steps=2 bench.warmup=1 \
    >"$tmp/bench.json" 2>"$tmp/bench.err"
check "bench step runs at bf16" test $? -eq 0
check "bench step reports precision, engine and oneDNN" \
    grep -Eq '"precision": "bf16", "matmul": "[^"]+", "onednn": "oneDNN [0-9.]+ \(openmp\), ISA [a-z0-9_]+"' \
    "$tmp/bench.json"

"$ddpc" train "${mlp[@]}" precision=fp8 run_dir="$tmp/bad" >"$tmp/bad.log" 2>&1
check "an unknown precision exits 1" test $? -eq 1
check "and names the key and the choices" \
    grep -q "key 'precision' must be one of fp32, bf16, fp16, got 'fp8'" "$tmp/bad.log"

summary
