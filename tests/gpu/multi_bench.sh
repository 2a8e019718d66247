#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The DDP step's exposed communication on the GPU, as `ddpc bench step` reports it on CPUs (run by
# tests/gpu/run.sh's multi part on the lent GPU machine; skipped with 77 where no GPU is visible):
# GPT-2 124M's shapes at bf16 (context 1024, batch 4 per rank), one rank, then two ranks sharing
# GPU 0 (gradients staged through pinned host memory over shm, the only multi-rank path one GPU
# allows). Prints each run's JSON and one line per run: median step, tokens/s, and for 2 ranks the
# communication per step and the part of it the step waited for (exposed). A measurement, not a
# claim: a check fails only when a run fails or its record lacks the numbers. Issue 20 item 6.
# usage: multi_bench.sh DDPC_BIN SOURCE_DIR   (WORK: scratch folder)
# On the CPU (tests/cli_multi_ddp.sh): DDPC_CHECK_DEVICE=cpu, DDPC_CHECK_GPT (a smaller GPT).
set -u
. "$(dirname "${BASH_SOURCE[0]}")/check_lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
[ "$dev" = cuda ] && export CUDA_VISIBLE_DEVICES=0
gpt2="n_layer: 12, n_head: 12, n_embd: 768, block_size: 1024, vocab_size: 50257"
gpt_size=${DDPC_CHECK_GPT:-$gpt2}
cat >"$work/gpt.yaml" <<YAML
seed: 1337
model: {type: gpt, $gpt_size, dropout: 0.0}
data: {type: synthetic_tokens, size: 400000, batch_size: 4}
optim: {type: adamw, lr: 0.0006, weight_decay: 0.1}
precision: bf16
YAML
args=("$work/gpt.yaml" device="$dev" bench.steps=6 bench.warmup=2 num_threads=2)

# field FILE KEY: KEY's number in FILE's JSON line.
field() { grep '^{' "$1" | sed -n "s/.*\"$2\": \([-0-9.e]*\).*/\1/p"; }

# bench NAME RANKS: one `ddpc bench step` run (under ddpc run when RANKS > 1), its JSON kept.
bench() {
    local name=$1 ranks=$2 rc
    if [ "$ranks" -gt 1 ]; then
        timeout 300 "$ddpc" run --nproc-per-node "$ranks" -- "$ddpc" bench step "${args[@]}" \
            >"$work/$name.json" 2>"$work/$name.err"
    else
        timeout 300 "$ddpc" bench step "${args[@]}" >"$work/$name.json" 2>"$work/$name.err"
    fi
    rc=$?
    grep '^{' "$work/$name.json"
    local step tok comm exposed
    step=$(field "$work/$name.json" median_step_ms)
    tok=$(field "$work/$name.json" global_tokens_per_s)
    comm=$(field "$work/$name.json" comm_mean_ms)
    exposed=$(field "$work/$name.json" exposed_comm_mean_ms)
    if [ $rc -ne 0 ] || [ -z "$step" ] || [ -z "$tok" ] || [ -z "$comm" ] || [ -z "$exposed" ]; then
        echo "FAIL bench step, $name (exit $rc):"
        tail -n 5 "$work/$name.err" | sed 's/^/    /'
        fails=$((fails + 1))
        return
    fi
    echo "PASS bench step, $name: median step $step ms, $tok tokens/s; communication" \
        "$comm ms per step, exposed $exposed ms"
}
bench "1 rank" 1
two="2 ranks"
[ "$dev" = cuda ] && two="2 ranks staged on one GPU"
bench "$two" 2
[ $fails -eq 0 ]
