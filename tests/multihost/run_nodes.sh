#!/usr/bin/env bash
# A per-node launch across two network namespaces of the multi-host test bed (testbed.sh): host i
# is 10.77.0.(i+1), node 0's launcher serves the agents' store there. The cases are those of
# tests/cli_run_nodes.sh (tests/multihost/launch_cases.sh), now over a real link between two
# network stacks. Needs root (CI is root); otherwise it says so and exits 77, which ctest reports
# as skipped, never as passed.
# usage: run_nodes.sh DDPC_BIN SOURCE_DIR
set -u
ddpc=$1
here=$(dirname "${BASH_SOURCE[0]}")
if [ "$(id -u)" -ne 0 ]; then
    echo "run_nodes.sh: the multi-host test bed needs root (network namespaces); not run" >&2
    exit 77
fi
. "$here/../lib/check.sh"
. "$here/testbed.sh"
. "$here/launch_cases.sh"
trap 'bed_down; rm -rf "$tmp"' EXIT
bed_up 2 || exit 1

on_host() {
    local i=$1
    shift
    bed_exec "$i" "$@"
}
host_addr() { bed_addr "$1"; }
# Each namespace has its own ports, all free.
master_port() { echo $((20000 + RANDOM % 20000)); }

case_env
case_worker_killed
case_launcher_killed 1
case_launcher_killed 0
case_restart
case_exit_code
case_interrupt
case_rendezvous
summary
