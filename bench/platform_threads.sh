#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# platform_threads.sh DDPC_BIN: the same small job (configs/fmnist_mlp.yaml on synthetic images,
# STEPS steps of batch 8 per rank) as 2 ranks started by hand with only a platform's variables
# (RANK, LOCAL_RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT: ddpc counts the ranks on this host
# through the store and splits the cores) and under `ddpc run --nproc-per-node 2`; for contrast,
# the same ranks told to use every core each (num_threads = CPUs, what they did before the split).
# Prints the CPU, each arm's median wall time over REPEAT interleaved runs, and the ratio
# platform / ddpc run (the target is at most 1.3). Measures; asserts nothing.
# Environment: STEPS (200), REPEAT (3).
set -euo pipefail

if [[ $# -ne 1 ]]; then
    echo "usage: $0 DDPC_BIN" >&2
    exit 2
fi
DDPC=$1
HERE=$(cd "$(dirname "$0")" && pwd)
STEPS=${STEPS:-200}
REPEAT=${REPEAT:-3}
[[ -x $DDPC ]] || { echo "$0: $DDPC is not an executable" >&2; exit 2; }
unset OMP_NUM_THREADS RANK LOCAL_RANK WORLD_SIZE LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpus=$(nproc)
job=("$HERE/../configs/fmnist_mlp.yaml" data.type=synthetic_images data.size=6400
     max_steps="$STEPS" log_every=1000 eval_every=0 data.batch_size=8 log.tensorboard=false)

now() { date +%s.%N; }
free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# platform EXTRA...: 2 ranks with a platform's variables only; prints the wall time.
platform() {
    local port t0 pids=()
    port=$(free_port)
    t0=$(now)
    for r in 0 1; do
        RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            "$DDPC" train "${job[@]}" run_dir="$tmp/p" "$@" >"$tmp/p$r.log" 2>&1 &
        pids+=($!)
    done
    if ! wait "${pids[0]}" || ! wait "${pids[1]}"; then
        echo "$0: a rank failed:" >&2
        cat "$tmp/p0.log" "$tmp/p1.log" >&2
        exit 1
    fi
    echo "$(now) - $t0" | bc
}
launcher() {
    local t0
    t0=$(now)
    "$DDPC" run --nproc-per-node 2 -- "$DDPC" train "${job[@]}" run_dir="$tmp/l" >"$tmp/l.log" 2>&1 ||
        { echo "$0: ddpc run failed:" >&2; cat "$tmp/l.log" >&2; exit 1; }
    echo "$(now) - $t0" | bc
}
median() { printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $cpus usable cores"
p=() l=() o=()
for _ in $(seq "$REPEAT"); do
    p+=("$(platform)")
    said=$(grep -h '^threads:' "$tmp/p0.log" || true)
    l+=("$(launcher)")
    o+=("$(platform num_threads="$cpus")")
done
echo "platform ranks say: $said"
mp=$(median "${p[@]}")
ml=$(median "${l[@]}")
mo=$(median "${o[@]}")
printf 'platform-started, 2 ranks: %.2f s (runs: %s)\n' "$mp" "${p[*]}"
printf 'ddpc run --nproc-per-node 2: %.2f s (runs: %s)\n' "$ml" "${l[*]}"
printf 'platform-started, num_threads=%d each (no split): %.2f s\n' "$cpus" "$mo"
printf 'ratio platform / ddpc run: %.2f (target <= 1.3)\n' "$(echo "$mp / $ml" | bc -l)"
