#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# An rsh agent for Open MPI's mpirun on the multi-host test bed (testbed.sh): mpirun runs
# `netns_rsh.sh [ssh options] HOST COMMAND...` to start its daemon on HOST; HOST is a bed
# address (10.77.0.(i+1)) or name (h<i>), and the command runs in that host's network namespace
# of bed $DDPC_BED. Each "host" also gets its own UTS namespace named h<i>, since the bed's
# namespaces share the machine's hostname and Open MPI tells nodes apart by their names.
# usage (from mpirun): --mca plm_rsh_agent tests/multihost/netns_rsh.sh, with DDPC_BED exported.
set -u
while [ $# -gt 0 ] && [ "${1#-}" != "$1" ]; do
    case $1 in
    -p | -l | -o | -i) shift 2 ;; # ssh options that take a value
    *) shift ;;
    esac
done
host=${1:?netns_rsh.sh: no host given}
shift
case $host in
10.77.0.*) i=$((${host##*.} - 1)) ;;
h[0-9]*) i=${host#h} ;;
*)
    echo "netns_rsh.sh: '$host' is not a test-bed host (10.77.0.N or hN)" >&2
    exit 255
    ;;
esac
: "${DDPC_BED:?netns_rsh.sh: DDPC_BED (the bed name testbed.sh made) is not set}"
exec ip netns exec "${DDPC_BED}-h$i" unshare --uts sh -c "hostname h$i && exec sh -c \"\$0\"" "$*"
