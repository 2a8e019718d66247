#!/usr/bin/env bash
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

case_env
case_worker_killed
case_launcher_killed 1
case_launcher_killed 0
case_restart
case_exit_code
case_interrupt
case_rendezvous
summary
