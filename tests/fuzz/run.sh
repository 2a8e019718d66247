#!/usr/bin/env bash
# Builds every tests/fuzz/fuzz_*.c harness with clang's libFuzzer (+ ASan/UBSan) against the
# library sources and runs each for SECONDS (default 30). A crash leaves its input in build-fuzz/.
# usage: tests/fuzz/run.sh [SECONDS]
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
out=build-fuzz
mkdir -p "$out/obj"
flags=(-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp -fsanitize=fuzzer-no-link,address,undefined
       -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu/openblas-openmp)
objs=()
for src in $(find src -name '*.c' -not -path 'src/cli/*'); do
    obj="$out/obj/$(echo "$src" | tr / _).o"
    clang "${flags[@]}" -c "$src" -o "$obj"
    objs+=("$obj")
done
libs=(/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -lyaml -lz -lm)
for harness in tests/fuzz/fuzz_*.c; do
    name=$(basename "$harness" .c)
    clang "${flags[@]}" -fsanitize=fuzzer "$harness" "${objs[@]}" "${libs[@]}" -o "$out/$name"
    mkdir -p "$out/corpus-$name"
    echo "== $name for ${seconds}s"
    (cd "$out" && "./$name" -max_total_time="$seconds" -print_final_stats=0 "corpus-$name" 2>&1 | tail -n 2)
done
