#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# DataParallel (parallel.mode: dp) through `ddpc train`: 2 replicas x batch 8 end with the weights
# of 2 DDP ranks x 8 (`ddpc run`, dropout on; bit for bit when the ranks have the replicas' one
# kernel thread; the seq2seq model's padded pairs too) and of 1 process x 16 (dropout off) to 1e-5; 4
# replicas match 4 DDP ranks; the start line and metrics.jsonl show the replicas and dp's phases;
# the replica count defaults to the kernel threads; a killed dp run resumes from its checkpoint
# to byte-identical final weights; dp under a launcher (WORLD_SIZE > 1), dp with ZeRO and
# parallel.replicas without dp and more than 64 replicas are refused with one clear line; the
# defaults are ddp and 0 replicas.
# usage: cli_train_dp.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
cfg=$src/configs/fmnist_mlp.yaml
common=(data.type=synthetic_images data.size=640 max_steps=8 log_every=4 eval_batches=1
        'model.hidden=[32, 16]' optim.type=adamw optim.lr=0.003 optim.nesterov=false
        optim.momentum=0 optim.schedule=constant num_threads=2 data.eval_batch_size=64)
py=/usr/bin/python3
close() { "$py" "$src/tests/weights_close.py" "$1" "$2" 1e-5 >"$tmp/close.out" 2>&1 || { cat "$tmp/close.out"; return 1; }; }

# run NAME COMMAND...: trains into $tmp/NAME, weights in $tmp/NAME.st; checks the exit status.
run() {
    local name=$1
    shift
    "$@" run_dir="$tmp/$name" weights_out="$tmp/$name.st" >"$tmp/$name.log" 2>&1
    local got=$?
    check "$name trains" test "$got" -eq 0
    [ "$got" -eq 0 ] || tail -n 5 "$tmp/$name.log"
}

drop=(model.dropout=0.2)
run dp2 "$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" data.batch_size=8 parallel.mode=dp \
    parallel.replicas=2
run ddp2 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" \
    data.batch_size=8
check "2 replicas x 8 = 2 DDP ranks x 8, dropout on (1e-5)" close "$tmp/dp2.st" "$tmp/ddp2.st"
# One kernel thread per rank, as each replica has: the same sums in the same order.
run ddp2t1 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" \
    data.batch_size=8 num_threads=1
check "with one kernel thread per rank too, bit for bit" cmp "$tmp/dp2.st" "$tmp/ddp2t1.st"
check "the start line names the replicas and their threads" grep -q \
    "global batch 16 = 8 per replica x 2 replicas (parallel.mode dp: one process, 1 kernel thread each) x 1 accumulation step" \
    "$tmp/dp2.log"
check "metrics.jsonl breaks dp's step down" grep -q \
    '"dp_replicate_s": .*"dp_scatter_s": .*"dp_wait_s": .*"dp_reduce_s": ' "$tmp/dp2/metrics.jsonl"
check "the eleven phases add up to step_s" "$py" -c '
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1]) if "\"phase\"" in l]
assert recs and all(len(r["phase"]) == 11 for r in recs), recs
assert all(abs(sum(r["phase"].values()) - r["step_s"]) <= 1e-3 * r["step_s"] for r in recs)
' "$tmp/dp2/metrics.jsonl"

run dp2b "$ddpc" train "$cfg" "${common[@]}" data.batch_size=8 parallel.mode=dp parallel.replicas=2
run one "$ddpc" train "$cfg" "${common[@]}" data.batch_size=16
check "2 replicas x 8 = 1 process x 16, no dropout (1e-5)" close "$tmp/dp2b.st" "$tmp/one.st"
check "and they are not the dropout runs' weights" bash -c "! cmp -s '$tmp/dp2b.st' '$tmp/dp2.st'"

run dp4 "$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" data.batch_size=4 parallel.mode=dp \
    parallel.replicas=4
run ddp4 "$ddpc" run --nproc-per-node 4 -- "$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" \
    data.batch_size=4
check "4 replicas x 4 = 4 DDP ranks x 4 (1e-5)" close "$tmp/dp4.st" "$tmp/ddp4.st"

run dflt "$ddpc" train "$cfg" "${common[@]}" data.batch_size=8 parallel.mode=dp num_threads=3 \
    optim.lr_scale=linear
check "parallel.replicas defaults to the kernel threads" grep -q "x 3 replicas" "$tmp/dflt.log"
run thr "$ddpc" train "$cfg" "${common[@]}" data.batch_size=8 parallel.mode=dp num_threads=4 \
    parallel.replicas=2
check "4 threads over 2 replicas: 2 kernel threads each" grep -q \
    "x 2 replicas (parallel.mode dp: one process, 2 kernel threads each)" "$tmp/thr.log"
check "the memory plan counts every replica's parameters and gradients" grep -q \
    "memory plan of the process (zero.stage 0, 2 DataParallel replicas): parameters 202 KiB, gradients 202 KiB, optimizer state 202 KiB" \
    "$tmp/thr.log"
check "optim.lr_scale counts the replicas" grep -q "backend shm, lr x 3)" "$tmp/dflt.log"
check "evaluation covers every test sample once" grep -q '"split": "test", .*"eval_samples": 161' \
    "$tmp/dflt/metrics.jsonl"

# seq2seq: pairs are padded to their batch's longest row; each replica cuts its rows to their own
# longest, as the rank taking them gets them, so dropout masks and sums match DDP's bit for bit.
"$py" -c '
import random, sys
r = random.Random(5)
w = lambda: "".join(r.choice("abcdefghij") for _ in range(r.randint(1, 12)))
for split, n in (("train", 256), ("valid", 32), ("test", 32)):
    pairs = [(w(), w()) for _ in range(n)]
    for side, k in (("src", 0), ("tgt", 1)):
        open(f"{sys.argv[1]}/{split}.{side}", "w").write("".join(p[k] + "\n" for p in pairs))
' "$tmp"
s2s=("$src/configs/translate_demo.yaml" max_steps=4 optim.warmup_steps=0 eval_every=0 eval_batches=1
     test_batches=1 log_every=2 model.d_model=32 model.d_ff=64 model.num_encoder_layers=1
     model.num_decoder_layers=1 data.batch_size=8 num_threads=1)
for f in train valid test; do s2s+=("data.${f}_src=$tmp/$f.src" "data.${f}_tgt=$tmp/$f.tgt"); done
run s2s_dp "$ddpc" train "${s2s[@]}" parallel.mode=dp parallel.replicas=2
run s2s_ddp "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${s2s[@]}"
check "seq2seq: 2 replicas = 2 DDP ranks bit for bit (dropout, padding)" cmp "$tmp/s2s_dp.st" \
    "$tmp/s2s_ddp.st"

# BatchNorm: each replica normalises its own rows and replica 0's running statistics are kept,
# as DDP keeps rank 0's (ddp.broadcast_buffers); the weights file holds them.
bn=("$src/configs/fmnist_cnn_bn.yaml" data.type=synthetic_images data.size=256 max_steps=3
    eval_batches=1 test_batches=1 log_every=3 'model.channels=[4, 8]' 'model.hidden=[16]'
    model.sync_batchnorm=false data.batch_size=8 num_threads=1)
run bn_dp "$ddpc" train "${bn[@]}" parallel.mode=dp parallel.replicas=2
run bn_ddp "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${bn[@]}"
check "BatchNorm: 2 replicas = 2 DDP ranks, running statistics included (1e-5)" \
    close "$tmp/bn_dp.st" "$tmp/bn_ddp.st"
"$ddpc" train "${bn[@]}" model.sync_batchnorm=true parallel.mode=dp run_dir="$tmp/sbn" \
    >"$tmp/sbn.log" 2>&1
check "model.sync_batchnorm with dp is refused" grep -q \
    "model.sync_batchnorm synchronises batch statistics across DDP ranks; parallel.mode: dp has none" \
    "$tmp/sbn.log"

# Resume: killed in step 6 after the checkpoint of step 4, the same command again finishes with
# the uninterrupted run's bytes.
ck=("$ddpc" train "$cfg" "${common[@]}" "${drop[@]}" data.batch_size=8 parallel.mode=dp
    parallel.replicas=2 checkpoint.every_steps=4)
# (in a subshell, whose "Killed" notice goes nowhere)
("${ck[@]}" fault.kill_at_step=6 run_dir="$tmp/res" weights_out="$tmp/res.st" >"$tmp/res.log" 2>&1
 exit $?) 2>/dev/null
check "the dp run is killed in step 6" test $? -eq 137
check "it left the checkpoint of step 4" test -d "$tmp/res/checkpoints/step-00000004"
"${ck[@]}" fault.kill_at_step=6 run_dir="$tmp/res" weights_out="$tmp/res.st" >>"$tmp/res.log" 2>&1
check "the rerun finishes" test $? -eq 0
check "the rerun resumes from step 4" grep -q "resuming from .*step-00000004: step 4" "$tmp/res.log"
run ckref "${ck[@]}"
check "resumed dp weights are byte-identical to the uninterrupted run's" cmp "$tmp/res.st" "$tmp/ckref.st"

# Refusals: one line naming the problem, non-zero exit.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$cfg" "${common[@]}" data.batch_size=8 \
    parallel.mode=dp run_dir="$tmp/refused" >"$tmp/refused.log" 2>&1
check "dp under a launcher exits non-zero" test $? -ne 0
check "and says dp is one process" grep -q \
    "parallel.mode: dp runs its replicas as threads of one process, but this is rank [01] of 2 started by a launcher (torchrun variables)" \
    "$tmp/refused.log"
"$ddpc" train "$cfg" "${common[@]}" parallel.mode=dp zero.stage=1 run_dir="$tmp/z" >"$tmp/z.log" 2>&1
check "dp with zero.stage is refused" grep -q "zero.stage 1 shards across processes; parallel.mode: dp is one process" "$tmp/z.log"
"$ddpc" train "$cfg" "${common[@]}" parallel.replicas=2 run_dir="$tmp/r" >"$tmp/r.log" 2>&1
check "parallel.replicas without dp is refused" grep -q "parallel.replicas is for parallel.mode: dp" "$tmp/r.log"
"$ddpc" plan "$cfg" "${common[@]}" parallel.mode=dp parallel.replicas=3 >"$tmp/plan.log" 2>&1
check "ddpc plan counts the replicas" grep -q \
    "memory plan of the process with 3 DataParallel replicas (25824 parameters" "$tmp/plan.log"
check "ddpc plan names dp's batch per replica and per step" grep -q \
    "batch 128 per replica (384 per step)" "$tmp/plan.log"
check "ddpc plan's limit and stage note are the process's" bash -c \
    "grep -q '^(one process: every zero.stage runs as stage 0)' '$tmp/plan.log' && grep -q '^limit: .* per process: ' '$tmp/plan.log'"
"$ddpc" plan "$cfg" "${common[@]}" --nproc 2 parallel.mode=dp >"$tmp/plan2.log" 2>&1
check "ddpc plan --nproc 2 with dp is refused" grep -q \
    "ddpc plan --nproc 2 plans 2 DDP ranks, but parallel.mode is dp (one process)" "$tmp/plan2.log"
"$ddpc" train "$cfg" "${common[@]}" parallel.mode=dq run_dir="$tmp/m" >"$tmp/m.log" 2>&1
check "an unknown parallel.mode is refused" grep -q "parallel.mode" "$tmp/m.log"
"$ddpc" train "$cfg" "${common[@]}" parallel.mode=dp parallel.replicas=65 run_dir="$tmp/p65" >"$tmp/p65.log" 2>&1
check "more than 64 replicas are refused" grep -q \
    "key 'parallel.replicas' must be an integer in \[0, 64\], got '65'" "$tmp/p65.log"
# docs/config.md's defaults: ddp, and parallel.replicas 0 (one per kernel thread under dp).
check "parallel.mode defaults to ddp" grep -q "^  mode: ddp$" "$tmp/one/config.yaml"
check "parallel.replicas defaults to 0" grep -q "^  replicas: 0$" "$tmp/dflt/config.yaml"

summary
