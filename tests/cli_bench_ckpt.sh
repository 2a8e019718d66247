#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/ckpt_bench.sh end to end on a few steps: it prints the CPU, one table row per round with
# the saving share, the ddpc save times, PyTorch's torch.save of the same tensors and the ratio.
# No time is asserted, only that every figure is there and consistent.
# usage: cli_bench_ckpt.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
STEPS=4 EVERY=2 REPEAT=1 "$src/bench/ckpt_bench.sh" "$ddpc" >"$tmp/out" 2>&1
check "ckpt_bench.sh exits 0" test $? -eq 0
check "it names the CPU" grep -q '^cpu: ' "$tmp/out"
check "one round row with two saves and a share" grep -qE '^\| 1 \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 2 \| [0-9.]+% \| [-+][0-9.]+% \|$' "$tmp/out"
check "ddpc's save times" grep -qE '^ddpc saves: .*median [0-9.]+ s for [0-9]+ bytes' "$tmp/out"
check "PyTorch's torch.save of the same tensors" grep -q '"torch_save_median_s": ' "$tmp/out"
check "the ratio" grep -qE '^ddpc save / torch.save: [0-9.]+$' "$tmp/out"
[ $failed -eq 0 ] || cat "$tmp/out"
summary
