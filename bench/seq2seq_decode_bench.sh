#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Times ddpc_model_translate's incremental decoding (key/value cache) against full-prefix
# recomputation on one random seq2seq model, greedy and beam 4 (bench/seq2seq_decode_bench.c).
# usage: bench/seq2seq_decode_bench.sh [BUILD_DIR (default build)]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
build=${1:-$here/../build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The libraries libddpc.a needs, as CMake linked the ddpc binary.
libs=$(tr ' ' '\n' <"$build/CMakeFiles/ddpc.dir/link.txt" | grep -E '^-l|\.so$|\.a$' | grep -v libddpc | sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
${CC:-cc} -O2 -std=c11 -fopenmp -I "$here/../include" -I "$here/../src" "$here/seq2seq_decode_bench.c" \
    "$build/libddpc.a" $libs -lstdc++ -o "$tmp/bench"
OMP_NUM_THREADS=1 "$tmp/bench"
