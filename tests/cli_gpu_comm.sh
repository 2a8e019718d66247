#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Collectives on GPUs where the user meets them: `ddpc run --nproc-per-node gpu`, `ddpc bench
# <collective> --device cuda` / `--backend nccl` and `dist.backend: nccl`. Without a GPU (this
# machine, CI) each is refused with one stderr line saying why and starts or writes nothing;
# nccl on the CPU trainer's collectives is refused on every machine. With a GPU visible,
# --nproc-per-node gpu starts one worker per visible GPU, and the bench checks every element
# (--check) on one rank (nccl, or staging where NCCL is absent) and on two ranks sharing GPU 0
# (host staging over shm, as its note says). `ddpc env` lists the nccl backend.
# usage: cli_gpu_comm.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
for v in $(env | grep -oE '^(RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|MASTER_ADDR|MASTER_PORT|TORCHELASTIC_[A-Z_]*|OMPI_[A-Z_]*|PMI_[A-Z_]*|SLURM_[A-Z_]*|DDPC_[A-Z_]*)='); do
    unset "${v%=}"
done
export OMP_NUM_THREADS=1

# one_line NAME STATUS REGEX: the last command ($tmp/NAME.err) exited STATUS with exactly one
# stderr line, matching REGEX.
one_line() {
    if [ "$rc" -eq "$2" ] && [ "$(wc -l <"$tmp/$1.err")" -eq 1 ] &&
        grep -Eq -- "$3" "$tmp/$1.err"; then
        ok "$1: $(cat "$tmp/$1.err")"
    else
        fail "$1 (exit $rc, want $2)" "$tmp/$1.err" "$tmp/$1.out"
    fi
}

"$ddpc" env >"$tmp/env.out" 2>&1
nccl_row='^  Backends: +.*, nccl (yes \(on GPUs, with libnccl\.so\.2\)|'
nccl_row+='no \(built without CUDA and nccl\.h\))$'
check "ddpc env lists the nccl backend" grep -Eq "$nccl_row" "$tmp/env.out"
gpu=no
grep -Eq '^  Device \(auto\): +cuda: ' "$tmp/env.out" && gpu=yes
echo "note: a GPU is visible: $gpu"

# Every machine: nccl moves the GPU group's buffers only, so with the model on the CPU it is
# refused before any output.
"$ddpc" train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=64 epochs=1 \
    num_threads=1 dist.backend=nccl device=cpu run_dir="$tmp/train_nccl" \
    >"$tmp/train_nccl.out" 2>"$tmp/train_nccl.err"
rc=$?
want='^ddpc train: dist.backend nccl moves GPU buffers, and this run.s model is on the CPU '
want+='\(use backend shm, gloo or mpi, or device: cuda\)$'
one_line train_nccl 1 "$want"
check "... and writes no run directory" test ! -e "$tmp/train_nccl"
"$ddpc" bench allreduce --device tpu >"$tmp/bad_device.out" 2>"$tmp/bad_device.err"
rc=$?
one_line bad_device 2 "^ddpc bench: bad --device 'tpu' \(cpu or cuda\)$"

if [ $gpu = no ]; then
    why=$(sed -nE 's/^  Device \(auto\): +cpu \(no GPU: (.*)\)$/\1/p' "$tmp/env.out")
    "$ddpc" run --nproc-per-node gpu -- touch "$tmp/ran" >"$tmp/run_gpu.out" 2>"$tmp/run_gpu.err"
    rc=$?
    one_line run_gpu 2 '^ddpc run: --nproc-per-node gpu: '
    check "... giving the reason ddpc env gives" grep -qF -- "$why" "$tmp/run_gpu.err"
    check "... and starts no worker" test ! -e "$tmp/ran"
    "$ddpc" bench allreduce --device cuda --max-bytes 64K >"$tmp/bench_cuda.out" \
        2>"$tmp/bench_cuda.err"
    rc=$?
    one_line bench_cuda 1 '^ddpc bench: collectives on GPU buffers need a GPU: '
    check "... giving the reason ddpc env gives" grep -qF -- "$why" "$tmp/bench_cuda.err"
    check "... and prints no table" test ! -s "$tmp/bench_cuda.out"
    "$ddpc" bench allreduce --backend nccl --max-bytes 64K >"$tmp/bench_nccl.out" \
        2>"$tmp/bench_nccl.err"
    rc=$?
    one_line bench_nccl 1 '^ddpc bench: collectives on GPU buffers \(backend nccl\) need a GPU: '
    summary
    exit
fi

# A GPU is visible.
n=$("$ddpc" run --nproc-per-node gpu -- sh -c 'echo "$LOCAL_WORLD_SIZE"' 2>"$tmp/run_gpu.err" |
    sort -u)
want=$(grep -cE '^  GPU [0-9]+: ' "$tmp/env.out")
if [ -n "$n" ] && [ "$n" = "$want" ]; then
    ok "--nproc-per-node gpu starts $n worker(s), one per visible GPU"
else
    fail "--nproc-per-node gpu started '$n' workers, want $want" "$tmp/run_gpu.err"
fi
# rows_ok FILE: 9 table rows (4K to 1M), each with 0 wrong elements (the last column).
rows_ok() {
    grep -E '^ *(\[rank [0-9/]+\] )?[0-9]+ +[0-9]+ +f32 ' "$1" |
        awk '{ n++; if ($NF != "0") bad = 1 } END { exit bad || n != 9 }'
}
staged='# GPU buffers: host staging over shm: 2 ranks on this host share 1 GPU, which NCCL refuses'
for coll in allreduce broadcast all_gather reduce_scatter; do
    "$ddpc" bench "$coll" --device cuda --check --max-bytes 1M >"$tmp/one_$coll.out" \
        2>"$tmp/one_$coll.err"
    rc=$?
    if [ $rc -eq 0 ] && rows_ok "$tmp/one_$coll.out" &&
        grep -Eq '^# GPU buffers: (nccl on GPU 0|host staging over shm: .+)$' "$tmp/one_$coll.out"
    then
        ok "$coll on one rank's GPU buffers: 0 wrong ($(grep '^# GPU' "$tmp/one_$coll.out"))"
    else
        fail "$coll on one rank's GPU buffers (exit $rc)" "$tmp/one_$coll.out" "$tmp/one_$coll.err"
    fi
    CUDA_VISIBLE_DEVICES=0 "$ddpc" run --nproc-per-node 2 --collective-timeout 60 -- \
        "$ddpc" bench "$coll" --device cuda --check --max-bytes 1M >"$tmp/two_$coll.out" \
        2>"$tmp/two_$coll.err"
    rc=$?
    if [ $rc -eq 0 ] && rows_ok "$tmp/two_$coll.out" &&
        grep -qF "$staged" "$tmp/two_$coll.out"; then
        ok "$coll on two ranks sharing GPU 0: staged, 0 wrong"
    else
        fail "$coll on two ranks sharing GPU 0 (exit $rc)" "$tmp/two_$coll.out" "$tmp/two_$coll.err"
    fi
done
summary
