#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# The collective conformance suite on the gloo backend across network-namespace hosts, ranks
# started platform-style: 2 hosts x 2 ranks (every size), then 2 x 1, 1 x 2 and 3 x 1 (--quick).
# Every result is compared bitwise with the rank-order reduction the shm backend defines. Then
# gloo_paths checks both large all_reduce paths (per-block pipeline, direct) on 2 x 2.
#   gloo_conformance.sh DIST_CONFORMANCE_BIN GLOO_PATHS_BIN
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
BIN=${1:?usage: gloo_conformance.sh DIST_CONFORMANCE_BIN GLOO_PATHS_BIN}
PATHS=${2:?usage: gloo_conformance.sh DIST_CONFORMANCE_BIN GLOO_PATHS_BIN}
. "$HERE/testbed.sh"
. "$HERE/ranks.sh"
mh_require_root gloo_conformance
OUT=$(mktemp -d)
trap 'bed_down; rm -rf "$OUT"' EXIT
fail=0
for shape in "2 2" "2 1" "1 2" "3 1"; do
    set -- $shape
    quick=--quick
    [ "$shape" = "2 2" ] && quick=
    bed_up "$1" || exit 1
    mh_start "$1" "$2" "$OUT" "$BIN" --backend gloo $quick
    if mh_wait && grep -q "all passed" "$OUT/rank.0"; then
        echo "gloo conformance ${1} hosts x ${2} ranks: ok"
    else
        echo "gloo conformance ${1} hosts x ${2} ranks: FAILED" >&2
        tail -n 20 "$OUT"/rank.* >&2
        fail=1
    fi
    [ "$(mh_leftovers)" -eq 0 ] || { echo "segments left in /dev/shm" >&2; fail=1; }
    bed_down
done
bed_up 2 || exit 1
mh_start 2 2 "$OUT" "$PATHS"
if mh_wait && grep -q "all passed" "$OUT/rank.0"; then
    cat "$OUT/rank.0"
else
    echo "gloo paths: FAILED" >&2
    tail -n 20 "$OUT"/rank.* >&2
    fail=1
fi
exit $fail
