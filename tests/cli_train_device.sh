#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `device: cpu|cuda|auto` where the user meets it. Without a GPU (this machine, CI): device=cuda
# exits 1 with one stderr line saying why (no GPU, or a build without CUDA, as `ddpc env` tells)
# and writes nothing into the run directory; device=auto trains on the CPU and says why; cpu says
# nothing more; a misspelt device gets the usual unknown-choice line; parallel.mode dp is refused
# on cuda whatever the machine has, two ranks without a GPU for want of one; seq2seq and a loss on
# float targets go where the MLP goes; `ddpc env` prints its GPU section.
# With a GPU visible, device=cuda and auto train the MLP on it and the start line names it. A
# configure with -DDDPC_CUDA=ON and no working nvcc stops with its one line (docs/gpu.md). On
# the CPU, DDPC_CUDA_CANDIDATES changes nothing.
# usage: cli_train_device.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1

mlp=("$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=256 data.batch_size=32
    epochs=1 log_every=4 num_threads=1 log.progress=plain)

# train NAME ARGS...: runs `ddpc train ARGS` into $tmp/NAME.{out,err}; sets rc.
train() {
    local name=$1
    shift
    "$ddpc" train "$@" >"$tmp/$name.out" 2>"$tmp/$name.err"
    rc=$?
}

# refused NAME REGEX RUN_DIR: the last run exited 1 with exactly one stderr line matching REGEX
# and left RUN_DIR absent.
refused() {
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/$1.err")" -eq 1 ] && grep -Eq -- "$2" "$tmp/$1.err" &&
        [ ! -e "$3" ]; then
        ok "$1: $(cat "$tmp/$1.err")"
    else
        fail "$1 (exit $rc; run directory $([ -e "$3" ] && echo written || echo absent))" \
            "$tmp/$1.err" "$tmp/$1.out"
    fi
}

# ddpc env: the GPU section, and what this machine has.
"$ddpc" env >"$tmp/env.out" 2>"$tmp/env.err"
rc=$?
good=1
[ $rc -eq 0 ] && [ ! -s "$tmp/env.err" ] || good=0
auto_cpu='cpu \(no GPU: .+\)'
auto_gpu='cuda: visible GPU [0-9]+ of [0-9]+ \(LOCAL_RANK [0-9]+ mod [0-9]+\)'
for re in '^GPU$' '^  CUDA driver: +.+' '^  CUDA runtime: +.+' '^  cuBLAS: +.+' \
    '^  (GPUs: +none|GPU 0: +.+, [0-9.]+ GiB, sm_[0-9]+.*)$' '^  Visible GPUs: +.+' \
    "^  Device \\(auto\\): +($auto_cpu|$auto_gpu)\$" '^  NCCL: +.+'; do
    grep -Eq -- "$re" "$tmp/env.out" || { echo "    missing: $re"; good=0; }
done
if [ $good -eq 1 ]; then
    ok "ddpc env prints the GPU section"
else
    fail "ddpc env (exit $rc)" "$tmp/env.out" "$tmp/env.err"
fi
built=yes
grep -Eq '^  CUDA runtime: +none: this build has no CUDA' "$tmp/env.out" && built=no
gpu=no
grep -Eq '^  Device \(auto\): +cuda: ' "$tmp/env.out" && gpu=yes
echo "note: this build has CUDA: $built; a GPU is visible: $gpu"
if [ $built = no ]; then
    check "a build without CUDA says cuBLAS is absent too" \
        grep -Eq '^  cuBLAS: +none: this build has no CUDA$' "$tmp/env.out"
else
    check "a build with CUDA names its runtime" \
        grep -Eq '^  CUDA runtime: +CUDA [0-9]+\.[0-9]+ \(in this build, linked statically\)$' \
        "$tmp/env.out"
    check "... and its cuBLAS" grep -Eq '^  cuBLAS: +cuBLAS [0-9]+\.[0-9]+\.[0-9]+$' "$tmp/env.out"
fi
# Without a driver (no libcuda.so.1 where the loader looks) env still succeeds and says so.
if [ $gpu = no ]; then
    check "without a driver the report says which GPU line applies" \
        grep -Eq '^  GPUs: +none$' "$tmp/env.out"
fi

# seq2seq reads translation data: a refusal must come with the model, not from the data.
/usr/bin/python3 - "$tmp" <<'EOF'
import random, sys
random.seed(3)
for split, n in (("train", 64), ("valid", 8), ("test", 8)):
    with open(f"{sys.argv[1]}/{split}.src", "w") as s, open(f"{sys.argv[1]}/{split}.tgt", "w") as t:
        for _ in range(n):
            w = "".join(random.choice("abcd") for _ in range(random.randint(2, 5)))
            s.write(w + "\n")
            t.write(w[::-1] + "\n")
EOF
s2s=(model.type=seq2seq model.d_model=16 model.num_heads=2 model.num_encoder_layers=1
    model.num_decoder_layers=1 model.d_ff=16 data.type=translation data.tokenize=char
    data.train_src="$tmp/train.src" data.train_tgt="$tmp/train.tgt" data.valid_src="$tmp/valid.src"
    data.valid_tgt="$tmp/valid.tgt" data.test_src="$tmp/test.src" data.test_tgt="$tmp/test.tgt"
    data.batch_size=8 max_steps=2 num_threads=1 log.progress=plain)
# seq2seq and the losses on float targets run on GPUs (checked on an H200 by
# tests/gpu/train_checks.sh): device: cuda goes where the MLP goes, on a GPU or refused for want
# of one; auto trains on a GPU where one is visible, else on the CPU.
no_gpu_refusal='^ddpc train: device: cuda cannot be used: .+; set device: cpu or auto$'
# gpu_or_refused NAME RUN_DIR WHAT START_LINE: the last run trained on the GPU (its start line)
# or, without one, was refused.
gpu_or_refused() {
    if [ $gpu = no ]; then
        refused "$1" "$no_gpu_refusal" "$2"
    else
        check_status "$3, device: cuda trains" $rc "$tmp/$1.err" "$tmp/$1.out"
        check "... on the GPU, as its start line says" \
            grep -Eq "^training $4: .*, on .*GPU [0-9]+ of [0-9]+" "$tmp/$1.out"
    fi
}
# auto_trains NAME WHAT START_LINE: the last run trained, on the CPU exactly when no GPU is visible.
auto_trains() {
    check_status "$2 with device: auto trains" $rc "$tmp/$1.err" "$tmp/$1.out"
    if [ $gpu = no ]; then
        check "... on the CPU, as its start line says" \
            grep -Eq "^training $3: .*, on cpu\$" "$tmp/$1.out"
    else
        check "... on the GPU, as its start line says" \
            grep -Eq "^training $3: .*, on .*GPU [0-9]+ of [0-9]+" "$tmp/$1.out"
    fi
}
train s2s_cuda "$src/configs/translate_demo.yaml" "${s2s[@]}" device=cuda run_dir="$tmp/s2s"
gpu_or_refused s2s_cuda "$tmp/s2s" seq2seq seq2seq
train s2s_auto "$src/configs/translate_demo.yaml" "${s2s[@]}" run_dir="$tmp/s2s_auto"
auto_trains s2s_auto seq2seq seq2seq
printf 'x1,x2,y\n' >"$tmp/reg.csv"
for i in $(seq 1 64); do printf '%d,%d,%d\n' $((i % 7)) $((i % 5)) $((i % 3)); done >>"$tmp/reg.csv"
reg=("$src/configs/fmnist_mlp.yaml" data.type=csv data.train="$tmp/reg.csv"
     data.val="$tmp/reg.csv" data.label=y loss=mse data.batch_size=16 max_steps=2 num_threads=1
     log.progress=plain)
train reg_cuda "${reg[@]}" device=cuda run_dir="$tmp/reg"
gpu_or_refused reg_cuda "$tmp/reg" "loss mse" mlp
train reg_auto "${reg[@]}" run_dir="$tmp/reg_auto"
auto_trains reg_auto "loss mse" mlp

# Refusals that hold on every machine, before anything is written.

# Two ranks on GPUs are DDP (tests/cli_multi_ddp.sh, tests/gpu/multi_ddp.sh); without a GPU each
# rank refuses device: cuda with the one-rank line, and nothing is written.
if [ $gpu = no ]; then
    "$ddpc" run --nproc-per-node 2 -- "$ddpc" train "${mlp[@]}" device=cuda run_dir="$tmp/two" \
        >"$tmp/two.out" 2>"$tmp/two.err"
    rc=$?
    if [ $rc -ne 0 ] && grep -q "device: cuda cannot be used: " "$tmp/two.err" "$tmp/two.out" &&
        ! grep -q "not there yet" "$tmp/two.err" "$tmp/two.out" && [ ! -e "$tmp/two" ]; then
        ok "device: cuda on two ranks without a GPU is refused for want of a GPU, nothing written"
    else
        fail "device: cuda on two ranks without a GPU (exit $rc)" "$tmp/two.err" "$tmp/two.out"
    fi
fi
train dp "${mlp[@]}" device=cuda parallel.mode=dp parallel.replicas=2 run_dir="$tmp/dp"
want='^ddpc train: device: cuda with parallel\.mode dp \(2 replicas\): DataParallel replicas '
want+='run on the CPU only; use DDP ranks for several GPUs \(ddpc run --nproc-per-node N, '
want+='parallel\.mode ddp\) or device: cpu$'
refused dp "$want" "$tmp/dp"

train typo "${mlp[@]}" device=gpu run_dir="$tmp/typo"
refused typo \
    "^ddpc train: command line 'device=gpu': key 'device' must be one of cpu, cuda, auto, got \
'gpu'" \
    "$tmp/typo"

train cpu "${mlp[@]}" device=cpu run_dir="$tmp/cpu"
check_status "device: cpu trains" $rc "$tmp/cpu.err" "$tmp/cpu.out"
check "... on the CPU, as its start line says" grep -Eq '^training mlp: .*, on cpu$' "$tmp/cpu.out"
check "... with no word about auto" test "$(grep -c '^device: auto' "$tmp/cpu.out")" -eq 0
check "... and config.yaml records the key" grep -qx 'device: cpu' "$tmp/cpu/config.yaml"

train auto "${mlp[@]}" run_dir="$tmp/auto"
check_status "device: auto (the default) trains" $rc "$tmp/auto.err" "$tmp/auto.out"
check "config.yaml records device: auto" grep -qx 'device: auto' "$tmp/auto/config.yaml"

if [ $gpu = no ]; then
    check "... on the CPU, as its start line says" \
        grep -Eq '^training mlp: .*, on cpu$' "$tmp/auto.out"
    check "... and why" grep -Eq '^device: auto runs on the CPU: no GPU: .+' "$tmp/auto.out"
    check "auto and cpu give the same losses" \
        diff <(grep -Eo '"loss": [0-9.e+-]+' "$tmp/cpu/metrics.jsonl") \
        <(grep -Eo '"loss": [0-9.e+-]+' "$tmp/auto/metrics.jsonl")
    train cuda "${mlp[@]}" device=cuda run_dir="$tmp/cuda"
    if [ $built = no ]; then
        refused cuda "^ddpc train: device: cuda cannot be used: this build of ddpc has no CUDA .*; \
set device: cpu or auto\$" "$tmp/cuda"
    else
        # the reason is ddpc_cuda_devices' (no driver, none visible), never the build's
        refused cuda '^ddpc train: device: cuda cannot be used: .+; set device: cpu or auto$' \
            "$tmp/cuda"
        check "... naming the machine, not the build" \
            test "$(grep -c 'has no CUDA' "$tmp/cuda.err")" -eq 0
    fi
else
    check "... on the GPU, as its start line says" \
        grep -Eq '^training mlp: .*, on .*GPU [0-9]+ of [0-9]+' "$tmp/auto.out"
    train cuda "${mlp[@]}" device=cuda run_dir="$tmp/cuda"
    check_status "device: cuda trains on the GPU" $rc "$tmp/cuda.err" "$tmp/cuda.out"
    check "... as its start line says" \
        grep -Eq '^training mlp: .*, on .*GPU [0-9]+ of [0-9]+' "$tmp/cuda.out"
    # torch's CUDA_VISIBLE_DEVICES: none visible is no GPU
    CUDA_VISIBLE_DEVICES= "$ddpc" train "${mlp[@]}" device=cuda run_dir="$tmp/hidden" \
        >"$tmp/hidden.out" 2>"$tmp/hidden.err"
    rc=$?
    refused hidden '^ddpc train: device: cuda cannot be used: .+; set device: cpu or auto$' \
        "$tmp/hidden"
fi

# docs/gpu.md's candidate kernels are GPU kernels: on the CPU, DDPC_CUDA_CANDIDATES=all changes
# nothing (a bf16 GPT, whose head16 and act16 paths the CUDA table alone offers, trains the same
# bytes) and the start line names no candidate.
cat >"$tmp/gpt.yaml" <<'YAML'
seed: 7
model: {type: gpt, n_layer: 1, n_head: 2, n_embd: 32, block_size: 16}
data: {type: synthetic_tokens, size: 2048, batch_size: 4}
precision: bf16
YAML
gpt=("$tmp/gpt.yaml" max_steps=6 log_every=3 eval_every=0 num_threads=1 device=cpu
    log.progress=plain checkpoint.every_steps=0)
train cand_off "${gpt[@]}" run_dir="$tmp/cand_off" weights_out="$tmp/cand_off.st"
check_status "a bf16 GPT trains on the CPU" $rc "$tmp/cand_off.err" "$tmp/cand_off.out"
DDPC_CUDA_CANDIDATES=all "$ddpc" train "${gpt[@]}" run_dir="$tmp/cand_on" \
    weights_out="$tmp/cand_on.st" >"$tmp/cand_on.out" 2>"$tmp/cand_on.err"
rc=$?
check_status "... and with DDPC_CUDA_CANDIDATES=all" $rc "$tmp/cand_on.err" "$tmp/cand_on.out"
check "... the same weights, byte for byte" cmp -s "$tmp/cand_off.st" "$tmp/cand_on.st"
check "... and no candidate named on the CPU" \
    bash -c "! grep -q 'candidate kernels' '$tmp/cand_on.out'"

# docs/gpu.md's build table: -DDDPC_CUDA=ON without a working nvcc stops the configure, saying so.
CUDACXX=/nonexistent/nvcc cmake -S "$src" -B "$tmp/cfg" -DDDPC_CUDA=ON >"$tmp/cfg.log" 2>&1
rc=$?
check "a configure with DDPC_CUDA=ON and no working nvcc fails" test "$rc" -ne 0
check "... naming CUDACXX and the way out" \
    grep -q "DDPC_CUDA=ON but CUDACXX=/nonexistent/nvcc is not a working CUDA" "$tmp/cfg.log"

summary
