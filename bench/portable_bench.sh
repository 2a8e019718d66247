#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/portable_bench.sh: the portable default build (hot loops compiled per ISA, chosen at run
# time) against a -march=native build of the same source, on the GPT and CNN training steps.
# Builds both into temporary directories (or takes NATIVE_BIN / PORTABLE_BIN), then runs
# `ddpc bench step` on each model ROUNDS times, alternating the two binaries so drifting load hits
# both alike, and prints the medians and portable/native (higher is better for the portable).
# usage: bench/portable_bench.sh   knobs: ROUNDS=5 STEPS=20 THREADS=1 NATIVE_BIN= PORTABLE_BIN=
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
SRC=$(dirname "$HERE")
PY=${PY:-/usr/bin/python3}
ROUNDS=${ROUNDS:-5}
STEPS=${STEPS:-20}
THREADS=${THREADS:-1}
. "$HERE/lib.sh"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT

build() { # DIR NATIVE(ON|OFF)
    cmake -S "$SRC" -B "$1" -DCMAKE_BUILD_TYPE=Release -DDDPC_NATIVE="$2" >/dev/null
    cmake --build "$1" -j "$(nproc)" --target ddpc >/dev/null
}
native=${NATIVE_BIN:-}
portable=${PORTABLE_BIN:-}
if [[ -z $native ]]; then build "$TMP/native" ON; native=$TMP/native/ddpc; fi
if [[ -z $portable ]]; then build "$TMP/portable" OFF; portable=$TMP/portable/ddpc; fi

echo "CPU: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) cores;" \
    "$("$portable" env | sed -n 's/^ *Kernels ISA: */portable kernels: /p')"
echo "load average at start: $(cut -d' ' -f1-3 /proc/loadavg)"
median() { sort -g | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
echo
echo "| model | threads | native median step ms | portable median step ms | portable speed / native |"
echo "|---|---|---|---|---|"
for m in gpt cnn; do
    : >"$TMP/native.$m"
    : >"$TMP/portable.$m"
    for ((r = 0; r < ROUNDS; r++)); do
        order=(native portable)
        ((r % 2)) && order=(portable native)
        for which in "${order[@]}"; do
            bin=$native
            [[ $which == portable ]] && bin=$portable
            out=$(thread_env "$THREADS" "$bin" bench step "$HERE/configs/$m.yaml" \
                num_threads="$THREADS" bench.steps="$STEPS")
            json median_step_ms <<<"$out" >>"$TMP/$which.$m"
        done
    done
    n=$(median <"$TMP/native.$m")
    p=$(median <"$TMP/portable.$m")
    echo "| $m | $THREADS | $n | $p | $(ratio "$n" "$p") |"
done
echo "load average at end: $(cut -d' ' -f1-3 /proc/loadavg)"
