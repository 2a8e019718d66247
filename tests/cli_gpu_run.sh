#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# tests/gpu/run.sh, the lent GPU machine's script, run here against a fake .gpu/: stand-in
# programs for ddpc, llm.c, the CUDA kernel tests and nvidia-smi print what the real ones print,
# so the parts' order, timeouts, verdicts, log parsing and the table are checked without a GPU.
# PyTorch finds no GPU here, so its row must come out FAILED while the others go on.
# usage: cli_gpu_run.sh DDPC_BIN SOURCE_DIR [CKPT_MAKE]
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
py=/usr/bin/python3
[ -x "$py" ] || py=python3

fake=$tmp/gpu
mkdir -p "$fake/bin" "$fake/shards" "$tmp/path" "$tmp/out"
"$py" "$src/tests/lib/token_shards.py" --random "$fake/shards" --tokens 40000 --val-tokens 20000

cat >"$tmp/path/nvidia-smi" <<'EOF'
#!/bin/sh
echo "Fake GPU 80GB, 81559 MiB, 580.00, 9.0"
EOF
# ddpc: train writes metrics.jsonl windows (tokens/s 100k in warm-up, then 159k-161k), their
# time_s the wall clock at those rates (16384 tokens a step), except fake2's, 30% slower than its
# own tokens/s says.
cat >"$fake/bin/ddpc" <<'EOF'
#!/bin/bash
[ "$1" = env ] && { echo "GPUs: Fake GPU"; exit 0; }
# run [options] -- PROGRAM...: the program, once; bench: a one-row table
if [ "$1" = run ]; then
    while [ "$1" != -- ]; do shift; done
    shift
    exec "$@"
fi
if [ "$1" = bench ] && [ "$2" = step ]; then
    echo '{"bench": "step", "median_step_ms": 12.500}'
    exit 0
fi
if [ "$1" = bench ]; then
    echo "# GPU buffers: host staging over shm: 2 ranks on this host share 1 GPU, which NCCL refuses"
    echo "# pinned copies (67108864 B, median of 10): host->GPU 53.10 GB/s, GPU->host 54.20 GB/s (host staging's ceiling)"
    echo "        4096          1024     f32     sum       20.00     0.20     0.20       0"
    exit 0
fi
for a in "$@"; do case $a in run_dir=*) dir=${a#run_dir=} ;; esac; done
mkdir -p "$dir"
# Candidate fake1 strays 0.5% from the default's losses and runs at 200k tok/s, fake2 strays 15%;
# both together give the default's bits and speed.
case ${DDPC_CUDA_CANDIDATES:-} in fake1) loss=10.95 ;; fake2) loss=12.5 ;; *) loss=10.9 ;; esac
rates="100000 150000 160000 161000 159000 160000"
[ "${DDPC_CUDA_CANDIDATES:-}" = fake1 ] && rates="100000 190000 200000 200000 201000 199000"
step=5 t=0
slow=1
[ "${DDPC_CUDA_CANDIDATES:-}" = fake2 ] && slow=1.3
for r in $rates; do
    t=$(awk -v t="$t" -v r="$r" -v s="$slow" 'BEGIN { printf "%.6f", t + 5 * 16384 * s / r }')
    echo "{\"step\": $step, \"epoch\": 0, \"loss\": $loss, \"tokens_per_s\": $r, \"time_s\": $t," \
        "\"phase\": {\"data_s\": 0.001, \"forward_s\": 0.09, \"other_s\": 0.0114}," \
        "\"gpu_phase\": {\"forward_s\": 0.03, \"backward_s\": 0.06}, \"step_s\": 0.1024}"
    echo "{\"step\": $step, \"rank_step_s\": {\"0\": 0.1}}"
    step=$((step + 5))
done >"$dir/metrics.jsonl"
echo "done in 3.0 s"
EOF
# llm.c: 10 slow steps, then 128 ms steps (one outlier) -> median 128 ms = 128000 tok/s.
cat >"$fake/bin/train_gpt2cu" <<'EOF'
#!/bin/bash
echo "+-----------------------+"
for i in $(seq 1 30); do
    ms=128.00; [ "$i" -le 10 ] && ms=500.00; [ "$i" = 20 ] && ms=900.00
    printf 'step %4d/30 | loss 10.987654 (+0.00z)| norm 1.2345 (+0.00z)| lr 6.00e-04 | ' "$i"
    printf '%s ms | -100.0%% bf16 MFU | 99999 tok/s\n' "$ms"
done
echo "val loss 10.98"
EOF
printf '#!/bin/sh\necho "all close, candidates [$DDPC_CUDA_CANDIDATES]"\n' >"$fake/bin/test_cuda_pass"
printf '#!/bin/sh\necho "  bits out 00ff"\n' >"$fake/bin/test_cuda_same"
printf '#!/bin/sh\necho "  bits out ${DDPC_CUDA_CANDIDATES:-0}"\n' >"$fake/bin/test_cuda_differ"
printf '#!/bin/sh\necho "1 GPU(s) visible"\necho "ok   test_one_rank_nccl"\n' >"$fake/bin/test_cuda_comm"
printf '#!/bin/sh\necho "no GPU: skipped"\nexit 77\n' >"$fake/bin/test_cuda_skip"
printf '#!/bin/sh\necho "gelu: max rel err 3e-2 > 1e-5"\nexit 1\n' >"$fake/bin/test_cuda_fail"
chmod +x "$tmp/path/nvidia-smi" "$fake/bin"/*
# As prepare.sh packs it: the programs in bin.tar.xz (unpacked over bin/ by run.sh).
tar -cJf "$fake/bin.tar.xz" -C "$fake" bin

run() {
    PATH="$tmp/path:$PATH" OUT="$tmp/out" DDPC_GPU_DIR="$fake" DDPC_GPU_PYTHON="$py" \
        bash "$src/tests/gpu/run.sh" "$@"
}
DDPC_GPU_CANDIDATES=fake1,fake2 run --skip train,compile >"$tmp/log" 2>&1
[ $? = 1 ] && ok "run.sh goes on past failures and then exits 1" ||
    fail "run.sh goes on past failures and then exits 1" "$tmp/log"
tail -n 4 "$tmp/log" | head -n 1 | grep -q '^pytorch-eager FAILED' &&
    tail -n 3 "$tmp/log" | head -n 1 | grep -q '^== candidates: promote' &&
    tail -n 1 "$tmp/log" | grep -q '^fake2 ' &&
    grep -q '^| name ' "$tmp/log" && ok "the table comes last, then the candidates' verdicts" ||
    fail "the table comes last, then the candidates' verdicts" "$tmp/log"
grep -q '== GPU: Fake GPU 80GB' "$tmp/log" && ok "the GPU line" || fail "the GPU line" "$tmp/log"
grep -Eq '^test_cuda_pass +PASS' "$tmp/out/checks.txt" &&
    grep -Eq '^test_cuda_skip +SKIPPED' "$tmp/out/checks.txt" &&
    grep -Eq '^test_cuda_fail +FAILED \(exit 1\)' "$tmp/out/checks.txt" &&
    grep -q 'max rel err 3e-2' "$tmp/log" && ok "kernel tests: verdicts and the failure's lines" ||
    fail "kernel tests: verdicts and the failure's lines" "$tmp/out/checks.txt" "$tmp/log"
grep -Eq '^test_cuda_comm +PASS' "$tmp/out/checks.txt" &&
    grep -Eq '^bench_nccl_1rank +PASS' "$tmp/out/checks.txt" &&
    grep -Eq '^bench_staged_2ranks +PASS' "$tmp/out/checks.txt" &&
    [ "$(grep -c '^# GPU buffers: host staging' "$tmp/out/comm.txt")" = 2 ] &&
    [ "$(grep -c '^test_cuda_comm ' "$tmp/out/checks.txt")" = 1 ] &&
    grep -Eq '^pinned_copy_bandwidth +PASS' "$tmp/out/checks.txt" &&
    grep -q 'host->GPU 53.10 GB/s' "$tmp/log" &&
    ok "comm: its test once (not among the kernels), both bench sweeps into comm.txt" ||
    fail "comm: its test once (not among the kernels), both bench sweeps into comm.txt" \
        "$tmp/out/checks.txt" "$tmp/log"
# ddpc 160000 tok/s (102.4 ms), llm.c 128000 (128.0 ms), MFU = 803261952 x tok/s / 989e12.
grep -Eq '^\| ddpc +\| 160,000 +\| 102.4 +\| 13.0% +\| - +\| 1.25 +\|$' "$tmp/log" &&
    ok "ddpc's row: median window after warm-up, MFU, ratio to llm.c" ||
    fail "ddpc's row: median window after warm-up, MFU, ratio to llm.c" "$tmp/log"
grep -Eq '^\| llm.c +\| 128,000 +\| 128.0 +\| 10.4% +\| - +\| 1.00 +\|$' "$tmp/log" &&
    ok "llm.c's row: median step time after warm-up" ||
    fail "llm.c's row: median step time after warm-up" "$tmp/log"
grep -q '^    phases (host clock, ms/step): data 1.0 forward 90.0 other 11.4 | step 102.4$' \
    "$tmp/log" && grep -q '^    gpu_phase (device time, ms/step): forward 30.0 backward 60.0$' \
    "$tmp/log" && ok "ddpc's row: its last window's phases" ||
    fail "ddpc's row: its last window's phases" "$tmp/log"
grep -Eq '^\| pytorch-eager +\| FAILED' "$tmp/log" && ok "a failed peer is a FAILED row" ||
    fail "a failed peer is a FAILED row" "$tmp/log"
tar -tzf "$tmp/out/logs.tar.gz" >"$tmp/tar" 2>&1 && grep -q 'logs/ddpc.log' "$tmp/tar" &&
    grep -q 'logs/llmc.log' "$tmp/tar" && [ -s "$tmp/out/env.txt" ] &&
    [ "$(wc -l <"$tmp/out/results.jsonl")" = 6 ] && ok "logs, env and rows under \$OUT" ||
    fail "logs, env and rows under \$OUT" "$tmp/tar"
[ "$(ls "$tmp/out" | wc -l)" -le 8 ] && ok "at most 8 files under \$OUT" ||
    fail "at most 8 files under \$OUT"
[ ! -e "$tmp/out/models.md" ] && ! grep -q '^models ' "$tmp/out/checks.txt" &&
    ok "models is opt-in: not in a run that does not name it" ||
    fail "models is opt-in: not in a run that does not name it" "$tmp/out/checks.txt"

# candidates: the kernel tests again with DDPC_CUDA_CANDIDATES set, and a second ddpc row. Each
# ddpc row's tokens/s is the wall clock's, and the trainer's own is checked against it.
# fake1 is faster with its losses in bounds, but a kernel test failed with every candidate on.
fake1_verdict='^fake1 +81.9 ms/step vs 102.4 \(x0.800\) +losses: PASS \(within 0.00459\) +'
fake1_verdict+='-> look \(a check with all candidates on failed\)$'
tar -xzOf "$tmp/out/logs.tar.gz" logs/test_cuda_pass.log >"$tmp/plain" 2>&1
tar -xzOf "$tmp/out/logs.tar.gz" logs/test_cuda_pass-cand.log >"$tmp/cand" 2>&1
grep -q 'candidates \[\]' "$tmp/plain" && grep -q 'candidates \[fake1,fake2\]' "$tmp/cand" &&
    grep -Eq '^test_cuda_pass-cand +PASS' "$tmp/out/checks.txt" &&
    grep -Eq '^test_cuda_same bits +same as default' "$tmp/out/checks.txt" &&
    grep -Eq '^test_cuda_differ bits +differ \(in bounds\)' "$tmp/out/checks.txt" &&
    ! grep -q '^test_cuda_pass bits' "$tmp/out/checks.txt" &&
    grep -q '== candidates: fake1,fake2' "$tmp/log" &&
    grep -Eq '^\| ddpc-fake1 +\| 200,000 ' "$tmp/log" &&
    grep -Eq '^\| ddpc-fake2 +\| 123,077 ' "$tmp/log" &&
    grep -Eq '^ddpc tokens/s +PASS \(x1.0 wall\)' "$tmp/out/checks.txt" &&
    grep -Eq '^ddpc-fake2 tokens/s +FAILED \(x1.3 wall\)' "$tmp/out/checks.txt" &&
    grep -Eq '^\| ddpc-cand +\| 160,000 ' "$tmp/log" &&
    grep -Eq '^ddpc-fake1 losses +PASS \(within 0.00459\)' "$tmp/out/checks.txt" &&
    grep -Eq '^ddpc-fake2 losses +FAILED \(0.147 > 2%\)' "$tmp/out/checks.txt" &&
    grep -Eq '^ddpc-cand losses +same bits as ddpc' "$tmp/out/checks.txt" &&
    grep -Eq "$fake1_verdict" "$tmp/log" &&
    grep -Eq '^fake2 .*losses: FAILED \(0.147 > 2%\) +-> delete \(its losses strayed\)$' \
        "$tmp/log" &&
    grep -q '^fake2 .*delete' "$tmp/out/table.md" &&
    ok "candidates: kernel tests with them on, their bits, a ddpc row and losses for each, all" ||
    fail "candidates: kernel tests with them on, their bits, a ddpc row and losses for each, all" \
        "$tmp/plain" "$tmp/cand" \
        "$tmp/log"
rm -rf "$tmp/out"
DDPC_GPU_CANDIDATES= run --only candidates >"$tmp/log6" 2>&1
grep -Eq '^candidates +SKIPPED \(none\)' "$tmp/out/checks.txt" &&
    ok "no candidates: the part says so" || fail "no candidates: the part says so" "$tmp/log6"

# A torch log in the script's own format parses into a row.
cat >"$tmp/torch.log" <<'EOF'
some warning
{"name": "pytorch-eager", "tokens_per_s": 150000.0, "ms_per_step": 109.2, "timed_steps": 20}
EOF
"$py" "$src/tests/gpu/bench_parse.py" torch pytorch-eager "$tmp/torch.log" >"$tmp/row" &&
    grep -q '"status": "ok"' "$tmp/row" && grep -q '"tokens_per_s": 150000.0' "$tmp/row" &&
    ok "bench_parse reads the torch script's JSON line" ||
    fail "bench_parse reads the torch script's JSON line" "$tmp/row"

# The PyTorch peer itself, on the CPU at a tiny size (PyTorch 1.13 here: no SDPA, no compile).
if "$py" -c 'import torch, numpy' 2>/dev/null; then
    OMP_NUM_THREADS=1 "$py" "$src/bench/gpu_gpt2_torch.py" --device cpu --n-layer 1 --n-head 2 \
        --n-embd 16 --block-size 8 --batch 2 --warmup 1 --steps 2 \
        --train "$fake/shards/random_train_*.bin" >"$tmp/torch_cpu" 2>&1
    check_status "gpu_gpt2_torch.py trains 3 steps on the CPU" $? "$tmp/torch_cpu"
    "$py" - "$tmp/torch_cpu" <<'EOF' >"$tmp/torch_check" 2>&1
import json, sys
r = json.loads(open(sys.argv[1]).read().splitlines()[-1])
assert r["name"] == "pytorch-eager" and r["timed_steps"] == 2 and r["batch"] == 2, r
assert r["tokens_per_s"] > 0 and r["ms_per_step"] > 0, r
# 6 N + 6 L C T with N = V C + T C + L (12 C^2 + 13 C) + 2 C at V 50257, T 8, C 16, L 1
C, T, V = 16, 8, 50257
assert r["params"] == V * C + T * C + 12 * C * C + 13 * C + 2 * C, r["params"]
assert r["flops_per_token"] == 6 * r["params"] + 6 * 1 * C * T, r["flops_per_token"]
assert 10.0 < r["loss_first"] < 11.5, r["loss_first"]  # ln(50257) = 10.8 at the start
EOF
    check_status "its JSON line: counts, FLOPs per token, first loss" $? "$tmp/torch_check"
else
    echo "skip gpu_gpt2_torch.py on the CPU: $py has no torch and numpy"
fi

# --only picks parts; the deadline stops parts that cannot finish; a bad part name is refused.
rm -rf "$tmp/out"
run --only llmc --deadline 200 >"$tmp/log2" 2>&1
[ $? = 0 ] && grep -q '^| llm.c ' "$tmp/log2" && ! grep -q 'test_cuda_pass' "$tmp/log2" &&
    ! grep -q '^| ddpc' "$tmp/log2" && ok "--only llmc runs llm.c alone" ||
    fail "--only llmc runs llm.c alone" "$tmp/log2"
run --only kernels --deadline 20 >"$tmp/log3" 2>&1
grep -Eq '^test_cuda_pass +NOT RUN \(deadline\)' "$tmp/log3" && ok "the deadline is kept" ||
    fail "the deadline is kept" "$tmp/log3"
# multi runs every tests/gpu/multi_*.sh of the tree, each with its verdict; the fake ddpc sees no
# GPU, so multi_ddp.sh says so and is SKIPPED (77), and nothing else runs.
rm -rf "$tmp/out"
run --only multi >"$tmp/log5" 2>&1
rc=$?
[ $rc = 0 ] && grep -Eq '^multi_ddp\.sh +SKIPPED' "$tmp/out/checks.txt" &&
    grep -q 'skipped: ddpc env sees no GPU' "$tmp/log5" && ! grep -q 'test_cuda_pass' "$tmp/log5" &&
    ! grep -q '^| ddpc' "$tmp/log5" && ok "--only multi runs each multi_*.sh, with its verdict" ||
    fail "--only multi runs each multi_*.sh, with its verdict (exit $rc)" "$tmp/log5"
# models: ddpc bench step against torch_step.py on each model at fp32, TF32 and bf16; PyTorch
# has no GPU here, so its cells are FAILED and the part too, while ddpc's are parsed.
rm -rf "$tmp/out"
run --only models >"$tmp/log7" 2>&1
rc=$?
cells='^| [a-z0-9]* | [0-9]* | [a-z0-9]* | 12.5 | FAILED |'
[ $rc = 1 ] && [ "$(grep -c "$cells" "$tmp/out/models.md")" = 12 ] &&
    grep -q '^| seq2seq | 256 | bf16 | 12.5 | FAILED |' "$tmp/out/models.md" &&
    grep -q '^| cnn | 512 | tf32 | 12.5 | FAILED |' "$tmp/out/models.md" &&
    grep -Eq '^models +FAILED \(a cell\)' "$tmp/out/checks.txt" &&
    tar -xzOf "$tmp/out/logs.tar.gz" logs/models_mlp_tf32_torch.log 2>/dev/null |
    grep -qiE 'cuda|torch' && ok "--only models: a row per model and mode, ddpc's ms parsed" ||
    fail "--only models: a row per model and mode, ddpc's ms parsed (exit $rc)" "$tmp/log7" \
        "$tmp/out/models.md"
run --only gpus >"$tmp/log4" 2>&1
[ $? = 2 ] && grep -q "unknown part 'gpus'" "$tmp/log4" && ok "an unknown part is refused" ||
    fail "an unknown part is refused" "$tmp/log4"
summary
