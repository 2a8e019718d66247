#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/multi_ddp.sh, the GPU session's DDP checks, run here on the CPU (device=cpu, a smaller
# GPT), so that their logic is proved where there is no GPU: 2 ranks x b == 1 rank x 2b for the
# GPT and the CNN with SyncBatchNorm, gradient accumulation == the big batch, bf16 buckets near
# f32, a killed rank's job resumed bitwise, a hung rank named and a killed one stopping the job;
# then tests/gpu/multi_bench.sh (bench step on 1 and 2 ranks).
# The time limits are generous here: a guard against hanging on a loaded machine, not a claim.
# usage: cli_multi_ddp.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1

small_gpt="n_layer: 2, n_head: 2, n_embd: 32, block_size: 16"
WORK="$tmp/work" DDPC_GPU_PYTHON=/usr/bin/python3 DDPC_CHECK_DEVICE=cpu \
    DDPC_CHECK_GPT="$small_gpt" DDPC_CHECK_HANG_S=60 DDPC_CHECK_KILL_S=60 bash "$src/tests/gpu/multi_ddp.sh" "$ddpc" "$src" \
    >"$tmp/multi.log" 2>&1
rc=$?
cat "$tmp/multi.log"
check_status "multi_ddp.sh passes on the CPU" $rc
# Each of its checks ran and passed (a check that silently went missing fails here).
for want in "gpt: 2 ranks x 8 == 1 rank x 16" "cnn SyncBatchNorm: 2 ranks x 32 == 1 rank x 64" \
    "gpt: 2 ranks x 2 micro-batches of 4 == 1 rank x 16" "gpt: bf16 gradient buckets" \
    "gpt: a killed rank's job resumes to the uninterrupted weights, bitwise" \
    "a hung rank is named (rank 1 never arrived)" "a killed rank stops the job"; do
    check "PASS $want" grep -qF "PASS $want" "$tmp/multi.log"
done

# tests/gpu/multi_bench.sh too (the DDP step's exposed communication): both runs report.
WORK="$tmp/bench" DDPC_CHECK_DEVICE=cpu DDPC_CHECK_GPT="$small_gpt, vocab_size: 300" \
    bash "$src/tests/gpu/multi_bench.sh" "$ddpc" "$src" >"$tmp/bench.log" 2>&1
check_status "multi_bench.sh passes on the CPU" $? "$tmp/bench.log"
check "multi_bench.sh: 1 rank and 2 ranks, communication reported" \
    grep -q "PASS bench step, 2 ranks: .*communication [0-9.]* ms per step, exposed" "$tmp/bench.log"
summary
