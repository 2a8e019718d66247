#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Ranks started without `ddpc run` (a platform setting only RANK, LOCAL_RANK, WORLD_SIZE,
# MASTER_ADDR, MASTER_PORT; srun's SLURM_* variables; mpirun's OMPI_COMM_WORLD_*) split the usable
# cores among the ranks on their host as `ddpc run` does, say so in one start-up line naming where
# the local rank count came from (LOCAL_WORLD_SIZE, SLURM's tasks per node, Open MPI's local size,
# or counted through the store), and train the weights of the same job under `ddpc run`. A thread
# count the user set (OMP_NUM_THREADS, num_threads) is left alone and said so.
# usage: cli_train_platform_threads.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
# The split is what is tested: no thread count may leak in from the caller, nor launcher variables.
unset OMP_NUM_THREADS
launcher_vars='RANK|WORLD_SIZE|LOCAL_RANK|LOCAL_WORLD_SIZE|GROUP_RANK|GROUP_WORLD_SIZE|MASTER_ADDR'
launcher_vars+='|MASTER_PORT|TORCHELASTIC_[A-Z_]*|OMPI_[A-Z_]*|PMI_[A-Z_]*|SLURM_[A-Z_]*|DDPC_[A-Z_]*'
for v in $(env | grep -oE "^($launcher_vars)="); do
    unset "${v%=}"
done
cpus=$(nproc) # the affinity mask's count, as ddpc counts usable cores
per=$((cpus / 2))
[ "$per" -ge 1 ] || per=1
cores="$cpus core$([ "$cpus" = 1 ] || echo s)"
split="threads: $per per rank ($cores / 2 ranks on this host"
config="$src/configs/fmnist_mlp.yaml"
common=(data.type=synthetic_images data.size=640 max_steps=20 log_every=10 eval_every=0
        data.batch_size=8)
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# by_hand NAME ENV...: two ranks started by hand, each with ENV plus its own variables from
# rank_vars R; rank 0's log is $tmp/NAME.log, the weights $tmp/NAME.safetensors; $rc is 0 when
# both ranks exited 0.
by_hand() {
    local name=$1
    shift
    local pids=() r
    for r in 0 1; do
        env "$@" $(rank_vars $r) timeout 300 "$ddpc" train "$config" "${common[@]}" \
            run_dir="$tmp/$name" weights_out="$tmp/$name.safetensors" ${extra:-} \
            >"$tmp/$name.$r.log" 2>&1 &
        pids+=($!)
    done
    rc=0
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    cp "$tmp/$name.0.log" "$tmp/$name.log"
}

"$ddpc" run --nproc-per-node 2 -- "$ddpc" train "$config" "${common[@]}" run_dir="$tmp/ref" \
    weights_out="$tmp/ref.safetensors" >"$tmp/ref.log" 2>&1
check_status "the job under ddpc run --nproc-per-node 2" $? "$tmp/ref.log"
check "under ddpc run the line names the launcher's OMP_NUM_THREADS" \
    grep -qF "threads: $per per rank (OMP_NUM_THREADS=$per, left as set; 2 ranks on this host" \
    "$tmp/ref.log"
"$ddpc" train "$config" "${common[@]}" max_steps=2 run_dir="$tmp/single" >"$tmp/single.log" 2>&1
check_status "a single process trains" $? "$tmp/single.log"
check "a single process keeps every core and prints no threads line" \
    sh -c "grep -q '$cpus threads per rank' '$tmp/single.log' && ! grep -q '^threads:' '$tmp/single.log'"

# A platform's variables, LOCAL_WORLD_SIZE included.
port=$(free_port)
rank_vars() { echo "RANK=$1 LOCAL_RANK=$1"; }
by_hand lws WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
check_status "2 platform-started ranks train" $rc "$tmp/lws.0.log" "$tmp/lws.1.log"
want="$split, LOCAL_WORLD_SIZE)"
check "the start-up line splits the cores ($want)" grep -qF "$want" "$tmp/lws.log"
check "rank 0 runs $per threads" grep -q "$per threads per rank" "$tmp/lws.log"
check "the weights of the job under ddpc run" cmp -s "$tmp/ref.safetensors" "$tmp/lws.safetensors"

# No LOCAL_WORLD_SIZE: the ranks on this host are counted through the store (gloo, when built;
# else shm, whose ranks share one host by its own check).
port=$(free_port)
by_hand store WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port"
check_status "2 ranks without LOCAL_WORLD_SIZE train" $rc "$tmp/store.0.log" "$tmp/store.1.log"
if grep -q "(backend gloo" "$tmp/store.log"; then
    why="counted through the store"
else
    why="the shm backend's one host"
fi
want="$split, $why)"
check "the start-up line splits the cores ($want)" grep -qF "$want" "$tmp/store.log"
check "the same weights without LOCAL_WORLD_SIZE" \
    cmp -s "$tmp/ref.safetensors" "$tmp/store.safetensors"

# srun's variables (a step of 2 tasks on one node), read without srun; shm, since the mpi
# backend (srun's default choice) needs srun's PMI.
rank_vars() { echo "SLURM_PROCID=$1 SLURM_LOCALID=$1"; }
by_hand slurm SLURM_STEP_ID=0 SLURM_JOB_ID="$$$RANDOM" SLURM_NTASKS=2 SLURM_NODEID=0 \
    SLURM_NNODES=1 SLURM_STEP_TASKS_PER_NODE=2 SLURM_STEP_NODELIST=localhost DDPC_BACKEND=shm
check_status "2 ranks with srun's variables train" $rc "$tmp/slurm.0.log" "$tmp/slurm.1.log"
want="$split, SLURM_STEP_TASKS_PER_NODE)"
check "the start-up line splits the cores ($want)" grep -qF "$want" "$tmp/slurm.log"
check "the same weights with srun's variables" \
    cmp -s "$tmp/ref.safetensors" "$tmp/slurm.safetensors"

# mpirun's variables, likewise on shm.
rank_vars() { echo "OMPI_COMM_WORLD_RANK=$1 OMPI_COMM_WORLD_LOCAL_RANK=$1"; }
by_hand ompi OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=2 \
    OMPI_MCA_ess_base_jobid="$$$RANDOM" DDPC_BACKEND=shm
check_status "2 ranks with mpirun's variables train" $rc "$tmp/ompi.0.log" "$tmp/ompi.1.log"
want="$split, OMPI_COMM_WORLD_LOCAL_SIZE)"
check "the start-up line splits the cores ($want)" grep -qF "$want" "$tmp/ompi.log"
check "the same weights with mpirun's variables" \
    cmp -s "$tmp/ref.safetensors" "$tmp/ompi.safetensors"

# A count the user set is kept, even one that oversubscribes the cores (one more than the split).
mine=$((per + 1))
common=(data.type=synthetic_images data.size=640 max_steps=2 log_every=1 eval_every=0
        data.batch_size=8)
rank_vars() { echo "RANK=$1 LOCAL_RANK=$1"; }
port=$(free_port)
by_hand omp WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT="$port" \
    OMP_NUM_THREADS=$mine
check_status "2 ranks with OMP_NUM_THREADS=$mine train" $rc "$tmp/omp.0.log" "$tmp/omp.1.log"
want="threads: $mine per rank (OMP_NUM_THREADS=$mine, left as set; 2 ranks on this host, $cores)"
check "OMP_NUM_THREADS is left alone and said so" grep -qF "$want" "$tmp/omp.log"
check "rank 0 runs $mine threads" grep -q "$mine threads per rank" "$tmp/omp.log"
check "more threads than cores are pointed out" grep -q "more threads than cores" "$tmp/omp.log"
port=$(free_port)
extra=num_threads=$mine by_hand key WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
    MASTER_PORT="$port"
check_status "2 ranks with num_threads=$mine train" $rc "$tmp/key.0.log" "$tmp/key.1.log"
want="threads: $mine per rank (num_threads, left as set; 2 ranks on this host, $cores)"
check "num_threads is left alone and said so" grep -qF "$want" "$tmp/key.log"
check "rank 0 runs $mine threads (num_threads)" grep -q "$mine threads per rank" "$tmp/key.log"

summary
