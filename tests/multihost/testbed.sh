#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A multi-host test bed on one machine: N network namespaces ("hosts") joined by veth pairs to a
# bridge that lives in a namespace of its own, so nothing of the machine's own network changes.
# Host i is namespace ${bed}-h$i with interface eth0 at 10.77.0.$((i+1))/24 and lo up; the bridge
# is br0 in ${bed}-br, with one veth end v$i per host. Only these addresses, which the bed
# creates, are used. The file system (and /dev/shm) stays shared: only the network is separate.
#
# Sourced by tests and benches (needs root and iproute2):
#   . tests/multihost/testbed.sh
#   bed_up 2            # sets $bed (name prefix) and creates hosts 0..1; bed_down on exit
#   bed_exec 1 CMD...   # runs CMD on host 1
#   bed_addr 1          # prints 10.77.0.2
#   bed_cut 1           # cuts host 1's link (its veth end on the bridge goes down)
# Run directly: testbed.sh up N | down NAME N | selftest.
set -u

bed=""
bed_hosts=0

bed_addr() { echo "10.77.0.$(($1 + 1))"; }
# A port for a job's store (and the next one, torchrun's agent's): below the kernel's ephemeral
# range (32768 up), from which the ranks' own connections take their local ports, so none of them
# can hold it when the store binds (a conformance run once failed "already in use" at 38760).
bed_port() { echo $((20000 + RANDOM % 12000)); }

bed_exec() {
    local h=$1
    shift
    ip netns exec "${bed}-h$h" "$@"
}

bed_cut() { ip -n "${bed}-br" link set "v$1" down; }

# Namespaces of beds whose creating process is gone (a test killed before its trap ran).
bed_reap_stale() {
    local ns pid
    for ns in $(ip netns list 2>/dev/null | awk '{print $1}' | grep '^ddpcbed[0-9]*-' || true); do
        pid=${ns#ddpcbed}
        pid=${pid%%-*}
        kill -0 "$pid" 2>/dev/null || ip netns delete "$ns" 2>/dev/null || true
    done
}

bed_down() {
    [ -n "$bed" ] || return 0
    local i
    for ((i = 0; i < bed_hosts; i++)); do ip netns delete "${bed}-h$i" 2>/dev/null || true; done
    ip netns delete "${bed}-br" 2>/dev/null || true
    bed=""
}

# bed_up N: creates N hosts; prints why and returns 1 if it cannot (not root, no iproute2).
bed_up() {
    local n=$1 i
    if [ "$(id -u)" -ne 0 ] || ! command -v ip >/dev/null; then
        echo "testbed: network namespaces need root and iproute2 (ip)" >&2
        return 1
    fi
    bed_reap_stale
    # The hosts' addresses are not loopback, so the job's store wants a token (docs/launcher.md):
    # every process of a test shares this one, as every host of a real job would.
    export DDPC_STORE_TOKEN="${DDPC_STORE_TOKEN:-bed-$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')}"
    bed="ddpcbed$$-$RANDOM"
    bed_hosts=$n
    ip netns add "${bed}-br" || return 1
    ip -n "${bed}-br" link add br0 type bridge || return 1
    ip -n "${bed}-br" link set br0 up
    ip -n "${bed}-br" link set lo up
    for ((i = 0; i < n; i++)); do
        ip netns add "${bed}-h$i" || return 1
        ip -n "${bed}-br" link add "v$i" type veth peer name eth0 netns "${bed}-h$i" || return 1
        ip -n "${bed}-br" link set "v$i" master br0
        ip -n "${bed}-br" link set "v$i" up
        ip -n "${bed}-h$i" addr add "$(bed_addr "$i")/24" dev eth0
        ip -n "${bed}-h$i" link set eth0 up
        ip -n "${bed}-h$i" link set lo up
    done
    # The bridge forwards once its ports leave the listening state; wait until host 0 reaches
    # the last host (bounded: 5 s).
    local t
    for ((t = 0; t < 50; t++)); do
        bed_exec 0 ping -c1 -W1 "$(bed_addr $((n - 1)))" >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "testbed: host 0 cannot reach host $((n - 1)) after 5 s" >&2
    return 1
}

if [ "${BASH_SOURCE[0]}" = "$0" ]; then
    case "${1:-}" in
    up)
        bed_up "${2:?usage: testbed.sh up N}" || exit 1
        echo "$bed"
        ;;
    down)
        bed=${2:?usage: testbed.sh down NAME N}
        bed_hosts=${3:?usage: testbed.sh down NAME N}
        bed_down
        ;;
    selftest)
        trap bed_down EXIT
        bed_up 2 || exit 1
        bed_exec 1 ping -c1 -W1 "$(bed_addr 0)" >/dev/null || { echo "no route 1 -> 0" >&2; exit 1; }
        bed_cut 1
        if bed_exec 0 ping -c1 -W1 "$(bed_addr 1)" >/dev/null 2>&1; then
            echo "cut link still passes" >&2
            exit 1
        fi
        echo "testbed ok"
        ;;
    *)
        echo "usage: testbed.sh up N | down NAME N | selftest" >&2
        exit 2
        ;;
    esac
fi
