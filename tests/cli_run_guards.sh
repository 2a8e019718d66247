#!/usr/bin/env bash
# The launcher's guards through the CLI: `ddpc run` inside a platform-injected worker environment
# (RANK, LOCAL_RANK, WORLD_SIZE set) refuses with the explanation and exits 2; launcher families
# that disagree (a stale RANK=0 WORLD_SIZE=1 under mpirun -np 2) make every rank fail, naming
# both, instead of two single-rank jobs that both exit 0; families that agree train.
# usage: cli_run_guards.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
export OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE TORCHELASTIC_RUN_ID DDPC_LAUNCHER

# 1. A platform started this process as a worker: ddpc run refuses, starts nothing.
RANK=5 LOCAL_RANK=1 WORLD_SIZE=8 MASTER_ADDR=10.0.0.1 MASTER_PORT=29500 \
    "$ddpc" run --nproc-per-node 2 -- sh -c "touch $tmp/started" >"$tmp/p.out" 2>"$tmp/p.err"
rc=$?
[ $rc -eq 2 ] && [ ! -e "$tmp/started" ] &&
    grep -q "^ddpc run: refusing to start: RANK=5, LOCAL_RANK=1 and WORLD_SIZE=8 are set" \
        "$tmp/p.err" && grep -q "a second level of workers" "$tmp/p.err" &&
    grep -q "run the program directly instead (e.g. 'ddpc train CONFIG')" "$tmp/p.err" &&
    ok "platform-injected worker: ddpc run refuses (exit 2), starts nothing" ||
    fail "platform-injected worker (exit $rc)" "$tmp/p.err"

# 2. The issue's case: a stale RANK=0 WORLD_SIZE=1 under mpirun -np 2. Each rank fails naming
# both families; before, two independent single-rank jobs ran and both exited 0.
train=(train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=64 epochs=1
       log_every=100 data.batch_size=16 data.eval_batch_size=16)
if ! command -v mpirun >/dev/null 2>&1; then
    fail "mpirun is not installed (openmpi-bin, see scripts/setup): the families case needs it"
else
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    RANK=0 WORLD_SIZE=1 timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 \
        "$ddpc" "${train[@]}" run_dir="$tmp/stale" >"$tmp/m.out" 2>"$tmp/m.err"
    rc=$?
    n=$(grep -c "^ddpc train: RANK=0 WORLD_SIZE=1 (torchrun style) disagree with \
OMPI_COMM_WORLD_RANK=[01] OMPI_COMM_WORLD_SIZE=2 (mpirun): mpirun started 2 processes that would \
not form one job" "$tmp/m.err")
    [ $rc -ne 0 ] && [ "$n" -ge 1 ] && [ ! -e "$tmp/stale/metrics.jsonl" ] &&
        ok "stale RANK=0 WORLD_SIZE=1 under mpirun -np 2: fails (exit $rc) naming both" ||
        fail "stale torchrun variables under mpirun (exit $rc, $n messages)" "$tmp/m.err"

    # 3. Agreeing families (a wrapper that exports both) are one job of 2 ranks.
    timeout 120 mpirun --oversubscribe --mca btl self,vader -np 2 sh -c \
        'RANK=$OMPI_COMM_WORLD_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE exec "$0" "$@"' \
        "$ddpc" "${train[@]}" dist.backend=mpi run_dir="$tmp/agree" >"$tmp/a.out" 2>"$tmp/a.err"
    rc=$?
    [ $rc -eq 0 ] && grep -q "x 2 ranks" "$tmp/a.out" "$tmp/a.err" &&
        ok "agreeing torchrun and mpirun variables: one job of 2 ranks" ||
        fail "agreeing families (exit $rc)" "$tmp/a.out" "$tmp/a.err"
fi
summary
