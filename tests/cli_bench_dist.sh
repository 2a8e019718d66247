#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ddpc bench step` under `ddpc run`: data-parallel steps go through the reducer (buckets and
# communication reported, following ddp.bucket_cap_mb), only rank 0 prints, global throughput is
# world x per-rank; one process reports world 1 and no communication. Then bench/ddp_bench.sh's
# refusal without PyTorch, bench/ddp_table.py's arithmetic on fixed inputs and
# bench/ddp_measure.py's bookkeeping. Asserts no timing.
# usage: cli_bench_dist.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
# field FILE KEY: KEY's number in the JSON line of FILE.
field() { grep '^{' "$1" | sed -n "s/.*\"$2\": \([-0-9.e]*\).*/\1/p"; }
# expr_true EXPRESSION: awk's verdict on a numeric comparison.
expr_true() { awk "BEGIN { exit !($1) }"; }
cfg=("$src/bench/configs/mlp.yaml" num_threads=1 bench.steps=4 bench.warmup=1 data.size=1024)

"$ddpc" bench step "${cfg[@]}" >"$tmp/one.json" 2>"$tmp/one.err"
check "1 process benches" test $? -eq 0
check "1 process: world 1, no buckets, no communication" \
    expr_true "$(field "$tmp/one.json" world) == 1 && $(field "$tmp/one.json" buckets) == 0 && \
               $(field "$tmp/one.json" comm_mean_ms) == 0 && $(field "$tmp/one.json" exposed_comm_fraction) == 0"
check "1 process: global = per-rank throughput" \
    expr_true "$(field "$tmp/one.json" global_samples_per_s) == $(field "$tmp/one.json" samples_per_s)"
check "1 process on the CPU: host phases, no device-time phases (gpu_phases_ms null)" \
    grep -qE '"forward_ms": [0-9.]*[1-9].*"gpu_phases_ms": null}$' "$tmp/one.json"

"$ddpc" run --nproc-per-node 2 -- "$ddpc" bench step "${cfg[@]}" >"$tmp/two.json" 2>"$tmp/two.err"
check "2 ranks bench" test $? -eq 0
check "2 ranks: one JSON line (rank 0 only)" test "$(grep -c '^{' "$tmp/two.json")" -eq 1
two() { field "$tmp/two.json" "$1"; }
check "2 ranks: world 2, per-rank batch 128" expr_true "$(two world) == 2 && $(two batch) == 128"
check "2 ranks: global samples/s = 2 x per rank ($(two global_samples_per_s) vs $(two samples_per_s))" \
    expr_true "$(two global_samples_per_s) - 2 * $(two samples_per_s) <= 0.2 && \
               2 * $(two samples_per_s) - $(two global_samples_per_s) <= 0.2"
check "2 ranks: step time matches per-rank throughput" \
    expr_true "(128 / ($(two median_step_ms) / 1000)) / $(two samples_per_s) > 0.99 && \
               (128 / ($(two median_step_ms) / 1000)) / $(two samples_per_s) < 1.01"
check "2 ranks: the reducer's buckets communicated ($(two buckets) buckets, $(two comm_mean_ms) ms)" \
    expr_true "$(two buckets) >= 2 && $(two comm_mean_ms) > 0 && $(two comm_ms) > 0"
check "2 ranks: exposed communication measured ($(two exposed_comm_mean_ms) ms)" \
    expr_true "$(two exposed_comm_mean_ms) > 0 && $(two exposed_comm_ms) > 0"
# Weights 784x1024 (3.1 MiB) and 1024x1024 (4 MiB) are whole tensors a bucket cannot split: with
# 1 MiB buckets each of them closes a bucket of its own, more than the default's 2 buckets.
"$ddpc" run --nproc-per-node 2 -- "$ddpc" bench step "${cfg[@]}" ddp.bucket_cap_mb=1 \
    >"$tmp/small.json" 2>"$tmp/small.err"
check "ddp.bucket_cap_mb=1 makes more buckets ($(field "$tmp/small.json" buckets))" \
    expr_true "$(field "$tmp/small.json" buckets) > $(two buckets) && $(field "$tmp/small.json" buckets) >= 3"

# The comparison script refuses to run without PyTorch, saying so.
PYTHON=/bin/false bash "$src/bench/ddp_bench.sh" "$ddpc" >"$tmp/nopy.out" 2>"$tmp/nopy.err"
check "ddp_bench.sh exits 2 without PyTorch" test $? -eq 2
check "ddp_bench.sh says PyTorch is missing" grep -q "PyTorch is missing" "$tmp/nopy.err"

# The table's arithmetic, on fixed inputs: GPT ddpc 1000 -> 1900 tok/s (95%), torch 600 -> 1000
# (83.3%), ratio 1.90; exposed 2 of 8 ms (25%); sgemm 700 ms per 2-rank ddpc step against
# PyTorch's 1400 ms step: ceiling 2.00x.
d=$tmp/table
mkdir -p "$d"
printf '%s\n%s\n' '{"global_tokens_per_s": 100.0, "median_step_ms": 9999, "other_cpu": 0.5}' \
    '{"global_tokens_per_s": 1000.0, "median_step_ms": 1024, "other_cpu": 0.01}' >"$d/ddpc_gpt_1.jsonl"
echo '{"global_tokens_per_s": 1900.0, "median_step_ms": 1078, "exposed_comm_mean_ms": 2.0, "comm_mean_ms": 8.0, "gemm_ms": 700.0, "gemm_small_ms": 50.0}' >"$d/ddpc_gpt_2.jsonl"
echo '{"global_tokens_per_s": 600.0, "median_step_ms": 1700}' >"$d/torch_gpt_1.jsonl"
printf '%s\n%s\n%s\n' '{"global_tokens_per_s": 900.0, "exposed_comm_mean_ms": 9.0, "allreduce_ms": 30.0}' \
    '{"global_tokens_per_s": 1000.0, "median_step_ms": 1400, "exposed_comm_mean_ms": 10.0, "allreduce_ms": 40.0}' \
    '{"global_tokens_per_s": 1100.0, "exposed_comm_mean_ms": 11.0, "allreduce_ms": 50.0}' >"$d/torch_gpt_2.jsonl"
/usr/bin/python3 "$src/bench/ddp_table.py" "$d" gpt >"$tmp/table.md" 2>&1
check "ddp_table.py runs" test $? -eq 0
check "table: 2-rank row (ratio, both efficiencies, both comm cells)" grep -qF \
    "| gpt | 2 | 1900.0 | 1000.0 | 1.90 | 1078.0 | 1400.0 | 700.0 (50.0) | n/a | 95.0% | 83.3% | 2.0 / 8.0 ms (25%) | 10.0 / 40.0 ms (25%) |" \
    "$tmp/table.md"
check "table: both targets judged" \
    grep -qE "weak scaling 1 -> 2 ranks: 95.0% \(target >= 90%: met\)" "$tmp/table.md"
check "table: ratio target judged" grep -qF "1.90x (target >= 1.5x: met)" "$tmp/table.md"
check "table: the sgemm ceiling is PyTorch's 2-rank step over ddpc's sgemm time" \
    grep -qF "(700.0 ms) = 2.00x" "$tmp/table.md"
check "table: a disturbed run is left out and said so" \
    grep -qF "ddpc gpt 1 rank(s): 1 of 2 runs left out" "$tmp/table.md"

# ddp_measure.py: appends the command's JSON line with other_cpu; a failing command fails.
/usr/bin/python3 "$src/bench/ddp_measure.py" "$tmp/m.jsonl" -- \
    sh -c 'echo "[default0]:{\"x\": 1}"' 2>/dev/null
check "ddp_measure.py records the JSON line and other_cpu" \
    grep -qE '^\{"x": 1, "other_cpu": [0-9.]+\}$' "$tmp/m.jsonl"
/usr/bin/python3 "$src/bench/ddp_measure.py" "$tmp/m.jsonl" -- sh -c 'echo oops; exit 3' 2>"$tmp/m.err"
check "ddp_measure.py passes a failure on, with its output" \
    test $? -eq 3 -a "$(wc -l <"$tmp/m.jsonl")" -eq 1 -a "$(cat "$tmp/m.err")" = oops

# ddp_measure.py --gemm-timer: bench/gemm_timer.c preloaded into every rank counts its sgemm calls.
# The MLP makes 8 per step (3 forward, 3 weight gradients, 2 input gradients: the first layer's
# input needs none).
if cc -O2 -shared -fPIC "$src/bench/gemm_timer.c" -o "$tmp/gemm_timer.so" -ldl 2>"$tmp/cc.err"; then
    /usr/bin/python3 "$src/bench/ddp_measure.py" "$tmp/g.jsonl" --gemm-timer "$tmp/gemm_timer.so" \
        --steps 5 -- "$ddpc" run --nproc-per-node 2 -- "$ddpc" bench step "${cfg[@]}" 2>"$tmp/g.err"
    check "gemm timer: both ranks counted, 8 sgemm calls per step, time > 0" \
        expr_true "$(field "$tmp/g.jsonl" gemm_procs) == 2 && $(field "$tmp/g.jsonl" gemm_calls) == 8 && \
                   $(field "$tmp/g.jsonl" gemm_ms) > 0"
else
    fail "gemm_timer.c compiles" "$tmp/cc.err"
fi

if [ $failed -ne 0 ]; then tail -n 5 "$tmp"/*.err "$tmp"/*.json "$tmp/table.md"; fi
summary
