#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Builds every tests/fuzz/fuzz_*.c harness with clang's libFuzzer (+ ASan/UBSan) against the
# library sources and runs each for SECONDS (default 30). Exits non-zero when a harness does not
# build or finds a crash, after running all of them; a crash leaves its input in build-fuzz/
# (crash-*, leak-*, timeout-*), which `build-fuzz/fuzz_NAME FILE` replays.
# Objects are rebuilt only when their source or a header they include changed; JOBS compile at
# once (default: nproc).
# usage: tests/fuzz/run.sh [SECONDS [NAME...]]   (NAME: fuzz_store, ...; default every harness)
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds=${1:-30}
shift $(($# > 0 ? 1 : 0))
jobs=${JOBS:-$(nproc)}
out=build-fuzz
mkdir -p "$out/obj"
flags=(-g -O1 -std=c11 -D_POSIX_C_SOURCE=200809L -fopenmp
       -fsanitize=fuzzer-no-link,address,undefined -Iinclude -Isrc -I/usr/include/x86_64-linux-gnu/openblas-openmp)
# clang's notes that an `omp simd` loop was not vectorised are no use here.
quiet=(-Wno-pass-failed)
# Objects built with other flags are stale.
if [ "$(cat "$out/flags" 2>/dev/null)" != "${flags[*]}" ]; then
    rm -f "$out"/obj/*
    echo "${flags[*]}" > "$out/flags"
fi

# True when obj is missing or older than its source or any header its .d file names.
stale() {
    local obj=$1 dep=${1%.o}.d f
    [ -f "$obj" ] && [ -f "$dep" ] || return 0
    for f in $(sed -e 's/^[^:]*://' -e 's/\\$//' "$dep"); do
        [ "$f" -nt "$obj" ] && return 0
    done
    return 1
}

objs=()
running=0
broken=0
for src in $(find src -name '*.c' -not -path 'src/cli/*' | sort); do
    obj="$out/obj/$(echo "$src" | tr / _).o"
    objs+=("$obj")
    stale "$obj" || continue
    if [ "$running" -ge "$jobs" ]; then
        wait -n || broken=1
        running=$((running - 1))
    fi
    clang "${flags[@]}" "${quiet[@]}" -MMD -MF "${obj%.o}.d" -c "$src" -o "$obj" &
    running=$((running + 1))
done
# `wait` alone forgets a failed compile's status: wait for each.
while [ "$running" -gt 0 ]; do
    wait -n || broken=1
    running=$((running - 1))
done
if [ "$broken" -ne 0 ]; then
    echo "fuzz: the library does not build with clang (messages above)" >&2
    exit 1
fi

libs=(/usr/lib/x86_64-linux-gnu/openblas-openmp/libopenblas.so -ldnnl -lyaml -lpng16 -ljpeg -lz -lcrypto -lpthread
      -lrt -ldl -lm)
failed=()
# UBSan's findings stop the run (and count as crashes) instead of scrolling past.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
harnesses=(tests/fuzz/fuzz_*.c)
if [ $# -gt 0 ]; then
    harnesses=()
    for name in "$@"; do
        harnesses+=("tests/fuzz/$name.c")
    done
fi
for harness in "${harnesses[@]}"; do
    name=$(basename "$harness" .c)
    if ! clang "${flags[@]}" -fsanitize=fuzzer "$harness" "${objs[@]}" "${libs[@]}" \
            -o "$out/$name"; then
        failed+=("$name (does not build)")
        continue
    fi
    mkdir -p "$out/corpus-$name"
    # tests/fuzz/seeds/NAME: a few well-formed inputs, so a short run starts past the framing.
    seeds=()
    [ -d "tests/fuzz/seeds/$name" ] && seeds=("../tests/fuzz/seeds/$name")
    echo "== $name for ${seconds}s"
    # -timeout: an input that runs this long is a hang, reported like a crash.
    if ! (cd "$out" && "./$name" -max_total_time="$seconds" -timeout=25 -print_final_stats=0 \
              "corpus-$name" "${seeds[@]}" > "$name.log" 2>&1); then
        tail -n 40 "$out/$name.log"
        failed+=("$name (see $out/$name.log)")
    else
        tail -n 1 "$out/$name.log"
    fi
done
if [ "${#failed[@]}" -gt 0 ]; then
    echo "fuzz: FAILED: ${failed[*]}" >&2
    exit 1
fi
echo "fuzz: every harness ran ${seconds}s without a crash"
