#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/train_checks.sh, the GPU session's training checks, dry-run here on the CPU (device=cpu
# for the "GPU" runs too, 40 steps, a smaller GPT), so that a broken script is found here and not
# in a lent GPU's few minutes: every check runs and passes. Then again as run.sh's candidates part
# runs it, reusing the first run's CPU references (DDPC_CHECK_CPU_FROM): the same verdicts, every
# reference copied rather than run, and byte for byte the first run's.
# usage: cli_gpu_train_checks.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

dry() { # WORK [VAR=VALUE...]: one dry run of train_checks.sh into WORK, its output in WORK.out
    local work=$1
    shift
    env WORK="$work" DDPC_GPU_PYTHON=/usr/bin/python3 DDPC_CHECK_DEVICE=cpu DDPC_CHECK_STEPS=40 \
        DDPC_CHECK_THREADS=1 DDPC_CHECK_GPT="n_layer: 2, n_head: 2, n_embd: 64, block_size: 32" \
        "$@" bash "$src/tests/gpu/train_checks.sh" "$ddpc" "$src" >"$work.out" 2>&1
}
dry "$tmp/a"
rc=$?
cat "$tmp/a.out"
check_status "train_checks.sh passes on the CPU" $rc
# Each check of the CPU dry run ran and passed (one that silently went missing fails here).
for want in "gpt fp32: GPU losses within 1e-3" "s2s fp32: GPU losses within 1e-3" \
    "reg fp32: the first 8 steps" "bce fp32: GPU losses within 1e-3" \
    "cnn fp32: GPU losses within 1e-3" "reading the losses every 4th step" \
    "a NaN on the GPU stops the run" "a GPU rerun gives identical losses and weights" \
    "gpt bf16: the loss after 200 steps" "gpt tf32 (matmul_precision high)" \
    "gpt: activation checkpointing on the GPU" "gpt bf16: activation checkpointing" \
    "gpt fp16 (loss scaling)" "kill -9" "a GPU checkpoint resumes on the CPU" \
    "gpt: the phases in device time" "cnn: the phases in device time"; do
    check "PASS ...$want..." bash -c 'grep "^PASS" "$1" | grep -qF -- "$2"' _ "$tmp/a.out" "$want"
done
check "no check failed" bash -c "! grep -q '^FAIL' '$tmp/a.out'"

dry "$tmp/b" DDPC_CHECK_CPU_FROM="$tmp/a"
check_status "train_checks.sh passes again with the first run's CPU references" $?
check "the same verdicts" cmp -s <(grep -E '^(PASS|FAIL)' "$tmp/a.out") \
    <(grep -E '^(PASS|FAIL)' "$tmp/b.out")
refs=$(cd "$tmp/a" && ls -d -- *_cpu *_cpu8 2>/dev/null)
check "the CPU references: 13 runs (6 models, 8 and N steps; the diverging one)" \
    test "$(wc -w <<<"$refs")" = 13
for r in $refs; do
    check "$r: copied, not run" grep -qF "  $r: the CPU run of $tmp/a (exit" "$tmp/b.out"
    check "$r: the first run's metrics" cmp -s "$tmp/a/$r/metrics.jsonl" "$tmp/b/$r/metrics.jsonl"
done
check "no GPU run is copied" bash -c "! grep -E '^  [a-z0-9_]*gpu[a-z0-9_]*: the CPU run of' \
    '$tmp/b.out'"
summary
