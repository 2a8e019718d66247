#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# `ddpc env`: the report's key lines, the rank it resolves from each launcher's variables (and
# under a real mpirun when one is installed), and a malformed variable: exit 1, one stderr line.
# Every run starts from an empty environment (env -i) so the caller's variables cannot leak in.
# usage: cli_env.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"

run() { # runs `ddpc env` with exactly the given variables; sets rc, out, err
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" "$@" "$ddpc" env >"$tmp/out" 2>"$tmp/err"
    rc=$?
}

# fail_run NAME: a failed check of the last run, with its exit status and both streams.
fail_run() {
    fail "$1 (exit $rc)"
    sed 's/^/    out: /' "$tmp/out" | tail -n 20
    sed 's/^/    err: /' "$tmp/err"
}

# expect NAME REGEX...: exit 0, empty stderr, every regex matches a line of stdout
expect() {
    local name=$1
    shift
    local good=1
    [ "$rc" -eq 0 ] && [ ! -s "$tmp/err" ] || good=0
    for re in "$@"; do
        grep -Eq -- "$re" "$tmp/out" || { echo "    missing: $re"; good=0; }
    done
    if [ $good -eq 1 ]; then ok "$name"; else fail_run "$name"; fi
}

run
expect "plain report has every section" \
    '^System$' '^  OS: +Linux ' '^  CPU: +.+' '^  CPU cores: +[0-9]+ physical, [1-9][0-9]* logical' \
    '^  SIMD \(CPU\): ' '^  Compiler: +(gcc|clang) [0-9]' '^  Build: +release flags' \
    '^  BLAS: +/' '^  BLAS config: +.+' '^  BLAS threads: +[1-9]' '^  OpenMP: +OpenMP .*max threads [1-9]' \
    '^  oneDNN: +oneDNN [0-9]+\.[0-9]+\.[0-9]+ \(openmp\), ISA [a-z0-9_]+$' \
    '^  Matmul fp32: +fp32 OpenBLAS sgemm$' \
    '^  Matmul bf16: +(bf16 oneDNN matmul, fp32 accumulation \([a-z0-9_]+\)|bf16-rounded inputs on OpenBLAS sgemm, .*oneDNN has no bf16 matmul for [a-z0-9_]+.*)$' \
    '^  Matmul fp16: +fp16-rounded inputs on OpenBLAS sgemm, fp32 accumulation' \
    '^  Backends: +shm yes, mpi (yes|no).*, gloo (yes|no).*, nccl (yes|no)' '^  MPI: +.+' '^  CUDA driver: +.+' '^  NCCL: +.+' \
    '^  Variables: +none set$' '^  Source: +none$' '^  Rank: +0 of 1$' \
    '^  Backend: +shm \(chosen automatically\)$' '^  Collective timeout: +300 s \(default\)$'

run RANK=1 WORLD_SIZE=2 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=29500 \
    TORCHELASTIC_RUN_ID=r7 DDPC_COLLECTIVE_TIMEOUT=30
expect "torchrun variables resolve" '^  Variables: +RANK=1$' '^ +WORLD_SIZE=2$' \
    '^ +MASTER_PORT=29500$' '^  Source: +torchrun$' '^  Rank: +1 of 2$' '^  Local rank: +1 of 2$' \
    '^  Master: +127.0.0.1:29500$' '^  Run id: +r7$' '^  Collective timeout: +30 s' \
    '^  Launcher: +inside a launcher'

mpi_backend=shm
grep -q 'mpi yes' "$tmp/out" && mpi_backend=mpi
run OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_RANK=0 \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_ess_base_jobid=99
expect "Open MPI variables resolve, backend follows the launcher" '^  Source: +openmpi$' \
    '^  Rank: +2 of 4$' '^  Node: +1 of 2$' '^  Run id: +99$' "^  Backend: +$mpi_backend "

run SLURM_PROCID=0 SLURM_NTASKS=4 SLURM_JOB_ID=12 SLURM_JOB_NODELIST='node[01-04]' SLURM_NNODES=4
expect "sbatch batch script is a single process" '^  Variables: +SLURM_PROCID=0$' \
    '^  Source: +none$' '^  Rank: +0 of 1$'

run SLURM_PROCID=3 SLURM_STEP_ID=0 SLURM_NTASKS=4 SLURM_JOB_ID=12 SLURM_STEP_NODELIST='node[07-08]' \
    SLURM_NNODES=2 SLURM_STEP_TASKS_PER_NODE='2(x2)' SLURM_NODEID=1 SLURM_LOCALID=1 DDPC_BACKEND=shm
expect "srun step resolves, master is the first host" '^  Source: +slurm$' '^  Rank: +3 of 4$' \
    '^  Local rank: +1 of 2$' '^  Master: +node07 \(no port\)$' '^  Run id: +12.0$' \
    '^  Backend: +shm \(DDPC_BACKEND\)$'

# malformed: exit 1 (not a signal), exactly one stderr line naming variable and value
for bad in "WORLD_SIZE=abc RANK=0|WORLD_SIZE=abc is not a number" \
           "RANK=4 WORLD_SIZE=4|RANK=4 is not below WORLD_SIZE=4" \
           "MASTER_PORT=70000|MASTER_PORT=70000 is outside 1..65535"; do
    vars=${bad%%|*}
    want=${bad#*|}
    # shellcheck disable=SC2086
    run $vars
    if [ "$rc" -eq 1 ] && [ "$(wc -l <"$tmp/err")" -eq 1 ] && grep -qF "ddpc env: $want" "$tmp/err" &&
        grep -qF "Resolves to:" "$tmp/out"; then
        ok "malformed $vars: $(cat "$tmp/err")"
    else
        fail_run "malformed $vars"
    fi
done

env -i PATH="$PATH" "$ddpc" env extra >"$tmp/out" 2>"$tmp/err"
rc=$?
if [ $rc -eq 2 ] && grep -q "usage: ddpc env" "$tmp/err"; then ok "extra argument is a usage error"; else fail_run "usage"; fi

# under a real mpirun every rank sees its own rank
if command -v mpirun >/dev/null 2>&1; then
    env -i PATH="$PATH" HOME="${HOME:-/tmp}" OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
        timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 "$ddpc" env >"$tmp/out" 2>"$tmp/err"
    rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^  Source: *openmpi$' "$tmp/out")" -eq 2 ] &&
        grep -q '^  Rank: *0 of 2$' "$tmp/out" && grep -q '^  Rank: *1 of 2$' "$tmp/out"; then
        ok "mpirun -np 2 ddpc env"
    else
        fail_run "mpirun -np 2 ddpc env"
    fi
else
    echo "note: mpirun not installed, the mpirun case was not run"
fi

# GPUs and NCCL through stand-in libraries (this machine has no GPU driver): a fake libcuda.so.1
# with two devices and fake libnccl.so.2 in the new and the pre-2.9 version encoding.
if command -v cc >/dev/null 2>&1; then
    mkdir -p "$tmp/new" "$tmp/old"
    cat >"$tmp/cuda.c" <<'C'
#include <stddef.h>
#include <string.h>
int cuInit(unsigned f) { return f == 0 ? 0 : 1; }
int cuDriverGetVersion(int *v) { *v = 12040; return 0; }
int cuDeviceGetCount(int *n) { *n = 2; return 0; }
int cuDeviceGet(int *d, int i) { *d = 10 + i; return 0; }
int cuDeviceGetName(char *s, int len, int d) { strncpy(s, d == 10 ? "Fake H100" : "Fake L4", (size_t)len); return 0; }
int cuDeviceTotalMem_v2(size_t *b, int d) { *b = (size_t)(d == 10 ? 80 : 24) << 30; return 0; }
int cuDeviceGetAttribute(int *v, int a, int d) { *v = a == 75 ? (d == 10 ? 9 : 8) : (d == 10 ? 0 : 9); return 0; }
C
    printf 'int ncclGetVersion(int *v) { *v = 22105; return 0; }
' >"$tmp/nccl_new.c"
    printf 'int ncclGetVersion(int *v) { *v = 2804; return 0; }
' >"$tmp/nccl_old.c"
    cc -shared -fPIC -o "$tmp/new/libcuda.so.1" "$tmp/cuda.c" &&
        cc -shared -fPIC -o "$tmp/new/libnccl.so.2" "$tmp/nccl_new.c" &&
        cc -shared -fPIC -o "$tmp/old/libnccl.so.2" "$tmp/nccl_old.c"
    run LD_LIBRARY_PATH="$tmp/new"
    expect "GPUs and NCCL found through dlopen" '^  CUDA driver: +CUDA driver 12.4 \(libcuda.so.1\)$' \
        '^  GPU 0: +Fake H100, 80.0 GiB, sm_90$' '^  GPU 1: +Fake L4, 24.0 GiB, sm_89$' \
        '^  NCCL: +NCCL 2.21.5 \(libnccl.so.2\)$'
    run LD_LIBRARY_PATH="$tmp/old"
    expect "NCCL before 2.9 encodes its version differently" '^  NCCL: +NCCL 2.8.4 \(libnccl.so.2\)$'
else
    echo "note: no C compiler, the fake CUDA/NCCL case was not run"
fi

summary
