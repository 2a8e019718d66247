#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/dp_vs_ddp.sh end to end on 2 steps of the MLP at 1 and 2 replicas: it prints the CPU line,
# every cell of the throughput and breakdown tables (no "n/a"), and `ddpc bench step` under
# parallel.mode dp reports its replicas and the parts of its step.
# usage: cli_bench_dp.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

MODELS=mlp REPLICAS="1 2" STEPS=2 WARMUP=1 REPEAT=1 bash "$src/bench/dp_vs_ddp.sh" "$ddpc" \
    >"$tmp/table.md" 2>"$tmp/raw.jsonl"
check_status "the script succeeds" $? "$tmp/raw.jsonl"
check "it names the CPU" grep -q "^CPU: .*cores; kernels: " "$tmp/table.md"
check "a throughput row per replica count" test "$(grep -cE '^\| (1|2) \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| [0-9.]+x \| [0-9.]+x \|' "$tmp/table.md")" -eq 2
check "dp and ddp breakdown rows at both counts" test "$(grep -cE '^\| (1|2) \| (dp|ddp) \| [0-9.]+ \|' "$tmp/table.md")" -eq 4
check "no missing figure" bash -c "! grep -q 'n/a' '$tmp/table.md'"
check "dp's breakdown at 2 replicas has every part" grep -qE '^\| 2 \| dp( \| [0-9.-]+){9} \|$' "$tmp/table.md"

OMP_NUM_THREADS=1 "$ddpc" bench step "$src/bench/configs/mlp.yaml" parallel.mode=dp \
    parallel.replicas=2 bench.steps=2 bench.warmup=1 >"$tmp/step.json" 2>&1
check "bench step: dp's batch is every replica's" grep -q '"batch": 256, .*"replicas": 2' "$tmp/step.json"
check "bench step: dp's parts are timed" grep -qE '"replicate_ms": [0-9.]+, "scatter_ms": [0-9.]+, "replica_wait_ms": [0-9.]+, "reduce_ms": [0-9.]*[1-9]' "$tmp/step.json"
summary
