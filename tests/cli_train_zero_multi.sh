#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/multi_zero.sh (ZeRO on the GPU: stages 1-3 == stage 0 within 1e-5, a 2-rank ZeRO-2
# checkpoint resumed on 1 CPU rank within 1e-5, kill-and-resume at ZeRO-2 bitwise) run here on the
# CPU with a small GPT, so the script's logic and the CPU versions of its checks are proved where
# no GPU is: every check must PASS, none FAIL, and the script must exit 0.
# usage: cli_train_zero_multi.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
DDPC_CHECK_DEVICE=cpu DDPC_GPU_PYTHON=/usr/bin/python3 WORK="$tmp/work" \
    DDPC_CHECK_ARGS="model.n_layer=2 model.n_embd=64 model.block_size=32 num_threads=1" \
    bash "$src/tests/gpu/multi_zero.sh" "$ddpc" "$src" >"$tmp/multi.log" 2>&1
check_status "multi_zero.sh on the CPU exits 0" $? "$tmp/multi.log"
check "its six checks pass" test "$(grep -c '^PASS ' "$tmp/multi.log")" -eq 6
check "none fails" test "$(grep -c '^FAIL ' "$tmp/multi.log")" -eq 0
check "stage 3 among them" grep -q "^PASS zero stage 3 on 2 ranks (cpu)" "$tmp/multi.log"
check "the resume on 1 CPU rank among them" \
    grep -q "^PASS a 2-rank cpu ZeRO-2 checkpoint resumes on 1 CPU rank" "$tmp/multi.log"
check "the kill and resume among them" \
    grep -q "^PASS zero stage 2 on cpu: killed at step 12 (exit [1-9][0-9]*) and resumed" \
    "$tmp/multi.log"
summary
