#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Starting ranks on the test bed the way a platform does: each process gets RANK, LOCAL_RANK,
# WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR (host 0) and MASTER_PORT, and runs in its host's
# network namespace. Sourced after testbed.sh:
#   mh_require_root NAME   # a clear failure (not a pass) for a developer who is not root
#   mh_start H L OUTDIR CMD...   # starts H x L ranks; pid of rank R in mh_pids[R], output
#                                # in OUTDIR/rank.R
#   mh_wait                # waits for every rank; returns 1 if any failed
#   mh_leftovers           # counts this job's segments left in /dev/shm (the gloo backend's host
#                          # groups are named ddpc-u<uid>-g<nonce>.h<host>-p<MASTER_PORT>-...)
set -u

mh_pids=()
mh_port=0

mh_require_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "$1: FAILED: needs root for network namespaces (CI runs as root; run" \
             "'sudo ctest -R $1' or 'sudo make test')" >&2
        exit 1
    fi
}

mh_start() {
    local hosts=$1 locals=$2 out=$3 h l r
    shift 3
    local world=$((hosts * locals))
    mh_port=$(bed_port)
    mh_pids=()
    for ((h = 0; h < hosts; h++)); do
        for ((l = 0; l < locals; l++)); do
            r=$((h * locals + l))
            # ip netns exec execs its command (no fork), so $! is the rank's own pid
            ip netns exec "${bed}-h$h" env RANK=$r LOCAL_RANK=$l WORLD_SIZE=$world LOCAL_WORLD_SIZE=$locals \
                MASTER_ADDR="$(bed_addr 0)" MASTER_PORT=$mh_port OMP_NUM_THREADS=1 \
                "$@" >"$out/rank.$r" 2>&1 &
            mh_pids+=($!)
        done
    done
}

mh_wait() {
    local p rc=0
    for p in "${mh_pids[@]}"; do wait "$p" || rc=1; done
    return $rc
}

mh_leftovers() {
    ls /dev/shm | grep -c "^ddpc-u$(id -u)-g.*-p${mh_port}-" || true
}
