#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
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
master_port() { bed_port; }

# Host 1's link cut (only possible on the bed): node 0 hears nothing from node 1 and names it
# after --agent-timeout; node 1's requests to node 0's store get no answer, and within the
# store's 30 s I/O limit it names node 0's store and stops too. Nothing is left.
case_link_cut() {
    port=$(master_port)
    local tag="65.$$$RANDOM"
    mkdir -p "$tmp/cut"
    local w="echo \$\$ >$tmp/cut/pid.\$RANK; exec sleep $tag"
    launch cut 0 --nproc-per-node 2 --agent-timeout 3 -- sh -c "$w"
    launch cut 1 --nproc-per-node 2 --agent-timeout 3 -- sh -c "$w"
    wait_files "$tmp/cut/pid.*" 30 4 || fail "link cut: workers did not start"
    bed_cut 1
    wait_none_left "^sleep $tag" 60
    local gone=$?
    finish
    [ $gone -eq 0 ] && [ $rc0 -eq 1 ] && [ $rc1 -eq 1 ] &&
        grep -q "node 1 (host $(host_name), $(host_addr 1)) has not been heard from for [0-9]* s" \
            "$tmp/cut.0.err" &&
        grep -q "the store of node 0 (host $(host_name), $(host_addr 0)) at $(host_addr 0):$port \
stopped answering" "$tmp/cut.1.err" &&
        ok "host 1's link cut: host 0 names node 1, host 1 names node 0's store, all gone" ||
        fail "link cut (gone=$gone, exit $rc0/$rc1)" "$tmp/cut.0.err" "$tmp/cut.1.err"
}

case_env
case_worker_killed
case_launcher_killed 1
case_launcher_killed 0
case_restart
case_exit_code
case_interrupt
case_rendezvous
case_link_cut
summary
