#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# Runs HERE (no GPU needed): builds everything the lent GPU machine runs and packs it into the
# ignored folder .gpu/, which a device call carries (carry: [".gpu"]) and tests/gpu/run.sh unpacks
# there. .gpu/ stays under about 55 MiB, so that with the tracked tree it fits the 64 MiB a call
# may carry:
#   bin.tar.xz   ddpc, every tests/test_cuda_* executable, gpu_step_profile (bench/), llm.c's
#                train_gpt2cu (CUDA, sm_90)
#   libs.tar.xz  the shared libraries they need that a CUDA + PyTorch Ubuntu image may lack
#                (oneDNN, OpenMP OpenBLAS, gfortran, quadmath, yaml, gomp, ...); not CUDA's or
#                glibc's
#   shards/      llm.c token shards of seeded random GPT-2 ids (2M train, 256K val tokens)
#   MANIFEST     what was packed, from which commits, and which CUDA libraries the device must have
#
# usage: tests/gpu/prepare.sh [--llmc SRC] [--jobs N] [--skip-build]
#   SRC: llm.c's git directory (what the fetch tool returned) or a source tree; default
#        $LLMC_SRC, else /work/.mirror/karpathy+llm.c/repo. llm.c's code is built in
#        build-gpu/llmc/ and never enters the project.
#   --skip-build: pack what build-gpu/ already holds.
set -euo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$root"
llmc_src=${LLMC_SRC:-/work/.mirror/karpathy+llm.c/repo}
jobs=2
build=1
while [ $# -gt 0 ]; do
    case $1 in
    --llmc) llmc_src=$2; shift 2 ;;
    --jobs) jobs=$2; shift 2 ;;
    --skip-build) build=0; shift ;;
    -h | --help) sed -n '2,18p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "prepare.sh: unknown option '$1' (see --help)" >&2; exit 2 ;;
    esac
done
say() { printf 'prepare.sh: %s\n' "$*" >&2; }
die() { say "$*"; exit 1; }

nvcc=${CUDACXX:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
[ -x "$nvcc" ] || die "no nvcc (set CUDACXX or install the CUDA toolkit under /usr/local/cuda)"
bgpu=$root/build-gpu
gpu=$root/.gpu

# 1. ddpc's CUDA build for the device's sm_90 (no MPI, no gloo: the device image has neither).
tests=()
for src in tests/test_cuda_*.c; do
    [ -e "$src" ] && tests+=("$(basename "$src" .c)")
done
if [ "$build" = 1 ]; then
    say "configuring build-gpu/ (CUDA for sm_90)"
    cmake -S . -B "$bgpu" -DCMAKE_BUILD_TYPE=Release -DDDPC_CUDA=ON -DDDPC_MPI=OFF \
        -DDDPC_GLOO=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DCMAKE_CUDA_COMPILER="$nvcc" >/dev/null
    say "building ddpc gpu_step_profile ${tests[*]}"
    cmake --build "$bgpu" -j "$jobs" --target ddpc gpu_step_profile "${tests[@]}"
fi
[ -x "$bgpu/ddpc" ] || die "build-gpu/ddpc is missing: run without --skip-build"

# 2. llm.c's bf16 trainer. CUDA 13 dropped an overload llm.c calls: llmc_cuda13.h restores it;
# its nvml.h use switches itself off (no nvml.h here), so -lnvidia-ml is left out.
llmc=$bgpu/llmc
if [ "$build" = 1 ] && { [ ! -x "$llmc/train_gpt2cu" ] ||
    [ "$llmc/train_gpt2cu" -ot tests/gpu/llmc_cuda13.h ]; }; then
    rm -rf "$llmc"
    mkdir -p "$llmc"
    if [ -f "$llmc_src/HEAD" ] && [ -d "$llmc_src/objects" ]; then
        git --git-dir="$llmc_src" archive HEAD | tar -x -C "$llmc"
        git --git-dir="$llmc_src" rev-parse HEAD >"$llmc/COMMIT"
    elif [ -f "$llmc_src/train_gpt2.cu" ]; then
        cp -R "$llmc_src/." "$llmc/"
        git -C "$llmc_src" rev-parse HEAD >"$llmc/COMMIT" 2>/dev/null ||
            echo unknown >"$llmc/COMMIT"
    else
        die "no llm.c at '$llmc_src': pass --llmc with karpathy/llm.c's git directory or tree"
    fi
    say "building llm.c's train_gpt2cu ($(cat "$llmc/COMMIT"))"
    make -C "$llmc" train_gpt2cu NO_MULTI_GPU=1 NO_USE_MPI=1 USE_CUDNN=0 \
        GPU_COMPUTE_CAPABILITY=90 NVCC="$nvcc" NVCC_LDFLAGS="-lcublas -lcublasLt" \
        NVCC_INCLUDES="-include $root/tests/gpu/llmc_cuda13.h" >"$llmc/build.log" 2>&1 ||
        { tail -20 "$llmc/build.log" >&2; die "llm.c did not build (log: $llmc/build.log)"; }
fi
[ -x "$llmc/train_gpt2cu" ] || die "build-gpu/llmc/train_gpt2cu is missing"

# 3. Stage the binaries, and the libraries ldd finds for them that are neither glibc's nor
# CUDA's (the device brings its own driver, cuBLAS and NCCL; run.sh finds them there).
stage=$bgpu/pack
# (bin/, lib/ and lib-use/ are what run.sh unpacks: never carried.)
rm -rf "$stage" "$gpu/bin.tar.xz" "$gpu/libs.tar.xz" "$gpu/MANIFEST" "$gpu/bin" "$gpu/lib" \
    "$gpu/lib-use"
mkdir -p "$stage/bin" "$stage/lib" "$gpu/shards"
[ -x "$bgpu/gpu_step_profile" ] || die "build-gpu/gpu_step_profile is missing: run without --skip-build"
cp "$bgpu/ddpc" "$bgpu/gpu_step_profile" "$llmc/train_gpt2cu" "$stage/bin/"
for t in "${tests[@]}"; do
    [ -x "$bgpu/$t" ] || die "build-gpu/$t is missing: run without --skip-build"
    cp "$bgpu/$t" "$stage/bin/"
done
strip --strip-unneeded "$stage"/bin/*
cuda_needed=""
for exe in "$stage"/bin/*; do
    while read -r name _ path _; do
        case $name in
        linux-vdso* | ld-linux* | libc.so* | libm.so* | libpthread.so* | libdl.so* | librt.so* | \
            libresolv.so* | libutil.so*) ;;
        libcuda.so* | libcudart* | libcublas* | libnccl* | libnvidia* | libcudnn*)
            cuda_needed="$cuda_needed $name" ;;
        *)
            [ -f "$path" ] || die "ldd finds no '$name' for $(basename "$exe")"
            [ -e "$stage/lib/$name" ] || cp -L "$path" "$stage/lib/$name" ;;
        esac
    done < <(ldd "$exe" | awk '/=>/ {print $1, "=>", $3, "x"}')
done
# (libcuda and libnccl, which `ddpc env` opens with dlopen, are the device's own too.)
cuda_needed=$(printf '%s\n' $cuda_needed | sort -u | tr '\n' ' ')

# 4. Token shards: seeded random GPT-2 ids; the same bytes every time, so kept when present.
if [ ! -s "$gpu/shards/random_train_000000.bin" ] ||
    [ ! -s "$gpu/shards/random_val_000000.bin" ]; then
    say "writing token shards"
    python3 tests/lib/token_shards.py --random "$gpu/shards" --tokens $((2 * 1024 * 1024)) \
        --val-tokens $((256 * 1024)) --vocab 50257 --seed 1337
fi

# 5. Pack.
say "packing .gpu/ (xz)"
XZ_OPT="-6 -T$jobs" tar -cJf "$gpu/bin.tar.xz" -C "$stage" bin
# The libraries change only with the system's packages: their archive is kept in build-gpu/ and
# remade only when their names or sizes change (xz takes minutes on 2 busy cores).
key=$(cd "$stage/lib" && ls -l --time-style=+ . | awk 'NR > 1 {print $5, $6}')
if [ -f "$bgpu/libs.tar.xz" ] && [ "$key" = "$(cat "$bgpu/libs.key" 2>/dev/null)" ]; then
    cp "$bgpu/libs.tar.xz" "$gpu/libs.tar.xz"
else
    XZ_OPT="-6 -T$jobs" tar -cJf "$bgpu/libs.tar.xz" -C "$stage" lib
    printf '%s\n' "$key" >"$bgpu/libs.key"
    cp "$bgpu/libs.tar.xz" "$gpu/libs.tar.xz"
fi
{
    echo "made: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname)"
    changed=$(git diff --quiet HEAD -- src include cmake tests || echo ' (with local changes)')
    echo "ddpc commit: $(git rev-parse HEAD)$changed"
    echo "llm.c commit: $(cat "$llmc/COMMIT")"
    echo "nvcc: $("$nvcc" --version | tail -1)"
    echo "cuda libraries the device must provide: $cuda_needed"
    echo "bin: $(cd "$stage/bin" && ls | tr '\n' ' ')"
    echo "lib: $(cd "$stage/lib" && ls | tr '\n' ' ')"
    (cd "$gpu" && ls -l bin.tar.xz libs.tar.xz shards/*)
} >"$gpu/MANIFEST"
mib=$(( $(du -sb "$gpu" | cut -f1) / 1048576 ))
cat "$gpu/MANIFEST" >&2
[ "$mib" -le 55 ] || die ".gpu/ is $mib MiB, over the 55 MiB budget: drop something"
say ".gpu/ is $mib MiB: run the device call with carry [\".gpu\"] (tests/gpu/README.md)"
