#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Failures across hosts on the gloo backend, 2 hosts x 2 ranks started platform-style, each rank
# running all_reduce in a loop (`ddpc bench allreduce`):
#  1. host 1's link is cut (`ip link set down`): every rank fails, and its message names host 1
#     (a 3 s collective timeout);
#  2. rank 2 (on host 1) is killed: every other rank fails with a message naming rank 2 as exited,
#     found by liveness checks, not by the (60 s) timeout.
#   gloo_faults.sh DDPC_BIN
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
DDPC=${1:?usage: gloo_faults.sh DDPC_BIN}
. "$HERE/testbed.sh"
. "$HERE/ranks.sh"
mh_require_root gloo_faults
OUT=$(mktemp -d)
trap 'kill -9 "${mh_pids[@]}" 2>/dev/null; bed_down; rm -rf "$OUT"' EXIT
fail=0

# Starts the loop with collective timeout $1 and waits until both gloo pairs are connected
# (host 0's TCP connections to host 1 other than the store's), i.e. every rank has joined.
start_loop() {
    bed_up 2 || exit 1
    mh_start 2 2 "$OUT" env DDPC_COLLECTIVE_TIMEOUT="$1" "$DDPC" bench allreduce --backend gloo \
        --iters 1000000 --warmup 1 --min-bytes 64K --max-bytes 64K --min-ms 0 --max-ms 0
    local i n
    for ((i = 0; i < 600; i++)); do
        n=$(bed_exec 0 ss -Htn state established dst "$(bed_addr 1)" |
            awk -v p=":$mh_port" '$3 !~ p"$"' | wc -l)
        [ "$n" -ge 2 ] && return 0
        kill -0 "${mh_pids[@]}" 2>/dev/null || break
        sleep 0.1
    done
    echo "gloo_faults: the ranks did not all join (60 s)" >&2
    tail -n 5 "$OUT"/rank.* >&2
    exit 1
}

# expect_all RANKS PATTERN: each listed rank exited non-zero with PATTERN in its output.
expect_all() {
    local r
    for r in $1; do
        if wait "${mh_pids[$r]}"; then
            echo "rank $r exited 0 after the failure" >&2
            fail=1
        elif ! grep -q "$2" "$OUT/rank.$r"; then
            echo "rank $r's message does not match '$2':" >&2
            cat "$OUT/rank.$r" >&2
            fail=1
        else
            echo "rank $r: $(grep -m1 "$2" "$OUT/rank.$r")"
        fi
    done
}

start_loop 3
bed_cut 1
expect_all "0 1 2 3" "timed out after 3 s: .*host 1 (ranks 2, 3 at $(bed_addr 1))"
bed_down

start_loop 60
kill -9 "${mh_pids[2]}"
wait "${mh_pids[2]}" 2>/dev/null
# The kill may land before the loop (a start-up barrier on a slow, sanitized build): any collective.
expect_all "0 1 3" "rank 2 (pid ${mh_pids[2]}) exited during \(all_reduce\|barrier\) #"
bed_down
[ "$(mh_leftovers)" -eq 0 ] || { echo "segments left in /dev/shm" >&2; fail=1; }
exit $fail
