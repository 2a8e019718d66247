#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Open MPI's mpirun across two network namespaces of the test bed: mpirun runs on host 0 and
# starts its daemon on host 1 through tests/multihost/netns_rsh.sh (`ip netns exec` as the rsh
# agent); ranks talk over TCP on the bed's link only. Checks: 2 hosts x 2 ranks with the mpi
# backend train to weights bitwise equal to `ddpc run --nproc-per-node 4` on one host, and a rank
# killed on host 1 stops every rank on both hosts, mpirun naming the rank, the node and signal 9.
# Needs root and mpirun; otherwise it says so and exits 77 (ctest: skipped).
# usage: mpirun_nodes.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
src=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
if [ "$(id -u)" -ne 0 ]; then
    echo "mpirun_nodes.sh: the multi-host test bed needs root (network namespaces); not run" >&2
    exit 77
fi
if ! command -v mpirun >/dev/null 2>&1 || ! command -v unshare >/dev/null 2>&1; then
    echo "mpirun_nodes.sh: needs mpirun (openmpi-bin) and unshare (util-linux); not run" >&2
    exit 77
fi
. "$here/../lib/check.sh"
. "$here/testbed.sh"
trap 'bed_down; rm -rf "$tmp"' EXIT
bed_up 2 || exit 1
export DDPC_BED=$bed OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
unset RANK WORLD_SIZE LOCAL_RANK TORCHELASTIC_RUN_ID DDPC_LAUNCHER

# mpirun_bed ARGS...: mpirun on host 0 (named h0, as netns_rsh.sh names host 1 h1), 2 ranks per
# host, TCP over the bed's subnet only.
mpirun_bed() {
    bed_exec 0 unshare --uts sh -c 'hostname h0 && exec "$@"' sh timeout 120 \
        mpirun --allow-run-as-root -np 4 --host h0:2,h1:2 --mca plm_rsh_agent "$here/netns_rsh.sh" \
        --mca oob_tcp_if_include 10.77.0.0/24 --mca btl_tcp_if_include 10.77.0.0/24 \
        --mca btl tcp,self "$@"
}

# 1. 2 hosts x 2 ranks (mpi backend over the link) = 1 host x 4 ranks (shm), bit for bit.
train=(train "$src/configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=512 epochs=2
       log_every=100 data.batch_size=8 data.eval_batch_size=32)
mpirun_bed -x DDPC_BACKEND=mpi -x OMP_NUM_THREADS "$ddpc" "${train[@]}" run_dir="$tmp/mh" \
    weights_out="$tmp/mh.safetensors" >"$tmp/mh.log" 2>&1
rc=$?
"$ddpc" run --nproc-per-node 4 -- "$ddpc" "${train[@]}" run_dir="$tmp/one" \
    weights_out="$tmp/one.safetensors" >"$tmp/one.log" 2>&1
rc1=$?
[ $rc -eq 0 ] && [ $rc1 -eq 0 ] && grep -q "x 4 ranks" "$tmp/mh.log" &&
    cmp -s "$tmp/mh.safetensors" "$tmp/one.safetensors" &&
    ok "mpirun 2 hosts x 2 (mpi over the bed's link) = ddpc run 1 host x 4 (shm), bitwise" ||
    fail "mpirun across namespaces vs one host (exit $rc/$rc1)" "$tmp/mh.log" "$tmp/one.log"

# 2. kill -9 of rank 3 (on host 1): mpirun stops every rank on both hosts and names it.
tag="64.$$$RANDOM"
mkdir -p "$tmp/k"
mpirun_bed sh -c "echo \$\$ >$tmp/k/pid.\$OMPI_COMM_WORLD_RANK; exec sleep $tag" \
    >"$tmp/k.log" 2>&1 &
job=$!
for i in $(seq 600); do [ "$(ls "$tmp/k" | wc -l)" -eq 4 ] && break; sleep 0.05; done
kill -9 "$(cat "$tmp/k/pid.3")"
gone=1
for i in $(seq 200); do pgrep -f "^sleep $tag" >/dev/null || { gone=0; break; }; sleep 0.05; done
wait $job
rc=$?
[ $gone -eq 0 ] && [ $rc -ne 0 ] &&
    grep -q "process rank 3 with PID [0-9]* on node h1 exited on signal 9" "$tmp/k.log" &&
    ok "rank 3 killed on host 1: every rank on both hosts gone, mpirun names rank 3 on h1" ||
    fail "rank killed under mpirun across namespaces (gone=$gone, exit $rc)" "$tmp/k.log"
summary
