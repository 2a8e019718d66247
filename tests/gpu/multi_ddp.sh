#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# DDP on GPU buffers through `ddpc run` (run by tests/gpu/run.sh's multi part on the lent GPU
# machine; skipped with 77 where no GPU is visible). Two ranks share GPU 0, so their gradients are
# staged through pinned host memory over shm (NCCL refuses two ranks on one GPU). Issue 20:
#   - 2 ranks x batch b == 1 rank x 2b within 1e-5 relative after 20 steps (final weights and the
#     last loss), for the GPT (4 layers, 256 wide) and the CNN with SyncBatchNorm (its batch sums
#     are GPU memory, all-reduced on the GPUs' group: unsynced sums would miss 1e-5, sums handed
#     to the host group would fail the run);
#   - gradient accumulation (2 ranks x 2 micro-batches of b/2) == the big batch, within 1e-5;
#   - bf16 gradient compression trains within 1e-2 of f32;
#   - a rank killed (SIGKILL, fault.kill_at_step) after a committed checkpoint, and the job rerun:
#     final weights bitwise those of the uninterrupted 2-rank run, wherever the kill landed;
#   - a hung rank (SIGSTOP) is named within the collective timeout (5 s) + 5 s;
#   - a killed rank (kill -9 from outside) stops the job within 10 s.
# usage: multi_ddp.sh DDPC_BIN SOURCE_DIR   (WORK: scratch folder)
# The same checks on the CPU, proving the script's logic without a GPU (tests/cli_multi_ddp.sh):
# DDPC_CHECK_DEVICE=cpu, DDPC_CHECK_GPT (a smaller GPT) and DDPC_CHECK_HANG_S and
# DDPC_CHECK_KILL_S (the two limits: there a guard against hanging, not a timing claim).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
N=${DDPC_CHECK_STEPS:-20}
T=5                                       # dist.timeout_s of the fault runs
hang_limit=${DDPC_CHECK_HANG_S:-$((T + 5))} # seconds from SIGSTOP to the job's exit
kill_limit=${DDPC_CHECK_KILL_S:-10}         # seconds from SIGKILL to the job's exit
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
# Both ranks on GPU 0 even where there are several GPUs: the staged path, the same everywhere.
[ "$dev" = cuda ] && export CUDA_VISIBLE_DEVICES=0

# Constant learning rate, dropout and augmentation off: the 2-rank run sees the same global
# batches as the 1-rank run (rank r takes rows r*b.. of each), so only summation order differs.
common=(max_steps=$N log_every=1 eval_every=0 eval_batches=1 test_batches=1 num_threads=2
        data.num_workers=0 optim.grad_clip=1.0 device=$dev log.tensorboard=false)
gpt_size=${DDPC_CHECK_GPT:-"n_layer: 4, n_head: 4, n_embd: 256, block_size: 128"}
cat >"$work/gpt.yaml" <<YAML
seed: 1337
model: {type: gpt, $gpt_size, dropout: 0.0}
data: {type: synthetic_tokens, size: 65536, batch_size: 8}
optim: {type: adamw, lr: 0.0002, weight_decay: 0.1, beta2: 0.99}
YAML
gpt=("$work/gpt.yaml" "${common[@]}")
cnn=("$src/configs/fmnist_cnn_bn.yaml" data.type=synthetic_images data.size=2048 data.batch_size=32
     model.dropout=0 data.hflip=false data.random_shift=0 optim.type=sgd optim.lr=0.005
     optim.momentum=0.9 optim.weight_decay=0 optim.schedule=constant "${common[@]}")

# run NAME RANKS ARGS...: `ddpc train ARGS` on RANKS ranks (through ddpc run when > 1) into
# $work/NAME, weights to NAME.st, log beside it; returns the job's status.
run() {
    local name=$1 ranks=$2
    shift 2
    rm -rf "$work/$name"
    local cmd=("$ddpc" train "$@" run_dir="$work/$name" weights_out="$work/$name.st")
    if [ "$ranks" -gt 1 ]; then
        timeout 300 "$ddpc" run --nproc-per-node "$ranks" -- "${cmd[@]}" >"$work/$name.log" 2>&1
    else
        timeout 300 "${cmd[@]}" >"$work/$name.log" 2>&1
    fi
    local rc=$?
    [ $rc -eq 0 ] || { echo "  $name exited $rc:"; tail -n 5 "$work/$name.log" | sed 's/^/    /'; }
    return $rc
}

# close A B TOL: the weights of A.st and B.st (relative norm of the difference, every tensor
# together) and the last logged loss within TOL of each other; prints both numbers.
close() {
    "$py" - "$work/$1" "$work/$2" "$3" <<'EOF'
import json, struct, sys
import numpy as np
def weights(p):
    raw = open(p + ".st", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    head = json.loads(raw[8:8 + n])
    body = raw[8 + n:]
    out = []
    for k in sorted(head):
        if k == "__metadata__":
            continue
        a, b = head[k]["data_offsets"]
        out.append(np.frombuffer(body[a:b], dtype=np.float32).astype(np.float64))
    return np.concatenate(out)
def last_loss(p):
    loss = None
    for line in open(p + "/metrics.jsonl"):
        try:
            r = json.loads(line)
        except ValueError:
            continue
        if "loss" in r and "epoch" in r and "event" not in r:
            loss = (r["step"], r["loss"])
    return loss
a, b, tol = sys.argv[1], sys.argv[2], float(sys.argv[3])
wa, wb = weights(a), weights(b)
la, lb = last_loss(a), last_loss(b)
dw = 1.0
if wa.shape == wb.shape:
    dw = float(np.linalg.norm(wa - wb) / max(np.linalg.norm(wb), 1e-30))
dl = abs(la[1] - lb[1]) / max(abs(lb[1]), 1e-12) if la and lb and la[0] == lb[0] else 1.0
print("  weights: relative difference %.3g; loss at step %s: %.7f vs %.7f, relative %.3g "
      "(limit %g)" % (dw, la and la[0], la and la[1] or 0, lb and lb[1] or 0, dl, tol))
sys.exit(0 if dw <= tol and dl <= tol else 1)
EOF
}

# rank_pid NAME RANK: the pid of the worker of job NAME with that rank (from its environment).
rank_pid() {
    local p
    for p in $(pgrep -f -- "run_dir=$work/$1"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "RANK=$2" &&
            [ "$(cat "/proc/$p/comm" 2>/dev/null)" = ddpc ]; then
            echo "$p"
            return 0
        fi
    done
    return 1
}

# 1. 2 ranks x b == 1 rank x 2b, the GPT and the CNN with SyncBatchNorm.
if run gpt1 1 "${gpt[@]}" data.batch_size=16 && run gpt2 2 "${gpt[@]}" data.batch_size=8; then
    grep -m3 "^rank [01]/2: \|global batch" "$work/gpt2.log" | cut -c1-200 | sed 's/^/  /'
    if [ "$dev" = cpu ] || grep -q "^rank 1/2: .*GPU.*host staging over" "$work/gpt2.log"; then
        pass "gpt: the start says which rank has which GPU and how gradients travel"
    else
        fail "gpt: no start-up line per rank naming its GPU and the staging"
    fi
    if close gpt2 gpt1 1e-5; then
        pass "gpt: 2 ranks x 8 == 1 rank x 16 within 1e-5 after $N steps"
    else
        fail "gpt: 2 ranks x 8 and 1 rank x 16 differ by more than 1e-5 after $N steps"
    fi
else
    fail "gpt: a 1- or 2-rank run failed"
fi
if run cnn1 1 "${cnn[@]}" data.batch_size=64 &&
    run cnn2 2 "${cnn[@]}" data.batch_size=32 model.sync_batchnorm=true; then
    if close cnn2 cnn1 1e-5; then
        pass "cnn SyncBatchNorm: 2 ranks x 32 == 1 rank x 64 within 1e-5 after $N steps"
    else
        fail "cnn SyncBatchNorm: 2 ranks x 32 and 1 rank x 64 differ by more than 1e-5"
    fi
else
    fail "cnn SyncBatchNorm: a 1- or 2-rank run failed"
fi

# 2. Gradient accumulation == the big batch; bf16 buckets close to f32.
if run gpt_acc 2 "${gpt[@]}" data.batch_size=4 optim.grad_accum_steps=2 && close gpt_acc gpt1 1e-5
then
    pass "gpt: 2 ranks x 2 micro-batches of 4 == 1 rank x 16 within 1e-5"
else
    fail "gpt: gradient accumulation differs from the big batch by more than 1e-5"
fi
if run gpt_bf16 2 "${gpt[@]}" data.batch_size=8 ddp.comm_dtype=bf16 && close gpt_bf16 gpt2 1e-2
then
    pass "gpt: bf16 gradient buckets within 1e-2 of f32"
else
    fail "gpt: bf16 gradient buckets stray from f32 by more than 1e-2"
fi

# 3. Rank 1 killed at step 13 (checkpoints every 5 steps), the job run again: it resumes from the
# last committed checkpoint and ends with the uninterrupted run's weights, byte for byte.
ck=(data.batch_size=8 checkpoint.every_steps=5 checkpoint.keep=2)
if run gpt_ref 2 "${gpt[@]}" "${ck[@]}"; then
    run gpt_kill 2 "${gpt[@]}" "${ck[@]}" fault.kill_at_step=13 fault.kill_rank=1
    rc=$?
    latest=$(cat "$work/gpt_kill/checkpoints/latest" 2>/dev/null)
    echo "  killed run: exit $rc, latest checkpoint ${latest:-none}"
    mv "$work/gpt_kill.log" "$work/gpt_kill.1.log"
    rm -f "$work/gpt_kill.st"
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${gpt[@]}" "${ck[@]}" fault.kill_at_step=13 \
        fault.kill_rank=1 run_dir="$work/gpt_kill" weights_out="$work/gpt_kill.st" \
        >"$work/gpt_kill.log" 2>&1
    rc2=$?
    grep -m1 "resuming from" "$work/gpt_kill.log" | sed 's/^/  /'
    if [ $rc -ne 0 ] && [ $rc2 -eq 0 ] && grep -q "resuming from" "$work/gpt_kill.log" &&
        cmp -s "$work/gpt_kill.st" "$work/gpt_ref.st"; then
        pass "gpt: a killed rank's job resumes to the uninterrupted weights, bitwise"
    else
        fail "gpt: kill and resume (exits $rc, $rc2) differs from the uninterrupted 2-rank run"
    fi
else
    fail "gpt: the uninterrupted 2-rank run with checkpoints failed"
fi

# 4. A hung rank is named within the collective timeout + 5 s; a killed one stops the job within
# 10 s. Both on a long run, once it has logged step 2.
long=("${gpt[@]}" data.batch_size=8 max_steps=100000 dist.timeout_s=$T)
# fault NAME SIGNAL: starts the long job, sends SIGNAL to rank 1 after step 2, and sets
# $secs (signal to the job's exit) and $rc; $sent says whether rank 1 was found.
fault() {
    local name=$1 sig=$2 pid p t0
    rm -rf "$work/$name"
    timeout 120 "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${long[@]}" run_dir="$work/$name" \
        >"$work/$name.log" 2>&1 &
    pid=$!
    for _ in $(seq 1200); do
        grep -q '"step": 2,' "$work/$name/metrics.jsonl" 2>/dev/null && break
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    sent=no
    t0=$(date +%s.%N)
    if p=$(rank_pid "$name" 1); then
        kill "-$sig" "$p" && sent=yes
    fi
    wait $pid
    rc=$?
    secs=$(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
    [ "$sig" = STOP ] && [ -n "${p:-}" ] && kill -CONT "$p" 2>/dev/null
    echo "  $name: rank 1 sent SIG$sig: $sent; the job exited $rc after ${secs} s"
    grep -m2 "never arrived\|rank 1\b" "$work/$name.log" | cut -c1-220 | sed 's/^/    /'
}
within() { awk -v a="$1" -v b="$2" 'BEGIN { exit !(a <= b) }'; }
fault hang STOP
if [ $sent = yes ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && grep -q "rank 1 never arrived" \
    "$work/hang.log" && within "$secs" "$hang_limit"; then
    pass "a hung rank is named (rank 1 never arrived) within $hang_limit s (timeout $T s)"
else
    fail "a hung rank was not named within $hang_limit s (sent $sent, exit $rc, $secs s)"
fi
fault dead KILL
if [ $sent = yes ] && [ $rc -ne 0 ] && [ $rc -ne 124 ] && within "$secs" "$kill_limit"; then
    pass "a killed rank stops the job within $kill_limit s"
else
    fail "a killed rank did not stop the job within $kill_limit s (sent $sent, exit $rc, $secs s)"
fi

echo "multi_ddp: $fails failed"
[ $fails -eq 0 ]
