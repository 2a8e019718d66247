#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A per-node launch with both "hosts" on this machine: two `ddpc run --nnodes 2 --node-rank R`
# launchers meeting at 127.0.0.1 (no root needed). The same cases run across network namespaces
# in tests/multihost/run_nodes.sh; they are in tests/multihost/launch_cases.sh.
# usage: cli_run_nodes.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
. "$(dirname "${BASH_SOURCE[0]}")/lib/check.sh"
. "$(dirname "${BASH_SOURCE[0]}")/multihost/launch_cases.sh"

on_host() {
    shift
    "$@"
}
host_addr() { echo 127.0.0.1; }
# A port the kernel picks: free now, and the launchers bind it with SO_REUSEADDR.
master_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# Options of a per-node launch, checked before anything starts (exit 2, one line).
expect_usage() {
    local name=$1 want=$2
    shift 2
    "$ddpc" run "$@" >"$tmp/u.out" 2>"$tmp/u.err"
    local rc=$?
    [ $rc -eq 2 ] && grep -qF -- "$want" "$tmp/u.err" && ok "$name" || fail "$name (exit $rc)" "$tmp/u.err"
}
expect_usage "per-node launch needs --master-port" "ddpc run: --nnodes 2 with --master-addr \
starts one launcher per host: give --master-port P too, the same on every host" \
    --nnodes 2 --master-addr 127.0.0.1 -- true
expect_usage "--agent-timeout above --monitor-interval" "--agent-timeout 2 s must be longer than \
--monitor-interval 5 s" --nnodes 2 --master-addr 127.0.0.1 --master-port 1 --agent-timeout 2 \
    --monitor-interval 5 -- true
expect_usage "--agent-timeout at least 1 s" "--agent-timeout: '0.5' is not a number of seconds in \
[1, 86400]" --agent-timeout 0.5 -- true
expect_usage "--node-rank below --nnodes" "--node-rank 2 must be below --nnodes 2" --nnodes 2 \
    --node-rank 2 --master-addr 127.0.0.1 --master-port 1 -- true

# Node 0 cannot serve the store: the port is taken (here by a plain listening socket).
busy=$(master_port)
python3 -c 'import socket, sys, time
s = socket.socket(); s.bind(("127.0.0.1", int(sys.argv[1]))); s.listen()
open(sys.argv[2], "w").close(); time.sleep(30)' "$busy" "$tmp/holding" &
holder=$!
for _ in $(seq 200); do [ -e "$tmp/holding" ] && break; sleep 0.05; done
"$ddpc" run --nnodes 2 --master-addr 127.0.0.1 --master-port "$busy" -- true >"$tmp/b.out" 2>"$tmp/b.err"
rc=$?
kill $holder
wait $holder 2>/dev/null
[ $rc -eq 1 ] && grep -q "^ddpc run: node 0 cannot serve the rendezvous at 127.0.0.1:$busy: " \
    "$tmp/b.err" && ok "node 0's port in use is named (exit 1)" ||
    fail "node 0's port in use (exit $rc)" "$tmp/b.err"

# Node 1 started without node 0: it names the rendezvous it could not reach.
port=$(master_port)
"$ddpc" run --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --rdzv-timeout 1 -- true >"$tmp/n0.out" 2>"$tmp/n0.err"
rc=$?
[ $rc -eq 1 ] && grep -q "^ddpc run: node 1 cannot reach node 0's rendezvous at 127.0.0.1:$port \
within 1 s (--rdzv-timeout): " "$tmp/n0.err" && ok "node 0 missing: node 1 names its rendezvous" ||
    fail "node 0 missing (exit $rc)" "$tmp/n0.err"

# A launcher that cannot go on (here: node 1 cannot make its attempt_1 log directory, since its
# worker left a file of that name before failing) tells the others at once: node 0 stops its
# restarted workers naming node 1's launcher and the cause, without waiting the agent timeout.
port=$(master_port)
mkdir -p "$tmp/lf0" "$tmp/lf1"
w='if [ "$GROUP_RANK" = 1 ] && [ "$TORCHELASTIC_RESTART_COUNT" = 0 ]; then'
w+=" touch $tmp/lf1/attempt_1; exit 4; fi; exec sleep 66.$$"
"$ddpc" run --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
    --max-restarts 2 --agent-timeout 60 --log-dir "$tmp/lf0" -- sh -c "$w" 2>"$tmp/lf.0.err" &
l0=$!
"$ddpc" run --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --max-restarts 2 --agent-timeout 60 --log-dir "$tmp/lf1" -- sh -c "$w" 2>"$tmp/lf.1.err" &
l1=$!
t0=$(now)
wait $l0
rc0=$?
wait $l1
rc1=$?
took=$(elapsed "$t0")
[ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] && ! pgrep -f "^sleep 66\.$$" >/dev/null &&
    awk -v t="$took" 'BEGIN { exit !(t < 30) }' &&
    grep -q "the launcher of node 1 (host $(hostname), 127.0.0.1) failed: " "$tmp/lf.0.err" &&
    grep -q "attempt_1" "$tmp/lf.0.err" &&
    ok "a launcher that fails on host 1 stops host 0 at once, naming it (${took}s)" ||
    fail "launcher failure across hosts (exit $rc0/$rc1, ${took}s)" "$tmp/lf.0.err" "$tmp/lf.1.err"

# A failure on node 0 that only echoes node 1's (a worker whose peer died fails too) is reported
# with the job's first failure, node 1's, so both hosts name the same cause. Node 0's worker fails
# once node 1's launcher has reported (and so published) its own; node 0 checks the store only
# every 5 s (first 5 s after its workers start) and its own workers' exits before the store in
# each check, so it sees its own worker fail first.
port=$(master_port)
w="if [ \$RANK = 2 ]; then sleep 1; exit 5; fi; if [ \$RANK = 0 ]; then"
w+=" until grep -q 'failed with exit code 5' $tmp/fe.1.err; do sleep 0.01; done; exit 1; fi;"
w+=" exec sleep 67.$$"
"$ddpc" run --nnodes 2 --node-rank 0 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 2 --monitor-interval 5 -- sh -c "$w" 2>"$tmp/fe.0.err" &
l0=$!
"$ddpc" run --nnodes 2 --node-rank 1 --master-addr 127.0.0.1 --master-port "$port" \
    --nproc-per-node 2 -- sh -c "$w" 2>"$tmp/fe.1.err" &
l1=$!
wait $l0
rc0=$?
wait $l1
rc1=$?
[ $rc0 -eq 1 ] && [ $rc1 -eq 5 ] &&
    grep -q "^ddpc run: rank 0 (local rank 0, pid [0-9]*) on node 0 .* failed with exit code 1" \
        "$tmp/fe.0.err" &&
    grep -q "^ddpc run: the job's first failure was on another node: rank 2 (local rank 0, pid \
[0-9]*) on node 1 (host $(hostname), 127.0.0.1) failed with exit code 5" "$tmp/fe.0.err" &&
    ok "a failure echoing another node's names the job's first failure too" ||
    fail "first failure elsewhere (exit $rc0/$rc1)" "$tmp/fe.0.err" "$tmp/fe.1.err"

case_env
case_worker_killed
case_launcher_killed 1
case_launcher_killed 0
case_restart
case_exit_code
case_interrupt
case_rendezvous
summary
